/* snapshot.h — the decision-snapshot log: ids, records, the segment-log
 * writer, the reader and retention. This is the contract the engine (and the
 * CLI, and replay) build on; docs/snapshots.md describes the on-disk format.
 *
 * What the log stores: one record per decision — a small fixed header the log
 * itself needs (id, time, allowed/review/source, confidence, decision point,
 * action, policy version) and an opaque payload: the snapshot as compact JSON
 * text, written by the engine. The log never parses the payload; filters,
 * lookup and retention work on the header alone.
 *
 * Shape of use (the engine):
 *
 *   snapshot_idgen gen;  snapshot_idgen_init(&gen);      // once per engine
 *   snapshot_log *log;   char err[SNAPSHOT_ERRLEN];
 *   snapshot_log_opts o; snapshot_log_opts_init(&o);
 *   o.durability = SNAPSHOT_DURABLE_INTERVAL;
 *   if (snapshot_log_open("/var/lib/verdict/snapshots", &o, &log, err, sizeof err) < 0) fail(err);
 *   ...per decision, any thread:
 *   snapshot_rec r = {0};
 *   snapshot_id_new(&gen, r.id);             // goes into the JSON and the answer
 *   r.time_ns = now; r.allowed = 1; r.source = SNAPSHOT_SRC_RULE; r.confidence = 1;
 *   r.point = "tool_call"; r.point_len = 9; ...; r.payload = json; r.payload_len = n;
 *   uint64_t ticket;
 *   if (snapshot_log_append(log, &r, &ticket) == 0 && durability_always)
 *     snapshot_log_wait_durable(log, ticket);  // answer only once on disk
 *   ...
 *   snapshot_log_close(log, NULL);           // drains, fsyncs, seals
 *
 * Threads: snapshot_id_new and snapshot_log_append may be called from any
 * number of threads at once; they take no lock, make no syscall (the clock is
 * read through the vDSO) and do not allocate: an append copies the record
 * into a preallocated ring. Off that path an append may wake the writer (a
 * mutex and a condition signal): when the ring is full, and for the first
 * record after the writer has been idle for a second. One writer thread per
 * log drains the ring into the current segment (or none: with
 * opts.inline_writer the appending thread writes, see there). A reader may run
 * in any process while a writer appends; gc may run while a writer appends.
 * One writer per directory: a second snapshot_log_open on the same directory
 * fails with SNAPSHOT_EBUSY.
 *
 * Errors: every call returns 0 (or a count/flag documented with it) or a
 * negative SNAPSHOT_E* code; calls that take err/errlen put a sentence there
 * that names the file and the reason. */
#ifndef VD_SNAPSHOT_SNAPSHOT_H
#define VD_SNAPSHOT_SNAPSHOT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SNAPSHOT_OK 0
#define SNAPSHOT_EINVAL (-1)   /* a bad argument (string too long, bad option) */
#define SNAPSHOT_ENOMEM (-2)   /* out of memory */
#define SNAPSHOT_EIO (-3)      /* a file could not be read, written or synced */
#define SNAPSHOT_EFULL (-4)    /* the queue was full and on_full is DROP: dropped, counted */
#define SNAPSHOT_ECLOSED (-5)  /* the log is closing or closed */
#define SNAPSHOT_EBUSY (-6)    /* another writer holds the directory */
#define SNAPSHOT_ETOOBIG (-7)  /* a record larger than snapshot_log_max_record() */
#define SNAPSHOT_ECORRUPT (-8) /* a file is not a snapshot segment/index, or is damaged */
#define SNAPSHOT_EREFUSED                                                \
  (-9) /* not taken (BLOCK: the queue is full and the disk refuses       \
        * writes, or it stayed full for full_wait_ms) or, under ALWAYS,  \
        * not made durable (the disk refused it): never written; counted \
        * in `refused` */

#define SNAPSHOT_ERRLEN 512              /* enough for any message these calls write */
#define SNAPSHOT_MAX_STRING 65535        /* decision point, action, policy version: bytes */
#define SNAPSHOT_MAX_PAYLOAD (16u << 20) /* hard cap on one payload, whatever the queue */

const char *snapshot_strerror(int code);

