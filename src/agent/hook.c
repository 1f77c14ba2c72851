/* hook.c — the four agents' hook formats (see hook.h).
 *
 * Input is read leniently: agents add fields between releases, so anything
 * unknown is ignored and duplicate keys take the last value, as the agents'
 * own JavaScript and Rust readers do. Output is exact: Codex rejects a hook
 * answer with a field it does not know (and then runs the tool), so each
 * agent gets only the fields its schema lists for that event.
 *
 * Why "fail closed" looks different per agent: Claude Code and Codex treat a
 * crash or a non-zero exit other than 2 as "no opinion" and run the tool, so
 * a failure is written as an ordinary deny answer with exit 0; Gemini CLI
 * reads JSON from stdout whatever the exit code, and 2 denies when it cannot.
 *
 * The tool names are the agents' own, from their sources: Gemini CLI's
 * tool-names.ts (grep_search, with search_file_content its legacy alias;
 * invoke_agent; MCP tools as mcp_<server>_<tool>), OpenCode's tool registry
 * (bash, whose id stays "bash" where its code calls it the shell tool;
 * apply_patch {patchText}; task), Codex's hooks (Bash, apply_patch
 * {command}, spawn_agent) and Claude Code's (Agent, formerly Task). */
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

static const value *get(const value *m, const char *k) {
  return m && m->kind == V_MAP ? value_map_get(m, k, strlen(k)) : NULL;
}

static const value *get_str(const value *m, const char *k) {
  const value *v = get(m, k);
  return v && v->kind == V_STRING ? v : NULL;
}

/* ---- tool names and arguments ---- */

typedef struct tool_map {
  const char *from, *to;
} tool_map;

static const tool_map claude_tools[] = {{"Task", "Agent"}, /* the name before Agent */
                                        {NULL, NULL}};

static const tool_map gemini_tools[] = {{"run_shell_command", "Bash"},
                                        {"write_file", "Write"},
                                        {"replace", "Edit"},
                                        {"read_file", "Read"},
                                        {"read_many_files", "Read"},
                                        {"web_fetch", "WebFetch"},
                                        {"glob", "Glob"},
                                        {"grep_search", "Grep"},
                                        {"search_file_content", "Grep"},
                                        {"grep", "Grep"},
                                        {"list_directory", "LS"},
                                        {"google_web_search", "WebSearch"},
                                        {"write_todos", "TodoWrite"},
                                        {"invoke_agent", "Agent"},
                                        {NULL, NULL}};

static const tool_map opencode_tools[] = {{"bash", "Bash"},         {"shell", "Bash"},
                                          {"write", "Write"},       {"edit", "Edit"},
                                          {"read", "Read"},         {"glob", "Glob"},
                                          {"grep", "Grep"},         {"list", "LS"},
                                          {"webfetch", "WebFetch"}, {"websearch", "WebSearch"},
                                          {"task", "Agent"},        {"todowrite", "TodoWrite"},
                                          {"todoread", "TodoRead"}, {"apply_patch", "ApplyPatch"},
                                          {"patch", "ApplyPatch"},  {NULL, NULL}};

static const tool_map codex_tools[] = {
    {"apply_patch", "ApplyPatch"}, {"spawn_agent", "Agent"}, {NULL, NULL}};

/* Argument names other agents use for what Claude Code calls these. */
static const tool_map arg_aliases[] = {{"filePath", "file_path"},
                                       {"absolute_path", "file_path"},
                                       {"oldString", "old_string"},
                                       {"newString", "new_string"},
                                       {NULL, NULL}};

/* Every http(s) URL in a text (Gemini CLI's web_fetch has only a prompt,
 * which may name up to 20), as a list value. */
