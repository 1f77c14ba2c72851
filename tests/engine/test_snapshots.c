/* test_snapshots.c — the engine records every decision: the snapshot's
 * payload holds what docs/snapshots.md ("Snapshot contents") says, field by
 * field, for a rule, a default and an error decision (read back from the log
 * and parsed); ids are unique and increasing, also across threads; refused
 * requests leave no snapshot; with snapshots off the id is null; under
 * durability `always` a decision returns only once its snapshot is synced;
 * request.time is the decision's one clock reading and the internal replay
 * entry feeds a given reading back; recording allocates nothing outside the
 * decision's arena once warm. */
#define _GNU_SOURCE
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/json.h"
#include "core/timefmt.h"
#include "engine/engine.h"
#include "snapshot/snapshot.h"
#include "test.h"
#include "verdict.h"

#define GATE "tests/engine/bundles/gate"

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void rm_rf(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static char *scratch(const char *tag) {
  char name[128], t[512];
  snprintf(name, sizeof name, "rec-%s", tag);
  return strdup(test_tmpdir(t, sizeof t, name));
}

static vd_engine *open_engine(const char *bundle, const char *snapdir, int durability) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = ""; /* write nothing into the bundle */
  o.snapshots_dir = snapdir;
  o.snapshot_durability = durability;
  o.node = "test-node";
  vd_engine *e = NULL;
  vd_error err;
  int rc = vd_engine_open(bundle, &o, &e, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  return rc == 0 ? e : NULL;
}

/* A snapshot read back from the log: its header and its parsed payload. */
typedef struct snap {
  value root;
  const char *raw; /* the payload text, NUL-terminated */
  int allowed, review, source;
  float confidence;
  char action[64], policy_version[80];
  int64_t time_ns;
} snap;

static int read_snapshot(const char *dir, const char *id, arena *a, snap *s) {
  memset(s, 0, sizeof *s);
  snapshot_reader *r;
  char e[SNAPSHOT_ERRLEN];
  if (snapshot_reader_open(dir, NULL, &r, e, sizeof e) != 0) return -1;
  uint8_t bin[16];
  snapshot_rec rec;
  int got = -1;
  if (id && snapshot_id_parse(id, strlen(id), bin) == 0) got = snapshot_reader_find(r, bin, &rec);
  if (got == 1) {
    char *copy = arena_strndup(a, rec.payload, rec.payload_len);
    json_opts jo = {.lenient = 1};
    if (!copy || json_parse(a, copy, rec.payload_len, &jo, &s->root, NULL) != 0) got = -1;
    s->raw = copy;
    s->allowed = rec.allowed;
    s->review = rec.review;
    s->source = rec.source;
    s->confidence = rec.confidence;
    s->time_ns = rec.time_ns;
    snprintf(s->action, sizeof s->action, "%.*s", (int)rec.action_len, rec.action);
    snprintf(s->policy_version, sizeof s->policy_version, "%.*s", (int)rec.policy_version_len,
             rec.policy_version);
  }
  snapshot_reader_close(r);
  return got == 1 ? 0 : -1;
}

static const value *get(const value *m, const char *k) {
  return m && m->kind == V_MAP ? value_map_get(m, k, strlen(k)) : NULL;
}

static int is_str(const value *v, const char *want) {
  return v && v->kind == V_STRING && v->n == strlen(want) && memcmp(v->s, want, v->n) == 0;
}

static int is_null(const value *v) { return v && v->kind == V_NULL; }
static int is_bool(const value *v, int b) { return v && v->kind == V_BOOL && v->b == (b != 0); }
static int is_empty_map(const value *v) { return v && v->kind == V_MAP && v->n == 0; }

static int64_t i64(const value *v) {
  return v && v->kind == V_INT ? v->i : v && v->kind == V_UINT ? (int64_t)v->u : -1;
}

/* What every snapshot carries whatever the decision: header agreement, the
 * versions, the time, the limits, the inputs. */
static void check_common(const snap *s, vd_engine *e, const vd_decision *d, const char *id,
                         int64_t before, int64_t after) {
  const value *r = &s->root;
  CHECK(r->kind == V_MAP);
  CHECK(i64(get(r, "format")) == 1);
  CHECK(is_str(get(r, "id"), id));
  int64_t t = i64(get(r, "time_ns"));
  CHECK_MSG(t >= before && t <= after, "time_ns %lld not in [%lld, %lld]", (long long)t,
            (long long)before, (long long)after);
  CHECK(t == s->time_ns); /* the record header agrees */
  /* time is the same instant as RFC 3339 with nine fraction digits */
  const value *tt = get(r, "time");
  int64_t sec;
  int32_t ns;
  CHECK(tt && tt->kind == V_STRING && tt->n == 30 && tt->s[19] == '.' && tt->s[29] == 'Z');
  CHECK(tt && timefmt_parse_rfc3339(tt->s, tt->n, &sec, &ns) == 0 && sec * 1000000000 + ns == t);
  /* the id carries the decision's millisecond (or a later one: ids never go back) */
  uint8_t bin[16];
  CHECK(snapshot_id_parse(id, 36, bin) == 0 && snapshot_id_time_ms(bin) >= (uint64_t)(t / 1000000));
  CHECK(is_str(get(r, "node"), "test-node"));
  CHECK(is_str(get(r, "engine_version"), vd_version()));
  CHECK(is_str(get(r, "strategy"), "gate"));
  CHECK(is_str(get(r, "policy_version"), vd_decision_policy_version(d)));
  CHECK(strcmp(s->policy_version, vd_decision_policy_version(d)) == 0);
  char bv[65];
  CHECK(is_str(get(r, "bundle_version"), vd_engine_policy_version(e, bv)));
  CHECK(is_null(get(r, "model_version")));
  CHECK(is_null(get(r, "features")));
  CHECK(is_null(get(r, "model_score")));
  CHECK(is_null(get(r, "model")));
  CHECK(is_null(get(get(r, "inputs"), "model_deadline_missed")));
  CHECK(is_null(get(r, "model_confidence")));
  /* the outcome, and the header's copy of it */
  const char *act = vd_decision_action(d);
  CHECK(act ? is_str(get(r, "action"), act) : is_null(get(r, "action")));
  CHECK(strcmp(s->action, act ? act : "") == 0);
  CHECK(is_bool(get(r, "allowed"), vd_decision_allowed(d)) && s->allowed == vd_decision_allowed(d));
  CHECK(is_bool(get(r, "review"), vd_decision_review(d)) && s->review == vd_decision_review(d));
  const value *c = get(r, "confidence");
  CHECK(c && c->kind == V_DOUBLE && c->d == vd_decision_confidence(d));
  CHECK(s->confidence == (float)vd_decision_confidence(d));
  CHECK(is_str(get(r, "source"), vd_decision_source(d)));
  CHECK(strcmp(snapshot_source_name(s->source), vd_decision_source(d)) == 0);
  const value *reason = get(r, "reason");
  const char *rule = vd_decision_rule(d), *msg = vd_decision_reason(d);
  CHECK(rule ? is_str(get(reason, "rule"), rule) : is_null(get(reason, "rule")));
  CHECK(msg ? is_str(get(reason, "message"), msg) : is_null(get(reason, "message")));
  /* stages: total is parse + decide, as latency_us reports it */
  const value *lat = get(r, "latency_ns");
  int64_t p = i64(get(lat, "parse")), dd = i64(get(lat, "decide")), rr = i64(get(lat, "render")),
          tot = i64(get(lat, "total"));
  CHECK(p >= 0 && dd > 0 && rr > 0 && tot == p + dd);
  CHECK(tot == (int64_t)(vd_decision_latency_us(d) * 1000.0 + 0.5));
  const value *lim = get(r, "limits");
  CHECK(i64(get(lim, "cost")) == 1000000 && i64(get(lim, "regex_match")) == 100000 &&
        i64(get(lim, "memory")) == 64 << 20 && i64(get(lim, "max_request_bytes")) == 1 << 20);
  const value *in = get(r, "inputs");
  CHECK(i64(get(in, "clock_ns")) == t);
  CHECK(is_empty_map(get(in, "counters")) && is_empty_map(get(in, "random")));
  /* nothing else: the documented keys, in the documented order */
  static const char *const keys[] = {"format",         "id",
                                     "time",           "time_ns",
                                     "node",           "engine_version",
                                     "point",          "request",
                                     "candidates",     "key",
                                     "strategy",       "policy_version",
                                     "bundle_version", "model_version",
                                     "features",       "model",
                                     "trace",
                                     "lets",           "let_errors",
                                     "model_score",    "model_confidence",
                                     "action",         "allowed",
                                     "review",         "confidence",
                                     "source",         "reason",
                                     "latency_ns",     "limits",
                                     "inputs"};
  size_t nk = sizeof keys / sizeof keys[0];
  CHECK_MSG(r->n == nk, "%u keys, want %zu", r->n, nk);
  for (size_t i = 0; i < nk && i < r->n; i++)
    CHECK_MSG(is_str(&r->entries[i].key, keys[i]), "key %zu is not %s", i, keys[i]);
}

static const value *trace_at(const value *root, uint32_t i) {
  const value *rules = get(get(root, "trace"), "rules");
  return rules && rules->kind == V_LIST && i < rules->n ? &rules->items[i] : NULL;
}

static int64_t wall(void) { return clock_wall_ns(); }

static void test_payload_contents(void) {
  char *dir = scratch("payload");
  vd_engine *e = open_engine(GATE, dir, VD_DURABILITY_NONE);
  if (!e) return;
  vd_decision *d1 = vd_decision_new(), *d2 = vd_decision_new(), *d3 = vd_decision_new();
  vd_error err;
  char id1[40] = "", id2[40] = "", id3[40] = "";
  int64_t b1, a1, b2, a2, b3, a3;

  /* 1. a rule decision, from JSON with spacing and spelled-out numbers */
  const char *req1 =
      "{ \"action\" : \"gate\",\n  \"candidates\": [\"allow\", \"block\"],\n"
      "  \"context\": {\"path\": \"/\", \"headers\": {\"user-agent\": \"sqlmap/1.7\"},\n"
      "               \"body_size\": 1, \"env\": {\"country\": \"US\"}, \"w\": 1.50, \"big\": 1E2,"
      " \"s\": \"a b\\n\\u00e9\"},\n  \"key\": \"k-1\" }\n";
  b1 = wall();
  CHECK(vd_decide_json(e, req1, -1, d1, &err) == 0);
  a1 = wall();
  CHECK_STR(vd_decision_action(d1), "block");
  CHECK(vd_decision_snapshot_id(d1) && strlen(vd_decision_snapshot_id(d1)) == 36);
  if (vd_decision_snapshot_id(d1)) snprintf(id1, sizeof id1, "%s", vd_decision_snapshot_id(d1));
  /* the answer carries the id after latency_us */
  const char *j;
  CHECK(vd_decision_render(d1, 0, &j, NULL) == 0);
  char want[80];
  snprintf(want, sizeof want, ",\"snapshot_id\":\"%s\"}", id1);
  CHECK_MSG(strlen(j) > strlen(want) && strcmp(j + strlen(j) - strlen(want), want) == 0, "%s", j);
  CHECK(strstr(j, "\"latency_us\":") && strstr(j, "\"latency_us\":") < strstr(j, "snapshot_id"));

  /* 2. a default decision, built in C */
  const char *cands[] = {"allow", "block", "route_eu"};
  vd_request r2 = {.action = "http_request",
                   .candidates = cands,
                   .ncandidates = 3,
                   .context_json =
                       "{\"path\": \"/x\", \"headers\": {\"user-agent\": \"curl\"}, "
                       "\"body_size\": 10, \"env\": {\"country\": \"US\"}}",
                   .context_len = -1,
                   .key = "vip-3"};
  b2 = wall();
  CHECK(vd_decide(e, &r2, d2, &err) == 0);
  a2 = wall();
  CHECK_STR(vd_decision_source(d2), "default");
  if (vd_decision_snapshot_id(d2)) snprintf(id2, sizeof id2, "%s", vd_decision_snapshot_id(d2));

  /* 3. an error decision: the let `ua` reads headers, which are missing */
  b3 = wall();
  CHECK(vd_decide_json(e, "{\"action\":\"gate\",\"context\":{\"path\":\"/\"}}", -1, d3, &err) == 0);
  a3 = wall();
  CHECK_STR(vd_decision_source(d3), "error");
  if (vd_decision_snapshot_id(d3)) snprintf(id3, sizeof id3, "%s", vd_decision_snapshot_id(d3));
  CHECK(strcmp(id1, id2) < 0 && strcmp(id2, id3) < 0);

  vd_engine_counters c;
  CHECK(vd_engine_stats(e, &c) == 0 && c.snapshots_on && c.snapshots_appended == 3 &&
        c.snapshots_dropped == 0 && c.snapshots_failed == 0);
  char bv[65];
  vd_engine_policy_version(e, bv);
  vd_engine_close(e); /* drains the queue */

  arena a;
  arena_init(&a, NULL, 0, 0);
  snap s;
  /* 1 */
  CHECK(read_snapshot(dir, id1, &a, &s) == 0);
  e = NULL;
  {
    /* check_common needs the engine only for the bundle version: reopen without snapshots */
    vd_engine_opts o;
    memset(&o, 0, sizeof o);
    o.store_dir = "";
    CHECK(vd_engine_open(GATE, &o, &e, &err) == 0);
  }
  check_common(&s, e, d1, id1, b1, a1);
  const value *r = &s.root;
  CHECK(is_str(get(r, "point"), "gate"));
  /* the request as received: byte for byte, minus the whitespace between tokens */
  CHECK_MSG(strstr(s.raw,
                   ",\"request\":{\"action\":\"gate\",\"candidates\":[\"allow\",\"block\"],"
                   "\"context\":{\"path\":\"/\",\"headers\":{\"user-agent\":\"sqlmap/1.7\"},"
                   "\"body_size\":1,\"env\":{\"country\":\"US\"},\"w\":1.50,\"big\":1E2,"
                   "\"s\":\"a b\\n\\u00e9\"},\"key\":\"k-1\"},") != NULL,
            "%s", s.raw);
  const value *cand = get(r, "candidates");
  CHECK(cand && cand->kind == V_LIST && cand->n == 2 && is_str(&cand->items[0], "allow") &&
        is_str(&cand->items[1], "block"));
  CHECK(is_str(get(r, "key"), "k-1"));
  /* the trace: probe passed over (route_eu is no candidate), scanners matched */
  const value *tr = get(r, "trace");
  CHECK(get(tr, "rules") && get(tr, "rules")->n == 2);
  CHECK(is_str(get(trace_at(r, 0), "rule"), "probe") &&
        is_str(get(trace_at(r, 0), "result"), "skipped-not-candidate"));
  CHECK(is_str(get(trace_at(r, 1), "rule"), "scanners") &&
        is_str(get(trace_at(r, 1), "result"), "true"));
  CHECK(is_str(get(tr, "matched"), "scanners"));
  CHECK(i64(get(tr, "rules_total")) == 8 && i64(get(tr, "rules_considered")) == 8);
  CHECK(is_null(get(tr, "no_candidate")));
  CHECK(i64(get(tr, "cost")) > 0);
  const value *lets = get(r, "lets");
  CHECK(lets && lets->kind == V_MAP && lets->n == 1 && is_str(get(lets, "ua"), "sqlmap/1.7"));
  CHECK(is_empty_map(get(r, "let_errors")));
  CHECK(is_str(get(get(r, "reason"), "message"), "known vulnerability scanner"));
  CHECK(s.allowed == 0 && s.source == SNAPSHOT_SRC_RULE && s.confidence == 1.0f);

  /* 2 */
  CHECK(read_snapshot(dir, id2, &a, &s) == 0);
  check_common(&s, e, d2, id2, b2, a2);
  r = &s.root;
  CHECK(is_str(get(r, "point"), "http_request"));
  CHECK_MSG(strstr(s.raw,
                   ",\"request\":{\"action\":\"http_request\",\"candidates\":[\"allow\","
                   "\"block\",\"route_eu\"],\"context\":{\"path\":\"/x\",\"headers\":{"
                   "\"user-agent\":\"curl\"},\"body_size\":10,\"env\":{\"country\":"
                   "\"US\"}},\"key\":\"vip-3\"},") != NULL,
            "%s", s.raw);
  CHECK(is_str(get(r, "key"), "vip-3"));
  tr = get(r, "trace");
  /* probe is false (request.action is not "gate"), admin passed over (ask_mfa is no
   * candidate), every other rule false */
  CHECK(get(tr, "rules") && get(tr, "rules")->n == 8);
  for (uint32_t i = 0; i < 8; i++)
    CHECK(is_str(get(trace_at(r, i), "result"), i == 2 ? "skipped-not-candidate" : "false"));
  CHECK(is_str(get(trace_at(r, 2), "rule"), "admin"));
  CHECK(is_null(get(tr, "matched")));
  lets = get(r, "lets");
  CHECK(lets && lets->n == 2 && is_str(&lets->entries[0].key, "ua") &&
        is_str(&lets->entries[0].val, "curl") && is_str(&lets->entries[1].key, "is_api") &&
        is_bool(&lets->entries[1].val, 0));
  CHECK(is_null(get(get(r, "reason"), "rule")));
  CHECK(is_str(get(get(r, "reason"), "message"), "nothing matched"));
  CHECK(s.allowed == 1 && s.source == SNAPSHOT_SRC_DEFAULT);

  /* 3 */
  CHECK(read_snapshot(dir, id3, &a, &s) == 0);
  check_common(&s, e, d3, id3, b3, a3);
  r = &s.root;
  CHECK_MSG(strstr(s.raw,
                   ",\"request\":{\"action\":\"gate\",\"context\":{\"path\":\"/\"}},"
                   "\"candidates\":[],\"key\":\"\",") != NULL,
            "%s", s.raw);
  tr = get(r, "trace");
  CHECK(get(tr, "rules") && get(tr, "rules")->n == 2);
  CHECK(is_str(get(trace_at(r, 0), "result"), "false"));
  CHECK(is_str(get(trace_at(r, 1), "rule"), "scanners") &&
        is_str(get(trace_at(r, 1), "result"), "error"));
  const value *te = get(trace_at(r, 1), "error");
  CHECK(te && te->kind == V_STRING && memmem(te->s, te->n, "headers", 7));
  CHECK(is_null(get(tr, "matched")));
  CHECK(is_empty_map(get(r, "lets")));
  const value *le = get(get(r, "let_errors"), "ua");
  CHECK(le && le->kind == V_STRING && memmem(le->s, le->n, "let 'ua'", 8));
  CHECK(is_str(get(get(r, "reason"), "rule"), "scanners"));
  const value *conf = get(r, "confidence");
  CHECK(conf && conf->kind == V_DOUBLE && conf->d == 0.0);
  CHECK(s.allowed == 0 && s.source == SNAPSHOT_SRC_ERROR && s.confidence == 0.0f);
  CHECK(strstr(s.raw, "\"confidence\":0.0,") != NULL);

  arena_free(&a);
  vd_decision_free(d1);
  vd_decision_free(d2);
  vd_decision_free(d3);
  vd_engine_close(e);
  rm_rf(dir);
  free(dir);
}

/* ---- ids ---- */
#define PER_THREAD 400

typedef struct worker {
  vd_engine *e;
  char ids[PER_THREAD][40];
  int failures;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  vd_decision *d = vd_decision_new();
  vd_error err;
  for (int i = 0; i < PER_THREAD; i++) {
    char req[160];
    snprintf(req, sizeof req,
             "{\"action\":\"gate\",\"key\":\"k%d\",\"context\":{\"path\":\"/%d\"}}", i, i);
    if (vd_decide_json(w->e, req, -1, d, &err) != 0 || !vd_decision_snapshot_id(d)) {
      w->failures++;
      continue;
    }
    snprintf(w->ids[i], sizeof w->ids[i], "%s", vd_decision_snapshot_id(d));
  }
  vd_decision_free(d);
  return NULL;
}

static int cmp_str(const void *a, const void *b) { return strcmp(a, b); }

static void test_ids_unique_increasing(void) {
  char *dir = scratch("ids");
  vd_engine *e = open_engine(GATE, dir, VD_DURABILITY_NONE);
  if (!e) return;
  enum { NT = 3 };
  worker *w = calloc(NT, sizeof *w);
  pthread_t th[NT];
  for (int t = 0; t < NT; t++) {
    w[t].e = e;
    pthread_create(&th[t], NULL, work, &w[t]);
  }
  for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
  /* within a thread: strictly increasing (the text compares as the bytes do) */
  int ordered = 1;
  for (int t = 0; t < NT; t++) {
    CHECK(w[t].failures == 0);
    for (int i = 1; i < PER_THREAD; i++) ordered &= strcmp(w[t].ids[i - 1], w[t].ids[i]) < 0;
  }
  CHECK(ordered);
  /* across threads: no two alike */
  char(*all)[40] = malloc(sizeof(char[40]) * NT * PER_THREAD);
  for (int t = 0; t < NT; t++) memcpy(all[t * PER_THREAD], w[t].ids, sizeof w[t].ids);
  qsort(all, NT * PER_THREAD, sizeof all[0], cmp_str);
  int unique = 1;
  for (int i = 1; i < NT * PER_THREAD; i++) unique &= strcmp(all[i - 1], all[i]) != 0;
  CHECK(unique);
  vd_engine_close(e);
  /* the log holds exactly those ids */
  snapshot_reader *r;
  char er[SNAPSHOT_ERRLEN];
  CHECK(snapshot_reader_open(dir, NULL, &r, er, sizeof er) == 0);
  snapshot_rec rec;
  int n = 0, found = 1;
  while (snapshot_reader_next(r, &rec) == 1) {
    char id[SNAPSHOT_ID_TEXT];
    snapshot_id_format(rec.id, id);
    found &= bsearch(id, all, NT * PER_THREAD, sizeof all[0], cmp_str) != NULL;
    n++;
  }
  snapshot_reader_close(r);
  CHECK_MSG(n == NT * PER_THREAD, "%d records", n);
  CHECK(found);
  free(all);
  free(w);
  rm_rf(dir);
  free(dir);
}

/* ---- refusals, snapshots off ---- */
static void test_refused_not_recorded(void) {
  char *dir = scratch("refused");
  vd_engine *e = open_engine("tests/engine/bundles/modes", dir, VD_DURABILITY_NONE);
  if (!e) return;
  vd_decision *d = vd_decision_new();
  vd_error err;
  static const char *const bad[] = {
      "{\"action\":",                                           /* not JSON */
      "{\"action\":\"nowhere\"}",                               /* no strategy */
      "{\"action\":\"nc_error\",\"contxt\":{}}",                /* not a request */
      "{\"action\":\"nc_error\",\"candidates\":[\"approve\"]}", /* on_no_candidate: error */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK(vd_decide_json(e, bad[i], -1, d, &err) != 0);
    CHECK(vd_decision_snapshot_id(d) == NULL);
  }
  vd_engine_counters c;
  CHECK(vd_engine_stats(e, &c) == 0 && c.snapshots_appended == 0 && c.snapshots_failed == 0);
  /* a decision after them is recorded */
  CHECK(vd_decide_json(e, "{\"action\":\"nc_error\"}", -1, d, &err) == 0);
  CHECK(vd_decision_snapshot_id(d) != NULL);
  CHECK(vd_engine_stats(e, &c) == 0 && c.snapshots_appended == 1);
  vd_decision_free(d);
  vd_engine_close(e);
  rm_rf(dir);
  free(dir);
}

static void test_snapshots_off(void) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  o.snapshots_dir = "";
  vd_engine *e;
  vd_error err;
  CHECK(vd_engine_open(GATE, &o, &e, &err) == 0);
  vd_decision *d = vd_decision_new();
  CHECK(vd_decide_json(e, "{\"action\":\"gate\",\"context\":{\"path\":\"/\"}}", -1, d, &err) == 0);
  CHECK(vd_decision_snapshot_id(d) == NULL);
  const char *j;
  CHECK(vd_decision_render(d, 0, &j, NULL) == 0 && strstr(j, ",\"snapshot_id\":null}"));
  vd_engine_counters c;
  CHECK(vd_engine_stats(e, &c) == 0 && !c.snapshots_on && c.snapshots_appended == 0);
  /* the trace is not forced on when nothing is recorded */
  CHECK(d->ntrace == 0);
  vd_decision_free(d);
  vd_engine_close(e);
  /* bad settings are refused, naming them */
  char *dir = scratch("opts");
  o.snapshots_dir = dir;
  o.snapshot_durability = 7;
  CHECK(vd_engine_open(GATE, &o, &e, &err) == VD_EINVAL && strstr(err.message, "durability"));
  o.snapshot_durability = VD_DURABILITY_NONE;
  o.snapshot_on_full = 5;
  CHECK(vd_engine_open(GATE, &o, &e, &err) == VD_EINVAL && strstr(err.message, "on_full"));
  /* one writer per folder */
  o.snapshot_on_full = VD_ON_FULL_DROP;
  vd_engine *e1 = NULL, *e2 = NULL;
  CHECK(vd_engine_open(GATE, &o, &e1, &err) == 0);
  CHECK(vd_engine_open(GATE, &o, &e2, &err) == VD_EBUSY && strstr(err.message, dir));
  CHECK(e2 == NULL);
  vd_engine_close(e1);
  /* a folder that cannot be made */
  o.snapshots_dir = "/proc/verdict-no/snapshots";
  CHECK(vd_engine_open(GATE, &o, &e2, &err) == VD_ESNAPSHOT &&
        strstr(err.message, "/proc/verdict-no"));
  rm_rf(dir);
  free(dir);
}

