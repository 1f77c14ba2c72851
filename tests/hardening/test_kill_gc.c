/* test_kill_gc.c — `verdict snapshots gc` killed at random points, beside a
 * writer that is killed too (issue 9, "Faults").
 *
 * Each round: the parent adds a batch of old snapshots (older than
 * --keep-days, so gc has segments to rewrite and delete) with a log it then
 * closes; a writer child appends old and new snapshots from two threads under
 * durability ALWAYS, in small segments (so gc meets segments sealed while it
 * runs) and reports each id once snapshot_log_wait_durable returns; then the
 * real `verdict snapshots gc` (the binary built beside this test) runs and is
 * killed with SIGKILL after a random delay — drawn up to a little more than a
 * whole gc takes, so the kills land before, during and after its rewrites —
 * and the writer is killed a moment later. Then, every round:
 *
 *   - the log reopens (recovery) and reads back with no damaged byte;
 *   - no snapshot appears twice (a rewrite renamed in, and its original, must
 *     never both be read);
 *   - every snapshot gc must keep is there and whole: every new one, and
 *     every old one the retention rule keeps (checked against the rule
 *     written out again here, not against snapshot_gc_keeps), whether the
 *     parent wrote it or the writer acknowledged it as durable.
 *
 * At the end gc runs to completion: it exits 0, leaves no *.gctmp behind,
 * leaves only snapshots the rule keeps, and a second run removes nothing.
 *
 * Not here: SIGKILL of a plain writer (tests/snapshot/test_sigkill.c); gc's
 * rule itself (tests/snapshot/test_gc.c). */
#include "snapshot/helpers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#define DAY_MS 86400000ull
#define ROUNDS 40
#define KEEP_DAYS 7
#define SAMPLE 0.2
#define MINCONF 0.5

static char verdict_bin[4096];

/* The rule, independently of gc.c. */
static int should_keep(const snapshot_rec *r, int64_t now_ns) {
  int64_t cutoff = now_ns - (int64_t)KEEP_DAYS * 86400 * 1000000000;
  if (r->time_ns >= cutoff) return 1;
  if (!r->allowed || r->review) return 1;
  if (r->source == SNAPSHOT_SRC_MODEL || r->source == SNAPSHOT_SRC_ERROR) return 1;
  if (r->confidence < MINCONF) return 1;
  return snapshot_sample_point(r->id) < SAMPLE;
}

/* ---- a set of ids (sorted on demand) ---- */
typedef struct idset {
  uint8_t (*ids)[16];
  size_t n, cap;
} idset;

static void idset_add(idset *s, const uint8_t id[16]) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 4096;
    s->ids = realloc(s->ids, s->cap * 16);
    if (!s->ids) exit(2);
  }
  memcpy(s->ids[s->n++], id, 16);
}

/* ---- the writer child ---- */
typedef struct wctx {
  snapshot_log *log;
  int fd;
  uint64_t base;
} wctx;

/* Record n: odd numbers are old (ten days back and older), even ones new. */
static void *writer_thread(void *arg) {
  wctx *c = arg;
  snapshot_idgen gold, gnew;
  snapshot_idgen_init(&gold);
  snapshot_idgen_init(&gnew);
  uint64_t old_ms = (uint64_t)(wall_ns() / 1000000) - 10 * DAY_MS - (c->base % 997) * 1000;
  trec t;
  for (uint64_t n = c->base;; n++) {
    if (n % 2)
      trec_make(&t, &gold, old_ms + n % 100000, n, 600);
    else
      trec_make(&t, &gnew, 0, n, 600);
    uint64_t ticket;
    if (snapshot_log_append(c->log, &t.r, &ticket) < 0) _exit(4);
    if (snapshot_log_wait_durable(c->log, ticket) < 0) _exit(5);
    uint8_t msg[24]; /* id, then n: under PIPE_BUF, so each lands whole */
    memcpy(msg, t.r.id, 16);
    memcpy(msg + 16, &n, 8);
    ssize_t w;
    do w = write(c->fd, msg, sizeof msg);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)sizeof msg) _exit(3);
  }
  return NULL;
}

static void writer_main(const char *dir, int fd, uint64_t base) {
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_ALWAYS;
  o.segment_bytes = 64 * 1024; /* segments sealed while gc runs */
  o.queue_records = 1024;
  snapshot_log *log;
  char err[SNAPSHOT_ERRLEN];
  if (snapshot_log_open(dir, &o, &log, err, sizeof err) < 0) {
    fprintf(stderr, "writer: %s\n", err);
    _exit(2);
  }
  pthread_t th[2];
  wctx c[2];
  for (int i = 0; i < 2; i++) {
    c[i] = (wctx){log, fd, base + (uint64_t)i * 1000000};
    pthread_create(&th[i], NULL, writer_thread, &c[i]);
  }
  for (;;) pause(); /* until SIGKILL */
}

