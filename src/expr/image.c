/* image.c — program images (contract in image.h).
 *
 * The layout is the program's own arrays in order, in the machine's byte
 * order (images never leave the machine's store, and the fingerprint names
 * the build):
 *
 *   counts   nnodes root nkids ncalls nquals nsets nlits nslots nunknown srclen
 *   src      srclen bytes and a NUL
 *   nodes    op flags reserved pos nkids kids aux reserved2 (the node's first
 *            24 bytes, as they lie in memory), then the value k
 *   kids     u32 each
 *   calls    name, receiver style, overload count, where the name's
 *            overloads start in the registry (all checked against it)
 *   quals    full name, components (values), candidates (name, used), type
 *   sets     all_strings, table size, table
 *   lits     kind
 *   unknown  names
 *
 * A value is kind flags reserved n (its first 8 bytes), then its payload:
 * nothing (null, type), one byte (bool), eight (int, uint, double,
 * timestamp, duration), n bytes and a NUL (string, bytes, error message:
 * every string of an image is NUL-terminated, so that the program uses it
 * where it lies instead of a copy) or n values
 * (list) / 2n (map). A string is written without the parsed form an ip()
 * or cidr() value keeps after its text; reading parses the text again with
 * the same built-in.
 *
 * What reading checks, besides every length against the bytes left: each
 * node's opcode, and its children (existing, earlier in the array than the
 * node, depth bounded, and below the root each the child of one node only)
 * so that evaluation is a walk of a finite tree; each index a node holds
 * (call site, qualified name, set, literal set, variable slots) against its
 * array; the number of children and the kind of constant each opcode reads;
 * each call site's overload count against the registry; `in` tables
 * against their list; every value's kind, flags, UTF-8 and ranges.
 * Whatever passes is a program the evaluator can run without reading
 * outside it: at worst a damaged image that still passes means a wrong
 * answer, which the CRC32C the store keeps for the file guards against
 * (src/policy/cache.c). A trusted read (expr_image_read_trusted: the
 * store's own file, of this user, its CRC checked) skips the checks that
 * the read-back before the image was kept already passed: UTF-8, node
 * fields, the tree's shape; lengths are checked all the same.
 *
 * A program's memory is one arena chunk, of the size the writer measured
 * by reading the image back (expr_image_check): a process that decides
 * once pays a page fault for every fresh page it touches.
 *
 * Not here: the store (cache.c), and what an image is for (strategy.c). */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "expr/image.h"

#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sha256.h"
#include "core/timefmt.h"
#include "core/utf8.h"
#include "expr/litset.h"
#include "expr/program.h"

/* Bump whenever what is written, or what it means, changes (2: a
 * qualified name's node may carry PQVAR_HAS). */
#define IMAGE_LAYOUT 3 /* 3: every string NUL-terminated, read in place */

#define MAX_DEPTH 1024      /* nesting of nodes */
#define MAX_VALUE_DEPTH 512 /* nesting of constant values */
#define MAX_SLOTS 65536     /* comprehension variables a program may need */
#define VF_NETBIN_IMG 0x08  /* lib_net.c's VF_NETBIN: a parsed form follows the text */

#ifndef VD_VERSION_STRING
#define VD_VERSION_STRING "0"
#endif

static uint32_t registry_size; /* entries in builtin_table(), counted with the fingerprint */

/* ---- writing ---- */

static void put(json_buf *b, const void *p, size_t n) { json_buf_put(b, p, n); }
static void put_u8(json_buf *b, uint8_t x) { json_buf_putc(b, (char)x); }
static void put_u32(json_buf *b, uint32_t x) { put(b, &x, 4); }
static void put_u64(json_buf *b, uint64_t x) { put(b, &x, 8); }

/* n bytes and a NUL, so that the reader can use them where they lie. */
static void put_bytes(json_buf *b, const char *s, uint32_t n) {
  if (n) put(b, s, n);
  put_u8(b, 0);
}

static void put_str(json_buf *b, const char *s, uint32_t n) {
  put_u32(b, n);
  put_bytes(b, s, n);
}

/* The fields written as they lie in memory: a value's kind, flags,
 * reserved and n; a node's fields before its evaluator function. */
#define VALUE_HEAD 8
#define NODE_HEAD 24
_Static_assert(offsetof(value, s) == VALUE_HEAD, "value layout");
_Static_assert(offsetof(pnode, fn) == NODE_HEAD, "pnode layout");

static void put_value(json_buf *b, const value *v) {
  put(b, v, VALUE_HEAD);
  switch (v->kind) {
    case V_BOOL:
      put_u8(b, v->b ? 1 : 0);
      break;
    case V_INT:
    case V_UINT:
    case V_DOUBLE:
    case V_TIMESTAMP:
    case V_DURATION:
      put_u64(b, v->u);
      break;
    case V_STRING:
    case V_BYTES:
    case V_ERROR:
      put_bytes(b, v->s, v->n);
      break;
    case V_LIST:
      for (uint32_t i = 0; i < v->n; i++) put_value(b, &v->items[i]);
      break;
    case V_MAP:
      for (uint32_t i = 0; i < v->n; i++) {
        put_value(b, &v->entries[i].key);
        put_value(b, &v->entries[i].val);
      }
      break;
    default: /* null, type: all in the header */
      break;
  }
}

