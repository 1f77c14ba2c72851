/* test_limit_keys.c — a limit key of the shapes the engine reads without
 * the evaluator (one variable: a context field or a let; `request.key`)
 * decides, records and fails exactly as the same key evaluated does.
 *
 * Two bundles, one request stream: in A the keys are written plainly
 * (`ip`, `request.key`, `who`, `n`, `missing`), in B as expressions with the
 * same value (`ip + ''`, `request.key + ''`, ...), which always run the
 * evaluator. Every decision must come out the same (action, rule, reason —
 * the reason of a key that fails included) and every snapshot must record
 * the same counters (keys, counts, penalties, charges). (A let may not be
 * named `request`, so `request.key` is always the request's key.)
 *
 * Then again with only the limits of the plain shapes (a context field,
 * `request.key`; no `when`, no `charge`): a strategy whose every limit is so
 * is served by the limits stage's own short path (decide.c,
 * run_limits_plain), which must decide and record as the evaluator does. */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/snapshot.h"
#include "test.h"
#include "verdict.h"

static const char HEAD[] =
    "strategy: gate\n"
    "decision_points: [api]\n"
    "let:\n"
    "  who: \"'user:' + user\"\n"
    "limits:\n";

/* name, key in A, key in B */
static const char *const LIMITS[][3] = {
    {"by_ip", "ip", "ip + ''"},
    {"by_key", "request.key", "request.key + ''"},
    {"by_who", "who", "who + ''"},
    {"by_n", "n", "n + 0"},
    {"by_missing", "missing", "missing + ''"},
};

static const char TAIL[] =
    "rules:\n"
    "  - {name: busy, if: 'limits.by_ip.count > 2', action: block}\n"
    "  - {name: banned, if: 'ip == \"10.0.0.5\"', action: block}\n"
    "default: allow\n";

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Whether LIMITS[i] is kept in a bundle of plain limits: a let (`who`) and
 * a `when` (by_missing's) are not plain. */
static int in_plain(size_t i) {
  return strcmp(LIMITS[i][0], "by_who") && strcmp(LIMITS[i][0], "by_missing");
}

/* A bundle in root/name whose limits use column `col` of LIMITS (only the
 * plain ones when `plain`); `when` keeps the failing key to requests that
 * ask for it. */
static vd_engine *open_bundle(const char *root, const char *name, int col, int plain, char *snaps,
                              size_t cap) {
  char dir[256], path[300];
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  mkdir(dir, 0700);
  snprintf(path, sizeof path, "%s/gate.yaml", dir);
  FILE *f = fopen(path, "w");
  if (!f) return NULL;
  fputs(HEAD, f);
  for (size_t i = 0; i < sizeof LIMITS / sizeof LIMITS[0]; i++)
    if (!plain || in_plain(i))
      fprintf(f, "  %s: {key: \"%s\", window: 1h, budget: 3, penalty: 1h%s}\n", LIMITS[i][0],
              LIMITS[i][col],
              !strcmp(LIMITS[i][0], "by_missing") ? ", when: 'has(context.probe)'" : "");
  fputs(TAIL, f);
  fclose(f);
  snprintf(snaps, cap, "%s/snaps", dir);
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  o.snapshots_dir = snaps;
  o.snapshot_durability = VD_DURABILITY_NONE;
  vd_engine *e = NULL;
  vd_error err;
  if (vd_engine_open(dir, &o, &e, &err) != 0) {
    fprintf(stderr, "%s: %s\n", name, err.message);
    return NULL;
  }
  return e;
}

/* errors: how many decisions of the stream fail (a key that fails) */
static void same_decisions(vd_engine *a, vd_engine *b, int errors_expected) {
  static const char *const reqs[] = {
      "{\"action\":\"api\",\"key\":\"k1\",\"context\":{\"ip\":\"10.0.0.1\",\"user\":\"ana\",\"n\":"
      "7}}",
      "{\"action\":\"api\",\"key\":\"k2\",\"context\":{\"ip\":\"10.0.0.1\",\"user\":\"bo\",\"n\":7}"
      "}",
      "{\"action\":\"api\",\"key\":\"k1\",\"context\":{\"ip\":\"10.0.0.2\",\"user\":\"ana\",\"n\":"
      "8}}",
      "{\"action\":\"api\",\"key\":\"k1\",\"context\":{\"ip\":\"10.0.0.1\",\"user\":\"ana\",\"n\":"
      "7}}",
      "{\"action\":\"api\",\"key\":\"k1\",\"context\":{\"ip\":\"10.0.0.1\",\"user\":\"ana\",\"n\":"
      "7}}",
      /* no ip: the first limit's key fails (on_error) */
      "{\"action\":\"api\",\"key\":\"k3\",\"context\":{\"user\":\"cy\",\"n\":1}}",
      /* no request key: request.key reads "" */
      "{\"action\":\"api\",\"context\":{\"ip\":\"10.0.0.3\",\"user\":\"cy\",\"n\":1}}",
      /* the context's fields in other orders: the same address, the same
       * counter (the engine remembers where it found a field last), and the
       * rule that reads `ip` after the limit did sees it too */
      "{\"action\":\"api\",\"key\":\"k5\",\"context\":{\"n\":3,\"user\":\"eve\",\"ip\":"
      "\"10.0.0.5\"}}",
      "{\"action\":\"api\",\"key\":\"k5\",\"context\":{\"ip\":\"10.0.0.5\",\"n\":3,\"user\":"
      "\"eve\"}}",
      "{\"action\":\"api\",\"key\":\"k5\",\"context\":{\"user\":\"eve\",\"ipv6\":\"::1\",\"ip\":"
      "\"10.0.0.5\",\"n\":3}}",
      /* the absent field of by_missing: its key fails */
      "{\"action\":\"api\",\"key\":\"k4\",\"context\":{\"ip\":\"10.0.0.9\",\"user\":\"dan\","
      "\"n\":2,\"probe\":true}}",
  };
  vd_decision *da = vd_decision_new(), *db = vd_decision_new();
  int blocks = 0, errors = 0;
  for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
    vd_error ea, eb;
    int ra = vd_decide_json(a, reqs[i], -1, da, &ea), rb = vd_decide_json(b, reqs[i], -1, db, &eb);
    CHECK(ra == 0 && rb == 0);
    if (ra || rb) continue;
    const char *aa = vd_decision_action(da), *ab = vd_decision_action(db);
    CHECK_STR(aa ? aa : "(none)", ab ? ab : "(none)");
    CHECK_STR(vd_decision_source(da), vd_decision_source(db));
    const char *ru = vd_decision_rule(da), *rv = vd_decision_rule(db);
    CHECK_STR(ru ? ru : "(none)", rv ? rv : "(none)");
    const char *wa = vd_decision_reason(da), *wb = vd_decision_reason(db);
    CHECK_STR(wa ? wa : "(none)", wb ? wb : "(none)");
    blocks += aa && !strcmp(aa, "block");
    errors += !strcmp(vd_decision_source(da), "error");
  }
  /* the stream reaches the refusals and the failures it is there for */
  CHECK_MSG(blocks >= 5, "%d blocks", blocks);
  CHECK_MSG(errors == errors_expected, "%d error decisions", errors);
  vd_decision_free(da);
  vd_decision_free(db);
}

