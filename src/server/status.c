/* status.c — GET /v1/status (read-only, open like /metrics): what this node
 * serves and where it came from, for a person or a fleet tool to compare
 * nodes. One object a part: each section below writes its own under its
 * name (null when that part is off); a new part adds one line to the table. */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/timefmt.h"
#include "engine/service.h"
#include "server/internal.h"

#define PUT_LIT(b, s) json_buf_put((b), (s), sizeof(s) - 1)

/* The live bundle: its version, and its source (a folder, or a URL pulled). */
static int policy_section(server *s, json_buf *b) {
  char v[65];
  vd_engine_policy_version(s->engine, v);
  PUT_LIT(b, "{\"version\":");
  json_write_string(b, v, strlen(v));
  if (s->opts->bundle_url) {
    PUT_LIT(b, ",\"source\":\"url\",\"from\":");
    json_write_string(b, s->opts->bundle_url, strlen(s->opts->bundle_url));
  } else {
    PUT_LIT(b, ",\"source\":\"path\",\"from\":");
    json_write_string(b, s->opts->policy_dir, strlen(s->opts->policy_dir));
  }
  char num[128];
  int n = snprintf(num, sizeof num, ",\"reloads\":%llu,\"reload_failures\":%llu}",
                   (unsigned long long)atomic_load(&s->reloads),
                   (unsigned long long)atomic_load(&s->reload_failures));
  json_buf_put(b, num, (size_t)n);
  return 0;
}

static int pull_section(server *s, json_buf *b) { return bundle_pull_status(s->pull, b); }

/* serve --ship: the snapshot shipper's target, lag, counts and last error. */
static int ship_section(server *s, json_buf *b) {
  if (!s->ship) return 1;
  ship_thread_status_json(s, b);
  return 0;
}

/* name, and the writer of its object: 0 written, 1 off (null). */
static const struct {
  const char *name;
  int (*write)(server *s, json_buf *b);
} sections[] = {
    {"policy", policy_section},
    {"bundle_pull", pull_section},
    {"ship", ship_section},
};

void route_status(conn *c, const http_request *r) {
  (void)r;
  server *s = conn_worker(c)->srv;
  json_buf b;
  json_buf_init(&b, NULL);
  char t[48], num[160];
  size_t tl = timefmt_format_rfc3339(s->started_wall_ns / 1000000000,
                                     (int32_t)(s->started_wall_ns % 1000000000), t);
  PUT_LIT(&b, "{\"verdict\":");
  json_write_string(&b, vd_version(), strlen(vd_version()));
  PUT_LIT(&b, ",\"started\":");
  json_write_string(&b, t, tl);
  int n = snprintf(num, sizeof num, ",\"uptime_s\":%.3f,\"ready\":%s",
                   (double)(clock_mono_ns() - s->started_mono_ns) / 1e9,
                   atomic_load(&s->ready) ? "true" : "false");
  json_buf_put(&b, num, (size_t)n);
  for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
    json_buf_putc(&b, ',');
    json_write_string(&b, sections[i].name, strlen(sections[i].name));
    json_buf_putc(&b, ':');
    if (sections[i].write(s, &b) != 0) PUT_LIT(&b, "null");
  }
  PUT_LIT(&b, "}\n");
  if (b.oom)
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory writing the status", NULL);
  else
    conn_respond(c, 200, "application/json", NULL, b.data, b.len);
  json_buf_free(&b);
}
