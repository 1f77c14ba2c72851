/* retention.c — the retention file: load, check, decide (retention.h).
 *
 * The file is YAML read with the policy's own loader, so its errors name
 * file:line:col like a strategy's; its conditions are CEL compiled with
 * every variable declared, so a misspelt name (`sourc`) is an error at
 * load, not a surprise at gc. A snapshot is decided from its JSON, parsed
 * once per old record; records inside the full window are never parsed
 * (gc keeps them from their header's time alone).
 *
 * Errors keep: a condition that fails on a snapshot (a field missing, a
 * type mismatch) keeps it and is counted. Losing a record to a typo is
 * worse than keeping one too many. */
#define _GNU_SOURCE
#include "policy/retention.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/json.h"
#include "expr/expr.h"
#include "policy/internal.h"

#define DEFAULT_KEEP \
  "!allowed || review || source == \"model\" || source == \"error\" || confidence < 0.8"
#define DEFAULT_RATE 0.01
#define DEFAULT_EVERY_MS 3600000ull

typedef struct sample_class {
  expr_program *when; /* NULL: every snapshot */
  double rate;
} sample_class;

struct retention {
  double keep_days;
  uint64_t every_ms;
  expr_program *keep;
  sample_class *classes;
  uint32_t nclasses;
  arena scratch; /* one snapshot's values */
  retention_counts counts;
  char first_error[512];
};

/* The snapshot's keys (docs/snapshots.md, "Snapshot contents") and the
 * names retention adds. `shadow` and later keys may be absent: declaring
 * them keeps a condition that names them valid on every snapshot. */
static const char *const NAMES[] = {
    "format",
    "id",
    "time",
    "time_ns",
    "node",
    "engine_version",
    "point",
    "request",
    "candidates",
    "key",
    "strategy",
    "policy_version",
    "bundle_version",
    "model_version",
    "features",
    "model",
    "trace",
    "lets",
    "let_errors",
    "model_score",
    "model_confidence",
    "action",
    "allowed",
    "review",
    "confidence",
    "source",
    "reason",
    "latency_ns",
    "limits",
    "inputs",
    "shadow",
    "rollout",
    "latency_us",
    "ctx",
    "has_shadow",
};
#define NNAMES (sizeof NAMES / sizeof NAMES[0])

static const expr_opts OPTS = {.simple_names = 1, .declared = NAMES, .ndeclared = NNAMES};

static void bare_message(const char *m, char *out, size_t cap) {
  const char *p = m;
  while (*p >= '0' && *p <= '9') p++;
  if (p > m && *p == ':') {
    const char *q = p + 1;
    while (*q >= '0' && *q <= '9') q++;
    if (q > p + 1 && q[0] == ':' && q[1] == ' ') m = q + 2;
  }
  size_t n = strcspn(m, "\n");
  if (n >= cap) n = cap - 1;
  memcpy(out, m, n);
  out[n] = 0;
}

typedef struct loader {
  const char *file, *src;
  size_t len;
  policy_diags *d;
} loader;

static expr_program *compile_at(loader *L, const ynode *n, const char *key) {
  if (n->kind != Y_SCALAR || n->v.kind != V_STRING) {
    diag_add(L->d, DIAG_ERROR, L->file, n->line, n->col, key, "expected a CEL condition (text)");
    return NULL;
  }
  expr_program *p = NULL;
  expr_error e;
  if (expr_compile(n->text, n->len, &OPTS, &p, &e) != 0) {
    int line = n->line, col = n->col;
    size_t at = n->pos;
    size_t off = e.offset < n->len ? e.offset : n->len;
    yaml_scalar_place(n, L->src, L->len, off, &line, &col, &at);
    char msg[1024];
    bare_message(e.message, msg, sizeof msg);
    diag_excerpt(msg, sizeof msg, L->src, L->len, at);
    diag_add(L->d, DIAG_ERROR, L->file, line, col, key, "%s", msg);
    return NULL;
  }
  return p;
}

