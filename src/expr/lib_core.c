/* lib_core.c — CEL's standard functions: size, the string predicates
 * (contains, startsWith, endsWith, matches), the type conversions (int, uint,
 * double, string, bytes, bool), type() and dyn().
 *
 * Semantics follow the CEL spec and, where the spec is silent, cel-go (the
 * reference implementation): conversions that lose range are errors, never
 * wrap-around; double -> int truncates toward zero and rejects anything
 * outside the open interval (-2^63, 2^63); string(double) prints like Go's %g
 * ("1e+06", "0.0045"); bool(string) accepts exactly 1/t/true/TRUE/True and
 * 0/f/false/FALSE/False.
 *
 * Regular expressions: CEL specifies RE2 syntax. verdict runs them with
 * PCRE2 (JIT when available) in UTF mode with RE2's ASCII meaning of \d \w \s
 * \b (no PCRE2_UCP), `$` matching only at the very end (DOLLAR_ENDONLY, as in
 * RE2) and \C forbidden. PCRE2 is a backtracking engine, so every match runs
 * under a match limit (eval_ctx.regex_match_limit) and a depth limit: a
 * hostile pattern such as `(a+)+$` fails with an error instead of hanging.
 * A constant pattern is compiled (and JIT-compiled) once, by `prepare`.
 * With expr_opts.defer_jit (a program one thread evaluates: the hook and
 * `verdict decide`) it is compiled at its first match that needs PCRE2, and
 * JIT-compiled only at its REGEX_JIT_AFTER-th: the JIT costs as much as a few
 * hundred interpreted matches of a short subject, so a process that matches
 * a pattern a few times and exits runs PCRE2's interpreter, and one that
 * keeps deciding soon runs the JIT. Both give the same answers (only the
 * accounting of the match limit differs, for a pattern already near it); a
 * pattern never matched costs nothing, and one that does not compile then
 * fails its matches rather than the program's compilation. A pattern
 * computed at run time is compiled per call into the arena. A
 * constant pattern that only lists literal strings (`sqlmap|nikto|nmap`,
 * `(?i)^/(\.env|\.git)|\.php$`: the usual policy regex) is also read into a
 * literal set (litset.h), which answers for ASCII subjects in one short
 * pass, without PCRE2's per-call setup; other subjects go to PCRE2 (with
 * defer_jit, the pattern is read so at its first match). When a program
 * is rebuilt from its image (image.h), a constant pattern's compiled code
 * kept beside the image is decoded at its first PCRE2 match instead of
 * compiling the text, if the same PCRE2 made it.
 *
 * PCRE2's match context and match data are made once per thread and reused
 * by every match that thread runs (the server decides on several threads,
 * so they are never shared); the thread's exit frees them. A run-time
 * pattern is compiled into ctx->arena (through a general context whose
 * malloc is the arena). */
#define _GNU_SOURCE /* memmem, strtod_l */
#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/dtoa.h"
#include "core/json.h"
#include "core/timefmt.h"
#include "core/utf8.h"
#include "expr/image.h"
#include "expr/lib.h"
#include "expr/litset.h"

/* Match limit when eval_ctx.regex_match_limit is 0. PCRE2's own default
 * (10 million) lets `(a+)+$` on 40 characters run for a third of a second
 * interpreted; a million keeps the worst case within a few milliseconds with
 * JIT and about 35 ms without, and no sensible pattern comes near it. */
#define REGEX_DEFAULT_MATCH_LIMIT 1000000u
/* Interpreter recursion bound (JIT ignores it and has its own stack limit). */
#define REGEX_DEPTH_LIMIT 10000u
/* Backtracking memory for the interpreter, in KiB. */
#define REGEX_HEAP_LIMIT_KIB 8192u
/* expr_opts.defer_jit: the match of a constant pattern that JIT-compiles it.
 * The JIT of a policy pattern costs about 300,000 instructions; one
 * interpreted match of a short subject a few thousand more than a JIT one. */
#define REGEX_JIT_AFTER 64u
/* Regex work is paid from the evaluation's cost budget: one cost unit buys
 * this many PCRE2 match steps (JIT: about 3 ns a step on a backtracking
 * pattern, so a unit costs about what a comprehension step does; the
 * interpreter is several times slower a step). PCRE2 tells how far a match
 * got only by stopping it at a limit, so a match first runs with
 * REGEX_FIRST_TRY times the steps the subject's own charge (length / 8 + 1
 * units) pays for; what needs more is run again with four times the
 * limit, and each try is charged in full before it runs, up to the per-call
 * cap and never past the budget's remainder. A match of the usual policy
 * pattern takes a few dozen steps and runs once, charged as before; a
 * backtracking one pays for every step it takes (within a factor of
 * REGEX_FIRST_TRY x 4), so the budget bounds a decision's regex time. */
