/* mcp.c — the MCP server's protocol core (see mcp.h): JSON-RPC 2.0 message
 * checks, the lifecycle, and the two tools.
 *
 * Leniency where the spec allows it and strictness where clients rely on
 * it: requests before `initialize` are served (a stateless HTTP client and
 * the 2026-07-28 style never send it), unknown members and capabilities are
 * ignored, but a message that is not JSON-RPC 2.0 gets the exact error code
 * (-32700 parse, -32600 invalid request, -32601 method not found, -32602
 * invalid params) with id null when the id cannot be read. A tool that runs
 * and fails (a request the engine refuses, an unknown snapshot) answers a
 * result with isError: true, as MCP asks, so the model can read why.
 *
 * decide_action returns the engine's decision object (the same JSON as
 * `verdict decide` and POST /v1/decide) as structuredContent, with a
 * sentence and a JSON copy as text content for clients that ignore
 * structured output. */
#include "agent/mcp.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/hook.h"
#include "core/json.h"

#define LATEST_LEGACY "2025-11-25"
#define MODERN "2026-07-28"
#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS "io.modelcontextprotocol/clientCapabilities"

static const char *const legacy_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
                                              "2024-11-05"};

struct mcp_session {
  vd_engine *engine;
  char *snapshots_dir;
  vd_decision *d;
  mcp_decision_fn on_decision; /* may be NULL */
  void *on_decision_user;
  mcp_decide_fn decide; /* NULL: vd_decide_json on engine */
  void *decide_user;
  char version[16]; /* negotiated by initialize, "" before */
  int initialized;  /* notifications/initialized seen */
  char cwd[PATH_MAX];
  const char *explain_refusal; /* mcp_session_explain_refusal; NULL: allowed */
};

/* JSON-RPC and MCP error codes */
enum {
  E_PARSE = -32700,
  E_REQUEST = -32600,
  E_METHOD = -32601,
  E_PARAMS = -32602,
  E_INTERNAL = -32603,
  E_UNSUPPORTED_VERSION = -32022,
};

int mcp_version_supported(const char *v, size_t len) {
  for (size_t i = 0; i < sizeof legacy_versions / sizeof legacy_versions[0]; i++)
    if (strlen(legacy_versions[i]) == len && memcmp(v, legacy_versions[i], len) == 0) return 1;
  return len == strlen(MODERN) && memcmp(v, MODERN, len) == 0;
}

mcp_session *mcp_session_new(vd_engine *e, const char *snapshots_dir) {
  mcp_session *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->engine = e;
  s->d = vd_decision_new();
  if (snapshots_dir && *snapshots_dir) s->snapshots_dir = strdup(snapshots_dir);
  if (!s->d || (snapshots_dir && *snapshots_dir && !s->snapshots_dir)) {
    mcp_session_free(s);
    return NULL;
  }
  if (!getcwd(s->cwd, sizeof s->cwd)) s->cwd[0] = '\0';
  return s;
}

void mcp_session_decide_with(mcp_session *s, mcp_decide_fn fn, void *user) {
  if (!s) return;
  s->decide = fn;
  s->decide_user = user;
}

void mcp_session_on_decision(mcp_session *s, mcp_decision_fn fn, void *user) {
  if (!s) return;
  s->on_decision = fn;
  s->on_decision_user = user;
}

void mcp_session_explain_refusal(mcp_session *s, const char *why) {
  if (s) s->explain_refusal = why;
}

void mcp_session_free(mcp_session *s) {
  if (!s) return;
  vd_decision_free(s->d);
  free(s->snapshots_dir);
  free(s);
}

/* ---- writing responses ---- */

static void put(json_buf *b, const char *s) { json_buf_put(b, s, strlen(s)); }
static void put_str(json_buf *b, const char *s) { json_write_string(b, s, strlen(s)); }

static void begin_result(json_buf *out, const value *id) {
  put(out, "{\"jsonrpc\":\"2.0\",\"id\":");
  if (id)
    json_write(out, id, 0);
  else
    put(out, "null");
  put(out, ",\"result\":");
}