/* ---- the gc child: the real command, with the settings of should_keep ---- */
static void gc_exec(const char *dir) {
  char *argv[] = {verdict_bin, "snapshots",        "gc",  "-s",
                  (char *)dir, "--keep-days",      "7",   "--sample",
                  "0.2",       "--min-confidence", "0.5", NULL};
  execv(verdict_bin, argv);
  _exit(127);
}

static pid_t gc_start(const char *dir, int quiet) {
  pid_t p = fork();
  if (p == 0) {
    if (quiet) {
      int nul = open("/dev/null", O_WRONLY);
      dup2(nul, 1);
      dup2(nul, 2);
    }
    gc_exec(dir);
  }
  return p;
}

static uint64_t mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void sleep_us(uint64_t us) {
  struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

static uint64_t rnd(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

/* The parent's batch: `count` old snapshots (and a few new), written and
 * closed; what the rule keeps goes to keep. */
static void add_batch(const char *dir, uint64_t base, int count, int64_t now, idset *keep) {
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  o.segment_bytes = 96 * 1024;
  snapshot_log *log = log_open_or_die(dir, &o);
  snapshot_idgen gold, gnew; /* ids of one generator never go back in time */
  snapshot_idgen_init(&gold);
  snapshot_idgen_init(&gnew);
  trec t;
  uint64_t start = (uint64_t)(now / 1000000) - (8 + base % 3) * DAY_MS;
  for (int i = 0; i < count; i++) {
    uint64_t n = base + (uint64_t)i;
    if (i % 10 == 9)
      trec_make(&t, &gnew, 0, n, 600);
    else
      trec_make(&t, &gold, start + (uint64_t)i, n, 600);
    if (snapshot_log_append(log, &t.r, NULL) != 0) {
      CHECK(!"append");
      break;
    }
    if (should_keep(&t.r, now)) idset_add(keep, t.r.id);
  }
  snapshot_log_status st;
  CHECK(snapshot_log_close(log, &st) == 0);
}

/* Reopens the log (recovery) and reads it all. Checks no damage, no
 * duplicate, every id of keep present; with final, that every record is one
 * the rule keeps. */
static void check_dir(const char *dir, idset *keep, int64_t now, int round, int final) {
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  snapshot_log *log;
  char err[SNAPSHOT_ERRLEN];
  int rc = snapshot_log_open(dir, &o, &log, err, sizeof err);
  CHECK(rc == 0);
  if (rc != 0) {
    fprintf(stderr, "round %d: the log does not reopen: %s\n", round, err);
    return;
  }
  CHECK(snapshot_log_close(log, NULL) == 0);

  snapshot_reader *r;
  CHECK(snapshot_reader_open(dir, NULL, &r, err, sizeof err) == 0);
  idset seen = {0};
  snapshot_rec rec;
  int k;
  size_t bad = 0, unkept = 0;
  while ((k = snapshot_reader_next(r, &rec)) == 1) {
    if (trec_check(&rec) < 0) bad++;
    if (final && !should_keep(&rec, now)) unkept++;
    idset_add(&seen, rec.id);
  }
  CHECK(k == 0);
  uint64_t skipped = snapshot_reader_skipped_bytes(r);
  CHECK(skipped == 0);
  snapshot_reader_close(r);
  CHECK(bad == 0);
  CHECK(unkept == 0);

  qsort(seen.ids, seen.n, 16, id_cmp);
  size_t dups = 0, missing = 0;
  for (size_t i = 1; i < seen.n; i++)
    if (memcmp(seen.ids[i - 1], seen.ids[i], 16) == 0) dups++;
  for (size_t i = 0; i < keep->n; i++)
    if (!bsearch(keep->ids[i], seen.ids, seen.n, 16, id_cmp)) missing++;
  CHECK(dups == 0);
  CHECK(missing == 0);
  if (bad || unkept || dups || missing || skipped || k != 0)
    fprintf(stderr,
            "round %d: %zu read, %zu bad, %zu duplicates, %zu of %zu kept ones missing, %zu the "
            "rule removes, %llu damaged bytes\n",
            round, seen.n, bad, dups, missing, keep->n, unkept, (unsigned long long)skipped);
  free(seen.ids);
}

static size_t count_suffix(const char *dir, const char *suffix) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  size_t c = 0, sl = strlen(suffix);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n > sl && strcmp(e->d_name + n - sl, suffix) == 0) c++;
  }
  closedir(d);
  return c;
}

/* Runs gc to its end; returns its stdout's "N removed" count, or -1. */
static long long gc_complete(const char *dir) {
  char out[4200];
  snprintf(out, sizeof out, "%s.gc-out", dir);
  pid_t p = fork();
  if (p == 0) {
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    gc_exec(dir);
  }
  int status;
  waitpid(p, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  FILE *f = fopen(out, "r");
  long long removed = -1;
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    unsigned long long kept, rem;
    if (sscanf(line, "records looked at: %llu kept, %llu removed", &kept, &rem) == 2)
      removed = (long long)rem;
  }
  if (f) fclose(f);
  unlink(out);
  return removed;
}

