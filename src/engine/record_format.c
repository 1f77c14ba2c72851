/* record_format.c — the snapshot payload, on the log's writer thread.
 *
 * The log's format hook (record.c) hands each capture the deciding thread
 * made (record_capture.c) to format_capture, which writes the format-1
 * payload (docs/snapshots.md, "Snapshot contents") and the record header's
 * fields. It walks SNAPSHOT_FIELDS (record.h): for each member, in the
 * payload's order, fmt_NAME writes it, reading the capture's head or the
 * body cap_NAME wrote; a new field goes in the list first.
 *
 * Why by hand: the fields are written in one pass with core/json's
 * json_put_* writers. Building the payload as a value tree and serialising
 * that would allocate the tree too and walk everything twice (the tests'
 * oracle does exactly that: tests/engine/record_oracle.c). The request as
 * received is copied byte for byte minus the whitespace between tokens (the
 * parser has already vouched for it), so numbers keep their spelling and
 * the payload stays one line, as JSON Lines export needs. Rule, let and
 * feature names are written from a cache of their quoted JSON, keyed by
 * their address in the bundle. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtoa.h"
#include "core/json.h"
#include "core/timefmt.h"
#include "engine/engine.h"
#include "engine/record.h"
#include "snapshot/snapshot.h"

#define HOT static inline __attribute__((always_inline))

/* As render.c writes it, so the snapshot and the answer agree to the digit. */
static void put_confidence(json_buf *b, double c) {
  if (c == 1.0)
    JSON_PUT(b, "1.0");
  else if (c == 0.0)
    JSON_PUT(b, "0.0");
  else
    json_write_double(b, c);
}

/* "2026-11-29T10:00:00.123456789Z": always nine fraction digits; the
 * seconds' text from tm when they are the last ones written (tm may be
 * NULL). */
static void put_time_memo(json_buf *b, int64_t ns, time_memo *tm) {
  int64_t sec = ns / 1000000000, frac = ns % 1000000000;
  if (frac < 0) {
    frac += 1000000000;
    sec--;
  }
  char t[64];
  size_t n;
  if (tm && tm->n && tm->sec == sec) {
    n = tm->n;
    memcpy(t, tm->text, n);
  } else {
    n = timefmt_format_rfc3339(sec, 0, t);
    if (n < 2 || n > 40 || t[n - 1] != 'Z') {
      JSON_PUT(b, "null");
      return;
    }
    t[n - 1] = '.';
    if (tm) {
      tm->sec = sec;
      tm->n = n;
      memcpy(tm->text, t, n);
    }
  }
  for (int i = 8; i >= 0; i--, frac /= 10) t[n + (size_t)i] = (char)('0' + frac % 10);
  t[n + 9] = 'Z';
  json_put_char(b, '"');
  json_put_raw(b, t, n + 10);
  json_put_char(b, '"');
}

static void put_result(json_buf *b, uint8_t r) {
  switch (r) {
    case RR_TRUE:
      JSON_PUT(b, ",\"result\":\"true\"");
      break;
    case RR_FALSE:
      JSON_PUT(b, ",\"result\":\"false\"");
      break;
    case RR_ERROR:
      JSON_PUT(b, ",\"result\":\"error\"");
      break;
    default:
      JSON_PUT(b, ",\"result\":\"skipped-not-candidate\"");
  }
}

/* "floor": the request's confidence_floor and the action it replaced
 * (null: none), or null when the request sent none. */
static void put_floor(json_buf *b, double floor, const char *from, size_t from_n) {
  if (!(floor >= 0)) {
    JSON_PUT(b, ",\"floor\":null");
    return;
  }
  JSON_PUT(b, ",\"floor\":{\"min\":");
  json_write_double(b, floor);
  JSON_PUT(b, ",\"instead_of\":");
  json_put_strn_or_null(b, from, from_n);
  json_put_char(b, '}');
}

/* A float32 feature: the fewest digits that read back to it (ftoa_shortest);
 * NaN (missing) is null. Integers, the usual feature, go the short way. */
static void put_float(json_buf *b, float f) {
  if (f != f) {
    JSON_PUT(b, "null");
    return;
  }
  if (f >= 0 && f < 1e9f && f == (float)(uint32_t)f) {
    json_put_u64(b, (uint32_t)f);
    return;
  }
  char t[32];
  size_t n = ftoa_shortest(f, t);
  json_put_raw(b, t, n);
}

/* Reading a capture back: every read checks the bounds (a capture that
 * runs short sets bad, and the record is not written). */
