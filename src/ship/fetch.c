/* fetch.c — a ClickHouse table of shipped snapshots made into a snapshot
 * folder again (ship_fetch, ship.h), for `verdict replay --from`: the
 * versions table's files under DIR/versions, the rows (FINAL: one per id)
 * appended to a new log in time order, page by page, so that the normal
 * replay reads a folder that replays alone. */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/json.h"
#include "replay/against.h"
#include "ship/ship.h"
#include "snapshot/snapshot.h"

#define PAGE_ROWS 100 /* rows a request: an answer stays far below the client's cap */
#define PAGE_VERSIONS 8

static const value *get(const value *m, const char *k) {
  return m->kind == V_MAP ? value_map_get(m, k, strlen(k)) : NULL;
}

static int str_of(const value *m, const char *k, const char **s, size_t *n) {
  const value *v = get(m, k);
  if (!v || v->kind != V_STRING) return -1;
  *s = v->s;
  *n = v->n;
  return 0;
}

/* A number that JSONEachRow may quote (64-bit integers are). */
static int num_of(const value *m, const char *k, double *d, uint64_t *u) {
  const value *v = get(m, k);
  if (!v) return -1;
  if (v->kind == V_STRING) {
    char buf[32];
    if (v->n == 0 || v->n >= sizeof buf) return -1;
    memcpy(buf, v->s, v->n);
    buf[v->n] = '\0';
    char *end;
    *u = strtoull(buf, &end, 10);
    if (*end) {
      *d = strtod(buf, &end);
      if (*end) return -1;
      *u = (uint64_t)*d;
    } else {
      *d = (double)*u;
    }
    return 0;
  }
  if (v->kind == V_INT || v->kind == V_UINT) {
    *u = v->u;
    *d = v->kind == V_INT ? (double)v->i : (double)v->u;
    return 0;
  }
  if (v->kind == V_DOUBLE) {
    *d = v->d;
    *u = (uint64_t)v->d;
    return 0;
  }
  return -1;
}

/* A versions row's name must be one of the folder's own: <hex>.json,
 * models/<hex>.json or models/<hex>.features.yaml. */
static int version_name_ok(const char *s, size_t n) {
  if (n > 7 && memcmp(s, "models/", 7) == 0) s += 7, n -= 7;
  size_t h = 0;
  while (h < n && ((s[h] >= '0' && s[h] <= '9') || (s[h] >= 'a' && s[h] <= 'f'))) h++;
  if (h < 16) return 0;
  return (n - h == 5 && memcmp(s + h, ".json", 5) == 0) ||
         (n - h == 14 && memcmp(s + h, ".features.yaml", 14) == 0);
}

static int query(against_client *c, const ship_target *t, const char *sql, json_buf *out, char *err,
                 size_t errlen) {
  json_buf path;
  json_buf_init(&path, NULL);
  json_buf_put(&path, "/", 1);
  int status;
  const char *resp;
  size_t rlen;
  int rc = against_post(c, path.data, NULL, sql, strlen(sql), &status, &resp, &rlen, err, errlen);
  json_buf_free(&path);
  if (rc < 0) return -1;
  if (status != 200) {
    while (rlen && (resp[rlen - 1] == '\n' || resp[rlen - 1] == '\r')) rlen--;
    snprintf(err, errlen, "ClickHouse at %s answered %d: %.*s", t->http, status,
             (int)(rlen > 400 ? 400 : rlen), resp);
    return -1;
  }
  out->len = 0;
  json_buf_put(out, resp, rlen);
  return 0;
}

/* The SQL string literal of s (quotes and backslashes escaped). */
static void sql_string(char *out, size_t cap, const char *s, size_t n) {
  size_t k = 0;
  if (cap < 3) return;
  out[k++] = '\'';
  for (size_t i = 0; i < n && k + 3 < cap; i++) {
    if (s[i] == '\'' || s[i] == '\\') out[k++] = '\\';
    out[k++] = s[i];
  }
  out[k++] = '\'';
  out[k] = '\0';
}