static value find_urls(arena *a, const char *s, size_t n) {
  size_t count = 0, cap = 4;
  value *items = arena_alloc(a, cap * sizeof *items);
  if (!items) return value_list(NULL, 0);
  for (size_t i = 0; i + 7 < n && count < 256; i++) {
    size_t k = 0;
    if (i + 8 <= n && memcmp(s + i, "https://", 8) == 0)
      k = 8;
    else if (memcmp(s + i, "http://", 7) == 0)
      k = 7;
    if (!k || (i > 0 && ((s[i - 1] | 32) >= 'a' && (s[i - 1] | 32) <= 'z'))) continue;
    size_t j = i + k;
    while (j < n && (unsigned char)s[j] > ' ' && !strchr("\"'<>`)]}", s[j])) j++;
    size_t e = j;
    while (e > i + k && strchr(".,;:!?", s[e - 1])) e--;
    if (count == cap) {
      value *ni = arena_realloc(a, items, cap * sizeof *items, 2 * cap * sizeof *items);
      if (!ni) break;
      items = ni;
      cap *= 2;
    }
    items[count++] = value_str(s + i, (uint32_t)(e - i));
    i = j;
  }
  return value_list(items, (uint32_t)count);
}

/* The files an apply_patch text touches ("*** Add File: p", "*** Update
 * File: p", "*** Delete File: p", "*** Move to: p"; leading blanks are
 * skipped, as Codex's lenient reader does), as a list value. */
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
    size_t b = i;
    while (b < e && (s[b] == ' ' || s[b] == '\t')) b++;
    for (size_t h = 0; h < 4; h++) {
      size_t hl = strlen(heads[h]);
      if (e - b > hl && memcmp(s + b, heads[h], hl) == 0) {
        size_t pe = e;
        while (pe > b + hl && (s[pe - 1] == '\r' || s[pe - 1] == ' ')) pe--;
        if (count == cap) {
          value *ni = arena_realloc(a, items, cap * sizeof *items, 2 * cap * sizeof *items);
          if (!ni) return value_list(items, (uint32_t)count);
          items = ni;
          cap *= 2;
        }
        items[count++] = value_str(s + b + hl, (uint32_t)(pe - b - hl));
        break;
      }
    }
    i = e + 1;
  }
  return value_list(items, (uint32_t)count);
}

/* The string items of the lists args[keys...] (read_many_files' include,
 * and paths in its older releases), as one list value. */
static value string_items(arena *a, const value *args, const char *const *keys, size_t nkeys) {
  size_t count = 0;
  for (size_t k = 0; k < nkeys; k++) {
    const value *l = get(args, keys[k]);
    if (l && l->kind == V_LIST)
      count += l->n;
    else if (l && l->kind == V_STRING)
      count++;
  }
  value *items = count ? arena_alloc(a, count * sizeof *items) : NULL;
  size_t n = 0;
  for (size_t k = 0; items && k < nkeys; k++) {
    const value *l = get(args, keys[k]);
    if (l && l->kind == V_STRING) items[n++] = *l;
    for (uint32_t i = 0; l && l->kind == V_LIST && i < l->n; i++)
      if (l->items[i].kind == V_STRING) items[n++] = l->items[i];
  }
  return value_list(items, (uint32_t)n);
}

/* dir resolved against base, lexically ("." and ".." segments folded, no
 * file system access: the call has not run). "~..." stays as it is. */
static const char *resolve_dir(arena *a, const char *base, size_t blen, const char *dir,
                               size_t dlen, size_t *outlen) {
  if (dlen > 0 && dir[0] == '~') {
    *outlen = dlen;
    return dir;
  }
  size_t cap = blen + dlen + 2;
  char *buf = arena_alloc(a, cap + 1);
  if (!buf) return NULL;
  size_t n = 0;
  if (dlen == 0 || dir[0] != '/') {
    memcpy(buf, base, blen);
    n = blen;
  }
  if (n == 0 || buf[n - 1] != '/') buf[n++] = '/';
  memcpy(buf + n, dir, dlen);
  n += dlen;
  /* Fold segments in place. */
  size_t w = 0, r = 0;
  while (r < n) {
    while (r < n && buf[r] == '/') r++;
    size_t s = r;
    while (r < n && buf[r] != '/') r++;
    size_t l = r - s;
    if (l == 0 || (l == 1 && buf[s] == '.')) continue;
    if (l == 2 && buf[s] == '.' && buf[s + 1] == '.') {
      while (w > 0 && buf[w - 1] != '/') w--;
      if (w > 0) w--;
      continue;
    }
    buf[w++] = '/';
    memmove(buf + w, buf + s, l);
    w += l;
  }
  if (w == 0) buf[w++] = '/';
  buf[w] = '\0';
  *outlen = w;
  return buf;
}

