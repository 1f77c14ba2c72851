/* model_learn.c — the learning loop of `verdict model`: a fallback model
 * retrained on the decisions verdict itself recorded and the labels a team
 * reviewed (docs/models.md, "Retraining from your own traffic").
 *
 *   verdict model dataset   snapshots + labels -> a training CSV, split by time
 *   verdict model train     that CSV -> an XGBoost model (python3-xgboost),
 *                           checked bit for bit before it is written
 *   verdict model compare   two models on the same held-out rows
 *
 * The rows are the model's input exactly as the snapshots recorded it
 * (docs/snapshots.md, `features`): no feature is computed again. Training
 * itself is XGBoost's, driven through a Python script installed with
 * verdict (tools/verdict-train-model); everything else — reading, joining,
 * splitting, checking, scoring — is here. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/sha256.h"
#include "model/model.h"
#include "policy/policy.h"
#include "replay/score.h"
#include "snapshot/snapshot.h"

#define MAX_FEATURES 4096

static int usage(const char *msg, const char *arg) { return cli_usage_error("model", msg, arg); }

static int oom(void) {
  fprintf(stderr, "verdict model: out of memory\n");
  return 1;
}

/* ---- small growing arrays ---- */

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 64;
  while (n < need) n *= 2;
  void *q = realloc(*p, n * elem);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

/* ---- the dataset file ----
 * A header of the feature names (the spec's order), then label, action,
 * split, time_ns, id; one row a labelled snapshot, oldest first. */

typedef struct drow {
  int64_t time_ns;
  char id[SNAPSHOT_ID_TEXT];
  char *action; /* the label's action */
  float *x;
  uint32_t ver; /* index into versions */
  int label;
  int test;
} drow;

typedef struct dversion {
  char hex[65];
  char *names; /* the feature names, NUL-separated, in column order */
  uint32_t nnames;
  size_t rows;
} dversion;

typedef struct skips {
  size_t no_model, no_label, other_version, bad_names, bad_json, bad_value, off_path;
} skips;

static int by_time(const void *a, const void *b) {
  const drow *x = a, *y = b;
  if (x->time_ns != y->time_ns) return x->time_ns < y->time_ns ? -1 : 1;
  return strcmp(x->id, y->id);
}

static int in_list(const char *list, const char *s) {
  size_t n = strlen(s);
  for (const char *p = list; *p;) {
    const char *c = strchr(p, ',');
    size_t m = c ? (size_t)(c - p) : strlen(p);
    if (m == n && !memcmp(p, s, n)) return 1;
    if (!c) break;
    p = c + 1;
  }
  return 0;
}

/* A JSON string literal of s on stdout. */
static void put_json_str(const char *s) {
  json_buf b;
  json_buf_init(&b, NULL);
  json_write_string(&b, s, strlen(s));
  fputs(b.oom ? "null" : b.data, stdout);
  json_buf_free(&b);
}

static const value *get(const value *m, const char *k) {
  return m && m->kind == V_MAP ? value_map_get(m, k, strlen(k)) : NULL;
}

/* The names of a features object, NUL-separated. */
static char *names_of(const value *f, uint32_t *n) {
  size_t len = 0;
  for (uint32_t i = 0; i < f->n; i++) len += f->entries[i].key.n + 1;
  char *s = malloc(len + 1), *p = s;
  if (!s) return NULL;
  for (uint32_t i = 0; i < f->n; i++) {
    memcpy(p, f->entries[i].key.s, f->entries[i].key.n);
    p += f->entries[i].key.n;
    *p++ = 0;
  }
  *n = f->n;
  return s;
}

static int same_names(const dversion *v, const value *f) {
  if (v->nnames != f->n) return 0;
  const char *p = v->names;
  for (uint32_t i = 0; i < f->n; i++) {
    size_t m = strlen(p);
    if (m != f->entries[i].key.n || memcmp(p, f->entries[i].key.s, m)) return 0;
    p += m + 1;
  }
  return 1;
}

typedef struct dataset_opts {
  const char *snapshots, *labels, *out, *point, *spec, *negative;
  int64_t since, until;
  double holdout;
  int json;
} dataset_opts;

static void print_summary_json(const dataset_opts *o, const dversion *v, const drow *rows, size_t n,
                               size_t ntest, const skips *sk, size_t nversions,
                               const dversion *versions) {
  size_t pos[2] = {0, 0}, cnt[2] = {n - ntest, ntest};
  for (size_t i = 0; i < n; i++) pos[rows[i].test] += rows[i].label;
  printf("{\"out\":");
  put_json_str(o->out);
  printf(",\"features_version\":\"%s\",\"rows\":%zu", v ? v->hex : "", n);
  for (int s = 0; s < 2; s++)
    printf(",\"%s\":{\"rows\":%zu,\"positive\":%zu,\"negative\":%zu}", s ? "test" : "train", cnt[s],
           pos[s], cnt[s] - pos[s]);
  printf(",\"coverage\":{");
  const char *p = v ? v->names : "";
  for (uint32_t j = 0; v && j < v->nnames; j++) {
    size_t have = 0;
    for (size_t i = 0; i < n; i++) have += !isnan(rows[i].x[j]);
    printf("%s", j ? "," : "");
    put_json_str(p);
    printf(":%.4f", n ? (double)have / (double)n : 0.0);
    p += strlen(p) + 1;
  }
  printf(
      "},\"skipped\":{\"model_not_run\":%zu,\"no_label\":%zu,\"other_features_version\":%zu,"
      "\"feature_names_differ\":%zu,\"off_path\":%zu,\"unreadable\":%zu},\"versions\":[",
      sk->no_model, sk->no_label, sk->other_version, sk->bad_names, sk->off_path,
      sk->bad_json + sk->bad_value);
  for (size_t i = 0; i < nversions; i++)
    printf("%s{\"features_version\":\"%s\",\"rows\":%zu}", i ? "," : "", versions[i].hex,
           versions[i].rows);
  printf("]}\n");
}

