/* rollout.c — a candidate bundle on live traffic (docs/rollout.md): the
 * shadow, which decides every request the live bundle decides and never
 * answers, and the canary, which answers a deterministic share of them.
 *
 * The side that answers decides on the worker, as any decision does; the
 * other side decides on the rollout's own thread, after the answer has been
 * handed to the connection: a bounded queue of jobs (a copy of the request
 * and what the answer was) lies between them, and a job that finds the
 * queue full is dropped and counted, so a saturated machine sheds the
 * comparison, never the answers. The off-path decision is recorded as a
 * snapshot of its own that names the answered one ("completes"): the
 * answered record is written as it always is (durability speaks of it), and
 * replay re-makes each record under its own version.
 *
 * The canary's side is a hash of the request's key into 10000 buckets, so
 * a key lands on the same side on every node and after a restart; the
 * automatic rollback watches the canary over a sliding window of compared
 * decisions (disagreement with live, errors, p99) and drops it past a
 * declared limit.
 *
 * Locking: the candidate engines sit behind one rwlock (writers preferred):
 * deciding takes it shared, set/replace/drop/promote/rollback exclusive. The
 * queue has its own mutex. Metrics of the comparison have one writer, the
 * rollout thread. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/json.h"
#include "engine/service.h"
#include "server/internal.h"

#define PUT_LIT(b, s) json_buf_put((b), (s), sizeof(s) - 1)

enum { SIDE_LIVE, SIDE_SHADOW, SIDE_CANARY };
static const char *const side_name[] = {"live", "shadow", "canary"};

enum { RB_DISAGREEMENT, RB_ERRORS, RB_P99, RB_ADMIN, RB_REASONS };
static const char *const rb_name[] = {"disagreement", "errors", "p99", "admin"};

typedef struct grave {
  vd_engine *e;
  struct grave *next;
} grave;

typedef struct job {
  char *body;
  size_t len;
  char id[40]; /* the answered decision's snapshot id; "" when none */
  int64_t clock_ns;
  uint8_t answered; /* SIDE_* */
  uint8_t failed;   /* the answered side refused the request */
  uint8_t allowed;
  uint8_t has_rollout;
  char action[64];
  char strategy[64];
  double latency_us;
  char by[80];
  int bucket;
  double percent;
} job;

/* One compared decision of the canary, for the sliding window. */
typedef struct win_entry {
  uint8_t disagree, error;
  float us;
} win_entry;

struct rollout {
  server *srv;
  rollout_opts o; /* the settings in force (percent and limits change at run time) */
  pthread_rwlock_t lock;
  /* written under the lock held exclusive; read under it shared by the
   * workers, and without it by the rollout thread, which alone closes a
   * replaced engine (bury), so one it reads stays open while it decides */
  _Atomic(vd_engine *) shadow, canary;
  char *shadow_dir, *canary_dir;
  _Atomic int percent_bp; /* the canary's share in basis points */
  _Atomic int active;     /* a shadow or a canary is set: the plain path is left alone else */
  /* the queue */
  pthread_mutex_t qlock;
  pthread_cond_t qcond;
  job *ring;
  unsigned cap, head, count;
  int stopping;
  pthread_t thread;
  int started;
  struct grave *graves; /* replaced candidates the rollout thread closes (under qlock) */
  /* the comparison: written by the rollout thread */
  metrics m;           /* decisions: compared by strategy/agreed; rules: changes */
  metrics_hist decide[3]; /* the off-path decisions' latency, by the side that made them */
  _Atomic uint64_t compared, agreed, errors, dropped, queued;
  _Atomic uint64_t answered[3];
  _Atomic uint64_t rollbacks[RB_REASONS], promotions;
  win_entry *win;
  unsigned wn, wpos, wfill, since_check;
  pthread_mutex_t wlock; /* the window: the thread adds, a rollback clears */
};

void rollout_opts_init(rollout_opts *o) {
  memset(o, 0, sizeof *o);
  o->queue = 1024;
  o->window = 1000;
  o->min_decisions = 100;
  o->max_disagreement = -1;
  o->max_errors = -1;
  o->max_p99_us = -1;
}

/* A number in [lo, hi] or NaN. */
static double num_in(const char *v, double lo, double hi) {
  char *end;
  if (!v || !*v) return NAN;
  double d = strtod(v, &end);
  if (*end || !(d >= lo && d <= hi)) return NAN;
  return d;
}

int rollout_setting(rollout_opts *o, const char *name, const char *v, const char **why) {
  double d;
  *why = NULL;
  if (!strcmp(name, "--shadow")) {
    if (!v || !*v) return *why = "needs a bundle folder", 1;
    o->shadow_dir = v;
  } else if (!strcmp(name, "--canary")) {
    if (!v || !*v) return *why = "needs a bundle folder", 1;
    o->canary_dir = v;
  } else if (!strcmp(name, "--canary-percent")) {
    if (isnan(d = num_in(v, 0, 100))) return *why = "wants a share from 0 to 100, not", 1;
    o->percent = d;
    o->percent_set = 1;
  } else if (!strcmp(name, "--canary-no-key")) {
    if (!v || (strcmp(v, "live") && strcmp(v, "canary")))
      return *why = "takes live or canary, not", 1;
    o->no_key_canary = !strcmp(v, "canary");
  } else if (!strcmp(name, "--canary-max-disagreement")) {
    if (isnan(d = num_in(v, 0, 1))) return *why = "wants a share from 0 to 1, not", 1;
    o->max_disagreement = d;
  } else if (!strcmp(name, "--canary-max-errors")) {
    if (isnan(d = num_in(v, 0, 1))) return *why = "wants a share from 0 to 1, not", 1;
    o->max_errors = d;
  } else if (!strcmp(name, "--canary-max-latency-us")) {
    if (isnan(d = num_in(v, 1, 1e9))) return *why = "wants microseconds (at least 1), not", 1;
    o->max_p99_us = d;
  } else if (!strcmp(name, "--canary-window")) {
    if (isnan(d = num_in(v, 10, 1000000)) || d != floor(d))
      return *why = "wants a whole number of decisions from 10 to 1000000, not", 1;
    o->window = (unsigned)d;
  } else if (!strcmp(name, "--canary-min-decisions")) {
    if (isnan(d = num_in(v, 1, 1000000)) || d != floor(d))
      return *why = "wants a whole number of decisions from 1 to 1000000, not", 1;
    o->min_decisions = (unsigned)d;
  } else if (!strcmp(name, "--shadow-queue")) {
    if (isnan(d = num_in(v, 1, 1 << 20)) || d != floor(d))
      return *why = "wants a whole number of requests from 1 to 1048576, not", 1;
    o->queue = (unsigned)d;
  } else if (!strcmp(name, "--rollout-settings")) {
    if (!v || !*v) return *why = "needs a file", 1;
    o->settings_file = v;
  } else {
    return -1;
  }
  return 0;
}

