/* compile.c — from source text to the compact program eval.c runs.
 *
 * One pass over the AST (expr_parse builds it in a scratch arena that is
 * dropped afterwards) that emits nodes in post-order into growable arrays,
 * then moves them into the program's own arena. On the way it:
 *
 * - resolves operators to opcodes, and calls to the built-in overloads that
 *   fit the call's style (global or receiver) and arity, calling each
 *   overload's `prepare` once when some arguments are constants (a regex is
 *   compiled here, not per evaluation; a bad one is a compile error);
 * - resolves names: comprehension variables become slots; an identifier or
 *   a chain `a.b.c` rooted at one becomes a variable reference with its
 *   candidate names, longest first (CEL binds the longest dotted prefix that
 *   is a variable and selects the rest as fields). With expr_opts.declared,
 *   the choice is made here and an unknown name is a compile error; without
 *   it, unbound names are run-time errors, as the CEL spec says. Type names
 *   (`int`, `map`, `google.protobuf.Timestamp`, ...) are type values when no
 *   variable has that name;
 * - folds constant subtrees (literals, lists and maps of constants,
 *   operators and most built-in calls over constants) by running the
 *   evaluator on them once, so `[1, 2] + [3]` or `timestamp('...')` cost
 *   nothing at run time; an error found this way stays a run-time error
 *   (`1/0 || true` is still true);
 * - specializes the hot cases of policy conditions: `x == CONST`,
 *   `x in CONST_LIST` (a byte scan or a prebuilt hash set),
 *   `x.startsWith/endsWith/contains(CONST)` and `cidr(CONST).containsIP(x)`
 *   (answered inline, OP_STR_PRED / OP_CONTAINS_IP), and
 *   `CONST_LIST.exists(p, x.startsWith(p))` and the like (one pass of a
 *   literal set, OP_EXISTS_LIT); flattens chains of `&&` / `||` into one
 *   n-ary node. Each specialized node keeps what the general one needs, and
 *   falls back to it for anything its fast path does not cover, so values,
 *   error messages and cost stay those of the general path;
 * - turns the macros the parser leaves as calls into native nodes: CEL's
 *   two-variable comprehensions (`all`, `exists`, `existsOne`,
 *   `transformList`, `transformMap`), `cel.bind`, and `cel.block` with
 *   `cel.index`.
 *
 * Unknown functions are run-time errors (so `f(1) || true` is true), but
 * their names are kept so that a policy compiler can warn about them
 * (expr_unknown_functions).
 *
 * Not here: the grammar (parse.c), evaluation (eval.c), and the parts of a
 * program the image loader builds too, constants and call sites (program.c). */
#define _GNU_SOURCE /* memmem */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr/litset.h"
#include "expr/program.h"
#include "expr/refs.h"

#define NONE UINT32_MAX
#define FOLD_ARENA_LIMIT ((size_t)64 << 20) /* scratch memory a constant fold may use */
#define FOLD_COST_LIMIT 100000

typedef struct scope_var {
  const char *name;
  uint32_t len;
  uint32_t slot;
} scope_var;

/* A growable array of fixed-size elements (malloc'd during compile only). */
typedef struct vec {
  void *v;
  uint32_t n, cap;
} vec;

typedef struct compiler {
  const char *src;
  size_t len;
  const expr_opts *opts;
  expr_error *err;
  arena *mem; /* the program's arena */
  int failed;
  vec nodes, kids, calls, quals, sets, lits, unknown, scope;
  uint32_t depth;     /* next free slot */
  uint32_t max_slots; /* slots the program needs */
  /* the innermost cel.block: its first slot and how many entries are defined */
  uint32_t block_base, block_count;
  int in_block;
} compiler;

static int vec_push(compiler *c, vec *v, const void *elem, size_t size) {
  if (v->n == v->cap) {
    uint32_t cap = v->cap ? v->cap * 2 : 16;
    void *p = realloc(v->v, (size_t)cap * size);
    if (!p) {
      c->failed = 1;
      expr_error_at(c->err, NULL, 0, 0, "out of memory while compiling");
      return -1;
    }
    v->v = p;
    v->cap = cap;
  }
  memcpy((char *)v->v + (size_t)v->n * size, elem, size);
  v->n++;
  return 0;
}

#define NODES(c) ((pnode *)(c)->nodes.v)
#define KIDS(c) ((uint32_t *)(c)->kids.v)

static void fail_at(compiler *c, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_at(compiler *c, size_t pos, const char *fmt, ...) {
  if (c->failed) return;
  c->failed = 1;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  expr_error_at(c->err, c->src, c->len, pos, "%s", msg);
}

static void fail_nomem(compiler *c, size_t pos) {
  fail_at(c, pos, "out of memory while compiling (expression too large)");
}

/* ---- nodes ---- */

static uint32_t emit(compiler *c, uint8_t op, uint32_t pos, const uint32_t *kids, uint32_t nk,
                     uint32_t aux, value k) {
  if (c->failed) return NONE;
  pnode n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.pos = pos;
  n.nkids = nk;
  n.kids = c->kids.n;
  n.aux = aux;
  n.fn = eval_op_fn((opcode)op);
  n.k = k;
  for (uint32_t i = 0; i < nk; i++)
    if (vec_push(c, &c->kids, &kids[i], sizeof kids[i])) return NONE;
  if (vec_push(c, &c->nodes, &n, sizeof n)) return NONE;
  return c->nodes.n - 1;
}

static uint32_t emit_const(compiler *c, uint32_t pos, value v) {
  return emit(c, OP_CONST, pos, NULL, 0, 0, v);
}

static int is_const(compiler *c, uint32_t i) { return NODES(c)[i].op == OP_CONST; }

/* Where a subtree starts in every array, so a folded subtree can be dropped. */
typedef struct mark {
  uint32_t nodes, kids, calls, sets, quals, lits;
} mark;

static mark mark_here(compiler *c) {
  mark m = {c->nodes.n, c->kids.n, c->calls.n, c->sets.n, c->quals.n, c->lits.n};
  return m;
}

/* A program view of what has been compiled so far, for running the
 * evaluator on a constant subtree. */
static expr_program view_of(compiler *c) {
  expr_program p;
  memset(&p, 0, sizeof p);
  p.nodes = NODES(c);
  p.nnodes = c->nodes.n;
  p.kids = KIDS(c);
  p.calls = c->calls.v;
  p.ncalls = c->calls.n;
  p.quals = c->quals.v;
  p.sets = c->sets.v;
  p.lits = c->lits.v;
  p.src = c->src;
  p.src_len = c->len;
  return p;
}

/* Whether an error only says that a fold ran out of its scratch memory or
 * cost budget (the expression itself may be fine: leave it to run time). */
static int hit_limit(const value *r) {
  static const char *const limits[] = {"memory limit", "out of memory", "cost limit"};
  for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++)
    if (memmem(r->s, r->n, limits[i], strlen(limits[i]))) return 1;
  return 0;
}

