/* test_stored.c — replay's loading of a recorded version from the version
 * store (policy_bundle_from_stored) gives the strategy the YAML loader gives.
 *
 * Every example strategy is loaded into a store; its stored form is then
 * loaded both ways — as YAML (policy_bundle_from_text, what replay did) and
 * with the JSON reader (what replay does) — and both must carry the
 * version the file is named by, and decide every inline test of the
 * strategy the same, byte for byte, traces included. The JSON reader must
 * really have been used (the tests are not kept on that path). Then what a
 * store can hold besides: a form that is not canonical (read as YAML, same
 * version), one changed under its name (a version that is not its name,
 * which replay refuses), one cut short, and one whose strategy does not
 * compile (errors that name line and column, from the YAML loader); and
 * damaged copies of the example forms (bytes changed, cut out, repeated:
 * a fixed pseudo-random sequence), each of which must load or fail
 * cleanly, a failure with a message. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "core/sha256.h"
#include "engine/engine.h"
#include "policy/helpers.h"
#include "policy/policy.h"
#include "test.h"
#include "verdict.h"

#define CLOCK_NS 1796000000000000000LL

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&buf, &n);
  char chunk[8192];
  size_t r;
  while (m && (r = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, r, m);
  fclose(f);
  if (!m) return NULL;
  fclose(m);
  *len = n;
  return buf;
}

/* What a decision's JSON measures, which differs between runs. */
static const char *const TIMED[] = {"latency_us", "ns", "snapshot_id", "latency_ns"};

/* The decision with its trace, the measured times left out (malloc'd). */
static char *decide(const policy_bundle *b, const name_table *names, const char *req) {
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  vd_decision *d = vd_decision_new();
  vd_decision_set_trace(d, 1);
  vd_error err;
  char *out = NULL;
  if (engine_decide_json_inputs(b, names, &lim, req, strlen(req), CLOCK_NS, 0, NULL, d, &err)) {
    if (asprintf(&out, "error: %s", err.message) < 0) out = NULL;
  } else {
    const char *json;
    size_t len;
    if (vd_decision_render(d, VD_JSON_TRACE, &json, &len) == 0)
      out = json_without(json, len, TIMED, sizeof TIMED / sizeof TIMED[0]);
  }
  vd_decision_free(d);
  return out;
}

typedef policy_bundle *(*loader)(const char *path, const char *text, size_t len, policy_diags *d);

static policy_bundle *as_yaml(const char *path, const char *text, size_t len, policy_diags *d) {
  policy_bundle *b = NULL;
  return policy_bundle_from_text(path, text, len, &b, d) == 0 ? b : NULL;
}

static policy_bundle *as_stored(const char *path, const char *text, size_t len, policy_diags *d) {
  policy_bundle *b = NULL;
  return policy_bundle_from_stored(path, text, len, &b, d) == 0 ? b : NULL;
}

/* The stored version of s, loaded one way, its model attached as replay
 * attaches it (from the store). */
static policy_bundle *load_version(loader how, const char *store, const strategy *s) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.json", store, s->version);
  size_t len = 0;
  char *text = slurp(path, &len);
  CHECK_MSG(text != NULL, "%s is not in the store", path);
  if (!text) return NULL;
  policy_diags d;
  memset(&d, 0, sizeof d);
  policy_bundle *b = how(path, text, len, &d);
  CHECK_MSG(b != NULL && d.errors == 0, "%s: %zu errors", path, d.errors);
  policy_diags_free(&d);
  if (b && s->model) {
    char mp[600], fp[600];
    snprintf(mp, sizeof mp, "%s/models/%s.json", store, s->model->version);
    snprintf(fp, sizeof fp, "%s/models/%s.features.yaml", store, s->model->features_version);
    memset(&d, 0, sizeof d);
    CHECK_MSG(policy_bundle_attach_model(b, 0, mp, fp, &d) == 0, "%s: its model", path);
    policy_diags_free(&d);
  }
  free(text);
  return b;
}

static void test_examples_load_the_same(const char *pol, const char *store) {
  policy_load_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = store;
  policy_diags d;
  memset(&d, 0, sizeof d);
  policy_bundle *tests = NULL;
  CHECK(policy_bundle_load(pol, &o, &tests, &d) == 0 && tests && tests->nstrategies >= 4);
  policy_diags_free(&d);
  uint32_t compared = 0;
  for (uint32_t i = 0; tests && i < tests->nstrategies; i++) {
    const strategy *s = &tests->strategies[i];
    policy_bundle *y = load_version(as_yaml, store, s), *j = load_version(as_stored, store, s);
    if (!y || !j) {
      policy_bundle_free(y);
      policy_bundle_free(j);
      continue;
    }
    CHECK_STR(y->strategies[0].version, s->version);
    CHECK_STR(j->strategies[0].version, s->version);
    CHECK_STR(j->version, y->version);
    CHECK_MSG(j->strategies[0].ntests == 0 && y->strategies[0].ntests == s->ntests,
              "%s: %u tests from the JSON reader (it keeps none), %u from YAML", s->name,
              j->strategies[0].ntests, y->strategies[0].ntests);
    arena na;
    arena_init(&na, NULL, 0, 0);
    name_table *ny = name_tables_build(&na, y), *nj = name_tables_build(&na, j);
    for (uint32_t t = 0; ny && nj && t < s->ntests; t++) {
      char *req = inline_test_request(s, &s->tests[t]);
      char *a = decide(y, ny, req), *b = decide(j, nj, req);
      CHECK(a && b && strncmp(a, "error", 5) != 0);
      if (a && b)
        CHECK_MSG(strcmp(a, b) == 0, "%s: test '%s':\n yaml %s\n json %s", s->name,
                  s->tests[t].name, a, b);
      compared += a && b;
      free(a);
      free(b);
      free(req);
    }
    arena_free(&na);
    policy_bundle_free(y);
    policy_bundle_free(j);
  }
  CHECK_MSG(compared > 200, "%u inline tests compared", compared);
  policy_bundle_free(tests);
}

