/* bench-snapshots — what recording every decision costs, and how fast the
 * record can be read back and replayed.
 *
 *  1. decide throughput with snapshots off and on (durability interval, the
 *     default), in one run, rounds interleaved off/on/off/on so that a noisy
 *     neighbour hits both alike: decisions/s of each and the overhead
 *     (target: recording costs <= 10%);
 *  2. sustained snapshots/s written: deciding flat out with snapshots on for
 *     a few seconds, then closing the engine (which drains the queue and
 *     syncs), counted from the log's own counters; bytes per snapshot;
 *  3. replay throughput per core over that log: reading the records alone
 *     (the ceiling), replay_run re-deciding each under its recorded version,
 *     and replay_run feeding the scorer (what `verdict replay` does), as
 *     snapshots per CPU-second of the replaying thread (target: >= 500k).
 *
 * Requests: a JSON Lines file (`verdict gen` makes realistic ones), or the
 * sample requests in examples/requests/ (those the bundle refuses are
 * skipped). Decisions run on one thread; the snapshot writer is the
 * engine's own thread.
 *
 *   bench-snapshots [--requests FILE.jsonl] [--rounds N] [--seconds S] [--policy DIR]
 *
 * For instruction counts, which a noisy machine does not blur, one mode runs
 * only the deciding loop (after a warm-up pass), with snapshots off or on,
 * for callgrind to count on the deciding thread alone:
 *
 *   valgrind --tool=callgrind --separate-threads=yes --toggle-collect=measured_pass \
 *     bench-snapshots --instructions on [--requests FILE.jsonl]
 *
 * then instructions a decision = the main thread's Ir / the decisions printed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../bench.h"
#include "replay/replay.h"
#include "replay/score.h"
#include "snapshot/snapshot.h"
#include "verdict.h"

#ifndef VD_SOURCE_DIR
#define VD_SOURCE_DIR "."
#endif

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- requests ---- */

typedef struct reqs {
  char **text;
  size_t *len;
  size_t n, cap;
} reqs;

static void reqs_add(reqs *r, const char *s, size_t n) {
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 256;
    r->text = realloc(r->text, r->cap * sizeof *r->text);
    r->len = realloc(r->len, r->cap * sizeof *r->len);
    if (!r->text || !r->len) abort();
  }
  r->text[r->n] = strndup(s, n);
  r->len[r->n] = n;
  if (!r->text[r->n]) abort();
  r->n++;
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)sz + 1);
  if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
    free(b);
    b = NULL;
  }
  fclose(f);
  if (b) b[sz] = 0;
  if (n) *n = (size_t)sz;
  return b;
}

static int load_requests(const char *file, reqs *r) {
  if (file) {
    size_t n;
    char *b = slurp(file, &n);
    if (!b) return -1;
    for (char *p = b; *p;) {
      char *e = strchr(p, '\n');
      size_t l = e ? (size_t)(e - p) : strlen(p);
      if (l) reqs_add(r, p, l);
      p += l + (e ? 1 : 0);
    }
    free(b);
    return 0;
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/examples/requests", VD_SOURCE_DIR);
  DIR *d = opendir(dir);
  if (!d) return -1;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    if (l < 6 || strcmp(de->d_name + l - 5, ".json")) continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    size_t n;
    char *b = slurp(path, &n);
    if (b) reqs_add(r, b, n);
    free(b);
  }
  closedir(d);
  return 0;
}

/* Drops the requests the bundle refuses (they make no snapshot). */
static void keep_decidable(vd_engine *e, reqs *r) {
  vd_decision *d = vd_decision_new();
  vd_error err;
  size_t k = 0;
  for (size_t i = 0; i < r->n; i++) {
    if (vd_decide_json(e, r->text[i], (long)r->len[i], d, &err) == 0) {
      r->text[k] = r->text[i];
      r->len[k++] = r->len[i];
    } else {
      free(r->text[i]);
    }
  }
  r->n = k;
  vd_decision_free(d);
}

/* ---- scratch folders ---- */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(p) : unlink(p);
}
static void rm_rf(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static uint64_t dir_bytes(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  uint64_t n = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (strncmp(de->d_name, "seg-", 4) != 0) continue; /* segments and their indexes */
    char p[8192];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    if (stat(p, &st) == 0) n += (uint64_t)st.st_size;
  }
  closedir(d);
  return n;
}

