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
#include "server/stats.h"

/* ---- metrics.c: counters written by one worker, read by any scrape ----
 * Each worker owns one; only it writes, so increments need no lock; a scrape
 * reads every worker's set with relaxed atomic loads and sums them. */
#define METRICS_MAX_SERIES 512
#define METRICS_BUCKETS 19     /* latency: 1 µs … 1 s (metrics.c, latency_le) */
#define METRICS_MAX_HSERIES 64 /* (strategy, source) histograms a worker keeps */
#define METRICS_HLABEL 64      /* label bytes kept inline, NUL included */

/* One labelled counter: up to three label values, malloc'd, immutable once
 * published. */
typedef struct metrics_series {
  char *label[3];
  uint64_t hash;
  _Atomic uint64_t count;
} metrics_series;

/* A table of labelled counters (decisions; rule hits; review outcomes). */
typedef struct metrics_table {
  metrics_series series[METRICS_MAX_SERIES];
  _Atomic uint32_t nseries;  /* entries [0, nseries) are published */
  _Atomic uint64_t overflow; /* counts not kept by a series: table full */
} metrics_table;

/* The one histogram: counts per bucket of a bucket table (metrics.c has the
 * tables: latency, time to review), cumulative only when rendered. */
typedef struct metrics_hist {
  _Atomic uint64_t buckets[METRICS_BUCKETS]; /* per bucket; cumulative at render */
  _Atomic uint64_t count;
  _Atomic uint64_t sum_ns;
} metrics_hist;

/* Histograms by (strategy, source) and, for decisions, the side that made
 * them. Entry 0 has empty labels: requests that are not one decision, and
 * decisions past the table or with a label longer than METRICS_HLABEL - 1.
 * Published as metrics_table's entries are. */
typedef struct metrics_hseries {
  char label[2][METRICS_HLABEL];
  uint8_t side; /* METRICS_SIDE_* (the request table: always live) */
  uint64_t hash;
  metrics_hist h;
} metrics_hseries;

typedef struct metrics_htable {
  metrics_hseries series[METRICS_MAX_HSERIES];
  _Atomic uint32_t nseries;
} metrics_htable;

/* A decision's side in a rollout (docs/rollout.md): the `side` label. */
enum { METRICS_SIDE_LIVE, METRICS_SIDE_SHADOW, METRICS_SIDE_CANARY, METRICS_SIDES };
extern const char *const metrics_side_name[METRICS_SIDES];

typedef struct metrics {
  metrics_table decisions;    /* strategy, action, source */
  metrics_table rules;        /* strategy, rule */
  metrics_htable request;     /* first byte of a request to its answer queued */
  metrics_htable decide;      /* the engine alone: parsing the request and deciding */
  int req_series;             /* the request being answered: its decision's series in
                               * request; -1 none yet, 0 not one decision */
  _Atomic uint64_t status[6]; /* responses by class: [1..5]xx */
  _Atomic uint64_t refused;   /* decide requests refused (4xx) */
  _Atomic uint64_t batches;   /* batch requests answered */
  _Atomic uint64_t authz[3];  /* authz answers: 200, 401, 403 */
  metrics_table outcomes;     /* review outcomes recorded, by the reviewer's action */
  metrics_hist review_time;   /* decision to outcome (review_le buckets) */
  uint8_t side;               /* the side that made the decision counted next
                               * (server_decide_json sets it): METRICS_SIDE_* */
} metrics;

void metrics_init(metrics *m);
void metrics_free(metrics *m);
/* Counts a decision made with d (strategy, action, source, rule, decide time). */
void metrics_count_decision(metrics *m, const vd_decision *d);
void metrics_observe(metrics *m, int status, uint64_t ns);
void metrics_count_refused(metrics *m);
/* Counts a review outcome: the reviewer's action, the time since the decision. */
void metrics_count_outcome(metrics *m, const char *action, uint64_t waited_ns);
void metrics_bump(_Atomic uint64_t *c);
/* A table or histogram with one writer outside the workers' (rollout.c). */
void metrics_table_count(metrics_table *t, const char *const l[3]);
void metrics_hist_observe(metrics_hist *h, uint64_t ns);
void metrics_render_table(json_buf *b, metrics_table *t, const char *name,
                          const char *const keys[3]);
