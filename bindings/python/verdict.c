/* verdict.c — the CPython extension module `verdict`: the decision engine in
 * the caller's own process (docs/bindings.md, "Python").
 *
 *   import verdict
 *   with verdict.Engine("policies", snapshots="snaps") as engine:
 *       d = engine.decide({"action": "http_request", "context": {"path": "/"}})
 *       print(d.action, d.rule, d.snapshot_id)
 *
 * A dict request is walked straight into vd_builder events (no JSON text in
 * between); a str or bytes request goes to vd_decide_json. The GIL is held
 * while the dict is walked (it reads Python objects) and released while the
 * engine decides, reloads and closes, so one engine serves many threads.
 * Each call takes a (vd_decision, vd_builder) pair from a small per-engine
 * pool: the pool is touched only with the GIL held, so it needs no lock of
 * its own, and a thread never shares a pair with another while it decides.
 *
 * libverdict is linked in as its static archive (setup.py): the module then
 * carries one copy of the engine, needs no libverdict.so at run time, and
 * cannot pick up another version of it on the loader's path. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <string.h>

#include "verdict.h"

static PyObject *VerdictError; /* verdict.Error */
static PyObject *json_loads;   /* json.loads, for traces and eval results */
static PyObject *json_dumps;   /* json.dumps, for eval bindings */

/* ---- errors ---- */

/* Raises verdict.Error from err, with .code (vd_err_name), .errno (the VD_E*
 * number), .message, .path, .line and .column. Returns NULL. */
static PyObject *raise_error(const vd_error *err) {
  PyObject *msg = PyUnicode_DecodeUTF8(err->message, (Py_ssize_t)strlen(err->message), "replace");
  PyObject *exc = msg ? PyObject_CallOneArg(VerdictError, msg) : NULL;
  if (exc) {
    PyObject *code = PyUnicode_FromString(vd_err_name(err->code));
    PyObject *num = PyLong_FromLong(err->code);
    PyObject *path = err->path[0]
                         ? PyUnicode_DecodeUTF8(err->path, (Py_ssize_t)strlen(err->path), "replace")
                         : (Py_INCREF(Py_None), Py_None);
    PyObject *line = PyLong_FromLong(err->line), *col = PyLong_FromLong(err->column);
    if (code && num && path && line && col) {
      PyObject_SetAttrString(exc, "code", code);
      PyObject_SetAttrString(exc, "errno", num);
      PyObject_SetAttrString(exc, "message", msg);
      PyObject_SetAttrString(exc, "path", path);
      PyObject_SetAttrString(exc, "line", line);
      PyObject_SetAttrString(exc, "column", col);
      PyErr_SetObject(VerdictError, exc);
    }
    Py_XDECREF(code);
    Py_XDECREF(num);
    Py_XDECREF(path);
    Py_XDECREF(line);
    Py_XDECREF(col);
    Py_DECREF(exc);
  }
  Py_XDECREF(msg);
  return NULL;
}

/* A vd_error of the binding's own (a request it cannot convert), raised. */
static PyObject *raise_own(int code, const char *path, const char *fmt, ...) {
  vd_error err;
  memset(&err, 0, sizeof err);
  err.code = code;
  snprintf(err.path, sizeof err.path, "%s", path ? path : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err.message, sizeof err.message, fmt, ap);
  va_end(ap);
  return raise_error(&err);
}

/* ---- the dict walk ---- */

/* "$.context" and the builder's place after its "$". */
static void context_path(vd_builder *b, char *out, size_t cap) {
  snprintf(out, cap, "$.context%.250s", vd_builder_path(b) + 1);
}

/* The builder refused an event: its error under $.context. */
static int builder_failed(vd_builder *b) {
  vd_error err;
  vd_builder_error(b, &err);
  char path[300];
  snprintf(path, sizeof path, "$.context%.250s", err.path[0] ? err.path + 1 : "");
  const char *what = strchr(err.message, ':');
  raise_own(err.code, path, "%s%s", path, what ? what : ": refused");
  return -1;
}

static int walk(vd_builder *b, PyObject *o);