/* Gemini CLI names an MCP tool mcp_<server>_<tool> (the server is what
 * comes before the next "_", as its own parser reads it) and says so in
 * mcp_context; the common name is Claude Code's mcp__<server>__<tool>. */
static int gemini_mcp_name(arena *a, const char *name, size_t n, const value *mcp_context,
                           const char **out, size_t *outlen) {
  const value *srv = get_str(mcp_context, "server_name"), *tool = get_str(mcp_context, "tool_name");
  const char *s = NULL, *t = NULL;
  size_t sl = 0, tl = 0;
  if (srv && tool && srv->n && tool->n) {
    s = srv->s, sl = srv->n, t = tool->s, tl = tool->n;
  } else if (n > 4 && memcmp(name, "mcp_", 4) == 0 && name[4] != '_') {
    const char *u = memchr(name + 4, '_', n - 4);
    if (!u || u + 1 >= name + n) return 0;
    s = name + 4, sl = (size_t)(u - s), t = u + 1, tl = (size_t)(name + n - t);
  } else {
    return 0;
  }
  char *buf = arena_alloc(a, sl + tl + 8);
  if (!buf) return 0;
  memcpy(buf, "mcp__", 5);
  memcpy(buf + 5, s, sl);
  memcpy(buf + 5 + sl, "__", 2);
  memcpy(buf + 7 + sl, t, tl);
  *out = buf;
  *outlen = sl + tl + 7;
  return 1;
}

