/* score.c — the replay scorer: counts, tallies, histograms, labels and the
 * score out of 100 (score.h has the contract, docs/replay.md the formula).
 *
 * Everything here is O(1) per item in fixed or slowly growing memory, so a
 * log of any size can be scored in one pass: tallies are small hash tables
 * keyed by the pair of strings (there are only as many rows as distinct
 * transitions), and percentiles come from log-linear histograms instead of
 * keeping every value. Nothing is read from disk but the labels file. */
#include "replay/score.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/arena.h"
#include "core/json.h"

/* ---- histogram ---- */

/* Values below 2 * SUB have a bucket each; above, each power of two is cut
 * into SUB buckets, so a bucket is at most 1/SUB of its lower bound wide. */
static int hist_index(uint64_t v) {
  if (v < 2 * SCORE_HIST_SUB) return (int)v;
  int msb = 63 - __builtin_clzll(v); /* >= 7 */
  int shift = msb - 6;
  uint64_t top = v >> shift; /* [64, 127] */
  return 2 * SCORE_HIST_SUB + (shift - 1) * SCORE_HIST_SUB + (int)(top - SCORE_HIST_SUB);
}

static uint64_t hist_lower(int i) {
  if (i < 2 * SCORE_HIST_SUB) return (uint64_t)i;
  int k = i - 2 * SCORE_HIST_SUB;
  int shift = k / SCORE_HIST_SUB + 1;
  uint64_t top = (uint64_t)(k % SCORE_HIST_SUB + SCORE_HIST_SUB);
  return top << shift;
}

static uint64_t hist_width(int i) {
  if (i < 2 * SCORE_HIST_SUB) return 1;
  return (uint64_t)1 << ((i - 2 * SCORE_HIST_SUB) / SCORE_HIST_SUB + 1);
}

void score_hist_init(score_hist *h) {
  memset(h, 0, sizeof *h);
  h->min = UINT64_MAX;
}

void score_hist_add(score_hist *h, uint64_t ns) {
  h->count++;
  h->sum += (double)ns;
  if (ns < h->min) h->min = ns;
  if (ns > h->max) h->max = ns;
  h->buckets[hist_index(ns)]++;
}

uint64_t score_hist_percentile(const score_hist *h, double p) {
  if (h->count == 0) return 0;
  if (!(p > 0)) return h->min;
  if (p >= 1) return h->max;
  uint64_t rank = (uint64_t)ceil(p * (double)h->count);
  if (rank < 1) rank = 1;
  uint64_t cum = 0;
  for (int i = 0; i < SCORE_HIST_BUCKETS; i++) {
    cum += h->buckets[i];
    if (cum >= rank) {
      uint64_t w = hist_width(i);
      uint64_t v = hist_lower(i) + (w > 1 ? w / 2 : 0);
      if (v < h->min) v = h->min;
      if (v > h->max) v = h->max;
      return v;
    }
  }
  return h->max;
}

uint64_t score_hist_count_range(const score_hist *h, uint64_t lo, uint64_t hi) {
  if (h->count == 0 || lo >= hi) return 0;
  uint64_t n = 0;
  for (int i = hist_index(lo); i < SCORE_HIST_BUCKETS; i++) {
    uint64_t b = hist_lower(i);
    if (b >= hi) break;
    if (b >= lo) n += h->buckets[i];
  }
  return n;
}

static void hist_dist(const score_hist *h, double scale, score_dist *d) {
  memset(d, 0, sizeof *d);
  d->count = h->count;
  if (!h->count) return;
  d->mean = h->sum / (double)h->count / scale;
  d->p50 = (double)score_hist_percentile(h, 0.50) / scale;
  d->p90 = (double)score_hist_percentile(h, 0.90) / scale;
  d->p99 = (double)score_hist_percentile(h, 0.99) / scale;
  d->max = (double)h->max / scale;
}

/* ---- weights ---- */

void score_weights_default(score_weights *w) {
  w->accuracy = 40;
  w->latency = 20;
  w->cost = 20;
  w->audit = 20;
}

int score_weights_parse(const char *s, score_weights *w, char *err, size_t errlen) {
  double v[4];
  const char *p = s;
  for (int i = 0; i < 4; i++) {
    char *end;
    errno = 0;
    v[i] = strtod(p, &end);
    if (end == p || errno || !(v[i] >= 0) || v[i] > 1e6) {
      snprintf(err, errlen,
               "--weights %s: weight %d is not a number >= 0 (want four, as in 40,20,20,20: "
               "accuracy, latency, cost, audit)",
               s, i + 1);
      return -1;
    }
    p = end;
    if (i < 3) {
      if (*p != ',') {
        snprintf(err, errlen,
                 "--weights %s: want four numbers separated by commas (accuracy, latency, "
                 "cost, audit), e.g. 40,20,20,20",
                 s);
        return -1;
      }
      p++;
    }
  }
  if (*p) {
    snprintf(err, errlen, "--weights %s: unexpected text after the fourth weight: '%s'", s, p);
    return -1;
  }
  if (v[0] + v[1] + v[2] + v[3] <= 0) {
    snprintf(err, errlen, "--weights %s: at least one weight must be above 0", s);
    return -1;
  }
  w->accuracy = v[0];
  w->latency = v[1];
  w->cost = v[2];
  w->audit = v[3];
  return 0;
}

