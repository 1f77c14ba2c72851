/* index.c — the rule index: which rules can match a request, found without
 * evaluating the others.
 *
 * A rule is indexable when one of the `&&`-joined parts of its condition
 * compares a request field with constants:
 *
 *   V == C   C == V   V in [C1, C2, ...]   V in NAMED_CONSTANT   V.startsWith("p")
 *
 * where V is a path (`path`, `env.country`, `request.action`) rooted at a
 * name that is not a let, a constant or `model`, and C are scalar literals
 * (or named scalar constants). When such a part is false the whole condition
 * is false — CEL's `&&` makes false win over errors — so skipping the rule
 * cannot change the first-match result. Each indexable rule is filed under
 * one part: its path the one most rules use (so one lookup serves many
 * rules), equality before prefix.
 *
 * Per path: an open-addressing hash table from constant values to the rules
 * that test for them (value_hash/value_equal, so 1 == 1.0 == 1u as in CEL),
 * and a byte trie of prefixes whose nodes list the rules testing for that
 * prefix. A request's value for the path selects one hash bucket and the
 * trie nodes along the value.
 *
 * Exactness where the value is not a plain answer. If a path cannot be
 * resolved (a missing field, a non-map in the middle) the condition would
 * have been an evaluation *error*, which stops the first-match run with
 * on_error — not a non-match. So then every rule filed under that path is a
 * candidate, and the evaluator decides. Likewise for prefix rules when the
 * value is not a string (startsWith would fail). Equality and `in` with any
 * resolved value are exact: CEL equality between unrelated types is false.
 *
 * A field gets an index only when at least `index_min_rules` rules are filed
 * under it (policy_load_opts; default 8): below that, the lookup a decision
 * makes costs about what evaluating those few rules would. A strategy with
 * no such field has no index at all (strategy.index is NULL).
 *
 * rule_index_candidates allocates nothing: up to BITMAP_RULES rules it merges
 * through a bitmap on the stack; above, it writes the (disjoint) candidate
 * lists into out[] and sorts them in place. */
#include <stdlib.h>
#include <string.h>

#include "policy/internal.h"

#define BITMAP_RULES 8192
#define MAX_CONJ 64
#define MAX_PATH 16

enum { K_EQ, K_IN, K_PREFIX };

typedef struct ix_key {
  value key;
  uint32_t off, n; /* rule ids: ids[off .. off+n) */
} ix_key;

typedef struct ix_edge {
  uint8_t byte;
  uint32_t node;
} ix_edge;

typedef struct ix_tnode {
  uint32_t edges, nedges; /* children: edges[edges .. edges+nedges), sorted by byte */
  uint32_t off, n;        /* rules whose prefix ends here */
} ix_tnode;

typedef struct ix_path {
  const char *full; /* "env.country", for stats and messages */
  const value *comps;
  uint32_t ncomp;
  /* equality */
  const ix_key *keys;
  uint32_t nkeys;
  const uint32_t *slots; /* key index + 1; 0 empty */
  uint32_t mask;
  /* prefixes */
  const ix_tnode *tnodes; /* node 0 is the root (the empty prefix) */
  uint32_t ntnodes;
  const ix_edge *edges;
  const uint32_t *ids;
  const uint32_t *all; /* every rule filed here, ascending */
  uint32_t nall;
  const uint32_t *all_prefix; /* the prefix rules, ascending */
  uint32_t nall_prefix;
} ix_path;

struct rule_index {
  const ix_path *paths;
  uint32_t npaths;
  const uint64_t *unindexed_bits; /* (nrules + 63) / 64 words */
  const uint32_t *unindexed;
  uint32_t nunindexed;
  uint32_t nrules;
  uint32_t nindexed;
};

/* ---- finding indexable parts ---- */

typedef struct conj_info {
  uint32_t path; /* index into the path list */
  uint8_t kind;
  const value *vals;
  uint32_t nvals;
} conj_info;

typedef struct path_info {
  char *full; /* malloc'd */
  const ast *comps[MAX_PATH];
  uint32_t ncomp;
  uint32_t uses; /* rules with a part on this path */
  uint32_t last_rule_plus1;
} path_info;

