/* eval.c — runs a compiled program (program.h) over one activation.
 *
 * A tree walk over the flat node array: each node carries the function of
 * its opcode (one small function an opcode, set at compile time), so a visit
 * is one indirect call; recursion is bounded by the parser's depth limit
 * (every nesting level of the source counts). Errors are V_ERROR values,
 * so `&&`, `||` and the all/exists macros can absorb them as CEL requires
 * (both sides are evaluated before an error wins); every other operator and
 * function is strict and passes the first error on.
 *
 * The nodes compile.c specializes (OP_STR_PRED, OP_CONTAINS_IP,
 * OP_EXISTS_LIT) answer the common case inline and hand everything else to
 * the general code on the same node, charging the same cost, so a
 * specialization never changes a value or a message.
 *
 * Memory: evaluation allocates only from ctx->arena, and only when it builds
 * something new (a concatenation, a list or map literal with variable parts,
 * a macro's result, an error message). Comparisons, field selection, `in`
 * against a constant list and calls to built-ins that return a part of their
 * input allocate nothing, which the gate conditions of a policy rely on.
 * The commonest errors (a missing key or field, an undeclared name) are
 * lazy (value.h): most are absorbed by `has()`, `||` or a feature that is
 * then missing, so their message is written only when expr_eval returns
 * one. lowerAscii/upperAscii of a variable keep their last result in the
 * context (eval_ctx.memo): policies lower the same header many times.
 *
 * Arithmetic follows CEL: int64/uint64 overflow is an error (never a
 * wrap-around), `/` truncates, `%` takes the sign of the dividend, division
 * and modulus by zero are errors, doubles are IEEE 754. Timestamp and
 * duration arithmetic is here too, with range checks: timestamps stay within
 * 0001-01-01..9999-12-31 (timefmt.h), and a duration computed by arithmetic
 * must fit in int64 nanoseconds (about ±292 years), as in the reference
 * implementations and the conformance suite.
 *
 * Not here: parsing and name resolution (compile.c), the built-in functions
 * (lib_*.c), equality/ordering of values (core/value.c). */
#define _GNU_SOURCE /* memmem */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/bytes.h"
#include "core/timefmt.h"
#include "expr/litset.h"
#include "expr/program.h"

typedef int (*lookup_fn)(void *user, const char *name, size_t len, value *out);

struct est {
  const expr_program *p;
  lookup_fn lookup; /* never NULL (see no_vars) */
  void *user;
  eval_ctx *ctx;
  value *slots;
};
typedef struct est est;

static value ev(est *s, uint32_t i);
static inline __attribute__((always_inline)) value evk(est *s, uint32_t i);
static value op_eq_const(est *s, const pnode *n);
static value op_in_const(est *s, const pnode *n);
static value op_logic(est *s, const pnode *n);
static value op_not(est *s, const pnode *n);

#define KID(s, n, j) ((s)->p->kids[(n)->kids + (j)])
#define COLD __attribute__((noinline, cold))
#define NOINLINE __attribute__((noinline))

static const char *kname(const value *v) { return value_kind_name((value_kind)v->kind); }

COLD static value err_overload1(est *s, const char *op, const value *a) {
  return value_errorf(s->ctx->arena, "no matching overload for '%s' applied to (%s)", op, kname(a));
}

COLD static value err_overload2(est *s, const char *op, const value *a, const value *b) {
  return value_errorf(s->ctx->arena, "no matching overload for '%s' applied to (%s, %s)", op,
                      kname(a), kname(b));
}

static value err_nomem(void) { return VALUE_ERR("memory limit exceeded during evaluation"); }

static int over_cost(const eval_ctx *ctx) { return ctx->cost_limit && ctx->cost > ctx->cost_limit; }

/* ---- variables and fields ---- */

static int no_vars(void *user, const char *name, size_t len, value *out) { return -1; }

static void est_init(est *s, const expr_program *p, const expr_activation *act, eval_ctx *ctx,
                     value *slots) {
  s->p = p;
  s->lookup = act && act->lookup ? act->lookup : no_vars;
  s->user = act ? act->user : NULL;
  s->ctx = ctx;
  s->slots = slots;
}

static inline int lookup(est *s, const char *name, size_t len, value *out) {
  return s->lookup(s->user, name, len, out) == 0;
}

COLD static value select_failed(est *s, const value *v, const value *key) {
  if (v->kind == V_MAP) return value_error_lazy(VE_NO_SUCH_KEY, key->s, key->n);
  if (v->kind == V_ERROR) return *v;
  return value_errorf(s->ctx->arena, "type '%s' does not support field selection ('.%.*s')",
                      kname(v), (int)key->n, key->s);
}

static inline int str_eq(const value *a, const value *b) {
  return a->n == b->n && bytes_same(a->s, b->s, a->n);
}

/* value_map_find for a string key, inline: a map's string keys are matched
 * by their bytes, and keys of other kinds never equal a string. */
static inline const value *map_get_str(const value *map, const char *k, uint32_t n) {
  const map_entry *e = map->entries;
  for (uint32_t i = 0; i < map->n; i++)
    if (e[i].key.kind == V_STRING && e[i].key.n == n && bytes_same(e[i].key.s, k, n))
      return &e[i].val;
  return NULL;
}

