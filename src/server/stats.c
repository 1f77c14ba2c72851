/* stats.c — the live figures behind GET /v1/stats, GET /v1/stats/recent and
 * the console (stats.h says how they are kept, docs/server.md what they
 * mean). Three writers, each alone on what it writes: a worker on its own
 * stats_worker (the deciding path: no lock, no shared line), the name tables
 * on a first sighting (a mutex, once per new strategy or action name), and
 * the main loop's tick on the ring (a mutex shared only with readers). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/timefmt.h"
#include "server/internal.h"
#include "server/stats.h"

#define PUT_LIT(b, s) json_buf_put((b), (s), sizeof(s) - 1)

#define NO_ACTION 255 /* an error decision has no action */

static const char *const source_names[STATS_SOURCES] = {"rule", "model", "default", "error",
                                                        "(other)"};

/* Names seen, in order of first sighting: published by bumping n (release)
 * after the entry is in, never changed after. */
typedef struct names {
  char *name[STATS_ACTIONS];
  unsigned cap;
  _Atomic unsigned n;
} names;

/* One second, server-wide. Latencies in ns; p50/p99 0 when none. */
typedef struct rec {
  int64_t t; /* 0: never filled */
  uint32_t count[STATS_STRATEGIES + 1], review[STATS_STRATEGIES + 1];
  uint32_t p50[STATS_STRATEGIES + 1], p99[STATS_STRATEGIES + 1];
  uint32_t source[STATS_SOURCES], action[STATS_ACTIONS + 1], refused;
  uint32_t deadline_misses, limit_refusals, write_errors, dropped, queue_depth;
} rec;

struct stats {
  pthread_mutex_t names_lock;
  names strategies, actions;
  pthread_mutex_t lock; /* the ring, first, merged, prev */
  rec ring[STATS_WINDOW];
  int64_t first, merged; /* the seconds kept: [first, merged] (0, 0 before the first tick) */
  vd_engine_counters prev;
  int have_prev;
  uint32_t hist[STATS_STRATEGIES + 1][STATS_BINS]; /* the tick's scratch: the second */
  uint32_t one[STATS_STRATEGIES + 1][STATS_BINS];  /* and one worker's share of it */
};

static void bump(_Atomic uint32_t *c, uint32_t by) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + by,
                        memory_order_relaxed);
}

