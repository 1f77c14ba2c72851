/* server.h — `verdict serve`: the HTTP decision service. One vd_engine shared
 * read-only by N worker threads, each running its own libuv loop that accepts
 * on the same port (SO_REUSEPORT) and parses HTTP/1.1 with llhttp. The main
 * thread only waits for signals: SIGTERM/SIGINT drain and stop, SIGHUP
 * reloads the bundle. docs/server.md describes the endpoints and limits.
 *
 * Not here: TLS (put a proxy in front), HTTP/2, server-sent events. */
#ifndef VD_SERVER_SERVER_H
#define VD_SERVER_SERVER_H

#include <stddef.h>

#include "verdict.h"

#define VD_AUTHZ_REDACT_DEFAULT                                                     \
  "authorization,proxy-authorization,cookie,x-api-key,x-auth-token,x-access-token," \
  "x-forwarded-authorization,x-amz-security-token"
/* Query parameters /v1/authz masks in the original URI (and in URLs in
 * headers): names compared in any case, '-' as '_', %XX decoded; a name
 * ending in one of the last four (access_token, client_secret, x-amz-signature)
 * counts too. */
#define VD_AUTHZ_REDACT_QUERY_DEFAULT                                                 \
  "token,access_token,refresh_token,id_token,api_key,apikey,key,password,passwd,pwd," \
  "secret,client_secret,signature,sig,auth,code,session,sessionid,credential,"        \
  "x_amz_credential,x_amz_signature,x_amz_security_token,*token,*secret,*password,"   \
  "*signature"

/* A rollout (docs/rollout.md): a shadow or a canary bundle beside the live
 * one, and the canary's limits. */
typedef struct rollout_opts {
  const char *shadow_dir; /* --shadow: decides every request off the answer's path */
  const char *canary_dir; /* --canary: answers percent of the requests */
  double percent;         /* --canary-percent, 0..100 */
  int percent_set;
  int no_key_canary;         /* --canary-no-key canary: requests without a key go to it */
  double max_disagreement;   /* --canary-max-disagreement, 0..1; -1: not watched */
  double max_errors;         /* --canary-max-errors, 0..1; -1: not watched */
  double max_p99_us;         /* --canary-max-latency-us; -1: not watched */
  unsigned window;           /* --canary-window: compared decisions watched (1000) */
  unsigned min_decisions;    /* --canary-min-decisions before a limit is judged (100) */
  unsigned queue;            /* --shadow-queue: off-path decisions waiting at most (1024) */
  const char *settings_file; /* --rollout-settings: percent and limits, re-read on SIGHUP */
} rollout_opts;

void rollout_opts_init(rollout_opts *o);
/* Applies the rollout setting NAME (its long form) = V: 0; 1 with *why (a
 * phrase ending before the value) for a bad value; -1 not a rollout setting. */
int rollout_setting(rollout_opts *o, const char *name, const char *v, const char **why);
/* Settings that contradict each other: -1 with why. */
int rollout_opts_check(const rollout_opts *o, char *why, size_t n);

typedef struct server_opts {
  const char *policy_dir;         /* the bundle (required) */
  const char *listen;             /* "HOST:PORT" or "[V6]:PORT"; default 127.0.0.1:8181 */
  int threads;                    /* worker loops; default 2 */
  vd_engine_opts engine;          /* snapshots_dir NULL: snapshots off */
  size_t max_body;                /* request body bytes; default 1 MiB (413 past it) */
  size_t max_header;              /* request line + header bytes; default 16 KiB (431) */
  unsigned idle_timeout_ms;       /* keep-alive connection with no request; default 30 s */
  unsigned request_timeout_ms;    /* a request started but not complete; default 10 s (408) */
  unsigned max_conns;             /* open connections, all workers; default 1024 (503 past it) */
  unsigned max_batch;             /* requests in one batch; default 1000 (413 past it) */
  const char *admin_token_file;   /* NULL: $VERDICT_ADMIN_TOKEN, else admin is disabled */
  const char *access_log;         /* NULL: none; "-": stdout; else a file (appended) */
  int watch;                      /* reload when a file in the bundle folder changes */
  unsigned watch_debounce_ms;     /* quiet time before a watched change reloads; default 300 */
  const char *authz_redact;       /* header names (comma-separated, any case) whose values
                                   * /v1/authz passes to the rules, and so to the snapshot, as
                                   * "[redacted]"; default VD_AUTHZ_REDACT_DEFAULT; "" none */
  const char *authz_redact_query; /* query parameter names (comma-separated; "*x": any
                                   * name ending in x) whose values /v1/authz masks as
                                   * "[redacted]" in the URI and in URLs in headers;
                                   * default VD_AUTHZ_REDACT_QUERY_DEFAULT; "" none */
  int snapshot_reads;             /* who may read a recorded decision (GET /v1/snapshots/{id},
                                   * the MCP tool explain_decision over /mcp): one of
                                   * SERVER_SNAPSHOT_READS_* below; default _LOCAL */
  rollout_opts rollout;
  /* --bundle-url (docs/deploy.md, "Bundles pulled from a server, signed"):
   * the signed .tar.gz polled (policy_dir is then found in bundle_dir) */
  const char *bundle_url;
  const char *bundle_pubkey; /* --bundle-pubkey: the ed25519 public key (PEM) */
  const char *bundle_dir;    /* --bundle-dir: where pulled bundles are kept */
  unsigned bundle_poll_ms;   /* --bundle-poll: default 30 s, jittered by ±10% */
  const char *ship_url;  /* --ship clickhouse://HOST:PORT/DB.TABLE; NULL: no shipping */
  const char *ship_node; /* --ship-node: the rows' node and the cursor's name */
} server_opts;

/* --snapshot-reads: a peer on a loopback address or a request with the admin
 * token (local, the default); anyone who reaches the port (open); only a
 * request with the admin token (admin). */
enum { SERVER_SNAPSHOT_READS_LOCAL = 0, SERVER_SNAPSHOT_READS_OPEN, SERVER_SNAPSHOT_READS_ADMIN };

/* Fills the defaults above (policy_dir NULL). */
void server_opts_init(server_opts *o);

/* Runs the service until SIGTERM or SIGINT. Returns the process exit status:
 * 0 after a clean stop, 1 when it could not start (the reason was logged). */
int server_run(const server_opts *o);

/* One line of the server's log (log.c): for work the command runs beside
 * the server (verdict serve --retention's gc) to log as the server does.
 * fields: ",\"key\":value..." JSON members to add, or NULL. */
void server_log(const char *level, const char *event, const char *message, const char *fields);

#endif
