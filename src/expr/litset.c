/* litset.c — literal sets (contract in litset.h).
 *
 * Three kinds of literal, three structures, because each is cheapest its
 * own way:
 *
 * - tied to the start (or to the whole subject): a trie walked forward from
 *   the first byte. Most subjects leave it after a byte or two.
 * - tied to the end only: a trie of the reversed literals, walked backward
 *   from the last byte.
 * - free (anywhere): Wu and Manber's multi-pattern shift table. A window as
 *   long as the shortest free literal (m bytes) slides over the subject; the
 *   last two bytes of the window, hashed, index a table saying how far the
 *   window may move without skipping an occurrence (up to m - 1). A 0 there
 *   means the window ends like the start of some literal: the literals of
 *   that bucket are compared at the window. On text that matches nothing
 *   the window mostly jumps, so a user agent of 80 bytes against a dozen
 *   names costs a few dozen steps. With one-byte literals (m = 1) every
 *   position is checked against a bitmap of first bytes instead.
 *
 * Trie nodes are rows of a table indexed by byte class: the bytes that occur
 * in some literal get a class each (both cases of a letter share one in a
 * caseless set), every other byte is class 0, whose entries lead to node 0,
 * the dead end. Sets too big for these tables are refused (NULL), and the
 * caller keeps its general path.
 *
 * The regex reader expands a pattern that denotes finitely many strings
 * (`^/(\.env|wp-admin)|\.(php|aspx?)$`) into its literals, refusing
 * anything whose meaning is more than a set of strings. */
#include "expr/litset.h"

#include <stdlib.h>
#include <string.h>

#define SHIFT_SIZE 4096
#define MAX_CELLS (1u << 18) /* trie table entries, per trie */
#define MAX_LITS 1024u
#define MAX_LIT_LEN 1024u

struct litset {
  uint8_t caseless;
  uint8_t always;      /* an empty literal not tied to both ends: everything matches */
  uint8_t empty_whole; /* "" tied to both ends: the empty subject matches */
  uint32_t ncls;
  uint8_t cls[256];
  /* start-tied literals: node * ncls + class -> node; flags 1: a start-tied
   * literal ends here, 2: a whole-subject literal ends here */
  const uint16_t *fwd;
  const uint8_t *fwd_flag;
  uint32_t nfwd;
  /* end-tied literals, reversed; flag 1: one ends here */
  const uint16_t *rev;
  const uint8_t *rev_flag;
  uint32_t nrev;
  /* free literals */
  const lit *free_lits;
  uint32_t nfree;
  uint32_t m; /* the shortest free literal */
  /* m >= 2: per hash of two bytes, the shift (< 0x8000), or 0x8000 | bucket */
  const uint16_t *shift;
  const uint16_t *bucket_off; /* bucket b: free_lits indexes bucket_lit[off[b] .. off[b+1]) */
  const uint16_t *bucket_lit;
  uint8_t code[256]; /* a byte's 6-bit code in the shift index; 0: no literal has it there */
  /* m == 1: the literals' first bytes */
  uint64_t first[4];
};

static uint8_t lower(uint8_t c) { return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c; }

/* The shift table's index for the bytes a, b: their codes side by side. */
static uint32_t pair_index(const litset *s, uint8_t a, uint8_t b) {
  return (uint32_t)s->code[a] << 6 | s->code[b];
}

int litset_caseless(const litset *s) { return s->caseless; }

/* ---- building ---- */

/* One trie of the literals whose anchors are `want` (or, for the forward
 * trie, also START|END), bytes reversed when `reverse`. Returns -1 when it
 * does not fit or memory ran out; *count 0 when no literal belongs. */
