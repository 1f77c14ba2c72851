/* recover.c — what opening a snapshot log does to its folder before the
 * writer thread starts (writer.c calls it with writer.lock held): every
 * segment without a valid index is scanned, a torn or corrupt tail is cut
 * back to the last valid frame, damage in the middle is counted and left for
 * readers to skip, each repair is journaled (repairs.c); the newest segment,
 * if sound and not full, is kept open for appending. And the temporaries a
 * crash can leave are removed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/internal.h"
#include "snapshot/writer.h"

int writer_mkdir_p(const char *dir) {
  char path[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(path, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (path[i] != '/' && path[i] != '\0') continue;
    char c = path[i];
    path[i] = '\0';
    if (mkdir(path, 0750) < 0 && errno != EEXIST) return -1;
    path[i] = c;
  }
  struct stat st;
  if (stat(dir, &st) < 0) return -1;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}

/* Opens dir/name for writing and takes its lock; -1 when someone else holds
 * it (gc mid-rewrite) or the path no longer names the file we locked. */
static int open_locked(const char *path) {
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat a, b;
  if (flock(fd, LOCK_EX | LOCK_NB) < 0 || fstat(fd, &a) < 0 || stat(path, &b) < 0 ||
      a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
    close(fd);
    return -1;
  }
  return fd;
}

/* A repair made at open: kept for snapshot_log_repairs and written to the
 * folder's journal. */
static void note_repair(snapshot_log *L, int kind, const char *name, uint64_t bytes,
                        uint64_t records) {
  snapshot_repair r = {.kind = kind, .bytes = bytes, .records = records};
  snprintf(r.segment, sizeof r.segment, "%s", name);
  if (L->nrepairs < SNAPSHOT_REPAIRS_MAX) L->repairs[L->nrepairs++] = r;
  snapshot_repair_journal(L->dir, &r);
}

size_t snapshot_log_repairs(snapshot_log *log, const snapshot_repair **out) {
  *out = log->repairs;
  return log->nrepairs;
}

/* Valid frames anywhere in a file whose header cannot be read. */
static uint64_t count_frames(int fd, uint64_t size) {
  frame_scan s;
  if (frame_scan_init(&s, fd, 0, size) < 0) return 0;
  const uint8_t *body;
  uint32_t len;
  uint64_t n = 0;
  while (frame_scan_next(&s, &body, &len) == 1) n++;
  frame_scan_free(&s);
  return n;
}

/* Scans one segment, cuts a torn tail, counts damage. Keeps it open as the
 * current segment when keep is set and it may be appended to; else seals it
 * (writes its index) and closes it. */
