/* engine.c — vd_engine: the live policy bundle, swapped atomically on
 * reload, and the public decide calls.
 *
 * The live bundle (with the engine's name tables for it, see names.c) sits
 * behind one pointer protected by RCU (liburcu, "bulletproof" flavour,
 * which needs no per-thread registration, so any caller's thread may decide).
 * A decision reads the pointer inside rcu_read_lock/unlock and never waits;
 * a reload compiles the new bundle beside the old one, exchanges the pointer,
 * waits for a grace period (every decision that could still see the old
 * bundle has finished) and frees the old one — with snapshots on, once the
 * snapshot writer has also formatted every record the old bundle decided
 * (their captures name rules and lets by pointer; until then it waits on a
 * list, checked at each reload and emptied at close). Reloads are
 * serialised by a mutex; decisions take no lock.
 *
 * A bundle that fails to compile never replaces the live one: the error
 * (every diagnostic, the first one's place in line/column) goes back to the
 * caller and the old bundle keeps serving..
 *
 * Each decision reads the wall clock once, up front: that reading is
 * `request.time` for the rules and the time of the decision's snapshot.
 * With snapshots on (record.c), a decision that succeeded is recorded
 * before the call returns; the trace is then always kept, because the
 * snapshot carries it. engine_decide_json_at is the same path with the clock
 * reading given instead of read, for replay. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <urcu-bp.h>

#include "core/clock.h"
#include "engine/engine.h"
#include "engine/service.h"
#include "snapshot/snapshot.h"

/* What a reload swaps: the bundle and what the engine derives from it. */
typedef struct live {
  policy_bundle *bundle;
  int any_mask;      /* a strategy declares snapshot: {mask, hash} (mask.c) */
  name_table *names; /* one per strategy, in mem */
  arena mem;
  /* once replaced, with snapshots on: kept until the snapshot writer has
   * formatted every record appended before `mark` (their captures point at
   * names in the bundle, record.c) */
  struct live *next_retired;
  uint64_t mark;
} live;

struct vd_engine {
  live *live; /* RCU-protected: read with rcu_dereference */
  char *dir;
  char *store_dir; /* engine_store_path's; "": none */
  char *pin_dir;   /* <snapshots_dir>/versions: the folder's own versions; NULL: snapshots off */
  uint8_t *secret; /* snapshot_secret_file's bytes (snapshot: {hash}); NULL: none */
  size_t secret_len;
  int warnings_as_errors;
  char *only_point; /* NULL: every strategy file */
  int lazy;         /* vd_engine_opts.lazy_compile */
  decide_limits lim;
  pthread_mutex_t reload_lock;
  recorder *rec;      /* NULL: snapshots off */
  int rec_always;     /* durability ALWAYS: a decision waits for its snapshot (record_wait) */
  live *retired;      /* replaced bundles the snapshot writer may still read */
  state_store *state; /* rate-limit counters, shared by every decision */
  int beside;         /* a rollout's engine: rec and state are the host's (not closed here) */
  _Atomic unsigned long long model_calls, model_deadline_misses;
};

void decide_limits_init(decide_limits *lim, const vd_engine_opts *o) {
  lim->cost_limit = o && o->cost_limit ? o->cost_limit : DECIDE_DEFAULT_COST_LIMIT;
  lim->regex_match_limit =
      o && o->regex_match_limit ? o->regex_match_limit : DECIDE_DEFAULT_REGEX_LIMIT;
  lim->memory_limit = o && o->memory_limit ? o->memory_limit : DECIDE_DEFAULT_MEMORY_LIMIT;
  lim->max_request_bytes =
      o && o->max_request_bytes ? o->max_request_bytes : DECIDE_DEFAULT_MAX_REQUEST;
}

/* Every diagnostic into err->message (as `verdict check` prints them), the
 * first error's place into line/column. */
