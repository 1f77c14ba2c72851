/* schema.c — the optional `input:` key of a strategy and what it lets
 * `verdict check` find before any request arrives.
 *
 * `input:` describes the request context: field -> type name, a nested
 * mapping (an object and its fields) or a one-item list `[T]` (a list of T);
 * `name?:` marks a field the caller may leave out. With it declared, every
 * `if` and `let` expression is walked bottom-up once, inferring a small type
 * for each node, and three kinds of mistakes are reported as errors at the
 * exact place of the offending sub-expression:
 *
 *   - a top-level name that is neither an input field, a constant, a let,
 *     `request`, `context`, `model`, a comprehension variable nor a type;
 *   - a field of a declared object that the object does not declare;
 *   - operations CEL rejects at run time: comparing a string with a number,
 *     arithmetic on strings or bools, int mixed with double, `in` over a
 *     scalar, string methods on non-strings, size() of a number, indexing a
 *     scalar, a condition that is not a bool.
 *
 * Where the type is not known (`any`, map values, unknown functions) it is
 * `dyn`, and dyn never produces an error: the checks only speak when sure.
 * Requests are not validated against the schema when deciding. */
#include <stdio.h>
#include <string.h>

#include "policy/internal.h"

typedef enum tkind {
  T_DYN,
  T_NULL,
  T_BOOL,
  T_INT,
  T_UINT,
  T_DOUBLE,
  T_NUMBER, /* int, uint or double: which one is not known */
  T_STRING,
  T_BYTES,
  T_LIST,   /* elem */
  T_MAP,    /* keys and values not known */
  T_OBJECT, /* fields */
  T_TIME,   /* a timestamp value (made by timestamp()) */
  T_DURATION,
  T_TYPE,
} tkind;

struct stype {
  uint8_t kind;
  uint8_t optional; /* a field that may be absent */
  const char *name; /* a field's name (in its object) */
  const stype *elem;
  const stype *fields; /* T_OBJECT: nfields entries */
  uint32_t nfields;
};

static const stype T_DYN_ = {T_DYN, 0, NULL, NULL, NULL, 0};
static const stype T_NULL_ = {T_NULL, 0, NULL, NULL, NULL, 0};
static const stype T_BOOL_ = {T_BOOL, 0, NULL, NULL, NULL, 0};
static const stype T_INT_ = {T_INT, 0, NULL, NULL, NULL, 0};
static const stype T_UINT_ = {T_UINT, 0, NULL, NULL, NULL, 0};
static const stype T_DOUBLE_ = {T_DOUBLE, 0, NULL, NULL, NULL, 0};
static const stype T_NUMBER_ = {T_NUMBER, 0, NULL, NULL, NULL, 0};
static const stype T_STRING_ = {T_STRING, 0, NULL, NULL, NULL, 0};
static const stype T_BYTES_ = {T_BYTES, 0, NULL, NULL, NULL, 0};
static const stype T_MAP_ = {T_MAP, 0, NULL, NULL, NULL, 0};
static const stype T_TIME_ = {T_TIME, 0, NULL, NULL, NULL, 0};
static const stype T_DURATION_ = {T_DURATION, 0, NULL, NULL, NULL, 0};
static const stype T_TYPE_ = {T_TYPE, 0, NULL, NULL, NULL, 0};
static const stype T_LIST_DYN_ = {T_LIST, 0, NULL, &T_DYN_, NULL, 0};
static const stype T_LIST_STRING_ = {T_LIST, 0, NULL, &T_STRING_, NULL, 0};

/* ---- reading `input:` ---- */

static const char *const TYPE_NAMES[] = {"string", "int",       "uint", "double", "number",
                                         "bool",   "timestamp", "any",  "map",    "list"};
#define NTYPE_NAMES (sizeof TYPE_NAMES / sizeof TYPE_NAMES[0])

