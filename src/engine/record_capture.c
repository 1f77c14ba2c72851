/* record_capture.c — the snapshot's capture, on the deciding thread.
 *
 * The deciding thread does not write the snapshot's JSON: it copies what the
 * payload needs into a compact binary capture (fixed fields raw in the head,
 * strings as a u32 length and the bytes, values tagged), written straight
 * into a slot of the log's queue, and the writer thread turns it into the
 * payload (record_format.c). The capture is read back only by this process,
 * so native byte order and layout are fine; it never reaches the disk.
 *
 * What is captured, and in which order, is the list in record.h
 * (SNAPSHOT_HEAD, then cap_NAME for every BODY member of SNAPSHOT_FIELDS, in
 * the list's order): a new field goes there first.
 *
 * The decision's own strings and the values are copied; rule, let, feature
 * and limit names are pointers into the bundle when the decision borrowed
 * them (the engine keeps the bundle until the writer is past the record),
 * copied otherwise. The head carries the record header's fields too (the id
 * with them): the capture goes into the queue as a raw record, and the
 * writer makes the header from it. The request as received is copied as it
 * came (minified by the writer); a request built in C is written as JSON
 * text here, since its pieces belong to the caller (a context built from
 * values too: the builder may be reset once the call returns). */
#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "engine/engine.h"
#include "engine/record.h"
#include "engine/service.h"
#include "snapshot/snapshot.h"

#define HOT static inline __attribute__((always_inline))

/* The request built in C, as the JSON request it stands for. */
void put_c_request(json_buf *b, const vd_request *r, const value *ctx) {
  JSON_PUT(b, "{\"action\":");
  json_put_str(b, r->action);
  if (r->ncandidates) {
    JSON_PUT(b, ",\"candidates\":[");
    for (size_t i = 0; i < r->ncandidates; i++) {
      if (i) json_put_char(b, ',');
      json_put_str(b, r->candidates[i]);
    }
    json_put_char(b, ']');
  }
  if (ctx) {
    /* built from values: written from them (finite numbers, checked
     * strings: nothing JSON cannot carry), as json_parse reads them back */
    JSON_PUT(b, ",\"context\":");
    json_write(b, ctx, 0);
  } else if (r->context_json) {
    JSON_PUT(b, ",\"context\":");
    size_t n = r->context_len < 0 ? strlen(r->context_json) : (size_t)r->context_len;
    json_put_minified(b, r->context_json, n);
  }
  if (r->key) {
    JSON_PUT(b, ",\"key\":");
    json_put_str(b, r->key);
  }
  json_put_char(b, '}');
}

static inline void cap_u8(json_buf *c, uint8_t v) { json_put_char(c, (char)v); }
static inline void cap_u32(json_buf *c, uint32_t v) { json_put_raw(c, (const char *)&v, 4); }
static inline void cap_u64(json_buf *c, uint64_t v) { json_put_raw(c, (const char *)&v, 8); }

static inline void cap_strn(json_buf *c, const char *s, size_t n) {
  if (json_room(c, 4 + n)) return;
  uint32_t l = (uint32_t)n;
  memcpy(c->data + c->len, &l, 4);
  copy_bytes(c->data + c->len + 4, s, n);
  c->len += 4 + n;
}

static inline void cap_str(json_buf *c, const char *s) {
  if (s)
    cap_strn(c, s, strlen(s));
  else
    cap_u32(c, CAP_NULL);
}

/* A rule's error text: off the usual path. */
static __attribute__((noinline)) void cap_error(json_buf *c, const char *s) { cap_str(c, s); }

/* A rule, let, feature or limit name: when the capture borrows (the engine
 * keeps the bundle until the writer has formatted the record), the pointer
 * alone; otherwise the bytes, as cap_str. */
static inline void cap_name(json_buf *c, const char *s, int borrowed) {
  if (borrowed)
    json_put_raw(c, (const char *)&s, sizeof s);
  else
    cap_str(c, s);
}

/* Room for a u32 length now, filled in by cap_end once the text is written. */
static size_t cap_begin(json_buf *c) {
  cap_u32(c, 0);
  return c->len;
}

static void cap_end(json_buf *c, size_t at) {
  if (c->oom || at < 4) return;
  uint32_t l = (uint32_t)(c->len - at);
  memcpy(c->data + at - 4, &l, 4);
}

/* The kinds most lets hold, written with one reservation; 0 when v is not
 * one of them (the caller then uses cap_value). */