/* data_json: raw JSON for error.data, or NULL. */
static int error_reply(json_buf *out, const value *id, int code, const char *msg,
                       const char *data_json) {
  char c[16];
  put(out, "{\"jsonrpc\":\"2.0\",\"id\":");
  if (id)
    json_write(out, id, 0);
  else
    put(out, "null");
  snprintf(c, sizeof c, "%d", code);
  put(out, ",\"error\":{\"code\":");
  put(out, c);
  put(out, ",\"message\":");
  put_str(out, msg);
  if (data_json) {
    put(out, ",\"data\":");
    put(out, data_json);
  }
  put(out, "}}");
  return out->oom ? -1 : 1;
}

/* Closes a result object: modern requests carry resultType. */
static int end_result(json_buf *out, int modern) {
  if (modern) put(out, ",\"resultType\":\"complete\"");
  put(out, "}}");
  return out->oom ? -1 : 1;
}

/* 2026-07-28 makes the list and discovery results cacheable and requires
 * their hints (CacheableResult: ttlMs, an integer >= 0, and cacheScope).
 * The tools and the versions are fixed for the life of the process and
 * hold nothing of any one user: an hour, shared caches welcome. */
#define CACHE_HINTS ",\"ttlMs\":3600000,\"cacheScope\":\"public\""

/* ---- the tools ---- */

static const char server_info[] =
    "{\"name\":\"verdict\",\"title\":\"verdict decision engine\",\"version\":\"" /* + version */;

static const char instructions[] =
    "verdict decides whether a coding agent's tool call may run. Call decide_action with the "
    "tool call (tool_name, tool_input, cwd) before running it: a decision whose action is "
    "allow may run; deny must not; ask needs the developer's approval. Every decision is "
    "recorded; explain_decision shows the record for a snapshot_id.";

static const char decision_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"action\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}],\"description\":\"the "
    "action decided: allow, "
    "deny, ask, or any action of the policy\"},"
    "\"allowed\":{\"type\":\"boolean\"},"
    "\"review\":{\"type\":\"boolean\",\"description\":\"a person should look (ask)\"},"
    "\"confidence\":{\"type\":\"number\"},"
    "\"source\":{\"type\":\"string\",\"description\":\"rule, default, model or error\"},"
    "\"reason\":{\"type\":\"object\",\"properties\":{\"rule\":{\"anyOf\":[{\"type\":\"string\"},{"
    "\"type\":\"null\"}]},"
    "\"message\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}}},"
    "\"strategy\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]},"
    "\"policy_version\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]},"
    "\"model_version\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]},"
    "\"latency_us\":{\"type\":\"number\"},"
    "\"snapshot_id\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}],\"description\":\"the "
    "recorded "
    "snapshot, for explain_decision\"}},"
    "\"required\":[\"action\",\"allowed\",\"review\",\"source\"]}";