static int do_dataset(const dataset_opts *o) {
  char err[1024];
  score_labels *labels = NULL;
  if (score_labels_load(o->labels, &labels, err, sizeof err)) {
    fprintf(stderr, "verdict model: %s\n", err);
    return 1;
  }
  /* The spec asked for: its version is the SHA-256 of its file. */
  char want[65] = "";
  feature_spec *fs = NULL;
  if (o->spec) {
    size_t len;
    char *text = cli_read_file("model", o->spec, &len);
    if (!text || features_load_file(o->spec, NULL, &fs, err, sizeof err)) {
      if (text) fprintf(stderr, "verdict model: %s\n", err);
      free(text);
      score_labels_free(labels);
      return 1;
    }
    sha256_hex(text, len, want);
    free(text);
  }
  snapshot_filter f;
  snapshot_filter_init(&f);
  f.since_ns = o->since;
  f.until_ns = o->until;
  f.point = o->point;
  snapshot_reader *rd;
  if (snapshot_reader_open(o->snapshots, &f, &rd, err, sizeof err) < 0) {
    fprintf(stderr, "verdict model: %s\n", err);
    features_free(fs);
    score_labels_free(labels);
    return 1;
  }
  drow *rows = NULL;
  size_t nrows = 0, caprows = 0, nversions = 0, capv = 0, seen = 0;
  dversion *versions = NULL;
  skips sk = {0};
  arena a;
  arena_init(&a, NULL, 0, 64u << 20);
  json_opts jo = {.lenient = 1};
  snapshot_rec rec;
  int rc = 0, r;
  while (!rc && (r = snapshot_reader_next(rd, &rec)) == 1) {
    seen++;
    arena_reset(&a);
    value s;
    if (json_parse(&a, rec.payload, rec.payload_len, &jo, &s, NULL)) {
      sk.bad_json++;
      continue;
    }
    /* A rollout's off-path decision (docs/snapshots.md, `completes`) is the
     * same request again: its answered record is the one kept. */
    if (get(&s, "completes")) {
      sk.off_path++;
      continue;
    }
    const value *feat = get(&s, "features"), *model = get(&s, "model");
    const value *fv = get(model, "features_version"), *id = get(&s, "id"), *key = get(&s, "key");
    if (!feat || feat->kind != V_MAP || !fv || fv->kind != V_STRING || fv->n != 64 || !id ||
        id->kind != V_STRING || id->n != 36) {
      sk.no_model++;
      continue;
    }
    char idt[SNAPSHOT_ID_TEXT], keyt[1024] = "";
    memcpy(idt, id->s, 36);
    idt[36] = 0;
    if (key && key->kind == V_STRING && key->n < sizeof keyt) {
      memcpy(keyt, key->s, key->n);
      keyt[key->n] = 0;
    }
    const char *lab = score_labels_find(labels, idt, keyt);
    if (!lab) {
      sk.no_label++;
      continue;
    }
    uint32_t vi = 0;
    while (vi < nversions && memcmp(versions[vi].hex, fv->s, 64)) vi++;
    if (vi == nversions) {
      if (grow((void **)&versions, &capv, nversions + 1, sizeof *versions)) {
        rc = oom();
        break;
      }
      dversion *v = &versions[nversions++];
      memset(v, 0, sizeof *v);
      memcpy(v->hex, fv->s, 64);
      if (feat->n > MAX_FEATURES || !(v->names = names_of(feat, &v->nnames))) {
        rc = oom();
        break;
      }
    }
    if (!same_names(&versions[vi], feat)) {
      sk.bad_names++;
      continue;
    }
    float *x = malloc((feat->n ? feat->n : 1) * sizeof *x);
    if (!x || grow((void **)&rows, &caprows, nrows + 1, sizeof *rows)) {
      free(x);
      rc = oom();
      break;
    }
    int bad = 0;
    for (uint32_t j = 0; j < feat->n; j++) {
      const value *c = &feat->entries[j].val;
      if (c->kind == V_NULL)
        x[j] = NAN;
      else if (c->kind == V_DOUBLE)
        x[j] = (float)c->d;
      else if (c->kind == V_INT)
        x[j] = (float)c->i;
      else if (c->kind == V_UINT)
        x[j] = (float)c->u;
      else
        bad = 1;
    }
    if (bad) {
      free(x);
      sk.bad_value++;
      continue;
    }
    drow *d = &rows[nrows++];
    d->time_ns = rec.time_ns;
    memcpy(d->id, idt, sizeof idt);
    d->action = strdup(lab);
    for (char *c = d->action; c && *c; c++) /* one CSV cell, whatever the label says */
      if (*c == ',' || (unsigned char)*c < 0x20) *c = '_';
    d->x = x;
    d->ver = vi;
    d->label = !in_list(o->negative, lab);
    d->test = 0;
    versions[vi].rows++;
    if (!d->action) rc = oom();
  }
  if (!rc && r < 0) {
    fprintf(stderr, "verdict model: %s: %s\n", o->snapshots, snapshot_reader_error(rd));
    rc = 1;
  }
  snapshot_reader_close(rd);
  arena_free(&a);
  /* The version kept: the spec's when one was given, else the one most rows have. */
  long keep = -1;
  for (size_t i = 0; i < nversions; i++)
    if (o->spec ? !strcmp(versions[i].hex, want)
                : keep < 0 || versions[i].rows > versions[keep].rows)
      keep = (long)i;
  if (!rc && o->spec && keep >= 0) {
    /* The spec's names must be the recorded ones, in its order. */
    dversion *v = &versions[keep];
    const char *p = v->names;
    int okn = v->nnames == features_count(fs);
    for (uint32_t j = 0; okn && j < v->nnames; j++, p += strlen(p) + 1)
      okn = !strcmp(p, features_name(fs, j));
    if (!okn) {
      fprintf(stderr,
              "verdict model: %s: the snapshots recorded under this spec's version name "
              "other features than it declares\n",
              o->spec);
      rc = 1;
    }
  }
  if (!rc && keep < 0) {
    if (o->spec)
      fprintf(stderr,
              "verdict model: no labelled snapshot in %s was decided under %s (features_version "
              "%.12s); %zu labelled snapshots were recorded under other versions\n",
              o->snapshots, o->spec, want, nrows);
    else
      fprintf(stderr,
              "verdict model: no labelled snapshot in %s ran a model (%zu read, %zu without a "
              "model row, %zu without a label)\n",
              o->snapshots, seen, sk.no_model, sk.no_label);
    rc = 1;
  }
  /* Leave the others out, then split by time: the newest PCT are the holdout. */
  size_t n = 0;
  for (size_t i = 0; i < nrows; i++) {
    if (!rc && rows[i].ver == (uint32_t)keep) {
      rows[n++] = rows[i];
    } else {
      if (!rc) sk.other_version++;
      free(rows[i].x);
      free(rows[i].action);
    }
  }
  size_t ntest = 0;
  if (!rc) {
    qsort(rows, n, sizeof *rows, by_time);
    ntest = (size_t)ceil((double)n * o->holdout / 100.0);
    if (ntest > n) ntest = n;
    for (size_t i = n - ntest; i < n; i++) rows[i].test = 1;
  }
  FILE *out = NULL;
  if (!rc && !(out = cli_open_file("model", o->out, "w"))) rc = 1;
  if (!rc) {
    const dversion *v = &versions[keep];
    const char *p = v->names;
    for (uint32_t j = 0; j < v->nnames; j++, p += strlen(p) + 1) fprintf(out, "%s,", p);
    fprintf(out, "label,action,split,time_ns,id\n");
    for (size_t i = 0; i < n; i++) {
      for (uint32_t j = 0; j < v->nnames; j++) {
        if (!isnan(rows[i].x[j])) fprintf(out, "%.9g", (double)rows[i].x[j]);
        fputc(',', out);
      }
      fprintf(out, "%d,%s,%s,%lld,%s\n", rows[i].label, rows[i].action,
              rows[i].test ? "test" : "train", (long long)rows[i].time_ns, rows[i].id);
    }
    if (fclose(out)) {
      fprintf(stderr, "verdict model: %s: %s\n", o->out, strerror(errno));
      rc = 1;
    }
  }
  if (!rc && o->json) {
    print_summary_json(o, &versions[keep], rows, n, ntest, &sk, nversions, versions);
  } else if (!rc) {
    const dversion *v = &versions[keep];
    size_t pos[2] = {0, 0}, cnt[2] = {n - ntest, ntest};
    for (size_t i = 0; i < n; i++) pos[rows[i].test] += rows[i].label;
    printf("dataset %s: %zu rows (%zu snapshots read), features_version %.12s, %u features\n",
           o->out, n, seen, v->hex, v->nnames);
    for (int s = 0; s < 2; s++)
      printf("  %-5s %8zu rows  positive %zu (%.1f%%)  negative %zu%s\n", s ? "test" : "train",
             cnt[s], pos[s], cnt[s] ? 100.0 * (double)pos[s] / (double)cnt[s] : 0.0,
             cnt[s] - pos[s], s ? "   (the newest, by decision time)" : "");
    printf("feature coverage (share not missing)\n");
    const char *p = v->names;
    for (uint32_t j = 0; j < v->nnames; j++, p += strlen(p) + 1) {
      size_t have = 0;
      for (size_t i = 0; i < n; i++) have += !isnan(rows[i].x[j]);
      printf("  %-28s %6.1f%%\n", p, n ? 100.0 * (double)have / (double)n : 0.0);
    }
    printf("skipped\n");
    printf("  %8zu  the model did not run (no feature row)\n", sk.no_model);
    printf("  %8zu  no label\n", sk.no_label);
    printf("  %8zu  recorded under another feature spec version\n", sk.other_version);
    printf("  %8zu  feature names differ within a version\n", sk.bad_names);
    printf("  %8zu  a rollout's off-path decision (its answered one is kept)\n", sk.off_path);
    printf("  %8zu  unreadable\n", sk.bad_json + sk.bad_value);
    for (size_t i = 0; i < nversions; i++)
      if ((long)i != keep)
        printf("  left out: features_version %.12s, %zu labelled rows\n", versions[i].hex,
               versions[i].rows);
  }
  for (size_t i = 0; i < n; i++) {
    free(rows[i].x);
    free(rows[i].action);
  }
  free(rows);
  for (size_t i = 0; i < nversions; i++) free(versions[i].names);
  free(versions);
  features_free(fs);
  score_labels_free(labels);
  return rc;
}

