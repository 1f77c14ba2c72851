/* bundle_tar.c — a bundle folder as a .tar.gz and back (bundle.h), through
 * libarchive's tar reader and its gzip filter (packing: zlib). Unpacking reads
 * the entries with libarchive and writes them itself (open with O_EXCL and
 * O_NOFOLLOW into a folder made for the purpose), so nothing in the archive
 * decides where a byte lands but its checked name. */
#define _XOPEN_SOURCE 700
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "server/bundle.h"

/* ---- pack ----
 * Written here as POSIX ustar records through zlib's gzip writer rather
 * than with libarchive's writer, whose format table would link every
 * format it knows (xar, 7-Zip and their libraries) into the command. */
typedef struct packer {
  gzFile gz;
  const char *root;
  char *why;
  size_t n;
  unsigned entries;
} packer;

static int name_cmp(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

/* v in width - 1 octal digits and a NUL (a value past them keeps its low digits:
 * sizes here are bounded far below 8 GiB). */
static void octal(char *field, size_t width, unsigned long long v) {
  for (size_t i = width - 1; i-- > 0; v >>= 3) field[i] = (char)('0' + (v & 7));
  field[width - 1] = '\0';
}

/* One ustar header: the name split at a '/' into prefix (155) and name (100). */
static int ustar_header(packer *p, const char *rel, int dir, unsigned long long size,
                        long long mtime) {
  unsigned char h[512];
  memset(h, 0, sizeof h);
  char name[300];
  snprintf(name, sizeof name, "%s%s", rel, dir ? "/" : "");
  size_t nl = strlen(name);
  const char *base = name;
  size_t prefix = 0;
  if (nl > 100) {
    const char *cut = NULL;
    for (const char *q = name; *q; q++)
      if (*q == '/' && (size_t)(q - name) <= 155 && nl - (size_t)(q - name) - 1 <= 100) cut = q;
    if (!cut || nl >= sizeof name - 1)
      return snprintf(p->why, p->n, "%s: the name is too long for a tar entry", rel), -1;
    prefix = (size_t)(cut - name);
    base = cut + 1;
  }
  memcpy(h, base, strlen(base));
  octal((char *)h + 100, 8, dir ? 0755 : 0644);
  octal((char *)h + 108, 8, 0);
  octal((char *)h + 116, 8, 0);
  octal((char *)h + 124, 12, size);
  octal((char *)h + 136, 12, mtime > 0 ? (unsigned long long)mtime : 0);
  memset(h + 148, ' ', 8);
  h[156] = dir ? '5' : '0';
  memcpy(h + 257, "ustar", 6);
  memcpy(h + 263, "00", 2);
  memcpy(h + 345, name, prefix);
  unsigned sum = 0;
  for (int i = 0; i < 512; i++) sum += h[i];
  snprintf((char *)h + 148, 8, "%06o", sum);
  h[155] = ' ';
  if (gzwrite(p->gz, h, 512) != 512) return snprintf(p->why, p->n, "write error"), -1;
  return 0;
}

static int pack_file(packer *p, const char *path, const char *rel, const struct stat *st) {
  int dir = S_ISDIR(st->st_mode);
  if (ustar_header(p, rel, dir, dir ? 0 : (unsigned long long)st->st_size, st->st_mtime) < 0)
    return -1;
  if (dir) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return snprintf(p->why, p->n, "%s: %s", path, strerror(errno)), -1;
  char buf[65536];
  ssize_t r;
  unsigned long long done = 0;
  while ((r = read(fd, buf, sizeof buf)) > 0) {
    if (done + (unsigned long long)r > (unsigned long long)st->st_size) break; /* grew: cut */
    if (gzwrite(p->gz, buf, (unsigned)r) != r) {
      close(fd);
      return snprintf(p->why, p->n, "write error"), -1;
    }
    done += (unsigned long long)r;
  }
  close(fd);
  if (r < 0) return snprintf(p->why, p->n, "%s: %s", path, strerror(errno)), -1;
  if (done != (unsigned long long)st->st_size)
    return snprintf(p->why, p->n, "%s: changed while it was packed", path), -1;
  static const char zeros[512];
  size_t pad = (512 - done % 512) % 512;
  if (pad && gzwrite(p->gz, zeros, (unsigned)pad) != (int)pad)
    return snprintf(p->why, p->n, "write error"), -1;
  return 0;
}

/* The folder path (rel its name inside the bundle, "" at the top). */
static int pack_dir(packer *p, const char *path, const char *rel) {
  DIR *d = opendir(path);
  if (!d) return snprintf(p->why, p->n, "%s: %s", path, strerror(errno)), -1;
  char **names = NULL;
  size_t nn = 0, cap = 0;
  int rc = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue; /* ., .., .verdict, editor files */
    if (nn == cap) {
      char **nb = realloc(names, (cap = cap ? cap * 2 : 32) * sizeof *names);
      if (!nb) {
        rc = -1;
        break;
      }
      names = nb;
    }
    if (!(names[nn] = strdup(de->d_name))) {
      rc = -1;
      break;
    }
    nn++;
  }
  closedir(d);
  if (rc) snprintf(p->why, p->n, "out of memory");
  if (nn) qsort(names, nn, sizeof *names, name_cmp);
  for (size_t i = 0; i < nn && rc == 0; i++) {
    size_t pl = strlen(path) + strlen(names[i]) + 2, rl = strlen(rel) + strlen(names[i]) + 2;
    char *full = malloc(pl), *r2 = malloc(rl);
    if (!full || !r2) {
      rc = -1;
      snprintf(p->why, p->n, "out of memory");
    } else {
      snprintf(full, pl, "%s/%s", path, names[i]);
      snprintf(r2, rl, "%s%s%s", rel, *rel ? "/" : "", names[i]);
      struct stat st;
      if (lstat(full, &st) != 0) {
        rc = -1;
        snprintf(p->why, p->n, "%s: %s", full, strerror(errno));
      } else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        rc = -1;
        snprintf(p->why, p->n,
                 "%s: a bundle holds regular files and folders only (a link or special file "
                 "would be refused where it is unpacked)",
                 full);
      } else if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > BUNDLE_MAX_ENTRY_BYTES) {
        rc = -1;
        snprintf(p->why, p->n, "%s: larger than the %llu bytes a server unpacks for one file",
                 full, (unsigned long long)BUNDLE_MAX_ENTRY_BYTES);
      } else if (++p->entries > BUNDLE_MAX_ENTRIES) {
        rc = -1;
        snprintf(p->why, p->n, "%s: more than %u files and folders", p->root, BUNDLE_MAX_ENTRIES);
      } else {
        rc = pack_file(p, full, r2, &st);
        if (rc == 0 && S_ISDIR(st.st_mode)) rc = pack_dir(p, full, r2);
      }
    }
    free(full);
    free(r2);
  }
  for (size_t i = 0; i < nn; i++) free(names[i]);
  free(names);
  return rc;
}