static int walk_str(vd_builder *b, PyObject *o, int key) {
  Py_ssize_t n;
  const char *s = PyUnicode_AsUTF8AndSize(o, &n);
  if (!s) { /* a lone surrogate: not UTF-8 */
    PyErr_Clear();
    char path[300];
    context_path(b, path, sizeof path);
    raise_own(VD_EREQUEST, path, "%s: the %s is not valid UTF-8 (it holds a lone surrogate)", path,
              key ? "key" : "string");
    return -1;
  }
  int rc = key ? vd_build_key(b, s, (size_t)n) : vd_build_string(b, s, (size_t)n);
  return rc ? builder_failed(b) : 0;
}

static int walk_int(vd_builder *b, PyObject *o) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  int rc;
  if (v == -1 && PyErr_Occurred()) return -1;
  if (!overflow) {
    rc = vd_build_int(b, (int64_t)v);
  } else {
    unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(o) : 0;
    if (overflow > 0 && !PyErr_Occurred()) {
      rc = vd_build_uint(b, (uint64_t)u);
    } else {
      /* past 64 bits the JSON text of the number reads as a double */
      PyErr_Clear();
      double d = PyLong_AsDouble(o);
      if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        char path[300];
        context_path(b, path, sizeof path);
        raise_own(VD_EREQUEST, path, "%s: the integer is too large for a number", path);
        return -1;
      }
      rc = vd_build_double(b, d);
    }
  }
  return rc ? builder_failed(b) : 0;
}

static int walk_seq(vd_builder *b, PyObject *o) {
  if (vd_build_list_begin(b)) return builder_failed(b);
  Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  PyObject **items = PySequence_Fast_ITEMS(o);
  for (Py_ssize_t i = 0; i < n; i++)
    if (walk(b, items[i])) return -1;
  return vd_build_list_end(b) ? builder_failed(b) : 0;
}

static int walk_dict(vd_builder *b, PyObject *o) {
  if (vd_build_map_begin(b)) return builder_failed(b);
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(o, &pos, &k, &v)) {
    if (!PyUnicode_Check(k)) {
      char path[300];
      context_path(b, path, sizeof path);
      raise_own(VD_EREQUEST, path, "%s: a key of type %s (the keys of a request's maps are str)",
                path, Py_TYPE(k)->tp_name);
      return -1;
    }
    if (walk_str(b, k, 1) || walk(b, v)) return -1;
  }
  return vd_build_map_end(b) ? builder_failed(b) : 0;
}

static int walk(vd_builder *b, PyObject *o) {
  int rc;
  if (o == Py_None) {
    rc = vd_build_null(b);
  } else if (PyBool_Check(o)) { /* before int: bool is an int */
    rc = vd_build_bool(b, o == Py_True);
  } else if (PyLong_Check(o)) {
    return walk_int(b, o);
  } else if (PyFloat_Check(o)) {
    rc = vd_build_double(b, PyFloat_AS_DOUBLE(o));
  } else if (PyUnicode_Check(o)) {
    return walk_str(b, o, 0);
  } else if (PyDict_Check(o)) {
    if (Py_EnterRecursiveCall(" walking a request")) return -1;
    rc = walk_dict(b, o);
    Py_LeaveRecursiveCall();
    return rc;
  } else if (PyList_Check(o) || PyTuple_Check(o)) {
    if (Py_EnterRecursiveCall(" walking a request")) return -1;
    rc = walk_seq(b, o);
    Py_LeaveRecursiveCall();
    return rc;
  } else {
    char path[300];
    context_path(b, path, sizeof path);
    raise_own(VD_EREQUEST, path,
              "%s: a value of type %s (a request holds int, float, bool, None, str, list, "
              "tuple and dict)",
              path, Py_TYPE(o)->tp_name);
    return -1;
  }
  return rc ? builder_failed(b) : 0;
}

/* ---- Decision ---- */

typedef struct {
  PyObject_HEAD PyObject *action, *allowed, *review, *confidence, *source, *rule, *reason,
      *strategy, *policy_version, *model_version, *snapshot_id, *latency_us, *trace;
} Decision;