static int load_failed(vd_error *err, const char *dir, const policy_diags *diags) {
  if (!err) return VD_EPOLICY;
  const policy_diag *first = NULL;
  for (size_t i = 0; i < diags->n && !first; i++)
    if (diags->items[i].severity == DIAG_ERROR) first = &diags->items[i];
  engine_error(err, VD_EPOLICY, first ? first->line : 0, first ? first->column : 0, NULL,
               "the policy bundle %s does not load: %zu error%s", dir, diags->errors,
               diags->errors == 1 ? "" : "s");
  char *text = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&text, &n);
  if (!f) return VD_EPOLICY;
  fprintf(f, "%s\n", err->message);
  for (size_t i = 0; i < diags->n; i++) policy_diag_print(&diags->items[i], f);
  fclose(f);
  if (!text) return VD_EPOLICY;
  size_t cap = sizeof err->message;
  if (n < cap) {
    memcpy(err->message, text, n + 1);
  } else {
    /* Keep what fits, cut at a line end, and say so. */
    const char *more = "\n... (more: run `verdict check` for the full list)";
    size_t keep = cap - strlen(more) - 1;
    while (keep > 0 && text[keep] != '\n') keep--;
    memcpy(err->message, text, keep);
    memcpy(err->message + keep, more, strlen(more) + 1);
  }
  /* No trailing newline: messages are sentences. */
  size_t m = strlen(err->message);
  while (m && err->message[m - 1] == '\n') err->message[--m] = '\0';
  free(text);
  return VD_EPOLICY;
}

static void live_free(live *l) {
  if (!l) return;
  policy_bundle_free(l->bundle);
  arena_free(&l->mem);
  free(l);
}

static int load(vd_engine *e, live **out, vd_error *err) {
  policy_load_opts lo = {.store_dir = e->store_dir,
                         .pin_dir = e->pin_dir,
                         .warnings_as_errors = e->warnings_as_errors,
                         .only_point = e->only_point,
                         .lazy = e->lazy};
  policy_diags diags;
  memset(&diags, 0, sizeof diags);
  policy_bundle *b = NULL;
  *out = NULL;
  int rc = policy_bundle_load(e->dir, &lo, &b, &diags);
  if (rc != 0 || !b) {
    rc = load_failed(err, e->dir, &diags);
    policy_diags_free(&diags);
    policy_bundle_free(b);
    return rc;
  }
  policy_diags_free(&diags);
  int any_mask = 0;
  for (uint32_t i = 0; i < b->nstrategies; i++) {
    const strategy *s = &b->strategies[i];
    any_mask |= s->nsnap_mask || s->nsnap_hash;
    if (s->nsnap_hash && e->pin_dir && !e->secret) {
      int code = engine_error(err, VD_EPOLICY, 0, 0, NULL,
                              "strategy '%s' (%s) keyed-hashes fields in its snapshots "
                              "(snapshot.hash): give this node's secret with --snapshot-secret "
                              "FILE (vd_engine_opts.snapshot_secret_file)",
                              s->name ? s->name : "?", s->file ? s->file : e->dir);
      policy_bundle_free(b);
      return code;
    }
  }
  live *l = calloc(1, sizeof *l);
  if (l) {
    l->bundle = b;
    l->any_mask = any_mask;
    arena_init(&l->mem, NULL, 0, 0);
    l->names = name_tables_build(&l->mem, b);
  }
  if (!l || !l->names) {
    if (l)
      live_free(l);
    else
      policy_bundle_free(b);
    return engine_error(err, VD_ENOMEM, 0, 0, NULL, "out of memory loading %s", e->dir);
  }
  *out = l;
  return 0;
}