void expr_image_write(const expr_program *p, json_buf *b) {
  uint32_t nkids = 0, nsets = 0, nlits = 0, nquals = 0;
  for (uint32_t i = 0; i < p->nnodes; i++) { /* the arrays' lengths, from their users */
    const pnode *n = &p->nodes[i];
    if (n->nkids && n->kids + n->nkids > nkids) nkids = n->kids + n->nkids;
    if (n->op == OP_IN_CONST && n->aux > nsets) nsets = n->aux;
    if (n->op == OP_EXISTS_LIT && n->reserved2 + 1 > nlits) nlits = n->reserved2 + 1;
    if (n->op == OP_QVAR && n->aux + 1 > nquals) nquals = n->aux + 1;
  }
  put_u32(b, p->nnodes);
  put_u32(b, p->root);
  put_u32(b, nkids);
  put_u32(b, p->ncalls);
  put_u32(b, nquals);
  put_u32(b, nsets);
  put_u32(b, nlits);
  put_u32(b, p->nslots);
  put_u32(b, p->nunknown);
  put_str(b, p->src, (uint32_t)p->src_len);
  for (uint32_t i = 0; i < p->nnodes; i++) {
    const pnode *n = &p->nodes[i];
    put(b, n, NODE_HEAD);
    put_value(b, &n->k);
  }
  if (nkids) put(b, p->kids, (size_t)nkids * sizeof *p->kids);
  for (uint32_t i = 0; i < p->ncalls; i++) {
    const pcall *c = &p->calls[i];
    const builtin *first = NULL;
    builtin_lookup(c->name, c->name_len, &first);
    put_str(b, c->name, c->name_len);
    put_u8(b, c->ncand ? c->cand[0]->receiver : 0);
    put_u32(b, c->ncand);
    put_u32(b, first ? (uint32_t)(first - builtin_table())
                     : UINT32_MAX); /* where its overloads start */
  }
  for (uint32_t i = 0; i < nquals; i++) {
    const pqual *q = &p->quals[i];
    put_str(b, q->full, q->full_len);
    put_u32(b, q->ncomp);
    for (uint32_t j = 0; j < q->ncomp; j++) put_value(b, &q->comps[j]);
    put_u32(b, q->ncand);
    for (uint32_t j = 0; j < q->ncand; j++) {
      put_str(b, q->cands[j].name, q->cands[j].len);
      put_u32(b, q->cands[j].used);
    }
    put_u32(b, q->type_kind);
  }
  for (uint32_t i = 0; i < nsets; i++) {
    const pset *s = &p->sets[i];
    put_u8(b, s->all_strings);
    uint32_t cap = s->slots ? s->mask + 1 : 0;
    put_u32(b, cap);
    if (cap) put(b, s->slots, (size_t)cap * sizeof *s->slots);
  }
  for (uint32_t i = 0; i < nlits; i++) put_u8(b, p->lits[i].kind);
  for (uint32_t i = 0; i < p->nunknown; i++)
    put_str(b, p->unknown_fns[i], (uint32_t)strlen(p->unknown_fns[i]));
}

/* ---- reading ---- */

typedef struct rd {
  const uint8_t *p, *end;
  arena *mem;    /* the program's */
  arena scratch; /* ip()/cidr() results before they are copied */
  int trusted;   /* expr_image_read_trusted: the strings' UTF-8 not checked again */
  int bad;
} rd;

static int take(rd *r, void *out, size_t n) {
  if (r->bad || (size_t)(r->end - r->p) < n) {
    r->bad = 1;
    if (n) memset(out, 0, n);
    return -1;
  }
  memcpy(out, r->p, n);
  r->p += n;
  return 0;
}

static uint8_t get_u8(rd *r) {
  uint8_t x;
  take(r, &x, 1);
  return x;
}
static uint32_t get_u32(rd *r) {
  uint32_t x;
  take(r, &x, 4);
  return x;
}
static uint64_t get_u64(rd *r) {
  uint64_t x;
  take(r, &x, 8);
  return x;
}

/* Whether n elements of at least `each` bytes can still follow. */
static int room(rd *r, uint64_t n, size_t each) {
  if (r->bad || n > (uint64_t)(r->end - r->p) / (each ? each : 1)) r->bad = 1;
  return !r->bad;
}

static void *alloc_n(rd *r, uint64_t n, size_t size) {
  if (r->bad) return NULL;
  void *p = arena_zalloc(r->mem, (size_t)(n ? n : 1) * size);
  if (!p) r->bad = 1;
  return p;
}

