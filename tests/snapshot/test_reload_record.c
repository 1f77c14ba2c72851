/* test_reload_record.c — recording across reloads. The deciding thread's
 * capture names rules, lets and features by pointer into the policy bundle
 * (src/engine/record.c), and the writer thread formats it later; so a reload
 * must keep the replaced bundle until the writer is past every record it
 * decided. Here decisions and reloads alternate — from one thread, each
 * reload right behind a record still in the queue, and from several threads
 * at once — between two bundles whose names differ, and then every record is
 * read back: each must carry exactly its own bundle's names (a freed bundle
 * shows up as garbage here, or as a use-after-free under ASan), and none may
 * be missing. */
#define _GNU_SOURCE
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/snapshot.h"
#include "test.h"
#include "verdict.h"

static char dir[256], policy_dir[300], snaps[300], file[340];

/* Two bundles: the same shape, every name different. */
static const char V1[] =
    "strategy: swap\n"
    "let:\n"
    "  alpha_amount: context.n * 2\n"
    "  alpha_label: '\"first\"'\n"
    "rules:\n"
    "  - name: alpha_guard\n"
    "    if: alpha_amount < 0\n"
    "    action: deny\n"
    "  - name: alpha_rule\n"
    "    if: alpha_amount >= 0 && alpha_label == \"first\"\n"
    "    action: allow\n"
    "default: block\n";
static const char V2[] =
    "strategy: swap\n"
    "let:\n"
    "  beta_amount: context.n * 3\n"
    "  beta_label: '\"second\"'\n"
    "rules:\n"
    "  - name: beta_guard\n"
    "    if: beta_amount < 0\n"
    "    action: allow\n"
    "  - name: beta_rule\n"
    "    if: beta_amount >= 0 && beta_label == \"second\"\n"
    "    action: deny\n"
    "default: block\n";

static const char REQ[] = "{\"action\":\"swap\",\"context\":{\"n\":1}}";

static void write_policy(const char *text) {
  char tmp[360];
  snprintf(tmp, sizeof tmp, "%s/.swap.tmp", policy_dir);
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

static atomic_long decided;

typedef struct worker {
  vd_engine *e;
  atomic_int *stop;
  long failed;
} worker;

static void *decide_loop(void *arg) {
  worker *w = arg;
  vd_decision *d = vd_decision_new();
  vd_error err;
  for (int n = 0; n < 4000 && !atomic_load(w->stop); n++) { /* a few MB of log at most */
    if (vd_decide_json(w->e, REQ, -1, d, &err) != 0 || !vd_decision_snapshot_id(d))
      w->failed++;
    else
      atomic_fetch_add(&decided, 1);
    if (n % 64 == 63) usleep(500); /* spread over the reloads */
  }
  vd_decision_free(d);
  return NULL;
}

/* Every record carries its own bundle's names and none of the other's. */
static void check_records(long want) {
  snapshot_reader *rd;
  char msg[SNAPSHOT_ERRLEN];
  CHECK_MSG(snapshot_reader_open(snaps, NULL, &rd, msg, sizeof msg) == 0, "%s", msg);
  snapshot_rec rec;
  long got = 0, ones = 0, twos = 0, wrong = 0;
  while (snapshot_reader_next(rd, &rec) == 1) {
    got++;
    char *p = strndup(rec.payload, rec.payload_len);
    if (!p) abort();
    int one = rec.action_len == 5 && memcmp(rec.action, "allow", 5) == 0;
    int two = rec.action_len == 4 && memcmp(rec.action, "deny", 4) == 0;
    const char *mine = one ? "alpha" : "beta", *other = one ? "beta" : "alpha";
    char rule[64], let1[64], let2[64];
    snprintf(rule, sizeof rule, "{\"rule\":\"%s_rule\",\"result\":\"true\"}", mine);
    snprintf(let1, sizeof let1, "\"%s_amount\":", mine);
    snprintf(let2, sizeof let2, "\"%s_label\":", mine);
    char guard[64];
    snprintf(guard, sizeof guard, "{\"rule\":\"%s_guard\",", mine);
    if ((one || two) && strstr(p, rule) && strstr(p, guard) && strstr(p, let1) && strstr(p, let2) &&
        !strstr(p, other)) {
      ones += one;
      twos += two;
    } else {
      if (wrong++ < 3) fprintf(stderr, "record with the wrong names: %.600s\n", p);
    }
    free(p);
  }
  snapshot_reader_close(rd);
  printf("%ld records read back (%ld of the first bundle, %ld of the second), %ld wrong\n", got,
         ones, twos, wrong);
  CHECK_MSG(got == want, "%ld records, %ld decisions", got, want);
  CHECK(wrong == 0);
  CHECK(ones > 0 && twos > 0);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(p) : unlink(p);
}

int main(void) {
  test_tmpdir(dir, sizeof dir, "reload-record");
  snprintf(policy_dir, sizeof policy_dir, "%s/policy", dir);
  snprintf(snaps, sizeof snaps, "%s/snapshots", dir);
  snprintf(file, sizeof file, "%s/swap.yaml", policy_dir);
  if (mkdir(policy_dir, 0700) != 0) {
    perror(policy_dir);
    return 1;
  }
  write_policy(V1);
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  o.snapshots_dir = snaps;
  o.snapshot_durability = VD_DURABILITY_NONE;
  vd_engine *e = NULL;
  vd_error err;
  int rc = vd_engine_open(policy_dir, &o, &e, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  if (!e) return 1;

  /* One thread: each reload right behind a record the writer has most
   * likely not formatted yet. */
  vd_decision *d = vd_decision_new();
  int reloads = 0;
  for (int k = 0; k < 40; k++) {
    if (vd_decide_json(e, REQ, -1, d, &err) == 0 && vd_decision_snapshot_id(d))
      atomic_fetch_add(&decided, 1);
    else
      CHECK_MSG(0, "decision %d not recorded: %s", k, err.message);
    write_policy(k % 2 ? V1 : V2);
    if (vd_engine_reload(e, &err) == 0)
      reloads++;
    else
      CHECK_MSG(0, "reload: %s", err.message);
  }
  vd_decision_free(d);
  CHECK(reloads == 40);

  /* Several threads deciding while the main one reloads. */
  enum { NWORKERS = 3 };
  atomic_int stop = 0;
  worker w[NWORKERS];
  pthread_t th[NWORKERS];
  for (int i = 0; i < NWORKERS; i++) {
    w[i] = (worker){.e = e, .stop = &stop};
    pthread_create(&th[i], NULL, decide_loop, &w[i]);
  }
  for (int k = 0; k < 40; k++) {
    write_policy(k % 2 ? V1 : V2);
    CHECK(vd_engine_reload(e, &err) == 0);
    usleep(1000);
  }
  atomic_store(&stop, 1);
  long failed = 0;
  for (int i = 0; i < NWORKERS; i++) {
    pthread_join(th[i], NULL);
    failed += w[i].failed;
  }
  CHECK_MSG(failed == 0, "%ld decisions failed or went unrecorded", failed);
  vd_engine_close(e); /* drains the queue; frees the bundles kept for it */
  check_records(atomic_load(&decided));
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  TEST_END();
}