typedef struct cap_cur {
  const char *p, *end;
  int bad;
} cap_cur;

static int cur_take(cap_cur *c, void *to, size_t n) {
  if ((size_t)(c->end - c->p) < n) {
    c->bad = 1;
    memset(to, 0, n);
    return -1;
  }
  memcpy(to, c->p, n);
  c->p += n;
  return 0;
}

static uint8_t get_u8(cap_cur *c) {
  uint8_t v;
  cur_take(c, &v, 1);
  return v;
}

static uint64_t get_u64(cap_cur *c) {
  uint64_t v;
  cur_take(c, &v, 8);
  return v;
}

/* A string: NULL for a NULL one (and when the capture runs short). */
static const char *get_str(cap_cur *c, size_t *n) {
  uint32_t l;
  *n = 0;
  if (cur_take(c, &l, 4) || l == CAP_NULL) return NULL;
  if ((size_t)(c->end - c->p) < l) {
    c->bad = 1;
    return NULL;
  }
  const char *s = c->p;
  c->p += l;
  *n = l;
  return s;
}

/* A name as cap_name wrote it. */
static const char *get_name(cap_cur *c, int borrowed, size_t *n) {
  if (!borrowed) return get_str(c, n);
  const char *s;
  cur_take(c, &s, sizeof s);
  *n = s ? strlen(s) : 0;
  return s;
}

void name_cache_clear(name_cache *nc) {
  if (nc->used) memset(nc->tab, 0, nc->cap * sizeof *nc->tab);
  nc->used = 0;
  nc->text_len = 0;
}

static inline uint32_t cache_slot(const name_cache *nc, const char *s) {
  return (uint32_t)(((uintptr_t)s * 0x9E3779B97F4A7C15ull) >> 32) & (nc->cap - 1);
}

/* Room for one more name: the table at most half full (a bundle has a
 * few thousand names at most; past 64k the cache starts over). 0, or -1. */
static int name_cache_room(name_cache *nc, size_t text) {
  if (nc->used >= 65536) name_cache_clear(nc);
  if (nc->text_len + text > nc->text_cap) {
    size_t cap = nc->text_cap ? nc->text_cap * 2 : 16384;
    while (cap < nc->text_len + text) cap *= 2;
    char *t = realloc(nc->text, cap);
    if (!t) return -1;
    nc->text = t;
    nc->text_cap = cap;
  }
  if ((nc->used + 1) * 2 <= nc->cap) return 0;
  uint32_t cap = nc->cap ? nc->cap * 2 : 1024;
  name_entry *old = nc->tab, *tab = calloc(cap, sizeof *tab);
  if (!tab) return -1;
  uint32_t ocap = nc->cap;
  nc->tab = tab;
  nc->cap = cap;
  for (uint32_t i = 0; i < ocap; i++) {
    if (!old[i].name) continue;
    uint32_t k = cache_slot(nc, old[i].name);
    while (tab[k].name) k = (k + 1) & (cap - 1);
    tab[k] = old[i];
  }
  free(old);
  return 0;
}

/* A name in a bundle (not NULL), as json_put_strn writes it: from the cache, or
 * written and then kept (nc NULL: written). */
static void put_name(json_buf *b, name_cache *nc, const char *s) {
  if (nc && nc->cap) {
    for (uint32_t k = cache_slot(nc, s); nc->tab[k].name; k = (k + 1) & (nc->cap - 1))
      if (nc->tab[k].name == s) {
        if (json_room(b, nc->tab[k].len)) return;
        copy_bytes(b->data + b->len, nc->text + nc->tab[k].off, nc->tab[k].len);
        b->len += nc->tab[k].len;
        return;
      }
  }
  size_t at = b->len;
  json_put_strn(b, s, strlen(s));
  if (!nc || b->oom || name_cache_room(nc, b->len - at) != 0) return;
  uint32_t k = cache_slot(nc, s);
  while (nc->tab[k].name) k = (k + 1) & (nc->cap - 1);
  nc->tab[k].name = s;
  nc->tab[k].off = (uint32_t)nc->text_len;
  nc->tab[k].len = (uint32_t)(b->len - at);
  memcpy(nc->text + nc->text_len, b->data + at, b->len - at);
  nc->text_len += b->len - at;
  nc->used++;
}

/* A name as json_put_str writes it (NULL: null). */
static void fmt_name(json_buf *b, cap_cur *c, int borrowed) {
  size_t n;
  const char *s = get_name(c, borrowed, &n);
  json_put_strn_or_null(b, s, n);
}

