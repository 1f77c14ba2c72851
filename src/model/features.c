/* features.c — feature specs: how a request becomes a model's input row.
 *
 * A spec (models/NAME.features.yaml, beside NAME.json) lists the model's
 * features in column order:
 *
 *   features:
 *     - name: req_per_min          # must equal the model's feature_names[i]
 *       type: number               # number | bool | categorical
 *       expr: signals.req_per_min  # a condition-language expression
 *       missing: nan               # nan (the default) or a number
 *     - name: country
 *       type: categorical
 *       expr: env.country
 *       vocab: [US, DE, FR]        # code = position; or a map {US: 0, DE: 1}
 *       unknown: missing           # missing (the default) or a code
 *
 * Expressions compile as policy conditions do and see the same names (the
 * caller passes the activation its rules use). At load the spec is checked
 * against the model: the number of features, the names (when the model has
 * them) and the types ('c' columns are categorical, the others numeric).
 * Not checked: that the vocabulary covers every code the model's splits
 * test (XGBoost does not store the vocabulary; a golden file catches a
 * wrong one).
 *
 * The YAML reader here is deliberately small (mappings, sequences, scalars;
 * aliases are refused, tags ignored): a spec is a short hand-written list, and
 * every error must name file:line:col. libfyaml parses; this file keeps the
 * positions from its events.
 *
 * Not here: where the spec file lives (the bundle loader), the trace. */
#include <libfyaml.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/bytes.h"
#include "core/utf8.h"
#include "model/model.h"

/* ---- a small YAML tree ---- */

enum { N_SCALAR, N_SEQ, N_MAP };

typedef struct ynode {
  int kind;
  int plain; /* scalars: unquoted (so `nan`, `1.5`, `true` are typed) */
  int line, col;
  const char *text; /* scalars, NUL-terminated */
  size_t len;
  struct ynode **kids; /* seq: items; map: key0, val0, ... */
  uint32_t n;          /* seq: items; map: pairs */
  uint32_t cap;
} ynode;

typedef struct sctx {
  const char *file;
  const char *src;
  size_t len;
  char *err;
  size_t errlen;
  int failed;
  arena a;
  /* Where the last node was placed: events come in input order, so each
   * node's line and column are counted on from there (counting from the
   * start for every node made a long one-line spec quadratic). */
  size_t at_pos;
  int at_line, at_col;
} sctx;

