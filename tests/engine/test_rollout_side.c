/* test_rollout_side.c — a rollout's second engine and the snapshot's side
 * members (docs/snapshots.md, "Shadow and canary"): an engine opened beside
 * another records into its log and keeps its versions in its store; a
 * decision made with a side writes "side", "completes" and "rollout" after
 * "inputs", and one made with no side strings writes none of them (the
 * payload ends where it always did); the given clock is request.time and
 * the record's time; an off-path decision charges no counter; a refusal
 * off the answer's path is recorded in its error form ("error"), one on it
 * nowhere. */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "engine/service.h"
#include "snapshot/snapshot.h"
#include "test.h"
#include "verdict.h"

#define GATE "tests/engine/bundles/gate"
#define REQ                                                                               \
  "{\"action\":\"gate\",\"key\":\"k-1\",\"context\":{\"path\":\"/\",\"headers\":{\"user-" \
  "agent\":\"sqlmap/1.7\"},\"body_size\":1,\"env\":{\"country\":\"US\"}}}"

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static const value *get(const value *m, const char *k) {
  return m && m->kind == V_MAP ? value_map_get(m, k, strlen(k)) : NULL;
}

static int is_str(const value *v, const char *want) {
  return v && v->kind == V_STRING && v->n == strlen(want) && memcmp(v->s, want, v->n) == 0;
}

/* The payload of snapshot id, parsed into a (and its text into *raw). */
static int read_payload_once(const char *dir, const char *id, arena *a, value *out, char **raw) {
  snapshot_reader *r;
  char e[SNAPSHOT_ERRLEN];
  if (snapshot_reader_open(dir, NULL, &r, e, sizeof e) != 0) return -1;
  uint8_t bin[16];
  snapshot_rec rec;
  int got = snapshot_id_parse(id, strlen(id), bin) == 0 ? snapshot_reader_find(r, bin, &rec) : -1;
  int rc = -1;
  if (got == 1) {
    *raw = arena_strndup(a, rec.payload, rec.payload_len);
    json_opts jo = {.lenient = 1};
    if (*raw && json_parse(a, *raw, rec.payload_len, &jo, out, NULL) == 0) rc = 0;
  }
  snapshot_reader_close(r);
  return rc;
}

/* An off-path record is not waited for (durability speaks of the answered
 * one): read it once the writer has it, 10 s at most. */
static int read_payload(const char *dir, const char *id, arena *a, value *out, char **raw) {
  for (int i = 0; i < 1000; i++) {
    if (read_payload_once(dir, id, a, out, raw) == 0) return 0;
    usleep(10000);
  }
  return -1;
}

static const value *at(const value *m, const char *k1, const char *k2) {
  return get(get(m, k1), k2);
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && memcmp(s + n - m, tail, m) == 0;
}

static size_t count_records(const char *dir) {
  snapshot_reader *r;
  char e[SNAPSHOT_ERRLEN];
  size_t n = 0;
  if (snapshot_reader_open(dir, NULL, &r, e, sizeof e) != 0) return 0;
  snapshot_rec rec;
  while (snapshot_reader_next(r, &rec) == 1) n++;
  snapshot_reader_close(r);
  return n;
}

/* The record with "error" (a refusal's error form), 10 s at most. */
static int read_refusal(const char *dir, arena *a, value *out, char **raw) {
  for (int i = 0; i < 1000; i++) {
    snapshot_reader *r;
    char e[SNAPSHOT_ERRLEN];
    if (snapshot_reader_open(dir, NULL, &r, e, sizeof e) != 0) return -1;
    snapshot_rec rec;
    int found = 0;
    while (!found && snapshot_reader_next(r, &rec) == 1) {
      if (!memmem(rec.payload, rec.payload_len, "\"error\":{", 9)) continue;
      *raw = arena_strndup(a, rec.payload, rec.payload_len);
      json_opts jo = {.lenient = 1};
      found = *raw && json_parse(a, *raw, rec.payload_len, &jo, out, NULL) == 0;
    }
    snapshot_reader_close(r);
    if (found) return 0;
    usleep(10000);
  }
  return -1;
}

