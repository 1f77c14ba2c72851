/* test_gbdt.c — the native evaluator against XGBoost's own predictions.
 *
 * tests/model/golden/ holds models trained by tools/gen-model-golden with
 * python3-xgboost, and for each the rows and what XGBoost predicted. Every
 * margin and probability must be the same float32, bit for bit. Then every
 * refusal and load error, the deadline, confidence(). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "model/model.h"
#include "test.h"

#define GOLDEN "tests/model/golden/"

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  if (b) b[n] = 0;
  if (len) *len = (size_t)n;
  return b;
}

/* Splits a CSV line in place; returns the number of cells. */
static int split(char *line, char **cells, int max) {
  int n = 0;
  char *p = line;
  for (;;) {
    if (n == max) return -1;
    cells[n++] = p;
    char *c = strchr(p, ',');
    if (!c) break;
    *c = 0;
    p = c + 1;
  }
  char *nl = strchr(cells[n - 1], '\n');
  if (nl) *nl = 0;
  return n;
}

static float cellf(const char *s) { return *s ? strtof(s, NULL) : NAN; }

static int same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Returns the number of rows that differ. general: load with
 * GBDT_LOAD_GENERAL (the evaluator's other path). */
static int run_golden(const char *name, int general, int *rows_out) {
  char path[256];
  snprintf(path, sizeof path, GOLDEN "%s.json", name);
  gbdt_model *m;
  char err[512];
  size_t len;
  char *text = slurp(path, &len);
  CHECK_MSG(text != NULL, "cannot read %s", path);
  if (!text) return -1;
  int rc =
      gbdt_load_json_flags(text, len, path, general ? GBDT_LOAD_GENERAL : 0, &m, err, sizeof err);
  free(text);
  CHECK_MSG(rc == 0, "%s", err);
  if (rc) return -1;
  snprintf(path, sizeof path, GOLDEN "%s.csv", name);
  char *csv = slurp(path, NULL);
  CHECK_MSG(csv != NULL, "cannot read %s", path);
  if (!csv) {
    gbdt_free(m);
    return -1;
  }
  uint32_t nf = gbdt_num_features(m), k = gbdt_num_outputs(m);
  char *cells[512];
  char *line = csv, *next = strchr(line, '\n');
  *next = 0;
  int n = split(line, cells, 512);
  CHECK(n == (int)(nf + 2 * k));
  for (uint32_t i = 0; i < nf && n == (int)(nf + 2 * k); i++) {
    const char *fname = gbdt_feature_name(m, i);
    CHECK(fname && !strcmp(fname, cells[i]));
  }
  int bad = 0, rows = 0;
  float row[512], margins[16], probs[16];
  for (line = next + 1; *line; line = next + 1) {
    next = strchr(line, '\n');
    if (!next) break;
    *next = 0;
    n = split(line, cells, 512);
    if (n != (int)(nf + 2 * k)) {
      bad++;
      continue;
    }
    for (uint32_t i = 0; i < nf; i++) row[i] = cellf(cells[i]);
    CHECK(gbdt_predict(m, row, margins, probs, NULL) == GBDT_OK);
    int ok = 1;
    for (uint32_t g = 0; g < k; g++) {
      ok &= same(margins[g], cellf(cells[nf + g]));
      ok &= same(probs[g], cellf(cells[nf + k + g]));
    }
    if (!ok && bad < 3)
      fprintf(stderr, "%s row %d: margin %.9g prob %.9g, xgboost %s %s\n", name, rows,
              (double)margins[0], (double)probs[0], cells[nf], cells[nf + k]);
    bad += !ok;
    rows++;
  }
  free(csv);
  gbdt_free(m);
  *rows_out = rows;
  return bad;
}

static void test_goldens(void) {
  static const char *const cases[] = {"bc_dense",      "bc_missing",   "bc_reglogistic", "cat",
                                      "iris_softprob", "iris_softmax", "diabetes_reg",   "deep"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int general = 0; general < 2; general++) {
      int rows = 0, bad = run_golden(cases[i], general, &rows);
      CHECK_MSG(bad == 0 && rows >= 100, "%s%s: %d of %d rows differ from XGBoost", cases[i],
                general ? " (general path)" : "", bad, rows);
    }
}

static void test_info(void) {
  gbdt_model *m;
  char err[512];
  CHECK(gbdt_load_file(GOLDEN "bc_missing.json", &m, err, sizeof err) == 0);
  CHECK(gbdt_objective_of(m) == GBDT_BINARY_LOGISTIC);
  CHECK_STR(gbdt_objective_name(m), "binary:logistic");
  CHECK(gbdt_num_features(m) == 30);
  CHECK(gbdt_num_trees(m) == 40);
  CHECK(gbdt_num_outputs(m) == 1);
  CHECK(gbdt_base_score(m) != 0.5f);
  CHECK(same(gbdt_base_margin(m), -logf(1.0f / gbdt_base_score(m) - 1.0f)));
  CHECK(strlen(gbdt_version(m)) == 64);
  CHECK_STR(gbdt_writer_version(m), "1.7.4");
  CHECK_STR(gbdt_feature_name(m, 0), "mean_radius");
  CHECK(gbdt_feature_type(m, 0) == 'q');
  /* confidence: max(p, 1 - p) */
  float p = 0.2f;
  CHECK(same(gbdt_confidence(m, &p), 1.0f - 0.2f));
  p = 0.9f;
  CHECK(same(gbdt_confidence(m, &p), 0.9f));
  gbdt_free(m);

  CHECK(gbdt_load_file(GOLDEN "cat.json", &m, err, sizeof err) == 0);
  CHECK(gbdt_feature_type(m, 0) == 'c' && gbdt_feature_type(m, 1) == 'q');
  gbdt_free(m);

  CHECK(gbdt_load_file(GOLDEN "iris_softmax.json", &m, err, sizeof err) == 0);
  CHECK(gbdt_num_outputs(m) == 3 && gbdt_objective_of(m) == GBDT_MULTI_SOFTMAX);
  float probs[3] = {0.1f, 0.7f, 0.2f};
  CHECK(gbdt_argmax(m, probs) == 1);
  CHECK(same(gbdt_confidence(m, probs), 0.7f));
  gbdt_free(m);

  CHECK(gbdt_load_file(GOLDEN "diabetes_reg.json", &m, err, sizeof err) == 0);
  CHECK(isnan(gbdt_confidence(m, probs)));
  CHECK(same(gbdt_base_margin(m), 150.0f));
  gbdt_free(m);

  /* the version is the file's SHA-256: same bytes, same version */
  size_t len;
  char *text = slurp(GOLDEN "bc_dense.json", &len);
  gbdt_model *a, *b;
  CHECK(gbdt_load_json(text, len, "a", &a, err, sizeof err) == 0);
  char *text2 = malloc(len + 2);
  memcpy(text2, text, len);
  text2[len] = '\n';
  CHECK(gbdt_load_json(text2, len + 1, "b", &b, err, sizeof err) == 0);
  CHECK(strcmp(gbdt_version(a), gbdt_version(b)) != 0);
  gbdt_free(b);
  CHECK(gbdt_load_json(text, len, "b", &b, err, sizeof err) == 0);
  CHECK_STR(gbdt_version(a), gbdt_version(b));
  gbdt_free(a);
  gbdt_free(b);
  free(text);
  free(text2);
}

/* Loads text with one substitution; returns the error (empty when it loaded). */
static const char *load_edit(const char *file, const char *from, const char *to) {
  static char err[1024];
  size_t len;
  char *text = slurp(file, &len);
  char *at = strstr(text, from);
  CHECK_MSG(at != NULL, "'%s' not in %s", from, file);
  if (!at) {
    free(text);
    return "";
  }
  size_t fl = strlen(from), tl = strlen(to);
  char *edited = malloc(len - fl + tl + 1);
  size_t pre = (size_t)(at - text);
  memcpy(edited, text, pre);
  memcpy(edited + pre, to, tl);
  memcpy(edited + pre + tl, at + fl, len - pre - fl);
  gbdt_model *m = NULL;
  err[0] = 0;
  if (gbdt_load_json(edited, len - fl + tl, "m.json", &m, err, sizeof err) == 0) {
    gbdt_free(m);
    err[0] = 0;
  }
  free(text);
  free(edited);
  return err;
}

#define REFUSES(file, from, to, want1, want2)                            \
  do {                                                                   \
    const char *e_ = load_edit(file, from, to);                          \
    CHECK_MSG(strstr(e_, want1) && strstr(e_, want2), "got \"%s\"", e_); \
  } while (0)

static void test_refusals(void) {
  const char *iris = GOLDEN "iris_softprob.json", *bc = GOLDEN "bc_dense.json";
  REFUSES(iris, "\"name\":\"gbtree\"", "\"name\":\"dart\"", "booster \"dart\" is not supported",
          "at $.learner.gradient_booster.name");
  REFUSES(iris, "\"name\":\"gbtree\"", "\"name\":\"gblinear\"", "booster \"gblinear\"",
          "m.json: at $.learner.gradient_booster.name");
  REFUSES(iris, "\"name\":\"multi:softprob\"", "\"name\":\"rank:pairwise\"",
          "objective \"rank:pairwise\" is not supported", "$.learner.objective.name");
  REFUSES(iris, "\"num_parallel_tree\":\"1\",\"num_trees\":\"24\",\"size_leaf_vector\":\"0\"",
          "\"num_parallel_tree\":\"1\",\"num_trees\":\"24\",\"size_leaf_vector\":\"3\"",
          "vector leaves", "$.learner.gradient_booster.model.gbtree_model_param");
  REFUSES(
      iris,
      "\"num_deleted\":\"0\",\"num_feature\":\"4\",\"num_nodes\":\"3\",\"size_leaf_vector\":\"0\"",
      "\"num_deleted\":\"0\",\"num_feature\":\"4\",\"num_nodes\":\"3\",\"size_leaf_vector\":\"2\"",
      "vector leaves", "$.learner.gradient_booster.model.trees[0].tree_param");
  REFUSES(iris, "\"num_target\":\"1\"", "\"num_target\":\"2\"", "multi-target",
          "$.learner.learner_model_param");
  REFUSES(iris, "\"num_trees\":\"24\"", "\"num_trees\":\"25\"", "num_trees says 25",
          "$.learner.gradient_booster.model");
  REFUSES(iris, "\"left_children\":[1,-1,-1]", "\"left_children\":[1,-1,7]",
          "left_children[2] is not a node id", "trees[0]");
  REFUSES(iris, "\"left_children\":[1,-1,-1]", "\"left_children\":[0,-1,-1]", "do not form a tree",
          "trees[0]");
  REFUSES(iris, "\"left_children\":[1,-1,-1]", "\"left_children\":[1,-1]", "has 2 items",
          "trees[0]");
  REFUSES(iris, "\"learner\":", "\"lerner\":", "missing key \"learner\"", "at $:");
  REFUSES(bc, "\"base_score\":\"5E-1\"", "\"base_score\":\"1.5E0\"", "outside (0, 1)",
          "$.learner.learner_model_param");
  REFUSES(bc, "\"base_score\":\"5E-1\"", "\"base_score\":\"x\"", "\"base_score\" is not a number",
          "$.learner.learner_model_param");
  REFUSES(iris, "\"split_indices\":[2,0,0]", "\"split_indices\":[4,0,0]",
          "split_indices[0] is 4, but the model has 4 features", "trees[0]");
  REFUSES(bc, "{\"learner\"", "{,\"learner\"", "m.json:1:2: at $", "");
  REFUSES(GOLDEN "cat.json", "\"feature_types\":[\"c\",\"q\"]", "\"feature_types\":[\"q\",\"q\"]",
          "categorical split on feature 0", "does not declare categorical");
  /* base_score written as "[5E-1]" by XGBoost 3.x loads */
  CHECK(*load_edit(bc, "\"base_score\":\"5E-1\"", "\"base_score\":\"[5E-1]\"") == 0);
  char err[256];
  gbdt_model *m;
  CHECK(gbdt_load_file("tests/model/golden/no-such.json", &m, err, sizeof err) == -1);
  CHECK(strstr(err, "no-such.json: cannot open") != NULL);
}

static void test_missing_and_edges(void) {
  gbdt_model *m;
  char err[256];
  CHECK(gbdt_load_file(GOLDEN "cat.json", &m, err, sizeof err) == 0);
  float row[2] = {0.0f, 0.5f}, a[1], b[1], pa[1], pb[1];
  /* an unseen category behaves like a code in no set (not like missing) */
  row[0] = 40.0f;
  gbdt_predict(m, row, a, pa, NULL);
  row[0] = 1000.0f;
  gbdt_predict(m, row, b, pb, NULL);
  CHECK(same(a[0], b[0]));
  row[0] = NAN;
  gbdt_predict(m, row, b, pb, NULL);
  CHECK(!same(a[0], b[0]));
  /* probs may be NULL */
  CHECK(gbdt_predict(m, row, b, NULL, NULL) == GBDT_OK);
  gbdt_free(m);
}

/* Infinities are ordinary values (+inf right, -inf left at numeric splits):
 * the fast path (NaN rewritten as +-inf) and the general one agree on them. */
static void test_infinities(void) {
  size_t len;
  char *text = slurp(GOLDEN "bc_missing.json", &len), err[256];
  gbdt_model *fast, *general;
  CHECK(gbdt_load_json_flags(text, len, "f", 0, &fast, err, sizeof err) == 0);
  CHECK(gbdt_load_json_flags(text, len, "g", GBDT_LOAD_GENERAL, &general, err, sizeof err) == 0);
  free(text);
  float row[30];
  int differ = 0;
  for (int r = 0; r < 64; r++) {
    for (int i = 0; i < 30; i++) {
      int k = (r * 31 + i * 7) % 5;
      row[i] = k == 0 ? INFINITY : k == 1 ? -INFINITY : k == 2 ? NAN : (float)(r + i);
    }
    float a[1], b[1], pa[1], pb[1];
    gbdt_predict(fast, row, a, pa, NULL);
    gbdt_predict(general, row, b, pb, NULL);
    differ += !same(a[0], b[0]) || !same(pa[0], pb[0]);
  }
  CHECK(differ == 0);
  gbdt_free(fast);
  gbdt_free(general);
}

static void test_deadline(void) {
  gbdt_model *m;
  char err[256];
  CHECK(gbdt_load_file(GOLDEN "bc_dense.json", &m, err, sizeof err) == 0);
  float row[30] = {0}, mg[1], pr[1];
  gbdt_deadline past = {.at_ns = 0, .every = 1};
  CHECK(gbdt_predict(m, row, mg, pr, &past) == GBDT_ETIMEOUT);
  gbdt_deadline late = {.at_ns = clock_mono_ns() + 60ull * 1000000000ull, .every = 1};
  float mg2[1], pr2[1];
  CHECK(gbdt_predict(m, row, mg2, pr2, &late) == GBDT_OK);
  CHECK(gbdt_predict(m, row, mg, pr, NULL) == GBDT_OK);
  CHECK(same(mg[0], mg2[0]) && same(pr[0], pr2[0]));
  gbdt_free(m);
}

int main(void) {
  TEST_RUN(test_goldens);
  TEST_RUN(test_info);
  TEST_RUN(test_refusals);
  TEST_RUN(test_missing_and_edges);
  TEST_RUN(test_infinities);
  TEST_RUN(test_deadline);
  TEST_END();
}
