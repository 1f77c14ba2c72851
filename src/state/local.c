/* local.c — the in-process counter store: sliding-window logs by key.
 *
 * 64 shards, each a chained hash table under its own mutex: a decision
 * locks one shard for the few hundred nanoseconds one counter update takes,
 * so threads charging different keys almost never meet, and threads
 * charging one key are serialised on it — which is what makes the count
 * exact (tests/state/test_local.c charges one key from several threads).
 * A mutex rather than lock-free entries because one update touches a log of
 * times, not one word.
 *
 * An entry holds its key, the times of its charges still in the window (a
 * ring that grows by doubling up to the limit's budget: a key charged once
 * costs one slot, not `budget`), the end of its penalty and when it
 * expires: the later of its last charge + window and the penalty's end.
 * Times in one log never go backwards: a charge whose clock reading is
 * older than the last one logged (threads read the clock before taking the
 * lock) is logged at the last one's time.
 *
 * Expiry is lazy: an expired entry met by a lookup starts over, and each
 * insert removes expired entries from the tail of its shard's LRU list.
 * The memory bound: each shard may use max_bytes / 64 (entries, keys and
 * logs, counted by what was allocated); an insert or a log growing past it
 * removes least recently used entries — expired ones count as `expired`,
 * live ones as `evictions` (a live key evicted forgets its charges: the
 * bound is kept by letting such a caller through early, never by refusing).
 *
 * Not here: Redis (redis.c), persistence across restarts (not built). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "state/internal.h"

#define NSHARDS 64
#define MIN_BUCKETS 16

typedef struct entry entry;
struct entry {
  entry *next;                /* hash chain */
  entry *lru_prev, *lru_next; /* prev: more recent */
  uint64_t hash;
  int64_t expires_ns;
  int64_t penalty_until;
  int64_t *times; /* ring */
  uint32_t n, cap, head;
  uint32_t klen;
  char key[];
};

typedef struct shard {
  pthread_mutex_t lock;
  entry **buckets;
  uint32_t nbuckets; /* power of two */
  uint32_t nkeys;
  size_t bytes;
  entry *lru_head, *lru_tail;
  char pad[64];
} shard;

struct local_store {
  shard shards[NSHARDS];
  size_t shard_limit;
  uint64_t seed;
  _Atomic uint64_t charges, refusals, evictions, expired;
};

static uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

/* Seeded, so that keys chosen by callers cannot be made to collide. */
static uint64_t key_hash(uint64_t seed, const char *k, size_t n) {
  uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ull);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, k + i, 8);
    h = mix(h ^ w) + 0x9e3779b97f4a7c15ull;
  }
  uint64_t w = 0;
  memcpy(&w, k + i, n - i);
  return mix(h ^ w ^ ((uint64_t)(n - i) << 56));
}

local_store *local_open(size_t max_bytes) {
  local_store *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  if (!max_bytes) max_bytes = (size_t)64 << 20;
  l->shard_limit = max_bytes / NSHARDS;
  if (l->shard_limit < 1024) l->shard_limit = 1024;
  uint64_t seed = (uint64_t)(uintptr_t)l;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  l->seed = mix(seed ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30));
  for (int i = 0; i < NSHARDS; i++) pthread_mutex_init(&l->shards[i].lock, NULL);
  return l;
}

static size_t entry_bytes(const entry *e) {
  return sizeof *e + e->klen + (size_t)e->cap * sizeof *e->times;
}

static void entry_free(entry *e) {
  free(e->times);
  free(e);
}

void local_close(local_store *l) {
  if (!l) return;
  for (int i = 0; i < NSHARDS; i++) {
    shard *s = &l->shards[i];
    for (uint32_t b = 0; b < s->nbuckets; b++)
      for (entry *e = s->buckets[b], *nx; e; e = nx) {
        nx = e->next;
        entry_free(e);
      }
    free(s->buckets);
    pthread_mutex_destroy(&s->lock);
  }
  free(l);
}

static void lru_unlink(shard *s, entry *e) {
  if (e->lru_prev)
    e->lru_prev->lru_next = e->lru_next;
  else
    s->lru_head = e->lru_next;
  if (e->lru_next)
    e->lru_next->lru_prev = e->lru_prev;
  else
    s->lru_tail = e->lru_prev;
  e->lru_prev = e->lru_next = NULL;
}

static void lru_push(shard *s, entry *e) {
  e->lru_prev = NULL;
  e->lru_next = s->lru_head;
  if (s->lru_head) s->lru_head->lru_prev = e;
  s->lru_head = e;
  if (!s->lru_tail) s->lru_tail = e;
}

static void entry_remove(shard *s, entry *e) {
  entry **p = &s->buckets[e->hash & (s->nbuckets - 1)];
  while (*p != e) p = &(*p)->next;
  *p = e->next;
  lru_unlink(s, e);
  s->nkeys--;
  s->bytes -= entry_bytes(e);
  entry_free(e);
}

static void grow_table(shard *s) {
  uint32_t nb = s->nbuckets ? s->nbuckets * 2 : MIN_BUCKETS;
  entry **b = calloc(nb, sizeof *b);
  if (!b) return; /* chains just get longer */
  for (uint32_t i = 0; i < s->nbuckets; i++)
    for (entry *e = s->buckets[i], *nx; e; e = nx) {
      nx = e->next;
      e->next = b[e->hash & (nb - 1)];
      b[e->hash & (nb - 1)] = e;
    }
  s->bytes += (size_t)(nb - s->nbuckets) * sizeof *b;
  free(s->buckets);
  s->buckets = b;
  s->nbuckets = nb;
}

