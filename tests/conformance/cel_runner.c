/* cel_runner.c — runs CEL conformance cases (JSON Lines) against verdict's
 * expression engine: build/verdict-cel-conformance FILE.jsonl [options].
 *
 * Each line is one case in the format of the CEL conformance extraction
 * (id, file, section, expr, bindings, expect, core, tags, and optionally
 * container): typed values are {"type": T, "value": V}, recursively. For each
 * case the runner binds the variables, compiles, evaluates and compares:
 *
 * - the result's type must be the expected one (1, 1u and 1.0 differ here,
 *   though CEL's == calls them equal); doubles compare with ==, except that
 *   NaN matches NaN; lists in order, maps in any order;
 * - an expected error only asks that compilation or evaluation failed; the
 *   suite's messages are informal, so they are not compared.
 *
 * Output: one `FAIL id: expr — expected X, got Y` line per failure, then
 * counts per file (and per tag with --tags), then exactly `N passed, N
 * failed` for every case run. Exit status: 0 when all passed, 1 when some
 * failed, 2 on bad usage or a malformed input line (named by line number).
 *
 * Options: --core (only cases marked core), --filter PREFIX (only ids that
 * start with PREFIX, e.g. `string_ext/` or `macros/exists`), --tags (counts
 * per tag), -v (print passing cases too). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/base64.h"
#include "core/json.h"
#include "core/timefmt.h"
#include "core/value.h"
#include "expr/expr.h"

#define CASE_MEMORY_LIMIT ((size_t)256 << 20)
#define CASE_COST_LIMIT 10000000u

/* ---- a growable text buffer for messages ---- */

typedef struct text {
  char *s;
  size_t n, cap;
} text;

static void text_put(text *t, const char *s, size_t n) {
  if (t->n + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    while (cap < t->n + n + 1) cap *= 2;
    char *p = realloc(t->s, cap);
    if (!p) {
      fprintf(stderr, "out of memory\n");
      exit(2);
    }
    t->s = p;
    t->cap = cap;
  }
  memcpy(t->s + t->n, s, n);
  t->n += n;
  t->s[t->n] = '\0';
}

static void text_printf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_printf(text *t, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) text_put(t, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void text_quoted(text *t, const char *s, size_t n, int bytes) {
  text_put(t, bytes ? "b\"" : "\"", bytes ? 2 : 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      text_printf(t, "\\%c", c);
    } else if (c == '\n') {
      text_put(t, "\\n", 2);
    } else if (c < 0x20 || c == 0x7f || (bytes && c >= 0x80)) {
      text_printf(t, "\\x%02x", c);
    } else {
      text_put(t, (const char *)&c, 1);
    }
  }
  text_put(t, "\"", 1);
}

