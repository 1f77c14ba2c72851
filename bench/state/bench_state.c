/* bench-state — what rate limits cost a decision: one strategy without
 * limits, the same with two limits over local counters, and (with --redis
 * URL) the same over Redis, timed in one run, in-process on one thread.
 *
 * The strategy is an API gate: a few rules on the path and method, default
 * allow. "limits" adds a per-key and a per-address daily quota (two
 * counter reads and charges a decision), over 10,000 API keys and 1,000
 * addresses, budgets large enough that the requests are charged rather
 * than refused (the charging path is the one that writes) and spacings
 * (window / budget: 8.6 s and 0.86 s) long enough that a key's counter is
 * still live when its next request comes, even under valgrind — the usual
 * case of a quota. "limits, expiring" has spacings of 3.6 ms and 60 µs instead, so
 * that most counters are paid back between two requests of their key: the
 * charge finds its counter gone and makes a new one (the insert path).
 * Each variant decides the same requests, in rounds that alternate the
 * variants; the best round of each is reported.
 *
 * Reported: decisions/s per variant (per second of the thread's CPU time;
 * for Redis, of wall time), the ratio to "no limits", and p50/p99 per
 * decision (each decision timed with CLOCK_MONOTONIC, the clock read
 * included) — for Redis that is mostly the round-trip.
 *
 *   bench-state [--rounds N] [--requests N] [--redis redis://HOST:PORT]
 *               [--only plain|local|expiring|redis]   (one variant: for callgrind) */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../bench.h"
#include "verdict.h"

static const char RULES[] =
    "decision_points: [api]\n"
    "rules:\n"
    "  - {name: admin, if: 'path.startsWith(\"/admin\")', action: block}\n"
    "  - {name: no-delete, if: 'method == \"DELETE\" && !path.startsWith(\"/api/\")', action: "
    "block}\n"
    "  - {name: probe, if: 'path.endsWith(\".php\")', action: block}\n"
    "default: allow\n";

static const char LIMITS[] =
    "limits:\n"
    "  per_key: {key: request.key, window: 1d, budget: 10000, action: block}\n"
    "  per_ip: {key: ip, window: 1d, budget: 100000, action: block}\n";

static const char LIMITS_EXPIRING[] =
    "limits:\n"
    "  per_key: {key: request.key, window: 1h, budget: 1000000, action: block}\n"
    "  per_ip: {key: ip, window: 1m, budget: 1000000, action: block}\n";

/* The thread's CPU time: on a machine shared with other work, a round that
 * was descheduled is not counted as slow. (Redis rounds use the wall clock:
 * their time is mostly waiting for the server.) */