void metrics_render_hist(json_buf *b, metrics_hist *h, const char *name, const char *help);
/* h's lines alone (no HELP/TYPE), each series labelled labels: `side="x",`
 * (ending in a comma), or "". */
void metrics_render_hist_lines(json_buf *b, metrics_hist *h, const char *name, const char *labels);

/* ---- the server ---- */
typedef struct server server;
typedef struct worker worker;
typedef struct conn conn;
typedef struct http_handler http_handler;

struct worker {
  server *srv;
  int index;
  uv_thread_t thread;
  uv_loop_t loop;
  uv_tcp_t listener;
  int fd;           /* the bound socket until the loop adopts it */
  uv_async_t wake;  /* the main thread asks the loop to drain and stop */
  uv_timer_t sweep; /* timeouts; flushes the access log */
  int stopping;
  conn *conns; /* doubly linked, every open connection */
  llhttp_settings_t settings;
  metrics m;
  stats_worker st; /* stats.c: the live figures this worker writes */
  json_buf alog;   /* access log lines not yet written */
  char readbuf[64 * 1024];
};

struct server {
  const server_opts *opts;
  const http_handler *handler; /* registered before the workers start (routes.c's) */
  vd_engine *engine;
  const char *snapshots_dir; /* NULL: snapshots off */
  char *store_dir;           /* the policy version store; NULL: none kept */
  char *admin_token;         /* NULL: admin endpoints disabled */
  size_t admin_token_len;
  int snapshot_reads; /* server_opts.snapshot_reads */
  int access_fd;      /* -1: no access log */
  _Atomic int ready;
  _Atomic unsigned nconns;
  _Atomic uint64_t reloads, reload_failures;
  worker *workers;
  int nworkers;
  char listen_text[80];
  void *mcp;                /* the MCP session table (mcp_http.c) */
  struct rollout *rollout; /* rollout.c; NULL: none configured */
  struct reviews *reviews; /* the review queue (reviews.c); NULL: snapshots off */
  stats *stats;            /* the live figures (stats.c); NULL: out of memory at start */
  int loopback;            /* listening on a loopback address */
  struct bundle_pull *pull; /* bundle_pull.c; NULL: no --bundle-url */
  uint64_t started_mono_ns; /* for /v1/status: uptime */
  int64_t started_wall_ns;
  struct ship_thread *ship; /* ship_thread.c: serve --ship; NULL: not shipping */
};

/* ship_thread.c: serve --ship, the snapshot shipper (src/ship/ship.h) on a
 * thread of its own, reading the folder's files (never the deciding path).
 * start: 0, or -1 with why (a bad cursor, a folder that cannot be read);
 * stop: asks it to finish, joins it (before the engine closes).
 * render: its metrics for /metrics (nothing when not shipping). */
int ship_thread_start(server *s, char *why, size_t whylen);
void ship_thread_stop(server *s);
void ship_thread_render(server *s, json_buf *b);
/* The shipper's state as one JSON object (shipper_status_json, ship.h:
 * target, node, shipped, batches, retries, versions, lag_records,
 * lag_seconds, failing, last_error, cursor), or null when not shipping:
 * for a status endpoint to include as it is. Safe from any thread. */
void ship_thread_status_json(server *s, json_buf *b);

/* server.c: reloads the bundle and logs it (trigger: "signal", "http",
 * "watch"). Returns 0, or the engine's error code with err filled. Safe
 * from any thread; reloads are serialised by the engine. */
int server_reload(server *s, const char *trigger, vd_error *err, char before[65], char after[65]);

