/* bench-replay — replay throughput with one worker and with two, on the
 * same snapshot log, in one run.
 *
 * Records a log first (the example bundle deciding the sample requests in
 * examples/requests/, or a JSON Lines file `verdict gen` made, over and
 * over until --count snapshots), then replays it as `verdict replay` does
 * (the determinism check: replay_run re-deciding each snapshot under its
 * recorded version and feeding the scorer), rounds alternating 1 worker /
 * 2 workers so that a noisy neighbour hits both alike. Prints the median
 * snapshots/s (wall clock) of each, the speed-up of 2 over 1 (target:
 * >= 1.7 on two cores) and the machine's load average before and after,
 * without which a figure from a shared machine means little.
 *
 *   bench-replay [--requests FILE.jsonl] [--count N] [--rounds R] [--workers W]
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../bench.h"
#include "replay/replay.h"
#include "replay/score.h"
#include "verdict.h"

#ifndef VD_SOURCE_DIR
#define VD_SOURCE_DIR "."
#endif

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = sz >= 0 ? malloc((size_t)sz + 1) : NULL;
  if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
    free(b);
    b = NULL;
  }
  fclose(f);
  if (b) b[sz] = 0;
  if (n) *n = (size_t)sz;
  return b;
}

typedef struct reqs {
  char **text;
  size_t n, cap;
} reqs;

static void reqs_add(reqs *r, const char *s, size_t n) {
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 256;
    r->text = realloc(r->text, r->cap * sizeof *r->text);
    if (!r->text) abort();
  }
  if (!(r->text[r->n++] = strndup(s, n))) abort();
}

static int load_requests(const char *file, reqs *r) {
  if (file) {
    char *b = slurp(file, NULL);
    if (!b) return -1;
    for (char *p = b; *p;) {
      char *e = strchr(p, '\n');
      size_t l = e ? (size_t)(e - p) : strlen(p);
      if (l) reqs_add(r, p, l);
      p += l + (e ? 1 : 0);
    }
    free(b);
    return 0;
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/examples/requests", VD_SOURCE_DIR);
  DIR *d = opendir(dir);
  if (!d) return -1;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    if (l < 6 || strcmp(de->d_name + l - 5, ".json")) continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    size_t n;
    char *b = slurp(path, &n);
    if (b) reqs_add(r, b, n);
    free(b);
  }
  closedir(d);
  return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(p);
}

static void loadavg(char *out, size_t cap) {
  FILE *f = fopen("/proc/loadavg", "r");
  out[0] = '\0';
  if (f) {
    if (fgets(out, (int)cap, f)) out[strcspn(out, "\n")] = '\0';
    fclose(f);
  }
}

static int score_cb(void *user, const replay_item *it) { return score_add(user, it) < 0; }

/* One replay of the log: snapshots/s wall, or -1; *cpu_us the CPU time of
 * every thread a snapshot, *main_us the calling thread's (reading, handing
 * over, scoring: what stays serial). */
static double replay_pass(const char *snaps, const char *store, int workers, uint64_t *seen,
                          uint64_t *reproduced, double *cpu_us, double *main_us) {
  replay_opts ro;
  memset(&ro, 0, sizeof ro);
  ro.snapshots_dir = snaps;
  ro.store_dir = store;
  ro.workers = workers;
  score_acc *acc = score_new(SCORE_DETERMINISM, NULL, NULL);
  replay_stats st;
  char err[1024];
  double t0 = mono_s(), p0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID), m0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
  int rc = replay_run(&ro, score_cb, acc, &st, err, sizeof err);
  double wall = mono_s() - t0;
  double p = cpu_s(CLOCK_PROCESS_CPUTIME_ID) - p0, m = cpu_s(CLOCK_THREAD_CPUTIME_ID) - m0;
  *cpu_us = st.seen ? p * 1e6 / (double)st.seen : 0;
  *main_us = st.seen ? m * 1e6 / (double)st.seen : 0;
  score_free(acc);
  if (rc != 0) {
    fprintf(stderr, "bench-replay: %s\n", err);
    return -1;
  }
  *seen = st.seen;
  *reproduced = st.reproduced;
  return (double)st.seen / wall;
}

