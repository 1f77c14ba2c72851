/* cmd_model.c — `verdict model`: look at an XGBoost model, score rows with
 * it, and check a model (and its feature spec, and a golden file) before it
 * goes into a bundle.
 *
 *   verdict model info MODEL.json             what the model is
 *   verdict model predict MODEL.json [CSV|-]  one output line per input row
 *   verdict model check MODEL.json [...]      loads, checks the spec, replays goldens
 *   verdict model features SPEC [JSONL|-]     requests -> feature rows (CSV), for training
 *   verdict model dataset|train|compare       the learning loop (model_learn.c)
 *
 * Scoring is src/model/ (bit for bit XGBoost 1.7); this file only reads
 * CSV and prints. Not here: deciding (verdict decide) — a bundle's
 * strategies use models through their fallback. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "core/json.h"
#include "model/model.h"

const char cmd_model_help[] =
    "usage: verdict model info MODEL.json [--features SPEC]\n"
    "       verdict model predict MODEL.json [ROWS.csv | -]\n"
    "       verdict model check MODEL.json [--features SPEC] [--golden ROWS.csv]\n"
    "       verdict model features SPEC.features.yaml [REQUESTS.jsonl | -] [--model M]\n"
    "       verdict model dataset --snapshots DIR --labels FILE --out DATA.csv [...]\n"
    "       verdict model train --dataset DATA.csv --spec SPEC --out NEW.json [...]\n"
    "       verdict model compare OLD.json NEW.json --dataset DATA.csv [...]\n"
    "\n"
    "MODEL.json is an XGBoost model saved as JSON (booster.save_model(\"m.json\"),\n"
    "XGBoost 1.x to 3.x, booster gbtree) with objective binary:logistic,\n"
    "reg:logistic, reg:squarederror, multi:softprob or multi:softmax.\n"
    "\n"
    "info     prints the objective, the number of trees and outputs, base_score,\n"
    "         the features (name and type, and each one's expression when the\n"
    "         feature spec MODEL.features.yaml is beside the model) and the\n"
    "         version: the SHA-256 of the file, which decisions record.\n"
    "predict  scores CSV rows (a file, or standard input for - or nothing). The\n"
    "         first line names the features in the model's column order (checked\n"
    "         against the model's feature names; columns after them are ignored);\n"
    "         then one row a line, numbers only; an empty cell is a missing value.\n"
    "         Prints one line a row: the probability (multiclass: every class's),\n"
    "         then the margin(s), comma-separated, as %.9g (exact float32). The\n"
    "         numbers are XGBoost's own predict() and predict(output_margin=True).\n"
    "check    loads the model and its feature spec (exit 1 on any problem, each\n"
    "         named by file:line:column or JSON path); with --golden, scores the\n"
    "         rows of a CSV that also has margin0.. and prob0.. columns (as\n"
    "         written by XGBoost: see docs/models.md) and requires every output\n"
    "         to be the same float32.\n"
    "features computes a feature spec's row for each request (JSON Lines, as\n"
    "         `verdict decide --jsonl` and `verdict gen` use) and prints CSV: a\n"
    "         header of the feature names, then one row a request, an empty cell\n"
    "         for a missing value, numbers as %.9g. The expressions see what a\n"
    "         rule condition sees of the request: its context fields by name,\n"
    "         `context` and `request` (not a strategy's lets or constants). Train\n"
    "         on these rows and serving computes exactly what training saw.\n"
    "         With --model, the spec is checked against the model first.\n"
    "\n"
    "The learning loop (docs/models.md, \"Retraining from your own traffic\"):\n"
    "dataset  the model rows the snapshots recorded (their `features`, exactly as\n"
    "         the model saw them), joined to a labels file (as for verdict replay\n"
    "         --labels: by snapshot id, or by request key) and written as CSV: the\n"
    "         features in the spec's order (empty cell: missing), then label (1\n"
    "         when the labelled action is not one of --negative), action, split\n"
    "         (train, or test for the newest --holdout share by decision time),\n"
    "         time_ns and id. Rows of another feature spec version than --spec's\n"
    "         (or than most rows') are left out and counted. Prints the rows,\n"
    "         class balance per split, feature coverage and what was skipped.\n"
    "train    trains a binary:logistic model on the train rows with XGBoost:\n"
    "         needs /usr/bin/python3 and Debian's python3-xgboost where it runs\n"
    "         (serving never does). Before it writes --out, it checks the model\n"
    "         as `check --golden` does, against XGBoost's own predictions for the\n"
    "         test rows. Prints held-out accuracy and AUC, the thresholds of\n"
    "         --policy's strategy that would keep today's rates, and quantiles.\n"
    "compare  scores the test rows with both models: accuracy, AUC, and the\n"
    "         decisions that change at each threshold (counts, example ids).\n"
    "\n"
    "options:\n"
    "      --features SPEC  the feature spec (default: MODEL.features.yaml beside\n"
    "                       the model; info and check skip it when absent)\n"
    "      --golden CSV     check: rows with expected margins and probabilities\n"
    "      --model M        features: check the spec against model M\n"
    "  dataset:\n"
    "  -s, --snapshots DIR  the snapshot folder to read\n"
    "      --labels FILE    JSON Lines of {\"id\"|\"key\", \"action\"} (docs/replay.md)\n"
    "      --out FILE       the CSV to write (train: the model JSON to write)\n"
    "      --spec SPEC      keep rows recorded under this feature spec (default:\n"
    "                       the version most labelled rows have); train: required\n"
    "      --since T, --until T  decision time: RFC 3339 or a span ago (1h, 7d)\n"
    "      --point NAME     one decision point only\n"
    "      --holdout PCT    the newest share held out as test (default 20%)\n"
    "      --negative LIST  labelled actions that count as 0 (default allow)\n"
    "  train:\n"
    "      --dataset CSV    as written by dataset (compare too)\n"
    "      --rounds N, --depth D, --eta E  boosting (default 40, 4, 0.3)\n"
    "      --policy DIR     a bundle: its strategy's thresholds (compare too)\n"
    "      --python PATH    the Python to run (default /usr/bin/python3); the\n"
    "                       script it runs is $VERDICT_TRAINER, else\n"
    "                       verdict-train-model beside verdict or in\n"
    "                       ../share/verdict from it\n"
    "  compare:\n"
    "      --threshold T    a score threshold to compare at (repeatable, <= 8;\n"
    "                       default the --policy's, else 0.5)\n"
    "      --json           dataset, train, compare: the summary as one JSON line\n"
    "  -h, --help           this text\n"
    "\n"
    "Exit status: 0 success; 1 a file is refused or a golden row differs;\n"
    "2 bad usage.\n"
    "\n"
    "examples:\n"
    "  verdict model info examples/policies/models/clef-default-v3.json\n"
    "  printf 'f0,f1\\n3,0.5\\n,1.25\\n' | verdict model predict m.json\n"
    "  verdict model check m.json --golden m.golden.csv\n"
    "  verdict gen --kind gate -n 1000 | verdict model features m.features.yaml > rows.csv\n"
    "  verdict model dataset -s snaps --labels labels.jsonl --out data.csv\n"
    "  verdict model train --dataset data.csv --spec m.features.yaml --out m2.json\n"
    "  verdict model compare m.json m2.json --dataset data.csv --policy bundle\n"
    "\n"
    "More: docs/models.md\n";

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("model", msg, arg);
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* ---- CSV ---- */

