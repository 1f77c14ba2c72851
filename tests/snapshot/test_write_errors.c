/* test_write_errors.c — a disk that refuses writes. In a child process the
 * file size limit (RLIMIT_FSIZE) makes writes fail with EFBIG part-way, as a
 * full disk would with ENOSPC: the writer counts the errors and reports the
 * errno text, cuts its partial write back so the segment stays valid, keeps
 * the records queued and retries; once the limit is lifted everything is
 * written, in order, nothing twice. Nobody is held until space returns:
 * under ALWAYS a waiter whose record the disk refused is told so (and the
 * record is never written), the log says it is failing and finds out by
 * itself when space is back; a full queue refuses (BLOCK) or drops (DROP)
 * at once while the disk fails, and BLOCK waits only full_wait_ms for a
 * writer that does not move. A close against a disk that never recovers
 * gives up after its timeout and says records were lost. Each scenario runs
 * in its own child (the limit is per process); the child's checks count in
 * its exit status. */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

static void set_fsize(rlim_t soft) {
  struct rlimit rl;
  getrlimit(RLIMIT_FSIZE, &rl);
  rl.rlim_cur = soft;
  if (setrlimit(RLIMIT_FSIZE, &rl) < 0) {
    perror("setrlimit");
    _exit(2);
  }
}

