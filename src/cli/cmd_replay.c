/* cmd_replay.c — `verdict replay`: decide recorded snapshots again and say
 * what that shows.
 *
 *   no --policy, no --against   the determinism check: every snapshot is
 *                               re-decided under its recorded policy version
 *                               and must come out the same; each one that
 *                               does not is printed, and the exit status is 1
 *   --policy NEW_BUNDLE         a candidate bundle scored on recorded traffic:
 *                               what would change, how accurate, how fast
 *   --against URL               another decision service, same traffic
 *
 * The walk is replay_run (or against_run); scoring is score.c and the
 * summary, JSON and HTML come from report.c. This file parses options,
 * draws a progress bar on a terminal, collects the decisions worth listing
 * and picks the exit status. docs/replay.md has the rest. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/timefmt.h"
#include "replay/against.h"
#include "replay/replay.h"
#include "replay/report.h"
#include "replay/score.h"
#include "replay/shard.h"
#include "ship/ship.h"
#include "snapshot/snapshot.h"

const char cmd_replay_help[] =
    "usage: verdict replay --snapshots DIR|--from URL [--policy BUNDLE]... | [--against URL\n"
    "                      [--against-map FIELD=EXPR]... [--against-body EXPR]]\n"
    "                      [--labels FILE] [--json] [--html FILE] [--weights A,L,C,D]\n"
    "                      [filters] [--limit N] [--workers N] [--shard I/N]\n"
    "       verdict replay --merge SHARD.json... [--json] [--html FILE]\n"
    "\n"
    "Decides the snapshots recorded in DIR again (see docs/replay.md).\n"
    "\n"
    "  (neither)          determinism check: each snapshot is re-decided under the\n"
    "                     policy version it records (from the version store) and\n"
    "                     must reproduce exactly; every one that does not is printed\n"
    "  --policy BUNDLE    score a candidate bundle on the recorded traffic: decisions\n"
    "                     changed by action and by rule (with example ids), accuracy\n"
    "                     against --labels, latency, CPU, memory, audit completeness\n"
    "  --policy A --policy B   up to three candidates in one run, scored side by\n"
    "                     side with the recording\n"
    "  --against URL      send the recorded requests to another decision service\n"
    "                     (POST http://host:port/v1/decide, verdict's answer format,\n"
    "                     or another engine's through --against-map) and score its\n"
    "                     answers the same way\n"
    "\n"
    "options:\n"
    "  -s, --snapshots DIR    the snapshot folder (default: $VERDICT_SNAPSHOTS)\n"
    "      --from clickhouse://HOST[:PORT]/DB.TABLE  instead of a folder: the\n"
    "                         snapshots shipped there (verdict ship), with their\n"
    "                         versions, fetched into a scratch folder first (only\n"
    "                         --since/--until's range)\n"
    "  -p, --policy BUNDLE    the candidate bundle\n"
    "      --against URL      the other service; --timeout MS per request (5000)\n"
    "      --against-map FIELD=EXPR  read the service's answer through a CEL\n"
    "                         expression over `response` (the answer's JSON) and\n"
    "                         `request`; FIELD is action (the default when only\n"
    "                         EXPR is given), allowed, review, source, rule, reason,\n"
    "                         id, policy_version, model_version, confidence or\n"
    "                         latency_us (the service's own in-process time)\n"
    "      --against-body EXPR  the body to send: a CEL map over `request`, e.g.\n"
    "                         '{\"input\": request}' for OPA\n"
    "      --store DIR        the policy version store (default: `versions` beside\n"
    "                         DIR, where `verdict decide` keeps it)\n"
    "  -l, --labels FILE      JSON Lines of the right answers, one a line:\n"
    "                         {\"id\": \"<snapshot id>\", \"action\": \"block\"} or\n"
    "                         {\"key\": \"<request key>\", \"action\": \"allow\"}\n"
    "      --weights A,L,C,D  weights of accuracy, latency, cost and audit in the\n"
    "                         score (default 40,20,20,20)\n"
    "      --json             print the report as JSON instead of text\n"
    "      --html FILE        also write a self-contained HTML report\n"
    "  -q, --quiet            no progress bar and, in the determinism check, no\n"
    "                         line per failure (the summary still counts them)\n"
    "  -w, --workers N        decide on N threads (1-256, default 1): the report is\n"
    "                         the same as with one (only times differ)\n"
    "      --shard I/N        replay shard I of N (0 <= I < N): the snapshots whose\n"
    "                         id (its 36 characters) hashes to I by FNV-1a 64 mod N;\n"
    "                         with --json the report carries every decision, for\n"
    "                         --merge (not with --limit or several --policy)\n"
    "      --merge FILE...    merge the --shard --json reports of the N shards of one\n"
    "                         run into the report the whole run gives; refuses\n"
    "                         reports of other runs, a shard twice or one missing\n"
    "  -h, --help             this text\n"
    "\n"
    "filters (all must match):\n"
    "      --since TIME  --until TIME   RFC 3339, or a time ago (90s, 15m, 1h, 7d)\n"
    "      --point NAME  --action NAME  --source rule|model|default|error\n"
    "      --policy-version HEX         (a prefix is enough)\n"
    "      --limit N                    stop after N snapshots\n"
    "\n"
    "The score (0-100) weighs four categories, each mapped to 0..1 and measured the\n"
    "same way for the recording and the replayed side: accuracy (label accuracy;\n"
    "without labels the reproduced share in the determinism check, and not scored\n"
    "otherwise), latency (in-process p99: 1 at <= 50 us, 0 at >= 10 ms, log scale),\n"
    "cost (mean in-process time per decision: 1 at <= 10 us, 0 at >= 1 ms) and audit\n"
    "(the share of answers naming an id, a reason and their versions). Timings\n"
    "within 2x of the recording's are a tie; a service known only by its HTTP round\n"
    "trip leaves latency and cost unscored for both sides. Also per decision point.\n"
    "\n"
    "Exit status: determinism check: 0 every snapshot reproduced, 1 some did not (or\n"
    "could not be replayed); --policy / --against: 0 done (the changes are the\n"
    "result), 1 the replay could not run; 2 bad usage.\n"
    "\n"
    "examples:\n"
    "  verdict replay -s snaps\n"
    "  verdict replay -s snaps --policy candidate/ --labels labels.jsonl --html report.html\n"
    "  verdict replay -s snaps --policy a/ --policy b/ --labels labels.jsonl\n"
    "  verdict replay -s snaps --workers 2\n"
    "  verdict replay -s snaps --shard 0/3 --json >s0.json   (and 1/3, 2/3 elsewhere)\n"
    "  verdict replay --merge s0.json s1.json s2.json --html week.html\n"
    "  verdict replay -s snaps --against http://127.0.0.1:8080 --labels labels.jsonl --json\n"
    "  verdict replay -s snaps --against http://127.0.0.1:8181/v1/data/verdict/decision \\\n"
    "      --against-body '{\"input\": request}' \\\n"
    "      --against-map 'action=response.result ? \"allow\" : \"deny\"' \\\n"
    "      --against-map 'allowed=response.result'\n";

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("replay", msg, arg);
}

/* "I/N" with 0 <= I < N <= 65536, digits only. 0, or -1. */
static int parse_shard(const char *s, uint32_t *index, uint32_t *count) {
  unsigned long v[2];
  const char *p = s;
  for (int k = 0; k < 2; k++) {
    if (*p < '0' || *p > '9') return -1;
    char *end;
    errno = 0;
    v[k] = strtoul(p, &end, 10);
    if (errno || end - p > 6) return -1;
    p = end;
    if (k == 0 && *p++ != '/') return -1;
  }
  if (*p || v[1] < 1 || v[1] > 65536 || v[0] >= v[1]) return -1;
  *index = (uint32_t)v[0];
  *count = (uint32_t)v[1];
  return 0;
}

