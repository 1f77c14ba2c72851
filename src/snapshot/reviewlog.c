/* reviewlog.c — DIR/reviews.log (reviewlog.h): the frames and recovery of
 * the segment log (scan.c, the CRC32C, cutting a torn tail, the repairs
 * journal), for a file that holds small JSON bodies and is fsynced at
 * every append, since each outcome is a person's answer and is few. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/internal.h"
#include "snapshot/reviewlog.h"

#define RL_MAGIC "VDREVW"
#define RL_VERSION 1

struct reviewlog {
  pthread_mutex_t mu;
  int fd;
  uint64_t end; /* the file's length: where the next frame goes */
  char path[PATH_MAX];
};

struct reviewlog_reader {
  int fd;
  frame_scan s;
  char path[PATH_MAX];
};

/* A body is a JSON object's text: it starts with '{' and ends with '}'. */
static int body_ok(const uint8_t *b, uint32_t n) {
  return n >= 2 && b[0] == '{' && b[n - 1] == '}';
}

static void scan_setup(frame_scan *s) {
  s->min_body = 2;
  s->max_body = REVIEWLOG_BODY_MAX;
  s->body_ok = body_ok;
  s->blocks = 0; /* reviews.log is plain frames, never compacted */
}

static int rl_path(char *out, const char *dir, char *err, size_t errlen) {
  if (seg_path(out, PATH_MAX, dir, REVIEWLOG_NAME, 0) < 0) {
    snprintf(err, errlen, "%s/%s: path too long", dir, REVIEWLOG_NAME);
    return -1;
  }
  return 0;
}

/* 0 a good header; -1 (err set) another file or format. */
static int header_check(const uint8_t *h, const char *path, char *err, size_t errlen) {
  if (memcmp(h, RL_MAGIC, 6) != 0) {
    snprintf(err, errlen, "%s: not a reviews log (no VDREVW header)", path);
    return -1;
  }
  if (get_le16(h + 6) != RL_VERSION) {
    snprintf(err, errlen, "%s: reviews log format %u, this verdict reads %d", path, get_le16(h + 6),
             RL_VERSION);
    return -1;
  }
  return 0;
}

int reviewlog_open(const char *dir, reviewlog **out, uint64_t *cut, char *err, size_t errlen) {
  *out = NULL;
  if (cut) *cut = 0;
  reviewlog *l = calloc(1, sizeof *l);
  if (!l) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (rl_path(l->path, dir, err, errlen) < 0) goto fail;
  l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (l->fd < 0) {
    snprintf(err, errlen, "open %s: %s", l->path, strerror(errno));
    goto fail;
  }
  struct stat st;
  if (fstat(l->fd, &st) < 0) {
    snprintf(err, errlen, "stat %s: %s", l->path, strerror(errno));
    goto fail_fd;
  }
  uint64_t size = (uint64_t)st.st_size;
  if (size < REVIEWLOG_HEADER) {
    /* new, or a crash while the header was written: nothing was recorded */
    uint8_t h[REVIEWLOG_HEADER];
    memcpy(h, RL_MAGIC, 6);
    put_le16(h + 6, RL_VERSION);
    if (size > 0 && ftruncate(l->fd, 0) < 0) {
      snprintf(err, errlen, "truncate %s: %s", l->path, strerror(errno));
      goto fail_fd;
    }
    if (write_full(l->fd, h, sizeof h, 0) < 0 || fsync(l->fd) < 0 || dir_sync(dir) < 0) {
      snprintf(err, errlen, "write %s: %s", l->path, strerror(errno));
      goto fail_fd;
    }
    l->end = REVIEWLOG_HEADER;
  } else {
    uint8_t h[REVIEWLOG_HEADER];
    if (read_full(l->fd, h, sizeof h, 0) < 0) {
      snprintf(err, errlen, "read %s: %s", l->path, errno ? strerror(errno) : "short read");
      goto fail_fd;
    }
    if (header_check(h, l->path, err, errlen) < 0) goto fail_fd;
    frame_scan s;
    if (frame_scan_init(&s, l->fd, REVIEWLOG_HEADER, size) < 0) {
      snprintf(err, errlen, "out of memory");
      goto fail_fd;
    }
    scan_setup(&s);
    const uint8_t *b;
    uint32_t n;
    int r;
    while ((r = frame_scan_next(&s, &b, &n)) == 1) {
    }
    int serr = s.err;
    uint64_t tail = s.tail_off;
    int torn = s.torn;
    frame_scan_free(&s);
    if (r < 0) {
      snprintf(err, errlen, "read %s: %s", l->path, strerror(serr));
      goto fail_fd;
    }
    if (torn) {
      if (ftruncate(l->fd, (off_t)tail) < 0 || fsync(l->fd) < 0) {
        snprintf(err, errlen, "cut the torn tail of %s: %s", l->path, strerror(errno));
        goto fail_fd;
      }
      snapshot_repair rep = {.kind = SNAPSHOT_REPAIR_CUT_TAIL, .bytes = size - tail, .records = 1};
      snprintf(rep.segment, sizeof rep.segment, "%s", REVIEWLOG_NAME);
      snapshot_repair_journal(dir, &rep);
      if (cut) *cut = size - tail;
      size = tail;
    }
    l->end = size;
  }
  pthread_mutex_init(&l->mu, NULL);
  *out = l;
  return 0;
fail_fd:
  close(l->fd);
fail:
  free(l);
  return -1;
}