/* Evaluates node i (all of whose children are constants) once and replaces
 * its subtree with the result. Built-in calls that fail are left to run
 * time, where they report what went wrong under the caller's limits. */
static uint32_t fold(compiler *c, uint32_t i, mark m) {
  if (c->failed) return NONE;
  pnode *n = &NODES(c)[i];
  uint32_t pos = n->pos;
  const int is_call = n->op == OP_CALL;
  expr_program view = view_of(c);
  arena scratch;
  arena_init(&scratch, NULL, 0, FOLD_ARENA_LIMIT);
  eval_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.arena = &scratch;
  ctx.cost_limit = FOLD_COST_LIMIT;
  value r = eval_program_node(&view, i, NULL, &ctx, NULL);
  if (r.kind == V_ERROR && (is_call || hit_limit(&r))) {
    arena_free(&scratch);
    return i;
  }
  value k;
  if (value_copy_deep(c->mem, &r, &k)) {
    arena_free(&scratch);
    fail_nomem(c, pos);
    return NONE;
  }
  arena_free(&scratch);
  c->nodes.n = m.nodes;
  c->kids.n = m.kids;
  c->calls.n = m.calls;
  c->sets.n = m.sets;
  c->quals.n = m.quals;
  c->lits.n = m.lits;
  return emit_const(c, pos, k);
}

static int all_const(compiler *c, const uint32_t *kids, uint32_t nk) {
  for (uint32_t i = 0; i < nk; i++)
    if (!is_const(c, kids[i])) return 0;
  return 1;
}

/* Emits a node and folds it when every child is a constant. */
static uint32_t emit_foldable(compiler *c, uint8_t op, uint32_t pos, const uint32_t *kids,
                              uint32_t nk, uint32_t aux, value k, mark m) {
  uint32_t i = emit(c, op, pos, kids, nk, aux, k);
  if (i == NONE) return NONE;
  if (all_const(c, kids, nk)) return fold(c, i, m);
  return i;
}

/* ---- strings owned by the program ---- */

static const char *own_str(compiler *c, const char *s, size_t n, uint32_t pos) {
  char *p = arena_strndup(c->mem, s, n);
  if (!p) fail_nomem(c, pos);
  return p;
}

static int name_is(const char *s, size_t n, const char *word) {
  return n == strlen(word) && memcmp(s, word, n) == 0;
}

/* The type a name denotes when no variable has it, as value_kind + 1, else 0. */
static uint32_t type_name_kind(const char *s, size_t n) {
  static const struct {
    const char *name;
    value_kind kind;
  } types[] = {
      {"int", V_INT},
      {"uint", V_UINT},
      {"double", V_DOUBLE},
      {"bool", V_BOOL},
      {"string", V_STRING},
      {"bytes", V_BYTES},
      {"list", V_LIST},
      {"map", V_MAP},
      {"null_type", V_NULL},
      {"type", V_TYPE},
      {"google.protobuf.Timestamp", V_TIMESTAMP},
      {"google.protobuf.Duration", V_DURATION},
  };
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (name_is(s, n, types[i].name)) return (uint32_t)types[i].kind + 1;
  return 0;
}

/* ---- names ---- */

static const scope_var *scope_find(compiler *c, const char *name, uint32_t len) {
  const scope_var *v = c->scope.v;
  for (uint32_t i = c->scope.n; i-- > 0;)
    if (v[i].len == len && memcmp(v[i].name, name, len) == 0) return &v[i];
  return NULL;
}

static int declared(compiler *c, const char *name, size_t len) {
  for (size_t i = 0; i < c->opts->ndeclared; i++) {
    const char *d = c->opts->declared[i];
    if (d && strlen(d) == len && memcmp(d, name, len) == 0) return 1;
  }
  return 0;
}

#define MAX_CHAIN 64

/* Builds "prefix.comps[0].comps[1]...comps[k-1]" in buf; returns its length. */
static size_t join_name(char *buf, size_t cap, const char *prefix, size_t plen,
                        const ast *const *comps, uint32_t k) {
  size_t n = 0;
  if (plen) {
    if (plen + 1 > cap) return 0;
    memcpy(buf, prefix, plen);
    buf[plen] = '.';
    n = plen + 1;
  }
  for (uint32_t i = 0; i < k; i++) {
    size_t l = comps[i]->name_len;
    if (n + l + 1 > cap) return 0;
    if (i) buf[n++] = '.';
    memcpy(buf + n, comps[i]->name, l);
    n += l;
  }
  return n;
}

/* The container prefixes to try, longest first, ending with "" (the root):
 * container "a.b" gives "a.b", "a", "". Returns the count. */
static uint32_t container_prefixes(const char *container, size_t *lens, uint32_t max) {
  uint32_t n = 0;
  if (container && *container) {
    size_t l = strlen(container);
    while (n + 1 < max) {
      lens[n++] = l;
      while (l > 0 && container[l - 1] != '.') l--;
      if (l == 0) break;
      l--; /* drop the dot */
    }
  }
  lens[n++] = 0;
  return n;
}

