/* local_fast.h — the local store's layout and its usual charge, for the
 * engine to compile into its own code.
 *
 * A decision with limits charges one or two counters, and a charge is
 * under two hundred instructions; going through state_hit and then
 * local_hit added two calls, a test for Redis and a division of the clock
 * each time. So the layout of a local store (local.c says why it is so)
 * and the charge's usual case — the key's counter found in its slot — are
 * here, and the limits stage (src/engine/decide.c) calls local_charge in
 * one function of its own, with the clock divided once a decision. A key
 * with no slot yet (an insert, with expiry and eviction) goes on, the lock
 * held, in local_hit_rest (local.c); a store with Redis goes through
 * state_hit as before. The lock, the counters (charges, refusals), the
 * second-chance mark and the GCRA rule (state_apply) are the same for
 * every caller: local_hit is local_charge too.
 *
 * Nothing outside src/state/ but the limits stage includes this file. */
#ifndef VD_STATE_LOCAL_FAST_H
#define VD_STATE_LOCAL_FAST_H

#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "core/bytes.h"
#include "state/internal.h"

#define LOCAL_NSHARDS 64
#define LOCAL_INLINE_KEY 40

/* One counter, one cache line. */
typedef struct local_slot {
  uint32_t hash; /* the key hash's low half, never 0; 0: an empty slot */
  uint16_t klen; /* keys are at most a few hundred bytes (decide.c) */
  uint8_t used;  /* charged since the clock hand last passed */
  uint8_t pad;
  int64_t tat;           /* µs: when every charge is paid back */
  int64_t penalty_until; /* µs */
  union {
    char key[LOCAL_INLINE_KEY]; /* klen <= LOCAL_INLINE_KEY */
    char *long_key;             /* else, malloc'd */
  } k;
} local_slot;

_Static_assert(sizeof(local_slot) == 64, "a slot is one cache line");

typedef struct local_shard {
  atomic_int lock; /* 0 free, 1 taken (local_lock) */
  uint32_t mask;   /* slots - 1; 0 with no table yet */
  uint32_t nkeys;
  uint32_t hand;  /* the clock hand: a slot index */
  uint32_t sweep; /* where inserts look for expired entries next */
  local_slot *slots;
  size_t key_bytes;                               /* keys kept apart from their slots */
  uint64_t charges, refusals, evictions, expired; /* under the lock: no atomics */
  char pad[56]; /* shards apart in memory; 128 bytes, so finding one is a shift */
} local_shard;

_Static_assert(sizeof(local_shard) == 128, "a shard is two cache lines");

struct local_store {
  local_shard shards[LOCAL_NSHARDS];
  size_t shard_limit;
  uint64_t seed, seed2; /* local_key_hash's secrets */
};

/* The store's call when the shard lock is taken (local.c): spins a little,
 * then yields the CPU, so a holder that was descheduled gets it back. */
void local_lock_wait(local_shard *s);

static inline void local_lock(local_shard *s) {
  if (__builtin_expect(atomic_exchange_explicit(&s->lock, 1, memory_order_acquire), 0))
    local_lock_wait(s);
}

static inline void local_unlock(local_shard *s) {
  atomic_store_explicit(&s->lock, 0, memory_order_release);
}

/* 64 x 64 -> 128-bit product, its halves folded: one multiply mixes every
 * bit of both words into both halves. */
static inline uint64_t local_fold_mul(uint64_t a, uint64_t b) {
  __uint128_t p = (__uint128_t)a * b;
  return (uint64_t)p ^ (uint64_t)(p >> 64);
}

static inline uint64_t local_load8(const char *p) {
  uint64_t w;
  memcpy(&w, p, 8);
  return w;
}

/* Seeded with two secrets, so that keys chosen by callers cannot be made to
 * collide: every word is combined with a secret before it is multiplied (a
 * word that could be made 0 would erase the other). Keys are short (a
 * limit's 8-byte id and a caller: 9 to 60 bytes), so the work is one
 * multiply per 16 bytes, the last 16 read overlapping the ones before (no
 * byte loop, no call), and one to finish: the shard is taken from the top
 * bits and the slot from the bottom ones. */
static inline uint64_t local_key_hash(const local_store *l, const char *k, size_t n) {
  uint64_t h = l->seed ^ n, a, b;
  if (n > 16) {
    size_t i = 0;
    if (n > 32) /* long keys: a loop */
      for (; i + 16 < n - 16; i += 16)
        h = local_fold_mul(local_load8(k + i) ^ l->seed2, local_load8(k + i + 8) ^ h);
    h = local_fold_mul(local_load8(k + i) ^ l->seed2, local_load8(k + i + 8) ^ h);
    a = local_load8(k + n - 16);
    b = local_load8(k + n - 8);
  } else if (n >= 8) {
    a = local_load8(k);
    b = local_load8(k + n - 8);
  } else if (n >= 4) {
    uint32_t x, y;
    memcpy(&x, k, 4);
    memcpy(&y, k + n - 4, 4);
    a = x;
    b = y;
  } else {
    a = n ? (uint64_t)(unsigned char)k[0] << 16 | (uint64_t)(unsigned char)k[n >> 1] << 8 |
                (unsigned char)k[n - 1]
          : 0;
    b = 0;
  }
  return local_fold_mul(local_fold_mul(a ^ l->seed2, b ^ h) ^ l->seed, n ^ l->seed2);
}