static PyMemberDef decision_members[] = {
    {"action", T_OBJECT, offsetof(Decision, action), READONLY, "the action (None: none)"},
    {"allowed", T_OBJECT, offsetof(Decision, allowed), READONLY, "whether the action allows"},
    {"review", T_OBJECT, offsetof(Decision, review), READONLY, "whether it asks for a review"},
    {"confidence", T_OBJECT, offsetof(Decision, confidence), READONLY, "0.0 to 1.0"},
    {"source", T_OBJECT, offsetof(Decision, source), READONLY, "rule, model, default or error"},
    {"rule", T_OBJECT, offsetof(Decision, rule), READONLY, "the deciding rule, or None"},
    {"reason", T_OBJECT, offsetof(Decision, reason), READONLY, "the reason for people, or None"},
    {"strategy", T_OBJECT, offsetof(Decision, strategy), READONLY, "the strategy's name"},
    {"policy_version", T_OBJECT, offsetof(Decision, policy_version), READONLY,
     "the strategy's version (SHA-256)"},
    {"model_version", T_OBJECT, offsetof(Decision, model_version), READONLY,
     "the model's version when the decision ran it, else None"},
    {"snapshot_id", T_OBJECT, offsetof(Decision, snapshot_id), READONLY,
     "the id of its snapshot, or None"},
    {"latency_us", T_OBJECT, offsetof(Decision, latency_us), READONLY, "microseconds deciding"},
    {"trace", T_OBJECT, offsetof(Decision, trace), READONLY,
     "the trace (a dict) when decide(..., trace=True), else None"},
    {NULL}};

static const char *const decision_fields[] = {
    "action",   "allowed",        "review",        "confidence",  "source",     "rule", "reason",
    "strategy", "policy_version", "model_version", "snapshot_id", "latency_us", "trace"};
#define NFIELDS (sizeof decision_fields / sizeof *decision_fields)

static PyObject **decision_slot(Decision *d, size_t i) { return &(&d->action)[i]; }

static void decision_dealloc(Decision *self) {
  for (size_t i = 0; i < NFIELDS; i++) Py_CLEAR(*decision_slot(self, i));
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *decision_to_dict(Decision *self, PyObject *unused) {
  PyObject *d = PyDict_New();
  for (size_t i = 0; d && i < NFIELDS; i++) {
    PyObject *v = *decision_slot(self, i);
    if (i == NFIELDS - 1 && v == Py_None) break; /* the trace only when asked */
    if (PyDict_SetItemString(d, decision_fields[i], v) < 0) Py_CLEAR(d);
  }
  return d;
}

static PyObject *decision_repr(Decision *self) {
  return PyUnicode_FromFormat("<verdict.Decision action=%R source=%R rule=%R>", self->action,
                              self->source, self->rule);
}

static PyMethodDef decision_methods[] = {
    {"to_dict", (PyCFunction)decision_to_dict, METH_NOARGS, "the decision's fields as a dict"},
    {NULL}};

static PyTypeObject DecisionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "verdict.Decision",
    .tp_basicsize = sizeof(Decision),
    .tp_dealloc = (destructor)decision_dealloc,
    .tp_repr = (reprfunc)decision_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A decision: what engine.decide returns.",
    .tp_members = decision_members,
    .tp_methods = decision_methods,
};

/* The strings of decisions repeat (actions, rules, reasons, versions): the
 * last ones made are kept by their bytes, so a decision mostly takes new
 * references instead of decoding new objects. Used with the GIL held. */
#define STR_CACHE 512
static struct {
  PyObject *o;
  size_t n;
  char s[96];
} str_cache[STR_CACHE];

static PyObject *str_or_none(const char *s) {
  if (!s) Py_RETURN_NONE;
  size_t n = strlen(s);
  if (n >= sizeof str_cache[0].s) return PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "replace");
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  __typeof__(&str_cache[0]) c = &str_cache[h % STR_CACHE];
  if (c->o && c->n == n && memcmp(c->s, s, n) == 0) {
    Py_INCREF(c->o);
    return c->o;
  }
  PyObject *o = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "replace");
  if (!o) return NULL;
  Py_XSETREF(c->o, o);
  Py_INCREF(o);
  c->n = n;
  memcpy(c->s, s, n);
  return o;
}

