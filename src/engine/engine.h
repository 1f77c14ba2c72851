/* engine.h — what the engine's files share: the request as values, the
 * decision record, and the three stages of a decision.
 *
 *   request.c  request JSON (or a vd_request built in C) -> decide_request
 *   decide.c   a bundle + a request -> the strategy's rules, limits, lets and
 *              model evaluated (decide.h: what it shares with the next)
 *   decide_outcome.c  what they found -> the outcome, written into vd_decision
 *   render.c   vd_decision -> decision JSON (into the decision's arena)
 *   decision.c vd_decision's lifecycle and accessors, vd_error helpers
 *   names.c    a strategy's let and constant names in a hash table
 *   engine.c   vd_engine: the live bundle under RCU, reload, the public calls
 *   record.c   the decision snapshot's life cycle: the log, id, commit, wait;
 *              record_capture.c (deciding thread) and record_format.c
 *              (writer thread) make it from the field list in record.h,
 *              where a new snapshot field goes
 *
 * Everything a decision allocates comes from the decision's arena, which is
 * reset (not freed) when the decision object is reused, so that a warmed-up
 * vd_decision decides without calling malloc. Strings a decision keeps are
 * copied into that arena while the bundle is still held, so a decision stays
 * readable after a reload frees the bundle that made it.
 *
 * Not here: policy loading and the rule index (src/policy/), expression
 * evaluation (src/expr/). */
#ifndef VD_ENGINE_ENGINE_H
#define VD_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/value.h"
#include "policy/policy.h"
#include "state/state.h"
#include "verdict.h"

/* Limits applied to each decision. */
typedef struct decide_limits {
  uint64_t cost_limit;
  uint32_t regex_match_limit;
  size_t memory_limit;
  size_t max_request_bytes;
} decide_limits;

#define DECIDE_DEFAULT_COST_LIMIT 1000000u
#define DECIDE_DEFAULT_REGEX_LIMIT 100000u
#define DECIDE_DEFAULT_MEMORY_LIMIT ((size_t)64 << 20)
#define DECIDE_DEFAULT_MAX_REQUEST ((size_t)1 << 20)

/* Fills *lim from opts (NULL: all defaults). */
void decide_limits_init(decide_limits *lim, const vd_engine_opts *opts);

/* A request, as values (in the decision's arena, or anywhere that outlives
 * the decision call). */
typedef struct decide_request {
  value action;     /* string */
  value candidates; /* list of strings; empty when none were given */
  value key;        /* string; "" when none */
  value context;    /* map */
} decide_request;

/* What happened to one rule, for the trace. */
typedef enum rule_result {
  RR_FALSE,
  RR_TRUE,
  RR_ERROR,
  RR_NOT_CANDIDATE, /* passed over: its action is not among the candidates */
} rule_result;

typedef struct trace_rule {
  const char *name;  /* copied into the decision's arena */
  const char *error; /* RR_ERROR: the message; else NULL */
  uint8_t result;    /* rule_result */
} trace_rule;

/* What a decision read from one of its strategy's limits (decide.c). */
typedef struct limit_read {
  uint8_t state;   /* LIMIT_* */
  const char *key; /* in the decision's arena */
  uint32_t key_len;
  limit_reading r; /* count and penalty before this decision; what it did */
  value v;         /* `limits.NAME` as rules see it */
} limit_read;

enum { LIMIT_UNREAD = 0, LIMIT_READ, LIMIT_FAILED };

struct vd_decision {
  arena mem;
  int trace_on;
  /* The trace is on only for the snapshot: its names point into the bundle
   * instead of being copied, and the engine forgets them once the snapshot
   * is built, before the bundle may go (engine.c, decide_live). */
  int trace_borrow;
  int decided; /* the fields below hold a decision */

  /* the outcome (strings in mem) */
  const char *action; /* NULL: an error decision with no action */
  bool allowed, review;
  double confidence;
  const char *source; /* "rule" | "default" | "error" (static strings) */
  const char *rule;   /* NULL when none */
  const char *reason; /* NULL when none */
  const char *strategy;
  char policy_version[65];

  /* stage times in ns (parse and decide only when tracing), and the
   * request-to-decision latency */
  uint64_t ns_parse, ns_decide, ns_render;
  uint64_t latency_ns;
  double latency_us;

  /* the trace (filled only when trace_on) */
  trace_rule *trace;
  uint32_t ntrace;
  uint32_t rules_total;   /* rules in the strategy */
  uint32_t rules_indexed; /* rules the index left to consider */
  const char **lets;      /* names of the lets computed, in order */
  uint32_t nlets;
  const char *no_candidate; /* what the candidates changed (thresholds, on_no_candidate), or NULL */
  /* the request's context.confidence_floor (-1: none sent), and the action
   * the floor replaced by the review action (NULL: it replaced none) */
  double floor;
  const char *floor_from;
  uint64_t cost;     /* evaluation work spent */
  value *let_values; /* parallel to lets: each let's value (V_ERROR if it failed) */

