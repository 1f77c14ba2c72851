/* fuzz_json_diff.c — differential: verdict's JSON reader against cJSON
 * (Debian's libcjson) on the same bytes. verdict reads with duplicate keys
 * last-wins (cJSON keeps every member; the comparison keeps the last one in
 * the first one's place, as last-wins does) and a depth limit of 1000
 * (cJSON's nesting limit).
 *
 * What "agree" means (docs/testing.md says why):
 *   - Only inputs that are valid UTF-8, contain no NUL byte, no control
 *     byte other than tab, CR and LF, and none of those inside a string
 *     are compared: cJSON treats every byte
 *     <= 0x20 as whitespace and strings as NUL-terminated, and accepts
 *     invalid UTF-8 and raw control characters inside strings, where JSON
 *     and verdict do not.
 *   - Inputs with a \u escape not followed by four hex digits are not
 *     compared: cJSON reads it as U+0000 instead of rejecting it.
 *   - Inputs that start with a byte order mark (cJSON skips it, RFC 8259
 *     says a parser MAY; verdict rejects it) or nest 990 levels or more
 *     are not compared.
 *   - Where cJSON accepts and verdict rejects, verdict's error must be one
 *     of the documented number differences: cJSON hands number text to
 *     strtod, so it takes leading zeros, "1.", "-.5", "1.e3", and numbers
 *     beyond the double range (as infinity); RFC 8259 forbids all of these.
 *   - Where verdict accepts and cJSON rejects, the input must hold a number
 *     of 64 characters or more (cJSON 1.7.15 reads at most 63 characters of
 *     a number).
 *   - When both accept, the values must match: same kinds (verdict's int,
 *     uint and double are all cJSON numbers) and numbers equal as doubles
 *     (both round correctly), strings byte for byte, arrays item by item,
 *     objects member by member in order — except for inputs holding
 *     \u0000, whose values are not compared (cJSON cuts strings and keys
 *     there, so keys even collide). */
#define _GNU_SOURCE /* memmem */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/json.h"
#include "core/utf8.h"
#include "fuzz.h"

static arena A;
static int A_ready;

static int same(const value *v, const cJSON *c, int has_nul);

static int same_number(const value *v, double d) {
  switch (v->kind) {
    case V_INT:
      return (double)v->i == d;
    case V_UINT:
      return (double)v->u == d;
    case V_DOUBLE:
      return v->d == d && signbit(v->d) == signbit(d);
    default:
      return 0;
  }
}

static int same_object(const value *v, const cJSON *c, int has_nul) {
  /* cJSON's members with duplicates folded: the last value, the first place. */
  const cJSON *keys[4096];
  const cJSON *vals[4096];
  size_t n = 0;
  for (const cJSON *m = c->child; m; m = m->next) {
    size_t i;
    for (i = 0; i < n; i++)
      if (strcmp(keys[i]->string, m->string) == 0) break;
    if (i < n) {
      vals[i] = m;
      continue;
    }
    if (n == sizeof keys / sizeof keys[0]) return 1; /* too big to compare here */
    keys[n] = m;
    vals[n] = m;
    n++;
  }
  if (n != v->n) return 0;
  for (size_t i = 0; i < n; i++) {
    const value *k = &v->entries[i].key;
    if (!has_nul && (strlen(keys[i]->string) != k->n || memcmp(keys[i]->string, k->s, k->n) != 0))
      return 0;
    if (!same(&v->entries[i].val, vals[i], has_nul)) return 0;
  }
  return 1;
}

static int same(const value *v, const cJSON *c, int has_nul) {
  switch (c->type & 0xff) {
    case cJSON_NULL:
      return v->kind == V_NULL;
    case cJSON_False:
      return v->kind == V_BOOL && !v->b;
    case cJSON_True:
      return v->kind == V_BOOL && v->b;
    case cJSON_Number:
      return same_number(v, c->valuedouble);
    case cJSON_String:
      if (v->kind != V_STRING) return 0;
      if (has_nul) return 1;
      return strlen(c->valuestring) == v->n && memcmp(c->valuestring, v->s, v->n) == 0;
    case cJSON_Array: {
      if (v->kind != V_LIST) return 0;
      uint32_t i = 0;
      for (const cJSON *it = c->child; it; it = it->next, i++)
        if (i >= v->n || !same(&v->items[i], it, has_nul)) return 0;
      return i == v->n;
    }
    case cJSON_Object:
      return v->kind == V_MAP && same_object(v, c, has_nul);
    default:
      return 0;
  }
}