typedef struct builder {
  const strategy_build *b;
  arena *mem, *scratch;
  path_info *paths;
  uint32_t npaths, cap;
  int oom;
} builder;

static int name_in(const ast *id, const char *const *names, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (strlen(names[i]) == id->name_len && memcmp(names[i], id->name, id->name_len) == 0) return 1;
  return 0;
}

static const value *constant(const builder *x, const ast *id) {
  if (id->kind != A_IDENT) return NULL;
  return value_map_get(&x->b->s->constants, id->name, id->name_len);
}

static int scalar_kind(uint8_t k) {
  return k == V_NULL || k == V_BOOL || k == V_INT || k == V_UINT || k == V_DOUBLE ||
         k == V_STRING || k == V_BYTES;
}

/* The path index of e, or -1 when e is not an indexable path. */
static int32_t path_of(builder *x, const ast *e) {
  const ast *comps[MAX_PATH];
  uint32_t n = ast_path(e, comps, MAX_PATH);
  if (!n) return -1;
  const ast *root = comps[0];
  if (strategy_let_index(x->b, root->name, root->name_len) >= 0 ||
      name_in(root, x->b->const_names, x->b->nconsts) ||
      (root->name_len == 5 && memcmp(root->name, "model", 5) == 0) ||
      (root->name_len == 6 && memcmp(root->name, "limits", 6) == 0 && x->b->s->nlimits))
    return -1;
  char buf[1024];
  size_t len = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (len + comps[i]->name_len + 2 > sizeof buf) return -1;
    if (i) buf[len++] = '.';
    memcpy(buf + len, comps[i]->name, comps[i]->name_len);
    len += comps[i]->name_len;
  }
  buf[len] = 0;
  for (uint32_t i = 0; i < x->npaths; i++)
    if (!strcmp(x->paths[i].full, buf)) return (int32_t)i;
  if (x->npaths == x->cap) {
    uint32_t cap = x->cap ? x->cap * 2 : 8;
    path_info *p = realloc(x->paths, cap * sizeof *p);
    if (!p) {
      x->oom = 1;
      return -1;
    }
    x->paths = p;
    x->cap = cap;
  }
  path_info *p = &x->paths[x->npaths];
  memset(p, 0, sizeof *p);
  p->full = strdup(buf);
  if (!p->full) {
    x->oom = 1;
    return -1;
  }
  memcpy(p->comps, comps, n * sizeof *comps);
  p->ncomp = n;
  return (int32_t)x->npaths++;
}

static int name_is(const ast *e, const char *s) {
  size_t n = strlen(s);
  return e->name_len == n && memcmp(e->name, s, n) == 0;
}

/* A scalar constant: a literal or a named scalar constant. */
static const value *scalar_const(const builder *x, const ast *e) {
  if (ast_is_scalar_lit(e)) return &e->lit;
  const value *c = constant(x, e);
  return c && scalar_kind(c->kind) ? c : NULL;
}