/* The snapshot id is new every time. */
static PyObject *str_fresh(const char *s) {
  if (!s) Py_RETURN_NONE;
  return PyUnicode_FromStringAndSize(s, (Py_ssize_t)strlen(s));
}

static PyObject *make_decision(vd_decision *vd, int trace) {
  Decision *d = PyObject_New(Decision, &DecisionType);
  if (!d) return NULL;
  PyObject *v[NFIELDS] = {str_or_none(vd_decision_action(vd)),
                          PyBool_FromLong(vd_decision_allowed(vd)),
                          PyBool_FromLong(vd_decision_review(vd)),
                          PyFloat_FromDouble(vd_decision_confidence(vd)),
                          str_or_none(vd_decision_source(vd)),
                          str_or_none(vd_decision_rule(vd)),
                          str_or_none(vd_decision_reason(vd)),
                          str_or_none(vd_decision_strategy(vd)),
                          str_or_none(vd_decision_policy_version(vd)),
                          str_or_none(vd_decision_model_version(vd)),
                          str_fresh(vd_decision_snapshot_id(vd)),
                          PyFloat_FromDouble(vd_decision_latency_us(vd)),
                          NULL};
  if (trace) {
    const char *s;
    size_t n;
    if (vd_decision_render(vd, VD_JSON_TRACE, &s, &n) == 0) {
      PyObject *text = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "replace");
      PyObject *all = text ? PyObject_CallOneArg(json_loads, text) : NULL;
      PyObject *t = all ? PyDict_GetItemString(all, "trace") : NULL;
      Py_XINCREF(t);
      v[NFIELDS - 1] = t;
      Py_XDECREF(all);
      Py_XDECREF(text);
    }
  } else {
    Py_INCREF(Py_None);
    v[NFIELDS - 1] = Py_None;
  }
  int ok = 1;
  for (size_t i = 0; i < NFIELDS; i++) {
    *decision_slot(d, i) = v[i];
    if (!v[i]) ok = 0;
  }
  if (!ok) {
    for (size_t i = 0; i < NFIELDS; i++)
      if (!*decision_slot(d, i)) *decision_slot(d, i) = (Py_INCREF(Py_None), Py_None);
    Py_DECREF(d);
    if (!PyErr_Occurred()) PyErr_SetString(VerdictError, "the decision could not be read");
    return NULL;
  }
  return (PyObject *)d;
}

/* ---- Engine ---- */

typedef struct slot {
  vd_decision *d;
  vd_builder *b;
  struct slot *next;
} slot;

typedef struct {
  PyObject_HEAD vd_engine *e;
  slot *free_slots; /* touched with the GIL held only */
  int inflight;     /* calls between taking a slot and giving it back (GIL held) */
  int closing;
  PyObject *path;
} Engine;

static void engine_close_now(Engine *self) {
  vd_engine *e = self->e;
  self->closing = 1;
  /* close waits for no decision: let those running finish first */
  while (self->inflight > 0) {
    Py_BEGIN_ALLOW_THREADS;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    Py_END_ALLOW_THREADS;
  }
  if (!self->e) return;
  self->e = NULL;
  Py_BEGIN_ALLOW_THREADS; /* queued snapshots are written and synced */
  vd_engine_close(e);
  Py_END_ALLOW_THREADS;
  while (self->free_slots) {
    slot *s = self->free_slots;
    self->free_slots = s->next;
    vd_decision_free(s->d);
    vd_builder_free(s->b);
    PyMem_RawFree(s);
  }
}

