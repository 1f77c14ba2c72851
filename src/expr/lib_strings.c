/* lib_strings.c — the CEL strings extension (cel-go ext/strings.go, latest
 * version): charAt, indexOf, lastIndexOf, lowerAscii, upperAscii, replace,
 * split, substring, trim, join, reverse, strings.quote and format.
 *
 * Indexes count Unicode code points, never bytes. Strings are valid UTF-8
 * (the lexer and the JSON reader guarantee it), which makes a byte-level
 * substring search a code point search: a match can only start on a
 * character boundary. Pure-ASCII strings (VF_ASCII) skip the code point
 * walks altogether.
 *
 * Results that are pieces of an input (substring, charAt, split, trim) point
 * into the input instead of copying it: values are immutable. New text is
 * built in the arena.
 *
 * format() follows cel-go's second formatter (the one the conformance suite
 * checks): %s prints any value (lists as [a, b], maps as {k: v} sorted by
 * the printed key, doubles in plain notation, NaN/Infinity spelled out),
 * %d takes ints, uints and doubles, %f/%e take numbers with an optional
 * precision (%.3f, default 6, at most FORMAT_MAX_PRECISION), %b ints, uints
 * and bools, %x/%X ints, uints, strings and bytes, %o ints and uints; %% is a
 * percent sign. A clause without an argument left, an unknown verb or a
 * value the verb does not take is an error. */
#define _GNU_SOURCE /* memmem */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtoa.h"
#include "core/timefmt.h"
#include "core/utf8.h"
#include "expr/lib.h"

#define FORMAT_MAX_PRECISION 100

#define NO_OVERLOAD VALUE_ERR("no such overload")
#define COST_ERROR VALUE_ERR("cost limit exceeded")
#define OOM_ERROR VALUE_ERR("out of memory")

/* ------------------------------------------------------ string builder */

typedef struct sbuf {
  arena *a;
  char *p;
  size_t len, cap;
  int oom;
} sbuf;

static void sb_init(sbuf *b, arena *a, size_t hint) {
  b->a = a;
  b->len = 0;
  b->oom = 0;
  b->cap = hint < 16 ? 16 : hint;
  b->p = arena_alloc(a, b->cap);
  if (!b->p) b->oom = 1, b->cap = 0;
}