/* Classifies one `&&` part. Returns 1 and fills *ci when indexable. */
static int classify(builder *x, const ast *e, conj_info *ci) {
  if (e->kind != A_CALL) return 0;
  if (!e->target && e->nargs == 2 && name_is(e, "_==_")) {
    for (int side = 0; side < 2; side++) {
      const ast *p = e->args[side], *k = e->args[1 - side];
      const value *c = scalar_const(x, k);
      if (!c) continue;
      int32_t pi = path_of(x, p);
      if (pi < 0) continue;
      *ci = (conj_info){(uint32_t)pi, K_EQ, c, 1};
      return 1;
    }
    return 0;
  }
  if (!e->target && e->nargs == 2 && name_is(e, "@in")) {
    const ast *p = e->args[0], *l = e->args[1];
    const value *vals = NULL;
    uint32_t n = 0;
    if (l->kind == A_LIST) {
      value *v = l->nargs ? arena_alloc(x->scratch, l->nargs * sizeof *v) : NULL;
      if (l->nargs && !v) return 0;
      for (uint32_t i = 0; i < l->nargs; i++) {
        if (!ast_is_scalar_lit(l->args[i])) return 0;
        v[i] = l->args[i]->lit;
      }
      vals = v;
      n = l->nargs;
    } else {
      const value *c = constant(x, l);
      if (!c) return 0;
      if (c->kind == V_LIST) {
        for (uint32_t i = 0; i < c->n; i++)
          if (!scalar_kind(c->items[i].kind)) return 0;
        vals = c->items;
        n = c->n;
      } else if (c->kind == V_MAP) { /* `in` a map tests its keys */
        value *v = c->n ? arena_alloc(x->scratch, c->n * sizeof *v) : NULL;
        if (c->n && !v) return 0;
        for (uint32_t i = 0; i < c->n; i++) v[i] = c->entries[i].key;
        vals = v;
        n = c->n;
      } else {
        return 0;
      }
    }
    int32_t pi = path_of(x, p);
    if (pi < 0) return 0;
    *ci = (conj_info){(uint32_t)pi, K_IN, vals, n};
    return 1;
  }
  if (e->target && e->nargs == 1 && name_is(e, "startsWith")) {
    const value *c = scalar_const(x, e->args[0]);
    if (!c || c->kind != V_STRING) return 0;
    int32_t pi = path_of(x, e->target);
    if (pi < 0) return 0;
    *ci = (conj_info){(uint32_t)pi, K_PREFIX, c, 1};
    return 1;
  }
  return 0;
}

/* ---- building one path's tables ---- */

typedef struct pair {
  value v;
  uint32_t rule;
} pair;

typedef struct tbuild {
  uint8_t byte;
  uint32_t first_kid, next; /* UINT32_MAX: none */
} tbuild;

static int copy_key(arena *a, const value *in, value *out) {
  *out = *in;
  if ((in->kind == V_STRING || in->kind == V_BYTES) && in->n) {
    char *s = arena_strndup(a, in->s, in->n);
    if (!s) return -1;
    out->s = s;
  }
  return 0;
}

/* Equality table from pairs (in ascending rule order). */
static int build_hash(arena *mem, ix_path *ip, const pair *pairs, uint32_t np, uint32_t *ids_out,
                      uint32_t *nids) {
  uint32_t cap = 8;
  while (cap < np * 2) cap *= 2;
  uint32_t *slots = arena_zalloc(mem, cap * sizeof *slots);
  ix_key *keys = arena_zalloc(mem, (np ? np : 1) * sizeof *keys);
  uint32_t *which = malloc((np ? np : 1) * sizeof *which); /* key of each pair */
  if (!slots || !keys || !which) {
    free(which);
    return -1;
  }
  uint32_t nkeys = 0, mask = cap - 1;
  for (uint32_t i = 0; i < np; i++) {
    uint32_t h = (uint32_t)value_hash(&pairs[i].v) & mask;
    for (;;) {
      uint32_t k = slots[h];
      if (!k) {
        if (copy_key(mem, &pairs[i].v, &keys[nkeys].key)) {
          free(which);
          return -1;
        }
        slots[h] = ++nkeys;
        which[i] = nkeys - 1;
        break;
      }
      if (value_equal(&keys[k - 1].key, &pairs[i].v)) {
        which[i] = k - 1;
        break;
      }
      h = (h + 1) & mask;
    }
  }
  /* counts, offsets, then the ids in rule order (a rule once per key) */
  for (uint32_t i = 0; i < np; i++) keys[which[i]].n++;
  uint32_t off = *nids;
  for (uint32_t k = 0; k < nkeys; k++) {
    keys[k].off = off;
    off += keys[k].n;
    keys[k].n = 0;
  }
  for (uint32_t i = 0; i < np; i++) {
    ix_key *k = &keys[which[i]];
    if (k->n && ids_out[k->off + k->n - 1] == pairs[i].rule) continue; /* `x in [1, 1.0]` */
    ids_out[k->off + k->n++] = pairs[i].rule;
  }
  *nids = off;
  free(which);
  ip->keys = keys;
  ip->nkeys = nkeys;
  ip->slots = slots;
  ip->mask = mask;
  return 0;
}

