/* test_sha256.c — SHA-256 against the FIPS 180-4 / NIST test vectors, every
 * length around the padding boundaries against coreutils' sha256sum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/sha256.h"
#include "test.h"

static void vectors(void) {
  char hex[65];
  sha256_hex("", 0, hex);
  CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  sha256_hex("abc", 3, hex);
  CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  sha256_hex(two, strlen(two), hex);
  CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  /* one million 'a' */
  char *m = malloc(1000000);
  if (m) {
    memset(m, 'a', 1000000);
    sha256_hex(m, 1000000, hex);
    CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(m);
  }
}

/* Lengths 0..200 (the one- and two-block tails) against sha256sum. */
static void lengths(void) {
  unsigned char buf[200];
  for (int i = 0; i < 200; i++) buf[i] = (unsigned char)(i * 37 + 11);
  for (size_t n = 0; n <= 200; n += (n < 130 ? 1 : 7)) {
    char tmp[] = "/tmp/verdict-sha-XXXXXX", cmd[64], want[80] = "", got[65];
    int fd = mkstemp(tmp);
    if (fd < 0) continue;
    CHECK(write(fd, buf, n) == (ssize_t)n);
    close(fd);
    snprintf(cmd, sizeof cmd, "sha256sum %s", tmp);
    FILE *p = popen(cmd, "r");
    if (p) {
      if (!fgets(want, sizeof want, p)) want[0] = 0;
      pclose(p);
    }
    unlink(tmp);
    want[64] = 0;
    sha256_hex(buf, n, got);
    CHECK_MSG(strcmp(got, want) == 0, "length %zu: %s, sha256sum says %s", n, got, want);
  }
}

/* HMAC-SHA256: RFC 4231's test cases 1, 2 and 6, a key of exactly one
 * block, an empty key and message (want: Python's hmac module). */
static void hmac_vectors(void) {
  static const struct {
    const char *key;
    size_t key_len;
    const char *msg;
    size_t msg_len;
    const char *want;
  } v[] = {
      {"\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b", 20,
       "\x48\x69\x20\x54\x68\x65\x72\x65", 8,
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {"\x4a\x65\x66\x65", 4,
       "\x77\x68\x61\x74\x20\x64\x6f\x20\x79\x61\x20\x77\x61\x6e\x74\x20\x66\x6f\x72\x20\x6e\x6f"
       "\x74\x68\x69\x6e\x67\x3f",
       28, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {"\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa"
       "\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa"
       "\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa"
       "\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa"
       "\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa"
       "\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa",
       131,
       "\x54\x65\x73\x74\x20\x55\x73\x69\x6e\x67\x20\x4c\x61\x72\x67\x65\x72\x20\x54\x68\x61\x6e"
       "\x20\x42\x6c\x6f\x63\x6b\x2d\x53\x69\x7a\x65\x20\x4b\x65\x79\x20\x2d\x20\x48\x61\x73\x68"
       "\x20\x4b\x65\x79\x20\x46\x69\x72\x73\x74",
       54, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {"\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b"
       "\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b"
       "\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b\x6b",
       64,
       "\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d"
       "\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d"
       "\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d"
       "\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d"
       "\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d"
       "\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d"
       "\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d"
       "\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d"
       "\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d\x6d"
       "\x6d\x6d",
       200, "cbe7a7476313c59aa81a2a0a723c9f793d20d82b544e788bf308f39922b3d12c"},
      {"", 0, "", 0, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"},
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    unsigned char md[32];
    char got[65];
    hmac_sha256(v[i].key, v[i].key_len, v[i].msg, v[i].msg_len, md);
    for (int j = 0; j < 32; j++) snprintf(got + 2 * j, 3, "%02x", md[j]);
    CHECK_MSG(strcmp(got, v[i].want) == 0, "case %zu: %s, want %s", i, got, v[i].want);
  }
}

int main(void) {
  vectors();
  lengths();
  hmac_vectors();
  TEST_END();
}
