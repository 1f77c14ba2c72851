/* cmd_decide.c — `verdict decide`: open an engine on a policy bundle and
 * decide requests given as JSON, printing each decision as JSON. With
 * --jsonl it reads one request a line and keeps going past bad lines (each
 * gets an error object in its place), so that a file of recorded requests
 * can be run in one go. Only the public API (verdict.h) is used: this is
 * what an embedding program would do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/json.h"
#include "verdict.h"

const char cmd_decide_help[] =
    "usage: verdict decide --policy DIR [options] [REQUEST.json | -]\n"
    "\n"
    "Decides a request against the policy bundle in DIR (a folder of *.yaml\n"
    "strategies) and prints the decision as JSON on stdout. The request is a JSON\n"
    "object read from REQUEST.json, or from stdin when it is '-' or not given:\n"
    "\n"
    "  {\"action\": \"http_request\", \"candidates\": [\"allow\", \"block\"],\n"
    "   \"context\": {\"path\": \"/api/v1/users\"}, \"key\": \"203.0.113.9\"}\n"
    "\n"
    "Only \"action\" (the decision point) is required. The decision:\n"
    "\n"
    "  {\"action\":\"allow\",\"allowed\":true,\"review\":false,\"confidence\":1.0,\n"
    "   \"source\":\"rule\",\"reason\":{\"rule\":\"geofence-api\",\"message\":null},\n"
    "   \"strategy\":\"request_gate\",\"policy_version\":\"...\",\"model_version\":null,\n"
    "   \"latency_us\":1.2,\"snapshot_id\":\"0193c0de-7a1b-7c3d-8e4f-0123456789ab\"}\n"
    "\n"
    "Every decision is recorded as a snapshot (docs/snapshots.md), by default in\n"
    "DIR/.verdict/snapshots beside the version store; `verdict snapshots show ID`\n"
    "prints one back. A refused request is not a decision and is not recorded.\n"
    "\n"
    "options:\n"
    "  -p, --policy DIR   the policy bundle (required)\n"
    "      --jsonl        one request a line in, one decision a line out; a bad line\n"
    "                     prints {\"error\":{\"code\",\"message\",\"path\",\"line\"}} instead\n"
    "                     and the exit status is 1 at the end\n"
    "      --trace        add \"trace\": the rules tried and their results, the rule\n"
    "                     that matched, the lets computed, ns per stage\n"
    "      --pretty       indent the JSON (not with --jsonl)\n"
    "      --store DIR    keep the policy versions loaded in DIR too (default:\n"
    "                     versions beside the snapshot folder); --no-store keeps\n"
    "                     none; the snapshot folder carries its own in any case\n"
    "      --snapshot-secret FILE  this node's secret for the fields strategies\n"
    "                     keyed-hash in their snapshots (snapshot: {hash: [...]})\n"
    "  -s, --snapshots DIR  record snapshots in DIR (default: $VERDICT_SNAPSHOTS,\n"
    "                     else .verdict/snapshots in the bundle)\n"
    "      --no-snapshots record nothing (\"snapshot_id\" is then null)\n"
    "      --durability none|interval|always\n"
    "                     when snapshots reach the disk: interval (the default) syncs\n"
    "                     every 100 ms and at exit; always answers each decision\n"
    "                     only once its snapshot is synced; none leaves it to the "
    "OS\n" CLI_STATE_HELP
    "  -h, --help         this text\n"
    "\n"
    "Exit status: 0 every request was decided; 1 the bundle does not load, the\n"
    "snapshot folder cannot be written, or a request was refused (its error names\n"
    "the JSON path); 2 bad usage.\n"
    "\n"
    "examples:\n"
    "  verdict decide --policy examples/policies examples/requests/gate.json\n"
    "  echo '{\"action\":\"request_gate\",\"context\":{\"path\":\"/\"}}' | verdict decide -p DIR "
    "--trace\n"
    "  verdict decide -p DIR --jsonl requests.jsonl > decisions.jsonl\n"
    "  verdict decide -p DIR --snapshots /var/lib/verdict/snapshots --durability always req.json\n"
    "\n"
    "The policy language: docs/policy.md; the decision fields: docs/engine.md\n";

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("decide", msg, arg);
}

/* Re-indents compact JSON (as the engine writes it) with two spaces. */
static void print_pretty(FILE *out, const char *s, size_t n) {
  int depth = 0, in_str = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (in_str) {
      fputc(c, out);
      if (c == '\\' && i + 1 < n)
        fputc(s[++i], out);
      else if (c == '"')
        in_str = 0;
      continue;
    }
    switch (c) {
      case '"':
        in_str = 1;
        fputc(c, out);
        break;
      case '{':
      case '[':
        /* Empty containers stay on one line. */
        if (i + 1 < n && (s[i + 1] == '}' || s[i + 1] == ']')) {
          fputc(c, out);
          fputc(s[++i], out);
          break;
        }
        fputc(c, out);
        depth++;
        fprintf(out, "\n%*s", depth * 2, "");
        break;
      case '}':
      case ']':
        depth--;
        fprintf(out, "\n%*s%c", depth * 2, "", c);
        break;
      case ',':
        fprintf(out, ",\n%*s", depth * 2, "");
        break;
      case ':':
        fputs(": ", out);
        break;
      default:
        fputc(c, out);
    }
  }
  fputc('\n', out);
}

