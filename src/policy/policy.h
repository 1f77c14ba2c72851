/* policy.h — strategies in YAML, compiled into an immutable bundle.
 *
 * policy_bundle_load reads a folder of *.yaml strategies (docs/policy.md is
 * the language), checks them, compiles every expression once, builds the
 * rule indexes and computes content-hash versions. The result is immutable
 * and may be read from any number of threads; the engine (src/engine/) runs
 * decisions against it and swaps bundles on reload.
 *
 * Not here: request parsing, the first-match loop and the decision output
 * (src/engine/), scoring models (src/model/; this module loads them, models.c). */
#ifndef VD_POLICY_POLICY_H
#define VD_POLICY_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/value.h"
#include "expr/expr.h"

/* ---- diagnostics: every problem names file:line:col and the YAML key ---- */
typedef enum diag_severity { DIAG_ERROR, DIAG_WARNING } diag_severity;

typedef struct policy_diag {
  diag_severity severity;
  char file[256];
  int line, column;   /* 1-based; 0 when not tied to a place */
  char key[128];      /* YAML key path: "rules[2].if", "" when none */
  char message[1024]; /* may hold a caret excerpt on following lines */
} policy_diag;

typedef struct policy_diags {
  policy_diag *items;
  size_t n, cap;
  size_t errors, warnings;
} policy_diags;

void policy_diags_free(policy_diags *d);
/* "FILE:LINE:COL: KEY: message" (or "warning: ..." ) — one diagnostic per
 * call, to the given stream. */
void policy_diag_print(const policy_diag *d, void *file /* FILE * */);

/* ---- the compiled form ---- */
typedef struct policy_action {
  const char *name; /* NUL-terminated */
  uint32_t name_len;
  bool allowed;
  bool review;
  const char *description; /* from `actions`, or NULL */
} policy_action;

/* A decision a setting names: default, on_error, on_no_candidate. */
typedef struct policy_outcome {
  int32_t action;     /* index into strategy.actions; -1: none (error decision) */
  const char *reason; /* may be NULL */
} policy_outcome;

typedef enum no_candidate_mode { NC_ERROR, NC_FIRST, NC_ACTION } no_candidate_mode;

/* An expression kept to be compiled on first use (policy_load_opts.lazy):
 * text NULL when the program was compiled at load. */
typedef struct policy_lazy {
  const char *text; /* as written; the tree points into it */
  uint32_t len;
  const ast *tree; /* NULL: not parsed yet either */
  /* The compiled program's image from the version store (cache.c,
   * "compiled/"), read instead of compiling; NULL: none. */
  const void *image;
  uint32_t image_len;
  uint32_t image_mem; /* bytes its program takes (0: not known) */
  /* its regexes' compiled code, from the same file (image.h,
   * expr_image_adopt_codes); NULL: none */
  const void *codes;
  uint32_t codes_len;
  /* 1: the image is from a file of this user's that no one else may
   * write, its CRC checked: read with expr_image_read_trusted */
  uint32_t trusted;
} policy_lazy;

typedef struct policy_rule {
  const char *name;
  const char *reason; /* may be NULL */
  const char *source; /* the `if` text */
  int32_t action;     /* index into strategy.actions */
  expr_program *cond; /* NULL until first use when lazy.tree is set */
  policy_lazy lazy;
  int line, column;  /* of the rule's `if` value, for traces and messages */
  bool reads_model;  /* reads `model`, directly or through a let: never indexed */
  bool index_part;   /* one of its `&&` parts is one the rule index can use (index.c) */
  double confidence; /* how sure the rule's author is: (0, 1], default 1 */
} policy_rule;

/* Bounds on lets, checked at load (strategy.c, docs/policy.md "Limits"):
 * lets a strategy, lists and maps a value nests through the lets it reads,
 * and the evaluator's recursion through them, where a let read counts
 * POLICY_LET_READ_DEPTH levels. A decision also refuses to read lets
 * nested deeper than POLICY_MAX_EVAL_DEPTH / POLICY_LET_READ_DEPTH
 * (decide.c), whatever was checked. */
