/* analyze.c — what the policy compiler reads from an expression's AST.
 *
 * The expression compiler (src/expr/) turns a condition into a program; the
 * policy compiler also needs to know things about its shape: which names it
 * reads (lets, constants, `model`), its `&&`-joined parts (for the rule
 * index and the shadowed-rule lint), and a canonical text of a part so two
 * parts can be compared. These walks run on the AST from expr_parse, once per
 * load; nothing here runs while deciding.
 *
 * And an upper bound of how deep a let's value nests and how deep its
 * evaluation recurses, through the lets it reads (ast_depths).
 *
 * Recursion is bounded by the parser's depth limit (expr_opts.max_depth). */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "expr/lib.h"
#include "policy/internal.h"

#define MAX_SCOPE 256

typedef struct walk {
  ident_fn fn;
  void *user;
  const ast *bound[MAX_SCOPE];
  uint32_t nbound;
} walk;

static int is_bound(const walk *w, const ast *id) {
  for (uint32_t i = w->nbound; i-- > 0;)
    if (w->bound[i]->name_len == id->name_len &&
        memcmp(w->bound[i]->name, id->name, id->name_len) == 0)
      return 1;
  return 0;
}

static int name_is(const ast *e, const char *s) {
  size_t n = strlen(s);
  return e->name && e->name_len == n && memcmp(e->name, s, n) == 0;
}

static void free_idents(walk *w, const ast *e) {
  if (!e) return;
  switch (e->kind) {
    case A_LIT:
      return;
    case A_IDENT:
      if (!is_bound(w, e)) w->fn(w->user, e);
      return;
    case A_SELECT:
      free_idents(w, e->target);
      return;
    case A_CALL:
      /* cel.bind(v, init, body): v is bound in body only. */
      if (e->target && e->target->kind == A_IDENT && name_is(e->target, "cel") &&
          name_is(e, "bind") && e->nargs == 3 && e->args[0]->kind == A_IDENT &&
          !is_bound(w, e->target)) {
        free_idents(w, e->args[1]);
        if (w->nbound < MAX_SCOPE) {
          w->bound[w->nbound++] = e->args[0];
          free_idents(w, e->args[2]);
          w->nbound--;
        }
        return;
      }
      free_idents(w, e->target);
      for (uint32_t i = 0; i < e->nargs; i++) free_idents(w, e->args[i]);
      return;
    case A_LIST:
    case A_MAP:
      for (uint32_t i = 0; i < e->nargs; i++) free_idents(w, e->args[i]);
      return;
    case A_COMPREHENSION: {
      free_idents(w, e->target);
      if (w->nbound >= MAX_SCOPE) return;
      /* The iteration variable is a name on the node itself. */
      ast v = {0};
      v.kind = A_IDENT;
      v.name = e->name;
      v.name_len = e->name_len;
      w->bound[w->nbound++] = &v;
      for (uint32_t i = 0; i < e->nargs; i++) free_idents(w, e->args[i]);
      w->nbound--;
      return;
    }
  }
}

void ast_free_idents(const ast *e, ident_fn fn, void *user) {
  walk w;
  w.fn = fn;
  w.user = user;
  w.nbound = 0;
  free_idents(&w, e);
}

static uint32_t conjuncts(const ast *e, const ast **out, uint32_t max, uint32_t n) {
  if (e->kind == A_CALL && !e->target && e->nargs == 2 && name_is(e, "_&&_")) {
    n = conjuncts(e->args[0], out, max, n);
    return conjuncts(e->args[1], out, max, n);
  }
  if (n < max) out[n] = e;
  return n + 1;
}

uint32_t ast_conjuncts(const ast *e, const ast **out, uint32_t max) {
  return conjuncts(e, out, max, 0);
}

bool ast_is_true(const ast *e) { return e->kind == A_LIT && e->lit.kind == V_BOOL && e->lit.b; }

bool ast_is_scalar_lit(const ast *e) {
  if (e->kind != A_LIT) return false;
  switch (e->lit.kind) {
    case V_NULL:
    case V_BOOL:
    case V_INT:
    case V_UINT:
    case V_DOUBLE:
    case V_STRING:
    case V_BYTES:
      return true;
    default:
      return false;
  }
}