/* ---- the progress bar ---- */

typedef struct progress {
  int on;
  uint64_t total, done;
  int64_t start, last;
} progress;

/* Counts the snapshots the walk will visit (headers only), to size the bar.
 * Worth it only for a large log on a terminal. */
static uint64_t count_matching(const char *dir, const snapshot_filter *f, uint64_t limit,
                               const replay_opts *o) {
  snapshot_reader *r;
  char err[SNAPSHOT_ERRLEN];
  if (snapshot_reader_open(dir, f, &r, err, sizeof err) != 0) return 0;
  uint64_t n = 0;
  snapshot_rec rec;
  while ((!limit || n < limit) && snapshot_reader_next(r, &rec) == 1) {
    char id[SNAPSHOT_ID_TEXT];
    if (!o->shard_count ||
        replay_shard_of(snapshot_id_format(rec.id, id), o->shard_count) == o->shard_index)
      n++;
  }
  snapshot_reader_close(r);
  return n;
}

/* Whether dir holds at least n snapshots (reads no further): a log is
 * "large", worth a progress bar, from 4096 snapshots on. */
static int has_at_least(const char *dir, uint64_t n) {
  snapshot_reader *r;
  char err[SNAPSHOT_ERRLEN];
  if (snapshot_reader_open(dir, NULL, &r, err, sizeof err) != 0) return 0;
  uint64_t k = 0;
  snapshot_rec rec;
  while (k < n && snapshot_reader_next(r, &rec) == 1) k++;
  snapshot_reader_close(r);
  return k >= n;
}

