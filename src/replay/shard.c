/* shard.c — a shard's decisions in its JSON report, and the merge of the
 * shards' reports (the contract is shard.h).
 *
 * The "shard" member:
 *   {"index": I, "count": N, "hash": "fnv1a64-id", "passed": P,
 *    "mode": ..., "policy_version": ..., "against": ..., "filters": ...,
 *    "weights": [a, l, c, d], "labels_loaded": n | null,
 *    "decisions": [{"seq", "id", "point", "key", "complete", "same",
 *                   "error", "error_message", "masked", "cpu_ns", "label",
 *                   "recorded": SIDE, "replayed": SIDE}, ...]}
 * SIDE holds every field of a replay_side; numbers are written in their
 * shortest exact form, so a merge reads back the very values scored. */
#define _GNU_SOURCE
#include "replay/shard.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "snapshot/snapshot.h"

typedef struct entry {
  replay_item it;
  const char *label;
} entry;

struct shard_log {
  arena mem;
  entry *e;
  size_t n, cap;
};

shard_log *shard_log_new(void) {
  shard_log *l = calloc(1, sizeof *l);
  if (l) arena_init(&l->mem, NULL, 0, 0);
  return l;
}

int shard_log_add(shard_log *l, const replay_item *it, const char *label) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 1024;
    entry *ne = realloc(l->e, cap * sizeof *ne);
    if (!ne) return -1;
    l->e = ne;
    l->cap = cap;
  }
  entry *e = &l->e[l->n];
  if (replay_item_keep(&l->mem, &e->it, it) < 0) return -1;
  e->it.request_json = ""; /* not part of the report */
  e->it.request_len = 0;
  e->label = label ? arena_strndup(&l->mem, label, strlen(label)) : NULL;
  if (label && !e->label) return -1;
  l->n++;
  return 0;
}

void shard_log_free(shard_log *l) {
  if (!l) return;
  arena_free(&l->mem);
  free(l->e);
  free(l);
}

/* ---- writing ---- */

static void key(json_buf *b, const char *k) {
  if (b->len && b->data[b->len - 1] != '{' && b->data[b->len - 1] != '[') json_buf_putc(b, ',');
  json_put_str(b, k);
  json_buf_putc(b, ':');
}

static void put_str(json_buf *b, const char *k, const char *v) {
  key(b, k);
  json_put_str(b, v);
}

static void put_i64(json_buf *b, const char *k, int64_t v) {
  key(b, k);
  json_put_i64(b, v);
}

static void put_num(json_buf *b, const char *k, double v) {
  key(b, k);
  json_write_double(b, v);
}

static void put_side(json_buf *b, const char *k, const replay_side *s) {
  key(b, k);
  json_buf_putc(b, '{');
  put_str(b, "action", s->action);
  put_i64(b, "allowed", s->allowed);
  put_i64(b, "review", s->review);
  put_str(b, "source", s->source);
  put_str(b, "rule", s->rule);
  put_num(b, "confidence", s->confidence);
  put_str(b, "policy_version", s->policy_version);
  put_num(b, "latency_us", s->latency_us);
  put_str(b, "reason", s->reason);
  put_str(b, "decision_id", s->decision_id);
  put_str(b, "model_version", s->model_version);
  put_i64(b, "timing", s->timing);
  put_num(b, "rtt_us", s->rtt_us);
  put_num(b, "cpu_us", s->cpu_us);
  put_num(b, "reference_cpu_us", s->reference_cpu_us);
  json_buf_putc(b, '}');
}

