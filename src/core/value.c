/* value.c — CEL's equality, ordering, map lookup and hashing over values.
 *
 * Numbers: int, uint and double are one number line for ==, < and map keys.
 * int/uint compare exactly; a comparison with a double converts the integer
 * to double (as the CEL spec's conformance suite requires), except that
 * doubles outside the integer range are ordered without conversion so that
 * nothing overflows. NaN is unordered and unequal to everything.
 *
 * Not here: arithmetic (the evaluator's), conversions (the built-ins'). */
#include "core/value.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "core/utf8.h"

value value_errorf(arena *a, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return VALUE_ERR("error");
  size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
  char *p = a ? arena_strndup(a, buf, len) : NULL;
  if (!p) return VALUE_ERR("out of memory while reporting an error");
  return value_error_static(p, (uint32_t)len);
}

/* The templates of value_error_lazy: the text before and after the slice. */
#define PART(lit) lit, sizeof(lit) - 1
static const struct {
  const char *pre;
  size_t pre_n;
  const char *post;
  size_t post_n;
} TEMPLATES[] = {
    [VE_NO_SUCH_KEY] = {PART("no such key: '"), PART("'")},
    [VE_NO_SUCH_FIELD] = {PART("no such key: '"), PART("' (the context has no such field)")},
    [VE_UNDECLARED] = {PART("undeclared reference to '"), PART("'")},
};
#undef PART

value value_error_format(arena *a, value v) {
  if (v.kind != V_ERROR || !(v.flags & VF_LAZY)) return v;
  if (v.reserved == 0 || v.reserved >= sizeof TEMPLATES / sizeof TEMPLATES[0])
    return VALUE_ERR("error");
  const char *pre = TEMPLATES[v.reserved].pre, *post = TEMPLATES[v.reserved].post;
  size_t pn = TEMPLATES[v.reserved].pre_n, qn = TEMPLATES[v.reserved].post_n;
  /* the name with escapes (a NUL or a newline in it shows, json.h), cut to
   * fit value_errorf's 512-byte buffer */
  char name[512];
  json_quote_text(name, 512 - pn - qn, v.s, v.n, 512);
  size_t an = strlen(name), len = pn + an + qn;
  if (len > 511) len = 511;
  char *p = a ? arena_alloc(a, len + 1) : NULL;
  if (!p) return VALUE_ERR("out of memory while reporting an error");
  size_t o = 0;
  const char *parts[3] = {pre, name, post};
  size_t sizes[3] = {pn, an, qn};
  for (int i = 0; i < 3 && o < len; i++) {
    size_t k = sizes[i] < len - o ? sizes[i] : len - o;
    if (k) memcpy(p + o, parts[i], k);
    o += k;
  }
  p[len] = '\0';
  return value_error_static(p, (uint32_t)len);
}

const char *value_kind_name(value_kind k) {
  switch (k) {
    case V_NULL:
      return "null_type";
    case V_BOOL:
      return "bool";
    case V_INT:
      return "int";
    case V_UINT:
      return "uint";
    case V_DOUBLE:
      return "double";
    case V_STRING:
      return "string";
    case V_BYTES:
      return "bytes";
    case V_LIST:
      return "list";
    case V_MAP:
      return "map";
    case V_TIMESTAMP:
      return "google.protobuf.Timestamp";
    case V_DURATION:
      return "google.protobuf.Duration";
    case V_TYPE:
      return "type";
    case V_ERROR:
      return "error";
    default:
      return "unknown";
  }
}

static bool is_number(uint8_t k) { return k == V_INT || k == V_UINT || k == V_DOUBLE; }

static int cmp3(double a, double b) { return (a > b) - (a < b); }

/* -1/0/1, or 2 when unordered (NaN). Both values are numbers. */
static int number_cmp(const value *a, const value *b) {
  if (a->kind == b->kind) {
    switch (a->kind) {
      case V_INT:
        return (a->i > b->i) - (a->i < b->i);
      case V_UINT:
        return (a->u > b->u) - (a->u < b->u);
      default:
        if (isnan(a->d) || isnan(b->d)) return 2;
        return cmp3(a->d, b->d);
    }
  }
  if (a->kind == V_INT && b->kind == V_UINT) {
    if (a->i < 0) return -1;
    uint64_t x = (uint64_t)a->i;
    return (x > b->u) - (x < b->u);
  }
  if (a->kind == V_UINT && b->kind == V_INT) return -number_cmp(b, a);
  /* One side is a double. */
  if (a->kind == V_DOUBLE) {
    int c = number_cmp(b, a);
    return c == 2 ? 2 : -c;
  }
  double d = b->d;
  if (isnan(d)) return 2;
  if (a->kind == V_INT) return cmp3((double)a->i, d);
  return cmp3((double)a->u, d);
}

static bool bytes_equal(const value *a, const value *b) {
  return a->n == b->n && (a->n == 0 || memcmp(a->s, b->s, a->n) == 0);
}

