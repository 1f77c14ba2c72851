/* test_engine.c — every path a decision can take, through the public API:
 * a rule decides, the default decides, an error takes on_error, candidates
 * pass rules over, each on_no_candidate mode, lets computed lazily and once,
 * constants, the `request` variable, the cost limit, the decision JSON and its trace, and the same
 * request built in C. Bundles: tests/engine/bundles/. */
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "engine/engine.h"
#include "test.h"
#include "verdict.h"

static vd_decision *D;

static vd_engine *open_bundle(const char *dir) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = ""; /* keep no version store in the source tree */
  vd_engine *e = NULL;
  vd_error err;
  int rc = vd_engine_open(dir, &o, &e, &err);
  CHECK_MSG(rc == 0, "%s: %s", dir, err.message);
  return e;
}

/* Decides json; returns the status and keeps the error in *err. */
static int decide(vd_engine *e, const char *json, vd_error *err) {
  return vd_decide_json(e, json, -1, D, err);
}

static int decide_ok(vd_engine *e, const char *json) {
  vd_error err;
  int rc = decide(e, json, &err);
  CHECK_MSG(rc == 0, "%s -> %d %s", json, rc, err.message);
  return rc == 0;
}

static int contains(const char *hay, const char *needle) { return hay && strstr(hay, needle); }

static const char *render(int flags) {
  const char *s = NULL;
  size_t n = 0;
  CHECK(vd_decision_render(D, flags, &s, &n) == 0);
  CHECK(s && strlen(s) == n);
  return s ? s : "";
}

/* A context that no rule of `gate` matches (every field the rules read is
 * present). */
#define PLAIN    \
  "\"path\":\"/" \
  "\",\"headers\":{\"user-agent\":\"curl\"},\"body_size\":1,\"env\":{\"country\":\"US\"}"

static void rule_decides(vd_engine *e) {
  if (!decide_ok(e,
                 "{\"action\":\"gate\",\"context\":{\"path\":\"/\",\"headers\":{\"user-agent\":"
                 "\"SQLMap/1.7\"},\"body_size\":1,\"env\":{\"country\":\"US\"}}}"))
    return;
  CHECK_STR(vd_decision_action(D), "block");
  CHECK(vd_decision_allowed(D) == 0);
  CHECK(vd_decision_review(D) == 0);
  CHECK(vd_decision_confidence(D) == 1.0);
  CHECK_STR(vd_decision_source(D), "rule");
  CHECK_STR(vd_decision_rule(D), "scanners");
  CHECK_STR(vd_decision_reason(D), "known vulnerability scanner");
  CHECK_STR(vd_decision_strategy(D), "gate");
  CHECK(strlen(vd_decision_policy_version(D)) == 64);
  CHECK(vd_decision_latency_us(D) > 0.0);

  /* review: ask_mfa is declared {allowed: false, review: true} */
  if (decide_ok(e,
                "{\"action\":\"http_request\",\"context\":{\"path\":\"/admin/users\","
                "\"headers\":{\"user-agent\":\"curl\"},\"body_size\":1,\"env\":{}}}")) {
    CHECK_STR(vd_decision_action(D), "ask_mfa");
    CHECK(vd_decision_review(D) == 1);
    CHECK(vd_decision_allowed(D) == 0);
    CHECK_STR(vd_decision_rule(D), "admin");
  }
  /* a declared action with an unusual name, allowed */
  if (decide_ok(e,
                "{\"action\":\"gate\",\"context\":{\"path\":\"/\",\"headers\":{\"user-agent\":"
                "\"curl\"},\"body_size\":1,\"env\":{\"country\":\"FR\"}}}")) {
    CHECK_STR(vd_decision_action(D), "route_eu");
    CHECK(vd_decision_allowed(D) == 1);
    CHECK(vd_decision_reason(D) == NULL);
  }
}

