/* replay.c — re-deciding recorded decisions (the contract is replay.h).
 *
 * For each snapshot the reader returns (filters apply to the record header,
 * so nothing is parsed to skip a record), the payload's members are located
 * in one pass and the few replay needs are parsed (see "reading a payload");
 * the recorded request, as the JSON text it was recorded as, is decided
 * again through the engine's own path for JSON requests
 * (engine_decide_json_at), with the recorded clock reading as request.time
 * and the limits the recorded decision ran under. The bundle is either the
 * recorded strategy version, loaded from the content-addressed store
 * (<store>/<version>.json, which holds the strategy's canonical form — JSON,
 * hence YAML, so policy_bundle_from_text loads it) and cached by version, or
 * the candidate bundle of opts->policy_dir, loaded once.
 *
 * A stored version must load back to the same version: if the canonical
 * form did not hash to its own name the replay would run some other policy
 * and call the differences nondeterminism, so such a version is refused
 * (every snapshot under it is an error item).
 *
 * Nothing is written: no snapshots, no version store. Not here: scoring,
 * diffs and reports (score.c, report.c), which are built on the callback. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/json.h"
#include "engine/engine.h"
#include "replay/replay.h"
#include "snapshot/snapshot.h"

/* One policy version, loaded (or found missing: error set) once. */
typedef struct version_entry {
  char version[65];
  char model[65];    /* the model version the snapshot used, "" none */
  char features[65]; /* its feature spec's version */
  policy_bundle *bundle; /* NULL: could not be loaded */
  name_table *names;
  arena mem; /* names */
  char *text;
  char *error;
} version_entry;

typedef struct replayer {
  const replay_opts *opts;
  char *store; /* where recorded versions are read from */
  version_entry *versions;
  size_t nversions, cap;
  version_entry *last; /* the version the previous snapshot used */
  version_entry candidate;
  arena mem; /* per snapshot: the parsed members and strings handed out */
  vd_decision *d;
  char msg[1024]; /* the current item's error message */
} replayer;

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static void entry_free(version_entry *v) {
  policy_bundle_free(v->bundle);
  arena_free(&v->mem);
  free(v->text);
  free(v->error);
  memset(v, 0, sizeof *v);
}

