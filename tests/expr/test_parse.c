/* test_parse.c — the CEL lexer and parser: tree shapes, literals, macros,
 * limits and error messages.
 *
 * Trees are rendered as S-expressions and compared as text, so a test reads
 * like the tree it expects:
 *   literal 1 / 1u / 1.5 / "s" / b"s" / true / null     ident a
 *   (. a f) select, (has a f) has() select             (_+_ a b) call
 *   (.m recv x) receiver call   [a b] list   {k:v} map
 *   (all x range pred)  (map x range transform [filter])  comprehensions */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/utf8.h"
#include "expr/expr.h"
#include "test.h"

/* ---- rendering ---- */

typedef struct buf {
  char s[8192];
  size_t n;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (b->n < sizeof b->s) {
    int k = vsnprintf(b->s + b->n, sizeof b->s - b->n, fmt, ap);
    if (k > 0) b->n += (size_t)k;
    if (b->n >= sizeof b->s) b->n = sizeof b->s - 1;
  }
  va_end(ap);
}

static void put_quoted(buf *b, const char *s, uint32_t n) {
  put(b, "\"");
  for (uint32_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      put(b, "\\%c", c);
    else if (c < 0x20 || c >= 0x7F)
      put(b, "\\x%02x", c);
    else
      put(b, "%c", c);
  }
  put(b, "\"");
}

static void render(buf *b, const ast *e) {
  static const char *const macros[] = {"all", "exists", "exists_one", "map", "filter"};
  switch (e->kind) {
    case A_LIT:
      switch (e->lit.kind) {
        case V_NULL:
          put(b, "null");
          break;
        case V_BOOL:
          put(b, e->lit.b ? "true" : "false");
          break;
        case V_INT:
          put(b, "%lld", (long long)e->lit.i);
          break;
        case V_UINT:
          put(b, "%lluu", (unsigned long long)e->lit.u);
          break;
        case V_DOUBLE:
          if (e->lit.d == floor(e->lit.d) && fabs(e->lit.d) < 1e15)
            put(b, "%.1f", e->lit.d);
          else
            put(b, "%.17g", e->lit.d);
          break;
        case V_STRING:
          put_quoted(b, e->lit.s, e->lit.n);
          break;
        case V_BYTES:
          put(b, "b");
          put_quoted(b, e->lit.s, e->lit.n);
          break;
        default:
          put(b, "?lit");
          break;
      }
      break;
    case A_IDENT:
      put(b, "%.*s", (int)e->name_len, e->name);
      break;
    case A_SELECT:
      put(b, "(%s ", e->test_only ? "has" : ".");
      render(b, e->target);
      put(b, " %.*s)", (int)e->name_len, e->name);
      break;
    case A_CALL:
      put(b, "(%s%.*s", e->target ? "." : "", (int)e->name_len, e->name);
      if (e->target) {
        put(b, " ");
        render(b, e->target);
      }
      for (uint32_t i = 0; i < e->nargs; i++) {
        put(b, " ");
        render(b, e->args[i]);
      }
      put(b, ")");
      break;
    case A_LIST:
      put(b, "[");
      for (uint32_t i = 0; i < e->nargs; i++) {
        if (i) put(b, " ");
        render(b, e->args[i]);
      }
      put(b, "]");
      break;
    case A_MAP:
      put(b, "{");
      for (uint32_t i = 0; i + 1 < e->nargs; i += 2) {
        if (i) put(b, " ");
        render(b, e->args[i]);
        put(b, ":");
        render(b, e->args[i + 1]);
      }
      put(b, "}");
      break;
    case A_COMPREHENSION:
      put(b, "(%s %.*s ", e->macro < 5 ? macros[e->macro] : "?", (int)e->name_len, e->name);
      render(b, e->target);
      for (uint32_t i = 0; i < e->nargs; i++) {
        put(b, " ");
        render(b, e->args[i]);
      }
      put(b, ")");
      break;
    default:
      put(b, "?node");
      break;
  }
}

/* Parses src (length len) with opts; returns the rendered tree, or
 * "ERROR: <message>" (a static buffer, valid until the next call). */
static const char *parse_n(const char *src, size_t len, const expr_opts *opts, expr_error *err) {
  static buf b;
  arena a;
  arena_init(&a, NULL, 0, 0);
  ast *e = NULL;
  expr_error local;
  if (!err) err = &local;
  b.n = 0;
  b.s[0] = 0;
  /* An exact-size copy with no NUL after it, so that a read past the end
   * is caught under AddressSanitizer. */
  char *copy = malloc(len ? len : 1);
  memcpy(copy, src, len);
  int rc = expr_parse(&a, copy, len, opts, &e, err);
  free(copy); /* the tree must not point into the source */
  if (rc == 0) {
    if (e)
      render(&b, e);
    else
      put(&b, "NULL TREE");
  } else {
    put(&b, "ERROR: %s", err->message);
  }
  arena_free(&a);
  return b.s;
}

static const char *parse(const char *src) { return parse_n(src, strlen(src), NULL, NULL); }

#define SHAPE(src, want) CHECK_STR(parse(src), want)

/* ---- precedence and associativity ---- */

