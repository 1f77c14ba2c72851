/* json_read.c — verdict's JSON reader (contract in json.h; the writer is
 * json_write.c).
 *
 * Why our own. Every decision starts by parsing a request body, so this is
 * the hot path. Measured on the kind of machine verdict runs on, parsing a
 * 600-byte decision request: cJSON ~2.6 µs, json-c ~6.3 µs, jansson
 * ~9.3 µs, a single-pass scanner into arena values ~0.6 µs. The libraries
 * also build their own trees (malloc per node) that we would then convert
 * into values, and none does what we need on numbers: cJSON keeps every
 * number as a double (so 9007199254740993 silently becomes ...992) and
 * rejects the bare NaN that XGBoost model files contain. One module here
 * serves requests, snapshots, model files and test data.
 *
 * Reader design:
 *   - One pass over the input, no recursion: an explicit stack of open
 *     containers (so 100000 nested '[' hit the depth limit, never the C
 *     stack) and a scratch stack of finished values. A container's items
 *     are copied into one arena block of the exact size when it closes.
 *     Both stacks start in the parser struct on the C stack and move to
 *     malloc only for big documents, so a typical request costs no malloc.
 *   - Strings without escapes are not copied: the value points into the
 *     input buffer (the input must outlive the values). Strings are checked
 *     16 bytes at a time (SSE2; 8 in a 64-bit word elsewhere) for '"',
 *     '\\', control bytes and non-ASCII; non-ASCII bytes are validated as
 *     UTF-8 where they stand. Strings with escapes are decoded into the
 *     arena in a second walk over that string only.
 *   - Numbers: integers are accumulated exactly (V_INT, V_UINT); doubles take
 *     the exact fast path (at most 19 significant digits, mantissa <= 2^53,
 *     |exponent| <= 22: one multiply or divide by an exact power of ten) and
 *     otherwise strtod on "DIGITSeN" text we build without a decimal point,
 *     so the C locale never matters.
 *   - Duplicate keys are rejected when their object closes (pairwise for
 *     small objects, a hash table for large ones): two parsers that resolve
 *     duplicates differently (first wins / last wins) read different
 *     requests from the same bytes, a known smuggling trick; a policy engine
 *     should refuse the ambiguity and say where it is.
 *   - Line, column and path are computed only when an error is reported.
 * */
#include "core/json.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtoa.h"
#include "core/json_scan.h"
#include "core/utf8.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The exact fast path for doubles needs arithmetic in plain double precision
 * (no x87-style excess precision, which would round twice). */
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
#define EXACT_DOUBLE_MATH 1
#else
#define EXACT_DOUBLE_MATH 0
#endif

#define JSON_DEFAULT_DEPTH 512
#define JSON_DEFAULT_SIZE ((size_t)64 << 20)

_Static_assert(sizeof(map_entry) == 2 * sizeof(value), "a map entry is two values");

/* ------------------------------------------------------------------ */
/* Reader                                                              */
/* ------------------------------------------------------------------ */

typedef struct frame {
  size_t start;     /* first scratch slot of this container's items */
  size_t key_start; /* first key-offset slot (objects) */
  int is_map;
} frame;

typedef struct parser {
  arena *a;
  const char *buf, *end;
  size_t max_depth;
  int lenient;
  int dup_last_wins;
  json_error *err;
  value *stk; /* finished values; an open object holds key, value, key, ... */
  size_t nstk, capstk;
  size_t *koff; /* byte offset of each key of the open objects */
  size_t nkoff, capkoff;
  frame *fr; /* open containers, outermost first */
  size_t nfr, capfr;
  value stk0[128];
  size_t koff0[64];
  frame fr0[32];
} parser;

/* ---- errors ---- */

/* A bounded text builder: once a piece does not fit, "..." ends the text. */
typedef struct textbuf {
  char *s;
  size_t len, cap;
  int full;
} textbuf;

static void tb_put(textbuf *t, const char *s, size_t n) {
  if (t->full) return;
  if (t->len + n + 4 > t->cap) {
    memcpy(t->s + t->len, "...", 3);
    t->len += 3;
    t->s[t->len] = '\0';
    t->full = 1;
    return;
  }
  memcpy(t->s + t->len, s, n);
  t->len += n;
  t->s[t->len] = '\0';
}

static int is_ident_key(const char *s, size_t n) {
  if (n == 0 || n > 64) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return 0;
  }
  return 1;
}

