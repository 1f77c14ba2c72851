/* test_builder.c — a context built from values (vd_builder, vd_decide_built)
 * decides as the same context sent as JSON: the same answers and traces,
 * the same snapshot (its request written as the JSON text the caller would
 * have sent), the same kinds of values; misuse, bad strings, NaN, nesting,
 * duplicate keys and size are refused with the place named, and a refused
 * event fails the builder until it is reset. */
#define _GNU_SOURCE
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "engine/engine.h"
#include "test.h"
#include "verdict.h"

static vd_decision *D;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Feeds v to the builder as events, as a binding walks its objects. */
static int walk(vd_builder *b, const value *v) {
  int rc;
  switch (v->kind) {
    case V_NULL:
      return vd_build_null(b);
    case V_BOOL:
      return vd_build_bool(b, v->b);
    case V_INT:
      return vd_build_int(b, v->i);
    case V_UINT:
      return vd_build_uint(b, v->u);
    case V_DOUBLE:
      return vd_build_double(b, v->d);
    case V_STRING:
      return vd_build_string(b, v->s, v->n);
    case V_LIST:
      if ((rc = vd_build_list_begin(b))) return rc;
      for (uint32_t i = 0; i < v->n; i++)
        if ((rc = walk(b, &v->items[i]))) return rc;
      return vd_build_list_end(b);
    case V_MAP:
      if ((rc = vd_build_map_begin(b))) return rc;
      for (uint32_t i = 0; i < v->n; i++) {
        const value *k = &v->entries[i].key;
        if ((rc = vd_build_key(b, k->s, k->n)) || (rc = walk(b, &v->entries[i].val))) return rc;
      }
      return vd_build_map_end(b);
    default:
      return -100;
  }
}

/* The context JSON text parsed and walked into b (reset first). */
static int build_json(vd_builder *b, const char *json) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  value v;
  json_error je;
  int rc = json_parse(&a, json, strlen(json), NULL, &v, &je);
  CHECK_MSG(rc == 0, "%s: %s", json, je.message);
  vd_builder_reset(b);
  if (rc == 0) rc = walk(b, &v);
  arena_free(&a);
  return rc;
}

/* The decision's JSON with what differs between two calls cut out: the
 * latency, the trace's timings and the snapshot id. */
static char *stable(vd_decision *d) {
  char *s = NULL;
  CHECK(vd_decision_json(d, VD_JSON_TRACE, &s) == 0);
  if (!s) return strdup("");
  static const char *cut[] = {"\"latency_us\":", "\"ns\":{", "\"snapshot_id\":"};
  for (size_t k = 0; k < sizeof cut / sizeof *cut; k++) {
    char *p = strstr(s, cut[k]);
    if (!p) continue;
    char *q = p + strlen(cut[k]);
    if (q[-1] == '{')
      q = strchr(q, '}') + 1; /* "ns" holds numbers only */
    else
      q += strcspn(q, ",}");
    if (*q == ',')
      q++;
    else if (p > s && p[-1] == ',')
      p--;
    memmove(p, q, strlen(q) + 1);
  }
  return s;
}

static const char *CONTEXTS[] = {
    "{}",
    "{\"path\":\"/\",\"headers\":{\"user-agent\":\"SQLMap/1.7\"},\"body_size\":1,"
    "\"env\":{\"country\":\"US\"}}",
    "{\"path\":\"/admin/x\",\"headers\":{\"user-agent\":\"Firefox\"},\"body_size\":1,"
    "\"env\":{\"country\":\"US\"}}",
    "{\"path\":\"/api/v1\",\"headers\":{\"user-agent\":\"x\"},\"body_size\":12.5,"
    "\"env\":{\"country\":\"CN\"}}",
    "{\"path\":\"/api/v1\",\"headers\":{\"user-agent\":\"x\"},\"body_size\":18446744073709551615,"
    "\"env\":{\"country\":\"CN\"}}",
    "{\"path\":\"/p\",\"headers\":{\"user-agent\":\"\\u00e9t\\u00e9 \\\"q\\\"\\n\"},"
    "\"body_size\":-3,\"env\":{\"country\":\"DE\"},\"tags\":[1,2.0,true,null,[],{}]}",
    "{\"path\":\"/api/\",\"body_size\":1}",
    "{\"probe\":1,\"path\":\"/\"}",
};

