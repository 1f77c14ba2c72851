/* refs.h — the names a compiled program will ask its activation for.
 *
 * The evaluator passes a name to expr_activation.lookup as a pointer into
 * the program (with its length), the same pointer every time for the same
 * place in the program. A caller that evaluates many programs over one set
 * of variables (the engine: every rule and let of a strategy) can list
 * those pointers once, after compiling, and resolve a lookup by its pointer
 * instead of comparing names (engine/names.c does).
 *
 * Not every lookup comes from this list: callers of lookup other than the
 * evaluator (the policy's rule index) pass names of their own. */
#ifndef VD_EXPR_REFS_H
#define VD_EXPR_REFS_H

#include <stdint.h>

#include "expr/expr.h"

typedef struct expr_ref {
  const char *name; /* owned by the program; not NUL-terminated as far as callers know */
  uint32_t len;
} expr_ref;

/* Writes up to max of p's lookup names into out (a name may appear more
 * than once) and returns how many there are in all. */
uint32_t expr_refs(const expr_program *p, expr_ref *out, uint32_t max);

/* What p's root is, for a caller that reads a simple program without
 * evaluating it (engine/names.c: how a limit's key is read).
 * EXPR_ROOT_VAR: one variable, *var; EXPR_ROOT_FIELD: a variable with one
 * field selected, `var.field` (*var and *field); EXPR_ROOT_OTHER: anything
 * else (a qualified name, a call...). var->name is the program's own lookup
 * name, the pointer expr_refs lists. */
enum { EXPR_ROOT_OTHER = 0, EXPR_ROOT_VAR, EXPR_ROOT_FIELD };
int expr_root(const expr_program *p, expr_ref *var, expr_ref *field);

#endif
