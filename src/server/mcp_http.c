/* mcp_http.c — POST /mcp: the MCP server of src/agent/mcp.h over the
 * Streamable HTTP transport, answering with JSON (never an SSE stream).
 *
 *   POST /mcp    one JSON-RPC message; a request is answered 200 with the
 *                response as application/json, a notification or response
 *                202 with no body. The answer to `initialize` carries a new
 *                Mcp-Session-Id; later requests send it back.
 *   DELETE /mcp  with Mcp-Session-Id: ends the session (204).
 *   GET /mcp     405: this server opens no server-to-client stream.
 *
 * Sessions live in one table for the whole server (a client's requests may
 * come on any connection, to any worker); calls are serialised by the
 * table's lock, which is fine for agent traffic and keeps a session's
 * vd_decision single-threaded as mcp.h asks. A request without a session id
 * (the stateless 2026-07-28 style, or a client that skips sessions) is
 * handled by a session made for it alone. An unknown session id is 404, so
 * the client starts again with `initialize`. At most MCP_MAX_SESSIONS are
 * kept; past that the least recently used one is ended.
 *
 * DNS rebinding: an Origin header must name a loopback host, and while the
 * server listens on loopback so must Host; otherwise 403.
 *
 * explain_decision answers a request that --snapshot-reads does not let
 * read (admin.c: a client elsewhere without the admin token, by default)
 * with a tool error; decide_action stays open.
 *
 * Not here: SSE (GET streams, resumability). A JSON array body is a batch
 * for the core: served in a session that negotiated 2025-03-26 (a batch of
 * only notifications is 202 like one), -32600 elsewhere. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "agent/mcp.h"
#include "server/internal.h"

#define MCP_MAX_SESSIONS 1000

typedef struct mcp_entry {
  char id[33];
  mcp_session *s;
  uint64_t last_used;
} mcp_entry;

typedef struct mcp_table {
  pthread_mutex_t lock;
  mcp_entry *e;
  size_t n;
} mcp_table;

void *mcp_http_new(void) {
  mcp_table *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->e = calloc(MCP_MAX_SESSIONS, sizeof *t->e);
  if (!t->e) {
    free(t);
    return NULL;
  }
  pthread_mutex_init(&t->lock, NULL);
  return t;
}

void mcp_http_free(void *p) {
  mcp_table *t = p;
  if (!t) return;
  for (size_t i = 0; i < t->n; i++) mcp_session_free(t->e[i].s);
  pthread_mutex_destroy(&t->lock);
  free(t->e);
  free(t);
}

static mcp_entry *find(mcp_table *t, const char *id, size_t n) {
  if (n != 32) return NULL;
  for (size_t i = 0; i < t->n; i++)
    if (memcmp(t->e[i].id, id, 32) == 0) return &t->e[i];
  return NULL;
}

static void drop(mcp_table *t, mcp_entry *e) {
  mcp_session_free(e->s);
  *e = t->e[--t->n];
}

static int new_id(char out[33]) {
  unsigned char r[16];
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) return -1;
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = hex[r[i] >> 4];
    out[2 * i + 1] = hex[r[i] & 15];
  }
  out[32] = '\0';
  return 0;
}

/* The host part of "http://host:port/..." or "host:port" is a loopback name. */
static int loopback_host(const char *v, size_t n) {
  const char *p = v, *end = v + n;
  const char *scheme = NULL;
  for (const char *q = v; q + 2 < end; q++)
    if (q[0] == ':' && q[1] == '/' && q[2] == '/') {
      scheme = q;
      break;
    }
  if (scheme) p = scheme + 3;
  size_t hn;
  if (p < end && *p == '[') {
    const char *close = memchr(p, ']', (size_t)(end - p));
    if (!close) return 0;
    hn = (size_t)(close - p) + 1;
  } else {
    hn = 0;
    while (p + hn < end && p[hn] != ':' && p[hn] != '/') hn++;
  }
  static const char *const names[] = {"localhost", "127.0.0.1", "[::1]", NULL};
  for (int i = 0; names[i]; i++)
    if (hn == strlen(names[i]) && strncasecmp(p, names[i], hn) == 0) return 1;
  return 0;
}

