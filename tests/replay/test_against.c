/* test_against.c — the HTTP client of `verdict replay --against` against a
 * scripted server in a thread of this test: answers with Content-Length,
 * chunked (with extensions and trailers, delivered a byte at a time), and
 * without a length; keep-alive reuse and the retry when a kept-alive
 * connection has gone stale; timeouts; refusals and answers that are not
 * decisions; URL parsing. The CLI side (a real HTTP server, whole logs) is
 * tests/replay/against.sh. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "replay/against.h"
#include "test.h"

/* ---- the scripted server ---- */

enum { STEP_ANSWER, STEP_DROP, STEP_SILENT };

typedef struct step {
  int kind;          /* STEP_ANSWER: send `bytes`; STEP_DROP: close without answering;
                        STEP_SILENT: answer nothing, keep the connection until told to stop */
  const char *bytes; /* the whole answer, status line included */
  int close_after;   /* close the connection after answering */
  int one_by_one;    /* send a byte at a time */
} step;

typedef struct server {
  int lfd, port;
  const step *steps;
  int nsteps, next;
  int connections;
  char last_request[4096]; /* head + body of the last request */
  volatile int stop;
  pthread_t th;
} server;

static int read_request(int fd, char *buf, size_t cap) {
  size_t n = 0;
  for (;;) {
    ssize_t r = recv(fd, buf + n, cap - n - 1, 0);
    if (r <= 0) return -1;
    n += (size_t)r;
    buf[n] = 0;
    char *end = strstr(buf, "\r\n\r\n");
    if (!end) continue;
    const char *cl = strcasestr(buf, "content-length:");
    size_t want = (size_t)(end - buf) + 4 + (cl ? (size_t)atol(cl + 15) : 0);
    if (n >= want) return 0;
  }
}

static void *serve(void *arg) {
  server *s = arg;
  while (!s->stop && s->next < s->nsteps) {
    int fd = accept(s->lfd, NULL, NULL);
    if (fd < 0) break;
    s->connections++;
    while (s->next < s->nsteps) {
      if (read_request(fd, s->last_request, sizeof s->last_request) < 0) break;
      const step *st = &s->steps[s->next++];
      if (st->kind == STEP_DROP) break;
      if (st->kind == STEP_SILENT) {
        while (!s->stop) usleep(1000);
        break;
      }
      size_t len = strlen(st->bytes);
      if (st->one_by_one)
        for (size_t i = 0; i < len; i++) {
          send(fd, st->bytes + i, 1, MSG_NOSIGNAL);
          usleep(200);
        }
      else
        send(fd, st->bytes, len, MSG_NOSIGNAL);
      if (st->close_after) break;
    }
    close(fd);
  }
  return NULL;
}

static void server_start(server *s, const step *steps, int n) {
  memset(s, 0, sizeof *s);
  s->steps = steps;
  s->nsteps = n;
  s->lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  bind(s->lfd, (struct sockaddr *)&a, sizeof a);
  listen(s->lfd, 8);
  socklen_t al = sizeof a;
  getsockname(s->lfd, (struct sockaddr *)&a, &al);
  s->port = ntohs(a.sin_port);
  pthread_create(&s->th, NULL, serve, s);
}

static void server_stop(server *s) {
  s->stop = 1;
  shutdown(s->lfd, SHUT_RDWR);
  close(s->lfd);
  pthread_join(s->th, NULL);
}

#define DECISION                                                                \
  "{\"action\":\"block\",\"allowed\":false,\"review\":true,\"confidence\":1,"   \
  "\"source\":\"rule\",\"reason\":{\"rule\":\"probe-path\",\"message\":\"m\"}," \
  "\"policy_version\":\"abc\"}"

static char *answer_cl(const char *body) {
  char *s;
  if (asprintf(&s, "HTTP/1.1 200 OK\r\ncontent-length: %zu\r\nX-Other: y\r\n\r\n%s", strlen(body),
               body) < 0)
    abort();
  return s;
}

static against_client *client(const server *s, const char *path, int timeout_ms) {
  char url[128], err[512];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
  against_client *c = NULL;
  if (against_open(url, timeout_ms, &c, err, sizeof err) != 0) fprintf(stderr, "open: %s\n", err);
  return c;
}

static const char req[] = "{\"action\":\"http_request\",\"context\":{\"path\":\"/.env\"}}";

