/* conn.c — HTTP/1.1 connections of one worker loop: accept, read, parse with
 * llhttp, hand each complete request to the router, write the answers, and
 * enforce the limits (body and header size, slow and idle clients, open
 * connections). Pipelining comes for free: requests are answered
 * synchronously in the read callback, and libuv writes queued on one stream
 * in order, so answers leave in the order the requests came.
 *
 * What libuv does not give is here: keep-alive, timeouts, the drain on
 * shutdown (finish what was asked, then close). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/internal.h"

struct conn {
  uv_tcp_t tcp;
  worker *w;
  conn *prev, *next;
  llhttp_t parser;
  vd_decision *d;
  char *url;
  size_t url_len, url_cap;
  char *body;
  size_t body_len, body_cap;
  size_t header_bytes;
  int in_request;  /* a request has begun and is not complete */
  int fail_status; /* set by a callback that refused the request (413, 431) */
  int close_after; /* close once the queued writes are done */
  int closing;     /* uv_close called */
  int reading;
  unsigned pending; /* writes queued */
  uint64_t last_active_ms, request_start_ms;
  uint64_t request_start_ns;
};

typedef struct write_req {
  uv_write_t req;
  conn *c;
  size_t len;
  char data[];
} write_req;

vd_decision *conn_decision(conn *c) { return c->d; }
worker *conn_worker(conn *c) { return c->w; }

static void on_closed(uv_handle_t *h) {
  conn *c = h->data;
  worker *w = c->w;
  if (c->prev)
    c->prev->next = c->next;
  else
    w->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  atomic_fetch_sub(&w->srv->nconns, 1);
  vd_decision_free(c->d);
  free(c->url);
  free(c->body);
  free(c);
}

static void conn_close(conn *c) {
  if (c->closing) return;
  c->closing = 1;
  uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static int grow_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
  if (*len + n + 1 > *cap) {
    size_t nc = *cap ? *cap : 256;
    while (nc < *len + n + 1) nc *= 2;
    char *p = realloc(*buf, nc);
    if (!p) return -1;
    *buf = p;
    *cap = nc;
  }
  memcpy(*buf + *len, s, n);
  *len += n;
  (*buf)[*len] = '\0';
  return 0;
}

/* ---- writing ---- */
static void on_written(uv_write_t *req, int status) {
  write_req *wr = (write_req *)req;
  conn *c = wr->c;
  free(wr);
  c->pending--;
  if (status < 0) {
    conn_close(c);
    return;
  }
  c->last_active_ms = uv_now(&c->w->loop);
  if (c->pending == 0 && (c->close_after || (c->w->stopping && !c->in_request))) conn_close(c);
}

