/* parse.c — the CEL parser: tokens in, the AST of ast.h out.
 *
 * A recursive-descent parser over CEL's grammar (cel-spec langdef "Syntax"),
 * one function a precedence level, lowest first:
 *
 *   Expr     = Or ["?" Or ":" Expr]                      right-assoc ternary
 *   Or       = And {"||" And}           And = Rel {"&&" Rel}
 *   Rel      = Add {("<"|"<="|">="|">"|"=="|"!="|"in") Add}
 *   Add      = Mul {("+"|"-") Mul}      Mul = Unary {("*"|"/"|"%") Unary}
 *   Unary    = Member | "!" {"!"} Member | "-" {"-"} Member
 *   Member   = Primary {"." NAME ["(" [Exprs] ")"] | "[" Expr "]"}
 *   Primary  = ["."] IDENT ["(" [Exprs] ")"] | "(" Expr ")"
 *            | "[" [Exprs] [","] "]" | "{" [k ":" v {"," k ":" v}] [","] "}"
 *            | LITERAL
 *
 * Operators become A_CALL nodes with CEL's canonical names (`_+_`, `!_`,
 * `_[_]`, `@in`, ...). Choices worth knowing:
 *
 * - A `-` directly before a numeric literal is part of the literal, as in
 *   CEL's INT_LIT/FLOAT_LIT; that is what lets -9223372036854775808 exist.
 *   `--1` is `-_(-1)`, and `-x` is `-_(x)`.
 * - Chains of `&&` or `||` are built as balanced trees (both operators are
 *   associative, errors included), so a rule with hundreds of conditions
 *   stays shallow for the compiler and the evaluator.
 * - Reserved words (`if`, `while`, ...) may not be identifiers but are fine
 *   as field and method names after a dot. A leading dot (`.a`, a name in
 *   the root scope) is accepted and dropped: verdict has no containers, so
 *   `.a` and `a` name the same thing.
 * - Macros (has, all, exists, exists_one, map, filter) become A_SELECT with
 *   test_only / A_COMPREHENSION nodes when their arity matches; a macro
 *   whose variable is not a simple name is an error, as in CEL.
 * - Message construction (`Foo{a: 1}`) is not part of verdict's CEL and is
 *   reported as such.
 *
 * Limits: the source length (opts->max_length) and a nesting depth
 * (opts->max_depth) that counts every level of the tree the parser builds,
 * including left-nested chains like `a.b.c` or `1 + 2 + 3`. The parser's own
 * recursion is bounded by it, and so is every later pass that walks the tree.
 *
 * Every allocation comes from the caller's arena. The first error wins:
 * after it the parser unwinds without reporting anything else. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/utf8.h"
#include "expr/expr.h"
#include "expr/lex.h"

#define DEFAULT_MAX_DEPTH 250
#define DEFAULT_MAX_LENGTH (100 * 1024)

typedef struct parser {
  arena *a;
  const char *src;
  size_t len;
  lexer lx;
  token tok;   /* the current token */
  token ahead; /* one token of lookahead, valid when has_ahead */
  int has_ahead;
  uint32_t depth, max_depth;
  expr_error *err;
  int failed;
} parser;

