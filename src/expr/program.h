/* program.h — the compiled form of an expression, shared by the compiler
 * (compile.c) and the evaluator (eval.c). Nothing outside src/expr/ should
 * need it.
 *
 * A program is a flat array of nodes; children are named by index through a
 * side array (`kids`). Everything — nodes, constants (strings, lists, maps
 * built once at compile time), call sites with their overload candidates,
 * qualified-name candidates, constant sets — lives in one arena owned by the
 * program and is never written after compile, so any number of threads may
 * evaluate one program at once.
 *
 * Operators are resolved to opcodes; calls to built-ins carry the overloads
 * that fit the call's style and arity (the first whose kinds accept the
 * arguments is called); comprehension variables are numbered slots. */
#ifndef VD_EXPR_PROGRAM_H
#define VD_EXPR_PROGRAM_H

#include <stdint.h>

#include "core/arena.h"
#include "core/value.h"
#include "expr/expr.h"
#include "expr/lib.h"

typedef enum opcode {
  OP_CONST,  /* k */
  OP_VAR,    /* variable named k; aux: type kind to fall back on (+1), 0 = none */
  OP_QVAR,   /* qualified name: quals[aux]; flags PQVAR_HAS: has() of its last component */
  OP_SLOT,   /* comprehension / bind / block slot aux */
  OP_SELECT, /* kid0.k (k is the field name) */
  OP_HAS,    /* has(kid0.k) */
  OP_INDEX,  /* kid0[kid1] */
  OP_AND,    /* kid0 && kid1 && ... (chains flattened) */
  OP_OR,     /* kid0 || kid1 || ... */
  OP_NOT,    /* !kid0 */
  OP_COND,   /* kid0 ? kid1 : kid2 */
  OP_NEG,    /* -kid0 */
  OP_ADD,    /* kid0 + kid1 */
  OP_SUB,
  OP_MUL,
  OP_DIV,
  OP_MOD,
  OP_EQ, /* kid0 == kid1 */
  OP_NE,
  OP_LT,
  OP_LE,
  OP_GT,
  OP_GE,
  OP_EQ_CONST,     /* kid0 == k (k a constant) */
  OP_NE_CONST,     /* kid0 != k */
  OP_IN,           /* kid0 in kid1 */
  OP_IN_CONST,     /* kid0 in k (a constant list or map); aux: sets[] index + 1, 0 = none */
  OP_LIST,         /* [kids...] */
  OP_MAP,          /* {kid0: kid1, ...} */
  OP_CALL,         /* calls[aux](kids...) */
  OP_CALL_UNKNOWN, /* a function no library defines: k is its name; always an error */
  /* Macros; with flags & 1 they have two variables, in slots aux and aux + 1
   * (index and element of a list, key and value of a map). */
  OP_ALL, /* kid0.all(slot aux, kid1) */
  OP_EXISTS,
  OP_EXISTS_ONE,
  OP_MAP_MACRO, /* kid0.map(slot aux, kid1) or, with 3 kids, kid0.map(slot, kid2 filter, kid1) */
  OP_FILTER,    /* kid0.filter(slot aux, kid1) */
  OP_TRANSFORM_MAP, /* kid0.transformMap(slots aux, aux + 1, [kid2 filter,] kid1) */
  OP_BIND,          /* cel.bind(slot aux, kid0, kid1) */
  OP_BLOCK,         /* cel.block([kids 0..n-2] into slots aux.., kid n-1) */
  /* kid0.exists(slot aux, kid1) where kid0 is a constant list of strings and
   * kid1 is `R.startsWith(x)`, `R.endsWith(x)` or `R.contains(x)` of the
   * element x, R not reading x: one pass of the literal set
   * lits[reserved2] over R instead of a call per element. */
  OP_EXISTS_LIT,
  /* Calls of some built-ins in shapes policies use all the time, answered
   * inline; each keeps the call's kids and calls[aux], and anything its fast
   * path does not cover (an argument of another kind, an error) runs the
   * ordinary call on the same node. */
  OP_STR_PRED,    /* kid0.startsWith/endsWith/contains(k), k a constant string; flags: plit_kind */
  OP_CONTAINS_IP, /* k.containsIP(kid1), k a constant cidr() (kid0) */
  OP_COUNT
} opcode;

typedef struct pnode pnode;
struct est;
/* The evaluator's function for a node's opcode (eval_op_fn), called
 * directly so that visiting a node costs one indirect call. */
typedef value (*pnode_fn)(struct est *s, const pnode *n);

/* OP_CALL flags: the call's result may be kept for the next call of the
 * same built-in on the same string (eval_ctx.memo). */
#define PCALL_MEMO 0x01

/* OP_QVAR flags: has(a.b) rather than a.b — true when a candidate that
 * covers every component is bound, else the last component is tested on
 * what the bound candidate selects (expr_opts.claimed). */
#define PQVAR_HAS 0x01

