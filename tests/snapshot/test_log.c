/* test_log.c — the writer and reader end to end: records come back whole
 * and in order, across size and day rotations and across reopening; each
 * durability mode syncs as it says; the counters add up; one writer per
 * directory; bad records are refused and counted; filters select on the
 * header fields. */
#include "helpers.h"

#include <pthread.h>

static void test_round_trip(void) {
  char *dir = scratch_dir("rt");
  char nested[512];
  snprintf(nested, sizeof nested, "%s/a/b/snapshots", dir); /* created on open */
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  o.node = "node-7";
  snapshot_log *log = log_open_or_die(nested, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  const int N = 10000;
  uint64_t last = 0, ticket;
  int ok = 0, grew = 1;
  for (int i = 0; i < N; i++) {
    trec_make(&t, &g, 0, (uint64_t)i, 600);
    if (snapshot_log_append(log, &t.r, &ticket) == 0) ok++;
    if (ticket <= last) grew = 0;
    last = ticket;
  }
  CHECK(ok == N);
  CHECK(grew); /* tickets grow with append order */
  CHECK(snapshot_log_wait_durable(log, last) == 0);
  snapshot_log_status st;
  snapshot_log_status_get(log, &st);
  CHECK(st.durable_ticket >= last);
  CHECK(st.written == (uint64_t)N);
  snapshot_log_close(log, &st);
  CHECK(st.appended == (uint64_t)N);
  CHECK(st.written == (uint64_t)N);
  CHECK(st.dropped == 0 && st.rejected == 0 && st.write_errors == 0);
  CHECK(st.queue_depth == 0);
  CHECK(st.fsyncs == 0); /* durability NONE never syncs */
  CHECK(st.segments == 1);
  CHECK(st.last_error[0] == '\0');

  readback b;
  CHECK(read_all(nested, NULL, &b) == (size_t)N);
  CHECK(b.bad == 0);
  int in_order = 1;
  for (size_t i = 0; i < b.n; i++)
    if (b.nums[i] != (long long)i) in_order = 0;
  CHECK(in_order);
  readback_free(&b);

  /* the segment header names the node and its first record */
  seg_entry *segs;
  size_t n;
  CHECK(seg_list(nested, &segs, &n) == 0 && n == 1);
  if (n == 1) {
    seg_header h;
    uint64_t size;
    seg_index x;
    seg_index_init(&x);
    int fd = seg_open_indexed(nested, segs[0].name, 0, &h, &x, &size, NULL, 0);
    CHECK(fd >= 0);
    CHECK_STR(h.node, "node-7");
    CHECK(h.version == SEG_VERSION);
    CHECK(x.records == (uint64_t)N);
    /* compacted at close (more than a block's worth): one entry a block */
    uint64_t in_blocks = 0;
    for (size_t i = 0; i < x.n; i++)
      if (x.blocks[i].flags & IDX_FLAG_BLOCK) in_blocks += x.blocks[i].count;
    CHECK(in_blocks == (uint64_t)N);
    if (fd >= 0) close(fd);
    seg_index_free(&x);
  }
  free(segs);
  CHECK(count_files(nested, ".idx") == 1); /* sealed at close */
  rm_rf(dir);
  free(dir);
}

static void test_rotation_by_size(void) {
  char *dir = scratch_dir("size");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  o.segment_bytes = 64 * 1024;
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  const int N = 5000;
  for (int i = 0; i < N; i++) {
    trec_make(&t, &g, 0, (uint64_t)i, 300);
    snapshot_log_append(log, &t.r, NULL);
  }
  snapshot_log_status st;
  snapshot_log_close(log, &st);
  size_t nseg = count_files(dir, ".log");
  CHECK_MSG(nseg >= 10, "%zu segments", nseg);
  CHECK(st.segments == nseg);
  CHECK(count_files(dir, ".idx") == nseg); /* every segment sealed */
  /* no segment is past the limit (a single record may not be split) */
  seg_entry *segs;
  size_t n;
  seg_list(dir, &segs, &n);
  int too_big = 0;
  for (size_t i = 0; i < n; i++) {
    char p[4096];
    struct stat sb;
    seg_path(p, sizeof p, dir, segs[i].name, 0);
    if (stat(p, &sb) < 0 || sb.st_size > 64 * 1024) too_big++;
  }
  free(segs);
  CHECK(too_big == 0);
  readback b;
  CHECK(read_all(dir, NULL, &b) == (size_t)N);
  CHECK(b.bad == 0);
  int in_order = 1;
  for (size_t i = 0; i < b.n; i++)
    if (b.nums[i] != (long long)i) in_order = 0;
  CHECK(in_order);
  readback_free(&b);
  rm_rf(dir);
  free(dir);
}

static void test_rotation_by_day(void) {
  char *dir = scratch_dir("day");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_INTERVAL;
  o.interval_ms = 5;
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  /* 2024-03-09 23:59:50 UTC, then on past midnight twice */
  const uint64_t base = 1710028790000ull;
  int n = 0;
  /* three runs of 20 s, each crossing a midnight: 09|10, 10|11, 11|12 */
  for (int d = 0; d < 3; d++)
    for (int i = 0; i < 100; i++, n++) {
      trec_make(&t, &g, base + (uint64_t)d * 86400000ull + (uint64_t)i * 200, (uint64_t)n, 100);
      snapshot_log_append(log, &t.r, NULL);
    }
  /* a late record from the first day goes into the current segment: no
   * rotating back */
  snapshot_idgen g2;
  snapshot_idgen_init(&g2);
  trec_make(&t, &g2, base + 1000, (uint64_t)n++, 100);
  snapshot_log_append(log, &t.r, NULL);
  snapshot_log_close(log, NULL);
  seg_entry *segs;
  size_t ns;
  seg_list(dir, &segs, &ns);
  CHECK_MSG(ns == 4, "%zu segments", ns);
  if (ns == 4) {
    CHECK(segs[0].day == 20240309);
    CHECK(segs[1].day == 20240310);
    CHECK(segs[2].day == 20240311);
    CHECK(segs[3].day == 20240312);
  }
  free(segs);
  readback b;
  CHECK(read_all(dir, NULL, &b) == 301);
  CHECK(b.bad == 0);
  readback_free(&b);
  rm_rf(dir);
  free(dir);
}

typedef struct dur_job {
  snapshot_log *log;
  snapshot_idgen *g;
  int base, n;
  int fails;
  uint64_t max_ticket;
} dur_job;

static void *dur_worker(void *arg) {
  dur_job *j = arg;
  trec t;
  for (int i = 0; i < j->n; i++) {
    trec_make(&t, j->g, 0, (uint64_t)(j->base + i), 200);
    uint64_t ticket;
    if (snapshot_log_append(j->log, &t.r, &ticket) < 0 ||
        snapshot_log_wait_durable(j->log, ticket) < 0) {
      j->fails++;
      continue;
    }
    snapshot_log_status st;
    snapshot_log_status_get(j->log, &st);
    if (st.durable_ticket < ticket) j->fails++;
    if (ticket > j->max_ticket) j->max_ticket = ticket;
  }
  return NULL;
}

static void test_durability_always(void) {
  char *dir = scratch_dir("always");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_ALWAYS;
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  enum { T = 4, PER = 150 };
  pthread_t th[T];
  dur_job jobs[T];
  for (int i = 0; i < T; i++) {
    jobs[i] = (dur_job){log, &g, i * PER, PER, 0, 0};
    pthread_create(&th[i], NULL, dur_worker, &jobs[i]);
  }
  for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
  int fails = 0;
  for (int i = 0; i < T; i++) fails += jobs[i].fails;
  CHECK(fails == 0);
  snapshot_log_status st;
  snapshot_log_status_get(log, &st);
  CHECK(st.written == T * PER);
  /* one fsync per batch: never more syncs than records, at least one */
  CHECK(st.fsyncs >= 1 && st.fsyncs <= (uint64_t)T * PER);
  printf("always: %d records, %llu fsyncs (group commit)\n", T * PER,
         (unsigned long long)st.fsyncs);
  snapshot_log_close(log, NULL);
  readback b;
  CHECK(read_all(dir, NULL, &b) == T * PER);
  CHECK(b.bad == 0);
  readback_free(&b);
  rm_rf(dir);
  free(dir);
}

static void test_durability_interval(void) {
  char *dir = scratch_dir("interval");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_INTERVAL;
  o.interval_ms = 30;
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  uint64_t ticket = 0;
  for (int i = 0; i < 2000; i++) {
    trec_make(&t, &g, 0, (uint64_t)i, 200);
    snapshot_log_append(log, &t.r, &ticket);
  }
  int64_t t0 = wall_ns();
  CHECK(snapshot_log_wait_durable(log, ticket) == 0);
  int64_t waited_ms = (wall_ns() - t0) / 1000000;
  CHECK_MSG(waited_ms < 2000, "waited %lld ms for an interval of 30", (long long)waited_ms);
  snapshot_log_status st;
  snapshot_log_status_get(log, &st);
  CHECK(st.fsyncs >= 1);
  CHECK(st.durable_ticket >= ticket);
  uint64_t syncs = st.fsyncs;
  /* idle: no more syncs without new records */
  struct timespec ts = {0, 100 * 1000000L};
  nanosleep(&ts, NULL);
  snapshot_log_status_get(log, &st);
  CHECK(st.fsyncs == syncs);
  /* new records get synced within a few intervals without anyone waiting */
  trec_make(&t, &g, 0, 2000, 10);
  snapshot_log_append(log, &t.r, &ticket);
  for (int i = 0; i < 100 && st.durable_ticket < ticket; i++) {
    nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
    snapshot_log_status_get(log, &st);
  }
  CHECK(st.durable_ticket >= ticket);
  CHECK(st.fsyncs == syncs + 1);
  snapshot_log_close(log, NULL);
  readback b;
  CHECK(read_all(dir, NULL, &b) == 2001);
  CHECK(b.bad == 0);
  readback_free(&b);
  rm_rf(dir);
  free(dir);
}

static void test_reopen_appends(void) {
  char *dir = scratch_dir("reopen");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  int n = 0;
  for (int round = 0; round < 5; round++) {
    snapshot_log *log = log_open_or_die(dir, &o);
    for (int i = 0; i < 300; i++, n++) {
      trec_make(&t, &g, 0, (uint64_t)n, 200);
      CHECK(snapshot_log_append(log, &t.r, NULL) == 0);
    }
    snapshot_log_status st;
    CHECK(snapshot_log_close(log, &st) == 0);
    CHECK(st.cut_bytes == 0 && st.damaged_regions == 0);
  }
  /* short sessions share the segment instead of leaving one each */
  CHECK(count_files(dir, ".log") == 1);
  CHECK(count_files(dir, ".idx") == 1);
  readback b;
  CHECK(read_all(dir, NULL, &b) == 1500);
  CHECK(b.bad == 0);
  int in_order = 1;
  for (size_t i = 0; i < b.n; i++)
    if (b.nums[i] != (long long)i) in_order = 0;
  CHECK(in_order);
  readback_free(&b);
  rm_rf(dir);
  free(dir);
}

static void test_one_writer(void) {
  char *dir = scratch_dir("busy");
  snapshot_log *a = log_open_or_die(dir, NULL), *b = NULL;
  char err[SNAPSHOT_ERRLEN] = "";
  CHECK(snapshot_log_open(dir, NULL, &b, err, sizeof err) == SNAPSHOT_EBUSY);
  CHECK(b == NULL);
  CHECK_MSG(strstr(err, "another writer") != NULL, "%s", err);
  char pid[32];
  snprintf(pid, sizeof pid, "pid %ld", (long)getpid());
  CHECK_MSG(strstr(err, pid) != NULL, "%s", err);
  snapshot_log_close(a, NULL);
  CHECK(snapshot_log_open(dir, NULL, &b, err, sizeof err) == 0);
  snapshot_log_close(b, NULL);
  /* a file where the directory should be */
  char file[600];
  snprintf(file, sizeof file, "%s/plain", dir);
  FILE *f = fopen(file, "w");
  fclose(f);
  CHECK(snapshot_log_open(file, NULL, &b, err, sizeof err) == SNAPSHOT_EIO);
  CHECK(strstr(err, "plain") != NULL);
  rm_rf(dir);
  free(dir);
}

static void test_bad_records(void) {
  char *dir = scratch_dir("bad");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.queue_bytes = 64 * 1024;
  snapshot_log *log = log_open_or_die(dir, &o);
  size_t max = snapshot_log_max_record(log);
  CHECK(max >= 8 * 1024 && max <= 16 * 1024);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  trec_make(&t, &g, 0, 1, 10);
  char *big = malloc(70000);
  memset(big, 'p', 70000);
  snapshot_rec r = t.r;
  r.point = big;
  r.point_len = 65536;
  CHECK(snapshot_log_append(log, &r, NULL) == SNAPSHOT_EINVAL);
  r = t.r;
  r.payload = big;
  r.payload_len = max; /* + the header fields: over */
  CHECK(snapshot_log_append(log, &r, NULL) == SNAPSHOT_ETOOBIG);
  r.payload_len = max - BODY_FIXED - t.r.point_len - t.r.action_len - t.r.policy_version_len;
  CHECK(snapshot_log_append(log, &r, NULL) == 0); /* exactly the limit fits */
  r = t.r;
  r.source = 9;
  CHECK(snapshot_log_append(log, &r, NULL) == SNAPSHOT_EINVAL);
  /* empty strings and an empty payload are fine */
  r = t.r;
  r.action_len = 0;
  r.policy_version_len = 0;
  r.payload_len = 0;
  r.time_ns = 0; /* the id's time is used */
  CHECK(snapshot_log_append(log, &r, NULL) == 0);
  snapshot_log_status st;
  snapshot_log_close(log, &st);
  CHECK(st.rejected == 3);
  CHECK(st.appended == 2);
  snapshot_reader *rd;
  CHECK(snapshot_reader_open(dir, NULL, &rd, NULL, 0) == 0);
  snapshot_rec got;
  CHECK(snapshot_reader_next(rd, &got) == 1);
  CHECK(got.payload_len ==
        max - BODY_FIXED - t.r.point_len - t.r.action_len - t.r.policy_version_len);
  CHECK(snapshot_reader_next(rd, &got) == 1);
  CHECK(got.payload_len == 0 && got.action_len == 0 && got.policy_version_len == 0);
  CHECK(got.time_ns == (int64_t)snapshot_id_time_ms(got.id) * 1000000);
  CHECK(snapshot_reader_next(rd, &got) == 0);
  snapshot_reader_close(rd);
  free(big);
  rm_rf(dir);
  free(dir);
}

static void test_filters(void) {
  char *dir = scratch_dir("filter");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  o.segment_bytes = 32 * 1024;
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  const int N = 3000;
  const uint64_t base = 1700000000000ull; /* one record a second */
  for (int i = 0; i < N; i++) {
    trec_make(&t, &g, base + (uint64_t)i * 1000, (uint64_t)i, 100);
    snapshot_log_append(log, &t.r, NULL);
  }
  snapshot_log_close(log, NULL);

  snapshot_filter f;
  readback b;
  /* each filter alone, against counting by the rule trec_make follows */
  snapshot_filter_init(&f);
  f.point = "payment";
  read_all(dir, &f, &b);
  CHECK(b.n == (size_t)(N / 3) && b.bad == 0);
  int ok = 1;
  for (size_t i = 0; i < b.n; i++) ok &= b.nums[i] % 3 == 1;
  CHECK(ok);
  readback_free(&b);

  snapshot_filter_init(&f);
  f.action = "deny";
  f.source = SNAPSHOT_SRC_MODEL; /* n % 4 == 1 for both */
  read_all(dir, &f, &b);
  CHECK(b.n == (size_t)(N / 4));
  readback_free(&b);

  snapshot_filter_init(&f);
  f.source = SNAPSHOT_SRC_ERROR;
  f.action = "allow"; /* n%4==3 and n%4==0 never both */
  read_all(dir, &f, &b);
  CHECK(b.n == 0);
  readback_free(&b);

  snapshot_filter_init(&f);
  f.policy_version = "aaaa"; /* prefix of odd records' version */
  read_all(dir, &f, &b);
  CHECK(b.n == (size_t)(N / 2));
  ok = 1;
  for (size_t i = 0; i < b.n; i++) ok &= b.nums[i] % 2 == 1;
  CHECK(ok);
  readback_free(&b);

  snapshot_filter_init(&f);
  f.policy_version = "aaaa1111bbbb2222x"; /* longer than the version: no match */
  read_all(dir, &f, &b);
  CHECK(b.n == 0);
  readback_free(&b);

  /* time range [since, until) — through the sparse index */
  snapshot_filter_init(&f);
  f.since_ns = (int64_t)(base + 1000 * 1000) * 1000000; /* record 1000 on */
  f.until_ns = (int64_t)(base + 2500 * 1000) * 1000000; /* before record 2500 */
  read_all(dir, &f, &b);
  CHECK_MSG(b.n == 1500, "%zu in range", b.n);
  CHECK(b.n && b.nums[0] == 1000 && b.nums[b.n - 1] == 2499);
  readback_free(&b);
  snapshot_filter_init(&f);
  f.since_ns = (int64_t)(base + 2990 * 1000) * 1000000;
  f.point = "login";
  read_all(dir, &f, &b);
  size_t want = 0;
  for (int i = 2990; i < N; i++) want += i % 3 == 0;
  CHECK(b.n == want && want == 3);
  readback_free(&b);
  rm_rf(dir);
  free(dir);
}

int main(void) {
  TEST_RUN(test_round_trip);
  TEST_RUN(test_rotation_by_size);
  TEST_RUN(test_rotation_by_day);
  TEST_RUN(test_durability_always);
  TEST_RUN(test_durability_interval);
  TEST_RUN(test_reopen_appends);
  TEST_RUN(test_one_writer);
  TEST_RUN(test_bad_records);
  TEST_RUN(test_filters);
  TEST_END();
}