static void write_tools(json_buf *out) {
  put(out, "{\"tools\":[{\"name\":\"decide_action\",\"title\":\"Decide a tool call\",");
  put(out,
      "\"description\":\"Asks verdict whether a coding agent's tool call may run, under the "
      "loaded policy (decision point tool_call). Give tool_name, tool_input and cwd; or, for "
      "any other decision point, action with context. Returns the decision: action (allow, "
      "deny, ask, ...), allowed, review, the rule and its reason, and a snapshot_id.\",");
  put(out,
      "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
      "\"tool_name\":{\"type\":\"string\",\"description\":\"the tool about to run: Bash, Write, "
      "Edit, Read, WebFetch, mcp__server__tool, ...\"},"
      "\"tool_input\":{\"type\":\"object\",\"description\":\"its arguments, e.g. {\\\"command\\\": "
      "\\\"rm -rf build\\\"}\"},"
      "\"cwd\":{\"type\":\"string\",\"description\":\"the project directory (default: the "
      "server's working directory)\"},"
      "\"session_id\":{\"type\":\"string\"},"
      "\"agent\":{\"type\":\"string\",\"description\":\"claude-code, codex, gemini-cli, opencode "
      "(their tool names are mapped to one vocabulary); default mcp\"},"
      "\"candidates\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":\"the "
      "answers acceptable, e.g. [allow, deny] when nobody can be asked\"},"
      "\"action\":{\"type\":\"string\",\"description\":\"instead of a tool call: a decision "
      "point of the policy\"},"
      "\"context\":{\"type\":\"object\",\"description\":\"with action: the request's context\"},"
      "\"key\":{\"type\":\"string\",\"description\":\"with action: the request's key\"}}},");
  put(out, "\"outputSchema\":");
  put(out, decision_schema);
  put(out,
      /* Not read-only: every decision is written to the snapshot log. It
       * only adds a record (destructive: false), and a repeat adds another
       * (idempotent: false). */
      ",\"annotations\":{\"title\":\"Decide a tool call\",\"readOnlyHint\":false,"
      "\"destructiveHint\":false,\"idempotentHint\":false,\"openWorldHint\":false}},");
  put(out, "{\"name\":\"explain_decision\",\"title\":\"Show a recorded decision\",");
  put(out,
      "\"description\":\"Returns the snapshot verdict recorded for a decision: the request, "
      "the policy version, the rule that decided and the trace, given the decision's "
      "snapshot_id.\",");
  put(out,
      "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"snapshot_id\":{\"type\":\"string\","
      "\"description\":\"a decision's snapshot_id (a UUID)\"}},\"required\":[\"snapshot_id\"]},");
  put(out,
      "\"outputSchema\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"}}},"
      "\"annotations\":{\"title\":\"Show a recorded decision\",\"readOnlyHint\":true,"
      "\"destructiveHint\":false,\"idempotentHint\":true,\"openWorldHint\":false}}]");
}

/* A tool failure: a result with isError. */
static int tool_error(json_buf *out, const value *id, int modern, const char *msg) {
  begin_result(out, id);
  put(out, "{\"content\":[{\"type\":\"text\",\"text\":");
  put_str(out, msg);
  put(out, "}],\"isError\":true");
  return end_result(out, modern);
}

static const value *get(const value *m, const char *k) {
  return m && m->kind == V_MAP ? value_map_get(m, k, strlen(k)) : NULL;
}

