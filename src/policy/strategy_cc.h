/* strategy_cc.h — the compile context of one strategy file (cc) and the
 * small readers every part of its compiler uses (errors at a YAML node, keys
 * of a mapping, names, texts, lists), shared by the files that compile a
 * strategy and by nobody else: strategy.c (the file as a whole: constants,
 * lets, rules, limits), strategy_parts.c (actions, outcomes, decision points,
 * the fallback model, tests) and strategy_inline.c (constants inlined into
 * expressions). The readers are static inline: each file takes those it
 * uses. */
#ifndef VD_POLICY_STRATEGY_CC_H
#define VD_POLICY_STRATEGY_CC_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "expr/expr.h"
#include "policy/internal.h"

#define MAX_NAME 128

typedef struct actvec {
  policy_action *v;
  const ynode **where; /* where each was first named */
  uint32_t n, cap;
} actvec;

typedef struct ntab {
  uint32_t *slot; /* index + 1; 0: empty */
  uint32_t mask;
  const char *const *names; /* NUL-terminated */
} ntab;

typedef struct let_info {
  const ynode *node;
  const ast *tree;
  uint32_t *deps; /* the lets it reads, each once */
  uint32_t ndeps;
  bool model_direct;
  bool model;          /* reads model, possibly through other lets */
  bool bad;            /* over a bound (reported), or reads such a let */
  uint8_t mark;        /* graph walk: 0 new, 1 on the path, 2 done */
  uint32_t nest, eval; /* ast_depths, through the lets it reads */
} let_info;

typedef struct cc {
  arena *mem;     /* the bundle's */
  arena *scratch; /* this file's; ASTs and the YAML tree live here */
  const char *file;
  const char *src;
  size_t len;
  policy_diags *d;
  size_t errors0;
  strategy *s;
  actvec acts;
  int declared_actions; /* `actions` was given */
  strategy_marks *marks;
  int lazy;         /* STRATEGY_LAZY */
  int lets_unread;  /* lazy, and no fallback model: rules are not searched for model reads */
  int lets_checked; /* lets_unread, and STRATEGY_LETS_CHECKED: lets are not even parsed */
  const uint8_t *rule_parts; /* strategy_input.rule_parts, when lets_checked */
  uint32_t nrule_parts;
  ntab lets_tab;      /* the lets' names (parse_lets) */
  uint32_t *let_seen; /* per let, for reads */
  struct let_info *let_info;
  int oom;
} cc;

static inline void err_at(cc *c, const ynode *n, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void err_at(cc *c, const ynode *n, const char *key, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vadd(c->d, DIAG_ERROR, c->file, n ? n->line : 0, n ? n->col : 0, key, fmt, ap);
  va_end(ap);
}

static inline void warn_at(cc *c, const ynode *n, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void warn_at(cc *c, const ynode *n, const char *key, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vadd(c->d, DIAG_WARNING, c->file, n ? n->line : 0, n ? n->col : 0, key, fmt, ap);
  va_end(ap);
}

static inline void nomem(cc *c) {
  if (!c->oom)
    diag_add(c->d, DIAG_ERROR, c->file, 0, 0, "", "out of memory compiling the strategy");
  c->oom = 1;
}

static inline char *dup(cc *c, const char *s, size_t n) {
  char *p = arena_strndup(c->mem, s, n);
  if (!p) nomem(c);
  return p;
}

static inline const char *kind_name(const ynode *n) {
  if (n->kind == Y_MAP) return "a mapping";
  if (n->kind == Y_SEQ) return "a list";
  switch (n->v.kind) {
    case V_NULL:
      return "nothing (null)";
    case V_BOOL:
      return "a boolean";
    case V_INT:
    case V_UINT:
      return "an integer";
    case V_DOUBLE:
      return "a number";
    default:
      return "a string";
  }
}

/* ---- keys of a mapping ---- */

static inline const ynode *get(const ynode *map, const char *key) {
  size_t n = strlen(key);
  for (uint32_t i = 0; i < map->n; i++) {
    const ynode *k = map->kids[2 * i];
    if (k->len == n && memcmp(k->text, key, n) == 0) return map->kids[2 * i + 1];
  }
  return NULL;
}

static inline void check_keys(cc *c, const ynode *map, const char *path, const char *const *known,
                              size_t nknown) {
  for (uint32_t i = 0; i < map->n; i++) {
    const ynode *k = map->kids[2 * i];
    size_t j;
    for (j = 0; j < nknown; j++)
      if (strlen(known[j]) == k->len && memcmp(known[j], k->text, k->len) == 0) break;
    if (j < nknown) continue;
    const char *hint = diag_suggest(k->text, k->len, known, nknown);
    if (hint)
      err_at(c, k, path, "unknown key '%s' (did you mean '%s'?)", k->text, hint);
    else
      err_at(c, k, path, "unknown key '%s'", k->text);
  }
}

/* ---- scalars ---- */

static inline int valid_name(const char *s, size_t n) {
  if (n == 0 || n > MAX_NAME) return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '_' || ch == '-' || ch == '.'))
      return 0;
  }
  return 1;
}

