/* test_image.c — a program read back from its image is the program the
 * compiler made, and an image that is not one is refused without harm.
 *
 * - Round trip: expressions using every opcode and every kind of constant,
 *   and every expression of the CEL conformance suite, are compiled (with
 *   the engine's options and with CEL's defaults), written, read back and
 *   evaluated both ways over the same variables: the results, error
 *   messages and costs must be the same, and writing the program read back
 *   must give the very same bytes; read with the memory expr_image_check
 *   measured, it takes one piece of memory.
 * - Damage: every truncation of a rich image is refused; every single-byte
 *   change, and thousands of random multi-byte ones, either is refused or
 *   gives a program that evaluates without reading outside its memory
 *   (this test runs under AddressSanitizer in `make test`).
 * - Regex codes kept beside an image (expr_image_write_codes): a program
 *   given its own gives the same results at the same cost; the code given
 *   is the one that runs, unless another PCRE2 made it; codes that do not
 *   fit the program are refused.
 * - The fingerprint is 32 hex digits and the same on every call. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "expr/expr.h"
#include "expr/image.h"
#include "expr/program.h"
#include "test.h"

/* variables every expression below may read */
static int lookup(void *user, const char *name, size_t len, value *out) {
  static const value ua_items[] = {{.kind = V_STRING, .n = 4, .s = "curl"}};
  static map_entry req[2];
  (void)user;
  req[0].key = value_str("path", 4);
  req[0].val = value_str("/api/v1/users", 13);
  req[1].key = value_str("n", 1);
  req[1].val = value_int(7);
#define IS(s) (len == sizeof(s) - 1 && memcmp(name, s, len) == 0)
  if (IS("ua"))
    *out = value_str("Mozilla/5.0 sqlmap", 18);
  else if (IS("path"))
    *out = value_str("/wp-admin/x.php", 15);
  else if (IS("n"))
    *out = value_int(42);
  else if (IS("d"))
    *out = value_double(2.5);
  else if (IS("ip"))
    *out = value_str("10.1.2.3", 8);
  else if (IS("req"))
    *out = value_map(req, 2);
  else if (IS("agents"))
    *out = value_list(ua_items, 1);
  else if (IS("a.b.c"))
    *out = value_str("dotted", 6);
  else if (IS("req.n")) /* req's field bound as a name of its own (ENGINE claims req) */
    *out = value_int(7);
  else
    return -1;
#undef IS
  return 0;
}

static const char *const EXPRS[] = {
    "1 + 2 * n - 3 / 1 % 2",
    "ua == 'curl' || ua != 'wget' && !(n < 3) && n <= 100 && n > 1 && n >= 2",
    "n == 42 ? 'yes' : 'no'",
    "-n + int(d)",
    "ua in ['curl', 'wget', 'sqlmap', 'nikto']",
    "n in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 42]",
    "ua in {'a': 1, 'b': 2, 'c': 3, 'd': 4, 'e': 5, 'f': 6, 'g': 7, 'h': 8, 'i': 9}",
    "'x' in {'x': true}",
    "ua.startsWith('Moz') && path.endsWith('.php') && ua.contains('sql')",
    "['sqlmap', 'nikto', 'nmap'].exists(p, ua.contains(p))",
    "['/wp-', '/.env'].exists(p, path.startsWith(p))",
    "['.php', '.asp'].exists(p, path.endsWith(p))",
    "ua.matches('(?i)SQLMAP|nikto') && !path.matches('^/api/')",
    "path.matches('[a-z]+\\\\.php$')",
    "cidr('10.0.0.0/8').containsIP(ip(ip))",
    "ip('10.1.2.3') == ip(ip) && cidr('2001:db8::/32').containsIP(ip('2001:db8::1'))",
    "timestamp('2026-01-02T03:04:05Z') + duration('1h30m') > timestamp('2026-01-01T00:00:00Z')",
    "duration('-1.5s') < duration('0s')",
    "type(n) == int && type(ua) == string && type(null) == null_type",
    "req.path.startsWith('/api') && has(req.n) && !has(req.missing) && req['n'] == 7",
    "[1, 2, 3].map(x, x * 2).filter(y, y > 2).all(z, z < 10)",
    "[1, 2, 3].exists_one(x, x == 2) && {'a': 1}.all(k, k == 'a')",
    "[1, 2, 3].map(x, x > 1, x + n)",
    "{'a': 1, 'b': 2}.transformMap(k, v, v + 1)",
    "[10, 20].all(i, v, v == (i + 1) * 10)",
    "cel.bind(x, n * 2, x + x)",
    "cel.block([n + 1, cel.index(0) * 2], cel.index(1) + 1)",
    "ua.lowerAscii().contains('sqlmap') && ua.lowerAscii().startsWith('mozilla')",
    "size(ua) + size(agents) + size({'k': 1})",
    "agents[0] == 'curl' && agents.size() == 1",
    "1 / 0 == 1 || true",
    "nosuchfunction(1) || true",
    "ua.nosuchmethod()",
    "int('12') + 1 == 13 && string(n) == '42' && double(n) == 42.0 && uint(n) == 42u",
    "b'abc' == bytes('abc') && b'\\x00\\xff'.size() == 2",
    ("['a', ['b', {'c': [1.5, -2, 3u, null, true, b'x']}]] == ['a', ['b', {'c': [1.5, -2, "
     "3u, null, true, b'x']}]]"),
    "'héllo wörld'.size() == 11 && 'ÄÖÜ'.lowerAscii() == 'ÄÖÜ'",
    "a.b.c == 'dotted'",
    "has(req.n) && !has(req.missing) && req.n + req['n'] == 14 && req.path.size() > 0",
    "has(req.path.x)",
    "missing_variable == 1",
    "ua.split(' ')[1] == 'sqlmap' && ua.replace('5.0', '6') != ua",
    "[3, 1, 2].exists(x, x == n) || n in [42]",
    "math.greatest(1, 2, n) == n",
    "timestamp('2026-01-02T03:04:05Z').getHours('Europe/Paris') == 4",
};

