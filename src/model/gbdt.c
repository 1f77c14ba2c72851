/* gbdt.c — XGBoost JSON models: the loader and the evaluator.
 *
 * What it is for: scoring one request's feature row with a gradient-boosted
 * tree ensemble in about a microsecond, equal bit for bit to XGBoost 1.7's
 * own predictions. libxgboost costs ~6 µs a call before it looks at a tree
 * (JSON configs parsed per call, a proxy matrix, OpenMP) and drags in C++;
 * it is only the test oracle here.
 *
 * Exactness (each rule is tested by tests/model/test_gbdt.c):
 *   - the row is float32; at a numeric split a value goes left iff
 *     v < threshold (strict, in float); NaN (and only NaN) is missing and
 *     follows default_left;
 *   - a categorical split sends a value right iff its truncated code is in
 *     the node's set; NaN follows default_left; codes < 0, >= 2^24 or past
 *     the set's bitset go left (XGBoost's common::Decision);
 *   - every output starts at the base margin (logistic objectives:
 *     -logf(1/base_score - 1) in float) and the leaves are added as float32,
 *     in tree order, to the output of tree_info[t];
 *   - sigmoid and softmax are computed as XGBoost's common/math.h does
 *     (float expf; the softmax sum in double).
 * Never build this file with -ffast-math: NaN tests and the order of float
 * additions are the whole point.
 *
 * Layout, chosen for speed (for 100 trees of depth 6 on 32 features, arrays
 * that mirror the JSON take several µs, packed 12-byte nodes walked one
 * tree at a time ~1.7 µs, the layout below ~1.0 µs, libxgboost 8-15 µs;
 * bench/model measures it):
 *   Trees go in blocks of 8 consecutive ones. A block whose deepest tree is
 *   at most MAX_COMPLETE_DEPTH deep is stored *complete*: each tree padded
 *   to a full binary tree of the block's depth D (a leaf above depth D is
 *   copied into every leaf below it, so the padding's splits cannot change
 *   the result), nodes in level order (children of i at 2i+1 and 2i+2), 8
 *   bytes a node (threshold, feature index), the 8 trees interleaved node
 *   by node (their roots share a cache line), then the 2^D leaf values.
 *   The 8 trees descend in lockstep, one level at a time, with a
 *   branch-free direction choice: 8 independent dependency chains keep the
 *   CPU busy where one tree walk would wait on each load.
 *   For models without categorical splits (the usual case) a split is one
 *   comparison: each prediction first writes the row twice, NaN as -inf and
 *   as +inf, and each node reads the copy that sends a missing value its
 *   default way (predict_fast). Other models keep flag bits in the node.
 *   A block deeper than MAX_COMPLETE_DEPTH, or deeper than 6 with trees so
 *   sparse that padding would more than quadruple its nodes, is stored per
 *   tree as packed 12-byte nodes (children adjacent) and walked one tree at
 *   a time.
 *   The margins are added in tree order after each block, so the order of
 *   float additions is XGBoost's.
 *
 * Not supported (refused at load with the JSON path): boosters dart and
 * gblinear, vector leaves, multi-target models, objectives other than
 * binary:logistic, reg:logistic, reg:squarederror, multi:softprob and
 * multi:softmax. UBJSON files are not read (save as .json). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/json.h"
#include "core/sha256.h"
#include "model/model.h"

#define BLOCK 8
#define MAX_COMPLETE_DEPTH 10
#define MAX_FAST_FEATURES 1024 /* the doubled row (below) lives on the stack */
#define MAX_FEATURES (1u << 24)
#define MAX_CAT (1u << 24) /* XGBoost's kMaxCat: 2^24, float's exact integers */

/* meta bits of a node */
#define M_FEAT 0x00FFFFFFu
#define M_NANRIGHT 0x01000000u /* bit 24: a missing value goes right (!default_left) */
#define M_CAT 0x02000000u
#define M_LEAF 0x04000000u

/* A node of the complete layout. For categorical splits `cat` is the
 * offset of the node's bitset in the model's cats array (cats[off] is the
 * number of 32-bit words, the words follow). */
typedef struct cnode {
  union {
    float thr;
    uint32_t cat;
  };
  uint32_t meta;
} cnode;

/* A node of the packed layout: leaves have M_LEAF and their value in thr;
 * the right child is left + 1. */
typedef struct pnode {
  union {
    float thr;
    uint32_t cat;
  };
  uint32_t meta;
  uint32_t left;
} pnode;

typedef struct block {
  uint32_t first, count;     /* trees [first, first + count) */
  uint32_t depth;            /* complete blocks: D; packed blocks: 0 */
  const cnode *nodes;        /* complete: BLOCK trees x (2^D - 1) */
  const float *leaves;       /* complete: BLOCK trees x 2^D */
  const pnode *const *trees; /* packed: count trees */
} block;

struct gbdt_model {
  gbdt_objective objective;
  uint32_t nfeatures, noutputs, ntrees, nblocks;
  float base_score, base_margin;
  int has_cat;
  int fast;        /* complete blocks index the doubled row (see predict_fast) */
  char **fnames;   /* NULL when the model has none */
  char *ftypes;    /* 'q' or 'c' per feature */
  uint32_t *group; /* output of each tree */
  block *blocks;
  uint32_t *cats;
  size_t memory;
  char version[65];
  char writer[32];
  /* storage */
  void *mem;
};

/* ---- errors ---- */

typedef struct lctx {
  const char *name;
  char *err;
  size_t errlen;
  int failed;
  int general; /* GBDT_LOAD_GENERAL */
} lctx;

