/* service.h — what the engine offers the parts above it (server, agent,
 * replay, CLI) beyond the public calls of verdict.h: running a bundle's
 * inline tests through the decision code (a decision that records nothing),
 * a decision's trace, the version store's folder and the versions it keeps,
 * a bundle's diagnostics one by one, and deciding against a bundle replay
 * loaded itself.
 *
 * engine.h is the engine's own header and nothing outside src/engine/
 * includes it; the parts above include this one and verdict.h. Policy types
 * appear here only as incomplete structs: a caller that holds a bundle
 * (replay, `verdict test`) got it from src/policy/ itself; the server and
 * the agent hold none and include no header of src/policy/.
 *
 * The public calls an embedding program needs too — warming up, listing the
 * live bundle, reading a snapshot by id — are in verdict.h (docs/engine.md,
 * "Calls for hosts"). */
#ifndef VD_ENGINE_SERVICE_H
#define VD_ENGINE_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "verdict.h"

struct policy_bundle;
struct name_table;
struct value;

/* ---- inline tests (the `tests:` of docs/policy.md) ---- */
typedef struct service_test {
  const char *strategy; /* the strategy the test is written in */
  const char *file;     /* its file, or NULL */
  const char *name;     /* NULL: no test, the empty request of SERVICE_TESTS_UNTESTED */
  int line;
  /* what the test expects: NULL / -1 when not checked */
  const char *expect_action;
  int expect_allowed;
  const char *expect_source;
  const char *expect_rule;
} service_test;

/* Called after each test's decision: rc is decide's (0, or a VD_E* code with
 * err filled); d holds the decision until the next call. */
typedef void (*service_test_fn)(void *ud, const service_test *t, int rc, const vd_decision *d,
                                const vd_error *err);

#define SERVICE_TESTS_TRACE 1u /* keep the trace (service_trace_*) */
#define SERVICE_TESTS_UNTESTED                                   \
  2u /* a strategy without tests: one empty request to its first \
      * decision point (a warm-up reaches every strategy) */

/* Decides every inline test of b (only: of that strategy alone; NULL every
 * one) with the test's decision point (else the strategy's first), context,
 * candidates, key and `counters:` (else empty counters), through the same
 * code as vd_decide_json with the default limits, and calls fn (may be NULL)
 * after each. Nothing is recorded and no counter is charged. *decided (may
 * be NULL): the tests decided without error. Returns 0, or VD_ENOMEM. */
int service_tests_run(const struct policy_bundle *b, const char *only, unsigned flags,
                      service_test_fn fn, void *ud, unsigned *decided);

/* ---- a decision's trace (kept when the decision was traced) ---- */
enum { SERVICE_RULE_FALSE, SERVICE_RULE_TRUE, SERVICE_RULE_ERROR, SERVICE_RULE_NOT_CANDIDATE };
/* Rules tried, in order. */
unsigned service_trace_count(const vd_decision *d);
/* Rule i tried: its name and SERVICE_RULE_* result. 0, or -1 past the end. */
int service_trace_rule(const vd_decision *d, unsigned i, const char **name, int *result);
/* Rules of the strategy, and how many of them its rule index left to try. */
void service_trace_rules(const vd_decision *d, unsigned *total, unsigned *considered);

/* ---- the version store and diagnostics ---- */
/* The version store an engine opened on bundle with these options keeps
 * (vd_engine_opts.store_dir): *out malloc'd, or NULL for none. 0, or -1
 * when out of memory. */
int service_store_path(const char *bundle, const char *store_dir, const char *snapshots_dir,
                       char **out);

/* A policy version kept in the version store: its stored form's file. */
typedef struct service_kept {
  char version[65];
  char *strategy;   /* the strategy it is a version of; NULL when unreadable */
  long long stored; /* unix seconds: when the file was written */
  long long bytes;
} service_kept;
/* The versions kept in the store folder store_dir, newest first: at most max
 * of them into *out (free with service_kept_free), *n how many, *total how
 * many the folder holds. 0, or VD_ENOMEM (nothing listed). */
