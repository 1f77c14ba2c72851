/* test_render.c — the decision JSON (render.c) writes plain strings by
 * copying them and everything else through json_write_string: whatever the
 * strings hold (quotes, backslashes, control bytes, UTF-8, invalid UTF-8,
 * long texts), the text parses back and each field is exactly what
 * json_write_string makes of it; the fixed fields and the latency follow
 * the documented shape. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "engine/engine.h"
#include "test.h"
#include "verdict.h"

/* The JSON text json_write_string gives for s, in buf. */
static const char *written(arena *a, const char *s) {
  json_buf b;
  json_buf_init(&b, a);
  if (s)
    json_write_string(&b, s, strlen(s));
  else
    json_buf_put(&b, "null", 4);
  return b.data;
}

static void test_strings_render_as_json_write_string_does(void) {
  static const char *const texts[] = {
      "plain",
      "",
      "with \"quotes\" and \\backslashes\\",
      "tab\there, newline\nthere, bell\x07",
      "caf\xc3\xa9 \xe2\x84\xaa \xf0\x9f\x98\x80",
      "broken \xc3 utf-8 \xff",
      "exactly8",
      "sixteen bytes!!!",
      ("a rather longer reason, well past the eight-byte words the scan reads at a time, "
       "with a \"quote\" near the end"),
      "/ and \x7f and \xe2\x80\xa8",
      /* 16-byte blocks, the last one overlapping: what needs escaping in
       * the first block, in the overlap, and in the last byte */
      "\"quote first, then sixteen plain bytes",
      "seventeen bytes!\"",
      "twenty-four plain bytes\x01",
      "thirty-one plain bytes, then \xc3\xa9",
      "a backslash \\ inside 32 bytes..",
      "thirty-two bytes, all of them ok",
  };
  arena a;
  arena_init(&a, NULL, 0, 0);
  size_t nt = sizeof texts / sizeof texts[0];
  for (size_t i = 0; i < nt; i++) {
    vd_decision *d = vd_decision_new();
    decision_reset(d);
    d->action = texts[i];
    d->source = "rule";
    d->rule = texts[(i + 1) % nt];
    d->reason = texts[(i + 2) % nt];
    d->strategy = texts[(i + 3) % nt];
    d->allowed = i % 2;
    d->review = i % 3 == 0;
    d->confidence = i % 4 == 0 ? 1.0 : i % 4 == 1 ? 0.0 : 0.25;
    memset(d->policy_version, 'a', 64);
    d->policy_version[64] = '\0';
    d->latency_ns = i * 1234567 + 1000;
    d->decided = 1;
    const char *j;
    size_t n;
    CHECK(vd_decision_render(d, 0, &j, &n) == 0 && strlen(j) == n);
    char want[2048];
    snprintf(want, sizeof want,
             "{\"action\":%s,\"allowed\":%s,\"review\":%s,\"confidence\":", written(&a, texts[i]),
             i % 2 ? "true" : "false", i % 3 == 0 ? "true" : "false");
    CHECK_MSG(strncmp(j, want, strlen(want)) == 0, "%s\n  wants %s", j, want);
    snprintf(want, sizeof want, ",\"source\":\"rule\",\"reason\":{\"rule\":%s,\"message\":%s},",
             written(&a, texts[(i + 1) % nt]), written(&a, texts[(i + 2) % nt]));
    CHECK_MSG(strstr(j, want) != NULL, "%s\n  lacks %s", j, want);
    snprintf(want, sizeof want, "\"strategy\":%s,\"policy_version\":\"%s\"",
             written(&a, texts[(i + 3) % nt]), d->policy_version);
    CHECK_MSG(strstr(j, want) != NULL, "%s\n  lacks %s", j, want);
    /* it parses, and the latency is the microseconds with up to 3 decimals */
    value v;
    json_error je;
    CHECK_MSG(json_parse(&a, j, n, NULL, &v, &je) == 0 && v.kind == V_MAP, "%s: %s", j, je.message);
    const value *lat =
        json_parse(&a, j, n, NULL, &v, &je) == 0 ? value_map_get(&v, "latency_us", 10) : NULL;
    CHECK(lat && lat->kind == V_DOUBLE && lat->d == (double)(i * 1234567 + 1000) / 1000.0);
    vd_decision_free(d);
  }
  arena_free(&a);
}

/* The answer is rendered once, whether snapshots are on or off:
 * vd_decision_render without flags hands out that text (the same bytes, no
 * second rendering), with flags renders anew. */