/* ---- ids: UUIDv7 (RFC 9562) ----
 * 128 bits, big-endian: 48-bit unix time in ms | version 7 (4 bits) | 12-bit
 * counter | variant 0b10 (2 bits) | 62 random bits. The counter makes ids from
 * one generator strictly increasing (as 16-byte strings, so memcmp order is
 * time order) even within one millisecond and across threads: it restarts at
 * a random value below 2048 each new millisecond and, if 4096 ids are taken in
 * one millisecond, carries into the time field (the id then runs a little ahead
 * of the clock, as RFC 9562 allows). The random bits and each millisecond's
 * counter start are the kernel's (getrandom, taken 256 bytes at a time by
 * each thread): one id tells nothing about another. */
typedef struct snapshot_idgen {
  _Atomic uint64_t state; /* ms << 12 | counter of the last id */
} snapshot_idgen;

#define SNAPSHOT_ID_TEXT 37 /* 36 characters + NUL */

/* Starts a generator (no id taken yet). */
void snapshot_idgen_init(snapshot_idgen *g);
/* A new id at the current time, greater than every id g made before. */
void snapshot_id_new(snapshot_idgen *g, uint8_t out[16]);
/* The same at a given unix time in ms (tests, tools that rebuild old logs):
 * still greater than every id g made before (max of the two times). */
void snapshot_id_new_at(snapshot_idgen *g, uint64_t unix_ms, uint8_t out[16]);
/* "0193c0de-7a1b-7c3d-8e4f-0123456789ab" (lowercase) into out[37]; returns out. */
char *snapshot_id_format(const uint8_t id[16], char out[SNAPSHOT_ID_TEXT]);
/* Parses the 36-character form (either case). 0, or SNAPSHOT_EINVAL. */
int snapshot_id_parse(const char *s, size_t len, uint8_t out[16]);
/* The unix ms time an id carries. */
uint64_t snapshot_id_time_ms(const uint8_t id[16]);

/* ---- records ---- */
typedef enum snapshot_source {
  SNAPSHOT_SRC_RULE = 0,
  SNAPSHOT_SRC_MODEL = 1,
  SNAPSHOT_SRC_DEFAULT = 2,
  SNAPSHOT_SRC_ERROR = 3,
} snapshot_source;

/* "rule", "model", "default", "error"; NULL for anything else. */
const char *snapshot_source_name(int source);
/* The inverse; -1 when unknown. */
int snapshot_source_parse(const char *s, size_t len);

/* One record. For an append, the strings are read (copied) during the call
 * and need not be NUL-terminated. From a reader they point into the reader's
 * buffer, stay valid until its next call, and are NOT NUL-terminated. */
typedef struct snapshot_rec {
  uint8_t id[16];
  int64_t time_ns;   /* unix ns of the decision; 0 on append: the id's time */
  uint8_t allowed;   /* 0/1 */
  uint8_t review;    /* 0/1 */
  uint8_t source;    /* snapshot_source */
  float confidence;  /* [0, 1] by convention; stored as given */
  const char *point; /* decision point, <= SNAPSHOT_MAX_STRING bytes */
  size_t point_len;
  const char *action; /* chosen action ("" when none) */
  size_t action_len;
  const char *policy_version; /* hex content hash (or "") */
  size_t policy_version_len;
  const char *payload; /* the snapshot, compact JSON */
  size_t payload_len;
} snapshot_rec;

/* ---- the writer ---- */
typedef enum snapshot_durability {
  SNAPSHOT_DURABLE_NONE = 0,     /* write(); the OS flushes when it likes */
  SNAPSHOT_DURABLE_INTERVAL = 1, /* fsync at most every interval_ms (the default) */
  SNAPSHOT_DURABLE_ALWAYS = 2,   /* fsync each batch; wait_durable waits for it */
} snapshot_durability;

typedef enum snapshot_on_full {
  SNAPSHOT_FULL_BLOCK = 0, /* the producer waits for room: never drops (default) */
  SNAPSHOT_FULL_DROP = 1,  /* the record is refused with SNAPSHOT_EFULL and counted */
} snapshot_on_full;

