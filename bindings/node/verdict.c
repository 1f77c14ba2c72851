/* verdict.c — the Node-API addon behind the `verdict` package: the decision
 * engine in the caller's own process (docs/bindings.md, "Node.js").
 *
 *   const { Engine } = require("verdict");
 *   const engine = new Engine("policies", { snapshots: "snaps" });
 *   const d = engine.decide({ action: "http_request", context: { path: "/" } });
 *   console.log(d.action, d.rule, d.snapshotId);
 *   engine.close();
 *
 * An object request is walked straight into vd_builder events (no JSON text
 * in between); a string request goes to vd_decide_json. decide() decides on
 * the calling thread; decideAsync() walks the object on the main thread (it
 * reads JavaScript values), decides on libuv's thread pool and builds the
 * answer back on the main thread. Each call takes a slot (a vd_decision, a
 * vd_builder and the request's strings) from a small per-engine pool that
 * only the main thread touches; a slot belongs to one call until it ends.
 *
 * index.js loads this file and hands it the VerdictError class (init); the
 * archive libverdict.a is linked in (build.sh), so the addon carries one copy
 * of the engine and needs no libverdict.so at run time. */
#define NAPI_VERSION 8
#include <node_api.h>

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verdict.h"

/* ---- per-addon state ---- */

#define STR_CACHE 256
#define STR_PROBES 8

typedef struct {
  napi_ref error_class; /* VerdictError, from init() */
  napi_ref engine_class;
  napi_ref object_proto; /* Object.prototype: what a plain object has */
  napi_ref json_parse, json_stringify;
  napi_ref decision_class; /* Decision, from init() */
  napi_ref strings;        /* an array: the cached strings (cached_str) */
  /* index.js's event buffer and answer array (setBuffers), held here so
   * that _decideEncoded reads them without a Node-API call each */
  napi_ref io_in_ref, io_out_ref;
  const unsigned char *io_in;
  size_t io_in_len;
  double *io_out;
  size_t io_out_len;
  long last_at[7]; /* per string of an encoded answer, the cache index it had last */
  struct {
    int used;
    size_t n;
    char s[96];
  } cache[STR_CACHE];
} addon;

#define CHECK(call)                     \
  do {                                  \
    if ((call) != napi_ok) return NULL; \
  } while (0)

static napi_value get_ref(napi_env env, napi_ref r) {
  napi_value v = NULL;
  napi_get_reference_value(env, r, &v);
  return v;
}

static addon *addon_of(napi_env env) {
  addon *a = NULL;
  napi_get_instance_data(env, (void **)&a);
  return a;
}

/* ---- errors ---- */

static napi_value str_n(napi_env env, const char *s, size_t n) {
  napi_value v;
  if (napi_create_string_utf8(env, s, n, &v) != napi_ok) return NULL;
  return v;
}

static napi_value str_or_null(napi_env env, const char *s) {
  napi_value v;
  if (!s) {
    napi_get_null(env, &v);
    return v;
  }
  return str_n(env, s, strlen(s));
}

/* A VerdictError for err: message, code (vd_err_name), errno, path (null
 * when none), line, column. */
static napi_value make_error(napi_env env, const vd_error *err) {
  addon *a = addon_of(env);
  napi_value cls = a && a->error_class ? get_ref(env, a->error_class) : NULL;
  napi_value args[6];
  args[0] = str_or_null(env, err->message);
  args[1] = str_or_null(env, vd_err_name(err->code));
  args[2] = str_or_null(env, err->path[0] ? err->path : NULL);
  napi_create_int32(env, err->line, &args[3]);
  napi_create_int32(env, err->column, &args[4]);
  napi_create_int32(env, err->code, &args[5]);
  napi_value exc = NULL;
  if (cls) {
    napi_new_instance(env, cls, 6, args, &exc);
  } else {
    napi_create_error(env, NULL, args[0], &exc);
  }
  return exc;
}

/* Throws err; returns NULL for the caller to return. */
static napi_value throw_error(napi_env env, const vd_error *err) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) {
    napi_value exc = make_error(env, err);
    if (exc) napi_throw(env, exc);
  }
  return NULL;
}

static void own_error(vd_error *err, int code, const char *path, const char *fmt, va_list ap) {
  memset(err, 0, sizeof *err);
  err->code = code;
  snprintf(err->path, sizeof err->path, "%s", path ? path : "");
  vsnprintf(err->message, sizeof err->message, fmt, ap);
}

/* A VerdictError of the addon's own (a request it cannot convert), thrown. */
static napi_value throw_own(napi_env env, int code, const char *path, const char *fmt, ...) {
  vd_error err;
  va_list ap;
  va_start(ap, fmt);
  own_error(&err, code, path, fmt, ap);
  va_end(ap);
  return throw_error(env, &err);
}

/* ---- slots ---- */

typedef struct slot {
  vd_decision *d;
  vd_builder *b;
  char *text; /* the request's strings (action, key, candidates) or its JSON text */
  size_t cap, used;
  const char **cands;
  size_t ncands_cap;
  struct slot *next;
} slot;

static void slot_free(slot *s) {
  vd_decision_free(s->d);
  vd_builder_free(s->b);
  free(s->text);
  free(s->cands);
  free(s);
}

/* Room for n more bytes in s->text; offsets into it stay valid. */
static int slot_reserve(slot *s, size_t n) {
  if (s->used + n <= s->cap) return 0;
  size_t cap = s->cap ? s->cap : 256;
  while (cap < s->used + n) cap *= 2;
  char *t = realloc(s->text, cap);
  if (!t) return -1;
  s->text = t;
  s->cap = cap;
  return 0;
}

/* ---- reading JavaScript strings ---- */

/* v's UTF-8 text appended to s->text (NUL-terminated); its offset in *off and
 * its length in *len. 0, or -1 (not a string, or out of memory). */
static int slot_string(napi_env env, slot *s, napi_value v, size_t *off, size_t *len) {
  size_t room = s->cap - s->used;
  if (room < 64) {
    if (slot_reserve(s, 64)) return -1;
    room = s->cap - s->used;
  }
  size_t n = 0;
  if (napi_get_value_string_utf8(env, v, s->text + s->used, room, &n) != napi_ok) return -1;
  if (n + 1 >= room) { /* maybe cut short: ask for the length and read it again */
    if (napi_get_value_string_utf8(env, v, NULL, 0, &n) != napi_ok) return -1;
    if (slot_reserve(s, n + 1)) return -1;
    if (napi_get_value_string_utf8(env, v, s->text + s->used, n + 1, &n) != napi_ok) return -1;
  }
  *off = s->used;
  *len = n;
  s->used += n + 1;
  return 0;
}

/* ---- the object walk ---- */

typedef struct {
  napi_env env;
  slot *s;
  napi_value object_proto;
} walker;

static void context_path(vd_builder *b, char *out, size_t cap) {
  snprintf(out, cap, "$.context%.250s", vd_builder_path(b) + 1);
}

/* The builder refused an event: its error under $.context, thrown. */
static int builder_failed(walker *w) {
  vd_error err;
  vd_builder_error(w->s->b, &err);
  char path[300];
  snprintf(path, sizeof path, "$.context%.250s", err.path[0] ? err.path + 1 : "");
  const char *what = strchr(err.message, ':');
  throw_own(w->env, err.code, path, "%s%s", path, what ? what : ": refused");
  return -1;
}

static int refuse(walker *w, const char *what) {
  char path[300];
  context_path(w->s->b, path, sizeof path);
  throw_own(w->env, VD_EREQUEST, path,
            "%s: %s (a request holds numbers, bigints, booleans, null, strings, arrays and plain "
            "objects)",
            path, what);
  return -1;
}

