/* test_limit_reads.c — a decision reads the rate-limit counters it needs
 * and no others, and its snapshot records exactly those.
 *
 * A rule, let or limit condition that reads `limits.NAME` (then `.count`
 * and the like, or `has(limits.NAME)`) reads limit NAME alone; the limits
 * stage reads each limit whose `when` holds; reading `limits` itself
 * (`size(limits)`, `limits['x']`, a macro over it) reads every limit. Each
 * case checks the decision, the counters it read (in process) and the
 * snapshot's inputs.counters, which must name the same limits.
 *
 * The throttle example bundle is the main case: a `login` reads
 * failed_logins, failed_logins_network and user_failures (the stage, whose
 * `when` holds for a login; user_failures is also the one the rule reads)
 * and not password_resets or api_hourly, whose `when` is false for a login. */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "engine/engine.h"
#include "snapshot/snapshot.h"
#include "test.h"
#include "verdict.h"

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  if (b) b[n] = 0;
  fclose(f);
  return b;
}

static int spit(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fputs(text, f) >= 0;
  return fclose(f) == 0 && ok ? 0 : -1;
}

typedef struct bench {
  char dir[256], policy[300], store[300], snaps[300];
  vd_engine *engine;
  vd_decision *d;
  int decided;        /* snapshots written so far */
  char want[64][160]; /* per snapshot: the limits its counters must name */
} bench;

/* An engine over one strategy file (text), its store and snapshots in a
 * scratch folder. 0, or -1 (said why). */
static int bench_open(bench *b, const char *text) {
  memset(b, 0, sizeof *b);
  test_tmpdir(b->dir, sizeof b->dir, "limit-reads");
  snprintf(b->policy, sizeof b->policy, "%s/policy", b->dir);
  snprintf(b->store, sizeof b->store, "%s/store", b->dir);
  snprintf(b->snaps, sizeof b->snaps, "%s/snaps", b->dir);
  char file[400];
  snprintf(file, sizeof file, "%s/s.yaml", b->policy);
  if (mkdir(b->policy, 0700) || spit(file, text)) return -1;
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = b->store;
  o.snapshots_dir = b->snaps;
  o.snapshot_durability = VD_DURABILITY_NONE;
  vd_error err;
  if (vd_engine_open(b->policy, &o, &b->engine, &err) != 0) {
    fprintf(stderr, "%s\n", err.message);
    return -1;
  }
  b->d = vd_decision_new();
  return b->d ? 0 : -1;
}

/* The limits the decision read, in the strategy's order: "a,b,". */
static void reads_of(const vd_decision *d, char *out, size_t cap) {
  out[0] = 0;
  for (uint32_t i = 0; d->limit_reads && d->limits_of && i < d->nlimit_reads; i++)
    if (d->limit_reads[i].state != LIMIT_UNREAD) {
      size_t n = strlen(out);
      snprintf(out + n, cap - n, "%s,", d->limits_of->limits[i].name);
    }
}

/* Decides request (JSON); the action must be `action` and the limits read
 * exactly `reads` ("a,b," in the strategy's order), in process and, later
 * (bench_close), in the snapshot. */
static void decide(bench *b, const char *request, const char *action, const char *reads) {
  vd_error err;
  if (vd_decide_json(b->engine, request, -1, b->d, &err) != 0) {
    CHECK_MSG(0, "%s: %s", request, err.message);
    return;
  }
  CHECK_MSG(vd_decision_action(b->d) && !strcmp(vd_decision_action(b->d), action),
            "%s: action %s, want %s", request, vd_decision_action(b->d), action);
  char got[512];
  reads_of(b->d, got, sizeof got);
  CHECK_MSG(!strcmp(got, reads), "%s: read %s, want %s", request, got, reads);
  if (b->decided < 64) snprintf(b->want[b->decided], sizeof b->want[0], "%s", reads);
  b->decided++;
}

