/* test_lib.c — the built-in functions of lib_core.c, lib_strings.c and
 * lib_time.c, called directly through their tables (no parser, no
 * evaluator), with the overload chosen the way the evaluator chooses it: the
 * first entry with the right name, call style and arity whose kinds accept
 * the arguments. Constant arguments go through `prepare` like a compiled
 * constant would; test_lib also runs the same calls without it. */
#define _GNU_SOURCE /* memmem */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

#include "core/utf8.h"
#include "expr/expr.h"
#include "expr/lib.h"
#include "test.h"

static arena A;
static eval_ctx C;

static const builtin *find(const char *name, int receiver, uint32_t nargs, const value *args) {
  const builtin *tables[] = {lib_core_builtins, lib_strings_builtins, lib_time_builtins,
                             lib_net_builtins};
  for (size_t t = 0; t < 4; t++) {
    for (const builtin *b = tables[t]; b->name; b++) {
      if (strcmp(b->name, name) != 0 || b->receiver != receiver) continue;
      if (b->variadic ? nargs < b->nargs : nargs != b->nargs) continue;
      int ok = 1;
      for (uint32_t i = 0; i < nargs && ok; i++) {
        uint8_t k = b->kinds[i < 4 ? i : 3];
        if (k != K_ANY && k != args[i].kind) ok = 0;
      }
      if (ok) return b;
    }
  }
  return NULL;
}

/* Last error message from prepare, when it failed. */
static char prep_err[512];

static value vcall(const char *name, int receiver, int use_prepare, uint32_t n, va_list ap) {
  value args[8];
  for (uint32_t i = 0; i < n; i++) args[i] = va_arg(ap, value);
  const builtin *b = find(name, receiver, n, args);
  if (!b) return VALUE_ERR("no matching overload");
  void *aux = NULL;
  prep_err[0] = '\0';
  if (use_prepare && b->prepare) {
    uint8_t is_const[8] = {0, 1, 1, 1, 1, 1, 1, 1};
    aux = b->prepare(args, is_const, n, 0, prep_err, sizeof prep_err);
    if (!aux && prep_err[0]) return VALUE_ERR("prepare failed");
  }
  value r = b->fn(&C, args, n, aux);
  if (aux && b->release) b->release(aux);
  return r;
}

/* Global call: fn(args...). */
static value G(const char *name, uint32_t n, ...) {
  va_list ap;
  va_start(ap, n);
  value r = vcall(name, 0, 1, n, ap);
  va_end(ap);
  return r;
}

/* Receiver call: args[0].fn(args[1..]). */
static value R(const char *name, uint32_t n, ...) {
  va_list ap;
  va_start(ap, n);
  value r = vcall(name, 1, 1, n, ap);
  va_end(ap);
  return r;
}

/* Receiver call without prepare (a pattern or zone computed at run time). */
static value RN(const char *name, uint32_t n, ...) {
  va_list ap;
  va_start(ap, n);
  value r = vcall(name, 1, 0, n, ap);
  va_end(ap);
  return r;
}

static value S(const char *s) {
  size_t n = strlen(s);
  int ascii;
  utf8_validate(s, n, &ascii);
  value v = value_str(s, (uint32_t)n);
  if (ascii) v.flags |= VF_ASCII;
  return v;
}
static value SN(const char *s, size_t n) { return value_str(s, (uint32_t)n); }
static value BY(const char *s, size_t n) { return value_bytes(s, (uint32_t)n); }
static value I(int64_t i) { return value_int(i); }
static value U(uint64_t u) { return value_uint(u); }
static value D(double d) { return value_double(d); }
static value B(bool b) { return value_bool(b); }
static value TS(int64_t s, int32_t ns) { return value_timestamp(s, ns); }
static value DUR(int64_t s, int32_t ns) { return value_duration(s, ns); }
static value L(uint32_t n, ...) {
  value *items = arena_alloc(&A, (n ? n : 1) * sizeof(value));
  va_list ap;
  va_start(ap, n);
  for (uint32_t i = 0; i < n; i++) items[i] = va_arg(ap, value);
  va_end(ap);
  return value_list(items, n);
}
static value M(uint32_t n, ...) { /* n pairs */
  map_entry *e = arena_alloc(&A, (n ? n : 1) * sizeof(map_entry));
  va_list ap;
  va_start(ap, n);
  for (uint32_t i = 0; i < n; i++) {
    e[i].key = va_arg(ap, value);
    e[i].val = va_arg(ap, value);
  }
  va_end(ap);
  return value_map(e, n);
}

static int is_str(value v, const char *want) {
  size_t n = strlen(want);
  return v.kind == V_STRING && v.n == n && memcmp(v.s, want, n) == 0;
}

#define CHECK_INT(expr, want)                                                                 \
  do {                                                                                        \
    value v_ = (expr);                                                                        \
    CHECK_MSG(v_.kind == V_INT && v_.i == (int64_t)(want), "%s: kind %d, %lld (%.*s)", #expr, \
              v_.kind, (long long)v_.i, v_.kind == V_ERROR ? (int)v_.n : 0,                   \
              v_.kind == V_ERROR ? v_.s : "");                                                \
  } while (0)
