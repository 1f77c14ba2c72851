/* cmd_serve.c — `verdict serve`: the HTTP decision service. Reads the
 * options into server_opts and runs the server (src/server/) until SIGTERM
 * or SIGINT; the server itself is documented in docs/server.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "server/server.h"

const char cmd_serve_help[] =
    "usage: verdict serve --policy DIR [options]\n"
    "\n"
    "Serves decisions over HTTP/1.1 (keep-alive, pipelining) on the policy bundle\n"
    "in DIR until SIGTERM or SIGINT (which finish the requests in flight, flush\n"
    "the snapshots and exit 0). SIGHUP (or POST /v1/policies/reload, or a file\n"
    "change with --watch) reloads the bundle; a bundle that fails to compile is\n"
    "logged and the old one keeps serving. Logs are JSON lines on stderr.\n"
    "\n"
    "endpoints:\n"
    "  POST /v1/decide          a request JSON in, the decision JSON out\n"
    "  POST /v1/decide/batch    a JSON array (or JSON Lines) of requests\n"
    "  GET|POST /v1/authz       for nginx auth_request: 200, 401 or 403\n"
    "  GET  /v1/snapshots/ID    a recorded decision\n"
    "  GET  /v1/policies        the live policy version and the versions kept\n"
    "  POST /v1/policies/reload reload from disk (admin: needs the bearer token)\n"
    "  POST /mcp                MCP over Streamable HTTP (JSON answers)\n"
    "  GET  /healthz, /readyz   alive; ready (bundle compiled, warm-up done)\n"
    "  GET  /metrics            Prometheus text\n"
    "\n"
    "options:\n"
    "  -p, --policy DIR       the policy bundle (required)\n"
    "  -l, --listen HOST:PORT where to listen (default 127.0.0.1:8181; [::1]:PORT\n"
    "                         for IPv6; port 0 picks a free one, logged at start)\n"
    "  -t, --threads N        worker threads, one event loop each (default 2)\n"
    "  -s, --snapshots DIR    record snapshots in DIR (default: $VERDICT_SNAPSHOTS,\n"
    "                         else .verdict/snapshots in the bundle)\n"
    "      --no-snapshots     record nothing\n"
    "      --durability none|interval|always   (as for `verdict decide`)\n"
    "      --on-full block|drop  when the snapshot queue is full (the disk cannot\n"
    "                         keep up): decisions wait for room (block, the\n"
    "                         default: nothing is lost) or go on unrecorded (drop,\n"
    "                         counted in verdict_snapshots_dropped_total)\n"
    "      --store DIR        keep the policy versions in DIR; --no-store: none\n"
    "      --max-body BYTES   largest request body (default 1048576; 413 past it)\n"
    "      --max-header BYTES request line + headers (default 16384; 431 past it)\n"
    "      --idle-timeout MS  close a keep-alive connection idle this long (30000)\n"
    "      --request-timeout MS  answer 408 to a request not complete by then (10000)\n"
    "      --max-conns N      open connections, all threads (1024; 503 past it)\n"
    "      --max-batch N      requests in one batch (1000; 413 past it)\n"
    "      --admin-token-file FILE  the bearer token of the admin endpoints\n"
    "                         (default: $VERDICT_ADMIN_TOKEN; with neither, admin\n"
    "                         endpoints are disabled)\n"
    "      --snapshot-reads open|admin  who may read a recorded decision\n"
    "                         (GET /v1/snapshots/{id}, explain_decision over /mcp):\n"
    "                         anyone who reaches the port (open, the default) or\n"
    "                         only with the admin token (admin)\n"
    "      --watch            reload when a file in the bundle folder changes\n"
    "      --access-log FILE  one JSON line per request, appended to FILE (- for\n"
    "                         stdout)\n"
    "      --authz-redact LIST  headers /v1/authz hands the rules (and the snapshot)\n"
    "                         as \"[redacted]\", comma-separated (default\n"
    "                         " VD_AUTHZ_REDACT_DEFAULT "; '' for none)\n" CLI_STATE_HELP
    "  -h, --help             this text\n"
    "\n"
    "Exit status: 0 stopped by a signal; 1 could not start (the bundle, the\n"
    "address, the snapshot folder); 2 bad usage.\n"
    "\n"
    "example:\n"
    "  verdict serve -p examples/policies --listen 127.0.0.1:8181 &\n"
    "  curl -s localhost:8181/v1/decide -d '{\"action\":\"http_request\",\"context\":{}}'\n"
    "\n"
    "More: docs/server.md\n";

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("serve", msg, arg);
}

/* A positive whole number (with an upper bound) or -1. */
static long long parse_count(const char *s, long long max) {
  char *end;
  if (!s || !*s || *s == '-') return -1;
  long long v = strtoll(s, &end, 10);
  if (*end || v <= 0 || v > max) return -1;
  return v;
}