/* Whether two results are the same: kind, value (doubles by bits), error
 * text. */
static int same(arena *a, value x, value y) {
  if (x.kind != y.kind) return 0;
  if (x.kind == V_ERROR) {
    x = value_error_text(a, x);
    y = value_error_text(a, y);
    return x.n == y.n && memcmp(x.s, y.s, x.n) == 0;
  }
  if (x.kind == V_DOUBLE) return memcmp(&x.d, &y.d, sizeof x.d) == 0 || (isnan(x.d) && isnan(y.d));
  json_buf bx, by;
  json_buf_init(&bx, NULL);
  json_buf_init(&by, NULL);
  json_write(&bx, &x, 1);
  json_write(&by, &y, 1);
  int eq = bx.len == by.len && memcmp(bx.data, by.data, bx.len) == 0 &&
           value_equal(&x, &y) == value_equal(&y, &x);
  json_buf_free(&bx);
  json_buf_free(&by);
  return eq;
}

static value run(const expr_program *p, arena *a, uint64_t *cost) {
  expr_activation act = {.lookup = lookup, .user = NULL};
  eval_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.arena = a;
  ctx.cost_limit = 1000000;
  value r = expr_eval(p, &act, &ctx);
  *cost = ctx.cost;
  return r;
}

/* Compiles src, round-trips it and compares; returns 1 when it compiled. */
static int round_trip(const char *src, size_t len, const expr_opts *opts, const char *what) {
  expr_program *p = NULL, *q = NULL;
  expr_error err;
  if (expr_compile(src, len, opts, &p, &err)) return 0;
  json_buf b1, b2;
  json_buf_init(&b1, NULL);
  json_buf_init(&b2, NULL);
  expr_image_write(p, &b1);
  CHECK(!b1.oom);
  size_t mem = 0;
  CHECK_MSG(expr_image_check(b1.data, b1.len, opts, &mem) == 0 && mem > 0,
            "%s: the image of `%.*s` does not check", what, (int)len, src);
  int rc = expr_image_read(b1.data, b1.len, opts, mem, &q);
  CHECK_MSG(rc == 0, "%s: the image of `%.*s` does not read back", what, (int)len, src);
  /* read with what it takes: in one piece */
  if (rc == 0)
    CHECK_MSG(q->mem.mallocs == 1, "%s: `%.*s` took %zu chunks", what, (int)len, src,
              q->mem.mallocs);
  if (rc == 0) {
    expr_image_write(q, &b2);
    CHECK_MSG(b1.len == b2.len && memcmp(b1.data, b2.data, b1.len) == 0,
              "%s: `%.*s` writes differently once read back", what, (int)len, src);
    arena a;
    arena_init(&a, NULL, 0, 64u << 20);
    uint64_t c1, c2;
    value r1 = run(p, &a, &c1), r2 = run(q, &a, &c2);
    CHECK_MSG(same(&a, r1, r2) && c1 == c2, "%s: `%.*s` evaluates differently from its image", what,
              (int)len, src);
    arena_free(&a);
  }
  json_buf_free(&b1);
  json_buf_free(&b2);
  expr_free(p);
  expr_free(q);
  return 1;
}

