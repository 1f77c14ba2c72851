/* authz.c — GET|POST /v1/authz, for nginx `auth_request` (and proxies with
 * the same idea: Traefik ForwardAuth, Envoy ext_authz over HTTP). The proxy
 * asks before passing a request on; we build a decide request from the
 * original request as the proxy describes it in headers, decide, and answer
 * 200 (pass it on), 401 (an ask/challenge/review action: the proxy can send
 * the client to a challenge) or 403 (block), with X-Verdict-Action and
 * X-Verdict-Snapshot headers the proxy can copy onto its own answer.
 *
 * Which header becomes which context field is docs/nginx.md's table; in
 * short: method, uri, path, query, host, scheme, client_ip, headers (every
 * other header, names in lower case), env (X-Verdict-Env-* headers), and the
 * decision point from X-Verdict-Point or ?point=, default http_request.
 * Credentials the proxy copies from the original request (Authorization,
 * Proxy-Authorization, Cookie, X-Api-Key and the like by default:
 * --authz-redact) reach the rules as "[redacted]": a rule can see that one
 * was sent, the snapshot log never holds the secret. The same goes for
 * credentials in URLs — the original URI's and those in header values
 * (Referer): a user:password@ always, and query parameters named like
 * credentials (token, password, sig, ...: --authz-redact-query).
 *
 * The request is built as JSON text and decided by vd_decide_json, so the
 * snapshot records exactly what the rules saw and replay works as for any
 * other decision. Not here: reading the original body (auth_request sends
 * none), percent-decoding the path (rules see it raw, as sent, which is what
 * probe and traversal rules want). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "server/internal.h"

#define PUT_LIT(b, s) json_buf_put((b), (s), sizeof(s) - 1)

static const char *first_of(const http_request *r, const char *const *names, size_t *len) {
  for (; *names; names++) {
    const char *v = http_header_get(r, *names, len);
    if (v && *len) return v;
  }
  return NULL;
}

static int hexdigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int starts_with_ci(const char *s, size_t n, const char *p) {
  size_t pn = strlen(p);
  return n >= pn && strncasecmp(s, p, pn) == 0;
}

/* Headers that describe the transport or carry our own parameters: not
 * passed to the rules as `headers`. */
static int skipped_header(const char *name, size_t n) {
  static const char *const exact[] = {
      "connection", "content-length",     "transfer-encoding", "keep-alive",
      "x-real-ip",  "x-forwarded-method", "x-forwarded-uri",   NULL};
  for (int i = 0; exact[i]; i++)
    if (n == strlen(exact[i]) && strncasecmp(name, exact[i], n) == 0) return 1;
  return starts_with_ci(name, n, "x-original-") || starts_with_ci(name, n, "x-verdict-");
}

/* Whether the proxy's header `name` is in the --authz-redact list. */
static int redacted_header(const char *list, const char *name, size_t n) {
  if (!list) return 0;
  while (*list) {
    const char *comma = strchr(list, ',');
    size_t len = comma ? (size_t)(comma - list) : strlen(list);
    const char *item = list;
    size_t in = len;
    while (in && (*item == ' ' || *item == '\t')) item++, in--;
    while (in && (item[in - 1] == ' ' || item[in - 1] == '\t')) in--;
    if (in == n && n && strncasecmp(item, name, n) == 0) return 1;
    if (!comma) break;
    list = comma + 1;
  }
  return 0;
}

/* Whether a query parameter's name (raw, as in the URL) is in the
 * --authz-redact-query list: any case, '-' as '_', %XX decoded; an item
 * "*x" matches every name that ends in x. */
static int redacted_param(const char *list, const char *name, size_t n) {
  if (!list || !*list || !n) return 0;
  char dec[128];
  size_t dn = 0;
  for (size_t i = 0; i < n && dn < sizeof dec; i++) {
    unsigned char ch = (unsigned char)name[i];
    if (ch == '%' && i + 2 < n) {
      int hi = hexdigit(name[i + 1]), lo = hexdigit(name[i + 2]);
      if (hi >= 0 && lo >= 0) {
        ch = (unsigned char)(hi << 4 | lo);
        i += 2;
      }
    } else if (ch == '+') {
      ch = ' ';
    }
    if (ch >= 'A' && ch <= 'Z') ch = (unsigned char)(ch - 'A' + 'a');
    if (ch == '-') ch = '_';
    dec[dn++] = (char)ch;
  }
  if (dn == sizeof dec) return 0; /* longer than any name in a list */
  while (*list) {
    const char *comma = strchr(list, ',');
    size_t len = comma ? (size_t)(comma - list) : strlen(list);
    const char *item = list;
    while (len && (*item == ' ' || *item == '\t')) item++, len--;
    while (len && (item[len - 1] == ' ' || item[len - 1] == '\t')) len--;
    int suffix = len && *item == '*';
    if (suffix) item++, len--;
    if (len && (suffix ? dn >= len : dn == len)) {
      size_t at = suffix ? dn - len : 0, k = 0;
      for (; k < len; k++) {
        char c = item[k];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c == '-') c = '_';
        if (dec[at + k] != c) break;
      }
      if (k == len) return 1;
    }
    if (!comma) break;
    list = comma + 1;
  }
  return 0;
}