static int sb_grow(sbuf *b, size_t need) {
  if (b->oom) return -1;
  if (b->len + need <= b->cap) return 0;
  size_t cap = b->cap * 2;
  while (cap < b->len + need) cap *= 2;
  char *p = arena_realloc(b->a, b->p, b->cap, cap);
  if (!p) {
    b->oom = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (n == 0 || sb_grow(b, n)) return;
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

static void sb_putc(sbuf *b, char c) {
  if (sb_grow(b, 1)) return;
  b->p[b->len++] = c;
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static value sb_value(sbuf *b) {
  if (b->oom) return OOM_ERROR;
  int ascii;
  utf8_validate(b->p, b->len, &ascii);
  value v = value_str(b->p, (uint32_t)b->len);
  if (ascii) v.flags |= VF_ASCII;
  return v;
}

/* --------------------------------------------------- code point helpers */

static int is_ascii(const value *s) { return (s->flags & VF_ASCII) != 0; }

static int is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

/* Length in bytes of the UTF-8 sequence that starts with c (1 for a stray byte). */
static size_t seq_len(unsigned char c) {
  if (c < 0xC0) return 1;
  if (c < 0xE0) return 2;
  if (c < 0xF0) return 3;
  return 4;
}

/* Length of the character at byte pos, never past the end (strings are valid
 * UTF-8, but a broken one must not make us read beyond it). */
static size_t char_len(const value *s, size_t pos) {
  size_t l = seq_len((unsigned char)s->s[pos]);
  return l <= s->n - pos ? l : s->n - pos;
}

static size_t cp_count(const value *s) { return value_str_codepoints(s); }

/* Byte offset of code point number idx (0 <= idx <= count), or SIZE_MAX when
 * idx is past the end. */
static size_t cp_to_byte(const value *s, int64_t idx) {
  if (idx < 0) return SIZE_MAX;
  if (is_ascii(s)) return (uint64_t)idx <= s->n ? (size_t)idx : SIZE_MAX;
  size_t b = 0;
  for (int64_t k = 0; k < idx; k++) {
    if (b >= s->n) return SIZE_MAX;
    b += char_len(s, b);
  }
  return b <= s->n ? b : SIZE_MAX;
}

/* Code point index of byte offset b (on a boundary). */
static int64_t byte_to_cp(const value *s, size_t b) {
  if (is_ascii(s)) return (int64_t)b;
  return (int64_t)utf8_count(s->s, b);
}

/* s as a plain string: an IP or CIDR tag (lib_net.c) does not survive string
 * operations, only the ASCII flag does. */
static value plain(const value *s) {
  value v = *s;
  v.flags &= VF_ASCII;
  return v;
}

static value slice(const value *s, size_t from, size_t to) {
  value v = value_str(s->s + from, (uint32_t)(to - from));
  v.flags = s->flags & VF_ASCII;
  return v;
}

static value index_error(eval_ctx *ctx, int64_t i) {
  return value_errorf(ctx->arena, "index out of range: %" PRId64, i);
}

/* ------------------------------------------------------------- charAt */

static value fn_char_at(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *s = &args[0];
  int64_t i = args[1].i;
  if (!eval_charge(ctx, s->n / 16 + 1)) return COST_ERROR;
  size_t b = cp_to_byte(s, i);
  if (b == SIZE_MAX) return index_error(ctx, i);
  if (b == s->n) return slice(s, b, b);
  return slice(s, b, b + char_len(s, b));
}

/* ---------------------------------------------------- indexOf / lastIndexOf */

/* First match of sub in s at or after byte `from`; SIZE_MAX when none. */
static size_t find_forward(const value *s, size_t from, const value *sub) {
  if (sub->n > s->n - from) return SIZE_MAX;
  const char *hit = memmem(s->s + from, s->n - from, sub->s, sub->n);
  return hit ? (size_t)(hit - s->s) : SIZE_MAX;
}

/* Last match of sub in s starting at or before byte `last`; SIZE_MAX when none. */
static size_t find_backward(const value *s, size_t last, const value *sub) {
  if (sub->n > s->n) return SIZE_MAX;
  size_t p = s->n - sub->n;
  if (p > last) p = last;
  for (;;) {
    if (!is_cont((unsigned char)s->s[p]) && memcmp(s->s + p, sub->s, sub->n) == 0) return p;
    if (p == 0) return SIZE_MAX;
    p--;
  }
}

static value fn_index_of(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *s = &args[0], *sub = &args[1];
  if (!eval_charge(ctx, s->n / 8 + 1)) return COST_ERROR;
  int64_t off = nargs > 2 ? args[2].i : 0;
  size_t from = 0;
  if (nargs > 2) {
    from = cp_to_byte(s, off);
    /* An empty search string may start at the very end; anything else must
     * start on a character of the string. */
    if (from == SIZE_MAX || (from == s->n && sub->n > 0)) return index_error(ctx, off);
  }
  if (sub->n == 0) return value_int(off);
  size_t hit = find_forward(s, from, sub);
  return value_int(hit == SIZE_MAX ? -1 : byte_to_cp(s, hit));
}

static value fn_last_index_of(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *s = &args[0], *sub = &args[1];
  if (!eval_charge(ctx, s->n / 4 + 1)) return COST_ERROR;
  if (nargs == 2) {
    if (sub->n == 0) return value_int((int64_t)cp_count(s));
    size_t hit = find_backward(s, s->n, sub);
    return value_int(hit == SIZE_MAX ? -1 : byte_to_cp(s, hit));
  }
  int64_t off = args[2].i;
  size_t last = cp_to_byte(s, off);
  if (last == SIZE_MAX || (last == s->n && sub->n > 0)) return index_error(ctx, off);
  if (sub->n == 0) return value_int(off);
  size_t hit = find_backward(s, last, sub);
  return value_int(hit == SIZE_MAX ? -1 : byte_to_cp(s, hit));
}

/* ------------------------------------------------------ ASCII case */

/* The high bit of each byte of w that is an ASCII letter of the case to
 * change ('A'..'Z' when lowering): eight bytes at once. Bytes >= 0x80 (parts
 * of other characters) never count; no carry crosses a byte, because each
 * sum stays below 0x100. */
static uint64_t case_marks(uint64_t w, int upper) {
  const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  const uint64_t lo = upper ? 'a' : 'A', hi = upper ? 'z' : 'Z';
  uint64_t h = w & ~highs;
  uint64_t ge_lo = h + ones * (0x80 - lo);
  uint64_t gt_hi = h + ones * (0x7f - hi);
  return ge_lo & ~gt_hi & ~w & highs;
}

static value change_case(eval_ctx *ctx, const value *s, int upper) {
  if (!eval_charge(ctx, s->n / 8 + 1)) return COST_ERROR;
  const char lo = upper ? 'a' : 'A', hi = upper ? 'z' : 'Z';
  size_t i = 0, n = s->n;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s->s + i, 8);
    if (case_marks(w, upper)) break;
  }
  while (i < n && !(s->s[i] >= lo && s->s[i] <= hi)) i++;
  if (i == n) return plain(s); /* nothing to change */
  char *p = arena_memdup(ctx->arena, s->s, n);
  if (!p) return OOM_ERROR;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    w ^= case_marks(w, upper) >> 2; /* 0x80 >> 2 is the case bit, 0x20 */
    memcpy(p + i, &w, 8);
  }
  for (; i < n; i++)
    if (p[i] >= lo && p[i] <= hi) p[i] = (char)(p[i] ^ 0x20);
  value v = value_str(p, s->n);
  v.flags = s->flags & VF_ASCII;
  return v;
}