static void progress_draw(progress *p, int final) {
  int64_t now = (int64_t)clock_mono_ns();
  if (!final && now - p->last < 100000000) return;
  p->last = now;
  double frac = p->total ? (double)p->done / (double)p->total : 0;
  if (frac > 1) frac = 1;
  int width = 30, fill = (int)(frac * width);
  double secs = (double)(now - p->start) / 1e9;
  double rate = secs > 0 ? (double)p->done / secs : 0;
  fprintf(stderr, "\r\033[K[");
  for (int i = 0; i < width; i++) fputc(i < fill ? '=' : i == fill ? '>' : ' ', stderr);
  fprintf(stderr, "] %3.0f%%  %llu/%llu  %.0f/s", 100 * frac, (unsigned long long)p->done,
          (unsigned long long)p->total, rate);
  if (final) fprintf(stderr, "\r\033[K");
  fflush(stderr);
}

/* ---- the walk ---- */

typedef struct run {
  score_acc *acc;
  report_failures failures;
  int determinism;
  int print_failures;
  int oom;
  progress prog;
  shard_log *shard;            /* --shard: every decision, for the report */
  const score_labels *labels;  /* to note each one's label */
} run;

static int on_item(void *user, const replay_item *it) {
  run *r = user;
  if (score_add(r->acc, it) < 0) r->oom = 1;
  if (r->shard &&
      shard_log_add(r->shard, it,
                    r->labels ? score_labels_find(r->labels, it->id_text, it->key) : NULL) < 0)
    r->oom = 1;
  if (!it->error && it->masked) {
    /* decided from a field the snapshot holds masked: said, not a failure */
    if (r->determinism && r->print_failures) {
      if (r->prog.on) fprintf(stderr, "\r\033[K");
      printf(
          "%s  %s  masked: rule '%s' read a field `snapshot:` keeps out (cannot be "
          "re-proven)\n",
          it->id_text, it->point ? it->point : "", it->masked);
    }
  } else if (it->error || !it->same) {
    if (r->determinism && r->print_failures) {
      if (r->prog.on) fprintf(stderr, "\r\033[K");
      report_failure_line(stdout, it);
    }
    if (report_failures_add(&r->failures, it) < 0) r->oom = 1;
  }
  if (r->prog.on) {
    r->prog.done++;
    if ((r->prog.done & 255) == 0) progress_draw(&r->prog, 0);
  }
  return 0;
}

#define MAX_POLICIES (SCORE_MAX_SIDES - 1)

/* One walk: a candidate (or the recorded versions, or a service) over the
 * log, scored. */
typedef struct walk {
  run r;
  replay_stats st;
  double wall;
  int rc;
  char err[1024];
} walk;

static void walk_run(walk *w, const replay_opts *o, const char *against, const against_map *map,
                     long timeout_ms) {
  int64_t t0 = (int64_t)clock_mono_ns();
  w->rc = against ? against_run(o, against, map, (int)timeout_ms, on_item, &w->r, &w->st, w->err,
                                sizeof w->err)
                  : replay_run(o, on_item, &w->r, &w->st, w->err, sizeof w->err);
  w->wall = (double)((int64_t)clock_mono_ns() - t0) / 1e9;
}

/* --policy A --policy B ...: one walk per candidate over the same
 * snapshots, then the candidates side by side with the recording. */
