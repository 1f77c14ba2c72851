/* bundle.c — a folder of strategy files to one immutable bundle.
 *
 * Reads every `*.yaml` and `*.yml` file of the folder (names starting with
 * '.' or '_' are skipped, and so are sub-folders), in name order so that messages and
 * versions do not depend on the file system's order. Each file goes through
 * yaml.c and strategy.c with its own scratch arena; what the bundle keeps is
 * copied into the bundle's arena. Then the checks that need every strategy:
 * names unique, each decision point served once. Last, versions: each
 * strategy's canonical form is hashed and written to the store, and the
 * bundle's version is hashed from its strategies' names and versions. A
 * load that wrote to the store's caches tidies them (cache.c, "keeping the
 * store small"). policy_bundle_from_stored loads one stored form back.
 *
 * A bundle with any error is freed and not returned; warnings are returned
 * with it. Nothing here runs while deciding except policy_bundle_find and
 * strategy_action, which are plain scans (a bundle has a handful of
 * strategies and a strategy a handful of actions). */
#define _GNU_SOURCE /* memmem */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/json.h"
#include "expr/expr.h"
#include "policy/internal.h"

#define MAX_FILE_SIZE (16u << 20)
#define MAX_FILES 4096

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n > m && strcmp(s + n - m, suffix) == 0;
}

