/* strategy.c — one YAML document to one compiled strategy.
 *
 * Checks every key against docs/policy.md (required keys, types, unknown
 * keys with a "did you mean" hint, names, ranges), fills the public
 * `strategy` in the bundle arena, and compiles every `if` and `let` once with
 * expr_compile. An expression error is reported at its place in the YAML
 * file — the line and column inside the scalar, with a caret excerpt of the
 * file's line — not at the expression's own 1:1. Constants are inlined
 * into the expressions that read them (see "constants, inlined" below), and
 * the names each expression reads give the let graph (cycles are errors) and
 * `reads_model`.
 *
 * It goes on after an error so that one run reports as much as it can; the
 * caller throws the strategy away when any error was added.
 *
 * Programs are stored into the strategy as soon as they are compiled, so
 * policy_bundle_free finds and frees them whether or not compiling finished.
 *
 * With STRATEGY_LAZY (a file read back from the parsed cache, for a process
 * that decides once: policy_load_opts.lazy), lets and rules are only parsed
 * here — the trees are what the let graph, the rule index and the limit
 * checks read — and each is compiled when a decision first reaches it
 * (strategy_rule_program), its regexes compiled on their first match (and
 * JIT-compiled only once they have run a few dozen times: lib_core.c).
 * The cached file compiled cleanly when it was stored, so nothing is
 * reported later that would have been reported now; should a program fail
 * to compile anyway, the decision that reaches it fails as an erroring rule.
 * When the store keeps the strategy's compiled programs (cache.c,
 * compiled/), a let or rule is rebuilt from its image instead of compiled.
 *
 * Not here: actions, outcomes, decision points, the fallback model and
 * tests (strategy_parts.c), constants inlined into expressions
 * (strategy_inline.c), reading files and cross-strategy checks (bundle.c),
 * the rule index (index.c), warnings (lint.c), versions (version.c). */
#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/utf8.h"
#include "expr/expr.h"
#include "expr/image.h"
#include "policy/internal.h"
#include "policy/strategy_cc.h"

/* ---- expressions ---- */

/* The message of an expr_error without its "L:C: " prefix and excerpt. */
static void bare_message(const char *m, char *out, size_t cap) {
  const char *p = m;
  while (*p >= '0' && *p <= '9') p++;
  if (p > m && *p == ':') {
    const char *q = p + 1;
    while (*q >= '0' && *q <= '9') q++;
    if (q > p + 1 && q[0] == ':' && q[1] == ' ') m = q + 2;
  }
  size_t n = strcspn(m, "\n");
  if (n >= cap) n = cap - 1;
  memcpy(out, m, n);
  out[n] = 0;
}

/* How policy expressions compile: `a.b.c` is always the variable `a` with
 * fields selected (no variable name holds a dot: context fields are
 * top-level names), so names resolve at compile time. The rule index
 * (index.c) resolves paths the same way. */
/* `limits.NAME` is one name the engine answers by reading that limit alone
 * (expr_opts.claimed), not `limits` (every limit) with NAME selected. */
static const char *const CLAIMED[] = {"limits"};
static const expr_opts EXPR_OPTS = {.simple_names = 1, .claimed = CLAIMED, .nclaimed = 1};
/* The same for compiling on first use: one thread, so a regex is compiled
 * on its first match (a program reached only for a rule that never gets to
 * its `matches` never pays for it) and JIT-compiled only once it has run a
 * few dozen times (expr_opts.defer_jit). */
const expr_opts STRATEGY_EXPR_OPTS_LATER = {
    .simple_names = 1, .claimed = CLAIMED, .nclaimed = 1, .defer_jit = 1};
#define EXPR_OPTS_LATER STRATEGY_EXPR_OPTS_LATER

static void report_expr_error(cc *c, const ynode *n, const char *key, const expr_error *e) {
  int line = n->line, col = n->col;
  size_t at = n->pos, off = e->offset;
  /* "unexpected end of input": point just past the last character, not at
   * the line after a block scalar */
  if (off >= n->len) {
    off = n->len;
    while (off > 0 && (n->text[off - 1] == '\n' || n->text[off - 1] == ' ' ||
                       n->text[off - 1] == '\t' || n->text[off - 1] == '\r'))
      off--;
  }
  yaml_scalar_place(n, c->src, c->len, off, &line, &col, &at);
  char msg[1024];
  bare_message(e->message, msg, sizeof msg);
  diag_excerpt(msg, sizeof msg, c->src, c->len, at);
  diag_add(c->d, DIAG_ERROR, c->file, line, col, key, "%s", msg);
}

/* Compiles the scalar n as an expression, parsed once into *tree (in the
 * scratch arena). Returns the program, or NULL (reported; *tree NULL too).
 *
 * `later` (a let or a rule of a strategy read back from the parsed cache,
 * with STRATEGY_LAZY): only parsed, into the bundle's arena with its own copy
 * of the text, and left in *lz for strategy_rule_program and
 * strategy_let_program to compile on first use; returns NULL with *tree
 * set. */
static expr_program *compile_expr(cc *c, const ynode *n, const char *key, const ast **tree,
                                  policy_lazy *later) {
  *tree = NULL;
  if (n->kind != Y_SCALAR || n->v.kind == V_NULL) {
    err_at(c, n, key, "expected an expression, got %s", kind_name(n));
    return NULL;
  }
  const char *text = n->text;
  arena *where = c->scratch;
  if (later) {
    text = dup(c, n->text, n->len);
    if (!text) return NULL;
    where = c->mem;
  }
  ast *t = NULL;
  expr_error e;
  if (expr_parse(where, text, n->len, &EXPR_OPTS, &t, &e)) {
    report_expr_error(c, n, key, &e);
    return NULL;
  }
  if (!t) {
    nomem(c);
    return NULL;
  }
  if (later) {
    later->text = text;
    later->len = n->len;
    later->tree = t;
    *tree = t;
    return NULL;
  }
  expr_program *p = NULL;
  if (strategy_program_of(c->s, text, n->len, t, &EXPR_OPTS, &p, &e)) {
    report_expr_error(c, n, key, &e);
    return NULL;
  }
  *tree = t;
  return p;
}