static int recover_segment(snapshot_log *L, const seg_entry *e, int keep, char *err,
                           size_t errlen) {
  char path[4096], ipath[4096];
  if (seg_path(path, sizeof path, L->dir, e->name, 0) < 0 ||
      seg_path(ipath, sizeof ipath, L->dir, e->name, 1) < 0) {
    snprintf(err, errlen, "%s/%s: path too long", L->dir, e->name);
    return SNAPSHOT_EINVAL;
  }
  int fd = open_locked(path);
  if (fd < 0) return 0; /* gc holds it: it is sealed, not ours to recover */
  struct stat st;
  if (fstat(fd, &st) < 0) {
    snprintf(err, errlen, "stat %s: %s", path, strerror(errno));
    close(fd);
    return SNAPSHOT_EIO;
  }
  uint64_t size = (uint64_t)st.st_size;
  uint8_t hb[SEG_HEADER_MAX];
  size_t hn = size < SEG_HEADER_MAX ? (size_t)size : SEG_HEADER_MAX;
  seg_header h;
  int hr = hn ? (read_full(fd, hb, hn, 0) == 0 ? seg_header_decode(hb, hn, &h) : -1) : 1;
  if (hr > 0) {
    /* Created but its header never completed: it holds no record. Segments
     * are linked under their name only after the header is written, so this
     * is damage from outside; count it and remove the husk. */
    L->rec_segments++;
    L->cut_bytes += size;
    unlink(path);
    unlink(ipath);
    close(fd);
    note_repair(L, SNAPSHOT_REPAIR_EMPTY, e->name, size, 0);
    return 0;
  }
  if (hr == -2) {
    snprintf(err, errlen,
             "%s has snapshot format version %u; this verdict writes version %d "
             "(use a newer verdict, or another directory)",
             path, (unsigned)h.version, SEG_VERSION);
    close(fd);
    return SNAPSHOT_ECORRUPT;
  }
  if (hr < 0) {
    /* Not a segment we can read: keep it for a person to look at, out of the
     * way of readers and of the name space. */
    char bad[4200], badname[200];
    snprintf(bad, sizeof bad, "%s.corrupt", path);
    snprintf(badname, sizeof badname, "%s.corrupt", e->name);
    uint64_t records = count_frames(fd, size);
    rename(path, bad);
    L->damaged_regions++;
    close(fd);
    note_repair(L, SNAPSHOT_REPAIR_CORRUPT, badname, size, records);
    return 0;
  }
  seg_index x;
  seg_index_init(&x);
  int indexed = seg_index_read(ipath, size, h.crc, &x) == 0;
  int damaged = 0;
  if (!indexed) {
    L->rec_segments++;
    frame_scan s;
    if (frame_scan_init(&s, fd, h.header_len, size) < 0) {
      snprintf(err, errlen, "%s: out of memory", path);
      close(fd);
      return SNAPSHOT_ENOMEM;
    }
    const uint8_t *body;
    uint32_t len;
    int r;
    while ((r = frame_scan_next(&s, &body, &len)) == 1)
      if (seg_index_add_scanned(&x, &s, body) < 0) {
        s.err = ENOMEM;
        r = -1;
        break;
      }
    if (r < 0) {
      snprintf(err, errlen, "read %s: %s", path, strerror(s.err));
      frame_scan_free(&s);
      seg_index_free(&x);
      close(fd);
      return SNAPSHOT_EIO;
    }
    L->damaged_regions += s.damaged_regions;
    damaged = s.damaged_regions > 0;
    if (damaged) note_repair(L, SNAPSHOT_REPAIR_DAMAGED, e->name, s.damaged_bytes, 0);
    if (s.torn) {
      uint64_t cut = frame_count_tail(fd, s.tail_off, size);
      L->cut_records += cut;
      L->cut_bytes += size - s.tail_off;
      if (ftruncate(fd, (off_t)s.tail_off) < 0 || fsync(fd) < 0) {
        snprintf(err, errlen, "cut torn tail of %s: %s", path, strerror(errno));
        frame_scan_free(&s);
        seg_index_free(&x);
        close(fd);
        return SNAPSHOT_EIO;
      }
      note_repair(L, SNAPSHOT_REPAIR_CUT_TAIL, e->name, size - s.tail_off, cut);
      size = s.tail_off;
    }
    frame_scan_free(&s);
    x.seg_size = size;
    x.seg_crc = h.crc;
  }
  if (keep && !damaged && size < L->opts.segment_bytes) {
    /* It grows again; the index comes back whole at seal. A consistent one
     * stays meanwhile: it names the size it describes, so readers (and the
     * next recovery, after a crash) pass it over once the segment has grown
     * past that, and removing it would cost a short-lived writer (a hook)
     * a metadata update for nothing. A stale one goes. */
    if (!indexed) unlink(ipath);
    L->fd = fd;
    snprintf(L->seg_name, sizeof L->seg_name, "%s", e->name);
    L->seg_day = h.day;
    L->hdr = h;
    seg_index_free(&L->idx);
    L->idx = x;
    L->seg_base = size;
    return 0;
  }
  if (!indexed) seg_index_write(ipath, &x); /* best effort: rebuilt by readers if missing */
  seg_index_free(&x);
  close(fd);
  return 0;
}

int writer_recover(snapshot_log *L, char *err, size_t errlen) {
  seg_entry *segs;
  size_t n;
  if (seg_list(L->dir, &segs, &n) < 0) {
    snprintf(err, errlen, "list %s: %s", L->dir, strerror(errno));
    return SNAPSHOT_EIO;
  }
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++)
    rc = recover_segment(L, &segs[i], i + 1 == n, err, errlen);
  free(segs);
  return rc;
}

void writer_remove_stale_temps(const char *dir) {
  /* *.new: a segment whose creation a crash interrupted; *.ztmp: a
   * compaction a crash interrupted (the segment itself is whole); only a
   * writer makes them, and we hold writer.lock. *.idx.tmpXXXXXX: an index a crash left
   * half-written (one being written right now by a reader loses its rename,
   * which is harmless: indexes are rebuilt when missing). gc cleans its own
   * temporaries. */
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n > 8 && memcmp(e->d_name, "seg-", 4) == 0 &&
        (strcmp(e->d_name + n - 4, ".new") == 0 || strcmp(e->d_name + n - 5, ".ztmp") == 0 ||
         strstr(e->d_name, ".idx.tmp") != NULL)) {
      char path[4096];
      if (seg_path(path, sizeof path, dir, e->d_name, 0) == 0) unlink(path);
    }
  }
  closedir(d);
}
