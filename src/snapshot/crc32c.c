/* crc32c.c — CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum of every snapshot frame, segment header and index file.
 *
 * Two ways to the same number: the SSE4.2 crc32 instruction, 8 bytes a step,
 * when the CPU has it (checked at run time, so one binary runs everywhere),
 * and otherwise "slicing by 8" over eight 256-entry tables. The tables are
 * built once under pthread_once and never change after that, so all threads
 * share them safely. Checksums run on the writer thread and in readers, never
 * on the hot path of a decision. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GLIBC__)
#include <features.h>
#if __GLIBC_PREREQ(2, 33)
/* glibc's loader has already asked the CPU what it has: read its answer.
 * __builtin_cpu_supports links libgcc's constructor, which asks again with
 * a dozen cpuid instructions at every start, and under a hypervisor each
 * one is a trap: about 20 us apiece where this was measured, a quarter of
 * a millisecond on every `verdict hook` (bench/README.md). */
#include <sys/platform/x86.h>
#define HAVE_SSE42() CPU_FEATURE_ACTIVE(SSE4_2)
#endif
#endif
#if defined(__x86_64__) && !defined(HAVE_SSE42)
#define HAVE_SSE42() __builtin_cpu_supports("sse4.2")
#endif

#include "snapshot/snapshot.h"

#define CRC32C_POLY 0x82F63B78u

static uint32_t crc_tables[8][256];
static pthread_once_t crc_tables_once = PTHREAD_ONCE_INIT;

static void crc_tables_build(void) {
  for (uint32_t n = 0; n < 256; n++) {
    uint32_t c = n;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1)));
    crc_tables[0][n] = c;
  }
  for (uint32_t n = 0; n < 256; n++) {
    uint32_t c = crc_tables[0][n];
    for (int t = 1; t < 8; t++) {
      c = crc_tables[0][c & 0xff] ^ (c >> 8);
      crc_tables[t][n] = c;
    }
  }
}

static inline uint64_t load_le64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

uint32_t snapshot_crc32c_sw(uint32_t crc, const void *data, size_t len) {
  pthread_once(&crc_tables_once, crc_tables_build);
  const uint8_t *p = data;
  uint32_t c = ~crc;
  while (len && ((uintptr_t)p & 7)) {
    c = crc_tables[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    len--;
  }
  while (len >= 8) {
    uint64_t w = load_le64(p) ^ c;
    c = crc_tables[7][w & 0xff] ^ crc_tables[6][(w >> 8) & 0xff] ^ crc_tables[5][(w >> 16) & 0xff] ^
        crc_tables[4][(w >> 24) & 0xff] ^ crc_tables[3][(w >> 32) & 0xff] ^
        crc_tables[2][(w >> 40) & 0xff] ^ crc_tables[1][(w >> 48) & 0xff] ^ crc_tables[0][w >> 56];
    p += 8;
    len -= 8;
  }
  while (len--) c = crc_tables[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return ~c;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

/* Long inputs (a compiled/ file of the version store, read whole by every
 * hook) run three streams at once: each crc32 instruction waits about three
 * cycles for the one before it in its own stream, not in the others. The
 * three are joined as a CRC of A then B then C is: shift(crc A, 2L bytes) ^
 * shift(crc B, L) ^ crc C, the registers taken raw (linear over GF(2)),
 * where shifting r by n zero bytes is r * x^(8n) mod P: a carry-less
 * product with K = x^(8n-32) mod P, reduced by one crc32 of it (which
 * multiplies by x^32 mod P). Both K below were computed for L = 8192 and
 * are checked, like the rest, against the table version (test_crc.c). */
#define CRC_STRIDE 8192u
#define CRC_K_L 0x2a543193u  /* x^(8 * 8192 - 32) mod P, reflected */
#define CRC_K_2L 0x0ee201e6u /* x^(8 * 16384 - 32) mod P, reflected */

static inline uint64_t clmul32(uint32_t a, uint32_t b) {
  uint64_t p = 0, x = a;
  for (int i = 0; i < 32; i++, x <<= 1) p ^= x & (0 - (uint64_t)((b >> i) & 1));
  return p;
}

__attribute__((target("sse4.2"))) static uint32_t crc_shift(uint32_t r, uint32_t k) {
  /* the reflected product's bits sit one place up in a 64-bit word */
  return (uint32_t)_mm_crc32_u64(0, clmul32(r, k) << 1);
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *data,
                                                            size_t len) {
  const uint8_t *p = data;
  uint64_t c = ~crc;
  while (len && ((uintptr_t)p & 7)) {
    c = _mm_crc32_u8((uint32_t)c, *p++);
    len--;
  }
  while (len >= 3 * CRC_STRIDE) {
    uint64_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < CRC_STRIDE; i += 8) {
      uint64_t a, b, d;
      memcpy(&a, p + i, 8);
      memcpy(&b, p + CRC_STRIDE + i, 8);
      memcpy(&d, p + 2 * CRC_STRIDE + i, 8);
      c = _mm_crc32_u64(c, a);
      c1 = _mm_crc32_u64(c1, b);
      c2 = _mm_crc32_u64(c2, d);
    }
    c = crc_shift((uint32_t)c, CRC_K_2L) ^ crc_shift((uint32_t)c1, CRC_K_L) ^ (uint32_t)c2;
    p += 3 * CRC_STRIDE;
    len -= 3 * CRC_STRIDE;
  }
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    len -= 8;
  }
  while (len--) c = _mm_crc32_u8((uint32_t)c, *p++);
  return ~(uint32_t)c;
}
#endif

uint32_t snapshot_crc32c(uint32_t crc, const void *data, size_t len) {
#if defined(__x86_64__)
  if (HAVE_SSE42()) return crc32c_hw(crc, data, len);
#endif
  return snapshot_crc32c_sw(crc, data, len);
}
