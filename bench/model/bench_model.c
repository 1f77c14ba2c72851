/* bench_model.c — single-row scoring: verdict's evaluator against
 * libxgboost's fastest single-row call, XGBoosterPredictFromDense, in the
 * same run, on the same model and rows.
 *
 * The model (100 trees of depth 6, 32 features) and 20,200 rows with 5%
 * missing cells come from gen-bench-model at build time. Before timing,
 * every row is scored by both and the margins and probabilities must be the
 * same float32 (the bench refuses to report otherwise). Then each call is
 * timed on its own with CLOCK_MONOTONIC (the timer's own cost subtracted),
 * cycling through all rows so that branch prediction cannot learn them;
 * the three engines take turns, ROUNDS times; the figures are the medians
 * over rounds of each round's percentiles.
 *
 * libxgboost is set up as its fastest: one booster with nthread=1, one proxy
 * DMatrix reused, the array-interface and config JSON built once (each row
 * is copied into the fixed buffer the array interface points at), and the
 * process runs with OMP_NUM_THREADS=1 (the bench re-executes itself to set
 * it before libgomp starts). The process is pinned to one CPU.
 *
 * Usage: bench-model [ROUNDS] [MODEL.json ROWS.f32]   (default 5 rounds) */
#define _GNU_SOURCE
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xgboost/c_api.h>

#include "model/model.h"

#define NF 32

static uint64_t now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(const uint64_t *sorted, size_t n, double p) {
  size_t i = (size_t)(p * (double)(n - 1));
  return (double)sorted[i];
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_dbl);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct xgb {
  BoosterHandle h;
  DMatrixHandle proxy;
  float row[NF];
  char values[256];
  const char *config;
} xgb;

static int xgb_predict(xgb *x, const float *row, float *out) {
  memcpy(x->row, row, sizeof x->row);
  const bst_ulong *shape;
  bst_ulong dim;
  const float *res;
  if (XGBoosterPredictFromDense(x->h, x->values, x->config, x->proxy, &shape, &dim, &res))
    return -1;
  *out = res[0];
  return 0;
}

enum { E_NATIVE, E_DEADLINE, E_XGB, NE };
static const char *const NAMES[NE] = {"verdict gbdt_predict", "verdict, with a deadline",
                                      "libxgboost PredictFromDense"};