static uint32_t get(_Atomic uint32_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

stats *stats_new(void) {
  stats *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  pthread_mutex_init(&s->names_lock, NULL);
  pthread_mutex_init(&s->lock, NULL);
  s->strategies.cap = STATS_STRATEGIES;
  s->actions.cap = STATS_ACTIONS;
  return s;
}

void stats_free(stats *s) {
  if (!s) return;
  for (unsigned i = 0; i < atomic_load(&s->strategies.n); i++) free(s->strategies.name[i]);
  for (unsigned i = 0; i < atomic_load(&s->actions.n); i++) free(s->actions.name[i]);
  pthread_mutex_destroy(&s->names_lock);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

/* The index of name in t (added on first sighting), or t->cap ("(other)")
 * when the table is full. *last: the index this worker found last time,
 * tried first (a worker mostly sees the same few names). */
static unsigned intern(stats *s, names *t, unsigned *last, const char *name) {
  unsigned n = atomic_load_explicit(&t->n, memory_order_acquire);
  if (*last < n && strcmp(t->name[*last], name) == 0) return *last;
  for (unsigned i = 0; i < n; i++)
    if (strcmp(t->name[i], name) == 0) return *last = i;
  pthread_mutex_lock(&s->names_lock);
  unsigned i = 0, m = atomic_load_explicit(&t->n, memory_order_relaxed);
  while (i < m && strcmp(t->name[i], name) != 0) i++;
  if (i == m && m < t->cap && (t->name[m] = strdup(name)) != NULL)
    atomic_store_explicit(&t->n, m + 1, memory_order_release);
  else if (i == m)
    i = t->cap;
  pthread_mutex_unlock(&s->names_lock);
  if (i < t->cap) *last = i;
  return i;
}

static const char *name_of(stats *s, names *t, unsigned i) {
  return i < atomic_load_explicit(&t->n, memory_order_acquire) ? t->name[i] : "(other)";
}

/* The bucket of a latency: under 128 ns, then 8 a power of two, then over. */
unsigned stats_bin(uint64_t ns) {
  if (ns < (1u << STATS_OCT_LO)) return 0;
  unsigned k = 63u - (unsigned)__builtin_clzll(ns);
  if (k > STATS_OCT_HI) return STATS_BINS - 1;
  unsigned j = (unsigned)(ns >> (k - STATS_SUB_BITS)) & ((1u << STATS_SUB_BITS) - 1);
  return 1 + (k - STATS_OCT_LO) * (1u << STATS_SUB_BITS) + j;
}

/* The value a bucket stands for: its midpoint (the under bucket: 64 ns; the
 * over one: its lower bound). */
uint64_t stats_bin_value(unsigned b) {
  if (b == 0) return (1u << STATS_OCT_LO) / 2;
  if (b == STATS_BINS - 1) return 1ull << (STATS_OCT_HI + 1);
  unsigned k = (b - 1) / (1u << STATS_SUB_BITS) + STATS_OCT_LO;
  unsigned j = (b - 1) % (1u << STATS_SUB_BITS);
  uint64_t width = 1ull << (k - STATS_SUB_BITS);
  return ((1ull << STATS_SUB_BITS) + j) * width + width / 2;
}

/* The q-quantile (nearest rank) of a histogram of n values, 0 when empty. */
uint32_t stats_quantile(const uint32_t *h, uint64_t n, double q) {
  if (n == 0) return 0;
  uint64_t rank = (uint64_t)(q * (double)n + 0.999999999);
  if (rank < 1) rank = 1;
  uint64_t cum = 0;
  for (unsigned b = 0; b < STATS_BINS; b++) {
    cum += h[b];
    if (cum >= rank) {
      uint64_t v = stats_bin_value(b);
      return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
    }
  }
  return (uint32_t)stats_bin_value(STATS_BINS - 1);
}

/* The worker's slot for second t, emptied first when it held an older one.
 * The tag goes to -1 while the counts are zeroed, so a tick reading the
 * slot then sees it change and drops what it read. */
static stats_sec *slot_for(stats_worker *w, int64_t t) {
  stats_sec *sec = &w->sec[t & (STATS_SLOTS - 1)];
  if (atomic_load_explicit(&sec->tag, memory_order_relaxed) == t) return sec;
  atomic_store_explicit(&sec->tag, -1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  for (unsigned i = 0; i <= STATS_STRATEGIES; i++) {
    atomic_store_explicit(&sec->strat[i].count, 0, memory_order_relaxed);
    atomic_store_explicit(&sec->strat[i].review, 0, memory_order_relaxed);
    for (unsigned b = 0; b < STATS_BINS; b++)
      atomic_store_explicit(&sec->strat[i].hist[b], 0, memory_order_relaxed);
  }
  for (unsigned i = 0; i < STATS_SOURCES; i++)
    atomic_store_explicit(&sec->source[i], 0, memory_order_relaxed);
  for (unsigned i = 0; i <= STATS_ACTIONS; i++)
    atomic_store_explicit(&sec->action[i], 0, memory_order_relaxed);
  atomic_store_explicit(&sec->refused, 0, memory_order_relaxed);
  atomic_store_explicit(&sec->tag, t, memory_order_release);
  return sec;
}

static void recent_push(stats_worker *w, const stats_recent_rec *r) {
  uint64_t head = atomic_load_explicit(&w->recent_head, memory_order_relaxed);
  stats_recent_entry *e = &w->recent[head % STATS_RECENT];
  uint64_t seq = atomic_load_explicit(&e->seq, memory_order_relaxed);
  atomic_store_explicit(&e->seq, seq + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  uint64_t words[STATS_RECENT_WORDS] = {0};
  memcpy(words, r, sizeof *r);
#pragma GCC unroll 16 /* a loop of 13 stores costs more in its counting than in them */
  for (size_t i = 0; i < STATS_RECENT_WORDS; i++)
    atomic_store_explicit(&e->w[i], words[i], memory_order_relaxed);
  atomic_store_explicit(&e->seq, seq + 2, memory_order_release);
  atomic_store_explicit(&w->recent_head, head + 1, memory_order_release);
}

/* 0 with *out a consistent copy of e, or -1 when it is being written (or
 * was overwritten while read) or was never written. */
static int recent_read(stats_recent_entry *e, stats_recent_rec *out) {
  uint64_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
  if (s1 == 0 || (s1 & 1)) return -1;
  uint64_t words[STATS_RECENT_WORDS];
  for (size_t i = 0; i < STATS_RECENT_WORDS; i++)
    words[i] = atomic_load_explicit(&e->w[i], memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  if (atomic_load_explicit(&e->seq, memory_order_relaxed) != s1) return -1;
  memcpy(out, words, sizeof *out);
  out->id[sizeof out->id - 1] = out->rule[sizeof out->rule - 1] = '\0';
  return 0;
}

/* s into out[cap], cut to fit (snprintf costs more than the rest of a count). */
static void copy_cut(char *out, size_t cap, const char *s) {
  size_t n = strnlen(s, cap - 1);
  memcpy(out, s, n);
  out[n] = '\0';
}

static unsigned source_of(const char *src) {
  unsigned i = !src          ? STATS_SOURCES - 1
               : *src == 'r' ? 0
               : *src == 'm' ? 1
               : *src == 'd' ? 2
               : *src == 'e' ? 3
                             : STATS_SOURCES - 1;
  return i < STATS_SOURCES - 1 && strcmp(src, source_names[i]) == 0 ? i : STATS_SOURCES - 1;
}

void stats_count_decision(stats *s, stats_worker *w, const vd_decision *d) {
  if (!s) return;
  int64_t now = clock_wall_coarse_ns();
  stats_sec *sec = slot_for(w, now / 1000000000);
  const char *strategy = vd_decision_strategy(d), *action = vd_decision_action(d);
  unsigned si = intern(s, &s->strategies, &w->last_strategy, strategy ? strategy : "");
  unsigned ai = action ? intern(s, &s->actions, &w->last_action, action) : NO_ACTION;
  unsigned src = source_of(vd_decision_source(d));
  int review = vd_decision_review(d) != 0;
  double us = vd_decision_latency_us(d);
  uint64_t ns = us > 0 ? (uint64_t)(us * 1e3) : 0;
  stats_strat_sec *st = &sec->strat[si];
  bump(&st->count, 1);
  if (review) bump(&st->review, 1);
  bump(&st->hist[stats_bin(ns)], 1);
  bump(&sec->source[src], 1);
  if (ai != NO_ACTION) bump(&sec->action[ai], 1);

  stats_recent_rec r;
  memset(&r, 0, sizeof r);
  r.time_ms = now / 1000000;
  r.latency_ns = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
  r.strategy = (uint8_t)si;
  r.action = (uint8_t)ai;
  r.source = (uint8_t)src;
  r.review = (uint8_t)review;
  const char *id = vd_decision_snapshot_id(d), *rule = vd_decision_rule(d);
  if (id) copy_cut(r.id, sizeof r.id, id);
  if (rule && src == 0) copy_cut(r.rule, sizeof r.rule, rule);
  recent_push(w, &r);
}

void stats_count_refused(stats_worker *w) {
  int64_t t = clock_wall_coarse_ns() / 1000000000;
  bump(&slot_for(w, t)->refused, 1);
}

/* The record of second t, emptied first when it held another. */
static rec *rec_for(stats *s, int64_t t) {
  rec *r = &s->ring[t % STATS_WINDOW];
  if (r->t != t) {
    memset(r, 0, sizeof *r);
    r->t = t;
  }
  return r;
}

static uint32_t delta(unsigned long long now, unsigned long long before) {
  unsigned long long d = now > before ? now - before : 0;
  return d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

/* Adds every worker's second t to the ring (s->lock held). */
static void fold(stats *s, server *srv, int64_t t) {
  rec *r = rec_for(s, t);
  memset(s->hist, 0, sizeof s->hist);
  for (int wi = 0; wi < srv->nworkers; wi++) {
    stats_sec *sec = &srv->workers[wi].st.sec[t & (STATS_SLOTS - 1)];
    if (atomic_load_explicit(&sec->tag, memory_order_acquire) != t) continue;
    rec one;
    memset(&one, 0, sizeof one);
    uint32_t(*h)[STATS_BINS] = s->one;
    for (unsigned i = 0; i <= STATS_STRATEGIES; i++) {
      one.count[i] = get(&sec->strat[i].count);
      one.review[i] = get(&sec->strat[i].review);
      for (unsigned b = 0; b < STATS_BINS; b++) h[i][b] = get(&sec->strat[i].hist[b]);
    }
    for (unsigned i = 0; i < STATS_SOURCES; i++) one.source[i] = get(&sec->source[i]);
    for (unsigned i = 0; i <= STATS_ACTIONS; i++) one.action[i] = get(&sec->action[i]);
    one.refused = get(&sec->refused);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&sec->tag, memory_order_relaxed) != t) continue; /* reset meanwhile */
    for (unsigned i = 0; i <= STATS_STRATEGIES; i++) {
      r->count[i] += one.count[i];
      r->review[i] += one.review[i];
      for (unsigned b = 0; b < STATS_BINS; b++) s->hist[i][b] += h[i][b];
    }
    for (unsigned i = 0; i < STATS_SOURCES; i++) r->source[i] += one.source[i];
    for (unsigned i = 0; i <= STATS_ACTIONS; i++) r->action[i] += one.action[i];
    r->refused += one.refused;
  }
  for (unsigned i = 0; i <= STATS_STRATEGIES; i++) {
    r->p50[i] = stats_quantile(s->hist[i], r->count[i], 0.50);
    r->p99[i] = stats_quantile(s->hist[i], r->count[i], 0.99);
  }
}

void stats_tick(server *srv) {
  stats *s = srv->stats;
  if (!s) return;
  int64_t now = clock_wall_ns() / 1000000000;
  vd_engine_counters c;
  int have = vd_engine_stats(srv->engine, &c) == 0;
  pthread_mutex_lock(&s->lock);
  if (s->merged == 0) {
    s->merged = now - 2;
    s->first = now - 1;
  }
  /* The engine's counters grew by this much in about the second that just
   * ended: charged to it. */
  if (have && now - 1 > s->merged) {
    rec *r = rec_for(s, now - 1);
    if (s->have_prev) {
      r->deadline_misses += delta(c.model_deadline_misses, s->prev.model_deadline_misses);
      r->limit_refusals += delta(c.limit_refusals, s->prev.limit_refusals);
      r->write_errors += delta(c.snapshot_write_errors, s->prev.snapshot_write_errors);
      r->dropped += delta(c.snapshots_dropped, s->prev.snapshots_dropped);
    }
    r->queue_depth =
        c.snapshot_queue_depth > UINT32_MAX ? UINT32_MAX : (uint32_t)c.snapshot_queue_depth;
    s->prev = c;
    s->have_prev = 1;
  }
  /* Seconds that ended over a second ago: no worker writes them any more. */
  int64_t from = s->merged + 1;
  if (from < now - 1 - STATS_WINDOW) from = now - 1 - STATS_WINDOW;
  for (int64_t t = from; t <= now - 2; t++) fold(s, srv, t);
  if (now - 2 > s->merged) s->merged = now - 2;
  if (s->merged - s->first + 1 > STATS_WINDOW) s->first = s->merged - STATS_WINDOW + 1;
  pthread_mutex_unlock(&s->lock);
}

/* ---- the answers ---- */

static void putf(json_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(json_buf *b, const char *fmt, ...) {
  char t[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t, sizeof t, fmt, ap);
  va_end(ap);
  if (n > 0) json_buf_put(b, t, (size_t)n < sizeof t ? (size_t)n : sizeof t - 1);
}

static void put_key(json_buf *b, const char *k) {
  json_write_string(b, k, strlen(k));
  json_buf_putc(b, ':');
}

/* v in decimal, and when frac >= 0 a point and frac as three digits: a
 * full answer holds some 40,000 numbers, and vsnprintf for each would keep
 * the worker from deciding for milliseconds. */
static void put_uint(json_buf *b, uint64_t v, int frac) {
  char t[32], *p = t + sizeof t;
  if (frac >= 0) {
    for (int i = 0; i < 3; i++, frac /= 10) *--p = (char)('0' + frac % 10);
    *--p = '.';
  }
  do *--p = (char)('0' + v % 10);
  while (v /= 10);
  json_buf_put(b, p, (size_t)(t + sizeof t - p));
}

/* A µs figure from ns, or null for none. */
static void put_us(json_buf *b, uint32_t ns) {
  if (ns == 0)
    PUT_LIT(b, "null");
  else
    put_uint(b, ns / 1000, ns % 1000);
}

typedef uint32_t (*field_fn)(const rec *r, unsigned i);
static uint32_t f_count(const rec *r, unsigned i) { return r->count[i]; }
static uint32_t f_review(const rec *r, unsigned i) { return r->review[i]; }
static uint32_t f_source(const rec *r, unsigned i) { return r->source[i]; }
static uint32_t f_action(const rec *r, unsigned i) { return r->action[i]; }
static uint32_t f_refused(const rec *r, unsigned i) { return r->refused; }
static uint32_t f_misses(const rec *r, unsigned i) { return r->deadline_misses; }
static uint32_t f_limit(const rec *r, unsigned i) { return r->limit_refusals; }
static uint32_t f_werr(const rec *r, unsigned i) { return r->write_errors; }
static uint32_t f_dropped(const rec *r, unsigned i) { return r->dropped; }
static uint32_t f_queue(const rec *r, unsigned i) { return r->queue_depth; }
static uint32_t f_all(const rec *r, unsigned i) {
  uint32_t n = 0;
  for (unsigned k = 0; k <= STATS_STRATEGIES; k++) n += r->count[k];
  return n;
}
static uint32_t f_all_review(const rec *r, unsigned i) {
  uint32_t n = 0;
  for (unsigned k = 0; k <= STATS_STRATEGIES; k++) n += r->review[k];
  return n;
}

/* The record of second t, or NULL when it was not kept. */
static const rec *at(const stats *s, int64_t t) {
  const rec *r = &s->ring[t % STATS_WINDOW];
  return r->t == t ? r : NULL;
}

/* Whether f(r, i) is not 0 in some second of [from, to]. */
static int any(const stats *s, int64_t from, int64_t to, field_fn f, unsigned i) {
  for (int64_t t = from; t <= to; t++)
    if (at(s, t) && f(at(s, t), i)) return 1;
  return 0;
}

/* "key":[v, v, ...] over [from, to], and the sum into *sum. */
static void put_series(json_buf *b, const stats *s, const char *key, int64_t from, int64_t to,
                       field_fn f, unsigned i, uint64_t *sum) {
  put_key(b, key);
  json_buf_putc(b, '[');
  uint64_t total = 0;
  for (int64_t t = from; t <= to; t++) {
    const rec *r = at(s, t);
    uint32_t v = r ? f(r, i) : 0;
    total += v;
    if (t > from) json_buf_putc(b, ',');
    put_uint(b, v, -1);
  }
  json_buf_putc(b, ']');
  if (sum) *sum = total;
}

static void put_latency(json_buf *b, const stats *s, const char *key, int64_t from, int64_t to,
                        unsigned i, int p99) {
  put_key(b, key);
  json_buf_putc(b, '[');
  for (int64_t t = from; t <= to; t++) {
    const rec *r = at(s, t);
    if (t > from) json_buf_putc(b, ',');
    put_us(b, r ? (p99 ? r->p99[i] : r->p50[i]) : 0);
  }
  json_buf_putc(b, ']');
}

/* A number in the query (0 .. max), or def when absent; -1 when malformed. */
static long query_num(const http_request *r, const char *name, long def, long max) {
  size_t n;
  const char *v = http_query_param(r, name, &n);
  if (!v) return def;
  if (n == 0 || n > 9) return -1;
  long x = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9') return -1;
    x = x * 10 + (v[i] - '0');
  }
  return x > max ? max : x;
}

static void render_stats(server *srv, json_buf *b, long seconds) {
  stats *s = srv->stats;
  char v[65], ts[48];
  vd_engine_policy_version(srv->engine, v);
  vd_engine_counters c;
  int have = vd_engine_stats(srv->engine, &c) == 0;
  char sv[65], cv[65];
  double pct, agree;
  rollout_figures(srv, sv, cv, &pct, &agree); /* before the stats lock: it takes the rollout's */
  int64_t now_ns = clock_wall_ns();
  timefmt_format_rfc3339(now_ns / 1000000000, (int32_t)(now_ns % 1000000000), ts);

  pthread_mutex_lock(&s->lock);
  int64_t to = s->merged, from = s->merged - seconds + 1;
  if (from < s->first) from = s->first;
  if (s->merged == 0) from = 1, to = 0; /* no tick yet: empty series */
  PUT_LIT(b, "{\"now\":");
  json_write_string(b, ts, strlen(ts));
  putf(b, ",\"window_s\":%d,\"from\":%lld,\"to\":%lld", STATS_WINDOW, (long long)from,
       (long long)to);
  PUT_LIT(b, ",\"version\":{\"live\":");
  json_write_string(b, v, strlen(v));
  PUT_LIT(b, ",\"shadow\":");
  if (sv[0])
    json_write_string(b, sv, strlen(sv));
  else
    PUT_LIT(b, "null");
  PUT_LIT(b, ",\"canary\":");
  if (cv[0]) {
    json_write_string(b, cv, strlen(cv));
    putf(b, ",\"canary_percent\":%g", pct);
  } else {
    PUT_LIT(b, "null");
  }
  if (agree < 0)
    PUT_LIT(b, ",\"agreement\":null}");
  else
    putf(b, ",\"agreement\":%.6f}", agree);
  PUT_LIT(b,
          ",\"sketch\":{\"kind\":\"log-linear histogram, 8 buckets a power of two, 128 ns to "
          "2.1 s\",\"relative_error\":0.0625}");
  PUT_LIT(b, ",\"t\":[");
  for (int64_t t = from; t <= to; t++) {
    if (t > from) json_buf_putc(b, ',');
    put_uint(b, (uint64_t)t, -1);
  }
  json_buf_putc(b, ']');

  uint64_t total, review, refused, misses, limit, werr, dropped;
  json_buf_putc(b, ',');
  put_series(b, s, "decisions", from, to, f_all, 0, &total);
  json_buf_putc(b, ',');
  put_series(b, s, "review", from, to, f_all_review, 0, &review);
  json_buf_putc(b, ',');
  put_series(b, s, "refused", from, to, f_refused, 0, &refused);
  json_buf_putc(b, ',');
  put_series(b, s, "model_deadline_misses", from, to, f_misses, 0, &misses);
  json_buf_putc(b, ',');
  put_series(b, s, "limit_refusals", from, to, f_limit, 0, &limit);
  json_buf_putc(b, ',');
  put_series(b, s, "snapshot_write_errors", from, to, f_werr, 0, &werr);
  json_buf_putc(b, ',');
  put_series(b, s, "snapshots_dropped", from, to, f_dropped, 0, &dropped);
  json_buf_putc(b, ',');
  put_series(b, s, "snapshot_queue_depth", from, to, f_queue, 0, NULL);

  /* per strategy: the named ones, then "(other)" when it has any */
  PUT_LIT(b, ",\"strategies\":{");
  unsigned ns = atomic_load_explicit(&s->strategies.n, memory_order_acquire);
  int first = 1;
  for (unsigned i = 0; i <= STATS_STRATEGIES; i++) {
    if (i >= ns && i < STATS_STRATEGIES) continue;
    uint64_t n = 0;
    for (int64_t t = from; t <= to; t++) n += at(s, t) ? at(s, t)->count[i] : 0;
    if (i == STATS_STRATEGIES && n == 0) continue;
    if (!first) json_buf_putc(b, ',');
    first = 0;
    put_key(b, name_of(s, &s->strategies, i));
    json_buf_putc(b, '{');
    uint64_t sn, sr;
    put_series(b, s, "decisions", from, to, f_count, i, &sn);
    json_buf_putc(b, ',');
    put_series(b, s, "review", from, to, f_review, i, &sr);
    json_buf_putc(b, ',');
    put_latency(b, s, "p50_us", from, to, i, 0);
    json_buf_putc(b, ',');
    put_latency(b, s, "p99_us", from, to, i, 1);
    putf(b, ",\"total\":%llu,\"review_total\":%llu}", (unsigned long long)sn,
         (unsigned long long)sr);
  }
  PUT_LIT(b, "},\"sources\":{");
  for (unsigned i = 0; i < STATS_SOURCES; i++) {
    if (i == STATS_SOURCES - 1 && !any(s, from, to, f_source, i)) continue;
    if (i) json_buf_putc(b, ',');
    put_series(b, s, source_names[i], from, to, f_source, i, NULL);
  }
  PUT_LIT(b, "},\"actions\":{");
  unsigned na = atomic_load_explicit(&s->actions.n, memory_order_acquire);
  first = 1;
  for (unsigned i = 0; i <= STATS_ACTIONS; i++) {
    if (i >= na && i < STATS_ACTIONS) continue;
    if (i == STATS_ACTIONS && !any(s, from, to, f_action, i)) continue;
    if (!first) json_buf_putc(b, ',');
    first = 0;
    put_series(b, s, name_of(s, &s->actions, i), from, to, f_action, i, NULL);
  }
  pthread_mutex_unlock(&s->lock);

  putf(b,
       "},\"totals\":{\"decisions\":%llu,\"review\":%llu,\"review_share\":%.4f,\"refused\":%llu,"
       "\"model_deadline_misses\":%llu,\"limit_refusals\":%llu,\"snapshot_write_errors\":%llu,"
       "\"snapshots_dropped\":%llu}",
       (unsigned long long)total, (unsigned long long)review,
       total ? (double)review / (double)total : 0.0, (unsigned long long)refused,
       (unsigned long long)misses, (unsigned long long)limit, (unsigned long long)werr,
       (unsigned long long)dropped);
  if (have)
    putf(b,
         ",\"engine\":{\"snapshots\":%s,\"snapshot_queue_depth\":%llu,\"snapshot_write_"
         "failing\":%s,\"snapshots_unwritten\":%llu,\"snapshot_write_errors\":%llu,\"model_"
         "deadline_misses\":%llu,\"limit_refusals\":%llu}",
         c.snapshots_on ? "true" : "false", c.snapshot_queue_depth,
         c.snapshot_failing ? "true" : "false", c.snapshot_unwritten, c.snapshot_write_errors,
         c.model_deadline_misses, c.limit_refusals);
  PUT_LIT(b, "}\n");
}

void route_stats(conn *c, const http_request *r) {
  server *srv = conn_worker(c)->srv;
  long seconds = query_num(r, "seconds", STATS_WINDOW, STATS_WINDOW);
  if (seconds < 1)
    return conn_respond_error(c, 400, "bad_query", "seconds must be a whole number from 1 to 900",
                              "seconds");
  if (!srv->stats)
    return conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "the live figures are off", NULL);
  json_buf b;
  json_buf_init(&b, NULL);
  render_stats(srv, &b, seconds);
  if (b.oom)
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory writing the figures", NULL);
  else
    conn_respond(c, 200, "application/json", "Cache-Control: no-store\r\n", b.data, b.len);
  json_buf_free(&b);
}

/* A query value %-decoded into out (cap bytes with the NUL): its length, or
 * -1 when it does not fit or holds a bad escape. */
static long decode(const char *v, size_t n, char *out, size_t cap) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    char ch = v[i];
    if (ch == '+') {
      ch = ' ';
    } else if (ch == '%') {
      if (i + 2 >= n) return -1;
      char hex[3] = {v[i + 1], v[i + 2], 0};
      char *end;
      long x = strtol(hex, &end, 16);
      if (end != hex + 2 || x == 0) return -1;
      ch = (char)x;
      i += 2;
    }
    if (k + 1 >= cap) return -1;
    out[k++] = ch;
  }
  out[k] = '\0';
  return (long)k;
}

typedef struct recent_filter {
  char strategy[128], action[128], source[16];
  int review; /* -1 any */
} recent_filter;

static int cmp_recent(const void *a, const void *b) {
  const stats_recent_rec *x = a, *y = b;
  return x->time_ms < y->time_ms ? 1 : x->time_ms > y->time_ms ? -1 : 0;
}

void route_stats_recent(conn *c, const http_request *r) {
  server *srv = conn_worker(c)->srv;
  stats *s = srv->stats;
  if (!s)
    return conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "the live figures are off", NULL);
  long limit = query_num(r, "limit", 50, STATS_RECENT);
  if (limit < 1)
    return conn_respond_error(c, 400, "bad_query", "limit must be a whole number from 1 to 256",
                              "limit");
  recent_filter f = {.review = -1};
  static const char *const keys[3] = {"strategy", "action", "source"};
  char *outs[3] = {f.strategy, f.action, f.source};
  size_t caps[3] = {sizeof f.strategy, sizeof f.action, sizeof f.source};
  for (int k = 0; k < 3; k++) {
    size_t n;
    const char *v = http_query_param(r, keys[k], &n);
    outs[k][0] = '\0';
    if (v && decode(v, n, outs[k], caps[k]) < 0) {
      char msg[120];
      snprintf(msg, sizeof msg, "%s is not a %%-encoded name under %zu bytes", keys[k],
               caps[k] - 1);
      return conn_respond_error(c, 400, "bad_query", msg, keys[k]);
    }
  }
  size_t rn;
  const char *rv = http_query_param(r, "review", &rn);
  if (rv) {
    if (rn == 4 && memcmp(rv, "true", 4) == 0)
      f.review = 1;
    else if (rn == 5 && memcmp(rv, "false", 5) == 0)
      f.review = 0;
    else
      return conn_respond_error(c, 400, "bad_query", "review must be true or false", "review");
  }
  /* Who may read a recorded decision may see its id: the ids are what
   * GET /v1/snapshots/{id} takes. */
  const char *hidden = snapshot_read_refusal(c, r);

  size_t cap = (size_t)srv->nworkers * STATS_RECENT, n = 0;
  stats_recent_rec *all = malloc(cap * sizeof *all);
  if (!all) return conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory", NULL);
  for (int wi = 0; wi < srv->nworkers; wi++) {
    stats_worker *w = &srv->workers[wi].st;
    for (unsigned i = 0; i < STATS_RECENT; i++)
      if (recent_read(&w->recent[i], &all[n]) == 0) n++;
  }
  qsort(all, n, sizeof *all, cmp_recent);

  json_buf b;
  json_buf_init(&b, NULL);
  PUT_LIT(&b, "{\"decisions\":[");
  long shown = 0;
  for (size_t i = 0; i < n && shown < limit; i++) {
    const stats_recent_rec *e = &all[i];
    const char *strategy = name_of(s, &s->strategies, e->strategy);
    const char *action = e->action == NO_ACTION ? NULL : name_of(s, &s->actions, e->action);
    const char *source = source_names[e->source < STATS_SOURCES ? e->source : STATS_SOURCES - 1];
    if (f.strategy[0] && strcmp(f.strategy, strategy) != 0) continue;
    if (f.action[0] && (!action || strcmp(f.action, action) != 0)) continue;
    if (f.source[0] && strcmp(f.source, source) != 0) continue;
    if (f.review >= 0 && f.review != e->review) continue;
    if (shown++) json_buf_putc(&b, ',');
    char ts[48];
    timefmt_format_rfc3339(e->time_ms / 1000, (int32_t)(e->time_ms % 1000) * 1000000, ts);
    PUT_LIT(&b, "{\"snapshot_id\":");
    if (e->id[0] && !hidden)
      json_write_string(&b, e->id, strlen(e->id));
    else
      PUT_LIT(&b, "null");
    PUT_LIT(&b, ",\"time\":");
    json_write_string(&b, ts, strlen(ts));
    PUT_LIT(&b, ",\"strategy\":");
    json_write_string(&b, strategy, strlen(strategy));
    PUT_LIT(&b, ",\"action\":");
    if (action)
      json_write_string(&b, action, strlen(action));
    else
      PUT_LIT(&b, "null");
    PUT_LIT(&b, ",\"source\":");
    json_write_string(&b, source, strlen(source));
    PUT_LIT(&b, ",\"rule\":");
    if (e->rule[0])
      json_write_string(&b, e->rule, strlen(e->rule));
    else
      PUT_LIT(&b, "null");
    putf(&b, ",\"review\":%s,\"latency_us\":%.3f}", e->review ? "true" : "false",
         (double)e->latency_ns / 1e3);
  }
  PUT_LIT(&b, "],\"snapshot_ids\":");
  if (hidden) {
    PUT_LIT(&b, "{\"shown\":false,\"why\":");
    json_write_string(&b, hidden, strlen(hidden));
    json_buf_putc(&b, '}');
  } else {
    PUT_LIT(&b, "{\"shown\":true}");
  }
  PUT_LIT(&b, "}\n");
  free(all);
  if (b.oom)
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory writing the decisions", NULL);
  else
    conn_respond(c, 200, "application/json", "Cache-Control: no-store\r\n", b.data, b.len);
  json_buf_free(&b);
}
