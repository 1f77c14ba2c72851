/* bench_json.c — verdict's JSON reader and writer against cJSON, in the same
 * run, on the two texts of the hot path: a ~600-byte decision request
 * (parse) and a ~300-byte answer (serialize).
 *
 *   parse    verdict: json_parse into an arena (reset every iteration) and
 *            walk every field; cJSON: cJSON_ParseWithLength, walk every
 *            field, cJSON_Delete.
 *   write    verdict: json_write of a prebuilt value into an arena-backed
 *            buffer (reset every iteration); cJSON: build the tree, print
 *            it unformatted, free both (what producing an answer costs
 *            with cJSON); and cJSON printing a prebuilt tree into a
 *            preallocated buffer (its printer alone).
 *
 * Method: ROUNDS rounds; in each, every contender runs BATCHES batches of
 * BATCH operations, contenders interleaved, so they share the machine's
 * noise. Each batch gives one ns/op sample; the report is the median and
 * the 99th percentile of those samples, and the ratio of the medians.
 *
 * usage: bench-json [rounds]   (default 5) */
#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/arena.h"
#include "core/json.h"
#include "core/value.h"

#define BATCHES 200
#define BATCH 100

static const char REQUEST[] =
    "{\"action\":\"tool_call\",\"candidates\":[\"run_test\",\"skip_test\",\"ask_user\"],"
    "\"context\":{\"repo\":\"myapp\",\"branch\":\"feature/x\",\"confidence_floor\":0.8,"
    "\"user\":\"ada@example.com\",\"team\":\"platform\",\"env\":\"staging\",\"country\":\"NL\","
    "\"path\":\"/api/v1/tests/run\",\"method\":\"POST\",\"files_changed\":12,"
    "\"lines_added\":348,\"lines_removed\":97,\"test_count\":1532,\"flaky_ratio\":0.0125,"
    "\"last_run_ms\":84213,\"is_draft\":false,\"has_migrations\":true,\"ci\":true,"
    "\"retries\":0,\"labels\":[\"backend\",\"needs-review\",\"tests\"],"
    "\"commit\":\"9fceb02d0ae598e95dc970b74767f19372d61af8\",\"author_tenure_days\":812,"
    "\"risk_score\":0.37,\"tz\":\"Europe/Amsterdam\"}}";

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Something the compiler cannot see through, fed by every walk. */
static volatile uint64_t sink;

/* ---- verdict ---- */

static uint64_t walk_value(const value *v) {
  switch (v->kind) {
    case V_STRING:
      return v->n + (unsigned char)(v->n ? v->s[0] : 0);
    case V_INT:
      return (uint64_t)v->i;
    case V_UINT:
      return v->u;
    case V_DOUBLE:
      return (uint64_t)(v->d * 1000);
    case V_BOOL:
      return v->b;
    case V_LIST: {
      uint64_t h = v->n;
      for (uint32_t i = 0; i < v->n; i++) h += walk_value(&v->items[i]);
      return h;
    }
    case V_MAP: {
      uint64_t h = v->n;
      for (uint32_t i = 0; i < v->n; i++) h += v->entries[i].key.n + walk_value(&v->entries[i].val);
      return h;
    }
    default:
      return 1;
  }
}

typedef struct ctx {
  arena a;
  value answer;
  cJSON *answer_tree;
  char print_buf[1024];
} ctx;

static void verdict_parse(ctx *c) {
  value v;
  json_error err;
  arena_reset(&c->a);
  if (json_parse(&c->a, REQUEST, sizeof REQUEST - 1, NULL, &v, &err) != 0) {
    fprintf(stderr, "bench-json: verdict failed to parse the request: %s\n", err.message);
    exit(1);
  }
  sink += walk_value(&v);
}

static void verdict_write(ctx *c) {
  arena_reset(&c->a);
  json_buf b;
  json_buf_init(&b, &c->a);
  if (json_write(&b, &c->answer, 0) != 0) exit(1);
  sink += b.len;
}

/* ---- cJSON ---- */

static uint64_t walk_cjson(const cJSON *j) {
  if (cJSON_IsString(j)) return strlen(j->valuestring) + (unsigned char)j->valuestring[0];
  if (cJSON_IsNumber(j)) return (uint64_t)(j->valuedouble * 1000);
  if (cJSON_IsBool(j)) return cJSON_IsTrue(j);
  if (cJSON_IsArray(j) || cJSON_IsObject(j)) {
    uint64_t h = 0;
    for (const cJSON *c = j->child; c; c = c->next)
      h += 1 + (c->string ? strlen(c->string) : 0) + walk_cjson(c);
    return h;
  }
  return 1;
}

static void cjson_parse(ctx *c) {
  (void)c;
  cJSON *j = cJSON_ParseWithLength(REQUEST, sizeof REQUEST - 1);
  if (!j) {
    fprintf(stderr, "bench-json: cJSON failed to parse the request\n");
    exit(1);
  }
  sink += walk_cjson(j);
  cJSON_Delete(j);
}

static cJSON *cjson_build_answer(void) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "action", "run_test");
  cJSON_AddBoolToObject(o, "allowed", 1);
  cJSON_AddNumberToObject(o, "confidence", 0.93);
  cJSON_AddStringToObject(o, "source", "rule");
  cJSON *reason = cJSON_AddObjectToObject(o, "reason");
  cJSON_AddStringToObject(reason, "rule", "tests-on-feature-branches");
  cJSON *m = cJSON_AddArrayToObject(reason, "matched");
  cJSON_AddItemToArray(m, cJSON_CreateString("branch"));
  cJSON_AddItemToArray(m, cJSON_CreateString("ci"));
  cJSON_AddStringToObject(o, "snapshot_id", "0193c0de-7b1a-7cc3-9a41-4f2e8d1c0b55");
  cJSON_AddStringToObject(
      o, "policy_version",
      "sha256:3f1b9c0e7d52a4b8c6e1f09d2a7b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d");
  cJSON_AddNullToObject(o, "model_version");
  cJSON_AddNumberToObject(o, "latency_us", 3);
  return o;
}

