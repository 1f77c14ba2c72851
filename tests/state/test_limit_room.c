/* test_limit_room.c — a decision object reused across strategies with
 * different numbers of limits: the readings (kept by the decision object
 * from one decision to the next, so that a decision with limits allocates
 * nothing for them) start over each decision, grow when a strategy has more
 * limits than the last, and every limit is charged and read as if the
 * object were new — including a limit the stage passes over and a rule
 * reads, and one whose key is too long for the reading's own key room. */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "test.h"
#include "verdict.h"

static const char ONE[] =
    "strategy: one\n"
    "decision_points: [a]\n"
    "actions: {allow: true, block: false}\n"
    "limits:\n"
    "  solo: {key: user, window: 1h, budget: 4, action: block}\n"
    "default: allow\n";

static const char THREE[] =
    "strategy: three\n"
    "decision_points: [b]\n"
    "actions: {allow: true, block: false, hold: false}\n"
    "limits:\n"
    "  first: {key: user, window: 1h, budget: 10, action: block}\n"
    "  second: {key: note, window: 1h, budget: 10, action: block}\n"
    "  third: {key: \"[user, ip]\", window: 1h, budget: 2, action: block}\n"
    "  watched: {key: user, window: 1h, budget: 1, action: hold}\n"
    "rules:\n"
    "  - name: watch\n"
    "    if: limits.watched.count > 0\n"
    "    action: allow\n"
    "default: allow\n";

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static vd_engine *engine;
static vd_decision *d;

static const char *decide(const char *point, const char *ctx, const char *cands) {
  char req[1024];
  snprintf(req, sizeof req, "{\"action\":\"%s\",\"context\":%s%s%s}", point, ctx,
           cands ? ",\"candidates\":" : "", cands ? cands : "");
  vd_error err;
  if (vd_decide_json(engine, req, -1, d, &err) != 0) {
    fprintf(stderr, "decide %s: %s\n", req, err.message);
    return "refused";
  }
  return vd_decision_action(d) ? vd_decision_action(d) : "(none)";
}

/* The reading of the limit named name in the last decision, or NULL. */
static const limit_read *reading(const char *name) {
  for (uint32_t i = 0; i < d->nlimit_reads; i++)
    if (strcmp(d->limits_of->limits[i].name, name) == 0) return &d->limit_reads[i];
  return NULL;
}

static void write_file(const char *dir, const char *name, const char *text) {
  char path[400];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

int main(void) {
  char dir[256];
  test_tmpdir(dir, sizeof dir, "limit_room");
  write_file(dir, "one.yaml", ONE);
  write_file(dir, "three.yaml", THREE);
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_error err;
  if (vd_engine_open(dir, &o, &engine, &err) != 0) {
    fprintf(stderr, "%s\n", err.message);
    return 2;
  }
  d = vd_decision_new();
  /* a caller key long enough that the store's key does not fit its room */
  char note[200], ctx[400];
  memset(note, 'n', sizeof note - 1);
  note[sizeof note - 1] = '\0';
  snprintf(ctx, sizeof ctx, "{\"user\":\"ana\",\"ip\":\"10.0.0.1\",\"note\":\"%s\"}", note);

  CHECK_STR(decide("a", "{\"user\":\"ana\"}", NULL), "allow"); /* one limit: a room for one */
  CHECK(d->nlimit_reads == 1 && reading("solo") && reading("solo")->r.charged);

  /* three limits the stage reads, one (its action not a candidate) a rule reads */
  CHECK_STR(decide("b", ctx, "[\"allow\",\"block\"]"), "allow");
  CHECK(d->nlimit_reads == 4);
  const limit_read *r = reading("third");
  CHECK(r && r->state == LIMIT_READ && r->r.count == 0 && r->r.charged);
  CHECK(r && r->key_len == 12 &&
        memcmp(r->key,
               "ana\x1f"
               "10.0.0.1",
               12) == 0);
  r = reading("second");
  CHECK(r && r->state == LIMIT_READ && r->r.charged && r->key_len == strlen(note) &&
        memcmp(r->key, note, strlen(note)) == 0);
  r = reading("watched"); /* passed over by the stage, read (not charged) by the rule */
  CHECK(r && r->state == LIMIT_READ && !r->r.charged && r->r.count == 0);

  /* back to one limit: the readings start over, nothing of the last decision shows */
  CHECK_STR(decide("a", "{\"user\":\"bo\"}", NULL), "allow");
  CHECK(d->nlimit_reads == 1 && reading("solo")->r.count == 0);
  CHECK(reading("third") == NULL);

  /* the second charge of [ana, note] is counted: the third is refused by `third` */
  CHECK_STR(decide("b", ctx, "[\"allow\",\"block\"]"), "allow");
  CHECK(reading("third") && reading("third")->r.count == 1);
  CHECK(reading("first") && reading("first")->r.count == 1);
  CHECK_STR(decide("b", ctx, "[\"allow\",\"block\"]"), "block");
  CHECK_STR(vd_decision_rule(d), "limits.third");
  CHECK(reading("third") && reading("third")->r.exceeded && !reading("third")->r.charged);

  /* only `watched` is a candidate's: it alone is charged (the rule sees the
   * charge); the others, passed over, are not */
  CHECK_STR(decide("b", ctx, "[\"hold\",\"allow\"]"), "allow");
  CHECK_STR(vd_decision_rule(d), "watch");
  CHECK(reading("watched") && reading("watched")->r.charged);
  for (uint32_t q = 0; q < 3; q++) /* block is no candidate's: not charged */
    CHECK(d->limit_reads[q].state != LIMIT_READ || !d->limit_reads[q].r.charged);
  CHECK_STR(decide("b", ctx, "[\"hold\",\"allow\"]"), "hold");
  CHECK_STR(vd_decision_rule(d), "limits.watched");

  /* the counters of `one` were kept apart from the decisions in between */
  for (int i = 1; i < 4; i++) CHECK_STR(decide("a", "{\"user\":\"ana\"}", NULL), "allow");
  CHECK_STR(decide("a", "{\"user\":\"ana\"}", NULL), "block");

  vd_decision_free(d);
  vd_engine_close(engine);
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  TEST_END();
}
