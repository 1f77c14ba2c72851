/* local.c — the in-process counter store: one GCRA time per key.
 *
 * 64 shards, each an open-addressing hash table under its own lock: a
 * decision locks one shard for the few dozen nanoseconds one counter update
 * takes, so threads charging different keys almost never meet, and threads
 * charging one key are serialised on it — which is what makes the count
 * exact (tests/state/test_local.c charges one key from several threads).
 * The lock is a spinlock (one atomic exchange to take, one store to give
 * back) rather than a pthread mutex, whose two calls cost more than the
 * update they guard; a thread that finds it taken spins a little, then
 * yields the CPU, so a holder that was descheduled gets it back.
 *
 * A counter is one 64-byte slot, aligned to a cache line, in the table
 * itself: its hash, its TAT and the end of its penalty (microseconds,
 * state.h), and its key when the key fits in 40 bytes (the engine's keys
 * are a limit's 8-byte id and the caller's key: an API key or an address
 * fits), else a pointer to the key. So a charge
 * usually reads and writes one cache line: no bucket array to go through,
 * no chain, no entry allocated apart — in a store bigger than the CPU's
 * caches, each of those was a miss. Linear probing; a removal shifts the
 * slots after it back (no tombstones). Whatever the budget, a key's memory
 * does not grow with its charges, and the memory bound counts keys. The
 * slot's line is asked for (a prefetch) before the shard's lock is taken:
 * the lock's atomic exchange holds back every load after it, so the miss
 * would otherwise only start once the lock is held. Keys are hashed a
 * 16-byte pair of words at a time, each pair mixed by one 64x64->128-bit
 * multiply with the store's two random secrets, so that callers cannot
 * choose keys that collide.
 *
 * An entry is live until the later of its TAT and its penalty's end; after
 * that it reads as a key never seen, so it may be dropped. Expiry is lazy:
 * an expired entry met by a lookup starts over, and each insert looks at the
 * next few slots of its table, in turn, and removes the expired ones.
 *
 * The memory bound: each shard may use max_bytes / 64 (its table and the
 * keys that did not fit a slot). A table grows (doubling) while the bound
 * allows, leaving KEY_RESERVE bytes for such keys, and is kept at most 3/4
 * full; when it may not grow, an insert
 * first removes an entry. Which one: least recently used, approximately —
 * "second chance" (CLOCK): a hand goes round the table; a charge only marks
 * its entry used; the hand unmarks a used entry and passes it by, and
 * removes the first unmarked one (or an expired one) — expired ones count as
 * `expired`, live ones as `evictions` (a live key evicted forgets its
 * charges: the bound is kept by letting such a caller through early, never
 * by refusing). A charge thus writes its own slot and nothing else.
 *
 * Persistence (local_save / local_load, for --state-file): the live entries
 * written to a file when the store closes and read back when it opens, so a
 * restart keeps counts and penalties. The file: "VDSTATE3", then per entry
 * its key length (u32), key, TAT and penalty end (i64, microseconds),
 * native byte order, ending with a key length of 0xffffffff and a count of
 * entries (u64) as a check. Written to a temporary name and renamed; a file
 * that does not read back whole, or one of the sliding-window logs of an
 * earlier version ("VDSTATE1"), is ignored (the store starts empty) and
 * said so. A "VDSTATE2" file (keys headed by the strategy's and the limit's
 * names, where the engine now puts the limit's 8-byte id, state_limit_id)
 * is read, each key turned into the id and the caller, so that an upgrade
 * keeps counts and penalties. Entries already expired when read are
 * skipped.
 *
 * Not here: Redis (redis.c). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "core/clock.h"
#include "state/local_fast.h"

#define NSHARDS LOCAL_NSHARDS
#define MIN_SLOTS 16
#define INLINE_KEY LOCAL_INLINE_KEY
/* Room a table leaves in its shard's bound for the keys kept apart: with it,
 * removing entries can always make room for a new key of up to this many
 * bytes (decide.c's keys are at most about 600). */
