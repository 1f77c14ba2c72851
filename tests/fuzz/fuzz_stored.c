/* fuzz_stored.c — a version store's stored form read back as replay reads
 * it (policy_bundle_from_stored: verdict's JSON reader, the tree checked to
 * write back to exactly the stored bytes, the strategy compiled; any other
 * text loaded as YAML), on arbitrary bytes. Checks: no crash, leak, UB or
 * hang; a failed load reports an error with a message; and the fast path
 * agrees with the YAML loader: a text both load gives the same strategy
 * version either way, and a text without inline tests that the fast path
 * takes (its version is the SHA-256 of the text) is one the YAML loader
 * takes too — so replay never runs a policy other than the one the stored
 * form names. (The fast path does not read a stored form's `tests`, which
 * replay never runs: their bytes are only hashed, so a form whose tests
 * the YAML loader refuses may still load.) */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sha256.h"
#include "fuzz.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 65536) return 0;
  const char *text = (const char *)data;
  policy_bundle *b = NULL;
  policy_diags d;
  memset(&d, 0, sizeof d);
  int rc = policy_bundle_from_stored("fuzz.json", text, size, &b, &d);
  if (rc != 0) {
    FUZZ_CHECK(d.errors > 0, "a failed load without an error");
    FUZZ_CHECK(b == NULL, "a failed load returned a bundle");
  } else {
    FUZZ_CHECK(b != NULL && b->nstrategies == 1, "a load without its one strategy");
  }
  for (size_t i = 0; i < d.n; i++)
    FUZZ_CHECK(d.items[i].message[0] != '\0', "a diagnostic without a message");
  policy_diags_free(&d);
  if (!b) return 0;

  policy_bundle *y = NULL;
  memset(&d, 0, sizeof d);
  int yrc = policy_bundle_from_text("fuzz.json", text, size, &y, &d);
  policy_diags_free(&d);
  char hex[65];
  sha256_hex(text, size, hex);
  const char *v = b->strategies[0].version;
  /* the fast path took it (a canonical form); with tests, the versions
   * differ when the YAML loader reads tests the fast path only hashed */
  int fast = strcmp(v, hex) == 0, tests = memmem(text, size, "\"tests\"", 7) != NULL;
  if (fast && !tests)
    FUZZ_CHECK(yrc == 0 && y, "a stored form without tests that the YAML loader refuses");
  if (yrc == 0 && y && !(fast && tests))
    FUZZ_CHECK(y->nstrategies == 1 && strcmp(y->strategies[0].version, v) == 0,
               "the stored form and the YAML loader give versions %s and %s", v,
               y->nstrategies ? y->strategies[0].version : "(none)");
  policy_bundle_free(y);
  policy_bundle_free(b);
  return 0;
}
