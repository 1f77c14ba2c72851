/* fuzz_seam.h — drives the HTTP request path with bytes, for the fuzz
 * targets and their regression replay (tests/fuzz/). A real worker loop, a
 * real listening socket on 127.0.0.1 and a real client connection: the
 * bytes go through the kernel, libuv, llhttp, the router and the engine
 * exactly as a client's would; only the threads and signals of server_run
 * are left out (everything runs on the caller's thread).
 *
 * Not for production use: nothing in verdict itself calls it. */
#ifndef VD_SERVER_FUZZ_SEAM_H
#define VD_SERVER_FUZZ_SEAM_H

#include <stddef.h>

typedef struct server_fuzz server_fuzz;

/* Opens the bundle in policy_dir (no snapshots, no version store) and a
 * worker listening on a free loopback port. admin_token (NULL: admin off)
 * enables the admin endpoints. NULL on failure (the reason on stderr). */
server_fuzz *server_fuzz_open(const char *policy_dir, const char *admin_token);
/* Opens one connection, sends data[0..len), half-closes it and runs the
 * loop until the server has closed the connection. The answers (raw HTTP)
 * are appended to out when out is not NULL (at most outcap bytes kept;
 * *outlen set). Returns 0, or -1 when the server did not close the
 * connection within 10 seconds (a hang). */
int server_fuzz_feed(server_fuzz *f, const char *data, size_t len, char *out, size_t outcap,
                     size_t *outlen);
void server_fuzz_close(server_fuzz *f);

#endif
