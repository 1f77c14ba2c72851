/* bench.h — what the benchmarks share: a scratch folder under $TMPDIR
 * (else /tmp), made once in one place. Header-only: each bench is one
 * file and includes it as "../bench.h". */
#ifndef VD_BENCH_H
#define VD_BENCH_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes $TMPDIR/verdict-bench-TAG-XXXXXX in buf (cap bytes) and returns
 * buf, or says why on stderr and returns NULL. */
static inline char *bench_tmpdir(char *buf, size_t cap, const char *tag) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  int n = snprintf(buf, cap, "%s/verdict-bench-%s-XXXXXX", base, tag);
  if (n < 0 || (size_t)n >= cap || !mkdtemp(buf)) {
    fprintf(stderr, "cannot make a scratch folder under %s: %s\n", base,
            n < 0 || (size_t)n >= cap ? "the path is too long" : strerror(errno));
    return NULL;
  }
  return buf;
}

#endif