typedef struct snapshot_log_opts {
  snapshot_durability durability; /* default INTERVAL */
  uint32_t interval_ms;           /* INTERVAL: default 100 */
  uint32_t queue_records;         /* records waiting at most: default 65536 (and as many again
                                   * in the writer's buffer, INTERVAL and NONE) */
  size_t queue_bytes;             /* ring bytes: default 32 MiB (rounded up to a power of 2) */
  snapshot_on_full on_full;       /* default BLOCK */
  uint64_t segment_bytes;         /* rotate past this size: default 64 MiB */
  const char *node;               /* node name in segment headers: default the host name */
  uint32_t close_timeout_ms;      /* close gives up on a failing disk after this: default 10000 */
  uint32_t full_wait_ms;          /* BLOCK: how long an append waits for room before it is
                                   * refused (SNAPSHOT_EREFUSED): default 1000. It does not
                                   * wait at all while the disk refuses writes */
  /* Optional: turns the payload as appended into the payload written, on the
   * writer thread, just before the record is framed — so that a producer
   * can append a cheap capture and leave the formatting to the writer. It
   * sets rec->payload/payload_len (memory it keeps until its next call; the
   * header fields must stay as they are) and returns 0, or -1: the record is
   * not written and is counted in `rejected`. Called from the writer thread
   * only, once per record (again only if a rotation interrupts it), never
   * concurrently. NULL: payloads are written as appended. */
  int (*format)(void *ud, snapshot_rec *rec);
  void *format_ud;
  /* For a process that records a handful of decisions and exits (an agent's
   * hook): no writer thread. Each append (or commit) frames and writes its
   * record on the calling thread before it returns, formatting it there too;
   * fsyncs follow the durability setting as the thread would make them
   * (ALWAYS: in the append; INTERVAL: when interval_ms has passed, and at
   * close; NONE: never), so what reaches the disk, and when it is durable,
   * is the same, byte for byte. wait_durable syncs on the calling thread and
   * gives up (SNAPSHOT_ECLOSED) after close_timeout_ms of a failing disk.
   * Appends from several threads are still safe (they take turns at the
   * writing), but every one of them pays for the disk: a server wants the
   * thread. 0: the writer thread (default). */
  int inline_writer;
  /* Compression (docs/snapshots.md, "Compressed blocks"): records are
   * written as ordinary frames and gathered into zstd-compressed blocks of
   * about block_bytes raw bytes when the segment is sealed — at rotation,
   * and at close once the segment holds a block's worth of ordinary frames.
   * compress_level: zstd's level (1-19), default 3; 0 writes no blocks.
   * block_bytes: default 256 KiB, at most 8 MiB. */
  int compress_level;
  size_t block_bytes;
} snapshot_log_opts;

typedef struct snapshot_log snapshot_log;

void snapshot_log_opts_init(snapshot_log_opts *o);

/* Opens (creating if needed) the log in dir, takes the directory's writer
 * lock, recovers the newest segment(s) — a torn or corrupt tail is cut back to
 * the last valid record and reported in the status — and starts the writer
 * thread. opts may be NULL (defaults). On failure returns SNAPSHOT_E* with a
 * message in err (err may be NULL). */
int snapshot_log_open(const char *dir, const snapshot_log_opts *opts, snapshot_log **out, char *err,
                      size_t errlen);

/* Queues a copy of rec. On success returns 0 and sets *ticket (may be NULL)
 * to a number for snapshot_log_wait_durable; tickets grow with append order.
 * Errors: SNAPSHOT_EFULL (DROP and no room; counted in `dropped`),
 * SNAPSHOT_ETOOBIG / SNAPSHOT_EINVAL (the record, not the log, is bad; counted
 * in `rejected`), SNAPSHOT_ECLOSED. With BLOCK a full queue makes the call
 * wait (spin, then yield, then short sleeps) until the writer makes room,
 * but never for long: while the disk refuses writes (status.failing) it
 * returns SNAPSHOT_EREFUSED at once, and after full_wait_ms without room
 * too (and then at once again until the writer has made progress), so that
 * a caller never hangs on a disk that cannot take the records. */
int snapshot_log_append(snapshot_log *log, const snapshot_rec *rec, uint64_t *ticket);

