/* test_eval.c — behaviour of the compiler and evaluator beyond the CEL
 * conformance suite: the policy gate condition over sample contexts and its
 * zero-allocation promise, cost limits against comprehension blow-ups,
 * error absorption, qualified names, compile errors with their place,
 * constant folding that keeps run-time semantics, timestamp/duration
 * arithmetic ranges, and the public vd_expr_* API. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/value.h"
#include "expr/expr.h"
#include "expr/program.h" /* value_copy_deep: keep results past expr_free */
#include "test.h"
#include "verdict.h"

/* ---- a small activation: name -> value ---- */

typedef struct var {
  const char *name;
  value v;
} var;

typedef struct vars {
  const var *v;
  size_t n;
  int lookups; /* how many times lookup was called */
} vars;

static int vars_lookup(void *user, const char *name, size_t len, value *out) {
  vars *vs = user;
  vs->lookups++;
  for (size_t i = 0; i < vs->n; i++)
    if (strlen(vs->v[i].name) == len && memcmp(vs->v[i].name, name, len) == 0) {
      *out = vs->v[i].v;
      return 0;
    }
  return -1;
}

/* Results are copied here before their program is freed. */
static arena keep;

static value S(const char *s) { return value_str(s, (uint32_t)strlen(s)); }

/* Compiles and evaluates src with the given variables; the result lives in
 * *a (reset by the caller). Returns a V_ERROR "compile error" on failure. */
static value run_opts(arena *a, const char *src, const var *v, size_t n, const expr_opts *opts) {
  expr_program *p;
  expr_error err;
  if (expr_compile(src, strlen(src), opts, &p, &err) != 0) {
    fprintf(stderr, "  (compile error for %s: %s)\n", src, err.message);
    return VALUE_ERR("compile error");
  }
  vars vs = {v, n, 0};
  expr_activation act = {vars_lookup, &vs};
  eval_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.arena = a;
  ctx.cost_limit = 1000000;
  value r = expr_eval(p, &act, &ctx);
  /* A result may be (or hold) a constant of the program: copy it out first. */
  value out;
  if (value_copy_deep(&keep, &r, &out)) out = VALUE_ERR("test: out of memory copying the result");
  expr_free(p);
  return out;
}

/* The same, keeping the program alive (for results that are its constants). */
typedef struct held {
  expr_program *p;
  value r;
} held;

static held eval_held(arena *a, const char *src, const var *v, size_t n, const expr_opts *opts) {
  held h = {NULL, VALUE_ERR("compile error")};
  expr_error err;
  if (expr_compile(src, strlen(src), opts, &h.p, &err) != 0) {
    fprintf(stderr, "  (compile error for %s: %s)\n", src, err.message);
    return h;
  }
  vars vs = {v, n, 0};
  expr_activation act = {vars_lookup, &vs};
  eval_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.arena = a;
  ctx.cost_limit = 1000000;
  h.r = expr_eval(h.p, &act, &ctx);
  return h;
}

static int is_bool(value r, int b) { return r.kind == V_BOOL && r.b == b; }
static int is_int(value r, int64_t i) { return r.kind == V_INT && r.i == i; }
static int is_err(value r) { return r.kind == V_ERROR; }
static int err_has(value r, const char *needle) {
  if (r.kind != V_ERROR) return 0;
  char buf[512];
  size_t n = r.n < sizeof buf - 1 ? r.n : sizeof buf - 1;
  memcpy(buf, r.s, n);
  buf[n] = 0;
  return strstr(buf, needle) != NULL;
}

/* Evaluates to a bool with no variables. */
static value ev0(arena *a, const char *src) { return run_opts(a, src, NULL, 0, NULL); }

/* ---- the gate ---- */

static const char *GATE =
    "ctx.country == \"CN\" && ctx.path.startsWith(\"/api/v1\") && !(ctx.ua in [\"curl\", "
    "\"sqlmap\"])";

static value make_ctx(map_entry *e, const char *country, const char *path, const char *ua) {
  e[0].key = S("method");
  e[0].val = S("GET");
  e[1].key = S("country");
  e[1].val = S(country);
  e[2].key = S("path");
  e[2].val = S(path);
  e[3].key = S("ua");
  e[3].val = S(ua);
  return value_map(e, 4);
}

