/* request.c — a request, from JSON or from C, into values the decision can
 * read.
 *
 * The request JSON is small and fixed in shape:
 *   {"action": "<decision point>", "candidates": ["a", "b"], "context": {..}, "key": "k"}
 * Only "action" is required. Anything else is refused with the JSON path of
 * the offending place ("$.candidates[2] must be a string"), because a caller
 * who misspells "context" should hear about it rather than get decisions made
 * on an empty context. The values stay where json_parse put them (the
 * decision's arena): nothing is copied. */
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "core/utf8.h"
#include "engine/engine.h"

/* How a JSON user would name the type of v. */
static const char *json_kind(const value *v) {
  switch (v->kind) {
    case V_NULL:
      return "null";
    case V_BOOL:
      return v->b ? "true" : "false";
    case V_INT:
    case V_UINT:
    case V_DOUBLE:
      return "a number";
    case V_STRING:
      return "a string";
    case V_LIST:
      return "an array";
    case V_MAP:
      return "an object";
    default:
      return value_kind_name((value_kind)v->kind);
  }
}

int request_is_ident(const char *s, size_t n) {
  if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return 0;
  }
  return 1;
}

/* "$.name" or, for keys that are not identifiers, "$[\"na me\"]" (shortened
 * to fit). */
static void key_path(char *out, size_t cap, const value *key) {
  if (request_is_ident(key->s, key->n)) {
    snprintf(out, cap, "$.%.*s", (int)(key->n > 200 ? 200 : key->n), key->s);
    return;
  }
  size_t o = 0;
  o += (size_t)snprintf(out, cap, "$[\"");
  for (uint32_t i = 0; i < key->n && o + 8 < cap; i++) {
    unsigned char c = (unsigned char)key->s[i];
    if (c == '"' || c == '\\') {
      out[o++] = '\\';
      out[o++] = (char)c;
    } else if (c < 0x20) {
      o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
    } else {
      out[o++] = (char)c;
    }
  }
  snprintf(out + o, cap - o, "\"]");
}

static int key_is(const value *k, const char *name) {
  size_t n = strlen(name);
  return k->n == n && memcmp(k->s, name, n) == 0;
}

static int request_from_map(const value *root, decide_request *req, vd_error *err) {
  int have_action = 0;
  req->candidates = value_list(NULL, 0);
  req->key = value_str("", 0);
  req->context = value_map(NULL, 0);
  for (uint32_t i = 0; i < root->n; i++) {
    const value *k = &root->entries[i].key, *v = &root->entries[i].val;
    if (key_is(k, "action")) {
      if (v->kind != V_STRING)
        return engine_error(err, VD_EREQUEST, 0, 0, "$.action",
                            "$.action must be a string (the decision point), not %s", json_kind(v));
      if (v->n == 0)
        return engine_error(err, VD_EREQUEST, 0, 0, "$.action",
                            "$.action is empty; it must name a decision point");
      req->action = *v;
      have_action = 1;
    } else if (key_is(k, "candidates")) {
      if (v->kind != V_LIST)
        return engine_error(err, VD_EREQUEST, 0, 0, "$.candidates",
                            "$.candidates must be an array of action names, not %s", json_kind(v));
      for (uint32_t j = 0; j < v->n; j++)
        if (v->items[j].kind != V_STRING) {
          char path[64];
          snprintf(path, sizeof path, "$.candidates[%u]", j);
          return engine_error(err, VD_EREQUEST, 0, 0, path,
                              "%s must be a string (an action name), not %s", path,
                              json_kind(&v->items[j]));
        }
      req->candidates = *v;
    } else if (key_is(k, "context")) {
      if (v->kind != V_MAP)
        return engine_error(err, VD_EREQUEST, 0, 0, "$.context",
                            "$.context must be an object (the fields rules read), not %s",
                            json_kind(v));
      req->context = *v;
    } else if (key_is(k, "key")) {
      if (v->kind != V_STRING)
        return engine_error(err, VD_EREQUEST, 0, 0, "$.key",
                            "$.key must be a string (a routing or subject key), not %s",
                            json_kind(v));
      req->key = *v;
    } else {
      char path[256];
      key_path(path, sizeof path, k);
      return engine_error(err, VD_EREQUEST, 0, 0, path,
                          "unknown request key %s (a request has \"action\", \"candidates\", "
                          "\"context\" and \"key\"; the fields rules read go in \"context\")",
                          path);
    }
  }
  if (!have_action)
    return engine_error(err, VD_EREQUEST, 0, 0, "$.action",
                        "the request has no $.action (the decision point to run)");
  return 0;
}

/* Turns a json_parse failure into a vd_error; prefix names what was parsed,
 * path_prefix is put before the parser's path ("$.context" + ".a[1]"). */
static int json_failure(vd_error *err, const json_error *je, const char *what,
                        const char *path_prefix) {
  int code = VD_EJSON;
  if (strstr(je->message, "deeper than") || strstr(je->message, "limit of")) code = VD_ELIMIT;
  if (strstr(je->message, "out of memory")) code = VD_ENOMEM;
  char path[256];
  const char *p = je->path[0] ? je->path : "$";
  if (path_prefix)
    snprintf(path, sizeof path, "%s%s", path_prefix, p + 1);
  else
    snprintf(path, sizeof path, "%s", p);
  return engine_error(err, code, je->line, je->column, path,
                      "%s is not valid JSON: %d:%d: %s (at %s)", what, je->line, je->column,
                      je->message, path);
}

