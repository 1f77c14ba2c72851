/* test_gc.c — retention and sampling: old days thinned to exactly the
 * records that matter (checked against an independent statement of the
 * rule), recent days untouched, reruns change nothing, the sample is the
 * asked-for fraction and the same every run, a dry run counts without
 * touching, an emptied segment disappears, a reader keeps reading the file
 * it had open, and gc runs beside a live writer without touching its active
 * segment or losing a record. */
#include "helpers.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>

#define DAY_MS 86400000ull

/* The rule, written out again here rather than calling snapshot_gc_keeps:
 * the test must be able to disagree with the code. */
static int should_keep(const snapshot_rec *r, int64_t cutoff, double sample, double minconf) {
  if (r->time_ns >= cutoff) return 1;
  if (!r->allowed || r->review) return 1;
  if (r->source == SNAPSHOT_SRC_MODEL || r->source == SNAPSHOT_SRC_ERROR) return 1;
  if (r->confidence < minconf) return 1;
  return snapshot_sample_point(r->id) < sample;
}

typedef struct expect {
  uint8_t (*ids)[16];
  size_t n, cap;
} expect;

static void expect_add(expect *e, const uint8_t id[16]) {
  if (e->n == e->cap) {
    e->cap = e->cap ? e->cap * 2 : 1024;
    e->ids = realloc(e->ids, e->cap * 16);
  }
  memcpy(e->ids[e->n++], id, 16);
}

/* Writes `per_day` records for each day offset in days[] (relative to now),
 * in one log session. Returns how many should survive gc with the given
 * settings; fills keep with their ids. */
static size_t write_days(const char *dir, int64_t now_ns, const int *days, int ndays, int per_day,
                         double sample, double minconf, double keep_days, expect *keep) {
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  o.segment_bytes = 48 * 1024; /* several segments per day */
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  int64_t cutoff = now_ns - (int64_t)(keep_days * 86400e9);
  size_t kept = 0;
  uint64_t n = 0;
  for (int d = 0; d < ndays; d++) {
    uint64_t start = (uint64_t)(now_ns / 1000000) - (uint64_t)days[d] * DAY_MS;
    for (int i = 0; i < per_day; i++, n++) {
      trec_make(&t, &g, start + (uint64_t)i * 10, n, 150);
      snapshot_log_append(log, &t.r, NULL);
      if (should_keep(&t.r, cutoff, sample, minconf)) {
        kept++;
        if (keep) expect_add(keep, t.r.id);
      }
    }
  }
  snapshot_log_close(log, NULL);
  return kept;
}

static int same_set(readback *b, expect *e) {
  if (b->n != e->n) return 0;
  qsort(b->ids, b->n, 16, id_cmp);
  qsort(e->ids, e->n, 16, id_cmp);
  return memcmp(b->ids, e->ids, e->n * 16) == 0;
}

static void test_keeps_what_matters(void) {
  char *dir = scratch_dir("gc");
  int64_t now = wall_ns();
  const int days[] = {12, 10, 8, 3, 0};
  expect keep = {0};
  size_t want = write_days(dir, now, days, 5, 2000, 0.01, 0.8, 7, &keep);
  size_t segs_before = count_files(dir, ".log");

  snapshot_gc_opts o;
  snapshot_gc_opts_init(&o);
  CHECK(o.keep_days == 7 && o.sample == 0.01 && o.min_confidence == 0.8); /* the defaults */
  o.now_ns = now;
  snapshot_gc_stats st;
  char err[SNAPSHOT_ERRLEN];
  CHECK(snapshot_gc(dir, &o, &st, err, sizeof err) == 0);
  CHECK(st.records_removed == 10000 - want);
  CHECK(st.segments == segs_before);
  CHECK(st.segments_rewritten > 0);
  CHECK(st.segments_locked == 0);
  CHECK(st.bytes_after < st.bytes_before);
  printf("gc: kept %zu of 10000 (%llu segments rewritten, %llu deleted)\n", want,
         (unsigned long long)st.segments_rewritten, (unsigned long long)st.segments_deleted);

  readback b;
  read_all(dir, NULL, &b);
  CHECK(b.bad == 0);
  CHECK_MSG(b.n == want, "%zu records left, want %zu", b.n, want);
  CHECK(same_set(&b, &keep));
  readback_free(&b);
  /* the recent days were not touched at all: 4000 of them left */
  snapshot_filter f;
  snapshot_filter_init(&f);
  f.since_ns = now - 7 * (int64_t)86400e9;
  read_all(dir, &f, &b);
  CHECK(b.n == 4000);
  readback_free(&b);
  /* the rewritten segments have fresh, valid sidecars: lookups work */
  snapshot_reader *r;
  CHECK(snapshot_reader_open(dir, NULL, &r, NULL, 0) == 0);
  snapshot_rec rec;
  int bad = 0;
  for (size_t i = 0; i < keep.n; i += 11)
    if (snapshot_reader_find(r, keep.ids[i], &rec) != 1) bad++;
  CHECK(bad == 0);
  snapshot_reader_close(r);

  /* a rerun keeps the same: nothing removed, nothing rewritten */
  CHECK(snapshot_gc(dir, &o, &st, err, sizeof err) == 0);
  CHECK(st.records_removed == 0);
  CHECK(st.segments_rewritten == 0 && st.segments_deleted == 0);
  read_all(dir, NULL, &b);
  CHECK(b.n == want);
  readback_free(&b);
  free(keep.ids);
  rm_rf(dir);
  free(dir);
}