/* ---- canonical rendering ---- */

static void put(json_buf *b, const char *s) { json_buf_put(b, s, strlen(s)); }

static void render_lit(json_buf *b, const value *v) {
  char tmp[64];
  switch (v->kind) {
    case V_NULL:
      put(b, "null");
      return;
    case V_BOOL:
      put(b, v->b ? "true" : "false");
      return;
    case V_INT:
      snprintf(tmp, sizeof tmp, "%" PRId64, v->i);
      put(b, tmp);
      return;
    case V_UINT:
      snprintf(tmp, sizeof tmp, "%" PRIu64 "u", v->u);
      put(b, tmp);
      return;
    case V_DOUBLE:
      put(b, "d:");
      json_write_double(b, v->d);
      return;
    case V_STRING:
      json_write_string(b, v->s, v->n);
      return;
    case V_BYTES:
      put(b, "b");
      json_write_string(b, v->s, v->n);
      return;
    default:
      snprintf(tmp, sizeof tmp, "<kind %d>", v->kind);
      put(b, tmp);
  }
}

static void render(json_buf *b, const ast *e) {
  switch (e->kind) {
    case A_LIT:
      render_lit(b, &e->lit);
      return;
    case A_IDENT:
      json_buf_put(b, e->name, e->name_len);
      return;
    case A_SELECT:
      put(b, e->test_only ? "(has " : "(. ");
      render(b, e->target);
      json_buf_putc(b, ' ');
      json_buf_put(b, e->name, e->name_len);
      json_buf_putc(b, ')');
      return;
    case A_CALL:
      json_buf_putc(b, '(');
      json_buf_put(b, e->name, e->name_len);
      if (e->target) {
        put(b, "@ ");
        render(b, e->target);
      }
      for (uint32_t i = 0; i < e->nargs; i++) {
        json_buf_putc(b, ' ');
        render(b, e->args[i]);
      }
      json_buf_putc(b, ')');
      return;
    case A_LIST:
    case A_MAP:
      json_buf_putc(b, e->kind == A_LIST ? '[' : '{');
      for (uint32_t i = 0; i < e->nargs; i++) {
        if (i) json_buf_putc(b, ' ');
        render(b, e->args[i]);
      }
      json_buf_putc(b, e->kind == A_LIST ? ']' : '}');
      return;
    case A_COMPREHENSION: {
      static const char *const names[] = {"all", "exists", "exists_one", "map", "filter"};
      json_buf_putc(b, '(');
      put(b, e->macro < 5 ? names[e->macro] : "macro");
      json_buf_putc(b, ' ');
      json_buf_put(b, e->name, e->name_len);
      json_buf_putc(b, ' ');
      render(b, e->target);
      for (uint32_t i = 0; i < e->nargs; i++) {
        json_buf_putc(b, ' ');
        render(b, e->args[i]);
      }
      json_buf_putc(b, ')');
      return;
    }
  }
}

char *ast_render(arena *a, const ast *e) {
  json_buf b;
  json_buf_init(&b, NULL);
  render(&b, e);
  char *out = b.oom ? NULL : arena_strndup(a, b.data ? b.data : "", b.len);
  json_buf_free(&b);
  return out;
}

/* ---- how deep an expression nests and evaluates (the let bounds) ----
 *
 * A let's value is built at run time from the lets it reads, so a chain of
 * lets can nest lists 120 levels a let and build a value 120,000 levels
 * deep — or evaluate one let inside the next 200,000 times — though each
 * expression is within the parser's depth limit. Both are bounded at load
 * (strategy.c); these are the upper bounds that are checked:
 *
 *   nest: how many lists and maps the value may nest. A list or map adds
 *     one to its deepest element; a let adds its own nest; a built-in adds
 *     at most LIB_MAX_WRAP (lib.h) to its deepest argument; an operator
 *     (`_+_`, `_[_]`, `_?_:_`, ...) adds none; a comprehension's value is
 *     its range or one list around its body, its variable as deep as the
 *     range. Other names (the request's fields) count 0: the request's own
 *     depth is bounded where it is read.
 *   eval: how deep the evaluator recurses: one a level of the tree, and a
 *     let read POLICY_LET_READ_DEPTH plus that let's own eval (its frames
 *     and the engine's between them).
 *
 * Over-estimates are fine (they only make a limit reached sooner); an
 * under-estimate would let a deep value through. */
