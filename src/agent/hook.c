/* hook.c — the four agents' pre-tool-call hook formats (see hook.h).
 *
 * Input is read leniently: agents add fields between releases, so anything
 * unknown is ignored and duplicate keys take the last value, as the agents'
 * own JavaScript and Rust readers do. Output is exact: Codex rejects a hook
 * answer with a field it does not know (and then runs the tool), so each
 * agent gets only the fields its schema lists.
 *
 * Why "fail closed" looks different per agent: Claude Code and Codex treat a
 * crash or a non-zero exit other than 2 as "no opinion" and run the tool, so
 * a failure is written as an ordinary deny answer with exit 0; Gemini CLI
 * reads JSON from stdout whatever the exit code, and 2 denies when it cannot. */
#include "agent/hook.h"

#include <stdio.h>
#include <string.h>

static const char *const agent_names[] = {"claude-code", "codex", "gemini-cli", "opencode"};

int hook_agent_parse(const char *name, hook_agent *out) {
  static const struct {
    const char *name;
    hook_agent a;
  } names[] = {{"claude", HOOK_CLAUDE}, {"claude-code", HOOK_CLAUDE}, {"codex", HOOK_CODEX},
               {"gemini", HOOK_GEMINI}, {"gemini-cli", HOOK_GEMINI},  {"opencode", HOOK_OPENCODE}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(name, names[i].name) == 0) {
      *out = names[i].a;
      return 0;
    }
  return -1;
}

const char *hook_agent_name(hook_agent a) { return agent_names[a]; }

static int str_is(const value *v, const char *s) {
  size_t n = strlen(s);
  return v && v->kind == V_STRING && v->n == n && memcmp(v->s, s, n) == 0;
}

