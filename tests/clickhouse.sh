# tests/clickhouse.sh — a real ClickHouse server for a shell test: its own
# config, data and log in $T/ch, its own loopback ports (free_port), started
# once per test and stopped by the test's on_exit. Source it after tests/lib.sh
# and `scratch`:
#
#   . tests/clickhouse.sh
#   on_exit() { ch_stop; }
#   ch_start            # sets CH_HTTP (http://127.0.0.1:PORT), CH_PORT, CH_PID
#   ch_query 'SELECT 1' # the answer on stdout; fails the test if refused
#   ch_stop / ch_start  # a test that takes ClickHouse down and up again
#
# The data folder stays between ch_stop and ch_start, so what was stored
# survives a restart; the ports stay the same too.
CH_PID=
ch_config() {
  mkdir -p "$T/ch/data" "$T/ch/tmp" "$T/ch/log" "$T/ch/user_files" "$T/ch/format_schemas"
  [ -n "${CH_PORT:-}" ] || CH_PORT=$(free_port)
  [ -n "${CH_TCP_PORT:-}" ] || CH_TCP_PORT=$(free_port)
  cat >"$T/ch/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$T/ch/log/server.log</log><errorlog>$T/ch/log/error.log</errorlog><console>0</console></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>$CH_PORT</http_port>
  <tcp_port>$CH_TCP_PORT</tcp_port>
  <path>$T/ch/data/</path>
  <tmp_path>$T/ch/tmp/</tmp_path>
  <user_files_path>$T/ch/user_files/</user_files_path>
  <format_schema_path>$T/ch/format_schemas/</format_schema_path>
  <users_config>$T/ch/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
  <max_concurrent_queries>20</max_concurrent_queries>
  <timezone>UTC</timezone>
</yandex>
XML
  cat >"$T/ch/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
    <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
XML
}
ch_start() {
  [ -x /usr/sbin/clickhouse-server ] || command -v clickhouse-server >/dev/null ||
    { echo "$(basename "$0"): clickhouse-server is needed (scripts/deps --test)" >&2; exit 1; }
  ch_config
  local bin=/usr/sbin/clickhouse-server
  [ -x "$bin" ] || bin=$(command -v clickhouse-server)
  "$bin" --config-file="$T/ch/config.xml" >"$T/ch/log/stdout.log" 2>&1 &
  CH_PID=$!
  CH_HTTP="http://127.0.0.1:$CH_PORT"
  for _ in $(seq 1 600); do
    [ "$(curl -s "$CH_HTTP/ping" 2>/dev/null)" = "Ok." ] && return 0
    kill -0 "$CH_PID" 2>/dev/null || break
    sleep 0.1
  done
  bad "ClickHouse did not start"; tail -n 30 "$T/ch/log/stdout.log" "$T/ch/log/error.log" 2>/dev/null | sed 's/^/  ch: /' >&2
  summary; exit 1
}
ch_stop() { # SIGTERM, and wait for it (then SIGKILL if it hangs)
  [ -n "$CH_PID" ] || return 0
  kill -TERM "$CH_PID" 2>/dev/null
  for _ in $(seq 1 300); do kill -0 "$CH_PID" 2>/dev/null || break; sleep 0.1; done
  kill_wait KILL "$CH_PID"; CH_PID=
}
# ch_query SQL: the answer on stdout (TabSeparated); a refused query fails
# the test with ClickHouse's message.
ch_query() {
  local out code
  out=$(curl -s -w '\n%{http_code}' --data-binary "$1" "$CH_HTTP/") || { bad "ch_query: no answer: $1"; return 1; }
  code=${out##*$'\n'}; out=${out%$'\n'*}
  if [ "$code" != 200 ]; then bad "ch_query ($code): $1: $out"; return 1; fi
  printf '%s\n' "$out"
}
# ch_optimize DB.TABLE: OPTIMIZE TABLE ... FINAL until ClickHouse says it
# merged (optimize_throw_if_noop: a merge already running makes it a no-op
# otherwise); bounded, fails the test if it never does.
ch_optimize() {
  local out
  for _ in $(seq 1 100); do
    out=$(curl -s -w '%{http_code}' -o "$T/ch/optimize.out" --data-binary "OPTIMIZE TABLE $1 FINAL" \
      "$CH_HTTP/?optimize_throw_if_noop=1")
    [ "$out" = 200 ] && return 0
    sleep 0.2
  done
  bad "OPTIMIZE TABLE $1 FINAL never merged: $(head -c 300 "$T/ch/optimize.out")"
}