static void test_sample_fraction(void) {
  /* With only the sample to go by (everything allowed, confident, by rule),
   * the fraction kept is the fraction asked for. */
  char *dir = scratch_dir("sample");
  snapshot_log_opts lo;
  snapshot_log_opts_init(&lo);
  lo.durability = SNAPSHOT_DURABLE_NONE;
  snapshot_log *log = log_open_or_die(dir, &lo);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  int64_t now = wall_ns();
  trec t;
  const int N = 20000;
  for (int i = 0; i < N; i++) {
    trec_make(&t, &g, (uint64_t)(now / 1000000) - 30 * DAY_MS + (uint64_t)i, 0, 20);
    /* record 0's fields, but every one with a new id */
    snapshot_log_append(log, &t.r, NULL);
  }
  snapshot_log_close(log, NULL);
  CHECK(t.r.allowed && !t.r.review && t.r.source == SNAPSHOT_SRC_RULE);
  snapshot_gc_opts o;
  snapshot_gc_opts_init(&o);
  o.now_ns = now;
  o.sample = 0.25;
  o.min_confidence = 0; /* confidence 0 is not below 0 */
  snapshot_gc_stats dry, st;
  o.dry_run = 1;
  CHECK(snapshot_gc(dir, &o, &dry, NULL, 0) == 0);
  o.dry_run = 0;
  CHECK(snapshot_gc(dir, &o, &st, NULL, 0) == 0);
  CHECK(dry.records_kept == st.records_kept && dry.records_removed == st.records_removed);
  double frac = (double)st.records_kept / N;
  CHECK_MSG(frac > 0.23 && frac < 0.27, "kept %.3f", frac);
  /* a smaller sample afterwards keeps a subset of the bigger one */
  readback before;
  read_all(dir, NULL, &before);
  o.sample = 0.1;
  CHECK(snapshot_gc(dir, &o, &st, NULL, 0) == 0);
  readback after;
  read_all(dir, NULL, &after);
  frac = (double)after.n / N;
  CHECK_MSG(frac > 0.085 && frac < 0.115, "kept %.3f", frac);
  qsort(before.ids, before.n, 16, id_cmp);
  int missing = 0;
  for (size_t i = 0; i < after.n; i++)
    if (!bsearch(after.ids[i], before.ids, before.n, 16, id_cmp)) missing++;
  CHECK(missing == 0);
  readback_free(&before);
  readback_free(&after);
  /* sample 0: nothing left, the segment goes */
  o.sample = 0;
  CHECK(snapshot_gc(dir, &o, &st, NULL, 0) == 0);
  CHECK(st.segments_deleted == 1);
  CHECK(count_files(dir, ".log") == 0);
  rm_rf(dir);
  free(dir);
}

static void test_dry_run(void) {
  char *dir = scratch_dir("dry");
  int64_t now = wall_ns();
  const int days[] = {9, 8};
  size_t want = write_days(dir, now, days, 2, 1500, 0.01, 0.8, 7, NULL);
  readback b0;
  read_all(dir, NULL, &b0);
  snapshot_gc_opts o;
  snapshot_gc_opts_init(&o);
  o.now_ns = now;
  o.dry_run = 1;
  snapshot_gc_stats st;
  CHECK(snapshot_gc(dir, &o, &st, NULL, 0) == 0);
  CHECK(st.records_removed == 3000 - want);
  CHECK(st.records_kept == want);
  readback b1;
  read_all(dir, NULL, &b1);
  CHECK(b1.n == b0.n && b1.n == 3000); /* nothing changed */
  readback_free(&b0);
  readback_free(&b1);
  /* keep_days large: nothing is old */
  o.dry_run = 0;
  o.keep_days = 30;
  CHECK(snapshot_gc(dir, &o, &st, NULL, 0) == 0);
  CHECK(st.records_removed == 0 && st.segments_rewritten == 0);
  /* invalid settings */
  o.sample = 1.5;
  char err[SNAPSHOT_ERRLEN];
  CHECK(snapshot_gc(dir, &o, &st, err, sizeof err) == SNAPSHOT_EINVAL);
  CHECK(strstr(err, "sample") != NULL);
  rm_rf(dir);
  free(dir);
}