/* The same, not zeroed: for arrays whose every element the reader sets
 * whole (nodes, values), which zeroing first cost a tenth of a read. */
static void *alloc_set(rd *r, uint64_t n, size_t size) {
  if (r->bad) return NULL;
  void *p = arena_alloc(r->mem, (size_t)(n ? n : 1) * size);
  if (!p) r->bad = 1;
  return p;
}

/* n bytes and their NUL, used where they lie: the caller keeps the image
 * as long as the program (the store's file stays mapped with its bundle).
 * Copying them was a fifth of reading a program with long string lists. */
static const char *get_bytes(rd *r, uint32_t n) {
  if (r->bad || (size_t)(r->end - r->p) <= n || r->p[n] != '\0') {
    r->bad = 1;
    return NULL;
  }
  const char *s = (const char *)r->p;
  r->p += (size_t)n + 1;
  return s;
}

static const char *get_str(rd *r, uint32_t *len) {
  *len = get_u32(r);
  return get_bytes(r, *len);
}

/* An ip() or cidr() constant: the built-in parses the text again, and the
 * value it gives must be the one written. */
static int net_again(rd *r, value *v, uint8_t flags) {
  const char *fname = (flags & VF_CIDR) ? "cidr" : "ip";
  const builtin *first;
  uint32_t count = builtin_lookup(fname, (uint32_t)strlen(fname), &first);
  for (uint32_t i = 0; i < count; i++) {
    const builtin *b = &first[i];
    if (b->receiver || b->nargs != 1 || b->variadic || b->kinds[0] != V_STRING) continue;
    eval_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.arena = &r->scratch;
    value arg = value_str(v->s, v->n);
    value out = b->fn(&ctx, &arg, 1, NULL);
    if (out.kind != V_STRING || out.flags != flags || out.n != v->n || memcmp(out.s, v->s, v->n))
      return -1;
    return value_copy_deep(r->mem, &out, v);
  }
  return -1;
}

static int get_value(rd *r, value *v, int depth) {
  memset(v, 0, sizeof *v);
  if (depth > MAX_VALUE_DEPTH) return r->bad = 1, -1;
  if (take(r, v, VALUE_HEAD)) return -1;
  uint8_t flags = v->flags;
  v->flags = 0;
  /* flags each kind may carry, and the reserved field only an error uses */
  int ok = v->reserved == 0 && flags == 0;
  switch (v->kind) {
    case V_NULL:
      ok = ok && v->n == 0;
      break;
    case V_BOOL: {
      uint8_t x = get_u8(r);
      ok = ok && x <= 1 && v->n == 0;
      v->b = x == 1;
      break;
    }
    case V_INT:
    case V_UINT:
    case V_DOUBLE:
      v->u = get_u64(r);
      ok = ok && v->n == 0;
      break;
    case V_TIMESTAMP:
      v->u = get_u64(r);
      ok = ok && v->n < 1000000000u && v->i >= TIMEFMT_MIN_SEC && v->i <= TIMEFMT_MAX_SEC;
      break;
    case V_DURATION: {
      v->u = get_u64(r);
      int32_t ns = (int32_t)v->n;
      ok = ok && ns > -1000000000 && ns < 1000000000 && v->i >= -TIMEFMT_MAX_DURATION_SEC &&
           v->i <= TIMEFMT_MAX_DURATION_SEC && !(v->i > 0 && ns < 0) && !(v->i < 0 && ns > 0);
      break;
    }
    case V_TYPE:
      ok = ok && v->n < V_ERROR;
      break;
    case V_STRING: {
      ok = v->reserved == 0 && (flags & ~(VF_ASCII | VF_IP | VF_CIDR | VF_NETBIN_IMG)) == 0 &&
           !((flags & VF_IP) && (flags & VF_CIDR));
      if (!ok || !(v->s = get_bytes(r, v->n))) return r->bad = 1, -1;
      int ascii = 0;
      if (!r->trusted &&
          (utf8_validate(v->s, v->n, &ascii) != v->n || ((flags & VF_ASCII) && !ascii)))
        return r->bad = 1, -1;
      if (flags & (VF_IP | VF_CIDR)) {
        if (!(flags & VF_NETBIN_IMG)) return r->bad = 1, -1; /* not how lib_net.c makes them */
        if (net_again(r, v, flags)) return r->bad = 1, -1;
      } else if (flags & VF_NETBIN_IMG) {
        return r->bad = 1, -1;
      }
      v->flags = flags;
      return 0;
    }
    case V_BYTES:
      ok = ok && (v->s = get_bytes(r, v->n)) != NULL;
      break;
    case V_ERROR:
      /* a lazy error keeps its template in `reserved` (value.h) */
      ok = (flags == 0 && v->reserved == 0) ||
           (flags == VF_LAZY && v->reserved >= VE_NO_SUCH_KEY && v->reserved <= VE_UNDECLARED);
      ok = ok && (v->s = get_bytes(r, v->n)) != NULL;
      v->flags = flags;
      break;
    case V_LIST: {
      if (!ok || !room(r, v->n, 8)) return r->bad = 1, -1;
      value *items = v->n ? alloc_set(r, v->n, sizeof *items) : NULL;
      if (v->n && !items) return -1;
      for (uint32_t i = 0; i < v->n; i++)
        if (get_value(r, &items[i], depth + 1)) return -1;
      v->items = items;
      break;
    }
    case V_MAP: {
      if (!ok || !room(r, v->n, 16)) return r->bad = 1, -1;
      map_entry *e = v->n ? alloc_set(r, v->n, sizeof *e) : NULL;
      if (v->n && !e) return -1;
      for (uint32_t i = 0; i < v->n; i++)
        if (get_value(r, &e[i].key, depth + 1) || get_value(r, &e[i].val, depth + 1)) return -1;
      v->entries = e;
      break;
    }
    default:
      ok = 0;
  }
  if (!ok || r->bad) return r->bad = 1, -1;
  return 0;
}