static int build_trie(arena *a, litset *s, const lit *lits, uint32_t n, int reverse,
                      const uint16_t **next_out, const uint8_t **flag_out, uint32_t *count) {
  size_t bytes = 0;
  uint32_t members = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint8_t an = lits[i].anchors;
    int in = reverse ? an == LIT_END : (an & LIT_START) != 0;
    if (in && lits[i].n) bytes += lits[i].n, members++;
  }
  *count = 0;
  if (!members) return 0;
  size_t maxnodes = bytes + 2;
  if (maxnodes > 65535 || maxnodes * s->ncls > MAX_CELLS) return -1;
  uint16_t *next = calloc(maxnodes * s->ncls, sizeof *next);
  uint8_t *flag = calloc(maxnodes, 1);
  if (!next || !flag) {
    free(next);
    free(flag);
    return -1;
  }
  uint32_t used = 2; /* 0: dead, 1: root */
  for (uint32_t i = 0; i < n; i++) {
    uint8_t an = lits[i].anchors;
    int in = reverse ? an == LIT_END : (an & LIT_START) != 0;
    if (!in || !lits[i].n) continue;
    uint32_t node = 1;
    for (uint32_t j = 0; j < lits[i].n; j++) {
      uint8_t b = (uint8_t)lits[i].s[reverse ? lits[i].n - 1 - j : j];
      uint16_t *cell = &next[node * s->ncls + s->cls[b]];
      if (!*cell) *cell = (uint16_t)used++;
      node = *cell;
    }
    flag[node] |= (an == (LIT_START | LIT_END)) ? 2 : 1;
  }
  uint16_t *nx = arena_memdup(a, next, (size_t)used * s->ncls * sizeof *next);
  uint8_t *fl = arena_memdup(a, flag, used);
  free(next);
  free(flag);
  if (!nx || !fl) return -1;
  *next_out = nx;
  *flag_out = fl;
  *count = used;
  return 0;
}

/* The shift table and buckets of the free literals (own[0..m) holds them
 * among the others), or the first-byte map when the shortest is one byte. */
static int build_free(arena *a, litset *s, const lit *own, uint32_t m, uint32_t nfree,
                      uint32_t minlen) {
  lit *fl = arena_alloc(a, nfree * sizeof *fl);
  if (!fl) return -1;
  uint32_t f = 0;
  for (uint32_t i = 0; i < m; i++)
    if (!own[i].anchors) fl[f++] = own[i];
  s->free_lits = fl;
  s->nfree = nfree;
  s->m = minlen;
  if (minlen == 1) {
    for (uint32_t i = 0; i < nfree; i++) {
      uint8_t b = (uint8_t)fl[i].s[0];
      s->first[b / 64] |= (uint64_t)1 << (b % 64);
      if (s->caseless && b >= 'a' && b <= 'z')
        s->first[(b - 32) / 64] |= (uint64_t)1 << ((b - 32) % 64);
    }
    return 0;
  }
  /* Every two-byte block inside the first minlen bytes of a literal limits
   * the shift of its hash: a window ending with that block could hold the
   * literal's start minlen - 2 - j bytes further on. */
  uint16_t *shift = arena_alloc(a, SHIFT_SIZE * sizeof *shift);
  uint16_t *off = arena_alloc(a, (nfree + 1) * sizeof *off);
  uint16_t *blit = arena_alloc(a, nfree * sizeof *blit);
  uint32_t *end_hash = malloc(nfree * sizeof *end_hash);
  if (!shift || !off || !blit || !end_hash || minlen > 0x7fff) {
    free(end_hash);
    return -1;
  }
  /* codes: one per byte that occurs in the literals' first minlen bytes (both
   * cases of a letter share one when caseless); past 63, bytes share codes,
   * which only costs an extra comparison now and then */
  uint32_t ncode = 1;
  for (uint32_t i = 0; i < nfree; i++)
    for (uint32_t j = 0; j < minlen; j++) {
      uint8_t b = (uint8_t)fl[i].s[j];
      if (s->code[b]) continue;
      s->code[b] = (uint8_t)(ncode < 64 ? ncode++ : 1u + b % 63u);
      if (s->caseless && b >= 'a' && b <= 'z') s->code[b - 32] = s->code[b];
    }
  for (uint32_t h = 0; h < SHIFT_SIZE; h++) shift[h] = (uint16_t)(minlen - 1);
  for (uint32_t i = 0; i < nfree; i++) {
    const uint8_t *p = (const uint8_t *)fl[i].s;
    for (uint32_t j = 0; j + 2 <= minlen; j++) {
      uint32_t h = pair_index(s, p[j], p[j + 1]);
      uint16_t sh = (uint16_t)(minlen - 2 - j);
      if (sh < shift[h]) shift[h] = sh;
    }
    end_hash[i] = pair_index(s, p[minlen - 2], p[minlen - 1]);
  }
  /* buckets: the literals whose window-end block hashes alike, grouped */
  uint32_t nb = 0, k = 0;
  for (uint32_t i = 0; i < nfree; i++) {
    uint32_t h = end_hash[i];
    if (shift[h] & 0x8000) continue; /* bucket made already */
    shift[h] = (uint16_t)(0x8000 | nb);
    off[nb++] = (uint16_t)k;
    for (uint32_t j = i; j < nfree; j++)
      if (end_hash[j] == h) blit[k++] = (uint16_t)j;
  }
  off[nb] = (uint16_t)k;
  free(end_hash);
  s->shift = shift;
  s->bucket_off = off;
  s->bucket_lit = blit;
  return 0;
}