/* Bytes of the segment files in dir. */
static uint64_t log_bytes(const char *dir) {
  DIR *d = opendir(dir);
  uint64_t n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (l < 4 || strcmp(e->d_name + l - 4, ".log")) continue;
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (stat(p, &st) == 0) n += (uint64_t)st.st_size;
  }
  if (d) closedir(d);
  return n;
}

/* A dry run predicts exactly what the gc after it does: the same counts and
 * the same bytes, to the byte, with records of very different sizes (it
 * once estimated the bytes from the share of records kept: 12.9 MB
 * predicted where 14.5 MB remained). */
static void test_dry_run_is_exact(void) {
  char *dir = scratch_dir("dryexact");
  int64_t now = wall_ns();
  const int days[] = {9, 8, 1};
  write_days(dir, now, days, 3, 1500, 0.01, 0.8, 7, NULL);
  snapshot_gc_opts o;
  snapshot_gc_opts_init(&o);
  o.now_ns = now;
  o.dry_run = 1;
  snapshot_gc_stats dry, real;
  CHECK(snapshot_gc(dir, &o, &dry, NULL, 0) == 0);
  o.dry_run = 0;
  CHECK(snapshot_gc(dir, &o, &real, NULL, 0) == 0);
  CHECK(dry.records_kept == real.records_kept && dry.records_removed == real.records_removed);
  CHECK(dry.segments == real.segments && dry.segments_rewritten == real.segments_rewritten &&
        dry.segments_deleted == real.segments_deleted);
  CHECK(dry.bytes_before == real.bytes_before);
  CHECK_MSG(dry.bytes_after == real.bytes_after, "dry run predicted %llu bytes, gc left %llu",
            (unsigned long long)dry.bytes_after, (unsigned long long)real.bytes_after);
  CHECK_MSG(real.bytes_after == log_bytes(dir), "gc says %llu bytes, the files hold %llu",
            (unsigned long long)real.bytes_after, (unsigned long long)log_bytes(dir));
  CHECK(real.records_removed > 0 && real.segments_rewritten > 0);
  rm_rf(dir);
  free(dir);
}

static void test_reader_keeps_old_file(void) {
  char *dir = scratch_dir("gcread");
  int64_t now = wall_ns();
  const int days[] = {20};
  write_days(dir, now, days, 1, 500, 0.01, 0.8, 7, NULL);
  CHECK(count_files(dir, ".log") > 1);
  snapshot_reader *r;
  CHECK(snapshot_reader_open(dir, NULL, &r, NULL, 0) == 0);
  snapshot_rec rec;
  CHECK(snapshot_reader_next(r, &rec) == 1); /* the reader has the first segment open */
  snapshot_gc_opts o;
  snapshot_gc_opts_init(&o);
  o.now_ns = now;
  CHECK(snapshot_gc(dir, &o, NULL, NULL, 0) == 0);
  /* it goes on through the old file it holds, then the rewritten others */
  size_t n = 1;
  int bad = 0;
  while (snapshot_reader_next(r, &rec) == 1) {
    if (trec_check(&rec) < 0) bad++;
    n++;
  }
  CHECK(bad == 0);
  CHECK(n < 500 && n > 1);
  snapshot_reader_close(r);
  rm_rf(dir);
  free(dir);
}

typedef struct live_job {
  snapshot_log *log;
  _Atomic int stop;
  uint64_t appended;
  uint64_t n0;
} live_job;

static void *live_writer(void *arg) {
  live_job *j = arg;
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  while (!atomic_load(&j->stop)) {
    trec_make(&t, &g, 0, j->n0 + j->appended, 150);
    if (snapshot_log_append(j->log, &t.r, NULL) == 0) j->appended++;
    if (j->appended % 16 == 0) nanosleep(&(struct timespec){0, 500000}, NULL);
  }
  return NULL;
}