#define REGEX_STEPS_PER_UNIT 8u
#define REGEX_FIRST_TRY 2u
/* The first try never has fewer steps than this. PCRE2's JIT and its
 * interpreter count steps differently, and a pattern is interpreted until
 * its REGEX_JIT_AFTER-th match under expr_opts.defer_jit: a first try
 * sized to the subject alone would be cut short in one and not in the
 * other, and the same decision would cost differently in a hook, a server
 * and a replay. Ordinary policy patterns (the example bundle's, each
 * subject and engine) take well under this many steps, so they run once
 * and cost the same everywhere; only a match past it is charged by the
 * engine's own count. It lets a call take at most this many steps beyond
 * what its subject paid for. */
#define REGEX_FIRST_STEPS 512u

#define NO_OVERLOAD VALUE_ERR("no such overload")
#define COST_ERROR VALUE_ERR("cost limit exceeded")

static value str_result(const char *s, size_t n, int ascii) {
  value v = value_str(s, (uint32_t)n);
  if (ascii) v.flags |= VF_ASCII;
  return v;
}

/* Copies a NUL-free ASCII buffer into the arena as a string value. */
static value arena_ascii(eval_ctx *ctx, const char *s, size_t n) {
  char *p = arena_memdup(ctx->arena, s, n);
  if (!p && n) return VALUE_ERR("out of memory");
  return str_result(p, n, 1);
}

/* ------------------------------------------------------------------ size */

/* confidence(p): how sure a binary model is of its own verdict, given its
 * probability p of the positive class: max(p, 1 - p), in [0.5, 1]. Not
 * CEL's; docs/policy.md ("Models") defines it. */
static value fn_confidence(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  (void)nargs, (void)aux;
  double p = args[0].d;
  if (!(p >= 0.0 && p <= 1.0))
    return value_errorf(ctx->arena, "confidence(%g): a probability is between 0 and 1", p);
  return value_double(p >= 0.5 ? p : 1.0 - p);
}

static value fn_size(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *v = &args[0];
  switch (v->kind) {
    case V_STRING:
      if (!(v->flags & VF_ASCII) && !eval_charge(ctx, v->n / 16 + 1)) return COST_ERROR;
      return value_int((int64_t)value_str_codepoints(v));
    case V_BYTES:
    case V_LIST:
    case V_MAP:
      return value_int((int64_t)v->n);
    default:
      return NO_OVERLOAD;
  }
}

/* ------------------------------------------------- string predicates */

static value fn_contains(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *s = &args[0], *sub = &args[1];
  if (!eval_charge(ctx, s->n / 16 + 1)) return COST_ERROR;
  if (sub->n == 0) return value_bool(true);
  if (sub->n > s->n) return value_bool(false);
  /* Valid UTF-8 is self-synchronising: a byte match is a code point match. */
  return value_bool(memmem(s->s, s->n, sub->s, sub->n) != NULL);
}

static value fn_starts_with(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *s = &args[0], *p = &args[1];
  return value_bool(p->n <= s->n && (p->n == 0 || memcmp(s->s, p->s, p->n) == 0));
}

static value fn_ends_with(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *s = &args[0], *p = &args[1];
  return value_bool(p->n <= s->n && (p->n == 0 || memcmp(s->s + s->n - p->n, p->s, p->n) == 0));
}

/* ---------------------------------------------------------------- matches */

#define REGEX_COMPILE_OPTIONS (PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C)

static void *arena_pcre_alloc(PCRE2_SIZE size, void *data) { return arena_alloc(data, size); }
static void arena_pcre_free(void *p, void *data) { (void)p, (void)data; }

/* "invalid regular expression 'a(': missing closing parenthesis at offset 2" */
static void regex_error_text(int code, PCRE2_SIZE offset, const char *pat, size_t pat_len,
                             char *out, size_t out_size) {
  PCRE2_UCHAR msg[160];
  if (pcre2_get_error_message(code, msg, sizeof msg) < 0) strcpy((char *)msg, "unknown error");
  /* A long pattern is cut so that the reason still fits a compile error. */
  int shown = pat_len > 80 ? 80 : (int)pat_len;
  snprintf(out, out_size, "invalid regular expression '%.*s%s': %s at offset %zu", shown, pat,
           pat_len > 80 ? "..." : "", (const char *)msg, (size_t)offset);
}

