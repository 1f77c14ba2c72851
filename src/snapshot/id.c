/* id.c — snapshot ids: UUIDv7 (RFC 9562, method 1: a 12-bit counter in
 * rand_a) made lock-free, and their text form.
 *
 * The generator keeps the last (ms, counter) pair packed in one 64-bit word
 * and advances it with compare-and-swap, so ids from any number of threads are
 * unique and strictly increasing without a lock: a new millisecond restarts
 * the counter at a random value below 2048 (room for at least 2048 more ids in
 * that millisecond), the same or an earlier millisecond (the clock stepped
 * back) increments it, and an overflowing counter carries into the
 * millisecond. The 62 random bits of rand_b come from splitmix64 over an
 * atomic counter seeded once from getrandom(): statistically random and
 * unpredictable enough for ids, with no syscall per id. Ids are not secrets. */
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

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
  atomic_init(&g->rng, seed);
}

static uint64_t idgen_random(snapshot_idgen *g) {
  return splitmix64(
      atomic_fetch_add_explicit(&g->rng, 0x9E3779B97F4A7C15ull, memory_order_relaxed));
}

void snapshot_id_new_at(snapshot_idgen *g, uint64_t unix_ms, uint8_t out[16]) {
  uint64_t r = 0; /* drawn only when the millisecond moves on */
  unix_ms &= (1ull << 48) - 1;
  uint64_t old = atomic_load_explicit(&g->state, memory_order_relaxed), next;
  do {
    if (unix_ms > (old >> 12)) {
      if (!r) r = idgen_random(g) | 1;
      next = (unix_ms << 12) | (r >> 53); /* counter restarts below 2048 */
    } else {
      next = old + 1; /* same ms (or the clock went back): count on */
    }
  } while (!atomic_compare_exchange_weak_explicit(&g->state, &old, next, memory_order_relaxed,
                                                  memory_order_relaxed));
  uint64_t ms = next >> 12, counter = next & 0xfff;
  uint64_t tail = idgen_random(g);
  /* big-endian: ms (48 bits), version 7 and the counter (16); the variant
   * 0b10 and 62 random bits */
  uint64_t hi = ms << 16 | 0x7000 | counter;
  uint64_t lo = (tail >> 2) | (1ull << 63);
  for (int i = 0; i < 8; i++) {
    out[i] = (uint8_t)(hi >> (56 - 8 * i));
    out[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
  }
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

/* Once per decision: two hex digits a byte through a table, the dashes at
 * their fixed places. */
char *snapshot_id_format(const uint8_t id[16], char out[SNAPSHOT_ID_TEXT]) {
  static const char hex[513] =
      "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
      "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
      "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
      "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
      "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
      "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
      "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
      "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
#define HEX2(i, at) memcpy(out + (at), hex + 2 * id[i], 2)
  HEX2(0, 0), HEX2(1, 2), HEX2(2, 4), HEX2(3, 6), HEX2(4, 9), HEX2(5, 11), HEX2(6, 14);
  HEX2(7, 16), HEX2(8, 19), HEX2(9, 21), HEX2(10, 24), HEX2(11, 26), HEX2(12, 28);
  HEX2(13, 30), HEX2(14, 32), HEX2(15, 34);
#undef HEX2
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
