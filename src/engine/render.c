/* render.c — a decision as JSON, written into the decision's own arena.
 *
 * The shape is fixed (docs/engine.md):
 *   {"action":..,"allowed":..,"review":..,"confidence":..,"source":..,
 *    "reason":{"rule":..,"message":..},"strategy":..,"policy_version":..,
 *    "model_version":null,"latency_us":..}
 * plus "trace":{..} on request. The fields are written by hand rather than
 * built as a value and serialised: it is the last stage of the hot path and
 * this way it costs one pass over a few short strings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "engine/engine.h"

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

/* ns as microseconds with up to three decimals ("0.734", "12.5", "3.0"),
 * without going through a double. */
static void put_us(json_buf *b, uint64_t ns) {
  put_u64(b, ns / 1000);
  unsigned frac = (unsigned)(ns % 1000);
  char t[4] = {'.', (char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
               (char)('0' + frac % 10)};
  size_t n = 4;
  while (n > 2 && t[n - 1] == '0') n--;
  json_buf_put(b, t, n);
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
  put_lit(b, ",\"cost\":");
  put_u64(b, d->cost);
  put_lit(b, ",\"ns\":{\"parse\":");
  put_u64(b, d->ns_parse);
  put_lit(b, ",\"decide\":");
  put_u64(b, d->ns_decide);
  put_lit(b, ",\"render\":");
  put_u64(b, d->ns_render);
  put_lit(b, "}}");
}

int decision_render(vd_decision *d, int flags, const char **out, size_t *len) {
  uint64_t t0 = flags & VD_JSON_TRACE ? engine_now_ns() : 0;
  json_buf b;
  json_buf_init(&b, &d->mem);
  put_lit(&b, "{\"action\":");
  put_str_or_null(&b, d->action);
  put_lit(&b, d->allowed ? ",\"allowed\":true" : ",\"allowed\":false");
  put_lit(&b, d->review ? ",\"review\":true" : ",\"review\":false");
  put_lit(&b, ",\"confidence\":");
  if (d->confidence == 1.0)
    put_lit(&b, "1.0");
  else if (d->confidence == 0.0)
    put_lit(&b, "0.0");
  else
    json_write_double(&b, d->confidence);
  put_lit(&b, ",\"source\":");
  put_str_or_null(&b, d->source);
  put_lit(&b, ",\"reason\":{\"rule\":");
  put_str_or_null(&b, d->rule);
  put_lit(&b, ",\"message\":");
  put_str_or_null(&b, d->reason);
  put_lit(&b, "},\"strategy\":");
  put_str_or_null(&b, d->strategy);
  /* The version is 64 hex digits: nothing to escape. */
  put_lit(&b, ",\"policy_version\":\"");
  json_buf_put(&b, d->policy_version, strlen(d->policy_version));
  json_buf_putc(&b, '"');
  put_lit(&b, ",\"model_version\":null,\"latency_us\":");
  /* Nanosecond resolution is all the clock gives: three decimals. */
  put_us(&b, d->latency_ns);
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
