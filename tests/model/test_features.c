/* test_features.c — feature specs: loading, the checks against the model
 * (count, names, types) with file:line:col errors, and extraction from the
 * names a rule condition sees. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "model/model.h"
#include "test.h"

/* The cat golden model: f0 categorical, f1 numeric. */
static gbdt_model *cat_model(void) {
  gbdt_model *m = NULL;
  char err[512];
  int rc = gbdt_load_file("tests/model/golden/cat.json", &m, err, sizeof err);
  CHECK_MSG(rc == 0, "%s", err);
  return m;
}

static const char GOOD[] =
    "# the cat model's input\n"
    "features:\n"
    "  - name: f0\n"
    "    type: categorical\n"
    "    expr: env.country\n"
    "    vocab: [US, DE, FR, GB, CN, RU, BR, IN, JP, KR, NL, SE]\n"
    "    unknown: 11\n"
    "  - name: f1\n"
    "    type: number\n"
    "    expr: signals.req_per_min / 60.0\n"
    "    missing: -1\n";

static const char *load_err(const gbdt_model *m, const char *text) {
  static char err[1024];
  feature_spec *fs = NULL;
  err[0] = 0;
  if (features_load_yaml(text, strlen(text), "m.features.yaml", m, &fs, err, sizeof err) == 0) {
    features_free(fs);
    return "";
  }
  return err;
}

#define FAILS(m, text, want)                                                  \
  do {                                                                        \
    const char *e_ = load_err(m, text);                                       \
    CHECK_MSG(strstr(e_, want) != NULL, "got \"%s\", want \"%s\"", e_, want); \
  } while (0)

static void test_load_checks(void) {
  gbdt_model *m = cat_model();
  CHECK_STR(load_err(m, GOOD), "");
  FAILS(m, "features:\n  - name: f0\n    type: categorical\n    expr: x\n    vocab: [a]\n",
        "m.features.yaml:2:3: features: declares 1 features, but the model takes 2");
  FAILS(m,
        "features:\n  - name: f1\n    type: number\n    expr: x\n"
        "  - name: f0\n    type: categorical\n    expr: y\n    vocab: [a]\n",
        "m.features.yaml:2:11: features[0].name: 'f1' is column 1 of the model, not 0");
  FAILS(m,
        "features:\n  - name: f0\n    type: number\n    expr: x\n"
        "  - name: f1\n    type: number\n    expr: y\n",
        "m.features.yaml:3:11: features[0].type: 'f0' is categorical in the model, but declared "
        "number here");
  FAILS(m,
        "features:\n  - name: f0\n    type: categorical\n    expr: x\n    vocab: [a]\n"
        "  - name: f1\n    type: categorical\n    expr: y\n    vocab: [b]\n",
        "features[1].type: 'f1' is numeric in the model");
  FAILS(m,
        "features:\n  - name: zz\n    type: categorical\n    expr: x\n    vocab: [a]\n"
        "  - name: f1\n    type: number\n    expr: y\n",
        "features[0].name: 'zz' is not the model's column 0, which is 'f0'");
  FAILS(NULL, "features:\n  - name: a\n    type: number\n    expr: x +\n", "m.features.yaml:4:");
  FAILS(NULL, "features:\n  - name: a\n    type: number\n    expr: x +\n", "features[0] (a).expr");
  FAILS(NULL, "features:\n  - name: a\n    type: numbr\n    expr: x\n",
        "m.features.yaml:3:11: features[0] (a).type: unknown type 'numbr'");
  FAILS(NULL, "features:\n  - name: a\n    type: number\n    expr: x\n    mising: 0\n",
        "m.features.yaml:5:5: features[0] (a): unknown key 'mising'");
  FAILS(NULL, "features:\n  - name: a\n    type: categorical\n    expr: x\n", "needs a vocab");
  FAILS(NULL, "features:\n  - name: a\n    type: categorical\n    expr: x\n    vocab: [a, a]\n",
        "'a' is listed twice");
  FAILS(
      NULL, "features:\n  - name: a\n    type: number\n    expr: x\n    missing: lots\n",
      "m.features.yaml:5:14: features[0] (a).missing: should be nan (missing) or a finite number");
  FAILS(NULL, "features:\n  - name: a\n    type: number\n  expr: x\n", "m.features.yaml:4:");
  FAILS(NULL,
        "features:\n  - name: a\n    type: number\n    expr: x\n  - name: a\n"
        "    type: number\n    expr: y\n",
        "feature 'a' is declared twice");
  FAILS(NULL, "feature:\n  - name: a\n", "m.features.yaml:1:1: unknown key 'feature'");
  FAILS(NULL, "features: []\n", "features: should be a list");
  gbdt_free(m);
  char *p = features_path_for("models/clef-default-v3.json");
  CHECK_STR(p, "models/clef-default-v3.features.yaml");
  free(p);
}