static uint32_t emit_select_rest(compiler *c, uint32_t node, const ast *const *comps, uint32_t from,
                                 uint32_t k) {
  for (uint32_t j = from; j < k && node != NONE; j++) {
    mark m = mark_here(c);
    const char *s = own_str(c, comps[j]->name, comps[j]->name_len, comps[j]->pos);
    if (!s) return NONE;
    node = emit_foldable(c, OP_SELECT, comps[j]->pos, &node, 1, 0, value_str(s, comps[j]->name_len),
                         m);
  }
  return node;
}

/* Whether `name` is a variable the caller claims (expr_opts.claimed). */
static int claimed(const compiler *c, const char *name, size_t len) {
  if (!c->opts || !c->opts->simple_names || (c->opts->container && *c->opts->container)) return 0;
  for (size_t i = 0; i < c->opts->nclaimed; i++)
    if (strlen(c->opts->claimed[i]) == len && memcmp(c->opts->claimed[i], name, len) == 0) return 1;
  return 0;
}

/* `R.F` for a claimed R: a qualified name whose candidates are "R.F", then
 * R with F selected (or, with `test`, has(R.F): flags PQVAR_HAS). */
static uint32_t emit_claimed(compiler *c, const ast *root, const ast *field, int test) {
  uint32_t pos = root->pos;
  const ast *comps[2] = {root, field};
  char buf[1024];
  size_t l = join_name(buf, sizeof buf, NULL, 0, comps, 2);
  if (!l) {
    fail_at(c, pos, "name is too long");
    return NONE;
  }
  pcand *cands = arena_alloc(c->mem, 2 * sizeof *cands);
  value *cv = arena_alloc(c->mem, 2 * sizeof *cv);
  const char *dotted = own_str(c, buf, l, pos);
  const char *r = own_str(c, root->name, root->name_len, pos);
  const char *f = own_str(c, field->name, field->name_len, pos);
  if (!cands || !cv || !dotted || !r || !f) {
    if (!c->failed) fail_nomem(c, pos);
    return NONE;
  }
  cv[0] = value_str(r, root->name_len);
  cv[1] = value_str(f, field->name_len);
  cands[0] = (pcand){dotted, (uint32_t)l, 2};
  cands[1] = (pcand){r, root->name_len, 1};
  /* unbound altogether: the message names the root, as a plain variable's does */
  pqual q = {
      .full = r, .full_len = root->name_len, .comps = cv, .ncomp = 2, .ncand = 2, .cands = cands};
  if (vec_push(c, &c->quals, &q, sizeof q)) return NONE;
  uint32_t node = emit(c, OP_QVAR, pos, NULL, 0, c->quals.n - 1, value_null());
  if (node != NONE && test) NODES(c)[node].flags = PQVAR_HAS;
  return node;
}

/* A name or chain comps[0..k) whose root is not a comprehension variable. */
static uint32_t compile_name(compiler *c, const ast *const *comps, uint32_t k) {
  const char *container = c->opts ? c->opts->container : NULL;
  size_t plens[16];
  uint32_t nprefix = container_prefixes(container, plens, 16);
  char buf[1024];
  uint32_t pos = comps[0]->pos;

  size_t full_len = join_name(buf, sizeof buf, NULL, 0, comps, k);
  if (!full_len) {
    fail_at(c, pos, "name is too long");
    return NONE;
  }
  uint32_t type_kind = type_name_kind(buf, full_len);

  if (c->opts && c->opts->declared) {
    /* Resolve now: the longest declared candidate wins. */
    for (uint32_t used = k; used >= 1; used--) {
      for (uint32_t pi = 0; pi < nprefix; pi++) {
        size_t l = join_name(buf, sizeof buf, container, plens[pi], comps, used);
        if (!l || !declared(c, buf, l)) continue;
        const char *s = own_str(c, buf, l, pos);
        if (!s) return NONE;
        uint32_t node = emit(c, OP_VAR, pos, NULL, 0, 0, value_str(s, (uint32_t)l));
        return emit_select_rest(c, node, comps, used, k);
      }
    }
    if (type_kind) return emit_const(c, pos, value_type((value_kind)(type_kind - 1)));
    /* A chain whose prefix names a type, e.g. `int.x`: still undeclared. */
    join_name(buf, sizeof buf, NULL, 0, comps, k);
    fail_at(c, pos, "undeclared reference to '%.*s'", (int)full_len, buf);
    return NONE;
  }

  if (k >= 2 && claimed(c, comps[0]->name, comps[0]->name_len)) /* R.F, then fields */
    return emit_select_rest(c, emit_claimed(c, comps[0], comps[1], 0), comps, 2, k);

  if ((k == 1 || (c->opts && c->opts->simple_names)) && nprefix == 1) {
    /* One variable, then plain field selections: no dotted-name candidates. */
    const char *s = own_str(c, comps[0]->name, comps[0]->name_len, pos);
    if (!s) return NONE;
    uint32_t root_type = k == 1 ? type_kind : type_name_kind(comps[0]->name, comps[0]->name_len);
    uint32_t node = emit(c, OP_VAR, pos, NULL, 0, root_type, value_str(s, comps[0]->name_len));
    return k == 1 ? node : emit_select_rest(c, node, comps, 1, k);
  }

  /* Decide at run time: candidates longest first, container-qualified
   * before plain at each length. */
  uint32_t ncand = k * nprefix;
  pcand *cands = arena_alloc(c->mem, (size_t)ncand * sizeof *cands);
  value *cv = arena_alloc(c->mem, (size_t)k * sizeof *cv);
  const char *full = own_str(c, buf, full_len, pos);
  if (!cands || !cv || !full) {
    fail_nomem(c, pos);
    return NONE;
  }
  for (uint32_t i = 0; i < k; i++) {
    const char *s = own_str(c, comps[i]->name, comps[i]->name_len, pos);
    if (!s) return NONE;
    cv[i] = value_str(s, comps[i]->name_len);
  }
  uint32_t nc = 0;
  for (uint32_t used = k; used >= 1; used--) {
    for (uint32_t pi = 0; pi < nprefix; pi++) {
      size_t l = join_name(buf, sizeof buf, container, plens[pi], comps, used);
      const char *s = l ? own_str(c, buf, l, pos) : NULL;
      if (!s) {
        if (!c->failed) fail_at(c, pos, "name is too long");
        return NONE;
      }
      cands[nc++] = (pcand){s, (uint32_t)l, used};
    }
  }
  pqual q;
  memset(&q, 0, sizeof q);
  q.full = full;
  q.full_len = (uint32_t)full_len;
  q.comps = cv;
  q.ncomp = k;
  q.ncand = nc;
  q.cands = cands;
  q.type_kind = type_kind;
  if (vec_push(c, &c->quals, &q, sizeof q)) return NONE;
  return emit(c, OP_QVAR, pos, NULL, 0, c->quals.n - 1, value_null());
}

