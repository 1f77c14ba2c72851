/* reader.c — reading a snapshot directory: iteration with header filters,
 * and lookup by id.
 *
 * Iteration walks segments in the order of their first id (their names say
 * it, so no file is opened to sort) and frames in file order. Without a time
 * filter each segment is read front to back; with one, the segment's sparse
 * index first rules out whole segments and then whole blocks of 1024 records
 * whose time range misses the filter, so "the last hour" of a week of
 * snapshots reads about an hour of them.
 *
 * Lookup by id reads almost nothing: a UUIDv7 grows with time, so a binary
 * search over the names finds the segment whose first id is the last one not
 * above the wanted id; that segment's index names the blocks whose id range
 * holds it (usually one); one block is read. Neighbouring segments are looked
 * at too while their id ranges overlap the id, because a record appended a
 * moment late can sit just past a rotation.
 *
 * Safe beside a live writer: a frame is returned only when complete and
 * CRC-valid, a segment that grew while being read is followed to its new end
 * once, and segments created after the listing are picked up at the end. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/internal.h"

struct snapshot_reader {
  char *dir;
  snapshot_filter f;
  int filtered, timed;
  seg_entry *segs;
  size_t nseg, next_seg; /* segs[next_seg] is the next to open */
  seg_entry last;        /* the last segment opened (to pick up newer ones) */
  int have_last;
  /* the segment being read */
  int fd;
  frame_scan scan;
  int scanning;
  int followed; /* already re-checked its size once */
  seg_index idx;
  int use_idx;
  size_t blk;
  uint64_t left; /* records left in the current block; UINT64_MAX: read freely */
  /* lookup (kept apart so a find does not disturb iteration) */
  int find_fd;
  frame_scan find_scan;
  int find_scanning;
  uint64_t skipped;
  /* a resumed reader (open_at): the segment to start in and the records of
   * it to pass over; ordinal: records returned or passed in the current one */
  char *start_seg;
  uint64_t start_skip, to_skip, ordinal;
  char err[SNAPSHOT_ERRLEN];
};

int snapshot_reader_open(const char *dir, const snapshot_filter *filter, snapshot_reader **out,
                         char *err, size_t errlen) {
  *out = NULL;
  snapshot_reader *r = calloc(1, sizeof *r);
  if (!r || !(r->dir = strdup(dir))) {
    free(r);
    if (err) snprintf(err, errlen, "snapshot reader %s: out of memory", dir);
    return SNAPSHOT_ENOMEM;
  }
  r->fd = r->find_fd = -1;
  seg_index_init(&r->idx);
  if (filter) {
    r->f = *filter;
    r->filtered = 1;
    r->timed = filter->since_ns || filter->until_ns;
  } else {
    snapshot_filter_init(&r->f);
  }
  struct stat st;
  if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || seg_list(dir, &r->segs, &r->nseg) < 0) {
    if (err)
      snprintf(err, errlen, "snapshot directory %s: %s", dir,
               errno ? strerror(errno) : "not a directory");
    snapshot_reader_close(r);
    return SNAPSHOT_EIO;
  }
  *out = r;
  return 0;
}

const char *snapshot_reader_error(const snapshot_reader *r) { return r->err; }
uint64_t snapshot_reader_skipped_bytes(const snapshot_reader *r) { return r->skipped; }

static void segment_close(snapshot_reader *r) {
  if (r->scanning) {
    r->skipped += r->scan.damaged_bytes;
    frame_scan_free(&r->scan);
    r->scanning = 0;
  }
  if (r->fd >= 0) close(r->fd);
  r->fd = -1;
}

static int block_in_time(const snapshot_filter *f, int64_t lo, int64_t hi) {
  if (f->since_ns && hi < f->since_ns) return 0;
  if (f->until_ns && lo >= f->until_ns) return 0;
  return 1;
}

/* Newer segments than the last one opened, after the listing ran out. */
static int relist(snapshot_reader *r) {
  seg_entry *segs;
  size_t n;
  if (seg_list(r->dir, &segs, &n) < 0) return -1;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int c = memcmp(segs[i].first_id, r->last.first_id, 16);
    if (c > 0 || (c == 0 && strcmp(segs[i].name, r->last.name) > 0)) segs[k++] = segs[i];
  }
  free(r->segs);
  r->segs = segs;
  r->nseg = k;
  r->next_seg = 0;
  return 0;
}

