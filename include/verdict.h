/* verdict.h — the public C interface of verdict.
 *
 * Every handle is opaque; every call returns 0 or a negative VD_E* code, and
 * details go into a caller-provided vd_error. Nothing here uses hidden global
 * state: compile an expression once, evaluate it from any number of threads.
 *
 *   vd_error err;
 *   vd_expr *e;
 *   if (vd_expr_compile("ctx.country == 'CN'", -1, &e, &err) < 0) fail(err.message);
 *   char *out;
 *   if (vd_expr_eval_json(e, "{\"ctx\": {\"country\": \"CN\"}}", -1, &out, &err) == 0) {
 *     puts(out);   // true
 *     vd_free(out);
 *   }
 *   vd_expr_free(e);
 */
#ifndef VERDICT_H
#define VERDICT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VD_VERSION_MAJOR 0
#define VD_VERSION_MINOR 1
#define VD_VERSION_PATCH 0

/* Error codes (negative returns). */
#define VD_OK 0
#define VD_EINVAL (-1)    /* bad argument */
#define VD_ENOMEM (-2)    /* out of memory or over a memory limit */
#define VD_ESYNTAX (-3)   /* an expression or document did not parse */
#define VD_EJSON (-4)     /* malformed JSON input */
#define VD_EEVAL (-5)     /* evaluation failed (division by zero, no such key, cost limit, ...) */
#define VD_ELIMIT (-6)    /* an input exceeded a size or depth limit */
#define VD_ENOTFOUND (-7) /* no strategy serves the request's decision point */
#define VD_ENOCANDIDATE                                                     \
  (-8) /* no candidate answer, and the strategy says on_no_candidate: error \
        */
#define VD_EREQUEST \
  (-9) /* a request that is valid JSON but not a valid request (path says where) */
#define VD_EPOLICY (-10) /* a policy bundle failed to load or compile (message lists why) */
#define VD_ESNAPSHOT                                                                      \
  (-11)                /* the snapshot log could not be opened, or a decision was refused \
                        * because its snapshot cannot be recorded (message says why) */
#define VD_EBUSY (-12) /* another process is writing snapshots to that folder */

typedef struct vd_error {
  int code; /* the VD_E* code also returned */
  int line; /* 1-based place in the source, 0 if none */
  int column;
  char path[256];     /* JSON path of a bad input field, "" if none */
  char message[1024]; /* a sentence for a person, with the place and what to do */
} vd_error;

/* "0.1.0" */
const char *vd_version(void);
/* A sentence for a code ("invalid argument"). */
const char *vd_strerror(int code);
/* A short name for a code ("invalid", "json", "not_found"...), the same for
 * as long as the code exists: the "code" of the error objects the CLI and the
 * HTTP server print. "unknown" for a number that is no VD_E* code. */
const char *vd_err_name(int code);
/* Frees memory handed out by verdict (result strings). */
void vd_free(void *p);

/* ---- expressions (the CEL condition language) ---- */
typedef struct vd_expr vd_expr;

/* len < 0: src is NUL-terminated. */
int vd_expr_compile(const char *src, long len, vd_expr **out, vd_error *err);
/* Evaluates with the variables of a JSON object (NULL or "{}" for none) and
 * returns the result as JSON text in *out_json (free with vd_free).
 * Timestamps, durations and bytes are rendered as strings. */
int vd_expr_eval_json(const vd_expr *e, const char *bindings_json, long len, char **out_json,
                      vd_error *err);
void vd_expr_free(vd_expr *e);

/* ---- the decision engine ----
 *
 * An engine holds one compiled policy bundle (a folder of YAML strategies,
 * docs/policy.md) and answers requests against it. It is safe to decide from
 * any number of threads at once, each with its own vd_decision; a reload
 * swaps the bundle without ever blocking a decision (decisions in flight
 * finish on the bundle they started with).
 *
 *   vd_engine *e;
 *   vd_error err;
 *   if (vd_engine_open("examples/policies", NULL, &e, &err) < 0) fail(err.message);
 *   vd_decision *d = vd_decision_new();
 *   const char *req = "{\"action\": \"http_request\", \"context\": {\"path\": \"/\"}}";
 *   if (vd_decide_json(e, req, -1, d, &err) == 0)
 *     printf("%s (%s)\n", vd_decision_action(d), vd_decision_source(d));
 *   vd_decision_free(d);
 *   vd_engine_close(e);
 *
 * docs/engine.md describes every call. */
typedef struct vd_engine vd_engine;
typedef struct vd_decision vd_decision; /* reusable; owns a per-decision arena */

