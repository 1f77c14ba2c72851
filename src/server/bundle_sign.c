/* bundle_sign.c — ed25519 keys and detached signatures of bundle files
 * (bundle.h has the formats), through OpenSSL's libcrypto: EVP_PKEY_ED25519
 * keys, EVP_DigestSign/EVP_DigestVerify with no digest (pure Ed25519 signs
 * the message itself). */
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base64.h"
#include "server/bundle.h"

#define ED25519_SIG 64

static void ssl_why(char *why, size_t n, const char *what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "";
  if (e) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  snprintf(why, n, "%s%s%s", what, buf[0] ? ": " : "", buf);
}

int bundle_keygen(const char *name, char *why, size_t n) {
  size_t nl = strlen(name);
  char *key = malloc(nl + 5), *pub = malloc(nl + 5);
  EVP_PKEY *pk = NULL;
  EVP_PKEY_CTX *ctx = NULL;
  FILE *kf = NULL, *pf = NULL;
  int rc = -1, fd = -1;
  if (!key || !pub) {
    snprintf(why, n, "out of memory");
    goto out;
  }
  snprintf(key, nl + 5, "%s.key", name);
  snprintf(pub, nl + 5, "%s.pub", name);
  if (!(ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL)) || EVP_PKEY_keygen_init(ctx) <= 0 ||
      EVP_PKEY_keygen(ctx, &pk) <= 0) {
    ssl_why(why, n, "cannot make an ed25519 key");
    goto out;
  }
  fd = open(key, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || !(kf = fdopen(fd, "w"))) {
    snprintf(why, n, "%s: %s", key, errno == EEXIST ? "exists already (not overwritten)" : strerror(errno));
    if (fd >= 0) close(fd);
    goto out;
  }
  fchmod(fd, 0600); /* whatever the umask */
  if (!PEM_write_PrivateKey(kf, pk, NULL, NULL, 0, NULL, NULL) || fflush(kf) != 0) {
    ssl_why(why, n, "cannot write the private key");
    goto out;
  }
  if (!(pf = fopen(pub, "w"))) {
    snprintf(why, n, "%s: %s", pub, strerror(errno));
    goto out;
  }
  if (!PEM_write_PUBKEY(pf, pk) || fflush(pf) != 0) {
    ssl_why(why, n, "cannot write the public key");
    goto out;
  }
  rc = 0;
out:
  if (kf && fclose(kf) != 0 && rc == 0) rc = -1, snprintf(why, n, "%s: %s", key, strerror(errno));
  if (pf && fclose(pf) != 0 && rc == 0) rc = -1, snprintf(why, n, "%s: %s", pub, strerror(errno));
  if (rc != 0 && kf) unlink(key); /* never a key without its public half */
  EVP_PKEY_free(pk);
  EVP_PKEY_CTX_free(ctx);
  free(key);
  free(pub);
  return rc;
}

int bundle_sign(const char *keyfile, const void *data, size_t len, char sig[90], char *why,
                size_t n) {
  FILE *f = fopen(keyfile, "r");
  if (!f) {
    snprintf(why, n, "%s: %s", keyfile, strerror(errno));
    return -1;
  }
  EVP_PKEY *pk = PEM_read_PrivateKey(f, NULL, NULL, NULL);
  fclose(f);
  if (!pk || EVP_PKEY_id(pk) != EVP_PKEY_ED25519) {
    char what[600];
    snprintf(what, sizeof what, "%s: not an ed25519 private key in PEM", keyfile);
    ssl_why(why, n, what);
    EVP_PKEY_free(pk);
    return -1;
  }
  unsigned char raw[ED25519_SIG];
  size_t rl = sizeof raw;
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  int ok = md && EVP_DigestSignInit(md, NULL, NULL, NULL, pk) > 0 &&
           EVP_DigestSign(md, raw, &rl, data, len) > 0 && rl == ED25519_SIG;
  EVP_MD_CTX_free(md);
  EVP_PKEY_free(pk);
  if (!ok) {
    ssl_why(why, n, "signing failed");
    return -1;
  }
  size_t el = base64_encode(raw, rl, sig);
  sig[el] = '\n';
  sig[el + 1] = '\0';
  return 0;
}

int bundle_pubkey_load(const char *file, char **pem, char *why, size_t n) {
  *pem = NULL;
  FILE *f = fopen(file, "r");
  if (!f) {
    snprintf(why, n, "%s: %s", file, strerror(errno));
    return -1;
  }
  char buf[4096];
  size_t got = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[got] = '\0';
  BIO *bio = BIO_new_mem_buf(buf, (int)got);
  EVP_PKEY *pk = bio ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
  BIO_free(bio);
  int id = pk ? EVP_PKEY_id(pk) : 0;
  EVP_PKEY_free(pk);
  if (id != EVP_PKEY_ED25519) {
    char what[600];
    snprintf(what, sizeof what, "%s: not an ed25519 public key in PEM (BEGIN PUBLIC KEY)", file);
    ssl_why(why, n, what);
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
  BIO *bio = BIO_new_mem_buf(pem, -1);
  EVP_PKEY *pk = bio ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
  BIO_free(bio);
  if (!pk) {
    ssl_why(why, n, "the public key cannot be read");
    return -1;
  }
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  int r = md && EVP_DigestVerifyInit(md, NULL, NULL, NULL, pk) > 0
              ? EVP_DigestVerify(md, raw, rl, data, len)
              : -1;
  EVP_MD_CTX_free(md);
  EVP_PKEY_free(pk);
  ERR_clear_error();
  if (r == 1) return 0;
  if (r < 0) {
    snprintf(why, n, "the signature could not be checked");
    return -1;
  }
  snprintf(why, n, "the signature does not match the file (another key, or the file changed)");
  return 1;
}
