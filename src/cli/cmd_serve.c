/* cmd_serve.c — `verdict serve`: the HTTP decision service. Reads the
 * options — from a settings file (--config) and then the command line, which
 * overrides it — into server_opts and runs the server (src/server/) until
 * SIGTERM or SIGINT; the server itself is documented in docs/server.md. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "policy/retention.h"
#include "server/server.h"
#include "ship/ship.h"

const char cmd_serve_help[] =
    "usage: verdict serve --policy DIR [options]\n"
    "       verdict serve --bundle-url URL --bundle-pubkey FILE --bundle-dir DIR [options]\n"
    "       verdict serve --config FILE [options]\n"
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
    "  GET  /v1/reviews         decisions waiting for a reviewer; the outcomes\n"
    "  POST /v1/reviews/ID      a reviewer's outcome (admin: needs the bearer token)\n"
    "  GET  /healthz, /readyz   alive; ready (bundle compiled, warm-up done)\n"
    "  GET  /metrics            Prometheus text\n"
    "  GET  /v1/status          the live bundle, where it came from, the last pull\n"
    "\n"
    "options:\n"
    "  -c, --config FILE      read settings from FILE first, one a line:\n"
    "                         NAME = VALUE, NAME a long option without its\n"
    "                         dashes (threads = 4, watch = true); the command\n"
    "                         line overrides the file\n"
    "  -p, --policy DIR       the policy bundle (required, unless --bundle-url)\n"
    "      --bundle-url URL   pull the bundle: a signed .tar.gz (`verdict bundle`)\n"
    "                         at an http:// URL, its signature at URL.sig, polled\n"
    "                         with If-None-Match; a new one is checked, unpacked\n"
    "                         and swapped in as a reload; one unsigned, badly\n"
    "                         signed, corrupt, unsafe or not compiling is refused\n"
    "                         and the old one keeps serving (docs/deploy.md)\n"
    "      --bundle-pubkey FILE  the ed25519 public key (PEM) bundles must be\n"
    "                         signed with (verdict bundle keygen)\n"
    "      --bundle-dir DIR   where pulled bundles are kept: the live one serves\n"
    "                         again at a restart, network or not; with none kept,\n"
    "                         the start waits for a first good pull (exit 1\n"
    "                         without one). Snapshots and versions default to\n"
    "                         DIR/.verdict\n"
    "      --bundle-poll SECONDS  how often URL is polled (default 30, each wait\n"
    "                         jittered by 10% either way)\n"
    "  -l, --listen HOST:PORT where to listen (default 127.0.0.1:8181; [::1]:PORT\n"
    "                         for IPv6; port 0 picks a free one, logged at start)\n"
    "  -t, --threads N        worker threads, one event loop each (default 2)\n"
    "  -s, --snapshots DIR    record snapshots in DIR (default: $VERDICT_SNAPSHOTS,\n"
    "                         else .verdict/snapshots in the bundle)\n"
    "      --no-snapshots     record nothing\n"
    "      --durability none|interval|always   (as for `verdict decide`)\n"
    "      --on-full block|drop  when the snapshot queue is full (the disk cannot\n"
    "                         keep up, or refuses writes): decisions wait for room\n"
    "                         up to 1 s and are then refused with 503, at once\n"
    "                         while the disk refuses writes (block, the default:\n"
    "                         nothing answered goes unrecorded) or go on unrecorded\n"
    "                         (drop, counted in verdict_snapshots_dropped_total)\n"
    "      --snapshot-queue N snapshots the queue holds while the disk is slow or\n"
    "                         refuses writes (default 65536; as many again in the\n"
    "                         writer's buffer): what a stop then could lose\n"
    "      --snapshot-segment BYTES  a segment file rotates past this size (default\n"
    "                         67108864); gc rewrites sealed segments only\n"
    "      --drain-timeout MS at stop, how long unwritten snapshots are retried on a\n"
    "                         disk that refuses them (default 10000); then the stop\n"
    "                         line says how many are lost\n"
    "      --store DIR        keep the policy versions in DIR too (default: versions\n"
    "                         beside the snapshot folder); --no-store: none. The\n"
    "                         snapshot folder carries its own in any case\n"
    "      --snapshot-secret FILE  this node's secret for the fields strategies\n"
    "                         keyed-hash in their snapshots (snapshot: {hash})\n"
    "      --ship URL         send the snapshots to ClickHouse as they are written\n"
    "                         (clickhouse://HOST[:PORT]/DB.TABLE; verdict ship --help),\n"
    "                         on a thread of its own: decisions never wait for it;\n"
    "                         lag, batches, retries, last error on /metrics\n"
    "      --ship-node NAME   the shipped rows' node and the cursor's name (default:\n"
    "                         the host name)\n"
    "      --retention FILE   run gc on the snapshot folder on a schedule, under the\n"
    "                         rule the retention file declares (its `every`,\n"
    "                         default 1h), on a thread of its own: decisions go on\n"
    "                         (docs/snapshots.md)\n"
    "      --max-body BYTES   largest request body (default 1048576; 413 past it)\n"
    "      --max-header BYTES request line + headers (default 16384; 431 past it)\n"
    "      --idle-timeout MS  close a keep-alive connection idle this long (30000)\n"
    "      --request-timeout MS  answer 408 to a request not complete by then (10000)\n"
    "      --max-conns N      open connections, all threads (1024; 503 past it)\n"
    "      --max-batch N      requests in one batch (1000; 413 past it)\n"
    "      --admin-token-file FILE  the bearer token of the admin endpoints\n"
    "                         (default: $VERDICT_ADMIN_TOKEN; with neither, admin\n"
    "                         endpoints are disabled)\n"
    "      --snapshot-reads local|open|admin  who may read a recorded decision\n"
    "                         (GET /v1/snapshots/{id}, explain_decision over /mcp):\n"
    "                         a client on this host's loopback or with the admin\n"
    "                         token (local, the default), anyone who reaches the\n"
    "                         port (open; logged as a warning when the address is\n"
    "                         not a loopback one) or only with the admin token (admin)\n"
    "      --watch            reload when a file in the bundle folder changes\n"
    "      --access-log FILE  one JSON line per request, appended to FILE (- for\n"
    "                         stdout)\n"
    "      --authz-redact LIST  headers /v1/authz hands the rules (and the snapshot)\n"
    "                         as \"[redacted]\", comma-separated (default\n"
    "                         " VD_AUTHZ_REDACT_DEFAULT
    "; '' for none)\n"
    "      --authz-redact-query LIST  query parameters whose values /v1/authz masks\n"
    "                         in the original URI and in URLs in headers (\"*x\": any\n"
    "                         name ending in x; default: docs/nginx.md; '' for none).\n"
    "                         A URL's user:password@ is always masked\n"
    "      --shadow DIR       a candidate bundle that decides every request off the\n"
    "                         answer's path and never answers (docs/rollout.md)\n"
    "      --shadow-queue N   off-path decisions waiting at most (1024; dropped past it)\n"
    "      --canary DIR       a candidate bundle that answers --canary-percent P of\n"
    "                         the requests, by a hash of the request's key\n"
    "      --canary-no-key live|canary  the side of requests without a key (live)\n"
    "      --canary-max-disagreement S  roll the canary back when more than this\n"
    "                         share (0..1) of the window differs from live\n"
    "      --canary-max-errors S  ... when more than this share of the window was\n"
    "                         refused by the canary\n"
    "      --canary-max-latency-us US  ... when its p99 decision time on the\n"
    "                         requests it answered is above US microseconds\n"
    "      --canary-window N  the compared decisions the limits watch (1000)\n"
    "      --canary-min-decisions M  judged once the window holds M (100)\n"
    "      --rollout-settings FILE  the canary's percent and limits (NAME = VALUE\n"
    "                         lines), re-read on SIGHUP\n" CLI_STATE_HELP
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

/* Where a setting comes from, for its error messages: a line of the
 * settings file, or the command line (file NULL). */
