/* test_request.c — bad requests get a clear error naming the JSON path (or
 * the line and column of malformed JSON) and never crash: wrong types,
 * unknown keys, missing action, unknown decision point, limits, bad C
 * requests, and every prefix and many byte flips of a valid request. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "verdict.h"

static vd_decision *D;

static int contains(const char *hay, const char *needle) { return hay && strstr(hay, needle); }

/* Expects json to be refused with code and path (path NULL: not checked)
 * and a message containing `says`. */
static void refused(vd_engine *e, const char *json, int code, const char *path, const char *says) {
  vd_error err;
  int rc = vd_decide_json(e, json, -1, D, &err);
  CHECK_MSG(rc == code && err.code == code, "%s: got %d (%s), want %d", json, rc, err.message,
            code);
  if (path) CHECK_MSG(strcmp(err.path, path) == 0, "%s: path %s, want %s", json, err.path, path);
  if (says)
    CHECK_MSG(contains(err.message, says), "%s: message \"%s\" lacks \"%s\"", json, err.message,
              says);
  /* A refused request leaves no decision behind. */
  CHECK(vd_decision_action(D) == NULL && vd_decision_source(D) == NULL);
  const char *s;
  CHECK(vd_decision_render(D, 0, &s, NULL) == VD_EINVAL);
}

static void wrong_shapes(vd_engine *e) {
  refused(e, "[]", VD_EREQUEST, "$", "must be a JSON object");
  refused(e, "\"gate\"", VD_EREQUEST, "$", "not a string");
  refused(e, "{}", VD_EREQUEST, "$.action", "no $.action");
  refused(e, "{\"context\":{}}", VD_EREQUEST, "$.action", NULL);
  refused(e, "{\"action\":5}", VD_EREQUEST, "$.action", "must be a string");
  refused(e, "{\"action\":null}", VD_EREQUEST, "$.action", "not null");
  refused(e, "{\"action\":\"\"}", VD_EREQUEST, "$.action", "empty");
  refused(e, "{\"action\":\"gate\",\"context\":[]}", VD_EREQUEST, "$.context",
          "$.context must be an object");
  refused(e, "{\"action\":\"gate\",\"context\":\"x=1\"}", VD_EREQUEST, "$.context", "a string");
  refused(e, "{\"action\":\"gate\",\"candidates\":\"allow\"}", VD_EREQUEST, "$.candidates",
          "array of action names");
  refused(e, "{\"action\":\"gate\",\"candidates\":[\"allow\",3]}", VD_EREQUEST, "$.candidates[1]",
          "$.candidates[1] must be a string");
  refused(e, "{\"action\":\"gate\",\"candidates\":[[\"allow\"]]}", VD_EREQUEST, "$.candidates[0]",
          "an array");
  refused(e, "{\"action\":\"gate\",\"key\":7}", VD_EREQUEST, "$.key", "$.key must be a string");
  refused(e, "{\"action\":\"gate\",\"contxt\":{}}", VD_EREQUEST, "$.contxt",
          "unknown request key $.contxt");
  refused(e, "{\"action\":\"gate\",\"a b\":1}", VD_EREQUEST, "$[\"a b\"]", "unknown request key");
}

static void malformed_json(vd_engine *e) {
  vd_error err;
  refused(e, "", VD_EJSON, NULL, "not valid JSON");
  refused(e, "{\"action\":", VD_EJSON, NULL, "not valid JSON");
  refused(e, "{\"action\":\"gate\",\"context\":{\"a\":tru}}", VD_EJSON, "$.context.a", NULL);
  refused(e, "{\"action\":\"gate\",\"action\":\"gate\"}", VD_EJSON, NULL, "uplicate");
  refused(e, "{\"action\":\"gate\"} x", VD_EJSON, NULL, NULL);
  CHECK(vd_decide_json(e, "{\n  \"action\": \"gate\",\n  \"context\": {,}\n}", -1, D, &err) ==
        VD_EJSON);
  CHECK_MSG(err.line == 3 && err.column > 0, "line %d col %d", err.line, err.column);
  /* a length shorter than the text: only that much is read */
  CHECK(vd_decide_json(e, "{\"action\":\"gate\"}garbage", 17, D, &err) == 0);
}

static void unknown_point(vd_engine *e) {
  refused(e, "{\"action\":\"nope\"}", VD_ENOTFOUND, "$.action",
          "no strategy serves the decision point 'nope'");
  vd_error err;
  vd_decide_json(e, "{\"action\":\"nope\"}", -1, D, &err);
  CHECK_MSG(contains(err.message, "'gate'") && contains(err.message, "'http_request'"), "%s",
            err.message);
}