#define KEY_RESERVE 1024

/* The slot, the shard, the store, the hash and the usual charge are in
 * local_fast.h (the limits stage compiles the charge into its own code). */
typedef local_slot slot;
typedef local_shard shard;

/* Live until its charges are paid back and its penalty is over. */
static inline int64_t slot_expires(const slot *e) {
  return e->tat > e->penalty_until ? e->tat : e->penalty_until;
}

static inline uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

local_store *local_open(size_t max_bytes) {
  local_store *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  if (!max_bytes) max_bytes = (size_t)64 << 20;
  l->shard_limit = max_bytes / NSHARDS;
  if (l->shard_limit < MIN_SLOTS * sizeof(slot) + KEY_RESERVE)
    l->shard_limit = MIN_SLOTS * sizeof(slot) + KEY_RESERVE;
  uint64_t seed = (uint64_t)(uintptr_t)l;
  l->seed = mix(seed ^ (uint64_t)clock_wall_ns());
  l->seed2 = mix(l->seed ^ 0x9e3779b97f4a7c15ull) | 1;
  return l;
}

static size_t key_room(size_t klen) { return (klen + 15) & ~(size_t)15; }

static size_t shard_bytes(const shard *s) {
  return (s->slots ? (size_t)(s->mask + 1) * sizeof(slot) : 0) + s->key_bytes;
}

static void slot_free_key(shard *s, slot *e) {
  if (e->klen > INLINE_KEY) {
    free(e->k.long_key);
    s->key_bytes -= key_room(e->klen);
  }
}

void local_close(local_store *l) {
  if (!l) return;
  for (int i = 0; i < NSHARDS; i++) {
    shard *s = &l->shards[i];
    for (uint32_t j = 0; s->slots && j <= s->mask; j++)
      if (s->slots[j].hash) slot_free_key(s, &s->slots[j]);
    free(s->slots);
  }
  free(l);
}

/* Empties slot i, shifting back the slots after it that probed past it. */
static void slot_remove(shard *s, uint32_t i) {
  slot_free_key(s, &s->slots[i]);
  uint32_t m = s->mask;
  for (uint32_t j = (i + 1) & m;; j = (j + 1) & m) {
    slot *sj = &s->slots[j];
    if (!sj->hash) break;
    /* sj moves to i when i lies on its probe path: between its home and j */
    if (((j - (sj->hash & m)) & m) >= ((j - i) & m)) {
      s->slots[i] = *sj;
      i = j;
    }
  }
  s->slots[i].hash = 0;
  s->nkeys--;
}

/* A table twice as big (or the first one), if the bound allows. */
static int grow_table(local_store *l, shard *s) {
  uint32_t n = s->slots ? (s->mask + 1) * 2 : MIN_SLOTS;
  if (s->slots && (size_t)n * sizeof(slot) + s->key_bytes + KEY_RESERVE > l->shard_limit) return -1;
  slot *t = aligned_alloc(64, (size_t)n * sizeof(slot));
  if (!t) return -1;
  memset(t, 0, (size_t)n * sizeof(slot));
  slot *old = s->slots;
  uint32_t oldn = old ? s->mask + 1 : 0;
  /* atomic stores: local_slot_prefetch reads these two without the lock */
  __atomic_store_n(&s->slots, t, __ATOMIC_RELAXED);
  __atomic_store_n(&s->mask, n - 1, __ATOMIC_RELAXED);
  s->hand = s->sweep = 0;
  for (uint32_t j = 0; j < oldn; j++) {
    if (!old[j].hash) continue;
    uint32_t i = old[j].hash & s->mask;
    while (t[i].hash) i = (i + 1) & s->mask;
    t[i] = old[j];
  }
  free(old);
  return 0;
}