static void cjson_write(ctx *c) {
  (void)c;
  cJSON *o = cjson_build_answer();
  char *s = cJSON_PrintUnformatted(o);
  sink += strlen(s);
  cJSON_free(s);
  cJSON_Delete(o);
}

static void cjson_print_only(ctx *c) {
  if (!cJSON_PrintPreallocated(c->answer_tree, c->print_buf, sizeof c->print_buf, 0)) exit(1);
  sink += (unsigned char)c->print_buf[0];
}

/* ---- the answer as verdict values ---- */

static value verdict_answer(arena *a) {
  static const char *const keys[] = {"action",         "allowed",       "confidence",
                                     "source",         "reason",        "snapshot_id",
                                     "policy_version", "model_version", "latency_us"};
  map_entry *e = arena_alloc(a, 9 * sizeof *e);
  map_entry *r = arena_alloc(a, 2 * sizeof *r);
  value *matched = arena_alloc(a, 2 * sizeof *matched);
  matched[0] = value_str("branch", 6);
  matched[1] = value_str("ci", 2);
  r[0].key = value_str("rule", 4);
  r[0].val = value_str("tests-on-feature-branches", 25);
  r[1].key = value_str("matched", 7);
  r[1].val = value_list(matched, 2);
  const char *pv = "sha256:3f1b9c0e7d52a4b8c6e1f09d2a7b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d";
  value vals[9] = {value_str("run_test", 8),
                   value_bool(true),
                   value_double(0.93),
                   value_str("rule", 4),
                   value_map(r, 2),
                   value_str("0193c0de-7b1a-7cc3-9a41-4f2e8d1c0b55", 36),
                   value_str(pv, (uint32_t)strlen(pv)),
                   value_null(),
                   value_int(3)};
  for (int i = 0; i < 9; i++) {
    e[i].key = value_str(keys[i], (uint32_t)strlen(keys[i]));
    e[i].val = vals[i];
  }
  return value_map(e, 9);
}

/* ---- measurement ---- */

typedef struct contender {
  const char *name;
  void (*op)(ctx *);
  double *samples;
  size_t n;
} contender;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void run_batches(contender *k, ctx *c) {
  for (int b = 0; b < BATCHES; b++) {
    uint64_t t0 = now_ns();
    for (int i = 0; i < BATCH; i++) k->op(c);
    k->samples[k->n++] = (double)(now_ns() - t0) / BATCH;
  }
}

static double pct(contender *k, double p) {
  qsort(k->samples, k->n, sizeof(double), cmp_double);
  size_t i = (size_t)(p * (double)(k->n - 1) + 0.5);
  return k->samples[i];
}

static void compare(const char *title, contender *ks, int nk, int rounds, ctx *c) {
  for (int i = 0; i < nk; i++) {
    ks[i].samples = malloc((size_t)rounds * BATCHES * sizeof(double));
    ks[i].n = 0;
    for (int w = 0; w < 1000; w++) ks[i].op(c); /* warm up */
  }
  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < nk; i++) run_batches(&ks[i], c);
  printf("%s\n", title);
  double base = 0;
  for (int i = 0; i < nk; i++) {
    double med = pct(&ks[i], 0.5), p99 = pct(&ks[i], 0.99);
    if (i == 0) base = med;
    printf("  %-34s median %7.0f ns/op   p99 %7.0f ns/op   %5.2fx verdict\n", ks[i].name, med, p99,
           med / base);
    free(ks[i].samples);
  }
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  if (rounds < 1) rounds = 1;
  ctx *c = calloc(1, sizeof *c);
  arena_init(&c->a, NULL, 0, 0);
  arena answer_arena;
  arena_init(&answer_arena, NULL, 0, 0);
  c->answer = verdict_answer(&answer_arena);
  c->answer_tree = cjson_build_answer();

  /* Both writers must produce the same text, or the comparison is moot. */
  json_buf b;
  json_buf_init(&b, NULL);
  json_write(&b, &c->answer, 0);
  char *cj = cJSON_PrintUnformatted(c->answer_tree);
  if (strcmp(b.data, cj) != 0) {
    fprintf(stderr, "bench-json: the answers differ:\n  verdict %s\n  cJSON   %s\n", b.data, cj);
    return 1;
  }

  printf("bench-json: %d rounds x %d batches x %d ops; cJSON %s\n", rounds, BATCHES, BATCH,
         cJSON_Version());
  printf("request %zu bytes, answer %zu bytes\n", sizeof REQUEST - 1, b.len);
  cJSON_free(cj);
  json_buf_free(&b);

  contender parse[] = {{"verdict json_parse + walk", verdict_parse, NULL, 0},
                       {"cJSON parse + walk + delete", cjson_parse, NULL, 0}};
  compare("parse the request:", parse, 2, rounds, c);
  contender write[] = {{"verdict json_write", verdict_write, NULL, 0},
                       {"cJSON build + print + free", cjson_write, NULL, 0},
                       {"cJSON print prebuilt (prealloc)", cjson_print_only, NULL, 0}};
  compare("serialize the answer:", write, 3, rounds, c);

  cJSON_Delete(c->answer_tree);
  arena_free(&answer_arena);
  arena_free(&c->a);
  free(c);
  return 0;
}
