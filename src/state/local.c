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
 * Persistence (local_save / local_load, for --state-file): the live entries
 * written to a file when the store closes and read back when it opens, so a
 * restart keeps counts and penalties. The file: "VDSTATE1", then per entry
 * its key length (u32), key, penalty end and expiry (i64), number of times
 * (u32) and the times (i64), native byte order, ending with a count of
 * entries (u64) as a check. Written to a temporary name and renamed; a file
 * that does not read back whole is ignored (the store starts empty) and
 * said so. Entries already expired when read are skipped.
 *
 * Not here: Redis (redis.c). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

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
  int64_t oldest, newest; /* times[head] and the last time logged, when n > 0: the
                           * common update reads neither end of a long ring */
  int64_t *times;         /* ring */
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
  uint64_t charges, refusals, evictions, expired; /* under the lock: no atomics */
  char pad[64];
} shard;

struct local_store {
  shard shards[NSHARDS];
  size_t shard_limit;
  uint64_t seed;
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
    if (v->expires_ns <= now)
      s->expired++;
    else
      s->evictions++;
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
  uint32_t at = e->head + e->n;
  e->times[at >= e->cap ? at - e->cap : at] = t;
  if (!e->n) e->oldest = t;
  e->newest = t;
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
    while (e->n && e->oldest <= from) {
      if (++e->head == e->cap) e->head = 0;
      if (--e->n) e->oldest = e->times[e->head];
    }
    r->count = e->n;
    r->penalized = now < e->penalty_until;
  }
  int starts_penalty = state_apply(sp, charge, r);
  if (r->exceeded) s->refusals++;
  if (!r->charged) {
    pthread_mutex_unlock(&s->lock);
    return;
  }
  if (!e) {
    /* drop expired entries from the LRU tail first: new keys pay for old ones */
    for (int i = 0; i < 2 && s->lru_tail && s->lru_tail->expires_ns <= now; i++) {
      s->expired++;
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
  if (e->n && e->newest > t) t = e->newest;
  if (log_push(s, e, t, sp->budget) != 0) {
    r->charged = false;
  } else {
    s->charges++;
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
    out->charges += s->charges;
    out->refusals += s->refusals;
    out->evictions += s->evictions;
    out->expired += s->expired;
    pthread_mutex_unlock(&s->lock);
  }
}

/* ---- persistence ---- */

static const char MAGIC[8] = "VDSTATE1";

int local_save(local_store *l, const char *path, int64_t now, char *err, size_t errlen) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
    snprintf(err, errlen, "%s: path too long", path);
    return -1;
  }
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
    return -1;
  }
  uint64_t n = 0;
  int ok = fwrite(MAGIC, 1, 8, f) == 8;
  for (int i = 0; i < NSHARDS && ok; i++) {
    shard *s = &l->shards[i];
    pthread_mutex_lock(&s->lock);
    for (uint32_t b = 0; b < s->nbuckets && ok; b++)
      for (entry *e = s->buckets[b]; e && ok; e = e->next) {
        if (e->expires_ns <= now) continue;
        ok = fwrite(&e->klen, 4, 1, f) == 1 && fwrite(e->key, 1, e->klen, f) == e->klen &&
             fwrite(&e->penalty_until, 8, 1, f) == 1 && fwrite(&e->expires_ns, 8, 1, f) == 1 &&
             fwrite(&e->n, 4, 1, f) == 1;
        for (uint32_t k = 0; k < e->n && ok; k++)
          ok = fwrite(&e->times[(e->head + k) % e->cap], 8, 1, f) == 1;
        n++;
      }
    pthread_mutex_unlock(&s->lock);
  }
  uint32_t end = UINT32_MAX; /* no key is this long: marks the end */
  ok = ok && fwrite(&end, 4, 1, f) == 1 && fwrite(&n, 8, 1, f) == 1;
  ok = (fflush(f) == 0) & ok;
  ok = (fsync(fileno(f)) == 0) & ok;
  ok = (fclose(f) == 0) & ok;
  if (!ok || rename(tmp, path) != 0) {
    snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* Inserts a loaded entry (the store is not shared yet). */
static int load_entry(local_store *l, const char *key, uint32_t klen, int64_t pen, int64_t exp,
                      const int64_t *times, uint32_t n) {
  uint64_t h = key_hash(l->seed, key, klen);
  shard *s = &l->shards[(h >> 58) & (NSHARDS - 1)];
  if (s->nkeys >= s->nbuckets) grow_table(s);
  entry *e = calloc(1, sizeof *e + klen);
  if (!e || !s->nbuckets) {
    free(e);
    return -1;
  }
  e->hash = h;
  e->klen = klen;
  memcpy(e->key, key, klen);
  e->penalty_until = pen;
  e->expires_ns = exp;
  if (n) {
    e->times = malloc((size_t)n * sizeof *e->times);
    if (!e->times) {
      free(e);
      return -1;
    }
    memcpy(e->times, times, (size_t)n * sizeof *times);
    e->oldest = times[0];
    e->newest = times[n - 1];
  }
  e->n = e->cap = n;
  e->next = s->buckets[h & (s->nbuckets - 1)];
  s->buckets[h & (s->nbuckets - 1)] = e;
  s->nkeys++;
  s->bytes += entry_bytes(e);
  lru_push(s, e);
  enforce_bound(l, s, e, 0);
  return 0;
}

int local_load(local_store *l, const char *path, int64_t now, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (errno == ENOENT) return 0; /* the first start */
    snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    return -1;
  }
  char magic[8];
  char *key = malloc(65536);
  int64_t *times = NULL;
  uint32_t tcap = 0;
  uint64_t n = 0, want = 0;
  int ok = key && fread(magic, 1, 8, f) == 8 && memcmp(magic, MAGIC, 8) == 0;
  while (ok) {
    uint32_t klen, cnt;
    int64_t pen, exp;
    if (fread(&klen, 4, 1, f) != 1) {
      ok = 0;
      break;
    }
    if (klen == UINT32_MAX) {
      ok = fread(&want, 8, 1, f) == 1 && want == n;
      break;
    }
    ok = klen < 65536 && fread(key, 1, klen, f) == klen && fread(&pen, 8, 1, f) == 1 &&
         fread(&exp, 8, 1, f) == 1 && fread(&cnt, 4, 1, f) == 1 && cnt <= 1000000;
    if (ok && cnt > tcap) {
      int64_t *nt = realloc(times, (size_t)cnt * sizeof *nt);
      ok = nt != NULL;
      if (nt) {
        times = nt;
        tcap = cnt;
      }
    }
    ok = ok && fread(times, 8, cnt, f) == cnt;
    if (ok && exp > now) ok = load_entry(l, key, klen, pen, exp, times, cnt) == 0;
    n++;
  }
  fclose(f);
  free(key);
  free(times);
  if (!ok) {
    /* a partial file is worse than none: start empty */
    for (int i = 0; i < NSHARDS; i++) {
      shard *s = &l->shards[i];
      while (s->lru_tail) entry_remove(s, s->lru_tail);
    }
    snprintf(err, errlen, "%s: not a whole counter file; starting with empty counters", path);
    return -1;
  }
  return 0;
}
