/* snapshots_stats.c — `verdict snapshots stats`: what a snapshot folder
 * holds and what its retention will need.
 *
 * Disk bytes come from the files (per UTC day of the segments); per record
 * and per strategy the counts come from reading every record (the strategy
 * is in the JSON, so each payload is parsed). The bytes of a record are its
 * frame's (header, strings, payload); the folder's disk bytes over its
 * frames' bytes is the ratio that turns a record's bytes into disk bytes
 * (1 for uncompressed segments, plus the indexes).
 *
 * The projection, at the current rate (the records of the full window over
 * the time they cover): the full window holds rate × keep_days records;
 * each day after it, the share the retention keeps longer (every record
 * read is put to the rule as if it were old) stays for good. So the disk
 * the retention needs grows by that much a day; the figures at 30 and 365
 * days say how fast. Without --retention the built-in rule is projected. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/arena.h"
#include "core/clock.h"
#include "core/json.h"
#include "policy/retention.h"
#include "snapshot/snapshot.h"

#define NS_PER_DAY 86400e9

typedef struct group {
  char name[128];
  uint64_t records, bytes, kept, kept_bytes;
} group;

typedef struct tally {
  group *g;
  size_t n, cap;
} tally;

static group *tally_get(tally *t, const char *name, size_t len) {
  if (len >= sizeof t->g[0].name) len = sizeof t->g[0].name - 1;
  for (size_t i = 0; i < t->n; i++)
    if (strlen(t->g[i].name) == len && !memcmp(t->g[i].name, name, len)) return &t->g[i];
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 16;
    group *p = realloc(t->g, cap * sizeof *p);
    if (!p) return NULL;
    t->g = p;
    t->cap = cap;
  }
  group *g = &t->g[t->n++];
  memset(g, 0, sizeof *g);
  memcpy(g->name, name, len);
  return g;
}

static void put_group(json_buf *b, const char *key, const tally *t, double ratio) {
  json_buf_putc(b, ',');
  json_write_string(b, key, strlen(key));
  json_buf_put(b, ":[", 2);
  for (size_t i = 0; i < t->n; i++) {
    const group *g = &t->g[i];
    char num[256];
    if (i) json_buf_putc(b, ',');
    json_buf_put(b, "{\"name\":", 8);
    json_write_string(b, g->name, strlen(g->name));
    snprintf(num, sizeof num,
             ",\"records\":%llu,\"bytes\":%.0f,\"bytes_per_snapshot\":%.1f,\"kept_share\":%.6f}",
             (unsigned long long)g->records, (double)g->bytes * ratio,
             g->records ? (double)g->bytes * ratio / (double)g->records : 0.0,
             g->records ? (double)g->kept / (double)g->records : 0.0);
    json_buf_put(b, num, strlen(num));
  }
  json_buf_putc(b, ']');
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const group *)a)->name, ((const group *)b)->name);
}

static void human(double bytes, char *out, size_t cap) {
  const char *u[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int i = 0;
  while (bytes >= 1000 && i < 5) bytes /= 1000, i++;
  snprintf(out, cap, i ? "%.1f %s" : "%.0f %s", bytes, u[i]);
}

int cli_snapshots_stats(const char *dir, const char *retention_file, int as_json) {
  char err[SNAPSHOT_ERRLEN];
  retention *ret = NULL;
  if (retention_file && cli_retention_load("snapshots stats", retention_file, &ret) != 0) return 1;
  snapshot_gc_opts go;
  snapshot_gc_opts_init(&go);
  double keep_days = ret ? retention_keep_days(ret) : go.keep_days;
  snapshot_day_usage *days = NULL;
  size_t ndays = 0;
  if (snapshot_folder_usage(dir, &days, &ndays, err, sizeof err) < 0) {
    fprintf(stderr, "verdict snapshots stats: %s\n", err);
    retention_free(ret);
    return 1;
  }
  snapshot_reader *r;
  if (snapshot_reader_open(dir, NULL, &r, err, sizeof err) < 0) {
    fprintf(stderr, "verdict snapshots stats: %s\n", err);
    free(days);
    retention_free(ret);
    return 1;
  }
  int64_t now = clock_wall_ns(), cutoff = now - (int64_t)(keep_days * NS_PER_DAY);
  tally strategies = {0}, record_days = {0};
  uint64_t records = 0, frame_bytes = 0, kept = 0, kept_bytes = 0, window = 0;
  int64_t first = 0, last = 0, window_first = 0;
  arena a;
  arena_init(&a, NULL, 0, 0);
  snapshot_rec rec;
  int k, oom = 0;
  while ((k = snapshot_reader_next(r, &rec)) == 1) {
    uint64_t bytes = 8 + 42 + rec.point_len + rec.action_len + rec.policy_version_len +
                     rec.payload_len; /* the frame: docs/snapshots.md, "Frame", "Body" */
    records++;
    frame_bytes += bytes;
    if (!first || rec.time_ns < first) first = rec.time_ns;
    if (rec.time_ns > last) last = rec.time_ns;
    if (rec.time_ns >= cutoff) {
      window++;
      if (!window_first || rec.time_ns < window_first) window_first = rec.time_ns;
    }
    /* would the retention keep it once old? */
    int keeps =
        ret ? retention_keeps(ret, snapshot_sample_point(rec.id), rec.payload, rec.payload_len)
            : snapshot_gc_keeps(&go, &rec);
    kept += (uint64_t)keeps;
    kept_bytes += keeps ? bytes : 0;
    /* its strategy, from the JSON */
    arena_reset(&a);
    value root;
    json_opts jo = {.lenient = 1, .duplicates = JSON_DUP_LAST_WINS};
    const value *sv = NULL;
    if (json_parse(&a, rec.payload, rec.payload_len, &jo, &root, NULL) == 0)
      sv = value_map_get(&root, "strategy", 8);
    group *g = sv && sv->kind == V_STRING ? tally_get(&strategies, sv->s, sv->n)
                                          : tally_get(&strategies, "(none)", 6);
    char day[16];
    time_t sec = (time_t)(rec.time_ns / 1000000000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    strftime(day, sizeof day, "%Y-%m-%d", &tm);
    group *d = tally_get(&record_days, day, strlen(day));
    if (!g || !d) {
      oom = 1;
      break;
    }
    g->records++, d->records++;
    g->bytes += bytes, d->bytes += bytes;
    g->kept += (uint64_t)keeps, d->kept += (uint64_t)keeps;
  }
  arena_free(&a);
  int rc = 0;
  if (k < 0 || oom) {
    fprintf(stderr, "verdict snapshots stats: %s\n",
            oom ? "out of memory" : snapshot_reader_error(r));
    rc = 1;
  }
  snapshot_reader_close(r);
  uint64_t disk = 0;
  for (size_t i = 0; i < ndays; i++) disk += days[i].bytes;
  double ratio = frame_bytes ? (double)disk / (double)frame_bytes : 1.0;
  /* the rate: the full window's records over the time they cover */
  double span_days = window > 1 ? (double)(last - window_first) / NS_PER_DAY : 0;
  double rate = span_days > 0 ? (double)window / span_days : 0; /* records a day */
  double per_record = records ? (double)disk / (double)records : 0;
  double kept_share = records ? (double)kept / (double)records : 0;
  double kept_per_record = kept ? (double)kept_bytes * ratio / (double)kept : 0;
  double window_bytes = rate * keep_days * per_record;
  double growth = rate * kept_share * kept_per_record; /* bytes a day, for good */
  double at30 = window_bytes + growth * fmax(0, 30 - keep_days);
  double at365 = window_bytes + growth * fmax(0, 365 - keep_days);
  qsort(strategies.g, strategies.n, sizeof *strategies.g, by_name);
  if (rc == 0 && as_json) {
    json_buf b;
    json_buf_init(&b, NULL);
    char num[512];
    json_buf_put(&b, "{\"folder\":", 10);
    json_write_string(&b, dir, strlen(dir));
    snprintf(num, sizeof num,
             ",\"records\":%llu,\"disk_bytes\":%llu,\"bytes_per_snapshot\":%.1f,"
             "\"first_ns\":%lld,\"last_ns\":%lld,\"days\":[",
             (unsigned long long)records, (unsigned long long)disk, per_record, (long long)first,
             (long long)last);
    json_buf_put(&b, num, strlen(num));
    for (size_t i = 0; i < ndays; i++) {
      group *d = NULL;
      char day[16];
      snprintf(day, sizeof day, "%04u-%02u-%02u", days[i].day / 10000, days[i].day / 100 % 100,
               days[i].day % 100);
      for (size_t j = 0; j < record_days.n; j++)
        if (!strcmp(record_days.g[j].name, day)) d = &record_days.g[j];
      snprintf(num, sizeof num,
               "%s{\"day\":\"%s\",\"segments\":%u,\"disk_bytes\":%llu,\"records\":%llu,"
               "\"bytes_per_snapshot\":%.1f}",
               i ? "," : "", day, days[i].segments, (unsigned long long)days[i].bytes,
               (unsigned long long)(d ? d->records : 0),
               d && d->records ? (double)days[i].bytes / (double)d->records : 0.0);
      json_buf_put(&b, num, strlen(num));
    }
    json_buf_putc(&b, ']');
    put_group(&b, "strategies", &strategies, ratio);
    snprintf(num, sizeof num,
             ",\"projection\":{\"retention\":%s%s%s,\"keep_days\":%g,\"rate_per_day\":%.1f,"
             "\"kept_share\":%.6f,\"window_bytes\":%.0f,\"kept_bytes_per_day\":%.0f,"
             "\"bytes_at_30_days\":%.0f,\"bytes_at_365_days\":%.0f}}\n",
             retention_file ? "\"" : "", retention_file ? retention_file : "null",
             retention_file ? "\"" : "", keep_days, rate, kept_share, window_bytes, growth, at30,
             at365);
    json_buf_put(&b, num, strlen(num));
    fwrite(b.data, 1, b.len, stdout);
    json_buf_free(&b);
  } else if (rc == 0) {
    char h1[32], h2[32], h3[32], h4[32];
    human((double)disk, h1, sizeof h1);
    printf("%s: %llu snapshots, %s on disk, %.0f bytes a snapshot\n", dir,
           (unsigned long long)records, h1, per_record);
    printf("\nby day (UTC)  segments  disk        snapshots  bytes/snapshot\n");
    for (size_t i = 0; i < ndays; i++) {
      char day[16];
      uint64_t nrec = 0;
      snprintf(day, sizeof day, "%04u-%02u-%02u", days[i].day / 10000, days[i].day / 100 % 100,
               days[i].day % 100);
      for (size_t j = 0; j < record_days.n; j++)
        if (!strcmp(record_days.g[j].name, day)) nrec = record_days.g[j].records;
      human((double)days[i].bytes, h1, sizeof h1);
      printf("%-13s %8u  %-10s  %9llu  %14.0f\n", day, days[i].segments, h1,
             (unsigned long long)nrec, nrec ? (double)days[i].bytes / (double)nrec : 0.0);
    }
    printf("\nby strategy          snapshots  disk        bytes/snapshot  kept when old\n");
    for (size_t i = 0; i < strategies.n; i++) {
      const group *g = &strategies.g[i];
      human((double)g->bytes * ratio, h1, sizeof h1);
      printf("%-20s %9llu  %-10s  %14.0f  %12.1f%%\n", g->name, (unsigned long long)g->records, h1,
             g->records ? (double)g->bytes * ratio / (double)g->records : 0.0,
             g->records ? 100.0 * (double)g->kept / (double)g->records : 0.0);
    }
    printf("\nprojection under %s (keep_days %g):\n",
           retention_file ? retention_file : "the built-in rule", keep_days);
    if (rate <= 0) {
      printf("  not enough time covered by the full window's snapshots to measure a rate\n");
    } else {
      human(window_bytes, h1, sizeof h1);
      human(growth, h2, sizeof h2);
      human(at30, h3, sizeof h3);
      human(at365, h4, sizeof h4);
      printf(
          "  at %.0f snapshots a day: the full window holds %s; %.1f%% kept longer adds %s a "
          "day\n",
          rate, h1, 100 * kept_share, h2);
      printf("  after 30 days %s, after 365 days %s\n", h3, h4);
    }
  }
  free(strategies.g);
  free(record_days.g);
  free(days);
  uint64_t errors = 0;
  const char *first_err = "";
  if (ret) errors = retention_errors(ret, &first_err);
  if (errors)
    fprintf(stderr,
            "verdict snapshots stats: warning: the retention conditions failed on %llu "
            "snapshot reading%s (counted as kept); the first: %s\n",
            (unsigned long long)errors, errors == 1 ? "" : "s", first_err);
  retention_free(ret);
  return rc;
}
