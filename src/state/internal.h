/* internal.h — what the files of src/state/ share; outside them, only the
 * limits stage sees it, through local_fast.h.
 *
 *   store.c  state_store: the public calls, dispatching to a kind of store
 *   local.c  the in-process store (sharded, expiring, memory-bound)
 *   redis.c  the Redis store (hiredis, one Lua script)
 *   local_fast.h  the local store's layout and usual charge, inlined by the
 *            limits stage (src/engine/decide.c) */
#ifndef VD_STATE_INTERNAL_H
#define VD_STATE_INTERNAL_H

#include <stdatomic.h>

#include "state/state.h"

/* GCRA in whole microseconds (state.h): the spacing T of a limit, and a
 * key's count at now given its TAT. The Redis script computes the same. */
static inline int64_t gcra_spacing_us(const limit_spec *sp) {
  return sp->spacing_us > 0 ? sp->spacing_us : state_spacing_us(sp->window_ns, sp->budget);
}

static inline uint32_t gcra_count(int64_t tat, int64_t now, int64_t t) {
  if (tat <= now) return 0;
  uint64_t ahead = (uint64_t)(tat - now - 1); /* ceil((tat - now) / t), without overflowing */
  if (ahead < UINT32_MAX && (uint64_t)t <= UINT32_MAX) /* the usual case: a 32-bit division, */
    return (uint32_t)ahead / (uint32_t)t + 1;          /* several times faster than 64 */
  uint64_t n = ahead / (uint64_t)t + 1;
  return n < UINT32_MAX ? (uint32_t)n : UINT32_MAX;
}

typedef struct local_store local_store;

local_store *local_open(size_t max_bytes);
void local_close(local_store *l);
void local_hit(local_store *l, const char *key, size_t klen, const limit_spec *sp, int64_t now_ns,
               bool charge, limit_reading *r);
/* Writes the live entries to path (temp file + rename); 0, or -1 with err. */
int local_save(local_store *l, const char *path, int64_t now, char *err, size_t errlen);
/* Reads path (absent: nothing to do) into a store not yet shared; 0, or -1
 * with err when the file is unreadable or not whole (the store is then empty). */
int local_load(local_store *l, const char *path, int64_t now, char *err, size_t errlen);
/* adds keys, bytes, charges, refusals, evictions, expired into out */
void local_stats(local_store *l, state_stats *out);

typedef struct redis_store redis_store;

/* Parses "redis://HOST:PORT[/DB]". Returns NULL with a message in err. */
redis_store *redis_open(const char *url, uint32_t timeout_ms, char *err, size_t errlen);
void redis_close(redis_store *r);
/* 0 with *r filled, or -1 when Redis failed or missed its deadline. */
int redis_hit(redis_store *rs, const char *key, size_t klen, const limit_spec *sp, int64_t now_ns,
              bool charge, limit_reading *r);

/* The store the engine holds (store.c). Here, not in store.c, so that
 * local_fast.h can tell a local store from a Redis one. */
struct state_store {
  local_store *local;
  redis_store *redis; /* NULL: local only */
  state_on_error on_error;
  char desc[300];
  char *persist_path; /* local: the counter file, or NULL */
  char last_error[256];
  _Atomic uint64_t remote_errors, remote_fallbacks, refusals;
};

#endif