/* Let i's name: from the names' array when the capture borrows (checked
 * by the caller), else the next string. */
static const char *let_name(cap_cur *c, int borrowed, const char *names, uint32_t i, size_t *n) {
  if (!borrowed) return get_str(c, n);
  const char *s;
  memcpy(&s, names + (size_t)i * sizeof s, sizeof s);
  *n = s ? strlen(s) : 0;
  return s;
}

/* A string as json_put_str writes it (NULL: null). */
static void fmt_str(json_buf *b, cap_cur *c) {
  size_t n;
  const char *s = get_str(c, &n);
  json_put_strn_or_null(b, s, n);
}

/* A version, written between quotes as it is: 64 bytes, 64 hex digits or
 * fewer and a NUL. */
static void fmt_version(json_buf *b, cap_cur *c) {
  if ((size_t)(c->end - c->p) < 64) {
    c->bad = 1;
    return;
  }
  json_put_raw(b, c->p, strnlen(c->p, 64));
  c->p += 64;
}

static void fmt_value(json_buf *b, cap_cur *c, int lenient) {
  size_t n;
  const char *s;
  uint32_t k;
  switch (get_u8(c)) {
    case CV_LIST:
      cur_take(c, &k, 4);
      json_put_char(b, '[');
      for (uint32_t i = 0; i < k && !c->bad; i++) {
        if (i) json_put_char(b, ',');
        fmt_value(b, c, lenient);
      }
      json_put_char(b, ']');
      return;
    case CV_MAP:
      cur_take(c, &k, 4);
      json_put_char(b, '{');
      for (uint32_t i = 0; i < k && !c->bad; i++) {
        if (i) json_put_char(b, ',');
        s = get_str(c, &n);
        json_put_strn(b, s ? s : "", n);
        json_put_char(b, ':');
        fmt_value(b, c, lenient);
      }
      json_put_char(b, '}');
      return;
    case CV_NULL:
    case CV_ABSENT:
      JSON_PUT(b, "null");
      return;
    case CV_FALSE:
      JSON_PUT(b, "false");
      return;
    case CV_TRUE:
      JSON_PUT(b, "true");
      return;
    case CV_INT:
      json_put_i64(b, (int64_t)get_u64(c));
      return;
    case CV_STRING:
      s = get_str(c, &n);
      json_put_strn(b, s ? s : "", n);
      return;
    case CV_DOUBLE: {
      double x;
      cur_take(c, &x, 8);
      value v = value_double(x);
      if (json_write(b, &v, lenient) != 0) JSON_PUT(b, "null");
      return;
    }
    case CV_JSON:
      s = get_str(c, &n);
      if (s) json_put_raw(b, s, n);
      return;
    default: /* CV_ERROR is not a value; anything else is damage */
      c->bad = 1;
  }
}

/* Steps over a value without writing it. */
static void skip_value(cap_cur *c) {
  size_t n;
  switch (get_u8(c)) {
    case CV_INT:
    case CV_DOUBLE:
      get_u64(c);
      return;
    case CV_STRING:
    case CV_JSON:
    case CV_ERROR:
      get_str(c, &n);
      return;
    case CV_LIST:
    case CV_MAP: {
      uint32_t k;
      int map = c->p[-1] == CV_MAP;
      cur_take(c, &k, 4);
      for (uint32_t i = 0; i < k && !c->bad; i++) {
        if (map) get_str(c, &n);
        skip_value(c);
      }
      return;
    }
    case CV_NULL:
    case CV_ABSENT:
    case CV_FALSE:
    case CV_TRUE:
      return;
    default:
      c->bad = 1;
  }
}

/* "lets" and "let_errors" from a capture that borrows names and holds the
 * values as an array (cap_head.raw_lets): the names' array, the values'
 * array, then what the values point at, in their order. */
