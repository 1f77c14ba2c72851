/* admin.c — the policy endpoints and the admin token.
 *
 * GET /v1/policies (read-only, open like /metrics): the live bundle's
 * version and strategies, and the versions kept in the version store.
 * POST /v1/policies/reload (admin): compiles the bundle folder again and
 * swaps it in; a bundle that fails to compile is refused with its
 * diagnostics as JSON (file, line, column) and the old one keeps serving.
 *
 * Admin endpoints need `Authorization: Bearer <token>`, the token read at
 * start from --admin-token-file or $VERDICT_ADMIN_TOKEN. With neither, they
 * answer 403 admin_disabled: disabled, never open. The comparison takes the
 * same time whatever the token sent; the token is never logged or echoed.
 * The token also opens recorded decisions to a client elsewhere under
 * --snapshot-reads local (the default), and to anyone at all under admin:
 * snapshot_read_refusal and snapshot_read_check (used by routes.c and
 * mcp_http.c).
 *
 * Not here: users, roles or more than one token; TLS (the token crosses the
 * wire in clear unless a proxy in front adds it). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "engine/service.h"
#include "server/internal.h"

#define PUT_LIT(b, s) json_buf_put((b), (s), sizeof(s) - 1)

int admin_token_load(server *s, const char *file, char *why, size_t whylen) {
  char *tok = NULL;
  size_t n = 0;
  if (file) {
    FILE *f = fopen(file, "r");
    if (!f) {
      snprintf(why, whylen, "--admin-token-file %s: %s", file, strerror(errno));
      return -1;
    }
    char buf[4097];
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (n == sizeof buf) {
      snprintf(why, whylen, "--admin-token-file %s: the token is longer than 4096 bytes", file);
      return -1;
    }
    buf[n] = '\0';
    tok = strdup(buf);
  } else {
    const char *env = getenv("VERDICT_ADMIN_TOKEN");
    if (!env || !*env) return 0; /* admin disabled */
    tok = strdup(env);
  }
  if (!tok) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  n = strlen(tok);
  while (n && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' ' || tok[n - 1] == '\t'))
    tok[--n] = '\0';
  if (n < 16) {
    free(tok);
    snprintf(why, whylen,
             "the admin token (%s) must be at least 16 characters; make one with "
             "`head -c 24 /dev/urandom | base64`",
             file ? "--admin-token-file" : "VERDICT_ADMIN_TOKEN");
    return -1;
  }
  s->admin_token = tok;
  s->admin_token_len = n;
  return 0;
}

/* Equal in time that depends only on the length of the token configured. */
static int token_equal(const char *want, size_t wn, const char *got, size_t gn) {
  unsigned char diff = (unsigned char)(wn != gn);
  for (size_t i = 0; i < wn; i++) diff |= (unsigned char)(want[i] ^ (i < gn ? got[i] : 0));
  return diff == 0;
}

int admin_token_sent(const server *s, const http_request *r) {
  if (!s->admin_token) return 0;
  size_t n = 0;
  const char *v = http_header_get(r, "authorization", &n);
  if (!v || n <= 7 || strncasecmp(v, "Bearer ", 7) != 0) return 0;
  v += 7;
  n -= 7;
  while (n && *v == ' ') v++, n--;
  return token_equal(s->admin_token, s->admin_token_len, v, n);
}

int admin_check(conn *c, const http_request *r) {
  server *s = conn_worker(c)->srv;
  if (!s->admin_token) {
    conn_respond_error(c, 403, "admin_disabled",
                       "admin endpoints are disabled: start the server with --admin-token-file "
                       "FILE or VERDICT_ADMIN_TOKEN set to enable them",
                       NULL);
    return -1;
  }
  if (admin_token_sent(s, r)) return 0;
  json_buf b;
  json_buf_init(&b, NULL);
  PUT_LIT(&b,
          "{\"error\":{\"code\":\"unauthorized\",\"message\":\"this endpoint needs "
          "Authorization: Bearer <the admin token>\",\"path\":null}}\n");
  conn_respond(c, 401, "application/json", "WWW-Authenticate: Bearer realm=\"verdict\"\r\n", b.data,
               b.len);
  json_buf_free(&b);
  return -1;
}

/* ---- who may read a recorded decision ---- */
/* The connection's peer is on a loopback address: 127.0.0.0/8, ::1, or
 * 127.0.0.0/8 mapped into IPv6 (a client of a [::] socket). */
static int peer_is_loopback(conn *c) {
  char text[64];
  conn_peer(c, text, sizeof text);
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, text, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, text, &a6) != 1) return 0;
  if (IN6_IS_ADDR_LOOPBACK(&a6)) return 1;
  return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
}