int rollout_opts_check(const rollout_opts *o, char *why, size_t n) {
  if (o->shadow_dir && o->canary_dir) {
    snprintf(why, n, "--shadow and --canary: one candidate at a time (a shadow, or a canary)");
    return -1;
  }
  if (o->percent_set && !o->canary_dir && !o->settings_file) {
    snprintf(why, n, "--canary-percent without --canary: there is no canary to share to");
    return -1;
  }
  if (o->min_decisions > o->window) {
    snprintf(why, n, "--canary-min-decisions %u is more than --canary-window %u", o->min_decisions,
             o->window);
    return -1;
  }
  return 0;
}

/* ---- the settings file: NAME = VALUE lines, re-read on SIGHUP ---- */
static int read_settings_file(rollout_opts *o, char **keep, int *named_pct, char *why,
                              size_t whyn) {
  FILE *f = fopen(o->settings_file, "r");
  if (!f) {
    snprintf(why, whyn, "--rollout-settings %s: cannot be read", o->settings_file);
    return -1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = n >= 0 && n < (1 << 20) ? malloc((size_t)n + 1) : NULL;
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(buf);
    snprintf(why, whyn, "--rollout-settings %s: cannot be read", o->settings_file);
    return -1;
  }
  fclose(f);
  buf[n] = '\0';
  rollout_opts t = *o;
  t.percent_set = 0; /* the file's own share, if it names one */
  int line = 0;
  for (char *p = buf, *next; p && *p; p = next) {
    next = strchr(p, '\n');
    if (next) *next++ = '\0';
    line++;
    while (*p == ' ' || *p == '\t') p++;
    char *e = p + strlen(p);
    while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) *--e = '\0';
    if (!*p || *p == '#') continue;
    char *eq = strchr(p, '=');
    if (!eq) {
      snprintf(why, whyn, "%s:%d: expected NAME = VALUE, not: %s", o->settings_file, line, p);
      free(buf);
      return -1;
    }
    char *ne = eq;
    while (ne > p && (ne[-1] == ' ' || ne[-1] == '\t')) ne--;
    *ne = '\0';
    char *v = eq + 1;
    while (*v == ' ' || *v == '\t') v++;
    char name[64];
    snprintf(name, sizeof name, "--%s", p);
    const char *w;
    int rc = strcmp(p, "shadow") && strcmp(p, "canary") && strcmp(p, "rollout-settings") &&
                     strcmp(p, "shadow-queue")
                 ? rollout_setting(&t, name, v, &w)
                 : -1;
    if (rc < 0) {
      snprintf(why, whyn,
               "%s:%d: unknown setting '%s' (canary-percent, canary-no-key, "
               "canary-max-disagreement, canary-max-errors, canary-max-latency-us, canary-window, "
               "canary-min-decisions)",
               o->settings_file, line, p);
      free(buf);
      return -1;
    }
    if (rc > 0) {
      snprintf(why, whyn, "%s:%d: %s %s %s", o->settings_file, line, p, w, v);
      free(buf);
      return -1;
    }
  }
  if (t.min_decisions > t.window) {
    snprintf(why, whyn, "%s: canary-min-decisions %u is more than canary-window %u",
             o->settings_file, t.min_decisions, t.window);
    free(buf);
    return -1;
  }
  free(*keep);
  *keep = buf; /* the opts keep no pointer into it; kept for symmetry with the CLI's */
  t.settings_file = o->settings_file;
  int file_pct = t.percent_set;
  if (!file_pct) { /* a share the file does not name stays as it is */
    t.percent_set = o->percent_set;
    t.percent = o->percent;
  }
  *o = t;
  if (named_pct) *named_pct = file_pct;
  return 0;
}

/* ---- the window and the automatic rollback ---- */
static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

static void log_rollout(const char *level, const char *event, const char *msg, rollout *ro,
                        const char *extra) {
  char f[900];
  snprintf(f, sizeof f, ",\"canary\":\"%s\"%s", ro->canary_dir ? ro->canary_dir : "",
           extra ? extra : "");
  server_log(level, event, msg, f);
}

/* A replaced candidate, for the rollout thread to close between two jobs:
 * it may be deciding with it now, and closing waits for the snapshot
 * writer, which no worker should. */
static void bury(rollout *ro, vd_engine *e) {
  if (!e) return;
  grave *g = malloc(sizeof *g);
  if (!g) return; /* kept open: nothing reads it, and closing could be unsafe */
  g->e = e;
  pthread_mutex_lock(&ro->qlock);
  g->next = ro->graves;
  ro->graves = g;
  pthread_cond_signal(&ro->qcond);
  pthread_mutex_unlock(&ro->qlock);
}

/* Drops the canary (rollback), logs and counts why. 0, or -1: none.
 * on_thread: called by the rollout thread (which closes it at once). */