/* ---- reading a dataset back ---- */

typedef struct dset {
  uint32_t nf;
  size_t n, cap;
  float *x; /* n * nf */
  int *label;
  char (*id)[SNAPSHOT_ID_TEXT];
  int *test;
} dset;

static void dset_free(dset *d) {
  free(d->x);
  free(d->label);
  free(d->id);
  free(d->test);
}

/* Splits a line at commas in place. */
static size_t split(char *line, char **cells, size_t max) {
  size_t n = 0;
  for (char *p = line;;) {
    if (n == max) return max + 1;
    cells[n++] = p;
    char *c = strchr(p, ',');
    if (!c) break;
    *c = 0;
    p = c + 1;
  }
  return n;
}

/* Reads a dataset CSV. names (nf of them) must be its first columns, in
 * order. Every problem names file:line. */
static int dset_read(const char *path, const char *const *names, uint32_t nf, dset *d) {
  memset(d, 0, sizeof *d);
  d->nf = nf;
  FILE *f = cli_open_file("model", path, "r");
  if (!f) return -1;
  char *line = NULL, **cells = malloc((MAX_FEATURES + 8) * sizeof *cells);
  size_t cap = 0;
  long lineno = 0;
  int rc = cells ? 0 : -1;
  ssize_t len;
  size_t ncols = 0, c_label = 0, c_split = 0, c_id = 0;
  while (!rc && (len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    if (lineno > 1 && len == 0) continue;
    size_t n = split(line, cells, MAX_FEATURES + 8);
    if (lineno == 1) {
      ncols = n;
      for (size_t j = 0; j < n && j <= MAX_FEATURES + 7; j++) {
        if (j < nf && strcmp(cells[j], names[j])) {
          fprintf(stderr,
                  "verdict model: %s:1: column %zu is '%s', but feature %zu of the spec is "
                  "'%s' (a dataset from another feature spec?)\n",
                  path, j + 1, cells[j], j, names[j]);
          rc = -1;
          break;
        }
        if (!strcmp(cells[j], "label")) c_label = j;
        if (!strcmp(cells[j], "split")) c_split = j;
        if (!strcmp(cells[j], "id")) c_id = j;
      }
      if (!rc && (n < nf || c_label < nf || c_split < nf || c_id < nf)) {
        fprintf(stderr,
                "verdict model: %s:1: a dataset has the %u features, then label, split and id "
                "columns (as 'verdict model dataset' writes it)\n",
                path, nf);
        rc = -1;
      }
      continue;
    }
    if (n != ncols) {
      fprintf(stderr, "verdict model: %s:%ld: %zu cells, but the header has %zu columns\n", path,
              lineno, n, ncols);
      rc = -1;
      break;
    }
    if (grow((void **)&d->label, &d->cap, d->n + 1, sizeof *d->label)) {
      rc = -1;
      oom();
      break;
    }
    size_t c2 = d->cap;
    float *nx = realloc(d->x, c2 * (nf ? nf : 1) * sizeof *nx);
    int *nt = nx ? realloc(d->test, c2 * sizeof *nt) : NULL;
    if (nx) d->x = nx;
    if (nt) d->test = nt;
    char(*ni)[SNAPSHOT_ID_TEXT] = nt ? realloc(d->id, c2 * sizeof *ni) : NULL;
    if (!ni) {
      rc = -1;
      oom();
      break;
    }
    d->id = ni;
    float *x = d->x + d->n * nf;
    for (uint32_t j = 0; j < nf && !rc; j++) {
      char *s = cells[j], *end;
      if (!*s) {
        x[j] = NAN;
        continue;
      }
      x[j] = strtof(s, &end);
      if (*end || !isfinite(x[j])) {
        fprintf(stderr,
                "verdict model: %s:%ld: column %u (%s): '%s' is not a finite number (an empty "
                "cell is a missing value)\n",
                path, lineno, j + 1, names[j], s);
        rc = -1;
      }
    }
    const char *lab = cells[c_label], *sp = cells[c_split];
    if (!rc && strcmp(lab, "0") && strcmp(lab, "1")) {
      fprintf(stderr, "verdict model: %s:%ld: label: '%s' is not 0 or 1\n", path, lineno, lab);
      rc = -1;
    }
    if (!rc && strcmp(sp, "train") && strcmp(sp, "test")) {
      fprintf(stderr, "verdict model: %s:%ld: split: '%s' is not train or test\n", path, lineno,
              sp);
      rc = -1;
    }
    if (rc) break;
    d->label[d->n] = lab[0] == '1';
    d->test[d->n] = !strcmp(sp, "test");
    snprintf(d->id[d->n], SNAPSHOT_ID_TEXT, "%s", cells[c_id]);
    d->n++;
  }
  if (!rc && lineno == 0) {
    fprintf(stderr, "verdict model: %s: empty file: the first line names the columns\n", path);
    rc = -1;
  }
  if (rc && !cells) oom();
  free(line);
  free(cells);
  fclose(f);
  if (rc) dset_free(d);
  return rc;
}

/* ---- scoring ---- */

typedef struct scored {
  double *p;
  int *y;
  size_t n;
} scored;

static int cmp_desc(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* AUC by ranks (ties share their mean rank). */
static double auc(const double *p, const int *y, size_t n) {
  size_t *ix = malloc(n * sizeof *ix);
  double *pp = malloc(n * 2 * sizeof *pp);
  if (!ix || !pp) {
    free(ix), free(pp);
    return NAN;
  }
  /* sort (score, label) pairs ascending by score */
  for (size_t i = 0; i < n; i++) pp[2 * i] = p[i], pp[2 * i + 1] = y[i];
  qsort(pp, n, 2 * sizeof *pp, cmp_desc);
  double pos = 0, neg = 0, rank_sum = 0;
  /* descending order: rank from the top; ranks ascending = n - i */
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && pp[2 * j] == pp[2 * i]) j++;
    double mean_rank = (double)n - ((double)i + (double)j - 1) / 2.0; /* 1-based ascending */
    for (size_t k = i; k < j; k++)
      if (pp[2 * k + 1] > 0.5)
        rank_sum += mean_rank, pos++;
      else
        neg++;
    i = j;
  }
  free(ix), free(pp);
  if (!pos || !neg) return NAN;
  return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

/* The model's probability for the dataset's test rows. */
static int score_test(const gbdt_model *m, const dset *d, double **out, size_t *n) {
  uint32_t k = gbdt_num_outputs(m);
  float mg[64], pr[64];
  if (k > 64) k = 64;
  double *p = malloc((d->n ? d->n : 1) * sizeof *p);
  if (!p) return -1;
  size_t t = 0;
  for (size_t i = 0; i < d->n; i++) {
    if (!d->test[i]) continue;
    gbdt_predict(m, d->x + i * d->nf, mg, pr, NULL);
    p[t++] = k > 1 ? 1.0 - (double)pr[0] : (double)pr[0];
  }
  *out = p;
  *n = t;
  return 0;
}

static void test_labels(const dset *d, int *y) {
  size_t t = 0;
  for (size_t i = 0; i < d->n; i++)
    if (d->test[i]) y[t++] = d->label[i];
}

static double accuracy(const double *p, const int *y, size_t n) {
  size_t ok = 0;
  for (size_t i = 0; i < n; i++) ok += (p[i] >= 0.5) == (y[i] == 1);
  return n ? (double)ok / (double)n : NAN;
}

/* The score at or above which a share `rate` of p lies. */
static double threshold_for_rate(const double *p, size_t n, double rate) {
  if (!n) return NAN;
  double *s = malloc(n * sizeof *s);
  if (!s) return NAN;
  memcpy(s, p, n * sizeof *s);
  qsort(s, n, sizeof *s, cmp_desc);
  size_t k = (size_t)ceil(rate * (double)n);
  double t = k == 0 ? s[0] + 1e-6 : s[k - 1];
  free(s);
  return t;
}

static double rate_at(const double *p, size_t n, double t) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += p[i] >= t;
  return n ? (double)k / (double)n : 0.0;
}