/* Appending in two steps, for a producer that writes its payload straight
 * into the queue instead of building it elsewhere and having append copy
 * it: snapshot_log_reserve takes room for a record whose payload is at most
 * max_payload bytes (rec's header fields are encoded now; rec->payload is
 * not read) and points slot->payload at it; the producer writes the payload
 * there and calls snapshot_log_commit with its real length (<= max_payload),
 * or snapshot_log_cancel. Until then the writer waits at this record: keep
 * it short, and finish every slot. Errors as for append (EFULL counted in
 * `dropped`, ECLOSED), except that a record too big for the queue returns
 * SNAPSHOT_ETOOBIG uncounted: the producer then appends it the usual way
 * (which counts what it refuses). The room left over is given back when
 * the writer passes it. */
typedef struct snapshot_slot {
  char *payload; /* write the payload here */
  size_t cap;    /* max_payload */
  uint8_t *body, *len_at;
  size_t reserved; /* body bytes reserved */
  size_t head_len; /* body bytes before the payload */
  uint64_t end;    /* ticket of the whole reservation */
} snapshot_slot;

int snapshot_log_reserve(snapshot_log *log, const snapshot_rec *rec, size_t max_payload,
                         snapshot_slot *slot);
void snapshot_log_commit(snapshot_log *log, snapshot_slot *slot, size_t payload_len,
                         uint64_t *ticket);
void snapshot_log_cancel(snapshot_log *log, snapshot_slot *slot);

/* Raw records, for a log with a format hook: the payload alone goes into
 * the queue, and the hook, on the writer thread, fills in the header fields
 * as well as the payload to write (it is called with every header field
 * zero and rec->point NULL, and must set at least point; strings it sets
 * stay valid until its next call). The producer then encodes nothing but
 * its payload. reserve_raw is reserve's twin (commit and cancel as for a
 * reserved slot); append_raw copies len bytes. Without a format hook both
 * return SNAPSHOT_EINVAL. A record the hook refuses, or whose header fields
 * come out too long, is counted in `rejected` and not written. */
int snapshot_log_reserve_raw(snapshot_log *log, size_t max_payload, snapshot_slot *slot);
int snapshot_log_append_raw(snapshot_log *log, const char *payload, size_t len, uint64_t *ticket);

/* Waits until the record with this ticket is durable: fsynced under INTERVAL
 * and ALWAYS (ALWAYS syncs at once, one fsync for every record in the batch;
 * INTERVAL waits for the next periodic sync), written to the OS under NONE.
 * Returns 0, or SNAPSHOT_ECLOSED when the log closed without making it
 * durable (a disk that kept failing until the close timeout).
 * Under ALWAYS a disk that refuses the record ends the wait with
 * SNAPSHOT_EREFUSED: the writer gives the record up (it is never written,
 * not even once space returns; counted in `refused`) rather than keep its
 * waiter until the disk takes writes again. While the disk fails, records
 * appended meanwhile are refused as the writer takes them (in a
 * millisecond or so), and one write is tried per backoff step (10 ms
 * doubling to 1 s): when it succeeds, records are durable again. So under
 * ALWAYS a record is durable with its waiter told 0, or refused with its
 * waiter told so: never both, never later. */
int snapshot_log_wait_durable(snapshot_log *log, uint64_t ticket);

/* A mark after every record appended (or being appended) so far, and
 * whether the writer thread has taken every record before a mark off the
 * queue: formatted by opts.format and copied into its own buffer, so that
 * nothing of what was appended is read again. A producer whose payloads
 * point at memory of its own (the engine's captures name rules in a policy
 * bundle) frees that memory once this says so. */
uint64_t snapshot_log_mark(snapshot_log *log);
int snapshot_log_taken(snapshot_log *log, uint64_t mark);

/* The largest record (body bytes: header fields + payload) append accepts. */
size_t snapshot_log_max_record(const snapshot_log *log);

