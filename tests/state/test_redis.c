/* test_redis.c — counters in a real redis-server, started here on a free
 * loopback port: the Lua script keeps the GCRA rule of state.h exactly (at
 * the edges, to the microsecond; against the rule's second form in
 * limit_model.h; and reading for reading the same as the local store given
 * the same hits), penalties, two engines (two "nodes") and several threads
 * charging one key share one exact budget, a Redis that stops answering
 * (SIGSTOP) misses the deadline and the fallback answers, and when Redis is
 * killed every declared fallback (local, allow, deny) answers as documented
 * and is counted; when it comes back, counting goes back to it.
 *
 * Skipped (and says so) when redis-server is not installed: `scripts/deps
 * --test` installs it. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "state/limit_model.h"
#include "state/state.h"
#include "test.h"
#include "verdict.h"

extern char **environ;

#define US 1000LL
#define MS 1000000LL
#define SEC 1000000000LL

static pid_t redis_pid = -1;
static int redis_port;
static char url[64], tmpdir[256];

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t n = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
      getsockname(fd, (struct sockaddr *)&a, &n))
    return -1;
  close(fd);
  return ntohs(a.sin_port);
}

static int can_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

static void stop_redis(void) {
  if (redis_pid > 0) {
    kill(redis_pid, SIGKILL);
    waitpid(redis_pid, NULL, 0);
    redis_pid = -1;
  }
}

/* Starts redis-server on redis_port (no persistence); 0, or -1. */
static int start_redis(void) {
  char port[16];
  snprintf(port, sizeof port, "%d", redis_port);
  char *argv[] = {"redis-server", "--port", port,    "--bind", "127.0.0.1",  "--save",  "",
                  "--appendonly", "no",     "--dir", tmpdir,   "--loglevel", "warning", NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  int rc = posix_spawnp(&redis_pid, "redis-server", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc) {
    redis_pid = -1;
    return -1;
  }
  for (int i = 0; i < 500; i++) { /* wait until it listens (up to 5 s) */
    if (can_connect(redis_port)) return 0;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  stop_redis();
  return -1;
}

static state_store *open_redis(state_on_error on_error) {
  state_opts o = {.timeout_ms = 2000, .on_error = on_error};
  state_store *s = NULL;
  char err[256];
  if (state_open(url, &o, &s, err, sizeof err)) {
    fprintf(stderr, "state_open %s: %s\n", url, err);
    exit(2);
  }
  return s;
}

static limit_reading hit(state_store *s, const char *key, const limit_spec *sp, int64_t t,
                         bool charge) {
  limit_reading r;
  state_hit(s, key, strlen(key), sp, t, charge, &r);
  return r;
}

static int64_t base_time(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ((int64_t)ts.tv_sec * SEC) / SEC * SEC; /* whole seconds of now: keys expire sanely */
}

static void test_edges_and_model(void) {
  state_store *s = open_redis(STATE_FALLBACK_DENY);
  int64_t t0 = base_time();
  limit_spec sp = {.window_ns = 3 * SEC, .budget = 3}; /* one a second after a burst of 3 */
  for (int i = 0; i < 3; i++) CHECK(hit(s, "edge", &sp, t0, true).charged);
  limit_reading r = hit(s, "edge", &sp, t0 + SEC - US, true);
  CHECK_MSG(r.count == 3 && r.exceeded && !r.charged && !r.degraded, "count %u", r.count);
  r = hit(s, "edge", &sp, t0 + SEC, true); /* one charge paid back, exactly */
  CHECK_MSG(r.count == 2 && r.charged && !r.degraded, "count %u", r.count);
  r = hit(s, "edge", &sp, t0 + 2 * SEC - US, true);
  CHECK_MSG(r.count == 3 && r.exceeded, "count %u", r.count);

  /* the model and the local store, hit for hit, with a spacing that is
   * rounded (100 ms / 7) and a penalty */
  static const limit_spec specs[] = {
      {.window_ns = 100 * MS, .budget = 5},
      {.window_ns = 100 * MS, .budget = 7, .penalty_ns = 150 * MS},
  };
  state_opts lo = {0};
  state_store *local = NULL;
  char err[256];
  CHECK(state_open_local(&lo, &local, err, sizeof err) == 0);
  enum { N = 1500 };
  int64_t *charged = malloc(N * sizeof *charged);
  for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
    const limit_spec *m = &specs[k];
    limit_model mod = {0};
    char key[16];
    snprintf(key, sizeof key, "model%zu", k);
    int64_t t = t0;
    size_t nc = 0;
    unsigned seed = 99 + (unsigned)k;
    int mismatches = 0, unlike_local = 0, refusals = 0;
    for (int i = 0; i < N; i++) {
      seed = seed * 1103515245u + 12345u;
      t += ((seed >> 16) % 15000) * US;
      if (i % 7 == 0) t += 20 * MS - ((seed >> 8) % 3) * US;
      if (i % 11 == 0) t += (seed >> 4) % 1000; /* a ns reading */
      bool charge = (seed >> 4) % 5 != 0;
      limit_reading want = model_hit(&mod, m, t, charge);
      r = hit(s, key, m, t, charge);
      limit_reading l = hit(local, key, m, t, charge);
      if (r.degraded || r.count != want.count || r.exceeded != want.exceeded ||
          r.charged != want.charged || r.penalized != want.penalized)
        mismatches++;
      if (r.count != l.count || r.exceeded != l.exceeded || r.charged != l.charged ||
          r.penalized != l.penalized)
        unlike_local++;
      if (r.charged) charged[nc++] = t;
      refusals += r.exceeded;
    }
    CHECK_MSG(mismatches == 0, "spec %zu: %d readings differ from the model", k, mismatches);
    CHECK_MSG(unlike_local == 0, "spec %zu: %d readings differ from the local store", k,
              unlike_local);
    CHECK_MSG(refusals > 50 && nc > 300, "spec %zu: %d refused, %zu charged", k, refusals, nc);
    CHECK(model_bound_violations(charged, nc, m) == 0);
  }
  free(charged);
  state_close(local);

  /* a penalty outlasts the window */
  limit_spec p = {.window_ns = SEC, .budget = 2, .penalty_ns = 10 * SEC};
  hit(s, "pen", &p, t0, true);
  CHECK(hit(s, "pen", &p, t0 + 100 * MS, true).charged);
  r = hit(s, "pen", &p, t0 + 5 * SEC, true);
  CHECK(r.penalized && r.exceeded && r.count == 0);
  r = hit(s, "pen", &p, t0 + 100 * MS + 10 * SEC, true);
  CHECK(!r.penalized && r.charged);
  /* read-only readings change nothing */
  CHECK(hit(s, "ro", &sp, t0, false).count == 0);
  CHECK(hit(s, "ro", &sp, t0 + 1, false).count == 0);
  state_close(s);
}

typedef struct worker {
  vd_engine *e;
  int n, allowed;
} worker;

static void *work(void *p) {
  worker *w = p;
  vd_decision *d = vd_decision_new();
  const char *req = "{\"action\":\"api\",\"key\":\"k-shared\"}";
  for (int i = 0; i < w->n; i++) {
    vd_error err;
    if (vd_decide_json(w->e, req, -1, d, &err) == 0 && vd_decision_allowed(d)) w->allowed++;
  }
  vd_decision_free(d);
  return NULL;
}

static vd_engine *open_engine(const char *dir, int on_error) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  o.state_url = url;
  o.state_timeout_ms = 2000;
  o.state_on_error = on_error;
  vd_engine *e = NULL;
  vd_error err;
  if (vd_engine_open(dir, &o, &e, &err)) {
    fprintf(stderr, "%s\n", err.message);
    exit(2);
  }
  return e;
}

