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
  s->buf_cap = SCAN_BUF;
  s->buf = malloc(s->buf_cap);
  return s->buf ? 0 : -1;
}

void frame_scan_seek(frame_scan *s, uint64_t off) {
  s->off = off;
  s->torn = 0;
  s->tail_off = s->end;
}

void frame_scan_free(frame_scan *s) {
  free(s->buf);
  s->buf = NULL;
}

/* Makes file bytes [off, off + n) available; NULL when they are not all in
 * the file (or a read failed: s->err set). */
static const uint8_t *scan_ensure(frame_scan *s, uint64_t off, size_t n) {
  if (off + n > s->end) return NULL;
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

/* 1 a valid frame at off, 0 not, -1 read error. */
static int frame_at(frame_scan *s, uint64_t off, const uint8_t **body, uint32_t *len) {
  const uint8_t *h = scan_ensure(s, off, FRAME_HEADER);
  if (!h) return s->err ? -1 : 0;
  uint32_t n = get_le32(h), crc = get_le32(h + 4);
  if (n < s->min_body || n > s->max_body || off + FRAME_HEADER + n > s->end) return 0;
  const uint8_t *f = scan_ensure(s, off, FRAME_HEADER + (size_t)n);
  if (!f) return s->err ? -1 : 0;
  if (snapshot_crc32c(0, f + FRAME_HEADER, n) != crc) return 0;
  if (!s->body_ok(f + FRAME_HEADER, n)) return 0;
  *body = f + FRAME_HEADER;
  *len = n;
  return 1;
}

int frame_scan_next(frame_scan *s, const uint8_t **body, uint32_t *len) {
  if (s->off >= s->end) return 0;
  int r = frame_at(s, s->off, body, len);
  if (r < 0) return -1;
  if (r == 0) {
    uint64_t bad = s->off;
    for (uint64_t p = bad + 1; p + FRAME_HEADER + s->min_body <= s->end; p++) {
      r = frame_at(s, p, body, len);
      if (r < 0) return -1;
      if (r == 1) {
        s->damaged_regions++;
        s->damaged_bytes += p - bad;
        s->off = p;
        break;
      }
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
  return 1;
}

uint64_t frame_count_tail(int fd, uint64_t off, uint64_t end) {
  uint64_t count = 0;
  while (off < end) {
    count++;
    uint8_t h[4];
    if (off + 4 > end || read_full(fd, h, 4, off) < 0) break;
    uint32_t n = get_le32(h);
    if (n < BODY_FIXED || n > BODY_MAX) break;
    off += FRAME_HEADER + (uint64_t)n;
  }
  return count;
}
