/* test_record_equiv.c — the snapshot payload the writer thread formats from
 * the deciding thread's capture is byte for byte the payload an independent
 * oracle (record_oracle.h: a value tree built from the decision, written by
 * json_write) gives for the same decision.
 *
 * Two ways, for every request:
 *   1. in process: record_capture, the capture copied out of the decision
 *      (as the ring does), record_format into a buffer of its own; both for
 *      the request as JSON and the same request built in C (vd_decide);
 *   2. end to end: an engine recording into a scratch folder, the reference
 *      payload built beside each decision, then every record read back from
 *      the log and compared — so the log's format hook, the framing and the
 *      index fields are in the loop too.
 *
 * Requests: every .json in examples/requests and a few written here (whitespace,
 * escapes, non-ASCII, numbers with their own spelling), or a JSON Lines file
 * given with --requests (tests/snapshot/record_equiv.sh passes `verdict gen`
 * traffic), and a strategy written here whose lets hold every kind of value
 * (lists, maps, int keys, times, durations, bytes, NaN, Infinity, errors).
 * Requests the bundle refuses are skipped (they make no snapshot). */
#define _GNU_SOURCE
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "engine/engine.h"
#include "record_oracle.h"
#include "snapshot/snapshot.h"
#include "test.h"
#include "verdict.h"

#define POLICY "examples/policies"
#define NODE "equiv-node"

typedef struct reqs {
  char **text;
  size_t n, cap;
} reqs;

static void add(reqs *r, const char *s, size_t n) {
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 64;
    r->text = realloc(r->text, r->cap * sizeof *r->text);
    if (!r->text) abort();
  }
  r->text[r->n] = strndup(s, n);
  if (!r->text[r->n]) abort();
  r->n++;
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)sz + 1);
  if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
    free(b);
    b = NULL;
  }
  fclose(f);
  if (b) b[sz] = 0;
  *n = (size_t)sz;
  return b;
}

static void load_lines(reqs *r, const char *path) {
  size_t n;
  char *b = slurp(path, &n);
  CHECK_MSG(b != NULL, "cannot read %s", path);
  if (!b) return;
  for (char *p = b; *p;) {
    char *e = strchr(p, '\n');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l) add(r, p, l);
    p += l + (e ? 1 : 0);
  }
  free(b);
}

static void load_examples(reqs *r) {
  DIR *d = opendir("examples/requests");
  CHECK(d != NULL);
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    if (l < 6 || strcmp(de->d_name + l - 5, ".json")) continue;
    char path[4096];
    snprintf(path, sizeof path, "examples/requests/%s", de->d_name);
    size_t n;
    char *b = slurp(path, &n);
    if (b) add(r, b, n);
    free(b);
  }
  closedir(d);
  /* the copy must keep what the minifier keeps and drop what it drops */
  static const char *const extra[] = {
      "{ \"action\" : \"tool_call\",\n\t\"context\": {\"tool\": \"Bash\", \"input\": "
      "{\"command\": \"echo \\\"a  b\\\" \\\\\\\\ 'c'  \\u00e9\\n\"}, \"n\": 1.50e+1 } }",
      "{\"action\":\"payment\",\"key\":\"k \\\"1\\\"\",\"context\":{\"amount\":  12.000,"
      "\"currency\":\"EUR\",\"note\":\"caf\xc3\xa9 \xe2\x82\xac\",\"card\":{\"country\":\"FR\"}}}",
      "{\"action\":\"login\",\"candidates\":[\"allow\", \"deny\",\"mfa\"],\"context\":{}}",
  };
  for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) add(r, extra[i], strlen(extra[i]));
}

static vd_engine *open_engine(const char *policy, const char *snaps) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = ""; /* write nothing into the bundle */
  o.snapshots_dir = snaps;
  o.snapshot_durability = VD_DURABILITY_NONE;
  o.node = NODE;
  vd_engine *e = NULL;
  vd_error err;
  int rc = vd_engine_open(policy, &o, &e, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  return e;
}