static inline __attribute__((always_inline)) int cap_scalar(json_buf *c, const value *v) {
  size_t n = v->kind == V_STRING ? v->n : 0;
  if (json_room(c, 13 + n)) return 1;
  char *o = c->data + c->len;
  switch (v->kind) {
    case V_BOOL:
      o[0] = v->b ? CV_TRUE : CV_FALSE;
      c->len += 1;
      return 1;
    case V_NULL:
      o[0] = CV_NULL;
      c->len += 1;
      return 1;
    case V_INT:
      o[0] = CV_INT;
      memcpy(o + 1, &v->i, 8);
      c->len += 9;
      return 1;
    case V_STRING: {
      uint32_t l = (uint32_t)n;
      o[0] = CV_STRING;
      memcpy(o + 1, &l, 4);
      copy_bytes(o + 5, v->s, n);
      c->len += 5 + n;
      return 1;
    }
    case V_DOUBLE: /* raw: the formatter writes NaN and infinities per context */
      o[0] = CV_DOUBLE;
      memcpy(o + 1, &v->d, 8);
      c->len += 9;
      return 1;
    case V_LIST: /* empty (many lets are): as cap_tagged writes it */
    case V_MAP:
      if (v->n) return 0;
      o[0] = v->kind == V_LIST ? CV_LIST : CV_MAP;
      memset(o + 1, 0, 4);
      c->len += 5;
      return 1;
    default:
      return 0;
  }
}

/* A list or map as tags, in one pass: 1, or 0 when something in it is not
 * a kind json_write writes the way the tags do (another kind, a map key
 * that is not a string, NaN unless lenient, nesting past 9) — the caller
 * then drops what was written and captures the JSON text instead. */
static int cap_tagged(json_buf *c, const value *v, int lenient, int depth) {
  switch (v->kind) {
    case V_DOUBLE:
      if (!lenient && v->d - v->d != 0) return 0;
      cap_u8(c, CV_DOUBLE);
      json_put_raw(c, (const char *)&v->d, 8);
      return 1;
    case V_LIST:
      if (depth > 8) return 0;
      cap_u8(c, CV_LIST);
      cap_u32(c, v->n);
      for (const value *it = v->items, *end = it + v->n; it < end; it++) {
        if (it->kind != V_DOUBLE && cap_scalar(c, it)) continue; /* the usual item */
        if (!cap_tagged(c, it, lenient, depth + 1)) return 0;
      }
      return 1;
    case V_MAP:
      if (depth > 8) return 0;
      cap_u8(c, CV_MAP);
      cap_u32(c, v->n);
      for (uint32_t i = 0; i < v->n; i++) {
        if (v->entries[i].key.kind != V_STRING) return 0;
        cap_strn(c, v->entries[i].key.s, v->entries[i].key.n);
        if (!cap_tagged(c, &v->entries[i].val, lenient, depth + 1)) return 0;
      }
      return 1;
    default:
      return cap_scalar(c, v);
  }
}

static void cap_value(json_buf *c, const value *v, int lenient) {
  switch (v->kind) {
    case V_STRING:
      cap_u8(c, CV_STRING);
      cap_strn(c, v->s, v->n);
      return;
    case V_BOOL:
      cap_u8(c, v->b ? CV_TRUE : CV_FALSE);
      return;
    case V_NULL:
      cap_u8(c, CV_NULL);
      return;
    case V_INT:
      cap_u8(c, CV_INT);
      cap_u64(c, (uint64_t)v->i);
      return;
    case V_DOUBLE:
      cap_u8(c, CV_DOUBLE);
      json_put_raw(c, (const char *)&v->d, 8);
      return;
    case V_LIST:
    case V_MAP: {
      size_t at = c->len;
      if (cap_tagged(c, v, lenient, 0)) return;
      c->len = at;
    }
      /* fall through */
    default: {
      cap_u8(c, CV_JSON);
      size_t at = cap_begin(c);
      if (json_write(c, v, lenient) != 0) JSON_PUT(c, "null");
      cap_end(c, at);
    }
  }
}

/* The snapshot source of d->source ("rule", "model", "default", "error"),
 * byte by byte (a mismatch stops before the string's NUL is passed). */
uint8_t source_code(const char *s) {
  switch (s ? s[0] : 0) { /* the first letter tells them apart */
    case 'r':
      if (s[1] == 'u' && s[2] == 'l' && s[3] == 'e' && !s[4]) return SNAPSHOT_SRC_RULE;
      break;
    case 'm':
      if (s[1] == 'o' && s[2] == 'd' && s[3] == 'e' && s[4] == 'l' && !s[5])
        return SNAPSHOT_SRC_MODEL;
      break;
    case 'd':
      if (!strcmp(s + 1, "efault")) return SNAPSHOT_SRC_DEFAULT;
      break;
  }
  return SNAPSHOT_SRC_ERROR;
}

/* What each cap_NAME sees: the capture being written and the decision. */
typedef struct cap_ctx {
  json_buf *c;
  const vd_decision *d;
  const record_input *in;
  const cap_head *h;
  size_t action_n; /* strlen(d->action), which the caller has measured */
} cap_ctx;

