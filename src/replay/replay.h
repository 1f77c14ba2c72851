/* replay.h — re-deciding recorded decisions.
 *
 * replay_run walks a snapshot log (src/snapshot/) and, for every snapshot that
 * passes the filters, decides its recorded request again:
 *   - under the policy version the snapshot records, loaded from the
 *     content-addressed version store (determinism check: everything must
 *     come out the same), or
 *   - under a candidate bundle (opts.policy_dir): what would change.
 * Each result goes to a callback with both sides, so scoring, diffs and
 * reports (score.c, report.c) are built on top without re-reading the log.
 *
 * With opts.workers > 1 the snapshots are decided on that many threads, and
 * the callback still runs on the calling thread, once per snapshot, in the
 * log's order, with what one thread would have handed it: the results are
 * the same whatever the number of workers (only measured times differ).
 * With opts.shard_count, only one shard of the log is replayed (by a stable
 * hash of the snapshot id: replay_shard_of), so that several machines can
 * split one log; docs/replay.md, "Parallel and sharded replay".
 *
 * Replay feeds the recorded nondeterministic inputs (the clock reading, and
 * later counter values and random draws) back into the engine, so a decision
 * is a pure function of what the snapshot holds. */
#ifndef VD_REPLAY_REPLAY_H
#define VD_REPLAY_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"

/* One side of a comparison: what a decision said. Strings are NUL-terminated
 * and valid only during the callback. */
/* What a side's latency_us measures. Only in-process figures (the engine's
 * own parse + decide time) are compared with each other: an HTTP round trip
 * also holds the network and the server's queue. */
enum {
  REPLAY_TIMING_NONE = 0,  /* no latency known */
  REPLAY_TIMING_INPROCESS, /* latency_us: parse + decide inside the engine */
  REPLAY_TIMING_ROUNDTRIP, /* latency_us: only the HTTP round trip is known */
};

typedef struct replay_side {
  const char *action; /* NULL when the decision had no action (error decision) */
  int allowed;        /* 1, 0, or -1 when the answer does not say (a peer's format) */
  int review;
  const char *source; /* "rule", "model", "default", "error" */
  const char *rule;   /* NULL when no rule decided */
  double confidence;
  const char *policy_version; /* the strategy version that decided */
  double latency_us;          /* parse + decide (as vd_decision_latency_us): as recorded / as
                                 measured in this replay; see timing */
  const char *reason;         /* the reason message, or NULL (not part of `same`) */
  /* What the answer names for audit: the id its record can be found by
   * (a snapshot id), and the model version when a model decided. */
  const char *decision_id;
  const char *model_version;
  int timing;    /* REPLAY_TIMING_* */
  double rtt_us; /* the HTTP round trip, when the side answered over HTTP; else 0 */
  /* With replay_opts.time_reference: the thread CPU time of this decision
   * and of the recorded version deciding the same request right beside it
   * (0: not timed). A recording and a replay run at other times under
   * other loads; the ratio of these two does not depend on the load (CPU
   * time leaves out the preemptions a busy machine adds to wall time), so
   * the scorer puts this side's timing on the recording's scale with it. */
  double cpu_us;
  double reference_cpu_us;
  /* A rollout's off-path side that refused the request (the snapshot's
   * "error"): its code name and message, the outcome compared; NULL for a
   * decision. */
  const char *error_code;
  const char *error_message;
} replay_side;

