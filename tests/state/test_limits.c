/* test_limits.c — a strategy's `limits` through the engine: the first limit
 * that refuses decides (as limits.NAME), `when` and `charge` choose what is
 * charged, a limit whose action is not a candidate is passed over and not
 * charged, a key that fails is an on_error decision, rules read counters
 * without charging them, every reading lands in the snapshot's
 * inputs.counters, and replay reproduces every rate-limited decision from
 * those readings alone (the live store is gone by then). Also: bad `limits`
 * are refused with their place, and `verdict test`'s `counters:` presets. */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "policy/policy.h"
#include "replay/replay.h"
#include "snapshot/snapshot.h"
#include "test.h"
#include "verdict.h"

static const char STRATEGY[] =
    "strategy: gate\n"
    "decision_points: [login, login_failed, reset]\n"
    "actions: {allow: true, block: false, challenge: {allowed: false, review: true}}\n"
    "limits:\n"
    "  failures:\n"
    "    key: ip\n"
    "    when: request.action != 'reset'\n"
    "    charge: request.action == 'login_failed'\n"
    "    window: 10m\n"
    "    budget: 3\n"
    "    penalty: 10m\n"
    "    action: block\n"
    "    reason: too many failures\n"
    "  resets:\n"
    "    key: \"[user, 'reset']\"\n"
    "    when: request.action == 'reset'\n"
    "    window: 1m\n"
    "    budget: 1\n"
    "    action: block\n"
    "  per_user:\n"
    "    key: user\n"
    "    window: 1h\n"
    "    budget: 100\n"
    "rules:\n"
    "  - name: busy-user\n"
    "    if: request.action == 'login' && limits.per_user.count > 4\n"
    "    action: challenge\n"
    "  - name: reset-abuser\n"
    "    if: request.action == 'login' && limits.resets.count >= 1\n"
    "    action: challenge\n"
    "default: allow\n";

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static vd_engine *engine;
static vd_decision *d;
static char dir[256], snaps[300], store[300];

static const char *decide(const char *point, const char *ctx, const char *cands) {
  char req[512];
  snprintf(req, sizeof req, "{\"action\":\"%s\",\"context\":%s%s%s}", point, ctx,
           cands ? ",\"candidates\":" : "", cands ? cands : "");
  vd_error err;
  if (vd_decide_json(engine, req, -1, d, &err) != 0) {
    fprintf(stderr, "decide %s: %s\n", req, err.message);
    return "refused";
  }
  return vd_decision_action(d) ? vd_decision_action(d) : "(none)";
}

static void test_engine(void) {
  const char *ana = "{\"ip\":\"10.0.0.1\",\"user\":\"ana\"}";
  const char *bo = "{\"ip\":\"10.0.0.2\",\"user\":\"bo\"}";
  /* attempts are checked, not charged */
  for (int i = 0; i < 3; i++) CHECK_STR(decide("login", ana, NULL), "allow");
  /* three failure reports use up the budget (the third starts the penalty) */
  for (int i = 0; i < 3; i++) CHECK_STR(decide("login_failed", ana, NULL), "allow");
  CHECK_STR(decide("login", ana, NULL), "block");
  CHECK_STR(vd_decision_source(d), "rule");
  CHECK_STR(vd_decision_rule(d), "limits.failures");
  CHECK(strstr(vd_decision_reason(d), "too many failures") != NULL);
  /* another address is not affected */
  CHECK_STR(decide("login", bo, NULL), "allow");
  /* a request whose candidates leave out block passes the limit over */
  CHECK_STR(decide("login", ana, "[\"allow\",\"challenge\"]"), "challenge");
  CHECK_STR(vd_decision_rule(d), "busy-user"); /* per_user: 3 + 3 + 1 = 7 > 4 */
  /* resets: one a minute per user; the list key joins user and a tag */
  CHECK_STR(decide("reset", bo, NULL), "allow");
  CHECK_STR(decide("reset", bo, NULL), "block");
  CHECK_STR(vd_decision_rule(d), "limits.resets");
  /* a key that cannot be computed: on_error, naming the limit */
  CHECK_STR(decide("login", "{\"user\":\"cy\"}", NULL), "block");
  CHECK_STR(vd_decision_source(d), "error");
  CHECK_STR(vd_decision_rule(d), "limits.failures");
  CHECK(strstr(vd_decision_reason(d), "key") != NULL);
  /* a rule reads a limit the stage did not reach: read, never charged */
  CHECK_STR(decide("login", bo, NULL), "challenge");
  CHECK_STR(vd_decision_rule(d), "reset-abuser");

  vd_engine_counters c;
  vd_engine_stats(engine, &c);
  /* charged: 3 failures; per_user by every decision that reached it (ana
   * 3 + 3 + 1, bo 1 + 1 + 1: the blocked login and the refused reset stopped
   * before it); one reset */
  CHECK_MSG(c.limit_charges == 3 + 10 + 1, "charges %llu", c.limit_charges);
  CHECK(c.limit_refusals >= 2);
  CHECK(c.state_keys >= 4);
}

