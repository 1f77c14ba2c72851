/* index.c — the sparse index of a segment: one entry per 1024 plain
 * records, and one per compressed block, with the entry's offset and the id
 * and time range inside it.
 *
 * Why sparse and why ranges: a full index would cost as much to write as the
 * ids themselves; one entry per block is 64 bytes per ~1 MiB of snapshots and
 * narrows a lookup to one block of reading. Ranges rather than "the first id
 * of the block" because records are in append order, which is id order only
 * up to threads racing between taking an id and appending it: a block's
 * [min, max] is right whatever the order inside it.
 *
 * The .idx file is written when a segment is sealed (rotation, close), by gc
 * after a rewrite, and by a reader that had to rebuild it for a sealed
 * segment. It names the size and header CRC of the segment it describes, so a
 * segment that changed afterwards (reopened for appending, cut on recovery)
 * is never read through a stale index; a missing or stale index is rebuilt
 * by scanning. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/internal.h"

#define IDX_MAGIC "VDSIDX"
#define IDX_VERSION 1
#define IDX_HEADER 88
#define IDX_ENTRY 64

void seg_index_init(seg_index *x) { memset(x, 0, sizeof *x); }

void seg_index_reset(seg_index *x) {
  idx_block *b = x->blocks;
  size_t cap = x->cap;
  memset(x, 0, sizeof *x);
  x->blocks = b;
  x->cap = cap;
}

void seg_index_free(seg_index *x) {
  free(x->blocks);
  memset(x, 0, sizeof *x);
}

static void range_add(uint8_t min_id[16], uint8_t max_id[16], int64_t *min_t, int64_t *max_t,
                      int first, const uint8_t id[16], int64_t t) {
  if (first || memcmp(id, min_id, 16) < 0) memcpy(min_id, id, 16);
  if (first || memcmp(id, max_id, 16) > 0) memcpy(max_id, id, 16);
  if (first || t < *min_t) *min_t = t;
  if (first || t > *max_t) *max_t = t;
}

static int entry_new(seg_index *x, uint64_t off, uint32_t flags) {
  if (x->n == x->cap) {
    size_t cap = x->cap ? x->cap * 2 : 16;
    idx_block *nb = realloc(x->blocks, cap * sizeof *nb);
    if (!nb) return -1;
    x->blocks = nb;
    x->cap = cap;
  }
  memset(&x->blocks[x->n], 0, sizeof x->blocks[0]);
  x->blocks[x->n].off = off;
  x->blocks[x->n++].flags = flags;
  return 0;
}

static void entry_add(seg_index *x, const uint8_t id[16], int64_t time_ns);

int seg_index_add(seg_index *x, uint64_t off, const uint8_t id[16], int64_t time_ns) {
  if ((x->n == 0 || x->blocks[x->n - 1].count == INDEX_BLOCK ||
       x->blocks[x->n - 1].flags & IDX_FLAG_BLOCK) &&
      entry_new(x, off, 0) < 0)
    return -1;
  entry_add(x, id, time_ns);
  return 0;
}

int seg_index_add_block(seg_index *x, uint64_t off, const uint8_t id[16], int64_t time_ns) {
  if ((x->n == 0 || !(x->blocks[x->n - 1].flags & IDX_FLAG_BLOCK) ||
       x->blocks[x->n - 1].off != off) &&
      entry_new(x, off, IDX_FLAG_BLOCK) < 0)
    return -1;
  entry_add(x, id, time_ns);
  return 0;
}

int seg_index_add_entry(seg_index *x, const idx_block *e, uint64_t off) {
  if (entry_new(x, off, e->flags) < 0) return -1;
  idx_block *b = &x->blocks[x->n - 1];
  *b = *e;
  b->off = off;
  range_add(x->min_id, x->max_id, &x->min_time, &x->max_time, x->records == 0, e->min_id,
            e->min_time);
  range_add(x->min_id, x->max_id, &x->min_time, &x->max_time, 0, e->max_id, e->max_time);
  x->records += e->count;
  return 0;
}

int seg_index_add_scanned(seg_index *x, const frame_scan *s, const uint8_t *body) {
  return s->in_block ? seg_index_add_block(x, s->frame_off, body, rec_body_time(body))
                     : seg_index_add(x, s->frame_off, body, rec_body_time(body));
}

uint64_t seg_index_raw_bytes(const seg_index *x) {
  /* Entries are in file order: the bytes from each ordinary entry to the
   * next entry (or the end) are ordinary frames. */
  uint64_t raw = 0;
  for (size_t i = 0; i < x->n; i++) {
    if (x->blocks[i].flags & IDX_FLAG_BLOCK) continue;
    uint64_t end = i + 1 < x->n ? x->blocks[i + 1].off : x->seg_size;
    if (end > x->blocks[i].off) raw += end - x->blocks[i].off;
  }
  return raw;
}

static void entry_add(seg_index *x, const uint8_t id[16], int64_t time_ns) {
  idx_block *b = &x->blocks[x->n - 1];
  range_add(b->min_id, b->max_id, &b->min_time, &b->max_time, b->count == 0, id, time_ns);
  range_add(x->min_id, x->max_id, &x->min_time, &x->max_time, x->records == 0, id, time_ns);
  b->count++;
  x->records++;
}