/* ---- compiling on first use (STRATEGY_LAZY) ---- */

static const expr_program *compile_later(const policy_lazy *lz, expr_program **slot,
                                         const strategy *s, arena *a, const char **why) {
  expr_program *p = NULL;
  /* the program kept in the store (cache.c, compiled/), when it reads back */
  if (lz->image && (lz->trusted ? expr_image_read_trusted : expr_image_read)(
                       lz->image, lz->image_len, &EXPR_OPTS_LATER, lz->image_mem, &p) == 0) {
    /* and its regexes' code (the file's CRC checked, this build's): one
     * that does not fit leaves them to be compiled at their first match */
    if (lz->codes) (void)expr_image_adopt_codes(p, lz->codes, lz->codes_len);
    *slot = p;
    return p;
  }
  expr_error e;
  const ast *tree = lz->tree;
  arena tmp; /* a let not even parsed at load (see parse_lets) is parsed here */
  arena_init(&tmp, NULL, 0, 0);
  ast *t = NULL;
  if (!tree && expr_parse(&tmp, lz->text, lz->len, &EXPR_OPTS_LATER, &t, &e) == 0 && !t)
    snprintf(e.message, sizeof e.message, "out of memory");
  if (!tree) tree = t;
  int rc = tree ? strategy_program_of(s, lz->text, lz->len, tree, &EXPR_OPTS_LATER, &p, &e) : -1;
  arena_free(&tmp); /* a program keeps nothing of its tree */
  if (rc == 0) {
    *slot = p;
    return p;
  }
  char msg[600];
  snprintf(msg, sizeof msg, "does not compile: %.*s", (int)strcspn(e.message, "\n"), e.message);
  *why = arena_strndup(a, msg, strlen(msg));
  if (!*why) *why = "does not compile (and out of memory)";
  return NULL;
}

const expr_program *strategy_rule_program(const strategy *s, uint32_t i, arena *a,
                                          const char **why) {
  policy_rule *r = (policy_rule *)&s->rules[i]; /* the bundle's, writable: see policy.h */
  if (r->cond || !r->lazy.text) return r->cond;
  return compile_later(&r->lazy, &r->cond, s, a, why);
}

const expr_program *strategy_let_program(const strategy *s, uint32_t i, arena *a,
                                         const char **why) {
  policy_let *l = (policy_let *)&s->lets[i];
  if (l->prog || !l->lazy.text) return l->prog;
  return compile_later(&l->lazy, &l->prog, s, a, why);
}

/* ---- the parts ---- */

static void parse_constants(cc *c, const ynode *n, const char ***names, uint32_t *count) {
  if (want_map(c, n, "constants")) return;
  map_entry *e = n->n ? arena_zalloc(c->mem, n->n * sizeof *e) : NULL;
  const char **nm = n->n ? arena_zalloc(c->scratch, n->n * sizeof *nm) : NULL;
  if (n->n && (!e || !nm)) {
    nomem(c);
    return;
  }
  uint32_t k = 0;
  for (uint32_t i = 0; i < n->n; i++) {
    const ynode *key = n->kids[2 * i];
    if (!valid_ident(key->text, key->len)) {
      err_at(c, key, "constants",
             "'%s' is not a valid constant name: use a letter or '_' then letters, digits, '_' "
             "(not a CEL keyword, nor request, context or model)",
             key->text);
      continue;
    }
    char *s = dup(c, key->text, key->len);
    if (!s || yaml_to_value(c->mem, n->kids[2 * i + 1], &e[k].val)) {
      nomem(c);
      return;
    }
    e[k].key = value_str(s, key->len);
    e[k].key.flags |= VF_ASCII;
    nm[k++] = s;
  }
  c->s->constants = value_map(e, k);
  *names = nm;
  *count = k;
}

/* ---- names an expression reads ----
 *
 * The lets' names (and the constants', to refuse a let of the same name)
 * in open-addressing tables of indices: a strategy of 10,000 lets reading
 * each other costs one probe a name read, where scanning every let for
 * every name read was quadratic. */

static uint32_t ntab_hash(const char *s, size_t n) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

static int ntab_init(cc *c, ntab *t, const char *const *names, uint32_t n) {
  uint32_t cap = 16;
  while (cap < 2 * (uint64_t)n + 2) cap *= 2;
  t->slot = arena_zalloc(c->scratch, cap * sizeof *t->slot);
  t->mask = cap - 1;
  t->names = names;
  if (!t->slot) nomem(c);
  return t->slot ? 0 : -1;
}

/* The index of the name s[0..n), or -1. */
static int32_t ntab_find(const ntab *t, const char *s, size_t n) {
  if (!t->slot) return -1;
  for (uint32_t i = ntab_hash(s, n) & t->mask;; i = (i + 1) & t->mask) {
    uint32_t v = t->slot[i];
    if (!v) return -1;
    const char *m = t->names[v - 1];
    /* s may hold a NUL (a test's context key): strnlen, not m[n] */
    if (!strncmp(m, s, n) && strnlen(m, n + 1) == n) return (int32_t)(v - 1);
  }
}

static void ntab_add(ntab *t, uint32_t index) {
  const char *s = t->names[index];
  for (uint32_t i = ntab_hash(s, strlen(s)) & t->mask;; i = (i + 1) & t->mask)
    if (!t->slot[i]) {
      t->slot[i] = index + 1;
      return;
    }
}

int32_t strategy_let_index(const strategy_build *b, const char *name, size_t len) {
  return b->let_tab ? ntab_find(b->let_tab, name, len) : -1;
}

/* let_info: strategy_cc.h */

typedef struct reads {
  cc *c;
  const ntab *lets;
  let_info *info; /* NULL: the lets' reads are not known yet */
  uint32_t *seen; /* per let: the stamp of the last expression that read it */
  uint32_t stamp;
  uint32_t *deps; /* malloc'd, grown */
  uint32_t ndeps, cap;
  bool model;   /* reads model itself */
  bool via_let; /* (info set) reads a let that reads model */
  bool oom;
} reads;

