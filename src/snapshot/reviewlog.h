/* reviewlog.h — the reviewers' outcomes, kept beside the snapshots in
 * DIR/reviews.log: an append-only file of CRC32C frames, framed as the
 * segments are (u32 body length | u32 CRC32C of the body | body), after an
 * 8-byte header ("VDREVW", u16 format version). A body is one outcome as a
 * JSON object; the log never parses it (the server writes it, `verdict
 * reviews` reads it). docs/server.md, "The review queue", has the fields.
 *
 * One writer (the server, which holds the snapshot folder's writer lock);
 * any number of readers, in any process, while it appends: they read whole
 * valid frames only. An append is written and fsynced before it returns; a
 * failed write or fsync is cut back off the file, so an outcome is either on
 * disk and acknowledged or not there at all. */
#ifndef VD_SNAPSHOT_REVIEWLOG_H
#define VD_SNAPSHOT_REVIEWLOG_H

#include <stddef.h>
#include <stdint.h>

#define REVIEWLOG_NAME "reviews.log"
#define REVIEWLOG_HEADER 8
#define REVIEWLOG_BODY_MAX 65536 /* one outcome, JSON bytes */

typedef struct reviewlog reviewlog;

/* Opens DIR/reviews.log for appending, creating it when missing. A torn
 * tail (a crash mid-append) is cut back to the last whole frame, fsynced,
 * and journalled in DIR/repairs.jsonl; *cut (may be NULL) gets the bytes
 * cut. 0, or -1 with a sentence naming the file in err. */
int reviewlog_open(const char *dir, reviewlog **out, uint64_t *cut, char *err, size_t errlen);
/* Appends one body (1 .. REVIEWLOG_BODY_MAX bytes, a JSON object) and
 * fsyncs it. Safe from any thread (appends take turns). 0, or -1 with err
 * (nothing of the record stays in the file). */
int reviewlog_append(reviewlog *l, const char *body, size_t len, char *err, size_t errlen);
void reviewlog_close(reviewlog *l);

/* Reading, front to back, from any process. */
typedef struct reviewlog_reader reviewlog_reader;
/* 0 with *out; 1 when the folder has no reviews.log (*out NULL: nothing
 * recorded); -1 with err. */
int reviewlog_reader_open(const char *dir, reviewlog_reader **out, char *err, size_t errlen);
/* Starts at a frame offset a previous read returned (as *next). */
void reviewlog_reader_seek(reviewlog_reader *r, uint64_t off);
/* 1: *body and *len hold the next outcome (valid until the next call), *off
 * where its frame starts and *next where the one after starts; 0: the end;
 * -1: a read error (err). Damaged spans are skipped (see scan.c). */
int reviewlog_reader_next(reviewlog_reader *r, const char **body, uint32_t *len, uint64_t *off,
                          uint64_t *next, char *err, size_t errlen);
void reviewlog_reader_close(reviewlog_reader *r);

#endif