static int decide_action(mcp_session *s, arena *a, const value *id, int modern, const value *args,
                         json_buf *out) {
  json_buf req;
  json_buf_init(&req, a);
  json_buf *reqs = &req; /* one request, or one a part of a tool call */
  size_t nreq = 1;
  const value *action = get(args, "action");
  const value *cands = get(args, "candidates");
  if (cands && cands->kind != V_LIST)
    return tool_error(out, id, modern, "candidates must be a list of action names");
  if (action) {
    if (action->kind != V_STRING || action->n == 0)
      return tool_error(out, id, modern, "action must be a decision point's name (a string)");
    const value *ctx = get(args, "context"), *key = get(args, "key");
    if (ctx && ctx->kind != V_MAP) return tool_error(out, id, modern, "context must be an object");
    if (key && key->kind != V_STRING) return tool_error(out, id, modern, "key must be a string");
    put(&req, "{\"action\":");
    json_write(&req, action, 0);
    if (ctx) {
      put(&req, ",\"context\":");
      json_write(&req, ctx, 0);
    }
    if (key) {
      put(&req, ",\"key\":");
      json_write(&req, key, 0);
    }
  } else {
    const value *tool = get(args, "tool_name"), *input = get(args, "tool_input");
    if (!tool || tool->kind != V_STRING || tool->n == 0)
      return tool_error(out, id, modern,
                        "give tool_name (the tool about to run, e.g. Bash) and tool_input, or "
                        "action and context for another decision point");
    if (input && input->kind != V_MAP)
      return tool_error(out, id, modern, "tool_input must be an object (the tool's arguments)");
    hook_agent ag = HOOK_CLAUDE;
    const value *agent = get(args, "agent"), *cwd = get(args, "cwd");
    const value *sess = get(args, "session_id");
    char agent_name[64] = "mcp";
    if (agent && agent->kind == V_STRING && agent->n < sizeof agent_name) {
      memcpy(agent_name, agent->s, agent->n);
      agent_name[agent->n] = '\0';
      if (hook_agent_parse(agent_name, &ag) != 0) ag = HOOK_CLAUDE;
    }
    hook_call c;
    memset(&c, 0, sizeof c);
    if (cwd && cwd->kind == V_STRING) {
      c.cwd = cwd->s;
      c.cwd_len = cwd->n;
    } else if (s->cwd[0]) {
      c.cwd = s->cwd;
      c.cwd_len = strlen(s->cwd);
    }
    hook_normalize(ag, a, tool->s, tool->n, input, get(args, "mcp_context"), &c);
    c.agent = agent_name;
    if (agent && hook_agent_parse(agent_name, &ag) == 0) c.agent = hook_agent_name(ag);
    if (sess && sess->kind == V_STRING) {
      c.session = sess->s;
      c.session_len = sess->n;
    }
    const value *call_id = get(args, "call_id");
    if (call_id && call_id->kind == V_STRING && call_id->n) {
      c.call_id = call_id->s;
      c.call_id_len = call_id->n;
    }
    /* A call of several parts (read_many_files, a prompt naming several
     * URLs) is decided part by part and the strictest answers, as the hook
     * does. */
    nreq = hook_part_count(&c);
    reqs = nreq > 1 ? arena_alloc(a, nreq * sizeof *reqs) : &req;
    if (!reqs) return -1;
    for (size_t i = 0; i < nreq; i++) {
      hook_call part;
      if (reqs != &req) json_buf_init(&reqs[i], a);
      if (hook_part(&c, a, i, &part) != 0) return -1;
      if (hook_write_request(&part, 0, &reqs[i]) != 0)
        return tool_error(out, id, modern, "tool_input holds a value that JSON cannot carry");
      reqs[i].len--; /* reopen the request object to add candidates */
    }
  }
  for (size_t i = 0; i < nreq; i++) {
    if (cands) {
      put(&reqs[i], ",\"candidates\":");
      json_write(&reqs[i], cands, 0);
    }
    put(&reqs[i], "}");
    if (reqs[i].oom) return -1;
  }

  /* The strictest decision of the parts answers (deny over ask over allow). */
  const char *dj = NULL;
  size_t dn = 0;
  char sentence[1400];
  hook_verdict best = HOOK_ALLOW;
  for (size_t i = 0; i < nreq; i++) {
    vd_error err;
    int rc = s->decide ? s->decide(s->decide_user, reqs[i].data, reqs[i].len, s->d, &err)
                       : vd_decide_json(s->engine, reqs[i].data, (long)reqs[i].len, s->d, &err);
    if (rc != 0) {
      char msg[1200];
      snprintf(msg, sizeof msg, "verdict could not decide this request: %s", err.message);
      return tool_error(out, id, modern, msg);
    }
    if (s->on_decision) s->on_decision(s->on_decision_user, s->d);
    hook_verdict v = hook_verdict_of(s->d);
    if (i > 0 && hook_verdict_stricter(best, v) == best) continue;
    if (v == HOOK_DENY) i = nreq; /* nothing is stricter: the last one */
    best = v;
    const char *rj;
    size_t rn;
    if (vd_decision_render(s->d, 0, &rj, &rn) != 0) return -1;
    dj = arena_memdup(a, rj, rn);
    dn = rn;
    if (!dj) return -1;
    hook_describe(s->d, sentence, sizeof sentence);
  }
  const char *verdict = hook_verdict_name(best);
  begin_result(out, id);
  put(out, "{\"content\":[{\"type\":\"text\",\"text\":");
  json_buf line;
  json_buf_init(&line, a);
  put(&line, verdict);
  put(&line, ": ");
  put(&line, sentence);
  json_write_string(out, line.data ? line.data : "", line.len);
  put(out, "},{\"type\":\"text\",\"text\":");
  json_write_string(out, dj, dn);
  put(out, "}],\"structuredContent\":");
  json_buf_put(out, dj, dn);
  put(out, ",\"isError\":false");
  return end_result(out, modern);
}

