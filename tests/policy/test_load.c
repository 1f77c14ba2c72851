/* test_load.c — good bundles load with every field as written.
 *
 * The folder tests/policy/fixtures/good holds the example from
 * docs/policy.md (verbatim but for a comment) and a strategy that uses every
 * other form (map defaults, decision points, block scalars, tests with map
 * expectations); beside them, files the loader must skip (`_draft.yaml` is
 * not even YAML, `.hidden.yaml`, `notes.txt`, a sub-folder). Also: the
 * design's text loads unchanged with only the model warning, and the
 * compiled programs evaluate. */
#include <math.h>
#include <string.h>

#include "core/json.h"
#include "expr/expr.h"
#include "helpers.h"

static const strategy *find(const policy_bundle *b, const char *name) {
  for (uint32_t i = 0; i < b->nstrategies; i++)
    if (!strcmp(b->strategies[i].name, name)) return &b->strategies[i];
  return NULL;
}

static const char *action_name(const strategy *s, int32_t i) {
  return i >= 0 && (uint32_t)i < s->nactions ? s->actions[i].name : "(none)";
}

typedef struct env {
  const strategy *s;
  value ctx;
  arena *a;
} env;

static int lookup(void *user, const char *name, size_t len, value *out) {
  env *e = user;
  const value *k = value_map_get(&e->s->constants, name, len);
  if (k) {
    *out = *k;
    return 0;
  }
  for (uint32_t i = 0; i < e->s->nlets; i++)
    if (e->s->lets[i].name_len == len && !memcmp(e->s->lets[i].name, name, len)) {
      expr_activation act = {lookup, e};
      eval_ctx ec = {0};
      ec.arena = e->a;
      *out = expr_eval(e->s->lets[i].prog, &act, &ec);
      return 0;
    }
  const value *f = value_map_get(&e->ctx, name, len);
  if (!f) return -1;
  *out = *f;
  return 0;
}

/* Evaluates rule i of s against a JSON context: 1 true, 0 false, -1 error. */
static int eval_rule(const strategy *s, uint32_t i, const char *json) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  env e = {s, value_null(), &a};
  json_error je;
  int r = -1;
  if (json_parse(&a, json, strlen(json), NULL, &e.ctx, &je) == 0) {
    expr_activation act = {lookup, &e};
    eval_ctx ec = {0};
    ec.arena = &a;
    value v = expr_eval(s->rules[i].cond, &act, &ec);
    r = v.kind == V_BOOL ? v.b : -1;
  }
  arena_free(&a);
  return r;
}