bool value_equal(const value *a, const value *b) {
  if (a->kind != b->kind) {
    if (is_number(a->kind) && is_number(b->kind)) return number_cmp(a, b) == 0;
    return false;
  }
  switch (a->kind) {
    case V_NULL:
      return true;
    case V_BOOL:
      return a->b == b->b;
    case V_INT:
      return a->i == b->i;
    case V_UINT:
      return a->u == b->u;
    case V_DOUBLE:
      return a->d == b->d;
    case V_STRING:
      /* An ip()/cidr() value is not the plain string it is spelled as. */
      if ((a->flags ^ b->flags) & (VF_IP | VF_CIDR)) return false;
      return bytes_equal(a, b);
    case V_BYTES:
      return bytes_equal(a, b);
    case V_LIST:
      if (a->n != b->n) return false;
      for (uint32_t i = 0; i < a->n; i++)
        if (!value_equal(&a->items[i], &b->items[i])) return false;
      return true;
    case V_MAP:
      if (a->n != b->n) return false;
      for (uint32_t i = 0; i < a->n; i++) {
        const value *other = value_map_find(b, &a->entries[i].key);
        if (!other || !value_equal(&a->entries[i].val, other)) return false;
      }
      return true;
    case V_TIMESTAMP:
    case V_DURATION:
      return a->i == b->i && a->n == b->n;
    case V_TYPE:
      return a->n == b->n;
    default:
      return false;
  }
}

static int memcmp3(const value *a, const value *b) {
  uint32_t n = a->n < b->n ? a->n : b->n;
  int c = n ? memcmp(a->s, b->s, n) : 0;
  if (c) return c < 0 ? -1 : 1;
  return (a->n > b->n) - (a->n < b->n);
}

int value_compare(const value *a, const value *b, int *cmp) {
  if (is_number(a->kind) && is_number(b->kind)) {
    *cmp = number_cmp(a, b);
    return 0;
  }
  if (a->kind != b->kind) return -1;
  switch (a->kind) {
    case V_BOOL:
      *cmp = (a->b > b->b) - (a->b < b->b);
      return 0;
    /* UTF-8 byte order is code point order. */
    case V_STRING:
    case V_BYTES:
      *cmp = memcmp3(a, b);
      return 0;
    case V_TIMESTAMP:
    case V_DURATION: {
      if (a->i != b->i) {
        *cmp = a->i < b->i ? -1 : 1;
      } else {
        int32_t x = (int32_t)a->n, y = (int32_t)b->n;
        *cmp = (x > y) - (x < y);
      }
      return 0;
    }
    default:
      return -1;
  }
}

/* Whether a double is an integer that an int or uint key could equal. */
const value *value_map_find(const value *map, const value *key) {
  if (map->kind != V_MAP) return NULL;
  const map_entry *e = map->entries;
  uint32_t n = map->n;
  switch (key->kind) {
    case V_STRING:
      for (uint32_t i = 0; i < n; i++)
        if (e[i].key.kind == V_STRING && e[i].key.n == key->n &&
            (key->n == 0 || memcmp(e[i].key.s, key->s, key->n) == 0))
          return &e[i].val;
      return NULL;
    case V_BOOL:
      for (uint32_t i = 0; i < n; i++)
        if (e[i].key.kind == V_BOOL && e[i].key.b == key->b) return &e[i].val;
      return NULL;
    case V_INT:
    case V_UINT:
    case V_DOUBLE:
      for (uint32_t i = 0; i < n; i++)
        if (is_number(e[i].key.kind) && number_cmp(&e[i].key, key) == 0) return &e[i].val;
      return NULL;
    default:
      return NULL;
  }
}

const value *value_map_get(const value *map, const char *key, size_t key_len) {
  value k = value_str(key, (uint32_t)key_len);
  return value_map_find(map, &k);
}

/* A small, fast 64-bit mix (splitmix64 finaliser). */
static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

static uint64_t hash_bytes(const char *s, size_t n, uint64_t seed) {
  uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ull);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    h = mix64(h ^ w);
  }
  uint64_t tail = 0;
  if (i < n) memcpy(&tail, s + i, n - i);
  return mix64(h ^ tail);
}

uint64_t value_hash(const value *v) {
  switch (v->kind) {
    case V_NULL:
      return 0x6e756c6cull;
    case V_BOOL:
      return v->b ? 0x74727565ull : 0x66616c73ull;
    case V_INT:
      return mix64((uint64_t)v->i);
    case V_UINT:
      return mix64(v->u);
    case V_DOUBLE: {
      double d = v->d;
      /* Integral doubles hash like the integer they equal. */
      if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == (double)(int64_t)d)
        return mix64((uint64_t)(int64_t)d);
      if (d >= 0 && d < 18446744073709551616.0 && d == (double)(uint64_t)d)
        return mix64((uint64_t)d);
      if (d == 0) d = 0; /* -0.0 */
      uint64_t bits;
      memcpy(&bits, &d, 8);
      return mix64(bits ^ 0xd0d0ull);
    }
    case V_STRING:
      return hash_bytes(v->s, v->n, 0x5354);
    case V_BYTES:
      return hash_bytes(v->s, v->n, 0x4259);
    case V_LIST: {
      uint64_t h = 0x4c49 + v->n;
      for (uint32_t i = 0; i < v->n; i++) h = mix64(h ^ value_hash(&v->items[i]));
      return h;
    }
    case V_MAP: {
      uint64_t h = 0x4d41 + v->n; /* order-independent: sum of entry hashes */
      for (uint32_t i = 0; i < v->n; i++)
        h += mix64(value_hash(&v->entries[i].key) ^ (value_hash(&v->entries[i].val) * 31));
      return mix64(h);
    }
    case V_TIMESTAMP:
    case V_DURATION:
      return mix64((uint64_t)v->i * 1000000007ull + v->n + v->kind);
    case V_TYPE:
      return mix64(0x5459 + v->n);
    default:
      return 0;
  }
}

size_t value_str_codepoints(const value *v) {
  if (v->flags & VF_ASCII) return v->n;
  return utf8_count(v->s, v->n);
}