static int explain_decision(mcp_session *s, const value *id, int modern, const value *args,
                            json_buf *out) {
  const value *sid = get(args, "snapshot_id");
  char *payload;
  size_t n;
  vd_error err;
  /* With no folder, vd_snapshot_read only checks the id (err.path "id": not one). */
  if (!sid || sid->kind != V_STRING ||
      (vd_snapshot_read(NULL, sid->s, (long)sid->n, &payload, &n, &err) == VD_EINVAL &&
       err.path[0]))
    return tool_error(out, id, modern,
                      "snapshot_id must be a decision's snapshot id (8-4-4-4-12 hex digits)");
  if (s->explain_refusal) return tool_error(out, id, modern, s->explain_refusal);
  if (!s->snapshots_dir)
    return tool_error(out, id, modern,
                      "this server records no snapshots (started with --no-snapshots)");
  /* A decision this process just made may still be on its way to disk:
   * look again for a moment before saying it is not there. */
  char msg[sizeof((vd_error *)0)->message + 128];
  for (int tries = 0;; tries++) {
    int rc = vd_snapshot_read(s->snapshots_dir, sid->s, (long)sid->n, &payload, &n, &err);
    if (rc == 0) {
      begin_result(out, id);
      put(out, "{\"content\":[{\"type\":\"text\",\"text\":");
      json_write_string(out, payload, n);
      put(out, "}],\"structuredContent\":");
      json_buf_put(out, payload, n);
      put(out, ",\"isError\":false");
      vd_free(payload);
      return end_result(out, modern);
    }
    if (rc != VD_ENOTFOUND) {
      snprintf(msg, sizeof msg, "cannot read the snapshots: %s", err.message);
      return tool_error(out, id, modern, msg);
    }
    if (tries >= 50) break;
    struct timespec ts = {0, 20 * 1000000};
    nanosleep(&ts, NULL);
  }
  char idq[160];
  snprintf(msg, sizeof msg, "no snapshot %s in %s",
           json_quote_text(idq, sizeof idq, sid->s, sid->n, 64), s->snapshots_dir);
  return tool_error(out, id, modern, msg);
}

/* ---- dispatch ---- */

static int initialize(mcp_session *s, const value *id, const value *params, json_buf *out) {
  const value *v = get(params, "protocolVersion");
  if (!params || params->kind != V_MAP || !v || v->kind != V_STRING)
    return error_reply(
        out, id, E_PARAMS,
        "initialize needs params.protocolVersion (a string such as \"" LATEST_LEGACY "\")", NULL);
  /* Echo a version we speak, else offer our latest. */
  const char *chosen = LATEST_LEGACY;
  for (size_t i = 0; i < sizeof legacy_versions / sizeof legacy_versions[0]; i++)
    if (strlen(legacy_versions[i]) == v->n && memcmp(v->s, legacy_versions[i], v->n) == 0)
      chosen = legacy_versions[i];
  snprintf(s->version, sizeof s->version, "%s", chosen);
  begin_result(out, id);
  put(out, "{\"protocolVersion\":");
  put_str(out, chosen);
  put(out, ",\"capabilities\":{\"tools\":{\"listChanged\":false}},\"serverInfo\":");
  put(out, server_info);
  put(out, vd_version());
  put(out, "\"},\"instructions\":");
  put_str(out, instructions);
  return end_result(out, 0);
}

static int discover(const value *id, int modern, json_buf *out) {
  begin_result(out, id);
  put(out, "{\"supportedVersions\":[\"" MODERN "\"");
  for (size_t i = 0; i < sizeof legacy_versions / sizeof legacy_versions[0]; i++) {
    put(out, ",\"");
    put(out, legacy_versions[i]);
    put(out, "\"");
  }
  put(out, "],\"capabilities\":{\"tools\":{\"listChanged\":false}},\"serverInfo\":");
  put(out, server_info);
  put(out, vd_version());
  put(out, "\"},\"instructions\":");
  put_str(out, instructions);
  put(out, CACHE_HINTS);
  return end_result(out, modern);
}