static void test_precedence_and_associativity(void) {
  SHAPE("1 + 2 * 3", "(_+_ 1 (_*_ 2 3))");
  SHAPE("(1 + 2) * 3", "(_*_ (_+_ 1 2) 3)");
  SHAPE("1 - 2 - 3", "(_-_ (_-_ 1 2) 3)");
  SHAPE("8 / 4 / 2 % 3", "(_%_ (_/_ (_/_ 8 4) 2) 3)");
  SHAPE("a + b < c * d", "(_<_ (_+_ a b) (_*_ c d))");
  SHAPE("a < b == c", "(_==_ (_<_ a b) c)");
  SHAPE("a <= b && c >= d || e != f", "(_||_ (_&&_ (_<=_ a b) (_>=_ c d)) (_!=_ e f))");
  SHAPE("a || b && c", "(_||_ a (_&&_ b c))");
  SHAPE("a && b || c", "(_||_ (_&&_ a b) c)");
  SHAPE("a > b", "(_>_ a b)");
  SHAPE("x in [1, 2] && y", "(_&&_ (@in x [1 2]) y)");
  SHAPE("a + 1 in b", "(@in (_+_ a 1) b)");
  SHAPE("!a in b", "(@in (!_ a) b)");
  SHAPE("a ? b : c", "(_?_:_ a b c)");
  SHAPE("a ? b : c ? d : e", "(_?_:_ a b (_?_:_ c d e))");
  SHAPE("a || b ? c && d : e", "(_?_:_ (_||_ a b) (_&&_ c d) e)");
  SHAPE("-a.b", "(-_ (. a b))");
  SHAPE("!a.b()", "(!_ (.b a))");
  SHAPE("!!true", "(!_ (!_ true))");
  SHAPE("--x", "(-_ (-_ x))");
  SHAPE("--1", "(-_ -1)");
  SHAPE("-1", "-1");
  SHAPE("- 1", "-1");
  SHAPE("-1.5", "-1.5");
  SHAPE("-x * 2", "(_*_ (-_ x) 2)");
  SHAPE("1 - -1", "(_-_ 1 -1)");
  SHAPE("1--1", "(_-_ 1 -1)");
  SHAPE("-1u", "(-_ 1u)");
  SHAPE("!-1", "(!_ -1)");
  SHAPE("a.b.c", "(. (. a b) c)");
  SHAPE("a[0][1]", "(_[_] (_[_] a 0) 1)");
  SHAPE("a.b[c].d(e, f)[g]", "(_[_] (.d (_[_] (. a b) c) e f) g)");
  SHAPE("f(a, b)(", "ERROR: 1:8: unexpected token '('\n | f(a, b)(\n | .......^");
  SHAPE("f()", "(f)");
  SHAPE("f(g(x), 1 + 2)", "(f (g x) (_+_ 1 2))");
  SHAPE("a.size()", "(.size a)");
  SHAPE("'abc'.size()", "(.size \"abc\")");
  SHAPE(".a", "a");
  SHAPE(".a.b", "(. a b)");
  SHAPE(".f(1)", "(f 1)");
  SHAPE(". a", "a");
  SHAPE("[]", "[]");
  SHAPE("[1, 2, 3,]", "[1 2 3]");
  SHAPE("{}", "{}");
  SHAPE("{'a': 1, 2: [b],}", "{\"a\":1 2:[b]}");
  SHAPE("{a: b}.c", "(. {a:b} c)");
  SHAPE("[1][0]", "(_[_] [1] 0)");
  SHAPE("1 == 1 ? 'y' : 'n'", "(_?_:_ (_==_ 1 1) \"y\" \"n\")");
  SHAPE("a.`foo-bar`", "(. a foo-bar)");
  SHAPE("a.`b.c/d e`", "(. a b.c/d e)");
  /* Logical chains are balanced; short-circuit order is kept left to right. */
  SHAPE("a || b || c || d", "(_||_ (_||_ a b) (_||_ c d))");
  SHAPE("a && b && c", "(_&&_ a (_&&_ b c))");
  SHAPE("a && b && c && d && e", "(_&&_ (_&&_ a b) (_&&_ c (_&&_ d e)))");
  /* Comments and all whitespace kinds. */
  SHAPE("a // comment\n+ b", "(_+_ a b)");
  SHAPE("a +\t\f\r\n b // trailing", "(_+_ a b)");
  SHAPE("// only a comment\n1", "1");
}

/* ---- literals ---- */

static void test_numeric_literals(void) {
  SHAPE("0", "0");
  SHAPE("007", "7");
  SHAPE("123", "123");
  SHAPE("0x1F", "31");
  SHAPE("0xff", "255");
  SHAPE("0x7FFFFFFFFFFFFFFF", "9223372036854775807");
  SHAPE("-0x8000000000000000", "-9223372036854775808");
  SHAPE("9223372036854775807", "9223372036854775807");
  SHAPE("-9223372036854775808", "-9223372036854775808");
  SHAPE("-9223372036854775808 + 1", "(_+_ -9223372036854775808 1)");
  SHAPE("1u", "1u");
  SHAPE("1U", "1u");
  SHAPE("0x10u", "16u");
  SHAPE("18446744073709551615u", "18446744073709551615u");
  SHAPE("0xFFFFFFFFFFFFFFFFu", "18446744073709551615u");
  SHAPE("1.5", "1.5");
  SHAPE(".5", "0.5");
  SHAPE(".99 > 9.9e-1", "(_>_ 0.98999999999999999 0.98999999999999999)");
  SHAPE("1e3", "1000.0");
  SHAPE("1E3", "1000.0");
  SHAPE("1e+3", "1000.0");
  SHAPE("2.5e-1", "0.25");
  SHAPE("0.0", "0.0");
  SHAPE("0e+0", "0.0");
  SHAPE("-0.0", "-0.0");
  SHAPE("1e-400", "0.0"); /* underflow rounds to zero, as in other CEL implementations */
  /* `1.` is not a double in CEL: it is 1 followed by a selection. */
  SHAPE("42.size()", "(.size 42)");
  SHAPE("1.e3", "(. 1 e3)");
  SHAPE("9223372036854775808",
        "ERROR: 1:1: integer literal out of range (use a 'u' suffix for an unsigned integer)\n"
        " | 9223372036854775808\n | ^");
  SHAPE("-9223372036854775809",
        "ERROR: 1:1: integer literal out of range\n | -9223372036854775809\n | ^");
  SHAPE("18446744073709551616u",
        "ERROR: 1:1: integer literal out of range\n | 18446744073709551616u\n | ^");
  SHAPE("0x10000000000000000",
        "ERROR: 1:1: integer literal out of range\n | 0x10000000000000000\n | ^");
  SHAPE("-(9223372036854775808)",
        "ERROR: 1:3: integer literal out of range (use a 'u' suffix for an unsigned integer)\n"
        " | -(9223372036854775808)\n | ..^");
  SHAPE("1e400", "ERROR: 1:1: double literal out of range\n | 1e400\n | ^");
  SHAPE("0x", "ERROR: 1:1: invalid hexadecimal literal: no digits after '0x'\n | 0x\n | ^");
  SHAPE("0X1", "ERROR: 1:2: unexpected token 'X1'\n | 0X1\n | .^");
  SHAPE("1.5u", "ERROR: 1:4: unexpected token 'u'\n | 1.5u\n | ...^");
}

