/* score.h — scoring a replay: an accumulator fed one replay_item at a time
 * (replay.h), and the figures it ends with.
 *
 * What it counts: replayed / reproduced / changed / errors; the changed
 * decisions by action transition ("allow -> block": n) and by rule ("old rule
 * -> new rule"), each with up to SCORE_EXAMPLES example snapshot ids; label
 * accuracy of the recorded and of the replayed decisions with a confusion
 * table; latency percentiles of both sides; CPU ns per replayed decision;
 * peak memory; snapshot completeness. From these, the score of both sides
 * (the recorded decisions and the replayed ones) out of 100 over four
 * weighted categories, the same for both and measured the same way, overall
 * and per decision point: the sides comparison below does that, and
 * docs/replay.md has the formula.
 *
 * score = 100 * sum(w_i * s_i) / sum(w_i) over the categories scored.
 *
 * Percentiles come from a log-linear histogram (64 buckets per power of two):
 * within 0.8% of the exact nearest-rank value, in fixed memory, whatever the
 * size of the log. Not thread-safe: one accumulator per walk. */
#ifndef VD_REPLAY_SCORE_H
#define VD_REPLAY_SCORE_H

#include <stddef.h>
#include <stdint.h>

#include "replay/replay.h"

#define SCORE_EXAMPLES 3
#define SCORE_ID_TEXT 37

/* ---- a latency / CPU histogram (values in ns) ---- */
#define SCORE_HIST_SUB 64 /* buckets per power of two */
#define SCORE_HIST_BUCKETS (2 * SCORE_HIST_SUB + 57 * SCORE_HIST_SUB)

typedef struct score_hist {
  uint64_t count;
  uint64_t min, max; /* exact; min is UINT64_MAX while empty */
  double sum;
  uint64_t buckets[SCORE_HIST_BUCKETS];
} score_hist;

void score_hist_init(score_hist *h);
void score_hist_add(score_hist *h, uint64_t ns);
/* Nearest-rank percentile p in [0, 1] (the smallest value with at least
 * p * count values at or below it), to within one bucket; 0 when empty.
 * p = 1 gives max exactly, p = 0 min. */
uint64_t score_hist_percentile(const score_hist *h, double p);
/* The number of values in [lo, hi) ns, to bucket precision (a bucket counts
 * where its lower bound falls). */
uint64_t score_hist_count_range(const score_hist *h, uint64_t lo, uint64_t hi);

/* ---- weights ---- */
typedef struct score_weights {
  double accuracy, latency, cost, audit;
} score_weights;

void score_weights_default(score_weights *w); /* 40, 20, 20, 20 */
/* "40,20,20,20": four non-negative numbers, not all zero (they need not add
 * up to 100: the score divides by their sum). 0, or -1 with a message. */
int score_weights_parse(const char *s, score_weights *w, char *err, size_t errlen);

/* ---- labels: the correct action for a snapshot id or a request key ---- */
typedef struct score_labels score_labels;

/* Reads JSON Lines, one {"id": "<snapshot id>", "action": "..."} or
 * {"key": "<request key>", "action": "..."} a line (both id and key may be
 * given; blank lines are skipped). A second line for the same id or key
 * with another action is an error naming both lines. 0, or -1 with a
 * message naming the file and line. */
int score_labels_load(const char *path, score_labels **out, char *err, size_t errlen);
/* The same from text in memory (tests); name is used in messages. */
int score_labels_parse(const char *name, const char *text, size_t len, score_labels **out,
                       char *err, size_t errlen);
/* The label for a snapshot: by id first, then by key (when key is not "").
 * NULL when neither has one. */
const char *score_labels_find(const score_labels *l, const char *id_text, const char *key);
size_t score_labels_count(const score_labels *l);
void score_labels_free(score_labels *l);

/* ---- the accumulator ---- */
typedef enum score_mode {
  SCORE_DETERMINISM = 0, /* recorded versions: everything must reproduce */
  SCORE_CANDIDATE = 1,   /* a candidate bundle against recorded traffic */
  SCORE_AGAINST = 2,     /* another decision service against recorded traffic */
} score_mode;

