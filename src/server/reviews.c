/* reviews.c — the review queue (reviews.h) and its endpoints:
 * GET /v1/reviews (the queue, or the outcomes on record) and
 * POST /v1/reviews/{snapshot_id} (a reviewer's outcome, admin token).
 *
 * A decision enters the queue from the worker that made it (one short lock:
 * review-needed answers are a small share, and the lock is never held
 * across I/O); it leaves when an outcome for it is on disk. Outcomes are
 * appended to the reviews log and fsynced on the worker's loop before the
 * answer: a person's answer is rare and worth the wait, as snapshot reads
 * are. docs/server.md, "The review queue", is the contract. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/timefmt.h"
#include "core/value.h"
#include "server/internal.h"
#include "server/reviews.h"
#include "snapshot/reviewlog.h"
#include "snapshot/snapshot.h"

#define PUT_LIT(b, s) json_buf_put((b), (s), sizeof(s) - 1)
#define REVIEWS_PAGE_MAX 1000
#define REVIEWS_PAGE_DEFAULT 50
#define ACTION_MAX 128
#define NOTE_MAX 4096

/* A queued decision: its strings packed in one allocation,
 * strategy\0action\0source\0rule\0 (rule "" when none). */
typedef struct pend {
  uint8_t id[16];
  char *text;
} pend;

struct idset;

struct reviews {
  pthread_mutex_t mu;
  pend *e; /* sorted by id */
  size_t n;
  _Atomic uint64_t dropped;
  reviewlog *log; /* NULL: read-only */
  char *dir;
  /* The rebuild from the snapshots, on a thread of its own when the queue
   * is a server's (the server is ready meanwhile): done holds the ids with
   * an outcome (the log's at open, and those recorded since), under mu,
   * until the rebuild ends; NULL after. */
  struct idset *done;
  pthread_t rebuilder;
  int has_rebuilder;
  _Atomic int stop;
  _Atomic int rebuilding;
};

static char *pack(const char *strategy, size_t sn, const char *action, size_t an,
                  const char *source, size_t on, const char *rule, size_t rn) {
  char *t = malloc(sn + an + on + rn + 4);
  if (!t) return NULL;
  char *p = t;
  memcpy(p, strategy, sn), p += sn, *p++ = '\0';
  memcpy(p, action, an), p += an, *p++ = '\0';
  memcpy(p, source, on), p += on, *p++ = '\0';
  memcpy(p, rule, rn), p += rn, *p = '\0';
  return t;
}

static void unpack(const pend *p, review_item *it) {
  snapshot_id_format(p->id, it->id);
  it->time_ms = (int64_t)snapshot_id_time_ms(p->id);
  it->strategy = p->text;
  it->action = it->strategy + strlen(it->strategy) + 1;
  it->source = it->action + strlen(it->action) + 1;
  it->rule = it->source + strlen(it->source) + 1;
  if (!*it->rule) it->rule = NULL;
}

