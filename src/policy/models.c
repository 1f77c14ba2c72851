/* models.c — the models a bundle's strategies fall back to.
 *
 * A strategy's `fallback.model: NAME` resolves to models/NAME.json in the
 * bundle folder, and its input row to the feature spec beside it,
 * models/NAME.features.yaml (or the file `fallback.features` names, in the
 * same folder). Each (model, spec) pair is loaded once per bundle, however
 * many strategies use it, and checked against every strategy that does:
 * a multiclass model needs `classes`, one action a class; `classes` needs a
 * multiclass model.
 *
 * Both files are also kept in the version store, under their content hash
 * (<store>/models/<sha256>.json and <sha256>.features.yaml), beside the
 * strategies' versions: a snapshot names the model and spec versions a
 * decision used, and replay finds them there after the bundle has moved on.
 *
 * Not here: scoring (src/model/), when a decision asks the model (the
 * engine, src/engine/decide.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "policy/internal.h"

#define MAX_MODEL_FILE (256u << 20)

static char *slurp(const char *path, size_t *len, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s", strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (n < cap) break;
    if (cap >= MAX_MODEL_FILE) {
      snprintf(err, errlen, "larger than %u MiB", MAX_MODEL_FILE >> 20);
      free(buf);
      buf = NULL;
      break;
    }
    char *nb = realloc(buf, cap * 2 + 1);
    if (!nb) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nb;
    cap *= 2;
  }
  if (buf && ferror(f)) {
    snprintf(err, errlen, "read error: %s", strerror(errno));
    free(buf);
    buf = NULL;
  } else if (!buf && !err[0]) {
    snprintf(err, errlen, "out of memory");
  }
  fclose(f);
  if (buf) {
    buf[n] = '\0';
    *len = n;
  }
  return buf;
}

/* Loads one model and its spec into m. Returns 0, or -1 with a message. */
static int load_pair(bundle_model *m, const char *model_path, const char *spec_path,
                     const char *store, const char *pin, char *err, size_t errlen) {
  size_t mlen = 0, flen = 0;
  char why[256] = "";
  char *mtext = slurp(model_path, &mlen, why, sizeof why);
  if (!mtext) {
    snprintf(err, errlen, "cannot read the model %s: %s", model_path, why);
    return -1;
  }
  int rc = gbdt_load_json(mtext, mlen, model_path, &m->gbdt, err, errlen);
  if (rc == 0) {
    snprintf(m->version, sizeof m->version, "%s", gbdt_version(m->gbdt));
    why[0] = '\0';
    char *ftext = slurp(spec_path, &flen, why, sizeof why);
    if (!ftext) {
      snprintf(err, errlen,
               "cannot read the feature spec %s: %s (a model's input row is declared in "
               "NAME.features.yaml beside it; docs/models.md)",
               spec_path, why);
      rc = -1;
    } else {
      rc = features_load_yaml(ftext, flen, spec_path, m->gbdt, &m->features, err, errlen);
      if (rc == 0 && policy_sha256_hex(ftext, flen, m->features_version)) {
        snprintf(err, errlen, "out of memory hashing %s", spec_path);
        rc = -1;
      }
      /* the store, then the snapshot folder's own versions (policy.h,
       * pin_dir): both before any decision can name the model */
      const char *to[2] = {store, pin && (!store || strcmp(pin, store)) ? pin : NULL};
      for (int k = 0; k < 2 && rc == 0; k++) {
        if (!to[k] || !to[k][0]) continue;
        char dir[4200], serr[512];
        snprintf(dir, sizeof dir, "%s/models", to[k]);
        if (policy_store_put_as(dir, m->version, ".json", mtext, mlen, serr, sizeof serr) ||
            policy_store_put_as(dir, m->features_version, ".features.yaml", ftext, flen, serr,
                                sizeof serr)) {
          snprintf(err, errlen, "cannot keep the model in the %s: %s",
                   k ? "snapshot folder's versions" : "version store", serr);
          rc = -1;
        }
      }
      free(ftext);
    }
  }
  free(mtext);
  if (rc) {
    gbdt_free(m->gbdt);
    features_free(m->features);
    m->gbdt = NULL;
    m->features = NULL;
  }
  return rc;
}

