/* hello.c — the bare server of bench/http: the same HTTP stack as
 * `verdict serve` (libuv, one loop per thread on SO_REUSEPORT sockets,
 * llhttp, keep-alive, pipelining, one write per answer) answering every
 * request with a fixed 330-byte JSON body the size of a decision, without
 * deciding anything. It is the baseline `verdict serve` is measured against:
 * the ratio of the two is what deciding (and snapshots) cost over HTTP.
 *
 *   hello-http PORT [THREADS]
 *
 * Not a server for anything else: no limits, no timeouts, no drain. */
#include <llhttp.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

static const char body[] =
    "{\"action\":\"allow\",\"allowed\":true,\"review\":false,\"confidence\":1.0,\"source\":"
    "\"default\",\"reason\":{\"rule\":null,\"message\":null},\"strategy\":\"request_gate\","
    "\"policy_version\":\"52cd952229025c85abf23a1a05a8e893480c9dfe7b884278473531763a332633\","
    "\"model_version\":null,\"latency_us\":0.0,\"snapshot_id\":"
    "\"01a22a0e-d8c4-70f3-b7bf-f72847709c20\"}";

typedef struct conn {
  uv_tcp_t tcp;
  llhttp_t parser;
} conn;

typedef struct write_req {
  uv_write_t req;
  char data[];
} write_req;

static llhttp_settings_t settings;
static int port;
static char readbuf[64][64 * 1024]; /* one per thread (index by loop slot) */

static void on_written(uv_write_t *req, int status) {
  (void)status;
  free(req);
}

static void on_closed(uv_handle_t *h) { free(h->data); }

/* The two answers, made once: this is the floor of the stack. */
static char answer[2][512];
static size_t answer_len[2];

static int on_message_complete(llhttp_t *p) {
  conn *c = p->data;
  int keep = llhttp_should_keep_alive(p) ? 1 : 0;
  write_req *wr = malloc(sizeof *wr + answer_len[keep]);
  if (!wr) return -1;
  memcpy(wr->data, answer[keep], answer_len[keep]);
  uv_buf_t b = uv_buf_init(wr->data, (unsigned)answer_len[keep]);
  if (uv_write(&wr->req, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0) free(wr);
  return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  char *rb = h->loop->data;
  *buf = uv_buf_init(rb, 64 * 1024);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  conn *c = s->data;
  if (n == 0) return;
  if (n < 0 || llhttp_execute(&c->parser, buf->base, (size_t)n) != HPE_OK) {
    if (!uv_is_closing((uv_handle_t *)s)) uv_close((uv_handle_t *)s, on_closed);
  }
}

static void on_connection(uv_stream_t *server, int status) {
  if (status < 0) return;
  conn *c = calloc(1, sizeof *c);
  if (!c) return;
  uv_tcp_init(server->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
    uv_close((uv_handle_t *)&c->tcp, on_closed);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  llhttp_init(&c->parser, HTTP_REQUEST, &settings);
  c->parser.data = c;
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void run(void *arg) {
  long slot = (long)arg;
  uv_loop_t loop;
  uv_loop_init(&loop);
  loop.data = readbuf[slot];
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", port, &a);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
    perror("hello-http: bind");
    exit(1);
  }
  uv_tcp_t listener;
  uv_tcp_init(&loop, &listener);
  uv_tcp_open(&listener, fd);
  if (uv_listen((uv_stream_t *)&listener, 1024, on_connection) < 0) {
    fprintf(stderr, "hello-http: cannot listen\n");
    exit(1);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: hello-http PORT [THREADS]\n");
    return 2;
  }
  port = atoi(argv[1]);
  int threads = argc > 2 ? atoi(argv[2]) : 2;
  if (threads < 1 || threads > 64) threads = 2;
  signal(SIGPIPE, SIG_IGN);
  for (int keep = 0; keep < 2; keep++)
    answer_len[keep] = (size_t)snprintf(
        answer[keep], sizeof answer[keep],
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
        "Connection: %s\r\n\r\n%s",
        sizeof body - 1, keep ? "keep-alive" : "close", body);
  llhttp_settings_init(&settings);
  settings.on_message_complete = on_message_complete;
  uv_thread_t t[64];
  for (long i = 1; i < threads; i++) uv_thread_create(&t[i], run, (void *)i);
  run((void *)0);
  return 0;
}