  /* the fallback model, when this decision asked it (decide.c): on the
   * first read of `model` by a rule, or when no rule decided */
  uint8_t model_run;         /* MODEL_* */
  int8_t model_replay;       /* replay: -1 live clock, 0 the recorded deadline was met, 1 missed */
  const char *model_name;    /* in mem */
  char model_version[65];    /* the model file's SHA-256 */
  char features_version[65]; /* the feature spec's SHA-256 */
  double model_score;        /* binary: P(positive); multiclass: the top class's probability */
  double model_confidence;   /* gbdt_confidence (NaN for regression) */
  int32_t model_class;       /* multiclass: the top class; -1 otherwise */
  uint32_t model_timeout_ms;
  uint32_t nfeatures;
  const char **feature_names; /* in mem */
  float *features;            /* the row the model scored (NaN: missing) */
  uint8_t *feature_status;    /* feature_status per feature (model.h) */
  const char *feature_error;  /* the first extraction error, or NULL */
  uint64_t ns_model;          /* features + scoring */

  /* limits: the counter store the engine lends this decision (NULL: none —
   * every counter reads as empty and nothing is kept), or the readings fed
   * back instead (replay: the snapshot's inputs.counters; `verdict test`: a
   * test's counters), a map by limit name (NULL: the store) */
  state_store *state;
  const value *counters_in;
  limit_read *limit_reads; /* one per limit of the strategy; NULL until one is read */
  uint32_t nlimit_reads;
  const strategy *limits_of; /* whose limits limit_reads follows (names in the bundle) */
  /* where limit_reads lives: malloc'd, kept across decisions (decision_reset
   * keeps it; vd_decision_free frees it), so that a decision with limits
   * allocates nothing for them; room for limit_room_n readings and a key
   * room each (decide.c) */
  void *limit_room;
  uint32_t limit_room_n;

  /* request.time: the wall clock read once per decision (unix ns), or the
   * recorded reading fed back by replay; decision_time() reads the clock on
   * first use when the caller has not set it */
  int64_t clock_ns;
  bool clock_set;

  /* the snapshot (record.c): NULL when snapshots are off or this decision
   * could not be recorded; the text lives in snapshot_id_buf */
  const char *snapshot_id;
  char snapshot_id_buf[40];
  char bundle_version[65]; /* the bundle that decided (for the snapshot) */
  /* the decision JSON without flags, rendered in the decide path when it is
   * traced (decision_answer) or by the first vd_decision_render, which hands
   * it out afterwards instead of rendering again; NULL until then, or when
   * it must be rendered again */
  const char *answer;
  size_t answer_len;
};

enum { MODEL_NOT_RUN = 0, MODEL_SCORED, MODEL_DEADLINE, MODEL_MISSING };

/* Forgets the previous decision and resets the arena (keeping its memory). */
void decision_reset(vd_decision *d);
/* Chunks the decision's arena has malloc'd since it was created: flat after
 * warm-up when deciding allocates nothing outside the arena. */
size_t decision_arena_mallocs(const vd_decision *d);

/* request.c: parse request JSON into req (values in a). */
/* 1 when s[0..n) can follow "$." in a JSON path (letters, digits, _; not a
 * digit first); other keys are written $["…"]. */
int request_is_ident(const char *s, size_t n);
int request_parse_json(arena *a, const char *json, size_t len, const decide_limits *lim,
                       decide_request *req, vd_error *err);
/* request.c: the same from a vd_request (its context JSON is parsed into a). */
int request_from_c(arena *a, const vd_request *r, const decide_limits *lim, decide_request *req,
                   vd_error *err);
/* request.c: the same from a vd_request with a context built from values
 * (vd_decide_built; r->context_json must be NULL): ctx is the builder's
 * root, ctx_bytes its size as compact JSON, held with the rest of the
 * request to max_request_bytes. */
int request_from_built(arena *a, const vd_request *r, const value *ctx, size_t ctx_bytes,
                       const decide_limits *lim, decide_request *req, vd_error *err);
/* builder.c: the context a builder holds (its root, and its size as
 * compact JSON), or the builder's error, its path under "$.context". */
int builder_context(const vd_builder *b, value *root, size_t *json_bytes, vd_error *err);

/* names.c: one strategy's lets and constants by name. */
typedef struct name_slot {
  const char *name; /* NULL: empty slot */
  uint32_t len;
  int32_t let;           /* index into strategy.lets, or -1 */
  const value *constant; /* when let < 0 */
} name_slot;

