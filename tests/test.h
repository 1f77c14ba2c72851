/* test.h — the smallest test harness that does the job: CHECK records a
 * failure with file:line and goes on; TEST_MAIN returns non-zero when any
 * check failed and prints "N passed, N failed". */
#ifndef VD_TEST_H
#define VD_TEST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_checks, test_failures;

/* A fresh scratch folder, <base>/verdict-<tag>-XXXXXX with base $TMPDIR
 * (else /tmp), made in buf (cap bytes); returns buf. A test that cannot
 * make one has nothing to test: it says why and exits 2. */
static inline char *test_tmpdir(char *buf, size_t cap, const char *tag) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  int n = snprintf(buf, cap, "%s/verdict-%s-XXXXXX", base, tag);
  if (n < 0 || (size_t)n >= cap || !mkdtemp(buf)) {
    fprintf(stderr, "cannot make a scratch folder under %s: %s\n", base,
            n < 0 || (size_t)n >= cap ? "the path is too long" : strerror(errno));
    exit(2);
  }
  return buf;
}

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
