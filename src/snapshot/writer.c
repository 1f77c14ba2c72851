/* writer.c — the snapshot log writer: open (with recover.c), the lock-free
 * append, and the writer thread that turns the queue into segment files.
 *
 * The hot path (snapshot_log_append, or snapshot_log_reserve + _commit for a
 * producer that writes its payload in place) encodes the record straight
 * into the ring (ring.c) and returns: no lock, no syscall, no malloc.
 * Everything slow happens on one writer thread per log:
 *
 *   gather  committed ring entries -> frames (length, CRC32C, body) appended
 *           to `pend`, a buffer that mirrors the end of the current segment
 *           not yet known to be durable; the ring space is released at once.
 *           With a format hook (opts.format), each record's payload is first
 *           turned into the one written: producers append a cheap capture
 *           and the formatting happens here, off their threads; a raw record
 *           (the payload alone: snapshot_log_reserve_raw) gets its header
 *           fields from the hook too.
 *   write   pend's unwritten part with pwrite at the segment's end.
 *   sync    fsync per the durability setting: ALWAYS after every write (one
 *           fsync for the whole group gathered meanwhile: group commit),
 *           INTERVAL when interval_ms has passed (or pend is big, or the
 *           segment rotates), NONE never. After a sync `pend` empties and the
 *           durable ticket advances; waiters are woken.
 *   rotate  when a record belongs to a later UTC day or would push the
 *           segment past segment_bytes: sync, write the .idx, close, and the
 *           next record creates the next segment.
 *
 * Failures never corrupt what is on disk and never lose what is queued. A
 * failed write (ENOSPC, EIO, EFBIG) is cut back with ftruncate to the last
 * complete frame and retried from memory with backoff; a failed fsync cuts
 * back to the last good sync and rewrites everything since from `pend`
 * (after a failed fsync the page cache cannot be trusted, so retrying the
 * fsync alone would claim durability for data that may be gone). Errors are
 * counted and the last one is kept, with its errno text, for
 * snapshot_log_status_get, and the log is `failing` until a write succeeds
 * again (with nothing left to write, the writer probes the disk once per
 * backoff step, so that the state clears by itself when space returns).
 * While the disk fails, the queue fills; DROP then refuses and counts;
 * BLOCK refuses too (SNAPSHOT_EREFUSED), at once while the disk fails and
 * after full_wait_ms of waiting for room otherwise: a producer never waits
 * on a disk that cannot take its record. Under ALWAYS nothing that waits
 * for the disk is held through a failure either: a failed write or fsync
 * gives up the records since the last sync (the file is cut back to it,
 * the records are never written, their waiters are told), and records
 * appended while the disk fails are given up as the writer takes them, but
 * for one write tried per backoff step. Which tickets were given up is kept
 * as ranges (few: one per failure spell), so that a waiter is told right
 * even when later records became durable before it looked.
 *
 * Files and locks: `writer.lock` in the directory is flock'd for the life of
 * the log (one writer per directory); the active segment is flock'd too, which
 * is how gc and readers know to leave it alone. A new segment is written under
 * a temporary name (*.new), locked, then linked to its final name, so no one
 * ever sees an unlocked segment without a header.
 *
 * Recovery (at open, before the thread starts; recover.c): every segment without a
 * valid index is scanned; a torn or corrupt tail is cut back to the last valid
 * frame, damaged spans in the middle are counted and left for readers to
 * skip. The newest segment, if sound and not full, is reopened for appending
 * (so short-lived processes do not leave a trail of tiny segments).
 *
 * Without the thread (opts.inline_writer, for a process that records a
 * decision or two and exits): the same rounds run on the appending thread,
 * one after each append under `run_mu`, and close runs the thread's loop to
 * its end on the closing thread. Records still pass through the ring (the
 * engine reserves room and writes its capture in place), so the bytes and
 * the sync points are the writer thread's; what goes is starting a thread,
 * its stack, its polling, and the wake-ups and the join that cost a
 * one-shot process more than writing its record. */
#define _GNU_SOURCE /* O_TMPFILE */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "core/clock.h"
#include "snapshot/internal.h"
#include "snapshot/writer.h"

/* The writer's timers count milliseconds. */
static uint64_t mono_ms(void) { return clock_mono_ns() / 1000000u; }

void snapshot_log_opts_init(snapshot_log_opts *o) {
  memset(o, 0, sizeof *o);
  o->durability = SNAPSHOT_DURABLE_INTERVAL;
  o->interval_ms = 100;
  o->queue_records = 65536;
  o->queue_bytes = (size_t)32 << 20;
  o->on_full = SNAPSHOT_FULL_BLOCK;
  o->segment_bytes = (uint64_t)64 << 20;
  o->node = NULL;
  o->close_timeout_ms = 10000;
  o->full_wait_ms = 1000;
  o->compress_level = SNAPSHOT_LEVEL_DEFAULT;
  o->block_bytes = SNAPSHOT_BLOCK_DEFAULT;
}

static void set_error(snapshot_log *L, int err, const char *what, const char *name) {
  atomic_fetch_add_explicit(&L->write_errors, 1, memory_order_relaxed);
  pthread_mutex_lock(&L->mu);
  L->last_errno = err;
  snprintf(L->last_error, sizeof L->last_error, "%s %s/%s: %s", what, L->dir, name, strerror(err));
  if (!atomic_load_explicit(&L->failing, memory_order_relaxed)) {
    L->failing_since_ns = clock_wall_ns();
    atomic_store_explicit(&L->failing, 1, memory_order_seq_cst);
  }
  pthread_mutex_unlock(&L->mu);
}

/* A write (or a probe) succeeded: the disk takes writes again. */
static void clear_failing(snapshot_log *L) {
  if (!atomic_load_explicit(&L->failing, memory_order_relaxed)) return;
  pthread_mutex_lock(&L->mu);
  atomic_store_explicit(&L->failing, 0, memory_order_seq_cst);
  L->failing_since_ns = 0;
  pthread_mutex_unlock(&L->mu);
}

static void idx_mark_save(const seg_index *x, idx_mark *m) {
  m->n = x->n;
  m->records = x->records;
  memcpy(m->min_id, x->min_id, 16);
  memcpy(m->max_id, x->max_id, 16);
  m->min_time = x->min_time;
  m->max_time = x->max_time;
  if (x->n) m->last = x->blocks[x->n - 1];
}

