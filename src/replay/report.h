/* report.h — a scored replay for people and programs: the terminal summary,
 * JSON, and a self-contained HTML page (inline CSS and SVG, no external
 * resource, so it can be mailed or attached to a review as one file).
 *
 * The figures come from score.h; this module only presents them, plus the
 * list of decisions that did not reproduce (or changed), which the caller
 * collects while the walk runs (report_failures_add). */
#ifndef VD_REPLAY_REPORT_H
#define VD_REPLAY_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "core/json.h"
#include "replay/replay.h"
#include "replay/score.h"

/* One decision that did not reproduce (or could not be replayed), copied
 * out of its replay_item. */
typedef struct report_failure {
  char id[SCORE_ID_TEXT];
  char *point, *key;
  char *rec_action, *rec_rule, *rec_source;
  char *rep_action, *rep_rule, *rep_source; /* NULL when error */
  double rec_confidence, rep_confidence;
  int rec_allowed, rep_allowed;
  char *error; /* the replay error, or NULL */
} report_failure;

typedef struct report_failures {
  report_failure *items;
  size_t n, cap;
  size_t limit;     /* keep at most this many (0: 10000) */
  uint64_t omitted; /* not kept because of the limit */
} report_failures;

void report_failures_init(report_failures *f, size_t limit);
/* Copies what the report needs from it. 0, or -1 when out of memory. */
int report_failures_add(report_failures *f, const replay_item *it);
void report_failures_free(report_failures *f);

/* One line for one failure, as the determinism check prints it:
 *   0193...  http_request  allow (rule cn-api-v1, 1.00) -> block (rule flood, 1.00) */
void report_failure_line(FILE *out, const replay_item *it);

/* What was run, for the headings. Strings may be NULL. */
typedef struct report_info {
  const char *snapshots_dir;
  const char *policy_dir;  /* candidate bundle */
  const char *against_url; /* remote service */
  const char *labels_path;
  const char *filters;  /* a description of the filters given, or NULL */
  double wall_seconds;  /* the whole walk */
  int64_t generated_ns; /* unix ns, for the page's date */
  const replay_stats *stats;
  const report_failures *failures;
  /* More members for the JSON object, written as given before its end
   * ("name":value pairs, comma-separated; a shard's "shard"): NULL none. */
  const char *extra_json;
  size_t extra_len;
} report_info;

/* The terminal summary. */
void report_text(FILE *out, const score_report *r, const report_info *info);
/* The JSON document (one object, no newline). 0, or -1 when out of memory. */
int report_json(json_buf *b, const score_report *r, const report_info *info);
/* The HTML page. 0, or -1 when writing failed. */
int report_html(FILE *out, const score_report *r, const report_info *info);

/* Several candidates replayed over the same snapshots (reps[i] and
 * infos[i] from one walk each, in the order given): each one's report,
 * then the recording and every candidate side by side, overall and per
 * decision point. The JSON is {"mode": "candidates", "sides": [...],
 * "points": [...], "candidates": [each one's report]}. */
void report_text_candidates(FILE *out, const score_report *reps, const report_info *infos,
                            size_t n);
int report_json_candidates(json_buf *b, const score_report *reps, const report_info *infos,
                           size_t n);
int report_html_candidates(FILE *out, const score_report *reps, const report_info *infos, size_t n);

/* The page's pieces, for another report in the same style (verdict
 * rollout): the head with the shared style sheet and an <h1> (title and
 * heading are HTML text, given trusted), the end with a footer (HTML
 * text), text escaped for HTML, a figure card (cls "", "good" or "bad"), a
 * table of from -> to rows with counts, shares of `of` and example ids (from
 * and to name the columns), and a latency table of two distributions (us). */
void report_html_open(FILE *out, const char *title, const char *heading);
int report_html_close(FILE *out, const char *footer); /* 0, or -1 when writing failed */
void report_html_esc(FILE *out, const char *s);
void report_html_card(FILE *out, const char *figure, const char *label, const char *cls);
void report_html_rows(FILE *out, const score_row *rows, size_t n, uint64_t of, const char *from,
                      const char *to);
void report_html_dist_table(FILE *out, const char *a, const score_dist *da, const char *b,
                            const score_dist *db);

#endif