const char *score_mode_name(score_mode m); /* "determinism", "candidate", "against" */

/* One row of a tally: `from -> to` seen `count` times. For confusion rows,
 * from is the label and to the decided action. */
typedef struct score_row {
  const char *from;
  const char *to;
  uint64_t count;
  int nexamples;
  char examples[SCORE_EXAMPLES][SCORE_ID_TEXT];
} score_row;

typedef struct score_dist {
  uint64_t count;
  double mean, p50, p90, p99, max; /* in the unit of the field (us or ns) */
} score_dist;

enum { SCORE_CAT_ACCURACY, SCORE_CAT_LATENCY, SCORE_CAT_COST, SCORE_CAT_AUDIT, SCORE_NCAT };

typedef struct score_category {
  const char *name; /* "accuracy", "latency", "cost", "audit" */
  double weight;    /* as given */
  int scored;       /* 0: left out of the score (basis says why) */
  double value;     /* 0..1 */
  double points;    /* contribution to the score out of 100 */
  double measure;   /* what was measured: a share, us, ... */
  char basis[400];  /* what the value is based on, for people */
} score_category;

/* ---- sides: systems scored side by side on the same decisions ----
 *
 * The fair comparison the replay report and the rollout report share. Each
 * decision is fed once with every side's answer (NULL: the side gave none),
 * and every side is scored on the same categories, each measured the same
 * way for all of them:
 *
 *   accuracy  the share of labelled decisions whose action is the label
 *             (the same labelled decisions for every side); without labels,
 *             not scored, unless the comparison was opened to score
 *             agreement with side 0 (the determinism check)
 *   latency   p99 of the in-process latency (the engine's parse + decide
 *             time: what a snapshot records and what an in-process replay
 *             measures); scored only when every answer of every side has
 *             one: a side known only by an HTTP round trip leaves latency
 *             unscored for all, and the report says why
 *   cost      the mean of the same in-process time per decision (snapshots
 *             record no CPU time, so CPU cannot be compared; the replay's
 *             own CPU time is reported beside, unscored); unscored as latency
 *   audit     what each side's answers name: an id (its record), a reason
 *             (a rule or a message) and its versions (the policy version,
 *             and the model version when a model decided): the share of
 *             those three over all decisions (no answer: none of them)
 *
 * Side 0 is the reference (the recording, or a rollout's live side). Two
 * timings of the same code differ from run to run on a busy machine, so a
 * side whose latency or cost measure is within SCORE_TIE_FACTOR of the
 * reference's is a tie and gets the reference's value: an identical bundle
 * replayed against its own recording scores exactly the recording's score.
 *
 * The same figures per decision point (points sorted by name). */
#define SCORE_MAX_SIDES 4
#define SCORE_TIE_FACTOR 2.0

typedef struct score_side_result {
  const char *name;
  uint64_t decisions; /* fed */
  uint64_t errors;    /* of them, without an answer from this side */
  uint64_t agreed;    /* answers the caller marked the same as side 0's */
  uint64_t labelled, correct;
  double accuracy;       /* correct / labelled; 0 when none */
  uint64_t timed;        /* answers with an in-process latency */
  uint64_t round_trips;  /* answers timed only as an HTTP round trip */
  score_dist latency_us; /* in-process */
  score_dist rtt_us;     /* HTTP round trips (count 0 when in-process) */
  /* the reference's version timed beside each answer (replay_side.cpu_us and
   * reference_cpu_us, CPU time): when every timed answer has one, this
   * side's timing is put on side 0's scale by the ratio of the two */
  uint64_t referenced;
  score_dist cpu_us, reference_cpu_us;
  uint64_t audit_id, audit_reason, audit_version; /* answers naming each */
  double audit_share;
  score_category cat[SCORE_NCAT];
  double score; /* 0..100 */
} score_side_result;

typedef struct score_point_result {
  const char *point;
  score_side_result *sides; /* nsides */
} score_point_result;

typedef struct score_comparison {
  int nsides;
  score_side_result sides[SCORE_MAX_SIDES]; /* over all decisions */
  const score_point_result *points;         /* by decision point, sorted by name */
  size_t npoints;
} score_comparison;

typedef struct score_sides score_sides;

