/* strategy_snapshot.c — a strategy's `snapshot:` key: the context fields
 * its snapshots must never hold in the clear.
 *
 *   snapshot:
 *     mask: [card.number, headers.authorization]   replaced by "[masked]"
 *     hash: [email]                                HMAC-SHA256 with the node secret
 *
 * Paths are written as rules name the fields (`card.number` is
 * request.context.card.number; a leading `context.` is allowed and means
 * the same, as `context.card.number` and `request.context.card.number` do
 * in a rule). This file checks the key (errors at file:line:col), and
 * finds what reads those fields: a rule or let whose expression selects a
 * path that is the field, inside it or around it (`card` reads
 * card.number), or reads a let that does. A rule that reads one gets a
 * warning: its decisions cannot be re-proven from the snapshot, which holds
 * the field masked (replay reports them apart). Masking itself is the
 * engine's (src/engine/mask.c). */
#include <stdio.h>
#include <string.h>

#include "policy/internal.h"
#include "policy/strategy_cc.h"

#define MAX_PARTS 32

/* "card.number" (or "context.card.number") -> {card, number}; NULL after
 * an error. */
static const char *const *split_path(cc *c, const ynode *n, const char *key, uint32_t *nparts) {
  if (n->kind != Y_SCALAR || n->v.kind != V_STRING || !n->len) {
    err_at(c, n, key, "expected a field path as rules name it (card.number), got %s", kind_name(n));
    return NULL;
  }
  const char *parts[MAX_PARTS];
  uint32_t np = 0;
  const char *p = n->text, *end = n->text + n->len;
  while (p <= end) {
    const char *q = memchr(p, '.', (size_t)(end - p));
    if (!q) q = end;
    if (q == p || !valid_ident(p, (size_t)(q - p)) || np == MAX_PARTS) {
      err_at(c, n, key,
             "'%s' is not a field path: names of letters, digits and _ joined by dots, at most "
             "%d",
             n->text, MAX_PARTS);
      return NULL;
    }
    parts[np] = dup(c, p, (size_t)(q - p));
    if (!parts[np]) return NULL;
    np++;
    p = q + 1;
  }
  uint32_t skip = np > 1 && !strcmp(parts[0], "context");
  const char **out = arena_alloc(c->mem, (np - skip) * sizeof *out);
  if (!out) {
    nomem(c);
    return NULL;
  }
  memcpy(out, parts + skip, (np - skip) * sizeof *out);
  *nparts = np - skip;
  return out;
}

static void parse_paths(cc *c, const ynode *n, const char *key, const policy_path **out,
                        uint32_t *nout) {
  if (want_list(c, n, key)) return;
  policy_path *v = arena_zalloc(c->mem, (n->n ? n->n : 1) * sizeof *v);
  if (!v) {
    nomem(c);
    return;
  }
  uint32_t k = 0;
  for (uint32_t i = 0; i < n->n; i++) {
    char sub[64];
    snprintf(sub, sizeof sub, "%s[%u]", key, i);
    const ynode *e = n->kids[i];
    uint32_t np = 0;
    const char *const *parts = split_path(c, e, sub, &np);
    if (!parts) continue;
    v[k].text = dup(c, e->text, e->len);
    v[k].parts = parts;
    v[k].nparts = np;
    k++;
  }
  *out = v;
  *nout = k;
}

void parse_snapshot(cc *c, const ynode *n) {
  if (want_map(c, n, "snapshot")) return;
  static const char *const keys[] = {"mask", "hash"};
  check_keys(c, n, "snapshot", keys, 2);
  strategy *s = c->s;
  const ynode *x;
  if ((x = get(n, "mask"))) parse_paths(c, x, "snapshot.mask", &s->snap_mask, &s->nsnap_mask);
  if ((x = get(n, "hash"))) parse_paths(c, x, "snapshot.hash", &s->snap_hash, &s->nsnap_hash);
  /* a field both masked and hashed: say which wins rather than guess */
  for (uint32_t i = 0; i < s->nsnap_mask; i++)
    for (uint32_t j = 0; j < s->nsnap_hash; j++)
      if (!strcmp(s->snap_mask[i].text, s->snap_hash[j].text))
        err_at(c, x, "snapshot.hash", "'%s' is both masked and hashed: give it once",
               s->snap_hash[j].text);
}

/* ---- what reads the fields ---- */

typedef struct finder {
  const strategy *s;
  const let_info *lets;
  const uint8_t *let_masked;
  const char **let_field; /* per let: the field it reads, as find says it */
  cc *c;
} finder;

/* The selection chain e names: `a.b.c` -> {a, b, c} with their lengths;
 * 0 when e is not one. */
