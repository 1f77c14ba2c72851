/* strategy_inline.c — a strategy's constants written into the expressions
 * that read them, as CEL literals, so that the expression compiler folds
 * them (strategy_program_of); with STRATEGY_LAZY, from the tree already
 * parsed rather than from text. Used by strategy.c for every let, rule and
 * limit program.
 *
 * Not here: what an expression is compiled with, and its errors (strategy.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/utf8.h"
#include "expr/expr.h"
#include "policy/internal.h"
#include "policy/strategy_cc.h"

/* ---- constants, inlined ----
 *
 * expr_compile has no way to bind names to values at compile time, so a
 * constant would be a variable looked up on every evaluation, and `x in
 * scanners` a linear scan. Instead the policy compiler writes each constant
 * the expression reads (a free identifier, as the AST says: not a field name,
 * not a comprehension variable) as a CEL literal in its place, and compiles
 * that text: the expression compiler then folds it, and a list on the right
 * of `in` becomes its prebuilt hash set. Constants shadow context fields, so
 * the two readings agree. Errors are still reported against the text as
 * written (it is compiled first); when the inlined text does not compile
 * (too long, say), the program keeps reading constants through the
 * activation, as the engine's lookup also provides them. */

static void put_cel_string(json_buf *b, const char *s, size_t n) {
  json_buf_putc(b, '"');
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    char esc[8];
    if (ch == '"' || ch == '\\') {
      json_buf_putc(b, '\\');
      json_buf_putc(b, (char)ch);
    } else if (ch < 0x20 || ch == 0x7f) {
      snprintf(esc, sizeof esc, "\\x%02x", ch);
      json_buf_put(b, esc, 4);
    } else {
      json_buf_putc(b, (char)ch); /* UTF-8 passes through */
    }
  }
  json_buf_putc(b, '"');
}

/* A CEL literal for v; -1 when v has none (NaN, infinities). */
static int put_cel_literal(json_buf *b, const value *v) {
  char tmp[64];
  switch (v->kind) {
    case V_NULL:
      json_buf_put(b, "null", 4);
      return 0;
    case V_BOOL:
      json_buf_put(b, v->b ? "true" : "false", v->b ? 4 : 5);
      return 0;
    case V_INT:
      snprintf(tmp, sizeof tmp, "%lld", (long long)v->i);
      json_buf_put(b, tmp, strlen(tmp));
      return 0;
    case V_UINT:
      snprintf(tmp, sizeof tmp, "%lluu", (unsigned long long)v->u);
      json_buf_put(b, tmp, strlen(tmp));
      return 0;
    case V_DOUBLE: {
      if (v->d != v->d || v->d - v->d != 0) return -1;
      size_t at = b->len;
      json_write_double(b, v->d);
      if (b->oom) return -1;
      int frac = 0;
      for (size_t i = at; i < b->len; i++)
        if (b->data[i] == '.' || b->data[i] == 'e' || b->data[i] == 'E') frac = 1;
      if (!frac) json_buf_put(b, ".0", 2); /* `1` would be an int */
      return 0;
    }
    case V_STRING:
      put_cel_string(b, v->s, v->n);
      return 0;
    case V_LIST:
      json_buf_putc(b, '[');
      for (uint32_t i = 0; i < v->n; i++) {
        if (i) json_buf_put(b, ", ", 2);
        if (put_cel_literal(b, &v->items[i])) return -1;
      }
      json_buf_putc(b, ']');
      return 0;
    case V_MAP:
      json_buf_putc(b, '{');
      for (uint32_t i = 0; i < v->n; i++) {
        if (i) json_buf_put(b, ", ", 2);
        if (put_cel_literal(b, &v->entries[i].key)) return -1;
        json_buf_put(b, ": ", 2);
        if (put_cel_literal(b, &v->entries[i].val)) return -1;
      }
      json_buf_putc(b, '}');
      return 0;
    default:
      return -1;
  }
}

typedef struct inl {
  const strategy *s;
  const char *src;
  size_t len;
  const ast *ids[256];
  uint32_t n;
  int overflow;
} inl;

