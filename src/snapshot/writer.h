/* writer.h — the snapshot log's own state, shared by the two files of the
 * writer and by nobody else: writer.c (open, the lock-free append, the
 * writer thread, close) and recover.c (what open does to the folder before
 * the thread starts: recovery of every segment, stale temporaries). */
#ifndef VD_SNAPSHOT_WRITER_H
#define VD_SNAPSHOT_WRITER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "snapshot/internal.h"

#define PEND_CAP ((size_t)8 << 20)   /* INTERVAL syncs early past this much unsynced data */
#define GATHER_MAX ((size_t)4 << 20) /* bytes one round takes from the ring */
#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 1000
#define REFUSALS_MAX 64  /* ranges of refused tickets remembered (ALWAYS) */
#define PROBE_BYTES 4096 /* what a probe of a failing disk writes (and takes back) */

/* The sparse index as it was at the last sync, so that records given up
 * after a failed write (ALWAYS) leave it too: gather only ever adds to the
 * last block or adds blocks. */
typedef struct idx_mark {
  size_t n;
  uint64_t records;
  uint8_t min_id[16], max_id[16];
  int64_t min_time, max_time;
  idx_block last;
} idx_mark;

struct snapshot_log {
  char *dir;
  snapshot_log_opts opts;
  char node[SEG_NODE_MAX + 1];
  ring q;
  size_t max_record;
  int lock_fd; /* writer.lock */
  pthread_t thread;
  int inline_writer;      /* no thread: rounds run in append (run_mu) and close */
  pthread_mutex_t run_mu; /* inline: one round at a time */

  /* Shared with producers and waiters, on three cache lines by who writes
   * them (the struct is allocated 64-aligned): producers write the first on
   * every append, read the second on every append (the writer writes it
   * only when it goes to wait or stops), and the writer writes the third
   * every round. */
  _Alignas(64) _Atomic uint64_t appended, dropped;
  _Alignas(64) _Atomic int closing;
  _Atomic int sleeping; /* the writer is in a long sleep: an append must wake it */
  _Atomic int idle;     /* the writer is in any wait: a producer facing a full ring wakes it */
  _Atomic int dead;     /* the writer thread has finished */
  _Atomic int waiters;  /* threads in wait_durable */
  _Atomic int failing;  /* the disk refuses writes: written by the writer when it changes */
  _Atomic uint64_t refused_max; /* ALWAYS: the end of the last range of refused tickets */
  _Alignas(64) _Atomic uint64_t rejected;
  _Atomic uint64_t unformatted;  /* appended, then refused by opts.format (also in rejected) */
  _Atomic uint64_t refused;      /* SNAPSHOT_EREFUSED: producers' refusals and the writer's */
  _Atomic uint64_t given_up;     /* of those, records appended that the writer gave up */
  _Atomic uint64_t stalled_tail; /* BLOCK: the ring's tail when an append last gave up */
  _Atomic uint64_t lost;         /* records given up on at close */
  _Atomic uint64_t written, bytes, fsyncs, write_errors, segments;
  _Atomic uint64_t compactions, compact_in, compact_out, compact_ns, compact_cpu_ns, compact_errors;
  _Atomic uint64_t durable_pos, written_pos;
  pthread_mutex_t mu;
  pthread_cond_t wake_cv;    /* the writer sleeps here */
  pthread_cond_t durable_cv; /* waiters sleep here */
  int last_errno;            /* under mu */
  char last_error[SNAPSHOT_ERRLEN];
  int64_t failing_since_ns; /* under mu */
  /* under mu: ALWAYS, the tickets given up, as ranges (from, to], oldest
   * first; a ticket at or below refusals_floor may have been in a range no
   * longer kept, and counts as refused */
  struct {
    uint64_t from, to;
  } refusals[REFUSALS_MAX];
  unsigned nrefusals;
  uint64_t refusals_floor;

  /* recovery results: written before the thread starts, read-only after */
  uint64_t rec_segments, cut_bytes, cut_records, damaged_regions;
  snapshot_repair repairs[SNAPSHOT_REPAIRS_MAX];
  size_t nrepairs;

  /* the writer thread's own */
  int fd; /* current segment, -1 when none */
  char seg_name[SEG_NAME_MAX];
  uint32_t seg_day;
  seg_header hdr;
  seg_index idx;
  uint64_t seg_base; /* file offset where pend starts (all before is synced/written) */
  uint8_t *pend;
  size_t pend_len, pend_cap, pend_written;
  uint64_t pend_pos; /* ring position after the last record in pend */
  uint64_t pend_recs, pend_unwritten_recs;
  uint64_t rpos; /* the consumer's ring position */
  uint64_t last_sync_ms;
  uint32_t backoff_ms;
  uint64_t retry_at_ms;
  idx_mark mark; /* the index at seg_base */
};

/* recover.c: creates dir and its parents (0750). 0, or -1 with errno. */
int writer_mkdir_p(const char *dir);
/* recover.c: removes what a crash left half-made (*.new, *.idx.tmp*). */
void writer_remove_stale_temps(const char *dir);
/* recover.c: scans every segment of L->dir, cuts torn tails, counts damage
 * (L->rec_segments, cut_bytes, ..., repairs); the newest segment, when sound
 * and not full, becomes L's current one. 0, or a SNAPSHOT_E* code with err
 * set. */
int writer_recover(snapshot_log *L, char *err, size_t errlen);

#endif
