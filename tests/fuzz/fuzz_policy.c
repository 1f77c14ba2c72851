/* fuzz_policy.c — the YAML policy loader and compiler on arbitrary text
 * (policy_bundle_from_text: libfyaml, the schema checks, every condition
 * compiled, the rule indexes), then, when it loads, every strategy's inline
 * tests decided as the server's warm-up does. Checks: no crash, leak, UB or
 * hang; a failed load reports at least one error, each with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "fuzz.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 65536) return 0;
  policy_bundle *b = NULL;
  policy_diags d;
  memset(&d, 0, sizeof d);
  int rc = policy_bundle_from_text("fuzz.yaml", (const char *)data, size, &b, &d);
  if (rc != 0) {
    FUZZ_CHECK(d.errors > 0, "a failed load without an error");
    FUZZ_CHECK(b == NULL, "a failed load returned a bundle");
  } else {
    FUZZ_CHECK(b != NULL, "a load without a bundle");
  }
  for (size_t i = 0; i < d.n; i++)
    FUZZ_CHECK(d.items[i].message[0] != '\0', "a diagnostic without a message");
  policy_diags_free(&d);
  if (!b) return 0;
  vd_decision *dec = vd_decision_new();
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  for (uint32_t k = 0; dec && k < b->nstrategies; k++) {
    const strategy *st = &b->strategies[k];
    const char *point = st->ndecision_points ? st->decision_points[0] : st->name;
    for (uint32_t j = 0; j < (st->ntests ? st->ntests : 1) && j < 64; j++) {
      const policy_test *t = st->ntests ? &st->tests[j] : NULL;
      decide_request req;
      req.action = value_str(point, (uint32_t)strlen(point));
      req.candidates = t && t->candidates.kind == V_LIST ? t->candidates : value_list(NULL, 0);
      req.key = t && t->key.kind == V_STRING ? t->key : value_str("", 0);
      req.context = t && t->context.kind == V_MAP ? t->context : value_map(NULL, 0);
      decision_reset(dec);
      vd_error err;
      engine_error_clear(&err);
      (void)decide_run(b, NULL, &req, &lim, dec, &err);
    }
  }
  vd_decision_free(dec);
  policy_bundle_free(b);
  return 0;
}