int service_versions_kept(const char *store_dir, size_t max, service_kept **out, size_t *n,
                          size_t *total);
void service_kept_free(service_kept *list, size_t n);

typedef struct service_diag {
  int warning; /* 0: an error */
  const char *file;
  int line, column; /* 0: not tied to a place */
  const char *key;  /* the YAML key path, "" when none */
  const char *message;
} service_diag;
/* Compiles the bundle folder dir once more, storing nothing, and calls fn
 * with each diagnostic (a reload's refusal lists them one by one). Returns
 * the number of errors. */
size_t service_bundle_diagnostics(const char *dir, void (*fn)(void *ud, const service_diag *g),
                                  void *ud);

/* ---- deciding against a bundle the caller loaded (replay) ---- */
/* The name tables of b (allocated from a), or NULL when out of memory. */
struct name_table *service_names_build(arena *a, const struct policy_bundle *b);
/* Decides request JSON against b as vd_decide_json does, except that
 * request.time is clock_ns (unix ns), model_deadline is the recorded outcome
 * of the model's deadline (-1: use the clock, 0: met, 1: missed), counters
 * is a map by limit name fed back as the readings (NULL: every counter reads
 * empty), and nothing is recorded. limits: its cost_limit,
 * regex_match_limit, memory_limit and max_request_bytes (0 or NULL: the
 * defaults). names may be NULL (scan). */
int service_decide_json(const struct policy_bundle *b, const struct name_table *names,
                        const vd_engine_opts *limits, const char *json, size_t len,
                        int64_t clock_ns, int model_deadline, const struct value *counters,
                        vd_decision *d, vd_error *err);

/* ---- a rollout's second engine (`verdict serve --shadow/--canary`) ----
 * A candidate bundle decides beside the live one. Its engine shares the
 * live engine's snapshot log, version store, limits and counter store: a
 * canary's answers are recorded, and charge the counters, as the live
 * bundle's are; and both sides' versions are kept where replay looks. */

/* How one decision sits in a rollout: the snapshot's side members
 * (docs/snapshots.md, "Shadow and canary"). */
typedef struct service_side {
  const char *side;      /* "live", "shadow" or "canary"; NULL: no "side" */
  const char *completes; /* the answered decision's snapshot id: this one was made off the
                          * answer's path to compare with it; NULL when it answered */
  const char *answered;  /* "live" or "canary": "rollout" is written; NULL: it is not */
  const char *by;        /* "key", "field NAME" or "no key" */
  int bucket;            /* 0..9999 */
  double percent;        /* the canary's share when it was chosen */
  int64_t clock_ns;      /* request.time: the answered decision's; 0: read the clock */
  int off_path;          /* made off the answer's path: no counter store (every limit reads
                          * empty and nothing is charged), and no wait for the disk */
} service_side;

/* Opens the bundle folder dir as an engine beside host (see above). The
 * engine is closed with vd_engine_close, before host. */
int service_engine_open_beside(const char *dir, vd_engine *host, vd_engine **out, vd_error *err);
/* Decides as vd_decide_json, as side says (NULL: exactly vd_decide_json). */
int service_decide_side(vd_engine *e, const char *json, size_t len, const service_side *side,
                        vd_decision *d, vd_error *err);
/* The bundle folder e loads on reload; set before a reload that promotes
 * another folder. 0, or VD_ENOMEM. */
int service_engine_set_dir(vd_engine *e, const char *dir);
const char *service_engine_dir(const vd_engine *e);
/* The `rollout_key:` of the strategy serving decision point point in e's
 * live bundle, copied into out (n bytes); "" when it names none (the
 * request's key picks the side) or no strategy serves the point. */
void service_rollout_key(vd_engine *e, const char *point, size_t len, char *out, size_t n);

#endif
