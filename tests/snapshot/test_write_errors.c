/* test_write_errors.c — a disk that refuses writes. In a child process the
 * file size limit (RLIMIT_FSIZE) makes writes fail with EFBIG part-way, as a
 * full disk would with ENOSPC: the writer counts the errors and reports the
 * errno text, cuts its partial write back so the segment stays valid, keeps
 * the records queued and retries; once the limit is lifted everything is
 * written, in order, nothing twice. Under ALWAYS, waiters are not released
 * before their record is really on disk. A close against a disk that never
 * recovers gives up after its timeout and says records were lost. Each
 * scenario runs in its own child (the limit is per process); the child's
 * checks count in its exit status. */
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

typedef struct waiter {
  snapshot_log *log;
  uint64_t ticket;
  _Atomic int done;
} waiter;

static void *wait_thread(void *arg) {
  waiter *w = arg;
  snapshot_log_wait_durable(w->log, w->ticket);
  atomic_store(&w->done, 1);
  return NULL;
}

static void scenario_always_waits(const char *dir) {
  signal(SIGXFSZ, SIG_IGN);
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_ALWAYS;
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  trec_make(&t, &g, 0, 0, 10);
  uint64_t ticket;
  snapshot_log_append(log, &t.r, &ticket);
  snapshot_log_wait_durable(log, ticket); /* the segment exists now */
  struct stat st0;
  seg_entry *segs;
  size_t n;
  seg_list(dir, &segs, &n);
  char p[4096];
  seg_path(p, sizeof p, dir, segs[0].name, 0);
  free(segs);
  stat(p, &st0);
  set_fsize((rlim_t)st0.st_size); /* not one more byte */
  trec_make(&t, &g, 0, 1, 10);
  waiter w = {log, 0, 0};
  snapshot_log_append(log, &t.r, &w.ticket);
  pthread_t th;
  pthread_create(&th, NULL, wait_thread, &w);
  sleep_ms(150);
  CHECK(atomic_load(&w.done) == 0); /* not released: the record is not on disk */
  set_fsize(RLIM_INFINITY);
  pthread_join(th, NULL);
  CHECK(atomic_load(&w.done) == 1);
  snapshot_log_status st;
  snapshot_log_close(log, &st);
  CHECK(st.write_errors >= 1);
  readback b;
  CHECK(read_all(dir, NULL, &b) == 2);
  readback_free(&b);
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
static void retry_always(const char *dir) { scenario_retry(dir, SNAPSHOT_DURABLE_ALWAYS); }

int main(void) {
  run_child(retry_none, "efbig-none");
  run_child(retry_interval, "efbig-interval");
  run_child(retry_always, "efbig-always");
  run_child(scenario_always_waits, "efbig-wait");
  run_child(scenario_close_gives_up, "efbig-close");
  TEST_END();
}