typedef struct replay_item {
  const uint8_t *id;        /* 16 bytes */
  const char *id_text;      /* 36 characters */
  int64_t time_ns;          /* when the recorded decision was made */
  const char *point;        /* decision point */
  const char *key;          /* request key ("" when none) */
  const char *request_json; /* the request as recorded (compact JSON) */
  size_t request_len;
  replay_side recorded;
  replay_side replayed; /* valid when error == 0 */
  int error;            /* 0, or the negative VD_E* code the replay got */
  const char *error_message;
  int same;     /* action, allowed, source, rule and confidence all equal */
  int complete; /* the snapshot carries every field docs/snapshots.md requires */
  /* The rule, tried by the recorded decision, that reads a field its
   * strategy keeps out of snapshots (`snapshot: {mask, hash}`): the
   * decision cannot be re-proven from the snapshot, and is counted in
   * stats.masked, not as reproduced or changed. NULL: none. */
  const char *masked;
  uint64_t cpu_ns;  /* CPU time of this replayed decision (thread CPU clock) */
  const char *side; /* a rollout's "side" (live, shadow, canary), or NULL */
  int completes;    /* the off-path decision of a rollout: it completes another
                     * snapshot (skipped when scoring a candidate bundle) */
  uint64_t seq;     /* its place among the snapshots that pass the filters, from
                     * 0, counting every shard's: the order a merge restores */
} replay_item;

/* Return non-zero to stop the walk. */
typedef int (*replay_cb)(void *user, const replay_item *item);

typedef struct replay_opts {
  const char *snapshots_dir;  /* required */
  const char *policy_dir;     /* NULL: each snapshot's recorded version from the store */
  const char *store_dir;      /* the version store; NULL: `versions` beside the snapshot
                                 folder (<bundle>/.verdict/snapshots ->
                                 <bundle>/.verdict/versions, the defaults of verdict decide) */
  int64_t since_ns, until_ns; /* 0: no bound */
  const char *point;          /* filters; NULL: any */
  const char *action;
  const char *source;
  const char *policy_version;
  uint64_t limit; /* 0: all */
  /* With policy_dir: also decide each request under its recorded version
   * (when the store has it) and time it (replay_side.reference_us). */
  int time_reference;
  /* Threads deciding: 0 or 1 the calling thread alone; at most
   * REPLAY_MAX_WORKERS. */
  int workers;
  /* Sharding: 0 none; else only the snapshots whose id falls in shard
   * shard_index (replay_shard_of(id) == shard_index). `limit` then counts
   * the shard's own snapshots. */
  uint32_t shard_index, shard_count;
} replay_opts;

#define REPLAY_MAX_WORKERS 256

/* The shard of a snapshot: FNV-1a 64 of its id text (the 36 characters of
 * the UUID, lower-case hex with dashes, as every report prints it), mod
 * count (count >= 1). Stable across machines and versions. */
uint32_t replay_shard_of(const char *id_text, uint32_t count);

typedef struct replay_stats {
  uint64_t seen;       /* snapshots that passed the filters */
  uint64_t replayed;   /* decided again */
  uint64_t reproduced; /* same == 1 */
  uint64_t changed;    /* same == 0 */
  uint64_t errors;     /* could not be replayed (missing version, bad request) */
  uint64_t incomplete; /* complete == 0 */
  uint64_t masked;     /* replayed, but read a masked field: cannot be re-proven */
  uint64_t passed;     /* snapshots that passed the filters, every shard's (when the
                        * walk went to the end of the log) */
  char policy_version[65]; /* with policy_dir: the candidate bundle's version */
} replay_stats;

/* Counts one item as replay_run does before handing it over (seen, replayed,
 * reproduced, changed, errors, incomplete, masked): for a caller feeding
 * items it kept (a merge of shards). */
void replay_stats_count(replay_stats *st, const replay_item *it);

/* A copy of *src whose strings (and id) live in a: for a caller keeping
 * items past the callback. 0, or -1 when out of memory. */
int replay_item_keep(arena *a, replay_item *dst, const replay_item *src);

/* Returns 0 (also when some items failed: see stats.errors), or -1 with a
 * message in err when the walk itself could not run (no such directory,
 * no bundle, unreadable log). */
int replay_run(const replay_opts *opts, replay_cb cb, void *user, replay_stats *stats, char *err,
               size_t errlen);

#endif
