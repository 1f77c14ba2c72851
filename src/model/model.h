/* model.h — verdict's model fallback: gradient-boosted trees in XGBoost's
 * JSON format, scored natively and bit for bit as XGBoost 1.7 scores them,
 * and the feature spec that turns a request into the model's input row.
 *
 *   gbdt_model *m;
 *   if (gbdt_load_file("models/fraud.json", &m, err, sizeof err)) ... err says what and where
 *   feature_spec *fs;
 *   if (features_load_file("models/fraud.features.yaml", m, &fs, err, sizeof err)) ...
 *   float row[n], margins[k], probs[k];       n = gbdt_num_features(m), k = gbdt_num_outputs(m)
 *   features_extract(fs, &activation, &ectx, row, status);
 *   gbdt_predict(m, row, margins, probs, &deadline);  GBDT_OK or GBDT_ETIMEOUT
 *
 * A loaded model and a loaded spec are immutable: any number of threads may
 * predict and extract with them at once. Loading is slow (milliseconds) and
 * belongs off the request path; predicting allocates nothing.
 *
 * Not here: choosing a model for a strategy, thresholds, `model.score` in
 * conditions, snapshots — the engine does those with this API.
 * docs/models.md is the user's documentation. */
#ifndef VD_MODEL_MODEL_H
#define VD_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "expr/expr.h"

/* ---- models ---- */

typedef struct gbdt_model gbdt_model;

typedef enum gbdt_objective {
  GBDT_BINARY_LOGISTIC,  /* "binary:logistic": 1 output, sigmoid */
  GBDT_REG_LOGISTIC,     /* "reg:logistic": 1 output, sigmoid */
  GBDT_REG_SQUAREDERROR, /* "reg:squarederror": 1 output, identity */
  GBDT_MULTI_SOFTPROB,   /* "multi:softprob": num_class outputs, softmax */
  GBDT_MULTI_SOFTMAX     /* "multi:softmax": as softprob here (XGBoost itself
                          * returns the arg max class; gbdt_argmax gives it) */
} gbdt_objective;

/* Loads an XGBoost JSON model (1.x to 3.x files, booster gbtree). Returns 0,
 * or -1 with a message in err naming the file, the JSON path and what is
 * wrong or unsupported (dart, gblinear, vector leaves, other objectives, ...).
 * The version is the SHA-256 of the bytes read. */
int gbdt_load_file(const char *path, gbdt_model **out, char *err, size_t errlen);
/* The same from text in memory; name is used in messages ("<memory>" if NULL). */
int gbdt_load_json(const char *text, size_t len, const char *name, gbdt_model **out, char *err,
                   size_t errlen);
/* Flags: GBDT_LOAD_GENERAL keeps the model off the fast path (the doubled
 * row of gbdt.c), as models with categorical splits are; predictions are
 * identical, only slower. For tests, which check that both paths agree. */
#define GBDT_LOAD_GENERAL 1u
int gbdt_load_json_flags(const char *text, size_t len, const char *name, unsigned flags,
                         gbdt_model **out, char *err, size_t errlen);
void gbdt_free(gbdt_model *m);

gbdt_objective gbdt_objective_of(const gbdt_model *m);
const char *gbdt_objective_name(const gbdt_model *m); /* "binary:logistic", ... */
uint32_t gbdt_num_features(const gbdt_model *m);
/* The model's name for feature i, or NULL when the model has no names. */
const char *gbdt_feature_name(const gbdt_model *m, uint32_t i);
/* 'q' numeric (also for "float", "int", "i" and for models without types),
 * 'c' categorical. */
char gbdt_feature_type(const gbdt_model *m, uint32_t i);
/* 1 for binary and regression, num_class for multi: the length of the
 * margins and probs arrays gbdt_predict fills. */
uint32_t gbdt_num_outputs(const gbdt_model *m);
uint32_t gbdt_num_trees(const gbdt_model *m);
/* base_score as the file states it (probability space for logistic
 * objectives), and the margin every output starts from. */
float gbdt_base_score(const gbdt_model *m);
float gbdt_base_margin(const gbdt_model *m);
/* Lower-case hex SHA-256 of the model file's bytes (64 characters). */
const char *gbdt_version(const gbdt_model *m);
/* The XGBoost version that wrote the file ("1.7.4"). */
const char *gbdt_writer_version(const gbdt_model *m);
/* Bytes held by the packed trees (for `verdict model info`). */
size_t gbdt_memory(const gbdt_model *m);

/* ---- prediction ---- */

