/* test_index.c — the rule index never changes a first-match result.
 *
 * Random strategies (conditions built from indexable and non-indexable
 * parts over fields that may be missing, of the wrong type, or beside a
 * context key with a dot in it, which `b.c` must not read) and random requests: the first rule that
 * matches — or the first whose evaluation fails, which stops the run — must
 * be the same when only the index's candidates are evaluated as when every
 * rule is. Also: candidates come out ascending, without duplicates; rules
 * that are indexed really are skipped; the large-strategy path (no bitmap)
 * agrees too. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "expr/expr.h"
#include "helpers.h"
#include "policy/internal.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng % n);
}

/* ---- a strategy as YAML text ---- */

static const char *const PATHS[] = {"a", "b.c", "request.action", "d", "e.f", "path", "context.a"};
static const char *const CONSTS[] = {"0",     "1",    "2",    "1.0",  "2.5", "\"x\"",
                                     "\"y\"", "\"\"", "true", "null", "3u",  "-1"};
static const char *const PREFIXES[] = {"\"\"",   "\"/a\"",    "\"/a/b\"",
                                       "\"/b\"", "\"/a/bc\"", "\"x\""};

static void add(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t cap, const char *fmt, ...) {
  size_t n = strlen(buf);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + n, cap - n, fmt, ap);
  va_end(ap);
}

static void part(char *buf, size_t cap) {
  const char *p = PATHS[rnd(sizeof PATHS / sizeof *PATHS)];
  const char *c = CONSTS[rnd(sizeof CONSTS / sizeof *CONSTS)];
  switch (rnd(12)) {
    case 0:
    case 1:
      add(buf, cap, "%s == %s", p, c);
      break;
    case 2:
      add(buf, cap, "%s == %s", c, p);
      break;
    case 3:
      add(buf, cap, "%s in [%s, %s, %s]", p, c, CONSTS[rnd(12)], CONSTS[rnd(12)]);
      break;
    case 4:
      add(buf, cap, "%s in %s", p, rnd(2) ? "names" : "nums");
      break;
    case 5:
    case 6:
      add(buf, cap, "%s.startsWith(%s)", p, PREFIXES[rnd(6)]);
      break;
    case 7:
      add(buf, cap, "%s != %s", p, c);
      break;
    case 8:
      add(buf, cap, "(%s == %s || %s == %s)", p, c, p, CONSTS[rnd(12)]);
      break;
    case 9:
      add(buf, cap, "%s", rnd(2) ? "has(context.a)" : "is_x");
      break;
    case 10:
      add(buf, cap, "%s == one", p);
      break;
    default:
      add(buf, cap, "%s > 0", p);
      break; /* may fail: a type error */
  }
}

static char *gen_strategy(uint32_t nrules) {
  size_t cap = 256 + (size_t)nrules * 256;
  char *buf = malloc(cap);
  buf[0] = 0;
  add(buf, cap,
      "strategy: gen\n"
      "constants:\n"
      "  names: [x, \"y\", \"/a\"]\n"
      "  nums: [0, 1.0, 2]\n"
      "  one: 1\n"
      "let:\n"
      "  is_x: has(context.a) && a == 'x'\n"
      "default: allow\n"
      "rules:\n");
  static const char *const acts[] = {"allow", "block", "ask", "route_eu"};
  for (uint32_t i = 0; i < nrules; i++) {
    add(buf, cap, "  - if: '");
    uint32_t n = 1 + rnd(3);
    for (uint32_t j = 0; j < n; j++) {
      if (j) add(buf, cap, " && ");
      part(buf, cap);
    }
    add(buf, cap, "'\n    action: %s\n", acts[rnd(4)]);
  }
  return buf;
}

/* ---- a request ---- */

typedef struct act_ctx {
  const strategy *s;
  value context, request;
  arena *a;
} act_ctx;

static value rand_scalar(void) {
  switch (rnd(11)) {
    case 0:
      return value_int(rnd(4));
    case 1:
      return value_double(rnd(2) ? 1.0 : 2.5);
    case 2:
      return value_uint(rnd(4));
    case 3:
      return value_str("x", 1);
    case 4:
      return value_str("y", 1);
    case 5:
      return value_str("", 0);
    case 6:
      return value_bool(rnd(2));
    case 7:
      return value_null();
    case 8:
      return value_double(NAN);
    case 9:
      return value_int(-1);
    default: {
      static const char *const paths[] = {"/a", "/a/b", "/a/bc/d", "/b", "/", "x", "/a/b/c"};
      const char *p = paths[rnd(7)];
      return value_str(p, (uint32_t)strlen(p));
    }
  }
}