/* ---- string hashing, shared by labels and tallies ---- */

static uint64_t hash_bytes(uint64_t h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

#define HASH_SEED 0xcbf29ce484222325ULL

/* ---- labels ---- */

typedef struct label_entry {
  char *name;   /* "i:<id>" or "k:<key>", NUL-terminated; NULL: empty slot */
  char *action; /* points into the same allocation */
  long line;
} label_entry;

struct score_labels {
  label_entry *slots;
  size_t cap; /* power of two */
  size_t count;
};

static label_entry *labels_slot(const score_labels *l, const char *name, size_t n) {
  uint64_t h = hash_bytes(HASH_SEED, name, n);
  size_t mask = l->cap - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    label_entry *e = &l->slots[i];
    if (!e->name || (strlen(e->name) == n && memcmp(e->name, name, n) == 0)) return e;
  }
}

static int labels_grow(score_labels *l) {
  size_t ncap = l->cap ? l->cap * 2 : 1024;
  label_entry *old = l->slots;
  size_t ocap = l->cap;
  l->slots = calloc(ncap, sizeof *l->slots);
  if (!l->slots) {
    l->slots = old;
    return -1;
  }
  l->cap = ncap;
  for (size_t i = 0; i < ocap; i++)
    if (old[i].name) *labels_slot(l, old[i].name, strlen(old[i].name)) = old[i];
  free(old);
  return 0;
}

/* Adds "<prefix>:<name>" -> action. 0, 1 (already there with the same
 * action), -1 out of memory, -2 conflicting (*prev_line set). */
static int labels_put(score_labels *l, char prefix, const char *name, size_t n, const char *action,
                      size_t an, long line, long *prev_line) {
  if ((l->count + 1) * 2 > l->cap && labels_grow(l) < 0) return -1;
  char *buf = malloc(n + an + 4);
  if (!buf) return -1;
  buf[0] = prefix;
  buf[1] = ':';
  memcpy(buf + 2, name, n);
  buf[n + 2] = '\0';
  memcpy(buf + n + 3, action, an);
  buf[n + 3 + an] = '\0';
  label_entry *e = labels_slot(l, buf, n + 2);
  if (e->name) {
    int same = strlen(e->action) == an && memcmp(e->action, action, an) == 0;
    *prev_line = e->line;
    free(buf);
    return same ? 1 : -2;
  }
  e->name = buf;
  e->action = buf + n + 3;
  e->line = line;
  l->count++;
  return 0;
}

void score_labels_free(score_labels *l) {
  if (!l) return;
  for (size_t i = 0; i < l->cap; i++) free(l->slots[i].name);
  free(l->slots);
  free(l);
}

size_t score_labels_count(const score_labels *l) { return l ? l->count : 0; }

static const char *labels_get(const score_labels *l, char prefix, const char *name) {
  size_t n = strlen(name);
  char small[256];
  char *buf = n + 3 <= sizeof small ? small : malloc(n + 3);
  if (!buf) return NULL;
  buf[0] = prefix;
  buf[1] = ':';
  memcpy(buf + 2, name, n + 1);
  const label_entry *e = labels_slot(l, buf, n + 2);
  if (buf != small) free(buf);
  return e->name ? e->action : NULL;
}

const char *score_labels_find(const score_labels *l, const char *id_text, const char *key) {
  if (!l || !l->count) return NULL;
  const char *a = NULL;
  if (id_text && *id_text) a = labels_get(l, 'i', id_text);
  if (!a && key && *key) a = labels_get(l, 'k', key);
  return a;
}

