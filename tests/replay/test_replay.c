/* test_replay.c — replay re-decides recorded decisions exactly.
 *
 * The determinism test: for every example strategy (examples/policies), many
 * varied requests — each inline test's context, candidates and key, sent to
 * every decision point the strategy serves, with the candidates dropped or
 * widened, with each context field removed in turn (so error paths are
 * recorded too), through both the JSON and the C request API, plus every
 * sample request in examples/requests — are decided with snapshots on; then
 * replay_run under the recorded versions must reproduce all of them (not one
 * changed, not one error, as many replayed as recorded, every snapshot
 * complete), and the recorded side must be what the live call answered.
 *
 * Also: a rule reading request.time replays as it was decided even when the
 * replay runs after the instant that flips it; replay against a modified
 * bundle reports exactly the decisions the change touches; a version missing
 * from the store is an error per snapshot, not a silent pass; filters and
 * limits; the default store beside the snapshot folder; replay writes
 * nothing; payloads written by someone else (spaced out, tricky strings,
 * members missing, not JSON, a newer format) are read or refused, each
 * with its reason. */
#define _GNU_SOURCE
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/json.h"
#include "core/timefmt.h"
#include "engine/engine.h"
#include "policy/policy.h"
#include "replay/replay.h"
#include "snapshot/snapshot.h"
#include "test.h"
#include "verdict.h"

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void rm_rf(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static char *scratch(const char *tag) {
  char name[128], t[512];
  snprintf(name, sizeof name, "replay-%s", tag);
  return strdup(test_tmpdir(t, sizeof t, name));
}

static char *path_join(const char *a, const char *b) {
  char *p;
  if (asprintf(&p, "%s/%s", a, b) < 0) exit(2);
  return p;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    exit(2);
  }
  fputs(text, f);
  fclose(f);
}