static void test_other_literals(void) {
  SHAPE("true", "true");
  SHAPE("false", "false");
  SHAPE("null", "null");
  SHAPE("''", "\"\"");
  SHAPE("\"\"", "\"\"");
  SHAPE("'abc'", "\"abc\"");
  SHAPE("\"a'b\"", "\"a'b\"");
  SHAPE("'a\"b'", "\"a\\\"b\"");
  SHAPE("'''x''x'''", "\"x''x\"");
  SHAPE("\"\"\"a\nb\"\"\"", "\"a\\x0ab\"");
  SHAPE("''''''", "\"\"");
  SHAPE("r'\\n'", "\"\\\\n\"");
  SHAPE("R\"\\\\\"", "\"\\\\\\\\\"");
  SHAPE("r'''a\\'''", "\"a\\\\\"");
  SHAPE("b'abc'", "b\"abc\"");
  SHAPE("B\"abc\"", "b\"abc\"");
  SHAPE("b'''a\nb'''", "b\"a\\x0ab\"");
  SHAPE("br'\\x00'", "b\"\\\\x00\"");
  SHAPE("bR'\\'", "b\"\\\\\"");
  SHAPE("b'\xc3\xbf'", "b\"\\xc3\\xbf\"");           /* UTF-8 of U+00FF: two bytes */
  SHAPE("b'\\303\\277'", "b\"\\xc3\\xbf\"");         /* the same, by octets */
  SHAPE("'\\303\\277'", "\"\\xc3\\x83\\xc2\\xbf\""); /* code points 195, 191 */
  SHAPE("'\\377'", "\"\\xc3\\xbf\"");
  SHAPE("'\\xFF'", "\"\\xc3\\xbf\"");
  SHAPE("b'\\377'", "b\"\\xff\"");
  SHAPE("b'\\xFF'", "b\"\\xff\"");
  SHAPE("b'\\Xff'", "b\"\\xff\"");
  /* Every escape. */
  SHAPE("'\\a\\b\\f\\n\\r\\t\\v\\\\\\?\\\"\\'\\`'",
        "\"\\x07\\x08\\x0c\\x0a\\x0d\\x09\\x0b\\\\?\\\"'`\"");
  SHAPE("b'\\a\\b\\f\\n\\r\\t\\v\\\\\\?\\\"\\'\\`'",
        "b\"\\x07\\x08\\x0c\\x0a\\x0d\\x09\\x0b\\\\?\\\"'`\"");
  SHAPE("'\\000\\012\\177'", "\"\\x00\\x0a\\x7f\"");
  SHAPE("'\\x00\\x4a\\X4B'", "\"\\x00JK\"");
  SHAPE("'\\u0041\\u00e9\\uFFFB'", "\"A\\xc3\\xa9\\xef\\xbf\\xbb\"");
  SHAPE("'\\U0001F62C\\U00000041'", "\"\\xf0\\x9f\\x98\\xacA\"");
  SHAPE("'\\U0010FFFF'", "\"\\xf4\\x8f\\xbf\\xbf\"");
  SHAPE("'caf\xc3\xa9'", "\"caf\\xc3\\xa9\"");
  /* Raw control characters (other than newlines) are allowed in any string. */
  SHAPE("'\x01\t\x7f'", "\"\\x01\\x09\\x7f\"");
  SHAPE("'''a\r\nb'''", "\"a\\x0d\\x0ab\"");
}

/* The ascii flag and the arena placement of decoded strings. */
static void test_string_values(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  ast *e;
  expr_error err;
  CHECK(expr_parse(&a, "'abc'", 5, NULL, &e, &err) == 0);
  CHECK(e && e->kind == A_LIT && e->lit.kind == V_STRING && (e->lit.flags & VF_ASCII));
  CHECK(expr_parse(&a, "'\\u00e9'", 8, NULL, &e, &err) == 0);
  CHECK(e && e->lit.kind == V_STRING && !(e->lit.flags & VF_ASCII) && e->lit.n == 2);
  CHECK(expr_parse(&a, "'a\\000b'", 8, NULL, &e, &err) == 0);
  CHECK(e && e->lit.n == 3 && memcmp(e->lit.s, "a\0b", 3) == 0);
  CHECK(expr_parse(&a, "b'\\xff'", 7, NULL, &e, &err) == 0);
  CHECK(e && e->lit.kind == V_BYTES && e->lit.n == 1 && (unsigned char)e->lit.s[0] == 0xff);
  /* A NUL byte in the source is an ordinary character inside a string. */
  CHECK(expr_parse(&a, "'a\0b'", 5, NULL, &e, &err) == 0);
  CHECK(e && e->lit.n == 3 && memcmp(e->lit.s, "a\0b", 3) == 0);
  arena_free(&a);
}

/* ---- macros, has(), names ---- */