/* What a constant pattern is prepared into: PCRE2's compiled form, and,
 * when the pattern only lists literal strings (`sqlmap|nikto|nmap`,
 * `^/(\.env|\.git)|\.php$`), the same as a literal set (litset.h), which
 * answers in one short pass without PCRE2's per-call setup. The set is
 * used on ASCII subjects only: there, bytes are characters and (?i) folds
 * just A-Z, exactly as PCRE2 reads them; anything else goes to PCRE2. */
typedef struct regex_aux {
  pcre2_code *re;
  const litset *lits; /* NULL: not a literal set */
  arena mem;          /* lits lives here */
  /* expr_opts.defer_jit: re is compiled before the first match that needs
   * it, from pat (NULL until then), and JIT-compiled at the
   * REGEX_JIT_AFTER-th; uses counts those matches until then */
  const char *pat;
  size_t pat_len;
  int pending;
  int lits_later; /* lits not looked for yet: at the first match */
  uint32_t uses;
  /* the pattern's compiled code kept with the program's image (image.h,
   * expr_image_adopt_codes), decoded instead of compiled: in mem; NULL:
   * none */
  const uint8_t *code;
  size_t code_len;
} regex_aux;

/* ra->lits, when the pattern only lists literal strings. */
static void regex_find_lits(regex_aux *ra, const char *pat, size_t len) {
  lit *lits;
  uint32_t nlits;
  int caseless;
  if (litset_parse_regex(&ra->mem, pat, len, &lits, &nlits, &caseless) == 0)
    ra->lits = litset_build(&ra->mem, lits, nlits, caseless);
}

static void *prepare_regex(const value *args, const uint8_t *is_const, uint32_t nargs,
                           int defer_jit, char *err, size_t err_size) {
  if (err_size) err[0] = '\0';
  if (nargs < 2 || !is_const[1] || args[1].kind != V_STRING) return NULL;
  pcre2_code *re = NULL;
  if (!defer_jit) {
    int code;
    PCRE2_SIZE offset;
    re = pcre2_compile((PCRE2_SPTR)args[1].s, args[1].n, REGEX_COMPILE_OPTIONS, &code, &offset,
                       NULL);
    if (!re) {
      regex_error_text(code, offset, args[1].s, args[1].n, err, err_size);
      return NULL;
    }
    /* JIT is an optimisation: when it is unavailable the interpreter runs. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
  }
  regex_aux *ra = calloc(1, sizeof *ra);
  if (!ra) {
    pcre2_code_free(re);
    snprintf(err, err_size, "out of memory compiling a regular expression");
    return NULL;
  }
  ra->re = re;
  arena_init(&ra->mem, NULL, 0, 0);
  if (defer_jit) {
    /* a first chunk of the pattern's size, not the usual 4 KB: a hook
     * rebuilds a hundred of these, and a fresh page costs it a fault */
    arena_first_chunk(&ra->mem, (size_t)args[1].n + 64);
    ra->pat = arena_strndup(&ra->mem, args[1].s, args[1].n);
    ra->pat_len = args[1].n;
    ra->pending = ra->pat != NULL;
    ra->lits_later = ra->pat != NULL; /* a pattern never matched costs nothing */
    if (ra->pat) return ra;
  }
  regex_find_lits(ra, args[1].s, args[1].n);
  return ra;
}

/* The running PCRE2's version, which a kept code must have been made by
 * (its own header checks only the major and minor numbers). */
static int regex_version(char *out, size_t size) {
  int n = pcre2_config(PCRE2_CONFIG_VERSION, NULL); /* code units, NUL included */
  if (n <= 1 || (size_t)n > size || pcre2_config(PCRE2_CONFIG_VERSION, out) < 0) return -1;
  return n - 1;
}

/* The pattern of a deferred call site, compiled: from its kept code when
 * there is one that decodes, else from its text. */
static pcre2_code *regex_make(const regex_aux *ra) {
  if (ra->code) {
    char version[64];
    int vn = regex_version(version, sizeof version);
    const uint8_t *c = ra->code;
    if (vn > 0 && ra->code_len > 1u + c[0] && c[0] == vn && memcmp(c + 1, version, c[0]) == 0) {
      pcre2_code *re = NULL;
      if (pcre2_serialize_decode(&re, 1, c + 1 + c[0], NULL) == 1) return re;
    }
  }
  int code;
  PCRE2_SIZE offset;
  return pcre2_compile((PCRE2_SPTR)ra->pat, ra->pat_len, REGEX_COMPILE_OPTIONS, &code, &offset,
                       NULL);
}

