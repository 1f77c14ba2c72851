/* base64.h — RFC 4648 base64 with the standard alphabet (A-Z a-z 0-9 + /)
 * and '=' padding. Used for V_BYTES in JSON and by CEL's bytes conversions.
 *
 * The decoder is strict, so that one byte string has exactly one text:
 * the length must be a multiple of 4, '=' may appear only as the last one or
 * two characters, the bits a padded group leaves over must be zero, and
 * whitespace, line breaks and the URL-safe alphabet (- _) are rejected. */
#ifndef VD_CORE_BASE64_H
#define VD_CORE_BASE64_H

#include <stddef.h>

/* Length of the encoding of len bytes (padding included, no NUL). */
static inline size_t base64_encoded_len(size_t len) { return (len + 2) / 3 * 4; }
/* Upper bound of the decoded length of a text of len characters. */
static inline size_t base64_decoded_max(size_t len) { return len / 4 * 3; }

/* Writes base64_encoded_len(len) characters to out (no NUL); returns that length. */
size_t base64_encode(const void *src, size_t len, char *out);

/* Decodes src[0..len) into out (room for base64_decoded_max(len) bytes).
 * Returns 0 and sets *out_len, or -1 and sets *bad_at (if not NULL) to the
 * offset of the first character that makes the text invalid (len when the
 * length is not a multiple of 4). */
int base64_decode(const char *src, size_t len, void *out, size_t *out_len, size_t *bad_at);

#endif