/* The first entry with id >= the given one. Locked. */
static size_t lower_bound(const reviews *rv, const uint8_t id[16]) {
  size_t lo = 0, hi = rv->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (memcmp(rv->e[mid].id, id, 16) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Takes text (freed when not kept). Locked. */
static void insert(reviews *rv, const uint8_t id[16], char *text) {
  /* ids arrive nearly in order: look from the end */
  size_t at = rv->n;
  while (at > 0 && memcmp(rv->e[at - 1].id, id, 16) > 0) at--;
  if (at > 0 && memcmp(rv->e[at - 1].id, id, 16) == 0) {
    free(text);
    return;
  }
  if (rv->n == REVIEWS_MAX_PENDING) {
    atomic_fetch_add(&rv->dropped, 1);
    if (at == 0) { /* older than everything kept: it is the one to leave */
      free(text);
      return;
    }
    free(rv->e[0].text);
    memmove(rv->e, rv->e + 1, (at - 1) * sizeof *rv->e);
    at--;
  } else {
    memmove(rv->e + at + 1, rv->e + at, (rv->n - at) * sizeof *rv->e);
    rv->n++;
  }
  memcpy(rv->e[at].id, id, 16);
  rv->e[at].text = text;
}

/* Removes id; 1 when it was queued. Locked. */
static int take(reviews *rv, const uint8_t id[16]) {
  size_t at = lower_bound(rv, id);
  if (at == rv->n || memcmp(rv->e[at].id, id, 16) != 0) return 0;
  free(rv->e[at].text);
  memmove(rv->e + at, rv->e + at + 1, (rv->n - at - 1) * sizeof *rv->e);
  rv->n--;
  return 1;
}

void reviews_note(reviews *rv, const vd_decision *d) {
  if (!rv || !vd_decision_review(d)) return;
  const char *idt = vd_decision_snapshot_id(d);
  uint8_t id[16];
  if (!idt || snapshot_id_parse(idt, strlen(idt), id) != 0) return;
  const char *s = vd_decision_strategy(d), *a = vd_decision_action(d);
  const char *o = vd_decision_source(d), *r = vd_decision_rule(d);
  s = s ? s : "", a = a ? a : "", o = o ? o : "", r = r ? r : "";
  char *text = pack(s, strlen(s), a, strlen(a), o, strlen(o), r, strlen(r));
  if (!text) {
    atomic_fetch_add(&rv->dropped, 1);
    return;
  }
  pthread_mutex_lock(&rv->mu);
  insert(rv, id, text);
  pthread_mutex_unlock(&rv->mu);
}

size_t reviews_pending(reviews *rv) {
  pthread_mutex_lock(&rv->mu);
  size_t n = rv->n;
  pthread_mutex_unlock(&rv->mu);
  return n;
}

uint64_t reviews_dropped(reviews *rv) { return atomic_load(&rv->dropped); }

void reviews_each(reviews *rv, const char *after, int (*fn)(void *ud, const review_item *it),
                  void *ud) {
  pthread_mutex_lock(&rv->mu);
  size_t i = 0;
  uint8_t id[16];
  if (after && snapshot_id_parse(after, strlen(after), id) == 0) {
    i = lower_bound(rv, id);
    if (i < rv->n && memcmp(rv->e[i].id, id, 16) == 0) i++;
  }
  for (; i < rv->n; i++) {
    review_item it;
    unpack(&rv->e[i], &it);
    if (fn(ud, &it)) break;
  }
  pthread_mutex_unlock(&rv->mu);
}

/* ---- what a payload or an outcome says ---- */

static const value *get(const value *m, const char *k) {
  return m && m->kind == V_MAP ? value_map_get(m, k, strlen(k)) : NULL;
}

static int str_of(const value *v, const char **s, size_t *n) {
  if (!v || v->kind != V_STRING) return 0;
  *s = v->s;
  *n = v->n;
  return 1;
}

/* The decision's fields from its snapshot payload (a JSON object): packed as
 * pend.text, or NULL (not a snapshot we read, or out of memory). */
static char *payload_text(const char *p, size_t n) {
  arena a;
  arena_init(&a, NULL, 0, 0);
  value v;
  char *text = NULL;
  if (json_parse(&a, p, n, NULL, &v, NULL) == 0) {
    const char *s = "", *ac = "", *o = "", *r = "";
    size_t sn = 0, an = 0, on = 0, rn = 0;
    str_of(get(&v, "strategy"), &s, &sn);
    str_of(get(&v, "action"), &ac, &an);
    str_of(get(&v, "source"), &o, &on);
    str_of(get(get(&v, "reason"), "rule"), &r, &rn);
    text = pack(s, sn, ac, an, o, on, r, rn);
  }
  arena_free(&a);
  return text;
}

/* ---- the set of ids with an outcome, while the queue is rebuilt ---- */

typedef struct idset {
  uint8_t (*slot)[16]; /* all-zero: empty (no UUIDv7 is zero) */
  size_t cap, n;
} idset;

static size_t id_hash(const uint8_t id[16]) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < 16; i++) h = (h ^ id[i]) * 0x100000001b3ull;
  return (size_t)h;
}

static const uint8_t zero_id[16];

static int idset_add(idset *s, const uint8_t id[16]) {
  if ((s->n + 1) * 2 > s->cap) {
    size_t ncap = s->cap ? s->cap * 2 : 1024;
    uint8_t(*ns)[16] = calloc(ncap, 16);
    if (!ns) return -1;
    for (size_t i = 0; i < s->cap; i++)
      if (memcmp(s->slot[i], zero_id, 16) != 0) {
        size_t j = id_hash(s->slot[i]) & (ncap - 1);
        while (memcmp(ns[j], zero_id, 16) != 0) j = (j + 1) & (ncap - 1);
        memcpy(ns[j], s->slot[i], 16);
      }
    free(s->slot);
    s->slot = ns;
    s->cap = ncap;
  }
  size_t j = id_hash(id) & (s->cap - 1);
  while (memcmp(s->slot[j], zero_id, 16) != 0) {
    if (memcmp(s->slot[j], id, 16) == 0) return 0;
    j = (j + 1) & (s->cap - 1);
  }
  memcpy(s->slot[j], id, 16);
  s->n++;
  return 0;
}

static int idset_has(const idset *s, const uint8_t id[16]) {
  if (!s->cap) return 0;
  size_t j = id_hash(id) & (s->cap - 1);
  while (memcmp(s->slot[j], zero_id, 16) != 0) {
    if (memcmp(s->slot[j], id, 16) == 0) return 1;
    j = (j + 1) & (s->cap - 1);
  }
  return 0;
}

