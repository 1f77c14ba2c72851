/* test_lookup.c — finding a snapshot by id: across many segments, through
 * the .idx sidecars and without them (rebuilt and saved), with a stale
 * sidecar, in the active segment of a running writer, for a record appended
 * late across a rotation, and never a false hit. Also checks that the lookup
 * reads about one block, not the directory. */
#include "helpers.h"

#include <fcntl.h>

enum { N = 6000 };

static char *make_log(uint8_t (*ids)[16]) {
  char *dir = scratch_dir("lookup");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  o.segment_bytes = 200 * 1024;
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  for (int i = 0; i < N; i++) {
    trec_make(&t, &g, 0, (uint64_t)i, 200);
    memcpy(ids[i], t.r.id, 16);
    snapshot_log_append(log, &t.r, NULL);
  }
  snapshot_log_close(log, NULL);
  return dir;
}

/* Looks up every 7th id and a few absent ones; returns the failures. */
static int find_all(const char *dir, uint8_t (*ids)[16]) {
  snapshot_reader *r;
  if (snapshot_reader_open(dir, NULL, &r, NULL, 0) < 0) return 1;
  int bad = 0;
  snapshot_rec rec;
  for (int i = 0; i < N; i += 7) {
    if (snapshot_reader_find(r, ids[i], &rec) != 1 || memcmp(rec.id, ids[i], 16) != 0 ||
        trec_check(&rec) != i)
      bad++;
  }
  /* the last and the first */
  if (snapshot_reader_find(r, ids[N - 1], &rec) != 1 || trec_check(&rec) != N - 1) bad++;
  if (snapshot_reader_find(r, ids[0], &rec) != 1 || trec_check(&rec) != 0) bad++;
  /* absent: same time as a real one but other random bits; before all; after all */
  uint8_t x[16];
  memcpy(x, ids[N / 2], 16);
  x[15] ^= 1;
  if (snapshot_reader_find(r, x, &rec) != 0) bad++;
  memset(x, 0, 16);
  if (snapshot_reader_find(r, x, &rec) != 0) bad++;
  memset(x, 0xff, 16);
  if (snapshot_reader_find(r, x, &rec) != 0) bad++;
  snapshot_reader_close(r);
  return bad;
}

static void test_find_sealed(void) {
  uint8_t(*ids)[16] = malloc(N * 16);
  char *dir = make_log(ids);
  size_t nseg = count_files(dir, ".log");
  CHECK_MSG(nseg >= 5, "%zu segments", nseg);
  CHECK(count_files(dir, ".idx") == nseg);
  CHECK(find_all(dir, ids) == 0);

  /* without the sidecars: rebuilt by scanning, and saved for next time */
  seg_entry *segs;
  size_t n;
  seg_list(dir, &segs, &n);
  for (size_t i = 0; i < n; i++) {
    char p[4096];
    seg_path(p, sizeof p, dir, segs[i].name, 1);
    unlink(p);
  }
  CHECK(count_files(dir, ".idx") == 0);
  CHECK(find_all(dir, ids) == 0);
  CHECK(count_files(dir, ".idx") > 0);

  /* a stale sidecar (another segment's) is not believed */
  if (n >= 2) {
    char a[4096], b[4096];
    seg_path(a, sizeof a, dir, segs[0].name, 1);
    seg_path(b, sizeof b, dir, segs[1].name, 1);
    seg_index x;
    seg_index_init(&x);
    /* build segment 1's index and store it under segment 0's name */
    uint64_t size;
    int fd = seg_open_indexed(dir, segs[1].name, 0, NULL, &x, &size, NULL, 0);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    CHECK(seg_index_write(a, &x) == 0);
    seg_index_free(&x);
    CHECK(find_all(dir, ids) == 0);
    /* a damaged sidecar neither */
    int ifd = open(b, O_WRONLY);
    if (ifd >= 0) {
      write_full(ifd, "garbage!", 8, 100);
      close(ifd);
    }
    CHECK(find_all(dir, ids) == 0);
  }
  free(segs);
  rm_rf(dir);
  free(dir);
  free(ids);
}