int lib_regex_code(const builtin *b, void *aux, json_buf *out) {
  const regex_aux *ra = aux;
  if (!b || b->prepare != prepare_regex || !ra) return 0;
  pcre2_code *mine = NULL;
  const pcre2_code *re = ra->re;
  if (!re && ra->pat) {
    int code;
    PCRE2_SIZE offset;
    re = mine = pcre2_compile((PCRE2_SPTR)ra->pat, ra->pat_len, REGEX_COMPILE_OPTIONS, &code,
                              &offset, NULL);
  }
  char version[64];
  int vn = regex_version(version, sizeof version);
  uint8_t *bytes = NULL;
  PCRE2_SIZE size = 0;
  int rc = 0;
  if (re && vn > 0 && vn < 256 && pcre2_serialize_encode(&re, 1, &bytes, &size, NULL) == 1) {
    uint8_t vlen = (uint8_t)vn;
    json_buf_put(out, (const char *)&vlen, 1);
    json_buf_put(out, version, (size_t)vn);
    json_buf_put(out, (const char *)bytes, size);
    rc = 1;
  }
  pcre2_serialize_free(bytes);
  pcre2_code_free(mine);
  return rc;
}

int lib_regex_adopt(const builtin *b, void *aux, const void *code, size_t len) {
  regex_aux *ra = aux;
  if (!b || b->prepare != prepare_regex || !ra) return -1;
  if (!ra->pending || ra->re || ra->code) return 0; /* compiled already: nothing to save */
  ra->code = code; /* where it lies (the store's mapped file): a copy cost pages */
  ra->code_len = len;
  return 0;
}

static void release_regex(void *aux) {
  regex_aux *ra = aux;
  pcre2_code_free(ra->re);
  arena_free(&ra->mem);
  free(ra);
}

/* Whether s[0..n) is pure ASCII, a word at a time. */
static int all_ascii(const char *s, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    if (w & 0x8080808080808080ull) return 0;
  }
  for (; i < n; i++)
    if ((unsigned char)s[i] >= 0x80) return 0;
  return 1;
}

/* The match context and match data of this thread, made at its first
 * match; `limit` is the match limit last set in mc. A match that failed on
 * a limit drops md, so that the interpreter's frames it grew up to
 * REGEX_HEAP_LIMIT_KIB are not kept. */
typedef struct regex_tls {
  pcre2_match_context *mc;
  pcre2_match_data *md;
  uint32_t limit;
} regex_tls;

static pthread_key_t regex_key;
static pthread_once_t regex_key_once = PTHREAD_ONCE_INIT;
static int regex_key_ok;
static _Thread_local regex_tls *regex_mine;

static void regex_tls_free(void *p) {
  regex_tls *t = p;
  pcre2_match_data_free(t->md);
  pcre2_match_context_free(t->mc);
  free(t);
}

static void regex_key_init(void) {
  regex_key_ok = pthread_key_create(&regex_key, regex_tls_free) == 0;
}

static regex_tls *regex_tls_get(uint32_t limit) {
  regex_tls *t = regex_mine;
  if (!t) {
    if (pthread_once(&regex_key_once, regex_key_init) != 0 || !regex_key_ok) return NULL;
    t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->mc = pcre2_match_context_create(NULL);
    if (!t->mc || pthread_setspecific(regex_key, t) != 0) {
      regex_tls_free(t);
      return NULL;
    }
    pcre2_set_depth_limit(t->mc, REGEX_DEPTH_LIMIT);
    pcre2_set_heap_limit(t->mc, REGEX_HEAP_LIMIT_KIB);
    pcre2_set_match_limit(t->mc, limit);
    t->limit = limit;
    regex_mine = t;
  }
  if (!t->md && !(t->md = pcre2_match_data_create(1, NULL))) return NULL;
  if (t->limit != limit) {
    pcre2_set_match_limit(t->mc, limit);
    t->limit = limit;
  }
  return t;
}

