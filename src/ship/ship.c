/* ship.c — the shipper (ship.h): a snapshot folder's records, read from its
 * segment files behind a durable cursor, sent to ClickHouse in gzip'd
 * JSONEachRow batches; the folder's version files to a versions table
 * before them. HTTP goes through the replay client's plain connection
 * (against_post); gzip is zlib's. */
#define _GNU_SOURCE
#include "ship/ship.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "core/arena.h"
#include "core/clock.h"
#include "replay/against.h"
#include "snapshot/snapshot.h"

/* ---- the target ---- */

static int ident_ok(const char *s, size_t n) {
  if (n == 0 || n >= 128 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return 0;
  }
  return 1;
}

int ship_target_parse(const char *url, ship_target *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  const char *scheme = "clickhouse://";
  if (!url || strncmp(url, scheme, strlen(scheme)) != 0) {
    snprintf(err, errlen, "%s: want clickhouse://HOST[:PORT]/DB.TABLE", url ? url : "(none)");
    return -1;
  }
  const char *hp = url + strlen(scheme), *slash = strchr(hp, '/');
  if (!slash || slash == hp) {
    snprintf(err, errlen,
             "%s: no host, or no /DB.TABLE after it (clickhouse://HOST[:PORT]/DB.TABLE)", url);
    return -1;
  }
  size_t hn = (size_t)(slash - hp);
  const char *colon = memchr(hp, ':', hn);
  if (hp[0] == '[') colon = NULL; /* [::1]:8123: the port check below reads after ']' */
  if (hp[0] == '[') {
    const char *rb = memchr(hp, ']', hn);
    if (rb && rb + 1 < slash && rb[1] == ':') colon = rb + 1;
  }
  if (colon) {
    const char *p = colon + 1;
    long port = 0;
    for (; p < slash && *p >= '0' && *p <= '9' && port <= 65535; p++) port = port * 10 + (*p - '0');
    if (p != slash || port < 1 || port > 65535) {
      snprintf(err, errlen, "%s: the port must be a number from 1 to 65535", url);
      return -1;
    }
  }
  if (hn + 20 >= sizeof t->http) {
    snprintf(err, errlen, "%s: host too long", url);
    return -1;
  }
  snprintf(t->http, sizeof t->http, "http://%.*s%s", (int)hn, hp, colon ? "" : ":8123");
  const char *dt = slash + 1, *dot = strchr(dt, '.');
  if (!dot || !ident_ok(dt, (size_t)(dot - dt)) || !ident_ok(dot + 1, strlen(dot + 1)) ||
      strlen(dot + 1) + 10 >= sizeof t->table) {
    snprintf(err, errlen,
             "%s: want /DB.TABLE after the host (letters, digits and _, not starting with a digit)",
             url);
    return -1;
  }
  memcpy(t->db, dt, (size_t)(dot - dt));
  snprintf(t->table, sizeof t->table, "%s", dot + 1);
  return 0;
}

void ship_table_sql(const ship_target *t, json_buf *snapshots, json_buf *versions) {
  char buf[2048];
  int n = snprintf(buf, sizeof buf,
                   "CREATE TABLE IF NOT EXISTS %s.%s (\n"
                   "  id String,\n"
                   "  time DateTime,\n"
                   "  time_ns UInt64,\n"
                   "  node String,\n"
                   "  point String,\n"
                   "  strategy String,\n"
                   "  action String,\n"
                   "  allowed UInt8,\n"
                   "  source String,\n"
                   "  rule String,\n"
                   "  confidence Float32,\n"
                   "  latency_us Float64,\n"
                   "  review UInt8,\n"
                   "  policy_version String,\n"
                   "  model_version String,\n"
                   "  snapshot String\n"
                   ") ENGINE = ReplacingMergeTree()\n"
                   "PARTITION BY toYYYYMM(time)\n"
                   "ORDER BY id\n",
                   t->db, t->table);
  json_buf_put(snapshots, buf, (size_t)n);
  n = snprintf(buf, sizeof buf,
               "CREATE TABLE IF NOT EXISTS %s.%s_versions (\n"
               "  name String,\n"
               "  kind String,\n"
               "  text String\n"
               ") ENGINE = ReplacingMergeTree()\n"
               "ORDER BY name\n",
               t->db, t->table);
  json_buf_put(versions, buf, (size_t)n);
}