static inline value select_field(est *s, const value *v, const value *key) {
  if (v->kind == V_MAP) {
    const value *r = map_get_str(v, key->s, key->n); /* key is a string value already */
    if (r) return *r;
  }
  return select_failed(s, v, key);
}

COLD static value qvar_unbound(est *s, const pqual *q) {
  if (q->type_kind) return value_type((value_kind)(q->type_kind - 1));
  return value_error_lazy(VE_UNDECLARED, q->full, q->full_len);
}

static inline value eval_qvar(est *s, const pqual *q) {
  for (uint32_t c = 0; c < q->ncand; c++) {
    const pcand *cand = &q->cands[c];
    value v;
    if (!lookup(s, cand->name, cand->len, &v)) continue;
    for (uint32_t j = cand->used; j < q->ncomp && v.kind != V_ERROR; j++)
      v = select_field(s, &v, &q->comps[j]);
    return v;
  }
  return qvar_unbound(s, q);
}

/* has() of a qualified name (PQVAR_HAS): a bound candidate that covers
 * every component answers true (the caller binds it only when the field is
 * there: expr_opts.claimed); otherwise the last component is tested on what
 * the bound candidate selects, as OP_HAS tests it. */
NOINLINE static value eval_qvar_has(est *s, const pqual *q) {
  for (uint32_t c = 0; c < q->ncand; c++) {
    const pcand *cand = &q->cands[c];
    value v;
    if (!lookup(s, cand->name, cand->len, &v)) continue;
    if (cand->used >= q->ncomp) return value_bool(1);
    for (uint32_t j = cand->used; j + 1 < q->ncomp && v.kind != V_ERROR; j++)
      v = select_field(s, &v, &q->comps[j]);
    const value *f = &q->comps[q->ncomp - 1];
    if (v.kind == V_MAP) return value_bool(map_get_str(&v, f->s, f->n) != NULL);
    if (v.kind == V_ERROR) return v;
    return value_errorf(s->ctx->arena, "has(): type '%s' does not support field selection",
                        kname(&v));
  }
  return qvar_unbound(s, q);
}

/* ---- index and membership ---- */

NOINLINE static value eval_index(est *s, const value *c, const value *k) {
  if (c->kind == V_LIST) {
    int64_t i;
    switch (k->kind) {
      case V_INT:
        i = k->i;
        break;
      case V_UINT:
        if (k->u >= c->n) goto out_of_range;
        i = (int64_t)k->u;
        break;
      case V_DOUBLE:
        if (!(k->d >= 0 && k->d < 4294967296.0) || k->d != floor(k->d))
          return value_errorf(s->ctx->arena, "invalid list index %g", k->d);
        i = (int64_t)k->d;
        break;
      default:
        return err_overload2(s, "_[_]", c, k);
    }
    if (i < 0 || i >= (int64_t)c->n) goto out_of_range;
    return c->items[i];
  out_of_range:
    if (k->kind == V_UINT)
      return value_errorf(s->ctx->arena, "index out of range: %llu (list size %u)",
                          (unsigned long long)k->u, c->n);
    return value_errorf(s->ctx->arena, "index out of range: %lld (list size %u)",
                        (long long)(k->kind == V_INT ? k->i : (int64_t)k->d), c->n);
  }
  if (c->kind == V_MAP) {
    const value *r = k->kind == V_STRING ? map_get_str(c, k->s, k->n) : value_map_find(c, k);
    if (r) return *r;
    switch (k->kind) {
      case V_STRING:
        return value_error_lazy(VE_NO_SUCH_KEY, k->s, k->n);
      case V_INT:
        return value_errorf(s->ctx->arena, "no such key: %lld", (long long)k->i);
      case V_UINT:
        return value_errorf(s->ctx->arena, "no such key: %lluu", (unsigned long long)k->u);
      case V_DOUBLE:
        return value_errorf(s->ctx->arena, "no such key: %g", k->d);
      case V_BOOL:
        return value_errorf(s->ctx->arena, "no such key: %s", k->b ? "true" : "false");
      default:
        return value_errorf(s->ctx->arena, "no such key (a %s key)", kname(k));
    }
  }
  return err_overload2(s, "_[_]", c, k);
}

static int list_contains(const value *list, const value *x) {
  for (uint32_t i = 0; i < list->n; i++)
    if (value_equal(&list->items[i], x)) return 1;
  return 0;
}

static value eval_in(est *s, const value *x, const value *c) {
  if (c->kind == V_LIST) return value_bool(list_contains(c, x));
  if (c->kind == V_MAP)
    return value_bool((x->kind == V_STRING ? map_get_str(c, x->s, x->n) : value_map_find(c, x)) !=
                      NULL);
  return err_overload2(s, "@in", x, c);
}