/* What else a file in the store can hold. */
static void test_other_texts(void) {
  static const char canon[] =
      "{\"strategy\":\"s\",\"rules\":[{\"name\":\"r\",\"if\":\"ua == \\\"x\\\"\",\"action\":"
      "\"block\"}],\"default\":\"allow\",\"tests\":[{\"name\":\"t\",\"context\":{\"ua\":\"x\"},"
      "\"expect\":\"block\"}]}";
  char want[65];
  sha256_hex(canon, strlen(canon), want);
  policy_diags d;
  memset(&d, 0, sizeof d);

  /* canonical: the JSON reader, its version its hash */
  policy_bundle *b = as_stored("s.json", canon, strlen(canon), &d);
  CHECK(b && d.n == 0 && b->strategies[0].ntests == 0);
  if (b) CHECK_STR(b->strategies[0].version, want);
  policy_bundle_free(b);

  /* the same document laid out otherwise: the YAML loader, the same version */
  char spaced[sizeof canon + 8];
  snprintf(spaced, sizeof spaced, "{ %s", canon + 1);
  b = as_stored("s.json", spaced, strlen(spaced), &d);
  CHECK(b && d.errors == 0 && b->strategies[0].ntests == 1);
  if (b) CHECK_STR(b->strategies[0].version, want);
  policy_bundle_free(b);

  /* changed under its name: another version (replay refuses it) */
  char changed[sizeof canon];
  memcpy(changed, canon, sizeof canon);
  char *at = strstr(changed, "\"block\"");
  CHECK(at != NULL);
  if (at) memcpy(at, "\"allow\"", 7);
  b = as_stored("s.json", changed, strlen(changed), &d);
  CHECK(b && d.errors == 0);
  if (b) CHECK(strcmp(b->strategies[0].version, want) != 0);
  policy_bundle_free(b);

  /* cut short: an error naming the file, line and column */
  b = as_stored("store/s.json", canon, 40, &d);
  CHECK(b == NULL && d.errors == 1 && d.n == 1);
  if (d.n) {
    CHECK_STR(d.items[0].file, "store/s.json");
    CHECK(d.items[0].line == 1 && d.items[0].column > 0);
  }
  policy_diags_free(&d);

  /* a strategy that does not compile: the error at its place in the text */
  static const char bad[] =
      "{\"strategy\":\"s\",\"rules\":[{\"name\":\"r\",\"if\":\"ua ==\",\"action\":\"block\"}],"
      "\"default\":\"allow\"}";
  memset(&d, 0, sizeof d);
  b = as_stored("store/bad.json", bad, strlen(bad), &d);
  CHECK(b == NULL && d.errors >= 1);
  if (d.n) {
    CHECK_STR(d.items[0].key, "rules[0].if");
    CHECK_MSG(d.items[0].line == 1 && d.items[0].column > 40, "at %d:%d", d.items[0].line,
              d.items[0].column);
  }
  policy_diags_free(&d);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void test_damaged_forms(const char *store) {
  DIR *dh = opendir(store);
  CHECK(dh != NULL);
  if (!dh) return;
  struct dirent *de;
  uint32_t tried = 0, loaded = 0;
  while ((de = readdir(dh))) {
    if (strlen(de->d_name) != 69 || strcmp(de->d_name + 64, ".json") != 0) continue;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", store, de->d_name);
    size_t len = 0;
    char *text = slurp(path, &len);
    CHECK(text && len > 16);
    if (!text || len <= 16) continue;
    char *m = malloc(2 * len + 1);
    for (int k = 0; m && k < 24; k++) {
      size_t n = len, at = next() % len, span = 1 + next() % 16;
      memcpy(m, text, len);
      switch (k % 4) {
        case 0: /* a byte changed to one that matters to JSON */
          m[at] = "{}[]\":,0 \\e-"[next() % 13];
          break;
        case 1: /* bytes cut out */
          if (at + span > len) span = len - at;
          memmove(m + at, m + at + span, len - at - span);
          n = len - span;
          break;
        case 2: /* bytes repeated */
          if (at + span > len) span = len - at;
          memmove(m + at + span, m + at, len - at);
          n = len + span;
          break;
        case 3: /* cut short */
          n = at;
          break;
      }
      policy_diags d;
      memset(&d, 0, sizeof d);
      policy_bundle *b = NULL;
      int rc = policy_bundle_from_stored(path, m, n, &b, &d);
      CHECK(rc == 0 ? b != NULL && b->nstrategies == 1 : b == NULL && d.errors > 0);
      for (size_t i = 0; i < d.n; i++) CHECK(d.items[i].message[0] != '\0');
      tried++;
      loaded += rc == 0;
      policy_diags_free(&d);
      policy_bundle_free(b);
    }
    free(m);
    free(text);
  }
  closedir(dh);
  CHECK_MSG(tried >= 96 && loaded < tried, "%u damaged forms, %u loaded", tried, loaded);
}

int main(void) {
  char dir[256], pol[320], store[320], cmd[1200];
  test_tmpdir(dir, sizeof dir, "stored");
  snprintf(pol, sizeof pol, "%s/pol", dir);
  snprintf(store, sizeof store, "%s/store", dir);
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s' && cp examples/policies/*.yaml '%s'/ && cp -r examples/policies/models "
           "'%s'/",
           pol, pol, pol);
  CHECK(system(cmd) == 0);
  test_examples_load_the_same(pol, store);
  test_other_texts();
  test_damaged_forms(store);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
  TEST_END();
}
