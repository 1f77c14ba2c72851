/* routes.c — the endpoints of `verdict serve`: which path and method does
 * what, and how an engine result or error becomes an HTTP answer. Every
 * refusal carries {"error":{"code","message","path"}}. */
#include <stdio.h>
#include <string.h>

#include "core/timefmt.h"
#include "server/console.h"
#include "server/internal.h"

#define PUT_LIT(b, s) json_buf_put((b), (s), sizeof(s) - 1)

static int path_is(const http_request *r, const char *p) {
  size_t n = strlen(p);
  return r->path_len == n && memcmp(r->path, p, n) == 0;
}

static void method_not_allowed(conn *c, const http_request *r, const char *allowed) {
  char msg[300], pq[160];
  snprintf(msg, sizeof msg, "%s %s is not served; use %s", llhttp_method_name(r->method),
           json_quote_text(pq, sizeof pq, r->path, r->path_len, 64), allowed);
  conn_respond_error(c, 405, "method_not_allowed", msg, NULL);
}

int route_error_status(int code) {
  switch (code) {
    case VD_EJSON:
    case VD_EREQUEST:
    case VD_ELIMIT:
    case VD_EINVAL:
      return 400;
    case VD_ENOTFOUND:
      return 404;
    case VD_ENOCANDIDATE:
      return 422;
    case VD_ENOMEM:
    case VD_ESNAPSHOT: /* its snapshot cannot be recorded now: try again later */
      return 503;
    default:
      return 500;
  }
}

static void decide(conn *c, const http_request *r) {
  worker *w = conn_worker(c);
  vd_decision *d = conn_decision(c);
  vd_error err;
  if (server_decide_json(w, r->body, r->body_len, d, &err) != 0) { /* under a rollout too */
    metrics_count_refused(&w->m);
    stats_count_refused(&w->st);
    conn_respond_error(c, route_error_status(err.code), vd_err_name(err.code), err.message,
                       err.path);
    return;
  }
  const char *s;
  size_t n;
  if (vd_decision_render(d, 0, &s, &n) != 0) {
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory writing the decision", NULL);
    return;
  }
  worker_count_decision(w, d);
  conn_note_decision(c, vd_decision_action(d), vd_decision_snapshot_id(d));
  conn_respond(c, 200, "application/json", NULL, s, n);
}

static void snapshot(conn *c, const char *id_text, size_t len) {
  server *srv = conn_worker(c)->srv;
  /* The lookup reads the disk on this loop (a reader per lookup, which sees
   * the segments the writer made since): snapshots are a debugging path,
   * not the hot one. */
  char *payload;
  size_t n;
  vd_error err;
  int rc = vd_snapshot_read(srv->snapshots_dir, id_text, (long)len, &payload, &n, &err);
  if (rc == 0) {
    conn_respond(c, 200, "application/json", NULL, payload, n);
    vd_free(payload);
  } else if (rc == VD_EINVAL && err.path[0]) {
    conn_respond_error(c, 400, "bad_id", err.message, NULL);
  } else if (rc == VD_EINVAL) {
    conn_respond_error(c, 404, "snapshots_off",
                       "this server records no snapshots (started with --no-snapshots)", NULL);
  } else if (rc == VD_ENOTFOUND) {
    conn_respond_error(c, 404, "snapshot_not_found", err.message, NULL);
  } else if (rc == VD_ENOMEM) {
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), err.message, NULL);
  } else {
    conn_respond_error(c, 500, "snapshot_log", err.message, NULL);
  }
}

/* GET /readyz: ready once warmed up, and not while the snapshot log cannot
 * be written (a balancer should send decisions elsewhere meanwhile): then
 * 503 with the disk's error, since when, and what waits unwritten. */
static void readyz(conn *c) {
  server *srv = conn_worker(c)->srv;
  if (!atomic_load(&srv->ready))
    return conn_respond_error(c, 503, "not_ready", "the warm-up has not finished yet", NULL);
  vd_engine_counters k;
  if (vd_engine_stats(srv->engine, &k) != 0 || !k.snapshot_failing)
    return conn_respond(c, 200, "application/json", NULL, "{\"status\":\"ready\"}\n", 19);
  char msg[700], since[48] = "";
  snprintf(msg, sizeof msg, "snapshots cannot be written: %s",
           k.snapshot_last_error[0] ? k.snapshot_last_error : "the snapshot log's disk fails");
  if (k.snapshot_failing_since_ns > 0)
    timefmt_format_rfc3339(k.snapshot_failing_since_ns / 1000000000,
                           (int32_t)(k.snapshot_failing_since_ns % 1000000000), since);
  json_buf b;
  json_buf_init(&b, NULL);
  PUT_LIT(&b, "{\"error\":{\"code\":\"snapshot_write_failed\",\"message\":");
  json_write_string(&b, msg, strlen(msg));
  PUT_LIT(&b, ",\"path\":null,\"since\":");
  if (since[0])
    json_write_string(&b, since, strlen(since));
  else
    PUT_LIT(&b, "null");
  char tail[160];
  int n = snprintf(tail, sizeof tail, ",\"unwritten\":%llu,\"refused\":%llu}}\n",
                   k.snapshot_unwritten, k.snapshots_refused);
  json_buf_put(&b, tail, (size_t)n);
  if (b.oom)
    conn_respond_error(c, 503, "snapshot_write_failed", msg, NULL);
  else
    conn_respond(c, 503, "application/json", NULL, b.data, b.len);
  json_buf_free(&b);
}