/* One labels line. 0, or -1 with err set. */
static int labels_line(score_labels *l, const char *name, const char *s, size_t n, long line,
                       char *err, size_t errlen) {
  arena a;
  char abuf[2048];
  arena_init(&a, abuf, sizeof abuf, 0);
  value v;
  json_error je;
  int rc = -1;
  if (json_parse(&a, s, n, NULL, &v, &je) < 0) {
    snprintf(err, errlen, "%s:%ld: not JSON: %s (column %d)", name, line, je.message, je.column);
    goto out;
  }
  if (v.kind != V_MAP) {
    snprintf(err, errlen, "%s:%ld: want an object {\"id\" or \"key\": ..., \"action\": ...}", name,
             line);
    goto out;
  }
  const value *id = value_map_get(&v, "id", 2), *key = value_map_get(&v, "key", 3),
              *act = value_map_get(&v, "action", 6);
  if (!act || act->kind != V_STRING || act->n == 0) {
    snprintf(err, errlen, "%s:%ld: \"action\" must be a non-empty string", name, line);
    goto out;
  }
  if ((id && id->kind != V_STRING) || (key && key->kind != V_STRING)) {
    snprintf(err, errlen, "%s:%ld: \"id\" and \"key\" must be strings", name, line);
    goto out;
  }
  if ((!id || id->n == 0) && (!key || key->n == 0)) {
    snprintf(err, errlen, "%s:%ld: give \"id\" (a snapshot id) or \"key\" (a request key)", name,
             line);
    goto out;
  }
  for (size_t i = 0; i < v.n; i++) {
    const value *k = &v.entries[i].key;
    if (!(k->n == 2 && memcmp(k->s, "id", 2) == 0) && !(k->n == 3 && memcmp(k->s, "key", 3) == 0) &&
        !(k->n == 6 && memcmp(k->s, "action", 6) == 0) &&
        !(k->n == 4 && memcmp(k->s, "note", 4) == 0)) {
      snprintf(err, errlen, "%s:%ld: unknown field \"%.*s\" (want id, key, action, note)", name,
               line, (int)k->n, k->s);
      goto out;
    }
  }
  const value *names[2] = {id, key};
  const char prefixes[2] = {'i', 'k'};
  for (int i = 0; i < 2; i++) {
    if (!names[i] || names[i]->n == 0) continue;
    long prev = 0;
    int r = labels_put(l, prefixes[i], names[i]->s, names[i]->n, act->s, act->n, line, &prev);
    if (r == -1) {
      snprintf(err, errlen, "%s:%ld: out of memory", name, line);
      goto out;
    }
    if (r == -2) {
      snprintf(err, errlen, "%s:%ld: %s \"%.*s\" already has another label on line %ld", name, line,
               i == 0 ? "id" : "key", (int)names[i]->n, names[i]->s, prev);
      goto out;
    }
  }
  rc = 0;
out:
  arena_free(&a);
  return rc;
}

int score_labels_parse(const char *name, const char *text, size_t len, score_labels **out,
                       char *err, size_t errlen) {
  score_labels *l = calloc(1, sizeof *l);
  if (!l || labels_grow(l) < 0) {
    free(l);
    snprintf(err, errlen, "%s: out of memory", name);
    return -1;
  }
  size_t i = 0;
  long line = 0;
  while (i < len) {
    size_t j = i;
    while (j < len && text[j] != '\n') j++;
    line++;
    size_t a = i, b = j;
    while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r')) a++;
    while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\r')) b--;
    if (b > a && labels_line(l, name, text + a, b - a, line, err, errlen) < 0) {
      score_labels_free(l);
      return -1;
    }
    i = j + 1;
  }
  *out = l;
  return 0;
}