static const char *status_text(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 422:
      return "Unprocessable Content";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

void conn_respond(conn *c, int status, const char *content_type, const char *extra_headers,
                  const char *body, size_t len) {
  worker *w = c->w;
  if (status >= 100 && status < 600) {
    uint64_t ns = c->request_start_ns ? uv_hrtime() - c->request_start_ns : 0;
    metrics_observe(&w->m, status, ns);
  }
  if (c->closing) return;
  int keep = !c->close_after && !w->stopping && llhttp_should_keep_alive(&c->parser);
  if (!keep) c->close_after = 1;
  char head[512];
  int hn = snprintf(head, sizeof head,
                    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                    "Connection: %s\r\n%s\r\n",
                    status, status_text(status), content_type, len, keep ? "keep-alive" : "close",
                    extra_headers ? extra_headers : "");
  if (hn < 0 || (size_t)hn >= sizeof head) hn = 0;
  write_req *wr = malloc(sizeof *wr + (size_t)hn + len);
  if (!wr) {
    conn_close(c);
    return;
  }
  wr->c = c;
  wr->len = (size_t)hn + len;
  memcpy(wr->data, head, (size_t)hn);
  if (len) memcpy(wr->data + hn, body, len);
  uv_buf_t b = uv_buf_init(wr->data, (unsigned)wr->len);
  c->pending++;
  if (uv_write(&wr->req, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0) {
    c->pending--;
    free(wr);
    conn_close(c);
  }
}

void conn_respond_error(conn *c, int status, const char *code, const char *message,
                        const char *path) {
  json_buf b;
  json_buf_init(&b, NULL);
  json_buf_put(&b, "{\"error\":{\"code\":", 17);
  json_write_string(&b, code, strlen(code));
  json_buf_put(&b, ",\"message\":", 11);
  json_write_string(&b, message, strlen(message));
  json_buf_put(&b, ",\"path\":", 8);
  if (path && *path)
    json_write_string(&b, path, strlen(path));
  else
    json_buf_put(&b, "null", 4);
  json_buf_put(&b, "}}\n", 3);
  if (b.oom)
    conn_respond(c, 500, "application/json", NULL, "", 0);
  else
    conn_respond(c, status, "application/json", NULL, b.data, b.len);
  json_buf_free(&b);
}

/* ---- parsing ---- */
static int on_message_begin(llhttp_t *p) {
  conn *c = p->data;
  c->in_request = 1;
  c->url_len = c->body_len = c->header_bytes = 0;
  c->request_start_ms = uv_now(&c->w->loop);
  c->request_start_ns = uv_hrtime();
  return 0;
}

static int count_header(conn *c, size_t n) {
  c->header_bytes += n;
  if (c->header_bytes > c->w->srv->opts->max_header) {
    c->fail_status = 431;
    return -1;
  }
  return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n) {
  conn *c = p->data;
  if (count_header(c, n)) return -1;
  if (grow_append(&c->url, &c->url_len, &c->url_cap, at, n)) {
    c->fail_status = 500;
    return -1;
  }
  return 0;
}

static int on_header_data(llhttp_t *p, const char *at, size_t n) {
  return count_header(p->data, n);
}

static int on_body(llhttp_t *p, const char *at, size_t n) {
  conn *c = p->data;
  if (c->body_len + n > c->w->srv->opts->max_body) {
    c->fail_status = 413;
    return -1;
  }
  if (grow_append(&c->body, &c->body_len, &c->body_cap, at, n)) {
    c->fail_status = 500;
    return -1;
  }
  return 0;
}

static int on_headers_complete(llhttp_t *p) {
  conn *c = p->data;
  /* Refuse a declared oversize body before reading it. */
  if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->w->srv->opts->max_body) {
    c->fail_status = 413;
    return -1;
  }
  return 0;
}

static int on_message_complete(llhttp_t *p) {
  conn *c = p->data;
  http_request r;
  r.method = llhttp_get_method(p);
  r.path = c->url ? c->url : "";
  r.path_len = c->url_len;
  const char *q = memchr(r.path, '?', r.path_len);
  if (q) r.path_len = (size_t)(q - r.path);
  r.body = c->body ? c->body : "";
  r.body_len = c->body_len;
  route_request(c, &r);
  /* A large body's buffer is not kept for the life of the connection. */
  if (c->body_cap > 64 * 1024) {
    free(c->body);
    c->body = NULL;
    c->body_cap = 0;
  }
  c->body_len = 0;
  c->in_request = 0;
  c->request_start_ns = 0;
  c->last_active_ms = uv_now(&c->w->loop);
  /* Nothing after a "Connection: close" request (or a drain) is answered. */
  if (c->close_after || c->closing) return HPE_PAUSED;
  return 0;
}

void worker_settings_init(llhttp_settings_t *s) {
  llhttp_settings_init(s);
  s->on_message_begin = on_message_begin;
  s->on_url = on_url;
  s->on_header_field = on_header_data;
  s->on_header_value = on_header_data;
  s->on_headers_complete = on_headers_complete;
  s->on_body = on_body;
  s->on_message_complete = on_message_complete;
}

/* ---- reading ---- */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  conn *c = h->data;
  /* Reads are parsed before the next one: the worker's buffer serves all. */
  *buf = uv_buf_init(c->w->readbuf, sizeof c->w->readbuf);
}

static void stop_reading(conn *c) {
  if (c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
  }
}

