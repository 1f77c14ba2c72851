/* metrics.c — the counters behind GET /metrics. Each worker owns one set and
 * is its only writer, so the hot path is a plain load+store per counter (no
 * lock, no shared cache line); a scrape, on any worker, reads every set with
 * relaxed atomic loads and sums them. Series of decisions (strategy, action,
 * source) go in a fixed table: an entry is filled first, then published by
 * bumping nseries with release order, and never changes after. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/internal.h"

#define PUT_LIT(b, s) json_buf_put((b), (s), sizeof(s) - 1)

/* Upper bounds of the latency buckets, in seconds. */
static const double bucket_le[METRICS_BUCKETS] = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0};

static void bump(_Atomic uint64_t *c, uint64_t by) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + by,
                        memory_order_relaxed);
}

static uint64_t get(_Atomic uint64_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

void metrics_init(metrics *m) { memset(m, 0, sizeof *m); }

void metrics_free(metrics *m) {
  uint32_t n = atomic_load(&m->nseries);
  for (uint32_t i = 0; i < n; i++) {
    free(m->series[i].point);
    free(m->series[i].action);
  }
}

static uint64_t hash_str(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h * 0x100000001b3ull;
}

void metrics_count_decision(metrics *m, const char *point, const char *action, const char *source) {
  uint64_t h = hash_str(hash_str(hash_str(0xcbf29ce484222325ull, point), action), source);
  uint32_t n = atomic_load_explicit(&m->nseries, memory_order_relaxed);
  for (uint32_t i = 0; i < n; i++) {
    metrics_series *s = &m->series[i];
    if (s->hash == h && strcmp(s->point, point) == 0 && strcmp(s->action, action) == 0 &&
        strcmp(s->source, source) == 0) {
      bump(&s->count, 1);
      return;
    }
  }
  if (n == METRICS_MAX_SERIES) {
    bump(&m->overflow, 1);
    return;
  }
  metrics_series *s = &m->series[n];
  s->point = strdup(point);
  s->action = strdup(action);
  if (!s->point || !s->action) {
    free(s->point);
    free(s->action);
    s->point = s->action = NULL;
    bump(&m->overflow, 1);
    return;
  }
  s->source = source;
  s->hash = h;
  atomic_store_explicit(&s->count, 1, memory_order_relaxed);
  atomic_store_explicit(&m->nseries, n + 1, memory_order_release);
}

void metrics_observe(metrics *m, int status, uint64_t ns) {
  int cls = status / 100;
  if (cls >= 1 && cls <= 5) bump(&m->status[cls], 1);
  double sec = (double)ns / 1e9;
  for (int i = 0; i < METRICS_BUCKETS; i++)
    if (sec <= bucket_le[i]) {
      bump(&m->latency_buckets[i], 1);
      break;
    }
  bump(&m->latency_count, 1);
  bump(&m->latency_sum_ns, ns);
}

void metrics_count_refused(metrics *m) { bump(&m->refused, 1); }

static void putf(json_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(json_buf *b, const char *fmt, ...) {
  char t[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t, sizeof t, fmt, ap);
  va_end(ap);
  if (n > 0) json_buf_put(b, t, (size_t)n < sizeof t ? (size_t)n : sizeof t - 1);
}

/* A Prometheus label value: backslash, quote and newline escaped. */
static void put_label(json_buf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '\\' || *s == '"') {
      json_buf_putc(b, '\\');
      json_buf_putc(b, *s);
    } else if (*s == '\n') {
      PUT_LIT(b, "\\n");
    } else {
      json_buf_putc(b, *s);
    }
  }
}

/* Decisions: merge the workers' series by label set (small tables: a scan). */
static void render_decisions(server *srv, json_buf *b) {
  PUT_LIT(b, "# HELP verdict_decisions_total Decisions made, by strategy, action and source.\n");
  PUT_LIT(b, "# TYPE verdict_decisions_total counter\n");
  for (int w = 0; w < srv->nworkers; w++) {
    metrics *m = &srv->workers[w].m;
    uint32_t n = atomic_load_explicit(&m->nseries, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++) {
      metrics_series *s = &m->series[i];
      /* Printed by the first worker that has it. */
      int seen = 0;
      for (int v = 0; v < w && !seen; v++) {
        metrics *o = &srv->workers[v].m;
        uint32_t on = atomic_load_explicit(&o->nseries, memory_order_acquire);
        for (uint32_t j = 0; j < on && !seen; j++)
          seen = o->series[j].hash == s->hash && strcmp(o->series[j].point, s->point) == 0 &&
                 strcmp(o->series[j].action, s->action) == 0 &&
                 strcmp(o->series[j].source, s->source) == 0;
      }
      if (seen) continue;
      uint64_t total = get(&s->count);
      for (int v = w + 1; v < srv->nworkers; v++) {
        metrics *o = &srv->workers[v].m;
        uint32_t on = atomic_load_explicit(&o->nseries, memory_order_acquire);
        for (uint32_t j = 0; j < on; j++)
          if (o->series[j].hash == s->hash && strcmp(o->series[j].point, s->point) == 0 &&
              strcmp(o->series[j].action, s->action) == 0 &&
              strcmp(o->series[j].source, s->source) == 0)
            total += get(&o->series[j].count);
      }
      PUT_LIT(b, "verdict_decisions_total{strategy=\"");
      put_label(b, s->point);
      PUT_LIT(b, "\",action=\"");
      put_label(b, s->action);
      PUT_LIT(b, "\",source=\"");
      put_label(b, s->source);
      putf(b, "\"} %llu\n", (unsigned long long)total);
    }
  }
  uint64_t overflow = 0, refused = 0;
  for (int w = 0; w < srv->nworkers; w++) {
    overflow += get(&srv->workers[w].m.overflow);
    refused += get(&srv->workers[w].m.refused);
  }
  putf(b,
       "# HELP verdict_decisions_unlabelled_total Decisions past the series table (%d label "
       "sets).\n# TYPE verdict_decisions_unlabelled_total counter\n"
       "verdict_decisions_unlabelled_total %llu\n",
       METRICS_MAX_SERIES, (unsigned long long)overflow);
  putf(b,
       "# HELP verdict_decide_refused_total Decide requests refused (bad JSON or request, "
       "unknown point, no candidate).\n# TYPE verdict_decide_refused_total counter\n"
       "verdict_decide_refused_total %llu\n",
       (unsigned long long)refused);
}