/* `x in CONST`: hash probe, or a byte scan when every element is a string. */
static value eval_in_const(est *s, const value *x, const pnode *n) {
  const value *c = &n->k;
  if (!n->aux) return eval_in(s, x, c);
  const pset *set = &s->p->sets[n->aux - 1];
  const int is_map = c->kind == V_MAP;
  if (set->all_strings && !set->slots) {
    if (x->kind != V_STRING) return value_bool(0);
    for (uint32_t i = 0; i < c->n; i++) {
      const value *e = is_map ? &c->entries[i].key : &c->items[i];
      if (str_eq(e, x)) return value_bool(1);
    }
    return value_bool(0);
  }
  if (!set->slots) return eval_in(s, x, c);
  if (set->all_strings && x->kind != V_STRING) return value_bool(0);
  uint32_t h = (uint32_t)value_hash(x) & set->mask;
  for (;; h = (h + 1) & set->mask) {
    uint32_t slot = set->slots[h];
    if (!slot) return value_bool(0);
    const value *e = is_map ? &c->entries[slot - 1].key : &c->items[slot - 1];
    if (value_equal(e, x)) return value_bool(1);
  }
}

/* ---- arithmetic ---- */

#define NANOS 1000000000LL

typedef __int128 i128;

static i128 time_ns(const value *v) { return (i128)v->i * NANOS + (int32_t)v->n; }

static value make_duration(est *s, i128 ns) {
  if (ns > (i128)INT64_MAX || ns < (i128)INT64_MIN)
    return value_errorf(s->ctx->arena, "duration out of range");
  int64_t t = (int64_t)ns;
  return value_duration(t / NANOS, (int32_t)(t % NANOS));
}

static value make_timestamp(est *s, i128 ns) {
  i128 sec = ns / NANOS, rem = ns % NANOS;
  if (rem < 0) {
    rem += NANOS;
    sec -= 1;
  }
  if (sec < TIMEFMT_MIN_SEC || sec > TIMEFMT_MAX_SEC)
    return value_errorf(s->ctx->arena, "timestamp out of range");
  return value_timestamp((int64_t)sec, (int32_t)rem);
}

NOINLINE static value concat(est *s, const value *a, const value *b) {
  if (a->n == 0) return *b;
  if (b->n == 0) return *a;
  uint64_t total = (uint64_t)a->n + b->n;
  if (total > UINT32_MAX) return err_nomem();
  if (a->kind == V_LIST) {
    value *items = arena_alloc(s->ctx->arena, (size_t)total * sizeof(value));
    if (!items) return err_nomem();
    memcpy(items, a->items, a->n * sizeof(value));
    memcpy(items + a->n, b->items, b->n * sizeof(value));
    return value_list(items, (uint32_t)total);
  }
  char *buf = arena_alloc(s->ctx->arena, (size_t)total);
  if (!buf) return err_nomem();
  memcpy(buf, a->s, a->n);
  memcpy(buf + a->n, b->s, b->n);
  value r =
      a->kind == V_STRING ? value_str(buf, (uint32_t)total) : value_bytes(buf, (uint32_t)total);
  r.flags = a->flags & b->flags & VF_ASCII;
  return r;
}

static value arith_add(est *s, const value *a, const value *b) {
  if (a->kind == b->kind) {
    switch (a->kind) {
      case V_INT: {
        int64_t r;
        if (__builtin_add_overflow(a->i, b->i, &r)) return VALUE_ERR("integer overflow in '+'");
        return value_int(r);
      }
      case V_UINT: {
        uint64_t r;
        if (__builtin_add_overflow(a->u, b->u, &r))
          return VALUE_ERR("unsigned integer overflow in '+'");
        return value_uint(r);
      }
      case V_DOUBLE:
        return value_double(a->d + b->d);
      case V_STRING:
      case V_BYTES:
      case V_LIST:
        return concat(s, a, b);
      case V_DURATION:
        return make_duration(s, time_ns(a) + time_ns(b));
      default:
        break;
    }
  } else if (a->kind == V_TIMESTAMP && b->kind == V_DURATION) {
    return make_timestamp(s, time_ns(a) + time_ns(b));
  } else if (a->kind == V_DURATION && b->kind == V_TIMESTAMP) {
    return make_timestamp(s, time_ns(a) + time_ns(b));
  }
  return err_overload2(s, "_+_", a, b);
}

static value arith_sub(est *s, const value *a, const value *b) {
  if (a->kind == b->kind) {
    switch (a->kind) {
      case V_INT: {
        int64_t r;
        if (__builtin_sub_overflow(a->i, b->i, &r)) return VALUE_ERR("integer overflow in '-'");
        return value_int(r);
      }
      case V_UINT: {
        uint64_t r;
        if (__builtin_sub_overflow(a->u, b->u, &r))
          return VALUE_ERR("unsigned integer overflow in '-'");
        return value_uint(r);
      }
      case V_DOUBLE:
        return value_double(a->d - b->d);
      case V_DURATION:
      case V_TIMESTAMP:
        return make_duration(s, time_ns(a) - time_ns(b));
      default:
        break;
    }
  } else if (a->kind == V_TIMESTAMP && b->kind == V_DURATION) {
    return make_timestamp(s, time_ns(a) - time_ns(b));
  }
  return err_overload2(s, "_-_", a, b);
}

static value arith_mul(est *s, const value *a, const value *b) {
  if (a->kind == b->kind) {
    switch (a->kind) {
      case V_INT: {
        int64_t r;
        if (__builtin_mul_overflow(a->i, b->i, &r)) return VALUE_ERR("integer overflow in '*'");
        return value_int(r);
      }
      case V_UINT: {
        uint64_t r;
        if (__builtin_mul_overflow(a->u, b->u, &r))
          return VALUE_ERR("unsigned integer overflow in '*'");
        return value_uint(r);
      }
      case V_DOUBLE:
        return value_double(a->d * b->d);
      default:
        break;
    }
  }
  return err_overload2(s, "_*_", a, b);
}

