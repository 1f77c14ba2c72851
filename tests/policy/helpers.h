/* helpers.h — shared by the policy tests (and the engine and replay tests
 * that decide inline tests): load a strategy from text, look for a
 * diagnostic by its printed first line, write an inline test's request. */
#ifndef VD_TESTS_POLICY_HELPERS_H
#define VD_TESTS_POLICY_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "policy/policy.h"
#include "test.h"

/* The printed form of diagnostic i (all lines), malloc'd. */
static inline char *diag_text(const policy_diags *d, size_t i) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  policy_diag_print(&d->items[i], f);
  fclose(f);
  return buf;
}

/* Whether some diagnostic's first printed line is exactly `line`. */
static inline int has_diag(const policy_diags *d, const char *line) {
  for (size_t i = 0; i < d->n; i++) {
    char *t = diag_text(d, i);
    size_t n = strcspn(t, "\n");
    int ok = strlen(line) == n && memcmp(t, line, n) == 0;
    free(t);
    if (ok) return 1;
  }
  return 0;
}

static inline void dump_diags(const policy_diags *d) {
  for (size_t i = 0; i < d->n; i++) policy_diag_print(&d->items[i], stderr);
}

/* Loads the bundle in dir with the version store `store` (lazily when
 * `lazy`): checks that it loads, prints any diagnostic, returns it. */
static inline policy_bundle *load_dir(const char *dir, const char *store, int lazy) {
  policy_load_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = store;
  o.lazy = lazy;
  policy_diags d;
  memset(&d, 0, sizeof d);
  policy_bundle *b = NULL;
  CHECK(policy_bundle_load(dir, &o, &b, &d) == 0);
  if (d.n) dump_diags(&d);
  policy_diags_free(&d);
  return b;
}

/* Writes n bytes of text to path (checked). */
static inline void put_file(const char *path, const char *text, size_t n) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fwrite(text, 1, n, f);
  fclose(f);
}

/* Loads text as "t.yaml"; returns the bundle (or NULL) and fills d. */
static inline policy_bundle *load_text(const char *text, policy_diags *d) {
  policy_bundle *b = NULL;
  memset(d, 0, sizeof *d);
  policy_bundle_from_text("t.yaml", text, strlen(text), &b, d);
  return b;
}

/* The same, indexing every field that min_rules rules test. */
static inline policy_bundle *load_text_min(const char *text, uint32_t min_rules, policy_diags *d) {
  policy_bundle *b = NULL;
  memset(d, 0, sizeof *d);
  policy_load_opts o = {.index_min_rules = min_rules};
  policy_bundle_from_text_opts("t.yaml", text, strlen(text), &o, &b, d);
  return b;
}

/* Checks that text fails to load with the diagnostic `want` among its
 * diagnostics. */
#define CHECK_ERROR(text, want)                                     \
  do {                                                              \
    policy_diags d_;                                                \
    policy_bundle *b_ = load_text(text, &d_);                       \
    CHECK(b_ == NULL);                                              \
    CHECK_MSG(has_diag(&d_, want), "missing diagnostic: %s", want); \
    if (!has_diag(&d_, want)) dump_diags(&d_);                      \
    policy_bundle_free(b_);                                         \
    policy_diags_free(&d_);                                         \
  } while (0)

/* Checks that text loads, with the warning `want`. */
#define CHECK_WARNING(text, want)                                   \
  do {                                                              \
    policy_diags d_;                                                \
    policy_bundle *b_ = load_text(text, &d_);                       \
    CHECK(b_ != NULL);                                              \
    CHECK_MSG(has_diag(&d_, want), "missing diagnostic: %s", want); \
    if (!b_ || !has_diag(&d_, want)) dump_diags(&d_);               \
    policy_bundle_free(b_);                                         \
    policy_diags_free(&d_);                                         \
  } while (0)

/* The decision request of an inline test, as JSON (malloc'd): its decision
 * point (else the strategy's first), context, candidates and key. */
static inline char *inline_test_request(const strategy *s, const policy_test *t) {
  json_buf b;
  json_buf_init(&b, NULL);
  const char *point = t->point ? t->point : s->decision_points[0];
  json_buf_put(&b, "{\"action\":", 10);
  json_write_string(&b, point, strlen(point));
  json_buf_put(&b, ",\"context\":", 11);
  json_write(&b, &t->context, 1);
  if (t->candidates.n) {
    json_buf_put(&b, ",\"candidates\":", 14);
    json_write(&b, &t->candidates, 1);
  }
  if (t->key.n) {
    json_buf_put(&b, ",\"key\":", 7);
    json_write(&b, &t->key, 1);
  }
  json_buf_put(&b, "}", 2); /* with the terminator */
  return b.data;
}

#endif