static void render_http(server *srv, json_buf *b) {
  PUT_LIT(b,
          "# HELP verdict_http_responses_total HTTP responses by status class.\n"
          "# TYPE verdict_http_responses_total counter\n");
  for (int cls = 1; cls <= 5; cls++) {
    uint64_t n = 0;
    for (int w = 0; w < srv->nworkers; w++) n += get(&srv->workers[w].m.status[cls]);
    putf(b, "verdict_http_responses_total{code=\"%dxx\"} %llu\n", cls, (unsigned long long)n);
  }
  PUT_LIT(b,
          "# HELP verdict_http_request_duration_seconds Time from the first byte of a "
          "request to its answer being queued.\n"
          "# TYPE verdict_http_request_duration_seconds histogram\n");
  uint64_t cum = 0, count = 0, sum_ns = 0;
  for (int i = 0; i < METRICS_BUCKETS; i++) {
    for (int w = 0; w < srv->nworkers; w++) cum += get(&srv->workers[w].m.latency_buckets[i]);
    putf(b, "verdict_http_request_duration_seconds_bucket{le=\"%g\"} %llu\n", bucket_le[i],
         (unsigned long long)cum);
  }
  for (int w = 0; w < srv->nworkers; w++) {
    count += get(&srv->workers[w].m.latency_count);
    sum_ns += get(&srv->workers[w].m.latency_sum_ns);
  }
  /* count is read after the buckets: never below the last bucket. */
  if (count < cum) count = cum;
  putf(b, "verdict_http_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
       (unsigned long long)count);
  putf(b, "verdict_http_request_duration_seconds_sum %.9f\n", (double)sum_ns / 1e9);
  putf(b, "verdict_http_request_duration_seconds_count %llu\n", (unsigned long long)count);
  putf(b,
       "# HELP verdict_http_connections Open HTTP connections.\n"
       "# TYPE verdict_http_connections gauge\nverdict_http_connections %u\n",
       atomic_load(&srv->nconns));
}

static void counter(json_buf *b, const char *name, const char *help, unsigned long long v) {
  putf(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, v);
}

static void render_engine(server *srv, json_buf *b) {
  vd_engine_counters c;
  if (vd_engine_stats(srv->engine, &c) == 0) {
    counter(b, "verdict_snapshots_appended_total", "Snapshots queued for the log.",
            c.snapshots_appended);
    counter(b, "verdict_snapshots_written_total", "Snapshots written to segment files.",
            c.snapshots_written);
    counter(b, "verdict_snapshots_dropped_total", "Snapshots dropped: the queue was full.",
            c.snapshots_dropped);
    counter(b, "verdict_snapshots_failed_total", "Snapshots not recorded (too big, no memory).",
            c.snapshots_failed);
    counter(b, "verdict_snapshot_write_errors_total", "Failed snapshot writes or syncs (retried).",
            c.snapshot_write_errors);
    counter(b, "verdict_snapshot_fsyncs_total", "fsync calls on the snapshot log.",
            c.snapshot_fsyncs);
    putf(b,
         "# HELP verdict_snapshot_queue_depth Snapshots waiting to be written.\n"
         "# TYPE verdict_snapshot_queue_depth gauge\nverdict_snapshot_queue_depth %llu\n",
         c.snapshot_queue_depth);
    putf(b,
         "# HELP verdict_snapshots_enabled 1 when decisions are recorded.\n"
         "# TYPE verdict_snapshots_enabled gauge\nverdict_snapshots_enabled %d\n",
         c.snapshots_on);
  }
  char v[65];
  vd_engine_policy_version(srv->engine, v);
  putf(b,
       "# HELP verdict_policy_info The live policy bundle.\n# TYPE verdict_policy_info gauge\n"
       "verdict_policy_info{version=\"%s\"} 1\n",
       v);
  putf(b,
       "# HELP verdict_ready 1 once the warm-up is done.\n# TYPE verdict_ready gauge\n"
       "verdict_ready %d\n",
       atomic_load(&srv->ready));
}

void metrics_render(server *srv, json_buf *b) {
  render_decisions(srv, b);
  render_http(srv, b);
  render_engine(srv, b);
}