/* Calls row(ud, v) for each line of a JSONEachRow answer. The count, or -1. */
static long each_row(const json_buf *b, arena *a, int (*row)(void *, const value *), void *ud,
                     char *err, size_t errlen) {
  long n = 0;
  const char *p = b->data ? b->data : "", *end = p + b->len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    if (le > p) {
      arena_reset(a);
      value v;
      json_error je;
      json_opts jo = {.lenient = 1};
      if (json_parse(a, p, (size_t)(le - p), &jo, &v, &je) != 0 || v.kind != V_MAP) {
        snprintf(err, errlen, "ClickHouse's answer, row %ld: not a JSON object (%s)", n + 1,
                 je.message);
        return -1;
      }
      if (row(ud, &v) < 0) {
        snprintf(err, errlen, "ClickHouse's answer, row %ld: a column is missing or bad", n + 1);
        return -1;
      }
      n++;
    }
    p = le + 1;
  }
  return n;
}

typedef struct fetch_ctx {
  const char *dir;
  snapshot_log *log;
  char last_name[512];
  uint64_t last_time;
  char last_id[SNAPSHOT_ID_TEXT];
  long long rows;
  char err[SHIP_ERRLEN];
} fetch_ctx;

static int version_row(void *ud, const value *v) {
  fetch_ctx *f = ud;
  const char *name, *text;
  size_t nn, tn;
  if (str_of(v, "name", &name, &nn) < 0 || str_of(v, "text", &text, &tn) < 0) return -1;
  if (nn >= sizeof f->last_name) return -1;
  memcpy(f->last_name, name, nn);
  f->last_name[nn] = '\0';
  if (!version_name_ok(name, nn)) return 0; /* not a file of a folder: left out */
  char path[4700];
  snprintf(path, sizeof path, "%s/versions/%s", f->dir, f->last_name);
  FILE *o = fopen(path, "wb");
  if (!o) return -1;
  int ok = fwrite(text, 1, tn, o) == tn;
  if (fclose(o) != 0 || !ok) return -1;
  return 0;
}

static int snapshot_row(void *ud, const value *v) {
  fetch_ctx *f = ud;
  const char *id, *point, *action, *pv, *snap, *src;
  size_t idn, pn, an, pvn, sn, srcn;
  double d, conf;
  uint64_t tns, allowed, review, u;
  if (str_of(v, "id", &id, &idn) < 0 || str_of(v, "point", &point, &pn) < 0 ||
      str_of(v, "action", &action, &an) < 0 || str_of(v, "policy_version", &pv, &pvn) < 0 ||
      str_of(v, "snapshot", &snap, &sn) < 0 || str_of(v, "source", &src, &srcn) < 0 ||
      num_of(v, "time_ns", &d, &tns) < 0 || num_of(v, "allowed", &d, &allowed) < 0 ||
      num_of(v, "review", &d, &review) < 0 || num_of(v, "confidence", &conf, &u) < 0)
    return -1;
  snapshot_rec r;
  memset(&r, 0, sizeof r);
  if (idn != 36 || snapshot_id_parse(id, idn, r.id) < 0) return -1;
  int s = snapshot_source_parse(src, srcn);
  if (s < 0) return -1;
  r.time_ns = (int64_t)tns;
  r.allowed = allowed != 0;
  r.review = review != 0;
  r.source = (uint8_t)s;
  r.confidence = (float)conf;
  r.point = point, r.point_len = pn;
  r.action = action, r.action_len = an;
  r.policy_version = pv, r.policy_version_len = pvn;
  r.payload = snap, r.payload_len = sn;
  if (snapshot_log_append(f->log, &r, NULL) != 0) return -1;
  f->last_time = tns;
  memcpy(f->last_id, id, 36);
  f->last_id[36] = '\0';
  f->rows++;
  return 0;
}