/* Where a and b first differ, for the message. */
static void report(const char *what, const char *req, const char *a, size_t an, const char *b,
                   size_t bn) {
  size_t i = 0;
  while (i < an && i < bn && a[i] == b[i]) i++;
  size_t from = i > 40 ? i - 40 : 0;
  fprintf(stderr, "%s differs at byte %zu for %.200s\n  reference: ...%.*s\n  formatted: ...%.*s\n",
          what, i, req, (int)((an - from) < 120 ? an - from : 120), a + from,
          (int)((bn - from) < 120 ? bn - from : 120), b + from);
}

/* The payload of the decision d just made, both ways; 1 when they agree. */
static int compare(vd_decision *d, const record_input *in, const char *req) {
  const char *ref, *cap;
  size_t rn, cn;
  const char *id = "0193c0de-7a1b-7c3d-8e4f-0123456789ab";
  static arena oa; /* the oracle's: until the next compare */
  static int oa_init;
  if (!oa_init) arena_init(&oa, NULL, 0, 0);
  oa_init = 1;
  arena_reset(&oa);
  if (oracle_payload(&oa, d, in, id, NODE, &ref, &rn) != 0 ||
      record_capture(d, in, &cap, &cn) != 0) {
    CHECK_MSG(0, "no payload for %.200s", req);
    return 0;
  }
  int same = 1;
  /* Both ways the capture holds names: copied (a caller asked for the trace,
   * so the names are the decision's own) and by pointer (the engine's usual
   * case; here they point into the decision, which outlives the check). */
  for (int borrowed = 0; borrowed < 2; borrowed++) {
    if (borrowed) {
      d->trace_borrow = 1;
      int rc = record_capture(d, in, &cap, &cn);
      d->trace_borrow = 0;
      if (rc != 0) {
        CHECK_MSG(0, "no capture borrowing names for %.200s", req);
        return 0;
      }
    }
    char *copy = malloc(cn); /* out of the decision, as the ring holds it */
    memcpy(copy, cap, cn);
    arena a;
    arena_init(&a, NULL, 0, 0);
    json_buf b;
    json_buf_init(&b, &a);
    int rc = record_format(copy, cn, id, NODE, &b);
    int ok = rc == 0 && b.len == rn && memcmp(b.data, ref, rn) == 0 && b.data[b.len] == '\0';
    if (!ok)
      report(borrowed ? "the formatted payload (names by pointer)" : "the formatted payload", req,
             ref, rn, rc == 0 ? b.data : "", rc ? 0 : b.len);
    same &= ok;
    /* a capture cut short is refused, never read past its end */
    json_buf_init(&b, &a);
    CHECK(record_format(copy, cn - 1, id, NODE, &b) == VD_EINVAL);
    arena_free(&a);
    free(copy);
  }
  return same;
}

/* The same request built in C: action, candidates, key and context. */
static int decide_c(vd_engine *e, arena *a, const char *json, vd_decision *d, decide_request *req,
                    vd_request *cr) {
  value v;
  if (json_parse(a, json, strlen(json), NULL, &v, NULL) != 0 || v.kind != V_MAP) return -1;
  memset(cr, 0, sizeof *cr);
  const value *x = value_map_get(&v, "action", 6);
  if (!x || x->kind != V_STRING) return -1;
  cr->action = arena_strndup(a, x->s, x->n);
  if ((x = value_map_get(&v, "key", 3)) && x->kind == V_STRING)
    cr->key = arena_strndup(a, x->s, x->n);
  if ((x = value_map_get(&v, "candidates", 10)) && x->kind == V_LIST) {
    const char **c = arena_alloc(a, (x->n + 1) * sizeof *c);
    for (uint32_t i = 0; i < x->n; i++) {
      if (x->items[i].kind != V_STRING) return -1;
      c[i] = arena_strndup(a, x->items[i].s, x->items[i].n);
    }
    cr->candidates = c;
    cr->ncandidates = x->n;
  }
  if ((x = value_map_get(&v, "context", 7))) {
    json_buf b;
    json_buf_init(&b, a);
    json_buf_put(&b, " ", 1); /* a little whitespace for the minifier */
    if (json_write(&b, x, 0) != 0) return -1;
    cr->context_json = b.data;
    cr->context_len = (long)b.len;
  }
  vd_error err;
  if (vd_decide(e, cr, d, &err) != 0) return -1;
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  return request_from_c(&d->mem, cr, &lim, req, &err);
}