static int replay_candidates(const char *dir, replay_opts *o, const char *store,
                             const char *const *policies, int n, const score_weights *w,
                             const score_labels *labels, const char *labels_path,
                             const char *filters, int64_t now, int json, int quiet,
                             const char *html_path) {
  walk *ws = calloc((size_t)n, sizeof *ws);
  score_report *reps = calloc((size_t)n, sizeof *reps);
  report_info *infos = calloc((size_t)n, sizeof *infos);
  int status = 0;
  if (!ws || !reps || !infos) {
    fprintf(stderr, "verdict replay: out of memory\n");
    status = 1;
    goto out;
  }
  for (int i = 0; i < n && !status; i++) {
    replay_opts oi = *o;
    oi.snapshots_dir = dir;
    oi.policy_dir = policies[i];
    oi.store_dir = store;
    oi.time_reference = 1;
    ws[i].r.acc = score_new(SCORE_CANDIDATE, w, labels);
    if (!ws[i].r.acc) {
      fprintf(stderr, "verdict replay: out of memory\n");
      status = 1;
      break;
    }
    report_failures_init(&ws[i].r.failures, 1000);
    if (!quiet && isatty(2)) fprintf(stderr, "verdict replay: candidate %s...\r", policies[i]);
    walk_run(&ws[i], &oi, NULL, NULL, 0);
    if (!quiet && isatty(2)) fputs("\r\033[K", stderr);
    if (ws[i].rc != 0) {
      fprintf(stderr, "verdict replay: %s: %s\n", policies[i], ws[i].err);
      status = 1;
      break;
    }
    if (ws[i].r.oom)
      fprintf(stderr, "verdict replay: out of memory: some figures are incomplete\n");
    score_finish(ws[i].r.acc, &reps[i]);
    infos[i] = (report_info){.snapshots_dir = dir,
                             .policy_dir = policies[i],
                             .labels_path = labels_path,
                             .filters = filters,
                             .wall_seconds = ws[i].wall,
                             .generated_ns = now,
                             .stats = &ws[i].st,
                             .failures = &ws[i].r.failures};
  }
  if (status) goto out;
  if (json) {
    json_buf b;
    json_buf_init(&b, NULL);
    if (report_json_candidates(&b, reps, infos, (size_t)n) < 0) {
      fprintf(stderr, "verdict replay: out of memory writing the JSON\n");
      status = 1;
    } else {
      fwrite(b.data, 1, b.len, stdout);
      fputc('\n', stdout);
    }
    json_buf_free(&b);
  } else {
    report_text_candidates(stdout, reps, infos, (size_t)n);
  }
  if (html_path) {
    FILE *h = cli_open_file("replay", html_path, "w");
    if (!h || report_html_candidates(h, reps, infos, (size_t)n) < 0) status = 1;
    if (h && fclose(h) != 0) status = 1;
    if (status) fprintf(stderr, "verdict replay: %s: write error\n", html_path);
  }
  if (labels && reps[0].labelled == 0)
    fprintf(stderr,
            "verdict replay: warning: no snapshot matched a label in %s (labels name snapshot "
            "ids or request keys)\n",
            labels_path);
  if (reps[0].seen == 0) fprintf(stderr, "verdict replay: warning: no snapshot matched\n");
  if (fflush(stdout) != 0) status = 1;
out:
  for (int i = 0; ws && i < n; i++) {
    report_failures_free(&ws[i].r.failures);
    score_free(ws[i].r.acc);
  }
  free(ws);
  free(reps);
  free(infos);
  return status;
}

/* The report of one walk (or of merged shards): text or JSON on stdout,
 * the HTML page, the warnings; the exit status. */