static value rand_map1(arena *a, const char *key, value v) {
  map_entry *e = arena_alloc(a, sizeof *e);
  e->key = value_str(key, (uint32_t)strlen(key));
  e->val = v;
  return value_map(e, 1);
}

static value gen_context(arena *a) {
  map_entry *e = arena_alloc(a, 8 * sizeof *e);
  uint32_t n = 0;
#define PUT(k, v) (e[n].key = value_str(k, (uint32_t)strlen(k)), e[n].val = (v), n++)
  if (rnd(5)) PUT("a", rand_scalar());
  switch (rnd(5)) {
    case 0:
      break; /* missing */
    case 1:
      PUT("b", rand_scalar());
      break; /* not a map */
    case 2:
      PUT("b", value_map(NULL, 0));
      break; /* map without c */
    default:
      PUT("b", rand_map1(a, "c", rand_scalar()));
  }
  if (rnd(4) == 0) PUT("b.c", rand_scalar()); /* a dotted key: `b.c` is still b's field c */
  if (rnd(2)) PUT("d", rand_scalar());
  if (rnd(3)) PUT("e", rnd(4) ? rand_map1(a, "f", rand_scalar()) : rand_scalar());
  if (rnd(4)) PUT("path", rand_scalar());
#undef PUT
  return value_map(e, n);
}

static int lookup(void *user, const char *name, size_t len, value *out);

static int lookup(void *user, const char *name, size_t len, value *out) {
  act_ctx *c = user;
  if (len == 7 && !memcmp(name, "request", 7)) {
    *out = c->request;
    return 0;
  }
  if (len == 7 && !memcmp(name, "context", 7)) {
    *out = c->context;
    return 0;
  }
  const value *k = value_map_get(&c->s->constants, name, len);
  if (k) {
    *out = *k;
    return 0;
  }
  for (uint32_t i = 0; i < c->s->nlets; i++)
    if (c->s->lets[i].name_len == len && !memcmp(c->s->lets[i].name, name, len)) {
      expr_activation act = {lookup, c};
      eval_ctx ec = {0};
      ec.arena = c->a;
      *out = expr_eval(c->s->lets[i].prog, &act, &ec);
      return 0;
    }
  const value *f = value_map_get(&c->context, name, len);
  if (!f) return -1;
  *out = *f;
  return 0;
}

/* First rule (of ids[0..n)) whose condition is true (>= 0), or -(i+2) when
 * rule i fails first, or -1 when none matches. */
static int first_match(const strategy *s, act_ctx *c, const uint32_t *ids, uint32_t n) {
  expr_activation act = {lookup, c};
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = ids ? ids[k] : k;
    eval_ctx ec = {0};
    ec.arena = c->a;
    value v = expr_eval(s->rules[i].cond, &act, &ec);
    if (v.kind == V_BOOL) {
      if (v.b) return (int)i;
      continue;
    }
    return -(int)i - 2;
  }
  return -1;
}

static int run_strategy(uint32_t nrules, uint32_t nrequests, uint32_t min_rules,
                        uint64_t *skipped) {
  char *text = gen_strategy(nrules);
  policy_diags d;
  policy_bundle *b = load_text_min(text, min_rules, &d);
  CHECK_MSG(b != NULL, "generated strategy failed to load");
  if (!b) {
    dump_diags(&d);
    fputs(text, stderr);
    free(text);
    policy_diags_free(&d);
    return 1;
  }
  const strategy *s = &b->strategies[0];
  uint32_t *out = malloc((nrules + 1) * sizeof *out);
  arena a;
  arena_init(&a, NULL, 0, 0);
  int bad = 0;
  for (uint32_t r = 0; r < nrequests && !bad; r++) {
    arena_reset(&a);
    act_ctx c = {s, gen_context(&a), value_null(), &a};
    static const char *const points[] = {"gen", "x", "y"};
    const char *pt = points[rnd(3)];
    c.request = rand_map1(&a, "action", value_str(pt, (uint32_t)strlen(pt)));
    expr_activation act = {lookup, &c};
    uint32_t n = rule_index_candidates(s->index, s, &act, out);
    int sorted = n <= nrules;
    for (uint32_t i = 1; sorted && i < n; i++)
      if (out[i] <= out[i - 1]) sorted = 0;
    CHECK_MSG(sorted, "candidates not ascending/unique");
    int want = first_match(s, &c, NULL, nrules);
    int got = first_match(s, &c, out, n);
    *skipped += nrules - n;
    if (want != got) {
      json_buf jb;
      json_buf_init(&jb, NULL);
      json_write(&jb, &c.context, 1);
      CHECK_MSG(want == got, "index %d vs scan %d for context %.*s", got, want, (int)jb.len,
                jb.data);
      json_buf_free(&jb);
      fputs(text, stderr);
      bad = 1;
    }
  }
  arena_free(&a);
  free(out);
  free(text);
  policy_bundle_free(b);
  policy_diags_free(&d);
  return bad;
}