const litset *litset_build(arena *a, const lit *lits, uint32_t n, int caseless) {
  if (n > MAX_LITS || n > 0x7fff) return NULL;
  litset *s = arena_zalloc(a, sizeof *s);
  lit *own = arena_alloc(a, (n ? n : 1) * sizeof *own);
  if (!s || !own) return NULL;
  s->caseless = (uint8_t)(caseless != 0);
  /* own copies (folded when caseless), and the empty literals */
  uint32_t m = 0, minfree = UINT32_MAX, nfree = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (lits[i].n > MAX_LIT_LEN) return NULL;
    if (lits[i].n == 0) {
      if (lits[i].anchors == (LIT_START | LIT_END))
        s->empty_whole = 1;
      else
        s->always = 1;
      continue;
    }
    char *t = arena_alloc(a, lits[i].n);
    if (!t) return NULL;
    for (uint32_t j = 0; j < lits[i].n; j++)
      t[j] = caseless ? (char)lower((uint8_t)lits[i].s[j]) : lits[i].s[j];
    own[m] = (lit){t, lits[i].n, (uint8_t)(lits[i].anchors & (LIT_START | LIT_END))};
    if (!own[m].anchors) {
      nfree++;
      if (own[m].n < minfree) minfree = own[m].n;
    }
    m++;
  }
  /* byte classes */
  s->ncls = 1;
  for (uint32_t i = 0; i < m; i++) {
    if (!own[i].anchors) continue;
    for (uint32_t j = 0; j < own[i].n; j++) {
      uint8_t b = (uint8_t)own[i].s[j];
      if (s->cls[b]) continue;
      s->cls[b] = (uint8_t)s->ncls;
      if (caseless && b >= 'a' && b <= 'z') s->cls[b - 32] = (uint8_t)s->ncls;
      if (++s->ncls > 255) return NULL;
    }
  }
  if (build_trie(a, s, own, m, 0, &s->fwd, &s->fwd_flag, &s->nfwd)) return NULL;
  if (build_trie(a, s, own, m, 1, &s->rev, &s->rev_flag, &s->nrev)) return NULL;
  /* free literals */
  if (nfree && build_free(a, s, own, m, nfree, minfree)) return NULL;
  return s;
}

/* ---- matching ---- */

static int walk_fwd(const litset *s, const unsigned char *p, size_t n) {
  uint32_t node = 1;
  for (size_t i = 0;; i++) {
    uint8_t f = s->fwd_flag[node];
    if (f & 1) return 1;
    if (i == n) return (f & 2) != 0;
    node = s->fwd[node * s->ncls + s->cls[p[i]]];
    if (!node) return 0;
  }
}

