/* test_limit_ids.c — a local store names a limit's counters by an id made
 * from the strategy's and the limit's names (src/engine/names.c), not by
 * the names themselves. What users rely on must hold all the same:
 *
 *   - two strategies with a limit of the same name and the same caller
 *     count apart, and so do two limits of one strategy;
 *   - a reload of a bundle that keeps the names keeps the counts;
 *   - a counter file (--state-file) carries the counts to the next engine;
 *   - a key that is a number (written as text by the engine) and a limit
 *     read first by a rule reach the same counter as the limits stage;
 *   - a long caller key (past the key room) counts like a short one;
 *   - names too long for a key's head fail the limit, saying so. */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "verdict.h"

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static const char GATE[] =
    "strategy: gate\n"
    "decision_points: [a]\n"
    "limits:\n"
    "  q: {key: request.key, window: 1h, budget: 2, action: block}\n"
    "  r: {key: request.key, window: 1h, budget: 3, action: review}\n"
    "  n: {key: context.n, window: 1h, budget: 2, action: block, when: 'has(context.n)'}\n"
    "  watched: {key: who, window: 1h, budget: 5, when: 'has(context.charge)'}\n"
    "rules:\n"
    "  - {name: seen, if: 'has(context.peek) && limits.watched.count > 0', action: review}\n"
    "default: allow\n";

/* a strategy and a limit whose names are too long for a key's head */
static const char LONG[] =
    "strategy: a_strategy_with_a_rather_long_name_for_testing\n"
    "decision_points: [c]\n"
    "limits:\n"
    "  and_a_limit_whose_name_is_long_too_for_the_head: {key: request.key, window: 1h, budget: 2}\n"
    "on_error: block\n"
    "default: allow\n";

static const char OTHER[] =
    "strategy: other\n"
    "decision_points: [b]\n"
    "limits:\n"
    "  q: {key: request.key, window: 1h, budget: 2, action: block}\n"
    "default: allow\n";

static void write_file(const char *dir, const char *name, const char *text) {
  char path[400];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

static vd_engine *open_engine(const char *dir, const char *state_file) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  o.snapshots_dir = "";
  o.state_file = state_file;
  vd_engine *e = NULL;
  vd_error err;
  if (vd_engine_open(dir, &o, &e, &err) != 0) {
    fprintf(stderr, "open: %s\n", err.message);
    return NULL;
  }
  return e;
}

/* The action for a request to decision point `point` with API key `key`
 * and context `ctx` (a JSON object). */
static const char *decide(vd_engine *e, vd_decision *d, const char *point, const char *key,
                          const char *ctx) {
  static char req[1200];
  snprintf(req, sizeof req, "{\"action\":\"%s\",\"key\":\"%s\",\"context\":%s}", point, key, ctx);
  vd_error err;
  if (vd_decide_json(e, req, -1, d, &err) != 0) {
    fprintf(stderr, "decide: %s\n", err.message);
    return "error";
  }
  return vd_decision_action(d);
}

int main(void) {
  char root[256];
  test_tmpdir(root, sizeof root, "limit-ids");
  char bundle[300], state[300];
  snprintf(bundle, sizeof bundle, "%s/bundle", root);
  snprintf(state, sizeof state, "%s/counters", root);
  mkdir(bundle, 0700);
  write_file(bundle, "gate.yaml", GATE);
  write_file(bundle, "other.yaml", OTHER);
  write_file(bundle, "long.yaml", LONG);

  vd_engine *e = open_engine(bundle, state);
  CHECK(e != NULL);
  if (!e) TEST_END();
  vd_decision *d = vd_decision_new();

  /* gate's q refuses k1's third request; other's q (same name, same
   * caller) and gate's r (same caller) count apart */
  CHECK_STR(decide(e, d, "a", "k1", "{}"), "allow");
  CHECK_STR(decide(e, d, "a", "k1", "{}"), "allow");
  CHECK_STR(decide(e, d, "b", "k1", "{}"), "allow");
  CHECK_STR(decide(e, d, "b", "k1", "{}"), "allow");
  CHECK_STR(decide(e, d, "a", "k1", "{}"), "block");
  CHECK_STR(vd_decision_rule(d), "limits.q");
  CHECK_STR(decide(e, d, "b", "k1", "{}"), "block");
  CHECK_STR(decide(e, d, "a", "k2", "{}"), "allow"); /* another caller: its own counters */

  /* a number key, written as text, counts on one counter */
  CHECK_STR(decide(e, d, "a", "k3", "{\"n\": 7}"), "allow");
  CHECK_STR(decide(e, d, "a", "k4", "{\"n\": 7}"), "allow");
  CHECK_STR(decide(e, d, "a", "k5", "{\"n\": 7}"), "block");
  CHECK_STR(vd_decision_rule(d), "limits.n");

  /* `watched` charged by the stage, then read by a rule in a decision
   * the stage passes it over: the rule finds the stage's counter */
  CHECK_STR(decide(e, d, "a", "k7", "{\"who\": \"ana\", \"peek\": 1}"), "allow"); /* count 0 */
  CHECK_STR(decide(e, d, "a", "k8", "{\"who\": \"ana\", \"charge\": 1}"), "allow");
  CHECK_STR(decide(e, d, "a", "k9", "{\"who\": \"ana\", \"peek\": 1}"), "review");
  CHECK_STR(vd_decision_rule(d), "seen");

  /* names too long for a key's head: the limit fails, saying so */
  CHECK_STR(decide(e, d, "c", "k1", "{}"), "block");
  CHECK_STR(vd_decision_source(d), "error");
  CHECK(strstr(vd_decision_reason(d), "names are too long") != NULL);

  /* a long caller key (the store's key does not fit its room) */
  char lng[401];
  memset(lng, 'x', 400);
  lng[400] = '\0';
  CHECK_STR(decide(e, d, "a", lng, "{}"), "allow");
  CHECK_STR(decide(e, d, "a", lng, "{}"), "allow");
  CHECK_STR(decide(e, d, "a", lng, "{}"), "block");

  /* reload with the same names: the counts stay */
  vd_error err;
  CHECK(vd_engine_reload(e, &err) == 0);
  CHECK_STR(decide(e, d, "a", "k2", "{}"), "allow"); /* k2's second */
  CHECK_STR(decide(e, d, "a", "k2", "{}"), "block"); /* and third */
  vd_engine_close(e);                                /* writes the counter file */

  /* a new engine on the counter file: the counts stay */
  e = open_engine(bundle, state);
  CHECK(e != NULL);
  if (e) {
    CHECK_STR(decide(e, d, "a", "k1", "{}"), "block");
    CHECK_STR(decide(e, d, "a", "k6", "{}"), "allow");
    vd_engine_close(e);
  }

  vd_decision_free(d);
  nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  TEST_END();
}
