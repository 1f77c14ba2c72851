/* cmd_snapshots.c — `verdict snapshots`: look into a decision-snapshot
 * directory and keep it trimmed.
 *
 *   list    one line per snapshot (id, time, decision point, action, source)
 *   show    one snapshot's JSON, found by id through the sparse index
 *   export  the snapshots' JSON as JSON Lines, for analysis elsewhere
 *   gc      retention and sampling (snapshot_gc), safe beside a live writer
 *   repairs what recovery did to the folder (its journal, repairs.jsonl)
 *   verify  every record's checksum and every version the records name
 *   stats   bytes per day, per snapshot and by strategy, and a projection
 *           of the disk the retention needs (snapshots_stats.c)
 *
 * Filters match the record headers, so no JSON is parsed to select. This is
 * a thin shell over src/snapshot/snapshot.h; docs/snapshots.md has the rest. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/arena.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/timefmt.h"
#include "policy/retention.h"
#include "snapshot/snapshot.h"

const char cmd_snapshots_help[] =
    "usage: verdict snapshots list   [--snapshots DIR] [filters] [--limit N]\n"
    "       verdict snapshots show   [--snapshots DIR] [--compact] ID\n"
    "       verdict snapshots export [--snapshots DIR] [filters] [--limit N]\n"
    "       verdict snapshots gc     [--snapshots DIR] [--keep-days N] [--sample F]\n"
    "                                [--min-confidence C] [--retention FILE] [--dry-run]\n"
    "       verdict snapshots repairs [--snapshots DIR]\n"
    "       verdict snapshots verify [--snapshots DIR | DIR]\n"
    "       verdict snapshots stats  [--snapshots DIR] [--retention FILE] [--json]\n"
    "\n"
    "Reads the decision snapshots recorded in DIR (a segment log; see\n"
    "docs/snapshots.md). DIR comes from --snapshots, else $VERDICT_SNAPSHOTS.\n"
    "\n"
    "  list    one line per snapshot: id, time (UTC), decision point, action, source\n"
    "  show    the snapshot with this id, as indented JSON (--compact: one line)\n"
    "  export  the snapshots as JSON Lines: one snapshot's JSON a line\n"
    "  gc      keeps every snapshot newer than --keep-days (default 7); of older\n"
    "          ones only those that matter: not allowed, marked for review, decided\n"
    "          by a model or an error, confidence below --min-confidence (default\n"
    "          0.8), or in the sample: a fraction --sample (default 0.01) chosen by\n"
    "          a hash of the id, so every run keeps the same ones. Safe while a\n"
    "          writer is appending (its active segment is skipped). --dry-run\n"
    "          counts without changing anything, and predicts the gc after it\n"
    "          exactly. --retention FILE: the rule a retention file declares\n"
    "          instead (keep_days, a CEL keep condition, sample rates by class;\n"
    "          docs/snapshots.md)\n"
    "  repairs what opening the log repaired, one JSON line each (time, segment,\n"
    "          repair: cut_tail, moved_corrupt, removed_empty or damaged_kept,\n"
    "          bytes, records); a count on stderr\n"
    "  verify  reads every record and checks its checksum, and checks that every\n"
    "          policy and model version a record names is in DIR/versions and\n"
    "          hashes to its name (the folder replays alone); one line a problem,\n"
    "          exit 1 when there is any\n"
    "  stats   disk bytes per UTC day and per snapshot, snapshots and bytes by\n"
    "          strategy, and a projection of the disk the retention needs at the\n"
    "          current rate (the built-in rule, or --retention FILE's); --json\n"
    "\n"
    "options:\n"
    "  -s, --snapshots DIR         the snapshot folder (default: $VERDICT_SNAPSHOTS)\n"
    "      --compact               show: the JSON on one line; --pretty: indented\n"
    "                              (the default)\n"
    "      --keep-days N           gc: keep every snapshot newer than N days (7)\n"
    "      --sample F              gc: the fraction of older ones kept by a hash of\n"
    "                              the id (0.01)\n"
    "      --min-confidence C      gc: keep older ones below this confidence (0.8)\n"
    "      --dry-run               gc: count what would go, change nothing\n"
    "      --retention FILE        gc: the retention file's rule (not with --keep-days,\n"
    "                              --sample, --min-confidence)\n"
    "  -h, --help                  this text\n"
    "\n"
    "filters (list, export; all must match):\n"
    "      --since TIME            at or after TIME: RFC 3339 (2026-01-31T12:00:00Z)\n"
    "                              or a time ago (90s, 15m, 1h, 1h30m, 7d)\n"
    "      --until TIME            before TIME (same forms)\n"
    "      --point NAME            decision point\n"
    "      --action NAME           chosen action\n"
    "      --source SOURCE         rule, model, default or error\n"
    "      --policy-version HEX    policy version (a prefix is enough)\n"
    "      --limit N               stop after N snapshots\n"
    "\n"
    "Exit status: 0 done; 1 the directory or a snapshot could not be read, no\n"
    "snapshot has that id, or verify found a problem; 2 bad usage.\n"
    "\n"
    "examples:\n"
    "  verdict snapshots list --snapshots /var/lib/verdict/snapshots --since 1h\n"
    "  verdict snapshots show 0193c0de-7a1b-7c3d-8e4f-0123456789ab\n"
    "  verdict snapshots export --point payment --source model > model-decisions.jsonl\n"
    "  verdict snapshots gc --keep-days 30 --sample 0.05 --dry-run\n";

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("snapshots", msg, arg);
}

/* Indents compact JSON text (2 spaces). The text is assumed valid. */
static void print_pretty(FILE *out, const char *s, size_t n) {
  int depth = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < n && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
      if (j >= n) j = n - 1; /* unterminated (the text was checked, so never) */
      fwrite(s + i, 1, j - i + 1, out);
      i = j;
    } else if (c == '{' || c == '[') {
      size_t j = i + 1;
      while (j < n && (s[j] == ' ' || s[j] == '\n' || s[j] == '\t' || s[j] == '\r')) j++;
      if (j < n && (s[j] == '}' || s[j] == ']')) {
        fputc(c, out);
        fputc(s[j], out);
        i = j;
        continue;
      }
      fputc(c, out);
      fprintf(out, "\n%*s", 2 * ++depth, "");
    } else if (c == '}' || c == ']') {
      fprintf(out, "\n%*s%c", 2 * (depth > 0 ? --depth : 0), "", c);
    } else if (c == ',') {
      fprintf(out, ",\n%*s", 2 * depth, "");
    } else if (c == ':') {
      fputs(": ", out);
    } else if (c != ' ' && c != '\n' && c != '\t' && c != '\r') {
      fputc(c, out);
    }
  }
  fputc('\n', out);
}