/* The limits a snapshot's inputs.counters names, in its order: "a,b,". */
static void counters_of(const snapshot_rec *rec, char *out, size_t cap) {
  out[0] = 0;
  arena a;
  arena_init(&a, NULL, 0, 16u << 20);
  value v;
  if (json_parse(&a, rec->payload, rec->payload_len, NULL, &v, NULL) == 0 && v.kind == V_MAP) {
    const value *in = value_map_get(&v, "inputs", 6);
    const value *c = in && in->kind == V_MAP ? value_map_get(in, "counters", 8) : NULL;
    for (uint32_t i = 0; c && c->kind == V_MAP && i < c->n; i++) {
      size_t n = strlen(out);
      snprintf(out + n, cap - n, "%.*s,", (int)c->entries[i].key.n, c->entries[i].key.s);
    }
  } else {
    snprintf(out, cap, "(payload does not parse)");
  }
  arena_free(&a);
}

/* Closes the engine (its snapshots written), then checks every snapshot's
 * counters against what its decision read. */
static void bench_close(bench *b) {
  vd_decision_free(b->d);
  vd_engine_close(b->engine);
  snapshot_reader *r = NULL;
  snapshot_filter f;
  snapshot_filter_init(&f);
  char rerr[256];
  CHECK_MSG(snapshot_reader_open(b->snaps, &f, &r, rerr, sizeof rerr) == 0, "%s", rerr);
  snapshot_rec rec;
  int n = 0;
  while (r && snapshot_reader_next(r, &rec) == 1) {
    char got[512];
    counters_of(&rec, got, sizeof got);
    if (n < 64)
      CHECK_MSG(!strcmp(got, b->want[n]), "snapshot %d: counters %s, want %s", n, got, b->want[n]);
    n++;
  }
  if (r) snapshot_reader_close(r);
  CHECK_MSG(n == b->decided, "%d snapshots, %d decisions", n, b->decided);
  nftw(b->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#define LOGIN(ip, user) \
  "{\"action\":\"login\",\"context\":{\"ip\":\"" ip "\",\"user\":\"" user "\"}}"
#define FAILED(ip, user) \
  "{\"action\":\"login_failed\",\"context\":{\"ip\":\"" ip "\",\"user\":\"" user "\"}}"

/* examples/policies/throttle.yaml, as shipped. */
static void test_throttle(void) {
  char *text = slurp("examples/policies/throttle.yaml");
  CHECK_MSG(text != NULL, "examples/policies/throttle.yaml: run from the repository root");
  if (!text) return;
  bench b;
  int rc = bench_open(&b, text);
  free(text);
  CHECK(rc == 0);
  if (rc) return;
  const char *login_reads = "failed_logins,failed_logins_network,user_failures,";
  /* the rule reads limits.user_failures.count: that limit alone, which the
   * stage has read already (its `when` holds for a login) */
  decide(&b, LOGIN("203.0.113.7", "ana"), "allow", login_reads);
  for (int i = 0; i < 5; i++) decide(&b, FAILED("203.0.113.7", "ana"), "allow", login_reads);
  decide(&b, LOGIN("198.51.100.9", "ana"), "challenge", login_reads);
  CHECK_STR(vd_decision_rule(b.d), "failures-for-this-user");
  decide(&b, LOGIN("198.51.100.9", "bo"), "allow", login_reads);
  /* other points: the stage's limits only (no rule reads a limit) */
  decide(&b, "{\"action\":\"password_reset\",\"context\":{\"user\":\"ana\"}}", "allow",
         "password_resets,");
  decide(&b, "{\"action\":\"api_call\",\"key\":\"k1\",\"context\":{}}", "allow", "api_hourly,");
  bench_close(&b);
}

static const char LIMITS[] =
    "strategy: s\n"
    "decision_points: [p]\n"
    "actions: {allow: true, block: false}\n"
    "limits:\n"
    "  a: {key: user, window: 1m, budget: 100}\n"
    "  b: {key: user, when: request.action == 'never', window: 1m, budget: 100}\n"
    "  c: {key: user, when: request.action == 'never', window: 1m, budget: 100}\n";

/* What a rule reads, shape by shape, over the limit a (read by the stage)
 * and b, c (never reached by the stage). */
static void test_shapes(void) {
  char text[2048];
  snprintf(text, sizeof text,
           "%s"
           "let:\n"
           "  b_used: limits.b.count > 0\n"
           "rules:\n"
           "  - {if: \"op == 'field' && limits.b.count > 100\", action: block}\n"
           "  - {if: \"op == 'has' && !has(limits.c)\", action: block}\n"
           "  - {if: \"op == 'let' && b_used\", action: block}\n"
           "  - {if: \"op == 'size' && size(limits) != 3\", action: block}\n"
           "  - {if: \"op == 'index' && limits['c'].count > 100\", action: block}\n"
           "  - {if: \"op == 'macro' && limits.exists(n, n == 'zz')\", action: block}\n"
           "  - {if: \"op == 'bound' && limits.c.remaining == 100 && limits.c.budget == 100\","
           " action: block}\n"
           "default: allow\n",
           LIMITS);
  bench b;
  CHECK(bench_open(&b, text) == 0);
  if (!b.d) return;
#define REQ(op) "{\"action\":\"p\",\"context\":{\"user\":\"u\",\"op\":\"" op "\"}}"
  decide(&b, REQ("none"), "allow", "a,");
  decide(&b, REQ("field"), "allow", "a,b,");
  decide(&b, REQ("has"), "allow", "a,c,");
  decide(&b, REQ("let"), "allow", "a,b,");
  /* the whole map: every limit */
  decide(&b, REQ("size"), "allow", "a,b,c,");
  decide(&b, REQ("index"), "allow", "a,b,c,");
  decide(&b, REQ("macro"), "allow", "a,b,c,");
  /* a limit read only by a rule: read, not charged (remaining is the budget) */
  decide(&b, REQ("bound"), "block", "a,c,");
#undef REQ
  bench_close(&b);
}

/* A limit's `when` that reads another limit reads that one alone. */
static void test_limit_conditions(void) {
  char text[2048];
  snprintf(text, sizeof text,
           "strategy: s\n"
           "decision_points: [p]\n"
           "actions: {allow: true, block: false}\n"
           "limits:\n"
           "  a: {key: user, when: 'limits.c.count < 1000', window: 1m, budget: 100}\n"
           "  b: {key: user, when: request.action == 'never', window: 1m, budget: 100}\n"
           "  c: {key: user, when: request.action == 'never', window: 1m, budget: 100}\n"
           "default: allow\n");
  bench b;
  CHECK(bench_open(&b, text) == 0);
  if (!b.d) return;
  decide(&b, "{\"action\":\"p\",\"context\":{\"user\":\"u\"}}", "allow", "a,c,");
  bench_close(&b);
}

/* A let named `limits` is what `limits` reads: `limits.x` selects its
 * field and reads no limit. */
static void test_shadowed(void) {
  char text[2048];
  snprintf(text, sizeof text,
           "%s"
           "let:\n"
           "  limits: \"{'b': {'count': 7}}\"\n"
           "rules:\n"
           "  - {if: 'limits.b.count == 7 && has(limits.b)', action: block}\n"
           "default: allow\n",
           LIMITS);
  bench b;
  CHECK(bench_open(&b, text) == 0);
  if (!b.d) return;
  decide(&b, "{\"action\":\"p\",\"context\":{\"user\":\"u\"}}", "block", "a,");
  bench_close(&b);
}

/* Without limits, `limits` is an ordinary name: a context field. */
static void test_no_limits(void) {
  bench b;
  CHECK(bench_open(&b,
                   "strategy: s\n"
                   "decision_points: [p]\n"
                   "actions: {allow: true, block: false}\n"
                   "rules:\n"
                   "  - {if: 'limits.x == 1 && has(limits.x) && !has(limits.y)', action: block}\n"
                   "default: allow\n") == 0);
  if (!b.d) return;
  decide(&b, "{\"action\":\"p\",\"context\":{\"limits\":{\"x\":1}}}", "block", "");
  decide(&b, "{\"action\":\"p\",\"context\":{\"limits\":{\"x\":2}}}", "allow", "");
  bench_close(&b);
}

int main(void) {
  TEST_RUN(test_throttle);
  TEST_RUN(test_shapes);
  TEST_RUN(test_limit_conditions);
  TEST_RUN(test_shadowed);
  TEST_RUN(test_no_limits);
  TEST_END();
}