int engine_store_path(const char *bundle, const char *store_dir, const char *snapshots_dir,
                      char **out) {
  *out = NULL;
  if (store_dir) {
    if (!*store_dir) return 0;
    return (*out = strdup(store_dir)) ? 0 : -1;
  }
  if (snapshots_dir && *snapshots_dir) { /* versions beside the snapshot folder */
    size_t n = strlen(snapshots_dir);
    while (n > 1 && snapshots_dir[n - 1] == '/') n--;
    size_t cut = n;
    while (cut > 0 && snapshots_dir[cut - 1] != '/') cut--;
    if (asprintf(out, "%.*sversions", (int)cut, snapshots_dir) < 0) *out = NULL;
    return *out ? 0 : -1;
  }
  if (asprintf(out, "%s/.verdict/versions", bundle) < 0) *out = NULL;
  return *out ? 0 : -1;
}

/* The node secret for snapshot.hash: the file's bytes, a final newline
 * dropped (an editor's). Kept in memory only. */
static int read_secret(vd_engine *e, const char *path, vd_error *err) {
  FILE *f = fopen(path, "rb");
  uint8_t buf[4097];
  size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
  int bad = !f || ferror(f);
  if (f) fclose(f);
  if (bad)
    return engine_error(err, VD_EINVAL, 0, 0, NULL, "cannot read the snapshot secret %s", path);
  if (n && buf[n - 1] == '\n') n--;
  if (n && buf[n - 1] == '\r') n--;
  if (n < 16 || n > 4096)
    return engine_error(err, VD_EINVAL, 0, 0, NULL,
                        "the snapshot secret %s holds %zu bytes: give 16 to 4096 (for example "
                        "`head -c 32 /dev/urandom | base64 > FILE`)",
                        path, n);
  if (!(e->secret = malloc(n))) return engine_error(err, VD_ENOMEM, 0, 0, NULL, "out of memory");
  memcpy(e->secret, buf, n);
  e->secret_len = n;
  explicit_bzero(buf, sizeof buf);
  return 0;
}

/* host: a rollout's engine beside it (service_engine_open_beside): the
 * host's snapshot log, state store, versions folder and secret are used, so
 * none is opened or read here, and the candidate's versions land in the
 * same folder as the live ones'. */