static char *read_whole(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 16384;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        errno = ENOMEM;
        return NULL;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    errno = EIO;
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

/* Diagnostics as one message: the count and the first error. */
static char *diags_message(const char *what, const policy_diags *dg) {
  const policy_diag *first = NULL;
  for (size_t i = 0; i < dg->n && !first; i++)
    if (dg->items[i].severity == DIAG_ERROR) first = &dg->items[i];
  char *m = NULL;
  int rc = first ? asprintf(&m, "%s does not load (%zu error%s): %s:%d:%d: %s%s%s", what,
                            dg->errors, dg->errors == 1 ? "" : "s", first->file, first->line,
                            first->column, first->key, first->key[0] ? ": " : "", first->message)
                 : asprintf(&m, "%s does not load", what);
  return rc < 0 ? NULL : m;
}

static int is_hex64(const char *s, size_t n) {
  if (n != 64) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

static void version_load(replayer *rp, version_entry *v) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s.json", rp->store, v->version);
  size_t len;
  v->text = read_whole(path, &len);
  if (!v->text) {
    char buf[4400];
    snprintf(buf, sizeof buf,
             "policy version %.12s… is not in the version store (%s: %s); it is kept there by "
             "the engine that recorded the snapshot unless it ran with no store",
             v->version, path, strerror(errno));
    v->error = strdup(buf);
    return;
  }
  policy_diags dg;
  memset(&dg, 0, sizeof dg);
  if (policy_bundle_from_text(path, v->text, len, &v->bundle, &dg) != 0 || !v->bundle) {
    v->error = diags_message(path, &dg);
    policy_diags_free(&dg);
    policy_bundle_free(v->bundle);
    v->bundle = NULL;
    return;
  }
  policy_diags_free(&dg);
  if (v->bundle->nstrategies != 1 || strcmp(v->bundle->strategies[0].version, v->version) != 0) {
    char buf[4400];
    snprintf(buf, sizeof buf,
             "%s loads as version %.12s…, not as the version its name says: replaying under it "
             "would not be replaying the recorded policy",
             path, v->bundle->nstrategies ? v->bundle->strategies[0].version : "(none)");
    v->error = strdup(buf);
    policy_bundle_free(v->bundle);
    v->bundle = NULL;
    return;
  }
  if (v->model[0] && v->bundle->strategies[0].fallback_model) {
    /* the model and spec the decision used, kept in the store by content */
    char mp[4300], fp[4300];
    snprintf(mp, sizeof mp, "%s/models/%s.json", rp->store, v->model);
    snprintf(fp, sizeof fp, "%s/models/%s.features.yaml", rp->store, v->features);
    memset(&dg, 0, sizeof dg);
    if (policy_bundle_attach_model(v->bundle, 0, mp, fp, &dg) != 0) {
      v->error = diags_message(path, &dg);
      policy_diags_free(&dg);
      policy_bundle_free(v->bundle);
      v->bundle = NULL;
      return;
    }
    policy_diags_free(&dg);
  }
  arena_init(&v->mem, NULL, 0, 0);
  v->names = name_tables_build(&v->mem, v->bundle);
}

/* The cached entry for a version (loading it on first use); NULL only when
 * out of memory. */
static int entry_is(const version_entry *v, const char *ver, size_t n, const char *mv,
                    const char *fv) {
  return strlen(v->version) == n && memcmp(v->version, ver, n) == 0 && !strcmp(v->model, mv) &&
         !strcmp(v->features, fv);
}

static version_entry *version_get(replayer *rp, const char *ver, size_t n, const char *mv,
                                  const char *fv) {
  if (rp->last && entry_is(rp->last, ver, n, mv, fv)) return rp->last;
  for (size_t i = 0; i < rp->nversions; i++)
    if (entry_is(&rp->versions[i], ver, n, mv, fv)) return rp->last = &rp->versions[i];
  if (rp->nversions == rp->cap) {
    size_t cap = rp->cap ? rp->cap * 2 : 8;
    version_entry *nv = realloc(rp->versions, cap * sizeof *nv);
    if (!nv) return NULL;
    rp->versions = nv;
    rp->cap = cap;
  }
  version_entry *v = &rp->versions[rp->nversions++];
  memset(v, 0, sizeof *v);
  snprintf(v->model, sizeof v->model, "%s", mv);
  snprintf(v->features, sizeof v->features, "%s", fv);
  if (!is_hex64(ver, n) || (mv[0] && !is_hex64(mv, strlen(mv))) ||
      (fv[0] && !is_hex64(fv, strlen(fv)))) {
    /* Not a version the engine writes; never used as a file name. */
    snprintf(v->version, sizeof v->version, "%.*s", (int)(n > 64 ? 64 : n), ver);
    v->error = strdup("the snapshot's policy, model or features version is not a 64-digit hex "
                      "SHA-256");
  } else {
    memcpy(v->version, ver, 64);
    v->version[64] = '\0';
    version_load(rp, v);
  }
  rp->last = NULL; /* realloc may have moved the entries */
  return rp->last = v;
}

/* ---- reading a payload ----
 * A snapshot is mostly the request, the trace and the lets, and replay
 * needs only the request (as text: it is decided again from JSON, as the
 * original was) and a dozen small fields. So the payload is not parsed
 * whole: one pass finds where each top-level member's value lies, skipping
 * over values without building them, and only the small members are parsed.
 * The skipping is lenient about structure (brackets are only counted); what
 * is used is then parsed strictly, the request by the engine itself. */

/* The top-level members replay knows, in the order the engine writes them. */
enum {
  F_FORMAT,
  F_ID,
  F_TIME,
  F_TIME_NS,
  F_NODE,
  F_ENGINE_VERSION,
  F_POINT,
  F_REQUEST,
  F_CANDIDATES,
  F_KEY,
  F_STRATEGY,
  F_POLICY_VERSION,
  F_BUNDLE_VERSION,
  F_MODEL_VERSION,
  F_FEATURES,
  F_TRACE,
  F_LETS,
  F_LET_ERRORS,
  F_MODEL_SCORE,
  F_MODEL_CONFIDENCE,
  F_ACTION,
  F_ALLOWED,
  F_REVIEW,
  F_CONFIDENCE,
  F_SOURCE,
  F_REASON,
  F_LATENCY,
  F_LIMITS,
  F_INPUTS,
  F_MODEL,
  F_COUNT
};

static const char *const field_names[F_COUNT] = {"format",         "id",
                                                 "time",           "time_ns",
                                                 "node",           "engine_version",
                                                 "point",          "request",
                                                 "candidates",     "key",
                                                 "strategy",       "policy_version",
                                                 "bundle_version", "model_version",
                                                 "features",       "trace",
                                                 "lets",           "let_errors",
                                                 "model_score",    "model_confidence",
                                                 "action",         "allowed",
                                                 "review",         "confidence",
                                                 "source",         "reason",
                                                 "latency_ns",     "limits",
                                                 "inputs", "model"};

/* Which of them docs/snapshots.md ("Snapshot contents") requires: all but
 * let_errors and limits, which came with format 1 too but are not audit
 * fields. null is a value: a member that is null by design is present. */
static int field_required(int f) { return f != F_LET_ERRORS && f != F_LIMITS && f != F_MODEL; }

typedef struct span {
  const char *s; /* NULL: absent */
  size_t n;
} span;

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
  return p;
}

