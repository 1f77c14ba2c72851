/* test_json.c — what users of the JSON module rely on: how numbers are
 * classified, strings decoded and validated, where errors are reported, the
 * limits, duplicate keys, lenient mode, the writer, shortest doubles and
 * base64. JSONTestSuite runs in test_jsontestsuite.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/base64.h"
#include "core/dtoa.h"
#include "core/json.h"
#include "core/value.h"
#include "test.h"

static arena A;
static json_error E;

/* Parses a NUL-terminated text with the given options. */
static int parse_opts(const char *s, const json_opts *o, value *v) {
  memset(&E, 0, sizeof E);
  return json_parse(&A, s, strlen(s), o, v, &E);
}
static int parse(const char *s, value *v) { return parse_opts(s, NULL, v); }

static const value *get(const value *m, const char *key) {
  return value_map_get(m, key, strlen(key));
}

/* Writes v and returns the text (static buffer), or "<error>". */
static const char *write_text(const value *v, int lenient) {
  static char out[4096];
  json_buf b;
  json_buf_init(&b, NULL);
  int rc = json_write(&b, v, lenient);
  snprintf(out, sizeof out, "%s", rc == 0 ? b.data : "<error>");
  json_buf_free(&b);
  return out;
}

/* Parses s and writes it back. */
static const char *rewrite(const char *s) {
  value v;
  if (parse(s, &v) != 0) return "<parse error>";
  return write_text(&v, 0);
}

static void test_integer_boundaries(void) {
  value v;
  CHECK(parse("9223372036854775807", &v) == 0 && v.kind == V_INT && v.i == INT64_MAX);
  CHECK(parse("9223372036854775808", &v) == 0 && v.kind == V_UINT && v.u == 9223372036854775808ull);
  CHECK(parse("18446744073709551615", &v) == 0 && v.kind == V_UINT && v.u == UINT64_MAX);
  CHECK(parse("18446744073709551616", &v) == 0 && v.kind == V_DOUBLE &&
        v.d == 18446744073709551616.0);
  CHECK(parse("-9223372036854775808", &v) == 0 && v.kind == V_INT && v.i == INT64_MIN);
  CHECK(parse("-9223372036854775809", &v) == 0 && v.kind == V_DOUBLE &&
        v.d == -9223372036854775808.0);
  CHECK(parse("99999999999999999999999", &v) == 0 && v.kind == V_DOUBLE && v.d == 1e23);
  /* -0 is an integer, so it is int 0 (no sign); -0.0 keeps the sign. */
  CHECK(parse("-0", &v) == 0 && v.kind == V_INT && v.i == 0);
  CHECK(parse("-0.0", &v) == 0 && v.kind == V_DOUBLE && v.d == 0 && signbit(v.d));
  CHECK(parse("-0e0", &v) == 0 && v.kind == V_DOUBLE && signbit(v.d));
  /* A fraction or an exponent makes a double, even when integral. */
  CHECK(parse("1.0", &v) == 0 && v.kind == V_DOUBLE && v.d == 1.0);
  CHECK(parse("1e2", &v) == 0 && v.kind == V_DOUBLE && v.d == 100.0);
  CHECK(parse("0", &v) == 0 && v.kind == V_INT && v.i == 0);
  CHECK(parse("-1", &v) == 0 && v.kind == V_INT && v.i == -1);
  /* 2^53 + 1 stays exact as an integer (a double would round it). */
  CHECK(parse("9007199254740993", &v) == 0 && v.kind == V_INT && v.i == 9007199254740993LL);
}