long long ship_fetch(const char *url, int64_t since_ns, int64_t until_ns, const char *dir,
                     char *err, size_t errlen) {
  ship_target t;
  if (ship_target_parse(url, &t, err, errlen) < 0) return -1;
  char verr[SNAPSHOT_ERRLEN];
  char vpath[4200];
  snprintf(vpath, sizeof vpath, "%s/versions/models", dir);
  if (snapshot_folder_make(vpath, verr, sizeof verr) < 0) {
    snprintf(err, errlen, "%s", verr);
    return -1;
  }
  against_client *c;
  if (against_open(t.http, 30000, &c, err, errlen) < 0) return -1;
  fetch_ctx f;
  memset(&f, 0, sizeof f);
  f.dir = dir;
  json_buf b;
  json_buf_init(&b, NULL);
  arena a;
  char abuf[8192];
  arena_init(&a, abuf, sizeof abuf, 0);
  long long rc = -1;
  char sql[2048], lit[600];
  /* the versions, page by page in name order */
  for (;;) {
    sql_string(lit, sizeof lit, f.last_name, strlen(f.last_name));
    snprintf(sql, sizeof sql,
             "SELECT name, text FROM %s.%s_versions FINAL WHERE name > %s ORDER BY name "
             "LIMIT %d FORMAT JSONEachRow",
             t.db, t.table, lit, PAGE_VERSIONS);
    if (query(c, &t, sql, &b, err, errlen) < 0) goto out;
    long n = each_row(&b, &a, version_row, &f, err, errlen);
    if (n < 0) goto out;
    if (n < PAGE_VERSIONS) break;
  }
  /* the rows, in (time_ns, id) order */
  snapshot_log_opts lo;
  snapshot_log_opts_init(&lo);
  lo.durability = SNAPSHOT_DURABLE_NONE;
  lo.node = "clickhouse";
  if (snapshot_log_open(dir, &lo, &f.log, verr, sizeof verr) < 0) {
    snprintf(err, errlen, "%s", verr);
    goto out;
  }
  char range[200] = "";
  if (since_ns) snprintf(range, sizeof range, " AND time_ns >= %lld", (long long)since_ns);
  if (until_ns)
    snprintf(range + strlen(range), sizeof range - strlen(range), " AND time_ns < %lld",
             (long long)until_ns);
  for (int first = 1;; first = 0) {
    char after[200] = "1";
    if (!first)
      snprintf(after, sizeof after, "(time_ns > %llu OR (time_ns = %llu AND id > '%s'))",
               (unsigned long long)f.last_time, (unsigned long long)f.last_time, f.last_id);
    snprintf(sql, sizeof sql,
             "SELECT id, time_ns, point, action, allowed, review, source, confidence, "
             "policy_version, snapshot FROM %s.%s FINAL WHERE %s%s ORDER BY time_ns, id "
             "LIMIT %d FORMAT JSONEachRow",
             t.db, t.table, after, range, PAGE_ROWS);
    if (query(c, &t, sql, &b, err, errlen) < 0) goto out;
    long n = each_row(&b, &a, snapshot_row, &f, err, errlen);
    if (n < 0) goto out;
    if (n < PAGE_ROWS) break;
  }
  snapshot_log_status st;
  snapshot_log *log = f.log;
  f.log = NULL;
  if (snapshot_log_close(log, &st) < 0) {
    snprintf(err, errlen, "writing %s: %s", dir, st.last_error);
    goto out;
  }
  rc = f.rows;
out:
  if (f.log) snapshot_log_close(f.log, NULL);
  json_buf_free(&b);
  arena_free(&a);
  against_close(c);
  return rc;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)ftw;
  if (flag == FTW_DP)
    rmdir(path);
  else
    unlink(path);
  return 0;
}

void ship_remove_folder(const char *dir) { nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS); }