static value fn_matches(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *subject = &args[0], *pattern = &args[1];
  if (!eval_charge(ctx, subject->n / 8 + 1)) return COST_ERROR;
  const regex_aux *ra = aux;
  if (ra && ra->lits_later) { /* one thread (defer_jit): see the top of the file */
    regex_aux *w = (regex_aux *)aux;
    w->lits_later = 0;
    regex_find_lits(w, w->pat, w->pat_len);
  }
  if (ra && ra->lits && ((subject->flags & VF_ASCII) || all_ascii(subject->s, subject->n)))
    return value_bool(litset_match(ra->lits, subject->s, subject->n));
  if (ra && ra->pending) { /* one thread (defer_jit): see the top of the file */
    regex_aux *w = (regex_aux *)aux;
    if (!w->re) {
      w->re = regex_make(w);
      /* one that does not compile is reported below, on every call */
      if (!w->re) w->pending = 0;
    }
    if (w->re && ++w->uses >= REGEX_JIT_AFTER) {
      (void)pcre2_jit_compile(w->re, PCRE2_JIT_COMPLETE);
      w->pending = 0;
    }
  }
  const pcre2_code *re = ra ? ra->re : NULL;
  if (!re) { /* not a constant pattern: compile it now, into the arena */
    if (!eval_charge(ctx, (uint64_t)pattern->n * 4 + 16)) return COST_ERROR;
    pcre2_general_context *gc =
        pcre2_general_context_create(arena_pcre_alloc, arena_pcre_free, ctx->arena);
    pcre2_compile_context *cc = gc ? pcre2_compile_context_create(gc) : NULL;
    if (!cc) return VALUE_ERR("out of memory");
    int code;
    PCRE2_SIZE offset;
    re = pcre2_compile((PCRE2_SPTR)pattern->s, pattern->n, REGEX_COMPILE_OPTIONS, &code, &offset,
                       cc);
    if (!re) {
      if (code == PCRE2_ERROR_NOMEMORY) return VALUE_ERR("out of memory");
      char msg[400];
      regex_error_text(code, offset, pattern->s, pattern->n, msg, sizeof msg);
      return value_errorf(ctx->arena, "%s", msg);
    }
  }
  /* The match runs under the smaller of the per-call cap and what the
   * decision's budget has left, and its steps are paid for (see
   * REGEX_STEPS_PER_UNIT): first with what the subject's charge above
   * paid, then, each time the limit stops it, again with four times the
   * steps, each try charged before it runs. */
  uint64_t cap = ctx->regex_match_limit ? ctx->regex_match_limit : REGEX_DEFAULT_MATCH_LIMIT;
  uint64_t limit = (subject->n / 8 + 1) * REGEX_STEPS_PER_UNIT * REGEX_FIRST_TRY;
  if (limit < REGEX_FIRST_STEPS) limit = REGEX_FIRST_STEPS;
  /* Strings are valid UTF-8 when they enter verdict; re-check only what is
   * not already known to be ASCII. */
  uint32_t opts = (subject->flags & VF_ASCII) ? PCRE2_NO_UTF_CHECK : 0;
  int rc, by_budget = 0, retried = 0;
  regex_tls *t;
  for (;;) {
    if (limit > cap) limit = cap;
    t = regex_tls_get((uint32_t)limit);
    if (!t) return VALUE_ERR("out of memory");
    rc = pcre2_match(re, (PCRE2_SPTR)subject->s, subject->n, 0, opts, t->md, t->mc);
    if (rc != PCRE2_ERROR_MATCHLIMIT || limit >= cap || by_budget) break;
    retried = 1;
    uint64_t next = limit * 4 < cap ? limit * 4 : cap;
    if (ctx->cost_limit) {
      uint64_t left = ctx->cost < ctx->cost_limit ? ctx->cost_limit - ctx->cost : 0;
      if (left == 0) break;
      if (next / REGEX_STEPS_PER_UNIT >= left) {
        next = left * REGEX_STEPS_PER_UNIT;
        by_budget = 1;
      }
    }
    ctx->cost += (next + REGEX_STEPS_PER_UNIT - 1) / REGEX_STEPS_PER_UNIT;
    limit = next;
  }
  if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH) {
    if (retried) { /* the interpreter's frames grew: not kept */
      pcre2_match_data_free(t->md);
      t->md = NULL;
    }
    return value_bool(rc >= 0);
  }
  pcre2_match_data_free(t->md);
  t->md = NULL;
  if (rc == PCRE2_ERROR_MATCHLIMIT && limit < cap) {
    /* the decision's budget ran out inside the match */
    if (ctx->cost_limit && ctx->cost <= ctx->cost_limit) ctx->cost = ctx->cost_limit + 1;
    return COST_ERROR;
  }
  switch (rc) {
    case PCRE2_ERROR_MATCHLIMIT:
    case PCRE2_ERROR_DEPTHLIMIT:
    case PCRE2_ERROR_HEAPLIMIT:
    case PCRE2_ERROR_JIT_STACKLIMIT:
      return VALUE_ERR(
          "regular expression too expensive: match limit exceeded (simplify the pattern, e.g. "
          "avoid nested repetition like (a+)+)");
    case PCRE2_ERROR_NOMEMORY:
      return VALUE_ERR("out of memory");
    default: {
      PCRE2_UCHAR msg[160];
      if (pcre2_get_error_message(rc, msg, sizeof msg) < 0) strcpy((char *)msg, "unknown error");
      return value_errorf(ctx->arena, "matches: %s", (const char *)msg);
    }
  }
}