static int drop_canary(rollout *ro, int reason, const char *msg, const char *fields,
                       int on_thread) {
  pthread_rwlock_wrlock(&ro->lock);
  vd_engine *c = ro->canary;
  ro->canary = NULL;
  atomic_store(&ro->percent_bp, 0);
  if (c) log_rollout(reason == RB_ADMIN ? "info" : "warn", "rollback", msg, ro, fields);
  free(ro->canary_dir);
  ro->canary_dir = NULL;
  atomic_store(&ro->active, ro->shadow || ro->canary);
  pthread_rwlock_unlock(&ro->lock);
  if (!c) return -1;
  atomic_fetch_add(&ro->rollbacks[reason], 1);
  pthread_mutex_lock(&ro->wlock);
  ro->wfill = ro->wpos = ro->since_check = 0;
  pthread_mutex_unlock(&ro->wlock);
  if (on_thread)
    vd_engine_close(c);
  else
    bury(ro, c);
  return 0;
}

/* One compared canary decision into the window; checks the limits every
 * few entries once the window holds min_decisions. */
static void window_add(rollout *ro, int disagree, int error, double us) {
  pthread_mutex_lock(&ro->wlock);
  if (!ro->win) {
    pthread_mutex_unlock(&ro->wlock);
    return;
  }
  ro->win[ro->wpos] = (win_entry){(uint8_t)disagree, (uint8_t)error, (float)us};
  ro->wpos = (ro->wpos + 1) % ro->wn;
  if (ro->wfill < ro->wn) ro->wfill++;
  int check = ro->wfill >= ro->o.min_decisions && ++ro->since_check >= 16;
  if (!check) {
    pthread_mutex_unlock(&ro->wlock);
    return;
  }
  ro->since_check = 0;
  unsigned n = ro->wfill, dis = 0, err = 0;
  float *lat = malloc(n * sizeof *lat);
  unsigned nl = 0;
  for (unsigned i = 0; i < n; i++) {
    dis += ro->win[i].disagree;
    err += ro->win[i].error;
    if (lat && !ro->win[i].error && ro->win[i].us >= 0) lat[nl++] = ro->win[i].us;
  }
  double max_dis = ro->o.max_disagreement, max_err = ro->o.max_errors, max_p99 = ro->o.max_p99_us;
  pthread_mutex_unlock(&ro->wlock);
  double p99 = 0;
  if (lat && nl) {
    qsort(lat, nl, sizeof *lat, cmp_float);
    p99 = lat[(size_t)ceil(0.99 * nl) - 1];
  }
  free(lat);
  double sd = (double)dis / n, se = (double)err / n;
  int reason = -1;
  char msg[300], f[300];
  if (max_dis >= 0 && sd > max_dis) {
    reason = RB_DISAGREEMENT;
    snprintf(msg, sizeof msg,
             "the canary disagreed with live on %.4f of the last %u compared decisions "
             "(limit %g): rolled back",
             sd, n, max_dis);
  } else if (max_err >= 0 && se > max_err) {
    reason = RB_ERRORS;
    snprintf(msg, sizeof msg,
             "the canary failed %.4f of the last %u compared decisions (limit %g): rolled back", se,
             n, max_err);
  } else if (max_p99 >= 0 && p99 > max_p99) {
    reason = RB_P99;
    snprintf(msg, sizeof msg,
             "the canary's p99 over the last %u compared decisions was %.1f us (limit %g us): "
             "rolled back",
             n, p99, max_p99);
  }
  if (reason < 0) return;
  snprintf(f, sizeof f,
           ",\"reason\":\"%s\",\"window\":%u,\"disagreement\":%.4f,\"errors\":%.4f,\"p99_us\":%.1f",
           rb_name[reason], n, sd, se, p99);
  drop_canary(ro, reason, msg, f, 1);
}

/* ---- the rollout thread ---- */
static void copy_text(char *to, size_t n, const char *s) { snprintf(to, n, "%s", s ? s : ""); }

static void compare(rollout *ro, const job *j, vd_decision *d, int rc, int other) {
  int ok = rc == 0;
  const char *act = ok ? vd_decision_action(d) : NULL;
  act = act ? act : "";
  int agree = ok && !j->failed && !strcmp(act, j->action) && vd_decision_allowed(d) == j->allowed;
  if (ok) metrics_hist_observe(&ro->decide[other], (uint64_t)(vd_decision_latency_us(d) * 1e3));
  if (!ok || j->failed) atomic_fetch_add(&ro->errors, 1);
  if (ok && !j->failed) {
    atomic_fetch_add(&ro->compared, 1);
    if (agree) atomic_fetch_add(&ro->agreed, 1);
  }
  if (ok && !j->failed && !agree) {
    /* live's action first, the candidate's second, whichever answered */
    const char *live = other == SIDE_LIVE ? act : j->action;
    const char *cand = other == SIDE_LIVE ? j->action : act;
    const char *s[3] = {j->strategy, "", ""};
    metrics_table_count(&ro->m.decisions, s);
    const char *ch[3] = {j->strategy, live, cand};
    metrics_table_count(&ro->m.rules, ch);
  }
  if (other == SIDE_SHADOW) return;
  /* the canary's side of this comparison */
  int cerr = other == SIDE_CANARY ? !ok : j->failed;
  /* its time only where it answered: off the path it is what the machine
   * left this thread, and no measure of the canary */
  double cus = other == SIDE_CANARY ? -1 : j->latency_us;
  window_add(ro, ok && !j->failed && !agree, cerr, cus);
}

/* Without the lock: the workers never wait for this thread (the engines it
 * reads are closed by this thread alone). */
