/* internal.h — what the snapshot files share and nobody else needs: the
 * record body and frame encoding (record.c), segment file headers, names and
 * directory listings (segment.c), the frame scanner that validates, skips
 * damage and finds torn tails (scan.c), the sparse per-segment index
 * (index.c) and the producer/consumer ring (ring.c). docs/snapshots.md is the
 * byte-level description of everything written to disk here. */
#ifndef VD_SNAPSHOT_INTERNAL_H
#define VD_SNAPSHOT_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapshot/snapshot.h"

/* ---- little-endian fields ---- */
static inline void put_le16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void put_le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put_le64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t get_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t get_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t get_le64(const uint8_t *p) {
  return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

/* ---- record body and frame (record.c) ----
 * frame = u32 body length | u32 CRC32C of the body | body
 * body  = id[16] | i64 time_ns | u32 flags | f32 confidence |
 *         u16 len + point | u16 len + action | u16 len + policy version |
 *         u32 len + payload
 * flags: bit 0 allowed, bit 1 review, bits 8..11 source; others 0. */
#define FRAME_HEADER 8
#define BODY_FIXED 42 /* 16 + 8 + 4 + 4 + 2 + 2 + 2 + 4 */
#define BODY_MAX ((size_t)BODY_FIXED + 3 * SNAPSHOT_MAX_STRING + SNAPSHOT_MAX_PAYLOAD)

/* Body bytes for rec, or 0 when a field is too long. */
size_t rec_body_size(const snapshot_rec *rec);
void rec_body_encode(const snapshot_rec *rec, uint8_t *out);
/* The header fields only; returns where the payload's u32 length goes (the
 * payload follows it). */
uint8_t *rec_body_encode_head(const snapshot_rec *rec, uint8_t *out);
/* Fills *rec with pointers into b. 0, or -1 when the lengths do not add up
 * to len or the flags hold unknown bits. */
int rec_body_decode(const uint8_t *b, size_t len, snapshot_rec *rec);
/* The id and time of a body without decoding the rest (b has >= 24 bytes). */
static inline int64_t rec_body_time(const uint8_t *b) { return (int64_t)get_le64(b + 16); }
/* Whether rec passes f (NULL passes everything). */
int rec_matches(const snapshot_rec *rec, const snapshot_filter *f);
/* UTC calendar day of a unix ns time as YYYYMMDD. */
uint32_t day_of_time_ns(int64_t t);
/* Start of a YYYYMMDD day in unix ns. */
int64_t day_start_ns(uint32_t day);

/* ---- segment files (segment.c) ----
 * header = "VDSNAP" | u16 version | u32 header length (with the CRC) |
 *          u32 flags | i64 created ns | u32 day | first id[16] |
 *          u16 node length | node | u32 CRC32C of everything before */
#define SEG_MAGIC "VDSNAP"
#define SEG_VERSION 2       /* written; version 2 adds compressed block frames */
#define SEG_VERSION_MIN 1   /* the oldest read: version 1 is version 2 without blocks */
#define SEG_HEADER_FIXED 50 /* 6+2+4+4+8+4+16+2 + 4 (CRC) */
#define SEG_NODE_MAX 255
#define SEG_HEADER_MAX (SEG_HEADER_FIXED + SEG_NODE_MAX)
#define SEG_NAME_MAX 96

typedef struct seg_header {
  uint16_t version;
  uint32_t header_len;
  int64_t created_ns;
  uint32_t day;
  uint8_t first_id[16];
  uint16_t node_len;
  char node[SEG_NODE_MAX + 1];
  uint32_t crc; /* of the header: ties an index to its segment */
} seg_header;

/* Writes the header into out (>= SEG_HEADER_MAX bytes); sets h->header_len and h->crc. */
size_t seg_header_encode(seg_header *h, uint8_t *out);
/* 0 ok; 1 len too short to tell (a header being written, or torn); -1 not a
 * segment; -2 a segment of another format version (h->version says which):
 * never to be mistaken for damage. */
int seg_header_decode(const uint8_t *b, size_t len, seg_header *h);

/* "seg-YYYYMMDD-<32 hex>.log", with "-N" before ".log" when dup > 0. */
void seg_name_format(char out[SEG_NAME_MAX], uint32_t day, const uint8_t first_id[16], int dup);
/* 0 and the fields, or -1 when name is not a segment's. */
int seg_name_parse(const char *name, uint32_t *day, uint8_t first_id[16]);

typedef struct seg_entry {
  char name[SEG_NAME_MAX];
  uint32_t day;
  uint8_t first_id[16];
} seg_entry;

/* The segments in dir, sorted by first id (then name). *out is malloc'd (may
 * be NULL when n is 0). 0, or -1 with errno set. */
int seg_list(const char *dir, seg_entry **out, size_t *n);
/* dir/name into out (PATH_MAX); the .idx name when idx. -1 when too long. */
int seg_path(char *out, size_t outlen, const char *dir, const char *name, int idx);
/* fsync of a directory, so a created or renamed entry survives a crash. */
int dir_sync(const char *dir);
/* pread/pwrite until done: 0, or -1 with errno (a short read at EOF: errno 0). */
int read_full(int fd, void *buf, size_t len, uint64_t off);
int write_full(int fd, const void *buf, size_t len, uint64_t off);

/* ---- compressed blocks (scan.c reads them, compact.c writes them) ----
 * block frame = u32 (BLOCK_TAG | n) | u32 CRC32C of the n body bytes | body
 * body        = u32 records | u32 raw length | a zstd frame of the raw bytes
 * raw bytes   = `records` ordinary frames (length, CRC, body), back to back.
 * The tag puts 2 in the length word's fourth byte, where an ordinary frame
 * has 0 or 1: neither is a byte JSON text holds, so a scan for the next
 * valid frame after damage cannot mistake a payload for either. */
#define BLOCK_TAG 0x02000000u
#define BLOCK_LEN_MASK 0x00ffffffu
#define BLOCK_FIXED 8                             /* records + raw length */
#define BLOCK_RAW_MAX (BODY_MAX + 8 + (8u << 20)) /* one biggest frame plus 8 MiB */
#define SNAPSHOT_BLOCK_DEFAULT (256u << 10)       /* raw bytes a block gathers */
#define SNAPSHOT_BLOCK_MAX (8u << 20)
#define SNAPSHOT_LEVEL_DEFAULT 3

/* ---- scanning frames (scan.c) ----
 * Reads a segment front to back through a buffer, returning the valid frames.
 * A frame that fails (length out of range or past the end, CRC mismatch, body
 * that does not decode) starts a search for the next valid frame: when one is
 * found, the bytes between are a damaged region (counted, skipped); when none
 * is, the scan ends and tail_off marks where the invalid tail starts. */
typedef struct frame_scan {
  int fd;
  const uint8_t *mem; /* instead of fd: the file's bytes in memory (frame_scan_init_mem) */
  uint64_t end;       /* bytes of the file to consider */
  uint64_t off;       /* next frame */
  uint8_t *buf;       /* holds file bytes [buf_off, buf_off + buf_len) */
  size_t buf_cap, buf_len;
  uint64_t buf_off;
  /* results */
  uint64_t frame_off; /* offset of the frame last returned */
  uint64_t damaged_regions, damaged_bytes;
  int torn;          /* the scan ended at an invalid tail */
  uint64_t tail_off; /* where the valid data ends (== end when not torn) */
  int err;           /* errno of a failed read */
  /* A compressed block is returned record by record from its raw bytes;
   * frame_off is then the block frame's offset for each of them. */
  int in_block;
  uint32_t blk_index; /* the record's place in its block (0 first) */
  uint64_t blk_next;  /* the frame after the block */
  uint32_t blk_frame; /* the block frame's bytes, header included */
  uint8_t *raw;       /* the block's raw frames */
  size_t raw_cap, raw_len, raw_pos;
  void *dctx; /* ZSTD_DCtx, made at the first block */
  /* what a valid body is: its length range and a check of its bytes after
   * the CRC (frame_scan_init: a snapshot record's; reviewlog.c sets its own) */
  uint32_t min_body, max_body;
  int (*body_ok)(const uint8_t *body, uint32_t len);
  int blocks; /* compressed blocks accepted (segments: 1; reviews.log: 0) */
} frame_scan;

/* start: offset of the first frame (the header length). */
int frame_scan_init(frame_scan *s, int fd, uint64_t start, uint64_t end);
/* The same over the bytes [0, end) of a file held in memory. */
void frame_scan_init_mem(frame_scan *s, const uint8_t *mem, uint64_t start, uint64_t end);
/* Repositions at a frame boundary known from an index. */
void frame_scan_seek(frame_scan *s, uint64_t off);
/* 1 with the body, 0 at the end (see torn/tail_off), -1 read error (err). */
int frame_scan_next(frame_scan *s, const uint8_t **body, uint32_t *len);
void frame_scan_free(frame_scan *s);
/* Frames that start in [off, end) walking length fields (at least 1 when
 * off < end): the number of records a cut at off loses. */
uint64_t frame_count_tail(int fd, uint64_t off, uint64_t end);

/* ---- the sparse index (index.c) ----
 * One entry per block of INDEX_BLOCK consecutive records: the block's offset
 * and the id and time range of its records. Kept in a .idx file beside a
 * sealed segment; valid only for the segment size and header CRC it names. */
#define INDEX_BLOCK 1024

#define IDX_FLAG_BLOCK 1u /* the entry is one compressed block */
typedef struct idx_block {
  uint64_t off;
  uint32_t count;
  uint32_t flags;
  uint8_t min_id[16], max_id[16];
  int64_t min_time, max_time;
} idx_block;

typedef struct seg_index {
  uint64_t seg_size;
  uint32_t seg_crc;
  uint64_t records;
  uint8_t min_id[16], max_id[16];
  int64_t min_time, max_time;
  idx_block *blocks;
  size_t n, cap;
} seg_index;

void seg_index_init(seg_index *x);
void seg_index_reset(seg_index *x);
void seg_index_free(seg_index *x);
/* Adds the record whose frame starts at off. -1 out of memory. */
int seg_index_add(seg_index *x, uint64_t off, const uint8_t id[16], int64_t time_ns);
/* Adds a record of the compressed block at off: every record of one block
 * goes into one entry of its own, which names the block. */
int seg_index_add_block(seg_index *x, uint64_t off, const uint8_t id[16], int64_t time_ns);
/* The record a scan just returned (body), raw or from a block. */
int seg_index_add_scanned(seg_index *x, const frame_scan *s, const uint8_t *body);
/* A whole entry copied from another index, at offset off. */
int seg_index_add_entry(seg_index *x, const idx_block *e, uint64_t off);
/* Bytes of ordinary (uncompressed) frames in the segment x describes, which
 * a compaction would put in blocks. */
uint64_t seg_index_raw_bytes(const seg_index *x);
/* Atomically (temp + rename) writes path. 0, or -1 with errno. */
int seg_index_write(const char *path, const seg_index *x);
/* The same, writing over an existing index in place (falls back to
 * seg_index_write when there is none): for the writer sealing a segment it
 * holds, whose old index is stale anyway. Not atomic — a reader catching it
 * half-written fails its CRC and rebuilds, as for any bad index — but it
 * spares the unlink or the rename over an existing file (a journal commit,
 * or a forced flush on ext4) that every short-lived writer would pay. */
int seg_index_write_over(const char *path, const seg_index *x);
/* 0, or -1 when missing, damaged, or not for (seg_size, seg_crc). */
int seg_index_read(const char *path, uint64_t seg_size, uint32_t seg_crc, seg_index *x);
/* The same from the index file's bytes in memory. */
int seg_index_decode(const uint8_t *b, size_t size, uint64_t seg_size, uint32_t seg_crc,
                     seg_index *x);
/* The index file's bytes (malloc'd; NULL out of memory), its size in *size. */
uint8_t *seg_index_encode(const seg_index *x, size_t *size);
/* Looks for id through x in the segment s scans: the entries whose id range
 * holds it, each read from its offset for its count of records. 1 found
 * (body, len), 0 not, -1 read error (s->err). */
int seg_find(frame_scan *s, const seg_index *x, const uint8_t id[16], const uint8_t **body,
             uint32_t *len);
/* Opens dir/name, reads its header, and loads its index — from the .idx
 * file when valid, else by scanning (and then, when write_back and the
 * segment is not held by a writer, saves the .idx). Returns the open fd (the
 * caller closes it), or -1 with err; a file too short for a header returns -2
 * (being created). hdr may be NULL. */
int seg_open_indexed(const char *dir, const char *name, int write_back, seg_header *hdr,
                     seg_index *x, uint64_t *size, char *err, size_t errlen);

/* ---- compaction (compact.c) ----
 * A builder writes a segment's frames into a file, gathering ordinary frames
 * into compressed blocks of about block_bytes raw bytes each, and indexes
 * what it writes. Used by the writer when it seals a segment and by gc when
 * it rewrites one. */
typedef struct seg_builder {
  int fd;
  uint64_t off; /* where the next frame goes */
  int level;
  size_t block_bytes;
  seg_index *x;
  uint8_t *raw; /* frames waiting for their block */
  size_t raw_len, raw_cap;
  uint32_t raw_n;
  uint8_t *ids; /* their ids and times, for the index */
  int64_t *times;
  size_t ids_cap;
  uint8_t *z;
  size_t z_cap;
  void *cctx; /* ZSTD_CCtx */
  int err;    /* errno of the first failure */
} seg_builder;

/* level 0: frames are written as they are, no block. fd -1: nothing is
 * written, b->off only counts the bytes (gc's dry run sizes a rewrite so). */
int segb_init(seg_builder *b, int fd, uint64_t off, int level, size_t block_bytes, seg_index *x);
/* One ordinary frame (header and body), the record's id and time. */
int segb_frame(seg_builder *b, const uint8_t *frame, size_t len, const uint8_t id[16], int64_t t);
/* Writes what is gathered as a block. 0, or -1 (b->err). */
int segb_flush(seg_builder *b);
void segb_free(seg_builder *b);

/* Rewrites the sealed segment dir/name (open at fd, its lock held, header
 * h, index cur: the writer's, for the whole file) with its ordinary frames
 * gathered into compressed blocks (blocks already there are copied as they
 * are, not decompressed): into <name>.ztmp, fsynced, renamed over the
 * segment, the directory synced. 0 with the new index in *x and size in
 * *new_size; 1 when there is nothing to compress or the frames are not what
 * the index says (left as it is); -1 with errno (left as it is). */
int seg_compact(const char *dir, const char *name, int fd, const seg_header *h,
                const seg_index *cur, int level, size_t block_bytes, seg_index *x,
                uint64_t *new_size);

/* ---- the ring (ring.c) ----
 * A bounded multi-producer byte ring, drained by one consumer (the writer
 * thread). Each entry: a u64 word (body length | COMMITTED | PAD) and the
 * body, 8-byte aligned; an entry never wraps (a PAD entry fills the end).
 * Every byte outside [tail, head) is zero, which is how the consumer tells a
 * reserved-but-unfinished entry from a committed one. */
#define RING_COMMITTED (1ull << 62)
#define RING_PAD (1ull << 63)
#define RING_RAW (1ull << 61) /* a payload alone, header fields to come from opts.format */
#define RING_LEN_MASK ((1ull << 32) - 1)

/* Producers and the consumer each write their own cache lines: the head
 * line is written by producers only (the consumer reads head only when it
 * has caught up with the value it saw last), the tail line by the consumer
 * only (producers keep a copy of tail on their own line and read the real one
 * only when the ring looks full). With the two on one line, or read on every
 * record, the line would cross between the cores for every record. */
typedef struct ring {
  uint8_t *buf;
  uint64_t cap, mask;
  uint64_t max_records;
  /* producers' line */
  _Alignas(64) _Atomic uint64_t head; /* next byte to reserve */
  _Atomic uint64_t reserved;          /* records reserved, less those cancelled */
  _Atomic uint64_t tail_seen;         /* a recent tail (never ahead of it) */
  _Atomic uint64_t released_seen;     /* a recent released (never ahead of it) */
  /* the consumer's line */
  _Alignas(64) _Atomic uint64_t tail; /* bytes below this are free again */
  _Atomic uint64_t released;          /* records given back */
  uint64_t head_seen;                 /* the consumer's: head when last read */
} ring;

int ring_init(ring *r, size_t bytes, uint64_t max_records);
void ring_free(ring *r);
/* Reserves room for a body of len bytes. 0 with *body (write it, then
 * ring_commit) and *ticket (end position of the entry), or -1 when full. */
int ring_reserve(ring *r, size_t len, uint8_t **body, uint64_t *ticket);
void ring_commit(ring *r, uint8_t *body, size_t len);
/* The same with flags in the entry's word (RING_RAW). */
void ring_commit_flags(ring *r, uint8_t *body, size_t len, uint64_t flags);
/* Commits a body of len bytes in an entry reserved for reserved >= len: the
 * room left over becomes a pad entry. Returns how many bytes that pad took
 * (the record's ticket is that much below the reservation's). */
uint64_t ring_commit_short(ring *r, uint8_t *body, size_t len, size_t reserved, uint64_t flags);
/* Gives up a reservation: the whole entry becomes a pad. */
void ring_cancel(ring *r, uint8_t *body, size_t reserved);
/* Consumer: the entry at position pos. 1 a record (body, len, *next), 3 a
 * record committed with RING_RAW (the same), 2 a pad (*next), 0 nothing
 * committed there yet (or pos is at head). */
int ring_peek(ring *r, uint64_t pos, const uint8_t **body, uint32_t *len, uint64_t *next);
/* Consumer: gives [tail, pos) back to producers (zeroing it), nrec records. */
void ring_release(ring *r, uint64_t pos, uint64_t nrec);
/* The biggest body an entry may hold. */
size_t ring_max_body(const ring *r);
/* Records reserved and not yet released (any thread; a moment's value). */
uint64_t ring_count(ring *r);

/* ---- gc helpers shared with the CLI's dry runs (gc.c) ---- */
/* Position of a 16-byte id in [0, 1): FNV-1a 64 then a splitmix64 finish,
 * top 53 bits. Documented in docs/snapshots.md so other tools can agree. */
double snapshot_sample_point(const uint8_t id[16]);

#endif