/* One line of JSON: newlines outside strings are whitespace, and JSON
 * strings cannot hold raw ones, so replacing them keeps the meaning. */
static void print_line(FILE *out, const char *s, size_t n) {
  size_t start = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\n' || s[i] == '\r') {
      fwrite(s + start, 1, i - start, out);
      fputc(' ', out);
      start = i + 1;
    }
  }
  fwrite(s + start, 1, n - start, out);
  fputc('\n', out);
}

static int is_json(const char *s, size_t n) {
  arena a;
  char buf[4096];
  arena_init(&a, buf, sizeof buf, 0);
  value v;
  int ok = json_parse(&a, s, n, NULL, &v, NULL) == 0;
  arena_free(&a);
  return ok;
}

static void print_list_line(const snapshot_rec *r) {
  char id[SNAPSHOT_ID_TEXT], when[48];
  int64_t sec = r->time_ns / 1000000000, ns = r->time_ns % 1000000000;
  if (ns < 0) {
    sec--;
    ns += 1000000000;
  }
  timefmt_format_rfc3339(sec, (int32_t)ns, when);
  const char *src = snapshot_source_name(r->source);
  printf("%s  %s  %.*s  %.*s  %s\n", snapshot_id_format(r->id, id), when, (int)r->point_len,
         r->point, (int)r->action_len, r->action, src ? src : "?");
}