__attribute__((format(printf, 3, 4))) static int fail(lctx *c, const char *path, const char *fmt,
                                                      ...) {
  if (c->failed) return -1;
  c->failed = 1;
  if (!c->err || !c->errlen) return -1;
  int n = snprintf(c->err, c->errlen, "%s: at %s: ", c->name, path);
  if (n < 0) n = 0;
  if ((size_t)n < c->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* ---- JSON access ---- */

static const value *member(const value *obj, const char *key) {
  if (!obj || obj->kind != V_MAP) return NULL;
  return value_map_get(obj, key, strlen(key));
}

/* An object member that must be present and of kind k (k < 0: any). */
static const value *need(lctx *c, const value *obj, const char *path, const char *key, int k) {
  const value *v = member(obj, key);
  if (!v) {
    fail(c, path, "missing key \"%s\" (is this an XGBoost JSON model saved with save_model?)", key);
    return NULL;
  }
  if (k >= 0 && v->kind != k) {
    fail(c, path, "\"%s\" should be a %s, not a %s", key, value_kind_name((value_kind)k),
         value_kind_name((value_kind)v->kind));
    return NULL;
  }
  return v;
}

/* XGBoost writes parameters as strings ("5E-1", "30"); 3.x writes
 * base_score as "[6.15E-1]". Accept plain numbers too. */
static int num_of(const value *v, double *out) {
  if (v->kind == V_INT)
    *out = (double)v->i;
  else if (v->kind == V_UINT)
    *out = (double)v->u;
  else if (v->kind == V_DOUBLE)
    *out = v->d;
  else if (v->kind == V_STRING) {
    char buf[64];
    const char *s = v->s;
    size_t n = v->n;
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') s++, n -= 2;
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    *out = strtod(buf, &end);
    if (*end || errno == ERANGE) return -1;
  } else {
    return -1;
  }
  return 0;
}

/* A float parameter, parsed as float directly (strtof: no double rounding). */
static int float_param(lctx *c, const value *obj, const char *path, const char *key, float *out) {
  const value *v = need(c, obj, path, key, -1);
  if (!v) return -1;
  if (v->kind == V_STRING) {
    char buf[64];
    const char *s = v->s;
    size_t n = v->n;
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') s++, n -= 2;
    if (n > 0 && n < sizeof buf) {
      memcpy(buf, s, n);
      buf[n] = 0;
      char *end;
      *out = strtof(buf, &end);
      if (!*end) return 0;
    }
  } else {
    double d;
    if (!num_of(v, &d)) {
      *out = (float)d;
      return 0;
    }
  }
  return fail(c, path, "\"%s\" is not a number", key);
}

static int uint_param(lctx *c, const value *obj, const char *path, const char *key, int optional,
                      uint64_t dflt, uint64_t max, uint64_t *out) {
  const value *v = member(obj, key);
  if (!v) {
    if (optional) {
      *out = dflt;
      return 0;
    }
    return fail(c, path, "missing key \"%s\"", key);
  }
  double d;
  if (num_of(v, &d) || d < 0 || d != floor(d) || d > (double)max)
    return fail(c, path, "\"%s\" should be a whole number from 0 to %llu", key,
                (unsigned long long)max);
  *out = (uint64_t)d;
  return 0;
}

/* An array of integers (V_INT, or bools for default_left in some writers). */
static int int_item(const value *v, int64_t *out) {
  if (v->kind == V_INT)
    *out = v->i;
  else if (v->kind == V_BOOL)
    *out = v->b;
  else if (v->kind == V_DOUBLE && v->d == floor(v->d) && fabs(v->d) < 9e15)
    *out = (int64_t)v->d;
  else
    return -1;
  return 0;
}

static int float_item(const value *v, float *out) {
  if (v->kind == V_DOUBLE)
    *out = (float)v->d;
  else if (v->kind == V_INT)
    *out = (float)v->i;
  else if (v->kind == V_UINT)
    *out = (float)v->u;
  else
    return -1;
  return 0;
}

/* ---- trees as read ---- */

typedef struct rtree {
  uint32_t n; /* nodes */
  int32_t *left, *right;
  uint32_t *feat;
  float *val;
  uint8_t *dl, *cat;
  uint32_t *catoff; /* per node: offset into the model's cats (categorical splits) */
  uint32_t depth;   /* of the deepest leaf (root alone: 0) */
} rtree;

typedef struct catbuf {
  uint32_t *w;
  size_t len, cap;
} catbuf;

static int cat_reserve(catbuf *b, size_t more) {
  if (b->len + more <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + more) cap *= 2;
  uint32_t *w = realloc(b->w, cap * sizeof *w);
  if (!w) return -1;
  b->w = w;
  b->cap = cap;
  return 0;
}

static void rtree_free(rtree *t) {
  free(t->left);
  free(t->right);
  free(t->feat);
  free(t->val);
  free(t->dl);
  free(t->cat);
  free(t->catoff);
}

static const value *tree_array(lctx *c, const value *tree, const char *path, const char *key,
                               uint32_t n, int optional) {
  const value *v = member(tree, key);
  if (!v) {
    if (!optional) fail(c, path, "missing key \"%s\"", key);
    return NULL;
  }
  if (v->kind != V_LIST) {
    fail(c, path, "\"%s\" should be an array", key);
    return NULL;
  }
  if (v->n != n && n != UINT32_MAX) {
    fail(c, path, "\"%s\" has %u items, but the tree has %u nodes", key, v->n, n);
    return NULL;
  }
  return v;
}

static int read_tree(lctx *c, const value *tv, uint32_t ti, uint32_t nfeat, catbuf *cats,
                     rtree *t) {
  char path[128];
  snprintf(path, sizeof path, "$.learner.gradient_booster.model.trees[%u]", ti);
  if (tv->kind != V_MAP) return fail(c, path, "a tree should be an object");
  const value *tp = need(c, tv, path, "tree_param", V_MAP);
  if (!tp) return -1;
  char ppath[160];
  snprintf(ppath, sizeof ppath, "%s.tree_param", path);
  uint64_t n, slv;
  if (uint_param(c, tp, ppath, "num_nodes", 0, 0, 1u << 30, &n)) return -1;
  if (uint_param(c, tp, ppath, "size_leaf_vector", 1, 0, UINT32_MAX, &slv)) return -1;
  if (slv > 1)
    return fail(c, ppath,
                "size_leaf_vector is %llu: vector leaves (multi-target trees) are not supported",
                (unsigned long long)slv);
  if (n == 0) return fail(c, ppath, "num_nodes is 0: a tree needs at least its root");
  t->n = (uint32_t)n;
  const value *L = tree_array(c, tv, path, "left_children", t->n, 0);
  const value *R = L ? tree_array(c, tv, path, "right_children", t->n, 0) : NULL;
  const value *S = R ? tree_array(c, tv, path, "split_indices", t->n, 0) : NULL;
  const value *V = S ? tree_array(c, tv, path, "split_conditions", t->n, 0) : NULL;
  const value *D = V ? tree_array(c, tv, path, "default_left", t->n, 0) : NULL;
  if (!D) return -1;
  const value *T = tree_array(c, tv, path, "split_type", t->n, 1);
  if (c->failed) return -1;
  t->left = malloc(n * sizeof *t->left);
  t->right = malloc(n * sizeof *t->right);
  t->feat = malloc(n * sizeof *t->feat);
  t->val = malloc(n * sizeof *t->val);
  t->dl = malloc(n);
  t->cat = calloc(n, 1);
  t->catoff = calloc(n, sizeof *t->catoff);
  if (!t->left || !t->right || !t->feat || !t->val || !t->dl || !t->cat || !t->catoff)
    return fail(c, path, "out of memory");
  for (uint32_t i = 0; i < t->n; i++) {
    int64_t l, r, f, d, st = 0;
    if (int_item(&L->items[i], &l) || l < -1 || l >= (int64_t)n)
      return fail(c, path, "left_children[%u] is not a node id of this tree", i);
    if (int_item(&R->items[i], &r) || r < -1 || r >= (int64_t)n)
      return fail(c, path, "right_children[%u] is not a node id of this tree", i);
    if ((l == -1) != (r == -1))
      return fail(c, path, "node %u has one child: left_children and right_children disagree", i);
    if (int_item(&S->items[i], &f) || f < 0)
      return fail(c, path, "split_indices[%u] is not a feature index", i);
    if (l != -1 && f >= (int64_t)nfeat)
      return fail(c, path, "split_indices[%u] is %lld, but the model has %u features", i,
                  (long long)f, nfeat);
    if (int_item(&D->items[i], &d) || (d != 0 && d != 1))
      return fail(c, path, "default_left[%u] should be 0 or 1", i);
    if (T && (int_item(&T->items[i], &st) || (st != 0 && st != 1)))
      return fail(c, path, "split_type[%u] should be 0 (numeric) or 1 (categorical)", i);
    if (float_item(&V->items[i], &t->val[i]))
      return fail(c, path, "split_conditions[%u] is not a number", i);
    t->left[i] = (int32_t)l;
    t->right[i] = (int32_t)r;
    t->feat[i] = l == -1 ? 0 : (uint32_t)f;
    t->dl[i] = (uint8_t)d;
    t->cat[i] = l != -1 && st == 1;
    if (l == -1 && !isfinite(t->val[i]))
      return fail(c, path, "leaf %u has a value that is not finite", i);
    if (l != -1 && !t->cat[i] && isnan(t->val[i]))
      return fail(c, path, "numeric split %u has a NaN threshold", i);
  }
  /* Categorical sets: categories_nodes[k] has categories
   * [segments[k], segments[k] + sizes[k]) of `categories`. */
  const value *CN = tree_array(c, tv, path, "categories_nodes", UINT32_MAX, 1);
  if (c->failed) return -1;
  uint32_t ncn = CN ? CN->n : 0;
  const value *CS = NULL, *CZ = NULL, *CC = NULL;
  if (ncn) {
    CS = tree_array(c, tv, path, "categories_segments", ncn, 0);
    CZ = CS ? tree_array(c, tv, path, "categories_sizes", ncn, 0) : NULL;
    CC = CZ ? tree_array(c, tv, path, "categories", UINT32_MAX, 0) : NULL;
    if (!CC) return -1;
  }
  for (uint32_t k = 0; k < ncn; k++) {
    int64_t node, seg, size;
    if (int_item(&CN->items[k], &node) || node < 0 || node >= (int64_t)n || !t->cat[node])
      return fail(c, path, "categories_nodes[%u] is not a categorical split node", k);
    if (t->catoff[node])
      return fail(c, path, "categories_nodes[%u] repeats node %lld", k, (long long)node);
    if (int_item(&CS->items[k], &seg) || int_item(&CZ->items[k], &size) || seg < 0 || size < 0 ||
        seg + size > (int64_t)CC->n)
      return fail(c, path, "categories_segments[%u]/categories_sizes[%u] point outside categories",
                  k, k);
    int64_t maxc = -1;
    for (int64_t j = seg; j < seg + size; j++) {
      int64_t code;
      if (int_item(&CC->items[j], &code) || code < 0 || code >= MAX_CAT)
        return fail(c, path, "categories[%lld] is not a category code (0 to 2^24-1)", (long long)j);
      if (code > maxc) maxc = code;
    }
    uint32_t words = (uint32_t)((maxc + 1 + 31) / 32);
    if (cat_reserve(cats, 1 + (size_t)words)) return fail(c, path, "out of memory");
    uint32_t off = (uint32_t)cats->len;
    cats->w[off] = words;
    memset(&cats->w[off + 1], 0, words * sizeof(uint32_t));
    for (int64_t j = seg; j < seg + size; j++) {
      int64_t code = 0;
      int_item(&CC->items[j], &code);
      cats->w[off + 1 + code / 32] |= 1u << (code % 32);
    }
    cats->len += 1 + (size_t)words;
    t->catoff[node] = off;
  }
  for (uint32_t i = 0; i < t->n; i++)
    if (t->cat[i] && !t->catoff[i]) {
      /* a categorical split without a set: everything goes left; give it an empty set */
      if (cat_reserve(cats, 1)) return fail(c, path, "out of memory");
      t->catoff[i] = (uint32_t)cats->len;
      cats->w[cats->len++] = 0;
    }
  /* Walk from the root: every reachable node once (no cycles, no sharing). */
  uint8_t *seen = calloc(n, 1);
  uint32_t *stack = malloc(n * sizeof *stack), *dep = malloc(n * sizeof *dep);
  if (!seen || !stack || !dep) {
    free(seen), free(stack), free(dep);
    return fail(c, path, "out of memory");
  }
  uint32_t sp = 0, maxd = 0;
  int bad = 0;
  stack[sp] = 0, dep[sp++] = 0, seen[0] = 1;
  while (sp && !bad) {
    sp--;
    uint32_t i = stack[sp], d = dep[sp];
    if (d > maxd) maxd = d;
    if (t->left[i] == -1) continue;
    int32_t kids[2] = {t->left[i], t->right[i]};
    for (int k = 0; k < 2; k++) {
      if (seen[kids[k]]) {
        bad = 1;
        break;
      }
      seen[kids[k]] = 1;
      stack[sp] = (uint32_t)kids[k], dep[sp++] = d + 1;
    }
  }
  free(seen), free(stack), free(dep);
  if (bad) return fail(c, path, "the children arrays do not form a tree (a node is reached twice)");
  t->depth = maxd;
  return 0;
}

/* ---- packing ---- */

static uint32_t node_meta(const rtree *t, uint32_t i) {
  return t->feat[i] | (t->dl[i] ? 0 : M_NANRIGHT) | (t->cat[i] ? M_CAT : 0);
}

/* Fills tree k's part of a complete block of depth D: node pi of the padded
 * tree corresponds to node src of t (or, below a leaf, to that leaf). The 8
 * trees are interleaved: position pi of tree k is nodes[pi * BLOCK + k]
 * (the 8 roots share one cache line), leaf j is leaves[j * BLOCK + k]. */
static void fill_complete(const rtree *t, uint32_t D, uint32_t k, cnode *nodes, float *leaves,
                          size_t pi, int32_t src, uint32_t level, uint32_t fast_nf) {
  if (level == D) {
    leaves[(pi - (((size_t)1 << D) - 1)) * BLOCK + k] = t->val[src];
    return;
  }
  cnode *n = &nodes[pi * BLOCK + k];
  if (t->left[src] == -1) {
    /* padding below a leaf: any split will do, every leaf below is this one */
    n->thr = 0.0f;
    n->meta = 0;
    fill_complete(t, D, k, nodes, leaves, 2 * pi + 1, src, level + 1, fast_nf);
    fill_complete(t, D, k, nodes, leaves, 2 * pi + 2, src, level + 1, fast_nf);
    return;
  }
  /* fast models: the index into the doubled row, whose second half has
   * NaN as +inf (see predict_fast) */
  n->meta = fast_nf ? t->feat[src] + (t->dl[src] ? 0 : fast_nf) : node_meta(t, (uint32_t)src);
  if (t->cat[src])
    n->cat = t->catoff[src];
  else
    n->thr = t->val[src];
  fill_complete(t, D, k, nodes, leaves, 2 * pi + 1, t->left[src], level + 1, fast_nf);
  fill_complete(t, D, k, nodes, leaves, 2 * pi + 2, t->right[src], level + 1, fast_nf);
}

/* The packed layout: breadth-first renumbering, children adjacent. */
static pnode *pack_tree(const rtree *t) {
  pnode *p = malloc(t->n * sizeof *p);
  uint32_t *queue = malloc(t->n * sizeof *queue);
  if (!p || !queue) {
    free(p), free(queue);
    return NULL;
  }
  uint32_t head = 0, tail = 0;
  queue[tail++] = 0; /* new id = position in the queue */
  while (head < tail) {
    uint32_t id = head, i = queue[head++];
    if (t->left[i] == -1) {
      p[id].thr = t->val[i];
      p[id].meta = M_LEAF;
      p[id].left = 0;
      continue;
    }
    p[id].meta = node_meta(t, i);
    if (t->cat[i])
      p[id].cat = t->catoff[i];
    else
      p[id].thr = t->val[i];
    p[id].left = tail;
    queue[tail++] = (uint32_t)t->left[i];
    queue[tail++] = (uint32_t)t->right[i];
  }
  free(queue);
  return p;
}

/* ---- loading ---- */

static const char *const OBJECTIVES[] = {"binary:logistic", "reg:logistic", "reg:squarederror",
                                         "multi:softprob", "multi:softmax"};

static void model_free_parts(gbdt_model *m) {
  if (!m) return;
  if (m->fnames)
    for (uint32_t i = 0; i < m->nfeatures; i++) free(m->fnames[i]);
  free(m->fnames);
  free(m->ftypes);
  free(m->group);
  if (m->blocks)
    for (uint32_t b = 0; b < m->nblocks; b++) {
      free((void *)m->blocks[b].nodes);
      free((void *)m->blocks[b].leaves);
      if (m->blocks[b].trees) {
        for (uint32_t k = 0; k < m->blocks[b].count; k++) free((void *)m->blocks[b].trees[k]);
        free((void *)m->blocks[b].trees);
      }
    }
  free(m->blocks);
  free(m->cats);
  free(m);
}

void gbdt_free(gbdt_model *m) { model_free_parts(m); }

static int load_value(lctx *c, const value *root, gbdt_model *m) {
  if (root->kind != V_MAP) return fail(c, "$", "the model should be a JSON object");
  const value *ver = member(root, "version");
  if (ver) {
    if (ver->kind != V_LIST || ver->n < 2 || ver->items[0].kind != V_INT)
      return fail(c, "$.version", "should be [major, minor, patch]");
    int64_t vv[3] = {0, 0, 0};
    for (uint32_t i = 0; i < ver->n && i < 3; i++) int_item(&ver->items[i], &vv[i]);
    if (vv[0] < 1)
      return fail(c, "$.version",
                  "written by XGBoost %lld.%lld: models before 1.0 are not supported",
                  (long long)vv[0], (long long)vv[1]);
    snprintf(m->writer, sizeof m->writer, "%lld.%lld.%lld", (long long)vv[0], (long long)vv[1],
             (long long)vv[2]);
  } else {
    snprintf(m->writer, sizeof m->writer, "unknown");
  }
  const value *L = need(c, root, "$", "learner", V_MAP);
  if (!L) return -1;

  /* booster */
  const value *gb = need(c, L, "$.learner", "gradient_booster", V_MAP);
  if (!gb) return -1;
  const value *gbn = need(c, gb, "$.learner.gradient_booster", "name", V_STRING);
  if (!gbn) return -1;
  if (!(gbn->n == 6 && memcmp(gbn->s, "gbtree", 6) == 0)) {
    const char *why = "";
    if (gbn->n == 4 && memcmp(gbn->s, "dart", 4) == 0)
      why = " (dart scales trees by dropout weights; retrain with booster=gbtree)";
    else if (gbn->n == 8 && memcmp(gbn->s, "gblinear", 8) == 0)
      why = " (a linear model, not trees; retrain with booster=gbtree)";
    return fail(c, "$.learner.gradient_booster.name",
                "booster \"%.*s\" is not supported: only gbtree%s",
                (int)(gbn->n > 64 ? 64 : gbn->n), gbn->s, why);
  }

  /* objective */
  const value *obj = need(c, L, "$.learner", "objective", V_MAP);
  const value *on = obj ? need(c, obj, "$.learner.objective", "name", V_STRING) : NULL;
  if (!on) return -1;
  int found = -1;
  for (int i = 0; i < (int)(sizeof OBJECTIVES / sizeof OBJECTIVES[0]); i++)
    if (on->n == strlen(OBJECTIVES[i]) && memcmp(on->s, OBJECTIVES[i], on->n) == 0) found = i;
  if (found < 0)
    return fail(c, "$.learner.objective.name",
                "objective \"%.*s\" is not supported (supported: binary:logistic, reg:logistic, "
                "reg:squarederror, multi:softprob, multi:softmax)",
                (int)(on->n > 64 ? 64 : on->n), on->s);
  m->objective = (gbdt_objective)found;

  /* learner_model_param */
  const char *lp = "$.learner.learner_model_param";
  const value *lmp = need(c, L, "$.learner", "learner_model_param", V_MAP);
  if (!lmp) return -1;
  uint64_t nfeat, ncls, ntgt;
  if (uint_param(c, lmp, lp, "num_feature", 0, 0, MAX_FEATURES - 1, &nfeat) ||
      uint_param(c, lmp, lp, "num_class", 1, 0, 1u << 16, &ncls) ||
      uint_param(c, lmp, lp, "num_target", 1, 1, 1u << 16, &ntgt) ||
      float_param(c, lmp, lp, "base_score", &m->base_score))
    return -1;
  if (nfeat == 0) return fail(c, lp, "num_feature is 0");
  if (ntgt > 1)
    return fail(c, lp, "num_target is %llu: multi-target models are not supported",
                (unsigned long long)ntgt);
  m->nfeatures = (uint32_t)nfeat;
  int multi = m->objective == GBDT_MULTI_SOFTPROB || m->objective == GBDT_MULTI_SOFTMAX;
  if (multi && ncls < 2) return fail(c, lp, "a multi: objective needs num_class >= 2");
  if (!multi && ncls > 1)
    return fail(c, lp, "num_class is %llu but the objective is not multiclass",
                (unsigned long long)ncls);
  m->noutputs = multi ? (uint32_t)ncls : 1;
  if (m->objective == GBDT_BINARY_LOGISTIC || m->objective == GBDT_REG_LOGISTIC) {
    if (!(m->base_score > 0.0f && m->base_score < 1.0f))
      return fail(c, lp, "base_score %g is outside (0, 1), which a logistic objective needs",
                  (double)m->base_score);
    m->base_margin = -logf(1.0f / m->base_score - 1.0f); /* XGBoost's ProbToMargin, in float */
  } else {
    m->base_margin = m->base_score;
  }

  /* feature names and types */
  m->ftypes = malloc(m->nfeatures);
  if (!m->ftypes) return fail(c, "$", "out of memory");
  memset(m->ftypes, 'q', m->nfeatures);
  const value *fn = member(L, "feature_names");
  if (fn && fn->kind == V_LIST && fn->n) {
    if (fn->n != m->nfeatures)
      return fail(c, "$.learner.feature_names", "%u names for %u features", fn->n, m->nfeatures);
    m->fnames = calloc(m->nfeatures, sizeof *m->fnames);
    if (!m->fnames) return fail(c, "$", "out of memory");
    for (uint32_t i = 0; i < fn->n; i++) {
      if (fn->items[i].kind != V_STRING)
        return fail(c, "$.learner.feature_names", "item %u is not a string", i);
      m->fnames[i] = strndup(fn->items[i].s, fn->items[i].n);
      if (!m->fnames[i]) return fail(c, "$", "out of memory");
    }
  }
  const value *ft = member(L, "feature_types");
  if (ft && ft->kind == V_LIST && ft->n) {
    if (ft->n != m->nfeatures)
      return fail(c, "$.learner.feature_types", "%u types for %u features", ft->n, m->nfeatures);
    for (uint32_t i = 0; i < ft->n; i++) {
      const value *t = &ft->items[i];
      if (t->kind != V_STRING)
        return fail(c, "$.learner.feature_types", "item %u is not a string", i);
      if (t->n == 1 && t->s[0] == 'c')
        m->ftypes[i] = 'c';
      else if ((t->n == 1 && (t->s[0] == 'q' || t->s[0] == 'i')) ||
               (t->n == 3 && memcmp(t->s, "int", 3) == 0) ||
               (t->n == 5 && memcmp(t->s, "float", 5) == 0))
        m->ftypes[i] = 'q';
      else
        return fail(c, "$.learner.feature_types", "item %u: unknown feature type \"%.*s\"", i,
                    (int)(t->n > 32 ? 32 : t->n), t->s);
    }
  }

  /* trees */
  const char *mp = "$.learner.gradient_booster.model";
  const value *gm = need(c, gb, "$.learner.gradient_booster", "model", V_MAP);
  const value *gp = gm ? need(c, gm, mp, "gbtree_model_param", V_MAP) : NULL;
  const value *trees = gp ? need(c, gm, mp, "trees", V_LIST) : NULL;
  const value *info = trees ? need(c, gm, mp, "tree_info", V_LIST) : NULL;
  if (!info) return -1;
  uint64_t ntrees, slv;
  if (uint_param(c, gp, "$.learner.gradient_booster.model.gbtree_model_param", "num_trees", 0, 0,
                 1u << 24, &ntrees) ||
      uint_param(c, gp, "$.learner.gradient_booster.model.gbtree_model_param", "size_leaf_vector",
                 1, 0, UINT32_MAX, &slv))
    return -1;
  if (slv > 1)
    return fail(c, "$.learner.gradient_booster.model.gbtree_model_param",
                "size_leaf_vector is %llu: vector leaves (multi-target trees) are not supported",
                (unsigned long long)slv);
  if (trees->n != ntrees)
    return fail(c, mp, "num_trees says %llu but \"trees\" has %u", (unsigned long long)ntrees,
                trees->n);
  if (info->n != ntrees)
    return fail(c, mp, "tree_info has %u items for %llu trees", info->n,
                (unsigned long long)ntrees);
  m->ntrees = (uint32_t)ntrees;
  m->group = malloc((m->ntrees ? m->ntrees : 1) * sizeof *m->group);
  if (!m->group) return fail(c, "$", "out of memory");
  for (uint32_t t = 0; t < m->ntrees; t++) {
    int64_t g;
    if (int_item(&info->items[t], &g) || g < 0 || g >= (int64_t)m->noutputs)
      return fail(c, "$.learner.gradient_booster.model.tree_info",
                  "item %u is not an output group (0 to %u)", t, m->noutputs - 1);
    m->group[t] = (uint32_t)g;
  }

  rtree *rt = calloc(m->ntrees ? m->ntrees : 1, sizeof *rt);
  catbuf cats = {0};
  if (!rt || cat_reserve(&cats, 1)) {
    free(rt);
    return fail(c, "$", "out of memory");
  }
  cats.w[cats.len++] = 0; /* offset 0 means "no set" while reading */
  int rc = 0;
  for (uint32_t t = 0; t < m->ntrees && !rc; t++)
    rc = read_tree(c, &trees->items[t], t, m->nfeatures, &cats, &rt[t]);
  for (uint32_t t = 0; t < m->ntrees && !rc; t++)
    for (uint32_t i = 0; i < rt[t].n; i++)
      if (rt[t].cat[i] && m->ftypes[rt[t].feat[i]] != 'c') {
        char path[128];
        snprintf(path, sizeof path, "$.learner.gradient_booster.model.trees[%u]", t);
        rc = fail(c, path,
                  "node %u is a categorical split on feature %u, which feature_types does not "
                  "declare categorical ('c')",
                  i, rt[t].feat[i]);
        break;
      }

  /* blocks */
  int finite = 1;
  for (uint32_t t = 0; t < m->ntrees && !rc; t++)
    for (uint32_t i = 0; i < rt[t].n; i++) {
      m->has_cat |= rt[t].cat[i];
      if (rt[t].left[i] != -1 && !rt[t].cat[i] && !isfinite(rt[t].val[i])) finite = 0;
    }
  m->fast = !m->has_cat && finite && m->nfeatures <= MAX_FAST_FEATURES && !c->general;
  m->nblocks = (m->ntrees + BLOCK - 1) / BLOCK;
  if (!rc && !(m->blocks = calloc(m->nblocks ? m->nblocks : 1, sizeof *m->blocks)))
    rc = fail(c, "$", "out of memory");
  for (uint32_t b = 0; b < m->nblocks && !rc; b++) {
    block *bl = &m->blocks[b];
    bl->first = b * BLOCK;
    bl->count = m->ntrees - bl->first < BLOCK ? m->ntrees - bl->first : BLOCK;
    uint32_t D = 0;
    size_t real = 0;
    for (uint32_t k = 0; k < bl->count; k++) {
      const rtree *t = &rt[bl->first + k];
      if (t->depth > D) D = t->depth;
      real += t->n;
    }
    /* complete when shallow, or when padding at most quadruples the nodes */
    size_t padded = (size_t)BLOCK * ((2u << D) - 1);
    if (D <= MAX_COMPLETE_DEPTH && (D <= 6 || padded <= 4 * real)) {
      size_t ni = ((size_t)1 << D) - 1, nl = (size_t)1 << D;
      cnode *nodes = calloc(BLOCK * (ni ? ni : 1), sizeof *nodes);
      float *leaves = calloc(BLOCK * nl, sizeof *leaves);
      bl->nodes = nodes, bl->leaves = leaves;
      if (!nodes || !leaves) {
        rc = fail(c, "$", "out of memory");
        break;
      }
      bl->depth = D;
      for (uint32_t k = 0; k < bl->count; k++)
        fill_complete(&rt[bl->first + k], D, k, nodes, leaves, 0, 0, 0, m->fast ? m->nfeatures : 0);
      m->memory += BLOCK * (ni * sizeof *nodes + nl * sizeof *leaves);
    } else {
      pnode **tp = calloc(bl->count, sizeof *tp);
      bl->trees = (const pnode *const *)tp;
      if (!tp) {
        rc = fail(c, "$", "out of memory");
        break;
      }
      for (uint32_t k = 0; k < bl->count && !rc; k++) {
        if (!(tp[k] = pack_tree(&rt[bl->first + k]))) rc = fail(c, "$", "out of memory");
        m->memory += rt[bl->first + k].n * sizeof(pnode);
      }
    }
  }
  for (uint32_t t = 0; t < m->ntrees; t++) rtree_free(&rt[t]);
  free(rt);
  m->cats = cats.w;
  m->memory += cats.len * sizeof(uint32_t);
  return rc;
}

int gbdt_load_json(const char *text, size_t len, const char *name, gbdt_model **out, char *err,
                   size_t errlen) {
  return gbdt_load_json_flags(text, len, name, 0, out, err, errlen);
}

int gbdt_load_json_flags(const char *text, size_t len, const char *name, unsigned flags,
                         gbdt_model **out, char *err, size_t errlen) {
  lctx c = {name ? name : "<memory>", err, errlen, 0, (flags & GBDT_LOAD_GENERAL) != 0};
  *out = NULL;
  if (err && errlen) err[0] = 0;
  arena a;
  arena_init(&a, NULL, 0, 0);
  json_opts jo = {.lenient = 1, .max_size = (size_t)1 << 31};
  json_error je;
  value root;
  if (json_parse(&a, text, len, &jo, &root, &je)) {
    arena_free(&a);
    if (err && errlen)
      snprintf(err, errlen, "%s:%d:%d: at %s: %s (not a JSON model file?)", c.name, je.line,
               je.column, je.path, je.message);
    return -1;
  }
  gbdt_model *m = calloc(1, sizeof *m);
  if (!m) {
    arena_free(&a);
    return fail(&c, "$", "out of memory");
  }
  int rc = load_value(&c, &root, m);
  arena_free(&a);
  if (rc) {
    model_free_parts(m);
    return -1;
  }
  sha256_hex(text, len, m->version);
  *out = m;
  return 0;
}

int gbdt_load_file(const char *path, gbdt_model **out, char *err, size_t errlen) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (err && errlen) snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return -1;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  while (buf) {
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (len < cap) break;
    char *nb = realloc(buf, cap * 2);
    if (!nb) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nb;
    cap *= 2;
  }
  int rerr = ferror(f);
  fclose(f);
  if (!buf || rerr) {
    free(buf);
    if (err && errlen)
      snprintf(err, errlen, "%s: cannot read: %s", path, buf ? strerror(errno) : "out of memory");
    return -1;
  }
  int rc = gbdt_load_json(buf, len, path, out, err, errlen);
  free(buf);
  return rc;
}

/* ---- getters ---- */

gbdt_objective gbdt_objective_of(const gbdt_model *m) { return m->objective; }
const char *gbdt_objective_name(const gbdt_model *m) { return OBJECTIVES[m->objective]; }
uint32_t gbdt_num_features(const gbdt_model *m) { return m->nfeatures; }
const char *gbdt_feature_name(const gbdt_model *m, uint32_t i) {
  return m->fnames && i < m->nfeatures ? m->fnames[i] : NULL;
}
char gbdt_feature_type(const gbdt_model *m, uint32_t i) {
  return i < m->nfeatures ? m->ftypes[i] : 0;
}
uint32_t gbdt_num_outputs(const gbdt_model *m) { return m->noutputs; }
uint32_t gbdt_num_trees(const gbdt_model *m) { return m->ntrees; }
float gbdt_base_score(const gbdt_model *m) { return m->base_score; }
float gbdt_base_margin(const gbdt_model *m) { return m->base_margin; }
const char *gbdt_version(const gbdt_model *m) { return m->version; }
const char *gbdt_writer_version(const gbdt_model *m) { return m->writer; }
size_t gbdt_memory(const gbdt_model *m) { return m->memory; }

/* ---- prediction ---- */

/* XGBoost's common::Decision, as "go right": the truncated code is in the set. */
static inline uint32_t cat_right(const uint32_t *cats, uint32_t off, float v) {
  if (!(v >= 0.0f) || v >= (float)MAX_CAT) return 0; /* invalid codes (NaN is handled before) */
  uint32_t code = (uint32_t)v, words = cats[off];
  if (code / 32 >= words) return 0;
  return (cats[off + 1 + code / 32] >> (code % 32)) & 1u;
}

/* 1 to go right. A number goes right iff !(v < thr), which is v >= thr for
 * a non-NaN threshold; a NaN fails v >= thr and goes right iff the node's
 * M_NANRIGHT bit (bit 24) says so. No branch for numeric splits. */
static inline __attribute__((always_inline)) uint32_t go_right(uint32_t meta, float thr_or_cat_bits,
                                                               uint32_t cat, float v,
                                                               const uint32_t *cats, int has_cat) {
  uint32_t isnan_ = v != v;
  if (has_cat && (meta & M_CAT)) {
    if (isnan_) return (meta >> 24) & 1u;
    return cat_right(cats, cat, v);
  }
  return (uint32_t)(v >= thr_or_cat_bits) | (isnan_ & (meta >> 24));
}

/* The 8 trees of a block descend together, one level at a time; the index
 * of each is a local variable so that the 8 chains stay in registers.
 * fast: the node's meta is an index into the doubled row and the direction
 * is one comparison. */
#define STEP(k)                                                                             \
  do {                                                                                      \
    const cnode *n_ = &nodes[i##k * BLOCK + (k)];                                           \
    uint32_t r_ =                                                                           \
        fast ? (uint32_t)(row[n_->meta] >= n_->thr)                                         \
             : go_right(n_->meta, n_->thr, n_->cat, row[n_->meta & M_FEAT], cats, has_cat); \
    i##k = 2 * i##k + 1 + r_;                                                               \
  } while (0)

static inline __attribute__((always_inline)) void eval_complete(const block *bl, const float *row,
                                                                const uint32_t *cats, int has_cat,
                                                                int fast, float *out) {
  const uint32_t D = bl->depth;
  const size_t ni = ((size_t)1 << D) - 1;
  const cnode *nodes = bl->nodes;
  size_t i0 = 0, i1 = 0, i2 = 0, i3 = 0, i4 = 0, i5 = 0, i6 = 0, i7 = 0;
  for (uint32_t d = 0; d < D; d++) {
    STEP(0);
    STEP(1);
    STEP(2);
    STEP(3);
    STEP(4);
    STEP(5);
    STEP(6);
    STEP(7);
  }
  const float *lv = bl->leaves;
  out[0] = lv[(i0 - ni) * BLOCK + 0];
  out[1] = lv[(i1 - ni) * BLOCK + 1];
  out[2] = lv[(i2 - ni) * BLOCK + 2];
  out[3] = lv[(i3 - ni) * BLOCK + 3];
  out[4] = lv[(i4 - ni) * BLOCK + 4];
  out[5] = lv[(i5 - ni) * BLOCK + 5];
  out[6] = lv[(i6 - ni) * BLOCK + 6];
  out[7] = lv[(i7 - ni) * BLOCK + 7];
}
#undef STEP

static inline float eval_packed(const pnode *p, const float *row, const uint32_t *cats) {
  uint32_t i = 0;
  while (!(p[i].meta & M_LEAF))
    i = p[i].left + go_right(p[i].meta, p[i].thr, p[i].cat, row[p[i].meta & M_FEAT], cats, 1);
  return p[i].thr;
}

/* mode: 0 fast (complete blocks read the doubled row `two`), 1 numeric
 * with flag bits, 2 with categorical splits. */
static inline __attribute__((always_inline)) int predict_margins(const gbdt_model *m,
                                                                 const float *row, const float *two,
                                                                 float *margins,
                                                                 const gbdt_deadline *dl,
                                                                 int mode) {
  for (uint32_t g = 0; g < m->noutputs; g++) margins[g] = m->base_margin;
  uint32_t every = dl ? (dl->every ? dl->every : 4) : 0, countdown = every;
  for (uint32_t b = 0; b < m->nblocks; b++) {
    const block *bl = &m->blocks[b];
    float v[BLOCK];
    if (bl->nodes) {
      if (mode == 0)
        eval_complete(bl, two, m->cats, 0, 1, v);
      else
        eval_complete(bl, row, m->cats, mode == 2, 0, v);
    } else {
      for (uint32_t k = 0; k < bl->count; k++) v[k] = eval_packed(bl->trees[k], row, m->cats);
    }
    if (m->noutputs == 1)
      for (uint32_t k = 0; k < bl->count; k++) margins[0] += v[k];
    else
      for (uint32_t k = 0; k < bl->count; k++) margins[m->group[bl->first + k]] += v[k];
    if (dl && --countdown == 0) {
      if (clock_mono_ns() >= dl->at_ns && b + 1 < m->nblocks) return GBDT_ETIMEOUT;
      countdown = every;
    }
  }
  return GBDT_OK;
}

/* The fast path, for models without categorical splits: the row is copied
 * twice, missing values (NaN) as -inf in the first copy and as +inf in the
 * second, and each node reads the copy that sends a missing value its
 * default way (-inf < any finite threshold: left; +inf: right). Real
 * infinities are unchanged and go where they would anyway. A split is then
 * one float comparison, v >= threshold, with no NaN test: about half the
 * instructions per node. (The load refuses no model for this: thresholds
 * that are not finite turn the fast path off.) */
static int predict_fast(const gbdt_model *m, const float *row, float *margins,
                        const gbdt_deadline *dl) {
  float two[2 * MAX_FAST_FEATURES];
  const uint32_t nf = m->nfeatures;
  for (uint32_t i = 0; i < nf; i++) {
    float v = row[i];
    int nan = v != v;
    two[i] = nan ? -INFINITY : v;
    two[nf + i] = nan ? INFINITY : v;
  }
  return predict_margins(m, row, two, margins, dl, 0);
}

static int predict_numeric(const gbdt_model *m, const float *row, float *margins,
                           const gbdt_deadline *dl) {
  return predict_margins(m, row, NULL, margins, dl, 1);
}

static int predict_categorical(const gbdt_model *m, const float *row, float *margins,
                               const gbdt_deadline *dl) {
  return predict_margins(m, row, NULL, margins, dl, 2);
}

/* XGBoost's common::Sigmoid, all in float. */
static float sigmoid(float x) {
  const float eps = 1e-16f;
  x = fminf(-x, 88.7f);
  float denom = expf(x) + 1.0f + eps;
  return 1.0f / denom;
}

int gbdt_predict(const gbdt_model *m, const float *row, float *margins, float *probs,
                 const gbdt_deadline *dl) {
  if (dl && clock_mono_ns() >= dl->at_ns) return GBDT_ETIMEOUT;
  int rc = m->fast      ? predict_fast(m, row, margins, dl)
           : m->has_cat ? predict_categorical(m, row, margins, dl)
                        : predict_numeric(m, row, margins, dl);
  if (rc != GBDT_OK || !probs) return rc;
  switch (m->objective) {
    case GBDT_BINARY_LOGISTIC:
    case GBDT_REG_LOGISTIC:
      probs[0] = sigmoid(margins[0]);
      break;
    case GBDT_REG_SQUAREDERROR:
      probs[0] = margins[0];
      break;
    case GBDT_MULTI_SOFTPROB:
    case GBDT_MULTI_SOFTMAX: { /* XGBoost's common::Softmax */
      float wmax = margins[0];
      for (uint32_t g = 1; g < m->noutputs; g++) wmax = fmaxf(margins[g], wmax);
      double wsum = 0.0;
      for (uint32_t g = 0; g < m->noutputs; g++) {
        probs[g] = expf(margins[g] - wmax);
        wsum += probs[g];
      }
      for (uint32_t g = 0; g < m->noutputs; g++) probs[g] /= (float)wsum;
      break;
    }
  }
  return GBDT_OK;
}

uint32_t gbdt_argmax(const gbdt_model *m, const float *probs) {
  uint32_t best = 0;
  for (uint32_t g = 1; g < m->noutputs; g++)
    if (probs[g] > probs[best]) best = g;
  return best;
}

float gbdt_confidence(const gbdt_model *m, const float *probs) {
  switch (m->objective) {
    case GBDT_BINARY_LOGISTIC:
    case GBDT_REG_LOGISTIC:
      return probs[0] >= 0.5f ? probs[0] : 1.0f - probs[0];
    case GBDT_REG_SQUAREDERROR:
      return NAN;
    default:
      return probs[gbdt_argmax(m, probs)];
  }
}