typedef struct origin {
  const char *file;
  int line;
} origin;

/* What the options set besides server_opts, and which of each exclusive
 * pair the command line gave (it overrides the file's). */
typedef struct serve_args {
  server_opts o;
  const char *snapshots, *store, *retention;
  int no_snapshots, no_store;
  int durability;
  int snapshots_cli, store_cli;
} serve_args;

/* A refused value: "verdict serve: --threads wants …, not V" and a pointer
 * to --help, or "verdict serve: FILE:LINE: threads wants …, not V". */
static int bad(const origin *at, const char *name, const char *msg, const char *v) {
  if (!at->file) {
    char m[160];
    snprintf(m, sizeof m, "%s %s", name, msg);
    return cli_usage_error("serve", m, v);
  }
  fprintf(stderr, "verdict serve: %s:%d: %s %s%s%s\n", at->file, at->line, name + 2, msg,
          v ? " " : "", v ? v : "");
  return 2;
}

/* A positive whole number (with an upper bound) or -1. */
static long long parse_count(const char *s, long long max) {
  char *end;
  if (!s || !*s || *s == '-') return -1;
  long long v = strtoll(s, &end, 10);
  if (*end || v <= 0 || v > max) return -1;
  return v;
}

/* Every setting by its long name; value: whether it takes one (the others
 * are flags: on the command line alone, in the file `= true` or `= false`). */