static void test_gate_over_sample_contexts(void) {
  static const struct {
    const char *country, *path, *ua;
    int want;
  } cases[] = {
      {"CN", "/api/v1/orders", "Mozilla/5.0", 1},
      {"CN", "/api/v1", "Go-http-client", 1},
      {"US", "/api/v1/orders", "Mozilla/5.0", 0},
      {"CN", "/api/v2/orders", "Mozilla/5.0", 0},
      {"CN", "/api/v1/x", "curl", 0},
      {"CN", "/api/v1/x", "sqlmap", 0},
      {"CN", "/api/v1/x", "curl/8.4.0", 1},
      {"CN", "/api", "Mozilla/5.0", 0},
      {"cn", "/api/v1/x", "Mozilla/5.0", 0},
      {"", "", "", 0},
  };
  const char *const declared[] = {"ctx"};
  expr_opts with_decl = {.declared = declared, .ndeclared = 1};
  expr_program *dyn_p, *decl_p;
  expr_error err;
  CHECK(expr_compile(GATE, strlen(GATE), NULL, &dyn_p, &err) == 0);
  CHECK(expr_compile(GATE, strlen(GATE), &with_decl, &decl_p, &err) == 0);
  arena a;
  arena_init(&a, NULL, 0, 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    map_entry e[4];
    var v[1] = {{"ctx", make_ctx(e, cases[i].country, cases[i].path, cases[i].ua)}};
    vars vs = {v, 1, 0};
    expr_activation act = {vars_lookup, &vs};
    eval_ctx ctx = {.arena = &a};
    value r1 = expr_eval(dyn_p, &act, &ctx);
    value r2 = expr_eval(decl_p, &act, &ctx);
    CHECK_MSG(is_bool(r1, cases[i].want), "case %zu (dynamic names)", i);
    CHECK_MSG(is_bool(r2, cases[i].want), "case %zu (declared names)", i);
  }
  /* A context without the field: the evaluation fails, naming the key. */
  map_entry e[1] = {{S("country"), S("CN")}};
  var v[1] = {{"ctx", value_map(e, 1)}};
  vars vs = {v, 1, 0};
  expr_activation act = {vars_lookup, &vs};
  eval_ctx ctx = {.arena = &a};
  CHECK(err_has(expr_eval(dyn_p, &act, &ctx), "no such key: 'path'"));
  /* No ctx at all */
  vars none = {NULL, 0, 0};
  act.user = &none;
  CHECK(err_has(expr_eval(dyn_p, &act, &ctx), "undeclared reference to 'ctx"));
  expr_free(dyn_p);
  expr_free(decl_p);
  arena_free(&a);
}

static void test_gate_allocates_nothing(void) {
  expr_program *p;
  expr_error err;
  CHECK(expr_compile(GATE, strlen(GATE), NULL, &p, &err) == 0);
  arena a; /* no first buffer: any allocation at all would malloc a chunk */
  arena_init(&a, NULL, 0, 0);
  const char *uas[] = {"curl", "Mozilla/5.0", "sqlmap", "x"};
  const char *paths[] = {"/api/v1/a", "/b", "/api/v1"};
  const char *countries[] = {"CN", "US"};
  long trues = 0;
  for (int i = 0; i < 1000; i++) {
    map_entry e[4];
    var v[1] = {{"ctx", make_ctx(e, countries[i % 2], paths[i % 3], uas[i % 5 % 4])}};
    vars vs = {v, 1, 0};
    expr_activation act = {vars_lookup, &vs};
    eval_ctx ctx = {.arena = &a};
    value r = expr_eval(p, &act, &ctx);
    CHECK(r.kind == V_BOOL);
    trues += r.b;
  }
  CHECK(trues > 0 && trues < 1000);
  CHECK_MSG(a.used == 0, "arena used %zu bytes", a.used);
  CHECK_MSG(a.mallocs == 0, "arena malloc'd %zu chunks", a.mallocs);
  /* The same for other hot shapes: field tests, comparisons, `in` over a
   * larger constant list (hashed), has(), ternaries, string functions. */
  const char *hot[] = {
      "ctx.method == 'GET' || ctx.method == 'HEAD'",
      "has(ctx.ua) && !has(ctx.referer) && ctx.country != 'US'",
      "ctx.country in ['AA','BB','CC','DD','EE','FF','GG','HH','II','JJ','CN','KK']",
      "size(ctx.path) > 3 ? ctx.path.endsWith('/a') : ctx.ua.contains('url')",
      "ctx.path.endsWith('/a') && ctx['method'] in {'GET': 1, 'PUT': 2}",
      "[1, 2, 3].exists(x, x == 2) && ctx.country < 'ZZ'",
  };
  for (size_t h = 0; h < sizeof hot / sizeof hot[0]; h++) {
    expr_program *q;
    if (expr_compile(hot[h], strlen(hot[h]), NULL, &q, &err) != 0) {
      CHECK_MSG(0, "compile %s: %s", hot[h], err.message);
      continue;
    }
    map_entry e[4];
    var v[1] = {{"ctx", make_ctx(e, "CN", "/api/v1/a", "curl")}};
    vars vs = {v, 1, 0};
    expr_activation act = {vars_lookup, &vs};
    eval_ctx ctx = {.arena = &a};
    value r = expr_eval(q, &act, &ctx);
    CHECK_MSG(r.kind == V_BOOL, "%s gave kind %d", hot[h], r.kind);
    CHECK_MSG(a.used == 0 && a.mallocs == 0, "%s allocated %zu bytes", hot[h], a.used);
    expr_free(q);
  }
  expr_free(p);
  arena_free(&a);
}

