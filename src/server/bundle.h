/* bundle.h — signed bundle files (docs/deploy.md, "Bundles pulled from a
 * server, signed"): a policy bundle folder packed as a .tar.gz, signed with
 * an ed25519 key, and unpacked safely on the node that pulls it.
 *
 * The signature (FILE.sig) is one line: the standard base64 (RFC 4648, with
 * padding) of the raw 64-byte ed25519 signature (RFC 8032, "pure" Ed25519,
 * no pre-hash) over the .tar.gz file's bytes exactly, then a newline. Keys
 * are PEM: the private key PKCS#8 ("BEGIN PRIVATE KEY"), the public one
 * SubjectPublicKeyInfo ("BEGIN PUBLIC KEY"), as `openssl genpkey -algorithm
 * ed25519` and `openssl pkey -pubout` write them.
 *
 * Every call returns 0, or -1 with why (a sentence naming the file). */
#ifndef VD_SERVER_BUNDLE_H
#define VD_SERVER_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

/* Writes NAME.key (mode 0600, never over an existing file) and NAME.pub. */
int bundle_keygen(const char *name, char *why, size_t n);
/* Signs data[0..len) with the private key in keyfile: the .sig text (with
 * its newline, NUL-ended) into sig (>= 90 bytes). */
int bundle_sign(const char *keyfile, const void *data, size_t len, char sig[90], char *why,
                size_t n);
/* A public key's PEM text into *pem (malloc'd), checked to be ed25519. */
int bundle_pubkey_load(const char *file, char **pem, char *why, size_t n);
/* Checks sig_text (the .sig file's bytes, one trailing newline allowed)
 * against data with the public key pem. 0 good; 1 bad (why says how: not
 * base64, wrong length, does not match); -1 the key is unusable. */
int bundle_verify(const char *pem, const void *data, size_t len, const char *sig_text,
                  size_t sig_len, char *why, size_t n);

/* Bounds of an unpacked bundle. */
typedef struct bundle_limits {
  unsigned max_entries;        /* files and folders; default 10000 */
  uint64_t max_entry_bytes;    /* one file; default 16 MiB */
  uint64_t max_total_bytes;    /* all files; default 64 MiB */
} bundle_limits;
#define BUNDLE_MAX_ENTRIES 10000u
#define BUNDLE_MAX_ENTRY_BYTES (16ull << 20)
#define BUNDLE_MAX_TOTAL_BYTES (64ull << 20)
#define BUNDLE_MAX_FILE_BYTES (64ull << 20) /* the .tar.gz itself */

/* Packs the bundle folder dir into out (a gzip-compressed POSIX tar):
 * regular files and folders only, names relative to dir, in name order,
 * leaving out names starting with '.' (the .verdict folder, editor files).
 * A symlink or other special file in dir is an error. */
int bundle_pack(const char *dir, const char *out, char *why, size_t n);
/* Unpacks the .tar.gz in data into dest, a folder that must not exist yet
 * (made with mode 0755). Only regular files and folders; refused: absolute
 * names, a ".." component, links of either kind, devices, FIFOs, a name
 * twice, more than the limits (NULL: the defaults). On refusal dest is
 * removed again. */
int bundle_unpack(const void *data, size_t len, const char *dest, const bundle_limits *lim,
                  char *why, size_t n);
/* Removes the folder path and everything in it (never following a link). */
int bundle_remove_tree(const char *path);

#endif
