/* conn.c — HTTP/1.1 connections of one worker loop: accept, read, parse with
 * llhttp, hand each complete request to the server's registered handler
 * (server.handler: conn.c knows no route), write the answers, and
 * enforce the limits (body and header size, slow and idle clients, open
 * connections). Pipelining comes for free: requests are answered
 * synchronously in the read callback, and libuv writes queued on one stream
 * in order, so answers leave in the order the requests came.
 *
 * What libuv does not give is here: keep-alive, timeouts, backpressure (a
 * connection whose answers are not being read stops being read), the drain
 * on shutdown (finish what was asked, then close).
 *
 * Strictness. A proxy in front and this server must agree on where each
 * request ends, or a request can be smuggled past the proxy inside another.
 * llhttp is built in strict mode (CMakeLists.txt) with none of its lenient
 * flags set: 8.1.0 has setters for headers, chunked_length, keep_alive and
 * transfer_encoding, a version flag without one, and llhttp_init clears them
 * all. Strict mode refuses CR alone after the head and after chunk data,
 * and spaces in header names; no flag of 8.1.0 refuses obs-fold (a line
 * starting with a space or tab continues the previous header's value), a
 * bare LF ending the request line, the head or a chunked body's last chunk,
 * a version other than HTTP/1.x (RTSP/1.0, ICE/1.0, HTTP/0.9 and 2.0), a
 * target that is not a path, empty header names, a missing or doubled Host,
 * a transfer coding before `chunked`, or trailer fields. So the request head
 * is scanned once more here, in place (from the method's first byte to the
 * blank line, in the read buffer; the state carries over reads), and the end
 * of a chunked body too; the headers are checked as llhttp hands them over.
 * Anything off gets 400 and the connection closes. A whole head in one read
 * costs a memchr a line and a byte loop over the target. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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
  char *htext; /* header names and values, back to back */
  size_t htext_len, htext_cap;
  http_header hdrs[HTTP_MAX_HEADERS];
  unsigned nhdrs;
  http_header cur; /* the header being read */
  int in_field;
  const char *bad;         /* why the request is refused with 400, when we say so */
  const char *rd_end;      /* end of the bytes being parsed (the head scan's limit) */
  uint8_t scan;            /* SCAN_*: where the scan of the raw head is */
  uint8_t scan_k;          /* bytes of "HTTP/1.x\r" matched */
  char scan_last;          /* the last byte scanned (a line's CR may end a read) */
  uint8_t nhost;           /* Host headers seen */
  uint8_t last_chunk;      /* paused at the end of a chunked body */
  int have_method;         /* the request line's method has been read */
  const char *note_action; /* for the access log (copied into note_buf) */
  const char *note_snapshot;
  char note_buf[192];
  int in_request;  /* a request has begun and is not complete */
  int fail_status; /* set by a callback that refused the request (413, 431) */
  int close_after; /* close once the queued writes are done */
  int closing;     /* uv_close called */
  int reading;
  int throttled;    /* reading stopped until the client reads its answers */
  unsigned pending; /* writes queued */
  uint64_t last_active_ms, request_start_ms;
  uint64_t request_start_ns;
};

/* Reading stops while more than this many answer bytes wait to be written,
 * and starts again below the low mark. */
#define WRITE_HIGH (256 * 1024)
#define WRITE_LOW (64 * 1024)

typedef struct write_req {
  uv_write_t req;
  conn *c;
  size_t len;
  char data[];
} write_req;

vd_decision *conn_decision(conn *c) { return c->d; }
worker *conn_worker(conn *c) { return c->w; }

void conn_peer(conn *c, char *buf, size_t len) {
  struct sockaddr_storage sa;
  int n = sizeof sa;
  buf[0] = '\0';
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&sa, &n) < 0) return;
  if (sa.ss_family == AF_INET)
    uv_ip4_name((struct sockaddr_in *)&sa, buf, len);
  else if (sa.ss_family == AF_INET6)
    uv_ip6_name((struct sockaddr_in6 *)&sa, buf, len);
}