static const struct {
  const char *name;
  char value;
  char alias;
} settings[] = {
    {"--policy", 1, 'p'},
    {"--listen", 1, 'l'},
    {"--threads", 1, 't'},
    {"--snapshots", 1, 's'},
    {"--no-snapshots", 0, 0},
    {"--store", 1, 0},
    {"--no-store", 0, 0},
    {"--durability", 1, 0},
    {"--on-full", 1, 0},
    {"--max-body", 1, 0},
    {"--max-header", 1, 0},
    {"--idle-timeout", 1, 0},
    {"--request-timeout", 1, 0},
    {"--max-conns", 1, 0},
    {"--max-batch", 1, 0},
    {"--admin-token-file", 1, 0},
    {"--access-log", 1, 0},
    {"--authz-redact", 1, 0},
    {"--snapshot-reads", 1, 0},
    {"--watch", 0, 0},
    {"--authz-redact-query", 1, 0},
    {"--snapshot-queue", 1, 0},
    {"--drain-timeout", 1, 0},
    {"--retention", 1, 0},
    {"--snapshot-segment", 1, 0},
    {"--snapshot-secret", 1, 0},
    {"--shadow", 1, 0},
    {"--shadow-queue", 1, 0},
    {"--canary", 1, 0},
    {"--canary-percent", 1, 0},
    {"--canary-no-key", 1, 0},
    {"--canary-max-disagreement", 1, 0},
    {"--canary-max-errors", 1, 0},
    {"--canary-max-latency-us", 1, 0},
    {"--canary-window", 1, 0},
    {"--canary-min-decisions", 1, 0},
    {"--rollout-settings", 1, 0},
    {"--bundle-url", 1, 0},
    {"--bundle-pubkey", 1, 0},
    {"--bundle-dir", 1, 0},
    {"--bundle-poll", 1, 0},
    {"--ship", 1, 0},
    {"--ship-node", 1, 0},
};
enum { NSETTINGS = sizeof settings / sizeof settings[0] };

/* The index of the setting argument A names ("-t" or "--threads"), or -1. */
static int setting_of(const char *a) {
  for (int k = 0; k < NSETTINGS; k++)
    if (strcmp(a, settings[k].name) == 0 ||
        (settings[k].alias && a[0] == '-' && a[1] == settings[k].alias && !a[2]))
      return k;
  return -1;
}

/* Applies setting NAME (its long form) with value V (NULL for a flag).
 * Returns 0, or 2 after printing what is wrong. */