static void default_decides(vd_engine *e) {
  if (!decide_ok(e, "{\"action\":\"gate\",\"context\":{" PLAIN "}}")) return;
  CHECK_STR(vd_decision_action(D), "allow");
  CHECK_STR(vd_decision_source(D), "default");
  CHECK(vd_decision_rule(D) == NULL);
  CHECK_STR(vd_decision_reason(D), "nothing matched");
  CHECK(vd_decision_confidence(D) == 1.0);
  CHECK(vd_decision_allowed(D) == 1);
}

static void errors_take_on_error(vd_engine *e) {
  /* No headers: the `ua` let fails, so rule `scanners` fails. */
  if (decide_ok(e, "{\"action\":\"gate\",\"context\":{\"path\":\"/\"}}")) {
    CHECK_STR(vd_decision_action(D), "block");
    CHECK_STR(vd_decision_source(D), "error");
    CHECK_STR(vd_decision_rule(D), "scanners");
    CHECK(vd_decision_confidence(D) == 0.0);
    CHECK_MSG(contains(vd_decision_reason(D), "rule 'scanners' failed") &&
                  contains(vd_decision_reason(D), "no such key"),
              "%s", vd_decision_reason(D));
  }
  /* A condition that yields an int is an error too. */
  if (decide_ok(e,
                "{\"action\":\"gate\",\"context\":{\"path\":\"/api/x\",\"headers\":{\"user-"
                "agent\":\"curl\"},\"body_size\":5,\"env\":{\"country\":\"US\"}}}")) {
    CHECK_STR(vd_decision_source(D), "error");
    CHECK_STR(vd_decision_rule(D), "not-bool");
    CHECK_MSG(contains(vd_decision_reason(D), "not a bool"), "%s", vd_decision_reason(D));
  }
}

static void candidates_pass_rules_over(vd_engine *e) {
  vd_decision_set_trace(D, 1);
  /* A scanner, but `block` is not a candidate: `scanners` is passed over
   * without being evaluated (so the `ua` let is never computed). */
  if (decide_ok(e,
                "{\"action\":\"gate\",\"candidates\":[\"allow\",\"ask_mfa\"],\"context\":{"
                "\"path\":\"/api/v1\",\"headers\":{\"user-agent\":\"sqlmap\"},\"body_size\":"
                "99999,\"env\":{\"country\":\"CN\"}}}")) {
    CHECK_STR(vd_decision_action(D), "allow");
    CHECK_STR(vd_decision_rule(D), "api-cn");
    const char *j = render(VD_JSON_TRACE);
    /* `admin` (path.startsWith("/admin")) may be left out by the index;
     * the others cannot be. */
    CHECK_MSG(contains(j,
                       "\"rules\":[{\"rule\":\"probe\",\"result\":\"skipped-not-candidate\"},"
                       "{\"rule\":\"scanners\",\"result\":\"skipped-not-candidate\"},"),
              "%s", j);
    CHECK_MSG(contains(j,
                       "{\"rule\":\"body-too-big\",\"result\":\"skipped-not-candidate\"},"
                       "{\"rule\":\"api-cn\",\"result\":\"true\"}],\"matched\":\"api-cn\""),
              "%s", j);
    CHECK(!contains(j, "\"rule\":\"admin\",\"result\":\"true\""));
    CHECK_MSG(contains(j, "\"lets\":[\"is_api\"]"), "%s", j);
  }
  vd_decision_set_trace(D, 0);
}