/* The constant a node holds is of the kind its opcode reads. */
static int is_str(const value *v) { return v->kind == V_STRING; }

/* Children each opcode reads: exactly `lo` when hi == lo, else lo..hi
 * (UINT32_MAX: any). */
static void kid_range(uint8_t op, uint32_t *lo, uint32_t *hi) {
  *lo = 0;
  *hi = 0;
  switch (op) {
    case OP_SELECT:
    case OP_HAS:
    case OP_NOT:
    case OP_NEG:
    case OP_EQ_CONST:
    case OP_NE_CONST:
    case OP_IN_CONST:
      *lo = *hi = 1;
      break;
    case OP_INDEX:
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
    case OP_BIND:
    case OP_ALL:
    case OP_EXISTS:
    case OP_EXISTS_ONE:
    case OP_FILTER:
    case OP_EXISTS_LIT:
    case OP_STR_PRED:
    case OP_CONTAINS_IP:
      *lo = *hi = 2;
      break;
    case OP_COND:
      *lo = *hi = 3;
      break;
    case OP_MAP_MACRO:
    case OP_TRANSFORM_MAP:
      *lo = 2;
      *hi = 3;
      break;
    case OP_AND:
    case OP_OR:
    case OP_LIST:
    case OP_MAP:
    case OP_CALL:
      *hi = UINT32_MAX;
      break;
    case OP_BLOCK:
      *lo = 1;
      *hi = UINT32_MAX;
      break;
    default: /* OP_CONST, OP_VAR, OP_QVAR, OP_SLOT, OP_CALL_UNKNOWN */
      break;
  }
}

static int uses_call(uint8_t op) {
  return op == OP_CALL || op == OP_STR_PRED || op == OP_CONTAINS_IP;
}

/* The checks of one node that need only its own fields and the counts. */
static int node_ok(const pnode *n, const expr_program *p, uint32_t nquals, uint32_t nsets,
                   uint32_t nlits) {
  uint32_t lo, hi;
  kid_range(n->op, &lo, &hi);
  if (n->nkids < lo || n->nkids > hi) return 0;
  switch (n->op) {
    case OP_VAR:
      return is_str(&n->k) && n->aux <= (uint32_t)V_TYPE + 1;
    case OP_QVAR:
      return n->aux < nquals && n->flags <= PQVAR_HAS;
    case OP_SLOT:
    case OP_BIND:
      return n->aux < p->nslots;
    case OP_SELECT:
    case OP_HAS:
    case OP_CALL_UNKNOWN:
      return is_str(&n->k);
    case OP_MAP:
      return n->nkids % 2 == 0;
    case OP_IN_CONST:
      return (n->k.kind == V_LIST || n->k.kind == V_MAP) && n->aux <= nsets;
    case OP_CALL:
      return n->aux < p->ncalls;
    case OP_STR_PRED:
      return n->aux < p->ncalls && is_str(&n->k) && n->flags <= PLIT_CONTAINS;
    case OP_CONTAINS_IP:
      return n->aux < p->ncalls && is_str(&n->k);
    case OP_EXISTS_LIT:
      if (n->reserved2 >= nlits) return 0;
      /* fall through */
    case OP_ALL:
    case OP_EXISTS:
    case OP_EXISTS_ONE:
    case OP_MAP_MACRO:
    case OP_FILTER:
    case OP_TRANSFORM_MAP:
      return n->flags <= 1 && n->aux < p->nslots && n->aux + n->flags < p->nslots;
    case OP_BLOCK:
      return n->aux <= p->nslots && n->nkids - 1 <= p->nslots - n->aux;
    default:
      return n->op < OP_COUNT;
  }
}

/* The literal set of the OP_EXISTS_LIT node n, made again from its list
 * as compile.c made it. */