#define CHECK_UINT(expr, want)                                                               \
  do {                                                                                       \
    value v_ = (expr);                                                                       \
    CHECK_MSG(v_.kind == V_UINT && v_.u == (uint64_t)(want), "%s: kind %d", #expr, v_.kind); \
  } while (0)
#define CHECK_DBL(expr, want)                                                                  \
  do {                                                                                         \
    value v_ = (expr);                                                                         \
    CHECK_MSG(v_.kind == V_DOUBLE && v_.d == (want), "%s: kind %d, %g", #expr, v_.kind, v_.d); \
  } while (0)
#define CHECK_BOOL(expr, want)                                                           \
  do {                                                                                   \
    value v_ = (expr);                                                                   \
    CHECK_MSG(v_.kind == V_BOOL && v_.b == (want), "%s: kind %d (%.*s)", #expr, v_.kind, \
              v_.kind == V_ERROR ? (int)v_.n : 0, v_.kind == V_ERROR ? v_.s : "");       \
  } while (0)
#define CHECK_S(expr, want)                                                               \
  do {                                                                                    \
    value v_ = (expr);                                                                    \
    CHECK_MSG(is_str(v_, want), "%s: kind %d, got \"%.*s\", want \"%s\"", #expr, v_.kind, \
              (int)v_.n, v_.s ? v_.s : "", want);                                         \
  } while (0)
#define CHECK_ERR(expr)                                                                  \
  do {                                                                                   \
    value v_ = (expr);                                                                   \
    CHECK_MSG(v_.kind == V_ERROR, "%s: expected an error, got kind %d", #expr, v_.kind); \
  } while (0)
/* An error whose message contains `part`. */
#define CHECK_ERR_HAS(expr, part)                                                              \
  do {                                                                                         \
    value v_ = (expr);                                                                         \
    CHECK_MSG(v_.kind == V_ERROR && memmem(v_.s, v_.n, part, strlen(part)),                    \
              "%s: expected an error with \"%s\", got kind %d \"%.*s\"", #expr, part, v_.kind, \
              v_.kind == V_ERROR ? (int)v_.n : 0, v_.kind == V_ERROR ? v_.s : "");             \
  } while (0)

/* ------------------------------------------------------------------ core */

static void test_size_counts_code_points_bytes_and_elements(void) {
  CHECK_INT(G("size", 1, S("")), 0);
  CHECK_INT(G("size", 1, S("\xcf\x80\xce\xad\xce\xbd\xcf\x84\xce\xb5")), 5); /* πέντε */
  CHECK_INT(G("size", 1, SN("\xf0\x9f\x90\xb1", 4)), 1); /* 🐱 without the ASCII flag */
  CHECK_INT(G("size", 1, BY("\xc3\xbf", 2)), 2);
  CHECK_INT(G("size", 1, L(3, I(1), I(2), I(3))), 3);
  CHECK_INT(R("size", 1, M(2, S("a"), I(1), S("b"), I(2))), 2);
  CHECK_INT(R("size", 1, S("four")), 4);
  CHECK_ERR(G("size", 1, I(4)));
}

static void test_string_predicates_work_on_code_points(void) {
  CHECK_BOOL(R("contains", 2,
               S("Stra\xc3\x9f"
                 "e"),
               S("a\xc3\x9f")),
             true);
  CHECK_BOOL(R("contains", 2, S("hello"), S("")), true);
  CHECK_BOOL(R("contains", 2, S(""), S("x")), false);
  CHECK_BOOL(R("contains", 2, S("abababc"), S("ababc")), true);
  CHECK_BOOL(R("startsWith", 2, S("foobar"), S("foo")), true);
  CHECK_BOOL(R("startsWith", 2, S(""), S("foo")), false);
  CHECK_BOOL(R("endsWith", 2, S("fort\xc3\xa9"), S("t\xc3\xa9")), true);
  CHECK_BOOL(R("endsWith", 2, S("foobar"), S("foo")), false);
  CHECK_ERR(R("contains", 2, S("x"), I(1)));
}

static void test_matches_is_unanchored_re2_on_code_points(void) {
  CHECK_BOOL(R("matches", 2, S("hubba"), S("ubb")), true);
  CHECK_BOOL(G("matches", 2, S("hubba"), S("^ubb")), false);
  CHECK_BOOL(R("matches", 2, S(""), S("")), true);
  CHECK_BOOL(R("matches", 2, S("\xf0\x9f\x90\xb1\xf0\x9f\x98\x80\xf0\x9f\x98\x80"),
               S("(a|\xf0\x9f\x98\x80){2}")),
             true);
  CHECK_BOOL(R("matches", 2,
               S("ma\xc3\xb1"
                 "ana"),
               S("a+\xc3\xb1+a+")),
             true);
  /* RE2: $ only at the very end, \d is ASCII, (?i) folds Unicode. */
  CHECK_BOOL(R("matches", 2, S("a\n"), S("a$")), false);
  CHECK_BOOL(R("matches", 2, S("\xd9\xa1"), S("\\d")), false); /* ARABIC-INDIC DIGIT ONE */
  CHECK_BOOL(R("matches", 2, S("\xc3\x84"), S("(?i)\xc3\xa4")), true);
  CHECK_BOOL(R("matches", 2, S("x"), S("^.$")), true);
  /* A pattern computed at run time takes the same path without prepare. */
  CHECK_BOOL(RN("matches", 2, S("grey"), S("gr(a|e)y")), true);
  CHECK_BOOL(RN("matches", 2, S("gray"), S("gr(e)y")), false);
}

static void test_matches_rejects_bad_patterns_with_their_text(void) {
  CHECK_ERR(R("matches", 2, S("a"), S("a(")));
  CHECK_MSG(strstr(prep_err, "'a('") != NULL, "prepare error names the pattern: %s", prep_err);
  CHECK_ERR_HAS(RN("matches", 2, S("a"), S("a(")), "invalid regular expression 'a('");
  CHECK_ERR(RN("matches", 2, S("a"), S("\\C"))); /* RE2 has no \C, PCRE2 is told to refuse it */
}

static void test_matches_stops_hostile_patterns_with_an_error(void) {
  char subject[64];
  memset(subject, 'a', 40);
  subject[40] = 'b';
  subject[41] = '\0';
  uint32_t saved = C.regex_match_limit;
  C.regex_match_limit = 100000;
  clock_t t0 = clock();
  CHECK_ERR_HAS(R("matches", 2, S(subject), S("(a+)+$")), "match limit");
  CHECK_ERR_HAS(RN("matches", 2, S(subject), S("(a+)+$")), "match limit");
  double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
  CHECK_MSG(secs < 2.0, "hostile pattern took %.2fs", secs);
  /* A pattern that needs little work still succeeds under the same limit. */
  CHECK_BOOL(R("matches", 2, S(subject), S("a+b$")), true);
  C.regex_match_limit = saved;
}

static void test_int_conversions_check_range(void) {
  CHECK_INT(G("int", 1, U(42)), 42);
  CHECK_INT(G("int", 1, U(9223372036854775807ull)), INT64_MAX);
  CHECK_ERR(G("int", 1, U(9223372036854775808ull)));
  CHECK_INT(G("int", 1, D(1.9)), 1);
  CHECK_INT(G("int", 1, D(-3.5)), -3);
  CHECK_INT(G("int", 1, D(-9223372036854774784.0)), -9223372036854774784LL);
  CHECK_ERR(G("int", 1, D(9223372036854775807.0)));  /* is 2^63 */
  CHECK_ERR(G("int", 1, D(-9223372036854775808.0))); /* CEL: the lower end is out too */
  CHECK_ERR(G("int", 1, D(1e99)));
  CHECK_ERR(G("int", 1, D(NAN)));
  CHECK_ERR(G("int", 1, D(INFINITY)));
  CHECK_INT(G("int", 1, S("987")), 987);
  CHECK_INT(G("int", 1, S("+5")), 5);
  CHECK_INT(G("int", 1, S("-9223372036854775808")), INT64_MIN);
  CHECK_ERR(G("int", 1, S("9223372036854775808")));
  CHECK_ERR(G("int", 1, S(" 1")));
  CHECK_ERR(G("int", 1, S("1.0")));
  CHECK_ERR(G("int", 1, S("")));
  CHECK_ERR(G("int", 1, S("0x10")));
  CHECK_INT(G("int", 1, TS(1095379199, 5)), 1095379199);
  CHECK_INT(G("int", 1, TS(-1, 999999999)), -1);         /* seconds, floored */
  CHECK_INT(G("int", 1, DUR(1, 500000000)), 1500000000); /* nanoseconds */
  CHECK_ERR(G("int", 1, DUR(315576000000LL, 0)));
  CHECK_ERR(G("int", 1, B(true)));
}

static void test_uint_and_double_conversions(void) {
  CHECK_UINT(G("uint", 1, I(1729)), 1729);
  CHECK_ERR(G("uint", 1, I(-1)));
  CHECK_UINT(G("uint", 1, D(25.5)), 25);
  CHECK_UINT(G("uint", 1, D(-0.0)), 0);
  CHECK_ERR(G("uint", 1, D(-0.5)));
  CHECK_ERR(G("uint", 1, D(18446744073709551616.0)));
  CHECK_UINT(G("uint", 1, D(18446744073709549568.0)), 18446744073709549568ull);
  CHECK_UINT(G("uint", 1, S("18446744073709551615")), UINT64_MAX);
  CHECK_ERR(G("uint", 1, S("18446744073709551616")));
  CHECK_ERR(G("uint", 1, S("-1")));
  CHECK_ERR(G("uint", 1, S("+1")));

  CHECK_DBL(G("double", 1, I(-9007199254740992LL)), -9007199254740992.0);
  CHECK_DBL(G("double", 1, U(18446744073709551615ull)), 18446744073709551616.0);
  CHECK_DBL(G("double", 1, S("-84.32e7")), -843200000.0);
  CHECK_DBL(G("double", 1, S(".5")), 0.5);
  CHECK_DBL(G("double", 1, S("5.")), 5.0);
  CHECK_DBL(G("double", 1, S("0x1p-2")), 0.25);
  CHECK_DBL(G("double", 1, S("Infinity")), INFINITY);
  CHECK_DBL(G("double", 1, S("-inf")), -INFINITY);
  value z = G("double", 1, S("-0.0"));
  CHECK(z.kind == V_DOUBLE && z.d == 0 && signbit(z.d));
  value nan = G("double", 1, S("NaN"));
  CHECK(nan.kind == V_DOUBLE && isnan(nan.d));
  CHECK_ERR(G("double", 1, S("-NaN")));
  CHECK_ERR(G("double", 1, S("1e400")));
  CHECK_ERR(G("double", 1, S("1_000")));
  CHECK_ERR(G("double", 1, S("1e")));
  CHECK_ERR(G("double", 1, S(" 1")));
  CHECK_ERR(G("double", 1, S("0x1")));
  CHECK_ERR(G("double", 1, S("")));
}

static void test_string_conversions(void) {
  CHECK_S(G("string", 1, I(-456)), "-456");
  CHECK_S(G("string", 1, U(18446744073709551615ull)), "18446744073709551615");
  CHECK_S(G("string", 1, D(123.456)), "123.456");
  CHECK_S(G("string", 1, D(-4.5e-3)), "-0.0045");
  CHECK_S(G("string", 1, D(1e6)), "1e+06");
  CHECK_S(G("string", 1, D(100000.0)), "100000");
  CHECK_S(G("string", 1, D(-0.0)), "-0");
  CHECK_S(G("string", 1, B(false)), "false");
  CHECK_S(G("string", 1, BY("\xc3\xbf", 2)), "\xc3\xbf");
  CHECK_ERR(G("string", 1, BY("\x00\xff", 2)));
  CHECK_S(G("string", 1, TS(1234567890, 0)), "2009-02-13T23:31:30Z");
  CHECK_S(G("string", 1, TS(1234567890, 500000000)), "2009-02-13T23:31:30.5Z");
  CHECK_S(G("string", 1, TS(253402300799LL, 999999999)), "9999-12-31T23:59:59.999999999Z");
  CHECK_S(G("string", 1, TS(-62135596800LL, 0)), "0001-01-01T00:00:00Z");
  CHECK_S(G("string", 1, DUR(1000000, 0)), "1000000s");
  CHECK_S(G("string", 1, DUR(-1, -500000000)), "-1.5s");
  CHECK_S(G("string", 1, DUR(0, -1)), "-0.000000001s");
  CHECK_S(G("string", 1, value_type(V_DURATION)), "google.protobuf.Duration");
  value tagged = S("10.0.0.1");
  tagged.flags |= VF_IP;
  value plain = G("string", 1, tagged);
  CHECK(is_str(plain, "10.0.0.1") && plain.flags == VF_ASCII);
  CHECK_ERR(G("string", 1, value_null()));
}

static void test_bytes_bool_type_dyn(void) {
  value b = G("bytes", 1, S("\xc3\xbf"));
  CHECK(b.kind == V_BYTES && b.n == 2);
  CHECK(G("bytes", 1, BY("\xff", 1)).kind == V_BYTES);
  const char *yes[] = {"1", "t", "true", "TRUE", "True"};
  const char *no[] = {"0", "f", "false", "FALSE", "False"};
  for (int i = 0; i < 5; i++) {
    CHECK_BOOL(G("bool", 1, S(yes[i])), true);
    CHECK_BOOL(G("bool", 1, S(no[i])), false);
  }
  CHECK_ERR(G("bool", 1, S("TrUe")));
  CHECK_ERR(G("bool", 1, S("yes")));
  CHECK_ERR(G("bool", 1, S("")));
  CHECK_BOOL(G("bool", 1, B(true)), true);
  value t = G("type", 1, U(7));
  CHECK(t.kind == V_TYPE && t.n == V_UINT);
  t = G("type", 1, value_type(V_INT));
  CHECK(t.kind == V_TYPE && t.n == V_TYPE);
  t = G("type", 1, value_null());
  CHECK(t.kind == V_TYPE && t.n == V_NULL);
  CHECK_INT(G("dyn", 1, I(3)), 3);
}

/* --------------------------------------------------------------- strings */

#define TACO "ta\xc2\xa9o\xc2\xa9\xce\xb1T" /* ta©o©αT */

static void test_char_at_and_substring_count_code_points(void) {
  CHECK_S(R("charAt", 2, S("tacocat"), I(3)), "o");
  CHECK_S(R("charAt", 2, S("tacocat"), I(7)), "");
  CHECK_ERR_HAS(R("charAt", 2, S("tacocat"), I(8)), "index out of range: 8");
  CHECK_ERR(R("charAt", 2, S("tacocat"), I(-1)));
  CHECK_S(R("charAt", 2, S(TACO), I(5)), "\xce\xb1");
  CHECK_S(R("charAt", 2, S(TACO), I(7)), "");
  CHECK_S(R("substring", 2, S("tacocat"), I(4)), "cat");
  CHECK_S(R("substring", 2, S("tacocat"), I(7)), "");
  CHECK_ERR(R("substring", 2, S("tacocat"), I(8)));
  CHECK_S(R("substring", 3, S(TACO), I(2), I(6)), "\xc2\xa9o\xc2\xa9\xce\xb1");
  CHECK_S(R("substring", 3, S(TACO), I(7), I(7)), "");
  CHECK_ERR_HAS(R("substring", 3, S("tacocat"), I(4), I(3)), "invalid substring range");
  CHECK_ERR(R("substring", 3, S("tacocat"), I(1), I(50)));
  CHECK_ERR(R("substring", 3, S("tacocat"), I(-1), I(2)));
  CHECK_ERR(R("charAt", 2, S("hello"), B(true)));
}

static void test_index_of_and_last_index_of(void) {
  CHECK_INT(R("indexOf", 2, S("tacocat"), S("")), 0);
  CHECK_INT(R("indexOf", 2, S("tacocat"), S("ac")), 1);
  CHECK_INT(R("indexOf", 2, S("tacocat"), S("none")), -1);
  CHECK_INT(R("indexOf", 2, S(""), S("a")), -1);
  CHECK_INT(R("indexOf", 3, S("tacocat"), S(""), I(3)), 3);
  CHECK_INT(R("indexOf", 3, S("tacocat"), S("a"), I(3)), 5);
  CHECK_INT(R("indexOf", 3, S(TACO), S("\xc2\xa9"), I(3)), 4);
  CHECK_INT(R("indexOf", 3, S(TACO), S("\xc2\xa9\xce\xb1"), I(5)), -1);
  CHECK_ERR(R("indexOf", 3, S("tacocat"), S("a"), I(30)));
  CHECK_ERR(R("indexOf", 3, S("tacocat"), S("a"), I(-1)));
  CHECK_INT(R("lastIndexOf", 2, S("tacocat"), S("")), 7);
  CHECK_INT(R("lastIndexOf", 2, S(TACO), S("")), 7);
  CHECK_INT(R("lastIndexOf", 2, S(""), S("@@")), -1);
  CHECK_INT(R("lastIndexOf", 2, S("tacocat"), S("at")), 5);
  CHECK_INT(R("lastIndexOf", 2, S(TACO), S("\xc2\xa9")), 4);
  CHECK_INT(R("lastIndexOf", 3, S(TACO), S("\xc2\xa9"), I(3)), 2);
  CHECK_INT(R("lastIndexOf", 3, S(TACO), S("\xc2\xa9\xce\xb1"), I(4)), 4);
  CHECK_INT(R("lastIndexOf", 3, S("bananananana"), S("nana"), I(7)), 6);
  CHECK_INT(R("lastIndexOf", 3, S("tacocat"), S(""), I(3)), 3);
  CHECK_ERR(R("lastIndexOf", 3, S("tacocat"), S("a"), I(-1)));
  CHECK_ERR(R("lastIndexOf", 3, S("tacocat"), S("a"), I(30)));
}

static void test_case_replace_split_join(void) {
  CHECK_S(R("lowerAscii", 1, S("TacoC\xc3\x86t Xii")), "tacoc\xc3\x86t xii");
  CHECK_S(R("upperAscii", 1, S("tacoC\xce\xb1t")), "TACOC\xce\xb1T");
  CHECK_S(R("replace", 3, S("{0} days {0} hours"), S("{0}"), S("2")), "2 days 2 hours");
  CHECK_S(R("replace", 4, S("{0} days {0} hours"), S("{0}"), S("2"), I(1)), "2 days {0} hours");
  CHECK_S(R("replace", 4, S("hello hello"), S("he"), S("we"), I(0)), "hello hello");
  CHECK_S(R("replace", 4, S("hello hello"), S("he"), S("we"), I(-1)), "wello wello");
  CHECK_S(R("replace", 3,
            S("a\xc2\xa9"
              "b"),
            S(""), S("-")),
          "-a-\xc2\xa9-b-");
  CHECK_S(R("replace", 4, S("abc"), S(""), S("-"), I(2)), "-a-bc");
  CHECK_S(R("replace", 3, S("1 \xc2\xa9\xce\xb1T taco"), S("\xce\xb1T"), S("o\xc2\xa9\xce\xb1")),
          "1 \xc2\xa9o\xc2\xa9\xce\xb1 taco");

  value l = R("split", 2, S("hello world"), S(" "));
  CHECK(l.kind == V_LIST && l.n == 2 && is_str(l.items[0], "hello") && is_str(l.items[1], "world"));
  l = R("split", 3, S("a b c"), S(" "), I(2));
  CHECK(l.kind == V_LIST && l.n == 2 && is_str(l.items[1], "b c"));
  l = R("split", 3, S("a b c"), S(" "), I(0));
  CHECK(l.kind == V_LIST && l.n == 0);
  l = R("split", 2,
        S("a\xc2\xa9"
          "b"),
        S(""));
  CHECK(l.kind == V_LIST && l.n == 3 && is_str(l.items[1], "\xc2\xa9"));
  l = R("split", 3, S("abc"), S(""), I(2));
  CHECK(l.kind == V_LIST && l.n == 2 && is_str(l.items[1], "bc"));
  l = R("split", 2, S(""), S(","));
  CHECK(l.kind == V_LIST && l.n == 1 && is_str(l.items[0], ""));
  l = R("split", 2, S(""), S(""));
  CHECK(l.kind == V_LIST && l.n == 0);
  l = R("split", 2, S(",a,"), S(","));
  CHECK(l.kind == V_LIST && l.n == 3 && is_str(l.items[0], "") && is_str(l.items[2], ""));

  CHECK_S(R("join", 1, L(2, S("x"), S("y"))), "xy");
  CHECK_S(R("join", 2, L(3, S("x"), S("y"), S("z")), S("-")), "x-y-z");
  CHECK_S(R("join", 2, L(0), S("-")), "");
  CHECK_ERR_HAS(R("join", 1, L(2, S("x"), I(1))), "element 1");
}

static void test_trim_reverse_quote(void) {
  CHECK_S(R("trim", 1, S(" \f\n\r\t\vtext  ")), "text");
  CHECK_S(R("trim", 1, S("\xc2\x85\xc2\xa0\xe1\x9a\x80text\xe3\x80\x80")), "text");
  /* U+180E, U+200B and U+FEFF are not white space. */
  CHECK_S(R("trim", 1, S("\xe1\xa0\x8etext\xe2\x80\x8b\xef\xbb\xbf")),
          "\xe1\xa0\x8etext\xe2\x80\x8b\xef\xbb\xbf");
  CHECK_S(R("trim", 1, S("   ")), "");
  CHECK_S(R("reverse", 1, S("gums")), "smug");
  CHECK_S(R("reverse", 1, S(TACO)),
          "T\xce\xb1\xc2\xa9o\xc2\xa9"
          "at");
  CHECK_S(G("strings.quote", 1, S("first\nsecond")), "\"first\\nsecond\"");
  CHECK_S(G("strings.quote", 1, S("\a\b\f\r\t\v\\\"")), "\"\\a\\b\\f\\r\\t\\v\\\\\\\"\"");
  CHECK_S(G("strings.quote", 1, S("")), "\"\"");
  CHECK_S(G("strings.quote", 1,
            SN("a\xff"
               "b",
               3)),
          "\"a\xef\xbf\xbd"
          "b\"");
}

/* Strings are valid UTF-8 when they enter verdict, but a broken one must
 * never make a function read past its end (regression: replace with an empty
 * search string walked past a truncated sequence). */
static void test_broken_utf8_never_reads_past_the_end(void) {
  value broken = SN("a\xe2\x82", 3); /* truncated three-byte sequence */
  value r = R("replace", 3, broken, S(""), S("-"));
  CHECK(r.kind == V_STRING && r.n == 6);
  value l = R("split", 2, broken, S(""));
  CHECK(l.kind == V_LIST && l.n >= 1);
  size_t total = 0;
  for (uint32_t i = 0; l.kind == V_LIST && i < l.n; i++) total += l.items[i].n;
  CHECK(total == 3);
  CHECK(R("reverse", 1, broken).n == 3);
  value c = R("charAt", 2, broken, I(1));
  CHECK(c.kind == V_STRING && c.n == 2);
  CHECK(R("trim", 1, SN("\xff ", 2)).kind == V_STRING);
}

static value fmt(const char *f, value list) { return R("format", 2, S(f), list); }

static void test_format_clauses(void) {
  CHECK_S(fmt("%% and %s", L(1, S("x"))), "% and x");
  CHECK_S(fmt("%d %d", L(2, I(-12), U(18446744073709551615ull))), "-12 18446744073709551615");
  CHECK_S(fmt("%d", L(1, D(1.5))), "1.5");
  CHECK_S(fmt("%s", L(1, D(1e21))), "1000000000000000000000");
  CHECK_S(fmt("%s", L(1, D(1e-7))), "0.0000001");
  CHECK_S(fmt("%s", L(1, D(-0.0))), "-0");
  CHECK_S(fmt("%.3f|%f|%.0f", L(3, D(1.2345), I(3), D(2.5))), "1.234|3.000000|2");
  CHECK_S(fmt("%e|%.2e", L(2, D(2.71828), U(1000))), "2.718280e+00|1.00e+03");
  CHECK_S(fmt("%f %e %d", L(3, D(NAN), D(INFINITY), D(-INFINITY))), "NaN Infinity -Infinity");
  CHECK_S(fmt("%b %b %b", L(3, I(5), I(-5), B(true))), "101 -101 1");
  CHECK_S(fmt("%o %x %X", L(3, I(8), I(-255), U(255))), "10 -ff FF");
  CHECK_S(fmt("%x %X", L(2, S("Hi"), BY("\x01\xab", 2))), "4869 01AB");
  CHECK_S(fmt("%s", L(1, L(3, S("abc"), value_null(), L(1, D(3.14))))), "[abc, null, [3.14]]");
  CHECK_S(fmt("%s", L(1, M(3, S("b"), I(2), I(10), B(true), S("a"), BY("xyz", 3)))),
          "{10: true, a: xyz, b: 2}");
  CHECK_S(fmt("%s %s", L(2, TS(1675467080, 0), DUR(6347, 0))), "2023-02-03T23:31:20Z 6347s");
  CHECK_S(fmt("%s", L(1, value_type(V_STRING))), "string");
  CHECK_S(fmt("\xc2\xa9%s\xc2\xa9", L(1, S("\xce\xb1"))), "\xc2\xa9\xce\xb1\xc2\xa9");

  CHECK_ERR_HAS(fmt("%d %d %d", L(2, I(0), I(1))), "index 2 out of range");
  CHECK_ERR_HAS(fmt("%a", L(1, I(1))), "unrecognized formatting clause \"a\"");
  CHECK_ERR(fmt("%E", L(1, D(0.5))));
  CHECK_ERR(fmt("%s%", L(2, S("a"), S("b"))));
  CHECK_ERR(fmt("%.", L(1, D(1))));
  CHECK_ERR(fmt("%.f", L(1, D(1))));
  CHECK_ERR(fmt("%.1000f", L(1, D(1))));
  CHECK_ERR_HAS(fmt("%b", L(1, S("abc"))), "was given string");
  CHECK_ERR_HAS(fmt("%d", L(1, DUR(1, 0))), "google.protobuf.Duration");
  CHECK_ERR(fmt("%o", L(1, D(1))));
  CHECK_ERR(fmt("%x", L(1, D(0.5))));
  CHECK_ERR(fmt("%f", L(1, value_null())));
  CHECK_ERR(fmt("%e", L(1, S("1"))));
  CHECK_ERR(fmt("%s", L(1, L(1, VALUE_ERR("boom")))));
}

/* ---------------------------------------------------------------- time */

static void test_timestamp_and_duration_constructors(void) {
  value t = G("timestamp", 1, S("2009-02-13T23:31:30Z"));
  CHECK(t.kind == V_TIMESTAMP && t.i == 1234567890 && t.n == 0);
  t = G("timestamp", 1, S("2023-02-03T23:31:20+00:00"));
  CHECK(t.kind == V_TIMESTAMP && t.i == 1675467080);
  CHECK_ERR(G("timestamp", 1, S("0000-01-01T00:00:00Z")));
  CHECK_ERR(G("timestamp", 1, S("10000-01-01T00:00:00Z")));
  CHECK_ERR(G("timestamp", 1, S("2009-02-13")));
  t = G("timestamp", 1, I(1000000000));
  CHECK(t.kind == V_TIMESTAMP && t.i == 1000000000);
  CHECK_ERR(G("timestamp", 1, I(253402300800LL)));
  value d = G("duration", 1, S("1h45m47s"));
  CHECK(d.kind == V_DURATION && d.i == 6347 && d.n == 0);
  d = G("duration", 1, S("-1.5s"));
  CHECK(d.kind == V_DURATION && d.i == -1 && value_nanos(d) == -500000000);
  CHECK_ERR(G("duration", 1, S("320000000000s")));
  d = G("duration", 1, S("200000000000s"));
  CHECK(d.kind == V_DURATION && d.i == 200000000000LL);
  CHECK_ERR(G("duration", 1, S("1d")));
}

static void test_timestamp_accessors_in_utc(void) {
  value t = TS(1234567890, 0); /* 2009-02-13T23:31:30Z, a Friday */
  CHECK_INT(R("getFullYear", 1, t), 2009);
  CHECK_INT(R("getMonth", 1, t), 1);
  CHECK_INT(R("getDayOfYear", 1, t), 43);
  CHECK_INT(R("getDayOfMonth", 1, t), 12);
  CHECK_INT(R("getDate", 1, t), 13);
  CHECK_INT(R("getDayOfWeek", 1, t), 5);
  CHECK_INT(R("getHours", 1, t), 23);
  CHECK_INT(R("getMinutes", 1, t), 31);
  CHECK_INT(R("getSeconds", 1, t), 30);
  CHECK_INT(R("getMilliseconds", 1, TS(1234567880, 123456789)), 123);
  value old = TS(-62135596800LL, 0); /* 0001-01-01, a Monday */
  CHECK_INT(R("getFullYear", 1, old), 1);
  CHECK_INT(R("getDayOfWeek", 1, old), 1);
  value before = TS(-1, 0); /* 1969-12-31T23:59:59Z */
  CHECK_INT(R("getFullYear", 1, before), 1969);
  CHECK_INT(R("getDayOfYear", 1, before), 364);
  CHECK_INT(R("getHours", 1, before), 23);
  CHECK_INT(R("getDayOfWeek", 1, before), 3);
  value leap = TS(951782400, 0); /* 2000-02-29 */
  CHECK_INT(R("getDate", 1, leap), 29);
  CHECK_INT(R("getDayOfYear", 1, leap), 59);
}

static void test_timestamp_accessors_in_time_zones(void) {
  value t = TS(1234567890, 0);
  CHECK_INT(R("getDate", 2, t, S("Australia/Sydney")), 14);
  CHECK_INT(R("getDayOfMonth", 2, t, S("US/Central")), 12);
  CHECK_INT(R("getMinutes", 2, t, S("Asia/Kathmandu")), 16);
  CHECK_INT(R("getHours", 2, t, S("02:00")), 1);
  CHECK_INT(R("getHours", 2, t, S("+05:30")), 5);
  CHECK_INT(R("getMinutes", 2, t, S("+05:30")), 1);
  CHECK_INT(R("getHours", 2, t, S("-08:00")), 15);
  CHECK_INT(R("getSeconds", 2, t, S("-00:00")), 30);
  CHECK_INT(R("getDayOfMonth", 2, TS(1234490400, 0), S("-02:30")), 11);
  CHECK_INT(R("getDayOfMonth", 2, TS(1234490400, 0), S("America/St_Johns")), 11);
  CHECK_INT(R("getDayOfWeek", 2, t, S("UTC")), 5);
  /* Los Angeles: PST (-8) in January, PDT (-7) in July, from the transition table. */
  CHECK_INT(R("getHours", 2, TS(1704110400, 0), S("America/Los_Angeles")), 4); /* 2024-01-01T12Z */
  CHECK_INT(R("getHours", 2, TS(1719835200, 0), S("America/Los_Angeles")), 5); /* 2024-07-01T12Z */
  /* 2024-03-10: clocks go forward at 10:00Z. */
  CHECK_INT(R("getHours", 2, TS(1710064799, 0), S("America/Los_Angeles")), 1);
  CHECK_INT(R("getHours", 2, TS(1710064800, 0), S("America/Los_Angeles")), 3);
  /* Far future: beyond the table, from the POSIX rule of the footer.
   * 2100-07-01T12:00Z is PDT; 2100-01-01T12:00Z is PST. */
  CHECK_INT(R("getHours", 2, TS(4118126400LL, 0), S("America/Los_Angeles")), 5);
  CHECK_INT(R("getHours", 2, TS(4102488000LL, 0), S("America/Los_Angeles")), 4);
  /* Southern hemisphere, far future: Sydney is on DST (+11) in January 2200. */
  CHECK_INT(R("getHours", 2, TS(7258161600LL, 0), S("Australia/Sydney")), 23);
  CHECK_INT(R("getHours", 2, TS(7273800000LL, 0), S("Australia/Sydney")), 22); /* July: +10 */
  /* Zones computed at run time load the same way, into the arena. */
  CHECK_INT(RN("getDate", 2, t, S("Australia/Sydney")), 14);
  CHECK_INT(RN("getHours", 2, t, S("+05:30")), 5);
}

static void test_bad_time_zones_are_errors(void) {
  value t = TS(1234567890, 0);
  CHECK_ERR(R("getHours", 2, t, S("Mars/Olympus_Mons")));
  CHECK_MSG(strstr(prep_err, "Mars/Olympus_Mons") != NULL, "prepare names the zone: %s", prep_err);
  CHECK_ERR(RN("getHours", 2, t, S("Mars/Olympus_Mons")));
  CHECK_ERR(RN("getHours", 2, t, S("Local")));
  CHECK_ERR(RN("getHours", 2, t, S("../../etc/passwd")));
  CHECK_ERR(RN("getHours", 2, t, S("/etc/localtime")));
  CHECK_ERR(RN("getHours", 2, t, S("America")));
  CHECK_ERR(RN("getHours", 2, t, S("+25:00")));
  CHECK_ERR(RN("getHours", 2, t, S("+05:3")));
  CHECK_ERR(RN("getHours", 2, t, S("zone")));
}

static void test_duration_accessors(void) {
  CHECK_INT(R("getHours", 1, DUR(10000, 0)), 2);
  CHECK_INT(R("getMinutes", 1, DUR(3730, 0)), 62);
  CHECK_INT(R("getSeconds", 1, DUR(3730, 0)), 3730);
  CHECK_INT(R("getMilliseconds", 1, DUR(123, 321456789)), 321);
  CHECK_INT(R("getHours", 1, DUR(-5400, 0)), -1);
  CHECK_INT(R("getMilliseconds", 1, DUR(-1, -500000000)), -500);
  CHECK_ERR(R("getFullYear", 1, DUR(1, 0)));
}

/* Every function must leave a cost trace and respect the cost limit. */
static void test_cost_limit_stops_big_inputs(void) {
  static char big[1 << 16];
  memset(big, 'a', sizeof big - 1);
  value s = S(big);
  C.cost = 0;
  C.cost_limit = 100;
  CHECK_ERR_HAS(R("contains", 2, s, S("b")), "cost");
  CHECK_ERR_HAS(R("replace", 3, s, S("a"), S("b")), "cost");
  CHECK_ERR_HAS(R("matches", 2, s, S("b")), "cost");
  C.cost_limit = 0;
  C.cost = 0;
  CHECK_BOOL(R("contains", 2, s, S("b")), false);
  CHECK(C.cost > 0);
}

/* ------------------------------------------------------- the manual */

static int no_variables(void *user, const char *name, size_t len, value *out) { return -1; }

/* Compiles and evaluates src; returns the value, or an error value holding
 * the compile error's message. */
static value run_expr(const char *src, char *msg, size_t msg_size) {
  expr_program *p;
  expr_error err;
  msg[0] = '\0';
  if (expr_compile(src, strlen(src), NULL, &p, &err)) {
    snprintf(msg, msg_size, "%s", err.message);
    return VALUE_ERR("compile error");
  }
  expr_activation act = {.lookup = no_variables, .user = NULL};
  eval_ctx ctx = {.arena = &A};
  value v = expr_eval(p, &act, &ctx);
  if (v.kind == V_ERROR) snprintf(msg, msg_size, "%.*s", (int)v.n, v.s);
  if (v.kind == V_BOOL && v.b) snprintf(msg, msg_size, "true");
  expr_free(p);
  return v;
}

/* Every line "EXPR // → RESULT" inside a ```cel block of the user manual is
 * a claim: RESULT has the type and value of EXPR, or, for "error: TEXT", the
 * evaluation fails with a message containing TEXT. */
static void test_manual_examples_hold(void) {
  FILE *f = fopen("docs/expressions.md", "r");
  CHECK_MSG(f != NULL, "docs/expressions.md not found (run from the repository root)");
  if (!f) return;
  char line[2048], src[4200], msg[1100];
  int in_cel = 0, examples = 0;
  const char *arrow = "// \xe2\x86\x92"; /* "// →" */
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (strncmp(line, "```", 3) == 0) {
      in_cel = strcmp(line, "```cel") == 0;
      continue;
    }
    char *at = in_cel ? strstr(line, arrow) : NULL;
    if (!at) continue;
    *at = '\0';
    char *expr = line, *want = at + strlen(arrow);
    while (*want == ' ') want++;
    for (char *e = at; e > expr && e[-1] == ' ';) *--e = '\0';
    examples++;
    if (strncmp(want, "error", 5) == 0) {
      const char *part = want + 5;
      while (*part == ':' || *part == ' ') part++;
      value v = run_expr(expr, msg, sizeof msg);
      CHECK_MSG(v.kind == V_ERROR && strstr(msg, part), "manual: %s should fail with '%s', got %s",
                expr, part, msg);
    } else {
      snprintf(src, sizeof src, "type(%s) == type(%s) && (%s) == (%s)", expr, want, expr, want);
      value v = run_expr(src, msg, sizeof msg);
      CHECK_MSG(v.kind == V_BOOL && v.b, "manual: %s should be %s (%s)", expr, want, msg);
    }
    arena_reset(&A);
  }
  fclose(f);
  CHECK_MSG(examples >= 100, "only %d examples found in docs/expressions.md", examples);
}

int main(void) {
  arena_init(&A, NULL, 0, 0);
  C.arena = &A;
  TEST_RUN(test_size_counts_code_points_bytes_and_elements);
  TEST_RUN(test_string_predicates_work_on_code_points);
  TEST_RUN(test_matches_is_unanchored_re2_on_code_points);
  TEST_RUN(test_matches_rejects_bad_patterns_with_their_text);
  TEST_RUN(test_matches_stops_hostile_patterns_with_an_error);
  TEST_RUN(test_int_conversions_check_range);
  TEST_RUN(test_uint_and_double_conversions);
  TEST_RUN(test_string_conversions);
  TEST_RUN(test_bytes_bool_type_dyn);
  TEST_RUN(test_char_at_and_substring_count_code_points);
  TEST_RUN(test_index_of_and_last_index_of);
  TEST_RUN(test_case_replace_split_join);
  TEST_RUN(test_trim_reverse_quote);
  TEST_RUN(test_broken_utf8_never_reads_past_the_end);
  TEST_RUN(test_format_clauses);
  TEST_RUN(test_timestamp_and_duration_constructors);
  TEST_RUN(test_timestamp_accessors_in_utc);
  TEST_RUN(test_timestamp_accessors_in_time_zones);
  TEST_RUN(test_bad_time_zones_are_errors);
  TEST_RUN(test_duration_accessors);
  TEST_RUN(test_cost_limit_stops_big_inputs);
  TEST_RUN(test_manual_examples_hold);
  arena_free(&A);
  TEST_END();
}