static void fmt_lets_raw(json_buf *b, cap_cur *c, uint32_t nlets, name_cache *nc) {
  const char *names = c->p, *vals = c->p + (size_t)nlets * sizeof(char *);
  if ((size_t)(c->end - c->p) / (sizeof(char *) + sizeof(value)) < nlets) {
    c->bad = 1;
    return;
  }
  c->p = vals + (size_t)nlets * sizeof(value);
  const char *rest = c->p;
  JSON_PUT(b, ",\"lets\":{");
  int first = 1, errors = 0;
  size_t n;
  const char *s;
  for (uint32_t i = 0; i < nlets && !c->bad; i++) {
    value v;
    const char *name;
    memcpy(&v, vals + (size_t)i * sizeof v, sizeof v);
    memcpy(&name, names + (size_t)i * sizeof name, sizeof name);
    if (v.kind >= V_KIND_COUNT) { /* damage */
      c->bad = 1;
      return;
    }
    if (v.kind == V_ERROR) {
      get_str(c, &n);
      errors++;
      continue;
    }
    if (!first) json_put_char(b, ',');
    first = 0;
    if (name)
      put_name(b, nc, name);
    else
      JSON_PUT(b, "null");
    json_put_char(b, ':');
    switch (v.kind) {
      case V_NULL:
        JSON_PUT(b, "null");
        break;
      case V_BOOL:
        json_put_bool(b, v.b);
        break;
      case V_INT:
        json_put_i64(b, v.i);
        break;
      case V_DOUBLE: {
        value d = value_double(v.d);
        if (json_write(b, &d, 1) != 0) JSON_PUT(b, "null");
        break;
      }
      case V_STRING:
        s = get_str(c, &n);
        json_put_strn(b, s ? s : "", n);
        break;
      case V_LIST:
      case V_MAP:
        if (!v.n) {
          if (v.kind == V_LIST)
            JSON_PUT(b, "[]");
          else
            JSON_PUT(b, "{}");
          break;
        }
        /* fall through */
      default:
        fmt_value(b, c, 1);
    }
  }
  JSON_PUT(b, "},\"let_errors\":{");
  cap_cur r = {rest, c->end, 0};
  first = 1;
  for (uint32_t i = 0; i < nlets && errors && !r.bad; i++) {
    value v;
    memcpy(&v, vals + (size_t)i * sizeof v, sizeof v);
    if (raw_whole(&v)) continue;
    if (v.kind == V_STRING) {
      get_str(&r, &n);
    } else if (v.kind == V_ERROR) {
      const char *name;
      memcpy(&name, names + (size_t)i * sizeof name, sizeof name);
      s = get_str(&r, &n);
      if (!first) json_put_char(b, ',');
      first = 0;
      if (name)
        json_put_strn(b, name, strlen(name));
      else
        JSON_PUT(b, "null");
      json_put_char(b, ':');
      json_put_strn(b, s ? s : "", n);
    } else {
      skip_value(&r);
    }
  }
  json_put_char(b, '}');
}

void name_cache_free(name_cache *nc) {
  free(nc->tab);
  free(nc->text);
  memset(nc, 0, sizeof *nc);
}

/* What each fmt_NAME reads: the capture (its head read already) and the
 * strings read ahead of their turn (fmt_outcome); the record header's
 * fields come from here too. */
typedef struct fmt_view {
  cap_cur c;
  cap_head h;
  json_buf *b;
  const char *id, *node;
  name_cache *nc;
  const char *point, *policy_version, *action, *source, *rule, *reason, *no_candidate, *floor_from;
  size_t point_n, policy_version_n, action_n, source_n, rule_n, reason_n, no_candidate_n,
      floor_from_n;
} fmt_view;

#define KEY(v, key, keyn) json_put_raw((v)->b, key, keyn)

HOT void fmt_id(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  json_put_str(v->b, v->id);
}

HOT void fmt_time(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  put_time_memo(v->b, v->h.clock_ns, v->nc ? &v->nc->time : NULL);
}

HOT void fmt_time_ns(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  json_put_i64(v->b, v->h.clock_ns);
}

HOT void fmt_node(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  json_put_str(v->b, v->node);
}

HOT void fmt_engine_version(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  json_put_str(v->b, vd_version());
}

HOT void fmt_point(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  v->point = get_str(&v->c, &v->point_n);
  json_put_strn(v->b, v->point ? v->point : "", v->point_n);
}

HOT void fmt_request(fmt_view *v, const char *key, size_t keyn) {
  const char *request = NULL;
  size_t request_len = 0;
  if (v->h.request != CAP_REQ_NONE) request = get_str(&v->c, &request_len);
  KEY(v, key, keyn);
  if (v->h.request == CAP_REQ_JSON && request)
    json_put_minified(v->b, request, request_len);
  else if (v->h.request == CAP_REQ_TEXT && request)
    json_put_raw(v->b, request, request_len);
  else
    JSON_PUT(v->b, "null");
}

HOT void fmt_candidates(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  json_put_char(v->b, '[');
  for (uint32_t i = 0; i < v->h.ncandidates && !v->c.bad; i++) {
    if (i) json_put_char(v->b, ',');
    fmt_value(v->b, &v->c, 0);
  }
  json_put_char(v->b, ']');
}

