/* names.c — the names a strategy binds itself (its lets and constants), in
 * a small hash table, so that resolving a variable costs one probe instead of
 * a scan over every let and every constant.
 *
 * Rules read variables all the time (each `path`, each `scanner_agents` in a
 * comprehension is a lookup), and most of them are context fields, which the
 * scans would only reach after comparing against every let and constant
 * name. The table is built once per bundle by the engine, beside the bundle
 * it describes and swapped with it; a table-less decision (NULL) falls back to
 * the scans, with the same result (`verdict test` uses that).
 *
 * Beside it, the strategy's lookup names by pointer (names.h): every name
 * its programs will pass to the engine's lookup, each tied to a binding
 * number and to what the table says it is. A decision keeps one value per
 * binding, so after the first read a variable costs a pointer probe, no
 * hashing or comparing of names (on the example request_gate, variable
 * reads went from ~20% of a decision to ~8%). A rule's `limits.NAME` is
 * one such name of its own (the policy compiler claims `limits`:
 * expr_opts.claimed), bound like a request name: decide.c answers it by
 * reading that limit alone, where `limits` would read every limit.
 *
 * And, for each limit, how its key is read (names.h, limit_key): a key
 * that is one variable or `request.key` is read without the evaluator — a
 * variable that can only be a context field (`ip`) straight from the
 * request's context, without the engine's name lookup — and the head of
 * the store's key ("STRATEGY\x1fLIMIT\x1f") is built here once rather than
 * on every decision. Those shapes are told apart by the compiled
 * program's root (expr/refs.h, expr_root). */
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "engine/names.h"
#include "expr/refs.h"
#include "model/model.h"

/* The length and three bytes: names in one strategy rarely agree on all
 * four, and the hash is computed on every variable read. */
static uint32_t hash_name(const char *s, size_t n) {
  uint32_t h = (uint32_t)n * 0x9e3779b1u;
  if (n)
    h ^= (uint32_t)(unsigned char)s[0] * 0x85ebca6bu ^
         (uint32_t)(unsigned char)s[n - 1] * 0xc2b2ae35u ^
         (uint32_t)(unsigned char)s[n / 2] * 0x27d4eb2fu;
  return h ^ (h >> 15);
}

static void put(name_table *t, const char *name, uint32_t len, int32_t let, const value *c) {
  uint32_t i = hash_name(name, len) & t->mask;
  for (;; i = (i + 1) & t->mask) {
    name_slot *s = &t->slots[i];
    if (!s->name) {
      s->name = name;
      s->len = len;
    } else if (s->len != len || memcmp(s->name, name, len) != 0) {
      continue;
    }
    /* Same name twice: a let wins over a constant, the first let over later ones. */
    if (let >= 0 && s->let < 0) {
      s->let = let;
      s->constant = NULL;
    } else if (let < 0 && s->let < 0 && !s->constant) {
      s->constant = c;
    }
    return;
  }
}

/* ---- the lookup names of the strategy's programs (names.h) ----
 *
 * engine.h's name_table has no field for them, so the name_refs sits right
 * after the table's slots, in the same allocation: name_table_refs finds it
 * at slots + mask + 1. */

static int program_refs(const expr_program *p, expr_ref **buf, uint32_t *n, uint32_t *cap) {
  for (;;) {
    uint32_t want = expr_refs(p, *buf ? *buf + *n : NULL, *cap - *n); /* NULL + 0 is UB */
    if (*n + want <= *cap) {
      *n += want;
      return 0;
    }
    uint32_t ncap = (*cap ? *cap : 64) * 2;
    while (ncap < *n + want) ncap *= 2;
    expr_ref *b = realloc(*buf, ncap * sizeof *b);
    if (!b) return -1;
    *buf = b;
    *cap = ncap;
  }
}

/* A variable that decide.c's resolve_request can only answer with a field
 * of the request's context (or an absent field's error): not one of the
 * names it answers itself, not a type name, not dotted. */
