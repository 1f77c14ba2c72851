/* fuzz_gbdt.c — the XGBoost JSON model loader on arbitrary text, loaded
 * twice: on the fast path and with GBDT_LOAD_GENERAL. When it loads,
 * predictions on rows derived from the input (all missing, small values,
 * byte values). Checks: no crash, leak, UB or hang; a failed load says why;
 * both loads agree on success, and both paths give the same margins and
 * probabilities bit for bit (gbdt.c promises identical predictions). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "model/model.h"

static void predict_both(const gbdt_model *fast, const gbdt_model *gen, const uint8_t *data,
                         size_t size) {
  uint32_t nf = gbdt_num_features(fast), k = gbdt_num_outputs(fast);
  FUZZ_CHECK(k >= 1, "a model with %u outputs", k);
  FUZZ_CHECK(nf == gbdt_num_features(gen) && k == gbdt_num_outputs(gen),
             "the two loads disagree on the shape");
  if (nf > 100000 || k > 10000) return;
  float *row = calloc(nf ? nf : 1, sizeof *row);
  float *buf = calloc(4 * (size_t)k, sizeof *buf);
  if (!row || !buf) goto out;
  float *m1 = buf, *p1 = buf + k, *m2 = buf + 2 * k, *p2 = buf + 3 * k;
  for (int pass = 0; pass < 3; pass++) {
    for (uint32_t i = 0; i < nf; i++) {
      uint8_t b = size ? data[(i + (size_t)pass * 7) % size] : 0;
      row[i] = pass == 0 ? NAN : pass == 1 ? (float)(b - 128) / 8.0f : (float)b;
    }
    FUZZ_CHECK(gbdt_predict(fast, row, m1, p1, NULL) == GBDT_OK, "predict failed");
    FUZZ_CHECK(gbdt_predict(gen, row, m2, p2, NULL) == GBDT_OK, "predict failed (general)");
    FUZZ_CHECK(memcmp(m1, m2, k * sizeof *m1) == 0 && memcmp(p1, p2, k * sizeof *p1) == 0,
               "the fast and general paths disagree (pass %d: %.9g vs %.9g)", pass, m1[0], m2[0]);
    (void)gbdt_argmax(fast, p1);
    (void)gbdt_confidence(fast, p1);
  }
out:
  free(row);
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1u << 20) return 0;
  gbdt_model *m[2] = {NULL, NULL};
  int rc[2];
  for (unsigned flags = 0; flags < 2; flags++) {
    char err[512];
    err[0] = '\0';
    rc[flags] = gbdt_load_json_flags((const char *)data, size, "fuzz.json",
                                     flags ? GBDT_LOAD_GENERAL : 0, &m[flags], err, sizeof err);
    if (rc[flags] != 0) {
      FUZZ_CHECK(err[0] != '\0', "a failed load without a message");
      FUZZ_CHECK(m[flags] == NULL, "a failed load returned a model");
    } else {
      FUZZ_CHECK(m[flags] != NULL, "a load without a model");
    }
  }
  FUZZ_CHECK(rc[0] == rc[1], "the fast-path load says %d, the general one %d", rc[0], rc[1]);
  if (m[0] && m[1]) {
    for (uint32_t i = 0; i < gbdt_num_features(m[0]) && i < 64; i++) {
      (void)gbdt_feature_name(m[0], i);
      (void)gbdt_feature_type(m[0], i);
    }
    (void)gbdt_objective_name(m[0]);
    predict_both(m[0], m[1], data, size);
  }
  gbdt_free(m[0]);
  gbdt_free(m[1]);
  return 0;
}
