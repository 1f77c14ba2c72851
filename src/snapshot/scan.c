/* scan.c — walking the frames of a segment, trusting nothing.
 *
 * Every frame is checked before it is returned: its length is in range and
 * inside the file, its CRC32C matches, and its body decodes. A frame that
 * fails is either the torn tail a crash left (the usual case: a batch cut off
 * mid-write) or damage in the middle (a bad sector, a stray write). The two
 * are told apart by looking for a valid frame after the bad spot, byte by
 * byte: finding one means damage — the span is counted and skipped, and the
 * frames after it are still returned, so one bad sector never costs the
 * records behind it — finding none means a torn tail, whose start the writer
 * cuts on recovery. A JSON payload cannot fake a frame (the fourth byte of
 * any valid frame length is 0 or 1, control bytes JSON text never contains),
 * and a false match also needs a 32-bit CRC to agree by chance and the body
 * to decode.
 *
 * Reads go through one buffer with pread (no file position, so a reader can
 * share nothing with anyone); the buffer grows only for frames bigger than it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "snapshot/internal.h"

#define SCAN_BUF 262144

static int rec_body_ok(const uint8_t *body, uint32_t len) {
  snapshot_rec rec;
  return rec_body_decode(body, len, &rec) == 0;
}

int frame_scan_init(frame_scan *s, int fd, uint64_t start, uint64_t end) {
  memset(s, 0, sizeof *s);
  s->fd = fd;
  s->off = start;
  s->end = end;
  s->tail_off = end;
  s->min_body = BODY_FIXED;
  s->max_body = (uint32_t)BODY_MAX;
  s->body_ok = rec_body_ok;
  s->blocks = 1;
  s->buf_cap = SCAN_BUF;
  s->buf = malloc(s->buf_cap);
  return s->buf ? 0 : -1;
}

void frame_scan_init_mem(frame_scan *s, const uint8_t *mem, uint64_t start, uint64_t end) {
  memset(s, 0, sizeof *s);
  s->fd = -1;
  s->mem = mem;
  s->off = start;
  s->end = end;
  s->tail_off = end;
  s->min_body = BODY_FIXED;
  s->max_body = (uint32_t)BODY_MAX;
  s->body_ok = rec_body_ok;
  s->blocks = 1;
}

void frame_scan_seek(frame_scan *s, uint64_t off) {
  s->off = off;
  s->torn = 0;
  s->tail_off = s->end;
  s->in_block = 0;
}

void frame_scan_free(frame_scan *s) {
  free(s->buf);
  s->buf = NULL;
  free(s->raw);
  s->raw = NULL;
  ZSTD_freeDCtx(s->dctx);
  s->dctx = NULL;
}

/* Makes file bytes [off, off + n) available; NULL when they are not all in
 * the file (or a read failed: s->err set). */
static const uint8_t *scan_ensure(frame_scan *s, uint64_t off, size_t n) {
  if (off + n > s->end) return NULL;
  if (s->mem) return s->mem + off;
  if (off >= s->buf_off && off + n <= s->buf_off + s->buf_len) return s->buf + (off - s->buf_off);
  if (n > s->buf_cap) {
    size_t cap = s->buf_cap;
    while (cap < n) cap *= 2;
    uint8_t *nb = realloc(s->buf, cap);
    if (!nb) {
      s->err = ENOMEM;
      return NULL;
    }
    s->buf = nb;
    s->buf_cap = cap;
  }
  size_t keep = 0;
  if (off >= s->buf_off && off < s->buf_off + s->buf_len) {
    keep = (size_t)(s->buf_off + s->buf_len - off);
    memmove(s->buf, s->buf + (off - s->buf_off), keep);
  }
  s->buf_off = off;
  s->buf_len = keep;
  uint64_t want = s->end - off;
  if (want > s->buf_cap) want = s->buf_cap;
  while (s->buf_len < want) {
    ssize_t got =
        pread(s->fd, s->buf + s->buf_len, (size_t)want - s->buf_len, (off_t)(off + s->buf_len));
    if (got < 0) {
      if (errno == EINTR) continue;
      s->err = errno;
      return NULL;
    }
    if (got == 0) { /* the file shrank under us (a writer cut a failed write) */
      s->end = off + s->buf_len;
      break;
    }
    s->buf_len += (size_t)got;
  }
  return s->buf_len >= n ? s->buf : NULL;
}

