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
#define SEG_VERSION 1
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

/* ---- scanning frames (scan.c) ----
 * Reads a segment front to back through a buffer, returning the valid frames.
 * A frame that fails (length out of range or past the end, CRC mismatch, body
 * that does not decode) starts a search for the next valid frame: when one is
 * found, the bytes between are a damaged region (counted, skipped); when none
 * is, the scan ends and tail_off marks where the invalid tail starts. */
typedef struct frame_scan {
  int fd;
  uint64_t end; /* bytes of the file to consider */
  uint64_t off; /* next frame */
  uint8_t *buf; /* holds file bytes [buf_off, buf_off + buf_len) */
  size_t buf_cap, buf_len;
  uint64_t buf_off;
  /* results */
  uint64_t frame_off; /* offset of the frame last returned */
  uint64_t damaged_regions, damaged_bytes;
  int torn;          /* the scan ended at an invalid tail */
  uint64_t tail_off; /* where the valid data ends (== end when not torn) */
  int err;           /* errno of a failed read */
  /* what a valid body is: its length range and a check of its bytes after
   * the CRC (frame_scan_init: a snapshot record's; reviewlog.c sets its own) */
  uint32_t min_body, max_body;
  int (*body_ok)(const uint8_t *body, uint32_t len);
} frame_scan;

/* start: offset of the first frame (the header length). */
int frame_scan_init(frame_scan *s, int fd, uint64_t start, uint64_t end);
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

typedef struct idx_block {
  uint64_t off;
  uint32_t count;
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
/* Opens dir/name, reads its header, and loads its index — from the .idx
 * file when valid, else by scanning (and then, when write_back and the
 * segment is not held by a writer, saves the .idx). Returns the open fd (the
 * caller closes it), or -1 with err; a file too short for a header returns -2
 * (being created). hdr may be NULL. */
int seg_open_indexed(const char *dir, const char *name, int write_back, seg_header *hdr,
                     seg_index *x, uint64_t *size, char *err, size_t errlen);

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