int reviewlog_append(reviewlog *l, const char *body, size_t len, char *err, size_t errlen) {
  if (len < 2 || len > REVIEWLOG_BODY_MAX || body[0] != '{' || body[len - 1] != '}') {
    snprintf(err, errlen, "an outcome must be a JSON object of at most %d bytes",
             REVIEWLOG_BODY_MAX);
    return -1;
  }
  uint8_t *f = malloc(FRAME_HEADER + len);
  if (!f) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  put_le32(f, (uint32_t)len);
  put_le32(f + 4, snapshot_crc32c(0, body, len));
  memcpy(f + FRAME_HEADER, body, len);
  pthread_mutex_lock(&l->mu);
  int rc = 0;
  if (write_full(l->fd, f, FRAME_HEADER + len, l->end) < 0 || fsync(l->fd) < 0) {
    int e = errno ? errno : EIO;
    /* After a failed write or fsync the page cache cannot be trusted to
     * hold the frame: cut it off, so that it is not acknowledged now and
     * found later. */
    if (ftruncate(l->fd, (off_t)l->end) == 0) (void)fsync(l->fd);
    snprintf(err, errlen, "write %s: %s", l->path, strerror(e));
    rc = -1;
  } else {
    l->end += FRAME_HEADER + len;
  }
  pthread_mutex_unlock(&l->mu);
  free(f);
  return rc;
}

void reviewlog_close(reviewlog *l) {
  if (!l) return;
  close(l->fd);
  pthread_mutex_destroy(&l->mu);
  free(l);
}

int reviewlog_reader_open(const char *dir, reviewlog_reader **out, char *err, size_t errlen) {
  *out = NULL;
  reviewlog_reader *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (rl_path(r->path, dir, err, errlen) < 0) goto fail;
  r->fd = open(r->path, O_RDONLY | O_CLOEXEC);
  if (r->fd < 0) {
    if (errno == ENOENT) {
      free(r);
      return 1;
    }
    snprintf(err, errlen, "open %s: %s", r->path, strerror(errno));
    goto fail;
  }
  struct stat st;
  uint8_t h[REVIEWLOG_HEADER];
  if (fstat(r->fd, &st) < 0) {
    snprintf(err, errlen, "stat %s: %s", r->path, strerror(errno));
    goto fail_fd;
  }
  uint64_t size = (uint64_t)st.st_size;
  if (size < REVIEWLOG_HEADER)
    size = REVIEWLOG_HEADER; /* being created: empty */
  else if (read_full(r->fd, h, sizeof h, 0) < 0) {
    snprintf(err, errlen, "read %s: %s", r->path, errno ? strerror(errno) : "short read");
    goto fail_fd;
  } else if (header_check(h, r->path, err, errlen) < 0) {
    goto fail_fd;
  }
  if (frame_scan_init(&r->s, r->fd, REVIEWLOG_HEADER, size) < 0) {
    snprintf(err, errlen, "out of memory");
    goto fail_fd;
  }
  scan_setup(&r->s);
  *out = r;
  return 0;
fail_fd:
  close(r->fd);
fail:
  free(r);
  return -1;
}

void reviewlog_reader_seek(reviewlog_reader *r, uint64_t off) {
  frame_scan_seek(&r->s, off < REVIEWLOG_HEADER ? REVIEWLOG_HEADER : off);
}

int reviewlog_reader_next(reviewlog_reader *r, const char **body, uint32_t *len, uint64_t *off,
                          uint64_t *next, char *err, size_t errlen) {
  const uint8_t *b;
  int rc = frame_scan_next(&r->s, &b, len);
  if (rc < 0) {
    snprintf(err, errlen, "read %s: %s", r->path, strerror(r->s.err));
    return -1;
  }
  if (rc == 0) return 0;
  *body = (const char *)b;
  if (off) *off = r->s.frame_off;
  if (next) *next = r->s.off;
  return 1;
}

void reviewlog_reader_close(reviewlog_reader *r) {
  if (!r) return;
  frame_scan_free(&r->s);
  close(r->fd);
  free(r);
}
