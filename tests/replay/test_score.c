/* test_score.c — the replay scorer and its reports on items built by hand:
 * histogram percentiles against exact values, transition and rule tallies
 * with their examples, labels (by id and by key, conflicts), accuracy and
 * confusion, the score formula with default and custom weights in every
 * mode, and the JSON / text / HTML reports (fields present, the HTML
 * balanced and free of external references, snapshot strings escaped). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/json.h"
#include "replay/report.h"
#include "replay/score.h"
#include "test.h"

static int near(double got, double want, double rel) {
  if (want == 0) return fabs(got) < 1e-9;
  return fabs(got - want) <= fabs(want) * rel;
}

/* ---- building items ---- */

typedef struct tside {
  const char *action, *rule, *source;
  int allowed;
  double confidence, latency_us;
} tside;

static replay_item mk(int n, const char *point, const char *key, tside rec, tside rep, int error,
                      uint64_t cpu_ns, int complete, char idbuf[SCORE_ID_TEXT]) {
  replay_item it;
  memset(&it, 0, sizeof it);
  snprintf(idbuf, SCORE_ID_TEXT, "0193c0de-0000-7000-8000-%012d", n);
  it.id_text = idbuf;
  it.point = point;
  it.key = key;
  it.request_json = "{}";
  it.request_len = 2;
  it.recorded = (replay_side){.action = rec.action,
                              .allowed = rec.allowed,
                              .source = rec.source ? rec.source : "rule",
                              .rule = rec.rule,
                              .confidence = rec.confidence,
                              .latency_us = rec.latency_us,
                              .timing = rec.latency_us > 0 ? REPLAY_TIMING_INPROCESS : 0,
                              .decision_id = idbuf,
                              .policy_version = "v1"};
  if (!error) {
    it.replayed = (replay_side){.action = rep.action,
                                .allowed = rep.allowed,
                                .source = rep.source ? rep.source : "rule",
                                .rule = rep.rule,
                                .confidence = rep.confidence,
                                .latency_us = rep.latency_us,
                                .timing = rep.latency_us > 0 ? REPLAY_TIMING_INPROCESS : 0,
                                .decision_id = idbuf,
                                .policy_version = "v1"};
    it.same = (rec.action == rep.action ||
               (rec.action && rep.action && strcmp(rec.action, rep.action) == 0)) &&
              rec.allowed == rep.allowed && rec.confidence == rep.confidence &&
              (rec.rule == rep.rule || (rec.rule && rep.rule && strcmp(rec.rule, rep.rule) == 0));
  } else {
    it.error = -7;
    it.error_message = "policy version 3f2a not in the store";
  }
  it.cpu_ns = cpu_ns;
  it.complete = complete;
  return it;
}

static const score_row *find_row(const score_row *rows, size_t n, const char *from,
                                 const char *to) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(rows[i].from, from) == 0 && strcmp(rows[i].to, to) == 0) return &rows[i];
  return NULL;
}

/* ---- histogram ---- */

static uint64_t exact_rank(const uint64_t *sorted, size_t n, double p) {
  size_t rank = (size_t)ceil(p * (double)n);
  if (rank < 1) rank = 1;
  return sorted[rank - 1];
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void test_hist_percentiles_within_one_percent(void) {
  score_hist h;
  score_hist_init(&h);
  CHECK(score_hist_percentile(&h, 0.5) == 0);
  /* 1..1000 us in ns */
  for (uint64_t v = 1; v <= 1000; v++) score_hist_add(&h, v * 1000);
  CHECK(h.count == 1000);
  CHECK(h.min == 1000 && h.max == 1000000);
  CHECK(score_hist_percentile(&h, 1.0) == 1000000);
  CHECK(score_hist_percentile(&h, 0.0) == 1000);
  CHECK_MSG(near((double)score_hist_percentile(&h, 0.5), 500000, 0.008), "p50 %llu",
            (unsigned long long)score_hist_percentile(&h, 0.5));
  CHECK(near((double)score_hist_percentile(&h, 0.9), 900000, 0.008));
  CHECK(near((double)score_hist_percentile(&h, 0.99), 990000, 0.008));

  /* small values are exact */
  score_hist s;
  score_hist_init(&s);
  score_hist_add(&s, 5);
  score_hist_add(&s, 9);
  score_hist_add(&s, 7);
  CHECK(score_hist_percentile(&s, 0.5) == 7);
  CHECK(score_hist_percentile(&s, 0.34) == 7);
  CHECK(score_hist_percentile(&s, 0.33) == 5);
  CHECK(score_hist_count_range(&s, 0, 8) == 2);
  CHECK(score_hist_count_range(&s, 8, 100) == 1);

  /* a skewed random sample against the exact nearest-rank values */
  uint64_t vals[5000], x = 12345;
  score_hist r;
  score_hist_init(&r);
  for (int i = 0; i < 5000; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    double u = (double)(x >> 11) / 9007199254740992.0;
    vals[i] = (uint64_t)(2000.0 * exp(4.0 * u * u)); /* 2 us .. 109 us, skewed */
    score_hist_add(&r, vals[i]);
  }
  qsort(vals, 5000, sizeof vals[0], cmp_u64);
  const double ps[] = {0.01, 0.25, 0.5, 0.9, 0.99, 0.999};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
    uint64_t want = exact_rank(vals, 5000, ps[i]), got = score_hist_percentile(&r, ps[i]);
    CHECK_MSG(near((double)got, (double)want, 0.008), "p%g: got %llu want %llu", ps[i],
              (unsigned long long)got, (unsigned long long)want);
  }
  CHECK(score_hist_count_range(&r, 0, UINT64_MAX) == 5000);
  /* values far apart land in their own ranges */
  score_hist w;
  score_hist_init(&w);
  score_hist_add(&w, 1000);
  score_hist_add(&w, 1000000000000ULL);
  CHECK(score_hist_count_range(&w, 0, 2000) == 1);
  CHECK(score_hist_count_range(&w, 2000, UINT64_MAX) == 1);
  CHECK(near((double)score_hist_percentile(&w, 0.5), 1000, 0.008));
}

