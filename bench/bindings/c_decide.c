/* c_decide.c — the C lane of bench/bindings: decides every request of
 * REQUESTS (one JSON request a line; an "expect" member, the generator's
 * answer and the last member of the line, is checked and not sent) with the
 * bundle in BUNDLE through vd_decide_json on a reused vd_decision, snapshots
 * off, and prints one line:
 *   {"lane":"C vd_decide_json","ns_per_decision":N,"cpu_ns_per_decision":C,"decisions":K}
 * The lines are read into memory before timing; N is the median of three
 * timed passes (wall clock) after a warm-up pass, C the process CPU time of
 * that same pass.
 *
 *   bindings-c-lane REQUESTS BUNDLE
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "verdict.h"

typedef struct {
  char *text;
  size_t len;
  char expect[16];
} line;

static double now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Cuts `,"expect":"X"}` off the end of l into l->expect. */
static void cut_expect(line *l) {
  char *at = strstr(l->text, ",\"expect\":\"");
  l->expect[0] = '\0';
  if (!at) return;
  char *v = at + strlen(",\"expect\":\""), *end = strchr(v, '"');
  if (!end || (size_t)(end - v) >= sizeof l->expect) return;
  memcpy(l->expect, v, (size_t)(end - v));
  l->expect[end - v] = '\0';
  at[0] = '}';
  at[1] = '\0';
  l->len = (size_t)(at + 1 - l->text);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: bindings-c-lane REQUESTS BUNDLE\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "r");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  line *lines = NULL;
  size_t n = 0, cap = 0, lcap = 0;
  char *buf = NULL;
  ssize_t got;
  while ((got = getline(&buf, &lcap, f)) > 0) {
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r')) buf[--got] = '\0';
    if (!got) continue;
    if (n == cap && !(lines = realloc(lines, (cap = cap ? cap * 2 : 1024) * sizeof *lines))) {
      fprintf(stderr, "out of memory\n");
      return 1;
    }
    lines[n].text = strdup(buf);
    lines[n].len = (size_t)got;
    cut_expect(&lines[n]);
    n++;
  }
  free(buf);
  fclose(f);
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_engine *e;
  vd_error err;
  if (vd_engine_open(argv[2], &o, &e, &err) < 0) {
    fprintf(stderr, "%s: %s\n", argv[2], err.message);
    return 1;
  }
  vd_decision *d = vd_decision_new();
  for (size_t i = 0; i < n; i++) { /* warm-up, and the check */
    if (vd_decide_json(e, lines[i].text, (long)lines[i].len, d, &err) < 0) {
      fprintf(stderr, "line %zu: %s\n", i + 1, err.message);
      return 1;
    }
    const char *a = vd_decision_action(d);
    if (lines[i].expect[0] && (!a || strcmp(a, lines[i].expect) != 0)) {
      fprintf(stderr, "line %zu: %s, expected %s\n", i + 1, a ? a : "(none)", lines[i].expect);
      return 1;
    }
  }
  double wall[3], cpu[3];
  for (int r = 0; r < 3; r++) {
    double w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (size_t i = 0; i < n; i++) vd_decide_json(e, lines[i].text, (long)lines[i].len, d, &err);
    wall[r] = (now_ns(CLOCK_MONOTONIC) - w0) / (double)n;
    cpu[r] = (now_ns(CLOCK_PROCESS_CPUTIME_ID) - c0) / (double)n;
  }
  qsort(wall, 3, sizeof *wall, cmp);
  qsort(cpu, 3, sizeof *cpu, cmp);
  printf("{\"lane\":\"C vd_decide_json\",\"ns_per_decision\":%.0f,\"cpu_ns_per_decision\":%.0f,"
         "\"decisions\":%zu}\n",
         wall[1], cpu[1], n);
  vd_decision_free(d);
  vd_engine_close(e);
  for (size_t i = 0; i < n; i++) free(lines[i].text);
  free(lines);
  return 0;
}
