/* bench-decide — JSON request in, decision JSON out, in-process on one core:
 * how long verdict takes per decision, next to hand-written C doing the same
 * work in the same run.
 *
 * Strategies:
 *  - request_gate, the example bundle's edge gate (examples/policies), over
 *    a mix of requests shaped like edge traffic: mostly ordinary page views
 *    and API calls (which run through every rule), some scanners, probes,
 *    geofenced and rate-limited clients. Twice: its rules alone (the file
 *    with `fallback:` replaced by `default: allow`, what the C floor does
 *    by hand), and as shipped, where what no rule decides goes to its model
 *    (no C floor: the row shows what the model adds);
 *  - the design's two-rule text, whose second rule reads the model on every
 *    request the first lets by (verdict alone);
 *  - gen-10 and gen-1000: generated strategies of 10 and 1,000 rules of the
 *    indexable kind (`path == "/r/N" && method == "POST"`,
 *    `path.startsWith("/p/N/") && env.country == "DE"`,
 *    `env.country in ["AN", "BN"]`), written to a temporary folder, over
 *    requests that hit a rule at a random position a third of the time.
 *
 * Each verdict decision is vd_decide_json + vd_decision_render on a reused
 * vd_decision. The C floor parses the same JSON with the same reader, tests
 * the same conditions in straight C (hash lookups and precomputed tables for
 * the generated strategies, as a person would write them) and writes the
 * same decision JSON. Every decision of both is checked to agree (action and
 * rule) before timing.
 *
 * Reported: decisions/s (a timed loop over all requests, no per-decision
 * clock), p50/p99 per decision (each decision timed on its own with
 * CLOCK_MONOTONIC; the clock read itself, reported, is included), and the
 * ratios verdict/C and gen-1000/gen-10.
 *
 *   bench-decide [--rounds N] [--examples DIR]
 */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../bench.h"
#include "core/arena.h"
#include "core/json.h"
#include "core/value.h"
#include "verdict.h"

#ifndef VD_SOURCE_DIR
#define VD_SOURCE_DIR "."
#endif

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* ---- a decision the C floor makes: action + rule, rendered like verdict ---- */

typedef struct cdecision {
  const char *action, *rule, *reason, *source;
  int allowed, review;
} cdecision;

static const char *render_c(arena *a, const cdecision *d, const char *strategy, const char *version,
                            size_t *len) {
  json_buf b;
  json_buf_init(&b, a);
  json_buf_put(&b, "{\"action\":", 10);
  json_write_string(&b, d->action, strlen(d->action));
  json_buf_put(&b, d->allowed ? ",\"allowed\":true" : ",\"allowed\":false", d->allowed ? 15 : 16);
  json_buf_put(&b, d->review ? ",\"review\":true" : ",\"review\":false", d->review ? 14 : 15);
  json_buf_put(&b, ",\"confidence\":", 14);
  json_write_double(&b, strcmp(d->source, "error") == 0 ? 0.0 : 1.0);
  json_buf_put(&b, ",\"source\":", 10);
  json_write_string(&b, d->source, strlen(d->source));
  json_buf_put(&b, ",\"reason\":{\"rule\":", 18);
  if (d->rule)
    json_write_string(&b, d->rule, strlen(d->rule));
  else
    json_buf_put(&b, "null", 4);
  json_buf_put(&b, ",\"message\":", 11);
  if (d->reason)
    json_write_string(&b, d->reason, strlen(d->reason));
  else
    json_buf_put(&b, "null", 4);
  json_buf_put(&b, "},\"strategy\":", 13);
  json_write_string(&b, strategy, strlen(strategy));
  json_buf_put(&b, ",\"policy_version\":", 18);
  json_write_string(&b, version, strlen(version));
  json_buf_put(&b, ",\"model_version\":null,\"latency_us\":", 35);
  json_write_double(&b, 0.25);
  json_buf_putc(&b, '}');
  *len = b.len;
  return b.data;
}

static int str_is(const value *v, const char *s) {
  size_t n = strlen(s);
  return v && v->kind == V_STRING && v->n == n && memcmp(v->s, s, n) == 0;
}

static int str_starts(const value *v, const char *p) {
  size_t n = strlen(p);
  return v && v->kind == V_STRING && v->n >= n && memcmp(v->s, p, n) == 0;
}

static const value *field(const value *m, const char *k) {
  return m && m->kind == V_MAP ? value_map_get(m, k, strlen(k)) : NULL;
}

/* ---- request_gate by hand ---- */

typedef struct cidr {
  unsigned char addr[16];
  int bits;
} cidr;

/* IPv4 as IPv4-mapped IPv6, so one comparison serves both. */
static int parse_ip(const char *s, size_t n, unsigned char out[16]) {
  char buf[64];
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, s, n);
  buf[n] = '\0';
  if (strchr(buf, ':')) return inet_pton(AF_INET6, buf, out) == 1 ? 6 : -1;
  memset(out, 0, 10);
  out[10] = out[11] = 0xff;
  return inet_pton(AF_INET, buf, out + 12) == 1 ? 4 : -1;
}