static void engine_dealloc(Engine *self) {
  if (self->e) engine_close_now(self);
  Py_CLEAR(self->path);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int durability_of(PyObject *o, int *out) {
  if (!o || o == Py_None) return *out = VD_DURABILITY_INTERVAL, 0;
  const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
  if (s && !strcmp(s, "interval")) return *out = VD_DURABILITY_INTERVAL, 0;
  if (s && !strcmp(s, "none")) return *out = VD_DURABILITY_NONE, 0;
  if (s && !strcmp(s, "always")) return *out = VD_DURABILITY_ALWAYS, 0;
  raise_own(VD_EINVAL, "durability",
            "durability must be \"interval\" (the default), \"none\" or \"always\"");
  return -1;
}

static int engine_init(Engine *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"path", "snapshots", "durability",        "state",
                           "state_file", "node", "max_request_bytes", "store", NULL};
  PyObject *path, *snapshots = Py_None, *durability = Py_None, *store = Py_None;
  const char *state = NULL, *state_file = NULL, *node = NULL;
  Py_ssize_t max_request = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|O$OzzznO", kwlist, PyUnicode_FSConverter, &path,
                                   &snapshots, &durability, &state, &state_file, &node,
                                   &max_request, &store))
    return -1;
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  PyObject *snap_bytes = NULL, *store_bytes = NULL;
  if (snapshots != Py_None && snapshots != Py_False) {
    if (!PyUnicode_FSConverter(snapshots, &snap_bytes)) {
      Py_DECREF(path);
      return -1;
    }
    o.snapshots_dir = PyBytes_AS_STRING(snap_bytes);
  }
  /* store: None, the engine's default folder; False, none kept; else a folder */
  if (store == Py_False) {
    o.store_dir = "";
  } else if (store != Py_None) {
    if (!PyUnicode_FSConverter(store, &store_bytes)) {
      Py_DECREF(path);
      Py_XDECREF(snap_bytes);
      return -1;
    }
    o.store_dir = PyBytes_AS_STRING(store_bytes);
  }
  if (durability_of(durability, &o.snapshot_durability)) {
    Py_DECREF(path);
    Py_XDECREF(snap_bytes);
    Py_XDECREF(store_bytes);
    return -1;
  }
  o.state_url = state;
  o.state_file = state_file;
  o.node = node;
  o.max_request_bytes = max_request > 0 ? (size_t)max_request : 0;
  if (self->e) engine_close_now(self); /* __init__ called again */
  self->closing = 0;
  vd_engine *e = NULL;
  vd_error err;
  int rc;
  const char *dir = PyBytes_AS_STRING(path);
  Py_BEGIN_ALLOW_THREADS;
  rc = vd_engine_open(dir, &o, &e, &err);
  Py_END_ALLOW_THREADS;
  Py_XDECREF(snap_bytes);
  Py_XDECREF(store_bytes);
  Py_XSETREF(self->path, path);
  if (rc) {
    raise_error(&err);
    return -1;
  }
  self->e = e;
  return 0;
}

/* A slot for one call (GIL held), or NULL with an exception. */
static slot *take_slot(Engine *self) {
  if (!self->e || self->closing) {
    raise_own(VD_EINVAL, NULL, "the engine is closed");
    return NULL;
  }
  slot *s = self->free_slots;
  if (s) {
    self->free_slots = s->next;
  } else {
    s = PyMem_RawMalloc(sizeof *s);
    if (!s || !(s->d = vd_decision_new()) || !(s->b = vd_builder_new())) {
      if (s && s->d) vd_decision_free(s->d);
      PyMem_RawFree(s);
      PyErr_NoMemory();
      return NULL;
    }
  }
  self->inflight++;
  return s;
}

static void give_slot(Engine *self, slot *s) {
  s->next = self->free_slots;
  self->free_slots = s;
  self->inflight--;
}

static int is_key(PyObject *k, const char *name) {
  return PyUnicode_Check(k) && PyUnicode_CompareWithASCIIString(k, name) == 0;
}

/* A request str member as a C string (borrowed from the object, which the
 * caller keeps alive), or NULL with verdict.Error naming path. */
static const char *request_str(PyObject *v, const char *path, const char *what) {
  if (!PyUnicode_Check(v)) {
    raise_own(VD_EREQUEST, path, "%s must be a str (%s), not %s", path, what, Py_TYPE(v)->tp_name);
    return NULL;
  }
  Py_ssize_t n;
  const char *s = PyUnicode_AsUTF8AndSize(v, &n);
  if (!s) {
    PyErr_Clear();
    raise_own(VD_EREQUEST, path, "%s is not valid UTF-8 (it holds a lone surrogate)", path);
  } else if (strlen(s) != (size_t)n) {
    raise_own(VD_EREQUEST, path, "%s holds a NUL character", path);
    s = NULL;
  }
  return s;
}