typedef struct csv {
  FILE *f;
  const char *name;
  char *line;
  size_t cap;
  long lineno;
  char **cells;
  size_t ncells, maxcells;
} csv;

/* Reads the next line and splits it at commas (no quoting: rows are
 * numbers). Returns the number of cells, 0 at the end, -1 on OOM. */
static long csv_next(csv *c) {
  ssize_t n = getline(&c->line, &c->cap, c->f);
  if (n < 0) return 0;
  c->lineno++;
  while (n > 0 && (c->line[n - 1] == '\n' || c->line[n - 1] == '\r')) c->line[--n] = 0;
  c->ncells = 0;
  char *p = c->line;
  for (;;) {
    if (c->ncells == c->maxcells) {
      size_t m = c->maxcells ? 2 * c->maxcells : 64;
      char **nc = realloc(c->cells, m * sizeof *nc);
      if (!nc) return -1;
      c->cells = nc;
      c->maxcells = m;
    }
    c->cells[c->ncells++] = p;
    char *comma = strchr(p, ',');
    if (!comma) break;
    *comma = 0;
    p = comma + 1;
  }
  return (long)c->ncells;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
  return s;
}

/* A cell: empty is missing (NaN); else a number (nan/inf are refused:
 * missing is an empty cell, and XGBoost refuses infinities in a matrix). */