static int ident_is(const ast *id, const char *s, size_t n) {
  return id->name_len == n && memcmp(id->name, s, n) == 0;
}

static void on_ident(void *user, const ast *id) {
  reads *r = user;
  if (ident_is(id, "model", 5)) r->model = true;
  int32_t j = ntab_find(r->lets, id->name, id->name_len);
  if (j < 0 || r->seen[j] == r->stamp) return;
  r->seen[j] = r->stamp;
  if (r->info && r->info[j].model) r->via_let = true;
  if (r->ndeps == r->cap) {
    uint32_t ncap = r->cap ? 2 * r->cap : 16;
    uint32_t *d = realloc(r->deps, ncap * sizeof *d);
    if (!d) {
      r->oom = true;
      return;
    }
    r->deps = d;
    r->cap = ncap;
  }
  r->deps[r->ndeps++] = (uint32_t)j;
}

/* Starts r over for one more expression. */
static void reads_next(reads *r) {
  r->ndeps = 0;
  r->model = r->via_let = false;
  if (++r->stamp == 0 && r->seen) { /* wrapped: every let unseen again */
    memset(r->seen, 0, (r->c->s->nlets + 1) * sizeof *r->seen);
    r->stamp = 1;
  }
}

/* The bounds of a let read (ast_depths), from the lets already walked. */
typedef struct depth_reads {
  const ntab *lets;
  const let_info *info;
  bool bad;              /* reads a let over a bound */
  int32_t deepest, last; /* the let read giving the most nesting, eval */
  uint32_t nest, eval;
} depth_reads;

static int on_let_depth(void *user, const ast *id, uint32_t *nest, uint32_t *eval) {
  depth_reads *r = user;
  int32_t j = ntab_find(r->lets, id->name, id->name_len);
  if (j < 0) return 0;
  const let_info *l = &r->info[j];
  if (l->bad) r->bad = true;
  /* a let on a cycle (reported) or over a bound counts nothing more */
  *nest = l->mark == 2 && !l->bad ? l->nest : 0;
  *eval = l->mark == 2 && !l->bad ? l->eval : 0;
  if (r->deepest < 0 || *nest > r->nest) r->deepest = j, r->nest = *nest;
  if (r->last < 0 || *eval > r->eval) r->last = j, r->eval = *eval;
  return 1;
}

/* Checks the bounds of the expression t (at n, key) that reads the lets
 * walked so far. Returns 0 and sets *nest, *eval; -1 when over a bound
 * (reported) or reading a let that is (not reported again). The nesting is
 * checked for a let (lets build on each other's values); a rule's or a
 * limit's value is no one's input, and nests at most one expression's depth
 * more than the lets it reads. */
static int check_depths(cc *c, const ntab *lets, const let_info *info, const ast *t, const ynode *n,
                        const char *key, const char *what, bool is_let, uint32_t *nest,
                        uint32_t *eval) {
  depth_reads r = {lets, info, false, -1, -1, 0, 0};
  ast_depths(t, on_let_depth, &r, nest, eval);
  if (r.bad) return -1;
  if (is_let && *nest > POLICY_MAX_LET_NEST) {
    err_at(c, n, key,
           "%s nests lists and maps %u levels deep through the lets it reads (through '%s'), "
           "over the limit of %d: build the value from fewer lets, or nest less in each",
           what, *nest, r.deepest >= 0 ? c->s->lets[r.deepest].name : "?", POLICY_MAX_LET_NEST);
    return -1;
  }
  if (*eval > POLICY_MAX_EVAL_DEPTH) {
    err_at(c, n, key,
           "%s evaluates %u levels deep through the lets it reads (through '%s'; a let read "
           "counts %d), over the limit of %d: shorten the chain of lets that read lets",
           what, *eval, r.last >= 0 ? c->s->lets[r.last].name : "?", POLICY_LET_READ_DEPTH,
           POLICY_MAX_EVAL_DEPTH);
    return -1;
  }
  return 0;
}

static void parse_lets(cc *c, const ynode *n, const char *const *consts, uint32_t nconsts,
                       const char ***names_out, let_info **info_out) {
  if (want_map(c, n, "let")) return;
  strategy *s = c->s;
  if (n->n > POLICY_MAX_LETS) {
    err_at(c, n->kids[2 * POLICY_MAX_LETS], "let",
           "%u lets, over the limit of %d a strategy: compute fewer values, or split the "
           "strategy",
           n->n, POLICY_MAX_LETS);
    return;
  }
  policy_let *lets = n->n ? arena_zalloc(c->mem, n->n * sizeof *lets) : NULL;
  const char **names = n->n ? arena_zalloc(c->scratch, n->n * sizeof *names) : NULL;
  let_info *info = n->n ? arena_zalloc(c->scratch, n->n * sizeof *info) : NULL;
  uint32_t *seen = arena_zalloc(c->scratch, (n->n + 1) * sizeof *seen);
  if ((n->n && (!lets || !names || !info)) || !seen) {
    nomem(c);
    return;
  }
  ntab ctab;
  if (ntab_init(c, &ctab, consts, nconsts) || ntab_init(c, &c->lets_tab, names, n->n)) return;
  for (uint32_t j = 0; j < nconsts; j++) ntab_add(&ctab, j);
  uint32_t k = 0;
  for (uint32_t i = 0; i < n->n; i++) {
    const ynode *key = n->kids[2 * i];
    if (!valid_ident(key->text, key->len)) {
      err_at(c, key, "let",
             "'%s' is not a valid let name: use a letter or '_' then letters, digits, '_' "
             "(not a CEL keyword, nor request, context or model)",
             key->text);
      continue;
    }
    if (ntab_find(&ctab, key->text, key->len) >= 0) {
      err_at(c, key, "let", "'%s' is both a constant and a let: rename one", key->text);
      continue;
    }
    lets[k].name = dup(c, key->text, key->len);
    lets[k].name_len = key->len;
    names[k] = lets[k].name;
    if (!names[k]) return;
    ntab_add(&c->lets_tab, k);
    info[k].node = n->kids[2 * i + 1];
    k++;
  }
  s->lets = lets;
  s->nlets = k;
  c->let_seen = seen;
  /* A text this build loaded cleanly before (STRATEGY_LETS_CHECKED): the
   * bounds and cycles the graph below checks held then and hold now, and
   * without a fallback model no one needs the lets' reads; each let keeps
   * its text, parsed at first use (compile_later). */
  for (uint32_t i = 0; c->lets_checked && i < k; i++) {
    const ynode *v = info[i].node;
    if (v->kind != Y_SCALAR || v->v.kind == V_NULL) {
      err_at(c, v, "let", "expected an expression, got %s", kind_name(v));
      continue;
    }
    lets[i].lazy.text = dup(c, v->text, v->len);
    lets[i].lazy.len = v->len;
    if (!lets[i].lazy.text) return;
  }
  if (c->lets_checked) {
    *names_out = names;
    *info_out = info;
    return;
  }
  /* Compile after every name is known, so a let may read any other. */
  reads r = {c, &c->lets_tab, NULL, seen, 0, NULL, 0, 0, false, false, false};
  for (uint32_t i = 0; i < k; i++) {
    char path[MAX_NAME + 8];
    place(path, sizeof path, "let.", UINT32_MAX, lets[i].name);
    lets[i].prog =
        compile_expr(c, info[i].node, path, &info[i].tree, c->lazy ? &lets[i].lazy : NULL);
    if (!info[i].tree) continue;
    reads_next(&r);
    ast_free_idents(info[i].tree, on_ident, &r);
    info[i].model_direct = r.model;
    info[i].ndeps = r.ndeps;
    info[i].deps = r.ndeps ? arena_memdup(c->scratch, r.deps, r.ndeps * sizeof *r.deps) : NULL;
    if (r.oom || (r.ndeps && !info[i].deps)) {
      free(r.deps);
      nomem(c);
      return;
    }
  }
  free(r.deps);
  *names_out = names;
  *info_out = info;
}