/* Removes one entry: an expired one among the next 64 slots from the clock
 * hand, else the hand moves on until it removes an expired one or the
 * first live one it finds unmarked (marks are cleared on the way). */
static void evict_one(shard *s, int64_t now) {
  /* an expired entry a little ahead of the hand goes before any live one */
  for (uint32_t k = 0, i = s->hand; k < 64 && k <= s->mask; k++, i = (i + 1) & s->mask)
    if (s->slots[i].hash && slot_expires(&s->slots[i]) <= now) {
      s->expired++;
      slot_remove(s, i);
      return;
    }
  for (uint32_t steps = 0; s->nkeys && steps <= 2 * (s->mask + 1) + 1; steps++) {
    uint32_t i = s->hand;
    slot *e = &s->slots[i];
    if (e->hash && slot_expires(e) <= now) {
      s->expired++;
    } else if (e->hash && !e->used) {
      s->evictions++;
    } else {
      e->used = 0;
      s->hand = (i + 1) & s->mask;
      continue;
    }
    slot_remove(s, i); /* the hand stays: a slot may have moved into i */
    return;
  }
}

/* Makes room for one more key in shard s (locked) and returns the empty
 * slot for key; NULL out of memory. Kept out of local_charge, whose usual
 * charge finds its entry. */
__attribute__((noinline)) static slot *slot_insert(local_store *l, shard *s, const char *key,
                                                   size_t klen, uint32_t h32, int64_t now) {
  if (!s->slots && grow_table(l, s)) return NULL;
  /* new keys pay for old ones: a few slots looked at, the expired removed
   * (a cursor of its own: the clock hand moves only to evict) */
  for (int k = 0; k < 4; k++) {
    uint32_t i = s->sweep & s->mask;
    slot *e = &s->slots[i];
    if (e->hash && slot_expires(e) <= now) {
      s->expired++;
      slot_remove(s, i);
    } else {
      s->sweep = (i + 1) & s->mask;
    }
  }
  size_t extra = klen > INLINE_KEY ? key_room(klen) : 0;
  while ((s->nkeys + 1) * 4 > (s->mask + 1) * 3 || shard_bytes(s) + extra > l->shard_limit) {
    if ((s->nkeys + 1) * 4 > (s->mask + 1) * 3 && grow_table(l, s) == 0) continue;
    uint32_t before = s->nkeys;
    if (before) evict_one(s, now);
    if (!before || s->nkeys == before) return NULL;
  }
  char *kp = NULL;
  if (extra && !(kp = malloc(klen))) return NULL;
  slot *e = local_slot_find(s, h32, key, klen);
  e->hash = h32;
  e->klen = (uint16_t)klen;
  e->used = 0;
  e->tat = e->penalty_until = 0;
  if (kp) {
    memcpy(kp, key, klen);
    e->k.long_key = kp;
    s->key_bytes += extra;
  } else {
    memcpy(e->k.key, key, klen);
  }
  s->nkeys++;
  return e;
}

void local_lock_wait(shard *s) {
  while (atomic_exchange_explicit(&s->lock, 1, memory_order_acquire)) {
    for (int spins = 0; atomic_load_explicit(&s->lock, memory_order_relaxed); spins++)
      if (spins >= 64) {
        sched_yield();
        spins = 0;
      }
  }
}

/* A key with no slot reads as an empty counter; a charge inserts it. */
void local_hit_rest(local_store *l, shard *s, const char *key, size_t klen, uint32_t h32,
                    const limit_spec *sp, int64_t now, bool charge, limit_reading *r) {
  limit_reading rd = {0}; /* written to *r once, at the end */
  int starts_penalty = state_apply(sp, charge, &rd);
  if (rd.exceeded) s->refusals++;
  slot *e = NULL;
  if (rd.charged && (klen > UINT16_MAX || !(e = slot_insert(l, s, key, klen, h32, now))))
    rd.charged = false; /* out of memory: counted as not charged */
  if (rd.charged) {
    e->tat = now + sp->spacing_us;
    s->charges++;
    if (starts_penalty) e->penalty_until = now + sp->penalty_ns / 1000;
  }
  local_unlock(s);
  *r = rd;
}