static value arith_div(est *s, const value *a, const value *b) {
  if (a->kind == b->kind) {
    switch (a->kind) {
      case V_INT:
        if (b->i == 0) return VALUE_ERR("division by zero");
        if (a->i == INT64_MIN && b->i == -1) return VALUE_ERR("integer overflow in '/'");
        return value_int(a->i / b->i);
      case V_UINT:
        if (b->u == 0) return VALUE_ERR("division by zero");
        return value_uint(a->u / b->u);
      case V_DOUBLE:
        return value_double(a->d / b->d);
      default:
        break;
    }
  }
  return err_overload2(s, "_/_", a, b);
}

static value arith_mod(est *s, const value *a, const value *b) {
  if (a->kind == b->kind) {
    switch (a->kind) {
      case V_INT:
        if (b->i == 0) return VALUE_ERR("modulus by zero");
        if (a->i == INT64_MIN && b->i == -1) return VALUE_ERR("integer overflow in '%'");
        return value_int(a->i % b->i);
      case V_UINT:
        if (b->u == 0) return VALUE_ERR("modulus by zero");
        return value_uint(a->u % b->u);
      default:
        break;
    }
  }
  return err_overload2(s, "_%_", a, b);
}

static value arith_neg(est *s, const value *a) {
  switch (a->kind) {
    case V_INT:
      if (a->i == INT64_MIN) return VALUE_ERR("integer overflow in unary '-'");
      return value_int(-a->i);
    case V_DOUBLE:
      return value_double(-a->d);
    case V_DURATION:
      return make_duration(s, -time_ns(a));
    default:
      return err_overload1(s, "-_", a);
  }
}

static value arith_order(est *s, int op, const value *a, const value *b) {
  static const char *const names[] = {"_<_", "_<=_", "_>_", "_>=_"};
  int c;
  if (value_compare(a, b, &c) != 0) return err_overload2(s, names[op - OP_LT], a, b);
  if (c == 2) return value_bool(0); /* NaN: unordered */
  switch (op) {
    case OP_LT:
      return value_bool(c < 0);
    case OP_LE:
      return value_bool(c <= 0);
    case OP_GT:
      return value_bool(c > 0);
    default:
      return value_bool(c >= 0);
  }
}

/* ---- literals ---- */

static int key_kind_ok(uint8_t k) {
  return k == V_BOOL || k == V_INT || k == V_UINT || k == V_STRING;
}

/* Checks the keys of a map literal: allowed kinds, no duplicates (CEL
 * equality, so 0 and 0u collide). Small maps compare pairwise; larger ones
 * go through a scratch hash table. Returns an error value or a V_NULL. */
NOINLINE static value check_map_keys(est *s, const map_entry *e, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (!key_kind_ok(e[i].key.kind))
      return value_errorf(s->ctx->arena, "unsupported map key type '%s'", kname(&e[i].key));
  if (n <= 16) {
    for (uint32_t i = 1; i < n; i++)
      for (uint32_t j = 0; j < i; j++)
        if (value_equal(&e[i].key, &e[j].key)) goto dup;
    return value_null();
  }
  uint32_t cap = 32;
  while (cap < 2 * n) cap *= 2;
  uint32_t *tab = arena_zalloc(s->ctx->arena, (size_t)cap * sizeof *tab);
  if (!tab) return err_nomem();
  for (uint32_t i = 0; i < n; i++) {
    uint32_t h = (uint32_t)value_hash(&e[i].key) & (cap - 1);
    while (tab[h]) {
      if (value_equal(&e[tab[h] - 1].key, &e[i].key)) goto dup;
      h = (h + 1) & (cap - 1);
    }
    tab[h] = i + 1;
  }
  return value_null();
dup:
  return VALUE_ERR("repeated key in map literal");
}

NOINLINE static value op_list(est *s, const pnode *n) {
  if (n->nkids == 0) return value_list(NULL, 0);
  value *items = arena_alloc(s->ctx->arena, (size_t)n->nkids * sizeof(value));
  if (!items) return err_nomem();
  for (uint32_t i = 0; i < n->nkids; i++) {
    items[i] = evk(s, KID(s, n, i));
    if (items[i].kind == V_ERROR) return items[i];
  }
  return value_list(items, n->nkids);
}

NOINLINE static value op_map(est *s, const pnode *n) {
  uint32_t count = n->nkids / 2;
  if (count == 0) return value_map(NULL, 0);
  map_entry *e = arena_alloc(s->ctx->arena, (size_t)count * sizeof *e);
  if (!e) return err_nomem();
  for (uint32_t i = 0; i < count; i++) {
    e[i].key = evk(s, KID(s, n, 2 * i));
    if (e[i].key.kind == V_ERROR) return e[i].key;
    e[i].val = evk(s, KID(s, n, 2 * i + 1));
    if (e[i].val.kind == V_ERROR) return e[i].val;
  }
  value bad = check_map_keys(s, e, count);
  if (bad.kind == V_ERROR) return bad;
  return value_map(e, count);
}

