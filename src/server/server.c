/* server.c — the life of `verdict serve`: open the engine, bind one
 * SO_REUSEPORT socket per worker (so the kernel spreads connections over the
 * loops), start the worker threads, warm up, report ready; then wait for
 * signals on the main thread's own loop: SIGHUP reloads the bundle, SIGTERM
 * and SIGINT drain the workers (stop accepting, answer what was asked,
 * close), close the engine (which flushes the snapshots) and return 0.
 *
 * libuv 1.44 (Debian 12) has no UV_TCP_REUSEPORT, so the sockets are made
 * here and handed to each loop with uv_tcp_open. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "engine/service.h"
#include "server/internal.h"
#include "server/reviews.h"
#include "snapshot/reviewlog.h"

void server_opts_init(server_opts *o) {
  memset(o, 0, sizeof *o);
  o->listen = "127.0.0.1:8181";
  o->threads = 2;
  o->max_body = 1u << 20;
  o->max_header = 16u << 10;
  o->idle_timeout_ms = 30000;
  o->request_timeout_ms = 10000;
  o->max_conns = 1024;
  o->max_batch = 1000;
  o->watch_debounce_ms = 300;
  o->bundle_poll_ms = 30000;
  o->authz_redact = VD_AUTHZ_REDACT_DEFAULT;
  o->authz_redact_query = VD_AUTHZ_REDACT_QUERY_DEFAULT;
  rollout_opts_init(&o->rollout);
}

/* "HOST:PORT" or "[V6]:PORT" into addr. */
static int parse_listen(const char *s, struct sockaddr_storage *addr, char *why, size_t whylen) {
  char host[64];
  const char *colon;
  const char *h = s;
  size_t hn;
  if (*s == '[') {
    const char *end = strchr(s, ']');
    if (!end || end[1] != ':') goto bad;
    h = s + 1;
    hn = (size_t)(end - h);
    colon = end + 1;
  } else {
    colon = strrchr(s, ':');
    if (!colon) goto bad;
    hn = (size_t)(colon - s);
  }
  if (hn == 0 || hn >= sizeof host) goto bad;
  memcpy(host, h, hn);
  host[hn] = '\0';
  char *endp;
  long port = strtol(colon + 1, &endp, 10);
  if (!colon[1] || *endp || port < 0 || port > 65535) goto bad;
  memset(addr, 0, sizeof *addr);
  if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)addr) == 0) return 0;
  if (uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)addr) == 0) return 0;
bad:
  snprintf(why, whylen, "--listen %s: want HOST:PORT with a numeric address, like 127.0.0.1:8181",
           s);
  return -1;
}

static int bind_socket(struct sockaddr_storage *addr, char *why, size_t whylen) {
  int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) goto fail;
  int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
    goto fail;
  socklen_t alen =
      addr->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  if (bind(fd, (struct sockaddr *)addr, alen) < 0) goto fail;
  /* Port 0: every later socket takes the port the first one got. */
  if (getsockname(fd, (struct sockaddr *)addr, &alen) < 0) goto fail;
  return fd;
fail:
  snprintf(why, whylen, "cannot listen: %s", strerror(errno));
  if (fd >= 0) close(fd);
  return -1;
}

static void on_wake(uv_async_t *a) { worker_stop(a->data); }

static void worker_main(void *arg) {
  worker *w = arg;
  uv_run(&w->loop, UV_RUN_DEFAULT);
}

static int worker_init(server *s, worker *w, int index, int fd) {
  w->srv = s;
  w->index = index;
  w->fd = fd;
  metrics_init(&w->m);
  json_buf_init(&w->alog, NULL);
  worker_settings_init(&w->settings);
  int rc = uv_loop_init(&w->loop);
  if (rc < 0) return rc;
  uv_async_init(&w->loop, &w->wake, on_wake);
  w->wake.data = w;
  uv_timer_init(&w->loop, &w->sweep);
  w->sweep.data = w;
  uv_timer_start(&w->sweep, worker_sweep, 200, 200);
  return worker_start_listening(w);
}

typedef struct main_ctx {
  server *srv;
  uv_signal_t term, intr, hup;
  uv_fs_event_t watch, watch_models; /* the bundle folder; its models/ folder */
  uv_timer_t debounce;
  int watching, watching_models;
  int stopping;
  uv_timer_t disk; /* once a second: the snapshot log's write errors; stats_tick */
  unsigned long long disk_errors, disk_written; /* as of the last look */
  int disk_failing;
} main_ctx;