static void fail(parser *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(parser *p, size_t at, const char *fmt, ...) {
  if (p->failed) return;
  p->failed = 1;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (p->err) expr_error_at(p->err, p->src, p->len, at, "%s", msg);
}

/* ---- tokens ---- */

static void advance(parser *p) {
  if (p->has_ahead) {
    p->tok = p->ahead;
    p->has_ahead = 0;
  } else {
    lex_next(&p->lx, &p->tok);
  }
}

static const token *peek(parser *p) {
  if (!p->has_ahead) {
    lex_next(&p->lx, &p->ahead);
    p->has_ahead = 1;
  }
  return &p->ahead;
}

/* Reports the current token as out of place (or the lexer's error, when
 * the current token is where the lexer failed). `what` says what was
 * expected, or is NULL. */
static void unexpected(parser *p, const char *what) {
  const token *t = &p->tok;
  if (t->kind == T_ERROR) {
    fail(p, p->lx.err_pos, "%s", p->lx.err);
    return;
  }
  char found[64];
  if (t->kind == T_EOF) {
    snprintf(found, sizeof found, "end of input");
  } else {
    size_t n = t->end - t->pos;
    if (t->kind == T_STRING || t->kind == T_BYTES) {
      snprintf(found, sizeof found, "%s", lex_kind_name((tok_kind)t->kind));
    } else if (n > 24) {
      snprintf(found, sizeof found, "token '%.24s...'", p->src + t->pos);
    } else {
      snprintf(found, sizeof found, "token '%.*s'", (int)n, p->src + t->pos);
    }
  }
  if (what)
    fail(p, t->pos, "expected %s but found %s", what, found);
  else if (t->kind == T_EOF)
    fail(p, t->pos, "unexpected end of input");
  else
    fail(p, t->pos, "unexpected %s", found);
}

static int expect(parser *p, tok_kind k, const char *what) {
  if (p->tok.kind == k) {
    advance(p);
    return 0;
  }
  unexpected(p, what);
  return -1;
}

/* ---- depth ---- */

static int enter(parser *p, size_t at, uint32_t n) {
  p->depth += n;
  if (p->depth > p->max_depth) {
    fail(p, at, "expression is nested too deeply (more than %u levels)", (unsigned)p->max_depth);
    return -1;
  }
  return 0;
}

/* ---- nodes ---- */

static ast *node(parser *p, ast_kind kind, size_t pos) {
  ast *n = arena_zalloc(p->a, sizeof *n);
  if (!n) {
    fail(p, pos, "out of memory while parsing (expression too large)");
    return NULL;
  }
  n->kind = (uint8_t)kind;
  n->pos = (uint32_t)pos;
  return n;
}

/* fn is an operator name or an arena copy of a function name: NUL-terminated. */
static ast *call(parser *p, const char *fn, size_t pos, ast *target, ast **args, uint32_t nargs) {
  ast *n = node(p, A_CALL, pos);
  if (!n) return NULL;
  n->name = fn;
  n->name_len = (uint32_t)strlen(fn);
  n->target = target;
  n->args = args;
  n->nargs = nargs;
  return n;
}

static ast **args_of(parser *p, size_t pos, uint32_t n) {
  ast **v = arena_alloc(p->a, n * sizeof *v);
  if (!v) fail(p, pos, "out of memory while parsing (expression too large)");
  return v;
}

static ast *call1(parser *p, const char *fn, size_t pos, ast *x) {
  ast **v = args_of(p, pos, 1);
  if (!v) return NULL;
  v[0] = x;
  return call(p, fn, pos, NULL, v, 1);
}

static ast *call2(parser *p, const char *fn, size_t pos, ast *x, ast *y) {
  ast **v = args_of(p, pos, 2);
  if (!v) return NULL;
  v[0] = x;
  v[1] = y;
  return call(p, fn, pos, NULL, v, 2);
}

/* A growable array of nodes in the arena (doubling; old copies are left
 * behind, which costs at most the final size again). */
typedef struct nodevec {
  ast **v;
  uint32_t n, cap;
} nodevec;

static int push(parser *p, nodevec *nv, ast *x, size_t pos) {
  if (nv->n == nv->cap) {
    uint32_t cap = nv->cap ? nv->cap * 2 : 4;
    ast **v = arena_realloc(p->a, nv->v, nv->cap * sizeof *v, cap * sizeof *v);
    if (!v) {
      fail(p, pos, "out of memory while parsing (expression too large)");
      return -1;
    }
    nv->v = v;
    nv->cap = cap;
  }
  nv->v[nv->n++] = x;
  return 0;
}

static int is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* ---- the grammar ---- */

static ast *parse_expr(parser *p);

/* "(" already consumed: [Expr {"," Expr}] ")" */
static int parse_args(parser *p, nodevec *out) {
  if (p->tok.kind == T_RPAREN) {
    advance(p);
    return 0;
  }
  for (;;) {
    size_t pos = p->tok.pos;
    ast *e = parse_expr(p);
    if (!e || push(p, out, e, pos)) return -1;
    if (p->tok.kind == T_COMMA) {
      advance(p);
      continue;
    }
    return expect(p, T_RPAREN, "',' or ')' after an argument");
  }
}

static int is_macro_name(const char *s, size_t n, ast_macro *m) {
#define IS(lit) (n == sizeof(lit) - 1 && memcmp(s, lit, n) == 0)
  if (IS("all"))
    *m = M_ALL;
  else if (IS("exists"))
    *m = M_EXISTS;
  else if (IS("exists_one"))
    *m = M_EXISTS_ONE;
  else if (IS("map"))
    *m = M_MAP;
  else if (IS("filter"))
    *m = M_FILTER;
  else
    return 0;
  return 1;
#undef IS
}

/* Where the source text of e begins: its leftmost operand for operators,
 * selections and receiver calls (node positions name the operator). */
static size_t start_pos(const ast *e) {
  for (;;) {
    if (e->kind == A_SELECT || e->kind == A_COMPREHENSION) {
      e = e->target;
    } else if (e->kind == A_CALL && e->target) {
      e = e->target;
    } else if (e->kind == A_CALL && e->nargs >= 2 &&
               ((e->name[0] == '_' && e->name_len > 1 && !is_name_char(e->name[1])) ||
                e->name[0] == '@')) {
      e = e->args[0]; /* a binary or ternary operator */
    } else {
      return e->pos;
    }
  }
}

/* target.name(args) at name_pos: a macro when name and arity say so, else
 * a receiver call. */
static ast *method_call(parser *p, ast *target, const char *name, uint32_t name_len,
                        size_t name_pos, nodevec *args) {
  ast_macro m;
  if (is_macro_name(name, name_len, &m) && (args->n == 2 || (m == M_MAP && args->n == 3))) {
    ast *var = args->v[0];
    if (var->kind != A_IDENT) {
      fail(p, start_pos(var), "the first argument of %.*s() must be a variable name", (int)name_len,
           name);
      return NULL;
    }
    ast *n = node(p, A_COMPREHENSION, name_pos);
    if (!n) return NULL;
    n->macro = (uint8_t)m;
    n->name = var->name;
    n->name_len = var->name_len;
    n->target = target;
    if (args->n == 3) {
      /* map(x, filter, transform): args[0] = transform, args[1] = filter */
      n->args = args_of(p, name_pos, 2);
      if (!n->args) return NULL;
      n->args[0] = args->v[2];
      n->args[1] = args->v[1];
      n->nargs = 2;
    } else {
      n->args = args->v + 1;
      n->nargs = 1;
    }
    return n;
  }
  return call(p, name, name_pos, target, args->v, args->n);
}

/* A global call name(args): has() is the one global macro. */
static ast *global_call(parser *p, const char *name, uint32_t name_len, size_t name_pos,
                        nodevec *args) {
  if (name_len == 3 && memcmp(name, "has", 3) == 0 && args->n == 1) {
    ast *sel = args->v[0];
    if (sel->kind != A_SELECT || sel->test_only) {
      fail(p, start_pos(sel), "has() needs a field selection, such as has(a.b)");
      return NULL;
    }
    sel->test_only = 1;
    return sel;
  }
  return call(p, name, name_pos, NULL, args->v, args->n);
}

/* A numeric literal, with `negative` when a '-' came right before it. */
static ast *number_literal(parser *p, const token *t, size_t pos, int negative) {
  ast *n = node(p, A_LIT, pos);
  if (!n) return NULL;
  if (t->kind == T_DOUBLE) {
    n->lit = value_double(negative ? -t->d : t->d);
  } else if (t->kind == T_UINT) {
    n->lit = value_uint(t->u);
  } else if (negative) {
    if (t->u > (uint64_t)INT64_MAX + 1) {
      fail(p, pos, "integer literal out of range");
      return NULL;
    }
    n->lit = value_int(t->u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)t->u);
  } else {
    if (t->u > (uint64_t)INT64_MAX) {
      fail(p, pos, "integer literal out of range (use a 'u' suffix for an unsigned integer)");
      return NULL;
    }
    n->lit = value_int((int64_t)t->u);
  }
  return n;
}

