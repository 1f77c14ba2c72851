/* test.h — the smallest test harness that does the job: CHECK records a
 * failure with file:line and goes on; TEST_MAIN returns non-zero when any
 * check failed and prints "N passed, N failed". */
#ifndef VD_TEST_H
#define VD_TEST_H

#include <stdio.h>
#include <string.h>

static int test_checks, test_failures;

#define CHECK(cond)                                                            \
  do {                                                                         \
    test_checks++;                                                             \
    if (!(cond)) {                                                             \
      test_failures++;                                                         \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

#define CHECK_MSG(cond, ...)                                                   \
  do {                                                                         \
    test_checks++;                                                             \
    if (!(cond)) {                                                             \
      test_failures++;                                                         \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
    }                                                                          \
  } while (0)

#define CHECK_STR(got, want)                                                         \
  do {                                                                               \
    const char *g_ = (got), *w_ = (want);                                            \
    test_checks++;                                                                   \
    if (!g_ || strcmp(g_, w_) != 0) {                                                \
      test_failures++;                                                               \
      fprintf(stderr, "%s:%d: got \"%s\", want \"%s\"\n", __FILE__, __LINE__,        \
              g_ ? g_ : "(null)", w_);                                               \
    }                                                                                \
  } while (0)

#define TEST_RUN(fn)  \
  do {                \
    fn();             \
  } while (0)

#define TEST_END()                                                                  \
  do {                                                                              \
    printf("%d passed, %d failed\n", test_checks - test_failures, test_failures);   \
    return test_failures ? 1 : 0;                                                   \
  } while (0)

#endif