/* Every snapshot's inputs.counters, in order, for the checks below. */
static void test_snapshots(void) {
  snapshot_reader *r = NULL;
  snapshot_filter f;
  snapshot_filter_init(&f);
  char rerr[256];
  CHECK(snapshot_reader_open(snaps, &f, &r, rerr, sizeof rerr) == 0);
  if (!r) return;
  snapshot_rec rec;
  int n = 0, saw_block = 0, saw_readonly = 0, saw_unreached = 0;
  while (snapshot_reader_next(r, &rec) == 1) {
    n++;
    const char *p = strstr(rec.payload, "\"counters\":{");
    CHECK(p != NULL);
    if (!p) continue;
    if (strstr(p,
               "\"failures\":{\"key\":\"10.0.0.1\",\"count\":3,\"penalized\":true,"
               "\"charged\":false}"))
      saw_block = 1;
    /* a limit whose `when` is false is not read, and not recorded */
    if (strstr(p, "\"per_user\":{\"key\":\"ana\"") && !strstr(p, "\"resets\"")) saw_unreached = 1;
    /* the rule's read of resets: the list key joined by U+001F, not charged */
    if (strstr(p,
               "\"resets\":{\"key\":\"bo\\u001freset\",\"count\":1,\"penalized\":false,"
               "\"charged\":false}"))
      saw_readonly = 1;
  }
  snapshot_reader_close(r);
  CHECK_MSG(n == 13, "%d snapshots", n);
  CHECK(saw_block && saw_readonly && saw_unreached);
}

typedef struct tally {
  int n, same, blocks_same;
} tally;

static int on_item(void *user, const replay_item *it) {
  tally *t = user;
  t->n++;
  if (it->error == 0 && it->same) {
    t->same++;
    if (it->recorded.action && !strcmp(it->recorded.action, "block")) t->blocks_same++;
  } else {
    fprintf(stderr, "not reproduced: %s -> %s (%s)\n", it->request_json,
            it->error ? it->error_message : it->replayed.action, it->recorded.action);
  }
  return 0;
}

static void test_replay(void) {
  replay_opts ro;
  memset(&ro, 0, sizeof ro);
  ro.snapshots_dir = snaps;
  ro.store_dir = store;
  replay_stats st;
  tally t = {0};
  char err[512];
  CHECK(replay_run(&ro, on_item, &t, &st, err, sizeof err) == 0);
  CHECK_MSG(st.replayed == 13 && st.reproduced == 13 && st.errors == 0, "%llu of %llu",
            (unsigned long long)st.reproduced, (unsigned long long)st.replayed);
  /* the blocks (two limits, one key error) replayed as blocks with no store */
  CHECK(t.blocks_same == 3);
}

static void test_bad_limits(void) {
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"limits: {x: {window: 1m, budget: 1}}\n", "missing 'key'"},
      {"limits: {x: {key: ip, budget: 1}}\n", "missing 'window'"},
      {"limits: {x: {key: ip, window: 1m}}\n", "missing 'budget'"},
      {"limits: {x: {key: ip, window: 10 minutes, budget: 1}}\n", "not a duration"},
      {"limits: {x: {key: ip, window: 1m, budget: 0}}\n", "1 to 1000000"},
      {"limits: {x: {key: ip, window: 1m, budget: 1, penalty: 1m1h}}\n", "largest"},
      {"limits: {x: {key: 'ip +', window: 1m, budget: 1}}\n", "limits.x.key"},
      {"limits: {x-y: {key: ip, window: 1m, budget: 1}}\n", "not a valid limit name"},
      {"limits: {x: {key: ip, windw: 1m, budget: 1}}\n", "did you mean 'window'"},
      {"limits: {x: {key: ip, window: 1m, budget: 1}}\n"
       "tests: [{counters: {y: 1}, expect: allow}]\n",
       "no limit named 'y'"},
      {"limits: {x: {key: ip, window: 1m, budget: 1}}\n"
       "rules: [{if: 'limits.nope.count > 1', action: block}]\n",
       "no limit named 'nope'"},
      {"limits: {x: {key: ip, window: 1m, budget: 1}}\n"
       "let: {busy: 'limits.y.exceeded'}\n"
       "rules: [{if: busy, action: block}]\n",
       "no limit named 'y'"},
      /* another limit's key, when and charge are checked the same way */
      {"limits: {x: {key: ip, window: 1m, budget: 1},"
       " y: {key: ip, when: 'limits.xx.exceeded', window: 1m, budget: 1}}\n",
       "no limit named 'xx'"},
      {"limits: {x: {key: ip, window: 1m, budget: 1},"
       " y: {key: ip, charge: '!limits.xy.exceeded', window: 1m, budget: 1}}\n",
       "no limit named 'xy'"},
      {"limits: {x: {key: ip, window: 1m, budget: 1},"
       " y: {key: 'ip + string(limits.xz.count)', window: 1m, budget: 1}}\n",
       "no limit named 'xz'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[512];
    snprintf(text, sizeof text, "strategy: s\ndefault: allow\n%s", cases[i].text);
    policy_bundle *b = NULL;
    policy_diags diags;
    memset(&diags, 0, sizeof diags);
    int rc = policy_bundle_from_text("s.yaml", text, strlen(text), &b, &diags);
    int found = 0;
    for (size_t k = 0; k < diags.n; k++)
      if (strstr(diags.items[k].message, cases[i].want) ||
          strstr(diags.items[k].key, cases[i].want))
        found = diags.items[k].line > 0;
    CHECK_MSG(rc != 0 && found, "case %zu: want an error with '%s'", i, cases[i].want);
    policy_bundle_free(b);
    policy_diags_free(&diags);
  }
}