static void limits(void) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  o.max_request_bytes = 64;
  vd_engine *e;
  vd_error err;
  CHECK(vd_engine_open("tests/engine/bundles/gate", &o, &e, &err) == 0);
  if (!e) return;
  refused(e,
          "{\"action\":\"gate\",\"context\":{\"padding\":\"....................................."
          "..........\"}}",
          VD_ELIMIT, "$", "the limit is 64");
  vd_engine_close(e);

  o.max_request_bytes = 0;
  o.memory_limit = 2000; /* far too little for this request */
  CHECK(vd_engine_open("tests/engine/bundles/gate", &o, &e, &err) == 0);
  if (!e) return;
  char big[4096];
  size_t n = (size_t)snprintf(big, sizeof big, "{\"action\":\"gate\",\"context\":{\"s\":[");
  for (int i = 0; i < 300; i++)
    n += (size_t)snprintf(big + n, sizeof big - n, "%s\"x\"", i ? "," : "");
  snprintf(big + n, sizeof big - n, "]}}");
  int rc = vd_decide_json(e, big, -1, D, &err);
  CHECK_MSG(rc == VD_ENOMEM, "rc %d %s", rc, err.message);
  vd_engine_close(e);

  /* Nesting deeper than the JSON reader's limit. */
  o.memory_limit = 0;
  CHECK(vd_engine_open("tests/engine/bundles/gate", &o, &e, &err) == 0);
  if (!e) return;
  size_t depth = 2000, cap = depth * 2 + 64;
  char *deep = malloc(cap);
  size_t o2 = (size_t)snprintf(deep, cap, "{\"action\":\"gate\",\"context\":{\"d\":");
  for (size_t i = 0; i < depth; i++) deep[o2++] = '[';
  for (size_t i = 0; i < depth; i++) deep[o2++] = ']';
  memcpy(deep + o2, "}}", 3);
  rc = vd_decide_json(e, deep, -1, D, &err);
  CHECK_MSG(rc == VD_ELIMIT, "rc %d %s", rc, err.message);
  free(deep);
  vd_engine_close(e);
}

static void bad_c_requests(vd_engine *e) {
  vd_error err;
  vd_request r;
  memset(&r, 0, sizeof r);
  CHECK(vd_decide(e, &r, D, &err) == VD_EREQUEST && strcmp(err.path, "$.action") == 0);
  r.action = "gate";
  r.context_json = "{\"a\":}";
  r.context_len = -1;
  CHECK(vd_decide(e, &r, D, &err) == VD_EJSON);
  CHECK_MSG(strncmp(err.path, "$.context", 9) == 0, "%s", err.path);
  r.context_json = "[1]";
  CHECK(vd_decide(e, &r, D, &err) == VD_EREQUEST && strcmp(err.path, "$.context") == 0);
  r.context_json = NULL;
  const char *bad[] = {"allow", "\xff\xfe"};
  r.candidates = bad;
  r.ncandidates = 2;
  CHECK(vd_decide(e, &r, D, &err) == VD_EREQUEST && strcmp(err.path, "$.candidates[1]") == 0);
  CHECK(contains(err.message, "UTF-8"));
  r.candidates = NULL;
  CHECK(vd_decide(e, &r, D, &err) == VD_EINVAL);
  r.ncandidates = 0;
  r.key = "\xc3";
  CHECK(vd_decide(e, &r, D, &err) == VD_EREQUEST && strcmp(err.path, "$.key") == 0);
  /* NULL arguments */
  CHECK(vd_decide(NULL, &r, D, &err) == VD_EINVAL);
  CHECK(vd_decide(e, NULL, D, &err) == VD_EINVAL);
  CHECK(vd_decide(e, &r, NULL, &err) == VD_EINVAL);
  CHECK(vd_decide_json(e, NULL, 0, D, &err) == VD_EINVAL);
  CHECK(vd_decide_json(e, "{}", -1, D, NULL) == VD_EREQUEST); /* err may be NULL */
}

/* Every prefix, and every single-byte change to a few characters, of a
 * valid request: each is decided or refused, never a crash (ASan watches). */
static void mangled(vd_engine *e) {
  const char *good =
      "{\"action\":\"gate\",\"candidates\":[\"allow\",\"block\"],\"key\":\"k\",\"context\":{"
      "\"path\":"
      "\"/api/v1\",\"headers\":{\"user-agent\":\"sqlmap\"},\"body_size\":12,\"env\":{\"country\":"
      "\"CN\"}}}";
  size_t n = strlen(good);
  char *buf = malloc(n + 1);
  vd_error err;
  int decided = 0, refusals = 0;
  for (size_t k = 0; k <= n; k++) {
    memcpy(buf, good, k);
    if (vd_decide_json(e, buf, (long)k, D, &err) == 0)
      decided++;
    else
      refusals++;
  }
  CHECK(decided == 1); /* only the whole text is a request */
  const char subst[] = {'"', '{', '}', '[', ']', ',', ':', '0', 'x', '\\', '\0', '\x80'};
  for (size_t k = 0; k < n; k++)
    for (size_t s = 0; s < sizeof subst; s++) {
      memcpy(buf, good, n);
      buf[k] = subst[s];
      int rc = vd_decide_json(e, buf, (long)n, D, &err);
      if (rc == 0) {
        decided++;
        CHECK(vd_decision_source(D) != NULL);
      } else {
        refusals++;
        CHECK(err.message[0] != '\0');
      }
    }
  CHECK(decided > 1 && refusals > 100);
  free(buf);
}

int main(void) {
  D = vd_decision_new();
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_engine *e = NULL;
  vd_error err;
  int rc = vd_engine_open("tests/engine/bundles/gate", &o, &e, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  if (e) {
    wrong_shapes(e);
    malformed_json(e);
    unknown_point(e);
    bad_c_requests(e);
    mangled(e);
  }
  limits();
  vd_engine_close(e);
  vd_decision_free(D);
  TEST_END();
}