int main(int argc, char **argv) {
  if (!getenv("OMP_NUM_THREADS")) { /* libgomp reads it when it loads: set it, start again */
    setenv("OMP_NUM_THREADS", "1", 1);
    execv("/proc/self/exe", argv);
  }
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  if (rounds < 1) rounds = 1;
  const char *mpath = argc > 3 ? argv[2] : VD_BENCH_DATA "/bench_d6.json";
  const char *rpath = argc > 3 ? argv[3] : VD_BENCH_DATA "/bench_rows.f32";
  cpu_set_t cs;
  CPU_ZERO(&cs);
  CPU_SET(sched_getcpu(), &cs);
  sched_setaffinity(0, sizeof cs, &cs);

  FILE *f = fopen(rpath, "rb");
  if (!f) {
    fprintf(stderr, "bench-model: %s: cannot open (run bench/model/gen-bench-model DIR)\n", rpath);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  size_t nrows = (size_t)ftell(f) / (NF * sizeof(float));
  fseek(f, 0, SEEK_SET);
  float *rows = malloc(nrows * NF * sizeof *rows);
  if (!rows || fread(rows, sizeof(float) * NF, nrows, f) != nrows) {
    fprintf(stderr, "bench-model: %s: short read\n", rpath);
    return 1;
  }
  fclose(f);

  char err[1024];
  gbdt_model *m;
  if (gbdt_load_file(mpath, &m, err, sizeof err)) {
    fprintf(stderr, "bench-model: %s\n", err);
    return 1;
  }
  if (gbdt_num_features(m) != NF) {
    fprintf(stderr, "bench-model: the model has %u features, not %d\n", gbdt_num_features(m), NF);
    return 1;
  }
  xgb x = {0};
  if (XGBoosterCreate(NULL, 0, &x.h) || XGBoosterLoadModel(x.h, mpath) ||
      XGBoosterSetParam(x.h, "nthread", "1") || XGProxyDMatrixCreate(&x.proxy)) {
    fprintf(stderr, "bench-model: libxgboost: %s\n", XGBGetLastError());
    return 1;
  }
  snprintf(x.values, sizeof x.values,
           "{\"data\": [%llu, true], \"shape\": [1, %d], \"typestr\": \"<f4\", \"version\": 3}",
           (unsigned long long)(uintptr_t)x.row, NF);
  static const char cfg_prob[] =
      "{\"type\": 0, \"training\": false, \"iteration_begin\": 0, \"iteration_end\": 0, "
      "\"strict_shape\": false, \"cache_id\": 0, \"missing\": NaN}";
  static const char cfg_margin[] =
      "{\"type\": 1, \"training\": false, \"iteration_begin\": 0, \"iteration_end\": 0, "
      "\"strict_shape\": false, \"cache_id\": 0, \"missing\": NaN}";

  /* 1. the same answers, bit for bit */
  size_t differ = 0;
  for (size_t r = 0; r < nrows; r++) {
    float mg, pr, xm, xp;
    gbdt_predict(m, rows + r * NF, &mg, &pr, NULL);
    x.config = cfg_margin;
    if (xgb_predict(&x, rows + r * NF, &xm)) {
      fprintf(stderr, "bench-model: libxgboost: %s\n", XGBGetLastError());
      return 1;
    }
    x.config = cfg_prob;
    xgb_predict(&x, rows + r * NF, &xp);
    differ += memcmp(&mg, &xm, sizeof mg) != 0 || memcmp(&pr, &xp, sizeof pr) != 0;
  }
  printf("bench-model: %s, %u trees, %u features, %zu rows; %zu KB of packed trees\n", mpath,
         gbdt_num_trees(m), NF, nrows, gbdt_memory(m) / 1024);
  printf("same margin and probability as libxgboost, bit for bit: %zu of %zu rows\n",
         nrows - differ, nrows);
  if (differ) {
    fprintf(stderr, "bench-model: the evaluators disagree: no timing\n");
    return 1;
  }

  /* 2. the timer's own cost */
  uint64_t *t = malloc(nrows * sizeof *t);
  for (size_t i = 0; i < nrows; i++) {
    uint64_t a = now();
    t[i] = now() - a;
  }
  qsort(t, nrows, sizeof *t, cmp_u64);
  double timer = pct(t, nrows, 0.5);

  /* 3. timing, engines taking turns */
  double p50[NE][64], p90[NE][64], p99[NE][64];
  if (rounds > 64) rounds = 64;
  float sink = 0;
  x.config = cfg_prob;
  for (int round = 0; round < rounds; round++) {
    for (int e = 0; e < NE; e++) {
      for (size_t r = 0; r < nrows; r++) {
        const float *row = rows + r * NF;
        float mg, pr;
        uint64_t a = now();
        if (e == E_NATIVE) {
          gbdt_predict(m, row, &mg, &pr, NULL);
        } else if (e == E_DEADLINE) {
          gbdt_deadline dl = {.at_ns = a + 15000000u, .every = 0};
          gbdt_predict(m, row, &mg, &pr, &dl);
        } else {
          xgb_predict(&x, row, &pr);
        }
        t[r] = now() - a;
        sink += pr;
      }
      qsort(t, nrows, sizeof *t, cmp_u64);
      p50[e][round] = pct(t, nrows, 0.50) - timer;
      p90[e][round] = pct(t, nrows, 0.90) - timer;
      p99[e][round] = pct(t, nrows, 0.99) - timer;
    }
  }
  double nat = 0;
  printf(
      "%d rounds x %zu rows, each call timed (timer cost %.0f ns subtracted); ns per row, "
      "median over rounds\n\n",
      rounds, nrows, timer);
  printf("| engine | p50 | p90 | p99 | p50 ratio |\n|---|---:|---:|---:|---:|\n");
  double m50[NE];
  for (int e = 0; e < NE; e++) m50[e] = median(p50[e], rounds);
  nat = m50[E_NATIVE];
  for (int e = 0; e < NE; e++)
    printf("| %s | %.0f | %.0f | %.0f | %.2fx |\n", NAMES[e], m50[e], median(p90[e], rounds),
           median(p99[e], rounds), m50[e] / nat);
  printf("\nlibxgboost / verdict at the median: %.1fx\n", m50[E_XGB] / nat);
  if (sink == 12345.0f) printf(" ");
  XGDMatrixFree(x.proxy);
  XGBoosterFree(x.h);
  gbdt_free(m);
  free(rows);
  free(t);
  return 0;
}