/* ---- weights ---- */

static void test_weights_parse(void) {
  score_weights w;
  char err[256];
  score_weights_default(&w);
  CHECK(w.accuracy == 40 && w.latency == 20 && w.cost == 20 && w.audit == 20);
  CHECK(score_weights_parse("10,0,0,90", &w, err, sizeof err) == 0);
  CHECK(w.accuracy == 10 && w.latency == 0 && w.cost == 0 && w.audit == 90);
  CHECK(score_weights_parse("0.5,1.5,1,1", &w, err, sizeof err) == 0);
  CHECK(w.accuracy == 0.5 && w.latency == 1.5);
  CHECK(score_weights_parse("40,20,20", &w, err, sizeof err) < 0);
  CHECK(strstr(err, "four") != NULL);
  CHECK(score_weights_parse("40,20,20,20,5", &w, err, sizeof err) < 0);
  CHECK(score_weights_parse("40,-1,20,20", &w, err, sizeof err) < 0);
  CHECK(score_weights_parse("0,0,0,0", &w, err, sizeof err) < 0);
  CHECK(score_weights_parse("a,b,c,d", &w, err, sizeof err) < 0);
  CHECK(score_weights_parse("", &w, err, sizeof err) < 0);
  CHECK(score_weights_parse("nan,1,1,1", &w, err, sizeof err) < 0);
  CHECK(w.accuracy == 0.5); /* failures leave the weights alone */
}

/* ---- transitions and rules ---- */

static void test_transitions_rules_and_examples(void) {
  score_acc *s = score_new(SCORE_CANDIDATE, NULL, NULL);
  CHECK(s != NULL);
  char id[64][SCORE_ID_TEXT];
  int n = 0;
  tside allow_r1 = {"allow", "r1", "rule", 1, 1.0, 5},
        block_r2 = {"block", "r2", "rule", 0, 1.0, 6};
  tside allow_def = {"allow", NULL, "default", 1, 1.0, 5},
        allow_r3 = {"allow", "r3", "rule", 1, 1.0, 5};
  tside allow_r1_low = {"allow", "r1", "rule", 1, 0.5, 5};
  for (int i = 0; i < 10; i++) {
    replay_item it = mk(n, "http_request", "", allow_r1, allow_r1, 0, 1000, 1, id[n]);
    n++;
    CHECK(score_add(s, &it) == 0);
  }
  /* 5 x allow(r1) -> block(r2): examples keep the first 3 */
  int first_ab = n;
  for (int i = 0; i < 5; i++) {
    replay_item it = mk(n, "http_request", "", allow_r1, block_r2, 0, 1000, 1, id[n]);
    n++;
    CHECK(score_add(s, &it) == 0);
  }
  /* 2 x block(r2) -> allow(default) */
  for (int i = 0; i < 2; i++) {
    replay_item it = mk(n, "http_request", "", block_r2, allow_def, 0, 1000, 1, id[n]);
    n++;
    score_add(s, &it);
  }
  /* rule only: allow(r1) -> allow(r3) */
  replay_item it = mk(n, "http_request", "", allow_r1, allow_r3, 0, 1000, 0, id[n]);
  n++;
  score_add(s, &it);
  /* confidence only */
  it = mk(n, "http_request", "", allow_r1, allow_r1_low, 0, 1000, 1, id[n]);
  n++;
  score_add(s, &it);
  /* 2 errors */
  for (int i = 0; i < 2; i++) {
    it = mk(n, "payment_authorization", "", allow_r1, allow_r1, 1, 0, 1, id[n]);
    n++;
    score_add(s, &it);
  }
  score_report r;
  score_finish(s, &r);
  CHECK(r.seen == 21);
  CHECK(r.replayed == 19);
  CHECK(r.reproduced == 10);
  CHECK(r.changed == 9);
  CHECK(r.errors == 2);
  CHECK(r.complete == 20);
  CHECK(r.changed_action == 7);
  CHECK(r.changed_allowed == 7);
  CHECK(r.changed_rule == 8); /* 5 + 2 + 1 */
  CHECK(r.changed_other == 1);

  CHECK(r.ntransitions == 2);
  CHECK_STR(r.transitions[0].from, "allow"); /* most frequent first */
  CHECK_STR(r.transitions[0].to, "block");
  CHECK(r.transitions[0].count == 5);
  CHECK(r.transitions[0].nexamples == 3);
  CHECK_STR(r.transitions[0].examples[0], id[first_ab]);
  CHECK_STR(r.transitions[0].examples[2], id[first_ab + 2]);
  CHECK_STR(r.transitions[1].from, "block");
  CHECK_STR(r.transitions[1].to, "allow");
  CHECK(r.transitions[1].count == 2 && r.transitions[1].nexamples == 2);

  CHECK(r.nrule_changes == 3);
  const score_row *x = find_row(r.rule_changes, r.nrule_changes, "r1", "r2");
  CHECK(x && x->count == 5);
  x = find_row(r.rule_changes, r.nrule_changes, "r2", "(default)");
  CHECK(x && x->count == 2);
  x = find_row(r.rule_changes, r.nrule_changes, "r1", "r3");
  CHECK(x && x->count == 1 && x->nexamples == 1);

  CHECK(r.nerror_kinds == 1);
  CHECK_STR(r.error_kinds[0].from, "payment_authorization");
  CHECK(strstr(r.error_kinds[0].to, "not in the store") != NULL);
  CHECK(r.error_kinds[0].count == 2);

  /* feeding more and finishing again updates everything */
  it = mk(n, "http_request", "", allow_r1, block_r2, 0, 1000, 1, id[n]);
  n++;
  score_add(s, &it);
  score_finish(s, &r);
  CHECK(r.seen == 22 && r.transitions[0].count == 6 && r.transitions[0].nexamples == 3);
  score_free(s);
}