#define POLICY_MAX_LETS 10000
#define POLICY_MAX_LET_NEST 512
#define POLICY_MAX_EVAL_DEPTH 4096
#define POLICY_LET_READ_DEPTH 16

/* A path into the request context: "card.number" -> {"card", "number"}. */
typedef struct policy_path {
  const char *text;
  const char *const *parts;
  uint32_t nparts;
} policy_path;

typedef struct policy_let {
  const char *name;
  uint32_t name_len;
  expr_program *prog; /* NULL until first use when lazy.tree is set */
  policy_lazy lazy;
} policy_let;

/* limits: a counter per caller (docs/policy.md, "Limits"). */
typedef struct policy_limit {
  const char *name;
  uint32_t name_len;
  expr_program *key;    /* the caller's identity */
  expr_program *when;   /* which requests the limit applies to; NULL: all */
  expr_program *charge; /* which of those are charged; NULL: all */
  int64_t window_ns;
  uint32_t budget;
  int64_t penalty_ns; /* 0: none */
  int32_t action;     /* index into strategy.actions; -1: counts only */
  const char *reason; /* may be NULL */
  int line, column;   /* of the limit's name */
} policy_limit;

typedef struct policy_test {
  const char *name;
  value counters;            /* `counters:` limit name -> count before the test (V_NULL: none) */
  const char *point;         /* the decision point asked; NULL: the strategy's first */
  value context;             /* a map */
  value candidates;          /* a list (empty when not given) */
  value key;                 /* a string ("" when not given) */
  const char *expect_action; /* NULL when not checked */
  int expect_allowed;        /* -1 not checked, 0/1 */
  const char *expect_source; /* NULL when not checked */
  const char *expect_rule;   /* NULL when not checked */
  int line;
} policy_test;

typedef struct rule_index rule_index; /* see index.c */

/* fallback.thresholds: the model's score at or above min_score → action.
 * Listed from the highest min_score down; the first reached decides. */
typedef struct policy_threshold {
  double min_score;
  policy_outcome outcome;
} policy_threshold;

/* A model a strategy's fallback names, with the feature spec that makes
 * its input row (src/model/model.h), loaded once per bundle. */
struct gbdt_model;
struct feature_spec;
typedef struct bundle_model {
  const char *name;          /* as the strategy names it */
  const char *path;          /* models/NAME.json */
  const char *features_path; /* models/NAME.features.yaml, or the strategy's own */
  struct gbdt_model *gbdt;
  struct feature_spec *features;
  char version[65];          /* SHA-256 of the model file (gbdt_version) */
  char features_version[65]; /* SHA-256 of the feature spec file */
} bundle_model;