static size_t count_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (de->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static vd_engine *open_engine(const char *bundle, const char *store, const char *snaps) {
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = store;
  o.snapshots_dir = snaps;
  o.snapshot_durability = VD_DURABILITY_NONE;
  vd_engine *e = NULL;
  vd_error err;
  int rc = vd_engine_open(bundle, &o, &e, &err);
  CHECK_MSG(rc == 0, "%s", err.message);
  return rc == 0 ? e : NULL;
}

/* What the live call answered, kept per snapshot id. */
typedef struct live_rec {
  char id[40];
  char *action, *source, *rule, *reason, *version;
  int allowed;
  double confidence;
  int hits; /* times replay reported it */
} live_rec;

typedef struct book {
  live_rec *v;
  size_t n, cap;
  size_t refused;
} book;

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static void book_add(book *b, const vd_decision *d) {
  if (b->n == b->cap) {
    b->cap = b->cap ? b->cap * 2 : 256;
    b->v = realloc(b->v, b->cap * sizeof *b->v);
  }
  live_rec *r = &b->v[b->n++];
  memset(r, 0, sizeof *r);
  snprintf(r->id, sizeof r->id, "%s", vd_decision_snapshot_id(d));
  r->action = dup_or_null(vd_decision_action(d));
  r->source = dup_or_null(vd_decision_source(d));
  r->rule = dup_or_null(vd_decision_rule(d));
  r->reason = dup_or_null(vd_decision_reason(d));
  r->version = dup_or_null(vd_decision_policy_version(d));
  r->allowed = vd_decision_allowed(d);
  r->confidence = vd_decision_confidence(d);
}

static void book_free(book *b) {
  for (size_t i = 0; i < b->n; i++) {
    free(b->v[i].action);
    free(b->v[i].source);
    free(b->v[i].rule);
    free(b->v[i].reason);
    free(b->v[i].version);
  }
  free(b->v);
  memset(b, 0, sizeof *b);
}

static int by_id(const void *a, const void *b) {
  return strcmp(((const live_rec *)a)->id, ((const live_rec *)b)->id);
}

static live_rec *book_find(book *b, const char *id) {
  live_rec key;
  snprintf(key.id, sizeof key.id, "%s", id);
  return bsearch(&key, b->v, b->n, sizeof *b->v, by_id);
}

static int str_eq(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* Decides one JSON request; books it when it was decided (and so recorded). */
static void decide_json(vd_engine *e, vd_decision *d, book *b, const char *json, size_t len) {
  vd_error err;
  if (vd_decide_json(e, json, (long)len, d, &err) != 0) {
    b->refused++;
    return;
  }
  CHECK(vd_decision_snapshot_id(d) != NULL);
  if (vd_decision_snapshot_id(d)) book_add(b, d);
}

/* A request from values: {"action", "candidates" (when cands), "context", "key"}. */
static void request_json(json_buf *jb, const char *point, const value *cands, const value *ctx,
                         const value *key) {
  jb->len = 0;
  json_buf_put(jb, "{\"action\":", 10);
  json_write_string(jb, point, strlen(point));
  if (cands) {
    json_buf_put(jb, ",\"candidates\":", 14);
    json_write(jb, cands, 0);
  }
  json_buf_put(jb, ",\"context\":", 11);
  json_write(jb, ctx, 0);
  if (key) {
    json_buf_put(jb, ",\"key\":", 7);
    json_write(jb, key, 0);
  }
  json_buf_putc(jb, '}');
}

/* Every request the example strategies' tests suggest, decided. */
static void decide_examples(vd_engine *e, vd_decision *d, book *b, const policy_bundle *pb,
                            size_t *per_strategy) {
  json_buf jb;
  json_buf_init(&jb, NULL);
  arena a;
  arena_init(&a, NULL, 0, 0);
  for (uint32_t k = 0; k < pb->nstrategies; k++) {
    const strategy *s = &pb->strategies[k];
    size_t before = b->n;
    /* all the strategy's actions, last first: a wider candidate list */
    value *acts = arena_alloc(&a, (s->nactions + 1) * sizeof *acts);
    for (uint32_t i = 0; i < s->nactions; i++)
      acts[i] =
          value_str(s->actions[s->nactions - 1 - i].name, s->actions[s->nactions - 1 - i].name_len);
    value all = value_list(acts, s->nactions);
    for (uint32_t p = 0; p < s->ndecision_points; p++) {
      const char *point = s->decision_points[p];
      for (uint32_t t = 0; t < s->ntests; t++) {
        const policy_test *pt = &s->tests[t];
        value ctx = pt->context.kind == V_MAP ? pt->context : value_map(NULL, 0);
        const value *cands =
            pt->candidates.kind == V_LIST && pt->candidates.n ? &pt->candidates : NULL;
        const value *key = pt->key.kind == V_STRING && pt->key.n ? &pt->key : NULL;
        char kbuf[32];
        snprintf(kbuf, sizeof kbuf, "key-%u-%u", t, p);
        value altkey = value_str(kbuf, (uint32_t)strlen(kbuf));
        /* as written; without candidates; with every action; another key */
        request_json(&jb, point, cands, &ctx, key);
        decide_json(e, d, b, jb.data, jb.len);
        request_json(&jb, point, NULL, &ctx, key);
        decide_json(e, d, b, jb.data, jb.len);
        request_json(&jb, point, &all, &ctx, key);
        decide_json(e, d, b, jb.data, jb.len);
        request_json(&jb, point, cands, &ctx, &altkey);
        decide_json(e, d, b, jb.data, jb.len);
        /* each context field removed in turn: other rules, and error decisions */
        for (uint32_t drop = 0; drop < ctx.n; drop++) {
          map_entry *ents = arena_alloc(&a, (ctx.n ? ctx.n : 1) * sizeof *ents);
          uint32_t m = 0;
          for (uint32_t i = 0; i < ctx.n; i++)
            if (i != drop) ents[m++] = ctx.entries[i];
          value less = value_map(ents, m);
          request_json(&jb, point, cands, &less, key);
          decide_json(e, d, b, jb.data, jb.len);
        }
        /* the same request through the C API */
        json_buf cj;
        json_buf_init(&cj, NULL);
        json_write(&cj, &ctx, 0);
        const char *cv[64];
        size_t nc = 0;
        for (uint32_t i = 0; cands && i < cands->n && nc < 64; i++)
          cv[nc++] = arena_strndup(&a, cands->items[i].s, cands->items[i].n);
        vd_request r = {.action = point,
                        .candidates = nc ? cv : NULL,
                        .ncandidates = nc,
                        .context_json = cj.data,
                        .context_len = (long)cj.len,
                        .key = key ? arena_strndup(&a, key->s, key->n) : NULL};
        vd_error err;
        if (vd_decide(e, &r, d, &err) == 0 && vd_decision_snapshot_id(d))
          book_add(b, d);
        else
          b->refused++;
        json_buf_free(&cj);
      }
    }
    per_strategy[k] = b->n - before;
  }
  json_buf_free(&jb);
  arena_free(&a);
}

static void decide_sample_requests(vd_engine *e, vd_decision *d, book *b, size_t *nfiles) {
  DIR *dir = opendir("examples/requests");
  CHECK(dir != NULL);
  if (!dir) return;
  struct dirent *de;
  while ((de = readdir(dir))) {
    size_t n = strlen(de->d_name);
    if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0) continue;
    char path[512];
    snprintf(path, sizeof path, "examples/requests/%s", de->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    char buf[65536];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    decide_json(e, d, b, buf, len);
    (*nfiles)++;
  }
  closedir(dir);
}

/* The callback of the determinism test: every item reproduced, in detail. */
typedef struct det_state {
  book *b;
  size_t items, mismatches, unknown, cpu_zero;
  size_t sources[4];
} det_state;

static int det_cb(void *user, const replay_item *it) {
  det_state *st = user;
  st->items++;
  live_rec *lr = book_find(st->b, it->id_text);
  if (!lr) {
    st->unknown++;
    return 0;
  }
  lr->hits++;
  const replay_side *rec = &it->recorded, *rep = &it->replayed;
  /* the snapshot says what the live call answered ... */
  int live_ok = str_eq(rec->action, lr->action) && str_eq(rec->source, lr->source) &&
                str_eq(rec->rule, lr->rule) && str_eq(rec->reason, lr->reason) &&
                str_eq(rec->policy_version, lr->version) && rec->allowed == lr->allowed &&
                rec->confidence == lr->confidence;
  /* ... and the replay answers the same, reason and version included */
  int replay_ok = it->error == 0 && it->same && it->complete && str_eq(rep->action, rec->action) &&
                  str_eq(rep->reason, rec->reason) &&
                  str_eq(rep->policy_version, rec->policy_version) && rep->review == rec->review &&
                  rep->latency_us > 0 && it->request_len > 0 && it->request_json[0] == '{';
  if (!live_ok || !replay_ok) {
    if (st->mismatches++ < 5)
      fprintf(stderr,
              "mismatch %s (%s): error %d %s\n  live     %s/%s/%s %s\n  recorded %s/%s/%s %s\n"
              "  replayed %s/%s/%s %s\n  request %s\n",
              it->id_text, it->point, it->error, it->error_message ? it->error_message : "",
              lr->action, lr->source, lr->rule, lr->reason, rec->action, rec->source, rec->rule,
              rec->reason, rep->action, rep->source, rep->rule, rep->reason, it->request_json);
  }
  if (it->cpu_ns == 0) st->cpu_zero++;
  int src = rec->source ? snapshot_source_parse(rec->source, strlen(rec->source)) : -1;
  if (src >= 0) st->sources[src]++;
  return 0;
}

static void test_determinism_every_example(void) {
  char *store = scratch("store"), *snaps = scratch("snaps");
  vd_engine *e = open_engine("examples/policies", store, snaps);
  if (!e) return;
  policy_bundle *pb = NULL;
  policy_diags dg;
  memset(&dg, 0, sizeof dg);
  policy_load_opts lo = {.store_dir = ""};
  CHECK(policy_bundle_load("examples/policies", &lo, &pb, &dg) == 0);
  policy_diags_free(&dg);
  if (!pb) return;
  CHECK(pb->nstrategies == 6);

  vd_decision *d = vd_decision_new();
  book b;
  memset(&b, 0, sizeof b);
  size_t per_strategy[16] = {0}, nfiles = 0;
  decide_examples(e, d, &b, pb, per_strategy);
  decide_sample_requests(e, d, &b, &nfiles);
  CHECK(nfiles >= 10);
  for (uint32_t k = 0; k < pb->nstrategies && k < 16; k++)
    CHECK_MSG(per_strategy[k] >= 100, "%s: only %zu decisions", pb->strategies[k].name,
              per_strategy[k]);
  vd_engine_counters c;
  vd_engine_stats(e, &c);
  CHECK(c.snapshots_appended == b.n && c.snapshots_failed == 0 && c.snapshots_dropped == 0);
  vd_engine_close(e); /* every snapshot on disk */
  qsort(b.v, b.n, sizeof *b.v, by_id);
  fprintf(stderr, "determinism: %zu decisions recorded (%zu refused requests not recorded)\n", b.n,
          b.refused);

  size_t versions_before = count_files(store);
  replay_opts ro;
  memset(&ro, 0, sizeof ro);
  ro.snapshots_dir = snaps;
  ro.store_dir = store;
  replay_stats rs;
  det_state st;
  memset(&st, 0, sizeof st);
  st.b = &b;
  char err[1024];
  CHECK_MSG(replay_run(&ro, det_cb, &st, &rs, err, sizeof err) == 0, "%s", err);
  fprintf(stderr, "replay: seen %llu replayed %llu reproduced %llu changed %llu errors %llu\n",
          (unsigned long long)rs.seen, (unsigned long long)rs.replayed,
          (unsigned long long)rs.reproduced, (unsigned long long)rs.changed,
          (unsigned long long)rs.errors);
  CHECK(rs.seen == b.n);
  CHECK(rs.replayed == b.n);
  CHECK(rs.reproduced == b.n);
  CHECK(rs.changed == 0);
  CHECK(rs.errors == 0);
  CHECK(rs.incomplete == 0);
  CHECK(st.items == b.n && st.unknown == 0 && st.mismatches == 0);
  int once = 1;
  for (size_t i = 0; i < b.n; i++) once &= b.v[i].hits == 1;
  CHECK(once);
  /* the variety is real: rule, default and error decisions all replayed */
  fprintf(stderr, "sources: rule %zu default %zu error %zu\n", st.sources[0], st.sources[2],
          st.sources[3]);
  CHECK(st.sources[SNAPSHOT_SRC_RULE] > 100 && st.sources[SNAPSHOT_SRC_DEFAULT] > 10 &&
        st.sources[SNAPSHOT_SRC_ERROR] > 10);
  CHECK(st.cpu_zero < b.n / 10);
  /* replay wrote nothing: no snapshots, no versions */
  CHECK(count_files(store) == versions_before);
  snapshot_reader *r;
  char er[SNAPSHOT_ERRLEN];
  size_t n = 0;
  snapshot_rec rec;
  CHECK(snapshot_reader_open(snaps, NULL, &r, er, sizeof er) == 0);
  while (snapshot_reader_next(r, &rec) == 1) n++;
  snapshot_reader_close(r);
  CHECK(n == b.n);

  book_free(&b);
  vd_decision_free(d);
  policy_bundle_free(pb);
  rm_rf(store);
  rm_rf(snaps);
  free(store);
  free(snaps);
}

/* ---- the clock ---- */
typedef struct count_state {
  size_t items, same, errors;
  size_t by_action_block, by_action_allow;
  char first_error[512];
} count_state;

static int count_cb(void *user, const replay_item *it) {
  count_state *c = user;
  c->items++;
  if (it->error) {
    if (!c->errors++) snprintf(c->first_error, sizeof c->first_error, "%s", it->error_message);
    return 0;
  }
  c->same += it->same;
  if (it->replayed.action && !strcmp(it->replayed.action, "block")) c->by_action_block++;
  if (it->replayed.action && !strcmp(it->replayed.action, "allow")) c->by_action_allow++;
  return 0;
}

static void test_clock_replays_later(void) {
  char *root = scratch("clock");
  char *bundle = path_join(root, "bundle");
  mkdir(bundle, 0755);
  /* the rule flips 1.5 s from now */
  int64_t flip = clock_wall_ns() + 1500000000LL;
  char ts[64];
  timefmt_format_rfc3339(flip / 1000000000, (int32_t)(flip % 1000000000), ts);
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "strategy: clock\n"
           "rules:\n"
           "  - name: after-flip\n"
           "    if: request.time > timestamp(\"%s\")\n"
           "    action: block\n"
           "default: allow\n",
           ts);
  char *file = path_join(bundle, "clock.yaml");
  write_file(file, yaml);
  /* the defaults of verdict decide: <bundle>/.verdict/{versions,snapshots} */
  char *snaps = path_join(bundle, ".verdict/snapshots");
  vd_engine *e = open_engine(bundle, NULL, snaps);
  if (!e) return;
  vd_decision *d = vd_decision_new();
  vd_error err;
  int before_ok = 1;
  for (int i = 0; i < 5; i++) {
    CHECK(vd_decide_json(e, "{\"action\":\"clock\"}", -1, d, &err) == 0);
    before_ok &= vd_decision_action(d) && !strcmp(vd_decision_action(d), "allow");
  }
  CHECK(before_ok);
  while (clock_wall_ns() <= flip + 1000000) usleep(20000);
  /* live, after the flip: the rule reads the clock */
  CHECK(vd_decide_json(e, "{\"action\":\"clock\"}", -1, d, &err) == 0);
  CHECK_STR(vd_decision_action(d), "block");
  vd_engine_close(e);

  /* replayed after the flip, with no store named: found beside the snapshots */
  replay_opts ro;
  memset(&ro, 0, sizeof ro);
  ro.snapshots_dir = snaps;
  replay_stats rs;
  count_state cs;
  memset(&cs, 0, sizeof cs);
  char msg[1024];
  CHECK_MSG(replay_run(&ro, count_cb, &cs, &rs, msg, sizeof msg) == 0, "%s", msg);
  CHECK_MSG(rs.replayed == 6 && rs.reproduced == 6 && rs.changed == 0 && rs.errors == 0,
            "replayed %llu reproduced %llu errors %llu: %s", (unsigned long long)rs.replayed,
            (unsigned long long)rs.reproduced, (unsigned long long)rs.errors, cs.first_error);
  CHECK(cs.by_action_allow == 5 && cs.by_action_block == 1);
  /* the same with a trailing slash on the folder */
  char *slashed = path_join(snaps, "");
  ro.snapshots_dir = slashed;
  memset(&cs, 0, sizeof cs);
  CHECK(replay_run(&ro, count_cb, &cs, &rs, msg, sizeof msg) == 0 && rs.reproduced == 6);
  free(slashed);

  vd_decision_free(d);
  rm_rf(root);
  free(file);
  free(snaps);
  free(bundle);
  free(root);
}

/* ---- a candidate bundle ---- */
static const char *const MOD_A =
    "strategy: mod\n"
    "rules:\n"
    "  - name: big\n"
    "    if: amount > 1000\n"
    "    action: review\n"
    "  - name: banned\n"
    "    if: country in [\"XX\", \"YY\"]\n"
    "    action: block\n"
    "default: allow\n";

/* the same strategy with one rule's answer changed */
static const char *const MOD_B =
    "strategy: mod\n"
    "rules:\n"
    "  - name: big\n"
    "    if: amount > 1000\n"
    "    action: block\n"
    "  - name: banned\n"
    "    if: country in [\"XX\", \"YY\"]\n"
    "    action: block\n"
    "default: allow\n";

typedef struct diff_state {
  size_t items, changed, changed_right, same_right;
  char recorded_version[65], replayed_version[65];
} diff_state;

static int diff_cb(void *user, const replay_item *it) {
  diff_state *s = user;
  s->items++;
  if (it->error) return 0;
  const replay_side *a = &it->recorded, *b = &it->replayed;
  int via_big = a->rule && !strcmp(a->rule, "big");
  if (!it->same) {
    s->changed++;
    /* exactly the decisions of the changed rule: review -> block */
    s->changed_right += via_big && !strcmp(a->action, "review") && !strcmp(b->action, "block") &&
                        !b->allowed && !strcmp(b->rule, "big");
  } else {
    s->same_right += !via_big;
  }
  snprintf(s->recorded_version, sizeof s->recorded_version, "%s", a->policy_version);
  snprintf(s->replayed_version, sizeof s->replayed_version, "%s", b->policy_version);
  return 0;
}

static int stop_after_3(void *u, const replay_item *it) {
  (void)it;
  size_t *n = u;
  return ++*n >= 3;
}

static void test_candidate_bundle_reports_changes(void) {
  char *root = scratch("diff");
  char *ba = path_join(root, "a"), *bb = path_join(root, "b"), *store = path_join(root, "store"),
       *snaps = path_join(root, "snaps");
  mkdir(ba, 0755);
  mkdir(bb, 0755);
  char *fa = path_join(ba, "mod.yaml"), *fb = path_join(bb, "mod.yaml");
  write_file(fa, MOD_A);
  write_file(fb, MOD_B);
  vd_engine *e = open_engine(ba, store, snaps);
  if (!e) return;
  vd_decision *d = vd_decision_new();
  vd_error err;
  size_t big = 0, total = 0, defaults = 0;
  for (int i = 0; i < 60; i++) {
    char req[160];
    int amount = (i * 137) % 2000;
    const char *country = i % 7 == 0 ? "XX" : "DE";
    snprintf(req, sizeof req, "{\"action\":\"mod\",\"context\":{\"amount\":%d,\"country\":\"%s\"}}",
             amount, country);
    CHECK(vd_decide_json(e, req, -1, d, &err) == 0);
    total++;
    if (vd_decision_rule(d) && !strcmp(vd_decision_rule(d), "big")) big++;
    if (!strcmp(vd_decision_source(d), "default")) defaults++;
  }
  CHECK(big > 10 && big < total && defaults > 10);
  vd_engine_close(e);

  replay_opts ro;
  memset(&ro, 0, sizeof ro);
  ro.snapshots_dir = snaps;
  ro.policy_dir = bb;
  replay_stats rs;
  diff_state ds;
  memset(&ds, 0, sizeof ds);
  char msg[1024];
  CHECK_MSG(replay_run(&ro, diff_cb, &ds, &rs, msg, sizeof msg) == 0, "%s", msg);
  CHECK(rs.replayed == total && rs.errors == 0);
  CHECK_MSG(rs.changed == big && ds.changed == big && ds.changed_right == big,
            "changed %llu, want %zu", (unsigned long long)rs.changed, big);
  CHECK(rs.reproduced == total - big && ds.same_right == total - big);
  CHECK(strlen(ds.recorded_version) == 64 && strlen(ds.replayed_version) == 64 &&
        strcmp(ds.recorded_version, ds.replayed_version) != 0);
  /* the candidate bundle was not written into a store */
  char *bstore = path_join(bb, ".verdict");
  struct stat sb;
  CHECK(stat(bstore, &sb) != 0);
  free(bstore);

  /* the recorded versions reproduce everything */
  ro.policy_dir = NULL;
  ro.store_dir = store;
  CHECK(replay_run(&ro, NULL, NULL, &rs, msg, sizeof msg) == 0);
  CHECK(rs.reproduced == total && rs.changed == 0 && rs.errors == 0);

  /* filters and limits */
  ro.action = "block";
  CHECK(replay_run(&ro, NULL, NULL, &rs, msg, sizeof msg) == 0);
  CHECK(rs.seen > 0 && rs.seen < total && rs.reproduced == rs.seen);
  ro.action = NULL;
  ro.source = "default";
  CHECK(replay_run(&ro, NULL, NULL, &rs, msg, sizeof msg) == 0);
  CHECK_MSG(rs.seen == defaults && rs.reproduced == defaults, "seen %llu, want %zu",
            (unsigned long long)rs.seen, defaults);
  ro.source = "nonsense";
  CHECK(replay_run(&ro, NULL, NULL, &rs, msg, sizeof msg) == -1 && strstr(msg, "nonsense"));
  ro.source = NULL;
  ro.limit = 7;
  CHECK(replay_run(&ro, NULL, NULL, &rs, msg, sizeof msg) == 0 && rs.seen == 7);
  ro.limit = 0;
  ro.point = "elsewhere";
  CHECK(replay_run(&ro, NULL, NULL, &rs, msg, sizeof msg) == 0 && rs.seen == 0);
  ro.point = NULL;

  /* the callback stops the walk */
  ro.limit = 0;
  size_t calls = 0;
  CHECK(replay_run(&ro, stop_after_3, &calls, &rs, msg, sizeof msg) == 0 && calls == 3);

  /* a version missing from the store and from the folder's own versions:
   * an error for each snapshot, saying why */
  char own[600];
  snprintf(own, sizeof own, "%s/versions", snaps);
  rm_rf(store);
  rm_rf(own);
  count_state cs;
  memset(&cs, 0, sizeof cs);
  CHECK(replay_run(&ro, count_cb, &cs, &rs, msg, sizeof msg) == 0);
  CHECK(rs.errors == total && rs.replayed == 0 && rs.reproduced == 0 && cs.errors == total);
  CHECK_MSG(strstr(cs.first_error, "nor in the version store") != NULL, "%s", cs.first_error);

  /* a store file that does not hash to its name is refused */
  mkdir(store, 0755);
  vd_engine *e2 = open_engine(ba, store, NULL);
  vd_engine_close(e2);
  DIR *dir = opendir(store);
  struct dirent *de;
  char victim[512] = "";
  while (dir && (de = readdir(dir)))
    if (strstr(de->d_name, ".json")) snprintf(victim, sizeof victim, "%s/%s", store, de->d_name);
  if (dir) closedir(dir);
  CHECK(victim[0] != '\0');
  if (victim[0])
    write_file(victim,
               "{\"strategy\":\"mod\",\"rules\":[{\"if\":\"true\",\"action\":\"block\"}],"
               "\"default\":\"allow\"}");
  memset(&cs, 0, sizeof cs);
  CHECK(replay_run(&ro, count_cb, &cs, &rs, msg, sizeof msg) == 0);
  CHECK(rs.errors == total && rs.replayed == 0);
  CHECK_MSG(strstr(cs.first_error, "not as the version its name says") != NULL, "%s",
            cs.first_error);

  /* the walk itself failing */
  ro.snapshots_dir = "/nonexistent/verdict/snaps";
  CHECK(replay_run(&ro, NULL, NULL, &rs, msg, sizeof msg) == -1 && msg[0]);
  ro.snapshots_dir = snaps;
  ro.policy_dir = "/nonexistent/verdict/bundle";
  CHECK(replay_run(&ro, NULL, NULL, &rs, msg, sizeof msg) == -1 && strstr(msg, "bundle"));

  vd_decision_free(d);
  rm_rf(root);
  free(fa);
  free(fb);
  free(ba);
  free(bb);
  free(store);
  free(snaps);
  free(root);
}

/* ---- payloads not written by this engine ---- */

/* text with the first `from` replaced by `to` (malloc'd) */
static char *replace1(const char *text, const char *from, const char *to) {
  const char *at = strstr(text, from);
  if (!at) return strdup(text);
  size_t a = (size_t)(at - text), fl = strlen(from), tl = strlen(to), n = strlen(text);
  char *o = malloc(n - fl + tl + 1);
  memcpy(o, text, a);
  memcpy(o + a, to, tl);
  memcpy(o + a + tl, at + fl, n - a - fl + 1);
  return o;
}

typedef struct odd_state {
  int n;
  int error[10], complete[10], same[10];
  char msg[10][256];
} odd_state;

static int odd_cb(void *user, const replay_item *it) {
  odd_state *s = user;
  if (s->n < 10) {
    s->error[s->n] = it->error;
    s->complete[s->n] = it->complete;
    s->same[s->n] = it->same;
    snprintf(s->msg[s->n], sizeof s->msg[0], "%s", it->error_message ? it->error_message : "");
  }
  s->n++;
  return 0;
}

static void test_odd_payloads(void) {
  char *root = scratch("odd");
  char *bundle = path_join(root, "b"), *store = path_join(root, "store"),
       *snaps = path_join(root, "snaps"), *odd = path_join(root, "odd");
  mkdir(bundle, 0755);
  char *file = path_join(bundle, "mod.yaml");
  write_file(file, MOD_A);
  vd_engine *e = open_engine(bundle, store, snaps);
  if (!e) return;
  vd_decision *d = vd_decision_new();
  vd_error err;
  CHECK(vd_decide_json(e, "{\"action\":\"mod\",\"context\":{\"amount\":5000,\"country\":\"DE\"}}",
                       -1, d, &err) == 0);
  char pv[65];
  snprintf(pv, sizeof pv, "%s", vd_decision_policy_version(d));
  vd_engine_close(e);
  /* the genuine payload */
  snapshot_reader *r;
  char er[SNAPSHOT_ERRLEN];
  snapshot_rec rec;
  char *genuine = NULL;
  CHECK(snapshot_reader_open(snaps, NULL, &r, er, sizeof er) == 0);
  if (snapshot_reader_next(r, &rec) == 1) genuine = strndup(rec.payload, rec.payload_len);
  snapshot_reader_close(r);
  CHECK(genuine != NULL);
  if (!genuine) return;

  char *variants[9];
  /* 0: spaced out, with a member whose string holds quotes, brackets, backslashes */
  char *t = replace1(genuine, "{\"format\":1,",
                     "{ \"note\" : \"a \\\"quoted\\\" {brace} [x] \\\\\" ,\n  \"format\" : 1 ,\n ");
  variants[0] = replace1(t, ",\"inputs\":", " ,\n\t\"inputs\" :  ");
  free(t);
  /* 1: a required member missing: replayable, not complete */
  variants[1] = replace1(genuine, "\"features\":null,", "");
  /* 2: not JSON; 3: no request; 4: a newer format; 5: no clock reading */
  variants[2] = strdup("not json at all");
  variants[3] = replace1(genuine, "\"request\":", "\"requets\":");
  variants[4] = replace1(genuine, "{\"format\":1,", "{\"format\":2,");
  t = replace1(genuine, "\"clock_ns\":", "\"clock\":");
  variants[5] = replace1(t, "\"time_ns\":", "\"time_nanos\":");
  free(t);
  /* 6: the genuine one */
  variants[6] = strdup(genuine);
  /* 7: the small members spelled another way (escapes in the strings, the
   * numbers with a fraction or an exponent): read through the full parser,
   * the same decision */
  t = replace1(genuine, "\"source\":\"rule\"", "\"source\":\"\\u0072ule\"");
  char *t2 = replace1(t, "\"source\":\"model\"", "\"source\":\"\\u006dodel\"");
  free(t);
  t = replace1(t2, "\"source\":\"default\"", "\"source\":\"\\u0064efault\"");
  free(t2);
  t2 = t;
  t = replace1(t2, "\"cost\":1000000,", "\"cost\":1.0e6,");
  free(t2);
  variants[7] = replace1(t, "\"allowed\":", "\"allowed\" : ");
  free(t);
  /* 8: a member before the trace, longer than the 64 bytes a block holds,
   * with escaped quotes and backslashes and brackets inside its strings */
  variants[8] = replace1(
      genuine, ",\"trace\":",
      ",\"extra\":{\"s\":\"a \\\"q\\\" ] } [ { \\\\\",\"l\":[1,[2,{\"x\":\"\\\\\\\"]}\"}]],"
      "\"t\":\"0123456789012345678901234567890123456789012345678901234567890123\\\\\"},\"trace\":");

  snapshot_log *log;
  snapshot_log_opts lo;
  snapshot_log_opts_init(&lo);
  CHECK(snapshot_log_open(odd, &lo, &log, er, sizeof er) == 0);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  for (int i = 0; i < 9; i++) {
    snapshot_rec w;
    memset(&w, 0, sizeof w);
    snapshot_id_new(&g, w.id);
    w.point = "mod";
    w.point_len = 3;
    w.action = "review";
    w.action_len = 6;
    w.policy_version = pv;
    w.policy_version_len = strlen(pv);
    w.payload = variants[i];
    w.payload_len = strlen(variants[i]);
    CHECK(snapshot_log_append(log, &w, NULL) == 0);
  }
  CHECK(snapshot_log_close(log, NULL) == 0);

  replay_opts ro;
  memset(&ro, 0, sizeof ro);
  ro.snapshots_dir = odd;
  ro.store_dir = store;
  replay_stats rs;
  odd_state os;
  memset(&os, 0, sizeof os);
  char msg[1024];
  CHECK_MSG(replay_run(&ro, odd_cb, &os, &rs, msg, sizeof msg) == 0, "%s", msg);
  CHECK(os.n == 9 && rs.seen == 9);
  CHECK_MSG(os.error[0] == 0 && os.same[0] && os.complete[0], "%s", os.msg[0]);
  CHECK_MSG(os.error[1] == 0 && os.same[1] && !os.complete[1], "%s", os.msg[1]);
  CHECK(os.error[2] == VD_EJSON && strstr(os.msg[2], "not a JSON object"));
  CHECK(os.error[3] == VD_EJSON && strstr(os.msg[3], "no request"));
  CHECK(os.error[4] == VD_EINVAL && strstr(os.msg[4], "format"));
  CHECK(os.error[5] == VD_EINVAL && strstr(os.msg[5], "clock"));
  CHECK(os.error[6] == 0 && os.same[6] && os.complete[6]);
  CHECK(strstr(variants[7], "\\u00") && strstr(variants[7], "1.0e6"));
  CHECK_MSG(os.error[7] == 0 && os.same[7] && os.complete[7], "%s", os.msg[7]);
  CHECK_MSG(os.error[8] == 0 && os.same[8] && os.complete[8], "%s", os.msg[8]);
  CHECK(rs.replayed == 5 && rs.reproduced == 5 && rs.errors == 4);
  /* incomplete: missing features, not JSON, no request, no clock (the newer format
   * has every member this replay knows) */
  CHECK(!os.complete[2] && !os.complete[3] && os.complete[4] && !os.complete[5]);
  CHECK_MSG(rs.incomplete == 4, "%llu", (unsigned long long)rs.incomplete);

  for (int i = 0; i < 9; i++) free(variants[i]);
  free(genuine);
  vd_decision_free(d);
  rm_rf(root);
  free(file);
  free(bundle);
  free(store);
  free(snaps);
  free(odd);
  free(root);
}

int main(void) {
  TEST_RUN(test_determinism_every_example);
  TEST_RUN(test_clock_replays_later);
  TEST_RUN(test_candidate_bundle_reports_changes);
  TEST_RUN(test_odd_payloads);
  TEST_END();
}