static const char *const CLAIMED[] = {"req"};
static const expr_opts ENGINE = {
    .simple_names = 1, .claimed = CLAIMED, .nclaimed = 1, .defer_jit = 1};
static const expr_opts DEFAULTS = {0};

static void test_every_opcode(void) {
  uint32_t compiled = 0;
  for (size_t i = 0; i < sizeof EXPRS / sizeof EXPRS[0]; i++) {
    int a = round_trip(EXPRS[i], strlen(EXPRS[i]), &DEFAULTS, "defaults");
    int b = round_trip(EXPRS[i], strlen(EXPRS[i]), &ENGINE, "engine");
    CHECK_MSG(a && b, "`%s` does not compile", EXPRS[i]);
    compiled += a && b;
  }
  CHECK(compiled == sizeof EXPRS / sizeof EXPRS[0]);
}

/* Every expression of the CEL conformance suite, whatever its bindings
 * (unbound variables are errors both ways, which must match too). */
static void test_conformance_suite(void) {
  FILE *f = fopen("tests/conformance/cel/cases.jsonl", "r");
  CHECK_MSG(f != NULL, "tests/conformance/cel/cases.jsonl: run from the repository root");
  if (!f) return;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  uint32_t cases = 0, compiled = 0;
  while ((n = getline(&line, &cap, f)) > 0) {
    arena a;
    arena_init(&a, NULL, 0, 0);
    value v;
    json_opts jo = {0};
    if (json_parse(&a, line, (size_t)n, &jo, &v, NULL) == 0 && v.kind == V_MAP) {
      const value *e = value_map_get(&v, "expr", 4), *c = value_map_get(&v, "container", 9);
      if (e && e->kind == V_STRING) {
        expr_opts o = {0};
        if (c && c->kind == V_STRING) o.container = arena_strndup(&a, c->s, c->n);
        cases++;
        compiled += round_trip(e->s, e->n, &o, "conformance");
        o.defer_jit = 1;
        round_trip(e->s, e->n, &o, "conformance (deferred regexes)");
      }
    }
    arena_free(&a);
  }
  free(line);
  fclose(f);
  CHECK_MSG(cases > 1000 && compiled > 900, "%u cases, %u compiled", cases, compiled);
}

/* A program image that is not one: refused, or harmless. */
static void try_damaged(const char *img, size_t len, uint32_t *accepted) {
  expr_program *p = NULL;
  if (expr_image_read(img, len, &ENGINE, 0, &p) != 0) return;
  (*accepted)++;
  arena a;
  arena_init(&a, NULL, 0, 16u << 20);
  uint64_t cost;
  value r = run(p, &a, &cost);
  (void)value_error_text(&a, r);
  arena_free(&a);
  expr_free(p);
}

static void test_damaged_images(void) {
  static const char src[] =
      "ua in ['curl', 'wget', 'sqlmap', 'nikto', 'a', 'b', 'c', 'd', 'e', 'f'] || "
      "['/wp-', '/.env'].exists(p, path.startsWith(p)) || ua.matches('(?i)nikto|nmap') || "
      "cidr('10.0.0.0/8').containsIP(ip(ip)) || req.path.endsWith('.php') || "
      "[1, 2].map(x, x * n).all(y, y > 0) && cel.bind(z, n, z + 1) > 0 && "
      "cel.block([n], cel.index(0)) == n && timestamp('2026-01-01T00:00:00Z') < "
      "timestamp('2027-01-01T00:00:00Z') && a.b.c == 'x' && {'k': [1.5, null]}.size() == 1";
  expr_program *p = NULL;
  expr_error err;
  CHECK(expr_compile(src, sizeof src - 1, &ENGINE, &p, &err) == 0);
  if (!p) return;
  json_buf b;
  json_buf_init(&b, NULL);
  expr_image_write(p, &b);
  expr_free(p);
  const size_t len = b.len;
  char *img = malloc(len);
  CHECK(img != NULL && len > 500);
  if (!img) return;
  /* every truncation (into a buffer of exactly that size, for ASan) */
  uint32_t cut_accepted = 0;
  for (size_t n = 0; n < len; n++) {
    char *t = malloc(n ? n : 1);
    memcpy(t, b.data, n);
    try_damaged(t, n, &cut_accepted);
    free(t);
  }
  CHECK_MSG(cut_accepted == 0, "%u truncated images accepted", cut_accepted);
  /* every byte changed, three ways */
  static const uint8_t flips[] = {0x01, 0x80, 0xff};
  uint32_t accepted = 0, tried = 0;
  for (size_t i = 0; i < len; i++)
    for (size_t f = 0; f < sizeof flips; f++) {
      memcpy(img, b.data, len);
      img[i] = (char)(img[i] ^ flips[f]);
      try_damaged(img, len, &accepted);
      tried++;
    }
  /* and many at once */
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int round = 0; round < 3000; round++) {
    memcpy(img, b.data, len);
    int changes = 1 + round % 8;
    for (int c = 0; c < changes; c++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      size_t at = (size_t)(seed >> 33) % len;
      uint8_t x = (uint8_t)(seed >> 24);
      img[at] = (char)(round % 3 == 0 ? x : (img[at] ^ (1u << (x % 8))));
    }
    try_damaged(img, len, &accepted);
    tried++;
  }
  /* the undamaged image is accepted, and most damage is caught */
  uint32_t whole = 0;
  try_damaged(b.data, len, &whole);
  CHECK(whole == 1);
  CHECK_MSG(accepted < tried, "%u of %u damaged images accepted", accepted, tried);
  free(img);
  json_buf_free(&b);
}