int server_reload(server *s, const char *trigger, vd_error *err, char before[65], char after[65]) {
  char f[400];
  vd_engine_policy_version(s->engine, before);
  uint64_t t0 = uv_hrtime();
  int rc = vd_engine_reload(s->engine, err);
  if (rc != 0) {
    atomic_fetch_add(&s->reload_failures, 1);
    snprintf(f, sizeof f, ",\"trigger\":\"%s\",\"policy_version\":\"%s\"", trigger, before);
    server_log("error", "reload_failed", err->message, f);
    memcpy(after, before, 65);
    return rc;
  }
  atomic_fetch_add(&s->reloads, 1);
  vd_engine_policy_version(s->engine, after);
  snprintf(f, sizeof f,
           ",\"trigger\":\"%s\",\"changed\":%s,\"policy_version\":\"%s\",\"previous_version\":"
           "\"%s\",\"ms\":%.3f",
           trigger, strcmp(before, after) ? "true" : "false", after, before,
           (double)(uv_hrtime() - t0) / 1e6);
  server_log("info", "reload", NULL, f);
  return 0;
}

/* The snapshot log retries a failing disk on its own (docs/snapshots.md);
 * this only says so in the log: one snapshot_write_failed line when write
 * errors start (with the writer's last error, e.g. "No space left on
 * device"), one snapshot_write_recovered line once a second passes with no
 * new error and records written (or none waiting). /metrics has the counts
 * meanwhile. */
static void on_disk_check(uv_timer_t *t) {
  main_ctx *m = t->data;
  stats_tick(m->srv); /* the live figures fold their ended seconds on the same beat */
  vd_engine_counters c;
  if (vd_engine_stats(m->srv->engine, &c) != 0 || !c.snapshots_on) return;
  char f[256];
  if (c.snapshot_write_errors > m->disk_errors && !m->disk_failing) {
    m->disk_failing = 1;
    snprintf(f, sizeof f, ",\"write_errors\":%llu,\"queue_depth\":%llu,\"unwritten\":%llu",
             c.snapshot_write_errors, c.snapshot_queue_depth, c.snapshot_unwritten);
    server_log("error", "snapshot_write_failed",
               c.snapshot_last_error[0] ? c.snapshot_last_error : "snapshot write failed", f);
  } else if (m->disk_failing && !c.snapshot_failing && c.snapshot_write_errors == m->disk_errors &&
             (c.snapshots_written > m->disk_written || c.snapshot_queue_depth == 0)) {
    m->disk_failing = 0;
    snprintf(f, sizeof f, ",\"write_errors\":%llu,\"queue_depth\":%llu", c.snapshot_write_errors,
             c.snapshot_queue_depth);
    server_log("info", "snapshot_write_recovered", "snapshots are written again", f);
  }
  m->disk_errors = c.snapshot_write_errors;
  m->disk_written = c.snapshots_written;
}

static void on_stop_signal(uv_signal_t *h, int signum) {
  main_ctx *m = h->data;
  if (m->stopping) return;
  m->stopping = 1;
  char f[64];
  snprintf(f, sizeof f, ",\"signal\":\"%s\"", signum == SIGTERM ? "SIGTERM" : "SIGINT");
  server_log("info", "stopping", "draining connections", f);
  for (int i = 0; i < m->srv->nworkers; i++) uv_async_send(&m->srv->workers[i].wake);
  uv_close((uv_handle_t *)&m->term, NULL);
  uv_close((uv_handle_t *)&m->intr, NULL);
  uv_close((uv_handle_t *)&m->hup, NULL);
  uv_close((uv_handle_t *)&m->disk, NULL);
  if (m->watching) {
    uv_close((uv_handle_t *)&m->watch, NULL);
    uv_close((uv_handle_t *)&m->debounce, NULL);
  }
  if (m->watching_models) uv_close((uv_handle_t *)&m->watch_models, NULL);
}

static void on_hup(uv_signal_t *h, int signum) {
  (void)signum;
  main_ctx *m = h->data;
  vd_error err;
  char before[65], after[65];
  server_reload(m->srv, "signal", &err, before, after);
  rollout_hup(m->srv);
}