int bundle_pack(const char *dir, const char *out, char *why, size_t n) {
  struct stat st;
  if (stat(dir, &st) != 0) return snprintf(why, n, "%s: %s", dir, strerror(errno)), -1;
  if (!S_ISDIR(st.st_mode)) return snprintf(why, n, "%s: not a folder", dir), -1;
  size_t tl = strlen(out) + 8;
  char *tmp = malloc(tl);
  if (!tmp) return snprintf(why, n, "out of memory"), -1;
  snprintf(tmp, tl, "%s.tmp", out);
  packer p = {gzopen(tmp, "wb9"), dir, why, n, 0};
  int rc = -1;
  if (!p.gz) {
    snprintf(why, n, "%s: %s", tmp, strerror(errno));
  } else if (pack_dir(&p, dir, "") == 0) {
    static const char zeros[1024]; /* the end: two empty records */
    int w = gzwrite(p.gz, zeros, sizeof zeros);
    int c = gzclose(p.gz);
    p.gz = NULL;
    if (w != (int)sizeof zeros || c != Z_OK)
      snprintf(why, n, "%s: write error", out);
    else if (p.entries == 0)
      snprintf(why, n, "%s: the folder holds no files", dir);
    else if (rename(tmp, out) != 0)
      snprintf(why, n, "%s: %s", out, strerror(errno));
    else
      rc = 0;
  }
  if (p.gz) gzclose(p.gz);
  if (rc) unlink(tmp);
  free(tmp);
  return rc;
}

/* ---- unpack ---- */
static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