typedef struct dscope {
  const char *name;
  uint32_t name_len;
  uint32_t nest;
} dscope;

typedef struct dwalk {
  let_depth_fn fn;
  void *user;
  dscope bound[MAX_SCOPE];
  uint32_t nbound;
} dwalk;

static void depths(dwalk *w, const ast *e, uint32_t *nest, uint32_t *ev);

static void bind_depths(dwalk *w, const char *name, uint32_t len, uint32_t nest, const ast *body,
                        uint32_t *bn, uint32_t *be) {
  *bn = *be = 0;
  if (w->nbound >= MAX_SCOPE) { /* the parser's depth limit keeps scopes far fewer */
    depths(w, body, bn, be);
    return;
  }
  w->bound[w->nbound].name = name;
  w->bound[w->nbound].name_len = len;
  w->bound[w->nbound].nest = nest;
  w->nbound++;
  depths(w, body, bn, be);
  w->nbound--;
}

static uint32_t max32(uint32_t a, uint32_t b) { return a > b ? a : b; }

static void depths(dwalk *w, const ast *e, uint32_t *nest, uint32_t *ev) {
  *nest = 0;
  *ev = 1;
  if (!e) return;
  uint32_t n, v, mn = 0, mv = 0;
  switch (e->kind) {
    case A_LIT:
      return;
    case A_IDENT:
      for (uint32_t i = w->nbound; i-- > 0;)
        if (w->bound[i].name_len == e->name_len &&
            memcmp(w->bound[i].name, e->name, e->name_len) == 0) {
          *nest = w->bound[i].nest;
          return;
        }
      if (w->fn(w->user, e, &n, &v)) {
        *nest = n;
        *ev = 1 + POLICY_LET_READ_DEPTH + v;
      }
      return;
    case A_SELECT:
      depths(w, e->target, nest, &v);
      *ev = 1 + v;
      return;
    case A_CALL: {
      /* cel.bind(v, init, body): v is as deep as init, in body only */
      if (e->target && e->target->kind == A_IDENT && name_is(e->target, "cel") &&
          name_is(e, "bind") && e->nargs == 3 && e->args[0]->kind == A_IDENT) {
        uint32_t in, iv;
        depths(w, e->args[1], &in, &iv);
        bind_depths(w, e->args[0]->name, e->args[0]->name_len, in, e->args[2], &n, &v);
        *nest = n;
        *ev = 1 + max32(iv, v);
        return;
      }
      if (e->target) depths(w, e->target, &mn, &mv);
      for (uint32_t i = 0; i < e->nargs; i++) {
        depths(w, e->args[i], &n, &v);
        mn = max32(mn, n);
        mv = max32(mv, v);
      }
      /* operators are named by their signs (`_+_`, `@in`, `!_`), built-ins by words */
      int op = e->name_len > 0 && !isalpha((unsigned char)e->name[0]);
      *nest = op ? mn : mn + LIB_MAX_WRAP;
      *ev = 1 + mv;
      return;
    }
    case A_LIST:
    case A_MAP:
      for (uint32_t i = 0; i < e->nargs; i++) {
        depths(w, e->args[i], &n, &v);
        mn = max32(mn, n);
        mv = max32(mv, v);
      }
      *nest = 1 + mn;
      *ev = 1 + mv;
      return;
    case A_COMPREHENSION: {
      uint32_t rn, rv;
      depths(w, e->target, &rn, &rv);
      mv = rv;
      for (uint32_t i = 0; i < e->nargs; i++) {
        bind_depths(w, e->name, e->name_len, rn, e->args[i], &n, &v);
        mn = max32(mn, n);
        mv = max32(mv, v);
      }
      *nest = max32(rn, 1 + mn);
      *ev = 1 + mv;
      return;
    }
  }
}

void ast_depths(const ast *e, let_depth_fn fn, void *user, uint32_t *nest, uint32_t *eval) {
  dwalk w;
  w.fn = fn;
  w.user = user;
  w.nbound = 0;
  depths(&w, e, nest, eval);
}
