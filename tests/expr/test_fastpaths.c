/* test_fastpaths.c — the evaluator's specialized paths give what the general
 * ones give: the same value, the same error message, the same cost.
 *
 * Each specialized form is compared with a spelling of the same expression
 * that the compiler does not specialize (a variable instead of a constant,
 * `== true` around the body), over subjects that hit every branch: a
 * match, no match, a string of another kind, an error, a cost limit that
 * strikes part-way. Also: that the specialization did happen (the program
 * holds the node), ip()/cidr() values keep their parsed form through
 * constant folding, and lowerAscii/upperAscii eight bytes at a time agree
 * with a byte loop. */
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/value.h"
#include "expr/expr.h"
#include "expr/program.h"
#include "test.h"

typedef struct var {
  const char *name;
  value v;
} var;

typedef struct vars {
  const var *v;
  size_t n;
} vars;

static int vars_lookup(void *user, const char *name, size_t len, value *out) {
  vars *vs = user;
  for (size_t i = 0; i < vs->n; i++)
    if (strlen(vs->v[i].name) == len && memcmp(vs->v[i].name, name, len) == 0) {
      *out = vs->v[i].v;
      return 0;
    }
  return -1;
}

static arena A;

/* A result, rendered so that two can be compared: "bool:true", "error:msg",
 * "string:text" ...; and the cost the evaluation charged. */
typedef struct outcome {
  char text[400];
  uint64_t cost;
  int has_op; /* the program holds the opcode asked about */
} outcome;

static outcome run(const char *src, const var *v, size_t n, uint64_t cost_limit, int op) {
  outcome o;
  memset(&o, 0, sizeof o);
  expr_program *p;
  expr_error err;
  if (expr_compile(src, strlen(src), NULL, &p, &err) != 0) {
    snprintf(o.text, sizeof o.text, "compile error: %.300s", err.message);
    return o;
  }
  for (uint32_t i = 0; i < p->nnodes; i++)
    if (p->nodes[i].op == op) o.has_op = 1;
  vars vs = {v, n};
  expr_activation act = {vars_lookup, &vs};
  eval_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.arena = &A;
  ctx.cost_limit = cost_limit;
  value r = expr_eval(p, &act, &ctx);
  o.cost = ctx.cost;
  switch (r.kind) {
    case V_BOOL:
      snprintf(o.text, sizeof o.text, "bool:%s", r.b ? "true" : "false");
      break;
    case V_ERROR:
      snprintf(o.text, sizeof o.text, "error:%.*s", (int)r.n, r.s);
      break;
    case V_STRING:
      snprintf(o.text, sizeof o.text, "string:%.*s", (int)r.n, r.s);
      break;
    default:
      snprintf(o.text, sizeof o.text, "kind %d", r.kind);
  }
  expr_free(p);
  return o;
}

static value S(const char *s) {
  value v = value_str(s, (uint32_t)strlen(s));
  int ascii = 1;
  for (const char *c = s; *c; c++) ascii &= (unsigned char)*c < 0x80;
  if (ascii) v.flags |= VF_ASCII;
  return v;
}

/* fast and slow agree (value, message, cost); fast has the opcode. */
static void same(const char *fast, const char *slow, const var *v, size_t n, uint64_t limit,
                 int op) {
  outcome f = run(fast, v, n, limit, op), s = run(slow, v, n, limit, op);
  CHECK_MSG(f.has_op, "%s is not specialized", fast);
  CHECK_MSG(!s.has_op, "%s is specialized", slow);
  CHECK_MSG(strcmp(f.text, s.text) == 0, "%s gives %s, %s gives %s", fast, f.text, slow, s.text);
  CHECK_MSG(f.cost == s.cost, "%s costs %llu, %s costs %llu", fast, (unsigned long long)f.cost,
            slow, (unsigned long long)s.cost);
}

