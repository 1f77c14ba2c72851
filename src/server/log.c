/* log.c — the server's structured log: one JSON object a line on stderr, one
 * line per event (start, ready, reload, stop, errors), written with a single
 * write() so that lines from different threads never interleave. The access
 * log (one line per request, --access-log) is conn.c's: buffered per worker. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "server/internal.h"

size_t server_log_time(char *t, size_t len) {
  int64_t now = clock_wall_ns();
  time_t sec = (time_t)(now / 1000000000);
  struct tm tm;
  gmtime_r(&sec, &tm);
  size_t tn = strftime(t, len, "%Y-%m-%dT%H:%M:%S", &tm);
  tn += (size_t)snprintf(t + tn, len - tn, ".%03dZ", (int)(now % 1000000000 / 1000000));
  return tn;
}

void server_log(const char *level, const char *event, const char *message, const char *fields) {
  char t[48];
  size_t tn = server_log_time(t, sizeof t);
  json_buf b;
  json_buf_init(&b, NULL);
  json_buf_put(&b, "{\"ts\":\"", 7);
  json_buf_put(&b, t, tn);
  json_buf_put(&b, "\",\"level\":", 10);
  json_write_string(&b, level, strlen(level));
  json_buf_put(&b, ",\"event\":", 9);
  json_write_string(&b, event, strlen(event));
  if (message) {
    json_buf_put(&b, ",\"message\":", 11);
    json_write_string(&b, message, strlen(message));
  }
  if (fields) json_buf_put(&b, fields, strlen(fields));
  json_buf_put(&b, "}\n", 2);
  if (!b.oom) {
    ssize_t w = write(STDERR_FILENO, b.data, b.len);
    (void)w;
  }
  json_buf_free(&b);
}