static int cell_float(csv *c, size_t col, const char *colname, float *out) {
  char *s = trim(c->cells[col]);
  if (!*s) {
    *out = NAN;
    return 0;
  }
  char *end;
  errno = 0;
  float v = strtof(s, &end);
  if (*end || !isfinite(v)) {
    fprintf(stderr,
            "verdict model: %s:%ld: column %zu (%s): '%s' is not a finite number (leave "
            "the cell empty for a missing value)\n",
            c->name, c->lineno, col + 1, colname, s);
    return -1;
  }
  *out = v;
  return 0;
}

static int csv_open(csv *c, const char *path) {
  memset(c, 0, sizeof *c);
  if (!path || !strcmp(path, "-")) {
    c->f = stdin;
    c->name = "<stdin>";
    return 0;
  }
  c->f = cli_open_file("model", path, "r");
  c->name = path;
  return c->f ? 0 : -1;
}

static void csv_close(csv *c) {
  if (c->f && c->f != stdin) fclose(c->f);
  free(c->line);
  free(c->cells);
}

/* Reads the header and checks the first nf names against the model. Sets
 * *ncols. Returns 0 or -1 (after a message). */
static int csv_header(csv *c, const gbdt_model *m, size_t *ncols) {
  uint32_t nf = gbdt_num_features(m);
  long n = csv_next(c);
  if (n <= 0) {
    fprintf(stderr, "verdict model: %s: empty input: the first line names the features\n", c->name);
    return -1;
  }
  if ((size_t)n < nf) {
    fprintf(stderr,
            "verdict model: %s:1: the header has %ld columns, but the model takes %u "
            "features\n",
            c->name, n, nf);
    return -1;
  }
  for (uint32_t i = 0; i < nf; i++) {
    const char *want = gbdt_feature_name(m, i), *got = trim(c->cells[i]);
    if (want && strcmp(want, got)) {
      fprintf(stderr,
              "verdict model: %s:1: column %u is '%s', but the model's feature %u is "
              "'%s' (columns must follow the model's order: see 'verdict model info')\n",
              c->name, i + 1, got, i, want);
      return -1;
    }
  }
  *ncols = (size_t)n;
  return 0;
}

/* ---- commands ---- */

static int load_model(const char *path, gbdt_model **m) {
  char err[1024];
  if (gbdt_load_file(path, m, err, sizeof err)) {
    fprintf(stderr, "verdict model: %s\n", err);
    return -1;
  }
  return 0;
}

/* Loads the spec (given, or beside the model when present). *fs NULL: none. */
static int load_spec(const char *model_path, const char *given, const gbdt_model *m,
                     feature_spec **fs, char **used) {
  *fs = NULL;
  *used = given ? strdup(given) : features_path_for(model_path);
  if (!*used) return -1;
  if (!given && !exists(*used)) return 0;
  char err[1024];
  if (features_load_file(*used, m, fs, err, sizeof err)) {
    fprintf(stderr, "verdict model: %s\n", err);
    return -1;
  }
  return 0;
}

