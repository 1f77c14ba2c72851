/* record_oracle.h — the snapshot payload of a decision, the slow way (tests
 * only): the format-1 payload (docs/snapshots.md, "Snapshot contents") built
 * as a value tree from the decision and written by json_write. The engine
 * writes the same payload field by field from a binary capture
 * (src/engine/record_capture.c, record_format.c); the two share neither the
 * walk over the decision nor the writing of the members, so a field one of
 * them drops, misplaces or spells otherwise shows as a difference
 * (tests/engine/test_record_equiv.c).
 *
 * What a value tree cannot carry is put in by text after writing: the
 * request as received (its numbers keep their spelling, minified here by a
 * walk of its own) stands in the tree as a marker string that the text
 * replaces. */
#ifndef VD_TEST_RECORD_ORACLE_H
#define VD_TEST_RECORD_ORACLE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/dtoa.h"
#include "core/json.h"
#include "engine/engine.h"
#include "verdict.h"

#define ORACLE_MARK "@@oracle-request@@"

typedef struct oracle_obj {
  map_entry *e;
  uint32_t n, cap;
  arena *a;
} oracle_obj;

static oracle_obj oracle_obj_new(arena *a) {
  oracle_obj o = {NULL, 0, 0, a};
  return o;
}

static value ostr(const char *s) { return s ? value_str(s, (uint32_t)strlen(s)) : value_null(); }

static void oput(oracle_obj *o, const char *key, value v) {
  if (o->n == o->cap) {
    uint32_t cap = o->cap ? o->cap * 2 : 16;
    map_entry *e = arena_alloc(o->a, cap * sizeof *e);
    if (!e) abort();
    if (o->n) memcpy(e, o->e, o->n * sizeof *e);
    o->e = e;
    o->cap = cap;
  }
  o->e[o->n].key = ostr(key);
  o->e[o->n].val = v;
  o->n++;
}

static value odone(oracle_obj *o) { return value_map(o->e, o->n); }

/* A value json_write can write (else null, as the engine writes it). */
static value owritable(arena *a, const value *v, int lenient) {
  json_buf b;
  json_buf_init(&b, a);
  return json_write(&b, v, lenient) == 0 ? *v : value_null();
}

/* The fewest digits that read back to the float; integers as integers. */
static value ofloat(float f) {
  if (f != f) return value_null();
  if (f >= 0 && f < 1e9f && f == (float)(uint32_t)f) return value_int((int64_t)(uint32_t)f);
  char t[32];
  size_t n = ftoa_shortest(f, t);
  t[n] = '\0';
  return value_double(strtod(t, NULL));
}

/* The confidence as the answer writes it. */
static value oconf(double c) { return value_double(c == 0.0 ? 0.0 : c); }

/* "2026-11-29T10:00:00.123456789Z" */
static value otime(arena *a, int64_t ns) {
  int64_t sec = ns / 1000000000, frac = ns % 1000000000;
  if (frac < 0) {
    frac += 1000000000;
    sec--;
  }
  time_t t = (time_t)sec;
  struct tm tm;
  gmtime_r(&t, &tm);
  char *s = arena_alloc(a, 64);
  int n = snprintf(s, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                   tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)frac);
  return value_str(s, (uint32_t)n);
}

/* JSON text without the whitespace outside strings. */
static void ominify(json_buf *b, const char *s, size_t n) {
  int in_str = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (in_str) {
      json_buf_putc(b, c);
      if (c == '\\' && i + 1 < n)
        json_buf_putc(b, s[++i]);
      else if (c == '"')
        in_str = 0;
    } else if (c == '"') {
      in_str = 1;
      json_buf_putc(b, c);
    } else if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
      json_buf_putc(b, c);
    }
  }
}

/* The request built in C, as the JSON request it stands for. */
static void oc_request(arena *a, json_buf *out, const vd_request *r) {
  oracle_obj o = oracle_obj_new(a);
  oput(&o, "action", ostr(r->action));
  if (r->ncandidates) {
    value *c = arena_alloc(a, r->ncandidates * sizeof *c);
    for (size_t i = 0; i < r->ncandidates; i++) c[i] = ostr(r->candidates[i]);
    oput(&o, "candidates", value_list(c, (uint32_t)r->ncandidates));
  }
  if (r->context_json) oput(&o, "context", ostr(ORACLE_MARK));
  if (r->key) oput(&o, "key", ostr(r->key));
  value v = odone(&o);
  json_buf t;
  json_buf_init(&t, a);
  json_write(&t, &v, 0);
  const char *m = r->context_json ? strstr(t.data, "\"" ORACLE_MARK "\"") : NULL;
  if (!m) {
    json_buf_put(out, t.data, t.len);
    return;
  }
  json_buf_put(out, t.data, (size_t)(m - t.data));
  size_t n = r->context_len < 0 ? strlen(r->context_json) : (size_t)r->context_len;
  ominify(out, r->context_json, n);
  const char *rest = m + strlen("\"" ORACLE_MARK "\"");
  json_buf_put(out, rest, strlen(rest));
}