static int minus_folds(parser *p) {
  uint8_t k = peek(p)->kind;
  return k == T_INT || k == T_DOUBLE;
}

static int is_qualified_name(const ast *e) {
  while (e->kind == A_SELECT) e = e->target;
  return e->kind == A_IDENT;
}

static ast *parse_primary(parser *p) {
  token t = p->tok;
  ast *n;
  switch (t.kind) {
    case T_INT:
    case T_UINT:
    case T_DOUBLE:
      advance(p);
      return number_literal(p, &t, t.pos, 0);
    case T_MINUS: {
      /* A '-' right before a number is part of the literal; any other '-'
       * here follows a '!' (`!-x`), which CEL's grammar does not allow. */
      if (!minus_folds(p)) {
        unexpected(p, NULL);
        return NULL;
      }
      advance(p);
      token num = p->tok;
      advance(p);
      return number_literal(p, &num, t.pos, 1);
    }
    case T_STRING:
    case T_BYTES:
      advance(p);
      n = node(p, A_LIT, t.pos);
      if (!n) return NULL;
      if (t.kind == T_STRING) {
        n->lit = value_str(t.s, t.n);
        if (t.ascii) n->lit.flags |= VF_ASCII;
      } else {
        n->lit = value_bytes(t.s, t.n);
      }
      return n;
    case T_TRUE:
    case T_FALSE:
    case T_NULL:
      advance(p);
      n = node(p, A_LIT, t.pos);
      if (!n) return NULL;
      n->lit = t.kind == T_NULL ? value_null() : value_bool(t.kind == T_TRUE);
      return n;
    case T_DOT:
    case T_IDENT: {
      size_t pos = t.pos;
      if (t.kind == T_DOT) {
        advance(p);
        t = p->tok;
        if (t.kind != T_IDENT) {
          unexpected(p, "a name after '.'");
          return NULL;
        }
      }
      if (t.reserved) {
        fail(p, t.pos, "reserved word '%.*s' cannot be an identifier", (int)t.n, t.s);
        return NULL;
      }
      advance(p);
      if (p->tok.kind == T_LPAREN) {
        advance(p);
        nodevec args = {0};
        if (parse_args(p, &args)) return NULL;
        return global_call(p, t.s, t.n, t.pos, &args);
      }
      n = node(p, A_IDENT, pos);
      if (!n) return NULL;
      n->name = t.s;
      n->name_len = t.n;
      return n;
    }
    case T_LPAREN: {
      advance(p);
      ast *e = parse_expr(p);
      if (!e || expect(p, T_RPAREN, "')'")) return NULL;
      return e;
    }
    case T_LBRACKET: {
      advance(p);
      nodevec items = {0};
      while (p->tok.kind != T_RBRACKET) {
        size_t pos = p->tok.pos;
        ast *e = parse_expr(p);
        if (!e || push(p, &items, e, pos)) return NULL;
        if (p->tok.kind == T_COMMA) {
          advance(p);
          continue;
        }
        if (p->tok.kind != T_RBRACKET) {
          unexpected(p, "',' or ']' in a list");
          return NULL;
        }
      }
      advance(p);
      n = node(p, A_LIST, t.pos);
      if (!n) return NULL;
      n->args = items.v;
      n->nargs = items.n;
      return n;
    }
    case T_LBRACE: {
      advance(p);
      nodevec kv = {0};
      while (p->tok.kind != T_RBRACE) {
        size_t pos = p->tok.pos;
        ast *k = parse_expr(p);
        if (!k || expect(p, T_COLON, "':' after a map key")) return NULL;
        pos = p->tok.pos;
        ast *v = parse_expr(p);
        if (!v || push(p, &kv, k, pos) || push(p, &kv, v, pos)) return NULL;
        if (p->tok.kind == T_COMMA) {
          advance(p);
          continue;
        }
        if (p->tok.kind != T_RBRACE) {
          unexpected(p, "',' or '}' in a map");
          return NULL;
        }
      }
      advance(p);
      n = node(p, A_MAP, t.pos);
      if (!n) return NULL;
      n->args = kv.v;
      n->nargs = kv.n;
      return n;
    }
    case T_QIDENT:
      fail(p, t.pos, "a quoted name is only allowed as a field name after '.'");
      return NULL;
    default:
      unexpected(p, NULL);
      return NULL;
  }
}

