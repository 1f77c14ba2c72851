/* main.c — `verdict`: dispatches to one command per file (cmd_*.c) and
 * answers --help and --version. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/timefmt.h"
#include "verdict.h"

typedef struct command {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv);
  const char *help;
} command;

static const command commands[] = {
    {"eval", "evaluate a condition-language (CEL) expression", cmd_eval, cmd_eval_help},
    {"decide", "decide requests (JSON) against a policy bundle", cmd_decide, cmd_decide_help},
    {"check", "validate a policy bundle and report every problem", cmd_check, cmd_check_help},
    {"test", "run a policy bundle's inline tests", cmd_test, cmd_test_help},
    {"snapshots", "list, show, export and trim recorded decision snapshots", cmd_snapshots,
     cmd_snapshots_help},
    {"replay", "decide recorded snapshots again: determinism check, score a candidate", cmd_replay,
     cmd_replay_help},
    {"ship", "send recorded decision snapshots to ClickHouse, or create its table", cmd_ship,
     cmd_ship_help},
    {"serve", "serve decisions over HTTP: /v1/decide, snapshots, health, metrics", cmd_serve,
     cmd_serve_help},
    {"gen", "generate realistic labelled requests for the example strategies", cmd_gen,
     cmd_gen_help},
    {"model", "inspect an XGBoost model, score CSV rows, check a model and its spec", cmd_model,
     cmd_model_help},
    {"mcp", "serve the policy to coding agents as an MCP server on stdio", cmd_mcp, cmd_mcp_help},
    {"hook", "answer a coding agent's pre-tool-call hook (claude, codex, gemini, opencode)",
     cmd_hook, cmd_hook_help},
    {"store", "show a policy version store, clean its caches", cmd_store, cmd_store_help},
    {"reviews", "the review queue of a snapshot folder, its outcomes as a labels file", cmd_reviews,
     cmd_reviews_help},
    {"rollout", "report a shadow or canary run from its snapshots: changes, accuracy, limits",
     cmd_rollout, cmd_rollout_help},
    {"bundle", "pack, sign and verify the bundle files `serve --bundle-url` pulls", cmd_bundle,
     cmd_bundle_help},
};

static void usage(FILE *out) {
  fprintf(out,
          "verdict %s — fast, recorded decisions\n"
          "\n"
          "usage: verdict <command> [options]\n"
          "       verdict <command> --help\n"
          "       verdict --version\n"
          "\n"
          "commands:\n",
          vd_version());
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\ndocs: docs/cli.md (every command), docs/policy.md (the policy language),\n"
          "      docs/expressions.md (conditions), docs/snapshots.md, docs/replay.md\n");
}

int cli_usage_error(const char *cmd, const char *msg, const char *arg) {
  fprintf(stderr, "verdict %s: %s%s%s\n", cmd, msg, arg ? " " : "", arg ? arg : "");
  fprintf(stderr, "try 'verdict %s --help'\n", cmd);
  return 2;
}

void cli_agent_opts(vd_engine_opts *opts, const char *store, int no_store, const char *snapshots,
                    int no_snapshots, int durability) {
  memset(opts, 0, sizeof *opts);
  opts->store_dir = no_store ? "" : store;
  opts->snapshots_dir = no_snapshots ? NULL : snapshots;
  opts->snapshot_durability = durability;
  /* Tool calls carry whole files (Write content, patches): a lockfile is
   * easily over the 1 MiB default. */
  opts->max_request_bytes = 16u << 20;
  opts->memory_limit = 256u << 20;
}

int cli_default_snapshots(const char *policy, int no_snapshots, const char **snapshots,
                          char **owned) {
  *owned = NULL;
  if (no_snapshots || *snapshots) return 0;
  const char *env = getenv("VERDICT_SNAPSHOTS");
  if (env && *env) {
    *snapshots = env;
    return 0;
  }
  size_t n = strlen(policy) + sizeof "/.verdict/snapshots";
  if (!(*owned = malloc(n))) return -1;
  snprintf(*owned, n, "%s/.verdict/snapshots", policy);
  *snapshots = *owned;
  return 0;
}

int cli_parse_when(const char *s, int64_t now, int64_t *out) {
  size_t n = strlen(s);
  int64_t sec;
  int32_t nanos;
  if (timefmt_parse_rfc3339(s, n, &sec, &nanos) == 0) {
    /* nanoseconds since 1970 in 64 bits: the years 1678 to 2261 */
    if (sec <= INT64_MIN / 1000000000 || sec >= INT64_MAX / 1000000000) return -1;
    *out = sec * 1000000000 + nanos;
    return 0;
  }
  if (n >= 2 && s[n - 1] == 'd') { /* days: not a Go duration unit, but the natural one here */
    char *end;
    errno = 0;
    double days = strtod(s, &end);
    if (errno || end != s + n - 1 || !(days >= 0) || days > 36500) return -1;
    *out = now - (int64_t)(days * 86400e9);
    return 0;
  }
  if (timefmt_parse_duration(s, n, &sec, &nanos) == 0 && sec >= 0 && nanos >= 0 &&
      sec < 3153600000LL) {
    *out = now - (sec * 1000000000 + nanos);
    return 0;
  }
  return -1;
}

FILE *cli_open_file(const char *cmd, const char *path, const char *mode) {
  if (mode[0] == 'r' && strcmp(path, "-") == 0) return stdin;
  FILE *f = fopen(path, mode);
  if (!f) fprintf(stderr, "verdict %s: %s: %s\n", cmd, path, strerror(errno));
  return f;
}

char *cli_read_file(const char *cmd, const char *path, size_t *len) {
  FILE *f = cli_open_file(cmd, path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf) break;
    if (n + 1 >= cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  int err = ferror(f);
  if (f != stdin) fclose(f);
  if (!buf || err) {
    fprintf(stderr, "verdict %s: %s: %s\n", cmd, strcmp(path, "-") == 0 ? "<stdin>" : path,
            buf ? "read error" : "out of memory");
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    if (argc > 2 && strcmp(cmd, "help") == 0) {
      for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[2], commands[i].name) == 0) {
          fputs(commands[i].help, stdout);
          return 0;
        }
    }
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0 || strcmp(cmd, "version") == 0) {
    printf("verdict %s\n", vd_version());
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (strcmp(cmd, commands[i].name) != 0) continue;
    for (int a = 2; a < argc; a++) {
      if (strcmp(argv[a], "--") == 0) break;
      if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) {
        fputs(commands[i].help, stdout);
        return 0;
      }
    }
    return commands[i].run(argc - 1, argv + 1);
  }
  fprintf(stderr, "verdict: unknown command '%s' (try 'verdict --help')\n", cmd);
  return 2;
}
