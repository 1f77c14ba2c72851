/* id.c — snapshot ids: UUIDv7 (RFC 9562, method 1: a 12-bit counter in
 * rand_a) made lock-free, and their text form.
 *
 * The generator keeps the last (ms, counter) pair packed in one 64-bit word
 * and advances it with compare-and-swap, so ids from any number of threads are
 * unique and strictly increasing without a lock: a new millisecond restarts
 * the counter at a random value below 2048 (room for at least 2048 more ids in
 * that millisecond), the same or an earlier millisecond (the clock stepped
 * back) increments it, and an overflowing counter carries into the
 * millisecond. Uniqueness comes from that word alone.
 *
 * The 62 random bits of rand_b, and each millisecond's counter start, are
 * bytes from the kernel's CSPRNG (getrandom), so no id says anything about
 * another: an earlier version derived them from a per-process seed through
 * an invertible mix, and two ids of one's own gave the seed and so every
 * other id (tests/snapshot/test_id.c runs that attack). A system call per id
 * would cost more than the rest of the id, so each thread keeps a pool of
 * 4 KiB of random bytes (512 ids) filled by one getrandom() call: an id costs
 * a thread-local read and one atomic operation (the compare-and-swap), and
 * one id in 512 pays for the refill (a call's cost per byte falls with its
 * size up to a few KiB; bench/snapshots/README.md has the figures). A forked
 * child refills before its first id (pthread_atfork), so parent and child
 * never hand out the same bytes. The pool is per thread, not per generator,
 * because threads share a generator and a shared pool would need a second
 * atomic (or a lock) per id. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/clock.h"
#include "snapshot/snapshot.h"

#define POOL_WORDS 512

typedef struct rand_pool {
  uint64_t fork_gen; /* fork_gen when filled: a fork since makes it stale */
  unsigned left;     /* words not handed out yet, from the end */
  uint64_t w[POOL_WORDS];
} rand_pool;

static _Thread_local rand_pool pool;
/* Bumped in a forked child: every pool it inherited is stale. */
static atomic_uint_fast64_t fork_gen = 1;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void after_fork_child(void) {
  atomic_fetch_add_explicit(&fork_gen, 1, memory_order_relaxed);
}
static void register_atfork(void) { pthread_atfork(NULL, NULL, after_fork_child); }

/* The kernel's random bytes, or /dev/urandom's where getrandom is not
 * offered (a seccomp filter, a kernel before 3.17). With neither there is no
 * CSPRNG to take from, and ids that only look random are the weakness this
 * module exists to avoid: the process stops. */
static void os_random(void *buf, size_t n) {
  size_t got = 0;
  while (got < n) { /* past 256 bytes a signal can cut a call short */
    ssize_t k = getrandom((char *)buf + got, n - got, 0);
    if (k > 0)
      got += (size_t)k;
    else if (!(k < 0 && errno == EINTR))
      break;
  }
  if (got == n) return;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  while (fd >= 0 && got < n) {
    ssize_t k = read(fd, (char *)buf + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += (size_t)k;
  }
  if (fd >= 0) close(fd);
  if (got < n) abort();
}

static __attribute__((noinline)) void pool_fill(rand_pool *p, uint64_t gen) {
  os_random(p->w, sizeof p->w);
  p->fork_gen = gen;
  p->left = POOL_WORDS;
}

/* 64 random bits, each word of the pool handed out once. */
static inline uint64_t random_word(void) {
  rand_pool *p = &pool;
  uint64_t gen = atomic_load_explicit(&fork_gen, memory_order_relaxed);
  if (__builtin_expect(p->left == 0 || p->fork_gen != gen, 0)) pool_fill(p, gen);
  return p->w[--p->left];
}

void snapshot_idgen_init(snapshot_idgen *g) {
  pthread_once(&atfork_once, register_atfork);
  atomic_init(&g->state, 0);
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
  uint64_t start = UINT64_MAX; /* drawn once, kept across retries of the exchange */
  do {
    if (unix_ms > (old >> 12)) {
      if (start == UINT64_MAX) start = random_word() >> 53; /* below 2048 */
      next = (unix_ms << 12) | start;
    } else {
      next = old + 1; /* same ms (or the clock went back): count on */
    }
  } while (!atomic_compare_exchange_weak_explicit(&g->state, &old, next, memory_order_relaxed,
                                                  memory_order_relaxed));
  uint64_t ms = next >> 12, counter = next & 0xfff;
  uint64_t tail = random_word();
  /* big-endian: ms (48 bits), version 7 and the counter (16); the variant
   * 0b10 and 62 random bits */
  put_be64(out, ms << 16 | 0x7000 | counter);
  put_be64(out + 8, (tail >> 2) | (1ull << 63));
}

void snapshot_id_new(snapshot_idgen *g, uint8_t out[16]) {
  snapshot_id_new_at(g, (uint64_t)clock_wall_ns() / 1000000u, out);
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