/* Opens the next segment worth reading. 1 opened, 0 none left, -1 error. */
static int segment_next(snapshot_reader *r) {
  for (;;) {
    if (r->next_seg == r->nseg) {
      if (!r->have_last) return 0;
      if (relist(r) < 0) {
        snprintf(r->err, sizeof r->err, "list %s: %s", r->dir, strerror(errno));
        return -1;
      }
      if (r->nseg == 0) return 0;
    }
    seg_entry *e = &r->segs[r->next_seg++];
    r->last = *e;
    r->have_last = 1;
    seg_header h;
    uint64_t size;
    int fd;
    if (r->timed) {
      fd = seg_open_indexed(r->dir, e->name, 1, &h, &r->idx, &size, r->err, sizeof r->err);
    } else {
      char path[4096];
      if (seg_path(path, sizeof path, r->dir, e->name, 0) < 0) continue;
      fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        if (errno == ENOENT) continue; /* gc removed it meanwhile */
        snprintf(r->err, sizeof r->err, "open %.400s: %s", path, strerror(errno));
        return -1;
      }
      struct stat st;
      uint8_t hb[SEG_HEADER_MAX];
      size = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
      size_t hn = size < SEG_HEADER_MAX ? (size_t)size : SEG_HEADER_MAX;
      int hr = hn ? (read_full(fd, hb, hn, 0) == 0 ? seg_header_decode(hb, hn, &h) : -1) : 1;
      if (hr != 0) {
        close(fd);
        if (hr > 0) continue; /* being created */
        if (hr == -2)
          snprintf(r->err, sizeof r->err,
                   "%.400s has snapshot format version %u; this verdict reads versions %d to %d",
                   path, (unsigned)h.version, SEG_VERSION_MIN, SEG_VERSION);
        else
          snprintf(r->err, sizeof r->err, "%.400s: not a snapshot segment (bad header)", path);
        return -1;
      }
    }
    if (fd == -2) continue;
    if (fd < 0) {
      if (errno == ENOENT) continue;
      return -1;
    }
    r->fd = fd;
    if (frame_scan_init(&r->scan, fd, h.header_len, size) < 0) {
      close(fd);
      r->fd = -1;
      snprintf(r->err, sizeof r->err, "snapshot reader: out of memory");
      return -1;
    }
    r->scanning = 1;
    r->followed = 0;
    r->ordinal = 0;
    r->to_skip = 0;
    if (r->start_seg && strcmp(e->name, r->start_seg) == 0) r->to_skip = r->start_skip;
    r->use_idx = r->timed;
    r->blk = 0;
    r->left = r->timed ? 0 : UINT64_MAX;
    if (r->timed &&
        (r->idx.records == 0 || !block_in_time(&r->f, r->idx.min_time, r->idx.max_time)) &&
        r->idx.seg_size >= size) {
      segment_close(r); /* nothing in range, and nothing past the index */
      continue;
    }
    return 1;
  }
}

/* The next frame of the current segment: 1, 0 at its end, -1 error. */
static int segment_frame(snapshot_reader *r, const uint8_t **body, uint32_t *len) {
  for (;;) {
    if (r->use_idx && r->left == 0) {
      while (r->blk < r->idx.n &&
             !block_in_time(&r->f, r->idx.blocks[r->blk].min_time, r->idx.blocks[r->blk].max_time))
        r->blk++;
      if (r->blk < r->idx.n) {
        frame_scan_seek(&r->scan, r->idx.blocks[r->blk].off);
        r->left = r->idx.blocks[r->blk].count;
        r->blk++;
      } else {
        /* past the indexed part: whatever was appended since */
        frame_scan_seek(&r->scan, r->idx.seg_size);
        r->use_idx = 0;
        r->left = UINT64_MAX;
      }
    }
    int k = frame_scan_next(&r->scan, body, len);
    if (k < 0) {
      snprintf(r->err, sizeof r->err, "read %s/%s: %s", r->dir, r->last.name,
               strerror(r->scan.err));
      return -1;
    }
    if (k == 1) {
      if (r->left != UINT64_MAX) r->left--;
      return 1;
    }
    if (r->use_idx) { /* the block ended early: the file changed under us */
      r->left = 0;
      continue;
    }
    /* The end. A writer may have appended meanwhile: follow it once. */
    struct stat st;
    if (!r->followed && fstat(r->fd, &st) == 0 && (uint64_t)st.st_size > r->scan.end) {
      r->followed = 1;
      uint64_t from = r->scan.torn ? r->scan.tail_off : r->scan.end;
      r->scan.end = (uint64_t)st.st_size;
      frame_scan_seek(&r->scan, from);
      continue;
    }
    return 0;
  }
}

int snapshot_reader_next(snapshot_reader *r, snapshot_rec *rec) {
  for (;;) {
    if (!r->scanning) {
      int k = segment_next(r);
      if (k <= 0) return k < 0 ? SNAPSHOT_EIO : 0;
    }
    const uint8_t *body;
    uint32_t len;
    int k = segment_frame(r, &body, &len);
    if (k < 0) return SNAPSHOT_EIO;
    if (k == 0) {
      segment_close(r);
      continue;
    }
    if (rec_body_decode(body, len, rec) < 0) continue; /* cannot happen: the scan checked */
    r->ordinal++;
    if (r->to_skip) {
      r->to_skip--;
      continue;
    }
    if (!r->filtered || rec_matches(rec, &r->f)) return 1;
  }
}