static int number_at(loader *L, const ynode *n, const char *key, double lo, double hi,
                     double *out) {
  if (n->kind == Y_SCALAR && (n->v.kind == V_INT || n->v.kind == V_UINT || n->v.kind == V_DOUBLE)) {
    double d = n->v.kind == V_INT ? (double)n->v.i : n->v.kind == V_UINT ? (double)n->v.u : n->v.d;
    if (d >= lo && d <= hi) {
      *out = d;
      return 0;
    }
  }
  if (isinf(hi))
    diag_add(L->d, DIAG_ERROR, L->file, n->line, n->col, key, "expected a number >= %g", lo);
  else
    diag_add(L->d, DIAG_ERROR, L->file, n->line, n->col, key, "expected a number in [%g, %g]", lo,
             hi);
  return -1;
}

/* "90s", "15m", "1h", "1h30m", "1d" (or a number of seconds) -> ms. */
static int duration_at(loader *L, const ynode *n, const char *key, uint64_t *out) {
  if (n->kind == Y_SCALAR && (n->v.kind == V_INT || n->v.kind == V_UINT) && n->v.i > 0) {
    *out = (uint64_t)n->v.i * 1000;
    return 0;
  }
  if (n->kind == Y_SCALAR && n->v.kind == V_STRING && n->len) {
    const char *p = n->text;
    uint64_t total = 0;
    int parts = 0;
    while (*p) {
      char *end;
      errno = 0;
      unsigned long long v = strtoull(p, &end, 10);
      if (end == p || errno) break;
      uint64_t unit = *end == 's'   ? 1000
                      : *end == 'm' ? 60000
                      : *end == 'h' ? 3600000
                      : *end == 'd' ? 86400000
                                    : 0;
      if (!unit) break;
      total += v * unit;
      p = end + 1;
      parts++;
    }
    if (!*p && parts && total > 0) {
      *out = total;
      return 0;
    }
  }
  diag_add(L->d, DIAG_ERROR, L->file, n->line, n->col, key,
           "expected a duration like 30m, 1h or 1h30m (or seconds), more than zero");
  return -1;
}

static void unknown_key(loader *L, const ynode *k, const char *where, const char *known) {
  diag_add(L->d, DIAG_ERROR, L->file, k->line, k->col, where, "unknown key '%s' (known: %s)",
           k->text ? k->text : "", known);
}

static void load_sample(loader *L, retention *r, const ynode *n) {
  if (n->kind != Y_SEQ) {
    diag_add(L->d, DIAG_ERROR, L->file, n->line, n->col, "sample",
             "expected a list of classes: - {if: CONDITION, rate: F}");
    return;
  }
  r->classes = calloc(n->n ? n->n : 1, sizeof *r->classes);
  if (!r->classes) {
    diag_add(L->d, DIAG_ERROR, L->file, 0, 0, "", "out of memory");
    return;
  }
  for (uint32_t i = 0; i < n->n; i++) {
    const ynode *c = n->kids[i];
    char key[64];
    snprintf(key, sizeof key, "sample[%u]", i);
    if (c->kind != Y_MAP) {
      diag_add(L->d, DIAG_ERROR, L->file, c->line, c->col, key,
               "expected a class: {if: CONDITION, rate: F} (if may be left out)");
      continue;
    }
    sample_class *sc = &r->classes[r->nclasses++];
    int has_rate = 0;
    for (uint32_t j = 0; j < c->n; j++) {
      const ynode *k = c->kids[2 * j], *v = c->kids[2 * j + 1];
      char sub[96];
      snprintf(sub, sizeof sub, "%s.%s", key, k->text ? k->text : "");
      if (k->text && !strcmp(k->text, "if")) {
        sc->when = compile_at(L, v, sub);
      } else if (k->text && !strcmp(k->text, "rate")) {
        has_rate = number_at(L, v, sub, 0, 1, &sc->rate) == 0;
      } else {
        unknown_key(L, k, key, "if, rate");
      }
    }
    if (!has_rate && !L->d->errors)
      diag_add(L->d, DIAG_ERROR, L->file, c->line, c->col, key,
               "a class needs its rate: the share of its snapshots kept, in [0, 1]");
  }
}

