/* hook.h — coding agents' pre-tool-call hooks, without a process around
 * them: read the JSON an agent sends before it runs a tool, turn it into a
 * verdict decision request, and write the answer in that agent's own format
 * and exit-code convention. `verdict hook AGENT` is the process; the MCP
 * server (mcp.h) builds the same request from decide_action's arguments.
 *
 * Agents: Claude Code (PreToolUse and PermissionRequest), OpenAI Codex CLI
 * (the same two events), Gemini CLI (BeforeTool) and OpenCode (through
 * integrations/opencode/, which sends {tool, sessionID, callID, args, cwd}).
 * Any other event (PostToolUse, AfterTool, ...) gets no opinion: the tool
 * has run or is not a tool call, so there is nothing to guard. Tool names
 * and argument names are mapped to one vocabulary (Claude Code's: Bash,
 * Read, Write, Edit, WebFetch, Agent, ... with command, file_path, url) so
 * one policy serves all four; the agent's own name stays in the request as
 * agent_tool, the agent's id for the call as call_id.
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

/* Which kind of hook event a call came in on: the one before a tool runs
 * (PreToolUse, BeforeTool, the OpenCode plugin), the approval prompt
 * (PermissionRequest: Claude Code and Codex), or anything else. */
typedef enum hook_event { HOOK_EV_PRE, HOOK_EV_PERMISSION, HOOK_EV_OTHER } hook_event;

/* One tool call, whichever agent made it. Strings need not be
 * NUL-terminated; input is a map (NULL: an empty one). */
typedef struct hook_call {
  const char *agent;
  hook_event ev;
  const char *event; /* the agent's event name (NULL: none, OpenCode) */
  size_t event_len;
  const char *tool; /* the common name: Bash, Write, Edit, Read, WebFetch, ... */
  size_t tool_len;
  const char *agent_tool; /* the agent's own name: run_shell_command, bash, ... */
  size_t agent_tool_len;
  const value *input; /* arguments, with the common names added (file_path, url, ...) */
  const char *cwd;    /* where the call runs: a shell tool's workdir, else the session's */
  size_t cwd_len;
  const char *project; /* the project root (NULL: cwd is) */
  size_t project_len;
  const char *session;
  size_t session_len;
  const char *call_id; /* tool_use_id, callID: ties the decision to one transcript entry */
  size_t call_id_len;
  /* A call that names several things of one kind (read_many_files' files,
   * the URLs in a web_fetch prompt) is decided as one canonical call per
   * thing, each with part_key set to one item of parts (a list of strings):
   * a Read has one file_path, a WebFetch one url. NULL: one call. */
  const char *part_key;
  const value *parts;
} hook_call;

/* Reads an agent's hook JSON in[0..len) into *c (values allocated from a; in
 * must outlive them). Unknown fields are ignored. An event other than the
 * two guarded is not an error: c->ev is HOOK_EV_OTHER and nothing else need
 * be set. 0, or -1 with a sentence in err naming the field (a missing
 * tool_name, tool_input not an object). */
int hook_parse(hook_agent ag, arena *a, const char *in, size_t len, hook_call *c, char *err,
               size_t errlen);

/* Maps an agent's tool name and arguments to the common vocabulary: sets
 * c->tool, c->input, c->parts, and for a shell tool run in another
 * directory (OpenCode's workdir, Gemini CLI's dir_path) c->cwd to it,
 * resolved against the c->cwd set before the call, which becomes
 * c->project. mcp_context (Gemini CLI's, may be NULL) names an MCP tool's
 * server. Used by hook_parse, and by the MCP server for decide_action. */
void hook_normalize(hook_agent ag, arena *a, const char *name, size_t name_len, const value *args,
                    const value *mcp_context, hook_call *c);

/* The number of decisions c takes (1, or the number of its parts), and
 * part i of it as a call of its own: input with part_key set to the item.
 * 0, or -1 when out of memory. */
size_t hook_part_count(const hook_call *c);
int hook_part(const hook_call *c, arena *a, size_t i, hook_call *part);

/* The decision request for c: {"action":"tool_call","context":{"agent",
 * "event","tool","agent_tool","input","cwd","project","session",
 * "call_id"},"key":session}; headless adds "candidates":["allow","deny"]
 * (nobody to ask). Returns 0, or -1 when out of memory or input holds
 * something JSON cannot carry. */
int hook_write_request(const hook_call *c, int headless, json_buf *out);

typedef enum hook_verdict { HOOK_ALLOW, HOOK_DENY, HOOK_ASK } hook_verdict;

/* allow: an allowed decision; ask: one that wants review; deny otherwise. */
hook_verdict hook_verdict_of(const vd_decision *d);
/* The stricter of two verdicts: deny over ask over allow. */
hook_verdict hook_verdict_stricter(hook_verdict a, hook_verdict b);
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

/* Writes the agent's answer to a call that came in on event ev, in that
 * event's own shape: stdout text appended to out (nothing, for some
 * allows), a line for stderr to errout; returns the process exit code. */
int hook_answer(hook_agent ag, hook_event ev, hook_verdict v, const char *reason, json_buf *out,
                json_buf *errout);
/* The answer when verdict itself failed (bad stdin, a bundle that does not
 * load): the call is refused, and why says what went wrong. */
int hook_fail(hook_agent ag, hook_event ev, const char *why, json_buf *out, json_buf *errout);
/* The answer to an event verdict does not guard (c->ev HOOK_EV_OTHER): no
 * opinion, in the agent's form of it, and a line on errout saying so. */
int hook_pass(hook_agent ag, const hook_call *c, json_buf *out, json_buf *errout);

#endif