static void idx_mark_restore(seg_index *x, const idx_mark *m) {
  assert(x->n >= m->n); /* gather only adds to the last block or adds blocks */
  x->n = m->n;
  x->records = m->records;
  memcpy(x->min_id, m->min_id, 16);
  memcpy(x->max_id, m->max_id, 16);
  x->min_time = m->min_time;
  x->max_time = m->max_time;
  if (m->n) x->blocks[m->n - 1] = m->last;
}

/* ---- the writer thread ---- */

static void publish_durable(snapshot_log *L, uint64_t pos) {
  atomic_store_explicit(&L->durable_pos, pos, memory_order_seq_cst);
  if (atomic_load_explicit(&L->waiters, memory_order_seq_cst) > 0) {
    pthread_mutex_lock(&L->mu);
    pthread_cond_broadcast(&L->durable_cv);
    pthread_mutex_unlock(&L->mu);
  }
}

/* The id a new segment is named after: its first record's, raised above
 * every existing segment's when needed. Segments are read in name order,
 * which must be write order; but a record's id is taken before it is
 * appended, and a thread that was descheduled in between can append a record
 * with an older id than records already written — and if that record starts
 * a segment, the segment would sort before the one written earlier. The name
 * is a lower bound of the segment's ids either way, and lookups by id check
 * each segment's [min, max] ranges (index.c), so raising it loses nothing. */
static void segment_first_id(snapshot_log *L, const uint8_t id[16], uint8_t out[16]) {
  memcpy(out, id, 16);
  seg_entry *segs;
  size_t n;
  if (seg_list(L->dir, &segs, &n) < 0) return;
  if (n && memcmp(segs[n - 1].first_id, out, 16) >= 0) {
    memcpy(out, segs[n - 1].first_id, 16);
    for (int i = 15; i >= 0 && ++out[i] == 0; i--) {
    } /* + 1, big-endian */
  }
  free(segs);
}

/* Creates the segment the record (id, day) starts. 0, or -1 (error recorded). */
static int segment_create(snapshot_log *L, const uint8_t rec_id[16], uint32_t day) {
  char name[SEG_NAME_MAX], tmp[4096], path[4096];
  uint8_t id[16];
  segment_first_id(L, rec_id, id);
  seg_name_format(name, day, id, 0);
  if (seg_path(tmp, sizeof tmp, L->dir, name, 0) < 0 || strlen(tmp) + 5 > sizeof tmp) {
    set_error(L, ENAMETOOLONG, "create", name);
    return -1;
  }
  strcat(tmp, ".new");
  unlink(tmp);
  int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
  if (fd < 0) {
    set_error(L, errno, "create", name);
    return -1;
  }
  int locked = flock(fd, LOCK_EX | LOCK_NB); /* nobody else knows the name yet: cannot fail */
  assert(locked == 0);
  (void)locked;
  seg_header h;
  memset(&h, 0, sizeof h);
  h.created_ns = clock_wall_ns();
  h.day = day;
  memcpy(h.first_id, id, 16);
  h.node_len = (uint16_t)strlen(L->node);
  memcpy(h.node, L->node, h.node_len);
  uint8_t hb[SEG_HEADER_MAX];
  size_t hlen = seg_header_encode(&h, hb);
  int sync = L->opts.durability != SNAPSHOT_DURABLE_NONE;
  if (write_full(fd, hb, hlen, 0) < 0 || (sync && fsync(fd) < 0)) goto fail;
  /* link, not rename: link refuses to replace an existing segment. */
  for (int dup = 0;; dup++) {
    seg_name_format(name, day, id, dup);
    seg_path(path, sizeof path, L->dir, name, 0);
    if (link(tmp, path) == 0) break;
    if (errno != EEXIST || dup > 1000) goto fail;
  }
  unlink(tmp);
  if (sync && dir_sync(L->dir) < 0) {
    int e = errno;
    unlink(path); /* not durable as a name: do not use it */
    errno = e;
    goto fail;
  }
  L->fd = fd;
  snprintf(L->seg_name, sizeof L->seg_name, "%s", name);
  L->seg_day = day;
  L->hdr = h;
  seg_index_reset(&L->idx);
  idx_mark_save(&L->idx, &L->mark);
  L->seg_base = hlen;
  atomic_fetch_add_explicit(&L->segments, 1, memory_order_relaxed);
  return 0;
fail:;
  int e = errno;
  close(fd);
  unlink(tmp);
  set_error(L, e, "create", name);
  return -1;
}

/* Gathers the sealed segment's ordinary frames into compressed blocks
 * (compact.c) when it is final (rotating) or holds a block's worth of them;
 * L->idx becomes the new file's index. A failure leaves the segment as it
 * was, counted; nothing is lost either way. */
static void segment_compact(snapshot_log *L, int rotating) {
  if (L->opts.compress_level <= 0 || L->idx.records == 0) return;
  uint64_t raw = seg_index_raw_bytes(&L->idx);
  if (raw == 0 || (!rotating && raw < L->opts.block_bytes)) return;
  struct timespec c0, c1;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
  uint64_t t0 = clock_mono_ns(), size = L->idx.seg_size, nsize = 0;
  seg_index x;
  seg_index_init(&x);
  int r = seg_compact(L->dir, L->seg_name, L->fd, &L->hdr, &L->idx, L->opts.compress_level,
                      L->opts.block_bytes, &x, &nsize);
  if (r == 0) {
    seg_index_free(&L->idx);
    L->idx = x;
    atomic_fetch_add_explicit(&L->compactions, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&L->compact_in, size, memory_order_relaxed);
    atomic_fetch_add_explicit(&L->compact_out, nsize, memory_order_relaxed);
  } else {
    seg_index_free(&x);
    if (r < 0) atomic_fetch_add_explicit(&L->compact_errors, 1, memory_order_relaxed);
  }
  atomic_fetch_add_explicit(&L->compact_ns, clock_mono_ns() - t0, memory_order_relaxed);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
  int64_t cpu = (int64_t)(c1.tv_sec - c0.tv_sec) * 1000000000 + (c1.tv_nsec - c0.tv_nsec);
  atomic_fetch_add_explicit(&L->compact_cpu_ns, (uint64_t)(cpu > 0 ? cpu : 0),
                            memory_order_relaxed);
}