static void fail_request(conn *c, llhttp_errno_t e) {
  stop_reading(c);
  c->close_after = 1;
  switch (c->fail_status) {
    case 413: {
      char msg[160];
      snprintf(msg, sizeof msg, "the request body is larger than the limit of %zu bytes",
               c->w->srv->opts->max_body);
      conn_respond_error(c, 413, "body_too_large", msg, NULL);
      break;
    }
    case 431: {
      char msg[160];
      snprintf(msg, sizeof msg,
               "the request line and headers are larger than the limit of %zu bytes",
               c->w->srv->opts->max_header);
      conn_respond_error(c, 431, "headers_too_large", msg, NULL);
      break;
    }
    case 500:
      conn_respond_error(c, 500, "memory", "out of memory reading the request", NULL);
      break;
    default: {
      char msg[256];
      snprintf(msg, sizeof msg, "malformed HTTP request: %s (%s)",
               llhttp_get_error_reason(&c->parser), llhttp_errno_name(e));
      conn_respond_error(c, 400, "bad_http", msg, NULL);
    }
  }
  if (c->pending == 0) conn_close(c);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  conn *c = s->data;
  if (n == 0) return;
  if (n < 0) {
    /* EOF or an error: a half-sent request gets no answer. */
    stop_reading(c);
    if (c->pending == 0)
      conn_close(c);
    else
      c->close_after = 1;
    return;
  }
  c->last_active_ms = uv_now(&c->w->loop);
  if (c->closing) return;
  llhttp_errno_t e = llhttp_execute(&c->parser, buf->base, (size_t)n);
  if (e == HPE_OK) return;
  if (e == HPE_PAUSED) {
    stop_reading(c);
    if (c->pending == 0) conn_close(c);
    return;
  }
  fail_request(c, e);
}

/* ---- accepting ---- */
static void on_connection(uv_stream_t *server_stream, int status) {
  worker *w = server_stream->data;
  if (status < 0 || w->stopping) return;
  conn *c = calloc(1, sizeof *c);
  if (!c) return;
  c->w = w;
  c->d = vd_decision_new();
  if (!c->d || uv_tcp_init(&w->loop, &c->tcp) < 0) {
    vd_decision_free(c->d);
    free(c);
    return;
  }
  c->tcp.data = c;
  c->next = w->conns;
  if (w->conns) w->conns->prev = c;
  w->conns = c;
  unsigned open = atomic_fetch_add(&w->srv->nconns, 1) + 1;
  llhttp_init(&c->parser, HTTP_REQUEST, &w->settings);
  c->parser.data = c;
  c->last_active_ms = uv_now(&w->loop);
  if (uv_accept(server_stream, (uv_stream_t *)&c->tcp) < 0) {
    conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  if (open > w->srv->opts->max_conns) {
    c->close_after = 1;
    char msg[128];
    snprintf(msg, sizeof msg, "too many open connections (the limit is %u); try again later",
             w->srv->opts->max_conns);
    conn_respond_error(c, 503, "too_many_connections", msg, NULL);
    return;
  }
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
    conn_close(c);
    return;
  }
  c->reading = 1;
}

int worker_start_listening(worker *w) {
  int rc = uv_tcp_init(&w->loop, &w->listener);
  if (rc < 0) return rc;
  w->listener.data = w;
  rc = uv_tcp_open(&w->listener, w->fd);
  if (rc < 0) return rc;
  return uv_listen((uv_stream_t *)&w->listener, 1024, on_connection);
}

/* Stops accepting; idle connections close now, busy ones after their answer. */
void worker_stop(worker *w) {
  w->stopping = 1;
  if (w->listener.loop && !uv_is_closing((uv_handle_t *)&w->listener))
    uv_close((uv_handle_t *)&w->listener, NULL);
  for (conn *c = w->conns; c; c = c->next) {
    c->close_after = 1;
    if (!c->in_request && c->pending == 0) conn_close(c);
  }
}

void worker_sweep(uv_timer_t *t) {
  worker *w = t->data;
  uint64_t now = uv_now(&w->loop);
  const server_opts *o = w->srv->opts;
  conn *next;
  for (conn *c = w->conns; c; c = next) {
    next = c->next;
    if (c->closing) continue;
    if (c->in_request && now - c->request_start_ms > o->request_timeout_ms) {
      stop_reading(c);
      c->close_after = 1;
      char msg[128];
      snprintf(msg, sizeof msg, "the request was not complete within %u ms", o->request_timeout_ms);
      conn_respond_error(c, 408, "request_timeout", msg, NULL);
      c->in_request = 0;
      if (c->pending == 0) conn_close(c);
    } else if (!c->in_request && c->pending == 0 && now - c->last_active_ms > o->idle_timeout_ms) {
      conn_close(c);
    }
  }
  /* Draining: stop once every connection is gone. */
  if (w->stopping && !w->conns) {
    uv_timer_stop(&w->sweep);
    uv_close((uv_handle_t *)&w->sweep, NULL);
    uv_close((uv_handle_t *)&w->wake, NULL);
  }
}