/* nsides in 2..SCORE_MAX_SIDES; names (copied) label the sides in the
 * report; agreement_accuracy: without labels, score accuracy as the share
 * of answers marked the same as side 0's. NULL when out of memory. */
score_sides *score_sides_new(int nsides, const char *const *names, const score_weights *w,
                             int agreement_accuracy);
/* One decision: answers[i] is side i's answer or NULL; same[i] (may be
 * NULL) whether it is the same as side 0's; label the correct action or
 * NULL. 0, or -1 when out of memory. */
int score_sides_add(score_sides *s, const char *point, const replay_side *const *answers,
                    const int *same, const char *label);
/* The figures into *out, valid until s is fed again or freed. */
void score_sides_finish(score_sides *s, score_comparison *out);
void score_sides_free(score_sides *s);

typedef struct score_side {
  score_dist latency_us;
  uint64_t labelled, correct; /* against labels */
  double accuracy;            /* correct / labelled; 0 when none */
} score_side;

typedef struct score_report {
  score_mode mode;
  uint64_t seen;       /* items fed */
  uint64_t replayed;   /* error == 0 */
  uint64_t reproduced; /* replayed and same */
  uint64_t changed;    /* replayed and not same */
  uint64_t masked;     /* replayed, but read a masked field (replay_item.masked): neither */
  uint64_t errors;     /* error != 0 */
  uint64_t complete;   /* complete == 1 */
  /* what changed, among `changed` (one decision may count in several) */
  uint64_t changed_action;  /* the action differs */
  uint64_t changed_allowed; /* allowed differs */
  uint64_t changed_rule;    /* the deciding rule (or the source, when no rule) differs */
  uint64_t changed_other;   /* action and rule the same: confidence, review or source */

  const score_row *transitions; /* action changes, most frequent first */
  size_t ntransitions;
  const score_row *rule_changes; /* rule changes, most frequent first */
  size_t nrule_changes;
  const score_row *error_kinds; /* replay errors: from = point, to = message */
  size_t nerror_kinds;

  /* labels */
  int have_labels;      /* a labels file was given */
  size_t labels_loaded; /* entries in it */
  uint64_t labelled;    /* snapshots that had a label */
  score_side recorded, replayed_side;
  const score_row *confusion_recorded; /* label -> recorded action */
  size_t nconfusion_recorded;
  const score_row *confusion_replayed; /* label -> replayed action ("(error)" if none) */
  size_t nconfusion_replayed;

  score_dist cpu_ns; /* replayed decisions with a CPU time */
  long peak_rss_kb;  /* getrusage(RUSAGE_SELF).ru_maxrss at score_finish */
  double complete_share;
  double reproduced_share;

  score_weights weights;
  score_category cat[SCORE_NCAT];
  double score; /* 0..100 */
  /* The recorded side scored with what can be measured for it (accuracy by
   * labels, recorded latency, audit; CPU is not recorded): candidate and
   * against modes only (has_recorded_score). */
  int has_recorded_score;
  score_category recorded_cat[SCORE_NCAT];
  double recorded_score;

  /* recorded (side 0) and replayed (side 1), overall and per point: the
   * source of cat, recorded_cat, score and recorded_score */
  score_comparison cmp;

  const score_hist *latency_hist;          /* replayed latency, ns */
  const score_hist *recorded_latency_hist; /* recorded latency, ns */
} score_report;

typedef struct score_acc score_acc;

/* labels may be NULL; it must outlive the accumulator. weights NULL: the
 * defaults. NULL when out of memory. */
score_acc *score_new(score_mode mode, const score_weights *weights, const score_labels *labels);
/* Counts one item. 0, or -1 when out of memory (the item is then only
 * partly counted). */
int score_add(score_acc *s, const replay_item *it);
/* Computes the figures into *out, which stays valid (its rows and
 * histograms point into s) until s is fed again or freed. May be called
 * more than once. */
void score_finish(score_acc *s, score_report *out);
void score_free(score_acc *s);

/* The category formulas, exposed for tests and docs: each maps a measure to
 * 0..1. */
double score_latency_value(double p99_us);
double score_cost_value(double cpu_us);

#endif