struct pnode {
  uint8_t op;
  uint8_t flags;
  uint16_t reserved;
  uint32_t pos; /* byte offset in the source, for messages */
  uint32_t nkids;
  uint32_t kids; /* index of the first child in expr_program.kids */
  uint32_t aux;
  uint32_t reserved2;
  pnode_fn fn;
  value k;
};

/* A candidate's argument kinds packed a byte each (for up to four
 * arguments, no variadics): it accepts when (kinds & mask) == kinds_wanted.
 * `exact` is 0 when the candidate needs the general check. */
typedef struct pcall_sig {
  uint32_t kinds;
  uint32_t mask;
  uint32_t exact;
} pcall_sig;

/* One call site: the overloads that fit its style and arity, in registry
 * order, with what each one's prepare returned (NULL when none). */
typedef struct pcall {
  const char *name; /* NUL-terminated: the registry's own, or the program's copy */
  uint32_t name_len;
  uint32_t ncand;
  const builtin *const *cand;
  void *const *aux;
  const pcall_sig *sig;
} pcall;

/* A name candidate of a qualified identifier a.b.c: look up `name`; when it
 * is bound, select the remaining components (from `used` on) as fields. */
typedef struct pcand {
  const char *name;
  uint32_t len;
  uint32_t used; /* components the name covers */
} pcand;

typedef struct pqual {
  const char *full; /* "a.b.c" as written, for messages */
  uint32_t full_len;
  const value *comps; /* component names (strings) */
  uint32_t ncomp;
  uint32_t ncand;
  const pcand *cands; /* in resolution order: longest first */
  uint32_t type_kind; /* value_kind + 1 when the whole chain names a type (fallback), else 0 */
} pqual;

/* A constant list or map used on the right of `in`, prepared for fast
 * membership tests: an open-addressing table of element indexes by
 * value_hash (only when every element is a scalar key kind). */
typedef struct pset {
  value container;
  const uint32_t *slots; /* index + 1, 0 = empty; NULL: scan linearly */
  uint32_t mask;
  uint8_t all_strings; /* every element is a string: compare bytes only */
} pset;

/* The literal set of an OP_EXISTS_LIT node and the predicate it stands for. */
typedef enum plit_kind { PLIT_STARTS, PLIT_ENDS, PLIT_CONTAINS } plit_kind;

typedef struct plits {
  const struct litset *set;
  uint8_t kind; /* plit_kind */
} plits;

struct expr_program {
  const pnode *nodes;
  uint32_t nnodes;
  uint32_t root;
  const uint32_t *kids;
  const pcall *calls;
  uint32_t ncalls;
  const pqual *quals;
  const pset *sets;
  const plits *lits;
  uint32_t nslots;                /* comprehension/bind/block slots the evaluator needs */
  const char *const *unknown_fns; /* names of functions no library defines */
  uint32_t nunknown;
  const char *src; /* a copy of the source, for messages */
  size_t src_len;
  arena mem; /* owns everything above */
};

/* Fills *out with the call site of the built-in `name` (whose overloads
 * are first[0..count), as builtin_lookup gives them) over nk arguments in
 * the given style (receiver or global): the overloads that fit, in registry
 * order, their signatures, and what each one's `prepare` makes of the
 * constant arguments (args[i] where isc[i]; args NULL: none constant),
 * told the compile's expr_opts.defer_jit. What
 * the compiler does for every call, and what a program image is rebuilt
 * with (image.c). Allocates in a. Returns 0; -1 when a is exhausted; -2
 * when a prepare refused its arguments (its message in msg). */
int program_call_site(arena *a, const builtin *first, uint32_t count, const char *name,
                      uint32_t name_len, int receiver, uint32_t nk, const value *args,
                      const uint8_t *isc, int defer_jit, pcall *out, int *has_prepare, char *msg,
                      size_t msg_size);

/* Releases what the prepares of n call sites made (their aux). */
void program_release_calls(const pcall *calls, uint32_t n);

/* The evaluator's function for an opcode (set in every node at compile time). */
pnode_fn eval_op_fn(opcode op);

/* Evaluates node `root` of p (used by expr_eval and by constant folding). */
value eval_program_node(const expr_program *p, uint32_t root, const expr_activation *act,
                        eval_ctx *ctx, value *slots);

/* Deep copy of a value into a (constants that must outlive a scratch arena).
 * Returns 0, or -1 when a is exhausted. */
int value_copy_deep(arena *a, const value *in, value *out);

/* lib_net.c: how many bytes an ip()/cidr() string keeps after its text's
 * NUL (its parsed form; 0 for every other value). A copy of such a string
 * that keeps its flags must copy them too, as value_copy_deep does. */
size_t net_value_extra(const value *v);

/* lib_net.c: cidr.containsIP(ip) when both carry their parsed form (1 or
 * 0), else -1 (the caller then makes the ordinary call). */
int net_contains_ip_fast(const value *cidr, const value *ip);

#endif
