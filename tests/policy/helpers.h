/* helpers.h — shared by the policy tests (and the engine and replay tests
 * that decide inline tests): load a strategy from text, look for a
 * diagnostic by its printed first line, write an inline test's request,
 * compare two runs of a decision without what differs between runs. */
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

/* Whether k is one of the n strings keys. */
static inline int key_in(const value *k, const char *const *keys, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (k->kind == V_STRING && k->n == strlen(keys[i]) && !memcmp(k->s, keys[i], k->n)) return 1;
  return 0;
}

static inline void put_without(json_buf *b, const value *v, const char *const *keys, size_t n) {
  if (v->kind == V_MAP) {
    json_buf_putc(b, '{');
    for (uint32_t i = 0, first = 1; i < v->n; i++) {
      if (key_in(&v->entries[i].key, keys, n)) continue;
      if (!first) json_buf_putc(b, ',');
      first = 0;
      json_write(b, &v->entries[i].key, 1);
      json_buf_putc(b, ':');
      put_without(b, &v->entries[i].val, keys, n);
    }
    json_buf_putc(b, '}');
  } else if (v->kind == V_LIST) {
    json_buf_putc(b, '[');
    for (uint32_t i = 0; i < v->n; i++) {
      if (i) json_buf_putc(b, ',');
      put_without(b, &v->items[i], keys, n);
    }
    json_buf_putc(b, ']');
  } else {
    json_write(b, v, 1);
  }
}

/* json with every member named one of keys left out, at any depth, for
 * comparing two runs of one decision without what differs between runs
 * (measured times, ids): malloc'd, or NULL when json is not JSON. */
static inline char *json_without(const char *json, size_t len, const char *const *keys, size_t n) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  value v;
  json_opts jo = {0};
  jo.lenient = 1;
  char *out = NULL;
  if (json_parse(&a, json, len, &jo, &v, NULL) == 0) {
    json_buf b;
    json_buf_init(&b, NULL);
    put_without(&b, &v, keys, n);
    json_buf_putc(&b, '\0');
    out = b.data;
  }
  arena_free(&a);
  return out;
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
