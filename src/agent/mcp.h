/* mcp.h — verdict as an MCP (Model Context Protocol) server, without a
 * transport: one JSON-RPC message in, the response out. `verdict mcp` feeds
 * it lines from stdin; an HTTP server can feed it POST bodies.
 *
 * Protocol versions: 2025-11-25 (the default offered), 2025-06-18,
 * 2025-03-26 and 2024-11-05 through `initialize`; and the stateless
 * 2026-07-28 style, where a request carries its protocol version in
 * params._meta and no `initialize` comes first. Batches (JSON arrays) are
 * served in a session that negotiated 2025-03-26, the one version that has
 * them; elsewhere (dropped in 2025-06-18) they are answered with -32600.
 *
 * Tools: decide_action (a tool call, or any decision request, in; the
 * decision out as structuredContent) and explain_decision (a snapshot id in;
 * the recorded snapshot out). docs/agents.md shows both.
 *
 * Not here: framing (lines, HTTP), sessions across connections, resources,
 * prompts, logging, server-to-client requests. */
#ifndef VD_AGENT_MCP_H
#define VD_AGENT_MCP_H

#include <stddef.h>

#include "core/json.h"
#include "verdict.h"

typedef struct mcp_session mcp_session;

/* e: the engine decisions are made with (not owned; many sessions may share
 * it). snapshots_dir: where explain_decision looks snapshots up (NULL or "":
 * explain_decision answers that snapshots are off). One session per client
 * connection; calls on one session must not overlap (it owns a
 * vd_decision). NULL when out of memory. */
mcp_session *mcp_session_new(vd_engine *e, const char *snapshots_dir);
void mcp_session_free(mcp_session *s);

/* Calls fn(user, d) after each decision the session makes (decide_action),
 * for a host that counts decisions (verdict serve's metrics). fn NULL: none.
 * Set it before mcp_handle; it applies to the calls that follow. */
typedef void (*mcp_decision_fn)(void *user, const vd_decision *d);
void mcp_session_on_decision(mcp_session *s, mcp_decision_fn fn, void *user);

/* Decides each request with fn(user, ...) instead of vd_decide_json on the
 * session's engine (the same contract: 0, or a VD_E* code with err), for a
 * host that decides under a rollout (verdict serve --shadow/--canary). fn
 * NULL: vd_decide_json. Set it before mcp_handle. */
typedef int (*mcp_decide_fn)(void *user, const char *json, size_t len, vd_decision *d,
                             vd_error *err);
void mcp_session_decide_with(mcp_session *s, mcp_decide_fn fn, void *user);

/* why NULL: explain_decision reads snapshots (the default). Else it answers
 * with the tool error why (a static string, not copied) and reads nothing:
 * a host that guards recorded decisions (verdict serve --snapshot-reads)
 * sets it for each request that may not read them. */
void mcp_session_explain_refusal(mcp_session *s, const char *why);

/* Handles one JSON-RPC message, msg[0..len) (UTF-8 JSON text). Appends the
 * response (one compact JSON object, or an array of them for a batch; no
 * newline) to out and returns 1;
 * returns 0 when nothing is to be sent back (a notification, or a response
 * from the client: over HTTP that is 202 Accepted); -1 only when out of
 * memory (out->oom). */
int mcp_handle(mcp_session *s, const char *msg, size_t len, json_buf *out);

/* 1 when v[0..len) is a protocol version this server speaks (for an
 * MCP-Protocol-Version header), else 0. */
int mcp_version_supported(const char *v, size_t len);

#endif