HOT void fmt_key(fmt_view *v, const char *key, size_t keyn) {
  size_t n;
  const char *s = get_str(&v->c, &n);
  KEY(v, key, keyn);
  json_put_strn(v->b, s ? s : "", n);
}

HOT void fmt_strategy(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  fmt_str(v->b, &v->c);
}

/* policy_version and bundle_version */
HOT void fmt_versions(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  json_put_char(v->b, '"');
  if ((size_t)(v->c.end - v->c.p) >= 64) {
    v->policy_version = v->c.p;
    v->policy_version_n = strnlen(v->c.p, 64);
  }
  fmt_version(v->b, &v->c);
  JSON_PUT(v->b, "\",\"bundle_version\":\"");
  fmt_version(v->b, &v->c);
  json_put_char(v->b, '"');
}

/* Writes nothing: the decision's strings, read for their turn. */
HOT void fmt_outcome(fmt_view *v, const char *key, size_t keyn) {
  (void)key;
  (void)keyn;
  cap_cur *c = &v->c;
  v->action = get_str(c, &v->action_n);
  if (v->h.source == CAP_SOURCE_TEXT) {
    v->source = get_str(c, &v->source_n);
  } else {
    v->source = snapshot_source_name(v->h.source);
    v->source_n = v->source ? strlen(v->source) : 0;
  }
  v->rule = get_str(c, &v->rule_n);
  v->reason = get_str(c, &v->reason_n);
  v->no_candidate = get_str(c, &v->no_candidate_n);
  v->floor_from = get_str(c, &v->floor_from_n);
}

/* model_version, features and model: what the fallback model saw and said,
 * or null when the decision did not ask it. */
static void fmt_model(fmt_view *v, const char *key, size_t keyn) {
  json_buf *b = v->b;
  cap_cur *cc = &v->c;
  const cap_head *h = &v->h;
  KEY(v, key, keyn);
  if (h->model_run != MODEL_SCORED && h->model_run != MODEL_DEADLINE) {
    JSON_PUT(b, "null,\"features\":null,\"model\":null");
    return;
  }
  static const char *const status[] = {"value", "missing", "default", "unknown"};
  size_t mv_n, fv_n;
  const char *mv = get_str(cc, &mv_n), *fv = get_str(cc, &fv_n);
  json_put_char(b, '"');
  json_put_raw(b, mv ? mv : "", mv_n);
  JSON_PUT(b, "\",\"features\":{");
  size_t name_n, ferr_n;
  const char *name = get_str(cc, &name_n), *ferr = get_str(cc, &ferr_n);
  /* the rows, written twice (values, then statuses): by pointer, three
   * arrays (names, values, statuses); copied, one row after another */
  const char *feat = cc->p;
  size_t nf = h->nfeatures;
  if (h->borrowed && (size_t)(cc->end - cc->p) / 13 < nf) cc->bad = 1;
  for (uint32_t i = 0; i < h->nfeatures && !cc->bad; i++) {
    if (i) json_put_char(b, ',');
    float f;
    if (h->borrowed) {
      const char *fname;
      memcpy(&fname, feat + 8 * i, 8);
      if (fname)
        put_name(b, v->nc, fname);
      else
        JSON_PUT(b, "null");
      memcpy(&f, feat + 8 * nf + 4 * i, 4);
    } else {
      fmt_str(b, cc);
      cur_take(cc, &f, 4);
      get_u8(cc);
    }
    json_put_char(b, ':');
    put_float(b, f);
  }
  if (h->borrowed && !cc->bad) cc->p += 13 * nf;
  JSON_PUT(b, "},\"model\":{\"name\":");
  json_put_strn_or_null(b, name, name_n);
  JSON_PUT(b, ",\"version\":\"");
  json_put_raw(b, mv ? mv : "", mv_n);
  JSON_PUT(b, "\",\"features_version\":\"");
  json_put_raw(b, fv ? fv : "", fv_n);
  JSON_PUT(b, "\",\"timeout_ms\":");
  json_put_u64(b, h->model_timeout_ms);
  JSON_PUT(b, ",\"deadline_missed\":");
  json_put_bool(b, h->model_run == MODEL_DEADLINE);
  JSON_PUT(b, ",\"feature_status\":{");
  cap_cur r = {feat, cc->end, 0};
  uint32_t k = 0;
  for (uint32_t i = 0; i < h->nfeatures && !r.bad && !cc->bad; i++) {
    const char *fname;
    size_t fname_n;
    uint8_t st;
    if (h->borrowed) {
      memcpy(&fname, feat + 8 * i, 8);
      fname_n = fname ? strlen(fname) : 0;
      st = (uint8_t)feat[12 * nf + i];
    } else {
      fname = get_str(&r, &fname_n);
      float f;
      cur_take(&r, &f, 4);
      st = get_u8(&r);
    }
    if (!st || st > 3) continue;
    if (k++) json_put_char(b, ',');
    json_put_strn_or_null(b, fname, fname_n);
    json_put_char(b, ':');
    json_put_str(b, status[st]);
  }
  JSON_PUT(b, "},\"feature_error\":");
  json_put_strn_or_null(b, ferr, ferr_n);
  if (h->model_run == MODEL_SCORED && h->model_class >= 0) {
    JSON_PUT(b, ",\"class\":");
    json_put_i64(b, h->model_class);
  }
  JSON_PUT(b, ",\"ns\":");
  json_put_u64(b, h->ns_model);
  json_put_char(b, '}');
}