static void test_doubles_read(void) {
  value v;
  CHECK(parse("0.1", &v) == 0 && v.d == 0.1);
  CHECK(parse("1E22", &v) == 0 && v.d == 1e22);
  CHECK(parse("1e23", &v) == 0 && v.d == 1e23);
  CHECK(parse("2.2250738585072014e-308", &v) == 0 && v.d == 2.2250738585072014e-308);
  CHECK(parse("4.9406564584124654e-324", &v) == 0 && v.d == 5e-324);
  CHECK(parse("1.7976931348623157e308", &v) == 0 && v.d == 1.7976931348623157e308);
  CHECK(parse("0.1000000000000000055511151231257827021181583404541015625", &v) == 0 && v.d == 0.1);
  /* Underflow rounds to zero; overflow is an error (JSON has no infinity). */
  CHECK(parse("1e-400", &v) == 0 && v.kind == V_DOUBLE && v.d == 0);
  CHECK(parse("-1e-400", &v) == 0 && v.d == 0 && signbit(v.d));
  CHECK(parse("1e400", &v) != 0 && strstr(E.message, "out of the range of a double"));
  CHECK(parse("[1.8e308]", &v) != 0 && strcmp(E.path, "$[0]") == 0);
  CHECK(parse("0e999999999999", &v) == 0 && v.d == 0);

  /* Exactly halfway between 1 and the next double: ties to even give 1.
   * A nonzero digit far beyond the 780 digits kept must still round up. */
  static char half[1200];
  const char *mid = "1.00000000000000011102230246251565404236316680908203125";
  snprintf(half, sizeof half, "%s", mid);
  CHECK(parse(half, &v) == 0 && v.d == 1.0);
  size_t hn = strlen(half);
  memset(half + hn, '0', 900);
  half[hn + 900] = '\0';
  CHECK(parse(half, &v) == 0 && v.d == 1.0);
  half[hn + 899] = '1';
  CHECK(parse(half, &v) == 0 && v.d == 1.0000000000000002);
  /* The same with the digits in the integer part and a negative exponent. */
  memmove(half + 1, half + 2, strlen(half + 2) + 1);
  size_t at = strlen(half);
  snprintf(half + at, sizeof half - at, "e-%zu", hn - 2 + 900);
  CHECK(parse(half, &v) == 0 && v.d == 1.0000000000000002);

  /* Random decimal texts read exactly like a correctly rounding strtod,
   * through both the fast and the slow path. */
  srand(12345);
  int bad = 0;
  for (int i = 0; i < 20000; i++) {
    char text[128];
    int n = 0;
    if (rand() % 2) text[n++] = '-';
    int idigits = 1 + rand() % 20, fdigits = rand() % 25;
    text[n++] = (char)('1' + rand() % 9);
    for (int k = 1; k < idigits; k++) text[n++] = (char)('0' + rand() % 10);
    if (fdigits) {
      text[n++] = '.';
      for (int k = 0; k < fdigits; k++) text[n++] = (char)('0' + rand() % 10);
    }
    if (rand() % 2) n += snprintf(text + n, sizeof text - (size_t)n, "e%d", rand() % 640 - 330);
    text[n] = '\0';
    double want = strtod(text, NULL);
    if (isinf(want)) continue;
    if (parse(text, &v) != 0 || v.kind == V_STRING) {
      if (bad++ < 5) fprintf(stderr, "reading %s failed: %s\n", text, E.message);
      continue;
    }
    double got = v.kind == V_DOUBLE ? v.d : v.kind == V_INT ? (double)v.i : (double)v.u;
    if (memcmp(&got, &want, sizeof got) != 0 && bad++ < 5)
      fprintf(stderr, "%s: got %.17g want %.17g\n", text, got, want);
  }
  CHECK(bad == 0);
  arena_reset(&A);
}

static void test_strings(void) {
  value v;
  const char *plain = "\"hello world, this is plain ascii\"";
  CHECK(parse(plain, &v) == 0 && v.kind == V_STRING && (v.flags & VF_ASCII));
  /* Strings without escapes point into the input: no copy. */
  CHECK(v.s == plain + 1 && v.n == strlen(plain) - 2);

  CHECK(parse("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", &v) == 0 && v.n == 8 &&
        memcmp(v.s, "\"\\/\b\f\n\r\t", 8) == 0 && (v.flags & VF_ASCII));
  CHECK(parse("\"\\u0041\\u00e9\\u20AC\"", &v) == 0 && v.n == 6 &&
        memcmp(v.s, "A\xC3\xA9\xE2\x82\xAC", 6) == 0 && !(v.flags & VF_ASCII));
  CHECK(parse("\"\\u0041\"", &v) == 0 && v.n == 1 && v.s[0] == 'A' && (v.flags & VF_ASCII));
  /* A surrogate pair is one code point, U+1F600 here. */
  CHECK(parse("\"\\ud83d\\ude00\"", &v) == 0 && v.n == 4 &&
        memcmp(v.s, "\xF0\x9F\x98\x80", 4) == 0);
  CHECK(parse("\"\\uDBFF\\uDFFF\"", &v) == 0 && memcmp(v.s, "\xF4\x8F\xBF\xBF", 4) == 0);
  /* NUL is allowed escaped; strings are length-aware. */
  CHECK(parse("\"a\\u0000b\"", &v) == 0 && v.n == 3 && v.s[1] == '\0');
  CHECK(parse("\"caf\xC3\xA9\"", &v) == 0 && v.n == 5 && !(v.flags & VF_ASCII));
  CHECK(parse("\"\"", &v) == 0 && v.n == 0 && (v.flags & VF_ASCII));

  /* Lone surrogates are errors, pointing at the escape. */
  CHECK(parse("[\"ab\\ud800\"]", &v) != 0 && E.offset == 4 && strstr(E.message, "surrogate"));
  CHECK(parse("[\"\\udc00\\ud800\"]", &v) != 0 && E.offset == 2);
  CHECK(parse("\"\\ud800\\u0041\"", &v) != 0 && E.offset == 1);
  CHECK(parse("\"\\ud800x\"", &v) != 0);
  /* Bad escapes. */
  CHECK(parse("\"\\x\"", &v) != 0 && E.offset == 1 && strstr(E.message, "invalid escape"));
  CHECK(parse("\"\\u12G4\"", &v) != 0 && strstr(E.message, "hex"));
  CHECK(parse("\"\\u12\"", &v) != 0);
  CHECK(parse("\"abc", &v) != 0 && E.offset == 0 && strstr(E.message, "unterminated"));
  CHECK(parse("\"abc\\", &v) != 0);
  /* Raw control characters must be escaped. */
  CHECK(parse("[\"a\tb\"]", &v) != 0 && E.offset == 3 && strstr(E.message, "0x09"));
  CHECK(parse("\"a\nb\"", &v) != 0 && E.offset == 2);
  /* DEL and U+2028 need no escape. */
  CHECK(parse("\"\x7f\xE2\x80\xA8\"", &v) == 0 && v.n == 4);
  /* Long strings cross the 8-byte scanning blocks in every alignment. */
  for (int len = 0; len < 40; len++) {
    for (int at = 0; at < len; at++) {
      char s[64];
      s[0] = '"';
      memset(s + 1, 'x', (size_t)len);
      s[1 + at] = '\x01';
      s[1 + len] = '"';
      s[2 + len] = '\0';
      CHECK(parse(s, &v) != 0 && E.offset == (size_t)(1 + at));
    }
  }
  arena_reset(&A);
}