static void print_error_object(const vd_error *err, long line) {
  json_buf b;
  json_buf_init(&b, NULL);
  json_buf_put(&b, "{\"error\":{\"code\":", 17);
  const char *code = vd_err_name(err->code);
  json_write_string(&b, code, strlen(code));
  json_buf_put(&b, ",\"message\":", 11);
  json_write_string(&b, err->message, strlen(err->message));
  json_buf_put(&b, ",\"path\":", 8);
  if (err->path[0])
    json_write_string(&b, err->path, strlen(err->path));
  else
    json_buf_put(&b, "null", 4);
  char t[48];
  int n = snprintf(t, sizeof t, ",\"line\":%ld}}", line);
  json_buf_put(&b, t, (size_t)n);
  if (!b.oom) fwrite(b.data, 1, b.len, stdout);
  fputc('\n', stdout);
  json_buf_free(&b);
}

static int print_decision(vd_decision *d, int flags, int pretty) {
  const char *s;
  size_t n;
  if (vd_decision_render(d, flags, &s, &n) != 0) {
    fprintf(stderr, "verdict decide: out of memory writing the decision\n");
    return 1;
  }
  if (pretty)
    print_pretty(stdout, s, n);
  else {
    fwrite(s, 1, n, stdout);
    fputc('\n', stdout);
  }
  return 0;
}

static int run_jsonl(vd_engine *e, vd_decision *d, const char *path, int flags) {
  FILE *f = cli_open_file("decide", path, "rb");
  if (!f) return 1;
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  long lineno = 0;
  int failed = 0;
  vd_error err;
  while ((got = getline(&line, &cap, f)) >= 0) {
    lineno++;
    size_t n = (size_t)got;
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
    size_t k = 0;
    while (k < n && (line[k] == ' ' || line[k] == '\t')) k++;
    if (k == n) continue; /* blank line */
    if (vd_decide_json(e, line, (long)n, d, &err) != 0) {
      print_error_object(&err, lineno);
      failed = 1;
    } else if (print_decision(d, flags, 0)) {
      failed = 1;
    }
  }
  int rerr = ferror(f);
  free(line);
  if (f != stdin) fclose(f);
  if (rerr) {
    fprintf(stderr, "verdict decide: %s: read error\n", path);
    return 1;
  }
  fflush(stdout);
  return failed;
}

/* Opens the engine. Another process writing snapshots to the same folder
 * (a parallel `verdict decide`) holds it only for its run: wait for it, up
 * to a limit, rather than fail at once. */
static int open_engine(const char *policy, const vd_engine_opts *opts, vd_engine **e,
                       vd_error *err) {
  int waited_ms = 0;
  for (;;) {
    int rc = vd_engine_open(policy, opts, e, err);
    if (rc != VD_EBUSY || waited_ms >= 10000) return rc;
    struct timespec ts = {0, 20 * 1000000};
    nanosleep(&ts, NULL);
    waited_ms += 20;
  }
}

/* Says so on stderr when snapshots were lost or are failing to be written. */
static int report_snapshots(vd_engine *e) {
  vd_engine_counters c;
  if (vd_engine_stats(e, &c) != 0 || !c.snapshots_on) return 0;
  if (c.snapshots_dropped || c.snapshots_failed) {
    fprintf(stderr,
            "verdict decide: %llu decision%s not recorded (%llu dropped, %llu failed)%s%s\n",
            c.snapshots_dropped + c.snapshots_failed,
            c.snapshots_dropped + c.snapshots_failed == 1 ? "" : "s", c.snapshots_dropped,
            c.snapshots_failed, c.snapshot_last_error[0] ? ": " : "", c.snapshot_last_error);
    return 1;
  }
  if (c.snapshot_write_errors)
    fprintf(stderr, "verdict decide: snapshot writes failed %llu time%s (retried): %s\n",
            c.snapshot_write_errors, c.snapshot_write_errors == 1 ? "" : "s",
            c.snapshot_last_error);
  return 0;
}

