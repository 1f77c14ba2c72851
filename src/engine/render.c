/* render.c — a decision as JSON, written into the decision's own arena.
 *
 * The shape is fixed (docs/engine.md):
 *   {"action":..,"allowed":..,"review":..,"confidence":..,"source":..,
 *    "reason":{"rule":..,"message":..},"strategy":..,"policy_version":..,
 *    "model_version":null,"latency_us":..,"snapshot_id":..}
 * plus "trace":{..} on request. The fields are written by hand rather than
 * built as a value and serialised: it is the last stage of the hot path and
 * this way it costs one pass over a few short strings. They are written
 * with core/json's json_put_* writers, the ones the snapshot payload is
 * written with, so an answer and its snapshot spell a value alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/dtoa.h"
#include "core/json.h"
#include "engine/engine.h"

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
    JSON_PUT(b, ",\"model\":null");
    return;
  }
  JSON_PUT(b, ",\"model\":{\"name\":");
  json_put_str(b, d->model_name);
  JSON_PUT(b, ",\"features\":{");
  for (uint32_t i = 0; i < d->nfeatures; i++) {
    if (i) json_put_char(b, ',');
    json_put_str(b, d->feature_names[i]);
    json_put_char(b, ':');
    if (d->features[i] != d->features[i]) {
      JSON_PUT(b, "null");
    } else {
      char t[32];
      size_t n = ftoa_shortest(d->features[i], t);
      json_put_raw(b, t, n);
    }
  }
  JSON_PUT(b, "},\"deadline_missed\":");
  json_put_bool(b, d->model_run == MODEL_DEADLINE);
  if (d->model_run == MODEL_SCORED) {
    JSON_PUT(b, ",\"score\":");
    json_write_double(b, d->model_score);
    JSON_PUT(b, ",\"confidence\":");
    if (d->model_confidence == d->model_confidence)
      json_write_double(b, d->model_confidence);
    else
      JSON_PUT(b, "null");
    if (d->model_class >= 0) {
      JSON_PUT(b, ",\"class\":");
      json_put_u64(b, (uint64_t)d->model_class);
    }
  }
  JSON_PUT(b, ",\"ns\":");
  json_put_u64(b, d->ns_model);
  json_put_char(b, '}');
}

static void put_trace(json_buf *b, const vd_decision *d) {
  JSON_PUT(b, ",\"trace\":{\"rules\":[");
  for (uint32_t i = 0; i < d->ntrace; i++) {
    const trace_rule *t = &d->trace[i];
    if (i) json_put_char(b, ',');
    JSON_PUT(b, "{\"rule\":");
    json_put_str(b, t->name);
    JSON_PUT(b, ",\"result\":\"");
    json_put_raw(b, result_name(t->result), strlen(result_name(t->result)));
    json_put_char(b, '"');
    if (t->error) {
      JSON_PUT(b, ",\"error\":");
      json_put_strn(b, t->error, strlen(t->error));
    }
    json_put_char(b, '}');
  }
  JSON_PUT(b, "],\"matched\":");
  json_put_str(b, d->source && strcmp(d->source, "rule") == 0 ? d->rule : NULL);
  JSON_PUT(b, ",\"rules_total\":");
  json_put_u64(b, d->rules_total);
  JSON_PUT(b, ",\"rules_considered\":");
  json_put_u64(b, d->rules_indexed);
  JSON_PUT(b, ",\"lets\":[");
  for (uint32_t i = 0; i < d->nlets; i++) {
    if (i) json_put_char(b, ',');
    json_put_str(b, d->lets[i]);
  }
  JSON_PUT(b, "],\"no_candidate\":");
  json_put_str(b, d->no_candidate);
  JSON_PUT(b, ",\"floor\":");
  if (d->floor >= 0) {
    JSON_PUT(b, "{\"min\":");
    json_write_double(b, d->floor);
    JSON_PUT(b, ",\"instead_of\":");
    json_put_str(b, d->floor_from);
    json_put_char(b, '}');
  } else {
    JSON_PUT(b, "null");
  }
  JSON_PUT(b, ",\"cost\":");
  json_put_u64(b, d->cost);
  put_model(b, d);
  JSON_PUT(b, ",\"ns\":{\"parse\":");
  json_put_u64(b, d->ns_parse);
  JSON_PUT(b, ",\"decide\":");
  json_put_u64(b, d->ns_decide);
  JSON_PUT(b, ",\"render\":");
  json_put_u64(b, d->ns_render);
  JSON_PUT(b, "}}");
}

int decision_render(vd_decision *d, int flags, const char **out, size_t *len) {
  uint64_t t0 = flags & VD_JSON_TRACE ? clock_mono_ns() : 0;
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
  b.data = arena_alloc(&d->mem, room); /* once: the rest fits */
  if (!b.data) return VD_ENOMEM;
  b.cap = room;
  JSON_PUT(&b, "{\"action\":");
  json_put_strn_or_null(&b, str[ACTION], n[ACTION]);
  if (d->allowed)
    JSON_PUT(&b, ",\"allowed\":true");
  else
    JSON_PUT(&b, ",\"allowed\":false");
  if (d->review)
    JSON_PUT(&b, ",\"review\":true");
  else
    JSON_PUT(&b, ",\"review\":false");
  JSON_PUT(&b, ",\"confidence\":");
  if (d->confidence == 1.0)
    JSON_PUT(&b, "1.0");
  else if (d->confidence == 0.0)
    JSON_PUT(&b, "0.0");
  else
    json_write_double(&b, d->confidence);
  if (str[FLOOR_FROM]) { /* the caller's confidence_floor replaced the answer */
    JSON_PUT(&b, ",\"floor\":{\"min\":");
    json_write_double(&b, d->floor);
    JSON_PUT(&b, ",\"instead_of\":");
    json_put_strn_or_null(&b, str[FLOOR_FROM], n[FLOOR_FROM]);
    json_put_char(&b, '}');
  }
  JSON_PUT(&b, ",\"source\":");
  json_put_strn_or_null(&b, str[SOURCE], n[SOURCE]);
  JSON_PUT(&b, ",\"reason\":{\"rule\":");
  json_put_strn_or_null(&b, str[RULE], n[RULE]);
  JSON_PUT(&b, ",\"message\":");
  json_put_strn_or_null(&b, str[REASON], n[REASON]);
  JSON_PUT(&b, "},\"strategy\":");
  json_put_strn_or_null(&b, str[STRATEGY], n[STRATEGY]);
  /* The version is 64 hex digits: nothing to escape. */
  JSON_PUT(&b, ",\"policy_version\":\"");
  json_put_raw(&b, d->policy_version, strnlen(d->policy_version, 64));
  if (d->model_run == MODEL_SCORED || d->model_run == MODEL_DEADLINE) {
    JSON_PUT(&b, "\",\"model_version\":\"");
    json_put_raw(&b, d->model_version, strnlen(d->model_version, 64));
    JSON_PUT(&b, "\",\"latency_us\":");
  } else {
    JSON_PUT(&b, "\",\"model_version\":null,\"latency_us\":");
  }
  /* Nanosecond resolution is all the clock gives: three decimals
   * ("0.734", "12.5", "3.0"), without going through a double. */
  json_put_u64(&b, d->latency_ns / 1000);
  unsigned frac = (unsigned)(d->latency_ns % 1000);
  char t[4] = {'.', (char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
               (char)('0' + frac % 10)};
  size_t tn = 4;
  while (tn > 2 && t[tn - 1] == '0') tn--;
  json_put_raw(&b, t, tn);
  if (str[SNAPSHOT]) { /* 36 characters of hex and '-' (snapshot_id_format): nothing to escape */
    JSON_PUT(&b, ",\"snapshot_id\":\"");
    json_put_raw(&b, str[SNAPSHOT], n[SNAPSHOT]);
    json_put_char(&b, '"');
  } else {
    JSON_PUT(&b, ",\"snapshot_id\":null");
  }
  if (flags & VD_JSON_TRACE) {
    /* The render stage is timed up to here: the trace reports it. */
    d->ns_render = clock_mono_ns() - t0;
    put_trace(&b, d);
  }
  json_put_char(&b, '}');
  if (json_put_end(&b)) return VD_ENOMEM;
  *out = b.data;
  if (len) *len = b.len;
  return 0;
}

void decision_answer(vd_decision *d) {
  uint64_t t0 = d->trace_on ? clock_mono_ns() : 0;
  const char *ans;
  size_t n;
  if (decision_render(d, 0, &ans, &n) == 0) { /* else rendered on demand, failing there */
    d->answer = ans;
    d->answer_len = n;
  }
  if (d->trace_on) d->ns_render = clock_mono_ns() - t0;
}

int vd_decision_render(vd_decision *d, int flags, const char **out, size_t *len) {
  if (!d || !out) return VD_EINVAL;
  *out = NULL;
  if (len) *len = 0;
  if (!d->decided) return VD_EINVAL;
  if (!flags && d->answer) { /* rendered already, in the decide path or by a call before */
    *out = d->answer;
    if (len) *len = d->answer_len;
    return 0;
  }
  int rc = decision_render(d, flags, out, len);
  if (rc == 0 && !flags) { /* kept for the next call: the fields do not change until d decides */
    d->answer = *out;
    d->answer_len = len ? *len : strlen(*out);
  }
  return rc;
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