static const litset *lits_again(arena *a, const expr_program *p, const pnode *n, uint8_t kind) {
  static const uint8_t anchors[] = {LIT_START, LIT_END, 0};
  const pnode *range = &p->nodes[p->kids[n->kids]];
  const pnode *body = &p->nodes[p->kids[n->kids + 1]];
  if (kind > PLIT_CONTAINS || range->op != OP_CONST || range->k.kind != V_LIST || !body->nkids)
    return NULL;
  const value *list = &range->k;
  lit *l = malloc(((size_t)list->n + 1) * sizeof *l);
  if (!l) return NULL;
  for (uint32_t i = 0; i < list->n; i++) {
    if (list->items[i].kind != V_STRING) {
      free(l);
      return NULL;
    }
    l[i] = (lit){list->items[i].s, list->items[i].n, anchors[kind]};
  }
  const litset *set = litset_build(a, l, list->n, 0);
  free(l);
  return set;
}

static void release_calls(const pcall *calls, uint32_t n) {
  for (uint32_t i = 0; calls && i < n; i++)
    for (uint32_t j = 0; j < calls[i].ncand; j++)
      if (calls[i].aux && calls[i].aux[j] && calls[i].cand[j]->release)
        calls[i].cand[j]->release(calls[i].aux[j]);
}

/* The chunk header arena.c puts before a chunk's bytes (a pointer and a
 * size), for sizing a program's one chunk exactly. */
#define CHUNK_HEAD (2 * sizeof(void *))

