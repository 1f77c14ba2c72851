/* test_sigkill.c — nothing acknowledged as durable is lost when the writing
 * process dies mid-load.
 *
 * A child process appends snapshots from three threads and, each time
 * snapshot_log_wait_durable returns (durability ALWAYS), writes the id to a
 * pipe. The parent kills it with SIGKILL at a random moment after the first
 * acknowledgement, reopens the log
 * (recovery cuts whatever the kill tore) and checks that every id the child
 * reported is there, whole. Repeated, on the same directory, so later rounds
 * also recover after earlier kills. With INTERVAL the child reports an id
 * only once the status says a completed fsync covers its ticket. */
#include "helpers.h"

#include <dirent.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

typedef struct child_ctx {
  snapshot_log *log;
  int fd; /* the pipe */
  int thread;
  int interval;
} child_ctx;

static void report(int fd, const uint8_t id[16]) {
  /* 16 bytes < PIPE_BUF: each write lands whole, whatever the threads do */
  ssize_t w;
  do w = write(fd, id, 16);
  while (w < 0 && errno == EINTR);
  if (w != 16) _exit(3);
}

static void *child_worker(void *arg) {
  child_ctx *c = arg;
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  trec t;
  /* INTERVAL: ids waiting for a sync to cover their ticket */
  enum { PENDING = 4096 };
  static __thread uint8_t pend_id[PENDING][16];
  static __thread uint64_t pend_ticket[PENDING];
  size_t head = 0, tail = 0;
  for (uint64_t n = (uint64_t)c->thread * 100000000ull;; n++) {
    trec_make(&t, &g, 0, n, (n * 13) % 3 == 0 ? 3000 : 300);
    uint64_t ticket;
    if (snapshot_log_append(c->log, &t.r, &ticket) < 0) _exit(4);
    if (!c->interval) {
      if (snapshot_log_wait_durable(c->log, ticket) < 0) _exit(5);
      report(c->fd, t.r.id);
      continue;
    }
    memcpy(pend_id[head % PENDING], t.r.id, 16);
    pend_ticket[head % PENDING] = ticket;
    head++;
    snapshot_log_status st;
    snapshot_log_status_get(c->log, &st);
    while (tail < head && pend_ticket[tail % PENDING] <= st.durable_ticket) {
      report(c->fd, pend_id[tail % PENDING]);
      tail++;
    }
    if (head - tail == PENDING) { /* too far ahead of the syncs: wait for one */
      snapshot_log_wait_durable(c->log, pend_ticket[tail % PENDING]);
    }
  }
  return NULL;
}

static void child_main(const char *dir, int fd, int interval) {
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = interval ? SNAPSHOT_DURABLE_INTERVAL : SNAPSHOT_DURABLE_ALWAYS;
  o.interval_ms = 10;
  o.segment_bytes = 1 << 20; /* rotations during the load */
  o.queue_records = 1024;
  snapshot_log *log;
  char err[SNAPSHOT_ERRLEN];
  if (snapshot_log_open(dir, &o, &log, err, sizeof err) < 0) {
    fprintf(stderr, "child: %s\n", err);
    _exit(2);
  }
  enum { T = 3 };
  pthread_t th[T];
  child_ctx ctx[T];
  for (int i = 0; i < T; i++) {
    ctx[i] = (child_ctx){log, fd, i + 1, interval};
    pthread_create(&th[i], NULL, child_worker, &ctx[i]);
  }
  for (;;) pause();
}

static uint64_t xorshift(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

typedef struct idset {
  uint8_t (*ids)[16];
  size_t n, cap;
} idset;

static void idset_add(idset *s, const uint8_t *id) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 4096;
    s->ids = realloc(s->ids, s->cap * 16);
  }
  memcpy(s->ids[s->n++], id, 16);
}

/* One round: run the child until its first durable acknowledgement and ms
 * milliseconds more (a loaded machine may take longer than that to open the
 * log and complete a first fsync), kill it, check. */
/* Files in dir ending in .ztmp (a compaction's temporary). */
static size_t count_ztmp(const char *dir) {
  DIR *d = opendir(dir);
  size_t c = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    c += n > 5 && strcmp(e->d_name + n - 5, ".ztmp") == 0;
  }
  if (d) closedir(d);
  return c;
}