typedef struct strategy {
  const char *name;
  const char *file;
  const char *description;
  const char *const *decision_points;
  uint32_t ndecision_points;
  const policy_action *actions;
  uint32_t nactions;
  value constants; /* a map: name -> value */
  const policy_let *lets;
  uint32_t nlets;
  const policy_rule *rules;
  uint32_t nrules;
  policy_outcome default_outcome; /* action -1 when no default is declared */
  policy_outcome on_error;
  no_candidate_mode nc_mode;
  int32_t nc_action;          /* for NC_ACTION */
  const char *fallback_model; /* NULL when none */
  uint32_t fallback_timeout_ms;
  const policy_threshold *thresholds; /* binary and regression models */
  uint32_t nthresholds;
  policy_outcome below; /* no threshold reached (action -1: not declared) */
  /* fallback.on_not_candidate: what a reached threshold whose action is not
   * a candidate leads to — the next threshold down (0, the default), or the
   * threshold's own action, which on_no_candidate then handles (1) */
  uint8_t threshold_nc;
  /* route: candidates — the strategy takes a request for its decision points
   * only when the request's candidates are all its actions (bundle.c,
   * policy_bundle_route); other requests go to the point's other strategy */
  bool route_candidates;
  /* rollout_key: the context field whose value picks a canary's side
   * instead of the request's key (docs/rollout.md); NULL: the key */
  const char *rollout_key;
  const int32_t *classes; /* multiclass: class index -> action index */
  uint32_t nclasses;
  policy_outcome on_timeout;       /* the model missed its deadline (-1: default, else on_error) */
  const char *features_file;       /* fallback.features: a spec other than the model's own */
  const bundle_model *model;       /* resolved when the bundle is loaded; NULL without fallback */
  int fallback_line, fallback_col; /* of fallback.model, for messages */
  const policy_test *tests;
  uint32_t ntests;
  const policy_limit *limits; /* in the order written */
  uint32_t nlimits;
  const rule_index *index;
  /* snapshot: {mask: [...], hash: [...]} (strategy_snapshot.c): context
   * fields never stored in the clear, as rules name them ("card.number"),
   * split into their parts; and what reads them, for replay and check */
  const policy_path *snap_mask;
  uint32_t nsnap_mask;
  const policy_path *snap_hash;
  uint32_t nsnap_hash;
  const uint8_t *let_masked;  /* per let: reads a masked or hashed field; NULL: none does */
  const uint8_t *rule_masked; /* per rule: the same */
  char version[65];           /* hex SHA-256 of the canonical form */
} strategy;

typedef struct policy_bundle {
  const char *dir;
  const strategy *strategies;
  uint32_t nstrategies;
  bundle_model *models; /* malloc'd; each model loaded once */
  uint32_t nmodels;
  /* the store's compiled/ files a lazy load mapped (cache.c) */
  struct compiled_map *maps;
  char version[65]; /* hex SHA-256 over the strategies' names and versions */
  arena mem;        /* owns everything above */
} policy_bundle;

typedef struct policy_load_opts {
  const char *store_dir; /* content-addressed store; NULL: <dir>/.verdict/versions; "" none */
  /* A second folder every version loaded is written to (stored form and
   * model files, none of the caches), before the load returns: the
   * snapshot folder's own `versions`, which makes the folder replayable
   * alone (docs/snapshots.md, "Self-contained folders"). Unlike the store,
   * a version that cannot be written there is an error: the decisions
   * recorded under it could not be re-proven. NULL or "": none. */
  const char *pin_dir;
  int warnings_as_errors;
  /* A field gets a rule index when at least this many rules test it
   * (index.c says why); 0: the default, 8. 1 indexes every indexable rule. */
  uint32_t index_min_rules;
  /* From text: the folder holding the fallback models (NULL: none, and a
   * strategy's model stays unloaded until policy_bundle_attach_model). From
   * a folder, models are always <dir>/models. */
  const char *models_dir;
  /* From a folder: skip the files whose text does not contain this string —
   * they cannot serve a decision point of that name (a point is named
   * literally in `decision_points` or `strategy`). NULL: load every file. */
  const char *only_point;
  /* For a process that makes one decision on one thread and exits (an
   * agent's hook): a strategy read back from the parsed cache (cache.c),
   * which compiled cleanly before, has its lets and rules compiled on first
   * use (strategy_rule_program), not at load, and keeps neither tests nor
   * warnings. Such a bundle must not be used from two threads at once. */
  int lazy;
} policy_load_opts;

/* Loads and compiles every strategy in dir. Returns 0 with *out set, or -1
 * with the problems in diags (which also collects warnings on success). */
int policy_bundle_load(const char *dir, const policy_load_opts *opts, policy_bundle **out,
                       policy_diags *diags);
/* One strategy from text (tests, tools): file names the source in messages. */
int policy_bundle_from_text(const char *file, const char *text, size_t len, policy_bundle **out,
                            policy_diags *diags);
/* One strategy from its stored form (the version store's <version>.json,
 * replay): the same bundle policy_bundle_from_text makes of that text, its
 * version the SHA-256 of the text, loaded several times faster when the
 * text is a canonical form (the inline tests are then not kept). */
