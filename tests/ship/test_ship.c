/* test_ship.c — the shipper's pieces that need no ClickHouse: the target
 * URL (what is accepted, what is refused and how it is said), the tables'
 * SQL, and a new shipper on an empty folder: it writes its cursor at once
 * (holding the folder for retention) and reports its state as the JSON
 * object shipper_status_json documents. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/json.h"
#include "ship/ship.h"
#include "test.h"

static void test_target(void) {
  ship_target t;
  char err[SHIP_ERRLEN];
  CHECK(ship_target_parse("clickhouse://127.0.0.1:9000/db.tab", &t, err, sizeof err) == 0);
  CHECK_STR(t.http, "http://127.0.0.1:9000");
  CHECK_STR(t.db, "db");
  CHECK_STR(t.table, "tab");
  CHECK(ship_target_parse("clickhouse://ch.internal/v_1.decisions", &t, err, sizeof err) == 0);
  CHECK_STR(t.http, "http://ch.internal:8123");
  CHECK(ship_target_parse("clickhouse://[::1]:8124/a.b", &t, err, sizeof err) == 0);
  CHECK_STR(t.http, "http://[::1]:8124");
  const char *badv[] = {"http://h/a.b",         "clickhouse://h",           "clickhouse:///a.b",
                        "clickhouse://h/a",     "clickhouse://h/a.b-c",     "clickhouse://h/1a.b",
                        "clickhouse://h:0/a.b", "clickhouse://h:70000/a.b", "clickhouse://h:x/a.b"};
  for (size_t i = 0; i < sizeof badv / sizeof badv[0]; i++) {
    err[0] = '\0';
    CHECK_MSG(ship_target_parse(badv[i], &t, err, sizeof err) < 0, "%s", badv[i]);
    CHECK_MSG(strstr(err, badv[i]) != NULL, "%s: %s", badv[i], err);
  }
}

static void test_sql(void) {
  ship_target t;
  char err[SHIP_ERRLEN];
  CHECK(ship_target_parse("clickhouse://h/fleet.d", &t, err, sizeof err) == 0);
  json_buf a, b;
  json_buf_init(&a, NULL);
  json_buf_init(&b, NULL);
  ship_table_sql(&t, &a, &b);
  CHECK(strstr(a.data, "CREATE TABLE IF NOT EXISTS fleet.d (") != NULL);
  CHECK(strstr(a.data, "ENGINE = ReplacingMergeTree()") != NULL);
  CHECK(strstr(a.data, "ORDER BY id") != NULL);
  CHECK(strstr(a.data, "snapshot String") != NULL);
  CHECK(strstr(b.data, "fleet.d_versions") != NULL);
  json_buf_free(&a);
  json_buf_free(&b);
}

static void test_status(void) {
  char dir[] = "/tmp/verdict-test-ship-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  ship_opts o;
  ship_opts_init(&o);
  o.dir = dir;
  o.url = "clickhouse://127.0.0.1:1/fleet.d";
  o.node = "n-1";
  shipper *s;
  int usage;
  char err[SHIP_ERRLEN] = "";
  CHECK_MSG(shipper_new(&o, &s, &usage, err, sizeof err) == 0, "%s", err);
  char path[256];
  snprintf(path, sizeof path, "%s/ship-n-1.cursor", dir);
  CHECK(access(path, F_OK) == 0);
  json_buf b;
  json_buf_init(&b, NULL);
  shipper_status_json(s, &b);
  arena a;
  arena_init(&a, NULL, 0, 0);
  value v;
  CHECK(json_parse(&a, b.data, b.len, NULL, &v, NULL) == 0 && v.kind == V_MAP);
  const char *keys[] = {"target",  "node",       "shipped",     "batches",
                        "retries", "versions",   "lag_records", "lag_seconds",
                        "failing", "last_error", "cursor"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    CHECK_MSG(value_map_get(&v, keys[i], strlen(keys[i])) != NULL, "%s", keys[i]);
  const value *node = value_map_get(&v, "node", 4);
  CHECK(node && node->kind == V_STRING && node->n == 3 && memcmp(node->s, "n-1", 3) == 0);
  CHECK(value_map_get(&v, "last_error", 10)->kind == V_NULL);
  arena_free(&a);
  json_buf_free(&b);
  shipper_free(s);
  /* usage errors are said as such */
  o.node = "a/b";
  CHECK(shipper_new(&o, &s, &usage, err, sizeof err) < 0 && usage == 1);
  CHECK(strstr(err, "--node") != NULL);
  shipper_free(s);
  ship_remove_folder(dir);
}

int main(void) {
  TEST_RUN(test_target);
  TEST_RUN(test_sql);
  TEST_RUN(test_status);
  TEST_END();
}