void shard_json(json_buf *b, const shard_run *run, const shard_log *l) {
  json_buf_putc(b, '{');
  put_i64(b, "index", run->index);
  put_i64(b, "count", run->count);
  put_str(b, "hash", "fnv1a64-id");
  put_i64(b, "passed", (int64_t)run->passed);
  put_str(b, "mode", run->mode);
  put_str(b, "policy_version", run->policy_version);
  put_str(b, "against", run->against);
  put_str(b, "filters", run->filters);
  key(b, "weights");
  json_buf_putc(b, '[');
  const double w[4] = {run->weights.accuracy, run->weights.latency, run->weights.cost,
                       run->weights.audit};
  for (int i = 0; i < 4; i++) {
    if (i) json_buf_putc(b, ',');
    json_write_double(b, w[i]);
  }
  json_buf_putc(b, ']');
  key(b, "labels_loaded");
  if (run->have_labels)
    json_put_u64(b, run->labels_loaded);
  else
    json_buf_put(b, "null", 4);
  key(b, "decisions");
  json_buf_putc(b, '[');
  for (size_t i = 0; l && i < l->n; i++) {
    const replay_item *it = &l->e[i].it;
    if (i) json_buf_putc(b, ',');
    json_buf_putc(b, '{');
    put_i64(b, "seq", (int64_t)it->seq);
    put_str(b, "id", it->id_text);
    put_str(b, "point", it->point);
    put_str(b, "key", it->key);
    put_i64(b, "complete", it->complete);
    put_i64(b, "same", it->same);
    put_i64(b, "error", it->error);
    put_str(b, "error_message", it->error ? it->error_message : NULL);
    put_str(b, "masked", it->masked);
    put_i64(b, "cpu_ns", (int64_t)it->cpu_ns);
    put_str(b, "label", l->e[i].label);
    put_side(b, "recorded", &it->recorded);
    if (!it->error) put_side(b, "replayed", &it->replayed);
    json_buf_putc(b, '}');
  }
  json_buf_put(b, "]}", 2);
}

/* ---- reading ---- */

typedef struct reader {
  arena *a; /* the merged data's */
  const char *file;
  char *err;
  size_t errlen;
} reader;