int cmd_decide(int argc, char **argv) {
  const char *policy = NULL, *store = NULL, *input = NULL, *snapshots = NULL, *secret = NULL;
  int jsonl = 0, trace = 0, pretty = 0, no_store = 0, no_snapshots = 0;
  int durability = VD_DURABILITY_INTERVAL;
  vd_engine_opts state; /* the --state options, copied into opts below */
  memset(&state, 0, sizeof state);
  int src;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == '\0') break;
    if (strcmp(a, "-p") == 0 || strcmp(a, "--policy") == 0) {
      if (i + 1 >= argc) return usage_error("missing value after", a);
      policy = argv[++i];
    } else if (strncmp(a, "--policy=", 9) == 0) {
      policy = a + 9;
    } else if (strcmp(a, "--store") == 0) {
      if (i + 1 >= argc) return usage_error("missing value after", a);
      store = argv[++i];
    } else if (strcmp(a, "--no-store") == 0) {
      no_store = 1;
    } else if (strcmp(a, "--snapshot-secret") == 0) {
      if (i + 1 >= argc) return usage_error("missing value after", a);
      secret = argv[++i];
    } else if (strcmp(a, "-s") == 0 || strcmp(a, "--snapshots") == 0) {
      if (i + 1 >= argc) return usage_error("missing value after", a);
      snapshots = argv[++i];
    } else if (strncmp(a, "--snapshots=", 12) == 0) {
      snapshots = a + 12;
    } else if (strcmp(a, "--no-snapshots") == 0) {
      no_snapshots = 1;
    } else if (strcmp(a, "--durability") == 0 || strncmp(a, "--durability=", 13) == 0) {
      const char *v = a[12] == '=' ? a + 13 : NULL;
      if (!v) {
        if (i + 1 >= argc) return usage_error("missing value after", a);
        v = argv[++i];
      }
      if (strcmp(v, "none") == 0)
        durability = VD_DURABILITY_NONE;
      else if (strcmp(v, "interval") == 0)
        durability = VD_DURABILITY_INTERVAL;
      else if (strcmp(v, "always") == 0)
        durability = VD_DURABILITY_ALWAYS;
      else
        return usage_error("--durability takes none, interval or always, not", v);
    } else if (strncmp(a, "--state", 7) == 0 &&
               (src = cli_state_option("decide", argc, argv, &i, &state)) >= 0) {
      if (src) return src;
    } else if (strcmp(a, "--jsonl") == 0) {
      jsonl = 1;
    } else if (strcmp(a, "--trace") == 0) {
      trace = 1;
    } else if (strcmp(a, "--pretty") == 0) {
      pretty = 1;
    } else {
      return usage_error("unknown option", a);
    }
  }
  if (i < argc) input = argv[i++];
  if (i < argc) return usage_error("unexpected argument", argv[i]);
  if (!policy || !*policy) return usage_error("--policy DIR is required", NULL);
  if (pretty && jsonl) return usage_error("--pretty does not go with --jsonl", NULL);
  if (store && no_store) return usage_error("give --store or --no-store, not both", NULL);
  if (snapshots && no_snapshots)
    return usage_error("give --snapshots or --no-snapshots, not both", NULL);
  if (snapshots && !*snapshots) return usage_error("--snapshots needs a folder", NULL);
  if (!input) input = "-";

  /* Snapshots are on unless asked not to be: beside the version store. */
  char *default_dir = NULL;
  if (cli_default_snapshots(policy, no_snapshots, &snapshots, &default_dir) != 0) {
    fprintf(stderr, "verdict decide: out of memory\n");
    return 1;
  }

  vd_engine_opts opts;
  memset(&opts, 0, sizeof opts);
  opts.store_dir = no_store ? "" : store;
  opts.snapshot_secret_file = secret;
  opts.snapshots_dir = no_snapshots ? NULL : snapshots;
  opts.snapshot_durability = durability;
  opts.state_url = state.state_url;
  opts.state_on_error = state.state_on_error;
  opts.state_timeout_ms = state.state_timeout_ms;
  opts.state_max_bytes = state.state_max_bytes;
  opts.state_file = state.state_file;
  opts.lazy_compile = 1; /* one thread, decisions one after another */
  vd_error err;
  vd_engine *e;
  int orc = open_engine(policy, &opts, &e, &err);
  free(default_dir);
  if (orc != 0) {
    fprintf(stderr, "verdict decide: %s\n", err.message);
    return 1;
  }
  {
    vd_engine_counters c;
    if (vd_engine_stats(e, &c) == 0 && c.state_last_error[0])
      fprintf(stderr, "verdict decide: warning: %s\n", c.state_last_error);
  }
  vd_decision *d = vd_decision_new();
  if (!d) {
    vd_engine_close(e);
    fprintf(stderr, "verdict decide: out of memory\n");
    return 1;
  }
  vd_decision_set_trace(d, trace);
  int flags = trace ? VD_JSON_TRACE : 0;
  int rc;
  if (jsonl) {
    rc = run_jsonl(e, d, input, flags);
  } else {
    size_t len;
    char *buf = cli_read_file("decide", input, &len);
    if (!buf) {
      rc = 1;
    } else if (vd_decide_json(e, buf, (long)len, d, &err) != 0) {
      fprintf(stderr, "verdict decide: %s: %s\n", strcmp(input, "-") == 0 ? "<stdin>" : input,
              err.message);
      rc = 1;
    } else {
      rc = print_decision(d, flags, pretty);
    }
    free(buf);
  }
  if (report_snapshots(e)) rc = 1;
  vd_decision_free(d);
  vd_engine_close(e);
  return rc;
}