/* Appends the records of from (all, or the first `limit`) to log. */
static uint64_t copy_records(const char *from, snapshot_log *log, uint64_t skip, uint64_t limit) {
  snapshot_reader *rd;
  if (snapshot_reader_open(from, NULL, &rd, NULL, 0) != 0) return 0;
  snapshot_rec rec;
  uint64_t n = 0, i = 0;
  while (n < limit && snapshot_reader_next(rd, &rec) == 1)
    if (i++ >= skip && snapshot_log_append(log, &rec, NULL) == 0) n++;
  snapshot_reader_close(rd);
  return n;
}

/* What compaction costs: on the writer thread, the records of plain_dir
 * written again with compression (rotations and the close compact); and on
 * the inline writer (`verdict decide`, hooks), one process's open, append,
 * close on a folder whose newest segment then holds a block's worth of plain
 * frames (that close compacts) against one where it does not. */
static int compaction_report(const char *plain_dir) {
  char dir[4300];
  snprintf(dir, sizeof dir, "%s-again", plain_dir);
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  snapshot_log *log;
  char err[SNAPSHOT_ERRLEN];
  if (snapshot_log_open(dir, &o, &log, err, sizeof err) != 0) {
    fprintf(stderr, "bench-snapshots: %s\n", err);
    return -1;
  }
  uint64_t n = copy_records(plain_dir, log, 0, UINT64_MAX);
  snapshot_log_status st;
  snapshot_log_close(log, &st);
  printf(
      "   compaction (writer)  %10.1f ms CPU (%.1f ms wall) for %llu segments, %.1f MiB -> "
      "%.1f MiB: %.2f us CPU a snapshot\n",
      (double)st.compact_cpu_ns / 1e6, (double)st.compact_ns / 1e6,
      (unsigned long long)st.compactions, (double)st.compact_in / 1048576.0,
      (double)st.compact_out / 1048576.0, n ? (double)st.compact_cpu_ns / 1e3 / (double)n : 0);
  /* inline: a compacted segment of 2,000 records, then one-record processes
   * (their records read beforehand, so only the log's work is timed) */
  rm_rf(dir);
  o.inline_writer = 1;
  o.durability = SNAPSHOT_DURABLE_INTERVAL; /* verdict decide's */
  if (snapshot_log_open(dir, &o, &log, err, sizeof err) != 0) return -1;
  copy_records(plain_dir, log, 0, 2000);
  snapshot_log_close(log, &st);
  enum { ONE = 400 };
  snapshot_rec *recs = calloc(ONE, sizeof *recs);
  char **bufs = calloc(ONE, sizeof *bufs);
  snapshot_reader *rd;
  size_t have = 0;
  if (snapshot_reader_open(plain_dir, NULL, &rd, NULL, 0) == 0) {
    snapshot_rec rec;
    for (uint64_t i = 0; have < ONE && snapshot_reader_next(rd, &rec) == 1; i++) {
      if (i < 2000) continue;
      size_t sz = rec.point_len + rec.action_len + rec.policy_version_len + rec.payload_len;
      char *b = bufs[have] = malloc(sz ? sz : 1);
      recs[have] = rec;
      memcpy(b, rec.point, rec.point_len);
      recs[have].point = b;
      memcpy(b += rec.point_len, rec.action, rec.action_len);
      recs[have].action = b;
      memcpy(b += rec.action_len, rec.policy_version, rec.policy_version_len);
      recs[have].policy_version = b;
      memcpy(b += rec.policy_version_len, rec.payload, rec.payload_len);
      recs[have++].payload = b;
    }
    snapshot_reader_close(rd);
  }
  double plain_ms = 0, compact_ms = 0, plain_cpu = 0, compact_cpu = 0;
  uint64_t compact_ns = 0, runs = 0, compactions = 0;
  for (size_t i = 0; i < have && compactions < 3; i++) {
    double t0 = mono_s(), c0 = thread_cpu_s();
    if (snapshot_log_open(dir, &o, &log, err, sizeof err) != 0) break;
    snapshot_log_append(log, &recs[i], NULL);
    snapshot_log_close(log, &st);
    double ms = (mono_s() - t0) * 1e3, cpu = (thread_cpu_s() - c0) * 1e3;
    runs++;
    if (st.compactions) {
      compactions++;
      compact_ms += ms;
      compact_cpu += cpu;
      compact_ns += st.compact_ns;
    } else {
      plain_ms += ms;
      plain_cpu += cpu;
    }
  }
  uint64_t plain_runs = runs - compactions;
  printf(
      "   compaction (inline)  1 process in %.0f compacts: open+append+close %.2f ms "
      "(%.2f ms CPU) without, %.2f ms (%.2f ms CPU) with, the compaction %.2f ms of it\n",
      compactions ? (double)runs / (double)compactions : 0,
      plain_runs ? plain_ms / (double)plain_runs : 0,
      plain_runs ? plain_cpu / (double)plain_runs : 0,
      compactions ? compact_ms / (double)compactions : 0,
      compactions ? compact_cpu / (double)compactions : 0,
      compactions ? (double)compact_ns / 1e6 / (double)compactions : 0);
  for (size_t i = 0; i < have; i++) free(bufs[i]);
  free(bufs);
  free(recs);
  rm_rf(dir);
  return 0;
}