static void make_cidr(cidr *c, const char *text) {
  char buf[64];
  snprintf(buf, sizeof buf, "%s", text);
  char *slash = strchr(buf, '/');
  *slash = '\0';
  int fam = parse_ip(buf, strlen(buf), c->addr);
  c->bits = atoi(slash + 1) + (fam == 4 ? 96 : 0);
}

static int in_cidr(const cidr *c, const unsigned char ip[16]) {
  int full = c->bits / 8, rest = c->bits % 8;
  if (memcmp(c->addr, ip, (size_t)full) != 0) return 0;
  if (!rest) return 1;
  unsigned char mask = (unsigned char)(0xff << (8 - rest));
  return (c->addr[full] & mask) == (ip[full] & mask);
}

static cidr denied[3], trusted[3];
static const char *const denied_txt[] = {"198.51.100.0/24", "203.0.113.128/25",
                                         "2001:db8:bad::/48"};
static const char *const trusted_txt[] = {"10.0.0.0/8", "192.168.0.0/16", "2001:db8:100::/40"};
static const char *const revoked[] = {"key_live_4f1c9a2e", "key_live_0b77d3aa"};
static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
static const char *const probe_prefixes[] = {
    "/.env",     "/.git",           "/.aws",        "/.ssh",       "/.ds_store", "/wp-admin",
    "/wp-login", "/wp-content",     "/xmlrpc.php",  "/phpmyadmin", "/cgi-bin/",  "/server-status",
    "/actuator", "/vendor/phpunit", "/config.json", "/backup"};
static const char *const probe_suffixes[] = {".php", ".asp", ".aspx", ".jsp", ".cgi",
                                             ".bak", ".sql", ".swp",  "~"};
static const char *const scanners[] = {
    "sqlmap",   "nikto",      "nmap",     "masscan",     "zgrab",  "nuclei",
    "wpscan",   "dirbuster",  "gobuster", "feroxbuster", "ffuf",   "wfuzz",
    "acunetix", "netsparker", "nessus",   "openvas",     "jorgee", "zmeu"};
static const char *const scripted[] = {
    "curl/",  "wget/",       "python-requests", "python-urllib",  "aiohttp",  "go-http-client",
    "okhttp", "libwww-perl", "scrapy",          "headlesschrome", "phantomjs"};
static const char *const embargoed[] = {"KP", "IR", "SY", "CU"};
static const char *const sensitive[] = {"/admin",   "/account/security", "/account/api-keys",
                                        "/billing", "/api/v1/admin",     "/api/v2/admin"};
#define N(a) (sizeof(a) / sizeof(a)[0])

static int contains_n(const char *h, size_t hn, const char *needle) {
  return memmem(h, hn, needle, strlen(needle)) != NULL;
}

static int in_list(const value *v, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (str_is(v, list[i])) return 1;
  return 0;
}