/* ---- calls ---- */

static int cand_accepts(const builtin *b, const value *args, uint32_t nargs) {
  for (uint32_t i = 0; i < nargs; i++) {
    uint8_t k = (i < b->nargs && i < 4) ? b->kinds[i] : b->kinds[3];
    if (k != K_ANY && k != args[i].kind) return 0;
  }
  return 1;
}

COLD static value err_no_overload_call(est *s, const pcall *c, const value *args, uint32_t nargs) {
  char kinds[256];
  size_t len = 0;
  kinds[0] = '\0';
  for (uint32_t i = 0; i < nargs && len < sizeof kinds - 1; i++) {
    int w = snprintf(kinds + len, sizeof kinds - len, "%s%s", i ? ", " : "", kname(&args[i]));
    if (w < 0) break;
    len += (size_t)w;
  }
  return value_errorf(s->ctx->arena, "no matching overload for '%s' applied to (%s)", c->name,
                      kinds);
}

/* A PCALL_MEMO call (one candidate, a string receiver): the context's last
 * such result when the input is the same string, charging what the call
 * charged; otherwise the call, remembered. */
NOINLINE static value memo_call(est *s, const pcall *c, const value *args, uint32_t nargs) {
  eval_ctx *ctx = s->ctx;
  const builtin *b = c->cand[0];
  if (ctx->memo.fn == (const void *)b && ctx->memo.in == args[0].s && ctx->memo.in_n == args[0].n &&
      ctx->memo.in_flags == args[0].flags) {
    if (!eval_charge(ctx, ctx->memo.cost)) return VALUE_ERR("cost limit exceeded");
    return ctx->memo.out;
  }
  uint64_t before = ctx->cost;
  value r = b->fn(ctx, args, nargs, c->aux[0]);
  if (r.kind != V_ERROR) {
    ctx->memo.fn = b;
    ctx->memo.in = args[0].s;
    ctx->memo.in_n = args[0].n;
    ctx->memo.in_flags = args[0].flags;
    ctx->memo.cost = ctx->cost - before;
    ctx->memo.out = r;
  }
  return r;
}

NOINLINE static value op_call(est *s, const pnode *n) {
  const pcall *c = &s->p->calls[n->aux];
  value local[8];
  value *args = local;
  uint32_t nargs = n->nkids;
  if (nargs > 8) {
    args = arena_alloc(s->ctx->arena, (size_t)nargs * sizeof(value));
    if (!args) return err_nomem();
  }
  uint32_t kinds = 0; /* the argument kinds, a byte each, for the first four */
  for (uint32_t i = 0; i < nargs; i++) {
    args[i] = evk(s, KID(s, n, i));
    if (args[i].kind == V_ERROR) return args[i];
    if (i < 4) kinds |= (uint32_t)args[i].kind << (8 * i);
  }
  for (uint32_t j = 0; j < c->ncand; j++) {
    const pcall_sig *sig = &c->sig[j];
    int ok = sig->exact ? (kinds & sig->mask) == sig->kinds : cand_accepts(c->cand[j], args, nargs);
    if (ok && __builtin_expect(n->flags & PCALL_MEMO, 0)) return memo_call(s, c, args, nargs);
    if (ok) return c->cand[j]->fn(s->ctx, args, nargs, c->aux[j]);
  }
  return err_no_overload_call(s, c, args, nargs);
}

/* ---- macros ---- */

static const char *macro_name(int op) {
  switch (op) {
    case OP_ALL:
      return "all";
    case OP_EXISTS:
      return "exists";
    case OP_EXISTS_ONE:
      return "exists_one";
    case OP_MAP_MACRO:
      return "map";
    case OP_TRANSFORM_MAP:
      return "transformMap";
    default:
      return "filter";
  }
}

/* The macros, natively. With `flags & 1` the macro has two variables (CEL's
 * two-variable comprehensions): index and element for a list, key and value
 * for a map, in slots aux and aux + 1; otherwise one variable, the element
 * of a list or the key of a map. */