/* The same records as plain frames: their bytes, and a copy written with
 * compression off (compress_level 0) to compare lookups by id with. Then
 * lookups by id in both, over the same ids, and the ratio. */
static int compression_report(const char *dir, const char *plain_dir, uint64_t decided) {
  snapshot_reader *rd;
  char err[SNAPSHOT_ERRLEN];
  if (snapshot_reader_open(dir, NULL, &rd, err, sizeof err) != 0) {
    fprintf(stderr, "bench-snapshots: %s\n", err);
    return -1;
  }
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  o.compress_level = 0;
  snapshot_log *log;
  if (snapshot_log_open(plain_dir, &o, &log, err, sizeof err) != 0) {
    fprintf(stderr, "bench-snapshots: %s\n", err);
    snapshot_reader_close(rd);
    return -1;
  }
  size_t n = 0, cap = 1024;
  uint8_t(*ids)[16] = malloc(cap * 16);
  uint64_t frames = 0;
  snapshot_rec rec;
  while (snapshot_reader_next(rd, &rec) == 1) {
    frames += 8 + 42 + rec.point_len + rec.action_len + rec.policy_version_len + rec.payload_len;
    if (n == cap) ids = realloc(ids, (cap *= 2) * 16);
    memcpy(ids[n++], rec.id, 16);
    while (snapshot_log_append(log, &rec, NULL) == SNAPSHOT_EFULL) {
    }
  }
  snapshot_reader_close(rd);
  snapshot_log_close(log, NULL);
  uint64_t on_disk = dir_bytes(dir), plain = dir_bytes(plain_dir);
  printf(
      "   compressed           %10.1f MiB of frames -> %.1f MiB on disk: ratio %.1f "
      "(uncompressed copy %.1f MiB, %.0f bytes a snapshot)\n",
      (double)frames / 1048576.0, (double)on_disk / 1048576.0,
      on_disk ? (double)frames / (double)on_disk : 0, (double)plain / 1048576.0,
      decided ? (double)plain / (double)decided : 0);
  /* lookups: the same pseudo-random ids in each folder, a fresh reader each */
  enum { LOOKUPS = 2000 };
  double us[2] = {0, 0};
  uint64_t found[2] = {0, 0};
  const char *dirs[2] = {plain_dir, dir};
  for (int pass = 0; pass < 2 && n; pass++) {
    for (int d = 0; d < 2; d++) {
      if (snapshot_reader_open(dirs[d], NULL, &rd, err, sizeof err) != 0) continue;
      uint64_t x = 0x9E3779B97F4A7C15ull;
      double t0 = mono_s();
      for (int i = 0; i < LOOKUPS; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        found[d] += snapshot_reader_find(rd, ids[x % n], &rec) == 1;
      }
      double t = (mono_s() - t0) * 1e6 / LOOKUPS;
      if (us[d] == 0 || t < us[d]) us[d] = t; /* the better of two passes */
      snapshot_reader_close(rd);
    }
  }
  printf(
      "   lookup by id         %10.1f us plain, %.1f us compressed (x%.2f); found %llu and "
      "%llu of %d\n",
      us[0], us[1], us[0] > 0 ? us[1] / us[0] : 0, (unsigned long long)found[0] / 2,
      (unsigned long long)found[1] / 2, LOOKUPS);
  free(ids);
  return compaction_report(plain_dir);
}

