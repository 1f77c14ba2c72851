/* segment.c — segment files as files: the header every segment starts with,
 * the file names (which carry the day and the first id, so a directory
 * listing alone orders segments in time and narrows a lookup by id), the
 * sorted listing, and the small I/O helpers the writer, reader and gc share.
 *
 * Not here: frames inside a segment (scan.c), the writer's locking and
 * rotation (writer.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snapshot/internal.h"

size_t seg_header_encode(seg_header *h, uint8_t *out) {
  size_t node_len = h->node_len > SEG_NODE_MAX ? SEG_NODE_MAX : h->node_len;
  h->version = SEG_VERSION;
  h->header_len = (uint32_t)(SEG_HEADER_FIXED + node_len);
  memcpy(out, SEG_MAGIC, 6);
  put_le16(out + 6, h->version);
  put_le32(out + 8, h->header_len);
  put_le32(out + 12, 0); /* flags: none defined in versions 1 and 2 */
  put_le64(out + 16, (uint64_t)h->created_ns);
  put_le32(out + 24, h->day);
  memcpy(out + 28, h->first_id, 16);
  put_le16(out + 44, (uint16_t)node_len);
  memcpy(out + 46, h->node, node_len);
  h->crc = snapshot_crc32c(0, out, 46 + node_len);
  put_le32(out + 46 + node_len, h->crc);
  return h->header_len;
}

int seg_header_decode(const uint8_t *b, size_t len, seg_header *h) {
  if (len >= 8 && memcmp(b, SEG_MAGIC, 6) == 0 &&
      (get_le16(b + 6) < SEG_VERSION_MIN || get_le16(b + 6) > SEG_VERSION)) {
    h->version = get_le16(b + 6); /* a segment, but of a format we do not know */
    return -2;
  }
  if (len < 12) return len >= 6 && memcmp(b, SEG_MAGIC, 6) != 0 ? -1 : 1;
  if (memcmp(b, SEG_MAGIC, 6) != 0) return -1;
  uint16_t version = get_le16(b + 6);
  uint32_t hlen = get_le32(b + 8);
  if (hlen < SEG_HEADER_FIXED || hlen > SEG_HEADER_MAX) return -1;
  if (len < hlen) return 1;
  size_t node_len = get_le16(b + 44);
  if (SEG_HEADER_FIXED + node_len != hlen) return -1;
  uint32_t crc = get_le32(b + hlen - 4);
  if (snapshot_crc32c(0, b, hlen - 4) != crc) return -1;
  h->version = version;
  h->header_len = hlen;
  h->created_ns = (int64_t)get_le64(b + 16);
  h->day = get_le32(b + 24);
  memcpy(h->first_id, b + 28, 16);
  h->node_len = (uint16_t)node_len;
  memcpy(h->node, b + 46, node_len);
  h->node[node_len] = '\0';
  h->crc = crc;
  return 0;
}

void seg_name_format(char out[SEG_NAME_MAX], uint32_t day, const uint8_t first_id[16], int dup) {
  static const char hex[] = "0123456789abcdef";
  char idhex[33];
  for (int i = 0; i < 16; i++) {
    idhex[2 * i] = hex[first_id[i] >> 4];
    idhex[2 * i + 1] = hex[first_id[i] & 15];
  }
  idhex[32] = '\0';
  if (dup > 0)
    snprintf(out, SEG_NAME_MAX, "seg-%08u-%s-%d.log", (unsigned)day, idhex, dup);
  else
    snprintf(out, SEG_NAME_MAX, "seg-%08u-%s.log", (unsigned)day, idhex);
}

static int hexnib(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

int seg_name_parse(const char *name, uint32_t *day, uint8_t first_id[16]) {
  /* seg-YYYYMMDD-<32 hex>[-N].log */
  size_t len = strlen(name);
  if (len < 4 + 8 + 1 + 32 + 4 || memcmp(name, "seg-", 4) != 0 || name[12] != '-') return -1;
  if (memcmp(name + len - 4, ".log", 4) != 0) return -1;
  uint32_t d = 0;
  for (int i = 4; i < 12; i++) {
    if (name[i] < '0' || name[i] > '9') return -1;
    d = d * 10 + (uint32_t)(name[i] - '0');
  }
  for (int i = 0; i < 16; i++) {
    int hi = hexnib(name[13 + 2 * i]), lo = hexnib(name[14 + 2 * i]);
    if (hi < 0 || lo < 0) return -1;
    first_id[i] = (uint8_t)(hi << 4 | lo);
  }
  const char *rest = name + 45, *stop = name + len - 4;
  if (rest != stop) { /* "-N" */
    if (*rest != '-' || rest + 1 == stop) return -1;
    for (const char *p = rest + 1; p < stop; p++)
      if (*p < '0' || *p > '9') return -1;
  }
  *day = d;
  return 0;
}

static int seg_entry_cmp(const void *a, const void *b) {
  const seg_entry *x = a, *y = b;
  int c = memcmp(x->first_id, y->first_id, 16);
  return c ? c : strcmp(x->name, y->name);
}

int seg_list(const char *dir, seg_entry **out, size_t *n) {
  *out = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return -1;
  seg_entry *v = NULL;
  size_t len = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    seg_entry s;
    if (strlen(e->d_name) >= SEG_NAME_MAX) continue;
    if (seg_name_parse(e->d_name, &s.day, s.first_id) < 0) continue;
    strcpy(s.name, e->d_name);
    if (len == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      seg_entry *nv = realloc(v, ncap * sizeof *v);
      if (!nv) {
        free(v);
        closedir(d);
        errno = ENOMEM;
        return -1;
      }
      v = nv;
      cap = ncap;
    }
    v[len++] = s;
  }
  closedir(d);
  if (len) qsort(v, len, sizeof *v, seg_entry_cmp);
  *out = v;
  *n = len;
  return 0;
}

int seg_path(char *out, size_t outlen, const char *dir, const char *name, int idx) {
  size_t nlen = strlen(name);
  int w;
  if (idx && nlen > 4)
    w = snprintf(out, outlen, "%s/%.*s.idx", dir, (int)(nlen - 4), name);
  else
    w = snprintf(out, outlen, "%s/%s", dir, name);
  return w < 0 || (size_t)w >= outlen ? -1 : 0;
}

int dir_sync(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  int saved = errno;
  close(fd);
  errno = saved;
  return rc;
}

int read_full(int fd, void *buf, size_t len, uint64_t off) {
  uint8_t *p = buf;
  while (len) {
    ssize_t n = pread(fd, p, len, (off_t)off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) {
      errno = 0;
      return -1;
    }
    p += n;
    len -= (size_t)n;
    off += (uint64_t)n;
  }
  return 0;
}

int write_full(int fd, const void *buf, size_t len, uint64_t off) {
  const uint8_t *p = buf;
  while (len) {
    ssize_t n = pwrite(fd, p, len, (off_t)off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) {
      errno = EIO;
      return -1;
    }
    p += n;
    len -= (size_t)n;
    off += (uint64_t)n;
  }
  return 0;
}
