/* test_names.c — the engine's fast variable lookups (names.c: bindings found
 * by the name's pointer; decide.c: the per-decision caches) decide exactly
 * as the plain lookups do (decide_run without name tables, which `verdict
 * test` uses): every inline test of every example strategy, a stream of
 * edge-traffic requests for request_gate, and a strategy written to stress
 * the corner cases (lets that read each other, a let that fails, missing
 * fields, dotted names). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/names.h"
#include "test.h"
#include "verdict.h"

/* Decides req both ways and compares the decisions and their traces. */
static void both_ways(const policy_bundle *b, const name_table *names, const decide_request *req,
                      const char *what) {
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  vd_decision *d1 = vd_decision_new(), *d2 = vd_decision_new();
  vd_decision_set_trace(d1, 1);
  vd_decision_set_trace(d2, 1);
  decision_reset(d1);
  decision_reset(d2);
  vd_error e1, e2;
  engine_error_clear(&e1);
  engine_error_clear(&e2);
  int rc1 = decide_run(b, names, req, &lim, d1, &e1);
  int rc2 = decide_run(b, NULL, req, &lim, d2, &e2);
  CHECK_MSG(rc1 == rc2, "%s: %d vs %d", what, rc1, rc2);
  if (rc1 == 0 && rc2 == 0) {
    const char *j1, *j2;
    CHECK(vd_decision_render(d1, VD_JSON_TRACE, &j1, NULL) == 0);
    CHECK(vd_decision_render(d2, VD_JSON_TRACE, &j2, NULL) == 0);
    /* the trace's times differ; everything before them must not */
    const char *t1 = strstr(j1, "\"ns\":"), *t2 = strstr(j2, "\"ns\":");
    size_t n1 = t1 ? (size_t)(t1 - j1) : strlen(j1), n2 = t2 ? (size_t)(t2 - j2) : strlen(j2);
    CHECK_MSG(n1 == n2 && memcmp(j1, j2, n1) == 0, "%s:\n  %.*s\n  %.*s", what, (int)n1, j1,
              (int)n2, j2);
  } else {
    CHECK_MSG(strcmp(e1.message, e2.message) == 0, "%s: %s vs %s", what, e1.message, e2.message);
  }
  vd_decision_free(d1);
  vd_decision_free(d2);
}

static policy_bundle *load(const char *dir) {
  policy_load_opts lo = {.store_dir = ""};
  policy_diags dg;
  memset(&dg, 0, sizeof dg);
  policy_bundle *b = NULL;
  int rc = policy_bundle_load(dir, &lo, &b, &dg);
  CHECK_MSG(rc == 0 && b, "%s does not load", dir);
  policy_diags_free(&dg);
  return b;
}

static void test_example_tests_decide_alike(void) {
  policy_bundle *b = load("examples/policies");
  if (!b) return;
  arena a;
  arena_init(&a, NULL, 0, 0);
  name_table *names = name_tables_build(&a, b);
  CHECK(names != NULL);
  uint32_t ran = 0;
  for (uint32_t k = 0; names && k < b->nstrategies; k++) {
    const strategy *s = &b->strategies[k];
    CHECK(name_table_refs(&names[k])->nbinds > 0);
    for (uint32_t j = 0; j < s->ntests; j++) {
      const policy_test *t = &s->tests[j];
      const char *point = s->ndecision_points ? s->decision_points[0] : s->name;
      decide_request req;
      req.action = value_str(point, (uint32_t)strlen(point));
      req.candidates = t->candidates.kind == V_LIST ? t->candidates : value_list(NULL, 0);
      req.key = t->key.kind == V_STRING ? t->key : value_str("", 0);
      req.context = t->context.kind == V_MAP ? t->context : value_map(NULL, 0);
      char what[300];
      snprintf(what, sizeof what, "%s: %s", s->name, t->name);
      both_ways(b, names, &req, what);
      ran++;
    }
  }
  CHECK(ran >= 60);
  arena_free(&a);
  policy_bundle_free(b);
}

/* Requests for request_gate as the edge sends them, including malformed
 * ones (every rule then sees a different mix of bound and missing names). */