static void test_sides(void) {
  char t[512], snaps[600], store[600];
  test_tmpdir(t, sizeof t, "rollout-side");
  snprintf(snaps, sizeof snaps, "%s/snaps", t);
  snprintf(store, sizeof store, "%s/store", t);
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.snapshots_dir = snaps;
  o.store_dir = store;
  o.snapshot_durability = VD_DURABILITY_ALWAYS; /* on disk when the call returns */
  o.node = "n1";
  vd_engine *live = NULL, *cand = NULL;
  vd_error err;
  CHECK_MSG(vd_engine_open(GATE, &o, &live, &err) == 0, "%s", err.message);
  CHECK_MSG(service_engine_open_beside(GATE, live, &cand, &err) == 0, "%s", err.message);
  if (!live || !cand) return;
  vd_decision *d = vd_decision_new();

  /* the answered decision, at a given clock, with no side strings: no members */
  service_side plain = {.clock_ns = 1796000000123456789LL};
  CHECK(service_decide_side(live, REQ, strlen(REQ), &plain, d, &err) == 0);
  char id[40];
  snprintf(id, sizeof id, "%s", vd_decision_snapshot_id(d) ? vd_decision_snapshot_id(d) : "");
  CHECK(strlen(id) == 36);
  arena a;
  arena_init(&a, NULL, 0, 0);
  value v;
  char *raw = NULL;
  CHECK(read_payload(snaps, id, &a, &v, &raw) == 0);
  CHECK(raw && ends_with(raw, "\"random\":{}}}"));
  CHECK(!get(&v, "side") && !get(&v, "completes") && !get(&v, "rollout"));
  CHECK(get(get(&v, "inputs"), "clock_ns") &&
        get(get(&v, "inputs"), "clock_ns")->i == 1796000000123456789LL);
  CHECK(get(&v, "time_ns") && get(&v, "time_ns")->i == 1796000000123456789LL);

  /* the off-path decision beside it: same clock, names the answered one */
  service_side shadow = {
      .side = "shadow", .completes = id, .clock_ns = 1796000000123456789LL, .off_path = 1};
  CHECK(service_decide_side(cand, REQ, strlen(REQ), &shadow, d, &err) == 0);
  char sid[40];
  snprintf(sid, sizeof sid, "%s", vd_decision_snapshot_id(d) ? vd_decision_snapshot_id(d) : "");
  CHECK(strlen(sid) == 36 && strcmp(sid, id) != 0);
  value s;
  CHECK(read_payload(snaps, sid, &a, &s, &raw) == 0);
  CHECK(is_str(get(&s, "side"), "shadow"));
  CHECK(is_str(get(&s, "completes"), id));
  CHECK(!get(&s, "rollout"));
  CHECK(at(&s, "inputs", "clock_ns") && at(&s, "inputs", "clock_ns")->i == 1796000000123456789LL);
  CHECK(is_str(get(&s, "action"), vd_decision_action(d)));
  CHECK(raw && ends_with(raw, "\"completes\":\"") == 0 && strstr(raw, ",\"side\":\"shadow\""));

  /* a canary's answer: the rollout object */
  service_side canary = {.side = "canary",
                         .answered = "canary",
                         .by = "field account",
                         .bucket = 1234,
                         .percent = 12.5};
  CHECK(service_decide_side(cand, REQ, strlen(REQ), &canary, d, &err) == 0);
  snprintf(sid, sizeof sid, "%s", vd_decision_snapshot_id(d) ? vd_decision_snapshot_id(d) : "");
  CHECK(read_payload(snaps, sid, &a, &s, &raw) == 0);
  const value *ro = get(&s, "rollout");
  CHECK(is_str(get(&s, "side"), "canary") && !get(&s, "completes"));
  CHECK(is_str(get(ro, "answered"), "canary") && is_str(get(ro, "by"), "field account"));
  CHECK(get(ro, "bucket") && get(ro, "bucket")->i == 1234);
  CHECK(get(ro, "percent") && get(ro, "percent")->kind == V_DOUBLE &&
        get(ro, "percent")->d == 12.5);
  CHECK(raw && ends_with(raw, "\"percent\":12.5}}"));

  /* read by id, the answered record carries the completing one merged in */
  char *merged = NULL;
  size_t mlen = 0;
  CHECK(vd_snapshot_read(snaps, id, -1, &merged, &mlen, &err) == 0);
  value m;
  json_opts jo = {.lenient = 1};
  CHECK(merged && json_parse(&a, merged, mlen, &jo, &m, NULL) == 0);
  const value *sh = get(&m, "shadow");
  CHECK(is_str(get(sh, "side"), "shadow") && get(sh, "action") && get(sh, "latency_us"));
  vd_free(merged);

  /* a refusal off the answer's path: recorded in the error form; on the
   * answer's path (no completes) it is an error, and recorded nowhere */
  static const char bad[] = "{\"action\":\"nope\",\"key\":\"k-1\",\"context\":{}}";
  size_t before = count_records(snaps);
  service_side answered = {.side = "live", .clock_ns = 1796000000123456789LL};
  CHECK(service_decide_side(live, bad, strlen(bad), &answered, d, &err) == VD_ENOTFOUND);
  CHECK(!vd_decision_snapshot_id(d));
  CHECK(service_decide_side(cand, bad, strlen(bad), &shadow, d, &err) == VD_ENOTFOUND);
  CHECK(!vd_decision_snapshot_id(d)); /* not a decision */
  value e;
  CHECK(read_refusal(snaps, &a, &e, &raw) == 0);
  CHECK(count_records(snaps) == before + 1);
  CHECK(is_str(get(&e, "side"), "shadow") && is_str(get(&e, "completes"), id));
  CHECK(get(&e, "action") && get(&e, "action")->kind == V_NULL);
  CHECK(is_str(get(&e, "source"), "error") && is_str(get(&e, "point"), "nope"));
  CHECK(is_str(get(&e, "policy_version"), "")); /* no strategy serves the point */
  CHECK(is_str(at(&e, "error", "code"), "not_found") && is_str(at(&e, "error", "path"), "$.action"));
  CHECK(at(&e, "error", "message") && at(&e, "error", "message")->kind == V_STRING &&
        strstr(at(&e, "error", "message")->s, "no strategy serves"));
  CHECK(raw && ends_with(raw, "\"path\":\"$.action\"}}"));

  /* no rollout: vd_decide_json writes no side members either */
  CHECK(vd_decide_json(live, REQ, -1, d, &err) == 0);
  snprintf(sid, sizeof sid, "%s", vd_decision_snapshot_id(d));
  CHECK(read_payload(snaps, sid, &a, &s, &raw) == 0);
  CHECK(raw && ends_with(raw, "\"random\":{}}}"));

  arena_free(&a);
  vd_decision_free(d);
  vd_engine_close(cand); /* before its host */
  vd_engine_close(live);
  nftw(t, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
  TEST_RUN(test_sides);
  TEST_END();
}