static void test_macros(void) {
  SHAPE("has(a.b)", "(has a b)");
  SHAPE("has(a.b.c)", "(has (. a b) c)");
  SHAPE("has({'a': 1}.a)", "(has {\"a\":1} a)");
  SHAPE("has(a.`b-c`)", "(has a b-c)");
  SHAPE("!has(a.b) || x", "(_||_ (!_ (has a b)) x)");
  SHAPE("[1, 2].all(x, x > 0)", "(all x [1 2] (_>_ x 0))");
  SHAPE("l.exists(x, x == 2)", "(exists x l (_==_ x 2))");
  SHAPE("l.exists_one(x, x == 2)", "(exists_one x l (_==_ x 2))");
  SHAPE("l.map(x, x * 2)", "(map x l (_*_ x 2))");
  SHAPE("l.map(x, x > 1, x * 2)", "(map x l (_*_ x 2) (_>_ x 1))");
  SHAPE("l.filter(x, x % 2 == 0)", "(filter x l (_==_ (_%_ x 2) 0))");
  SHAPE("m.all(k, m[k] > 0).exists(y, y)", "(exists y (all k m (_>_ (_[_] m k) 0)) y)");
  SHAPE("l.map(x, l.filter(y, y < x))", "(map x l (filter y l (_<_ y x)))");
  /* Wrong arity or receiver style: ordinary calls. */
  SHAPE("l.all(x)", "(.all l x)");
  SHAPE("l.exists(x, y, z)", "(.exists l x y z)");
  SHAPE("l.map(x, y, z, w)", "(.map l x y z w)");
  SHAPE("all(l, x, p)", "(all l x p)");
  SHAPE("has(a, b)", "(has a b)");
  SHAPE("has()", "(has)");
  SHAPE("a.has(b.c)", "(.has a (. b c))");
  /* Bad macro arguments are errors. */
  SHAPE("has(a)",
        "ERROR: 1:5: has() needs a field selection, such as has(a.b)\n | has(a)\n | ....^");
  SHAPE("has(a[0])",
        "ERROR: 1:5: has() needs a field selection, such as has(a.b)\n | has(a[0])\n | ....^");
  SHAPE("has(a.b())",
        "ERROR: 1:5: has() needs a field selection, such as has(a.b)\n | has(a.b())\n | ....^");
  SHAPE("l.all(x.y, true)",
        "ERROR: 1:7: the first argument of all() must be a variable name\n"
        " | l.all(x.y, true)\n | ......^");
  SHAPE("l.map(1, 2)",
        "ERROR: 1:7: the first argument of map() must be a variable name\n"
        " | l.map(1, 2)\n | ......^");
}

static void test_reserved_words_and_names(void) {
  static const char *const words[] = {
      "as",  "break", "const",   "continue",  "else",   "for", "function", "if",   "import",
      "let", "loop",  "package", "namespace", "return", "var", "void",     "while"};
  char src[128], want[256];
  for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
    const char *w = words[i];
    snprintf(src, sizeof src, "{'%s': 1}.%s", w, w);
    snprintf(want, sizeof want, "(. {\"%s\":1} %s)", w, w);
    CHECK_STR(parse(src), want);
    snprintf(src, sizeof src, "a.%s() || true", w);
    snprintf(want, sizeof want, "(_||_ (.%s a) true)", w);
    CHECK_STR(parse(src), want);
    snprintf(src, sizeof src, "%s", w);
    snprintf(want, sizeof want,
             "ERROR: 1:1: reserved word '%s' cannot be an identifier\n | %s\n | ^", w, w);
    CHECK_STR(parse(src), want);
    snprintf(src, sizeof src, "%s(1)", w);
    CHECK_MSG(strncmp(parse(src), "ERROR: 1:1: reserved word", 25) == 0, "%s", src);
  }
  SHAPE("x + while",
        "ERROR: 1:5: reserved word 'while' cannot be an identifier\n | x + while\n | ....^");
  SHAPE("l.all(if, true)",
        "ERROR: 1:7: reserved word 'if' cannot be an identifier\n | l.all(if, true)\n | ......^");
  /* Words that merely start like reserved words are identifiers. */
  SHAPE("iff + ass + null_ + trueish + in_", "(_+_ (_+_ (_+_ (_+_ iff ass) null_) trueish) in_)");
  SHAPE("_x1", "_x1");
  SHAPE("a.true",
        "ERROR: 1:3: expected a field or method name after '.' but found token 'true'\n"
        " | a.true\n | ..^");
  SHAPE("in", "ERROR: 1:1: unexpected token 'in'\n | in\n | ^");
}

/* ---- node positions ---- */

static void test_positions(void) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  ast *e;
  expr_error err;
  const char *src = "a + b.c * f(x)[0]";
  CHECK(expr_parse(&a, src, strlen(src), NULL, &e, &err) == 0);
  CHECK(e->kind == A_CALL && e->pos == 2); /* '+' */
  CHECK(e->args[0]->kind == A_IDENT && e->args[0]->pos == 0);
  const ast *mul = e->args[1];
  CHECK(mul->pos == 8);                                            /* '*' */
  CHECK(mul->args[0]->kind == A_SELECT && mul->args[0]->pos == 6); /* 'c' */
  CHECK(mul->args[1]->pos == 14);                                  /* '[' */
  CHECK(mul->args[1]->args[0]->pos == 10);                         /* 'f' */
  src = "-  1";
  CHECK(expr_parse(&a, src, strlen(src), NULL, &e, &err) == 0);
  CHECK(e->kind == A_LIT && e->pos == 0 && e->lit.i == -1);
  src = "c ? t : f";
  CHECK(expr_parse(&a, src, strlen(src), NULL, &e, &err) == 0);
  CHECK(e->pos == 2);
  src = "!!x";
  CHECK(expr_parse(&a, src, strlen(src), NULL, &e, &err) == 0);
  CHECK(e->pos == 0 && e->args[0]->pos == 1 && e->args[0]->args[0]->pos == 2);
  arena_free(&a);
}

/* ---- errors ---- */

typedef struct bad_case {
  const char *src;
  const char *want; /* the full message */
} bad_case;

