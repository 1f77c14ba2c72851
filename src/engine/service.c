/* service.c — the engine's calls for the parts above it (service.h, and the
 * "calls for hosts" of verdict.h): inline tests and the warm-up, a copy of
 * the live bundle's description, reading a snapshot by id, the versions the
 * version store keeps, diagnostics, and deciding against a bundle replay
 * loaded.
 *
 * The warm-up decides on the live bundle itself (engine_with_live_bundle),
 * not on a second copy: the same compiled programs, regexes and models the
 * first requests will use are the ones brought in. It calls decide_run
 * directly, which records nothing; its decision has no counter store, so
 * every limit reads empty and nothing is charged.
 *
 * Not here: the live bundle's swap and the decide calls (engine.c), the
 * snapshot log's format (src/snapshot/). */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json.h"
#include "engine/engine.h"
#include "engine/service.h"
#include "snapshot/snapshot.h"

_Static_assert((int)SERVICE_RULE_FALSE == (int)RR_FALSE && (int)SERVICE_RULE_TRUE == (int)RR_TRUE &&
                   (int)SERVICE_RULE_ERROR == (int)RR_ERROR &&
                   (int)SERVICE_RULE_NOT_CANDIDATE == (int)RR_NOT_CANDIDATE,
               "service.h's rule results are engine.h's");

/* ---- inline tests ---- */
static void test_of(const strategy *s, const policy_test *t, service_test *out) {
  memset(out, 0, sizeof *out);
  out->strategy = s->name;
  out->file = s->file;
  out->expect_allowed = -1;
  if (!t) return;
  out->name = t->name;
  out->line = t->line;
  out->expect_action = t->expect_action;
  out->expect_allowed = t->expect_allowed;
  out->expect_source = t->expect_source;
  out->expect_rule = t->expect_rule;
}

int service_tests_run(const struct policy_bundle *b, const char *only, unsigned flags,
                      service_test_fn fn, void *ud, unsigned *decided) {
  if (decided) *decided = 0;
  if (!b) return VD_EINVAL;
  vd_decision *d = vd_decision_new();
  if (!d) return VD_ENOMEM;
  vd_decision_set_trace(d, (flags & SERVICE_TESTS_TRACE) != 0);
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  unsigned n = 0;
  for (uint32_t k = 0; k < b->nstrategies; k++) {
    const strategy *s = &b->strategies[k];
    if (only && strcmp(s->name, only) != 0) continue;
    uint32_t runs = s->ntests ? s->ntests : (flags & SERVICE_TESTS_UNTESTED) ? 1 : 0;
    for (uint32_t j = 0; j < runs; j++) {
      const policy_test *t = s->ntests ? &s->tests[j] : NULL;
      const char *point = t && t->point         ? t->point
                          : s->ndecision_points ? s->decision_points[0]
                                                : s->name;
      decide_request req;
      req.action = value_str(point, (uint32_t)strlen(point));
      req.candidates = t && t->candidates.kind == V_LIST ? t->candidates : value_list(NULL, 0);
      req.key = t && t->key.kind == V_STRING ? t->key : value_str("", 0);
      req.context = t && t->context.kind == V_MAP ? t->context : value_map(NULL, 0);
      decision_reset(d);
      /* no counter store: each test starts from empty counters, or from its
       * own `counters:` (docs/policy.md, "Limits") */
      d->counters_in = t && t->counters.kind == V_MAP ? &t->counters : NULL;
      vd_error err;
      engine_error_clear(&err);
      int rc = decide_run(b, NULL, &req, &lim, d, &err);
      if (rc == 0) n++;
      if (fn) {
        service_test st;
        test_of(s, t, &st);
        fn(ud, &st, rc, d, &err);
      }
    }
  }
  vd_decision_free(d);
  if (decided) *decided = n;
  return 0;
}

typedef struct warm_ctx {
  unsigned n;
  int rc;
} warm_ctx;

static void warm_live(void *ud, const policy_bundle *b) {
  warm_ctx *w = ud;
  w->rc = service_tests_run(b, NULL, SERVICE_TESTS_UNTESTED, NULL, NULL, &w->n);
}

