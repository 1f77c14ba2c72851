/* id.c — snapshot ids: UUIDv7 (RFC 9562, method 1: a 12-bit counter in
 * rand_a) made lock-free, and their text form.
 *
 * The generator keeps the last (ms, counter) pair packed in one 64-bit word
 * and advances it with compare-and-swap, so ids from any number of threads are
 * unique and strictly increasing without a lock: a new millisecond restarts
 * the counter at a random value below 2048 (room for at least 2048 more ids in
 * that millisecond), the same or an earlier millisecond (the clock stepped
 * back) increments it, and an overflowing counter carries into the
 * millisecond. The 62 random bits of rand_b are splitmix64 of the id's own
 * (ms, counter) word mixed with a seed drawn once from getrandom(): a
 * bijection of a word that is unique per id, so statistically random and
 * unpredictable enough for ids, with no syscall and no second atomic per id
 * (one atomic operation an id, the compare-and-swap). Ids are not secrets. */
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "snapshot/snapshot.h"

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void snapshot_idgen_init(snapshot_idgen *g) {
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
    /* No entropy yet (early boot): time and addresses still make ids from two
     * processes differ, and uniqueness within one comes from the counter. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = splitmix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uintptr_t)g ^
                      (uintptr_t)&seed);
  }
  atomic_init(&g->state, 0);
  g->seed = seed;
}

/* Big-endian, as the id's bytes are laid out. */
static inline void put_be64(uint8_t *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  v = __builtin_bswap64(v);
  memcpy(p, &v, 8);
#else
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (56 - 8 * i));
#endif
}

void snapshot_id_new_at(snapshot_idgen *g, uint64_t unix_ms, uint8_t out[16]) {
  unix_ms &= (1ull << 48) - 1;
  uint64_t old = atomic_load_explicit(&g->state, memory_order_relaxed), next;
  do {
    if (unix_ms > (old >> 12)) {
      uint64_t r = splitmix64(g->seed ^ unix_ms); /* where this millisecond's counter starts */
      next = (unix_ms << 12) | (r >> 53);         /* below 2048 */
    } else {
      next = old + 1; /* same ms (or the clock went back): count on */
    }
  } while (!atomic_compare_exchange_weak_explicit(&g->state, &old, next, memory_order_relaxed,
                                                  memory_order_relaxed));
  uint64_t ms = next >> 12, counter = next & 0xfff;
  /* next is unique to this id (the state only grows), and the mix is a
   * bijection of it: no two ids of this generator share a tail. */
  uint64_t tail = splitmix64(next * 0x9E3779B97F4A7C15ull + g->seed);
  /* big-endian: ms (48 bits), version 7 and the counter (16); the variant
   * 0b10 and 62 random bits */
  put_be64(out, ms << 16 | 0x7000 | counter);
  put_be64(out + 8, (tail >> 2) | (1ull << 63));
}

void snapshot_id_new(snapshot_idgen *g, uint8_t out[16]) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
  snapshot_id_new_at(g, ms, out);
}

uint64_t snapshot_id_time_ms(const uint8_t id[16]) {
  uint64_t ms = 0;
  for (int i = 0; i < 6; i++) ms = ms << 8 | id[i];
  return ms;
}

/* Once per decision (and again on the writer thread): with SSE2 the 32
 * digits at once — each byte's two nibbles side by side, '0' or 'a' - 10
 * added by comparison — then copied out around the dashes; else two digits
 * a byte through a table. */
char *snapshot_id_format(const uint8_t id[16], char out[SNAPSHOT_ID_TEXT]) {
  char hexd[32];
#if defined(__SSE2__)
  __m128i v = _mm_loadu_si128((const __m128i *)(const void *)id);
  __m128i nib = _mm_set1_epi8(0x0f);
  __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), nib), lo = _mm_and_si128(v, nib);
  __m128i a = _mm_unpacklo_epi8(hi, lo), b = _mm_unpackhi_epi8(hi, lo);
  __m128i nine = _mm_set1_epi8(9), zero = _mm_set1_epi8('0'), gap = _mm_set1_epi8('a' - '0' - 10);
  a = _mm_add_epi8(_mm_add_epi8(a, zero), _mm_and_si128(_mm_cmpgt_epi8(a, nine), gap));
  b = _mm_add_epi8(_mm_add_epi8(b, zero), _mm_and_si128(_mm_cmpgt_epi8(b, nine), gap));
  _mm_storeu_si128((__m128i *)(void *)hexd, a);
  _mm_storeu_si128((__m128i *)(void *)(hexd + 16), b);
#else
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    hexd[2 * i] = hex[id[i] >> 4];
    hexd[2 * i + 1] = hex[id[i] & 15];
  }
#endif
  memcpy(out, hexd, 8);
  memcpy(out + 9, hexd + 8, 4);
  memcpy(out + 14, hexd + 12, 4);
  memcpy(out + 19, hexd + 16, 4);
  memcpy(out + 24, hexd + 20, 12);
  out[8] = out[13] = out[18] = out[23] = '-';
  out[36] = '\0';
  return out;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int snapshot_id_parse(const char *s, size_t len, uint8_t out[16]) {
  if (!s || len != 36) return SNAPSHOT_EINVAL;
  uint8_t id[16];
  size_t k = 0;
  for (size_t i = 0; i < 36;) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return SNAPSHOT_EINVAL;
      i++;
      continue;
    }
    int hi = hexval(s[i]), lo = hexval(s[i + 1]);
    if (hi < 0 || lo < 0) return SNAPSHOT_EINVAL;
    id[k++] = (uint8_t)(hi << 4 | lo);
    i += 2;
  }
  memcpy(out, id, 16);
  return 0;
}
