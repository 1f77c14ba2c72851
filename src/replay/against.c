/* against.c — a small HTTP/1.1 client for POST /v1/decide, and the walk
 * that feeds recorded requests through it (against.h).
 *
 * Written by hand rather than with a library: it needs one method, one
 * keep-alive connection and a deadline, and nothing else on the machine
 * needs an HTTP client (libcurl would be a dependency for 300 lines). It
 * handles what real servers send back: Content-Length or chunked bodies,
 * `Connection: close`, HTTP/1.0 answers, a kept-alive connection the server
 * has since closed (retried once on a fresh one). */
#include "replay/against.h"
#include "core/clock.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/json.h"
#include "expr/expr.h"
#include "verdict.h"

#define MAX_HEADER 65536
#define MAX_BODY (4u << 20)

struct against_client {
  char host[256]; /* as written in the URL, for the Host header */
  char port[8];
  char path[1024];
  int timeout_ms;
  size_t max_body; /* the largest answer body taken */
  struct addrinfo *addrs;
  int fd; /* -1: not connected */
  uint64_t connections;
  char *buf; /* response bytes */
  size_t len, cap;
  arena a; /* the parsed answer */
  char abuf[4096];
  json_buf out; /* a mapped body */
};

static int parse_url(against_client *c, const char *url, int as_given, char *err, size_t errlen) {
  if (strncasecmp(url, "https://", 8) == 0) {
    snprintf(err, errlen,
             "%s: https is not supported; give an http:// URL (a local TLS proxy such as "
             "stunnel or nginx can front an https service)",
             url);
    return -1;
  }
  if (strncasecmp(url, "http://", 7) != 0) {
    snprintf(err, errlen, "%s: want http://host[:port][/path]", url);
    return -1;
  }
  const char *p = url + 7, *host, *hend;
  if (*p == '[') {
    host = p + 1;
    hend = strchr(host, ']');
    if (!hend) {
      snprintf(err, errlen, "%s: unclosed [ in an IPv6 address", url);
      return -1;
    }
    p = hend + 1;
  } else {
    host = p;
    while (*p && *p != ':' && *p != '/' && *p != '?') p++;
    hend = p;
  }
  if (hend == host || (size_t)(hend - host) >= sizeof c->host) {
    snprintf(err, errlen, "%s: no host (or one too long)", url);
    return -1;
  }
  memcpy(c->host, host, (size_t)(hend - host));
  c->host[hend - host] = '\0';
  snprintf(c->port, sizeof c->port, "80");
  if (*p == ':') {
    p++;
    const char *ps = p;
    while (*p >= '0' && *p <= '9') p++;
    long port = p > ps && p - ps <= 5 ? strtol(ps, NULL, 10) : 0;
    if (port < 1 || port > 65535 || (*p && *p != '/' && *p != '?')) {
      snprintf(err, errlen, "%s: the port must be a number from 1 to 65535", url);
      return -1;
    }
    snprintf(c->port, sizeof c->port, "%ld", port);
  } else if (*p && *p != '/' && *p != '?') {
    snprintf(err, errlen, "%s: unexpected '%c' after the host", url, *p);
    return -1;
  }
  const char *path = *p ? p : "";
  if (strlen(path) + 12 >= sizeof c->path) {
    snprintf(err, errlen, "%s: path too long", url);
    return -1;
  }
  if (as_given)
    snprintf(c->path, sizeof c->path, "%s%s", *path == '/' ? "" : "/", path);
  else if (*path == '\0' || strcmp(path, "/") == 0)
    snprintf(c->path, sizeof c->path, "/v1/decide");
  else if (*path == '?')
    snprintf(c->path, sizeof c->path, "/v1/decide%s", path);
  else
    snprintf(c->path, sizeof c->path, "%s", path);
  for (const char *q = c->path; *q; q++)
    if ((unsigned char)*q <= ' ' || *q == 0x7f) {
      snprintf(err, errlen, "%s: the path contains a space or control character", url);
      return -1;
    }
  return 0;
}

static int client_open(const char *url, int as_given, int timeout_ms, against_client **out,
                       char *err, size_t errlen) {
  against_client *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  c->fd = -1;
  json_buf_init(&c->out, NULL);
  c->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
  c->max_body = MAX_BODY;
  arena_init(&c->a, c->abuf, sizeof c->abuf, 0);
  if (parse_url(c, url, as_given, err, errlen) < 0) {
    against_close(c);
    return -1;
  }
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(c->host, c->port, &hints, &c->addrs);
  if (rc != 0) {
    snprintf(err, errlen, "%s: cannot resolve %s: %s", url, c->host, gai_strerror(rc));
    against_close(c);
    return -1;
  }
  *out = c;
  return 0;
}

int against_open(const char *url, int timeout_ms, against_client **out, char *err, size_t errlen) {
  return client_open(url, 0, timeout_ms, out, err, errlen);
}