static int walk_typed(walker *w, napi_value v, napi_valuetype t);

static int walk(walker *w, napi_value v) {
  napi_valuetype t;
  napi_typeof(w->env, v, &t);
  return walk_typed(w, v, t);
}

/* A string value or key, through the slot's text (reset after each). */
static int walk_str(walker *w, napi_value v, int key) {
  slot *s = w->s;
  size_t mark = s->used, off, n;
  if (slot_string(w->env, s, v, &off, &n)) return refuse(w, "a string that cannot be read");
  int rc = key ? vd_build_key(s->b, s->text + off, n) : vd_build_string(s->b, s->text + off, n);
  s->used = mark; /* the builder copied it */
  return rc ? builder_failed(w) : 0;
}

/* A number as its JSON text would read: an integral value below 1e21 is
 * written in digits (an int up to INT64_MAX, then an unsigned), else a
 * double. */
static int walk_number(walker *w, napi_value v) {
  double x;
  napi_get_value_double(w->env, v, &x);
  int rc;
  if (x == floor(x) && fabs(x) < 1e21) {
    if (x >= -9223372036854775808.0 && x < 9223372036854775808.0)
      rc = vd_build_int(w->s->b, (int64_t)x);
    else if (x > 0 && x < 18446744073709551616.0)
      rc = vd_build_uint(w->s->b, (uint64_t)x);
    else
      rc = vd_build_double(w->s->b, x);
  } else {
    rc = vd_build_double(w->s->b, x); /* NaN and the infinities: refused, with the place */
  }
  return rc ? builder_failed(w) : 0;
}

static int walk_bigint(walker *w, napi_value v) {
  int64_t i;
  uint64_t u;
  bool lossless = false;
  int rc;
  napi_get_value_bigint_int64(w->env, v, &i, &lossless);
  if (lossless) {
    rc = vd_build_int(w->s->b, i);
  } else {
    napi_get_value_bigint_uint64(w->env, v, &u, &lossless);
    if (!lossless) return refuse(w, "a bigint past 64 bits");
    rc = vd_build_uint(w->s->b, u);
  }
  return rc ? builder_failed(w) : 0;
}

static int walk_array(walker *w, napi_value v) {
  if (vd_build_list_begin(w->s->b)) return builder_failed(w);
  uint32_t n = 0;
  napi_get_array_length(w->env, v, &n);
  for (uint32_t i = 0; i < n; i++) {
    napi_value item;
    if (napi_get_element(w->env, v, i, &item) != napi_ok || walk(w, item)) return -1;
  }
  return vd_build_list_end(w->s->b) ? builder_failed(w) : 0;
}

/* A plain object's own enumerable string keys, in their order; members whose
 * value is undefined are left out, as JSON.stringify leaves them. */
static int walk_object(walker *w, napi_value v) {
  napi_env env = w->env;
  napi_value proto;
  bool plain = false;
  if (napi_get_prototype(env, v, &proto) != napi_ok) return -1;
  napi_valuetype pt;
  napi_typeof(env, proto, &pt);
  if (pt == napi_null) {
    plain = true;
  } else {
    napi_strict_equals(env, proto, w->object_proto, &plain);
  }
  if (!plain) {
    bool is = false;
    if (napi_is_date(env, v, &is) == napi_ok && is) return refuse(w, "a Date");
    if (napi_is_buffer(env, v, &is) == napi_ok && is) return refuse(w, "a Buffer");
    if (napi_is_typedarray(env, v, &is) == napi_ok && is) return refuse(w, "a typed array");
    return refuse(w, "an object that is not a plain object (a class instance, Map, Set...)");
  }
  /* for-in's keys (V8's enumeration cache): a plain object's own enumerable
   * string keys, since Object.prototype has none enumerable */
  napi_value keys;
  if (napi_get_property_names(env, v, &keys) != napi_ok) return -1;
  uint32_t n = 0;
  napi_get_array_length(env, keys, &n);
  if (vd_build_map_begin(w->s->b)) return builder_failed(w);
  for (uint32_t i = 0; i < n; i++) {
    napi_value k, val;
    napi_valuetype t;
    if (napi_get_element(env, keys, i, &k) != napi_ok) return -1;
    if (napi_get_property(env, v, k, &val) != napi_ok) return -1;
    napi_typeof(env, val, &t);
    if (t == napi_undefined) continue;
    if (walk_str(w, k, 1) || walk_typed(w, val, t)) return -1;
  }
  return vd_build_map_end(w->s->b) ? builder_failed(w) : 0;
}

static int walk_typed(walker *w, napi_value v, napi_valuetype t) {
  int rc;
  switch (t) {
    case napi_string:
      return walk_str(w, v, 0);
    case napi_number:
      return walk_number(w, v);
    case napi_boolean: {
      bool b;
      napi_get_value_bool(w->env, v, &b);
      rc = vd_build_bool(w->s->b, b);
      break;
    }
    case napi_null:
      rc = vd_build_null(w->s->b);
      break;
    case napi_bigint:
      return walk_bigint(w, v);
    case napi_object: {
      bool arr = false;
      napi_is_array(w->env, v, &arr);
      return arr ? walk_array(w, v) : walk_object(w, v);
    }
    case napi_undefined:
      return refuse(w, "undefined");
    case napi_function:
      return refuse(w, "a function");
    case napi_symbol:
      return refuse(w, "a symbol");
    default:
      return refuse(w, "a value of an unknown type");
  }
  return rc ? builder_failed(w) : 0;
}

/* ---- requests ---- */

/* A request read into a slot: offsets into s->text (-1: none). */
typedef struct {
  long action, key;
  size_t ncands;
  size_t cand_off[16];
  size_t *cand_more; /* past 16 */
  int built;         /* the context is in s->b */
  int json;          /* s->text holds JSON text of json_len bytes */
  size_t json_len;
} request;

static int request_string(napi_env env, slot *s, napi_value v, const char *path, const char *what,
                          size_t *off) {
  napi_valuetype t;
  napi_typeof(env, v, &t);
  if (t != napi_string) {
    throw_own(env, VD_EREQUEST, path, "%s must be a string (%s)", path, what);
    return -1;
  }
  size_t n;
  if (slot_string(env, s, v, off, &n)) {
    throw_own(env, VD_ENOMEM, path, "%s: out of memory", path);
    return -1;
  }
  if (strlen(s->text + *off) != n) {
    throw_own(env, VD_EREQUEST, path, "%s holds a NUL character", path);
    return -1;
  }
  return 0;
}

static int key_is(napi_env env, slot *s, napi_value k, const char **name) {
  size_t off, n;
  if (slot_string(env, s, k, &off, &n)) return -1;
  *name = s->text + off;
  return 0;
}

/* Reads an object request into s and q: its strings into s->text, its
 * context into s->b. 0, or -1 with an exception pending. */