/* The id an outcome body names, into id. 0, or -1. */
static int outcome_id(const char *body, size_t n, uint8_t id[16]) {
  arena a;
  char buf[4096];
  arena_init(&a, buf, sizeof buf, 0);
  value v;
  const char *s;
  size_t sn;
  int rc = -1;
  if (json_parse(&a, body, n, NULL, &v, NULL) == 0 && str_of(get(&v, "id"), &s, &sn))
    rc = snapshot_id_parse(s, sn, id) == 0 ? 0 : -1;
  arena_free(&a);
  return rc;
}

/* The ids with an outcome in the reviews log, into done. 0, or -1 with err. */
static int read_done(reviews *rv, idset *done, char *err, size_t errlen) {
  reviewlog_reader *lr;
  int rc = reviewlog_reader_open(rv->dir, &lr, err, errlen);
  if (rc != 0) return rc < 0 ? -1 : 0; /* 1: no log yet, nothing answered */
  const char *body;
  uint32_t n;
  uint8_t id[16];
  while ((rc = reviewlog_reader_next(lr, &body, &n, NULL, NULL, err, errlen)) == 1)
    if (outcome_id(body, n, id) == 0 && idset_add(done, id) < 0) {
      snprintf(err, errlen, "out of memory reading %s/%s", rv->dir, REVIEWLOG_NAME);
      rc = -1;
      break;
    }
  reviewlog_reader_close(lr);
  return rc < 0 ? -1 : 0;
}

/* Queues the review-needed decisions of the last REVIEWS_WINDOW_DAYS whose
 * ids are not in rv->done, reading the snapshot folder; *seen counts them.
 * Each goes in under the lock (workers note decisions, reviewers answer
 * them meanwhile). 0, or -1 with err; stops early, 0, once rv->stop. */
static int scan_snapshots(reviews *rv, uint64_t *seen, char *err, size_t errlen) {
  snapshot_filter f;
  snapshot_filter_init(&f);
  f.since_ns = clock_wall_ns() - (int64_t)REVIEWS_WINDOW_DAYS * 86400 * 1000000000;
  snapshot_reader *sr;
  if (snapshot_reader_open(rv->dir, &f, &sr, err, errlen) < 0) return -1;
  snapshot_rec rec;
  int rc;
  *seen = 0;
  while (!atomic_load(&rv->stop) && (rc = snapshot_reader_next(sr, &rec)) == 1) {
    if (!rec.review) continue;
    pthread_mutex_lock(&rv->mu);
    int answered = idset_has(rv->done, rec.id);
    pthread_mutex_unlock(&rv->mu);
    if (answered) continue;
    char *text = payload_text(rec.payload, rec.payload_len);
    if (!text) continue;
    pthread_mutex_lock(&rv->mu);
    if (!idset_has(rv->done, rec.id)) { /* (answered while its text was made) */
      insert(rv, rec.id, text);
      ++*seen;
    } else {
      free(text);
    }
    pthread_mutex_unlock(&rv->mu);
  }
  if (atomic_load(&rv->stop)) rc = 0;
  if (rc < 0) snprintf(err, errlen, "%s", snapshot_reader_error(sr));
  snapshot_reader_close(sr);
  return rc < 0 ? -1 : 0;
}

/* The rebuild ends: done is dropped (outcomes from now on only take). */
static void rebuild_done(reviews *rv) {
  pthread_mutex_lock(&rv->mu);
  if (rv->done) free(rv->done->slot);
  free(rv->done);
  rv->done = NULL;
  atomic_store(&rv->rebuilding, 0);
  pthread_mutex_unlock(&rv->mu);
}

static void *rebuilder_main(void *arg) {
  reviews *rv = arg;
  char err[700], f[160];
  uint64_t seen = 0;
  uint64_t t0 = clock_mono_ns();
  int rc = scan_snapshots(rv, &seen, err, sizeof err);
  unsigned long long ms = (clock_mono_ns() - t0) / 1000000;
  int stopped = atomic_load(&rv->stop);
  rebuild_done(rv);
  if (stopped) return NULL;
  if (rc < 0) {
    server_log("error", "reviews_rebuild_failed", err, NULL);
  } else {
    snprintf(f, sizeof f, ",\"found\":%llu,\"ms\":%llu", (unsigned long long)seen, ms);
    server_log("info", "reviews_rebuilt",
               "the review queue holds the unanswered decisions of the snapshot folder", f);
  }
  return NULL;
}

