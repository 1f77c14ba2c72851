/* store.c — state_store: the calls the engine makes, whatever holds the
 * counters.
 *
 * A local store is a local_store. A Redis store is a redis_store plus a
 * local one: when Redis fails or misses its deadline the reading comes
 * from on_error — the local store (counting on this node alone until Redis
 * is back), an empty counter (allow) or an exceeded one (deny) — marked
 * degraded and counted in remote_fallbacks.
 *
 * Not here: the stores themselves (local.c, redis.c). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "state/internal.h"

int state_open_local(const state_opts *o, state_store **out, char *err, size_t errlen) {
  return state_open("local", o, out, err, errlen);
}

int state_open(const char *url, const state_opts *o, state_store **out, char *err, size_t errlen) {
  *out = NULL;
  state_store *s = calloc(1, sizeof *s);
  if (!s || !(s->local = local_open(o ? o->max_bytes : 0))) {
    free(s);
    snprintf(err, errlen, "out of memory opening the counter store");
    return -1;
  }
  s->on_error = o ? o->on_error : STATE_FALLBACK_LOCAL;
  if (!url || !*url || strcmp(url, "local") == 0) {
    snprintf(s->desc, sizeof s->desc, "local");
    if (o && o->persist_path && *o->persist_path) {
      if (!(s->persist_path = strdup(o->persist_path))) {
        state_close(s);
        snprintf(err, errlen, "out of memory");
        return -1;
      }
      /* a file that does not read back leaves the counters empty: said in
       * last_error, not fatal (a decision service should start) */
      local_load(s->local, s->persist_path, clock_wall_ns(), s->last_error, sizeof s->last_error);
    }
  } else if (strncmp(url, "redis://", 8) == 0) {
    s->redis = redis_open(url, o && o->timeout_ms ? o->timeout_ms : 50, err, errlen);
    if (!s->redis) {
      state_close(s);
      return -1;
    }
    snprintf(s->desc, sizeof s->desc, "%s", url);
  } else {
    snprintf(err, errlen,
             "unknown counter store '%s': use 'local' or redis://HOST:PORT (docs/deploy.md)", url);
    state_close(s);
    return -1;
  }
  *out = s;
  return 0;
}

int state_save(state_store *s, char *err, size_t errlen) {
  if (!s || !s->persist_path) return 0;
  return local_save(s->local, s->persist_path, clock_wall_ns(), err, errlen);
}

void state_close(state_store *s) {
  if (!s) return;
  if (s->persist_path) {
    state_save(s, s->last_error, sizeof s->last_error);
    free(s->persist_path);
  }
  if (s->redis) redis_close(s->redis);
  local_close(s->local);
  free(s);
}

/* A Redis store's reading, with its fallback (kept out of state_hit, so
 * that a local store's call is a jump to local_hit). */
__attribute__((noinline)) static void remote_hit(state_store *s, const char *key, size_t klen,
                                                 const limit_spec *sp, int64_t now_ns, bool charge,
                                                 limit_reading *r) {
  if (redis_hit(s->redis, key, klen, sp, now_ns, charge, r) == 0) {
    if (r->exceeded) atomic_fetch_add_explicit(&s->refusals, 1, memory_order_relaxed);
    return;
  }
  atomic_fetch_add_explicit(&s->remote_errors, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->remote_fallbacks, 1, memory_order_relaxed);
  switch (s->on_error) {
    case STATE_FALLBACK_ALLOW:
      memset(r, 0, sizeof *r);
      state_apply(sp, false, r); /* an empty counter, not charged: nothing refused */
      break;
    case STATE_FALLBACK_DENY:
      memset(r, 0, sizeof *r);
      r->count = sp->budget;
      state_apply(sp, false, r); /* read as used up: refused */
      atomic_fetch_add_explicit(&s->refusals, 1, memory_order_relaxed);
      break;
    default:
      local_hit(s->local, key, klen, sp, now_ns, charge, r);
      break;
  }
  r->degraded = true;
}

void state_hit(state_store *s, const char *key, size_t klen, const limit_spec *sp, int64_t now_ns,
               bool charge, limit_reading *r) {
  if (__builtin_expect(s->redis == NULL, 1))
    local_hit(s->local, key, klen, sp, now_ns, charge, r);
  else
    remote_hit(s, key, klen, sp, now_ns, charge, r);
}

void state_get_stats(state_store *s, state_stats *out) {
  memset(out, 0, sizeof *out);
  if (!s) return;
  local_stats(s->local, out);
  out->refusals += atomic_load_explicit(&s->refusals, memory_order_relaxed);
  out->remote_errors = atomic_load_explicit(&s->remote_errors, memory_order_relaxed);
  out->remote_fallbacks = atomic_load_explicit(&s->remote_fallbacks, memory_order_relaxed);
  snprintf(out->last_error, sizeof out->last_error, "%s", s->last_error);
}

const char *state_describe(const state_store *s) { return s ? s->desc : "none"; }

/* FNV-1a over "STRATEGY\x1fLIMIT", then a finisher that spreads every bit,
 * written least significant byte first. Fixed, not seeded: a counter file
 * written by one process is read by the next (two limits' ids colliding is
 * a 1 in 2^64 chance, and would only make them share counters). */
void state_limit_id(const char *sn, size_t sl, const char *ln, size_t ll, char out[8]) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < sl; i++) h = (h ^ (unsigned char)sn[i]) * 0x100000001b3ull;
  h = (h ^ 0x1f) * 0x100000001b3ull;
  for (size_t i = 0; i < ll; i++) h = (h ^ (unsigned char)ln[i]) * 0x100000001b3ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  for (int i = 0; i < 8; i++) out[i] = (char)(h >> (8 * i));
}