static vd_engine *open_engine(const char *policy, const char *store, const char *snaps) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = store;
  o.snapshots_dir = snaps; /* NULL: off */
  o.snapshot_durability = VD_DURABILITY_INTERVAL;
  vd_engine *e;
  vd_error err;
  if (vd_engine_open(policy, &o, &e, &err) != 0) {
    fprintf(stderr, "bench-snapshots: %s\n", err.message);
    exit(1);
  }
  return e;
}

/* One pass over the requests, each decided and its answer rendered as a
 * caller would send it (with snapshots on, the render is reused from the
 * recording); returns decisions/s. */
/* CPU seconds of the whole process (every thread: the snapshot writer too). */
static double process_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU per decision of the last decide_pass: the deciding thread's, and the
 * rest of the process's (the snapshot writer's, with snapshots on). */
static double pass_thread_us, pass_other_us;

static double decide_pass(vd_engine *e, vd_decision *d, const reqs *r, size_t reps) {
  vd_error err;
  const char *out;
  size_t out_len;
  size_t bytes = 0;
  double c0 = thread_cpu_s(), p0 = process_cpu_s();
  double t0 = mono_s();
  for (size_t k = 0; k < reps; k++)
    for (size_t i = 0; i < r->n; i++) {
      if (vd_decide_json(e, r->text[i], (long)r->len[i], d, &err) != 0) {
        fprintf(stderr, "bench-snapshots: a request was refused: %s\n", err.message);
        exit(1);
      }
      if (vd_decision_render(d, 0, &out, &out_len) == 0) bytes += out_len;
    }
  double rate = (double)(reps * r->n) / (mono_s() - t0);
  double ct = thread_cpu_s() - c0, cp = process_cpu_s() - p0;
  pass_thread_us = ct * 1e6 / (double)(reps * r->n);
  pass_other_us = (cp - ct) * 1e6 / (double)(reps * r->n);
  if (bytes == 0) fprintf(stderr, "bench-snapshots: no answer was rendered\n");
  return rate;
}

/* The loop callgrind counts (--toggle-collect=measured_pass). */
__attribute__((noinline)) static void measured_pass(vd_engine *e, vd_decision *d, const reqs *r) {
  decide_pass(e, d, r, 1);
}

/* ---- replay ---- */

static int count_cb(void *user, const replay_item *it) {
  uint64_t *n = user;
  (*n)++;
  (void)it;
  return 0;
}

static int score_cb(void *user, const replay_item *it) { return score_add(user, it) < 0; }