int reviews_open(const char *dir, int writable, int background, reviews **out, uint64_t *cut,
                 char *err, size_t errlen) {
  *out = NULL;
  reviews *rv = calloc(1, sizeof *rv);
  if (rv) rv->e = malloc(REVIEWS_MAX_PENDING * sizeof *rv->e);
  if (rv) rv->dir = strdup(dir);
  if (rv) rv->done = calloc(1, sizeof *rv->done);
  if (!rv || !rv->e || !rv->dir || !rv->done) {
    if (rv) free(rv->e), free(rv->dir), free(rv->done);
    free(rv);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  pthread_mutex_init(&rv->mu, NULL);
  atomic_store(&rv->rebuilding, 1);
  if ((writable && reviewlog_open(dir, &rv->log, cut, err, errlen) < 0) ||
      read_done(rv, rv->done, err, errlen) < 0) {
    reviews_close(rv);
    return -1;
  }
  if (background) {
    int e = pthread_create(&rv->rebuilder, NULL, rebuilder_main, rv);
    if (e == 0) {
      rv->has_rebuilder = 1;
      *out = rv;
      return 0;
    }
    /* no thread: rebuild here, as a CLI does */
  }
  uint64_t seen;
  if (scan_snapshots(rv, &seen, err, errlen) < 0) {
    reviews_close(rv);
    return -1;
  }
  rebuild_done(rv);
  *out = rv;
  return 0;
}

int reviews_rebuilding(reviews *rv) { return atomic_load(&rv->rebuilding); }

void reviews_close(reviews *rv) {
  if (!rv) return;
  if (rv->has_rebuilder) {
    atomic_store(&rv->stop, 1);
    pthread_join(rv->rebuilder, NULL);
  }
  for (size_t i = 0; i < rv->n; i++) free(rv->e[i].text);
  free(rv->e);
  if (rv->done) free(rv->done->slot);
  free(rv->done);
  reviewlog_close(rv->log);
  pthread_mutex_destroy(&rv->mu);
  free(rv->dir);
  free(rv);
}

void worker_count_decision(worker *w, const vd_decision *d) {
  metrics_count_decision(&w->m, d);
  stats_count_decision(w->srv->stats, &w->st, d);
  reviews_note(w->srv->reviews, d);
}

/* ---- GET /v1/reviews ---- */

static int hexval(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

#define QMAX 256

typedef struct query {
  char state[16], strategy[QMAX], action[QMAX], since[64], limit[16], cursor[64];
  int has_strategy, has_action;
  int64_t since_ms;
  unsigned limit_n;
} query;

/* %XX and '+' decoded into out (NUL-terminated). -1 when longer than cap-1. */
static int decode(const char *s, size_t n, char *out, size_t cap) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    if (ch == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
      ch = (char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2]));
      i += 2;
    } else if (ch == '+') {
      ch = ' ';
    }
    if (k + 1 >= cap) return -1;
    out[k++] = ch;
  }
  out[k] = '\0';
  return 0;
}

/* 0, or -1 with the 400 answered. */
static int parse_query(conn *c, const http_request *r, query *q) {
  memset(q, 0, sizeof *q);
  strcpy(q->state, "pending");
  q->limit_n = REVIEWS_PAGE_DEFAULT;
  const char *p = r->query, *end = r->query + r->query_len;
  char msg[400];
  while (p < end) {
    const char *amp = memchr(p, '&', (size_t)(end - p));
    const char *stop = amp ? amp : end;
    const char *eq = memchr(p, '=', (size_t)(stop - p));
    size_t kn = (size_t)((eq ? eq : stop) - p);
    const char *v = eq ? eq + 1 : stop;
    size_t vn = (size_t)(stop - v);
    char key[32];
    if (kn && decode(p, kn, key, sizeof key) == 0) {
      struct {
        const char *name;
        char *buf;
        size_t cap;
        int *has;
      } fields[] = {{"state", q->state, sizeof q->state, NULL},
                    {"strategy", q->strategy, sizeof q->strategy, &q->has_strategy},
                    {"action", q->action, sizeof q->action, &q->has_action},
                    {"since", q->since, sizeof q->since, NULL},
                    {"limit", q->limit, sizeof q->limit, NULL},
                    {"cursor", q->cursor, sizeof q->cursor, NULL}};
      int known = 0;
      for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (strcmp(key, fields[i].name) != 0) continue;
        known = 1;
        if (decode(v, vn, fields[i].buf, fields[i].cap) < 0) {
          snprintf(msg, sizeof msg, "query parameter %s is longer than %zu bytes", key,
                   fields[i].cap - 1);
          conn_respond_error(c, 400, "bad_query", msg, key);
          return -1;
        }
        if (fields[i].has) *fields[i].has = 1;
      }
      if (!known) {
        char kq[80];
        snprintf(msg, sizeof msg,
                 "unknown query parameter %s (want state, strategy, action, since, limit, cursor)",
                 json_quote_text(kq, sizeof kq, key, strlen(key), 32));
        conn_respond_error(c, 400, "bad_query", msg, NULL);
        return -1;
      }
    }
    p = amp ? amp + 1 : end;
  }
  if (strcmp(q->state, "pending") != 0 && strcmp(q->state, "reviewed") != 0) {
    conn_respond_error(c, 400, "bad_query", "state must be pending or reviewed", "state");
    return -1;
  }
  if (q->since[0]) {
    int64_t sec;
    int32_t ns;
    if (timefmt_parse_rfc3339(q->since, strlen(q->since), &sec, &ns) < 0) {
      conn_respond_error(c, 400, "bad_query",
                         "since must be an RFC 3339 time, like 2026-12-02T03:00:00Z", "since");
      return -1;
    }
    q->since_ms = sec * 1000 + ns / 1000000;
  }
  if (q->limit[0]) {
    char *e;
    errno = 0;
    unsigned long l = strtoul(q->limit, &e, 10);
    if (errno || *e || q->limit[0] == '-' || l < 1 || l > REVIEWS_PAGE_MAX) {
      snprintf(msg, sizeof msg, "limit must be a whole number from 1 to %d", REVIEWS_PAGE_MAX);
      conn_respond_error(c, 400, "bad_query", msg, "limit");
      return -1;
    }
    q->limit_n = (unsigned)l;
  }
  if (q->cursor[0]) {
    uint8_t id[16];
    char *e;
    int ok = strcmp(q->state, "pending") == 0
                 ? snapshot_id_parse(q->cursor, strlen(q->cursor), id) == 0
                 : (strtoull(q->cursor, &e, 10), *e == '\0' && q->cursor[0] != '-');
    if (!ok) {
      conn_respond_error(c, 400, "bad_query", "cursor must be a next_cursor from an earlier page",
                         "cursor");
      return -1;
    }
  }
  return 0;
}

