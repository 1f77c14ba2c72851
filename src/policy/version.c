/* version.c — content-hash versions of strategies and the store that keeps
 * every version ever loaded.
 *
 * The canonical form of a strategy is its YAML document written as compact
 * JSON: mappings as objects with their keys in the order written, sequences
 * as arrays, scalars with the type they were loaded as (so `1`, `"1"` and
 * `1.0` differ; aliases expanded). Comments, quoting style, indentation and
 * flow-vs-block layout do not reach it, so reformatting a file keeps its
 * version. NaN and infinities, which JSON cannot carry, are written as the
 * bare tokens NaN/Infinity/-Infinity (verdict's lenient JSON reads them).
 *
 * The version is the lower-case hex SHA-256 of those bytes (core/sha256.c), so
 * anyone can recompute it with `sha256sum` on the stored file. The store is a
 * folder of `<sha256>.json` files holding the canonical form; a file is
 * written once, through a temporary name and rename(2), so a reader never
 * sees half a file and two loaders racing write the same bytes; one found
 * cut short is written again when its version is next loaded. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "core/sha256.h"
#include "policy/internal.h"

static void write_node(json_buf *b, const ynode *n) {
  switch (n->kind) {
    case Y_SCALAR: {
      const value *v = &n->v;
      if (v->kind == V_DOUBLE && !isfinite(v->d)) {
        if (isnan(v->d))
          json_buf_put(b, "NaN", 3);
        else if (v->d > 0)
          json_buf_put(b, "Infinity", 8);
        else
          json_buf_put(b, "-Infinity", 9);
      } else if (v->kind == V_STRING) {
        json_write_string(b, n->text, n->len);
      } else {
        json_write(b, v, 1);
      }
      return;
    }
    case Y_SEQ:
      json_buf_putc(b, '[');
      for (uint32_t i = 0; i < n->n; i++) {
        if (i) json_buf_putc(b, ',');
        write_node(b, n->kids[i]);
      }
      json_buf_putc(b, ']');
      return;
    case Y_MAP:
      json_buf_putc(b, '{');
      for (uint32_t i = 0; i < n->n; i++) {
        if (i) json_buf_putc(b, ',');
        const ynode *k = n->kids[2 * i];
        json_write_string(b, k->text ? k->text : "", k->len);
        json_buf_putc(b, ':');
        write_node(b, n->kids[2 * i + 1]);
      }
      json_buf_putc(b, '}');
      return;
  }
}

char *policy_canonical_json(const ynode *root, size_t *len) {
  json_buf b;
  json_buf_init(&b, NULL);
  write_node(&b, root);
  if (b.oom) {
    json_buf_free(&b);
    return NULL;
  }
  json_buf_putc(&b, '\0'); /* keep a terminator for callers that print it */
  if (b.oom) {
    json_buf_free(&b);
    return NULL;
  }
  *len = b.len - 1;
  return b.data; /* malloc'd: the caller frees */
}

int policy_sha256_hex(const void *data, size_t len, char out[65]) {
  sha256_hex(data, len, out);
  return 0;
}

/* mkdir -p */
static int make_dirs(const char *dir, char *err, size_t err_size) {
  char path[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof path) {
    snprintf(err, err_size, "store folder name is empty or too long");
    return -1;
  }
  memcpy(path, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (path[i] != '/' && path[i] != 0) continue;
    char saved = path[i];
    path[i] = 0;
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
      snprintf(err, err_size, "cannot create folder %s: %s", path, strerror(errno));
      return -1;
    }
    path[i] = saved;
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    snprintf(err, err_size, "%s is not a folder", dir);
    return -1;
  }
  return 0;
}

int policy_store_put(const char *dir, const char *hex, const char *data, size_t len, char *err,
                     size_t err_size) {
  return policy_store_put_as(dir, hex, ".json", data, len, err, err_size);
}

int policy_store_put_as(const char *dir, const char *hex, const char *ext, const char *data,
                        size_t len, char *err, size_t err_size) {
  char path[4200], tmp[4300];
  if (snprintf(path, sizeof path, "%s/%s%s", dir, hex, ext) >= (int)sizeof path) {
    snprintf(err, err_size, "store path too long");
    return -1;
  }
  /* Content-addressed: already there, unless cut short (a crash of a machine
   * that did not keep the write and rename in order, a damaged disk): such
   * an entry is written again, whole, from the bytes in hand. */
  struct stat st;
  if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len) return 0;
  if (make_dirs(dir, err, err_size)) return -1;
  static const char suffix[] = "XXXXXX";
  snprintf(tmp, sizeof tmp, "%s/.%s%s.%s", dir, hex, ext, suffix);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    snprintf(err, err_size, "cannot write in %s: %s", dir, strerror(errno));
    return -1;
  }
  size_t off = 0;
  while (off < len) {
    ssize_t w = write(fd, data + off, len - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      snprintf(err, err_size, "cannot write %s: %s", tmp, strerror(errno));
      close(fd);
      unlink(tmp);
      return -1;
    }
    off += (size_t)w;
  }
  /* mkstemp makes the file 0600; stored versions are ordinary files. */
  if (fchmod(fd, 0644) != 0 || fsync(fd) != 0 || close(fd) != 0) {
    snprintf(err, err_size, "cannot finish %s: %s", tmp, strerror(errno));
    unlink(tmp);
    return -1;
  }
  if (rename(tmp, path) != 0) {
    snprintf(err, err_size, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  /* The name too, once, when the file is new: a snapshot folder's records
   * may be made durable right after, and must not outlive the version
   * they name in a crash. */
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
  return 0;
}