/* ---- HTTP to ClickHouse ---- */

static void url_escape(json_buf *b, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.') {
      json_buf_putc(b, (char)c);
    } else {
      char e[3] = {'%', hex[c >> 4], hex[c & 15]};
      json_buf_put(b, e, 3);
    }
  }
}

/* POSTs body to "/?query=QUERY" (query NULL: the body is the query).
 * 0 on 200; -1 with ClickHouse's message or why no answer came. */
static int ch_post(against_client *c, const ship_target *t, const char *query, const char *body,
                   size_t len, int gzip, json_buf *answer, char *err, size_t errlen) {
  json_buf path;
  json_buf_init(&path, NULL);
  json_buf_put(&path, "/", 1);
  if (query) {
    json_buf_put(&path, "?query=", 7);
    url_escape(&path, query);
  }
  int status = 0;
  const char *resp;
  size_t rlen;
  int rc = against_post(c, path.data, gzip ? "Content-Encoding: gzip\r\n" : NULL, body, len,
                        &status, &resp, &rlen, err, errlen);
  json_buf_free(&path);
  if (rc < 0) return -1;
  if (status != 200) {
    while (rlen && (resp[rlen - 1] == '\n' || resp[rlen - 1] == '\r')) rlen--;
    snprintf(err, errlen, "ClickHouse at %s answered %d: %.*s", t->http, status,
             (int)(rlen > 400 ? 400 : rlen), resp);
    return -1;
  }
  if (answer) json_buf_put(answer, resp, rlen);
  return 0;
}

static int ch_open(const ship_target *t, int timeout_ms, against_client **c, char *err,
                   size_t errlen) {
  return against_open(t->http, timeout_ms, c, err, errlen);
}

int ship_create_tables(const ship_target *t, char *err, size_t errlen) {
  against_client *c;
  if (ch_open(t, 10000, &c, err, errlen) < 0) return -1;
  json_buf a, b;
  json_buf_init(&a, NULL);
  json_buf_init(&b, NULL);
  ship_table_sql(t, &a, &b);
  char db[200];
  snprintf(db, sizeof db, "CREATE DATABASE IF NOT EXISTS %s", t->db);
  int rc = ch_post(c, t, NULL, db, strlen(db), 0, NULL, err, errlen);
  if (rc == 0) rc = ch_post(c, t, NULL, a.data, a.len, 0, NULL, err, errlen);
  if (rc == 0) rc = ch_post(c, t, NULL, b.data, b.len, 0, NULL, err, errlen);
  json_buf_free(&a);
  json_buf_free(&b);
  against_close(c);
  return rc;
}

/* gzip of in into out (replaced). 0, or -1 out of memory. */
static int gzip_into(const char *in, size_t n, json_buf *out) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return -1;
  size_t cap = deflateBound(&z, (uLong)n) + 64;
  out->len = 0;
  if (json_buf_reserve(out, cap) < 0) {
    deflateEnd(&z);
    return -1;
  }
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)n;
  z.next_out = (Bytef *)out->data;
  z.avail_out = (uInt)cap;
  int r = deflate(&z, Z_FINISH);
  out->len = r == Z_STREAM_END ? z.total_out : 0;
  deflateEnd(&z);
  return r == Z_STREAM_END ? 0 : -1;
}

/* ---- the shipper ---- */

struct shipper {
  ship_opts o;
  ship_target t;
  char url[400];
  char node[128];
  char cursor_path[4096];
  char seg[256]; /* the cursor: the segment and the records into it */
  uint64_t recs;
  pthread_mutex_t mu; /* seg/recs and last_error, for status readers */
  char last_error[SHIP_ERRLEN];
  _Atomic int stop;
  ship_stats st;
  against_client *c;
  char **sent; /* version files sent (names under versions/) */
  size_t nsent, capsent;
  json_buf rows, gz;
  arena a;
  char abuf[8192];
};

