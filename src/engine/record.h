/* record.h — the decision snapshot's record, shared by the three files that
 * make it (engine-internal; engine.h has the calls the engine makes):
 *
 *   record.c          the recorder's life cycle: the log, ids, commit, wait,
 *                     refusals, counters; the log's format hook;
 *   record_capture.c  the capture, on the deciding thread: what the payload
 *                     needs from the decision, in a compact binary form
 *                     written straight into a slot of the log's queue;
 *   record_format.c   the payload writer, on the log's writer thread: the
 *                     capture read back and written as the format-1 JSON
 *                     payload (docs/snapshots.md), and the record header.
 *
 * One list drives all three: SNAPSHOT_FIELDS, the payload's members in the
 * order they are written. For each entry NAME the capture calls cap_NAME and
 * the writer fmt_NAME, in the list's order, so the capture is read back in
 * the order it was written. A member written from the capture's head alone
 * (numbers, flags: SNAPSHOT_HEAD) has no cap_NAME (kind HEAD); one with a
 * body of its own (strings, arrays, values) has both (kind BODY).
 *
 * Where a new snapshot field goes:
 *   - a number or flag: one line in SNAPSHOT_HEAD (its type, its name, where
 *     the decision holds it), and either a line in SNAPSHOT_FIELDS with its
 *     fmt_NAME (record_format.c) or a line in the fmt_ of the member that
 *     holds it (latency_ns, limits, inputs, ...);
 *   - anything of variable length: a BODY line in SNAPSHOT_FIELDS, cap_NAME
 *     in record_capture.c and fmt_NAME in record_format.c;
 *   - a field of the record header (what readers filter on without parsing
 *     the payload, snapshot.h): a line in SNAPSHOT_RECORD;
 *   then docs/snapshots.md ("Snapshot contents"), src/replay/ if replay must
 *   feed it back, and tests/engine/test_record_equiv.c's oracle. */
#ifndef VD_ENGINE_RECORD_H
#define VD_ENGINE_RECORD_H

#include <stdint.h>
#include <string.h>

#include "core/json.h"
#include "engine/engine.h"
#include "snapshot/snapshot.h"

/* The payload's members in order: X(NAME, KIND, "first key").
 *   HEAD  written by fmt_NAME from the head (and the strings read before it)
 *   BODY  cap_NAME appends a body to the capture, fmt_NAME reads it back
 * A member's fmt_NAME writes the ',"key":' itself (some write several keys:
 * model writes model_version, features and model). `outcome` writes
 * nothing: it carries the decision's strings ahead of the model, which the
 * trace ("matched") and the record header read before their turn. */
#define SNAPSHOT_FIELDS(X)                  \
  X(id, HEAD, "id")                         \
  X(time, HEAD, "time")                     \
  X(time_ns, HEAD, "time_ns")               \
  X(node, HEAD, "node")                     \
  X(engine_version, HEAD, "engine_version") \
  X(point, BODY, "point")                   \
  X(request, BODY, "request")               \
  X(candidates, BODY, "candidates")         \
  X(key, BODY, "key")                       \
  X(strategy, BODY, "strategy")             \
  X(versions, BODY, "policy_version")       \
  X(outcome, BODY, "")                      \
  X(model, BODY, "model_version")           \
  X(trace, BODY, "trace")                   \
  X(lets, BODY, "lets")                     \
  X(model_score, HEAD, "model_score")       \
  X(action, HEAD, "action")                 \
  X(allowed, HEAD, "allowed")               \
  X(review, HEAD, "review")                 \
  X(confidence, HEAD, "confidence")         \
  X(source, HEAD, "source")                 \
  X(reason, HEAD, "reason")                 \
  X(latency_ns, HEAD, "latency_ns")         \
  X(limits, HEAD, "limits")                 \
  X(inputs, BODY, "inputs")                 \
  X(side, BODY, "side")

/* The capture's head: the fixed-size fields, X(type, name, value) with
 * value an expression over the decision d and the input in (and the locals
 * of capture_into: model, ncounters, source, borrowed). Types largest
 * first, so the struct packs. */