static value fn_lower_ascii(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  return change_case(ctx, &args[0], 0);
}

static value fn_upper_ascii(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  return change_case(ctx, &args[0], 1);
}

/* ------------------------------------------------------------ replace */

/* Go's strings.Replace: at most n replacements (all when n < 0); an empty
 * search string matches before every character and at the end. */
static value fn_replace(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *s = &args[0], *old = &args[1], *rep = &args[2];
  int64_t n = nargs > 3 ? args[3].i : -1;
  if (!eval_charge(ctx, s->n / 8 + 1)) return COST_ERROR;
  if (n == 0 || (old->n == rep->n && memcmp(old->s, rep->s, old->n) == 0)) return plain(s);
  sbuf b;
  sb_init(&b, ctx->arena, s->n + 16);
  size_t pos = 0;
  int64_t done = 0;
  if (old->n == 0) {
    for (;;) {
      if (n >= 0 && done >= n) break;
      sb_put(&b, rep->s, rep->n);
      done++;
      if (pos >= s->n) break;
      size_t l = char_len(s, pos);
      sb_put(&b, s->s + pos, l);
      pos += l;
    }
  } else {
    while (n < 0 || done < n) {
      size_t hit = find_forward(s, pos, old);
      if (hit == SIZE_MAX) break;
      sb_put(&b, s->s + pos, hit - pos);
      sb_put(&b, rep->s, rep->n);
      pos = hit + old->n;
      done++;
    }
  }
  if (done == 0) return plain(s);
  sb_put(&b, s->s + pos, s->n - pos);
  if (!eval_charge(ctx, b.len / 8)) return COST_ERROR;
  return sb_value(&b);
}

/* -------------------------------------------------------------- split */

/* Go's strings.SplitN: n == 0 gives [], n < 0 no limit, otherwise at most n
 * pieces with the rest of the string in the last one; an empty separator
 * splits between characters. */
static value fn_split(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *s = &args[0], *sep = &args[1];
  int64_t n = nargs > 2 ? args[2].i : -1;
  if (!eval_charge(ctx, s->n / 8 + 1)) return COST_ERROR;
  if (n == 0) return value_list(NULL, 0);
  uint64_t pieces;
  if (sep->n == 0) {
    pieces = cp_count(s);
  } else {
    pieces = 1;
    for (size_t pos = 0;;) {
      size_t hit = find_forward(s, pos, sep);
      if (hit == SIZE_MAX) break;
      pieces++;
      pos = hit + sep->n;
    }
  }
  if (n > 0 && (uint64_t)n < pieces) pieces = (uint64_t)n;
  if (!eval_charge(ctx, pieces)) return COST_ERROR;
  value *items = pieces ? arena_alloc(ctx->arena, pieces * sizeof(value)) : NULL;
  if (pieces && !items) return OOM_ERROR;
  size_t pos = 0;
  for (uint64_t k = 0; k < pieces; k++) {
    if (k == pieces - 1) {
      items[k] = slice(s, pos, s->n);
    } else if (sep->n == 0) {
      size_t l = char_len(s, pos);
      items[k] = slice(s, pos, pos + l);
      pos += l;
    } else {
      size_t hit = find_forward(s, pos, sep);
      items[k] = slice(s, pos, hit);
      pos = hit + sep->n;
    }
  }
  return value_list(items, (uint32_t)pieces);
}

