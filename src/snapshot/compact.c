/* compact.c — compressed blocks: gathering a segment's records into blocks
 * of about block_bytes raw bytes, each compressed with zstd on its own, so
 * that one record is read back by decompressing one block.
 *
 * When: the writer appends ordinary frames, exactly as before compression
 * existed (so durability, group commit, the cut-back of a failed write and
 * recovery's torn-tail cut see the frames they always saw), and compacts a
 * segment when it seals it: always at rotation, and at close when the
 * segment holds at least one block's worth of ordinary frames (a one-shot
 * process appending one record does not rewrite the segment each time). gc
 * writes its rewrites through the same builder.
 *
 * How a compaction stays safe: the segment is rewritten whole into
 * <name>.ztmp (blocks already compressed are copied as they are; the header
 * is the same but for its version), fsynced, then renamed over the segment
 * and the directory synced. Until the rename the old file is complete and
 * valid; after it the new one is, and it holds every record of the old one.
 * A reader that had the old file open keeps reading it. A crash leaves at
 * worst a .ztmp, which the next writer removes. The rewrite runs while the
 * segment's lock is held, so gc leaves it alone meanwhile. A damaged segment
 * is not compacted: its damaged spans stay where a person can look at them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>
#include <zstd.h>

#include "snapshot/internal.h"

int segb_init(seg_builder *b, int fd, uint64_t off, int level, size_t block_bytes, seg_index *x) {
  memset(b, 0, sizeof *b);
  b->fd = fd;
  b->off = off;
  b->level = level;
  b->block_bytes = block_bytes ? block_bytes : SNAPSHOT_BLOCK_DEFAULT;
  if (b->block_bytes > SNAPSHOT_BLOCK_MAX) b->block_bytes = SNAPSHOT_BLOCK_MAX;
  b->x = x;
  return 0;
}

void segb_free(seg_builder *b) {
  free(b->raw);
  free(b->ids);
  free(b->times);
  free(b->z);
  ZSTD_freeCCtx(b->cctx);
  memset(b, 0, sizeof *b);
  b->fd = -1;
}

static int fail(seg_builder *b, int e) {
  if (!b->err) b->err = e;
  errno = b->err;
  return -1;
}

static int grow(void **p, size_t *cap, size_t need, size_t unit) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *n = realloc(*p, c * unit);
  if (!n) return -1;
  *p = n;
  *cap = c;
  return 0;
}

int segb_flush(seg_builder *b) {
  if (b->err) return fail(b, b->err);
  if (b->raw_n == 0) return 0;
  size_t bound = ZSTD_compressBound(b->raw_len);
  size_t zcap = b->z_cap;
  void *z = b->z;
  if (grow(&z, &zcap, FRAME_HEADER + BLOCK_FIXED + bound, 1) < 0) return fail(b, ENOMEM);
  b->z = z;
  b->z_cap = zcap;
  if (!b->cctx && !(b->cctx = ZSTD_createCCtx())) return fail(b, ENOMEM);
  size_t n = ZSTD_compressCCtx(b->cctx, b->z + FRAME_HEADER + BLOCK_FIXED, bound, b->raw,
                               b->raw_len, b->level);
  if (ZSTD_isError(n)) return fail(b, EIO);
  uint32_t body = (uint32_t)(BLOCK_FIXED + n);
  if (body > BLOCK_LEN_MASK) return fail(b, EFBIG); /* cannot happen: blocks hold <= 25 MiB raw */
  put_le32(b->z, BLOCK_TAG | body);
  put_le32(b->z + FRAME_HEADER, b->raw_n);
  put_le32(b->z + FRAME_HEADER + 4, (uint32_t)b->raw_len);
  put_le32(b->z + 4, snapshot_crc32c(0, b->z + FRAME_HEADER, body));
  if (b->fd >= 0 && write_full(b->fd, b->z, FRAME_HEADER + (size_t)body, b->off) < 0)
    return fail(b, errno);
  for (uint32_t i = 0; i < b->raw_n; i++)
    if (b->x && seg_index_add_block(b->x, b->off, b->ids + 16 * (size_t)i, b->times[i]) < 0)
      return fail(b, ENOMEM);
  b->off += FRAME_HEADER + (uint64_t)body;
  b->raw_len = 0;
  b->raw_n = 0;
  return 0;
}

