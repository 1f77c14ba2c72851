/* test_reopen_index.c — a writer reopening the newest segment for appending
 * (what every short-lived writer, such as an agent's hook, does) keeps that
 * segment's .idx when it is consistent, instead of removing it: the open
 * then neither scans the segment nor touches the index. What must still
 * hold: readers and lookups find every record, old and new, while the index
 * is stale; a crash (the writing process killed before it seals) leaves a
 * stale index that the next open detects and rebuilds; and a close seals an
 * index covering everything. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "helpers.h"

enum { FIRST = 2500, MORE = 1500, CRASHED = 700 };

static uint8_t ids[FIRST + MORE + CRASHED][16];

static void append_n(snapshot_log *log, snapshot_idgen *g, int from, int n) {
  trec t;
  uint64_t ticket = 0;
  for (int i = from; i < from + n; i++) {
    trec_make(&t, g, 0, (uint64_t)i, 200);
    memcpy(ids[i], t.r.id, 16);
    CHECK(snapshot_log_append(log, &t.r, &ticket) == 0);
  }
  CHECK(snapshot_log_wait_durable(log, ticket) == 0);
}

/* Every id in [0, n) found by lookup, and iteration returns exactly total. */
static void check_all(const char *dir, int n, int total) {
  snapshot_reader *r;
  CHECK(snapshot_reader_open(dir, NULL, &r, NULL, 0) == 0);
  snapshot_rec rec;
  int bad = 0;
  for (int i = 0; i < n; i += 13)
    if (snapshot_reader_find(r, ids[i], &rec) != 1 || trec_check(&rec) != i) bad++;
  if (snapshot_reader_find(r, ids[n - 1], &rec) != 1 || trec_check(&rec) != n - 1) bad++;
  CHECK_MSG(bad == 0, "%d of the first %d records not found", bad, n);
  snapshot_reader_close(r);
  readback b;
  CHECK(read_all(dir, NULL, &b) == (size_t)total && b.bad == 0);
  readback_free(&b);
}

static ino_t idx_inode(const char *dir) {
  seg_entry *segs;
  size_t n;
  ino_t ino = 0;
  if (seg_list(dir, &segs, &n) < 0) return 0;
  if (n == 1) {
    char p[4096];
    struct stat st;
    if (seg_path(p, sizeof p, dir, segs[0].name, 1) == 0 && stat(p, &st) == 0) ino = st.st_ino;
  }
  free(segs);
  return ino;
}

int main(void) {
  char *dir = scratch_dir("reopen-idx");
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_ALWAYS;

  /* a sealed segment with its index */
  snapshot_log *log = log_open_or_die(dir, &o);
  append_n(log, &g, 0, FIRST);
  CHECK(snapshot_log_close(log, NULL) == 0);
  CHECK(count_files(dir, ".log") == 1 && count_files(dir, ".idx") == 1);
  ino_t before = idx_inode(dir);
  CHECK(before != 0);

  /* reopened: the index is trusted (no scan) and left where it was */
  log = log_open_or_die(dir, &o);
  snapshot_log_status st;
  snapshot_log_status_get(log, &st);
  CHECK_MSG(st.recovered_segments == 0, "%llu segments scanned at open",
            (unsigned long long)st.recovered_segments);
  CHECK(idx_inode(dir) == before);
  /* appended to while its index describes only the first part */
  append_n(log, &g, FIRST, MORE);
  check_all(dir, FIRST + MORE, FIRST + MORE);
  CHECK(snapshot_log_close(log, NULL) == 0);
  check_all(dir, FIRST + MORE, FIRST + MORE);

  /* a crash: a process appends and dies without sealing */
  pid_t pid = fork();
  if (pid == 0) {
    snapshot_log *l = log_open_or_die(dir, &o);
    append_n(l, &g, FIRST + MORE, CRASHED); /* ALWAYS: durable when this returns */
    kill(getpid(), SIGKILL);
    _exit(3);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
  /* the child's ids: taken from a copy of g, so reproduce them from the log */
  readback b;
  size_t got = read_all(dir, NULL, &b);
  CHECK_MSG(got == FIRST + MORE + CRASHED, "%zu records after the crash", got);
  readback_free(&b);

  /* the next open finds the index stale, scans, and the seal covers all */
  log = log_open_or_die(dir, &o);
  snapshot_log_status_get(log, &st);
  CHECK(st.recovered_segments == 1 && st.cut_records == 0);
  CHECK(snapshot_log_close(log, NULL) == 0);
  CHECK(count_files(dir, ".idx") == 1);
  seg_entry *segs;
  size_t n;
  CHECK(seg_list(dir, &segs, &n) == 0 && n == 1);
  if (n == 1) {
    char p[4096], ip[4096];
    struct stat sst;
    seg_index x;
    seg_index_init(&x);
    seg_path(p, sizeof p, dir, segs[0].name, 0);
    seg_path(ip, sizeof ip, dir, segs[0].name, 1);
    CHECK(stat(p, &sst) == 0);
    int fd = open(p, O_RDONLY);
    uint8_t hb[SEG_HEADER_MAX];
    seg_header h;
    CHECK(fd >= 0 && read(fd, hb, sizeof hb) > 0 && seg_header_decode(hb, sizeof hb, &h) == 0);
    if (fd >= 0) close(fd);
    CHECK(seg_index_read(ip, (uint64_t)sst.st_size, h.crc, &x) == 0);
    CHECK(x.records == FIRST + MORE + CRASHED);
    seg_index_free(&x);
  }
  free(segs);
  check_all(dir, FIRST + MORE, FIRST + MORE + CRASHED);
  rm_rf(dir);
  free(dir);
  TEST_END();
}
