/* strategy_parts.c — the parts of a strategy file that stand on their own:
 * its actions (declared or named where used) and outcomes (default,
 * on_error), its decision points and routing, the fallback model with its
 * thresholds and classes, and its tests. strategy.c compiles the file as a
 * whole and calls these; the readers they share are strategy_cc.h's.
 *
 * Not here: constants, lets, rules and limits (strategy.c), constants
 * inlined into expressions (strategy_inline.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/internal.h"
#include "policy/strategy_cc.h"

/* ---- actions ---- */

static int has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* The default meaning of an action name (docs/policy.md's table). */
static void action_defaults(const char *name, bool *allowed, bool *review) {
  static const char *const yes[] = {"allow", "approve", "accept", "run", "pass", "permit", NULL};
  static const char *const no[] = {"block", "deny", "reject", "drop", "refuse", NULL};
  static const char *const ask[] = {"ask", "challenge", "review", NULL};
  *allowed = true;
  *review = false;
  for (const char *const *w = yes; *w; w++)
    if (!strcmp(name, *w)) return;
  if (has_prefix(name, "allow_")) return;
  for (const char *const *w = no; *w; w++)
    if (!strcmp(name, *w)) *allowed = false;
  if (has_prefix(name, "block_") || has_prefix(name, "deny_")) *allowed = false;
  if (!*allowed) return;
  for (const char *const *w = ask; *w; w++)
    if (!strcmp(name, *w)) *allowed = false, *review = true;
  if (has_prefix(name, "ask_") || has_prefix(name, "review_")) *allowed = false, *review = true;
}

static int32_t find_action(const actvec *a, const char *name, size_t len) {
  for (uint32_t i = 0; i < a->n; i++)
    if (a->v[i].name_len == len && memcmp(a->v[i].name, name, len) == 0) return (int32_t)i;
  return -1;
}

static int32_t add_action(cc *c, const char *name, const ynode *where) {
  if (c->acts.n == c->acts.cap) {
    uint32_t cap = c->acts.cap ? c->acts.cap * 2 : 8;
    policy_action *v = realloc(c->acts.v, cap * sizeof *v);
    if (!v) {
      nomem(c);
      return -1;
    }
    c->acts.v = v;
    const ynode **w = realloc(c->acts.where, cap * sizeof *w);
    if (!w) {
      nomem(c);
      return -1;
    }
    c->acts.where = w;
    c->acts.cap = cap;
  }
  policy_action *a = &c->acts.v[c->acts.n];
  memset(a, 0, sizeof *a);
  a->name = name;
  a->name_len = (uint32_t)strlen(name);
  action_defaults(name, &a->allowed, &a->review);
  c->acts.where[c->acts.n] = where;
  return (int32_t)c->acts.n++;
}

/* The index of the action a rule or setting names, adding it with the
 * default meaning when `actions` does not declare it. -1 when invalid. */
int32_t use_action(cc *c, const ynode *n, const char *key) {
  const char *name = want_name(c, n, key, "action name");
  if (!name) return -1;
  int32_t i = find_action(&c->acts, name, n->len);
  if (i >= 0) return i;
  if (c->declared_actions) {
    const char *names[64];
    size_t k = 0;
    for (uint32_t j = 0; j < c->acts.n && k < 64; j++) names[k++] = c->acts.v[j].name;
    const char *hint = diag_suggest(name, n->len, names, k);
    bool allowed, review;
    action_defaults(name, &allowed, &review);
    const char *meaning = allowed  ? "allowed"
                          : review ? "not allowed, needs review"
                                   : "not allowed";
    warn_at(c, n, key,
            "action '%s' is not declared in 'actions'%s%s%s; it gets the default meaning (%s)",
            name, hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "", meaning);
  }
  return add_action(c, name, n);
}

void parse_actions(cc *c, const ynode *n) {
  if (want_map(c, n, "actions")) return;
  c->declared_actions = 1;
  static const char *const keys[] = {"allowed", "review", "description"};
  for (uint32_t i = 0; i < n->n; i++) {
    const ynode *k = n->kids[2 * i], *v = n->kids[2 * i + 1];
    char path[MAX_NAME + 16];
    place(path, sizeof path, "actions.", UINT32_MAX, k->text);
    const char *name = want_name(c, k, "actions", "action name");
    if (!name) continue;
    int32_t ai = add_action(c, name, k);
    if (ai < 0) return;
    policy_action *a = &c->acts.v[ai];
    if (v->kind == Y_SCALAR && v->v.kind == V_BOOL) {
      a->allowed = v->v.b;
      a->review = false;
    } else if (v->kind == Y_SCALAR && v->v.kind == V_NULL) {
      /* `name:` alone: the default meaning */
    } else if (v->kind == Y_MAP) {
      check_keys(c, v, path, keys, 3);
      const ynode *x;
      char sub[MAX_NAME + 32];
      if ((x = get(v, "allowed"))) {
        place(sub, sizeof sub, path, UINT32_MAX, ".allowed");
        want_bool(c, x, sub, &a->allowed);
        if (!get(v, "review")) a->review = false; /* an explicit meaning replaces the default */
      }
      if ((x = get(v, "review"))) {
        place(sub, sizeof sub, path, UINT32_MAX, ".review");
        want_bool(c, x, sub, &a->review);
      }
      if ((x = get(v, "description"))) {
        place(sub, sizeof sub, path, UINT32_MAX, ".description");
        a->description = want_text(c, x, sub);
      }
    } else {
      err_at(c, v, path, "expected true, false or {allowed: bool, review: bool}, got %s",
             kind_name(v));
    }
  }
}

/* ---- outcomes: default, on_error ---- */

void parse_outcome(cc *c, const ynode *n, const char *key, policy_outcome *out) {
  out->action = -1;
  out->reason = NULL;
  if (n->kind == Y_MAP) {
    static const char *const keys[] = {"action", "reason"};
    check_keys(c, n, key, keys, 2);
    const ynode *a = get(n, "action"), *r = get(n, "reason");
    char sub[64];
    snprintf(sub, sizeof sub, "%s.action", key);
    if (!a)
      err_at(c, n, key, "missing 'action'");
    else
      out->action = use_action(c, a, sub);
    if (r) {
      snprintf(sub, sizeof sub, "%s.reason", key);
      out->reason = want_text(c, r, sub);
    }
    return;
  }
  if (n->kind == Y_SCALAR && n->v.kind == V_STRING) {
    out->action = use_action(c, n, key);
    return;
  }
  err_at(c, n, key, "expected an action name or {action: NAME, reason: TEXT}, got %s",
         kind_name(n));
}

void parse_decision_points(cc *c, const ynode *n) {
  strategy *s = c->s;
  if (want_list(c, n, "decision_points")) return;
  if (n->n == 0) {
    err_at(c, n, "decision_points", "needs at least one decision point (or leave it out)");
    return;
  }
  const char **v = arena_zalloc(c->mem, n->n * sizeof *v);
  int *pl = arena_zalloc(c->mem, n->n * sizeof *pl), *pc = arena_zalloc(c->mem, n->n * sizeof *pc);
  if (!v || !pl || !pc) {
    nomem(c);
    return;
  }
  c->marks->point_line = pl;
  c->marks->point_col = pc;
  uint32_t k = 0;
  for (uint32_t i = 0; i < n->n; i++) {
    char path[48];
    snprintf(path, sizeof path, "decision_points[%u]", i);
    const char *name = want_name(c, n->kids[i], path, "decision point");
    if (!name) continue;
    int dupl = 0;
    for (uint32_t j = 0; j < k; j++)
      if (!strcmp(v[j], name)) dupl = 1;
    if (dupl) {
      err_at(c, n->kids[i], path, "decision point '%s' is listed twice", name);
      continue;
    }
    pl[k] = n->kids[i]->line;
    pc[k] = n->kids[i]->col;
    v[k++] = name;
  }
  s->decision_points = v;
  s->ndecision_points = k;
}

/* A number in YAML (int or double) as a double; -1 with an error otherwise. */
int want_number(cc *c, const ynode *n, const char *key, double *out) {
  if (n->kind == Y_SCALAR && n->v.kind == V_DOUBLE && isfinite(n->v.d)) {
    *out = n->v.d;
    return 0;
  }
  if (n->kind == Y_SCALAR && n->v.kind == V_INT) {
    *out = (double)n->v.i;
    return 0;
  }
  err_at(c, n, key, "expected a number, got %s", kind_name(n));
  return -1;
}

static void parse_thresholds(cc *c, const ynode *n) {
  strategy *s = c->s;
  if (want_list(c, n, "fallback.thresholds")) return;
  if (!n->n) {
    err_at(c, n, "fallback.thresholds",
           "empty: list {min_score: N, action: A} from the highest down");
    return;
  }
  policy_threshold *t = arena_zalloc(c->mem, n->n * sizeof *t);
  if (!t) {
    nomem(c);
    return;
  }
  static const char *const keys[] = {"min_score", "action", "reason"};
  for (uint32_t i = 0; i < n->n; i++) {
    const ynode *e = n->kids[i];
    char key[64];
    snprintf(key, sizeof key, "fallback.thresholds[%u]", i);
    t[i].outcome.action = -1;
    if (want_map(c, e, key)) continue;
    check_keys(c, e, key, keys, 3);
    const ynode *m = get(e, "min_score"), *a = get(e, "action"), *r = get(e, "reason");
    char sub[96];
    snprintf(sub, sizeof sub, "%s.min_score", key);
    if (!m)
      err_at(c, e, key, "missing 'min_score' (the score at or above which 'action' is taken)");
    else if (want_number(c, m, sub, &t[i].min_score) == 0 && i > 0 &&
             !(t[i].min_score < t[i - 1].min_score))
      err_at(c, m, sub,
             "thresholds are read from the top and the first reached decides: list them from the "
             "highest min_score down (%g is not below %g)",
             t[i].min_score, t[i - 1].min_score);
    snprintf(sub, sizeof sub, "%s.action", key);
    if (!a)
      err_at(c, e, key, "missing 'action'");
    else
      t[i].outcome.action = use_action(c, a, sub);
    if (r) {
      snprintf(sub, sizeof sub, "%s.reason", key);
      t[i].outcome.reason = want_text(c, r, sub);
    }
  }
  s->thresholds = t;
  s->nthresholds = n->n;
}

static void parse_classes(cc *c, const ynode *n) {
  strategy *s = c->s;
  if (want_list(c, n, "fallback.classes")) return;
  if (!n->n) {
    err_at(c, n, "fallback.classes", "empty: list one action a class, in the model's class order");
    return;
  }
  int32_t *v = arena_alloc(c->mem, n->n * sizeof *v);
  if (!v) {
    nomem(c);
    return;
  }
  for (uint32_t i = 0; i < n->n; i++) {
    char key[64];
    snprintf(key, sizeof key, "fallback.classes[%u]", i);
    v[i] = use_action(c, n->kids[i], key);
  }
  s->classes = v;
  s->nclasses = n->n;
}

void parse_fallback(cc *c, const ynode *n) {
  strategy *s = c->s;
  s->below.action = -1;
  s->on_timeout.action = -1;
  if (want_map(c, n, "fallback")) return;
  static const char *const keys[] = {"model",   "timeout_ms", "thresholds",       "below",
                                     "classes", "on_timeout", "on_not_candidate", "features"};
  check_keys(c, n, "fallback", keys, 8);
  const ynode *m = get(n, "model"), *t = get(n, "timeout_ms"), *x;
  if (!m)
    err_at(c, n, "fallback", "missing 'model' (the name of the model that decides)");
  else {
    s->fallback_model = want_name(c, m, "fallback.model", "model name");
    s->fallback_line = m->line;
    s->fallback_col = m->col;
  }
  s->fallback_timeout_ms = 10;
  if (t) {
    if (t->kind != Y_SCALAR || (t->v.kind != V_INT && t->v.kind != V_UINT)) {
      err_at(c, t, "fallback.timeout_ms", "expected a whole number of milliseconds, got %s",
             kind_name(t));
    } else if (t->v.kind == V_UINT || t->v.i < 1 || t->v.i > 10000) {
      err_at(c, t, "fallback.timeout_ms", "%s is out of range: use 1 to 10000 (milliseconds)",
             t->text);
    } else {
      s->fallback_timeout_ms = (uint32_t)t->v.i;
    }
  }
  if ((x = get(n, "thresholds"))) parse_thresholds(c, x);
  if ((x = get(n, "classes"))) parse_classes(c, x);
  if (s->thresholds && s->classes)
    err_at(c, x, "fallback.classes",
           "give 'thresholds' (a binary or regression model's score) or 'classes' (a multiclass "
           "model's classes), not both");
  if ((x = get(n, "below"))) {
    if (s->classes)
      err_at(c, x, "fallback.below", "'below' goes with 'thresholds', not with 'classes'");
    parse_outcome(c, x, "fallback.below", &s->below);
  }
  if ((x = get(n, "on_timeout"))) parse_outcome(c, x, "fallback.on_timeout", &s->on_timeout);
  if ((x = get(n, "on_not_candidate"))) {
    if (x->kind == Y_SCALAR && x->v.kind == V_STRING && !strcmp(x->text, "next"))
      s->threshold_nc = 0;
    else if (x->kind == Y_SCALAR && x->v.kind == V_STRING && !strcmp(x->text, "on_no_candidate"))
      s->threshold_nc = 1;
    else
      err_at(c, x, "fallback.on_not_candidate",
             "expected 'next' (the next threshold down decides) or 'on_no_candidate' (the "
             "threshold's action, which on_no_candidate then handles), got %s",
             x->kind == Y_SCALAR ? x->text : kind_name(x));
    if (s->classes)
      err_at(c, x, "fallback.on_not_candidate",
             "'on_not_candidate' goes with 'thresholds', not with 'classes'");
  }
  if ((x = get(n, "features"))) s->features_file = want_text(c, x, "fallback.features");
  /* Neither thresholds nor classes: the score is read as the probability
   * that the request should be refused (docs/policy.md, "Models"). */
  if (!s->thresholds && !s->classes && s->fallback_model) {
    policy_threshold *d = arena_zalloc(c->mem, sizeof *d);
    if (!d) {
      nomem(c);
      return;
    }
    d->min_score = 0.5;
    int32_t blk = find_action(&c->acts, "block", 5);
    d->outcome.action = blk >= 0 ? blk : add_action(c, "block", n);
    d->outcome.reason = NULL;
    s->thresholds = d;
    s->nthresholds = 1;
  }
  if (s->thresholds && s->below.action < 0) {
    int32_t alw = find_action(&c->acts, "allow", 5);
    s->below.action = alw >= 0 ? alw : add_action(c, "allow", n);
  }
}

/* ---- tests ---- */

/* A test's `counters:`: limit name -> the count before the test, or
 * {count: N, penalized: bool}. */
static void parse_test_counters(cc *c, const ynode *x, const char *path, policy_test *pt) {
  if (want_map(c, x, path)) return;
  const strategy *s = c->s;
  static const char *const keys[] = {"count", "penalized"};
  for (uint32_t i = 0; i < x->n; i++) {
    const ynode *k = x->kids[2 * i], *v = x->kids[2 * i + 1];
    char sub[256];
    snprintf(sub, sizeof sub, "%.100s.%.100s", path, k->text);
    uint32_t j;
    for (j = 0; j < s->nlimits; j++)
      if (s->limits[j].name && !strcmp(s->limits[j].name, k->text)) break;
    if (j == s->nlimits) {
      err_at(c, k, path, "no limit named '%s' in this strategy's limits", k->text);
      continue;
    }
    const ynode *cnt = v;
    if (v->kind == Y_MAP) {
      check_keys(c, v, sub, keys, 2);
      cnt = get(v, "count");
      const ynode *p = get(v, "penalized");
      bool b;
      if (p) want_bool(c, p, sub, &b);
    }
    if (cnt && (cnt->kind != Y_SCALAR || cnt->v.kind != V_INT || cnt->v.i < 0))
      err_at(c, cnt, sub,
             "expected the count before the test (a whole number >= 0), or "
             "{count: N, penalized: true}");
  }
  if (yaml_to_value(c->mem, x, &pt->counters)) nomem(c);
}

void parse_tests(cc *c, const ynode *n) {
  strategy *s = c->s;
  if (want_list(c, n, "tests")) return;
  policy_test *tests = n->n ? arena_zalloc(c->mem, n->n * sizeof *tests) : NULL;
  if (n->n && !tests) {
    nomem(c);
    return;
  }
  static const char *const keys[] = {"name",   "context",  "candidates", "key",
                                     "expect", "counters", "point"};
  static const char *const ekeys[] = {"action", "allowed", "source", "rule"};
  static const char *const sources[] = {"rule", "model", "default", "error"};
  for (uint32_t i = 0; i < n->n; i++) {
    const ynode *t = n->kids[i];
    policy_test *pt = &tests[i];
    pt->expect_allowed = -1;
    pt->context = value_map(NULL, 0);
    pt->candidates = value_list(NULL, 0);
    pt->key = value_str("", 0);
    char path[48], sub[64];
    snprintf(path, sizeof path, "tests[%u]", i);
    pt->line = t->line;
    if (want_map(c, t, path)) continue;
    check_keys(c, t, path, keys, 7);
    const ynode *x;
    if ((x = get(t, "point"))) {
      snprintf(sub, sizeof sub, "%s.point", path);
      pt->point = want_name(c, x, sub, "decision point");
      uint32_t k;
      for (k = 0; pt->point && k < s->ndecision_points; k++)
        if (!strcmp(s->decision_points[k], pt->point)) break;
      if (pt->point && k == s->ndecision_points)
        err_at(c, x, sub, "'%s' is not one of this strategy's decision_points", pt->point);
    }
    if ((x = get(t, "counters"))) {
      snprintf(sub, sizeof sub, "%s.counters", path);
      parse_test_counters(c, x, sub, pt);
    }
    if ((x = get(t, "name"))) {
      snprintf(sub, sizeof sub, "%s.name", path);
      pt->name = want_text(c, x, sub);
    } else {
      char def[32];
      snprintf(def, sizeof def, "test-%u", i + 1);
      pt->name = dup(c, def, strlen(def));
    }
    if ((x = get(t, "context"))) {
      snprintf(sub, sizeof sub, "%s.context", path);
      if (!(x->kind == Y_SCALAR && x->v.kind == V_NULL) && !want_map(c, x, sub) &&
          yaml_to_value(c->mem, x, &pt->context))
        nomem(c);
    }
    if ((x = get(t, "candidates"))) {
      snprintf(sub, sizeof sub, "%s.candidates", path);
      if (!want_list(c, x, sub)) {
        int ok = 1;
        for (uint32_t j = 0; j < x->n; j++) {
          const ynode *e = x->kids[j];
          if (e->kind != Y_SCALAR || e->v.kind != V_STRING) {
            char el[80];
            snprintf(el, sizeof el, "%s[%u]", sub, j);
            err_at(c, e, el, "expected an action name (a string), got %s", kind_name(e));
            ok = 0;
          }
        }
        if (ok && yaml_to_value(c->mem, x, &pt->candidates)) nomem(c);
      }
    }
    if ((x = get(t, "key"))) {
      snprintf(sub, sizeof sub, "%s.key", path);
      const char *k = want_text(c, x, sub);
      if (k) pt->key = value_str(k, x->len);
    }
    x = get(t, "expect");
    snprintf(sub, sizeof sub, "%s.expect", path);
    if (!x) {
      err_at(c, t, path, "missing 'expect' (an action name, or {action, allowed, source, rule})");
    } else if (x->kind == Y_SCALAR && x->v.kind == V_STRING) {
      pt->expect_action = want_name(c, x, sub, "action name");
    } else if (x->kind == Y_MAP) {
      check_keys(c, x, sub, ekeys, 4);
      if (x->n == 0) err_at(c, x, sub, "says nothing to check");
      const ynode *y;
      char el[96];
      if ((y = get(x, "action"))) {
        snprintf(el, sizeof el, "%s.action", sub);
        pt->expect_action = want_name(c, y, el, "action name");
      }
      if ((y = get(x, "allowed"))) {
        bool b;
        snprintf(el, sizeof el, "%s.allowed", sub);
        if (!want_bool(c, y, el, &b)) pt->expect_allowed = b;
      }
      if ((y = get(x, "source"))) {
        snprintf(el, sizeof el, "%s.source", sub);
        size_t k;
        for (k = 0; k < 4; k++)
          if (y->kind == Y_SCALAR && !strcmp(y->text, sources[k])) break;
        if (k < 4) {
          pt->expect_source = sources[k];
        } else {
          const char *hint = y->kind == Y_SCALAR ? diag_suggest(y->text, y->len, sources, 4) : NULL;
          err_at(c, y, el, "expected rule, model, default or error, got '%s'%s%s%s",
                 y->kind == Y_SCALAR ? y->text : "?", hint ? " (did you mean '" : "",
                 hint ? hint : "", hint ? "'?)" : "");
        }
      }
      if ((y = get(x, "rule"))) {
        snprintf(el, sizeof el, "%s.rule", sub);
        pt->expect_rule = want_text(c, y, el);
      }
    } else {
      err_at(c, x, sub, "expected an action name or {action, allowed, source, rule}, got %s",
             kind_name(x));
    }
  }
  for (uint32_t i = 1; i < n->n; i++)
    for (uint32_t j = 0; j < i; j++)
      if (tests[i].name && tests[j].name && !strcmp(tests[i].name, tests[j].name)) {
        char path[48];
        snprintf(path, sizeof path, "tests[%u].name", i);
        err_at(c, n->kids[i], path, "duplicate test name '%s' (tests[%u] has it too)",
               tests[i].name, j);
        break;
      }
  s->tests = tests;
  s->ntests = n->n;
}