/* Appends one path component for an object key: .name or ["any text"]. */
static void path_key(textbuf *t, const value *k) {
  char piece[96 * 6 + 16];
  size_t n = 0;
  if (is_ident_key(k->s, k->n)) {
    piece[n++] = '.';
    memcpy(piece + n, k->s, k->n);
    n += k->n;
  } else {
    piece[n++] = '[';
    piece[n++] = '"';
    size_t i = 0;
    while (i < k->n) {
      if (i >= 64) { /* long keys are shortened, on a character boundary */
        memcpy(piece + n, "...", 3);
        n += 3;
        break;
      }
      unsigned char c = (unsigned char)k->s[i];
      if (c == '"' || c == '\\') {
        piece[n++] = '\\';
        piece[n++] = (char)c;
        i++;
      } else if (c < 0x20 || c == 0x7f) {
        n += (size_t)snprintf(piece + n, 8, "\\u%04x", c);
        i++;
      } else {
        uint32_t cp;
        int len = utf8_decode((const unsigned char *)k->s + i, k->n - i, &cp);
        if (len <= 0) len = 1;
        memcpy(piece + n, k->s + i, (size_t)len);
        n += (size_t)len;
        i += (size_t)len;
      }
    }
    piece[n++] = '"';
    piece[n++] = ']';
  }
  tb_put(t, piece, n);
}

/* The JSON path of the place being read. in_value: the innermost container
 * is reading an element (so its index is part of the path). extra: a key to
 * append (the duplicate key). */
static void build_path(const parser *P, int in_value, const value *extra, char *out, size_t cap) {
  textbuf t = {out, 0, cap, 0};
  out[0] = '\0';
  tb_put(&t, "$", 1);
  for (size_t i = 0; i < P->nfr; i++) {
    const frame *f = &P->fr[i];
    size_t count = (i + 1 < P->nfr ? P->fr[i + 1].start : P->nstk) - f->start;
    if (f->is_map) {
      if (count % 2 == 1) path_key(&t, &P->stk[f->start + count - 1]);
    } else if (i + 1 < P->nfr || in_value) {
      char piece[32];
      int n = snprintf(piece, sizeof piece, "[%zu]", count);
      tb_put(&t, piece, (size_t)n);
    }
  }
  if (extra) path_key(&t, extra);
}

static void line_col(const char *buf, size_t off, int *line, int *col) {
  int l = 1;
  size_t line_start = 0;
  const char *p = buf, *stop = buf + off;
  while (p < stop) {
    const char *nl = memchr(p, '\n', (size_t)(stop - p));
    if (!nl) break;
    l++;
    line_start = (size_t)(nl - buf) + 1;
    p = nl + 1;
  }
  *line = l;
  *col = off - line_start < INT_MAX ? (int)(off - line_start) + 1 : INT_MAX;
}

static int fail_at(parser *P, const char *at, int in_value, const value *extra, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));

static int fail_at(parser *P, const char *at, int in_value, const value *extra, const char *fmt,
                   ...) {
  json_error *e = P->err;
  if (!e) return -1;
  e->offset = (size_t)(at - P->buf);
  line_col(P->buf, e->offset, &e->line, &e->column);
  build_path(P, in_value, extra, e->path, sizeof e->path);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  return -1;
}

#define FAIL(P, at, ...) fail_at(P, at, 1, NULL, __VA_ARGS__)
#define FAIL_BETWEEN(P, at, ...) fail_at(P, at, 0, NULL, __VA_ARGS__)

/* Describes the byte at p for a message: 'x', or byte 0xNN. */
static const char *describe(const char *p, const char *end, char out[48]) {
  if (p >= end) return "end of input";
  unsigned char c = (unsigned char)*p;
  if (c >= 0x20 && c < 0x7f)
    snprintf(out, 48, "'%c'", c);
  else if (c == 0xEF && end - p >= 3 && (unsigned char)p[1] == 0xBB && (unsigned char)p[2] == 0xBF)
    snprintf(out, 48, "byte order mark EF BB BF");
  else
    snprintf(out, 48, "byte 0x%02X", c);
  return out;
}

/* ---- scratch stacks ---- */

/* Doubles a scratch array that starts in `local` (inside the parser) and
 * moves to malloc. Returns the new array, or NULL with the error set (the
 * old array is then still valid and still owned by the parser). */
static void *grow(parser *P, void *p, size_t *cap, size_t elem, const void *local, const char *at) {
  size_t ncap = *cap * 2;
  void *q = NULL;
  if (ncap <= SIZE_MAX / elem) {
    if (p == local) {
      q = malloc(ncap * elem);
      if (q) memcpy(q, p, *cap * elem);
    } else {
      q = realloc(p, ncap * elem);
    }
  }
  if (!q) {
    FAIL(P, at, "out of memory");
    return NULL;
  }
  *cap = ncap;
  return q;
}