static void put_time_ms(json_buf *b, int64_t ms) {
  char t[48];
  size_t n = timefmt_format_rfc3339(ms / 1000, (int32_t)(ms % 1000) * 1000000, t);
  json_write_string(b, t, n);
}

static void put_str_or_null(json_buf *b, const char *s) {
  if (s)
    json_write_string(b, s, strlen(s));
  else
    PUT_LIT(b, "null");
}

/* The fields of a queued decision or of an outcome's decision. */
static void put_decision(json_buf *b, const char *id, int64_t time_ms, const char *strategy,
                         const char *action, const char *source, const char *rule) {
  PUT_LIT(b, "{\"snapshot_id\":");
  json_write_string(b, id, strlen(id));
  PUT_LIT(b, ",\"time\":");
  put_time_ms(b, time_ms);
  PUT_LIT(b, ",\"strategy\":");
  json_write_string(b, strategy, strlen(strategy));
  PUT_LIT(b, ",\"action\":");
  json_write_string(b, action, strlen(action));
  PUT_LIT(b, ",\"source\":");
  json_write_string(b, source, strlen(source));
  PUT_LIT(b, ",\"rule\":");
  put_str_or_null(b, rule && *rule ? rule : NULL);
}

static int matches(const query *q, int64_t time_ms, const char *strategy, size_t sn,
                   const char *action, size_t an) {
  if (q->has_strategy && (strlen(q->strategy) != sn || memcmp(q->strategy, strategy, sn) != 0))
    return 0;
  if (q->has_action && (strlen(q->action) != an || memcmp(q->action, action, an) != 0)) return 0;
  return !q->since_ms || time_ms >= q->since_ms;
}

typedef struct page {
  const query *q;
  json_buf *b;
  unsigned n;
  int more;
  char last[37];
} page;

static int page_item(void *ud, const review_item *it) {
  page *p = ud;
  if (!matches(p->q, it->time_ms, it->strategy, strlen(it->strategy), it->action,
               strlen(it->action)))
    return 0;
  if (p->n == p->q->limit_n) {
    p->more = 1;
    return 1;
  }
  if (p->n) json_buf_putc(p->b, ',');
  put_decision(p->b, it->id, it->time_ms, it->strategy, it->action, it->source, it->rule);
  json_buf_putc(p->b, '}');
  memcpy(p->last, it->id, sizeof p->last);
  p->n++;
  return 0;
}

/* One outcome of the log, as read back. */
typedef struct outcome {
  arena a;
  value v;
  uint8_t id[16];
  char idt[37];
  int64_t time_ms;
  const char *strategy, *decided, *source, *rule, *action, *note, *reviewed_at;
  size_t sn, dn;
} outcome;

static const char *cstr(arena *a, const value *v) {
  if (!v || v->kind != V_STRING) return NULL;
  char *s = arena_alloc(a, v->n + 1);
  if (!s) return NULL;
  memcpy(s, v->s, v->n);
  s[v->n] = '\0';
  return s;
}