static int do_info(const char *path, const char *spec_path) {
  gbdt_model *m;
  if (load_model(path, &m)) return 1;
  feature_spec *fs;
  char *used;
  if (load_spec(path, spec_path, m, &fs, &used)) {
    free(used);
    gbdt_free(m);
    return 1;
  }
  uint32_t nf = gbdt_num_features(m);
  printf("model       %s\n", path);
  printf("version     %s\n", gbdt_version(m));
  printf("objective   %s\n", gbdt_objective_name(m));
  printf("written by  XGBoost %s\n", gbdt_writer_version(m));
  printf("trees       %u\n", gbdt_num_trees(m));
  printf("outputs     %u%s\n", gbdt_num_outputs(m), gbdt_num_outputs(m) > 1 ? " (classes)" : "");
  printf("base_score  %.9g (base margin %.9g)\n", (double)gbdt_base_score(m),
         (double)gbdt_base_margin(m));
  printf("memory      %zu bytes of packed trees\n", gbdt_memory(m));
  printf("spec        %s\n", fs ? used : "none (no feature spec beside the model)");
  printf("features    %u\n", nf);
  for (uint32_t i = 0; i < nf; i++) {
    const char *name = gbdt_feature_name(m, i);
    char type = gbdt_feature_type(m, i);
    printf("  %3u  %-28s %-*s", i, name ? name : "(unnamed)", fs ? 11 : 0,
           type == 'c' ? "categorical" : "numeric");
    if (fs) printf("  %s = %s", features_type_name(features_type(fs, i)), features_expr(fs, i));
    printf("\n");
  }
  features_free(fs);
  free(used);
  gbdt_free(m);
  return 0;
}

static int do_predict(const char *path, const char *rows) {
  gbdt_model *m;
  if (load_model(path, &m)) return 1;
  csv c;
  if (csv_open(&c, rows)) {
    gbdt_free(m);
    return 1;
  }
  uint32_t nf = gbdt_num_features(m), k = gbdt_num_outputs(m);
  float *row = malloc(nf * sizeof *row), *mg = malloc(k * sizeof *mg), *pr = malloc(k * sizeof *pr);
  size_t ncols = 0;
  int rc = 0;
  if (!row || !mg || !pr) {
    fprintf(stderr, "verdict model: out of memory\n");
    rc = 1;
  } else if (csv_header(&c, m, &ncols)) {
    rc = 1;
  }
  long n;
  while (!rc && (n = csv_next(&c)) != 0) {
    if (n < 0) {
      fprintf(stderr, "verdict model: out of memory\n");
      rc = 1;
      break;
    }
    if (n == 1 && !*trim(c.cells[0]) && nf > 1) continue; /* blank line */
    if ((size_t)n != ncols) {
      fprintf(stderr, "verdict model: %s:%ld: %ld cells, but the header has %zu columns\n", c.name,
              c.lineno, n, ncols);
      rc = 1;
      break;
    }
    for (uint32_t i = 0; i < nf && !rc; i++)
      if (cell_float(&c, i, gbdt_feature_name(m, i) ? gbdt_feature_name(m, i) : "?", &row[i]))
        rc = 1;
    if (rc) break;
    gbdt_predict(m, row, mg, pr, NULL);
    for (uint32_t g = 0; g < k; g++) printf("%s%.9g", g ? "," : "", (double)pr[g]);
    for (uint32_t g = 0; g < k; g++) printf(",%.9g", (double)mg[g]);
    printf("\n");
  }
  if (fflush(stdout) || ferror(stdout)) rc = 1;
  free(row), free(mg), free(pr);
  csv_close(&c);
  gbdt_free(m);
  return rc;
}