/* An ordinary frame at p (avail bytes there): its body length, or 0 when it
 * is not a valid one. */
static uint32_t plain_frame(const uint8_t *p, size_t avail) {
  if (avail < FRAME_HEADER) return 0;
  uint32_t n = get_le32(p);
  if (n < BODY_FIXED || n > BODY_MAX || n > avail - FRAME_HEADER) return 0;
  if (snapshot_crc32c(0, p + FRAME_HEADER, n) != get_le32(p + 4)) return 0;
  snapshot_rec rec;
  return rec_body_decode(p + FRAME_HEADER, n, &rec) == 0 ? n : 0;
}

/* The block frame at off (body length n, CRC already checked) decompressed
 * into s->raw and checked whole: exactly its count of valid ordinary frames,
 * filling exactly its raw length. 1 valid, 0 not, -1 out of memory. */
static int block_open(frame_scan *s, const uint8_t *body, uint32_t n) {
  if (n < BLOCK_FIXED) return 0;
  uint32_t records = get_le32(body), raw_len = get_le32(body + 4);
  if (records == 0 || raw_len < (uint64_t)records * (FRAME_HEADER + BODY_FIXED) ||
      raw_len > BLOCK_RAW_MAX)
    return 0;
  /* The zstd frame must say its size, and say this one: a hostile block
   * cannot make us allocate more than it claims, nor claim more than 8 MiB
   * past the biggest frame. */
  unsigned long long said = ZSTD_getFrameContentSize(body + BLOCK_FIXED, n - BLOCK_FIXED);
  if (said != raw_len) return 0;
  if (raw_len > s->raw_cap) {
    size_t cap = s->raw_cap ? s->raw_cap : 1 << 16;
    while (cap < raw_len) cap *= 2;
    uint8_t *nb = realloc(s->raw, cap);
    if (!nb) {
      s->err = ENOMEM;
      return -1;
    }
    s->raw = nb;
    s->raw_cap = cap;
  }
  if (!s->dctx && !(s->dctx = ZSTD_createDCtx())) {
    s->err = ENOMEM;
    return -1;
  }
  size_t got = ZSTD_decompressDCtx(s->dctx, s->raw, raw_len, body + BLOCK_FIXED, n - BLOCK_FIXED);
  if (ZSTD_isError(got) || got != raw_len) return 0;
  size_t pos = 0;
  for (uint32_t i = 0; i < records; i++) {
    uint32_t k = plain_frame(s->raw + pos, raw_len - pos);
    if (!k) return 0;
    pos += FRAME_HEADER + (size_t)k;
  }
  if (pos != raw_len) return 0;
  s->raw_len = raw_len;
  s->raw_pos = 0;
  return 1;
}

/* The next record of the open block into body/len. */
static void block_next(frame_scan *s, const uint8_t **body, uint32_t *len) {
  const uint8_t *p = s->raw + s->raw_pos;
  *len = get_le32(p);
  *body = p + FRAME_HEADER;
  s->raw_pos += FRAME_HEADER + (size_t)*len;
}

/* 1 a valid frame at off, 2 a valid block (opened: s->raw), 0 not, -1 read error. */
static int frame_at(frame_scan *s, uint64_t off, const uint8_t **body, uint32_t *len) {
  const uint8_t *h = scan_ensure(s, off, FRAME_HEADER);
  if (!h) return s->err ? -1 : 0;
  uint32_t n = get_le32(h), crc = get_le32(h + 4);
  if (s->blocks && (n & ~BLOCK_LEN_MASK) == BLOCK_TAG) {
    n &= BLOCK_LEN_MASK;
    if (n < BLOCK_FIXED || off + FRAME_HEADER + n > s->end) return 0;
    const uint8_t *f = scan_ensure(s, off, FRAME_HEADER + (size_t)n);
    if (!f) return s->err ? -1 : 0;
    if (snapshot_crc32c(0, f + FRAME_HEADER, n) != crc) return 0;
    int r = block_open(s, f + FRAME_HEADER, n);
    if (r <= 0) return r;
    *len = n;
    return 2;
  }
  if (n < s->min_body || n > s->max_body || off + FRAME_HEADER + n > s->end) return 0;
  const uint8_t *f = scan_ensure(s, off, FRAME_HEADER + (size_t)n);
  if (!f) return s->err ? -1 : 0;
  if (snapshot_crc32c(0, f + FRAME_HEADER, n) != crc) return 0;
  if (!s->body_ok(f + FRAME_HEADER, n)) return 0;
  *body = f + FRAME_HEADER;
  *len = n;
  return 1;
}

