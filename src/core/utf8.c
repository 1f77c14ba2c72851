/* utf8.c — see utf8.h. The ASCII fast path checks 8 bytes at a time: most of
 * what verdict reads (paths, headers, identifiers) is ASCII. */
#include "core/utf8.h"

#include <string.h>

size_t utf8_validate(const char *s, size_t len, int *ascii) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  int all_ascii = 1;
  while (i < len) {
    if (i + 8 <= len) {
      uint64_t w;
      memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    if (p[i] < 0x80) {
      i++;
      continue;
    }
    all_ascii = 0;
    uint32_t cp;
    int n = utf8_decode(p + i, len - i, &cp);
    if (n == 0) {
      if (ascii) *ascii = 0;
      return i;
    }
    i += (size_t)n;
  }
  if (ascii) *ascii = all_ascii;
  return len;
}

size_t utf8_count(const char *s, size_t len) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    if (((unsigned char)s[i] & 0xC0) != 0x80) n++;
  return n;
}