/* The strategy's settings against its model. */
static void check_fit(const strategy *s, const bundle_model *m, policy_diags *d) {
  uint32_t k = gbdt_num_outputs(m->gbdt);
  int multi = gbdt_objective_of(m->gbdt) == GBDT_MULTI_SOFTPROB ||
              gbdt_objective_of(m->gbdt) == GBDT_MULTI_SOFTMAX;
  if (multi && s->nclasses == 0)
    diag_add(d, DIAG_ERROR, s->file, s->fallback_line, s->fallback_col, "fallback.model",
             "model '%s' is multiclass (%s, %u classes): give fallback.classes, one action a "
             "class in the model's class order",
             m->name, gbdt_objective_name(m->gbdt), k);
  else if (multi && s->nclasses != k)
    diag_add(d, DIAG_ERROR, s->file, s->fallback_line, s->fallback_col, "fallback.classes",
             "model '%s' has %u classes, but fallback.classes lists %u actions", m->name, k,
             s->nclasses);
  else if (!multi && s->nclasses)
    diag_add(d, DIAG_ERROR, s->file, s->fallback_line, s->fallback_col, "fallback.classes",
             "model '%s' is not multiclass (%s): map its score with fallback.thresholds, not "
             "classes",
             m->name, gbdt_objective_name(m->gbdt));
}

/* A feature reading `limits.NAME` where NAME is no limit of the strategy
 * the model serves would be missing on every decision: an error at load,
 * as in a rule (strategy.c), placed in the features file. A model shared
 * by several strategies is checked against each one's limits. */
typedef struct feature_limits_at {
  const strategy *s;
  const bundle_model *m;
  uint32_t i;
  policy_diags *d;
} feature_limits_at;

/* The byte offset of line:col (both from 1; col in characters) in src. */
static size_t offset_at(const char *src, size_t len, int line, int col) {
  size_t i = 0;
  for (int l = 1; l < line && i < len; i++)
    if (src[i] == '\n') l++;
  for (int c = 1; c < col && i < len && src[i] != '\n'; c++) do
      i++;
    while (i < len && ((unsigned char)src[i] & 0xC0) == 0x80); /* a character's bytes */
  return i;
}

static void unknown_feature_limit(void *user, const ast *sel) {
  feature_limits_at *w = user;
  int line, col;
  features_expr_place(w->m->features, w->i, sel->target->pos, &line, &col);
  char why[768], msg[1536], key[96];
  strategy_unknown_limit_msg(w->s, sel, why, sizeof why);
  snprintf(key, sizeof key, "features[%u] (%.40s).expr", w->i, features_name(w->m->features, w->i));
  snprintf(msg, sizeof msg, "%s; the model '%s' serves strategy '%s'", why, w->m->name, w->s->name);
  /* the line and a caret under the limit's name, as a rule's error has
   * (the features file's text is not kept once it is loaded: read again) */
  size_t len;
  char rerr[128] = "";
  char *src = slurp(w->m->features_path, &len, rerr, sizeof rerr);
  if (src) diag_excerpt(msg, sizeof msg, src, len, offset_at(src, len, line, col));
  free(src);
  diag_add(w->d, DIAG_ERROR, w->m->features_path, line, col, key, "%s", msg);
}

static void check_feature_limits(const strategy *s, const bundle_model *m, policy_diags *d) {
  if (!m->features || !strategy_limits_readable(s)) return;
  static const expr_opts opts = {.simple_names = 1};
  arena a;
  arena_init(&a, NULL, 0, 0);
  feature_limits_at w = {s, m, 0, d};
  for (w.i = 0; w.i < features_count(m->features); w.i++) {
    const char *src = features_expr(m->features, w.i);
    ast *root;
    expr_error ee;
    if (!expr_parse(&a, src, strlen(src), &opts, &root, &ee)) /* (it compiled at load) */
      strategy_unknown_limits(s, root, unknown_feature_limit, &w);
    arena_reset(&a);
  }
  arena_free(&a);
}