/* Each context decides alike as JSON and as values, trace and all. */
static void same_decisions(vd_engine *e) {
  vd_builder *b = vd_builder_new();
  vd_decision_set_trace(D, 1);
  const char *const cands[] = {"route_eu", "allow", "block"};
  for (size_t i = 0; i < sizeof CONTEXTS / sizeof *CONTEXTS; i++)
    for (int with_cands = 0; with_cands < 2; with_cands++) {
      vd_request r = {.action = with_cands ? "gate" : "http_request",
                      .candidates = with_cands ? cands : NULL,
                      .ncandidates = with_cands ? 3 : 0,
                      .key = with_cands ? "vip-1" : NULL};
      vd_error err;
      r.context_json = CONTEXTS[i];
      r.context_len = -1;
      CHECK_MSG(vd_decide(e, &r, D, &err) == 0, "%s: %s", CONTEXTS[i], err.message);
      char *want = stable(D);
      r.context_json = NULL;
      CHECK(build_json(b, CONTEXTS[i]) == 0);
      CHECK_MSG(vd_decide_built(e, &r, b, D, &err) == 0, "%s: %s", CONTEXTS[i], err.message);
      char *got = stable(D);
      CHECK_MSG(strcmp(got, want) == 0, "%s:\n got %s\nwant %s", CONTEXTS[i], got, want);
      free(want);
      free(got);
    }
  vd_decision_set_trace(D, 0);
  vd_builder_free(b);
}

/* The values are those json_parse makes of the same text. */
static void same_values(void) {
  vd_builder *b = vd_builder_new();
  vd_build_map_begin(b);
  vd_build_key(b, "small", 5);
  vd_build_uint(b, 5);
  vd_build_key(b, "big", 3);
  vd_build_uint(b, UINT64_MAX);
  vd_build_key(b, "neg", 3);
  vd_build_int(b, INT64_MIN);
  vd_build_key(b, "d", 1);
  vd_build_double(b, 2.0);
  vd_build_key(b, "s", 1);
  vd_build_string(b, "caf\xc3\xa9", 5);
  vd_build_key(b, "a", 1);
  vd_build_string(b, "plain", 5);
  CHECK(vd_build_map_end(b) == 0);
  value root;
  size_t bytes = 0;
  vd_error err;
  CHECK(builder_context(b, &root, &bytes, &err) == 0);
  CHECK(root.kind == V_MAP && root.n == 6);
  if (root.kind == V_MAP && root.n == 6) {
    CHECK(root.entries[0].val.kind == V_INT && root.entries[0].val.i == 5);
    CHECK(root.entries[1].val.kind == V_UINT && root.entries[1].val.u == UINT64_MAX);
    CHECK(root.entries[2].val.kind == V_INT && root.entries[2].val.i == INT64_MIN);
    CHECK(root.entries[3].val.kind == V_DOUBLE && root.entries[3].val.d == 2.0);
    CHECK(root.entries[4].val.kind == V_STRING && !(root.entries[4].val.flags & VF_ASCII));
    CHECK(root.entries[5].val.kind == V_STRING && (root.entries[5].val.flags & VF_ASCII));
    CHECK(root.entries[0].key.flags & VF_ASCII);
    /* its size as compact JSON: exact but for the double, counted at 24 */
    arena a;
    arena_init(&a, NULL, 0, 0);
    json_buf jb;
    json_buf_init(&jb, &a);
    CHECK(json_write(&jb, &root, 0) == 0);
    CHECK_MSG(bytes == jb.len - 3 + 24, "counted %zu, written %zu: %s", bytes, jb.len, jb.data);
    arena_free(&a);
  }
  vd_builder_free(b);
}

/* Expects the last event to have been refused with code, the builder's
 * error at path saying `says`, and the builder failed. */