static int emit(const run *r, const score_report *rep, const report_info *info, int json,
                const char *html_path, const score_labels *labels) {
  int status = 0;
  if (json) {
    json_buf b;
    json_buf_init(&b, NULL);
    if (report_json(&b, rep, info) < 0) {
      fprintf(stderr, "verdict replay: out of memory writing the JSON\n");
      status = 1;
    } else {
      fwrite(b.data, 1, b.len, stdout);
      fputc('\n', stdout);
    }
    json_buf_free(&b);
  } else {
    if (r->determinism && r->failures.n && r->print_failures) fputc('\n', stdout);
    report_text(stdout, rep, info);
  }
  if (html_path) {
    FILE *h = cli_open_file("replay", html_path, "w");
    if (!h) {
      status = 1;
    } else if (report_html(h, rep, info) < 0) {
      fprintf(stderr, "verdict replay: %s: write error\n", html_path);
      status = 1;
    }
    if (h && fclose(h) != 0 && !status) {
      fprintf(stderr, "verdict replay: %s: write error\n", html_path);
      status = 1;
    }
  }
  if (labels && rep->labelled == 0)
    fprintf(stderr,
            "verdict replay: warning: no snapshot matched a label in %s (labels name snapshot "
            "ids or request keys)\n",
            info->labels_path);
  if (rep->seen == 0) fprintf(stderr, "verdict replay: warning: no snapshot matched\n");
  if (r->determinism && rep->reproduced + rep->masked != rep->seen) status = 1;
  if (fflush(stdout) != 0) status = 1;
  return status;
}

/* The labels the shards noted, one per decision, as a labels file would
 * give them (by snapshot id). 0, or -1 with a message. */
static int merged_labels(const shard_merged *m, score_labels **out, char *err, size_t errlen) {
  json_buf b;
  json_buf_init(&b, NULL);
  for (size_t i = 0; i < m->n; i++) {
    if (!m->labels[i]) continue;
    json_buf_put(&b, "{\"id\":", 6);
    json_put_str(&b, m->items[i].id_text);
    json_buf_put(&b, ",\"action\":", 10);
    json_put_str(&b, m->labels[i]);
    json_buf_put(&b, "}\n", 2);
  }
  int rc = b.oom ? -1
                 : score_labels_parse("the shards' labels", b.data ? b.data : "", b.len, out, err,
                                      errlen);
  if (b.oom) snprintf(err, errlen, "out of memory");
  json_buf_free(&b);
  return rc;
}

/* --merge: the shards' reports as the one the whole run gives. */
static int replay_merge(const char *const *files, size_t n, int json, int quiet,
                        const char *html_path, int64_t now) {
  shard_merged m;
  char err[1400];
  if (shard_merge(files, n, &m, err, sizeof err) < 0) {
    fprintf(stderr, "verdict replay: --merge: %s\n", err);
    return 1;
  }
  score_labels *labels = NULL;
  if (m.run.have_labels && merged_labels(&m, &labels, err, sizeof err) < 0) {
    fprintf(stderr, "verdict replay: --merge: %s\n", err);
    shard_merged_free(&m);
    return 1;
  }
  run r;
  memset(&r, 0, sizeof r);
  r.acc = score_new(m.mode, &m.run.weights, labels);
  int status = 1;
  if (!r.acc) {
    fprintf(stderr, "verdict replay: out of memory\n");
  } else {
    r.determinism = m.mode == SCORE_DETERMINISM;
    r.print_failures = !json && !quiet;
    report_failures_init(&r.failures, r.determinism ? 100000 : 1000);
    replay_stats st;
    memset(&st, 0, sizeof st);
    st.passed = m.run.passed;
    for (size_t i = 0; i < m.n; i++) {
      replay_stats_count(&st, &m.items[i]);
      on_item(&r, &m.items[i]);
    }
    if (r.oom) fprintf(stderr, "verdict replay: out of memory: some figures are incomplete\n");
    score_report rep;
    score_finish(r.acc, &rep);
    rep.peak_rss_kb = m.peak_rss_kb;       /* the largest shard's, not the merge's */
    rep.labels_loaded = m.run.labels_loaded; /* the labels file's, as the shards read it */
    report_info info = {.snapshots_dir = m.snapshots,
                        .policy_dir = m.policy,
                        .against_url = m.run.against,
                        .labels_path = m.labels_path,
                        .filters = m.run.filters,
                        .wall_seconds = m.wall_seconds,
                        .generated_ns = now,
                        .stats = &st,
                        .failures = &r.failures};
    status = emit(&r, &rep, &info, json, html_path, labels);
    report_failures_free(&r.failures);
  }
  score_free(r.acc);
  score_labels_free(labels);
  shard_merged_free(&m);
  return status;
}