/* conn.c */
int worker_start_listening(worker *w); /* on the worker's thread */
void worker_stop(worker *w);           /* on the worker's thread: drain */
void worker_sweep(uv_timer_t *t);      /* timer callback: timeouts */
void worker_settings_init(llhttp_settings_t *s);
void worker_flush_access_log(worker *w);

#define HTTP_MAX_HEADERS 100

typedef struct http_header {
  uint32_t name, name_len, value, value_len; /* offsets into the header text */
} http_header;

/* The request being answered (slices into the connection's buffers). */
typedef struct http_request {
  int method;      /* llhttp_method_t */
  const char *url; /* the request target as sent, query included */
  size_t url_len;
  const char *path; /* the target up to '?' */
  size_t path_len;
  const char *query; /* after '?', "" when none */
  size_t query_len;
  const char *body;
  size_t body_len;
  const char *htext; /* header names and values */
  const http_header *headers;
  unsigned nheaders; /* at most HTTP_MAX_HEADERS kept, in order */
} http_request;

/* The value of the first header called name (any case), or NULL. */
const char *http_header_get(const http_request *r, const char *name, size_t *len);
/* The raw (not %-decoded) value of the first query parameter called name,
 * or NULL when the query has none. */
const char *http_query_param(const http_request *r, const char *name, size_t *len);

/* Queues a response on c: status, an optional extra header block (lines
 * ending in \r\n) and a JSON/text body. */
void conn_respond(conn *c, int status, const char *content_type, const char *extra_headers,
                  const char *body, size_t len);
/* The same with {"error":{"code","message","path"}} as the body. */
void conn_respond_error(conn *c, int status, const char *code, const char *message,
                        const char *path);
vd_decision *conn_decision(conn *c);
worker *conn_worker(conn *c);
/* The peer's address as text into buf ("" when unknown). */
void conn_peer(conn *c, char *buf, size_t len);
/* What the access log says of the request being answered: the action and
 * snapshot id of its decision (copied; NULL for none). */
void conn_note_decision(conn *c, const char *action, const char *snapshot_id);

/* What answers requests, registered on the server before its workers
 * start, as H2O registers a handler on a path's configuration: conn.c hands
 * every complete request to on_request and knows nothing of routes. It must
 * answer (conn_respond*) before returning: r's slices and the connection's
 * decision are reused for the next request. data is the handler's own. */
struct http_handler {
  void (*on_request)(const http_handler *h, conn *c, const http_request *r);
  void *data;
};

/* routes.c: the endpoints of docs/server.md, the handler `verdict serve`
 * registers. */
extern const http_handler route_handler;

/* admin.c: /v1/policies, /v1/policies/reload and the bearer token. */
void route_policies(conn *c, const http_request *r);
void route_reload(conn *c, const http_request *r);
/* Loads the token (file, else $VERDICT_ADMIN_TOKEN) into s. 0, or -1 with why. */
int admin_token_load(server *s, const char *file, char *why, size_t whylen);
/* 1 when r carries `Authorization: Bearer <the admin token>`, else 0 (also
 * when admin is disabled). */
int admin_token_sent(const server *s, const http_request *r);
/* 0 when r may use an admin-only endpoint; else answers it (403 when admin
 * is disabled, 401 without the token) and returns -1. */
int admin_check(conn *c, const http_request *r);
/* Whether this request may read a recorded decision under --snapshot-reads
 * (docs/server.md); when not, why and what to do (a sentence), else NULL. */
const char *snapshot_read_refusal(conn *c, const http_request *r);
/* GET /v1/snapshots/{id}: 0 when the read may go on, else -1 with the
 * answer (401 or 403) sent. */
int snapshot_read_check(conn *c, const http_request *r);

/* batch.c: POST /v1/decide/batch. */
void route_batch(conn *c, const http_request *r);
/* authz.c: GET|POST /v1/authz. */
void route_authz(conn *c, const http_request *r);

