/* sha256.h — SHA-256 of a buffer (sha256.c says why verdict has its own). */
#ifndef VD_CORE_SHA256_H
#define VD_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* The 32-byte digest of data[0..len). */
void sha256(const void *data, size_t len, unsigned char out[32]);
/* The same as 64 lower-case hex digits and a NUL. */
void sha256_hex(const void *data, size_t len, char out[65]);
/* HMAC-SHA256 (RFC 2104) of data under key. */
void hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                 unsigned char out[32]);

#endif