NOINLINE static value op_macro(est *s, const pnode *n) {
  const int op = n->op == OP_EXISTS_LIT ? OP_EXISTS : n->op;
  value range = evk(s, KID(s, n, 0));
  if (range.kind == V_ERROR) return range;
  if (range.kind != V_LIST && range.kind != V_MAP) return err_overload1(s, macro_name(op), &range);
  const int is_map = range.kind == V_MAP;
  const int two = n->flags & 1;
  const uint32_t count = range.n;
  const uint32_t body = KID(s, n, 1);
  value *slot = &s->slots[n->aux];
  value *out = NULL;
  map_entry *mout = NULL;
  uint32_t nout = 0;
  if ((op == OP_MAP_MACRO || op == OP_FILTER) && count) {
    out = arena_alloc(s->ctx->arena, (size_t)count * sizeof(value));
    if (!out) return err_nomem();
  } else if (op == OP_TRANSFORM_MAP && count) {
    mout = arena_alloc(s->ctx->arena, (size_t)count * sizeof *mout);
    if (!mout) return err_nomem();
  }
  value err = value_null(); /* first error seen by all/exists, absorbed if the answer is decided */
  uint32_t matches = 0;
  for (uint32_t i = 0; i < count; i++) {
    if (!eval_charge(s->ctx, 1)) return VALUE_ERR("cost limit exceeded");
    value key = is_map ? range.entries[i].key : value_int(i);
    value elem = is_map ? range.entries[i].val : range.items[i];
    if (two) {
      slot[0] = key;
      slot[1] = elem;
    } else {
      slot[0] = is_map ? key : elem;
    }
    if (n->nkids == 3 && (op == OP_MAP_MACRO || op == OP_TRANSFORM_MAP)) {
      value f = evk(s, KID(s, n, 2));
      if (f.kind == V_ERROR) return f;
      if (f.kind != V_BOOL) return err_overload1(s, macro_name(op), &f);
      if (!f.b) continue;
    }
    value r = evk(s, body);
    switch (op) {
      case OP_ALL:
      case OP_EXISTS: {
        const int decisive = op == OP_ALL ? 0 : 1;
        if (r.kind == V_BOOL) {
          if (r.b == decisive) return r;
        } else if (err.kind != V_ERROR) {
          err = r.kind == V_ERROR ? r : err_overload1(s, macro_name(op), &r);
        }
        break;
      }
      case OP_EXISTS_ONE:
      case OP_FILTER:
        if (r.kind == V_ERROR) return r;
        if (r.kind != V_BOOL) return err_overload1(s, macro_name(op), &r);
        if (op == OP_EXISTS_ONE)
          matches += r.b;
        else if (r.b)
          out[nout++] = slot[0];
        break;
      case OP_TRANSFORM_MAP:
        if (r.kind == V_ERROR) return r;
        mout[nout].key = key;
        mout[nout++].val = r;
        break;
      default: /* OP_MAP_MACRO */
        if (r.kind == V_ERROR) return r;
        out[nout++] = r;
        break;
    }
    if (over_cost(s->ctx)) return VALUE_ERR("cost limit exceeded");
  }
  switch (op) {
    case OP_ALL:
    case OP_EXISTS:
      if (err.kind == V_ERROR) return err;
      return value_bool(op == OP_ALL);
    case OP_EXISTS_ONE:
      return value_bool(matches == 1);
    case OP_TRANSFORM_MAP:
      return value_map(mout, nout);
    default:
      return value_list(out, nout);
  }
}

static int lit_pred(uint8_t kind, const value *r, const value *x) {
  if (x->n > r->n) return 0;
  if (x->n == 0) return 1;
  switch (kind) {
    case PLIT_STARTS:
      return memcmp(r->s, x->s, x->n) == 0;
    case PLIT_ENDS:
      return memcmp(r->s + r->n - x->n, x->s, x->n) == 0;
    default:
      return memmem(r->s, r->n, x->s, x->n) != NULL;
  }
}

/* OP_EXISTS_LIT (program.h). The answer and the cost charged are those of
 * the general loop, which stops at the first element that matches: one
 * unit an element tried, plus what `contains` charges per call. */
NOINLINE static value op_exists_lit(est *s, const pnode *n) {
  const plits *pl = &s->p->lits[n->reserved2];
  const value *list = &s->p->nodes[KID(s, n, 0)].k;
  if (list->n == 0) return value_bool(0);
  const pnode *call = &s->p->nodes[KID(s, n, 1)];
  value r = evk(s, KID(s, call, 0));
  if (r.kind != V_STRING) return op_macro(s, n); /* errors as the loop makes them */
  const uint64_t per = 1 + (pl->kind == PLIT_CONTAINS ? r.n / 16 + 1 : 0);
  eval_ctx *ctx = s->ctx;
  if (ctx->cost_limit &&
      (ctx->cost > ctx->cost_limit || (ctx->cost_limit - ctx->cost) / per < list->n))
    return op_macro(s, n); /* the limit may strike part-way: let the loop find where */
  if (!litset_match(pl->set, r.s, r.n)) {
    ctx->cost += per * list->n;
    return value_bool(0);
  }
  for (uint32_t i = 0; i < list->n; i++)
    if (lit_pred(pl->kind, &r, &list->items[i])) {
      ctx->cost += per * (i + 1);
      return value_bool(1);
    }
  /* not reached: the set matched, so some element does */
  assert(!"OP_EXISTS_LIT: the literal set matched but no element did");
  return op_macro(s, n);
}

/* OP_STR_PRED: startsWith/endsWith/contains of a constant, inline (with
 * what `contains` charges). */
NOINLINE static value op_str_pred(est *s, const pnode *n) {
  value r = evk(s, KID(s, n, 0));
  if (r.kind != V_STRING) return r.kind == V_ERROR ? r : op_call(s, n);
  if (n->flags == PLIT_CONTAINS) {
    const uint64_t units = r.n / 16 + 1;
    eval_ctx *ctx = s->ctx;
    /* over the limit: the call itself says so */
    if (ctx->cost_limit && (ctx->cost > ctx->cost_limit || ctx->cost_limit - ctx->cost < units))
      return op_call(s, n);
    ctx->cost += units;
  }
  return value_bool(lit_pred(n->flags, &r, &n->k));
}

