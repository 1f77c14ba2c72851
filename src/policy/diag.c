/* diag.c — policy diagnostics: collecting them, printing them, and the
 * "did you mean" hint for misspelt keys and names.
 *
 * A diagnostic names the file, line, column and YAML key path of a problem;
 * the message may continue with a caret excerpt of the source line. The list
 * is a plain growable array owned by the caller (policy_diags_free). Past
 * MAX_DIAGS entries, problems are still counted but no longer stored, so a
 * file full of garbage cannot make the loader use unbounded memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/internal.h"

#define MAX_DIAGS 10000

static void copy_str(char *dst, size_t cap, const char *s) {
  if (!s) s = "";
  size_t n = strlen(s);
  if (n >= cap) n = cap - 1;
  memcpy(dst, s, n);
  dst[n] = 0;
}

void diag_vadd(policy_diags *d, diag_severity sev, const char *file, int line, int col,
               const char *key, const char *fmt, va_list ap) {
  if (sev == DIAG_ERROR)
    d->errors++;
  else
    d->warnings++;
  if (d->n >= MAX_DIAGS) return;
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 16;
    policy_diag *p = realloc(d->items, cap * sizeof *p);
    if (!p) return; /* counted, not stored: the caller still sees the failure */
    d->items = p;
    d->cap = cap;
  }
  policy_diag *g = &d->items[d->n++];
  g->severity = sev;
  copy_str(g->file, sizeof g->file, file);
  g->line = line;
  g->column = col;
  copy_str(g->key, sizeof g->key, key);
  vsnprintf(g->message, sizeof g->message, fmt, ap);
}

void diag_add(policy_diags *d, diag_severity sev, const char *file, int line, int col,
              const char *key, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vadd(d, sev, file, line, col, key, fmt, ap);
  va_end(ap);
}

void policy_diags_free(policy_diags *d) {
  if (!d) return;
  free(d->items);
  memset(d, 0, sizeof *d);
}

void policy_diag_print(const policy_diag *d, void *stream) {
  FILE *f = stream;
  if (d->file[0]) {
    if (d->line > 0)
      fprintf(f, "%s:%d:%d: ", d->file, d->line, d->column);
    else
      fprintf(f, "%s: ", d->file);
  }
  if (d->severity == DIAG_WARNING) fputs("warning: ", f);
  if (d->key[0]) fprintf(f, "%s: ", d->key);
  fprintf(f, "%s\n", d->message);
}

/* Optimal string alignment distance (Levenshtein plus adjacent
 * transpositions, so "defualt" is one edit from "default"), capped. */
static size_t edit_distance(const char *a, size_t na, const char *b, size_t nb) {
  enum { MAXW = 64 };
  if (na > MAXW || nb > MAXW) return SIZE_MAX;
  size_t rows[3][MAXW + 1];
  size_t *pp = rows[0], *p = rows[1], *c = rows[2];
  for (size_t j = 0; j <= nb; j++) p[j] = j;
  for (size_t i = 1; i <= na; i++) {
    c[0] = i;
    for (size_t j = 1; j <= nb; j++) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      size_t v = p[j - 1] + cost;
      if (p[j] + 1 < v) v = p[j] + 1;
      if (c[j - 1] + 1 < v) v = c[j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < v)
        v = pp[j - 2] + 1;
      c[j] = v;
    }
    size_t *t = pp;
    pp = p;
    p = c;
    c = t;
  }
  return p[nb];
}

const char *diag_suggest(const char *word, size_t len, const char *const *cands, size_t ncands) {
  const char *best = NULL;
  size_t best_d = SIZE_MAX;
  for (size_t i = 0; i < ncands; i++) {
    size_t d = edit_distance(word, len, cands[i], strlen(cands[i]));
    if (d < best_d) {
      best_d = d;
      best = cands[i];
    }
  }
  if (!best) return NULL;
  /* Close enough to be a typo: one edit for short words, two for longer,
   * and never more than a third of the word. */
  size_t limit = len <= 4 ? 1 : 2;
  if (best_d == 0 || best_d > limit || best_d * 3 > len + 1) return NULL;
  return best;
}

void diag_excerpt(char *buf, size_t cap, const char *src, size_t len, size_t pos) {
  if (!src || pos > len) return;
  size_t start = pos, end = pos;
  while (start > 0 && src[start - 1] != '\n' && src[start - 1] != '\r') start--;
  while (end < len && src[end] != '\n' && src[end] != '\r') end++;
  size_t used = strlen(buf);
  if (used >= cap) return;
  int line_len = (int)(end - start);
  if (line_len > 200) line_len = 200; /* keep messages readable */
  int n = snprintf(buf + used, cap - used, "\n | %.*s\n | ", line_len, src + start);
  if (n < 0 || (size_t)n >= cap - used) return;
  used += (size_t)n;
  /* Pad to the caret with the line's own tabs so it lines up. */
  for (size_t i = start; i < pos && used + 2 < cap; i++) {
    unsigned char ch = (unsigned char)src[i];
    if ((ch & 0xC0) == 0x80) continue; /* UTF-8 continuation: same column */
    buf[used++] = ch == '\t' ? '\t' : ' ';
  }
  if (used + 2 <= cap) {
    buf[used++] = '^';
    buf[used] = 0;
  }
}
