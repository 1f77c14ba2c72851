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
 *               [--only plain|local|expiring|floor|floor-nolock|floor-early|redis]
 *               (one variant: for callgrind) */
#define _GNU_SOURCE
#include <ftw.h>
#include <sched.h>
#include <stdatomic.h>
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

/* ---- the C floor: two counters charged in straight C, no engine ----
 * What two exact counters shared by threads cost at the least, whatever
 * engine is around them: the decision of "no limits", then the request's
 * key and address (found before timing) charged in a table written for this
 * bench alone. It does only what any such store must: a seeded hash of the
 * limit and the caller (two 64x64->128-bit multiplies), the shard taken
 * with one atomic exchange (threads share the store), the counter's 64-byte
 * slot found by open addressing and its key compared, GCRA's count (a
 * division) and charge. It has no expiry, no eviction, no memory bound, no
 * growth (its tables are sized for the run), keeps no reading and
 * evaluates no key: a floor, not a store. Three forms:
 *   FL_LOCKED  as above;
 *   FL_NOLOCK  without the exchange (a store for one thread only);
 *   FL_EARLY   locked, the counters' lines asked for (prefetched) before
 *              the decision starts, a whole decision ahead of the charge. */
enum { FL_NONE, FL_LOCKED, FL_NOLOCK, FL_EARLY };
#define FL_SHARDS 64
typedef struct fl_slot {
  uint64_t hash; /* 0: empty */
  uint64_t id;   /* the limit */
  int64_t tat;   /* µs: GCRA's theoretical arrival time */
  uint32_t klen;
  char key[36]; /* the caller */
} fl_slot;
_Static_assert(sizeof(fl_slot) == 64, "a slot is one cache line");
typedef struct fl_shard {
  atomic_int lock;
  uint32_t mask;
  fl_slot *slots;
  char pad[48];
} fl_shard;
typedef struct fl_store {
  fl_shard sh[FL_SHARDS];
  uint64_t s1, s2;
} fl_store;

/* A request's caller in each limit (found before timing). */
typedef struct fl_req {
  const char *key, *ip;
  uint32_t key_n, ip_n;
  uint64_t h_key, h_ip; /* FL_EARLY: the hashes, made before the decision */
} fl_req;

/* LIMITS' two limits: each an id (any 8 bytes), its spacing in µs (a day
 * over its budget) and its budget. */
#define FL_KEY_ID 0x6b65795f6c696d31ull
#define FL_IP_ID 0x69705f6c696d6974ull

static uint64_t fl_mul(uint64_t a, uint64_t b) {
  __uint128_t p = (__uint128_t)a * b;
  return (uint64_t)p ^ (uint64_t)(p >> 64);
}

static void fl_close(fl_store *f) {
  for (int i = 0; f && i < FL_SHARDS; i++) free(f->sh[i].slots);
  free(f);
}

static fl_store *fl_open(uint32_t slots_per_shard) {
  fl_store *f = aligned_alloc(64, sizeof *f);
  if (!f) return NULL;
  memset(f, 0, sizeof *f);
  f->s1 = 0x243f6a8885a308d3ull ^ now_ns();
  f->s2 = 0x13198a2e03707344ull | 1;
  for (int i = 0; i < FL_SHARDS; i++) {
    f->sh[i].mask = slots_per_shard - 1;
    f->sh[i].slots = aligned_alloc(64, slots_per_shard * sizeof(fl_slot));
    if (!f->sh[i].slots) {
      fl_close(f);
      return NULL;
    }
    memset(f->sh[i].slots, 0, slots_per_shard * sizeof(fl_slot));
  }
  return f;
}

/* The counters the floor holds (its keys: the same as the store's). */
static uint64_t fl_keys(const fl_store *f) {
  uint64_t n = 0;
  for (int i = 0; i < FL_SHARDS; i++)
    for (uint32_t j = 0; j <= f->sh[i].mask; j++) n += f->sh[i].slots[j].hash != 0;
  return n;
}

static inline uint64_t fl_hash(const fl_store *f, uint64_t id, const char *k, uint32_t n) {
  uint64_t a = 0, b = 0;
  if (n >= 8) {
    memcpy(&a, k, 8);
    memcpy(&b, k + n - 8, 8);
    for (uint32_t i = 8; i + 8 < n; i += 8) { /* (not in this run: callers are short) */
      uint64_t w;
      memcpy(&w, k + i, 8);
      a = fl_mul(a ^ f->s2, w ^ f->s1);
    }
  } else {
    memcpy(&a, k, n);
  }
  return fl_mul(fl_mul(a ^ f->s1, b ^ id ^ n) ^ f->s2, id ^ f->s1) | 1;
}