static int read_request(napi_env env, addon *a, napi_value req, slot *s, request *q) {
  napi_value keys, context = NULL, cands = NULL;
  if (napi_get_all_property_names(env, req, napi_key_own_only,
                                  napi_key_enumerable | napi_key_skip_symbols,
                                  napi_key_numbers_to_strings, &keys) != napi_ok)
    return -1;
  uint32_t n = 0;
  napi_get_array_length(env, keys, &n);
  for (uint32_t i = 0; i < n; i++) {
    napi_value k, v;
    napi_valuetype t;
    if (napi_get_element(env, keys, i, &k) != napi_ok ||
        napi_get_property(env, req, k, &v) != napi_ok)
      return -1;
    napi_typeof(env, v, &t);
    if (t == napi_undefined) continue;
    size_t mark = s->used, off;
    const char *name;
    if (key_is(env, s, k, &name)) return -1;
    if (!strcmp(name, "action")) {
      s->used = mark;
      if (request_string(env, s, v, "$.action", "the decision point", &off)) return -1;
      q->action = (long)off;
    } else if (!strcmp(name, "key")) {
      s->used = mark;
      if (request_string(env, s, v, "$.key", "a routing or subject key", &off)) return -1;
      q->key = (long)off;
    } else if (!strcmp(name, "context")) {
      s->used = mark;
      bool arr = false;
      napi_is_array(env, v, &arr);
      if (t != napi_object || arr) {
        throw_own(env, VD_EREQUEST, "$.context",
                  "$.context must be an object (the fields rules read)");
        return -1;
      }
      context = v;
    } else if (!strcmp(name, "candidates")) {
      s->used = mark;
      bool arr = false;
      napi_is_array(env, v, &arr);
      if (!arr) {
        throw_own(env, VD_EREQUEST, "$.candidates",
                  "$.candidates must be an array of action names");
        return -1;
      }
      cands = v;
    } else {
      throw_own(env, VD_EREQUEST, "$",
                "unknown request key \"%.100s\" (a request has \"action\", \"candidates\", "
                "\"context\" and \"key\"; the fields rules read go in \"context\")",
                name);
      return -1;
    }
  }
  if (q->action < 0) {
    throw_own(env, VD_EREQUEST, "$.action",
              "the request has no $.action (the decision point to run)");
    return -1;
  }
  if (cands) {
    uint32_t m = 0;
    napi_get_array_length(env, cands, &m);
    if (m > 16 && !(q->cand_more = malloc((m - 16) * sizeof *q->cand_more))) {
      throw_own(env, VD_ENOMEM, "$.candidates", "out of memory");
      return -1;
    }
    for (uint32_t i = 0; i < m; i++) {
      char path[48];
      napi_value c;
      size_t off;
      snprintf(path, sizeof path, "$.candidates[%u]", i);
      if (napi_get_element(env, cands, i, &c) != napi_ok ||
          request_string(env, s, c, path, "an action name", &off))
        return -1;
      if (i < 16)
        q->cand_off[i] = off;
      else
        q->cand_more[i - 16] = off;
    }
    q->ncands = m;
  }
  vd_builder_reset(s->b);
  if (context) {
    walker w = {env, s, get_ref(env, a->object_proto)};
    if (walk(&w, context)) return -1;
    q->built = 1;
  }
  return 0;
}

/* Reads req (an object, or a JSON string) into s and q. */
static int take_request(napi_env env, addon *a, napi_value req, slot *s, request *q) {
  memset(q, 0, sizeof *q);
  q->action = q->key = -1;
  s->used = 0;
  napi_valuetype t;
  napi_typeof(env, req, &t);
  bool arr = false;
  if (t == napi_string) {
    size_t off, n;
    if (slot_string(env, s, req, &off, &n)) {
      throw_own(env, VD_ENOMEM, NULL, "out of memory reading the request");
      return -1;
    }
    q->json = 1;
    q->json_len = n;
    return 0;
  }
  if (t == napi_object) napi_is_array(env, req, &arr);
  if (t != napi_object || arr) {
    throw_own(env, VD_EINVAL, NULL, "decide takes an object, or a JSON string");
    return -1;
  }
  return read_request(env, a, req, s, q);
}

/* Decides q with s (any thread: it touches no JavaScript value). */
static int run_request(vd_engine *e, slot *s, request *q, vd_error *err) {
  if (q->json) return vd_decide_json(e, s->text, (long)q->json_len, s->d, err);
  if (q->ncands > s->ncands_cap) {
    const char **c = realloc(s->cands, q->ncands * sizeof *c);
    if (!c) {
      memset(err, 0, sizeof *err);
      err->code = VD_ENOMEM;
      snprintf(err->message, sizeof err->message, "out of memory");
      return VD_ENOMEM;
    }
    s->cands = c;
    s->ncands_cap = q->ncands;
  }
  for (size_t i = 0; i < q->ncands; i++)
    s->cands[i] = s->text + (i < 16 ? q->cand_off[i] : q->cand_more[i - 16]);
  vd_request r = {.action = s->text + q->action,
                  .candidates = q->ncands ? s->cands : NULL,
                  .ncandidates = q->ncands,
                  .key = q->key >= 0 ? s->text + q->key : NULL};
  return q->built ? vd_decide_built(e, &r, s->b, s->d, err) : vd_decide(e, &r, s->d, err);
}

/* ---- Decision objects ---- */

/* The fields of a decision, as plain C: read from a vd_decision (decide), or
 * copied out of it on the thread pool (decideAsync) before the engine may
 * close under it. */
typedef struct {
  const char *action, *source, *rule, *reason, *strategy, *policy_version, *model_version,
      *snapshot_id;
  const char *trace; /* the decision's JSON with "trace", or NULL */
  size_t trace_len;
  int allowed, review;
  double confidence, latency_us;
} fields;

static void fields_of(vd_decision *d, int trace, fields *f) {
  f->action = vd_decision_action(d);
  f->source = vd_decision_source(d);
  f->rule = vd_decision_rule(d);
  f->reason = vd_decision_reason(d);
  f->strategy = vd_decision_strategy(d);
  f->policy_version = vd_decision_policy_version(d);
  f->model_version = vd_decision_model_version(d);
  f->snapshot_id = vd_decision_snapshot_id(d);
  f->allowed = vd_decision_allowed(d);
  f->review = vd_decision_review(d);
  f->confidence = vd_decision_confidence(d);
  f->latency_us = vd_decision_latency_us(d);
  f->trace = NULL;
  f->trace_len = 0;
  if (trace && vd_decision_render(d, VD_JSON_TRACE, &f->trace, &f->trace_len)) f->trace = NULL;
}

static napi_value json_parse(napi_env env, const char *s, size_t n) {
  addon *a = addon_of(env);
  napi_value text = str_n(env, s, n), global, out = NULL;
  if (!text) return NULL;
  napi_get_global(env, &global);
  if (napi_call_function(env, global, get_ref(env, a->json_parse), 1, &text, &out) != napi_ok)
    return NULL;
  return out;
}

/* The strings of decisions repeat (actions, rules, reasons, versions): the
 * last ones made are kept by their bytes, here, and as JavaScript strings in
 * the array a->strings at the same index, so that a decision mostly reads a
 * string back instead of decoding a new one. Main thread only. */