/* Prefix trie from pairs (strings, in ascending rule order). */
static int build_trie(arena *mem, ix_path *ip, const pair *pairs, uint32_t np, uint32_t *ids_out,
                      uint32_t *nids) {
  size_t total = 1;
  for (uint32_t i = 0; i < np; i++) total += pairs[i].v.n;
  if (total > UINT32_MAX / 2) return -1;
  tbuild *t = malloc(total * sizeof *t);
  uint32_t *end = malloc((np ? np : 1) * sizeof *end); /* node of each pair */
  uint32_t *cnt = calloc(total, sizeof *cnt);
  if (!t || !end || !cnt) {
    free(t);
    free(end);
    free(cnt);
    return -1;
  }
  uint32_t nn = 1;
  t[0] = (tbuild){0, UINT32_MAX, UINT32_MAX};
  for (uint32_t i = 0; i < np; i++) {
    uint32_t node = 0;
    for (uint32_t j = 0; j < pairs[i].v.n; j++) {
      uint8_t ch = (uint8_t)pairs[i].v.s[j];
      uint32_t k = t[node].first_kid;
      while (k != UINT32_MAX && t[k].byte != ch) k = t[k].next;
      if (k == UINT32_MAX) {
        k = nn++;
        t[k] = (tbuild){ch, UINT32_MAX, t[node].first_kid};
        t[node].first_kid = k;
      }
      node = k;
    }
    end[i] = node;
    cnt[node]++;
  }
  ix_tnode *tn = arena_zalloc(mem, nn * sizeof *tn);
  ix_edge *edges = arena_zalloc(mem, (nn ? nn : 1) * sizeof *edges);
  int failed = !tn || !edges;
  uint32_t nedges = 0, off = *nids;
  for (uint32_t v = 0; !failed && v < nn; v++) {
    tn[v].off = off;
    off += cnt[v];
    tn[v].edges = nedges;
    for (uint32_t k = t[v].first_kid; k != UINT32_MAX; k = t[k].next) {
      /* insert sorted by byte */
      uint32_t at = nedges;
      while (at > tn[v].edges && edges[at - 1].byte > t[k].byte) {
        edges[at] = edges[at - 1];
        at--;
      }
      edges[at] = (ix_edge){t[k].byte, k};
      nedges++;
    }
    tn[v].nedges = nedges - tn[v].edges;
  }
  for (uint32_t i = 0; !failed && i < np; i++) {
    ix_tnode *x = &tn[end[i]];
    if (x->n && ids_out[x->off + x->n - 1] == pairs[i].rule) continue;
    ids_out[x->off + x->n++] = pairs[i].rule;
  }
  free(t);
  free(end);
  free(cnt);
  if (failed) return -1;
  *nids = off;
  ip->tnodes = tn;
  ip->ntnodes = nn;
  ip->edges = edges;
  return 0;
}