static void test_invalid_utf8(void) {
  value v;
  struct {
    const char *text;
    size_t offset;
  } cases[] = {
      {"{\"k\":\"ab\xC3\x28\"}", 8},             /* bad continuation */
      {"[\"\xC0\xAF\"]", 2},                     /* overlong '/' */
      {"[\"\xE0\x80\xAF\"]", 2},                 /* overlong, 3 bytes */
      {"[\"\xED\xA0\x80\"]", 2},                 /* UTF-8 encoded surrogate */
      {"[\"\xF4\x90\x80\x80\"]", 2},             /* above U+10FFFF */
      {"[\"\xFF\"]", 2},                         /* never valid */
      {"[\"\x81\"]", 2},                         /* lone continuation */
      {"[\"0123456789abcdef\xE9\"]", 18},        /* after a SWAR block */
      {"\"ok \xE2\x82\xAC then \xE2\x82\"", 13}, /* truncated before the quote */
      {"{\"\xE9\":1}", 2},                       /* in a key */
      {"\"\xE2\x82", 1},                         /* cut by the end of input */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = parse(cases[i].text, &v);
    CHECK_MSG(rc != 0 && E.offset == cases[i].offset, "case %zu: rc %d offset %zu (%s)", i, rc,
              E.offset, E.message);
  }
  /* Outside strings any non-ASCII byte is unexpected, a BOM included. */
  CHECK(parse("\xEF\xBB\xBF{}", &v) != 0 && E.offset == 0 && strstr(E.message, "byte order mark"));
  CHECK(parse("[\xE9]", &v) != 0 && E.offset == 1 && strstr(E.message, "0xE9"));
  arena_reset(&A);
}

static void test_error_places(void) {
  value v;
  CHECK(parse("{\"a\": [1, 2, {\"b\": tru}]}", &v) != 0);
  CHECK_STR(E.path, "$.a[2].b");
  CHECK(E.offset == 19 && E.line == 1 && E.column == 20);

  CHECK(parse("{\n  \"context\": {\n    \"items\": [1, 2, 3, \"x\\q\"]\n  }\n}", &v) != 0);
  CHECK_STR(E.path, "$.context.items[3]");
  CHECK(E.line == 3 && E.column == 26 && E.offset == 42);
  CHECK(strstr(E.message, "invalid escape") != NULL);

  /* Between elements the path names the container. */
  CHECK(parse("{\"a\": [1 2]}", &v) != 0);
  CHECK_STR(E.path, "$.a");
  CHECK(strstr(E.message, "expected ',' or ']'") != NULL);
  CHECK(parse("[1,]", &v) != 0);
  CHECK_STR(E.path, "$[1]");
  CHECK(parse("{\"a\":1,}", &v) != 0);
  CHECK_STR(E.path, "$");
  CHECK(strstr(E.message, "expected a string key") != NULL);
  CHECK(parse("{\"a\" 1}", &v) != 0);
  CHECK_STR(E.path, "$.a");
  CHECK(strstr(E.message, "':'") != NULL);
  /* Keys that are not identifiers are quoted. */
  CHECK(parse("{\"a b\": {\"x\\\"y\": [0, {\"\": nul}]}}", &v) != 0);
  CHECK_STR(E.path, "$[\"a b\"][\"x\\\"y\"][1][\"\"]");
  /* Errors after the value and at the end. */
  CHECK(parse("[1] x", &v) != 0 && E.offset == 4);
  CHECK_STR(E.path, "$");
  CHECK(parse("", &v) != 0 && E.offset == 0 && E.line == 1 && E.column == 1);
  CHECK(parse("[1,\r\n2,\n", &v) != 0 && E.line == 3 && E.column == 1 && E.offset == 8);
  CHECK(parse("[01]", &v) != 0 && strstr(E.message, "leading zero"));
  CHECK(parse("[1.]", &v) != 0 && E.offset == 3);
  CHECK(parse("[-]", &v) != 0);
  CHECK(parse("[1e]", &v) != 0);
  CHECK(parse("[0x1]", &v) != 0 && E.offset == 2);
  CHECK(parse("[truex]", &v) != 0);
  CHECK(parse("[nul]", &v) != 0);
  CHECK(parse("{'a':1}", &v) != 0);
  /* A long path is cut with "..." and stays a C string. */
  char deep[2000];
  size_t n = 0;
  for (int i = 0; i < 100; i++) n += (size_t)snprintf(deep + n, sizeof deep - n, "{\"key%d\":", i);
  snprintf(deep + n, sizeof deep - n, "x");
  CHECK(parse(deep, &v) != 0 && strlen(E.path) < sizeof E.path);
  CHECK(strncmp(E.path, "$.key0.key1.", 12) == 0);
  CHECK(strcmp(E.path + strlen(E.path) - 3, "...") == 0);
  /* err may be NULL. */
  CHECK(json_parse(&A, "[", 1, NULL, &v, NULL) == -1);
  arena_reset(&A);
}