/* A cycle among lets: path[from..top] then j again. */
static void report_cycle(cc *c, const uint32_t *path, uint32_t top, uint32_t j) {
  const strategy *s = c->s;
  char chain[512];
  size_t used = 0;
  uint32_t from = top;
  while (from > 0 && path[from] != j) from--;
  for (uint32_t k = from; k <= top && used < sizeof chain; k++)
    used += (size_t)snprintf(chain + used, sizeof chain - used, "%s -> ", s->lets[path[k]].name);
  if (used < sizeof chain) snprintf(chain + used, sizeof chain - used, "%s", s->lets[j].name);
  char key[MAX_NAME + 8];
  snprintf(key, sizeof key, "let.%s", s->lets[j].name);
  const let_info *info = c->let_info;
  err_at(c, info[j].node, key, "let '%s' depends on itself: %s", s->lets[j].name, chain);
}

/* The let graph, depth first with a path of its own (a chain of 10,000 lets
 * is no deeper on the C stack than one let): cycles are errors; each let,
 * once every let it reads is done, gets "reads model" and its nesting and
 * evaluation bounds, checked. Linear in lets and reads. */
static void let_graph(cc *c, let_info *info) {
  const strategy *s = c->s;
  uint32_t n = s->nlets;
  uint32_t *path = arena_alloc(c->scratch, (n + 1) * sizeof *path);
  uint32_t *next = arena_alloc(c->scratch, (n + 1) * sizeof *next); /* per path entry: next read */
  if (!path || !next) {
    nomem(c);
    return;
  }
  for (uint32_t root = 0; root < n; root++) {
    if (info[root].mark) continue;
    uint32_t top = 0;
    path[0] = root;
    next[0] = 0;
    info[root].mark = 1;
    for (;;) {
      uint32_t i = path[top];
      let_info *l = &info[i];
      if (next[top] < l->ndeps) {
        uint32_t j = l->deps[next[top]++];
        if (info[j].mark == 1) {
          report_cycle(c, path, top, j);
        } else if (info[j].mark == 0) {
          top++;
          path[top] = j;
          next[top] = 0;
          info[j].mark = 1;
        }
        continue;
      }
      /* every let i reads is done (or on a cycle, reported) */
      l->model = l->model_direct;
      for (uint32_t d = 0; d < l->ndeps; d++)
        if (info[l->deps[d]].model) l->model = true;
      char key[MAX_NAME + 8];
      snprintf(key, sizeof key, "let.%s", s->lets[i].name);
      char what[MAX_NAME + 16];
      snprintf(what, sizeof what, "let '%s'", s->lets[i].name);
      if (l->tree && check_depths(c, &c->lets_tab, info, l->tree, l->node, key, what, true,
                                  &l->nest, &l->eval))
        l->bad = true;
      l->mark = 2;
      if (top == 0) break;
      top--;
    }
  }
}

/* A rule's name and place, sorted to find repeated names. */
typedef struct rule_by_name {
  const char *name;
  uint32_t index;
} rule_by_name;

static int cmp_rule_by_name(const void *a, const void *b) {
  const rule_by_name *x = a, *y = b;
  int d = strcmp(x->name, y->name);
  return d ? d : (x->index > y->index) - (x->index < y->index);
}