__attribute__((format(printf, 5, 6))) static int serr(sctx *c, const ynode *at, int line,
                                                      const char *key, const char *fmt, ...) {
  if (c->failed) return -1;
  c->failed = 1;
  if (!c->err || !c->errlen) return -1;
  int l = at ? at->line : line, col = at ? at->col : 1;
  int n = snprintf(c->err, c->errlen, "%s:%d:%d: %s%s", c->file, l, col, key ? key : "",
                   key && key[0] ? ": " : "");
  if (n < 0) n = 0;
  if ((size_t)n < c->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static int line_at(const char *src, size_t pos) {
  int line = 1;
  for (size_t i = 0; i < pos; i++) line += src[i] == '\n';
  return line;
}

static ynode *ynew(sctx *c, int kind, size_t pos) {
  ynode *y = arena_zalloc(&c->a, sizeof *y);
  if (!y) return NULL;
  y->kind = kind;
  if (pos > c->len) pos = c->len;
  if (pos < c->at_pos || c->at_line == 0) {
    c->at_pos = 0;
    c->at_line = c->at_col = 1;
  }
  for (size_t i = c->at_pos; i < pos; i++) {
    if (c->src[i] == '\n') {
      c->at_line++;
      c->at_col = 1;
    } else if (((unsigned char)c->src[i] & 0xC0) != 0x80) {
      c->at_col++;
    }
  }
  c->at_pos = pos;
  y->line = c->at_line;
  y->col = c->at_col;
  return y;
}

static void quiet(struct fy_diag *diag, void *user, const char *buf, size_t len) {}

typedef struct frame {
  ynode *node;
  ynode **kids;
  uint32_t nkids, cap;
} frame;

static int push_kid(frame *f, ynode *kid) {
  if (f->nkids == f->cap) {
    uint32_t cap = f->cap ? 2 * f->cap : 8;
    ynode **k = realloc(f->kids, cap * sizeof *k);
    if (!k) return -1;
    f->kids = k;
    f->cap = cap;
  }
  f->kids[f->nkids++] = kid;
  return 0;
}

/* Parses c->src into *root. */
static int yparse(sctx *c, ynode **root) {
  *root = NULL;
  size_t bad = utf8_validate(c->src, c->len, NULL);
  if (bad < c->len)
    return serr(c, NULL, line_at(c->src, bad), "", "not valid UTF-8 (byte 0x%02X)",
                (unsigned char)c->src[bad]);
  struct fy_diag_cfg dc;
  fy_diag_cfg_default(&dc);
  dc.fp = NULL;
  dc.output_fn = quiet;
  dc.colorize = false;
  struct fy_diag *diag = fy_diag_create(&dc);
  if (!diag) return serr(c, NULL, 1, "", "out of memory");
  fy_diag_set_collect_errors(diag, true);
  struct fy_parse_cfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_1_2 | FYPCF_JSON_NONE;
  cfg.diag = diag;
  struct fy_parser *p = fy_parser_create(&cfg);
  frame stack[64];
  uint32_t depth = 0;
  size_t last_end = 0;
  int docs = 0, rc = 0;
  if (!p || fy_parser_set_string(p, c->src, c->len)) {
    rc = serr(c, NULL, 1, "", "out of memory");
  } else {
    struct fy_event *e;
    while (!rc && (e = fy_parser_parse(p))) {
      const struct fy_mark *m = fy_event_start_mark(e);
      size_t pos = m ? m->input_pos : last_end;
      ynode *y = NULL;
      switch (e->type) {
        case FYET_DOCUMENT_START:
          if (++docs > 1) rc = serr(c, NULL, line_at(c->src, pos), "", "a second YAML document");
          break;
        case FYET_ALIAS:
          rc = serr(c, NULL, line_at(c->src, pos), "",
                    "aliases are not supported in a feature spec");
          break;
        case FYET_SCALAR: {
          if (!m) { /* an empty scalar has no mark: just after what came before */
            while (pos < c->len && (c->src[pos] == ':' || c->src[pos] == ' ')) pos++;
          }
          y = ynew(c, N_SCALAR, pos);
          size_t n = 0;
          const char *t = fy_token_get_text(e->scalar.value, &n);
          if (y) {
            y->text = arena_strndup(&c->a, t ? t : "", t ? n : 0);
            y->len = t ? n : 0;
            y->plain = fy_token_scalar_style(e->scalar.value) == FYSS_PLAIN;
          }
          if (!y || !y->text) rc = serr(c, NULL, 1, "", "out of memory");
          break;
        }
        case FYET_MAPPING_START:
        case FYET_SEQUENCE_START:
          if (depth == sizeof stack / sizeof stack[0]) {
            rc = serr(c, NULL, line_at(c->src, pos), "", "nested too deeply");
            break;
          }
          y = ynew(c, e->type == FYET_MAPPING_START ? N_MAP : N_SEQ, pos);
          if (!y) {
            rc = serr(c, NULL, 1, "", "out of memory");
            break;
          }
          stack[depth++] = (frame){y, NULL, 0, 0};
          y = NULL; /* attached when it ends */
          break;
        case FYET_MAPPING_END:
        case FYET_SEQUENCE_END: {
          frame *f = &stack[--depth];
          y = f->node;
          y->n = y->kind == N_MAP ? f->nkids / 2 : f->nkids;
          if (f->nkids) {
            y->kids = arena_memdup(&c->a, f->kids, f->nkids * sizeof *f->kids);
            if (!y->kids) rc = serr(c, NULL, 1, "", "out of memory");
          }
          free(f->kids);
          break;
        }
        default:
          break;
      }
      if (y && !rc) {
        if (depth == 0)
          *root = y;
        else if (push_kid(&stack[depth - 1], y))
          rc = serr(c, NULL, 1, "", "out of memory");
      }
      const struct fy_mark *end = fy_event_end_mark(e);
      if (end && end->input_pos <= c->len) last_end = end->input_pos;
      fy_parser_event_free(p, e);
    }
  }
  while (depth) free(stack[--depth].kids);
  void *it = NULL;
  struct fy_diag_error *de;
  while (!c->failed && (de = fy_diag_errors_iterate(diag, &it))) {
    if (de->type < FYET_ERROR) continue;
    int line = de->line > 0 ? de->line : 1;
    c->failed = 0;
    serr(c, NULL, line, "", "YAML syntax: %s", de->msg ? de->msg : "error");
    /* serr sets column 1; put libfyaml's column in */
    if (de->column > 0 && c->err && c->errlen)
      snprintf(c->err, c->errlen, "%s:%d:%d: YAML syntax: %s", c->file, line, de->column,
               de->msg ? de->msg : "error");
  }
  if (!c->failed && p && fy_parser_get_stream_error(p)) serr(c, NULL, 1, "", "YAML syntax error");
  if (p) fy_parser_destroy(p);
  fy_diag_destroy(diag);
  return c->failed ? -1 : 0;
}

/* ---- the spec ---- */

typedef struct vocab_entry {
  char *s;
  size_t n;
  float code;
} vocab_entry;

typedef struct feature {
  char *name;
  feature_type type;
  char *src;     /* expression text */
  int line, col; /* where it is written; plain: unquoted, so col + a byte offset is its column */
  int plain;
  expr_program *prog;
  float missing; /* NaN, or the default */
  float unknown; /* categoricals: NaN (missing) or a code */
  vocab_entry *vocab;
  uint32_t nvocab;
} feature;

struct feature_spec {
  feature *f;
  uint32_t n;
  /* the names again, NUL-terminated one after the other, and where each
   * starts: a decision copies them in one piece (features_names_packed) */
  char *names;
  size_t names_len;
  uint32_t *name_at;
};

/* as a strategy's rules compile: `limits.NAME` reads that limit alone */
static const char *const CLAIMED[] = {"limits"};
static const expr_opts EXPR_OPTS = {.simple_names = 1, .claimed = CLAIMED, .nclaimed = 1};

static int is_key(const ynode *k, const char *s) {
  return k->kind == N_SCALAR && k->len == strlen(s) && memcmp(k->text, s, k->len) == 0;
}

static const ynode *get(const ynode *map, const char *key) {
  for (uint32_t i = 0; i < map->n; i++)
    if (is_key(map->kids[2 * i], key)) return map->kids[2 * i + 1];
  return NULL;
}

static int scalar_number(const ynode *y, double *out) {
  if (y->kind != N_SCALAR || !y->plain || !y->len) return -1;
  char *end;
  *out = strtod(y->text, &end);
  if (*end) return -1;
  return 0;
}

/* `missing:` / `unknown:` values: nan/missing, or a number (bools for bool features). */
static int read_default(sctx *c, const ynode *y, const char *key, feature_type t, float *out) {
  if (y->kind == N_SCALAR && y->plain &&
      (is_key(y, "nan") || is_key(y, ".nan") || is_key(y, "NaN") || is_key(y, "missing"))) {
    *out = NAN;
    return 0;
  }
  if (t == FEATURE_BOOL && y->kind == N_SCALAR && y->plain) {
    if (is_key(y, "true")) return *out = 1.0f, 0;
    if (is_key(y, "false")) return *out = 0.0f, 0;
  }
  double d;
  if (scalar_number(y, &d) || !isfinite(d))
    return serr(c, y, 0, key, "should be nan (missing) or a finite number, not '%s'",
                y->kind == N_SCALAR ? y->text : "a collection");
  *out = (float)d;
  return 0;
}

static void spec_free(feature_spec *fs) {
  if (!fs) return;
  for (uint32_t i = 0; i < fs->n; i++) {
    feature *f = &fs->f[i];
    free(f->name);
    free(f->src);
    expr_free(f->prog);
    for (uint32_t k = 0; k < f->nvocab; k++) free(f->vocab[k].s);
    free(f->vocab);
  }
  free(fs->f);
  free(fs->names);
  free(fs->name_at);
  free(fs);
}

void features_free(feature_spec *fs) { spec_free(fs); }

static const char *const FEATURE_KEYS[] = {"name",  "type",    "expr",       "missing",
                                           "vocab", "unknown", "description"};

static int read_vocab(sctx *c, const ynode *y, const char *key, feature *f) {
  uint32_t n = y->n;
  if ((y->kind != N_SEQ && y->kind != N_MAP) || n == 0)
    return serr(c, y, 0, key,
                "should be a list of the category values (code = position) or a map "
                "value: code");
  f->vocab = calloc(n, sizeof *f->vocab);
  if (!f->vocab) return serr(c, y, 0, key, "out of memory");
  for (uint32_t i = 0; i < n; i++) {
    const ynode *s = y->kind == N_SEQ ? y->kids[i] : y->kids[2 * i];
    if (s->kind != N_SCALAR) return serr(c, s, 0, key, "a category value should be a scalar");
    double code = i;
    if (y->kind == N_MAP) {
      const ynode *v = y->kids[2 * i + 1];
      if (scalar_number(v, &code) || code < 0 || code >= (1 << 24) || code != floor(code))
        return serr(c, v, 0, key, "the code of '%s' should be a whole number from 0 to 2^24-1",
                    s->text);
    }
    for (uint32_t k = 0; k < f->nvocab; k++)
      if (f->vocab[k].n == s->len && memcmp(f->vocab[k].s, s->text, s->len) == 0)
        return serr(c, s, 0, key, "'%s' is listed twice", s->text);
    f->vocab[f->nvocab].s = strndup(s->text, s->len);
    f->vocab[f->nvocab].n = s->len;
    f->vocab[f->nvocab].code = (float)code;
    if (!f->vocab[f->nvocab].s) return serr(c, s, 0, key, "out of memory");
    f->nvocab++;
  }
  return 0;
}

static int read_feature(sctx *c, const ynode *y, uint32_t i, feature *f) {
  char key[64];
  snprintf(key, sizeof key, "features[%u]", i);
  f->missing = NAN;
  f->unknown = NAN;
  if (y->kind != N_MAP) return serr(c, y, 0, key, "should be a map with name, type and expr");
  char sub[96];
  const ynode *name = get(y, "name"), *type = get(y, "type"), *ex = get(y, "expr");
  if (!name || name->kind != N_SCALAR || !name->len)
    return serr(c, name ? name : y, 0, key, "needs a name (the model's name for the column)");
  f->name = strndup(name->text, name->len);
  if (!f->name) return serr(c, y, 0, key, "out of memory");
  snprintf(key, sizeof key, "features[%u] (%.40s)", i, f->name);
  for (uint32_t k = 0; k < y->n; k++) {
    const ynode *kn = y->kids[2 * k];
    int known = 0;
    for (size_t j = 0; j < sizeof FEATURE_KEYS / sizeof FEATURE_KEYS[0]; j++)
      known |= is_key(kn, FEATURE_KEYS[j]);
    if (!known)
      return serr(c, kn, 0, key,
                  "unknown key '%s' (a feature has name, type, expr, missing, vocab, unknown, "
                  "description)",
                  kn->kind == N_SCALAR ? kn->text : "?");
  }
  snprintf(sub, sizeof sub, "%s.type", key);
  if (!type || type->kind != N_SCALAR)
    return serr(c, type ? type : y, 0, type ? sub : key,
                "needs a type: number, bool or categorical");
  if (is_key(type, "number"))
    f->type = FEATURE_NUMBER;
  else if (is_key(type, "bool"))
    f->type = FEATURE_BOOL;
  else if (is_key(type, "categorical"))
    f->type = FEATURE_CATEGORICAL;
  else
    return serr(c, type, 0, sub, "unknown type '%s' (number, bool or categorical)", type->text);
  snprintf(sub, sizeof sub, "%s.expr", key);
  if (!ex || ex->kind != N_SCALAR || !ex->len)
    return serr(c, ex ? ex : y, 0, ex ? sub : key,
                "needs an expr: the condition-language expression that computes it");
  f->src = strndup(ex->text, ex->len);
  if (!f->src) return serr(c, y, 0, key, "out of memory");
  f->line = ex->line;
  f->col = ex->col;
  f->plain = ex->plain;
  expr_error ee;
  if (expr_compile(ex->text, ex->len, &EXPR_OPTS, &f->prog, &ee)) {
    f->prog = NULL;
    /* ee.line/column are inside the expression; a plain scalar on one line maps directly */
    c->failed = 0;
    int line = ex->line + (ee.line > 1 ? ee.line - 1 : 0);
    int col = ee.line <= 1 && ex->plain ? ex->col + (ee.column > 0 ? ee.column - 1 : 0) : ex->col;
    const char *msg = ee.message;
    const char *colon = strstr(msg, ": "); /* drop the expression's own "L:C: " */
    if (colon && colon - msg < 12) msg = colon + 2;
    c->failed = 1;
    if (c->err && c->errlen)
      snprintf(c->err, c->errlen, "%s:%d:%d: %s: %s", c->file, line, col, sub, msg);
    return -1;
  }
  const ynode *mv = get(y, "missing");
  snprintf(sub, sizeof sub, "%s.missing", key);
  if (mv && read_default(c, mv, sub, f->type, &f->missing)) return -1;
  const ynode *vv = get(y, "vocab"), *uv = get(y, "unknown");
  if (f->type != FEATURE_CATEGORICAL) {
    if (vv) return serr(c, vv, 0, key, "vocab is for categorical features only");
    if (uv) return serr(c, uv, 0, key, "unknown is for categorical features only");
    return 0;
  }
  snprintf(sub, sizeof sub, "%s.vocab", key);
  if (!vv)
    return serr(c, y, 0, key,
                "a categorical feature needs a vocab: the values in the order of their codes at "
                "training");
  if (read_vocab(c, vv, sub, f)) return -1;
  snprintf(sub, sizeof sub, "%s.unknown", key);
  if (uv && read_default(c, uv, sub, FEATURE_NUMBER, &f->unknown)) return -1;
  if (uv && !isnan(f->unknown) && (f->unknown < 0 || f->unknown != floorf(f->unknown)))
    return serr(c, uv, 0, sub, "should be missing or a category code (a whole number >= 0)");
  return 0;
}

int features_load_yaml(const char *text, size_t len, const char *file, const gbdt_model *m,
                       feature_spec **out, char *err, size_t errlen) {
  *out = NULL;
  sctx c = {
      .file = file ? file : "<memory>", .src = text, .len = len, .err = err, .errlen = errlen};
  if (err && errlen) err[0] = 0;
  arena_init(&c.a, NULL, 0, 0);
  ynode *root;
  feature_spec *fs = NULL;
  if (yparse(&c, &root)) goto done;
  if (!root || root->kind != N_MAP) {
    serr(&c, root, 1, "", "a feature spec is a map with a 'features' list");
    goto done;
  }
  for (uint32_t k = 0; k < root->n; k++) {
    const ynode *kn = root->kids[2 * k];
    if (!is_key(kn, "features") && !is_key(kn, "model") && !is_key(kn, "description")) {
      serr(&c, kn, 0, "", "unknown key '%s' (a spec has features, and may have model, description)",
           kn->kind == N_SCALAR ? kn->text : "?");
      goto done;
    }
  }
  const ynode *list = get(root, "features");
  if (!list || list->kind != N_SEQ || list->n == 0) {
    serr(&c, list ? list : root, 0, "features",
         "should be a list of the model's features, in column order");
    goto done;
  }
  fs = calloc(1, sizeof *fs);
  if (fs) fs->f = calloc(list->n, sizeof *fs->f);
  if (!fs || !fs->f) {
    serr(&c, root, 0, "", "out of memory");
    goto done;
  }
  for (uint32_t i = 0; i < list->n; i++) {
    fs->n = i + 1;
    if (read_feature(&c, list->kids[i], i, &fs->f[i])) goto done;
    for (uint32_t j = 0; j < i; j++)
      if (!strcmp(fs->f[j].name, fs->f[i].name)) {
        serr(&c, list->kids[i], 0, "features", "feature '%s' is declared twice", fs->f[i].name);
        goto done;
      }
  }
  if (m) {
    uint32_t nm = gbdt_num_features(m);
    if (fs->n != nm) {
      serr(&c, list, 0, "features",
           "declares %u features, but the model takes %u (one entry per model column, in order)",
           fs->n, nm);
      goto done;
    }
    for (uint32_t i = 0; i < fs->n; i++) {
      const ynode *fy = list->kids[i];
      const char *mn = gbdt_feature_name(m, i);
      char key[96];
      snprintf(key, sizeof key, "features[%u].name", i);
      if (mn && strcmp(mn, fs->f[i].name)) {
        const ynode *nn = get(fy, "name");
        uint32_t other = UINT32_MAX;
        for (uint32_t j = 0; j < nm; j++)
          if (gbdt_feature_name(m, j) && !strcmp(gbdt_feature_name(m, j), fs->f[i].name)) other = j;
        if (other != UINT32_MAX)
          serr(&c, nn, 0, key,
               "'%s' is column %u of the model, not %u (the model's column %u is "
               "'%s'): list the features in the model's order",
               fs->f[i].name, other, i, i, mn);
        else
          serr(&c, nn, 0, key, "'%s' is not the model's column %u, which is '%s'", fs->f[i].name, i,
               mn);
        goto done;
      }
      char mt = gbdt_feature_type(m, i);
      snprintf(key, sizeof key, "features[%u].type", i);
      if ((mt == 'c') != (fs->f[i].type == FEATURE_CATEGORICAL)) {
        serr(&c, get(fy, "type"), 0, key, "'%s' is %s in the model, but declared %s here",
             fs->f[i].name, mt == 'c' ? "categorical" : "numeric",
             features_type_name(fs->f[i].type));
        goto done;
      }
    }
  }
  size_t total = 0;
  for (uint32_t i = 0; i < fs->n; i++) total += strlen(fs->f[i].name) + 1;
  fs->names = malloc(total);
  fs->name_at = malloc(fs->n * sizeof *fs->name_at);
  if (!fs->names || !fs->name_at) {
    serr(&c, root, 0, "", "out of memory");
    goto done;
  }
  for (uint32_t i = 0; i < fs->n; i++) {
    size_t k = strlen(fs->f[i].name) + 1;
    fs->name_at[i] = (uint32_t)fs->names_len;
    memcpy(fs->names + fs->names_len, fs->f[i].name, k);
    fs->names_len += k;
  }
done:
  arena_free(&c.a);
  if (c.failed) {
    spec_free(fs);
    return -1;
  }
  *out = fs;
  return 0;
}

int features_load_file(const char *path, const gbdt_model *m, feature_spec **out, char *err,
                       size_t errlen) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (err && errlen) snprintf(err, errlen, "%s: cannot open the feature spec: %m", path);
    return -1;
  }
  size_t cap = 1 << 14, len = 0;
  char *buf = malloc(cap);
  while (buf) {
    len += fread(buf + len, 1, cap - len, f);
    if (len < cap) break;
    char *nb = cap < (64u << 20) ? realloc(buf, cap * 2) : NULL;
    if (!nb) free(buf);
    buf = nb;
    cap *= 2;
  }
  int bad = ferror(f);
  fclose(f);
  if (!buf || bad) {
    free(buf);
    if (err && errlen) snprintf(err, errlen, "%s: cannot read the feature spec", path);
    return -1;
  }
  int rc = features_load_yaml(buf, len, path, m, out, err, errlen);
  free(buf);
  return rc;
}

