/* lint.c — warnings about a strategy that compiles but may not do what its
 * author meant; `verdict check` prints them.
 *
 * - a rule that can never match because an earlier rule always wins: the
 *   earlier condition is the constant `true`, or its `&&`-parts are a subset
 *   of the later rule's (parts compared by a canonical rendering of their
 *   AST, so spacing, parentheses and literal spelling do not matter);
 * - calls to functions no library defines (they fail when evaluated), except
 *   `confidence(...)` in expressions that read `model`, which belongs to the
 *   models not built yet and is covered by the next warning;
 * - rules that read `model` (directly or through a let): until models exist
 *   a decision reaching them takes on_error;
 * - a test whose context has a field that a constant or let hides;
 * - a test expecting an action the strategy never answers.
 *
 * Warnings never change what a strategy does. */
#include <stdio.h>
#include <string.h>

#include "expr/expr.h"
#include "policy/internal.h"

#define MAX_PARTS 64

typedef struct rparts {
  const char **text; /* renderings, scratch */
  uint32_t n;
  int complete; /* every part was captured */
} rparts;

static void warn(const strategy_build *b, policy_diags *d, int line, int col, const char *key,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void warn(const strategy_build *b, policy_diags *d, int line, int col, const char *key,
                 const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vadd(d, DIAG_WARNING, b->file, line, col, key, fmt, ap);
  va_end(ap);
}

static int has_part(const rparts *r, const char *t) {
  for (uint32_t i = 0; i < r->n; i++)
    if (!strcmp(r->text[i], t)) return 1;
  return 0;
}

static void lint_shadowed(const strategy_build *b, policy_diags *d, arena *scratch) {
  const strategy *s = b->s;
  rparts *rp = arena_zalloc(scratch, (s->nrules + 1) * sizeof *rp);
  if (!rp) return;
  for (uint32_t r = 0; r < s->nrules; r++) {
    const ast *c = b->rules[r].cond;
    if (!c) continue;
    const ast *parts[MAX_PARTS];
    uint32_t n = ast_conjuncts(c, parts, MAX_PARTS);
    rp[r].complete = n <= MAX_PARTS;
    if (n > MAX_PARTS) n = MAX_PARTS;
    rp[r].text = arena_alloc(scratch, (n ? n : 1) * sizeof *rp[r].text);
    if (!rp[r].text) return;
    for (uint32_t i = 0; i < n; i++) {
      rp[r].text[i] = ast_render(scratch, parts[i]);
      if (!rp[r].text[i]) return;
    }
    rp[r].n = n;
  }
  for (uint32_t j = 1; j < s->nrules; j++) {
    if (!b->rules[j].cond) continue;
    for (uint32_t i = 0; i < j; i++) {
      const ast *ci = b->rules[i].cond;
      if (!ci || s->rules[i].reads_model || !rp[i].complete) continue;
      int always = ast_is_true(ci);
      int subset = !always;
      for (uint32_t k = 0; subset && k < rp[i].n; k++)
        if (!has_part(&rp[j], rp[i].text[k])) subset = 0;
      if (!always && !subset) continue;
      const policy_rule *ri = &s->rules[i], *rj = &s->rules[j];
      char key[32], caveat[256] = "";
      snprintf(key, sizeof key, "rules[%u]", j);
      if (ri->action != rj->action && ri->action >= 0)
        snprintf(caveat, sizeof caveat,
                 " (unless a request's candidates leave out '%s', which passes rule '%s' over)",
                 s->actions[ri->action].name, ri->name);
      if (always)
        warn(b, d, rj->line, rj->column, key,
             "rule '%s' can never match: rule '%s' (rules[%u], line %d) always matches first%s",
             rj->name, ri->name, i, ri->line, caveat);
      else
        warn(b, d, rj->line, rj->column, key,
             "rule '%s' can never match: rule '%s' (rules[%u], line %d) matches whenever it does, "
             "and comes first%s",
             rj->name, ri->name, i, ri->line, caveat);
      break;
    }
  }
}

/* The first call to `name` in e, for its position. */
static const ast *find_call(const ast *e, const char *name, size_t len) {
  if (!e) return NULL;
  if (e->kind == A_CALL && e->name_len == len && memcmp(e->name, name, len) == 0) return e;
  const ast *f = find_call(e->target, name, len);
  for (uint32_t i = 0; !f && i < e->nargs; i++) f = find_call(e->args[i], name, len);
  return f;
}

static void lint_unknown(const strategy_build *b, policy_diags *d, const expr_program *p,
                         const ast *tree, const ynode *node, const char *key, bool reads_model) {
  if (!p) return;
  const char *const *names;
  uint32_t n = expr_unknown_functions(p, &names);
  for (uint32_t i = 0; i < n; i++) {
    size_t len = strlen(names[i]);
    /* `confidence(model.score)` belongs to the models; the model warning covers it */
    if (reads_model && len == 10 && !memcmp(names[i], "confidence", 10)) continue;
    int line = node ? node->line : 0, col = node ? node->col : 0;
    const ast *call = find_call(tree, names[i], len);
    if (call && node) yaml_scalar_place(node, b->src, b->src_len, call->pos, &line, &col, NULL);
    warn(b, d, line, col, key,
         "no library defines a function '%s': evaluating this expression fails (on_error)",
         names[i]);
  }
}

static const char *on_error_text(const strategy *s, char *buf, size_t cap) {
  if (s->on_error.action >= 0)
    snprintf(buf, cap, "on_error ('%s')", s->actions[s->on_error.action].name);
  else
    snprintf(buf, cap, "on_error (an error decision, as no on_error action is set)");
  return buf;
}

void strategy_lint(const strategy_build *b, policy_diags *d) {
  const strategy *s = b->s;
  arena scratch;
  arena_init(&scratch, NULL, 0, 0);
  lint_shadowed(b, d, &scratch);

  char buf[160];
  for (uint32_t r = 0; r < s->nrules; r++) {
    const policy_rule *pr = &s->rules[r];
    char key[48];
    snprintf(key, sizeof key, "rules[%u].if", r);
    lint_unknown(b, d, pr->cond, b->rules[r].cond, b->rules[r].node, key, pr->reads_model);
    if (pr->reads_model)
      warn(b, d, pr->line, pr->column, key,
           "rule '%s' reads %s, but models are not supported yet: a decision that reaches this "
           "rule takes %s",
           pr->name, b->rules[r].model_direct ? "model" : "model (through a let)",
           on_error_text(s, buf, sizeof buf));
  }
  for (uint32_t l = 0; l < s->nlets; l++) {
    char key[160];
    snprintf(key, sizeof key, "let.%s", s->lets[l].name);
    lint_unknown(b, d, s->lets[l].prog, b->let_trees[l], b->let_nodes[l], key, b->let_model[l]);
  }

  const ynode *tests = NULL;
  for (uint32_t i = 0; i < b->root->n; i++)
    if (!strcmp(b->root->kids[2 * i]->text, "tests")) tests = b->root->kids[2 * i + 1];
  for (uint32_t t = 0; t < s->ntests; t++) {
    const policy_test *pt = &s->tests[t];
    int col = tests && t < tests->n ? tests->kids[t]->col : 1;
    char key[48];
    snprintf(key, sizeof key, "tests[%u]", t);
    for (uint32_t i = 0; i < pt->context.n; i++) {
      const value *k = &pt->context.entries[i].key;
      const char *what = NULL;
      if (value_map_get(&s->constants, k->s, k->n)) what = "constant";
      for (uint32_t l = 0; l < s->nlets; l++)
        if (s->lets[l].name_len == k->n && !memcmp(s->lets[l].name, k->s, k->n)) what = "let";
      if (what)
        warn(b, d, pt->line, col, key,
             "the context field '%.*s' is hidden by the %s of the same name: rules see the %s",
             (int)k->n, k->s, what, what);
    }
    if (pt->expect_action && s->nc_mode != NC_FIRST &&
        strategy_action(s, pt->expect_action, strlen(pt->expect_action)) < 0)
      warn(b, d, pt->line, col, key, "expects '%s', an action this strategy never answers",
           pt->expect_action);
  }
  arena_free(&scratch);
}
