/* cmd_mcp.c — `verdict mcp`: an MCP server on stdio. The client (a coding
 * agent, the MCP inspector) starts it and writes newline-delimited JSON-RPC
 * 2.0 messages on stdin; each answer is one line on stdout, and nothing else
 * ever goes to stdout (notes go to stderr). It stops at the end of stdin.
 * The protocol itself is src/agent/mcp.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/mcp.h"
#include "cli/cli.h"
#include "core/json.h"
#include "verdict.h"

const char cmd_mcp_help[] =
    "usage: verdict mcp --policy DIR [options]\n"
    "\n"
    "Serves the policy bundle in DIR as an MCP (Model Context Protocol) server on\n"
    "stdin/stdout: newline-delimited JSON-RPC 2.0, protocol versions 2025-11-25,\n"
    "2025-06-18, 2025-03-26, 2024-11-05 (through initialize) and the stateless\n"
    "2026-07-28 style. A coding agent starts it as a stdio MCP server. Tools:\n"
    "\n"
    "  decide_action     {tool_name, tool_input, cwd, session_id, agent, candidates}\n"
    "                    (or {action, context, key} for any decision point) ->\n"
    "                    the decision as structuredContent: action, allowed, review,\n"
    "                    reason {rule, message}, snapshot_id, ...\n"
    "  explain_decision  {snapshot_id} -> the recorded snapshot of that decision\n"
    "\n"
    "A tool call becomes the request {\"action\": \"tool_call\", \"context\": {agent,\n"
    "tool, agent_tool, input, cwd, session}}, as `verdict hook` sends it; cwd\n"
    "defaults to the server's working directory. Logs go to stderr only.\n"
    "\n"
    "options:\n"
    "  -p, --policy DIR     the policy bundle (required; default $VERDICT_POLICY)\n"
    "  -s, --snapshots DIR  record decisions in DIR (default: $VERDICT_SNAPSHOTS,\n"
    "                       else DIR/.verdict/snapshots of the bundle); the server\n"
    "                       holds the folder while it runs, so give hooks running\n"
    "                       at the same time another folder\n"
    "      --no-snapshots   record nothing (explain_decision then has nothing to show)\n"
    "      --store DIR      keep the policy versions loaded in DIR (default: versions\n"
    "                       beside the snapshot folder); --no-store: none\n"
    "      --durability none|interval|always   as for `verdict decide` (interval)\n"
    "  -h, --help           this text\n"
    "\n"
    "Exit status: 0 at the end of stdin; 1 the bundle does not load; 2 bad usage.\n"
    "\n"
    "examples:\n"
    "  verdict mcp --policy examples/policies\n"
    "  npx @modelcontextprotocol/inspector --cli verdict mcp --policy P --method tools/list\n"
    "\n"
    "Setup for Claude Code, Codex, Gemini CLI and OpenCode: docs/agents.md\n";

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("mcp", msg, arg);
}

/* The longest message read: a client cannot make the server buffer more. */
#define MAX_MESSAGE (16u << 20)

/* One newline-terminated message from stdin into *line (grown as needed,
 * NUL-terminated): its length; -1 at the end of input; -2 for a message
 * longer than MAX_MESSAGE, whose bytes are skipped up to its newline
 * without being kept (getline would buffer any length the client sends). */
static ssize_t read_message(char **line, size_t *cap) {
  size_t n = 0;
  int ch, over = 0;
  while ((ch = getc_unlocked(stdin)) != EOF) {
    if (over) {
      if (ch == '\n') return -2;
      continue;
    }
    if (n + 2 > *cap) {
      size_t want = *cap ? *cap * 2 : 4096;
      char *p = realloc(*line, want);
      if (!p) return -1;
      *line = p;
      *cap = want;
    }
    (*line)[n++] = (char)ch;
    if (ch == '\n') break;
    if (n > MAX_MESSAGE) over = 1;
  }
  if (over) return -2;
  if (n == 0) return -1;
  (*line)[n] = '\0';
  return (ssize_t)n;
}