static int bad(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(reader *r, const char *fmt, ...) {
  char m[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  snprintf(r->err, r->errlen, "%s: %s", r->file, m);
  return -1;
}

static const value *get(const value *m, const char *k) {
  return m && m->kind == V_MAP ? value_map_get(m, k, strlen(k)) : NULL;
}

/* A string member copied (NULL for null or absent); *ok cleared when it is
 * something else. */
static const char *get_str(reader *r, const value *m, const char *k, int *ok) {
  const value *v = get(m, k);
  if (!v || v->kind == V_NULL) return NULL;
  if (v->kind != V_STRING) {
    *ok = 0;
    return NULL;
  }
  char *s = arena_strndup(r->a, v->s, v->n);
  if (!s) *ok = 0;
  return s;
}

static int num_of(const value *v, double *out) {
  if (!v) return 0;
  if (v->kind == V_INT) *out = (double)v->i;
  else if (v->kind == V_UINT) *out = (double)v->u;
  else if (v->kind == V_DOUBLE) *out = v->d;
  else return 0;
  return 1;
}

static double get_num(const value *m, const char *k, int *ok) {
  double d = 0;
  if (!num_of(get(m, k), &d)) *ok = 0;
  return d;
}

static int64_t get_int(const value *m, const char *k, int *ok) {
  const value *v = get(m, k);
  if (v && v->kind == V_INT) return v->i;
  if (v && v->kind == V_UINT && v->u <= INT64_MAX) return (int64_t)v->u;
  *ok = 0;
  return 0;
}

static int read_side(reader *r, const value *v, replay_side *s) {
  int ok = v && v->kind == V_MAP;
  memset(s, 0, sizeof *s);
  s->action = get_str(r, v, "action", &ok);
  s->allowed = (int)get_int(v, "allowed", &ok);
  s->review = (int)get_int(v, "review", &ok);
  s->source = get_str(r, v, "source", &ok);
  s->rule = get_str(r, v, "rule", &ok);
  s->confidence = get_num(v, "confidence", &ok);
  s->policy_version = get_str(r, v, "policy_version", &ok);
  s->latency_us = get_num(v, "latency_us", &ok);
  s->reason = get_str(r, v, "reason", &ok);
  s->decision_id = get_str(r, v, "decision_id", &ok);
  s->model_version = get_str(r, v, "model_version", &ok);
  s->timing = (int)get_int(v, "timing", &ok);
  s->rtt_us = get_num(v, "rtt_us", &ok);
  s->cpu_us = get_num(v, "cpu_us", &ok);
  s->reference_cpu_us = get_num(v, "reference_cpu_us", &ok);
  return ok ? 0 : -1;
}

static int same_str(const char *a, const char *b) {
  return a == b || (a && b && !strcmp(a, b));
}

/* One file's report: its run and decisions appended to m. */
typedef struct shard_file {
  const char *name;
  shard_run run;
  int index_seen;
} shard_file;

typedef struct seen_seq {
  uint64_t seq;
  size_t file;
} seen_seq;

static int by_seq(const void *a, const void *b) {
  uint64_t x = ((const seen_seq *)a)->seq, y = ((const seen_seq *)b)->seq;
  return x < y ? -1 : x > y;
}

/* The run of one report's "shard" member. */
static int read_run(reader *r, const value *doc, const value *sh, shard_run *run,
                    const char **mode_text) {
  int ok = sh && sh->kind == V_MAP;
  if (!ok) {
    const value *mode = get(doc, "mode");
    if (mode && mode->kind == V_STRING && mode->n == 10 && !memcmp(mode->s, "candidates", 10))
      return bad(r, "a report of several candidates: shards are replayed with one --policy");
    return bad(r, "not a shard's report (it has no \"shard\" member: replay with --shard I/N "
                  "--json to make one)");
  }
  memset(run, 0, sizeof *run);
  int64_t index = get_int(sh, "index", &ok), count = get_int(sh, "count", &ok);
  run->passed = (uint64_t)get_int(sh, "passed", &ok);
  const char *hash = get_str(r, sh, "hash", &ok);
  run->mode = *mode_text = get_str(r, sh, "mode", &ok);
  run->policy_version = get_str(r, sh, "policy_version", &ok);
  run->against = get_str(r, sh, "against", &ok);
  run->filters = get_str(r, sh, "filters", &ok);
  const value *w = get(sh, "weights");
  double wv[4] = {0};
  if (!w || w->kind != V_LIST || w->n != 4) ok = 0;
  for (uint32_t i = 0; ok && i < 4; i++)
    if (!num_of(&w->items[i], &wv[i])) ok = 0;
  run->weights = (score_weights){wv[0], wv[1], wv[2], wv[3]};
  const value *ll = get(sh, "labels_loaded");
  run->have_labels = ll && ll->kind != V_NULL;
  if (run->have_labels) run->labels_loaded = (uint64_t)get_int(sh, "labels_loaded", &ok);
  if (!ok || !hash || !run->mode) return bad(r, "$.shard is not a shard member this replay reads");
  if (strcmp(hash, "fnv1a64-id") != 0)
    return bad(r, "$.shard.hash is '%s'; this replay shards by fnv1a64-id", hash);
  if (count < 1 || count > 65536 || index < 0 || index >= count)
    return bad(r, "$.shard: index %lld of %lld shards is not a shard", (long long)index,
               (long long)count);
  run->index = (uint32_t)index;
  run->count = (uint32_t)count;
  return 0;
}

/* What differs between two shards' runs, or NULL. */
static const char *run_differs(const shard_run *a, const shard_run *b) {
  if (a->count != b->count) return "the number of shards";
  if (!same_str(a->mode, b->mode)) return "the mode";
  if (!same_str(a->policy_version, b->policy_version)) return "the candidate policy version";
  if (!same_str(a->against, b->against)) return "the service replayed against";
  if (!same_str(a->filters, b->filters)) return "the filters";
  if (memcmp(&a->weights, &b->weights, sizeof a->weights) != 0) return "the score's weights";
  if (a->have_labels != b->have_labels || a->labels_loaded != b->labels_loaded)
    return "the labels";
  if (a->passed != b->passed) return "the snapshots passing the filters (another log?)";
  return NULL;
}

static const char *or_none(const char *s) { return s ? s : "(none)"; }

int shard_merge(const char *const *files, size_t n, shard_merged *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  arena *a = calloc(1, sizeof *a);
  shard_file *sf = calloc(n ? n : 1, sizeof *sf);
  if (!a || !sf) {
    free(a);
    free(sf);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  arena_init(a, NULL, 0, 0);
  out->mem = a;
  size_t cap = 0;
  int rc = 0;
  reader r = {a, NULL, err, errlen};
  for (size_t f = 0; f < n && rc == 0; f++) {
    r.file = sf[f].name = files[f];
    size_t len;
    char *text = NULL;
    FILE *fp = fopen(files[f], "rb");
    if (fp) {
      size_t got = 0, tcap = 1 << 16;
      text = malloc(tcap);
      while (text) {
        got += fread(text + got, 1, tcap - got, fp);
        if (got < tcap) break;
        char *nt = realloc(text, tcap *= 2);
        if (!nt) free(text);
        text = nt;
      }
      int e = ferror(fp);
      fclose(fp);
      if (e) {
        free(text);
        text = NULL;
      }
      len = got;
    }
    if (!text) {
      rc = bad(&r, "cannot read it: %m");
      break;
    }
    arena scratch;
    arena_init(&scratch, NULL, 0, 0);
    value doc;
    json_error je;
    if (json_parse(&scratch, text, len, NULL, &doc, &je) != 0) {
      rc = bad(&r, "not JSON: line %d, column %d: %s", je.line, je.column, je.message);
    } else if (doc.kind != V_MAP) {
      rc = bad(&r, "not a replay report (not a JSON object)");
    }
    const char *mode = NULL;
    const value *sh = rc == 0 ? get(&doc, "shard") : NULL;
    if (rc == 0) rc = read_run(&r, &doc, sh, &sf[f].run, &mode);
    if (rc == 0 && f > 0) {
      const char *what = run_differs(&sf[0].run, &sf[f].run);
      if (what && !strcmp(what, "the candidate policy version"))
        rc = bad(&r, "another run's shard: %s (%.12s…) is not as in %s (%.12s…)", what,
                 or_none(sf[f].run.policy_version), files[0], or_none(sf[0].run.policy_version));
      else if (what && !strcmp(what, "the number of shards"))
        rc = bad(&r, "another run's shard: %s (%u) is not as in %s (%u)", what, sf[f].run.count,
                 files[0], sf[0].run.count);
      else if (what)
        rc = bad(&r, "another run's shard: %s is not as in %s", what, files[0]);
    }
    for (size_t g = 0; rc == 0 && g < f; g++)
      if (sf[g].run.index == sf[f].run.index)
        rc = bad(&r, "shard %u/%u again: %s is that shard too (the shards overlap)",
                 sf[f].run.index, sf[f].run.count, files[g]);
    if (rc == 0 && f == 0) {
      int ok = 1;
      const value *lab = get(&doc, "labels");
      out->snapshots = get_str(&r, &doc, "snapshots", &ok);
      out->policy = get_str(&r, &doc, "policy", &ok);
      out->labels_path = lab && lab->kind == V_MAP ? get_str(&r, lab, "file", &ok) : NULL;
      out->run = sf[0].run;
      out->mode = !strcmp(mode, "candidate")  ? SCORE_CANDIDATE
                  : !strcmp(mode, "against")  ? SCORE_AGAINST
                                              : SCORE_DETERMINISM;
    }
    if (rc == 0) {
      double wall = 0, rss = 0;
      int ok = 1;
      const value *wv = get(&doc, "wall_seconds");
      if (num_of(wv, &wall) && wall > out->wall_seconds) out->wall_seconds = wall;
      if (num_of(get(get(&doc, "memory"), "peak_rss_bytes"), &rss) &&
          (long)(rss / 1024) > out->peak_rss_kb)
        out->peak_rss_kb = (long)(rss / 1024);
      const value *ds = get(sh, "decisions");
      if (!ds || ds->kind != V_LIST) {
        rc = bad(&r, "$.shard.decisions is not a list");
        ok = 0;
      }
      for (uint32_t i = 0; ok && i < ds->n; i++) {
        const value *d = &ds->items[i];
        if (out->n == cap) {
          cap = cap ? cap * 2 : 4096;
          replay_item *ni = realloc(out->items, cap * sizeof *ni);
          const char **nl = ni ? realloc(out->labels, cap * sizeof *nl) : NULL;
          if (ni) out->items = ni;
          if (nl) out->labels = nl;
          if (!ni || !nl) {
            rc = bad(&r, "out of memory");
            break;
          }
        }
        replay_item *it = &out->items[out->n];
        memset(it, 0, sizeof *it);
        int dok = d->kind == V_MAP;
        it->seq = (uint64_t)get_int(d, "seq", &dok);
        it->id_text = get_str(&r, d, "id", &dok);
        it->point = get_str(&r, d, "point", &dok);
        it->key = get_str(&r, d, "key", &dok);
        it->complete = (int)get_int(d, "complete", &dok);
        it->same = (int)get_int(d, "same", &dok);
        it->error = (int)get_int(d, "error", &dok);
        it->error_message = get_str(&r, d, "error_message", &dok);
        it->masked = get_str(&r, d, "masked", &dok);
        it->cpu_ns = (uint64_t)get_int(d, "cpu_ns", &dok);
        out->labels[out->n] = get_str(&r, d, "label", &dok);
        uint8_t *id = arena_alloc(a, 16);
        if (!dok || !it->id_text || !id ||
            snapshot_id_parse(it->id_text, strlen(it->id_text), id) != 0 ||
            read_side(&r, get(d, "recorded"), &it->recorded) != 0 ||
            (!it->error && read_side(&r, get(d, "replayed"), &it->replayed) != 0)) {
          rc = bad(&r, "$.shard.decisions[%u] is not a decision this replay reads", i);
          break;
        }
        it->id = id;
        if (!it->point) it->point = "";
        if (!it->key) it->key = "";
        it->request_json = "";
        if (replay_shard_of(it->id_text, sf[f].run.count) != sf[f].run.index) {
          rc = bad(&r, "snapshot %s does not fall in shard %u/%u, which the report says it is",
                   it->id_text, sf[f].run.index, sf[f].run.count);
          break;
        }
        if (it->seq >= sf[f].run.passed) {
          rc = bad(&r, "$.shard.decisions[%u]: seq %llu is past the %llu snapshots of the run",
                   i, (unsigned long long)it->seq, (unsigned long long)sf[f].run.passed);
          break;
        }
        out->n++;
      }
    }
    arena_free(&scratch);
    free(text);
  }
  if (rc == 0 && n > 0 && n != sf[0].run.count) {
    /* name the first missing shard */
    uint32_t missing = 0;
    for (uint32_t k = 0; k < sf[0].run.count; k++) {
      size_t g = 0;
      while (g < n && sf[g].run.index != k) g++;
      if (g == n) {
        missing = k;
        break;
      }
    }
    snprintf(err, errlen, "shard %u/%u is missing: %zu of the %u shards given", missing,
             sf[0].run.count, n, sf[0].run.count);
    rc = -1;
  }
  if (rc == 0) {
    /* the log's order; a snapshot twice means overlapping shards */
    seen_seq *ss = malloc((out->n ? out->n : 1) * sizeof *ss);
    replay_item *sorted = malloc((out->n ? out->n : 1) * sizeof *sorted);
    const char **sl = malloc((out->n ? out->n : 1) * sizeof *sl);
    if (!ss || !sorted || !sl) {
      snprintf(err, errlen, "out of memory");
      rc = -1;
    } else {
      for (size_t i = 0; i < out->n; i++) ss[i] = (seen_seq){out->items[i].seq, i};
      qsort(ss, out->n, sizeof *ss, by_seq);
      for (size_t i = 0; i < out->n && rc == 0; i++) {
        if (i && ss[i].seq == ss[i - 1].seq) {
          snprintf(err, errlen, "snapshot %s is in two shard reports: the shards overlap",
                   out->items[ss[i].file].id_text);
          rc = -1;
        }
        sorted[i] = out->items[ss[i].file];
        sl[i] = out->labels[ss[i].file];
      }
    }
    if (rc == 0) {
      free(out->items);
      free(out->labels);
      out->items = sorted;
      out->labels = sl;
      sorted = NULL;
      sl = NULL;
    }
    free(ss);
    free(sorted);
    free(sl);
  }
  free(sf);
  if (rc != 0) shard_merged_free(out);
  return rc;
}

void shard_merged_free(shard_merged *m) {
  if (m->mem) arena_free(m->mem);
  free(m->mem);
  free(m->items);
  free(m->labels);
  memset(m, 0, sizeof *m);
}
