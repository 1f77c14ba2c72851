/* test_recovery.c — what a crash or a bad disk leaves behind is found and
 * handled on open: a tail torn at every byte offset of the last record, and
 * every byte of it flipped, is cut back to the record before, reported, and
 * every earlier record is intact; zeros after the end (a file system that
 * extended the file) are cut; damage in the middle is reported and skipped
 * without cutting the good records after it; a segment whose header never
 * got written is removed; and a log cut on open keeps working. */
#include "helpers.h"

#include <fcntl.h>

enum { NREC = 20 };

typedef struct fixture {
  char *dir;
  char seg[4096];
  uint8_t *bytes; /* the pristine segment */
  size_t size;
  uint64_t offs[NREC]; /* frame offsets */
} fixture;

static void fixture_make(fixture *fx) {
  fx->dir = scratch_dir("recover");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  snapshot_log *log = log_open_or_die(fx->dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  for (int i = 0; i < NREC; i++) {
    trec_make(&t, &g, 0, (uint64_t)i, 120);
    snapshot_log_append(log, &t.r, NULL);
  }
  snapshot_log_close(log, NULL);
  seg_entry *segs;
  size_t n;
  seg_list(fx->dir, &segs, &n);
  if (n != 1) {
    fprintf(stderr, "fixture: %zu segments\n", n);
    exit(2);
  }
  seg_path(fx->seg, sizeof fx->seg, fx->dir, segs[0].name, 0);
  free(segs);
  int fd = open(fx->seg, O_RDONLY);
  struct stat st;
  fstat(fd, &st);
  fx->size = (size_t)st.st_size;
  fx->bytes = malloc(fx->size);
  read_full(fd, fx->bytes, fx->size, 0);
  seg_header h;
  seg_header_decode(fx->bytes, fx->size, &h);
  frame_scan s;
  frame_scan_init(&s, fd, h.header_len, fx->size);
  const uint8_t *body;
  uint32_t len;
  int i = 0;
  while (frame_scan_next(&s, &body, &len) == 1 && i < NREC) fx->offs[i++] = s.frame_off;
  frame_scan_free(&s);
  close(fd);
}

/* Puts the segment back as given (and drops the index, as after a crash). */
static void put_segment(const fixture *fx, const uint8_t *bytes, size_t len) {
  int fd = open(fx->seg, O_WRONLY | O_TRUNC | O_CREAT, 0644);
  write_full(fd, bytes, len, 0);
  close(fd);
  char ipath[4200];
  snprintf(ipath, sizeof ipath, "%.*s.idx", (int)(strlen(fx->seg) - 4), fx->seg);
  unlink(ipath);
}

static off_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Opens (recovering), closes, and reads back. Returns the status. */
static snapshot_log_status reopen(const fixture *fx, readback *b) {
  snapshot_log *log = log_open_or_die(fx->dir, NULL);
  snapshot_log_status st;
  snapshot_log_status_get(log, &st);
  snapshot_log_close(log, NULL);
  read_all(fx->dir, NULL, b);
  return st;
}

static int first_n_intact(const readback *b, size_t n) {
  if (b->n != n || b->bad) return 0;
  for (size_t i = 0; i < n; i++)
    if (b->nums[i] != (long long)i) return 0;
  return 1;
}

static void test_torn_at_every_offset(const fixture *fx) {
  uint64_t a = fx->offs[NREC - 1];
  int bad_cut = 0, bad_data = 0, bad_size = 0;
  for (uint64_t c = a; c < fx->size; c++) {
    put_segment(fx, fx->bytes, (size_t)c);
    readback b;
    snapshot_log_status st = reopen(fx, &b);
    if (st.cut_bytes != c - a || st.cut_records != (c > a ? 1u : 0u)) {
      if (bad_cut++ < 3)
        fprintf(stderr, "torn at %llu: cut %llu bytes %llu records\n", (unsigned long long)c,
                (unsigned long long)st.cut_bytes, (unsigned long long)st.cut_records);
    }
    if (!first_n_intact(&b, NREC - 1)) bad_data++;
    if (file_size(fx->seg) != (off_t)a) bad_size++;
    readback_free(&b);
  }
  CHECK_MSG(bad_cut == 0, "%d offsets reported a wrong cut", bad_cut);
  CHECK_MSG(bad_data == 0, "%d offsets lost or damaged earlier records", bad_data);
  CHECK_MSG(bad_size == 0, "%d offsets left the file at the wrong size", bad_size);
  /* the complete file: nothing cut */
  put_segment(fx, fx->bytes, fx->size);
  readback b;
  snapshot_log_status st = reopen(fx, &b);
  CHECK(st.cut_bytes == 0 && st.cut_records == 0 && st.damaged_regions == 0);
  CHECK(first_n_intact(&b, NREC));
  readback_free(&b);
}

static void test_flipped_bytes(const fixture *fx) {
  uint64_t a = fx->offs[NREC - 1];
  uint8_t *copy = malloc(fx->size);
  int bad_cut = 0, bad_data = 0;
  static const uint8_t masks[] = {0x01, 0xff};
  for (uint64_t p = a; p < fx->size; p++)
    for (size_t m = 0; m < sizeof masks; m++) {
      memcpy(copy, fx->bytes, fx->size);
      copy[p] ^= masks[m];
      put_segment(fx, copy, fx->size);
      readback b;
      snapshot_log_status st = reopen(fx, &b);
      if (st.cut_bytes != fx->size - a || st.cut_records < 1) {
        if (bad_cut++ < 3)
          fprintf(stderr, "flip at %llu: cut %llu\n", (unsigned long long)p,
                  (unsigned long long)st.cut_bytes);
      }
      if (!first_n_intact(&b, NREC - 1)) bad_data++;
      readback_free(&b);
    }
  CHECK_MSG(bad_cut == 0, "%d flips not cut exactly", bad_cut);
  CHECK_MSG(bad_data == 0, "%d flips cost earlier records", bad_data);
  free(copy);
}

static void test_zero_fill(const fixture *fx) {
  /* after a power cut some file systems show the file longer, zero-filled */
  uint8_t *copy = calloc(1, fx->size + 8192);
  memcpy(copy, fx->bytes, fx->size);
  put_segment(fx, copy, fx->size + 8192);
  readback b;
  snapshot_log_status st = reopen(fx, &b);
  CHECK(st.cut_bytes == 8192);
  CHECK(st.cut_records == 1);
  CHECK(first_n_intact(&b, NREC));
  CHECK(file_size(fx->seg) == (off_t)fx->size);
  readback_free(&b);
  free(copy);
}

static void test_middle_damage(const fixture *fx) {
  uint8_t *copy = malloc(fx->size);
  memcpy(copy, fx->bytes, fx->size);
  uint64_t mid = fx->offs[5] + 40; /* inside record 5's body */
  copy[mid] ^= 0x5a;
  put_segment(fx, copy, fx->size);
  snapshot_log *log = log_open_or_die(fx->dir, NULL);
  snapshot_log_status st;
  snapshot_log_status_get(log, &st);
  snapshot_log_close(log, NULL);
  CHECK(st.damaged_regions == 1);
  CHECK(st.cut_bytes == 0); /* the good records after it are not cut */
  CHECK(file_size(fx->seg) == (off_t)fx->size);
  readback b;
  snapshot_reader *r;
  CHECK(snapshot_reader_open(fx->dir, NULL, &r, NULL, 0) == 0);
  read_all(fx->dir, NULL, &b);
  CHECK(b.n == NREC - 1 && b.bad == 0);
  int ok = 1;
  for (size_t i = 0, k = 0; i < b.n; i++, k++) {
    if (k == 5) k++;
    if (b.nums[i] != (long long)k) ok = 0;
  }
  CHECK(ok);
  /* the reader says it skipped something */
  snapshot_rec rec;
  while (snapshot_reader_next(r, &rec) == 1) {
  }
  CHECK(snapshot_reader_skipped_bytes(r) == fx->offs[6] - fx->offs[5]);
  snapshot_reader_close(r);
  readback_free(&b);
  free(copy);
}

static void test_header_husk(const fixture *fx) {
  put_segment(fx, fx->bytes, fx->size);
  /* a second segment with a torn header, named after a later id */
  char husk[4200];
  snprintf(husk, sizeof husk, "%s/seg-29991231-ffffffffffffffffffffffffffffffff.log", fx->dir);
  int fd = open(husk, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  write_full(fd, fx->bytes, 10, 0);
  close(fd);
  /* and a non-segment under a segment's name */
  char junk[4200];
  snprintf(junk, sizeof junk, "%s/seg-29991231-fffffffffffffffffffffffffffffffe.log", fx->dir);
  fd = open(junk, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  write_full(fd, "this is not a segment at all, just text", 39, 0);
  close(fd);
  readback b;
  snapshot_log_status st = reopen(fx, &b);
  CHECK(st.cut_bytes == 10);
  CHECK(access(husk, F_OK) != 0); /* removed */
  CHECK(access(junk, F_OK) != 0); /* moved aside */
  char aside[4300];
  snprintf(aside, sizeof aside, "%s.corrupt", junk);
  CHECK(access(aside, F_OK) == 0);
  CHECK(st.damaged_regions == 1);
  CHECK(first_n_intact(&b, NREC));
  readback_free(&b);
  unlink(aside);
}

static void test_other_version(const fixture *fx) {
  /* A segment from a later format version is not damage: the writer refuses
   * the directory (naming the file and the version) and leaves it alone. */
  uint8_t *copy = malloc(fx->size);
  memcpy(copy, fx->bytes, fx->size);
  copy[6] = SEG_VERSION + 1; /* a version this build does not know */
  put_segment(fx, copy, fx->size);
  snapshot_log *log = NULL;
  char err[SNAPSHOT_ERRLEN] = "";
  CHECK(snapshot_log_open(fx->dir, NULL, &log, err, sizeof err) == SNAPSHOT_ECORRUPT);
  CHECK_MSG(strstr(err, "format version 3") != NULL, "%s", err);
  CHECK(file_size(fx->seg) == (off_t)fx->size); /* untouched, not renamed */
  snapshot_reader *r;
  CHECK(snapshot_reader_open(fx->dir, NULL, &r, NULL, 0) == 0);
  snapshot_rec rec;
  CHECK(snapshot_reader_next(r, &rec) < 0);
  CHECK(strstr(snapshot_reader_error(r), "format version 3") != NULL);
  snapshot_reader_close(r);
  free(copy);
  put_segment(fx, fx->bytes, fx->size);
}

static void test_append_after_cut(const fixture *fx) {
  uint64_t a = fx->offs[NREC - 1];
  put_segment(fx, fx->bytes, (size_t)a + 7);
  snapshot_log *log = log_open_or_die(fx->dir, NULL);
  snapshot_log_status st;
  snapshot_log_status_get(log, &st);
  CHECK(st.cut_bytes == 7);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  for (int i = NREC - 1; i < NREC + 30; i++) {
    trec_make(&t, &g, 0, (uint64_t)i, 120);
    CHECK(snapshot_log_append(log, &t.r, NULL) == 0);
  }
  snapshot_log_close(log, NULL);
  readback b;
  read_all(fx->dir, NULL, &b);
  CHECK(first_n_intact(&b, NREC + 30));
  readback_free(&b);
  CHECK(count_files(fx->dir, ".log") == 1); /* appended to the cut segment */
}

int main(void) {
  fixture fx;
  fixture_make(&fx);
  test_torn_at_every_offset(&fx);
  test_flipped_bytes(&fx);
  test_zero_fill(&fx);
  test_middle_damage(&fx);
  test_header_husk(&fx);
  test_other_version(&fx);
  test_append_after_cut(&fx);
  rm_rf(fx.dir);
  free(fx.dir);
  free(fx.bytes);
  TEST_END();
}
