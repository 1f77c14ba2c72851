/* bundle_pull.c — `verdict serve --bundle-url`: every node serves the same
 * signed bundle, pulled from a web server (docs/deploy.md, "Bundles pulled
 * from a server, signed").
 *
 * A thread polls URL with If-None-Match (the last ETag): 304 is nothing to
 * do; on 200 it fetches URL.sig too, checks the signature (bundle.h),
 * unpacks the .tar.gz into a fresh folder of --bundle-dir, and swaps it in
 * through the server's reload (server_reload: compiled, swapped atomically,
 * stored, logged as a reload with trigger "pull"). Anything wrong — no
 * signature, a bad one, a corrupt or unsafe archive, a bundle that does not
 * compile — is refused, logged with why and counted; the bundle already
 * live keeps serving. The folder keeps the live bundle (BUNDLE_DIR/current,
 * a link to its folder): a restart without the network serves it again.
 * With no bundle kept yet, the start waits for a first good pull and fails
 * (exit 1) when there is none, so a node never serves nothing. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/sha256.h"
#include "core/timefmt.h"
#include "engine/service.h"
#include "replay/against.h"
#include "server/bundle.h"
#include "server/internal.h"

#define PUT_LIT(b, s) json_buf_put((b), (s), sizeof(s) - 1)
#define FETCH_TIMEOUT_MS 30000

enum { OUT_NONE, OUT_OK, OUT_UNCHANGED, OUT_NOT_MODIFIED, OUT_REFUSED, OUT_ERROR, OUT_N };
static const char *const outcome_name[OUT_N] = {"none",         "ok",      "unchanged",
                                                "not_modified", "refused", "error"};

struct bundle_pull {
  server *srv; /* NULL during the first pull, before the server exists */
  const server_opts *o;
  char *pem; /* the public key */
  char *sig_url;
  char *etag; /* of the last bundle taken (or found unchanged) */
  char live[32]; /* the live bundle's folder name in the bundle folder ("" none) */
  pthread_t thread;
  int running;
  pthread_mutex_t lock; /* the fields below, and stop */
  pthread_cond_t wake;
  int stop;
  int64_t last_poll_ns, last_ok_ns, refused_at_ns; /* unix ns; 0 never */
  int outcome;
  char why[600];         /* the last poll's outcome, said */
  char refusal[600];     /* the last refusal's reason ("" none) */
  uint64_t count[OUT_N]; /* polls by outcome */
};

static void set_outcome(bundle_pull *p, int outcome, const char *why) {
  pthread_mutex_lock(&p->lock);
  p->last_poll_ns = clock_wall_ns();
  p->outcome = outcome;
  p->count[outcome]++;
  snprintf(p->why, sizeof p->why, "%s", why ? why : "");
  if (outcome == OUT_OK || outcome == OUT_UNCHANGED) p->last_ok_ns = p->last_poll_ns;
  if (outcome == OUT_REFUSED) {
    p->refused_at_ns = p->last_poll_ns;
    snprintf(p->refusal, sizeof p->refusal, "%s", why);
  }
  pthread_mutex_unlock(&p->lock);
}

static void log_refusal(bundle_pull *p, int outcome, const char *why) {
  json_buf f;
  json_buf_init(&f, NULL);
  PUT_LIT(&f, ",\"url\":");
  json_write_string(&f, p->o->bundle_url, strlen(p->o->bundle_url));
  if (!f.oom)
    server_log(outcome == OUT_REFUSED ? "error" : "warn",
               outcome == OUT_REFUSED ? "bundle_refused" : "bundle_pull_failed", why, f.data);
  json_buf_free(&f);
}

static void path_in(const bundle_pull *p, const char *name, char *out, size_t n) {
  snprintf(out, n, "%s/%s", p->o->bundle_dir, name);
}

/* The first error of a bundle's diagnostics, for the refusal. */
typedef struct first_diag {
  const char *dir; /* the folder compiled: its files are named below it */
  char text[400];
  size_t errors;
} first_diag;