static void test_duplicates(void) {
  value v;
  CHECK(parse("{\"a\":1,\"b\":2,\"a\":3}", &v) != 0);
  CHECK_STR(E.path, "$.a");
  CHECK(E.offset == 13 && strstr(E.message, "duplicate key \"a\"") &&
        strstr(E.message, "line 1, column 2"));
  /* Equal after decoding escapes. */
  CHECK(parse("{\"a\":1,\"\\u0061\":2}", &v) != 0 && strstr(E.message, "duplicate"));
  /* Same key in different objects is fine. */
  CHECK(parse("{\"a\":{\"a\":1},\"b\":{\"a\":2}}", &v) == 0);
  /* Keys differing only after a NUL are different keys. */
  CHECK(parse("{\"a\\u0000b\":1,\"a\\u0000c\":2,\"a\":3}", &v) == 0 && v.n == 3);
  /* Large objects (hash table path): many distinct keys, then one repeat. */
  char big[40000];
  size_t n = 0;
  big[n++] = '{';
  for (int i = 0; i < 2000; i++)
    n += (size_t)snprintf(big + n, sizeof big - n, "\"k%d\":%d,", i, i);
  big[n - 1] = '}';
  big[n] = '\0';
  CHECK(parse(big, &v) == 0 && v.kind == V_MAP && v.n == 2000);
  const value *k1999 = get(&v, "k1999");
  CHECK(k1999 && k1999->kind == V_INT && k1999->i == 1999);
  big[n - 1] = ',';
  n += (size_t)snprintf(big + n, sizeof big - n, "\"k1234\":0}");
  CHECK(parse(big, &v) != 0);
  CHECK_STR(E.path, "$.k1234");
  CHECK(E.offset == n - 10 && strstr(E.message, "duplicate key \"k1234\""));
  /* Members stay in document order. */
  CHECK(parse("{\"z\":1,\"a\":2,\"m\":3}", &v) == 0 && v.entries[0].key.s[0] == 'z' &&
        v.entries[2].key.s[0] == 'm');

  /* Last-wins mode: the later value replaces the earlier one in its place. */
  json_opts lw = {.duplicates = JSON_DUP_LAST_WINS};
  CHECK(parse_opts("{\"a\":1,\"b\":2,\"a\":3,\"a\":4}", &lw, &v) == 0 && v.n == 2);
  const value *a = get(&v, "a");
  CHECK(a && a->kind == V_INT && a->i == 4);
  CHECK(v.entries[0].key.s[0] == 'a' && v.entries[1].key.s[0] == 'b');
  CHECK(parse_opts("{\"a\":1,\"\\u0061\":[2]}", &lw, &v) == 0 && v.n == 1 &&
        v.entries[0].val.kind == V_LIST);
  /* ... and on the hash-table path: 2000 keys, k1234 repeated last. */
  CHECK(parse_opts(big, &lw, &v) == 0 && v.n == 2000);
  const value *k1234 = get(&v, "k1234");
  CHECK(k1234 && k1234->kind == V_INT && k1234->i == 0);
  CHECK(v.entries[1234].key.n == 5 && memcmp(v.entries[1234].key.s, "k1234", 5) == 0);
  arena_reset(&A);
}