int main(int argc, char **argv) {
  const char *req_file = NULL;
  long count = 50000;
  int rounds = 5, workers = 2;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--requests") && i + 1 < argc)
      req_file = argv[++i];
    else if (!strcmp(argv[i], "--count") && i + 1 < argc)
      count = atol(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--workers") && i + 1 < argc)
      workers = atoi(argv[++i]);
    else {
      fprintf(stderr,
              "usage: bench-replay [--requests FILE.jsonl] [--count N] [--rounds R] "
              "[--workers W]\n");
      return 2;
    }
  }
  if (count < 1000) count = 1000;
  if (rounds < 1 || rounds > 64) rounds = 5;
  if (workers < 2 || workers > REPLAY_MAX_WORKERS) workers = 2;

  char tmpl[1024];
  char *tmp = bench_tmpdir(tmpl, sizeof tmpl, "replay");
  if (!tmp) return 1;
  char policy[4096], store[4200], snaps[4200];
  snprintf(policy, sizeof policy, "%s/examples/policies", VD_SOURCE_DIR);
  snprintf(store, sizeof store, "%s/versions", tmp);
  snprintf(snaps, sizeof snaps, "%s/snapshots", tmp);
  reqs r = {0};
  if (load_requests(req_file, &r) < 0 || r.n == 0) {
    fprintf(stderr, "bench-replay: cannot read the requests\n");
    return 1;
  }

  /* the log */
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = store;
  o.snapshots_dir = snaps;
  vd_engine *e;
  vd_error err;
  if (vd_engine_open(policy, &o, &e, &err) != 0) {
    fprintf(stderr, "bench-replay: %s\n", err.message);
    return 1;
  }
  vd_decision *d = vd_decision_new();
  long decided = 0;
  for (long k = 0; decided < count && k < count * 4; k++)
    if (vd_decide_json(e, r.text[k % r.n], (long)strlen(r.text[k % r.n]), d, &err) == 0) decided++;
  vd_decision_free(d);
  vd_engine_close(e);
  if (decided == 0) {
    fprintf(stderr, "bench-replay: the bundle refused every request\n");
    return 1;
  }

  char load0[128], load1[128];
  loadavg(load0, sizeof load0);
  double *one = calloc((size_t)rounds, sizeof *one), *two = calloc((size_t)rounds, sizeof *two);
  if (!one || !two) return 1;
  double *c1 = calloc((size_t)rounds, sizeof *c1), *c2 = calloc((size_t)rounds, sizeof *c2);
  double *mn = calloc((size_t)rounds, sizeof *mn), ignored;
  if (!c1 || !c2 || !mn) return 1;
  uint64_t seen1 = 0, rep1 = 0, seen2 = 0, rep2 = 0;
  for (int k = 0; k < rounds; k++) {
    one[k] = replay_pass(snaps, store, 1, &seen1, &rep1, &c1[k], &ignored);
    two[k] = replay_pass(snaps, store, workers, &seen2, &rep2, &c2[k], &mn[k]);
    if (one[k] < 0 || two[k] < 0) return 1;
  }
  loadavg(load1, sizeof load1);
  double m1 = median(one, rounds), m2 = median(two, rounds);
  printf("replay throughput, determinism check + scoring, %llu snapshots, median of %d rounds\n",
         (unsigned long long)seen1, rounds);
  printf("   1 worker             %10.0f snapshots/s (wall)\n", m1);
  printf("   %d workers            %10.0f snapshots/s (wall)\n", workers, m2);
  printf("   speed-up             %10.2fx   (target >= 1.7x with 2 workers on 2 cores)\n",
         m2 / m1);
  /* What the figures allow on an idle machine: the work spread over the
   * cores, but never faster than the serial part on the calling thread. */
  double u1 = median(c1, rounds), u2 = median(c2, rounds), um = median(mn, rounds);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  double ncores = (double)(cores < workers ? cores : workers);
  double bound = u2 / ncores > um ? u2 / ncores : um;
  printf("   CPU a snapshot       %10.2f us with 1 worker, %.2f us with %d (all threads; "
         "%.2f us on the calling thread)\n",
         u1, u2, workers, um);
  printf("   idle-machine bound   %10.2fx   (1 worker's CPU / max(%d workers' CPU over %.0f "
         "cores, the calling thread's))\n",
         bound > 0 && u1 / bound < ncores ? u1 / bound : ncores, workers, ncores);
  printf("   reproduced           %llu/%llu and %llu/%llu\n", (unsigned long long)rep1,
         (unsigned long long)seen1, (unsigned long long)rep2, (unsigned long long)seen2);
  printf("   load average before  %s\n   load average after   %s\n", load0, load1);
  printf("   online CPUs          %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
  free(c1);
  free(c2);
  free(mn);
  free(one);
  free(two);
  for (size_t i = 0; i < r.n; i++) free(r.text[i]);
  free(r.text);
  nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  return seen1 == seen2 && rep1 == rep2 ? 0 : 1;
}