int cli_model_check(const char *path, const char *spec_path, const char *golden) {
  gbdt_model *m;
  if (load_model(path, &m)) return 1;
  feature_spec *fs;
  char *used;
  int rc = load_spec(path, spec_path, m, &fs, &used) ? 1 : 0;
  if (!rc)
    printf("%s: %s, %u trees, %u features, version %.12s\n", path, gbdt_objective_name(m),
           gbdt_num_trees(m), gbdt_num_features(m), gbdt_version(m));
  if (!rc)
    printf("%s: %s\n", used, fs ? "matches the model (count, names, types)" : "absent (skipped)");
  features_free(fs);
  free(used);
  csv c;
  if (!rc && golden && !csv_open(&c, golden)) {
    uint32_t nf = gbdt_num_features(m), k = gbdt_num_outputs(m);
    size_t ncols;
    float *x = malloc(nf * sizeof *x), *mg = malloc(k * sizeof *mg), *pr = malloc(k * sizeof *pr);
    long rows = 0, bad = 0;
    if (!x || !mg || !pr) {
      rc = 1;
    } else if (csv_header(&c, m, &ncols)) {
      rc = 1;
    } else if (ncols != nf + 2 * (size_t)k) {
      fprintf(stderr,
              "verdict model: %s:1: a golden file has the %u features, then margin0.. "
              "and prob0.. (%u each): %zu columns expected, %zu found\n",
              c.name, nf, k, nf + 2 * (size_t)k, ncols);
      rc = 1;
    }
    long n;
    while (!rc && (n = csv_next(&c)) > 0) {
      if ((size_t)n != ncols) {
        fprintf(stderr, "verdict model: %s:%ld: %ld cells, but the header has %zu columns\n",
                c.name, c.lineno, n, ncols);
        rc = 1;
        break;
      }
      for (uint32_t i = 0; i < nf && !rc; i++)
        if (cell_float(&c, i, "feature", &x[i])) rc = 1;
      if (rc) break;
      gbdt_predict(m, x, mg, pr, NULL);
      rows++;
      for (uint32_t g = 0; g < k; g++) {
        float wm, wp;
        if (cell_float(&c, nf + g, "margin", &wm) || cell_float(&c, nf + k + g, "prob", &wp)) {
          rc = 1;
          break;
        }
        if (memcmp(&wm, &mg[g], sizeof wm) || memcmp(&wp, &pr[g], sizeof wp)) {
          if (bad < 5)
            fprintf(stderr,
                    "verdict model: %s:%ld: output %u: margin %.9g prob %.9g, expected "
                    "%.9g %.9g\n",
                    c.name, c.lineno, g, (double)mg[g], (double)pr[g], (double)wm, (double)wp);
          bad++;
          break;
        }
      }
    }
    if (!rc) {
      printf("%s: %ld rows, %ld differ%s\n", c.name, rows, bad, bad ? "" : " (bit for bit equal)");
      if (bad || rows == 0) rc = 1;
    }
    free(x), free(mg), free(pr);
    csv_close(&c);
  } else if (!rc && golden) {
    rc = 1;
  }
  gbdt_free(m);
  return rc;
}

/* ---- features: requests -> rows ---- */

/* The names a rule condition sees of a request (docs/policy.md): context
 * fields by name, `context`, `request`. */
typedef struct req_names {
  value request, context;
} req_names;

static int req_lookup(void *user, const char *name, size_t len, value *out) {
  const req_names *r = user;
  if (len == 7 && !memcmp(name, "request", 7)) {
    *out = r->request;
    return 0;
  }
  if (len == 7 && !memcmp(name, "context", 7)) {
    *out = r->context;
    return 0;
  }
  const value *v = r->context.kind == V_MAP ? value_map_get(&r->context, name, len) : NULL;
  if (!v) return -1;
  *out = *v;
  return 0;
}