/* ---- calls ---- */

static uint32_t compile(compiler *c, const ast *e);

static uint32_t compile_args(compiler *c, const ast *target, ast *const *args, uint32_t nargs,
                             uint32_t *out) {
  uint32_t n = 0;
  if (target) {
    out[n] = compile(c, target);
    if (out[n++] == NONE) return NONE;
  }
  for (uint32_t i = 0; i < nargs; i++) {
    out[n] = compile(c, args[i]);
    if (out[n++] == NONE) return NONE;
  }
  return n;
}

static int record_unknown(compiler *c, const char *name, size_t len, uint32_t pos) {
  const char *const *u = c->unknown.v;
  for (uint32_t i = 0; i < c->unknown.n; i++)
    if (strlen(u[i]) == len && memcmp(u[i], name, len) == 0) return 0;
  const char *s = own_str(c, name, len, pos);
  if (!s) return -1;
  return vec_push(c, &c->unknown, &s, sizeof s);
}

/* The inline forms of some calls (OP_STR_PRED, OP_CONTAINS_IP): a
 * receiver-style call with one overload, of two strings, whose argument
 * (or receiver) is a constant. */
static void specialize_call(compiler *c, uint32_t node) {
  static const struct {
    const char *name;
    uint8_t kind;
  } preds[] = {{"startsWith", PLIT_STARTS}, {"endsWith", PLIT_ENDS}, {"contains", PLIT_CONTAINS}};
  pnode *n = &NODES(c)[node];
  const pcall *call = &((const pcall *)c->calls.v)[n->aux];
  /* x.lowerAscii() of a variable: policies and feature specs lower the same
   * header again and again within one decision */
  if (n->nkids == 1 && call->ncand == 1 && call->cand[0]->receiver &&
      call->cand[0]->kinds[0] == V_STRING && NODES(c)[KIDS(c)[n->kids]].op != OP_CONST &&
      (name_is(call->name, call->name_len, "lowerAscii") ||
       name_is(call->name, call->name_len, "upperAscii"))) {
    n->flags |= PCALL_MEMO;
    return;
  }
  if (n->nkids != 2 || call->ncand != 1 || !call->cand[0]->receiver ||
      call->cand[0]->kinds[0] != V_STRING || call->cand[0]->kinds[1] != V_STRING)
    return;
  const pnode *recv = &NODES(c)[KIDS(c)[n->kids]];
  const pnode *arg = &NODES(c)[KIDS(c)[n->kids + 1]];
  if (arg->op == OP_CONST && arg->k.kind == V_STRING) {
    for (int i = 0; i < 3; i++)
      if (name_is(call->name, call->name_len, preds[i].name)) {
        n->op = OP_STR_PRED;
        n->flags = preds[i].kind;
        n->k = arg->k;
        n->fn = eval_op_fn(OP_STR_PRED);
        return;
      }
  }
  if (recv->op == OP_CONST && recv->k.kind == V_STRING && net_value_extra(&recv->k) &&
      name_is(call->name, call->name_len, "containsIP")) {
    n->op = OP_CONTAINS_IP;
    n->k = recv->k;
    n->fn = eval_op_fn(OP_CONTAINS_IP);
  }
}

/* A call of the built-in `name` over compiled arguments kids[0..nk). */
static uint32_t emit_call(compiler *c, const char *name, size_t name_len, int receiver,
                          const uint32_t *kids, uint32_t nk, uint32_t pos, mark m) {
  const builtin *first;
  uint32_t count = builtin_lookup(name, (uint32_t)name_len, &first);
  if (count == 0) {
    if (record_unknown(c, name, name_len, pos)) return NONE;
    const char *s = own_str(c, name, name_len, pos);
    if (!s) return NONE;
    return emit(c, OP_CALL_UNKNOWN, pos, NULL, 0, 0, value_str(s, (uint32_t)name_len));
  }
  value args[16];
  uint8_t isc[16];
  for (uint32_t i = 0; i < nk && nk <= 16; i++) {
    isc[i] = !(receiver && i == 0) && is_const(c, kids[i]);
    args[i] = isc[i] ? NODES(c)[kids[i]].k : value_null();
  }
  pcall pc;
  int has_prepare = 0;
  char msg[256];
  int rc = program_call_site(c->mem, first, count, name, (uint32_t)name_len, receiver, nk,
                             nk <= 16 ? args : NULL, nk <= 16 ? isc : NULL,
                             c->opts && c->opts->defer_jit, &pc, &has_prepare, msg, sizeof msg);
  if (rc == -1) {
    fail_nomem(c, pos);
    return NONE;
  }
  if (rc == -2) {
    /* point at the constant argument that was rejected (the first one) */
    for (uint32_t i = 0; i < nk; i++)
      if (isc[i]) {
        pos = NODES(c)[kids[i]].pos;
        break;
      }
    fail_at(c, pos, "%s", msg);
    return NONE;
  }
  if (vec_push(c, &c->calls, &pc, sizeof pc)) {
    program_release_calls(&pc, 1);
    return NONE;
  }
  uint32_t i = emit(c, OP_CALL, pos, kids, nk, c->calls.n - 1, value_null());
  if (i == NONE) return i;
  if (has_prepare || !pc.ncand || !all_const(c, kids, nk)) {
    specialize_call(c, i);
    return i;
  }
  return fold(c, i, m);
}