uint64_t against_connections(const against_client *c) { return c->connections; }

static void disconnect(against_client *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
}

void against_close(against_client *c) {
  if (!c) return;
  disconnect(c);
  if (c->addrs) freeaddrinfo(c->addrs);
  free(c->buf);
  arena_free(&c->a);
  json_buf_free(&c->out);
  free(c);
}

/* Waits for fd to be ready for ev until the deadline. 1 ready, 0 timeout,
 * -1 error. */
static int wait_fd(int fd, short ev, int64_t deadline) {
  for (;;) {
    int64_t left = (deadline - (int64_t)clock_mono_ns()) / 1000000;
    if (left <= 0) return 0;
    struct pollfd p = {.fd = fd, .events = ev};
    int r = poll(&p, 1, (int)left);
    if (r > 0) return 1;
    if (r == 0) return 0;
    if (errno != EINTR) return -1;
  }
}

static int do_connect(against_client *c, int64_t deadline, char *err, size_t errlen) {
  int last = 0;
  for (struct addrinfo *ai = c->addrs; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      c->fd = fd;
      c->connections++;
      return 0;
    }
    if (errno == EINPROGRESS) {
      int w = wait_fd(fd, POLLOUT, deadline);
      int soerr = 0;
      socklen_t sl = sizeof soerr;
      if (w == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0) {
        c->fd = fd;
        c->connections++;
        return 0;
      }
      last = w == 0 ? ETIMEDOUT : soerr ? soerr : errno;
    } else {
      last = errno;
    }
    close(fd);
  }
  snprintf(err, errlen, "cannot connect to %s:%s: %s", c->host, c->port, strerror(last));
  return -1;
}

static int send_all(int fd, const char *p, size_t n, int64_t deadline) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (wait_fd(fd, POLLOUT, deadline) != 1) return -1;
      continue;
    }
    return -1;
  }
  return 0;
}

/* Sends a then b, in one segment when they fit (sendmsg with two parts):
 * a request split over two small writes can meet the peer's delayed ACK. */
