/* litset.h — "does any of these strings occur in the subject?", answered
 * without a regex engine.
 *
 * A literal set holds strings, each tied to the start of the subject, to its
 * end, to both (the whole subject) or to neither (anywhere). Policies ask
 * this question all the time: `ua.matches('sqlmap|nikto|nmap')`, a probe
 * regex of prefixes and suffixes, `prefixes.exists(p, path.startsWith(p))`.
 * The compiler and the regex library turn such expressions into a litset
 * once, and a match then costs one short pass over the subject.
 *
 * Matching is on bytes; caseless sets fold ASCII letters only, so the
 * caller must use them on ASCII subjects alone (lib_core.c hands anything
 * else to PCRE2, whose UTF caseless rules differ). A set lives in one arena
 * and is read-only once built: any number of threads may match at once. */
#ifndef VD_EXPR_LITSET_H
#define VD_EXPR_LITSET_H

#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"

#define LIT_START 1 /* the literal must stand at the start of the subject */
#define LIT_END 2   /* ... at its end (both: it must be the whole subject) */

typedef struct lit {
  const char *s;
  uint32_t n;
  uint8_t anchors; /* LIT_START | LIT_END */
} lit;

typedef struct litset litset;

/* Builds the set of lits[0..n) in a (the strings are copied). Returns NULL
 * when the set is too big for the tables (the caller then keeps its
 * general path) or a is exhausted. caseless: ASCII letters match either
 * case. */
const litset *litset_build(arena *a, const lit *lits, uint32_t n, int caseless);

/* Whether some literal occurs in subj[0..n) where its anchors say. */
int litset_match(const litset *s, const char *subj, size_t n);

/* Whether the set folds case (its subjects must then be ASCII). */
int litset_caseless(const litset *s);

/* Reads a regular expression that denotes a finite set of literals —
 * alternations (`|`), groups (`(...)`, `(?:...)`), optional parts (`?`),
 * characters and backslash-escaped punctuation, `^` at the start and `$` at
 * the end of a top-level alternative, and a leading `(?i)` — into *out
 * (allocated in a). Anything else (classes, `.`, repetition, other escapes
 * or flags) returns -1: the pattern then stays with the regex engine. The
 * reading follows PCRE2 with DOLLAR_ENDONLY, as lib_core.c compiles
 * patterns: `$` is the very end of the subject. */
int litset_parse_regex(arena *a, const char *pat, size_t len, lit **out, uint32_t *n,
                       int *caseless);

#endif