static inline int push_value(parser *P, value v, const char *at) {
  if (P->nstk == P->capstk) {
    value *q = grow(P, P->stk, &P->capstk, sizeof(value), P->stk0, at);
    if (!q) return -1;
    P->stk = q;
  }
  P->stk[P->nstk++] = v;
  return 0;
}

static int push_frame(parser *P, int is_map, const char *at) {
  if (P->nfr >= P->max_depth)
    return FAIL(P, at, "nesting deeper than the limit of %zu levels", P->max_depth);
  if (P->nfr == P->capfr) {
    frame *q = grow(P, P->fr, &P->capfr, sizeof(frame), P->fr0, at);
    if (!q) return -1;
    P->fr = q;
  }
  frame *f = &P->fr[P->nfr++];
  f->start = P->nstk;
  f->key_start = P->nkoff;
  f->is_map = is_map;
  return 0;
}

static void parser_free(parser *P) {
  if (P->stk != P->stk0) free(P->stk);
  if (P->koff != P->koff0) free(P->koff);
  if (P->fr != P->fr0) free(P->fr);
}

/* ---- strings ---- */

static int hex4(const char *p, const char *end, uint32_t *out) {
  if (end - p < 4) return -1;
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    unsigned char c = (unsigned char)p[i];
    uint32_t d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
      d = (uint32_t)((c | 0x20) - 'a' + 10);
    else
      return -1;
    v = v << 4 | d;
  }
  *out = v;
  return 0;
}

/* Decodes the escapes of the string body [body, close) into the arena. esc is
 * the first backslash. The bytes other than escapes were validated already. */
static int decode_escapes(parser *P, const char *body, const char *esc, const char *close,
                          value *out, int ascii) {
  size_t span = (size_t)(close - body);
  char *dst = arena_alloc(P->a, span ? span : 1);
  if (!dst) return FAIL(P, body, "out of memory (arena limit reached)");
  size_t o = (size_t)(esc - body);
  memcpy(dst, body, o);
  const char *q = esc;
  while (q < close) {
    if (*q != '\\') {
      const char *next = memchr(q, '\\', (size_t)(close - q));
      if (!next) next = close;
      memcpy(dst + o, q, (size_t)(next - q));
      o += (size_t)(next - q);
      q = next;
      continue;
    }
    char c = q[1]; /* the scan made sure a byte follows every backslash */
    switch (c) {
      case '"':
      case '\\':
      case '/':
        dst[o++] = c;
        q += 2;
        break;
      case 'b':
        dst[o++] = '\b';
        q += 2;
        break;
      case 'f':
        dst[o++] = '\f';
        q += 2;
        break;
      case 'n':
        dst[o++] = '\n';
        q += 2;
        break;
      case 'r':
        dst[o++] = '\r';
        q += 2;
        break;
      case 't':
        dst[o++] = '\t';
        q += 2;
        break;
      case 'u': {
        uint32_t cp, lo;
        if (hex4(q + 2, close, &cp) != 0)
          return FAIL(P, q, "invalid \\u escape: expected four hex digits after \\u");
        if (cp >= 0xDC00 && cp <= 0xDFFF)
          return FAIL(P, q,
                      "lone surrogate \\u%04X: a low surrogate must follow a high one "
                      "(\\uD800-\\uDBFF)",
                      (unsigned)cp);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (close - (q + 6) < 6 || q[6] != '\\' || q[7] != 'u' || hex4(q + 8, close, &lo) != 0 ||
              lo < 0xDC00 || lo > 0xDFFF)
            return FAIL(P, q,
                        "lone surrogate \\u%04X: a high surrogate must be followed by a low "
                        "one (\\uDC00-\\uDFFF)",
                        (unsigned)cp);
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          q += 12;
        } else {
          q += 6;
        }
        if (cp >= 0x80) ascii = 0;
        o += (size_t)utf8_encode(cp, dst + o);
        break;
      }
      default: {
        char what[48];
        return FAIL(P, q, "invalid escape: %s after a backslash", describe(q + 1, close, what));
      }
    }
  }
  if (o > UINT32_MAX) return FAIL(P, body, "string longer than 4 GiB");
  *out = value_str(dst, (uint32_t)o);
  if (ascii) out->flags |= VF_ASCII;
  return 0;
}

/* The rest of read_string, for strings with escapes or non-ASCII bytes (or
 * no end): s is the first such byte. */