/* Renders a value as CEL-like text: 1, 1u, 1.0, "s", b"..", [..], {k: v}. */
static void text_value(text *t, const value *v) {
  switch (v->kind) {
    case V_NULL:
      text_put(t, "null", 4);
      break;
    case V_BOOL:
      text_printf(t, "%s", v->b ? "true" : "false");
      break;
    case V_INT:
      text_printf(t, "%lld", (long long)v->i);
      break;
    case V_UINT:
      text_printf(t, "%lluu", (unsigned long long)v->u);
      break;
    case V_DOUBLE:
      if (isnan(v->d)) {
        text_printf(t, "double(NaN)");
      } else if (isinf(v->d)) {
        text_printf(t, "double(%sInfinity)", v->d < 0 ? "-" : "");
      } else {
        char buf[64];
        snprintf(buf, sizeof buf, "%.17g", v->d);
        text_printf(t, "%s%s", buf, strpbrk(buf, ".eE") ? "" : ".0");
      }
      break;
    case V_STRING:
      text_quoted(t, v->s, v->n, 0);
      break;
    case V_BYTES:
      text_quoted(t, v->s, v->n, 1);
      break;
    case V_LIST:
      text_put(t, "[", 1);
      for (uint32_t i = 0; i < v->n; i++) {
        if (i) text_put(t, ", ", 2);
        text_value(t, &v->items[i]);
      }
      text_put(t, "]", 1);
      break;
    case V_MAP:
      text_put(t, "{", 1);
      for (uint32_t i = 0; i < v->n; i++) {
        if (i) text_put(t, ", ", 2);
        text_value(t, &v->entries[i].key);
        text_put(t, ": ", 2);
        text_value(t, &v->entries[i].val);
      }
      text_put(t, "}", 1);
      break;
    case V_TIMESTAMP: {
      char buf[64];
      size_t n = timefmt_format_rfc3339(v->i, (int32_t)v->n, buf);
      text_printf(t, "timestamp(\"%.*s\")", (int)n, buf);
      break;
    }
    case V_DURATION: {
      char buf[64];
      size_t n = timefmt_format_duration(v->i, (int32_t)v->n, buf);
      text_printf(t, "duration(\"%.*s\")", (int)n, buf);
      break;
    }
    case V_TYPE:
      text_printf(t, "type(%s)", value_kind_name((value_kind)v->n));
      break;
    case V_ERROR:
      text_printf(t, "error(%.*s)", (int)v->n, v->s);
      break;
    default:
      text_printf(t, "<kind %d>", v->kind);
      break;
  }
}

/* ---- reading cases ---- */

typedef struct loader {
  arena *a;
  const char *file;
  long line;
  char err[512];
} loader;

static int bad(loader *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(loader *ld, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ld->err, sizeof ld->err, fmt, ap);
  va_end(ap);
  return -1;
}

static const value *field(const value *obj, const char *name) {
  return obj->kind == V_MAP ? value_map_get(obj, name, strlen(name)) : NULL;
}

static int str_is(const value *v, const char *s) {
  return v && v->kind == V_STRING && v->n == strlen(s) && memcmp(v->s, s, v->n) == 0;
}

static int parse_int_text(const value *v, int is_uint, value *out) {
  char buf[32];
  if (v->n == 0 || v->n >= sizeof buf) return -1;
  memcpy(buf, v->s, v->n);
  buf[v->n] = '\0';
  char *end;
  errno = 0;
  if (is_uint) {
    if (buf[0] == '-') return -1;
    unsigned long long u = strtoull(buf, &end, 10);
    if (errno || *end) return -1;
    *out = value_uint(u);
  } else {
    long long i = strtoll(buf, &end, 10);
    if (errno || *end) return -1;
    *out = value_int(i);
  }
  return 0;
}

static const struct {
  const char *name;
  value_kind kind;
} type_names[] = {
    {"null_type", V_NULL},
    {"bool", V_BOOL},
    {"int", V_INT},
    {"uint", V_UINT},
    {"double", V_DOUBLE},
    {"string", V_STRING},
    {"bytes", V_BYTES},
    {"list", V_LIST},
    {"map", V_MAP},
    {"type", V_TYPE},
    {"google.protobuf.Timestamp", V_TIMESTAMP},
    {"google.protobuf.Duration", V_DURATION},
};