static void gate_by_hand(const value *req, cdecision *d) {
  const value *ctx = field(req, "context"), *cands = field(req, "candidates");
  const value *key = field(req, "key");
  const value *path = field(ctx, "path"), *method = field(ctx, "method");
  const value *ip = field(ctx, "client_ip"), *headers = field(ctx, "headers");
  const value *env = field(ctx, "env"), *session = field(ctx, "session");
  const value *signals = field(ctx, "signals");
  const value *country = field(env, "country");
  static const struct {
    const char *name, *action, *reason;
  } R[] = {
      {"denied-network", "block", "the client address is on the deny list"},
      {"revoked-api-key", "block",
       "the API key was revoked after a leak; the client must rotate it"},
      {"probe-path", "block", "probe for secrets, backups or another framework's admin panel"},
      {"path-traversal", "block", "path traversal attempt"},
      {"method-not-allowed", "block",
       "HTTP method not served here (TRACE, CONNECT, WebDAV and the like)"},
      {"scanner-agent", "block", "the User-Agent is a known vulnerability scanner"},
      {"trusted-network", "allow",
       "office network or uptime monitor, exempt from geofencing, MFA and rate checks"},
      {"embargoed-country", "block",
       "service is not offered in comprehensively sanctioned countries"},
      {"sensitive-mfa-unavailable", "block",
       "a second factor is required and this caller cannot ask for one"},
      {"sensitive-needs-mfa", "ask_mfa",
       "security, billing and admin pages need a second factor passed in the last 15 minutes"},
      {"session-moved-country", "ask_mfa",
       "the session is being used from another country than it started in"},
      {"cn-api-v1", "allow", "CN partner gateway on the licensed v1 API"},
      {"cn-api-unlicensed", "block", "only the v1 API is licensed for mainland China"},
      {"flood", "block", "request flood from one client (1200 or more requests a minute)"},
      {"login-bruteforce", "challenge",
       "repeated failed logins from this client (credential stuffing)"},
      {"high-rate", "challenge", "unusually many requests from one client (300 or more a minute)"},
      {"scripted-client-on-web", "challenge",
       "an HTTP library or headless browser on the web pages; scripts should use the API"},
      {"missing-user-agent", "challenge",
       "no User-Agent header; every real browser and SDK sends one"},
  };
  int hit = -1;
  char ua[512], lpath[1024];
  size_t ual = 0, lpl = 0;
  const value *uav = field(headers, "user-agent");
  if (uav && uav->kind == V_STRING && uav->n < sizeof ua) {
    for (uint32_t i = 0; i < uav->n; i++) ua[i] = (char)tolower((unsigned char)uav->s[i]);
    ual = uav->n;
  }
  for (uint32_t i = 0; i < path->n && i < sizeof lpath; i++)
    lpath[i] = (char)tolower((unsigned char)path->s[i]);
  lpl = path->n;
  long rpm = 0;
  const value *r = field(signals, "req_per_min");
  if (r && r->kind == V_INT) rpm = (long)r->i;
  const value *age = field(session, "mfa_age_s");
  int mfa_fresh = age && age->kind == V_INT && age->i <= 900;
  int sens = 0;
  for (size_t i = 0; i < N(sensitive); i++) sens |= str_starts(path, sensitive[i]);
  int needs_mfa = sens && !mfa_fresh;
  unsigned char addr[16];
  int fam = parse_ip(ip->s, ip->n, addr);
  if (fam < 0) {
    *d = (cdecision){"challenge", "denied-network", "malformed request", "error", 0, 1};
    return;
  }
  for (size_t i = 0; i < N(denied) && hit < 0; i++)
    if (in_cidr(&denied[i], addr)) hit = 0;
  if (hit < 0 && str_starts(path, "/api/") && in_list(key, revoked, N(revoked))) hit = 1;
  if (hit < 0) {
    for (size_t i = 0; i < N(probe_prefixes) && hit < 0; i++) {
      size_t n = strlen(probe_prefixes[i]);
      if (lpl >= n && memcmp(lpath, probe_prefixes[i], n) == 0) hit = 2;
    }
    for (size_t i = 0; i < N(probe_suffixes) && hit < 0; i++) {
      size_t n = strlen(probe_suffixes[i]);
      if (lpl >= n && memcmp(lpath + lpl - n, probe_suffixes[i], n) == 0) hit = 2;
    }
  }
  if (hit < 0 && (contains_n(path->s, path->n, "/..") || contains_n(lpath, lpl, "%2e%2e") ||
                  contains_n(lpath, lpl, "%252e") || contains_n(lpath, lpl, "%00") ||
                  contains_n(lpath, lpl, "%c0%ae")))
    hit = 3;
  if (hit < 0 && !in_list(method, methods, N(methods))) hit = 4;
  for (size_t i = 0; i < N(scanners) && hit < 0; i++)
    if (contains_n(ua, ual, scanners[i])) hit = 5;
  for (size_t i = 0; i < N(trusted) && hit < 0; i++)
    if (in_cidr(&trusted[i], addr)) hit = 6;
  if (hit < 0 && in_list(country, embargoed, N(embargoed))) hit = 7;
  int ncand = cands ? (int)cands->n : 0, ask_ok = 0;
  for (int i = 0; i < ncand; i++) ask_ok |= str_is(&cands->items[i], "ask_mfa");
  if (hit < 0 && needs_mfa && ncand > 0 && !ask_ok) hit = 8;
  if (hit < 0 && needs_mfa) hit = 9;
  const value *sc = field(session, "country");
  if (hit < 0 && sc && !(sc->n == country->n && memcmp(sc->s, country->s, sc->n) == 0) &&
      !mfa_fresh)
    hit = 10;
  if (hit < 0 && str_is(country, "CN") && str_starts(path, "/api/v1")) hit = 11;
  if (hit < 0 && str_is(country, "CN") && str_starts(path, "/api/")) hit = 12;
  if (hit < 0 && rpm >= 1200) hit = 13;
  const value *fl = field(signals, "failed_logins_10m");
  if (hit < 0 && str_is(path, "/login") && str_is(method, "POST") && fl && fl->kind == V_INT &&
      fl->i >= 5)
    hit = 14;
  if (hit < 0 && rpm >= 300) hit = 15;
  if (hit < 0 && !str_starts(path, "/api/"))
    for (size_t i = 0; i < N(scripted) && hit < 0; i++)
      if (contains_n(ua, ual, scripted[i])) hit = 16;
  if (hit < 0 && ual == 0) hit = 17;
  if (hit < 0) {
    *d = (cdecision){"allow", NULL, "no abuse signal", "default", 1, 0};
  } else {
    const char *a = R[hit].action;
    *d = (cdecision){a,
                     R[hit].name,
                     R[hit].reason,
                     "rule",
                     strcmp(a, "allow") == 0,
                     strcmp(a, "ask_mfa") == 0 || strcmp(a, "challenge") == 0};
  }
  /* on_no_candidate: block, when the answer is not a candidate */
  if (ncand) {
    int ok = 0;
    for (int i = 0; i < ncand; i++) ok |= str_is(&cands->items[i], d->action);
    if (!ok) {
      d->action = "block";
      d->allowed = 0;
      d->review = 0;
    }
  }
}

