/* error.c — expression error messages that name their place.
 *
 * expr_error_at turns a byte offset into "LINE:COL: message" followed by a
 * two-line excerpt: the source line, then a caret under the column:
 *
 *   1:5: unexpected token ')'
 *    | a + )
 *    | ....^
 *
 * Lines end at LF, CRLF or a lone CR (CEL's NEWLINE). Columns count code
 * points, so the caret lines up under non-ASCII text in a terminal; a tab in
 * the source stays a tab in the caret line for the same reason. Control
 * characters and invalid UTF-8 are shown as '?' (each counting one column)
 * so a message can always be printed safely. Long lines are cut to a window
 * around the column, marked with "...". */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/utf8.h"
#include "expr/expr.h"

#define WINDOW_BEFORE 50 /* code points shown before the column on a long line */
#define WINDOW_WIDTH 100 /* code points shown in all */

/* Steps over one display unit at s[i]: a code point, or one invalid byte. */
static size_t step(const char *s, size_t len, size_t i) {
  uint32_t cp;
  int n = utf8_decode((const unsigned char *)s + i, len - i, &cp);
  return i + (n > 0 ? (size_t)n : 1);
}

static int is_newline(char c) { return c == '\n' || c == '\r'; }

void expr_error_at(expr_error *err, const char *src, size_t len, size_t offset, const char *fmt,
                   ...) {
  char msg[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);

  if (!src) {
    err->line = 0;
    err->column = 0;
    err->offset = 0;
    snprintf(err->message, sizeof err->message, "%s", msg);
    return;
  }
  if (offset > len) offset = len;

  /* Find the line holding offset and count lines before it. */
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; i++) {
    if (src[i] == '\n' || (src[i] == '\r' && (i + 1 >= len || src[i + 1] != '\n'))) {
      line++;
      line_start = i + 1;
    }
  }
  size_t line_end = line_start;
  while (line_end < len && !is_newline(src[line_end])) line_end++;

  /* Column in code points; offset may sit inside a CRLF pair or past the
   * line's end (at the end of input), which still counts from line_start. */
  size_t col0 = 0; /* 0-based */
  for (size_t i = line_start; i < offset && i < line_end; i = step(src, len, i)) col0++;
  if (offset > line_end) col0 += offset - line_end;
  size_t line_cps = 0;
  for (size_t i = line_start; i < line_end; i = step(src, len, i)) line_cps++;

  err->line = line;
  err->column = (int)col0 + 1;
  err->offset = offset;

  /* Choose the window of code points [from, to) to display. */
  size_t from = 0, to = line_cps;
  if (line_cps > WINDOW_WIDTH) {
    from = col0 > WINDOW_BEFORE ? col0 - WINDOW_BEFORE : 0;
    to = from + WINDOW_WIDTH;
    if (to > line_cps) {
      to = line_cps;
      from = to > WINDOW_WIDTH ? to - WINDOW_WIDTH : 0;
    }
  }

  char text[WINDOW_WIDTH * 4 + 16], caret[WINDOW_WIDTH + 16];
  size_t tn = 0, cn = 0;
  if (from > 0) {
    memcpy(text, "...", 3);
    memcpy(caret, "...", 3);
    tn = cn = 3;
  }
  size_t k = 0;
  for (size_t i = line_start; i < line_end && k < to; k++) {
    size_t next = step(src, len, i);
    if (k >= from) {
      unsigned char c = (unsigned char)src[i];
      uint32_t cp;
      int ok = utf8_decode((const unsigned char *)src + i, len - i, &cp) > 0;
      if (c == '\t') {
        text[tn++] = '\t';
      } else if (!ok || c < 0x20 || c == 0x7F) {
        text[tn++] = '?';
      } else {
        memcpy(text + tn, src + i, next - i);
        tn += next - i;
      }
      if (k < col0) caret[cn++] = c == '\t' ? '\t' : '.';
    }
    i = next;
  }
  if (to < line_cps) {
    memcpy(text + tn, "...", 3);
    tn += 3;
  }
  text[tn] = 0;
  /* Past the end of the line (the caret sits after the last character). */
  for (size_t extra = col0 > line_cps ? col0 - line_cps : 0; extra > 0 && cn < WINDOW_WIDTH + 8;
       extra--)
    caret[cn++] = '.';
  caret[cn++] = '^';
  caret[cn] = 0;

  snprintf(err->message, sizeof err->message, "%d:%zu: %s\n | %s\n | %s", line, col0 + 1, msg, text,
           caret);
}