static char *read_file(const char *path, size_t *len, char *err, size_t err_size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, err_size, "cannot open: %s", strerror(errno));
    return NULL;
  }
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : 8192;
      if (cap > MAX_FILE_SIZE + 1) cap = MAX_FILE_SIZE + 1;
      char *p = realloc(buf, cap + 1);
      if (!p) {
        snprintf(err, err_size, "out of memory reading the file");
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = p;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (n > MAX_FILE_SIZE) {
      snprintf(err, err_size, "file is larger than %u MiB", MAX_FILE_SIZE >> 20);
      free(buf);
      fclose(f);
      return NULL;
    }
    if (r == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    snprintf(err, err_size, "read error");
    free(buf);
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

static void free_strategy_programs(const strategy *s) {
  for (uint32_t j = 0; j < s->nrules; j++) expr_free(s->rules[j].cond);
  for (uint32_t j = 0; j < s->nlets; j++) expr_free(s->lets[j].prog);
  for (uint32_t j = 0; j < s->nlimits; j++) {
    expr_free(s->limits[j].key);
    expr_free(s->limits[j].when);
    expr_free(s->limits[j].charge);
  }
}

static void free_programs(policy_bundle *b) {
  for (uint32_t i = 0; i < b->nstrategies; i++) free_strategy_programs(&b->strategies[i]);
}

void policy_bundle_free(policy_bundle *b) {
  if (!b) return;
  free_programs(b);
  compiled_cache_release(b);
  bundle_free_models(b);
  arena_free(&b->mem);
  free(b);
}

static policy_bundle *bundle_new(const char *dir, uint32_t cap) {
  policy_bundle *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  arena_init(&b->mem, NULL, 0, 0);
  b->dir = arena_strndup(&b->mem, dir, strlen(dir));
  b->strategies = cap ? arena_zalloc(&b->mem, cap * sizeof(strategy)) : NULL;
  if (!b->dir || (cap && !b->strategies)) {
    policy_bundle_free(b);
    return NULL;
  }
  return b;
}

/* Orders a file's diagnostics by place (stable: the order found breaks
 * ties), so a user reads them top to bottom. */
static void sort_diags(policy_diags *d, size_t from) {
  for (size_t i = from + 1; i < d->n; i++) {
    policy_diag x = d->items[i];
    size_t j = i;
    while (j > from && (d->items[j - 1].line > x.line ||
                        (d->items[j - 1].line == x.line && d->items[j - 1].column > x.column))) {
      d->items[j] = d->items[j - 1];
      j--;
    }
    d->items[j] = x;
  }
}

/* Compiles one file's text as strategy number b->nstrategies. */
#define DEFAULT_INDEX_MIN_RULES 8

static uint32_t index_min(const policy_load_opts *opts) {
  return opts && opts->index_min_rules ? opts->index_min_rules : DEFAULT_INDEX_MIN_RULES;
}

/* The stored form into the snapshot folder's own versions too (pin_dir),
 * unless that is the store itself. */
static void pin_put(const char *pin, const char *store, const char *file, const char *version,
                    const char *canon, size_t clen, policy_diags *d) {
  if (!pin || !*pin || (store && !strcmp(pin, store))) return;
  char err[512];
  if (policy_store_put(pin, version, canon, clen, err, sizeof err))
    diag_add(d, DIAG_ERROR, file, 0, 0, "",
             "version %.12s cannot be kept in the snapshot folder (its decisions could not be "
             "replayed from it): %s",
             version, err);
}

static void load_text(policy_bundle *b, strategy_marks *marks, const char *file, const char *src,
                      size_t len, const char *store, const char *pin, uint32_t min_rules,
                      policy_diags *d) {
  size_t first = d->n;
  arena scratch;
  arena_init(&scratch, NULL, 0, 0);
  ynode *root;
  strategy *s = (strategy *)&b->strategies[b->nstrategies];
  if (yaml_load(&scratch, file, src, len, &root, d) == 0) {
    b->nstrategies++; /* counted now so that free_programs sees its programs */
    strategy_input in = {&b->mem, &scratch, file, src, len, root, min_rules, 0, NULL, 0};
    strategy_compile(&in, s, &marks[b->nstrategies - 1], d);
    size_t clen = 0;
    char *canon = policy_canonical_json(root, &clen);
    if (!canon || policy_sha256_hex(canon, clen, s->version)) {
      diag_add(d, DIAG_ERROR, file, 0, 0, "", "out of memory computing the version");
    } else if (store && *store) {
      char err[512];
      if (policy_store_put(store, s->version, canon, clen, err, sizeof err))
        diag_add(d, DIAG_WARNING, file, 0, 0, "",
                 "version %.12s not kept in the store (replays of it will need this file): %s",
                 s->version, err);
    }
    if (canon) pin_put(pin, store, file, s->version, canon, clen, d);
    free(canon);
  }
  arena_free(&scratch);
  sort_diags(d, first);
}

/* Compiles a strategy from its cached canonical text (cache.c). Returns 0,
 * or -1 having added nothing when the text does not give a usable tree. */
static int load_cached(policy_bundle *b, strategy_marks *marks, const char *file, const char *canon,
                       size_t clen, uint32_t crc, const char *version, uint32_t min_rules,
                       unsigned flags, const char *store, const char *pin, int *wrote,
                       policy_diags *d) {
  size_t first = d->n, errors = d->errors, warnings = d->warnings;
  arena scratch;
  arena_init(&scratch, NULL, 0, 0);
  /* lazily: the programs compiled before, and hints for reading the text */
  const int lazy = (flags & STRATEGY_LAZY) != 0;
  cache_hints hints = {0, 0, 0, 0};
  const compiled_map *compiled =
      lazy ? compiled_cache_open(b, version, crc, clen, store, &hints) : NULL;
  ynode *root = compiled ? compiled_cache_tree(compiled, &scratch) : NULL;
  const int tree_kept = root != NULL;
  if (!root) root = parse_cache_tree(&scratch, canon, clen, lazy, &hints);
  if (!root) {
    arena_free(&scratch);
    return -1;
  }
  strategy *s = (strategy *)&b->strategies[b->nstrategies];
  b->nstrategies++;
  /* A compiled/ file of this user's, its CRC checked, exists only because
   * this build loaded this very text without an error and wrote it: the
   * lets need not be checked again (STRATEGY_LETS_CHECKED). */
  const unsigned checked = compiled && compiled_cache_own(compiled) ? STRATEGY_LETS_CHECKED : 0;
  strategy_input in = {&b->mem,   &scratch,        file, canon, clen, root,
                       min_rules, flags | checked, NULL, 0};
  if (checked) in.rule_parts = compiled_cache_rule_parts(compiled, &in.nrule_parts);
  strategy_compile(&in, s, &marks[b->nstrategies - 1], d);
  memcpy(s->version, version, 65); /* attach names the file by it */
  int attached = 0;
  if (checked && d->errors == errors && !(attached = compiled_cache_attach(compiled, s, store))) {
    /* the file did not fit after all (and is gone): compiled again with
     * every check, before a new file is written from it */
    free_strategy_programs(s);
    memset(s, 0, sizeof *s);
    memset(&marks[b->nstrategies - 1], 0, sizeof marks[0]);
    in.flags = flags;
    in.rule_parts = NULL;
    compiled = NULL;
    strategy_compile(&in, s, &marks[b->nstrategies - 1], d);
  }
  if (d->errors != errors && !tree_kept) {
    /* The stored form, checksum and all, stored when it loaded cleanly by
     * a build that checked less (the bounds on lets came later): the file
     * is read as written instead, for its errors to name their places (a
     * cached tree has none). */
    free_strategy_programs(s);
    memset(s, 0, sizeof *s);
    memset(&marks[b->nstrategies - 1], 0, sizeof marks[0]);
    b->nstrategies--;
    d->n = first;
    d->errors = errors;
    d->warnings = warnings;
    arena_free(&scratch);
    return -1;
  }
  memcpy(s->version, version, 65);
  if (d->errors == errors) pin_put(pin, store, file, version, canon, clen, d);
  /* lazily: its programs from the store, or compiled now and kept there;
   * a kept tree that does not compile (a damaged file whose checksum
   * fits, or one kept by a build that checked less) is dropped, for the
   * next load to read the stored form again */
  if (lazy && d->errors == errors && !attached &&
      !(compiled && !checked && compiled_cache_attach(compiled, s, store)))
    *wrote |= compiled_cache_fill(s, tree_kept ? NULL : root, crc, clen, store, &hints);
  else if (tree_kept && d->errors != errors)
    compiled_cache_drop(store, version);
  arena_free(&scratch);
  sort_diags(d, first);
  return 0;
}

/* Checks across strategies, then the bundle's version. */
/* Whether s serves the decision point point[0..len). */
static bool serves(const strategy *s, const char *point, size_t len) {
  for (uint32_t j = 0; j < s->ndecision_points; j++) {
    const char *p = s->decision_points[j];
    if (strlen(p) == len && memcmp(p, point, len) == 0) return true;
  }
  return false;
}

static void finish(policy_bundle *b, const strategy_marks *marks, policy_diags *d) {
  uint32_t n = b->nstrategies;
  for (uint32_t i = 0; i < n; i++) {
    const strategy *s = &b->strategies[i];
    if (!s->name) continue;
    for (uint32_t j = 0; j < i; j++) {
      const strategy *o = &b->strategies[j];
      if (o->name && !strcmp(o->name, s->name)) {
        diag_add(d, DIAG_ERROR, s->file, marks[i].name_line, marks[i].name_col, "strategy",
                 "strategy '%s' is also defined in %s: names are unique in a bundle", s->name,
                 o->file);
        break;
      }
    }
    for (uint32_t k = 0; k < s->ndecision_points; k++) {
      const char *p = s->decision_points[k];
      int line = marks[i].point_line ? marks[i].point_line[k] : marks[i].name_line;
      int col = marks[i].point_line ? marks[i].point_col[k] : marks[i].name_col;
      char key[48];
      if (marks[i].point_line)
        snprintf(key, sizeof key, "decision_points[%u]", k);
      else
        snprintf(key, sizeof key, "strategy");
      for (uint32_t j = 0; j < i; j++) {
        const strategy *o = &b->strategies[j];
        if (!serves(o, p, strlen(p))) continue;
        if (!o->route_candidates && !s->route_candidates) {
          diag_add(d, DIAG_ERROR, s->file, line, col, key,
                   "decision point '%s' is served by both '%s' (%s) and '%s': a request must "
                   "pick one strategy (one of them may take only the requests whose candidates "
                   "are its actions: route: candidates)",
                   p, o->name ? o->name : "?", o->file, s->name ? s->name : "?");
          continue;
        }
        /* route: candidates beside another strategy: no action in common,
         * or a request offering only that action would be taken from the
         * other strategy (an agent guard's allow, say) */
        for (uint32_t a = 0; a < s->nactions; a++)
          if (strategy_action(o, s->actions[a].name, s->actions[a].name_len) >= 0) {
            diag_add(d, DIAG_ERROR, s->file, line, col, key,
                     "strategies '%s' (%s) and '%s' both serve decision point '%s' and both "
                     "answer '%s': with route: candidates, a strategy's actions are its own, so "
                     "that the candidates say which strategy decides",
                     o->name ? o->name : "?", o->file, s->name ? s->name : "?", p,
                     s->actions[a].name);
            break;
          }
      }
    }
  }
  /* Bundle version: SHA-256 of "name\nversion\n" for each strategy, by name. */
  const strategy **order = malloc((n ? n : 1) * sizeof *order);
  if (!order) {
    diag_add(d, DIAG_ERROR, b->dir, 0, 0, "", "out of memory");
    return;
  }
  for (uint32_t i = 0; i < n; i++) order[i] = &b->strategies[i];
  /* insertion sort: a handful of strategies */
  for (uint32_t i = 1; i < n; i++) {
    const strategy *x = order[i];
    uint32_t j = i;
    while (j > 0 &&
           strcmp(order[j - 1]->name ? order[j - 1]->name : "", x->name ? x->name : "") > 0) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = x;
  }
  json_buf buf;
  json_buf_init(&buf, NULL);
  for (uint32_t i = 0; i < n; i++) {
    const char *name = order[i]->name ? order[i]->name : "";
    json_buf_put(&buf, name, strlen(name));
    json_buf_putc(&buf, '\n');
    json_buf_put(&buf, order[i]->version, strlen(order[i]->version));
    json_buf_putc(&buf, '\n');
    const bundle_model *m = order[i]->model;
    if (m) { /* a new model (or spec) is a new bundle */
      json_buf_put(&buf, m->version, strlen(m->version));
      json_buf_putc(&buf, '\n');
      json_buf_put(&buf, m->features_version, strlen(m->features_version));
      json_buf_putc(&buf, '\n');
    }
  }
  if (buf.oom || policy_sha256_hex(buf.data ? buf.data : "", buf.len, b->version))
    diag_add(d, DIAG_ERROR, b->dir, 0, 0, "", "out of memory computing the bundle version");
  json_buf_free(&buf);
  free(order);
}

static int done(policy_bundle *b, const policy_load_opts *opts, policy_bundle **out,
                policy_diags *d, size_t errors0, size_t warnings0) {
  int failed = d->errors > errors0 || (opts && opts->warnings_as_errors && d->warnings > warnings0);
  if (failed) {
    policy_bundle_free(b);
    return -1;
  }
  *out = b;
  return 0;
}

int policy_bundle_load(const char *dir, const policy_load_opts *opts, policy_bundle **out,
                       policy_diags *d) {
  *out = NULL;
  size_t errors0 = d->errors, warnings0 = d->warnings;
  DIR *dh = opendir(dir);
  if (!dh) {
    diag_add(d, DIAG_ERROR, dir, 0, 0, "", "cannot open the bundle folder: %s", strerror(errno));
    return -1;
  }
  char **names = NULL;
  uint32_t nnames = 0, cap = 0;
  struct dirent *de;
  int oom = 0;
  while ((de = readdir(dh))) {
    const char *nm = de->d_name;
    if (nm[0] == '.' || nm[0] == '_' || !(ends_with(nm, ".yaml") || ends_with(nm, ".yml")))
      continue;
    if (nnames == MAX_FILES) {
      diag_add(d, DIAG_ERROR, dir, 0, 0, "", "more than %d strategy files", MAX_FILES);
      break;
    }
    if (nnames == cap) {
      cap = cap ? cap * 2 : 16;
      char **p = realloc(names, cap * sizeof *p);
      if (!p) {
        oom = 1;
        break;
      }
      names = p;
    }
    names[nnames] = strdup(nm);
    if (!names[nnames]) {
      oom = 1;
      break;
    }
    nnames++;
  }
  closedir(dh);
  if (nnames) qsort(names, nnames, sizeof *names, cmp_names);

  size_t dlen = strlen(dir);
  while (dlen > 1 && dir[dlen - 1] == '/') dlen--;
  char store_buf[4096];
  const char *store = opts ? opts->store_dir : NULL;
  if (!store) {
    snprintf(store_buf, sizeof store_buf, "%.*s/.verdict/versions", (int)dlen, dir);
    store = store_buf;
  }
  const char *pin = opts ? opts->pin_dir : NULL;

  policy_bundle *b = oom ? NULL : bundle_new(dir, nnames);
  strategy_marks *marks = calloc(nnames + 1, sizeof *marks);
  /* the parsed/ keys of this load's files, kept by a tidy of the store */
  char(*keys)[65] = calloc(nnames + 1, sizeof *keys);
  const char **kept = calloc(nnames + 1, sizeof *kept);
  size_t nkept = 0;
  int wrote = 0; /* a cache entry was written: the store may need tidying */
  if (!marks || !keys || !kept) {
    policy_bundle_free(b);
    b = NULL;
  }
  if (!b) {
    diag_add(d, DIAG_ERROR, dir, 0, 0, "", "out of memory");
  } else if (nnames == 0 && d->errors == errors0) {
    diag_add(d, DIAG_ERROR, dir, 0, 0, "", "no strategy files (*.yaml, *.yml) in this folder");
  }
  for (uint32_t i = 0; b && i < nnames; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%.*s/%s", (int)dlen, dir, names[i]);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue; /* a folder named x.yaml */
    const char *file = arena_strndup(&b->mem, path, strlen(path));
    const char *point = opts && opts->only_point && opts->only_point[0] ? opts->only_point : NULL;
    /* A file this store has seen, unchanged: its canonical form, not YAML. */
    char key[65], ver[65];
    size_t clen = 0;
    uint32_t crc = 0;
    char *canon = NULL;
    int caching = file && store && *store;
    if (caching) {
      parse_cache_key(path, &st, key);
      memcpy(keys[nkept], key, 65);
      kept[nkept] = keys[nkept];
      nkept++;
      canon = parse_cache_get(store, key, ver, &clen, &crc);
    }
    if (canon) {
      int used = point && !memmem(canon, clen, point, strlen(point));
      if (!used)
        used = load_cached(b, marks, file, canon, clen, crc, ver, index_min(opts),
                           opts && opts->lazy ? STRATEGY_LAZY : 0, store, pin, &wrote, d) == 0;
      parse_cache_put_back(canon, clen);
      if (used) continue;
    }
    char err[256];
    size_t len = 0;
    char *src = file ? read_file(path, &len, err, sizeof err) : NULL;
    if (!src) {
      diag_add(d, DIAG_ERROR, path, 0, 0, "", "%s", file ? err : "out of memory");
      continue;
    }
    if (point && !memmem(src, len, point, strlen(point))) {
      free(src); /* cannot serve that point: not even parsed */
      continue;
    }
    size_t diags0 = d->n;
    uint32_t n0 = b->nstrategies;
    load_text(b, marks, file, src, len, store, pin, index_min(opts), d);
    free(src);
    /* Not a file changed in the last seconds: file times are coarser than
     * edits can be, so another edit could still keep this key (the rule git
     * calls "racily clean"). */
    if (caching && d->n == diags0 && b->nstrategies == n0 + 1 &&
        time(NULL) - st.st_ctim.tv_sec > 2 && time(NULL) - st.st_mtim.tv_sec > 2)
      wrote |= parse_cache_put(store, key, b->strategies[n0].version);
  }
  for (uint32_t i = 0; i < nnames; i++) free(names[i]);
  free(names);
  /* Only a load that wrote to the store's caches tidies them (cache.c,
   * "keeping the store small"): the usual load lists no folder. */
  if (wrote && b) {
    policy_store_stats ts;
    policy_store_tidy(store, kept, nkept, b, 0, &ts);
  }
  free(keys);
  free(kept);
  if (!b) {
    free(marks);
    return -1;
  }
  if (d->errors == errors0) {
    char mdir[4200];
    snprintf(mdir, sizeof mdir, "%.*s/models", (int)dlen, dir);
    bundle_link_models(b, mdir, store, pin, d);
  }
  finish(b, marks, d);
  free(marks);
  return done(b, opts, out, d, errors0, warnings0);
}

int policy_bundle_from_text_opts(const char *file, const char *text, size_t len,
                                 const policy_load_opts *opts, policy_bundle **out,
                                 policy_diags *d) {
  *out = NULL;
  size_t errors0 = d->errors, warnings0 = d->warnings;
  policy_bundle *b = bundle_new("", 1);
  if (!b) {
    diag_add(d, DIAG_ERROR, file, 0, 0, "", "out of memory");
    return -1;
  }
  const char *f = arena_strndup(&b->mem, file, strlen(file));
  if (!f) {
    policy_bundle_free(b);
    diag_add(d, DIAG_ERROR, file, 0, 0, "", "out of memory");
    return -1;
  }
  strategy_marks marks[1];
  load_text(b, marks, f, text, len, "", NULL, index_min(opts), d);
  if (opts && opts->models_dir && d->errors == errors0)
    bundle_link_models(b, opts->models_dir, "", NULL, d);
  finish(b, marks, d);
  return done(b, opts, out, d, errors0, warnings0);
}

int policy_bundle_from_text(const char *file, const char *text, size_t len, policy_bundle **out,
                            policy_diags *d) {
  return policy_bundle_from_text_opts(file, text, len, NULL, out, d);
}

int policy_bundle_from_stored(const char *file, const char *text, size_t len, policy_bundle **out,
                              policy_diags *d) {
  /* The stored form is the canonical JSON of the strategy, so our JSON
   * reader gives its tree (cache.c) far faster than libfyaml; that tree,
   * tests left out (nothing here runs them), is checked to write back to
   * exactly the stored bytes around them, and the version is the SHA-256
   * of all of them: the strategy compiled is the one the text names. Any
   * text that is not such a form, or a strategy with errors (whose
   * messages want the places only the YAML loader knows), is loaded as
   * YAML, as before. */
  *out = NULL;
  size_t errors0 = d->errors, warnings0 = d->warnings;
  arena scratch;
  arena_init(&scratch, NULL, 0, 0);
  ynode *root = parse_cache_tree(&scratch, text, len, 1, NULL);
  policy_bundle *b = root ? bundle_new("", 1) : NULL;
  const char *f = b ? arena_strndup(&b->mem, file, strlen(file)) : NULL;
  if (f) {
    policy_diags own = {0};
    strategy_marks marks[1] = {{0}};
    strategy *s = (strategy *)&b->strategies[0];
    b->nstrategies = 1; /* counted now so that free_programs sees its programs */
    strategy_input in = {&b->mem, &scratch, f, text, len, root, DEFAULT_INDEX_MIN_RULES,
                         0,       NULL,     0};
    strategy_compile(&in, s, &marks[0], &own);
    policy_sha256_hex(text, len, s->version);
    if (own.errors == 0) finish(b, marks, &own);
    for (size_t i = 0; own.errors == 0 && i < own.n; i++) {
      const policy_diag *x = &own.items[i];
      diag_add(d, x->severity, x->file, x->line, x->column, x->key, "%s", x->message);
    }
    int used = own.errors == 0;
    policy_diags_free(&own);
    arena_free(&scratch);
    if (used) return done(b, NULL, out, d, errors0, warnings0);
  } else {
    arena_free(&scratch);
  }
  policy_bundle_free(b);
  return policy_bundle_from_text(file, text, len, out, d);
}

const strategy *policy_bundle_route(const policy_bundle *b, const char *point, size_t len,
                                    const value *candidates) {
  const strategy *plain = NULL;
  for (uint32_t i = 0; i < b->nstrategies; i++) {
    const strategy *s = &b->strategies[i];
    if (!serves(s, point, len)) continue;
    if (!s->route_candidates) {
      if (!plain) plain = s;
      continue;
    }
    if (!candidates || candidates->kind != V_LIST || !candidates->n) continue;
    uint32_t k = 0;
    while (k < candidates->n && candidates->items[k].kind == V_STRING &&
           strategy_action(s, candidates->items[k].s, candidates->items[k].n) >= 0)
      k++;
    if (k == candidates->n) return s;
  }
  return plain;
}

const strategy *policy_bundle_find(const policy_bundle *b, const char *point, size_t len) {
  return policy_bundle_route(b, point, len, NULL);
}

int32_t strategy_action(const strategy *s, const char *name, size_t len) {
  for (uint32_t i = 0; i < s->nactions; i++)
    if (s->actions[i].name_len == len && memcmp(s->actions[i].name, name, len) == 0)
      return (int32_t)i;
  return -1;
}