/* The first i < win where w[i..i+3] could be a length word (its fourth byte
 * 0, 1 or 2), or win. Left out of a fuzzer's coverage counting: the loop has
 * no path to find, and counting every byte made the snapshot fuzz target
 * spend most of its time here. */
#if defined(__clang__)
__attribute__((noinline, no_sanitize("coverage")))
#endif
static size_t
skip_to_length(const uint8_t *w, size_t win) {
  size_t i = 0;
  while (i < win && w[i + 3] > 2) i++;
  return i;
}

int frame_scan_next(frame_scan *s, const uint8_t **body, uint32_t *len) {
  if (s->in_block) {
    if (s->raw_pos < s->raw_len) {
      block_next(s, body, len);
      s->blk_index++;
      return 1;
    }
    s->in_block = 0;
    s->off = s->blk_next;
  }
  if (s->off >= s->end) return 0;
  int r = frame_at(s, s->off, body, len);
  if (r < 0) return -1;
  if (r == 0) {
    uint64_t bad = s->off, p = bad + 1;
    /* the smallest frame this scan accepts: a block's fixed part or a body */
    uint32_t least = s->blocks && BLOCK_FIXED < s->min_body ? BLOCK_FIXED : s->min_body;
    while (p + FRAME_HEADER + least <= s->end) {
      /* A length word's fourth byte is 0 or 1 (a frame) or 2 (a block):
       * most bytes of a damaged span (JSON text) are ruled out by it alone,
       * a window of the buffer at a time. */
      uint64_t left = s->end - p - (FRAME_HEADER + least) + 1; /* candidates */
      size_t win = left < SCAN_BUF - 3 ? (size_t)left : SCAN_BUF - 3;
      const uint8_t *w = scan_ensure(s, p, win + 3);
      if (!w) {
        if (s->err) return -1;
        break;
      }
      size_t i = skip_to_length(w, win);
      p += i;
      if (i == win) continue;
      r = frame_at(s, p, body, len);
      if (r < 0) return -1;
      if (r > 0) {
        s->damaged_regions++;
        s->damaged_bytes += p - bad;
        s->off = p;
        break;
      }
      p++;
    }
    if (r == 0) {
      s->torn = 1;
      s->tail_off = bad;
      s->off = s->end;
      return 0;
    }
  }
  s->frame_off = s->off;
  s->off += FRAME_HEADER + (uint64_t)*len;
  if (r == 2) { /* a block: its records one by one, from the first */
    s->in_block = 1;
    s->blk_index = 0;
    s->blk_next = s->off;
    s->blk_frame = FRAME_HEADER + *len;
    block_next(s, body, len);
  }
  return 1;
}

uint64_t frame_count_tail(int fd, uint64_t off, uint64_t end) {
  uint64_t count = 0;
  while (off < end) {
    uint8_t h[FRAME_HEADER + BLOCK_FIXED];
    if (off + 4 > end || read_full(fd, h, 4, off) < 0) {
      count++;
      break;
    }
    uint32_t n = get_le32(h);
    if ((n & ~BLOCK_LEN_MASK) == BLOCK_TAG && off + sizeof h <= end &&
        read_full(fd, h, sizeof h, off) == 0) {
      uint32_t recs = get_le32(h + FRAME_HEADER);
      count += recs ? recs : 1;
      off += FRAME_HEADER + (uint64_t)(n & BLOCK_LEN_MASK);
      continue;
    }
    count++;
    if (n < BODY_FIXED || n > BODY_MAX) break;
    off += FRAME_HEADER + (uint64_t)n;
  }
  return count;
}