static uint32_t chain(const ast *e, const char **parts, uint32_t *lens) {
  const ast *rev[MAX_PARTS];
  uint32_t n = 0;
  while (e && e->kind == A_SELECT && n < MAX_PARTS - 1) {
    rev[n++] = e;
    e = e->target;
  }
  if (!e || e->kind != A_IDENT) return 0;
  rev[n++] = e;
  for (uint32_t i = 0; i < n; i++) {
    parts[i] = rev[n - 1 - i]->name;
    lens[i] = rev[n - 1 - i]->name_len;
  }
  return n;
}

static int same(const char *a, const char *b, uint32_t blen) {
  return strlen(a) == blen && !memcmp(a, b, blen);
}

/* Whether the chain of e meets a masked or hashed path (one is a prefix of
 * the other): the field it names, or NULL. */
static const char *meets(const finder *f, const ast *e) {
  const char *parts[MAX_PARTS];
  uint32_t lens[MAX_PARTS];
  uint32_t n = chain(e, parts, lens);
  if (!n) return NULL;
  uint32_t skip = n > 1 && same("context", parts[0], lens[0]);
  if (n > 2 && same("request", parts[0], lens[0]) && same("context", parts[1], lens[1])) skip = 2;
  for (int pass = 0; pass < 2; pass++) {
    const policy_path *v = pass ? f->s->snap_hash : f->s->snap_mask;
    uint32_t nv = pass ? f->s->nsnap_hash : f->s->nsnap_mask;
    for (uint32_t i = 0; i < nv; i++) {
      uint32_t m = n - skip < v[i].nparts ? n - skip : v[i].nparts, j = 0;
      while (j < m && same(v[i].parts[j], parts[skip + j], lens[skip + j])) j++;
      if (j == m) return v[i].text;
    }
  }
  return NULL;
}

static const char *find(const finder *f, const ast *e) {
  if (!e) return NULL;
  if (e->kind == A_SELECT || e->kind == A_IDENT) {
    const char *w = meets(f, e);
    if (w) return w;
    if (e->kind == A_IDENT && f->let_masked) /* a let that reads one */
      for (uint32_t i = 0; i < f->s->nlets; i++)
        if (f->let_masked[i] && f->s->lets[i].name &&
            same(f->s->lets[i].name, e->name, e->name_len)) {
          char buf[512];
          snprintf(buf, sizeof buf, "let '%s', which reads %s", f->s->lets[i].name,
                   f->let_field[i] ? f->let_field[i] : "one");
          const char *txt = dup(f->c, buf, strlen(buf));
          return txt ? txt : "a let";
        }
    if (e->kind == A_IDENT) return NULL;
  }
  const char *w = find(f, e->target);
  for (uint32_t i = 0; !w && i < e->nargs; i++) w = find(f, e->args[i]);
  return w;
}

void snapshot_reads(cc *c, const rule_info *rules, const let_info *lets) {
  strategy *s = c->s;
  if (!s->nsnap_mask && !s->nsnap_hash) return;
  uint8_t *lm = s->nlets ? arena_zalloc(c->mem, s->nlets) : NULL;
  uint8_t *rm = s->nrules ? arena_zalloc(c->mem, s->nrules) : NULL;
  if ((s->nlets && !lm) || (s->nrules && !rm)) {
    nomem(c);
    return;
  }
  const char **lf = s->nlets ? arena_zalloc(c->scratch, s->nlets * sizeof *lf) : NULL;
  if (s->nlets && !lf) {
    nomem(c);
    return;
  }
  finder f = {s, lets, NULL, lf, c};
  /* lets: directly, then through the lets they read, to a fixed point */
  for (uint32_t i = 0; lets && i < s->nlets; i++) {
    lf[i] = lets[i].tree ? find(&f, lets[i].tree) : NULL;
    lm[i] = lf[i] != NULL;
  }
  for (int changed = 1; changed && lets;) {
    changed = 0;
    for (uint32_t i = 0; i < s->nlets; i++)
      for (uint32_t k = 0; !lm[i] && k < lets[i].ndeps; k++)
        if (lm[lets[i].deps[k]]) lm[i] = 1, lf[i] = lf[lets[i].deps[k]], changed = 1;
  }
  f.let_masked = lm;
  for (uint32_t i = 0; rules && i < s->nrules; i++) {
    const char *w = rules[i].cond ? find(&f, rules[i].cond) : NULL;
    rm[i] = w != NULL;
    if (w) {
      char key[48];
      snprintf(key, sizeof key, "rules[%u].if", i);
      warn_at(c, rules[i].node, key,
              "rule '%s' reads %s, which `snapshot:` keeps out of the snapshots: its decisions "
              "cannot be re-proven by replay",
              s->rules[i].name, w);
    }
  }
  s->let_masked = lm;
  s->rule_masked = rm;
}