static int only_a_field(const char *n, size_t len) {
  static const char *const others[] = {"context", "request",   "model",  "int",   "uint",
                                       "double",  "bool",      "string", "bytes", "list",
                                       "map",     "null_type", "type"};
  if (!len || memchr(n, '.', len) || (len >= 6 && memcmp(n, "limits", 6) == 0)) return 0;
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
    if (strlen(others[i]) == len && memcmp(others[i], n, len) == 0) return 0;
  return 1;
}

/* How limit pl's key is read: its program's root is one variable, or
 * `request` (not a let or a constant of the strategy) with `.key` selected. */
static void limit_key_shape(const expr_program *p, const name_table *t, const name_refs *refs,
                            limit_key *lk) {
  expr_ref var, field;
  int root = expr_root(p, &var, &field);
  if (root == EXPR_ROOT_VAR) {
    lk->how = LIMIT_KEY_VAR;
    lk->var = var.name;
    lk->var_len = var.len;
    const name_bind *b = name_refs_find(refs, var.name);
    if (b && b->let < 0 && !b->constant && !name_table_find(t, var.name, var.len) &&
        only_a_field(var.name, var.len)) {
      lk->how = LIMIT_KEY_FIELD;
      lk->var_bind = b->id;
    }
  } else if (root == EXPR_ROOT_FIELD && field.len == 3 && memcmp(field.name, "key", 3) == 0 &&
             var.len == 7 && memcmp(var.name, "request", 7) == 0 &&
             !name_table_find(t, "request", 7)) {
    lk->how = LIMIT_KEY_REQUEST;
  }
}

static limit_key *limit_keys_build(arena *a, const strategy *s, const name_table *t,
                                   const name_refs *refs) {
  limit_key *lk = arena_zalloc(a, s->nlimits * sizeof *lk);
  if (!lk) return NULL;
  size_t sn = strlen(s->name);
  for (uint32_t i = 0; i < s->nlimits; i++) {
    const policy_limit *pl = &s->limits[i];
    if (pl->key) limit_key_shape(pl->key, t, refs, &lk[i]);
    lk[i].spec = (limit_spec){.window_ns = pl->window_ns,
                              .budget = pl->budget,
                              .penalty_ns = pl->penalty_ns,
                              .spacing_us = state_spacing_us(pl->window_ns, pl->budget)};
    size_t n = sn + pl->name_len + 2;
    if (n >= 80) { /* decide.c says why the limit fails, the key evaluated */
      lk[i].how = LIMIT_KEY_EVAL;
      continue;
    }
    char *p = arena_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s->name, sn);
    p[sn] = '\x1f';
    memcpy(p + sn + 1, pl->name, pl->name_len);
    p[n - 1] = '\x1f';
    p[n] = '\0';
    lk[i].prefix = p;
    lk[i].prefix_len = (uint32_t)n;
    state_limit_id(s->name, sn, pl->name, pl->name_len, lk[i].id);
  }
  return lk;
}