static const char *const value_options[] = {"-p",
                                            "--policy",
                                            "-l",
                                            "--listen",
                                            "-t",
                                            "--threads",
                                            "-s",
                                            "--snapshots",
                                            "--store",
                                            "--durability",
                                            "--on-full",
                                            "--max-body",
                                            "--max-header",
                                            "--idle-timeout",
                                            "--request-timeout",
                                            "--max-conns",
                                            "--max-batch",
                                            "--admin-token-file",
                                            "--access-log",
                                            "--authz-redact",
                                            "--snapshot-reads"};

static int is_option(const char *a) {
  for (size_t k = 0; k < sizeof value_options / sizeof value_options[0]; k++)
    if (strcmp(a, value_options[k]) == 0) return 1;
  return 0;
}

int cmd_serve(int argc, char **argv) {
  server_opts o;
  server_opts_init(&o);
  const char *snapshots = NULL, *store = NULL;
  int no_snapshots = 0, no_store = 0;
  int durability = VD_DURABILITY_INTERVAL;
  int src;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = NULL;
    /* An option that takes a value takes the next word. */
    if (is_option(a)) {
      if (i + 1 >= argc) return usage_error("missing value after", a);
      v = argv[++i];
    }
    if (strcmp(a, "-p") == 0 || strcmp(a, "--policy") == 0) {
      o.policy_dir = v;
    } else if (strcmp(a, "-l") == 0 || strcmp(a, "--listen") == 0) {
      o.listen = v;
    } else if (strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0) {
      long long n = parse_count(v, 256);
      if (n < 0) return usage_error("--threads wants a number from 1 to 256, not", v);
      o.threads = (int)n;
    } else if (strcmp(a, "-s") == 0 || strcmp(a, "--snapshots") == 0) {
      snapshots = v;
    } else if (strcmp(a, "--no-snapshots") == 0) {
      no_snapshots = 1;
    } else if (strcmp(a, "--store") == 0) {
      store = v;
    } else if (strcmp(a, "--no-store") == 0) {
      no_store = 1;
    } else if (strcmp(a, "--on-full") == 0) {
      if (strcmp(v, "block") == 0)
        o.engine.snapshot_on_full = VD_ON_FULL_BLOCK;
      else if (strcmp(v, "drop") == 0)
        o.engine.snapshot_on_full = VD_ON_FULL_DROP;
      else
        return usage_error("--on-full takes block or drop, not", v);
    } else if (strcmp(a, "--durability") == 0) {
      if (strcmp(v, "none") == 0)
        durability = VD_DURABILITY_NONE;
      else if (strcmp(v, "interval") == 0)
        durability = VD_DURABILITY_INTERVAL;
      else if (strcmp(v, "always") == 0)
        durability = VD_DURABILITY_ALWAYS;
      else
        return usage_error("--durability takes none, interval or always, not", v);
    } else if (strcmp(a, "--max-body") == 0) {
      long long n = parse_count(v, 1LL << 30);
      if (n < 0) return usage_error("--max-body wants bytes from 1 to 1073741824, not", v);
      o.max_body = (size_t)n;
    } else if (strcmp(a, "--max-header") == 0) {
      long long n = parse_count(v, 1 << 20);
      if (n < 256) return usage_error("--max-header wants bytes from 256 to 1048576, not", v);
      o.max_header = (size_t)n;
    } else if (strcmp(a, "--idle-timeout") == 0) {
      long long n = parse_count(v, 86400000);
      if (n < 0) return usage_error("--idle-timeout wants milliseconds, not", v);
      o.idle_timeout_ms = (unsigned)n;
    } else if (strcmp(a, "--request-timeout") == 0) {
      long long n = parse_count(v, 86400000);
      if (n < 0) return usage_error("--request-timeout wants milliseconds, not", v);
      o.request_timeout_ms = (unsigned)n;
    } else if (strcmp(a, "--max-conns") == 0) {
      long long n = parse_count(v, 1000000);
      if (n < 0) return usage_error("--max-conns wants a number, not", v);
      o.max_conns = (unsigned)n;
    } else if (strcmp(a, "--max-batch") == 0) {
      long long n = parse_count(v, 1000000);
      if (n < 0) return usage_error("--max-batch wants a number from 1 to 1000000, not", v);
      o.max_batch = (unsigned)n;
    } else if (strcmp(a, "--admin-token-file") == 0) {
      if (!*v) return usage_error("--admin-token-file needs a file", NULL);
      o.admin_token_file = v;
    } else if (strcmp(a, "--snapshot-reads") == 0) {
      if (strcmp(v, "open") == 0)
        o.snapshot_reads_admin = 0;
      else if (strcmp(v, "admin") == 0)
        o.snapshot_reads_admin = 1;
      else
        return usage_error("--snapshot-reads wants open or admin, not", v);
    } else if (strcmp(a, "--access-log") == 0) {
      if (!*v) return usage_error("--access-log needs a file (or - for stdout)", NULL);
      o.access_log = v;
    } else if (strcmp(a, "--authz-redact") == 0) {
      for (const char *ch = v; *ch; ch++)
        if (!(*ch == ',' || *ch == '-' || *ch == '_' || *ch == ' ' || (*ch >= 'a' && *ch <= 'z') ||
              (*ch >= 'A' && *ch <= 'Z') || (*ch >= '0' && *ch <= '9')))
          return usage_error("--authz-redact wants header names separated by commas, not", v);
      o.authz_redact = v;
    } else if (strcmp(a, "--watch") == 0) {
      o.watch = 1;
    } else if (strncmp(a, "--state", 7) == 0 &&
               (src = cli_state_option("serve", argc, argv, &i, &o.engine)) >= 0) {
      if (src) return src;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(cmd_serve_help, stdout);
      return 0;
    } else {
      return usage_error(a[0] == '-' ? "unknown option" : "unexpected argument", a);
    }
  }
  if (!o.policy_dir || !*o.policy_dir) return usage_error("--policy DIR is required", NULL);
  if (snapshots && no_snapshots)
    return usage_error("give --snapshots or --no-snapshots, not both", NULL);
  if (store && no_store) return usage_error("give --store or --no-store, not both", NULL);
  if (snapshots && !*snapshots) return usage_error("--snapshots needs a folder", NULL);

  char *default_dir = NULL;
  if (cli_default_snapshots(o.policy_dir, no_snapshots, &snapshots, &default_dir) != 0) {
    fprintf(stderr, "verdict serve: out of memory\n");
    return 1;
  }
  o.engine.store_dir = no_store ? "" : store;
  o.engine.snapshots_dir = no_snapshots ? NULL : snapshots;
  o.engine.snapshot_durability = durability;
  int rc = server_run(&o);
  free(default_dir);
  return rc;
}