static void test_rendered_once_snapshots_on_or_off(void) {
  for (int on = 0; on < 2; on++) {
    char dir[256];
    test_tmpdir(dir, sizeof dir, "render-once");
    vd_engine_opts o;
    memset(&o, 0, sizeof o);
    o.store_dir = "";
    o.snapshots_dir = on ? dir : NULL;
    o.snapshot_durability = VD_DURABILITY_NONE;
    vd_engine *e = NULL;
    vd_error err;
    CHECK_MSG(vd_engine_open("examples/policies", &o, &e, &err) == 0, "%s", err.message);
    if (!e) continue;
    vd_decision *d = vd_decision_new();
    const char *req =
        "{\"action\":\"payment_authorization\",\"context\":{\"payment\":{\"amount_usd\":620.0,"
        "\"currency\":\"EUR\"},\"card\":{\"country\":\"DE\",\"age_days\":3}},\"key\":\"k\"}";
    CHECK_MSG(vd_decide_json(e, req, -1, d, &err) == 0, "%s", err.message);
    const char *a1 = NULL, *a2 = NULL, *t = NULL;
    size_t n1 = 0, n2 = 0, tn = 0;
    CHECK(vd_decision_render(d, 0, &a1, &n1) == 0);
    CHECK(vd_decision_render(d, 0, &a2, &n2) == 0);
    CHECK_MSG(a1 && a1 == a2 && n1 == n2, "snapshots %s: the answer rendered twice",
              on ? "on" : "off");
    CHECK(vd_decision_render(d, VD_JSON_TRACE, &t, &tn) == 0);
    CHECK(t && t != a1 && tn > n1 && memcmp(t, a1, n1 - 1) == 0); /* the same, then the trace */
    CHECK(on ? strstr(a1, "\"snapshot_id\":\"") != NULL
             : strstr(a1, "\"snapshot_id\":null") != NULL);
    vd_decision_free(d);
    vd_engine_close(e);
  }
}

/* Untraced with snapshots off, the decide call leaves the answer unrendered
 * (nothing records it); traced, it renders it then (the trace times it). The
 * first vd_decision_render makes the same text either way, up to the
 * latency, and a decision after it starts unrendered again. */
static void test_answer_rendered_in_decide_only_when_traced(void) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_engine *e = NULL;
  vd_error err;
  CHECK_MSG(vd_engine_open("examples/policies", &o, &e, &err) == 0, "%s", err.message);
  if (!e) return;
  const char *req =
      "{\"action\":\"payment_authorization\",\"context\":{\"payment\":{\"amount_usd\":620.0,"
      "\"currency\":\"EUR\"},\"card\":{\"country\":\"DE\",\"age_days\":3}},\"key\":\"k\"}";
  vd_decision *plain = vd_decision_new(), *traced = vd_decision_new();
  vd_decision_set_trace(traced, 1);
  CHECK_MSG(vd_decide_json(e, req, -1, plain, &err) == 0, "%s", err.message);
  CHECK_MSG(vd_decide_json(e, req, -1, traced, &err) == 0, "%s", err.message);
  CHECK(plain->answer == NULL);
  CHECK(traced->answer != NULL);
  const char *a = NULL, *b = NULL, *again = NULL;
  size_t an = 0, bn = 0, n = 0;
  CHECK(vd_decision_render(plain, 0, &a, &an) == 0 && a && strlen(a) == an);
  CHECK(plain->answer == a && plain->answer_len == an);
  CHECK(vd_decision_render(plain, 0, &again, &n) == 0 && again == a && n == an);
  CHECK(vd_decision_render(traced, 0, &b, &bn) == 0 && b == traced->answer);
  const char *la = a ? strstr(a, "\"latency_us\":") : NULL;
  const char *lb = b ? strstr(b, "\"latency_us\":") : NULL;
  CHECK(la && lb && la - a == lb - b && memcmp(a, b, (size_t)(la - a)) == 0);
  CHECK(la && lb && strcmp(strchr(la + 13, ','), strchr(lb + 13, ',')) == 0);
  CHECK_MSG(vd_decide_json(e, req, -1, plain, &err) == 0, "%s", err.message);
  CHECK(plain->answer == NULL);
  vd_decision_free(plain);
  vd_decision_free(traced);
  vd_engine_close(e);
}

int main(void) {
  TEST_RUN(test_strings_render_as_json_write_string_does);
  TEST_RUN(test_rendered_once_snapshots_on_or_off);
  TEST_RUN(test_answer_rendered_in_decide_only_when_traced);
  TEST_END();
}