typedef struct name_table {
  name_slot *slots;
  uint32_t mask;
} name_table;

int name_table_build(arena *a, const strategy *s, name_table *t);
/* The slot for name, or NULL when the strategy binds no such name. */
const name_slot *name_table_find(const name_table *t, const char *name, size_t len);
/* One table per strategy of b, in b's order, allocated from a; NULL on OOM. */
name_table *name_tables_build(arena *a, const policy_bundle *b);

/* decide.c: runs the strategy serving req->action in b and writes the
 * outcome into d (whose arena is used for everything). names, when not
 * NULL, are b's name tables (name_tables_build); without them names are
 * found by scanning. Returns 0, or a negative VD_E* code with err filled
 * (VD_ENOTFOUND, VD_ENOCANDIDATE, VD_ENOMEM). d->ns_* and latency are left
 * to the caller. */
int decide_run(const policy_bundle *b, const name_table *names, const decide_request *req,
               const decide_limits *lim, vd_decision *d, vd_error *err);

/* decide.c: the default meaning of an action name (docs/policy.md) for
 * names a strategy does not declare. */
void action_name_defaults(const char *name, size_t len, bool *allowed, bool *review);

/* render.c: writes the decision JSON into d's arena. */
int decision_render(vd_decision *d, int flags, const char **out, size_t *len);
/* render.c: the answer (the decision JSON without flags) into d->answer,
 * which vd_decision_render hands out. The engine renders a traced decision's
 * answer here, in the decide call (so every recorded one, snapshots on
 * meaning traced), timed as the render stage (d->ns_render, which the
 * snapshot and the trace report); an untraced one is rendered by the first
 * vd_decision_render instead. */
void decision_answer(vd_decision *d);

/* The engine's names for core's error filling (core/error.h). */
#define engine_error error_fill
#define engine_error_clear error_clear

/* engine.c: the version store an engine opened on bundle with opts keeps
 * (vd_engine_opts.store_dir): that folder when given ("" none), else
 * `versions` beside the snapshot folder when snapshots are on (where replay
 * looks for it: <bundle>/.verdict/snapshots -> <bundle>/.verdict/versions),
 * else <bundle>/.verdict/versions. *out is malloc'd, or NULL for no store.
 * Returns 0, or -1 when out of memory. */
int engine_store_path(const char *bundle, const char *store_dir, const char *snapshots_dir,
                      char **out);

/* decision.c: request.time for this decision as a timestamp value: the
 * clock reading set by the engine (or by replay), read now if unset. */
value decision_time(vd_decision *d);

/* engine.c: decides request JSON against b as vd_decide_json does — same
 * parsing, same stages, same latency fields — except that request.time is
 * clock_ns (unix ns) instead of a clock reading, and nothing is recorded.
 * Replay uses it to re-run a snapshot; names may be NULL (scan). */
int engine_decide_json_at(const policy_bundle *b, const name_table *names, const decide_limits *lim,
                          const char *json, size_t len, int64_t clock_ns, vd_decision *d,
                          vd_error *err);

/* engine.c: the same for replay: model_deadline is the recorded outcome of
 * the model's deadline (-1: use the clock, 0: met, 1: missed), so that a
 * decision the deadline cut short replays as one. */
int engine_decide_json_replay(const policy_bundle *b, const name_table *names,
                              const decide_limits *lim, const char *json, size_t len,
                              int64_t clock_ns, int model_deadline, vd_decision *d, vd_error *err);

/* engine.c: the same with the limits' counters fed back: counters is a map
 * by limit name of {count, penalized} (a snapshot's inputs.counters) or of
 * counts; NULL: every counter reads as empty. Nothing is charged. */
int engine_decide_json_inputs(const policy_bundle *b, const name_table *names,
                              const decide_limits *lim, const char *json, size_t len,
                              int64_t clock_ns, int model_deadline, const value *counters,
                              vd_decision *d, vd_error *err);

/* ---- record.c: decision snapshots ---- */
typedef struct recorder recorder;

/* Opens the snapshot log in dir (created if needed) as opts says. Returns 0,
 * or VD_EBUSY / VD_ESNAPSHOT with a message in err. */
int recorder_open(const char *dir, const vd_engine_opts *opts, recorder **out, vd_error *err);
/* Drains the queue into the log, syncs and closes it; the counters as they
 * were at the end into out (NULL: not wanted), snapshots_lost included. */
void recorder_close(recorder *r, vd_engine_counters *out);

/* What the snapshot needs beyond the decision itself, and (filled by
 * record_id) the record waiting to be appended. */