/* ---- operators ---- */

static const struct {
  const char *name;
  uint8_t op;
  uint8_t nargs;
} operators[] = {
    {"_+_", OP_ADD, 2},    {"_-_", OP_SUB, 2}, {"_*_", OP_MUL, 2}, {"_/_", OP_DIV, 2},
    {"_%_", OP_MOD, 2},    {"_==_", OP_EQ, 2}, {"_!=_", OP_NE, 2}, {"_<_", OP_LT, 2},
    {"_<=_", OP_LE, 2},    {"_>_", OP_GT, 2},  {"_>=_", OP_GE, 2}, {"_&&_", OP_AND, 2},
    {"_||_", OP_OR, 2},    {"!_", OP_NOT, 1},  {"-_", OP_NEG, 1},  {"_?_:_", OP_COND, 3},
    {"_[_]", OP_INDEX, 2}, {"@in", OP_IN, 2},
};

static int operator_of(const ast *e, uint8_t *op) {
  if (e->target) return 0;
  for (size_t i = 0; i < sizeof operators / sizeof operators[0]; i++)
    if (operators[i].nargs == e->nargs && name_is(e->name, e->name_len, operators[i].name)) {
      *op = operators[i].op;
      return 1;
    }
  return 0;
}

static int scalar_key(uint8_t k) {
  return k == V_STRING || k == V_INT || k == V_UINT || k == V_DOUBLE || k == V_BOOL;
}

/* Prepares a constant list or map for `in`: returns the sets[] index + 1,
 * or 0 when a plain scan is as good. */
static uint32_t make_set(compiler *c, const value *cont, uint32_t pos) {
  const int is_map = cont->kind == V_MAP;
  uint32_t n = cont->n;
  int strings = 1, scalars = 1;
  for (uint32_t i = 0; i < n; i++) {
    const value *e = is_map ? &cont->entries[i].key : &cont->items[i];
    strings &= e->kind == V_STRING;
    scalars &= scalar_key(e->kind);
  }
  pset set;
  memset(&set, 0, sizeof set);
  set.container = *cont;
  set.all_strings = (uint8_t)strings;
  if (n > 8 && scalars) {
    uint32_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    uint32_t *slots = arena_zalloc(c->mem, (size_t)cap * sizeof *slots);
    if (!slots) {
      fail_nomem(c, pos);
      return 0;
    }
    for (uint32_t i = 0; i < n; i++) {
      const value *e = is_map ? &cont->entries[i].key : &cont->items[i];
      uint32_t h = (uint32_t)value_hash(e) & (cap - 1);
      while (slots[h]) h = (h + 1) & (cap - 1);
      slots[h] = i + 1;
    }
    set.slots = slots;
    set.mask = cap - 1;
  } else if (!strings) {
    return 0;
  }
  if (vec_push(c, &c->sets, &set, sizeof set)) return 0;
  return c->sets.n;
}

/* `a && b` where a or b is itself an && node: one n-ary node over all the
 * operands (the semantics are associative and commutative, errors included),
 * which saves a level of the walk per operand. */
static uint32_t emit_logic(compiler *c, uint8_t op, uint32_t pos, const uint32_t *two) {
  vec flat = {0};
  uint32_t r = NONE;
  for (int i = 0; i < 2; i++) {
    const pnode *k = &NODES(c)[two[i]];
    if (k->op == op) {
      for (uint32_t j = 0; j < k->nkids; j++) {
        uint32_t g = KIDS(c)[k->kids + j];
        if (vec_push(c, &flat, &g, sizeof g)) goto out;
      }
    } else if (vec_push(c, &flat, &two[i], sizeof two[i])) {
      goto out;
    }
  }
  r = emit(c, op, pos, flat.v, flat.n, 0, value_null());
out:
  free(flat.v);
  return r;
}

static uint32_t compile_operator(compiler *c, const ast *e, uint8_t op, mark m) {
  uint32_t kids[3] = {0, 0, 0};
  for (uint32_t i = 0; i < e->nargs; i++) {
    kids[i] = compile(c, e->args[i]);
    if (kids[i] == NONE) return NONE;
  }
  uint32_t nk = e->nargs;
  if (all_const(c, kids, nk)) return emit_foldable(c, op, e->pos, kids, nk, 0, value_null(), m);
  if (op == OP_AND || op == OP_OR) return emit_logic(c, op, e->pos, kids);
  if (op == OP_EQ || op == OP_NE) {
    /* x == CONST (either side; equality is symmetric and has no effects) */
    int left = is_const(c, kids[0]);
    if (left || is_const(c, kids[1])) {
      value k = NODES(c)[kids[left ? 0 : 1]].k;
      uint32_t other = kids[left ? 1 : 0];
      if (k.kind != V_ERROR)
        return emit(c, op == OP_EQ ? OP_EQ_CONST : OP_NE_CONST, e->pos, &other, 1, 0, k);
    }
  }
  if (op == OP_IN && is_const(c, kids[1])) {
    value k = NODES(c)[kids[1]].k;
    if (k.kind == V_LIST || k.kind == V_MAP) {
      uint32_t set = make_set(c, &k, e->pos);
      if (c->failed) return NONE;
      return emit(c, OP_IN_CONST, e->pos, kids, 1, set, k);
    }
  }
  return emit(c, op, e->pos, kids, nk, 0, value_null());
}

/* ---- macros and the cel.* forms ---- */

static int scope_push(compiler *c, const char *name, uint32_t len, uint32_t *slot) {
  scope_var v = {name, len, c->depth};
  if (vec_push(c, &c->scope, &v, sizeof v)) return -1;
  *slot = c->depth++;
  if (c->depth > c->max_slots) c->max_slots = c->depth;
  return 0;
}