static ast *parse_member(parser *p) {
  uint32_t levels = 0;
  ast *e = parse_primary(p);
  while (e) {
    token t = p->tok;
    if (t.kind == T_DOT) {
      advance(p);
      token name = p->tok;
      if (name.kind != T_IDENT && name.kind != T_QIDENT) {
        unexpected(p, "a field or method name after '.'");
        e = NULL;
        break;
      }
      if (enter(p, name.pos, 1)) {
        e = NULL;
        break;
      }
      levels++;
      advance(p);
      if (p->tok.kind == T_LPAREN && name.kind == T_IDENT) {
        advance(p);
        nodevec args = {0};
        if (parse_args(p, &args)) {
          e = NULL;
          break;
        }
        e = method_call(p, e, name.s, name.n, name.pos, &args);
      } else {
        ast *s = node(p, A_SELECT, name.pos);
        if (s) {
          s->target = e;
          s->name = name.s;
          s->name_len = name.n;
        }
        e = s;
      }
    } else if (t.kind == T_LBRACKET) {
      advance(p);
      if (enter(p, t.pos, 1)) {
        e = NULL;
        break;
      }
      levels++;
      ast *idx = parse_expr(p);
      if (!idx || expect(p, T_RBRACKET, "']' after an index")) {
        e = NULL;
        break;
      }
      e = call2(p, "_[_]", t.pos, e, idx);
    } else if (t.kind == T_LBRACE && is_qualified_name(e)) {
      fail(p, t.pos,
           "message construction (Name{field: value}) is not supported; use a map literal "
           "{'field': value}");
      e = NULL;
    } else {
      break;
    }
  }
  p->depth -= levels;
  return e;
}

