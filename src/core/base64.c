/* base64.c — see base64.h. Table-driven both ways; the decoder works a
 * group of four characters at a time and checks each one, so a bad
 * character is reported where it stands. */
#include "core/base64.h"

#include <stdint.h>

static const char enc_table[64] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* 0..63 for alphabet characters, 64 for '=', 255 for anything else. */
static const uint8_t dec_table[256] = {
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 255, 62,  255, 255, 255, 63,  52,  53,  54,  55,  56,  57,  58,  59,  60,
    61,  255, 255, 255, 64,  255, 255, 255, 0,   1,   2,   3,   4,   5,   6,   7,   8,   9,   10,
    11,  12,  13,  14,  15,  16,  17,  18,  19,  20,  21,  22,  23,  24,  25,  255, 255, 255, 255,
    255, 255, 26,  27,  28,  29,  30,  31,  32,  33,  34,  35,  36,  37,  38,  39,  40,  41,  42,
    43,  44,  45,  46,  47,  48,  49,  50,  51,  255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 255, 255, 255, 255, 255,
};

size_t base64_encode(const void *src, size_t len, char *out) {
  const unsigned char *s = src;
  char *o = out;
  size_t i = 0;
  for (; i + 3 <= len; i += 3) {
    uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
    *o++ = enc_table[v >> 18];
    *o++ = enc_table[(v >> 12) & 63];
    *o++ = enc_table[(v >> 6) & 63];
    *o++ = enc_table[v & 63];
  }
  if (len - i == 1) {
    uint32_t v = (uint32_t)s[i] << 16;
    *o++ = enc_table[v >> 18];
    *o++ = enc_table[(v >> 12) & 63];
    *o++ = '=';
    *o++ = '=';
  } else if (len - i == 2) {
    uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
    *o++ = enc_table[v >> 18];
    *o++ = enc_table[(v >> 12) & 63];
    *o++ = enc_table[(v >> 6) & 63];
    *o++ = '=';
  }
  return (size_t)(o - out);
}

static int fail(size_t *bad_at, size_t at) {
  if (bad_at) *bad_at = at;
  return -1;
}

int base64_decode(const char *src, size_t len, void *out, size_t *out_len, size_t *bad_at) {
  const unsigned char *s = (const unsigned char *)src;
  unsigned char *o = out;
  if (len % 4 != 0) return fail(bad_at, len);
  for (size_t i = 0; i < len; i += 4) {
    uint8_t c[4];
    for (int k = 0; k < 4; k++) {
      c[k] = dec_table[s[i + (size_t)k]];
      if (c[k] == 255) return fail(bad_at, i + (size_t)k);
    }
    int last = (i + 4 == len);
    /* '=' is allowed only as "xx==" or "xxx=" in the last group. */
    if (c[0] == 64) return fail(bad_at, i);
    if (c[1] == 64) return fail(bad_at, i + 1);
    if (c[2] == 64 && (!last || c[3] != 64)) return fail(bad_at, i + 2);
    if (c[3] == 64 && !last) return fail(bad_at, i + 3);
    uint32_t v = ((uint32_t)c[0] << 18) | ((uint32_t)c[1] << 12);
    if (c[2] == 64) {
      /* One byte; the low 4 bits of the second character must be zero. */
      if (c[1] & 15) return fail(bad_at, i + 1);
      *o++ = (unsigned char)(v >> 16);
    } else if (c[3] == 64) {
      v |= (uint32_t)c[2] << 6;
      if (c[2] & 3) return fail(bad_at, i + 2);
      *o++ = (unsigned char)(v >> 16);
      *o++ = (unsigned char)(v >> 8);
    } else {
      v |= ((uint32_t)c[2] << 6) | c[3];
      *o++ = (unsigned char)(v >> 16);
      *o++ = (unsigned char)(v >> 8);
      *o++ = (unsigned char)v;
    }
  }
  *out_len = (size_t)(o - (unsigned char *)out);
  return 0;
}