static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static vd_engine *open_variant(const char *root, const char *name, const char *limits,
                               const char *url) {
  char dir[256], path[300];
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  mkdir(dir, 0700);
  snprintf(path, sizeof path, "%s/gate.yaml", dir);
  FILE *f = fopen(path, "w");
  if (!f) return NULL;
  fprintf(f, "strategy: gate\n%s%s", RULES, limits);
  fclose(f);
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  o.state_url = url;
  o.state_timeout_ms = 1000;
  vd_engine *e = NULL;
  vd_error err;
  if (vd_engine_open(dir, &o, &e, &err)) {
    fprintf(stderr, "bench-state: %s\n", err.message);
    return NULL;
  }
  return e;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

typedef struct variant {
  const char *name;
  int remote;
  vd_engine *e;
  double best_rate;
  uint64_t *lat;
} variant;

int main(int argc, char **argv) {
  int rounds = 5, nreq = 200000;
  const char *redis = NULL, *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--requests") && i + 1 < argc)
      nreq = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--redis") && i + 1 < argc)
      redis = argv[++i];
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else {
      fprintf(stderr,
              "usage: bench-state [--rounds N] [--requests N] [--redis URL]\n"
              "                   [--only plain|local|expiring|redis]\n");
      return 2;
    }
  }
  if (rounds < 1 || nreq < 1) return 2;
  if (only && strcmp(only, "plain") && strcmp(only, "local") && strcmp(only, "expiring") &&
      (strcmp(only, "redis") || !redis)) {
    fprintf(stderr, "bench-state: --only takes plain, local, expiring or redis (with --redis)\n");
    return 2;
  }
  char root[160];
  if (!bench_tmpdir(root, sizeof root, "state")) return 1;

  /* the requests: 10,000 keys, 1,000 addresses, mostly ordinary calls */
  char **reqs = malloc((size_t)nreq * sizeof *reqs);
  static const char *const paths[] = {"/api/v1/items", "/api/v1/orders", "/",
                                      "/login",        "/admin/x",       "/wp-login.php"};
  static const char *const methods[] = {"GET", "POST", "DELETE"};
  unsigned seed = 7;
  for (int i = 0; i < nreq; i++) {
    seed = seed * 1103515245u + 12345u;
    unsigned r = seed >> 8;
    if (asprintf(&reqs[i],
                 "{\"action\":\"api\",\"key\":\"key-%u\",\"context\":{\"path\":\"%s\","
                 "\"method\":\"%s\",\"ip\":\"10.%u.%u.%u\"}}",
                 r % 10000, paths[(r >> 3) % 20 < 17 ? (r >> 3) % 3 : 3 + (r >> 3) % 3],
                 methods[(r >> 7) % 10 < 8 ? 0 : 1 + (r >> 7) % 2], (r >> 11) % 4, (r >> 13) % 16,
                 (r >> 17) % 16) < 0)
      return 1;
  }

  static const char *const ids[] = {"plain", "local", "expiring", "redis"};
  variant v[4] = {{"no limits", 0, NULL, 0, NULL},
                  {"limits, local", 0, NULL, 0, NULL},
                  {"limits, expiring", 0, NULL, 0, NULL},
                  {"limits, redis", 1, NULL, 0, NULL}};
  const char *defs[] = {"", LIMITS, LIMITS_EXPIRING, LIMITS};
  int nv = redis ? 4 : 3;
  if (only) {
    int k = 0;
    while (k < 4 && strcmp(only, ids[k])) k++;
    v[0] = v[k];
    defs[0] = defs[k];
    nv = 1;
  }
  for (int k = 0; k < nv; k++) {
    const char *id = only ? only : ids[k];
    v[k].e = open_variant(root, id, defs[k], !strcmp(id, "redis") ? redis : NULL);
    if (!v[k].e) return 1;
    v[k].lat = malloc((size_t)nreq * sizeof *v[k].lat);
  }
  vd_decision *d = vd_decision_new();
  uint64_t clock_cost = now_ns();
  clock_cost = now_ns() - clock_cost;
  for (int round = 0; round < rounds; round++) {
    for (int k = 0; k < nv; k++) {
      vd_error err;
      int n = v[k].remote && nreq > 20000 ? 20000 : nreq; /* Redis: a round-trip each */
      uint64_t (*clock)(void) = v[k].remote ? now_ns : cpu_ns;
      uint64_t t0 = clock();
      for (int i = 0; i < n; i++) {
        if (vd_decide_json(v[k].e, reqs[i], -1, d, &err)) {
          fprintf(stderr, "bench-state: %s\n", err.message);
          return 1;
        }
      }
      double rate = n / ((clock() - t0) / 1e9);
      if (rate > v[k].best_rate) v[k].best_rate = rate;
      if (round == rounds - 1)
        for (int i = 0; i < n; i++) {
          uint64_t a = now_ns();
          vd_decide_json(v[k].e, reqs[i], -1, d, &err);
          v[k].lat[i] = now_ns() - a;
        }
    }
  }
  printf(
      "bench-state: %d requests (10,000 keys, 1,000 addresses), best of %d rounds, one "
      "thread, decisions per CPU second%s\n",
      nreq, rounds, redis ? "; Redis: 20,000 requests a round, per wall second" : "");
  printf("%-18s %14s %10s %10s %10s\n", "variant", "decisions/s", "ratio", "p50 us", "p99 us");
  for (int k = 0; k < nv; k++) {
    int n = v[k].remote && nreq > 20000 ? 20000 : nreq;
    qsort(v[k].lat, (size_t)n, sizeof *v[k].lat, cmp_u64);
    printf("%-18s %14.0f %10.3f %10.2f %10.2f\n", v[k].name, v[k].best_rate,
           v[k].best_rate / v[0].best_rate, v[k].lat[n / 2] / 1000.0,
           v[k].lat[(size_t)n * 99 / 100] / 1000.0);
  }
  printf("(a clock read costs about %llu ns, included in p50/p99)\n",
         (unsigned long long)clock_cost);
  for (int k = 0; k < nv; k++) {
    vd_engine_counters c;
    vd_engine_stats(v[k].e, &c);
    if (v[k].remote)
      printf("%s: %llu remote errors, %llu fallbacks\n", v[k].name, c.state_remote_errors,
             c.state_fallbacks);
    else if (c.limit_charges)
      printf("%s: %llu charges, %llu refusals, %llu keys, %llu bytes, %llu expired\n", v[k].name,
             c.limit_charges, c.limit_refusals, c.state_keys, c.state_bytes, c.state_expired);
  }
  vd_decision_free(d);
  for (int k = 0; k < nv; k++) {
    vd_engine_close(v[k].e);
    free(v[k].lat);
  }
  for (int i = 0; i < nreq; i++) free(reqs[i]);
  free(reqs);
  nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}
