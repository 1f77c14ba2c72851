/* metrics.c — the counters behind GET /metrics. Each worker owns one set and
 * is its only writer, so the hot path is a plain load+store per counter (no
 * lock, no shared cache line); a scrape, on any worker, reads every set with
 * relaxed atomic loads and sums them. Series of decisions (strategy, action,
 * source) go in a fixed table: an entry is filled first, then published by
 * bumping nseries with release order, and never changes after. */
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "server/internal.h"
#include "server/reviews.h"

#define PUT_LIT(b, s) json_buf_put((b), (s), sizeof(s) - 1)

/* The bucket tables: upper bounds in seconds. Latency from 1 µs, since one
 * decision takes a few µs and a quantile can only be read between bounds;
 * time to review from a second to a week, since a person answers. */
typedef struct bucket_table {
  const double *le;
  int n;
} bucket_table;

static const double latency_le[METRICS_BUCKETS] = {
    1e-6,   2.5e-6, 5e-6, 1e-5,   2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3,
    2.5e-3, 5e-3,   1e-2, 2.5e-2, 5e-2,   0.1,  0.25, 0.5,    1.0};
static const double review_le[] = {1,    10,   30,    60,    300,   900,    1800,
                                   3600, 7200, 21600, 43200, 86400, 172800, 604800};
_Static_assert(sizeof review_le / sizeof review_le[0] <= METRICS_BUCKETS, "review buckets");

static const bucket_table latency_buckets = {latency_le, METRICS_BUCKETS};
static const bucket_table review_buckets = {review_le, sizeof review_le / sizeof review_le[0]};

static void bump(_Atomic uint64_t *c, uint64_t by) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + by,
                        memory_order_relaxed);
}