static int eq(const char *s, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* ---- tool names and arguments ---- */

typedef struct tool_map {
  const char *from, *to;
} tool_map;

static const tool_map gemini_tools[] = {{"run_shell_command", "Bash"},
                                        {"write_file", "Write"},
                                        {"replace", "Edit"},
                                        {"read_file", "Read"},
                                        {"read_many_files", "Read"},
                                        {"web_fetch", "WebFetch"},
                                        {"glob", "Glob"},
                                        {"search_file_content", "Grep"},
                                        {"grep", "Grep"},
                                        {"list_directory", "LS"},
                                        {"google_web_search", "WebSearch"},
                                        {"write_todos", "TodoWrite"},
                                        {NULL, NULL}};

static const tool_map opencode_tools[] = {{"bash", "Bash"},
                                          {"write", "Write"},
                                          {"edit", "Edit"},
                                          {"read", "Read"},
                                          {"glob", "Glob"},
                                          {"grep", "Grep"},
                                          {"list", "LS"},
                                          {"webfetch", "WebFetch"},
                                          {"websearch", "WebSearch"},
                                          {"task", "Task"},
                                          {"todowrite", "TodoWrite"},
                                          {"todoread", "TodoRead"},
                                          {"patch", "ApplyPatch"},
                                          {NULL, NULL}};

static const tool_map codex_tools[] = {
    {"apply_patch", "ApplyPatch"}, {"spawn_agent", "Task"}, {NULL, NULL}};

/* Argument names other agents use for what Claude Code calls these. */
static const tool_map arg_aliases[] = {{"filePath", "file_path"},   {"absolute_path", "file_path"},
                                       {"dir_path", "path"},        {"oldString", "old_string"},
                                       {"newString", "new_string"}, {NULL, NULL}};

/* The first http(s) URL in a text (Gemini's web_fetch has only a prompt). */
static int find_url(const char *s, size_t n, const char **url, size_t *ulen) {
  for (size_t i = 0; i + 7 < n; i++) {
    size_t k = 0;
    if (memcmp(s + i, "https://", 8) == 0) /* n - i >= 8 here */
      k = 8;
    else if (memcmp(s + i, "http://", 7) == 0)
      k = 7;
    if (!k || (i > 0 && ((s[i - 1] | 32) >= 'a' && (s[i - 1] | 32) <= 'z'))) continue;
    size_t j = i + k;
    while (j < n && (unsigned char)s[j] > ' ' && !strchr("\"'<>`)]}", s[j])) j++;
    while (j > i + k && strchr(".,;:!?", s[j - 1])) j--;
    *url = s + i;
    *ulen = j - i;
    return 1;
  }
  return 0;
}

/* The files an apply_patch text touches ("*** Add File: p", "*** Update
 * File: p", "*** Delete File: p", "*** Move to: p"), as a list value. */
static value patch_files(arena *a, const char *s, size_t n) {
  static const char *const heads[] = {
      "*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "};
  size_t count = 0, cap = 8;
  value *items = arena_alloc(a, cap * sizeof *items);
  if (!items) return value_list(NULL, 0);
  size_t i = 0;
  while (i < n && count < 4096) {
    size_t e = i;
    while (e < n && s[e] != '\n') e++;
    for (size_t h = 0; h < 4; h++) {
      size_t hl = strlen(heads[h]);
      if (e - i > hl && memcmp(s + i, heads[h], hl) == 0) {
        size_t pe = e;
        while (pe > i + hl && (s[pe - 1] == '\r' || s[pe - 1] == ' ')) pe--;
        if (count == cap) {
          value *ni = arena_realloc(a, items, cap * sizeof *items, 2 * cap * sizeof *items);
          if (!ni) return value_list(items, (uint32_t)count);
          items = ni;
          cap *= 2;
        }
        items[count++] = value_str(s + i + hl, (uint32_t)(pe - i - hl));
        break;
      }
    }
    i = e + 1;
  }
  return value_list(items, (uint32_t)count);
}

void hook_normalize(hook_agent ag, arena *a, const char *name, size_t name_len, const value *args,
                    hook_call *c) {
  c->agent = hook_agent_name(ag);
  c->agent_tool = name;
  c->agent_tool_len = name_len;
  c->tool = name;
  c->tool_len = name_len;
  const tool_map *m = ag == HOOK_GEMINI     ? gemini_tools
                      : ag == HOOK_OPENCODE ? opencode_tools
                      : ag == HOOK_CODEX    ? codex_tools
                                            : NULL;
  for (; m && m->from; m++)
    if (eq(name, name_len, m->from)) {
      c->tool = m->to;
      c->tool_len = strlen(m->to);
      break;
    }
  c->input = args;
  if (!args || args->kind != V_MAP) return;

  /* The arguments plus the common names they lack. */
  uint32_t n = args->n;
  map_entry *e = arena_alloc(a, ((size_t)n + 8) * sizeof *e);
  if (!e) return;
  if (n) memcpy(e, args->entries, (size_t)n * sizeof *e);
  uint32_t k = n;
  for (const tool_map *al = arg_aliases; al->from; al++) {
    const value *v = value_map_get(args, al->from, strlen(al->from));
    if (v && !value_map_get(args, al->to, strlen(al->to))) {
      e[k].key = value_str(al->to, (uint32_t)strlen(al->to));
      e[k].val = *v;
      k++;
    }
  }
  const value *prompt = value_map_get(args, "prompt", 6);
  if (eq(c->tool, c->tool_len, "WebFetch") && !value_map_get(args, "url", 3) && prompt &&
      prompt->kind == V_STRING) {
    const char *u;
    size_t ul;
    if (find_url(prompt->s, prompt->n, &u, &ul)) {
      e[k].key = value_str("url", 3);
      e[k].val = value_str(u, (uint32_t)ul);
      k++;
    }
  }
  const value *patch = value_map_get(args, "command", 7);
  if (!patch) patch = value_map_get(args, "patch", 5);
  if (eq(c->tool, c->tool_len, "ApplyPatch") && patch && patch->kind == V_STRING &&
      !value_map_get(args, "files", 5)) {
    e[k].key = value_str("files", 5);
    e[k].val = patch_files(a, patch->s, patch->n);
    k++;
  }
  if (k == n) return;
  value *nv = arena_alloc(a, sizeof *nv);
  if (!nv) return;
  *nv = value_map(e, k);
  c->input = nv;
}

int hook_parse(hook_agent ag, arena *a, const char *in, size_t len, hook_call *c, char *err,
               size_t errlen) {
  memset(c, 0, sizeof *c);
  json_opts o = {0};
  o.duplicates = JSON_DUP_LAST_WINS;
  o.max_size = 16u << 20;
  value root;
  json_error je;
  if (json_parse(a, in, len, &o, &root, &je) != 0) {
    snprintf(err, errlen, "the hook input is not JSON: line %d, column %d, at %s: %s", je.line,
             je.column, je.path, je.message);
    return -1;
  }
  if (root.kind != V_MAP) {
    snprintf(err, errlen, "the hook input is not a JSON object");
    return -1;
  }
  const char *tool_key = ag == HOOK_OPENCODE ? "tool" : "tool_name";
  const char *args_key = ag == HOOK_OPENCODE ? "args" : "tool_input";
  const char *session_key = ag == HOOK_OPENCODE ? "sessionID" : "session_id";
  const char *want_event = ag == HOOK_GEMINI ? "BeforeTool" : "PreToolUse";
  const value *ev = value_map_get(&root, "hook_event_name", 15);
  if (ev && !str_is(ev, want_event)) {
    char evq[160];
    snprintf(err, errlen,
             "verdict hook answers %s only, but this hook input is for %s: wire it under %s",
             want_event,
             ev->kind == V_STRING ? json_quote_text(evq, sizeof evq, ev->s, ev->n, 64) : "null",
             want_event);
    return -1;
  }
  const value *tool = value_map_get(&root, tool_key, strlen(tool_key));
  if (!tool || tool->kind != V_STRING || tool->n == 0) {
    snprintf(err, errlen, "the hook input has no %s (a non-empty string at $.%s)", tool_key,
             tool_key);
    return -1;
  }
  const value *args = value_map_get(&root, args_key, strlen(args_key));
  if (args && args->kind == V_NULL) args = NULL;
  if (args && args->kind != V_MAP) {
    snprintf(err, errlen, "$.%s is not an object", args_key);
    return -1;
  }
  hook_normalize(ag, a, tool->s, tool->n, args, c);
  const value *cwd = value_map_get(&root, "cwd", 3);
  if (cwd && cwd->kind == V_STRING) {
    c->cwd = cwd->s;
    c->cwd_len = cwd->n;
  }
  const value *sess = value_map_get(&root, session_key, strlen(session_key));
  if (sess && sess->kind == V_STRING) {
    c->session = sess->s;
    c->session_len = sess->n;
  }
  return 0;
}

/* ---- the request ---- */

int hook_write_request(const hook_call *c, int headless, json_buf *out) {
  json_buf_put(out, "{\"action\":\"tool_call\",", 22);
  if (headless) json_buf_put(out, "\"candidates\":[\"allow\",\"deny\"],", 30);
  json_buf_put(out, "\"key\":", 6);
  json_write_string(out, c->session ? c->session : "", c->session_len);
  json_buf_put(out, ",\"context\":{\"agent\":", 20);
  json_write_string(out, c->agent, strlen(c->agent));
  json_buf_put(out, ",\"tool\":", 8);
  json_write_string(out, c->tool, c->tool_len);
  json_buf_put(out, ",\"agent_tool\":", 14);
  json_write_string(out, c->agent_tool, c->agent_tool_len);
  json_buf_put(out, ",\"input\":", 9);
  if (c->input) {
    if (json_write(out, c->input, 0) != 0) return -1;
  } else {
    json_buf_put(out, "{}", 2);
  }
  /* A call without a working directory is sent without one: the policy
   * decides what that means (agent_guard's on_error denies). */
  if (c->cwd) {
    json_buf_put(out, ",\"cwd\":", 7);
    json_write_string(out, c->cwd, c->cwd_len);
  }
  json_buf_put(out, ",\"session\":", 11);
  json_write_string(out, c->session ? c->session : "", c->session_len);
  json_buf_put(out, "}}", 2);
  return out->oom ? -1 : 0;
}

/* ---- the answer ---- */

hook_verdict hook_verdict_of(const vd_decision *d) {
  if (vd_decision_review(d)) return HOOK_ASK;
  return vd_decision_allowed(d) ? HOOK_ALLOW : HOOK_DENY;
}

const char *hook_verdict_name(hook_verdict v) {
  return v == HOOK_ALLOW ? "allow" : v == HOOK_ASK ? "ask" : "deny";
}

static void describe(const char *reason, const char *rule, const char *action, const char *sid,
                     char *buf, size_t size) {
  if (!reason || !*reason) reason = rule ? rule : "no rule matched";
  int n = snprintf(buf, size, "%s (verdict: %s", reason, action ? action : "error");
  if (rule && n >= 0 && (size_t)n < size)
    n += snprintf(buf + n, size - (size_t)n, ", rule %s", rule);
  if (sid && n >= 0 && (size_t)n < size)
    n += snprintf(buf + n, size - (size_t)n, ", snapshot %s", sid);
  if (n >= 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, ")");
}

void hook_describe(const vd_decision *d, char *buf, size_t size) {
  describe(vd_decision_reason(d), vd_decision_rule(d), vd_decision_action(d),
           vd_decision_snapshot_id(d), buf, size);
}

/* A NUL-terminated copy of a string member, or NULL. */
static const char *member(arena *a, const value *m, const char *k) {
  const value *v = m && m->kind == V_MAP ? value_map_get(m, k, strlen(k)) : NULL;
  return v && v->kind == V_STRING ? arena_strndup(a, v->s, v->n) : NULL;
}

int hook_describe_json(const char *json, size_t len, hook_verdict *v, char *buf, size_t size) {
  arena a;
  arena_init(&a, NULL, 0, 16u << 20);
  value d;
  json_error je;
  int rc = -1;
  if (json_parse(&a, json, len, NULL, &d, &je) != 0) {
    snprintf(buf, size, "the server's answer is not JSON: %s at %s", je.message, je.path);
  } else {
    const value *allowed = d.kind == V_MAP ? value_map_get(&d, "allowed", 7) : NULL;
    const value *review = d.kind == V_MAP ? value_map_get(&d, "review", 6) : NULL;
    if (!allowed || allowed->kind != V_BOOL || !review || review->kind != V_BOOL) {
      snprintf(buf, size, "the server's answer is not a decision (no allowed/review)");
    } else {
      const value *reason = value_map_get(&d, "reason", 6);
      *v = review->b ? HOOK_ASK : allowed->b ? HOOK_ALLOW : HOOK_DENY;
      describe(member(&a, reason, "message"), member(&a, reason, "rule"), member(&a, &d, "action"),
               member(&a, &d, "snapshot_id"), buf, size);
      rc = 0;
    }
  }
  arena_free(&a);
  return rc;
}

static void put_str(json_buf *b, const char *s) { json_write_string(b, s, strlen(s)); }

/* Claude Code and Codex: hookSpecificOutput with a permission decision. */
static void pre_tool_use(json_buf *out, const char *decision, const char *reason) {
  json_buf_put(out, "{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",", 52);
  json_buf_put(out, "\"permissionDecision\":", 21);
  put_str(out, decision);
  if (reason) {
    json_buf_put(out, ",\"permissionDecisionReason\":", 28);
    put_str(out, reason);
  }
  json_buf_put(out, "}}\n", 3);
}

/* Gemini CLI and the OpenCode plugin: a top-level decision. */
static void top_level(json_buf *out, const char *decision, const char *reason) {
  json_buf_put(out, "{\"decision\":", 12);
  put_str(out, decision);
  if (reason) {
    json_buf_put(out, ",\"reason\":", 10);
    put_str(out, reason);
  }
  json_buf_put(out, "}\n", 2);
}

int hook_answer(hook_agent ag, hook_verdict v, const char *reason, json_buf *out,
                json_buf *errout) {
  const char *name = hook_verdict_name(v);
  if (!reason || !*reason) reason = "verdict policy";
  switch (ag) {
    case HOOK_CLAUDE:
      pre_tool_use(out, name, reason);
      return 0;
    case HOOK_CODEX:
      /* Codex takes "allow" only with updatedInput and has no "ask" in
       * PreToolUse: an allow (and an ask, which Codex's own approval policy
       * then handles) is exit 0 with nothing on stdout. */
      if (v == HOOK_DENY) {
        pre_tool_use(out, "deny", reason);
      } else if (v == HOOK_ASK) {
        json_buf_put(errout, "verdict: asks for approval: ", 28);
        json_buf_put(errout, reason, strlen(reason));
        json_buf_putc(errout, '\n');
      }
      return 0;
    case HOOK_GEMINI:
      top_level(out, name, v == HOOK_ALLOW ? NULL : reason);
      return 0;
    case HOOK_OPENCODE:
      top_level(out, name, reason);
      return v == HOOK_ALLOW ? 0 : 2;
  }
  return 0;
}

int hook_fail(hook_agent ag, const char *why, json_buf *out, json_buf *errout) {
  char reason[1200];
  snprintf(reason, sizeof reason, "verdict could not check this tool call, so it is refused: %s",
           why);
  json_buf_put(errout, "verdict hook: ", 14);
  json_buf_put(errout, why, strlen(why));
  json_buf_putc(errout, '\n');
  switch (ag) {
    case HOOK_CLAUDE:
    case HOOK_CODEX:
      pre_tool_use(out, "deny", reason);
      return 0;
    case HOOK_GEMINI:
    case HOOK_OPENCODE:
      top_level(out, "deny", reason);
      return 2;
  }
  return 2;
}