static int engine_open(const char *dir, const vd_engine_opts *opts, vd_engine *host,
                       vd_engine **out, vd_error *err) {
  engine_error_clear(err);
  if (!out) return engine_error(err, VD_EINVAL, 0, 0, NULL, "vd_engine_open: out is NULL");
  *out = NULL;
  if (!dir || !*dir)
    return engine_error(err, VD_EINVAL, 0, 0, NULL, "vd_engine_open: no bundle folder given");
  vd_engine *e = calloc(1, sizeof *e);
  if (!e || !(e->dir = strdup(dir)) ||
      engine_store_path(dir, opts ? opts->store_dir : NULL, opts ? opts->snapshots_dir : NULL,
                        &e->store_dir) != 0 ||
      (!e->store_dir && !(e->store_dir = strdup("")))) {
    if (e) free(e->dir);
    if (e) free(e->store_dir);
    free(e);
    return engine_error(err, VD_ENOMEM, 0, 0, NULL, "out of memory");
  }
  e->warnings_as_errors = opts ? opts->warnings_as_errors : 0;
  e->lazy = opts ? opts->lazy_compile : 0;
  if (opts && opts->only_point && opts->only_point[0] &&
      !(e->only_point = strdup(opts->only_point))) {
    free(e->dir);
    free(e->store_dir);
    free(e);
    return engine_error(err, VD_ENOMEM, 0, 0, NULL, "out of memory");
  }
  decide_limits_init(&e->lim, opts);
  pthread_mutex_init(&e->reload_lock, NULL);
  if (host) {
    e->beside = 1;
    if ((host->pin_dir && !(e->pin_dir = strdup(host->pin_dir))) ||
        (host->secret && !(e->secret = malloc(host->secret_len)))) {
      vd_engine_close(e);
      return engine_error(err, VD_ENOMEM, 0, 0, NULL, "out of memory");
    }
    if (host->secret) memcpy(e->secret, host->secret, e->secret_len = host->secret_len);
  } else if (opts && opts->snapshots_dir && opts->snapshots_dir[0]) {
    /* The folder carries every version its records name (snapshot.h,
     * "self-contained"): each load writes them there before any decision
     * under them is made, so before any record naming them exists. The
     * folder is made here, as the log makes it (0750), since the load
     * comes first. */
    char msg[SNAPSHOT_ERRLEN];
    if (snapshot_folder_make(opts->snapshots_dir, msg, sizeof msg) < 0) {
      vd_engine_close(e);
      return engine_error(err, VD_ESNAPSHOT, 0, 0, NULL, "cannot record snapshots in %s: %s",
                          opts->snapshots_dir, msg);
    }
    if (!(e->pin_dir = snapshot_versions_path(opts->snapshots_dir))) {
      vd_engine_close(e);
      return engine_error(err, VD_ENOMEM, 0, 0, NULL, "out of memory");
    }
  }
  if (opts && opts->snapshot_secret_file && opts->snapshot_secret_file[0] &&
      read_secret(e, opts->snapshot_secret_file, err) != 0) {
    vd_engine_close(e);
    return VD_EINVAL;
  }
  live *l;
  int rc = load(e, &l, err);
  if (rc) {
    vd_engine_close(e);
    return rc;
  }
  e->live = l; /* not yet shared: no barrier needed */
  if (host) {
    e->state = host->state;
    e->rec = host->rec;
    e->rec_always = host->rec_always;
    *out = e;
    return 0;
  }
  {
    state_opts so = {
        .max_bytes = opts ? opts->state_max_bytes : 0,
        .timeout_ms = opts ? opts->state_timeout_ms : 0,
        .persist_path = opts ? opts->state_file : NULL,
        .on_error = opts && opts->state_on_error == VD_STATE_ALLOW  ? STATE_FALLBACK_ALLOW
                    : opts && opts->state_on_error == VD_STATE_DENY ? STATE_FALLBACK_DENY
                                                                    : STATE_FALLBACK_LOCAL};
    char msg[512];
    if (state_open(opts ? opts->state_url : NULL, &so, &e->state, msg, sizeof msg)) {
      vd_engine_close(e);
      return engine_error(err, VD_EINVAL, 0, 0, NULL, "%s", msg);
    }
  }
  if (opts && opts->snapshots_dir && opts->snapshots_dir[0] &&
      (rc = recorder_open(opts->snapshots_dir, opts, &e->rec, err))) {
    vd_engine_close(e);
    return rc;
  }
  e->rec_always = e->rec && opts->snapshot_durability == VD_DURABILITY_ALWAYS;
  *out = e;
  return 0;
}

int vd_engine_open(const char *dir, const vd_engine_opts *opts, vd_engine **out, vd_error *err) {
  return engine_open(dir, opts, NULL, out, err);
}

int vd_engine_reload(vd_engine *e, vd_error *err) {
  engine_error_clear(err);
  if (!e) return engine_error(err, VD_EINVAL, 0, 0, NULL, "vd_engine_reload: engine is NULL");
  pthread_mutex_lock(&e->reload_lock);
  live *l;
  int rc = load(e, &l, err);
  if (rc == 0) {
    live *old = rcu_xchg_pointer(&e->live, l);
    synchronize_rcu(); /* every decision that could see `old` has finished */
    if (e->rec) {
      /* and appended its record: `old` goes once the writer is past them,
       * which is usually within a few ms (else at a later reload, or close) */
      old->mark = recorder_mark(e->rec);
      old->next_retired = e->retired;
      e->retired = old;
      for (int ms = 0; ms < 100 && !recorder_past(e->rec, old->mark); ms++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
      }
      for (live **p = &e->retired; *p;) {
        live *r = *p;
        if (recorder_past(e->rec, r->mark)) {
          *p = r->next_retired;
          recorder_forget(e->rec); /* its names' addresses may be reused */
          live_free(r);
        } else {
          p = &r->next_retired;
        }
      }
    } else {
      live_free(old);
    }
  }
  pthread_mutex_unlock(&e->reload_lock);
  return rc;
}

