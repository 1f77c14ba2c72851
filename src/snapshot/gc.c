/* gc.c — retention and sampling: thin out snapshots older than keep_days to
 * the ones that matter, without ever racing a writer.
 *
 * Per segment: take its lock without waiting (a writer holds its active
 * segment locked for as long as it appends to it, so a segment gc can lock is
 * sealed and stays unchanged while gc holds it), check the lock is on the file
 * the name still points to, then decide every record from its header alone.
 * A segment that loses nothing is left as it is (the index's time range
 * usually settles that without reading the segment). Otherwise the records
 * kept are copied, frame for frame and byte for byte, into `<name>.gctmp`,
 * which is fsynced and renamed over the segment; the new index follows. A
 * reader that had the old file open keeps reading the old file; nothing ever
 * sees half a rewrite. A segment left with no records is deleted.
 *
 * The sample is deterministic: a record is in it when the hash of its id
 * falls below the fraction, so running gc twice keeps the same records and
 * two nodes agree. Only one gc runs at a time per directory (gc.lock). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/clock.h"
#include "core/json.h"
#include "snapshot/internal.h"

#define NS_PER_DAY 86400000000000.0

void snapshot_gc_opts_init(snapshot_gc_opts *o) {
  memset(o, 0, sizeof *o);
  o->keep_days = 7;
  o->sample = 0.01;
  o->min_confidence = 0.8;
}

double snapshot_sample_point(const uint8_t id[16]) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
  for (int i = 0; i < 16; i++) {
    h ^= id[i];
    h *= 0x100000001b3ull;
  }
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull; /* splitmix64's finish */
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  h ^= h >> 31;
  return (double)(h >> 11) / 9007199254740992.0; /* top 53 bits / 2^53 */
}

int snapshot_gc_keeps(const snapshot_gc_opts *o, const snapshot_rec *rec) {
  if (!rec->allowed || rec->review) return 1;
  if (rec->source == SNAPSHOT_SRC_MODEL || rec->source == SNAPSHOT_SRC_ERROR) return 1;
  if (!(rec->confidence >= o->min_confidence)) return 1; /* NaN counts as low */
  return snapshot_sample_point(rec->id) < o->sample;
}

static void remove_gc_temps(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n > 6 && strcmp(e->d_name + n - 6, ".gctmp") == 0) {
      char path[4096];
      if (seg_path(path, sizeof path, dir, e->d_name, 0) == 0) unlink(path);
    }
  }
  closedir(d);
}

typedef struct gc_run {
  const char *dir;
  const snapshot_gc_opts *o;
  int64_t cutoff;
  snapshot_gc_stats *st;
  char *err;
  size_t errlen;
  int has_hold; /* a shipper's cursor holds hold and every later segment */
  seg_entry hold;
} gc_run;

/* The selection: everything in the full window, then the declared
 * retention or the built-in rule. */
static int keep(const gc_run *g, const snapshot_rec *rec) {
  if (rec->time_ns >= g->cutoff) return 1;
  if (g->o->keeps) return g->o->keeps(g->o->keeps_ud, rec) != 0;
  return snapshot_gc_keeps(g->o, rec);
}

/* Copies the kept records of the segment open at fd into a new file,
 * gathered into compressed blocks (compact.c), and renames it over path. 0,
 * or SNAPSHOT_EIO with the message. */