static const stype *named_type(const char *s) {
  static const stype *const types[] = {&T_STRING_, &T_INT_,    &T_UINT_, &T_DOUBLE_, &T_NUMBER_,
                                       &T_BOOL_,   &T_STRING_, &T_DYN_,  &T_MAP_,    &T_LIST_DYN_};
  /* timestamp: an RFC 3339 string in the request, converted by the rules */
  for (size_t i = 0; i < NTYPE_NAMES; i++)
    if (!strcmp(s, TYPE_NAMES[i])) return types[i];
  return NULL;
}

static int valid_field(const char *s, size_t n) {
  if (!n || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
    return 0;
  for (size_t i = 1; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
      return 0;
  return 1;
}

static const stype *parse_type(arena *a, const char *file, const ynode *n, const char *path,
                               policy_diags *d, int *oom) {
  if (n->kind == Y_SCALAR) {
    const stype *t = n->v.kind == V_STRING ? named_type(n->text) : NULL;
    if (t) return t;
    const char *hint =
        n->v.kind == V_STRING ? diag_suggest(n->text, n->len, TYPE_NAMES, NTYPE_NAMES) : NULL;
    if (hint)
      diag_add(d, DIAG_ERROR, file, n->line, n->col, path, "unknown type '%s' (did you mean '%s'?)",
               n->text, hint);
    else
      diag_add(d, DIAG_ERROR, file, n->line, n->col, path,
               "unknown type '%s': use string, int, uint, double, number, bool, timestamp, any, "
               "map, list, a mapping of fields or [type]",
               n->text);
    return NULL;
  }
  if (n->kind == Y_SEQ) {
    if (n->n != 1) {
      diag_add(d, DIAG_ERROR, file, n->line, n->col, path,
               "a list type has exactly one item, the type of its elements (e.g. [string])");
      return NULL;
    }
    char sub[256];
    snprintf(sub, sizeof sub, "%s[]", path);
    const stype *e = parse_type(a, file, n->kids[0], sub, d, oom);
    if (!e) return NULL;
    stype *t = arena_zalloc(a, sizeof *t);
    if (!t) {
      *oom = 1;
      return NULL;
    }
    t->kind = T_LIST;
    t->elem = e;
    return t;
  }
  /* a mapping: an object; `{}` is a map with any keys */
  if (n->n == 0) return &T_MAP_;
  stype *f = arena_zalloc(a, n->n * sizeof *f);
  stype *t = arena_zalloc(a, sizeof *t);
  if (!f || !t) {
    *oom = 1;
    return NULL;
  }
  int bad = 0;
  uint32_t k = 0;
  for (uint32_t i = 0; i < n->n; i++) {
    const ynode *key = n->kids[2 * i];
    size_t len = key->len;
    int opt = len > 1 && key->text[len - 1] == '?';
    if (opt) len--;
    if (!valid_field(key->text, len)) {
      diag_add(d, DIAG_ERROR, file, key->line, key->col, path,
               "'%s' is not a valid field name: use a letter or '_' then letters, digits, '_' "
               "or '-' (and a final '?' for an optional field)",
               key->text);
      bad = 1;
      continue;
    }
    char *name = arena_strndup(a, key->text, len);
    if (!name) {
      *oom = 1;
      return NULL;
    }
    for (uint32_t j = 0; j < k; j++)
      if (!strcmp(f[j].name, name)) {
        diag_add(d, DIAG_ERROR, file, key->line, key->col, path, "field '%s' is declared twice",
                 name);
        bad = 1;
      }
    char sub[256];
    snprintf(sub, sizeof sub, "%s.%s", path, name);
    const stype *ft = parse_type(a, file, n->kids[2 * i + 1], sub, d, oom);
    if (!ft) {
      bad = 1;
      continue;
    }
    f[k] = *ft;
    f[k].name = name;
    f[k].optional = (uint8_t)opt;
    k++;
  }
  if (bad) return NULL;
  t->kind = T_OBJECT;
  t->fields = f;
  t->nfields = k;
  return t;
}

const stype *schema_parse(arena *a, const char *file, const ynode *n, policy_diags *d) {
  if (n->kind != Y_MAP) {
    diag_add(d, DIAG_ERROR, file, n->line, n->col, "input",
             "expected a mapping of the context's fields to their types");
    return NULL;
  }
  int oom = 0;
  const stype *t = parse_type(a, file, n, "input", d, &oom);
  if (oom) diag_add(d, DIAG_ERROR, file, 0, 0, "", "out of memory reading input:");
  return t && t->kind == T_MAP ? &T_DYN_ : t; /* `input: {}` declares no field */
}

/* ---- checking expressions ---- */

#define MAX_SCOPE 256

typedef struct scope_var {
  const char *name;
  uint32_t len;
  const stype *t;
} scope_var;

typedef struct checker {
  const strategy_build *b;
  policy_diags *d;
  arena *a;
  const stype *input; /* T_OBJECT */
  const stype *request;
  const stype **let_types; /* per let, once inferred */
  uint8_t *let_state;      /* 0 not yet, 1 being inferred, 2 done */
  const ynode *node;       /* the scalar being checked */
  const char *key;
  scope_var scope[MAX_SCOPE];
  uint32_t nscope;
} checker;

/* "a " or "an " before tname(t). */
static const char *art(const stype *t) {
  return t->kind == T_INT || t->kind == T_UINT ? "an " : "a ";
}

static const char *tname(const stype *t) {
  switch (t->kind) {
    case T_NULL:
      return "null";
    case T_BOOL:
      return "bool";
    case T_INT:
      return "int";
    case T_UINT:
      return "uint";
    case T_DOUBLE:
      return "double";
    case T_NUMBER:
      return "number";
    case T_STRING:
      return "string";
    case T_BYTES:
      return "bytes";
    case T_LIST:
      return "list";
    case T_MAP:
    case T_OBJECT:
      return "map";
    case T_TIME:
      return "timestamp";
    case T_DURATION:
      return "duration";
    case T_TYPE:
      return "type";
    default:
      return "dyn";
  }
}

static void err(checker *c, const ast *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Where the text of e starts: the leftmost offset in its subtree (a binary
 * operator's node sits at the operator). */
static uint32_t start_of(const ast *e) {
  uint32_t p = e->pos;
  if (e->target) {
    uint32_t q = start_of(e->target);
    if (q < p) p = q;
  }
  for (uint32_t i = 0; i < e->nargs; i++) {
    uint32_t q = start_of(e->args[i]);
    if (q < p) p = q;
  }
  return p;
}

static void err_pos(checker *c, uint32_t at, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void err_pos(checker *c, uint32_t at, const char *fmt, va_list ap) {
  const strategy_build *b = c->b;
  int line = c->node->line, col = c->node->col;
  size_t pos = c->node->pos;
  yaml_scalar_place(c->node, b->src, b->src_len, at, &line, &col, &pos);
  char msg[768];
  vsnprintf(msg, sizeof msg, fmt, ap);
  diag_excerpt(msg, sizeof msg, b->src, b->src_len, pos);
  diag_add(c->d, DIAG_ERROR, b->file, line, col, c->key, "%s", msg);
}

static void err_start(checker *c, const ast *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void err_start(checker *c, const ast *at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err_pos(c, start_of(at), fmt, ap);
  va_end(ap);
}

static void err(checker *c, const ast *at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err_pos(c, at->pos, fmt, ap);
  va_end(ap);
}

static int is(const ast *e, const char *s) {
  size_t n = strlen(s);
  return e->name && e->name_len == n && memcmp(e->name, s, n) == 0;
}

static int numeric(const stype *t) {
  return t->kind == T_INT || t->kind == T_UINT || t->kind == T_DOUBLE || t->kind == T_NUMBER;
}

static int scalar(const stype *t) { return numeric(t) || t->kind == T_BOOL; }

static const stype *field_of(const stype *obj, const char *name, size_t len) {
  for (uint32_t i = 0; i < obj->nfields; i++)
    if (strlen(obj->fields[i].name) == len && !memcmp(obj->fields[i].name, name, len))
      return &obj->fields[i];
  return NULL;
}

static const stype *list_of(checker *c, const stype *e) {
  if (e->kind == T_DYN) return &T_LIST_DYN_;
  stype *t = arena_zalloc(c->a, sizeof *t);
  if (!t) return &T_LIST_DYN_;
  t->kind = T_LIST;
  t->elem = e;
  return t;
}

/* The field names of obj as candidates for a hint, in c's arena. */
static const char *suggest_field(checker *c, const stype *obj, const char *name, size_t len) {
  const char **names = arena_alloc(c->a, (obj->nfields + 1) * sizeof *names);
  if (!names) return NULL;
  for (uint32_t i = 0; i < obj->nfields; i++) names[i] = obj->fields[i].name;
  return diag_suggest(name, len, names, obj->nfields);
}

static const stype *no_field(checker *c, const ast *at, const stype *obj, const char *name,
                             size_t len) {
  const char *hint = suggest_field(c, obj, name, len);
  const char *of = obj->name ? obj->name : "input:";
  if (hint)
    err(c, at, "undeclared field '%.*s' of '%s' (did you mean '%s'?)", (int)len, name, of, hint);
  else
    err(c, at, "undeclared field '%.*s' of '%s'", (int)len, name, of);
  return &T_DYN_;
}

static const stype *lit_type(checker *c, const value *v) {
  switch (v->kind) {
    case V_NULL:
      return &T_NULL_;
    case V_BOOL:
      return &T_BOOL_;
    case V_INT:
      return &T_INT_;
    case V_UINT:
      return &T_UINT_;
    case V_DOUBLE:
      return &T_DOUBLE_;
    case V_STRING:
      return &T_STRING_;
    case V_BYTES:
      return &T_BYTES_;
    case V_LIST: {
      const stype *e = NULL;
      for (uint32_t i = 0; i < v->n; i++) {
        const stype *t = lit_type(c, &v->items[i]);
        if (!e)
          e = t;
        else if (e->kind != t->kind || t->kind == T_LIST)
          e = &T_DYN_;
      }
      return list_of(c, e ? e : &T_DYN_);
    }
    case V_MAP:
      return &T_MAP_;
    case V_TIMESTAMP:
      return &T_TIME_;
    case V_DURATION:
      return &T_DURATION_;
    case V_TYPE:
      return &T_TYPE_;
    default:
      return &T_DYN_;
  }
}

static const stype *infer(checker *c, const ast *e);

static const stype *let_type(checker *c, uint32_t i);

static int is_type_name(const ast *e) {
  static const char *const names[] = {"int",  "uint", "double",    "string", "bool", "bytes",
                                      "list", "map",  "null_type", "type",   "dyn"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (is(e, names[i])) return 1;
  return 0;
}

static const stype *ident(checker *c, const ast *e) {
  const strategy_build *b = c->b;
  for (uint32_t i = c->nscope; i-- > 0;)
    if (c->scope[i].len == e->name_len && !memcmp(c->scope[i].name, e->name, e->name_len))
      return c->scope[i].t;
  int32_t let = strategy_let_index(b, e->name, e->name_len);
  if (let >= 0) return let_type(c, (uint32_t)let);
  const value *k = value_map_get(&b->s->constants, e->name, e->name_len);
  if (k) return lit_type(c, k);
  if (is(e, "request")) return c->request;
  if (is(e, "context")) return c->input;
  if (is(e, "model")) return &T_DYN_;
  if (is(e, "limits") && b->s->nlimits) return &T_DYN_;
  const stype *f = field_of(c->input, e->name, e->name_len);
  if (f) return f;
  if (is_type_name(e)) return &T_TYPE_;
  /* the hint: among fields, constants, lets and the request's names */
  uint32_t n = c->input->nfields + b->nconsts + b->nlets + 2;
  const char **cands = arena_alloc(c->a, n * sizeof *cands);
  const char *hint = NULL;
  if (cands) {
    uint32_t k2 = 0;
    for (uint32_t i = 0; i < c->input->nfields; i++) cands[k2++] = c->input->fields[i].name;
    for (uint32_t i = 0; i < b->nconsts; i++) cands[k2++] = b->const_names[i];
    for (uint32_t i = 0; i < b->nlets; i++) cands[k2++] = b->let_names[i];
    cands[k2++] = "request";
    cands[k2++] = "context";
    hint = diag_suggest(e->name, e->name_len, cands, k2);
  }
  if (hint)
    err(c, e, "undefined name '%.*s' (not in input:, constants or let); did you mean '%s'?",
        (int)e->name_len, e->name, hint);
  else
    err(c, e, "undefined name '%.*s' (not in input:, constants or let)", (int)e->name_len, e->name);
  return &T_DYN_;
}

static const stype *select_field(checker *c, const ast *at, const stype *t, const char *name,
                                 size_t len, const char *how) {
  if (t->kind == T_OBJECT) {
    const stype *f = field_of(t, name, len);
    return f ? f : no_field(c, at, t, name, len);
  }
  if (t->kind == T_DYN || t->kind == T_MAP) return &T_DYN_;
  err(c, at, "%s '%.*s' of %s%s value: only maps have fields", how, (int)len, name, art(t),
      tname(t));
  return &T_DYN_;
}

static int comparable(const stype *x, const stype *y) {
  if (x->kind == T_DYN || y->kind == T_DYN || x->kind == T_NULL || y->kind == T_NULL) return 1;
  if (x->kind == T_STRING && (numeric(y) || y->kind == T_BOOL)) return 0;
  if (y->kind == T_STRING && (numeric(x) || x->kind == T_BOOL)) return 0;
  if ((x->kind == T_BOOL) != (y->kind == T_BOOL)) return 0;
  return 1;
}

static const stype *want_bool(checker *c, const ast *at, const stype *t, const char *what) {
  if (t->kind != T_BOOL && t->kind != T_DYN) err(c, at, "%s needs a bool, got %s", what, tname(t));
  return &T_BOOL_;
}

static const char *const OPS[] = {"_+_", "+", "_-_", "-", "_*_", "*", "_/_", "/", "_%_", "%"};

static const char *op_text(const ast *e) {
  for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i += 2)
    if (is(e, OPS[i])) return OPS[i + 1];
  return NULL;
}

static const stype *arith(checker *c, const ast *e, const stype *x, const stype *y) {
  const char *op = op_text(e);
  if (x->kind == T_DYN || y->kind == T_DYN) return &T_DYN_;
  if (x->kind == T_BOOL || y->kind == T_BOOL) {
    err(c, e, "arithmetic on a bool: %s %s %s", tname(x), op, tname(y));
    return &T_DYN_;
  }
  if (x->kind == T_STRING || y->kind == T_STRING) {
    if (x->kind == T_STRING && y->kind == T_STRING && !strcmp(op, "+")) return &T_STRING_;
    err(c, e, "arithmetic on a string: %s %s %s%s", tname(x), op, tname(y),
        !strcmp(op, "+") ? " (only string + string joins strings)" : "");
    return &T_DYN_;
  }
  if (numeric(x) && numeric(y)) {
    if (x->kind == T_NUMBER || y->kind == T_NUMBER) return &T_NUMBER_;
    if (x->kind != y->kind) {
      const stype *to = x->kind == T_DOUBLE || y->kind == T_DOUBLE ? &T_DOUBLE_ : &T_INT_;
      err(c, e, "%s %s %s: convert with %s(x)", tname(x), op, tname(y), tname(to));
      return &T_DYN_;
    }
    return x;
  }
  if (x->kind == T_LIST && y->kind == T_LIST && !strcmp(op, "+")) return x;
  return &T_DYN_;
}

static const stype *want_sized(checker *c, const ast *at, const stype *t) {
  if (scalar(t))
    err(c, at, "size() of %s%s: only strings, bytes, lists and maps have a size", art(t), tname(t));
  return &T_INT_;
}

/* String methods: what they return (NULL for names that are not one). */
static const stype *string_method(const ast *e) {
  static const char *const to_bool[] = {"startsWith", "endsWith", "contains", "matches"};
  static const char *const to_str[] = {"lowerAscii", "upperAscii", "trim",   "replace",
                                       "substring",  "charAt",     "format", "reverse"};
  static const char *const to_int[] = {"indexOf", "lastIndexOf"};
  for (size_t i = 0; i < sizeof to_bool / sizeof to_bool[0]; i++)
    if (is(e, to_bool[i])) return &T_BOOL_;
  for (size_t i = 0; i < sizeof to_str / sizeof to_str[0]; i++)
    if (is(e, to_str[i])) return &T_STRING_;
  for (size_t i = 0; i < sizeof to_int / sizeof to_int[0]; i++)
    if (is(e, to_int[i])) return &T_INT_;
  if (is(e, "split")) return &T_LIST_STRING_;
  return NULL;
}

static const stype *call(checker *c, const ast *e) {
  /* cel.bind(v, init, body) */
  if (e->target && e->target->kind == A_IDENT && is(e->target, "cel") && is(e, "bind") &&
      e->nargs == 3 && e->args[0]->kind == A_IDENT) {
    const stype *init = infer(c, e->args[1]);
    if (c->nscope >= MAX_SCOPE) return &T_DYN_;
    c->scope[c->nscope++] = (scope_var){e->args[0]->name, e->args[0]->name_len, init};
    const stype *r = infer(c, e->args[2]);
    c->nscope--;
    return r;
  }
  const stype *recv = e->target ? infer(c, e->target) : NULL;
  const stype *a[3] = {&T_DYN_, &T_DYN_, &T_DYN_};
  for (uint32_t i = 0; i < e->nargs; i++) {
    const stype *t = infer(c, e->args[i]);
    if (i < 3) a[i] = t;
  }
  if (recv) {
    const stype *r = string_method(e);
    if (r) {
      if (recv->kind != T_STRING && recv->kind != T_DYN)
        err(c, e, "'%.*s' is a string method, called on %s%s", (int)e->name_len, e->name, art(recv),
            tname(recv));
      return r;
    }
    if (is(e, "size")) return want_sized(c, e, recv);
    return &T_DYN_;
  }
  if (e->nargs == 2 && (is(e, "_&&_") || is(e, "_||_"))) {
    const char *what = is(e, "_&&_") ? "'&&'" : "'||'";
    want_bool(c, e->args[0], a[0], what);
    want_bool(c, e->args[1], a[1], what);
    return &T_BOOL_;
  }
  if (e->nargs == 1 && is(e, "!_")) return want_bool(c, e->args[0], a[0], "'!'");
  if (e->nargs == 2 && (is(e, "_==_") || is(e, "_!=_") || is(e, "_<_") || is(e, "_<=_") ||
                        is(e, "_>_") || is(e, "_>=_"))) {
    if (!comparable(a[0], a[1])) {
      char op[3] = {0};
      memcpy(op, e->name + 1, e->name_len - 2 < 2 ? e->name_len - 2 : 2);
      int eq = is(e, "_==_") || is(e, "_!=_");
      err(c, e, "comparing %s%s with %s%s: %s %s %s %s", art(a[0]), tname(a[0]), art(a[1]),
          tname(a[1]), tname(a[0]), op, tname(a[1]),
          eq ? (is(e, "_==_") ? "is always false" : "is always true")
             : "fails when evaluated (no such overload)");
    }
    return &T_BOOL_;
  }
  if (e->nargs == 2 && op_text(e)) return arith(c, e, a[0], a[1]);
  if (e->nargs == 1 && is(e, "-_")) {
    if (a[0]->kind != T_DYN && !numeric(a[0]) && a[0]->kind != T_DURATION)
      err(c, e, "negating %s%s", art(a[0]), tname(a[0]));
    return a[0];
  }
  if (e->nargs == 3 && is(e, "_?_:_")) {
    want_bool(c, e->args[0], a[0], "the condition of '?:'");
    if (a[1]->kind == a[2]->kind && a[1]->kind != T_LIST && a[1]->kind != T_OBJECT) return a[1];
    if (a[1] == a[2]) return a[1];
    return &T_DYN_;
  }
  if (e->nargs == 2 && is(e, "@in")) {
    const stype *r = a[1];
    if (r->kind != T_LIST && r->kind != T_MAP && r->kind != T_OBJECT && r->kind != T_DYN)
      err_start(c, e->args[1], "'in' needs a list or a map on its right, got %s", tname(r));
    else if (r->kind == T_LIST && !comparable(a[0], r->elem))
      err(c, e, "looking for %s%s in a list of %s", art(a[0]), tname(a[0]), tname(r->elem));
    return &T_BOOL_;
  }
  if (e->nargs == 2 && is(e, "_[_]")) {
    const stype *t = a[0];
    if (t->kind == T_LIST) {
      if (a[1]->kind != T_DYN && a[1]->kind != T_INT && a[1]->kind != T_UINT &&
          a[1]->kind != T_NUMBER)
        err_start(c, e->args[1], "a list index is an int, got %s", tname(a[1]));
      return t->elem;
    }
    if (t->kind == T_OBJECT && e->args[1]->kind == A_LIT && e->args[1]->lit.kind == V_STRING)
      return select_field(c, e->args[1], t, e->args[1]->lit.s, e->args[1]->lit.n, "field");
    if (scalar(t) || t->kind == T_STRING || t->kind == T_NULL) {
      err(c, e, "indexing %s%s value: only lists and maps can be indexed", art(t), tname(t));
      return &T_DYN_;
    }
    return &T_DYN_;
  }
  if (e->nargs == 1 && is(e, "size")) return want_sized(c, e, a[0]);
  if (e->nargs == 2 && is(e, "matches")) {
    if (a[0]->kind != T_STRING && a[0]->kind != T_DYN)
      err(c, e->args[0], "matches() needs a string, got %s", tname(a[0]));
    return &T_BOOL_;
  }
  if (e->nargs == 1) {
    if (is(e, "int")) return &T_INT_;
    if (is(e, "uint")) return &T_UINT_;
    if (is(e, "double")) return &T_DOUBLE_;
    if (is(e, "string")) return &T_STRING_;
    if (is(e, "bool")) return &T_BOOL_;
    if (is(e, "bytes")) return &T_BYTES_;
    if (is(e, "timestamp")) return &T_TIME_;
    if (is(e, "duration")) return &T_DURATION_;
    if (is(e, "type")) return &T_TYPE_;
    if (is(e, "has")) return &T_BOOL_;
  }
  return &T_DYN_;
}

static const char *macro_name(uint8_t m) {
  switch (m) {
    case M_ALL:
      return "all";
    case M_EXISTS:
      return "exists";
    case M_EXISTS_ONE:
      return "exists_one";
    case M_MAP:
      return "map";
    default:
      return "filter";
  }
}

static const stype *comprehension(checker *c, const ast *e) {
  const stype *r = infer(c, e->target);
  const stype *var = &T_DYN_;
  if (r->kind == T_LIST)
    var = r->elem;
  else if (r->kind == T_MAP || r->kind == T_OBJECT)
    var = &T_STRING_;
  else if (r->kind != T_DYN)
    err_start(c, e->target, "'%s' iterates over a list or a map, not %s%s", macro_name(e->macro),
              art(r), tname(r));
  if (c->nscope >= MAX_SCOPE) return &T_DYN_;
  c->scope[c->nscope++] = (scope_var){e->name, e->name_len, var};
  const stype *body = e->nargs > 0 ? infer(c, e->args[0]) : &T_DYN_;
  if (e->nargs > 1) want_bool(c, e->args[1], infer(c, e->args[1]), "the filter of 'map'");
  c->nscope--;
  switch (e->macro) {
    case M_MAP:
      return list_of(c, body);
    case M_FILTER:
      if (e->nargs > 0) want_bool(c, e->args[0], body, "the predicate of 'filter'");
      return r->kind == T_LIST ? r : &T_LIST_DYN_;
    default:
      if (e->nargs > 0) want_bool(c, e->args[0], body, "the predicate");
      return &T_BOOL_;
  }
}

static const stype *infer(checker *c, const ast *e) {
  if (!e) return &T_DYN_;
  switch (e->kind) {
    case A_LIT:
      return lit_type(c, &e->lit);
    case A_IDENT:
      return ident(c, e);
    case A_SELECT: {
      const stype *t = infer(c, e->target);
      const stype *f = select_field(c, e, t, e->name, e->name_len, "selecting field");
      return e->test_only ? &T_BOOL_ : f;
    }
    case A_CALL:
      return call(c, e);
    case A_LIST: {
      const stype *el = NULL;
      for (uint32_t i = 0; i < e->nargs; i++) {
        const stype *t = infer(c, e->args[i]);
        if (!el)
          el = t;
        else if (el->kind != t->kind || t->kind == T_LIST || t->kind == T_OBJECT)
          el = &T_DYN_;
      }
      return list_of(c, el ? el : &T_DYN_);
    }
    case A_MAP:
      for (uint32_t i = 0; i < e->nargs; i++) infer(c, e->args[i]);
      return &T_MAP_;
    case A_COMPREHENSION:
      return comprehension(c, e);
  }
  return &T_DYN_;
}

/* The type of let i, inferred (and its mistakes reported) on first use. */
static const stype *let_type(checker *c, uint32_t i) {
  if (c->let_state[i] == 2) return c->let_types[i];
  if (c->let_state[i] == 1 || !c->b->let_trees[i]) return &T_DYN_;
  c->let_state[i] = 1;
  const ynode *node = c->node;
  const char *key = c->key;
  uint32_t nscope = c->nscope;
  char path[160];
  snprintf(path, sizeof path, "let.%s", c->b->let_names[i]);
  c->node = c->b->let_nodes[i];
  c->key = path;
  c->nscope = 0; /* a let sees no comprehension variable of its user */
  const stype *t = infer(c, c->b->let_trees[i]);
  c->node = node;
  c->key = key;
  c->nscope = nscope;
  c->let_types[i] = t;
  c->let_state[i] = 2;
  return t;
}

void schema_check(const strategy_build *b, policy_diags *d) {
  if (!b->input || b->input->kind != T_OBJECT) return;
  arena a;
  arena_init(&a, NULL, 0, 0);
  checker *c = arena_zalloc(&a, sizeof *c);
  stype *req = arena_zalloc(&a, sizeof *req);
  stype *rf = arena_zalloc(&a, 5 * sizeof *rf);
  c->let_types = arena_zalloc(&a, (b->nlets + 1) * sizeof *c->let_types);
  c->let_state = arena_zalloc(&a, b->nlets + 1);
  if (!c || !req || !rf || !c->let_types || !c->let_state) {
    arena_free(&a);
    return;
  }
  rf[0] = T_STRING_;
  rf[0].name = "action";
  rf[1] = T_LIST_STRING_;
  rf[1].name = "candidates";
  rf[2] = T_STRING_;
  rf[2].name = "key";
  rf[3] = *b->input;
  rf[3].name = "context";
  rf[4] = T_TIME_;
  rf[4].name = "time";
  req->kind = T_OBJECT;
  req->name = "request";
  req->fields = rf;
  req->nfields = 5;
  c->b = b;
  c->d = d;
  c->a = &a;
  c->input = b->input;
  c->request = req;
  for (uint32_t i = 0; i < b->nlets; i++) let_type(c, i);
  for (uint32_t r = 0; r < b->s->nrules; r++) {
    const ast *cond = b->rules[r].cond;
    if (!cond) continue;
    char key[48];
    snprintf(key, sizeof key, "rules[%u].if", r);
    c->node = b->rules[r].node;
    c->key = key;
    const stype *t = infer(c, cond);
    if (t->kind != T_BOOL && t->kind != T_DYN)
      err_start(c, cond, "the condition is %s%s, not a bool", art(t), tname(t));
  }
  arena_free(&a);
}
