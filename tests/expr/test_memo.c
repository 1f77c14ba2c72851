/* test_memo.c — lowerAscii/upperAscii of the same string within one
 * evaluation context are answered from the context's memo (eval_ctx.memo),
 * and that changes nothing a user sees: the same result, the same cost
 * charged (decisions record their cost), upper and lower kept apart, a
 * different string (even of the same length) computed afresh, and the cost
 * limit still enforced on a remembered answer. */
#include <string.h>

#include "core/arena.h"
#include "core/value.h"
#include "expr/expr.h"
#include "test.h"

static value UA, OTHER;

static int lookup(void *user, const char *name, size_t len, value *out) {
  (void)user;
  if (len == 2 && !memcmp(name, "ua", 2)) return *out = UA, 0;
  if (len == 5 && !memcmp(name, "other", 5)) return *out = OTHER, 0;
  return -1;
}

static expr_program *compile(const char *src) {
  expr_program *p = NULL;
  expr_error err;
  if (expr_compile(src, strlen(src), NULL, &p, &err) != 0) {
    fprintf(stderr, "  compile error for %s: %s\n", src, err.message);
    return NULL;
  }
  return p;
}

/* Evaluates each of srcs in turn with one context; returns the last value
 * (as a string in a) and the total cost. */
static const char *run(arena *a, const char *const *srcs, int n, uint64_t limit, uint64_t *cost) {
  eval_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.arena = a;
  ctx.cost_limit = limit;
  expr_activation act = {.lookup = lookup, .user = NULL};
  value v = VALUE_ERR("nothing ran");
  for (int i = 0; i < n; i++) {
    expr_program *p = compile(srcs[i]);
    if (!p) return NULL;
    v = expr_eval(p, &act, &ctx);
    if (v.kind == V_STRING || v.kind == V_ERROR) v.s = arena_strndup(a, v.s, v.n);
    expr_free(p);
  }
  *cost = ctx.cost;
  if (v.kind == V_BOOL) return v.b ? "true" : "false";
  return v.kind == V_STRING || v.kind == V_ERROR ? v.s : "?";
}

int main(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  static const char ua[] = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120.0 Safari";
  static const char other[] =
      "MOZILLA/5.0 (X11; LINUX X86_64) APPLEWEBKIT/537.36 CHROME/120.0 SAFARI";
  UA = value_str(ua, sizeof ua - 1);
  UA.flags = VF_ASCII;
  OTHER = value_str(other, sizeof other - 1);
  OTHER.flags = VF_ASCII;

  uint64_t one, two, three;
  const char *s1[] = {"ua.lowerAscii()"};
  CHECK_STR(run(&a, s1, 1, 0, &one),
            "mozilla/5.0 (x11; linux x86_64) applewebkit/537.36 chrome/120.0 safari");
  CHECK(one > 0);
  /* the second lowering in the same context is remembered: same cost */
  const char *s2[] = {"ua.lowerAscii().contains(\"chrome\")", "ua.lowerAscii()"};
  uint64_t pred;
  const char *s2a[] = {"ua.lowerAscii().contains(\"chrome\")"};
  run(&a, s2a, 1, 0, &pred);
  CHECK_STR(run(&a, s2, 2, 0, &two),
            "mozilla/5.0 (x11; linux x86_64) applewebkit/537.36 chrome/120.0 safari");
  CHECK(two == pred + one);
  /* upper after lower of the same string, and lower of another string of the same length */
  const char *s3[] = {"ua.lowerAscii()", "ua.upperAscii()"};
  CHECK_STR(run(&a, s3, 2, 0, &three),
            "MOZILLA/5.0 (X11; LINUX X86_64) APPLEWEBKIT/537.36 CHROME/120.0 SAFARI");
  const char *s4[] = {"ua.lowerAscii()", "other.lowerAscii() == ua.lowerAscii()"};
  CHECK_STR(run(&a, s4, 2, 0, &three), "true");
  const char *s5[] = {"ua.lowerAscii()", "other.lowerAscii()"};
  CHECK_STR(run(&a, s5, 2, 0, &three),
            "mozilla/5.0 (x11; linux x86_64) applewebkit/537.36 chrome/120.0 safari");
  /* a remembered answer still counts against the limit */
  const char *s6[] = {"ua.lowerAscii()", "ua.lowerAscii()"};
  CHECK_STR(run(&a, s6, 2, one + one / 2, &three), "cost limit exceeded");
  arena_free(&a);
  TEST_END();
}