/* The codes of p's regexes, as the store keeps them beside its image. */
static json_buf codes_of(const char *src) {
  expr_program *p = NULL;
  expr_error err;
  json_buf b;
  json_buf_init(&b, NULL);
  CHECK_MSG(expr_compile(src, strlen(src), &ENGINE, &p, &err) == 0, "`%s`: %s", src, err.message);
  if (p) expr_image_write_codes(p, &b);
  expr_free(p);
  return b;
}

/* src compiled, read back from its image and given codes (*adopted: what
 * expr_image_adopt_codes said); what that program gives. own: the codes
 * are src's, so both programs must give the same, at the same cost. */
static value with_codes(const char *src, const json_buf *codes, int own, int *adopted, arena *a) {
  expr_program *p = NULL, *q = NULL;
  expr_error err;
  value r = value_null();
  *adopted = -2;
  if (expr_compile(src, strlen(src), &ENGINE, &p, &err)) return r;
  json_buf img;
  json_buf_init(&img, NULL);
  expr_image_write(p, &img);
  if (expr_image_read(img.data, img.len, &ENGINE, 0, &q) == 0) {
    *adopted = expr_image_adopt_codes(q, codes->data, codes->len);
    uint64_t c1, c2;
    value r1 = run(p, a, &c1);
    r = run(q, a, &c2);
    if (*adopted == 0 && own)
      CHECK_MSG(same(a, r1, r) && c1 == c2, "`%s` evaluates differently with its codes", src);
  }
  json_buf_free(&img);
  expr_free(p);
  expr_free(q);
  return r;
}

static void test_regex_codes(void) {
  arena a;
  arena_init(&a, NULL, 0, 64u << 20);
  /* a program given its own codes gives the same results at the same cost */
  static const char *const own[] = {
      "ua.matches('sql.ap')",
      "path.matches(r'^/wp-(admin|login)/.*\\.php$') && !ua.matches('(?i)curl|wget')",
      "matches(ua, '^Mozilla/[0-9]+') || ua.matches('x{2,}')",
      "agents.exists(x, x.matches('^cu.l$'))",
      "ua.matches('(a+)+$')",        /* under the match limit either way */
      "ua.contains('sql') && n > 1", /* no regex: nothing kept */
  };
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
    json_buf c = codes_of(own[i]);
    int adopted;
    (void)with_codes(own[i], &c, 1, &adopted, &a);
    CHECK_MSG(adopted == 0, "`%s`: its own codes refused (%d)", own[i], adopted);
    json_buf_free(&c);
  }

  /* the kept code is what runs: another pattern's code given to this call
   * site answers for that pattern (which is why only bytes this build
   * wrote and the store checked may be given) */
  json_buf c = codes_of("ua.matches('sql.ap')");
  int adopted;
  CHECK(c.len > 16);
  value r = with_codes("ua.matches('nik.o')", &c, 0, &adopted, &a);
  CHECK(adopted == 0 && r.kind == V_BOOL && r.b);
  /* ... unless the code was made by another PCRE2: the pattern is
   * compiled from its text then (call, overload, length, version length) */
  uint8_t vlen = (uint8_t)c.data[12];
  CHECK(vlen > 0 && (size_t)13 + vlen < c.len);
  c.data[13] ^= 0x01;
  r = with_codes("ua.matches('nik.o')", &c, 0, &adopted, &a);
  CHECK(adopted == 0 && r.kind == V_BOOL && !r.b);
  c.data[13] ^= 0x01;

  /* codes that do not fit the program are refused, whole */
  json_buf cut = c;
  cut.len = c.len - 1;
  (void)with_codes("ua.matches('nik.o')", &cut, 0, &adopted, &a);
  CHECK(adopted == -1);
  (void)with_codes("ua.matches('nik.o') || path.matches('x.')", &c, 0, &adopted, &a);
  CHECK(adopted == -1);
  json_buf_putc(&c, 0);
  (void)with_codes("ua.matches('nik.o')", &c, 0, &adopted, &a);
  CHECK(adopted == -1);
  json_buf_free(&c);
  arena_free(&a);
}