static int apply(serve_args *s, const char *name, const char *v, const origin *at) {
  server_opts *o = &s->o;
  const int cli = at->file == NULL;
  if (strcmp(name, "--policy") == 0) {
    o->policy_dir = v;
  } else if (strcmp(name, "--listen") == 0) {
    o->listen = v;
  } else if (strcmp(name, "--threads") == 0) {
    long long n = parse_count(v, 256);
    if (n < 0) return bad(at, name, "wants a number from 1 to 256, not", v);
    o->threads = (int)n;
  } else if (strcmp(name, "--snapshots") == 0 || strcmp(name, "--no-snapshots") == 0) {
    /* The command line's choice replaces the file's; in one place, both is
     * a mistake. */
    if (cli && !s->snapshots_cli) s->snapshots = NULL, s->no_snapshots = 0;
    if (!cli && (name[2] == 'n' ? s->snapshots != NULL : s->no_snapshots))
      return bad(at, name, "contradicts an earlier line (snapshots, no-snapshots)", NULL);
    if (name[2] == 'n')
      s->no_snapshots = 1;
    else
      s->snapshots = v;
    s->snapshots_cli |= cli;
  } else if (strcmp(name, "--store") == 0 || strcmp(name, "--no-store") == 0) {
    if (cli && !s->store_cli) s->store = NULL, s->no_store = 0;
    if (!cli && (name[2] == 'n' ? s->store != NULL : s->no_store))
      return bad(at, name, "contradicts an earlier line (store, no-store)", NULL);
    if (name[2] == 'n')
      s->no_store = 1;
    else
      s->store = v;
    s->store_cli |= cli;
  } else if (strcmp(name, "--ship") == 0) {
    ship_target t;
    char why[SHIP_ERRLEN];
    if (ship_target_parse(v, &t, why, sizeof why) < 0)
      return bad(at, name, "wants clickhouse://HOST[:PORT]/DB.TABLE, not", v);
    o->ship_url = v;
  } else if (strcmp(name, "--ship-node") == 0) {
    if (!*v) return bad(at, name, "needs a name", NULL);
    o->ship_node = v;
  } else if (strcmp(name, "--retention") == 0) {
    if (!*v) return bad(at, name, "needs a file", NULL);
    s->retention = v;
  } else if (strcmp(name, "--on-full") == 0) {
    if (strcmp(v, "block") == 0)
      o->engine.snapshot_on_full = VD_ON_FULL_BLOCK;
    else if (strcmp(v, "drop") == 0)
      o->engine.snapshot_on_full = VD_ON_FULL_DROP;
    else
      return bad(at, name, "takes block or drop, not", v);
  } else if (strcmp(name, "--durability") == 0) {
    if (strcmp(v, "none") == 0)
      s->durability = VD_DURABILITY_NONE;
    else if (strcmp(v, "interval") == 0)
      s->durability = VD_DURABILITY_INTERVAL;
    else if (strcmp(v, "always") == 0)
      s->durability = VD_DURABILITY_ALWAYS;
    else
      return bad(at, name, "takes none, interval or always, not", v);
  } else if (strcmp(name, "--max-body") == 0) {
    long long n = parse_count(v, 1LL << 30);
    if (n < 0) return bad(at, name, "wants bytes from 1 to 1073741824, not", v);
    o->max_body = (size_t)n;
  } else if (strcmp(name, "--max-header") == 0) {
    long long n = parse_count(v, 1 << 20);
    if (n < 256) return bad(at, name, "wants bytes from 256 to 1048576, not", v);
    o->max_header = (size_t)n;
  } else if (strcmp(name, "--snapshot-queue") == 0) {
    long long n = parse_count(v, 1LL << 24);
    if (n < 1) return bad(at, name, "wants a number of snapshots, not", v);
    o->engine.snapshot_queue_records = (unsigned)n;
  } else if (strcmp(name, "--snapshot-secret") == 0) {
    if (!*v) return bad(at, name, "needs a file", NULL);
    o->engine.snapshot_secret_file = v;
  } else if (strcmp(name, "--snapshot-segment") == 0) {
    long long n = parse_count(v, 1LL << 40);
    if (n < 4096) return bad(at, name, "wants bytes (at least 4096), not", v);
    o->engine.snapshot_segment_bytes = (unsigned long long)n;
  } else if (strcmp(name, "--drain-timeout") == 0) {
    long long n = parse_count(v, 86400000);
    if (n < 1) return bad(at, name, "wants milliseconds (at least 1), not", v);
    o->engine.snapshot_close_timeout_ms = (unsigned)n;
  } else if (strcmp(name, "--idle-timeout") == 0) {
    long long n = parse_count(v, 86400000);
    if (n < 0) return bad(at, name, "wants milliseconds, not", v);
    o->idle_timeout_ms = (unsigned)n;
  } else if (strcmp(name, "--request-timeout") == 0) {
    long long n = parse_count(v, 86400000);
    if (n < 0) return bad(at, name, "wants milliseconds, not", v);
    o->request_timeout_ms = (unsigned)n;
  } else if (strcmp(name, "--max-conns") == 0) {
    long long n = parse_count(v, 1000000);
    if (n < 0) return bad(at, name, "wants a number, not", v);
    o->max_conns = (unsigned)n;
  } else if (strcmp(name, "--max-batch") == 0) {
    long long n = parse_count(v, 1000000);
    if (n < 0) return bad(at, name, "wants a number from 1 to 1000000, not", v);
    o->max_batch = (unsigned)n;
  } else if (strcmp(name, "--admin-token-file") == 0) {
    if (!*v) return bad(at, name, "needs a file", NULL);
    o->admin_token_file = v;
  } else if (strcmp(name, "--snapshot-reads") == 0) {
    if (strcmp(v, "local") == 0)
      o->snapshot_reads = SERVER_SNAPSHOT_READS_LOCAL;
    else if (strcmp(v, "open") == 0)
      o->snapshot_reads = SERVER_SNAPSHOT_READS_OPEN;
    else if (strcmp(v, "admin") == 0)
      o->snapshot_reads = SERVER_SNAPSHOT_READS_ADMIN;
    else
      return bad(at, name, "wants local, open or admin, not", v);
  } else if (strcmp(name, "--access-log") == 0) {
    if (!*v) return bad(at, name, "needs a file (or - for stdout)", NULL);
    o->access_log = v;
  } else if (strcmp(name, "--authz-redact") == 0) {
    for (const char *ch = v; *ch; ch++)
      if (!(*ch == ',' || *ch == '-' || *ch == '_' || *ch == ' ' || isalnum((unsigned char)*ch)))
        return bad(at, name, "wants header names separated by commas, not", v);
    o->authz_redact = v;
  } else if (strcmp(name, "--authz-redact-query") == 0) {
    for (const char *ch = v; *ch; ch++)
      if (!(*ch == ',' || *ch == '-' || *ch == '_' || *ch == ' ' || *ch == '*' ||
            isalnum((unsigned char)*ch)))
        return bad(at, name, "wants parameter names separated by commas, not", v);
    o->authz_redact_query = v;
  } else if (strcmp(name, "--watch") == 0) {
    o->watch = 1;
  } else if (strcmp(name, "--bundle-url") == 0) {
    if (strncmp(v, "http://", 7) != 0)
      return bad(at, name,
                 "wants an http:// URL (put a local TLS proxy in front of an https one; the "
                 "bundle is signed either way), not",
                 v);
    o->bundle_url = v;
  } else if (strcmp(name, "--bundle-pubkey") == 0) {
    if (!*v) return bad(at, name, "needs a file", NULL);
    o->bundle_pubkey = v;
  } else if (strcmp(name, "--bundle-dir") == 0) {
    if (!*v) return bad(at, name, "needs a folder", NULL);
    o->bundle_dir = v;
  } else if (strcmp(name, "--bundle-poll") == 0) {
    char *end;
    double sec = strtod(v, &end);
    if (end == v || *end || !(sec >= 0.05 && sec <= 86400))
      return bad(at, name, "wants seconds from 0.05 to 86400, not", v);
    o->bundle_poll_ms = (unsigned)(sec * 1000 + 0.5);
  } else {
    const char *why;
    if (rollout_setting(&o->rollout, name, v, &why) > 0) return bad(at, name, why, v);
  }
  return 0;
}

