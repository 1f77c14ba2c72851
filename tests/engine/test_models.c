/* test_models.c — the fallback model inside decisions: rules first, the
 * model for what they leave, its score mapped by thresholds; `model` read
 * lazily by a rule; a missed deadline answered by on_timeout (and replayed
 * as recorded); the model's version and features in the answer and the
 * snapshot; the engine's model counters; and the policy errors a model can
 * cause. Bundle: tests/engine/bundles/risk (its model is remade by
 * tests/engine/make-risk-model). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "policy/policy.h"
#include "test.h"
#include "verdict.h"

#define RISK "tests/engine/bundles/risk"

static vd_decision *D;

static int contains(const char *hay, const char *needle) { return hay && strstr(hay, needle); }

static int decide_ok(vd_engine *e, const char *json) {
  vd_error err;
  int rc = vd_decide_json(e, json, -1, D, &err);
  CHECK_MSG(rc == 0, "%s -> %d %s", json, rc, err.message);
  return rc == 0;
}

static const char *answer(void) {
  const char *s = NULL;
  size_t n = 0;
  CHECK(vd_decision_render(D, 0, &s, &n) == 0);
  return s ? s : "";
}

static void pay(char *buf, size_t cap, double amount, const char *risk, const char *vip) {
  snprintf(buf, cap, "{\"action\":\"payment\",\"context\":{\"amount\":%g%s%s%s%s%s%s}}", amount,
           risk ? ",\"signals\":{\"risk\":" : "", risk ? risk : "", risk ? "}" : "",
           vip ? ",\"customer\":{\"vip\":" : "", vip ? vip : "", vip ? "}" : "");
}

static void rules_first_then_the_model(vd_engine *e) {
  char req[256];
  /* a rule settles it before anything reads `model`: the model never runs */
  pay(req, sizeof req, 2, "0.99", "false");
  if (decide_ok(e, req)) {
    CHECK_STR(vd_decision_action(D), "approve");
    CHECK_STR(vd_decision_source(D), "rule");
    CHECK_MSG(contains(answer(), "\"model_version\":null"), "%s", answer());
    CHECK(vd_decision_model_version(D) == NULL);
    CHECK(vd_decision_model_score(D) != vd_decision_model_score(D)); /* NaN */
  }
  /* no rule: the model scores it, the first threshold reached decides */
  pay(req, sizeof req, 50, "0.95", "false");
  if (decide_ok(e, req)) {
    CHECK_STR(vd_decision_action(D), "decline");
    CHECK_STR(vd_decision_source(D), "model");
    CHECK(vd_decision_rule(D) == NULL);
    CHECK_MSG(contains(vd_decision_reason(D), "the risk model is sure (model 'risk' scored 0.9"),
              "%s", vd_decision_reason(D));
    CHECK(vd_decision_confidence(D) > 0.9 && vd_decision_confidence(D) <= 1.0);
    CHECK(D->model_score > 0.9 && D->model_score < 1.0);
    CHECK_MSG(contains(answer(), "\"model_version\":\"3c27069e"), "%s", answer());
    CHECK(vd_decision_model_version(D) && !strncmp(vd_decision_model_version(D), "3c27069e", 8));
    CHECK(vd_decision_model_score(D) == D->model_score);
  }
  /* under every threshold: `below` */
  pay(req, sizeof req, 50, "0.05", "false");
  if (decide_ok(e, req)) {
    CHECK_STR(vd_decision_action(D), "approve");
    CHECK_STR(vd_decision_source(D), "model");
    CHECK_MSG(contains(vd_decision_reason(D), "below every threshold"), "%s",
              vd_decision_reason(D));
    CHECK(D->model_score < 0.1);
    CHECK(vd_decision_confidence(D) > 0.9); /* sure it is safe: max(p, 1 - p) */
  }
  /* the second feature matters: a vip is safe whatever the risk */
  pay(req, sizeof req, 50, "0.95", "true");
  if (decide_ok(e, req)) CHECK_STR(vd_decision_action(D), "approve");
}