/* u[0..n) with its credentials masked, into out: the user:password@ of an
 * absolute URL ("https://[redacted]@host/…") and the values of query
 * parameters in the --authz-redact-query list ("?token=[redacted]&page=2").
 * Everything else is kept byte for byte, as rules want the raw form. With
 * absolute_only, text that is not an absolute URL (a header value such as a
 * user agent) is kept whole. Returns 1 if anything was masked. */
static int put_clean_url(json_buf *out, const char *list, const char *u, size_t n,
                         int absolute_only) {
  int masked = 0, absolute = 0;
  size_t i = 0;
  /* scheme "://" authority: the userinfo is up to the authority's last '@' */
  size_t s = 0;
  while (s < n &&
         ((u[s] >= 'a' && u[s] <= 'z') || (u[s] >= 'A' && u[s] <= 'Z') ||
          (s && ((u[s] >= '0' && u[s] <= '9') || u[s] == '+' || u[s] == '-' || u[s] == '.'))))
    s++;
  if (s && s + 3 <= n && memcmp(u + s, "://", 3) == 0) {
    absolute = 1;
    size_t a = s + 3, end = a, at = 0;
    while (end < n && u[end] != '/' && u[end] != '?' && u[end] != '#') {
      if (u[end] == '@') at = end;
      end++;
    }
    if (at) {
      json_buf_put(out, u, a);
      json_buf_put(out, "[redacted]", 10);
      i = at; /* the '@' and what follows */
      masked = 1;
    }
  }
  const char *q = memchr(u + i, '?', n - i);
  if (!q || (absolute_only && !absolute)) {
    json_buf_put(out, u + i, n - i);
    return masked;
  }
  size_t qs = (size_t)(q - u) + 1;
  json_buf_put(out, u + i, qs - i);
  const char *hash = memchr(u + qs, '#', n - qs);
  size_t qe = hash ? (size_t)(hash - u) : n;
  for (size_t p = qs; p < qe;) {
    const char *amp = memchr(u + p, '&', qe - p);
    size_t pe = amp ? (size_t)(amp - u) : qe;
    const char *eq = memchr(u + p, '=', pe - p);
    size_t ne = eq ? (size_t)(eq - u) : pe;
    if (eq && pe > ne + 1 && redacted_param(list, u + p, ne - p)) {
      json_buf_put(out, u + p, ne + 1 - p);
      json_buf_put(out, "[redacted]", 10);
      masked = 1;
    } else {
      json_buf_put(out, u + p, pe - p);
    }
    if (amp) json_buf_putc(out, '&');
    p = pe + 1;
  }
  if (hash) json_buf_put(out, u + qe, n - qe);
  return masked;
}

static void put_lower_key(json_buf *b, const char *s, size_t n, int underscores) {
  char tmp[256];
  if (n > sizeof tmp) n = sizeof tmp;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
    if (underscores && ch == '-') ch = '_';
    tmp[i] = ch;
  }
  json_write_string(b, tmp, n);
}

/* A header value safe to send back: printable ASCII only. */
static void put_header(char *out, size_t cap, size_t *at, const char *name, const char *v) {
  if (!v) return;
  int k = snprintf(out + *at, cap - *at, "%s: ", name);
  if (k < 0 || (size_t)k >= cap - *at) return;
  size_t i = *at + (size_t)k;
  for (; *v && i + 3 < cap; v++) out[i++] = (*v >= 32 && *v < 127) ? *v : ' ';
  if (i + 2 >= cap) return;
  out[i++] = '\r';
  out[i++] = '\n';
  out[i] = '\0';
  *at = i;
}