/* ---- limits ---- */

/* Regex work is paid from the evaluation's budget (issue 19): a list of
 * strings that each make `^(a+)+$` backtrack, every call stopping at its
 * own match limit (or just under it), used to cost 5 units a call and run
 * for seconds under a budget it never reached. Now the budget stops it,
 * with steps counted: the error is the cost limit's, not the match
 * limit's, and the work charged is the budget's. A pattern that needs few
 * steps is charged as before: the subject's bytes and the macro step. */
static value eval_list(const char *src, const char *item, uint32_t n, uint64_t *cost) {
  value *items = malloc(n * sizeof *items);
  for (uint32_t i = 0; i < n; i++) items[i] = S(item);
  var v[1] = {{"list", value_list(items, n)}};
  expr_program *p;
  expr_error err;
  value out = VALUE_ERR("compile error");
  if (expr_compile(src, strlen(src), NULL, &p, &err) == 0) {
    arena a;
    arena_init(&a, NULL, 0, 0);
    vars vs = {v, 1, 0};
    expr_activation act = {vars_lookup, &vs};
    eval_ctx ctx = {.arena = &a, .cost_limit = 1000000, .regex_match_limit = 100000};
    value r = expr_eval(p, &act, &ctx);
    *cost = ctx.cost;
    if (value_copy_deep(&keep, &r, &out)) out = VALUE_ERR("test: out of memory");
    arena_free(&a);
    expr_free(p);
  }
  free(items);
  return out;
}

static void test_regex_work_is_charged_to_the_budget(void) {
  const char *hostile = "list.exists(x, x.matches('^(a+)+$'))";
  uint64_t cost;
  /* each call over the per-call match limit */
  value r = eval_list(hostile, "aaaaaaaaaaaaaaaaaaaaaaaaa!", 30000, &cost);
  CHECK_MSG(err_has(r, "cost limit exceeded"), "%.*s", (int)r.n, r.s);
  CHECK(!err_has(r, "match limit"));
  CHECK_MSG(cost > 1000000 && cost < 1100000, "cost %llu", (unsigned long long)cost);
  /* each call just under it (some ten thousand steps, a false answer) */
  r = eval_list(hostile, "aaaaaaaaaaaaa!", 50000, &cost);
  CHECK_MSG(err_has(r, "cost limit exceeded"), "%.*s", (int)r.n, r.s);
  CHECK_MSG(cost > 1000000 && cost < 1100000, "cost %llu", (unsigned long long)cost);
  /* a pattern that needs a few steps: 1 for the step, 2 for the 14 bytes */
  r = eval_list("list.all(x, x.matches('^a+!$'))", "aaaaaaaaaaaaa!", 1000, &cost);
  CHECK(is_bool(r, 1));
  CHECK_MSG(cost == 3000, "cost %llu", (unsigned long long)cost);
}

static void test_cost_limit_stops_blowups(void) {
  value items[100];
  for (int i = 0; i < 100; i++) items[i] = value_int(i);
  var v[1] = {{"range", value_list(items, 100)}};
  const char *blowups[] = {
      "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(x, range.map(y, range.map(z, z)))",
      "range.all(x, range.all(y, range.all(z, true)))",
      /* an error inside a branch that || would absorb still stops the work */
      "range.all(x, range.exists(y, range.exists(z, z < 0)) || true) || true",
      "range.filter(x, range.exists_one(y, range.filter(z, true).size() == 100))",
  };
  for (size_t i = 0; i < sizeof blowups / sizeof blowups[0]; i++) {
    expr_program *p;
    expr_error err;
    CHECK(expr_compile(blowups[i], strlen(blowups[i]), NULL, &p, &err) == 0);
    arena a;
    arena_init(&a, NULL, 0, 0);
    vars vs = {v, 1, 0};
    expr_activation act = {vars_lookup, &vs};
    eval_ctx ctx = {.arena = &a, .cost_limit = 50000};
    value r = expr_eval(p, &act, &ctx);
    CHECK_MSG(err_has(r, "cost limit exceeded"), "%s", blowups[i]);
    /* stopped soon after the limit, not after the million steps */
    CHECK_MSG(ctx.cost < 60000, "%s ran %llu steps", blowups[i], (unsigned long long)ctx.cost);
    expr_free(p);
    arena_free(&a);
  }
  /* Under the limit the same shapes work. */
  arena a;
  arena_init(&a, NULL, 0, 0);
  CHECK(is_bool(run_opts(&a, "range.all(x, range.all(y, y >= 0))", v, 1, NULL), 1));
  arena_free(&a);
}