static ast *parse_unary(parser *p) {
  tok_kind op = (tok_kind)p->tok.kind;
  if (op != T_NOT && (op != T_MINUS || minus_folds(p))) return parse_member(p);
  /* "!" {"!"} Member or "-" {"-"} Member; a '-' right before a number is
   * left to the literal. ops[] holds the operators' positions, outermost
   * first. */
  uint32_t *ops = NULL, count = 0, cap = 0;
  while (p->tok.kind == op && (op == T_NOT || !minus_folds(p))) {
    if (enter(p, p->tok.pos, 1)) return NULL;
    if (count == cap) {
      uint32_t ncap = cap ? cap * 2 : 4;
      uint32_t *v = arena_realloc(p->a, ops, cap * sizeof *v, ncap * sizeof *v);
      if (!v) {
        fail(p, p->tok.pos, "out of memory while parsing (expression too large)");
        return NULL;
      }
      ops = v;
      cap = ncap;
    }
    ops[count++] = p->tok.pos;
    advance(p);
  }
  ast *e = parse_member(p);
  for (uint32_t i = count; e && i > 0; i--) e = call1(p, op == T_NOT ? "!_" : "-_", ops[i - 1], e);
  p->depth -= count;
  return e;
}

static ast *parse_mul(parser *p) {
  uint32_t levels = 0;
  ast *l = parse_unary(p);
  while (l) {
    const char *fn;
    switch (p->tok.kind) {
      case T_STAR:
        fn = "_*_";
        break;
      case T_SLASH:
        fn = "_/_";
        break;
      case T_PERCENT:
        fn = "_%_";
        break;
      default:
        fn = NULL;
    }
    if (!fn) break;
    size_t pos = p->tok.pos;
    if (enter(p, pos, 1)) {
      l = NULL;
      break;
    }
    levels++;
    advance(p);
    ast *r = parse_unary(p);
    l = r ? call2(p, fn, pos, l, r) : NULL;
  }
  p->depth -= levels;
  return l;
}

static ast *parse_add(parser *p) {
  uint32_t levels = 0;
  ast *l = parse_mul(p);
  while (l && (p->tok.kind == T_PLUS || p->tok.kind == T_MINUS)) {
    const char *fn = p->tok.kind == T_PLUS ? "_+_" : "_-_";
    size_t pos = p->tok.pos;
    if (enter(p, pos, 1)) {
      l = NULL;
      break;
    }
    levels++;
    advance(p);
    ast *r = parse_mul(p);
    l = r ? call2(p, fn, pos, l, r) : NULL;
  }
  p->depth -= levels;
  return l;
}

static ast *parse_rel(parser *p) {
  uint32_t levels = 0;
  ast *l = parse_add(p);
  while (l) {
    const char *fn;
    switch (p->tok.kind) {
      case T_LT:
        fn = "_<_";
        break;
      case T_LE:
        fn = "_<=_";
        break;
      case T_GT:
        fn = "_>_";
        break;
      case T_GE:
        fn = "_>=_";
        break;
      case T_EQ:
        fn = "_==_";
        break;
      case T_NE:
        fn = "_!=_";
        break;
      case T_IN:
        fn = "@in";
        break;
      default:
        fn = NULL;
    }
    if (!fn) break;
    size_t pos = p->tok.pos;
    if (enter(p, pos, 1)) {
      l = NULL;
      break;
    }
    levels++;
    advance(p);
    ast *r = parse_add(p);
    l = r ? call2(p, fn, pos, l, r) : NULL;
  }
  p->depth -= levels;
  return l;
}

/* Builds a balanced tree of fn over terms[lo, hi); ops[i] is the position
 * of the operator between terms[i] and terms[i+1]. */
static ast *balance(parser *p, const char *fn, ast **terms, const uint32_t *ops, uint32_t lo,
                    uint32_t hi) {
  if (hi - lo == 1) return terms[lo];
  uint32_t mid = lo + (hi - lo) / 2;
  ast *l = balance(p, fn, terms, ops, lo, mid);
  ast *r = l ? balance(p, fn, terms, ops, mid, hi) : NULL;
  return r ? call2(p, fn, ops[mid - 1], l, r) : NULL;
}