static void fmt_trace(fmt_view *v, const char *key, size_t keyn) {
  json_buf *b = v->b;
  cap_cur *c = &v->c;
  const cap_head *h = &v->h;
  size_t n;
  const char *s;
  KEY(v, key, keyn);
  JSON_PUT(b, "{\"rules\":[");
  const char *trace = c->p; /* by pointer: the array, then the errors' text */
  if (h->borrowed) {
    if ((size_t)(c->end - c->p) / sizeof(trace_rule) < h->ntrace)
      c->bad = 1;
    else
      c->p += h->ntrace * sizeof(trace_rule);
  }
  for (uint32_t i = 0; i < h->ntrace && !c->bad; i++) {
    if (i) json_put_char(b, ',');
    JSON_PUT(b, "{\"rule\":");
    uint8_t r;
    if (h->borrowed) {
      trace_rule t;
      memcpy(&t, trace + i * sizeof t, sizeof t);
      if (t.name)
        put_name(b, v->nc, t.name);
      else
        JSON_PUT(b, "null");
      r = (uint8_t)(t.result | (t.error ? CAP_RULE_ERROR : 0));
    } else {
      fmt_str(b, c);
      r = get_u8(c);
    }
    put_result(b, r & ~CAP_RULE_ERROR);
    if (r & CAP_RULE_ERROR) {
      s = get_str(c, &n);
      JSON_PUT(b, ",\"error\":");
      json_put_strn(b, s ? s : "", n);
    }
    json_put_char(b, '}');
  }
  JSON_PUT(b, "],\"matched\":");
  if (h->matched_rule && v->rule)
    json_put_strn(b, v->rule, v->rule_n);
  else
    JSON_PUT(b, "null");
  JSON_PUT(b, ",\"rules_total\":");
  json_put_u64(b, h->rules_total);
  JSON_PUT(b, ",\"rules_considered\":");
  json_put_u64(b, h->rules_indexed);
  JSON_PUT(b, ",\"no_candidate\":");
  json_put_strn_or_null(b, v->no_candidate, v->no_candidate_n);
  put_floor(b, h->floor, v->floor_from, v->floor_from_n);
  JSON_PUT(b, ",\"cost\":");
  json_put_u64(b, h->cost);
  json_put_char(b, '}');
}