static int tools_call(mcp_session *s, arena *a, const value *id, int modern, const value *params,
                      json_buf *out) {
  if (!params || params->kind != V_MAP)
    return error_reply(out, id, E_PARAMS, "tools/call needs params {name, arguments}", NULL);
  const value *name = get(params, "name"), *args = get(params, "arguments");
  if (!name || name->kind != V_STRING)
    return error_reply(out, id, E_PARAMS, "tools/call needs params.name (a string)", NULL);
  if (args && args->kind != V_MAP && args->kind != V_NULL)
    return error_reply(out, id, E_PARAMS, "params.arguments must be an object", NULL);
  if (name->n == 13 && memcmp(name->s, "decide_action", 13) == 0)
    return decide_action(s, a, id, modern, args, out);
  if (name->n == 16 && memcmp(name->s, "explain_decision", 16) == 0)
    return explain_decision(s, id, modern, args, out);
  char msg[300], nq[160];
  snprintf(msg, sizeof msg, "Unknown tool: %s (this server has decide_action and explain_decision)",
           json_quote_text(nq, sizeof nq, name->s, name->n, 64));
  return error_reply(out, id, E_PARAMS, msg, NULL);
}

/* The 2026-07-28 style: params._meta carries the version. 1 modern, 0
 * legacy, or an error already written (returned as 2). */
static int check_modern(const value *id, const value *params, json_buf *out, int *rc) {
  const value *meta = get(params, "_meta");
  const value *ver = get(meta, META_VERSION);
  if (!ver) return 0;
  if (ver->kind != V_STRING || !(ver->n == strlen(MODERN) && memcmp(ver->s, MODERN, ver->n) == 0)) {
    json_buf data;
    json_buf_init(&data, NULL);
    put(&data, "{\"supported\":[\"" MODERN "\"],\"requested\":");
    if (ver->kind == V_STRING)
      json_write(&data, ver, 0);
    else
      put(&data, "null");
    put(&data, "}");
    *rc = error_reply(out, id, E_UNSUPPORTED_VERSION, "Unsupported protocol version",
                      data.oom ? NULL : data.data);
    json_buf_free(&data);
    return 2;
  }
  const value *caps = get(meta, META_CAPS);
  if (!caps || caps->kind != V_MAP) {
    *rc = error_reply(out, id, E_PARAMS, "params._meta needs \"" META_CAPS "\" (an object)", NULL);
    return 2;
  }
  return 1;
}

static int dispatch(mcp_session *s, arena *a, const value *msg, json_buf *out) {
  if (msg->kind == V_LIST)
    return error_reply(out, NULL, E_REQUEST,
                       "Invalid Request: JSON-RPC batches are part of protocol 2025-03-26 only "
                       "(MCP dropped them in 2025-06-18), and this session did not negotiate it; "
                       "send one message at a time",
                       NULL);
  if (msg->kind != V_MAP)
    return error_reply(out, NULL, E_REQUEST, "Invalid Request: not a JSON-RPC object", NULL);
  const value *id = get(msg, "id");
  if (id && id->kind != V_STRING && id->kind != V_INT && id->kind != V_UINT && id->kind != V_DOUBLE)
    return error_reply(out, NULL, E_REQUEST, "Invalid Request: id must be a string or a number",
                       NULL);
  const value *jv = get(msg, "jsonrpc");
  if (!jv || !(jv->kind == V_STRING && jv->n == 3 && memcmp(jv->s, "2.0", 3) == 0))
    return error_reply(out, id, E_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"", NULL);
  const value *method = get(msg, "method");
  if (!method) {
    /* A response to a request of ours (we send none): nothing to answer. */
    if (id && (get(msg, "result") || get(msg, "error"))) return 0;
    return error_reply(out, id, E_REQUEST, "Invalid Request: no method", NULL);
  }
  if (method->kind != V_STRING)
    return error_reply(out, id, E_REQUEST, "Invalid Request: method must be a string", NULL);
  const value *params = get(msg, "params");
  if (params && params->kind != V_MAP && params->kind != V_LIST)
    return error_reply(out, id, E_REQUEST, "Invalid Request: params must be an object", NULL);
  const char *m = method->s;
  size_t mn = method->n;
#define IS(lit) (mn == sizeof(lit) - 1 && memcmp(m, lit, mn) == 0)
  if (!id) { /* a notification: never answered */
    if (IS("notifications/initialized")) s->initialized = 1;
    return 0;
  }
  if (params && params->kind == V_LIST)
    return error_reply(out, id, E_PARAMS, "params must be an object", NULL);
  int rc = 0;
  int modern = check_modern(id, params, out, &rc);
  if (modern == 2) return rc;
  if (IS("initialize")) return initialize(s, id, params, out);
  if (IS("ping") && !modern) {
    begin_result(out, id);
    put(out, "{");
    return end_result(out, 0);
  }
  if (IS("server/discover")) return discover(id, modern, out);
  if (IS("tools/list")) {
    begin_result(out, id);
    write_tools(out);
    if (modern) put(out, CACHE_HINTS);
    return end_result(out, modern);
  }
  if (IS("tools/call")) return tools_call(s, a, id, modern, params, out);
#undef IS
  char buf[300], mq[200];
  snprintf(buf, sizeof buf, "Method not found: %s", json_quote_text(mq, sizeof mq, m, mn, 100));
  return error_reply(out, id, E_METHOD, buf, NULL);
}