static void test_exists_over_constant_strings(void) {
  static const char *const preds[] = {"startsWith", "endsWith", "contains"};
  static const char *const lists[] = {"['/admin', '/billing', '/account/security']",
                                      "['a', '', 'b']", "[]", "['ab', 'b', 'abc']",
                                      "['\xc3\xa9t\xc3\xa9', 'x']"};
  value subjects[] = {
      S("/admin/users"), S("/billing"), S("/x/billing"),         S("/"),       S(""),
      S("abc"),          S("ab"),       S("\xc3\xa9t\xc3\xa9!"), value_int(7), value_null(),
      VALUE_ERR("boom")};
  for (int p = 0; p < 3; p++)
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
      char fast[256], slow[256];
      snprintf(fast, sizeof fast, "%s.exists(p, s.%s(p))", lists[l], preds[p]);
      snprintf(slow, sizeof slow, "%s.exists(p, s.%s(p) == true)", lists[l], preds[p]);
      for (size_t k = 0; k < sizeof subjects / sizeof subjects[0]; k++) {
        var v[] = {{"s", subjects[k]}};
        same(fast, slow, v, 1, 0, OP_EXISTS_LIT);
        same(fast, slow, v, 1, 1000000, OP_EXISTS_LIT);
        /* limits that strike part-way, before and after the match */
        for (uint64_t lim = 1; lim < 12; lim++) same(fast, slow, v, 1, lim, OP_EXISTS_LIT);
      }
      /* an unbound receiver: the same error */
      same(fast, slow, NULL, 0, 0, OP_EXISTS_LIT);
    }
  /* a receiver chosen per element is not specialized, nor a list that is not all strings */
  outcome o = run("['a', 'b'].exists(p, p.startsWith('a'))", NULL, 0, 0, OP_EXISTS_LIT);
  CHECK(!o.has_op && strcmp(o.text, "bool:true") == 0);
  o = run("['a', 1].exists(p, 'abc'.startsWith(p))", NULL, 0, 0, OP_EXISTS_LIT);
  CHECK(!o.has_op && strcmp(o.text, "bool:true") == 0);
  o = run("[1, 'a'].exists(p, 'abc'.startsWith(p))", NULL, 0, 0, OP_EXISTS_LIT);
  CHECK(!o.has_op && strncmp(o.text, "bool:true", 9) == 0);
  /* the receiver may be a field of a variable */
  map_entry e[1] = {{S("path"), S("/billing/x")}};
  var m[] = {{"req", value_map(e, 1)}};
  same("['/billing'].exists(p, req.path.startsWith(p))",
       "['/billing'].exists(p, req.path.startsWith(p) == true)", m, 1, 0, OP_EXISTS_LIT);
  same("['/billing'].exists(p, req.nope.startsWith(p))",
       "['/billing'].exists(p, req.nope.startsWith(p) == true)", m, 1, 0, OP_EXISTS_LIT);
}

static void test_string_predicates_of_a_constant(void) {
  static const char *const preds[] = {"startsWith", "endsWith", "contains"};
  static const char *const args[] = {"'/api/'", "''", "'x'", "'\xc3\xa9'"};
  value subjects[] = {
      S("/api/v1"),      S("/ap"),         S(""), S("x"), S("caf\xc3\xa9"), value_int(3),
      value_double(1.5), VALUE_ERR("boom")};
  for (int p = 0; p < 3; p++)
    for (size_t a = 0; a < sizeof args / sizeof args[0]; a++) {
      char fast[128], slow[128], arg[16];
      snprintf(fast, sizeof fast, "s.%s(%s)", preds[p], args[a]);
      snprintf(slow, sizeof slow, "s.%s(x)", preds[p]);
      memcpy(arg, args[a] + 1, strlen(args[a]) - 2);
      arg[strlen(args[a]) - 2] = '\0';
      for (size_t k = 0; k < sizeof subjects / sizeof subjects[0]; k++) {
        var v[] = {{"s", subjects[k]}, {"x", S(arg)}};
        same(fast, slow, v, 2, 0, OP_STR_PRED);
        same(fast, slow, v, 2, 1, OP_STR_PRED); /* contains charges: over at once */
        same(fast, slow, v, 2, 2, OP_STR_PRED);
      }
    }
}