typedef struct vd_engine_opts {
  /* Content-addressed store of every policy version loaded: NULL means
   * `versions` beside snapshots_dir when snapshots are on (where replay
   * looks), else <bundle>/.verdict/versions; "" keeps no store. */
  const char *store_dir;
  unsigned long cost_limit;   /* evaluation work per decision; 0 = 1,000,000 */
  unsigned regex_match_limit; /* PCRE2 match limit per regex call; 0 = 100,000 */
  size_t memory_limit;        /* bytes one decision may allocate; 0 = 64 MiB */
  size_t max_request_bytes;   /* largest request JSON accepted; 0 = 1 MiB */
  int warnings_as_errors;     /* reject a bundle that has warnings */

  /* Decision snapshots (docs/snapshots.md): every decision is recorded in a
   * segment log in this folder (created if needed). NULL or "": off. */
  const char *snapshots_dir;
  int snapshot_durability;            /* VD_DURABILITY_*: INTERVAL (0, the default), NONE, ALWAYS */
  unsigned snapshot_interval_ms;      /* INTERVAL: fsync at most this often; 0 = 100 */
  int snapshot_on_full;               /* VD_ON_FULL_BLOCK (0, the default) or VD_ON_FULL_DROP */
  unsigned snapshot_close_timeout_ms; /* closing retries a failing disk this long; 0 = 10000 */
  unsigned snapshot_queue_records;    /* snapshots waiting at most, in the queue and again in
                                       * the writer's buffer; 0 = 65536 */
  unsigned long long snapshot_segment_bytes; /* a segment rotates past this size; 0 = 64 MiB
                                              * (gc works on sealed segments only) */
  /* A file holding this node's secret for the keyed hashes of the fields
   * strategies list under `snapshot: {hash: [...]}` (HMAC-SHA256; at least
   * 16 bytes, a final newline not counted). Needed when snapshots are on and
   * a strategy hashes fields; never written anywhere. NULL: none. */
  const char *snapshot_secret_file;
  const char *node; /* node name in snapshots; NULL = the host name */

  /* Rate-limit counters (docs/policy.md "Limits", docs/deploy.md): NULL or
   * "local" keeps them in this process; "redis://HOST:PORT[/DB]" in Redis,
   * shared by every node using it. */
  const char *state_url;
  size_t state_max_bytes;    /* memory bound of the local store; 0 = 64 MiB */
  unsigned state_timeout_ms; /* Redis: deadline per command; 0 = 50 */
  int state_on_error;        /* Redis slow or down: VD_STATE_LOCAL (0), _ALLOW or _DENY */
  const char *state_file;    /* local: keep the counters in this file across restarts */
  /* Load only the strategy files that can serve this decision point (those
   * whose text names it), for a process that makes one kind of decision and
   * exits, like an agent's hook. NULL: every file. docs/engine.md. */
  const char *only_point;
  /* For a process that makes one decision on one thread and exits, like an
   * agent's hook: the rules and lets of a strategy read back from the
   * version store's parsed cache are compiled when a decision first reaches
   * them rather than all at load (decisions are the same). The engine must
   * then be used from one thread at a time, reloads included. docs/policy.md,
   * "Versions". */
  int lazy_compile;
} vd_engine_opts;

/* state_on_error: what a limit reads while Redis fails or is late */
#define VD_STATE_LOCAL 0 /* this node's local counters meanwhile */
#define VD_STATE_ALLOW 1 /* an empty counter: the limit refuses nothing */
#define VD_STATE_DENY 2  /* a used-up counter: the limit refuses */

/* snapshot_durability */
#define VD_DURABILITY_INTERVAL 0 /* fsync every snapshot_interval_ms */
#define VD_DURABILITY_NONE 1     /* write(); the OS flushes when it likes */
#define VD_DURABILITY_ALWAYS 2   /* a decision returns only once its snapshot is on disk */
/* snapshot_on_full: when the snapshot queue is full */
#define VD_ON_FULL_BLOCK                                                                         \
  0                       /* the deciding thread waits for room (up to 1 s, and not at all while \
                           * the disk refuses writes), else the decision is refused              \
                           * (VD_ESNAPSHOT): nothing answered goes unrecorded */
#define VD_ON_FULL_DROP 1 /* the snapshot is dropped and counted; the decision is answered */

/* Loads and compiles the bundle in bundle_dir. opts may be NULL. On failure
 * err->message lists every diagnostic and err->line/column place the first. */
int vd_engine_open(const char *bundle_dir, const vd_engine_opts *opts, vd_engine **out,
                   vd_error *err);
/* Recompiles the same folder and swaps the result in atomically. On failure
 * (VD_EPOLICY, diagnostics in err) the bundle already loaded keeps serving. */