/* ------------------------------------------------------ number parsing */

static int parse_uint64_dec(const char *s, size_t n, uint64_t *out) {
  if (n == 0) return -1;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    unsigned d = (unsigned)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

/* Go's strconv.ParseInt(s, 10, 64): optional sign, decimal digits only. */
static int parse_int64_dec(const char *s, size_t n, int64_t *out) {
  int neg = 0;
  if (n && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s++, n--;
  }
  uint64_t u;
  if (parse_uint64_dec(s, n, &u)) return -1;
  if (neg) {
    if (u > (uint64_t)INT64_MAX + 1) return -1;
    *out = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
  } else {
    if (u > (uint64_t)INT64_MAX) return -1;
    *out = (int64_t)u;
  }
  return 0;
}

static int lower_eq(const char *s, size_t n, const char *word) {
  size_t w = strlen(word);
  if (n != w) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != word[i]) return 0;
  }
  return 1;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_xdigit(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Checks the syntax Go's strconv.ParseFloat accepts (without underscores):
 * decimal with optional exponent, hexadecimal with a mandatory p exponent,
 * and inf/infinity/nan in any case. */
static int float_syntax_ok(const char *s, size_t n) {
  size_t i = 0;
  if (i < n && (s[i] == '+' || s[i] == '-')) i++;
  if (lower_eq(s + i, n - i, "inf") || lower_eq(s + i, n - i, "infinity")) return 1;
  if (i == 0 && lower_eq(s, n, "nan")) return 1;
  int hex = n - i > 2 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X');
  if (hex) i += 2;
  size_t mant = 0;
  while (i < n && (hex ? is_xdigit(s[i]) : is_digit(s[i]))) i++, mant++;
  if (i < n && s[i] == '.') {
    i++;
    while (i < n && (hex ? is_xdigit(s[i]) : is_digit(s[i]))) i++, mant++;
  }
  if (mant == 0) return 0;
  char e = hex ? 'p' : 'e';
  if (i < n && (s[i] == e || s[i] == e - 32)) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    size_t ed = 0;
    while (i < n && is_digit(s[i])) i++, ed++;
    if (ed == 0) return 0;
  } else if (hex) {
    return 0;
  }
  return i == n;
}

/* strtod in the "C" locale, whatever locale the embedding program set. */
static double strtod_c(const char *s, char **end) {
#ifdef __GLIBC__
  locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0); /* glibc: a static object, no malloc */
  if (c) {
    double d = strtod_l(s, end, c);
    freelocale(c);
    return d;
  }
#endif
  return strtod(s, end);
}

/* Returns 0 and *out, or -1 for bad syntax, -2 for overflow. */
static int parse_double(const char *s, size_t n, double *out) {
  if (n == 0 || n > 1000 || !float_syntax_ok(s, n)) return -1;
  char buf[1024];
  memcpy(buf, s, n);
  buf[n] = '\0';
  char *end;
  errno = 0;
  double d = strtod_c(buf, &end);
  if (end != buf + n) return -1;
  if (errno == ERANGE && isinf(d)) return -2;
  *out = d;
  return 0;
}

/* --------------------------------------------------------- conversions */

static value fn_identity(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  return args[0];
}

static value range_error(const char *to) {
  if (to[0] == 'i') return VALUE_ERR("int conversion: value out of range");
  return VALUE_ERR("uint conversion: value out of range");
}

static value fn_int(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *v = &args[0];
  switch (v->kind) {
    case V_INT:
      return *v;
    case V_UINT:
      if (v->u > (uint64_t)INT64_MAX) return range_error("int");
      return value_int((int64_t)v->u);
    case V_DOUBLE:
      /* The open interval (-2^63, 2^63): both ends are out, NaN is out. */
      if (!(v->d > -9223372036854775808.0 && v->d < 9223372036854775808.0))
        return range_error("int");
      return value_int((int64_t)v->d);
    case V_STRING: {
      int64_t i;
      if (parse_int64_dec(v->s, v->n, &i))
        return value_errorf(ctx->arena, "int conversion: '%.*s' is not a valid int",
                            (int)(v->n > 64 ? 64 : v->n), v->s);
      return value_int(i);
    }
    case V_TIMESTAMP:
      return value_int(v->i);
    case V_DURATION: {
      /* nanoseconds, as cel-go: must fit int64 (about ±292 years) */
      int64_t ns = value_nanos(*v), r;
      if (__builtin_mul_overflow(v->i, (int64_t)1000000000, &r) ||
          __builtin_add_overflow(r, ns, &r))
        return range_error("int");
      return value_int(r);
    }
    default:
      return NO_OVERLOAD;
  }
}