/* k[0..n) == e[0..n): the usual caller (8 to 16 bytes) in two words. */
static inline int fl_same(const char *k, const char *e, uint32_t n) {
  if (n < 8 || n > 16) return !memcmp(k, e, n);
  uint64_t a, b, c, d;
  memcpy(&a, k, 8);
  memcpy(&b, e, 8);
  memcpy(&c, k + n - 8, 8);
  memcpy(&d, e + n - 8, 8);
  return !((a ^ b) | (c ^ d));
}

static inline fl_slot *fl_first(fl_store *f, uint64_t h, fl_shard **s) {
  *s = &f->sh[h >> 58];
  return &(*s)->slots[(uint32_t)h & (*s)->mask];
}

/* Charges the counter of the limit (id, spacing t, budget) and the caller
 * k[0..n) (n <= 36), hashed h, at now (µs): the count before the charge
 * (the charge refused at the budget). */
static inline __attribute__((always_inline)) uint32_t fl_charge(fl_store *f, uint64_t h,
                                                                const char *k, uint32_t n,
                                                                int64_t now, int locked,
                                                                uint64_t id, int64_t t,
                                                                uint32_t budget) {
  fl_shard *s;
  fl_slot *e = fl_first(f, h, &s);
  __builtin_prefetch(e, 1, 3);
  if (locked)
    while (atomic_exchange_explicit(&s->lock, 1, memory_order_acquire))
      while (atomic_load_explicit(&s->lock, memory_order_relaxed)) sched_yield();
  for (uint32_t i = (uint32_t)(e - s->slots);; i = (i + 1) & s->mask) {
    e = &s->slots[i];
    if (!e->hash) {
      *e = (fl_slot){.hash = h, .id = id, .klen = n};
      memcpy(e->key, k, n);
      break;
    }
    if (e->hash == h && e->id == id && e->klen == n && fl_same(k, e->key, n)) break;
  }
  uint32_t count = 0;
  if (e->tat > now) count = (uint32_t)(e->tat - now - 1) / (uint32_t)t + 1;
  if (count < budget) e->tat = (e->tat > now ? e->tat : now) + t;
  if (locked) atomic_store_explicit(&s->lock, 0, memory_order_release);
  return count;
}

/* FL_EARLY, before the decision: both hashes made, both lines asked for. */
static inline void fl_early(fl_store *f, fl_req *r) {
  fl_shard *s;
  r->h_key = fl_hash(f, FL_KEY_ID, r->key, r->key_n);
  r->h_ip = fl_hash(f, FL_IP_ID, r->ip, r->ip_n);
  __builtin_prefetch(fl_first(f, r->h_key, &s), 1, 3);
  __builtin_prefetch(fl_first(f, r->h_ip, &s), 1, 3);
}

/* After the decision: the request's two charges (mode FL_*), the sum of
 * their counts. */
static inline __attribute__((always_inline)) uint64_t fl_two(fl_store *f, const fl_req *r,
                                                             int64_t now, int mode) {
  uint64_t hk = mode == FL_EARLY ? r->h_key : fl_hash(f, FL_KEY_ID, r->key, r->key_n);
  uint64_t hi = mode == FL_EARLY ? r->h_ip : fl_hash(f, FL_IP_ID, r->ip, r->ip_n);
  int locked = mode != FL_NOLOCK;
  return fl_charge(f, hk, r->key, r->key_n, now, locked, FL_KEY_ID, 86400000000 / 10000, 10000) +
         fl_charge(f, hi, r->ip, r->ip_n, now, locked, FL_IP_ID, 86400000000 / 100000, 100000);
}

/* Where "name" (as "\"ip\":\"") has its string in a request. */
static void fl_find(const char *json, const char *name, const char **at, uint32_t *n) {
  const char *p = strstr(json, name);
  p = p ? p + strlen(name) : json;
  const char *q = strchr(p, '"');
  *at = p;
  *n = q ? (uint32_t)(q - p) : 0;
}

typedef struct variant {
  const char *id, *name;
  int remote;
  int floor;    /* FL_*: the engine without limits, then the floor's two charges */
  fl_store *fl; /* the floor's counters */
  vd_engine *e;
  double best_rate;
  uint64_t *lat;
} variant;