/* Decodes a typed value {"type": T, "value": V}; `where` names it in errors. */
static int decode(loader *ld, const value *tv, value *out, const char *where) {
  const value *type = field(tv, "type");
  const value *v = field(tv, "value");
  if (!type || type->kind != V_STRING || !v)
    return bad(ld, "%s: a typed value needs \"type\" and \"value\"", where);
  if (str_is(type, "null")) {
    if (v->kind != V_NULL) return bad(ld, "%s: a null must have value null", where);
    *out = value_null();
  } else if (str_is(type, "bool")) {
    if (v->kind != V_BOOL) return bad(ld, "%s: a bool must be true or false", where);
    *out = *v;
  } else if (str_is(type, "int")) {
    if (v->kind == V_INT) {
      *out = *v;
    } else if (v->kind != V_STRING || parse_int_text(v, 0, out)) {
      return bad(ld, "%s: not an int64", where);
    }
  } else if (str_is(type, "uint")) {
    if (v->kind == V_INT && v->i >= 0) {
      *out = value_uint((uint64_t)v->i);
    } else if (v->kind == V_UINT) {
      *out = *v;
    } else if (v->kind != V_STRING || parse_int_text(v, 1, out)) {
      return bad(ld, "%s: not a uint64", where);
    }
  } else if (str_is(type, "double")) {
    if (v->kind == V_DOUBLE)
      *out = *v;
    else if (v->kind == V_INT)
      *out = value_double((double)v->i);
    else if (v->kind == V_UINT)
      *out = value_double((double)v->u);
    else if (str_is(v, "NaN"))
      *out = value_double(NAN);
    else if (str_is(v, "Infinity"))
      *out = value_double(INFINITY);
    else if (str_is(v, "-Infinity"))
      *out = value_double(-INFINITY);
    else
      return bad(ld, "%s: not a double", where);
  } else if (str_is(type, "string")) {
    if (v->kind != V_STRING) return bad(ld, "%s: a string must be a JSON string", where);
    *out = *v;
  } else if (str_is(type, "bytes")) {
    if (v->kind != V_STRING) return bad(ld, "%s: bytes must be a base64 string", where);
    char *buf = arena_alloc(ld->a, base64_decoded_max(v->n) + 1);
    size_t n;
    if (!buf || base64_decode(v->s, v->n, buf, &n, NULL))
      return bad(ld, "%s: invalid base64", where);
    *out = value_bytes(buf, (uint32_t)n);
  } else if (str_is(type, "list")) {
    if (v->kind != V_LIST) return bad(ld, "%s: a list must be a JSON array", where);
    value *items = arena_alloc(ld->a, (v->n ? v->n : 1) * sizeof(value));
    if (!items) return bad(ld, "%s: out of memory", where);
    for (uint32_t i = 0; i < v->n; i++)
      if (decode(ld, &v->items[i], &items[i], where)) return -1;
    *out = value_list(items, v->n);
  } else if (str_is(type, "map")) {
    if (v->kind != V_LIST) return bad(ld, "%s: a map must be an array of [key, value]", where);
    map_entry *e = arena_alloc(ld->a, (v->n ? v->n : 1) * sizeof *e);
    if (!e) return bad(ld, "%s: out of memory", where);
    for (uint32_t i = 0; i < v->n; i++) {
      const value *pair = &v->items[i];
      if (pair->kind != V_LIST || pair->n != 2)
        return bad(ld, "%s: a map entry must be [key, value]", where);
      if (decode(ld, &pair->items[0], &e[i].key, where) ||
          decode(ld, &pair->items[1], &e[i].val, where))
        return -1;
    }
    *out = value_map(e, v->n);
  } else if (str_is(type, "type")) {
    for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
      if (str_is(v, type_names[i].name)) {
        *out = value_type(type_names[i].kind);
        return 0;
      }
    return bad(ld, "%s: unknown type name", where);
  } else if (str_is(type, "timestamp")) {
    int64_t sec;
    int32_t ns;
    if (v->kind != V_STRING || timefmt_parse_rfc3339(v->s, v->n, &sec, &ns))
      return bad(ld, "%s: not an RFC 3339 timestamp", where);
    *out = value_timestamp(sec, ns);
  } else if (str_is(type, "duration")) {
    int64_t sec;
    int32_t ns;
    if (v->kind != V_STRING || timefmt_parse_duration(v->s, v->n, &sec, &ns))
      return bad(ld, "%s: not a duration", where);
    *out = value_duration(sec, ns);
  } else {
    return bad(ld, "%s: unknown type tag \"%.*s\"", where, (int)type->n, type->s);
  }
  return 0;
}