int vd_engine_reload(vd_engine *e, vd_error *err);
/* The live bundle's version (hex SHA-256) copied into buf; returns buf. */
const char *vd_engine_policy_version(vd_engine *e, char buf[65]);
/* Waits for no one: the caller must make sure no decision is running on e.
 * Snapshots still queued are written (and synced, unless durability NONE);
 * on a disk that refuses them, for snapshot_close_timeout_ms at most. */
void vd_engine_close(vd_engine *e);

/* Counters of an engine, readable at any time from any thread. */
typedef struct vd_engine_counters {
  unsigned long long snapshots_appended;    /* snapshots queued for the log */
  unsigned long long snapshots_written;     /* written to segment files */
  unsigned long long snapshots_dropped;     /* refused: the queue was full (VD_ON_FULL_DROP) */
  unsigned long long snapshots_failed;      /* not recorded: too big, out of memory, log closed */
  unsigned long long snapshot_write_errors; /* failed write/fsync attempts (each retried) */
  unsigned long long snapshot_fsyncs;
  unsigned long long snapshot_queue_depth; /* snapshots waiting to be written now */
  unsigned long long snapshots_refused;    /* decisions refused (VD_ESNAPSHOT) because their
                                            * snapshot could not be queued (on_full BLOCK) or
                                            * made durable (ALWAYS) */
  unsigned long long snapshot_unwritten;   /* decisions answered with a snapshot_id whose
                                            * snapshot is not written yet (never under ALWAYS):
                                            * what a stop now would lose */
  unsigned long long snapshots_lost;       /* after close: answered, then given up unwritten */
  int snapshot_failing;                    /* 1 while the log's disk refuses writes */
  long long snapshot_failing_since_ns;     /* unix ns of the first failure of this spell */
  unsigned long long snapshot_recovered_cut_records; /* torn records cut when the log opened */
  unsigned long long snapshot_recovered_cut_bytes;
  int snapshots_on;                         /* 1 when the engine records snapshots */
  unsigned long long model_calls;           /* decisions that ran a fallback model */
  unsigned long long model_deadline_misses; /* of those, the ones its timeout_ms cut short */
  char snapshot_last_error[512];            /* the last write error, "" if none */
  /* rate-limit counters (docs/policy.md, "Limits") */
  unsigned long long limit_charges;       /* charges logged */
  unsigned long long limit_refusals;      /* readings that refused */
  unsigned long long state_keys;          /* live counters in the local store */
  unsigned long long state_bytes;         /* memory they use */
  unsigned long long state_evictions;     /* live counters dropped by the memory bound */
  unsigned long long state_expired;       /* counters removed once expired */
  unsigned long long state_remote_errors; /* Redis commands that failed or were late */
  unsigned long long state_fallbacks;     /* readings answered by state_on_error */
  char state_last_error[256]; /* the counter file's last problem (state_file), "" none */
} vd_engine_counters;

/* Fills *out (the snapshot fields are zero when snapshots are off). 0, or VD_EINVAL. */
int vd_engine_stats(vd_engine *e, vd_engine_counters *out);
/* vd_engine_close, and the counters as they were at the end into *out: what
 * the close could write and what it could not (snapshots_lost, with the
 * last error in snapshot_last_error). */
void vd_engine_close_stats(vd_engine *e, vd_engine_counters *out);

/* A repair the snapshot log made to its folder when the engine opened it
 * (docs/snapshots.md, "Recovery"). */
typedef struct vd_snapshot_repair {
  const char *kind;           /* "cut_tail", "moved_corrupt", "removed_empty" or "damaged_kept" */
  const char *segment;        /* the file's name in the snapshot folder, after the repair */
  unsigned long long bytes;   /* cut, moved aside, removed, or damaged */
  unsigned long long records; /* the records in them (0 for damaged_kept, removed_empty) */
} vd_snapshot_repair;

/* The i-th repair (from 0): 0 with *out filled (its strings valid while e is
 * open), or -1 past the last (none when snapshots are off). */
int vd_engine_snapshot_repair(vd_engine *e, unsigned i, vd_snapshot_repair *out);

/* NULL when out of memory. */
vd_decision *vd_decision_new(void);
void vd_decision_free(vd_decision *d);
/* Record a trace (rules tried, the one that matched, lets computed) in later
 * decisions made with d; off by default, since it costs a little. */
void vd_decision_set_trace(vd_decision *d, int on);