static int walk_rev(const litset *s, const unsigned char *p, size_t n) {
  uint32_t node = 1;
  for (size_t i = n;;) {
    if (s->rev_flag[node] & 1) return 1;
    if (i == 0) return 0;
    node = s->rev[node * s->ncls + s->cls[p[--i]]];
    if (!node) return 0;
  }
}

static int same_at(const litset *s, const unsigned char *p, const lit *l) {
  if (!s->caseless) return memcmp(p, l->s, l->n) == 0;
  for (uint32_t j = 0; j < l->n; j++)
    if (lower(p[j]) != (uint8_t)l->s[j]) return 0;
  return 1;
}

static int scan_free(const litset *s, const unsigned char *p, size_t n) {
  if (s->m == 1) {
    for (size_t i = 0; i < n; i++) {
      uint8_t b = p[i];
      if (!((s->first[b / 64] >> (b % 64)) & 1)) continue;
      for (uint32_t j = 0; j < s->nfree; j++) {
        const lit *l = &s->free_lits[j];
        if (l->n <= n - i && same_at(s, p + i, l)) return 1;
      }
    }
    return 0;
  }
  const size_t m = s->m;
  for (size_t pos = m - 1; pos < n;) {
    uint32_t sh = s->shift[pair_index(s, p[pos - 1], p[pos])];
    if (!(sh & 0x8000)) { /* >= 1: shifts of 0 became buckets */
      pos += sh;
      continue;
    }
    size_t start = pos + 1 - m;
    uint32_t b = sh & 0x7fff;
    for (uint32_t j = s->bucket_off[b]; j < s->bucket_off[b + 1]; j++) {
      const lit *l = &s->free_lits[s->bucket_lit[j]];
      if (l->n <= n - start && same_at(s, p + start, l)) return 1;
    }
    pos++;
  }
  return 0;
}

int litset_match(const litset *s, const char *subj, size_t n) {
  const unsigned char *p = (const unsigned char *)subj;
  if (s->always || (s->empty_whole && n == 0)) return 1;
  if (s->nfwd && walk_fwd(s, p, n)) return 1;
  if (s->nrev && walk_rev(s, p, n)) return 1;
  return s->nfree && n >= s->m && scan_free(s, p, n);
}

/* ---- reading a regular expression ---- */

/* A set of strings (each with its anchors) during expansion, in a scratch
 * arena. */
typedef struct sset {
  lit *v;
  uint32_t n, cap;
} sset;

typedef struct rx {
  const char *p, *end;
  arena *tmp;
} rx;

static int sset_add(rx *r, sset *s, const char *t, uint32_t n, uint8_t anchors) {
  if (s->n == MAX_LITS || n > MAX_LIT_LEN) return -1;
  if (s->n == s->cap) {
    uint32_t cap = s->cap ? s->cap * 2 : 8;
    lit *v = arena_realloc(r->tmp, s->v, s->cap * sizeof *v, cap * sizeof *v);
    if (!v) return -1;
    s->v = v;
    s->cap = cap;
  }
  char *c = arena_memdup(r->tmp, t, n ? n : 1);
  if (!c) return -1;
  s->v[s->n++] = (lit){c, n, anchors};
  return 0;
}

/* Every a followed by every b. */
static int sset_product(rx *r, const sset *a, const sset *b, sset *out) {
  memset(out, 0, sizeof *out);
  if ((uint64_t)a->n * b->n > MAX_LITS) return -1;
  for (uint32_t i = 0; i < a->n; i++)
    for (uint32_t j = 0; j < b->n; j++) {
      uint32_t n = a->v[i].n + b->v[j].n;
      if (n > MAX_LIT_LEN) return -1;
      char buf[MAX_LIT_LEN];
      memcpy(buf, a->v[i].s, a->v[i].n);
      memcpy(buf + a->v[i].n, b->v[j].s, b->v[j].n);
      if (sset_add(r, out, buf, n, 0)) return -1;
    }
  return 0;
}

static int is_punct(unsigned char c) {
  return c > 0x20 && c < 0x7f &&
         !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
}