static void run_job(rollout *ro, job *j, vd_decision *d) {
  vd_engine *e, *canary = ro->canary, *shadow = ro->shadow;
  int other;
  if (j->answered == SIDE_CANARY) {
    e = ro->srv->engine, other = SIDE_LIVE;
  } else if (canary) {
    e = canary, other = SIDE_CANARY;
  } else if (shadow) {
    e = shadow, other = SIDE_SHADOW;
  } else {
    atomic_fetch_add(&ro->dropped, 1); /* the candidate went meanwhile */
    return;
  }
  if (j->failed) {
    /* the answering side refused the request: nothing to compare it with,
     * and no answered record for an off-path one to complete; a canary's
     * refusal counts against it */
    atomic_fetch_add(&ro->errors, 1);
    if (other == SIDE_LIVE) window_add(ro, 0, 1, -1);
    return;
  }
  service_side side = {.side = side_name[other],
                       .completes = j->id[0] ? j->id : NULL,
                       .answered = j->has_rollout ? side_name[j->answered] : NULL,
                       .by = j->by,
                       .bucket = j->bucket,
                       .percent = j->percent,
                       .clock_ns = j->clock_ns,
                       .off_path = 1};
  vd_error err;
  int rc = service_decide_side(e, j->body, j->len, &side, d, &err);
  compare(ro, j, d, rc, other);
}

static void *rollout_main(void *arg) {
  rollout *ro = arg;
  /* Normal priority, on purpose: this thread takes a slot in the snapshot
   * log's queue (consumed in order) and an RCU read section (which a reload
   * waits out); preempted at a low priority while holding either, it would
   * make the writer, and under durability always the answers, or a reload
   * wait on it. What bounds its work is the queue, which drops. */
  vd_decision *d = vd_decision_new();
  for (;;) {
    pthread_mutex_lock(&ro->qlock);
    while (!ro->count && !ro->graves && !ro->stopping) pthread_cond_wait(&ro->qcond, &ro->qlock);
    grave *g = ro->graves;
    ro->graves = NULL;
    int have = ro->count > 0;
    job j;
    if (have) {
      j = ro->ring[ro->head];
      ro->head = (ro->head + 1) % ro->cap;
      ro->count--;
    }
    pthread_mutex_unlock(&ro->qlock);
    while (g) { /* between two jobs: no decision of this thread uses them */
      grave *next = g->next;
      vd_engine_close(g->e);
      free(g);
      g = next;
    }
    if (!have) {
      if (ro->stopping) break;
      continue;
    }
    if (d) run_job(ro, &j, d);
    free(j.body);
  }
  vd_decision_free(d);
  return NULL;
}

/* Queues the other side's decision of a request just answered; a full
 * queue drops it (counted). */
static void enqueue(rollout *ro, const char *body, size_t len, const vd_decision *d, int failed,
                    int answered, const service_side *side) {
  job j;
  memset(&j, 0, sizeof j);
  j.answered = (uint8_t)answered;
  j.failed = (uint8_t)failed;
  if (!(j.body = malloc(len + 1))) {
    atomic_fetch_add(&ro->dropped, 1);
    return;
  }
  memcpy(j.body, body, len);
  j.body[len] = '\0';
  j.len = len;
  j.clock_ns = side->clock_ns;
  if (!failed) {
    copy_text(j.id, sizeof j.id, vd_decision_snapshot_id(d));
    copy_text(j.action, sizeof j.action, vd_decision_action(d));
    copy_text(j.strategy, sizeof j.strategy, vd_decision_strategy(d));
    j.allowed = (uint8_t)vd_decision_allowed(d);
    j.latency_us = vd_decision_latency_us(d);
  }
  if (side->answered) {
    j.has_rollout = 1;
    copy_text(j.by, sizeof j.by, side->by);
    j.bucket = side->bucket;
    j.percent = side->percent;
  }
  /* never wait for the lock: a busy queue drops the job */
  if (pthread_mutex_trylock(&ro->qlock) != 0) {
    free(j.body);
    atomic_fetch_add(&ro->dropped, 1);
    return;
  }
  if (ro->count == ro->cap || ro->stopping) {
    pthread_mutex_unlock(&ro->qlock);
    free(j.body);
    atomic_fetch_add(&ro->dropped, 1);
    return;
  }
  ro->ring[(ro->head + ro->count) % ro->cap] = j;
  ro->count++;
  pthread_cond_signal(&ro->qcond);
  pthread_mutex_unlock(&ro->qlock);
  atomic_fetch_add(&ro->queued, 1);
}

/* ---- choosing the canary's side ---- */
static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
  return h;
}

/* What picks the request's side, hashed (FNV-1a 64) into 0..9999: the
 * context field the strategy's `rollout_key:` names (a string's bytes, a
 * number's text), else the request's key. by says which ("field NAME",
 * "key", "no key"; into by_buf). -1: nothing to hash. */
static int bucket_of(server *s, const char *body, size_t len, char *by_buf, size_t byn,
                     const char **by) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  value v;
  int bucket = -1;
  *by = "no key";
  if (json_parse(&a, body, len, NULL, &v, NULL) == 0 && v.kind == V_MAP) {
    const value *act = value_map_get(&v, "action", 6);
    char field[128] = "";
    if (act && act->kind == V_STRING)
      service_rollout_key(s->engine, act->s, act->n, field, sizeof field);
    const value *k = NULL;
    if (field[0]) {
      const value *ctx = value_map_get(&v, "context", 7);
      k = ctx && ctx->kind == V_MAP ? value_map_get(ctx, field, strlen(field)) : NULL;
      char num[32];
      if (k && k->kind == V_INT) {
        int n = snprintf(num, sizeof num, "%lld", (long long)k->i);
        bucket = (int)(fnv1a(num, (size_t)n) % 10000);
      } else if (k && k->kind == V_STRING && k->n) {
        bucket = (int)(fnv1a(k->s, k->n) % 10000);
      }
      if (bucket >= 0) {
        snprintf(by_buf, byn, "field %s", field);
        *by = by_buf;
      }
    } else {
      k = value_map_get(&v, "key", 3);
      if (k && k->kind == V_STRING && k->n) {
        bucket = (int)(fnv1a(k->s, k->n) % 10000);
        *by = "key";
      }
    }
  }
  arena_free(&a);
  return bucket;
}

