/* stats.h — what GET /v1/stats and GET /v1/stats/recent show (docs/server.md,
 * "Live figures"), and the console draws: per-second figures for the last 15
 * minutes, and the latest decisions.
 *
 * The deciding path writes only its own worker's stats_worker, with plain
 * relaxed loads and stores (one writer each, like metrics.c): a latency
 * sketch and counters for the current second, and a slot of the recent
 * ring. Once a second the main loop (stats_tick) folds every worker's
 * seconds that have ended into one server-wide ring of 900 records, under a
 * mutex that only the tick and the readers take. Memory is fixed at start:
 * about 80 KB a worker and 430 KB for the ring.
 *
 * Latency sketch: a log-linear histogram, 8 sub-buckets per power of two
 * from 128 ns to 2^31 ns (about 2.1 s), one under and one over; a quantile
 * is read as the midpoint of the bucket holding its rank, so it is within
 * 6.25% of the true value of that rank (and of the true quantile). */
#ifndef VD_SERVER_STATS_H
#define VD_SERVER_STATS_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "verdict.h"

#define STATS_WINDOW 900    /* seconds kept */
#define STATS_STRATEGIES 16 /* strategies named; past them, "(other)" */
#define STATS_ACTIONS 32    /* actions named; past them, "(other)" */
#define STATS_SOURCES 5     /* rule, model, default, error, (other) */
#define STATS_SUB_BITS 3    /* 8 sub-buckets an octave */
#define STATS_OCT_LO 7      /* the first octave starts at 128 ns */
#define STATS_OCT_HI 30     /* the last ends at 2^31 ns */
#define STATS_BINS ((STATS_OCT_HI - STATS_OCT_LO + 1) * (1 << STATS_SUB_BITS) + 2)
#define STATS_SLOTS 4     /* seconds a worker keeps before the tick folds them */
#define STATS_RECENT 256  /* recent decisions a worker keeps */
#define STATS_RULE_LEN 48 /* a rule's name in the recent ring, cut to fit */

/* One strategy's second on one worker. */
typedef struct stats_strat_sec {
  _Atomic uint32_t count, review;
  _Atomic uint32_t hist[STATS_BINS];
} stats_strat_sec;

typedef struct stats_sec {
  _Atomic int64_t tag; /* the unix second it holds; -1 while being reset */
  stats_strat_sec strat[STATS_STRATEGIES + 1];
  _Atomic uint32_t source[STATS_SOURCES];
  _Atomic uint32_t action[STATS_ACTIONS + 1];
  _Atomic uint32_t refused;
} stats_sec;

/* A recent decision as the ring keeps it: copied in and out word by word
 * under the entry's sequence number (a seqlock: odd while being written). */
typedef struct stats_recent_rec {
  int64_t time_ms;
  uint32_t latency_ns;
  uint8_t strategy, action, source, review;
  char id[40];
  char rule[STATS_RULE_LEN];
} stats_recent_rec;

#define STATS_RECENT_WORDS ((sizeof(stats_recent_rec) + 7) / 8)

typedef struct stats_recent_entry {
  _Atomic uint64_t seq;
  _Atomic uint64_t w[STATS_RECENT_WORDS];
} stats_recent_entry;

typedef struct stats_worker {
  stats_sec sec[STATS_SLOTS];
  stats_recent_entry recent[STATS_RECENT];
  _Atomic uint64_t recent_head;        /* entries written so far */
  unsigned last_strategy, last_action; /* the names last seen: checked first */
} stats_worker;

typedef struct stats stats;
struct server;
struct conn;
struct http_request;

/* The sketch (tests/server/test_stats.c checks its error): the bucket of a
 * latency in ns, the value a bucket stands for, and the q-quantile (nearest
 * rank) of a histogram h[STATS_BINS] of n values (0 when n is 0). */
unsigned stats_bin(uint64_t ns);
uint64_t stats_bin_value(unsigned b);
uint32_t stats_quantile(const uint32_t *h, uint64_t n, double q);

/* The server-wide part (made before the workers start). NULL: out of memory. */
stats *stats_new(void);
void stats_free(stats *s);

/* The deciding path: a decision made with d; a decide request refused. */
void stats_count_decision(stats *s, stats_worker *w, const vd_decision *d);
void stats_count_refused(stats_worker *w);

/* The main loop, once a second: folds the workers' ended seconds into the
 * ring, and charges the growth of the engine's counters since the last tick. */
void stats_tick(struct server *srv);

/* GET /v1/stats and GET /v1/stats/recent (docs/server.md). */
void route_stats(struct conn *c, const struct http_request *r);
void route_stats_recent(struct conn *c, const struct http_request *r);

#endif
