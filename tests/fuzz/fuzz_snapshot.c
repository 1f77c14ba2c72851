/* fuzz_snapshot.c — the snapshot segment reader on a hostile segment, in
 * memory: no file is written or opened per input (the reader's parsing —
 * header, frames, compressed blocks, record bodies, the index — reads file
 * bytes through frame_scan, which scans a buffer as readily as a file).
 * The first input byte picks the form of the rest (its low two bits):
 *   0: the rest is the segment file, byte for byte (headers, frames, blocks
 *      and CRCs as given: damage and torn tails);
 *   1: the rest is turned into a well-formed segment, so that the fuzzer
 *      reaches the record decoder past the CRC checks: a header (first id
 *      from the input), then chunks of [u16 length][body], each framed with
 *      its length and correct CRC32C; bytes left over are appended raw (a
 *      torn tail);
 *   2: the same chunks, gathered into compressed blocks (a chunk whose body
 *      starts with 0xff closes the block before it), each a valid zstd frame
 *      with a correct block CRC, so the fuzzer reaches the block checks past
 *      the CRC and the records inside past decompression;
 *   3: [u16 n] then n bytes of an index file, then the segment file as in 0:
 *      the index decoder on hostile bytes, and lookups through whatever it
 *      accepts.
 * Then, as the reader does: the header is decoded, the frames scanned to the
 * end (the index built from them, as recovery and seg_open_indexed build
 * it), the index written and read back, the segment read again through the
 * index with a time filter (block by block), and ids read looked up by id
 * (seg_find, the reader's lookup): four of them, spread. Checks: no crash, leak, UB or hang;
 * every record returned has fields within the format's limits; every id
 * looked up is found. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "fuzz.h"
#include "snapshot/internal.h"

/* zstd's contexts, made once: a compression context and a decompression
 * context are each some hundred kilobytes that zstd allocates and clears
 * when it makes them, and making both for every input was most of the
 * target's time (the allocator's mmap and munmap, the clearing). The
 * reader's context is lent to each scan and taken back before it is freed;
 * the buffers whose bounds the sanitizer checks are still the scan's own. */
static ZSTD_CCtx *cctx;
static ZSTD_DCtx *dctx;

/* The structured forms are built in two buffers kept from input to input
 * (bounds several times the input's size: fresh, they were mapped and
 * unmapped by the allocator for every input); only the target writes them. */
static uint8_t *out_buf, *raw_buf;
static size_t out_cap, raw_cap;

static uint8_t *scratch(uint8_t **buf, size_t *cap, size_t need) {
  if (need > *cap) {
    uint8_t *nb = realloc(*buf, need);
    if (!nb) return NULL;
    *buf = nb;
    *cap = need;
  }
  return *buf;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  cctx = ZSTD_createCCtx();
  dctx = ZSTD_createDCtx();
  return cctx && dctx ? 0 : -1;
}

/* A segment header into out; the first id from in when there are 16 bytes. */
static size_t header(const uint8_t **in, size_t *n, uint8_t *out) {
  seg_header h;
  memset(&h, 0, sizeof h);
  h.day = 20260101;
  if (*n >= 16) {
    memcpy(h.first_id, *in, 16);
    *in += 16;
    *n -= 16;
  }
  h.created_ns = (int64_t)1767225600 * 1000000000;
  h.node_len = 4;
  memcpy(h.node, "fuzz", 4);
  return seg_header_encode(&h, out);
}

/* Writes the gathered frames raw[0..raw_len) (count of them) as a block. */
static size_t block(const uint8_t *raw, size_t raw_len, uint32_t count, uint8_t *out) {
  size_t z = ZSTD_compressCCtx(cctx, out + FRAME_HEADER + BLOCK_FIXED, ZSTD_compressBound(raw_len),
                               raw, raw_len, 1);
  if (ZSTD_isError(z)) return 0;
  uint32_t body = (uint32_t)(BLOCK_FIXED + z);
  put_le32(out, BLOCK_TAG | body);
  put_le32(out + FRAME_HEADER, count);
  put_le32(out + FRAME_HEADER + 4, (uint32_t)raw_len);
  put_le32(out + 4, snapshot_crc32c(0, out + FRAME_HEADER, body));
  return FRAME_HEADER + body;
}

/* The structured forms (1 and 2) of in[0..n) into out; returns its length. */
static size_t build(const uint8_t *in, size_t n, uint8_t *out, int blocks) {
  size_t len = header(&in, &n, out);
  uint8_t *raw = blocks ? scratch(&raw_buf, &raw_cap, n + 8 * n + 64) : NULL;
  size_t raw_len = 0;
  uint32_t count = 0;
  while (n >= 2) {
    size_t bl = get_le16(in);
    if (bl > n - 2) break;
    uint8_t *f = blocks ? raw + raw_len : out + len;
    if (blocks && count && bl && in[2] == 0xff) {
      len += block(raw, raw_len, count, out + len);
      raw_len = 0;
      count = 0;
      f = raw;
    }
    put_le32(f, (uint32_t)bl);
    put_le32(f + 4, snapshot_crc32c(0, in + 2, bl));
    memcpy(f + 8, in + 2, bl);
    if (blocks) {
      raw_len += 8 + bl;
      count++;
    } else {
      len += 8 + bl;
    }
    in += 2 + bl;
    n -= 2 + bl;
  }
  if (blocks && count) len += block(raw, raw_len, count, out + len);
  memcpy(out + len, in, n);
  return len + n;
}