static value omodel(arena *a, const vd_decision *d) {
  static const char *const status[] = {"value", "missing", "default", "unknown"};
  oracle_obj m = oracle_obj_new(a), st = oracle_obj_new(a);
  oput(&m, "name", ostr(d->model_name));
  oput(&m, "version", ostr(d->model_version));
  oput(&m, "features_version", ostr(d->features_version));
  oput(&m, "timeout_ms", value_int(d->model_timeout_ms));
  oput(&m, "deadline_missed", value_bool(d->model_run == MODEL_DEADLINE));
  for (uint32_t i = 0; i < d->nfeatures; i++)
    if (d->feature_status[i] && d->feature_status[i] <= 3)
      oput(&st, d->feature_names[i], ostr(status[d->feature_status[i]]));
  oput(&m, "feature_status", odone(&st));
  oput(&m, "feature_error", ostr(d->feature_error));
  if (d->model_run == MODEL_SCORED && d->model_class >= 0)
    oput(&m, "class", value_int(d->model_class));
  oput(&m, "ns", value_int((int64_t)d->ns_model));
  return odone(&m);
}

static value otrace(arena *a, const vd_decision *d) {
  static const char *const result[] = {"false", "true", "error", "skipped-not-candidate"};
  oracle_obj t = oracle_obj_new(a);
  value *rules = arena_alloc(a, (d->ntrace ? d->ntrace : 1) * sizeof *rules);
  for (uint32_t i = 0; i < d->ntrace; i++) {
    oracle_obj r = oracle_obj_new(a);
    oput(&r, "rule", ostr(d->trace[i].name));
    uint8_t k = d->trace[i].result;
    oput(&r, "result", ostr(result[k == RR_FALSE ? 0 : k == RR_TRUE ? 1 : k == RR_ERROR ? 2 : 3]));
    if (d->trace[i].error) oput(&r, "error", ostr(d->trace[i].error));
    rules[i] = odone(&r);
  }
  oput(&t, "rules", value_list(rules, d->ntrace));
  oput(&t, "matched", d->source && !strcmp(d->source, "rule") ? ostr(d->rule) : value_null());
  oput(&t, "rules_total", value_int(d->rules_total));
  oput(&t, "rules_considered", value_int(d->rules_indexed));
  oput(&t, "no_candidate", ostr(d->no_candidate));
  if (d->floor >= 0) {
    oracle_obj f = oracle_obj_new(a);
    oput(&f, "min", value_double(d->floor));
    oput(&f, "instead_of", ostr(d->floor_from));
    oput(&t, "floor", odone(&f));
  } else {
    oput(&t, "floor", value_null());
  }
  oput(&t, "cost", value_int((int64_t)d->cost));
  return odone(&t);
}

static value ocounters(arena *a, const vd_decision *d) {
  oracle_obj c = oracle_obj_new(a);
  for (uint32_t i = 0; i < d->nlimit_reads && d->limits_of; i++) {
    const limit_read *lr = &d->limit_reads[i];
    if (lr->state != LIMIT_READ) continue;
    oracle_obj r = oracle_obj_new(a);
    oput(&r, "key", value_str(lr->key, lr->key_len));
    oput(&r, "count", value_int((int64_t)lr->r.count));
    oput(&r, "penalized", value_bool(lr->r.penalized));
    oput(&r, "charged", value_bool(lr->r.charged));
    if (lr->r.degraded) oput(&r, "degraded", value_bool(true));
    oput(&c, d->limits_of->limits[i].name, odone(&r));
  }
  return odone(&c);
}