static void on_const_ident(void *user, const ast *id) {
  inl *x = user;
  if (!value_map_get(&x->s->constants, id->name, id->name_len)) return;
  if (x->n == 256) {
    x->overflow = 1;
    return;
  }
  x->ids[x->n++] = id;
}

/* ---- the same inlining without parsing the text again (STRATEGY_LAZY) ----
 *
 * Compiling on first use, the inlined text's parse (its literals lexed one
 * by one) was a third of compiling an expression that reads a constant. The
 * tree the parser would build from `(<literal>)` is the value's own shape —
 * a list or map node over literal nodes, parentheses leaving no node — so
 * the tree already parsed is copied with each constant's node put in place
 * of its identifier, and compiled with the inlined text as its source. The
 * program is the one the text gives (only the node positions, which only
 * compile errors show, differ). Values whose literal the parser might read
 * otherwise, or reject, take the text: doubles (a printed double is read
 * back by another routine), strings with control bytes or invalid UTF-8,
 * and nesting deep enough to near the parser's limit. tests/engine/
 * test_lazy.c checks that lazy and eager decisions are the same. */

#define SPLICE_MAX_DEPTH 100 /* tree height plus constant nesting; the parser allows 250 */

/* The parser's tree for the literal of v at pos, or NULL (the text then). */
static ast *const_tree(arena *a, const value *v, uint32_t pos, int depth) {
  if (depth > SPLICE_MAX_DEPTH) return NULL;
  ast *n = arena_zalloc(a, sizeof *n);
  if (!n) return NULL;
  n->pos = pos;
  n->kind = A_LIT;
  switch (v->kind) {
    case V_NULL:
      n->lit = value_null();
      return n;
    case V_BOOL:
      n->lit = value_bool(v->b);
      return n;
    case V_INT:
      n->lit = value_int(v->i);
      return n;
    case V_UINT:
      n->lit = value_uint(v->u);
      return n;
    case V_STRING: {
      int ascii = 0;
      if (utf8_validate(v->s, v->n, &ascii) != v->n) return NULL;
      for (uint32_t i = 0; i < v->n; i++)
        if ((unsigned char)v->s[i] < 0x20 || v->s[i] == 0x7f) return NULL;
      n->lit = value_str(v->s, v->n);
      if (ascii) n->lit.flags |= VF_ASCII;
      return n;
    }
    case V_LIST:
    case V_MAP: {
      uint32_t k = v->kind == V_LIST ? v->n : 2 * v->n;
      n->kind = v->kind == V_LIST ? A_LIST : A_MAP;
      n->nargs = k;
      n->args = k ? arena_alloc(a, k * sizeof *n->args) : NULL;
      if (k && !n->args) return NULL;
      for (uint32_t i = 0; i < v->n; i++) {
        if (v->kind == V_LIST) {
          if (!(n->args[i] = const_tree(a, &v->items[i], pos, depth + 1))) return NULL;
        } else if (!(n->args[2 * i] = const_tree(a, &v->entries[i].key, pos, depth + 1)) ||
                   !(n->args[2 * i + 1] = const_tree(a, &v->entries[i].val, pos, depth + 1))) {
          return NULL;
        }
      }
      return n;
    }
    default:
      return NULL;
  }
}

static int tree_height(const ast *e) {
  if (!e) return 0;
  int h = tree_height(e->target);
  for (uint32_t i = 0; i < e->nargs; i++) {
    int k = tree_height(e->args[i]);
    if (k > h) h = k;
  }
  return h + 1;
}

/* A copy of e with ids[i] replaced by with[i]; NULL when out of memory. */
static ast *splice(arena *a, const ast *e, const ast *const *ids, ast *const *with, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (ids[i] == e) return with[i];
  ast *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  *c = *e;
  if (e->target && !(c->target = splice(a, e->target, ids, with, n))) return NULL;
  if (e->nargs) {
    if (!(c->args = arena_alloc(a, e->nargs * sizeof *c->args))) return NULL;
    for (uint32_t i = 0; i < e->nargs; i++)
      if (!(c->args[i] = splice(a, e->args[i], ids, with, n))) return NULL;
  }
  return c;
}