static void test_random_strategies(void) {
  uint64_t skipped = 0;
  /* every indexable rule indexed, then the default threshold */
  for (int i = 0; i < 300; i++)
    if (run_strategy(1 + rnd(40), 200, i % 2 ? 1 : 0, &skipped)) break;
  /* the index must actually skip work, or this test proves nothing */
  CHECK_MSG(skipped > 100000, "index skipped only %llu rule evaluations",
            (unsigned long long)skipped);
}

static void test_large_strategy(void) {
  uint64_t skipped = 0;
  run_strategy(8300, 40, 0, &skipped); /* above the bitmap limit: append + sort */
  CHECK(skipped > 0);
}

/* Hand-written cases: which rules are filed, and what a request gets. */
static void test_known_candidates(void) {
  const char *text =
      "strategy: t\n"
      "default: allow\n"
      "constants: {scanners: [sqlmap, nikto]}\n"
      "let: {ua: agent}\n"
      "rules:\n"
      "  - if: path == '/login'\n" /* 0 */
      "    action: block\n"
      "  - if: path.startsWith('/api')\n" /* 1 */
      "    action: block\n"
      "  - if: ua in scanners\n" /* 2: a let: not indexed */
      "    action: block\n"
      "  - if: agent in scanners && path == '/x'\n" /* 3: filed on path (more rules) */
      "    action: block\n"
      "  - if: path.startsWith('/api/v1') && size(path) > 3\n" /* 4 */
      "    action: block\n"
      "  - if: path in ['/a', '/b', '/login']\n" /* 5 */
      "    action: block\n"
      "  - if: agent == 'curl'\n" /* 6: its own path */
      "    action: block\n"
      "  - if: size(path) > 100\n" /* 7: not indexable */
      "    action: block\n";
  policy_diags d;
  /* by default no field here has rules enough to be worth a lookup */
  policy_bundle *b = load_text(text, &d);
  CHECK(b != NULL && b->strategies[0].index == NULL);
  policy_bundle_free(b);
  policy_diags_free(&d);
  /* from 5: `path` (5 rules) is, `agent` (1) is not */
  b = load_text_min(text, 5, &d);
  CHECK(b != NULL);
  uint32_t indexed, paths;
  if (b) {
    rule_index_stats(b->strategies[0].index, &indexed, &paths);
    CHECK(indexed == 5 && paths == 1);
  }
  policy_bundle_free(b);
  policy_diags_free(&d);
  b = load_text_min(text, 1, &d);
  CHECK(b != NULL);
  if (!b) {
    dump_diags(&d);
    return;
  }
  const strategy *s = &b->strategies[0];
  rule_index_stats(s->index, &indexed, &paths);
  CHECK(indexed == 6);
  CHECK(paths == 2);
  arena a;
  arena_init(&a, NULL, 0, 0);
  struct {
    const char *json;
    const char *want;
  } cases[] = {
      {"{\"path\": \"/login\", \"agent\": \"x\"}", "0 2 5 7"},
      {"{\"path\": \"/api/v1/users\", \"agent\": \"curl\"}", "1 2 4 6 7"},
      {"{\"path\": \"/api\", \"agent\": 1}", "1 2 7"},
      {"{\"path\": \"/x\", \"agent\": \"nikto\"}", "2 3 7"},
      {"{\"path\": 42, \"agent\": \"a\"}", "1 2 4 7"}, /* not a string: prefix rules stay */
      {"{\"agent\": \"curl\"}", "0 1 2 3 4 5 6 7"},    /* no path: every path rule stays */
      {"{\"path\": \"/b\"}", "2 5 6 7"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    arena_reset(&a);
    json_error je;
    value ctx;
    CHECK(json_parse(&a, cases[i].json, strlen(cases[i].json), NULL, &ctx, &je) == 0);
    act_ctx c = {s, ctx, rand_map1(&a, "action", value_str("t", 1)), &a};
    expr_activation act = {lookup, &c};
    uint32_t out[16];
    uint32_t n = rule_index_candidates(s->index, s, &act, out);
    char got[64] = "";
    for (uint32_t k = 0; k < n; k++) add(got, sizeof got, k ? " %u" : "%u", out[k]);
    CHECK_MSG(!strcmp(got, cases[i].want), "%s: got [%s], want [%s]", cases[i].json, got,
              cases[i].want);
  }
  arena_free(&a);
  policy_bundle_free(b);
  policy_diags_free(&d);
}

int main(void) {
  TEST_RUN(test_known_candidates);
  TEST_RUN(test_random_strategies);
  TEST_RUN(test_large_strategy);
  TEST_END();
}