static void note_diag(void *ud, const service_diag *g) {
  first_diag *d = ud;
  if (g->warning || d->errors++) return;
  const char *file = g->file;
  size_t dl = strlen(d->dir);
  if (strncmp(file, d->dir, dl) == 0 && file[dl] == '/') file += dl + 1;
  snprintf(d->text, sizeof d->text, "%s:%d:%d: %s", file, g->line, g->column, g->message);
}

/* Makes BUNDLE_DIR/current name the folder `name` (atomically: a new link
 * renamed over the old one), and removes the other bundle folders. */
static int set_current(bundle_pull *p, const char *name, char *why, size_t n) {
  char tmp[4200], cur[4200];
  path_in(p, "current.tmp", tmp, sizeof tmp);
  path_in(p, "current", cur, sizeof cur);
  unlink(tmp);
  if (symlink(name, tmp) != 0 || rename(tmp, cur) != 0) {
    snprintf(why, n, "%.400s: %s", cur, strerror(errno));
    return -1;
  }
  int dfd = open(p->o->bundle_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) fsync(dfd), close(dfd);
  pthread_mutex_lock(&p->lock); /* /v1/status reads it */
  snprintf(p->live, sizeof p->live, "%s", name);
  pthread_mutex_unlock(&p->lock);
  DIR *d = opendir(p->o->bundle_dir);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    if (strncmp(de->d_name, "b-", 2) != 0 || strcmp(de->d_name, name) == 0) continue;
    char old[4200];
    path_in(p, de->d_name, old, sizeof old);
    bundle_remove_tree(old);
  }
  if (d) closedir(d);
  return 0;
}

/* One poll. Returns the outcome; why says it for every outcome but OK's
 * "not modified". */
static int poll_once(bundle_pull *p, char *why, size_t n) {
  const char *url = p->o->bundle_url;
  against_fetched tar, sig;
  char err[700];
  if (against_fetch(url, p->etag, FETCH_TIMEOUT_MS, BUNDLE_MAX_FILE_BYTES, &tar, err,
                    sizeof err) != 0) {
    snprintf(why, n, "fetching the bundle: %s", err);
    return OUT_ERROR;
  }
  if (tar.status == 304) {
    against_fetched_free(&tar);
    snprintf(why, n, "not modified");
    return OUT_NOT_MODIFIED;
  }
  if (tar.status != 200) {
    snprintf(why, n, "fetching the bundle: %s answered HTTP %d", url, tar.status);
    against_fetched_free(&tar);
    return OUT_ERROR;
  }
  if (against_fetch(p->sig_url, NULL, FETCH_TIMEOUT_MS, 4096, &sig, err, sizeof err) != 0) {
    snprintf(why, n, "unsigned: the signature could not be fetched: %s", err);
    against_fetched_free(&tar);
    return OUT_REFUSED;
  }
  int outcome = OUT_REFUSED;
  char name[32], hex[65], dir[4200], tmp[4220];
  if (sig.status != 200) {
    snprintf(why, n, "unsigned: %s answered HTTP %d", p->sig_url, sig.status);
    goto out;
  }
  if (bundle_verify(p->pem, tar.body, tar.len, sig.body, sig.len, err, sizeof err) != 0) {
    snprintf(why, n, "bad signature: %s", err);
    goto out;
  }
  sha256_hex(tar.body, tar.len, hex);
  snprintf(name, sizeof name, "b-%.16s", hex);
  if (strcmp(name, p->live) == 0) { /* the same bytes as the live bundle */
    snprintf(why, n, "the bundle is the live one (%s)", name);
    outcome = OUT_UNCHANGED;
    goto keep_etag;
  }
  path_in(p, name, dir, sizeof dir);
  snprintf(tmp, sizeof tmp, "%s.unpacking", dir);
  bundle_remove_tree(tmp); /* a pull cut short before */
  if (bundle_unpack(tar.body, tar.len, tmp, NULL, err, sizeof err) != 0) {
    snprintf(why, n, "unsafe or corrupt archive: %s", err);
    goto out;
  }
  first_diag d = {tmp, "", 0};
  service_bundle_diagnostics(tmp, note_diag, &d);
  if (d.errors) {
    snprintf(why, n, "the bundle does not compile (%zu errors): %s", d.errors, d.text);
    bundle_remove_tree(tmp);
    goto out;
  }
  bundle_remove_tree(dir);
  if (rename(tmp, dir) != 0) {
    snprintf(why, n, "%.400s: %s", dir, strerror(errno));
    bundle_remove_tree(tmp);
    outcome = OUT_ERROR;
    goto out;
  }
  if (p->srv) { /* swap it in: the reload path, trigger "pull" */
    vd_engine *e = p->srv->engine;
    char *was = strdup(service_engine_dir(e));
    vd_error verr;
    char before[65], after[65];
    if (!was || service_engine_set_dir(e, dir) != 0 ||
        server_reload(p->srv, "pull", &verr, before, after) != 0) {
      if (was) service_engine_set_dir(e, was);
      snprintf(why, n, "the reload failed: %.600s", was ? verr.message : "out of memory");
      free(was);
      bundle_remove_tree(dir);
      goto out;
    }
    free(was);
  }
  if (set_current(p, name, err, sizeof err) != 0) {
    snprintf(why, n, "the bundle is live, but not kept for a restart: %s", err);
    outcome = OUT_ERROR;
    goto keep_etag;
  }
  snprintf(why, n, "took %s", name);
  outcome = OUT_OK;
keep_etag:
  free(p->etag);
  p->etag = tar.etag;
  tar.etag = NULL;
out:
  against_fetched_free(&tar);
  against_fetched_free(&sig);
  return outcome;
}