/* The index file's bytes (malloc'd), its size in *size. */
static uint8_t *index_encode(const seg_index *x, size_t *size_out) {
  size_t size = IDX_HEADER + x->n * IDX_ENTRY + 4;
  uint8_t *b = calloc(1, size);
  if (!b) {
    errno = ENOMEM;
    return NULL;
  }
  memcpy(b, IDX_MAGIC, 6);
  put_le16(b + 6, IDX_VERSION);
  put_le32(b + 8, INDEX_BLOCK);
  put_le32(b + 12, (uint32_t)x->n);
  put_le64(b + 16, x->seg_size);
  put_le32(b + 24, x->seg_crc);
  put_le64(b + 32, x->records);
  memcpy(b + 40, x->min_id, 16);
  memcpy(b + 56, x->max_id, 16);
  put_le64(b + 72, (uint64_t)x->min_time);
  put_le64(b + 80, (uint64_t)x->max_time);
  for (size_t i = 0; i < x->n; i++) {
    uint8_t *e = b + IDX_HEADER + i * IDX_ENTRY;
    const idx_block *k = &x->blocks[i];
    put_le64(e, k->off);
    put_le32(e + 8, k->count);
    put_le32(e + 12, k->flags);
    memcpy(e + 16, k->min_id, 16);
    memcpy(e + 32, k->max_id, 16);
    put_le64(e + 48, (uint64_t)k->min_time);
    put_le64(e + 56, (uint64_t)k->max_time);
  }
  put_le32(b + size - 4, snapshot_crc32c(0, b, size - 4));
  *size_out = size;
  return b;
}

int seg_index_write_over(const char *path, const seg_index *x) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return seg_index_write(path, x);
  size_t size;
  uint8_t *b = index_encode(x, &size);
  struct stat st;
  int rc = b ? write_full(fd, b, size, 0) : -1;
  if (rc == 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size > size)
    rc = ftruncate(fd, (off_t)size);
  int saved = errno;
  close(fd);
  free(b);
  if (rc < 0) {
    unlink(path); /* whatever is left there fails its checks anyway */
    errno = saved;
  }
  return rc < 0 ? -1 : 0;
}

int seg_index_write(const char *path, const seg_index *x) {
  size_t size;
  uint8_t *b = index_encode(x, &size);
  if (!b) return -1;

  /* A unique temporary name: a reader, gc and the writer may all rebuild
   * the same index at once. */
  char tmp[4096];
  int w = snprintf(tmp, sizeof tmp, "%s.tmpXXXXXX", path);
  if (w < 0 || (size_t)w >= sizeof tmp) {
    free(b);
    errno = ENAMETOOLONG;
    return -1;
  }
  int fd = mkstemp(tmp);
  if (fd < 0) {
    free(b);
    return -1;
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  fchmod(fd, 0640);
  int rc = write_full(fd, b, size, 0);
  int saved = errno;
  close(fd);
  free(b);
  /* Unlink the old index first: on ext4, a rename that replaces an existing
   * file forces the new file's data out to disk (auto_da_alloc), which made
   * this rename cost 1.5-3.5 ms where a rename to a free name costs ~0.1 ms,
   * in every run of the one-shot `verdict hook`. Between the two calls the
   * index is missing, which readers handle as always: they rebuild it from
   * the segment. */
  if (rc == 0) unlink(path);
  if (rc == 0 && rename(tmp, path) == 0) return 0;
  saved = errno ? errno : saved;
  unlink(tmp);
  errno = saved;
  return -1;
}

int seg_index_decode(const uint8_t *b, size_t size, uint64_t seg_size, uint32_t seg_crc,
                     seg_index *x) {
  if (size < IDX_HEADER + 4 || memcmp(b, IDX_MAGIC, 6) != 0 || get_le16(b + 6) != IDX_VERSION ||
      get_le32(b + 8) != INDEX_BLOCK ||
      IDX_HEADER + (uint64_t)get_le32(b + 12) * IDX_ENTRY + 4 != size ||
      get_le32(b + size - 4) != snapshot_crc32c(0, b, size - 4) || get_le64(b + 16) != seg_size ||
      get_le32(b + 24) != seg_crc)
    return -1;
  size_t n = get_le32(b + 12);
  idx_block *blocks = n ? malloc(n * sizeof *blocks) : NULL;
  if (n && !blocks) return -1;
  seg_index_free(x);
  x->seg_size = seg_size;
  x->seg_crc = seg_crc;
  x->records = get_le64(b + 32);
  memcpy(x->min_id, b + 40, 16);
  memcpy(x->max_id, b + 56, 16);
  x->min_time = (int64_t)get_le64(b + 72);
  x->max_time = (int64_t)get_le64(b + 80);
  for (size_t i = 0; i < n; i++) {
    const uint8_t *e = b + IDX_HEADER + i * IDX_ENTRY;
    idx_block *k = &blocks[i];
    k->off = get_le64(e);
    k->count = get_le32(e + 8);
    k->flags = get_le32(e + 12) & IDX_FLAG_BLOCK;
    memcpy(k->min_id, e + 16, 16);
    memcpy(k->max_id, e + 32, 16);
    k->min_time = (int64_t)get_le64(e + 48);
    k->max_time = (int64_t)get_le64(e + 56);
  }
  x->blocks = blocks;
  x->n = x->cap = n;
  return 0;
}

int seg_index_read(const char *path, uint64_t seg_size, uint32_t seg_crc, seg_index *x) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  uint8_t *b = NULL;
  int ok = 0;
  if (fstat(fd, &st) == 0 && st.st_size >= IDX_HEADER + 4 && st.st_size < (1 << 28)) {
    size_t size = (size_t)st.st_size;
    b = malloc(size);
    ok =
        b && read_full(fd, b, size, 0) == 0 && seg_index_decode(b, size, seg_size, seg_crc, x) == 0;
  }
  free(b);
  close(fd);
  return ok ? 0 : -1;
}