static int build_path(builder *x, ix_path *ip, const path_info *pi, uint32_t pidx,
                      const conj_info *chosen, const uint32_t *has_choice, uint32_t nrules) {
  arena *mem = x->mem;
  ip->full = arena_strndup(mem, pi->full, strlen(pi->full));
  value *comps = arena_alloc(mem, pi->ncomp * sizeof *comps);
  if (!ip->full || !comps) return -1;
  for (uint32_t i = 0; i < pi->ncomp; i++) {
    char *s = arena_strndup(mem, pi->comps[i]->name, pi->comps[i]->name_len);
    if (!s) return -1;
    comps[i] = value_str(s, pi->comps[i]->name_len);
  }
  ip->comps = comps;
  ip->ncomp = pi->ncomp;

  /* pairs for both tables */
  uint32_t neq = 0, npre = 0, nall = 0, nall_prefix = 0;
  for (uint32_t r = 0; r < nrules; r++) {
    if (!has_choice[r] || chosen[r].path != pidx) continue;
    nall++;
    if (chosen[r].kind == K_PREFIX) {
      npre++;
      nall_prefix++;
    } else {
      neq += chosen[r].nvals;
    }
  }
  pair *eq = malloc((neq ? neq : 1) * sizeof *eq);
  pair *pre = malloc((npre ? npre : 1) * sizeof *pre);
  uint32_t *all = arena_alloc(mem, (nall ? nall : 1) * sizeof *all);
  uint32_t *all_prefix = arena_alloc(mem, (nall_prefix ? nall_prefix : 1) * sizeof *all_prefix);
  uint32_t *ids = arena_alloc(mem, (neq + npre + 1) * sizeof *ids);
  int rc = -1;
  if (!eq || !pre || !all || !all_prefix || !ids) goto out;
  neq = npre = nall = nall_prefix = 0;
  for (uint32_t r = 0; r < nrules; r++) {
    if (!has_choice[r] || chosen[r].path != pidx) continue;
    all[nall++] = r;
    if (chosen[r].kind == K_PREFIX) {
      all_prefix[nall_prefix++] = r;
      pre[npre++] = (pair){chosen[r].vals[0], r};
    } else {
      for (uint32_t j = 0; j < chosen[r].nvals; j++) eq[neq++] = (pair){chosen[r].vals[j], r};
    }
  }
  ip->all = all;
  ip->nall = nall;
  ip->all_prefix = all_prefix;
  ip->nall_prefix = nall_prefix;
  ip->ids = ids;
  uint32_t nids = 0;
  if (neq && build_hash(mem, ip, eq, neq, ids, &nids)) goto out;
  if (npre && build_trie(mem, ip, pre, npre, ids, &nids)) goto out;
  rc = 0;
out:
  free(eq);
  free(pre);
  return rc;
}