static void scope_pop(compiler *c) {
  c->scope.n--;
  c->depth--;
}

/* Whether node i is a plain reference (a variable, a constant, an outer
 * slot, fields selected from one) that does not read slots >= slot. */
static int plain_ref(compiler *c, uint32_t i, uint32_t slot) {
  const pnode *n = &NODES(c)[i];
  switch (n->op) {
    case OP_CONST:
    case OP_VAR:
    case OP_QVAR:
      return 1;
    case OP_SLOT:
      return n->aux < slot;
    case OP_SELECT:
      return plain_ref(c, KIDS(c)[n->kids], slot);
    default:
      return 0;
  }
}

/* `LIST.exists(x, R.startsWith(x))` (or endsWith, contains) over a constant
 * list of strings, R a plain reference: the node becomes OP_EXISTS_LIT,
 * which tests R against all the strings in one pass. Anything the
 * specialization does not cover at run time (R not a string, an error, a
 * cost limit close by) still runs the general loop on the same node. */
static void specialize_exists(compiler *c, uint32_t node, uint32_t slot) {
  static const struct {
    const char *name;
    uint8_t kind, anchors;
  } preds[] = {{"startsWith", PLIT_STARTS, LIT_START},
               {"endsWith", PLIT_ENDS, LIT_END},
               {"contains", PLIT_CONTAINS, 0}};
  pnode *n = &NODES(c)[node];
  if (n->nkids != 2) return;
  const pnode *range = &NODES(c)[KIDS(c)[n->kids]];
  const pnode *body = &NODES(c)[KIDS(c)[n->kids + 1]];
  if (range->op != OP_CONST || range->k.kind != V_LIST || body->op != OP_CALL || body->nkids != 2)
    return;
  const pcall *call = &((const pcall *)c->calls.v)[body->aux];
  const pnode *arg = &NODES(c)[KIDS(c)[body->kids + 1]];
  if (call->ncand != 1 || !call->cand[0]->receiver || call->cand[0]->kinds[0] != V_STRING ||
      call->cand[0]->kinds[1] != V_STRING || arg->op != OP_SLOT || arg->aux != slot ||
      !plain_ref(c, KIDS(c)[body->kids], slot))
    return;
  int which = -1;
  for (int i = 0; i < 3; i++)
    if (name_is(call->name, call->name_len, preds[i].name)) which = i;
  if (which < 0) return;
  const value *list = &range->k;
  lit *lits = malloc(((size_t)list->n + 1) * sizeof *lits);
  if (!lits) return;
  for (uint32_t i = 0; i < list->n; i++) {
    if (list->items[i].kind != V_STRING) {
      free(lits);
      return;
    }
    lits[i] = (lit){list->items[i].s, list->items[i].n, preds[which].anchors};
  }
  const litset *set = litset_build(c->mem, lits, list->n, 0);
  free(lits);
  if (!set) return; /* too big for the tables: the general loop it is */
  plits pl = {set, preds[which].kind};
  if (vec_push(c, &c->lits, &pl, sizeof pl)) return;
  n = &NODES(c)[node];
  n->op = OP_EXISTS_LIT;
  n->fn = eval_op_fn(OP_EXISTS_LIT);
  n->reserved2 = c->lits.n - 1;
}

static uint32_t compile_macro(compiler *c, const ast *e) {
  static const uint8_t ops[] = {OP_ALL, OP_EXISTS, OP_EXISTS_ONE, OP_MAP_MACRO, OP_FILTER};
  uint32_t kids[3];
  kids[0] = compile(c, e->target);
  if (kids[0] == NONE) return NONE;
  uint32_t slot;
  if (scope_push(c, e->name, e->name_len, &slot)) return NONE;
  uint32_t nk = 1;
  for (uint32_t i = 0; i < e->nargs && i < 2; i++) {
    kids[nk] = compile(c, e->args[i]);
    if (kids[nk++] == NONE) return NONE;
  }
  scope_pop(c);
  if (e->macro > M_FILTER) {
    fail_at(c, e->pos, "unknown macro");
    return NONE;
  }
  uint32_t r = emit(c, ops[e->macro], e->pos, kids, nk, slot, value_null());
  if (r != NONE && e->macro == M_EXISTS) specialize_exists(c, r, slot);
  return r;
}

/* The macros the parser leaves as calls: CEL's two-variable comprehensions
 * (`all`, `exists`, `existsOne`, `transformList`, `transformMap` with an
 * index/key and a value variable) and `existsOne` with one variable.
 * Returns the opcode and sets *two, or returns 0 when e is an ordinary call. */
static uint8_t call_macro(const ast *e, int *two) {
  static const struct {
    const char *name;
    uint8_t op;
    uint8_t min_args, max_args; /* with both variables */
  } macros[] = {
      {"all", OP_ALL, 3, 3},
      {"exists", OP_EXISTS, 3, 3},
      {"existsOne", OP_EXISTS_ONE, 3, 3},
      {"exists_one", OP_EXISTS_ONE, 3, 3},
      {"transformList", OP_MAP_MACRO, 3, 4},
      {"transformMap", OP_TRANSFORM_MAP, 3, 4},
  };
  if (!e->target || e->nargs < 2 || e->args[0]->kind != A_IDENT) return 0;
  if (e->nargs == 2 && name_is(e->name, e->name_len, "existsOne")) {
    *two = 0;
    return OP_EXISTS_ONE;
  }
  if (e->args[1]->kind != A_IDENT) return 0;
  for (size_t i = 0; i < sizeof macros / sizeof macros[0]; i++)
    if (name_is(e->name, e->name_len, macros[i].name) && e->nargs >= macros[i].min_args &&
        e->nargs <= macros[i].max_args) {
      *two = 1;
      return macros[i].op;
    }
  return 0;
}

