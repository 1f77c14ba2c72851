/* json_scan.h — the plain-run scanner the JSON reader and writer share
 * (core only): a string's bytes that need no escape, found 16 bytes at a
 * time. Private to src/core/json_read.c and json_write.c. */
#ifndef VD_CORE_JSON_SCAN_H
#define VD_CORE_JSON_SCAN_H

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* 1 for the bytes a JSON string carries as they are: printable ASCII but
 * '"' and '\\' (DEL included). */
static const unsigned char plain_byte[256] = {
    [0x20 ... 0x21] = 1, [0x23 ... 0x5b] = 1, [0x5d ... 0x7f] = 1};

/* Returns the first byte of [s, end) that ends a plain run in a string —
 * '"', '\\', a control byte (< 0x20) or a non-ASCII byte (>= 0x80) — or end.
 * 16 bytes at a time with SSE2, else 8 at a time in a 64-bit word. */
static inline __attribute__((always_inline)) const char *skip_plain(const char *s,
                                                                    const char *end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (end - s >= 16) {
    __m128i w = _mm_loadu_si128((const __m128i *)(const void *)s);
    /* Signed compare: bytes >= 0x80 are negative, so "< 0x20" takes them too. */
    __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(w, quote), _mm_cmpeq_epi8(w, bslash)),
                             _mm_cmplt_epi8(w, space));
    unsigned bits = (unsigned)_mm_movemask_epi8(m);
    if (bits) return s + __builtin_ctz(bits);
    s += 16;
  }
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  /* The high bit of each byte of `stop` marks a stop byte; borrows may mark
   * bytes after a real stop, never before one, so the lowest mark is exact. */
  const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  while (end - s >= 8) {
    uint64_t w;
    memcpy(&w, s, 8);
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    uint64_t stop = ((w - ones * 0x20) | w | ((q - ones) & ~q) | ((b - ones) & ~b)) & highs;
    if (stop) return s + (__builtin_ctzll(stop) >> 3);
    s += 8;
  }
#endif
  while (s < end && plain_byte[(unsigned char)*s]) s++;
  return s;
}

#endif