/* has() of a claimed name is a qualified name with PQVAR_HAS: it reads
 * back as such, and a node with flags the evaluator does not know is
 * refused. */
static void test_claimed_has(void) {
  const char *src = "has(req.n)";
  expr_program *p = NULL, *q = NULL;
  expr_error err;
  CHECK(expr_compile(src, strlen(src), &ENGINE, &p, &err) == 0);
  if (!p) return;
  const pnode *root = &p->nodes[p->root];
  CHECK(root->op == OP_QVAR && root->flags == PQVAR_HAS);
  json_buf b;
  json_buf_init(&b, NULL);
  expr_image_write(p, &b);
  CHECK(expr_image_read(b.data, b.len, &ENGINE, 0, &q) == 0);
  if (q) CHECK(q->nodes[q->root].op == OP_QVAR && q->nodes[q->root].flags == PQVAR_HAS);
  expr_free(q);
  q = NULL;
  /* nine counts, the source and its NUL, then the nodes: op, flags, ... */
  size_t at = 9 * 4 + 4 + strlen(src) + 1; /* the first node */
  CHECK(p->nnodes == 1 && b.len > at + 1 && (uint8_t)b.data[at] == OP_QVAR);
  if (b.len > at + 1) {
    b.data[at + 1] = 2;
    CHECK(expr_image_read(b.data, b.len, &ENGINE, 0, &q) != 0);
    expr_free(q);
  }
  json_buf_free(&b);
  expr_free(p);
}

/* A program read from its image uses the image's strings where they lie
 * (each is written with a NUL after it); one whose NUL is gone is refused.
 * The trusted read, which does not check their UTF-8 again, gives the
 * same program. */
static void test_strings_in_place(void) {
  const char *src = "req.ua in ['curl', 'wget'] || req.path.startsWith('/admin')";
  expr_program *p = NULL, *q = NULL;
  expr_error err;
  CHECK(expr_compile(src, strlen(src), &ENGINE, &p, &err) == 0);
  if (!p) return;
  json_buf b, c;
  json_buf_init(&b, NULL);
  json_buf_init(&c, NULL);
  expr_image_write(p, &b);
  CHECK(!b.oom && expr_image_read(b.data, b.len, &ENGINE, 0, &q) == 0);
  if (q) {
    /* nine counts and the source's length, then the source */
    CHECK(q->src == b.data + 10 * 4 && q->src[q->src_len] == '\0');
    expr_free(q);
    q = NULL;
  }
  CHECK(expr_image_read_trusted(b.data, b.len, &ENGINE, 0, &q) == 0);
  if (q) {
    expr_image_write(q, &c);
    CHECK(b.len == c.len && memcmp(b.data, c.data, b.len) == 0);
    expr_free(q);
    q = NULL;
  }
  /* the source's NUL overwritten: a string that does not end where its
   * length says */
  b.data[10 * 4 + strlen(src)] = 'x';
  CHECK(expr_image_read(b.data, b.len, &ENGINE, 0, &q) != 0);
  CHECK(expr_image_read_trusted(b.data, b.len, &ENGINE, 0, &q) != 0);
  expr_free(q);
  json_buf_free(&b);
  json_buf_free(&c);
  expr_free(p);
}

static void test_fingerprint(void) {
  const char *f = expr_image_fingerprint();
  CHECK(f && strlen(f) == 32 && strspn(f, "0123456789abcdef") == 32);
  CHECK(f == expr_image_fingerprint());
}

int main(void) {
  TEST_RUN(test_every_opcode);
  TEST_RUN(test_conformance_suite);
  TEST_RUN(test_damaged_images);
  TEST_RUN(test_regex_codes);
  TEST_RUN(test_claimed_has);
  TEST_RUN(test_strings_in_place);
  TEST_RUN(test_fingerprint);
  TEST_END();
}