static void refused(vd_builder *b, int rc, int code, const char *path, const char *says) {
  vd_error err;
  CHECK_MSG(rc == code, "got %d, want %d", rc, code);
  CHECK(vd_builder_error(b, &err) == code && err.code == code);
  CHECK_MSG(strcmp(err.path, path) == 0, "path %s, want %s", err.path, path);
  CHECK_MSG(strstr(err.message, says) != NULL, "message \"%s\" lacks \"%s\"", err.message, says);
  CHECK(vd_build_null(b) == code); /* failed until reset */
  vd_builder_reset(b);
  CHECK(vd_builder_error(b, &err) == 0);
}

static void misuse(void) {
  vd_builder *b = vd_builder_new();
  refused(b, vd_build_key(b, "a", 1), VD_EREQUEST, "$", "a key outside a map");
  vd_build_map_begin(b);
  refused(b, vd_build_int(b, 1), VD_EREQUEST, "$", "where a key is due");
  vd_build_map_begin(b);
  vd_build_key(b, "a", 1);
  refused(b, vd_build_key(b, "b", 1), VD_EREQUEST, "$.a", "the value of the key before it");
  vd_build_map_begin(b);
  vd_build_key(b, "a", 1);
  refused(b, vd_build_map_end(b), VD_EREQUEST, "$.a", "value of this key is due");
  refused(b, vd_build_map_end(b), VD_EREQUEST, "$", "no map open");
  vd_build_map_begin(b);
  vd_build_key(b, "xs", 2);
  vd_build_list_begin(b);
  vd_build_int(b, 1);
  CHECK(strcmp(vd_builder_path(b), "$.xs[1]") == 0);
  refused(b, vd_build_map_end(b), VD_EREQUEST, "$.xs", "where a list is open");
  vd_build_map_begin(b);
  refused(b, vd_build_key(b, "x\xff", 2), VD_EREQUEST, "$", "the key is not valid UTF-8 (byte 1)");
  vd_build_map_begin(b);
  vd_build_key(b, "ua", 2);
  refused(b, vd_build_string(b, "\xc3(", 2), VD_EREQUEST, "$.ua", "not valid UTF-8 (byte 0)");
  vd_build_map_begin(b);
  vd_build_key(b, "a b", 3);
  vd_build_list_begin(b);
  refused(b, vd_build_double(b, NAN), VD_EREQUEST, "$[\"a b\"][0]", "NaN is not a JSON number");
  vd_build_map_begin(b);
  vd_build_key(b, "x", 1);
  refused(b, vd_build_double(b, -INFINITY), VD_EREQUEST, "$.x", "-Infinity");
  vd_build_map_begin(b);
  vd_build_key(b, "k", 1);
  vd_build_int(b, 1);
  vd_build_key(b, "k", 1);
  vd_build_int(b, 2);
  refused(b, vd_build_map_end(b), VD_EREQUEST, "$.k", "duplicate key \"k\"");
  /* a large map goes through the hashed check */
  vd_build_map_begin(b);
  char key[16];
  for (int i = 0; i < 300; i++) {
    int n = snprintf(key, sizeof key, "k%d", i % 250);
    vd_build_key(b, key, (size_t)n);
    vd_build_int(b, i);
  }
  refused(b, vd_build_map_end(b), VD_EREQUEST, "$.k0", "entry 250 repeats entry 0");
  vd_build_map_begin(b);
  for (int i = 0; i < 300; i++) {
    int n = snprintf(key, sizeof key, "k%d", i);
    vd_build_key(b, key, (size_t)n);
    vd_build_int(b, i);
  }
  CHECK(vd_build_map_end(b) == 0);
  refused(b, vd_build_map_begin(b), VD_EREQUEST, "$", "after the complete value");
  vd_build_map_begin(b);
  vd_build_key(b, "s", 1);
  refused(b, vd_build_string(b, NULL, 3), VD_EREQUEST, "$.s", "NULL with a length of 3");
  CHECK(vd_build_string(NULL, "a", 1) == VD_EINVAL && vd_build_map_end(NULL) == VD_EINVAL);
  CHECK(strcmp(vd_builder_path(b), "$") == 0);
  vd_builder_free(b);
  vd_builder_free(NULL);
  vd_builder_reset(NULL);
}

/* 511 levels (with the request around it, the 512 a JSON request may
 * have); one more is over the limit. */