static void sleep_ms(long ms) {
  nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

/* Every segment in dir scans clean: no torn tail, no damage. */
static int all_clean(const char *dir) {
  seg_entry *segs;
  size_t n;
  if (seg_list(dir, &segs, &n) < 0) return 0;
  int ok = 1;
  for (size_t i = 0; i < n; i++) {
    char p[4096];
    seg_path(p, sizeof p, dir, segs[i].name, 0);
    int fd = open(p, O_RDONLY);
    struct stat st;
    fstat(fd, &st);
    uint8_t hb[SEG_HEADER_MAX];
    seg_header h;
    size_t hn = (size_t)st.st_size < sizeof hb ? (size_t)st.st_size : sizeof hb;
    if (read_full(fd, hb, hn, 0) < 0 || seg_header_decode(hb, hn, &h) != 0) {
      ok = 0;
      close(fd);
      continue;
    }
    frame_scan s;
    frame_scan_init(&s, fd, h.header_len, (uint64_t)st.st_size);
    const uint8_t *body;
    uint32_t len;
    while (frame_scan_next(&s, &body, &len) == 1) {
    }
    if (s.torn || s.damaged_regions) ok = 0;
    frame_scan_free(&s);
    close(fd);
  }
  free(segs);
  return ok;
}

static void scenario_retry(const char *dir, snapshot_durability mode) {
  signal(SIGXFSZ, SIG_IGN); /* get EFBIG instead of dying */
  set_fsize(24 * 1024);
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = mode;
  o.interval_ms = 5;
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  const int N = 400; /* ~150 KiB: far past the limit */
  uint64_t tickets[400];
  for (int i = 0; i < N; i++) {
    trec_make(&t, &g, 0, (uint64_t)i, 300);
    CHECK(snapshot_log_append(log, &t.r, &tickets[i]) == 0);
  }
  snapshot_log_status st;
  for (int i = 0; i < 200; i++) {
    snapshot_log_status_get(log, &st);
    if (st.write_errors >= 3) break;
    sleep_ms(10);
  }
  CHECK_MSG(st.write_errors >= 3, "%llu write errors", (unsigned long long)st.write_errors);
  CHECK(st.last_errno == EFBIG);
  CHECK_MSG(strstr(st.last_error, "File too large") != NULL && strstr(st.last_error, "seg-"), "%s",
            st.last_error);
  CHECK(st.written < (uint64_t)N);
  CHECK(st.durable_ticket < tickets[N - 1]);
  /* what is on disk meanwhile is whole: the partial write was cut back */
  CHECK(all_clean(dir));
  readback b;
  read_all(dir, NULL, &b);
  CHECK(b.bad == 0 && b.n < (size_t)N);
  int prefix = 1;
  for (size_t i = 0; i < b.n; i++) prefix &= b.nums[i] == (long long)i;
  CHECK(prefix);
  readback_free(&b);

  /* the disk recovers */
  set_fsize(RLIM_INFINITY);
  CHECK(snapshot_log_wait_durable(log, tickets[N - 1]) == 0);
  snapshot_log_status_get(log, &st);
  CHECK(st.written == (uint64_t)N);
  CHECK(snapshot_log_close(log, &st) == 0);
  read_all(dir, NULL, &b);
  CHECK(b.n == (size_t)N && b.bad == 0);
  int in_order = 1;
  for (size_t i = 0; i < b.n; i++) in_order &= b.nums[i] == (long long)i;
  CHECK(in_order);
  readback_free(&b);
  CHECK(all_clean(dir));
}

/* The size of the one segment in dir. */
static off_t seg_size(const char *dir) {
  seg_entry *segs;
  size_t n;
  if (seg_list(dir, &segs, &n) < 0 || n != 1) return -1;
  char p[4096];
  seg_path(p, sizeof p, dir, segs[0].name, 0);
  free(segs);
  struct stat st;
  return stat(p, &st) == 0 ? st.st_size : -1;
}

/* Polls the status until failing is `want` (bounded: 10 s). */
static int wait_failing(snapshot_log *log, int want) {
  snapshot_log_status st;
  for (int i = 0; i < 1000; i++) {
    snapshot_log_status_get(log, &st);
    if (st.failing == want) return 1;
    sleep_ms(10);
  }
  return 0;
}

/* ALWAYS on a disk that refuses writes: a waiter is never held until space
 * returns. Its record is refused (SNAPSHOT_EREFUSED) and never written, not
 * even once space is back; records appended while the disk fails are
 * refused too; the log says it is failing, probes the disk by itself (no
 * record needed) and clears once space returns; a record after that is
 * durable; a refused ticket stays refused after later records became
 * durable; the segment stays whole. */
static void scenario_always_refuses(const char *dir) {
  signal(SIGXFSZ, SIG_IGN);
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_ALWAYS;
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  uint64_t ticket;
  trec_make(&t, &g, 0, 0, 10);
  CHECK(snapshot_log_append(log, &t.r, &ticket) == 0);
  CHECK(snapshot_log_wait_durable(log, ticket) == 0); /* the segment exists now */
  off_t size0 = seg_size(dir);
  CHECK(size0 > 0);
  set_fsize((rlim_t)size0); /* not one more byte */

  uint64_t refused_ticket = 0;
  int refused = 0;
  for (int i = 1; i <= 50; i++) {
    trec_make(&t, &g, 0, (uint64_t)i, 300);
    CHECK(snapshot_log_append(log, &t.r, &ticket) == 0);
    int rc = snapshot_log_wait_durable(log, ticket);
    CHECK_MSG(rc == SNAPSHOT_EREFUSED, "record %d: %s", i, snapshot_strerror(rc));
    if (rc == SNAPSHOT_EREFUSED) refused++;
    if (i == 1) refused_ticket = ticket;
  }
  snapshot_log_status st;
  snapshot_log_status_get(log, &st);
  CHECK(st.failing == 1 && st.failing_since_ns > 0);
  CHECK(st.last_errno == EFBIG);
  CHECK_MSG(st.refused == (uint64_t)refused, "refused %llu of %d", (unsigned long long)st.refused,
            refused);
  CHECK(st.written == 1 && st.queue_depth == 0);
  CHECK(seg_size(dir) == size0); /* what failed was cut back */
  CHECK(all_clean(dir));

  /* space returns: the probe finds it without a record */
  set_fsize(RLIM_INFINITY);
  CHECK(wait_failing(log, 0));
  trec_make(&t, &g, 0, 51, 10);
  CHECK(snapshot_log_append(log, &t.r, &ticket) == 0);
  CHECK(snapshot_log_wait_durable(log, ticket) == 0);
  /* later records are durable; the refused one stays refused */
  CHECK(snapshot_log_wait_durable(log, refused_ticket) == SNAPSHOT_EREFUSED);
  CHECK(snapshot_log_close(log, &st) == 0);
  CHECK(st.lost == 0);
  readback b;
  CHECK(read_all(dir, NULL, &b) == 2);
  CHECK(b.bad == 0 && b.n == 2 && b.nums[0] == 0 && b.nums[1] == 51);
  readback_free(&b);
  CHECK(all_clean(dir));
}

/* BLOCK on a disk that refuses writes: appends go into the queue while it
 * has room, and once it is full they are refused at once (not held until
 * space returns), counted; once space returns everything queued is written
 * and appends are taken again. DROP: the same appends are dropped and
 * counted instead. */
static void scenario_full_queue(const char *dir, snapshot_on_full mode) {
  signal(SIGXFSZ, SIG_IGN);
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_INTERVAL;
  o.interval_ms = 5;
  o.queue_records = 64;
  o.on_full = mode;
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  uint64_t ticket;
  trec_make(&t, &g, 0, 0, 10);
  CHECK(snapshot_log_append(log, &t.r, &ticket) == 0);
  CHECK(snapshot_log_wait_durable(log, ticket) == 0);
  set_fsize((rlim_t)seg_size(dir));
  /* the writer's buffer (8 MiB) and then the queue (64 records) take
   * records while the disk fails: past both, appends are turned away */
  int taken = 0, turned = 0, other = 0;
  for (int i = 1; i <= 40000 && turned < 100; i++) {
    trec_make(&t, &g, 0, (uint64_t)i, 4000);
    int rc = snapshot_log_append(log, &t.r, NULL);
    if (rc == 0)
      taken++;
    else if (rc == (mode == SNAPSHOT_FULL_DROP ? SNAPSHOT_EFULL : SNAPSHOT_EREFUSED))
      turned++;
    else
      other++;
  }
  CHECK_MSG(turned == 100 && other == 0, "%d taken, %d turned away, %d other", taken, turned,
            other);
  CHECK(wait_failing(log, 1)); /* DROP may fill the queue before the first write fails */
  snapshot_log_status st;
  snapshot_log_status_get(log, &st);
  if (mode == SNAPSHOT_FULL_DROP)
    CHECK(st.dropped == 100 && st.refused == 0);
  else
    CHECK(st.refused == 100 && st.dropped == 0);
  CHECK(st.queue_depth == (uint64_t)taken);
  set_fsize(RLIM_INFINITY);
  CHECK(wait_failing(log, 0));
  trec_make(&t, &g, 0, 40001, 10);
  CHECK(snapshot_log_append(log, &t.r, &ticket) == 0);
  CHECK(snapshot_log_wait_durable(log, ticket) == 0);
  CHECK(snapshot_log_close(log, &st) == 0);
  CHECK(st.written == (uint64_t)taken + 2 && st.lost == 0);
  readback b;
  read_all(dir, NULL, &b);
  CHECK(b.bad == 0 && b.n == (size_t)taken + 2);
  readback_free(&b);
  CHECK(all_clean(dir));
}

/* A writer that makes no progress without failing (here a format hook that
 * waits; a disk that hangs would do the same): BLOCK waits full_wait_ms for
 * room, then refuses; the next append refuses at once, since the writer has
 * not moved since; once it moves, appends are taken again. */
static _Atomic int hook_hold;
static int holding_format(void *ud, snapshot_rec *rec) {
  (void)ud;
  (void)rec;
  while (atomic_load(&hook_hold)) sleep_ms(1);
  return 0;
}

static void scenario_stalled_writer(const char *dir) {
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.queue_records = 16;
  o.full_wait_ms = 200;
  o.format = holding_format;
  atomic_store(&hook_hold, 1);
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  int taken = 0, refused = 0;
  for (int i = 0; i < 40; i++) {
    trec_make(&t, &g, 0, (uint64_t)i, 10);
    int rc = snapshot_log_append(log, &t.r, NULL);
    taken += rc == 0;
    refused += rc == SNAPSHOT_EREFUSED;
  }
  /* 16 in the queue, or 17 with the one the writer holds */
  CHECK_MSG(taken >= 16 && taken <= 17 && taken + refused == 40, "%d taken, %d refused", taken,
            refused);
  snapshot_log_status st;
  snapshot_log_status_get(log, &st);
  CHECK(st.failing == 0 && st.refused == (uint64_t)refused);
  atomic_store(&hook_hold, 0);
  uint64_t ticket = 0;
  int rc = -1;
  for (int i = 0; i < 1000 && rc != 0; i++) { /* room comes back as the writer moves */
    trec_make(&t, &g, 0, 100, 10);
    rc = snapshot_log_append(log, &t.r, &ticket);
    if (rc) sleep_ms(10);
  }
  CHECK(rc == 0);
  CHECK(snapshot_log_wait_durable(log, ticket) == 0);
  CHECK(snapshot_log_close(log, &st) == 0);
  CHECK(st.written == (uint64_t)taken + 1);
}

static void scenario_close_gives_up(const char *dir) {
  signal(SIGXFSZ, SIG_IGN);
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  o.close_timeout_ms = 300;
  set_fsize(2048);
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  for (int i = 0; i < 100; i++) {
    trec_make(&t, &g, 0, (uint64_t)i, 300);
    snapshot_log_append(log, &t.r, NULL);
  }
  int64_t t0 = wall_ns();
  snapshot_log_status st;
  CHECK(snapshot_log_close(log, &st) == SNAPSHOT_EIO);
  int64_t ms = (wall_ns() - t0) / 1000000;
  CHECK_MSG(ms >= 250 && ms < 5000, "close took %lld ms", (long long)ms);
  CHECK(st.written < 100);
  CHECK(st.last_errno == EFBIG);
  set_fsize(RLIM_INFINITY);
  CHECK(all_clean(dir));
}

static void run_child(void (*fn)(const char *), const char *name) {
  char *dir = scratch_dir(name);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    test_checks = test_failures = 0; /* the child's own */
    fn(dir);
    printf("  %s: %d checks, %d failed\n", name, test_checks, test_failures);
    fflush(NULL);
    _exit(test_failures ? 1 : 0);
  }
  int status;
  waitpid(pid, &status, 0);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "scenario %s failed (status %d)", name,
            status);
  rm_rf(dir);
  free(dir);
}

static void retry_none(const char *dir) { scenario_retry(dir, SNAPSHOT_DURABLE_NONE); }
static void retry_interval(const char *dir) { scenario_retry(dir, SNAPSHOT_DURABLE_INTERVAL); }
static void full_block(const char *dir) { scenario_full_queue(dir, SNAPSHOT_FULL_BLOCK); }
static void full_drop(const char *dir) { scenario_full_queue(dir, SNAPSHOT_FULL_DROP); }

int main(void) {
  run_child(retry_none, "efbig-none");
  run_child(retry_interval, "efbig-interval");
  run_child(scenario_always_refuses, "efbig-always");
  run_child(full_block, "efbig-block");
  run_child(full_drop, "efbig-drop");
  run_child(scenario_stalled_writer, "stalled-writer");
  run_child(scenario_close_gives_up, "efbig-close");
  TEST_END();
}