static void test_memory_limit_is_an_error(void) {
  arena a;
  arena_init(&a, NULL, 0, 4096);
  value items[64];
  for (int i = 0; i < 64; i++) items[i] = value_int(i);
  var v[1] = {{"l", value_list(items, 64)}};
  value r = run_opts(&a, "l.map(x, l.map(y, l)).size()", v, 1, NULL);
  CHECK(err_has(r, "memory limit"));
  arena_free(&a);
}

/* ---- semantics ---- */

static void test_error_absorption(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  map_entry e[1] = {{S("a"), value_int(1)}};
  var v[1] = {{"m", value_map(e, 1)}};
  CHECK(is_bool(run_opts(&a, "m.missing == 1 || true", v, 1, NULL), 1));
  CHECK(is_bool(run_opts(&a, "true || m.missing == 1", v, 1, NULL), 1));
  CHECK(is_bool(run_opts(&a, "m.missing == 1 && false", v, 1, NULL), 0));
  CHECK(err_has(run_opts(&a, "m.missing == 1 && true", v, 1, NULL), "no such key: 'missing'"));
  CHECK(err_has(run_opts(&a, "false || m.missing == 1", v, 1, NULL), "no such key"));
  CHECK(is_bool(ev0(&a, "1/0 == 1 || true"), 1));
  CHECK(is_bool(ev0(&a, "false && 1/0 == 1"), 0));
  CHECK(is_bool(ev0(&a, "'x' && false"), 0));
  CHECK(is_err(ev0(&a, "'x' && true")));
  CHECK(is_err(ev0(&a, "'x' || 'y'")));
  CHECK(is_bool(ev0(&a, "undefined_var || true"), 1));
  CHECK(is_bool(ev0(&a, "f_unknown(17) || true"), 1));
  CHECK(is_err(ev0(&a, "f_unknown(17) && true")));
  /* macros: all is an && fold, exists an || fold; the others propagate */
  CHECK(is_bool(ev0(&a, "[1, 2, 3].all(e, 6 / (2 - e) == 6)"), 0));
  CHECK(is_bool(ev0(&a, "[1, 2, 3].exists(e, 6 / (2 - e) == 6)"), 1));
  CHECK(err_has(ev0(&a, "[1, 2, 3].all(e, e / 0 == 1)"), "division by zero"));
  CHECK(is_err(ev0(&a, "[0, 1].exists_one(e, 1 / e == 1)")));
  CHECK(is_err(ev0(&a, "[0, 1].filter(e, 1 / e == 1)")));
  CHECK(is_err(ev0(&a, "[0, 1].map(e, 1 / e)")));
  CHECK(is_err(ev0(&a, "(1/0 == 1) ? 1 : 2")));
  CHECK(is_err(ev0(&a, "'yes' ? 1 : 2")));
  CHECK(is_err(ev0(&a, "!0")));
  arena_free(&a);
}