static void depth(void) {
  vd_builder *b = vd_builder_new();
  vd_build_map_begin(b);
  vd_build_key(b, "a", 1);
  for (int i = 1; i < 511; i++) CHECK(vd_build_list_begin(b) == 0);
  int rc = vd_build_list_begin(b);
  CHECK(rc == VD_ELIMIT);
  vd_error err;
  CHECK(vd_builder_error(b, &err) == VD_ELIMIT && strstr(err.message, "511 levels"));
  CHECK(strncmp(err.path, "$.a[0][0]", 9) == 0);
  vd_builder_reset(b);
  vd_build_map_begin(b);
  vd_build_key(b, "a", 1);
  for (int i = 1; i < 511; i++) vd_build_list_begin(b);
  for (int i = 1; i < 511; i++) CHECK(vd_build_list_end(b) == 0);
  CHECK(vd_build_map_end(b) == 0);
  CHECK(vd_builder_error(b, &err) == 0);
  vd_builder_free(b);
}

static void decide_refusals(vd_engine *e) {
  vd_builder *b = vd_builder_new();
  vd_request r = {.action = "gate"};
  vd_error err;
  CHECK(vd_decide_built(e, &r, b, D, &err) == VD_EREQUEST && strcmp(err.path, "$.context") == 0);
  CHECK(strstr(err.message, "holds nothing") != NULL);
  vd_build_map_begin(b);
  CHECK(vd_decide_built(e, &r, b, D, &err) == VD_EREQUEST && strstr(err.message, "not complete"));
  vd_builder_reset(b);
  vd_build_list_begin(b);
  vd_build_list_end(b);
  CHECK(vd_decide_built(e, &r, b, D, &err) == VD_EREQUEST &&
        strstr(err.message, "$.context must be an object") && strstr(err.message, "an array"));
  vd_builder_reset(b);
  vd_build_map_begin(b);
  vd_build_key(b, "env", 3);
  vd_build_map_begin(b);
  vd_build_key(b, "country", 7);
  vd_build_string(b, "\xff", 1);
  CHECK(vd_decide_built(e, &r, b, D, &err) == VD_EREQUEST);
  CHECK_STR(err.path, "$.context.env.country");
  CHECK(strncmp(err.message, "$.context.env.country: the string is not valid UTF-8", 52) == 0);
  CHECK(vd_decision_action(D) == NULL); /* a refused request leaves no decision */
  vd_builder_reset(b);
  vd_build_map_begin(b);
  vd_build_map_end(b);
  r.context_json = "{}";
  CHECK(vd_decide_built(e, &r, b, D, &err) == VD_EINVAL && strstr(err.message, "context_json"));
  r.context_json = NULL;
  r.action = "";
  CHECK(vd_decide_built(e, &r, b, D, &err) == VD_EREQUEST && strcmp(err.path, "$.action") == 0);
  r.action = "nope";
  CHECK(vd_decide_built(e, &r, b, D, &err) == VD_ENOTFOUND);
  r.action = "gate";
  CHECK(vd_decide_built(e, &r, NULL, D, &err) == VD_EINVAL);
  CHECK(vd_decide_built(e, &r, b, D, &err) == 0 && vd_decision_source(D) != NULL);
  vd_builder_free(b);
}

/* max_request_bytes holds a built context as it holds the JSON text. */
static void size_limit(void) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  o.max_request_bytes = 4096;
  vd_engine *e = NULL;
  vd_error err;
  CHECK(vd_engine_open("tests/engine/bundles/gate", &o, &e, &err) == 0);
  if (!e) return;
  vd_builder *b = vd_builder_new();
  char big[5000];
  memset(big, 'x', sizeof big);
  vd_request r = {.action = "gate"};
  vd_build_map_begin(b);
  vd_build_key(b, "path", 4);
  vd_build_string(b, big, 3000);
  vd_build_map_end(b);
  CHECK(vd_decide_built(e, &r, b, D, &err) == 0);
  vd_builder_reset(b);
  vd_build_map_begin(b);
  vd_build_key(b, "path", 4);
  vd_build_string(b, big, sizeof big);
  vd_build_map_end(b);
  CHECK(vd_decide_built(e, &r, b, D, &err) == VD_ELIMIT &&
        strstr(err.message, "max_request_bytes"));
  /* escapes count: 1000 quotes are 2000 bytes of JSON */
  vd_builder_reset(b);
  memset(big, '"', 2100);
  vd_build_map_begin(b);
  vd_build_key(b, "path", 4);
  vd_build_string(b, big, 2100);
  vd_build_map_end(b);
  CHECK(vd_decide_built(e, &r, b, D, &err) == VD_ELIMIT);
  vd_builder_free(b);
  vd_engine_close(e);
}