int vd_engine_warm_up(vd_engine *e, unsigned *decisions, vd_error *err) {
  engine_error_clear(err);
  if (decisions) *decisions = 0;
  if (!e) return engine_error(err, VD_EINVAL, 0, 0, NULL, "vd_engine_warm_up: engine is NULL");
  warm_ctx w = {0, VD_ENOMEM};
  engine_with_live_bundle(e, warm_live, &w);
  if (w.rc) return engine_error(err, w.rc, 0, 0, NULL, "out of memory warming up");
  if (decisions) *decisions = w.n;
  return 0;
}

/* ---- the trace ---- */
unsigned service_trace_count(const vd_decision *d) { return d ? d->ntrace : 0; }

int service_trace_rule(const vd_decision *d, unsigned i, const char **name, int *result) {
  if (!d || i >= d->ntrace) return -1;
  if (name) *name = d->trace[i].name;
  if (result) *result = d->trace[i].result;
  return 0;
}

void service_trace_rules(const vd_decision *d, unsigned *total, unsigned *considered) {
  if (total) *total = d ? d->rules_total : 0;
  if (considered) *considered = d ? d->rules_indexed : 0;
}

/* ---- the live bundle, described ---- */
struct vd_bundle {
  arena mem; /* everything below */
  const char *version;
  const char *dir;
  vd_strategy_info *strategies;
  unsigned n;
};

typedef struct describe_ctx {
  vd_bundle *out;
  int oom;
} describe_ctx;

static const char *dup_str(arena *a, const char *s, int *oom) {
  if (!s) return NULL;
  char *c = arena_strndup(a, s, strlen(s));
  if (!c) *oom = 1;
  return c;
}

static const char *const *dup_list(arena *a, const char *const *from, size_t n, int *oom) {
  const char **to = arena_zalloc(a, (n ? n : 1) * sizeof *to);
  if (!to) {
    *oom = 1;
    return NULL;
  }
  for (size_t i = 0; i < n; i++) to[i] = dup_str(a, from[i], oom);
  return to;
}

/* Runs with the live bundle held: only copies. */
static void describe_live(void *ud, const policy_bundle *b) {
  describe_ctx *c = ud;
  vd_bundle *o = c->out;
  arena *a = &o->mem;
  o->version = dup_str(a, b->version, &c->oom);
  o->dir = dup_str(a, b->dir ? b->dir : "", &c->oom);
  o->n = b->nstrategies;
  o->strategies = arena_zalloc(a, (o->n ? o->n : 1) * sizeof *o->strategies);
  if (!o->strategies) {
    c->oom = 1;
    return;
  }
  for (uint32_t i = 0; i < b->nstrategies && !c->oom; i++) {
    const strategy *s = &b->strategies[i];
    vd_strategy_info *v = &o->strategies[i];
    v->name = dup_str(a, s->name, &c->oom);
    v->version = dup_str(a, s->version, &c->oom);
    v->file = dup_str(a, s->file, &c->oom);
    v->decision_points = dup_list(a, s->decision_points, s->ndecision_points, &c->oom);
    v->ndecision_points = s->ndecision_points;
    const char **rules = arena_zalloc(a, (s->nrules ? s->nrules : 1) * sizeof *rules);
    if (!rules) {
      c->oom = 1;
      break;
    }
    for (uint32_t r = 0; r < s->nrules; r++) rules[r] = dup_str(a, s->rules[r].name, &c->oom);
    v->rules = rules;
    v->nrules = s->nrules;
  }
}