int retention_from_text(const char *file, const char *src, size_t len, retention **out,
                        policy_diags *d) {
  *out = NULL;
  size_t errors0 = d->errors;
  retention *r = calloc(1, sizeof *r);
  if (!r) {
    diag_add(d, DIAG_ERROR, file, 0, 0, "", "out of memory");
    return -1;
  }
  r->keep_days = 7;
  r->every_ms = DEFAULT_EVERY_MS;
  arena_init(&r->scratch, NULL, 0, 0);
  arena a;
  arena_init(&a, NULL, 0, 0);
  loader L = {file, src, len, d};
  ynode *root = NULL;
  int have_keep = 0, have_sample = 0;
  if (yaml_load(&a, file, src, len, &root, d) == 0 && root) {
    if (root->kind != Y_MAP) {
      diag_add(d, DIAG_ERROR, file, root->line, root->col, "",
               "a retention file is a mapping: keep_days, keep, sample, every");
    } else {
      for (uint32_t i = 0; i < root->n; i++) {
        const ynode *k = root->kids[2 * i], *v = root->kids[2 * i + 1];
        const char *name = k->text ? k->text : "";
        if (!strcmp(name, "keep_days")) {
          number_at(&L, v, name, 0, INFINITY, &r->keep_days);
        } else if (!strcmp(name, "keep")) {
          r->keep = compile_at(&L, v, name);
          have_keep = 1;
        } else if (!strcmp(name, "sample")) {
          load_sample(&L, r, v);
          have_sample = 1;
        } else if (!strcmp(name, "every")) {
          duration_at(&L, v, name, &r->every_ms);
        } else {
          unknown_key(&L, k, "", "keep_days, keep, sample, every");
        }
      }
    }
  }
  arena_free(&a);
  if (d->errors == errors0 && !have_keep) {
    expr_error e;
    if (expr_compile(DEFAULT_KEEP, strlen(DEFAULT_KEEP), &OPTS, &r->keep, &e) != 0)
      diag_add(d, DIAG_ERROR, file, 0, 0, "keep", "the default condition: %s", e.message);
  }
  if (d->errors == errors0 && !have_sample) {
    r->classes = calloc(1, sizeof *r->classes);
    if (r->classes) r->classes[r->nclasses++].rate = DEFAULT_RATE;
  }
  if (d->errors != errors0) {
    retention_free(r);
    return -1;
  }
  *out = r;
  return 0;
}

int retention_load(const char *file, retention **out, policy_diags *d) {
  *out = NULL;
  FILE *f = fopen(file, "rb");
  if (!f) {
    diag_add(d, DIAG_ERROR, file, 0, 0, "", "cannot read the retention file: %s", strerror(errno));
    return -1;
  }
  char *src = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 > cap) {
      cap = cap ? cap * 2 : 8192;
      char *p = realloc(src, cap);
      if (!p) break;
      src = p;
    }
    size_t got = fread(src + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (!src || bad) {
    free(src);
    diag_add(d, DIAG_ERROR, file, 0, 0, "", "cannot read the retention file");
    return -1;
  }
  int rc = retention_from_text(file, src, len, out, d);
  free(src);
  return rc;
}

void retention_free(retention *r) {
  if (!r) return;
  expr_free(r->keep);
  for (uint32_t i = 0; i < r->nclasses; i++) expr_free(r->classes[i].when);
  free(r->classes);
  arena_free(&r->scratch);
  free(r);
}

double retention_keep_days(const retention *r) { return r->keep_days; }
uint64_t retention_every_ms(const retention *r) { return r->every_ms; }

uint64_t retention_errors(const retention *r, const char **first) {
  if (first) *first = r->first_error;
  return r->counts.errors;
}

void retention_counts_get(const retention *r, retention_counts *out) { *out = r->counts; }

/* What the conditions read: the snapshot's keys, and the names retention
 * adds. */
typedef struct snap_vars {
  const value *root;
  value latency_us, ctx, has_shadow;
} snap_vars;

