/* program.c — a compiled program's own parts, beside the compiler that emits
 * them: what the compiler (compile.c) and the image loader (image.c) both
 * build — constants copied deep into the program's arena, call sites with
 * their overloads prepared — its freeing, and what callers outside src/expr/
 * may ask of a finished program (refs.h: the names it looks up, the shape of
 * its root; expr.h: the unknown functions it calls) without program.h.
 *
 * Not here: the AST walk that decides what to emit (compile.c). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "expr/program.h"
#include "expr/refs.h"

/* ---- constants ---- */

int value_copy_deep(arena *a, const value *in, value *out) {
  *out = *in;
  switch (in->kind) {
    case V_STRING:
      if (net_value_extra(in)) { /* text, NUL, parsed form: all of it */
        char *s = arena_memdup(a, in->s, (size_t)in->n + 1 + net_value_extra(in));
        if (!s) return -1;
        out->s = s;
        return 0;
      }
      /* fall through */
    case V_BYTES:
    case V_ERROR:
      if (in->n || in->kind == V_ERROR) {
        char *s = arena_strndup(a, in->s ? in->s : "", in->n);
        if (!s) return -1;
        out->s = s;
      }
      return 0;
    case V_LIST: {
      if (!in->n) return 0;
      value *items = arena_alloc(a, (size_t)in->n * sizeof(value));
      if (!items) return -1;
      for (uint32_t i = 0; i < in->n; i++)
        if (value_copy_deep(a, &in->items[i], &items[i])) return -1;
      out->items = items;
      return 0;
    }
    case V_MAP: {
      if (!in->n) return 0;
      map_entry *e = arena_alloc(a, (size_t)in->n * sizeof *e);
      if (!e) return -1;
      for (uint32_t i = 0; i < in->n; i++)
        if (value_copy_deep(a, &in->entries[i].key, &e[i].key) ||
            value_copy_deep(a, &in->entries[i].val, &e[i].val))
          return -1;
      out->entries = e;
      return 0;
    }
    default:
      return 0;
  }
}

/* ---- call sites ---- */

static int fits_call(const builtin *b, int receiver, uint32_t nargs) {
  if (b->receiver != receiver) return 0;
  return b->variadic ? nargs >= b->nargs : nargs == b->nargs;
}
static int kind_ok(const builtin *b, uint32_t i, uint8_t kind) {
  uint8_t k = (i < b->nargs && i < 4) ? b->kinds[i] : b->kinds[3];
  return k == K_ANY || k == kind;
}
void program_release_calls(const pcall *calls, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t j = 0; j < calls[i].ncand; j++)
      if (calls[i].aux[j] && calls[i].cand[j]->release) calls[i].cand[j]->release(calls[i].aux[j]);
}
int program_call_site(arena *a, const builtin *first, uint32_t count, const char *name,
                      uint32_t name_len, int receiver, uint32_t nk, const value *args,
                      const uint8_t *isc, int defer_jit, pcall *out, int *has_prepare, char *msg,
                      size_t msg_size) {
  uint32_t ncand = 0;
  for (uint32_t j = 0; j < count; j++) ncand += fits_call(&first[j], receiver, nk);
  /* the three per-candidate arrays in one piece (a program reads hundreds
   * of call sites); pointers first, for their alignment */
  const size_t m = ncand ? ncand : 1;
  char *block = arena_zalloc(a, m * (sizeof(builtin *) + sizeof(void *) + sizeof(pcall_sig)));
  const builtin **cand = (const builtin **)(void *)block;
  void **aux = block ? (void **)(void *)(block + m * sizeof(builtin *)) : NULL;
  pcall_sig *sig =
      block ? (pcall_sig *)(void *)(block + m * (sizeof(builtin *) + sizeof(void *))) : NULL;
  /* the registry's own name when it is this one (static, so it outlives
   * every program); a copy otherwise */
  const char *s = count && strlen(first->name) == name_len && !memcmp(first->name, name, name_len)
                      ? first->name
                      : arena_strndup(a, name, name_len);
  if (!block || !s) return -1;
  uint32_t k = 0;
  *has_prepare = 0;
  for (uint32_t j = 0; j < count; j++) {
    const builtin *b = &first[j];
    if (!fits_call(b, receiver, nk)) continue;
    if (!b->variadic && nk <= 4) {
      sig[k].exact = 1;
      for (uint32_t i = 0; i < nk; i++)
        if (b->kinds[i] != K_ANY) {
          sig[k].kinds |= (uint32_t)b->kinds[i] << (8 * i);
          sig[k].mask |= 0xffu << (8 * i);
        }
    }
    cand[k++] = b;
    *has_prepare |= b->prepare != NULL;
  }
  assert(k == ncand); /* the second pass keeps exactly the overloads the first counted */
  *out = (pcall){s, name_len, ncand, cand, aux, sig};
  /* `prepare` of every candidate that has one, when some argument is a
   * constant of a kind the candidate accepts */
  int any = 0;
  for (uint32_t i = 0; args && isc && i < nk; i++) any |= isc[i];
  if (!any || nk > 16) return 0;
  for (uint32_t j = 0; j < ncand; j++) {
    const builtin *b = cand[j];
    if (!b->prepare) continue;
    int ok = 1;
    for (uint32_t i = 0; i < nk && ok; i++)
      if (isc[i] && !kind_ok(b, i, args[i].kind)) ok = 0;
    if (!ok) continue;
    msg[0] = '\0';
    aux[j] = b->prepare(args, isc, nk, defer_jit, msg, msg_size);
    if (!aux[j] && msg[0]) {
      program_release_calls(out, 1);
      return -2;
    }
  }
  return 0;
}

/* ---- the finished program ---- */

void expr_free(expr_program *p) {
  if (!p) return;
  program_release_calls(p->calls, p->ncalls);
  arena_free(&p->mem);
  free(p);
}
uint32_t expr_refs(const expr_program *p, expr_ref *out, uint32_t max) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < p->nnodes; i++) {
    const pnode *nd = &p->nodes[i];
    if (nd->op == OP_VAR) {
      if (n < max) out[n] = (expr_ref){nd->k.s, nd->k.n};
      n++;
    } else if (nd->op == OP_QVAR) {
      const pqual *q = &p->quals[nd->aux];
      for (uint32_t c = 0; c < q->ncand; c++, n++)
        if (n < max) out[n] = (expr_ref){q->cands[c].name, q->cands[c].len};
    }
  }
  return n;
}

int expr_root(const expr_program *p, expr_ref *var, expr_ref *field) {
  assert(p->root < p->nnodes); /* a compiled program always has its root */
  const pnode *r = &p->nodes[p->root];
  if (r->op == OP_VAR && r->k.kind == V_STRING) {
    *var = (expr_ref){r->k.s, r->k.n};
    return EXPR_ROOT_VAR;
  }
  if (r->op == OP_SELECT && r->nkids == 1 && r->k.kind == V_STRING) {
    const pnode *v = &p->nodes[p->kids[r->kids]];
    if (v->op == OP_VAR && v->k.kind == V_STRING) {
      *var = (expr_ref){v->k.s, v->k.n};
      *field = (expr_ref){r->k.s, r->k.n};
      return EXPR_ROOT_FIELD;
    }
  }
  return EXPR_ROOT_OTHER;
}

uint32_t expr_unknown_functions(const expr_program *p, const char *const **names) {
  *names = p->unknown_fns;
  return p->nunknown;
}
