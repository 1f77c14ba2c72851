/* test_reload.c — reloading a bundle: a bundle that fails to compile is
 * refused with its diagnostics and the old one keeps serving; a good one
 * replaces it; and reloads racing with deciding threads never let a decision
 * see a half-swapped or freed bundle (run under ASan to catch a
 * use-after-free; each decision's action must agree with its policy
 * version). The bundle lives in a temporary folder the test writes. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "verdict.h"

static char dir[256], file[300];

static const char V1[] =
    "strategy: swap\n"
    "rules:\n"
    "  - name: one\n"
    "    if: n >= 0\n"
    "    action: allow\n"
    "default: block\n";
static const char V2[] =
    "strategy: swap\n"
    "rules:\n"
    "  - name: two\n"
    "    if: n >= 0\n"
    "    action: deny\n"
    "default: block\n";
static const char BROKEN[] =
    "strategy: swap\n"
    "rules:\n"
    "  - name: three\n"
    "    if: n >=\n"
    "    action: deny\n"
    "default: block\n"
    "on_eror: block\n";

static void write_policy(const char *text) {
  /* Write beside and rename, as a deployment would: a reader never sees a
   * half-written file. */
  char tmp[320];
  snprintf(tmp, sizeof tmp, "%s/.swap.tmp", dir);
  FILE *f = fopen(tmp, "w");
  if (!f) {
    perror(tmp);
    exit(1);
  }
  fputs(text, f);
  fclose(f);
  if (rename(tmp, file) != 0) {
    perror(file);
    exit(1);
  }
}

static const char REQ[] = "{\"action\":\"swap\",\"context\":{\"n\":1}}";

static char version_of(vd_engine *e, char *out) {
  vd_decision *d = vd_decision_new();
  vd_error err;
  int rc = vd_decide_json(e, REQ, -1, d, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  char a = rc == 0 ? vd_decision_action(d)[0] : '?';
  if (rc == 0) memcpy(out, vd_decision_policy_version(d), 65);
  vd_decision_free(d);
  return a;
}

static void refused_reload_keeps_serving(vd_engine *e) {
  char before[65], after[65], bv1[65], bv2[65];
  CHECK(version_of(e, before) == 'a');
  vd_engine_policy_version(e, bv1);

  write_policy(BROKEN);
  vd_error err;
  int rc = vd_engine_reload(e, &err);
  CHECK(rc == VD_EPOLICY && err.code == VD_EPOLICY);
  CHECK_MSG(strstr(err.message, "swap.yaml:4:") != NULL, "%s", err.message);
  CHECK_MSG(strstr(err.message, "on_eror") != NULL, "every diagnostic: %s", err.message);
  CHECK_MSG(err.line == 4 && err.column > 0, "line %d col %d", err.line, err.column);
  CHECK(version_of(e, after) == 'a');
  CHECK(strcmp(before, after) == 0);
  vd_engine_policy_version(e, bv2);
  CHECK(strcmp(bv1, bv2) == 0);

  write_policy(V2);
  rc = vd_engine_reload(e, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  CHECK(version_of(e, after) == 'd');
  CHECK(strcmp(before, after) != 0);
  vd_engine_policy_version(e, bv2);
  CHECK(strcmp(bv1, bv2) != 0);
}

/* ---- reload under load ---- */

static char ver_allow[65], ver_deny[65];

typedef struct worker {
  vd_engine *e;
  atomic_int *stop;
  long decided, mismatched, failed;
  int saw_allow, saw_deny;
} worker;

static void *decide_loop(void *arg) {
  worker *w = arg;
  vd_decision *d = vd_decision_new();
  vd_error err;
  while (!atomic_load(w->stop)) {
    if (vd_decide_json(w->e, REQ, -1, d, &err) != 0) {
      w->failed++;
      continue;
    }
    w->decided++;
    const char *a = vd_decision_action(d), *v = vd_decision_policy_version(d);
    /* The action and the version must come from the same bundle. */
    if (strcmp(a, "allow") == 0 && strcmp(v, ver_allow) == 0)
      w->saw_allow = 1;
    else if (strcmp(a, "deny") == 0 && strcmp(v, ver_deny) == 0)
      w->saw_deny = 1;
    else
      w->mismatched++;
    /* Render too: the decision must stay readable after a reload. */
    const char *json;
    if (vd_decision_render(d, 0, &json, NULL) != 0 || json[0] != '{') w->mismatched++;
  }
  vd_decision_free(d);
  return NULL;
}

static void reload_under_load(vd_engine *e) {
  write_policy(V1);
  vd_error err;
  CHECK(vd_engine_reload(e, &err) == 0);
  CHECK(version_of(e, ver_allow) == 'a');
  write_policy(V2);
  CHECK(vd_engine_reload(e, &err) == 0);
  CHECK(version_of(e, ver_deny) == 'd');

  enum { NWORKERS = 3, NRELOADS = 60 };
  atomic_int stop = 0;
  worker w[NWORKERS];
  pthread_t th[NWORKERS];
  for (int i = 0; i < NWORKERS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].e = e;
    w[i].stop = &stop;
    pthread_create(&th[i], NULL, decide_loop, &w[i]);
  }
  int reloads_ok = 0, reloads_refused = 0;
  for (int k = 0; k < NRELOADS; k++) {
    write_policy(k % 3 == 2 ? BROKEN : (k % 2 ? V1 : V2));
    if (vd_engine_reload(e, &err) == 0)
      reloads_ok++;
    else
      reloads_refused++;
    usleep(2000);
  }
  atomic_store(&stop, 1);
  long decided = 0, mismatched = 0, failed = 0;
  int saw_allow = 0, saw_deny = 0;
  for (int i = 0; i < NWORKERS; i++) {
    pthread_join(th[i], NULL);
    decided += w[i].decided;
    mismatched += w[i].mismatched;
    failed += w[i].failed;
    saw_allow |= w[i].saw_allow;
    saw_deny |= w[i].saw_deny;
  }
  CHECK_MSG(mismatched == 0 && failed == 0, "%ld mismatched, %ld failed of %ld", mismatched, failed,
            decided);
  CHECK(reloads_ok == 40 && reloads_refused == 20);
  CHECK(saw_allow && saw_deny);
  CHECK(decided > 100);
  printf("reload under load: %ld decisions on %d threads across %d reloads (%d refused)\n", decided,
         NWORKERS, NRELOADS, reloads_refused);
}

static void open_refuses_broken(void) {
  vd_engine *e = (vd_engine *)1;
  vd_error err;
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  CHECK(vd_engine_open("tests/engine/bundles/broken", &o, &e, &err) == VD_EPOLICY);
  CHECK(e == NULL);
  CHECK_MSG(strstr(err.message, "broken.yaml:4:") && strstr(err.message, "did you mean"), "%s",
            err.message);
  CHECK(vd_engine_open("tests/engine/no-such-folder", &o, &e, &err) == VD_EPOLICY);
  CHECK(vd_engine_open(NULL, &o, &e, &err) == VD_EINVAL);
}

int main(void) {
  test_tmpdir(dir, sizeof dir, "reload");
  snprintf(file, sizeof file, "%s/swap.yaml", dir);
  write_policy(V1);
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_engine *e = NULL;
  vd_error err;
  int rc = vd_engine_open(dir, &o, &e, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  if (e) {
    refused_reload_keeps_serving(e);
    reload_under_load(e);
  }
  vd_engine_close(e);
  open_refuses_broken();
  unlink(file);
  rmdir(dir);
  TEST_END();
}