int vd_engine_bundle(vd_engine *e, vd_bundle **out, vd_error *err) {
  engine_error_clear(err);
  if (!out) return engine_error(err, VD_EINVAL, 0, 0, NULL, "vd_engine_bundle: out is NULL");
  *out = NULL;
  if (!e) return engine_error(err, VD_EINVAL, 0, 0, NULL, "vd_engine_bundle: engine is NULL");
  vd_bundle *b = calloc(1, sizeof *b);
  if (!b) return engine_error(err, VD_ENOMEM, 0, 0, NULL, "out of memory describing the bundle");
  arena_init(&b->mem, NULL, 0, 0);
  describe_ctx c = {b, 0};
  engine_with_live_bundle(e, describe_live, &c);
  if (c.oom || !b->version) {
    vd_bundle_free(b);
    return engine_error(err, VD_ENOMEM, 0, 0, NULL, "out of memory describing the bundle");
  }
  *out = b;
  return 0;
}

const char *vd_bundle_version(const vd_bundle *b) { return b ? b->version : NULL; }
const char *vd_bundle_dir(const vd_bundle *b) { return b ? b->dir : NULL; }
unsigned vd_bundle_strategy_count(const vd_bundle *b) { return b ? b->n : 0; }

int vd_bundle_strategy(const vd_bundle *b, unsigned i, vd_strategy_info *out) {
  if (!b || !out || i >= b->n) return VD_EINVAL;
  *out = b->strategies[i];
  return 0;
}

void vd_bundle_free(vd_bundle *b) {
  if (!b) return;
  arena_free(&b->mem);
  free(b);
}

/* ---- a recorded decision by id ---- */
/* A member of a parsed snapshot, or NULL. */
static const value *member(const value *v, const char *k) {
  return v && v->kind == V_MAP ? value_map_get(v, k, strlen(k)) : NULL;
}

static void put_member(json_buf *b, const char *key, const value *v) {
  json_buf_putc(b, ',');
  json_write_string(b, key, strlen(key));
  json_buf_putc(b, ':');
  if (v)
    json_write(b, v, 1);
  else
    JSON_PUT(b, "null");
}

/* A rollout's answered decision, read by id, with the decision that
 * completes it (its off-path side: docs/snapshots.md, "Shadow and
 * canary") merged in as "shadow": the completing record has the answered
 * one's time, so only the records of that nanosecond are read. b holds the
 * answered payload; nothing changes when none completes it. */
static void merge_completion(const char *dir, const snapshot_rec *rec, const char *id,
                             json_buf *b) {
  snapshot_filter f;
  snapshot_filter_init(&f);
  f.since_ns = rec->time_ns;
  f.until_ns = rec->time_ns + 1;
  snapshot_reader *rd;
  char why[SNAPSHOT_ERRLEN];
  if (!rec->time_ns || b->len < 2 || b->data[b->len - 1] != '}' ||
      snapshot_reader_open(dir, &f, &rd, why, sizeof why) < 0)
    return;
  char want[64];
  int wn = snprintf(want, sizeof want, "\"completes\":\"%s\"", id);
  snapshot_rec r;
  while (snapshot_reader_next(rd, &r) == 1) {
    if (r.payload_len < (size_t)wn || !memmem(r.payload, r.payload_len, want, (size_t)wn)) continue;
    arena a;
    arena_init(&a, NULL, 0, 0);
    value v;
    const value *c;
    if (json_parse(&a, r.payload, r.payload_len, NULL, &v, NULL) == 0 &&
        (c = member(&v, "completes")) && c->kind == V_STRING && c->n == strlen(id) &&
        !memcmp(c->s, id, c->n)) {
      b->len--; /* the answered payload's closing brace */
      JSON_PUT(b, ",\"shadow\":{\"side\":");
      const value *side = member(&v, "side");
      if (side)
        json_write(b, side, 1);
      else
        JSON_PUT(b, "null");
      put_member(b, "id", member(&v, "id"));
      static const char *const keys[] = {"policy_version", "bundle_version", "model_version",
                                         "action",         "allowed",        "review",
                                         "source"};
      for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        put_member(b, keys[i], member(&v, keys[i]));
      put_member(b, "rule", member(member(&v, "reason"), "rule"));
      put_member(b, "confidence", member(&v, "confidence"));
      /* a request the other side refused: its error, as the API's error
       * objects name it; null for a decision */
      put_member(b, "error", member(&v, "error"));
      const value *t = member(member(&v, "latency_ns"), "total");
      JSON_PUT(b, ",\"latency_us\":");
      if (t && t->kind == V_INT)
        json_write_double(b, (double)t->i / 1000.0);
      else
        JSON_PUT(b, "null");
      JSON_PUT(b, "}}");
      arena_free(&a);
      break;
    }
    arena_free(&a);
  }
  snapshot_reader_close(rd);
}