static void test_content_length_and_keep_alive(void) {
  char *a1 = answer_cl(DECISION), *a2 = answer_cl("{\"action\":null,\"allowed\":false}");
  step steps[] = {{STEP_ANSWER, a1, 0, 0}, {STEP_ANSWER, a2, 0, 0}};
  server s;
  server_start(&s, steps, 2);
  against_client *c = client(&s, "", 2000);
  CHECK(c != NULL);
  replay_side d;
  double rtt = -1;
  char err[512] = "";
  CHECK_MSG(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == 0, "%s", err);
  CHECK_STR(d.action, "block");
  CHECK(d.allowed == 0 && d.review == 1);
  CHECK(d.confidence == 1.0);
  CHECK_STR(d.source, "rule");
  CHECK_STR(d.rule, "probe-path");
  CHECK_STR(d.policy_version, "abc");
  CHECK(rtt > 0 && rtt < 2e6);
  /* the request as sent: the default path, a Host header, the body */
  CHECK(strncmp(s.last_request, "POST /v1/decide HTTP/1.1\r\n", 26) == 0);
  char host[64];
  snprintf(host, sizeof host, "Host: 127.0.0.1:%d\r\n", s.port);
  CHECK(strstr(s.last_request, host) != NULL);
  CHECK(strstr(s.last_request, "Content-Length: 52\r\n") != NULL);
  CHECK(strstr(s.last_request, req) != NULL);
  /* the second request rides the same connection; a null action is fine */
  CHECK_MSG(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == 0, "%s", err);
  CHECK(d.action == NULL && d.rule == NULL && d.source == NULL);
  CHECK(against_connections(c) == 1);
  against_close(c);
  server_stop(&s);
  CHECK(s.connections == 1);
  free(a1);
  free(a2);
}

static void test_chunked_byte_by_byte(void) {
  const char *ans =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "10;name=value\r\n{\"action\":\"allow\r\n"
      "1c\r\n\",\"allowed\":true,\"source\":\"r\r\n"
      "6\r\nule\"}\n\r\n"
      "0\r\nX-Trailer: 1\r\n\r\n";
  step steps[] = {{STEP_ANSWER, ans, 0, 1}, {STEP_ANSWER, ans, 0, 0}};
  server s;
  server_start(&s, steps, 2);
  against_client *c = client(&s, "/custom/decide?tenant=a", 3000);
  replay_side d;
  double rtt;
  char err[512] = "";
  CHECK_MSG(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == 0, "%s", err);
  CHECK_STR(d.action, "allow");
  CHECK(d.allowed == 1);
  CHECK_STR(d.source, "rule");
  CHECK(strncmp(s.last_request, "POST /custom/decide?tenant=a HTTP/1.1", 37) == 0);
  CHECK_MSG(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == 0, "%s", err);
  CHECK_STR(d.action, "allow");
  CHECK(against_connections(c) == 1);
  against_close(c);
  server_stop(&s);
}

static void test_no_length_and_close(void) {
  const char *a1 = "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"action\":\"deny\"}";
  char *a2 = answer_cl("{\"action\":\"ask\",\"allowed\":false}");
  step steps[] = {{STEP_ANSWER, a1, 1, 0}, {STEP_ANSWER, a2, 0, 0}};
  server s;
  server_start(&s, steps, 2);
  against_client *c = client(&s, "/", 2000);
  replay_side d;
  double rtt;
  char err[512] = "";
  CHECK_MSG(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == 0, "%s", err);
  CHECK_STR(d.action, "deny");
  CHECK(d.allowed == -1); /* the answer does not say */
  /* HTTP/1.0 without keep-alive: the next request opens a new connection */
  CHECK_MSG(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == 0, "%s", err);
  CHECK_STR(d.action, "ask");
  CHECK(against_connections(c) == 2);
  against_close(c);
  server_stop(&s);
  free(a2);
}

/* A kept-alive connection the server closed meanwhile: the request is sent
 * again, once, on a fresh connection. A fresh connection closed without an
 * answer is not retried. */