/* The thresholds of the first strategy in the bundle at dir whose fallback
 * model takes the dataset's features (by name, in order), up to max, with
 * their actions; and that model's scores for the dataset's test rows (the
 * rates the strategy reaches today). */
typedef struct bundle_th {
  char strategy[128], model[128];
  double t[16];
  char action[16][64];
  size_t n;
  double *cur; /* the bundle model's test scores */
  size_t ncur;
} bundle_th;

static int bundle_thresholds(const char *dir, const char *const *names, const dset *d,
                             bundle_th *bt) {
  memset(bt, 0, sizeof *bt);
  policy_load_opts lo = {0};
  lo.store_dir = "";
  policy_bundle *b = NULL;
  policy_diags diags;
  memset(&diags, 0, sizeof diags);
  if (policy_bundle_load(dir, &lo, &b, &diags)) {
    for (size_t i = 0; i < diags.n; i++) policy_diag_print(&diags.items[i], stderr);
    policy_diags_free(&diags);
    return -1;
  }
  policy_diags_free(&diags);
  for (uint32_t i = 0; i < b->nstrategies && !bt->n; i++) {
    const strategy *s = &b->strategies[i];
    if (!s->fallback_model || !s->nthresholds) continue;
    const gbdt_model *m = NULL;
    for (uint32_t k = 0; k < b->nmodels; k++)
      if (!strcmp(b->models[k].name, s->fallback_model)) m = b->models[k].gbdt;
    if (!m || gbdt_num_features(m) != d->nf) continue;
    int same = 1;
    for (uint32_t j = 0; same && j < d->nf; j++)
      same = gbdt_feature_name(m, j) && !strcmp(gbdt_feature_name(m, j), names[j]);
    if (!same) continue;
    snprintf(bt->strategy, sizeof bt->strategy, "%s", s->name);
    snprintf(bt->model, sizeof bt->model, "%s", s->fallback_model);
    for (uint32_t j = 0; j < s->nthresholds && bt->n < 16; j++) {
      bt->t[bt->n] = s->thresholds[j].min_score;
      int32_t a = s->thresholds[j].outcome.action;
      snprintf(bt->action[bt->n], sizeof bt->action[0], "%s", a >= 0 ? s->actions[a].name : "?");
      bt->n++;
    }
    if (score_test(m, d, &bt->cur, &bt->ncur)) {
      policy_bundle_free(b);
      return oom(), -1;
    }
  }
  policy_bundle_free(b);
  if (!bt->n) {
    fprintf(stderr,
            "verdict model: %s: no strategy's fallback model takes these features with "
            "thresholds\n",
            dir);
    return -1;
  }
  return 0;
}