static int rewrite(gc_run *g, int fd, const char *name, const char *path, const seg_header *h,
                   uint64_t size, uint64_t *new_size) {
  char tmp[4200], ipath[4096];
  snprintf(tmp, sizeof tmp, "%s.gctmp", path);
  seg_path(ipath, sizeof ipath, g->dir, name, 1);
  int out = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (out < 0) {
    snprintf(g->err, g->errlen, "create %s: %s", tmp, strerror(errno));
    return SNAPSHOT_EIO;
  }
  uint8_t hb[SEG_HEADER_MAX];
  seg_index x;
  seg_index_init(&x);
  frame_scan s;
  seg_builder b;
  int rc = SNAPSHOT_EIO;
  const char *what = "write";
  if (frame_scan_init(&s, fd, h->header_len, size) < 0) {
    close(out);
    unlink(tmp);
    snprintf(g->err, g->errlen, "gc %s: out of memory", path);
    return SNAPSHOT_ENOMEM;
  }
  /* The header keeps its creation time, day, first id and node; its version
   * is this build's (the blocks need version 2), so its CRC changes. */
  seg_header nh = *h;
  uint64_t off = seg_header_encode(&nh, hb);
  segb_init(&b, out, off, SNAPSHOT_LEVEL_DEFAULT, SNAPSHOT_BLOCK_DEFAULT, &x);
  if (write_full(out, hb, (size_t)off, 0) < 0) goto done;
  const uint8_t *body;
  uint32_t len;
  int k;
  while ((k = frame_scan_next(&s, &body, &len)) == 1) {
    snapshot_rec rec;
    rec_body_decode(body, len, &rec);
    if (!keep(g, &rec)) continue;
    /* body - FRAME_HEADER is the record's whole frame, from a block too */
    if (segb_frame(&b, body - FRAME_HEADER, FRAME_HEADER + (size_t)len, body, rec.time_ns) < 0)
      goto done;
  }
  if (k < 0) {
    errno = s.err;
    what = "read";
    goto done;
  }
  if (segb_flush(&b) < 0) goto done;
  off = b.off;
  what = "fsync";
  if (fsync(out) < 0) goto done;
  what = "rename";
  if (rename(tmp, path) < 0) goto done;
  x.seg_size = off;
  x.seg_crc = nh.crc;
  if (seg_index_write(ipath, &x) < 0) unlink(ipath); /* a stale one would be ignored anyway */
  dir_sync(g->dir);
  *new_size = off;
  rc = 0;
done:
  if (rc < 0) {
    snprintf(g->err, g->errlen, "gc %s %s: %s", what, tmp, strerror(errno));
    unlink(tmp);
  }
  frame_scan_free(&s);
  segb_free(&b);
  seg_index_free(&x);
  close(out);
  return rc;
}

/* A segment gc leaves as it is still counts in the folder's bytes, before
 * and after, so that bytes_after is what the folder holds once gc is done
 * (and what a dry run predicts it will hold). */
static void untouched(gc_run *g, int fd) {
  struct stat st;
  if (fstat(fd, &st) < 0) return;
  g->st->bytes_before += (uint64_t)st.st_size;
  g->st->bytes_after += (uint64_t)st.st_size;
}

/* The shippers' cursors (DIR/ship-<node>.cursor, src/ship/ship.h): the
 * oldest segment any of them has not shipped past, into *held (its first
 * id and name). 0 none, 1 found (a cursor naming no segment yet, or one
 * that cannot be read, holds every segment: first id all zero, name ""). */
static int ship_hold(const char *dir, seg_entry *held) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int found = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t ln = strlen(de->d_name);
    if (ln < 12 || strncmp(de->d_name, "ship-", 5) != 0 ||
        strcmp(de->d_name + ln - 7, ".cursor") != 0)
      continue;
    char path[4096], buf[1024];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) close(fd);
    seg_entry e;
    memset(&e, 0, sizeof e);
    arena a;
    char abuf[2048];
    arena_init(&a, abuf, sizeof abuf, 0);
    value v;
    const value *seg = NULL;
    uint32_t day;
    if (n > 0 && json_parse(&a, buf, (size_t)n, NULL, &v, NULL) == 0 && v.kind == V_MAP)
      seg = value_map_get(&v, "segment", 7);
    if (seg && seg->kind == V_STRING && seg->n > 0 && seg->n < sizeof e.name) {
      memcpy(e.name, seg->s, seg->n);
      e.name[seg->n] = '\0';
      if (seg_name_parse(e.name, &day, e.first_id) < 0) memset(&e, 0, sizeof e);
    }
    arena_free(&a);
    int c = memcmp(e.first_id, held->first_id, 16);
    if (!found || c < 0 || (c == 0 && strcmp(e.name, held->name) < 0)) *held = e;
    found = 1;
  }
  closedir(d);
  return found;
}