static void test_gc_beside_writer(void) {
  char *dir = scratch_dir("gclive");
  int64_t now = wall_ns();
  const int days[] = {15, 11};
  expect keep = {0};
  size_t want_old = write_days(dir, now, days, 2, 2000, 0.01, 0.8, 7, &keep);
  /* now a live writer on the same directory, small segments so it rotates
   * while gc runs */
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.segment_bytes = 128 * 1024;
  o.interval_ms = 5;
  live_job j = {.log = log_open_or_die(dir, &o), .n0 = 100000};
  atomic_init(&j.stop, 0);
  /* first, with the writer holding an active segment and idle: gc skips
   * exactly that one */
  {
    snapshot_idgen g0;
    snapshot_idgen_init(&g0);
    trec t;
    trec_make(&t, &g0, 0, j.n0, 10);
    uint64_t ticket;
    snapshot_log_append(j.log, &t.r, &ticket);
    snapshot_log_wait_durable(j.log, ticket);
    j.appended = 1;
    snapshot_gc_opts g1;
    snapshot_gc_opts_init(&g1);
    g1.dry_run = 1;
    snapshot_gc_stats st;
    CHECK(snapshot_gc(dir, &g1, &st, NULL, 0) == 0);
    CHECK(st.segments_locked == 1);
  }
  pthread_t th;
  pthread_create(&th, NULL, live_writer, &j);
  nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
  snapshot_gc_opts g;
  snapshot_gc_opts_init(&g);
  uint64_t locked = 0, removed = 0;
  for (int i = 0; i < 5; i++) {
    snapshot_gc_stats st;
    g.now_ns = wall_ns();
    char err[SNAPSHOT_ERRLEN];
    int rc = snapshot_gc(dir, &g, &st, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    locked += st.segments_locked;
    removed += st.records_removed;
    nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
  }
  atomic_store(&j.stop, 1);
  pthread_join(th, NULL);
  snapshot_log_status ls;
  snapshot_log_close(j.log, &ls);
  /* (how often gc met the active segment depends on timing; the idle check
   * above proves it is skipped, this part proves nothing is lost) */
  CHECK(removed == 4000 - want_old);
  CHECK(ls.written == j.appended);
  CHECK(ls.write_errors == 0);
  /* everything the live writer wrote is there, and the old survivors */
  readback b;
  read_all(dir, NULL, &b);
  CHECK(b.bad == 0);
  size_t live = 0;
  for (size_t i = 0; i < b.n; i++) live += b.nums[i] >= 100000;
  CHECK_MSG(live == j.appended, "%zu of %llu live records", live, (unsigned long long)j.appended);
  CHECK(b.n - live == want_old);
  readback_free(&b);
  printf("gc beside a writer: %llu live records, %llu skips of the active segment\n",
         (unsigned long long)j.appended, (unsigned long long)locked);
  free(keep.ids);
  rm_rf(dir);
  free(dir);
}

static void test_keeps_rule(void) {
  snapshot_gc_opts o;
  snapshot_gc_opts_init(&o);
  o.sample = 0;
  snapshot_rec r;
  memset(&r, 0, sizeof r);
  r.allowed = 1;
  r.confidence = 0.9f;
  CHECK(snapshot_gc_keeps(&o, &r) == 0);
  r.allowed = 0;
  CHECK(snapshot_gc_keeps(&o, &r) == 1);
  r.allowed = 1;
  r.review = 1;
  CHECK(snapshot_gc_keeps(&o, &r) == 1);
  r.review = 0;
  r.source = SNAPSHOT_SRC_MODEL;
  CHECK(snapshot_gc_keeps(&o, &r) == 1);
  r.source = SNAPSHOT_SRC_ERROR;
  CHECK(snapshot_gc_keeps(&o, &r) == 1);
  r.source = SNAPSHOT_SRC_DEFAULT;
  CHECK(snapshot_gc_keeps(&o, &r) == 0);
  r.confidence = 0.79f;
  CHECK(snapshot_gc_keeps(&o, &r) == 1);
  r.confidence = __builtin_nanf("");
  CHECK(snapshot_gc_keeps(&o, &r) == 1);
  r.confidence = 1;
  o.sample = 1;
  CHECK(snapshot_gc_keeps(&o, &r) == 1);
  /* the sample point is a fixed function of the id (documented) */
  uint8_t id[16] = {0};
  double p0 = snapshot_sample_point(id);
  CHECK(p0 >= 0 && p0 < 1);
  CHECK(snapshot_sample_point(id) == p0);
  id[15] = 1;
  CHECK(snapshot_sample_point(id) != p0);
}

int main(void) {
  TEST_RUN(test_keeps_rule);
  TEST_RUN(test_keeps_what_matters);
  TEST_RUN(test_sample_fraction);
  TEST_RUN(test_dry_run);
  TEST_RUN(test_dry_run_is_exact);
  TEST_RUN(test_reader_keeps_old_file);
  TEST_RUN(test_gc_beside_writer);
  TEST_END();
}