/* --watch: a change in the bundle folder (re)starts the debounce timer; the
 * reload runs once the folder has been quiet that long, so an editor's
 * save (write a temporary file, rename it) or a deploy copying many files
 * costs one reload. Only names the loader reads count: *.yaml and *.yml files not
 * starting with . or _, and the models folder (editor swap files, the
 * .verdict folder, logs kept beside the bundle do not). */
static int is_bundle_file(const char *name) {
  size_t n = strlen(name);
  if (name[0] == '.' || name[0] == '_') return 0;
  if (strcmp(name, "models") == 0) return 1;
  return (n > 5 && strcmp(name + n - 5, ".yaml") == 0) ||
         (n > 4 && strcmp(name + n - 4, ".yml") == 0);
}

static void on_debounce(uv_timer_t *t) {
  main_ctx *m = t->data;
  if (m->stopping) return;
  vd_error err;
  char before[65], after[65];
  server_reload(m->srv, "watch", &err, before, after);
}

static void on_fs_event(uv_fs_event_t *h, const char *name, int events, int status) {
  (void)events;
  main_ctx *m = h->data;
  if (status < 0 || m->stopping) return;
  if (name && !is_bundle_file(name)) return;
  uv_timer_start(&m->debounce, on_debounce, m->srv->opts->watch_debounce_ms, 0);
}

/* In models/, every file counts but hidden ones (a model and its feature spec
 * are both read). */
static void on_models_event(uv_fs_event_t *h, const char *name, int events, int status) {
  (void)events;
  main_ctx *m = h->data;
  if (status < 0 || m->stopping) return;
  if (name && name[0] == '.') return;
  uv_timer_start(&m->debounce, on_debounce, m->srv->opts->watch_debounce_ms, 0);
}

static void failed(const char *event, const char *msg) { server_log("error", event, msg, NULL); }