static void *poll_main(void *arg) {
  bundle_pull *p = arg;
  unsigned seed = (unsigned)clock_mono_ns() ^ (unsigned)getpid();
  for (;;) {
    /* the interval, jittered by ±10% so that nodes started together spread out */
    uint64_t ms = p->o->bundle_poll_ms;
    uint64_t span = ms / 5;
    if (span) ms = ms - ms / 10 + (uint64_t)rand_r(&seed) % (span + 1);
    struct timespec until = clock_wall_after_ms(ms);
    pthread_mutex_lock(&p->lock);
    while (!p->stop && pthread_cond_timedwait(&p->wake, &p->lock, &until) != ETIMEDOUT) {
    }
    int stop = p->stop;
    pthread_mutex_unlock(&p->lock);
    if (stop) break;
    char why[800];
    int outcome = poll_once(p, why, sizeof why);
    set_outcome(p, outcome, why);
    if (outcome == OUT_REFUSED || outcome == OUT_ERROR) log_refusal(p, outcome, why);
  }
  return NULL;
}

int bundle_pull_open(const server_opts *o, bundle_pull **out, char **dir, char *why, size_t n) {
  *out = NULL;
  *dir = NULL;
  bundle_pull *p = calloc(1, sizeof *p);
  if (!p) return snprintf(why, n, "out of memory"), -1;
  p->o = o;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  size_t ul = strlen(o->bundle_url) + 5;
  char err[700];
  if (!(p->sig_url = malloc(ul))) {
    snprintf(why, n, "out of memory");
    goto fail;
  }
  snprintf(p->sig_url, ul, "%s.sig", o->bundle_url);
  if (bundle_pubkey_load(o->bundle_pubkey, &p->pem, err, sizeof err) != 0) {
    snprintf(why, n, "--bundle-pubkey %s", err);
    goto fail;
  }
  if (mkdir(o->bundle_dir, 0755) != 0 && errno != EEXIST) {
    snprintf(why, n, "--bundle-dir %s: %s", o->bundle_dir, strerror(errno));
    goto fail;
  }
  char cur[4200], target[64];
  path_in(p, "current", cur, sizeof cur);
  ssize_t tl = readlink(cur, target, sizeof target - 1);
  if (tl > 2 && tl < 32 && strncmp(target, "b-", 2) == 0) { /* the one kept: served at once */
    memcpy(p->live, target, (size_t)tl);
    p->live[tl] = '\0';
    set_outcome(p, OUT_NONE, "serving the bundle kept from before the start; not polled yet");
  } else { /* none kept: the first good pull before anything is served */
    char pw[800];
    int outcome = poll_once(p, pw, sizeof pw);
    if (outcome != OUT_OK) {
      snprintf(why, n, "--bundle-url %s: no bundle kept in %s and the first pull failed: %s",
               o->bundle_url, o->bundle_dir, pw);
      goto fail;
    }
    set_outcome(p, outcome, pw);
  }
  size_t dl = strlen(o->bundle_dir) + strlen(p->live) + 2;
  if (!(*dir = malloc(dl))) {
    snprintf(why, n, "out of memory");
    goto fail;
  }
  snprintf(*dir, dl, "%s/%s", o->bundle_dir, p->live);
  *out = p;
  return 0;
fail:
  bundle_pull_free(p);
  return -1;
}