static int replay_main(int argc, char **argv) {
  const char *dir = getenv("VERDICT_SNAPSHOTS"), *policy = NULL, *against = NULL, *store = NULL;
  const char *policies[MAX_POLICIES];
  int npolicies = 0;
  against_map *map = NULL;
  int mapped = 0;
  const char *labels_path = NULL, *html_path = NULL, *weights_text = NULL;
  int json = 0, quiet = 0, merging = 0;
  long timeout_ms = 5000;
  replay_opts o;
  memset(&o, 0, sizeof o);
  char filters[1024] = "";
  size_t flen = 0;
  int64_t now = clock_wall_ns();
  /* the arguments that are not options (--merge's files), gathered at the
   * front of argv (after argv[0]: never past the one being read) */
  const char **files = (const char **)argv + 1, *other = NULL;
  size_t nfiles = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--json")) {
      json = 1;
      continue;
    }
    if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      quiet = 1;
      continue;
    }
    if (!strcmp(a, "--merge")) {
      merging = 1;
      continue;
    }
    if (a[0] != '-') {
      files[nfiles++] = a;
      continue;
    }
    if (strcmp(a, "--html") != 0 && strncmp(a, "--html=", 7) != 0 && !other) other = a;
    const char *opt = a, *val;
    char name[64];
    const char *eq = strchr(a, '=');
    if (eq && a[1] == '-' && (size_t)(eq - a) < sizeof name) {
      memcpy(name, a, (size_t)(eq - a));
      name[eq - a] = '\0';
      opt = name;
      val = eq + 1;
    } else {
      if (i + 1 >= argc) return usage_error("missing value after", a);
      val = argv[++i];
    }
    int is_filter = 0;
    if (!strcmp(opt, "-s") || !strcmp(opt, "--snapshots")) {
      dir = val;
    } else if (!strcmp(opt, "-p") || !strcmp(opt, "--policy")) {
      if (npolicies == MAX_POLICIES) {
        against_map_free(map);
        return usage_error("at most 3 candidates (--policy) in one run, got another:", val);
      }
      policy = policies[npolicies++] = val;
    } else if (!strcmp(opt, "--against")) {
      against = val;
    } else if (!strcmp(opt, "--against-map") || !strcmp(opt, "--against-body")) {
      char merr[1400];
      int mrc = !strcmp(opt, "--against-map") ? against_map_add(&map, val, merr, sizeof merr)
                                              : against_map_body(&map, val, merr, sizeof merr);
      if (mrc < 0) {
        against_map_free(map);
        return usage_error(merr, NULL);
      }
      mapped = 1;
    } else if (!strcmp(opt, "--store")) {
      store = val;
    } else if (!strcmp(opt, "-l") || !strcmp(opt, "--labels")) {
      labels_path = val;
    } else if (!strcmp(opt, "--html")) {
      html_path = val;
    } else if (!strcmp(opt, "--weights")) {
      weights_text = val;
    } else if (!strcmp(opt, "-w") || !strcmp(opt, "--workers")) {
      char *end;
      errno = 0;
      long n = strtol(val, &end, 10);
      if (errno || *end || !*val || n < 1 || n > REPLAY_MAX_WORKERS)
        return usage_error("--workers wants a number of threads from 1 to 256, got", val);
      o.workers = (int)n;
    } else if (!strcmp(opt, "--shard")) {
      if (parse_shard(val, &o.shard_index, &o.shard_count) < 0)
        return usage_error(
            "--shard wants I/N, the shard's index from 0 to N-1 and the number of shards "
            "(N from 1 to 65536), got",
            val);
    } else if (!strcmp(opt, "--timeout")) {
      char *end;
      errno = 0;
      timeout_ms = strtol(val, &end, 10);
      if (errno || *end || !*val || timeout_ms < 1 || timeout_ms > 3600000)
        return usage_error("--timeout wants milliseconds from 1 to 3600000, got", val);
    } else if (!strcmp(opt, "--since") || !strcmp(opt, "--until")) {
      int64_t t;
      if (cli_parse_when(val, now, &t) < 0)
        return usage_error("expected RFC 3339 (the years 1678 to 2261) or a time ago like 1h or 7d, got", val);
      if (!strcmp(opt, "--since"))
        o.since_ns = t ? t : 1;
      else
        o.until_ns = t ? t : 1;
      is_filter = 1;
    } else if (!strcmp(opt, "--point")) {
      o.point = val;
      is_filter = 1;
    } else if (!strcmp(opt, "--action")) {
      o.action = val;
      is_filter = 1;
    } else if (!strcmp(opt, "--source")) {
      if (snapshot_source_parse(val, strlen(val)) < 0)
        return usage_error("--source is rule, model, default or error, not", val);
      o.source = val;
      is_filter = 1;
    } else if (!strcmp(opt, "--policy-version")) {
      o.policy_version = val;
      is_filter = 1;
    } else if (!strcmp(opt, "--limit")) {
      char *end;
      errno = 0;
      long long l = strtoll(val, &end, 10);
      if (errno || *end || !*val || l < 0) return usage_error("--limit wants a count, got", val);
      o.limit = (uint64_t)l;
      is_filter = 1;
    } else {
      against_map_free(map);
      return usage_error("unknown option", a);
    }
    if (is_filter && flen < sizeof filters - 1)
      flen += (size_t)snprintf(filters + flen, sizeof filters - flen, "%s%s %s", flen ? " " : "",
                               opt, val);
  }
  if (merging || nfiles) {
    int st;
    if (!merging)
      st = usage_error("unexpected argument", files[0]);
    else if (other)
      st = usage_error("--merge takes the shards' reports and only --json, --html and --quiet, not",
                       other);
    else if (!nfiles)
      st = usage_error("--merge wants the shards' JSON reports: --merge s0.json s1.json ...", NULL);
    else
      st = replay_merge(files, nfiles, json, quiet, html_path, now);
    against_map_free(map);
    return st;
  }
  const char *bad = !dir || !*dir        ? "no snapshot folder: give --snapshots DIR"
                    : o.shard_count && npolicies > 1
                        ? "--shard replays one candidate: give one --policy at most"
                    : o.shard_count && o.limit
                        ? "--shard and --limit do not go together (each shard would stop at its "
                          "own count)"
                    : policy && against  ? "give --policy or --against, not both"
                    : mapped && !against ? "--against-map and --against-body go with --against"
                    : o.since_ns && o.until_ns && o.until_ns <= o.since_ns
                        ? "--until must be later than --since"
                        : NULL;
  if (bad) {
    against_map_free(map);
    return usage_error(bad, NULL);
  }
  score_weights w;
  score_weights_default(&w);
  char err[1024];
  if (weights_text && score_weights_parse(weights_text, &w, err, sizeof err) < 0) {
    against_map_free(map);
    return usage_error(err, NULL);
  }

  score_labels *labels = NULL;
  if (labels_path && score_labels_load(labels_path, &labels, err, sizeof err) < 0) {
    fprintf(stderr, "verdict replay: %s\n", err);
    against_map_free(map);
    return 1;
  }
  if (npolicies > 1) {
    int st = replay_candidates(dir, &o, store, policies, npolicies, &w, labels, labels_path,
                               filters, now, json, quiet, html_path);
    score_labels_free(labels);
    return st;
  }
  score_mode mode = against ? SCORE_AGAINST : policy ? SCORE_CANDIDATE : SCORE_DETERMINISM;
  o.snapshots_dir = dir;
  o.policy_dir = policy;
  o.store_dir = store;
  o.time_reference = policy != NULL; /* timings on the recording's scale */

  run r;
  memset(&r, 0, sizeof r);
  r.acc = score_new(mode, &w, labels);
  if (!r.acc) {
    score_labels_free(labels);
    fprintf(stderr, "verdict replay: out of memory\n");
    return 1;
  }
  r.determinism = mode == SCORE_DETERMINISM;
  r.print_failures = !json && !quiet;
  /* every failure of a determinism check is listed; of a candidate's
   * changes, the first thousand (the tallies count them all) */
  report_failures_init(&r.failures, r.determinism ? 100000 : 1000);

  if (!quiet && isatty(2) && has_at_least(dir, 4096)) {
    snapshot_filter f;
    snapshot_filter_init(&f);
    f.since_ns = o.since_ns;
    f.until_ns = o.until_ns;
    f.point = o.point;
    f.action = o.action;
    f.policy_version = o.policy_version;
    if (o.source) f.source = snapshot_source_parse(o.source, strlen(o.source));
    r.prog.total = count_matching(dir, &f, o.limit, &o);
    r.prog.on = r.prog.total >= 4096;
    r.prog.start = r.prog.last = (int64_t)clock_mono_ns();
  }

  if (o.shard_count && json) {
    r.shard = shard_log_new();
    r.labels = labels;
    if (!r.shard) r.oom = 1;
  }

  replay_stats st;
  int64_t t0 = (int64_t)clock_mono_ns();
  int rc = against
               ? against_run(&o, against, map, (int)timeout_ms, on_item, &r, &st, err, sizeof err)
               : replay_run(&o, on_item, &r, &st, err, sizeof err);
  double wall = (double)((int64_t)clock_mono_ns() - t0) / 1e9;
  against_map_free(map);
  if (r.prog.on) progress_draw(&r.prog, 1);
  int status = 0;
  if (rc != 0) {
    fprintf(stderr, "verdict replay: %s\n", err);
    status = 1;
  } else {
    if (r.oom) fprintf(stderr, "verdict replay: out of memory: some figures are incomplete\n");
    score_report rep;
    score_finish(r.acc, &rep);
    report_info info = {.snapshots_dir = dir,
                        .policy_dir = policy,
                        .against_url = against,
                        .labels_path = labels_path,
                        .filters = filters,
                        .wall_seconds = wall,
                        .generated_ns = now,
                        .stats = &st,
                        .failures = &r.failures};
    json_buf extra;
    json_buf_init(&extra, NULL);
    if (r.shard) {
      shard_run sr = {.index = o.shard_index,
                      .count = o.shard_count,
                      .passed = st.passed,
                      .mode = score_mode_name(mode),
                      .policy_version = policy ? st.policy_version : NULL,
                      .against = against,
                      .filters = filters,
                      .weights = w,
                      .have_labels = labels != NULL,
                      .labels_loaded = score_labels_count(labels)};
      json_buf_put(&extra, "\"shard\":", 8);
      shard_json(&extra, &sr, r.shard);
      info.extra_json = extra.data;
      info.extra_len = extra.len;
    }
    status = emit(&r, &rep, &info, json, html_path, labels);
    json_buf_free(&extra);
  }
  shard_log_free(r.shard);
  report_failures_free(&r.failures);
  score_free(r.acc);
  score_labels_free(labels);
  return status;
}

