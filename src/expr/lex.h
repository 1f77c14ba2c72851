/* lex.h — the CEL lexer: source bytes in, one token at a time out.
 *
 * The lexer follows the lexis of the CEL language definition (cel-spec
 * doc/langdef.md): identifiers, reserved words, int/uint/double literals,
 * quoted/triple-quoted/raw strings and bytes with all of CEL's escapes,
 * `//` comments, and the operator punctuation. String and bytes literals are
 * decoded into the arena as they are lexed, so the parser receives ready
 * values.
 *
 * A lexical error does not stop anything by itself: the lexer returns a
 * T_ERROR token (and keeps returning it) with the message in the lexer.
 * The parser reports it only when that token is reached, so the first error
 * in the source is the one reported even when the parser looks ahead.
 *
 * The source must already be valid UTF-8 (expr_parse checks that first). */
#ifndef VD_EXPR_LEX_H
#define VD_EXPR_LEX_H

#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"

typedef enum tok_kind {
  T_EOF,
  T_ERROR,
  T_IDENT,  /* identifier; `reserved` set for a reserved word such as `if` */
  T_QIDENT, /* `back-quoted` field name; s/n hold the name without the quotes */
  T_INT,    /* magnitude in u (the parser applies a sign and checks the range) */
  T_UINT,   /* u */
  T_DOUBLE, /* d */
  T_STRING, /* decoded UTF-8 in s/n; ascii set when every byte is < 0x80 */
  T_BYTES,  /* decoded bytes in s/n */
  T_TRUE,
  T_FALSE,
  T_NULL,
  T_IN,
  T_LPAREN,
  T_RPAREN,
  T_LBRACKET,
  T_RBRACKET,
  T_LBRACE,
  T_RBRACE,
  T_DOT,
  T_COMMA,
  T_COLON,
  T_QUESTION,
  T_PLUS,
  T_MINUS,
  T_STAR,
  T_SLASH,
  T_PERCENT,
  T_NOT,
  T_EQ,
  T_NE,
  T_LT,
  T_LE,
  T_GT,
  T_GE,
  T_AND,
  T_OR,
} tok_kind;

typedef struct token {
  uint8_t kind;     /* tok_kind */
  uint8_t reserved; /* T_IDENT: a reserved word (`if`, `while`, ...) */
  uint8_t ascii;    /* T_STRING: pure ASCII */
  uint32_t pos;     /* byte offset of the first character */
  uint32_t end;     /* byte offset just past the token */
  uint64_t u;       /* T_INT magnitude, T_UINT value */
  double d;         /* T_DOUBLE */
  const char *s;    /* T_IDENT, T_QIDENT, T_STRING, T_BYTES: arena copy, NUL-terminated */
  uint32_t n;
} token;

typedef struct lexer {
  arena *a;
  const char *src;
  size_t len;
  size_t pos;     /* next byte to read */
  int failed;     /* a T_ERROR was produced; every later call repeats it */
  size_t err_pos; /* where the error is */
  char err[160];  /* the error message, without a location */
} lexer;

void lex_init(lexer *lx, arena *a, const char *src, size_t len);
/* Reads the next token into *t. After the end, keeps returning T_EOF; after
 * an error, keeps returning T_ERROR (t->pos = lx->err_pos). */
void lex_next(lexer *lx, token *t);
/* Human-readable name of a token kind for messages: "')'", "end of input", ... */
const char *lex_kind_name(tok_kind k);

#endif