/* Decides request json (its callers r) with variant v at now_us. */
static inline __attribute__((always_inline)) int decide_one(const variant *v, fl_req *r,
                                                            const char *json, int64_t now_us,
                                                            vd_decision *d, vd_error *err,
                                                            uint64_t *sink) {
  if (v->floor == FL_EARLY) fl_early(v->fl, r);
  if (vd_decide_json(v->e, json, -1, d, err)) return -1;
  switch (v->floor) { /* a constant mode each: fl_two is compiled three times */
    case FL_LOCKED:
      *sink += fl_two(v->fl, r, now_us, FL_LOCKED);
      break;
    case FL_NOLOCK:
      *sink += fl_two(v->fl, r, now_us, FL_NOLOCK);
      break;
    case FL_EARLY:
      *sink += fl_two(v->fl, r, now_us, FL_EARLY);
      break;
  }
  return 0;
}

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
              "                   [--only "
              "plain|local|expiring|floor|floor-nolock|floor-early|redis]\n");
      return 2;
    }
  }
  if (rounds < 1 || nreq < 1) return 2;
  variant v[] = {{"plain", "no limits", 0, FL_NONE, NULL, NULL, 0, NULL},
                 {"local", "limits, local", 0, FL_NONE, NULL, NULL, 0, NULL},
                 {"expiring", "limits, expiring", 0, FL_NONE, NULL, NULL, 0, NULL},
                 {"floor", "C floor", 0, FL_LOCKED, NULL, NULL, 0, NULL},
                 {"floor-nolock", "C floor, no lock", 0, FL_NOLOCK, NULL, NULL, 0, NULL},
                 {"floor-early", "C floor, early", 0, FL_EARLY, NULL, NULL, 0, NULL},
                 {"redis", "limits, redis", 1, FL_NONE, NULL, NULL, 0, NULL}};
  const char *defs[] = {"", LIMITS, LIMITS_EXPIRING, "", "", "", LIMITS};
  int nv = redis ? 7 : 6;
  if (only) {
    int k = 0;
    while (k < nv && strcmp(only, v[k].id)) k++;
    if (k == nv) {
      fprintf(stderr,
              "bench-state: --only takes plain, local, expiring, floor, floor-nolock, floor-early "
              "or redis (with --redis)\n");
      return 2;
    }
    v[0] = v[k];
    defs[0] = defs[k];
    nv = 1;
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

  for (int k = 0; k < nv; k++) {
    v[k].e = open_variant(root, v[k].id, defs[k], v[k].remote ? redis : NULL);
    if (!v[k].e) return 1;
    v[k].lat = malloc((size_t)nreq * sizeof *v[k].lat);
    /* the floor's counters: 256 slots a shard, as the local store's tables
     * are for this run's 11,000 counters */
    if (v[k].floor && !(v[k].fl = fl_open(256))) return 1;
  }
  fl_req *fr = malloc((size_t)nreq * sizeof *fr);
  if (!fr) return 1;
  for (int i = 0; i < nreq; i++) {
    fl_find(reqs[i], "\"key\":\"", &fr[i].key, &fr[i].key_n);
    fl_find(reqs[i], "\"ip\":\"", &fr[i].ip, &fr[i].ip_n);
  }
  uint64_t fl_sink = 0;
  vd_decision *d = vd_decision_new();
  uint64_t clock_cost = now_ns();
  clock_cost = now_ns() - clock_cost;
  for (int round = 0; round < rounds; round++) {
    for (int k = 0; k < nv; k++) {
      vd_error err;
      int n = v[k].remote && nreq > 20000 ? 20000 : nreq; /* Redis: a round-trip each */
      uint64_t (*clock)(void) = v[k].remote ? now_ns : cpu_ns;
      uint64_t t0 = clock();
      int64_t base_us = (int64_t)(now_ns() / 1000);
      for (int i = 0; i < n; i++) {
        if (decide_one(&v[k], &fr[i], reqs[i], base_us + i, d, &err, &fl_sink)) {
          fprintf(stderr, "bench-state: %s\n", err.message);
          return 1;
        }
      }
      double rate = n / ((clock() - t0) / 1e9);
      if (rate > v[k].best_rate) v[k].best_rate = rate;
      if (round == rounds - 1)
        for (int i = 0; i < n; i++) {
          uint64_t a = now_ns();
          decide_one(&v[k], &fr[i], reqs[i], (int64_t)(a / 1000), d, &err, &fl_sink);
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
    else if (v[k].fl)
      printf("%s: %llu keys\n", v[k].name, (unsigned long long)fl_keys(v[k].fl));
  }
  if (fl_sink == UINT64_MAX) printf("(unlikely)\n"); /* the floor's counts are used */
  free(fr);
  vd_decision_free(d);
  for (int k = 0; k < nv; k++) {
    vd_engine_close(v[k].e);
    fl_close(v[k].fl);
    free(v[k].lat);
  }
  for (int i = 0; i < nreq; i++) free(reqs[i]);
  free(reqs);
  nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}