static void test_stale_keep_alive_retried_once(void) {
  char *a = answer_cl(DECISION);
  step steps[] = {{STEP_ANSWER, a, 0, 0},
                  {STEP_DROP, NULL, 0, 0},
                  {STEP_ANSWER, a, 0, 0},
                  {STEP_DROP, NULL, 0, 0},
                  {STEP_DROP, NULL, 0, 0}};
  server s;
  server_start(&s, steps, 5);
  against_client *c = client(&s, "", 2000);
  replay_side d;
  double rtt;
  char err[512] = "";
  CHECK(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == 0);
  CHECK_MSG(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == 0, "%s", err);
  CHECK_STR(d.action, "block");
  CHECK(against_connections(c) == 2);
  /* now: dropped on the reused connection, retried, dropped again on the fresh one */
  CHECK(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == AGAINST_ETRANSPORT);
  CHECK_MSG(strstr(err, "closed before an answer") != NULL, "%s", err);
  CHECK(against_connections(c) == 3);
  against_close(c);
  server_stop(&s);
  free(a);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void test_timeout(void) {
  step steps[] = {{STEP_SILENT, NULL, 0, 0}};
  server s;
  server_start(&s, steps, 1);
  against_client *c = client(&s, "", 150);
  replay_side d;
  double rtt;
  char err[512] = "";
  double t0 = now_ms();
  CHECK(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == AGAINST_ETRANSPORT);
  double took = now_ms() - t0;
  CHECK_MSG(took >= 140 && took < 2000, "took %.0f ms", took);
  CHECK_MSG(strstr(err, "timeout") != NULL, "%s", err);
  against_close(c);
  server_stop(&s);
}

static void test_refusals_and_non_decisions(void) {
  const char *r429 =
      "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 48\r\n\r\n"
      "{\"error\":{\"code\":\"limit\",\"message\":\"slow down\"}}";
  char *not_json = answer_cl("<html>oops</html>");
  char *no_action = answer_cl("{\"decision\":\"allow\"}");
  char *bad_action = answer_cl("{\"action\":7}");
  const char *r500 = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\nboom!";
  const char *garbage = "SMTP ready\r\n\r\n";
  step steps[] = {{STEP_ANSWER, r429, 0, 0},      {STEP_ANSWER, not_json, 0, 0},
                  {STEP_ANSWER, no_action, 0, 0}, {STEP_ANSWER, bad_action, 0, 0},
                  {STEP_ANSWER, r500, 0, 0},      {STEP_ANSWER, garbage, 1, 0}};
  server s;
  server_start(&s, steps, 6);
  against_client *c = client(&s, "", 2000);
  replay_side d;
  double rtt;
  char err[512] = "";
  CHECK(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == AGAINST_EREFUSED);
  CHECK_STR(err, "HTTP 429: slow down");
  CHECK(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == AGAINST_EREFUSED);
  CHECK_MSG(strstr(err, "not a JSON object") != NULL, "%s", err);
  CHECK(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == AGAINST_EREFUSED);
  CHECK_MSG(strstr(err, "no \"action\"") != NULL, "%s", err);
  CHECK(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == AGAINST_EREFUSED);
  CHECK(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == AGAINST_EREFUSED);
  CHECK_STR(err, "HTTP 500: boom!");
  CHECK(against_connections(c) == 1); /* refusals keep the connection */
  CHECK(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == AGAINST_ETRANSPORT);
  CHECK_MSG(strstr(err, "not an HTTP/1.x answer") != NULL, "%s", err);
  against_close(c);
  server_stop(&s);
  free(not_json);
  free(no_action);
  free(bad_action);
}

static void test_connection_refused(void) {
  /* a port nobody listens on: bind one, note it, close it */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  bind(fd, (struct sockaddr *)&a, sizeof a);
  socklen_t al = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &al);
  close(fd);
  char url[64], err[512] = "";
  snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(a.sin_port));
  against_client *c;
  CHECK(against_open(url, 500, &c, err, sizeof err) == 0);
  replay_side d;
  double rtt;
  CHECK(against_decide(c, NULL, req, strlen(req), &d, &rtt, err, sizeof err) == AGAINST_ETRANSPORT);
  CHECK_MSG(strstr(err, "cannot connect to 127.0.0.1:") != NULL, "%s", err);
  CHECK(against_connections(c) == 0);
  against_close(c);
}

static void test_urls(void) {
  struct {
    const char *url, *want;
  } bad[] = {
      {"https://example.com/v1/decide", "https is not supported"},
      {"ftp://example.com/", "want http://"},
      {"example.com:8080", "want http://"},
      {"http:///v1/decide", "no host"},
      {"http://127.0.0.1:0/", "port must be"},
      {"http://127.0.0.1:65536/", "port must be"},
      {"http://127.0.0.1:80x/", "port must be"},
      {"http://[::1/", "unclosed ["},
      {"http://127.0.0.1:8080/a b", "space or control"},
      {"http://no-such-host.invalid:8080/", "cannot resolve"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    against_client *c = NULL;
    char err[512] = "";
    CHECK_MSG(against_open(bad[i].url, 0, &c, err, sizeof err) < 0, "%s opened", bad[i].url);
    CHECK_MSG(strstr(err, bad[i].want) != NULL, "%s: %s", bad[i].url, err);
    CHECK(c == NULL);
  }
  const char *good[] = {"http://127.0.0.1", "http://127.0.0.1:8080", "http://[::1]:8080/v1/decide",
                        "HTTP://localhost:1/x?y=1", "http://127.0.0.1?tenant=a"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    against_client *c = NULL;
    char err[512] = "";
    CHECK_MSG(against_open(good[i], 0, &c, err, sizeof err) == 0, "%s: %s", good[i], err);
    against_close(c);
  }
}

int main(void) {
  TEST_RUN(test_content_length_and_keep_alive);
  TEST_RUN(test_chunked_byte_by_byte);
  TEST_RUN(test_no_length_and_close);
  TEST_RUN(test_stale_keep_alive_retried_once);
  TEST_RUN(test_timeout);
  TEST_RUN(test_refusals_and_non_decisions);
  TEST_RUN(test_connection_refused);
  TEST_RUN(test_urls);
  TEST_END();
}