/* The counters of each snapshot of dir, in order, joined by newlines. */
static char *counters_of(const char *dir) {
  snapshot_reader *r = NULL;
  snapshot_filter f;
  snapshot_filter_init(&f);
  char rerr[256];
  if (snapshot_reader_open(dir, &f, &r, rerr, sizeof rerr) != 0) {
    fprintf(stderr, "%s\n", rerr);
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *out = calloc(1, cap);
  snapshot_rec rec;
  while (out && snapshot_reader_next(r, &rec) == 1) {
    const char *p = strstr(rec.payload, "\"counters\":{");
    const char *q = p ? strstr(p, "}}") : NULL;
    size_t len = p && q ? (size_t)(q - p) + 2 : 4;
    if (n + len + 2 > cap) break;
    memcpy(out + n, p && q ? p : "none", len);
    n += len;
    out[n++] = '\n';
  }
  snapshot_reader_close(r);
  return out;
}

/* The same stream through A and B (plain: the plain limits only). */
static void compare(const char *root, int plain) {
  char sa[300], sb[300];
  vd_engine *a = open_bundle(root, plain ? "a-plain" : "a", 1, plain, sa, sizeof sa);
  vd_engine *b = open_bundle(root, plain ? "b-plain" : "b", 2, plain, sb, sizeof sb);
  CHECK(a && b);
  if (a && b) {
    /* no ip fails by_ip; a probe without its field fails by_missing */
    same_decisions(a, b, plain ? 1 : 2);
    vd_engine_close(a); /* writes the snapshots out */
    vd_engine_close(b);
    a = b = NULL;
    char *ca = counters_of(sa), *cb = counters_of(sb);
    CHECK(ca && cb);
    if (ca && cb) {
      CHECK_MSG(strcmp(ca, cb) == 0, "\nA:\n%s\nB:\n%s", ca, cb);
      /* and they hold what the stream did: ip 10.0.0.1 at its third charge */
      CHECK(strstr(ca, "\"by_ip\":{\"key\":\"10.0.0.1\",\"count\":2") != NULL);
      CHECK(strstr(ca, "\"by_n\":{\"key\":\"7\"") != NULL);
      CHECK(plain || strstr(ca, "\"by_who\":{\"key\":\"user:ana\"") != NULL);
      CHECK(strstr(ca, "\"by_key\":{\"key\":\"k1\"") != NULL);
      CHECK(strstr(ca, "\"by_key\":{\"key\":\"\",\"count\":0") != NULL);
      CHECK(strstr(ca, "\"by_ip\":{\"key\":\"10.0.0.5\",\"count\":2") != NULL);
    }
    free(ca);
    free(cb);
  }
  if (a) vd_engine_close(a);
  if (b) vd_engine_close(b);
}

int main(void) {
  char root[256];
  test_tmpdir(root, sizeof root, "limit-keys");
  compare(root, 0);
  compare(root, 1);
  nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  TEST_END();
}