/* Many distinct pairs: the tally grows and keeps every count. */
static void test_tally_growth(void) {
  score_acc *s = score_new(SCORE_CANDIDATE, NULL, NULL);
  char names[300][16], id[SCORE_ID_TEXT];
  for (int i = 0; i < 300; i++) snprintf(names[i], sizeof names[i], "a%d", i);
  for (int round = 0; round < 3; round++)
    for (int i = 0; i < 300; i++) {
      tside a = {names[i], "x", "rule", 1, 1, 1},
            b = {names[(i * 7 + 1) % 300], "y", "rule", 1, 1, 1};
      replay_item it = mk(i, "p", "", a, b, 0, 10, 1, id);
      CHECK(score_add(s, &it) == 0);
    }
  score_report r;
  score_finish(s, &r);
  CHECK(r.ntransitions == 300);
  int all3 = 1;
  for (size_t i = 0; i < r.ntransitions; i++) all3 &= r.transitions[i].count == 3;
  CHECK(all3);
  CHECK(find_row(r.transitions, r.ntransitions, "a299", "a294") != NULL); /* 299*7+1 = 2094 % 300 */
  CHECK(r.nrule_changes == 1 && r.rule_changes[0].count == 900);
  score_free(s);
}

/* ---- labels ---- */

static const char labels_text[] =
    "{\"id\": \"0193c0de-0000-7000-8000-000000000001\", \"action\": \"block\"}\n"
    "\n"
    "{\"key\": \"k2\", \"action\": \"allow\"}\r\n"
    "  {\"key\": \"k3\", \"action\": \"challenge\", \"note\": \"a scraper\"}\n"
    "{\"key\": \"k2\", \"action\": \"allow\"}\n" /* the same again: fine */
    "{\"id\": \"0193c0de-0000-7000-8000-000000000004\", \"key\": \"k4\", \"action\": \"block\"}\n";