static int decide_dict_held(Engine *self, PyObject *req, slot *s, vd_error *err, int *rc,
                            PyObject *hold, vd_request *rp);

/* decide(request) for a dict: walks the context into s->b and decides. */
static int decide_dict(Engine *self, PyObject *req, slot *s, vd_error *err, int *rc) {
  vd_request r;
  memset(&r, 0, sizeof r);
  /* held for the call: another thread may change req while the GIL is let go */
  PyObject *hold = PyList_New(0);
  if (!hold) return -1;
  int ret = decide_dict_held(self, req, s, err, rc, hold, &r);
  Py_DECREF(hold);
  return ret;
}

static int decide_dict_held(Engine *self, PyObject *req, slot *s, vd_error *err, int *rc,
                            PyObject *hold, vd_request *rp) {
  vd_request r = *rp;
  PyObject *context = NULL, *cands = NULL;
  const char *cand_stack[16], **cand = cand_stack;
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(req, &pos, &k, &v)) {
    if (PyList_Append(hold, v) < 0) return -1;
    if (is_key(k, "action")) {
      if (!(r.action = request_str(v, "$.action", "the decision point"))) return -1;
    } else if (is_key(k, "key")) {
      if (!(r.key = request_str(v, "$.key", "a routing or subject key"))) return -1;
    } else if (is_key(k, "context")) {
      if (!PyDict_Check(v)) {
        raise_own(VD_EREQUEST, "$.context",
                  "$.context must be a dict (the fields rules read), not %s", Py_TYPE(v)->tp_name);
        return -1;
      }
      context = v;
    } else if (is_key(k, "candidates")) {
      if (!PyList_Check(v) && !PyTuple_Check(v)) {
        raise_own(VD_EREQUEST, "$.candidates",
                  "$.candidates must be a list of action names, not %s", Py_TYPE(v)->tp_name);
        return -1;
      }
      if (!(cands = PySequence_Tuple(v))) return -1;
      int bad = PyList_Append(hold, cands);
      Py_DECREF(cands); /* hold keeps it */
      if (bad < 0) return -1;
    } else {
      PyObject *rk = PyObject_Repr(k);
      const char *name = rk ? PyUnicode_AsUTF8(rk) : "?";
      raise_own(VD_EREQUEST, "$",
                "unknown request key %s (a request has \"action\", \"candidates\", \"context\" "
                "and \"key\"; the fields rules read go in \"context\")",
                name ? name : "?");
      Py_XDECREF(rk);
      return -1;
    }
  }
  if (!r.action) {
    raise_own(VD_EREQUEST, "$.action", "the request has no $.action (the decision point to run)");
    return -1;
  }
  if (cands) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(cands);
    if (n > 16 && !(cand = PyMem_Malloc((size_t)n * sizeof *cand))) {
      PyErr_NoMemory();
      return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
      char path[48];
      snprintf(path, sizeof path, "$.candidates[%zd]", i);
      if (!(cand[i] = request_str(PySequence_Fast_GET_ITEM(cands, i), path, "an action name"))) {
        if (cand != cand_stack) PyMem_Free(cand);
        return -1;
      }
    }
    r.candidates = cand;
    r.ncandidates = (size_t)n;
  }
  vd_builder_reset(s->b);
  int built = context != NULL;
  if (built && walk(s->b, context)) {
    if (cand != cand_stack) PyMem_Free(cand);
    return -1;
  }
  /* the strings stay alive: req holds them, and the caller holds req */
  Py_BEGIN_ALLOW_THREADS;
  *rc = built ? vd_decide_built(self->e, &r, s->b, s->d, err) : vd_decide(self->e, &r, s->d, err);
  Py_END_ALLOW_THREADS;
  if (cand != cand_stack) PyMem_Free(cand);
  return 0;
}

