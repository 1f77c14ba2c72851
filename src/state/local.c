/* local.c — the in-process counter store: one GCRA time per key.
 *
 * 64 shards, each a chained hash table under its own mutex: a decision
 * locks one shard for the few dozen nanoseconds one counter update takes,
 * so threads charging different keys almost never meet, and threads
 * charging one key are serialised on it — which is what makes the count
 * exact (tests/state/test_local.c charges one key from several threads).
 *
 * An entry holds its key, its TAT and the end of its penalty, both in
 * microseconds (state.h): 56 bytes and the key (rounded up to 16 bytes),
 * whatever the budget — a
 * key's memory does not grow with its charges, so an update touches one
 * cache line or two, and the memory bound counts keys, not charges. An
 * entry is live until the later of its TAT and its penalty's end; after
 * that it reads as a key never seen, so it may be dropped.
 *
 * Expiry is lazy: an expired entry met by a lookup starts over, and each
 * insert removes expired entries from the tail of its shard's LRU list.
 * The memory bound: each shard may use max_bytes / 64 (entries and keys,
 * counted by what was allocated, and the hash table); an insert past it
 * removes least recently used entries — expired ones count as `expired`,
 * live ones as `evictions` (a live key evicted forgets its charges: the
 * bound is kept by letting such a caller through early, never by refusing).
 *
 * Persistence (local_save / local_load, for --state-file): the live entries
 * written to a file when the store closes and read back when it opens, so a
 * restart keeps counts and penalties. The file: "VDSTATE2", then per entry
 * its key length (u32), key, TAT and penalty end (i64, microseconds),
 * native byte order, ending with a key length of 0xffffffff and a count of
 * entries (u64) as a check. Written to a temporary name and renamed; a file
 * that does not read back whole, or one of the sliding-window logs of
 * earlier versions ("VDSTATE1"), is ignored (the store starts empty) and
 * said so. Entries already expired when read are skipped.
 *
 * Not here: Redis (redis.c). */
#include <errno.h>
#include <fcntl.h>
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
  int64_t tat;           /* µs: when every charge is paid back */
  int64_t penalty_until; /* µs */
  uint32_t klen, kcap;   /* kcap: room for a key, so that an expired entry can be reused */
  char key[];
};

/* Live until its charges are paid back and its penalty is over. */
static inline int64_t entry_expires(const entry *e) {
  return e->tat > e->penalty_until ? e->tat : e->penalty_until;
}

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

/* Seeded, so that keys chosen by callers cannot be made to collide. One
 * multiply a word (keys are short: a strategy, a limit and a caller), the
 * full mix once at the end: the shard is taken from the top bits and the
 * bucket from the bottom ones. */
static uint64_t key_hash(uint64_t seed, const char *k, size_t n) {
  uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ull);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, k + i, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  uint64_t w = 0;
  if (n == i) {
    /* no tail */
  } else if (n >= 8) { /* the last 8 bytes, overlapping the words above: no call */
    memcpy(&w, k + n - 8, 8);
    w >>= 8 * (8 - (n - i));
  } else {
    for (size_t j = 0; j < n; j++) w |= (uint64_t)(unsigned char)k[j] << (8 * j);
  }
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

static size_t entry_bytes(const entry *e) { return sizeof *e + e->kcap; }

static uint32_t key_room(size_t klen) { return (uint32_t)((klen + 15) & ~(size_t)15); }

static void entry_free(entry *e) { free(e); }

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

/* Takes e out of its shard (not freed). */
static void entry_detach(shard *s, entry *e) {
  entry **p = &s->buckets[e->hash & (s->nbuckets - 1)];
  while (*p != e) p = &(*p)->next;
  *p = e->next;
  lru_unlink(s, e);
  s->nkeys--;
  s->bytes -= entry_bytes(e);
}

static void entry_remove(shard *s, entry *e) {
  entry_detach(s, e);
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
    if (entry_expires(v) <= now)
      s->expired++;
    else
      s->evictions++;
    entry_remove(s, v);
  }
}