static value fn_uint(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *v = &args[0];
  switch (v->kind) {
    case V_UINT:
      return *v;
    case V_INT:
      if (v->i < 0) return range_error("uint");
      return value_uint((uint64_t)v->i);
    case V_DOUBLE:
      if (!(v->d >= 0 && v->d < 18446744073709551616.0)) return range_error("uint");
      return value_uint((uint64_t)v->d);
    case V_STRING: {
      uint64_t u;
      if (parse_uint64_dec(v->s, v->n, &u))
        return value_errorf(ctx->arena, "uint conversion: '%.*s' is not a valid uint",
                            (int)(v->n > 64 ? 64 : v->n), v->s);
      return value_uint(u);
    }
    default:
      return NO_OVERLOAD;
  }
}

static value fn_double(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *v = &args[0];
  switch (v->kind) {
    case V_DOUBLE:
      return *v;
    case V_INT:
      return value_double((double)v->i);
    case V_UINT:
      return value_double((double)v->u);
    case V_STRING: {
      double d;
      int rc = parse_double(v->s, v->n, &d);
      if (rc == -2)
        return value_errorf(ctx->arena, "double conversion: '%.*s' is out of range",
                            (int)(v->n > 64 ? 64 : v->n), v->s);
      if (rc)
        return value_errorf(ctx->arena, "double conversion: '%.*s' is not a valid double",
                            (int)(v->n > 64 ? 64 : v->n), v->s);
      return value_double(d);
    }
    default:
      return NO_OVERLOAD;
  }
}

/* RFC 3339 in UTC with as many fraction digits as needed (Go's RFC3339Nano). */
static size_t format_timestamp_min(int64_t sec, int32_t nanos, char *out) {
  size_t n = timefmt_format_rfc3339(sec, nanos, out);
  /* out ends in "Z"; trim zeros of a fraction before it. */
  const char *dot = memchr(out, '.', n);
  if (!dot) return n;
  size_t end = n - 1;
  while (end > (size_t)(dot - out) + 1 && out[end - 1] == '0') end--;
  if (end == (size_t)(dot - out) + 1) end--; /* all zeros: drop the point too */
  out[end] = 'Z';
  out[end + 1] = '\0';
  return end + 1;
}

static value fn_string(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *v = &args[0];
  char buf[64];
  size_t n;
  switch (v->kind) {
    case V_STRING: { /* a tagged string (an IP, a CIDR) becomes a plain one */
      value r = *v;
      r.flags &= VF_ASCII;
      return r;
    }
    case V_INT:
      n = (size_t)sprintf(buf, "%" PRId64, v->i);
      break;
    case V_UINT:
      n = (size_t)sprintf(buf, "%" PRIu64, v->u);
      break;
    case V_DOUBLE:
      n = dtoa_shortest(v->d, buf);
      break;
    case V_BOOL:
      return v->b ? str_result("true", 4, 1) : str_result("false", 5, 1);
    case V_BYTES: {
      if (!eval_charge(ctx, v->n / 16 + 1)) return COST_ERROR;
      int ascii;
      size_t bad = utf8_validate(v->s, v->n, &ascii);
      if (bad != v->n)
        return value_errorf(ctx->arena, "string conversion: invalid UTF-8 at byte %zu", bad);
      return str_result(v->s, v->n, ascii);
    }
    case V_TIMESTAMP:
      n = format_timestamp_min(v->i, value_nanos(*v), buf);
      break;
    case V_DURATION:
      n = timefmt_format_duration(v->i, value_nanos(*v), buf);
      break;
    case V_TYPE: {
      const char *name = value_kind_name((value_kind)v->n);
      return str_result(name, strlen(name), 1);
    }
    default:
      return NO_OVERLOAD;
  }
  return arena_ascii(ctx, buf, n);
}

static value fn_bytes(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *v = &args[0];
  if (v->kind == V_BYTES) return *v;
  if (v->kind == V_STRING) return value_bytes(v->s, v->n); /* values are immutable: share */
  return NO_OVERLOAD;
}

static value fn_bool(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *v = &args[0];
  if (v->kind == V_BOOL) return *v;
  if (v->kind != V_STRING) return NO_OVERLOAD;
  static const char *const yes[] = {"1", "t", "true", "TRUE", "True"};
  static const char *const no[] = {"0", "f", "false", "FALSE", "False"};
  for (size_t i = 0; i < 5; i++) {
    if (v->n == strlen(yes[i]) && memcmp(v->s, yes[i], v->n) == 0) return value_bool(true);
    if (v->n == strlen(no[i]) && memcmp(v->s, no[i], v->n) == 0) return value_bool(false);
  }
  return value_errorf(ctx->arena, "bool conversion: '%.*s' is not a valid bool",
                      (int)(v->n > 64 ? 64 : v->n), v->s);
}