static void test_error_messages(void) {
  static const bad_case cases[] = {
      {"a + )", "1:5: unexpected token ')'\n | a + )\n | ....^"},
      {"", "1:1: unexpected end of input\n | \n | ^"},
      {"   ", "1:4: unexpected end of input\n |    \n | ...^"},
      {"a +", "1:4: unexpected end of input\n | a +\n | ...^"},
      {"(a", "1:3: expected ')' but found end of input\n | (a\n | ..^"},
      {"f(a b)",
       "1:5: expected ',' or ')' after an argument but found token 'b'\n | f(a b)\n | ....^"},
      {"[1 2]", "1:4: expected ',' or ']' in a list but found token '2'\n | [1 2]\n | ...^"},
      {"{1 2}", "1:4: expected ':' after a map key but found token '2'\n | {1 2}\n | ...^"},
      {"{1: 2 3}",
       "1:7: expected ',' or '}' in a map but found token '3'\n | {1: 2 3}\n | ......^"},
      {"[,]", "1:2: unexpected token ','\n | [,]\n | .^"},
      {"f(1,)", "1:5: unexpected token ')'\n | f(1,)\n | ....^"},
      {"a[1", "1:4: expected ']' after an index but found end of input\n | a[1\n | ...^"},
      {"a ? b",
       "1:6: expected ':' in a conditional (a ? b : c) but found end of input\n"
       " | a ? b\n | .....^"},
      {"a ? b ? c : d : e",
       "1:7: expected ':' in a conditional (a ? b : c) but found token '?'\n"
       " | a ? b ? c : d : e\n | ......^"},
      {"a b", "1:3: unexpected token 'b'\n | a b\n | ..^"},
      {"a.",
       "1:3: expected a field or method name after '.' but found end of input\n | a.\n | ..^"},
      {"a.1", "1:2: unexpected token '.1'\n | a.1\n | .^"},
      {"!-x", "1:2: unexpected token '-'\n | !-x\n | .^"},
      {"a = b", "1:3: unexpected '=' (use '==' to compare)\n | a = b\n | ..^"},
      {"a & b", "1:3: unexpected '&' (use '&&' for logical and)\n | a & b\n | ..^"},
      {"a | b", "1:3: unexpected '|' (use '||' for logical or)\n | a | b\n | ..^"},
      {"a # b", "1:3: unexpected character '#'\n | a # b\n | ..^"},
      {"a $", "1:3: unexpected character '$'\n | a $\n | ..^"},
      {"\xcf\x80 + 1", "1:1: unexpected character '\xcf\x80' (U+03C0)\n | \xcf\x80 + 1\n | ^"},
      {"x + \xcf\x80", "1:5: unexpected character '\xcf\x80' (U+03C0)\n | x + \xcf\x80\n | ....^"},
      {"\xe2\x80\x98"
       "a\xe2\x80\x99",
       "1:1: unexpected character '\xe2\x80\x98' (U+2018); strings are quoted with ASCII ' or \"\n"
       " | \xe2\x80\x98"
       "a\xe2\x80\x99\n | ^"},
      {"\xef\xbb\xbf"
       "1",
       "1:1: unexpected character '\xef\xbb\xbf' (U+FEFF); remove the byte order "
       "mark\n | \xef\xbb\xbf"
       "1\n | ^"},
      {"a \xe2\x88\x92 b",
       "1:3: unexpected character '\xe2\x88\x92' (U+2212); use ASCII '-' for "
       "minus\n | a \xe2\x88\x92 b\n | ..^"},
      {"'\xcf\x80' + #", "1:7: unexpected character '#'\n | '\xcf\x80' + #\n | ......^"},
      {"a \x01", "1:3: unexpected character '\\x01'\n | a ?\n | ..^"},
      {"'abc", "1:1: unterminated string literal\n | 'abc\n | ^"},
      {"x + \"abc", "1:5: unterminated string literal\n | x + \"abc\n | ....^"},
      {"'''abc''", "1:1: unterminated string literal\n | '''abc''\n | ^"},
      {"b'abc", "1:1: unterminated bytes literal\n | b'abc\n | ^"},
      {"'a\nb'",
       "1:1: unterminated string literal (only triple-quoted literals may span lines)\n"
       " | 'a\n | ^"},
      {"'a\rb'",
       "1:1: unterminated string literal (only triple-quoted literals may span lines)\n"
       " | 'a\n | ^"},
      {"'abc\\", "1:1: unterminated string literal\n | 'abc\\\n | ^"},
      {"r'\\''", "1:5: unterminated string literal\n | r'\\''\n | ....^"},
      {"'\\q'", "1:2: invalid escape '\\q'\n | '\\q'\n | .^"},
      {"'\\ '", "1:2: invalid escape: '\\' followed by ' '\n | '\\ '\n | .^"},
      {"'\\\xcf\x80'",
       "1:2: invalid escape: '\\' followed by '\xcf\x80' (U+03C0)\n | '\\\xcf\x80'\n | .^"},
      {"'a\\8'", "1:3: invalid escape '\\8'\n | 'a\\8'\n | ..^"},
      {"'\\400'", "1:2: invalid escape '\\4'\n | '\\400'\n | .^"},
      {"'\\01'",
       "1:2: invalid escape: octal escapes take three digits, \\000 to \\377\n"
       " | '\\01'\n | .^"},
      {"'\\x4'", "1:2: invalid escape: '\\x' needs two hexadecimal digits\n | '\\x4'\n | .^"},
      {"'\\u12'", "1:2: invalid escape: '\\u' needs 4 hexadecimal digits\n | '\\u12'\n | .^"},
      {"'\\U0001F6'",
       "1:2: invalid escape: '\\U' needs 8 hexadecimal digits\n | '\\U0001F6'\n | .^"},
      {"'\\uD800'",
       "1:2: invalid escape: U+D800 is a surrogate, not a code point\n"
       " | '\\uD800'\n | .^"},
      {"'\\U00110000'",
       "1:2: invalid escape: U+110000 is beyond U+10FFFF\n | '\\U00110000'\n | .^"},
      {"b'\\u0041'",
       "1:3: invalid escape '\\u' in a bytes literal (use \\x or octal escapes)\n"
       " | b'\\u0041'\n | ..^"},
      {"b'\\U00000041'",
       "1:3: invalid escape '\\U' in a bytes literal (use \\x or octal escapes)\n"
       " | b'\\U00000041'\n | ..^"},
      {"Foo{a: 1}",
       "1:4: message construction (Name{field: value}) is not supported; use a map "
       "literal {'field': value}\n | Foo{a: 1}\n | ...^"},
      {"a.b.Foo{}",
       "1:8: message construction (Name{field: value}) is not supported; use a map "
       "literal {'field': value}\n | a.b.Foo{}\n | .......^"},
      {"`a`", "1:1: a quoted name is only allowed as a field name after '.'\n | `a`\n | ^"},
      {"a.`b", "1:3: unterminated quoted field name\n | a.`b\n | ..^"},
      {"a.``", "1:3: empty quoted field name\n | a.``\n | ..^"},
      {"a.`b\xc3\xa9`",
       "1:5: character '\xc3\xa9' (U+00E9) is not allowed in a quoted field name\n"
       " | a.`b\xc3\xa9`\n | ....^"},
      {"a.`b!`", "1:5: character '!' is not allowed in a quoted field name\n | a.`b!`\n | ....^"},
      {"a.`b`()", "1:6: unexpected token '('\n | a.`b`()\n | .....^"},
      /* Multi-line sources: the line and column of the error, and only its line. */
      {"a &&\n  b +\n  )", "3:3: unexpected token ')'\n |   )\n | ..^"},
      {"a\r\n+ )", "2:3: unexpected token ')'\n | + )\n | ..^"},
      {"a\r+ )", "2:3: unexpected token ')'\n | + )\n | ..^"},
      {"x // c\n)", "2:1: unexpected token ')'\n | )\n | ^"},
      /* Tabs stay tabs in the caret line, so the caret lines up. */
      {"\ta +\t)", "1:6: unexpected token ')'\n | \ta +\t)\n | \t...\t^"},
      /* Columns count code points. */
      {"'\xe6\x97\xa5\xe6\x9c\xac' + )",
       "1:8: unexpected token ')'\n | '\xe6\x97\xa5\xe6\x9c\xac' + )\n"
       " | .......^"},
      /* The first error wins, even when a later token is bad too. */
      {"a ) 'unterminated", "1:3: unexpected token ')'\n | a ) 'unterminated\n | ..^"},
      {"'\\q' + 'abc", "1:2: invalid escape '\\q'\n | '\\q' + 'abc\n | .^"},
      {"f(1, 'x\\q')", "1:8: invalid escape '\\q'\n | f(1, 'x\\q')\n | .......^"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    if (!cases[i].want) continue;
    expr_error err;
    const char *got = parse_n(cases[i].src, strlen(cases[i].src), NULL, &err);
    char want[1200];
    snprintf(want, sizeof want, "ERROR: %s", cases[i].want);
    CHECK_MSG(strcmp(got, want) == 0, "source %s\n--- got:\n%s\n--- want:\n%s", cases[i].src, got,
              want);
  }
  /* The structured fields agree with the text. */
  expr_error err;
  parse_n("a &&\n  b +\n  )", 13, NULL, &err);
  CHECK(err.line == 3 && err.column == 3 && err.offset == 13);
  parse_n("'\xe6\x97\xa5' + )", 9, NULL, &err);
  CHECK(err.line == 1 && err.column == 7 && err.offset == 8);
  /* Leading dot followed by something that is not a name. */
  CHECK_STR(parse(". 1"),
            "ERROR: 1:3: expected a name after '.' but found token '1'\n | . 1\n | ..^");
  CHECK_STR(parse(".while"),
            "ERROR: 1:2: reserved word 'while' cannot be an identifier\n | .while\n | .^");
}

static void test_invalid_utf8(void) {
  static const char *const bad[] = {
      "'\xff'",
      "a + \xc3",
      "'\xed\xa0\x80'" /* surrogate */,
      "b'\xc0\x80'" /* overlong */,
      "'\xf4\x90\x80\x80'" /* > U+10FFFF */,
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    expr_error err;
    const char *got = parse_n(bad[i], strlen(bad[i]), NULL, &err);
    CHECK_MSG(strstr(got, "invalid UTF-8") != NULL, "%s", got);
    CHECK(strchr(err.message, '\xff') == NULL); /* the excerpt stays printable */
  }
  expr_error err;
  parse_n("ab + '\xff'", 8, NULL, &err);
  CHECK_STR(err.message, "1:7: invalid UTF-8 (byte 0xFF)\n | ab + '?'\n | ......^");
}

/* The excerpt of a long line is a window around the column. */
static void test_long_line_excerpt(void) {
  char src[400];
  memset(src, 0, sizeof src);
  for (int i = 0; i < 150; i++) memcpy(src + i * 2, "a+", 2);
  src[300] = ')';
  expr_error err;
  parse_n(src, strlen(src), NULL, &err);
  CHECK(err.line == 1 && err.column == 301);
  /* "...", 100 code points of the line, caret under the ')' */
  const char *nl = strchr(err.message, '\n');
  CHECK(nl && strncmp(nl, "\n | ...", 7) == 0);
  const char *caret_line = nl ? strchr(nl + 1, '\n') : NULL;
  CHECK(caret_line && strlen(caret_line) == 4 + 3 + 99 + 1);
  CHECK(caret_line && caret_line[strlen(caret_line) - 1] == '^');
  /* The caret sits under the ')' in the text line. */
  if (nl && caret_line) {
    size_t text_len = (size_t)(caret_line - nl) - 4;
    CHECK(text_len == 3 + 100 && nl[4 + text_len - 1] == ')');
  }
  /* The message never overflows, whatever the line. */
  char big[5000];
  memset(big, 'x', sizeof big);
  big[2500] = '#';
  parse_n(big, sizeof big, NULL, &err);
  CHECK(strlen(err.message) < sizeof err.message);
  CHECK(err.column == 2501);
}

/* ---- limits ---- */

static char *repeat3(const char *pre, int n, const char *mid, const char *post) {
  size_t lp = strlen(pre), lm = strlen(mid), lq = strlen(post);
  char *s = malloc(lp * (size_t)n + lm + lq * (size_t)n + 1);
  size_t o = 0;
  for (int i = 0; i < n; i++, o += lp) memcpy(s + o, pre, lp);
  memcpy(s + o, mid, lm);
  o += lm;
  for (int i = 0; i < n; i++, o += lq) memcpy(s + o, post, lq);
  s[o] = 0;
  return s;
}

static int parses(const char *src, const expr_opts *opts) {
  return strncmp(parse_n(src, strlen(src), opts, NULL), "ERROR", 5) != 0;
}

static int fails_with(const char *src, const expr_opts *opts, const char *what) {
  const char *got = parse_n(src, strlen(src), opts, NULL);
  return strncmp(got, "ERROR", 5) == 0 && strstr(got, what) != NULL;
}

static void test_depth_limit(void) {
  const char *deep = "nested too deeply";
  char *s;
  /* The conformance suite's deep-but-legal cases, and a lot more. */
  CHECK(parses("a[a[a[a[a[a[a[a[a[a[a[a[0]]]]]]]]]]]]", NULL));
  s = repeat3("(", 200, "7", ")");
  CHECK(parses(s, NULL));
  free(s);
  s = repeat3("[", 120, "0", "]");
  CHECK(parses(s, NULL));
  free(s);
  s = repeat3("f(", 120, "0", ")");
  CHECK(parses(s, NULL));
  free(s);
  s = repeat3("{0: ", 120, "0", "}");
  CHECK(parses(s, NULL));
  free(s);
  s = repeat3("!", 200, "true", "");
  CHECK(parses(s, NULL));
  free(s);
  s = repeat3("-", 200, "x", "");
  CHECK(parses(s, NULL));
  free(s);
  s = repeat3("", 200, "x", ".a");
  CHECK(parses(s, NULL));
  free(s);
  s = repeat3("", 200, "x", "[0]");
  CHECK(parses(s, NULL));
  free(s);
  s = repeat3("", 200, "1", " + 1");
  CHECK(parses(s, NULL));
  free(s);
  s = repeat3("true ? 1 : ", 120, "2", "");
  CHECK(parses(s, NULL));
  free(s);
  /* Logical chains are balanced: thousands of conditions are fine. */
  s = repeat3("", 5000, "x", " || y");
  CHECK(parses(s, NULL));
  free(s);
  s = repeat3("", 5000, "x", " && y");
  CHECK(parses(s, NULL));
  free(s);

  /* Past the default limit: an error, not a crash. */
  s = repeat3("(", 50000, "7", ")");
  CHECK(fails_with(s, NULL, deep));
  free(s);
  s = repeat3("[", 30000, "0", "]");
  CHECK(fails_with(s, NULL, deep));
  free(s);
  s = repeat3("!", 30000, "true", "");
  CHECK(fails_with(s, NULL, deep));
  free(s);
  s = repeat3("", 30000, "x", ".a");
  CHECK(fails_with(s, NULL, deep));
  free(s);
  s = repeat3("", 30000, "1", "+1");
  CHECK(fails_with(s, NULL, deep));
  free(s);
  s = repeat3("a ? b : ", 10000, "c", "");
  CHECK(fails_with(s, NULL, deep));
  free(s);
  s = repeat3("f(", 10000, "", ")");
  CHECK(fails_with(s, NULL, deep));
  free(s);
  s = repeat3("l.all(x, ", 10000, "true", ")");
  CHECK(fails_with(s, NULL, deep));
  free(s);

  /* The limit is configurable, and exact for nested parentheses. */
  expr_opts o = {0};
  o.max_depth = 10;
  s = repeat3("(", 9, "1", ")");
  CHECK(parses(s, &o));
  free(s);
  s = repeat3("(", 10, "1", ")");
  CHECK(fails_with(s, &o, deep));
  CHECK_STR(parse_n(s, strlen(s), &o, NULL),
            "ERROR: 1:11: expression is nested too deeply (more than 10 levels)\n"
            " | ((((((((((1))))))))))\n | ..........^");
  free(s);
  o.max_depth = 1000;
  s = repeat3("(", 900, "1", ")");
  CHECK(parses(s, &o));
  free(s);
}

static void test_length_limit(void) {
  expr_opts o = {0};
  o.max_length = 16;
  CHECK(parses("1 + 2 + 3 + 4 +5", &o)); /* exactly 16 bytes */
  CHECK_STR(parse_n("1 + 2 + 3 + 4 + 5", 17, &o, NULL),
            "ERROR: 1:17: expression is too long (17 bytes; the limit is 16)\n"
            " | 1 + 2 + 3 + 4 + 5\n | ................^");
  /* The default is 100 KiB. */
  size_t n = 100 * 1024 + 1;
  char *s = malloc(n + 1);
  memset(s, ' ', n);
  s[0] = '1';
  s[n] = 0;
  CHECK(fails_with(s, NULL, "too long"));
  s[n - 1] = 0;
  CHECK(parses(s, NULL));
  free(s);
}

/* A bounded arena: running out is a clean error. */
static void test_arena_exhaustion(void) {
  for (size_t limit = 64; limit < 200000; limit *= 2) {
    arena a;
    arena_init(&a, NULL, 0, limit);
    ast *e = NULL;
    expr_error err;
    int rc = expr_parse(&a, "[1, 2, 3, 'abcdef', {1: 2}] + [4]", 33, NULL, &e, &err);
    CHECK(rc == 0 ? e != NULL : strstr(err.message, "out of memory") != NULL);
    arena_free(&a);
  }
}

/* ---- robustness: every prefix and every single-byte change ---- */

static void test_prefixes_and_mutations(void) {
  static const char *const srcs[] = {
      "a.b.c[0] + f(x, y).size() * -3 % 2 - -9223372036854775808 >= 1.5e-3 ? 'yes' : \"no\"",
      "has(m.k) && m.k.all(x, x in [1, 2u, 3.0]) || !l.exists_one(y, y == b'\\xff\\101')",
      "l.map(x, x > 0, x * 2).filter(z, z != null) == [] && {'a': r'''\\n''', 1: .5}.a != ''",
      "'''multi\nline''' + \"\\u00e9\\U0001F600\\x41\\101\" + R'raw\\' // trailing\n",
      "{'if': 1}.if + a.while() + x.`quoted-name` + .root.name",
  };
  for (size_t k = 0; k < sizeof srcs / sizeof *srcs; k++) {
    const char *src = srcs[k];
    size_t len = strlen(src);
    CHECK_MSG(parses(src, NULL), "%s", parse(src));
    for (size_t i = 0; i <= len; i++) {
      expr_error err;
      const char *got = parse_n(src, i, NULL, &err);
      int is_err = strncmp(got, "ERROR", 5) == 0;
      /* Either a tree, or an error that names a place inside the source. */
      CHECK(!is_err || (err.line >= 1 && err.column >= 1 && err.offset <= i));
    }
    /* Replace each byte by a handful of troublesome ones. */
    static const char subst[] = {'(', ')', '[', '\'', '"', '\\', '.', '-', '!', '{', '`', 0, '\n'};
    char copy[512];
    for (size_t i = 0; i < len; i++) {
      for (size_t j = 0; j < sizeof subst; j++) {
        memcpy(copy, src, len);
        copy[i] = subst[j];
        expr_error err;
        const char *got = parse_n(copy, len, NULL, &err);
        if (strncmp(got, "ERROR", 5) == 0) CHECK(err.line >= 1 && err.offset <= len);
      }
    }
  }
}

/* ---- the conformance suite's expressions all parse ---- */

/* Extracts the JSON string value of "expr" from one line of cases.jsonl
 * into out; returns its length or -1. */
static long json_expr(const char *line, char *out, size_t size) {
  const char *p = strstr(line, "\"expr\":\"");
  if (!p) return -1;
  p += 8;
  size_t o = 0;
  while (*p && *p != '"') {
    uint32_t cp;
    if (*p == '\\') {
      p++;
      switch (*p) {
        case 'n':
          cp = '\n';
          break;
        case 't':
          cp = '\t';
          break;
        case 'r':
          cp = '\r';
          break;
        case 'b':
          cp = '\b';
          break;
        case 'f':
          cp = '\f';
          break;
        case 'u': {
          cp = (uint32_t)strtoul((char[]){p[1], p[2], p[3], p[4], 0}, NULL, 16);
          p += 4;
          if (cp >= 0xD800 && cp < 0xDC00 && p[1] == '\\' && p[2] == 'u') {
            uint32_t lo = (uint32_t)strtoul((char[]){p[3], p[4], p[5], p[6], 0}, NULL, 16);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
          }
          break;
        }
        default:
          cp = (unsigned char)*p;
          break;
      }
      p++;
      if (o + 4 >= size) return -1;
      o += (size_t)utf8_encode(cp, out + o);
    } else {
      if (o + 1 >= size) return -1;
      out[o++] = *p++;
    }
  }
  return (long)o;
}

static void test_conformance_expressions_parse(void) {
  FILE *f = fopen("tests/conformance/cel/cases.jsonl", "r");
  CHECK_MSG(f != NULL, "run from the repository root");
  if (!f) return;
  static char line[1 << 16], expr[1 << 16];
  int total = 0, core = 0, failed = 0, parsed = 0;
  while (fgets(line, sizeof line, f)) {
    long n = json_expr(line, expr, sizeof expr);
    if (n < 0) continue;
    total++;
    int is_core = strstr(line, "\"core\":true") != NULL;
    core += is_core;
    const char *got = parse_n(expr, (size_t)n, NULL, NULL);
    if (strncmp(got, "ERROR", 5) != 0) {
      parsed++;
    } else if (is_core || !(strstr(got, "'?'") || strstr(got, "cel.iterVar"))) {
      failed++;
      fprintf(stderr, "conformance expression does not parse: %.*s\n%s\n", (int)n, expr, got);
    }
  }
  fclose(f);
  CHECK(total > 1500 && core > 900);
  CHECK(failed == 0);
  /* Outside the core, only extension syntax verdict does not implement
   * (optional `?.`/`[?`, cel.block's generated macro variables) fails. */
  printf("conformance: %d of %d expressions parse (%d core, all of which must)\n", parsed, total,
         core);
}

int main(void) {
  TEST_RUN(test_precedence_and_associativity);
  TEST_RUN(test_numeric_literals);
  TEST_RUN(test_other_literals);
  TEST_RUN(test_string_values);
  TEST_RUN(test_macros);
  TEST_RUN(test_reserved_words_and_names);
  TEST_RUN(test_positions);
  TEST_RUN(test_error_messages);
  TEST_RUN(test_invalid_utf8);
  TEST_RUN(test_long_line_excerpt);
  TEST_RUN(test_depth_limit);
  TEST_RUN(test_length_limit);
  TEST_RUN(test_arena_exhaustion);
  TEST_RUN(test_prefixes_and_mutations);
  TEST_RUN(test_conformance_expressions_parse);
  TEST_END();
}