/* ---- train ---- */

/* The training script: $VERDICT_TRAINER, else beside the verdict binary
 * (a build folder), else DATADIR/verdict (installed: ../share/verdict). */
static char *find_trainer(void) {
  const char *env = getenv("VERDICT_TRAINER");
  if (env && *env) return strdup(env);
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 64);
  if (n <= 0) return NULL;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return NULL;
  *slash = 0;
  char path[4200];
  snprintf(path, sizeof path, "%s/verdict-train-model", exe);
  if (access(path, R_OK) == 0) return strdup(path);
  snprintf(path, sizeof path, "%s/../share/verdict/verdict-train-model", exe);
  if (access(path, R_OK) == 0) return strdup(path);
  return NULL;
}

/* Runs argv; its exit status, 127 when it could not start. */
static int run(char *const *argv) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    dup2(2, 1); /* the script's chatter goes with the messages */
    execvp(argv[0], argv);
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return 127;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

typedef struct train_opts {
  const char *dataset, *spec, *out, *policy, *python;
  long rounds, depth;
  double eta;
  int json;
} train_opts;

static int spec_names(const feature_spec *fs, const char **names) {
  uint32_t n = features_count(fs);
  for (uint32_t j = 0; j < n; j++) names[j] = features_name(fs, j);
  return 0;
}

static void print_thresholds(const bundle_th *bt, const double *p, size_t n, int json) {
  if (json) {
    printf(",\"thresholds\":[");
    for (size_t i = 0; bt && i < bt->n; i++) {
      double rate = rate_at(bt->cur, bt->ncur, bt->t[i]);
      printf("%s{\"action\":\"%s\",\"min_score\":%.9g,\"rate\":%.6f,\"new_min_score\":%.9g}",
             i ? "," : "", bt->action[i], bt->t[i], rate, threshold_for_rate(p, n, rate));
    }
    printf("],\"quantiles\":[");
    static const double rates[] = {0.01, 0.05, 0.1, 0.2};
    for (size_t i = 0; i < 4; i++)
      printf("%s{\"rate\":%.2f,\"min_score\":%.9g}", i ? "," : "", rates[i],
             threshold_for_rate(p, n, rates[i]));
    printf("]");
    return;
  }
  if (bt) {
    printf("thresholds of strategy %s (model %s), for the same rates on the held-out rows\n",
           bt->strategy, bt->model);
    for (size_t i = 0; i < bt->n; i++) {
      double rate = rate_at(bt->cur, bt->ncur, bt->t[i]);
      printf(
          "  %-12s min_score %.4g reaches %.2f%% with %s; the new model reaches it at "
          "min_score %.4g\n",
          bt->action[i], bt->t[i], 100 * rate, bt->model, threshold_for_rate(p, n, rate));
    }
  }
  printf("score quantiles (the min_score that the top share of held-out rows reaches)\n");
  static const double rates[] = {0.01, 0.05, 0.1, 0.2};
  for (size_t i = 0; i < 4; i++)
    printf("  top %4.1f%%  min_score %.4g\n", 100 * rates[i], threshold_for_rate(p, n, rates[i]));
}