static void a_rule_reads_the_model(vd_engine *e) {
  char req[256];
  /* amount > 1000: the rule reads model.confidence; the model is sure, so the
   * rule is false, and the same scoring decides (it ran once) */
  pay(req, sizeof req, 5000, "0.95", "false");
  if (decide_ok(e, req)) {
    CHECK_STR(vd_decision_action(D), "decline");
    CHECK_STR(vd_decision_source(D), "model");
    CHECK(D->model_run == MODEL_SCORED);
  }
}

static void missing_features_are_missing(vd_engine *e) {
  char req[256];
  /* no signals and no customer: risk is NaN (the trees' default branch),
   * vip its declared default 0; the model still answers */
  pay(req, sizeof req, 50, NULL, NULL);
  if (decide_ok(e, req)) {
    CHECK_STR(vd_decision_source(D), "model");
    CHECK(D->nfeatures == 2);
    if (D->nfeatures == 2) {
      CHECK(D->features[0] != D->features[0]); /* NaN */
      CHECK(D->features[1] == 0.0f);
      CHECK_STR(D->feature_names[0], "risk");
      CHECK_STR(D->feature_names[1], "vip");
    }
  }
}

static void counters(vd_engine *e) {
  vd_engine_counters c0, c1;
  CHECK(vd_engine_stats(e, &c0) == 0);
  char req[256];
  pay(req, sizeof req, 2, "0.5", NULL); /* a rule: no model */
  decide_ok(e, req);
  pay(req, sizeof req, 50, "0.5", NULL);
  decide_ok(e, req);
  CHECK(vd_engine_stats(e, &c1) == 0);
  CHECK(c1.model_calls == c0.model_calls + 1);
  CHECK(c1.model_deadline_misses == c0.model_deadline_misses);
}

/* The deadline outcome as replay feeds it back: missed → on_timeout. */
static void deadline_takes_on_timeout(void) {
  policy_bundle *b = NULL;
  policy_diags dg;
  memset(&dg, 0, sizeof dg);
  policy_load_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  CHECK(policy_bundle_load(RISK, &o, &b, &dg) == 0);
  policy_diags_free(&dg);
  if (!b) return;
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  vd_decision *d = vd_decision_new();
  vd_error err;
  char req[256];
  pay(req, sizeof req, 50, "0.95", "false");
  CHECK(engine_decide_json_replay(b, NULL, &lim, req, strlen(req), 0, 1, d, &err) == 0);
  CHECK_STR(vd_decision_action(d), "review");
  CHECK_STR(vd_decision_source(d), "model");
  CHECK(vd_decision_confidence(d) == 0.0);
  CHECK_MSG(contains(vd_decision_reason(d),
                     "no time to ask the model (model 'risk' missed its "
                     "50 ms deadline; fallback.on_timeout)"),
            "%s", vd_decision_reason(d));
  CHECK(d->model_run == MODEL_DEADLINE);
  /* met: the model decides as live */
  CHECK(engine_decide_json_replay(b, NULL, &lim, req, strlen(req), 0, 0, d, &err) == 0);
  CHECK_STR(vd_decision_action(d), "decline");
  /* a rule reading the model when the deadline passed: on_timeout too, and the
   * rule is named */
  pay(req, sizeof req, 5000, "0.95", "false");
  CHECK(engine_decide_json_replay(b, NULL, &lim, req, strlen(req), 0, 1, d, &err) == 0);
  CHECK_STR(vd_decision_action(d), "review");
  CHECK_STR(vd_decision_rule(d), "big-and-unsure");
  vd_decision_free(d);
  policy_bundle_free(b);
}

/* The design's request_gate text, unchanged, with the example abuse model
 * (tests/engine/bundles/model/models links to examples/policies/models). */