static int build_refs(arena *a, const strategy *s, const name_table *t, name_refs *out) {
  expr_ref *refs = NULL;
  uint32_t n = 0, cap = 0;
  int rc = -1;
  for (uint32_t i = 0; i < s->nlets; i++)
    if (s->lets[i].prog && program_refs(s->lets[i].prog, &refs, &n, &cap)) goto out;
  for (uint32_t i = 0; i < s->nrules; i++)
    if (s->rules[i].cond && program_refs(s->rules[i].cond, &refs, &n, &cap)) goto out;
  for (uint32_t i = 0; i < s->nlimits; i++) { /* read by every decision the limit reaches */
    const policy_limit *pl = &s->limits[i];
    if ((pl->key && program_refs(pl->key, &refs, &n, &cap)) ||
        (pl->when && program_refs(pl->when, &refs, &n, &cap)) ||
        (pl->charge && program_refs(pl->charge, &refs, &n, &cap)))
      goto out;
  }
  /* the fallback model's features read the same names as the rules */
  const struct feature_spec *fs = s->model ? s->model->features : NULL;
  for (uint32_t i = 0; fs && i < features_count(fs); i++)
    if (features_program(fs, i) && program_refs(features_program(fs, i), &refs, &n, &cap)) goto out;
  uint32_t rcap = 16;
  while (rcap < n * 2 + 2) rcap *= 2;
  name_ref *map = arena_zalloc(a, rcap * sizeof *map);
  name_bind *binds = arena_alloc(a, (n ? n : 1) * sizeof *binds);
  if (!map || !binds) goto out;
  uint32_t nb = 0;
  for (uint32_t k = 0; k < n; k++) {
    const char *ptr = refs[k].name;
    uint32_t len = refs[k].len;
    /* one binding per distinct name (few: a linear search is fine at load) */
    const name_bind *b = NULL;
    for (uint32_t j = 0; j < nb && !b; j++)
      if (binds[j].len == len && bytes_same(binds[j].name, ptr, len)) b = &binds[j];
    if (!b) {
      const name_slot *ns = name_table_find(t, ptr, len);
      binds[nb] =
          (name_bind){ptr, len, nb, ns ? ns->let : -1, ns && ns->let < 0 ? ns->constant : NULL};
      b = &binds[nb++];
    }
    uintptr_t u = (uintptr_t)ptr;
    uint32_t i = (uint32_t)((u >> 3) * 0x9e3779b97f4a7c15ull >> 40) & (rcap - 1);
    while (map[i].ptr && map[i].ptr != ptr) i = (i + 1) & (rcap - 1);
    map[i] = (name_ref){ptr, b};
  }
  out->refs = map;
  out->mask = rcap - 1;
  out->nbinds = nb;
  if (s->nlimits && !(out->limit_keys = limit_keys_build(a, s, t, out))) goto out;
  out->limits_plain = s->nlimits > 0;
  for (uint32_t i = 0; i < s->nlimits; i++) {
    const limit_key *lk = &out->limit_keys[i];
    if (s->limits[i].when || s->limits[i].charge || !lk->prefix || !limit_key_is_plain(lk))
      out->limits_plain = false;
  }
  rc = 0;
out:
  free(refs);
  return rc;
}

const name_refs *name_table_refs(const name_table *t) {
  return (const name_refs *)(const void *)(t->slots + t->mask + 1);
}

int name_table_build(arena *a, const strategy *s, name_table *t) {
  uint32_t n = s->nlets + (s->constants.kind == V_MAP ? s->constants.n : 0);
  uint32_t cap = 8;
  while (cap < n * 2 + 2) cap *= 2;
  t->slots = arena_zalloc(a, cap * sizeof *t->slots + sizeof(name_refs));
  if (!t->slots) return -1;
  t->mask = cap - 1;
  for (uint32_t i = 0; i < cap; i++) t->slots[i].let = -1;
  for (uint32_t i = 0; i < s->nlets; i++)
    put(t, s->lets[i].name, s->lets[i].name_len, (int32_t)i, NULL);
  if (s->constants.kind == V_MAP)
    for (uint32_t i = 0; i < s->constants.n; i++) {
      const map_entry *e = &s->constants.entries[i];
      if (e->key.kind == V_STRING) put(t, e->key.s, e->key.n, -1, &e->val);
    }
  return build_refs(a, s, t, (name_refs *)(void *)(t->slots + cap));
}

const name_slot *name_table_find(const name_table *t, const char *name, size_t len) {
  uint32_t i = hash_name(name, len) & t->mask;
  for (;; i = (i + 1) & t->mask) {
    const name_slot *s = &t->slots[i];
    if (!s->name) return NULL;
    if (s->len == len && bytes_same(s->name, name, len)) return s;
  }
}

name_table *name_tables_build(arena *a, const policy_bundle *b) {
  name_table *t = arena_zalloc(a, (b->nstrategies ? b->nstrategies : 1) * sizeof *t);
  if (!t) return NULL;
  for (uint32_t i = 0; i < b->nstrategies; i++)
    if (name_table_build(a, &b->strategies[i], &t[i])) return NULL;
  return t;
}