/* Seals the current segment: compacted, index beside it, lock released. Its
 * data is already as durable as the mode makes it (sync comes before a seal). */
static void segment_seal(snapshot_log *L, int rotating) {
  if (L->fd < 0) return;
  char ipath[4096];
  L->idx.seg_size = L->seg_base + L->pend_len;
  L->idx.seg_crc = L->hdr.crc;
  segment_compact(L, rotating);
  if (seg_path(ipath, sizeof ipath, L->dir, L->seg_name, 1) == 0 && L->idx.records > 0)
    seg_index_write_over(ipath, &L->idx); /* best effort: readers rebuild a bad index */
  close(L->fd);
  L->fd = -1;
  seg_index_reset(&L->idx);
}

static int pend_reserve(snapshot_log *L, size_t more) {
  if (L->pend_len + more <= L->pend_cap) return 0;
  size_t cap = L->pend_cap ? L->pend_cap : 1 << 20;
  while (cap < L->pend_len + more) cap *= 2;
  uint8_t *nb = realloc(L->pend, cap);
  if (!nb) return -1;
  L->pend = nb;
  L->pend_cap = cap;
  return 0;
}

/* Moves committed records from the ring into pend (as frames) until the ring
 * is empty, a round's limit is reached, or the next record must go to a new
 * segment (*rotate). Returns the number of records taken. */
static uint64_t gather(snapshot_log *L, int *rotate) {
  uint64_t start = L->rpos, nrec = 0;
  size_t taken = 0;
  if (L->pend_len == 0) idx_mark_save(&L->idx, &L->mark); /* what a give-up restores */
  for (;;) {
    const uint8_t *body;
    uint32_t len;
    uint64_t next;
    int k = ring_peek(&L->q, L->rpos, &body, &len, &next);
    if (k == 0) break;
    if (k == 2) {
      L->rpos = next;
      continue;
    }
    if (taken >= GATHER_MAX) break;
    /* INTERVAL syncs early past PEND_CAP (or as many records as the queue
     * holds); NONE, whose buffer only holds what a failing disk refused,
     * stops taking records there too, so that the queue's bounds (and BLOCK
     * or DROP) hold while the disk fails: at most twice queue_records are
     * unwritten. */
    if (L->opts.durability != SNAPSHOT_DURABLE_ALWAYS &&
        (L->pend_len >= PEND_CAP || L->pend_recs >= L->opts.queue_records))
      break;
    /* With a format hook, the body written is the one it makes; a raw
     * record (snapshot_log_reserve_raw) gets its header fields from it too. */
    snapshot_rec fr;
    size_t blen = len;
    const uint8_t *id = body;
    int64_t time_ns = 0;
    if (L->opts.format || k == 3) {
      blen = 0;
      int ok;
      if (k == 3) {
        memset(&fr, 0, sizeof fr);
        fr.payload = (const char *)body;
        fr.payload_len = len;
        ok = L->opts.format && L->opts.format(L->opts.format_ud, &fr) == 0 && fr.point &&
             fr.source <= SNAPSHOT_SRC_ERROR;
      } else {
        ok = rec_body_decode(body, len, &fr) == 0 && L->opts.format(L->opts.format_ud, &fr) == 0;
      }
      if (ok) blen = rec_body_size(&fr);
      if (blen == 0 || blen > BODY_MAX) { /* not written: counted, and passed over */
        atomic_fetch_add_explicit(&L->rejected, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&L->unformatted, 1, memory_order_relaxed);
        L->rpos = next;
        if (L->pend_len == 0) { /* nothing before it waits to be written or synced */
          atomic_store_explicit(&L->written_pos, next, memory_order_release);
          publish_durable(L, next);
        } else
          L->pend_pos = next;
        nrec++;
        continue;
      }
      id = fr.id;
      time_ns = fr.time_ns ? fr.time_ns : (int64_t)snapshot_id_time_ms(fr.id) * 1000000;
    } else {
      time_ns = rec_body_time(body);
    }
    uint32_t day = day_of_time_ns(time_ns);
    size_t frame = FRAME_HEADER + blen;
    if (L->fd >= 0) {
      int full = L->idx.records > 0 && L->seg_base + L->pend_len + frame > L->opts.segment_bytes;
      if (day > L->seg_day || full) {
        *rotate = 1;
        break;
      }
    } else if (segment_create(L, id, day) < 0) {
      break;
    }
    if (pend_reserve(L, frame) < 0) {
      set_error(L, ENOMEM, "buffer for", L->seg_name);
      break;
    }
    uint8_t *f = L->pend + L->pend_len;
    if (L->opts.format || k == 3) {
      rec_body_encode(&fr, f + FRAME_HEADER);
      body = f + FRAME_HEADER;
      len = (uint32_t)blen;
    } else {
      memcpy(f + FRAME_HEADER, body, len);
    }
    put_le32(f, len);
    put_le32(f + 4, snapshot_crc32c(0, f + FRAME_HEADER, len));
    if (seg_index_add(&L->idx, L->seg_base + L->pend_len, body, rec_body_time(body)) < 0) {
      set_error(L, ENOMEM, "index of", L->seg_name);
      break;
    }
    L->pend_len += frame;
    L->pend_recs++;
    L->pend_unwritten_recs++;
    L->rpos = next;
    L->pend_pos = next;
    taken += frame;
    nrec++;
  }
  if (L->rpos != start) ring_release(&L->q, L->rpos, nrec);
  return nrec;
}

/* Writes pend's unwritten part. 0, or -1 after cutting the file back. */
static int pend_write(snapshot_log *L) {
  if (L->pend_written == L->pend_len) return 0;
  uint64_t at = L->seg_base + L->pend_written;
  if (write_full(L->fd, L->pend + L->pend_written, L->pend_len - L->pend_written, at) < 0) {
    int e = errno;
    set_error(L, e, "write", L->seg_name);
    /* A partial write leaves part of a frame: cut back to the last complete
     * one, which is where this write began. */
    while (ftruncate(L->fd, (off_t)at) < 0 && errno == EINTR) {
    }
    return -1;
  }
  atomic_fetch_add_explicit(&L->written, L->pend_unwritten_recs, memory_order_relaxed);
  atomic_fetch_add_explicit(&L->bytes, L->pend_len - L->pend_written, memory_order_relaxed);
  L->pend_unwritten_recs = 0;
  L->pend_written = L->pend_len;
  atomic_store_explicit(&L->written_pos, L->pend_pos, memory_order_release);
  if (L->opts.durability == SNAPSHOT_DURABLE_NONE) {
    L->seg_base += L->pend_len;
    L->pend_len = L->pend_written = 0;
    L->pend_recs = 0;
    publish_durable(L, L->pend_pos);
  }
  return 0;
}