static long cached_index(napi_env env, addon *a, const char *s) {
  if (!s) return -1;
  size_t n = strlen(s);
  if (n >= sizeof a->cache[0].s) return -2;
  /* the length, the first 16 bytes and the last 16: enough to tell apart
   * the few strings of a bundle (the full bytes are compared below) */
  uint32_t h = (2166136261u ^ (uint32_t)n) * 16777619u;
  for (size_t i = 0; i < n && i < 16; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  for (size_t i = n > 32 ? n - 16 : 16; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  /* open addressing over a few slots, so that two strings of one bundle
   * whose hashes meet do not keep replacing each other: the first free or
   * matching slot of the probe; when all are taken, the home slot */
  uint32_t home = h % STR_CACHE, at = home;
  for (uint32_t k = 0; k < STR_PROBES; k++) {
    uint32_t i = (home + k) % STR_CACHE;
    if (!a->cache[i].used) {
      at = i;
      break;
    }
    if (a->cache[i].n == n && memcmp(a->cache[i].s, s, n) == 0) return i;
  }
  napi_value v = str_n(env, s, n);
  if (!v || napi_set_element(env, get_ref(env, a->strings), at, v) != napi_ok) return -2;
  a->cache[at].used = 1;
  a->cache[at].n = n;
  memcpy(a->cache[at].s, s, n);
  return at;
}

/* cached_index for one of the answer's strings: the index that field had
 * the last time is tried first (a decision's strings mostly repeat the
 * previous one's), before the hash. */
static long cached_index_at(napi_env env, addon *a, const char *s, long *last) {
  if (!s) return -1;
  long at = *last;
  if (at >= 0) {
    size_t n = strlen(s);
    if (a->cache[at].used && a->cache[at].n == n && memcmp(a->cache[at].s, s, n) == 0) return at;
  }
  at = cached_index(env, a, s);
  if (at >= 0) *last = at;
  return at;
}

static napi_value cached_str(napi_env env, addon *a, const char *s) {
  long at = cached_index(env, a, s);
  napi_value v;
  if (at == -1) return str_or_null(env, NULL);
  if (at >= 0 && napi_get_element(env, get_ref(env, a->strings), (uint32_t)at, &v) == napi_ok)
    return v;
  return str_n(env, s, strlen(s));
}

/* A Decision (index.js) of f's fields: its constructor takes them in order. */
static napi_value make_decision(napi_env env, const fields *f) {
  addon *a = addon_of(env);
  napi_value v[13], obj;
  if (!a->decision_class) {
    napi_throw_error(env, NULL, "verdict: init(VerdictError, Decision) was not called");
    return NULL;
  }
  v[0] = cached_str(env, a, f->action);
  napi_get_boolean(env, f->allowed, &v[1]);
  napi_get_boolean(env, f->review, &v[2]);
  napi_create_double(env, f->confidence, &v[3]);
  v[4] = cached_str(env, a, f->source);
  v[5] = cached_str(env, a, f->rule);
  v[6] = cached_str(env, a, f->reason);
  v[7] = cached_str(env, a, f->strategy);
  v[8] = cached_str(env, a, f->policy_version);
  v[9] = cached_str(env, a, f->model_version);
  v[10] = str_or_null(env, f->snapshot_id); /* new every time */
  napi_create_double(env, f->latency_us, &v[11]);
  size_t n = 12;
  if (f->trace) {
    napi_value all = json_parse(env, f->trace, f->trace_len);
    if (!all || napi_get_named_property(env, all, "trace", &v[12]) != napi_ok) return NULL;
    n = 13;
  }
  for (size_t i = 0; i < n; i++)
    if (!v[i]) return NULL;
  CHECK(napi_new_instance(env, get_ref(env, a->decision_class), n, v, &obj));
  return obj;
}

/* ---- Engine ---- */

typedef struct {
  vd_engine *e;
  slot *free_slots; /* the main thread's */
  int closed;
  /* async decisions: pending counts those queued or running (main thread);
   * running those inside the engine now (under mu) */
  pthread_mutex_t mu;
  pthread_cond_t idle;
  int running, closing;
  /* the JavaScript objects that hold this struct (main thread): the Engine
   * and its own _decideEncoded, which finds it without napi_unwrap; freed
   * when both are gone */
  int holders;
} engine;

static void engine_close_now(engine *en) {
  if (en->closed) return;
  pthread_mutex_lock(&en->mu);
  en->closing = 1; /* async work not started yet is refused */
  while (en->running > 0) pthread_cond_wait(&en->idle, &en->mu);
  pthread_mutex_unlock(&en->mu);
  en->closed = 1;
  if (en->e) vd_engine_close(en->e); /* queued snapshots are written and synced */
  en->e = NULL;
  while (en->free_slots) {
    slot *s = en->free_slots;
    en->free_slots = s->next;
    slot_free(s);
  }
}

/* The Engine collected, or its _decideEncoded: the first closes it, the
 * last frees it (a _decideEncoded kept past its Engine says it is closed). */
static void engine_finalize(napi_env env, void *data, void *hint) {
  engine *en = data;
  engine_close_now(en);
  if (--en->holders > 0) return;
  pthread_mutex_destroy(&en->mu);
  pthread_cond_destroy(&en->idle);
  free(en);
}

static slot *take_slot(napi_env env, engine *en) {
  if (en->closed) {
    throw_own(env, VD_EINVAL, NULL, "the engine is closed");
    return NULL;
  }
  slot *s = en->free_slots;
  if (s) {
    en->free_slots = s->next;
    return s;
  }
  s = calloc(1, sizeof *s);
  if (!s || !(s->d = vd_decision_new()) || !(s->b = vd_builder_new())) {
    if (s) slot_free(s);
    throw_own(env, VD_ENOMEM, NULL, "out of memory");
    return NULL;
  }
  return s;
}

static void give_slot(engine *en, slot *s) {
  if (en->closed) {
    slot_free(s);
    return;
  }
  s->next = en->free_slots;
  en->free_slots = s;
}

/* The engine behind `this`, or NULL with an exception. */
static engine *this_engine(napi_env env, napi_callback_info info, size_t *argc, napi_value *argv,
                           napi_value *self) {
  napi_value me;
  if (napi_get_cb_info(env, info, argc, argv, &me, NULL) != napi_ok) return NULL;
  engine *en = NULL;
  if (napi_unwrap(env, me, (void **)&en) != napi_ok || !en) {
    throw_own(env, VD_EINVAL, NULL, "not an Engine");
    return NULL;
  }
  if (self) *self = me;
  return en;
}

/* An option's value, or NULL when it is absent or undefined. */
static napi_value option(napi_env env, napi_value opts, const char *name) {
  if (!opts) return NULL;
  bool has = false;
  napi_value v;
  napi_valuetype t;
  if (napi_has_named_property(env, opts, name, &has) != napi_ok || !has) return NULL;
  if (napi_get_named_property(env, opts, name, &v) != napi_ok) return NULL;
  napi_typeof(env, v, &t);
  return t == napi_undefined ? NULL : v;
}

/* A string option into a malloc'd copy (*out NULL when absent); false means
 * "none" when allow_false. 0, or -1 with an exception. */
static int string_option(napi_env env, napi_value opts, const char *name, int allow_false,
                         char **out, int *was_false) {
  *out = NULL;
  if (was_false) *was_false = 0;
  napi_value v = option(env, opts, name);
  if (!v) return 0;
  napi_valuetype t;
  napi_typeof(env, v, &t);
  if (t == napi_boolean && allow_false) {
    bool b;
    napi_get_value_bool(env, v, &b);
    if (!b) {
      if (was_false) *was_false = 1;
      return 0;
    }
  }
  if (t == napi_null) return 0;
  if (t != napi_string) {
    throw_own(env, VD_EINVAL, name, "the option %s must be a string%s", name,
              allow_false ? " (a folder) or false" : "");
    return -1;
  }
  size_t n;
  napi_get_value_string_utf8(env, v, NULL, 0, &n);
  if (!(*out = malloc(n + 1))) {
    throw_own(env, VD_ENOMEM, name, "out of memory");
    return -1;
  }
  napi_get_value_string_utf8(env, v, *out, n + 1, &n);
  return 0;
}

typedef struct {
  char *path, *snapshots, *state, *state_file, *node, *store, *durability;
} open_args;

static void open_args_free(open_args *o) {
  free(o->path);
  free(o->snapshots);
  free(o->state);
  free(o->state_file);
  free(o->node);
  free(o->store);
  free(o->durability);
}

/* new Engine(path, {snapshots, durability, state, stateFile, node,
 * maxRequestBytes, store}) */
static napi_value engine_decide_encoded(napi_env env, napi_callback_info info);

static napi_value engine_new(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2] = {NULL, NULL}, self, target;
  CHECK(napi_get_cb_info(env, info, &argc, argv, &self, NULL));
  CHECK(napi_get_new_target(env, info, &target));
  if (!target) return throw_own(env, VD_EINVAL, NULL, "Engine is a class: use new Engine(path)");
  napi_valuetype t = napi_undefined;
  if (argc >= 1) napi_typeof(env, argv[0], &t);
  if (t != napi_string)
    return throw_own(env, VD_EINVAL, "path",
                     "new Engine(path): path must be a string (the bundle's folder)");
  napi_value opts = NULL;
  if (argc >= 2) {
    napi_typeof(env, argv[1], &t);
    if (t == napi_object) {
      opts = argv[1];
    } else if (t != napi_undefined && t != napi_null) {
      return throw_own(env, VD_EINVAL, NULL,
                       "new Engine(path, options): options must be an object");
    }
  }
  open_args a = {0};
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  int store_off = 0;
  size_t n;
  napi_get_value_string_utf8(env, argv[0], NULL, 0, &n);
  if (!(a.path = malloc(n + 1))) return throw_own(env, VD_ENOMEM, NULL, "out of memory");
  napi_get_value_string_utf8(env, argv[0], a.path, n + 1, &n);
  if (string_option(env, opts, "snapshots", 1, &a.snapshots, NULL) ||
      string_option(env, opts, "store", 1, &a.store, &store_off) ||
      string_option(env, opts, "durability", 0, &a.durability, NULL) ||
      string_option(env, opts, "state", 0, &a.state, NULL) ||
      string_option(env, opts, "stateFile", 0, &a.state_file, NULL) ||
      string_option(env, opts, "node", 0, &a.node, NULL))
    goto fail;
  o.snapshots_dir = a.snapshots;
  o.store_dir = store_off ? "" : a.store;
  o.state_url = a.state;
  o.state_file = a.state_file;
  o.node = a.node;
  if (a.durability) {
    if (!strcmp(a.durability, "interval"))
      o.snapshot_durability = VD_DURABILITY_INTERVAL;
    else if (!strcmp(a.durability, "none"))
      o.snapshot_durability = VD_DURABILITY_NONE;
    else if (!strcmp(a.durability, "always"))
      o.snapshot_durability = VD_DURABILITY_ALWAYS;
    else {
      throw_own(env, VD_EINVAL, "durability",
                "durability must be \"interval\" (the default), \"none\" or \"always\"");
      goto fail;
    }
  }
  napi_value mrb = option(env, opts, "maxRequestBytes");
  if (mrb) {
    double x = -1;
    napi_typeof(env, mrb, &t);
    if (t == napi_number) napi_get_value_double(env, mrb, &x);
    if (!(x >= 0 && x == floor(x) && x < 1e15)) {
      throw_own(env, VD_EINVAL, "maxRequestBytes",
                "maxRequestBytes must be a whole number of bytes (0: the default, 1 MiB)");
      goto fail;
    }
    o.max_request_bytes = (size_t)x;
  }
  engine *en = calloc(1, sizeof *en);
  if (!en) {
    throw_own(env, VD_ENOMEM, NULL, "out of memory");
    goto fail;
  }
  vd_error err;
  if (vd_engine_open(a.path, &o, &en->e, &err) < 0) {
    free(en);
    throw_error(env, &err);
    goto fail;
  }
  open_args_free(&a);
  pthread_mutex_init(&en->mu, NULL);
  pthread_cond_init(&en->idle, NULL);
  en->holders = 1;
  if (napi_wrap(env, self, en, engine_finalize, NULL, NULL) != napi_ok) {
    engine_finalize(env, en, NULL);
    return NULL;
  }
  /* _decideEncoded as the engine's own function with en as its data: the
   * hot path then skips napi_unwrap (a private-property lookup) */
  napi_value fn;
  CHECK(napi_create_function(env, "_decideEncoded", NAPI_AUTO_LENGTH, engine_decide_encoded, en,
                             &fn));
  en->holders++;
  if (napi_add_finalizer(env, fn, en, engine_finalize, NULL, NULL) != napi_ok) {
    en->holders--;
    return NULL;
  }
  napi_property_descriptor own = {"_decideEncoded", NULL, NULL, NULL, NULL, fn, napi_default,
                                  NULL};
  CHECK(napi_define_properties(env, self, 1, &own));
  return self;
fail:
  open_args_free(&a);
  return NULL;
}

/* {trace: true} as the second argument. */
static int trace_option(napi_env env, size_t argc, napi_value *argv) {
  if (argc < 2) return 0;
  napi_valuetype t;
  napi_typeof(env, argv[1], &t);
  if (t != napi_object) return 0;
  napi_value v = option(env, argv[1], "trace");
  bool b = false;
  if (v) napi_coerce_to_bool(env, v, &v), napi_get_value_bool(env, v, &b);
  return b;
}

static void request_done(request *q) { free(q->cand_more); }

/* engine.decide(request, {trace}) */
static napi_value engine_decide(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  engine *en = this_engine(env, info, &argc, argv, NULL);
  if (!en) return NULL;
  if (argc < 1) return throw_own(env, VD_EINVAL, NULL, "decide(request): no request given");
  slot *s = take_slot(env, en);
  if (!s) return NULL;
  int trace = trace_option(env, argc, argv);
  vd_decision_set_trace(s->d, trace);
  request q;
  napi_value out = NULL;
  if (take_request(env, addon_of(env), argv[0], s, &q) == 0) {
    vd_error err;
    if (run_request(en->e, s, &q, &err)) {
      throw_error(env, &err);
    } else {
      fields f;
      fields_of(s->d, trace, &f);
      out = make_decision(env, &f);
    }
  }
  request_done(&q);
  give_slot(en, s);
  return out;
}

/* ---- decisions from encoded requests ----
 *
 * index.js walks an object request in JavaScript (where the JIT makes the
 * walk cheap; every Node-API call costs tens of nanoseconds) into a byte
 * buffer of builder events, and _decideEncoded replays them into the slot's
 * vd_builder: the same events the object walk above makes, in the same
 * order. Anything the encoder does not take (a bigint, a value the walk
 * refuses, a class instance...) goes to decide() instead, and so does any
 * event the builder refuses here (_decideEncoded returns undefined), so that
 * errors and their paths are decide()'s. A JSON string request comes the
 * same way (E_JSON, its text), for the answer's sake. Both the events'
 * buffer and the answer's Float64Array are registered once (setBuffers), so
 * that a decision costs one Node-API call with no arguments to read: the
 * answer comes back in that array (the strings as indexes into the cache
 * array, the numbers as they are); the call returns the snapshot id (or
 * null), or a Decision when the strings do not fit the cache. */

enum {
  E_NULL = 0,
  E_FALSE,
  E_TRUE,
  E_NUMBER,
  E_STRING,
  E_MAP,
  E_MAP_END,
  E_LIST,
  E_LIST_END,
  E_KEY,
  E_ACTION = 20,
  E_RKEY,
  E_CANDIDATE,
  E_CONTEXT,
  E_JSON = 30 /* the whole request as JSON text, alone */
};

typedef struct {
  const unsigned char *p, *end;
} cursor;

static int cur_str(cursor *c, const char **s, uint32_t *n, int nul) {
  if (c->end - c->p < 4) return -1;
  memcpy(n, c->p, 4);
  c->p += 4;
  if ((size_t)(c->end - c->p) < (size_t)*n + (nul ? 1 : 0)) return -1;
  *s = (const char *)c->p;
  c->p += *n + (nul ? 1 : 0);
  if (nul && (c->p[-1] != '\0' || memchr(*s, '\0', *n))) return -1;
  return 0;
}

/* One value's events (a whole map or list) into b. 0, or -1. */
static int replay_value(cursor *c, vd_builder *b) {
  int depth = 0;
  do {
    if (c->p >= c->end) return -1;
    int tag = *c->p++, rc;
    const char *s;
    uint32_t n;
    switch (tag) {
      case E_NULL:
        rc = vd_build_null(b);
        break;
      case E_FALSE:
        rc = vd_build_bool(b, 0);
        break;
      case E_TRUE:
        rc = vd_build_bool(b, 1);
        break;
      case E_NUMBER: {
        double x;
        if (c->end - c->p < 8) return -1;
        memcpy(&x, c->p, 8);
        c->p += 8;
        if (x == floor(x) && fabs(x) < 1e21) { /* as walk_number */
          if (x >= -9223372036854775808.0 && x < 9223372036854775808.0)
            rc = vd_build_int(b, (int64_t)x);
          else if (x > 0 && x < 18446744073709551616.0)
            rc = vd_build_uint(b, (uint64_t)x);
          else
            rc = vd_build_double(b, x);
        } else {
          rc = vd_build_double(b, x);
        }
        break;
      }
      case E_STRING:
        if (cur_str(c, &s, &n, 0)) return -1;
        rc = vd_build_string(b, s, n);
        break;
      case E_KEY:
        if (cur_str(c, &s, &n, 0)) return -1;
        rc = vd_build_key(b, s, n);
        break;
      case E_MAP:
        rc = vd_build_map_begin(b), depth++;
        break;
      case E_LIST:
        rc = vd_build_list_begin(b), depth++;
        break;
      case E_MAP_END:
        rc = vd_build_map_end(b), depth--;
        break;
      case E_LIST_END:
        rc = vd_build_list_end(b), depth--;
        break;
      default:
        return -1;
    }
    if (rc) return -1;
  } while (depth > 0);
  return 0;
}

/* engine._decideEncoded(): the events are the first out[0] bytes of the
 * buffer setBuffers registered, out[1] is 1 for a trace; the answer goes
 * to the registered answer array. */
static napi_value engine_decide_encoded(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  napi_value undef;
  engine *en = NULL;
  napi_get_undefined(env, &undef);
  if (napi_get_cb_info(env, info, &argc, NULL, NULL, (void **)&en) != napi_ok || !en) return NULL;
  addon *a = addon_of(env);
  if (!a->io_in || !a->io_out || a->io_out_len < 11 || !(a->io_out[0] >= 0) ||
      a->io_out[0] > (double)a->io_in_len)
    return throw_own(env, VD_EINVAL, NULL, "_decideEncoded: setBuffers(bytes, out) first");
  const unsigned char *data = a->io_in;
  size_t used = (size_t)a->io_out[0];
  bool trace = a->io_out[1] == 1;
  slot *s = take_slot(env, en);
  if (!s) return NULL;
  vd_decision_set_trace(s->d, trace);
  vd_builder_reset(s->b);
  cursor c = {data, data + used};
  vd_request r;
  memset(&r, 0, sizeof r);
  size_t ncands = 0;
  int built = 0, bad = 0, rc;
  vd_error err;
  if (c.p < c.end && *c.p == E_JSON) {
    const char *text;
    uint32_t n;
    c.p++;
    if (cur_str(&c, &text, &n, 0) || c.p != c.end) {
      give_slot(en, s);
      return undef;
    }
    rc = vd_decide_json(en->e, text, (long)n, s->d, &err);
    goto answer;
  }
  while (!bad && c.p < c.end) {
    int tag = *c.p++;
    const char *str;
    uint32_t n;
    if (tag == E_ACTION || tag == E_RKEY || tag == E_CANDIDATE) {
      if (cur_str(&c, &str, &n, 1)) {
        bad = 1;
      } else if (tag == E_ACTION) {
        r.action = str;
      } else if (tag == E_RKEY) {
        r.key = str;
      } else {
        if (ncands >= s->ncands_cap) {
          size_t cap = s->ncands_cap ? s->ncands_cap * 2 : 16;
          const char **m = realloc(s->cands, cap * sizeof *m);
          if (!m) {
            bad = 1;
            break;
          }
          s->cands = m;
          s->ncands_cap = cap;
        }
        s->cands[ncands++] = str;
      }
    } else if (tag == E_CONTEXT && !built) {
      built = 1;
      if (replay_value(&c, s->b)) bad = 1;
    } else {
      bad = 1;
    }
  }
  if (bad || !r.action) { /* decide() says what is wrong, with its place */
    give_slot(en, s);
    return undef;
  }
  r.candidates = ncands ? s->cands : NULL;
  r.ncandidates = ncands;
  rc = built ? vd_decide_built(en->e, &r, s->b, s->d, &err) : vd_decide(en->e, &r, s->d, &err);
answer:;
  napi_value ret = NULL;
  if (rc) {
    throw_error(env, &err);
  } else {
    fields f;
    fields_of(s->d, trace, &f);
    double *out = a->io_out;
    const char *str[7] = {f.action,   f.source,         f.rule,         f.reason,
                          f.strategy, f.policy_version, f.model_version};
    long at[7];
    int fits = !f.trace;
    for (int i = 0; fits && i < 7; i++) {
      at[i] = cached_index_at(env, a, str[i], &a->last_at[i]);
      if (at[i] == -2) fits = 0;
      for (int j = 0; fits && j < i; j++) /* two at one index: the later replaced the earlier */
        if (at[j] == at[i] && at[i] >= 0 && strcmp(str[i], str[j]) != 0) fits = 0;
    }
    if (fits) {
      for (int i = 0; i < 7; i++) out[i] = (double)at[i];
      out[7] = f.allowed;
      out[8] = f.review;
      out[9] = f.confidence;
      out[10] = f.latency_us;
      ret = str_or_null(env, f.snapshot_id);
    } else {
      ret = make_decision(env, &f);
    }
  }
  give_slot(en, s);
  return ret;
}

/* ---- decideAsync ---- */

typedef struct {
  engine *en;
  slot *s;
  request q;
  int trace, rc;
  vd_error err;
  fields f;
  char *copy; /* the fields' strings, copied off the decision */
  napi_deferred deferred;
  napi_async_work work;
  napi_ref self; /* keeps the engine object alive meanwhile */
} job;

static const char *copy_into(char **p, const char *s, size_t n) {
  if (!s) return NULL;
  char *at = *p;
  memcpy(at, s, n);
  at[n] = '\0';
  *p += n + 1;
  return at;
}

/* The decision's strings copied into one block, so that the answer can be
 * built after the engine (and the strategy its strings live in) closed. */
static int copy_fields(job *j) {
  fields *f = &j->f;
  const char **str[] = {&f->action,   &f->source,         &f->rule,          &f->reason,
                        &f->strategy, &f->policy_version, &f->model_version, &f->snapshot_id};
  size_t len[8], total = f->trace ? f->trace_len + 1 : 0;
  for (size_t i = 0; i < 8; i++) total += (len[i] = *str[i] ? strlen(*str[i]) : 0) + 1;
  char *p = j->copy = malloc(total);
  if (!p) return -1;
  for (size_t i = 0; i < 8; i++) *str[i] = copy_into(&p, *str[i], len[i]);
  if (f->trace) f->trace = copy_into(&p, f->trace, f->trace_len);
  return 0;
}

static void job_execute(napi_env env, void *data) {
  job *j = data;
  engine *en = j->en;
  pthread_mutex_lock(&en->mu);
  int refused = en->closing;
  if (!refused) en->running++;
  pthread_mutex_unlock(&en->mu);
  if (refused) {
    memset(&j->err, 0, sizeof j->err);
    j->rc = j->err.code = VD_EINVAL;
    snprintf(j->err.message, sizeof j->err.message, "the engine is closed");
    return;
  }
  j->rc = run_request(en->e, j->s, &j->q, &j->err);
  if (j->rc == 0) {
    fields_of(j->s->d, j->trace, &j->f);
    if (copy_fields(j)) {
      memset(&j->err, 0, sizeof j->err);
      j->rc = j->err.code = VD_ENOMEM;
      snprintf(j->err.message, sizeof j->err.message, "out of memory");
    }
  }
  pthread_mutex_lock(&en->mu);
  if (--en->running == 0) pthread_cond_broadcast(&en->idle);
  pthread_mutex_unlock(&en->mu);
}

static void job_complete(napi_env env, napi_status status, void *data) {
  job *j = data;
  if (status == napi_cancelled && j->rc == 0) {
    memset(&j->err, 0, sizeof j->err);
    j->rc = j->err.code = VD_EINVAL;
    snprintf(j->err.message, sizeof j->err.message, "the decision was cancelled");
  }
  if (j->rc) {
    napi_value e = make_error(env, &j->err);
    if (e) napi_reject_deferred(env, j->deferred, e);
  } else {
    napi_value d = make_decision(env, &j->f);
    if (d) {
      napi_resolve_deferred(env, j->deferred, d);
    } else { /* the answer could not be built: reject with what was thrown */
      napi_value e = NULL;
      bool pending = false;
      napi_is_exception_pending(env, &pending);
      if (pending) napi_get_and_clear_last_exception(env, &e);
      if (!e) napi_get_undefined(env, &e);
      napi_reject_deferred(env, j->deferred, e);
    }
  }
  request_done(&j->q);
  give_slot(j->en, j->s);
  napi_delete_async_work(env, j->work);
  napi_delete_reference(env, j->self);
  free(j->copy);
  free(j);
}

/* engine.decideAsync(request, {trace}): a Promise of the decision. */
static napi_value engine_decide_async(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], self, promise, name;
  engine *en = this_engine(env, info, &argc, argv, &self);
  if (!en) return NULL;
  if (argc < 1) return throw_own(env, VD_EINVAL, NULL, "decideAsync(request): no request given");
  slot *s = take_slot(env, en);
  if (!s) return NULL;
  job *j = calloc(1, sizeof *j);
  if (!j) {
    give_slot(en, s);
    return throw_own(env, VD_ENOMEM, NULL, "out of memory");
  }
  j->en = en;
  j->s = s;
  j->trace = trace_option(env, argc, argv);
  vd_decision_set_trace(s->d, j->trace);
  if (take_request(env, addon_of(env), argv[0], s, &j->q)) {
    request_done(&j->q);
    give_slot(en, s);
    free(j);
    return NULL;
  }
  if (napi_create_promise(env, &j->deferred, &promise) != napi_ok ||
      napi_create_reference(env, self, 1, &j->self) != napi_ok ||
      napi_create_string_utf8(env, "verdict.decide", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_async_work(env, NULL, name, job_execute, job_complete, j, &j->work) != napi_ok ||
      napi_queue_async_work(env, j->work) != napi_ok) {
    /* a promise made is left pending only if queueing itself fails */
    request_done(&j->q);
    give_slot(en, s);
    free(j);
    return throw_own(env, VD_ENOMEM, NULL, "the decision could not be queued");
  }
  return promise;
}

static napi_value version_of(napi_env env, engine *en) {
  char v[65];
  return str_or_null(env, vd_engine_policy_version(en->e, v));
}

/* engine.reload(): the new bundle's version. */
static napi_value engine_reload(napi_env env, napi_callback_info info) {
  engine *en = this_engine(env, info, NULL, NULL, NULL);
  if (!en) return NULL;
  if (en->closed) return throw_own(env, VD_EINVAL, NULL, "the engine is closed");
  vd_error err;
  if (vd_engine_reload(en->e, &err)) return throw_error(env, &err);
  return version_of(env, en);
}

static napi_value engine_close(napi_env env, napi_callback_info info) {
  engine *en = this_engine(env, info, NULL, NULL, NULL);
  if (!en) return NULL;
  engine_close_now(en);
  napi_value u;
  napi_get_undefined(env, &u);
  return u;
}

static napi_value engine_policy_version(napi_env env, napi_callback_info info) {
  engine *en = this_engine(env, info, NULL, NULL, NULL);
  if (!en) return NULL;
  if (en->closed) return str_or_null(env, NULL);
  return version_of(env, en);
}

static napi_value engine_closed(napi_env env, napi_callback_info info) {
  engine *en = this_engine(env, info, NULL, NULL, NULL);
  if (!en) return NULL;
  napi_value b;
  napi_get_boolean(env, en->closed, &b);
  return b;
}

static napi_value engine_stats(napi_env env, napi_callback_info info) {
  engine *en = this_engine(env, info, NULL, NULL, NULL);
  if (!en) return NULL;
  if (en->closed) return throw_own(env, VD_EINVAL, NULL, "the engine is closed");
  vd_engine_counters c;
  vd_engine_stats(en->e, &c);
  napi_value o, v;
  CHECK(napi_create_object(env, &o));
  const struct {
    const char *name;
    unsigned long long n;
  } rows[] = {{"snapshotsAppended", c.snapshots_appended},
              {"snapshotsWritten", c.snapshots_written},
              {"snapshotsDropped", c.snapshots_dropped},
              {"snapshotsFailed", c.snapshots_failed},
              {"snapshotsRefused", c.snapshots_refused},
              {"snapshotsOn", (unsigned long long)c.snapshots_on}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    CHECK(napi_create_double(env, (double)rows[i].n, &v));
    CHECK(napi_set_named_property(env, o, rows[i].name, v));
  }
  return o;
}

/* ---- evaluate ---- */

/* evaluate(expr, bindings): the value of a CEL expression over an object's
 * variables (through JSON, both ways, as verdict's eval speaks it). */
static napi_value verdict_evaluate(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2] = {NULL, NULL};
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  napi_valuetype t = napi_undefined;
  if (argc >= 1) napi_typeof(env, argv[0], &t);
  if (t != napi_string)
    return throw_own(env, VD_EINVAL, "expr", "evaluate(expr, bindings): expr must be a string");
  size_t n;
  napi_get_value_string_utf8(env, argv[0], NULL, 0, &n);
  char *src = malloc(n + 1), *json = NULL;
  if (!src) return throw_own(env, VD_ENOMEM, NULL, "out of memory");
  napi_get_value_string_utf8(env, argv[0], src, n + 1, &n);
  if (argc >= 2) {
    napi_typeof(env, argv[1], &t);
    bool arr = false;
    if (t == napi_object) napi_is_array(env, argv[1], &arr);
    if (t == napi_object && !arr) {
      addon *a = addon_of(env);
      napi_value global, text;
      size_t m;
      napi_get_global(env, &global);
      if (napi_call_function(env, global, get_ref(env, a->json_stringify), 1, &argv[1], &text) !=
              napi_ok ||
          napi_get_value_string_utf8(env, text, NULL, 0, &m) != napi_ok ||
          !(json = malloc(m + 1))) {
        free(src);
        return NULL;
      }
      napi_get_value_string_utf8(env, text, json, m + 1, &m);
    } else if (t != napi_undefined && t != napi_null) {
      free(src);
      return throw_own(env, VD_EINVAL, "bindings",
                       "evaluate(expr, bindings): bindings must be an object");
    }
  }
  vd_expr *e = NULL;
  vd_error err;
  char *out = NULL;
  int rc = vd_expr_compile(src, (long)n, &e, &err);
  if (rc == 0) rc = vd_expr_eval_json(e, json, -1, &out, &err);
  vd_expr_free(e);
  free(src);
  free(json);
  if (rc) return throw_error(env, &err);
  napi_value v = json_parse(env, out, strlen(out));
  vd_free(out);
  return v;
}