/* Counters, readable at any time from any thread. */
typedef struct snapshot_log_status {
  uint64_t appended;       /* records accepted by append */
  uint64_t dropped;        /* refused because the queue was full (DROP) */
  uint64_t rejected;       /* refused as invalid or too big */
  uint64_t written;        /* records written to segment files */
  uint64_t bytes;          /* frame bytes written */
  uint64_t fsyncs;         /* successful fsyncs of segment files */
  uint64_t write_errors;   /* failed write/fsync/create attempts (each retried) */
  uint64_t queue_depth;    /* records appended and not written yet (queued, or
                            * held by the writer while the disk refuses them) */
  uint64_t segments;       /* segments created by this writer */
  uint64_t refused;        /* SNAPSHOT_EREFUSED: appends refused (BLOCK) and, under
                            * ALWAYS, records the disk refused (never written) */
  uint64_t durable_ticket; /* every ticket <= this is durable */
  uint64_t written_ticket; /* every ticket <= this is written */
  /* recovery at open */
  uint64_t recovered_segments; /* segments scanned */
  uint64_t cut_bytes;          /* torn/corrupt tail bytes cut */
  uint64_t cut_records;        /* frames (whole or torn) in the cut tails */
  uint64_t damaged_regions;    /* bad spans in the middle of a segment, kept, skipped on read */
  /* The disk refuses writes: the last write, fsync, segment creation or
   * probe failed (set at the failure, cleared by the next success; with
   * nothing to write, the writer probes the disk once per backoff step so
   * that this clears by itself once space returns). */
  int failing;
  int64_t failing_since_ns; /* wall clock of the first failure of this spell, 0 if none */
  uint64_t lost;            /* close: records appended and given up unwritten (close timeout) */
  /* compaction into compressed blocks, at seal */
  uint64_t compactions;             /* segments rewritten into blocks */
  uint64_t compact_in, compact_out; /* their sizes before and after, bytes */
  uint64_t compact_ns;              /* time spent compacting (the writer's), wall clock */
  uint64_t compact_cpu_ns;          /* the same in CPU time of the thread that compacted */
  uint64_t compact_errors;          /* compactions that failed (the segment stays as it was) */
  int last_errno;                   /* errno of the last write error, 0 if none */
  char last_error[SNAPSHOT_ERRLEN]; /* "write /dir/seg-...log: No space left on device" */
} snapshot_log_status;

void snapshot_log_status_get(snapshot_log *log, snapshot_log_status *st);

/* ---- repairs at open ----
 * What recovery did to the folder, one entry a file: a torn tail cut, a file
 * under a segment's name that was no segment moved aside to NAME.corrupt
 * (with the records still readable in it), a segment without a header
 * removed, damage in the middle of a segment kept and skipped. Each is also
 * appended to DIR/repairs.jsonl, one JSON object a line (time, segment,
 * repair, bytes, records), which `verdict snapshots repairs` prints. */
enum {
  SNAPSHOT_REPAIR_CUT_TAIL = 1, /* bytes cut; records: frames (whole or torn) in them */
  SNAPSHOT_REPAIR_CORRUPT,      /* moved aside; bytes: its size; records: valid frames in it */
  SNAPSHOT_REPAIR_EMPTY,        /* removed; bytes: its size (no header, so no record) */
  SNAPSHOT_REPAIR_DAMAGED,      /* kept, skipped on read; bytes: the damaged spans; records: 0 */
};
#define SNAPSHOT_REPAIRS_MAX 32 /* kept in memory; the journal has them all */
typedef struct snapshot_repair {
  int kind;
  char segment[96]; /* the file's name in the folder, after the repair */
  uint64_t bytes, records;
} snapshot_repair;

/* "cut_tail", "moved_corrupt", "removed_empty", "damaged_kept". */
const char *snapshot_repair_kind(int kind);
/* The repairs this open made (at most SNAPSHOT_REPAIRS_MAX); *out valid
 * until close. */
size_t snapshot_log_repairs(snapshot_log *log, const snapshot_repair **out);
/* Appends r to dir/repairs.jsonl (best effort: a folder that cannot take it
 * loses the line, not the repair). */
void snapshot_repair_journal(const char *dir, const snapshot_repair *r);

/* Stops taking records, drains the queue into the segment, fsyncs (unless
 * NONE), writes the sparse index of the current segment, stops the writer
 * and frees everything. Call once no other thread appends any more. Returns
 * 0, or SNAPSHOT_EIO when records could not be written before the close
 * timeout (they are lost; their count is `lost` in the final status, passed
 * back in st if st is not NULL, with the last error). Under ALWAYS records
 * still queued while the disk refuses writes are refused, not lost. */
int snapshot_log_close(snapshot_log *log, snapshot_log_status *st);

/* ---- the reader ----
 * Iterates the records of a directory: segments in order of their first id,
 * records in append order within a segment. That is time order for records
 * of one writer, up to the moments between taking an id and appending it
 * (threads racing by microseconds), and a late record crossing a segment
 * boundary. Safe against a writer appending at the same time: it reads only
 * complete, CRC-valid records, and picks up segments created after it
 * opened. */