static void test_labels_parse_and_find(void) {
  score_labels *l;
  char err[512];
  CHECK(score_labels_parse("t.jsonl", labels_text, strlen(labels_text), &l, err, sizeof err) == 0);
  CHECK(score_labels_count(l) == 5); /* id1, k2, k3, id4, k4 */
  CHECK_STR(score_labels_find(l, "0193c0de-0000-7000-8000-000000000001", "zzz"), "block");
  CHECK_STR(score_labels_find(l, "0193c0de-0000-7000-8000-000000000009", "k2"), "allow");
  CHECK_STR(score_labels_find(l, NULL, "k3"), "challenge");
  CHECK_STR(score_labels_find(l, "", "k4"), "block");
  CHECK(score_labels_find(l, "nope", "") == NULL);
  CHECK(score_labels_find(l, "nope", "nope") == NULL);
  score_labels_free(l);

  /* many labels: the table grows */
  size_t cap = 4000 * 48, len = 0;
  char *big = malloc(cap);
  for (int i = 0; i < 4000; i++)
    len += (size_t)snprintf(big + len, cap - len, "{\"key\":\"key-%d\",\"action\":\"a%d\"}\n", i,
                            i % 7);
  CHECK(score_labels_parse("big", big, len, &l, err, sizeof err) == 0);
  CHECK(score_labels_count(l) == 4000);
  CHECK_STR(score_labels_find(l, NULL, "key-3999"), "a2");
  CHECK_STR(score_labels_find(l, NULL, "key-0"), "a0");
  score_labels_free(l);
  free(big);

  struct {
    const char *text, *want;
  } bad[] = {
      {"{\"key\":\"a\",\"action\":\"x\"}\n{\"key\":\"a\",\"action\":\"y\"}\n",
       "t:2: key \"a\" already has another label on line 1"},
      {"{\"key\":\"a\"}\n", "t:1: \"action\" must be a non-empty string"},
      {"{\"action\":\"x\"}\n", "t:1: give \"id\""},
      {"[1]\n", "t:1: want an object"},
      {"{\"key\":\"a\",\"action\":\"x\",\"lable\":1}\n", "unknown field \"lable\""},
      {"{\"key\":\"a\",\n", "t:1: not JSON"},
      {"{\"key\":1,\"action\":\"x\"}\n", "must be strings"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    l = NULL;
    err[0] = 0;
    CHECK(score_labels_parse("t", bad[i].text, strlen(bad[i].text), &l, err, sizeof err) < 0);
    CHECK_MSG(strstr(err, bad[i].want) != NULL, "case %zu: %s", i, err);
    CHECK(l == NULL);
  }
  CHECK(score_labels_load("/nonexistent/labels.jsonl", &l, err, sizeof err) < 0);
  CHECK(strstr(err, "/nonexistent/labels.jsonl") != NULL);
}

static void test_label_accuracy_and_confusion(void) {
  const char *text =
      "{\"key\":\"k0\",\"action\":\"allow\"}\n"
      "{\"key\":\"k1\",\"action\":\"allow\"}\n"
      "{\"key\":\"k2\",\"action\":\"block\"}\n"
      "{\"key\":\"k3\",\"action\":\"block\"}\n"
      "{\"id\":\"0193c0de-0000-7000-8000-000000000004\",\"action\":\"challenge\"}\n";
  score_labels *l;
  char err[256];
  CHECK(score_labels_parse("t", text, strlen(text), &l, err, sizeof err) == 0);
  score_acc *s = score_new(SCORE_CANDIDATE, NULL, l);
  char id[8][SCORE_ID_TEXT];
  tside A = {"allow", "ra", "rule", 1, 1, 5}, B = {"block", "rb", "rule", 0, 1, 5},
        C = {"challenge", "rc", "rule", 0, 1, 5};
  /* k0 allow: recorded allow (ok), replayed allow (ok) */
  replay_item it = mk(0, "p", "k0", A, A, 0, 100, 1, id[0]);
  score_add(s, &it);
  /* k1 allow: recorded block (wrong), replayed allow (ok) */
  it = mk(1, "p", "k1", B, A, 0, 100, 1, id[1]);
  score_add(s, &it);
  /* k2 block: recorded allow (wrong), replayed block (ok) */
  it = mk(2, "p", "k2", A, B, 0, 100, 1, id[2]);
  score_add(s, &it);
  /* k3 block: recorded block (ok), replay error (wrong) */
  it = mk(3, "p", "k3", B, B, 1, 0, 1, id[3]);
  score_add(s, &it);
  /* id 4 challenge (by id; key has no label): recorded challenge ok, replayed block wrong */
  it = mk(4, "p", "unlabelled-key", C, B, 0, 100, 1, id[4]);
  score_add(s, &it);
  /* no label at all */
  it = mk(5, "p", "k-none", A, B, 0, 100, 1, id[5]);
  score_add(s, &it);
  score_report r;
  score_finish(s, &r);
  CHECK(r.have_labels && r.labels_loaded == 5);
  CHECK(r.labelled == 5);
  CHECK(r.recorded.correct == 3);      /* k0, k3, id4 */
  CHECK(r.replayed_side.correct == 3); /* k0, k1, k2 */
  CHECK(near(r.recorded.accuracy, 0.6, 1e-12));
  CHECK(near(r.replayed_side.accuracy, 0.6, 1e-12));
  const score_row *x = find_row(r.confusion_replayed, r.nconfusion_replayed, "block", "(error)");
  CHECK(x && x->count == 1);
  x = find_row(r.confusion_replayed, r.nconfusion_replayed, "challenge", "block");
  CHECK(x && x->count == 1 && strcmp(x->examples[0], id[4]) == 0);
  x = find_row(r.confusion_recorded, r.nconfusion_recorded, "allow", "block");
  CHECK(x && x->count == 1);
  x = find_row(r.confusion_recorded, r.nconfusion_recorded, "block", "allow");
  CHECK(x && x->count == 1);
  uint64_t total = 0;
  for (size_t i = 0; i < r.nconfusion_replayed; i++) total += r.confusion_replayed[i].count;
  CHECK(total == 5);
  /* accuracy is the scored category, on the replayed side */
  CHECK(r.cat[SCORE_CAT_ACCURACY].scored);
  CHECK(near(r.cat[SCORE_CAT_ACCURACY].value, r.replayed_side.accuracy, 1e-12));
  CHECK(strstr(r.cat[SCORE_CAT_ACCURACY].basis, "label accuracy") != NULL);
  score_free(s);
  score_labels_free(l);
}

/* ---- the score formula ---- */

static void test_category_scales(void) {
  CHECK(score_latency_value(10) == 1.0);
  CHECK(score_latency_value(50) == 1.0);
  CHECK(score_latency_value(10000) == 0.0);
  CHECK(score_latency_value(1e7) == 0.0);
  CHECK(near(score_latency_value(sqrt(50.0 * 10000.0)), 0.5, 1e-9));
  CHECK(score_cost_value(1) == 1.0);
  CHECK(near(score_cost_value(100), 0.5, 1e-9));
  CHECK(score_cost_value(1000) == 0.0);
  CHECK(score_cost_value(5000) == 0.0);
  CHECK(score_latency_value(100) > score_latency_value(200));
}

/* 4 labelled items: 3 right; recorded latency 400 us, replayed 100 us
 * (in process, 4x apart: no tie); the replayed answers of items 2 and 3
 * name no policy version (audit 10 of 12 items), the recorded ones all. */
static score_acc *formula_fixture(score_mode mode, const score_weights *w, score_labels **lp,
                                  int with_labels, int timing) {
  const char *text =
      "{\"key\":\"k0\",\"action\":\"allow\"}\n{\"key\":\"k1\",\"action\":\"allow\"}\n"
      "{\"key\":\"k2\",\"action\":\"allow\"}\n{\"key\":\"k3\",\"action\":\"block\"}\n";
  char err[128];
  *lp = NULL;
  if (with_labels) score_labels_parse("t", text, strlen(text), lp, err, sizeof err);
  score_acc *s = score_new(mode, w, *lp);
  tside A = {"allow", "r", "rule", 1, 1, 400}, Arep = {"allow", "r", "rule", 1, 1, 100};
  const char *keys[4] = {"k0", "k1", "k2", "k3"};
  for (int i = 0; i < 4; i++) {
    char id[SCORE_ID_TEXT];
    replay_item it = mk(i, "p", keys[i], A, Arep, 0, 100000, i < 2, id);
    it.same = i == 3;
    if (i >= 2) it.replayed.policy_version = NULL;
    it.replayed.timing = timing;
    if (timing == REPLAY_TIMING_ROUNDTRIP) it.replayed.rtt_us = 100;
    score_add(s, &it);
  }
  return s;
}

static void test_score_formula_default_and_custom_weights(void) {
  score_labels *l;
  score_report r;
  double lat = score_latency_value(100); /* 1 - ln 2 / ln 200 */
  CHECK(near(lat, 1 - log(2) / log(200), 1e-12));
  double rl = score_latency_value(400), rc = score_cost_value(400), audit = 10.0 / 12;

  score_acc *s = formula_fixture(SCORE_CANDIDATE, NULL, &l, 1, REPLAY_TIMING_INPROCESS);
  score_finish(s, &r);
  CHECK(near(r.replayed_side.latency_us.p99, 100, 0.008));
  CHECK(near(r.cpu_ns.mean, 100000, 1e-12));
  CHECK(near(r.cat[SCORE_CAT_ACCURACY].value, 0.75, 1e-12));
  /* cost: the mean in-process time, 100 us */
  CHECK(near(r.cat[SCORE_CAT_COST].value, 0.5, 0.01));
  CHECK_MSG(near(r.cat[SCORE_CAT_AUDIT].value, audit, 1e-12), "audit %f",
            r.cat[SCORE_CAT_AUDIT].value);
  double lv = r.cat[SCORE_CAT_LATENCY].value, cv = r.cat[SCORE_CAT_COST].value;
  CHECK(near(lv, lat, 0.01));
  double want = (40 * 0.75 + 20 * lv + 20 * cv + 20 * audit) / 100 * 100;
  CHECK_MSG(near(r.score, want, 1e-9), "score %f want %f", r.score, want);
  double sum = 0;
  for (int i = 0; i < SCORE_NCAT; i++) sum += r.cat[i].points;
  CHECK(near(sum, r.score, 1e-9));
  CHECK(near(r.cat[SCORE_CAT_ACCURACY].points, 30, 1e-9));
  /* the recorded side on the same four categories: accuracy 0.75 (same
   * actions), latency and cost from 400 us, every answer complete */
  CHECK(r.has_recorded_score);
  for (int i = 0; i < SCORE_NCAT; i++) CHECK(r.recorded_cat[i].scored == r.cat[i].scored);
  CHECK(r.recorded_cat[SCORE_CAT_COST].scored);
  CHECK(near(r.recorded_cat[SCORE_CAT_LATENCY].value, rl, 0.01));
  CHECK(near(r.recorded_cat[SCORE_CAT_COST].value, rc, 0.01));
  CHECK(r.recorded_cat[SCORE_CAT_AUDIT].value == 1.0);
  CHECK(near(r.recorded_score,
             (40 * 0.75 + 20 * r.recorded_cat[SCORE_CAT_LATENCY].value +
              20 * r.recorded_cat[SCORE_CAT_COST].value + 20 * 1.0) /
                 100 * 100,
             1e-9));
  /* one decision point: the same figures */
  CHECK(r.cmp.npoints == 1 && strcmp(r.cmp.points[0].point, "p") == 0);
  CHECK(near(r.cmp.points[0].sides[1].score, r.score, 1e-9));
  CHECK(near(r.cmp.points[0].sides[0].score, r.recorded_score, 1e-9));
  score_free(s);
  score_labels_free(l);

  /* custom weights: 10,0,0,90 -> (10*0.75 + 90*audit) / 100 */
  score_weights w;
  char err[128];
  CHECK(score_weights_parse("10,0,0,90", &w, err, sizeof err) == 0);
  s = formula_fixture(SCORE_CANDIDATE, &w, &l, 1, REPLAY_TIMING_INPROCESS);
  score_finish(s, &r);
  CHECK_MSG(near(r.score, 7.5 + 90 * audit, 1e-9), "score %f", r.score);
  CHECK(r.cat[SCORE_CAT_LATENCY].points == 0);
  score_free(s);
  score_labels_free(l);

  /* weights need not add up to 100: 4,2,2,2 is the default again */
  CHECK(score_weights_parse("4,2,2,2", &w, err, sizeof err) == 0);
  s = formula_fixture(SCORE_CANDIDATE, &w, &l, 1, REPLAY_TIMING_INPROCESS);
  score_finish(s, &r);
  CHECK(near(r.score, want, 1e-9));
  score_free(s);
  score_labels_free(l);

  /* candidate without labels: accuracy is not scored, the rest renormalised */
  s = formula_fixture(SCORE_CANDIDATE, NULL, &l, 0, REPLAY_TIMING_INPROCESS);
  score_finish(s, &r);
  CHECK(!r.cat[SCORE_CAT_ACCURACY].scored && !r.recorded_cat[SCORE_CAT_ACCURACY].scored);
  CHECK(strstr(r.cat[SCORE_CAT_ACCURACY].basis, "not scored") != NULL);
  CHECK(near(r.score, (20 * lv + 20 * cv + 20 * audit) / 60 * 100, 1e-9));
  score_free(s);

  /* determinism without labels: accuracy = reproduced share (here: 1 of 4 same) */
  s = formula_fixture(SCORE_DETERMINISM, NULL, &l, 0, REPLAY_TIMING_INPROCESS);
  score_finish(s, &r);
  CHECK(r.cat[SCORE_CAT_ACCURACY].scored);
  CHECK(near(r.cat[SCORE_CAT_ACCURACY].value, 0.25, 1e-12));
  CHECK(strstr(r.cat[SCORE_CAT_ACCURACY].basis, "determinism") != NULL);
  CHECK(near(r.score, (40 * 0.25 + 20 * lv + 20 * cv + 20 * audit) / 100 * 100, 1e-9));
  CHECK(!r.has_recorded_score);
  score_free(s);

  /* against a service timed only by its round trip: latency and cost are
   * left out for both sides, and the basis says why */
  s = formula_fixture(SCORE_AGAINST, NULL, &l, 1, REPLAY_TIMING_ROUNDTRIP);
  score_finish(s, &r);
  CHECK(!r.cat[SCORE_CAT_COST].scored && !r.cat[SCORE_CAT_LATENCY].scored);
  CHECK(!r.recorded_cat[SCORE_CAT_COST].scored && !r.recorded_cat[SCORE_CAT_LATENCY].scored);
  CHECK(strstr(r.cat[SCORE_CAT_LATENCY].basis, "round trip") != NULL);
  CHECK(near(r.score, (40 * 0.75 + 20 * audit) / 60 * 100, 1e-9));
  CHECK(near(r.recorded_score, (40 * 0.75 + 20 * 1.0) / 60 * 100, 1e-9));
  CHECK(r.cmp.sides[1].rtt_us.count == 4);
  score_free(s);
  score_labels_free(l);

  /* only weight on an unscored category: nothing to score */
  CHECK(score_weights_parse("0,0,1,0", &w, err, sizeof err) == 0);
  s = formula_fixture(SCORE_AGAINST, &w, &l, 0, REPLAY_TIMING_ROUNDTRIP);
  score_finish(s, &r);
  CHECK(r.score == 0);
  score_free(s);

  /* nothing fed */
  s = score_new(SCORE_DETERMINISM, NULL, NULL);
  score_finish(s, &r);
  CHECK(r.seen == 0 && r.score == 0 && r.ntransitions == 0);
  score_free(s);
}

/* The same answers on both sides, timed a little apart (as two runs of
 * the same bundle are): exactly the same score. Before the sides were
 * scored on the same categories, the recorded side had no cost and scored
 * differently. */
static void test_identical_sides_score_the_same(void) {
  score_acc *s = score_new(SCORE_CANDIDATE, NULL, NULL);
  for (int i = 0; i < 50; i++) {
    char id[SCORE_ID_TEXT];
    tside rec = {"allow", "r", "rule", 1, 1, 120 + i}, rep = {"allow", "r", "rule", 1, 1, 70 + i};
    replay_item it = mk(i, i % 2 ? "a" : "b", "", rec, rep, 0, 60000, 1, id);
    score_add(s, &it);
  }
  score_report r;
  score_finish(s, &r);
  CHECK_MSG(r.score == r.recorded_score, "%f vs %f", r.score, r.recorded_score);
  for (int i = 0; i < SCORE_NCAT; i++) {
    CHECK(r.cat[i].scored == r.recorded_cat[i].scored);
    CHECK(r.cat[i].value == r.recorded_cat[i].value);
  }
  CHECK(r.cat[SCORE_CAT_LATENCY].scored && r.cat[SCORE_CAT_COST].scored);
  CHECK(strstr(r.cat[SCORE_CAT_LATENCY].basis, "a tie") != NULL);
  CHECK(r.cmp.npoints == 2);
  for (size_t p = 0; p < r.cmp.npoints; p++)
    CHECK(r.cmp.points[p].sides[0].score == r.cmp.points[p].sides[1].score);
  score_free(s);
}

/* A side timed beside the recorded version (cpu_us, reference_cpu_us) is
 * put on the recording's scale by the ratio of the two CPU times: 90 us
 * beside 36 us for the recorded version is 2.5x the recording's 400 us,
 * not a tie (whatever its own wall time, 100 us, says). */
static void test_timing_on_the_recordings_scale(void) {
  score_acc *s = score_new(SCORE_CANDIDATE, NULL, NULL);
  for (int i = 0; i < 10; i++) {
    char id[SCORE_ID_TEXT];
    tside rec = {"allow", "r", "rule", 1, 1, 400}, rep = {"allow", "r", "rule", 1, 1, 100};
    replay_item it = mk(i, "p", "", rec, rep, 0, 0, 1, id);
    it.replayed.cpu_us = 90;
    it.replayed.reference_cpu_us = 36; /* x2.5 */
    score_add(s, &it);
  }
  score_report r;
  score_finish(s, &r);
  CHECK_MSG(near(r.cat[SCORE_CAT_COST].measure, 1000, 0.01), "%f", r.cat[SCORE_CAT_COST].measure);
  CHECK(near(r.cat[SCORE_CAT_COST].value, score_cost_value(1000), 0.01));
  CHECK(near(r.recorded_cat[SCORE_CAT_COST].value, score_cost_value(400), 0.01));
  CHECK(r.score < r.recorded_score);
  CHECK(strstr(r.cat[SCORE_CAT_COST].basis, "scale") != NULL);
  score_free(s);
}

/* Audit is judged on what each side answered: a side whose answers carry
 * only an action and allowed gets no audit marks, whatever the recorded
 * snapshots hold. */
static void test_audit_on_what_was_answered(void) {
  score_acc *s = score_new(SCORE_AGAINST, NULL, NULL);
  for (int i = 0; i < 8; i++) {
    char id[SCORE_ID_TEXT];
    tside rec = {"allow", "r", "rule", 1, 1, 10}, rep = {"allow", NULL, NULL, 1, 0, 0};
    replay_item it = mk(i, "p", "", rec, rep, 0, 0, 1, id);
    it.replayed = (replay_side){.action = "allow",
                                .allowed = 1,
                                .timing = REPLAY_TIMING_ROUNDTRIP,
                                .latency_us = 300,
                                .rtt_us = 300};
    score_add(s, &it);
  }
  score_report r;
  score_finish(s, &r);
  CHECK(r.complete == 8);
  CHECK(r.cat[SCORE_CAT_AUDIT].scored && r.cat[SCORE_CAT_AUDIT].value == 0);
  CHECK(r.recorded_cat[SCORE_CAT_AUDIT].value == 1);
  CHECK(r.cmp.sides[1].audit_id == 0 && r.cmp.sides[1].audit_reason == 0);
  CHECK(r.score == 0 && r.recorded_score == 100);
  score_free(s);
}

/* score_sides on its own, with three sides and an error. */
static void test_three_sides(void) {
  const char *names[3] = {"live", "a", "b"};
  score_sides *s = score_sides_new(3, names, NULL, 0);
  CHECK(s != NULL);
  for (int i = 0; i < 10; i++) {
    replay_side live = {.action = "allow",
                        .rule = "r",
                        .policy_version = "v",
                        .decision_id = "x",
                        .timing = REPLAY_TIMING_INPROCESS,
                        .latency_us = 20};
    replay_side a = live, b = live;
    b.action = i < 5 ? "deny" : "allow";
    const replay_side *ans[3] = {&live, &a, i == 9 ? NULL : &b};
    CHECK(score_sides_add(s, i < 4 ? "q" : "p", ans, NULL, "allow") == 0);
  }
  score_comparison c;
  score_sides_finish(s, &c);
  CHECK(c.nsides == 3);
  CHECK(c.sides[0].correct == 10 && c.sides[1].correct == 10 && c.sides[2].correct == 4);
  CHECK(c.sides[2].errors == 1);
  CHECK(c.sides[0].score == c.sides[1].score && c.sides[2].score < c.sides[1].score);
  CHECK(c.npoints == 2 && strcmp(c.points[0].point, "p") == 0);
  CHECK(c.points[1].sides[2].correct == 0); /* q: decisions 0..3, all denied */
  score_sides_free(s);
  CHECK(score_sides_new(1, names, NULL, 0) == NULL);
}

/* ---- reports ---- */

static score_acc *report_fixture(score_labels **lp) {
  const char *text =
      "{\"key\":\"k0\",\"action\":\"allow\"}\n{\"key\":\"k1\",\"action\":\"block\"}\n";
  char err[128];
  score_labels_parse("labels.jsonl", text, strlen(text), lp, err, sizeof err);
  score_acc *s = score_new(SCORE_CANDIDATE, NULL, *lp);
  tside A = {"allow", "geofence", "rule", 1, 1, 3},
        B = {"block", "<script>x</script>", "rule", 0, 1, 40};
  char id[SCORE_ID_TEXT];
  for (int i = 0; i < 50; i++) {
    replay_item it = mk(i, "http_request", i % 2 ? "k1" : "k0", A, i % 5 ? A : B, 0,
                        (uint64_t)(2000 + 100 * i), 1, id);
    it.replayed.latency_us = 2 + i * 0.5;
    score_add(s, &it);
  }
  return s;
}

static int has(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

static void test_report_json_fields(void) {
  score_labels *l;
  score_acc *s = report_fixture(&l);
  score_report r;
  score_finish(s, &r);
  report_info info = {.snapshots_dir = "/tmp/snaps",
                      .policy_dir = "new/",
                      .labels_path = "labels.jsonl",
                      .wall_seconds = 0.5};
  json_buf b;
  json_buf_init(&b, NULL);
  CHECK(report_json(&b, &r, &info) == 0);
  arena a;
  arena_init(&a, NULL, 0, 0);
  value v;
  json_error je;
  CHECK_MSG(json_parse(&a, b.data, b.len, NULL, &v, &je) == 0, "%s at %s", je.message, je.path);
  if (v.kind == V_MAP) {
    const char *ints[] = {"seen", "replayed", "reproduced", "changed", "errors"};
    for (size_t i = 0; i < 5; i++) {
      const value *f = value_map_get(&v, ints[i], strlen(ints[i]));
      CHECK_MSG(f && f->kind == V_INT, "%s", ints[i]);
    }
    CHECK(value_map_get(&v, "replayed", 8)->i == 50);
    CHECK(value_map_get(&v, "changed", 7)->i == 10);
    CHECK(value_map_get(&v, "reproduced", 10)->i == 40);
    const value *score = value_map_get(&v, "score", 5);
    CHECK(score && (score->kind == V_DOUBLE || score->kind == V_INT));
    if (score && score->kind == V_DOUBLE) CHECK(near(score->d, r.score, 0.01));
    const value *mode = value_map_get(&v, "mode", 4);
    CHECK(mode && mode->kind == V_STRING && mode->n == 9 && memcmp(mode->s, "candidate", 9) == 0);
    const value *tr = value_map_get(&v, "transitions", 11);
    CHECK(tr && tr->kind == V_LIST && tr->n == 1);
    if (tr && tr->n) {
      const value *row = &tr->items[0];
      const value *from = value_map_get(row, "from", 4), *cnt = value_map_get(row, "count", 5),
                  *ex = value_map_get(row, "examples", 8);
      CHECK(from && from->n == 5 && memcmp(from->s, "allow", 5) == 0);
      CHECK(cnt && cnt->i == 10);
      CHECK(ex && ex->kind == V_LIST && ex->n == 3);
    }
    const value *labels = value_map_get(&v, "labels", 6);
    CHECK(labels && labels->kind == V_MAP);
    if (labels && labels->kind == V_MAP) {
      const value *rep = value_map_get(labels, "replayed", 8);
      CHECK(rep && value_map_get(rep, "accuracy", 8) != NULL);
      const value *conf = value_map_get(labels, "confusion", 9);
      CHECK(conf && value_map_get(conf, "replayed", 8)->kind == V_LIST);
    }
    const value *lat = value_map_get(&v, "latency_us", 10);
    CHECK(lat && value_map_get(lat, "replayed", 8) != NULL);
    const value *p99 = lat ? value_map_get(value_map_get(lat, "replayed", 8), "p99", 3) : NULL;
    CHECK(p99 && p99->kind == V_DOUBLE && near(p99->d, 26.5, 0.01));
    const value *bd = value_map_get(&v, "score_breakdown", 15);
    CHECK(bd && value_map_get(bd, "categories", 10)->n == 4);
    CHECK(value_map_get(&v, "cpu_ns", 6)->kind == V_MAP);
    CHECK(value_map_get(&v, "memory", 6)->kind == V_MAP);
    CHECK(value_map_get(&v, "audit", 5)->kind == V_MAP);
    CHECK(value_map_get(&v, "recorded_score", 14)->kind == V_DOUBLE);
  }
  arena_free(&a);
  json_buf_free(&b);
  score_free(s);
  score_labels_free(l);
}

/* A tag balance check: every element opened is closed in order, except the
 * void elements; no external reference anywhere. */
static int html_balanced(const char *h, char *why, size_t wn) {
  const char *voids[] = {"meta", "br", "hr", "img", "input", "link"};
  char stack[256][16];
  int depth = 0;
  for (const char *p = h; (p = strchr(p, '<')) != NULL;) {
    if (strncmp(p, "<!--", 4) == 0) {
      p = strstr(p, "-->");
      if (!p) return snprintf(why, wn, "unclosed comment"), 0;
      continue;
    }
    if (strncmp(p, "<!DOCTYPE", 9) == 0) {
      p++;
      continue;
    }
    int closing = p[1] == '/';
    const char *n = p + 1 + closing;
    size_t len = 0;
    while ((n[len] >= 'a' && n[len] <= 'z') || (n[len] >= '0' && n[len] <= '9')) len++;
    if (!len || len >= 16) return snprintf(why, wn, "bad tag near: %.30s", p), 0;
    const char *end = strchr(p, '>');
    if (!end) return snprintf(why, wn, "unterminated tag"), 0;
    int self = end[-1] == '/';
    int is_void = 0;
    for (size_t i = 0; i < sizeof voids / sizeof voids[0]; i++)
      if (strlen(voids[i]) == len && strncmp(voids[i], n, len) == 0) is_void = 1;
    if (closing) {
      if (depth == 0 || strncmp(stack[depth - 1], n, len) != 0 || stack[depth - 1][len])
        return snprintf(why, wn, "</%.*s> closes <%s>", (int)len, n,
                        depth ? stack[depth - 1] : "(none)"),
               0;
      depth--;
    } else if (!self && !is_void) {
      if (depth == 256) return snprintf(why, wn, "too deep"), 0;
      memcpy(stack[depth], n, len);
      stack[depth][len] = 0;
      depth++;
    }
    /* skip raw text of <style> */
    if (!closing && len == 5 && strncmp(n, "style", 5) == 0) {
      const char *close = strstr(end, "</style>");
      if (!close) return snprintf(why, wn, "unclosed style"), 0;
      p = close;
      continue;
    }
    p = end + 1;
  }
  if (depth) return snprintf(why, wn, "<%s> never closed", stack[depth - 1]), 0;
  return 1;
}

static void test_report_html_self_contained(void) {
  score_labels *l;
  score_acc *s = report_fixture(&l);
  score_report r;
  score_finish(s, &r);
  report_failures f;
  report_failures_init(&f, 0);
  char id[SCORE_ID_TEXT];
  tside A = {"allow", "geofence", "rule", 1, 1, 3}, B = {"block", "a&b", "rule", 0, 1, 40};
  replay_item it = mk(7, "http_request", "k0", A, B, 0, 0, 1, id);
  CHECK(report_failures_add(&f, &it) == 0);
  report_info info = {.snapshots_dir = "/tmp/<snaps>",
                      .policy_dir = "new/",
                      .labels_path = "labels.jsonl",
                      .wall_seconds = 0.5,
                      .generated_ns = 1764460800000000000LL,
                      .failures = &f};
  char *html = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&html, &len);
  CHECK(report_html(out, &r, &info) == 0);
  fclose(out);
  CHECK(has(html, "<!DOCTYPE html>"));
  CHECK(has(html, "<svg"));
  CHECK(has(html, "<rect")); /* histogram bars */
  CHECK(has(html, "<table"));
  CHECK(has(html, "<td>allow</td><td>block</td>"));         /* the transition row */
  CHECK(has(html, "0193c0de-0000-7000-8000-000000000000")); /* an example id */
  CHECK(has(html, "&lt;script&gt;x&lt;/script&gt;"));       /* a rule name, escaped */
  CHECK(!has(html, "<script"));
  CHECK(has(html, "/tmp/&lt;snaps&gt;"));
  CHECK(has(html, "a&amp;b"));
  CHECK(has(html, "p99"));
  CHECK(has(html, "Accuracy against labels"));
  CHECK(!has(html, "http://") && !has(html, "https://") && !has(html, "src=") &&
        !has(html, "url(") && !has(html, "@import") && !has(html, "href="));
  char why[256] = "";
  CHECK_MSG(html_balanced(html, why, sizeof why), "%s", why);
  free(html);

  /* the text summary */
  char *txt = NULL;
  out = open_memstream(&txt, &len);
  report_text(out, &r, &info);
  fclose(out);
  CHECK(has(txt, "candidate bundle"));
  CHECK(has(txt, "allow -> block"));
  CHECK(has(txt, "e.g. 0193c0de-0000-7000-8000-000000000000"));
  CHECK(has(txt, "score "));
  CHECK(has(txt, "accuracy   recorded"));
  CHECK(has(txt, "result: 10 of 50 decisions would change"));
  free(txt);

  /* a failure line */
  out = open_memstream(&txt, &len);
  report_failure_line(out, &it);
  fclose(out);
  CHECK(has(txt, "allow (rule geofence, 1.00) -> block (rule a&b, 1.00)"));
  free(txt);

  report_failures_free(&f);
  score_free(s);
  score_labels_free(l);
}

static void test_failures_limit(void) {
  report_failures f;
  report_failures_init(&f, 3);
  char id[SCORE_ID_TEXT];
  tside A = {"allow", "r", "rule", 1, 1, 3};
  for (int i = 0; i < 5; i++) {
    replay_item it = mk(i, "p", "", A, A, i == 4, 0, 1, id);
    CHECK(report_failures_add(&f, &it) == 0);
  }
  CHECK(f.n == 3 && f.omitted == 2);
  report_failures_free(&f);
}

/* An empty determinism report still renders everything. */
static void test_report_empty(void) {
  score_acc *s = score_new(SCORE_DETERMINISM, NULL, NULL);
  score_report r;
  score_finish(s, &r);
  report_info info = {.snapshots_dir = "/tmp/empty"};
  char *html = NULL;
  size_t len;
  FILE *out = open_memstream(&html, &len);
  CHECK(report_html(out, &r, &info) == 0);
  fclose(out);
  char why[256] = "";
  CHECK_MSG(html_balanced(html, why, sizeof why), "%s", why);
  CHECK(has(html, "No latency was measured"));
  free(html);
  json_buf b;
  json_buf_init(&b, NULL);
  CHECK(report_json(&b, &r, &info) == 0);
  CHECK(has(b.data, "\"deterministic\":false"));
  CHECK(has(b.data, "\"labels\":null"));
  json_buf_free(&b);
  score_free(s);
}

int main(void) {
  TEST_RUN(test_hist_percentiles_within_one_percent);
  TEST_RUN(test_weights_parse);
  TEST_RUN(test_transitions_rules_and_examples);
  TEST_RUN(test_tally_growth);
  TEST_RUN(test_labels_parse_and_find);
  TEST_RUN(test_label_accuracy_and_confusion);
  TEST_RUN(test_category_scales);
  TEST_RUN(test_score_formula_default_and_custom_weights);
  TEST_RUN(test_identical_sides_score_the_same);
  TEST_RUN(test_timing_on_the_recordings_scale);
  TEST_RUN(test_audit_on_what_was_answered);
  TEST_RUN(test_three_sides);
  TEST_RUN(test_report_json_fields);
  TEST_RUN(test_report_html_self_contained);
  TEST_RUN(test_failures_limit);
  TEST_RUN(test_report_empty);
  TEST_END();
}
