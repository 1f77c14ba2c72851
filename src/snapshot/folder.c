/* folder.c — the snapshot folder as a whole: the versions it carries, and
 * `verify`, which proves the folder can be replayed alone.
 *
 * A folder holds its segments and, in `versions/`, every policy and model
 * version its records name, content-addressed as in a version store
 * (<version>.json, models/<version>.json, models/<version>.features.yaml:
 * each file's SHA-256 is its name). The engine writes them when it loads a
 * bundle, before any decision under it, so a record never names a version
 * its folder lacks (policy.h, pin_dir). This file does not write versions:
 * it names the folder and checks it.
 *
 * verify reads every frame of every segment (each CRC checked, nothing
 * trusted from an index) and every version a record names. It reads a
 * record's JSON for the model versions (the header carries the policy
 * version alone). A segment a writer holds may end in a record still being
 * written: its tail is not reported. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/json.h"
#include "core/sha256.h"
#include "snapshot/internal.h"
#include "snapshot/writer.h"

int snapshot_folder_make(const char *dir, char *err, size_t errlen) {
  if (writer_mkdir_p(dir) < 0) {
    snprintf(err, errlen, "cannot create the folder %s: %s", dir, strerror(errno));
    return SNAPSHOT_EIO;
  }
  return 0;
}

char *snapshot_versions_path(const char *dir) {
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--;
  char *p = malloc(n + sizeof "/versions");
  if (p) {
    memcpy(p, dir, n);
    memcpy(p + n, "/versions", sizeof "/versions");
  }
  return p;
}

/* The versions already checked, so that each is read once. */
typedef struct seen {
  char (*names)[96];
  size_t n, cap;
} seen;

static int seen_add(seen *s, const char *name) {
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->names[i], name)) return 0;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 32;
    void *p = realloc(s->names, cap * sizeof *s->names);
    if (!p) return -1;
    s->names = p;
    s->cap = cap;
  }
  snprintf(s->names[s->n++], sizeof s->names[0], "%s", name);
  return 1;
}

typedef struct verify_run {
  const char *dir;
  char *versions;
  snapshot_verify_cb cb;
  void *ud;
  snapshot_verify_stats *st;
  seen seen;
  arena mem;
} verify_run;