static void test_good_bundle(void) {
  policy_diags d = {0};
  policy_bundle *b = NULL;
  policy_load_opts opts = {.store_dir = ""};
  int rc = policy_bundle_load("tests/policy/fixtures/good", &opts, &b, &d);
  CHECK(rc == 0);
  if (rc) {
    dump_diags(&d);
    policy_diags_free(&d);
    return;
  }
  /* the docs example, with its model (models/ links to the example bundle's) */
  CHECK(d.errors == 0);
  CHECK(d.warnings == 0);
  CHECK(b->nmodels == 1 && b->models[0].gbdt && b->models[0].features);
  CHECK(b->nstrategies == 2);
  CHECK(strlen(b->version) == 64);
  CHECK_STR(b->dir, "tests/policy/fixtures/good");

  const strategy *g = find(b, "request_gate");
  CHECK(g != NULL);
  if (g) {
    CHECK_STR(g->file, "tests/policy/fixtures/good/request_gate.yaml");
    CHECK_STR(g->description, "API abuse at the edge");
    CHECK(g->ndecision_points == 1);
    CHECK_STR(g->decision_points[0], "http_request");
    CHECK(g->nactions == 3);
    CHECK_STR(action_name(g, 0), "allow");
    CHECK(g->actions[0].allowed && !g->actions[0].review);
    CHECK_STR(action_name(g, 1), "block");
    CHECK(!g->actions[1].allowed && !g->actions[1].review);
    CHECK_STR(action_name(g, 2), "ask_mfa");
    CHECK(!g->actions[2].allowed && g->actions[2].review);
    CHECK(g->constants.kind == V_MAP && g->constants.n == 3);
    const value *sc = value_map_get(&g->constants, "scanners", 8);
    CHECK(sc && sc->kind == V_LIST && sc->n == 4);
    if (sc && sc->n == 4)
      CHECK(sc->items[3].kind == V_STRING && !memcmp(sc->items[3].s, "zgrab", 5));
    const value *mb = value_map_get(&g->constants, "max_body", 8);
    CHECK(mb && mb->kind == V_INT && mb->i == 1048576);
    CHECK(g->nlets == 2);
    CHECK_STR(g->lets[0].name, "ua");
    CHECK(g->lets[0].name_len == 2 && g->lets[0].prog != NULL);
    CHECK_STR(g->lets[1].name, "is_api");
    CHECK(g->nrules == 3);
    CHECK_STR(g->rules[0].name, "scanners");
    CHECK_STR(g->rules[0].reason, "known vulnerability scanner");
    CHECK_STR(g->rules[0].source, "ua.contains(\"sqlmap\") || ua in scanners");
    CHECK(g->rules[0].action == 1);
    CHECK(g->rules[0].line == 22 && g->rules[0].column == 9);
    CHECK(!g->rules[0].reads_model);
    CHECK_STR(g->rules[1].name, "geofence-api");
    CHECK(g->rules[1].reason == NULL);
    CHECK(g->rules[1].action == 0);
    CHECK_STR(g->rules[2].name, "rule-3");
    CHECK(g->rules[2].reads_model);
    CHECK(g->rules[2].action == 2);
    CHECK(g->default_outcome.action == 0 && g->default_outcome.reason == NULL);
    CHECK(g->on_error.action == 1);
    CHECK(g->nc_mode == NC_FIRST);
    CHECK_STR(g->fallback_model, "clef-default-v3");
    CHECK(g->fallback_timeout_ms == 15);
    CHECK(g->ntests == 1);
    CHECK_STR(g->tests[0].name, "scanner is blocked");
    CHECK_STR(g->tests[0].expect_action, "block");
    CHECK(g->tests[0].expect_allowed == -1);
    CHECK(g->tests[0].expect_source == NULL && g->tests[0].expect_rule == NULL);
    CHECK(g->tests[0].candidates.kind == V_LIST && g->tests[0].candidates.n == 0);
    CHECK(g->tests[0].key.kind == V_STRING && g->tests[0].key.n == 0);
    const value *hd = value_map_get(&g->tests[0].context, "headers", 7);
    const value *uag = hd ? value_map_get(hd, "user-agent", 10) : NULL;
    CHECK(uag && uag->kind == V_STRING && uag->n == 10 && !memcmp(uag->s, "sqlmap/1.7", 10));
    CHECK(g->tests[0].line == 41);
    CHECK(g->index == NULL); /* three rules: no field is worth a lookup */
    CHECK(strlen(g->version) == 64);
    CHECK(policy_bundle_find(b, "http_request", 12) == g);
    CHECK(policy_bundle_find(b, "request_gate", 12) == NULL); /* points replace the name */
    CHECK(strategy_action(g, "ask_mfa", 7) == 2);
    CHECK(strategy_action(g, "ask", 3) == -1);
    /* the compiled programs run, with lets and constants through lookup */
    CHECK(eval_rule(g, 0, "{\"headers\": {\"user-agent\": \"NIKTO\"}}") == 1);
    CHECK(eval_rule(g, 0, "{\"headers\": {\"user-agent\": \"curl\"}}") == 0);
    CHECK(eval_rule(g, 1, "{\"env\": {\"country\": \"CN\"}, \"path\": \"/api/x\"}") == 1);
    CHECK(eval_rule(g, 1, "{\"env\": {\"country\": \"CN\"}}") == -1); /* no path */
  }

  const strategy *p = find(b, "payment_fraud");
  CHECK(p != NULL);
  if (p) {
    CHECK(p->description == NULL);
    CHECK(p->ndecision_points == 2);
    CHECK(policy_bundle_find(b, "refund", 6) == p);
    CHECK(policy_bundle_find(b, "payment", 7) == p);
    CHECK(policy_bundle_find(b, "pay", 3) == NULL);
    CHECK(p->nactions == 4);
    CHECK_STR(action_name(p, 0), "approve");
    CHECK(p->actions[0].allowed);
    CHECK_STR(action_name(p, 1), "hold");
    CHECK(!p->actions[1].allowed && p->actions[1].review);
    CHECK_STR(p->actions[1].description, "a person looks at it");
    CHECK_STR(action_name(p, 2), "decline");
    CHECK(!p->actions[2].allowed && !p->actions[2].review);
    CHECK_STR(action_name(p, 3), "note_only"); /* `note_only:` alone: default meaning */
    CHECK(p->actions[3].allowed && !p->actions[3].review);
    const value *v;
    CHECK((v = value_map_get(&p->constants, "rate", 4)) && v->kind == V_DOUBLE && v->d == 0.25);
    CHECK((v = value_map_get(&p->constants, "flag", 4)) && v->kind == V_BOOL && v->b);
    CHECK((v = value_map_get(&p->constants, "nothing", 7)) && v->kind == V_NULL);
    CHECK((v = value_map_get(&p->constants, "quoted", 6)) && v->kind == V_STRING && v->n == 4);
    CHECK((v = value_map_get(&p->constants, "high_risk", 9)) && v->kind == V_MAP && v->n == 2);
    CHECK(p->nrules == 3);
    CHECK_STR(p->rules[1].source, "country in high_risk &&\nbig\n");
    CHECK(p->rules[1].line == 25 && p->rules[1].column == 7); /* a block scalar's first character */
    CHECK_STR(p->rules[2].source, "amount < 0");
    CHECK(p->default_outcome.action == 0);
    CHECK_STR(p->default_outcome.reason, "nothing suspicious");
    CHECK(p->on_error.action == 1);
    CHECK_STR(p->on_error.reason, "could not evaluate");
    CHECK(p->nc_mode == NC_ACTION && p->nc_action == 1);
    CHECK(p->fallback_model == NULL);
    CHECK(p->ntests == 2);
    CHECK_STR(p->tests[1].name, "test-2");
    CHECK(p->tests[1].candidates.n == 2);
    CHECK(p->tests[1].key.n == 7 && !memcmp(p->tests[1].key.s, "user-42", 7));
    CHECK_STR(p->tests[1].expect_action, "hold");
    CHECK(p->tests[1].expect_allowed == 0);
    CHECK_STR(p->tests[1].expect_source, "rule");
    CHECK_STR(p->tests[1].expect_rule, "risky country");
    CHECK(eval_rule(p, 0, "{\"amount\": 20000}") == 1);
    CHECK(eval_rule(p, 0, "{\"amount\": 2000}") == 0);
    CHECK(eval_rule(p, 1, "{\"amount\": 2000, \"country\": \"RU\"}") == 1);
  }
  policy_bundle_free(b);
  policy_diags_free(&d);
}