/* The design's two-rule request_gate (DESIGN.md), unchanged. */
static const char DESIGN_GATE[] =
    "strategy: request_gate\n"
    "rules:\n"
    "  - if: env.country == \"CN\" && path.startsWith(\"/api/v1\")\n"
    "    action: allow\n"
    "  - if: confidence(model.score) < 0.6\n"
    "    action: ask_mfa\n"
    "fallback:\n"
    "  model: clef-default-v3\n"
    "  timeout_ms: 15\n";

/* Writes text into dir/name; exits on failure. */
static void write_file(const char *dir, const char *name, const char *text, size_t len) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *fh = fopen(path, "w");
  if (!fh || fwrite(text, 1, len, fh) != len || fclose(fh) != 0) {
    perror(path);
    exit(1);
  }
}

/* examples' request_gate.yaml with its `fallback:` block (up to the next
 * top-level key) replaced by `default: allow`: its rules alone. */
static char *rules_only(const char *file, size_t *len) {
  FILE *fh = fopen(file, "rb");
  if (!fh) return NULL;
  char *src = malloc(1 << 20), *out = malloc((1 << 20) + 128);
  size_t n = fread(src, 1, (1 << 20) - 1, fh);
  fclose(fh);
  src[n] = '\0';
  size_t o = 0;
  int skipping = 0;
  for (char *line = src; *line;) {
    char *nl = strchr(line, '\n');
    size_t ll = nl ? (size_t)(nl - line) + 1 : strlen(line);
    if (!strncmp(line, "fallback:", 9)) {
      skipping = 1;
      static const char repl[] = "default: {action: allow, reason: no abuse signal}\n";
      memcpy(out + o, repl, sizeof repl - 1);
      o += sizeof repl - 1;
    } else if (skipping && isalpha((unsigned char)line[0])) {
      skipping = 0;
    }
    if (!skipping) {
      memcpy(out + o, line, ll);
      o += ll;
    }
    line += ll;
  }
  free(src);
  *len = o;
  return out;
}

/* Edge traffic: mostly ordinary requests, which run through every rule. */
static char **gate_requests(size_t n) {
  static const char *const pages[] = {"/",        "/products/espresso-grinder",
                                      "/pricing", "/blog/2026/11/latency",
                                      "/search",  "/orders",
                                      "/cart",    "/static/app.4f1c.js"};
  static const char *const apis[] = {"/api/v2/orders", "/api/v1/invoices/17", "/api/v2/users/me",
                                     "/api/v1/catalog/items"};
  static const char *const browsers[] = {
      "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 Safari/605.1.15",
      "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/131.0 Safari/537.36",
      "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"};
  static const char *const countries[] = {"GB", "DE", "US", "FR", "NL", "BR", "IN", "JP"};
  char **out = malloc(n * sizeof *out);
  srand(7);
  for (size_t i = 0; i < n; i++) {
    char buf[1024];
    int kind = rand() % 100;
    unsigned a = 1 + (unsigned)rand() % 200, b = (unsigned)rand() % 250;
    const char *c = countries[rand() % N(countries)];
    if (kind < 55) /* page view */
      snprintf(buf, sizeof buf,
               "{\"action\":\"http_request\",\"context\":{\"method\":\"GET\",\"path\":\"%s\","
               "\"client_ip\":\"81.2.%u.%u\",\"headers\":{\"user-agent\":\"%s\",\"accept\":"
               "\"text/html\"},\"env\":{\"country\":\"%s\"},\"signals\":{\"req_per_min\":%u}}}",
               pages[rand() % N(pages)], a, b, browsers[rand() % N(browsers)], c, a % 40);
    else if (kind < 75) /* API call with a key */
      snprintf(buf, sizeof buf,
               "{\"action\":\"http_request\",\"key\":\"key_live_%08x\",\"context\":{\"method\":"
               "\"POST\",\"path\":\"%s\",\"client_ip\":\"52.95.%u.%u\",\"headers\":{\"user-agent\":"
               "\"python-requests/2.32.3\"},\"env\":{\"country\":\"%s\"},\"signals\":{\"req_per_"
               "min\":%u}}}",
               (unsigned)rand(), apis[rand() % N(apis)], a, b, c, a);
    else if (kind < 80) /* scanner */
      snprintf(
          buf, sizeof buf,
          "{\"action\":\"http_request\",\"context\":{\"method\":\"GET\",\"path\":\"/search\","
          "\"client_ip\":\"45.155.%u.%u\",\"headers\":{\"user-agent\":\"sqlmap/1.8.4#stable\"},"
          "\"env\":{\"country\":\"NL\"}}}",
          a, b);
    else if (kind < 85) /* probe */
      snprintf(buf, sizeof buf,
               "{\"action\":\"http_request\",\"context\":{\"method\":\"GET\",\"path\":\"/WP-Admin/"
               "install.php\",\"client_ip\":\"45.155.%u.%u\",\"headers\":{\"user-agent\":"
               "\"Mozilla/5.0\"},\"env\":{\"country\":\"RU\"}}}",
               a, b);
    else if (kind < 90) /* CN partner gateway */
      snprintf(buf, sizeof buf,
               "{\"action\":\"http_request\",\"context\":{\"method\":\"GET\",\"path\":\"/api/v%d/"
               "catalog/items\",\"client_ip\":\"220.181.%u.%u\",\"headers\":{\"user-agent\":"
               "\"partner-gateway/2.4\"},\"env\":{\"country\":\"CN\"},\"signals\":{\"req_per_min\":"
               "5000}}}",
               1 + (int)(a % 2), a, b);
    else if (kind < 95) /* sensitive page */
      snprintf(
          buf, sizeof buf,
          "{\"action\":\"http_request\",\"candidates\":[\"allow\",\"block\",\"ask_mfa\"],"
          "\"context\":{\"method\":\"GET\",\"path\":\"/billing/payment-methods\",\"client_ip\":"
          "\"81.2.%u.%u\",\"headers\":{\"user-agent\":\"%s\"},\"env\":{\"country\":\"GB\"},"
          "\"session\":{\"country\":\"GB\",\"mfa_age_s\":%u}}}",
          a, b, browsers[0], a * 9);
    else /* busy client */
      snprintf(buf, sizeof buf,
               "{\"action\":\"http_request\",\"context\":{\"method\":\"GET\",\"path\":\"/search\","
               "\"client_ip\":\"81.2.%u.%u\",\"headers\":{\"user-agent\":\"%s\"},\"env\":{"
               "\"country\":\"GB\"},\"signals\":{\"req_per_min\":%u}}}",
               a, b, browsers[1], 250 + a * 10);
    out[i] = strdup(buf);
  }
  return out;
}