static int do_train(const train_opts *o) {
  char err[1024];
  feature_spec *fs;
  if (features_load_file(o->spec, NULL, &fs, err, sizeof err)) {
    fprintf(stderr, "verdict model: %s\n", err);
    return 1;
  }
  uint32_t nf = features_count(fs);
  const char **names = malloc((nf ? nf : 1) * sizeof *names);
  char *types = malloc(2 * (size_t)nf + 2);
  if (!names || !types) {
    free(names), free(types), features_free(fs);
    return oom();
  }
  spec_names(fs, names);
  types[0] = 0;
  for (uint32_t j = 0; j < nf; j++)
    strcat(types,
           features_type(fs, j) == FEATURE_CATEGORICAL ? (j ? ",c" : "c") : (j ? ",q" : "q"));
  dset d;
  int rc = 0;
  if (dset_read(o->dataset, names, nf, &d)) {
    free(names), free(types), features_free(fs);
    return 1;
  }
  size_t ntest = 0;
  for (size_t i = 0; i < d.n; i++) ntest += d.test[i];
  if (ntest == 0 || ntest == d.n) {
    fprintf(stderr,
            "verdict model: %s: %zu train and %zu test rows: training needs both (see "
            "--holdout of 'verdict model dataset')\n",
            o->dataset, d.n - ntest, ntest);
    rc = 1;
  }
  char *trainer = rc ? NULL : find_trainer();
  if (!rc && !trainer) {
    fprintf(stderr,
            "verdict model: the training script verdict-train-model was not found (beside "
            "verdict, or in ../share/verdict from it; or set VERDICT_TRAINER)\n");
    rc = 1;
  }
  size_t ol = strlen(o->out);
  char *tmp = malloc(ol + 24), *golden = malloc(ol + 24);
  if (!rc && (!tmp || !golden)) rc = oom();
  if (!rc) {
    sprintf(tmp, "%s.training.json", o->out);
    sprintf(golden, "%s.golden.csv", o->out);
    char rounds[32], depth[32], eta[64];
    snprintf(rounds, sizeof rounds, "%ld", o->rounds);
    snprintf(depth, sizeof depth, "%ld", o->depth);
    snprintf(eta, sizeof eta, "%.17g", o->eta);
    char *argv[] = {(char *)o->python,
                    trainer,
                    (char *)o->dataset,
                    types,
                    rounds,
                    depth,
                    eta,
                    tmp,
                    golden,
                    NULL};
    int st = run(argv);
    if (st == 127) {
      fprintf(stderr,
              "verdict model: could not run %s: training needs Python 3 and XGBoost (Debian: "
              "apt install python3-xgboost)\n",
              o->python);
      rc = 1;
    } else if (st == 3) {
      fprintf(stderr,
              "verdict model: training needs XGBoost for Python (Debian: apt install "
              "python3-xgboost)\n");
      rc = 1;
    } else if (st) {
      fprintf(stderr, "verdict model: training failed (%s exited with %d)\n", trainer, st);
      rc = 1;
    }
  }
  /* The same checks as `verdict model check`: the spec against the model,
   * and every held-out row's margin and probability, bit for bit. */
  if (!rc && cli_model_check(tmp, o->spec, golden)) {
    fprintf(stderr,
            "verdict model: the trained model does not reproduce XGBoost's predictions: "
            "not written\n");
    rc = 1;
  }
  gbdt_model *m = NULL;
  if (!rc && gbdt_load_file(tmp, &m, err, sizeof err)) {
    fprintf(stderr, "verdict model: %s\n", err);
    rc = 1;
  }
  if (!rc && rename(tmp, o->out)) {
    fprintf(stderr, "verdict model: %s: %s\n", o->out, strerror(errno));
    rc = 1;
  }
  if (tmp) unlink(tmp);
  if (golden) unlink(golden);
  bundle_th bt, *btp = NULL;
  if (!rc && o->policy) {
    if (bundle_thresholds(o->policy, names, &d, &bt))
      rc = 1;
    else
      btp = &bt;
  }
  if (!rc) {
    double *p;
    size_t n;
    int *y = malloc((d.n ? d.n : 1) * sizeof *y);
    if (!y || score_test(m, &d, &p, &n)) {
      free(y);
      rc = oom();
    } else {
      test_labels(&d, y);
      double acc = accuracy(p, y, n), a = auc(p, y, n);
      if (o->json) {
        printf("{\"model\":");
        put_json_str(o->out);
        printf(
            ",\"version\":\"%s\",\"trees\":%u,\"train_rows\":%zu,"
            "\"test_rows\":%zu,\"accuracy\":%.6f,\"auc\":%.6f",
            gbdt_version(m), gbdt_num_trees(m), d.n - n, n, acc, isnan(a) ? -1 : a);
        print_thresholds(btp, p, n, 1);
        printf("}\n");
      } else {
        printf("model %s: %u trees, version %.12s; trained on %zu rows\n", o->out,
               gbdt_num_trees(m), gbdt_version(m), d.n - n);
        printf("held out %zu rows: accuracy %.4f (at 0.5), AUC %.4f\n", n, acc, a);
        print_thresholds(btp, p, n, 0);
      }
      free(p);
      free(y);
    }
  }
  if (btp) free(bt.cur);
  gbdt_free(m);
  free(tmp), free(golden), free(trainer);
  dset_free(&d);
  free(names), free(types);
  features_free(fs);
  return rc;
}

/* ---- compare ---- */

typedef struct compare_opts {
  const char *old_path, *new_path, *dataset, *policy;
  double th[16];
  size_t nth;
  int json;
} compare_opts;