/* ---- durability always: answered only once synced ---- */
static void test_always_durable(void) {
  char *dir = scratch("always");
  vd_engine *e = open_engine(GATE, dir, VD_DURABILITY_ALWAYS);
  if (!e) return;
  vd_decision *d = vd_decision_new();
  vd_error err;
  int durable = 1, findable = 1;
  for (int i = 0; i < 20; i++) {
    CHECK(vd_decide_json(e, "{\"action\":\"gate\",\"context\":{\"path\":\"/\"}}", -1, d, &err) ==
          0);
    vd_engine_counters c;
    vd_engine_stats(e, &c);
    /* every decision so far is written and covered by an fsync of its own */
    durable &= c.snapshots_written == (unsigned long long)i + 1 &&
               c.snapshot_fsyncs >= (unsigned long long)i + 1 && c.snapshot_queue_depth == 0;
    if (i % 5 == 0) {
      arena a;
      arena_init(&a, NULL, 0, 0);
      snap s;
      findable &= read_snapshot(dir, vd_decision_snapshot_id(d), &a, &s) == 0;
      arena_free(&a);
    }
  }
  CHECK(durable);
  CHECK(findable);
  vd_engine_close(e);
  rm_rf(dir);
  /* The contrast that makes the check above mean something: under `none`
   * nothing is ever synced while deciding. */
  e = open_engine(GATE, dir, VD_DURABILITY_NONE);
  if (e) {
    for (int i = 0; i < 20; i++)
      vd_decide_json(e, "{\"action\":\"gate\",\"context\":{\"path\":\"/\"}}", -1, d, &err);
    vd_engine_counters c;
    vd_engine_stats(e, &c);
    CHECK(c.snapshot_fsyncs == 0);
    vd_engine_close(e);
  }
  vd_decision_free(d);
  rm_rf(dir);
  free(dir);
}