/* The activation: context fields by name, as the engine resolves them. */
static int lookup(void *user, const char *name, size_t len, value *out) {
  const value *ctx = user;
  const value *v = value_map_get(ctx, name, len);
  if (!v) return -1;
  *out = *v;
  return 0;
}

static void extract(const feature_spec *fs, const char *json, float *row, uint8_t *st,
                    const char **first_error, arena *a) {
  value ctx;
  json_error je;
  CHECK(json_parse(a, json, strlen(json), NULL, &ctx, &je) == 0);
  expr_activation act = {.lookup = lookup, .user = &ctx};
  eval_ctx ec = {.arena = a};
  features_extract(fs, &act, &ec, row, st, first_error);
}

static void test_extract(void) {
  gbdt_model *m = cat_model();
  feature_spec *fs;
  char err[512];
  CHECK(features_load_yaml(GOOD, strlen(GOOD), "g.yaml", m, &fs, err, sizeof err) == 0);
  CHECK(features_count(fs) == 2);
  CHECK_STR(features_name(fs, 0), "f0");
  CHECK(features_type(fs, 0) == FEATURE_CATEGORICAL);
  CHECK_STR(features_expr(fs, 1), "signals.req_per_min / 60.0");
  arena a;
  arena_init(&a, NULL, 0, 0);
  float row[2];
  uint8_t st[2];
  const char *e;
  extract(fs, "{\"env\": {\"country\": \"FR\"}, \"signals\": {\"req_per_min\": 90.0}}", row, st, &e,
          &a);
  CHECK(row[0] == 2.0f && st[0] == FX_VALUE);
  CHECK(row[1] == 1.5f && st[1] == FX_VALUE);
  CHECK(e == NULL);
  /* unknown country -> the declared code; absent field -> the default, with the error kept */
  extract(fs, "{\"env\": {\"country\": \"XX\"}, \"signals\": {}}", row, st, &e, &a);
  CHECK(row[0] == 11.0f && st[0] == FX_UNKNOWN);
  CHECK(row[1] == -1.0f && st[1] == FX_DEFAULT);
  CHECK(e && strstr(e, "req_per_min"));
  /* wrong type (a number for a categorical) -> missing (NaN) */
  extract(fs, "{\"env\": {\"country\": 3}, \"signals\": {\"req_per_min\": 6.0}}", row, st, &e, &a);
  CHECK(isnan(row[0]) && st[0] == FX_MISSING);
  CHECK(row[1] == 0.1f && st[1] == FX_VALUE);
  /* the row predicts like the same row built by hand */
  float m1[1], m2[1], hand[2] = {2.0f, 1.5f};
  extract(fs, "{\"env\": {\"country\": \"FR\"}, \"signals\": {\"req_per_min\": 90.0}}", row, st, &e,
          &a);
  gbdt_predict(m, row, m1, NULL, NULL);
  gbdt_predict(m, hand, m2, NULL, NULL);
  CHECK(memcmp(m1, m2, sizeof m1) == 0);
  features_free(fs);

  /* bools, a vocab map, unknown -> missing, non-finite -> missing */
  const char *spec =
      "features:\n"
      "  - {name: tor, type: bool, expr: is_tor, missing: false}\n"
      "  - {name: c, type: categorical, expr: c, vocab: {x: 5, y: 2}}\n"
      "  - {name: n, type: number, expr: n}\n";
  CHECK(features_load_yaml(spec, strlen(spec), "s.yaml", NULL, &fs, err, sizeof err) == 0);
  float r3[3];
  uint8_t s3[3];
  extract(fs, "{\"is_tor\": true, \"c\": \"y\", \"n\": 1e300}", r3, s3, NULL, &a);
  CHECK(r3[0] == 1.0f && r3[1] == 2.0f && isnan(r3[2]) && s3[2] == FX_MISSING);
  extract(fs, "{\"c\": \"z\", \"n\": 7}", r3, s3, NULL, &a);
  CHECK(r3[0] == 0.0f && s3[0] == FX_DEFAULT);
  CHECK(isnan(r3[1]) && s3[1] == FX_UNKNOWN);
  CHECK(r3[2] == 7.0f);
  features_free(fs);
  arena_free(&a);
  gbdt_free(m);
}

int main(void) {
  TEST_RUN(test_load_checks);
  TEST_RUN(test_extract);
  TEST_END();
}