static int image_read(const void *data, size_t len, const expr_opts *opts, size_t mem, int trusted,
                      expr_program **out) {
  *out = NULL;
  expr_image_fingerprint(); /* counts the registry */
  expr_program *p = calloc(1, sizeof *p);
  if (!p) return -1;
  arena_init(&p->mem, NULL, 0, 0);
  /* one chunk, of what the program is known to take: fresh pages a
   * process that decides once does not need cost it a fault each */
  if (mem > 16 * (uint64_t)len + 65536) mem = 0; /* not what an image of len bytes takes */
  arena_first_chunk(&p->mem, mem ? mem + CHUNK_HEAD : 2 * len + 512);
  rd r;
  memset(&r, 0, sizeof r);
  r.p = data;
  r.end = r.p + len;
  r.mem = &p->mem;
  r.trusted = trusted;
  arena_init(&r.scratch, NULL, 0, 1u << 20);
  uint32_t local[1024], *work = NULL, *parent, *depth, *owner_call, *owner_set, *owner_lit;
  pcall *calls = NULL;
  uint32_t ncalls_read = 0;

  const uint32_t nnodes = get_u32(&r), root = get_u32(&r), nkids = get_u32(&r),
                 ncalls = get_u32(&r), nquals = get_u32(&r), nsets = get_u32(&r),
                 nlits = get_u32(&r), nslots = get_u32(&r), nunknown = get_u32(&r);
  uint32_t srclen;
  const char *src = get_str(&r, &srclen);
  if (r.bad || !src || nnodes == 0 || root >= nnodes || nslots > MAX_SLOTS ||
      !room(&r, nnodes, NODE_HEAD + VALUE_HEAD) || !room(&r, nkids, 4) || !room(&r, ncalls, 13) ||
      !room(&r, nquals, 16) || !room(&r, nsets, 5) || !room(&r, nlits, 1) || !room(&r, nunknown, 4))
    goto bad;
  p->src = src;
  p->src_len = srclen;
  p->nnodes = nnodes;
  p->root = root;
  p->nslots = nslots;
  p->ncalls = ncalls;

  pnode *nodes = alloc_set(&r, nnodes, sizeof *nodes);
  if (!nodes) goto bad;
  for (uint32_t i = 0; i < nnodes && !r.bad; i++) {
    pnode *n = &nodes[i];
    if (take(&r, n, NODE_HEAD) || n->op >= OP_COUNT) goto bad;
    /* most nodes hold no constant: a null, all of its header zero */
    static const uint8_t null_head[VALUE_HEAD];
    if ((size_t)(r.end - r.p) >= VALUE_HEAD && memcmp(r.p, null_head, VALUE_HEAD) == 0) {
      r.p += VALUE_HEAD;
      memset(&n->k, 0, sizeof n->k); /* a null, all of it zero as written */
    } else if (get_value(&r, &n->k, 0))
      goto bad;
    n->fn = eval_op_fn((opcode)n->op);
  }
  p->nodes = nodes;
  uint32_t *kids = alloc_n(&r, nkids, sizeof *kids);
  if (!kids || take(&r, kids, (size_t)nkids * sizeof *kids)) goto bad;
  p->kids = kids;

  /* the shape: a tree whose children come before their parents */
  /* per node: parent, depth; per call site, set, literal set: its node */
  size_t nwork = 2 * (size_t)nnodes + ncalls + nsets + nlits;
  work = nwork <= sizeof local / sizeof local[0] ? local : malloc(nwork * sizeof *work);
  if (!work) goto bad;
  memset(work, 0, nwork * sizeof *work);
  parent = work;
  depth = parent + nnodes;
  owner_call = depth + nnodes;
  owner_set = owner_call + ncalls;
  owner_lit = owner_set + nsets;
  /* (An image the caller trusts, one this build wrote and read back
   * before keeping it, is not checked again: only its owners are found.) */
  for (uint32_t i = 0; i < nnodes; i++) {
    const pnode *n = &nodes[i];
    if (!trusted) {
      if (n->kids > nkids || n->nkids > nkids - n->kids) goto bad;
      if (!node_ok(n, p, nquals, nsets, nlits)) goto bad;
      uint32_t d = 0;
      for (uint32_t j = 0; j < n->nkids; j++) {
        uint32_t k = kids[n->kids + j];
        if (k >= i) goto bad;
        if (depth[k] > d) d = depth[k];
      }
      if (d >= MAX_DEPTH) goto bad;
      depth[i] = d + 1;
      if ((n->flags & PCALL_MEMO) && n->op == OP_CALL && n->nkids != 1) goto bad;
    }
    /* each call site, set and literal set belongs to one node (index + 1) */
    if (uses_call(n->op)) {
      if (owner_call[n->aux]) goto bad;
      owner_call[n->aux] = i + 1;
    }
    if (n->op == OP_IN_CONST && n->aux) {
      if (owner_set[n->aux - 1]) goto bad;
      owner_set[n->aux - 1] = i + 1;
    }
    if (n->op == OP_EXISTS_LIT) {
      if (owner_lit[n->reserved2]) goto bad;
      owner_lit[n->reserved2] = i + 1;
    }
  }
  /* What the root reaches is a tree: each node the child of one node.
   * (Nodes it does not reach are never evaluated: the compiler leaves one
   * behind, sharing its children, when it flattens `a && b && c`.) */
  parent[root] = UINT32_MAX;
  for (uint32_t i = nnodes; i-- > 0 && !trusted;) {
    if (!parent[i]) continue;
    const pnode *n = &nodes[i];
    for (uint32_t j = 0; j < n->nkids; j++) {
      uint32_t k = kids[n->kids + j];
      if (parent[k]) goto bad;
      parent[k] = i + 1;
    }
  }

  /* call sites: the overloads again, from the registry, for the node's
   * arguments, each prepared on the same constants as when compiled */
  calls = alloc_n(&r, ncalls, sizeof *calls);
  if (!calls) goto bad;
  p->calls = calls;
  int calls_bad = 0;
  for (uint32_t i = 0; i < ncalls && !calls_bad; i++) {
    uint32_t name_len;
    const char *name = get_str(&r, &name_len);
    uint8_t receiver = get_u8(&r);
    uint32_t ncand = get_u32(&r), at = get_u32(&r);
    calls_bad = r.bad || !name || receiver > 1 || strlen(name) != name_len;
    if (calls_bad) break;
    if (ncand == 0) { /* no overload fits (an error at run time): nothing to look up */
      calls[i] = (pcall){name, name_len, 0, NULL, NULL, NULL};
      ncalls_read = i + 1;
      continue;
    }
    /* the overloads named `name` start at `at` in the registry (one the
     * fingerprint names): checked, then counted, without a search */
    const builtin *table = builtin_table(), *first = table + at;
    calls_bad = at >= registry_size || strcmp(first->name, name) != 0 ||
                (at > 0 && strcmp(first[-1].name, name) == 0);
    if (calls_bad) break;
    uint32_t count = 1;
    while (first[count].name && strcmp(first[count].name, name) == 0) count++;
    const pnode *n = owner_call[i] ? &nodes[owner_call[i] - 1] : NULL;
    uint32_t nk = n ? n->nkids : 0;
    value args[16];
    uint8_t isc[16];
    for (uint32_t j = 0; n && j < nk && nk <= 16; j++) {
      const pnode *kid = &nodes[kids[n->kids + j]];
      isc[j] = !(receiver && j == 0) && kid->op == OP_CONST;
      args[j] = isc[j] ? kid->k : value_null();
    }
    int has_prepare = 0;
    char msg[256];
    calls_bad =
        program_call_site(&p->mem, first, count, name, name_len, receiver, nk,
                          n && nk <= 16 ? args : NULL, n && nk <= 16 ? isc : NULL,
                          opts && opts->defer_jit, &calls[i], &has_prepare, msg, sizeof msg) != 0;
    if (calls_bad) break;
    ncalls_read = i + 1;
    calls_bad =
        calls[i].ncand != ncand || (n && (n->flags & PCALL_MEMO) && n->op == OP_CALL && ncand != 1);
  }
  if (calls_bad) goto bad;

  /* qualified names */
  pqual *quals = alloc_n(&r, nquals, sizeof *quals);
  if (!quals) goto bad;
  for (uint32_t i = 0; i < nquals; i++) {
    pqual *q = &quals[i];
    q->full = get_str(&r, &q->full_len);
    q->ncomp = get_u32(&r);
    if (!q->full || !room(&r, q->ncomp, 8)) goto bad;
    value *comps = alloc_n(&r, q->ncomp, sizeof *comps);
    if (!comps) goto bad;
    for (uint32_t j = 0; j < q->ncomp; j++)
      if (get_value(&r, &comps[j], 0) || !is_str(&comps[j])) goto bad;
    q->comps = comps;
    q->ncand = get_u32(&r);
    if (!room(&r, q->ncand, 8)) goto bad;
    pcand *cands = alloc_n(&r, q->ncand, sizeof *cands);
    if (!cands) goto bad;
    for (uint32_t j = 0; j < q->ncand; j++) {
      cands[j].name = get_str(&r, &cands[j].len);
      cands[j].used = get_u32(&r);
      if (!cands[j].name) goto bad;
    }
    q->cands = cands;
    q->type_kind = get_u32(&r);
    if (r.bad || q->type_kind > (uint32_t)V_TYPE + 1) goto bad;
  }
  p->quals = quals;

  /* `in` tables: against the list or map of the node that reads them */
  pset *sets = alloc_n(&r, nsets, sizeof *sets);
  if (!sets) goto bad;
  for (uint32_t i = 0; i < nsets; i++) {
    pset *s = &sets[i];
    s->all_strings = get_u8(&r);
    uint32_t cap = get_u32(&r);
    if (r.bad || s->all_strings > 1 || (cap & (cap - 1)) || !room(&r, cap, 4)) goto bad;
    const pnode *n = owner_set[i] ? &nodes[owner_set[i] - 1] : NULL;
    if (n) s->container = n->k;
    if (cap) {
      uint32_t *slots = alloc_n(&r, cap, sizeof *slots);
      if (!slots || take(&r, slots, (size_t)cap * sizeof *slots)) goto bad;
      uint32_t used = 0;
      for (uint32_t j = 0; j < cap; j++) {
        if (slots[j] && (!n || slots[j] > n->k.n)) goto bad;
        used += slots[j] != 0;
      }
      if (used == cap) goto bad; /* a probe must always reach an empty slot */
      s->slots = slots;
      s->mask = cap - 1;
    }
    if (n && s->all_strings) { /* the byte scan reads every element as a string */
      const int is_map = n->k.kind == V_MAP;
      for (uint32_t j = 0; j < n->k.n; j++)
        if (!is_str(is_map ? &n->k.entries[j].key : &n->k.items[j])) goto bad;
    }
  }
  p->sets = sets;

  /* literal sets, built again */
  plits *lits = alloc_n(&r, nlits, sizeof *lits);
  if (!lits) goto bad;
  for (uint32_t i = 0; i < nlits; i++) {
    lits[i].kind = get_u8(&r);
    if (r.bad || lits[i].kind > PLIT_CONTAINS) goto bad;
    if (owner_lit[i]) {
      lits[i].set = lits_again(&p->mem, p, &nodes[owner_lit[i] - 1], lits[i].kind);
      if (!lits[i].set) goto bad;
    }
  }
  p->lits = lits;

  const char **unknown = alloc_n(&r, nunknown, sizeof *unknown);
  if (!unknown) goto bad;
  for (uint32_t i = 0; i < nunknown; i++) {
    uint32_t l;
    if (!(unknown[i] = get_str(&r, &l))) goto bad;
  }
  p->unknown_fns = unknown;
  p->nunknown = nunknown;
  if (r.bad || r.p != r.end) goto bad;

  if (work != local) free(work);
  arena_free(&r.scratch);
  *out = p;
  return 0;

bad:
  release_calls(calls, ncalls_read);
  if (work != local) free(work);
  arena_free(&r.scratch);
  arena_free(&p->mem);
  free(p);
  return -1;
}