uint8_t *seg_index_encode(const seg_index *x, size_t *size) { return index_encode(x, size); }

static int id_in(const uint8_t id[16], const uint8_t lo[16], const uint8_t hi[16]) {
  return memcmp(id, lo, 16) >= 0 && memcmp(id, hi, 16) <= 0;
}

int seg_find(frame_scan *s, const seg_index *x, const uint8_t id[16], const uint8_t **body,
             uint32_t *len) {
  if (x->records == 0 || !id_in(id, x->min_id, x->max_id)) return 0;
  for (size_t b = 0; b < x->n; b++) {
    if (!id_in(id, x->blocks[b].min_id, x->blocks[b].max_id)) continue;
    frame_scan_seek(s, x->blocks[b].off);
    for (uint32_t i = 0; i < x->blocks[b].count; i++) {
      int k = frame_scan_next(s, body, len);
      if (k < 0) return -1;
      if (k == 0) break;
      snapshot_rec rec;
      if (memcmp(*body, id, 16) == 0 && rec_body_decode(*body, *len, &rec) == 0) return 1;
    }
  }
  return 0;
}

int seg_open_indexed(const char *dir, const char *name, int write_back, seg_header *hdr,
                     seg_index *x, uint64_t *size, char *err, size_t errlen) {
  char path[4096], ipath[4096];
  if (seg_path(path, sizeof path, dir, name, 0) < 0 ||
      seg_path(ipath, sizeof ipath, dir, name, 1) < 0) {
    if (err) snprintf(err, errlen, "%s/%s: path too long", dir, name);
    return -1;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (err) snprintf(err, errlen, "open %s: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  uint8_t hb[SEG_HEADER_MAX];
  seg_header h;
  if (fstat(fd, &st) < 0) {
    if (err) snprintf(err, errlen, "stat %s: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  uint64_t fsize = (uint64_t)st.st_size;
  size_t hn = fsize < SEG_HEADER_MAX ? (size_t)fsize : SEG_HEADER_MAX;
  int hr = hn ? (read_full(fd, hb, hn, 0) == 0 ? seg_header_decode(hb, hn, &h) : -1) : 1;
  if (hr != 0) {
    if (hr > 0) {
      close(fd);
      return -2;
    }
    if (err && hr == -2)
      snprintf(err, errlen,
               "%s has snapshot format version %u; this verdict reads versions %d to %d", path,
               (unsigned)h.version, SEG_VERSION_MIN, SEG_VERSION);
    else if (err)
      snprintf(err, errlen, "%s: not a snapshot segment (bad header)", path);
    close(fd);
    return -1;
  }
  if (hdr) *hdr = h;
  *size = fsize;
  if (seg_index_read(ipath, fsize, h.crc, x) == 0) return fd;

  seg_index_reset(x);
  frame_scan s;
  if (frame_scan_init(&s, fd, h.header_len, fsize) < 0) {
    if (err) snprintf(err, errlen, "%s: out of memory", path);
    close(fd);
    return -1;
  }
  const uint8_t *body;
  uint32_t len;
  int r;
  while ((r = frame_scan_next(&s, &body, &len)) == 1) {
    if (seg_index_add_scanned(x, &s, body) < 0) {
      s.err = ENOMEM;
      r = -1;
      break;
    }
  }
  if (r < 0) {
    if (err) snprintf(err, errlen, "read %s: %s", path, strerror(s.err));
    frame_scan_free(&s);
    close(fd);
    return -1;
  }
  x->seg_size = s.torn ? s.tail_off : fsize;
  x->seg_crc = h.crc;
  /* Save the rebuilt index only for a sealed segment: complete, and not held
   * by a writer (an active segment keeps growing; its index comes at seal). */
  if (write_back && !s.torn && flock(fd, LOCK_SH | LOCK_NB) == 0) {
    seg_index_write(ipath, x); /* best effort: a read-only directory is fine */
    flock(fd, LOCK_UN);
  }
  frame_scan_free(&s);
  return fd;
}