static int read_string_rest(parser *P, const char **pp, value *out, const char *s) {
  const char *body = *pp + 1, *end = P->end, *esc = NULL;
  int ascii = 1;
  for (;; s = skip_plain(s, end)) {
    if (s >= end) return FAIL(P, *pp, "unterminated string (it starts here)");
    unsigned char c = (unsigned char)*s;
    if (c == '"') break;
    if (c == '\\') {
      if (!esc) esc = s;
      if (end - s < 2) return FAIL(P, *pp, "unterminated string (it starts here)");
      /* A non-ASCII byte is never a valid escape; skipping it would leave
       * the rest of its UTF-8 sequence to be reported as invalid UTF-8. */
      if ((unsigned char)s[1] >= 0x80) {
        char what[48];
        return FAIL(P, s, "invalid escape: %s after a backslash", describe(s + 1, end, what));
      }
      s += 2; /* the escaped byte is checked when decoding */
      continue;
    }
    if (c < 0x20) return FAIL(P, s, "control character 0x%02X must be escaped in a string", c);
    uint32_t cp;
    int n = utf8_decode((const unsigned char *)s, (size_t)(end - s), &cp);
    if (n == 0) return FAIL(P, s, "invalid UTF-8 (byte 0x%02X) in a string", c);
    ascii = 0;
    s += n;
  }
  *pp = s + 1;
  if (esc) return decode_escapes(P, body, esc, s, out, ascii);
  if ((size_t)(s - body) > UINT32_MAX) return FAIL(P, body, "string longer than 4 GiB");
  *out = value_str(body, (uint32_t)(s - body));
  if (ascii) out->flags |= VF_ASCII;
  return 0;
}

/* Reads the string whose opening quote is at *pp; leaves *pp after the
 * closing quote. Plain ASCII strings, the common case, finish here. */
static inline __attribute__((always_inline)) int read_string(parser *P, const char **pp,
                                                             value *out) {
  const char *body = *pp + 1;
  const char *s = skip_plain(body, P->end);
  if (s == P->end || *s != '"' || (size_t)(s - body) > UINT32_MAX)
    return read_string_rest(P, pp, out, s);
  *pp = s + 1;
  *out = value_str(body, (uint32_t)(s - body));
  out->flags |= VF_ASCII;
  return 0;
}

/* ---- numbers ---- */

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The exact decimal is (digits of [ip,ie) then [fp,fe)) × 10^(exp - (fe-fp)).
 * Converts it with strtod on text without a decimal point. More than 780
 * significant digits are cut with a sticky last digit: a midpoint between two
 * doubles has at most 767 significant digits, so the rounding is unchanged. */
static int slow_double(const char *ip, const char *ie, const char *fp, const char *fe, int64_t exp,
                       double *out) {
  char text[800];
  size_t n = 0;
  int64_t dropped = 0;
  int sticky = 0;
  const char *parts[2][2] = {{ip, ie}, {fp, fe}};
  for (int k = 0; k < 2; k++) {
    for (const char *q = parts[k][0]; q < parts[k][1]; q++) {
      if (n == 0 && *q == '0') continue;
      if (n < 780)
        text[n++] = *q;
      else {
        dropped++;
        if (*q != '0') sticky = 1;
      }
    }
  }
  if (n == 0) {
    *out = 0.0;
    return 0;
  }
  int64_t e = exp - (fe - fp) + dropped;
  if (sticky) {
    text[n++] = '1';
    e--;
  }
  /* The value is about 10^(n + e): decide the far ranges without strtod. */
  if ((int64_t)n + e > 330) return -1;
  if ((int64_t)n + e < -330) {
    *out = 0.0;
    return 0;
  }
  snprintf(text + n, sizeof text - n, "e%lld", (long long)e);
  *out = strtod(text, NULL);
  return isinf(*out) ? -1 : 0;
}