int expr_image_read(const void *data, size_t len, const expr_opts *opts, size_t mem,
                    expr_program **out) {
  return image_read(data, len, opts, mem, 0, out);
}

int expr_image_read_trusted(const void *data, size_t len, const expr_opts *opts, size_t mem,
                            expr_program **out) {
  return image_read(data, len, opts, mem, 1, out);
}

/* ---- the regex codes kept beside an image ----
 *
 *   u32 call sites; per call site u32 overloads, then per overload u32
 *   length (0: none) and that many bytes (lib_core.c's). */

void expr_image_write_codes(const expr_program *p, json_buf *b) {
  put_u32(b, p->ncalls);
  for (uint32_t i = 0; i < p->ncalls; i++) {
    const pcall *c = &p->calls[i];
    put_u32(b, c->ncand);
    for (uint32_t j = 0; j < c->ncand; j++) {
      size_t at = b->len;
      put_u32(b, 0);
      if (lib_regex_code(c->cand[j], c->aux ? c->aux[j] : NULL, b) == 1 && !b->oom) {
        uint32_t n = (uint32_t)(b->len - at - 4);
        memcpy(b->data + at, &n, 4);
      }
    }
  }
}

int expr_image_adopt_codes(expr_program *p, const void *data, size_t len) {
  rd r;
  memset(&r, 0, sizeof r);
  r.p = data;
  r.end = r.p + len;
  /* the shape first, so that nothing is adopted from bytes that do not fit */
  if (get_u32(&r) != p->ncalls) return -1;
  for (uint32_t i = 0; i < p->ncalls && !r.bad; i++) {
    if (get_u32(&r) != p->calls[i].ncand) return -1;
    for (uint32_t j = 0; j < p->calls[i].ncand && !r.bad; j++) {
      uint32_t n = get_u32(&r);
      if (!room(&r, n, 1)) return -1;
      r.p += n;
    }
  }
  if (r.bad || r.p != r.end) return -1;
  r.p = data;
  r.p += 4;
  for (uint32_t i = 0; i < p->ncalls; i++) {
    const pcall *c = &p->calls[i];
    r.p += 4;
    for (uint32_t j = 0; j < c->ncand; j++) {
      uint32_t n = get_u32(&r);
      if (n && lib_regex_adopt(c->cand[j], c->aux ? c->aux[j] : NULL, r.p, n)) return -1;
      r.p += n;
    }
  }
  return 0;
}