typedef struct snapshot_filter {
  int64_t since_ns;           /* time >= since (0: no bound) */
  int64_t until_ns;           /* time < until (0: no bound) */
  const char *point;          /* NUL-terminated; NULL: any */
  const char *action;         /* NULL: any */
  const char *policy_version; /* NULL: any; a prefix matches ("3f2a" matches "3f2a9c...") */
  int source;                 /* snapshot_source, or -1: any */
} snapshot_filter;

typedef struct snapshot_reader snapshot_reader;

/* Sets every field to "any". */
void snapshot_filter_init(snapshot_filter *f);

/* filter may be NULL. The filter's strings must outlive the reader. Fails
 * with SNAPSHOT_EIO when dir cannot be read. */
int snapshot_reader_open(const char *dir, const snapshot_filter *filter, snapshot_reader **out,
                         char *err, size_t errlen);
/* 1: *rec holds the next matching record (valid until the next call); 0: no
 * more; < 0: an error (message from snapshot_reader_error). */
int snapshot_reader_next(snapshot_reader *r, snapshot_rec *rec);
/* Finds one record by id without scanning everything: the id's time picks the
 * segment, the segment's sparse index (.idx, rebuilt in memory if missing or
 * stale) the block of 1024 records to read. Ignores the filter. 1 found, 0
 * not found, < 0 error. Does not move the iteration of _next. */
int snapshot_reader_find(snapshot_reader *r, const uint8_t id[16], snapshot_rec *rec);
/* Resuming where a reader stopped (the shipper's cursor): no filter; the
 * segments sorted before `segment` are passed over, and so are the first
 * `skip` records of `segment` itself (a segment's records keep their order
 * when it is compacted into blocks). A segment no longer there is passed
 * over too: reading starts at the next one. segment NULL or "": from the
 * start. SNAPSHOT_EINVAL when segment is not a segment's name. */
int snapshot_reader_open_at(const char *dir, const char *segment, uint64_t skip,
                            snapshot_reader **out, char *err, size_t errlen);
/* The segment (its file name) of the record _next returned last and that
 * record's place in it, 1 for the first: what open_at resumes after.
 * "" and 0 before the first record. *segment is valid until the next call. */
void snapshot_reader_position(const snapshot_reader *r, const char **segment, uint64_t *ordinal);
const char *snapshot_reader_error(const snapshot_reader *r);
/* Damaged spans skipped so far (bytes), for a "some data was unreadable" note. */
uint64_t snapshot_reader_skipped_bytes(const snapshot_reader *r);
void snapshot_reader_close(snapshot_reader *r);

/* ---- retention and sampling ----
 * Records newer than keep_days are all kept. In older records only those that
 * matter stay: not allowed, marked for review, decided by a model or by an
 * error, confidence below min_confidence, or in the sample — a fraction chosen
 * by a hash of the id, so that every run keeps the same ones. Each segment
 * that loses records is rewritten to a temporary file and renamed over the
 * old one (readers holding the old file keep reading it); a segment with
 * nothing left is deleted. Segments a writer holds (its active segment,
 * flock'd) are skipped, so gc is safe against a running writer. So are
 * segments a snapshot shipper has not shipped yet (src/ship/ship.h): the
 * one each DIR/ship-<node>.cursor names and every later one — a cursor
 * that names none yet holds them all — so that retention never removes a
 * decision before it reached ClickHouse, nor shifts the records a cursor
 * counts (remove a cursor file to release what it holds). */
typedef struct snapshot_gc_opts {
  double keep_days;      /* default 7 */
  double sample;         /* fraction of unremarkable old records kept: default 0.01 */
  double min_confidence; /* below this an old record is kept: default 0.8 */
  int dry_run;           /* count, change nothing */
  int64_t now_ns;        /* 0: the clock (tests pass a fixed time) */
  /* A declared retention (docs/snapshots.md, "The retention file"): when
   * set, it decides each record older than keep_days instead of the rule
   * above (min_confidence and sample are then not used): 1 keep, 0 remove.
   * It may read the payload; it must answer the same for the same record
   * (a dry run and the gc after it agree only then). Called from the
   * thread that runs gc, one record at a time. */
  int (*keeps)(void *ud, const snapshot_rec *rec);
  void *keeps_ud;
} snapshot_gc_opts;