const char *snapshot_read_refusal(conn *c, const http_request *r) {
  server *s = conn_worker(c)->srv;
  switch (s->snapshot_reads) {
    case SERVER_SNAPSHOT_READS_OPEN:
      return NULL;
    case SERVER_SNAPSHOT_READS_ADMIN:
      return admin_token_sent(s, r) ? NULL
                                    : "reading a recorded decision needs the admin token on "
                                      "this server (--snapshot-reads admin): send "
                                      "Authorization: Bearer <the admin token>";
    default:
      if (peer_is_loopback(c) || admin_token_sent(s, r)) return NULL;
      return s->admin_token
                 ? "reading a recorded decision from another host needs the admin token "
                   "(--snapshot-reads local, the default): send Authorization: Bearer <the "
                   "admin token>"
                 : "recorded decisions can be read from this host only (--snapshot-reads "
                   "local, the default): read them on the host, or start the server with "
                   "--admin-token-file FILE and send the token";
  }
}

int snapshot_read_check(conn *c, const http_request *r) {
  server *s = conn_worker(c)->srv;
  const char *why = snapshot_read_refusal(c, r);
  if (!why) return 0;
  if (s->snapshot_reads == SERVER_SNAPSHOT_READS_ADMIN) return admin_check(c, r);
  if (!s->admin_token) {
    conn_respond_error(c, 403, "snapshot_reads", why, NULL);
    return -1;
  }
  json_buf b;
  json_buf_init(&b, NULL);
  PUT_LIT(&b, "{\"error\":{\"code\":\"unauthorized\",\"message\":");
  json_write_string(&b, why, strlen(why));
  PUT_LIT(&b, ",\"path\":null}}\n");
  conn_respond(c, 401, "application/json", "WWW-Authenticate: Bearer realm=\"verdict\"\r\n", b.data,
               b.len);
  json_buf_free(&b);
  return -1;
}

/* ---- GET /v1/policies ----
 * Paths are the host's business: shown relative to the bundle folder, and a
 * path outside it (a store elsewhere) in full only to a request with the
 * admin token, else as "[redacted]". */
typedef struct policies_view {
  json_buf *b;
  const char *dir; /* the bundle folder, as given */
  int full;        /* the admin token was sent */
} policies_view;

static void put_path(const policies_view *v, const char *path) {
  size_t dn = strlen(v->dir);
  while (dn > 1 && v->dir[dn - 1] == '/') dn--;
  if (strncmp(path, v->dir, dn) == 0 && path[dn] == '/') {
    const char *rel = path + dn;
    while (*rel == '/') rel++;
    json_write_string(v->b, rel, strlen(rel));
  } else if (v->full) {
    json_write_string(v->b, path, strlen(path));
  } else {
    PUT_LIT(v->b, "\"[redacted]\"");
  }
}

/* The live bundle as described by the engine (a copy: a reload meanwhile
 * changes nothing here). */
static void put_live(const policies_view *v, const vd_bundle *bn) {
  json_buf *b = v->b;
  const char *ver = vd_bundle_version(bn);
  PUT_LIT(b, "{\"version\":");
  json_write_string(b, ver, strlen(ver));
  PUT_LIT(b, ",\"strategies\":[");
  unsigned ns = vd_bundle_strategy_count(bn);
  for (unsigned i = 0; i < ns; i++) {
    vd_strategy_info st;
    if (vd_bundle_strategy(bn, i, &st) != 0) break;
    if (i) json_buf_putc(b, ',');
    PUT_LIT(b, "{\"name\":");
    json_write_string(b, st.name, strlen(st.name));
    PUT_LIT(b, ",\"version\":");
    json_write_string(b, st.version, strlen(st.version));
    PUT_LIT(b, ",\"file\":");
    if (st.file)
      put_path(v, st.file);
    else
      PUT_LIT(b, "null");
    PUT_LIT(b, ",\"decision_points\":[");
    for (unsigned k = 0; k < st.ndecision_points; k++) {
      if (k) json_buf_putc(b, ',');
      json_write_string(b, st.decision_points[k], strlen(st.decision_points[k]));
    }
    char num[64];
    int n = snprintf(num, sizeof num, "],\"rules\":%u}", st.nrules);
    json_buf_put(b, num, (size_t)n);
  }
  PUT_LIT(b, "]}");
}

#define KEPT_MAX 1000

