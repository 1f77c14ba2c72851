/* test_resume.c — a reader resumed where another stopped (the shipper's
 * cursor: snapshot_reader_open_at, snapshot_reader_position): across many
 * segments, every record comes exactly once and in order whatever the
 * stopping point; positions name the segment and count from 1; a cursor
 * at the end reads nothing, one naming a segment that is gone starts at the
 * next one, and a name that is no segment's is refused. */
#include "helpers.h"

#include <dirent.h>

enum { N = 3000 };

static char *make_log(void) {
  char *dir = scratch_dir("resume");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  o.segment_bytes = 64 * 1024;
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  for (int i = 0; i < N; i++) {
    trec_make(&t, &g, 0, (uint64_t)i, 100);
    snapshot_log_append(log, &t.r, NULL);
  }
  snapshot_log_close(log, NULL);
  return dir;
}

/* Reads k records, then resumes from the position and reads the rest:
 * every record once, in order. */
static int resume_at(const char *dir, int k) {
  snapshot_reader *r;
  if (snapshot_reader_open_at(dir, NULL, 0, &r, NULL, 0) < 0) return 1;
  snapshot_rec rec;
  char seg[128] = "";
  uint64_t pos = 0;
  int next = 0;
  for (; next < k && snapshot_reader_next(r, &rec) == 1; next++) {
    if (trec_check(&rec) != next) return 1;
    const char *s;
    snapshot_reader_position(r, &s, &pos);
    snprintf(seg, sizeof seg, "%s", s);
  }
  snapshot_reader_close(r);
  if (k && (pos < 1 || strncmp(seg, "seg-", 4) != 0)) return 1;
  if (snapshot_reader_open_at(dir, seg, pos, &r, NULL, 0) < 0) return 1;
  while (snapshot_reader_next(r, &rec) == 1)
    if (trec_check(&rec) != next++) return 1;
  snapshot_reader_close(r);
  return next != N;
}

static void test_resume_anywhere(void) {
  char *dir = make_log();
  CHECK(count_files(dir, ".log") >= 5);
  int ks[] = {0, 1, 2, 100, 777, 1500, N - 1, N};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    CHECK_MSG(resume_at(dir, ks[i]) == 0, "k=%d", ks[i]);
  rm_rf(dir);
  free(dir);
}

static void test_gone_and_bad(void) {
  char *dir = make_log();
  snapshot_reader *r;
  snapshot_rec rec;
  /* the first segment's name, then that file removed: reading starts at the next */
  CHECK(snapshot_reader_open(dir, NULL, &r, NULL, 0) == 0);
  CHECK(snapshot_reader_next(r, &rec) == 1);
  const char *s;
  uint64_t pos;
  snapshot_reader_position(r, &s, &pos);
  CHECK(pos == 1);
  char first[128], path[4200];
  snprintf(first, sizeof first, "%s", s);
  snapshot_reader_close(r);
  int in_first = 0;
  CHECK(snapshot_reader_open_at(dir, NULL, 0, &r, NULL, 0) == 0);
  while (snapshot_reader_next(r, &rec) == 1) {
    snapshot_reader_position(r, &s, &pos);
    if (strcmp(s, first) != 0) break;
    in_first++;
  }
  snapshot_reader_close(r);
  snprintf(path, sizeof path, "%s/%s", dir, first);
  CHECK(unlink(path) == 0);
  CHECK(snapshot_reader_open_at(dir, first, 5, &r, NULL, 0) == 0);
  CHECK(snapshot_reader_next(r, &rec) == 1 && trec_check(&rec) == in_first);
  snapshot_reader_close(r);
  char err[SNAPSHOT_ERRLEN] = "";
  CHECK(snapshot_reader_open_at(dir, "not-a-segment", 0, &r, err, sizeof err) == SNAPSHOT_EINVAL);
  CHECK(strstr(err, "not-a-segment") != NULL);
  rm_rf(dir);
  free(dir);
}

int main(void) {
  TEST_RUN(test_resume_anywhere);
  TEST_RUN(test_gone_and_bad);
  TEST_END();
}