/* ---- request.time ---- */
static void test_request_time(void) {
  char *bdir = scratch("timebundle"), *sdir = scratch("timesnaps");
  char path[512];
  snprintf(path, sizeof path, "%s/clock.yaml", bdir);
  FILE *f = fopen(path, "w");
  fputs(
      "strategy: clock\n"
      "let:\n"
      "  now: request.time\n"
      "rules:\n"
      "  - name: new-year\n"
      "    if: now > timestamp(\"2026-01-01T00:00:00Z\")\n"
      "    action: block\n"
      "default: allow\n",
      f);
  fclose(f);
  policy_bundle *b = NULL;
  policy_diags dg;
  memset(&dg, 0, sizeof dg);
  policy_load_opts lo = {.store_dir = ""};
  CHECK(policy_bundle_load(bdir, &lo, &b, &dg) == 0);
  policy_diags_free(&dg);
  if (!b) return;
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  vd_decision *d = vd_decision_new();
  vd_error err;
  const char *req = "{\"action\":\"clock\"}";
  int64_t ny = 1767225600LL * 1000000000; /* 2026-01-01T00:00:00Z */
  /* the given reading is what rules see, to the nanosecond */
  CHECK(engine_decide_json_at(b, NULL, &lim, req, strlen(req), ny, d, &err) == 0);
  CHECK_STR(vd_decision_action(d), "allow");
  CHECK(engine_decide_json_at(b, NULL, &lim, req, strlen(req), ny + 1, d, &err) == 0);
  CHECK_STR(vd_decision_action(d), "block");
  CHECK(engine_decide_json_at(b, NULL, &lim, req, strlen(req), ny - 1, d, &err) == 0);
  CHECK_STR(vd_decision_action(d), "allow");
  CHECK(d->clock_ns == ny - 1 && d->snapshot_id == NULL);
  policy_bundle_free(b);

  /* live: one reading per decision, the snapshot's time, and the let sees it */
  vd_engine *e = open_engine(bdir, sdir, VD_DURABILITY_NONE);
  if (e) {
    int64_t before = wall();
    CHECK(vd_decide_json(e, req, -1, d, &err) == 0);
    int64_t after = wall();
    CHECK(d->clock_ns >= before && d->clock_ns <= after);
    char id[40];
    snprintf(id, sizeof id, "%s", vd_decision_snapshot_id(d) ? vd_decision_snapshot_id(d) : "");
    int64_t clock = d->clock_ns;
    vd_engine_close(e);
    arena a;
    arena_init(&a, NULL, 0, 0);
    snap s;
    CHECK(read_snapshot(sdir, id, &a, &s) == 0);
    CHECK(i64(get(get(&s.root, "inputs"), "clock_ns")) == clock);
    const value *now = get(get(&s.root, "lets"), "now"), *t = get(&s.root, "time");
    /* the let holds request.time, written as RFC 3339: the same instant */
    int64_t sec;
    int32_t ns;
    CHECK(now && now->kind == V_STRING && timefmt_parse_rfc3339(now->s, now->n, &sec, &ns) == 0 &&
          sec * 1000000000 + ns == clock);
    CHECK(t && t->kind == V_STRING);
    arena_free(&a);
  }
  vd_decision_free(d);
  rm_rf(bdir);
  rm_rf(sdir);
  free(bdir);
  free(sdir);
}

