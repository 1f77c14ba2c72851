/* against.h — replaying recorded requests against another decision service.
 *
 * Any service that answers `POST /v1/decide` with a decision in JSON (the
 * shape verdict itself answers: "action", "allowed", "source",
 * "reason": {"rule"}, "confidence") can be scored on exactly the traffic a
 * snapshot log holds: against_run walks the log (through replay_run, so the
 * filters and the recorded side are the same as for any replay), sends each
 * recorded request to the service and hands the scorer a replay_item whose
 * `replayed` side is the service's answer and whose latency is the round
 * trip (and, when the answer reports the service's own in-process time as
 * `latency_us`, that too: only it compares with a recorded latency). A
 * remote decision counts as the same when its action and allowed (when the
 * answer says) agree with the recorded ones (another system's rule names and confidences
 * are its own business; they are still tallied).
 *
 * The client speaks HTTP/1.1 over a plain TCP socket: one keep-alive
 * connection, Content-Length bodies out, Content-Length or chunked bodies
 * in, a deadline per request. No TLS: put a local proxy in front of an https
 * service. */
#ifndef VD_REPLAY_AGAINST_H
#define VD_REPLAY_AGAINST_H

#include <stddef.h>
#include <stdint.h>

#include "replay/replay.h"

typedef struct against_client against_client;

/* ---- another engine's answer format ----
 * A peer that does not answer in verdict's shape is read through a mapping:
 * one CEL expression per field, evaluated over `response` (the answer's
 * JSON body) and `request` (the recorded request), e.g. for OPA's
 * {"result": true}:
 *
 *   action=response.result ? "allow" : "deny"
 *   allowed=response.result
 *
 * Fields: action (a string or null), allowed and review (bools), source,
 * rule, reason, id, policy_version, model_version (strings or null),
 * confidence and latency_us (numbers: latency_us is the peer's own
 * in-process time, when it reports one). A field without an expression is
 * read from verdict's shape as before; `allowed` that neither gives is
 * unknown (-1) and not compared. The body sent can be mapped too: a CEL
 * expression over `request` whose value (a map) is sent as JSON, e.g.
 * {"input": request} for OPA. */
typedef struct against_map against_map;

/* Adds "FIELD=EXPR", or a bare EXPR for the action, to *m (created on
 * first use). 0, or -1 with a message naming the field and the place in
 * the expression. */
int against_map_add(against_map **m, const char *spec, char *err, size_t errlen);
/* Sets the body expression. 0, or -1 with a message. */
int against_map_body(against_map **m, const char *expr, char *err, size_t errlen);
void against_map_free(against_map *m);

/* url: http://host[:port][/path] — host a name, an IPv4 address or a
 * bracketed IPv6 address; the path defaults to /v1/decide. timeout_ms <= 0:
 * 5000. Only checks and resolves the URL; the first request connects.
 * 0, or -1 with a message. */
int against_open(const char *url, int timeout_ms, against_client **out, char *err, size_t errlen);

/* Sends body as one decision request and reads the answer into *side (its
 * strings stay valid until the next call) and the round trip into *rtt_us.
 * Returns 0; AGAINST_EREFUSED when the service answered, but not with a
 * decision (a status other than 200, or a body that is not a decision: err
 * has the status and the service's message); AGAINST_ETRANSPORT when no
 * answer came (cannot connect, timeout, connection closed, malformed HTTP),
 * after one retry on a fresh connection when a kept-alive one had gone
 * stale. */
#define AGAINST_EREFUSED (-1)
#define AGAINST_ETRANSPORT (-2)
int against_decide(against_client *c, const against_map *map, const char *body, size_t len,
                   replay_side *side, double *rtt_us, char *err, size_t errlen);

/* One GET of url (http://host[:port]/path, the path as given), with
 * If-None-Match: etag when etag is not NULL or "", on a connection of its
 * own: the status, the body (malloc'd, NUL-ended, at most max_body bytes;
 * 0: 4 MiB) and the ETag answered (malloc'd, or NULL) into *out. 0, or -1
 * with why (cannot connect, timeout, a body past max_body, malformed HTTP).
 * Used by `verdict serve --bundle-url`. */
typedef struct against_fetched {
  int status;
  char *body;
  size_t len;
  char *etag;
} against_fetched;
int against_fetch(const char *url, const char *etag, int timeout_ms, size_t max_body,
                  against_fetched *out, char *err, size_t errlen);
void against_fetched_free(against_fetched *f);
/* A plain POST on the same connection, for other HTTP services (the
 * snapshot shipper's ClickHouse): path (with its query string, already
 * escaped), extra header lines (each ending in CRLF; NULL: none), body.
 * 0 with the status and the answer's body in *resp (valid until the next
 * call), or AGAINST_ETRANSPORT with err (no answer, after one retry on a
 * fresh connection when a kept-alive one had gone stale). */
int against_post(against_client *c, const char *path, const char *extra, const char *body,
                 size_t len, int *status, const char **resp, size_t *resp_len, char *err,
                 size_t errlen);

/* Connections opened so far (1 for a whole run when keep-alive holds). */
uint64_t against_connections(const against_client *c);
void against_close(against_client *c);

/* The walk: replay_run over opts, each snapshot's recorded request sent to
 * url, items to cb. Stops with -1 (message in err) when the service cannot
 * be reached for AGAINST_MAX_FAILS requests in a row; a request the service
 * refuses is an item with error set, and the walk goes on. */
#define AGAINST_MAX_FAILS 3
int against_run(const replay_opts *opts, const char *url, const against_map *map, int timeout_ms,
                replay_cb cb, void *user, replay_stats *stats, char *err, size_t errlen);

#endif