static void no_candidate_modes(vd_engine *gate, vd_engine *modes) {
  vd_error err;
  /* first: the default `allow` is not a candidate -> the first candidate */
  if (decide_ok(gate,
                "{\"action\":\"gate\",\"candidates\":[\"route_eu\",\"ask_mfa\"],"
                "\"context\":{" PLAIN "}}")) {
    CHECK_STR(vd_decision_action(D), "route_eu");
    CHECK(vd_decision_allowed(D) == 1);
    CHECK_STR(vd_decision_source(D), "default");
    CHECK_MSG(contains(vd_decision_reason(D), "on_no_candidate: first"), "%s",
              vd_decision_reason(D));
  }
  /* first, with a candidate the strategy never declared: default meanings */
  if (decide_ok(gate,
                "{\"action\":\"gate\",\"candidates\":[\"deny_all\"],\"context\":{" PLAIN "}}")) {
    CHECK_STR(vd_decision_action(D), "deny_all");
    CHECK(vd_decision_allowed(D) == 0);
  }
  /* error (the default mode) */
  int rc = decide(modes, "{\"action\":\"nc_error\",\"candidates\":[\"approve\"]}", &err);
  CHECK(rc == VD_ENOCANDIDATE);
  CHECK(err.code == VD_ENOCANDIDATE);
  CHECK_STR(err.path, "$.candidates");
  CHECK_MSG(contains(err.message, "'block'") && contains(err.message, "on_no_candidate"), "%s",
            err.message);
  CHECK(vd_decision_action(D) == NULL);
  CHECK(vd_decision_source(D) == NULL);
  /* without candidates the same strategy answers normally */
  if (decide_ok(modes, "{\"action\":\"nc_error\"}")) CHECK_STR(vd_decision_action(D), "deny");
  /* an empty candidates list means none were given */
  if (decide_ok(modes, "{\"action\":\"nc_error\",\"candidates\":[]}"))
    CHECK_STR(vd_decision_action(D), "deny");
  /* a named action */
  if (decide_ok(modes,
                "{\"action\":\"nc_action\",\"candidates\":[\"ask\",\"allow\"],"
                "\"context\":{\"flag\":false}}")) {
    CHECK_STR(vd_decision_action(D), "ask");
    CHECK(vd_decision_review(D) == 1);
    CHECK(vd_decision_allowed(D) == 0);
  }
  rc = decide(modes,
              "{\"action\":\"nc_action\",\"candidates\":[\"allow\"],\"context\":"
              "{\"flag\":false}}",
              &err);
  CHECK(rc == VD_ENOCANDIDATE);
  CHECK_MSG(contains(err.message, "'ask'"), "%s", err.message);
  /* the rule's own action is a candidate: no mode involved */
  if (decide_ok(modes,
                "{\"action\":\"nc_action\",\"candidates\":[\"allow\"],\"context\":"
                "{\"flag\":true}}"))
    CHECK_STR(vd_decision_action(D), "allow");
  /* an error whose on_error action is not a candidate: first candidate,
   * still marked as an error */
  if (decide_ok(modes,
                "{\"action\":\"nc_first\",\"candidates\":[\"allow\"],\"context\":{\"x\":"
                "1}}")) {
    CHECK_STR(vd_decision_action(D), "allow");
    CHECK_STR(vd_decision_source(D), "error");
    CHECK(vd_decision_confidence(D) == 0.0);
    CHECK_MSG(contains(vd_decision_reason(D), "division by zero") &&
                  contains(vd_decision_reason(D), "on_no_candidate: first"),
              "%s", vd_decision_reason(D));
  }
  if (decide_ok(modes, "{\"action\":\"nc_first\",\"context\":{\"x\":1}}")) {
    CHECK_STR(vd_decision_action(D), "deny");
    CHECK_MSG(contains(vd_decision_reason(D), "division by zero"), "%s", vd_decision_reason(D));
  }
  /* no not-allowed action and no on_error: an error decision with no action */
  if (decide_ok(modes, "{\"action\":\"no_on_error\",\"context\":{}}")) {
    CHECK(vd_decision_action(D) == NULL);
    CHECK_STR(vd_decision_source(D), "error");
    CHECK(vd_decision_allowed(D) == 0);
    CHECK_MSG(contains(render(0), "{\"action\":null,\"allowed\":false,"), "%s", render(0));
  }
}