static int read_number(parser *P, const char **pp, value *out) {
  const char *p = *pp, *start = p, *end = P->end;
  int neg = 0;
  if (*p == '-') {
    neg = 1;
    p++;
  }
  if (p == end || !is_digit(*p)) {
    char what[48];
    return FAIL(P, p, "expected a digit after '-', found %s", describe(p, end, what));
  }
  const char *ip = p;
  uint64_t m = 0;
  int big = 0;
  if (*p == '0') {
    p++;
    if (p < end && is_digit(*p)) return FAIL(P, start, "leading zeros are not allowed in numbers");
  } else {
    for (; p < end && is_digit(*p); p++) {
      unsigned d = (unsigned)(*p - '0');
      if (m > (UINT64_MAX - d) / 10)
        big = 1;
      else
        m = m * 10 + d;
    }
  }
  const char *ie = p, *fp = p, *fe = p;
  int is_float = 0;
  if (p < end && *p == '.') {
    p++;
    if (p == end || !is_digit(*p)) {
      char what[48];
      return FAIL(P, p, "expected a digit after the decimal point, found %s",
                  describe(p, end, what));
    }
    fp = p;
    while (p < end && is_digit(*p)) p++;
    fe = p;
    is_float = 1;
  }
  int64_t exp = 0;
  if (p < end && (*p == 'e' || *p == 'E')) {
    p++;
    int eneg = 0;
    if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
    if (p == end || !is_digit(*p)) {
      char what[48];
      return FAIL(P, p, "expected a digit in the exponent, found %s", describe(p, end, what));
    }
    for (; p < end && is_digit(*p); p++)
      if (exp < 1000000000) exp = exp * 10 + (*p - '0');
    if (eneg) exp = -exp;
    is_float = 1;
  }
  if (p < end && (((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z') || *p == '.' || *p == '_' ||
                  *p == '+' || *p == '-')) {
    char what[48];
    return FAIL(P, p, "invalid character %s in a number", describe(p, end, what));
  }
  *pp = p;

  if (!is_float && !big) {
    if (!neg) {
      *out = m <= INT64_MAX ? value_int((int64_t)m) : value_uint(m);
      return 0;
    }
    if (m <= (uint64_t)INT64_MAX + 1) {
      *out = value_int(m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m);
      return 0;
    }
  }

  /* A double. Collect up to 19 significant digits for the exact fast path. */
  uint64_t mant = 0;
  int nsig = 0, truncated = 0;
  int64_t e10 = exp;
  for (const char *q = ip; q < ie; q++) {
    unsigned d = (unsigned)(*q - '0');
    if (nsig == 0 && d == 0) continue;
    if (nsig < 19) {
      mant = mant * 10 + d;
      nsig++;
    } else {
      e10++;
      truncated |= d != 0;
    }
  }
  for (const char *q = fp; q < fe; q++) {
    unsigned d = (unsigned)(*q - '0');
    if (nsig == 0 && d == 0) {
      e10--;
      continue;
    }
    if (nsig < 19) {
      mant = mant * 10 + d;
      nsig++;
      e10--;
    } else {
      truncated |= d != 0;
    }
  }
  double d;
  if (mant == 0 && !truncated) {
    d = 0.0;
  } else if (EXACT_DOUBLE_MATH && !truncated && mant <= (1ull << 53) && e10 >= -22 && e10 <= 22) {
    d = (double)mant;
    d = e10 < 0 ? d / pow10_exact[-e10] : d * pow10_exact[e10];
  } else if (slow_double(ip, ie, fp, fe, exp, &d) != 0) {
    int len = (int)(p - start);
    return FAIL(P, start, "number %.*s%s is out of the range of a double", len > 40 ? 40 : len,
                start, len > 40 ? "..." : "");
  }
  *out = value_double(neg ? -d : d);
  return 0;
}

/* ---- objects ---- */

/* A hash of a key for the duplicate check, 8 bytes at a time. */
static uint64_t key_hash(const value *k) {
  const char *s = k->s;
  size_t n = k->n;
  uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ull, w = 0;
  if (n >= 8) {
    for (size_t i = 0; i + 8 <= n; i += 8) {
      memcpy(&w, s + i, 8);
      h = (h ^ w) * 0xff51afd7ed558ccdull;
      h ^= h >> 32;
    }
    memcpy(&w, s + n - 8, 8); /* the tail, overlapping the last word */
  } else if (n >= 4) {        /* two overlapping 4-byte reads */
    uint32_t lo, hi;
    memcpy(&lo, s, 4);
    memcpy(&hi, s + n - 4, 4);
    w = (uint64_t)hi << 32 | lo;
  } else if (n > 0) {
    const unsigned char *u = (const unsigned char *)s;
    w = (uint64_t)u[0] << 16 | (uint64_t)u[n / 2] << 8 | u[n - 1];
  }
  h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 29);
}

static inline int key_eq(const value *a, const value *b) {
  if (a->n != b->n) return 0;
  size_t n = a->n;
  if (n < 4 || n > 16) return memcmp(a->s, b->s, n) == 0;
  /* 4 to 16 bytes, the usual key: two overlapping loads a side, no call */
  uint64_t x, y, z, w;
  if (n >= 8) {
    memcpy(&x, a->s, 8);
    memcpy(&y, b->s, 8);
    memcpy(&z, a->s + n - 8, 8);
    memcpy(&w, b->s + n - 8, 8);
  } else {
    uint32_t x4, y4, z4, w4;
    memcpy(&x4, a->s, 4);
    memcpy(&y4, b->s, 4);
    memcpy(&z4, a->s + n - 4, 4);
    memcpy(&w4, b->s + n - 4, 4);
    x = x4, y = y4, z = z4, w = w4;
  }
  return x == y && z == w;
}

static int report_dup(parser *P, const frame *f, size_t first, size_t dup) {
  const value *keys = P->stk + f->start;
  int line, col;
  line_col(P->buf, P->koff[f->key_start + first], &line, &col);
  const value *k = &keys[2 * dup];
  char kq[160];
  return fail_at(P, P->buf + P->koff[f->key_start + dup], 0, k,
                 "duplicate key \"%s\" (first at line %d, column %d); send each key once",
                 json_quote_text(kq, sizeof kq, k->s, k->n, 64), line, col);
}

/* Last-wins mode: entry j repeats entry i (i < j). Entry i takes j's value
 * and j is marked dead (its key's string pointer set to NULL, which no live
 * key has: an empty key points at the input). */
static void merge_dup(value *e, size_t i, size_t j) {
  e[2 * i + 1] = e[2 * j + 1];
  e[2 * j].s = NULL;
  e[2 * j].kind = V_NULL;
}

static int check_duplicates_hashed(parser *P, const frame *f, size_t n, const char *at,
                                   int *merged) {
  value *e = P->stk + f->start;
  uint32_t local[256], *slot = local;
  size_t size = 16;
  while (size < 2 * n) size *= 2;
  if (size > 256) {
    slot = malloc(size * sizeof *slot);
    if (!slot) return FAIL_BETWEEN(P, at, "out of memory");
  }
  memset(slot, 0xff, size * sizeof *slot);
  int rc = 0;
  for (size_t j = 0; j < n && rc == 0; j++) {
    size_t h = (size_t)key_hash(&e[2 * j]) & (size - 1);
    while (slot[h] != UINT32_MAX) {
      if (key_eq(&e[2 * slot[h]], &e[2 * j])) {
        if (P->dup_last_wins) {
          merge_dup(e, slot[h], j);
          *merged = 1;
        } else {
          rc = report_dup(P, f, slot[h], j);
        }
        break;
      }
      h = (h + 1) & (size - 1);
    }
    if (rc == 0 && slot[h] == UINT32_MAX) slot[h] = (uint32_t)j;
  }
  if (slot != local) free(slot);
  return rc;
}

/* Fails when two keys of the object (entries at stk[f->start], n of them)
 * are equal, or, in last-wins mode, merges them and compacts the object
 * (*pn becomes the number of distinct keys). */
static int check_duplicates(parser *P, const frame *f, size_t *pn, const char *at) {
  value *e = P->stk + f->start; /* e[2i] is key i */
  size_t n = *pn;
  int merged = 0;
  if (n <= 8) {
    for (size_t j = 1; j < n; j++)
      for (size_t i = 0; i < j; i++)
        if (e[2 * i].kind == V_STRING && key_eq(&e[2 * i], &e[2 * j])) {
          if (!P->dup_last_wins) return report_dup(P, f, i, j);
          merge_dup(e, i, j);
          merged = 1;
          break;
        }
  } else {
    int rc = check_duplicates_hashed(P, f, n, at, &merged);
    if (rc != 0) return rc;
  }
  if (merged) {
    size_t w = 0;
    for (size_t r = 0; r < n; r++) {
      if (e[2 * r].kind != V_STRING) continue;
      e[2 * w] = e[2 * r];
      e[2 * w + 1] = e[2 * r + 1];
      w++;
    }
    *pn = w;
  }
  return 0;
}

/* arena_alloc's fast path, inline (the parser allocates once a container):
 * the same alignment (16 bytes from 16 bytes up, else 8), byte accounting
 * and limit; anything else — a new chunk, the limit — is arena_alloc's. */
static inline void *json_alloc(arena *a, size_t size) {
  if (a->ptr && (!a->limit || (size <= a->limit && a->used <= a->limit - size))) {
    uintptr_t al = size >= 16 ? 16 : 8;
    char *p = (char *)(((uintptr_t)a->ptr + al - 1) & ~(al - 1));
    if (p <= a->end && (size_t)(a->end - p) >= size) {
      a->used += size;
      a->ptr = p + size;
      return p;
    }
  }
  return arena_alloc(a, size);
}

/* Closes the innermost container (its closing bracket is at `at`): moves its
 * items into the arena and leaves the container value on the scratch stack. */
static int close_container(parser *P, const char *at) {
  frame *f = &P->fr[P->nfr - 1];
  size_t n = P->nstk - f->start;
  value v;
  if (f->is_map) {
    n /= 2;
    if (n > UINT32_MAX) return FAIL_BETWEEN(P, at, "more than 2^32-1 members in one object");
    if (check_duplicates(P, f, &n, at) != 0) return -1;
    map_entry *e = NULL;
    if (n) {
      e = json_alloc(P->a, n * sizeof *e);
      if (!e) return FAIL_BETWEEN(P, at, "out of memory (arena limit reached)");
      memcpy(e, P->stk + f->start, n * sizeof *e);
    }
    v = value_map(e, (uint32_t)n);
    P->nkoff = f->key_start;
  } else {
    if (n > UINT32_MAX) return FAIL_BETWEEN(P, at, "more than 2^32-1 items in one array");
    value *items = NULL;
    if (n) {
      items = json_alloc(P->a, n * sizeof *items);
      if (!items) return FAIL_BETWEEN(P, at, "out of memory (arena limit reached)");
      memcpy(items, P->stk + f->start, n * sizeof *items);
    }
    v = value_list(items, (uint32_t)n);
  }
  P->nstk = f->start;
  P->nfr--;
  P->stk[P->nstk++] = v; /* reserve_slot kept this slot free when it opened */
  return 0;
}

/* ---- the main loop ---- */

static inline const char *skip_ws(const char *p, const char *end) {
  if (p < end && (unsigned char)*p > ' ') return p; /* compact JSON */
  while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
  return p;
}

/* Is the literal `word` at p, ending where a value may end ("truex" is not
 * true followed by garbage, it is not a literal at all)? */
static int match_word(const char *p, const char *end, const char *word, size_t n) {
  if ((size_t)(end - p) < n || memcmp(p, word, n) != 0) return 0;
  if (end - p == (ptrdiff_t)n) return 1;
  char c = p[n];
  return !(((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || is_digit(c) || c == '_');
}

/* Keeps a free scratch slot so that a container closing at any depth can
 * put its value where its items started. */
static inline int reserve_slot(parser *P, const char *at) {
  if (P->nstk < P->capstk) return 0;
  value *q = grow(P, P->stk, &P->capstk, sizeof(value), P->stk0, at);
  if (!q) return -1;
  P->stk = q;
  return 0;
}

static int parse(parser *P, value *out) {
  const char *p = P->buf, *end = P->end;
  char what[48];
  value v;

next_value:
  p = skip_ws(p, end);
  if (p == end) return FAIL(P, p, "unexpected end of input, expected a value");
  switch (*p) {
    case '{':
    case '[': {
      int is_map = *p == '{';
      if (reserve_slot(P, p) != 0 || push_frame(P, is_map, p) != 0) return -1;
      p = skip_ws(p + 1, end);
      if (p < end && *p == (is_map ? '}' : ']')) {
        if (close_container(P, p) != 0) return -1;
        p++;
        goto after_value;
      }
      if (is_map) goto next_key;
      goto next_value;
    }
    case '"':
      if (read_string(P, &p, &v) != 0) return -1;
      break;
    case 't':
      if (!match_word(p, end, "true", 4)) goto bad_word;
      v = value_bool(true);
      p += 4;
      break;
    case 'f':
      if (!match_word(p, end, "false", 5)) goto bad_word;
      v = value_bool(false);
      p += 5;
      break;
    case 'n':
      if (!match_word(p, end, "null", 4)) goto bad_word;
      v = value_null();
      p += 4;
      break;
    case 'N':
      if (!match_word(p, end, "NaN", 3)) goto bad_word;
      if (!P->lenient) return FAIL(P, p, "NaN is not JSON (accepted only in lenient mode)");
      v = value_double(NAN);
      p += 3;
      break;
    case 'I':
      if (!match_word(p, end, "Infinity", 8)) goto bad_word;
      if (!P->lenient) return FAIL(P, p, "Infinity is not JSON (accepted only in lenient mode)");
      v = value_double(INFINITY);
      p += 8;
      break;
    case '-':
      if (match_word(p, end, "-Infinity", 9)) {
        if (!P->lenient) return FAIL(P, p, "-Infinity is not JSON (accepted only in lenient mode)");
        v = value_double(-INFINITY);
        p += 9;
        break;
      }
      /* fall through */
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
      if (read_number(P, &p, &v) != 0) return -1;
      break;
    default:
    bad_word:
      return FAIL(P, p, "unexpected %s, expected a value", describe(p, end, what));
  }
  if (push_value(P, v, p) != 0) return -1;

after_value:
  if (P->nfr == 0) {
    p = skip_ws(p, end);
    if (p != end)
      return FAIL_BETWEEN(P, p, "unexpected %s after the JSON value", describe(p, end, what));
    *out = P->stk[0];
    return 0;
  }
  p = skip_ws(p, end);
  if (P->fr[P->nfr - 1].is_map) {
    if (p < end && *p == ',') {
      p = skip_ws(p + 1, end);
      goto next_key;
    }
    if (p < end && *p == '}') {
      if (close_container(P, p) != 0) return -1;
      p++;
      goto after_value;
    }
    return FAIL_BETWEEN(P, p, "expected ',' or '}' after an object member, found %s",
                        describe(p, end, what));
  }
  if (p < end && *p == ',') {
    p++;
    goto next_value;
  }
  if (p < end && *p == ']') {
    if (close_container(P, p) != 0) return -1;
    p++;
    goto after_value;
  }
  return FAIL_BETWEEN(P, p, "expected ',' or ']' after an array element, found %s",
                      describe(p, end, what));

next_key:
  /* p is at the first non-blank byte where a member must start. */
  if (p == end || *p != '"')
    return FAIL_BETWEEN(P, p, "expected a string key, found %s", describe(p, end, what));
  if (P->nkoff == P->capkoff) {
    size_t *q = grow(P, P->koff, &P->capkoff, sizeof(size_t), P->koff0, p);
    if (!q) return -1;
    P->koff = q;
  }
  P->koff[P->nkoff++] = (size_t)(p - P->buf);
  if (read_string(P, &p, &v) != 0) return -1;
  if (push_value(P, v, p) != 0) return -1;
  p = skip_ws(p, end);
  if (p == end || *p != ':')
    return FAIL(P, p, "expected ':' after the key, found %s", describe(p, end, what));
  p++;
  goto next_value;
}

int json_parse(arena *a, const char *buf, size_t len, const json_opts *opts, value *out,
               json_error *err) {
  parser P;
  P.a = a;
  P.buf = buf;
  P.end = buf + len;
  P.max_depth = opts && opts->max_depth ? opts->max_depth : JSON_DEFAULT_DEPTH;
  P.lenient = opts ? opts->lenient : 0;
  P.dup_last_wins = opts ? opts->duplicates == JSON_DUP_LAST_WINS : 0;
  P.err = err;
  P.stk = P.stk0;
  P.nstk = 0;
  P.capstk = sizeof P.stk0 / sizeof P.stk0[0];
  P.koff = P.koff0;
  P.nkoff = 0;
  P.capkoff = sizeof P.koff0 / sizeof P.koff0[0];
  P.fr = P.fr0;
  P.nfr = 0;
  P.capfr = sizeof P.fr0 / sizeof P.fr0[0];
  size_t max_size = opts && opts->max_size ? opts->max_size : JSON_DEFAULT_SIZE;
  if (len > max_size) {
    P.end = buf + max_size; /* report the place where the limit was crossed */
    return FAIL_BETWEEN(&P, P.end, "input of %zu bytes is over the size limit of %zu bytes", len,
                        max_size);
  }
  int rc = parse(&P, out);
  parser_free(&P);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Duplicate keys of a map built elsewhere                             */
/* ------------------------------------------------------------------ */

/* The same check as the reader's (key_hash, key_eq), for a map whose
 * entries were made without JSON text: a context built from values. */
int json_find_duplicate(const map_entry *e, size_t n, size_t *first, size_t *dup) {
  if (n <= 8) {
    for (size_t j = 1; j < n; j++)
      for (size_t i = 0; i < j; i++)
        if (key_eq(&e[i].key, &e[j].key)) {
          *first = i;
          *dup = j;
          return 1;
        }
    return 0;
  }
  uint32_t local[256], *slot = local;
  size_t size = 16;
  while (size < 2 * n) size *= 2;
  if (size > 256) {
    if (size > SIZE_MAX / sizeof *slot || !(slot = malloc(size * sizeof *slot))) return -1;
  }
  memset(slot, 0xff, size * sizeof *slot);
  int found = 0;
  for (size_t j = 0; j < n && !found; j++) {
    size_t h = (size_t)key_hash(&e[j].key) & (size - 1);
    while (slot[h] != UINT32_MAX) {
      if (key_eq(&e[slot[h]].key, &e[j].key)) {
        *first = slot[h];
        *dup = j;
        found = 1;
        break;
      }
      h = (h + 1) & (size - 1);
    }
    if (!found) slot[h] = (uint32_t)j;
  }
  if (slot != local) free(slot);
  return found;
}