static void test_arithmetic(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  CHECK(err_has(ev0(&a, "9223372036854775807 + 1"), "overflow"));
  CHECK(err_has(ev0(&a, "-9223372036854775808 - 1"), "overflow"));
  CHECK(err_has(ev0(&a, "-(-9223372036854775808)"), "overflow"));
  CHECK(err_has(ev0(&a, "-9223372036854775808 / -1"), "overflow"));
  CHECK(err_has(ev0(&a, "-9223372036854775808 % -1"), "overflow"));
  CHECK(err_has(ev0(&a, "4611686018427387904 * 2"), "overflow"));
  CHECK(err_has(ev0(&a, "0u - 1u"), "overflow"));
  CHECK(err_has(ev0(&a, "18446744073709551615u + 1u"), "overflow"));
  CHECK(err_has(ev0(&a, "1 / 0"), "division by zero"));
  CHECK(err_has(ev0(&a, "1 % 0"), "modulus by zero"));
  CHECK(err_has(ev0(&a, "1u / 0u"), "division by zero"));
  CHECK(is_int(ev0(&a, "-7 / 2"), -3));
  CHECK(is_int(ev0(&a, "-3 % 5"), -3));
  CHECK(is_int(ev0(&a, "43 % -5"), 3));
  value r = ev0(&a, "15.75 / 0.0");
  CHECK(r.kind == V_DOUBLE && isinf(r.d) && r.d > 0);
  CHECK(is_err(ev0(&a, "1.5 % 1.0")));
  CHECK(is_err(ev0(&a, "1 + 1u")));
  CHECK(is_err(ev0(&a, "-(42u)")));
  /* heterogeneous comparisons, via value.c */
  CHECK(is_bool(ev0(&a, "1 == 1.0 && 1u == 1 && dyn(-1) < 0u"), 1));
  CHECK(is_err(ev0(&a, "'a' < 1")));
  CHECK(is_bool(ev0(&a, "0.0/0.0 != 0.0/0.0"), 1));
  /* variables, not folded */
  var v[2] = {{"x", value_int(INT64_MAX)}, {"y", value_int(1)}};
  CHECK(err_has(run_opts(&a, "x + y", v, 2, NULL), "overflow"));
  CHECK(is_int(run_opts(&a, "x - y", v, 2, NULL), INT64_MAX - 1));
  arena_free(&a);
}

static void test_strings_lists_maps(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  var v[3] = {{"s", S("ab")}, {"k", S("a")}, {"n", value_int(2)}};
  value r = run_opts(&a, "s + 'c' + s", v, 3, NULL);
  CHECK(r.kind == V_STRING && r.n == 5 && memcmp(r.s, "abcab", 5) == 0);
  r = run_opts(&a, "[n] + [1, 2] + []", v, 3, NULL);
  CHECK(r.kind == V_LIST && r.n == 3 && is_int(r.items[0], 2) && is_int(r.items[2], 2));
  CHECK(is_err(run_opts(&a, "{k: 1, 'a': 2}", v, 3, NULL))); /* repeated key */
  CHECK(is_err(run_opts(&a, "{n: 1, 2u: 2}", v, 3, NULL)));  /* 2 == 2u */
  CHECK(is_err(run_opts(&a, "{1.5: n}", v, 3, NULL)));       /* double key */
  CHECK(is_int(run_opts(&a, "{k: 1, 'b': n}['b']", v, 3, NULL), 2));
  CHECK(is_int(run_opts(&a, "[10, 20, 30][dyn(1u)] + [10, 20][n - 1]", v, 3, NULL), 40));
  CHECK(is_err(run_opts(&a, "[1][n]", v, 3, NULL)));
  CHECK(is_err(run_opts(&a, "[1][-1]", v, 3, NULL)));
  CHECK(is_err(run_opts(&a, "[1, 2][0.5]", v, 3, NULL)));
  CHECK(is_int(run_opts(&a, "[1, 2][1.0]", v, 3, NULL), 2));
  CHECK(is_bool(run_opts(&a, "n in [1, 2.0, 3u] && 3.0 in {1: 1, 3u: 3}", v, 3, NULL), 1));
  /* `in` over a hashed constant list: numbers match across int/uint/double */
  const char *big = "x in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 'a']";
  var w[1] = {{"x", value_uint(17)}};
  CHECK(is_bool(run_opts(&a, big, w, 1, NULL), 1));
  w[0].v = value_double(16.0);
  CHECK(is_bool(run_opts(&a, big, w, 1, NULL), 1));
  w[0].v = value_double(16.5);
  CHECK(is_bool(run_opts(&a, big, w, 1, NULL), 0));
  w[0].v = S("a");
  CHECK(is_bool(run_opts(&a, big, w, 1, NULL), 1));
  w[0].v = S("b");
  CHECK(is_bool(run_opts(&a, big, w, 1, NULL), 0));
  /* macros over maps iterate keys; map with a filter */
  CHECK(is_bool(ev0(&a, "{'a': 1, 'b': 2}.map(k, k + k) == ['aa', 'bb']"), 1));
  CHECK(is_bool(ev0(&a, "[1, 2, 3, 4].map(x, x % 2 == 0, x * 10) == [20, 40]"), 1));
  CHECK(is_bool(ev0(&a, "[[1], [2, 3]].all(l, l.all(x, x > 0))"), 1));
  /* two-variable comprehensions: index/element of lists, key/value of maps */
  CHECK(is_bool(ev0(&a, "[10, 20].all(i, v, v == (i + 1) * 10)"), 1));
  CHECK(is_bool(ev0(&a, "{'a': 1, 'b': 2}.exists(k, v, k == 'b' && v == 2)"), 1));
  CHECK(is_bool(ev0(&a, "[5, 6].existsOne(i, v, v - i == 5)"), 0));
  CHECK(is_bool(ev0(&a, "[5, 7].existsOne(x, x == 7)"), 1));
  CHECK(is_bool(ev0(&a, "[1, 2, 3].transformList(i, v, i > 0, v * i) == [2, 6]"), 1));
  CHECK(is_bool(ev0(&a, "{'a': 1}.transformMap(k, v, k + string(v)) == {'a': 'a1'}"), 1));
  CHECK(is_bool(ev0(&a, "[7, 8].transformMap(i, v, v + i) == {0: 7, 1: 9}"), 1));
  CHECK(is_err(ev0(&a, "[0, 1].all(i, v, 1 / v == 1 / i)")));
  /* cel.bind */
  CHECK(is_int(ev0(&a, "cel.bind(t, 20, cel.bind(u, t + 1, t + u))"), 41));
  arena_free(&a);
}