/* OP_CONTAINS_IP: a constant cidr() against an ip() value, both parsed. */
NOINLINE static value op_contains_ip(est *s, const pnode *n) {
  value a = evk(s, KID(s, n, 1));
  int r = net_contains_ip_fast(&n->k, &a);
  return r >= 0 ? value_bool(r) : op_call(s, n);
}

/* ---- the walk ----
 *
 * One small function per opcode, reached through the node's `fn`: the
 * per-node overhead is what separates a compiled condition from the same
 * test written by hand, so a visit costs one indirect call and no big
 * prologue. Children go through `evk`, which answers constants and variable
 * references without a call. Every handler is named op_<what> (eval_op_fn
 * below maps each opcode to one); the helpers they share are not (arith_*,
 * eval_in, select_field...). */

#define OPFN NOINLINE static value

OPFN op_const(est *s, const pnode *n) { return n->k; }

OPFN op_var(est *s, const pnode *n) {
  value v;
  if (lookup(s, n->k.s, n->k.n, &v)) return v;
  if (n->aux) return value_type((value_kind)(n->aux - 1));
  return value_error_lazy(VE_UNDECLARED, n->k.s, n->k.n);
}

OPFN op_qvar(est *s, const pnode *n) {
  const pqual *q = &s->p->quals[n->aux];
  return n->flags & PQVAR_HAS ? eval_qvar_has(s, q) : eval_qvar(s, q);
}

OPFN op_slot(est *s, const pnode *n) { return s->slots[n->aux]; }

OPFN op_select(est *s, const pnode *n) {
  value v = evk(s, KID(s, n, 0));
  return select_field(s, &v, &n->k);
}

OPFN op_has(est *s, const pnode *n) {
  value v = evk(s, KID(s, n, 0));
  if (v.kind == V_MAP) return value_bool(map_get_str(&v, n->k.s, n->k.n) != NULL);
  if (v.kind == V_ERROR) return v;
  return value_errorf(s->ctx->arena, "has(): type '%s' does not support field selection",
                      kname(&v));
}

OPFN op_index(est *s, const pnode *n) {
  value c = evk(s, KID(s, n, 0));
  if (c.kind == V_ERROR) return c;
  value k = evk(s, KID(s, n, 1));
  if (k.kind == V_ERROR) return k;
  return eval_index(s, &c, &k);
}

/* && and ||, n-ary (the compiler flattens chains): a decisive operand (false
 * for &&, true for ||) wins over anything, errors included, wherever it is;
 * otherwise the first error or non-bool operand is the answer. */
OPFN op_logic(est *s, const pnode *n) {
  const int absorbing = n->op == OP_OR;
  value bad = value_null();
  for (uint32_t j = 0; j < n->nkids; j++) {
    value v = evk(s, KID(s, n, j));
    if (v.kind == V_BOOL) {
      if (v.b == absorbing) return v;
    } else if (bad.kind == V_NULL) {
      bad = v.kind == V_ERROR ? v : err_overload1(s, absorbing ? "_||_" : "_&&_", &v);
    }
  }
  return bad.kind == V_ERROR ? bad : value_bool(!absorbing);
}

OPFN op_not(est *s, const pnode *n) {
  value v = evk(s, KID(s, n, 0));
  if (v.kind == V_BOOL) return value_bool(!v.b);
  if (v.kind == V_ERROR) return v;
  return err_overload1(s, "!_", &v);
}

OPFN op_cond(est *s, const pnode *n) {
  value c = evk(s, KID(s, n, 0));
  if (c.kind == V_BOOL) return evk(s, KID(s, n, c.b ? 1 : 2));
  if (c.kind == V_ERROR) return c;
  return err_overload1(s, "_?_:_", &c);
}

OPFN op_negate(est *s, const pnode *n) {
  value v = evk(s, KID(s, n, 0));
  if (v.kind == V_ERROR) return v;
  return arith_neg(s, &v);
}

/* The strict binary operators: the first error among the operands wins. */
OPFN op_binary(est *s, const pnode *n) {
  value a = evk(s, KID(s, n, 0));
  if (a.kind == V_ERROR) return a;
  value b = evk(s, KID(s, n, 1));
  if (b.kind == V_ERROR) return b;
  switch (n->op) {
    case OP_ADD:
      return arith_add(s, &a, &b);
    case OP_SUB:
      return arith_sub(s, &a, &b);
    case OP_MUL:
      return arith_mul(s, &a, &b);
    case OP_DIV:
      return arith_div(s, &a, &b);
    case OP_MOD:
      return arith_mod(s, &a, &b);
    case OP_EQ:
      return value_bool(value_equal(&a, &b));
    case OP_NE:
      return value_bool(!value_equal(&a, &b));
    case OP_IN:
      return eval_in(s, &a, &b);
    default:
      return arith_order(s, n->op, &a, &b);
  }
}

OPFN op_eq_const(est *s, const pnode *n) {
  value a = evk(s, KID(s, n, 0));
  if (a.kind == V_ERROR) return a;
  int eq =
      (a.kind == V_STRING && n->k.kind == V_STRING) ? str_eq(&a, &n->k) : value_equal(&a, &n->k);
  return value_bool(n->op == OP_EQ_CONST ? eq : !eq);
}

