/* ship.h — decision snapshots shipped from a snapshot folder to ClickHouse,
 * so that a fleet's decisions are queried (and replayed) in one place.
 *
 * The shipper reads the records of a folder's segment files — never the
 * deciding path: it only reads files the writer has written — and sends
 * them in batches over ClickHouse's HTTP interface (INSERT ... FORMAT
 * JSONEachRow, gzip body). After ClickHouse acknowledges a batch it moves
 * a durable cursor (segment + records into it; written to a temporary
 * file, fsynced, renamed) kept in the folder per node:
 * DIR/ship-<node>.cursor. A crash between the insert and the cursor sends
 * that batch again: delivery is at least once, and the table is a
 * ReplacingMergeTree keyed by the snapshot id, so a row sent twice is one
 * row once merged (count(DISTINCT id) is exact at once; count() after
 * OPTIMIZE TABLE ... FINAL). Every version file in DIR/versions (policy,
 * model, feature spec) is sent to the versions table before the first
 * batch that could name it, so the rows replay anywhere.
 *
 * ClickHouse down: the batch is retried with backoff (100 ms doubling to
 * 5 s) until it is taken or the shipper is stopped; nothing is skipped.
 *
 * The target is clickhouse://HOST[:PORT]/DB.TABLE (port 8123 by default);
 * the versions table is DB.TABLE_versions. docs/deploy.md ("Snapshots
 * shipped to ClickHouse") has the tables' SQL and the guarantees. */
#ifndef VD_SHIP_SHIP_H
#define VD_SHIP_SHIP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"

#define SHIP_ERRLEN 640

typedef struct ship_target {
  char http[300]; /* http://HOST:PORT */
  char db[128], table[128];
} ship_target;

/* Parses clickhouse://HOST[:PORT]/DB.TABLE (DB and TABLE: letters, digits
 * and _, not starting with a digit). 0, or -1 with a message naming what is
 * wrong. */
int ship_target_parse(const char *url, ship_target *t, char *err, size_t errlen);

/* The CREATE TABLE statements (snapshots, then versions) for t, into b. */
void ship_table_sql(const ship_target *t, json_buf *snapshots, json_buf *versions);

/* Creates both tables (IF NOT EXISTS). 0, or -1 with ClickHouse's answer or
 * why none came. */
int ship_create_tables(const ship_target *t, char *err, size_t errlen);

typedef struct ship_opts {
  const char *dir;  /* the snapshot folder */
  const char *url;  /* clickhouse://... */
  const char *node; /* the rows' node and the cursor's name: default the host name */
  uint32_t batch;   /* records a batch at most: default 5000 */
  int once;         /* stop at the end of the folder instead of following it */
  uint32_t poll_ms; /* following: how often to look for new records (default 200) */
  int timeout_ms;   /* per HTTP request: default 10000 */
  int quiet;        /* no progress line per batch on stderr (ship_run) */
  /* serve: the writer's count of records written, for the lag in records
   * (NULL: the lag counts only records read and not yet acknowledged) */
  uint64_t (*written)(void *ud);
  void *written_ud;
  /* a failure after success and the recovery after failures (ship_failed,
   * ship_recovered), for a server's log; NULL: stderr unless quiet */
  void (*log)(void *ud, const char *level, const char *event, const char *msg);
  void *log_ud;
} ship_opts;

void ship_opts_init(ship_opts *o);

/* Counters, read at any time from any thread. */
typedef struct ship_stats {
  _Atomic uint64_t shipped;   /* records acknowledged by ClickHouse (this run) */
  _Atomic uint64_t batches;   /* batches acknowledged */
  _Atomic uint64_t retries;   /* failed attempts (each retried) */
  _Atomic uint64_t versions;  /* version files sent */
  _Atomic uint64_t pending;   /* records read, not yet acknowledged */
  _Atomic uint64_t backlog0;  /* records past the cursor at the start */
  _Atomic int64_t oldest_ns;  /* time of the oldest record not acknowledged (0: none) */
  _Atomic int64_t last_ok_ns; /* wall clock of the last acknowledged batch */
  _Atomic int caught_up;      /* the last look found nothing new */
  _Atomic int failing;        /* the last attempt failed */
} ship_stats;

typedef struct shipper shipper;

/* Checks the options and the URL, reads the cursor (a damaged cursor file
 * is an error naming it) and counts the records past it. 0, or -1 with a
 * message (usage problems: *usage set). */
int shipper_new(const ship_opts *o, shipper **out, int *usage, char *err, size_t errlen);
/* Ships until the end of the folder (once) or until shipper_stop. 0, or -1
 * with a message (a folder that cannot be read, a cursor that cannot be
 * written). ClickHouse being down is not an error: it is retried. */
int shipper_run(shipper *s, char *err, size_t errlen);
/* Asks shipper_run to return (any thread; it returns within a poll or a
 * backoff step, leaving the batch in flight unacknowledged). */
void shipper_stop(shipper *s);
int shipper_stopping(const shipper *s);
const ship_stats *shipper_stats(const shipper *s);
/* Records not yet shipped as far as the shipper knows, and the age (s) of
 * the oldest of them it has read (0 when caught up). */
uint64_t shipper_lag_records(const shipper *s);
double shipper_lag_seconds(const shipper *s);
/* The last error (a failed attempt), "" when none; copied into out. */
void shipper_last_error(shipper *s, char *out, size_t cap);
/* The shipper's state as one JSON object, for a status endpoint:
 * {"target": "clickhouse://…", "node": …, "shipped": N, "batches": N,
 *  "retries": N, "versions": N, "lag_records": N, "lag_seconds": X,
 *  "failing": bool, "last_error": "…" or null, "cursor": {"segment": …,
 *  "records": N}} */
void shipper_status_json(shipper *s, json_buf *b);
/* The cursor now: the segment name and the records into it (both as of the
 * last acknowledged batch). */
void shipper_cursor(shipper *s, char *segment, size_t cap, uint64_t *records);
void shipper_free(shipper *s);

/* Fetches a table's rows (time_ns in [since_ns, until_ns), 0: unbounded;
 * one row per id, as after a merge) and its versions into dir, a new
 * snapshot folder that replays alone. The rows written, or -1 with a
 * message. */
long long ship_fetch(const char *url, int64_t since_ns, int64_t until_ns, const char *dir,
                     char *err, size_t errlen);
/* Removes a folder ship_fetch made, and everything in it. */
void ship_remove_folder(const char *dir);

#endif