/* fsyncs the segment. 0, or -1 after cutting back to the last good sync so
 * that everything since is rewritten from pend. */
static int pend_sync(snapshot_log *L) {
  if (L->pend_len == 0) return 0;
  if (fsync(L->fd) < 0) {
    int e = errno;
    set_error(L, e, "fsync", L->seg_name);
    while (ftruncate(L->fd, (off_t)L->seg_base) < 0 && errno == EINTR) {
    }
    /* the records count as unwritten again */
    atomic_fetch_sub_explicit(&L->written, L->pend_recs, memory_order_relaxed);
    atomic_fetch_sub_explicit(&L->bytes, L->pend_len, memory_order_relaxed);
    L->pend_unwritten_recs = L->pend_recs;
    L->pend_written = 0;
    return -1;
  }
  atomic_fetch_add_explicit(&L->fsyncs, 1, memory_order_relaxed);
  L->seg_base += L->pend_len;
  L->pend_len = L->pend_written = 0;
  L->pend_recs = 0;
  L->last_sync_ms = mono_ms();
  publish_durable(L, L->pend_pos);
  return 0;
}

static int ring_has_work(snapshot_log *L) {
  const uint8_t *b;
  uint32_t len;
  uint64_t next;
  return ring_peek(&L->q, L->rpos, &b, &len, &next) != 0;
}

static void wait_ms(snapshot_log *L, uint64_t ms, int deep) {
  struct timespec ts = clock_wall_after_ms(ms);
  pthread_mutex_lock(&L->mu);
  atomic_store_explicit(&L->idle, 1, memory_order_seq_cst);
  if (deep) atomic_store_explicit(&L->sleeping, 1, memory_order_seq_cst);
  /* Checked under the lock and after raising the flag: a producer that
   * committed before this check is seen here, one after it sees the flag. */
  if (!ring_has_work(L) && !atomic_load(&L->closing))
    pthread_cond_timedwait(&L->wake_cv, &L->mu, &ts);
  atomic_store_explicit(&L->sleeping, 0, memory_order_relaxed);
  atomic_store_explicit(&L->idle, 0, memory_order_relaxed);
  pthread_mutex_unlock(&L->mu);
}

/* ALWAYS: the tickets in (durable_pos, to] are given up. Kept as ranges:
 * a later record can become durable before a waiter of a refused one looks,
 * so the durable position alone cannot tell it. One failure spell makes one
 * range (consecutive refusals with nothing durable between merge). */
static void add_refusal(snapshot_log *L, uint64_t to) {
  uint64_t from = atomic_load_explicit(&L->durable_pos, memory_order_relaxed);
  pthread_mutex_lock(&L->mu);
  unsigned n = L->nrefusals;
  if (n && L->refusals[n - 1].to >= from) {
    if (to > L->refusals[n - 1].to) L->refusals[n - 1].to = to;
  } else {
    if (n == REFUSALS_MAX) {
      L->refusals_floor = L->refusals[0].to;
      memmove(&L->refusals[0], &L->refusals[1], (REFUSALS_MAX - 1) * sizeof L->refusals[0]);
      n--;
    }
    L->refusals[n].from = from;
    L->refusals[n].to = to;
    L->nrefusals = n + 1;
  }
  atomic_store_explicit(&L->refused_max, to, memory_order_seq_cst);
  pthread_cond_broadcast(&L->durable_cv);
  pthread_mutex_unlock(&L->mu);
}

/* Under mu. */
static int is_refused(snapshot_log *L, uint64_t ticket) {
  if (atomic_load_explicit(&L->refused_max, memory_order_seq_cst) < ticket) return 0;
  for (unsigned i = 0; i < L->nrefusals; i++)
    if (ticket > L->refusals[i].from && ticket <= L->refusals[i].to) return 1;
  return ticket <= L->refusals_floor;
}

/* ALWAYS, after a failed write or fsync: every record since the last sync
 * is given up (its waiter is waiting: nothing there was acknowledged). The
 * file is cut back to the last sync and the index with it. */
static void refuse_pend(snapshot_log *L) {
  if (L->pend_len == 0) return;
  if (L->fd >= 0)
    while (ftruncate(L->fd, (off_t)L->seg_base) < 0 && errno == EINTR) {
    }
  idx_mark_restore(&L->idx, &L->mark);
  if (L->pend_written) { /* written, not synced: no longer there */
    atomic_fetch_sub_explicit(&L->written, L->pend_recs - L->pend_unwritten_recs,
                              memory_order_relaxed);
    atomic_fetch_sub_explicit(&L->bytes, L->pend_written, memory_order_relaxed);
  }
  atomic_fetch_add_explicit(&L->refused, L->pend_recs, memory_order_relaxed);
  atomic_fetch_add_explicit(&L->given_up, L->pend_recs, memory_order_relaxed);
  L->pend_len = L->pend_written = 0;
  L->pend_recs = L->pend_unwritten_recs = 0;
  add_refusal(L, L->pend_pos);
}

/* ALWAYS, while the disk fails and the next try is not due: what the ring
 * holds is given up as it comes, rather than kept (with its waiters)
 * through the backoff. Returns the records given up. */
static uint64_t refuse_queued(snapshot_log *L) {
  uint64_t start = L->rpos, nrec = 0;
  for (;;) {
    const uint8_t *body;
    uint32_t len;
    uint64_t next;
    int k = ring_peek(&L->q, L->rpos, &body, &len, &next);
    if (k == 0) break;
    if (k != 2) nrec++;
    L->rpos = next;
  }
  if (L->rpos == start) return 0;
  ring_release(&L->q, L->rpos, nrec);
  L->pend_pos = L->rpos;
  atomic_fetch_add_explicit(&L->refused, nrec, memory_order_relaxed);
  atomic_fetch_add_explicit(&L->given_up, nrec, memory_order_relaxed);
  add_refusal(L, L->rpos);
  return nrec;
}

