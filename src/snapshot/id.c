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
  uint64_t r = idgen_random(g);
  unix_ms &= (1ull << 48) - 1;
  uint64_t old = atomic_load_explicit(&g->state, memory_order_relaxed), next;
  do {
    if (unix_ms > (old >> 12))
      next = (unix_ms << 12) | (r >> 53); /* counter restarts below 2048 */
    else
      next = old + 1; /* same ms (or the clock went back): count on */
  } while (!atomic_compare_exchange_weak_explicit(&g->state, &old, next, memory_order_relaxed,
                                                  memory_order_relaxed));
  uint64_t ms = next >> 12, counter = next & 0xfff;
  uint64_t tail = idgen_random(g);
  out[0] = (uint8_t)(ms >> 40);
  out[1] = (uint8_t)(ms >> 32);
  out[2] = (uint8_t)(ms >> 24);
  out[3] = (uint8_t)(ms >> 16);
  out[4] = (uint8_t)(ms >> 8);
  out[5] = (uint8_t)ms;
  out[6] = (uint8_t)(0x70 | (counter >> 8));
  out[7] = (uint8_t)counter;
  out[8] = (uint8_t)(0x80 | (tail >> 58)); /* variant 0b10 + 6 random bits */
  for (int i = 9; i < 16; i++) out[i] = (uint8_t)(tail >> (8 * (15 - i)));
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

char *snapshot_id_format(const uint8_t id[16], char out[SNAPSHOT_ID_TEXT]) {
  static const char hex[] = "0123456789abcdef";
  char *p = out;
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
    *p++ = hex[id[i] >> 4];
    *p++ = hex[id[i] & 15];
  }
  *p = '\0';
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