const char *vd_engine_policy_version(vd_engine *e, char buf[65]) {
  buf[0] = '\0';
  if (!e) return buf;
  rcu_read_lock();
  const live *l = rcu_dereference(e->live);
  if (l) memcpy(buf, l->bundle->version, 65);
  rcu_read_unlock();
  buf[64] = '\0';
  return buf;
}

void vd_engine_close(vd_engine *e) { vd_engine_close_stats(e, NULL); }

void vd_engine_close_stats(vd_engine *e, vd_engine_counters *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!e) return;
  if (out) vd_engine_stats(e, out);
  if (e->beside) {
    /* the host's log and counters: wait until its writer is past this
     * engine's records (they name rules in its bundles), at most 5 s, then
     * let them go; the host closes both */
    uint64_t mark = e->rec ? recorder_mark(e->rec) : 0;
    for (int ms = 0; e->rec && ms < 5000 && !recorder_past(e->rec, mark); ms++) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    if (e->rec && !recorder_past(e->rec, mark)) {
      /* a writer stuck on a failing disk may still read them: the bundles
       * are kept (leaked) rather than freed under it */
      e->live = NULL;
      e->retired = NULL;
    }
    recorder_forget(e->rec);
  } else {
    recorder_close(e->rec, out); /* formats every record: nothing reads a bundle after */
    state_close(e->state);
  }
  live_free(e->live);
  while (e->retired) {
    live *r = e->retired;
    e->retired = r->next_retired;
    live_free(r);
  }
  pthread_mutex_destroy(&e->reload_lock);
  free(e->dir);
  free(e->store_dir);
  free(e->pin_dir);
  if (e->secret) explicit_bzero(e->secret, e->secret_len);
  free(e->secret);
  free(e->only_point);
  free(e);
}

int vd_engine_snapshot_repair(vd_engine *e, unsigned i, vd_snapshot_repair *out) {
  if (!e || !out || !e->rec) return -1;
  return recorder_repair(e->rec, i, out);
}

int vd_engine_stats(vd_engine *e, vd_engine_counters *out) {
  if (!e || !out) return VD_EINVAL;
  memset(out, 0, sizeof *out);
  if (e->rec && !e->beside) recorder_counters(e->rec, out);
  out->model_calls = atomic_load_explicit(&e->model_calls, memory_order_relaxed);
  out->model_deadline_misses =
      atomic_load_explicit(&e->model_deadline_misses, memory_order_relaxed);
  if (e->state && !e->beside) {
    state_stats st;
    state_get_stats(e->state, &st);
    out->limit_charges = st.charges;
    out->limit_refusals = st.refusals;
    out->state_keys = st.keys;
    out->state_bytes = st.bytes;
    out->state_evictions = st.evictions;
    out->state_expired = st.expired;
    out->state_remote_errors = st.remote_errors;
    out->state_fallbacks = st.remote_fallbacks;
    memcpy(out->state_last_error, st.last_error, sizeof out->state_last_error);
  }
  return 0;
}

/* The stages every decide call shares once the request is parsed. t1 (the
 * end of parsing) is read only for the trace: a clock read is not free. */
static int decide_stages(const policy_bundle *b, const name_table *names, const decide_limits *lim,
                         const decide_request *req, vd_decision *d, uint64_t t0, vd_error *err) {
  uint64_t t1 = d->trace_on ? clock_mono_ns() : t0;
  int rc = decide_run(b, names, req, lim, d, err);
  if (rc == 0) memcpy(d->bundle_version, b->version, sizeof d->bundle_version);
  uint64_t t2 = clock_mono_ns();
  if (d->trace_on) {
    d->ns_parse = t1 - t0;
    d->ns_decide = t2 - t1;
  }
  d->latency_ns = t2 - t0;
  d->latency_us = (double)(t2 - t0) / 1000.0;
  if (rc) d->decided = 0;
  return rc;
}