#define SNAPSHOT_HEAD(X)                                                                  \
  X(int64_t, clock_ns, d->clock_ns)                                                       \
  X(uint64_t, ns_parse, d->ns_parse)                                                      \
  X(uint64_t, ns_decide, d->ns_decide)                                                    \
  X(uint64_t, ns_render, d->ns_render)                                                    \
  X(uint64_t, latency_ns, d->latency_ns)                                                  \
  X(uint64_t, cost, d->cost)                                                              \
  X(uint64_t, ns_model, d->ns_model)                                                      \
  X(uint64_t, lim_cost, in->lim->cost_limit)                                              \
  X(uint64_t, lim_regex, in->lim->regex_match_limit)                                      \
  X(uint64_t, lim_memory, in->lim->memory_limit)                                          \
  X(uint64_t, lim_max_request, in->lim->max_request_bytes)                                \
  X(double, confidence, d->confidence)                                                    \
  X(double, model_score, d->model_score)                                                  \
  X(double, model_confidence, d->model_confidence)                                        \
  X(double, floor, d->floor) /* the request's confidence_floor, or -1 */                  \
  X(int32_t, model_class, d->model_class)                                                 \
  X(uint32_t, model_timeout_ms, d->model_timeout_ms)                                      \
  X(uint32_t, rules_total, d->rules_total)                                                \
  X(uint32_t, rules_indexed, d->rules_indexed)                                            \
  X(uint32_t, ntrace, d->ntrace)                                                          \
  X(uint32_t, nlets, d->nlets)                                                            \
  X(uint32_t, nfeatures, model ? d->nfeatures : 0)                                        \
  X(uint32_t, ncandidates, in->req->candidates.n)                                         \
  X(uint32_t, ncounters, ncounters)                                                       \
  X(uint8_t, allowed, d->allowed)                                                         \
  X(uint8_t, review, d->review)                                                           \
  X(uint8_t, model_run, d->model_run)                                                     \
  X(uint8_t, request, in->json ? CAP_REQ_JSON : in->creq ? CAP_REQ_TEXT : CAP_REQ_NONE)   \
  X(uint8_t, source, source) /* snapshot_source, or CAP_SOURCE_TEXT */                    \
  X(uint8_t, matched_rule, source == SNAPSHOT_SRC_RULE)                                   \
  X(uint8_t, borrowed, (uint8_t)borrowed)         /* names as pointers into the bundle */ \
  X(uint8_t, raw_lets, borrowed && d->let_values) /* the let values as an array */

/* The record header (snapshot_rec, snapshot.h) from what the writer read:
 * X(field of snapshot_rec, value) over the head h and the view v. The id is
 * copied as well (16 bytes). */
#define SNAPSHOT_RECORD(X)                                                     \
  X(time_ns, v->h.clock_ns)                                                    \
  X(allowed, v->h.allowed)                                                     \
  X(review, v->h.review)                                                       \
  X(source, v->h.source == CAP_SOURCE_TEXT ? SNAPSHOT_SRC_ERROR : v->h.source) \
  X(confidence, (float)v->h.confidence)                                        \
  X(point, v->point ? v->point : "")                                           \
  X(point_len, v->point_n)                                                     \
  X(action, v->action ? v->action : "")                                        \
  X(action_len, v->action_n)                                                   \
  X(policy_version, v->policy_version)                                         \
  X(policy_version_len, v->policy_version_n)

/* cap_side's first byte: which of the side members follow (none for a
 * decision made outside a rollout, whose bytes stay as they were). */
#define CAP_SIDE_SET 1u       /* "side" */
#define CAP_SIDE_COMPLETES 2u /* "completes": the answered record's id */
#define CAP_SIDE_ROLLOUT 4u   /* "rollout" */
#define CAP_SIDE_ERROR 8u     /* "error": the candidate refused the request (code, message, path) */

#define CAP_NULL 0xFFFFFFFFu /* the length of a NULL string */
#define CAP_SOURCE_TEXT 0xFF /* d->source is not one of the four names: copied */
#define CAP_RULE_ERROR 0x80  /* in a trace entry's result byte: an error follows */

enum { CAP_REQ_NONE, CAP_REQ_JSON, CAP_REQ_TEXT };

/* Value tags: the kinds the writer writes inline, lists and string-keyed
 * maps of them (a count, then the items), and the rest as JSON text written
 * on the deciding thread by json_write. */
enum {
  CV_NULL,
  CV_FALSE,
  CV_TRUE,
  CV_INT,
  CV_STRING,
  CV_DOUBLE,
  CV_JSON,
  CV_ERROR,
  CV_ABSENT,
  CV_LIST,
  CV_MAP,
};