/* The strategy text from verdict's design loads unchanged: no error, and
 * the only warning is the plain one about the model. */
static void test_design_text(void) {
  const char *text =
      "strategy: request_gate\n"
      "rules:\n"
      "  - if: env.country == \"CN\" && path.startsWith(\"/api/v1\")\n"
      "    action: allow\n"
      "  - if: confidence(model.score) < 0.6\n"
      "    action: ask_mfa\n"
      "fallback:\n"
      "  model: clef-default-v3\n"
      "  timeout_ms: 15\n";
  policy_diags d;
  policy_bundle *b = load_text(text, &d);
  CHECK(b != NULL);
  CHECK(d.errors == 0);
  CHECK(d.warnings == 0);
  if (b) {
    const strategy *s = &b->strategies[0];
    CHECK_STR(s->name, "request_gate");
    CHECK(s->ndecision_points == 1);
    CHECK_STR(s->decision_points[0], "request_gate");
    CHECK(s->default_outcome.action == -1); /* no default: the fallback decides */
    /* allow and ask_mfa from the rules; block from the fallback's default
     * threshold (a score of 0.5 or more blocks) */
    CHECK(s->nactions == 3);
    CHECK(s->nthresholds == 1 && s->thresholds[0].min_score == 0.5);
    CHECK(s->nthresholds == 1 && s->thresholds[0].outcome.action == 2);
    CHECK(s->below.action == 0 && s->on_timeout.action == -1);
    CHECK(s->on_error.action == 1); /* the first not-allowed action */
    CHECK(!s->rules[0].reads_model && s->rules[1].reads_model);
    CHECK_STR(s->fallback_model, "clef-default-v3");
    CHECK(s->fallback_timeout_ms == 15);
    uint32_t indexed, paths;
    rule_index_stats(s->index, &indexed, &paths);
    CHECK(indexed == 0 && paths == 0 && s->index == NULL); /* too few rules by default */
  }
  policy_bundle_free(b);
  policy_diags_free(&d);
  /* asked to index every field: the first rule is filed under env.country */
  b = load_text_min(text, 1, &d);
  CHECK(b != NULL);
  if (b) {
    uint32_t indexed, paths;
    rule_index_stats(b->strategies[0].index, &indexed, &paths);
    CHECK(indexed == 1 && paths == 1);
  }
  policy_bundle_free(b);
  policy_diags_free(&d);
}