static const char *decide(vd_engine *e, const char *req) {
  static vd_decision *d;
  if (!d) d = vd_decision_new();
  vd_error err;
  if (vd_decide_json(e, req, -1, d, &err)) return "refused";
  return vd_decision_action(d);
}

static void test_two_nodes(const char *dir) {
  /* two engines, as two nodes would be, two threads each, one API key */
  vd_engine *a = open_engine(dir, VD_STATE_DENY), *b = open_engine(dir, VD_STATE_DENY);
  worker w[4] = {{a, 400, 0}, {a, 400, 0}, {b, 400, 0}, {b, 400, 0}};
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, work, &w[i]);
  int allowed = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    allowed += w[i].allowed;
  }
  CHECK_MSG(allowed == 1000, "%d of 1600 calls allowed under a budget of 1000", allowed);
  vd_engine_counters ca, cb;
  vd_engine_stats(a, &ca);
  vd_engine_stats(b, &cb);
  CHECK(ca.limit_charges + cb.limit_charges == 0); /* local counters untouched */
  CHECK(ca.state_fallbacks == 0 && cb.state_fallbacks == 0);
  CHECK(ca.limit_refusals + cb.limit_refusals == 600);
  vd_engine_close(a);
  vd_engine_close(b);
}

static void test_redis_down(const char *dir) {
  vd_engine *deny = open_engine(dir, VD_STATE_DENY), *allow = open_engine(dir, VD_STATE_ALLOW),
            *local = open_engine(dir, VD_STATE_LOCAL);
  const char *req = "{\"action\":\"api\",\"key\":\"k-down\"}";
  CHECK_STR(decide(deny, req), "allow"); /* Redis is up: counted there */
  stop_redis();
  CHECK_STR(decide(deny, req), "block");  /* down: deny refuses */
  CHECK_STR(decide(allow, req), "allow"); /* allow refuses nothing */
  CHECK_STR(decide(allow, req), "allow");
  /* local counts on this node: 1000 allowed, then refused */
  int allowed = 0;
  for (int i = 0; i < 1001; i++) allowed += strcmp(decide(local, req), "allow") == 0;
  CHECK_MSG(allowed == 1000, "local fallback allowed %d", allowed);
  vd_engine_counters c;
  vd_engine_stats(deny, &c);
  CHECK(c.state_fallbacks == 1 && c.state_remote_errors == 1);
  vd_engine_stats(allow, &c);
  CHECK(c.state_fallbacks == 2);
  vd_engine_stats(local, &c);
  CHECK(c.state_fallbacks == 1001 && c.limit_charges == 1000);

  /* back up (empty: no persistence): counting returns to Redis once the
   * retry pause has passed */
  CHECK(start_redis() == 0);
  int back = 0;
  for (int i = 0; i < 300 && !back; i++) {
    vd_engine_stats(deny, &c);
    unsigned long long before = c.state_fallbacks;
    const char *act = decide(deny, req);
    vd_engine_stats(deny, &c);
    back = c.state_fallbacks == before && strcmp(act, "allow") == 0;
    if (!back) {
      struct timespec ts = {0, 20 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  CHECK(back);
  vd_engine_close(deny);
  vd_engine_close(allow);
  vd_engine_close(local);
}

/* Redis alive but not answering (stopped with SIGSTOP): the command misses
 * its deadline and the declared fallback answers, counted. */
static void test_redis_slow(const char *dir) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  o.state_url = url;
  o.state_timeout_ms = 100;
  o.state_on_error = VD_STATE_DENY;
  vd_engine *e = NULL;
  vd_error err;
  if (vd_engine_open(dir, &o, &e, &err)) {
    fprintf(stderr, "%s\n", err.message);
    exit(2);
  }
  const char *req = "{\"action\":\"api\",\"key\":\"k-slow\"}";
  CHECK_STR(decide(e, req), "allow");
  kill(redis_pid, SIGSTOP);
  CHECK_STR(decide(e, req), "block"); /* late: deny */
  kill(redis_pid, SIGCONT);
  vd_engine_counters c;
  vd_engine_stats(e, &c);
  CHECK(c.state_remote_errors == 1 && c.state_fallbacks == 1);
  vd_engine_close(e);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

int main(void) {
  if (system("command -v redis-server >/dev/null 2>&1") != 0) {
    printf("redis-server not found (scripts/deps --test installs it): skipped\n");
    printf("0 passed, 0 failed\n");
    return 0;
  }
  test_tmpdir(tmpdir, sizeof tmpdir, "redis");
  redis_port = free_port();
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", redis_port);
  if (redis_port <= 0 || start_redis() != 0) {
    fprintf(stderr, "could not start redis-server on port %d\n", redis_port);
    return 2;
  }
  atexit(stop_redis);
  char path[320];
  snprintf(path, sizeof path, "%s/api.yaml", tmpdir);
  FILE *f = fopen(path, "w");
  fputs(
      "strategy: api\n"
      "limits:\n"
      "  hourly: {key: request.key, window: 1h, budget: 1000, action: block}\n"
      "default: allow\n",
      f);
  fclose(f);

  test_edges_and_model();
  test_two_nodes(tmpdir);
  test_redis_slow(tmpdir);
  test_redis_down(tmpdir);
  stop_redis();
  nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  TEST_END();
}