/* A rollout's off-path decision that the candidate refused, recorded as
 * its side of the pair all the same (docs/snapshots.md, "Shadow and
 * canary"): no action, source error, and the error itself ("error"), under
 * the version of the strategy that would have decided (none when no
 * strategy serves the point), so replay can refuse it again. Not an answer:
 * d stays undecided, and a record the log does not take is simply missing. */
static void record_side_refusal(vd_engine *e, const policy_bundle *b, const decide_request *req,
                                vd_decision *d, record_input *rin, const vd_error *err) {
  const strategy *s = policy_bundle_route(b, req->action.s, req->action.n, &req->candidates);
  d->action = NULL;
  d->allowed = 0;
  d->review = 0;
  d->source = "error";
  d->confidence = 0;
  d->rule = NULL;
  d->reason = NULL;
  d->strategy = s ? s->name : NULL;
  memset(d->policy_version, 0, sizeof d->policy_version);
  if (s) memcpy(d->policy_version, s->version, sizeof d->policy_version - 1);
  memcpy(d->bundle_version, b->version, sizeof d->bundle_version);
  rin->refusal = err;
  record_id(e->rec, d, rin);
  record_commit(e->rec, d, rin);
}

/* Against the live bundle, held for the length of the decision and, with
 * snapshots on, until its capture is in the log's queue: the capture points
 * at names in the bundle, and a reload keeps a replaced bundle until the
 * writer has formatted every record appended before it (vd_engine_reload).
 * The append may wait for room (on_full BLOCK, 1 s at most), delaying a reload meanwhile;
 * waiting for the disk (durability ALWAYS) comes after. */
static int decide_live(vd_engine *e, const decide_request *req, vd_decision *d, uint64_t t0,
                       record_input *rin, int always, vd_error *err) {
  rcu_read_lock();
  const live *l = rcu_dereference(e->live);
  int rc = decide_stages(l->bundle, l->names, &e->lim, req, d, t0, err);
  if (rc != 0 && rc != VD_ENOMEM && rin && rin->side && rin->side->off_path &&
      rin->side->completes)
    record_side_refusal(e, l->bundle, req, d, rin, err);
  if (rc == 0) {
    if (rin) record_id(e->rec, d, rin);
    /* The answer (with snapshots on it carries the id) is rendered here when
     * the render is timed: traced decisions, so every recorded one, whose
     * snapshot and trace report latency_ns.render. Otherwise nothing reads
     * it but vd_decision_render, which renders it on its first call: a
     * caller that reads only the fields (a binding) does not pay for it. */
    if (d->trace_on) decision_answer(d);
    const strategy *ms = rin && l->any_mask ? mask_strategy(l->bundle, d->strategy) : NULL;
    if (ms && mask_for_record(ms, req, d, e->secret, e->secret_len, rin) != 0)
      rc = engine_error(err, VD_ENOMEM, 0, 0, NULL, "out of memory masking the snapshot");
    if (rin && rc == 0) rc = record_commit(e->rec, d, rin);
  }
  if (d->trace_borrow) { /* names into the bundle: gone with it */
    d->ntrace = 0;
    d->nlets = 0;
    d->nfeatures = 0;
  }
  rcu_read_unlock();
  if (d->model_run == MODEL_SCORED || d->model_run == MODEL_DEADLINE) {
    atomic_fetch_add_explicit(&e->model_calls, 1, memory_order_relaxed);
    if (d->model_run == MODEL_DEADLINE)
      atomic_fetch_add_explicit(&e->model_deadline_misses, 1, memory_order_relaxed);
  }
  /* Only ALWAYS waits: the others spare the call. */
  if (rc == 0 && rin && always) rc = record_wait(e->rec, d, rin);
  if (rc == VD_ESNAPSHOT && rin) { /* decided, but not to be answered: its snapshot was refused */
    d->decided = 0;
    return record_refusal(e->rec, rin, err);
  }
  return rc;
}