/* lets, then (a second pass over the same captures) let_errors */
static void fmt_lets(fmt_view *v, const char *key, size_t keyn) {
  json_buf *b = v->b;
  cap_cur *c = &v->c;
  const cap_head *h = &v->h;
  size_t n;
  const char *s;
  (void)key;
  (void)keyn; /* ",\"lets\":{" below, with its brace */
  if (h->raw_lets) {
    fmt_lets_raw(b, c, h->nlets, v->nc);
    return;
  }
  JSON_PUT(b, ",\"lets\":{");
  const char *let_names = c->p; /* by pointer: the names' array, then the values */
  if (h->borrowed) {
    if ((size_t)(c->end - c->p) / sizeof(char *) < h->nlets)
      c->bad = 1;
    else
      c->p += h->nlets * sizeof(char *);
  }
  const char *lets = c->p;
  int first = 1, errors = 0;
  for (uint32_t i = 0; i < h->nlets && !c->bad; i++) {
    const char *name;
    size_t name_n = 0;
    if (h->borrowed) /* the name's length only when it is written */
      memcpy(&name, let_names + (size_t)i * sizeof name, sizeof name);
    else
      name = let_name(c, 0, let_names, i, &name_n);
    if (c->p < c->end && (uint8_t)*c->p == CV_ERROR) {
      c->p++;
      get_str(c, &n);
      errors++;
      continue;
    }
    if (!first) json_put_char(b, ',');
    first = 0;
    if (name && h->borrowed)
      put_name(b, v->nc, name);
    else
      json_put_strn_or_null(b, name, name_n);
    json_put_char(b, ':');
    fmt_value(b, c, 1);
  }
  JSON_PUT(b, "},\"let_errors\":{");
  cap_cur r = {lets, c->end, 0};
  first = 1;
  for (uint32_t i = 0; i < h->nlets && errors && !r.bad; i++) {
    const char *name = let_name(&r, h->borrowed, let_names, i, &n);
    size_t name_n = n;
    if (r.p < r.end && (uint8_t)*r.p == CV_ERROR) {
      r.p++;
      s = get_str(&r, &n);
      if (!first) json_put_char(b, ',');
      first = 0;
      json_put_strn_or_null(b, name, name_n);
      json_put_char(b, ':');
      json_put_strn(b, s ? s : "", n);
    } else {
      skip_value(&r);
    }
  }
  json_put_char(b, '}');
}

/* model_score and model_confidence */
HOT void fmt_model_score(fmt_view *v, const char *key, size_t keyn) {
  json_buf *b = v->b;
  KEY(v, key, keyn);
  if (v->h.model_run != MODEL_SCORED) {
    JSON_PUT(b, "null,\"model_confidence\":null");
    return;
  }
  json_write_double(b, v->h.model_score);
  JSON_PUT(b, ",\"model_confidence\":");
  if (v->h.model_confidence == v->h.model_confidence)
    json_write_double(b, v->h.model_confidence);
  else
    JSON_PUT(b, "null");
}

HOT void fmt_action(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  json_put_strn_or_null(v->b, v->action, v->action_n);
}

HOT void fmt_allowed(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  json_put_bool(v->b, v->h.allowed);
}

HOT void fmt_review(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  json_put_bool(v->b, v->h.review);
}

HOT void fmt_confidence(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  put_confidence(v->b, v->h.confidence);
}

HOT void fmt_source(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  json_put_strn_or_null(v->b, v->source, v->source_n);
}

HOT void fmt_reason(fmt_view *v, const char *key, size_t keyn) {
  KEY(v, key, keyn);
  JSON_PUT(v->b, "{\"rule\":");
  json_put_strn_or_null(v->b, v->rule, v->rule_n);
  JSON_PUT(v->b, ",\"message\":");
  json_put_strn_or_null(v->b, v->reason, v->reason_n);
  json_put_char(v->b, '}');
}

HOT void fmt_latency_ns(fmt_view *v, const char *key, size_t keyn) {
  json_buf *b = v->b;
  KEY(v, key, keyn);
  JSON_PUT(b, "{\"parse\":");
  json_put_u64(b, v->h.ns_parse);
  JSON_PUT(b, ",\"decide\":");
  json_put_u64(b, v->h.ns_decide);
  JSON_PUT(b, ",\"render\":");
  json_put_u64(b, v->h.ns_render);
  JSON_PUT(b, ",\"total\":");
  json_put_u64(b, v->h.latency_ns);
  json_put_char(b, '}');
}

HOT void fmt_limits(fmt_view *v, const char *key, size_t keyn) {
  json_buf *b = v->b;
  KEY(v, key, keyn);
  JSON_PUT(b, "{\"cost\":");
  json_put_u64(b, v->h.lim_cost);
  JSON_PUT(b, ",\"regex_match\":");
  json_put_u64(b, v->h.lim_regex);
  JSON_PUT(b, ",\"memory\":");
  json_put_u64(b, v->h.lim_memory);
  JSON_PUT(b, ",\"max_request_bytes\":");
  json_put_u64(b, v->h.lim_max_request);
  json_put_char(b, '}');
}

/* every nondeterministic value the decision read: the clock, whether the
 * model's deadline passed (the clock decided it, so replay takes the
 * recorded outcome instead of timing the trees again), the limit counters
 * (the count and penalty before the decision, and whether it charged) */