/* ---- comparing ---- */

/* Equal in the harness's sense: same types throughout. */
static int same(const value *a, const value *b) {
  if (a->kind != b->kind) return 0;
  switch (a->kind) {
    case V_NULL:
      return 1;
    case V_BOOL:
      return a->b == b->b;
    case V_INT:
      return a->i == b->i;
    case V_UINT:
      return a->u == b->u;
    case V_DOUBLE:
      return a->d == b->d || (isnan(a->d) && isnan(b->d));
    case V_STRING:
    case V_BYTES:
      return a->n == b->n && (a->n == 0 || memcmp(a->s, b->s, a->n) == 0);
    case V_LIST:
      if (a->n != b->n) return 0;
      for (uint32_t i = 0; i < a->n; i++)
        if (!same(&a->items[i], &b->items[i])) return 0;
      return 1;
    case V_MAP:
      if (a->n != b->n) return 0;
      for (uint32_t i = 0; i < a->n; i++) {
        uint32_t j = 0;
        while (j < b->n && !same(&a->entries[i].key, &b->entries[j].key)) j++;
        if (j == b->n || !same(&a->entries[i].val, &b->entries[j].val)) return 0;
      }
      return 1;
    case V_TIMESTAMP:
    case V_DURATION:
      return a->i == b->i && a->n == b->n;
    case V_TYPE:
      return a->n == b->n;
    default:
      return 0;
  }
}

/* ---- running ---- */

typedef struct binding {
  const char *name;
  size_t len;
  value v;
} binding;

typedef struct bindings {
  binding *b;
  size_t n;
} bindings;

static int lookup(void *user, const char *name, size_t len, value *out) {
  const bindings *bs = user;
  for (size_t i = 0; i < bs->n; i++)
    if (bs->b[i].len == len && memcmp(bs->b[i].name, name, len) == 0) {
      *out = bs->b[i].v;
      return 0;
    }
  return -1;
}

typedef struct counter {
  char name[64];
  long pass, fail;
} counter;

typedef struct counters {
  counter *c;
  size_t n, cap;
} counters;

static counter *count_of(counters *cs, const char *name, size_t len) {
  if (len >= sizeof cs->c[0].name) len = sizeof cs->c[0].name - 1;
  for (size_t i = 0; i < cs->n; i++)
    if (strlen(cs->c[i].name) == len && memcmp(cs->c[i].name, name, len) == 0) return &cs->c[i];
  if (cs->n == cs->cap) {
    cs->cap = cs->cap ? cs->cap * 2 : 32;
    cs->c = realloc(cs->c, cs->cap * sizeof *cs->c);
    if (!cs->c) {
      fprintf(stderr, "out of memory\n");
      exit(2);
    }
  }
  counter *c = &cs->c[cs->n++];
  memset(c, 0, sizeof *c);
  memcpy(c->name, name, len);
  return c;
}

typedef struct options {
  int core_only, tags, verbose;
  const char *filter;
} options;

/* Writes expr with control characters escaped, so one failure is one line. */
static void print_expr(const value *e) {
  for (uint32_t i = 0; i < e->n; i++) {
    unsigned char c = (unsigned char)e->s[i];
    if (c == '\n')
      fputs("\\n", stdout);
    else if (c == '\r')
      fputs("\\r", stdout);
    else if (c == '\t')
      fputs("\\t", stdout);
    else if (c < 0x20 || c == 0x7f)
      printf("\\x%02x", c);
    else
      putchar(c);
  }
}