void ship_opts_init(ship_opts *o) {
  memset(o, 0, sizeof *o);
  o->batch = 5000;
  o->poll_ms = 200;
  o->timeout_ms = 10000;
}

static int node_ok(const char *s) {
  if (!*s || strlen(s) >= 100) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '-' || *s == '_' || *s == '.'))
      return 0;
  return 1;
}

/* Reads the cursor file: 0 (absent: the start), or -1 with a message. */
static int cursor_read(shipper *s, char *err, size_t errlen) {
  FILE *f = fopen(s->cursor_path, "r");
  if (!f) {
    if (errno == ENOENT) return 0;
    snprintf(err, errlen, "%s: %s", s->cursor_path, strerror(errno));
    return -1;
  }
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  arena_reset(&s->a);
  value v;
  json_error je;
  const value *seg = NULL, *recs = NULL;
  if (json_parse(&s->a, buf, n, NULL, &v, &je) == 0 && v.kind == V_MAP) {
    seg = value_map_get(&v, "segment", 7);
    recs = value_map_get(&v, "records", 7);
  }
  if (!seg || seg->kind != V_STRING || seg->n >= sizeof s->seg || !recs ||
      !(recs->kind == V_INT || recs->kind == V_UINT) || recs->i < 0) {
    snprintf(err, errlen,
             "%s: not a shipping cursor ({\"segment\": NAME, \"records\": N}); remove it to ship "
             "the folder again from the start",
             s->cursor_path);
    return -1;
  }
  memcpy(s->seg, seg->s, seg->n);
  s->seg[seg->n] = '\0';
  s->recs = (uint64_t)recs->i;
  return 0;
}