/* The payload of decision d, into a's memory: 0, or -1. */
static int oracle_payload(arena *a, const vd_decision *d, const record_input *in, const char *id,
                          const char *node, const char **out, size_t *len) {
  const decide_request *req = in->req;
  int model = d->model_run == MODEL_SCORED || d->model_run == MODEL_DEADLINE;
  oracle_obj p = oracle_obj_new(a);
  oput(&p, "format", value_int(1));
  oput(&p, "id", ostr(id));
  oput(&p, "time", otime(a, d->clock_ns));
  oput(&p, "time_ns", value_int(d->clock_ns));
  oput(&p, "node", ostr(node));
  oput(&p, "engine_version", ostr(vd_version()));
  oput(&p, "point", value_str(req->action.s, req->action.n));
  oput(&p, "request", in->json || in->creq ? ostr(ORACLE_MARK) : value_null());
  value *cands = arena_alloc(a, (req->candidates.n ? req->candidates.n : 1) * sizeof *cands);
  for (uint32_t i = 0; i < req->candidates.n; i++)
    cands[i] = owritable(a, &req->candidates.items[i], 0);
  oput(&p, "candidates", value_list(cands, req->candidates.n));
  oput(&p, "key", value_str(req->key.s, req->key.n));
  oput(&p, "strategy", ostr(d->strategy));
  oput(&p, "policy_version", ostr(d->policy_version));
  oput(&p, "bundle_version", ostr(d->bundle_version));
  if (model) {
    oracle_obj f = oracle_obj_new(a);
    for (uint32_t i = 0; i < d->nfeatures; i++)
      oput(&f, d->feature_names[i], ofloat(d->features[i]));
    oput(&p, "model_version", ostr(d->model_version));
    oput(&p, "features", odone(&f));
    oput(&p, "model", omodel(a, d));
  } else {
    oput(&p, "model_version", value_null());
    oput(&p, "features", value_null());
    oput(&p, "model", value_null());
  }
  oput(&p, "trace", otrace(a, d));
  oracle_obj lets = oracle_obj_new(a), errs = oracle_obj_new(a);
  for (uint32_t i = 0; i < d->nlets; i++) {
    const value *v = d->let_values ? &d->let_values[i] : NULL;
    if (v && v->kind == V_ERROR)
      oput(&errs, d->lets[i], value_str(v->s, v->n));
    else
      oput(&lets, d->lets[i], v ? owritable(a, v, 1) : value_null());
  }
  oput(&p, "lets", odone(&lets));
  oput(&p, "let_errors", odone(&errs));
  if (d->model_run == MODEL_SCORED) {
    oput(&p, "model_score", value_double(d->model_score));
    oput(&p, "model_confidence",
         d->model_confidence == d->model_confidence ? value_double(d->model_confidence)
                                                    : value_null());
  } else {
    oput(&p, "model_score", value_null());
    oput(&p, "model_confidence", value_null());
  }
  oput(&p, "action", ostr(d->action));
  oput(&p, "allowed", value_bool(d->allowed));
  oput(&p, "review", value_bool(d->review));
  oput(&p, "confidence", oconf(d->confidence));
  oput(&p, "source", ostr(d->source));
  oracle_obj reason = oracle_obj_new(a);
  oput(&reason, "rule", ostr(d->rule));
  oput(&reason, "message", ostr(d->reason));
  oput(&p, "reason", odone(&reason));
  oracle_obj lat = oracle_obj_new(a);
  oput(&lat, "parse", value_int((int64_t)d->ns_parse));
  oput(&lat, "decide", value_int((int64_t)d->ns_decide));
  oput(&lat, "render", value_int((int64_t)d->ns_render));
  oput(&lat, "total", value_int((int64_t)d->latency_ns));
  oput(&p, "latency_ns", odone(&lat));
  oracle_obj lim = oracle_obj_new(a);
  oput(&lim, "cost", value_int((int64_t)in->lim->cost_limit));
  oput(&lim, "regex_match", value_int((int64_t)in->lim->regex_match_limit));
  oput(&lim, "memory", value_int((int64_t)in->lim->memory_limit));
  oput(&lim, "max_request_bytes", value_int((int64_t)in->lim->max_request_bytes));
  oput(&p, "limits", odone(&lim));
  oracle_obj inputs = oracle_obj_new(a);
  oput(&inputs, "clock_ns", value_int(d->clock_ns));
  oput(&inputs, "model_deadline_missed",
       model ? value_bool(d->model_run == MODEL_DEADLINE) : value_null());
  oput(&inputs, "counters", ocounters(a, d));
  oput(&inputs, "random", value_map(NULL, 0));
  oput(&p, "inputs", odone(&inputs));
  value root = odone(&p);

  json_buf t, b;
  json_buf_init(&t, a);
  if (json_write(&t, &root, 1) != 0) return -1;
  json_buf_init(&b, a);
  const char *m = strstr(t.data, "\"" ORACLE_MARK "\"");
  if (m && (in->json || in->creq)) {
    json_buf_put(&b, t.data, (size_t)(m - t.data));
    if (in->json)
      ominify(&b, in->json, in->json_len);
    else
      oc_request(a, &b, in->creq);
    const char *rest = m + strlen("\"" ORACLE_MARK "\"");
    json_buf_put(&b, rest, strlen(rest));
  } else {
    json_buf_put(&b, t.data, t.len);
  }
  if (b.oom) return -1;
  *out = b.data;
  *len = b.len;
  return 0;
}

#endif