static void lets_once_and_lazily(vd_engine *e) {
  vd_decision_set_trace(D, 1);
  /* `ua` is read twice by `scanners`, `is_api` by `api-cn` and `not-bool`;
   * `never_read` (1 / 0) is read by no rule. */
  if (decide_ok(e,
                "{\"action\":\"gate\",\"context\":{\"path\":\"/api/x\",\"headers\":{\"user-"
                "agent\":\"curl\"},\"body_size\":5,\"env\":{\"country\":\"US\"}}}")) {
    const char *j = render(VD_JSON_TRACE);
    CHECK_MSG(contains(j, "\"lets\":[\"ua\",\"is_api\"]"), "%s", j);
    CHECK(!contains(j, "never_read"));
  }
  /* When the first rule decides, no let is computed at all. */
  if (decide_ok(e,
                "{\"action\":\"gate\",\"candidates\":[\"route_eu\"],\"context\":{\"probe\":1}}")) {
    CHECK_STR(vd_decision_rule(D), "probe");
    CHECK_MSG(contains(render(VD_JSON_TRACE), "\"lets\":[]"), "%s", render(VD_JSON_TRACE));
  }
  vd_decision_set_trace(D, 0);
}

static void constants_and_request(vd_engine *e) {
  /* max_body (a constant) */
  if (decide_ok(e,
                "{\"action\":\"gate\",\"context\":{\"path\":\"/\",\"headers\":{\"user-agent\":"
                "\"curl\"},\"body_size\":1001,\"env\":{}}}"))
    CHECK_STR(vd_decision_rule(D), "body-too-big");
  if (decide_ok(e,
                "{\"action\":\"gate\",\"context\":{\"path\":\"/\",\"headers\":{\"user-agent\":"
                "\"curl\"},\"body_size\":1000,\"env\":{\"country\":\"US\"}}}"))
    CHECK_STR(vd_decision_source(D), "default");
  /* scanners (a constant list) */
  if (decide_ok(e,
                "{\"action\":\"gate\",\"context\":{\"path\":\"/\",\"headers\":{\"user-agent\":"
                "\"Nikto\"},\"body_size\":1,\"env\":{}}}"))
    CHECK_STR(vd_decision_rule(D), "scanners");
  /* request.key against a constant list */
  if (decide_ok(e, "{\"action\":\"gate\",\"key\":\"vip-2\",\"context\":{" PLAIN "}}"))
    CHECK_STR(vd_decision_rule(D), "vip");
  if (decide_ok(e, "{\"action\":\"gate\",\"key\":\"vip-3\",\"context\":{" PLAIN "}}"))
    CHECK_STR(vd_decision_source(D), "default");
  /* request.action and request.candidates: `probe` fires only at "gate" */
  if (decide_ok(e,
                "{\"action\":\"gate\",\"candidates\":[\"allow\",\"route_eu\"],\"context\":{"
                "\"probe\":true," PLAIN "}}"))
    CHECK_STR(vd_decision_rule(D), "probe");
  if (decide_ok(e,
                "{\"action\":\"http_request\",\"candidates\":[\"allow\",\"route_eu\"],"
                "\"context\":{\"probe\":true," PLAIN "}}"))
    CHECK_STR(vd_decision_source(D), "default");
}

/* Lets and constants win over context fields of the same name. */
static void shadowing(vd_engine *e) {
  if (decide_ok(e,
                "{\"action\":\"gate\",\"context\":{\"path\":\"/\",\"headers\":{\"user-agent\":"
                "\"curl\"},\"body_size\":500,\"max_body\":10,\"ua\":\"sqlmap\",\"env\":{"
                "\"country\":\"US\"}}}"))
    CHECK_STR(vd_decision_source(D), "default");
}

/* Names resolved through the engine's hash tables (names.c) and by scanning
 * the strategy (what `verdict test` does) give the same decisions. */
