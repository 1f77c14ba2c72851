/* ship_thread.c — `verdict serve --ship URL`: the snapshot shipper of
 * `verdict ship` (src/ship/ship.h) run on a thread of the server. It reads
 * the segment files the engine's log writer has written, so a decision
 * never waits for it; ClickHouse being slow or down only makes the lag
 * grow (verdict_ship_lag_records / _seconds on /metrics). Its failures and
 * recoveries are logged as ship_failed / ship_recovered lines. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/internal.h"
#include "ship/ship.h"

struct ship_thread {
  shipper *sh;
  pthread_t thread;
};

static uint64_t written(void *ud) {
  vd_engine_counters c;
  return vd_engine_stats(ud, &c) == 0 ? c.snapshots_written : 0;
}

static void on_log(void *ud, const char *level, const char *event, const char *msg) {
  (void)ud;
  server_log(level, event, msg, NULL);
}

static void *ship_main(void *arg) {
  struct ship_thread *t = arg;
  for (;;) {
    char err[SHIP_ERRLEN];
    if (shipper_run(t->sh, err, sizeof err) == 0) break; /* stopped */
    server_log("error", "ship_failed", err, NULL);
    /* a folder or cursor that failed: try again in a while, until stopped */
    for (int i = 0; i < 50 && !shipper_stopping(t->sh); i++) {
      struct timespec ts = {0, 100 * 1000000L};
      nanosleep(&ts, NULL);
    }
    if (shipper_stopping(t->sh)) break;
  }
  return NULL;
}

int ship_thread_start(server *s, char *why, size_t whylen) {
  const server_opts *o = s->opts;
  if (!o->ship_url) return 0;
  if (!s->snapshots_dir) {
    snprintf(why, whylen, "--ship sends the snapshot folder: not with snapshots off");
    return -1;
  }
  struct ship_thread *t = calloc(1, sizeof *t);
  if (!t) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  ship_opts so;
  ship_opts_init(&so);
  so.dir = s->snapshots_dir;
  so.url = o->ship_url;
  so.node = o->ship_node ? o->ship_node : o->engine.node;
  so.quiet = 1;
  so.written = written;
  so.written_ud = s->engine;
  so.log = on_log;
  int usage;
  if (shipper_new(&so, &t->sh, &usage, why, whylen) < 0) {
    shipper_free(t->sh);
    free(t);
    return -1;
  }
  if (pthread_create(&t->thread, NULL, ship_main, t) != 0) {
    snprintf(why, whylen, "cannot start the shipping thread");
    shipper_free(t->sh);
    free(t);
    return -1;
  }
  s->ship = t;
  return 0;
}

void ship_thread_stop(server *s) {
  struct ship_thread *t = s->ship;
  if (!t) return;
  shipper_stop(t->sh);
  pthread_join(t->thread, NULL);
  s->ship = NULL;
  shipper_free(t->sh);
  free(t);
}

void ship_thread_status_json(server *s, json_buf *b) {
  if (s->ship)
    shipper_status_json(s->ship->sh, b);
  else
    json_buf_put(b, "null", 4);
}

static void gauge(json_buf *b, const char *name, const char *help, const char *type, double v) {
  char line[512];
  int n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name,
                   type, name, v);
  if (n > 0) json_buf_put(b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

void ship_thread_render(server *s, json_buf *b) {
  struct ship_thread *t = s->ship;
  if (!t) return;
  const ship_stats *st = shipper_stats(t->sh);
  gauge(b, "verdict_ship_lag_records", "Snapshots written and not yet acknowledged by ClickHouse.",
        "gauge", (double)shipper_lag_records(t->sh));
  gauge(b, "verdict_ship_lag_seconds",
        "Age of the oldest snapshot read and not yet acknowledged by ClickHouse (0: caught up).",
        "gauge", shipper_lag_seconds(t->sh));
  gauge(b, "verdict_ship_records_total", "Snapshots acknowledged by ClickHouse.", "counter",
        (double)atomic_load(&st->shipped));
  gauge(b, "verdict_ship_batches_total", "Batches acknowledged by ClickHouse.", "counter",
        (double)atomic_load(&st->batches));
  gauge(b, "verdict_ship_retries_total", "Failed sends to ClickHouse (each retried).", "counter",
        (double)atomic_load(&st->retries));
  gauge(b, "verdict_ship_failing", "1 while the last send to ClickHouse failed.", "gauge",
        atomic_load(&st->failing));
  char err[SHIP_ERRLEN];
  shipper_last_error(t->sh, err, sizeof err);
  json_buf_put(b,
               "# HELP verdict_ship_last_error_info The last failed send's error (empty: none).\n"
               "# TYPE verdict_ship_last_error_info gauge\nverdict_ship_last_error_info{error=\"",
               strlen("# HELP verdict_ship_last_error_info The last failed send's error (empty: "
                      "none).\n# TYPE verdict_ship_last_error_info gauge\n"
                      "verdict_ship_last_error_info{error=\""));
  for (const char *p = err; *p; p++) {
    if (*p == '\\' || *p == '"') json_buf_putc(b, '\\');
    if (*p == '\n') {
      json_buf_put(b, "\\n", 2);
      continue;
    }
    json_buf_putc(b, *p);
  }
  json_buf_put(b, "\"} 1\n", 5);
}