static int do_features(const char *spec_path, const char *in, const char *model_path) {
  gbdt_model *m = NULL;
  if (model_path && load_model(model_path, &m)) return 1;
  char err[1024];
  feature_spec *fs;
  if (features_load_file(spec_path, m, &fs, err, sizeof err)) {
    fprintf(stderr, "verdict model: %s\n", err);
    gbdt_free(m);
    return 1;
  }
  gbdt_free(m);
  FILE *f = stdin;
  const char *name = "<stdin>";
  if (in && strcmp(in, "-")) {
    name = in;
    if (!(f = cli_open_file("model", in, "r"))) {
      features_free(fs);
      return 1;
    }
  }
  uint32_t n = features_count(fs);
  for (uint32_t i = 0; i < n; i++) printf("%s%s", i ? "," : "", features_name(fs, i));
  printf("\n");
  float *row = malloc((n ? n : 1) * sizeof *row);
  char *line = NULL;
  size_t cap = 0;
  long lineno = 0;
  int rc = row ? 0 : 1;
  arena a;
  arena_init(&a, NULL, 0, 64u << 20);
  ssize_t len;
  while (!rc && (len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
      len--;
    if (len == 0) continue;
    arena_reset(&a);
    value req;
    json_error je;
    if (json_parse(&a, line, (size_t)len, NULL, &req, &je)) {
      fprintf(stderr, "verdict model: %s:%ld:%d: at %s: %s\n", name, lineno, je.column, je.path,
              je.message);
      rc = 1;
      break;
    }
    const value *ctx = req.kind == V_MAP ? value_map_get(&req, "context", 7) : NULL;
    if (!ctx || ctx->kind != V_MAP) {
      fprintf(stderr, "verdict model: %s:%ld: a request is an object with a \"context\" object\n",
              name, lineno);
      rc = 1;
      break;
    }
    req_names rn = {req, *ctx};
    expr_activation act = {.lookup = req_lookup, .user = &rn};
    eval_ctx ec = {.arena = &a};
    features_extract(fs, &act, &ec, row, NULL, NULL);
    for (uint32_t i = 0; i < n; i++) {
      if (i) putchar(',');
      if (!isnan(row[i])) printf("%.9g", (double)row[i]);
    }
    putchar('\n');
  }
  if (fflush(stdout) || ferror(stdout)) rc = 1;
  arena_free(&a);
  free(line);
  free(row);
  if (f != stdin) fclose(f);
  features_free(fs);
  return rc;
}

int cmd_model(int argc, char **argv) {
  if (argc < 2)
    return usage_error(
        "needs a subcommand: info, predict, check, features, dataset, train or compare", NULL);
  const char *sub = argv[1];
  if (!strcmp(sub, "-h") || !strcmp(sub, "--help")) {
    fputs(cmd_model_help, stdout);
    return 0;
  }
  if (!strcmp(sub, "dataset") || !strcmp(sub, "train") || !strcmp(sub, "compare"))
    return cli_model_learn(sub, argc, argv);
  if (strcmp(sub, "info") && strcmp(sub, "predict") && strcmp(sub, "check") &&
      strcmp(sub, "features"))
    return usage_error(
        "unknown subcommand (info, predict, check, features, dataset, train or compare):", sub);
  const char *pos[3] = {NULL, NULL, NULL}, *spec = NULL, *golden = NULL, *model = NULL;
  int npos = 0, dashdash = 0;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (!dashdash && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
      fputs(cmd_model_help, stdout);
      return 0;
    }
    if (!dashdash && !strcmp(a, "--")) {
      dashdash = 1;
      continue;
    }
    if (!dashdash && !strcmp(a, "--model")) {
      if (strcmp(sub, "features"))
        return usage_error("--model is for 'verdict model features'", NULL);
      if (i + 1 >= argc) return usage_error("needs a value:", a);
      model = argv[++i];
      continue;
    }
    if (!dashdash && (!strcmp(a, "--features") || !strcmp(a, "--golden"))) {
      if (!strcmp(sub, "predict") || !strcmp(sub, "features"))
        return usage_error("this subcommand does not take", a);
      if (!strcmp(a, "--golden") && strcmp(sub, "check"))
        return usage_error("--golden is for 'verdict model check'", NULL);
      if (i + 1 >= argc) return usage_error("needs a value:", a);
      if (!strcmp(a, "--features"))
        spec = argv[++i];
      else
        golden = argv[++i];
      continue;
    }
    if (!dashdash && a[0] == '-' && a[1]) return usage_error("unknown option", a);
    if (npos == 3) return usage_error("too many arguments", a);
    pos[npos++] = a;
  }
  if (!strcmp(sub, "features")) {
    if (npos < 1) return usage_error("needs the feature spec (NAME.features.yaml)", NULL);
    if (npos > 2) return usage_error("too many arguments", pos[2]);
    return do_features(pos[0], pos[1], model);
  }
  if (npos < 1) return usage_error("needs the model file (MODEL.json)", NULL);
  if (!strcmp(sub, "predict")) {
    if (npos > 2) return usage_error("too many arguments", pos[2]);
    return do_predict(pos[0], pos[1]);
  }
  if (npos > 1) return usage_error("too many arguments", pos[1]);
  return !strcmp(sub, "info") ? do_info(pos[0], spec) : cli_model_check(pos[0], spec, golden);
}