int score_labels_load(const char *path, score_labels **out, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    if (n == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  int rerr = ferror(f);
  fclose(f);
  if (!buf || rerr) {
    snprintf(err, errlen, "%s: %s", path, buf ? "read error" : "out of memory");
    free(buf);
    return -1;
  }
  int rc = score_labels_parse(path, buf, n, out, err, errlen);
  free(buf);
  return rc;
}

/* ---- tallies: (from, to) -> count + examples ---- */

typedef struct tally {
  score_row *rows;
  size_t nrows, cap;
  uint32_t *index; /* row + 1, 0 = empty; icap slots */
  size_t icap;
  score_row *sorted; /* made by score_finish */
} tally;

static void tally_free(tally *t) {
  for (size_t i = 0; i < t->nrows; i++) free((char *)t->rows[i].from);
  free(t->rows);
  free(t->index);
  free(t->sorted);
  memset(t, 0, sizeof *t);
}

static uint64_t pair_hash(const char *a, const char *b) {
  uint64_t h = hash_bytes(HASH_SEED, a, strlen(a));
  h = hash_bytes(h ^ 0xff, b, strlen(b));
  return h ^ (h >> 29);
}

static int tally_reindex(tally *t, size_t ncap) {
  uint32_t *ni = calloc(ncap, sizeof *ni);
  if (!ni) return -1;
  for (size_t r = 0; r < t->nrows; r++) {
    size_t i = (size_t)pair_hash(t->rows[r].from, t->rows[r].to) & (ncap - 1);
    while (ni[i]) i = (i + 1) & (ncap - 1);
    ni[i] = (uint32_t)(r + 1);
  }
  free(t->index);
  t->index = ni;
  t->icap = ncap;
  return 0;
}

static int tally_add(tally *t, const char *from, const char *to, const char *example) {
  if ((t->nrows + 1) * 2 > t->icap && tally_reindex(t, t->icap ? t->icap * 2 : 64) < 0) return -1;
  size_t i = (size_t)pair_hash(from, to) & (t->icap - 1);
  score_row *row = NULL;
  for (; t->index[i]; i = (i + 1) & (t->icap - 1)) {
    score_row *r = &t->rows[t->index[i] - 1];
    if (strcmp(r->from, from) == 0 && strcmp(r->to, to) == 0) {
      row = r;
      break;
    }
  }
  if (!row) {
    if (t->nrows == t->cap) {
      size_t ncap = t->cap ? t->cap * 2 : 16;
      score_row *nr = realloc(t->rows, ncap * sizeof *nr);
      if (!nr) return -1;
      t->rows = nr;
      t->cap = ncap;
    }
    size_t fn = strlen(from), tn = strlen(to);
    char *s = malloc(fn + tn + 2);
    if (!s) return -1;
    memcpy(s, from, fn + 1);
    memcpy(s + fn + 1, to, tn + 1);
    row = &t->rows[t->nrows];
    memset(row, 0, sizeof *row);
    row->from = s;
    row->to = s + fn + 1;
    t->index[i] = (uint32_t)(++t->nrows);
  }
  row->count++;
  if (example && *example && row->nexamples < SCORE_EXAMPLES) {
    snprintf(row->examples[row->nexamples], SCORE_ID_TEXT, "%s", example);
    row->nexamples++;
  }
  return 0;
}

static int row_order(const void *a, const void *b) {
  const score_row *x = a, *y = b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  int c = strcmp(x->from, y->from);
  return c ? c : strcmp(x->to, y->to);
}

static const score_row *tally_sorted(tally *t) {
  free(t->sorted);
  t->sorted = NULL;
  if (!t->nrows) return NULL;
  t->sorted = malloc(t->nrows * sizeof *t->sorted);
  if (!t->sorted) return t->rows; /* unsorted, still correct */
  memcpy(t->sorted, t->rows, t->nrows * sizeof *t->sorted);
  qsort(t->sorted, t->nrows, sizeof *t->sorted, row_order);
  return t->sorted;
}

/* ---- the accumulator ---- */

struct score_acc {
  score_mode mode;
  score_weights w;
  const score_labels *labels;
  uint64_t seen, replayed, reproduced, changed, errors, complete, masked;
  uint64_t changed_action, changed_allowed, changed_rule, changed_other;
  uint64_t labelled, rec_correct, rep_correct;
  tally transitions, rules, errkinds, conf_rec, conf_rep;
  score_hist lat, rec_lat, cpu;
  score_sides *sides; /* recorded (0) and replayed (1), for the score */
};

const char *score_mode_name(score_mode m) {
  switch (m) {
    case SCORE_DETERMINISM:
      return "determinism";
    case SCORE_CANDIDATE:
      return "candidate";
    case SCORE_AGAINST:
      return "against";
  }
  return "?";
}

score_acc *score_new(score_mode mode, const score_weights *weights, const score_labels *labels) {
  score_acc *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->mode = mode;
  if (weights)
    s->w = *weights;
  else
    score_weights_default(&s->w);
  s->labels = labels;
  static const char *const names[3][2] = {{"the recording", "the replay"},
                                          {"the recording", "the candidate"},
                                          {"the recording", "the service"}};
  s->sides = score_sides_new(2, names[mode], &s->w, mode == SCORE_DETERMINISM);
  if (!s->sides) {
    free(s);
    return NULL;
  }
  score_hist_init(&s->lat);
  score_hist_init(&s->rec_lat);
  score_hist_init(&s->cpu);
  return s;
}

void score_free(score_acc *s) {
  if (!s) return;
  score_sides_free(s->sides);
  tally_free(&s->transitions);
  tally_free(&s->rules);
  tally_free(&s->errkinds);
  tally_free(&s->conf_rec);
  tally_free(&s->conf_rep);
  free(s);
}

static int str_eq(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return strcmp(a, b) == 0;
}

/* How a side's action reads in tables: NULL (an error decision with no
 * action) shows as "(none)". */
static const char *action_text(const replay_side *d) { return d->action ? d->action : "(none)"; }

/* The rule that decided, or "(source)" when none did: "(default)", "(error)". */
static const char *rule_text(const replay_side *d, char *buf, size_t n) {
  if (d->rule && *d->rule) return d->rule;
  snprintf(buf, n, "(%s)", d->source && *d->source ? d->source : "no rule");
  return buf;
}

static uint64_t us_to_ns(double us) {
  if (!(us >= 0)) return 0;
  if (us > 1e12) return (uint64_t)1e15;
  return (uint64_t)llround(us * 1000.0);
}

int score_add(score_acc *s, const replay_item *it) {
  int rc = 0;
  s->seen++;
  if (it->complete) s->complete++;
  const char *id = it->id_text ? it->id_text : "";
  if (it->recorded.latency_us > 0) score_hist_add(&s->rec_lat, us_to_ns(it->recorded.latency_us));

  if (it->error) {
    s->errors++;
    const char *msg = it->error_message && *it->error_message ? it->error_message : "error";
    if (tally_add(&s->errkinds, it->point ? it->point : "", msg, id) < 0) rc = -1;
  } else {
    s->replayed++;
    score_hist_add(&s->lat, us_to_ns(it->replayed.latency_us));
    if (it->cpu_ns) score_hist_add(&s->cpu, it->cpu_ns);
    if (it->masked) { /* read a field the snapshot holds masked: not re-proven */
      s->masked++;
    } else if (it->same) {
      s->reproduced++;
    } else {
      s->changed++;
      const replay_side *a = &it->recorded, *b = &it->replayed;
      int act = !str_eq(a->action, b->action);
      char r1[64], r2[64];
      const char *ra = rule_text(a, r1, sizeof r1), *rb = rule_text(b, r2, sizeof r2);
      int rule = strcmp(ra, rb) != 0;
      if (act) {
        s->changed_action++;
        if (tally_add(&s->transitions, action_text(a), action_text(b), id) < 0) rc = -1;
      }
      if (b->allowed >= 0 && !a->allowed != !b->allowed) s->changed_allowed++;
      if (rule) {
        s->changed_rule++;
        if (tally_add(&s->rules, ra, rb, id) < 0) rc = -1;
      }
      if (!act && !rule) s->changed_other++;
    }
  }

  const char *label = s->labels ? score_labels_find(s->labels, it->id_text, it->key) : NULL;
  const replay_side *answers[2] = {&it->recorded, it->error ? NULL : &it->replayed};
  const int same[2] = {1, !it->error && it->same};
  if (score_sides_add(s->sides, it->point, answers, same, label) < 0) rc = -1;
  {
    if (label) {
      s->labelled++;
      const char *ra = action_text(&it->recorded);
      const char *rb = it->error ? "(error)" : action_text(&it->replayed);
      if (strcmp(label, ra) == 0) s->rec_correct++;
      if (!it->error && strcmp(label, rb) == 0) s->rep_correct++;
      if (tally_add(&s->conf_rec, label, ra, id) < 0) rc = -1;
      if (tally_add(&s->conf_rep, label, rb, id) < 0) rc = -1;
    }
  }
  return rc;
}

/* ---- the score ---- */

/* 1 at or below `good`, 0 at or above `bad`, linear in log(x) between. */
static double log_scale(double x, double good, double bad) {
  if (!(x > good)) return 1.0;
  if (x >= bad) return 0.0;
  return 1.0 - log(x / good) / log(bad / good);
}

double score_latency_value(double p99_us) { return log_scale(p99_us, 50.0, 10000.0); }
double score_cost_value(double cpu_us) { return log_scale(cpu_us, 10.0, 1000.0); }

static double share(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : 0.0; }

static void set_cat(score_category *c, const char *name, double weight) {
  memset(c, 0, sizeof *c);
  c->name = name;
  c->weight = weight;
}

/* Fills the points of the scored categories and returns the score. */
static double total(score_category *cat) {
  double wsum = 0, acc = 0;
  for (int i = 0; i < SCORE_NCAT; i++)
    if (cat[i].scored) wsum += cat[i].weight;
  for (int i = 0; i < SCORE_NCAT; i++) {
    cat[i].points = cat[i].scored && wsum > 0 ? 100.0 * cat[i].weight * cat[i].value / wsum : 0;
    acc += cat[i].points;
  }
  return acc;
}

/* ---- sides ---- */

typedef struct side_raw {
  uint64_t decisions, errors, agreed, labelled, correct, timed, round_trips;
  uint64_t audit_id, audit_reason, audit_version;
  uint64_t referenced;           /* timed answers with a reference timing beside them */
  score_hist lat, rtt, cpu, ref; /* cpu and ref: of those answers (CPU time) */
} side_raw;

typedef struct point_raw {
  char *name;
  side_raw *sides; /* nsides */
} point_raw;

struct score_sides {
  int nsides;
  int agreement_accuracy;
  score_weights w;
  char names[SCORE_MAX_SIDES][48];
  side_raw all[SCORE_MAX_SIDES];
  point_raw *points;
  size_t npoints, cap;
  size_t last; /* the point fed last, a hint: traffic repeats points */
  score_point_result *pres;
  score_side_result *pside;
};

score_sides *score_sides_new(int nsides, const char *const *names, const score_weights *w,
                             int agreement_accuracy) {
  if (nsides < 2 || nsides > SCORE_MAX_SIDES) return NULL;
  score_sides *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->nsides = nsides;
  s->agreement_accuracy = agreement_accuracy;
  if (w)
    s->w = *w;
  else
    score_weights_default(&s->w);
  for (int i = 0; i < nsides; i++) {
    snprintf(s->names[i], sizeof s->names[i], "%s", names && names[i] ? names[i] : "side");
    score_hist_init(&s->all[i].lat);
    score_hist_init(&s->all[i].rtt);
    score_hist_init(&s->all[i].ref);
    score_hist_init(&s->all[i].cpu);
  }
  return s;
}

void score_sides_free(score_sides *s) {
  if (!s) return;
  for (size_t i = 0; i < s->npoints; i++) {
    free(s->points[i].name);
    free(s->points[i].sides);
  }
  free(s->points);
  free(s->pres);
  free(s->pside);
  free(s);
}

static point_raw *point_get(score_sides *s, const char *name) {
  if (s->last < s->npoints && strcmp(s->points[s->last].name, name) == 0)
    return &s->points[s->last];
  for (size_t i = 0; i < s->npoints; i++)
    if (strcmp(s->points[i].name, name) == 0) return &s->points[s->last = i];
  if (s->npoints == s->cap) {
    size_t ncap = s->cap ? s->cap * 2 : 8;
    point_raw *np = realloc(s->points, ncap * sizeof *np);
    if (!np) return NULL;
    s->points = np;
    s->cap = ncap;
  }
  point_raw *p = &s->points[s->npoints];
  p->name = strdup(name);
  p->sides = calloc((size_t)s->nsides, sizeof *p->sides);
  if (!p->name || !p->sides) {
    free(p->name);
    free(p->sides);
    return NULL;
  }
  for (int i = 0; i < s->nsides; i++) {
    score_hist_init(&p->sides[i].lat);
    score_hist_init(&p->sides[i].rtt);
    score_hist_init(&p->sides[i].ref);
    score_hist_init(&p->sides[i].cpu);
  }
  s->last = s->npoints;
  return &s->points[s->npoints++];
}

static int has_text(const char *s) { return s && *s; }

static void side_feed(side_raw *r, const replay_side *a, int same, const char *label) {
  r->decisions++;
  if (label) r->labelled++;
  if (!a) {
    r->errors++;
    return;
  }
  if (same) r->agreed++;
  if (label && a->action && strcmp(a->action, label) == 0) r->correct++;
  if (a->timing == REPLAY_TIMING_INPROCESS) {
    r->timed++;
    score_hist_add(&r->lat, us_to_ns(a->latency_us));
    if (a->reference_cpu_us > 0 && a->cpu_us > 0) {
      r->referenced++;
      score_hist_add(&r->ref, us_to_ns(a->reference_cpu_us));
      score_hist_add(&r->cpu, us_to_ns(a->cpu_us));
    }
  } else if (a->timing == REPLAY_TIMING_ROUNDTRIP) {
    r->round_trips++;
  }
  if (a->rtt_us > 0) score_hist_add(&r->rtt, us_to_ns(a->rtt_us));
  if (has_text(a->decision_id)) r->audit_id++;
  if (has_text(a->rule) || has_text(a->reason)) r->audit_reason++;
  if (has_text(a->policy_version) &&
      (!a->source || strcmp(a->source, "model") != 0 || has_text(a->model_version)))
    r->audit_version++;
}

int score_sides_add(score_sides *s, const char *point, const replay_side *const *answers,
                    const int *same, const char *label) {
  point_raw *p = point_get(s, point ? point : "");
  for (int i = 0; i < s->nsides; i++) {
    int sm = same ? same[i] : 0;
    side_feed(&s->all[i], answers[i], sm, label);
    if (p) side_feed(&p->sides[i], answers[i], sm, label);
  }
  return p ? 0 : -1;
}

/* Whether a and b are within SCORE_TIE_FACTOR of each other (two zeros are). */
static int tied(double a, double b) {
  double lo = a < b ? a : b, hi = a < b ? b : a;
  return hi <= lo * SCORE_TIE_FACTOR;
}

/* A timing category (latency: p99, cost: mean) for every side at once. */
static void timing_category(const score_sides *s, const side_raw *const *raw,
                            score_side_result *out, int k) {
  int n = s->nsides;
  const char *what = k == SCORE_CAT_LATENCY ? "p99" : "mean";
  /* like for like: every answer of every side timed in process */
  int like = 1;
  const char *why = NULL;
  char whybuf[160];
  for (int i = 0; i < n && like; i++) {
    uint64_t answered = raw[i]->decisions - raw[i]->errors;
    if (raw[i]->round_trips) {
      like = 0;
      snprintf(whybuf, sizeof whybuf,
               "not scored: %s is timed only as an HTTP round trip, not in process: not like "
               "for like",
               s->names[i]);
      why = whybuf;
    } else if (raw[i]->timed < answered) {
      like = 0;
      snprintf(whybuf, sizeof whybuf, "not scored: %s has no in-process latency for %llu answers",
               s->names[i], (unsigned long long)(answered - raw[i]->timed));
      why = whybuf;
    } else if (!answered) {
      like = 0;
      snprintf(whybuf, sizeof whybuf, "not scored: %s gave no answer", s->names[i]);
      why = whybuf;
    }
  }
  double m[SCORE_MAX_SIDES], now[SCORE_MAX_SIDES], ref[SCORE_MAX_SIDES];
  int scaled[SCORE_MAX_SIDES];
  for (int i = 0; i < n; i++) {
    const score_dist *d = &out[i].latency_us, *e = &out[i].reference_cpu_us, *u = &out[i].cpu_us;
    m[i] = k == SCORE_CAT_LATENCY ? d->p99 : d->mean;
    /* Timed beside the reference's own version on every request: on the
     * reference's scale, by the ratio of the two CPU times taken together
     * (a recording and a replay run at other times, under other loads;
     * the ratio does not depend on the load). The ratio is taken at p90
     * for latency and at the median for cost, not at p99 or the mean: the
     * few slowest CPU times of a few hundred decisions move by several
     * times with a busy machine's cache and hyperthread contention. */
    now[i] = k == SCORE_CAT_LATENCY ? u->p90 : u->p50;
    ref[i] = k == SCORE_CAT_LATENCY ? e->p90 : e->p50;
    scaled[i] = i > 0 && raw[i]->timed && raw[i]->referenced == raw[i]->timed && ref[i] > 0;
    if (scaled[i]) m[i] = m[0] * now[i] / ref[i];
  }
  for (int i = 0; i < n; i++) {
    score_category *c = &out[i].cat[k];
    if (!like) {
      c->measure = m[i];
      snprintf(c->basis, sizeof c->basis, "%s", why);
      continue;
    }
    c->scored = 1;
    c->measure = m[i];
    double (*f)(double) = k == SCORE_CAT_LATENCY ? score_latency_value : score_cost_value;
    char how[128] = "";
    if (scaled[i])
      snprintf(how, sizeof how, " (CPU %s %.1f us beside %.1f us for the recorded version: x%.2f)",
               k == SCORE_CAT_LATENCY ? "p90" : "p50", now[i], ref[i], now[i] / ref[i]);
    if (i > 0 && tied(m[i], m[0])) {
      c->value = f(m[0]);
      snprintf(c->basis, sizeof c->basis,
               "%s %.1f us in process%s, within %gx of %s's %.1f us: a tie, scored as %s", what,
               m[i], how, SCORE_TIE_FACTOR, s->names[0], m[0], s->names[0]);
    } else if (scaled[i]) {
      c->value = f(m[i]);
      snprintf(c->basis, sizeof c->basis, "%s %.1f us in process on %s's scale%s", what, m[i],
               s->names[0], how);
    } else {
      c->value = f(m[i]);
      if (k == SCORE_CAT_LATENCY)
        snprintf(c->basis, sizeof c->basis,
                 "p99 %.1f us in process (1.0 at <= 50 us, 0 at >= 10 ms, log scale)", m[i]);
      else
        snprintf(c->basis, sizeof c->basis,
                 "mean %.2f us in process per decision (1.0 at <= 10 us, 0 at >= 1 ms, log "
                 "scale)",
                 m[i]);
    }
  }
}

/* Every category of every side from the raw counts. */
static void compare(const score_sides *s, const side_raw *const *raw, score_side_result *out) {
  int n = s->nsides;
  for (int i = 0; i < n; i++) {
    score_side_result *o = &out[i];
    const side_raw *r = raw[i];
    memset(o, 0, sizeof *o);
    o->name = s->names[i];
    o->decisions = r->decisions;
    o->errors = r->errors;
    o->agreed = r->agreed;
    o->labelled = r->labelled;
    o->correct = r->correct;
    o->accuracy = share(r->correct, r->labelled);
    o->timed = r->timed;
    o->round_trips = r->round_trips;
    hist_dist(&r->lat, 1000.0, &o->latency_us);
    hist_dist(&r->rtt, 1000.0, &o->rtt_us);
    hist_dist(&r->ref, 1000.0, &o->reference_cpu_us);
    hist_dist(&r->cpu, 1000.0, &o->cpu_us);
    o->referenced = r->referenced;
    o->audit_id = r->audit_id;
    o->audit_reason = r->audit_reason;
    o->audit_version = r->audit_version;
    o->audit_share = share(r->audit_id + r->audit_reason + r->audit_version, 3 * r->decisions);
    set_cat(&o->cat[SCORE_CAT_ACCURACY], "accuracy", s->w.accuracy);
    set_cat(&o->cat[SCORE_CAT_LATENCY], "latency", s->w.latency);
    set_cat(&o->cat[SCORE_CAT_COST], "cost", s->w.cost);
    set_cat(&o->cat[SCORE_CAT_AUDIT], "audit", s->w.audit);

    score_category *a = &o->cat[SCORE_CAT_ACCURACY];
    if (r->labelled) {
      a->scored = 1;
      a->value = a->measure = o->accuracy;
      snprintf(a->basis, sizeof a->basis, "label accuracy: %llu of %llu labelled decisions correct",
               (unsigned long long)r->correct, (unsigned long long)r->labelled);
    } else if (s->agreement_accuracy && r->decisions) {
      a->scored = 1;
      a->value = a->measure = i == 0 ? 1.0 : share(r->agreed, r->decisions);
      snprintf(a->basis, sizeof a->basis,
               "no labels: determinism, %llu of %llu snapshots reproduced exactly",
               (unsigned long long)(i == 0 ? r->decisions : r->agreed),
               (unsigned long long)r->decisions);
    } else {
      a->measure = i == 0 ? 1.0 : share(r->agreed, r->decisions);
      snprintf(a->basis, sizeof a->basis,
               "not scored: no labels (%.1f%% of decisions as %s's, which measures change, not "
               "correctness)",
               100.0 * a->measure, s->names[0]);
    }

    score_category *d = &o->cat[SCORE_CAT_AUDIT];
    d->scored = r->decisions > 0;
    d->value = d->measure = o->audit_share;
    snprintf(d->basis, sizeof d->basis,
             "of %llu answers, %llu name an id, %llu a reason, %llu their versions",
             (unsigned long long)r->decisions, (unsigned long long)r->audit_id,
             (unsigned long long)r->audit_reason, (unsigned long long)r->audit_version);
  }
  timing_category(s, raw, out, SCORE_CAT_LATENCY);
  timing_category(s, raw, out, SCORE_CAT_COST);
  for (int i = 0; i < n; i++) out[i].score = total(out[i].cat);
}

static int point_order(const void *a, const void *b) {
  return strcmp(((const score_point_result *)a)->point, ((const score_point_result *)b)->point);
}

void score_sides_finish(score_sides *s, score_comparison *out) {
  memset(out, 0, sizeof *out);
  out->nsides = s->nsides;
  const side_raw *raw[SCORE_MAX_SIDES];
  for (int i = 0; i < s->nsides; i++) raw[i] = &s->all[i];
  compare(s, raw, out->sides);
  free(s->pres);
  free(s->pside);
  s->pres = calloc(s->npoints ? s->npoints : 1, sizeof *s->pres);
  s->pside = calloc(s->npoints ? s->npoints * (size_t)s->nsides : 1, sizeof *s->pside);
  if (!s->pres || !s->pside) return; /* out of memory: the overall figures only */
  for (size_t p = 0; p < s->npoints; p++) {
    for (int i = 0; i < s->nsides; i++) raw[i] = &s->points[p].sides[i];
    s->pres[p].point = s->points[p].name;
    s->pres[p].sides = s->pside + p * (size_t)s->nsides;
    compare(s, raw, s->pres[p].sides);
  }
  /* sorted by name: the order is the same whatever the traffic's */
  qsort(s->pres, s->npoints, sizeof *s->pres, point_order);
  out->points = s->pres;
  out->npoints = s->npoints;
}

static void score_categories(score_acc *s, score_report *r) {
  score_sides_finish(s->sides, &r->cmp);
  memcpy(r->cat, r->cmp.sides[1].cat, sizeof r->cat);
  r->score = r->cmp.sides[1].score;
  r->has_recorded_score = s->mode != SCORE_DETERMINISM;
  if (!r->has_recorded_score) return;
  memcpy(r->recorded_cat, r->cmp.sides[0].cat, sizeof r->recorded_cat);
  r->recorded_score = r->cmp.sides[0].score;
}

void score_finish(score_acc *s, score_report *r) {
  memset(r, 0, sizeof *r);
  r->mode = s->mode;
  r->seen = s->seen;
  r->replayed = s->replayed;
  r->reproduced = s->reproduced;
  r->masked = s->masked;
  r->changed = s->changed;
  r->errors = s->errors;
  r->complete = s->complete;
  r->changed_action = s->changed_action;
  r->changed_allowed = s->changed_allowed;
  r->changed_rule = s->changed_rule;
  r->changed_other = s->changed_other;
  r->transitions = tally_sorted(&s->transitions);
  r->ntransitions = s->transitions.nrows;
  r->rule_changes = tally_sorted(&s->rules);
  r->nrule_changes = s->rules.nrows;
  r->error_kinds = tally_sorted(&s->errkinds);
  r->nerror_kinds = s->errkinds.nrows;

  r->have_labels = s->labels != NULL;
  r->labels_loaded = score_labels_count(s->labels);
  r->labelled = s->labelled;
  r->recorded.labelled = r->replayed_side.labelled = s->labelled;
  r->recorded.correct = s->rec_correct;
  r->replayed_side.correct = s->rep_correct;
  r->recorded.accuracy = share(s->rec_correct, s->labelled);
  r->replayed_side.accuracy = share(s->rep_correct, s->labelled);
  r->confusion_recorded = tally_sorted(&s->conf_rec);
  r->nconfusion_recorded = s->conf_rec.nrows;
  r->confusion_replayed = tally_sorted(&s->conf_rep);
  r->nconfusion_replayed = s->conf_rep.nrows;

  hist_dist(&s->lat, 1000.0, &r->replayed_side.latency_us);
  hist_dist(&s->rec_lat, 1000.0, &r->recorded.latency_us);
  hist_dist(&s->cpu, 1.0, &r->cpu_ns);
  struct rusage ru;
  r->peak_rss_kb = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
  r->complete_share = share(s->complete, s->seen);
  r->reproduced_share = share(s->reproduced, s->seen);
  r->weights = s->w;
  r->latency_hist = &s->lat;
  r->recorded_latency_hist = &s->rec_lat;
  score_categories(s, r);
}
