/* fuzz_http.c — the HTTP request path: the input is the bytes a client
 * sends on one connection to a `verdict serve` worker running the example
 * bundle (src/server/fuzz_seam.h: a real loopback socket, libuv, llhttp,
 * the router, the engine; admin endpoints on). Several requests may be
 * pipelined in one input. Checks: no crash, leak, UB; the server closes
 * the connection after the client half-closes (no hang); every answer is
 * an HTTP/1.1 status line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "server/fuzz_seam.h"

#define FUZZ_TOKEN "fuzz-admin-token-0123456789"

static server_fuzz *srv;
static char answer[1 << 20];

static void close_server(void) { server_fuzz_close(srv); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  srv = server_fuzz_open(VD_SOURCE_DIR "/examples/policies", FUZZ_TOKEN);
  if (!srv) abort();
  atexit(close_server);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 256 * 1024) return 0;
  size_t n = 0;
  int rc = server_fuzz_feed(srv, (const char *)data, size, answer, sizeof answer, &n);
  FUZZ_CHECK(rc == 0, "the server did not close the connection (a hang)");
  if (n)
    FUZZ_CHECK(n >= 12 && memcmp(answer, "HTTP/1.1 ", 9) == 0, "not an HTTP answer: %.40s", answer);
  return 0;
}