static int run_gc(const char *dir, snapshot_gc_opts *o, const char *retention_file) {
  snapshot_gc_stats st;
  char err[SNAPSHOT_ERRLEN];
  retention *ret = NULL;
  if (retention_file) {
    if (cli_retention_load("snapshots gc", retention_file, &ret) != 0) return 1;
    cli_retention_gc_opts(ret, o);
  }
  int rc = snapshot_gc(dir, o, &st, err, sizeof err);
  const char *first = "";
  uint64_t errors = ret ? retention_errors(ret, &first) : 0;
  if (errors)
    fprintf(stderr,
            "verdict snapshots gc: warning: the retention conditions failed on %llu snapshot "
            "reading%s (kept); the first: %s\n",
            (unsigned long long)errors, errors == 1 ? "" : "s", first);
  retention_free(ret);
  if (rc < 0) {
    fprintf(stderr, "verdict snapshots gc: %s\n", err);
    return 1;
  }
  printf("%s%llu segments (%llu held by a writer, skipped): %llu rewritten, %llu deleted\n",
         o->dry_run ? "dry run: " : "", (unsigned long long)st.segments,
         (unsigned long long)st.segments_locked, (unsigned long long)st.segments_rewritten,
         (unsigned long long)st.segments_deleted);
  if (st.segments_unshipped)
    printf("%s%llu segments not shipped yet (a ship-*.cursor in the folder), skipped\n",
           o->dry_run ? "dry run: " : "", (unsigned long long)st.segments_unshipped);
  printf("%srecords looked at: %llu kept, %llu removed; bytes %llu -> %llu\n",
         o->dry_run ? "dry run: " : "", (unsigned long long)st.records_kept,
         (unsigned long long)st.records_removed, (unsigned long long)st.bytes_before,
         (unsigned long long)st.bytes_after);
  return 0;
}

static void print_problem(void *ud, const char *kind, const char *file, const char *detail) {
  (void)ud;
  printf("%-10s  %s  %s\n", kind, file, detail);
}

/* Every record's checksum, every version present and whole (folder.c). */
static int run_verify(const char *dir) {
  snapshot_verify_stats st;
  char err[SNAPSHOT_ERRLEN];
  if (snapshot_verify(dir, print_problem, NULL, &st, err, sizeof err) < 0) {
    fprintf(stderr, "verdict snapshots verify: %s\n", err);
    return 1;
  }
  printf("%s: %llu segment%s, %llu records, %llu version%s named: %s\n", dir,
         (unsigned long long)st.segments, st.segments == 1 ? "" : "s",
         (unsigned long long)st.records, (unsigned long long)st.versions,
         st.versions == 1 ? "" : "s",
         st.problems ? "PROBLEMS (listed above)" : "every record and version checks");
  if (st.problems)
    printf("%llu problem%s: %llu damaged byte%s, %llu version%s missing or changed\n",
           (unsigned long long)st.problems, st.problems == 1 ? "" : "s",
           (unsigned long long)st.damaged_bytes, st.damaged_bytes == 1 ? "" : "s",
           (unsigned long long)st.versions_bad, st.versions_bad == 1 ? "" : "s");
  return st.problems ? 1 : 0;
}

/* The folder's repair journal (src/snapshot/repairs.c), as it is. */
static int run_repairs(const char *dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/repairs.jsonl", dir);
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno != ENOENT) {
      fprintf(stderr, "verdict snapshots: %s: %s\n", path, strerror(errno));
      return 1;
    }
    FILE *d = fopen(dir, "r");
    if (!d) {
      fprintf(stderr, "verdict snapshots: %s: %s\n", dir, strerror(errno));
      return 1;
    }
    fclose(d);
    fprintf(stderr, "0 repairs recorded in %s\n", dir);
    return 0;
  }
  char line[8192];
  unsigned long n = 0;
  while (fgets(line, sizeof line, f)) {
    fputs(line, stdout);
    n++;
  }
  fclose(f);
  fprintf(stderr, "%lu repair%s recorded in %s\n", n, n == 1 ? "" : "s", dir);
  return 0;
}