static int send_two(int fd, const char *a, size_t an, const char *b, size_t bn, int64_t deadline) {
  struct iovec iov[2] = {{(void *)a, an}, {(void *)b, bn}};
  struct msghdr m;
  memset(&m, 0, sizeof m);
  m.msg_iov = iov;
  m.msg_iovlen = 2;
  ssize_t w;
  do w = sendmsg(fd, &m, MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
  size_t sent = w > 0 ? (size_t)w : 0;
  if (sent < an) {
    if (send_all(fd, a + sent, an - sent, deadline) < 0) return -1;
    sent = an;
  }
  return send_all(fd, b + (sent - an), bn - (sent - an), deadline);
}

/* Reads more bytes into c->buf. >0 bytes read, 0 EOF, -1 error/timeout
 * (*timeout set for a timeout). */
static ssize_t read_more(against_client *c, int64_t deadline, int *timeout) {
  if (c->len + 4096 > c->cap) {
    size_t ncap = c->cap ? c->cap * 2 : 16384;
    char *nb = realloc(c->buf, ncap);
    if (!nb) return -1;
    c->buf = nb;
    c->cap = ncap;
  }
  for (;;) {
    ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
    if (r > 0) {
      /* ACK at once: a server that writes its headers and body separately
       * (Nagle on) would otherwise wait for our delayed ACK, 40 ms a request */
      int one = 1;
      setsockopt(c->fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
    }
    if (r >= 0) {
      c->len += (size_t)r;
      c->buf[c->len] = '\0';
      return r;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    int w = wait_fd(c->fd, POLLIN, deadline);
    if (w == 0) *timeout = 1;
    if (w != 1) return -1;
  }
}

typedef struct http_answer {
  int status;
  int keep_alive;
  const char *etag; /* the ETag header's value (in the client's buffer, NUL-ended), or NULL */
  const char *body;
  size_t body_len;
} http_answer;

static const char *find_crlf2(const char *s, size_t n) {
  for (size_t i = 0; i + 3 < n; i++)
    if (s[i] == '\r' && s[i + 1] == '\n' && s[i + 2] == '\r' && s[i + 3] == '\n') return s + i;
  return NULL;
}

/* A chunked body in p[0..n): returns 1 when it is complete (and then, if
 * apply, decodes it in place into p[0..*out_len)), 0 when more bytes are
 * needed, -1 when it is malformed. Nothing moves until the body is whole,
 * so the check can run again as bytes arrive. */
static int dechunk(char *p, size_t n, size_t max, size_t *out_len, int apply) {
  size_t r = 0, w = 0;
  for (;;) {
    size_t e = r;
    while (e + 1 < n && !(p[e] == '\r' && p[e + 1] == '\n')) e++;
    if (e + 1 >= n) return 0;
    size_t sz = 0, k = r;
    for (; k < e && p[k] != ';'; k++) {
      int d = p[k] >= '0' && p[k] <= '9'   ? p[k] - '0'
              : p[k] >= 'a' && p[k] <= 'f' ? p[k] - 'a' + 10
              : p[k] >= 'A' && p[k] <= 'F' ? p[k] - 'A' + 10
                                           : -1;
      if (d < 0 || sz > max) return -1;
      sz = sz * 16 + (size_t)d;
    }
    if (k == r || sz > max) return -1;
    r = e + 2;
    if (sz == 0) {
      /* trailers, then an empty line */
      for (;;) {
        size_t t = r;
        while (t + 1 < n && !(p[t] == '\r' && p[t + 1] == '\n')) t++;
        if (t + 1 >= n) return 0;
        if (t == r) {
          *out_len = w;
          return 1;
        }
        r = t + 2;
      }
    }
    if (r + sz + 2 > n) return 0;
    if (p[r + sz] != '\r' || p[r + sz + 1] != '\n') return -1;
    if (apply) memmove(p + w, p + r, sz);
    w += sz;
    r += sz + 2;
  }
}

/* One exchange on the current connection: a POST of body to path, or (body
 * NULL) a GET of path, with the extra header lines `extra` (each ending in
 * \r\n; NULL: none). 0 answer in *ans; -1 transport error (*nothing_back
 * set when nothing at all came back, which on a reused connection means the
 * server closed it meanwhile). */
static int exchange(against_client *c, const char *path, const char *extra, const char *body,
                    size_t len, int64_t deadline, http_answer *ans, int *nothing_back, char *err,
                    size_t errlen) {
  char head[4096];
  const char *br_open = strchr(c->host, ':') ? "[" : "", *br_close = strchr(c->host, ':') ? "]" : "";
  if (!extra) extra = "";
  int hn = body ? snprintf(head, sizeof head,
                           "POST %s HTTP/1.1\r\nHost: %s%s%s:%s\r\nUser-Agent: verdict/%s\r\n"
                           "Content-Type: application/json\r\nAccept: application/json\r\n%s"
                           "Content-Length: %zu\r\nConnection: keep-alive\r\n\r\n",
                           path, br_open, c->host, br_close, c->port, vd_version(), extra, len)
                : snprintf(head, sizeof head,
                           "GET %s HTTP/1.1\r\nHost: %s%s%s:%s\r\nUser-Agent: verdict/%s\r\n"
                           "%sConnection: close\r\n\r\n",
                           path, br_open, c->host, br_close, c->port, vd_version(), extra);
  if (hn < 0 || (size_t)hn >= sizeof head) {
    snprintf(err, errlen, "%s:%s: the request head is too long", c->host, c->port);
    return -1;
  }
  if (!body) body = "";
  *nothing_back = 0;
  if (send_two(c->fd, head, (size_t)hn, body, len, deadline) < 0) {
    *nothing_back = 1;
    snprintf(err, errlen, "sending to %s:%s: %s", c->host, c->port,
             errno ? strerror(errno) : "timeout");
    return -1;
  }
  c->len = 0;
  int timeout = 0;
  const char *hend;
  while (!(hend = find_crlf2(c->buf ? c->buf : "", c->len))) {
    if (c->len > MAX_HEADER) {
      snprintf(err, errlen, "%s:%s: answer headers larger than %d bytes", c->host, c->port,
               MAX_HEADER);
      return -1;
    }
    ssize_t r = read_more(c, deadline, &timeout);
    if (r <= 0) {
      *nothing_back = c->len == 0 && !timeout;
      snprintf(err, errlen, "%s:%s: %s", c->host, c->port,
               timeout  ? "no answer before the timeout"
               : r == 0 ? "connection closed before an answer"
                        : strerror(errno));
      return -1;
    }
  }
  size_t hlen = (size_t)(hend - c->buf) + 4;
  /* status line */
  int minor = 1, status = 0;
  if (sscanf(c->buf, "HTTP/1.%d %d", &minor, &status) != 2 || status < 100 || status > 999) {
    snprintf(err, errlen, "%s:%s: not an HTTP/1.x answer", c->host, c->port);
    return -1;
  }
  long long clen = -1;
  int chunked = 0, keep = minor >= 1;
  ans->etag = NULL;
  size_t etag_off = 0; /* the ETag value's offset in c->buf (0: none), which grows below */
  for (const char *l = strstr(c->buf, "\r\n") + 2; l < hend; l = strstr(l, "\r\n") + 2) {
    const char *colon = memchr(l, ':', (size_t)(hend - l));
    const char *eol = strstr(l, "\r\n");
    if (!colon || colon > eol) continue;
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    size_t nlen = (size_t)(colon - l);
    if (nlen == 14 && strncasecmp(l, "content-length", 14) == 0)
      clen = strtoll(v, NULL, 10);
    else if (nlen == 4 && strncasecmp(l, "etag", 4) == 0 && !etag_off)
      etag_off = (size_t)(v - c->buf);
    else if (nlen == 17 && strncasecmp(l, "transfer-encoding", 17) == 0)
      chunked = strncasecmp(v, "chunked", 7) == 0;
    else if (nlen == 10 && strncasecmp(l, "connection", 10) == 0) {
      if (strncasecmp(v, "close", 5) == 0) keep = 0;
      if (strncasecmp(v, "keep-alive", 10) == 0) keep = 1;
    }
  }
  size_t body_len;
  if (chunked) {
    for (;;) {
      int d = dechunk(c->buf + hlen, c->len - hlen, c->max_body, &body_len, 0);
      if (d == 1) {
        dechunk(c->buf + hlen, c->len - hlen, c->max_body, &body_len, 1);
        break;
      }
      if (d < 0) {
        snprintf(err, errlen, "%s:%s: malformed chunked body", c->host, c->port);
        return -1;
      }
      if (c->len - hlen > c->max_body || read_more(c, deadline, &timeout) <= 0) {
        snprintf(err, errlen, "%s:%s: %s", c->host, c->port,
                 timeout ? "answer not complete before the timeout" : "answer cut short");
        return -1;
      }
    }
  } else if (clen >= 0) {
    if (clen > (long long)c->max_body) {
      snprintf(err, errlen, "%s:%s: answer body of %lld bytes is too large", c->host, c->port,
               clen);
      return -1;
    }
    while (c->len - hlen < (size_t)clen) {
      if (read_more(c, deadline, &timeout) <= 0) {
        snprintf(err, errlen, "%s:%s: %s", c->host, c->port,
                 timeout ? "answer not complete before the timeout" : "answer cut short");
        return -1;
      }
    }
    body_len = (size_t)clen;
  } else {
    /* no length: the body runs to the end of the connection */
    for (;;) {
      ssize_t r = read_more(c, deadline, &timeout);
      if (r == 0) break;
      if (r < 0 || c->len - hlen > c->max_body) {
        snprintf(err, errlen, "%s:%s: answer without a length not complete", c->host, c->port);
        return -1;
      }
    }
    body_len = c->len - hlen;
    keep = 0;
  }
  if (etag_off) { /* cut at its line's end, in the header block (the body follows it) */
    char *etag_at = c->buf + etag_off, *eol = strstr(etag_at, "\r\n");
    if (eol && eol < c->buf + hlen) {
      while (eol > etag_at && (eol[-1] == ' ' || eol[-1] == '\t')) eol--;
      *eol = '\0';
      ans->etag = etag_at;
    }
  }
  ans->status = status;
  ans->keep_alive = keep;
  ans->body = c->buf + hlen;
  ans->body_len = body_len;
  return 0;
}

int against_fetch(const char *url, const char *etag, int timeout_ms, size_t max_body,
                  against_fetched *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  against_client *c;
  if (client_open(url, 1, timeout_ms, &c, err, errlen) < 0) return -1;
  c->max_body = max_body ? max_body : MAX_BODY;
  char extra[600] = "";
  if (etag && *etag) {
    if (strlen(etag) > 500 || strpbrk(etag, "\r\n")) {
      against_close(c);
      snprintf(err, errlen, "%s: the ETag to send back is malformed", url);
      return -1;
    }
    snprintf(extra, sizeof extra, "If-None-Match: %s\r\n", etag);
  }
  int64_t deadline = (int64_t)clock_mono_ns() + (int64_t)c->timeout_ms * 1000000;
  http_answer ans;
  int nothing_back, rc = -1;
  if (do_connect(c, deadline, err, errlen) == 0 &&
      exchange(c, c->path, extra, NULL, 0, deadline, &ans, &nothing_back, err, errlen) == 0) {
    out->status = ans.status;
    out->body = malloc(ans.body_len + 1);
    out->etag = ans.etag ? strdup(ans.etag) : NULL;
    if (!out->body || (ans.etag && !out->etag)) {
      against_fetched_free(out);
      snprintf(err, errlen, "out of memory");
    } else {
      memcpy(out->body, ans.body, ans.body_len);
      out->body[ans.body_len] = '\0';
      out->len = ans.body_len;
      rc = 0;
    }
  }
  against_close(c);
  return rc;
}

void against_fetched_free(against_fetched *f) {
  free(f->body);
  free(f->etag);
  memset(f, 0, sizeof *f);
}

/* ---- the answer mapping ---- */

enum {
  M_ACTION,
  M_ALLOWED,
  M_REVIEW,
  M_SOURCE,
  M_RULE,
  M_REASON,
  M_ID,
  M_POLICY_VERSION,
  M_MODEL_VERSION,
  M_CONFIDENCE,
  M_LATENCY_US,
  M_COUNT
};

static const char *const map_fields[M_COUNT] = {
    "action", "allowed",        "review",        "source",     "rule",      "reason",
    "id",     "policy_version", "model_version", "confidence", "latency_us"};

struct against_map {
  expr_program *field[M_COUNT];
  char *text[M_COUNT];
  expr_program *body;
  char *body_text;
};

#define MAP_COST_LIMIT 1000000u /* a peer's answer is not ours: evaluation is bounded */

void against_map_free(against_map *m) {
  if (!m) return;
  for (int i = 0; i < M_COUNT; i++) {
    expr_free(m->field[i]);
    free(m->text[i]);
  }
  expr_free(m->body);
  free(m->body_text);
  free(m);
}

static int map_compile(const char *what, const char *src, const char *const *names, size_t nnames,
                       expr_program **out, char *err, size_t errlen) {
  expr_opts o;
  memset(&o, 0, sizeof o);
  o.declared = names;
  o.ndeclared = nnames;
  o.simple_names = 1;
  expr_error xe;
  memset(&xe, 0, sizeof xe);
  if (expr_compile(src, strlen(src), &o, out, &xe) != 0) {
    snprintf(err, errlen, "%s: %s", what, xe.message);
    return -1;
  }
  return 0;
}

static against_map *map_get(against_map **m) {
  if (!*m) *m = calloc(1, sizeof **m);
  return *m;
}

int against_map_add(against_map **m, const char *spec, char *err, size_t errlen) {
  if (!map_get(m)) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  /* "field=EXPR" when it starts with a name and a single '=' (CEL has no
   * assignment, so an expression never does), else EXPR for the action */
  int f = M_ACTION;
  const char *expr = spec;
  size_t n = 0;
  while ((spec[n] >= 'a' && spec[n] <= 'z') || spec[n] == '_') n++;
  size_t e = n;
  while (spec[e] == ' ') e++;
  if (n && spec[e] == '=' && spec[e + 1] != '=') {
    for (f = 0; f < M_COUNT; f++)
      if (strlen(map_fields[f]) == n && memcmp(map_fields[f], spec, n) == 0) break;
    if (f == M_COUNT) {
      snprintf(err, errlen,
               "--against-map %.*s=...: no such field (want action, allowed, review, source, "
               "rule, reason, id, policy_version, model_version, confidence or latency_us)",
               (int)n, spec);
      return -1;
    }
    expr = spec + e + 1;
  }
  char what[64];
  snprintf(what, sizeof what, "--against-map %s", map_fields[f]);
  if (!*expr) {
    snprintf(err, errlen, "%s: the expression is empty", what);
    return -1;
  }
  if ((*m)->field[f]) {
    snprintf(err, errlen, "%s is given twice", what);
    return -1;
  }
  static const char *const names[] = {"response", "request"};
  if (map_compile(what, expr, names, 2, &(*m)->field[f], err, errlen) < 0) return -1;
  (*m)->text[f] = strdup(expr);
  return 0;
}

int against_map_body(against_map **m, const char *expr, char *err, size_t errlen) {
  if (!map_get(m)) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if ((*m)->body) {
    snprintf(err, errlen, "--against-body is given twice");
    return -1;
  }
  static const char *const names[] = {"request"};
  if (map_compile("--against-body", expr, names, 1, &(*m)->body, err, errlen) < 0) return -1;
  (*m)->body_text = strdup(expr);
  return 0;
}

typedef struct map_vars {
  const value *response, *request;
} map_vars;

static int map_lookup(void *user, const char *name, size_t len, value *out) {
  const map_vars *v = user;
  if (len == 8 && memcmp(name, "response", 8) == 0 && v->response) {
    *out = *v->response;
    return 0;
  }
  if (len == 7 && memcmp(name, "request", 7) == 0 && v->request) {
    *out = *v->request;
    return 0;
  }
  return -1;
}

static value map_eval(const expr_program *p, arena *a, const map_vars *vars) {
  expr_activation act = {.lookup = map_lookup, .user = (void *)vars};
  eval_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.arena = a;
  ctx.cost_limit = MAP_COST_LIMIT;
  return expr_eval(p, &act, &ctx);
}

/* The body to send for a recorded request: the request itself, or the
 * body expression's map written as JSON into *out (valid until the next
 * call on c). 0, or AGAINST_EREFUSED with err. */
static int map_body(against_client *c, const against_map *m, const char *req, size_t len,
                    const char **out, size_t *outlen, json_buf *buf, char *err, size_t errlen);

/* The answer body as a decision. 0, or AGAINST_EREFUSED with err. */
/* The value of field f: mapped when the map has it, else native (NULL:
 * absent). 0, or AGAINST_EREFUSED with err when the mapping fails. */
static int field_value(against_client *c, const against_map *m, int f, const map_vars *vars,
                       const value *native, value *out, int *have, char *err, size_t errlen) {
  *have = 0;
  if (m && m->field[f]) {
    value v = map_eval(m->field[f], &c->a, vars);
    if (v.kind == V_ERROR) {
      v = value_error_text(&c->a, v);
      snprintf(err, errlen, "--against-map %s: %.*s", map_fields[f], (int)(v.n < 300 ? v.n : 300),
               v.s);
      return AGAINST_EREFUSED;
    }
    *out = v;
    *have = 1;
    return 0;
  }
  if (native) {
    *out = *native;
    *have = 1;
  }
  return 0;
}

/* A mapped or native value that must be a string (or null/absent). */
static int want_string(against_client *c, const against_map *m, int f, const map_vars *vars,
                       const value *native, const char **out, char *err, size_t errlen) {
  value v;
  int have, rc = field_value(c, m, f, vars, native, &v, &have, err, errlen);
  *out = NULL;
  if (rc || !have || v.kind == V_NULL) return rc;
  if (v.kind != V_STRING) {
    if (m && m->field[f]) {
      snprintf(err, errlen, "--against-map %s: the expression gave a %s, want a string or null",
               map_fields[f], value_kind_name((value_kind)v.kind));
      return AGAINST_EREFUSED;
    }
    return 0; /* a native field of another type: as absent */
  }
  *out = arena_strndup(&c->a, v.s, v.n);
  return 0;
}

static int want_number(against_client *c, const against_map *m, int f, const map_vars *vars,
                       const value *native, double *out, int *have_out, char *err, size_t errlen) {
  value v;
  int have, rc = field_value(c, m, f, vars, native, &v, &have, err, errlen);
  *have_out = 0;
  if (rc || !have || v.kind == V_NULL) return rc;
  if (v.kind == V_DOUBLE)
    *out = v.d;
  else if (v.kind == V_INT)
    *out = (double)v.i;
  else if (v.kind == V_UINT)
    *out = (double)v.u;
  else if (m && m->field[f]) {
    snprintf(err, errlen, "--against-map %s: the expression gave a %s, want a number",
             map_fields[f], value_kind_name((value_kind)v.kind));
    return AGAINST_EREFUSED;
  } else {
    return 0;
  }
  *have_out = 1;
  return 0;
}

/* -1 absent, else 0 or 1. */
static int want_bool(against_client *c, const against_map *m, int f, const map_vars *vars,
                     const value *native, int *out, char *err, size_t errlen) {
  value v;
  int have, rc = field_value(c, m, f, vars, native, &v, &have, err, errlen);
  *out = -1;
  if (rc || !have || v.kind == V_NULL) return rc;
  if (v.kind == V_BOOL) {
    *out = v.b ? 1 : 0;
    return 0;
  }
  if (m && m->field[f]) {
    snprintf(err, errlen, "--against-map %s: the expression gave a %s, want a bool", map_fields[f],
             value_kind_name((value_kind)v.kind));
    return AGAINST_EREFUSED;
  }
  return 0;
}

static const value *get(const value *m, const char *k) {
  return m && m->kind == V_MAP ? value_map_get(m, k, strlen(k)) : NULL;
}

static int read_decision(against_client *c, const against_map *m, const value *request,
                         const http_answer *ans, replay_side *side, char *err, size_t errlen) {
  value v;
  json_error je;
  int parsed = json_parse(&c->a, ans->body, ans->body_len, NULL, &v, &je) == 0 && v.kind == V_MAP;
  if (ans->status != 200) {
    const value *e = parsed ? value_map_get(&v, "error", 5) : NULL;
    const value *msg = e && e->kind == V_MAP ? value_map_get(e, "message", 7) : NULL;
    if (msg && msg->kind == V_STRING)
      snprintf(err, errlen, "HTTP %d: %.*s", ans->status, (int)(msg->n < 300 ? msg->n : 300),
               msg->s);
    else
      snprintf(err, errlen, "HTTP %d: %.*s", ans->status,
               (int)(ans->body_len < 200 ? ans->body_len : 200), ans->body);
    return AGAINST_EREFUSED;
  }
  if (!parsed) {
    snprintf(err, errlen, "the answer is not a JSON object%s%s", je.message[0] ? ": " : "",
             je.message);
    return AGAINST_EREFUSED;
  }
  memset(side, 0, sizeof *side);
  map_vars vars = {&v, request};
  const value *act = value_map_get(&v, "action", 6);
  if (m && m->field[M_ACTION]) {
    int rc = want_string(c, m, M_ACTION, &vars, NULL, &side->action, err, errlen);
    if (rc) return rc;
  } else if (!act || (act->kind != V_STRING && act->kind != V_NULL)) {
    snprintf(err, errlen,
             "the answer has no \"action\" (a string, or null); for another engine's format, "
             "map it with --against-map");
    return AGAINST_EREFUSED;
  } else {
    side->action = act->kind == V_STRING ? arena_strndup(&c->a, act->s, act->n) : NULL;
  }
  const value *reason = get(&v, "reason");
  const value *rule = get(reason, "rule");
  if (!rule || rule->kind != V_STRING) rule = get(&v, "rule");
  const value *id = get(&v, "snapshot_id");
  if (!id || id->kind != V_STRING) id = get(&v, "decision_id"); /* OPA's, with decision logs */
  int review, have_conf, have_lat, rc;
  double lat = 0;
  if ((rc = want_bool(c, m, M_ALLOWED, &vars, get(&v, "allowed"), &side->allowed, err, errlen)) ||
      (rc = want_bool(c, m, M_REVIEW, &vars, get(&v, "review"), &review, err, errlen)) ||
      (rc = want_string(c, m, M_SOURCE, &vars, get(&v, "source"), &side->source, err, errlen)) ||
      (rc = want_string(c, m, M_RULE, &vars, rule, &side->rule, err, errlen)) ||
      (rc = want_string(c, m, M_REASON, &vars, get(reason, "message"), &side->reason, err,
                        errlen)) ||
      (rc = want_string(c, m, M_ID, &vars, id, &side->decision_id, err, errlen)) ||
      (rc = want_string(c, m, M_POLICY_VERSION, &vars, get(&v, "policy_version"),
                        &side->policy_version, err, errlen)) ||
      (rc = want_string(c, m, M_MODEL_VERSION, &vars, get(&v, "model_version"),
                        &side->model_version, err, errlen)) ||
      (rc = want_number(c, m, M_CONFIDENCE, &vars, get(&v, "confidence"), &side->confidence,
                        &have_conf, err, errlen)) ||
      (rc = want_number(c, m, M_LATENCY_US, &vars, get(&v, "latency_us"), &lat, &have_lat, err,
                        errlen)))
    return rc;
  side->review = review > 0;
  if (have_lat && lat >= 0) {
    /* the service's own parse + decide time: what a recorded latency is */
    side->timing = REPLAY_TIMING_INPROCESS;
    side->latency_us = lat;
  } else {
    side->timing = REPLAY_TIMING_ROUNDTRIP;
  }
  return 0;
}

static int map_body(against_client *c, const against_map *m, const char *req, size_t len,
                    const char **out, size_t *outlen, json_buf *buf, char *err, size_t errlen) {
  *out = req;
  *outlen = len;
  if (!m || !m->body) return 0;
  value rv;
  json_error je;
  if (json_parse(&c->a, req, len, NULL, &rv, &je) != 0) {
    snprintf(err, errlen, "the recorded request is not JSON: %s", je.message);
    return AGAINST_EREFUSED;
  }
  map_vars vars = {NULL, &rv};
  value v = map_eval(m->body, &c->a, &vars);
  if (v.kind == V_ERROR) {
    v = value_error_text(&c->a, v);
    snprintf(err, errlen, "--against-body: %.*s", (int)(v.n < 300 ? v.n : 300), v.s);
    return AGAINST_EREFUSED;
  }
  if (v.kind != V_MAP) {
    snprintf(err, errlen, "--against-body: the expression gave a %s, want a map (a JSON object)",
             value_kind_name((value_kind)v.kind));
    return AGAINST_EREFUSED;
  }
  buf->len = 0;
  if (json_write(buf, &v, 0) != 0 || buf->oom) {
    snprintf(err, errlen, "--against-body: the value cannot be written as JSON");
    return AGAINST_EREFUSED;
  }
  *out = buf->data;
  *outlen = buf->len;
  return 0;
}

int against_decide(against_client *c, const against_map *map, const char *body, size_t len,
                   replay_side *side, double *rtt_us, char *err, size_t errlen) {
  arena_reset(&c->a);
  /* the recorded request, for the mapping's `request` and the body */
  value request = {.kind = V_NULL};
  int need_request = 0;
  for (int i = 0; map && i < M_COUNT; i++)
    if (map->field[i]) need_request = 1;
  if (need_request) {
    json_error je;
    if (json_parse(&c->a, body, len, NULL, &request, &je) != 0) request.kind = V_NULL;
  }
  if (map && map->body) {
    int rc = map_body(c, map, body, len, &body, &len, &c->out, err, errlen);
    if (rc) return rc;
  }
  int64_t t0 = (int64_t)clock_mono_ns(), deadline = t0 + (int64_t)c->timeout_ms * 1000000;
  for (int attempt = 0; attempt < 2; attempt++) {
    int reused = c->fd >= 0;
    if (!reused && do_connect(c, deadline, err, errlen) < 0) return AGAINST_ETRANSPORT;
    http_answer ans;
    int nothing_back = 0;
    if (exchange(c, c->path, NULL, body, len, deadline, &ans, &nothing_back, err, errlen) < 0) {
      disconnect(c);
      if (reused && nothing_back) continue; /* a stale keep-alive connection: once more */
      return AGAINST_ETRANSPORT;
    }
    *rtt_us = (double)((int64_t)clock_mono_ns() - t0) / 1000.0;
    if (!ans.keep_alive) disconnect(c);
    int rc = read_decision(c, map, &request, &ans, side, err, errlen);
    side->rtt_us = *rtt_us;
    if (side->timing == REPLAY_TIMING_ROUNDTRIP) side->latency_us = *rtt_us;
    return rc;
  }
  return AGAINST_ETRANSPORT;
}

int against_post(against_client *c, const char *path, const char *extra, const char *body,
                 size_t len, int *status, const char **resp, size_t *resp_len, char *err,
                 size_t errlen) {
  int64_t deadline = (int64_t)clock_mono_ns() + (int64_t)c->timeout_ms * 1000000;
  for (int attempt = 0; attempt < 2; attempt++) {
    int reused = c->fd >= 0;
    if (!reused && do_connect(c, deadline, err, errlen) < 0) return AGAINST_ETRANSPORT;
    http_answer ans;
    int nothing_back = 0;
    if (exchange(c, path, extra ? extra : "", body, len, deadline, &ans, &nothing_back, err,
                 errlen) < 0) {
      disconnect(c);
      if (reused && nothing_back) continue;
      return AGAINST_ETRANSPORT;
    }
    if (!ans.keep_alive) disconnect(c);
    *status = ans.status;
    *resp = ans.body;
    *resp_len = ans.body_len;
    return 0;
  }
  return AGAINST_ETRANSPORT;
}

/* ---- the walk ---- */

typedef struct against_walk {
  against_client *client;
  const against_map *map;
  replay_cb cb;
  void *user;
  replay_stats *stats;
  int fails; /* transport failures in a row */
  int stopped_by_user;
  char err[640];
} against_walk;

static int str_eq(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return strcmp(a, b) == 0;
}

static int on_item(void *user, const replay_item *it) {
  against_walk *w = user;
  replay_item out = *it;
  char msg[512];
  double rtt = 0;
  replay_side remote;
  memset(&remote, 0, sizeof remote);
  int rc;
  if (!it->request_json || !it->request_len) {
    /* nothing to send: the snapshot's request could not be read back */
    snprintf(msg, sizeof msg, "%s",
             it->error_message && *it->error_message ? it->error_message
                                                     : "the snapshot holds no request to send");
    rc = AGAINST_EREFUSED;
  } else {
    rc = against_decide(w->client, w->map, it->request_json, it->request_len, &remote, &rtt, msg,
                        sizeof msg);
  }
  if (rc == AGAINST_ETRANSPORT) {
    if (++w->fails >= AGAINST_MAX_FAILS) {
      snprintf(w->err, sizeof w->err, "%d requests in a row got no answer; the last: %s", w->fails,
               msg);
      return 1;
    }
  } else {
    w->fails = 0;
  }
  out.cpu_ns = 0; /* a remote service's CPU time is not ours to measure */
  memset(&out.replayed, 0, sizeof out.replayed);
  w->stats->seen++;
  if (!it->complete) w->stats->incomplete++;
  if (rc != 0) {
    out.error = VD_EINVAL;
    out.error_message = msg;
    out.same = 0;
    w->stats->errors++;
  } else {
    out.replayed = remote;
    out.error = 0;
    out.error_message = NULL;
    /* an answer that does not say whether it allows is judged by its action */
    out.same = str_eq(it->recorded.action, remote.action) &&
               (remote.allowed < 0 || !it->recorded.allowed == !remote.allowed);
    w->stats->replayed++;
    if (out.same)
      w->stats->reproduced++;
    else
      w->stats->changed++;
  }
  if (w->cb && w->cb(w->user, &out)) {
    w->stopped_by_user = 1;
    return 1;
  }
  return 0;
}

int against_run(const replay_opts *opts, const char *url, const against_map *map, int timeout_ms,
                replay_cb cb, void *user, replay_stats *stats, char *err, size_t errlen) {
  replay_stats local, inner;
  if (!stats) stats = &local;
  memset(stats, 0, sizeof *stats);
  against_walk w;
  memset(&w, 0, sizeof w);
  if (against_open(url, timeout_ms, &w.client, err, errlen) < 0) return -1;
  w.map = map;
  w.cb = cb;
  w.user = user;
  w.stats = stats;
  int rc = replay_run(opts, on_item, &w, &inner, err, errlen);
  stats->passed = inner.passed; /* the log's, whatever the service answered */
  if (rc == 0 && w.err[0]) {
    snprintf(err, errlen, "%s: %s", url, w.err);
    rc = -1;
  }
  against_close(w.client);
  return rc;
}