OPFN op_in_const(est *s, const pnode *n) {
  value x = evk(s, KID(s, n, 0));
  if (x.kind == V_ERROR) return x;
  return eval_in_const(s, &x, n);
}

OPFN op_call_unknown(est *s, const pnode *n) {
  return value_errorf(s->ctx->arena, "unknown function '%.*s'", (int)n->k.n, n->k.s);
}

OPFN op_bind(est *s, const pnode *n) {
  s->slots[n->aux] = evk(s, KID(s, n, 0));
  return evk(s, KID(s, n, 1));
}

OPFN op_block(est *s, const pnode *n) {
  for (uint32_t j = 0; j + 1 < n->nkids; j++) s->slots[n->aux + j] = evk(s, KID(s, n, j));
  return evk(s, KID(s, n, n->nkids - 1));
}

OPFN op_bad(est *s, const pnode *n) { return VALUE_ERR("internal error: bad opcode"); }

pnode_fn eval_op_fn(opcode op) {
  switch (op) {
    case OP_CONST:
      return op_const;
    case OP_VAR:
      return op_var;
    case OP_QVAR:
      return op_qvar;
    case OP_SLOT:
      return op_slot;
    case OP_SELECT:
      return op_select;
    case OP_HAS:
      return op_has;
    case OP_INDEX:
      return op_index;
    case OP_AND:
    case OP_OR:
      return op_logic;
    case OP_NOT:
      return op_not;
    case OP_COND:
      return op_cond;
    case OP_NEG:
      return op_negate;
    case OP_ADD:
    case OP_SUB:
    case OP_MUL:
    case OP_DIV:
    case OP_MOD:
    case OP_EQ:
    case OP_NE:
    case OP_LT:
    case OP_LE:
    case OP_GT:
    case OP_GE:
    case OP_IN:
      return op_binary;
    case OP_EQ_CONST:
    case OP_NE_CONST:
      return op_eq_const;
    case OP_IN_CONST:
      return op_in_const;
    case OP_LIST:
      return op_list;
    case OP_MAP:
      return op_map;
    case OP_CALL:
      return op_call;
    case OP_CALL_UNKNOWN:
      return op_call_unknown;
    case OP_ALL:
    case OP_EXISTS:
    case OP_EXISTS_ONE:
    case OP_MAP_MACRO:
    case OP_FILTER:
    case OP_TRANSFORM_MAP:
      return op_macro;
    case OP_BIND:
      return op_bind;
    case OP_BLOCK:
      return op_block;
    case OP_EXISTS_LIT:
      return op_exists_lit;
    case OP_STR_PRED:
      return op_str_pred;
    case OP_CONTAINS_IP:
      return op_contains_ip;
    case OP_COUNT:
      break;
  }
  return op_bad;
}

static value ev(est *s, uint32_t i) {
  const pnode *n = &s->p->nodes[i];
  return n->fn(s, n);
}

/* Evaluates a child: constants and variable references are answered here,
 * everything else goes through the dispatcher. */
static inline __attribute__((always_inline)) value evk(est *s, uint32_t i) {
  const pnode *n = &s->p->nodes[i];
  switch (n->op) {
    case OP_CONST:
      return n->k;
    case OP_VAR: {
      value v;
      if (lookup(s, n->k.s, n->k.n, &v)) return v;
      return op_var(s, n); /* unbound: a type name or an error */
    }
    case OP_QVAR:
      if (n->flags & PQVAR_HAS) return op_qvar(s, n);
      return eval_qvar(s, &s->p->quals[n->aux]);
    case OP_EQ_CONST:
    case OP_NE_CONST:
      return op_eq_const(s, n);
    case OP_IN_CONST:
      return op_in_const(s, n);
    case OP_AND:
    case OP_OR:
      return op_logic(s, n);
    case OP_NOT:
      return op_not(s, n);
    default:
      return n->fn(s, n);
  }
}

value eval_program_node(const expr_program *p, uint32_t root, const expr_activation *act,
                        eval_ctx *ctx, value *slots) {
  est s;
  est_init(&s, p, act, ctx, slots);
  return value_error_text(ctx->arena, ev(&s, root));
}

/* The walk's entry, in two copies: expr_eval writes a lazy error's message,
 * expr_eval_quiet (feature extraction) leaves it to the caller. */
#define EVAL_ENTRY(p, act, ctx)                                             \
  value local[16];                                                          \
  value *slots = local;                                                     \
  if ((p)->nslots > 16) {                                                   \
    slots = arena_alloc((ctx)->arena, (size_t)(p)->nslots * sizeof(value)); \
    if (!slots) return err_nomem();                                         \
  }                                                                         \
  est s;                                                                    \
  est_init(&s, p, act, ctx, slots);                                         \
  value r = ev(&s, (p)->root);                                              \
  if (over_cost(ctx)) return VALUE_ERR("cost limit exceeded")

value expr_eval_quiet(const expr_program *p, const expr_activation *act, eval_ctx *ctx) {
  EVAL_ENTRY(p, act, ctx);
  return r;
}

value expr_eval(const expr_program *p, const expr_activation *act, eval_ctx *ctx) {
  EVAL_ENTRY(p, act, ctx);
  if (r.kind == V_ERROR && (r.flags & VF_LAZY)) return value_error_format(ctx->arena, r);
  return r;
}