static void test_contains_ip_of_a_constant_cidr(void) {
  /* the argument is computed at run time (a constant one would fold) */
  const char *ips[] = {"ip(a)",     "ip(b)", "a",        "z",       "ip(six)",
                       "cidr(net)", "n",     "ip(six2)", "ip(bad)", "unbound"};
  const char *nets[] = {"10.0.0.0/8",     "2001:db8:bad::/48", "203.0.113.128/25", "0.0.0.0/0",
                        "10.1.2.3/32",    "::1/128",           "128.0.0.0/1",      "::/0",
                        "2001:db8::/127", "10.1.2.0/31"};
  for (size_t n = 0; n < sizeof nets / sizeof nets[0]; n++)
    for (size_t i = 0; i < sizeof ips / sizeof ips[0]; i++) {
      char fast[160], slow[160];
      snprintf(fast, sizeof fast, "cidr('%s').containsIP(%s)", nets[n], ips[i]);
      snprintf(slow, sizeof slow, "cidr(c).containsIP(%s)", ips[i]);
      var v[] = {{"c", S(nets[n])},    {"a", S("10.1.2.3")},
                 {"b", S("11.0.0.1")}, {"z", S("nope")},
                 {"six", S("::1")},    {"net", S("10.0.0.0/8")},
                 {"n", value_int(7)},  {"six2", S("2001:db8:bad::7")},
                 {"bad", S("1.2.3")}};
      same(fast, slow, v, sizeof v / sizeof v[0], 0, OP_CONTAINS_IP);
    }
  /* an ip() value that went through a variable (parsed at run time) */
  outcome o = run("cidr('10.0.0.0/8').containsIP(ip(a)) && !cidr('10.0.0.0/8').containsIP(ip(b))",
                  (var[]){{"a", S("10.200.0.1")}, {"b", S("100.0.0.1")}}, 2, 0, OP_CONTAINS_IP);
  CHECK_MSG(strcmp(o.text, "bool:true") == 0, "%s", o.text);
}

static void test_ip_values_keep_their_parsed_form_through_folding(void) {
  static const char *const yes[] = {
      "string(ip('2001:DB8::1')) == '2001:db8::1'",
      "ip('10.0.0.1') == ip('10.0.0.1')",
      "ip('::1') == ip('0:0::1')",
      "cidr('10.0.0.1/8').masked() == cidr('10.0.0.0/8')",
      "cidr('10.0.0.0/8').prefixLength() == 8",
      "ip('192.168.0.1').family() == 4 && ip('fe80::1').family() == 6",
      "ip('127.0.0.1').isLoopback() && !ip('10.0.0.1').isLoopback()",
      "cidr('2001:db8::/32').containsCIDR('2001:db8:1::/48')",
      "cidr('10.0.0.0/8').ip() == ip('10.0.0.0')",
      "[cidr('10.0.0.0/8'), cidr('192.168.0.0/16')].exists(c, c.containsIP(ip('192.168.3.4')))",
      "{'net': cidr('10.0.0.0/8')}.net.containsIP(ip('10.0.0.9'))",
      "ip('1.2.3.4') != '1.2.3.4'",
      "string(cidr('2001:db8:0:0::/64')) == '2001:db8::/64'",
  };
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    outcome o = run(yes[i], NULL, 0, 0, OP_CONST);
    CHECK_MSG(strcmp(o.text, "bool:true") == 0, "%s: %s", yes[i], o.text);
  }
}