/* ---------------------------------------------------------- substring */

static value fn_substring(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *s = &args[0];
  int64_t start = args[1].i;
  if (!eval_charge(ctx, s->n / 16 + 1)) return COST_ERROR;
  if (nargs == 2) {
    size_t b = cp_to_byte(s, start);
    if (b == SIZE_MAX) return index_error(ctx, start);
    return slice(s, b, s->n);
  }
  int64_t end = args[2].i;
  if (start > end)
    return value_errorf(ctx->arena, "invalid substring range. start: %" PRId64 ", end: %" PRId64,
                        start, end);
  size_t b = cp_to_byte(s, start);
  if (b == SIZE_MAX) return index_error(ctx, start);
  size_t e = cp_to_byte(s, end);
  if (e == SIZE_MAX) return index_error(ctx, end);
  return slice(s, b, e);
}

/* --------------------------------------------------------------- trim */

/* Unicode White_Space, as Go's unicode.IsSpace (zero-width spaces excluded). */
static int is_space_cp(uint32_t c) {
  switch (c) {
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case ' ':
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return 1;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

static value fn_trim(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *s = &args[0];
  const unsigned char *p = (const unsigned char *)s->s;
  size_t from = 0, to = s->n;
  while (from < to) {
    uint32_t c;
    int l = utf8_decode(p + from, to - from, &c);
    if (l == 0 || !is_space_cp(c)) break;
    from += (size_t)l;
  }
  while (to > from) {
    size_t start = to - 1;
    while (start > from && is_cont(p[start])) start--;
    uint32_t c;
    int l = utf8_decode(p + start, to - start, &c);
    if (l == 0 || start + (size_t)l != to || !is_space_cp(c)) break;
    to = start;
  }
  return slice(s, from, to);
}

/* --------------------------------------------------------------- join */

static value fn_join(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *list = &args[0];
  value empty = value_str("", 0);
  const value *sep = nargs > 1 ? &args[1] : &empty;
  size_t total = 0;
  for (uint32_t i = 0; i < list->n; i++) {
    const value *e = &list->items[i];
    if (e->kind != V_STRING)
      return value_errorf(ctx->arena, "join: list element %u is a %s, not a string", i,
                          value_kind_name((value_kind)e->kind));
    total += e->n + sep->n;
  }
  if (!eval_charge(ctx, total / 8 + 1)) return COST_ERROR;
  if (list->n == 1) return plain(&list->items[0]);
  sbuf b;
  sb_init(&b, ctx->arena, total + 1);
  for (uint32_t i = 0; i < list->n; i++) {
    if (i) sb_put(&b, sep->s, sep->n);
    sb_put(&b, list->items[i].s, list->items[i].n);
  }
  return sb_value(&b);
}

/* ------------------------------------------------------------ reverse */

static value fn_reverse(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *s = &args[0];
  if (!eval_charge(ctx, s->n / 8 + 1)) return COST_ERROR;
  if (s->n < 2) return plain(s);
  char *out = arena_alloc(ctx->arena, s->n);
  if (!out) return OOM_ERROR;
  size_t w = s->n;
  for (size_t pos = 0; pos < s->n;) {
    size_t l = char_len(s, pos);
    w -= l;
    memcpy(out + w, s->s + pos, l);
    pos += l;
  }
  value v = value_str(out, s->n);
  v.flags = s->flags & VF_ASCII;
  return v;
}

/* -------------------------------------------------------------- quote */

/* Appends s, replacing each invalid UTF-8 sequence by U+FFFD. */
static void put_utf8_sanitized(sbuf *b, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0, run = 0;
  while (i < n) {
    uint32_t c;
    int l = p[i] < 0x80 ? 1 : utf8_decode(p + i, n - i, &c);
    if (l) {
      i += (size_t)l;
      continue;
    }
    sb_put(b, s + run, i - run);
    sb_put(b, "\xEF\xBF\xBD", 3);
    i++;
    run = i;
  }
  sb_put(b, s + run, n - run);
}

static value fn_quote(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *s = &args[0];
  if (!eval_charge(ctx, s->n / 8 + 1)) return COST_ERROR;
  sbuf b;
  sb_init(&b, ctx->arena, s->n + s->n / 8 + 4);
  sb_putc(&b, '"');
  size_t run = 0;
  for (size_t i = 0; i < s->n; i++) {
    const char *esc;
    switch (s->s[i]) {
      case '\a':
        esc = "\\a";
        break;
      case '\b':
        esc = "\\b";
        break;
      case '\f':
        esc = "\\f";
        break;
      case '\n':
        esc = "\\n";
        break;
      case '\r':
        esc = "\\r";
        break;
      case '\t':
        esc = "\\t";
        break;
      case '\v':
        esc = "\\v";
        break;
      case '\\':
        esc = "\\\\";
        break;
      case '"':
        esc = "\\\"";
        break;
      default:
        continue;
    }
    put_utf8_sanitized(&b, s->s + run, i - run);
    sb_puts(&b, esc);
    run = i + 1;
  }
  put_utf8_sanitized(&b, s->s + run, s->n - run);
  sb_putc(&b, '"');
  return sb_value(&b);
}

/* ------------------------------------------------------------- format */

/* Plain (never exponent) shortest round-trip text of a finite double, as Go's
 * strconv.FormatFloat(d, 'f', -1, 64): 1e+21 -> "1000000000000000000000". */
static void put_double_plain(sbuf *b, double d) {
  char t[32];
  size_t n = dtoa_shortest(d, t);
  const char *e = memchr(t, 'e', n);
  if (!e) {
    sb_put(b, t, n);
    return;
  }
  char digits[24];
  int nd = 0;
  const char *p = t;
  if (*p == '-') sb_putc(b, *p++);
  for (; p < e; p++)
    if (*p >= '0' && *p <= '9') digits[nd++] = *p;
  int dp = atoi(e + 1) + 1; /* d = 0.DIGITS x 10^dp */
  if (dp <= 0) {
    sb_put(b, "0.", 2);
    for (int k = 0; k < -dp; k++) sb_putc(b, '0');
    sb_put(b, digits, (size_t)nd);
  } else if (dp >= nd) {
    sb_put(b, digits, (size_t)nd);
    for (int k = nd; k < dp; k++) sb_putc(b, '0');
  } else {
    sb_put(b, digits, (size_t)dp);
    sb_putc(b, '.');
    sb_put(b, digits + dp, (size_t)(nd - dp));
  }
}

/* NaN and the infinities as format() spells them; returns 1 when d was one. */
static int put_nonfinite(sbuf *b, double d) {
  if (isnan(d))
    sb_puts(b, "NaN");
  else if (isinf(d))
    sb_puts(b, d > 0 ? "Infinity" : "-Infinity");
  else
    return 0;
  return 1;
}

static void put_timestamp(sbuf *b, const value *v) {
  char t[48];
  size_t n = timefmt_format_rfc3339(v->i, value_nanos(*v), t);
  const char *dot = memchr(t, '.', n);
  if (dot) { /* Go's RFC3339Nano: no trailing zeros in the fraction */
    size_t end = n - 1;
    while (t[end - 1] == '0') end--;
    if (t[end - 1] == '.') end--;
    t[end] = 'Z';
    n = end + 1;
  }
  sb_put(b, t, n);
}

typedef struct fmt_entry {
  size_t key_off, key_len, val_off, val_len;
} fmt_entry;

static int put_value(eval_ctx *ctx, sbuf *b, const value *v, const char **bad);

/* Formats v into a fresh stretch of b and reports where it landed. */
static int put_part(eval_ctx *ctx, sbuf *b, const value *v, size_t *off, size_t *len,
                    const char **bad) {
  *off = b->len;
  int rc = put_value(ctx, b, v, bad);
  *len = b->len - *off;
  return rc;
}

static int put_map(eval_ctx *ctx, sbuf *b, const value *v, const char **bad) {
  fmt_entry *es = v->n ? arena_alloc(ctx->arena, v->n * sizeof *es) : NULL;
  if (v->n && !es) return -2;
  /* Print every key and value into a scratch buffer, sort by key text, then
   * copy out in order. */
  sbuf tmp;
  sb_init(&tmp, ctx->arena, 64);
  for (uint32_t i = 0; i < v->n; i++) {
    int rc = put_part(ctx, &tmp, &v->entries[i].key, &es[i].key_off, &es[i].key_len, bad);
    if (!rc) rc = put_part(ctx, &tmp, &v->entries[i].val, &es[i].val_off, &es[i].val_len, bad);
    if (rc) return rc;
  }
  if (tmp.oom) return -2;
  /* Insertion sort: stable, and maps printed by format() are small. */
  for (uint32_t i = 1; i < v->n; i++) {
    fmt_entry x = es[i];
    uint32_t j = i;
    while (j > 0) {
      const fmt_entry *y = &es[j - 1];
      size_t m = x.key_len < y->key_len ? x.key_len : y->key_len;
      int c = memcmp(tmp.p + x.key_off, tmp.p + y->key_off, m);
      if (c > 0 || (c == 0 && x.key_len >= y->key_len)) break;
      es[j] = es[j - 1];
      j--;
    }
    es[j] = x;
  }
  sb_putc(b, '{');
  for (uint32_t i = 0; i < v->n; i++) {
    if (i) sb_put(b, ", ", 2);
    sb_put(b, tmp.p + es[i].key_off, es[i].key_len);
    sb_put(b, ": ", 2);
    sb_put(b, tmp.p + es[i].val_off, es[i].val_len);
  }
  sb_putc(b, '}');
  return 0;
}

/* %s of any value. Returns 0, -1 (unsupported kind, *bad names it) or -2 (out
 * of memory / cost). */
static int put_value(eval_ctx *ctx, sbuf *b, const value *v, const char **bad) {
  char t[40];
  switch (v->kind) {
    case V_NULL:
      sb_puts(b, "null");
      return 0;
    case V_BOOL:
      sb_puts(b, v->b ? "true" : "false");
      return 0;
    case V_INT:
      sb_put(b, t, (size_t)sprintf(t, "%" PRId64, v->i));
      return 0;
    case V_UINT:
      sb_put(b, t, (size_t)sprintf(t, "%" PRIu64, v->u));
      return 0;
    case V_DOUBLE:
      if (!put_nonfinite(b, v->d)) put_double_plain(b, v->d);
      return 0;
    case V_STRING:
      sb_put(b, v->s, v->n);
      return 0;
    case V_BYTES:
      put_utf8_sanitized(b, v->s, v->n);
      return 0;
    case V_TIMESTAMP:
      put_timestamp(b, v);
      return 0;
    case V_DURATION:
      sb_put(b, t, timefmt_format_duration(v->i, value_nanos(*v), t));
      return 0;
    case V_TYPE:
      sb_puts(b, value_kind_name((value_kind)v->n));
      return 0;
    case V_LIST:
      if (!eval_charge(ctx, v->n)) return -2;
      sb_putc(b, '[');
      for (uint32_t i = 0; i < v->n; i++) {
        if (i) sb_put(b, ", ", 2);
        int rc = put_value(ctx, b, &v->items[i], bad);
        if (rc) return rc;
      }
      sb_putc(b, ']');
      return 0;
    case V_MAP:
      if (!eval_charge(ctx, v->n * 4)) return -2;
      return put_map(ctx, b, v, bad);
    default:
      *bad = value_kind_name((value_kind)v->kind);
      return -1;
  }
}

/* Integer in base 2, 8 or 16, with a '-' for negative ints (as Go prints). */
static void put_radix(sbuf *b, const value *v, unsigned base, int upper) {
  const char *dig = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  uint64_t u;
  if (v->kind == V_INT && v->i < 0) {
    sb_putc(b, '-');
    u = (uint64_t)0 - (uint64_t)v->i;
  } else {
    u = v->kind == V_INT ? (uint64_t)v->i : v->u;
  }
  char t[65];
  int n = 0;
  do {
    t[n++] = dig[u % base];
    u /= base;
  } while (u);
  while (n) sb_putc(b, t[--n]);
}

static void put_hex_bytes(sbuf *b, const char *s, size_t n, int upper) {
  const char *dig = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    sb_putc(b, dig[c >> 4]);
    sb_putc(b, dig[c & 15]);
  }
}

/* %f / %e of a number with `prec` digits, with a '.' whatever the locale. */
static void put_fixed_or_sci(sbuf *b, double d, int prec, char verb) {
  if (put_nonfinite(b, d)) return;
  int n = verb == 'f' ? snprintf(NULL, 0, "%.*f", prec, d) : snprintf(NULL, 0, "%.*e", prec, d);
  if (n < 0 || sb_grow(b, (size_t)n + 1)) return;
  if (verb == 'f')
    snprintf(b->p + b->len, (size_t)n + 1, "%.*f", prec, d);
  else
    snprintf(b->p + b->len, (size_t)n + 1, "%.*e", prec, d);
  for (int i = 0; i < n; i++) {
    char c = b->p[b->len + (size_t)i];
    if (!(c >= '0' && c <= '9') && c != '-' && c != '+' && c != 'e') b->p[b->len + (size_t)i] = '.';
  }
  b->len += (size_t)n;
}

static double number_as_double(const value *v) {
  return v->kind == V_INT ? (double)v->i : v->kind == V_UINT ? (double)v->u : v->d;
}

static int is_number(const value *v) {
  return v->kind == V_INT || v->kind == V_UINT || v->kind == V_DOUBLE;
}

static value clause_error(eval_ctx *ctx, const char *what, const value *v) {
  return value_errorf(ctx->arena, "error during formatting: %s, was given %s", what,
                      value_kind_name((value_kind)v->kind));
}

/* Formats one clause (verb with precision) of argument v into b. */
static value format_clause(eval_ctx *ctx, sbuf *b, char verb, int prec, const value *v) {
  switch (verb) {
    case 's': {
      const char *bad = NULL;
      int rc = put_value(ctx, b, v, &bad);
      if (rc == -2) return b->oom ? OOM_ERROR : COST_ERROR;
      if (rc == -1)
        return value_errorf(
            ctx->arena, "error during formatting: string clause cannot print a value of type %s",
            bad);
      return value_null();
    }
    case 'd':
      if (v->kind == V_DOUBLE) {
        if (!put_nonfinite(b, v->d)) put_double_plain(b, v->d);
      } else if (v->kind == V_INT || v->kind == V_UINT) {
        put_radix(b, v, 10, 0);
      } else {
        return clause_error(ctx, "decimal clause can only be used on ints, uints, and doubles", v);
      }
      return value_null();
    case 'f':
    case 'e':
      if (!is_number(v))
        return clause_error(ctx,
                            verb == 'f'
                                ? "fixed-point clause can only be used on ints, uints, and doubles"
                                : "scientific clause can only be used on ints, uints, and doubles",
                            v);
      put_fixed_or_sci(b, number_as_double(v), prec, verb);
      return value_null();
    case 'b':
      if (v->kind == V_BOOL)
        sb_putc(b, v->b ? '1' : '0');
      else if (v->kind == V_INT || v->kind == V_UINT)
        put_radix(b, v, 2, 0);
      else
        return clause_error(ctx, "only ints, uints, and bools can be formatted as binary", v);
      return value_null();
    case 'o':
      if (v->kind != V_INT && v->kind != V_UINT)
        return clause_error(ctx, "octal clause can only be used on ints and uints", v);
      put_radix(b, v, 8, 0);
      return value_null();
    case 'x':
    case 'X': {
      int upper = verb == 'X';
      if (v->kind == V_INT || v->kind == V_UINT)
        put_radix(b, v, 16, upper);
      else if (v->kind == V_STRING || v->kind == V_BYTES)
        put_hex_bytes(b, v->s, v->n, upper);
      else
        return clause_error(ctx, "only ints, uints, bytes, and strings can be formatted as hex", v);
      return value_null();
    }
    default:
      return value_errorf(
          ctx->arena, "could not parse formatting clause: unrecognized formatting clause \"%c\"",
          verb);
  }
}

static value fn_format(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  const value *f = &args[0], *list = &args[1];
  if (!eval_charge(ctx, f->n / 8 + 1)) return COST_ERROR;
  sbuf b;
  sb_init(&b, ctx->arena, f->n + 16);
  uint32_t argi = 0;
  size_t i = 0;
  while (i < f->n) {
    char c = f->s[i];
    if (c != '%') {
      size_t run = i;
      while (i < f->n && f->s[i] != '%') i++;
      sb_put(&b, f->s + run, i - run);
      continue;
    }
    if (i + 1 < f->n && f->s[i + 1] == '%') {
      sb_putc(&b, '%');
      i += 2;
      continue;
    }
    if (argi >= list->n) return value_errorf(ctx->arena, "index %u out of range", argi);
    i++;
    if (i >= f->n) return VALUE_ERR("could not parse formatting clause: unexpected end of string");
    int prec = 6;
    if (f->s[i] == '.') {
      i++;
      size_t start = i;
      long p = 0;
      while (i < f->n && f->s[i] >= '0' && f->s[i] <= '9') {
        if (p <= FORMAT_MAX_PRECISION) p = p * 10 + (f->s[i] - '0');
        i++;
      }
      if (i >= f->n)
        return VALUE_ERR(
            "could not parse formatting clause: could not find end of precision specifier");
      if (i == start)
        return VALUE_ERR("could not parse formatting clause: missing precision after '.'");
      if (p > FORMAT_MAX_PRECISION)
        return value_errorf(ctx->arena,
                            "could not parse formatting clause: precision exceeds the maximum "
                            "of %d",
                            FORMAT_MAX_PRECISION);
      prec = (int)p;
    }
    /* The verb is one character; report a multi-byte one whole. */
    unsigned char vc = (unsigned char)f->s[i];
    if (vc >= 0x80) {
      size_t l = seq_len(vc);
      if (i + l > f->n) l = f->n - i;
      return value_errorf(ctx->arena,
                          "could not parse formatting clause: unrecognized formatting clause "
                          "\"%.*s\"",
                          (int)l, f->s + i);
    }
    value r = format_clause(ctx, &b, (char)vc, prec, &list->items[argi]);
    if (r.kind == V_ERROR) return r;
    i++;
    argi++;
    if (b.oom) return OOM_ERROR;
  }
  if (!eval_charge(ctx, b.len / 8)) return COST_ERROR;
  return sb_value(&b);
}

/* ------------------------------------------------------------- table */

#define S V_STRING
#define I V_INT

const builtin lib_strings_builtins[] = {
    {"charAt", 1, 2, {S, I}, fn_char_at, NULL, NULL, 0},
    {"indexOf", 1, 2, {S, S}, fn_index_of, NULL, NULL, 0},
    {"indexOf", 1, 3, {S, S, I}, fn_index_of, NULL, NULL, 0},
    {"lastIndexOf", 1, 2, {S, S}, fn_last_index_of, NULL, NULL, 0},
    {"lastIndexOf", 1, 3, {S, S, I}, fn_last_index_of, NULL, NULL, 0},
    {"lowerAscii", 1, 1, {S}, fn_lower_ascii, NULL, NULL, 0},
    {"upperAscii", 1, 1, {S}, fn_upper_ascii, NULL, NULL, 0},
    {"replace", 1, 3, {S, S, S}, fn_replace, NULL, NULL, 0},
    {"replace", 1, 4, {S, S, S, I}, fn_replace, NULL, NULL, 0},
    {"split", 1, 2, {S, S}, fn_split, NULL, NULL, 0},
    {"split", 1, 3, {S, S, I}, fn_split, NULL, NULL, 0},
    {"substring", 1, 2, {S, I}, fn_substring, NULL, NULL, 0},
    {"substring", 1, 3, {S, I, I}, fn_substring, NULL, NULL, 0},
    {"trim", 1, 1, {S}, fn_trim, NULL, NULL, 0},
    {"join", 1, 1, {V_LIST}, fn_join, NULL, NULL, 0},
    {"join", 1, 2, {V_LIST, S}, fn_join, NULL, NULL, 0},
    {"reverse", 1, 1, {S}, fn_reverse, NULL, NULL, 0},
    {"strings.quote", 0, 1, {S}, fn_quote, NULL, NULL, 0},
    {"format", 1, 2, {S, V_LIST}, fn_format, NULL, NULL, 0},
    {0},
};
