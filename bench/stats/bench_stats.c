/* bench-stats — what the live figures behind /v1/stats cost a decision.
 *
 * One engine on the example bundle (snapshots off), the nine example
 * requests bench/http sends, decided in turn on one reused vd_decision, on
 * one thread, in alternating rounds: deciding alone, and deciding then
 * counting the decision as `verdict serve` does (stats_count_decision into
 * a worker's stats_worker). Reported: decisions/s of each (median of the
 * rounds), and the cost of the count alone (stats_count_decision called
 * again and again on the last decision), in ns.
 *
 *   bench-stats [--rounds N] [--seconds S]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "server/stats.h"
#include "verdict.h"

#ifndef VD_SOURCE_DIR
#define VD_SOURCE_DIR "."
#endif

static const char *const files[] = {"gate",
                                    "gate_mfa",
                                    "gate_scanner",
                                    "payment",
                                    "payment_card_testing",
                                    "routing",
                                    "agent_edit.json",
                                    "agent_rm.json",
                                    "agent_headless_install.json"};

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)len + 1);
  if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) buf[len] = '\0', *n = (size_t)len;
  return buf;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int rounds = 5;
  double seconds = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
  }
  if (rounds < 1 || rounds > 99) rounds = 5;
  char *req[9];
  size_t len[9];
  for (int i = 0; i < 9; i++) {
    char path[512];
    const char *f = files[i];
    snprintf(path, sizeof path, "%s/examples/requests/%s%s", VD_SOURCE_DIR, f,
             strstr(f, ".json") ? "" : ".json");
    if (!(req[i] = slurp(path, &len[i]))) {
      fprintf(stderr, "bench-stats: cannot read %s\n", path);
      return 1;
    }
  }
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_engine *e;
  vd_error err;
  if (vd_engine_open(VD_SOURCE_DIR "/examples/policies", &o, &e, &err) < 0) {
    fprintf(stderr, "bench-stats: %s\n", err.message);
    return 1;
  }
  vd_decision *d = vd_decision_new();
  stats *s = stats_new();
  stats_worker *w = calloc(1, sizeof *w);
  if (!d || !s || !w) return 1;

  double with[99], without[99];
  unsigned long long sink = 0;
  for (int r = 0; r < 2 * rounds; r++) {
    int count = r & 1;
    uint64_t t0 = clock_mono_ns(), n = 0, deadline = t0 + (uint64_t)(seconds * 1e9);
    for (;;) {
      for (int i = 0; i < 9; i++) {
        if (vd_decide_json(e, req[i], (long)len[i], d, &err) != 0) {
          fprintf(stderr, "bench-stats: %s: %s\n", files[i], err.message);
          return 1;
        }
        const char *out;
        size_t on;
        vd_decision_render(d, 0, &out, &on);
        sink += on;
        if (count) stats_count_decision(s, w, d);
      }
      n += 9;
      if ((n & 1023) < 9 && clock_mono_ns() >= deadline) break;
    }
    double rate = (double)n / ((double)(clock_mono_ns() - t0) / 1e9);
    (count ? with : without)[r / 2] = rate;
  }
  /* the count alone, on the last decision */
  uint64_t t0 = clock_mono_ns();
  const unsigned reps = 5000000;
  for (unsigned i = 0; i < reps; i++) stats_count_decision(s, w, d);
  double per = (double)(clock_mono_ns() - t0) / reps;

  qsort(with, (size_t)rounds, sizeof *with, cmp_d);
  qsort(without, (size_t)rounds, sizeof *without, cmp_d);
  double a = without[rounds / 2], b = with[rounds / 2];
  printf("decide + render alone:            %10.0f decisions/s (median of %d rounds of %.1f s)\n",
         a, rounds, seconds);
  printf("decide + render + stats count:    %10.0f decisions/s (%+.1f%%)\n", b,
         100.0 * (b - a) / a);
  printf("stats_count_decision alone:       %10.1f ns a call\n", per);
  fprintf(stderr, "(%llu)\n", sink);
  free(w);
  stats_free(s);
  vd_decision_free(d);
  vd_engine_close(e);
  for (int i = 0; i < 9; i++) free(req[i]);
  return 0;
}