/* A name (strategy, action, decision point, model): a string of letters,
 * digits, '_', '-', '.'. Returns the arena copy or NULL (reported). */
static inline const char *want_name(cc *c, const ynode *n, const char *key, const char *what) {
  if (n->kind != Y_SCALAR || n->v.kind != V_STRING) {
    err_at(c, n, key, "expected %s (a string), got %s", what, kind_name(n));
    return NULL;
  }
  if (!valid_name(n->text, n->len)) {
    err_at(c, n, key, "'%s' is not a valid %s: use letters, digits, '_', '-' and '.' (at most %d)",
           n->text, what, MAX_NAME);
    return NULL;
  }
  return dup(c, n->text, n->len);
}

/* Free text: any scalar but null. */
static inline const char *want_text(cc *c, const ynode *n, const char *key) {
  if (n->kind != Y_SCALAR || n->v.kind == V_NULL) {
    err_at(c, n, key, "expected text, got %s", kind_name(n));
    return NULL;
  }
  return dup(c, n->text, n->len);
}

static inline int want_bool(cc *c, const ynode *n, const char *key, bool *out) {
  if (n->kind != Y_SCALAR || n->v.kind != V_BOOL) {
    err_at(c, n, key, "expected true or false, got %s", kind_name(n));
    return -1;
  }
  *out = n->v.b;
  return 0;
}

static inline int want_map(cc *c, const ynode *n, const char *key) {
  if (n->kind == Y_MAP) return 0;
  err_at(c, n, key, "expected a mapping (key: value lines), got %s", kind_name(n));
  return -1;
}

static inline int want_list(cc *c, const ynode *n, const char *key) {
  if (n->kind == Y_SEQ) return 0;
  err_at(c, n, key, "expected a list, got %s", kind_name(n));
  return -1;
}

/* i in decimal at out (room for 10 digits); returns the digits written. */
static inline size_t uint_text(char *out, uint32_t i) {
  char rev[10];
  size_t r = 0;
  do rev[r++] = (char)('0' + i % 10);
  while ((i /= 10) != 0);
  for (size_t k = 0; k < r; k++) out[k] = rev[r - 1 - k];
  return r;
}

/* The place `a` `b` (with `[i]` between them when i is not UINT32_MAX),
 * cut to fit out as snprintf would: what a message names. Made for every
 * rule and action a load reads, so without printf. */
static inline const char *place(char *out, size_t size, const char *a, uint32_t i, const char *b) {
  char num[12];
  size_t nn = 0;
  if (i != UINT32_MAX) {
    num[nn++] = '[';
    nn += uint_text(num + nn, i);
    num[nn++] = ']';
  }
  const char *parts[3] = {a, num, b};
  size_t lens[3] = {strlen(a), nn, strlen(b)}, at = 0;
  for (int k = 0; k < 3 && size; k++) {
    size_t take = lens[k] < size - 1 - at ? lens[k] : size - 1 - at;
    memcpy(out + at, parts[k], take);
    at += take;
  }
  if (size) out[at] = '\0';
  return out;
}

/* CEL identifiers for constants and lets. */
static inline int valid_ident(const char *s, size_t n) {
  /* each NUL-terminated, so that the length of `s` (at most 9) tells */
  static const char reserved[][10] = {
      "true",      "false",  "null",     "in",   "as",     "break",   "const",   "continue",
      "else",      "for",    "function", "if",   "import", "let",     "loop",    "package",
      "namespace", "return", "var",      "void", "while",  "request", "context", "model"};
  if (n == 0 || n > MAX_NAME) return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
             (i > 0 && ch >= '0' && ch <= '9');
    if (!ok) return 0;
  }
  for (size_t i = 0; n < sizeof reserved[0] && i < sizeof reserved / sizeof reserved[0]; i++)
    if (reserved[i][n] == '\0' && memcmp(reserved[i], s, n) == 0) return 0;
  return 1;
}

/* ---- strategy_parts.c ---- */

int32_t use_action(cc *c, const ynode *n, const char *key);
void parse_actions(cc *c, const ynode *n);
void parse_outcome(cc *c, const ynode *n, const char *key, policy_outcome *out);
void parse_decision_points(cc *c, const ynode *n);
int want_number(cc *c, const ynode *n, const char *key, double *out);
void parse_fallback(cc *c, const ynode *n);
void parse_tests(cc *c, const ynode *n);
/* strategy_snapshot.c: the `snapshot:` key, then (once rules and lets are
 * compiled: their trees and the lets' reads) which of them read a field it
 * masks or hashes, with a warning for each rule that does. */
void parse_snapshot(cc *c, const ynode *n);
void snapshot_reads(cc *c, const rule_info *rules, const struct let_info *lets);

/* ---- strategy_inline.c ---- */

/* The program of text (its tree `tree`) with the constants of s it reads
 * written in as literals (compiled from the tree, or from the text), else as
 * it is; 0, or the expr_compile_ast error in e. */
int strategy_program_of(const strategy *s, const char *text, size_t len, const ast *tree,
                        const expr_opts *opts, expr_program **out, expr_error *e);

#endif