int bundle_pull_start(bundle_pull *p, server *s) {
  p->srv = s;
  if (pthread_create(&p->thread, NULL, poll_main, p) != 0) return -1;
  p->running = 1;
  return 0;
}

void bundle_pull_stop(bundle_pull *p) {
  if (!p || !p->running) return;
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->lock);
  pthread_join(p->thread, NULL);
  p->running = 0;
}

void bundle_pull_free(bundle_pull *p) {
  if (!p) return;
  bundle_pull_stop(p);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->wake);
  free(p->pem);
  free(p->sig_url);
  free(p->etag);
  free(p);
}

static void put_time(json_buf *b, int64_t ns) {
  if (ns <= 0) {
    PUT_LIT(b, "null");
    return;
  }
  char t[48];
  size_t l = timefmt_format_rfc3339(ns / 1000000000, (int32_t)(ns % 1000000000), t);
  json_write_string(b, t, l);
}

int bundle_pull_status(bundle_pull *p, json_buf *b) {
  if (!p) return 1;
  pthread_mutex_lock(&p->lock);
  PUT_LIT(b, "{\"url\":");
  json_write_string(b, p->o->bundle_url, strlen(p->o->bundle_url));
  char num[200];
  int nn = snprintf(num, sizeof num, ",\"poll_seconds\":%.3f,\"live\":", p->o->bundle_poll_ms / 1e3);
  json_buf_put(b, num, (size_t)nn);
  json_write_string(b, p->live, strlen(p->live));
  PUT_LIT(b, ",\"last_poll\":");
  put_time(b, p->last_poll_ns);
  PUT_LIT(b, ",\"outcome\":");
  json_write_string(b, outcome_name[p->outcome], strlen(outcome_name[p->outcome]));
  PUT_LIT(b, ",\"message\":");
  json_write_string(b, p->why, strlen(p->why));
  PUT_LIT(b, ",\"last_ok\":");
  put_time(b, p->last_ok_ns);
  PUT_LIT(b, ",\"last_refusal\":");
  if (p->refusal[0]) {
    PUT_LIT(b, "{\"at\":");
    put_time(b, p->refused_at_ns);
    PUT_LIT(b, ",\"why\":");
    json_write_string(b, p->refusal, strlen(p->refusal));
    json_buf_putc(b, '}');
  } else {
    PUT_LIT(b, "null");
  }
  PUT_LIT(b, ",\"polls\":{");
  for (int i = OUT_OK; i < OUT_N; i++) {
    nn = snprintf(num, sizeof num, "%s\"%s\":%llu", i > OUT_OK ? "," : "", outcome_name[i],
                  (unsigned long long)p->count[i]);
    json_buf_put(b, num, (size_t)nn);
  }
  PUT_LIT(b, "}}");
  pthread_mutex_unlock(&p->lock);
  return 0;
}

void bundle_pull_metrics(bundle_pull *p, json_buf *b) {
  if (!p) return;
  PUT_LIT(b,
          "# HELP verdict_bundle_polls_total Polls of --bundle-url, by outcome (refused: "
          "unsigned, badly signed, corrupt, unsafe or not compiling).\n"
          "# TYPE verdict_bundle_polls_total counter\n");
  pthread_mutex_lock(&p->lock);
  for (int i = OUT_OK; i < OUT_N; i++) {
    char line[128];
    int nn = snprintf(line, sizeof line, "verdict_bundle_polls_total{outcome=\"%s\"} %llu\n",
                      outcome_name[i], (unsigned long long)p->count[i]);
    json_buf_put(b, line, (size_t)nn);
  }
  pthread_mutex_unlock(&p->lock);
}