static value fn_type(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  if (args[0].kind == V_ERROR) return args[0];
  return value_type((value_kind)args[0].kind);
}

/* ------------------------------------------------------------- table */

#define S V_STRING
#define ANY K_ANY

const builtin lib_core_builtins[] = {
    {"size", 0, 1, {S}, fn_size, NULL, NULL, 0},
    {"size", 0, 1, {V_BYTES}, fn_size, NULL, NULL, 0},
    {"size", 0, 1, {V_LIST}, fn_size, NULL, NULL, 0},
    {"size", 0, 1, {V_MAP}, fn_size, NULL, NULL, 0},
    {"size", 1, 1, {S}, fn_size, NULL, NULL, 0},
    {"size", 1, 1, {V_BYTES}, fn_size, NULL, NULL, 0},
    {"size", 1, 1, {V_LIST}, fn_size, NULL, NULL, 0},
    {"size", 1, 1, {V_MAP}, fn_size, NULL, NULL, 0},

    {"contains", 1, 2, {S, S}, fn_contains, NULL, NULL, 0},
    {"startsWith", 1, 2, {S, S}, fn_starts_with, NULL, NULL, 0},
    {"endsWith", 1, 2, {S, S}, fn_ends_with, NULL, NULL, 0},
    {"matches", 1, 2, {S, S}, fn_matches, prepare_regex, release_regex, 0},
    {"matches", 0, 2, {S, S}, fn_matches, prepare_regex, release_regex, 0},

    {"int", 0, 1, {V_INT}, fn_int, NULL, NULL, 0},
    {"int", 0, 1, {V_UINT}, fn_int, NULL, NULL, 0},
    {"int", 0, 1, {V_DOUBLE}, fn_int, NULL, NULL, 0},
    {"int", 0, 1, {S}, fn_int, NULL, NULL, 0},
    {"int", 0, 1, {V_TIMESTAMP}, fn_int, NULL, NULL, 0},
    {"int", 0, 1, {V_DURATION}, fn_int, NULL, NULL, 0},

    {"uint", 0, 1, {V_UINT}, fn_uint, NULL, NULL, 0},
    {"uint", 0, 1, {V_INT}, fn_uint, NULL, NULL, 0},
    {"uint", 0, 1, {V_DOUBLE}, fn_uint, NULL, NULL, 0},
    {"uint", 0, 1, {S}, fn_uint, NULL, NULL, 0},

    {"double", 0, 1, {V_DOUBLE}, fn_double, NULL, NULL, 0},
    {"double", 0, 1, {V_INT}, fn_double, NULL, NULL, 0},
    {"double", 0, 1, {V_UINT}, fn_double, NULL, NULL, 0},
    {"double", 0, 1, {S}, fn_double, NULL, NULL, 0},

    {"string", 0, 1, {S}, fn_string, NULL, NULL, 0},
    {"string", 0, 1, {V_INT}, fn_string, NULL, NULL, 0},
    {"string", 0, 1, {V_UINT}, fn_string, NULL, NULL, 0},
    {"string", 0, 1, {V_DOUBLE}, fn_string, NULL, NULL, 0},
    {"string", 0, 1, {V_BOOL}, fn_string, NULL, NULL, 0},
    {"string", 0, 1, {V_BYTES}, fn_string, NULL, NULL, 0},
    {"string", 0, 1, {V_TIMESTAMP}, fn_string, NULL, NULL, 0},
    {"string", 0, 1, {V_DURATION}, fn_string, NULL, NULL, 0},
    {"string", 0, 1, {V_TYPE}, fn_string, NULL, NULL, 0},

    {"bytes", 0, 1, {V_BYTES}, fn_bytes, NULL, NULL, 0},
    {"bytes", 0, 1, {S}, fn_bytes, NULL, NULL, 0},

    {"bool", 0, 1, {V_BOOL}, fn_bool, NULL, NULL, 0},
    {"bool", 0, 1, {S}, fn_bool, NULL, NULL, 0},

    {"type", 0, 1, {ANY}, fn_type, NULL, NULL, 0},
    {"dyn", 0, 1, {ANY}, fn_identity, NULL, NULL, 0},

    {"confidence", 0, 1, {V_DOUBLE}, fn_confidence, NULL, NULL, 0},
    {0},
};