/* Writes the cursor: a temporary file, fsync, rename, fsync of the folder. */
static int cursor_write(shipper *s, const char *seg, uint64_t recs, char *err, size_t errlen) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", s->cursor_path);
  json_buf b;
  json_buf_init(&b, NULL);
  json_buf_put(&b, "{\"segment\": ", 12);
  json_write_string(&b, seg, strlen(seg));
  json_buf_put(&b, ", \"records\": ", 13);
  json_put_u64(&b, recs);
  json_buf_put(&b, ", \"target\": ", 12);
  json_write_string(&b, s->url, strlen(s->url));
  json_buf_put(&b, "}\n", 2);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  int ok = fd >= 0 && write(fd, b.data, b.len) == (ssize_t)b.len && fsync(fd) == 0;
  if (fd >= 0 && close(fd) != 0) ok = 0;
  json_buf_free(&b);
  if (!ok || rename(tmp, s->cursor_path) != 0) {
    snprintf(err, errlen, "write %s: %s", s->cursor_path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  int dfd = open(s->o.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  pthread_mutex_lock(&s->mu);
  snprintf(s->seg, sizeof s->seg, "%s", seg);
  s->recs = recs;
  pthread_mutex_unlock(&s->mu);
  return 0;
}

static void set_error(shipper *s, const char *msg) {
  pthread_mutex_lock(&s->mu);
  snprintf(s->last_error, sizeof s->last_error, "%s", msg);
  pthread_mutex_unlock(&s->mu);
}

int shipper_new(const ship_opts *o, shipper **out, int *usage, char *err, size_t errlen) {
  *out = NULL;
  *usage = 0;
  shipper *s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  s->o = *o;
  pthread_mutex_init(&s->mu, NULL);
  json_buf_init(&s->rows, NULL);
  json_buf_init(&s->gz, NULL);
  arena_init(&s->a, s->abuf, sizeof s->abuf, 0);
  *out = s;
  if (ship_target_parse(o->url, &s->t, err, errlen) < 0) {
    *usage = 1;
    return -1;
  }
  snprintf(s->url, sizeof s->url, "%s", o->url);
  if (o->node && *o->node)
    snprintf(s->node, sizeof s->node, "%s", o->node);
  else if (gethostname(s->node, sizeof s->node - 1) < 0 || !s->node[0])
    snprintf(s->node, sizeof s->node, "node");
  if (!node_ok(s->node)) {
    snprintf(err, errlen,
             "--node %s: letters, digits, '-', '_' and '.' only (it names the cursor file)",
             s->node);
    *usage = 1;
    return -1;
  }
  if (s->o.batch == 0 || s->o.batch > 1000000) {
    snprintf(err, errlen, "--batch: from 1 to 1000000 records");
    *usage = 1;
    return -1;
  }
  struct stat sb;
  if (!o->dir || stat(o->dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    snprintf(err, errlen, "snapshot folder %s: %s", o->dir ? o->dir : "(none)",
             errno ? strerror(errno) : "not a directory");
    return -1;
  }
  snprintf(s->cursor_path, sizeof s->cursor_path, "%s/ship-%s.cursor", o->dir, s->node);
  if (cursor_read(s, err, errlen) < 0) return -1;
  /* a cursor from the start, so that retention holds what is not shipped yet */
  if (access(s->cursor_path, F_OK) != 0 && cursor_write(s, "", 0, err, errlen) < 0) return -1;
  if (ch_open(&s->t, o->timeout_ms, &s->c, err, errlen) < 0) return -1;
  /* the backlog: records past the cursor now */
  snapshot_reader *r;
  char rerr[SNAPSHOT_ERRLEN];
  if (snapshot_reader_open_at(o->dir, s->seg, s->recs, &r, rerr, sizeof rerr) < 0) {
    snprintf(err, errlen, "%s", rerr);
    return -1;
  }
  snapshot_rec rec;
  uint64_t n = 0;
  int k;
  while ((k = snapshot_reader_next(r, &rec)) == 1) n++;
  if (k < 0) snprintf(err, errlen, "%s", snapshot_reader_error(r));
  snapshot_reader_close(r);
  if (k < 0) return -1;
  atomic_store(&s->st.backlog0, n);
  return 0;
}

void shipper_stop(shipper *s) { atomic_store(&s->stop, 1); }
int shipper_stopping(const shipper *s) { return atomic_load(&s->stop); }
const ship_stats *shipper_stats(const shipper *s) { return &s->st; }

uint64_t shipper_lag_records(const shipper *s) {
  uint64_t shipped = atomic_load(&s->st.shipped), base = atomic_load(&s->st.backlog0);
  if (s->o.written) {
    uint64_t w = s->o.written(s->o.written_ud) + base;
    return w > shipped ? w - shipped : 0;
  }
  uint64_t p = atomic_load(&s->st.pending);
  return base > shipped ? (base - shipped > p ? base - shipped : p) : p;
}

double shipper_lag_seconds(const shipper *s) {
  int64_t oldest = atomic_load(&s->st.oldest_ns);
  if (!oldest) return 0;
  double d = (double)(clock_wall_ns() - oldest) / 1e9;
  return d > 0 ? d : 0;
}

void shipper_last_error(shipper *s, char *out, size_t cap) {
  pthread_mutex_lock(&s->mu);
  snprintf(out, cap, "%s", s->last_error);
  pthread_mutex_unlock(&s->mu);
}

void shipper_cursor(shipper *s, char *segment, size_t cap, uint64_t *records) {
  pthread_mutex_lock(&s->mu);
  snprintf(segment, cap, "%s", s->seg);
  *records = s->recs;
  pthread_mutex_unlock(&s->mu);
}

void shipper_status_json(shipper *s, json_buf *b) {
  char err[SHIP_ERRLEN], seg[256];
  uint64_t recs;
  shipper_last_error(s, err, sizeof err);
  shipper_cursor(s, seg, sizeof seg, &recs);
  json_buf_put(b, "{\"target\": ", 11);
  json_write_string(b, s->url, strlen(s->url));
  json_buf_put(b, ", \"node\": ", 10);
  json_write_string(b, s->node, strlen(s->node));
  json_buf_put(b, ", \"shipped\": ", 13);
  json_put_u64(b, atomic_load(&s->st.shipped));
  json_buf_put(b, ", \"batches\": ", 13);
  json_put_u64(b, atomic_load(&s->st.batches));
  json_buf_put(b, ", \"retries\": ", 13);
  json_put_u64(b, atomic_load(&s->st.retries));
  json_buf_put(b, ", \"versions\": ", 14);
  json_put_u64(b, atomic_load(&s->st.versions));
  json_buf_put(b, ", \"lag_records\": ", 17);
  json_put_u64(b, shipper_lag_records(s));
  json_buf_put(b, ", \"lag_seconds\": ", 17);
  json_write_double(b, shipper_lag_seconds(s));
  json_buf_put(b, ", \"failing\": ", 13);
  json_buf_put(b, atomic_load(&s->st.failing) ? "true" : "false",
               atomic_load(&s->st.failing) ? 4 : 5);
  json_buf_put(b, ", \"last_error\": ", 16);
  if (err[0])
    json_write_string(b, err, strlen(err));
  else
    json_buf_put(b, "null", 4);
  json_buf_put(b, ", \"cursor\": {\"segment\": ", 24);
  json_write_string(b, seg, strlen(seg));
  json_buf_put(b, ", \"records\": ", 13);
  json_put_u64(b, recs);
  json_buf_put(b, "}}", 2);
}

void shipper_free(shipper *s) {
  if (!s) return;
  if (s->c) against_close(s->c);
  for (size_t i = 0; i < s->nsent; i++) free(s->sent[i]);
  free(s->sent);
  json_buf_free(&s->rows);
  json_buf_free(&s->gz);
  arena_free(&s->a);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* Sleeps ms, or less when stopped. 1 when stopped. */
static int nap(shipper *s, uint32_t ms) {
  for (uint32_t slept = 0; slept < ms; slept += 20) {
    if (atomic_load(&s->stop)) return 1;
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return atomic_load(&s->stop);
}

/* Sends body until ClickHouse takes it, with backoff. 0 taken, 1 stopped. */
static int send_until_taken(shipper *s, const char *query, const char *body, size_t len) {
  uint32_t backoff = 100;
  for (;;) {
    char err[SHIP_ERRLEN];
    if (ch_post(s->c, &s->t, query, body, len, 1, NULL, err, sizeof err) == 0) {
      if (atomic_exchange(&s->st.failing, 0) && s->o.log)
        s->o.log(s->o.log_ud, "info", "ship_recovered", "ClickHouse takes the snapshots again");
      return 0;
    }
    atomic_fetch_add(&s->st.retries, 1);
    if (!atomic_exchange(&s->st.failing, 1) && s->o.log)
      s->o.log(s->o.log_ud, "error", "ship_failed", err);
    set_error(s, err);
    if (!s->o.quiet) fprintf(stderr, "verdict ship: %s (retrying in %u ms)\n", err, backoff);
    if (nap(s, backoff)) return 1;
    backoff = backoff >= 2500 ? 5000 : backoff * 2;
  }
}

static int was_sent(shipper *s, const char *name) {
  for (size_t i = 0; i < s->nsent; i++)
    if (strcmp(s->sent[i], name) == 0) return 1;
  return 0;
}

/* Version files under versions/ (top level and models/) not sent yet, as
 * JSONEachRow rows into b; their names into *names. */
static void collect_versions(shipper *s, const char *sub, json_buf *b, char ***names, size_t *n) {
  char *vdir = snapshot_versions_path(s->o.dir);
  if (!vdir) return;
  char path[4096];
  snprintf(path, sizeof path, "%s%s%s", vdir, *sub ? "/" : "", sub);
  DIR *d = opendir(path);
  if (!d) {
    free(vdir);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t ln = strlen(e->d_name);
    const char *kind = NULL;
    if (ln > 14 && strcmp(e->d_name + ln - 14, ".features.yaml") == 0)
      kind = "features";
    else if (ln > 5 && strcmp(e->d_name + ln - 5, ".json") == 0)
      kind = *sub ? "model" : "policy";
    if (!kind || e->d_name[0] == '.') continue;
    char name[512];
    snprintf(name, sizeof name, "%s%s%s", sub, *sub ? "/" : "", e->d_name);
    if (was_sent(s, name)) continue;
    char file[4700];
    snprintf(file, sizeof file, "%s/%s", path, e->d_name);
    FILE *f = fopen(file, "rb");
    if (!f) continue;
    json_buf text;
    json_buf_init(&text, NULL);
    char chunk[8192];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) json_buf_put(&text, chunk, k);
    fclose(f);
    json_buf_put(b, "{\"name\": ", 9);
    json_write_string(b, name, strlen(name));
    json_buf_put(b, ", \"kind\": ", 10);
    json_write_string(b, kind, strlen(kind));
    json_buf_put(b, ", \"text\": ", 10);
    json_write_string(b, text.data ? text.data : "", text.len);
    json_buf_put(b, "}\n", 2);
    json_buf_free(&text);
    char **nn = realloc(*names, (*n + 1) * sizeof *nn);
    if (!nn) break;
    *names = nn;
    nn[(*n)++] = strdup(name);
  }
  closedir(d);
  free(vdir);
}

/* Sends the version files not sent yet. 0, or 1 stopped. */
static int ship_versions(shipper *s) {
  json_buf b;
  json_buf_init(&b, NULL);
  char **names = NULL;
  size_t n = 0;
  collect_versions(s, "", &b, &names, &n);
  collect_versions(s, "models", &b, &names, &n);
  int rc = 0;
  if (n) {
    char q[400];
    snprintf(q, sizeof q, "INSERT INTO %s.%s_versions FORMAT JSONEachRow", s->t.db, s->t.table);
    if (gzip_into(b.data, b.len, &s->gz) < 0 ||
        (rc = send_until_taken(s, q, s->gz.data, s->gz.len)) != 0) {
      for (size_t i = 0; i < n; i++) free(names[i]);
      free(names);
      json_buf_free(&b);
      return 1;
    }
    for (size_t i = 0; i < n; i++) {
      if (s->nsent == s->capsent) {
        size_t cap = s->capsent ? s->capsent * 2 : 16;
        char **ns = realloc(s->sent, cap * sizeof *ns);
        if (!ns) {
          free(names[i]);
          continue;
        }
        s->sent = ns;
        s->capsent = cap;
      }
      s->sent[s->nsent++] = names[i];
    }
    atomic_fetch_add(&s->st.versions, n);
  }
  free(names);
  json_buf_free(&b);
  return rc;
}

static const value *field(const value *m, const char *k) {
  return m && m->kind == V_MAP ? value_map_get(m, k, strlen(k)) : NULL;
}

static void put_str_field(json_buf *b, const char *key, const char *s, size_t n) {
  json_buf_put(b, ", \"", 3);
  json_buf_put(b, key, strlen(key));
  json_buf_put(b, "\": ", 3);
  json_write_string(b, s ? s : "", s ? n : 0);
}

static void put_value_str(json_buf *b, const char *key, const value *v) {
  if (v && v->kind == V_STRING)
    put_str_field(b, key, v->s, v->n);
  else
    put_str_field(b, key, "", 0);
}

/* One record as a JSONEachRow line. */
static void row(shipper *s, const snapshot_rec *r, json_buf *b) {
  char id[SNAPSHOT_ID_TEXT];
  snapshot_id_format(r->id, id);
  arena_reset(&s->a);
  value p = {.kind = V_NULL};
  json_opts jo = {.lenient = 1};
  if (json_parse(&s->a, r->payload, r->payload_len, &jo, &p, NULL) != 0) p.kind = V_NULL;
  json_buf_put(b, "{\"id\": \"", 8);
  json_buf_put(b, id, 36);
  json_buf_put(b, "\", \"time\": ", 11);
  json_put_u64(b, (uint64_t)(r->time_ns / 1000000000));
  json_buf_put(b, ", \"time_ns\": ", 13);
  json_put_u64(b, (uint64_t)r->time_ns);
  put_str_field(b, "node", s->node, strlen(s->node));
  put_str_field(b, "point", r->point, r->point_len);
  put_value_str(b, "strategy", field(&p, "strategy"));
  put_str_field(b, "action", r->action, r->action_len);
  json_buf_put(b, ", \"allowed\": ", 13);
  json_put_u64(b, r->allowed);
  const char *src = snapshot_source_name(r->source);
  put_str_field(b, "source", src ? src : "", src ? strlen(src) : 0);
  put_value_str(b, "rule", field(field(&p, "reason"), "rule"));
  json_buf_put(b, ", \"confidence\": ", 16);
  json_write_double(b, (double)r->confidence);
  const value *tot = field(field(&p, "latency_ns"), "total");
  double lat = !tot                    ? 0
               : tot->kind == V_INT    ? (double)tot->i / 1000.0
               : tot->kind == V_UINT   ? (double)tot->u / 1000.0
               : tot->kind == V_DOUBLE ? tot->d / 1000.0
                                       : 0;
  json_buf_put(b, ", \"latency_us\": ", 16);
  json_write_double(b, lat);
  json_buf_put(b, ", \"review\": ", 12);
  json_put_u64(b, r->review);
  put_str_field(b, "policy_version", r->policy_version, r->policy_version_len);
  put_value_str(b, "model_version", field(&p, "model_version"));
  put_str_field(b, "snapshot", r->payload, r->payload_len);
  json_buf_put(b, "}\n", 2);
}

int shipper_run(shipper *s, char *err, size_t errlen) {
  char q[400];
  snprintf(q, sizeof q, "INSERT INTO %s.%s FORMAT JSONEachRow", s->t.db, s->t.table);
  snapshot_reader *r = NULL;
  int rc = 0;
  while (!atomic_load(&s->stop)) {
    char rerr[SNAPSHOT_ERRLEN];
    if (!r && snapshot_reader_open_at(s->o.dir, s->seg, s->recs, &r, rerr, sizeof rerr) < 0) {
      snprintf(err, errlen, "%s", rerr);
      rc = -1;
      break;
    }
    s->rows.len = 0;
    uint32_t n = 0;
    char seg[256] = "";
    uint64_t recs = 0;
    int k = 0;
    snapshot_rec rec;
    while (n < s->o.batch && (k = snapshot_reader_next(r, &rec)) == 1) {
      if (n == 0) atomic_store(&s->st.oldest_ns, rec.time_ns ? rec.time_ns : 1);
      row(s, &rec, &s->rows);
      const char *sg;
      snapshot_reader_position(r, &sg, &recs);
      snprintf(seg, sizeof seg, "%s", sg);
      n++;
      atomic_store(&s->st.pending, n);
    }
    if (k < 0) {
      snprintf(err, errlen, "%s", snapshot_reader_error(r));
      rc = -1;
      break;
    }
    if (s->rows.oom) {
      snprintf(err, errlen, "out of memory building a batch");
      rc = -1;
      break;
    }
    if (n == 0) {
      /* the end of the folder: look again later from the cursor */
      snapshot_reader_close(r);
      r = NULL;
      atomic_store(&s->st.caught_up, 1);
      atomic_store(&s->st.oldest_ns, 0);
      if (s->o.once || nap(s, s->o.poll_ms)) break;
      continue;
    }
    atomic_store(&s->st.caught_up, 0);
    /* versions first: every record just read had its versions written before it */
    if (ship_versions(s)) break;
    if (gzip_into(s->rows.data, s->rows.len, &s->gz) < 0) {
      snprintf(err, errlen, "out of memory compressing a batch");
      rc = -1;
      break;
    }
    if (send_until_taken(s, q, s->gz.data, s->gz.len)) break;
    if (k == 0) { /* read to the end: the next look starts again from the cursor */
      snapshot_reader_close(r);
      r = NULL;
    }
    if (cursor_write(s, seg, recs, err, errlen) < 0) {
      rc = -1;
      break;
    }
    atomic_fetch_add(&s->st.shipped, n);
    atomic_fetch_add(&s->st.batches, 1);
    atomic_store(&s->st.pending, 0);
    atomic_store(&s->st.oldest_ns, 0);
    atomic_store(&s->st.last_ok_ns, clock_wall_ns());
    if (!s->o.quiet)
      fprintf(stderr, "verdict ship: %u records to %s.%s (cursor %s +%llu)\n", n, s->t.db,
              s->t.table, seg, (unsigned long long)recs);
  }
  snapshot_reader_close(r);
  return rc;
}