int policy_bundle_from_stored(const char *file, const char *text, size_t len, policy_bundle **out,
                              policy_diags *diags);
/* Loads the model and feature spec of strategy si's fallback from the given
 * files (replay: the versions a snapshot names, from the version store).
 * Returns 0, or -1 with errors in d. */
int policy_bundle_attach_model(policy_bundle *b, uint32_t si, const char *model_path,
                               const char *features_path, policy_diags *d);
/* The same with options (opts may be NULL); from text nothing is stored, so
 * opts->store_dir is not used. */
int policy_bundle_from_text_opts(const char *file, const char *text, size_t len,
                                 const policy_load_opts *opts, policy_bundle **out,
                                 policy_diags *diags);
void policy_bundle_free(policy_bundle *b);

/* The version store's caches: removes from store's parsed/ and compiled/
 * what will likely not be used again (cache.c, "keeping the store small",
 * has the rule), keeping the parsed/ entries named by keys and the
 * compiled/ files of b's strategy versions for this build (b may be NULL).
 * A load that writes to the caches calls it; `verdict store` too. Never
 * touches the stored forms or models/. POLICY_STORE_ALL: every parsed/ and
 * compiled/ entry but those kept goes; POLICY_STORE_DRY: nothing is
 * removed, only counted. *st: what is left and what went (or would go). */
#define POLICY_STORE_ALL 1u
#define POLICY_STORE_DRY 2u
typedef struct policy_store_stats {
  uint64_t parsed, parsed_bytes;                     /* parsed/ entries left */
  uint64_t compiled, compiled_bytes;                 /* compiled/ files left, all builds */
  uint64_t compiled_other, compiled_other_bytes;     /* other builds' files found */
  uint64_t parsed_removed, parsed_removed_bytes;     /* what went (or would go), */
  uint64_t compiled_removed, compiled_removed_bytes; /* leftover temporary files included */
} policy_store_stats;
void policy_store_tidy(const char *store, const char *const *keys, size_t nkeys,
                       const policy_bundle *b, unsigned flags, policy_store_stats *st);

/* The strategy serving a decision point, or NULL. */
const strategy *policy_bundle_find(const policy_bundle *b, const char *point, size_t len);
/* The strategy a request for point with these candidates (a list of
 * strings, possibly empty) goes to: a strategy with `route: candidates`
 * serving the point whose actions include every candidate, else the point's
 * other strategy (policy_bundle_find's), else NULL. */
const strategy *policy_bundle_route(const policy_bundle *b, const char *point, size_t len,
                                    const value *candidates);
/* Index of an action by name, or -1. */
int32_t strategy_action(const strategy *s, const char *name, size_t len);
/* The program of rule i (let i): the one compiled at load, or, in a lazy
 * bundle, compiled now on first use and kept (not thread-safe: see
 * policy_load_opts.lazy). NULL when it does not compile, with *why set
 * ("does not compile: L:C: message", allocated in a). */
const expr_program *strategy_rule_program(const strategy *s, uint32_t i, arena *a,
                                          const char **why);
const expr_program *strategy_let_program(const strategy *s, uint32_t i, arena *a, const char **why);

/* ---- the rule index ----
 * Which rules can match a request, in first-match order, without evaluating
 * the others. `lookup` resolves a variable name (a context field, or
 * `request`) to its value for this decision, as the expression evaluator's
 * activation would. Fills out[] with rule numbers in ascending order and
 * returns how many (at most nrules). Rules that are not indexed are always
 * included. */
uint32_t rule_index_candidates(const rule_index *ix, const strategy *s, const expr_activation *act,
                               uint32_t *out);
/* How many rules the index files under a path, and on how many paths (for
 * `verdict check` and tests). */
void rule_index_stats(const rule_index *ix, uint32_t *indexed, uint32_t *paths);

#endif