/* Whether the input is in the compared domain (see the top comment). */
static int comparable(const uint8_t *d, size_t n) {
  if (utf8_validate((const char *)d, n, NULL) != n) return 0;
  if (n >= 3 && d[0] == 0xEF && d[1] == 0xBB && d[2] == 0xBF) return 0;
  size_t depth = 0, maxdepth = 0;
  int in_str = 0;
  for (size_t i = 0; i < n; i++) {
    uint8_t b = d[i];
    if (b < 0x20 && b != '\t' && b != '\n' && b != '\r') return 0;
    if (in_str) {
      if (b < 0x20) return 0; /* raw tab, CR, LF in a string: cJSON takes them */
      if (b == '\\') {
        /* cJSON reads a \u escape without four hex digits as U+0000. */
        if (i + 1 < n && d[i + 1] == 'u')
          for (size_t k = i + 2; k < i + 6; k++)
            if (k >= n || !isxdigit(d[k])) return 0;
        i++;
      } else if (b == '"')
        in_str = 0;
    } else if (b == '"') {
      in_str = 1;
    } else if (b == '[' || b == '{') {
      if (++depth > maxdepth) maxdepth = depth;
    } else if ((b == ']' || b == '}') && depth) {
      depth--;
    }
  }
  return maxdepth < 990;
}

static int long_number(const uint8_t *d, size_t n) {
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    uint8_t b = d[i];
    if ((b >= '0' && b <= '9') || b == '-' || b == '+' || b == '.' || b == 'e' || b == 'E') {
      if (++run >= 64) return 1;
    } else {
      run = 0;
    }
  }
  return 0;
}

static int number_error(const char *msg) {
  return strstr(msg, "number") || strstr(msg, "digit") || strstr(msg, "exponent") ||
         strstr(msg, "decimal point");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1u << 20 || !comparable(data, size)) return 0;
  if (!A_ready) {
    arena_init(&A, NULL, 0, 256u << 20);
    A_ready = 1;
  }
  json_opts o;
  memset(&o, 0, sizeof o);
  o.duplicates = JSON_DUP_LAST_WINS;
  o.max_depth = 1000;
  value v;
  json_error e;
  int vd_ok = json_parse(&A, (const char *)data, size, &o, &v, &e) == 0;
  /* cJSON wants the NUL inside the length to check that nothing follows. */
  char *copy = malloc(size + 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  copy[size] = '\0';
  const char *end = NULL;
  cJSON *c = cJSON_ParseWithLengthOpts(copy, size + 1, &end, 1);
  int cj_ok = c != NULL;
  if (vd_ok && !cj_ok)
    FUZZ_CHECK(long_number(data, size), "verdict accepts what cJSON rejects: %.*s",
               (int)(size > 200 ? 200 : size), (const char *)data);
  if (!vd_ok && cj_ok)
    FUZZ_CHECK(number_error(e.message), "cJSON accepts what verdict rejects (%s): %.*s", e.message,
               (int)(size > 200 ? 200 : size), (const char *)data);
  if (vd_ok && cj_ok) {
    /* cJSON cuts strings and keys at \u0000 (keys then even collide): such
     * values are not compared. */
    int has_nul = memmem(data, size, "\\u0000", 6) != NULL;
    FUZZ_CHECK(has_nul || same(&v, c, has_nul), "the values differ: %.*s",
               (int)(size > 200 ? 200 : size), (const char *)data);
  }
  cJSON_Delete(c);
  free(copy);
  arena_reset(&A);
  return 0;
}