static void test_find_reads_little(void) {
  /* With sidecars in place a lookup reads one block: make every segment but
   * the target's unreadable garbage past its header and the lookup must not
   * notice. */
  uint8_t(*ids)[16] = malloc(N * 16);
  char *dir = make_log(ids);
  seg_entry *segs;
  size_t n;
  seg_list(dir, &segs, &n);
  /* the target: record 4000; find its segment by id order */
  size_t target = 0;
  for (size_t i = 0; i < n; i++)
    if (memcmp(segs[i].first_id, ids[4000], 16) <= 0) target = i;
  for (size_t i = 0; i < n; i++) {
    if (i == target) continue;
    char p[4096];
    seg_path(p, sizeof p, dir, segs[i].name, 0);
    int fd = open(p, O_RDWR);
    struct stat st;
    fstat(fd, &st);
    uint8_t *junk = malloc((size_t)st.st_size);
    memset(junk, 0xAB, (size_t)st.st_size);
    write_full(fd, junk + 100, (size_t)st.st_size - 100, 100); /* past the header */
    free(junk);
    close(fd);
    /* keep the sidecar valid for the damaged file: same size, same header */
  }
  snapshot_reader *r;
  CHECK(snapshot_reader_open(dir, NULL, &r, NULL, 0) == 0);
  snapshot_rec rec;
  CHECK(snapshot_reader_find(r, ids[4000], &rec) == 1);
  CHECK(trec_check(&rec) == 4000);
  CHECK(snapshot_reader_find(r, ids[4001], &rec) == 1);
  snapshot_reader_close(r);
  free(segs);
  rm_rf(dir);
  free(dir);
  free(ids);
}

static void test_find_active(void) {
  char *dir = scratch_dir("active");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  uint8_t ids[3000][16];
  uint64_t ticket = 0;
  for (int i = 0; i < 3000; i++) {
    trec_make(&t, &g, 0, (uint64_t)i, 100);
    memcpy(ids[i], t.r.id, 16);
    snapshot_log_append(log, &t.r, &ticket);
  }
  snapshot_log_wait_durable(log, ticket); /* NONE: written */
  snapshot_reader *r;
  CHECK(snapshot_reader_open(dir, NULL, &r, NULL, 0) == 0);
  snapshot_rec rec;
  int bad = 0;
  for (int i = 0; i < 3000; i += 37)
    if (snapshot_reader_find(r, ids[i], &rec) != 1 || trec_check(&rec) != i) bad++;
  CHECK(bad == 0);
  CHECK(count_files(dir, ".idx") == 0); /* no sidecar for a segment still being written */
  /* iteration sees them all, and then records appended meanwhile */
  readback b;
  CHECK(read_all(dir, NULL, &b) == 3000);
  readback_free(&b);
  snapshot_reader_close(r);
  snapshot_log_close(log, NULL);
  rm_rf(dir);
  free(dir);
}

static void test_find_late_record(void) {
  /* Ids a < late < b, but late is appended after b started a new segment
   * (a new day): the lookup must look past the segment its id points to. */
  char *dir = scratch_dir("late");
  snapshot_log *log = log_open_or_die(dir, NULL);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec a, late, b;
  const uint64_t day = 1718409600000ull; /* 2024-06-15T00:00:00Z */
  trec_make(&a, &g, day - 5000, 1, 50);
  trec_make(&late, &g, day - 10, 2, 50);
  trec_make(&b, &g, day + 10, 3, 50);
  snapshot_log_append(log, &a.r, NULL);
  snapshot_log_append(log, &b.r, NULL);
  snapshot_log_append(log, &late.r, NULL);
  snapshot_log_close(log, NULL);
  CHECK(count_files(dir, ".log") == 2);
  snapshot_reader *r;
  CHECK(snapshot_reader_open(dir, NULL, &r, NULL, 0) == 0);
  snapshot_rec rec;
  CHECK(snapshot_reader_find(r, late.r.id, &rec) == 1);
  CHECK(trec_check(&rec) == 2);
  CHECK(snapshot_reader_find(r, a.r.id, &rec) == 1 && trec_check(&rec) == 1);
  CHECK(snapshot_reader_find(r, b.r.id, &rec) == 1 && trec_check(&rec) == 3);
  /* find does not disturb iteration */
  CHECK(snapshot_reader_next(r, &rec) == 1 && trec_check(&rec) == 1);
  CHECK(snapshot_reader_find(r, late.r.id, &rec) == 1);
  CHECK(snapshot_reader_next(r, &rec) == 1 && trec_check(&rec) == 3);
  CHECK(snapshot_reader_next(r, &rec) == 1 && trec_check(&rec) == 2);
  CHECK(snapshot_reader_next(r, &rec) == 0);
  snapshot_reader_close(r);
  rm_rf(dir);
  free(dir);
}

int main(void) {
  TEST_RUN(test_find_sealed);
  TEST_RUN(test_find_reads_little);
  TEST_RUN(test_find_active);
  TEST_RUN(test_find_late_record);
  TEST_END();
}
