/* ast.h — the parsed form of a CEL expression.
 *
 * The parser (parse.c) builds this tree in an arena; the compiler (compile.c)
 * turns it into the compact program the evaluator runs. Operators are calls
 * with CEL's canonical function names, so the compiler treats operators and
 * functions alike:
 *
 *   _+_ _-_ _*_ _/_ _%_      arithmetic          -_   unary minus
 *   _==_ _!=_ _<_ _<=_ _>_ _>=_                    !_   logical not
 *   _&&_ _||_                                     _?_:_ ternary (3 args)
 *   _[_]  index                                   @in  membership (x in y)
 *
 * Macros are not expanded into generic comprehensions: the parser produces an
 * A_COMPREHENSION node naming the macro, and the evaluator implements each
 * one directly (with CEL's error-absorbing semantics for all/exists).
 * `has(a.b)` becomes an A_SELECT with test_only set.
 *
 * Every node carries the byte offset where it starts in the source, for
 * error messages (line:column is computed from it on demand). */
#ifndef VD_EXPR_AST_H
#define VD_EXPR_AST_H

#include <stdint.h>

#include "core/value.h"

typedef enum ast_kind {
  A_LIT,           /* lit */
  A_IDENT,         /* name */
  A_SELECT,        /* target.name; test_only for has() */
  A_CALL,          /* name(args) or target.name(args) when target != NULL */
  A_LIST,          /* [args...] */
  A_MAP,           /* {args[0]: args[1], args[2]: args[3], ...}; nargs is 2 * entries */
  A_COMPREHENSION, /* macro over target: see ast_macro */
} ast_kind;

typedef enum ast_macro {
  M_ALL,        /* target.all(var, args[0]) */
  M_EXISTS,     /* target.exists(var, args[0]) */
  M_EXISTS_ONE, /* target.exists_one(var, args[0]) */
  M_MAP,        /* target.map(var, args[0])  or target.map(var, filter=args[1], args[0]) */
  M_FILTER,     /* target.filter(var, args[0]) */
} ast_macro;

typedef struct ast ast;
struct ast {
  uint8_t kind;      /* ast_kind */
  uint8_t macro;     /* ast_macro, for A_COMPREHENSION */
  uint8_t test_only; /* A_SELECT produced by has() */
  uint32_t pos;      /* byte offset of the node in the source */
  const char *name;  /* identifier, field, function name, or macro iteration variable */
  uint32_t name_len;
  value lit;         /* A_LIT */
  ast *target;       /* A_SELECT operand; A_CALL receiver (NULL for global calls); macro range */
  ast **args;
  uint32_t nargs;    /* for M_MAP with a filter: args[0] = transform, args[1] = filter */
};

/* parse.c: when e is a path rooted at an identifier (`a`, `a.b.c`: selects,
 * none of them has()'s), its components root first into comps; returns the
 * count (0 when e is not such a path, or it has more than max components).
 * The compiler resolves names by it, the policy's rule index reads paths. */
uint32_t ast_path(const ast *e, const ast **comps, uint32_t max);

#endif