static int lookup(void *user, const char *name, size_t len, value *out) {
  const snap_vars *s = user;
  if (len == 10 && !memcmp(name, "latency_us", 10)) {
    *out = s->latency_us;
    return out->kind == V_NULL ? -1 : 0;
  }
  if (len == 3 && !memcmp(name, "ctx", 3)) {
    *out = s->ctx;
    return out->kind == V_NULL ? -1 : 0;
  }
  if (len == 10 && !memcmp(name, "has_shadow", 10)) {
    *out = s->has_shadow;
    return 0;
  }
  const value *v = value_map_get(s->root, name, len);
  if (!v && len == 6 && !memcmp(name, "shadow", 6)) {
    /* no shadow ran: the decision is its own shadow (they agree) */
    *out = *s->root;
    return 0;
  }
  if (!v) return -1;
  *out = *v;
  return 0;
}

static void note_error(retention *r, const char *what, value v) {
  r->counts.errors++;
  if (r->first_error[0]) return;
  if (v.kind == V_ERROR) {
    v = value_error_text(&r->scratch, v);
    snprintf(r->first_error, sizeof r->first_error, "%s: %.*s", what, (int)v.n, v.s);
  } else {
    snprintf(r->first_error, sizeof r->first_error, "%s: not a bool", what);
  }
}

/* 1 true, 0 false, -1 failed (counted). */
static int holds(retention *r, const expr_program *p, const snap_vars *s, const char *what) {
  expr_activation act = {lookup, (void *)s};
  eval_ctx ec;
  memset(&ec, 0, sizeof ec);
  ec.arena = &r->scratch;
  ec.cost_limit = 1000000;
  value v = expr_eval(p, &act, &ec);
  if (v.kind == V_BOOL) return v.b ? 1 : 0;
  note_error(r, what, v);
  return -1;
}

int retention_keeps(retention *r, double sample_point, const char *payload, size_t len) {
  arena_reset(&r->scratch);
  r->counts.decided++;
  value root;
  json_opts jo = {.lenient = 1, .duplicates = JSON_DUP_LAST_WINS};
  json_error je;
  if (json_parse(&r->scratch, payload, len, &jo, &root, &je) != 0 || root.kind != V_MAP) {
    r->counts.errors++;
    if (!r->first_error[0])
      snprintf(r->first_error, sizeof r->first_error, "a snapshot's JSON does not read: %s",
               je.message);
    r->counts.kept_by_condition++;
    return 1;
  }
  snap_vars s = {&root, value_null(), value_null(), value_bool(false)};
  const value *lat = value_map_get(&root, "latency_ns", 10);
  const value *tot = lat ? value_map_get(lat, "total", 5) : NULL;
  if (tot && (tot->kind == V_INT || tot->kind == V_UINT || tot->kind == V_DOUBLE))
    s.latency_us = value_double((tot->kind == V_INT    ? (double)tot->i
                                 : tot->kind == V_UINT ? (double)tot->u
                                                       : tot->d) /
                                1000.0);
  const value *req = value_map_get(&root, "request", 7);
  const value *ctx = req ? value_map_get(req, "context", 7) : NULL;
  if (ctx) s.ctx = *ctx;
  s.has_shadow = value_bool(value_map_get(&root, "shadow", 6) != NULL);
  int k = holds(r, r->keep, &s, "keep");
  if (k != 0) { /* true, or failed: kept */
    r->counts.kept_by_condition++;
    return 1;
  }
  for (uint32_t i = 0; i < r->nclasses; i++) {
    const sample_class *c = &r->classes[i];
    int m = 1;
    if (c->when) {
      char what[32];
      snprintf(what, sizeof what, "sample[%u].if", i);
      m = holds(r, c->when, &s, what);
    }
    if (m < 0) {
      r->counts.kept_by_condition++;
      return 1;
    }
    if (m) {
      int in = sample_point < c->rate;
      r->counts.kept_by_sample += (uint64_t)in;
      return in;
    }
  }
  return 0; /* no class takes it */
}
