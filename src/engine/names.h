/* names.h — the second half of names.c: a strategy's lookup names by
 * pointer.
 *
 * Every rule and let of a strategy is a compiled program, and the evaluator
 * asks for a variable by a pointer into its program (expr/refs.h). When a
 * strategy's name table is built, names.c lists those pointers and gives
 * each distinct name a small number, its binding, with what the name table
 * already knows about it (a let, a constant, or neither: then a context
 * field, `context` or `request`). A decision then keeps one value per
 * binding (decide.c), and a variable read is a pointer probe here instead
 * of hashing and comparing the name.
 *
 * The table lives beside the name table it extends (the same arena); a name
 * table built by name_table_build always has one. */
#ifndef VD_ENGINE_NAMES_H
#define VD_ENGINE_NAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"

typedef struct name_bind {
  const char *name;
  uint32_t len;
  uint32_t id;           /* 0 .. nbinds-1 */
  int32_t let;           /* index into strategy.lets, or -1 */
  const value *constant; /* when let < 0: the constant, or NULL (a request name) */
} name_bind;

typedef struct name_ref {
  const char *ptr; /* NULL: empty */
  const name_bind *bind;
} name_ref;

/* How a limit's key is read (decide.c, limit_take). Most keys are one
 * variable (`ip`, `user`) or the request's key (`request.key`): those are
 * read without the evaluator, giving the value the evaluator would; any
 * other key runs its program. A variable that can only be a field of the
 * request's context (no let or constant of the strategy has its name, and
 * it is not `context`, `request`, `model`, `limits…`, a type name or
 * dotted) is looked for in the context directly (LIMIT_KEY_FIELD); another
 * variable goes through the engine's lookup (LIMIT_KEY_VAR). A limit whose
 * names are too long for a key's head (no prefix) is LIMIT_KEY_EVAL. */
enum { LIMIT_KEY_EVAL = 0, LIMIT_KEY_VAR, LIMIT_KEY_REQUEST, LIMIT_KEY_FIELD };

/* A decision keeps the values of its strategy's first this many bindings
 * (decide.c); a name bound past them is resolved each time it is read. */
#define NAMES_MAX_BINDS 64

typedef struct limit_key {
  uint8_t how;     /* LIMIT_KEY_* */
  const char *var; /* LIMIT_KEY_VAR, _FIELD: the program's lookup name (its pointer) */
  uint32_t var_len;
  uint32_t var_bind; /* LIMIT_KEY_FIELD: var's binding (name_bind.id), where the value is kept */
  /* LIMIT_KEY_FIELD: where in the context the field was last found, tried
   * first (a caller sends its fields in the same order every time); only a
   * guess, read and written atomically by every thread deciding */
  uint32_t field_at;
  const char *prefix; /* "STRATEGY\x1fLIMIT\x1f", the head of a Redis key; NULL: too long */
  uint32_t prefix_len;
  /* the head of a local store's key (when prefix is set): 8 bytes made from
   * the two names (names.c, limit_id), the same in every process and after
   * every reload, so the keys a charge hashes and compares are short */
  char id[8];
  limit_spec spec; /* what the store needs, made once */
} limit_key;

typedef struct name_refs {
  const name_ref *refs; /* open addressing by pointer */
  uint32_t mask;
  uint32_t nbinds;
  const limit_key *limit_keys; /* one per limit of the strategy */
  /* every limit's key is read directly (LIMIT_KEY_REQUEST, or _FIELD with a
   * binding below NAMES_MAX_BINDS), and none has `when` or `charge`: the
   * limits stage's plain path (decide.c, run_limits_plain) serves it */
  bool limits_plain;
} name_refs;

/* Whether limit key lk is read from the request alone: `request.key`, or a
 * context field whose value a decision keeps (decide.c, limit_key_plain). */
static inline bool limit_key_is_plain(const limit_key *lk) {
  return lk->how == LIMIT_KEY_REQUEST ||
         (lk->how == LIMIT_KEY_FIELD && lk->var_bind < NAMES_MAX_BINDS);
}

/* t's pointer table (never NULL for a table from name_table_build). */
const name_refs *name_table_refs(const name_table *t);

/* The binding of a lookup name given by its pointer, or NULL when the
 * pointer is not one of the strategy's programs'. */
static inline const name_bind *name_refs_find(const name_refs *r, const char *ptr) {
  uintptr_t u = (uintptr_t)ptr;
  uint32_t i = (uint32_t)((u >> 3) * 0x9e3779b97f4a7c15ull >> 40) & r->mask;
  for (;; i = (i + 1) & r->mask) {
    const name_ref *e = &r->refs[i];
    if (e->ptr == ptr) return e->bind;
    if (!e->ptr) return NULL;
  }
}

#endif