/* ---- the module ---- */

/* init(VerdictError, Decision): the classes errors and decisions are made of. */
/* setBuffers(bytes, out): the Uint8Array index.js encodes requests into and
 * the Float64Array (11 numbers at least) the answers come back in, for every
 * later _decideEncoded; called again when index.js grows its buffer. */
static napi_value verdict_set_buffers(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  void *in = NULL, *out = NULL;
  size_t in_len = 0, out_len = 0;
  napi_typedarray_type t0, t1;
  addon *a = addon_of(env);
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 2 || napi_get_typedarray_info(env, argv[0], &t0, &in_len, &in, NULL, NULL) != napi_ok ||
      t0 != napi_uint8_array ||
      napi_get_typedarray_info(env, argv[1], &t1, &out_len, &out, NULL, NULL) != napi_ok ||
      t1 != napi_float64_array || out_len < 11)
    return throw_own(env, VD_EINVAL, NULL, "setBuffers(Uint8Array, Float64Array of 11)");
  napi_ref rin, rout;
  CHECK(napi_create_reference(env, argv[0], 1, &rin));
  if (napi_create_reference(env, argv[1], 1, &rout) != napi_ok) {
    napi_delete_reference(env, rin);
    return NULL;
  }
  if (a->io_in_ref) napi_delete_reference(env, a->io_in_ref);
  if (a->io_out_ref) napi_delete_reference(env, a->io_out_ref);
  a->io_in_ref = rin;
  a->io_out_ref = rout;
  a->io_in = in;
  a->io_in_len = in_len;
  a->io_out = out;
  a->io_out_len = out_len;
  return NULL;
}