typedef struct snapshot_gc_stats {
  uint64_t segments;           /* segment files looked at */
  uint64_t segments_locked;    /* skipped: held by a writer */
  uint64_t segments_unshipped; /* skipped: a shipper (DIR/ship-*.cursor) has not passed them */
  uint64_t segments_rewritten;
  uint64_t segments_deleted; /* nothing left in them */
  uint64_t records_kept;     /* in every segment but those a writer holds */
  uint64_t records_removed;
  /* of every segment file in the folder, before and after (a dry run: what
   * the gc after it leaves, to the byte, with the same now_ns) */
  uint64_t bytes_before;
  uint64_t bytes_after;
} snapshot_gc_stats;

void snapshot_gc_opts_init(snapshot_gc_opts *o);
/* Whether gc keeps an old record with this header under o (exposed for the
 * CLI and tests): 1 keep, 0 remove. */
int snapshot_gc_keeps(const snapshot_gc_opts *o, const snapshot_rec *rec);
/* Where an id falls in [0, 1) for sampling: kept when below the rate (the
 * hash docs/snapshots.md gives, so any tool can compute it). */
double snapshot_sample_point(const uint8_t id[16]);
/* opts may be NULL. Fills *stats (may be NULL). 0, or SNAPSHOT_E* + err. */
int snapshot_gc(const char *dir, const snapshot_gc_opts *opts, snapshot_gc_stats *stats, char *err,
                size_t errlen);

/* ---- checksums ----
 * CRC32C (Castagnoli), as iSCSI and ext4 use it. crc is the CRC of the bytes
 * before (0 to start), so calls chain: crc32c(crc32c(0, a, n), b, m) is the
 * CRC of a then b. SSE4.2 instruction when the CPU has it, tables otherwise. */
uint32_t snapshot_crc32c(uint32_t crc, const void *data, size_t len);
/* The table version alone (tests compare the two). */
uint32_t snapshot_crc32c_sw(uint32_t crc, const void *data, size_t len);

/* ---- the folder (folder.c) ----
 * A snapshot folder is self-contained: besides its segments it carries, in
 * `<dir>/versions`, every policy and model version its records name,
 * content-addressed (<hex>.json, models/<hex>.json,
 * models/<hex>.features.yaml; each file's SHA-256 is its name), written by
 * the engine before the first record naming one (docs/snapshots.md). */

/* Creates dir (and its parents) as the log does, 0750. 0, or SNAPSHOT_EIO. */
int snapshot_folder_make(const char *dir, char *err, size_t errlen);
/* "<dir>/versions", malloc'd (NULL: out of memory). */
char *snapshot_versions_path(const char *dir);

/* Checks every frame's CRC in every segment and that every version a
 * record names is in <dir>/versions and hashes to its name. Each problem
 * goes to cb (may be NULL): kind is "damaged", "header", "unreadable",
 * "payload" (the record), "missing", "mismatch" (a version); file the
 * segment or the version's name under versions/. Returns 0 when the
 * folder could be checked (problems counted in stats), or SNAPSHOT_E* with
 * err when it could not be read at all. */
typedef void (*snapshot_verify_cb)(void *ud, const char *kind, const char *file,
                                   const char *detail);
typedef struct snapshot_verify_stats {
  uint64_t segments, records, damaged_bytes;
  uint64_t versions, versions_bad; /* distinct versions named, and those missing or changed */
  uint64_t problems;
} snapshot_verify_stats;
int snapshot_verify(const char *dir, snapshot_verify_cb cb, void *ud, snapshot_verify_stats *stats,
                    char *err, size_t errlen);

/* Disk use by the UTC day of each segment's first record (a segment holds
 * one day's records: it rotates at midnight UTC): segment and index bytes.
 * *out malloc'd, in day order. 0, or SNAPSHOT_E* with err. */
typedef struct snapshot_day_usage {
  uint32_t day; /* YYYYMMDD */
  uint32_t segments;
  uint64_t bytes;
} snapshot_day_usage;
int snapshot_folder_usage(const char *dir, snapshot_day_usage **out, size_t *n, char *err,
                          size_t errlen);

#endif