int main(void) {
  /* The command under test is the one built beside this test. */
  ssize_t n = readlink("/proc/self/exe", verdict_bin, sizeof verdict_bin - 16);
  if (n <= 0) {
    fprintf(stderr, "cannot find this test's own path\n");
    return 2;
  }
  verdict_bin[n] = '\0';
  char *slash = strrchr(verdict_bin, '/');
  snprintf(slash + 1, sizeof verdict_bin - (size_t)(slash + 1 - verdict_bin), "verdict");
  if (access(verdict_bin, X_OK) != 0) {
    fprintf(stderr, "%s not found: build the verdict target first (make, or cmake --build)\n",
            verdict_bin);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  char *dir = scratch_dir("killgc");
  int64_t now = wall_ns();
  idset keep = {0};
  /* VD_TEST_SEED=N repeats a run's delays (as far as timing allows) */
  const char *seed_env = getenv("VD_TEST_SEED");
  uint64_t seed =
      seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)now ^ ((uint64_t)getpid() << 32);
  if (!seed) seed = 1;
  printf("seed %llu\n", (unsigned long long)seed);
  uint64_t est_us = 200000; /* a whole gc's time: learnt from the runs that finish */
  int killed = 0, finished = 0, temps_seen = 0;

  for (int round = 0; round < ROUNDS; round++) {
    add_batch(dir, 1000000000ull + (uint64_t)round * 100001, 1500, now, &keep);

    int pfd[2];
    CHECK(pipe(pfd) == 0);
    pid_t w = fork();
    if (w == 0) {
      close(pfd[0]);
      writer_main(dir, pfd[1], 2000000000ull + (uint64_t)round * 10000000);
    }
    close(pfd[1]);
    /* wait for the writer's first durable record (bounded) */
    struct pollfd pf = {pfd[0], POLLIN, 0};
    CHECK(poll(&pf, 1, 30000) == 1);
    sleep_us(rnd(&seed) % 30000);

    uint64_t t0 = mono_us();
    pid_t g = gc_start(dir, 1);
    uint64_t delay = rnd(&seed) % (est_us + est_us / 4 + 1);
    int status = 0, done = 0;
    while (mono_us() - t0 < delay) {
      if (waitpid(g, &status, WNOHANG) == g) {
        done = 1;
        break;
      }
      sleep_us(500);
    }
    if (!done) {
      if (delay > est_us) est_us += est_us / 4; /* it ran longer than thought */
      kill(g, SIGKILL);
      waitpid(g, &status, 0);
    }
    if (WIFSIGNALED(status)) {
      killed++;
      if (count_suffix(dir, ".gctmp")) temps_seen++;
    } else {
      finished++;
      CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      uint64_t took = mono_us() - t0;
      est_us = took + took / 2 > 2000 ? took + took / 2 : 2000;
    }
    sleep_us(rnd(&seed) % 20000);
    kill(w, SIGKILL);
    waitpid(w, NULL, 0);

    /* every record the writer acknowledged */
    uint8_t msg[24];
    size_t got = 0, acked = 0;
    for (;;) {
      ssize_t r = read(pfd[0], msg + got, sizeof msg - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
      if (got < sizeof msg) continue;
      got = 0;
      acked++;
      uint64_t num;
      memcpy(&num, msg + 16, 8);
      /* rebuild the header from the number (the id is the one reported) */
      trec t;
      snapshot_idgen g2;
      snapshot_idgen_init(&g2);
      trec_make(&t, &g2, 0, num, 0);
      memcpy(t.r.id, msg, 16);
      t.r.time_ns = num % 2 ? now - 10 * (int64_t)DAY_MS * 1000000 : now;
      if (should_keep(&t.r, now)) idset_add(&keep, msg);
    }
    close(pfd[0]);
    CHECK(got == 0);
    CHECK(acked > 0);
    check_dir(dir, &keep, now, round, 0);
  }
  printf(
      "%d rounds: gc killed %d times (%d left a .gctmp), finished %d times; %zu snapshots "
      "that must stay\n",
      ROUNDS, killed, temps_seen, finished, keep.n);
  /* The delays reach past a whole run, so both must happen: a run of rounds
   * that never killed gc mid-way would have tested nothing. */
  CHECK(killed > 0);

  /* gc run again completes, and then has nothing left to do */
  CHECK(gc_complete(dir) >= 0);
  CHECK(count_suffix(dir, ".gctmp") == 0);
  check_dir(dir, &keep, now, ROUNDS, 1);
  CHECK(gc_complete(dir) == 0);

  free(keep.ids);
  rm_rf(dir);
  free(dir);
  TEST_END();
}