void conn_note_decision(conn *c, const char *action, const char *snapshot_id) {
  c->note_action = c->note_snapshot = NULL;
  if (!c->w->srv->opts->access_log) return;
  size_t an = action ? strlen(action) : 0, sn = snapshot_id ? strlen(snapshot_id) : 0;
  if (an + sn + 2 > sizeof c->note_buf) an = sizeof c->note_buf - sn - 2;
  if (action) {
    memcpy(c->note_buf, action, an);
    c->note_buf[an] = '\0';
    c->note_action = c->note_buf;
  }
  if (snapshot_id) {
    memcpy(c->note_buf + an + 1, snapshot_id, sn + 1);
    c->note_snapshot = c->note_buf + an + 1;
  }
}

const char *http_query_param(const http_request *r, const char *name, size_t *len) {
  size_t nn = strlen(name);
  const char *q = r->query, *end = r->query + r->query_len;
  while (q < end) {
    const char *amp = memchr(q, '&', (size_t)(end - q));
    const char *stop = amp ? amp : end;
    if ((size_t)(stop - q) >= nn + 1 && memcmp(q, name, nn) == 0 && q[nn] == '=') {
      *len = (size_t)(stop - q) - nn - 1;
      return q + nn + 1;
    }
    q = stop + 1;
  }
  return NULL;
}

const char *http_header_get(const http_request *r, const char *name, size_t *len) {
  size_t n = strlen(name);
  for (unsigned i = 0; i < r->nheaders; i++) {
    const http_header *h = &r->headers[i];
    if (h->name_len == n && strncasecmp(r->htext + h->name, name, n) == 0) {
      if (len) *len = h->value_len;
      return r->htext + h->value;
    }
  }
  return NULL;
}

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
  free(c->htext);
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

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

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
  if (c->pending == 0 && (c->close_after || (c->w->stopping && !c->in_request))) {
    conn_close(c);
    return;
  }
  if (c->throttled && c->tcp.write_queue_size < WRITE_LOW && !c->close_after) {
    c->throttled = 0;
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
      conn_close(c);
    else
      c->reading = 1;
  }
}