void local_hit(local_store *l, const char *key, size_t klen, const limit_spec *sp, int64_t now_ns,
               bool charge, limit_reading *r) {
  limit_spec spec = *sp;
  spec.spacing_us = gcra_spacing_us(sp);
  local_charge(l, key, klen, &spec, now_ns / 1000, charge, r);
}

void local_stats(local_store *l, state_stats *out) {
  for (int i = 0; i < NSHARDS; i++) {
    shard *s = &l->shards[i];
    local_lock(s);
    out->keys += s->nkeys;
    out->bytes += shard_bytes(s);
    out->charges += s->charges;
    out->refusals += s->refusals;
    out->evictions += s->evictions;
    out->expired += s->expired;
    local_unlock(s);
  }
}

/* ---- persistence ---- */

static const char MAGIC[8] = "VDSTATE3";

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
    local_lock(s);
    for (uint32_t j = 0; s->slots && j <= s->mask && ok; j++) {
      const slot *e = &s->slots[j];
      if (!e->hash || slot_expires(e) <= now) continue;
      uint32_t klen = e->klen;
      ok = fwrite(&klen, 4, 1, f) == 1 && fwrite(local_slot_key(e), 1, klen, f) == klen &&
           fwrite(&e->tat, 8, 1, f) == 1 && fwrite(&e->penalty_until, 8, 1, f) == 1;
      n++;
    }
    local_unlock(s);
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
  uint64_t h = local_key_hash(l, key, klen);
  shard *s = local_shard_of(l, h);
  slot *e = s->slots ? local_slot_find(s, local_slot_hash(h), key, klen) : NULL;
  if ((!e || !e->hash) &&
      (klen > UINT16_MAX || !(e = slot_insert(l, s, key, klen, local_slot_hash(h), 0))))
    return -1;
  e->tat = tat;
  e->penalty_until = pen;
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
  /* "VDSTATE2": the same entries, keys headed by the names themselves
   * ("STRATEGY\x1fLIMIT\x1fCALLER"), read into keys headed by the id */
  int v2 = ok && memcmp(magic, "VDSTATE2", 8) == 0;
  ok = ok && (v2 || memcmp(magic, MAGIC, 8) == 0);
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
    n++;
    if (!ok || (tat <= now && pen <= now)) continue;
    if (v2) { /* the names' id, then the caller, in place */
      const char *a = memchr(key, 0x1f, klen);
      const char *b = a ? memchr(a + 1, 0x1f, klen - (size_t)(a + 1 - key)) : NULL;
      if (!b) continue; /* not a limit's counter: nothing reads it */
      char id[8];
      state_limit_id(key, (size_t)(a - key), a + 1, (size_t)(b - a - 1), id);
      size_t caller = klen - (size_t)(b + 1 - key);
      memmove(key + 8, b + 1, caller);
      memcpy(key, id, 8);
      klen = (uint32_t)(8 + caller);
    }
    ok = load_entry(l, key, klen, tat, pen) == 0;
  }
  fclose(f);
  free(key);
  if (!ok) {
    /* a partial file is worse than none: start empty */
    for (int i = 0; i < NSHARDS; i++) {
      shard *s = &l->shards[i];
      for (uint32_t j = 0; s->slots && j <= s->mask; j++)
        if (s->slots[j].hash) slot_free_key(s, &s->slots[j]);
      if (s->slots) memset(s->slots, 0, (size_t)(s->mask + 1) * sizeof(slot));
      s->nkeys = 0;
    }
    snprintf(err, errlen, "%s: not a whole counter file; starting with empty counters", path);
    return -1;
  }
  return 0;
}