/* A failing disk with nothing left to write (ALWAYS gave it all up, or no
 * decisions come while readiness says no): does it take writes again?
 * PROBE_BYTES of zeros where the next record goes, then cut back (a reader
 * meanwhile sees a torn tail, which it passes over, as for a write in
 * progress); with no segment open, an unnamed file in the directory. 0 when
 * the disk took them (or cannot be asked: the next record will tell). */
static int disk_probe(snapshot_log *L) {
  static const uint8_t zeros[PROBE_BYTES];
  int fd = L->fd, own = L->fd < 0;
  uint64_t at = own ? 0 : L->seg_base;
  if (own) {
    fd = open(L->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) return 0;
    if (fd < 0) {
      set_error(L, errno, "create", "(a probe)");
      return -1;
    }
  }
  int rc = write_full(fd, zeros, sizeof zeros, at), e = errno;
  if (own)
    close(fd);
  else
    while (ftruncate(fd, (off_t)at) < 0 && errno == EINTR) {
    }
  if (rc < 0) {
    set_error(L, e, "write", own ? "(a probe)" : L->seg_name);
    return -1;
  }
  return 0;
}

/* After a round that tried the disk: the next try waits 10 ms doubling to
 * 1 s while tries fail. */
static void backoff(snapshot_log *L, uint64_t now, int failed) {
  if (failed) {
    L->backoff_ms = L->backoff_ms ? L->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (L->backoff_ms > BACKOFF_MAX_MS) L->backoff_ms = BACKOFF_MAX_MS;
    L->retry_at_ms = now + L->backoff_ms;
  } else {
    L->backoff_ms = 0;
  }
}

/* One round of the writer's work: take what the ring holds into pend, write
 * it, sync when due (force: now), seal on rotation; on failure, set the
 * backoff (and under ALWAYS give up what failed). Sets *rotate; returns the
 * records taken. */
static uint64_t writer_round(snapshot_log *L, uint64_t now, int force, int *rotate) {
  int failed = 0;
  *rotate = 0;
  uint64_t got = gather(L, rotate);
  int tried = L->pend_written < L->pend_len;
  if (pend_write(L) < 0) failed = 1;
  if (!failed && L->pend_len > 0) {
    int due = L->opts.durability == SNAPSHOT_DURABLE_ALWAYS || *rotate || force ||
              L->pend_len >= PEND_CAP || L->pend_recs >= L->opts.queue_records ||
              now - L->last_sync_ms >= L->opts.interval_ms;
    if (due) tried = 1;
    if (due && pend_sync(L) < 0) failed = 1;
  }
  if (!failed && *rotate) segment_seal(L, 1);
  if (L->fd < 0 && L->pend_len == 0 && ring_has_work(L) && !*rotate) failed = 1; /* create failed */
  if (failed && L->opts.durability == SNAPSHOT_DURABLE_ALWAYS) refuse_pend(L);
  if (failed || tried) backoff(L, now, failed);
  if (!failed && tried) clear_failing(L);
  return got;
}

static void *writer_main(void *arg) {
  snapshot_log *L = arg;
  uint64_t last_work = mono_ms(), close_deadline = 0;
  if (!L->inline_writer) L->last_sync_ms = last_work; /* inline: since open */
  for (;;) {
    uint64_t now = mono_ms();
    int closing = atomic_load(&L->closing);
    if (closing && !close_deadline) close_deadline = now + L->opts.close_timeout_ms;
    int rotate = 0;
    uint64_t got = 0;
    int failing = atomic_load_explicit(&L->failing, memory_order_relaxed);
    if (now >= L->retry_at_ms) {
      got = writer_round(L, now, closing, &rotate);
      if (!got && !rotate && L->pend_len == 0 && atomic_load(&L->failing) && !ring_has_work(L)) {
        int failed = disk_probe(L) < 0;
        backoff(L, now, failed);
        if (!failed) clear_failing(L);
      }
    } else if (failing && L->opts.durability == SNAPSHOT_DURABLE_ALWAYS && L->pend_len == 0) {
      got = refuse_queued(L);
    }
    if (got || rotate) last_work = now;
    if (closing) {
      int drained = !ring_has_work(L) && L->rpos == atomic_load(&L->q.head) && L->pend_len == 0;
      if (drained) break;
      if (now >= close_deadline) break; /* the disk keeps failing: give up */
    }
    if (got || rotate) continue;
    uint64_t wait;
    int deep = 0;
    if (L->retry_at_ms > now)
      wait = L->retry_at_ms - now;
    else if (now - last_work < 1000)
      wait = 1;
    else {
      wait = 1000;
      deep = 1;
    }
    if (L->pend_len > 0 && L->opts.durability == SNAPSHOT_DURABLE_INTERVAL) {
      uint64_t due = L->last_sync_ms + L->opts.interval_ms;
      uint64_t left = due > now ? due - now : 0;
      if (left < wait) wait = left ? left : 1;
    }
    if (closing) { /* a backoff does not outlast the close timeout */
      uint64_t left = close_deadline > now ? close_deadline - now : 1;
      if (left < wait) wait = left;
    }
    wait_ms(L, wait, deep);
  }
  /* Whatever could not be written is lost; say how much. */
  atomic_store(&L->lost, ring_count(&L->q) + L->pend_recs);
  if (L->pend_len == 0)
    segment_seal(L, 0);
  else if (L->fd >= 0) {
    close(L->fd);
    L->fd = -1;
  }
  atomic_store(&L->dead, 1);
  pthread_mutex_lock(&L->mu);
  pthread_cond_broadcast(&L->durable_cv);
  pthread_mutex_unlock(&L->mu);
  return NULL;
}

/* ---- the public calls ---- */

static void log_free(snapshot_log *L) {
  if (L->fd >= 0) close(L->fd);
  if (L->lock_fd >= 0) close(L->lock_fd);
  ring_free(&L->q);
  seg_index_free(&L->idx);
  free(L->pend);
  free(L->dir);
  pthread_mutex_destroy(&L->run_mu);
  pthread_mutex_destroy(&L->mu);
  pthread_cond_destroy(&L->wake_cv);
  pthread_cond_destroy(&L->durable_cv);
  free(L);
}

