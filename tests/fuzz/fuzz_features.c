/* fuzz_features.c — the feature spec loader (NAME.features.yaml) on
 * arbitrary text: once against the example bundle's model (count, names and
 * types checked) and once without a model; when it loads, every feature is
 * extracted from a fixed request context. Checks: no crash, leak, UB or
 * hang; a failed load says why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/json.h"
#include "fuzz.h"
#include "model/model.h"

static gbdt_model *model;
static arena A, E;
static value ctxv;

static const char CONTEXT[] =
    "{\"amount\":120.5,\"currency\":\"EUR\",\"country\":\"FR\",\"card_present\":false,"
    "\"account_age_days\":12,\"velocity_1h\":3,\"merchant\":{\"category\":\"5411\",\"risk\":0.2},"
    "\"user\":{\"id\":42,\"roles\":[\"a\"]},\"items\":[1,2,3],\"n\":null}";

static int lookup(void *user, const char *name, size_t len, value *out) {
  (void)user;
  if (len == 7 && memcmp(name, "context", 7) == 0) {
    *out = ctxv;
    return 0;
  }
  for (uint32_t i = 0; i < ctxv.n; i++) {
    const value *k = &ctxv.entries[i].key;
    if (k->n == len && memcmp(k->s, name, len) == 0) {
      *out = ctxv.entries[i].val;
      return 0;
    }
  }
  return -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  char err[512];
  if (gbdt_load_file(VD_SOURCE_DIR "/examples/policies/models/clef-default-v3.json", &model, err,
                     sizeof err) != 0) {
    fprintf(stderr, "fuzz_features: %s\n", err);
    abort();
  }
  arena_init(&A, NULL, 0, 0);
  arena_init(&E, NULL, 0, 64u << 20);
  json_error e;
  if (json_parse(&A, CONTEXT, sizeof CONTEXT - 1, NULL, &ctxv, &e) != 0) abort();
  return 0;
}

static void one(const uint8_t *data, size_t size, const gbdt_model *m) {
  feature_spec *fs = NULL;
  char err[1024];
  err[0] = '\0';
  if (features_load_yaml((const char *)data, size, "fuzz.features.yaml", m, &fs, err, sizeof err) !=
      0) {
    FUZZ_CHECK(err[0] != '\0', "a failed load without a message");
    FUZZ_CHECK(fs == NULL, "a failed load returned a spec");
    return;
  }
  FUZZ_CHECK(fs != NULL, "a load without a spec");
  uint32_t n = features_count(fs);
  if (m)
    FUZZ_CHECK(n == gbdt_num_features(m), "%u features for a model of %u", n, gbdt_num_features(m));
  float *row = calloc(n ? n : 1, sizeof *row);
  uint8_t *st = calloc(n ? n : 1, 1);
  if (row && st) {
    expr_activation act = {lookup, NULL};
    eval_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.arena = &E;
    ctx.cost_limit = 100000;
    const char *first = NULL;
    (void)features_extract(fs, &act, &ctx, row, st, &first);
    for (uint32_t i = 0; i < n; i++) {
      (void)features_name(fs, i);
      (void)features_expr(fs, i);
      (void)features_type_name(features_type(fs, i));
    }
  }
  free(row);
  free(st);
  arena_reset(&E);
  features_free(fs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 65536) return 0;
  one(data, size, model);
  one(data, size, NULL);
  return 0;
}