static const char *status_text(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 406:
      return "Not Acceptable";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
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

/* One access log line into the worker's buffer (written by the sweep timer,
 * or at once when the buffer is large). */
static void access_log(conn *c, int status, uint64_t ns) {
  worker *w = c->w;
  json_buf *b = &w->alog;
  char t[40];
  size_t tn = server_log_time(t, sizeof t);
  const char *path = c->url ? c->url : "";
  size_t pn = c->url_len;
  const char *q = memchr(path, '?', pn);
  if (q) pn = (size_t)(q - path);
  json_buf_put(b, "{\"ts\":\"", 7);
  json_buf_put(b, t, tn);
  json_buf_put(b, "\",\"method\":\"", 12);
  const char *m = c->have_method ? llhttp_method_name(llhttp_get_method(&c->parser)) : "-";
  json_buf_put(b, m, strlen(m));
  json_buf_put(b, "\",\"path\":", 9);
  json_write_string(b, path, pn);
  char num[80];
  int nn =
      snprintf(num, sizeof num, ",\"status\":%d,\"us\":%.1f,\"action\":", status, (double)ns / 1e3);
  json_buf_put(b, num, (size_t)nn);
  if (c->note_action)
    json_write_string(b, c->note_action, strlen(c->note_action));
  else
    json_buf_put(b, "null", 4);
  json_buf_put(b, ",\"snapshot\":", 12);
  if (c->note_snapshot)
    json_write_string(b, c->note_snapshot, strlen(c->note_snapshot));
  else
    json_buf_put(b, "null", 4);
  json_buf_put(b, "}\n", 2);
  c->note_action = c->note_snapshot = NULL;
  if (b->len >= 32 * 1024) worker_flush_access_log(w);
}

void worker_flush_access_log(worker *w) {
  json_buf *b = &w->alog;
  int fd = w->srv->access_fd;
  if (fd >= 0 && b->len && !b->oom) {
    size_t off = 0;
    while (off < b->len) {
      ssize_t n = write(fd, b->data + off, b->len - off);
      if (n <= 0) break; /* a full disk loses lines, not the server */
      off += (size_t)n;
    }
  }
  b->len = 0;
  b->oom = 0;
  if (b->data) b->data[0] = '\0';
}

void conn_respond(conn *c, int status, const char *content_type, const char *extra_headers,
                  const char *body, size_t len) {
  worker *w = c->w;
  if (status >= 100 && status < 600) {
    uint64_t ns = c->request_start_ns ? uv_hrtime() - c->request_start_ns : 0;
    metrics_observe(&w->m, status, ns);
    if (w->srv->access_fd >= 0) access_log(c, status, ns);
  }
  if (c->closing) return;
  int keep = !c->close_after && !w->stopping && llhttp_should_keep_alive(&c->parser);
  if (!keep) c->close_after = 1;
  /* The head is built with memcpy (a printf here costs about a tenth of a
   * whole request), on the stack unless the extra headers are long. */
  const char *text = status_text(status);
  size_t ctn = strlen(content_type), xn = extra_headers ? strlen(extra_headers) : 0;
  size_t cap = 96 + strlen(text) + ctn + xn;
  char stack_head[1024];
  char *head = cap <= sizeof stack_head ? stack_head : malloc(cap);
  if (!head) {
    conn_close(c);
    return;
  }
  char *p = head;
#define PUT(s, n) (memcpy(p, (s), (n)), p += (n))
#define PUTL(s) PUT((s), sizeof(s) - 1)
  PUTL("HTTP/1.1 ");
  *p++ = (char)('0' + status / 100 % 10);
  *p++ = (char)('0' + status / 10 % 10);
  *p++ = (char)('0' + status % 10);
  *p++ = ' ';
  PUT(text, strlen(text));
  if (status == 204) { /* no body, and so neither of these (RFC 9110) */
    len = 0;
  } else {
    PUTL("\r\nContent-Type: ");
    PUT(content_type, ctn);
    PUTL("\r\nContent-Length: ");
    char digits[24];
    int dn = 0;
    size_t v = len;
    do digits[dn++] = (char)('0' + v % 10);
    while ((v /= 10) && dn < (int)sizeof digits);
    while (dn) *p++ = digits[--dn];
  }
  if (keep)
    PUTL("\r\nConnection: keep-alive\r\n");
  else
    PUTL("\r\nConnection: close\r\n");
  if (xn) PUT(extra_headers, xn);
  PUTL("\r\n");
#undef PUT
#undef PUTL
  size_t hn = (size_t)(p - head);
  /* The body is the caller's (a decision's arena, a buffer freed on return,
   * a static string) and lives only until this call returns, while libuv
   * keeps a buffer it could not write at once until the write completes —
   * after the handler returned, and after the next pipelined request of the
   * same read has reset the decision's arena. So the answer goes to the
   * socket now when nothing waits before it (uv_try_write refuses while
   * earlier answers are queued, which keeps them in order); only what the
   * socket did not take is copied into a write request, the body with it. */
  uv_buf_t parts[2] = {uv_buf_init(head, (unsigned)hn), uv_buf_init((char *)body, (unsigned)len)};
  int wrote = uv_try_write((uv_stream_t *)&c->tcp, parts, len ? 2 : 1);
  if (wrote < 0 && wrote != UV_EAGAIN) {
    if (head != stack_head) free(head);
    conn_close(c);
    return;
  }
  size_t done = wrote > 0 ? (size_t)wrote : 0, total = hn + len;
  if (done == total) {
    if (head != stack_head) free(head);
    return;
  }
  write_req *wr = malloc(sizeof *wr + (total - done));
  if (!wr) {
    if (head != stack_head) free(head);
    conn_close(c);
    return;
  }
  char *q = wr->data;
  if (done < hn) {
    memcpy(q, head + done, hn - done);
    q += hn - done;
    if (len) memcpy(q, body, len);
  } else {
    memcpy(q, body + (done - hn), total - done);
  }
  if (head != stack_head) free(head);
  wr->c = c;
  wr->len = total - done;
  uv_buf_t b = uv_buf_init(wr->data, (unsigned)wr->len);
  c->pending++;
  if (uv_write(&wr->req, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0) {
    c->pending--;
    free(wr);
    conn_close(c);
    return;
  }
  /* Backpressure: a client that sends but does not read is not read. */
  if (c->reading && c->tcp.write_queue_size > WRITE_HIGH) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
    c->throttled = 1;
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

/* ---- the head scan ----
 * A request head is exactly: METHOD SP /target SP HTTP/1.x CRLF, then header
 * lines each ending in CRLF, none starting with SP or HT, then CRLF. A
 * chunked body ends with its last chunk's line and one CRLF (no trailer
 * fields). llhttp checks the tokens; this checks the shape. */
enum {
  SCAN_OFF,     /* not in a head */
  SCAN_PENDING, /* a message began; the scan starts at its method */
  SCAN_METHOD,
  SCAN_TARGET0, /* the target's first byte */
  SCAN_TARGET,
  SCAN_VERSION,
  SCAN_RL_LF, /* the LF of the request line */
  SCAN_LINE0, /* a header line's first byte, or the blank line's CR */
  SCAN_LINE,  /* in a header line */
  SCAN_END_LF,
  SCAN_TAIL_CR, /* after a chunked body's last chunk line */
  SCAN_TAIL_LF,
};

static int scan_fail(conn *c, const char *why) {
  c->bad = why;
  c->fail_status = 400;
  return -1;
}

/* Scans [p, end) from the state the last call left; 0, or -1 with c->bad. */
static int scan_head(conn *c, const char *p, const char *end) {
  static const char version[] = "HTTP/1.";
  const char *base = p;
  unsigned st = c->scan;
  while (p < end && st != SCAN_OFF) {
    unsigned char ch = (unsigned char)*p;
    switch (st) {
      case SCAN_METHOD:
        if (ch == ' ')
          st = SCAN_TARGET0;
        else if (ch < 0x21)
          return scan_fail(c, "the request line must be METHOD SP /path SP HTTP/1.1");
        p++;
        break;
      case SCAN_TARGET0:
        if (ch == ' ') return scan_fail(c, "the request line must have single spaces");
        if (ch != '/')
          return scan_fail(c,
                           "the request target must be a path starting with '/': "
                           "absolute-form, authority-form and '*' are not served");
        st = SCAN_TARGET;
        p++;
        break;
      case SCAN_TARGET:
        if (ch == ' ') {
          st = SCAN_VERSION;
          c->scan_k = 0;
        } else if (ch == '#') {
          return scan_fail(c, "the request target must not have a fragment ('#')");
        } else if (ch < 0x21 || ch == 0x7f) {
          return scan_fail(c,
                           "the request target has a control byte or is not followed by "
                           "SP HTTP/1.1");
        }
        p++;
        break;
      case SCAN_VERSION: {
        unsigned k = c->scan_k;
        if (k < 7 ? ch != (unsigned char)version[k] : k == 7 ? ch != '0' && ch != '1' : ch != '\r')
          return scan_fail(c, k == 0 && ch == ' '
                                  ? "the request line must have single spaces"
                                  : "the protocol must be HTTP/1.1 or HTTP/1.0, ended by CRLF");
        if (k == 8)
          st = SCAN_RL_LF;
        else
          c->scan_k = (uint8_t)(k + 1);
        p++;
        break;
      }
      case SCAN_RL_LF:
      case SCAN_END_LF:
      case SCAN_TAIL_LF:
        if (ch != '\n') return scan_fail(c, "a CR is not followed by LF");
        st = st == SCAN_RL_LF ? SCAN_LINE0 : SCAN_OFF;
        p++;
        break;
      case SCAN_LINE0:
        if (ch == '\r')
          st = SCAN_END_LF;
        else if (ch == ' ' || ch == '\t')
          return scan_fail(c,
                           "a header line starts with a space or tab (obs-fold line "
                           "folding is not accepted)");
        else if (ch == '\n')
          return scan_fail(c, "a line ends with LF alone, not CRLF");
        else
          st = SCAN_LINE;
        p++;
        break;
      case SCAN_LINE: {
        const char *q = memchr(p, '\n', (size_t)(end - p));
        if (!q) {
          p = end;
          break;
        }
        if ((q > base ? q[-1] : c->scan_last) != '\r')
          return scan_fail(c, "a line ends with LF alone, not CRLF");
        st = SCAN_LINE0;
        p = q + 1;
        break;
      }
      case SCAN_TAIL_CR:
        if (ch != '\r')
          return scan_fail(c, ch == '\n' ? "a chunked body ends with LF alone, not CRLF"
                                         : "trailer fields after a chunked body are not accepted");
        st = SCAN_TAIL_LF;
        p++;
        break;
      default: /* SCAN_PENDING: no method byte yet */
        p = end;
    }
  }
  c->scan = (uint8_t)st;
  if (end > base) c->scan_last = end[-1];
  return 0;
}

/* The common case in one pass and few branches: the whole head is in this
 * read, and well-formed (1). Anything else (0) is left to scan_head, which
 * carries its state over reads and says what is wrong. */
static int scan_whole_head(const char *p, const char *end) {
  const char *lf = memchr(p, '\n', (size_t)(end - p));
  if (!lf) return 0;
  const char *sp = memchr(p, ' ', (size_t)(lf - p));
  /* METHOD SP / ... SP HTTP/1.x CR LF */
  if (!sp || sp == p || lf - sp < 12 || sp[1] != '/') return 0;
  const char *v = lf - 10;
  for (const char *q = sp + 2; q < v; q++) {
    unsigned char ch = (unsigned char)*q;
    if (ch <= ' ' || ch == 0x7f || ch == '#') return 0;
  }
  if (memcmp(v, " HTTP/1.", 8) != 0 || (v[8] != '0' && v[8] != '1') || v[9] != '\r') return 0;
  for (p = lf + 1; p < end;) {
    if (*p == '\r') return p + 1 < end && p[1] == '\n';
    if (*p == ' ' || *p == '\t' || *p == '\n') return 0;
    lf = memchr(p + 1, '\n', (size_t)(end - p - 1));
    if (!lf || lf[-1] != '\r') return 0;
    p = lf + 1;
  }
  return 0;
}

/* RFC 9112 3.2: Host is uri-host [ ":" port ]: letters, digits and
 * "-._~!$&'()*+,;=%:[]" (one bit a byte, 0x00-0x3f and 0x40-0x7f). */
static int host_ok(const char *s, size_t n) {
  static const uint64_t lo = 0x2fff7ff200000000u, hi = 0x47fffffeaffffffeu;
  for (size_t i = 0; i < n; i++) {
    unsigned ch = (unsigned char)s[i];
    if (!(ch < 64 ? lo >> ch & 1 : ch < 128 && hi >> (ch - 64) & 1)) return 0;
  }
  return 1;
}

/* ---- parsing ---- */
static int on_message_begin(llhttp_t *p) {
  conn *c = p->data;
  c->in_request = 1;
  c->url_len = c->body_len = c->header_bytes = 0;
  c->htext_len = 0;
  c->nhdrs = 0;
  c->in_field = 0;
  c->have_method = 0;
  c->bad = NULL;
  c->scan = SCAN_PENDING;
  c->nhost = 0;
  c->note_action = c->note_snapshot = NULL;
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

/* The method's first byte is where the head starts: the scan begins there
 * and runs over what this read holds of the head (the rest, read later, is
 * scanned before llhttp sees it). */
static int on_method(llhttp_t *p, const char *at, size_t n) {
  (void)n;
  conn *c = p->data;
  if (c->scan != SCAN_PENDING) return 0;
  if (scan_whole_head(at, c->rd_end)) {
    c->scan = SCAN_OFF;
    return 0;
  }
  c->scan = SCAN_METHOD;
  return scan_head(c, at, c->rd_end);
}

static int on_url(llhttp_t *p, const char *at, size_t n) {
  conn *c = p->data;
  c->have_method = 1;
  if (count_header(c, n)) return -1;
  if (grow_append(&c->url, &c->url_len, &c->url_cap, at, n)) {
    c->fail_status = 500;
    return -1;
  }
  return 0;
}

/* Header names and values are kept (the first HTTP_MAX_HEADERS) for the
 * routes that read them: authz, admin, batch, MCP. */
static int on_header_field(llhttp_t *p, const char *at, size_t n) {
  conn *c = p->data;
  if (count_header(c, n)) return -1;
  if (!c->in_field) {
    c->in_field = 1;
    c->cur.name = (uint32_t)c->htext_len;
  }
  if (grow_append(&c->htext, &c->htext_len, &c->htext_cap, at, n)) {
    c->fail_status = 500;
    return -1;
  }
  return 0;
}

static int on_header_field_complete(llhttp_t *p) {
  conn *c = p->data;
  if (!c->in_field) return scan_fail(c, "a header line has an empty name");
  c->in_field = 0;
  c->cur.name_len = (uint32_t)c->htext_len - c->cur.name;
  if (c->cur.name_len == 0) return scan_fail(c, "a header line has an empty name");
  c->cur.value = (uint32_t)c->htext_len;
  return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n) {
  conn *c = p->data;
  if (count_header(c, n)) return -1;
  if (grow_append(&c->htext, &c->htext_len, &c->htext_cap, at, n)) {
    c->fail_status = 500;
    return -1;
  }
  return 0;
}

static int on_header_value_complete(llhttp_t *p) {
  conn *c = p->data;
  http_header *h = &c->cur;
  h->value_len = (uint32_t)c->htext_len - h->value;
  const char *name = c->htext + h->name, *v = c->htext + h->value;
  if (h->name_len == 4 && strncasecmp(name, "host", 4) == 0) {
    if (++c->nhost > 1) return scan_fail(c, "more than one Host header");
    size_t n = h->value_len;
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
    if (!host_ok(v, n)) return scan_fail(c, "the Host header is not a host[:port]");
  } else if (h->name_len == 17 && strncasecmp(name, "transfer-encoding", 17) == 0) {
    /* llhttp refuses anything after chunked, and a body without it; what is
     * before it (gzip, chunked) would be a coding this server cannot undo. */
    size_t n = h->value_len;
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
    if (n != 7 || strncasecmp(v, "chunked", 7) != 0)
      return scan_fail(c, "Transfer-Encoding must be 'chunked' alone");
  }
  if (c->nhdrs < HTTP_MAX_HEADERS) c->hdrs[c->nhdrs++] = c->cur;
  return 0;
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
  /* HTTP/1.0 may leave Host out (RFC 9112 3.2 asks it of 1.1 only), but
   * must not be chunked (6.1: the framing is faulty). */
  if (p->http_minor == 1 && c->nhost == 0)
    return scan_fail(c, "an HTTP/1.1 request must have a Host header");
  if (p->http_minor == 0 && (p->flags & F_TRANSFER_ENCODING))
    return scan_fail(c, "Transfer-Encoding is not accepted in an HTTP/1.0 request");
  /* Upgrade (and CONNECT, whose authority-form target the scan refused) is
   * ignored (RFC 9110 7.8): the request is answered as plain HTTP and the
   * connection stays HTTP/1.1; llhttp would stop parsing after it. */
  p->upgrade = 0;
  /* Refuse a declared oversize body before reading it. */
  if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->w->srv->opts->max_body) {
    c->fail_status = 413;
    return -1;
  }
  return 0;
}

/* At the last chunk the parse pauses, so that what follows its line can be
 * checked in the read buffer (on_read): a CRLF, nothing else. */
static int on_chunk_header(llhttp_t *p) {
  conn *c = p->data;
  if (p->content_length != 0) return 0;
  c->last_chunk = 1;
  return HPE_PAUSED;
}

static int on_message_complete(llhttp_t *p) {
  conn *c = p->data;
  http_request r;
  r.method = llhttp_get_method(p);
  r.url = r.path = c->url ? c->url : "";
  r.url_len = r.path_len = c->url_len;
  r.query = "";
  r.query_len = 0;
  const char *q = memchr(r.path, '?', r.path_len);
  if (q) {
    r.path_len = (size_t)(q - r.path);
    r.query = q + 1;
    r.query_len = c->url_len - r.path_len - 1;
  }
  r.body = c->body ? c->body : "";
  r.body_len = c->body_len;
  r.htext = c->htext ? c->htext : "";
  r.headers = c->hdrs;
  r.nheaders = c->nhdrs;
  const http_handler *h = c->w->srv->handler;
  h->on_request(h, c, &r);
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
  s->on_method = on_method;
  s->on_url = on_url;
  s->on_header_field = on_header_field;
  s->on_header_field_complete = on_header_field_complete;
  s->on_header_value = on_header_value;
  s->on_header_value_complete = on_header_value_complete;
  s->on_headers_complete = on_headers_complete;
  s->on_body = on_body;
  s->on_chunk_header = on_chunk_header;
  s->on_message_complete = on_message_complete;
}

/* ---- reading ---- */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  conn *c = h->data;
  /* Reads are parsed before the next one: the worker's buffer serves all. */
  *buf = uv_buf_init(c->w->readbuf, sizeof c->w->readbuf);
}

static void stop_reading(conn *c) {
  c->throttled = 0;
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
      conn_respond_error(c, 500, vd_err_name(VD_ENOMEM), "out of memory reading the request", NULL);
      break;
    default: {
      char msg[256];
      if (c->bad)
        snprintf(msg, sizeof msg, "malformed HTTP request: %s", c->bad);
      else
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
  const char *at = buf->base, *end = buf->base + n;
  c->rd_end = end;
  /* A head (or a chunked body's end) that the last read did not finish. */
  if (c->scan > SCAN_PENDING && scan_head(c, at, end) < 0) {
    fail_request(c, HPE_USER);
    return;
  }
  llhttp_errno_t e = llhttp_execute(&c->parser, at, (size_t)(end - at));
  while (e == HPE_PAUSED && c->last_chunk) {
    c->last_chunk = 0;
    at = llhttp_get_error_pos(&c->parser);
    c->scan = SCAN_TAIL_CR;
    if (scan_head(c, at, end) < 0) {
      fail_request(c, HPE_USER);
      return;
    }
    llhttp_resume(&c->parser);
    e = llhttp_execute(&c->parser, at, (size_t)(end - at));
  }
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
    if (c->pending == 0) conn_close(c); /* written at once: no write callback closes it */
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
  worker_flush_access_log(w);
  /* Draining: stop once every connection is gone. */
  if (w->stopping && !w->conns) {
    uv_timer_stop(&w->sweep);
    uv_close((uv_handle_t *)&w->sweep, NULL);
    uv_close((uv_handle_t *)&w->wake, NULL);
  }
}