static void test_lenient(void) {
  value v;
  json_opts len = {.lenient = 1};
  CHECK(parse_opts("[NaN, Infinity, -Infinity, 1]", &len, &v) == 0 && v.n == 4);
  CHECK(isnan(v.items[0].d) && v.items[1].d == INFINITY && v.items[2].d == -INFINITY);
  CHECK_STR(write_text(&v, 1), "[NaN,Infinity,-Infinity,1]");
  /* Strict writing refuses, and leaves the buffer as it was. */
  json_buf b;
  json_buf_init(&b, NULL);
  json_buf_put(&b, "keep", 4);
  CHECK(json_write(&b, &v, 0) == -1 && b.len == 4 && strcmp(b.data, "keep") == 0);
  json_buf_free(&b);
  /* Strict reading names the token and the way out. */
  CHECK(parse("{\"x\": NaN}", &v) != 0 && strstr(E.message, "lenient"));
  CHECK_STR(E.path, "$.x");
  CHECK(parse("-Infinity", &v) != 0);
  /* Lenient accepts nothing else. */
  CHECK(parse_opts("[nan]", &len, &v) != 0);
  CHECK(parse_opts("[+Infinity]", &len, &v) != 0);
  CHECK(parse_opts("[-NaN]", &len, &v) != 0);
  CHECK(parse_opts("[Infinityx]", &len, &v) != 0);
  CHECK(parse_opts("[-Inf]", &len, &v) != 0);
  arena_reset(&A);
}

static void test_limits(void) {
  value v;
  /* Depth: the default is 512 containers. */
  static char deep[200002];
  for (int depth = 511; depth <= 513; depth++) {
    memset(deep, '[', (size_t)depth);
    memset(deep + depth, ']', (size_t)depth);
    deep[2 * depth] = '\0';
    int rc = parse(deep, &v);
    CHECK_MSG((rc == 0) == (depth <= 512), "depth %d: rc %d", depth, rc);
  }
  CHECK(strstr(E.message, "nesting deeper than the limit of 512") && E.offset == 512);
  /* 100000 open brackets: an error, not a crash. */
  memset(deep, '[', 100000);
  deep[100000] = '\0';
  CHECK(parse(deep, &v) != 0 && E.offset == 512);
  /* Objects count too, and the limit is a setting. */
  json_opts o = {.max_depth = 3};
  CHECK(parse_opts("{\"a\":{\"b\":[1]}}", &o, &v) == 0);
  CHECK(parse_opts("{\"a\":{\"b\":[[1]]}}", &o, &v) != 0);
  CHECK_STR(E.path, "$.a.b[0]");
  /* Size. */
  json_opts s = {.max_size = 10};
  CHECK(parse_opts("[1,2,3,45]", &s, &v) == 0);
  CHECK(parse_opts("[1,2,3,456]", &s, &v) != 0 && E.offset == 10 &&
        strstr(E.message, "size limit of 10 bytes"));
  /* An arena limit surfaces as an error, not a crash. */
  arena small;
  arena_init(&small, NULL, 0, 64);
  const char *text = "[[1,2,3,4,5,6,7,8],[1,2,3,4,5,6,7,8],\"a\\nb\"]";
  CHECK(json_parse(&small, text, strlen(text), NULL, &v, &E) != 0 &&
        strstr(E.message, "out of memory"));
  arena_free(&small);
  arena_reset(&A);
}

static const char REQUEST[] =
    "{\"action\": \"tool_call\", \"candidates\": [\"run_test\", \"skip_test\", \"ask_user\"],\n"
    " \"context\": {\"repo\": \"myapp\", \"branch\": \"feature/x\", \"confidence_floor\": 0.8,\n"
    "  \"user\": {\"id\": 42, \"name\": \"Ada\", \"roles\": [\"dev\", \"admin\"]},\n"
    "  \"files_changed\": 12, \"tests\": true, \"ratio\": -1.5e-3, \"big\": 18446744073709551615,\n"
    "  \"note\": \"caf\\u00e9 \\ud83d\\ude00\", \"none\": null}}";

static void test_values_and_no_malloc(void) {
  /* A request parsed into an arena with a stack buffer: no malloc at all. */
  char mem[8192];
  arena a;
  arena_init(&a, mem, sizeof mem, 0);
  value v;
  CHECK(json_parse(&a, REQUEST, strlen(REQUEST), NULL, &v, &E) == 0);
  CHECK(a.mallocs == 0);
  const value *ctx = get(&v, "context");
  CHECK(ctx && ctx->kind == V_MAP && ctx->n == 10);
  const value *user = ctx ? get(ctx, "user") : NULL;
  CHECK(user && get(user, "id")->i == 42 && get(user, "roles")->n == 2);
  CHECK(ctx && get(ctx, "ratio")->d == -1.5e-3 && get(ctx, "big")->kind == V_UINT);
  CHECK(ctx && get(ctx, "tests")->b && get(ctx, "none")->kind == V_NULL);
  const value *cands = get(&v, "candidates");
  CHECK(cands && cands->kind == V_LIST && cands->n == 3 && cands->items[2].n == 8);
  arena_free(&a);
}

