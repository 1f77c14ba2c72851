/* lex.c — the CEL lexer (see lex.h).
 *
 * Written by hand rather than generated: the lexis is small, and a hand
 * lexer gives precise positions and messages a policy author can act on
 * ("invalid escape '\q'", "integer literal out of range") at no run-time
 * cost. It does not know the grammar: whether `if` may appear here, or
 * whether `-` folds into a literal, is the parser's business.
 *
 * Literal rules (langdef "Lexis"):
 *   int     DIGIT+ | 0x HEXDIGIT+          uint: the same with a u/U suffix
 *   double  DIGIT* . DIGIT+ EXPONENT? | DIGIT+ EXPONENT   (so `.5` but not `1.`)
 *   string  [rR]? then '…' "…" '''…''' """…""";   bytes: [bB] before that
 * In strings, \x.. and octal escapes denote code points; in bytes they
 * denote octets, and \u/\U are not allowed. Raw strings keep every
 * backslash. Single-line strings may not contain CR or LF. */
#include "expr/lex.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"

void lex_init(lexer *lx, arena *a, const char *src, size_t len) {
  memset(lx, 0, sizeof *lx);
  lx->a = a;
  lx->src = src;
  lx->len = len;
}

/* Records the first lexical error; returns T_ERROR for convenience. */
static int lex_fail(lexer *lx, token *t, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int lex_fail(lexer *lx, token *t, size_t at, const char *fmt, ...) {
  if (!lx->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lx->err, sizeof lx->err, fmt, ap);
    va_end(ap);
    lx->failed = 1;
    lx->err_pos = at;
  }
  t->kind = T_ERROR;
  t->pos = (uint32_t)lx->err_pos;
  t->end = (uint32_t)lx->err_pos;
  return T_ERROR;
}