/* "...,application/json;q=0.9,..." lists type (or a wildcard that covers it). */
static int accepts_json(const char *v, size_t n) {
  static const char *const ok[] = {"application/json", "application/*", "*/*", NULL};
  for (int i = 0; ok[i]; i++) {
    size_t k = strlen(ok[i]);
    for (size_t j = 0; j + k <= n; j++)
      if (strncasecmp(v + j, ok[i], k) == 0) return 1;
  }
  return 0;
}

/* "method":"initialize" at the top of a JSON-RPC message. */
static int is_initialize(const http_request *r) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  value v;
  int yes = 0;
  if (json_parse(&a, r->body, r->body_len, NULL, &v, NULL) == 0 && v.kind == V_MAP)
    for (uint32_t i = 0; i < v.n; i++) {
      const value *k = &v.entries[i].key, *x = &v.entries[i].val;
      if (k->kind == V_STRING && k->n == 6 && memcmp(k->s, "method", 6) == 0)
        yes = x->kind == V_STRING && x->n == 10 && memcmp(x->s, "initialize", 10) == 0;
    }
  arena_free(&a);
  return yes;
}

/* MCP's decisions count in this worker's metrics like any other. */
static void count_decision(void *user, const vd_decision *d) { worker_count_decision(user, d); }
/* and are decided as any other: under the rollout when one is set */
static int decide(void *user, const char *json, size_t len, vd_decision *d, vd_error *err) {
  return server_decide_json(user, json, len, d, err);
}