/* ---- generated strategies ---- */

static void write_generated(const char *dir, int nrules) {
  char path[1100];
  snprintf(path, sizeof path, "%s/gen.yaml", dir);
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    exit(1);
  }
  fprintf(f, "strategy: gen\ndecision_points: [gen]\nrules:\n");
  for (int i = 0; i < nrules; i++) {
    fprintf(f, "  - name: r%d\n", i);
    switch (i % 3) {
      case 0:
        fprintf(f, "    if: path == \"/r/%d\" && method == \"POST\"\n", i);
        break;
      case 1:
        fprintf(f, "    if: path.startsWith(\"/p/%d/\") && env.country == \"DE\"\n", i);
        break;
      default:
        fprintf(f, "    if: env.country in [\"A%d\", \"B%d\"]\n", i, i);
    }
    fprintf(f, "    action: %s\n", i % 2 ? "block" : "review");
  }
  fprintf(f, "default: allow\non_error: block\n");
  fclose(f);
}

static char **gen_requests(size_t n, int nrules) {
  char **out = malloc(n * sizeof *out);
  srand(11);
  for (size_t i = 0; i < n; i++) {
    char buf[512];
    int target = rand() % nrules, kind = rand() % 3;
    const char *method = rand() % 4 ? "POST" : "GET";
    if (kind == 0) { /* aim at a rule */
      switch (target % 3) {
        case 0:
          snprintf(buf, sizeof buf,
                   "{\"action\":\"gen\",\"context\":{\"path\":\"/r/%d\",\"method\":\"%s\",\"env\":"
                   "{\"country\":\"US\"}}}",
                   target, method);
          break;
        case 1:
          snprintf(buf, sizeof buf,
                   "{\"action\":\"gen\",\"context\":{\"path\":\"/p/%d/x/%d\",\"method\":\"%s\","
                   "\"env\":{\"country\":\"%s\"}}}",
                   target, rand() % 100, method, rand() % 2 ? "DE" : "FR");
          break;
        default:
          snprintf(buf, sizeof buf,
                   "{\"action\":\"gen\",\"context\":{\"path\":\"/\",\"method\":\"%s\",\"env\":"
                   "{\"country\":\"%c%d\"}}}",
                   method, rand() % 2 ? 'A' : 'B', target);
      }
    } else { /* ordinary traffic: no rule */
      snprintf(buf, sizeof buf,
               "{\"action\":\"gen\",\"context\":{\"path\":\"/shop/item/%d\",\"method\":\"%s\","
               "\"env\":{\"country\":\"US\"}}}",
               rand() % 5000, method);
    }
    out[i] = strdup(buf);
  }
  return out;
}