static void the_design_text_runs(void) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_engine *e = NULL;
  vd_error err;
  CHECK_MSG(vd_engine_open("tests/engine/bundles/model", &o, &e, &err) == 0, "%s", err.message);
  if (!e) return;
  if (decide_ok(e,
                "{\"action\":\"request_gate\",\"context\":{\"env\":{\"country\":\"CN\"},"
                "\"path\":\"/api/v1/users\"}}")) {
    CHECK_STR(vd_decision_action(D), "allow");
    CHECK_STR(vd_decision_rule(D), "rule-1");
    CHECK(D->model_run == MODEL_NOT_RUN);
  }
  /* rule 2 reads confidence(model.score): the model runs, whatever it says */
  if (decide_ok(e,
                "{\"action\":\"request_gate\",\"context\":{\"env\":{\"country\":\"US\"},"
                "\"path\":\"/api/v1/users\",\"method\":\"GET\",\"headers\":{\"user-agent\":"
                "\"Mozilla/5.0\"},\"client_ip\":\"81.2.69.160\"}}")) {
    CHECK(D->model_run == MODEL_SCORED);
    CHECK(strcmp(vd_decision_source(D), "error") != 0);
    const char *a = vd_decision_action(D);
    CHECK(a && (!strcmp(a, "allow") || !strcmp(a, "ask_mfa") || !strcmp(a, "block")));
    CHECK(strlen(D->model_version) == 64);
  }
  vd_engine_close(e);
}

/* ---- what a bundle with a model must get right ---- */

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = malloc(1 << 20);
  size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
  fclose(f);
  if (buf) buf[n] = '\0';
  return buf;
}

/* Loads one strategy from text with the models folder models_dir. */
static int load_in(const char *models_dir, const char *yaml, policy_diags *dg) {
  policy_bundle *b = NULL;
  policy_load_opts o;
  memset(&o, 0, sizeof o);
  o.models_dir = models_dir;
  memset(dg, 0, sizeof *dg);
  int rc = policy_bundle_from_text_opts("t.yaml", yaml, strlen(yaml), &o, &b, dg);
  policy_bundle_free(b);
  return rc;
}

/* ... with the risk bundle's models folder. */
static int load(const char *yaml, policy_diags *dg) { return load_in(RISK "/models", yaml, dg); }

static int has(const policy_diags *dg, const char *text) {
  for (size_t i = 0; i < dg->n; i++)
    if (strstr(dg->items[i].message, text)) return 1;
  return 0;
}

#define HEAD "strategy: s\nrules:\n  - {if: 'x == 1', action: allow}\n"

static void policy_errors(void) {
  policy_diags dg;
  CHECK(load(HEAD "fallback: {model: nope}\n", &dg) != 0);
  CHECK_MSG(has(&dg, "model 'nope': cannot read the model " RISK "/models/nope.json"), "%s",
            dg.n ? dg.items[0].message : "(none)");
  policy_diags_free(&dg);

  CHECK(load(HEAD "fallback: {model: risk, classes: [allow, block]}\n", &dg) != 0);
  CHECK(has(&dg, "model 'risk' is not multiclass (binary:logistic)"));
  policy_diags_free(&dg);

  CHECK(load(HEAD "fallback: {model: risk, thresholds: [{min_score: 0.5, action: a}, "
                  "{min_score: 0.7, action: b}]}\n",
             &dg) != 0);
  CHECK(has(&dg, "list them from the highest min_score down (0.7 is not below 0.5)"));
  policy_diags_free(&dg);

  CHECK(load("strategy: s\nrules:\n  - {if: 'model.score > 0.5', action: block}\ndefault: allow\n",
             &dg) != 0);
  CHECK(has(&dg, "rule 'rule-1' reads model, but the strategy has no fallback model"));
  policy_diags_free(&dg);

  CHECK(load(HEAD "fallback: {model: risk, features: ../risk.features.yaml}\n", &dg) != 0);
  CHECK(has(&dg, "name a file in the bundle's models folder, without a path"));
  policy_diags_free(&dg);

  /* the defaults: no thresholds → block at 0.5, allow below */
  CHECK(load(HEAD "fallback: {model: risk}\n", &dg) == 0);
  policy_diags_free(&dg);

  /* the whole strategy file loads from text with the models folder */
  char *text = slurp(RISK "/payment_risk.yaml");
  CHECK(text != NULL);
  if (text) {
    CHECK(load(text, &dg) == 0);
    policy_diags_free(&dg);
    free(text);
  }
}