void route_policies(conn *c, const http_request *r) {
  server *s = conn_worker(c)->srv;
  json_buf b;
  json_buf_init(&b, NULL);
  policies_view view = {&b, s->opts->policy_dir, admin_token_sent(s, r)};
  vd_bundle *live;
  vd_error err;
  if (vd_engine_bundle(s->engine, &live, &err) != 0) {
    json_buf_free(&b);
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory listing the policies", NULL);
    return;
  }
  PUT_LIT(&b, "{\"live\":");
  put_live(&view, live);
  vd_bundle_free(live);
  char num[128];
  int n = snprintf(num, sizeof num, ",\"reloads\":%llu,\"reload_failures\":%llu,\"store\":",
                   (unsigned long long)atomic_load(&s->reloads),
                   (unsigned long long)atomic_load(&s->reload_failures));
  json_buf_put(&b, num, (size_t)n);
  if (!s->store_dir) {
    PUT_LIT(&b, "null,\"kept\":[]}\n");
  } else {
    put_path(&view, s->store_dir);
    PUT_LIT(&b, ",\"kept\":[");
    service_kept *list = NULL;
    size_t nk = 0, total = 0;
    service_versions_kept(s->store_dir, KEPT_MAX, &list, &nk, &total);
    for (size_t i = 0; i < nk; i++) {
      if (i) json_buf_putc(&b, ',');
      PUT_LIT(&b, "{\"version\":");
      json_write_string(&b, list[i].version, 64);
      PUT_LIT(&b, ",\"strategy\":");
      if (list[i].strategy)
        json_write_string(&b, list[i].strategy, strlen(list[i].strategy));
      else
        PUT_LIT(&b, "null");
      struct tm tm;
      time_t t = (time_t)list[i].stored;
      gmtime_r(&t, &tm);
      char ts[40];
      strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
      n = snprintf(num, sizeof num, ",\"stored\":\"%s\",\"bytes\":%lld}", ts, list[i].bytes);
      json_buf_put(&b, num, (size_t)n);
    }
    service_kept_free(list, nk);
    n = snprintf(num, sizeof num, "],\"kept_total\":%zu}\n", total);
    json_buf_put(&b, num, (size_t)n);
  }
  if (b.oom)
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory listing the policies", NULL);
  else
    conn_respond(c, 200, "application/json", NULL, b.data, b.len);
  json_buf_free(&b);
}

/* ---- POST /v1/policies/reload ---- */
/* The diagnostics of the bundle on disk, as a JSON array: compiled once more
 * (storing nothing) to have them one by one rather than as one message. */
typedef struct diag_list {
  json_buf *b;
  int first;
} diag_list;

static void put_diagnostic(void *ud, const service_diag *g) {
  diag_list *l = ud;
  json_buf *b = l->b;
  if (!l->first) json_buf_putc(b, ',');
  l->first = 0;
  PUT_LIT(b, "{\"severity\":");
  if (g->warning)
    PUT_LIT(b, "\"warning\"");
  else
    PUT_LIT(b, "\"error\"");
  PUT_LIT(b, ",\"file\":");
  json_write_string(b, g->file, strlen(g->file));
  char num[64];
  int n = snprintf(num, sizeof num, ",\"line\":%d,\"column\":%d,\"key\":", g->line, g->column);
  json_buf_put(b, num, (size_t)n);
  json_write_string(b, g->key, strlen(g->key));
  PUT_LIT(b, ",\"message\":");
  json_write_string(b, g->message, strlen(g->message));
  json_buf_putc(b, '}');
}

static void put_diagnostics(json_buf *b, const char *dir) {
  diag_list l = {b, 1};
  json_buf_putc(b, '[');
  service_bundle_diagnostics(dir, put_diagnostic, &l);
  json_buf_putc(b, ']');
}

void route_reload(conn *c, const http_request *r) {
  if (admin_check(c, r)) return;
  server *s = conn_worker(c)->srv;
  vd_error err;
  char before[65], after[65];
  uint64_t t0 = uv_hrtime();
  int rc = server_reload(s, "http", &err, before, after);
  double ms = (double)(uv_hrtime() - t0) / 1e6;
  json_buf b;
  json_buf_init(&b, NULL);
  int status = 200;
  if (rc != 0) {
    status = rc == VD_EPOLICY ? 422 : 500;
    PUT_LIT(&b, "{\"error\":{\"code\":");
    /* a bundle that does not compile is the policy error; anything else
     * failed the reload itself (the old bundle keeps serving either way) */
    const char *code = rc == VD_EPOLICY ? vd_err_name(VD_EPOLICY) : "reload";
    json_write_string(&b, code, strlen(code));
    PUT_LIT(&b, ",\"message\":");
    json_write_string(&b, err.message, strlen(err.message));
    PUT_LIT(&b, ",\"path\":null,\"policy_version\":");
    json_write_string(&b, before, strlen(before));
    PUT_LIT(&b, ",\"diagnostics\":");
    if (rc == VD_EPOLICY)
      put_diagnostics(&b, s->opts->policy_dir);
    else
      PUT_LIT(&b, "[]");
    PUT_LIT(&b, "}}\n");
  } else {
    PUT_LIT(&b, "{\"reloaded\":true,\"changed\":");
    if (strcmp(before, after) != 0)
      PUT_LIT(&b, "true");
    else
      PUT_LIT(&b, "false");
    PUT_LIT(&b, ",\"policy_version\":");
    json_write_string(&b, after, strlen(after));
    PUT_LIT(&b, ",\"previous_version\":");
    json_write_string(&b, before, strlen(before));
    char num[64];
    int n = snprintf(num, sizeof num, ",\"ms\":%.3f}\n", ms);
    json_buf_put(&b, num, (size_t)n);
  }
  if (b.oom)
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory writing the answer", NULL);
  else
    conn_respond(c, status, "application/json", NULL, b.data, b.len);
  json_buf_free(&b);
}