static void test_writer(void) {
  CHECK_STR(rewrite(" { \"a\" : [ 1 , 2.5 , \"x\" ] , \"b\" : { } , \"c\" : [ ] } "),
            "{\"a\":[1,2.5,\"x\"],\"b\":{},\"c\":[]}");
  CHECK_STR(rewrite("[true,false,null,-7,18446744073709551615,-9223372036854775808]"),
            "[true,false,null,-7,18446744073709551615,-9223372036854775808]");
  /* Doubles: shortest, and integral ones keep ".0" so they read back as doubles. */
  CHECK_STR(rewrite("[1.0,100e0,-0.0,0.1,1e21,1E-7,123456789.0,0.30000000000000004]"),
            "[1.0,100.0,-0.0,0.1,1e+21,1e-07,1.23456789e+08,0.30000000000000004]");
  /* Escapes: short forms where JSON has them, \u00XX for other controls;
   * valid UTF-8 as is; / and DEL untouched. */
  CHECK_STR(
      rewrite("\"q\\\" b\\\\ s/ \\b\\f\\n\\r\\t \\u0001\\u001f \\u00e9 \\ud83d\\ude00 \x7f\""),
      "\"q\\\" b\\\\ s/ \\b\\f\\n\\r\\t \\u0001\\u001f \xC3\xA9 \xF0\x9F\x98\x80 \x7f\"");
  CHECK_STR(rewrite("\"\\u0000\""), "\"\\u0000\"");

  value v;
  /* Invalid UTF-8 in a string value becomes U+FFFD: the output stays valid. */
  v = value_str(
      "a\xFF"
      "b\xC3",
      4);
  CHECK_STR(write_text(&v, 0),
            "\"a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\"");
  v = value_bytes("\x00\xFF\x10hi", 5);
  CHECK_STR(write_text(&v, 0), "\"AP8QaGk=\"");
  v = value_timestamp(1234567890, 0);
  CHECK_STR(write_text(&v, 0), "\"2009-02-13T23:31:30Z\"");
  v = value_duration(1, 500000000);
  CHECK_STR(write_text(&v, 0), "\"1.5s\"");
  v = value_type(V_INT);
  CHECK_STR(write_text(&v, 0), "\"int\"");
  v = VALUE_ERR("boom");
  CHECK_STR(write_text(&v, 0), "<error>");

  /* Map keys that are not strings are written as their text in a string. */
  map_entry e[5] = {{value_int(1), value_int(10)},
                    {value_bool(true), value_null()},
                    {value_uint(18446744073709551615ull), value_bool(false)},
                    {value_int(-3), value_str("x", 1)},
                    {value_str("s", 1), value_double(2)}};
  v = value_map(e, 5);
  CHECK_STR(write_text(&v, 0),
            "{\"1\":10,\"true\":null,\"18446744073709551615\":false,\"-3\":\"x\",\"s\":2.0}");
  /* An error anywhere fails the whole write, buffer untouched. */
  value items[3] = {value_int(1), VALUE_ERR("bad"), value_int(3)};
  value list = value_list(items, 3);
  json_buf b;
  json_buf_init(&b, NULL);
  CHECK(json_write(&b, &list, 0) == -1 && b.len == 0);
  json_buf_free(&b);

  /* Deep values are written without recursion limits. */
  static value chain[5000];
  chain[0] = value_int(7);
  for (int i = 1; i < 5000; i++) chain[i] = value_list(&chain[i - 1], 1);
  json_buf_init(&b, NULL);
  CHECK(json_write(&b, &chain[4999], 0) == 0 && b.len == 2 * 4999 + 1);
  CHECK(b.data[0] == '[' && b.data[4999] == '7' && b.data[b.len - 1] == ']');
  json_buf_free(&b);

  /* Arena-backed buffer. */
  arena a;
  arena_init(&a, NULL, 0, 0);
  json_buf_init(&b, &a);
  value req;
  CHECK(json_parse(&a, REQUEST, strlen(REQUEST), NULL, &req, &E) == 0);
  CHECK(json_write(&b, &req, 0) == 0 && !b.oom && b.data[b.len] == '\0');
  value back;
  CHECK(json_parse(&a, b.data, b.len, NULL, &back, &E) == 0 && value_equal(&req, &back));
  json_buf_free(&b);
  /* An arena limit shows as oom. */
  arena small;
  arena_init(&small, NULL, 0, 100);
  json_buf_init(&b, &small);
  CHECK(json_write(&b, &req, 0) == -1 && b.oom);
  arena_free(&small);
  arena_free(&a);
  arena_reset(&A);
}