static void metrics_page(conn *c) {
  json_buf b;
  json_buf_init(&b, NULL);
  metrics_render(conn_worker(c)->srv, &b);
  if (b.oom)
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory writing the metrics", NULL);
  else
    conn_respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, b.data, b.len);
  json_buf_free(&b);
}

static void route_request(const http_handler *h, conn *c, const http_request *r) {
  (void)h;
  static const char prefix[] = "/v1/snapshots/", rprefix[] = "/v1/reviews/";
  int get = r->method == HTTP_GET, post = r->method == HTTP_POST;
  if (path_is(r, "/v1/decide")) {
    if (!post) return method_not_allowed(c, r, "POST");
    return decide(c, r);
  }
  if (path_is(r, "/v1/decide/batch")) {
    if (!post) return method_not_allowed(c, r, "POST");
    return route_batch(c, r);
  }
  if (path_is(r, "/v1/authz")) {
    if (!get && !post) return method_not_allowed(c, r, "GET or POST");
    return route_authz(c, r);
  }
  if (path_is(r, "/v1/policies")) {
    if (!get) return method_not_allowed(c, r, "GET");
    return route_policies(c, r);
  }
  if (path_is(r, "/v1/policies/reload")) {
    if (!post) return method_not_allowed(c, r, "POST");
    return route_reload(c, r);
  }
  if (path_is(r, "/mcp")) return route_mcp(c, r);
  if (r->path_len >= 11 && memcmp(r->path, "/v1/rollout", 11) == 0 &&
      (r->path_len == 11 || r->path[11] == '/'))
    return route_rollout(c, r);
  if (path_is(r, "/healthz")) {
    if (!get) return method_not_allowed(c, r, "GET");
    return conn_respond(c, 200, "application/json", NULL, "{\"status\":\"ok\"}\n", 16);
  }
  if (path_is(r, "/readyz")) {
    if (!get) return method_not_allowed(c, r, "GET");
    return readyz(c);
  }
  if (path_is(r, "/metrics")) {
    if (!get) return method_not_allowed(c, r, "GET");
    return metrics_page(c);
  }
  if (path_is(r, "/v1/reviews")) {
    if (!get) return method_not_allowed(c, r, "GET");
    return route_reviews(c, r);
  }
  if (r->path_len > sizeof rprefix - 1 && memcmp(r->path, rprefix, sizeof rprefix - 1) == 0) {
    if (!post) return method_not_allowed(c, r, "POST");
    return route_review_post(c, r, r->path + sizeof rprefix - 1,
                             r->path_len - (sizeof rprefix - 1));
  }
  if (path_is(r, "/v1/status")) {
    if (!get) return method_not_allowed(c, r, "GET");
    return route_status(c, r);
  }
  if (path_is(r, "/v1/stats")) {
    if (!get) return method_not_allowed(c, r, "GET");
    return route_stats(c, r);
  }
  if (path_is(r, "/v1/stats/recent")) {
    if (!get) return method_not_allowed(c, r, "GET");
    return route_stats_recent(c, r);
  }
  if (r->path_len >= 8 && memcmp(r->path, "/console", 8) == 0 &&
      (r->path_len == 8 || r->path[8] == '/')) {
    if (!get) return method_not_allowed(c, r, "GET");
    return route_console(c, r);
  }
  if (r->path_len > sizeof prefix - 1 && memcmp(r->path, prefix, sizeof prefix - 1) == 0) {
    if (!get) return method_not_allowed(c, r, "GET");
    if (snapshot_read_check(c, r) < 0) return;
    return snapshot(c, r->path + sizeof prefix - 1, r->path_len - (sizeof prefix - 1));
  }
  char msg[300], pq[160];
  snprintf(msg, sizeof msg, "no endpoint %s (see docs/server.md)",
           json_quote_text(pq, sizeof pq, r->path, r->path_len, 64));
  conn_respond_error(c, 404, "no_endpoint", msg, NULL);
}

const http_handler route_handler = {.on_request = route_request, .data = NULL};
