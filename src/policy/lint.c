/* lint.c — warnings about a strategy that compiles but may not do what its
 * author meant; `verdict check` prints them.
 *
 * - a rule that can never match because an earlier rule always wins: the
 *   earlier condition is the constant `true`, or its `&&`-parts are a subset
 *   of the later rule's (parts compared by a canonical rendering of their
 *   AST, so spacing, parentheses and literal spelling do not matter);
 * - calls to functions no library defines (they fail when evaluated);
 * - a test whose context has a field that a constant or let hides;
 * - a test expecting an action the strategy never answers;
 * - errors: a map of switches (a constant map whose values are all true or
 *   false, such as the agent guard's packs) that expressions read only key
 *   by key (`packs.git`), with a key none of them reads — a misspelt switch
 *   would silently do nothing — or read with a key it lacks (every
 *   evaluation would fail).
 *
 * Warnings never change what a strategy does. With an `input:` schema,
 * schema.c adds errors (undefined names, type mistakes) from here too. */
#include <stdio.h>
#include <string.h>

#include "expr/expr.h"
#include "policy/internal.h"

#define MAX_PARTS 64

typedef struct rparts {
  const char **text; /* renderings, scratch */
  uint64_t *hash;    /* of each rendering */
  uint32_t n;
  uint32_t key; /* the part this rule is filed under (its rarest) */
  int eligible; /* may shadow later rules */
} rparts;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h ? h : 1;
}

/* A multiset of part hashes: open addressing, counts and posting lists. */
typedef struct ptable {
  uint64_t *keys; /* 0: empty */
  uint32_t *count, *off, *fill;
  uint32_t mask;
} ptable;

static uint32_t pt_slot(const ptable *t, uint64_t h) {
  uint32_t i = (uint32_t)h & t->mask;
  while (t->keys[i] && t->keys[i] != h) i = (i + 1) & t->mask;
  return i;
}