int rollout_decide_body(worker *w, const char *body, size_t len, vd_decision *d, vd_error *err,
                        int *rc) {
  rollout *ro = w->srv->rollout;
  if (!ro || !atomic_load_explicit(&ro->active, memory_order_relaxed)) return 0;
  pthread_rwlock_rdlock(&ro->lock);
  if (!ro->shadow && !ro->canary) {
    pthread_rwlock_unlock(&ro->lock);
    return 0;
  }
  char by_buf[160];
  service_side side;
  memset(&side, 0, sizeof side);
  side.clock_ns = clock_wall_ns(); /* both sides decide at the answer's request.time */
  int answered = SIDE_LIVE;
  vd_engine *e = w->srv->engine;
  if (ro->canary) {
    int pct = atomic_load(&ro->percent_bp);
    int bucket = bucket_of(w->srv, body, len, by_buf, sizeof by_buf, &side.by);
    side.bucket = bucket < 0 ? 0 : bucket;
    side.percent = pct / 100.0;
    if (bucket < 0 ? ro->o.no_key_canary && pct > 0 : bucket < pct) {
      answered = SIDE_CANARY;
      e = ro->canary;
    }
    side.side = side_name[answered];
    side.answered = side_name[answered];
  }
  atomic_fetch_add(&ro->answered[answered], 1);
  w->m.side = answered == SIDE_CANARY ? METRICS_SIDE_CANARY : METRICS_SIDE_LIVE;
  *rc = service_decide_side(e, body, len, &side, d, err);
  pthread_rwlock_unlock(&ro->lock);
  /* The other side's job is queued now (a copy of the request and of what
   * the answer says): the caller renders and sends the answer meanwhile,
   * never waiting for it. A request the answering side refused is still
   * tried by the other (an error share is a canary's limit); one refused
   * for its snapshot is not a refusal of the request. */
  if (*rc == 0)
    enqueue(ro, body, len, d, 0, answered, &side);
  else if (err->code != VD_ESNAPSHOT)
    enqueue(ro, body, len, d, 1, answered, &side);
  return 1;
}

int server_decide_json(worker *w, const char *body, size_t len, vd_decision *d, vd_error *err) {
  int rc;
  if (rollout_decide_body(w, body, len, d, err, &rc)) return rc;
  w->m.side = METRICS_SIDE_LIVE;
  return vd_decide_json(w->srv->engine, body, (long)len, d, err);
}

/* ---- life cycle ---- */
static int open_candidate(server *s, const char *dir, vd_engine **out, char *why, size_t n) {
  vd_error err;
  if (service_engine_open_beside(dir, s->engine, out, &err) != 0) {
    int k = snprintf(why, n, "%.300s: ", dir);
    if (k > 0 && (size_t)k < n)
      memcpy(why + k, err.message, strnlen(err.message, n - (size_t)k - 1));
    if (k > 0 && (size_t)k < n) why[k + strnlen(err.message, n - (size_t)k - 1)] = '\0';
    return -1;
  }
  unsigned warm;
  vd_engine_warm_up(*out, &warm, &err);
  return 0;
}

static char *settings_keep;

int rollout_start(server *s, char *why, size_t whylen) {
  rollout_opts o = s->opts->rollout;
  if (o.settings_file && read_settings_file(&o, &settings_keep, NULL, why, whylen) != 0) return -1;
  if (rollout_opts_check(&o, why, whylen) != 0) return -1;
  rollout *ro = calloc(1, sizeof *ro);
  if (!ro) return snprintf(why, whylen, "out of memory"), -1;
  ro->srv = s;
  ro->o = o;
  pthread_rwlockattr_t ra;
  pthread_rwlockattr_init(&ra);
  /* a rollback must not wait behind a stream of deciding readers */
  pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&ro->lock, &ra);
  pthread_rwlockattr_destroy(&ra);
  pthread_mutex_init(&ro->qlock, NULL);
  pthread_mutex_init(&ro->wlock, NULL);
  pthread_cond_init(&ro->qcond, NULL);
  metrics_init(&ro->m);
  ro->cap = o.queue ? o.queue : 1024;
  ro->wn = o.window ? o.window : 1000;
  ro->ring = calloc(ro->cap, sizeof *ro->ring);
  ro->win = calloc(ro->wn, sizeof *ro->win);
  s->rollout = ro;
  if (!ro->ring || !ro->win) {
    snprintf(why, whylen, "out of memory");
    rollout_stop(s);
    return -1;
  }
  if (o.shadow_dir) {
    vd_engine *e = NULL;
    int orc = open_candidate(s, o.shadow_dir, &e, why, whylen);
    ro->shadow = e;
    if (orc != 0 || !(ro->shadow_dir = strdup(o.shadow_dir))) {
      rollout_stop(s);
      return -1;
    }
  }
  if (o.canary_dir) {
    vd_engine *e = NULL;
    int orc = open_candidate(s, o.canary_dir, &e, why, whylen);
    ro->canary = e;
    if (orc != 0 || !(ro->canary_dir = strdup(o.canary_dir))) {
      rollout_stop(s);
      return -1;
    }
    atomic_store(&ro->percent_bp, (int)lround(o.percent * 100));
  }
  atomic_store(&ro->active, ro->shadow || ro->canary);
  if (pthread_create(&ro->thread, NULL, rollout_main, ro) != 0) {
    snprintf(why, whylen, "cannot start the rollout thread");
    rollout_stop(s);
    return -1;
  }
  ro->started = 1;
  return 0;
}

/* After the workers stopped: the queue drains (its decisions recorded),
 * then the candidates close, before the live engine. */
void rollout_stop(server *s) {
  rollout *ro = s->rollout;
  if (!ro) return;
  pthread_mutex_lock(&ro->qlock);
  ro->stopping = 1;
  pthread_cond_broadcast(&ro->qcond);
  pthread_mutex_unlock(&ro->qlock);
  if (ro->started) pthread_join(ro->thread, NULL);
  for (unsigned i = 0; i < ro->count; i++) free(ro->ring[(ro->head + i) % ro->cap].body);
  for (grave *g = ro->graves, *next; g; g = next) {
    next = g->next;
    vd_engine_close(g->e);
    free(g);
  }
  vd_engine_close(ro->shadow);
  vd_engine_close(ro->canary);
  free(ro->shadow_dir);
  free(ro->canary_dir);
  free(ro->ring);
  free(ro->win);
  metrics_free(&ro->m);
  pthread_rwlock_destroy(&ro->lock);
  pthread_mutex_destroy(&ro->qlock);
  pthread_mutex_destroy(&ro->wlock);
  pthread_cond_destroy(&ro->qcond);
  free(ro);
  s->rollout = NULL;
  free(settings_keep);
  settings_keep = NULL;
}