/* Removes least recently used entries until the shard is within its bound,
 * sparing `keep` (the entry being updated). */
static void enforce_bound(local_store *l, shard *s, entry *keep, int64_t now) {
  while (s->bytes > l->shard_limit) {
    entry *v = s->lru_tail;
    if (v == keep) v = v ? v->lru_prev : NULL;
    if (!v) break;
    atomic_fetch_add_explicit(v->expires_ns <= now ? &l->expired : &l->evictions, 1,
                              memory_order_relaxed);
    entry_remove(s, v);
  }
}

/* Appends t to e's ring, growing it up to cap_max. 0, or -1 out of memory. */
static int log_push(shard *s, entry *e, int64_t t, uint32_t cap_max) {
  if (e->n == e->cap) {
    uint32_t nc = e->cap ? e->cap * 2 : 1;
    if (nc > cap_max) nc = cap_max;
    if (nc <= e->n) nc = e->n + 1; /* the budget shrank on a reload: keep what is logged */
    int64_t *nt = malloc((size_t)nc * sizeof *nt);
    if (!nt) return -1;
    for (uint32_t i = 0; i < e->n; i++) nt[i] = e->times[(e->head + i) % e->cap];
    free(e->times);
    s->bytes += (size_t)(nc - e->cap) * sizeof *nt;
    e->times = nt;
    e->cap = nc;
    e->head = 0;
  }
  e->times[(e->head + e->n) % e->cap] = t;
  e->n++;
  return 0;
}

void local_hit(local_store *l, const char *key, size_t klen, const limit_spec *sp, int64_t now,
               bool charge, limit_reading *r) {
  memset(r, 0, sizeof *r);
  uint64_t h = key_hash(l->seed, key, klen);
  shard *s = &l->shards[(h >> 58) & (NSHARDS - 1)];
  pthread_mutex_lock(&s->lock);
  entry *e = NULL;
  if (s->nbuckets)
    for (e = s->buckets[h & (s->nbuckets - 1)]; e; e = e->next)
      if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0) break;
  if (e && e->expires_ns <= now) { /* expired: it starts over */
    e->n = e->head = 0;
    e->penalty_until = 0;
  }
  if (e) {
    int64_t from = now - sp->window_ns; /* charges at or before `from` are out */
    while (e->n && e->times[e->head] <= from) {
      e->head = (e->head + 1) % e->cap;
      e->n--;
    }
    r->count = e->n;
    r->penalized = now < e->penalty_until;
  }
  int starts_penalty = state_apply(sp, charge, r);
  if (r->exceeded) atomic_fetch_add_explicit(&l->refusals, 1, memory_order_relaxed);
  if (!r->charged) {
    pthread_mutex_unlock(&s->lock);
    return;
  }
  if (!e) {
    /* drop expired entries from the LRU tail first: new keys pay for old ones */
    for (int i = 0; i < 2 && s->lru_tail && s->lru_tail->expires_ns <= now; i++) {
      atomic_fetch_add_explicit(&l->expired, 1, memory_order_relaxed);
      entry_remove(s, s->lru_tail);
    }
    if (s->nkeys >= s->nbuckets) grow_table(s);
    e = calloc(1, sizeof *e + klen);
    if (!e || !s->nbuckets) {
      free(e);
      r->charged = false; /* out of memory: counted as not charged */
      pthread_mutex_unlock(&s->lock);
      return;
    }
    e->hash = h;
    e->klen = (uint32_t)klen;
    memcpy(e->key, key, klen);
    e->next = s->buckets[h & (s->nbuckets - 1)];
    s->buckets[h & (s->nbuckets - 1)] = e;
    s->nkeys++;
    s->bytes += entry_bytes(e);
  } else {
    lru_unlink(s, e);
  }
  lru_push(s, e);
  int64_t t = now;
  if (e->n && e->times[(e->head + e->n - 1) % e->cap] > t) t = e->times[(e->head + e->n - 1) % e->cap];
  if (log_push(s, e, t, sp->budget) != 0) {
    r->charged = false;
  } else {
    atomic_fetch_add_explicit(&l->charges, 1, memory_order_relaxed);
    if (starts_penalty) e->penalty_until = now + sp->penalty_ns;
  }
  e->expires_ns = t + sp->window_ns;
  if (e->penalty_until > e->expires_ns) e->expires_ns = e->penalty_until;
  enforce_bound(l, s, e, now);
  pthread_mutex_unlock(&s->lock);
}

void local_stats(local_store *l, state_stats *out) {
  for (int i = 0; i < NSHARDS; i++) {
    shard *s = &l->shards[i];
    pthread_mutex_lock(&s->lock);
    out->keys += s->nkeys;
    out->bytes += s->bytes;
    pthread_mutex_unlock(&s->lock);
  }
  out->charges += atomic_load_explicit(&l->charges, memory_order_relaxed);
  out->refusals += atomic_load_explicit(&l->refusals, memory_order_relaxed);
  out->evictions += atomic_load_explicit(&l->evictions, memory_order_relaxed);
  out->expired += atomic_load_explicit(&l->expired, memory_order_relaxed);
}
