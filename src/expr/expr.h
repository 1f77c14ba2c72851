/* expr.h — the condition language's entry points: compile once, evaluate
 * many times.
 *
 *   expr_program *p;
 *   if (expr_compile(src, len, NULL, &p, &err)) ... err.message has line:col and a caret excerpt
 *   expr_activation act = {.lookup = my_lookup, .user = ctx};
 *   value out = expr_eval(p, &act, &ectx);   // V_ERROR on evaluation error
 *   expr_free(p);
 *
 * A program is immutable after compile and may be evaluated from many
 * threads at once, each with its own eval_ctx and arena. Evaluation allocates
 * only from ectx->arena. */
#ifndef VD_EXPR_EXPR_H
#define VD_EXPR_EXPR_H

#include <stddef.h>

#include "core/value.h"
#include "expr/ast.h"
#include "expr/lib.h"

typedef struct expr_program expr_program;

typedef struct expr_error {
  int line;   /* 1-based; 0 when not tied to a place */
  int column; /* 1-based, in code points */
  size_t offset;
  char message[1024]; /* "1:5: unexpected token ')'\n | a + )\n | ....^" style */
} expr_error;

typedef struct expr_opts {
  uint32_t max_depth; /* parser recursion limit; 0 = default (CEL's 250-ish) */
  size_t max_length;  /* source length limit; 0 = default (100 KiB) */
  /* Names that are known variables. When set, the checker reports unknown
   * top-level identifiers as compile errors; when NULL, an unbound variable is
   * a run-time error, as the CEL spec says. */
  const char *const *declared;
  size_t ndeclared;
  /* Namespace for name resolution ("a.b"), or NULL: in container "a.b" the
   * name `x` means the first bound of `a.b.x`, `a.x`, `x`. */
  const char *container;
  /* When set, no variable name contains a dot: `a.b.c` always means the
   * variable `a` with fields `b` and `c` selected, resolved at compile time
   * (faster; what the policy engine uses). CEL's default is to try the
   * longest bound dotted prefix first ("a.b.c", then "a.b", then "a"). */
  int simple_names;
  /* With simple_names: variables some of whose fields the caller binds as
   * dotted names of their own (the engine claims `limits`, and answers
   * "limits.NAME" by reading that one limit rather than all of them). For a
   * claimed R, `R.F` (then any further fields) and `has(R.F)` ask for "R.F"
   * first and, when it is unbound, read R and select or test F, as without
   * the claim. A bound "R.F" must be what R's field F would be: has(R.F) is
   * true when it is bound. `R` alone, `R[x]` and macros over R read R. */
  const char *const *claimed;
  size_t nclaimed;
  /* For a program evaluated by one thread only: work a built-in may leave
   * for its first call (compiling a constant regex pattern with PCRE2) is
   * left until then, so a program whose regex never runs never pays for it,
   * and PCRE2's JIT waits until the pattern has run a few dozen times (a
   * process that decides once runs the interpreter: see lib_core.c).
   * Matches are the same; a pattern PCRE2 rejects then fails its matches
   * instead of the compile. Such a program must not be evaluated from two
   * threads at once. */
  int defer_jit;
} expr_opts;

/* Variable lookup: returns 0 and sets *out when `name` is bound, else -1.
 * Names may contain dots for qualified bindings ("a.b.c"). */
typedef struct expr_activation {
  int (*lookup)(void *user, const char *name, size_t len, value *out);
  void *user;
} expr_activation;

int expr_compile(const char *src, size_t len, const expr_opts *opts, expr_program **out,
                 expr_error *err);
/* The same from a tree expr_parse built from src (with the same opts): what
 * a caller that needs the tree itself (a policy compiler) uses rather than
 * parsing twice. The tree is only read; src must be the text it came from. */
int expr_compile_ast(const ast *root, const char *src, size_t len, const expr_opts *opts,
                     expr_program **out, expr_error *err);
value expr_eval(const expr_program *p, const expr_activation *act, eval_ctx *ctx);
/* The same, for a caller that mostly drops errors: an error it returns may
 * carry its message unformatted (value.h, value_error_lazy), and must go
 * through value_error_text before its .s/.n are read as text. */
value expr_eval_quiet(const expr_program *p, const expr_activation *act, eval_ctx *ctx);
void expr_free(expr_program *p);

/* Names of the functions p calls that no library defines (calling one is a
 * run-time error, as CEL says; a policy compiler may warn about them).
 * Returns the count and sets *names to an array owned by p. */
uint32_t expr_unknown_functions(const expr_program *p, const char *const **names);

/* Parsing alone (used by the compiler and by tools): builds the AST in `a`. */
int expr_parse(arena *a, const char *src, size_t len, const expr_opts *opts, ast **out,
               expr_error *err);

/* Formats "LINE:COL: msg" plus a two-line caret excerpt of src at offset into err. */
void expr_error_at(expr_error *err, const char *src, size_t len, size_t offset, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));

#endif