static int check_args(vd_engine *e, const void *req, vd_decision *d, vd_error *err,
                      const char *fn) {
  engine_error_clear(err);
  if (!e || !req || !d)
    return engine_error(err, VD_EINVAL, 0, 0, NULL, "%s: %s is NULL", fn,
                        !e     ? "the engine"
                        : !req ? "the request"
                               : "the decision");
  decision_reset(d);
  d->mem.limit = e->lim.memory_limit;
  d->model_replay = -1;
  d->state = e->state;
  /* The one clock reading of this decision: request.time, the snapshot's time. */
  d->clock_ns = clock_wall_ns();
  d->clock_set = true;
  return 0;
}

int vd_decide_json(vd_engine *e, const char *json, long len, vd_decision *d, vd_error *err) {
  int rc = check_args(e, json, d, err, "vd_decide_json");
  if (rc) return rc;
  int trace = d->trace_on;
  if (e->rec && !trace) d->trace_on = d->trace_borrow = 1; /* the snapshot carries the trace */
  uint64_t t0 = clock_mono_ns();
  decide_request req;
  size_t n = len < 0 ? strlen(json) : (size_t)len;
  record_input in = {.req = &req, .json = json, .json_len = n, .lim = &e->lim};
  rc = request_parse_json(&d->mem, json, n, &e->lim, &req, err);
  if (rc == 0) rc = decide_live(e, &req, d, t0, e->rec ? &in : NULL, e->rec_always, err);
  d->trace_on = trace;
  d->trace_borrow = 0;
  return rc;
}

int service_decide_side(vd_engine *e, const char *json, size_t len, const service_side *side,
                        vd_decision *d, vd_error *err) {
  if (!side) return vd_decide_json(e, json, (long)len, d, err);
  int rc = check_args(e, json, d, err, "service_decide_side");
  if (rc) return rc;
  if (side->clock_ns) d->clock_ns = side->clock_ns;
  if (side->off_path) d->state = NULL;
  int trace = d->trace_on;
  if (e->rec && !trace) d->trace_on = d->trace_borrow = 1;
  uint64_t t0 = clock_mono_ns();
  decide_request req;
  record_input in = {.req = &req, .json = json, .json_len = len, .lim = &e->lim, .side = side};
  int always = e->rec_always;
  rc = request_parse_json(&d->mem, json, len, &e->lim, &req, err);
  if (rc == 0) {
    /* off the answer's path nothing waits for the disk: the answered
     * decision's record is the one durability speaks of */
    rc = decide_live(e, &req, d, t0, e->rec ? &in : NULL, side->off_path ? 0 : always, err);
  }
  d->trace_on = trace;
  d->trace_borrow = 0;
  return rc;
}

int service_engine_open_beside(const char *dir, vd_engine *host, vd_engine **out, vd_error *err) {
  engine_error_clear(err);
  if (!host || !out) return engine_error(err, VD_EINVAL, 0, 0, NULL, "no host engine");
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = host->store_dir;
  o.cost_limit = host->lim.cost_limit;
  o.regex_match_limit = host->lim.regex_match_limit;
  o.memory_limit = host->lim.memory_limit;
  o.max_request_bytes = host->lim.max_request_bytes;
  o.warnings_as_errors = host->warnings_as_errors;
  return engine_open(dir, &o, host, out, err);
}

int service_engine_set_dir(vd_engine *e, const char *dir) {
  char *d = strdup(dir);
  if (!d) return VD_ENOMEM;
  pthread_mutex_lock(&e->reload_lock);
  free(e->dir);
  e->dir = d;
  pthread_mutex_unlock(&e->reload_lock);
  return 0;
}

const char *service_engine_dir(const vd_engine *e) { return e ? e->dir : NULL; }