/* ---- no malloc on the hot path ---- */
static void test_no_malloc_when_recording(void) {
  char *dir = scratch("mem");
  vd_engine *e = open_engine(GATE, dir, VD_DURABILITY_NONE);
  if (!e) return;
  vd_decision *d = vd_decision_new();
  vd_error err;
  static const char *const reqs[] = {
      "{\"action\":\"gate\",\"context\":{\"path\":\"/\",\"headers\":{\"user-agent\":\"sqlmap\"},"
      "\"body_size\":1,\"env\":{}}}",
      "{\"action\":\"gate\",\"key\":\"vip-1\",\"context\":{\"path\":\"/api/v2\",\"headers\":{"
      "\"user-agent\":\"Mozilla\"},\"body_size\":10,\"env\":{\"country\":\"US\"}}}",
      "{\"action\":\"gate\",\"context\":{\"path\":\"/\"}}",
  };
  for (int i = 0; i < 50; i++) vd_decide_json(e, reqs[i % 3], -1, d, &err);
  size_t before = decision_arena_mallocs(d);
  int ok = 1;
  for (int i = 0; i < 3000; i++) {
    const char *j;
    ok &= vd_decide_json(e, reqs[i % 3], -1, d, &err) == 0 && vd_decision_snapshot_id(d) &&
          vd_decision_render(d, 0, &j, NULL) == 0;
  }
  CHECK(ok);
  CHECK_MSG(decision_arena_mallocs(d) == before, "%zu -> %zu", before, decision_arena_mallocs(d));
  vd_engine_counters c;
  vd_engine_stats(e, &c);
  CHECK(c.snapshots_appended == 3050 && c.snapshots_dropped == 0 && c.snapshots_failed == 0);
  vd_decision_free(d);
  vd_engine_close(e);
  rm_rf(dir);
  free(dir);
}

int main(void) {
  TEST_RUN(test_payload_contents);
  TEST_RUN(test_ids_unique_increasing);
  TEST_RUN(test_refused_not_recorded);
  TEST_RUN(test_snapshots_off);
  TEST_RUN(test_always_durable);
  TEST_RUN(test_request_time);
  TEST_RUN(test_no_malloc_when_recording);
  TEST_END();
}