/* Drops what was appended to out after len `before` (an answer not sent). */
static void cut(json_buf *out, size_t before) {
  out->len = before;
  if (out->data) out->data[before] = '\0';
}

/* A JSON-RPC batch, in a session that negotiated 2025-03-26 (the one
 * version with batches): every member is handled as a message of its own,
 * the answers go back as one array in the members' order, notifications
 * and responses get none, and a batch of only those gets no answer at all.
 * An empty batch is one Invalid Request error, as JSON-RPC 2.0 says;
 * initialize may not be in one (2025-03-26 lifecycle). */
static int batch(mcp_session *s, arena *a, const value *list, json_buf *out) {
  if (list->n == 0)
    return error_reply(out, NULL, E_REQUEST, "Invalid Request: an empty batch", NULL);
  size_t start = out->len;
  int answers = 0;
  json_buf_putc(out, '[');
  for (uint32_t i = 0; i < list->n; i++) {
    const value *m = &list->items[i];
    size_t before = out->len;
    if (answers) json_buf_putc(out, ',');
    const value *method = get(m, "method");
    int rc;
    if (method && method->kind == V_STRING && method->n == 10 &&
        memcmp(method->s, "initialize", 10) == 0)
      rc = error_reply(out, get(m, "id"), E_REQUEST,
                       "Invalid Request: initialize must not be part of a batch", NULL);
    else
      rc = dispatch(s, a, m, out);
    if (rc < 0) return -1;
    if (rc == 0)
      cut(out, before);
    else
      answers++;
  }
  if (!answers) {
    cut(out, start);
    return 0;
  }
  json_buf_putc(out, ']');
  return out->oom ? -1 : 1;
}

int mcp_handle(mcp_session *s, const char *msg, size_t len, json_buf *out) {
  char stack[16384];
  arena a;
  arena_init(&a, stack, sizeof stack, 64u << 20);
  json_opts o = {0};
  o.max_size = 16u << 20;
  value v;
  json_error je;
  size_t before = out->len;
  int rc;
  if (json_parse(&a, msg, len, &o, &v, &je) != 0) {
    char m[600];
    snprintf(m, sizeof m, "Parse error: line %d, column %d, at %s: %s", je.line, je.column, je.path,
             je.message);
    rc = error_reply(out, NULL, E_PARSE, m, NULL);
  } else if (v.kind == V_LIST && strcmp(s->version, "2025-03-26") == 0) {
    rc = batch(s, &a, &v, out);
  } else {
    rc = dispatch(s, &a, &v, out);
  }
  if (rc < 0 || out->oom) {
    /* Out of memory part way: answer an internal error instead of half a message. */
    out->len = before;
    out->oom = 0;
    if (out->data) out->data[before] = '\0';
    error_reply(out, NULL, E_INTERNAL, "Internal error: out of memory", NULL);
    rc = out->oom ? -1 : 1;
  }
  arena_free(&a);
  return rc;
}