static PyObject *engine_decide(Engine *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"request", "trace", NULL};
  PyObject *req;
  int trace = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$p", kwlist, &req, &trace)) return NULL;
  slot *s = take_slot(self);
  if (!s) return NULL;
  vd_decision_set_trace(s->d, trace);
  vd_error err;
  int rc = 0;
  PyObject *out = NULL;
  if (PyDict_Check(req)) {
    if (decide_dict(self, req, s, &err, &rc)) goto done;
  } else if (PyUnicode_Check(req) || PyBytes_Check(req)) {
    Py_ssize_t n;
    const char *text;
    if (PyBytes_Check(req)) {
      text = PyBytes_AS_STRING(req);
      n = PyBytes_GET_SIZE(req);
    } else if (!(text = PyUnicode_AsUTF8AndSize(req, &n))) {
      PyErr_Clear();
      raise_own(VD_EJSON, "$", "the request is not valid UTF-8 (it holds a lone surrogate)");
      goto done;
    }
    Py_BEGIN_ALLOW_THREADS;
    rc = vd_decide_json(self->e, text, (long)n, s->d, &err);
    Py_END_ALLOW_THREADS;
  } else {
    raise_own(VD_EINVAL, NULL, "decide takes a dict, or a JSON str or bytes, not %s",
              Py_TYPE(req)->tp_name);
    goto done;
  }
  out = rc ? raise_error(&err) : make_decision(s->d, trace);
done:
  give_slot(self, s);
  return out;
}

static PyObject *engine_reload(Engine *self, PyObject *unused) {
  if (!self->e || self->closing) return raise_own(VD_EINVAL, NULL, "the engine is closed");
  vd_error err;
  int rc;
  self->inflight++; /* close waits for it */
  Py_BEGIN_ALLOW_THREADS;
  rc = vd_engine_reload(self->e, &err);
  Py_END_ALLOW_THREADS;
  self->inflight--;
  if (rc) return raise_error(&err);
  char v[65];
  return PyUnicode_FromString(vd_engine_policy_version(self->e, v));
}

static PyObject *engine_policy_version(Engine *self, void *unused) {
  if (!self->e) Py_RETURN_NONE;
  char v[65];
  return PyUnicode_FromString(vd_engine_policy_version(self->e, v));
}

static PyObject *engine_closed(Engine *self, void *unused) { return PyBool_FromLong(!self->e); }

static PyObject *engine_close(Engine *self, PyObject *unused) {
  if (self->e) engine_close_now(self);
  Py_RETURN_NONE;
}

static PyObject *engine_enter(Engine *self, PyObject *unused) {
  if (!self->e) return raise_own(VD_EINVAL, NULL, "the engine is closed");
  Py_INCREF(self);
  return (PyObject *)self;
}

static PyObject *engine_exit(Engine *self, PyObject *args) {
  if (self->e) engine_close_now(self);
  Py_RETURN_FALSE;
}

static PyObject *engine_stats(Engine *self, PyObject *unused) {
  if (!self->e) return raise_own(VD_EINVAL, NULL, "the engine is closed");
  vd_engine_counters c;
  vd_engine_stats(self->e, &c);
  return Py_BuildValue("{sKsKsKsKsKsi}", "snapshots_appended", c.snapshots_appended,
                       "snapshots_written", c.snapshots_written, "snapshots_dropped",
                       c.snapshots_dropped, "snapshots_failed", c.snapshots_failed,
                       "snapshots_refused", c.snapshots_refused, "snapshots_on", c.snapshots_on);
}

static PyMethodDef engine_methods[] = {
    {"decide", (PyCFunction)(void (*)(void))engine_decide, METH_VARARGS | METH_KEYWORDS,
     "decide(request, *, trace=False) -> Decision\n\nrequest: a dict {\"action\", \"context\", "
     "\"candidates\", \"key\"}, or the same as JSON (str or bytes)."},
    {"reload", (PyCFunction)engine_reload, METH_NOARGS,
     "Recompiles the bundle's folder and swaps it in; returns the new bundle version. On "
     "failure raises verdict.Error and the loaded bundle keeps serving."},
    {"close", (PyCFunction)engine_close, METH_NOARGS,
     "Waits for the decisions running, writes the queued snapshots and frees the engine."},
    {"stats", (PyCFunction)engine_stats, METH_NOARGS, "snapshot counters, as a dict"},
    {"__enter__", (PyCFunction)engine_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)engine_exit, METH_VARARGS, NULL},
    {NULL}};