static void test_type_values(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  value r = ev0(&a, "int");
  CHECK(r.kind == V_TYPE && r.n == V_INT);
  CHECK(is_bool(ev0(&a, "type(1) == int && type('') == string && type(type) == type"), 1));
  CHECK(is_bool(ev0(&a, "type(null) == null_type && type([]) == list && type({}) == map"), 1));
  r = ev0(&a, "google.protobuf.Timestamp");
  CHECK(r.kind == V_TYPE && r.n == V_TIMESTAMP);
  CHECK(is_err(ev0(&a, "dyn")));
  /* a variable named like a type wins */
  var v[1] = {{"int", value_int(5)}};
  CHECK(is_int(run_opts(&a, "int + 1", v, 1, NULL), 6));
  arena_free(&a);
}

static void test_time_arithmetic(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  var v[5] = {
      {"t", value_timestamp(1234567890, 500000000)},
      {"d", value_duration(1, 600000000)},
      {"tmin", value_timestamp(-62135596800LL, 0)},
      {"tmax", value_timestamp(253402300799LL, 999999999)},
      {"big", value_duration(200000000000LL, 0)},
  };
  value r = run_opts(&a, "t + d", v, 5, NULL);
  CHECK(r.kind == V_TIMESTAMP && r.i == 1234567892 && r.n == 100000000);
  r = run_opts(&a, "d + t", v, 5, NULL);
  CHECK(r.kind == V_TIMESTAMP && r.i == 1234567892 && r.n == 100000000);
  r = run_opts(&a, "t - d", v, 5, NULL);
  CHECK(r.kind == V_TIMESTAMP && r.i == 1234567888 && r.n == 900000000);
  r = run_opts(&a, "(t - d) - t", v, 5, NULL);
  CHECK(r.kind == V_DURATION && r.i == -1 && (int32_t)r.n == -600000000);
  r = run_opts(&a, "d + d", v, 5, NULL);
  CHECK(r.kind == V_DURATION && r.i == 3 && r.n == 200000000);
  r = run_opts(&a, "-d", v, 5, NULL);
  CHECK(r.kind == V_DURATION && r.i == -1 && (int32_t)r.n == -600000000);
  CHECK(is_bool(run_opts(&a, "t - d < t && d < d + d && t == t", v, 5, NULL), 1));
  CHECK(err_has(run_opts(&a, "tmin - d", v, 5, NULL), "range"));
  CHECK(err_has(run_opts(&a, "tmax + d", v, 5, NULL), "range"));
  CHECK(err_has(run_opts(&a, "tmax - tmin", v, 5, NULL), "range"));
  CHECK(err_has(run_opts(&a, "big + big", v, 5, NULL), "range"));
  CHECK(is_err(run_opts(&a, "t + t", v, 5, NULL)));
  CHECK(is_err(run_opts(&a, "t < d", v, 5, NULL)));
  arena_free(&a);
}

/* ---- names ---- */

