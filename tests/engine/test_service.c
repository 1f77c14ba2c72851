/* test_service.c — the engine's calls for hosts (verdict.h, "calls for
 * hosts"; service.h): vd_engine_bundle lists the example bundle's
 * strategies, decision points, rules and versions as the policy loader
 * computes them, and its copy outlives a reload; vd_engine_warm_up decides
 * the inline tests and records no snapshot and charges no counter;
 * vd_snapshot_read returns the payload a decision recorded and a clear error
 * for a bad id, an unknown id, no folder and a folder that is not one;
 * service_versions_kept lists the versions an engine stored, newest first,
 * with their strategies; service_bundle_diagnostics lists a broken bundle's
 * errors with their place. */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "engine/service.h"
#include "policy/policy.h"
#include "test.h"
#include "verdict.h"

#define EXAMPLES "examples/policies"

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void rm_rf(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static vd_engine *open_engine(const char *bundle, const char *snapdir) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = ""; /* write nothing into the bundle */
  o.snapshots_dir = snapdir;
  o.snapshot_durability = VD_DURABILITY_ALWAYS; /* on disk when the decision returns */
  o.node = "test-node";
  vd_engine *e = NULL;
  vd_error err;
  int rc = vd_engine_open(bundle, &o, &e, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  return rc == 0 ? e : NULL;
}

static policy_bundle *load_examples(void) {
  policy_load_opts lo = {.store_dir = ""};
  policy_diags diags;
  memset(&diags, 0, sizeof diags);
  policy_bundle *b = NULL;
  int rc = policy_bundle_load(EXAMPLES, &lo, &b, &diags);
  policy_diags_free(&diags);
  CHECK(rc == 0 && b);
  return b;
}

static void test_bundle_lists_the_examples(void) {
  vd_engine *e = open_engine(EXAMPLES, NULL);
  policy_bundle *ref = load_examples();
  if (!e || !ref) return;
  vd_bundle *b = NULL;
  vd_error err;
  CHECK(vd_engine_bundle(e, &b, &err) == 0 && b);
  if (!b) return;
  char live[65];
  CHECK_STR(vd_bundle_version(b), vd_engine_policy_version(e, live));
  CHECK_STR(vd_bundle_version(b), ref->version);
  CHECK(vd_bundle_strategy_count(b) == 6);
  CHECK(vd_bundle_strategy_count(b) == ref->nstrategies);
  static const char *const names[] = {"agent_guard",   "agent_tests",  "content_routing",
                                      "payment_fraud", "request_gate", "throttle"};
  for (unsigned i = 0; i < 6; i++) {
    int seen = 0;
    for (unsigned k = 0; k < vd_bundle_strategy_count(b); k++) {
      vd_strategy_info s;
      CHECK(vd_bundle_strategy(b, k, &s) == 0);
      if (strcmp(s.name, names[i]) == 0) seen++;
    }
    CHECK_MSG(seen == 1, "%s listed %d times", names[i], seen);
  }
  for (unsigned k = 0; k < ref->nstrategies && k < vd_bundle_strategy_count(b); k++) {
    const strategy *r = &ref->strategies[k];
    vd_strategy_info s;
    CHECK(vd_bundle_strategy(b, k, &s) == 0);
    CHECK_STR(s.name, r->name);
    CHECK_STR(s.version, r->version);
    CHECK(strlen(s.version) == 64 && strspn(s.version, "0123456789abcdef") == 64);
    CHECK(s.file && strstr(s.file, ".yaml"));
    CHECK(s.nrules == r->nrules && s.ndecision_points == r->ndecision_points);
    for (unsigned j = 0; j < s.nrules && j < r->nrules; j++)
      CHECK(s.rules[j] && strcmp(s.rules[j], r->rules[j].name) == 0);
    if (strcmp(s.name, "request_gate") == 0) {
      CHECK(s.ndecision_points == 2);
      if (s.ndecision_points == 2) {
        CHECK_STR(s.decision_points[0], "http_request");
        CHECK_STR(s.decision_points[1], "request_gate");
      }
      CHECK(s.nrules > 2);
      if (s.nrules > 1) {
        CHECK_STR(s.rules[0], "denied-network");
        CHECK_STR(s.rules[1], "revoked-api-key");
      }
    }
  }
  vd_strategy_info past;
  CHECK(vd_bundle_strategy(b, vd_bundle_strategy_count(b), &past) == VD_EINVAL);
  vd_bundle_free(b);
  policy_bundle_free(ref);
  vd_engine_close(e);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

/* The description is a copy: a reload that changes the bundle changes a new
 * description, not one taken before. */
static void test_bundle_copy_outlives_reload(void) {
  char dir[512], file[600];
  test_tmpdir(dir, sizeof dir, "svc-reload");
  snprintf(file, sizeof file, "%s/a.yaml", dir);
  write_file(file,
             "strategy: first\nrules:\n  - name: r1\n    if: x == 1\n    action: allow\n"
             "default: deny\n");
  vd_engine *e = open_engine(dir, NULL);
  if (!e) return;
  vd_bundle *before = NULL, *after = NULL;
  vd_error err;
  CHECK(vd_engine_bundle(e, &before, &err) == 0);
  write_file(file,
             "strategy: second\nrules:\n  - name: r1\n    if: x == 1\n    action: allow\n"
             "  - name: r2\n    if: x == 2\n    action: deny\ndefault: deny\n");
  CHECK_MSG(vd_engine_reload(e, &err) == 0, "%s", err.message);
  CHECK(vd_engine_bundle(e, &after, &err) == 0);
  if (before && after) {
    vd_strategy_info s0, s1;
    CHECK(vd_bundle_strategy(before, 0, &s0) == 0 && vd_bundle_strategy(after, 0, &s1) == 0);
    CHECK_STR(s0.name, "first");
    CHECK(s0.nrules == 1);
    CHECK_STR(s1.name, "second");
    CHECK(s1.nrules == 2);
    CHECK_STR(s1.rules[1], "r2");
    CHECK(strcmp(vd_bundle_version(before), vd_bundle_version(after)) != 0);
    char live[65];
    CHECK_STR(vd_bundle_version(after), vd_engine_policy_version(e, live));
  }
  vd_bundle_free(before);
  vd_bundle_free(after);
  vd_engine_close(e);
  rm_rf(dir);
}

static void test_warm_up_records_nothing(void) {
  char snaps[512];
  test_tmpdir(snaps, sizeof snaps, "svc-warm");
  vd_engine *e = open_engine(EXAMPLES, snaps);
  policy_bundle *ref = load_examples();
  if (!e || !ref) return;
  unsigned tests = 0;
  for (uint32_t k = 0; k < ref->nstrategies; k++) tests += ref->strategies[k].ntests;
  CHECK(tests > 10);
  unsigned n = 0;
  vd_error err;
  CHECK_MSG(vd_engine_warm_up(e, &n, &err) == 0, "%s", err.message);
  /* every example test decides (verdict test passes them all) */
  CHECK_MSG(n >= tests, "%u decisions for %u tests", n, tests);
  vd_engine_counters c;
  CHECK(vd_engine_stats(e, &c) == 0);
  CHECK(c.snapshots_on == 1);
  CHECK(c.snapshots_appended == 0);
  CHECK(c.snapshots_written == 0);
  CHECK(c.limit_charges == 0);
  /* a real decision after it is recorded, as the first */
  vd_decision *d = vd_decision_new();
  const char *req = "{\"action\": \"http_request\", \"context\": {\"path\": \"/\"}}";
  CHECK_MSG(vd_decide_json(e, req, -1, d, &err) == 0, "%s", err.message);
  CHECK(vd_decision_snapshot_id(d) != NULL);
  CHECK(vd_engine_stats(e, &c) == 0 && c.snapshots_appended == 1);
  vd_decision_free(d);
  CHECK(vd_engine_warm_up(NULL, &n, &err) == VD_EINVAL && n == 0);
  policy_bundle_free(ref);
  vd_engine_close(e);
  rm_rf(snaps);
}

static void test_snapshot_read_by_id(void) {
  char snaps[512];
  test_tmpdir(snaps, sizeof snaps, "svc-read");
  vd_engine *e = open_engine(EXAMPLES, snaps);
  if (!e) return;
  vd_decision *d = vd_decision_new();
  vd_error err;
  const char *req =
      "{\"action\": \"http_request\", \"context\": {\"path\": \"/api/v1/x\", \"method\": \"GET\", "
      "\"client\": \"198.51.100.7\"}}";
  CHECK_MSG(vd_decide_json(e, req, -1, d, &err) == 0, "%s", err.message);
  const char *id = vd_decision_snapshot_id(d);
  CHECK(id != NULL);
  if (id) {
    char *p = NULL;
    size_t n = 0;
    CHECK_MSG(vd_snapshot_read(snaps, id, -1, &p, &n, &err) == 0, "%s", err.message);
    CHECK(p && n == strlen(p));
    if (p) {
      arena a;
      arena_init(&a, NULL, 0, 0);
      value v;
      CHECK(json_parse(&a, p, n, NULL, &v, NULL) == 0 && v.kind == V_MAP);
      const value *vid = value_map_get(&v, "id", 2);
      CHECK(vid && vid->kind == V_STRING && vid->n == 36 && memcmp(vid->s, id, 36) == 0);
      /* the request as received, and the decision it led to */
      CHECK(strstr(p, "198.51.100.7") != NULL);
      CHECK(strstr(p, "denied-network") != NULL);
      CHECK_STR(vd_decision_rule(d), "denied-network");
      arena_free(&a);
    }
    vd_free(p);
    /* id_len counts: the same id given with its length */
    char idcopy[64];
    snprintf(idcopy, sizeof idcopy, "%sXYZ", id);
    p = NULL;
    CHECK(vd_snapshot_read(snaps, idcopy, 36, &p, &n, &err) == 0 && p);
    vd_free(p);
  }
  char *p = (char *)1;
  size_t n = 7;
  CHECK(vd_snapshot_read(snaps, "not-an-id", -1, &p, &n, &err) == VD_EINVAL);
  CHECK(p == NULL && n == 0);
  CHECK_STR(err.path, "id");
  CHECK(strstr(err.message, "8-4-4-4-12") != NULL);
  CHECK(vd_snapshot_read(snaps, "0193c0de-7a1b-7c3d-8e4f-0123456789ab", -1, &p, &n, &err) ==
        VD_ENOTFOUND);
  CHECK(p == NULL);
  CHECK(strstr(err.message, "0193c0de-7a1b-7c3d-8e4f-0123456789ab") != NULL);
  CHECK(vd_snapshot_read(NULL, "0193c0de-7a1b-7c3d-8e4f-0123456789ab", -1, &p, &n, &err) ==
        VD_EINVAL);
  CHECK(err.path[0] == '\0');
  CHECK(vd_snapshot_read(NULL, "bad", -1, &p, &n, &err) == VD_EINVAL);
  CHECK_STR(err.path, "id");
  /* a folder that is a file */
  char file[600];
  snprintf(file, sizeof file, "%s/plain-file", snaps);
  write_file(file, "not a folder\n");
  int rc = vd_snapshot_read(file, "0193c0de-7a1b-7c3d-8e4f-0123456789ab", -1, &p, &n, &err);
  CHECK_MSG(rc == VD_ESNAPSHOT, "rc %d: %s", rc, err.message);
  CHECK(err.message[0] != '\0');
  vd_decision_free(d);
  vd_engine_close(e);
  rm_rf(snaps);
}

/* The versions an engine stored, listed back with the strategy each is of. */
static void test_versions_kept(void) {
  char store[512];
  test_tmpdir(store, sizeof store, "svc-store");
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = store;
  vd_engine *e = NULL;
  vd_error err;
  CHECK_MSG(vd_engine_open(EXAMPLES, &o, &e, &err) == 0, "%s", err.message);
  vd_bundle *b = NULL;
  if (e) CHECK(vd_engine_bundle(e, &b, &err) == 0);
  service_kept *list = NULL;
  size_t n = 0, total = 0;
  CHECK(service_versions_kept(store, 100, &list, &n, &total) == 0);
  CHECK(b && n == vd_bundle_strategy_count(b) && total == n);
  for (unsigned i = 0; b && i < vd_bundle_strategy_count(b); i++) {
    vd_strategy_info st;
    vd_bundle_strategy(b, i, &st);
    int found = 0;
    for (size_t k = 0; k < n; k++)
      if (strcmp(list[k].version, st.version) == 0) {
        found++;
        CHECK(list[k].strategy && strcmp(list[k].strategy, st.name) == 0);
        CHECK(list[k].bytes > 0 && list[k].stored > 0);
      }
    CHECK_MSG(found == 1, "%s's version kept %d times", st.name, found);
  }
  for (size_t k = 1; k < n; k++) CHECK(list[k - 1].stored >= list[k].stored); /* newest first */
  service_kept_free(list, n);
  CHECK(service_versions_kept(store, 2, &list, &n, &total) == 0);
  CHECK(n == 2 && b && total == vd_bundle_strategy_count(b));
  service_kept_free(list, n);
  char missing[600];
  snprintf(missing, sizeof missing, "%s/none", store);
  CHECK(service_versions_kept(missing, 10, &list, &n, &total) == 0 && n == 0 && total == 0);
  service_kept_free(list, n);
  vd_bundle_free(b);
  vd_engine_close(e);
  rm_rf(store);
}

typedef struct diag_seen {
  unsigned errors;
  int line;
  char file[256];
} diag_seen;

static void on_diag(void *ud, const service_diag *g) {
  diag_seen *s = ud;
  if (g->warning) return;
  s->errors++;
  s->line = g->line;
  snprintf(s->file, sizeof s->file, "%s", g->file);
}

static void test_diagnostics_one_by_one(void) {
  char dir[512], file[600];
  test_tmpdir(dir, sizeof dir, "svc-diag");
  snprintf(file, sizeof file, "%s/broken.yaml", dir);
  write_file(file, "strategy: broken\nrules:\n  - name: r1\n    if: x ==\n    action: allow\n");
  diag_seen s;
  memset(&s, 0, sizeof s);
  size_t errors = service_bundle_diagnostics(dir, on_diag, &s);
  CHECK(errors >= 1 && s.errors == errors);
  CHECK(s.line == 4);
  CHECK(strstr(s.file, "broken.yaml") != NULL);
  memset(&s, 0, sizeof s);
  CHECK(service_bundle_diagnostics(EXAMPLES, on_diag, &s) == 0 && s.errors == 0);
  rm_rf(dir);
}

int main(void) {
  TEST_RUN(test_bundle_lists_the_examples);
  TEST_RUN(test_bundle_copy_outlives_reload);
  TEST_RUN(test_warm_up_records_nothing);
  TEST_RUN(test_snapshot_read_by_id);
  TEST_RUN(test_versions_kept);
  TEST_RUN(test_diagnostics_one_by_one);
  TEST_END();
}