HOT void fmt_inputs(fmt_view *v, const char *key, size_t keyn) {
  json_buf *b = v->b;
  cap_cur *c = &v->c;
  size_t n;
  const char *s;
  KEY(v, key, keyn);
  JSON_PUT(b, "{\"clock_ns\":");
  json_put_i64(b, v->h.clock_ns);
  JSON_PUT(b, ",\"model_deadline_missed\":");
  if (v->h.model_run == MODEL_SCORED || v->h.model_run == MODEL_DEADLINE)
    json_put_bool(b, v->h.model_run == MODEL_DEADLINE);
  else
    JSON_PUT(b, "null");
  JSON_PUT(b, ",\"counters\":{");
  for (uint32_t i = 0; i < v->h.ncounters && !c->bad; i++) {
    if (i) json_put_char(b, ',');
    fmt_name(b, c, v->h.borrowed);
    JSON_PUT(b, ":{\"key\":");
    s = get_str(c, &n);
    json_put_strn(b, s ? s : "", n);
    JSON_PUT(b, ",\"count\":");
    json_put_u64(b, get_u64(c));
    JSON_PUT(b, ",\"penalized\":");
    json_put_bool(b, get_u8(c));
    JSON_PUT(b, ",\"charged\":");
    json_put_bool(b, get_u8(c));
    if (get_u8(c)) JSON_PUT(b, ",\"degraded\":true");
    json_put_char(b, '}');
  }
  JSON_PUT(b, "},\"random\":{}}");
}

/* a rollout's members (docs/snapshots.md, "Shadow and canary"): the side
 * this decision is, the answered record it completes, how the side was
 * chosen; nothing at all outside a rollout */
static void fmt_side(fmt_view *v, const char *key, size_t keyn) {
  (void)key;
  (void)keyn;
  json_buf *b = v->b;
  cap_cur *c = &v->c;
  uint8_t f = get_u8(c);
  if (f & CAP_SIDE_SET) {
    JSON_PUT(b, ",\"side\":");
    fmt_str(b, c);
  }
  if (f & CAP_SIDE_COMPLETES) {
    JSON_PUT(b, ",\"completes\":");
    fmt_str(b, c);
  }
  if (f & CAP_SIDE_ROLLOUT) {
    JSON_PUT(b, ",\"rollout\":{\"answered\":");
    fmt_str(b, c);
    JSON_PUT(b, ",\"by\":");
    fmt_str(b, c);
    uint32_t bucket = 0;
    double pct = 0;
    if (cur_take(c, &bucket, 4) || cur_take(c, &pct, sizeof pct)) return;
    JSON_PUT(b, ",\"bucket\":");
    json_put_u64(b, bucket);
    JSON_PUT(b, ",\"percent\":");
    json_write_double(b, pct);
    json_put_char(b, '}');
  }
  if (f & CAP_SIDE_ERROR) { /* as the API's error objects name them */
    JSON_PUT(b, ",\"error\":{\"code\":");
    fmt_str(b, c);
    JSON_PUT(b, ",\"message\":");
    fmt_str(b, c);
    JSON_PUT(b, ",\"path\":");
    fmt_str(b, c);
    json_put_char(b, '}');
  }
}

int format_capture(const char *capture, size_t clen, const char *id, const char *node,
                   json_buf *out, snapshot_rec *hdr, name_cache *nc) {
  fmt_view view = {.c = {capture, capture + clen, 0}, .b = out, .node = node, .nc = nc};
  fmt_view *v = &view;
  if (cur_take(&v->c, &v->h, sizeof v->h)) return VD_EINVAL;
  char idtext[SNAPSHOT_ID_TEXT];
  v->id = id ? id : snapshot_id_format(v->h.id, idtext);
  json_room(out, 1024 + clen + (size_t)v->h.ntrace * 24 + (size_t)v->h.nlets * 24 +
                     (size_t)v->h.nfeatures * 16);
  JSON_PUT(out, "{\"format\":1"); /* format 1: docs/snapshots.md */
#define X(name, kind, key) fmt_##name(v, ",\"" key "\":", sizeof(",\"" key "\":") - 1);
  SNAPSHOT_FIELDS(X)
#undef X
  json_put_char(out, '}');
  if (v->c.bad || v->c.p != v->c.end) return VD_EINVAL;
  if (json_put_end(out)) return VD_ENOMEM;
  if (hdr) {
    memcpy(hdr->id, v->h.id, 16);
#define X(field, value) hdr->field = (value);
    SNAPSHOT_RECORD(X)
#undef X
  }
  return 0;
}

int record_format(const char *capture, size_t clen, const char *id, const char *node,
                  json_buf *out) {
  return format_capture(capture, clen, id, node, out, NULL, NULL);
}