/* 0 with o filled (free o->a after), -1 not an outcome we can read. */
static int outcome_read(const char *body, size_t n, outcome *o) {
  arena_init(&o->a, NULL, 0, 0);
  const char *s;
  size_t sn;
  if (json_parse(&o->a, body, n, NULL, &o->v, NULL) != 0 || !str_of(get(&o->v, "id"), &s, &sn) ||
      snapshot_id_parse(s, sn, o->id) != 0) {
    arena_free(&o->a);
    return -1;
  }
  snapshot_id_format(o->id, o->idt);
  o->time_ms = (int64_t)snapshot_id_time_ms(o->id);
  o->strategy = cstr(&o->a, get(&o->v, "strategy"));
  o->decided = cstr(&o->a, get(&o->v, "decided"));
  o->source = cstr(&o->a, get(&o->v, "source"));
  o->rule = cstr(&o->a, get(&o->v, "rule"));
  o->action = cstr(&o->a, get(&o->v, "action"));
  o->note = cstr(&o->a, get(&o->v, "note"));
  o->reviewed_at = cstr(&o->a, get(&o->v, "reviewed_at"));
  if (!o->strategy) o->strategy = "";
  if (!o->decided) o->decided = "";
  if (!o->source) o->source = "";
  if (!o->action) o->action = "";
  o->sn = strlen(o->strategy);
  o->dn = strlen(o->decided);
  return 0;
}

static void list_reviewed(conn *c, const query *q, json_buf *b) {
  server *srv = conn_worker(c)->srv;
  char err[600];
  reviewlog_reader *lr;
  int rc = reviewlog_reader_open(srv->snapshots_dir, &lr, err, sizeof err);
  if (rc < 0) return conn_respond_error(c, 500, "reviews_log", err, NULL);
  /* The page (bodies copied), then the rest of the log for later outcomes
   * of the same decisions: those make the page's ones superseded. */
  char **bodies = calloc(q->limit_n, sizeof *bodies);
  uint8_t(*ids)[16] = calloc(q->limit_n, 16);
  int *superseded = calloc(q->limit_n, sizeof *superseded);
  unsigned n = 0;
  int more = 0;
  uint64_t next_off = 0;
  if (!bodies || !ids || !superseded) {
    rc = -1;
    snprintf(err, sizeof err, "out of memory");
  } else if (rc == 0) {
    if (q->cursor[0]) reviewlog_reader_seek(lr, strtoull(q->cursor, NULL, 10));
    const char *body;
    uint32_t len;
    uint64_t off, next;
    while ((rc = reviewlog_reader_next(lr, &body, &len, &off, &next, err, sizeof err)) == 1) {
      outcome o;
      if (outcome_read(body, len, &o) < 0) continue;
      for (unsigned i = 0; i < n; i++)
        if (memcmp(ids[i], o.id, 16) == 0) superseded[i] = 1;
      if (!more && matches(q, o.time_ms, o.strategy, o.sn, o.decided, o.dn)) {
        if (n == q->limit_n) {
          more = 1;
        } else {
          bodies[n] = strndup(body, len);
          memcpy(ids[n], o.id, 16);
          if (bodies[n]) n++;
          next_off = next;
        }
      }
      arena_free(&o.a);
    }
  }
  if (rc < 0) {
    conn_respond_error(c, 500, "reviews_log", err, NULL);
  } else {
    for (unsigned i = 0; i < n; i++) {
      outcome o;
      if (outcome_read(bodies[i], strlen(bodies[i]), &o) < 0) continue;
      if (i) json_buf_putc(b, ',');
      put_decision(b, o.idt, o.time_ms, o.strategy, o.decided, o.source, o.rule);
      PUT_LIT(b, ",\"outcome\":{\"action\":");
      json_write_string(b, o.action, strlen(o.action));
      PUT_LIT(b, ",\"note\":");
      put_str_or_null(b, o.note);
      PUT_LIT(b, ",\"reviewed_at\":");
      put_str_or_null(b, o.reviewed_at);
      PUT_LIT(b, "},\"superseded\":");
      if (superseded[i])
        PUT_LIT(b, "true}");
      else
        PUT_LIT(b, "false}");
      arena_free(&o.a);
    }
    PUT_LIT(b, "],\"next_cursor\":");
    if (more) {
      char t[32];
      snprintf(t, sizeof t, "\"%llu\"", (unsigned long long)next_off);
      json_buf_put(b, t, strlen(t));
    } else {
      PUT_LIT(b, "null");
    }
    PUT_LIT(b, "}\n");
    if (b->oom)
      conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory listing reviews", NULL);
    else
      conn_respond(c, 200, "application/json", NULL, b->data, b->len);
  }
  if (bodies)
    for (unsigned i = 0; i < n; i++) free(bodies[i]);
  free(bodies);
  free(ids);
  free(superseded);
  reviewlog_reader_close(lr);
}