static void parse_rules(cc *c, const ynode *n, let_info *lets, rule_info **info_out) {
  if (want_list(c, n, "rules")) return;
  strategy *s = c->s;
  policy_rule *rules = n->n ? arena_zalloc(c->mem, n->n * sizeof *rules) : NULL;
  rule_info *info = n->n ? arena_zalloc(c->scratch, n->n * sizeof *info) : NULL;
  if (n->n && (!rules || !info)) {
    nomem(c);
    return;
  }
  reads rd = {c, &c->lets_tab, lets, c->let_seen, 0, NULL, 0, 0, false, false, false};
  /* the stamps start over: clear what the lets' pass left */
  if (rd.seen) memset(rd.seen, 0, (s->nlets + 1) * sizeof *rd.seen);
  s->rules = rules;
  s->nrules = n->n;
  *info_out = info;
  static const char *const keys[] = {"name", "if", "action", "reason", "confidence"};
  for (uint32_t i = 0; i < n->n; i++) {
    const ynode *r = n->kids[i];
    policy_rule *pr = &rules[i];
    pr->action = -1;
    pr->confidence = 1.0;
    char path[64], sub[80];
    place(path, sizeof path, "rules", i, "");
    if (want_map(c, r, path)) continue;
    check_keys(c, r, path, keys, 5);
    const ynode *x;
    if ((x = get(r, "name"))) {
      pr->name = want_text(c, x, place(sub, sizeof sub, path, UINT32_MAX, ".name"));
    } else {
      char def[32];
      memcpy(def, "rule-", 5);
      def[5 + uint_text(def + 5, i + 1)] = '\0';
      pr->name = dup(c, def, strlen(def));
    }
    if ((x = get(r, "reason"))) {
      pr->reason = want_text(c, x, place(sub, sizeof sub, path, UINT32_MAX, ".reason"));
    }
    if ((x = get(r, "confidence"))) {
      place(sub, sizeof sub, path, UINT32_MAX, ".confidence");
      double v;
      if (want_number(c, x, sub, &v) == 0) {
        if (v > 0 && v <= 1)
          pr->confidence = v;
        else
          err_at(c, x, sub, "%s is out of range: a rule's confidence is above 0 and at most 1",
                 x->text);
      }
    }
    if ((x = get(r, "action"))) {
      pr->action = use_action(c, x, place(sub, sizeof sub, path, UINT32_MAX, ".action"));
    } else {
      err_at(c, r, path, "missing 'action' (what the rule answers when its condition holds)");
    }
    x = get(r, "if");
    if (!x) {
      err_at(c, r, path, "missing 'if' (the rule's condition)");
      continue;
    }
    place(sub, sizeof sub, path, UINT32_MAX, ".if");
    pr->line = x->line;
    pr->column = x->col;
    info[i].node = x;
    if (x->kind == Y_SCALAR) pr->source = dup(c, x->text, x->len);
    /* nothing for the index in it (the compiled/ file says): its text
     * alone, parsed at first use if its image does not read back */
    if (c->rule_parts && c->nrule_parts == n->n && !c->rule_parts[i] && pr->source) {
      pr->lazy.text = pr->source;
      pr->lazy.len = x->len;
      continue;
    }
    pr->cond = compile_expr(c, x, sub, &info[i].cond, c->lazy ? &pr->lazy : NULL);
    if (!info[i].cond) continue;
    if (lets && !c->lets_checked) {
      uint32_t nest, eval;
      char what[96];
      snprintf(what, sizeof what, "rule '%.64s'", pr->name ? pr->name : "?");
      (void)check_depths(c, &c->lets_tab, lets, info[i].cond, x, sub, what, false, &nest, &eval);
    }
    if (c->lets_unread) continue;
    reads_next(&rd);
    ast_free_idents(info[i].cond, on_ident, &rd);
    info[i].model_direct = rd.model;
    pr->reads_model = rd.model || rd.via_let;
  }
  free(rd.deps);
  /* (a text this build loaded without an error before has no repeats) */
  if (c->lets_checked) return;
  /* Rule names are unique in a strategy (traces and tests name them). The
   * rules sorted by name (then place) put each repeat right after the first
   * rule of that name: n log n, where comparing every pair cost minutes for
   * a strategy of 100,000 rules. */
  rule_by_name *byname = n->n ? malloc(n->n * sizeof *byname) : NULL;
  uint32_t *first = n->n ? malloc(n->n * sizeof *first) : NULL;
  if (n->n && (!byname || !first)) {
    free(byname);
    free(first);
    nomem(c);
    return;
  }
  uint32_t nb = 0;
  for (uint32_t i = 0; i < n->n; i++) {
    first[i] = UINT32_MAX;
    if (rules[i].name) byname[nb++] = (rule_by_name){rules[i].name, i};
  }
  if (nb) qsort(byname, nb, sizeof *byname, cmp_rule_by_name);
  for (uint32_t k = 1; k < nb; k++) {
    if (strcmp(byname[k].name, byname[k - 1].name)) continue;
    uint32_t prev = byname[k - 1].index;
    first[byname[k].index] = first[prev] == UINT32_MAX ? prev : first[prev];
  }
  for (uint32_t i = 1; i < n->n; i++) {
    if (first[i] == UINT32_MAX) continue;
    const ynode *r = n->kids[i];
    const ynode *at = r->kind == Y_MAP && get(r, "name") ? get(r, "name") : r;
    char path[64];
    snprintf(path, sizeof path, "rules[%u].name", i);
    err_at(c, at, path, "duplicate rule name '%s' (rules[%u] has it too)", rules[i].name, first[i]);
  }
  free(byname);
  free(first);
}

/* ---- limits ---- */

/* A duration: whole numbers with units, largest first ("10m", "1h30m",
 * "500ms", "1d"). Returns 0 with *ns set, or -1 with an error. */
static int want_duration(cc *c, const ynode *n, const char *key, int64_t *ns) {
  if (n->kind != Y_SCALAR || n->v.kind != V_STRING || !n->len) {
    err_at(c, n, key, "expected a duration such as 30s, 10m, 1h or 1h30m, got %s", kind_name(n));
    return -1;
  }
  static const struct {
    const char *u;
    int64_t ns;
  } units[] = {{"ms", 1000000LL},
               {"s", 1000000000LL},
               {"m", 60000000000LL},
               {"h", 3600000000000LL},
               {"d", 86400000000000LL}};
  const char *p = n->text, *end = n->text + n->len;
  int64_t total = 0, last_unit = INT64_MAX;
  while (p < end) {
    int64_t v = 0;
    const char *d0 = p;
    while (p < end && *p >= '0' && *p <= '9' && v < 100000000) v = v * 10 + (*p++ - '0');
    size_t k, ul = 0;
    for (k = 0; k < 5; k++) {
      ul = strlen(units[k].u);
      if ((size_t)(end - p) >= ul && memcmp(p, units[k].u, ul) == 0 &&
          !(ul == 1 && k == 2 && end - p >= 2 && p[1] == 's'))
        break;
    }
    if (p == d0 || k == 5 || units[k].ns >= last_unit) {
      err_at(c, n, key,
             "'%s' is not a duration: write whole numbers with units ms, s, m, h or d, largest "
             "first (30s, 10m, 1h30m)",
             n->text);
      return -1;
    }
    total += v * units[k].ns;
    last_unit = units[k].ns;
    p += ul;
  }
  if (total > 366 * 86400000000000LL) {
    err_at(c, n, key, "'%s' is too long: at most 366d", n->text);
    return -1;
  }
  *ns = total;
  return 0;
}