static int do_compare(const compare_opts *o) {
  gbdt_model *mo = NULL, *mn = NULL;
  char err[1024];
  if (gbdt_load_file(o->old_path, &mo, err, sizeof err) ||
      gbdt_load_file(o->new_path, &mn, err, sizeof err)) {
    fprintf(stderr, "verdict model: %s\n", err);
    gbdt_free(mo);
    return 1;
  }
  uint32_t nf = gbdt_num_features(mo);
  int rc = 0;
  if (gbdt_num_outputs(mo) != 1 || gbdt_num_outputs(mn) != 1) {
    fprintf(stderr,
            "verdict model: compare takes models with one output (a score), and %s has %u\n",
            gbdt_num_outputs(mo) != 1 ? o->old_path : o->new_path,
            gbdt_num_outputs(mo) != 1 ? gbdt_num_outputs(mo) : gbdt_num_outputs(mn));
    rc = 1;
  }
  const char **names = malloc((nf ? nf : 1) * sizeof *names);
  if (!names) rc = oom();
  for (uint32_t j = 0; !rc && j < nf; j++) {
    names[j] = gbdt_feature_name(mo, j);
    if (!names[j]) {
      fprintf(stderr, "verdict model: %s: feature %u has no name\n", o->old_path, j);
      rc = 1;
    }
  }
  if (!rc && gbdt_num_features(mn) != nf) {
    fprintf(stderr, "verdict model: %s takes %u features, %s %u: not comparable on one dataset\n",
            o->old_path, nf, o->new_path, gbdt_num_features(mn));
    rc = 1;
  }
  for (uint32_t j = 0; !rc && j < nf; j++)
    if (!gbdt_feature_name(mn, j) || strcmp(gbdt_feature_name(mn, j), names[j])) {
      fprintf(stderr, "verdict model: %s: feature %u is '%s', in %s '%s'\n", o->new_path, j,
              gbdt_feature_name(mn, j) ? gbdt_feature_name(mn, j) : "", o->old_path, names[j]);
      rc = 1;
    }
  dset d;
  memset(&d, 0, sizeof d);
  if (!rc && dset_read(o->dataset, names, nf, &d)) rc = 1;
  double th[16];
  char act[16][64];
  size_t nth = o->nth;
  for (size_t i = 0; i < nth; i++) th[i] = o->th[i], snprintf(act[i], sizeof act[i], "-");
  if (!rc && o->policy) {
    bundle_th bt;
    if (bundle_thresholds(o->policy, names, &d, &bt)) {
      rc = 1;
    } else {
      for (size_t i = 0; i < bt.n && nth < 16; i++, nth++) {
        th[nth] = bt.t[i];
        memcpy(act[nth], bt.action[i], sizeof act[0]);
      }
      free(bt.cur);
    }
  }
  if (!rc && nth == 0) th[nth] = 0.5, snprintf(act[nth++], sizeof act[0], "-");
  double *po = NULL, *pn = NULL;
  size_t n = 0;
  int *y = rc ? NULL : malloc((d.n ? d.n : 1) * sizeof *y);
  if (!rc && (!y || score_test(mo, &d, &po, &n) || score_test(mn, &d, &pn, &n))) rc = oom();
  if (!rc && n == 0) {
    fprintf(stderr, "verdict model: %s: no test rows to compare on\n", o->dataset);
    rc = 1;
  }
  if (!rc) {
    test_labels(&d, y);
    /* the test rows' ids, in order */
    const char **ids = malloc(n * sizeof *ids);
    if (!ids) {
      rc = oom();
    } else {
      size_t t = 0;
      for (size_t i = 0; i < d.n; i++)
        if (d.test[i]) ids[t++] = d.id[i];
      double ao = accuracy(po, y, n), an = accuracy(pn, y, n), uo = auc(po, y, n),
             un = auc(pn, y, n);
      if (o->json) {
        printf("{\"dataset\":");
        put_json_str(o->dataset);
        printf(",\"test_rows\":%zu,\"old\":{\"model\":", n);
        put_json_str(o->old_path);
        printf(",\"version\":\"%s\",\"accuracy\":%.6f,\"auc\":%.6f},\"new\":{\"model\":",
               gbdt_version(mo), ao, isnan(uo) ? -1 : uo);
        put_json_str(o->new_path);
        printf(",\"version\":\"%s\",\"accuracy\":%.6f,\"auc\":%.6f},\"thresholds\":[",
               gbdt_version(mn), an, isnan(un) ? -1 : un);
      } else {
        printf("held-out rows of %s: %zu\n", o->dataset, n);
        printf("  %-4s %-40s accuracy %.4f  AUC %.4f\n", "old", o->old_path, ao, uo);
        printf("  %-4s %-40s accuracy %.4f  AUC %.4f\n", "new", o->new_path, an, un);
      }
      for (size_t k = 0; k < nth; k++) {
        size_t up = 0, down = 0, up_ok = 0, down_ok = 0;
        const char *ex_up[3], *ex_down[3];
        for (size_t i = 0; i < n; i++) {
          int a = po[i] >= th[k], b = pn[i] >= th[k];
          if (!a && b) {
            if (up < 3) ex_up[up] = ids[i];
            up++, up_ok += y[i] == 1;
          } else if (a && !b) {
            if (down < 3) ex_down[down] = ids[i];
            down++, down_ok += y[i] == 0;
          }
        }
        if (o->json) {
          printf(
              "%s{\"min_score\":%.9g,\"action\":\"%s\",\"old_reached\":%.6f,\"new_reached\":"
              "%.6f,\"now_reached\":%zu,\"now_reached_correct\":%zu,\"no_longer_reached\":%zu,"
              "\"no_longer_reached_correct\":%zu,\"examples\":[",
              k ? "," : "", th[k], act[k], rate_at(po, n, th[k]), rate_at(pn, n, th[k]), up, up_ok,
              down, down_ok);
          for (size_t i = 0; i < (up < 3 ? up : 3); i++) printf("%s\"%s\"", i ? "," : "", ex_up[i]);
          for (size_t i = 0; i < (down < 3 ? down : 3); i++)
            printf("%s\"%s\"", i || up ? "," : "", ex_down[i]);
          printf("]}");
          continue;
        }
        printf("at min_score %.4g%s%s: old reaches %.2f%%, new %.2f%%\n", th[k],
               strcmp(act[k], "-") ? " -> " : "", strcmp(act[k], "-") ? act[k] : "",
               100 * rate_at(po, n, th[k]), 100 * rate_at(pn, n, th[k]));
        printf("  now reached       %6zu rows (%zu of them labelled positive)", up, up_ok);
        for (size_t i = 0; i < (up < 3 ? up : 3); i++)
          printf("%s%s", i ? ", " : "  e.g. ", ex_up[i]);
        printf("\n  no longer reached %6zu rows (%zu of them labelled negative)", down, down_ok);
        for (size_t i = 0; i < (down < 3 ? down : 3); i++)
          printf("%s%s", i ? ", " : "  e.g. ", ex_down[i]);
        printf("\n");
      }
      if (o->json) printf("]}\n");
      free(ids);
    }
  }
  free(po), free(pn), free(y);
  dset_free(&d);
  free(names);
  gbdt_free(mo);
  gbdt_free(mn);
  return rc;
}