int snapshot_log_open(const char *dir, const snapshot_log_opts *opts, snapshot_log **out, char *err,
                      size_t errlen) {
  char scratch[SNAPSHOT_ERRLEN];
  if (!err) {
    err = scratch;
    errlen = sizeof scratch;
  }
  *out = NULL;
  snapshot_log_opts o;
  if (opts)
    o = *opts;
  else
    snapshot_log_opts_init(&o);
  if (!dir || !*dir) {
    snprintf(err, errlen, "snapshot log: no directory given");
    return SNAPSHOT_EINVAL;
  }
  if (o.durability > SNAPSHOT_DURABLE_ALWAYS || o.on_full > SNAPSHOT_FULL_DROP) {
    snprintf(err, errlen, "snapshot log %s: unknown durability or on_full setting", dir);
    return SNAPSHOT_EINVAL;
  }
  if (!o.interval_ms) o.interval_ms = 100;
  if (!o.queue_records) o.queue_records = 65536;
  if (!o.queue_bytes) o.queue_bytes = (size_t)32 << 20;
  if (!o.segment_bytes) o.segment_bytes = (uint64_t)64 << 20;
  if (!o.close_timeout_ms) o.close_timeout_ms = 10000;
  if (!o.full_wait_ms) o.full_wait_ms = 1000;
  if (o.compress_level < 0 || o.compress_level > ZSTD_maxCLevel()) {
    snprintf(err, errlen, "snapshot log %s: compression level %d is not within 0-%d", dir,
             o.compress_level, ZSTD_maxCLevel());
    return SNAPSHOT_EINVAL;
  }
  if (!o.block_bytes) o.block_bytes = SNAPSHOT_BLOCK_DEFAULT;
  if (o.block_bytes > SNAPSHOT_BLOCK_MAX) o.block_bytes = SNAPSHOT_BLOCK_MAX;

  snapshot_log *L = aligned_alloc(64, (sizeof *L + 63) & ~(size_t)63);
  if (L) memset(L, 0, sizeof *L);
  if (!L) {
    snprintf(err, errlen, "snapshot log %s: out of memory", dir);
    return SNAPSHOT_ENOMEM;
  }
  L->fd = -1;
  L->lock_fd = -1;
  atomic_store(&L->stalled_tail, UINT64_MAX);
  pthread_mutex_init(&L->mu, NULL);
  pthread_mutex_init(&L->run_mu, NULL);
  pthread_cond_init(&L->wake_cv, NULL);
  pthread_cond_init(&L->durable_cv, NULL);
  seg_index_init(&L->idx);
  L->opts = o;
  L->dir = strdup(dir);
  if (o.node && *o.node)
    snprintf(L->node, sizeof L->node, "%s", o.node);
  else if (gethostname(L->node, sizeof L->node - 1) < 0 || !L->node[0])
    snprintf(L->node, sizeof L->node, "unknown");
  L->opts.node = L->node;
  if (!L->dir || ring_init(&L->q, o.queue_bytes, o.queue_records) < 0) {
    snprintf(err, errlen, "snapshot log %s: out of memory for a %zu-byte queue", dir,
             o.queue_bytes);
    log_free(L);
    return SNAPSHOT_ENOMEM;
  }
  L->max_record = ring_max_body(&L->q);
  if (L->max_record > BODY_MAX) L->max_record = BODY_MAX;

  if (writer_mkdir_p(dir) < 0) {
    snprintf(err, errlen, "snapshot directory %s: %s", dir, strerror(errno));
    log_free(L);
    return SNAPSHOT_EIO;
  }
  char lpath[4096];
  snprintf(lpath, sizeof lpath, "%s/writer.lock", dir);
  L->lock_fd = open(lpath, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (L->lock_fd < 0) {
    snprintf(err, errlen, "open %s: %s", lpath, strerror(errno));
    log_free(L);
    return SNAPSHOT_EIO;
  }
  if (flock(L->lock_fd, LOCK_EX | LOCK_NB) < 0) {
    char pid[32] = "";
    ssize_t n = pread(L->lock_fd, pid, sizeof pid - 1, 0);
    pid[n > 0 ? n : 0] = '\0';
    pid[strcspn(pid, " \n")] = '\0';
    snprintf(err, errlen,
             "snapshot directory %s is in use by another writer%s%s%s (one writer per directory)",
             dir, pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "");
    log_free(L);
    return SNAPSHOT_EBUSY;
  }
  /* The pid, padded to a fixed width and written over the last one: no
   * ftruncate, which costs a journal commit (1.3 ms measured) to every
   * short-lived writer such as an agent's hook. Truncated only when the file
   * holds more than that (written by something else). */
  char pidtext[32];
  int pn = snprintf(pidtext, sizeof pidtext, "%-20ld\n", (long)getpid());
  struct stat lst;
  if (fstat(L->lock_fd, &lst) == 0 && lst.st_size > pn) (void)!ftruncate(L->lock_fd, pn);
  write_full(L->lock_fd, pidtext, (size_t)pn, 0);

  writer_remove_stale_temps(dir);
  int rc = writer_recover(L, err, errlen);
  if (rc < 0) {
    log_free(L);
    return rc;
  }
  L->inline_writer = o.inline_writer != 0;
  L->last_sync_ms = mono_ms();
  if (!L->inline_writer && pthread_create(&L->thread, NULL, writer_main, L) != 0) {
    snprintf(err, errlen, "snapshot log %s: cannot start the writer thread", dir);
    log_free(L);
    return SNAPSHOT_ENOMEM;
  }
  *out = L;
  return 0;
}

size_t snapshot_log_max_record(const snapshot_log *log) { return log->max_record; }

uint64_t snapshot_log_mark(snapshot_log *L) {
  return atomic_load_explicit(&L->q.head, memory_order_seq_cst);
}

/* The ring's tail moves past a record only after gather has formatted it
 * and framed the result into `pend` (a record a rotation interrupts is
 * formatted again, and released, later). */
int snapshot_log_taken(snapshot_log *L, uint64_t mark) {
  return atomic_load_explicit(&L->q.tail, memory_order_acquire) >= mark;
}

static void wake_writer(snapshot_log *L) {
  pthread_mutex_lock(&L->mu);
  pthread_cond_signal(&L->wake_cv);
  pthread_mutex_unlock(&L->mu);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Inline: the writer's rounds, here, until the ring holds nothing it can
 * take (more than one round after a rotation or a full round). Skipped
 * while a failure's backoff lasts; the next append, or close, retries. */
static void drain_here(snapshot_log *L, int force) {
  pthread_mutex_lock(&L->run_mu);
  for (int i = 0; i < 64; i++) {
    uint64_t now = mono_ms();
    if (now < L->retry_at_ms) break;
    int rotate;
    uint64_t got = writer_round(L, now, force, &rotate);
    if ((!got && !rotate) || L->retry_at_ms > now) break;
  }
  pthread_mutex_unlock(&L->run_mu);
}

/* Inline and waiting (a full ring, a durable ticket): the backoff's rest,
 * then a round. */
static void drain_wait(snapshot_log *L, int force) {
  uint64_t now = mono_ms(), at = L->retry_at_ms;
  if (at > now) {
    uint64_t ms = at - now;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  drain_here(L, force);
}

static int refuse(snapshot_log *L) {
  atomic_fetch_add_explicit(&L->refused, 1, memory_order_relaxed);
  return SNAPSHOT_EREFUSED;
}

/* Room in the ring for a body of len bytes, waiting (BLOCK) or refusing
 * (DROP, counted) when it is full. BLOCK waits only while waiting can help:
 * not while the disk refuses writes, not past full_wait_ms, and not again
 * (until the writer has moved) once an append gave up. */
static int take_room(snapshot_log *L, size_t len, uint8_t **body, uint64_t *t) {
  uint64_t deadline = 0;
  for (unsigned spins = 0; ring_reserve(&L->q, len, body, t) < 0; spins++) {
    /* Full. A writer pausing between polls would leave the queue full for
     * the rest of its pause: wake it (the slow path may make a syscall). */
    if (atomic_load_explicit(&L->idle, memory_order_relaxed)) wake_writer(L);
    if (L->opts.on_full == SNAPSHOT_FULL_DROP) {
      atomic_fetch_add_explicit(&L->dropped, 1, memory_order_relaxed);
      return SNAPSHOT_EFULL;
    }
    if (atomic_load_explicit(&L->closing, memory_order_relaxed) || atomic_load(&L->dead))
      return SNAPSHOT_ECLOSED;
    uint64_t tail = atomic_load_explicit(&L->q.tail, memory_order_relaxed);
    if (atomic_load_explicit(&L->failing, memory_order_relaxed) ||
        tail == atomic_load_explicit(&L->stalled_tail, memory_order_relaxed))
      return refuse(L);
    if (!deadline) {
      deadline = mono_ms() + L->opts.full_wait_ms;
    } else if ((spins & 63) == 0 && mono_ms() >= deadline) {
      atomic_store_explicit(&L->stalled_tail, tail, memory_order_relaxed);
      return refuse(L);
    }
    if (L->inline_writer) { /* the writer is us */
      drain_wait(L, 0);
      continue;
    }
    /* Wait for the writer: spin briefly, then yield, then sleep. */
    if (spins < 64)
      cpu_relax();
    else if (spins < 128)
      sched_yield();
    else {
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    }
  }
  return 0;
}

int snapshot_log_append(snapshot_log *L, const snapshot_rec *rec, uint64_t *ticket) {
  if (atomic_load_explicit(&L->closing, memory_order_relaxed)) return SNAPSHOT_ECLOSED;
  size_t len = rec_body_size(rec);
  if (len == 0 || rec->source > SNAPSHOT_SRC_ERROR) {
    atomic_fetch_add_explicit(&L->rejected, 1, memory_order_relaxed);
    return rec->payload_len > SNAPSHOT_MAX_PAYLOAD ? SNAPSHOT_ETOOBIG : SNAPSHOT_EINVAL;
  }
  if (len > L->max_record) {
    atomic_fetch_add_explicit(&L->rejected, 1, memory_order_relaxed);
    return SNAPSHOT_ETOOBIG;
  }
  uint8_t *body;
  uint64_t t;
  int rc = take_room(L, len, &body, &t);
  if (rc) return rc;
  rec_body_encode(rec, body);
  ring_commit(&L->q, body, len);
  atomic_fetch_add_explicit(&L->appended, 1, memory_order_relaxed);
  if (ticket) *ticket = t;
  if (L->inline_writer)
    drain_here(L, 0);
  else if (atomic_load_explicit(&L->sleeping, memory_order_seq_cst))
    wake_writer(L);
  return 0;
}

int snapshot_log_reserve(snapshot_log *L, const snapshot_rec *rec, size_t max_payload,
                         snapshot_slot *s) {
  if (atomic_load_explicit(&L->closing, memory_order_relaxed)) return SNAPSHOT_ECLOSED;
  snapshot_rec h = *rec;
  h.payload = NULL;
  h.payload_len = max_payload;
  size_t len = rec_body_size(&h);
  if (len == 0 || rec->source > SNAPSHOT_SRC_ERROR || len > L->max_record)
    return SNAPSHOT_ETOOBIG; /* not counted: the caller appends it instead */
  uint8_t *body;
  uint64_t t;
  int rc = take_room(L, len, &body, &t);
  if (rc) return rc;
  s->body = body;
  s->len_at = rec_body_encode_head(&h, body);
  s->head_len = (size_t)(s->len_at - body) + 4;
  s->payload = (char *)s->len_at + 4;
  s->cap = max_payload;
  s->reserved = len;
  s->end = t;
  return 0;
}

/* After a commit: the writer's turn (inline), or a wake-up if it sleeps. */
static inline void after_commit(snapshot_log *L) {
  atomic_fetch_add_explicit(&L->appended, 1, memory_order_relaxed);
  if (L->inline_writer)
    drain_here(L, 0);
  else if (atomic_load_explicit(&L->sleeping, memory_order_seq_cst))
    wake_writer(L);
}

void snapshot_log_commit(snapshot_log *L, snapshot_slot *s, size_t payload_len, uint64_t *ticket) {
  uint64_t pad;
  if (s->len_at) {
    put_le32(s->len_at, (uint32_t)payload_len);
    pad = ring_commit_short(&L->q, s->body, s->head_len + payload_len, s->reserved, 0);
  } else { /* raw: the entry holds the payload alone */
    pad = ring_commit_short(&L->q, s->body, payload_len, s->reserved, RING_RAW);
  }
  if (ticket) *ticket = s->end - pad;
  after_commit(L);
}

int snapshot_log_reserve_raw(snapshot_log *L, size_t max_payload, snapshot_slot *s) {
  if (atomic_load_explicit(&L->closing, memory_order_relaxed)) return SNAPSHOT_ECLOSED;
  if (!L->opts.format) return SNAPSHOT_EINVAL;
  if (max_payload > L->max_record) return SNAPSHOT_ETOOBIG; /* not counted, as reserve */
  uint8_t *body;
  uint64_t t;
  int rc = take_room(L, max_payload, &body, &t);
  if (rc) return rc;
  s->body = body;
  s->len_at = NULL;
  s->head_len = 0;
  s->payload = (char *)body;
  s->cap = max_payload;
  s->reserved = max_payload;
  s->end = t;
  return 0;
}

int snapshot_log_append_raw(snapshot_log *L, const char *payload, size_t len, uint64_t *ticket) {
  if (atomic_load_explicit(&L->closing, memory_order_relaxed)) return SNAPSHOT_ECLOSED;
  if (!L->opts.format || len > L->max_record || len > SNAPSHOT_MAX_PAYLOAD) {
    atomic_fetch_add_explicit(&L->rejected, 1, memory_order_relaxed);
    return L->opts.format ? SNAPSHOT_ETOOBIG : SNAPSHOT_EINVAL;
  }
  uint8_t *body;
  uint64_t t;
  int rc = take_room(L, len, &body, &t);
  if (rc) return rc;
  if (len) memcpy(body, payload, len);
  ring_commit_flags(&L->q, body, len, RING_RAW);
  if (ticket) *ticket = t;
  after_commit(L);
  return 0;
}

void snapshot_log_cancel(snapshot_log *L, snapshot_slot *s) {
  ring_cancel(&L->q, s->body, s->reserved);
  if (L->inline_writer)
    drain_here(L, 0); /* records committed behind it were waiting for it */
  else if (atomic_load_explicit(&L->sleeping, memory_order_seq_cst))
    wake_writer(L);
}

/* Under ALWAYS a ticket below the durable position may still have been
 * given up (a later record became durable first): refused_max tells. */
int snapshot_log_wait_durable(snapshot_log *L, uint64_t ticket) {
  if (atomic_load_explicit(&L->durable_pos, memory_order_acquire) >= ticket &&
      atomic_load_explicit(&L->refused_max, memory_order_acquire) < ticket)
    return 0;
  if (L->inline_writer) { /* sync here; a disk that keeps failing: give up */
    uint64_t deadline = mono_ms() + L->opts.close_timeout_ms;
    for (;;) {
      drain_wait(L, 1);
      pthread_mutex_lock(&L->mu);
      int refused = is_refused(L, ticket);
      pthread_mutex_unlock(&L->mu);
      if (refused) return SNAPSHOT_EREFUSED;
      if (atomic_load_explicit(&L->durable_pos, memory_order_acquire) >= ticket) return 0;
      if (mono_ms() >= deadline) return SNAPSHOT_ECLOSED;
    }
  }
  int rc = 0;
  pthread_mutex_lock(&L->mu);
  atomic_fetch_add_explicit(&L->waiters, 1, memory_order_seq_cst);
  for (;;) {
    if (is_refused(L, ticket)) {
      rc = SNAPSHOT_EREFUSED;
      break;
    }
    if (atomic_load_explicit(&L->durable_pos, memory_order_seq_cst) >= ticket) break;
    if (atomic_load(&L->dead)) {
      rc = SNAPSHOT_ECLOSED;
      break;
    }
    pthread_cond_signal(&L->wake_cv); /* ALWAYS: sync now rather than at the next poll */
    pthread_cond_wait(&L->durable_cv, &L->mu);
  }
  atomic_fetch_sub_explicit(&L->waiters, 1, memory_order_relaxed);
  pthread_mutex_unlock(&L->mu);
  return rc;
}

void snapshot_log_status_get(snapshot_log *L, snapshot_log_status *st) {
  memset(st, 0, sizeof *st);
  st->appended = atomic_load(&L->appended);
  st->dropped = atomic_load(&L->dropped);
  st->rejected = atomic_load(&L->rejected);
  st->written = atomic_load(&L->written);
  st->bytes = atomic_load(&L->bytes);
  st->fsyncs = atomic_load(&L->fsyncs);
  st->write_errors = atomic_load(&L->write_errors);
  /* Waiting to be written: in the queue, or already taken into the writer's
   * buffer while the disk refuses it (appended is counted just after the
   * commit, so the writer can be a record ahead of it for a moment). */
  uint64_t depth = ring_count(&L->q);
  uint64_t done = st->written + atomic_load(&L->unformatted) + atomic_load(&L->given_up);
  uint64_t unwritten = st->appended > done ? st->appended - done : 0;
  st->queue_depth = unwritten > depth ? unwritten : depth;
  st->segments = atomic_load(&L->segments);
  st->refused = atomic_load(&L->refused);
  st->lost = atomic_load(&L->lost);
  st->durable_ticket = atomic_load(&L->durable_pos);
  st->written_ticket = atomic_load(&L->written_pos);
  st->recovered_segments = L->rec_segments;
  st->cut_bytes = L->cut_bytes;
  st->cut_records = L->cut_records;
  st->damaged_regions = L->damaged_regions;
  st->compactions = atomic_load(&L->compactions);
  st->compact_in = atomic_load(&L->compact_in);
  st->compact_out = atomic_load(&L->compact_out);
  st->compact_ns = atomic_load(&L->compact_ns);
  st->compact_cpu_ns = atomic_load(&L->compact_cpu_ns);
  st->compact_errors = atomic_load(&L->compact_errors);
  pthread_mutex_lock(&L->mu);
  st->last_errno = L->last_errno;
  memcpy(st->last_error, L->last_error, sizeof st->last_error);
  st->failing = atomic_load(&L->failing);
  st->failing_since_ns = L->failing_since_ns;
  pthread_mutex_unlock(&L->mu);
}

int snapshot_log_close(snapshot_log *L, snapshot_log_status *st) {
  if (!L) return 0;
  atomic_store(&L->closing, 1);
  if (L->inline_writer) {
    pthread_mutex_lock(&L->run_mu); /* an append still in its round finishes it */
    writer_main(L);                 /* the thread's last rounds, here: drain, sync, seal */
    pthread_mutex_unlock(&L->run_mu);
  } else {
    wake_writer(L);
    pthread_join(L->thread, NULL);
  }
  uint64_t lost = atomic_load(&L->lost);
  if (st) snapshot_log_status_get(L, st);
  log_free(L);
  return lost ? SNAPSHOT_EIO : 0;
}