void route_reviews(conn *c, const http_request *r) {
  server *srv = conn_worker(c)->srv;
  if (!srv->reviews)
    return conn_respond_error(c, 404, "snapshots_off",
                              "this server records no snapshots (started with --no-snapshots), "
                              "so it keeps no review queue",
                              NULL);
  if (snapshot_read_check(c, r) < 0) return;
  query q;
  if (parse_query(c, r, &q) < 0) return;
  json_buf b;
  json_buf_init(&b, NULL);
  char head[96];
  snprintf(head, sizeof head, "{\"state\":\"%s\",\"pending\":%zu,\"rebuilding\":%s,\"reviews\":[",
           q.state, reviews_pending(srv->reviews),
           reviews_rebuilding(srv->reviews) ? "true" : "false");
  json_buf_put(&b, head, strlen(head));
  if (strcmp(q.state, "reviewed") == 0) {
    list_reviewed(c, &q, &b);
  } else {
    page p = {.q = &q, .b = &b};
    reviews_each(srv->reviews, q.cursor[0] ? q.cursor : NULL, page_item, &p);
    PUT_LIT(&b, "],\"next_cursor\":");
    if (p.more)
      json_write_string(&b, p.last, strlen(p.last));
    else
      PUT_LIT(&b, "null");
    PUT_LIT(&b, "}\n");
    if (b.oom)
      conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory listing reviews", NULL);
    else
      conn_respond(c, 200, "application/json", NULL, b.data, b.len);
  }
  json_buf_free(&b);
}

/* ---- POST /v1/reviews/{snapshot_id} ---- */

static int name_ok(const char *s, size_t n) {
  if (n < 1 || n > ACTION_MAX) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '_' || ch == '-' || ch == '.' || ch == ':'))
      return 0;
  }
  return 1;
}