int vd_snapshot_read(const char *dir, const char *id, long id_len, char **out, size_t *len,
                     vd_error *err) {
  engine_error_clear(err);
  if (out) *out = NULL;
  if (len) *len = 0;
  if (!out) return engine_error(err, VD_EINVAL, 0, 0, NULL, "vd_snapshot_read: out is NULL");
  size_t n = !id ? 0 : id_len < 0 ? strlen(id) : (size_t)id_len;
  uint8_t raw[16];
  if (!id || snapshot_id_parse(id, n, raw) < 0)
    return engine_error(err, VD_EINVAL, 0, 0, "id",
                        "not a snapshot id: want 8-4-4-4-12 hex digits");
  if (!dir || !*dir)
    return engine_error(err, VD_EINVAL, 0, 0, NULL,
                        "no snapshot folder: this engine records no snapshots");
  /* A reader per lookup: it sees the segments the writer made since. */
  snapshot_reader *rd;
  char why[SNAPSHOT_ERRLEN];
  if (snapshot_reader_open(dir, NULL, &rd, why, sizeof why) < 0)
    return engine_error(err, VD_ESNAPSHOT, 0, 0, NULL, "%s", why);
  snapshot_rec rec;
  int k = snapshot_reader_find(rd, raw, &rec);
  int rc = 0;
  if (k < 0) {
    rc = engine_error(err, VD_ESNAPSHOT, 0, 0, NULL, "%s", snapshot_reader_error(rd));
  } else if (k == 0) {
    rc = engine_error(err, VD_ENOTFOUND, 0, 0, NULL,
                      "no snapshot %.*s (unknown, removed by retention, or not written to disk "
                      "yet)",
                      (int)(n > 40 ? 40 : n), id);
  } else {
    json_buf b;
    json_buf_init(&b, NULL);
    json_buf_put(&b, rec.payload, rec.payload_len);
    char idtext[SNAPSHOT_ID_TEXT];
    snapshot_id_format(raw, idtext);
    merge_completion(dir, &rec, idtext, &b);
    if (b.oom || !(*out = malloc(b.len + 1))) {
      rc = engine_error(err, VD_ENOMEM, 0, 0, NULL, "out of memory reading a snapshot");
    } else {
      memcpy(*out, b.data, b.len);
      (*out)[b.len] = '\0';
      if (len) *len = b.len;
    }
    json_buf_free(&b);
  }
  snapshot_reader_close(rd);
  return rc;
}

/* ---- the version store and diagnostics ---- */
int service_store_path(const char *bundle, const char *store_dir, const char *snapshots_dir,
                       char **out) {
  return engine_store_path(bundle, store_dir, snapshots_dir, out);
}

static int kept_newest_first(const void *a, const void *b) {
  const service_kept *x = a, *y = b;
  if (x->stored != y->stored) return x->stored < y->stored ? 1 : -1;
  return strcmp(x->version, y->version);
}

/* The strategy a stored version is of: the "strategy" key of its canonical
 * form (written first in every stored form, but read properly). NULL when
 * the file does not read as one. */
static char *stored_strategy(const char *dir, const char *version) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s.json", dir, version);
  FILE *f = fopen(path, "r");
  char *text = NULL, *name = NULL;
  long n = 0;
  if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && n < (1 << 20) &&
      fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)n + 1)) &&
      fread(text, 1, (size_t)n, f) == (size_t)n) {
    arena a;
    arena_init(&a, NULL, 0, 0);
    value v;
    if (json_parse(&a, text, (size_t)n, NULL, &v, NULL) == 0 && v.kind == V_MAP) {
      const value *x = value_map_get(&v, "strategy", 8);
      if (x && x->kind == V_STRING) name = strndup(x->s, x->n);
    }
    arena_free(&a);
  }
  free(text);
  if (f) fclose(f);
  return name;
}

