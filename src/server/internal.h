/* internal.h — what the parts of the server share: the server, its workers
 * (one libuv loop and thread each), connections, per-worker metrics and the
 * structured log. Only src/server/ includes it. */
#ifndef VD_SERVER_INTERNAL_H
#define VD_SERVER_INTERNAL_H

#include <llhttp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "core/json.h"
#include "server/server.h"

/* ---- metrics.c: counters written by one worker, read by any scrape ----
 * Each worker owns one; only it writes, so increments need no lock; a scrape
 * reads every worker's set with relaxed atomic loads and sums them. */
#define METRICS_MAX_SERIES 512
#define METRICS_BUCKETS 14

typedef struct metrics_series {
  char *point, *action; /* malloc'd, immutable once published */
  const char *source;   /* a static string from the engine */
  uint64_t hash;
  _Atomic uint64_t count;
} metrics_series;

typedef struct metrics {
  metrics_series series[METRICS_MAX_SERIES];
  _Atomic uint32_t nseries;  /* entries [0, nseries) are published */
  _Atomic uint64_t overflow; /* decisions not counted by series: table full */
  _Atomic uint64_t latency_buckets[METRICS_BUCKETS]; /* cumulative at render */
  _Atomic uint64_t latency_count;
  _Atomic uint64_t latency_sum_ns;
  _Atomic uint64_t status[6]; /* responses by class: [1..5]xx */
  _Atomic uint64_t refused;   /* decide requests refused (4xx) */
} metrics;

void metrics_init(metrics *m);
void metrics_free(metrics *m);
void metrics_count_decision(metrics *m, const char *point, const char *action, const char *source);
void metrics_observe(metrics *m, int status, uint64_t ns);
void metrics_count_refused(metrics *m);

/* ---- the server ---- */
typedef struct server server;
typedef struct worker worker;
typedef struct conn conn;

struct worker {
  server *srv;
  int index;
  uv_thread_t thread;
  uv_loop_t loop;
  uv_tcp_t listener;
  int fd;           /* the bound socket until the loop adopts it */
  uv_async_t wake;  /* the main thread asks the loop to drain and stop */
  uv_timer_t sweep; /* timeouts */
  int stopping;
  conn *conns; /* doubly linked, every open connection */
  llhttp_settings_t settings;
  metrics m;
  char readbuf[64 * 1024];
};

struct server {
  const server_opts *opts;
  vd_engine *engine;
  const char *snapshots_dir; /* NULL: snapshots off */
  _Atomic int ready;
  _Atomic unsigned nconns;
  worker *workers;
  int nworkers;
  char listen_text[80];
};

/* conn.c */
int worker_start_listening(worker *w); /* on the worker's thread */
void worker_stop(worker *w);           /* on the worker's thread: drain */
void worker_sweep(uv_timer_t *t);      /* timer callback: timeouts */
void worker_settings_init(llhttp_settings_t *s);

/* The request being answered (slices into the connection's buffers). */
typedef struct http_request {
  int method; /* llhttp_method_t */
  const char *path;
  size_t path_len;
  const char *body;
  size_t body_len;
} http_request;

/* Queues a response on c: status, an optional extra header block (lines
 * ending in \r\n) and a JSON/text body. */
void conn_respond(conn *c, int status, const char *content_type, const char *extra_headers,
                  const char *body, size_t len);
/* The same with {"error":{"code","message","path"}} as the body. */
void conn_respond_error(conn *c, int status, const char *code, const char *message,
                        const char *path);
vd_decision *conn_decision(conn *c);
worker *conn_worker(conn *c);

/* routes.c: answers one complete request (always calls conn_respond*). */
void route_request(conn *c, const http_request *r);

/* metrics.c: the Prometheus text of the whole server into b. */
void metrics_render(server *s, json_buf *b);

/* log.c: one JSON line on stderr: {"ts","level","event","message",...fields}.
 * fields, when not NULL, is a run of ,"key":value pairs already in JSON. */
void server_log(const char *level, const char *event, const char *message, const char *fields);

#endif