static void check_rec(const uint8_t *body, uint32_t len, snapshot_rec *rec) {
  FUZZ_CHECK(rec_body_decode(body, len, rec) == 0, "the scan returned a body that does not decode");
  FUZZ_CHECK(rec->point_len <= SNAPSHOT_MAX_STRING && rec->action_len <= SNAPSHOT_MAX_STRING &&
                 rec->policy_version_len <= SNAPSHOT_MAX_STRING &&
                 rec->payload_len <= SNAPSHOT_MAX_PAYLOAD,
             "a record with a field longer than the format allows");
}

/* Reads the segment file[0..len) as the reader does. idx: index bytes
 * given by the input (mode 3), or NULL. */
static void read_segment(const uint8_t *file, size_t len, const uint8_t *idx, size_t idx_len) {
  seg_header h;
  if (seg_header_decode(file, len, &h) != 0) return;
  frame_scan s;
  frame_scan_init_mem(&s, file, h.header_len, len);
  s.dctx = dctx;
  seg_index x;
  seg_index_init(&x);
  uint8_t(*ids)[16] = NULL;
  size_t nids = 0, cap = 0;
  const uint8_t *body;
  uint32_t blen;
  snapshot_rec rec;
  snapshot_filter f;
  snapshot_filter_init(&f);
  f.point = "payment";
  for (int i = 0; i < 100000 && frame_scan_next(&s, &body, &blen) == 1; i++) {
    check_rec(body, blen, &rec);
    (void)rec_matches(&rec, &f);
    if (nids == cap) {
      cap = cap ? 2 * cap : 64;
      uint8_t(*more)[16] = realloc(ids, cap * 16);
      if (!more) break;
      ids = more;
    }
    memcpy(ids[nids++], body, 16);
    if (seg_index_add_scanned(&x, &s, body) < 0) break;
  }
  x.seg_size = s.torn ? s.tail_off : len;
  x.seg_crc = h.crc;
  (void)seg_index_raw_bytes(&x);
  /* the index as a sealed segment's .idx, read back */
  size_t isize;
  uint8_t *ib = seg_index_encode(&x, &isize);
  seg_index y;
  seg_index_init(&y);
  if (ib) {
    FUZZ_CHECK(seg_index_decode(ib, isize, x.seg_size, x.seg_crc, &y) == 0 &&
                   y.records == x.records && y.n == x.n,
               "an index does not read back as written");
    free(ib);
  }
  /* a time filter walks the index block by block, as the reader does */
  for (size_t b = 0; b < y.n; b++) {
    if (y.blocks[b].max_time < 1) continue;
    frame_scan_seek(&s, y.blocks[b].off);
    for (uint32_t i = 0; i < y.blocks[b].count && frame_scan_next(&s, &body, &blen) == 1; i++)
      check_rec(body, blen, &rec);
  }
  /* ids read are found again by id: the first, the last and two between
   * (each lookup may decompress a block again, or search a damaged span
   * again: all of them would make the target slow for no new path) */
  size_t pick[4];
  int npick = 0;
  for (int i = 0; i < 4 && nids; i++) {
    size_t k = (nids - 1) * (size_t)i / 3;
    if (npick == 0 || pick[npick - 1] != k) pick[npick++] = k;
  }
  for (int i = 0; i < npick; i++)
    FUZZ_CHECK(
        seg_find(&s, &y, ids[pick[i]], &body, &blen) == 1 && memcmp(body, ids[pick[i]], 16) == 0,
        "a record read is not found by its id");
  /* an index from the input: whatever it names is read without harm */
  if (idx) {
    seg_index z;
    seg_index_init(&z);
    if (seg_index_decode(idx, idx_len, len, h.crc, &z) == 0)
      for (int i = 0; i < npick; i++) (void)seg_find(&s, &z, ids[pick[i]], &body, &blen);
    seg_index_free(&z);
  }
  free(ids);
  seg_index_free(&y);
  seg_index_free(&x);
  s.dctx = NULL; /* lent: kept for the next input */
  frame_scan_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 1u << 20) return 0;
  int mode = data[0] & 3;
  const uint8_t *in = data + 1;
  size_t n = size - 1;
  if (mode == 0 || mode == 3) {
    const uint8_t *idx = NULL;
    size_t idx_len = 0;
    if (mode == 3) {
      if (n < 2) return 0;
      idx_len = get_le16(in);
      if (idx_len > n - 2) idx_len = n - 2;
      idx = in + 2;
      in += 2 + idx_len;
      n -= 2 + idx_len;
    }
    read_segment(in, n, idx, idx_len);
    return 0;
  }
  /* frames add 6 bytes to a 2-byte chunk at most; a block adds its header
   * and zstd's bound over its raw bytes (< 100 bytes more for a small one),
   * and one starts at most at every 0xff */
  size_t blocks = 1;
  for (size_t i = 0; i < n; i++) blocks += in[i] == 0xff;
  uint8_t *out = scratch(&out_buf, &out_cap,
                         SEG_HEADER_MAX + 4 * n + 128 * blocks + ZSTD_compressBound(4 * n));
  if (!out) return 0;
  size_t len = build(in, n, out, mode == 2);
  /* the reader gets a copy of exactly the file's size, so that a read past
   * its end is the sanitizer's to see */
  uint8_t *file = malloc(len ? len : 1);
  if (!file) return 0;
  memcpy(file, out, len);
  read_segment(file, len, NULL, 0);
  free(file);
  return 0;
}