/* The snapshot of a built decision holds the request as the JSON text the
 * caller would have sent, and the same lets as the JSON decision's. */
static void snapshots(void) {
  char dir[512];
  test_tmpdir(dir, sizeof dir, "builder");
  char store[600];
  snprintf(store, sizeof store, "%s/store", dir);
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.snapshots_dir = dir;
  o.store_dir = store; /* never the bundle's own .verdict: tests leave the tree as it was */
  o.snapshot_durability = VD_DURABILITY_ALWAYS;
  vd_engine *e = NULL;
  vd_error err;
  CHECK_MSG(vd_engine_open("tests/engine/bundles/gate", &o, &e, &err) == 0, "%s", err.message);
  if (!e) return;
  vd_builder *b = vd_builder_new();
  const char *ctx = CONTEXTS[5];
  const char *const cands[] = {"allow", "block"};
  vd_request r = {.action = "gate", .candidates = cands, .ncandidates = 2, .key = "k\"1"};
  char id[2][40];
  r.context_json = ctx;
  r.context_len = -1;
  CHECK(vd_decide(e, &r, D, &err) == 0);
  snprintf(id[0], sizeof id[0], "%s", vd_decision_snapshot_id(D));
  r.context_json = NULL;
  CHECK(build_json(b, ctx) == 0);
  CHECK(vd_decide_built(e, &r, b, D, &err) == 0);
  CHECK(vd_decision_snapshot_id(D) != NULL);
  snprintf(id[1], sizeof id[1], "%s", vd_decision_snapshot_id(D) ? vd_decision_snapshot_id(D) : "");
  vd_builder_reset(b); /* the snapshot does not need the builder any more */
  vd_engine_close(e);
  char *p[2] = {NULL, NULL};
  size_t len;
  for (int i = 0; i < 2; i++)
    CHECK_MSG(vd_snapshot_read(dir, id[i], -1, &p[i], &len, &err) == 0, "%s", err.message);
  if (p[0] && p[1]) {
    const char *want =
        "\"request\":{\"action\":\"gate\",\"candidates\":[\"allow\",\"block\"],"
        "\"context\":{\"path\":\"/p\",\"headers\":{\"user-agent\":"
        "\"\xc3\xa9t\xc3\xa9 \\\"q\\\"\\n\"},\"body_size\":-3,\"env\":{"
        "\"country\":\"DE\"},\"tags\":[1,2.0,true,null,[],{}]},\"key\":\"k\\\"1\"}";
    CHECK_MSG(strstr(p[1], want) != NULL, "built snapshot: %s", p[1]);
    /* the JSON one holds the caller's text as it came: the escapes \u00e9 */
    CHECK_MSG(strstr(p[0], "\"tags\":[1,2.0,true,null,[],{}]},\"key\":\"k\\\"1\"}") != NULL, "%s",
              p[0]);
    const char *l0 = strstr(p[0], "\"lets\":"), *l1 = strstr(p[1], "\"lets\":");
    CHECK(l0 && l1);
    if (l0 && l1) {
      size_t n0 = strcspn(l0, "}"), n1 = strcspn(l1, "}");
      CHECK_MSG(n0 == n1 && memcmp(l0, l1, n0) == 0, "%.*s vs %.*s", (int)n0, l0, (int)n1, l1);
    }
  }
  free(p[0]);
  free(p[1]);
  vd_builder_free(b);
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
  D = vd_decision_new();
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_engine *e = NULL;
  vd_error err;
  CHECK_MSG(vd_engine_open("tests/engine/bundles/gate", &o, &e, &err) == 0, "%s", err.message);
  if (e) {
    same_decisions(e);
    decide_refusals(e);
  }
  vd_engine_close(e);
  same_values();
  misuse();
  depth();
  size_limit();
  snapshots();
  vd_decision_free(D);
  TEST_END();
}