/* A deadline on the monotonic clock (core/clock.h, clock_mono_ns). The clock is read once every
 * `every` blocks of 8 trees (0: every 4 blocks, i.e. 32 trees), so checking
 * costs a few ns per row; a prediction may run past the deadline by the time
 * of that many trees. */
typedef struct gbdt_deadline {
  uint64_t at_ns;
  uint32_t every;
} gbdt_deadline;

#define GBDT_OK 0
#define GBDT_ETIMEOUT 1 /* the deadline passed: margins and probs are not set */

/* Scores one row of gbdt_num_features floats (NaN = missing; nothing else
 * is). Fills margins[0..k) (raw sums, base margin included) and, when probs
 * is not NULL, probs[0..k): sigmoid for logistic objectives, softmax for
 * multiclass, the margin for reg:squarederror. Both equal XGBoost 1.7's
 * predict(output_margin=True) and predict() bit for bit (for multi:softmax,
 * probs are what multi:softprob would give). dl may be NULL (no deadline).
 * Returns GBDT_OK or GBDT_ETIMEOUT. */
int gbdt_predict(const gbdt_model *m, const float *row, float *margins, float *probs,
                 const gbdt_deadline *dl);

/* The index of the largest of probs[0..k) (the first on ties). */
uint32_t gbdt_argmax(const gbdt_model *m, const float *probs);
/* How sure the model is of its own answer, in [0.5, 1] for binary models:
 * max(p, 1 - p) for logistic objectives, the largest class probability for
 * multiclass; NaN for reg:squarederror (no probability to speak of). */
float gbdt_confidence(const gbdt_model *m, const float *probs);

/* ---- feature specs: NAME.features.yaml beside NAME.json ---- */

typedef struct feature_spec feature_spec;

typedef enum feature_type { FEATURE_NUMBER, FEATURE_BOOL, FEATURE_CATEGORICAL } feature_type;

/* Loads a spec and checks it against m (count, names, types); m may be NULL
 * to skip the checks. Expressions compile as policy conditions do
 * (simple_names). Returns 0, or -1 with "file:line:col: key: message" in err. */
int features_load_file(const char *path, const gbdt_model *m, feature_spec **out, char *err,
                       size_t errlen);
int features_load_yaml(const char *text, size_t len, const char *file, const gbdt_model *m,
                       feature_spec **out, char *err, size_t errlen);
void features_free(feature_spec *fs);

/* "models/NAME.json" -> "models/NAME.features.yaml" (malloc'd; NULL on OOM).
 * A path not ending in ".json" gets ".features.yaml" appended. */
char *features_path_for(const char *model_path);

uint32_t features_count(const feature_spec *fs);
const char *features_name(const feature_spec *fs, uint32_t i);
feature_type features_type(const feature_spec *fs, uint32_t i);
const char *features_type_name(feature_type t);                /* "number", "bool", "categorical" */
const char *features_expr(const feature_spec *fs, uint32_t i); /* the source text */
/* The compiled expression (the engine lists the names it reads, names.c). */
const expr_program *features_program(const feature_spec *fs, uint32_t i);
/* Where byte pos of feature i's expression is in its file: line and column
 * (the expression's start when the scalar is quoted or spans lines). */
void features_expr_place(const feature_spec *fs, uint32_t i, size_t pos, int *line, int *col);
/* Every feature's name, NUL-terminated, one after the other (*len bytes in
 * all); name i starts at (*at)[i]. */
const char *features_names_packed(const feature_spec *fs, size_t *len, const uint32_t **at);

/* What extraction made of one feature. */
typedef enum feature_status {
  FX_VALUE = 0, /* the expression's value (a category's code for categoricals) */
  FX_MISSING,   /* absent, null, non-finite or an error: NaN (missing: nan) */
  FX_DEFAULT,   /* absent, null, non-finite or an error: the declared default */
  FX_UNKNOWN    /* a categorical value outside the vocabulary: per `unknown` */
} feature_status;

/* Evaluates every feature's expression with act and ctx (the activation and
 * evaluation context the engine's rule conditions use: the same names
 * resolve) and fills row[0..features_count) with float32 values: numbers
 * rounded to float, bools 1/0, categories their code; the missing-value
 * policy where a value is absent, null, of the wrong type, non-finite or an
 * evaluation error. status (may be NULL) gets a feature_status per feature;
 * first_error (may be NULL) the first evaluation error's message (in
 * ctx->arena), or NULL. Returns the number of features that did not come
 * from their expression (status != FX_VALUE). Never fails: a feature that
 * cannot be computed is missing. */
uint32_t features_extract(const feature_spec *fs, const expr_activation *act, eval_ctx *ctx,
                          float *row, uint8_t *status, const char **first_error);

#endif