static void test_matches_literal_sets_agree_with_pcre2(void) {
  const char *pats[] = {
      "sqlmap|nikto|nmap",
      "(?i)^/(\\.env|wp-admin)|\\.(php|aspx?)$|~$",
      "(?i)%2e%2e|%252e|%00",
      "^exact$",
      "(?i)k",
      "",
  };
  value subjects[] = {S("xx nmap yy"),
                      S("Mozilla"),
                      S("/.ENV"),
                      S("/a.AsPx"),
                      S("/a.aspxx"),
                      S("/x/%2E%2e/"),
                      S("exact"),
                      S("exact\n"),
                      S("K"),
                      S("\xe2\x84\xaa"), /* U+212A, the Kelvin sign */
                      S("caf\xc3\xa9 nmap"),
                      S(""),
                      value_int(1),
                      VALUE_ERR("boom")};
  for (size_t p = 0; p < sizeof pats / sizeof pats[0]; p++)
    for (size_t k = 0; k < sizeof subjects / sizeof subjects[0]; k++) {
      /* constant pattern (prepared, maybe a literal set) vs one read from a
       * variable (compiled per call by PCRE2) */
      char fast[160];
      snprintf(fast, sizeof fast, "s.matches(r'%s')", pats[p]);
      var v[] = {{"s", subjects[k]}, {"p", S(pats[p])}};
      outcome f = run(fast, v, 2, 0, OP_CALL), s = run("s.matches(p)", v, 2, 0, OP_CALL);
      CHECK_MSG(strcmp(f.text, s.text) == 0, "%s on subject %zu: %s vs %s", fast, k, f.text,
                s.text);
    }
  /* the Kelvin sign: PCRE2's caseless UTF matching says yes, and so do we */
  var kv[] = {{"s", S("\xe2\x84\xaa")}};
  outcome o = run("s.matches('(?i)k')", kv, 1, 0, OP_CALL);
  CHECK_MSG(strcmp(o.text, "bool:true") == 0, "%s", o.text);
}

/* lowerAscii / upperAscii, word at a time, against a byte loop. */
static void test_case_change_agrees_with_a_byte_loop(void) {
  static const char pieces[][4] = {"a", "Z",        "m",        "@", "[", "`",
                                   "{", "\xc3\xa9", "\xc3\x89", "0", " ", "\xe2\x84\xaa",
                                   "A", "z"};
  uint32_t seed = 99;
  int bad = 0;
  for (int round = 0; round < 400; round++) {
    char s[128];
    size_t n = 0;
    int len = (int)(seed % 40);
    for (int i = 0; i < len; i++) {
      seed = seed * 1103515245u + 12345u;
      const char *pc = pieces[(seed >> 8) % (sizeof pieces / sizeof pieces[0])];
      memcpy(s + n, pc, strlen(pc));
      n += strlen(pc);
    }
    s[n] = '\0';
    seed = seed * 1103515245u + 12345u;
    for (int up = 0; up < 2; up++) {
      char want[128];
      for (size_t i = 0; i <= n; i++) {
        char c = s[i];
        if (!up && c >= 'A' && c <= 'Z') c = (char)(c + 32);
        if (up && c >= 'a' && c <= 'z') c = (char)(c - 32);
        want[i] = c;
      }
      var v[] = {{"s", S(s)}};
      outcome o = run(up ? "s.upperAscii()" : "s.lowerAscii()", v, 1, 0, OP_CALL);
      char expect[160];
      snprintf(expect, sizeof expect, "string:%s", want);
      if (strcmp(o.text, expect) != 0 && bad++ < 3)
        fprintf(stderr, "  %s of '%s': %s\n", up ? "upper" : "lower", s, o.text);
    }
  }
  CHECK_MSG(bad == 0, "%d case changes differ", bad);
}

int main(void) {
  arena_init(&A, NULL, 0, 0);
  TEST_RUN(test_exists_over_constant_strings);
  TEST_RUN(test_string_predicates_of_a_constant);
  TEST_RUN(test_contains_ip_of_a_constant_cidr);
  TEST_RUN(test_ip_values_keep_their_parsed_form_through_folding);
  TEST_RUN(test_matches_literal_sets_agree_with_pcre2);
  TEST_RUN(test_case_change_agrees_with_a_byte_loop);
  arena_free(&A);
  TEST_END();
}
