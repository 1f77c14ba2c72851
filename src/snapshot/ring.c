/* ring.c — the queue between deciding threads and the snapshot writer: a
 * bounded byte ring, many producers, one consumer, no lock.
 *
 * Why bytes and not slots: snapshots vary from a few hundred bytes to tens of
 * kilobytes. Fixed slots would either waste memory (every slot as big as the
 * biggest record) or spill big records to malloc on the hot path; a byte ring
 * holds each record in exactly its size (8-byte aligned) and never allocates.
 * The ring is bounded twice: in bytes (its size) and in records (so the queue
 * depth, and what a crash under durability NONE can lose, has a known limit).
 *
 * Producers reserve space by compare-and-swap on `head` (after checking it
 * against `tail`, the consumer's release point), write the body in place, and
 * commit by storing the entry's header word with release order. The consumer
 * reads header words with acquire order: zero means "not committed yet", so
 * the consumer stops there and comes back. That works because every byte
 * outside [tail, head) is kept zero: the consumer zeroes what it consumed
 * before handing it back through `tail`. An entry never wraps around the end;
 * a producer that would straddle it first fills the rest with a PAD entry.
 * A producer that reserved more than it used (snapshot_log_reserve) commits
 * the shorter record and turns the rest into a PAD entry, written before
 * the record's own header word so the consumer never finds it missing.
 * Tickets are ring positions (the end of an entry): they grow with
 * reservation order, so "everything before position P is durable" is one
 * number the writer publishes.
 *
 * What each side writes lives on its own cache line (internal.h), and
 * neither reads the other's on every record: a producer checks room against
 * its copy of tail (and of the records released), reading the consumer's
 * line only when that copy says full; the consumer reads head only once it
 * has caught up with the head it saw last. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/internal.h"

int ring_init(ring *r, size_t bytes, uint64_t max_records) {
  uint64_t cap = 4096;
  while (cap < bytes) cap <<= 1;
  memset(r, 0, sizeof *r);
  r->buf = calloc(1, (size_t)cap); /* zero pages cost nothing until touched */
  if (!r->buf) return -1;
  r->cap = cap;
  r->mask = cap - 1;
  r->max_records = max_records ? max_records : 1;
  atomic_init(&r->head, 0);
  atomic_init(&r->reserved, 0);
  atomic_init(&r->tail_seen, 0);
  atomic_init(&r->released_seen, 0);
  atomic_init(&r->tail, 0);
  atomic_init(&r->released, 0);
  r->head_seen = 0;
  return 0;
}

void ring_free(ring *r) {
  free(r->buf);
  r->buf = NULL;
}

size_t ring_max_body(const ring *r) { return (size_t)(r->cap / 4) - 8; }

static inline _Atomic uint64_t *word_at(ring *r, uint64_t pos) {
  return (_Atomic uint64_t *)(void *)(r->buf + (pos & r->mask));
}

uint64_t ring_count(ring *r) {
  uint64_t rel = atomic_load_explicit(&r->released, memory_order_acquire);
  uint64_t res = atomic_load_explicit(&r->reserved, memory_order_acquire);
  return res > rel ? res - rel : 0;
}

/* The tail to check room against: the copy, or (when the copy says there is
 * no room) the real one, kept as the new copy. Acquire/release through the
 * copy too: space is written only after the consumer's zeroing of it is
 * visible, whichever producer read the tail. */
static inline uint64_t tail_for(ring *r, uint64_t end) {
  uint64_t t = atomic_load_explicit(&r->tail_seen, memory_order_acquire);
  if (end - t <= r->cap) return t;
  t = atomic_load_explicit(&r->tail, memory_order_acquire);
  atomic_store_explicit(&r->tail_seen, t, memory_order_release);
  return t;
}

