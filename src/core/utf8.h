/* utf8.h — UTF-8 decoding, encoding and validation, shared by the JSON
 * reader, the CEL lexer and the string functions. Strict: overlong forms,
 * surrogates (U+D800..U+DFFF) and code points above U+10FFFF are invalid. */
#ifndef VD_CORE_UTF8_H
#define VD_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes one code point from s[0..len). Returns its byte length (1..4) and
 * sets *cp, or returns 0 when the bytes there are not valid UTF-8. */
static inline int utf8_decode(const unsigned char *s, size_t len, uint32_t *cp) {
  if (len == 0) return 0;
  unsigned c = s[0];
  if (c < 0x80) { *cp = c; return 1; }
  if (c < 0xC2) return 0;
  if (c < 0xE0) {
    if (len < 2 || (s[1] & 0xC0) != 0x80) return 0;
    *cp = ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu);
    return 2;
  }
  if (c < 0xF0) {
    if (len < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
    uint32_t v = ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
    if (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return 3;
  }
  if (c < 0xF5) {
    if (len < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
      return 0;
    uint32_t v = ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) |
                 (s[3] & 0x3Fu);
    if (v < 0x10000 || v > 0x10FFFF) return 0;
    *cp = v;
    return 4;
  }
  return 0;
}

/* Encodes cp (must be a valid scalar value) into out; returns the length (1..4). */
static inline int utf8_encode(uint32_t cp, char *out) {
  if (cp < 0x80) { out[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Returns the offset of the first invalid byte, or len when s is valid.
 * Sets *ascii (if given) to 1 when every byte is < 0x80. */
size_t utf8_validate(const char *s, size_t len, int *ascii);
/* Number of code points in valid UTF-8. */
size_t utf8_count(const char *s, size_t len);

#endif