static void in_process(const char *policy, const reqs *r) {
  vd_engine *e = open_engine(policy, NULL);
  if (!e) return;
  vd_decision *d = vd_decision_new();
  vd_decision_set_trace(d, 1);
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  size_t decided = 0, same = 0, c_decided = 0, c_same = 0;
  arena a;
  arena_init(&a, NULL, 0, 0);
  for (size_t i = 0; i < r->n; i++) {
    const char *json = r->text[i];
    size_t n = strlen(json);
    vd_error err;
    if (vd_decide_json(e, json, (long)n, d, &err) == 0) {
      decide_request req;
      CHECK(request_parse_json(&d->mem, json, n, &lim, &req, &err) == 0);
      d->ns_render = 1234 + i; /* as recording sets it */
      record_input in = {.req = &req, .json = json, .json_len = n, .lim = &lim};
      decided++;
      same += compare(d, &in, json);
    }
    arena_reset(&a);
    decide_request req;
    vd_request cr;
    if (decide_c(e, &a, json, d, &req, &cr) == 0) {
      record_input in = {.req = &req, .creq = &cr, .lim = &lim};
      c_decided++;
      c_same += compare(d, &in, json);
    }
  }
  arena_free(&a);
  printf("in process: %zu/%zu JSON requests and %zu/%zu built in C formatted identically\n", same,
         decided, c_same, c_decided);
  CHECK(decided > 0 && same == decided);
  CHECK(c_decided > 0 && c_same == c_decided);
  vd_decision_free(d);
  vd_engine_close(e);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(p) : unlink(p);
}

typedef struct expect {
  char id[SNAPSHOT_ID_TEXT];
  char *payload;
  size_t len;
  int seen;
} expect;