int segb_frame(seg_builder *b, const uint8_t *frame, size_t len, const uint8_t id[16], int64_t t) {
  if (b->err) return fail(b, b->err);
  if (b->level == 0) { /* uncompressed: the frame as it is */
    if (b->fd >= 0 && write_full(b->fd, frame, len, b->off) < 0) return fail(b, errno);
    if (b->x && seg_index_add(b->x, b->off, id, t) < 0) return fail(b, ENOMEM);
    b->off += len;
    return 0;
  }
  if (b->raw_n && b->raw_len + len > b->block_bytes && segb_flush(b) < 0) return -1;
  void *raw = b->raw, *ids = b->ids, *times = b->times;
  size_t ids_cap = b->ids_cap, times_cap = b->ids_cap;
  if (grow(&raw, &b->raw_cap, b->raw_len + len, 1) < 0) return fail(b, ENOMEM);
  b->raw = raw;
  if (grow(&ids, &ids_cap, (size_t)b->raw_n + 1, 16) < 0) return fail(b, ENOMEM);
  b->ids = ids;
  if (grow(&times, &times_cap, (size_t)b->raw_n + 1, sizeof(int64_t)) < 0) return fail(b, ENOMEM);
  b->times = times;
  b->ids_cap = ids_cap < times_cap ? ids_cap : times_cap;
  memcpy(b->raw + b->raw_len, frame, len);
  memcpy(b->ids + 16 * (size_t)b->raw_n, id, 16);
  b->times[b->raw_n] = t;
  b->raw_len += len;
  b->raw_n++;
  if (b->raw_len >= b->block_bytes) return segb_flush(b);
  return 0;
}

/* Copies file bytes [from, from + n) of in to out at *at. */
static int copy_range(int in, uint64_t from, uint64_t n, int out, uint64_t at) {
  uint8_t buf[65536];
  while (n > 0) {
    size_t k = n < sizeof buf ? (size_t)n : sizeof buf;
    if (read_full(in, buf, k, from) < 0 || write_full(out, buf, k, at) < 0) return -1;
    from += k;
    at += k;
    n -= k;
  }
  return 0;
}

int seg_compact(const char *dir, const char *name, int fd, const seg_header *h,
                const seg_index *cur, int level, size_t block_bytes, seg_index *x,
                uint64_t *new_size) {
  /* The writer's index says where the blocks and the plain frames are: the
   * blocks are copied as they are (never decompressed), only plain frames
   * are read, checked and compressed. */
  if (cur->n == 0 || cur->blocks[0].off != h->header_len || seg_index_raw_bytes(cur) == 0) return 1;
  char path[4096], tmp[4200];
  if (seg_path(path, sizeof path, dir, name, 0) < 0) {
    errno = ENAMETOOLONG;
    return -1;
  }
  snprintf(tmp, sizeof tmp, "%s.ztmp", path);
  int out = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (out < 0) return -1;
  seg_header nh = *h;
  uint8_t hb[SEG_HEADER_MAX];
  size_t hlen = seg_header_encode(&nh, hb);
  seg_index_reset(x);
  seg_builder b;
  segb_init(&b, out, hlen, level, block_bytes, x);
  int rc = write_full(out, hb, hlen, 0), skip = 0;
  for (size_t i = 0; rc == 0 && !skip && i < cur->n; i++) {
    const idx_block *e = &cur->blocks[i];
    uint64_t end = i + 1 < cur->n ? cur->blocks[i + 1].off : cur->seg_size;
    if (end < e->off) {
      skip = 1;
      break;
    }
    if (e->flags & IDX_FLAG_BLOCK) {
      rc = segb_flush(&b);
      if (rc == 0) rc = copy_range(fd, e->off, end - e->off, out, b.off);
      if (rc == 0 && seg_index_add_entry(x, e, b.off) < 0) {
        errno = ENOMEM;
        rc = -1;
      }
      b.off += end - e->off;
      continue;
    }
    frame_scan s;
    if (frame_scan_init(&s, fd, e->off, end) < 0) {
      errno = ENOMEM;
      rc = -1;
      break;
    }
    const uint8_t *body;
    uint32_t len;
    int k;
    uint32_t got = 0;
    while (rc == 0 && (k = frame_scan_next(&s, &body, &len)) == 1) {
      if (s.in_block) { /* the index called it plain: do not trust it */
        skip = 1;
        break;
      }
      rc = segb_frame(&b, body - FRAME_HEADER, FRAME_HEADER + (size_t)len, body,
                      rec_body_time(body));
      got++;
    }
    if (rc == 0 && k < 0) {
      errno = s.err;
      rc = -1;
    }
    if (s.damaged_regions || s.torn || got != e->count) skip = 1; /* not what the index says */
    frame_scan_free(&s);
  }
  if (rc == 0 && !skip) rc = segb_flush(&b);
  if (rc == 0 && !skip) rc = fsync(out);
  if (rc == 0 && !skip) rc = rename(tmp, path);
  int e = errno;
  if (rc == 0 && !skip) {
    dir_sync(dir);
    x->seg_size = b.off;
    x->seg_crc = nh.crc;
    *new_size = b.off;
  } else {
    unlink(tmp);
  }
  segb_free(&b);
  close(out);
  errno = e;
  return rc < 0 ? -1 : skip ? 1 : 0;
}