/* The generated logic by hand: each field's value tells which rule could
 * test it (the rule number is in the value), then the first true wins. */
static int parse_num(const char *s, size_t n, size_t *used) {
  int v = 0;
  size_t i = 0;
  while (i < n && i < 9 && s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i++] - '0');
  *used = i;
  return i ? v : -1;
}

static void gen_by_hand(const value *req, int nrules, cdecision *d, char *rule_buf) {
  const value *ctx = field(req, "context");
  const value *path = field(ctx, "path"), *method = field(ctx, "method");
  const value *country = field(field(ctx, "env"), "country");
  int best = nrules;
  size_t used;
  if (str_starts(path, "/r/") && str_is(method, "POST")) {
    int k = parse_num(path->s + 3, path->n - 3, &used);
    if (k >= 0 && k < nrules && k % 3 == 0 && used == path->n - 3) best = k;
  }
  if (str_starts(path, "/p/") && str_is(country, "DE")) {
    int k = parse_num(path->s + 3, path->n - 3, &used);
    if (k >= 0 && k < nrules && k % 3 == 1 && used < path->n - 3 && path->s[3 + used] == '/' &&
        k < best)
      best = k;
  }
  if (country && country->n >= 2 && (country->s[0] == 'A' || country->s[0] == 'B')) {
    int k = parse_num(country->s + 1, country->n - 1, &used);
    if (k >= 0 && k < nrules && k % 3 == 2 && used == country->n - 1 && k < best) best = k;
  }
  if (best == nrules) {
    *d = (cdecision){"allow", NULL, NULL, "default", 1, 0};
    return;
  }
  snprintf(rule_buf, 16, "r%d", best);
  *d = (cdecision){best % 2 ? "block" : "review", rule_buf, NULL, "rule", 0, best % 2 == 0};
}

/* ---- the runs ---- */

typedef struct result {
  double per_sec;
  uint64_t p50, p99;
} result;

typedef struct floor_ctx {
  int which; /* 0: request_gate, -1: the design's request_gate, else the generated rule count */
  arena a;
  char rule_buf[16];
  const char *strategy, *version;
} floor_ctx;

static size_t floor_decide(floor_ctx *f, const char *json, cdecision *d) {
  arena_reset(&f->a);
  value req;
  json_error je;
  if (json_parse(&f->a, json, strlen(json), NULL, &req, &je) != 0) {
    fprintf(stderr, "floor: bad JSON: %s\n", je.message);
    exit(1);
  }
  if (f->which == 0)
    gate_by_hand(&req, d);
  else
    gen_by_hand(&req, f->which, d, f->rule_buf);
  size_t len;
  render_c(&f->a, d, f->strategy, f->version, &len);
  return len;
}