int cmd_mcp(int argc, char **argv) {
  const char *policy = getenv("VERDICT_POLICY"), *store = NULL, *snapshots = NULL;
  int no_store = 0, no_snapshots = 0, durability = VD_DURABILITY_INTERVAL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if ((strcmp(a, "-p") == 0 || strcmp(a, "--policy") == 0) && i + 1 < argc) {
      policy = argv[++i];
    } else if (strncmp(a, "--policy=", 9) == 0) {
      policy = a + 9;
    } else if ((strcmp(a, "-s") == 0 || strcmp(a, "--snapshots") == 0) && i + 1 < argc) {
      snapshots = argv[++i];
    } else if (strncmp(a, "--snapshots=", 12) == 0) {
      snapshots = a + 12;
    } else if (strcmp(a, "--no-snapshots") == 0) {
      no_snapshots = 1;
    } else if (strcmp(a, "--store") == 0 && i + 1 < argc) {
      store = argv[++i];
    } else if (strcmp(a, "--no-store") == 0) {
      no_store = 1;
    } else if (strcmp(a, "--durability") == 0 && i + 1 < argc) {
      const char *v = argv[++i];
      if (strcmp(v, "none") == 0)
        durability = VD_DURABILITY_NONE;
      else if (strcmp(v, "interval") == 0)
        durability = VD_DURABILITY_INTERVAL;
      else if (strcmp(v, "always") == 0)
        durability = VD_DURABILITY_ALWAYS;
      else
        return usage_error("--durability takes none, interval or always, not", v);
    } else if (a[0] == '-') {
      if (strchr(a, '=') == NULL && (strcmp(a, "-p") == 0 || strcmp(a, "--policy") == 0 ||
                                     strcmp(a, "-s") == 0 || strcmp(a, "--snapshots") == 0 ||
                                     strcmp(a, "--store") == 0 || strcmp(a, "--durability") == 0))
        return usage_error("missing value after", a);
      return usage_error("unknown option", a);
    } else {
      return usage_error("unexpected argument", a);
    }
  }
  if (!policy || !*policy) return usage_error("--policy DIR is required", NULL);
  if (snapshots && no_snapshots)
    return usage_error("give --snapshots or --no-snapshots, not both", NULL);
  if (store && no_store) return usage_error("give --store or --no-store, not both", NULL);

  char *default_dir = NULL;
  if (cli_default_snapshots(policy, no_snapshots, &snapshots, &default_dir) != 0) {
    fprintf(stderr, "verdict mcp: out of memory\n");
    return 1;
  }
  vd_engine_opts opts;
  cli_agent_opts(&opts, store, no_store, snapshots, no_snapshots, durability);
  vd_error err;
  vd_engine *e = NULL;
  int rc;
  for (int waited = 0;; waited += 20) {
    rc = vd_engine_open(policy, &opts, &e, &err);
    if (rc != VD_EBUSY || waited >= 10000) break;
    struct timespec ts = {0, 20 * 1000000};
    nanosleep(&ts, NULL);
  }
  if (rc != 0) {
    fprintf(stderr, "verdict mcp: %s\n", err.message);
    free(default_dir);
    return 1;
  }
  mcp_session *s = mcp_session_new(e, no_snapshots ? NULL : snapshots);
  free(default_dir);
  if (!s) {
    fprintf(stderr, "verdict mcp: out of memory\n");
    vd_engine_close(e);
    return 1;
  }
  char vbuf[65];
  fprintf(stderr, "verdict mcp: serving %s (policy version %.12s) on stdio\n", policy,
          vd_engine_policy_version(e, vbuf));

  json_buf out;
  json_buf_init(&out, NULL);
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  rc = 0;
  while ((got = read_message(&line, &cap)) != -1) {
    if (got == -2) { /* longer than MAX_MESSAGE: skipped, never buffered */
      static const char too_long[] =
          "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":"
          "\"the message is longer than 16 MiB: refused without reading it\"}}\n";
      fputs(too_long, stdout);
      if (fflush(stdout) != 0) break;
      continue;
    }
    size_t n = (size_t)got;
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
    size_t k = 0;
    while (k < n && (line[k] == ' ' || line[k] == '\t')) k++;
    if (k == n) continue;
    out.len = 0;
    int h = mcp_handle(s, line, n, &out);
    if (h < 0) {
      fprintf(stderr, "verdict mcp: out of memory\n");
      rc = 1;
      break;
    }
    if (h == 1) {
      fwrite(out.data, 1, out.len, stdout);
      fputc('\n', stdout);
      if (fflush(stdout) != 0) break; /* the client went away */
    }
  }
  free(line);
  json_buf_free(&out);
  mcp_session_free(s);
  vd_engine_close(e);
  return rc;
}
