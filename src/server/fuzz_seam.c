/* fuzz_seam.c — the HTTP request path driven with bytes (fuzz_seam.h): one
 * worker of `verdict serve` on the caller's thread, fed through a real
 * loopback connection. It reuses the worker code of conn.c unchanged
 * (worker_start_listening, worker_stop); what server_run adds around it —
 * threads, signals, warm-up, watching — is not here. */
#include "server/fuzz_seam.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/internal.h"

struct server_fuzz {
  server_opts opts;
  server srv;
  worker *w;
  struct sockaddr_in addr;
  int loop_ok; /* the worker's loop was initialised */
};

server_fuzz *server_fuzz_open(const char *policy_dir, const char *admin_token) {
  signal(SIGPIPE, SIG_IGN);
  server_fuzz *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  server_opts_init(&f->opts);
  f->opts.policy_dir = policy_dir;
  f->opts.listen = "127.0.0.1:0";
  f->opts.threads = 1;
  f->opts.engine.store_dir = "";
  server *s = &f->srv;
  s->opts = &f->opts;
  s->handler = &route_handler;
  s->access_fd = -1;
  s->loopback = 1;
  if (admin_token) {
    s->admin_token = strdup(admin_token);
    s->admin_token_len = strlen(admin_token);
  }
  vd_engine_opts eo = f->opts.engine;
  eo.max_request_bytes = f->opts.max_body;
  vd_error err;
  if (vd_engine_open(policy_dir, &eo, &s->engine, &err) != 0) {
    fprintf(stderr, "server_fuzz_open: %s\n", err.message);
    free(s->admin_token);
    free(f);
    return NULL;
  }
  s->mcp = mcp_http_new();
  f->w = calloc(1, sizeof *f->w);
  s->workers = f->w;
  s->nworkers = 1;
  worker *w = f->w;
  w->srv = s;
  metrics_init(&w->m);
  json_buf_init(&w->alog, NULL);
  worker_settings_init(&w->settings);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  socklen_t alen = sizeof f->addr;
  f->addr.sin_family = AF_INET;
  f->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, (struct sockaddr *)&f->addr, sizeof f->addr) < 0 ||
      getsockname(fd, (struct sockaddr *)&f->addr, &alen) < 0 || uv_loop_init(&w->loop) < 0) {
    fprintf(stderr, "server_fuzz_open: %s\n", strerror(errno));
    if (fd >= 0) close(fd);
    server_fuzz_close(f);
    return NULL;
  }
  f->loop_ok = 1;
  snprintf(s->listen_text, sizeof s->listen_text, "127.0.0.1:%d", ntohs(f->addr.sin_port));
  w->fd = fd;
  if (worker_start_listening(w) < 0) {
    fprintf(stderr, "server_fuzz_open: cannot listen\n");
    server_fuzz_close(f);
    return NULL;
  }
  atomic_store(&s->ready, 1);
  return f;
}

int server_fuzz_feed(server_fuzz *f, const char *data, size_t len, char *out, size_t outcap,
                     size_t *outlen) {
  if (outlen) *outlen = 0;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&f->addr, sizeof f->addr) < 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  size_t sent = 0;
  int shut = 0, done = 0, rc = 0;
  uint64_t start = uv_hrtime();
  while (!done) {
    int progress = 0;
    if (!shut && sent < len) {
      ssize_t n = send(fd, data + sent, len - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += (size_t)n;
        progress = 1;
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN) {
        shut = 1; /* the server hung up (it refused the request): stop sending */
      }
    }
    if (!shut && sent == len) {
      if (shutdown(fd, SHUT_WR) == 0) shut = 1;
    }
    if (uv_run(&f->w->loop, UV_RUN_NOWAIT)) progress = 1;
    for (;;) {
      char buf[16384];
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        if (out && outlen && *outlen < outcap) {
          size_t k = (size_t)n < outcap - *outlen ? (size_t)n : outcap - *outlen;
          memcpy(out + *outlen, buf, k);
          *outlen += k;
        }
        progress = 1;
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) done = 1;
      break;
    }
    if (done) break;
    if (uv_hrtime() - start > 10000000000ull) {
      rc = -1;
      break;
    }
    if (!progress) {
      struct pollfd p[2] = {{fd, POLLIN | (short)(!shut ? POLLOUT : 0), 0},
                            {uv_backend_fd(&f->w->loop), POLLIN, 0}};
      poll(p, 2, 5);
    }
  }
  close(fd);
  /* Let the server side finish closing (on_closed frees the connection). */
  for (int i = 0; i < 8 && f->w->conns; i++) uv_run(&f->w->loop, UV_RUN_NOWAIT);
  return rc;
}

void server_fuzz_close(server_fuzz *f) {
  if (!f) return;
  worker *w = f->w;
  if (w && f->loop_ok) {
    worker_stop(w);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    uv_loop_close(&w->loop);
  }
  if (w) {
    json_buf_free(&w->alog);
    metrics_free(&w->m);
  }
  free(w);
  if (f->srv.mcp) mcp_http_free(f->srv.mcp);
  vd_engine_close(f->srv.engine);
  free(f->srv.admin_token);
  free(f);
}
