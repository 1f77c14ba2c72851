/* json_write.c — verdict's JSON writer (contract in json.h; the reader is
 * json_read.c): the one place JSON text is written.
 *
 * Two layers. json_write turns a value into compact text, iteratively (deep
 * values cost no C stack); strings are copied in plain runs found as the
 * reader finds them (json_scan.h); doubles via dtoa_shortest. Below it, the
 * json_put_* writers (json.h) are for text written field by field — the
 * decision answer (src/engine/render.c) and the snapshot payload
 * (src/engine/record_format.c): the small ones inline, every one checking
 * room through json_buf_reserve, which grows the buffer and refuses a size
 * that would overflow. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"
#include "core/dtoa.h"
#include "core/json.h"
#include "core/json_scan.h"
#include "core/timefmt.h"
#include "core/utf8.h"
/* ------------------------------------------------------------------ */
/* Writer                                                              */
/* ------------------------------------------------------------------ */

void json_buf_init(json_buf *b, arena *a) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  b->arena = a;
  b->oom = 0;
}

void json_buf_free(json_buf *b) {
  if (!b->arena) free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

int json_buf_reserve(json_buf *b, size_t extra) {
  if (b->oom) return -1;
  /* len + extra + 1 wrapping past SIZE_MAX is a size that cannot be had
   * (checked first: a wrapped sum is small, and would look like room) */
  if (extra > SIZE_MAX - 1 - b->len) goto oom;
  size_t need = b->len + extra + 1;
  if (need <= b->cap) return 0;
  size_t ncap = b->cap ? b->cap : 256;
  while (ncap < need) {
    if (ncap > SIZE_MAX / 2) goto oom;
    ncap *= 2;
  }
  char *p = b->arena ? arena_realloc(b->arena, b->data, b->cap, ncap) : realloc(b->data, ncap);
  if (!p) goto oom;
  b->data = p;
  b->cap = ncap;
  return 0;
oom:
  b->oom = 1;
  b->cap = b->data ? b->len + 1 : 0; /* so that every later write comes here */
  return -1;
}

void json_buf_put(json_buf *b, const char *s, size_t len) {
  if (b->len + len >= b->cap && json_buf_reserve(b, len) != 0) return;
  memcpy(b->data + b->len, s, len);
  b->len += len;
  b->data[b->len] = '\0';
}

void json_buf_putc(json_buf *b, char c) {
  if (b->len + 1 >= b->cap && json_buf_reserve(b, 1) != 0) return;
  b->data[b->len++] = c;
  b->data[b->len] = '\0';
}

char *json_quote_text(char *out, size_t cap, const char *s, size_t len, size_t max) {
  if (!cap) return out;
  out[0] = '\0';
  int cut = len > max;
  if (cut) {
    len = max;
    /* not inside a UTF-8 sequence: it would show as U+FFFD */
    while (len && ((unsigned char)s[len] & 0xC0) == 0x80) len--;
  }
  json_buf b;
  json_buf_init(&b, NULL);
  json_write_string(&b, s ? s : "", s ? len : 0);
  if (b.oom || b.len < 2) {
    json_buf_free(&b);
    return out;
  }
  const char *t = b.data + 1; /* inside the quotes */
  size_t tn = b.len - 2, o = 0, room = cap - 1;
  if (tn > room) cut = 1;
  if (cut) room = room > 3 ? room - 3 : 0;
  for (size_t i = 0; i < tn;) {
    unsigned char c = (unsigned char)t[i];
    size_t k = c == '\\'   ? (t[i + 1] == 'u' ? 6 : 2)
               : c < 0x80  ? 1
               : c >= 0xF0 ? 4
               : c >= 0xE0 ? 3
                           : 2;
    if (i + k > tn) k = tn - i;
    if (o + k > room) {
      cut = 1;
      break;
    }
    memcpy(out + o, t + i, k);
    o += k;
    i += k;
  }
  if (cut && o + 3 <= cap - 1) {
    memcpy(out + o, "...", 3);
    o += 3;
  }
  out[o] = '\0';
  json_buf_free(&b);
  return out;
}

void json_write_string(json_buf *b, const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  /* Room for the text as is and the quotes; each escape below makes room
   * for itself and the rest again. */
  if (json_buf_reserve(b, len + 2) != 0) return;
  const char *p = s, *end = s + len;
  char *o = b->data + b->len;
  *o++ = '"';
  for (;;) {
    const char *q = skip_plain(p, end);
    memcpy(o, p, (size_t)(q - p));
    o += q - p;
    p = q;
    if (p == end) break;
    b->len = (size_t)(o - b->data);
    if (json_buf_reserve(b, (size_t)(end - p) + 6 + 1) != 0) return;
    o = b->data + b->len;
    unsigned char c = (unsigned char)*p;
    if (c >= 0x80) {
      uint32_t cp;
      int n = utf8_decode((const unsigned char *)p, (size_t)(end - p), &cp);
      if (n > 0) {
        memcpy(o, p, (size_t)n);
        o += n;
        p += n;
      } else { /* not UTF-8: write U+FFFD so that the output stays valid */
        memcpy(o, "\xEF\xBF\xBD", 3);
        o += 3;
        p++;
      }
      continue;
    }
    *o++ = '\\';
    switch (c) {
      case '"':
        *o++ = '"';
        break;
      case '\\':
        *o++ = '\\';
        break;
      case '\b':
        *o++ = 'b';
        break;
      case '\f':
        *o++ = 'f';
        break;
      case '\n':
        *o++ = 'n';
        break;
      case '\r':
        *o++ = 'r';
        break;
      case '\t':
        *o++ = 't';
        break;
      default:
        memcpy(o, "u00", 3);
        o[3] = hex[c >> 4];
        o[4] = hex[c & 15];
        o += 5;
    }
    p++;
  }
  *o++ = '"';
  b->len = (size_t)(o - b->data);
  b->data[b->len] = '\0';
}

void json_write_double(json_buf *b, double d) {
  if (isnan(d)) {
    json_buf_put(b, "NaN", 3);
    return;
  }
  if (isinf(d)) {
    if (d > 0)
      json_buf_put(b, "Infinity", 8);
    else
      json_buf_put(b, "-Infinity", 9);
    return;
  }
  char t[40];
  size_t n = dtoa_shortest(d, t);
  /* Integral values get ".0" so that they read back as doubles, not ints. */
  if (!memchr(t, '.', n) && !memchr(t, 'e', n)) {
    memcpy(t + n, ".0", 3);
    n += 2;
  }
  json_buf_put(b, t, n);
}

static void put_dec(json_buf *b, uint64_t u, int neg) {
  char t[24];
  size_t i = sizeof t;
  do {
    t[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (neg) t[--i] = '-';
  json_buf_put(b, t + i, sizeof t - i);
}

/* Writes a scalar (anything but a list or map). */
static int write_scalar(json_buf *b, const value *v, int lenient) {
  char t[48];
  switch (v->kind) {
    case V_NULL:
      json_buf_put(b, "null", 4);
      return 0;
    case V_BOOL:
      if (v->b)
        json_buf_put(b, "true", 4);
      else
        json_buf_put(b, "false", 5);
      return 0;
    case V_INT:
      put_dec(b, v->i < 0 ? (uint64_t)0 - (uint64_t)v->i : (uint64_t)v->i, v->i < 0);
      return 0;
    case V_UINT:
      put_dec(b, v->u, 0);
      return 0;
    case V_DOUBLE:
      if (!isfinite(v->d) && !lenient) return -1;
      json_write_double(b, v->d);
      return 0;
    case V_STRING:
      json_write_string(b, v->s, v->n);
      return 0;
    case V_BYTES: {
      size_t n = base64_encoded_len(v->n);
      if (json_buf_reserve(b, n + 2) != 0) return 0;
      b->data[b->len++] = '"';
      b->len += base64_encode(v->s, v->n, b->data + b->len);
      b->data[b->len++] = '"';
      b->data[b->len] = '\0';
      return 0;
    }
    case V_TIMESTAMP: {
      size_t n = timefmt_format_rfc3339(v->i, value_nanos(*v), t);
      json_write_string(b, t, n);
      return 0;
    }
    case V_DURATION: {
      size_t n = timefmt_format_duration(v->i, value_nanos(*v), t);
      json_write_string(b, t, n);
      return 0;
    }
    case V_TYPE: {
      const char *name = value_kind_name((value_kind)v->n);
      json_write_string(b, name, strlen(name));
      return 0;
    }
    default:
      return -1; /* V_ERROR and anything unknown */
  }
}

/* Writes a map key: strings as they are, other kinds as their JSON text
 * inside a string (1 -> "1", true -> "true"); kinds already written as
 * strings (bytes, timestamps, ...) keep that string. */
static int write_key(json_buf *b, const value *k, int lenient) {
  switch (k->kind) {
    case V_STRING:
      json_write_string(b, k->s, k->n);
      return 0;
    case V_NULL:
    case V_BOOL:
    case V_INT:
    case V_UINT:
    case V_DOUBLE: {
      json_buf_putc(b, '"');
      if (write_scalar(b, k, lenient) != 0) return -1;
      json_buf_putc(b, '"');
      return 0;
    }
    case V_LIST:
    case V_MAP: {
      json_buf tmp;
      json_buf_init(&tmp, NULL);
      int rc = json_write(&tmp, k, lenient);
      if (rc == 0 && !tmp.oom) json_write_string(b, tmp.data, tmp.len);
      if (tmp.oom) b->oom = 1;
      json_buf_free(&tmp);
      return rc;
    }
    default:
      return write_scalar(b, k, lenient);
  }
}

typedef struct wframe {
  const value *v;
  uint32_t i;
} wframe;

int json_write(json_buf *b, const value *v, int lenient) {
  size_t mark = b->len;
  wframe local[32], *st = local;
  size_t n = 0, cap = sizeof local / sizeof local[0];
  int rc = 0;
  const value *cur = v;
  for (;;) {
    if (cur->kind == V_LIST || cur->kind == V_MAP) {
      json_buf_putc(b, cur->kind == V_LIST ? '[' : '{');
      if (n == cap) {
        wframe *ns = st == local ? malloc(2 * cap * sizeof *ns) : realloc(st, 2 * cap * sizeof *ns);
        if (!ns) {
          b->oom = 1;
          rc = -1;
          break;
        }
        if (st == local) memcpy(ns, local, sizeof local);
        st = ns;
        cap *= 2;
      }
      st[n].v = cur;
      st[n].i = 0;
      n++;
    } else if (write_scalar(b, cur, lenient) != 0) {
      rc = -1;
      break;
    }
    /* Find the next value to write, closing finished containers. */
    cur = NULL;
    while (n > 0 && !cur) {
      wframe *f = &st[n - 1];
      if (f->i == f->v->n) {
        json_buf_putc(b, f->v->kind == V_LIST ? ']' : '}');
        n--;
        continue;
      }
      if (f->i > 0) json_buf_putc(b, ',');
      if (f->v->kind == V_LIST) {
        cur = &f->v->items[f->i++];
      } else {
        const map_entry *e = &f->v->entries[f->i++];
        if (write_key(b, &e->key, lenient) != 0) {
          rc = -1;
          break;
        }
        json_buf_putc(b, ':');
        cur = &e->val;
      }
    }
    if (rc != 0 || !cur) break;
  }
  if (st != local) free(st);
  if (rc == 0 && b->oom) rc = -1;
  if (rc != 0 && !b->oom) {
    b->len = mark; /* leave the buffer as it was */
    if (b->data) b->data[b->len] = '\0';
  }
  return rc;
}

/* ---- field by field ---- */

/* The high bit of each byte of w that is a control byte, '"', '\\' or
 * non-ASCII (a borrow may mark a byte after a real one, never a word
 * without one). */
static inline uint64_t special_bytes(uint64_t w) {
  const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  uint64_t q = w ^ (ones * '"'), bs = w ^ (ones * '\\');
  return ((w - ones * 0x20) | w | ((q - ones) & ~q) | ((bs - ones) & ~bs)) & highs;
}

/* The last word overlaps the one before; a string of four to seven bytes
 * goes as two overlapping words of four, a shorter one as one word, padded,
 * into the slack the room was asked for. */
void json_put_strn(json_buf *b, const char *s, size_t n) {
  if (json_room(b, n + 2 + 8)) return;
  char *o = b->data + b->len + 1;
  uint64_t w, special = 0;
  if (n < 4) {
    w = 0x6161616161616161ull; /* 'a' * 8: harmless padding */
    for (size_t i = 0; i < n; i++) ((char *)&w)[i] = s[i];
    special = special_bytes(w);
    memcpy(o, &w, 8);
  } else if (n < 8) { /* two words of four, overlapping */
    uint32_t a, z;
    memcpy(&a, s, 4);
    memcpy(&z, s + n - 4, 4);
    special = special_bytes(((uint64_t)z << 32) | a);
    memcpy(o, &a, 4);
    memcpy(o + n - 4, &z, 4);
  } else {
    for (size_t i = 0; i + 8 < n; i += 8) {
      memcpy(&w, s + i, 8);
      special |= special_bytes(w);
      memcpy(o + i, &w, 8);
    }
    memcpy(&w, s + n - 8, 8);
    special |= special_bytes(w);
    memcpy(o + n - 8, &w, 8);
  }
  if (special) {
    json_write_string(b, s, n);
    return;
  }
  o[-1] = '"';
  o[n] = '"';
  b->len += n + 2;
}

static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

void json_put_u64(json_buf *b, uint64_t v) {
  if (json_room(b, 20)) return;
  char t[20];
  size_t i = sizeof t;
  while (v >= 100) {
    unsigned k = (unsigned)(v % 100) * 2;
    v /= 100;
    t[--i] = digit_pairs[k + 1];
    t[--i] = digit_pairs[k];
  }
  if (v >= 10) {
    t[--i] = digit_pairs[v * 2 + 1];
    t[--i] = digit_pairs[v * 2];
  } else {
    t[--i] = (char)('0' + v);
  }
  memcpy(b->data + b->len, t + i, sizeof t - i);
  b->len += sizeof t - i;
}

void json_put_minified(json_buf *b, const char *s, size_t n) {
  if (json_room(b, n)) return;
  char *o = b->data + b->len;
  size_t i = 0;
  while (i < n) {
    char c = s[i];
    if (c == '"') {
      size_t j = i + 1;
      for (;;) {
        const char *q = memchr(s + j, '"', n - j);
        if (!q) { /* never: the text parsed */
          j = n;
          break;
        }
        size_t k = (size_t)(q - s), bs = 0;
        while (k - bs > i + 1 && s[k - bs - 1] == '\\') bs++;
        j = k + 1;
        if (!(bs & 1)) break;
      }
      memcpy(o, s + i, j - i);
      o += j - i;
      i = j;
    } else {
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') *o++ = c;
      i++;
    }
  }
  b->len = (size_t)(o - b->data);
  b->data[b->len] = '\0';
}

int json_put_end(json_buf *b) {
  if (json_room(b, 0)) return -1;
  b->data[b->len] = '\0';
  return b->oom ? -1 : 0;
}