static int id_in(const uint8_t id[16], const uint8_t lo[16], const uint8_t hi[16]) {
  return memcmp(id, lo, 16) >= 0 && memcmp(id, hi, 16) <= 0;
}

/* Looks for id in one segment. 1 found (rec set), 0 not, -1 error; *range
 * gets the segment's id range (0 when it holds no record). */
static int find_in(snapshot_reader *r, const seg_entry *e, const uint8_t id[16], snapshot_rec *rec,
                   seg_index *x, int *has_range) {
  seg_header h;
  uint64_t size;
  *has_range = 0;
  int fd = seg_open_indexed(r->dir, e->name, 1, &h, x, &size, r->err, sizeof r->err);
  if (fd == -2) return 0;
  if (fd < 0) return errno == ENOENT ? 0 : -1;
  *has_range = x->records > 0;
  if (!*has_range || !id_in(id, x->min_id, x->max_id)) {
    close(fd);
    return 0;
  }
  if (r->find_scanning) {
    frame_scan_free(&r->find_scan);
    r->find_scanning = 0;
  }
  if (r->find_fd >= 0) close(r->find_fd);
  r->find_fd = fd;
  if (frame_scan_init(&r->find_scan, fd, h.header_len, size) < 0) {
    snprintf(r->err, sizeof r->err, "snapshot reader: out of memory");
    return -1;
  }
  r->find_scanning = 1;
  const uint8_t *body;
  uint32_t len;
  int k = seg_find(&r->find_scan, x, id, &body, &len);
  if (k < 0) {
    snprintf(r->err, sizeof r->err, "read %s/%s: %s", r->dir, e->name, strerror(r->find_scan.err));
    return -1;
  }
  return k == 1 && rec_body_decode(body, len, rec) == 0;
}

int snapshot_reader_find(snapshot_reader *r, const uint8_t id[16], snapshot_rec *rec) {
  seg_entry *segs;
  size_t n;
  if (seg_list(r->dir, &segs, &n) < 0) {
    snprintf(r->err, sizeof r->err, "list %s: %s", r->dir, strerror(errno));
    return SNAPSHOT_EIO;
  }
  /* the last segment whose first id is not above id */
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (memcmp(segs[mid].first_id, id, 16) <= 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  size_t start = lo ? lo - 1 : 0;
  seg_index x;
  seg_index_init(&x);
  int found = 0, has;
  /* forward: this segment, then later ones while their ranges reach back to id */
  for (size_t i = start; i < n && !found; i++) {
    found = find_in(r, &segs[i], id, rec, &x, &has);
    if (found < 0) break;
    if (i > start && has && memcmp(x.min_id, id, 16) > 0) break;
  }
  /* backward: earlier segments while their ranges reach forward to id */
  for (size_t i = start; i-- > 0 && found == 0;) {
    found = find_in(r, &segs[i], id, rec, &x, &has);
    if (found < 0) break;
    if (has && memcmp(x.max_id, id, 16) < 0) break;
  }
  seg_index_free(&x);
  free(segs);
  return found < 0 ? SNAPSHOT_EIO : found;
}

int snapshot_reader_open_at(const char *dir, const char *segment, uint64_t skip,
                            snapshot_reader **out, char *err, size_t errlen) {
  int rc = snapshot_reader_open(dir, NULL, out, err, errlen);
  if (rc < 0 || !segment || !*segment) return rc;
  snapshot_reader *r = *out;
  uint32_t day;
  uint8_t first[16];
  if (seg_name_parse(segment, &day, first) < 0 || !(r->start_seg = strdup(segment))) {
    if (err) snprintf(err, errlen, "%s: not a segment's name", segment);
    snapshot_reader_close(r);
    *out = NULL;
    return SNAPSHOT_EINVAL;
  }
  r->start_skip = skip;
  /* segments sort by first id, then name (seg_list): pass those before */
  while (r->next_seg < r->nseg) {
    const seg_entry *e = &r->segs[r->next_seg];
    int c = memcmp(e->first_id, first, 16);
    if (c > 0 || (c == 0 && strcmp(e->name, segment) >= 0)) break;
    r->next_seg++;
  }
  return 0;
}

void snapshot_reader_position(const snapshot_reader *r, const char **segment, uint64_t *ordinal) {
  *segment = r->have_last ? r->last.name : "";
  *ordinal = r->have_last ? r->ordinal : 0;
}

void snapshot_reader_close(snapshot_reader *r) {
  if (!r) return;
  free(r->start_seg);
  segment_close(r);
  if (r->find_scanning) frame_scan_free(&r->find_scan);
  if (r->find_fd >= 0) close(r->find_fd);
  seg_index_free(&r->idx);
  free(r->segs);
  free(r->dir);
  free(r);
}