static int rx_alt(rx *r, sset *out, int top);

/* One atom: a character, an escaped punctuation character or a group. */
static int rx_atom(rx *r, sset *out) {
  memset(out, 0, sizeof *out);
  unsigned char c = (unsigned char)*r->p;
  if (c == '(') {
    r->p++;
    if (r->p < r->end && *r->p == '?') {
      if (r->p + 1 < r->end && r->p[1] == ':')
        r->p += 2;
      else
        return -1; /* other (?...) forms: flags, lookaround, names */
    }
    if (rx_alt(r, out, 0)) return -1;
    if (r->p >= r->end || *r->p != ')') return -1;
    r->p++;
    return 0;
  }
  if (c == '\\') {
    if (++r->p >= r->end || !is_punct((unsigned char)*r->p)) return -1;
    char ch = *r->p++;
    return sset_add(r, out, &ch, 1, 0);
  }
  if (c < 0x20 || c >= 0x7f || strchr("^$.[]?*+{}|)", c)) return -1;
  r->p++;
  char ch = (char)c;
  return sset_add(r, out, &ch, 1, 0);
}

/* A sequence of atoms, each maybe followed by `?`; at the top level it may
 * start with `^` and end with `$`. */
static int rx_seq(rx *r, sset *out, int top) {
  memset(out, 0, sizeof *out);
  if (sset_add(r, out, "", 0, 0)) return -1;
  uint8_t anchors = 0;
  if (top && r->p < r->end && *r->p == '^') {
    anchors |= LIT_START;
    r->p++;
  }
  while (r->p < r->end && *r->p != '|' && *r->p != ')') {
    if (*r->p == '$') {
      if (!top || (r->p + 1 < r->end && r->p[1] != '|')) return -1;
      anchors |= LIT_END;
      r->p++;
      break;
    }
    sset atom, next;
    if (rx_atom(r, &atom)) return -1;
    if (r->p < r->end && *r->p == '?') {
      r->p++;
      /* `??` (lazy) and `?+` (possessive): the same strings, but refuse the oddities */
      if (r->p < r->end && (*r->p == '?' || *r->p == '+')) return -1;
      if (sset_add(r, &atom, "", 0, 0)) return -1;
    }
    if (sset_product(r, out, &atom, &next)) return -1;
    *out = next;
  }
  for (uint32_t i = 0; i < out->n; i++) out->v[i].anchors = anchors;
  return 0;
}

static int rx_alt(rx *r, sset *out, int top) {
  memset(out, 0, sizeof *out);
  for (;;) {
    sset s;
    if (rx_seq(r, &s, top)) return -1;
    for (uint32_t i = 0; i < s.n; i++)
      if (sset_add(r, out, s.v[i].s, s.v[i].n, s.v[i].anchors)) return -1;
    if (r->p < r->end && *r->p == '|') {
      r->p++;
      continue;
    }
    return 0;
  }
}

int litset_parse_regex(arena *a, const char *pat, size_t len, lit **out, uint32_t *n,
                       int *caseless) {
  arena tmp;
  arena_init(&tmp, NULL, 0, (size_t)8 << 20);
  rx r = {pat, pat + len, &tmp};
  *caseless = 0;
  if (len >= 4 && memcmp(pat, "(?i)", 4) == 0) {
    *caseless = 1;
    r.p += 4;
  }
  sset s;
  int rc = -1;
  if (rx_alt(&r, &s, 1) == 0 && r.p == r.end && s.n) {
    lit *v = arena_alloc(a, s.n * sizeof *v);
    if (v) {
      rc = 0;
      for (uint32_t i = 0; i < s.n && rc == 0; i++) {
        char *t = arena_memdup(a, s.v[i].s, s.v[i].n ? s.v[i].n : 1);
        if (!t) rc = -1;
        v[i] = (lit){t, s.v[i].n, s.v[i].anchors};
      }
      *out = v;
      *n = s.n;
    }
  }
  arena_free(&tmp);
  return rc;
}