static void end_to_end(const char *policy, const reqs *r) {
  char dir[256];
  test_tmpdir(dir, sizeof dir, "record-equiv");
  vd_engine *e = open_engine(policy, dir);
  if (!e) return;
  vd_decision *d = vd_decision_new();
  vd_decision_set_trace(d, 1); /* names copied: the reference can be built after the call */
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  expect *want = calloc(r->n, sizeof *want);
  size_t nwant = 0;
  for (size_t i = 0; i < r->n; i++) {
    const char *json = r->text[i];
    size_t n = strlen(json);
    vd_error err;
    if (vd_decide_json(e, json, (long)n, d, &err) != 0) continue;
    const char *id = vd_decision_snapshot_id(d);
    CHECK(id != NULL);
    if (!id) continue;
    decide_request req;
    CHECK(request_parse_json(&d->mem, json, n, &lim, &req, &err) == 0);
    record_input in = {.req = &req, .json = json, .json_len = n, .lim = &lim};
    const char *p;
    size_t pn;
    arena oa;
    arena_init(&oa, NULL, 0, 0);
    CHECK(oracle_payload(&oa, d, &in, id, NODE, &p, &pn) == 0);
    expect *w = &want[nwant++];
    snprintf(w->id, sizeof w->id, "%s", id);
    w->payload = strndup(p, pn);
    w->len = pn;
    arena_free(&oa);
  }
  vd_decision_free(d);
  vd_engine_close(e); /* drains the queue: everything is on disk */

  snapshot_reader *rd;
  char msg[SNAPSHOT_ERRLEN];
  CHECK(snapshot_reader_open(dir, NULL, &rd, msg, sizeof msg) == 0);
  snapshot_rec rec;
  size_t got = 0, same = 0, k = 0;
  while (snapshot_reader_next(rd, &rec) == 1) {
    char id[SNAPSHOT_ID_TEXT];
    snapshot_id_format(rec.id, id);
    got++;
    /* one thread: records come back in decision order */
    expect *w = k < nwant && strcmp(want[k].id, id) == 0 ? &want[k++] : NULL;
    CHECK_MSG(w != NULL, "record %s out of order or unexpected", id);
    if (!w) continue;
    if (rec.payload_len == w->len && memcmp(rec.payload, w->payload, w->len) == 0)
      same++;
    else
      report("the recorded payload", id, w->payload, w->len, rec.payload, rec.payload_len);
  }
  snapshot_reader_close(rd);
  printf("end to end: %zu of %zu decisions recorded, %zu identical to the reference\n", got, nwant,
         same);
  CHECK(nwant > 0 && got == nwant && same == nwant);
  for (size_t i = 0; i < nwant; i++) free(want[i].payload);
  free(want);
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A strategy whose lets hold every kind of value (lists, maps, int keys,
 * timestamps, durations, bytes, uint, NaN, Infinity, errors) and whose
 * trace has an error and a name that needs escaping. */
static const char kinds_yaml[] =
    "strategy: kinds\n"
    "decision_points: [kinds]\n"
    "actions:\n  allow: true\n  deny: false\n"
    "let:\n"
    "  a_list: '[1, 2.5, \"x\\\"y\", true, null, [context.n]]'\n"
    "  a_map: '{\"k\": context.n, \"s\": \"caf\\u00e9\\n\", \"in\": {\"deep\": [1, {\"z\": "
    "false}]}}'\n"
    "  int_keys: '{1: \"one\", 2: \"two\"}'\n"
    "  a_time: request.time\n"
    "  a_dur: duration(\"1.5s\")\n"
    "  a_uint: 7u\n"
    "  a_bytes: b\"abc\"\n"
    "  a_nan: double(\"NaN\")\n"
    "  a_inf: 1.0 / 0.0\n"
    "  a_err: 1 / context.zero\n"
    "  a_type: type(1)\n"
    "  big: 9223372036854775807\n"
    "  neg: -42\n"
    "  half: double(context.n) / 2.0\n"
    "default: allow\n"
    "rules:\n"
    "  - name: touch-all\n"
    "    if: size(a_list) > 0 && size(a_map) > 0 && size(int_keys) > 0 && a_time > "
    "timestamp(\"2000-01-01T00:00:00Z\") && a_dur > duration(\"1s\") && a_uint > 0u && "
    "size(a_bytes) > 0 && a_nan != a_nan && a_inf > 0.0 && big > neg && half > 100.0 && a_type "
    "== int\n"
    "    action: deny\n"
    "  - name: \"quote\\\"rule\"\n"
    "    if: context.n > 1000\n"
    "    action: deny\n"
    "  - name: errs\n"
    "    if: a_err > 0\n"
    "    action: deny\n"
    "    reason: never\n"
    "  - name: fine\n"
    "    if: true\n"
    "    action: allow\n";

static reqs requests;

static void test_in_process(void) { in_process(POLICY, &requests); }
static void test_end_to_end(void) { end_to_end(POLICY, &requests); }

static void test_kinds(void) {
  char dir[256];
  test_tmpdir(dir, sizeof dir, "record-kinds");
  char path[4096];
  snprintf(path, sizeof path, "%s/kinds.yaml", dir);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(kinds_yaml, f);
  fclose(f);
  reqs r = {0};
  static const char *const k[] = {
      "{\"action\":\"kinds\",\"context\":{\"n\":3,\"zero\":0}}",
      "{\"action\":\"kinds\",\"context\":{\"n\":300,\"zero\":1}}",
      ("{\"action\":\"kinds\",\"candidates\":[\"allow\",\"deny\"],\"key\":\"k\\u00e9\","
       "\"context\":{\"n\":2000,\"zero\":1}}"),
  };
  for (size_t i = 0; i < sizeof k / sizeof *k; i++) add(&r, k[i], strlen(k[i]));
  in_process(dir, &r);
  end_to_end(dir, &r);
  for (size_t i = 0; i < r.n; i++) free(r.text[i]);
  free(r.text);
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--requests") == 0) {
    load_lines(&requests, argv[2]);
  } else if (argc != 1) {
    fprintf(stderr, "usage: engine_test_record_equiv [--requests FILE.jsonl]\n");
    return 2;
  } else {
    load_examples(&requests);
  }
  TEST_RUN(test_in_process);
  TEST_RUN(test_end_to_end);
  TEST_RUN(test_kinds);
  for (size_t i = 0; i < requests.n; i++) free(requests.text[i]);
  free(requests.text);
  TEST_END();
}