static PyGetSetDef engine_getset[] = {
    {"policy_version", (getter)engine_policy_version, NULL, "the live bundle's version", NULL},
    {"closed", (getter)engine_closed, NULL, "whether close() was called", NULL},
    {NULL}};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "verdict.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_dealloc = (destructor)engine_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc =
        "Engine(path, *, snapshots=None, durability=\"interval\", state=None, "
        "state_file=None, node=None, max_request_bytes=0, store=None)\n\n"
        "A compiled policy bundle answering decisions; one engine serves many threads.",
    .tp_methods = engine_methods,
    .tp_getset = engine_getset,
    .tp_init = (initproc)engine_init,
    .tp_new = PyType_GenericNew,
};

/* ---- eval ---- */

static PyObject *verdict_eval(PyObject *mod, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"expr", "bindings", NULL};
  const char *src;
  Py_ssize_t n;
  PyObject *bindings = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "s#|O", kwlist, &src, &n, &bindings)) return NULL;
  PyObject *text = NULL;
  const char *json = NULL;
  if (bindings != Py_None) {
    if (!PyDict_Check(bindings))
      return raise_own(VD_EINVAL, NULL, "bindings must be a dict, not %s",
                       Py_TYPE(bindings)->tp_name);
    if (!(text = PyObject_CallOneArg(json_dumps, bindings))) return NULL;
    if (!(json = PyUnicode_AsUTF8(text))) {
      Py_DECREF(text);
      return NULL;
    }
  }
  vd_expr *e = NULL;
  vd_error err;
  char *out = NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = vd_expr_compile(src, (long)n, &e, &err);
  if (rc == 0) rc = vd_expr_eval_json(e, json, -1, &out, &err);
  vd_expr_free(e);
  Py_END_ALLOW_THREADS;
  Py_XDECREF(text);
  if (rc) return raise_error(&err);
  PyObject *s = PyUnicode_FromString(out);
  vd_free(out);
  if (!s) return NULL;
  PyObject *v = PyObject_CallOneArg(json_loads, s);
  Py_DECREF(s);
  return v;
}

static PyMethodDef module_methods[] = {
    {"eval", (PyCFunction)(void (*)(void))verdict_eval, METH_VARARGS | METH_KEYWORDS,
     "eval(expr, bindings=None) -> the value of a CEL expression over the bindings (a dict)"},
    {NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "verdict",
    "verdict's decision engine, in process: Engine, Decision, eval, Error.", -1, module_methods};

PyMODINIT_FUNC PyInit_verdict(void) {
  if (PyType_Ready(&DecisionType) < 0 || PyType_Ready(&EngineType) < 0) return NULL;
  PyObject *m = PyModule_Create(&module);
  if (!m) return NULL;
  PyObject *json = PyImport_ImportModule("json");
  if (!json) goto fail;
  json_loads = PyObject_GetAttrString(json, "loads");
  json_dumps = PyObject_GetAttrString(json, "dumps");
  Py_DECREF(json);
  if (!json_loads || !json_dumps) goto fail;
  VerdictError = PyErr_NewExceptionWithDoc(
      "verdict.Error",
      "An engine error: .code (its name, as vd_err_name gives it: \"request\", \"json\", ...), "
      ".errno (the VD_E* number), .message, .path (the JSON path, or None), .line, .column.",
      NULL, NULL);
  if (!VerdictError) goto fail;
  Py_INCREF(VerdictError);
  if (PyModule_AddObject(m, "Error", VerdictError) < 0) goto fail;
  Py_INCREF(&EngineType);
  if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0) goto fail;
  Py_INCREF(&DecisionType);
  if (PyModule_AddObject(m, "Decision", (PyObject *)&DecisionType) < 0) goto fail;
  if (PyModule_AddStringConstant(m, "__version__", vd_version()) < 0) goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