static void test_qualified_names(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  map_entry ab[1] = {{S("c"), S("from a.b")}};
  map_entry aa[1] = {{S("b"), value_map(ab, 1)}};
  /* a.b.c bound directly beats a.b (a map) beats a */
  var v1[3] = {{"a.b.c", S("direct")}, {"a.b", value_map(ab, 1)}, {"a", value_map(aa, 1)}};
  held h = eval_held(&a, "a.b.c", v1, 3, NULL);
  CHECK(h.r.kind == V_STRING && h.r.n == 6 && memcmp(h.r.s, "direct", 6) == 0);
  expr_free(h.p);
  h = eval_held(&a, "a.b.c", v1 + 1, 2, NULL);
  CHECK(h.r.kind == V_STRING && h.r.n == 8 && memcmp(h.r.s, "from a.b", 8) == 0);
  expr_free(h.p);
  h = eval_held(&a, "a.b.c", v1 + 2, 1, NULL);
  CHECK(h.r.kind == V_STRING && h.r.n == 8);
  expr_free(h.p);
  CHECK(err_has(run_opts(&a, "a.b.c", NULL, 0, NULL), "undeclared reference to 'a.b.c'"));
  /* a comprehension variable shadows a bound name */
  var v2[1] = {{"x.y", value_int(1)}};
  CHECK(is_bool(run_opts(&a, "[{'y': 2}].all(x, x.y == 2)", v2, 1, NULL), 1));
  CHECK(is_int(run_opts(&a, "x.y", v2, 1, NULL), 1));
  /* containers: `y` in container "x" finds "x.y" first */
  var v3[2] = {{"x.y", value_int(1)}, {"y", value_int(2)}};
  expr_opts in_x = {.container = "x"};
  CHECK(is_int(run_opts(&a, "y", v3, 2, &in_x), 1));
  CHECK(is_int(run_opts(&a, "y", v3 + 1, 1, &in_x), 2));
  /* declared names are resolved at compile time */
  const char *const decl[] = {"a.b", "req"};
  expr_opts d = {.declared = decl, .ndeclared = 2};
  h = eval_held(&a, "a.b.c", v1 + 1, 2, &d);
  CHECK(h.r.kind == V_STRING && h.r.n == 8);
  expr_free(h.p);
  CHECK(is_bool(run_opts(&a, "type(1) == int", NULL, 0, &d), 1));
  arena_free(&a);
}

static void test_compile_errors_name_their_place(void) {
  const char *const decl[] = {"ctx"};
  expr_opts d = {.declared = decl, .ndeclared = 1};
  expr_program *p;
  expr_error err;
  const char *src = "ctx.a == 1 &&\n  usr.name == 'x'";
  CHECK(expr_compile(src, strlen(src), &d, &p, &err) != 0);
  CHECK(err.line == 2 && err.column == 3);
  CHECK(strstr(err.message, "2:3:") == err.message);
  CHECK(strstr(err.message, "undeclared reference to 'usr.name'") != NULL);
  CHECK(strstr(err.message, "^") != NULL);
  /* comprehension variables and type names are not undeclared */
  src = "[1].all(x, x > 0) && type(ctx) == map";
  CHECK(expr_compile(src, strlen(src), &d, &p, &err) == 0);
  expr_free(p);
  /* a bad constant regex is found at compile time, at the call */
  src = "ctx.a.matches('(')";
  CHECK(expr_compile(src, strlen(src), &d, &p, &err) != 0);
  CHECK(err.line == 1 && err.column == 15); /* at the pattern */
  /* syntax errors come from the parser with their place */
  src = "1 + )";
  CHECK(expr_compile(src, strlen(src), NULL, &p, &err) != 0);
  CHECK(err.line == 1 && err.column == 5);
}

static void test_unknown_functions_are_listed(void) {
  expr_program *p;
  expr_error err;
  const char *src = "f_unknown(1) || x.frob() || f_unknown(2) || size('a') == 1";
  CHECK(expr_compile(src, strlen(src), NULL, &p, &err) == 0);
  const char *const *names;
  uint32_t n = expr_unknown_functions(p, &names);
  CHECK(n == 2);
  if (n == 2) {
    CHECK_STR(names[0], "f_unknown");
    CHECK_STR(names[1], "frob");
  }
  arena a;
  arena_init(&a, NULL, 0, 0);
  eval_ctx ctx = {.arena = &a};
  CHECK(is_bool(expr_eval(p, NULL, &ctx), 1));
  expr_free(p);
  arena_free(&a);
}

static void test_folding_keeps_runtime_semantics(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  held h = eval_held(&a, "[1, 2] + [3] == [1, 2, 3] && {'a': [1]}.a[0] == 1", NULL, 0, NULL);
  CHECK(is_bool(h.r, 1));
  expr_free(h.p);
  CHECK(is_bool(ev0(&a, "{'a': 1, 'a': 2} == {} || true"), 1)); /* folded error absorbed */
  CHECK(is_err(ev0(&a, "{'a': 1, 'a': 2}")));
  CHECK(is_err(ev0(&a, "int('x')")));
  CHECK(is_bool(ev0(&a, "int('x') == 1 || true"), 1));
  /* a folded constant outlives the evaluation arena */
  h = eval_held(&a, "'ab' + 'cd'", NULL, 0, NULL);
  arena_reset(&a);
  CHECK(h.r.kind == V_STRING && h.r.n == 4 && memcmp(h.r.s, "abcd", 4) == 0);
  expr_free(h.p);
  arena_free(&a);
}