static void problem(verify_run *v, const char *kind, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void problem(verify_run *v, const char *kind, const char *file, const char *fmt, ...) {
  char detail[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  v->st->problems++;
  if (v->cb) v->cb(v->ud, kind, file, detail);
}

static int is_hex64(const char *s, size_t n) {
  if (n != 64) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

/* versions/<sub><hex><ext> is there and hashes to hex. */
static void check_version(verify_run *v, const char *sub, const char *hex, size_t n,
                          const char *ext, const char *id) {
  char name[96], path[4400];
  if (!is_hex64(hex, n)) return; /* "" or null: nothing named */
  snprintf(name, sizeof name, "%s%.*s%s", sub, (int)n, hex, ext);
  int fresh = seen_add(&v->seen, name);
  if (fresh <= 0) return; /* checked already (or out of memory: checked as far as can be) */
  v->st->versions++;
  snprintf(path, sizeof path, "%s/%s", v->versions, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0) {
    v->st->versions_bad++;
    problem(v, "missing", name, "named by snapshot %s, not in the folder's versions (%s)", id,
            strerror(errno));
    if (fd >= 0) close(fd);
    return;
  }
  size_t len = (size_t)st.st_size;
  char *buf = malloc(len ? len : 1);
  if (!buf || read_full(fd, buf, len, 0) < 0) {
    v->st->versions_bad++;
    problem(v, "unreadable", name, "%s", buf ? strerror(errno ? errno : EIO) : "out of memory");
    free(buf);
    close(fd);
    return;
  }
  close(fd);
  char got[65];
  sha256_hex(buf, len, got);
  free(buf);
  if (memcmp(got, hex, 64) != 0) {
    v->st->versions_bad++;
    problem(v, "mismatch", name, "its SHA-256 is %s: the file changed since it was written", got);
  }
}

static void check_record(verify_run *v, const snapshot_rec *rec) {
  char id[SNAPSHOT_ID_TEXT];
  snapshot_id_format(rec->id, id);
  check_version(v, "", rec->policy_version, rec->policy_version_len, ".json", id);
  /* the model's versions are in the payload alone */
  if (!memmem(rec->payload, rec->payload_len, "\"features_version\"", 18)) return;
  arena_reset(&v->mem);
  value root;
  json_opts jo = {.lenient = 1, .duplicates = JSON_DUP_LAST_WINS};
  if (json_parse(&v->mem, rec->payload, rec->payload_len, &jo, &root, NULL) < 0 ||
      root.kind != V_MAP) {
    problem(v, "payload", id, "the snapshot's JSON does not read");
    return;
  }
  const value *m = value_map_get(&root, "model", 5);
  if (!m || m->kind != V_MAP) return;
  const value *mv = value_map_get(m, "version", 7);
  const value *fv = value_map_get(m, "features_version", 16);
  if (mv && mv->kind == V_STRING) check_version(v, "models/", mv->s, mv->n, ".json", id);
  if (fv && fv->kind == V_STRING) check_version(v, "models/", fv->s, fv->n, ".features.yaml", id);
}

static int verify_segment(verify_run *v, const seg_entry *e) {
  char path[4096];
  if (seg_path(path, sizeof path, v->dir, e->name, 0) < 0) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0; /* removed by gc meanwhile */
  v->st->segments++;
  /* a writer's active segment: a record may be half written at its end */
  int live = flock(fd, LOCK_SH | LOCK_NB) < 0;
  struct stat st;
  uint8_t hb[SEG_HEADER_MAX];
  seg_header h;
  if (fstat(fd, &st) < 0) {
    problem(v, "unreadable", e->name, "%s", strerror(errno));
    close(fd);
    return 0;
  }
  uint64_t size = (uint64_t)st.st_size;
  size_t hn = size < SEG_HEADER_MAX ? (size_t)size : SEG_HEADER_MAX;
  int hrc = hn ? (read_full(fd, hb, hn, 0) < 0 ? -1 : seg_header_decode(hb, hn, &h)) : 1;
  if (hrc != 0) {
    if (hrc == -2)
      problem(v, "header", e->name,
              "a segment of format version %u, which this build does not read",
              (unsigned)h.version);
    else if (!(live && hrc == 1))
      problem(v, "header", e->name, "the segment header is damaged or cut short");
    close(fd);
    return 0;
  }
  frame_scan s;
  if (frame_scan_init(&s, fd, h.header_len, size) < 0) {
    close(fd);
    return SNAPSHOT_ENOMEM;
  }
  const uint8_t *body;
  uint32_t len;
  int k;
  while ((k = frame_scan_next(&s, &body, &len)) == 1) {
    snapshot_rec rec;
    rec_body_decode(body, len, &rec);
    v->st->records++;
    check_record(v, &rec);
  }
  if (k < 0)
    problem(v, "unreadable", e->name, "%s", strerror(s.err));
  else if (s.damaged_bytes)
    problem(v, "damaged", e->name,
            "%llu damaged byte%s in %llu place%s (a record's checksum does not match): those "
            "records are lost",
            (unsigned long long)s.damaged_bytes, s.damaged_bytes == 1 ? "" : "s",
            (unsigned long long)s.damaged_regions, s.damaged_regions == 1 ? "" : "s");
  if (k >= 0 && s.torn && !live)
    problem(v, "damaged", e->name,
            "the last %llu bytes are not a valid record (a torn or damaged tail, from offset "
            "%llu)",
            (unsigned long long)(size - s.tail_off), (unsigned long long)s.tail_off);
  v->st->damaged_bytes += s.damaged_bytes + (s.torn && !live ? size - s.tail_off : 0);
  frame_scan_free(&s);
  close(fd);
  return 0;
}

int snapshot_verify(const char *dir, snapshot_verify_cb cb, void *ud, snapshot_verify_stats *stats,
                    char *err, size_t errlen) {
  snapshot_verify_stats local;
  if (!stats) stats = &local;
  memset(stats, 0, sizeof *stats);
  verify_run v = {dir, snapshot_versions_path(dir), cb, ud, stats, {0}, {0}};
  if (!v.versions) {
    snprintf(err, errlen, "out of memory");
    return SNAPSHOT_ENOMEM;
  }
  arena_init(&v.mem, NULL, 0, 0);
  seg_entry *segs;
  size_t n;
  int rc = 0;
  if (seg_list(dir, &segs, &n) < 0) {
    snprintf(err, errlen, "cannot read the snapshot folder %s: %s", dir, strerror(errno));
    rc = SNAPSHOT_EIO;
  } else {
    for (size_t i = 0; i < n && rc == 0; i++) rc = verify_segment(&v, &segs[i]);
    free(segs);
    if (rc) snprintf(err, errlen, "verify %s: out of memory", dir);
  }
  arena_free(&v.mem);
  free(v.seen.names);
  free(v.versions);
  return rc;
}

int snapshot_folder_usage(const char *dir, snapshot_day_usage **out, size_t *n, char *err,
                          size_t errlen) {
  *out = NULL;
  *n = 0;
  seg_entry *segs;
  size_t ns;
  if (seg_list(dir, &segs, &ns) < 0) {
    snprintf(err, errlen, "cannot read the snapshot folder %s: %s", dir, strerror(errno));
    return SNAPSHOT_EIO;
  }
  snapshot_day_usage *days = calloc(ns ? ns : 1, sizeof *days);
  if (!days) {
    free(segs);
    snprintf(err, errlen, "out of memory");
    return SNAPSHOT_ENOMEM;
  }
  size_t nd = 0;
  for (size_t i = 0; i < ns; i++) {
    char path[4096];
    struct stat st;
    uint64_t bytes = 0;
    for (int idx = 0; idx < 2; idx++)
      if (seg_path(path, sizeof path, dir, segs[i].name, idx) == 0 && stat(path, &st) == 0)
        bytes += (uint64_t)st.st_size;
    size_t k = 0;
    while (k < nd && days[k].day != segs[i].day) k++;
    if (k == nd) days[nd++].day = segs[i].day;
    days[k].segments++;
    days[k].bytes += bytes;
  }
  free(segs);
  *out = days;
  *n = nd;
  return 0;
}