HOT void cap_point(cap_ctx *x) { cap_strn(x->c, x->in->req->action.s, x->in->req->action.n); }

HOT void cap_request(cap_ctx *x) {
  if (x->in->json) {
    cap_strn(x->c, x->in->json, x->in->json_len);
  } else if (x->in->creq) {
    size_t at = cap_begin(x->c);
    put_c_request(x->c, x->in->creq, x->in->cctx);
    cap_end(x->c, at);
  }
}

HOT void cap_candidates(cap_ctx *x) {
  const decide_request *req = x->in->req;
  for (uint32_t i = 0; i < req->candidates.n; i++)
    if (!cap_scalar(x->c, &req->candidates.items[i])) cap_value(x->c, &req->candidates.items[i], 0);
}

HOT void cap_key(cap_ctx *x) { cap_strn(x->c, x->in->req->key.s, x->in->req->key.n); }

HOT void cap_strategy(cap_ctx *x) { cap_str(x->c, x->d->strategy); }

/* 64 hex digits each, or fewer and a NUL */
HOT void cap_versions(cap_ctx *x) {
  json_put_raw(x->c, x->d->policy_version, 64);
  json_put_raw(x->c, x->d->bundle_version, 64);
}

/* The decision's strings, ahead of the model: the trace and the record
 * header need them before their turn. */
HOT void cap_outcome(cap_ctx *x) {
  const vd_decision *d = x->d;
  json_buf *c = x->c;
  if (d->action)
    cap_strn(c, d->action, x->action_n);
  else
    cap_u32(c, CAP_NULL);
  if (x->h->source == CAP_SOURCE_TEXT) cap_str(c, d->source);
  cap_str(c, d->rule);
  cap_str(c, d->reason);
  cap_str(c, d->no_candidate);
  cap_str(c, d->floor_from);
}

HOT void cap_model(cap_ctx *x) {
  const vd_decision *d = x->d;
  json_buf *c = x->c;
  if (d->model_run != MODEL_SCORED && d->model_run != MODEL_DEADLINE) return;
  cap_str(c, d->model_version);
  cap_str(c, d->features_version);
  cap_str(c, d->model_name);
  cap_str(c, d->feature_error);
  if (x->h->borrowed) { /* the three arrays as they are */
    json_put_raw(c, (const char *)d->feature_names, d->nfeatures * sizeof *d->feature_names);
    json_put_raw(c, (const char *)d->features, d->nfeatures * sizeof *d->features);
    json_put_raw(c, (const char *)d->feature_status, d->nfeatures);
    return;
  }
  for (uint32_t i = 0; i < d->nfeatures; i++) {
    cap_str(c, d->feature_names[i]);
    json_put_raw(c, (const char *)&d->features[i], 4);
    cap_u8(c, d->feature_status[i]);
  }
}

HOT void cap_trace(cap_ctx *x) {
  const vd_decision *d = x->d;
  json_buf *c = x->c;
  if (x->h->borrowed) { /* the array as it is, then the (rare) error's text */
    json_put_raw(c, (const char *)d->trace, d->ntrace * sizeof *d->trace);
    /* Only the last rule tried can have failed: a failing rule ends the
     * rules (decide.c asserts it). The formatter reads a text for every
     * entry with an error; were an earlier one to fail, it would run short
     * and refuse the record (counted in `rejected`) rather than write a
     * wrong one. */
#ifndef NDEBUG
    for (uint32_t i = 0; i + 1 < d->ntrace; i++) assert(!d->trace[i].error);
#endif
    if (d->ntrace && d->trace[d->ntrace - 1].error) cap_error(c, d->trace[d->ntrace - 1].error);
    return;
  }
  for (uint32_t i = 0; i < d->ntrace; i++) { /* the usual rule: one write */
    const trace_rule *t = &d->trace[i];
    size_t n = t->name ? strlen(t->name) : 0;
    if (json_room(c, n + 5)) break;
    char *o = c->data + c->len;
    uint32_t l = t->name ? (uint32_t)n : CAP_NULL;
    memcpy(o, &l, 4);
    if (n) memcpy(o + 4, t->name, n);
    o[4 + n] = (char)(t->result | (t->error ? CAP_RULE_ERROR : 0));
    c->len += 5 + n;
    if (t->error) cap_str(c, t->error);
  }
}