int rule_index_build(arena *mem, arena *scratch, const strategy_build *b, policy_diags *d) {
  strategy *s = b->s;
  uint32_t n = s->nrules;
  builder x;
  memset(&x, 0, sizeof x);
  x.b = b;
  x.mem = mem;
  x.scratch = scratch;
  rule_index *ix = arena_zalloc(mem, sizeof *ix);
  /* the parts found, rule after rule (rule r's from first[r], nfound[r] of
   * them): most rules have one or two, and a table of MAX_CONJ a rule would
   * touch a fresh page every few rules */
  size_t nall = 0, cap = (size_t)n * 2 + 16;
  conj_info *found = malloc(cap * sizeof *found);
  uint32_t *nfound = calloc(n + 1, sizeof *nfound);
  size_t *first = malloc((n + 1) * sizeof *first);
  conj_info *chosen = malloc((n + 1) * sizeof *chosen);
  uint32_t *has = calloc(n + 1, sizeof *has);
  uint64_t *bits = arena_zalloc(mem, ((n + 63) / 64 + 1) * sizeof *bits);
  uint32_t *unindexed = arena_alloc(mem, (n + 1) * sizeof *unindexed);
  int rc = -1;
  if (!ix || !found || !nfound || !first || !chosen || !has || !bits || !unindexed) goto out;
  ix->nrules = n;

  /* 1. every indexable part of every rule; a path counts once per rule */
  for (uint32_t r = 0; r < n; r++) {
    const ast *cond = b->rules ? b->rules[r].cond : NULL;
    first[r] = nall;
    policy_rule *rule = (policy_rule *)&s->rules[r]; /* this load's own, being built */
    rule->index_part = false;
    if (!cond || s->rules[r].reads_model) continue;
    const ast *parts[MAX_CONJ];
    uint32_t np = ast_conjuncts(cond, parts, MAX_CONJ);
    if (np > MAX_CONJ) np = MAX_CONJ;
    for (uint32_t i = 0; i < np; i++) {
      conj_info ci;
      if (!classify(&x, parts[i], &ci)) continue;
      if (x.oom) goto out;
      /* (kept in the compiled/ file: a rule without such a part files
       * nothing and counts for no path, so a later load of the same text
       * need not parse it for the index: cache.c) */
      rule->index_part = true;
      if (nall == cap) {
        conj_info *more = realloc(found, 2 * cap * sizeof *more);
        if (!more) goto out;
        found = more;
        cap *= 2;
      }
      found[nall++] = ci;
      nfound[r]++;
      path_info *p = &x.paths[ci.path];
      if (p->last_rule_plus1 != r + 1) {
        p->uses++;
        p->last_rule_plus1 = r + 1;
      }
    }
  }
  if (x.oom) goto out;
  /* 2. each rule picks one part: the most used path, equality first */
  for (uint32_t r = 0; r < n; r++) {
    const conj_info *best = NULL;
    for (uint32_t i = 0; i < nfound[r]; i++) {
      const conj_info *c = &found[first[r] + i];
      if (!best) {
        best = c;
        continue;
      }
      uint32_t cu = x.paths[c->path].uses, bu = x.paths[best->path].uses;
      if (cu > bu ||
          (cu == bu && c->path == best->path && best->kind == K_PREFIX && c->kind != K_PREFIX))
        best = c;
    }
    if (best) {
      chosen[r] = *best;
      has[r] = 1;
    }
  }
  /* 2b. a field with few rules filed under it costs a lookup per decision
   * for little gain: its rules are evaluated like unindexed ones */
  uint32_t *filed = calloc(x.npaths + 1, sizeof *filed);
  if (!filed) goto out;
  for (uint32_t r = 0; r < n; r++)
    if (has[r]) filed[chosen[r].path]++;
  for (uint32_t r = 0; r < n; r++) {
    if (has[r] && filed[chosen[r].path] < b->index_min_rules) has[r] = 0;
    if (has[r]) {
      ix->nindexed++;
    } else {
      bits[r / 64] |= 1ull << (r % 64);
      unindexed[ix->nunindexed++] = r;
    }
  }
  free(filed);
  /* 3. tables for the paths that some rule chose */
  uint32_t npaths = 0;
  uint8_t *used = calloc(x.npaths + 1, 1);
  if (!used) goto out;
  for (uint32_t r = 0; r < n; r++)
    if (has[r] && !used[chosen[r].path]) {
      used[chosen[r].path] = 1;
      npaths++;
    }
  ix_path *paths = arena_zalloc(mem, (npaths + 1) * sizeof *paths);
  if (!paths) {
    free(used);
    goto out;
  }
  uint32_t k = 0;
  for (uint32_t p = 0; p < x.npaths; p++) {
    if (!used[p]) continue;
    if (build_path(&x, &paths[k], &x.paths[p], p, chosen, has, n)) {
      free(used);
      goto out;
    }
    k++;
  }
  free(used);
  ix->paths = paths;
  ix->npaths = npaths;
  ix->unindexed = unindexed;
  ix->unindexed_bits = bits;
  s->index = npaths ? ix : NULL; /* nothing indexed: the engine scans in order */
  rc = 0;
out:
  if (rc) diag_add(d, DIAG_ERROR, b->file, 0, 0, "", "out of memory building the rule index");
  for (uint32_t i = 0; i < x.npaths; i++) free(x.paths[i].full);
  free(x.paths);
  free(found);
  free(nfound);
  free(first);
  free(chosen);
  free(has);
  return rc;
}

void rule_index_stats(const rule_index *ix, uint32_t *indexed, uint32_t *paths) {
  *indexed = ix ? ix->nindexed : 0;
  *paths = ix ? ix->npaths : 0;
}

/* ---- at decision time ---- */

/* The request's value at a path, resolved as the evaluator resolves it
 * (policy expressions compile with simple_names: the root is a variable, the
 * rest are fields). Returns 0 and sets *out, or -1 when the path is missing
 * or crosses a non-map (the condition would fail to evaluate). */
static int resolve(const ix_path *p, const expr_activation *act, value *out) {
  if (!act || !act->lookup) return -1;
  value v;
  if (act->lookup(act->user, p->comps[0].s, p->comps[0].n, &v) != 0) return -1;
  for (uint32_t j = 1; j < p->ncomp; j++) {
    if (v.kind != V_MAP) return -1;
    const value *f = value_map_get(&v, p->comps[j].s, p->comps[j].n);
    if (!f) return -1;
    v = *f;
  }
  if (v.kind == V_ERROR) return -1;
  *out = v;
  return 0;
}