static napi_value verdict_init(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value cls[2] = {NULL, NULL};
  CHECK(napi_get_cb_info(env, info, &argc, cls, NULL, NULL));
  napi_valuetype t0 = napi_undefined, t1 = napi_undefined;
  if (argc == 2) napi_typeof(env, cls[0], &t0), napi_typeof(env, cls[1], &t1);
  if (t0 != napi_function || t1 != napi_function) {
    napi_throw_type_error(env, NULL, "init(VerdictError, Decision) takes two classes");
    return NULL;
  }
  addon *a = addon_of(env);
  if (a->error_class) napi_delete_reference(env, a->error_class);
  if (a->decision_class) napi_delete_reference(env, a->decision_class);
  a->error_class = a->decision_class = NULL;
  CHECK(napi_create_reference(env, cls[0], 1, &a->error_class));
  CHECK(napi_create_reference(env, cls[1], 1, &a->decision_class));
  return NULL;
}

static void addon_free(napi_env env, void *data, void *hint) {
  addon *a = data;
  napi_ref refs[] = {a->error_class,    a->engine_class,   a->object_proto, a->json_parse,
                     a->json_stringify, a->decision_class, a->strings,
                     a->io_in_ref,      a->io_out_ref};
  for (size_t i = 0; i < sizeof refs / sizeof *refs; i++)
    if (refs[i]) napi_delete_reference(env, refs[i]);
  free(a);
}