int service_versions_kept(const char *store_dir, size_t max, service_kept **out, size_t *n,
                          size_t *total) {
  *out = NULL;
  *n = *total = 0;
  service_kept *list = malloc((max ? max : 1) * sizeof *list);
  if (!list) return VD_ENOMEM;
  size_t nk = 0, all = 0;
  DIR *d = store_dir ? opendir(store_dir) : NULL;
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      size_t len = strlen(e->d_name);
      if (len != 69 || strcmp(e->d_name + 64, ".json") != 0) continue;
      if (strspn(e->d_name, "0123456789abcdef") != 64) continue;
      all++;
      if (nk == max) continue;
      char path[4200];
      struct stat st;
      snprintf(path, sizeof path, "%s/%s", store_dir, e->d_name);
      if (stat(path, &st) != 0) continue;
      memcpy(list[nk].version, e->d_name, 64);
      list[nk].version[64] = '\0';
      list[nk].strategy = NULL;
      list[nk].stored = (long long)st.st_mtime;
      list[nk].bytes = (long long)st.st_size;
      nk++;
    }
    closedir(d);
  }
  qsort(list, nk, sizeof *list, kept_newest_first);
  for (size_t i = 0; i < nk; i++) list[i].strategy = stored_strategy(store_dir, list[i].version);
  *out = list;
  *n = nk;
  *total = all;
  return 0;
}

void service_kept_free(service_kept *list, size_t n) {
  if (!list) return;
  for (size_t i = 0; i < n; i++) free(list[i].strategy);
  free(list);
}

size_t service_bundle_diagnostics(const char *dir, void (*fn)(void *ud, const service_diag *g),
                                  void *ud) {
  policy_load_opts lo = {.store_dir = ""};
  policy_diags diags;
  memset(&diags, 0, sizeof diags); /* the loader appends to it */
  policy_bundle *b = NULL;
  policy_bundle_load(dir, &lo, &b, &diags);
  policy_bundle_free(b);
  for (size_t i = 0; fn && i < diags.n; i++) {
    const policy_diag *p = &diags.items[i];
    service_diag g = {.warning = p->severity != DIAG_ERROR,
                      .file = p->file,
                      .line = p->line,
                      .column = p->column,
                      .key = p->key,
                      .message = p->message};
    fn(ud, &g);
  }
  size_t errors = diags.errors;
  policy_diags_free(&diags);
  return errors;
}

/* ---- deciding against a bundle replay loaded ---- */
struct name_table *service_names_build(arena *a, const struct policy_bundle *b) {
  return name_tables_build(a, b);
}

int service_decide_json(const struct policy_bundle *b, const struct name_table *names,
                        const vd_engine_opts *limits, const char *json, size_t len,
                        int64_t clock_ns, int model_deadline, const struct value *counters,
                        vd_decision *d, vd_error *err) {
  decide_limits lim;
  decide_limits_init(&lim, limits);
  return engine_decide_json_inputs(b, names, &lim, json, len, clock_ns, model_deadline, counters, d,
                                   err);
}

/* ---- a rollout's side ---- */
typedef struct rollout_key_ctx {
  const char *point;
  size_t len;
  char *out;
  size_t n;
} rollout_key_ctx;

static void rollout_key_live(void *ud, const policy_bundle *b) {
  rollout_key_ctx *k = ud;
  const strategy *s = policy_bundle_find(b, k->point, k->len);
  if (s && s->rollout_key) snprintf(k->out, k->n, "%s", s->rollout_key);
}

void service_rollout_key(vd_engine *e, const char *point, size_t len, char *out, size_t n) {
  if (!n) return;
  out[0] = '\0';
  rollout_key_ctx k = {point, len, out, n};
  engine_with_live_bundle(e, rollout_key_live, &k);
}