/* Reads the settings file PATH into s: blank lines and lines starting with
 * # aside, each line is NAME = VALUE, NAME a long option without its dashes
 * and VALUE the rest of the line (spaces around it dropped; in double
 * quotes it may be empty or keep them, \" and \\ standing for " and \).
 * Values point into *buf, which the caller frees after the server stops.
 * Returns 0, 1 when the file cannot be read, 2 for a bad line (printed as
 * FILE:LINE: ...). */
static int read_settings(serve_args *s, const char *path, char **buf) {
  size_t len;
  if (!(*buf = cli_read_file("serve", path, &len))) return 1;
  origin at = {path, 0};
  char *p = *buf, *end = *buf + len;
  while (p < end) {
    char *line = p, *nl = memchr(p, '\n', (size_t)(end - p));
    p = nl ? nl + 1 : end;
    if (nl) *nl = '\0';
    at.line++;
    if (strlen(line) != (size_t)((nl ? nl : end) - line)) {
      fprintf(stderr, "verdict serve: %s:%d: a NUL byte in the line\n", path, at.line);
      return 2;
    }
    while (*line == ' ' || *line == '\t') line++;
    char *e = line + strlen(line);
    while (e > line && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) *--e = '\0';
    if (!*line || *line == '#') continue;
    char *eq = strchr(line, '=');
    if (!eq) {
      fprintf(stderr, "verdict serve: %s:%d: expected NAME = VALUE, not: %s\n", path, at.line,
              line);
      return 2;
    }
    char *ne = eq;
    while (ne > line && (ne[-1] == ' ' || ne[-1] == '\t')) ne--;
    *ne = '\0';
    char *v = eq + 1;
    while (*v == ' ' || *v == '\t') v++;
    int quoted = *v == '"';
    if (quoted) { /* unescape in place, up to the closing quote */
      char *r = v + 1, *w = v;
      for (; *r && *r != '"'; r++) {
        if (*r == '\\' && (r[1] == '"' || r[1] == '\\')) r++;
        *w++ = *r;
      }
      if (*r != '"' || r[1]) {
        fprintf(stderr, "verdict serve: %s:%d: %s: %s\n", path, at.line, line,
                *r ? "text after the closing quote" : "no closing quote");
        return 2;
      }
      *w = '\0';
    }
    char name[64];
    snprintf(name, sizeof name, "--%s", line);
    int k = -1;
    if (*line && *line != '-' && strlen(line) < sizeof name - 2) k = setting_of(name);
    const char *err;
    if (k < 0) {
      if (strcmp(line, "config") == 0) {
        fprintf(stderr, "verdict serve: %s:%d: config: a settings file cannot name another\n", path,
                at.line);
        return 2;
      }
      /* not one of serve's own: a counter-store option, or unknown */
      int r = *line != '-' ? cli_state_set(name, v, &s->o.engine, &err) : -1;
      if (r < 0) {
        fprintf(stderr, "verdict serve: %s:%d: unknown setting '%s' (see verdict serve --help)\n",
                path, at.line, line);
        return 2;
      }
      if (r > 0) return bad(&at, name, err, *v ? v : NULL);
      if (!*v && !quoted) return bad(&at, name, "needs a value", NULL);
      continue;
    }
    if (!*v && !quoted && strcmp(name, "--authz-redact") != 0 &&
        strcmp(name, "--authz-redact-query") != 0)
      return bad(&at, name, "needs a value", NULL);
    if (!settings[k].value) {
      if (strcmp(v, "false") == 0) continue;
      if (strcmp(v, "true") != 0) return bad(&at, name, "takes true or false, not", v);
      v = NULL;
    }
    int rc = apply(s, settings[k].name, v, &at);
    if (rc) return rc;
  }
  return 0;
}