void route_authz(conn *c, const http_request *r) {
  worker *w = conn_worker(c);
  static const char *const uri_h[] = {"x-original-uri", "x-forwarded-uri", NULL};
  static const char *const method_h[] = {"x-original-method", "x-forwarded-method", NULL};
  static const char *const host_h[] = {"x-original-host", "x-forwarded-host", "host", NULL};
  static const char *const scheme_h[] = {"x-original-scheme", "x-forwarded-proto", NULL};
  size_t ulen, mlen = 0, hlen = 0, slen = 0, plen = 0, klen = 0, iplen = 0;
  const char *uri = first_of(r, uri_h, &ulen);
  if (!uri) {
    metrics_count_refused(&w->m);
    stats_count_refused(&w->st);
    conn_respond_error(c, 400, vd_err_name(VD_EREQUEST),
                       "/v1/authz needs the original request's URI in X-Original-URI (nginx: "
                       "proxy_set_header X-Original-URI $request_uri; see docs/nginx.md)",
                       NULL);
    return;
  }
  const char *method = first_of(r, method_h, &mlen);
  if (!method) {
    method = llhttp_method_name(r->method);
    mlen = strlen(method);
  }
  const char *host = first_of(r, host_h, &hlen);
  const char *scheme = first_of(r, scheme_h, &slen);
  const char *point = http_header_get(r, "x-verdict-point", &plen);
  if (!point || !plen) point = http_query_param(r, "point", &plen);
  if (!point || !plen) {
    point = "http_request";
    plen = strlen(point);
  }
  const char *key = http_header_get(r, "x-verdict-key", &klen);
  /* The client: X-Real-IP, else the first X-Forwarded-For hop, else the peer. */
  char peer[64];
  const char *ip = http_header_get(r, "x-real-ip", &iplen);
  if (!ip || !iplen) {
    ip = http_header_get(r, "x-forwarded-for", &iplen);
    if (ip) {
      const char *comma = memchr(ip, ',', iplen);
      if (comma) iplen = (size_t)(comma - ip);
      while (iplen && (*ip == ' ' || *ip == '\t')) ip++, iplen--;
      while (iplen && (ip[iplen - 1] == ' ' || ip[iplen - 1] == '\t')) iplen--;
    }
  }
  if (!ip || !iplen) {
    conn_peer(c, peer, sizeof peer);
    ip = peer;
    iplen = strlen(peer);
  }
  /* the URI with its credentials masked: uri, path and query come from it */
  json_buf clean;
  json_buf_init(&clean, NULL);
  put_clean_url(&clean, w->srv->opts->authz_redact_query, uri, ulen, 0);
  if (clean.oom) {
    json_buf_free(&clean);
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory building the authz request",
                       NULL);
    return;
  }
  uri = clean.data ? clean.data : "";
  ulen = clean.len;
  const char *q = memchr(uri, '?', ulen);
  size_t pathlen = q ? (size_t)(q - uri) : ulen;

  json_buf b;
  json_buf_init(&b, NULL);
  PUT_LIT(&b, "{\"action\":");
  json_write_string(&b, point, plen);
  PUT_LIT(&b, ",\"key\":");
  json_write_string(&b, key ? key : "", key ? klen : 0);
  PUT_LIT(&b, ",\"context\":{\"method\":");
  json_write_string(&b, method, mlen);
  PUT_LIT(&b, ",\"uri\":");
  json_write_string(&b, uri, ulen);
  PUT_LIT(&b, ",\"path\":");
  json_write_string(&b, uri, pathlen);
  PUT_LIT(&b, ",\"query\":");
  json_write_string(&b, q ? q + 1 : "", q ? ulen - pathlen - 1 : 0);
  PUT_LIT(&b, ",\"host\":");
  json_write_string(&b, host ? host : "", host ? hlen : 0);
  PUT_LIT(&b, ",\"scheme\":");
  json_write_string(&b, scheme ? scheme : "http", scheme ? slen : 4);
  PUT_LIT(&b, ",\"client_ip\":");
  json_write_string(&b, ip, iplen);
  /* headers: each name once (lower case); repeats joined with ", ". */
  PUT_LIT(&b, ",\"headers\":{");
  int first = 1;
  for (unsigned i = 0; i < r->nheaders; i++) {
    const http_header *h = &r->headers[i];
    const char *name = r->htext + h->name;
    if (skipped_header(name, h->name_len)) continue;
    int dup = 0;
    for (unsigned j = 0; j < i && !dup; j++)
      dup = r->headers[j].name_len == h->name_len &&
            strncasecmp(r->htext + r->headers[j].name, name, h->name_len) == 0;
    if (dup) continue;
    if (!first) json_buf_putc(&b, ',');
    first = 0;
    put_lower_key(&b, name, h->name_len, 0);
    json_buf_putc(&b, ':');
    if (redacted_header(w->srv->opts->authz_redact, name, h->name_len)) {
      PUT_LIT(&b, "\"[redacted]\"");
      continue;
    }
    /* Joined value of every header of this name. */
    json_buf joined;
    json_buf_init(&joined, NULL);
    for (unsigned j = i; j < r->nheaders; j++) {
      const http_header *o = &r->headers[j];
      if (o->name_len != h->name_len || strncasecmp(r->htext + o->name, name, h->name_len) != 0)
        continue;
      if (joined.len) json_buf_put(&joined, ", ", 2);
      json_buf_put(&joined, r->htext + o->value, o->value_len);
    }
    /* a URL in a header (Referer, Origin) loses its credentials too */
    json_buf cleaned;
    json_buf_init(&cleaned, NULL);
    put_clean_url(&cleaned, w->srv->opts->authz_redact_query, joined.data ? joined.data : "",
                  joined.len, 1);
    json_write_string(&b, cleaned.data ? cleaned.data : "", cleaned.len);
    if (joined.oom || cleaned.oom) b.oom = 1;
    json_buf_free(&cleaned);
    json_buf_free(&joined);
  }
  /* env: X-Verdict-Env-Country: DE -> env.country = "DE"; country "XX" when
   * the proxy knows none (the GeoIP convention of the examples). */
  PUT_LIT(&b, "},\"env\":{");
  first = 1;
  int have_country = 0;
  for (unsigned i = 0; i < r->nheaders; i++) {
    const http_header *h = &r->headers[i];
    const char *name = r->htext + h->name;
    if (!starts_with_ci(name, h->name_len, "x-verdict-env-") || h->name_len == 14) continue;
    if (!first) json_buf_putc(&b, ',');
    first = 0;
    size_t kn = h->name_len - 14;
    if (kn == 7 && strncasecmp(name + 14, "country", 7) == 0) have_country = 1;
    put_lower_key(&b, name + 14, kn, 1);
    json_buf_putc(&b, ':');
    json_write_string(&b, r->htext + h->value, h->value_len);
  }
  if (!have_country) {
    if (!first) json_buf_putc(&b, ',');
    PUT_LIT(&b, "\"country\":\"XX\"");
  }
  PUT_LIT(&b, "}}}");
  json_buf_free(&clean); /* uri points into it: used up above */
  if (b.oom) {
    json_buf_free(&b);
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory building the authz request",
                       NULL);
    return;
  }

  vd_decision *d = conn_decision(c);
  vd_error err;
  if (server_decide_json(w, b.data, b.len, d, &err) != 0) {
    json_buf_free(&b);
    metrics_count_refused(&w->m);
    stats_count_refused(&w->st);
    conn_respond_error(c, route_error_status(err.code), vd_err_name(err.code), err.message,
                       err.path);
    return;
  }
  json_buf_free(&b);
  worker_count_decision(w, d);
  const char *action = vd_decision_action(d);
  int status = vd_decision_allowed(d) ? 200 : vd_decision_review(d) ? 401 : 403;
  if (!action) status = 403; /* an error decision with no action: closed */
  metrics_bump(&w->m.authz[status == 200 ? 0 : status == 401 ? 1 : 2]);
  char extra[768];
  size_t at = 0;
  extra[0] = '\0';
  put_header(extra, sizeof extra, &at, "X-Verdict-Action", action ? action : "none");
  put_header(extra, sizeof extra, &at, "X-Verdict-Snapshot", vd_decision_snapshot_id(d));
  put_header(extra, sizeof extra, &at, "X-Verdict-Rule", vd_decision_rule(d));
  put_header(extra, sizeof extra, &at, "X-Verdict-Strategy", vd_decision_strategy(d));
  if (status == 401) put_header(extra, sizeof extra, &at, "WWW-Authenticate", "Verdict");
  conn_note_decision(c, action, vd_decision_snapshot_id(d));
  const char *s;
  size_t n;
  if (vd_decision_render(d, 0, &s, &n) != 0) {
    s = "";
    n = 0;
  }
  conn_respond(c, status, "application/json", extra, s, n);
}