/* p at an opening quote: just past the closing one, or NULL. */
static const char *skip_string(const char *p, const char *end) {
  for (p++; p < end; p++) {
    const char *q = memchr(p, '"', (size_t)(end - p));
    if (!q) return NULL;
    size_t bs = 0;
    while (q - bs > p && q[-(ptrdiff_t)bs - 1] == '\\') bs++;
    if (!(bs & 1)) return q + 1;
    p = q;
  }
  return NULL;
}

/* Bytes that matter inside a container being skipped. */
static const unsigned char container_byte[256] = {
    ['"'] = 1, ['\\'] = 1, ['{'] = 1, ['['] = 1, ['}'] = 1, [']'] = 1};

/* p at the first byte of a value: just past it, or NULL. */
static const char *skip_value(const char *p, const char *end) {
  if (p >= end) return NULL;
  if (*p == '"') return skip_string(p, end);
  if (*p == '{' || *p == '[') {
    size_t depth = 0;
    int in_string = 0;
    for (; p < end; p++) {
      unsigned char c = (unsigned char)*p;
      if (!container_byte[c]) continue;
      if (in_string) {
        if (c == '\\')
          p++;
        else if (c == '"')
          in_string = 0;
      } else if (c == '"') {
        in_string = 1;
      } else if (c == '{' || c == '[') {
        depth++;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return p + 1;
      }
    }
    return NULL;
  }
  const char *q = p;
  while (q < end && *q != ',' && *q != '}' && *q != ']' && *q != ' ' && *q != '\n' && *q != '\r' &&
         *q != '\t')
    q++;
  return q > p ? q : NULL;
}

/* Finds the members of the object text [s, s+n) named in names[0..count):
 * out[i] is the value text of names[i] (s NULL when absent; the first one
 * when written twice). 0, or -1 when the text is not an object. */
static int index_object(const char *s, size_t n, const char *const *names, int count, span *out) {
  for (int i = 0; i < count; i++) out[i].s = NULL;
  const char *p = skip_ws(s, s + n), *end = s + n;
  if (p >= end || *p != '{') return -1;
  p = skip_ws(p + 1, end);
  if (p < end && *p == '}') return 0;
  int guess = 0; /* members usually come in the order of names */
  for (;;) {
    if (p >= end || *p != '"') return -1;
    const char *k = p + 1, *ke = skip_string(p, end);
    if (!ke) return -1;
    size_t kn = (size_t)(ke - 1 - k);
    p = skip_ws(ke, end);
    if (p >= end || *p != ':') return -1;
    p = skip_ws(p + 1, end);
    const char *v = p;
    if (!(p = skip_value(p, end))) return -1;
    for (int t = 0; t < count; t++) {
      int i = (guess + t) % count;
      if (strncmp(names[i], k, kn) == 0 && names[i][kn] == '\0') {
        if (!out[i].s) {
          out[i].s = v;
          out[i].n = (size_t)(p - v);
        }
        guess = i + 1;
        break;
      }
    }
    p = skip_ws(p, end);
    if (p < end && *p == ',') {
      p = skip_ws(p + 1, end);
      continue;
    }
    return p < end && *p == '}' ? 0 : -1;
  }
}

/* Parses one small member: its value, or a V_ERROR value when it is absent
 * or malformed (which every use below treats as "not there"). */
static value parse_span(arena *a, span sp) {
  value v = VALUE_ERR("absent");
  if (!sp.s) return v;
  json_opts jo = {.lenient = 1, .max_size = sp.n + 1};
  if (json_parse(a, sp.s, sp.n, &jo, &v, NULL) != 0) return VALUE_ERR("malformed");
  return v;
}

static const value *get(const value *m, const char *k) {
  return m && m->kind == V_MAP ? value_map_get(m, k, strlen(k)) : NULL;
}

static const char *str_or_null(arena *a, const value *v) {
  return v && v->kind == V_STRING ? arena_strndup(a, v->s, v->n) : NULL;
}