typedef struct cap_head {
  uint8_t id[16]; /* the record's id: the writer makes the record header from the head */
#define X(type, name, value) type name;
  SNAPSHOT_HEAD(X)
#undef X
} cap_head;

/* Whether a let's value in the raw array is whole there (nothing of it
 * follows the array): null, a boolean, an integer, a double, an empty list
 * or map. */
#define RAW_WHOLE ((1u << V_NULL) | (1u << V_BOOL) | (1u << V_INT) | (1u << V_DOUBLE))
#define RAW_EMPTY ((1u << V_LIST) | (1u << V_MAP))

static inline int raw_whole(const value *v) {
  uint32_t k = v->kind < 32 ? 1u << v->kind : 0;
  return (k & RAW_WHOLE) || ((k & RAW_EMPTY) && !v->n);
}

/* n bytes, inline when there are at most 16 (most strings a capture holds
 * are: names, actions, short let values): two overlapping loads and stores
 * within the n bytes, instead of a call. */
static inline __attribute__((always_inline)) void copy_bytes(char *o, const char *s, size_t n) {
  uint64_t a, b;
  uint32_t x, y;
  if (n > 16) {
    memcpy(o, s, n);
  } else if (n >= 8) {
    memcpy(&a, s, 8);
    memcpy(&b, s + n - 8, 8);
    memcpy(o, &a, 8);
    memcpy(o + n - 8, &b, 8);
  } else if (n >= 4) {
    memcpy(&x, s, 4);
    memcpy(&y, s + n - 4, 4);
    memcpy(o, &x, 4);
    memcpy(o + n - 4, &y, 4);
  } else {
    for (size_t i = 0; i < n; i++) o[i] = s[i];
  }
}

/* The writer's cache of names as JSON (record_format.c): a rule, let or
 * feature name, quoted and escaped, by its address in the bundle. */
typedef struct name_entry {
  const char *name; /* NULL: free */
  uint32_t off, len;
} name_entry;

/* The seconds part, "2026-11-29T10:00:00.", of the last time the writer
 * wrote: consecutive snapshots mostly share it. */
typedef struct time_memo {
  int64_t sec;
  size_t n; /* 0: none */
  char text[48];
} time_memo;

typedef struct name_cache {
  name_entry *tab;
  uint32_t cap, used; /* cap: a power of two, or 0 */
  char *text;
  size_t text_len, text_cap;
  time_memo time; /* and the last time's seconds, written */
} name_cache;

void name_cache_clear(name_cache *nc);
void name_cache_free(name_cache *nc);

/* record_capture.c: the request built in C, as the JSON text it stands for
 * (the capture holds it so; the caller's pieces do not outlive the call);
 * ctx: its context built from values (vd_decide_built), else NULL. */
void put_c_request(json_buf *b, const vd_request *r, const value *ctx);

/* record_capture.c: the capture of d appended to c (c may be a slot in the
 * log's queue, with d's arena behind it: what does not fit moves the whole
 * capture there, and c.data changes); source is source_code(d->source),
 * action_n strlen(d->action). 0, or VD_ENOMEM. */
int capture_into(vd_decision *d, const record_input *in, json_buf *c, uint8_t source,
                 size_t action_n);
/* Room enough for the usual capture of d (a larger one still works: the
 * capture grows, or moves out of the queue's slot into d's arena). */
static inline size_t capture_guess(const vd_decision *d, const record_input *in) {
  return 512 + in->json_len + (size_t)d->ntrace * 40 + (size_t)d->nlets * 40 +
         (size_t)d->nfeatures * 24 + (size_t)in->req->candidates.n * 16 +
         (size_t)d->nlimit_reads * 64;
}
/* The snapshot source of d->source ("rule", "model", "default", "error"). */
uint8_t source_code(const char *s);

/* record_format.c: the payload from a capture, appended to out; with hdr,
 * the record header's fields too (its strings point into the capture); id
 * NULL: the id's text from the capture's head; nc NULL: no cache. 0,
 * VD_ENOMEM, or VD_EINVAL for a capture that does not read back. */
int format_capture(const char *capture, size_t clen, const char *id, const char *node,
                   json_buf *out, snapshot_rec *hdr, name_cache *nc);

#endif
