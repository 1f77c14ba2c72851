/* retention_gc.c — gc under a declared retention file, for `verdict
 * snapshots gc|stats --retention` and `verdict serve --retention`: the file
 * (src/policy/retention.c) turned into the keep hook of snapshot_gc, and
 * the server's scheduled gc thread.
 *
 * The scheduled gc runs on a thread of its own, never on the server's
 * loops: it takes segment locks only on sealed segments (a writer's active
 * segment is skipped) and renames rewritten files over the old ones, so
 * decisions and their recording go on while it works. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "policy/retention.h"
#include "server/server.h"
#include "snapshot/snapshot.h"

int cli_retention_load(const char *cmd, const char *file, retention **out) {
  policy_diags d;
  memset(&d, 0, sizeof d);
  int rc = retention_load(file, out, &d);
  for (size_t i = 0; i < d.n; i++) policy_diag_print(&d.items[i], stderr);
  if (rc != 0)
    fprintf(stderr, "verdict %s: the retention file %s has %zu error%s\n", cmd, file, d.errors,
            d.errors == 1 ? "" : "s");
  policy_diags_free(&d);
  return rc;
}

static int keeps(void *ud, const snapshot_rec *rec) {
  return retention_keeps(ud, snapshot_sample_point(rec->id), rec->payload, rec->payload_len);
}

void cli_retention_gc_opts(retention *r, snapshot_gc_opts *o) {
  o->keep_days = retention_keep_days(r);
  o->keeps = keeps;
  o->keeps_ud = r;
}

typedef struct gc_sched {
  const char *dir;
  retention *r;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop, started;
  uint64_t runs;
} gc_sched;

/* One line of the server's log (docs/server.md, "Log"). */
static void log_run(const gc_sched *s, int rc, const snapshot_gc_stats *st, const char *err) {
  const char *first;
  uint64_t errors = retention_errors(s->r, &first);
  char f[1024];
  if (rc < 0) {
    server_log("warn", "snapshot_gc_failed", err, NULL);
    return;
  }
  snprintf(f, sizeof f,
           ",\"segments\":%llu,\"locked\":%llu,\"rewritten\":%llu,\"deleted\":%llu,"
           "\"kept\":%llu,\"removed\":%llu,\"bytes_before\":%llu,\"bytes_after\":%llu,"
           "\"condition_errors\":%llu,\"unshipped\":%llu",
           (unsigned long long)st->segments, (unsigned long long)st->segments_locked,
           (unsigned long long)st->segments_rewritten, (unsigned long long)st->segments_deleted,
           (unsigned long long)st->records_kept, (unsigned long long)st->records_removed,
           (unsigned long long)st->bytes_before, (unsigned long long)st->bytes_after,
           (unsigned long long)errors, (unsigned long long)st->segments_unshipped);
  server_log(errors ? "warn" : "info", "snapshot_gc", errors ? first : NULL, f);
}

static void *sched_main(void *arg) {
  gc_sched *s = arg;
  uint64_t every = retention_every_ms(s->r);
  pthread_mutex_lock(&s->mu);
  while (!s->stop) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(every / 1000);
    until.tv_nsec += (long)(every % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0) {
    }
    if (s->stop) break;
    pthread_mutex_unlock(&s->mu);
    snapshot_gc_opts o;
    snapshot_gc_opts_init(&o);
    cli_retention_gc_opts(s->r, &o);
    snapshot_gc_stats st;
    char err[SNAPSHOT_ERRLEN] = "";
    int rc = snapshot_gc(s->dir, &o, &st, err, sizeof err);
    log_run(s, rc, &st, err);
    pthread_mutex_lock(&s->mu);
    s->runs++;
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

gc_sched *cli_gc_schedule(const char *dir, retention *r) {
  gc_sched *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->dir = dir;
  s->r = r;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  if (pthread_create(&s->th, NULL, sched_main, s) != 0) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    return NULL;
  }
  s->started = 1;
  return s;
}

void cli_gc_unschedule(gc_sched *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->th, NULL); /* a gc under way finishes its segment first */
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}