HOT void cap_lets(cap_ctx *x) {
  const vd_decision *d = x->d;
  json_buf *c = x->c;
  int borrowed = x->h->borrowed;
  if (borrowed) json_put_raw(c, (const char *)d->lets, d->nlets * sizeof *d->lets);
  const value *lv = d->let_values;
  if (borrowed && lv) { /* the usual case: the names are already in */
    /* the values as they are (one copy), then what they point at: a
     * string's or an error's bytes, a list or map or another kind as
     * cap_value writes it; null, booleans, integers and doubles are whole
     * in the array (fmt_lets_raw reads it back) */
    json_put_raw(c, (const char *)lv, d->nlets * sizeof *lv);
    for (const value *v = lv, *end = lv + d->nlets; v < end; v++) {
      if (raw_whole(v)) continue;
      if (v->kind == V_STRING || v->kind == V_ERROR)
        cap_strn(c, v->s, v->n);
      else
        cap_value(c, v, 1);
    }
    return;
  }
  for (uint32_t i = 0; i < d->nlets; i++) {
    if (!borrowed) cap_str(c, d->lets[i]);
    const value *v = lv ? &lv[i] : NULL;
    if (lv && cap_scalar(c, v)) continue;
    if (!v) {
      cap_u8(c, CV_ABSENT);
    } else if (v->kind == V_ERROR) {
      cap_u8(c, CV_ERROR);
      cap_strn(c, v->s, v->n);
    } else {
      cap_value(c, v, 1);
    }
  }
}

/* inputs.counters: the limits the decision read */
HOT void cap_inputs(cap_ctx *x) {
  const vd_decision *d = x->d;
  json_buf *c = x->c;
  for (uint32_t i = 0; i < d->nlimit_reads && d->limits_of; i++) {
    const limit_read *lr = &d->limit_reads[i];
    if (lr->state != LIMIT_READ) continue;
    cap_name(c, d->limits_of->limits[i].name, x->h->borrowed);
    cap_strn(c, lr->key, lr->key_len);
    cap_u64(c, lr->r.count);
    cap_u8(c, lr->r.penalized);
    cap_u8(c, lr->r.charged);
    cap_u8(c, lr->r.degraded);
  }
}

/* the rollout's members (service_side): one byte 0 outside a rollout */
HOT void cap_side(cap_ctx *x) {
  const service_side *s = x->in->side;
  json_buf *c = x->c;
  if (!s) {
    cap_u8(c, 0);
    return;
  }
  uint8_t f = (s->side ? CAP_SIDE_SET : 0) | (s->completes ? CAP_SIDE_COMPLETES : 0) |
              (s->answered ? CAP_SIDE_ROLLOUT : 0) | (x->in->refusal ? CAP_SIDE_ERROR : 0);
  cap_u8(c, f);
  if (s->side) cap_str(c, s->side);
  if (s->completes) cap_str(c, s->completes);
  if (s->answered) {
    cap_str(c, s->answered);
    cap_str(c, s->by ? s->by : "no key");
    cap_u32(c, (uint32_t)s->bucket);
    json_put_raw(c, (const char *)&s->percent, sizeof s->percent);
  }
  if (x->in->refusal) {
    const vd_error *e = x->in->refusal;
    cap_str(c, vd_err_name(e->code));
    cap_str(c, e->message);
    cap_str(c, e->path[0] ? e->path : NULL);
  }
}

int capture_into(vd_decision *d, const record_input *in, json_buf *cb, uint8_t source,
                 size_t action_n) {
  json_buf c = *cb;
  int model = d->model_run == MODEL_SCORED || d->model_run == MODEL_DEADLINE;
  uint32_t ncounters = 0;
  for (uint32_t i = 0; i < d->nlimit_reads && d->limits_of; i++)
    ncounters += d->limit_reads[i].state == LIMIT_READ;
  /* source_code(d->source): one of the four names, or the text */
  if (source == SNAPSHOT_SRC_ERROR && (!d->source || strcmp(d->source, "error") != 0))
    source = CAP_SOURCE_TEXT;
  int borrowed = d->trace_borrow;
  (void)model;
  cap_head h;
  memset(&h, 0, sizeof h); /* the padding too: the capture is copied whole */
  memcpy(h.id, in->id, sizeof h.id);
#define X(type, name, value) h.name = (type)(value);
  SNAPSHOT_HEAD(X)
#undef X
  json_put_raw(&c, (const char *)&h, sizeof h);
  cap_ctx x = {&c, d, in, &h, action_n};
#define CAP_HEAD(name)
#define CAP_BODY(name) cap_##name(&x);
#define X(name, kind, key) CAP_##kind(name)
  SNAPSHOT_FIELDS(X)
#undef X
#undef CAP_BODY
#undef CAP_HEAD
  *cb = c;
  return c.oom ? VD_ENOMEM : 0;
}

int record_capture(vd_decision *d, const record_input *in, const char **out, size_t *len) {
  json_buf c;
  json_buf_init(&c, &d->mem);
  json_room(&c, capture_guess(d, in));
  size_t action_n = d->action ? strlen(d->action) : 0;
  if (capture_into(d, in, &c, source_code(d->source), action_n) != 0) return VD_ENOMEM;
  *out = c.data;
  *len = c.len;
  return 0;
}