/* Decides a request given as JSON:
 *   {"action": "<decision point>", "candidates": ["a", "b"], "context": {...}, "key": "k"}
 * Only "action" is required. len < 0: NUL-terminated. The result replaces
 * whatever d held. Errors: VD_EJSON (malformed), VD_EREQUEST (a field of the
 * wrong type or an unknown key; err->path names it), VD_ELIMIT (too large or
 * deep), VD_ENOTFOUND (no strategy for the action), VD_ENOCANDIDATE,
 * VD_ESNAPSHOT (its snapshot cannot be recorded: on_full BLOCK and the queue
 * stays full, or durability ALWAYS and the disk refuses it; the message
 * gives the disk's error).
 * With snapshots on, every decision is recorded before the call returns
 * (vd_decision_snapshot_id); a refused request is not a decision and leaves
 * no snapshot. */
int vd_decide_json(vd_engine *e, const char *request_json, long len, vd_decision *d, vd_error *err);

/* The same request built in C. candidates may be NULL (ncandidates 0);
 * context_json may be NULL (an empty context), context_len < 0 means
 * NUL-terminated; key may be NULL (""). */
typedef struct vd_request {
  const char *action;
  const char *const *candidates;
  size_t ncandidates;
  const char *context_json;
  long context_len;
  const char *key;
} vd_request;
int vd_decide(vd_engine *e, const vd_request *r, vd_decision *d, vd_error *err);

/* A request's context built as values, event by event, with no JSON text in
 * between: what a binding does with a dictionary or an object of its
 * language (docs/engine.md, "Contexts built from values").
 *
 *   vd_builder *b = vd_builder_new();        // one per thread, reused
 *   vd_build_map_begin(b);
 *   vd_build_key(b, "path", 4);
 *   vd_build_string(b, "/api/v1/users", 13);
 *   vd_build_map_end(b);
 *   vd_request r = {.action = "http_request"};
 *   vd_decide_built(e, &r, b, d, &err);
 *   vd_builder_reset(b);                     // before the next context
 */
typedef struct vd_builder vd_builder; /* reusable; not thread-safe: one per thread */
vd_builder *vd_builder_new(void);     /* NULL when out of memory */
void vd_builder_reset(vd_builder *b); /* empty again, memory kept */
void vd_builder_free(vd_builder *b);
/* Events in document order, as a JSON reader would produce them. Each
 * returns 0 or VD_E*: VD_EREQUEST for misuse (a key outside a map, a value
 * where a key is due, an end that closes nothing or the wrong kind, a second
 * value after a complete one, a key repeated in one map), invalid UTF-8, or
 * a double JSON cannot carry (NaN, infinities); VD_ELIMIT past the depth
 * JSON requests allow (a context 511 levels deep) or past 4 GiB in one
 * string or container; VD_ENOMEM. A refused event leaves the builder failed
 * until vd_builder_reset: later events return the same code, and
 * vd_decide_built returns the error. Numbers become what the JSON text of
 * the number would: vd_build_uint of a value up to INT64_MAX is an int,
 * vd_build_double is always a double. Strings and keys are copied. */
int vd_build_null(vd_builder *b);
int vd_build_bool(vd_builder *b, int v);
int vd_build_int(vd_builder *b, int64_t v);
int vd_build_uint(vd_builder *b, uint64_t v);
int vd_build_double(vd_builder *b, double v);
int vd_build_string(vd_builder *b, const char *s, size_t n); /* copied */
int vd_build_map_begin(vd_builder *b);
int vd_build_key(vd_builder *b, const char *s, size_t n); /* copied */
int vd_build_map_end(vd_builder *b);
int vd_build_list_begin(vd_builder *b);
int vd_build_list_end(vd_builder *b);
/* The JSON path of the place the next event fills, from the builder's root
 * "$" ("$.a.b[2]"; "$.a" once the key "a" is given): for a caller's own
 * messages, such as a value of a type it cannot convert. Valid until the
 * next call on b. */
const char *vd_builder_path(vd_builder *b);
/* The error of the refused event that failed b into *err (its path from the
 * root "$", as vd_builder_path gives it): its code, or 0 when none failed. */
int vd_builder_error(const vd_builder *b, vd_error *err);
/* Decides r with the built context instead of r->context_json (which must
 * be NULL; VD_EINVAL otherwise); the builder must hold exactly one complete
 * map (VD_EREQUEST, path "$.context", otherwise; a failed builder returns
 * its error with the path under "$.context"). Same results, errors, snapshot
 * and replay as vd_decide with the same context as JSON: the snapshot
 * records the request as JSON text, so that `verdict replay` reproduces it
 * exactly. The builder is only read, and may be reset or freed once the
 * call returns. */
