/* helpers.h — what the snapshot tests share: scratch directories, records
 * whose payload carries their own id and number (so every read-back can be
 * checked for integrity, not just counted), and reading a whole directory
 * back into memory. */
#ifndef VD_TESTS_SNAPSHOT_HELPERS_H
#define VD_TESTS_SNAPSHOT_HELPERS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "snapshot/internal.h"
#include "snapshot/snapshot.h"
#include "test.h"

static inline int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static inline void rm_rf(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* A fresh directory under $TMPDIR or /tmp (malloc'd path). */
static inline char *scratch_dir(const char *tag) {
  char name[128], tmpl[512];
  snprintf(name, sizeof name, "snap-%s", tag);
  return strdup(test_tmpdir(tmpl, sizeof tmpl, name));
}

static inline int64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A record with storage for its strings. Its payload is
 * {"id":"<id>","n":<n>,"pad":"xxx…"} with a pad length that varies with n. */
typedef struct trec {
  snapshot_rec r;
  char point[32], action[32], pv[72];
  char payload[4200];
} trec;

static const char *const trec_points[] = {"login", "payment", "tool_call"};
static const char *const trec_actions[] = {"allow", "deny", "review", "ask_mfa"};

/* Fills t for number n at unix ms `ms` (0: now), id from g. pad_max bounds
 * the payload's padding (<= 4000). */
static inline void trec_make_id(trec *t, const uint8_t id[16], uint64_t n, size_t pad_max);
static inline void trec_make(trec *t, snapshot_idgen *g, uint64_t ms, uint64_t n, size_t pad_max) {
  uint8_t id[16];
  if (ms)
    snapshot_id_new_at(g, ms, id);
  else
    snapshot_id_new(g, id);
  trec_make_id(t, id, n, pad_max);
}

/* The same with the id given. */
static inline void trec_make_id(trec *t, const uint8_t id[16], uint64_t n, size_t pad_max) {
  memset(&t->r, 0, sizeof t->r);
  memcpy(t->r.id, id, 16);
  uint64_t idms = snapshot_id_time_ms(t->r.id);
  t->r.time_ns = (int64_t)idms * 1000000 + (int64_t)(n % 1000000);
  t->r.allowed = n % 3 != 1;
  t->r.review = n % 7 == 3;
  t->r.source = (uint8_t)(n % 4);
  t->r.confidence = (float)((n * 37) % 100) / 100.0f;
  snprintf(t->point, sizeof t->point, "%s", trec_points[n % 3]);
  snprintf(t->action, sizeof t->action, "%s", trec_actions[n % 4]);
  snprintf(t->pv, sizeof t->pv, "%s", n % 2 ? "aaaa1111bbbb2222" : "cccc3333dddd4444");
  t->r.point = t->point;
  t->r.point_len = strlen(t->point);
  t->r.action = t->action;
  t->r.action_len = strlen(t->action);
  t->r.policy_version = t->pv;
  t->r.policy_version_len = strlen(t->pv);
  char idt[SNAPSHOT_ID_TEXT];
  snapshot_id_format(t->r.id, idt);
  size_t pad = pad_max ? (size_t)((n * 7919) % (pad_max + 1)) : 0;
  if (pad > 4000) pad = 4000;
  int w = snprintf(t->payload, sizeof t->payload, "{\"id\":\"%s\",\"n\":%llu,\"pad\":\"", idt,
                   (unsigned long long)n);
  memset(t->payload + w, 'x', pad);
  memcpy(t->payload + w + pad, "\"}", 3);
  t->r.payload = t->payload;
  t->r.payload_len = (size_t)w + pad + 2;
}

/* Whether a record read back is whole: its payload names its own id, and
 * the header fields are the ones trec_make derives from its number. Returns
 * the number, or -1. */
static inline long long trec_check(const snapshot_rec *r) {
  char idt[SNAPSHOT_ID_TEXT], want[64];
  snapshot_id_format(r->id, idt);
  int w = snprintf(want, sizeof want, "{\"id\":\"%s\",\"n\":", idt);
  if (r->payload_len < (size_t)w + 4 || memcmp(r->payload, want, (size_t)w) != 0) return -1;
  long long n = strtoll(r->payload + w, NULL, 10);
  if (n < 0) return -1;
  if (r->allowed != (n % 3 != 1) || r->review != (n % 7 == 3) || r->source != n % 4) return -1;
  if (r->point_len != strlen(trec_points[n % 3]) ||
      memcmp(r->point, trec_points[n % 3], r->point_len) != 0)
    return -1;
  if (r->action_len != strlen(trec_actions[n % 4]) ||
      memcmp(r->action, trec_actions[n % 4], r->action_len) != 0)
    return -1;
  if (r->confidence != (float)((n * 37) % 100) / 100.0f) return -1;
  /* the rest: digits, ,"pad":" then only x up to the closing "} */
  size_t i = (size_t)w;
  while (i < r->payload_len && r->payload[i] >= '0' && r->payload[i] <= '9') i++;
  static const char mid[] = ",\"pad\":\"";
  if (r->payload_len < i + sizeof mid - 1 + 2 || memcmp(r->payload + i, mid, sizeof mid - 1) != 0)
    return -1;
  for (i += sizeof mid - 1; i < r->payload_len - 2; i++)
    if (r->payload[i] != 'x') return -1;
  if (memcmp(r->payload + r->payload_len - 2, "\"}", 2) != 0) return -1;
  return n;
}

/* Everything in dir, in reader order: ids (16 bytes each) and numbers.
 * Returns the count; bad counts records that failed trec_check. */
typedef struct readback {
  uint8_t (*ids)[16];
  long long *nums;
  size_t n, cap;
  size_t bad;
} readback;

static inline void readback_free(readback *b) {
  free(b->ids);
  free(b->nums);
  memset(b, 0, sizeof *b);
}

static inline size_t read_all(const char *dir, const snapshot_filter *f, readback *b) {
  memset(b, 0, sizeof *b);
  snapshot_reader *r;
  char err[SNAPSHOT_ERRLEN];
  if (snapshot_reader_open(dir, f, &r, err, sizeof err) < 0) {
    fprintf(stderr, "read_all: %s\n", err);
    b->bad++;
    return 0;
  }
  snapshot_rec rec;
  int k;
  while ((k = snapshot_reader_next(r, &rec)) == 1) {
    if (b->n == b->cap) {
      b->cap = b->cap ? b->cap * 2 : 1024;
      b->ids = realloc(b->ids, b->cap * 16);
      b->nums = realloc(b->nums, b->cap * sizeof *b->nums);
    }
    memcpy(b->ids[b->n], rec.id, 16);
    b->nums[b->n] = trec_check(&rec);
    if (b->nums[b->n] < 0) b->bad++;
    b->n++;
  }
  if (k < 0) {
    fprintf(stderr, "read_all: %s\n", snapshot_reader_error(r));
    b->bad++;
  }
  snapshot_reader_close(r);
  return b->n;
}

static inline int id_cmp(const void *a, const void *b) { return memcmp(a, b, 16); }

/* Opens a log or exits: tests cannot go on without one. */
static inline snapshot_log *log_open_or_die(const char *dir, const snapshot_log_opts *o) {
  snapshot_log *log;
  char err[SNAPSHOT_ERRLEN];
  int rc = snapshot_log_open(dir, o, &log, err, sizeof err);
  if (rc < 0) {
    fprintf(stderr, "snapshot_log_open %s: %s (%s)\n", dir, err, snapshot_strerror(rc));
    exit(2);
  }
  return log;
}

static inline size_t count_files(const char *dir, const char *suffix) {
  seg_entry *segs;
  size_t n;
  if (strcmp(suffix, ".log") == 0) {
    if (seg_list(dir, &segs, &n) < 0) return 0;
    free(segs);
    return n;
  }
  size_t c = 0;
  if (seg_list(dir, &segs, &n) < 0) return 0;
  for (size_t i = 0; i < n; i++) {
    char p[4096];
    struct stat st;
    seg_path(p, sizeof p, dir, segs[i].name, 1);
    if (stat(p, &st) == 0) c++;
  }
  free(segs);
  return c;
}

#endif