/* A let that reads model makes the rules reading that let read model. */
static void test_model_through_let(void) {
  const char *text =
      "strategy: s\n"
      "fallback: {model: m}\n"
      "let:\n"
      "  risky: score > 0.5\n"
      "  score: model.score\n"
      "rules:\n"
      "  - if: risky\n"
      "    action: block\n"
      "  - if: x == 1\n"
      "    action: block\n";
  policy_diags d;
  policy_bundle *b = load_text(text, &d);
  CHECK(b != NULL);
  if (b) {
    CHECK(b->strategies[0].rules[0].reads_model);
    CHECK(!b->strategies[0].rules[1].reads_model);
  }
  CHECK(d.errors == 0 && d.warnings == 0);
  policy_bundle_free(b);
  policy_diags_free(&d);
}

/* YAML 1.2 core schema: what plain scalars become. */
static void test_scalar_types(void) {
  const char *text =
      "strategy: s\n"
      "default: allow\n"
      "constants:\n"
      "  a: [1, -2, 0o17, 0x1F, +3, 18446744073709551615]\n"
      "  b: [1.5, -.5, 1e3, .inf, -.Inf, .nan]\n"
      "  c: [true, False, TRUE, null, ~, Null]\n"
      "  d: [yes, no, on, off, 'true', \"1\", 0b1, 1_000, 0o8, '']\n"
      "  e: [!!str 12, !!float 3, !!int '7', !!bool 'true', !!null '']\n"
      "  f: &anchor {k: [1, 2]}\n"
      "  g: *anchor\n"
      "  h:\n";
  policy_diags d;
  policy_bundle *b = load_text(text, &d);
  CHECK(b != NULL);
  if (!b) {
    dump_diags(&d);
    policy_diags_free(&d);
    return;
  }
  const value *k = &b->strategies[0].constants;
  const value *a = value_map_get(k, "a", 1), *bb = value_map_get(k, "b", 1);
  const value *c = value_map_get(k, "c", 1), *dd = value_map_get(k, "d", 1);
  const value *e = value_map_get(k, "e", 1), *f = value_map_get(k, "f", 1);
  const value *g = value_map_get(k, "g", 1), *h = value_map_get(k, "h", 1);
  CHECK(a && a->n == 6 && bb && bb->n == 6 && c && c->n == 6 && dd && dd->n == 10 && e &&
        e->n == 5 && f && g && h);
  if (!(a && bb && c && dd && e && f && g && h)) return;
  CHECK(a->items[0].kind == V_INT && a->items[0].i == 1);
  CHECK(a->items[1].kind == V_INT && a->items[1].i == -2);
  CHECK(a->items[2].kind == V_INT && a->items[2].i == 15);
  CHECK(a->items[3].kind == V_INT && a->items[3].i == 31);
  CHECK(a->items[4].kind == V_INT && a->items[4].i == 3);
  CHECK(a->items[5].kind == V_UINT && a->items[5].u == UINT64_MAX);
  CHECK(bb->items[0].kind == V_DOUBLE && bb->items[0].d == 1.5);
  CHECK(bb->items[1].kind == V_DOUBLE && bb->items[1].d == -0.5);
  CHECK(bb->items[2].kind == V_DOUBLE && bb->items[2].d == 1000);
  CHECK(bb->items[3].kind == V_DOUBLE && isinf(bb->items[3].d) && bb->items[3].d > 0);
  CHECK(bb->items[4].kind == V_DOUBLE && isinf(bb->items[4].d) && bb->items[4].d < 0);
  CHECK(bb->items[5].kind == V_DOUBLE && isnan(bb->items[5].d));
  CHECK(c->items[0].kind == V_BOOL && c->items[0].b);
  CHECK(c->items[1].kind == V_BOOL && !c->items[1].b);
  CHECK(c->items[2].kind == V_BOOL && c->items[2].b);
  for (int i = 3; i < 6; i++) CHECK(c->items[i].kind == V_NULL);
  /* YAML 1.1's yes/no/on/off, binary and underscores are strings in 1.2 */
  for (int i = 0; i < 10; i++) CHECK(dd->items[i].kind == V_STRING);
  CHECK(e->items[0].kind == V_STRING && e->items[0].n == 2);
  CHECK(e->items[1].kind == V_DOUBLE && e->items[1].d == 3);
  CHECK(e->items[2].kind == V_INT && e->items[2].i == 7);
  CHECK(e->items[3].kind == V_BOOL && e->items[3].b);
  CHECK(e->items[4].kind == V_NULL);
  CHECK(value_equal(f, g)); /* an alias is the anchored value */
  CHECK(h->kind == V_NULL);
  policy_bundle_free(b);
  policy_diags_free(&d);
}