int ring_reserve(ring *r, size_t len, uint8_t **body, uint64_t *ticket) {
  uint64_t need = (8 + (uint64_t)len + 7) & ~(uint64_t)7;
  uint64_t n = atomic_fetch_add_explicit(&r->reserved, 1, memory_order_relaxed) + 1;
  if (n - atomic_load_explicit(&r->released_seen, memory_order_relaxed) > r->max_records) {
    uint64_t rel = atomic_load_explicit(&r->released, memory_order_acquire);
    atomic_store_explicit(&r->released_seen, rel, memory_order_relaxed);
    if (n - rel > r->max_records) {
      atomic_fetch_sub_explicit(&r->reserved, 1, memory_order_relaxed);
      return -1;
    }
  }
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed), pad;
  for (;;) {
    uint64_t off = h & r->mask;
    pad = off + need > r->cap ? r->cap - off : 0;
    uint64_t t = tail_for(r, h + pad + need);
    if (h + pad + need - t > r->cap) {
      atomic_fetch_sub_explicit(&r->reserved, 1, memory_order_relaxed);
      return -1;
    }
    if (atomic_compare_exchange_weak_explicit(&r->head, &h, h + pad + need, memory_order_acq_rel,
                                              memory_order_relaxed))
      break;
  }
  if (pad)
    atomic_store_explicit(word_at(r, h), RING_COMMITTED | RING_PAD | pad, memory_order_release);
  uint64_t pos = h + pad;
  assert((pos & r->mask) + need <= r->cap); /* an entry never wraps around the end */
  *body = r->buf + (pos & r->mask) + 8;
  *ticket = pos + need;
  return 0;
}

void ring_commit_flags(ring *r, uint8_t *body, size_t len, uint64_t flags) {
  _Atomic uint64_t *w = (_Atomic uint64_t *)(void *)(body - 8);
  assert(((uint64_t)len & ~(uint64_t)RING_LEN_MASK) == 0); /* the length fits its word */
  /* seq_cst, not just release: the producer reads the writer's "sleeping"
   * flag right after, and the two must not be reordered (writer.c). */
  atomic_store_explicit(w, RING_COMMITTED | flags | (uint64_t)len, memory_order_seq_cst);
  (void)r;
}

void ring_commit(ring *r, uint8_t *body, size_t len) { ring_commit_flags(r, body, len, 0); }

uint64_t ring_commit_short(ring *r, uint8_t *body, size_t len, size_t reserved, uint64_t flags) {
  uint64_t need = (8 + (uint64_t)len + 7) & ~(uint64_t)7;
  uint64_t had = (8 + (uint64_t)reserved + 7) & ~(uint64_t)7;
  assert(len <= reserved); /* a record shorter than reserved, never longer */
  /* The pad first: the consumer, once it sees the record, goes straight on
   * to the word after it. */
  if (had > need)
    atomic_store_explicit((_Atomic uint64_t *)(void *)(body - 8 + need),
                          RING_COMMITTED | RING_PAD | (had - need), memory_order_release);
  ring_commit_flags(r, body, len, flags);
  return had - need;
}

void ring_cancel(ring *r, uint8_t *body, size_t reserved) {
  uint64_t had = (8 + (uint64_t)reserved + 7) & ~(uint64_t)7;
  atomic_store_explicit((_Atomic uint64_t *)(void *)(body - 8), RING_COMMITTED | RING_PAD | had,
                        memory_order_seq_cst);
  atomic_fetch_sub_explicit(&r->reserved, 1, memory_order_relaxed); /* not a record after all */
}

int ring_peek(ring *r, uint64_t pos, const uint8_t **body, uint32_t *len, uint64_t *next) {
  /* At head, a full ring's word is the oldest unreleased entry, not a new
   * one: only [tail, head) may be read. */
  if (pos >= r->head_seen) {
    r->head_seen = atomic_load_explicit(&r->head, memory_order_seq_cst);
    if (pos >= r->head_seen) return 0;
  }
  uint64_t w = atomic_load_explicit(word_at(r, pos), memory_order_seq_cst);
  if (!(w & RING_COMMITTED)) return 0;
  uint64_t n = w & RING_LEN_MASK;
  if (w & RING_PAD) {
    *next = pos + n;
    return 2;
  }
  *body = r->buf + (pos & r->mask) + 8;
  *len = (uint32_t)n;
  *next = pos + ((8 + n + 7) & ~(uint64_t)7);
  return w & RING_RAW ? 3 : 1;
}

void ring_release(ring *r, uint64_t pos, uint64_t nrec) {
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
  /* only [tail, head) was read: the consumer never releases past head */
  assert(pos <= atomic_load_explicit(&r->head, memory_order_relaxed));
  while (t < pos) { /* zero [t, pos), in at most two pieces (the end wraps) */
    uint64_t off = t & r->mask;
    uint64_t n = pos - t;
    if (off + n > r->cap) n = r->cap - off;
    memset(r->buf + off, 0, (size_t)n);
    t += n;
  }
  atomic_store_explicit(&r->tail, pos, memory_order_release);
  if (nrec)
    atomic_store_explicit(&r->released,
                          atomic_load_explicit(&r->released, memory_order_relaxed) + nrec,
                          memory_order_release);
}