typedef struct record_input {
  const decide_request *req;
  const char *json; /* the request as received (validated JSON), or NULL */
  size_t json_len;
  const vd_request *creq; /* or the request built in C */
  const value *cctx;      /* with it, its context built from values (vd_decide_built) */
  const decide_limits *lim;
  /* a rollout's side of this decision (service.h), or NULL: none, and the
   * snapshot has no side members */
  const struct service_side *side;
  /* with side: the candidate's refusal of an off-path decision, recorded
   * as its side ("error"); NULL: a decision */
  const vd_error *refusal;
  /* filled by record_id and record_commit */
  uint8_t id[16];
  const char *payload; /* a capture in d's arena, when it did not fit the queue slot */
  size_t payload_len;
  uint64_t ticket; /* filled by record_commit: 0 when nothing was appended */
  int refused;     /* record_commit: 1, the queue refused it; record_wait: 2, not durable */
} record_input;

/* Records decision d in three steps. record_id and record_commit run
 * while the bundle that decided is still held: record_id takes the
 * snapshot's id (the answer, rendered next by decision_answer, carries it);
 * record_commit captures what the payload needs straight into a slot of
 * the log's queue (the writer thread formats it) — which may wait for room.
 * The capture borrows names from the bundle when d->trace_borrow is set, so
 * the engine keeps a replaced bundle until recorder_past says the writer is
 * done with it. record_wait runs after the bundle is let go: with durability
 * ALWAYS it waits until the record is on disk. d->snapshot_id is set when the
 * record was accepted. A decision whose snapshot could not be recorded is
 * answered without a snapshot_id (the counters say why: dropped under
 * on_full DROP, too big, out of memory; the answer is then rendered again,
 * without the id), except where answering would break
 * the setting's promise: under BLOCK a queue that stays full, and under
 * ALWAYS a disk that refuses the record, refuse the decision instead. */
/* mask.c: the strategy of the bundle named name when it declares
 * `snapshot: {mask, hash}`, else NULL; and the record's inputs masked as it
 * says (in->json becomes the request written again with those fields
 * replaced or keyed-hashed under key, in d's arena; the lets read from them
 * recorded masked). 0, or -1 out of memory. */
const strategy *mask_strategy(const policy_bundle *b, const char *name);
int mask_for_record(const strategy *s, const decide_request *req, vd_decision *d,
                    const uint8_t *key, size_t key_len, record_input *in);
void record_id(recorder *r, vd_decision *d, record_input *in);
/* record_commit and record_wait return 0, or VD_ESNAPSHOT when the log
 * refused the record (on_full BLOCK and no room; ALWAYS and the disk did not
 * take it): the decision must then not be answered, and record_refusal
 * says why in err. */
int record_commit(recorder *r, vd_decision *d, record_input *in);
int record_wait(recorder *r, vd_decision *d, record_input *in);
int record_refusal(recorder *r, const record_input *in, vd_error *err);
/* A mark after every record appended so far, and whether the writer has
 * formatted (and so stopped reading the captures of) every record before a
 * mark. */
uint64_t recorder_mark(recorder *r);
int recorder_past(recorder *r, uint64_t mark);
/* Before a bundle decisions were recorded under is freed: the writer keeps
 * names by their address in the bundle (record.c) and must forget them. */
void recorder_forget(recorder *r);
/* Counters into out (which the caller zeroed). */
void recorder_counters(recorder *r, vd_engine_counters *out);
int recorder_repair(recorder *r, unsigned i, vd_snapshot_repair *out);

/* record_capture.c: what the payload needs from decision d in a compact binary
 * capture in d's arena: values and the decision's own strings copied; rule,
 * let, feature and limit names as pointers when d->trace_borrow is set (they
 * are then the bundle's, which must outlive the capture's formatting),
 * copied otherwise. record_commit writes the same into the log's queue. */
int record_capture(vd_decision *d, const record_input *in, const char **out, size_t *len);

/* record_format.c: the format-1 payload from a capture, appended to out (a
 * json_buf, NUL-terminated after), for the given id and node (the fields of
 * the payload: SNAPSHOT_FIELDS in engine/record.h). The snapshot writer thread calls it.
 * Returns 0, VD_ENOMEM, or VD_EINVAL for a capture that does not read back. */
struct json_buf;
int record_format(const char *capture, size_t len, const char *id, const char *node,
                  struct json_buf *out);

/* engine.c: calls fn(ud, bundle) with the live bundle held (under the RCU
 * read lock: fn must not block or reload). For GET /v1/policies. */
void engine_with_live_bundle(vd_engine *e, void (*fn)(void *ud, const policy_bundle *b), void *ud);

#endif
