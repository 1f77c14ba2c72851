/* retention.h — a declared retention policy for a snapshot folder: which
 * old snapshots gc keeps (docs/snapshots.md, "The retention file").
 *
 *   keep_days: 7          every snapshot younger is kept whole
 *   keep: 'source != "rule" || review || latency_us > 1000 || shadow.action != action'
 *   sample:               the rest, thinned by class: the first class whose
 *     - if: 'point == "payment"'    `if` holds (or that has none) gives the
 *       rate: 0.1                   share kept, chosen by the id's hash
 *     - rate: 0.01
 *   every: 1h             verdict serve: how often gc runs
 *
 * The conditions are CEL over the snapshot's JSON (its top-level keys as
 * variables) plus latency_us, ctx (request.context), has_shadow and shadow
 * (the snapshot itself when it has none, so that a condition comparing the
 * shadow with the live side reads "agreed", not an error). This module
 * loads and checks the file (errors at file:line:col) and decides one
 * snapshot; it does not walk folders (gc does, src/snapshot/gc.c). */
#ifndef VD_POLICY_RETENTION_H
#define VD_POLICY_RETENTION_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

typedef struct retention retention;

/* Reads and compiles FILE. 0 and *out, or -1 with the problems in d. */
int retention_load(const char *file, retention **out, policy_diags *d);
/* The same from text (file names it in messages). */
int retention_from_text(const char *file, const char *src, size_t len, retention **out,
                        policy_diags *d);
void retention_free(retention *r);

/* Today's rule, the default of every key the file leaves out: keep_days 7;
 * keep `!allowed || review || source == "model" || source == "error" ||
 * confidence < 0.8`; sample 0.01. */
double retention_keep_days(const retention *r);
uint64_t retention_every_ms(const retention *r); /* default 1 hour */

/* Whether an old snapshot (its JSON payload, and its id's sample point in
 * [0, 1): snapshot_sample_point) is kept: 1 keep, 0 not.
 * A condition that fails on it (not a bool, an error) keeps it, and is
 * counted (retention_errors). Not thread-safe: one gc at a time. */
int retention_keeps(retention *r, double sample_point, const char *payload, size_t len);
/* Conditions that failed since the load, and the first message ("" none). */
uint64_t retention_errors(const retention *r, const char **first);

/* A projection of what the folder keeps: of old snapshots, the share kept
 * (keep condition or sample) over those decided so far. Counted by
 * retention_keeps. */
typedef struct retention_counts {
  uint64_t decided, kept_by_condition, kept_by_sample, errors;
} retention_counts;
void retention_counts_get(const retention *r, retention_counts *out);

#endif