void local_hit(local_store *l, const char *key, size_t klen, const limit_spec *sp, int64_t now_ns,
               bool charge, limit_reading *r) {
  memset(r, 0, sizeof *r);
  int64_t now = now_ns / 1000, t = gcra_spacing_us(sp);
  uint64_t h = key_hash(l->seed, key, klen);
  shard *s = &l->shards[(h >> 58) & (NSHARDS - 1)];
  pthread_mutex_lock(&s->lock);
  entry *e = NULL;
  if (s->nbuckets)
    for (e = s->buckets[h & (s->nbuckets - 1)]; e; e = e->next)
      if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0) break;
  if (e) { /* an expired entry reads as empty: its TAT and penalty are past */
    r->count = gcra_count(e->tat, now, t);
    r->penalized = now < e->penalty_until;
  }
  int starts_penalty = state_apply(sp, charge, r);
  if (r->exceeded) s->refusals++;
  if (!r->charged) {
    pthread_mutex_unlock(&s->lock);
    return;
  }
  if (!e) {
    /* drop expired entries from the LRU tail first: new keys pay for old
     * ones, and the first one with room enough becomes the new entry (a
     * store whose keys come and go does not call malloc and free for each) */
    entry *reuse = NULL;
    for (int i = 0; i < 2 && s->lru_tail && entry_expires(s->lru_tail) <= now; i++) {
      entry *v = s->lru_tail;
      s->expired++;
      if (!reuse && v->kcap >= klen) {
        entry_detach(s, v);
        reuse = v;
      } else {
        entry_remove(s, v);
      }
    }
    if (s->nkeys >= s->nbuckets) grow_table(s);
    e = reuse;
    if (!e && (e = malloc(sizeof *e + key_room(klen)))) e->kcap = key_room(klen);
    if (!e || !s->nbuckets) {
      free(e);
      r->charged = false; /* out of memory: counted as not charged */
      pthread_mutex_unlock(&s->lock);
      return;
    }
    e->hash = h;
    e->tat = e->penalty_until = 0;
    e->klen = (uint32_t)klen;
    memcpy(e->key, key, klen);
    e->next = s->buckets[h & (s->nbuckets - 1)];
    s->buckets[h & (s->nbuckets - 1)] = e;
    s->nkeys++;
    s->bytes += entry_bytes(e);
    lru_push(s, e);
    enforce_bound(l, s, e, now);
  } else if (s->lru_head != e) {
    lru_unlink(s, e);
    lru_push(s, e);
  }
  e->tat = (e->tat > now ? e->tat : now) + t;
  s->charges++;
  if (starts_penalty) e->penalty_until = now + sp->penalty_ns / 1000;
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

static const char MAGIC[8] = "VDSTATE2";

int local_save(local_store *l, const char *path, int64_t now_ns, char *err, size_t errlen) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
    snprintf(err, errlen, "%s: path too long", path);
    return -1;
  }
  /* owner and group only: the keys are callers' identities */
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!f) {
    snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  int64_t now = now_ns / 1000;
  uint64_t n = 0;
  int ok = fwrite(MAGIC, 1, 8, f) == 8;
  for (int i = 0; i < NSHARDS && ok; i++) {
    shard *s = &l->shards[i];
    pthread_mutex_lock(&s->lock);
    for (uint32_t b = 0; b < s->nbuckets && ok; b++)
      for (entry *e = s->buckets[b]; e && ok; e = e->next) {
        if (entry_expires(e) <= now) continue;
        ok = fwrite(&e->klen, 4, 1, f) == 1 && fwrite(e->key, 1, e->klen, f) == e->klen &&
             fwrite(&e->tat, 8, 1, f) == 1 && fwrite(&e->penalty_until, 8, 1, f) == 1;
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
static int load_entry(local_store *l, const char *key, uint32_t klen, int64_t tat, int64_t pen) {
  uint64_t h = key_hash(l->seed, key, klen);
  shard *s = &l->shards[(h >> 58) & (NSHARDS - 1)];
  if (s->nkeys >= s->nbuckets) grow_table(s);
  entry *e = malloc(sizeof *e + key_room(klen));
  if (!e || !s->nbuckets) {
    free(e);
    return -1;
  }
  e->hash = h;
  e->klen = klen;
  e->kcap = key_room(klen);
  memcpy(e->key, key, klen);
  e->tat = tat;
  e->penalty_until = pen;
  e->next = s->buckets[h & (s->nbuckets - 1)];
  s->buckets[h & (s->nbuckets - 1)] = e;
  s->nkeys++;
  s->bytes += entry_bytes(e);
  lru_push(s, e);
  enforce_bound(l, s, e, 0);
  return 0;
}

int local_load(local_store *l, const char *path, int64_t now_ns, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (errno == ENOENT) return 0; /* the first start */
    snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    return -1;
  }
  int64_t now = now_ns / 1000;
  char magic[8];
  char *key = malloc(65536);
  uint64_t n = 0, want = 0;
  int ok = key && fread(magic, 1, 8, f) == 8;
  if (ok && memcmp(magic, "VDSTATE1", 8) == 0) {
    fclose(f);
    free(key);
    snprintf(err, errlen,
             "%s: a counter file of an earlier version (sliding-window logs), not read; "
             "starting with empty counters",
             path);
    return -1;
  }
  ok = ok && memcmp(magic, MAGIC, 8) == 0;
  while (ok) {
    uint32_t klen;
    int64_t tat, pen;
    if (fread(&klen, 4, 1, f) != 1) {
      ok = 0;
      break;
    }
    if (klen == UINT32_MAX) {
      ok = fread(&want, 8, 1, f) == 1 && want == n;
      break;
    }
    ok = klen < 65536 && fread(key, 1, klen, f) == klen && fread(&tat, 8, 1, f) == 1 &&
         fread(&pen, 8, 1, f) == 1;
    if (ok && (tat > now || pen > now)) ok = load_entry(l, key, klen, tat, pen) == 0;
    n++;
  }
  fclose(f);
  free(key);
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