static void test_round_trips(void) {
  const char *docs[] = {
      REQUEST,
      "[]",
      "{}",
      "\"\"",
      "[0,-0.0,1e-300,5e-324,1.7976931348623157e308,-2.5,3.0]",
      "{\"nested\":[[[{\"a\":[{\"b\":{}}]}]]],\"u\":\"\\u2028\\u0000\\t\"}",
      "[9223372036854775807,9223372036854775808,-9223372036854775808,18446744073709551616]",
  };
  for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
    value v1, v2;
    CHECK(parse(docs[i], &v1) == 0);
    json_buf b;
    json_buf_init(&b, NULL);
    CHECK(json_write(&b, &v1, 0) == 0);
    CHECK_MSG(json_parse(&A, b.data, b.len, NULL, &v2, &E) == 0 && value_equal(&v1, &v2) &&
                  v1.kind == v2.kind,
              "doc %zu: %s", i, b.data);
    /* Kinds survive too: doubles stay doubles, ints stay ints. */
    if (v1.kind == V_LIST)
      for (uint32_t k = 0; k < v1.n && k < v2.n; k++)
        CHECK_MSG(v1.items[k].kind == v2.items[k].kind, "doc %zu item %u", i, k);
    json_buf_free(&b);
  }
  arena_reset(&A);
}

