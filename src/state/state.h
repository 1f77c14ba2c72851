/* state.h — where rate-limit counters live: the store a strategy's `limits`
 * charge and read (docs/policy.md, "Limits").
 *
 * One algorithm, GCRA (the generic cell rate algorithm: a token bucket kept
 * as one time). A limit of `budget` charges per `window` spaces charges
 * T = window / budget apart (rounded up to a whole microsecond); a key's
 * counter is one time, its TAT (theoretical arrival time): each charge
 * moves it to max(TAT, now) + T. At time `now` a key's count is
 * ceil((TAT - now) / T) when TAT > now, else 0: the charges not yet paid
 * back, one paid back every T. So a quiet key may make `budget` charges at
 * once, and then one every T; in any span of length L it makes at most
 * budget + floor(L / T) charges (up to 2 * budget - 1 in one window; with
 * budget 1, exactly one per window). A request the limit applies to is
 * refused when a penalty is running for its key or when the count has
 * reached the budget; otherwise, when it is charged, TAT moves, and the
 * charge that brings the count to the budget starts the penalty
 * (penalty_until = now + penalty). A refused request is never charged.
 * Times are whole microseconds (a nanosecond clock reading is truncated),
 * so that the Redis script, whose numbers are doubles, computes exactly the
 * same thing. state_apply is the rule given the count, in one place: the
 * local store, the Redis script (redis.c) and replay all follow it.
 *
 * Stores:
 *   local.c  in this process: sharded hash tables (a 64-byte slot a
 *            counter) under per-shard spinlocks, expiry, a memory bound with
 *            approximately-LRU ("second chance") eviction (counted)
 *            (optionally kept in a file across restarts)
 *   redis.c  in a Redis server shared by several nodes (hiredis): one Lua
 *            script updates a key atomically; when Redis is slow or down a
 *            decision uses the local store, or reads as allowed or as refused,
 *            as the store was opened to do (counted)
 *
 * A store is shared by every thread of an engine; every call is thread-safe.
 *
 * Not here: which requests reach a limit and what the decision does with a
 * refusal (src/engine/decide.c), recording readings (src/engine/record.c). */
#ifndef VD_STATE_STATE_H
#define VD_STATE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A limit as the store needs it. */
typedef struct limit_spec {
  int64_t window_ns;  /* > 0 */
  uint32_t budget;    /* >= 1 */
  int64_t penalty_ns; /* 0: none */
  int64_t spacing_us; /* T (state_spacing_us), or 0: the store computes it on each call */
} limit_spec;

/* GCRA's spacing T in whole microseconds: window / budget, rounded up, at
 * least 1. A spec made once (the engine makes one per limit when a bundle
 * loads) carries it in spacing_us, which saves two divisions a charge. */
static inline int64_t state_spacing_us(int64_t window_ns, uint32_t budget) {
  int64_t w = window_ns / 1000;
  int64_t t = (w + budget - 1) / budget;
  return t > 0 ? t : 1;
}

/* A limit's id, which heads its counters' keys in the local store: 8 bytes
 * from the strategy's and the limit's names (a fixed hash, the same in
 * every process, so that a counter file outlives the process that wrote
 * it). The engine makes it once per limit (names.c, limit_key.id). */
void state_limit_id(const char *strategy, size_t slen, const char *limit, size_t llen, char out[8]);

/* What one decision read from a counter: the state before this decision
 * (what the snapshot records and replay feeds back) and what the decision
 * did to it. */
typedef struct limit_reading {
  uint32_t count; /* charges counted before this decision (0 to budget) */
  bool penalized; /* a penalty was running */
  bool charged;   /* this decision was counted */
  bool exceeded;  /* this decision is refused by the limit */
  bool degraded;  /* the shared store failed; the reading came from the fallback */
} limit_reading;

/* The rule itself, given the state before: fills charged and exceeded.
 * charge: the request is to be charged if it passes. Returns 1 when the
 * charge brings the count to the budget (the penalty starts), else 0. */
static inline int state_apply(const limit_spec *sp, bool charge, limit_reading *r) {
  r->exceeded = r->penalized || r->count >= sp->budget;
  r->charged = charge && !r->exceeded;
  return r->charged && r->count + 1 >= sp->budget && sp->penalty_ns > 0;
}

typedef struct state_store state_store;

/* What a Redis-backed store does when Redis fails or misses its deadline. */
typedef enum state_on_error {
  STATE_FALLBACK_LOCAL = 0, /* count in this node's local store meanwhile */
  STATE_FALLBACK_ALLOW,     /* read as an empty counter: nothing is refused */
  STATE_FALLBACK_DENY,      /* read as exceeded: the limit refuses */
} state_on_error;

typedef struct state_opts {
  size_t max_bytes;    /* memory bound of the local store; 0: 64 MiB */
  uint32_t timeout_ms; /* Redis: per command; 0: 50 */
  state_on_error on_error;
  /* local: keep the counters in this file across restarts (read at open,
   * written at close); NULL: not kept */
  const char *persist_path;
} state_opts;

typedef struct state_stats {
  uint64_t keys;             /* live keys (local) */
  uint64_t bytes;            /* bytes they use (local) */
  uint64_t charges;          /* charges counted */
  uint64_t refusals;         /* readings that refused */
  uint64_t evictions;        /* keys evicted by the memory bound before they expired */
  uint64_t expired;          /* keys removed because they expired */
  uint64_t remote_errors;    /* Redis: commands that failed or timed out */
  uint64_t remote_fallbacks; /* Redis: readings served by on_error */
  char last_error[256];      /* the counter file's last problem, "" none */
} state_stats;

/* A local store. Returns 0, or -1 with a message in err. */
int state_open_local(const state_opts *o, state_store **out, char *err, size_t errlen);
/* A Redis store for "redis://HOST:PORT" (optionally "/DB"). Connects lazily
 * per thread; a server that is down at open time is not an error (the
 * fallback serves until it comes back). Returns 0, or -1 for a URL that does
 * not parse, with a message in err. */
int state_open(const char *url, const state_opts *o, state_store **out, char *err, size_t errlen);
/* Writes a local store's counters to its file now (also done by
 * state_close); 0, or -1 with err. Nothing to do without a file. */
int state_save(state_store *s, char *err, size_t errlen);
void state_close(state_store *s);

/* Reads the counter `key` (any bytes) at time now_ns, charges it when
 * `charge` and the rule allows, and fills *r. charge false: read only, the
 * store is not changed. Never fails: a store in trouble answers as its
 * on_error says, with r->degraded set. */
void state_hit(state_store *s, const char *key, size_t klen, const limit_spec *sp, int64_t now_ns,
               bool charge, limit_reading *r);

void state_get_stats(state_store *s, state_stats *out);
/* "local" or "redis://host:port" */
const char *state_describe(const state_store *s);

#endif
