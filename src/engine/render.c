/* render.c — a decision as JSON, written into the decision's own arena.
 *
 * The shape is fixed (docs/engine.md):
 *   {"action":..,"allowed":..,"review":..,"confidence":..,"source":..,
 *    "reason":{"rule":..,"message":..},"strategy":..,"policy_version":..,
 *    "model_version":null,"latency_us":..,"snapshot_id":..}
 * plus "trace":{..} on request. The fields are written by hand rather than
 * built as a value and serialised: it is the last stage of the hot path and
 * this way it costs one pass over a few short strings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtoa.h"
#include "core/json.h"
#include "engine/engine.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static void put_lit(json_buf *b, const char *s) { json_buf_put(b, s, strlen(s)); }

static void put_str_or_null(json_buf *b, const char *s) {
  if (s)
    json_write_string(b, s, strlen(s));
  else
    put_lit(b, "null");
}

static void put_u64(json_buf *b, uint64_t u) {
  char t[24];
  size_t i = sizeof t;
  do {
    t[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  json_buf_put(b, t + i, sizeof t - i);
}

static const char *result_name(uint8_t r) {
  switch (r) {
    case RR_TRUE:
      return "true";
    case RR_FALSE:
      return "false";
    case RR_ERROR:
      return "error";
    default:
      return "skipped-not-candidate";
  }
}

/* "model": the fallback model's run — its input row by feature name (null
 * for a missing value), score and confidence — or null when it did not run. */
static void put_model(json_buf *b, const vd_decision *d) {
  if (d->model_run != MODEL_SCORED && d->model_run != MODEL_DEADLINE) {
    put_lit(b, ",\"model\":null");
    return;
  }
  put_lit(b, ",\"model\":{\"name\":");
  put_str_or_null(b, d->model_name);
  put_lit(b, ",\"features\":{");
  for (uint32_t i = 0; i < d->nfeatures; i++) {
    if (i) json_buf_putc(b, ',');
    put_str_or_null(b, d->feature_names[i]);
    json_buf_putc(b, ':');
    if (d->features[i] != d->features[i]) {
      put_lit(b, "null");
    } else {
      char t[32];
      size_t n = ftoa_shortest(d->features[i], t);
      json_buf_put(b, t, n);
    }
  }
  put_lit(b, "},\"deadline_missed\":");
  put_lit(b, d->model_run == MODEL_DEADLINE ? "true" : "false");
  if (d->model_run == MODEL_SCORED) {
    put_lit(b, ",\"score\":");
    json_write_double(b, d->model_score);
    put_lit(b, ",\"confidence\":");
    if (d->model_confidence == d->model_confidence)
      json_write_double(b, d->model_confidence);
    else
      put_lit(b, "null");
    if (d->model_class >= 0) {
      put_lit(b, ",\"class\":");
      put_u64(b, (uint64_t)d->model_class);
    }
  }
  put_lit(b, ",\"ns\":");
  put_u64(b, d->ns_model);
  json_buf_putc(b, '}');
}

static void put_trace(json_buf *b, const vd_decision *d) {
  put_lit(b, ",\"trace\":{\"rules\":[");
  for (uint32_t i = 0; i < d->ntrace; i++) {
    const trace_rule *t = &d->trace[i];
    if (i) json_buf_putc(b, ',');
    put_lit(b, "{\"rule\":");
    put_str_or_null(b, t->name);
    put_lit(b, ",\"result\":\"");
    put_lit(b, result_name(t->result));
    json_buf_putc(b, '"');
    if (t->error) {
      put_lit(b, ",\"error\":");
      json_write_string(b, t->error, strlen(t->error));
    }
    json_buf_putc(b, '}');
  }
  put_lit(b, "],\"matched\":");
  put_str_or_null(b, d->source && strcmp(d->source, "rule") == 0 ? d->rule : NULL);
  put_lit(b, ",\"rules_total\":");
  put_u64(b, d->rules_total);
  put_lit(b, ",\"rules_considered\":");
  put_u64(b, d->rules_indexed);
  put_lit(b, ",\"lets\":[");
  for (uint32_t i = 0; i < d->nlets; i++) {
    if (i) json_buf_putc(b, ',');
    put_str_or_null(b, d->lets[i]);
  }
  put_lit(b, "],\"no_candidate\":");
  put_str_or_null(b, d->no_candidate);
  put_lit(b, ",\"floor\":");
  if (d->floor >= 0) {
    put_lit(b, "{\"min\":");
    json_write_double(b, d->floor);
    put_lit(b, ",\"instead_of\":");
    put_str_or_null(b, d->floor_from);
    json_buf_putc(b, '}');
  } else {
    put_lit(b, "null");
  }
  put_lit(b, ",\"cost\":");
  put_u64(b, d->cost);
  put_model(b, d);
  put_lit(b, ",\"ns\":{\"parse\":");
  put_u64(b, d->ns_parse);
  put_lit(b, ",\"decide\":");
  put_u64(b, d->ns_decide);
  put_lit(b, ",\"render\":");
  put_u64(b, d->ns_render);
  put_lit(b, "}}");
}