static void test_dtoa(void) {
  struct {
    double d;
    const char *text;
  } cases[] = {
      {0.1, "0.1"},
      {0.1 + 0.2, "0.30000000000000004"},
      {100.0, "100"},
      {123456.0, "123456"},
      {1234567.0, "1.234567e+06"},
      {1e6, "1e+06"},
      {-4.5e-3, "-0.0045"},
      {1e-4, "0.0001"},
      {1e-5, "1e-05"},
      {1e-7, "1e-07"},
      {1e21, "1e+21"},
      {1e22, "1e+22"},
      {1e23, "1e+23"},
      {5e-324, "5e-324"},
      {-5e-324, "-5e-324"},
      {2.2250738585072014e-308, "2.2250738585072014e-308"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {123.456, "123.456"},
      {0.0, "0"},
      {-0.0, "-0"},
      {1.0, "1"},
      {-1.5, "-1.5"},
      {9007199254740993.0, "9.007199254740992e+15"},
      {9223372036854775808.0, "9.223372036854776e+18"},
      {0.000123, "0.000123"},
      {1.0 / 3.0, "0.3333333333333333"},
      {2.0 / 3.0, "0.6666666666666666"},
      {100.5, "100.5"},
      {999999.0, "999999"},
      {8.41e21, "8.41e+21"},
      {5e-310, "5e-310"},
      {NAN, "NaN"},
      {INFINITY, "+Inf"},
      {-INFINITY, "-Inf"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[32];
    size_t n = dtoa_shortest(cases[i].d, out);
    CHECK_MSG(strcmp(out, cases[i].text) == 0 && n == strlen(out), "%.17g: got %s want %s",
              cases[i].d, out, cases[i].text);
  }
  /* Random bit patterns: the text reads back exactly and no text with one
   * digit less does. */
  uint64_t x = 0x9E3779B97F4A7C15ull;
  int bad = 0;
  for (int i = 0; i < 50000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double d;
    memcpy(&d, &x, sizeof d);
    if (!isfinite(d)) continue;
    char out[32];
    dtoa_shortest(d, out);
    double back = strtod(out, NULL);
    int digits = 0;
    for (const char *p = out; *p && *p != 'e'; p++) digits += *p >= '0' && *p <= '9';
    /* Leading zeros of 0.000ddd are not significant. */
    for (const char *p = out; *p == '-' || *p == '0' || *p == '.'; p++) digits -= *p == '0';
    int shorter_ok = 0;
    if (digits > 1) {
      char tmp[40];
      snprintf(tmp, sizeof tmp, "%.*e", digits - 2, d);
      shorter_ok = strtod(tmp, NULL) == d;
    }
    if ((memcmp(&back, &d, sizeof d) != 0 || shorter_ok) && bad++ < 5)
      fprintf(stderr, "dtoa %a: %s (shorter reads back: %d)\n", d, out, shorter_ok);
  }
  CHECK(bad == 0);
}

static void test_base64(void) {
  const char *rfc[][2] = {{"", ""},
                          {"f", "Zg=="},
                          {"fo", "Zm8="},
                          {"foo", "Zm9v"},
                          {"foob", "Zm9vYg=="},
                          {"fooba", "Zm9vYmE="},
                          {"foobar", "Zm9vYmFy"}};
  for (size_t i = 0; i < 7; i++) {
    char enc[16], dec[16];
    size_t n = base64_encode(rfc[i][0], strlen(rfc[i][0]), enc), dn = 99;
    enc[n] = '\0';
    CHECK_STR(enc, rfc[i][1]);
    CHECK(n == base64_encoded_len(strlen(rfc[i][0])));
    CHECK(base64_decode(rfc[i][1], strlen(rfc[i][1]), dec, &dn, NULL) == 0 &&
          dn == strlen(rfc[i][0]) && memcmp(dec, rfc[i][0], dn) == 0);
  }
  /* Every byte value, every length up to 64. */
  unsigned char src[64], dec[64];
  char enc[100];
  for (int i = 0; i < 64; i++) src[i] = (unsigned char)(i * 37 + 250);
  for (size_t len = 0; len <= 64; len++) {
    size_t n = base64_encode(src, len, enc), dn = 0;
    CHECK(base64_decode(enc, n, dec, &dn, NULL) == 0 && dn == len && memcmp(dec, src, len) == 0);
  }
  struct {
    const char *text;
    size_t bad_at;
  } bad[] = {
      {"Zg=", 3},      /* length not a multiple of 4 */
      {"Zg", 2},       /* padding is required */
      {"Zg==Zg==", 2}, /* padding in the middle */
      {"Zh==", 1},     /* leftover bits not zero: not the canonical text */
      {"Zm9=", 2},     /* same, two-byte group */
      {"Zm 9", 2},     /* whitespace */
      {"Zm9\n", 3},    /* line break */
      {"Zm-v", 2},     /* URL-safe alphabet */
      {"Zm_v", 2},
      {"=Zm9", 0},
      {"Z===", 1},
      {"Zm=v", 2}, /* data after padding */
      {"Zm9v\xC3\xA9==", 4},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    size_t at = 999, dn;
    char out[16];
    int rc = base64_decode(bad[i].text, strlen(bad[i].text), out, &dn, &at);
    CHECK_MSG(rc == -1 && at == bad[i].bad_at, "%s: rc %d at %zu", bad[i].text, rc, at);
  }
}

static void test_buf(void) {
  json_buf b;
  json_buf_init(&b, NULL);
  for (int i = 0; i < 1000; i++) json_buf_put(&b, "abc", 3);
  json_buf_putc(&b, '!');
  CHECK(b.len == 3001 && b.data[3000] == '!' && b.data[3001] == '\0' && !b.oom);
  json_write_double(&b, 0.25);
  CHECK(strcmp(b.data + 3001, "0.25") == 0);
  json_buf_free(&b);
  CHECK(b.data == NULL);
}

static void test_quote_text(void) {
  /* names in error messages: whole, with escapes, cut at a character */
  char out[64];
  CHECK_STR(json_quote_text(out, sizeof out, "http_request\0x", 14, 200), "http_request\\u0000x");
  CHECK_STR(json_quote_text(out, sizeof out, "a\nb\"c\\d\x1b", 8, 200), "a\\nb\\\"c\\\\d\\u001b");
  CHECK_STR(json_quote_text(out, sizeof out, "caf\xc3\xa9", 5, 200), "caf\xc3\xa9");
  CHECK_STR(json_quote_text(out, sizeof out, "bad\xff", 4, 200), "bad\xef\xbf\xbd");
  CHECK_STR(json_quote_text(out, sizeof out, "", 0, 200), "");
  CHECK_STR(json_quote_text(out, sizeof out, NULL, 0, 200), "");
  /* past max input bytes: cut, "..." after, never inside a UTF-8 character */
  CHECK_STR(json_quote_text(out, sizeof out, "abcdef", 6, 3), "abc...");
  CHECK_STR(json_quote_text(out, sizeof out, "ab\xc3\xa9z", 5, 3), "ab...");
  /* past what out holds: never inside an escape */
  char small[10];
  CHECK_STR(json_quote_text(small, sizeof small, "abcd\0efgh", 9, 200), "abcd...");
  CHECK_STR(json_quote_text(small, sizeof small, "abcdefghijk", 11, 200), "abcdef...");
  CHECK_STR(json_quote_text(small, sizeof small, "abcdefghi", 9, 200), "abcdefghi");
  char tiny[2];
  CHECK_STR(json_quote_text(tiny, sizeof tiny, "abc", 3, 200), "");
}

int main(void) {
  arena_init(&A, NULL, 0, 0);
  TEST_RUN(test_integer_boundaries);
  TEST_RUN(test_doubles_read);
  TEST_RUN(test_strings);
  TEST_RUN(test_invalid_utf8);
  TEST_RUN(test_error_places);
  TEST_RUN(test_duplicates);
  TEST_RUN(test_lenient);
  TEST_RUN(test_limits);
  TEST_RUN(test_values_and_no_malloc);
  TEST_RUN(test_writer);
  TEST_RUN(test_round_trips);
  TEST_RUN(test_dtoa);
  TEST_RUN(test_base64);
  TEST_RUN(test_buf);
  TEST_RUN(test_quote_text);
  arena_free(&A);
  TEST_END();
}