/* The program of tree with x's constants put in (text: the inlined source);
 * 1 when the text is to be compiled instead. */
static int compile_spliced(const inl *x, const ast *tree, const char *text, size_t len,
                           const expr_opts *opts, expr_program **out) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  ast *with[256];
  int height = tree_height(tree), rc = 1;
  uint32_t i = 0;
  for (; i < x->n; i++) {
    const ast *id = x->ids[i];
    const value *v = value_map_get(&x->s->constants, id->name, id->name_len);
    if (!v || !(with[i] = const_tree(&a, v, id->pos, height))) break;
  }
  ast *root = i == x->n ? splice(&a, tree, x->ids, with, x->n) : NULL;
  expr_error e;
  if (root && expr_compile_ast(root, text, len, opts, out, &e) == 0) rc = 0;
  arena_free(&a);
  return rc;
}

/* The program of text (whose tree is `tree`) with the constants of s it
 * reads inlined, or NULL (then the program reads them as variables). */
static expr_program *inline_constants(const strategy *s, const char *text, size_t len,
                                      const ast *tree, const expr_opts *opts) {
  if (!s->constants.n) return NULL;
  inl x;
  x.s = s;
  x.src = text;
  x.len = len;
  x.n = 0;
  x.overflow = 0;
  ast_free_idents(tree, on_const_ident, &x);
  if (!x.n || x.overflow) return NULL;
  /* in source order (the walk is in tree order) */
  for (uint32_t i = 1; i < x.n; i++) {
    const ast *t = x.ids[i];
    uint32_t j = i;
    while (j > 0 && x.ids[j - 1]->pos > t->pos) {
      x.ids[j] = x.ids[j - 1];
      j--;
    }
    x.ids[j] = t;
  }
  json_buf b;
  json_buf_init(&b, NULL);
  size_t at = 0;
  for (uint32_t i = 0; i < x.n; i++) {
    const ast *id = x.ids[i];
    /* the identifier as written: from its node's start (a leading '.' is
     * part of it) to the end of its name */
    size_t from = id->pos, name_at = from;
    if (name_at < len && text[name_at] == '.') {
      name_at++;
      while (name_at < len && strchr(" \t\r\n", text[name_at])) name_at++;
    }
    if (from < at || name_at + id->name_len > len ||
        memcmp(text + name_at, id->name, id->name_len) != 0) {
      json_buf_free(&b);
      return NULL;
    }
    json_buf_put(&b, text + at, id->pos - at);
    json_buf_putc(&b, '(');
    if (put_cel_literal(&b, value_map_get(&s->constants, id->name, id->name_len))) {
      json_buf_free(&b);
      return NULL;
    }
    json_buf_putc(&b, ')');
    at = name_at + id->name_len;
  }
  json_buf_put(&b, text + at, len - at);
  expr_program *p = NULL;
  expr_error e;
  /* lazily (see above): the tree with the constants put in, unless the
   * parser would refuse the text for its length (its default limit) */
  if (opts->defer_jit && !b.oom && b.len <= (opts->max_length ? opts->max_length : 100 * 1024) &&
      compile_spliced(&x, tree, b.data, b.len, opts, &p) == 0) {
    json_buf_free(&b);
    return p;
  }
  p = NULL;
  if (b.oom || expr_compile(b.data, b.len, opts, &p, &e)) p = NULL;
  json_buf_free(&b);
  return p;
}

/* The program of an expression parsed into `tree`: with its constants
 * inlined when that compiles, else as written. A text that compiles with
 * its constants inlined compiles as written too (an identifier and a
 * parenthesised literal are both operands; inlining only adds constants,
 * length and depth), so no error is lost by trying the inlined form first.
 * Returns 0, or -1 with the error in *e. */
int strategy_program_of(const strategy *s, const char *text, size_t len, const ast *tree,
                        const expr_opts *opts, expr_program **out, expr_error *e) {
  *out = inline_constants(s, text, len, tree, opts);
  if (*out) return 0;
  return expr_compile_ast(tree, text, len, opts, out, e);
}