/* `counters:` presets in inline tests, as `verdict test` runs them. */
static void test_presets(void) {
  policy_bundle *b = NULL;
  policy_diags diags;
  memset(&diags, 0, sizeof diags);
  CHECK(policy_bundle_from_text("g.yaml", STRATEGY, sizeof STRATEGY - 1, &b, &diags) == 0);
  policy_diags_free(&diags);
  if (!b) return;
  vd_decision *dd = vd_decision_new();
  decide_limits lim;
  decide_limits_init(&lim, NULL);
  const char *req = "{\"action\":\"login\",\"context\":{\"ip\":\"1.2.3.4\",\"user\":\"u\"}}";
  vd_error err;
  /* no counters: empty, however often */
  for (int i = 0; i < 3; i++) {
    CHECK(engine_decide_json_inputs(b, NULL, &lim, req, strlen(req), 0, -1, NULL, dd, &err) == 0);
    CHECK_STR(dd->action, "allow");
  }
  policy_diags_free(&diags);
  static const char preset[] =
      "strategy: t\ndefault: allow\n"
      "limits: {x: {key: ip, window: 1m, budget: 2, action: block}}\n"
      "tests:\n"
      "  - {context: {ip: a}, counters: {x: 1}, expect: allow}\n"
      "  - {context: {ip: a}, counters: {x: 2}, expect: block}\n"
      "  - {context: {ip: a}, counters: {x: {count: 0, penalized: true}},"
      " expect: block}\n";
  policy_bundle *p = NULL;
  memset(&diags, 0, sizeof diags);
  CHECK(policy_bundle_from_text("t.yaml", preset, sizeof preset - 1, &p, &diags) == 0);
  policy_diags_free(&diags);
  if (p) {
    const strategy *s = &p->strategies[0];
    CHECK(s->ntests == 3 && s->nlimits == 1 && s->limits[0].window_ns == 60000000000LL);
    const char *want[] = {"allow", "block", "block"};
    for (uint32_t i = 0; i < s->ntests && i < 3; i++) {
      const char *rq = "{\"action\":\"t\",\"context\":{\"ip\":\"a\"}}";
      CHECK(engine_decide_json_inputs(p, NULL, &lim, rq, strlen(rq), 0, -1, &s->tests[i].counters,
                                      dd, &err) == 0);
      CHECK_STR(dd->action, want[i]);
    }
    policy_bundle_free(p);
  }
  vd_decision_free(dd);
  policy_bundle_free(b);
}

int main(void) {
  test_tmpdir(dir, sizeof dir, "limits");
  char path[320];
  snprintf(path, sizeof path, "%s/gate.yaml", dir);
  FILE *f = fopen(path, "w");
  fputs(STRATEGY, f);
  fclose(f);
  snprintf(snaps, sizeof snaps, "%s/snaps", dir);
  snprintf(store, sizeof store, "%s/versions", dir);
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = store;
  o.snapshots_dir = snaps;
  o.snapshot_durability = VD_DURABILITY_NONE;
  vd_error err;
  if (vd_engine_open(dir, &o, &engine, &err) != 0) {
    fprintf(stderr, "%s\n", err.message);
    return 2;
  }
  d = vd_decision_new();
  test_engine();
  vd_decision_free(d);
  vd_engine_close(engine); /* the live counters are gone from here on */
  test_snapshots();
  test_replay();
  test_bad_limits();
  test_presets();
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  TEST_END();
}