static void test_gate_traffic_decides_alike(void) {
  static const char *const reqs[] = {
      "{\"action\":\"http_request\",\"context\":{\"method\":\"GET\",\"path\":\"/products\","
      "\"client_ip\":\"81.2.69.160\",\"headers\":{\"user-agent\":\"Mozilla/5.0 (X11) Firefox\"},"
      "\"env\":{\"country\":\"GB\"},\"signals\":{\"req_per_min\":12}}}",
      "{\"action\":\"http_request\",\"key\":\"key_live_4f1c9a2e\",\"context\":{\"method\":\"POST\","
      "\"path\":\"/api/v1/x\",\"client_ip\":\"52.95.1.2\",\"headers\":{\"user-agent\":\"sdk\"},"
      "\"env\":{\"country\":\"DE\"}}}",
      "{\"action\":\"http_request\",\"context\":{\"method\":\"GET\",\"path\":\"/.git/config\","
      "\"client_ip\":\"2001:db8:bad::1\",\"env\":{\"country\":\"NL\"}}}",
      "{\"action\":\"http_request\",\"context\":{\"method\":\"GET\",\"path\":\"/\","
      "\"client_ip\":\"10.1.2.3\",\"headers\":{\"user-agent\":\"curl/8\"},\"env\":{}}}",
      "{\"action\":\"http_request\",\"context\":{\"method\":\"GET\",\"path\":\"/\","
      "\"client_ip\":\"not an ip\",\"env\":{\"country\":\"GB\"}}}",
      "{\"action\":\"http_request\",\"context\":{\"method\":\"GET\",\"path\":\"/billing/x\","
      "\"client_ip\":\"81.2.69.160\",\"headers\":{\"user-agent\":\"Mozilla\"},\"env\":{\"country\":"
      "\"GB\"},\"session\":{\"country\":\"FR\",\"mfa_age_s\":10}},\"candidates\":[\"allow\","
      "\"block\"]}",
      "{\"action\":\"http_request\",\"context\":{\"path\":\"/\"}}",
      "{\"action\":\"http_request\",\"context\":{\"method\":7,\"path\":[],\"client_ip\":1,"
      "\"headers\":\"x\",\"env\":{\"country\":null},\"signals\":{\"req_per_min\":\"many\"}}}",
      "{\"action\":\"http_request\",\"context\":{\"method\":\"GET\",\"path\":\"/api/v2/x\","
      "\"client_ip\":\"220.181.1.1\",\"headers\":{\"user-agent\":\"SQLMap\"},\"env\":{\"country\":"
      "\"CN\"},\"signals\":{\"req_per_min\":5000,\"failed_logins_10m\":9}}}",
  };
  policy_bundle *b = load("examples/policies");
  if (!b) return;
  arena a;
  arena_init(&a, NULL, 0, 0);
  name_table *names = name_tables_build(&a, b);
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  for (size_t i = 0; names && i < sizeof reqs / sizeof reqs[0]; i++) {
    arena r;
    arena_init(&r, NULL, 0, 0);
    decide_request req;
    vd_error err;
    CHECK(request_parse_json(&r, reqs[i], strlen(reqs[i]), &lim, &req, &err) == 0);
    char what[64];
    snprintf(what, sizeof what, "request %zu", i);
    both_ways(b, names, &req, what);
    arena_free(&r);
  }
  arena_free(&a);
  policy_bundle_free(b);
}

static const char CORNERS[] =
    "strategy: corners\n"
    "constants:\n"
    "  limit: 10\n"
    "let:\n"
    "  twice: 'base * 2'\n"
    "  base: 'has(context.n) ? n : 0'\n"
    "  host: 'env.region'\n"
    "  bad: 'n / 0'\n"
    "rules:\n"
    "  - name: errors\n"
    "    if: has(context.boom) && bad > 1\n"
    "    action: block\n"
    "  - name: big\n"
    "    if: twice > limit && base > 0\n"
    "    action: review\n"
    "  - name: dotted\n"
    "    if: env.region == 'eu' && host == 'eu'\n"
    "    action: allow\n"
    "  - name: twice-again\n"
    "    if: has(context.again) && twice == base * 2 && host != ''\n"
    "    action: block\n"
    "  - name: missing\n"
    "    if: has(context.miss) && nothere == 1\n"
    "    action: block\n"
    "default: allow\n"
    "on_error: deny\n";

static void test_corner_names_decide_alike(void) {
  char dir[256];
  test_tmpdir(dir, sizeof dir, "names");
  char path[320];
  snprintf(path, sizeof path, "%s/corners.yaml", dir);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(CORNERS, f);
  fclose(f);
  policy_bundle *b = load(dir);
  remove(path);
  rmdir(dir);
  if (!b) return;
  arena a;
  arena_init(&a, NULL, 0, 0);
  name_table *names = name_tables_build(&a, b);
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  static const char *const reqs[] = {
      "{\"action\":\"corners\",\"context\":{}}",
      "{\"action\":\"corners\",\"context\":{\"n\":6}}",
      "{\"action\":\"corners\",\"context\":{\"n\":1,\"env\":{\"region\":\"eu\"}}}",
      "{\"action\":\"corners\",\"context\":{\"env\":{\"region\":\"us\"},\"again\":1}}",
      "{\"action\":\"corners\",\"context\":{\"n\":3,\"boom\":1}}",
      "{\"action\":\"corners\",\"context\":{\"n\":3,\"again\":1}}",
      "{\"action\":\"corners\",\"context\":{\"env\":{},\"miss\":1}}",
      "{\"action\":\"corners\",\"context\":{\"env.region\":\"eu\",\"env\":{\"region\":\"x\"}}}",
      "{\"action\":\"corners\",\"context\":{\"n\":\"six\"}}",
  };
  for (size_t i = 0; names && i < sizeof reqs / sizeof reqs[0]; i++) {
    arena r;
    arena_init(&r, NULL, 0, 0);
    decide_request req;
    vd_error err;
    CHECK(request_parse_json(&r, reqs[i], strlen(reqs[i]), &lim, &req, &err) == 0);
    char what[160];
    snprintf(what, sizeof what, "corners: %s", reqs[i]);
    both_ways(b, names, &req, what);
    arena_free(&r);
  }
  arena_free(&a);
  policy_bundle_free(b);
}

int main(void) {
  TEST_RUN(test_example_tests_decide_alike);
  TEST_RUN(test_gate_traffic_decides_alike);
  TEST_RUN(test_corner_names_decide_alike);
  TEST_END();
}