int cmd_snapshots(int argc, char **argv) {
  if (argc < 2)
    return usage_error("give a subcommand: list, show, export, gc, repairs, verify or stats", NULL);
  const char *sub = argv[1];
  int is_list = strcmp(sub, "list") == 0, is_show = strcmp(sub, "show") == 0,
      is_export = strcmp(sub, "export") == 0, is_gc = strcmp(sub, "gc") == 0,
      is_repairs = strcmp(sub, "repairs") == 0, is_verify = strcmp(sub, "verify") == 0,
      is_stats = strcmp(sub, "stats") == 0;
  if (!is_list && !is_show && !is_export && !is_gc && !is_repairs && !is_verify && !is_stats)
    return usage_error("unknown subcommand", sub);

  const char *dir = getenv("VERDICT_SNAPSHOTS"), *id_text = NULL, *retention_file = NULL;
  int gc_rule_given = 0;
  snapshot_filter f;
  snapshot_filter_init(&f);
  snapshot_gc_opts g;
  snapshot_gc_opts_init(&g);
  int compact = 0, as_json = 0;
  long long limit = -1; /* none */
  int64_t now = clock_wall_ns();
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || strcmp(a, "-") == 0) {
      if (is_verify && !id_text) { /* verify S: the folder itself */
        dir = id_text = a;
        continue;
      }
      if (!is_show || id_text) return usage_error("unexpected argument", a);
      id_text = a;
      continue;
    }
    if (strcmp(a, "--compact") == 0 && is_show) {
      compact = 1;
      continue;
    }
    if (strcmp(a, "--pretty") == 0 && is_show) {
      compact = 0;
      continue;
    }
    if (strcmp(a, "--json") == 0 && is_stats) {
      as_json = 1;
      continue;
    }
    if (strcmp(a, "--dry-run") == 0 && is_gc) {
      g.dry_run = 1;
      continue;
    }
    if (strcmp(a, "--compact") == 0 || strcmp(a, "--pretty") == 0 || strcmp(a, "--dry-run") == 0) {
      fprintf(stderr, "verdict snapshots: unknown option for %s: %s\n", sub, a);
      fprintf(stderr, "try 'verdict snapshots --help'\n");
      return 2;
    }
    const char *opt = a, *val = NULL;
    const char *eq = strchr(a, '=');
    char name[64];
    if (eq && a[1] == '-' && (size_t)(eq - a) < sizeof name) {
      memcpy(name, a, (size_t)(eq - a));
      name[eq - a] = '\0';
      opt = name;
      val = eq + 1;
    } else {
      if (i + 1 >= argc) return usage_error("missing value after", a);
      val = argv[++i];
    }
    int filt = is_list || is_export;
    if (strcmp(opt, "--snapshots") == 0 || strcmp(opt, "-s") == 0) {
      dir = val;
    } else if (filt && (strcmp(opt, "--since") == 0 || strcmp(opt, "--until") == 0)) {
      int64_t t;
      if (cli_parse_when(val, now, &t) < 0)
        return usage_error("expected RFC 3339 or a time ago like 1h or 7d, got", val);
      if (strcmp(opt, "--since") == 0)
        f.since_ns = t ? t : 1;
      else
        f.until_ns = t ? t : 1;
    } else if (filt && strcmp(opt, "--point") == 0) {
      f.point = val;
    } else if (filt && strcmp(opt, "--action") == 0) {
      f.action = val;
    } else if (filt && strcmp(opt, "--policy-version") == 0) {
      f.policy_version = val;
    } else if (filt && strcmp(opt, "--source") == 0) {
      f.source = snapshot_source_parse(val, strlen(val));
      if (f.source < 0) return usage_error("--source is rule, model, default or error, not", val);
    } else if (filt && strcmp(opt, "--limit") == 0) {
      char *end;
      errno = 0;
      limit = strtoll(val, &end, 10);
      if (errno || *end || !*val || limit < 0)
        return usage_error("--limit wants a count, got", val);
    } else if ((is_gc || is_stats) && strcmp(opt, "--retention") == 0) {
      retention_file = val;
    } else if (is_gc && (strcmp(opt, "--keep-days") == 0 || strcmp(opt, "--sample") == 0 ||
                         strcmp(opt, "--min-confidence") == 0)) {
      gc_rule_given = 1;
      char *end;
      errno = 0;
      double d = strtod(val, &end);
      if (errno || *end || !*val || !(d >= 0))
        return usage_error("expected a number >= 0, got", val);
      if (strcmp(opt, "--keep-days") == 0)
        g.keep_days = d;
      else if (strcmp(opt, "--sample") == 0) {
        if (d > 1) return usage_error("--sample is a fraction in [0, 1], got", val);
        g.sample = d;
      } else
        g.min_confidence = d;
    } else {
      fprintf(stderr, "verdict snapshots: unknown option for %s: %s\n", sub, opt);
      fprintf(stderr, "try 'verdict snapshots --help'\n");
      return 2;
    }
  }
  if (!dir || !*dir) return usage_error("no snapshot directory: give --snapshots DIR", NULL);
  if (f.since_ns && f.until_ns && f.until_ns <= f.since_ns)
    return usage_error("--until must be later than --since", NULL);

  if (retention_file && gc_rule_given)
    return usage_error(
        "--retention declares the rule: not with --keep-days, --sample or "
        "--min-confidence",
        NULL);
  if (is_gc) return run_gc(dir, &g, retention_file);
  if (is_repairs) return run_repairs(dir);
  if (is_verify) return run_verify(dir);
  if (is_stats) return cli_snapshots_stats(dir, retention_file, as_json);

  uint8_t id[16];
  if (is_show) {
    if (!id_text) return usage_error("show wants a snapshot id", NULL);
    if (snapshot_id_parse(id_text, strlen(id_text), id) < 0)
      return usage_error("not a snapshot id (8-4-4-4-12 hex digits):", id_text);
  }
  snapshot_reader *r;
  char err[SNAPSHOT_ERRLEN];
  if (snapshot_reader_open(dir, &f, &r, err, sizeof err) < 0) {
    fprintf(stderr, "verdict snapshots: %s\n", err);
    return 1;
  }
  int rc = 0;
  snapshot_rec rec;
  if (is_show) {
    int k = snapshot_reader_find(r, id, &rec);
    if (k < 0) {
      fprintf(stderr, "verdict snapshots: %s\n", snapshot_reader_error(r));
      rc = 1;
    } else if (k == 0) {
      fprintf(stderr, "verdict snapshots: no snapshot %s in %s\n", id_text, dir);
      rc = 1;
    } else if (compact || !is_json(rec.payload, rec.payload_len)) {
      print_line(stdout, rec.payload, rec.payload_len);
    } else {
      print_pretty(stdout, rec.payload, rec.payload_len);
    }
  } else {
    long long n = 0;
    int k = 0;
    while ((limit < 0 || n < limit) && (k = snapshot_reader_next(r, &rec)) == 1) {
      if (is_list)
        print_list_line(&rec);
      else
        print_line(stdout, rec.payload, rec.payload_len);
      n++;
    }
    if (k < 0) {
      fprintf(stderr, "verdict snapshots: %s\n", snapshot_reader_error(r));
      rc = 1;
    }
  }
  if (snapshot_reader_skipped_bytes(r))
    fprintf(stderr, "verdict snapshots: warning: %llu damaged bytes in %s were skipped\n",
            (unsigned long long)snapshot_reader_skipped_bytes(r), dir);
  snapshot_reader_close(r);
  if (fflush(stdout) != 0 && rc == 0) {
    fprintf(stderr, "verdict snapshots: writing output: %s\n", strerror(errno));
    rc = 1;
  }
  return rc;
}
