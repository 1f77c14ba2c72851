/* shard.h — one shard's replay report and the merge of the shards' reports.
 *
 * `verdict replay --shard I/N` replays the snapshots whose id falls in
 * shard I (replay_shard_of) and its JSON report carries, beside the figures,
 * a "shard" member: which shard, the run's identity (mode, candidate policy
 * version, service, filters, weights, labels) and every decision as the
 * scorer took it (shard_log). `verdict replay --merge` reads the N reports,
 * checks they are the N shards of one run, puts the decisions back in the
 * log's order (replay_item.seq) and feeds them to a fresh scorer: the
 * merged report is then the whole run's, figure for figure (percentiles
 * included, which no summary could give), not an approximation of it.
 * docs/replay.md, "Parallel and sharded replay", has the format. */
#ifndef VD_REPLAY_SHARD_H
#define VD_REPLAY_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "replay/replay.h"
#include "replay/score.h"

/* The decisions of a shard, kept as the scorer took them. */
typedef struct shard_log shard_log;

shard_log *shard_log_new(void); /* NULL when out of memory */
/* Copies it (and its label, may be NULL). 0, or -1 when out of memory. */
int shard_log_add(shard_log *l, const replay_item *it, const char *label);
void shard_log_free(shard_log *l);

/* What names the run a shard belongs to. Strings may be NULL. */
typedef struct shard_run {
  uint32_t index, count;
  uint64_t passed;            /* snapshots passing the filters, every shard's */
  const char *mode;           /* score_mode_name */
  const char *policy_version; /* the candidate bundle's version */
  const char *against;        /* the service's URL */
  const char *filters;
  score_weights weights;
  int have_labels;
  uint64_t labels_loaded;
} shard_run;

/* The "shard" member's value (an object) appended to b. */
void shard_json(json_buf *b, const shard_run *run, const shard_log *l);

/* The shards merged: the decisions in the log's order and what the
 * report's headings need, from the first file. */
typedef struct shard_merged {
  shard_run run;
  score_mode mode;
  const char *snapshots, *policy, *labels_path; /* as the first shard's report names them */
  double wall_seconds;                          /* the longest shard's */
  long peak_rss_kb;                             /* the largest shard's */
  replay_item *items;                           /* n, by seq */
  const char **labels;                          /* each item's label, or NULL */
  size_t n;
  void *mem; /* everything above points here */
} shard_merged;

/* Reads and checks the reports (each must be a shard's; all of one run: the
 * same count, mode, candidate version, service, filters, weights, labels and
 * log; every shard once; no snapshot twice). 0, or -1 with a message naming
 * the file in err. */
int shard_merge(const char *const *files, size_t n, shard_merged *out, char *err, size_t errlen);
void shard_merged_free(shard_merged *m);

#endif