static int same(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Checks that verdict and the floor agree on every request; returns the
 * number of disagreements (printing the first few). */
static int agree(vd_engine *e, vd_decision *d, floor_ctx *f, char **reqs, size_t n) {
  int bad = 0;
  vd_error err;
  for (size_t i = 0; i < n; i++) {
    cdecision c;
    floor_decide(f, reqs[i], &c);
    if (vd_decide_json(e, reqs[i], -1, d, &err) != 0) {
      fprintf(stderr, "verdict refused %s: %s\n", reqs[i], err.message);
      exit(1);
    }
    if (!same(vd_decision_action(d), c.action) || !same(vd_decision_rule(d), c.rule)) {
      if (bad++ < 3)
        fprintf(stderr, "disagree on %s\n  verdict: %s (%s)\n  C:       %s (%s)\n", reqs[i],
                vd_decision_action(d), vd_decision_rule(d), c.action, c.rule ? c.rule : "-");
    }
  }
  return bad;
}

static uint64_t *lat;

static result run_verdict(vd_engine *e, vd_decision *d, char **reqs, size_t n, int rounds) {
  vd_error err;
  const char *out;
  size_t len, sink = 0;
  for (size_t i = 0; i < n; i++) { /* warm-up */
    vd_decide_json(e, reqs[i], -1, d, &err);
    vd_decision_render(d, 0, &out, &len);
  }
  uint64_t t0 = now_ns();
  for (int r = 0; r < rounds; r++)
    for (size_t i = 0; i < n; i++) {
      vd_decide_json(e, reqs[i], -1, d, &err);
      vd_decision_render(d, 0, &out, &len);
      sink += len;
    }
  uint64_t total = now_ns() - t0;
  size_t k = 0;
  for (int r = 0; r < rounds; r++)
    for (size_t i = 0; i < n; i++) {
      uint64_t a = now_ns();
      vd_decide_json(e, reqs[i], -1, d, &err);
      vd_decision_render(d, 0, &out, &len);
      lat[k++] = now_ns() - a;
      sink += len;
    }
  qsort(lat, k, sizeof *lat, cmp_u64);
  if (sink == 1) puts("");
  return (result){(double)k / ((double)total / 1e9), lat[k / 2], lat[k * 99 / 100]};
}

static result run_floor(floor_ctx *f, char **reqs, size_t n, int rounds) {
  cdecision c;
  size_t sink = 0;
  for (size_t i = 0; i < n; i++) sink += floor_decide(f, reqs[i], &c);
  uint64_t t0 = now_ns();
  for (int r = 0; r < rounds; r++)
    for (size_t i = 0; i < n; i++) sink += floor_decide(f, reqs[i], &c);
  uint64_t total = now_ns() - t0;
  size_t k = 0;
  for (int r = 0; r < rounds; r++)
    for (size_t i = 0; i < n; i++) {
      uint64_t a = now_ns();
      sink += floor_decide(f, reqs[i], &c);
      lat[k++] = now_ns() - a;
    }
  qsort(lat, k, sizeof *lat, cmp_u64);
  if (sink == 1) puts("");
  return (result){(double)k / ((double)total / 1e9), lat[k / 2], lat[k * 99 / 100]};
}

static void row(const char *name, result r, const result *base) {
  printf("  %-30s %12.0f %9llu %9llu", name, r.per_sec, (unsigned long long)r.p50,
         (unsigned long long)r.p99);
  if (base) printf("   %5.2fx", (double)r.p50 / (double)base->p50);
  printf("\n");
}

static vd_engine *open_or_die(const char *dir) {
  vd_engine_opts o = {.store_dir = ""};
  vd_engine *e;
  vd_error err;
  if (vd_engine_open(dir, &o, &e, &err) != 0) {
    fprintf(stderr, "bench-decide: %s\n", err.message);
    exit(1);
  }
  return e;
}

int main(int argc, char **argv) {
  int rounds = 20;
  const char *examples = NULL, *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--examples") == 0 && i + 1 < argc)
      examples = argv[++i];
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i]; /* "gate", "design" or "gen": for profiling one case */
    else {
      fprintf(stderr,
              "usage: bench-decide [--rounds N] [--examples DIR] [--only gate|design|gen]\n");
      return 2;
    }
  }
  if (rounds < 1) rounds = 1;
  struct stat st;
  char exdir[1024];
  if (!examples) {
    examples = "examples/policies";
    if (stat("examples/policies/request_gate.yaml", &st) != 0) {
      snprintf(exdir, sizeof exdir, "%s/examples/policies", VD_SOURCE_DIR);
      examples = exdir;
    }
  }
  enum { NREQ = 5000 };
  lat = malloc((size_t)rounds * NREQ * sizeof *lat);
  for (size_t i = 0; i < N(denied); i++) make_cidr(&denied[i], denied_txt[i]);
  for (size_t i = 0; i < N(trusted); i++) make_cidr(&trusted[i], trusted_txt[i]);

  uint64_t c0 = now_ns();
  for (int i = 0; i < 1000000; i++) (void)now_ns();
  double clock_ns = (double)(now_ns() - c0) / 1e6;

  printf("bench-decide: JSON request in -> decision JSON out, one core, %d x %d decisions a case\n",
         rounds, NREQ);
  printf("(p50/p99 in ns per decision, each timed alone; one clock read costs %.0f ns)\n\n",
         clock_ns);
  printf("  %-30s %12s %9s %9s   %s\n", "case", "decisions/s", "p50", "p99", "p50 vs C");

  vd_decision *d = vd_decision_new();
  int disagreements = 0;
  result gate_v = {0}, gate_model_v = {0};
  /* request_gate */
  char gate_file[1100];
  snprintf(gate_file, sizeof gate_file, "%s/request_gate.yaml", examples);
  if (only && strcmp(only, "gate") != 0) {
    /* skipped */
  } else if (stat(gate_file, &st) == 0) {
    char dir[1024];
    if (!bench_tmpdir(dir, sizeof dir, "decide")) return 1;
    size_t tlen = 0;
    char *text = rules_only(gate_file, &tlen);
    if (!text) {
      perror(gate_file);
      return 1;
    }
    write_file(dir, "request_gate.yaml", text, tlen);
    free(text);
    vd_engine *e = open_or_die(dir);
    char **reqs = gate_requests(NREQ);
    vd_decide_json(e, reqs[0], -1, d, NULL);
    char ver[65];
    snprintf(ver, sizeof ver, "%s", vd_decision_policy_version(d));
    floor_ctx f = {.which = 0, .strategy = "request_gate", .version = ver};
    arena_init(&f.a, NULL, 0, 0);
    disagreements += agree(e, d, &f, reqs, NREQ);
    result c = run_floor(&f, reqs, NREQ, rounds);
    gate_v = run_verdict(e, d, reqs, NREQ, rounds);
    row("request_gate rules, C floor", c, NULL);
    row("request_gate rules, verdict", gate_v, &c);
    vd_engine_close(e);
    /* as shipped: what no rule decides goes to the model */
    e = open_or_die(examples);
    gate_model_v = run_verdict(e, d, reqs, NREQ, rounds);
    row("request_gate + model, verdict", gate_model_v, &c);
    vd_engine_close(e);
    arena_free(&f.a);
    for (size_t i = 0; i < NREQ; i++) free(reqs[i]);
    free(reqs);
    char path[1200];
    snprintf(path, sizeof path, "%s/request_gate.yaml", dir);
    unlink(path);
    rmdir(dir);
  } else {
    printf("  (request_gate skipped: %s not found)\n", gate_file);
  }

  /* the design's text: the same traffic, sent to its decision point, with
   * the example bundle's model */
  result design_v = {0};
  if (!only || strcmp(only, "design") == 0) {
    char dir[1024];
    if (!bench_tmpdir(dir, sizeof dir, "decide")) return 1;
    write_file(dir, "request_gate.yaml", DESIGN_GATE, sizeof DESIGN_GATE - 1);
    char models[1200], link[1200], absx[1024];
    if (!realpath(examples, absx)) snprintf(absx, sizeof absx, "%s", examples);
    snprintf(models, sizeof models, "%s/models", absx);
    snprintf(link, sizeof link, "%s/models", dir);
    if (symlink(models, link) != 0) {
      perror(link);
      return 1;
    }
    vd_engine *e = open_or_die(dir);
    char **reqs = gate_requests(NREQ);
    for (size_t i = 0; i < NREQ; i++) {
      /* {"action":"http_request", ... -> {"action":"request_gate", ... */
      char *r = malloc(strlen(reqs[i]) + 8);
      sprintf(r, "{\"action\":\"request_gate\"%s",
              reqs[i] + strlen("{\"action\":\"http_request\""));
      free(reqs[i]);
      reqs[i] = r;
    }
    design_v = run_verdict(e, d, reqs, NREQ, rounds);
    row("design request_gate, verdict", design_v, NULL);
    for (size_t i = 0; i < NREQ; i++) free(reqs[i]);
    free(reqs);
    vd_engine_close(e);
    unlink(link);
    char path[1200];
    snprintf(path, sizeof path, "%s/request_gate.yaml", dir);
    unlink(path);
    rmdir(dir);
  }

  /* generated: 10 and 1,000 rules */
  result gen_v[2] = {{0}};
  const int sizes[2] = {10, 1000};
  for (int s = 0; s < 2 && !(only && strcmp(only, "gen") != 0); s++) {
    char dir[1024];
    if (!bench_tmpdir(dir, sizeof dir, "decide")) return 1;
    write_generated(dir, sizes[s]);
    vd_engine *e = open_or_die(dir);
    char **reqs = gen_requests(NREQ, sizes[s]);
    vd_decide_json(e, reqs[0], -1, d, NULL);
    char ver[65];
    snprintf(ver, sizeof ver, "%s", vd_decision_policy_version(d));
    floor_ctx f = {.which = sizes[s], .strategy = "gen", .version = ver};
    arena_init(&f.a, NULL, 0, 0);
    disagreements += agree(e, d, &f, reqs, NREQ);
    result c = run_floor(&f, reqs, NREQ, rounds);
    gen_v[s] = run_verdict(e, d, reqs, NREQ, rounds);
    char name[64];
    snprintf(name, sizeof name, "gen-%d, C floor", sizes[s]);
    row(name, c, NULL);
    snprintf(name, sizeof name, "gen-%d, verdict", sizes[s]);
    row(name, gen_v[s], &c);
    arena_free(&f.a);
    for (size_t i = 0; i < NREQ; i++) free(reqs[i]);
    free(reqs);
    vd_engine_close(e);
    char path[1100];
    snprintf(path, sizeof path, "%s/gen.yaml", dir);
    unlink(path);
    rmdir(dir);
  }

  printf("\n");
  if (gate_v.p50)
    printf(
        "request_gate (examples, rules) p50: %llu ns (target <= 1000 ns including JSON "
        "parsing): %s\n",
        (unsigned long long)gate_v.p50, gate_v.p50 <= 1000 ? "met" : "NOT met");
  if (gate_model_v.p50)
    printf("request_gate (examples, with its model) p50: %llu ns\n",
           (unsigned long long)gate_model_v.p50);
  if (design_v.p50)
    printf("request_gate (design text, model on every request rule 1 lets by) p50: %llu ns\n",
           (unsigned long long)design_v.p50);
  if (gen_v[0].p50) {
    double ratio = (double)gen_v[1].p50 / (double)gen_v[0].p50;
    printf("gen-1000 / gen-10 p50: %.2fx (target <= 2x): %s\n", ratio,
           ratio <= 2.0 ? "met" : "NOT met");
  }
  if (disagreements) printf("WARNING: verdict and the C floor disagreed %d times\n", disagreements);
  vd_decision_free(d);
  free(lat);
  return disagreements ? 1 : 0;
}