void rollout_hup(server *s) {
  rollout *ro = s->rollout;
  if (!ro) return;
  char why[600];
  if (ro->o.settings_file) {
    rollout_opts o = ro->o;
    int named_pct = 0;
    if (read_settings_file(&o, &settings_keep, &named_pct, why, sizeof why) != 0) {
      server_log("error", "rollout_settings_failed", why, NULL);
    } else {
      pthread_mutex_lock(&ro->wlock);
      unsigned keep_window = ro->wn; /* the window's room is fixed at start */
      o.window = o.window > keep_window ? keep_window : o.window;
      if (o.min_decisions > o.window) o.min_decisions = o.window;
      ro->o = o;
      pthread_mutex_unlock(&ro->wlock);
      pthread_rwlock_rdlock(&ro->lock);
      if (ro->canary && named_pct) atomic_store(&ro->percent_bp, (int)lround(o.percent * 100));
      pthread_rwlock_unlock(&ro->lock);
      char f[200];
      snprintf(f, sizeof f, ",\"percent\":%g,\"file\":\"%s\"", atomic_load(&ro->percent_bp) / 100.0,
               o.settings_file);
      server_log("info", "rollout_settings", "rollout settings re-read", f);
    }
  }
  pthread_rwlock_rdlock(&ro->lock);
  vd_engine *cands[2] = {ro->shadow, ro->canary};
  for (int i = 0; i < 2; i++) {
    vd_error err;
    if (cands[i] && vd_engine_reload(cands[i], &err) != 0)
      server_log("error", "reload_failed", err.message,
                 i ? ",\"side\":\"canary\"" : ",\"side\":\"shadow\"");
  }
  pthread_rwlock_unlock(&ro->lock);
}

/* ---- metrics ---- */
void rollout_metrics(server *s, json_buf *b) {
  rollout *ro = s->rollout;
  if (!ro) return;
  char t[600];
#define COUNTER(name, help, v)                                                                   \
  json_buf_put(b, t,                                                                             \
               (size_t)snprintf(t, sizeof t, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, \
                                help, name, name, (unsigned long long)(v)))
  COUNTER("verdict_rollout_compared_total",
          "Requests both sides decided (the answering side and the other, off the answer's path).",
          atomic_load(&ro->compared));
  COUNTER("verdict_rollout_agreed_total", "Compared decisions with the same action and allowed.",
          atomic_load(&ro->agreed));
  COUNTER("verdict_rollout_errors_total", "Requests one side refused (not compared).",
          atomic_load(&ro->errors));
  COUNTER("verdict_rollout_dropped_total",
          "Off-path decisions dropped: the rollout queue was full.", atomic_load(&ro->dropped));
  PUT_LIT(b,
          "# HELP verdict_rollout_disagreements_total Compared decisions that differed, by "
          "strategy.\n# TYPE verdict_rollout_disagreements_total counter\n");
  static const char *const sk[3] = {"strategy", NULL, NULL};
  metrics_render_table(b, &ro->m.decisions, "verdict_rollout_disagreements_total", sk);
  PUT_LIT(b,
          "# HELP verdict_rollout_changes_total Compared decisions that differed, by strategy "
          "and live action -> candidate action.\n# TYPE verdict_rollout_changes_total "
          "counter\n");
  static const char *const ck[3] = {"strategy", "live", "candidate"};
  metrics_render_table(b, &ro->m.rules, "verdict_rollout_changes_total", ck);
  static const char *const hist_name = "verdict_rollout_decide_duration_seconds";
  json_buf_put(b, t,
               (size_t)snprintf(t, sizeof t,
                                "# HELP %s Time the side that did not answer took for one "
                                "decision, off the answer's path, by that side (shadow, canary, "
                                "or live when the canary answered); beside "
                                "verdict_decide_duration_seconds, the answering side's.\n"
                                "# TYPE %s histogram\n",
                                hist_name, hist_name));
  for (int i = 0; i < 3; i++) {
    char labels[32];
    snprintf(labels, sizeof labels, "side=\"%s\",", side_name[i]);
    metrics_render_hist_lines(b, &ro->decide[i], hist_name, labels);
  }
  PUT_LIT(b,
          "# HELP verdict_rollout_answered_total Requests answered, by side.\n"
          "# TYPE verdict_rollout_answered_total counter\n");
  for (int i = 0; i < 3; i++)
    if (i != SIDE_SHADOW)
      json_buf_put(
          b, t,
          (size_t)snprintf(t, sizeof t, "verdict_rollout_answered_total{side=\"%s\"} %llu\n",
                           side_name[i], (unsigned long long)atomic_load(&ro->answered[i])));
  json_buf_put(b, t,
               (size_t)snprintf(t, sizeof t,
                                "# HELP verdict_canary_percent The canary's share of requests "
                                "(0: none).\n# TYPE verdict_canary_percent gauge\n"
                                "verdict_canary_percent %g\n",
                                atomic_load(&ro->percent_bp) / 100.0));
  PUT_LIT(b,
          "# HELP verdict_canary_rollbacks_total Canaries dropped, by reason.\n"
          "# TYPE verdict_canary_rollbacks_total counter\n");
  for (int i = 0; i < RB_REASONS; i++)
    json_buf_put(
        b, t,
        (size_t)snprintf(t, sizeof t, "verdict_canary_rollbacks_total{reason=\"%s\"} %llu\n",
                         rb_name[i], (unsigned long long)atomic_load(&ro->rollbacks[i])));
  COUNTER("verdict_canary_promotions_total", "Canaries made live.", atomic_load(&ro->promotions));
#undef COUNTER
}

