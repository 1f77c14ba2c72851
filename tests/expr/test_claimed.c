/* test_claimed.c — expr_opts.claimed: a claimed variable's field is asked
 * for as one dotted name, and everything else reads as it did.
 *
 * The activation here records every name it is asked for, so each case
 * checks both the value and exactly which names were read: `r.f` and
 * `has(r.f)` ask for "r.f" (and only fall back to `r` when that is
 * unbound), `r` alone, `r[...]` and macros over `r` ask for `r`, a
 * comprehension variable named `r` is not a lookup at all, and an
 * unclaimed root is read as before. */
#include <stdio.h>
#include <string.h>

#include "expr/expr.h"
#include "test.h"

typedef struct act {
  char asked[256]; /* names asked for, each followed by ';' */
  int bind_dotted; /* bind "r.f" (as r's field f would be) */
} act;

static int lookup(void *user, const char *name, size_t len, value *out) {
  static map_entry r[2], q[1];
  act *a = user;
  size_t n = strlen(a->asked);
  snprintf(a->asked + n, sizeof a->asked - n, "%.*s;", (int)len, name);
  r[0].key = value_str("f", 1);
  r[0].val = value_int(5);
  r[1].key = value_str("g", 1);
  r[1].val = value_str("x", 1);
  q[0].key = value_str("f", 1);
  q[0].val = value_int(1);
#define IS(s) (len == sizeof(s) - 1 && memcmp(name, s, len) == 0)
  if (IS("r"))
    *out = value_map(r, 2);
  else if (IS("q"))
    *out = value_map(q, 1);
  else if (IS("r.f") && a->bind_dotted)
    *out = value_int(5);
  else
    return -1;
#undef IS
  return 0;
}

static const char *const CLAIMED[] = {"r", "none"};
static const expr_opts OPTS = {.simple_names = 1, .claimed = CLAIMED, .nclaimed = 2};

/* src evaluated with "r.f" bound or not: its result as text and the names
 * read must be the ones given. */
static void expect(const char *src, int bind_dotted, const char *want, const char *asked) {
  expr_program *p = NULL;
  expr_error err;
  if (expr_compile(src, strlen(src), &OPTS, &p, &err)) {
    CHECK_MSG(0, "`%s` does not compile: %s", src, err.message);
    return;
  }
  act a = {.bind_dotted = bind_dotted};
  expr_activation ea = {.lookup = lookup, .user = &a};
  arena m;
  arena_init(&m, NULL, 0, 1u << 20);
  eval_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.arena = &m;
  value v = expr_eval(p, &ea, &ctx);
  char got[256];
  if (v.kind == V_BOOL)
    snprintf(got, sizeof got, "%s", v.b ? "true" : "false");
  else if (v.kind == V_INT)
    snprintf(got, sizeof got, "%lld", (long long)v.i);
  else if (v.kind == V_ERROR)
    snprintf(got, sizeof got, "error: %.*s", (int)v.n, v.s);
  else
    snprintf(got, sizeof got, "(kind %d)", v.kind);
  CHECK_MSG(strcmp(got, want) == 0, "`%s` (r.f %s): got %s, want %s", src,
            bind_dotted ? "bound" : "unbound", got, want);
  CHECK_MSG(strcmp(a.asked, asked) == 0, "`%s` (r.f %s): asked for %s, want %s", src,
            bind_dotted ? "bound" : "unbound", a.asked, asked);
  arena_free(&m);
  expr_free(p);
}

static void test_field_read_as_one_name(void) {
  expect("r.f == 5", 1, "true", "r.f;");
  expect("r.f + r.f", 1, "10", "r.f;r.f;");
  /* unbound: r, then its field, as without the claim */
  expect("r.f == 5", 0, "true", "r.f;r;");
  expect("r.g == 'x'", 1, "true", "r.g;r;");
  /* further fields are selected from what "r.f" gave */
  expect("r.f.x", 1, "error: type 'int' does not support field selection ('.x')", "r.f;");
  expect("r.nope", 0, "error: no such key: 'nope'", "r.nope;r;");
}

static void test_has(void) {
  expect("has(r.f)", 1, "true", "r.f;");
  expect("has(r.f)", 0, "true", "r.f;r;");
  expect("has(r.nope)", 0, "false", "r.nope;r;");
  expect("has(r.f.x)", 1, "error: has(): type 'int' does not support field selection", "r.f;");
  /* has() of an unbound claimed name: the root is named, as a plain
   * variable's error names it */
  expect("has(none.f)", 0, "error: undeclared reference to 'none'", "none.f;none;");
  expect("none.f", 0, "error: undeclared reference to 'none'", "none.f;none;");
}

static void test_whole_variable(void) {
  expect("size(r)", 1, "2", "r;");
  expect("r['f']", 1, "5", "r;");
  expect("r.exists(k, k == 'g')", 1, "true", "r;");
  expect("'f' in r", 1, "true", "r;");
}

static void test_not_claimed(void) {
  /* a comprehension variable is not a lookup, claimed name or not */
  expect("[{'f': 2}].all(r, r.f == 2 && has(r.f))", 1, "true", "");
  /* an unclaimed root: read as a variable, its field selected */
  expect("q.f == 1 && has(q.f)", 1, "true", "q;q;");
}

/* Without simple_names the claim does nothing: CEL's own dotted-name
 * resolution (longest bound prefix first) applies. */
static void test_needs_simple_names(void) {
  static const expr_opts cel = {.claimed = CLAIMED, .nclaimed = 2};
  expr_program *p = NULL;
  expr_error err;
  CHECK(expr_compile("has(r.f)", 8, &cel, &p, &err) == 0);
  act a = {.bind_dotted = 1};
  expr_activation ea = {.lookup = lookup, .user = &a};
  arena m;
  arena_init(&m, NULL, 0, 1u << 20);
  eval_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.arena = &m;
  value v = p ? expr_eval(p, &ea, &ctx) : value_null();
  CHECK(v.kind == V_BOOL && v.b);
  CHECK_STR(a.asked, "r;");
  arena_free(&m);
  expr_free(p);
}

int main(void) {
  TEST_RUN(test_field_read_as_one_name);
  TEST_RUN(test_has);
  TEST_RUN(test_whole_variable);
  TEST_RUN(test_not_claimed);
  TEST_RUN(test_needs_simple_names);
  TEST_END();
}