int request_parse_json(arena *a, const char *json, size_t len, const decide_limits *lim,
                       decide_request *req, vd_error *err) {
  if (len > lim->max_request_bytes)
    return engine_error(err, VD_ELIMIT, 0, 0, "$",
                        "the request is %zu bytes; the limit is %zu (max_request_bytes)", len,
                        lim->max_request_bytes);
  json_opts jo = {.max_size = lim->max_request_bytes};
  json_error je;
  value root;
  if (json_parse(a, json, len, &jo, &root, &je) != 0)
    return json_failure(err, &je, "the request", NULL);
  if (root.kind != V_MAP)
    return engine_error(err, VD_EREQUEST, 0, 0, "$",
                        "the request must be a JSON object with \"action\" and \"context\", not %s",
                        json_kind(&root));
  return request_from_map(&root, req, err);
}

/* A C string as a string value, checked for UTF-8 (rules assume it). */
static int c_string(const char *s, const char *what, value *out, vd_error *err) {
  size_t n = strlen(s);
  if (n > UINT32_MAX)
    return engine_error(err, VD_ELIMIT, 0, 0, what, "%s is longer than 4 GiB", what);
  int ascii = 0;
  size_t bad = utf8_validate(s, n, &ascii);
  if (bad != n)
    return engine_error(err, VD_EREQUEST, 0, 0, what, "%s is not valid UTF-8 (byte %zu)", what,
                        bad);
  *out = value_str(s, (uint32_t)n);
  if (ascii) out->flags |= VF_ASCII;
  return 0;
}

int request_from_c(arena *a, const vd_request *r, const decide_limits *lim, decide_request *req,
                   vd_error *err) {
  int rc;
  if (!r) return engine_error(err, VD_EINVAL, 0, 0, NULL, "vd_decide: the request is NULL");
  if (!r->action || !r->action[0])
    return engine_error(err, VD_EREQUEST, 0, 0, "$.action",
                        "$.action is missing or empty; it must name a decision point");
  if ((rc = c_string(r->action, "$.action", &req->action, err))) return rc;
  req->key = value_str("", 0);
  if (r->key && (rc = c_string(r->key, "$.key", &req->key, err))) return rc;

  req->candidates = value_list(NULL, 0);
  if (r->ncandidates) {
    if (!r->candidates)
      return engine_error(err, VD_EINVAL, 0, 0, "$.candidates",
                          "vd_decide: ncandidates is %zu but candidates is NULL", r->ncandidates);
    if (r->ncandidates > UINT32_MAX)
      return engine_error(err, VD_ELIMIT, 0, 0, "$.candidates", "too many candidates");
    value *items = arena_alloc(a, r->ncandidates * sizeof *items);
    if (!items) return engine_error(err, VD_ENOMEM, 0, 0, NULL, "out of memory (request)");
    for (size_t i = 0; i < r->ncandidates; i++) {
      char path[64];
      snprintf(path, sizeof path, "$.candidates[%zu]", i);
      if (!r->candidates[i]) return engine_error(err, VD_EREQUEST, 0, 0, path, "%s is NULL", path);
      if ((rc = c_string(r->candidates[i], path, &items[i], err))) return rc;
    }
    req->candidates = value_list(items, (uint32_t)r->ncandidates);
  }

  req->context = value_map(NULL, 0);
  if (r->context_json) {
    size_t n = r->context_len < 0 ? strlen(r->context_json) : (size_t)r->context_len;
    if (n > lim->max_request_bytes)
      return engine_error(err, VD_ELIMIT, 0, 0, "$.context",
                          "the context is %zu bytes; the limit is %zu (max_request_bytes)", n,
                          lim->max_request_bytes);
    json_opts jo = {.max_size = lim->max_request_bytes};
    json_error je;
    value ctx;
    if (json_parse(a, r->context_json, n, &jo, &ctx, &je) != 0)
      return json_failure(err, &je, "the context", "$.context");
    if (ctx.kind != V_MAP)
      return engine_error(err, VD_EREQUEST, 0, 0, "$.context",
                          "$.context must be an object (the fields rules read), not %s",
                          json_kind(&ctx));
    req->context = ctx;
  }
  return 0;
}

int request_from_built(arena *a, const vd_request *r, const value *ctx, size_t ctx_bytes,
                       const decide_limits *lim, decide_request *req, vd_error *err) {
  if (r && r->context_json)
    return engine_error(err, VD_EINVAL, 0, 0, "$.context",
                        "vd_decide_built: the request has context_json too; the context is the "
                        "builder's (context_json must be NULL)");
  int rc = request_from_c(a, r, lim, req, err);
  if (rc) return rc;
  if (ctx->kind != V_MAP)
    return engine_error(err, VD_EREQUEST, 0, 0, "$.context",
                        "$.context must be an object (the fields rules read), not %s",
                        json_kind(ctx));
  /* The request as JSON (what its snapshot records): the context, and the
   * rest at most this much (quotes, escapes and keys counted high). */
  size_t n = ctx_bytes + 64 + 6 * (strlen(r->action) + (r->key ? strlen(r->key) : 0));
  for (size_t i = 0; i < r->ncandidates; i++) n += 6 * strlen(r->candidates[i]) + 3;
  if (n > lim->max_request_bytes)
    return engine_error(err, VD_ELIMIT, 0, 0, "$.context",
                        "the request with its context is up to %zu bytes as JSON; the limit is "
                        "%zu (max_request_bytes)",
                        n, lim->max_request_bytes);
  req->context = *ctx;
  return 0;
}