static int run(const server_opts *o, bundle_pull *pull) {
  uint64_t t0 = uv_hrtime();
  char why[1200];
  /* A peer that hangs up mid-answer must cost an EPIPE, not the process. */
  signal(SIGPIPE, SIG_IGN);
  struct sockaddr_storage addr;
  if (parse_listen(o->listen, &addr, why, sizeof why) < 0) {
    failed("start_failed", why);
    return 1;
  }
  server srv;
  memset(&srv, 0, sizeof srv);
  srv.started_mono_ns = clock_mono_ns();
  srv.started_wall_ns = clock_wall_ns();
  srv.pull = pull;
  srv.opts = o;
  srv.handler = &route_handler;
  srv.snapshots_dir =
      o->engine.snapshots_dir && *o->engine.snapshots_dir ? o->engine.snapshots_dir : NULL;
  srv.access_fd = -1;
  if (admin_token_load(&srv, o->admin_token_file, why, sizeof why) < 0) {
    failed("start_failed", why);
    return 1;
  }
  srv.snapshot_reads = o->snapshot_reads;
  if (srv.snapshot_reads == SERVER_SNAPSHOT_READS_ADMIN && !srv.admin_token) {
    failed("start_failed",
           "--snapshot-reads admin needs the admin token: give --admin-token-file FILE or set "
           "VERDICT_ADMIN_TOKEN");
    return 1;
  }
  if (o->access_log) {
    if (strcmp(o->access_log, "-") == 0) {
      srv.access_fd = STDOUT_FILENO;
    } else {
      srv.access_fd = open(o->access_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
      if (srv.access_fd < 0) {
        snprintf(why, sizeof why, "--access-log %s: %s", o->access_log, strerror(errno));
        failed("start_failed", why);
        free(srv.admin_token);
        return 1;
      }
    }
  }
  /* the engine's own store, which GET /v1/policies lists */
  if (service_store_path(o->policy_dir, o->engine.store_dir, o->engine.snapshots_dir,
                         &srv.store_dir) != 0)
    srv.store_dir = NULL;
  vd_engine_opts eo = o->engine;
  eo.max_request_bytes = o->max_body;
  vd_error err;
  if (vd_engine_open(o->policy_dir, &eo, &srv.engine, &err) != 0) {
    failed("start_failed", err.message);
    free(srv.admin_token);
    free(srv.store_dir);
    if (srv.access_fd > STDOUT_FILENO) close(srv.access_fd);
    return 1;
  }
  /* What opening the snapshot log repaired, one warning a file (the
   * journal in the folder keeps them too: `verdict snapshots repairs`). */
  vd_snapshot_repair rep;
  for (unsigned i = 0; vd_engine_snapshot_repair(srv.engine, i, &rep) == 0; i++) {
    json_buf f;
    json_buf_init(&f, NULL);
    json_buf_put(&f, ",\"snapshots\":", 13);
    json_write_string(&f, srv.snapshots_dir ? srv.snapshots_dir : "",
                      srv.snapshots_dir ? strlen(srv.snapshots_dir) : 0);
    json_buf_put(&f, ",\"segment\":", 11);
    json_write_string(&f, rep.segment, strlen(rep.segment));
    char num[160], msg[300];
    snprintf(num, sizeof num, ",\"repair\":\"%s\",\"bytes\":%llu,\"records\":%llu", rep.kind,
             rep.bytes, rep.records);
    json_buf_put(&f, num, strlen(num));
    snprintf(msg, sizeof msg,
             strcmp(rep.kind, "cut_tail") == 0
                 ? "a torn tail was cut from a snapshot segment: %llu bytes, %llu records"
             : strcmp(rep.kind, "moved_corrupt") == 0
                 ? "a file under a segment's name was not a segment: moved aside (%llu bytes, %llu "
                   "records in it)"
             : strcmp(rep.kind, "removed_empty") == 0
                 ? "a segment without a header was removed (%llu bytes, %llu records)"
                 : "a damaged span in a snapshot segment is skipped on read (%llu bytes, %llu "
                   "records)",
             rep.bytes, rep.records);
    if (!f.oom) server_log("warn", "snapshot_repaired", msg, f.data);
    json_buf_free(&f);
  }
  if (srv.snapshots_dir) {
    /* The review queue, rebuilt from the snapshots; its outcomes' log. */
    uint64_t cut = 0;
    char rwhy[700];
    if (reviews_open(srv.snapshots_dir, 1, 1, &srv.reviews, &cut, rwhy, sizeof rwhy) < 0) {
      failed("start_failed", rwhy);
      vd_engine_close(srv.engine);
      free(srv.admin_token);
      free(srv.store_dir);
      if (srv.access_fd > STDOUT_FILENO) close(srv.access_fd);
      return 1;
    }
    if (cut) {
      char f[200];
      snprintf(f, sizeof f, ",\"segment\":\"%s\",\"repair\":\"cut_tail\",\"bytes\":%llu",
               REVIEWLOG_NAME, (unsigned long long)cut);
      server_log("warn", "snapshot_repaired",
                 "a torn tail was cut from the reviews log (an outcome being written when the "
                 "process stopped, never acknowledged)",
                 f);
    }
  }
  if (rollout_start(&srv, why, sizeof why) != 0) {
    failed("start_failed", why);
    reviews_close(srv.reviews);
    stats_free(srv.stats);
    vd_engine_close(srv.engine);
    free(srv.admin_token);
    free(srv.store_dir);
    if (srv.access_fd > STDOUT_FILENO) close(srv.access_fd);
    return 1;
  }
  if (ship_thread_start(&srv, why, sizeof why) != 0) {
    failed("start_failed", why);
    rollout_stop(&srv);
    reviews_close(srv.reviews);
    stats_free(srv.stats);
    vd_engine_close(srv.engine);
    free(srv.admin_token);
    free(srv.store_dir);
    if (srv.access_fd > STDOUT_FILENO) close(srv.access_fd);
    return 1;
  }
  int nw = o->threads > 0 ? o->threads : 1;
  srv.workers = calloc((size_t)nw, sizeof *srv.workers);
  int *fds = calloc((size_t)nw, sizeof *fds);
  int rc = 1, started = 0;
  if (!srv.workers || !fds) {
    failed("start_failed", "out of memory");
    goto out;
  }
  for (int i = 0; i < nw; i++) fds[i] = -1;
  for (int i = 0; i < nw; i++) {
    fds[i] = bind_socket(&addr, why, sizeof why);
    if (fds[i] < 0) {
      char msg[1300];
      snprintf(msg, sizeof msg, "%s: %s", o->listen, why);
      failed("start_failed", msg);
      goto out;
    }
  }
  char host[64];
  int port;
  if (addr.ss_family == AF_INET) {
    uv_ip4_name((struct sockaddr_in *)&addr, host, sizeof host);
    port = ntohs(((struct sockaddr_in *)&addr)->sin_port);
    snprintf(srv.listen_text, sizeof srv.listen_text, "%s:%d", host, port);
  } else {
    uv_ip6_name((struct sockaddr_in6 *)&addr, host, sizeof host);
    port = ntohs(((struct sockaddr_in6 *)&addr)->sin6_port);
    snprintf(srv.listen_text, sizeof srv.listen_text, "[%s]:%d", host, port);
  }
  srv.loopback = addr.ss_family == AF_INET
                     ? (ntohl(((struct sockaddr_in *)&addr)->sin_addr.s_addr) >> 24) == 127
                     : IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&addr)->sin6_addr);
  srv.mcp = mcp_http_new();
  srv.stats = stats_new(); /* NULL (out of memory): /v1/stats says so, deciding goes on */
  srv.nworkers = nw;
  for (int i = 0; i < nw; i++) {
    int wrc = worker_init(&srv, &srv.workers[i], i, fds[i]);
    fds[i] = -1; /* the loop owns it now (or it failed to: closed with the loop) */
    if (wrc < 0) {
      snprintf(why, sizeof why, "worker %d: %s", i, uv_strerror(wrc));
      failed("start_failed", why);
      srv.nworkers = i + 1;
      goto stop_workers;
    }
  }
  for (int i = 0; i < nw; i++) {
    if (uv_thread_create(&srv.workers[i].thread, worker_main, &srv.workers[i]) != 0) {
      failed("start_failed", "cannot start a worker thread");
      srv.nworkers = nw;
      goto stop_workers;
    }
    started = i + 1;
  }

  main_ctx m;
  memset(&m, 0, sizeof m);
  m.srv = &srv;
  uv_loop_t *main_loop = uv_default_loop();
  uv_signal_init(main_loop, &m.term);
  uv_signal_init(main_loop, &m.intr);
  uv_signal_init(main_loop, &m.hup);
  m.term.data = m.intr.data = m.hup.data = &m;
  uv_signal_start(&m.term, on_stop_signal, SIGTERM);
  uv_signal_start(&m.intr, on_stop_signal, SIGINT);
  uv_signal_start(&m.hup, on_hup, SIGHUP);
  uv_timer_init(main_loop, &m.disk);
  m.disk.data = &m;
  uv_timer_start(&m.disk, on_disk_check, 1000, 1000);
  if (o->watch) {
    uv_fs_event_init(main_loop, &m.watch);
    uv_timer_init(main_loop, &m.debounce);
    m.watch.data = m.debounce.data = &m;
    int wrc = uv_fs_event_start(&m.watch, on_fs_event, o->policy_dir, 0);
    if (wrc < 0) {
      snprintf(why, sizeof why, "--watch %s: %s", o->policy_dir, uv_strerror(wrc));
      failed("watch_failed", why);
      uv_close((uv_handle_t *)&m.watch, NULL);
      uv_close((uv_handle_t *)&m.debounce, NULL);
    } else {
      m.watching = 1;
      /* models/, when the bundle has one at start (not recursive: watched alone). */
      char models[4200];
      snprintf(models, sizeof models, "%s/models", o->policy_dir);
      uv_fs_event_init(main_loop, &m.watch_models);
      m.watch_models.data = &m;
      if (uv_fs_event_start(&m.watch_models, on_models_event, models, 0) == 0)
        m.watching_models = 1;
      else
        uv_close((uv_handle_t *)&m.watch_models, NULL);
    }
  }

  /* The warm-up: every strategy's inline tests (or one empty request to a
   * strategy with none) through the decision code on the live bundle,
   * recording nothing: code, allocator and regex state come in before the
   * first real request. */
  unsigned warm = 0;
  vd_engine_warm_up(srv.engine, &warm, &err);
  atomic_store(&srv.ready, 1);
  {
    char v[65], f[1024];
    vd_engine_policy_version(srv.engine, v);
    snprintf(f, sizeof f,
             ",\"listen\":\"%s\",\"threads\":%d,\"policy_version\":\"%s\",\"snapshots\":%s%s%s,"
             "\"warmup_decisions\":%u,\"ready_ms\":%.3f,\"admin\":%s,\"snapshot_reads\":\"%s\","
             "\"on_full\":\"%s\","
             "\"watch\":%s,\"access_log\":%s",
             srv.listen_text, nw, v, srv.snapshots_dir ? "\"" : "",
             srv.snapshots_dir ? srv.snapshots_dir : "null", srv.snapshots_dir ? "\"" : "", warm,
             (double)(uv_hrtime() - t0) / 1e6, srv.admin_token ? "true" : "false",
             srv.snapshot_reads == SERVER_SNAPSHOT_READS_ADMIN  ? "admin"
             : srv.snapshot_reads == SERVER_SNAPSHOT_READS_OPEN ? "open"
                                                                : "local",
             o->engine.snapshot_on_full == VD_ON_FULL_DROP ? "drop" : "block",
             m.watching ? "true" : "false", srv.access_fd >= 0 ? "true" : "false");
    server_log("info", "start", "ready", f);
    if (srv.pull && bundle_pull_start(srv.pull, &srv) != 0)
      server_log("error", "bundle_pull_failed", "cannot start the bundle polling thread", NULL);
    if (srv.snapshot_reads == SERVER_SNAPSHOT_READS_OPEN && !srv.loopback && srv.snapshots_dir) {
      char msg[300];
      snprintf(msg, sizeof msg,
               "--snapshot-reads open on %s, not a loopback address: anyone who reaches the "
               "port can read every recorded decision, requests included, by its id "
               "(docs/security.md)",
               srv.listen_text);
      server_log("warn", "snapshot_reads_open", msg, NULL);
    }
  }
  uv_run(main_loop, UV_RUN_DEFAULT);
  rc = 0;