/* Runs one parsed line. Returns 1 passed, 0 failed, -1 skipped, -2 malformed. */
static int run_case(loader *ld, const value *c, const options *opt, counters *files,
                    counters *tags) {
  const value *id = field(c, "id"), *expr = field(c, "expr"), *bnd = field(c, "bindings");
  const value *expect = field(c, "expect"), *core = field(c, "core"), *file = field(c, "file");
  const value *tagv = field(c, "tags"), *container = field(c, "container");
  if (c->kind != V_MAP) return bad(ld, "a case must be a JSON object"), -2;
  if (!id || id->kind != V_STRING) return bad(ld, "missing \"id\" (a string)"), -2;
  if (!expr || expr->kind != V_STRING) return bad(ld, "missing \"expr\" (a string)"), -2;
  if (!expect || expect->kind != V_MAP) return bad(ld, "missing \"expect\" (an object)"), -2;
  if (bnd && bnd->kind != V_MAP) return bad(ld, "\"bindings\" must be an object"), -2;
  if (tagv && tagv->kind != V_LIST) return bad(ld, "\"tags\" must be an array"), -2;
  if (container && container->kind != V_STRING)
    return bad(ld, "\"container\" must be a string"), -2;

  if (opt->core_only && !(core && core->kind == V_BOOL && core->b)) return -1;
  if (opt->filter) {
    size_t fl = strlen(opt->filter);
    if (id->n < fl || memcmp(id->s, opt->filter, fl) != 0) return -1;
  }

  /* the expectation */
  const value *experr = field(expect, "error");
  int want_error = experr && experr->kind == V_BOOL && experr->b;
  value want = value_null();
  if (!want_error && decode(ld, expect, &want, "expect")) return -2;

  /* the variables */
  bindings bs = {NULL, 0};
  if (bnd && bnd->n) {
    bs.b = arena_alloc(ld->a, bnd->n * sizeof *bs.b);
    if (!bs.b) return bad(ld, "out of memory"), -2;
    for (uint32_t i = 0; i < bnd->n; i++) {
      const map_entry *e = &bnd->entries[i];
      char where[160];
      snprintf(where, sizeof where, "binding '%.*s'", (int)(e->key.n > 100 ? 100 : e->key.n),
               e->key.s);
      bs.b[i].name = e->key.s;
      bs.b[i].len = e->key.n;
      if (decode(ld, &e->val, &bs.b[i].v, where)) return -2;
    }
    bs.n = bnd->n;
  }

  /* compile and evaluate */
  char *cont = container ? arena_strndup(ld->a, container->s, container->n) : NULL;
  expr_opts eo;
  memset(&eo, 0, sizeof eo);
  eo.container = cont;
  expr_program *prog = NULL;
  expr_error err;
  text got = {0};
  int ok;
  if (expr_compile(expr->s, expr->n, &eo, &prog, &err) != 0) {
    ok = want_error;
    if (!ok) {
      text_put(&got, "compile error: ", 15);
      const char *nl = strchr(err.message, '\n');
      text_put(&got, err.message, nl ? (size_t)(nl - err.message) : strlen(err.message));
    }
  } else {
    expr_activation act = {.lookup = lookup, .user = &bs};
    arena ea;
    arena_init(&ea, NULL, 0, CASE_MEMORY_LIMIT);
    eval_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.arena = &ea;
    ctx.cost_limit = CASE_COST_LIMIT;
    value r = expr_eval(prog, &act, &ctx);
    if (want_error)
      ok = r.kind == V_ERROR;
    else
      ok = same(&want, &r);
    if (!ok) text_value(&got, &r);
    arena_free(&ea);
    expr_free(prog);
  }

  if (!ok || opt->verbose) {
    text exp = {0};
    if (want_error)
      text_put(&exp, "an error", 8);
    else
      text_value(&exp, &want);
    printf("%s %.*s: ", ok ? "PASS" : "FAIL", (int)id->n, id->s);
    print_expr(expr);
    if (ok)
      printf("\n");
    else
      printf(" \xe2\x80\x94 expected %s, got %s\n", exp.s, got.s ? got.s : "?");
    free(exp.s);
  }
  free(got.s);

  const char *fname = file && file->kind == V_STRING ? file->s : id->s;
  size_t flen = id->n;
  if (file && file->kind == V_STRING) {
    flen = file->n;
  } else {
    const char *slash = memchr(id->s, '/', id->n);
    if (slash) flen = (size_t)(slash - id->s);
  }
  counter *fc = count_of(files, fname, flen);
  ok ? fc->pass++ : fc->fail++;
  if (tagv) {
    for (uint32_t i = 0; i < tagv->n; i++) {
      const value *t = &tagv->items[i];
      if (t->kind != V_STRING) continue;
      counter *tc = count_of(tags, t->s, t->n);
      ok ? tc->pass++ : tc->fail++;
    }
  }
  return ok;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: verdict-cel-conformance FILE.jsonl [--core] [--filter PREFIX] [--tags] [-v]\n"
          "  --core           run only the cases marked \"core\": true\n"
          "  --filter PREFIX  run only the cases whose id starts with PREFIX (e.g. string_ext/)\n"
          "  --tags           also print pass/fail counts per tag\n"
          "  -v               print passing cases too\n");
}