/* target.macro(var[, var2], [filter,] body) from a call node. */
static uint32_t compile_call_macro(compiler *c, const ast *e, uint8_t op, int two) {
  uint32_t kids[3];
  kids[0] = compile(c, e->target);
  if (kids[0] == NONE) return NONE;
  uint32_t nvars = two ? 2 : 1, slot, slot2;
  if (scope_push(c, e->args[0]->name, e->args[0]->name_len, &slot)) return NONE;
  if (two && scope_push(c, e->args[1]->name, e->args[1]->name_len, &slot2)) return NONE;
  uint32_t rest = e->nargs - nvars; /* 1: body; 2: filter, body */
  uint32_t nk = 1;
  kids[nk] = compile(c, e->args[e->nargs - 1]);
  if (kids[nk++] == NONE) return NONE;
  if (rest == 2) {
    kids[nk] = compile(c, e->args[nvars]);
    if (kids[nk++] == NONE) return NONE;
  }
  for (uint32_t i = 0; i < nvars; i++) scope_pop(c);
  uint32_t r = emit(c, op, e->pos, kids, nk, slot, value_null());
  if (r != NONE) NODES(c)[r].flags = (uint8_t)two;
  return r;
}

/* cel.bind(var, init, body) */
static uint32_t compile_bind(compiler *c, const ast *e) {
  const ast *var = e->args[0];
  uint32_t kids[2];
  kids[0] = compile(c, e->args[1]);
  if (kids[0] == NONE) return NONE;
  uint32_t slot;
  if (scope_push(c, var->name, var->name_len, &slot)) return NONE;
  kids[1] = compile(c, e->args[2]);
  scope_pop(c);
  if (kids[1] == NONE) return NONE;
  return emit(c, OP_BIND, e->pos, kids, 2, slot, value_null());
}

/* cel.block([e0, e1, ...], result): entry i may use cel.index(j) for j < i. */
static uint32_t compile_block(compiler *c, const ast *e) {
  const ast *list = e->args[0];
  uint32_t n = list->nargs;
  uint32_t *kids = malloc(((size_t)n + 1) * sizeof *kids);
  if (!kids) {
    fail_nomem(c, e->pos);
    return NONE;
  }
  uint32_t saved_base = c->block_base, saved_count = c->block_count;
  int saved_in = c->in_block;
  uint32_t base = c->depth;
  c->depth += n;
  if (c->depth > c->max_slots) c->max_slots = c->depth;
  c->block_base = base;
  c->in_block = 1;
  uint32_t r = NONE;
  for (uint32_t i = 0; i < n; i++) {
    c->block_count = i;
    kids[i] = compile(c, list->args[i]);
    if (kids[i] == NONE) goto out;
  }
  c->block_count = n;
  kids[n] = compile(c, e->args[1]);
  if (kids[n] == NONE) goto out;
  r = emit(c, OP_BLOCK, e->pos, kids, n + 1, base, value_null());
out:
  c->depth -= n;
  c->block_base = saved_base;
  c->block_count = saved_count;
  c->in_block = saved_in;
  free(kids);
  return r;
}

/* cel.index(N) inside a block */
static uint32_t compile_block_index(compiler *c, const ast *e) {
  const ast *a = e->args[0];
  if (!c->in_block || a->kind != A_LIT || a->lit.kind != V_INT || a->lit.i < 0 ||
      (uint64_t)a->lit.i >= c->block_count) {
    fail_at(c, e->pos, "cel.index() needs a constant index of an earlier cel.block entry");
    return NONE;
  }
  return emit(c, OP_SLOT, e->pos, NULL, 0, c->block_base + (uint32_t)a->lit.i, value_null());
}

/* ---- the walk ---- */

static uint32_t compile_call(compiler *c, const ast *e, mark m) {
  uint8_t op;
  if (operator_of(e, &op)) return compile_operator(c, e, op, m);

  int two;
  uint8_t mop = call_macro(e, &two);
  if (mop) return compile_call_macro(c, e, mop, two);
  if (!e->target) {
    if (name_is(e->name, e->name_len, "dyn") && e->nargs == 1) return compile(c, e->args[0]);
  } else {
    /* A namespaced function (`math.greatest(...)`, `cel.bind(...)`) when the
     * target is a plain name chain that is not a comprehension variable. */
    const ast *comps[MAX_CHAIN];
    uint32_t k = ast_path(e->target, comps, MAX_CHAIN);
    if (k && !scope_find(c, comps[0]->name, comps[0]->name_len)) {
      char buf[1024];
      size_t l = join_name(buf, sizeof buf - 1, NULL, 0, comps, k);
      if (l && l + 1 + e->name_len < sizeof buf) {
        buf[l++] = '.';
        memcpy(buf + l, e->name, e->name_len);
        l += e->name_len;
        if (name_is(buf, l, "cel.bind") && e->nargs == 3 && e->args[0]->kind == A_IDENT)
          return compile_bind(c, e);
        if (name_is(buf, l, "cel.block") && e->nargs == 2 && e->args[0]->kind == A_LIST)
          return compile_block(c, e);
        if (name_is(buf, l, "cel.index") && e->nargs == 1) return compile_block_index(c, e);
        const builtin *first;
        if (builtin_lookup(buf, (uint32_t)l, &first)) {
          uint32_t kids[64];
          if (e->nargs > 64) {
            fail_at(c, e->pos, "too many arguments");
            return NONE;
          }
          if (compile_args(c, NULL, e->args, e->nargs, kids) == NONE) return NONE;
          return emit_call(c, buf, l, 0, kids, e->nargs, e->pos, m);
        }
      }
    }
  }
  uint32_t nk = e->nargs + (e->target ? 1 : 0);
  uint32_t local[16];
  uint32_t *kids = nk <= 16 ? local : malloc((size_t)nk * sizeof *kids);
  if (!kids) {
    fail_nomem(c, e->pos);
    return NONE;
  }
  uint32_t r = NONE;
  if (compile_args(c, e->target, e->args, e->nargs, kids) != NONE)
    r = emit_call(c, e->name, e->name_len, e->target != NULL, kids, nk, e->pos, m);
  if (kids != local) free(kids);
  return r;
}