static void round_once(const char *dir, int interval, int ms, int round) {
  int p[2];
  if (pipe(p) < 0) {
    perror("pipe");
    exit(2);
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    child_main(dir, p[1], interval);
    _exit(0);
  }
  close(p[1]);
  idset reported = {0};
  uint8_t buf[16 * 256];
  size_t have = 0;
  int64_t start = wall_ns(), deadline = start + (int64_t)10000 * 1000000; /* until the first ack */
  int killed = 0, acked = 0;
  for (;;) {
    int64_t left = (deadline - wall_ns()) / 1000000;
    if (!killed && left <= 0) {
      kill(pid, SIGKILL);
      killed = 1;
    }
    struct pollfd pf = {p[0], POLLIN, 0};
    if (poll(&pf, 1, killed ? 1000 : (int)(left > 0 ? left : 0)) < 0 && errno != EINTR) break;
    if (!(pf.revents & (POLLIN | POLLHUP))) continue;
    ssize_t got = read(p[0], buf + have, sizeof buf - have);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      break; /* EOF: the child is gone and the pipe drained */
    }
    have += (size_t)got;
    size_t whole = have / 16 * 16;
    for (size_t i = 0; i < whole; i += 16) idset_add(&reported, buf + i);
    if (!acked && reported.n > 0) { /* the first: the kill comes ms from now */
      acked = 1;
      deadline = wall_ns() + (int64_t)ms * 1000000;
    }
    memmove(buf, buf + whole, have - whole);
    have -= whole;
  }
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
            "round %d: the child ended otherwise (status %d)", round, status);
  CHECK_MSG(reported.n > 0, "round %d: no durable acknowledgement in 10 s", round);

  /* recover, as the next process would */
  snapshot_log *log = log_open_or_die(dir, NULL);
  snapshot_log_status st;
  snapshot_log_close(log, &st);
  /* a compaction the kill interrupted leaves at most a temporary, removed at open */
  CHECK_MSG(count_ztmp(dir) == 0, "round %d: a compaction's temporary is left", round);

  readback b;
  read_all(dir, NULL, &b);
  CHECK(b.bad == 0);
  qsort(b.ids, b.n, 16, id_cmp);
  size_t missing = 0;
  for (size_t i = 0; i < reported.n; i++)
    if (!bsearch(reported.ids[i], b.ids, b.n, 16, id_cmp)) missing++;
  CHECK_MSG(missing == 0, "round %d (%s): %zu of %zu durable ids lost", round,
            interval ? "interval" : "always", missing, reported.n);
  size_t dups = 0;
  for (size_t i = 1; i < b.n; i++) dups += memcmp(b.ids[i - 1], b.ids[i], 16) == 0;
  CHECK_MSG(dups == 0, "round %d: %zu records twice", round, dups);
  printf(
      "round %d (%s, killed %d ms after the first acknowledgement, %lld ms in): %zu "
      "acknowledged, %zu on disk, cut %llu bytes\n",
      round, interval ? "interval" : "always", ms, (long long)((wall_ns() - start) / 1000000),
      reported.n, b.n, (unsigned long long)st.cut_bytes);
  readback_free(&b);
  free(reported.ids);
}

/* Records of dir that are in compressed blocks: rotations compact the
 * segments, so the kills land beside compressed segments and during
 * compactions. */
static uint64_t records_in_blocks(const char *dir) {
  seg_entry *segs;
  size_t n;
  uint64_t in = 0;
  if (seg_list(dir, &segs, &n) < 0) return 0;
  for (size_t i = 0; i < n; i++) {
    seg_header h;
    seg_index x;
    uint64_t size;
    seg_index_init(&x);
    int fd = seg_open_indexed(dir, segs[i].name, 0, &h, &x, &size, NULL, 0);
    if (fd >= 0) close(fd);
    for (size_t k = 0; k < x.n; k++)
      if (x.blocks[k].flags & IDX_FLAG_BLOCK) in += x.blocks[k].count;
    seg_index_free(&x);
  }
  free(segs);
  return in;
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  char *dir = scratch_dir("sigkill");
  uint64_t seed = (uint64_t)wall_ns() ^ ((uint64_t)getpid() << 32);
  printf("seed %llu\n", (unsigned long long)seed);
  int round = 0;
  for (int i = 0; i < 5; i++, round++) round_once(dir, 0, 80 + (int)(xorshift(&seed) % 400), round);
  for (int i = 0; i < 3; i++, round++) round_once(dir, 1, 80 + (int)(xorshift(&seed) % 400), round);
  uint64_t in_blocks = records_in_blocks(dir);
  printf("%llu records in compressed blocks\n", (unsigned long long)in_blocks);
  CHECK(in_blocks > 0);
  rm_rf(dir);
  free(dir);
  TEST_END();
}