int main(int argc, char **argv) {
  options opt = {0, 0, 0, NULL};
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--core") == 0) {
      opt.core_only = 1;
    } else if (strcmp(argv[i], "--tags") == 0) {
      opt.tags = 1;
    } else if (strcmp(argv[i], "-v") == 0) {
      opt.verbose = 1;
    } else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
      opt.filter = argv[++i];
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "verdict-cel-conformance: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    } else if (!path) {
      path = argv[i];
    } else {
      fprintf(stderr, "verdict-cel-conformance: one cases file only\n");
      return 2;
    }
  }
  if (!path) {
    usage(stderr);
    return 2;
  }
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "verdict-cel-conformance: %s: %s\n", path, strerror(errno));
    return 2;
  }

  counters files = {0}, tags = {0};
  long passed = 0, failed = 0, lineno = 0;
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  arena a;
  arena_init(&a, NULL, 0, 0);
  int status = 0;
  while ((got = getline(&line, &cap, f)) >= 0) {
    lineno++;
    size_t n = (size_t)got;
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
    size_t k = 0;
    while (k < n && (line[k] == ' ' || line[k] == '\t')) k++;
    if (k == n) continue; /* blank line */
    arena_reset(&a);
    loader ld = {&a, path, lineno, ""};
    value c;
    json_error je;
    if (json_parse(&a, line, n, NULL, &c, &je) != 0) {
      fprintf(stderr, "%s:%ld: malformed line: invalid JSON at column %d (%s): %s\n", path, lineno,
              je.column, je.path, je.message);
      status = 2;
      break;
    }
    int r = run_case(&ld, &c, &opt, &files, &tags);
    if (r == -2) {
      const value *id = field(&c, "id");
      fprintf(stderr, "%s:%ld: malformed case%s%.*s%s: %s\n", path, lineno, id ? " '" : "",
              id && id->kind == V_STRING ? (int)id->n : 0, id && id->kind == V_STRING ? id->s : "",
              id ? "'" : "", ld.err);
      status = 2;
      break;
    }
    if (r == 1) passed++;
    if (r == 0) failed++;
  }
  free(line);
  arena_free(&a);
  if (f != stdin) fclose(f);
  if (status) {
    free(files.c);
    free(tags.c);
    return status;
  }

  printf("\nper file:\n");
  for (size_t i = 0; i < files.n; i++)
    printf("  %-20s %5ld passed, %ld failed\n", files.c[i].name, files.c[i].pass, files.c[i].fail);
  if (opt.tags) {
    printf("per tag:\n");
    for (size_t i = 0; i < tags.n; i++)
      printf("  %-28s %5ld passed, %ld failed\n", tags.c[i].name, tags.c[i].pass, tags.c[i].fail);
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  free(files.c);
  free(tags.c);
  return failed ? 1 : 0;
}