stop_workers:
  for (int i = 0; i < srv.nworkers; i++) {
    if (i >= started) {
      /* Never ran: drain it here on this thread. */
      worker_stop(&srv.workers[i]);
      uv_run(&srv.workers[i].loop, UV_RUN_DEFAULT);
    } else {
      if (rc != 0) uv_async_send(&srv.workers[i].wake); /* a signal did it otherwise */
      uv_thread_join(&srv.workers[i].thread);
    }
  }
  for (int i = 0; i < srv.nworkers; i++) {
    worker_flush_access_log(&srv.workers[i]);
    json_buf_free(&srv.workers[i].alog);
    uv_loop_close(&srv.workers[i].loop);
    metrics_free(&srv.workers[i].m);
  }
  uv_loop_close(uv_default_loop());
out:
  if (fds)
    for (int i = 0; i < nw; i++)
      if (fds[i] >= 0) close(fds[i]);
  free(fds);
  mcp_http_free(srv.mcp); /* its sessions hold decisions of the engine */
  rollout_stop(&srv);     /* its queue drains into the live engine's log first */
  bundle_pull_stop(srv.pull); /* no reload after this */
  ship_thread_stop(&srv); /* the cursor stays at the last batch ClickHouse took */
  reviews_close(srv.reviews);
  stats_free(srv.stats);
  /* The snapshot log drains here: on a disk that refuses writes, for
   * --drain-timeout at most; what it could not write is said. */
  vd_engine_counters fin;
  vd_engine_close_stats(srv.engine, &fin);
  if (rc == 0) {
    char f[900], msg[800];
    int nf = snprintf(f, sizeof f, ",\"uptime_s\":%.3f", (double)(uv_hrtime() - t0) / 1e9);
    if (fin.snapshots_on)
      nf +=
          snprintf(f + nf, sizeof f - (size_t)nf,
                   ",\"snapshots_written\":%llu,\"snapshots_lost\":%llu,\"snapshots_refused\":%llu",
                   fin.snapshots_written, fin.snapshots_lost, fin.snapshots_refused);
    if (fin.snapshots_lost) {
      snprintf(msg, sizeof msg,
               "engine closed; %llu answered decisions' snapshots could not be written and are "
               "lost: %s",
               fin.snapshots_lost,
               fin.snapshot_last_error[0] ? fin.snapshot_last_error : "the disk refused them");
      server_log("error", "stop", msg, f);
    } else {
      server_log("info", "stop", "snapshots flushed, engine closed", f);
    }
  }
  free(srv.workers);
  free(srv.admin_token);
  free(srv.store_dir);
  if (srv.access_fd > STDOUT_FILENO) close(srv.access_fd);
  return rc;
}

int server_run(const server_opts *o) {
  if (!o->bundle_url) return run(o, NULL);
  /* --bundle-url: the bundle folder is the one kept, or the first pulled */
  char why[1200], *dir = NULL;
  bundle_pull *pull;
  if (bundle_pull_open(o, &pull, &dir, why, sizeof why) != 0) {
    failed("start_failed", why);
    return 1;
  }
  server_opts pulled = *o;
  pulled.policy_dir = dir;
  int rc = run(&pulled, pull);
  bundle_pull_free(pull);
  free(dir);
  return rc;
}