/* Only the context: no constants, no lets. */
static int context_only(void *user, const char *name, size_t len, value *out) {
  const value *f = value_map_get(user, name, len);
  if (!f) return -1;
  *out = *f;
  return 0;
}

static int eval_context_only(const strategy *s, uint32_t i, const char *json) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  value ctx;
  json_error je;
  int r = -2;
  if (json_parse(&a, json, strlen(json), NULL, &ctx, &je) == 0) {
    expr_activation act = {context_only, &ctx};
    eval_ctx ec = {0};
    ec.arena = &a;
    value v = expr_eval(s->rules[i].cond, &act, &ec);
    r = v.kind == V_BOOL ? v.b : -1;
  }
  arena_free(&a);
  return r;
}

/* Constants are compiled into the programs: a rule reading them evaluates
 * with an activation that knows only the context, and every kind of value
 * survives the trip (quotes, backslashes, control characters, UTF-8, uint,
 * doubles that look like integers, null, nested maps). A comprehension
 * variable or a field named like a constant is left alone. */
static void test_constants_compiled_in(void) {
  const char *text =
      "strategy: s\n"
      "default: allow\n"
      "constants:\n"
      "  scanners: [sqlmap, nikto]\n"
      "  limit: -5\n"
      "  big: 18446744073709551615\n"
      "  one: 1.0\n"
      "  odd: \"a\\\"b\\\\c\\n\\u00e9\"\n"
      "  nothing: null\n"
      "  m: {k: [1, {z: true}]}\n"
      "  nan: .nan\n"
      "rules:\n"
      "  - if: agent in scanners && n > limit && type(one) == double && one == 1\n"
      "    action: block\n"
      "  - if: s == odd && nothing == null && m.k[1].z && big == 18446744073709551615u\n"
      "    action: block\n"
      "  - if: '[1, 2].exists(limit, limit == 2) && x.limit == 3 && has(m.k) && .limit == -5'\n"
      "    action: block\n"
      "  - if: nan != nan\n"
      "    action: block\n";
  policy_diags d;
  policy_bundle *b = load_text(text, &d);
  CHECK(b != NULL);
  if (!b) {
    dump_diags(&d);
    policy_diags_free(&d);
    return;
  }
  const strategy *s = &b->strategies[0];
  CHECK(eval_context_only(s, 0, "{\"agent\": \"nikto\", \"n\": 0}") == 1);
  CHECK(eval_context_only(s, 0, "{\"agent\": \"curl\", \"n\": 0}") == 0);
  CHECK(eval_context_only(s, 0, "{\"agent\": \"nikto\", \"n\": -6}") == 0);
  CHECK(eval_context_only(s, 1, "{\"s\": \"a\\\"b\\\\c\\n\u00e9\"}") == 1);
  CHECK(eval_context_only(s, 1, "{\"s\": \"ab\"}") == 0);
  CHECK(eval_context_only(s, 2, "{\"x\": {\"limit\": 3}}") == 1);
  /* NaN has no literal: that constant is still read through the activation */
  CHECK(eval_context_only(s, 3, "{}") == -1);
  CHECK(eval_rule(s, 3, "{}") == 1);
  policy_bundle_free(b);
  policy_diags_free(&d);
}

int main(void) {
  TEST_RUN(test_constants_compiled_in);
  TEST_RUN(test_good_bundle);
  TEST_RUN(test_design_text);
  TEST_RUN(test_model_through_let);
  TEST_RUN(test_scalar_types);
  TEST_END();
}