char *features_path_for(const char *model_path) {
  size_t n = strlen(model_path);
  if (n > 5 && !strcmp(model_path + n - 5, ".json")) n -= 5;
  char *p = malloc(n + sizeof ".features.yaml");
  if (!p) return NULL;
  memcpy(p, model_path, n);
  memcpy(p + n, ".features.yaml", sizeof ".features.yaml");
  return p;
}

uint32_t features_count(const feature_spec *fs) { return fs->n; }
const char *features_name(const feature_spec *fs, uint32_t i) { return fs->f[i].name; }
feature_type features_type(const feature_spec *fs, uint32_t i) { return fs->f[i].type; }
const char *features_expr(const feature_spec *fs, uint32_t i) { return fs->f[i].src; }
const expr_program *features_program(const feature_spec *fs, uint32_t i) { return fs->f[i].prog; }
void features_expr_place(const feature_spec *fs, uint32_t i, size_t pos, int *line, int *col) {
  const feature *f = &fs->f[i];
  *line = f->line;
  *col = f->col;
  /* a plain scalar on one line is the expression byte for byte */
  if (f->plain && pos <= strlen(f->src) && !memchr(f->src, '\n', pos)) *col += (int)pos;
}
const char *features_names_packed(const feature_spec *fs, size_t *len, const uint32_t **at) {
  *len = fs->names_len;
  *at = fs->name_at;
  return fs->names;
}
const char *features_type_name(feature_type t) {
  switch (t) {
    case FEATURE_NUMBER:
      return "number";
    case FEATURE_BOOL:
      return "bool";
    default:
      return "categorical";
  }
}