/* A limit's key, when and charge as parsed (parse_limits), for
 * check_limit_reads once every limit is known. */
typedef struct limit_info {
  const ast *tree[3];
  const ynode *node[3];
} limit_info;

static void parse_limits(cc *c, const ynode *n, limit_info **linfo) {
  strategy *s = c->s;
  if (want_map(c, n, "limits")) return;
  limit_info *info = n->n ? arena_zalloc(c->scratch, n->n * sizeof *info) : NULL;
  if (n->n && !info) {
    nomem(c);
    return;
  }
  *linfo = info;
  policy_limit *v = n->n ? arena_zalloc(c->mem, n->n * sizeof *v) : NULL;
  if (n->n && !v) {
    nomem(c);
    return;
  }
  s->limits = v; /* before compiling: policy_bundle_free finds the programs */
  s->nlimits = n->n;
  static const char *const keys[] = {"key",    "when",   "charge", "window",
                                     "budget", "action", "reason", "penalty"};
  for (uint32_t i = 0; i < n->n; i++) {
    const ynode *k = n->kids[2 * i], *l = n->kids[2 * i + 1], *x;
    policy_limit *pl = &v[i];
    pl->action = -1;
    pl->line = k->line;
    pl->column = k->col;
    char path[192], sub[224];
    snprintf(path, sizeof path, "limits.%.160s", k->text);
    if (!valid_ident(k->text, k->len)) {
      err_at(c, k, "limits",
             "'%s' is not a valid limit name: rules read it as limits.NAME, so use letters, "
             "digits and '_', starting with a letter",
             k->text);
      continue;
    }
    pl->name = dup(c, k->text, k->len);
    pl->name_len = k->len;
    if (want_map(c, l, path)) continue;
    check_keys(c, l, path, keys, 8);
    const ast *tree;
    if (!(x = get(l, "key")))
      err_at(c, l, path, "missing 'key' (an expression naming the caller: ip, user, request.key)");
    else {
      snprintf(sub, sizeof sub, "%s.key", path);
      pl->key = compile_expr(c, x, sub, &tree, NULL);
      info[i].tree[0] = pl->key ? tree : NULL;
      info[i].node[0] = x;
    }
    if ((x = get(l, "when"))) {
      snprintf(sub, sizeof sub, "%s.when", path);
      pl->when = compile_expr(c, x, sub, &tree, NULL);
      info[i].tree[1] = pl->when ? tree : NULL;
      info[i].node[1] = x;
    }
    if ((x = get(l, "charge"))) {
      snprintf(sub, sizeof sub, "%s.charge", path);
      pl->charge = compile_expr(c, x, sub, &tree, NULL);
      info[i].tree[2] = pl->charge ? tree : NULL;
      info[i].node[2] = x;
    }
    snprintf(sub, sizeof sub, "%s.window", path);
    if (!(x = get(l, "window")))
      err_at(c, l, path, "missing 'window' (the span the budget covers: 1m, 1h, ...)");
    else if (want_duration(c, x, sub, &pl->window_ns) == 0 && pl->window_ns < 1000000)
      err_at(c, x, sub, "the window must be at least 1ms");
    snprintf(sub, sizeof sub, "%s.budget", path);
    if (!(x = get(l, "budget")))
      err_at(c, l, path, "missing 'budget' (how many charges the window allows)");
    else if (x->kind != Y_SCALAR || x->v.kind != V_INT || x->v.i < 1 || x->v.i > 1000000)
      err_at(c, x, sub, "expected a whole number from 1 to 1000000, got %s",
             x->kind == Y_SCALAR ? x->text : kind_name(x));
    else
      pl->budget = (uint32_t)x->v.i;
    if ((x = get(l, "penalty"))) {
      snprintf(sub, sizeof sub, "%s.penalty", path);
      want_duration(c, x, sub, &pl->penalty_ns);
    }
    if ((x = get(l, "action"))) {
      snprintf(sub, sizeof sub, "%s.action", path);
      pl->action = use_action(c, x, sub);
    }
    if ((x = get(l, "reason"))) {
      snprintf(sub, sizeof sub, "%s.reason", path);
      pl->reason = want_text(c, x, sub);
      if (!get(l, "action"))
        warn_at(c, x, sub, "a reason without an action is never given: this limit only counts");
    }
  }
}

/* `limits.NAME` in an expression names a declared limit: checked when the
 * strategy is compiled, with the place, rather than failing every decision
 * that reaches the rule. */
bool strategy_limits_readable(const strategy *s) {
  if (!s->nlimits || value_map_get(&s->constants, "limits", 6)) return false;
  for (uint32_t i = 0; i < s->nlets; i++)
    if (s->lets[i].name && !strcmp(s->lets[i].name, "limits")) return false;
  return true;
}

void strategy_unknown_limits(const strategy *s, const ast *e,
                             void (*fn)(void *user, const ast *sel), void *user) {
  if (!e) return;
  if (e->kind == A_SELECT && e->target && e->target->kind == A_IDENT &&
      ident_is(e->target, "limits", 6)) {
    uint32_t i;
    for (i = 0; i < s->nlimits; i++)
      if (s->limits[i].name && s->limits[i].name_len == e->name_len &&
          !memcmp(s->limits[i].name, e->name, e->name_len))
        break;
    if (i == s->nlimits) fn(user, e);
  }
  strategy_unknown_limits(s, e->target, fn, user);
  for (uint32_t i = 0; i < e->nargs; i++) strategy_unknown_limits(s, e->args[i], fn, user);
}