static uint64_t get(_Atomic uint64_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

void metrics_init(metrics *m) {
  memset(m, 0, sizeof *m);
  /* entry 0 of each histogram table: empty labels (internal.h) */
  atomic_store(&m->request.nseries, 1);
  atomic_store(&m->decide.nseries, 1);
  m->req_series = -1;
}

static void table_free(metrics_table *t) {
  uint32_t n = atomic_load(&t->nseries);
  for (uint32_t i = 0; i < n; i++)
    for (int k = 0; k < 3; k++) free(t->series[i].label[k]);
}

void metrics_free(metrics *m) {
  table_free(&m->decisions);
  table_free(&m->rules);
  table_free(&m->outcomes);
}

void metrics_bump(_Atomic uint64_t *c) { bump(c, 1); }

static uint64_t hash_str(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h * 0x100000001b3ull;
}

static uint64_t hash3(const char *const l[3]) {
  return hash_str(hash_str(hash_str(0xcbf29ce484222325ull, l[0]), l[1]), l[2]);
}

static int same(const metrics_series *s, uint64_t h, const char *const l[3]) {
  return s->hash == h && strcmp(s->label[0], l[0]) == 0 && strcmp(s->label[1], l[1]) == 0 &&
         strcmp(s->label[2], l[2]) == 0;
}

/* Adds one to the series with labels l (made on first use). Only the owning
 * worker calls it. */
static void table_count(metrics_table *t, const char *const l[3]) {
  uint64_t h = hash3(l);
  uint32_t n = atomic_load_explicit(&t->nseries, memory_order_relaxed);
  for (uint32_t i = 0; i < n; i++) {
    metrics_series *s = &t->series[i];
    if (same(s, h, l)) {
      bump(&s->count, 1);
      return;
    }
  }
  if (n == METRICS_MAX_SERIES) {
    bump(&t->overflow, 1);
    return;
  }
  metrics_series *s = &t->series[n];
  for (int k = 0; k < 3; k++) s->label[k] = strdup(l[k]);
  if (!s->label[0] || !s->label[1] || !s->label[2]) {
    for (int k = 0; k < 3; k++) {
      free(s->label[k]);
      s->label[k] = NULL;
    }
    bump(&t->overflow, 1);
    return;
  }
  s->hash = h;
  atomic_store_explicit(&s->count, 1, memory_order_relaxed);
  atomic_store_explicit(&t->nseries, n + 1, memory_order_release);
}

static void hist_observe(metrics_hist *h, const bucket_table *t, uint64_t ns) {
  double sec = (double)ns / 1e9;
  for (int i = 0; i < t->n; i++)
    if (sec <= t->le[i]) {
      bump(&h->buckets[i], 1);
      break;
    }
  bump(&h->count, 1);
  bump(&h->sum_ns, ns);
}

const char *const metrics_side_name[METRICS_SIDES] = {"live", "shadow", "canary"};

static uint64_t hash2(const char *a, const char *b, uint8_t side) {
  return hash_str(hash_str(0xcbf29ce484222325ull ^ side, a), b);
}

static int same_series(const metrics_hseries *x, const metrics_hseries *y) {
  return x->hash == y->hash && x->side == y->side && !strcmp(x->label[0], y->label[0]) &&
         !strcmp(x->label[1], y->label[1]);
}

/* The entry of t for (strategy, source, side), made on first use; 0
 * (empty labels) when the table is full or a label too long. Owner only. */
static uint32_t htable_index(metrics_htable *t, const char *a, const char *b, uint8_t side) {
  if (strlen(a) >= METRICS_HLABEL || strlen(b) >= METRICS_HLABEL) return 0;
  uint64_t h = hash2(a, b, side);
  uint32_t n = atomic_load_explicit(&t->nseries, memory_order_relaxed);
  for (uint32_t i = 0; i < n; i++) {
    const metrics_hseries *s = &t->series[i];
    if (s->hash == h && s->side == side && strcmp(s->label[0], a) == 0 &&
        strcmp(s->label[1], b) == 0)
      return i;
  }
  if (n == METRICS_MAX_HSERIES) return 0;
  metrics_hseries *s = &t->series[n];
  strcpy(s->label[0], a);
  strcpy(s->label[1], b);
  s->side = side < METRICS_SIDES ? side : METRICS_SIDE_LIVE;
  s->hash = h;
  atomic_store_explicit(&t->nseries, n + 1, memory_order_release);
  return n;
}

void metrics_count_decision(metrics *m, const vd_decision *d) {
  const char *strategy = vd_decision_strategy(d), *action = vd_decision_action(d);
  const char *source = vd_decision_source(d), *rule = vd_decision_rule(d);
  const char *l[3] = {strategy ? strategy : "", action ? action : "", source ? source : ""};
  table_count(&m->decisions, l);
  if (rule && source && strcmp(source, "rule") == 0) {
    const char *r[3] = {l[0], rule, ""};
    table_count(&m->rules, r);
  }
  uint32_t i = htable_index(&m->decide, l[0], l[2], m->side);
  hist_observe(&m->decide.series[i].h, &latency_buckets,
               (uint64_t)(vd_decision_latency_us(d) * 1e3));
  /* The request carrying it is labelled the same, unless it carries several
   * decisions of different labels (a batch, an MCP call): then empty. */
  int r = (int)htable_index(&m->request, l[0], l[2], METRICS_SIDE_LIVE);
  m->req_series = m->req_series < 0 || m->req_series == r ? r : 0;
}

void metrics_observe(metrics *m, int status, uint64_t ns) {
  int cls = status / 100;
  if (cls >= 1 && cls <= 5) bump(&m->status[cls], 1);
  int r = m->req_series > 0 ? m->req_series : 0;
  m->req_series = -1;
  hist_observe(&m->request.series[r].h, &latency_buckets, ns);
}

void metrics_count_refused(metrics *m) { bump(&m->refused, 1); }

void metrics_count_outcome(metrics *m, const char *action, uint64_t waited_ns) {
  const char *l[3] = {action, "", ""};
  table_count(&m->outcomes, l);
  hist_observe(&m->review_time, &review_buckets, waited_ns);
}

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

/* A labelled table summed over the workers (small tables: a scan). Each
 * label set is printed by the first worker that has it. */
static void render_table(server *srv, json_buf *b, size_t off, const char *name,
                         const char *const keys[3]) {
  for (int w = 0; w < srv->nworkers; w++) {
    metrics_table *t = (metrics_table *)((char *)&srv->workers[w].m + off);
    uint32_t n = atomic_load_explicit(&t->nseries, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++) {
      metrics_series *s = &t->series[i];
      const char *l[3] = {s->label[0], s->label[1], s->label[2]};
      int seen = 0;
      for (int v = 0; v < w && !seen; v++) {
        metrics_table *o = (metrics_table *)((char *)&srv->workers[v].m + off);
        uint32_t on = atomic_load_explicit(&o->nseries, memory_order_acquire);
        for (uint32_t j = 0; j < on && !seen; j++) seen = same(&o->series[j], s->hash, l);
      }
      if (seen) continue;
      uint64_t total = get(&s->count);
      for (int v = w + 1; v < srv->nworkers; v++) {
        metrics_table *o = (metrics_table *)((char *)&srv->workers[v].m + off);
        uint32_t on = atomic_load_explicit(&o->nseries, memory_order_acquire);
        for (uint32_t j = 0; j < on; j++)
          if (same(&o->series[j], s->hash, l)) total += get(&o->series[j].count);
      }
      json_buf_put(b, name, strlen(name));
      for (int k = 0; k < 3 && keys[k]; k++) {
        json_buf_putc(b, k ? ',' : '{');
        json_buf_put(b, keys[k], strlen(keys[k]));
        PUT_LIT(b, "=\"");
        put_label(b, l[k]);
        json_buf_putc(b, '"');
      }
      putf(b, "} %llu\n", (unsigned long long)total);
    }
  }
}

static uint64_t sum_field(server *srv, size_t off) {
  uint64_t n = 0;
  for (int w = 0; w < srv->nworkers; w++)
    n += get((_Atomic uint64_t *)((char *)&srv->workers[w].m + off));
  return n;
}

static void render_decisions(server *srv, json_buf *b) {
  static const char *const dkeys[3] = {"strategy", "action", "source"};
  static const char *const rkeys[3] = {"strategy", "rule", NULL};
  PUT_LIT(b, "# HELP verdict_decisions_total Decisions made, by strategy, action and source.\n");
  PUT_LIT(b, "# TYPE verdict_decisions_total counter\n");
  render_table(srv, b, offsetof(metrics, decisions), "verdict_decisions_total", dkeys);
  PUT_LIT(b, "# HELP verdict_rule_hits_total Decisions made by each rule, by strategy and rule.\n");
  PUT_LIT(b, "# TYPE verdict_rule_hits_total counter\n");
  render_table(srv, b, offsetof(metrics, rules), "verdict_rule_hits_total", rkeys);
  putf(b,
       "# HELP verdict_decisions_unlabelled_total Decisions past the series table (%d label "
       "sets).\n# TYPE verdict_decisions_unlabelled_total counter\n"
       "verdict_decisions_unlabelled_total %llu\n",
       METRICS_MAX_SERIES,
       (unsigned long long)sum_field(srv, offsetof(metrics, decisions.overflow)));
  putf(b,
       "# HELP verdict_rule_hits_unlabelled_total Rule hits past the series table.\n"
       "# TYPE verdict_rule_hits_unlabelled_total counter\n"
       "verdict_rule_hits_unlabelled_total %llu\n",
       (unsigned long long)sum_field(srv, offsetof(metrics, rules.overflow)));
  putf(b,
       "# HELP verdict_decide_refused_total Decide requests refused (bad JSON or request, "
       "unknown point, no candidate).\n# TYPE verdict_decide_refused_total counter\n"
       "verdict_decide_refused_total %llu\n",
       (unsigned long long)sum_field(srv, offsetof(metrics, refused)));
  putf(b,
       "# HELP verdict_batches_total Batch requests answered.\n"
       "# TYPE verdict_batches_total counter\nverdict_batches_total %llu\n",
       (unsigned long long)sum_field(srv, offsetof(metrics, batches)));
  PUT_LIT(b,
          "# HELP verdict_authz_total Answers of /v1/authz by status.\n"
          "# TYPE verdict_authz_total counter\n");
  static const int codes[3] = {200, 401, 403};
  for (int k = 0; k < 3; k++)
    putf(b, "verdict_authz_total{code=\"%d\"} %llu\n", codes[k],
         (unsigned long long)sum_field(srv,
                                       offsetof(metrics, authz) + (size_t)k * sizeof(uint64_t)));
}

/* One histogram summed over the workers: off is where the metrics_hist is
 * in a worker's metrics (found by labels for a table: see render_htable). */
typedef struct hist_sum {
  uint64_t buckets[METRICS_BUCKETS], count, sum_ns;
} hist_sum;

static void hist_add(hist_sum *s, metrics_hist *h) {
  for (int i = 0; i < METRICS_BUCKETS; i++) s->buckets[i] += get(&h->buckets[i]);
  s->count += get(&h->count);
  s->sum_ns += get(&h->sum_ns);
}

/* labels: `strategy="gate",source="rule",` (ending in a comma) or "". */
static void render_hist_lines(json_buf *b, const char *name, const char *labels,
                              const bucket_table *t, const hist_sum *s) {
  uint64_t cum = 0;
  for (int i = 0; i < t->n; i++) {
    cum += s->buckets[i];
    putf(b, "%s_bucket{%sle=\"%g\"} %llu\n", name, labels, t->le[i], (unsigned long long)cum);
  }
  /* count is read after the buckets: never below the last bucket. */
  uint64_t count = s->count < cum ? cum : s->count;
  putf(b, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels, (unsigned long long)count);
  size_t n = strlen(labels);
  if (n) {
    putf(b, "%s_sum{%.*s} %.9f\n", name, (int)n - 1, labels, (double)s->sum_ns / 1e9);
    putf(b, "%s_count{%.*s} %llu\n", name, (int)n - 1, labels, (unsigned long long)count);
  } else {
    putf(b, "%s_sum %.9f\n", name, (double)s->sum_ns / 1e9);
    putf(b, "%s_count %llu\n", name, (unsigned long long)count);
  }
}

static void render_hist(server *srv, json_buf *b, size_t off, const char *name, const char *help,
                        const bucket_table *t) {
  putf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  hist_sum s = {0};
  for (int w = 0; w < srv->nworkers; w++)
    hist_add(&s, (metrics_hist *)((char *)&srv->workers[w].m + off));
  render_hist_lines(b, name, "", t, &s);
}

/* A (strategy, source) histogram table summed over the workers: each label
 * set once, by the first worker that has it (the sets are few); with_side,
 * the side label too (the decisions' table). */
static void render_htable(server *srv, json_buf *b, size_t off, const char *name,
                          const char *help, int with_side) {
  putf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  for (int w = 0; w < srv->nworkers; w++) {
    metrics_htable *t = (metrics_htable *)((char *)&srv->workers[w].m + off);
    uint32_t n = atomic_load_explicit(&t->nseries, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++) {
      const metrics_hseries *e = &t->series[i];
      int seen = 0;
      for (int v = 0; v < w && !seen; v++) {
        metrics_htable *o = (metrics_htable *)((char *)&srv->workers[v].m + off);
        uint32_t on = atomic_load_explicit(&o->nseries, memory_order_acquire);
        for (uint32_t j = 0; j < on && !seen; j++) seen = same_series(&o->series[j], e);
      }
      if (seen) continue;
      hist_sum s = {0};
      hist_add(&s, (metrics_hist *)&e->h);
      for (int v = w + 1; v < srv->nworkers; v++) {
        metrics_htable *o = (metrics_htable *)((char *)&srv->workers[v].m + off);
        uint32_t on = atomic_load_explicit(&o->nseries, memory_order_acquire);
        for (uint32_t j = 0; j < on; j++)
          if (same_series(&o->series[j], e)) hist_add(&s, &o->series[j].h);
      }
      if (i == 0 && s.count == 0) continue; /* the empty labels, unused so far */
      json_buf l;
      json_buf_init(&l, NULL);
      PUT_LIT(&l, "strategy=\"");
      put_label(&l, e->label[0]);
      PUT_LIT(&l, "\",source=\"");
      put_label(&l, e->label[1]);
      PUT_LIT(&l, "\",");
      if (with_side) {
        PUT_LIT(&l, "side=\"");
        json_buf_put(&l, metrics_side_name[e->side], strlen(metrics_side_name[e->side]));
        PUT_LIT(&l, "\",");
      }
      if (!l.oom) render_hist_lines(b, name, l.data, &latency_buckets, &s);
      json_buf_free(&l);
    }
  }
}

static void render_http(server *srv, json_buf *b) {
  PUT_LIT(b,
          "# HELP verdict_http_responses_total HTTP responses by status class.\n"
          "# TYPE verdict_http_responses_total counter\n");
  for (int cls = 1; cls <= 5; cls++)
    putf(b, "verdict_http_responses_total{code=\"%dxx\"} %llu\n", cls,
         (unsigned long long)sum_field(srv,
                                       offsetof(metrics, status) + (size_t)cls * sizeof(uint64_t)));
  render_htable(srv, b, offsetof(metrics, request), "verdict_http_request_duration_seconds",
                "Time from the first byte of a request to its answer being queued, by the "
                "strategy and source of its decision (empty: not one decision).",
                0);
  render_htable(srv, b, offsetof(metrics, decide), "verdict_decide_duration_seconds",
                "Time the engine took for one answered decision: parsing the request and "
                "deciding, by strategy, source and the side that answered (live, or canary).",
                1);
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
    counter(b, "verdict_snapshots_refused_total",
            "Decisions refused (503 not_recorded) because their snapshot could not be queued "
            "(--on-full block) or made durable (--durability always).",
            c.snapshots_refused);
    putf(b,
         "# HELP verdict_snapshots_unwritten Decisions answered with a snapshot_id whose snapshot "
         "is not written yet: what a stop now would lose if the disk does not take them.\n"
         "# TYPE verdict_snapshots_unwritten gauge\nverdict_snapshots_unwritten %llu\n"
         "# HELP verdict_snapshot_write_failing 1 while the snapshot log's disk refuses writes.\n"
         "# TYPE verdict_snapshot_write_failing gauge\nverdict_snapshot_write_failing %d\n",
         c.snapshot_unwritten, c.snapshot_failing);
    counter(b, "verdict_model_calls_total", "Decisions that ran a fallback model.", c.model_calls);
    counter(b, "verdict_model_deadline_misses_total",
            "Model calls cut short by their strategy's timeout_ms.", c.model_deadline_misses);
    /* rate-limit counters (docs/policy.md "Limits", docs/deploy.md) */
    counter(b, "verdict_limit_charges_total", "Charges logged by strategies' limits.",
            c.limit_charges);
    counter(b, "verdict_limit_refusals_total", "Limit readings that refused the caller.",
            c.limit_refusals);
    counter(b, "verdict_state_evictions_total",
            "Live counters dropped by the local store's memory bound.", c.state_evictions);
    counter(b, "verdict_state_expired_total", "Counters removed once expired.", c.state_expired);
    counter(b, "verdict_state_remote_errors_total", "Redis commands that failed or were late.",
            c.state_remote_errors);
    counter(b, "verdict_state_fallbacks_total",
            "Limit readings answered by --state-on-error while Redis failed.", c.state_fallbacks);
    putf(b,
         "# HELP verdict_state_keys Live counters in the local store.\n"
         "# TYPE verdict_state_keys gauge\nverdict_state_keys %llu\n"
         "# HELP verdict_state_bytes Memory the local counters use.\n"
         "# TYPE verdict_state_bytes gauge\nverdict_state_bytes %llu\n",
         c.state_keys, c.state_bytes);
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
  int failing = 0;
  vd_engine_counters k;
  if (vd_engine_stats(srv->engine, &k) == 0) failing = k.snapshot_failing;
  putf(b,
       "# HELP verdict_ready 1 when /readyz says ready: warmed up, and snapshots are written.\n"
       "# TYPE verdict_ready gauge\nverdict_ready %d\n",
       atomic_load(&srv->ready) && !failing);
}

/* Process metrics as the Prometheus client libraries name them, from /proc. */
static void render_process(json_buf *b) {
  long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
  char buf[1024];
  FILE *f = fopen("/proc/self/stat", "r");
  if (f) {
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Fields after the command name (which may hold spaces) in ')'. */
    const char *p = strrchr(buf, ')');
    unsigned long long utime = 0, stime = 0, start = 0;
    if (p && tick > 0 &&
        sscanf(p + 2,
               "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
               "%llu",
               &utime, &stime, &start) == 3) {
      putf(b,
           "# HELP process_cpu_seconds_total User and system CPU time spent, in seconds.\n"
           "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n",
           (double)(utime + stime) / (double)tick);
      unsigned long long btime = 0;
      FILE *st = fopen("/proc/stat", "r");
      if (st) {
        char line[256];
        while (fgets(line, sizeof line, st))
          if (sscanf(line, "btime %llu", &btime) == 1) break;
        fclose(st);
      }
      if (btime)
        putf(b,
             "# HELP process_start_time_seconds Start time of the process since the epoch, in "
             "seconds.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds "
             "%.2f\n",
             (double)btime + (double)start / (double)tick);
    }
  }
  f = fopen("/proc/self/statm", "r");
  if (f) {
    unsigned long long vsz = 0, rss = 0;
    if (fscanf(f, "%llu %llu", &vsz, &rss) == 2 && page > 0) {
      putf(b,
           "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
           "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %llu\n",
           rss * (unsigned long long)page);
      putf(b,
           "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
           "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %llu\n",
           vsz * (unsigned long long)page);
    }
    fclose(f);
  }
  DIR *d = opendir("/proc/self/fd");
  if (d) {
    unsigned n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
      if (e->d_name[0] != '.') n++;
    closedir(d);
    putf(b,
         "# HELP process_open_fds Number of open file descriptors.\n"
         "# TYPE process_open_fds gauge\nprocess_open_fds %u\n",
         n > 0 ? n - 1 : 0); /* less the one opendir holds */
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
    putf(b,
         "# HELP process_max_fds Maximum number of open file descriptors.\n"
         "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n",
         (unsigned long long)rl.rlim_cur);
}

static void render_reviews(server *srv, json_buf *b) {
  if (!srv->reviews) return;
  putf(b,
       "# HELP verdict_reviews_pending Decisions waiting for a reviewer's outcome.\n"
       "# TYPE verdict_reviews_pending gauge\nverdict_reviews_pending %zu\n"
       "# HELP verdict_reviews_dropped_total Decisions that left the review queue unanswered: "
       "past its bound (%d), the oldest first.\n"
       "# TYPE verdict_reviews_dropped_total counter\nverdict_reviews_dropped_total %llu\n",
       reviews_pending(srv->reviews), REVIEWS_MAX_PENDING,
       (unsigned long long)reviews_dropped(srv->reviews));
  static const char *const okeys[3] = {"action", NULL, NULL};
  PUT_LIT(b,
          "# HELP verdict_review_outcomes_total Review outcomes recorded, by the reviewer's "
          "action.\n# TYPE verdict_review_outcomes_total counter\n");
  render_table(srv, b, offsetof(metrics, outcomes), "verdict_review_outcomes_total", okeys);
  putf(b,
       "# HELP verdict_review_outcomes_unlabelled_total Outcomes past the label-set table.\n"
       "# TYPE verdict_review_outcomes_unlabelled_total counter\n"
       "verdict_review_outcomes_unlabelled_total %llu\n",
       (unsigned long long)sum_field(srv, offsetof(metrics, outcomes.overflow)));
  render_hist(srv, b, offsetof(metrics, review_time), "verdict_review_duration_seconds",
              "Time from a decision to its reviewer's outcome.", &review_buckets);
}

void metrics_table_count(metrics_table *t, const char *const l[3]) { table_count(t, l); }
void metrics_hist_observe(metrics_hist *h, uint64_t ns) { hist_observe(h, &latency_buckets, ns); }

/* One table with its own single writer (not summed over workers). */
void metrics_render_table(json_buf *b, metrics_table *t, const char *name,
                          const char *const keys[3]) {
  uint32_t n = atomic_load_explicit(&t->nseries, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++) {
    metrics_series *s = &t->series[i];
    json_buf_put(b, name, strlen(name));
    for (int k = 0; k < 3 && keys[k]; k++) {
      json_buf_putc(b, k ? ',' : '{');
      json_buf_put(b, keys[k], strlen(keys[k]));
      PUT_LIT(b, "=\"");
      put_label(b, s->label[k]);
      json_buf_putc(b, '"');
    }
    putf(b, "} %llu\n", (unsigned long long)get(&s->count));
  }
}

void metrics_render_hist_lines(json_buf *b, metrics_hist *h, const char *name,
                               const char *labels) {
  hist_sum s = {0};
  hist_add(&s, h);
  render_hist_lines(b, name, labels, &latency_buckets, &s);
}

void metrics_render_hist(json_buf *b, metrics_hist *h, const char *name, const char *help) {
  putf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  hist_sum s = {0};
  hist_add(&s, h);
  render_hist_lines(b, name, "", &latency_buckets, &s);
}

void metrics_render(server *srv, json_buf *b) {
  render_decisions(srv, b);
  render_http(srv, b);
  render_reviews(srv, b);
  render_engine(srv, b);
  ship_thread_render(srv, b);
  putf(b,
       "# HELP verdict_reloads_total Bundle reloads, by result.\n"
       "# TYPE verdict_reloads_total counter\nverdict_reloads_total{result=\"ok\"} %llu\n"
       "verdict_reloads_total{result=\"failed\"} %llu\n",
       (unsigned long long)atomic_load(&srv->reloads),
       (unsigned long long)atomic_load(&srv->reload_failures));
  rollout_metrics(srv, b);
  bundle_pull_metrics(srv->pull, b);
  render_process(b);
}