/* ---- extraction ---- */

uint32_t features_extract(const feature_spec *fs, const expr_activation *act, eval_ctx *ctx,
                          float *row, uint8_t *status, const char **first_error) {
  uint32_t off = 0;
  if (first_error) *first_error = NULL;
  for (uint32_t i = 0; i < fs->n; i++) {
    const feature *f = &fs->f[i];
    value v = expr_eval_quiet(f->prog, act, ctx); /* most errors only make a feature missing */
    int ok = 0;
    float x = NAN;
    uint8_t st = FX_VALUE;
    switch (f->type) {
      case FEATURE_NUMBER:
        if (v.kind == V_INT)
          x = (float)v.i, ok = 1;
        else if (v.kind == V_UINT)
          x = (float)v.u, ok = 1;
        else if (v.kind == V_DOUBLE)
          x = (float)v.d, ok = isfinite(x);
        else if (v.kind == V_BOOL)
          x = v.b ? 1.0f : 0.0f, ok = 1;
        break;
      case FEATURE_BOOL:
        if (v.kind == V_BOOL) x = v.b ? 1.0f : 0.0f, ok = 1;
        break;
      case FEATURE_CATEGORICAL:
        if (v.kind == V_STRING) {
          ok = 1;
          st = FX_UNKNOWN;
          x = f->unknown;
          for (uint32_t k = 0; k < f->nvocab; k++)
            if (f->vocab[k].n == v.n && bytes_same(f->vocab[k].s, v.s, v.n)) {
              x = f->vocab[k].code;
              st = FX_VALUE;
              break;
            }
        }
        break;
    }
    if (!ok) {
      if (v.kind == V_ERROR && first_error && !*first_error) {
        /* a lazy message is written NUL-terminated into the arena: no copy */
        *first_error = v.flags & VF_LAZY ? value_error_text(ctx->arena, v).s
                                         : arena_strndup(ctx->arena, v.s, v.n);
      }
      x = f->missing;
      st = isnan(x) ? FX_MISSING : FX_DEFAULT;
    }
    if (st != FX_VALUE) off++;
    row[i] = x;
    if (status) status[i] = st;
  }
  return off;
}