static uint32_t compile_select(compiler *c, const ast *e, mark m) {
  if (!e->test_only) {
    const ast *comps[MAX_CHAIN];
    uint32_t k = ast_path(e, comps, MAX_CHAIN);
    if (k) {
      const scope_var *v = scope_find(c, comps[0]->name, comps[0]->name_len);
      if (!v) return compile_name(c, comps, k);
      uint32_t node = emit(c, OP_SLOT, comps[0]->pos, NULL, 0, v->slot, value_null());
      return emit_select_rest(c, node, comps, 1, k);
    }
  }
  if (e->test_only && e->target->kind == A_IDENT &&
      !scope_find(c, e->target->name, e->target->name_len) &&
      claimed(c, e->target->name, e->target->name_len))
    return emit_claimed(c, e->target, e, 1); /* has(R.F) */
  uint32_t t = compile(c, e->target);
  if (t == NONE) return NONE;
  const char *s = own_str(c, e->name, e->name_len, e->pos);
  if (!s) return NONE;
  return emit_foldable(c, e->test_only ? OP_HAS : OP_SELECT, e->pos, &t, 1, 0,
                       value_str(s, e->name_len), m);
}

static uint32_t compile_literal_list(compiler *c, const ast *e, uint8_t op, mark m) {
  uint32_t local[16];
  uint32_t *kids = e->nargs <= 16 ? local : malloc((size_t)e->nargs * sizeof *kids);
  if (!kids) {
    fail_nomem(c, e->pos);
    return NONE;
  }
  uint32_t r = NONE;
  if (compile_args(c, NULL, e->args, e->nargs, kids) != NONE)
    r = emit_foldable(c, op, e->pos, kids, e->nargs, 0, value_null(), m);
  if (kids != local) free(kids);
  return r;
}

static uint32_t compile(compiler *c, const ast *e) {
  if (c->failed) return NONE;
  mark m = mark_here(c);
  switch ((ast_kind)e->kind) {
    case A_LIT: {
      value k;
      if (value_copy_deep(c->mem, &e->lit, &k)) {
        fail_nomem(c, e->pos);
        return NONE;
      }
      return emit_const(c, e->pos, k);
    }
    case A_IDENT: {
      const scope_var *v = scope_find(c, e->name, e->name_len);
      if (v) return emit(c, OP_SLOT, e->pos, NULL, 0, v->slot, value_null());
      const ast *comps[1] = {e};
      return compile_name(c, comps, 1);
    }
    case A_SELECT:
      return compile_select(c, e, m);
    case A_CALL:
      return compile_call(c, e, m);
    case A_LIST:
      return compile_literal_list(c, e, OP_LIST, m);
    case A_MAP:
      return compile_literal_list(c, e, OP_MAP, m);
    case A_COMPREHENSION:
      return compile_macro(c, e);
  }
  fail_at(c, e->pos, "internal error: unknown syntax node");
  return NONE;
}

/* ---- the program ---- */

static void compiler_free(compiler *c) {
  free(c->nodes.v);
  free(c->kids.v);
  free(c->calls.v);
  free(c->quals.v);
  free(c->sets.v);
  free(c->lits.v);
  free(c->unknown.v);
  free(c->scope.v);
}

/* Moves a growable array into the program's arena. */
static const void *settle(compiler *c, const vec *v, size_t size) {
  if (!v->n) return NULL;
  void *p = arena_memdup(c->mem, v->v, (size_t)v->n * size);
  if (!p) fail_nomem(c, 0);
  return p;
}

int expr_compile_ast(const ast *root, const char *src, size_t len, const expr_opts *opts,
                     expr_program **out, expr_error *err) {
  expr_error scratch_err;
  if (!err) err = &scratch_err;
  *out = NULL;
  expr_program *p = calloc(1, sizeof *p);
  if (!p) {
    expr_error_at(err, NULL, 0, 0, "out of memory while compiling");
    return -1;
  }
  arena_init(&p->mem, NULL, 0, 0);
  /* A bundle keeps one program per rule and let, most a few hundred bytes:
   * a 4 KiB first chunk each made 100,000 rules cost 750 MB. */
  arena_first_chunk(&p->mem, 512);

  compiler c;
  memset(&c, 0, sizeof c);
  c.src = src;
  c.len = len;
  c.opts = opts;
  c.err = err;
  c.mem = &p->mem;
  uint32_t r = compile(&c, root);

  if (r != NONE && !c.failed) {
    p->nodes = settle(&c, &c.nodes, sizeof(pnode));
    p->nnodes = c.nodes.n;
    p->root = r;
    p->kids = settle(&c, &c.kids, sizeof(uint32_t));
    p->calls = settle(&c, &c.calls, sizeof(pcall));
    p->ncalls = c.calls.n;
    p->quals = settle(&c, &c.quals, sizeof(pqual));
    p->sets = settle(&c, &c.sets, sizeof(pset));
    p->lits = settle(&c, &c.lits, sizeof(plits));
    p->unknown_fns = settle(&c, &c.unknown, sizeof(const char *));
    p->nunknown = c.unknown.n;
    p->nslots = c.max_slots;
    char *s = arena_strndup(&p->mem, src ? src : "", src ? len : 0);
    if (!s) fail_nomem(&c, 0);
    p->src = s;
    p->src_len = len;
  }
  if (c.failed || r == NONE) {
    program_release_calls(c.calls.v, c.calls.n);
    compiler_free(&c);
    arena_free(&p->mem);
    free(p);
    return -1;
  }
  compiler_free(&c);
  *out = p;
  return 0;
}

int expr_compile(const char *src, size_t len, const expr_opts *opts, expr_program **out,
                 expr_error *err) {
  expr_error scratch_err;
  if (!err) err = &scratch_err;
  *out = NULL;
  arena tree;
  arena_init(&tree, NULL, 0, 0);
  ast *root;
  if (expr_parse(&tree, src, len, opts, &root, err)) {
    arena_free(&tree);
    return -1;
  }
  int rc = expr_compile_ast(root, src, len, opts, out, err);
  arena_free(&tree);
  return rc;
}