/* ---- admin: /v1/rollout ---- */
static void put_status(rollout *ro, json_buf *b) {
  pthread_rwlock_rdlock(&ro->lock);
  char v[65];
  PUT_LIT(b, "{\"shadow\":");
  if (ro->shadow) {
    PUT_LIT(b, "{\"dir\":");
    json_write_string(b, ro->shadow_dir, strlen(ro->shadow_dir));
    PUT_LIT(b, ",\"policy_version\":");
    vd_engine_policy_version(ro->shadow, v);
    json_write_string(b, v, strlen(v));
    json_buf_putc(b, '}');
  } else {
    PUT_LIT(b, "null");
  }
  PUT_LIT(b, ",\"canary\":");
  if (ro->canary) {
    PUT_LIT(b, "{\"dir\":");
    json_write_string(b, ro->canary_dir, strlen(ro->canary_dir));
    PUT_LIT(b, ",\"policy_version\":");
    vd_engine_policy_version(ro->canary, v);
    json_write_string(b, v, strlen(v));
    char t[64];
    json_buf_put(
        b, t,
        (size_t)snprintf(t, sizeof t, ",\"percent\":%g}", atomic_load(&ro->percent_bp) / 100.0));
  } else {
    PUT_LIT(b, "null");
  }
  PUT_LIT(b, ",\"live\":{\"policy_version\":");
  vd_engine_policy_version(ro->srv->engine, v);
  json_write_string(b, v, strlen(v));
  pthread_rwlock_unlock(&ro->lock);
  char t[400];
  json_buf_put(
      b, t,
      (size_t)snprintf(
          t, sizeof t,
          "},\"compared\":%llu,\"agreed\":%llu,\"errors\":%llu,\"dropped\":"
          "%llu,\"rollbacks\":%llu}\n",
          (unsigned long long)atomic_load(&ro->compared),
          (unsigned long long)atomic_load(&ro->agreed),
          (unsigned long long)atomic_load(&ro->errors),
          (unsigned long long)atomic_load(&ro->dropped),
          (unsigned long long)(atomic_load(&ro->rollbacks[0]) + atomic_load(&ro->rollbacks[1]) +
                               atomic_load(&ro->rollbacks[2]) + atomic_load(&ro->rollbacks[3]))));
}

void rollout_figures(server *s, char shadow[65], char canary[65], double *percent,
                     double *agreement) {
  rollout *ro = s->rollout;
  shadow[0] = canary[0] = '\0';
  *percent = 0;
  *agreement = -1;
  if (!ro) return;
  pthread_rwlock_rdlock(&ro->lock);
  if (ro->shadow) vd_engine_policy_version(ro->shadow, shadow);
  if (ro->canary) {
    vd_engine_policy_version(ro->canary, canary);
    *percent = atomic_load(&ro->percent_bp) / 100.0;
  }
  pthread_rwlock_unlock(&ro->lock);
  uint64_t n = atomic_load(&ro->compared), a = atomic_load(&ro->agreed);
  if (n) *agreement = (double)a / (double)n;
}

static void respond_status(conn *c, rollout *ro) {
  json_buf b;
  json_buf_init(&b, NULL);
  put_status(ro, &b);
  if (b.oom)
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory writing the answer", NULL);
  else
    conn_respond(c, 200, "application/json", NULL, b.data, b.len);
  json_buf_free(&b);
}

/* The body's "dir" (a string) and "percent" (a number 0..100), either
 * optional. 0, or -1 after answering 400. */
static int read_body(conn *c, const http_request *r, char **dir, double *percent) {
  *dir = NULL;
  *percent = -1;
  if (!r->body_len) return 0;
  arena a;
  arena_init(&a, NULL, 0, 0);
  value v;
  const char *bad = NULL, *path = NULL;
  if (json_parse(&a, r->body, r->body_len, NULL, &v, NULL) != 0 || v.kind != V_MAP) {
    bad = "the body is not a JSON object";
  } else {
    const value *d = value_map_get(&v, "dir", 3), *p = value_map_get(&v, "percent", 7);
    if (d && (d->kind != V_STRING || !d->n))
      bad = "dir wants a bundle folder (a string)", path = "dir";
    else if (d)
      *dir = strndup(d->s, d->n);
    if (!bad && p) {
      double x = p->kind == V_INT ? (double)p->i : p->kind == V_DOUBLE ? p->d : -1;
      if (!(x >= 0 && x <= 100))
        bad = "percent wants a number from 0 to 100", path = "percent";
      else
        *percent = x;
    }
  }
  arena_free(&a);
  if (bad) {
    free(*dir);
    *dir = NULL;
    conn_respond_error(c, 400, "bad_request", bad, path);
    return -1;
  }
  return 0;
}

static int path_eq(const http_request *r, const char *p) {
  return r->path_len == strlen(p) && memcmp(r->path, p, r->path_len) == 0;
}

