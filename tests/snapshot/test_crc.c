/* test_crc.c — CRC32C gives the published check values (RFC 3720 B.4 and
 * the "123456789" check), the SSE4.2 and table versions agree on every
 * length and alignment, and CRCs chain across split buffers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/snapshot.h"
#include "test.h"

static void check_both(const void *data, size_t len, uint32_t want, const char *what) {
  CHECK_MSG(snapshot_crc32c(0, data, len) == want, "%s: got %08x want %08x", what,
            snapshot_crc32c(0, data, len), want);
  CHECK_MSG(snapshot_crc32c_sw(0, data, len) == want, "%s (table): got %08x want %08x", what,
            snapshot_crc32c_sw(0, data, len), want);
}

static void test_rfc3720_vectors(void) {
  uint8_t buf[48];
  memset(buf, 0, 32);
  check_both(buf, 32, 0x8A9136AAu, "32 bytes of zeros");
  memset(buf, 0xff, 32);
  check_both(buf, 32, 0x62A8AB43u, "32 bytes of 0xff");
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
  check_both(buf, 32, 0x46DD794Eu, "32 incrementing bytes");
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
  check_both(buf, 32, 0x113FDB5Cu, "32 decrementing bytes");
  /* An iSCSI SCSI Read (10) command PDU, from the same appendix. */
  static const uint8_t pdu[48] = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00,
                                  0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00,
                                  0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                  0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  check_both(pdu, 48, 0xD9963A56u, "iSCSI read PDU");
  check_both("123456789", 9, 0xE3069283u, "\"123456789\"");
  check_both("", 0, 0, "empty");
  check_both("a", 1, 0xC1D04330u, "\"a\"");
}

static void test_hw_matches_table(void) {
  uint8_t *buf = malloc(4096 + 16);
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 4096 + 16; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    buf[i] = (uint8_t)x;
  }
  int mismatches = 0;
  for (size_t align = 0; align < 8; align++)
    for (size_t len = 0; len < 300; len++)
      if (snapshot_crc32c(0, buf + align, len) != snapshot_crc32c_sw(0, buf + align, len))
        mismatches++;
  CHECK_MSG(mismatches == 0, "%d length/alignment pairs differ", mismatches);
  CHECK(snapshot_crc32c(0, buf, 4096) == snapshot_crc32c_sw(0, buf, 4096));
  /* inputs long enough for the three streams (3 x 8192 bytes a block),
   * at every alignment and around each block's end */
  {
    size_t big = 3 * 3 * 8192 + 64;
    uint8_t *b2 = malloc(big + 8);
    for (size_t i = 0; i < big + 8; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b2[i] = (uint8_t)x;
    }
    static const size_t lens[] = {24575, 24576, 24577, 24583, 49151, 49152, 49160, 73728, 73792};
    int differ = 0;
    for (size_t align = 0; align < 8; align++)
      for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
        differ +=
            snapshot_crc32c(0, b2 + align, lens[k]) != snapshot_crc32c_sw(0, b2 + align, lens[k]);
    CHECK_MSG(differ == 0, "%d long length/alignment pairs differ", differ);
    uint32_t seeded = snapshot_crc32c(0x12345678u, b2, 73728);
    CHECK(seeded == snapshot_crc32c_sw(0x12345678u, b2, 73728));
    CHECK(snapshot_crc32c(snapshot_crc32c(0, b2, 30000), b2 + 30000, 43728) ==
          snapshot_crc32c(0, b2, 73728));
    free(b2);
  }
  /* chaining: any split gives the CRC of the whole */
  uint32_t whole = snapshot_crc32c(0, buf, 1000);
  int bad = 0;
  for (size_t cut = 0; cut <= 1000; cut += 7) {
    if (snapshot_crc32c(snapshot_crc32c(0, buf, cut), buf + cut, 1000 - cut) != whole) bad++;
    if (snapshot_crc32c_sw(snapshot_crc32c_sw(0, buf, cut), buf + cut, 1000 - cut) != whole) bad++;
  }
  CHECK_MSG(bad == 0, "%d splits did not chain", bad);
  /* a single flipped bit always changes the CRC */
  int same = 0;
  for (int bit = 0; bit < 8 * 64; bit++) {
    buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    if (snapshot_crc32c(0, buf, 1000) == whole) same++;
    buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
  }
  CHECK(same == 0);
  free(buf);
}

int main(void) {
  TEST_RUN(test_rfc3720_vectors);
  TEST_RUN(test_hw_matches_table);
  TEST_END();
}