/* ---- options ---- */

static int num(const char *flag, const char *v, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (!*v || *end || errno || !(d >= lo && d <= hi)) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s takes a number from %g to %g, not", flag, lo, hi);
    return usage(msg, v);
  }
  *out = d;
  return 0;
}

int cli_model_learn(const char *sub, int argc, char **argv) {
  dataset_opts ds = {.holdout = 20, .negative = "allow"};
  train_opts tr = {.rounds = 40, .depth = 4, .eta = 0.3, .python = "/usr/bin/python3"};
  compare_opts co = {0};
  const char *pos[3] = {0};
  int npos = 0, json = 0;
  int is_ds = !strcmp(sub, "dataset"), is_tr = !strcmp(sub, "train"),
      is_co = !strcmp(sub, "compare");
  int64_t now = clock_wall_ns();
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(cmd_model_help, stdout);
      return 0;
    }
    if (!strcmp(a, "--json")) {
      json = 1;
      continue;
    }
    if (a[0] != '-' || !a[1]) {
      if (npos == 3) return usage("too many arguments", a);
      pos[npos++] = a;
      continue;
    }
    if (i + 1 >= argc) return usage("needs a value:", a);
    const char *v = argv[++i];
    double d;
    if (is_ds && (!strcmp(a, "--snapshots") || !strcmp(a, "-s"))) {
      ds.snapshots = v;
    } else if (is_ds && !strcmp(a, "--labels")) {
      ds.labels = v;
    } else if (is_ds && !strcmp(a, "--point")) {
      ds.point = v;
    } else if (is_ds && !strcmp(a, "--negative")) {
      ds.negative = v;
    } else if (is_ds && (!strcmp(a, "--since") || !strcmp(a, "--until"))) {
      int64_t t;
      if (cli_parse_when(v, now, &t) < 0)
        return usage("expected RFC 3339 or a time ago like 1h or 7d, got", v);
      *(a[2] == 's' ? &ds.since : &ds.until) = t ? t : 1;
    } else if (is_ds && !strcmp(a, "--holdout")) {
      char buf[32];
      snprintf(buf, sizeof buf, "%s", v);
      size_t l = strlen(buf);
      if (l && buf[l - 1] == '%') buf[l - 1] = 0;
      if (num(a, buf, 0, 100, &ds.holdout)) return 2;
    } else if ((is_ds || is_tr) && !strcmp(a, "--out")) {
      ds.out = tr.out = v;
    } else if ((is_ds || is_tr) && !strcmp(a, "--spec")) {
      ds.spec = tr.spec = v;
    } else if ((is_tr || is_co) && !strcmp(a, "--dataset")) {
      tr.dataset = co.dataset = v;
    } else if ((is_tr || is_co) && !strcmp(a, "--policy")) {
      tr.policy = co.policy = v;
    } else if (is_tr && !strcmp(a, "--rounds")) {
      if (num(a, v, 1, 100000, &d)) return 2;
      tr.rounds = (long)d;
    } else if (is_tr && !strcmp(a, "--depth")) {
      if (num(a, v, 1, 30, &d)) return 2;
      tr.depth = (long)d;
    } else if (is_tr && !strcmp(a, "--eta")) {
      if (num(a, v, 1e-6, 1, &tr.eta)) return 2;
    } else if (is_tr && !strcmp(a, "--python")) {
      tr.python = v;
    } else if (is_co && !strcmp(a, "--threshold")) {
      if (co.nth == 8) return usage("at most 8 --threshold", NULL);
      if (num(a, v, 0, 1, &co.th[co.nth])) return 2;
      co.nth++;
    } else {
      return usage("unknown option for this subcommand:", a);
    }
  }
  if (is_ds) {
    if (npos) return usage("dataset takes no arguments, only options:", pos[0]);
    if (!ds.snapshots) return usage("dataset needs --snapshots DIR", NULL);
    if (!ds.labels) return usage("dataset needs --labels FILE", NULL);
    if (!ds.out) return usage("dataset needs --out FILE.csv", NULL);
    if (ds.since && ds.until && ds.until <= ds.since)
      return usage("--until must be later than --since", NULL);
    ds.json = json;
    return do_dataset(&ds);
  }
  if (is_tr) {
    if (npos) return usage("train takes no arguments, only options:", pos[0]);
    if (!tr.dataset) return usage("train needs --dataset FILE.csv", NULL);
    if (!tr.spec) return usage("train needs --spec NAME.features.yaml", NULL);
    if (!tr.out) return usage("train needs --out NAME.json", NULL);
    tr.json = json;
    return do_train(&tr);
  }
  if (npos != 2) return usage("compare needs two models: OLD.json NEW.json", NULL);
  if (!co.dataset) return usage("compare needs --dataset FILE.csv", NULL);
  co.old_path = pos[0];
  co.new_path = pos[1];
  co.json = json;
  return do_compare(&co);
}
