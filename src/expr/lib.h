/* lib.h — the contract between the evaluator and the built-in functions.
 *
 * A built-in is a C function over already-evaluated arguments. Receiver-style
 * calls (`s.startsWith(p)`) pass the receiver as args[0]. Built-ins never
 * fail by return code: an error is a V_ERROR value (value_errorf / VALUE_ERR),
 * which the evaluator propagates or absorbs as CEL says. Results are
 * allocated from ctx->arena only.
 *
 * Overloads: several entries may share a name; the compiler keeps those whose
 * `receiver` style and arity match the call site, and at run time the first
 * whose `kinds` accept the arguments' kinds is called (K_ANY accepts any).
 * No candidate -> "no matching overload" error.
 *
 * A built-in may declare `prepare`: when the call's non-receiver arguments are
 * constants at compile time, the compiler calls prepare once (e.g. to compile
 * a regex with PCRE2) and the result is passed as `aux` on every call. A
 * prepare failure is a compile error with the message it returns. `release`
 * frees aux when the program is freed. */
#ifndef VD_EXPR_LIB_H
#define VD_EXPR_LIB_H

#include <stdint.h>

#include "core/arena.h"
#include "core/value.h"

typedef struct eval_ctx {
  arena *arena;
  uint64_t cost;              /* work done so far: comprehension steps, bytes scanned, regex work */
  uint64_t cost_limit;        /* 0 = unlimited; exceeding it is an evaluation error */
  uint32_t regex_match_limit; /* PCRE2 match limit per call (0 = 1,000,000 steps) */
  void *user;                 /* the evaluator's own state */
  /* The last result of a call compile.c marks PCALL_MEMO (lowerAscii and
   * upperAscii of a variable): the same input string (the same bytes at the
   * same address) lowered again in one context is answered from here, with
   * the same cost charged. The evaluator's; a context starts zeroed and
   * lives no longer than the arena's contents (it is not reused across an
   * arena_reset). */
  struct {
    const void *fn; /* the builtin; NULL: empty */
    const char *in;
    uint32_t in_n;
    uint8_t in_flags;
    uint64_t cost;
    value out;
  } memo;
} eval_ctx;

#define K_ANY 0xff

typedef value (*builtin_fn)(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux);
/* Called with the constant arguments (args[0] is the receiver, if any, which
 * is usually not constant: its slot holds a V_NULL then). defer_jit is the
 * compile's expr_opts.defer_jit (see there): a prepare that compiles
 * something costly may then keep what it needs and compile at first use.
 * Returns aux; or NULL with a message in err (size err_size) on failure; or
 * NULL with err left empty when this call site has nothing to prepare. */
typedef void *(*builtin_prepare_fn)(const value *args, const uint8_t *is_const, uint32_t nargs,
                                    int defer_jit, char *err, size_t err_size);
typedef void (*builtin_release_fn)(void *aux);

typedef struct builtin {
  const char *name;
  uint8_t receiver; /* 1: called as args[0].name(args[1..]) */
  uint8_t nargs;    /* including the receiver */
  uint8_t kinds[4]; /* value_kind per argument, or K_ANY */
  builtin_fn fn;
  builtin_prepare_fn prepare; /* optional */
  builtin_release_fn release; /* optional */
  uint8_t variadic;           /* 1: nargs is the minimum; extra arguments take kinds[3] */
} builtin;

/* No built-in returns a value nested more lists or maps deep than its
 * deepest argument plus this (shellCommands: a string to a list of lists of
 * strings). The policy loader's bound on values built through lets counts
 * on it (policy/analyze.c); a built-in that nests deeper raises it. */
#define LIB_MAX_WRAP 2

/* The registry: every built-in of every library, terminated by a zeroed
 * entry. Implemented in lib.c, which concatenates the tables below. */
const builtin *builtin_table(void);
/* All overloads named `name` (any style/arity); returns the count and sets *first. */
uint32_t builtin_lookup(const char *name, uint32_t len, const builtin **first);

/* Tables contributed by each library file (each ends with a zeroed entry). */
extern const builtin
    lib_core_builtins[]; /* size, conversions, type, dyn, contains/startsWith/endsWith/matches */
extern const builtin lib_strings_builtins[]; /* CEL strings extension */
extern const builtin lib_time_builtins[];    /* timestamp, duration, accessors */
extern const builtin lib_net_builtins[];     /* ip, cidr, isIP, ... */

/* Charge `units` of work; returns false (and the caller should return
 * VALUE_ERR("cost limit exceeded")) when over the limit. */
static inline int eval_charge(eval_ctx *ctx, uint64_t units) {
  ctx->cost += units;
  return !(ctx->cost_limit && ctx->cost > ctx->cost_limit);
}

#endif