/* A chain of one logical operator: term {op term}, balanced. */
static ast *parse_logical(parser *p, tok_kind op, const char *fn, ast *(*term)(parser *)) {
  ast *first = term(p);
  if (!first || p->tok.kind != op) return first;
  nodevec terms = {0};
  uint32_t *ops = NULL, nops = 0, cap = 0;
  if (push(p, &terms, first, first->pos)) return NULL;
  while (p->tok.kind == op) {
    if (nops == cap) {
      uint32_t ncap = cap ? cap * 2 : 8;
      uint32_t *v = arena_realloc(p->a, ops, cap * sizeof *v, ncap * sizeof *v);
      if (!v) {
        fail(p, p->tok.pos, "out of memory while parsing (expression too large)");
        return NULL;
      }
      ops = v;
      cap = ncap;
    }
    ops[nops++] = p->tok.pos;
    advance(p);
    size_t pos = p->tok.pos;
    ast *t = term(p);
    if (!t || push(p, &terms, t, pos)) return NULL;
  }
  /* The balanced tree adds ceil(log2(n)) levels above the terms. */
  uint32_t extra = 0;
  while ((1u << extra) < terms.n) extra++;
  if (enter(p, ops[0], extra)) return NULL;
  p->depth -= extra;
  return balance(p, fn, terms.v, ops, 0, terms.n);
}

static ast *parse_and(parser *p) { return parse_logical(p, T_AND, "_&&_", parse_rel); }
static ast *parse_or(parser *p) { return parse_logical(p, T_OR, "_||_", parse_and); }

static ast *parse_expr(parser *p) {
  if (enter(p, p->tok.pos, 1)) return NULL;
  ast *e = parse_or(p);
  if (e && p->tok.kind == T_QUESTION) {
    size_t pos = p->tok.pos;
    advance(p);
    ast *yes = parse_or(p);
    ast *no = NULL;
    if (yes && !expect(p, T_COLON, "':' in a conditional (a ? b : c)")) no = parse_expr(p);
    ast **v = no ? args_of(p, pos, 3) : NULL;
    if (v) {
      v[0] = e;
      v[1] = yes;
      v[2] = no;
      e = call(p, "_?_:_", pos, NULL, v, 3);
    } else {
      e = NULL;
    }
  }
  p->depth--;
  return e;
}

int expr_parse(arena *a, const char *src, size_t len, const expr_opts *opts, ast **out,
               expr_error *err) {
  size_t max_length = opts && opts->max_length ? opts->max_length : DEFAULT_MAX_LENGTH;
  if (max_length > UINT32_MAX - 1) max_length = UINT32_MAX - 1;
  *out = NULL;
  if (err) {
    err->line = err->column = 0;
    err->offset = 0;
    err->message[0] = 0;
  }
  if (len > max_length) {
    if (err)
      expr_error_at(err, src, len, max_length,
                    "expression is too long (%zu bytes; the limit is %zu)", len, max_length);
    return -1;
  }
  size_t bad = utf8_validate(src, len, NULL);
  if (bad < len) {
    if (err)
      expr_error_at(err, src, len, bad, "invalid UTF-8 (byte 0x%02X)", (unsigned char)src[bad]);
    return -1;
  }

  parser p;
  memset(&p, 0, sizeof p);
  p.a = a;
  p.src = src;
  p.len = len;
  p.err = err;
  p.max_depth = opts && opts->max_depth ? opts->max_depth : DEFAULT_MAX_DEPTH;
  lex_init(&p.lx, a, src, len);
  advance(&p);

  ast *e = parse_expr(&p);
  if (e && p.tok.kind != T_EOF) {
    unexpected(&p, NULL);
    e = NULL;
  }
  if (!e || p.failed) {
    if (!p.failed) fail(&p, p.tok.pos, "syntax error");
    return -1;
  }
  *out = e;
  return 0;
}

/* ---- reading an AST ---- */

uint32_t ast_path(const ast *e, const ast **comps, uint32_t max) {
  uint32_t n = 0;
  const ast *x = e;
  while (x->kind == A_SELECT && !x->test_only) {
    n++;
    x = x->target;
  }
  if (x->kind != A_IDENT || n + 1 > max) return 0;
  uint32_t total = n + 1;
  x = e;
  for (uint32_t i = total; i-- > 1;) {
    comps[i] = x;
    x = x->target;
  }
  comps[0] = x;
  return total;
}
