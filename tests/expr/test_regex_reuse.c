/* test_regex_reuse.c — a thread reuses one PCRE2 match context and match
 * data for all its matches. What a user relies on stays true: each
 * evaluation gets its own match limit (a small one after a large one and
 * the other way round), a match that failed on its limit does not spoil the
 * next one, and threads matching at once all get their own right answers.
 * Threads that exit free what they made (the sanitizer run checks). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/value.h"
#include "expr/expr.h"
#include "test.h"

static int lookup_s(void *user, const char *name, size_t len, value *out) {
  if (len != 1 || name[0] != 's') return -1;
  *out = *(const value *)user;
  return 0;
}

/* 1 true, 0 false, -1 error (its text in err, if given) */
static int eval_on(const expr_program *p, arena *a, const char *subject, uint32_t limit, char *err,
                   size_t err_size) {
  value s = value_str(subject, (uint32_t)strlen(subject));
  expr_activation act = {lookup_s, &s};
  eval_ctx ctx = {.arena = a, .regex_match_limit = limit};
  value r = expr_eval(p, &act, &ctx);
  int out = r.kind == V_BOOL ? (int)r.b : -1;
  if (out < 0 && err) snprintf(err, err_size, "%.*s", (int)r.n, r.s);
  arena_reset(a);
  return out;
}

static expr_program *compile(const char *src, const expr_opts *opts) {
  expr_program *p = NULL;
  expr_error err;
  if (expr_compile(src, strlen(src), opts, &p, &err) != 0) {
    fprintf(stderr, "%s: %s\n", src, err.message);
    return NULL;
  }
  return p;
}

static void check_limits(const expr_opts *opts) {
  /* a few thousand steps to fail: far under the default limit, far over 40 */
  const char *subject = "aaaaaaaaaaaab";
  expr_program *p = compile("s.matches('(a+)+$')", opts);
  CHECK(p != NULL);
  if (!p) return;
  arena a;
  arena_init(&a, NULL, 0, 0);
  char err[300];
  /* 200 rounds: past the deferred program's switch to JIT */
  for (int i = 0; i < 200; i++) {
    CHECK_MSG(eval_on(p, &a, subject, 0, NULL, 0) == 0, "round %d, default limit", i);
    err[0] = '\0';
    CHECK_MSG(eval_on(p, &a, subject, 40, err, sizeof err) == -1, "round %d, limit 40", i);
    CHECK_MSG(strstr(err, "match limit exceeded") != NULL, "round %d: %s", i, err);
    CHECK_MSG(eval_on(p, &a, "aaaa", 40, NULL, 0) == 1, "round %d, short subject", i);
    CHECK_MSG(eval_on(p, &a, "aab", 40, NULL, 0) == 0, "round %d, no match", i);
    CHECK_MSG(eval_on(p, &a, subject, 100000, NULL, 0) == 0, "round %d, limit 100000", i);
  }
  arena_free(&a);
  expr_free(p);
}

static void test_each_evaluation_gets_its_own_limit(void) {
  check_limits(NULL);
  expr_opts later = {.defer_jit = 1};
  check_limits(&later);
}

typedef struct worker {
  const expr_program *p;
  int id;
  int wrong;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  arena a;
  arena_init(&a, NULL, 0, 0);
  char yes[64], no[64];
  for (int i = 0; i < 2000; i++) {
    snprintf(yes, sizeof yes, "/api/v%d/users/%d", w->id + 1, i);
    snprintf(no, sizeof no, "/api/v%d/users/%dx", w->id + 1, i);
    if (eval_on(w->p, &a, yes, 0, NULL, 0) != 1) w->wrong++;
    if (eval_on(w->p, &a, no, 0, NULL, 0) != 0) w->wrong++;
  }
  arena_free(&a);
  return NULL;
}

static void test_threads_match_at_once(void) {
  expr_program *p = compile("s.matches('^/api/v[0-9]+/users/[0-9]+$')", NULL);
  CHECK(p != NULL);
  if (!p) return;
  pthread_t t[4];
  worker w[4];
  for (int round = 0; round < 2; round++) { /* new threads: what the first made is freed */
    for (int i = 0; i < 4; i++) {
      w[i] = (worker){.p = p, .id = i};
      CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
      pthread_join(t[i], NULL);
      CHECK_MSG(w[i].wrong == 0, "thread %d: %d wrong answers", i, w[i].wrong);
    }
  }
  expr_free(p);
}

int main(void) {
  TEST_RUN(test_each_evaluation_gets_its_own_limit);
  TEST_RUN(test_threads_match_at_once);
  TEST_END();
}