/* ---- the decision itself: room reserved once, plain strings copied ---- */

static void raw(json_buf *b, const char *s, size_t n) {
  memcpy(b->data + b->len, s, n);
  b->len += n;
}

#define RAW(b, lit) raw(b, lit, sizeof(lit) - 1)

/* The high bit of each byte of w that needs escaping or checking (a borrow
 * may mark a byte after a real one, never a byte in a word without one). */
static uint64_t escape_marks(uint64_t w) {
  const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
  return ((w - ones * 0x20) | w | ((q - ones) & ~q) | ((b - ones) & ~b)) & highs;
}

/* Whether s[0..n) needs more than quotes: control bytes, '"', '\\', or
 * non-ASCII (which json_write_string checks as UTF-8). */
static int needs_escape(const char *s, size_t n) {
  uint64_t w;
#if defined(__SSE2__)
  if (n >= 16) { /* 16 bytes at a time, the last block overlapping */
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  space = _mm_set1_epi8(0x20), flip = _mm_set1_epi8((char)0x80);
    for (size_t i = 0;; i += 16) {
      if (i + 16 > n) i = n - 16;
      __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
      /* signed compare after flipping the top bit: v < 0x20 unsigned, and
       * any byte >= 0x80 is negative as it is */
      __m128i bad = _mm_or_si128(_mm_cmplt_epi8(_mm_xor_si128(v, flip), _mm_xor_si128(space, flip)),
                                 _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)));
      bad = _mm_or_si128(bad, _mm_cmplt_epi8(v, _mm_setzero_si128()));
      if (_mm_movemask_epi8(bad)) return 1;
      if (i + 16 >= n) return 0;
    }
  }
#endif
  if (n >= 8) { /* words, the last one overlapping the one before */
    for (size_t i = 0; i + 8 < n; i += 8) {
      memcpy(&w, s + i, 8);
      if (escape_marks(w)) return 1;
    }
    memcpy(&w, s + n - 8, 8);
    return escape_marks(w) != 0;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) return 1;
  }
  return 0;
}

static void raw_str_or_null(json_buf *b, const char *s, size_t n) {
  if (!s) {
    RAW(b, "null");
  } else if (needs_escape(s, n)) {
    json_write_string(b, s, n);
  } else {
    b->data[b->len++] = '"';
    raw(b, s, n);
    b->data[b->len++] = '"';
  }
}