static int gc_segment(gc_run *g, const seg_entry *e) {
  char path[4096], ipath[4096];
  if (seg_path(path, sizeof path, g->dir, e->name, 0) < 0 ||
      seg_path(ipath, sizeof ipath, g->dir, e->name, 1) < 0)
    return 0;
  g->st->segments++;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0; /* gone meanwhile */
  if (g->has_hold) {
    int c = memcmp(e->first_id, g->hold.first_id, 16);
    if (c > 0 || (c == 0 && strcmp(e->name, g->hold.name) >= 0)) {
      g->st->segments_unshipped++; /* a shipper has not passed it: left as it is */
      untouched(g, fd);
      close(fd);
      return 0;
    }
  }
  struct stat a, b;
  if (flock(fd, (g->o->dry_run ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0) {
    g->st->segments_locked++;
    untouched(g, fd);
    close(fd);
    return 0;
  }
  if (fstat(fd, &a) < 0 || stat(path, &b) < 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
    close(fd);
    return 0;
  }
  uint64_t size = (uint64_t)a.st_size;
  uint8_t hb[SEG_HEADER_MAX];
  seg_header h;
  size_t hn = size < SEG_HEADER_MAX ? (size_t)size : SEG_HEADER_MAX;
  if (hn == 0 || read_full(fd, hb, hn, 0) < 0 || seg_header_decode(hb, hn, &h) != 0) {
    close(fd); /* being created, or not ours: leave it alone */
    return 0;
  }
  seg_index x;
  seg_index_init(&x);
  int indexed = seg_index_read(ipath, size, h.crc, &x) == 0;
  int64_t min_time = x.min_time;
  uint64_t nrec = x.records;
  seg_index_free(&x);
  if (indexed && (nrec == 0 || min_time >= g->cutoff)) { /* nothing old here */
    untouched(g, fd);
    g->st->records_kept += nrec;
    close(fd);
    return 0;
  }
  frame_scan s;
  if (frame_scan_init(&s, fd, h.header_len, size) < 0) {
    close(fd);
    snprintf(g->err, g->errlen, "gc %s: out of memory", path);
    return SNAPSHOT_ENOMEM;
  }
  /* A dry run compresses the kept frames as rewrite() does, through a
   * builder that writes nothing: the size it ends at (header included) is
   * exactly the size the rewrite will give the segment. */
  seg_header nh = h;
  uint8_t nhb[SEG_HEADER_MAX];
  uint64_t nhlen = seg_header_encode(&nh, nhb);
  seg_builder sb;
  segb_init(&sb, -1, nhlen, SNAPSHOT_LEVEL_DEFAULT, SNAPSHOT_BLOCK_DEFAULT, NULL);
  uint64_t kept = 0, removed = 0;
  const uint8_t *body;
  uint32_t len;
  int k;
  while ((k = frame_scan_next(&s, &body, &len)) == 1) {
    snapshot_rec rec;
    rec_body_decode(body, len, &rec);
    if (keep(g, &rec)) {
      kept++;
      if (g->o->dry_run &&
          segb_frame(&sb, body - FRAME_HEADER, FRAME_HEADER + (size_t)len, body, rec.time_ns) < 0)
        k = -2;
      if (k == -2) break;
    } else {
      removed++;
    }
  }
  if (k == 1 || k == 0) {
    if (g->o->dry_run && segb_flush(&sb) < 0) k = -2;
  }
  uint64_t kept_bytes = sb.off;
  int berr = sb.err;
  segb_free(&sb);
  int serr = s.err;
  frame_scan_free(&s);
  if (k == -2) {
    close(fd);
    snprintf(g->err, g->errlen, "gc %s: %s", path, strerror(berr));
    return berr == ENOMEM ? SNAPSHOT_ENOMEM : SNAPSHOT_EIO;
  }
  if (k < 0) {
    close(fd);
    snprintf(g->err, g->errlen, "gc read %s: %s", path, strerror(serr));
    return SNAPSHOT_EIO;
  }
  g->st->records_kept += kept;
  g->st->records_removed += removed;
  g->st->bytes_before += size;
  int rc = 0;
  uint64_t new_size = size;
  if (removed == 0 || g->o->dry_run) {
    if (removed && !kept)
      g->st->segments_deleted++;
    else if (removed)
      g->st->segments_rewritten++;
    if (removed && g->o->dry_run) new_size = kept ? kept_bytes : 0;
  } else if (kept == 0) {
    if (unlink(path) < 0) {
      snprintf(g->err, g->errlen, "gc remove %s: %s", path, strerror(errno));
      rc = SNAPSHOT_EIO;
    } else {
      unlink(ipath);
      dir_sync(g->dir);
      g->st->segments_deleted++;
      new_size = 0;
    }
  } else {
    rc = rewrite(g, fd, e->name, path, &h, size, &new_size);
    if (rc == 0) g->st->segments_rewritten++;
  }
  g->st->bytes_after += new_size;
  close(fd);
  return rc;
}

int snapshot_gc(const char *dir, const snapshot_gc_opts *opts, snapshot_gc_stats *stats, char *err,
                size_t errlen) {
  char scratch[SNAPSHOT_ERRLEN];
  if (!err) {
    err = scratch;
    errlen = sizeof scratch;
  }
  snapshot_gc_stats local;
  if (!stats) stats = &local;
  memset(stats, 0, sizeof *stats);
  snapshot_gc_opts o;
  if (opts)
    o = *opts;
  else
    snapshot_gc_opts_init(&o);
  if (!(o.keep_days >= 0) || !(o.sample >= 0 && o.sample <= 1)) {
    snprintf(err, errlen, "gc: keep_days must be >= 0 and sample within [0, 1]");
    return SNAPSHOT_EINVAL;
  }
  int64_t now = o.now_ns ? o.now_ns : clock_wall_ns();
  gc_run g;
  memset(&g, 0, sizeof g);
  g.dir = dir;
  g.o = &o;
  g.cutoff = now - (int64_t)(o.keep_days * NS_PER_DAY);
  g.st = stats;
  g.err = err;
  g.errlen = errlen;

  char lpath[4096];
  snprintf(lpath, sizeof lpath, "%s/gc.lock", dir);
  int lfd = open(lpath, (o.dry_run ? O_RDONLY : O_RDWR | O_CREAT) | O_CLOEXEC, 0640);
  if (lfd < 0 && !(o.dry_run && errno == ENOENT)) {
    snprintf(err, errlen, "open %s: %s", lpath, strerror(errno));
    return SNAPSHOT_EIO;
  }
  if (lfd >= 0 && !o.dry_run && flock(lfd, LOCK_EX | LOCK_NB) < 0) {
    snprintf(err, errlen, "gc of %s: another gc is running", dir);
    close(lfd);
    return SNAPSHOT_EBUSY;
  }
  if (!o.dry_run) remove_gc_temps(dir);
  seg_entry *segs;
  size_t n;
  int rc = 0;
  if (seg_list(dir, &segs, &n) < 0) {
    snprintf(err, errlen, "list %s: %s", dir, strerror(errno));
    rc = SNAPSHOT_EIO;
  } else {
    g.has_hold = ship_hold(dir, &g.hold);
    for (size_t i = 0; i < n && rc == 0; i++) rc = gc_segment(&g, &segs[i]);
    free(segs);
  }
  if (lfd >= 0) close(lfd);
  return rc;
}