static int num(const value *v, double *out) {
  if (!v) return 0;
  switch (v->kind) {
    case V_INT:
      *out = (double)v->i;
      return 1;
    case V_UINT:
      *out = (double)v->u;
      return 1;
    case V_DOUBLE:
      *out = v->d;
      return 1;
    default:
      return 0;
  }
}

static int int64_of(const value *v, int64_t *out) {
  if (!v) return 0;
  if (v->kind == V_INT) {
    *out = v->i;
    return 1;
  }
  if (v->kind == V_UINT && v->u <= (uint64_t)INT64_MAX) {
    *out = (int64_t)v->u;
    return 1;
  }
  return 0;
}

static uint64_t u64_or(const value *v, uint64_t dflt) {
  if (v && v->kind == V_INT && v->i > 0) return (uint64_t)v->i;
  if (v && v->kind == V_UINT && v->u > 0) return v->u;
  return dflt;
}

static int str_eq(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

static int sides_same(const replay_side *a, const replay_side *b) {
  return str_eq(a->action, b->action) && a->allowed == b->allowed && str_eq(a->source, b->source) &&
         str_eq(a->rule, b->rule) && a->confidence == b->confidence;
}

static uint64_t cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Everything for one snapshot but the callback. Returns 0, or a negative
 * VD_E* code with rp->msg set (the item is then an error item). */
static int replay_one(replayer *rp, const snapshot_rec *rec, replay_item *it) {
  arena *a = &rp->mem;
  span f[F_COUNT];
  if (index_object(rec->payload, rec->payload_len, field_names, F_COUNT, f) != 0) {
    snprintf(rp->msg, sizeof rp->msg, "the snapshot's payload is not a JSON object");
    return VD_EJSON;
  }
  value reason = parse_span(a, f[F_REASON]), lat = parse_span(a, f[F_LATENCY]),
        inputs = parse_span(a, f[F_INPUTS]), v;

  /* complete: every required member, and the required parts of a few */
  int complete = 1;
  for (int i = 0; i < F_COUNT; i++)
    if (field_required(i) && !f[i].s) complete = 0;
  if (complete) {
    static const char *const trace_names[] = {"rules", "matched"};
    span t[2];
    complete = index_object(f[F_TRACE].s, f[F_TRACE].n, trace_names, 2, t) == 0 && t[0].s &&
               t[1].s && get(&reason, "rule") && get(&reason, "message") && get(&lat, "parse") &&
               get(&lat, "decide") && get(&inputs, "clock_ns") && get(&inputs, "counters") &&
               get(&inputs, "random");
  }
  it->complete = complete;

  /* the recorded side */
  replay_side *s = &it->recorded;
  v = parse_span(a, f[F_ACTION]);
  s->action = str_or_null(a, &v);
  v = parse_span(a, f[F_ALLOWED]);
  s->allowed = v.kind == V_BOOL && v.b;
  v = parse_span(a, f[F_REVIEW]);
  s->review = v.kind == V_BOOL && v.b;
  v = parse_span(a, f[F_SOURCE]);
  s->source = str_or_null(a, &v);
  s->rule = str_or_null(a, get(&reason, "rule"));
  s->reason = str_or_null(a, get(&reason, "message"));
  s->confidence = 0;
  v = parse_span(a, f[F_CONFIDENCE]);
  num(&v, &s->confidence);
  v = parse_span(a, f[F_POLICY_VERSION]);
  s->policy_version = str_or_null(a, &v);
  double ns = 0;
  num(get(&lat, "total"), &ns);
  s->latency_us = ns / 1000.0;
  v = parse_span(a, f[F_KEY]);
  if (v.kind == V_STRING) it->key = arena_strndup(a, v.s, v.n);

  v = parse_span(a, f[F_FORMAT]);
  if (f[F_FORMAT].s && !(v.kind == V_INT && v.i == 1)) {
    snprintf(rp->msg, sizeof rp->msg,
             "the snapshot is in format %s; this replay reads format 1 (docs/snapshots.md)",
             v.kind == V_INT ? "newer than 1" : "(not a number)");
    return VD_EINVAL;
  }
  /* the request, as text (NUL-terminated for the callback) */
  if (!f[F_REQUEST].s || f[F_REQUEST].s[0] != '{') {
    snprintf(rp->msg, sizeof rp->msg, "the snapshot has no request to replay");
    return VD_EJSON;
  }
  char *req = arena_strndup(a, f[F_REQUEST].s, f[F_REQUEST].n);
  if (!req) {
    snprintf(rp->msg, sizeof rp->msg, "out of memory reading the snapshot");
    return VD_ENOMEM;
  }
  it->request_json = req;
  it->request_len = f[F_REQUEST].n;

  int64_t clock_ns;
  v = parse_span(a, f[F_TIME_NS]);
  if (!int64_of(get(&inputs, "clock_ns"), &clock_ns) && !int64_of(&v, &clock_ns)) {
    snprintf(rp->msg, sizeof rp->msg,
             "the snapshot records no clock reading (inputs.clock_ns): request.time cannot be "
             "fed back");
    return VD_EINVAL;
  }
  value lims = parse_span(a, f[F_LIMITS]);
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  lim.cost_limit = u64_or(get(&lims, "cost"), lim.cost_limit);
  lim.regex_match_limit = (uint32_t)u64_or(get(&lims, "regex_match"), lim.regex_match_limit);
  lim.memory_limit = (size_t)u64_or(get(&lims, "memory"), lim.memory_limit);
  lim.max_request_bytes = (size_t)u64_or(get(&lims, "max_request_bytes"), lim.max_request_bytes);

  version_entry *ve;
  if (rp->opts->policy_dir) {
    ve = &rp->candidate;
  } else {
    const char *pv = it->recorded.policy_version;
    if (!pv) {
      snprintf(rp->msg, sizeof rp->msg, "the snapshot names no policy_version to replay under");
      return VD_ENOTFOUND;
    }
    value model = parse_span(a, f[F_MODEL]);
    const value *mv = get(&model, "version"), *fv = get(&model, "features_version");
    char mvb[65] = "", fvb[65] = "";
    if (mv && mv->kind == V_STRING) snprintf(mvb, sizeof mvb, "%.*s", (int)mv->n, mv->s);
    if (fv && fv->kind == V_STRING) snprintf(fvb, sizeof fvb, "%.*s", (int)fv->n, fv->s);
    ve = version_get(rp, pv, strlen(pv), mvb, fvb);
    if (!ve) {
      snprintf(rp->msg, sizeof rp->msg, "out of memory loading policy versions");
      return VD_ENOMEM;
    }
  }
  if (!ve->bundle || !ve->names) {
    snprintf(rp->msg, sizeof rp->msg, "%s", ve->error ? ve->error : "out of memory");
    return ve->bundle ? VD_ENOMEM : VD_ENOTFOUND;
  }

  vd_error err;
  uint64_t c0 = cpu_now();
  /* The model's deadline, as recorded (the clock decided it): replaying
   * the recorded policy takes that outcome; a candidate runs on the clock. */
  const value *dm = get(&inputs, "model_deadline_missed");
  int deadline = rp->opts->policy_dir ? -1 : dm && dm->kind == V_BOOL && dm->b ? 1 : 0;
  /* The limits' counters as the decision read them (the live store is not
   * consulted: replay charges nothing); a limit the recording did not read
   * reads as an empty counter. */
  const value *counters = get(&inputs, "counters");
  static const value no_counters = {.kind = V_MAP};
  int rc = engine_decide_json_inputs(
      ve->bundle, ve->names, &lim, it->request_json, it->request_len, clock_ns, deadline,
      counters && counters->kind == V_MAP ? counters : &no_counters, rp->d, &err);
  it->cpu_ns = cpu_now() - c0;
  if (rc) {
    snprintf(rp->msg, sizeof rp->msg, "%s", err.message);
    return rc;
  }
  const vd_decision *d = rp->d;
  replay_side *r = &it->replayed;
  r->action = d->action;
  r->allowed = d->allowed;
  r->review = d->review;
  r->source = d->source;
  r->rule = d->rule;
  r->reason = d->reason;
  r->confidence = d->confidence;
  r->policy_version = d->policy_version;
  r->latency_us = d->latency_us;
  return 0;
}

static void replayer_free(replayer *rp) {
  for (size_t i = 0; i < rp->nversions; i++) entry_free(&rp->versions[i]);
  free(rp->versions);
  entry_free(&rp->candidate);
  arena_free(&rp->mem);
  vd_decision_free(rp->d);
  free(rp->store);
}

/* Where recorded versions are read: opts->store_dir, else `versions` beside
 * the snapshot folder (<bundle>/.verdict/snapshots -> <bundle>/.verdict/versions,
 * where `verdict decide` keeps both by default). */
static char *store_path(const replay_opts *o) {
  if (o->store_dir && o->store_dir[0]) return strdup(o->store_dir);
  size_t n = strlen(o->snapshots_dir);
  while (n > 1 && o->snapshots_dir[n - 1] == '/') n--;
  size_t cut = n;
  while (cut > 0 && o->snapshots_dir[cut - 1] != '/') cut--;
  char *p;
  if (cut == 0) /* a relative name with no folder part: versions beside it */
    return strdup("versions");
  if (asprintf(&p, "%.*sversions", (int)cut, o->snapshots_dir) < 0) return NULL;
  return p;
}

int replay_run(const replay_opts *opts, replay_cb cb, void *user, replay_stats *stats, char *err,
               size_t errlen) {
  replay_stats local;
  if (!stats) stats = &local;
  memset(stats, 0, sizeof *stats);
  if (err && errlen) err[0] = '\0';
  if (!opts || !opts->snapshots_dir || !opts->snapshots_dir[0])
    return fail(err, errlen, "replay: no snapshot folder given");

  snapshot_filter f;
  snapshot_filter_init(&f);
  f.since_ns = opts->since_ns;
  f.until_ns = opts->until_ns;
  f.point = opts->point;
  f.action = opts->action;
  f.policy_version = opts->policy_version;
  if (opts->source) {
    f.source = snapshot_source_parse(opts->source, strlen(opts->source));
    if (f.source < 0)
      return fail(err, errlen, "replay: unknown source '%s' (rule, model, default or error)",
                  opts->source);
  }

  replayer rp;
  memset(&rp, 0, sizeof rp);
  rp.opts = opts;
  arena_init(&rp.mem, NULL, 0, 0);
  rp.d = vd_decision_new();
  rp.store = store_path(opts);
  if (!rp.d || !rp.store) {
    replayer_free(&rp);
    return fail(err, errlen, "replay: out of memory");
  }
  if (opts->policy_dir) {
    policy_load_opts lo = {.store_dir = ""}; /* replay writes nothing */
    policy_diags dg;
    memset(&dg, 0, sizeof dg);
    if (policy_bundle_load(opts->policy_dir, &lo, &rp.candidate.bundle, &dg) != 0 ||
        !rp.candidate.bundle) {
      char *m = diags_message(opts->policy_dir, &dg);
      fail(err, errlen, "replay: the bundle %s", m ? m : "does not load");
      free(m);
      policy_diags_free(&dg);
      replayer_free(&rp);
      return -1;
    }
    policy_diags_free(&dg);
    arena_init(&rp.candidate.mem, NULL, 0, 0);
    rp.candidate.names = name_tables_build(&rp.candidate.mem, rp.candidate.bundle);
    if (!rp.candidate.names) {
      replayer_free(&rp);
      return fail(err, errlen, "replay: out of memory");
    }
  }

  snapshot_reader *r;
  char rerr[SNAPSHOT_ERRLEN];
  if (snapshot_reader_open(opts->snapshots_dir, &f, &r, rerr, sizeof rerr) != 0) {
    replayer_free(&rp);
    return fail(err, errlen, "replay: %s", rerr);
  }
  int result = 0;
  snapshot_rec rec;
  for (;;) {
    if (opts->limit && stats->seen >= opts->limit) break;
    int got = snapshot_reader_next(r, &rec);
    if (got < 0) {
      result = fail(err, errlen, "replay: %s", snapshot_reader_error(r));
      break;
    }
    if (got == 0) break;
    stats->seen++;
    arena_reset(&rp.mem);
    replay_item it;
    memset(&it, 0, sizeof it);
    char id_text[SNAPSHOT_ID_TEXT];
    snapshot_id_format(rec.id, id_text);
    it.id = rec.id;
    it.id_text = id_text;
    it.time_ns = rec.time_ns;
    it.point = arena_strndup(&rp.mem, rec.point, rec.point_len);
    it.key = "";
    it.request_json = "";
    rp.msg[0] = '\0';
    it.error = replay_one(&rp, &rec, &it);
    if (it.error) {
      it.error_message = rp.msg;
      memset(&it.replayed, 0, sizeof it.replayed);
      stats->errors++;
    } else {
      stats->replayed++;
      it.same = sides_same(&it.recorded, &it.replayed);
      if (it.same)
        stats->reproduced++;
      else
        stats->changed++;
    }
    if (!it.complete) stats->incomplete++;
    if (!it.point) it.point = "";
    if (cb && cb(user, &it)) break;
  }
  snapshot_reader_close(r);
  replayer_free(&rp);
  return result;
}