static void raw_u64(json_buf *b, uint64_t u) {
  char t[24];
  size_t i = sizeof t;
  do {
    t[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  raw(b, t + i, sizeof t - i);
}

int decision_render(vd_decision *d, int flags, const char **out, size_t *len) {
  uint64_t t0 = flags & VD_JSON_TRACE ? engine_now_ns() : 0;
  enum { ACTION, SOURCE, RULE, REASON, STRATEGY, SNAPSHOT, FLOOR_FROM, NSTR };
  const char *str[NSTR] = {d->action,   d->source,      d->rule,      d->reason,
                           d->strategy, d->snapshot_id, d->floor_from};
  size_t n[NSTR], room = 256 + 32 + 64 + 64; /* the fixed text, the numbers, the version, floor */
  for (int i = 0; i < NSTR; i++) {
    n[i] = str[i] ? strlen(str[i]) : 0;
    room += 6 * n[i] + 6; /* escaped at worst (\u00XX a byte) */
  }
  json_buf b;
  json_buf_init(&b, &d->mem);
  b.data = arena_alloc(&d->mem, room);
  if (!b.data) return VD_ENOMEM;
  b.cap = room;
  RAW(&b, "{\"action\":");
  raw_str_or_null(&b, str[ACTION], n[ACTION]);
  if (d->allowed)
    RAW(&b, ",\"allowed\":true");
  else
    RAW(&b, ",\"allowed\":false");
  if (d->review)
    RAW(&b, ",\"review\":true");
  else
    RAW(&b, ",\"review\":false");
  RAW(&b, ",\"confidence\":");
  if (d->confidence == 1.0)
    RAW(&b, "1.0");
  else if (d->confidence == 0.0)
    RAW(&b, "0.0");
  else
    json_write_double(&b, d->confidence);
  if (str[FLOOR_FROM]) { /* the caller's confidence_floor replaced the answer */
    RAW(&b, ",\"floor\":{\"min\":");
    json_write_double(&b, d->floor);
    RAW(&b, ",\"instead_of\":");
    raw_str_or_null(&b, str[FLOOR_FROM], n[FLOOR_FROM]);
    b.data[b.len++] = '}';
  }
  RAW(&b, ",\"source\":");
  raw_str_or_null(&b, str[SOURCE], n[SOURCE]);
  RAW(&b, ",\"reason\":{\"rule\":");
  raw_str_or_null(&b, str[RULE], n[RULE]);
  RAW(&b, ",\"message\":");
  raw_str_or_null(&b, str[REASON], n[REASON]);
  RAW(&b, "},\"strategy\":");
  raw_str_or_null(&b, str[STRATEGY], n[STRATEGY]);
  /* The version is 64 hex digits: nothing to escape. */
  RAW(&b, ",\"policy_version\":\"");
  raw(&b, d->policy_version, strnlen(d->policy_version, 64));
  if (d->model_run == MODEL_SCORED || d->model_run == MODEL_DEADLINE) {
    RAW(&b, "\",\"model_version\":\"");
    raw(&b, d->model_version, strnlen(d->model_version, 64));
    RAW(&b, "\",\"latency_us\":");
  } else {
    RAW(&b, "\",\"model_version\":null,\"latency_us\":");
  }
  /* Nanosecond resolution is all the clock gives: three decimals
   * ("0.734", "12.5", "3.0"), without going through a double. */
  raw_u64(&b, d->latency_ns / 1000);
  unsigned frac = (unsigned)(d->latency_ns % 1000);
  char t[4] = {'.', (char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
               (char)('0' + frac % 10)};
  size_t tn = 4;
  while (tn > 2 && t[tn - 1] == '0') tn--;
  raw(&b, t, tn);
  RAW(&b, ",\"snapshot_id\":"); /* 36 characters of hex and '-': nothing to escape */
  raw_str_or_null(&b, str[SNAPSHOT], n[SNAPSHOT]);
  b.data[b.len] = '\0';
  if (flags & VD_JSON_TRACE) {
    /* The render stage is timed up to here: the trace reports it. */
    d->ns_render = engine_now_ns() - t0;
    put_trace(&b, d);
  }
  json_buf_putc(&b, '}');
  json_buf_putc(&b, '\0');
  if (b.oom) return VD_ENOMEM;
  *out = b.data;
  if (len) *len = b.len - 1;
  return 0;
}

int vd_decision_render(vd_decision *d, int flags, const char **out, size_t *len) {
  if (!d || !out) return VD_EINVAL;
  *out = NULL;
  if (len) *len = 0;
  if (!d->decided) return VD_EINVAL;
  if (!flags && d->answer) { /* rendered already, while recording the snapshot */
    *out = d->answer;
    if (len) *len = d->answer_len;
    return 0;
  }
  return decision_render(d, flags, out, len);
}

int vd_decision_json(vd_decision *d, int flags, char **out) {
  if (!out) return VD_EINVAL;
  *out = NULL;
  const char *s;
  size_t n;
  int rc = vd_decision_render(d, flags, &s, &n);
  if (rc) return rc;
  char *c = malloc(n + 1);
  if (!c) return VD_ENOMEM;
  memcpy(c, s, n + 1);
  *out = c;
  return 0;
}