static void tables_and_scans_agree(void) {
  static const char *const reqs[] = {
      "{\"action\":\"gate\",\"context\":{\"path\":\"/\",\"headers\":{\"user-agent\":\"nikto\"},"
      "\"body_size\":1,\"env\":{}}}",
      "{\"action\":\"gate\",\"context\":{" PLAIN "}}",
      "{\"action\":\"gate\",\"context\":{\"path\":\"/\"}}",
      "{\"action\":\"gate\",\"key\":\"vip-1\",\"context\":{" PLAIN "}}",
      "{\"action\":\"gate\",\"context\":{\"path\":\"/api/x\",\"headers\":{\"user-agent\":"
      "\"curl\"},\"body_size\":5,\"env\":{\"country\":\"CN\"}}}",
      "{\"action\":\"gate\",\"context\":{\"path\":\"/\",\"headers\":{\"user-agent\":\"curl\"},"
      "\"body_size\":500,\"max_body\":10,\"ua\":\"sqlmap\",\"env\":{\"country\":\"US\"}}}",
  };
  policy_load_opts lo = {.store_dir = ""};
  policy_diags dg;
  memset(&dg, 0, sizeof dg);
  policy_bundle *b = NULL;
  CHECK(policy_bundle_load("tests/engine/bundles/gate", &lo, &b, &dg) == 0);
  policy_diags_free(&dg);
  if (!b) return;
  arena a;
  arena_init(&a, NULL, 0, 0);
  name_table *names = name_tables_build(&a, b);
  CHECK(names != NULL);
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  vd_decision *d1 = vd_decision_new(), *d2 = vd_decision_new();
  vd_decision_set_trace(d1, 1);
  vd_decision_set_trace(d2, 1);
  for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
    vd_error err;
    decide_request r1, r2;
    decision_reset(d1);
    decision_reset(d2);
    CHECK(request_parse_json(&d1->mem, reqs[i], strlen(reqs[i]), &lim, &r1, &err) == 0);
    CHECK(request_parse_json(&d2->mem, reqs[i], strlen(reqs[i]), &lim, &r2, &err) == 0);
    CHECK(decide_run(b, names, &r1, &lim, d1, &err) == 0);
    CHECK(decide_run(b, NULL, &r2, &lim, d2, &err) == 0);
    const char *j1, *j2;
    CHECK(vd_decision_render(d1, 0, &j1, NULL) == 0 && vd_decision_render(d2, 0, &j2, NULL) == 0);
    CHECK_MSG(strcmp(j1, j2) == 0, "%s\n vs %s", j1, j2);
    CHECK(d1->nlets == d2->nlets);
  }
  vd_decision_free(d1);
  vd_decision_free(d2);
  arena_free(&a);
  policy_bundle_free(b);
}

static void cost_limit_stops_evaluation(vd_engine *e) {
  /* items.all(i, items.all(j, ...)) over 2,000 items: 4 million steps. */
  size_t cap = 2000 * 6 + 100;
  char *req = malloc(cap);
  size_t o = (size_t)snprintf(req, cap, "{\"action\":\"cost\",\"context\":{\"items\":[");
  for (int i = 0; i < 2000; i++) o += (size_t)snprintf(req + o, cap - o, "%s%d", i ? "," : "", i);
  snprintf(req + o, cap - o, "]}}");
  if (decide_ok(e, req)) {
    CHECK_STR(vd_decision_action(D), "deny");
    CHECK_STR(vd_decision_source(D), "error");
    CHECK_MSG(contains(vd_decision_reason(D), "cost limit"), "%s", vd_decision_reason(D));
  }
  /* 20 items: 400 steps, well within the limit */
  if (decide_ok(e,
                "{\"action\":\"cost\",\"context\":{\"items\":[1,2,3,4,5,6,7,8,9,10,11,12,13,"
                "14,15,16,17,18,19,20]}}"))
    CHECK_STR(vd_decision_source(D), "rule");
  free(req);
}