int bundle_remove_tree(const char *path) {
  return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The entry's name, checked and cleaned ("./a//b" is "a/b") into out.
 * 0, or -1 with why. */
static int clean_name(const char *name, char *out, size_t cap, char *why, size_t n) {
  if (!name || !*name) return snprintf(why, n, "an entry without a name"), -1;
  if (name[0] == '/') return snprintf(why, n, "%s: an absolute name", name), -1;
  size_t w = 0;
  for (const char *p = name; *p;) {
    const char *e = strchr(p, '/');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == 2 && p[0] == '.' && p[1] == '.')
      return snprintf(why, n, "%s: a name with a .. component", name), -1;
    if (l && !(l == 1 && p[0] == '.')) {
      for (size_t i = 0; i < l; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\')
          return snprintf(why, n, "%s: a control character or backslash in the name", name), -1;
      if (w + l + 2 > cap) return snprintf(why, n, "%.80s...: the name is too long", name), -1;
      if (w) out[w++] = '/';
      memcpy(out + w, p, l);
      w += l;
    }
    p += l;
    while (*p == '/') p++;
  }
  out[w] = '\0';
  return 0;
}

/* Makes the folders of rel below dest (those missing). */
static int make_parents(const char *dest, const char *rel, int last_too) {
  char path[4200];
  int dl = snprintf(path, sizeof path, "%s/", dest);
  if (dl < 0 || (size_t)dl + strlen(rel) + 1 >= sizeof path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  for (const char *p = rel; *p; p++) {
    if (*p == '/') {
      path[dl + (p - rel)] = '\0';
      if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
    }
    path[dl + (p - rel)] = *p;
    path[dl + (p - rel) + 1] = '\0';
  }
  if (last_too && mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
  return 0;
}

static int unpack_entries(struct archive *a, const char *dest, const bundle_limits *lim, char *why,
                          size_t n) {
  struct archive_entry *e;
  unsigned entries = 0;
  uint64_t total = 0;
  char rel[4096], path[4200];
  for (;;) {
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK) return snprintf(why, n, "not a readable .tar.gz: %s", archive_error_string(a)), -1;
    if (++entries > lim->max_entries)
      return snprintf(why, n, "more than %u entries", lim->max_entries), -1;
    const char *name = archive_entry_pathname(e);
    if (clean_name(name, rel, sizeof rel, why, n) < 0) return -1;
    if (archive_entry_hardlink(e))
      return snprintf(why, n, "%s: a hard link (only files and folders are taken)", name), -1;
    mode_t type = archive_entry_filetype(e);
    if (type == AE_IFLNK)
      return snprintf(why, n, "%s: a symbolic link (only files and folders are taken)", name), -1;
    if (type != AE_IFREG && type != AE_IFDIR)
      return snprintf(why, n, "%s: a device, FIFO or socket (only files and folders are taken)",
                      name), -1;
    if (!*rel) continue; /* "./" itself */
    if (type == AE_IFDIR) {
      if (make_parents(dest, rel, 1) < 0)
        return snprintf(why, n, "%s: %s", name, strerror(errno)), -1;
      continue;
    }
    la_int64_t size = archive_entry_size(e);
    if (size < 0 || (uint64_t)size > lim->max_entry_bytes)
      return snprintf(why, n, "%s: %lld bytes, more than the %llu a file may have", name,
                      (long long)size, (unsigned long long)lim->max_entry_bytes), -1;
    if (total + (uint64_t)size > lim->max_total_bytes)
      return snprintf(why, n, "more than %llu bytes of files in all",
                      (unsigned long long)lim->max_total_bytes), -1;
    if (make_parents(dest, rel, 0) < 0) return snprintf(why, n, "%s: %s", name, strerror(errno)), -1;
    int pl = snprintf(path, sizeof path, "%s/%s", dest, rel);
    if (pl < 0 || (size_t)pl >= sizeof path)
      return snprintf(why, n, "%.80s...: the name is too long", name), -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
      return snprintf(why, n, "%s: %s", name,
                      errno == EEXIST ? "appears twice in the archive" : strerror(errno)), -1;
    char chunk[65536];
    la_ssize_t got;
    uint64_t written = 0;
    while ((got = archive_read_data(a, chunk, sizeof chunk)) > 0) {
      written += (uint64_t)got;
      if (written > (uint64_t)size || write(fd, chunk, (size_t)got) != got) {
        close(fd);
        return snprintf(why, n, "%s: %s", name,
                        written > (uint64_t)size ? "more bytes than its header says" : strerror(errno)), -1;
      }
    }
    if (close(fd) != 0 || got < 0)
      return snprintf(why, n, got < 0 ? "not a readable .tar.gz: %s: %s" : "%s: %s", name,
                      got < 0 ? archive_error_string(a) : strerror(errno)), -1;
    total += written;
  }
  if (entries == 0) return snprintf(why, n, "the archive is empty"), -1;
  return 0;
}

int bundle_unpack(const void *data, size_t len, const char *dest, const bundle_limits *lim,
                  char *why, size_t n) {
  bundle_limits def = {BUNDLE_MAX_ENTRIES, BUNDLE_MAX_ENTRY_BYTES, BUNDLE_MAX_TOTAL_BYTES};
  if (!lim) lim = &def;
  if (mkdir(dest, 0755) != 0) return snprintf(why, n, "%s: %s", dest, strerror(errno)), -1;
  struct archive *a = archive_read_new();
  int rc = -1;
  if (!a || archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
      archive_read_support_format_tar(a) != ARCHIVE_OK ||
      archive_read_open_memory(a, data, len) != ARCHIVE_OK)
    snprintf(why, n, "not a readable .tar.gz: %s", a ? archive_error_string(a) : "out of memory");
  else
    rc = unpack_entries(a, dest, lim, why, n);
  if (a) archive_read_free(a);
  if (rc) bundle_remove_tree(dest);
  return rc;
}