/* A slot's hash: the low half of the key's, never 0 (0 marks an empty slot). */
static inline uint32_t local_slot_hash(uint64_t h) {
  uint32_t x = (uint32_t)h;
  return x ? x : 1;
}

/* The shard of the key hashed h: the top bits. */
static inline local_shard *local_shard_of(local_store *l, uint64_t h) {
  return &l->shards[(h >> 58) & (LOCAL_NSHARDS - 1)];
}

static inline const char *local_slot_key(const local_slot *e) {
  return e->klen <= LOCAL_INLINE_KEY ? e->k.key : e->k.long_key;
}

/* a[0..n) == b[0..n) for a key: words compared without a branch each (the
 * hashes already agree, so the keys are almost always the same), the first
 * and last 16 bytes first, read overlapping: the usual key (9 to 32 bytes)
 * is two or four pairs of words and one test. */
static inline __attribute__((always_inline)) int local_key_same(const char *a, const char *b,
                                                                size_t n) {
  if (n < 8) return bytes_same(a, b, n);
  uint64_t d =
      (local_load8(a) ^ local_load8(b)) | (local_load8(a + n - 8) ^ local_load8(b + n - 8));
  if (n <= 16) return d == 0;
  d |= (local_load8(a + 8) ^ local_load8(b + 8)) |
       (local_load8(a + n - 16) ^ local_load8(b + n - 16));
  for (size_t i = 16; i + 16 < n; i += 16) /* longer keys: the middle */
    d |= (local_load8(a + i) ^ local_load8(b + i)) |
         (local_load8(a + i + 8) ^ local_load8(b + i + 8));
  return d == 0;
}

/* The slot of key (hash h32) in a shard that has a table, or the empty slot
 * where it would go. */
static inline __attribute__((always_inline)) local_slot *local_slot_find(local_shard *s,
                                                                         uint32_t h32,
                                                                         const char *key,
                                                                         size_t klen) {
  uint32_t m = s->mask;
  for (uint32_t i = h32 & m;; i = (i + 1) & m) {
    local_slot *e = &s->slots[i];
    if (!e->hash ||
        (e->hash == h32 && e->klen == klen && local_key_same(local_slot_key(e), key, klen)))
      return e;
  }
}

/* Asks for the cache line of the counter of the key hashed h (shard s)
 * without waiting for it: done before the lock is taken, whose atomic
 * exchange holds back the loads after it (a miss on the slot would only
 * start once the lock is held). A prefetch is a hint: the table is read
 * without the lock (atomically: grow_table may be replacing it), and a
 * line of a table being replaced is only a wasted load. */
static inline void local_slot_prefetch(local_shard *s, uint32_t h32) {
  uintptr_t tab = (uintptr_t)__atomic_load_n(&s->slots, __ATOMIC_RELAXED);
  if (tab) {
    uint32_t m = __atomic_load_n(&s->mask, __ATOMIC_RELAXED);
    __builtin_prefetch((const void *)(tab + (uintptr_t)(h32 & m) * sizeof(local_slot)), 1, 3);
  }
}

/* local_charge past its usual case, shard s locked: the key has no slot
 * (never charged, or removed once expired). Inserts it if it is charged,
 * unlocks s, fills *r. */
void local_hit_rest(local_store *l, local_shard *s, const char *key, size_t klen, uint32_t h32,
                    const limit_spec *sp, int64_t now, bool charge, limit_reading *r);

/* local_hit (internal.h) with the time in whole microseconds and a spec
 * whose spacing_us is set: the key's counter read at now, charged when
 * `charge` and the rule (state.h) allows, *r filled. When the key's slot is
 * live, all of it is done here. */
static inline __attribute__((always_inline)) void local_charge(local_store *l, const char *key,
                                                               size_t klen, const limit_spec *sp,
                                                               int64_t now, bool charge,
                                                               limit_reading *r) {
  uint64_t h = local_key_hash(l, key, klen);
  uint32_t h32 = local_slot_hash(h);
  local_shard *s = local_shard_of(l, h);
  local_slot_prefetch(s, h32);
  int64_t t = sp->spacing_us;
  local_lock(s);
  local_slot *e = s->slots ? local_slot_find(s, h32, key, klen) : NULL;
  if (__builtin_expect(!e || !e->hash, 0)) {
    local_hit_rest(l, s, key, klen, h32, sp, now, charge, r);
    return;
  }
  /* an expired entry reads as empty: its TAT and penalty are past */
  limit_reading rd = {.count = gcra_count(e->tat, now, t), .penalized = now < e->penalty_until};
  int starts_penalty = state_apply(sp, charge, &rd);
  if (rd.exceeded) s->refusals++;
  if (rd.charged) {
    e->used = 1;
    e->tat = (e->tat > now ? e->tat : now) + t;
    s->charges++;
    if (starts_penalty) e->penalty_until = now + sp->penalty_ns / 1000;
  }
  local_unlock(s);
  r->count = rd.count; /* field by field: cheaper than assembling one word */
  r->penalized = rd.penalized;
  r->charged = rd.charged;
  r->exceeded = rd.exceeded;
  r->degraded = false;
}

/* The local store of s when s has no Redis (every charge is local), else
 * NULL. */
static inline local_store *state_local_only(const state_store *s) {
  return s->redis ? NULL : s->local;
}

#endif