static void json_shape(vd_engine *e) {
  if (!decide_ok(e,
                 "{\"action\":\"gate\",\"context\":{\"path\":\"/\",\"headers\":{\"user-agent\":"
                 "\"sqlmap\"},\"body_size\":1,\"env\":{}}}"))
    return;
  const char *j = render(0);
  const char *want =
      "{\"action\":\"block\",\"allowed\":false,\"review\":false,\"confidence\":1.0,\"source\":"
      "\"rule\",\"reason\":{\"rule\":\"scanners\",\"message\":\"known vulnerability scanner\"},"
      "\"strategy\":\"gate\",\"policy_version\":\"";
  CHECK_MSG(strncmp(j, want, strlen(want)) == 0, "%s", j);
  const char *v = j + strlen(want);
  int hex = 1;
  for (int i = 0; i < 64; i++) hex &= (v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f');
  CHECK_MSG(hex && strncmp(v + 64, "\",\"model_version\":null,\"latency_us\":", 36) == 0, "%s", j);
  CHECK(strstr(j, ",\"snapshot_id\":null}") != NULL); /* the engine of this test records nothing */
  CHECK(j[strlen(j) - 1] == '}');
  CHECK(!contains(j, "trace"));
  /* It is JSON, and the trace adds exactly one key. */
  arena a;
  arena_init(&a, NULL, 0, 0);
  value out;
  json_error je;
  CHECK(json_parse(&a, j, strlen(j), NULL, &out, &je) == 0 && out.kind == V_MAP && out.n == 11);
  j = render(VD_JSON_TRACE);
  CHECK(json_parse(&a, j, strlen(j), NULL, &out, &je) == 0 && out.kind == V_MAP && out.n == 12);
  const value *t = value_map_get(&out, "trace", 5);
  CHECK(t && t->kind == V_MAP);
  const value *ns = t ? value_map_get(t, "ns", 2) : NULL;
  CHECK(ns && value_map_get(ns, "parse", 5) && value_map_get(ns, "decide", 6) &&
        value_map_get(ns, "render", 6));
  arena_free(&a);
  /* The malloc'd copy is the same text. */
  char *copy = NULL;
  CHECK(vd_decision_json(D, 0, &copy) == 0);
  CHECK(copy && strncmp(copy, want, strlen(want)) == 0);
  vd_free(copy);
}

static void request_built_in_c(vd_engine *e) {
  vd_error err;
  const char *cands[] = {"route_eu", "allow"};
  vd_request r = {.action = "gate",
                  .candidates = cands,
                  .ncandidates = 2,
                  .context_json = "{" PLAIN "}",
                  .context_len = -1,
                  .key = "vip-1"};
  int rc = vd_decide(e, &r, D, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  CHECK_STR(vd_decision_rule(D), "vip");
  CHECK_STR(vd_decision_action(D), "allow");
  r.key = NULL;
  r.candidates = NULL;
  r.ncandidates = 0;
  CHECK(vd_decide(e, &r, D, &err) == 0);
  CHECK_STR(vd_decision_source(D), "default");
  r.context_json = NULL; /* empty context: the `ua` let fails */
  CHECK(vd_decide(e, &r, D, &err) == 0);
  CHECK_STR(vd_decision_source(D), "error");
}

static void versions(vd_engine *e) {
  char buf[65];
  const char *v = vd_engine_policy_version(e, buf);
  CHECK(v == buf && strlen(buf) == 64);
}

int main(void) {
  D = vd_decision_new();
  CHECK(D != NULL);
  vd_engine *gate = open_bundle("tests/engine/bundles/gate");
  vd_engine *modes = open_bundle("tests/engine/bundles/modes");
  vd_engine *cost = open_bundle("tests/engine/bundles/cost");
  if (gate && modes && cost) {
    rule_decides(gate);
    default_decides(gate);
    errors_take_on_error(gate);
    candidates_pass_rules_over(gate);
    no_candidate_modes(gate, modes);
    lets_once_and_lazily(gate);
    constants_and_request(gate);
    shadowing(gate);
    tables_and_scans_agree();
    cost_limit_stops_evaluation(cost);
    json_shape(gate);
    request_built_in_c(gate);
    versions(gate);
  }
  vd_engine_close(gate);
  vd_engine_close(modes);
  vd_engine_close(cost);
  vd_decision_free(D);
  TEST_END();
}