int vd_decide_built(vd_engine *e, const vd_request *r, const vd_builder *context, vd_decision *d,
                    vd_error *err);

/* The fields of the last decision made with d. Strings stay valid until d
 * decides again or is freed; after a failed call they are NULL / 0. */
const char *vd_decision_action(const vd_decision *d); /* NULL: an error decision with no action */
int vd_decision_allowed(const vd_decision *d);
int vd_decision_review(const vd_decision *d);
double vd_decision_confidence(const vd_decision *d);
const char *vd_decision_source(const vd_decision *d); /* "rule", "model", "default" or "error" */
const char *vd_decision_rule(const vd_decision *d);   /* the deciding rule, or NULL */
const char *vd_decision_reason(const vd_decision *d); /* message for people, or NULL */
const char *vd_decision_strategy(const vd_decision *d);
const char *vd_decision_policy_version(const vd_decision *d); /* the strategy's version */
/* The fallback model's version (SHA-256 of its file) when the decision ran
 * it, else NULL; its score (model.score) when it scored, else NaN. */
const char *vd_decision_model_version(const vd_decision *d);
double vd_decision_model_score(const vd_decision *d);
double vd_decision_latency_us(const vd_decision *d); /* request parsing + deciding */
/* The id of the decision's snapshot (a UUIDv7, 36 characters), or NULL when
 * snapshots are off or this one could not be recorded (see vd_engine_stats). */
const char *vd_decision_snapshot_id(const vd_decision *d);

#define VD_JSON_TRACE 1 /* add "trace" (needs vd_decision_set_trace(d, 1) before deciding) */

/* The decision as JSON in memory d owns (valid until d decides again or is
 * freed): no allocation outside d's arena, for the hot path. Without flags
 * the text is made once a decision (in the decide call when it is traced,
 * else by the first call here) and handed out again after. */
int vd_decision_render(vd_decision *d, int flags, const char **out, size_t *len);
/* The same, copied into a string the caller frees with vd_free. */
int vd_decision_json(vd_decision *d, int flags, char **out);

/* ---- calls for hosts: warming up, the live bundle, recorded decisions ----
 * What a server or tool built on the engine needs beside deciding
 * (docs/engine.md, "Calls for hosts"). */

/* Decides every strategy's inline tests (docs/policy.md, `tests`; one empty
 * request to a strategy without tests) against the live bundle, so that the
 * decision code, the allocator and the regex state are in before the first
 * real request. Nothing is recorded and no counter is charged. *decisions
 * (may be NULL): the requests decided without error. 0, or a negative VD_E*
 * code. */
int vd_engine_warm_up(vd_engine *e, unsigned *decisions, vd_error *err);

/* A description of the live bundle, copied: it stays as it was when taken,
 * whatever reloads happen after, until vd_bundle_free. */
typedef struct vd_bundle vd_bundle;
typedef struct vd_strategy_info {
  const char *name;
  const char *version; /* hex SHA-256 of the strategy's canonical form */
  const char *file;    /* the file it was read from, or NULL */
  const char *const *decision_points;
  unsigned ndecision_points;
  const char *const *rules; /* the rules' names, in order (an entry is NULL for a rule with none) */
  unsigned nrules;
} vd_strategy_info;

int vd_engine_bundle(vd_engine *e, vd_bundle **out, vd_error *err);
/* The bundle's version (hex SHA-256 over its strategies' names and versions). */
const char *vd_bundle_version(const vd_bundle *b);
/* The folder the bundle was loaded from. */
const char *vd_bundle_dir(const vd_bundle *b);
unsigned vd_bundle_strategy_count(const vd_bundle *b);
/* Strategy i (from 0, in the bundle's order) into *out, its strings valid
 * until vd_bundle_free: 0, or VD_EINVAL past the last. */
int vd_bundle_strategy(const vd_bundle *b, unsigned i, vd_strategy_info *out);
void vd_bundle_free(vd_bundle *b);

/* The snapshot payload (docs/snapshots.md) recorded under id (its 36-character
 * text; id_len < 0: NUL-terminated) in the snapshot folder dir, copied into
 * *out (NUL-terminated; free with vd_free), *len its length. Errors:
 * VD_EINVAL, err->path "id": not a snapshot id; VD_EINVAL with no path: no
 * folder given (snapshots off); VD_ENOTFOUND: no such snapshot there
 * (unknown, removed by retention, or not written yet); VD_ESNAPSHOT: the
 * folder cannot be read (the message says why); VD_ENOMEM. */
int vd_snapshot_read(const char *dir, const char *id, long id_len, char **out, size_t *len,
                     vd_error *err);

#ifdef __cplusplus
}
#endif

#endif