void strategy_unknown_limit_msg(const strategy *s, const ast *sel, char *msg, size_t n) {
  snprintf(msg, n, "no limit named '%.*s' (this strategy's limits:", (int)sel->name_len, sel->name);
  for (uint32_t k = 0; k < s->nlimits && strlen(msg) + 100 < n; k++)
    snprintf(msg + strlen(msg), n - strlen(msg), " %s", s->limits[k].name);
  snprintf(msg + strlen(msg), n - strlen(msg), ")");
}

/* A `limits.NAME` in a rule, let or limit naming no limit of the strategy:
 * an error where it is written. */
typedef struct limit_reads_at {
  cc *c;
  const ynode *n;
  const char *key;
} limit_reads_at;

static void unknown_limit_at(void *user, const ast *e) {
  limit_reads_at *w = user;
  cc *c = w->c;
  int line = w->n->line, col = w->n->col;
  size_t at = w->n->pos;
  yaml_scalar_place(w->n, c->src, c->len, e->target->pos, &line, &col, &at);
  char msg[1024];
  strategy_unknown_limit_msg(c->s, e, msg, sizeof msg);
  diag_excerpt(msg, sizeof msg, c->src, c->len, at);
  diag_add(c->d, DIAG_ERROR, c->file, line, col, w->key, "%s", msg);
}

static void check_limit_reads(cc *c, const ast *e, const ynode *n, const char *key) {
  limit_reads_at w = {c, n, key};
  strategy_unknown_limits(c->s, e, unknown_limit_at, &w);
}