int vd_decide(vd_engine *e, const vd_request *r, vd_decision *d, vd_error *err) {
  int rc = check_args(e, r, d, err, "vd_decide");
  if (rc) return rc;
  int trace = d->trace_on;
  if (e->rec && !trace) d->trace_on = d->trace_borrow = 1;
  uint64_t t0 = clock_mono_ns();
  decide_request req;
  record_input in = {.req = &req, .creq = r, .lim = &e->lim};
  rc = request_from_c(&d->mem, r, &e->lim, &req, err);
  if (rc == 0) rc = decide_live(e, &req, d, t0, e->rec ? &in : NULL, e->rec_always, err);
  d->trace_on = trace;
  d->trace_borrow = 0;
  return rc;
}

int vd_decide_built(vd_engine *e, const vd_request *r, const vd_builder *context, vd_decision *d,
                    vd_error *err) {
  int rc = check_args(e, r, d, err, "vd_decide_built");
  if (rc) return rc;
  if (!context)
    return engine_error(err, VD_EINVAL, 0, 0, NULL, "vd_decide_built: the context builder is NULL");
  int trace = d->trace_on;
  if (e->rec && !trace) d->trace_on = d->trace_borrow = 1;
  uint64_t t0 = clock_mono_ns();
  decide_request req;
  value ctx;
  size_t ctx_bytes = 0;
  /* the snapshot writes the context from these values, as JSON */
  record_input in = {.req = &req, .creq = r, .cctx = &ctx, .lim = &e->lim};
  rc = builder_context(context, &ctx, &ctx_bytes, err);
  if (rc == 0) rc = request_from_built(&d->mem, r, &ctx, ctx_bytes, &e->lim, &req, err);
  if (rc == 0) {
    in.json_len = ctx_bytes; /* only a guess of the capture's size while json is NULL */
    rc = decide_live(e, &req, d, t0, e->rec ? &in : NULL, e->rec_always, err);
  }
  d->trace_on = trace;
  d->trace_borrow = 0;
  return rc;
}

int engine_decide_json_at(const policy_bundle *b, const name_table *names, const decide_limits *lim,
                          const char *json, size_t len, int64_t clock_ns, vd_decision *d,
                          vd_error *err) {
  return engine_decide_json_replay(b, names, lim, json, len, clock_ns, -1, d, err);
}

int engine_decide_json_replay(const policy_bundle *b, const name_table *names,
                              const decide_limits *lim, const char *json, size_t len,
                              int64_t clock_ns, int model_deadline, vd_decision *d, vd_error *err) {
  return engine_decide_json_inputs(b, names, lim, json, len, clock_ns, model_deadline, NULL, d,
                                   err);
}

int engine_decide_json_inputs(const policy_bundle *b, const name_table *names,
                              const decide_limits *lim, const char *json, size_t len,
                              int64_t clock_ns, int model_deadline, const value *counters,
                              vd_decision *d, vd_error *err) {
  engine_error_clear(err);
  if (!b || !lim || !json || !d)
    return engine_error(err, VD_EINVAL, 0, 0, NULL, "engine_decide_json_at: an argument is NULL");
  decision_reset(d);
  d->mem.limit = lim->memory_limit;
  d->clock_ns = clock_ns;
  d->clock_set = true;
  d->model_replay = (int8_t)(model_deadline < 0 ? -1 : model_deadline != 0);
  d->counters_in = counters; /* NULL: no store either, every counter reads empty */
  uint64_t t0 = clock_mono_ns();
  decide_request req;
  int rc = request_parse_json(&d->mem, json, len, lim, &req, err);
  if (rc) return rc;
  return decide_stages(b, names, lim, &req, d, t0, err);
}

/* For the server's GET /v1/policies: fn sees the live bundle while it is held. */
void engine_with_live_bundle(vd_engine *e, void (*fn)(void *ud, const policy_bundle *b), void *ud) {
  if (!e || !fn) return;
  rcu_read_lock();
  const live *l = rcu_dereference(e->live);
  if (l) fn(ud, l->bundle);
  rcu_read_unlock();
}
