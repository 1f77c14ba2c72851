/* cmd_ship.c — `verdict ship`: a snapshot folder's decisions sent to
 * ClickHouse (src/ship/ship.h), or the table made for them.
 *
 *   --create-table URL          the snapshots and versions tables
 *   --snapshots DIR URL         ship the folder (follow it; --once: to its end)
 *
 * SIGINT/SIGTERM stop a following shipper between two batches or backoff
 * steps; the cursor then names the last batch ClickHouse acknowledged. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "ship/ship.h"

const char cmd_ship_help[] =
    "usage: verdict ship --create-table clickhouse://HOST[:PORT]/DB.TABLE\n"
    "       verdict ship [--snapshots DIR] [--node NAME] [--batch N] [--once]\n"
    "                    clickhouse://HOST[:PORT]/DB.TABLE\n"
    "\n"
    "Sends the decision snapshots recorded in DIR to ClickHouse, so that a fleet's\n"
    "decisions are queried, and replayed (verdict replay --from), in one place\n"
    "(docs/deploy.md, \"Snapshots shipped to ClickHouse\"). Records are read from the\n"
    "folder's segment files and inserted in batches over ClickHouse's HTTP interface\n"
    "(port 8123 by default), gzip'd; after each batch ClickHouse acknowledged, a\n"
    "cursor in DIR (ship-NODE.cursor) moves past it, so a shipper stopped or killed\n"
    "goes on where it was. A batch may be sent twice (at least once); the table\n"
    "keeps one row per snapshot id once merged. The policy and model versions the\n"
    "records name go to DB.TABLE_versions first. ClickHouse down: retried with\n"
    "backoff, nothing skipped.\n"
    "\n"
    "  --create-table URL   create the database, DB.TABLE and DB.TABLE_versions\n"
    "                       (if not there) and exit\n"
    "\n"
    "options:\n"
    "  -s, --snapshots DIR  the snapshot folder (default: $VERDICT_SNAPSHOTS)\n"
    "      --node NAME      the rows' node and the cursor's name (default: the host\n"
    "                       name); letters, digits, '-', '_', '.'\n"
    "      --batch N        records a batch at most (5000)\n"
    "      --once           stop at the end of the folder (default: follow it as it\n"
    "                       grows, until SIGINT or SIGTERM)\n"
    "  -q, --quiet          no line per batch on stderr\n"
    "  -h, --help           this text\n"
    "\n"
    "Exit status: 0 done (or stopped); 1 the folder or ClickHouse refused (a table\n"
    "that cannot be made, a folder that cannot be read, a cursor that cannot be\n"
    "written); 2 bad usage.\n"
    "\n"
    "examples:\n"
    "  verdict ship --create-table clickhouse://127.0.0.1:8123/verdict.decisions\n"
    "  verdict ship --snapshots /var/lib/verdict/snapshots \\\n"
    "      clickhouse://clickhouse.internal:8123/verdict.decisions\n";

static shipper *running;

static void on_signal(int sig) {
  (void)sig;
  if (running) shipper_stop(running);
}

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("ship", msg, arg);
}

int cmd_ship(int argc, char **argv) {
  ship_opts o;
  ship_opts_init(&o);
  o.dir = getenv("VERDICT_SNAPSHOTS");
  const char *create = NULL, *url = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--once")) {
      o.once = 1;
    } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      o.quiet = 1;
    } else if (!strcmp(a, "--create-table") || !strcmp(a, "-s") || !strcmp(a, "--snapshots") ||
               !strcmp(a, "--node") || !strcmp(a, "--batch")) {
      if (i + 1 >= argc) return usage_error("missing value after", a);
      const char *v = argv[++i];
      if (!strcmp(a, "--create-table"))
        create = v;
      else if (!strcmp(a, "--node"))
        o.node = v;
      else if (!strcmp(a, "--batch")) {
        char *end;
        unsigned long n = strtoul(v, &end, 10);
        if (*end || !*v || n < 1 || n > 1000000)
          return usage_error("--batch: want a number of records from 1 to 1000000, got", v);
        o.batch = (uint32_t)n;
      } else
        o.dir = v;
    } else if (a[0] == '-') {
      return usage_error("unknown option", a);
    } else if (!url) {
      url = a;
    } else {
      return usage_error("unexpected argument", a);
    }
  }
  char err[SHIP_ERRLEN];
  if (create) {
    if (url) return usage_error("--create-table takes the URL itself; unexpected", url);
    ship_target t;
    if (ship_target_parse(create, &t, err, sizeof err) < 0)
      return usage_error("--create-table:", err);
    if (ship_create_tables(&t, err, sizeof err) < 0) {
      fprintf(stderr, "verdict ship: %s\n", err);
      return 1;
    }
    printf("created %s.%s and %s.%s_versions (or they were there)\n", t.db, t.table, t.db, t.table);
    return 0;
  }
  if (!url) return usage_error("no ClickHouse URL: give clickhouse://HOST[:PORT]/DB.TABLE", NULL);
  if (!o.dir || !*o.dir) return usage_error("no snapshot folder: give --snapshots DIR", NULL);
  o.url = url;
  shipper *s;
  int usage = 0;
  if (shipper_new(&o, &s, &usage, err, sizeof err) < 0) {
    shipper_free(s);
    if (usage) return usage_error(err, NULL);
    fprintf(stderr, "verdict ship: %s\n", err);
    return 1;
  }
  running = s;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  int rc = shipper_run(s, err, sizeof err);
  if (rc < 0) fprintf(stderr, "verdict ship: %s\n", err);
  const ship_stats *st = shipper_stats(s);
  if (!o.quiet)
    fprintf(stderr, "verdict ship: %llu records in %llu batches shipped, %llu retries\n",
            (unsigned long long)st->shipped, (unsigned long long)st->batches,
            (unsigned long long)st->retries);
  running = NULL;
  shipper_free(s);
  return rc < 0 ? 1 : 0;
}
