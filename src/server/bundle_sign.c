/* bundle_sign.c — ed25519 keys and detached signatures of bundle files
 * (bundle.h has the formats), through libsodium (crypto_sign_*: pure
 * Ed25519, RFC 8032, which signs the message itself). Not OpenSSL's
 * libcrypto: linked into the static command, its pointer tables cost every
 * start — an agent hook included — some hundred page faults of relocation,
 * where libsodium's are a few. The keys stay in the PEM forms OpenSSL reads
 * and writes: their DER for ed25519 is a fixed prefix and the 32 key bytes
 * (RFC 8410), so no ASN.1 parser is needed. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base64.h"
#include "server/bundle.h"

#define ED25519_SIG 64

/* PKCS#8 PrivateKeyInfo {v1, id-Ed25519, OCTET STRING {OCTET STRING seed}}
 * and SubjectPublicKeyInfo {id-Ed25519, BIT STRING key}, before the 32 bytes. */
static const unsigned char priv_prefix[16] = {0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06,
                                              0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20};
static const unsigned char pub_prefix[12] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03,
                                             0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};

static int sodium_ready(char *why, size_t n) {
  if (sodium_init() < 0) {
    snprintf(why, n, "libsodium could not start (no source of randomness?)");
    return -1;
  }
  return 0;
}

/* The DER of the first PEM block labelled label in text: 0 with der[0..*dl)
 * (at most cap bytes), or -1. */
static int pem_read(const char *text, const char *label, unsigned char *der, size_t cap,
                    size_t *dl) {
  char begin[64], end[64];
  snprintf(begin, sizeof begin, "-----BEGIN %s-----", label);
  snprintf(end, sizeof end, "-----END %s-----", label);
  const char *b = strstr(text, begin);
  if (!b) return -1;
  b += strlen(begin);
  const char *e = strstr(b, end);
  if (!e) return -1;
  char b64[256];
  size_t k = 0;
  for (const char *p = b; p < e; p++) {
    if (*p == '\n' || *p == '\r' || *p == ' ' || *p == '\t') continue;
    if (k == sizeof b64) return -1;
    b64[k++] = *p;
  }
  size_t bad_at;
  if (base64_decoded_max(k) > cap + 2 || base64_decode(b64, k, der, dl, &bad_at) != 0) return -1;
  return 0;
}

/* Writes the PEM block of der[0..len) labelled label to f. 0, or -1. */
static int pem_write(FILE *f, const char *label, const unsigned char *der, size_t len) {
  char b64[128];
  size_t el = base64_encode(der, len, b64);
  b64[el] = '\0';
  return fprintf(f, "-----BEGIN %s-----\n%s\n-----END %s-----\n", label, b64, label) < 0 ? -1 : 0;
}

/* The 32 key bytes of an ed25519 key in PEM text (private: the seed). */
static int key_bytes(const char *text, int private_key, unsigned char out[32]) {
  unsigned char der[64];
  size_t dl = 0;
  const unsigned char *prefix = private_key ? priv_prefix : pub_prefix;
  size_t pl = private_key ? sizeof priv_prefix : sizeof pub_prefix;
  int rc = pem_read(text, private_key ? "PRIVATE KEY" : "PUBLIC KEY", der, sizeof der - 2, &dl);
  if (rc == 0 && dl == pl + 32 && memcmp(der, prefix, pl) == 0) {
    memcpy(out, der + pl, 32);
  } else {
    rc = -1;
  }
  sodium_memzero(der, sizeof der);
  return rc;
}

/* The whole (small) file into buf (NUL-ended). 0, or -1 with why. */
static int read_small(const char *file, char *buf, size_t cap, char *why, size_t n) {
  FILE *f = fopen(file, "r");
  if (!f) {
    snprintf(why, n, "%s: %s", file, strerror(errno));
    return -1;
  }
  size_t got = fread(buf, 1, cap - 1, f);
  int err = ferror(f);
  fclose(f);
  buf[got] = '\0';
  if (err) {
    snprintf(why, n, "%s: read error", file);
    return -1;
  }
  return 0;
}