static void warn(const strategy_build *b, policy_diags *d, int line, int col, const char *key,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void warn(const strategy_build *b, policy_diags *d, int line, int col, const char *key,
                 const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vadd(d, DIAG_WARNING, b->file, line, col, key, fmt, ap);
  va_end(ap);
}

static int has_part(const rparts *r, uint64_t h, const char *t) {
  for (uint32_t i = 0; i < r->n; i++)
    if (r->hash[i] == h && !strcmp(r->text[i], t)) return 1;
  return 0;
}

static int is_subset(const rparts *a, const rparts *b) {
  for (uint32_t k = 0; k < a->n; k++)
    if (!has_part(b, a->hash[k], a->text[k])) return 0;
  return 1;
}

static void report_shadow(const strategy_build *b, policy_diags *d, uint32_t i, uint32_t j,
                          int always) {
  const strategy *s = b->s;
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
}

/* Rule i shadows a later rule j when i's condition is `true` or i's parts
 * are a subset of j's. Rather than trying every earlier rule, each rule is
 * filed under its rarest part; a rule j then only tries the rules filed
 * under one of its own parts. */
static void lint_shadowed(const strategy_build *b, policy_diags *d, arena *scratch) {
  const strategy *s = b->s;
  uint32_t nr = s->nrules;
  rparts *rp = arena_zalloc(scratch, (nr + 1) * sizeof *rp);
  if (!rp) return;
  uint32_t total = 0, first_true = UINT32_MAX;
  for (uint32_t r = 0; r < nr; r++) {
    const ast *c = b->rules[r].cond;
    if (!c) continue;
    const ast *parts[MAX_PARTS];
    uint32_t n = ast_conjuncts(c, parts, MAX_PARTS);
    rp[r].eligible = n <= MAX_PARTS && !s->rules[r].reads_model;
    if (ast_is_true(c) && first_true == UINT32_MAX && !s->rules[r].reads_model) first_true = r;
    if (n > MAX_PARTS) n = MAX_PARTS;
    rp[r].text = arena_alloc(scratch, (n ? n : 1) * sizeof *rp[r].text);
    rp[r].hash = arena_alloc(scratch, (n ? n : 1) * sizeof *rp[r].hash);
    if (!rp[r].text || !rp[r].hash) return;
    for (uint32_t i = 0; i < n; i++) {
      rp[r].text[i] = ast_render(scratch, parts[i]);
      if (!rp[r].text[i]) return;
      rp[r].hash[i] = hash_str(rp[r].text[i]);
    }
    rp[r].n = n;
    total += n;
  }
  ptable t;
  uint32_t cap = 16;
  while (cap < 2 * total + 2) cap *= 2;
  t.mask = cap - 1;
  t.keys = arena_zalloc(scratch, cap * sizeof *t.keys);
  t.count = arena_zalloc(scratch, cap * sizeof *t.count);
  t.off = arena_zalloc(scratch, cap * sizeof *t.off);
  t.fill = arena_zalloc(scratch, cap * sizeof *t.fill);
  uint32_t *post = arena_alloc(scratch, (nr + 1) * sizeof *post);
  if (!t.keys || !t.count || !t.off || !t.fill || !post) return;
  /* how many rules have each part */
  for (uint32_t r = 0; r < nr; r++)
    for (uint32_t k = 0; k < rp[r].n; k++) {
      uint32_t i = pt_slot(&t, rp[r].hash[k]);
      t.keys[i] = rp[r].hash[k];
      t.count[i]++;
    }
  /* file each eligible rule under its rarest part: posting lists, ascending */
  for (uint32_t r = 0; r < nr; r++) {
    if (!rp[r].eligible || !rp[r].n) continue;
    uint32_t best = 0;
    for (uint32_t k = 1; k < rp[r].n; k++)
      if (t.count[pt_slot(&t, rp[r].hash[k])] < t.count[pt_slot(&t, rp[r].hash[best])]) best = k;
    rp[r].key = best;
    t.off[pt_slot(&t, rp[r].hash[best])]++; /* counted here, turned into offsets below */
  }
  uint32_t at = 0;
  for (uint32_t i = 0; i < cap; i++) {
    uint32_t n = t.off[i];
    t.off[i] = at;
    at += n;
  }
  for (uint32_t r = 0; r < nr; r++) {
    if (!rp[r].eligible || !rp[r].n) continue;
    uint32_t i = pt_slot(&t, rp[r].hash[rp[r].key]);
    post[t.off[i] + t.fill[i]++] = r;
  }
  for (uint32_t j = 0; j < nr; j++) {
    if (!b->rules[j].cond) continue;
    uint32_t best = first_true < j ? first_true : UINT32_MAX;
    for (uint32_t k = 0; k < rp[j].n; k++) {
      uint32_t slot = pt_slot(&t, rp[j].hash[k]);
      for (uint32_t q = 0; q < t.fill[slot]; q++) {
        uint32_t i = post[t.off[slot] + q];
        if (i >= j || i >= best) break;
        if (is_subset(&rp[i], &rp[j])) best = i;
      }
    }
    if (best != UINT32_MAX) report_shadow(b, d, best, j, best == first_true);
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
                         const ast *tree, const ynode *node, const char *key) {
  if (!p) return;
  const char *const *names;
  uint32_t n = expr_unknown_functions(p, &names);
  for (uint32_t i = 0; i < n; i++) {
    size_t len = strlen(names[i]);
    int line = node ? node->line : 0, col = node ? node->col : 0;
    const ast *call = find_call(tree, names[i], len);
    if (call && node) yaml_scalar_place(node, b->src, b->src_len, call->pos, &line, &col, NULL);
    warn(b, d, line, col, key,
         "no library defines a function '%s': evaluating this expression fails (on_error)",
         names[i]);
  }
}

/* ---- constant maps read key by key ---- */

typedef struct keyuse {
  const char *name; /* the constant */
  size_t len;
  bool whole;      /* read as a value somewhere (packs, packs[k], k in packs) */
  const ast **sel; /* the A_SELECT nodes reading a key */
  uint32_t nsel, cap;
  arena *a;
} keyuse;

static void keys_walk(keyuse *u, const ast *e, const ast *parent) {
  if (!e) return;
  if (e->kind == A_IDENT && e->name_len == u->len && !memcmp(e->name, u->name, u->len)) {
    if (parent && parent->kind == A_SELECT && parent->target == e) {
      if (u->nsel == u->cap) {
        uint32_t nc = u->cap ? 2 * u->cap : 16;
        const ast **ns = arena_alloc(u->a, nc * sizeof *ns);
        if (!ns) return;
        if (u->nsel) memcpy(ns, u->sel, u->nsel * sizeof *ns);
        u->sel = ns;
        u->cap = nc;
      }
      u->sel[u->nsel++] = parent;
    } else {
      u->whole = true;
    }
  }
  keys_walk(u, e->target, e);
  for (uint32_t i = 0; i < e->nargs; i++) keys_walk(u, e->args[i], e);
}

static const ynode *map_value(const ynode *m, const char *key, size_t len) {
  if (!m || !m->kids) return NULL;
  for (uint32_t i = 0; i < m->n; i++)
    if (m->kids[2 * i]->text && strlen(m->kids[2 * i]->text) == len &&
        !memcmp(m->kids[2 * i]->text, key, len))
      return m->kids[2 * i + 1];
  return NULL;
}

static void lint_constant_keys(const strategy_build *b, policy_diags *d, arena *scratch) {
  const strategy *s = b->s;
  const ynode *consts = map_value(b->root, "constants", 9);
  for (uint32_t c = 0; c < s->constants.n; c++) {
    const value *k = &s->constants.entries[c].key, *v = &s->constants.entries[c].val;
    if (v->kind != V_MAP || !v->n) continue;
    bool switches = true; /* every value true or false */
    for (uint32_t i = 0; i < v->n; i++) switches = switches && v->entries[i].val.kind == V_BOOL;
    if (!switches) continue;
    keyuse u = {k->s, k->n, false, NULL, 0, 0, scratch};
    for (uint32_t r = 0; r < s->nrules; r++) keys_walk(&u, b->rules[r].cond, NULL);
    for (uint32_t l = 0; l < s->nlets; l++) keys_walk(&u, b->let_trees[l], NULL);
    if (u.whole || !u.nsel) continue;
    /* Keys read that the map lacks: at the expression. */
    const char **names = arena_alloc(scratch, v->n * sizeof *names);
    for (uint32_t i = 0; names && i < v->n; i++) names[i] = v->entries[i].key.s;
    for (uint32_t i = 0; i < u.nsel; i++) {
      const ast *sel = u.sel[i];
      if (value_map_get(v, sel->name, sel->name_len)) continue;
      bool seen = false; /* one error per missing key, at its first read */
      for (uint32_t j = 0; j < i && !seen; j++)
        seen = u.sel[j]->name_len == sel->name_len &&
               !memcmp(u.sel[j]->name, sel->name, sel->name_len);
      if (seen) continue;
      int line = 0, col = 0;
      const ynode *node = NULL;
      char key[160] = "";
      for (uint32_t r = 0; !node && r < s->nrules; r++) {
        keyuse one = {k->s, k->n, false, NULL, 0, 0, scratch};
        keys_walk(&one, b->rules[r].cond, NULL);
        for (uint32_t j = 0; j < one.nsel; j++)
          if (one.sel[j] == sel)
            node = b->rules[r].node, snprintf(key, sizeof key, "rules[%u].if", r);
      }
      for (uint32_t l = 0; !node && l < s->nlets; l++) {
        keyuse one = {k->s, k->n, false, NULL, 0, 0, scratch};
        keys_walk(&one, b->let_trees[l], NULL);
        for (uint32_t j = 0; j < one.nsel; j++)
          if (one.sel[j] == sel)
            node = b->let_nodes[l], snprintf(key, sizeof key, "let.%s", s->lets[l].name);
      }
      if (node) {
        line = node->line, col = node->col;
        yaml_scalar_place(node, b->src, b->src_len, sel->pos, &line, &col, NULL);
      }
      const char *hint = names ? diag_suggest(sel->name, sel->name_len, names, v->n) : NULL;
      diag_add(d, DIAG_ERROR, b->file, line, col, key,
               "the constant '%.*s' has no key '%.*s'%s%s%s", (int)k->n, k->s, (int)sel->name_len,
               sel->name, hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "");
    }
    /* Keys nothing reads: at the key, in the constants (the switch a team
     * turned on or off would do nothing). */
    const ynode *m = consts ? map_value(consts, k->s, k->n) : NULL;
    const char **read = arena_alloc(scratch, u.nsel * sizeof *read);
    for (uint32_t i = 0; read && i < u.nsel; i++) {
      char *t = arena_alloc(scratch, u.sel[i]->name_len + 1);
      if (t) memcpy(t, u.sel[i]->name, u.sel[i]->name_len), t[u.sel[i]->name_len] = '\0';
      read[i] = t ? t : "";
    }
    for (uint32_t i = 0; i < v->n; i++) {
      const value *key = &v->entries[i].key;
      bool used = false;
      for (uint32_t j = 0; j < u.nsel && !used; j++)
        used = u.sel[j]->name_len == key->n && !memcmp(u.sel[j]->name, key->s, key->n);
      if (used) continue;
      int line = 0, col = 0;
      for (uint32_t j = 0; m && m->kids && j < m->n; j++)
        if (!strcmp(m->kids[2 * j]->text, key->s))
          line = m->kids[2 * j]->line, col = m->kids[2 * j]->col;
      char where[160];
      snprintf(where, sizeof where, "constants.%.*s", (int)k->n, k->s);
      const char *hint = read ? diag_suggest(key->s, key->n, read, u.nsel) : NULL;
      diag_add(d, DIAG_ERROR, b->file, line, col, where,
               "no rule or let reads the key '%.*s' of '%.*s' (its keys are read one by one, as "
               "%.*s.NAME)%s%s%s",
               (int)key->n, key->s, (int)k->n, k->s, (int)k->n, k->s,
               hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
    }
  }
}

void strategy_lint(const strategy_build *b, policy_diags *d) {
  const strategy *s = b->s;
  arena scratch;
  arena_init(&scratch, NULL, 0, 0);
  lint_shadowed(b, d, &scratch);
  schema_check(b, d);
  lint_constant_keys(b, d, &scratch);

  for (uint32_t r = 0; r < s->nrules; r++) {
    const policy_rule *pr = &s->rules[r];
    char key[48];
    snprintf(key, sizeof key, "rules[%u].if", r);
    lint_unknown(b, d, pr->cond, b->rules[r].cond, b->rules[r].node, key);
  }
  for (uint32_t l = 0; l < s->nlets; l++) {
    char key[160];
    snprintf(key, sizeof key, "let.%s", s->lets[l].name);
    lint_unknown(b, d, s->lets[l].prog, b->let_trees[l], b->let_nodes[l], key);
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
      if (strategy_let_index(b, k->s, k->n) >= 0) what = "let";
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
