/* test_regex_oneshot.c — a program compiled with expr_opts.defer_jit (the
 * hook and `verdict decide`: one thread, often one decision) matches exactly
 * as one compiled eagerly. Such a program compiles a constant pattern at its
 * first match and runs PCRE2's interpreter until the pattern has run a few
 * dozen times, then its JIT code; eagerly, the JIT runs from the start.
 * Every pattern here is run far past that switch, on subjects that go to
 * PCRE2 (not to the literal-set fast path): ASCII and not, matching and not,
 * UTF-8 that a byte-wise reading would get wrong. A pattern PCRE2 rejects
 * fails the eager compile, and every match of the deferred program, with
 * the same message. */
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/value.h"
#include "expr/expr.h"
#include "test.h"

static arena A;

static int lookup_s(void *user, const char *name, size_t len, value *out) {
  if (len != 1 || name[0] != 's') return -1;
  *out = *(const value *)user;
  return 0;
}

/* "true", "false", or "error:<message>" */
static void eval_text(const expr_program *p, const char *subject, char *out, size_t size) {
  value s = value_str(subject, (uint32_t)strlen(subject));
  expr_activation act = {lookup_s, &s};
  eval_ctx ctx = {.arena = &A};
  value r = expr_eval(p, &act, &ctx);
  if (r.kind == V_BOOL)
    snprintf(out, size, "%s", r.b ? "true" : "false");
  else if (r.kind == V_ERROR)
    snprintf(out, size, "error:%.*s", (int)r.n, r.s);
  else
    snprintf(out, size, "kind %d", (int)r.kind);
}

static const char *const SUBJECTS[] = {
    "git push --force origin main",
    "git push origin feature/x",
    "RM -RF /",
    "rm -rf ./build",
    "call 555-1234 now",
    "555-12",
    "caf\xc3\xa9\xc3\xa9",
    "\xc3\xa9",
    "x",
    "a\n",
    "12-12 and data",
    "",
    "\xe2\x82\xac 12-3456 \xf0\x9f\x98\x80",
};
#define NSUBJECTS (sizeof SUBJECTS / sizeof SUBJECTS[0])

static void test_deferred_regex_matches_like_eager_past_the_jit(void) {
  static const char *const patterns[] = {
      "^(git|hg)\\s+push\\b.*--force",
      "\\d{3}-\\d{4}",
      "(?i)^rm\\s+-[a-z]*r",
      "\xc3\xa9+$",
      "^.$",
      "ta$",
      "(\\d+)-\\1",
      "[^\\x00-\\x7f]",
  };
  expr_opts later = {.defer_jit = 1};
  for (size_t k = 0; k < sizeof patterns / sizeof patterns[0]; k++) {
    char src[200];
    snprintf(src, sizeof src, "s.matches(r'%s')", patterns[k]);
    expr_program *eager, *deferred;
    expr_error err;
    CHECK_MSG(expr_compile(src, strlen(src), NULL, &eager, &err) == 0, "%s: %s", src, err.message);
    CHECK_MSG(expr_compile(src, strlen(src), &later, &deferred, &err) == 0, "%s: %s", src,
              err.message);
    int matched = 0;
    /* 300 matches: well past the one that JIT-compiles the pattern */
    for (int i = 0; i < 300; i++) {
      const char *subject = SUBJECTS[(size_t)i % NSUBJECTS];
      char want[300], got[300];
      eval_text(eager, subject, want, sizeof want);
      eval_text(deferred, subject, got, sizeof got);
      CHECK_MSG(strcmp(want, got) == 0, "%s on \"%s\" (match %d): eager %s, deferred %s", src,
                subject, i, want, got);
      matched += strcmp(got, "true") == 0;
      arena_reset(&A);
    }
    CHECK_MSG(matched > 0 && matched < 300, "%s: the subjects must both match and not", src);
    expr_free(eager);
    expr_free(deferred);
  }
}

static void test_deferred_bad_pattern_fails_every_match(void) {
  const char *src = "s.matches('a(')";
  expr_opts later = {.defer_jit = 1};
  expr_program *p;
  expr_error err;
  CHECK(expr_compile(src, strlen(src), NULL, &p, &err) != 0);
  CHECK(strstr(err.message, "invalid regular expression 'a('") != NULL);
  CHECK(expr_compile(src, strlen(src), &later, &p, &err) == 0);
  for (int i = 0; i < 100; i++) {
    char got[300];
    eval_text(p, SUBJECTS[(size_t)i % NSUBJECTS], got, sizeof got);
    CHECK_MSG(
        strstr(got, "error:invalid regular expression 'a(': missing closing parenthesis") == got,
        "match %d: %s", i, got);
    arena_reset(&A);
  }
  expr_free(p);
}

int main(void) {
  arena_init(&A, NULL, 0, 0);
  TEST_RUN(test_deferred_regex_matches_like_eager_past_the_jit);
  TEST_RUN(test_deferred_bad_pattern_fails_every_match);
  arena_free(&A);
  TEST_END();
}