typedef struct sink {
  uint64_t *bits; /* bitmap mode */
  uint32_t *out;  /* list mode */
  uint32_t n;
} sink;

static inline void emit(sink *k, const uint32_t *ids, uint32_t n) {
  if (k->bits) {
    for (uint32_t i = 0; i < n; i++) k->bits[ids[i] / 64] |= 1ull << (ids[i] % 64);
  } else {
    memcpy(k->out + k->n, ids, n * sizeof *ids);
    k->n += n;
  }
}

static void path_candidates(const ix_path *p, const expr_activation *act, sink *k) {
  value v;
  if (resolve(p, act, &v)) {
    emit(k, p->all, p->nall);
    return;
  }
  if (p->nkeys) {
    uint32_t h = (uint32_t)value_hash(&v) & p->mask;
    for (;;) {
      uint32_t s = p->slots[h];
      if (!s) break;
      const ix_key *key = &p->keys[s - 1];
      if (value_equal(&key->key, &v)) {
        emit(k, p->ids + key->off, key->n);
        break;
      }
      h = (h + 1) & p->mask;
    }
  }
  if (p->ntnodes) {
    if (v.kind != V_STRING) {
      emit(k, p->all_prefix, p->nall_prefix);
      return;
    }
    uint32_t node = 0;
    for (uint32_t i = 0;; i++) {
      const ix_tnode *t = &p->tnodes[node];
      if (t->n) emit(k, p->ids + t->off, t->n);
      if (i == v.n || !t->nedges) break;
      /* binary search the children by byte */
      uint8_t ch = (uint8_t)v.s[i];
      uint32_t lo = t->edges, hi = t->edges + t->nedges;
      while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (p->edges[mid].byte < ch)
          lo = mid + 1;
        else
          hi = mid;
      }
      if (lo == t->edges + t->nedges || p->edges[lo].byte != ch) break;
      node = p->edges[lo].node;
    }
  }
}

static void sift_down(uint32_t *a, uint32_t start, uint32_t n) {
  uint32_t root = start;
  for (;;) {
    uint32_t child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && a[child + 1] > a[child]) child++;
    if (a[root] >= a[child]) return;
    uint32_t t = a[root];
    a[root] = a[child];
    a[child] = t;
    root = child;
  }
}

static void heap_sort(uint32_t *a, uint32_t n) {
  if (n < 2) return;
  for (uint32_t i = n / 2; i-- > 0;) sift_down(a, i, n);
  for (uint32_t end = n - 1; end > 0; end--) {
    uint32_t t = a[0];
    a[0] = a[end];
    a[end] = t;
    sift_down(a, 0, end);
  }
}

uint32_t rule_index_candidates(const rule_index *ix, const strategy *s, const expr_activation *act,
                               uint32_t *out) {
  uint32_t n = s->nrules;
  if (!ix || ix->npaths == 0) {
    for (uint32_t i = 0; i < n; i++) out[i] = i;
    return n;
  }
  if (n <= BITMAP_RULES) {
    uint64_t bits[BITMAP_RULES / 64];
    uint32_t nw = (n + 63) / 64;
    memcpy(bits, ix->unindexed_bits, nw * sizeof *bits);
    sink k = {bits, NULL, 0};
    for (uint32_t p = 0; p < ix->npaths; p++) path_candidates(&ix->paths[p], act, &k);
    uint32_t m = 0;
    for (uint32_t w = 0; w < nw; w++) {
      uint64_t x = bits[w];
      while (x) {
        out[m++] = w * 64 + (uint32_t)__builtin_ctzll(x);
        x &= x - 1;
      }
    }
    return m;
  }
  /* Large strategies: the lists are disjoint, so append and sort. */
  sink k = {NULL, out, 0};
  emit(&k, ix->unindexed, ix->nunindexed);
  for (uint32_t p = 0; p < ix->npaths; p++) path_candidates(&ix->paths[p], act, &k);
  heap_sort(out, k.n);
  return k.n;
}
