/* hook.h — coding agents' pre-tool-call hooks, without a process around
 * them: read the JSON an agent sends before it runs a tool, turn it into a
 * verdict decision request, and write the answer in that agent's own format
 * and exit-code convention. `verdict hook AGENT` is the process; the MCP
 * server (mcp.h) builds the same request from decide_action's arguments.
 *
 * Agents: Claude Code (PreToolUse), OpenAI Codex CLI (PreToolUse, deny-only),
 * Gemini CLI (BeforeTool) and OpenCode (through integrations/opencode/, which
 * sends {tool, sessionID, callID, args, cwd}). Tool names and argument names
 * are mapped to one vocabulary (Claude Code's: Bash, Read, Write, Edit,
 * WebFetch, ... with command, file_path, url) so one policy serves all four;
 * the agent's own name stays in the request as agent_tool.
 *
 * Not here: reading stdin, opening the engine, exit(). */
#ifndef VD_AGENT_HOOK_H
#define VD_AGENT_HOOK_H

#include <stddef.h>

#include "core/arena.h"
#include "core/json.h"
#include "core/value.h"
#include "verdict.h"

typedef enum hook_agent { HOOK_CLAUDE, HOOK_CODEX, HOOK_GEMINI, HOOK_OPENCODE } hook_agent;

/* "claude" (or "claude-code"), "codex", "gemini" (or "gemini-cli"),
 * "opencode". 0, or -1 for anything else. */
int hook_agent_parse(const char *name, hook_agent *out);
/* The name rules see in context.agent: "claude-code", "codex", "gemini-cli",
 * "opencode". */
const char *hook_agent_name(hook_agent a);

/* One tool call, whichever agent made it. Strings need not be
 * NUL-terminated; input is a map (NULL: an empty one). */
typedef struct hook_call {
  const char *agent;
  const char *tool; /* the common name: Bash, Write, Edit, Read, WebFetch, ... */
  size_t tool_len;
  const char *agent_tool; /* the agent's own name: run_shell_command, bash, ... */
  size_t agent_tool_len;
  const value *input; /* arguments, with the common names added (file_path, url, ...) */
  const char *cwd;
  size_t cwd_len;
  const char *session;
  size_t session_len;
} hook_call;

/* Reads an agent's hook JSON in[0..len) into *c (values allocated from a; in
 * must outlive them). Unknown fields are ignored. 0, or -1 with a sentence in
 * err naming the field (a missing tool_name, a hook wired to another event). */
int hook_parse(hook_agent ag, arena *a, const char *in, size_t len, hook_call *c, char *err,
               size_t errlen);

/* Maps an agent's tool name and arguments to the common vocabulary: sets
 * c->tool and c->input from name and args (args may be NULL). Used by
 * hook_parse, and by the MCP server for decide_action. */
void hook_normalize(hook_agent ag, arena *a, const char *name, size_t name_len, const value *args,
                    hook_call *c);

/* The decision request for c: {"action":"tool_call","context":{"agent",
 * "tool","agent_tool","input","cwd","session"},"key":session}; headless
 * adds "candidates":["allow","deny"] (nobody to ask). Returns 0, or -1 when
 * out of memory or input holds something JSON cannot carry. */
int hook_write_request(const hook_call *c, int headless, json_buf *out);

typedef enum hook_verdict { HOOK_ALLOW, HOOK_DENY, HOOK_ASK } hook_verdict;

/* allow: an allowed decision; ask: one that wants review; deny otherwise. */
hook_verdict hook_verdict_of(const vd_decision *d);
/* "allow", "deny", "ask". */
const char *hook_verdict_name(hook_verdict v);

/* A sentence for the agent about decision d: its reason, the rule and the
 * snapshot id ("recursive delete of / (verdict: deny, rule rm-root,
 * snapshot …)"). */
void hook_describe(const vd_decision *d, char *buf, size_t size);

/* The same from a decision's JSON (as `verdict decide` and POST /v1/decide
 * write it), for a hook that asks a running server: sets *v and writes the
 * sentence. 0, or -1 when the JSON is not a decision (buf says why). */
int hook_describe_json(const char *json, size_t len, hook_verdict *v, char *buf, size_t size);

/* Writes the agent's answer: stdout text appended to out (nothing, for some
 * allows), a line for stderr to errout; returns the process exit code. */
int hook_answer(hook_agent ag, hook_verdict v, const char *reason, json_buf *out, json_buf *errout);
/* The answer when verdict itself failed (bad stdin, a bundle that does not
 * load): the call is refused, and why says what went wrong. */
int hook_fail(hook_agent ag, const char *why, json_buf *out, json_buf *errout);

#endif