/* --from URL: the rows shipped to ClickHouse fetched into a scratch folder
 * (ship_fetch), then the replay above on it as --snapshots. */
int cmd_replay(int argc, char **argv) {
  const char *from = NULL;
  int64_t since = 0, until = 0, now = clock_wall_ns();
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 < argc && (!strcmp(a, "--from") || !strcmp(a, "--since") || !strcmp(a, "--until"))) {
      int64_t t = 0;
      if (a[2] == 'f')
        from = argv[i + 1];
      else if (cli_parse_when(argv[i + 1], now, &t) == 0)
        *(a[2] == 's' ? &since : &until) = t;
      i++;
    } else if (!strncmp(a, "--from=", 7)) {
      from = a + 7;
    }
  }
  if (!from) return replay_main(argc, argv);
  char err[SHIP_ERRLEN];
  ship_target t;
  if (ship_target_parse(from, &t, err, sizeof err) < 0) return usage_error("--from:", err);
  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/verdict-replay-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    fprintf(stderr, "verdict replay: cannot make a scratch folder in %s: %s\n",
            tmp && *tmp ? tmp : "/tmp", strerror(errno));
    return 1;
  }
  long long n = ship_fetch(from, since, until, dir, err, sizeof err);
  int st;
  if (n < 0) {
    fprintf(stderr, "verdict replay: --from %s: %s\n", from, err);
    st = 1;
  } else {
    char **args = calloc((size_t)argc + 3, sizeof *args);
    int k = 0;
    if (!args) {
      fprintf(stderr, "verdict replay: out of memory\n");
      st = 1;
      goto out;
    }
    for (int i = 0; i < argc; i++) {
      if (i > 0 && !strcmp(argv[i], "--from") && i + 1 < argc) {
        i++;
        continue;
      }
      if (!strncmp(argv[i], "--from=", 7)) continue;
      args[k++] = argv[i];
    }
    args[k++] = "--snapshots";
    args[k++] = dir;
    st = replay_main(k, args);
    free(args);
  }
out:;
  /* the scratch folder: its versions and segments, then itself */
  ship_remove_folder(dir);
  return st;
}