/* mcp_http.c: POST|DELETE|GET /mcp, and its session table. */
void route_mcp(conn *c, const http_request *r);
void *mcp_http_new(void);
void mcp_http_free(void *table);

/* reviews.c: GET /v1/reviews and POST /v1/reviews/{snapshot_id}. */
void route_reviews(conn *c, const http_request *r);
void route_review_post(conn *c, const http_request *r, const char *id, size_t len);
/* A decision made on w: counted in its metrics, queued for review when its
 * action needs it. */
void worker_count_decision(worker *w, const vd_decision *d);

/* metrics.c: the Prometheus text of the whole server into b. */
void metrics_render(server *s, json_buf *b);

/* log.c: one JSON line on stderr: {"ts","level","event","message",...fields}.
 * fields, when not NULL, is a run of ,"key":value pairs already in JSON. */
void server_log(const char *level, const char *event, const char *message, const char *fields);
/* log.c: the current UTC time as 2026-11-30T00:51:13.630Z into t (>= 32). */
size_t server_log_time(char *t, size_t len);

/* rollout.c: the shadow and the canary (docs/rollout.md). */
typedef struct rollout rollout;
/* Opens the candidate the options name and starts the rollout thread; 0,
 * or -1 with why (s->rollout stays NULL when nothing is configured and no
 * admin call may set one: never, the thread starts for run-time calls). */
int rollout_start(server *s, char *why, size_t whylen);
void rollout_stop(server *s);
/* One request (JSON text) decided under the rollout, by every deciding
 * endpoint (/v1/decide, /v1/decide/batch, /v1/authz, /mcp): 0 when no
 * shadow or canary is set (the caller decides as usual); else 1, the
 * answering side (live, or the canary by the request's bucket) decided
 * into d with *rc its result (0, or a VD_E* code with err), and the other
 * side queued to decide off the answer's path. */
int rollout_decide_body(worker *w, const char *body, size_t len, vd_decision *d, vd_error *err,
                        int *rc);
/* vd_decide_json against the live engine, or under the rollout when one is
 * set (rollout_decide_body). */
int server_decide_json(worker *w, const char *body, size_t len, vd_decision *d, vd_error *err);
/* /v1/rollout and below (admin). */
void route_rollout(conn *c, const http_request *r);
/* SIGHUP: re-reads the settings file, reloads the candidate's bundle. */
void rollout_hup(server *s);
void rollout_metrics(server *s, json_buf *b);
/* For /v1/stats: the candidate's policy version into shadow and canary
 * ("" when that side is not set), the canary's share in percent, and the
 * share of compared decisions both sides agreed on since start (-1 when
 * none was compared). */
void rollout_figures(server *s, char shadow[65], char canary[65], double *percent,
                     double *agreement);

/* bundle_pull.c: --bundle-url (docs/deploy.md). bundle_pull_open checks
 * the key and the folder and finds the bundle to start on: the one kept in
 * --bundle-dir, else a first pull (which must succeed); its folder into
 * *dir (malloc'd). bundle_pull_start starts the polling thread once the
 * server runs; bundle_pull_free stops it. 0, or -1 with why. */
typedef struct bundle_pull bundle_pull;
int bundle_pull_open(const server_opts *o, bundle_pull **out, char **dir, char *why, size_t n);
int bundle_pull_start(bundle_pull *p, server *s);
void bundle_pull_stop(bundle_pull *p); /* the thread ends (no reload after) */
void bundle_pull_free(bundle_pull *p);
/* The pull's state as a JSON object into b (0), or 1 when p is NULL. */
int bundle_pull_status(bundle_pull *p, json_buf *b);
void bundle_pull_metrics(bundle_pull *p, json_buf *b);

/* status.c: GET /v1/status. */
void route_status(conn *c, const http_request *r);

/* Shared by the routes: the HTTP status of an engine error (its code is vd_err_name). */
int route_error_status(int code);

#endif