int main(int argc, char **argv) {
  const char *req_file = NULL;
  char policy[4096];
  snprintf(policy, sizeof policy, "%s/examples/policies", VD_SOURCE_DIR);
  int rounds = 7;
  double seconds = 3;
  const char *instructions = NULL; /* "off" | "on": the callgrind mode */
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--requests") && i + 1 < argc)
      req_file = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
      seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--policy") && i + 1 < argc)
      snprintf(policy, sizeof policy, "%s", argv[++i]);
    else if (!strcmp(argv[i], "--instructions") && i + 1 < argc &&
             (!strcmp(argv[i + 1], "off") || !strcmp(argv[i + 1], "on")))
      instructions = argv[++i];
    else {
      fprintf(stderr,
              "usage: bench-snapshots [--requests FILE.jsonl] [--rounds N] [--seconds S] "
              "[--policy DIR] [--instructions off|on]\n");
      return 2;
    }
  }
  if (rounds < 1) rounds = 1;

  char tmpl[1024];
  char *tmp = bench_tmpdir(tmpl, sizeof tmpl, "snapshots");
  if (!tmp) return 1;
  char store[4200], snaps_a[4200], snaps_b[4200], snaps_plain[4200];
  snprintf(store, sizeof store, "%s/versions", tmp);
  snprintf(snaps_a, sizeof snaps_a, "%s/snaps-rounds", tmp);
  snprintf(snaps_b, sizeof snaps_b, "%s/snapshots", tmp);
  snprintf(snaps_plain, sizeof snaps_plain, "%s/snapshots-plain", tmp);

  reqs r = {0};
  if (load_requests(req_file, &r) < 0) {
    fprintf(stderr, "bench-snapshots: cannot read the requests\n");
    return 1;
  }
  vd_engine *off = open_engine(policy, store, NULL);
  keep_decidable(off, &r);
  if (!r.n) {
    fprintf(stderr, "bench-snapshots: no request decides\n");
    return 1;
  }
  if (instructions) {
    vd_engine *e = strcmp(instructions, "on") == 0 ? open_engine(policy, store, snaps_a) : off;
    vd_decision *d = vd_decision_new();
    decide_pass(e, d, &r, 1); /* warm */
    measured_pass(e, d, &r);
    printf("bench-snapshots: snapshots %s, %zu decisions measured\n", instructions, r.n);
    vd_decision_free(d);
    if (e != off) vd_engine_close(e);
    vd_engine_close(off);
    rm_rf(tmp);
    return 0;
  }
  size_t reps = r.n >= 20000 ? 1 : (20000 + r.n - 1) / r.n; /* >= 20k decisions a round */
  printf("bench-snapshots: %zu requests (%s), %zu decisions a round, %d rounds each\n", r.n,
         req_file ? req_file : "examples/requests", reps * r.n, rounds);

  /* ---- 1. off vs on, interleaved ---- */
  vd_engine *on = open_engine(policy, store, snaps_a);
  vd_decision *d = vd_decision_new();
  decide_pass(off, d, &r, 1); /* warm both */
  decide_pass(on, d, &r, 1);
  double *v_off = calloc((size_t)rounds, sizeof(double)),
         *v_on = calloc((size_t)rounds, sizeof(double));
  double *cpu_off = calloc((size_t)rounds, sizeof(double)),
         *cpu_on = calloc((size_t)rounds, sizeof(double)),
         *cpu_writer = calloc((size_t)rounds, sizeof(double));
  for (int k = 0; k < rounds; k++) {
    v_off[k] = decide_pass(off, d, &r, reps);
    cpu_off[k] = pass_thread_us;
    v_on[k] = decide_pass(on, d, &r, reps);
    cpu_on[k] = pass_thread_us;
    cpu_writer[k] = pass_other_us;
  }
  vd_engine_counters c;
  vd_engine_stats(on, &c);
  double m_off = median(v_off, rounds), m_on = median(v_on, rounds);
  printf("\n1. decide throughput, one thread (median of %d rounds)\n", rounds);
  printf("   snapshots off        %10.0f decisions/s\n", m_off);
  printf("   snapshots interval   %10.0f decisions/s\n", m_on);
  printf("   cost of recording    %9.1f%%   (target <= 10%%)\n", 100.0 * (1.0 - m_on / m_off));
  /* CPU, not wall time: what recording adds to the deciding thread's own
   * work, and what the writer thread spends beside it. On a machine with
   * a core free for the writer, the first is what throughput loses. */
  double u_off = median(cpu_off, rounds), u_on = median(cpu_on, rounds);
  printf("   deciding thread CPU  %9.2f us off, %.2f us on a decision: +%.1f%%\n", u_off, u_on,
         100.0 * (u_on / u_off - 1.0));
  printf("   writer thread CPU    %9.2f us a snapshot (CRC, write, fsync)\n",
         median(cpu_writer, rounds));
  printf("   dropped %llu, failed %llu, queue depth at the end %llu\n", c.snapshots_dropped,
         c.snapshots_failed, c.snapshot_queue_depth);
  vd_engine_close(on);
  vd_engine_close(off);

  /* ---- 2. sustained writing ---- */
  on = open_engine(policy, store, snaps_b);
  double t0 = mono_s();
  uint64_t decided = 0;
  vd_error err;
  while (mono_s() - t0 < seconds)
    for (size_t i = 0; i < r.n; i++, decided++)
      vd_decide_json(on, r.text[i], (long)r.len[i], d, &err);
  double t_decide = mono_s() - t0;
  vd_engine_stats(on, &c);
  uint64_t written_at_end = c.snapshots_written;
  vd_engine_close(on); /* drains and syncs */
  double t_all = mono_s() - t0;
  uint64_t bytes = dir_bytes(snaps_b);
  printf("\n2. sustained recording (%.1f s flat out, then close: drain + sync)\n", seconds);
  printf("   decided              %10llu  (%.0f/s)\n", (unsigned long long)decided,
         (double)decided / t_decide);
  printf("   written when deciding stopped %llu; all %llu written by the close\n",
         (unsigned long long)written_at_end, (unsigned long long)decided);
  printf("   snapshots/s written  %10.0f  (including the drain)\n", (double)decided / t_all);
  printf("   on disk              %10.1f MiB, %.0f bytes a snapshot\n", (double)bytes / 1048576.0,
         decided ? (double)bytes / (double)decided : 0);
  if (compression_report(snaps_b, snaps_plain, decided) < 0) return 1;

  /* ---- 3. replay ---- */
  printf("\n3. replay throughput over those %llu snapshots, one thread\n",
         (unsigned long long)decided);
  /* reading alone */
  snapshot_reader *rd;
  char rerr[SNAPSHOT_ERRLEN];
  double best_read = 0, best_replay = 0, best_score = 0, wall_replay = 0;
  for (int k = 0; k < 3; k++) {
    if (snapshot_reader_open(snaps_b, NULL, &rd, rerr, sizeof rerr) != 0) {
      fprintf(stderr, "bench-snapshots: %s\n", rerr);
      return 1;
    }
    snapshot_rec rec;
    uint64_t n = 0, sum = 0;
    double c0 = thread_cpu_s();
    while (snapshot_reader_next(rd, &rec) == 1) {
      n++;
      sum += rec.payload_len;
    }
    double cpu = thread_cpu_s() - c0;
    snapshot_reader_close(rd);
    if (n && (double)n / cpu > best_read) best_read = (double)n / cpu;
    (void)sum;
  }
  replay_opts ro;
  memset(&ro, 0, sizeof ro);
  ro.snapshots_dir = snaps_b;
  ro.store_dir = store;
  for (int k = 0; k < 3; k++) {
    uint64_t n = 0;
    replay_stats st;
    char e2[1024];
    double c0 = thread_cpu_s(), w0 = mono_s();
    if (replay_run(&ro, count_cb, &n, &st, e2, sizeof e2) != 0) {
      fprintf(stderr, "bench-snapshots: %s\n", e2);
      return 1;
    }
    double cpu = thread_cpu_s() - c0, wall = mono_s() - w0;
    if (st.reproduced != st.seen)
      printf("   WARNING: %llu of %llu did not reproduce\n",
             (unsigned long long)(st.seen - st.reproduced), (unsigned long long)st.seen);
    if ((double)n / cpu > best_replay) {
      best_replay = (double)n / cpu;
      wall_replay = (double)n / wall;
    }
  }
  for (int k = 0; k < 3; k++) {
    score_acc *acc = score_new(SCORE_DETERMINISM, NULL, NULL);
    replay_stats st;
    char e2[1024];
    double c0 = thread_cpu_s();
    replay_run(&ro, score_cb, acc, &st, e2, sizeof e2);
    double cpu = thread_cpu_s() - c0;
    if ((double)st.seen / cpu > best_score) best_score = (double)st.seen / cpu;
    score_free(acc);
  }
  printf("   read records only    %10.0f snapshots/s per core (the ceiling)\n", best_read);
  printf("   replay (re-decide)   %10.0f snapshots/s per core (%.0f/s wall)\n", best_replay,
         wall_replay);
  printf("   replay + scoring     %10.0f snapshots/s per core   (target >= 500,000)\n", best_score);

  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("\npeak RSS %.1f MiB\n", (double)ru.ru_maxrss / 1024.0);
  vd_decision_free(d);
  for (size_t i = 0; i < r.n; i++) free(r.text[i]);
  free(r.text);
  free(r.len);
  free(v_off);
  free(v_on);
  rm_rf(tmp);
  return 0;
}