void route_review_post(conn *c, const http_request *r, const char *idt, size_t idn) {
  worker *w = conn_worker(c);
  server *srv = w->srv;
  if (!srv->reviews)
    return conn_respond_error(c, 404, "snapshots_off",
                              "this server records no snapshots (started with --no-snapshots), "
                              "so it keeps no review queue",
                              NULL);
  if (admin_check(c, r) < 0) return;
  uint8_t id[16];
  if (snapshot_id_parse(idt, idn, id) != 0)
    return conn_respond_error(c, 400, "bad_id",
                              "not a snapshot id (36 characters, like "
                              "01a229ef-49c6-7618-bedf-3e764396e750)",
                              NULL);
  char idtext[37];
  snapshot_id_format(id, idtext);
  arena a;
  arena_init(&a, NULL, 0, 0);
  value v;
  json_error je;
  const char *act = NULL, *note = NULL;
  size_t an = 0, nn = 0;
  char msg[400];
  json_buf b;
  json_buf_init(&b, NULL);
  char *text = NULL;
  if (json_parse(&a, r->body, r->body_len, NULL, &v, &je) != 0) {
    snprintf(msg, sizeof msg, "the body is not JSON: %s", je.message);
    conn_respond_error(c, 400, "json", msg, je.path[0] ? je.path : NULL);
    goto out;
  }
  if (v.kind != V_MAP) {
    conn_respond_error(c, 400, "request", "the body must be an object {\"action\", \"note\"}", "$");
    goto out;
  }
  for (uint32_t i = 0; i < v.n; i++) {
    const value *k = &v.entries[i].key, *x = &v.entries[i].val;
    if (k->n == 6 && memcmp(k->s, "action", 6) == 0) {
      if (!str_of(x, &act, &an) || !name_ok(act, an)) {
        snprintf(msg, sizeof msg,
                 "$.action must be an action name: 1 to %d bytes of letters, digits and _ - . :",
                 ACTION_MAX);
        conn_respond_error(c, 400, "request", msg, "$.action");
        goto out;
      }
    } else if (k->n == 4 && memcmp(k->s, "note", 4) == 0) {
      if (x->kind == V_NULL) continue;
      if (!str_of(x, &note, &nn) || nn > NOTE_MAX) {
        snprintf(msg, sizeof msg, "$.note must be a string of at most %d bytes", NOTE_MAX);
        conn_respond_error(c, 400, "request", msg, "$.note");
        goto out;
      }
    } else {
      char kq[80], path[100];
      snprintf(msg, sizeof msg, "unknown field %s (want action, note)",
               json_quote_text(kq, sizeof kq, k->s, k->n, 32));
      snprintf(path, sizeof path, "$.%.*s", (int)(k->n > 64 ? 64 : k->n), k->s);
      conn_respond_error(c, 400, "request", msg, path);
      goto out;
    }
  }
  if (!act) {
    conn_respond_error(c, 400, "request", "$.action is required: the reviewer's answer",
                       "$.action");
    goto out;
  }
  /* The decision: from the queue, else from the snapshot log (any recorded
   * decision may be answered). */
  pthread_mutex_lock(&srv->reviews->mu);
  size_t at = lower_bound(srv->reviews, id);
  if (at < srv->reviews->n && memcmp(srv->reviews->e[at].id, id, 16) == 0) {
    const char *t = srv->reviews->e[at].text;
    size_t len = 0;
    for (int k = 0; k < 4; k++) len += strlen(t + len) + 1;
    text = malloc(len);
    if (text) memcpy(text, t, len);
  }
  pthread_mutex_unlock(&srv->reviews->mu);
  if (!text) {
    char *payload;
    size_t pn;
    vd_error err;
    int rc = vd_snapshot_read(srv->snapshots_dir, idtext, -1, &payload, &pn, &err);
    if (rc == VD_ENOTFOUND) {
      snprintf(msg, sizeof msg, "no decision %s in the snapshot log", idtext);
      conn_respond_error(c, 404, "snapshot_not_found", msg, NULL);
      goto out;
    }
    if (rc != 0) {
      conn_respond_error(c, rc == VD_ENOMEM ? 503 : 500, "snapshot_log", err.message, NULL);
      goto out;
    }
    text = payload_text(payload, pn);
    vd_free(payload);
    if (!text) {
      conn_respond_error(c, 500, "snapshot_log", "the decision's snapshot cannot be read", NULL);
      goto out;
    }
  }
  review_item it;
  pend p = {.text = text};
  memcpy(p.id, id, 16);
  unpack(&p, &it);
  int64_t now_ns = clock_wall_ns();
  char at_text[48];
  size_t atn = timefmt_format_rfc3339(now_ns / 1000000000,
                                      (int32_t)(now_ns % 1000000000 / 1000000 * 1000000), at_text);
  /* the log's record */
  PUT_LIT(&b, "{\"id\":");
  json_write_string(&b, idtext, 36);
  PUT_LIT(&b, ",\"action\":");
  json_write_string(&b, act, an);
  PUT_LIT(&b, ",\"note\":");
  if (note)
    json_write_string(&b, note, nn);
  else
    PUT_LIT(&b, "null");
  PUT_LIT(&b, ",\"reviewed_at\":");
  json_write_string(&b, at_text, atn);
  PUT_LIT(&b, ",\"time\":");
  put_time_ms(&b, it.time_ms);
  PUT_LIT(&b, ",\"strategy\":");
  json_write_string(&b, it.strategy, strlen(it.strategy));
  PUT_LIT(&b, ",\"decided\":");
  json_write_string(&b, it.action, strlen(it.action));
  PUT_LIT(&b, ",\"source\":");
  json_write_string(&b, it.source, strlen(it.source));
  PUT_LIT(&b, ",\"rule\":");
  put_str_or_null(&b, it.rule);
  json_buf_putc(&b, '}');
  char err[600];
  if (b.oom) {
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory", NULL);
    goto out;
  }
  if (reviewlog_append(srv->reviews->log, b.data, b.len, err, sizeof err) < 0) {
    server_log("error", "review_write_failed", err, NULL);
    conn_respond_error(c, 503, "reviews_log", err, NULL);
    goto out;
  }
  pthread_mutex_lock(&srv->reviews->mu);
  take(srv->reviews, id);
  /* while the queue is rebuilt, the rebuild must not bring it back (a
   * failure here only risks the decision showing as pending again) */
  if (srv->reviews->done && idset_add(srv->reviews->done, id) < 0)
    server_log("warn", "review_queue", "out of memory noting an outcome during the rebuild",
               NULL);
  pthread_mutex_unlock(&srv->reviews->mu);
  {
    char an_s[ACTION_MAX + 1];
    memcpy(an_s, act, an);
    an_s[an] = '\0';
    int64_t waited = now_ns - it.time_ms * 1000000;
    metrics_count_outcome(&w->m, an_s, waited > 0 ? (uint64_t)waited : 0);
  }
  /* the answer */
  b.len = 0;
  PUT_LIT(&b, "{\"snapshot_id\":");
  json_write_string(&b, idtext, 36);
  PUT_LIT(&b, ",\"action\":");
  json_write_string(&b, act, an);
  PUT_LIT(&b, ",\"note\":");
  if (note)
    json_write_string(&b, note, nn);
  else
    PUT_LIT(&b, "null");
  PUT_LIT(&b, ",\"reviewed_at\":");
  json_write_string(&b, at_text, atn);
  PUT_LIT(&b, ",\"time\":");
  put_time_ms(&b, it.time_ms);
  PUT_LIT(&b, ",\"strategy\":");
  json_write_string(&b, it.strategy, strlen(it.strategy));
  PUT_LIT(&b, ",\"decided\":");
  json_write_string(&b, it.action, strlen(it.action));
  PUT_LIT(&b, "}\n");
  if (b.oom)
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory", NULL);
  else
    conn_respond(c, 200, "application/json", NULL, b.data, b.len);
out:
  free(text);
  json_buf_free(&b);
  arena_free(&a);
}