/* ---- threads: one program, many evaluations at once ---- */

typedef struct worker {
  const expr_program *p;
  int ok;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  arena a;
  arena_init(&a, NULL, 0, 0);
  w->ok = 1;
  for (int i = 0; i < 2000; i++) {
    var v[1] = {{"n", value_int(i)}};
    vars vs = {v, 1, 0};
    expr_activation act = {vars_lookup, &vs};
    eval_ctx ctx = {.arena = &a};
    value r = expr_eval(w->p, &act, &ctx);
    if (!is_int(r, (int64_t)i * 3 + 6)) w->ok = 0;
    arena_reset(&a);
  }
  arena_free(&a);
  return NULL;
}

static void test_one_program_many_threads(void) {
  const char *src =
      "[1, 2, 3].map(x, x + n).filter(y, y > 0).all(z, z >= n) ? "
      "[1, 2, 3].map(x, x + n)[0] + [1, 2, 3].map(x, x + n)[1] + "
      "[1, 2, 3].map(x, x + n)[2] : -1";
  expr_program *p;
  expr_error err;
  CHECK(expr_compile(src, strlen(src), NULL, &p, &err) == 0);
  pthread_t t[4];
  worker w[4];
  for (int i = 0; i < 4; i++) {
    w[i].p = p;
    pthread_create(&t[i], NULL, work, &w[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    CHECK(w[i].ok);
  }
  expr_free(p);
}

/* ---- the public API ---- */

static void test_public_api(void) {
  vd_error err;
  vd_expr *e;
  char *out;
  CHECK_STR(vd_version(), "0.1.0");
  CHECK(strcmp(vd_strerror(VD_EEVAL), vd_strerror(VD_ESYNTAX)) != 0);
  CHECK(vd_expr_compile("ctx.country == 'CN' && size(ctx.tags) > 1", -1, &e, &err) == 0);
  CHECK(vd_expr_eval_json(e, "{\"ctx\": {\"country\": \"CN\", \"tags\": [1, 2]}}", -1, &out,
                          &err) == 0);
  CHECK_STR(out, "true");
  vd_free(out);
  CHECK(vd_expr_eval_json(e, "{\"ctx\": {\"country\": \"CN\"}}", -1, &out, &err) == VD_EEVAL);
  CHECK(err.code == VD_EEVAL && strstr(err.message, "no such key: 'tags'") != NULL);
  CHECK(vd_expr_eval_json(e, "{\"ctx\": [1,}", -1, &out, &err) == VD_EJSON);
  CHECK(err.line == 1 && err.column > 0);
  CHECK(vd_expr_eval_json(e, "[1]", -1, &out, &err) == VD_EINVAL);
  vd_expr_free(e);

  CHECK(vd_expr_compile("[1, 2].map(x, x * 2) + [b'hi' == b'hi']", -1, &e, &err) == 0);
  CHECK(vd_expr_eval_json(e, NULL, 0, &out, &err) == 0);
  CHECK_STR(out, "[2,4,true]");
  vd_free(out);
  vd_expr_free(e);

  CHECK(vd_expr_compile("1 +\n  )", -1, &e, &err) == VD_ESYNTAX);
  CHECK(err.code == VD_ESYNTAX && err.line == 2 && err.column == 3);
  CHECK(vd_expr_compile("1 + 1 junk", 5, &e, &err) == 0); /* only "1 + 1" */
  CHECK(vd_expr_eval_json(e, "{}", -1, &out, &err) == 0);
  CHECK_STR(out, "2");
  vd_free(out);
  vd_expr_free(e);
}

int main(void) {
  arena_init(&keep, NULL, 0, 0);
  TEST_RUN(test_gate_over_sample_contexts);
  TEST_RUN(test_gate_allocates_nothing);
  TEST_RUN(test_cost_limit_stops_blowups);
  TEST_RUN(test_regex_work_is_charged_to_the_budget);
  TEST_RUN(test_memory_limit_is_an_error);
  TEST_RUN(test_error_absorption);
  TEST_RUN(test_arithmetic);
  TEST_RUN(test_strings_lists_maps);
  TEST_RUN(test_type_values);
  TEST_RUN(test_time_arithmetic);
  TEST_RUN(test_qualified_names);
  TEST_RUN(test_compile_errors_name_their_place);
  TEST_RUN(test_unknown_functions_are_listed);
  TEST_RUN(test_folding_keeps_runtime_semantics);
  TEST_RUN(test_one_program_many_threads);
  TEST_RUN(test_public_api);
  arena_free(&keep);
  TEST_END();
}