size_t strategy_compile(const strategy_input *in, strategy *s, strategy_marks *m, policy_diags *d) {
  assert(in->root && in->file); /* bundle.c compiles only documents that parsed */
  arena *mem = in->mem, *scratch = in->scratch;
  const char *file = in->file, *src = in->src;
  size_t len = in->len;
  const ynode *root = in->root;
  uint32_t index_min_rules = in->index_min_rules;
  unsigned flags = in->flags;
  cc c;
  memset(&c, 0, sizeof c);
  c.mem = mem;
  c.scratch = scratch;
  c.file = file;
  c.src = src;
  c.len = len;
  c.d = d;
  c.errors0 = d->errors;
  c.s = s;
  c.marks = m;
  c.lazy = (flags & STRATEGY_LAZY) != 0;
  /* Which rules read `model` through a let matters only with a fallback
   * model (no rule may read it without one); without, rules are not searched
   * for the lets they read. The let graph is built all the same: its bounds
   * are what keep a decision's evaluation off the end of the C stack,
   * whether the file was read now or long ago by another build. */
  c.lets_unread = c.lazy && root->kind == Y_MAP && !get(root, "fallback");
  c.lets_checked = c.lets_unread && (flags & STRATEGY_LETS_CHECKED) != 0;
  if (c.lets_checked) {
    c.rule_parts = in->rule_parts;
    c.nrule_parts = in->nrule_parts;
  }
  memset(m, 0, sizeof *m);
  m->name_line = root->line;
  m->name_col = root->col;
  s->file = file;
  s->default_outcome.action = -1;
  s->on_error.action = -1;
  s->nc_mode = NC_ERROR;
  s->nc_action = -1;
  s->constants = value_map(NULL, 0);

  if (root->kind != Y_MAP) {
    err_at(&c, root, "", "a strategy file holds a mapping (strategy:, rules:, ...), not %s",
           kind_name(root));
    return d->errors - c.errors0;
  }
  static const char *const keys[] = {
      "strategy", "description", "decision_points", "actions",         "constants", "let",
      "rules",    "default",     "on_error",        "on_no_candidate", "fallback",  "tests",
      "input",    "limits",      "route",           "rollout_key",     "snapshot"};
  check_keys(&c, root, "", keys, sizeof keys / sizeof keys[0]);

  const ynode *x;
  if ((x = get(root, "strategy"))) {
    s->name = want_name(&c, x, "strategy", "strategy name");
    m->name_line = x->line;
    m->name_col = x->col;
  } else
    err_at(&c, root, "", "missing 'strategy' (the strategy's name)");
  if ((x = get(root, "description"))) s->description = want_text(&c, x, "description");
  if ((x = get(root, "rollout_key")))
    s->rollout_key = want_name(&c, x, "rollout_key", "context field name");
  if ((x = get(root, "route"))) {
    if (x->kind == Y_SCALAR && x->v.kind == V_STRING && !strcmp(x->text, "candidates"))
      s->route_candidates = true;
    else if (!(x->kind == Y_SCALAR && x->v.kind == V_STRING && !strcmp(x->text, "point")))
      err_at(&c, x, "route",
             "expected 'point' (every request for the decision points, the default) or "
             "'candidates' (only requests whose candidates are all this strategy's actions), "
             "got %s",
             x->kind == Y_SCALAR ? x->text : kind_name(x));
    if (s->route_candidates && !get(root, "actions"))
      err_at(&c, x, "route",
             "'route: candidates' needs 'actions': the answers whose requests this strategy "
             "takes");
  }
  if ((x = get(root, "decision_points"))) {
    parse_decision_points(&c, x);
  } else if (s->name) {
    const char **v = arena_alloc(mem, sizeof *v);
    if (v) {
      v[0] = s->name;
      s->decision_points = v;
      s->ndecision_points = 1;
    } else {
      nomem(&c);
    }
  }
  if ((x = get(root, "actions"))) parse_actions(&c, x);

  const stype *input = NULL;
  if ((x = get(root, "input"))) input = schema_parse(scratch, file, x, d);

  const char **const_names = NULL;
  uint32_t nconsts = 0;
  if ((x = get(root, "constants"))) parse_constants(&c, x, &const_names, &nconsts);

  const char **let_names = NULL;
  let_info *lets = NULL;
  if ((x = get(root, "let"))) parse_lets(&c, x, const_names, nconsts, &let_names, &lets);
  c.let_info = lets;
  if (lets && s->nlets && !c.lets_checked) let_graph(&c, lets);

  rule_info *rinfo = NULL;
  if ((x = get(root, "rules"))) parse_rules(&c, x, lets, &rinfo);
  limit_info *linfo = NULL;
  if ((x = get(root, "limits"))) parse_limits(&c, x, &linfo);
  for (uint32_t i = 0; lets && !c.lets_checked && linfo && i < s->nlimits; i++) { /* lets too */
    static const char *const part[3] = {"key", "when", "charge"};
    for (int k = 0; k < 3 && s->limits[i].name; k++) {
      if (!linfo[i].tree[k]) continue;
      char key[192], what[192];
      snprintf(key, sizeof key, "limits.%.160s.%s", s->limits[i].name, part[k]);
      snprintf(what, sizeof what, "limit '%.160s' (%s)", s->limits[i].name, part[k]);
      uint32_t nest, eval;
      (void)check_depths(&c, &c.lets_tab, lets, linfo[i].tree[k], linfo[i].node[k], key, what,
                         false, &nest, &eval);
    }
  }
  if (strategy_limits_readable(s)) {
    for (uint32_t i = 0; rinfo && i < s->nrules; i++) {
      char key[48];
      snprintf(key, sizeof key, "rules[%u].if", i);
      if (rinfo[i].cond) check_limit_reads(&c, rinfo[i].cond, rinfo[i].node, key);
    }
    for (uint32_t i = 0; lets && i < s->nlets; i++) {
      char key[160];
      snprintf(key, sizeof key, "let.%.128s", s->lets[i].name);
      if (lets[i].tree) check_limit_reads(&c, lets[i].tree, lets[i].node, key);
    }
    static const char *const parts[3] = {"key", "when", "charge"};
    for (uint32_t i = 0; linfo && i < s->nlimits; i++)
      for (int k = 0; k < 3 && s->limits[i].name; k++) {
        char key[192];
        snprintf(key, sizeof key, "limits.%.160s.%s", s->limits[i].name, parts[k]);
        if (linfo[i].tree[k]) check_limit_reads(&c, linfo[i].tree[k], linfo[i].node[k], key);
      }
  }

  if ((x = get(root, "snapshot"))) {
    parse_snapshot(&c, x);
    snapshot_reads(&c, rinfo, lets);
  }
  if ((x = get(root, "default"))) {
    parse_outcome(&c, x, "default", &s->default_outcome);
  } else if (!get(root, "fallback")) {
    err_at(&c, root, "",
           "missing 'default' (the decision when no rule matches; it may be left out only when "
           "a 'fallback' model decides)");
  }
  const ynode *on_error = get(root, "on_error");
  if (on_error) parse_outcome(&c, on_error, "on_error", &s->on_error);
  if ((x = get(root, "on_no_candidate"))) {
    if (x->kind == Y_SCALAR && x->v.kind == V_STRING && !strcmp(x->text, "first")) {
      s->nc_mode = NC_FIRST;
    } else if (x->kind == Y_SCALAR && x->v.kind == V_STRING && !strcmp(x->text, "error")) {
      s->nc_mode = NC_ERROR;
    } else if (x->kind == Y_SCALAR && x->v.kind == V_STRING) {
      s->nc_mode = NC_ACTION;
      s->nc_action = use_action(&c, x, "on_no_candidate");
    } else {
      err_at(&c, x, "on_no_candidate", "expected an action name, 'first' or 'error', got %s",
             kind_name(x));
    }
  }
  s->below.action = -1;
  s->on_timeout.action = -1;
  if ((x = get(root, "fallback"))) parse_fallback(&c, x);
  for (uint32_t r = 0; r < s->nrules && !s->fallback_model; r++)
    if (s->rules[r].reads_model) {
      char key[48];
      snprintf(key, sizeof key, "rules[%u].if", r);
      diag_add(c.d, DIAG_ERROR, c.file, s->rules[r].line, s->rules[r].column, key,
               "rule '%s' reads model, but the strategy has no fallback model: add "
               "`fallback: {model: NAME}` (the model is models/NAME.json in the bundle)",
               s->rules[r].name);
    }
  /* A one-shot process never runs the tests, and a cached file's were
   * checked when it was first loaded. */
  if ((x = get(root, "tests")) && !c.lazy) parse_tests(&c, x);

  /* The actions, final: declared ones first, then the ones named elsewhere. */
  if (c.acts.n) {
    policy_action *acts = arena_memdup(mem, c.acts.v, c.acts.n * sizeof *acts);
    if (!acts) nomem(&c);
    s->actions = acts;
    s->nactions = acts ? c.acts.n : 0;
  }
  /* on_error by default: the first action that is not allowed. */
  if (!on_error) {
    for (uint32_t i = 0; i < s->nactions; i++)
      if (!s->actions[i].allowed) {
        s->on_error.action = (int32_t)i;
        break;
      }
  }
  free(c.acts.v);
  free(c.acts.where);

  if (d->errors == c.errors0 && !c.oom) {
    strategy_build b;
    memset(&b, 0, sizeof b);
    b.s = s;
    b.rules = rinfo;
    b.src = src;
    b.src_len = len;
    b.file = file;
    b.root = root;
    b.let_names = let_names;
    b.let_tab = &c.lets_tab;
    b.nlets = s->nlets;
    const ast **lt = arena_zalloc(scratch, (s->nlets + 1) * sizeof *lt);
    const ynode **ln = arena_zalloc(scratch, (s->nlets + 1) * sizeof *ln);
    uint8_t *lm = arena_zalloc(scratch, s->nlets + 1);
    if (!lt || !ln || !lm) {
      nomem(&c);
      return d->errors - c.errors0;
    }
    for (uint32_t i = 0; i < s->nlets; i++) {
      lt[i] = lets[i].tree;
      ln[i] = lets[i].node;
      lm[i] = lets[i].model;
    }
    b.let_trees = lt;
    b.let_nodes = ln;
    b.let_model = lm;
    b.const_names = const_names;
    b.nconsts = nconsts;
    b.input = input;
    b.index_min_rules = index_min_rules;
    /* lint only warns, and a cached file had no warnings when it was
     * first loaded */
    if (rule_index_build(mem, scratch, &b, d) == 0 && !c.lazy) strategy_lint(&b, d);
  }
  return d->errors - c.errors0;
}