void hook_normalize(hook_agent ag, arena *a, const char *name, size_t name_len, const value *args,
                    const value *mcp_context, hook_call *c) {
  c->agent = hook_agent_name(ag);
  c->agent_tool = name;
  c->agent_tool_len = name_len;
  c->tool = name;
  c->tool_len = name_len;
  c->parts = NULL;
  c->part_key = NULL;
  const tool_map *m = ag == HOOK_GEMINI     ? gemini_tools
                      : ag == HOOK_OPENCODE ? opencode_tools
                      : ag == HOOK_CODEX    ? codex_tools
                                            : claude_tools;
  int mapped = 0;
  for (; m->from; m++)
    if (eq(name, name_len, m->from)) {
      c->tool = m->to;
      c->tool_len = strlen(m->to);
      mapped = 1;
      break;
    }
  if (!mapped && ag == HOOK_GEMINI)
    gemini_mcp_name(a, name, name_len, mcp_context, &c->tool, &c->tool_len);
  c->input = args;
  if (!args || args->kind != V_MAP) return;
  int bash = eq(c->tool, c->tool_len, "Bash");

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
  /* A shell command run in another directory: OpenCode's workdir, Gemini
   * CLI's dir_path. Its relative paths are relative to that directory, so
   * it is the call's cwd; the session's stays as the project. Elsewhere
   * dir_path is the directory a search or listing reads (path). */
  const value *wd = bash ? get_str(args, ag == HOOK_GEMINI ? "dir_path" : "workdir") : NULL;
  if (bash && wd && wd->n && c->cwd) {
    size_t rl;
    const char *r = resolve_dir(a, c->cwd, c->cwd_len, wd->s, wd->n, &rl);
    if (r) {
      if (!c->project) {
        c->project = c->cwd;
        c->project_len = c->cwd_len;
      }
      c->cwd = r;
      c->cwd_len = rl;
    }
  }
  const value *dp = get(args, "dir_path");
  if (!bash && dp && !value_map_get(args, "path", 4)) {
    e[k].key = value_str("path", 4);
    e[k].val = *dp;
    k++;
  }
  const value *prompt = get_str(args, "prompt");
  if (eq(c->tool, c->tool_len, "WebFetch") && !value_map_get(args, "url", 3) && prompt) {
    value *urls = arena_alloc(a, sizeof *urls);
    if (urls) {
      *urls = find_urls(a, prompt->s, prompt->n);
      c->parts = urls;
      c->part_key = "url";
    }
  }
  if (ag == HOOK_GEMINI && eq(name, name_len, "read_many_files")) {
    static const char *const keys[] = {"include", "paths"};
    value *files = arena_alloc(a, sizeof *files);
    if (files) {
      *files = string_items(a, args, keys, 2);
      c->parts = files;
      c->part_key = "file_path";
    }
  }
  const value *patch = get_str(args, "command");
  if (!patch) patch = get_str(args, "patchText");
  if (!patch) patch = get_str(args, "patch");
  if (eq(c->tool, c->tool_len, "ApplyPatch") && patch && !value_map_get(args, "files", 5)) {
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

size_t hook_part_count(const hook_call *c) {
  return c->parts && c->parts->kind == V_LIST && c->parts->n > 0 ? c->parts->n : 1;
}

int hook_part(const hook_call *c, arena *a, size_t i, hook_call *part) {
  *part = *c;
  part->parts = NULL;
  if (!c->parts || c->parts->kind != V_LIST || i >= c->parts->n) return 0;
  const value *in = c->input && c->input->kind == V_MAP ? c->input : NULL;
  uint32_t n = in ? in->n : 0;
  map_entry *e = arena_alloc(a, ((size_t)n + 1) * sizeof *e);
  value *nv = arena_alloc(a, sizeof *nv);
  if (!e || !nv) return -1;
  uint32_t k = 0;
  size_t kl = strlen(c->part_key);
  for (uint32_t j = 0; j < n; j++) /* the item replaces any value of the key */
    if (!(in->entries[j].key.n == kl && memcmp(in->entries[j].key.s, c->part_key, kl) == 0))
      e[k++] = in->entries[j];
  e[k].key = value_str(c->part_key, (uint32_t)kl);
  e[k].val = c->parts->items[i];
  *nv = value_map(e, k + 1);
  part->input = nv;
  return 0;
}

/* Which event a hook input is for. A missing hook_event_name is read as
 * the tool-call event, as before agents sent one. */
static hook_event event_of(hook_agent ag, const value *ev) {
  if (ag == HOOK_OPENCODE || !ev) return HOOK_EV_PRE;
  if (ag == HOOK_GEMINI) return str_is(ev, "BeforeTool") ? HOOK_EV_PRE : HOOK_EV_OTHER;
  if (str_is(ev, "PreToolUse")) return HOOK_EV_PRE;
  if (str_is(ev, "PermissionRequest")) return HOOK_EV_PERMISSION;
  return HOOK_EV_OTHER;
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
  c->agent = hook_agent_name(ag);
  const value *ev = get(&root, "hook_event_name");
  c->ev = event_of(ag, ev);
  if (ev && ev->kind == V_STRING) {
    c->event = ev->s;
    c->event_len = ev->n;
  }
  if (c->ev == HOOK_EV_OTHER) return 0;
  const char *tool_key = ag == HOOK_OPENCODE ? "tool" : "tool_name";
  const char *args_key = ag == HOOK_OPENCODE ? "args" : "tool_input";
  const char *session_key = ag == HOOK_OPENCODE ? "sessionID" : "session_id";
  const char *call_key = ag == HOOK_OPENCODE ? "callID" : "tool_use_id";
  const value *tool = get(&root, tool_key);
  if (!tool || tool->kind != V_STRING || tool->n == 0) {
    snprintf(err, errlen, "the hook input has no %s (a non-empty string at $.%s)", tool_key,
             tool_key);
    return -1;
  }
  const value *args = get(&root, args_key);
  if (args && args->kind == V_NULL) args = NULL;
  if (args && args->kind != V_MAP) {
    snprintf(err, errlen, "$.%s is not an object", args_key);
    return -1;
  }
  const value *cwd = get_str(&root, "cwd");
  if (cwd) {
    c->cwd = cwd->s;
    c->cwd_len = cwd->n;
  }
  const value *sess = get_str(&root, session_key);
  if (sess) {
    c->session = sess->s;
    c->session_len = sess->n;
  }
  const value *call = get_str(&root, call_key);
  if (call && call->n) {
    c->call_id = call->s;
    c->call_id_len = call->n;
  }
  hook_normalize(ag, a, tool->s, tool->n, args, get(&root, "mcp_context"), c);
  return 0;
}

/* ---- the request ---- */

static void put_field(json_buf *out, const char *key, const char *s, size_t n) {
  json_buf_putc(out, ',');
  json_write_string(out, key, strlen(key));
  json_buf_putc(out, ':');
  json_write_string(out, s, n);
}

int hook_write_request(const hook_call *c, int headless, json_buf *out) {
  json_buf_put(out, "{\"action\":\"tool_call\",", 22);
  if (headless) json_buf_put(out, "\"candidates\":[\"allow\",\"deny\"],", 30);
  json_buf_put(out, "\"key\":", 6);
  json_write_string(out, c->session ? c->session : "", c->session_len);
  json_buf_put(out, ",\"context\":{\"agent\":", 20);
  json_write_string(out, c->agent, strlen(c->agent));
  if (c->event) put_field(out, "event", c->event, c->event_len);
  put_field(out, "tool", c->tool, c->tool_len);
  put_field(out, "agent_tool", c->agent_tool, c->agent_tool_len);
  json_buf_put(out, ",\"input\":", 9);
  if (c->input) {
    if (json_write(out, c->input, 0) != 0) return -1;
  } else {
    json_buf_put(out, "{}", 2);
  }
  /* A call without a working directory is sent without one: the policy
   * decides what that means (agent_guard's on_error denies). */
  if (c->cwd) put_field(out, "cwd", c->cwd, c->cwd_len);
  if (c->project)
    put_field(out, "project", c->project, c->project_len);
  else if (c->cwd)
    put_field(out, "project", c->cwd, c->cwd_len);
  put_field(out, "session", c->session ? c->session : "", c->session_len);
  if (c->call_id) put_field(out, "call_id", c->call_id, c->call_id_len);
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

hook_verdict hook_verdict_stricter(hook_verdict a, hook_verdict b) {
  if (a == HOOK_DENY || b == HOOK_DENY) return HOOK_DENY;
  if (a == HOOK_ASK || b == HOOK_ASK) return HOOK_ASK;
  return HOOK_ALLOW;
}

static void put(json_buf *b, const char *s) { json_buf_put(b, s, strlen(s)); }
static void put_str(json_buf *b, const char *s) { json_write_string(b, s, strlen(s)); }

/* What the model reads beside the decision (additionalContext): the user
 * sees an ask's reason in the prompt, but the model would otherwise learn
 * only that the call did not run. */
static void model_context(json_buf *out, hook_verdict v, const char *reason) {
  json_buf line;
  json_buf_init(&line, NULL);
  put(&line, v == HOOK_ASK
                 ? "The project's verdict policy asked the developer to approve this tool call: "
                 : "The project's verdict policy refused this tool call: ");
  put(&line, reason);
  json_buf_put(out, ",\"additionalContext\":", 21);
  json_write_string(out, line.data ? line.data : "", line.len);
  json_buf_free(&line);
}

/* A sentence for the developer (systemMessage). */
static void user_message(json_buf *out, hook_verdict v, const char *reason) {
  json_buf line;
  json_buf_init(&line, NULL);
  put(&line, v == HOOK_ALLOW ? "verdict allows this call: "
             : v == HOOK_ASK ? "verdict asks you to approve this call: "
                             : "verdict refused this call: ");
  put(&line, reason);
  json_buf_put(out, "\"systemMessage\":", 16);
  json_write_string(out, line.data ? line.data : "", line.len);
  json_buf_free(&line);
}

/* Claude Code's PreToolUse: a permission decision, its reason (shown to
 * the developer for allow and ask, to the model for deny; it ends with the
 * snapshot id) and, for deny and ask, the same for the model as
 * additionalContext. Codex's deny takes exactly the three fields (model_ctx
 * 0): a Codex from before additionalContext rejects the whole answer for
 * it, and then runs the tool. */
static void pre_tool_use(json_buf *out, hook_verdict v, const char *reason, int model_ctx) {
  put(out, "{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":");
  put_str(out, hook_verdict_name(v));
  put(out, ",\"permissionDecisionReason\":");
  put_str(out, reason);
  if (model_ctx && v != HOOK_ALLOW) model_context(out, v, reason);
  put(out, "}}\n");
}

/* PermissionRequest (Claude Code and Codex): the approval prompt is about to
 * be shown. allow and deny decide it; an ask leaves it to the developer, with
 * the reason beside it. */
static void permission_request(json_buf *out, hook_verdict v, const char *reason) {
  if (v == HOOK_ASK) {
    put(out, "{");
    user_message(out, v, reason);
    put(out, "}\n");
    return;
  }
  put(out, "{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{");
  put(out, v == HOOK_ALLOW ? "\"behavior\":\"allow\"" : "\"behavior\":\"deny\",\"message\":");
  if (v != HOOK_ALLOW) put_str(out, reason);
  put(out, "}}}\n");
}

/* Gemini CLI's BeforeTool: a top-level decision; reason is what the model
 * reads for a deny ("Tool execution blocked: <reason>"), systemMessage what
 * the developer sees (an ask's prompt shows no reason). */
static void before_tool(json_buf *out, hook_verdict v, const char *reason) {
  put(out, "{\"decision\":");
  put_str(out, hook_verdict_name(v));
  if (v != HOOK_ALLOW) {
    put(out, ",\"reason\":");
    put_str(out, reason);
    put(out, ",");
    user_message(out, v, reason);
  }
  put(out, "}\n");
}

/* The OpenCode plugin's message: a decision and its reason. */
static void plugin_answer(json_buf *out, hook_verdict v, const char *reason) {
  put(out, "{\"decision\":");
  put_str(out, hook_verdict_name(v));
  put(out, ",\"reason\":");
  put_str(out, reason);
  put(out, "}\n");
}

int hook_answer(hook_agent ag, hook_event ev, hook_verdict v, const char *reason, json_buf *out,
                json_buf *errout) {
  (void)errout;
  if (!reason || !*reason) reason = "verdict policy";
  switch (ag) {
    case HOOK_CLAUDE:
      if (ev == HOOK_EV_PERMISSION)
        permission_request(out, v, reason);
      else
        pre_tool_use(out, v, reason, 1);
      return 0;
    case HOOK_CODEX:
      if (ev == HOOK_EV_PERMISSION) {
        permission_request(out, v, reason);
      } else if (v == HOOK_DENY) {
        pre_tool_use(out, v, reason, 0);
      } else if (v == HOOK_ASK) {
        /* Codex has no "ask" in PreToolUse (and takes "allow" only with a
         * rewritten input): the call goes on to Codex's own approvals, which
         * ask the developer where its approval policy says to — and to the
         * PermissionRequest hook. The developer and the model learn why. */
        put(out, "{");
        user_message(out, v, reason);
        put(out, ",\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\"");
        model_context(out, v, reason);
        put(out, "}}\n");
      }
      return 0;
    case HOOK_GEMINI:
      before_tool(out, v, reason);
      return 0;
    case HOOK_OPENCODE:
      plugin_answer(out, v, reason);
      return v == HOOK_ALLOW ? 0 : 2;
  }
  return 0;
}

int hook_fail(hook_agent ag, hook_event ev, const char *why, json_buf *out, json_buf *errout) {
  char reason[1200];
  snprintf(reason, sizeof reason, "verdict could not check this tool call, so it is refused: %s",
           why);
  json_buf_put(errout, "verdict hook: ", 14);
  json_buf_put(errout, why, strlen(why));
  json_buf_putc(errout, '\n');
  switch (ag) {
    case HOOK_CLAUDE:
    case HOOK_CODEX:
      if (ev == HOOK_EV_PERMISSION)
        permission_request(out, HOOK_DENY, reason);
      else
        pre_tool_use(out, HOOK_DENY, reason, 0);
      return 0;
    case HOOK_GEMINI:
      before_tool(out, HOOK_DENY, reason);
      return 2;
    case HOOK_OPENCODE:
      plugin_answer(out, HOOK_DENY, reason);
      return 2;
  }
  return 2;
}

int hook_pass(hook_agent ag, const hook_call *c, json_buf *out, json_buf *errout) {
  char evq[160];
  const char *ev = c->event ? json_quote_text(evq, sizeof evq, c->event, c->event_len, 64) : "?";
  char line[400];
  snprintf(line, sizeof line,
           "verdict hook: no opinion on %s: verdict guards %s, before the tool runs\n", ev,
           ag == HOOK_GEMINI ? "BeforeTool" : "PreToolUse and PermissionRequest");
  json_buf_put(errout, line, strlen(line));
  /* Gemini CLI reads stderr as the answer when stdout has none; {} is
   * "nothing to say". Claude Code and Codex read empty stdout as that. */
  if (ag == HOOK_GEMINI) json_buf_put(out, "{}\n", 3);
  return 0;
}