static napi_value ref_to(napi_env env, napi_value from, const char *name, napi_ref *out) {
  napi_value v;
  CHECK(napi_get_named_property(env, from, name, &v));
  CHECK(napi_create_reference(env, v, 1, out));
  return v;
}

NAPI_MODULE_INIT() {
  addon *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  if (napi_set_instance_data(env, a, addon_free, NULL) != napi_ok) {
    free(a);
    return NULL;
  }
  napi_value global, json, object, strings, cls;
  CHECK(napi_get_global(env, &global));
  CHECK(napi_get_named_property(env, global, "JSON", &json));
  if (!ref_to(env, json, "parse", &a->json_parse) ||
      !ref_to(env, json, "stringify", &a->json_stringify))
    return NULL;
  CHECK(napi_get_named_property(env, global, "Object", &object));
  if (!ref_to(env, object, "prototype", &a->object_proto)) return NULL;
  for (int i = 0; i < 7; i++) a->last_at[i] = -1;
  CHECK(napi_create_array_with_length(env, STR_CACHE, &strings));
  CHECK(napi_create_reference(env, strings, 1, &a->strings));

  napi_property_descriptor methods[] = {
      {"decide", NULL, engine_decide, NULL, NULL, NULL, napi_default_method, NULL},
      {"decideAsync", NULL, engine_decide_async, NULL, NULL, NULL, napi_default_method, NULL},
      {"reload", NULL, engine_reload, NULL, NULL, NULL, napi_default_method, NULL},
      {"close", NULL, engine_close, NULL, NULL, NULL, napi_default_method, NULL},
      {"stats", NULL, engine_stats, NULL, NULL, NULL, napi_default_method, NULL},
      {"policyVersion", NULL, NULL, engine_policy_version, NULL, NULL, napi_configurable, NULL},
      {"closed", NULL, NULL, engine_closed, NULL, NULL, napi_configurable, NULL},
  };
  CHECK(napi_define_class(env, "Engine", NAPI_AUTO_LENGTH, engine_new, NULL,
                          sizeof methods / sizeof *methods, methods, &cls));
  CHECK(napi_create_reference(env, cls, 1, &a->engine_class));

  napi_value init_fn, eval_fn, version, buffers_fn;
  CHECK(napi_create_function(env, "init", NAPI_AUTO_LENGTH, verdict_init, NULL, &init_fn));
  CHECK(napi_create_function(env, "setBuffers", NAPI_AUTO_LENGTH, verdict_set_buffers, NULL,
                             &buffers_fn));
  CHECK(napi_create_function(env, "evaluate", NAPI_AUTO_LENGTH, verdict_evaluate, NULL, &eval_fn));
  CHECK(napi_create_string_utf8(env, vd_version(), NAPI_AUTO_LENGTH, &version));
  napi_property_descriptor props[] = {
      {"Engine", NULL, NULL, NULL, NULL, cls, napi_enumerable, NULL},
      {"strings", NULL, NULL, NULL, NULL, strings, napi_default, NULL},
      {"setBuffers", NULL, NULL, NULL, NULL, buffers_fn, napi_default, NULL},
      {"init", NULL, NULL, NULL, NULL, init_fn, napi_enumerable, NULL},
      {"evaluate", NULL, NULL, NULL, NULL, eval_fn, napi_enumerable, NULL},
      {"version", NULL, NULL, NULL, NULL, version, napi_enumerable, NULL},
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof *props, props));
  return exports;
}