void route_rollout(conn *c, const http_request *r) {
  if (admin_check(c, r)) return;
  server *s = conn_worker(c)->srv;
  rollout *ro = s->rollout;
  if (!ro) {
    conn_respond_error(c, 503, "rollout_off", "the rollout thread is not running", NULL);
    return;
  }
  int get = r->method == HTTP_GET, post = r->method == HTTP_POST, del = r->method == HTTP_DELETE;
  char *dir = NULL;
  double pct = -1;
  char why[700], f[800];
  if (path_eq(r, "/v1/rollout")) {
    if (!get) return conn_respond_error(c, 405, "method_not_allowed", "GET /v1/rollout", NULL);
    return respond_status(c, ro);
  }
  if (path_eq(r, "/v1/rollout/shadow") || path_eq(r, "/v1/rollout/canary")) {
    int canary = r->path[12] == 'c';
    if (!post && !del)
      return conn_respond_error(c, 405, "method_not_allowed", "POST or DELETE", NULL);
    if (del) {
      if (canary) {
        if (drop_canary(ro, RB_ADMIN, "the canary was rolled back (admin call)",
                        ",\"reason\":\"admin\"", 0) != 0)
          return conn_respond_error(c, 409, "no_canary", "there is no canary to drop", NULL);
        return respond_status(c, ro);
      }
      pthread_rwlock_wrlock(&ro->lock);
      vd_engine *old = ro->shadow;
      ro->shadow = NULL;
      free(ro->shadow_dir);
      ro->shadow_dir = NULL;
      atomic_store(&ro->active, ro->shadow || ro->canary);
      pthread_rwlock_unlock(&ro->lock);
      if (!old) return conn_respond_error(c, 409, "no_shadow", "there is no shadow to drop", NULL);
      bury(ro, old);
      server_log("info", "shadow_dropped", "the shadow bundle was dropped", NULL);
      return respond_status(c, ro);
    }
    if (read_body(c, r, &dir, &pct) != 0) return;
    if (!dir) return conn_respond_error(c, 400, "bad_request", "the body needs \"dir\"", "dir");
    if (!canary && pct >= 0) {
      free(dir);
      return conn_respond_error(c, 400, "bad_request", "a shadow answers no share: no percent",
                                "percent");
    }
    pthread_rwlock_rdlock(&ro->lock);
    int other = canary ? ro->shadow != NULL : ro->canary != NULL;
    pthread_rwlock_unlock(&ro->lock);
    if (other) {
      free(dir);
      return conn_respond_error(c, 409, "one_candidate",
                                canary ? "a shadow is set: drop it first (one candidate at a time)"
                                       : "a canary is set: promote or roll it back first (one "
                                         "candidate at a time)",
                                NULL);
    }
    vd_engine *e;
    if (open_candidate(s, dir, &e, why, sizeof why) != 0) {
      free(dir);
      return conn_respond_error(c, 422, vd_err_name(VD_EPOLICY), why, "dir");
    }
    pthread_rwlock_wrlock(&ro->lock);
    vd_engine *old = canary ? ro->canary : ro->shadow;
    char **d = canary ? &ro->canary_dir : &ro->shadow_dir;
    free(*d);
    *d = dir;
    if (canary) {
      ro->canary = e;
      atomic_store(&ro->percent_bp, (int)lround((pct >= 0 ? pct : 0) * 100));
    } else {
      ro->shadow = e;
    }
    atomic_store(&ro->active, ro->shadow || ro->canary);
    pthread_rwlock_unlock(&ro->lock);
    bury(ro, old);
    char v[65];
    vd_engine_policy_version(e, v);
    snprintf(f, sizeof f, ",\"side\":\"%s\",\"policy_version\":\"%s\"",
             canary ? "canary" : "shadow", v);
    server_log("info", canary ? "canary_set" : "shadow_set", "a candidate bundle was set", f);
    return respond_status(c, ro);
  }
  if (!post) return conn_respond_error(c, 405, "method_not_allowed", "POST", NULL);
  if (path_eq(r, "/v1/rollout/percent")) {
    if (read_body(c, r, &dir, &pct) != 0) return;
    free(dir);
    if (pct < 0)
      return conn_respond_error(c, 400, "bad_request", "the body needs \"percent\"", "percent");
    pthread_rwlock_rdlock(&ro->lock);
    int has = ro->canary != NULL;
    if (has) atomic_store(&ro->percent_bp, (int)lround(pct * 100));
    pthread_rwlock_unlock(&ro->lock);
    if (!has) return conn_respond_error(c, 409, "no_canary", "there is no canary", NULL);
    snprintf(f, sizeof f, ",\"percent\":%g", pct);
    server_log("info", "canary_percent", "the canary's share changed", f);
    return respond_status(c, ro);
  }
  if (path_eq(r, "/v1/rollout/rollback")) {
    if (drop_canary(ro, RB_ADMIN, "the canary was rolled back (admin call)",
                    ",\"reason\":\"admin\"", 0) != 0)
      return conn_respond_error(c, 409, "no_canary", "there is no canary to roll back", NULL);
    return respond_status(c, ro);
  }
  if (path_eq(r, "/v1/rollout/promote")) {
    /* the canary's folder becomes the live engine's, through a normal
     * reload: compiled again, swapped atomically, its version stored and
     * logged as a reload (trigger "promote") */
    pthread_rwlock_wrlock(&ro->lock);
    vd_engine *cand = ro->canary;
    char *cdir = ro->canary_dir;
    ro->canary = NULL;
    ro->canary_dir = NULL;
    atomic_store(&ro->percent_bp, 0);
    atomic_store(&ro->active, ro->shadow || ro->canary);
    pthread_rwlock_unlock(&ro->lock);
    if (!cand)
      return conn_respond_error(c, 409, "no_canary", "there is no canary to promote", NULL);
    char *was = strdup(service_engine_dir(s->engine));
    vd_error err;
    char before[65], after[65];
    if (!was || service_engine_set_dir(s->engine, cdir) != 0 ||
        server_reload(s, "promote", &err, before, after) != 0) {
      if (was) service_engine_set_dir(s->engine, was);
      free(was);
      pthread_rwlock_wrlock(&ro->lock); /* it stays the canary, at no share */
      ro->canary = cand;
      ro->canary_dir = cdir;
      atomic_store(&ro->active, ro->shadow || ro->canary);
      pthread_rwlock_unlock(&ro->lock);
      return conn_respond_error(c, 500, "promote_failed", "the live engine did not reload", NULL);
    }
    free(was);
    atomic_fetch_add(&ro->promotions, 1);
    snprintf(f, sizeof f,
             ",\"canary\":\"%s\",\"policy_version\":\"%s\",\"previous_version\":\"%s\"", cdir,
             after, before);
    server_log("info", "promote", "the canary is live", f);
    free(cdir);
    bury(ro, cand);
    return respond_status(c, ro);
  }
  conn_respond_error(c, 404, "no_endpoint", "no such rollout endpoint (see docs/server.md)", NULL);
}