void route_mcp(conn *c, const http_request *r) {
  worker *w = conn_worker(c);
  server *srv = w->srv;
  mcp_table *t = srv->mcp;
  size_t n;
  const char *origin = http_header_get(r, "origin", &n);
  if (origin && !loopback_host(origin, n)) {
    conn_respond_error(c, 403, "forbidden_origin",
                       "MCP over HTTP answers only pages served from this machine (Origin must "
                       "be localhost)",
                       NULL);
    return;
  }
  const char *host = http_header_get(r, "host", &n);
  if (srv->loopback && host && !loopback_host(host, n)) {
    conn_respond_error(c, 403, "forbidden_host",
                       "the Host header must be a loopback name while the server listens on "
                       "loopback (DNS rebinding protection)",
                       NULL);
    return;
  }
  if (!t) {
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory: no MCP session table", NULL);
    return;
  }
  size_t sidn = 0;
  const char *sid = http_header_get(r, "mcp-session-id", &sidn);
  if (r->method == HTTP_GET) {
    static const char body[] =
        "{\"error\":{\"code\":\"method_not_allowed\",\"message\":\"this server opens no SSE "
        "stream; POST JSON-RPC messages to /mcp\",\"path\":null}}\n";
    conn_respond(c, 405, "application/json", "Allow: POST, DELETE\r\n", body, sizeof body - 1);
    return;
  }
  if (r->method == HTTP_DELETE) {
    pthread_mutex_lock(&t->lock);
    mcp_entry *e = sid ? find(t, sid, sidn) : NULL;
    if (e) drop(t, e);
    pthread_mutex_unlock(&t->lock);
    if (!sid)
      conn_respond_error(c, 400, "no_session", "DELETE /mcp needs an Mcp-Session-Id header", NULL);
    else if (!e)
      conn_respond_error(c, 404, "unknown_session", "no such MCP session (ended or expired)", NULL);
    else
      conn_respond(c, 204, "application/json", NULL, "", 0);
    return;
  }
  if (r->method != HTTP_POST) {
    conn_respond_error(c, 405, "method_not_allowed", "use POST (or DELETE to end a session)", NULL);
    return;
  }
  const char *accept = http_header_get(r, "accept", &n);
  if (accept && !accepts_json(accept, n)) {
    conn_respond_error(c, 406, "not_acceptable",
                       "this server answers MCP requests as application/json: list it in Accept",
                       NULL);
    return;
  }
  const char *ct = http_header_get(r, "content-type", &n);
  if (ct && !(n >= 16 && strncasecmp(ct, "application/json", 16) == 0)) {
    conn_respond_error(c, 415, "unsupported_media_type",
                       "POST a JSON-RPC message as Content-Type: application/json", NULL);
    return;
  }
  const char *pv = http_header_get(r, "mcp-protocol-version", &n);
  if (pv && !mcp_version_supported(pv, n)) {
    char msg[300], vq[160];
    snprintf(msg, sizeof msg, "MCP-Protocol-Version %s is not one this server speaks",
             json_quote_text(vq, sizeof vq, pv, n, 40));
    conn_respond_error(c, 400, "protocol_version", msg, NULL);
    return;
  }

  json_buf out;
  json_buf_init(&out, NULL);
  char extra[96] = "";
  /* --snapshot-reads: explain_decision is judged on each request (a session
   * id is not a credential). */
  const char *refusal = snapshot_read_refusal(c, r);
  int rc;
  pthread_mutex_lock(&t->lock);
  uint64_t now = uv_hrtime();
  if (sid) {
    mcp_entry *e = find(t, sid, sidn);
    if (!e) {
      pthread_mutex_unlock(&t->lock);
      conn_respond_error(c, 404, "unknown_session",
                         "no such MCP session (ended or expired): send initialize again", NULL);
      json_buf_free(&out);
      return;
    }
    e->last_used = now;
    mcp_session_on_decision(e->s, count_decision, w);
    mcp_session_decide_with(e->s, decide, w);
    mcp_session_explain_refusal(e->s, refusal);
    rc = mcp_handle(e->s, r->body, r->body_len, &out);
  } else if (is_initialize(r)) {
    if (t->n == MCP_MAX_SESSIONS) { /* end the least recently used */
      size_t old = 0;
      for (size_t i = 1; i < t->n; i++)
        if (t->e[i].last_used < t->e[old].last_used) old = i;
      drop(t, &t->e[old]);
    }
    mcp_entry *e = &t->e[t->n];
    e->s = mcp_session_new(srv->engine, srv->snapshots_dir);
    if (!e->s || new_id(e->id) < 0) {
      mcp_session_free(e->s);
      pthread_mutex_unlock(&t->lock);
      conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "cannot start an MCP session", NULL);
      json_buf_free(&out);
      return;
    }
    e->last_used = now;
    t->n++;
    mcp_session_on_decision(e->s, count_decision, w);
    mcp_session_decide_with(e->s, decide, w);
    mcp_session_explain_refusal(e->s, refusal);
    rc = mcp_handle(e->s, r->body, r->body_len, &out);
    snprintf(extra, sizeof extra, "Mcp-Session-Id: %s\r\n", e->id);
  } else {
    mcp_session *s = mcp_session_new(srv->engine, srv->snapshots_dir);
    mcp_session_on_decision(s, count_decision, w);
    mcp_session_decide_with(s, decide, w);
    mcp_session_explain_refusal(s, refusal);
    rc = s ? mcp_handle(s, r->body, r->body_len, &out) : -1;
    mcp_session_free(s);
  }
  pthread_mutex_unlock(&t->lock);
  if (rc < 0 || out.oom)
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory answering the MCP request",
                       NULL);
  else if (rc == 0)
    conn_respond(c, 202, "application/json", extra[0] ? extra : NULL, "", 0);
  else
    conn_respond(c, 200, "application/json", extra[0] ? extra : NULL, out.data, out.len);
  json_buf_free(&out);
}