static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_ident_start(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_ident_char(int c) { return is_ident_start(c) || is_digit(c); }
static int hex_value(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The byte at i, or -1 past the end. */
static int at(const lexer *lx, size_t i) { return i < lx->len ? (unsigned char)lx->src[i] : -1; }

/* Describes the character at src[i] for a message, quotes included:
 * '#', '\x01' for control characters, and 'π' (U+03C0) beyond ASCII, where
 * the character may be invisible (a BOM) or look like an ASCII one. */
static const char *describe_char(const lexer *lx, size_t i, char *buf, size_t size) {
  uint32_t cp;
  int n = utf8_decode((const unsigned char *)lx->src + i, lx->len - i, &cp);
  if (n <= 0) {
    snprintf(buf, size, "'\\x%02X'", (unsigned char)lx->src[i]);
  } else if (cp < 0x20 || cp == 0x7F) {
    snprintf(buf, size, "'\\x%02X'", (unsigned)cp);
  } else if (cp < 0x80) {
    snprintf(buf, size, "'%c'", (char)cp);
  } else {
    snprintf(buf, size, "'%.*s' (U+%04X)", n, lx->src + i, (unsigned)cp);
  }
  return buf;
}

/* A hint for characters that look like CEL punctuation but are not. */
static const char *lookalike_hint(const lexer *lx, size_t i) {
  uint32_t cp;
  if (utf8_decode((const unsigned char *)lx->src + i, lx->len - i, &cp) <= 0) return "";
  switch (cp) {
    case 0x2018:
    case 0x2019:
    case 0x201C:
    case 0x201D:
      return "; strings are quoted with ASCII ' or \"";
    case 0x2212:
    case 0x2013:
    case 0x2014:
      return "; use ASCII '-' for minus";
    case 0xFEFF:
      return "; remove the byte order mark";
    case 0x00A0:
    case 0x2009:
    case 0x200B:
      return "; use an ordinary space";
  }
  return "";
}

/* ---- whitespace and comments ---- */

static void skip_space(lexer *lx) {
  for (;;) {
    int c = at(lx, lx->pos);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') {
      lx->pos++;
    } else if (c == '/' && at(lx, lx->pos + 1) == '/') {
      lx->pos += 2;
      while (lx->pos < lx->len && lx->src[lx->pos] != '\n' && lx->src[lx->pos] != '\r') lx->pos++;
    } else {
      return;
    }
  }
}

/* ---- numbers ---- */

static int lex_number(lexer *lx, token *t) {
  size_t start = lx->pos, i = lx->pos;
  int is_float = 0;

  if (at(lx, i) == '0' && at(lx, i + 1) == 'x') {
    i += 2;
    if (hex_value(at(lx, i)) < 0)
      return lex_fail(lx, t, start, "invalid hexadecimal literal: no digits after '0x'");
    uint64_t v = 0;
    int overflow = 0;
    for (; hex_value(at(lx, i)) >= 0; i++) {
      if (v > (UINT64_MAX >> 4)) overflow = 1;
      v = (v << 4) | (uint64_t)hex_value(at(lx, i));
    }
    if (overflow) return lex_fail(lx, t, start, "integer literal out of range");
    t->u = v;
    t->kind = T_INT;
  } else {
    while (is_digit(at(lx, i))) i++;
    if (at(lx, i) == '.' && is_digit(at(lx, i + 1))) {
      is_float = 1;
      i++;
      while (is_digit(at(lx, i))) i++;
    }
    int e = at(lx, i);
    if (e == 'e' || e == 'E') {
      size_t j = i + 1;
      if (at(lx, j) == '+' || at(lx, j) == '-') j++;
      if (is_digit(at(lx, j))) {
        is_float = 1;
        while (is_digit(at(lx, j))) j++;
        i = j;
      }
    }
    if (is_float) {
      /* strtod needs a NUL-terminated copy, and reads the decimal point of
       * the C locale the host program may have set: the copy spells CEL's
       * '.' that way. Number tokens are short; a pathological one goes to
       * the arena. */
      const char *dp = localeconv()->decimal_point;
      size_t dpn = dp && dp[0] ? strlen(dp) : 1;
      if (!dp || !dp[0]) dp = ".";
      size_t n = i - start;
      char buf[128];
      char *s = buf;
      if (n + dpn + 1 > sizeof buf) {
        s = arena_alloc(lx->a, n + dpn + 1);
        if (!s) return lex_fail(lx, t, start, "out of memory");
      }
      size_t o = 0;
      for (size_t k = start; k < i; k++) {
        if (lx->src[k] == '.') {
          memcpy(s + o, dp, dpn);
          o += dpn;
        } else {
          s[o++] = lx->src[k];
        }
      }
      s[o] = 0;
      errno = 0;
      double d = strtod(s, NULL);
      if (errno == ERANGE && isinf(d)) return lex_fail(lx, t, start, "double literal out of range");
      t->d = d;
      t->kind = T_DOUBLE;
    } else {
      uint64_t v = 0;
      int overflow = 0;
      for (size_t k = start; k < i; k++) {
        unsigned dgt = (unsigned)(lx->src[k] - '0');
        if (v > (UINT64_MAX - dgt) / 10) overflow = 1;
        v = v * 10 + dgt;
      }
      if (overflow) return lex_fail(lx, t, start, "integer literal out of range");
      t->u = v;
      t->kind = T_INT;
    }
  }
  if (t->kind == T_INT && (at(lx, i) == 'u' || at(lx, i) == 'U')) {
    i++;
    t->kind = T_UINT;
  }
  t->pos = (uint32_t)start;
  t->end = (uint32_t)i;
  lx->pos = i;
  return t->kind;
}

/* ---- strings and bytes ---- */

/* Appends code point cp as UTF-8. */
static size_t put_cp(char *out, size_t o, uint32_t cp) {
  return o + (size_t)utf8_encode(cp, out + o);
}

/* Decodes one escape starting at the backslash src[i]; writes to out[o..]
 * and returns the new o, advancing *ip past the escape. Returns (size_t)-1
 * after recording an error. */
static size_t decode_escape(lexer *lx, token *t, size_t *ip, char *out, size_t o, int bytes) {
  size_t i = *ip;
  int c = at(lx, i + 1);
  char rb[32];
  switch (c) {
    case 'a':
      out[o++] = '\a';
      *ip = i + 2;
      return o;
    case 'b':
      out[o++] = '\b';
      *ip = i + 2;
      return o;
    case 'f':
      out[o++] = '\f';
      *ip = i + 2;
      return o;
    case 'n':
      out[o++] = '\n';
      *ip = i + 2;
      return o;
    case 'r':
      out[o++] = '\r';
      *ip = i + 2;
      return o;
    case 't':
      out[o++] = '\t';
      *ip = i + 2;
      return o;
    case 'v':
      out[o++] = '\v';
      *ip = i + 2;
      return o;
    case '\\':
    case '?':
    case '"':
    case '\'':
    case '`':
      out[o++] = (char)c;
      *ip = i + 2;
      return o;
    case 'x':
    case 'X': {
      int h1 = hex_value(at(lx, i + 2)), h2 = h1 < 0 ? -1 : hex_value(at(lx, i + 3));
      if (h1 < 0 || h2 < 0) {
        lex_fail(lx, t, i, "invalid escape: '\\%c' needs two hexadecimal digits", c);
        return (size_t)-1;
      }
      uint32_t v = (uint32_t)(h1 * 16 + h2);
      *ip = i + 4;
      if (bytes) {
        out[o++] = (char)v;
        return o;
      }
      return put_cp(out, o, v);
    }
    case 'u':
    case 'U': {
      int nd = c == 'u' ? 4 : 8;
      if (bytes) {
        lex_fail(lx, t, i, "invalid escape '\\%c' in a bytes literal (use \\x or octal escapes)",
                 c);
        return (size_t)-1;
      }
      uint32_t v = 0;
      for (int k = 0; k < nd; k++) {
        int h = hex_value(at(lx, i + 2 + (size_t)k));
        if (h < 0) {
          lex_fail(lx, t, i, "invalid escape: '\\%c' needs %d hexadecimal digits", c, nd);
          return (size_t)-1;
        }
        v = v * 16 + (uint32_t)h;
      }
      if (v >= 0xD800 && v <= 0xDFFF) {
        lex_fail(lx, t, i, "invalid escape: U+%04X is a surrogate, not a code point", (unsigned)v);
        return (size_t)-1;
      }
      if (v > 0x10FFFF) {
        lex_fail(lx, t, i, "invalid escape: U+%X is beyond U+10FFFF", (unsigned)v);
        return (size_t)-1;
      }
      *ip = i + 2 + (size_t)nd;
      return put_cp(out, o, v);
    }
    case '0':
    case '1':
    case '2':
    case '3': {
      int d2 = at(lx, i + 2), d3 = at(lx, i + 3);
      if (d2 < '0' || d2 > '7' || d3 < '0' || d3 > '7') {
        lex_fail(lx, t, i, "invalid escape: octal escapes take three digits, \\000 to \\377");
        return (size_t)-1;
      }
      uint32_t v = (uint32_t)((c - '0') * 64 + (d2 - '0') * 8 + (d3 - '0'));
      *ip = i + 4;
      if (bytes) {
        out[o++] = (char)v;
        return o;
      }
      return put_cp(out, o, v);
    }
    default:
      if (c < 0)
        lex_fail(lx, t, i, "unterminated string literal");
      else if (c > 0x20 && c < 0x7F)
        lex_fail(lx, t, i, "invalid escape '\\%c'", c);
      else
        lex_fail(lx, t, i, "invalid escape: '\\' followed by %s",
                 describe_char(lx, i + 1, rb, sizeof rb));
      return (size_t)-1;
  }
}

/* At lx->pos: optional prefix letters (already measured: plen), then a quote. */
static int lex_string(lexer *lx, token *t, size_t plen, int raw, int bytes) {
  size_t start = lx->pos;
  size_t q = start + plen;
  char quote = lx->src[q];
  int triple = at(lx, q + 1) == quote && at(lx, q + 2) == quote;
  size_t body = q + (triple ? 3 : 1);

  /* Pass 1: find the closing delimiter. */
  size_t i = body, close;
  for (;;) {
    int c = at(lx, i);
    if (c < 0) {
      return lex_fail(lx, t, start, "unterminated %s literal", bytes ? "bytes" : "string");
    }
    if (!triple && (c == '\n' || c == '\r')) {
      return lex_fail(lx, t, start,
                      "unterminated %s literal (only triple-quoted literals may span lines)",
                      bytes ? "bytes" : "string");
    }
    if (c == quote && (!triple || (at(lx, i + 1) == quote && at(lx, i + 2) == quote))) {
      close = i;
      break;
    }
    if (c == '\\' && !raw) {
      int n = at(lx, i + 1);
      if (n < 0 || (!triple && (n == '\n' || n == '\r'))) {
        return lex_fail(lx, t, start, "unterminated %s literal", bytes ? "bytes" : "string");
      }
      i += 2;
      continue;
    }
    i++;
  }

  /* Pass 2: decode. The output is never longer than the body: every escape
   * is at least as long as what it produces. */
  size_t blen = close - body;
  char *out = arena_alloc(lx->a, blen + 1);
  if (!out) return lex_fail(lx, t, start, "out of memory");
  size_t o = 0;
  int ascii = 1;
  for (i = body; i < close;) {
    unsigned char c = (unsigned char)lx->src[i];
    if (c == '\\' && !raw) {
      o = decode_escape(lx, t, &i, out, o, bytes);
      if (o == (size_t)-1) return T_ERROR;
      continue;
    }
    out[o++] = (char)c;
    i++;
  }
  out[o] = 0;
  if (!bytes) {
    for (size_t k = 0; k < o; k++)
      if ((unsigned char)out[k] >= 0x80) {
        ascii = 0;
        break;
      }
  }
  t->kind = bytes ? T_BYTES : T_STRING;
  t->s = out;
  t->n = (uint32_t)o;
  t->ascii = (uint8_t)(bytes ? 0 : ascii);
  t->pos = (uint32_t)start;
  t->end = (uint32_t)(close + (triple ? 3 : 1));
  lx->pos = t->end;
  return t->kind;
}

/* `field-name`: letters, digits, '_', '.', '-', '/', and spaces. */
static int lex_quoted_ident(lexer *lx, token *t) {
  size_t start = lx->pos, i = start + 1;
  for (;; i++) {
    int c = at(lx, i);
    if (c == '`') break;
    if (c < 0 || c == '\n' || c == '\r')
      return lex_fail(lx, t, start, "unterminated quoted field name");
    if (!(is_ident_char(c) || c == '.' || c == '-' || c == '/' || c == ' ')) {
      char rb[32];
      return lex_fail(lx, t, i, "character %s is not allowed in a quoted field name",
                      describe_char(lx, i, rb, sizeof rb));
    }
  }
  if (i == start + 1) return lex_fail(lx, t, start, "empty quoted field name");
  t->s = arena_strndup(lx->a, lx->src + start + 1, i - start - 1);
  if (!t->s) return lex_fail(lx, t, start, "out of memory");
  t->n = (uint32_t)(i - start - 1);
  t->kind = T_QIDENT;
  t->pos = (uint32_t)start;
  t->end = (uint32_t)(i + 1);
  lx->pos = i + 1;
  return T_QIDENT;
}

/* ---- identifiers and words ---- */

/* The keywords and the reserved words, found by length first: every
 * identifier is looked up, and most are not 2 to 9 bytes of one of these. */
#define IS(lit) (memcmp(w, lit, sizeof lit - 1) == 0)

static int is_reserved(const char *w, size_t n) {
  switch (n) {
    case 2:
      return IS("as") || IS("if");
    case 3:
      return IS("for") || IS("let") || IS("var");
    case 4:
      return IS("else") || IS("loop") || IS("void");
    case 5:
      return IS("break") || IS("const") || IS("while");
    case 6:
      return IS("import") || IS("return");
    case 7:
      return IS("package");
    case 8:
      return IS("continue") || IS("function");
    case 9:
      return IS("namespace");
    default:
      return 0;
  }
}

static int lex_word(lexer *lx, token *t) {
  size_t start = lx->pos, i = start;
  while (is_ident_char(at(lx, i))) i++;
  size_t n = i - start;
  const char *w = lx->src + start;
  t->kind = T_IDENT;
  if (n == 4 && IS("true"))
    t->kind = T_TRUE;
  else if (n == 5 && IS("false"))
    t->kind = T_FALSE;
  else if (n == 4 && IS("null"))
    t->kind = T_NULL;
  else if (n == 2 && IS("in"))
    t->kind = T_IN;
  else
    t->reserved = (uint8_t)is_reserved(w, n);
#undef IS
  /* Names are copied so that the tree never points into the caller's
   * source buffer and every name is NUL-terminated. */
  t->s = arena_strndup(lx->a, w, n);
  if (!t->s) return lex_fail(lx, t, start, "out of memory");
  t->n = (uint32_t)n;
  t->pos = (uint32_t)start;
  t->end = (uint32_t)i;
  lx->pos = i;
  return t->kind;
}

/* ---- the dispatcher ---- */

void lex_next(lexer *lx, token *t) {
  memset(t, 0, sizeof *t);
  if (lx->failed) {
    lex_fail(lx, t, lx->err_pos, "%s", lx->err);
    return;
  }
  skip_space(lx);
  size_t p = lx->pos;
  t->pos = t->end = (uint32_t)p;
  int c = at(lx, p);
  if (c < 0) {
    t->kind = T_EOF;
    return;
  }
  int c1 = at(lx, p + 1);

  /* String prefixes: r R b B, and b/B followed by r/R. */
  if (c == 'r' || c == 'R' || c == 'b' || c == 'B') {
    int raw = 0, bytes = 0;
    size_t plen = 0;
    if ((c == 'b' || c == 'B') && (c1 == 'r' || c1 == 'R') &&
        (at(lx, p + 2) == '"' || at(lx, p + 2) == '\'')) {
      bytes = raw = 1;
      plen = 2;
    } else if (c1 == '"' || c1 == '\'') {
      plen = 1;
      if (c == 'r' || c == 'R')
        raw = 1;
      else
        bytes = 1;
    }
    if (plen) {
      lex_string(lx, t, plen, raw, bytes);
      return;
    }
  }
  if (is_ident_start(c)) {
    lex_word(lx, t);
    return;
  }
  if (is_digit(c) || (c == '.' && is_digit(c1))) {
    lex_number(lx, t);
    return;
  }
  if (c == '"' || c == '\'') {
    lex_string(lx, t, 0, 0, 0);
    return;
  }
  if (c == '`') {
    lex_quoted_ident(lx, t);
    return;
  }

  int k = -1;
  size_t n = 1;
  switch (c) {
    case '(':
      k = T_LPAREN;
      break;
    case ')':
      k = T_RPAREN;
      break;
    case '[':
      k = T_LBRACKET;
      break;
    case ']':
      k = T_RBRACKET;
      break;
    case '{':
      k = T_LBRACE;
      break;
    case '}':
      k = T_RBRACE;
      break;
    case '.':
      k = T_DOT;
      break;
    case ',':
      k = T_COMMA;
      break;
    case ':':
      k = T_COLON;
      break;
    case '?':
      k = T_QUESTION;
      break;
    case '+':
      k = T_PLUS;
      break;
    case '-':
      k = T_MINUS;
      break;
    case '*':
      k = T_STAR;
      break;
    case '/':
      k = T_SLASH;
      break;
    case '%':
      k = T_PERCENT;
      break;
    case '!':
      if (c1 == '=')
        k = T_NE, n = 2;
      else
        k = T_NOT;
      break;
    case '=':
      if (c1 == '=')
        k = T_EQ, n = 2;
      else {
        lex_fail(lx, t, p, "unexpected '=' (use '==' to compare)");
        return;
      }
      break;
    case '<':
      if (c1 == '=')
        k = T_LE, n = 2;
      else
        k = T_LT;
      break;
    case '>':
      if (c1 == '=')
        k = T_GE, n = 2;
      else
        k = T_GT;
      break;
    case '&':
      if (c1 == '&')
        k = T_AND, n = 2;
      else {
        lex_fail(lx, t, p, "unexpected '&' (use '&&' for logical and)");
        return;
      }
      break;
    case '|':
      if (c1 == '|')
        k = T_OR, n = 2;
      else {
        lex_fail(lx, t, p, "unexpected '|' (use '||' for logical or)");
        return;
      }
      break;
    default: {
      char rb[32];
      lex_fail(lx, t, p, "unexpected character %s%s", describe_char(lx, p, rb, sizeof rb),
               lookalike_hint(lx, p));
      return;
    }
  }
  t->kind = (uint8_t)k;
  t->end = (uint32_t)(p + n);
  lx->pos = p + n;
}

const char *lex_kind_name(tok_kind k) {
  switch (k) {
    case T_EOF:
      return "end of input";
    case T_ERROR:
      return "invalid token";
    case T_IDENT:
      return "identifier";
    case T_QIDENT:
      return "quoted field name";
    case T_INT:
      return "integer literal";
    case T_UINT:
      return "unsigned integer literal";
    case T_DOUBLE:
      return "double literal";
    case T_STRING:
      return "string literal";
    case T_BYTES:
      return "bytes literal";
    case T_TRUE:
      return "'true'";
    case T_FALSE:
      return "'false'";
    case T_NULL:
      return "'null'";
    case T_IN:
      return "'in'";
    case T_LPAREN:
      return "'('";
    case T_RPAREN:
      return "')'";
    case T_LBRACKET:
      return "'['";
    case T_RBRACKET:
      return "']'";
    case T_LBRACE:
      return "'{'";
    case T_RBRACE:
      return "'}'";
    case T_DOT:
      return "'.'";
    case T_COMMA:
      return "','";
    case T_COLON:
      return "':'";
    case T_QUESTION:
      return "'?'";
    case T_PLUS:
      return "'+'";
    case T_MINUS:
      return "'-'";
    case T_STAR:
      return "'*'";
    case T_SLASH:
      return "'/'";
    case T_PERCENT:
      return "'%'";
    case T_NOT:
      return "'!'";
    case T_EQ:
      return "'=='";
    case T_NE:
      return "'!='";
    case T_LT:
      return "'<'";
    case T_LE:
      return "'<='";
    case T_GT:
      return "'>'";
    case T_GE:
      return "'>='";
    case T_AND:
      return "'&&'";
    case T_OR:
      return "'||'";
  }
  return "token";
}