/* ---- the fingerprint ---- */

typedef struct find_note {
  const void *addr; /* some code of ours */
  uint8_t id[64];
  size_t len;
} find_note;

static int on_object(struct dl_phdr_info *info, size_t size, void *user) {
  (void)size;
  find_note *f = user;
  const uintptr_t a = (uintptr_t)f->addr;
  int mine = 0;
  for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    mine = ph->p_type == PT_LOAD && a >= lo && a < lo + ph->p_memsz;
  }
  if (!mine) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const uint8_t *q = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), *end = q + ph->p_memsz;
    while ((size_t)(end - q) >= sizeof(ElfW(Nhdr))) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)q;
      size_t name = (nh->n_namesz + 3) & ~(size_t)3, desc = (nh->n_descsz + 3) & ~(size_t)3;
      if ((size_t)(end - q) - sizeof *nh < name + desc) break;
      const uint8_t *np = q + sizeof *nh;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(np, "GNU", 4) &&
          nh->n_descsz <= sizeof f->id) {
        memcpy(f->id, np + name, nh->n_descsz);
        f->len = nh->n_descsz;
        return 1;
      }
      q = np + name + desc;
    }
  }
  return 1;
}

static char fingerprint[33];
static pthread_once_t fingerprint_once = PTHREAD_ONCE_INIT;

static void fingerprint_make(void) {
  /* the registry: FNV-1a over what call sites are rebuilt from */
  uint64_t h = 1469598103934665603ull;
  for (const builtin *b = builtin_table(); b->name; b++, registry_size++) {
    uint8_t meta[8] = {b->receiver, b->nargs,    b->kinds[0], b->kinds[1],
                       b->kinds[2], b->kinds[3], b->variadic, b->prepare != NULL};
    for (const char *c = b->name;; c++) {
      h = (h ^ (uint8_t)*c) * 1099511628211ull;
      if (!*c) break;
    }
    for (size_t i = 0; i < sizeof meta; i++) h = (h ^ meta[i]) * 1099511628211ull;
  }
  find_note f;
  memset(&f, 0, sizeof f);
  f.addr = (const void *)expr_image_read;
  dl_iterate_phdr(on_object, &f);
  char buf[512];
  int n = snprintf(buf, sizeof buf, "layout %d\nverdict %s\nregistry %016llx\nbuild ", IMAGE_LAYOUT,
                   VD_VERSION_STRING, (unsigned long long)h);
  static const char hexdig[] = "0123456789abcdef";
  for (size_t i = 0; i < f.len && n > 0 && (size_t)n + 2 < sizeof buf; i++) {
    buf[n++] = hexdig[f.id[i] >> 4];
    buf[n++] = hexdig[f.id[i] & 15];
  }
  if (!f.len) /* no build id: this object's build time stands in */
    n += snprintf(buf + n, sizeof buf - (size_t)n, "none %s %s", __DATE__, __TIME__);
  char hex[65];
  sha256_hex(buf, (size_t)n, hex);
  memcpy(fingerprint, hex, 32);
  fingerprint[32] = '\0';
}

const char *expr_image_fingerprint(void) {
  pthread_once(&fingerprint_once, fingerprint_make);
  return fingerprint;
}

int expr_image_check(const void *data, size_t len, const expr_opts *opts, size_t *mem) {
  expr_program *p = NULL;
  const size_t first = 4 * len + 65536;
  *mem = 0;
  if (expr_image_read(data, len, opts, first - CHUNK_HEAD, &p)) return -1;
  /* all of it in the first chunk: what it took is that chunk less what is left */
  if (p->mem.mallocs == 1) *mem = first - CHUNK_HEAD - (size_t)(p->mem.end - p->mem.ptr);
  expr_free(p);
  return 0;
}