int bundle_keygen(const char *name, char *why, size_t n) {
  size_t nl = strlen(name);
  char *key = malloc(nl + 5), *pub = malloc(nl + 5);
  unsigned char seed[32], pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
  unsigned char der[48];
  FILE *kf = NULL, *pf = NULL;
  int rc = -1, fd = -1;
  if (!key || !pub) {
    snprintf(why, n, "out of memory");
    goto out;
  }
  snprintf(key, nl + 5, "%s.key", name);
  snprintf(pub, nl + 5, "%s.pub", name);
  if (sodium_ready(why, n) < 0) goto out;
  randombytes_buf(seed, sizeof seed);
  crypto_sign_seed_keypair(pk, sk, seed);
  fd = open(key, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || !(kf = fdopen(fd, "w"))) {
    snprintf(why, n, "%s: %s", key, errno == EEXIST ? "exists already (not overwritten)" : strerror(errno));
    if (fd >= 0) close(fd);
    goto out;
  }
  fchmod(fd, 0600); /* whatever the umask */
  memcpy(der, priv_prefix, sizeof priv_prefix);
  memcpy(der + sizeof priv_prefix, seed, 32);
  if (pem_write(kf, "PRIVATE KEY", der, sizeof priv_prefix + 32) < 0 || fflush(kf) != 0) {
    snprintf(why, n, "%s: cannot write the private key: %s", key, strerror(errno));
    goto out;
  }
  if (!(pf = fopen(pub, "w"))) {
    snprintf(why, n, "%s: %s", pub, strerror(errno));
    goto out;
  }
  memcpy(der, pub_prefix, sizeof pub_prefix);
  memcpy(der + sizeof pub_prefix, pk, 32);
  if (pem_write(pf, "PUBLIC KEY", der, sizeof pub_prefix + 32) < 0 || fflush(pf) != 0) {
    snprintf(why, n, "%s: cannot write the public key: %s", pub, strerror(errno));
    goto out;
  }
  rc = 0;
out:
  if (kf && fclose(kf) != 0 && rc == 0) rc = -1, snprintf(why, n, "%s: %s", key, strerror(errno));
  if (pf && fclose(pf) != 0 && rc == 0) rc = -1, snprintf(why, n, "%s: %s", pub, strerror(errno));
  if (rc != 0 && kf) unlink(key); /* never a key without its public half */
  sodium_memzero(seed, sizeof seed);
  sodium_memzero(sk, sizeof sk);
  sodium_memzero(der, sizeof der);
  free(key);
  free(pub);
  return rc;
}

int bundle_sign(const char *keyfile, const void *data, size_t len, char sig[90], char *why,
                size_t n) {
  char text[4096];
  unsigned char seed[32], pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
  if (sodium_ready(why, n) < 0 || read_small(keyfile, text, sizeof text, why, n) < 0) return -1;
  int rc = key_bytes(text, 1, seed);
  sodium_memzero(text, sizeof text);
  if (rc < 0) {
    snprintf(why, n, "%s: not an ed25519 private key in PEM (BEGIN PRIVATE KEY)", keyfile);
    return -1;
  }
  crypto_sign_seed_keypair(pk, sk, seed);
  unsigned char raw[ED25519_SIG];
  crypto_sign_detached(raw, NULL, data, len, sk);
  sodium_memzero(seed, sizeof seed);
  sodium_memzero(sk, sizeof sk);
  size_t el = base64_encode(raw, sizeof raw, sig);
  sig[el] = '\n';
  sig[el + 1] = '\0';
  return 0;
}

int bundle_pubkey_load(const char *file, char **pem, char *why, size_t n) {
  *pem = NULL;
  char buf[4096];
  unsigned char pk[32];
  if (read_small(file, buf, sizeof buf, why, n) < 0) return -1;
  if (key_bytes(buf, 0, pk) < 0) {
    snprintf(why, n, "%s: not an ed25519 public key in PEM (BEGIN PUBLIC KEY)", file);
    return -1;
  }
  if (!(*pem = strdup(buf))) {
    snprintf(why, n, "out of memory");
    return -1;
  }
  return 0;
}

int bundle_verify(const char *pem, const void *data, size_t len, const char *sig_text,
                  size_t sig_len, char *why, size_t n) {
  if (sig_len && sig_text[sig_len - 1] == '\n') sig_len--;
  if (sig_len && sig_text[sig_len - 1] == '\r') sig_len--;
  unsigned char raw[96];
  size_t rl = 0, bad_at = 0;
  if (sig_len == 0) {
    snprintf(why, n, "the signature is empty");
    return 1;
  }
  if (sig_len > 128 || base64_decode(sig_text, sig_len, raw, &rl, &bad_at) != 0) {
    snprintf(why, n, "the signature is not one line of base64 (at byte %zu)", bad_at);
    return 1;
  }
  if (rl != ED25519_SIG) {
    snprintf(why, n, "the signature is %zu bytes, not the 64 of an ed25519 signature", rl);
    return 1;
  }
  unsigned char pk[32];
  if (sodium_ready(why, n) < 0) return -1;
  if (key_bytes(pem, 0, pk) < 0) {
    snprintf(why, n, "the public key cannot be read (not an ed25519 key in PEM)");
    return -1;
  }
  if (crypto_sign_verify_detached(raw, data, len, pk) == 0) return 0;
  snprintf(why, n, "the signature does not match the file (another key, or the file changed)");
  return 1;
}