static int add_model(policy_bundle *b, const char *name, const char *model_path,
                     const char *spec_path, const char *store, const char *pin, const strategy *s,
                     policy_diags *d) {
  for (uint32_t i = 0; i < b->nmodels; i++)
    if (!strcmp(b->models[i].path, model_path) && !strcmp(b->models[i].features_path, spec_path))
      return (int)i;
  /* Room for one model a strategy, allocated once: strategies point into
   * the array, so it never moves. */
  if (!b->models) b->models = calloc(b->nstrategies ? b->nstrategies : 1, sizeof *b->models);
  if (!b->models || b->nmodels >= (b->nstrategies ? b->nstrategies : 1)) {
    diag_add(d, DIAG_ERROR, s->file, 0, 0, "", "out of memory");
    return -1;
  }
  bundle_model *m = &b->models[b->nmodels];
  memset(m, 0, sizeof *m);
  m->name = arena_strndup(&b->mem, name, strlen(name));
  m->path = arena_strndup(&b->mem, model_path, strlen(model_path));
  m->features_path = arena_strndup(&b->mem, spec_path, strlen(spec_path));
  if (!m->name || !m->path || !m->features_path) {
    diag_add(d, DIAG_ERROR, s->file, 0, 0, "", "out of memory");
    return -1;
  }
  char err[2048];
  if (load_pair(m, model_path, spec_path, store, pin, err, sizeof err)) {
    diag_add(d, DIAG_ERROR, s->file, s->fallback_line, s->fallback_col, "fallback.model",
             "model '%s': %s", name, err);
    return -1;
  }
  return (int)b->nmodels++;
}

void bundle_link_models(policy_bundle *b, const char *models_dir, const char *store,
                        const char *pin, policy_diags *d) {
  for (uint32_t i = 0; i < b->nstrategies; i++) {
    strategy *s = (strategy *)&b->strategies[i];
    if (!s->fallback_model) continue;
    char mp[4200], fp[4200];
    snprintf(mp, sizeof mp, "%s/%s.json", models_dir, s->fallback_model);
    if (s->features_file) {
      if (strchr(s->features_file, '/') || s->features_file[0] == '.') {
        diag_add(d, DIAG_ERROR, s->file, s->fallback_line, s->fallback_col, "fallback.features",
                 "'%s': name a file in the bundle's models folder, without a path",
                 s->features_file);
        continue;
      }
      snprintf(fp, sizeof fp, "%s/%s", models_dir, s->features_file);
    } else {
      snprintf(fp, sizeof fp, "%s/%s.features.yaml", models_dir, s->fallback_model);
    }
    int k = add_model(b, s->fallback_model, mp, fp, store, pin, s, d);
    if (k < 0) continue;
    s->model = &b->models[k];
    check_fit(s, s->model, d);
    check_feature_limits(s, s->model, d);
  }
}

int policy_bundle_attach_model(policy_bundle *b, uint32_t si, const char *model_path,
                               const char *features_path, policy_diags *d) {
  if (si >= b->nstrategies || !b->strategies[si].fallback_model) {
    diag_add(d, DIAG_ERROR, model_path, 0, 0, "", "the strategy has no fallback model");
    return -1;
  }
  strategy *s = (strategy *)&b->strategies[si];
  size_t e0 = d->errors;
  int k = add_model(b, s->fallback_model, model_path, features_path, NULL, NULL, s, d);
  if (k < 0) return -1;
  s->model = &b->models[k];
  check_fit(s, s->model, d);
  check_feature_limits(s, s->model, d);
  return d->errors > e0 ? -1 : 0;
}

void bundle_free_models(policy_bundle *b) {
  for (uint32_t i = 0; i < b->nmodels; i++) {
    gbdt_free(b->models[i].gbdt);
    features_free(b->models[i].features);
  }
  free(b->models);
  b->models = NULL;
  b->nmodels = 0;
}