/* A feature reading a limit the strategy does not have is an error at load,
 * placed in the features file, as it is in a rule. The models folder is a
 * scratch copy of the risk bundle's model with features files of its own. */
static void features_read_limits(void) {
  char dir[] = "/tmp/verdict-test-models-XXXXXX";
  if (!mkdtemp(dir)) {
    CHECK_MSG(0, "mkdtemp failed");
    return;
  }
  char path[256], *model = slurp(RISK "/models/risk.json");
  CHECK(model != NULL);
  snprintf(path, sizeof path, "%s/risk.json", dir);
  FILE *f = fopen(path, "wb");
  if (f && model) fputs(model, f);
  if (f) fclose(f);
  free(model);
  static const char *const specs[2] = {
      "features:\n  - name: risk\n    type: number\n    expr: limits.per_min.count + "
      "limits.per_hour.count\n  - name: vip\n    type: bool\n    expr: customer.vip\n",
      "features:\n  - name: risk\n    type: number\n    expr: limits.per_min.count\n"
      "  - name: vip\n    type: bool\n    expr: customer.vip\n"};
  for (int k = 0; k < 2; k++) {
    snprintf(path, sizeof path, "%s/f%d.features.yaml", dir, k);
    if ((f = fopen(path, "wb"))) {
      fputs(specs[k], f);
      fclose(f);
    }
  }
  policy_diags dg;
#define LIMIT "limits:\n  per_min: {key: ip, window: 1m, budget: 9, action: block}\n"
  /* f0 reads per_hour, which this strategy does not have */
  CHECK(load_in(dir, HEAD LIMIT "fallback: {model: risk, features: f0.features.yaml}\n", &dg) != 0);
  CHECK_MSG(has(&dg,
                "no limit named 'per_hour' (this strategy's limits: per_min); the model "
                "'risk' serves strategy 's'"),
            "%s", dg.n ? dg.items[0].message : "(none)");
  snprintf(path, sizeof path, "%s/f0.features.yaml", dir);
  CHECK(dg.n == 1 && !strcmp(dg.items[0].file, path));
  CHECK(dg.n == 1 && dg.items[0].line == 4 && dg.items[0].column == 34);
  /* with the line and a caret under the limit's name, as a rule's error */
  CHECK_MSG(dg.n == 1 && strstr(dg.items[0].message,
                                "\n |     expr: limits.per_min.count + limits.per_hour.count\n | "
                                "                                 ^"),
            "%s", dg.n ? dg.items[0].message : "(none)");
  policy_diags_free(&dg);
  /* f1 reads only per_min: it loads */
  CHECK(load_in(dir, HEAD LIMIT "fallback: {model: risk, features: f1.features.yaml}\n", &dg) == 0);
  policy_diags_free(&dg);
  /* a let named `limits` is what `limits` reads: nothing to check */
  CHECK(load_in(dir,
                HEAD "let:\n  limits: '{\"per_hour\": {\"count\": 1}}'\n" LIMIT
                     "fallback: {model: risk, features: f0.features.yaml}\n",
                &dg) == 0);
  policy_diags_free(&dg);
#undef LIMIT
  for (int k = 0; k < 2; k++) {
    snprintf(path, sizeof path, "%s/f%d.features.yaml", dir, k);
    remove(path);
  }
  snprintf(path, sizeof path, "%s/risk.json", dir);
  remove(path);
  rmdir(dir);
}

int main(void) {
  D = vd_decision_new();
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_engine *e = NULL;
  vd_error err;
  int rc = vd_engine_open(RISK, &o, &e, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  if (e) {
    rules_first_then_the_model(e);
    a_rule_reads_the_model(e);
    missing_features_are_missing(e);
    counters(e);
  }
  deadline_takes_on_timeout();
  the_design_text_runs();
  policy_errors();
  features_read_limits();
  vd_engine_close(e);
  vd_decision_free(D);
  TEST_END();
}