int cmd_serve(int argc, char **argv) {
  serve_args s = {.durability = VD_DURABILITY_INTERVAL};
  server_opts_init(&s.o);
  origin cli = {NULL, 0};
  char *settings_buf = NULL;
  int rc = 0;
  /* The settings file first, whichever its place: the command line overrides it. */
  const char *config = NULL;
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
    if (strcmp(argv[i], "-c") != 0 && strcmp(argv[i], "--config") != 0) {
      int k = setting_of(argv[i]);
      if (k >= 0 && settings[k].value) i++; /* a value that looks like --config */
      continue;
    }
    if (i + 1 >= argc) return usage_error("missing value after", argv[i]);
    if (config) return usage_error("give --config once", NULL);
    config = argv[++i];
    if (!*config) return usage_error("--config needs a file", NULL);
  }
  if (config && (rc = read_settings(&s, config, &settings_buf)) != 0) goto done;

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = NULL;
    int k = setting_of(a), src;
    if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
      i++; /* read above */
      continue;
    }
    if (k >= 0) {
      /* An option that takes a value takes the next word. */
      if (settings[k].value) {
        if (i + 1 >= argc) {
          rc = usage_error("missing value after", a);
          goto done;
        }
        v = argv[++i];
      }
      if ((rc = apply(&s, settings[k].name, v, &cli)) != 0) goto done;
    } else if (strncmp(a, "--state", 7) == 0 &&
               (src = cli_state_option("serve", argc, argv, &i, &s.o.engine)) >= 0) {
      if (src) {
        rc = src;
        goto done;
      }
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(cmd_serve_help, stdout);
      goto done;
    } else {
      rc = usage_error(a[0] == '-' ? "unknown option" : "unexpected argument", a);
      goto done;
    }
  }
  if (s.o.bundle_url) {
    if (s.o.policy_dir) {
      rc = usage_error("give --policy DIR or --bundle-url URL, not both", NULL);
      goto done;
    }
    if (!s.o.bundle_pubkey || !s.o.bundle_dir) {
      rc = usage_error("--bundle-url needs --bundle-pubkey FILE and --bundle-dir DIR", NULL);
      goto done;
    }
    if (s.o.watch) {
      rc = usage_error("--watch watches a folder of your own: not with --bundle-url", NULL);
      goto done;
    }
  } else if (s.o.bundle_pubkey || s.o.bundle_dir) {
    rc = usage_error("--bundle-pubkey and --bundle-dir go with --bundle-url", NULL);
    goto done;
  } else if (!s.o.policy_dir || !*s.o.policy_dir) {
    rc = usage_error("--policy DIR is required", NULL);
    goto done;
  }
  if (s.snapshots && s.no_snapshots) {
    rc = usage_error("give --snapshots or --no-snapshots, not both", NULL);
    goto done;
  }
  if (s.store && s.no_store) {
    rc = usage_error("give --store or --no-store, not both", NULL);
    goto done;
  }
  if (s.snapshots && !*s.snapshots) {
    rc = usage_error("--snapshots needs a folder", NULL);
    goto done;
  }

  {
    char why[300];
    if (rollout_opts_check(&s.o.rollout, why, sizeof why) != 0) {
      rc = usage_error(why, NULL);
      goto done;
    }
  }
  char *default_dir = NULL, *default_store = NULL;
  /* the version store, without snapshots (beside which it is kept): not in a
   * pulled bundle's folder, which goes at the next pull */
  if (s.o.bundle_url && !s.store && !s.no_store && s.no_snapshots) {
    size_t n = strlen(s.o.bundle_dir) + sizeof "/.verdict/versions";
    if ((default_store = malloc(n))) snprintf(default_store, n, "%s/.verdict/versions", s.o.bundle_dir);
    s.store = default_store;
  }
  if (cli_default_snapshots(s.o.bundle_url ? s.o.bundle_dir : s.o.policy_dir, s.no_snapshots,
                            &s.snapshots, &default_dir) != 0) {
    fprintf(stderr, "verdict serve: out of memory\n");
    free(default_store);
    rc = 1;
    goto done;
  }
  s.o.engine.store_dir = s.no_store ? "" : s.store;
  s.o.engine.snapshots_dir = s.no_snapshots ? NULL : s.snapshots;
  s.o.engine.snapshot_durability = s.durability;
  retention *ret = NULL;
  gc_sched *gc = NULL;
  if (s.o.ship_url && s.no_snapshots) {
    rc = usage_error("--ship sends the snapshot folder: not with --no-snapshots", NULL);
  } else if (s.retention && s.no_snapshots) {
    rc = usage_error("--retention keeps a snapshot folder: not with --no-snapshots", NULL);
  } else if (s.retention && cli_retention_load("serve", s.retention, &ret) != 0) {
    rc = 1;
  } else if (ret && !(gc = cli_gc_schedule(s.snapshots, ret))) {
    fprintf(stderr, "verdict serve: cannot start the gc thread\n");
    rc = 1;
  } else {
    rc = server_run(&s.o);
  }
  cli_gc_unschedule(gc);
  retention_free(ret);
  free(default_dir);
  free(default_store);
done:
  free(settings_buf);
  return rc;
}
