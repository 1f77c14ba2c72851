#!/usr/bin/env bash
# ship.sh — decisions shipped to a real ClickHouse (a scratch folder, its
# own loopback ports, stopped at the end): `verdict serve --ship` answers a
# few thousand decisions from a load generator while the server is killed
# with SIGKILL and restarted and ClickHouse is stopped and started again;
# then ClickHouse holds every answered decision exactly once by id
# (count(DISTINCT id), and count() after OPTIMIZE ... FINAL), the server's
# /metrics show the shipping, and `verdict replay --from` reproduces every
# one. `verdict ship` as its own process, killed mid-way and run again,
# ships a folder the same way; bad URLs get clear usage errors. No timing
# is asserted: waits poll, bounded.
set -u
BUILD=${1:?usage: ship.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
. tests/clickhouse.sh
scratch
need curl python3
on_exit() { kill_wait KILL "${SHIP:-}"; ch_stop; }

ch_start
CHU="clickhouse://127.0.0.1:$CH_PORT/fleet.decisions"

# ---- bad URLs: usage errors that say what is wanted ----
"$V" ship --create-table "http://127.0.0.1:$CH_PORT/fleet.decisions" >/dev/null 2>"$T/e1"
eq "$?" 2 "ship --create-table http://: exit 2"
has "$T/e1" "want clickhouse://HOST[:PORT]/DB.TABLE" "http:// refused"
"$V" ship --create-table "clickhouse://127.0.0.1:$CH_PORT/fleet" >/dev/null 2>"$T/e2"
eq "$?" 2 "no table: exit 2"
has "$T/e2" "want /DB.TABLE after the host" "no table named"
"$V" ship --create-table "clickhouse://127.0.0.1:99999/fleet.d" >/dev/null 2>"$T/e3"
eq "$?" 2 "port out of range: exit 2"
has "$T/e3" "the port must be a number from 1 to 65535" "port out of range named"
"$V" ship --snapshots "$T" --batch 0 "$CHU" >/dev/null 2>"$T/e4"
eq "$?" 2 "--batch 0: exit 2"
has "$T/e4" "--batch" "--batch named"
"$V" serve --policy examples/policies --snapshots "$T/x" --ship "clickhouse://h/db.t-x" 2>"$T/e5"
eq "$?" 2 "serve --ship with a bad table: exit 2"
has "$T/e5" "--ship wants clickhouse://HOST[:PORT]/DB.TABLE" "serve --ship bad URL named"
"$V" ship --create-table "clickhouse://127.0.0.1:$(free_port)/fleet.decisions" >/dev/null 2>"$T/e6"
eq "$?" 1 "create-table with nothing listening: exit 1"
has "$T/e6" "cannot connect" "nothing listening said"

# ---- the tables ----
"$V" ship --create-table "$CHU" >"$T/ct.out" 2>&1
eq "$?" 0 "create-table"
has "$T/ct.out" "fleet.decisions_versions" "both tables"
"$V" ship --create-table "$CHU" >/dev/null 2>&1
eq "$?" 0 "create-table again (IF NOT EXISTS)"
eq "$(ch_query "SELECT engine FROM system.tables WHERE database = 'fleet' AND name = 'decisions'")" \
  ReplacingMergeTree "the table's engine"

# ---- serve --ship under trouble ----
"$V" gen --kind gate --count 2400 --seed 7 >"$T/gate.jsonl" 2>/dev/null
"$V" gen --kind payment --count 1200 --seed 8 >"$T/pay.jsonl" 2>/dev/null
cat "$T/gate.jsonl" "$T/pay.jsonl" | awk 'NR % 2 == 1' >"$T/a.jsonl"
cat "$T/gate.jsonl" "$T/pay.jsonl" | awk 'NR % 2 == 0' >"$T/b.jsonl"
split -n l/2 -d "$T/a.jsonl" "$T/a."
split -n l/2 -d "$T/b.jsonl" "$T/b."
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
serve() {
  "$V" serve --policy examples/policies --listen "127.0.0.1:$PORT" --threads 2 \
    --snapshots "$T/snap" --durability always --ship "$CHU" --ship-node edge-1 \
    2>>"$T/serve.log" &
  PID=$!
  wait_ready serve "$T/serve.log"
}
load() { python3 tests/fleet/load.py "$URL" "$1" "$T/ids"; }
metric() { curl -s "$URL/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
: >"$T/ids"
serve
N1=$(load "$T/a.00")
# SIGKILL while the shipper works through the first part
kill -KILL "$PID"; wait "$PID" 2>/dev/null; PID=
serve
N2=$(load "$T/a.01")
ch_stop # ClickHouse down while decisions go on
N3=$(load "$T/b.00")
for _ in $(seq 1 100); do [ "$(metric verdict_ship_failing)" = 1 ] && break; sleep 0.1; done
eq "$(metric verdict_ship_failing)" 1 "ClickHouse down: verdict_ship_failing 1"
R=$(metric verdict_ship_retries_total)
[ "${R:-0}" -ge 1 ] && ok || bad "ClickHouse down: retries counted (got '$R')"
curl -s "$URL/metrics" | grep '^verdict_ship_last_error_info' >"$T/lasterr"
has "$T/lasterr" "cannot connect" "the last error on /metrics"
ch_start
N4=$(load "$T/b.01")
N=$((N1 + N2 + N3 + N4))
[ "$N" -ge 3000 ] && ok || bad "the load: $N decisions answered (want 3600)"
eq "$N" "$(wc -l <"$T/ids")" "every answer counted"
# wait (bounded) for the shipper to catch up: lag 0 and every id in ClickHouse
for _ in $(seq 1 600); do
  [ "$(metric verdict_ship_lag_records)" = 0 ] &&
    [ "$(ch_query "SELECT count(DISTINCT id) FROM fleet.decisions")" = "$N" ] && break
  sleep 0.2
done
eq "$(metric verdict_ship_lag_records)" 0 "lag 0 at the end"
eq "$(metric verdict_ship_lag_seconds)" 0 "lag 0 s at the end"
eq "$(metric verdict_ship_failing)" 0 "not failing at the end"
eq "$(ch_query "SELECT count(DISTINCT id) FROM fleet.decisions")" "$N" "count(DISTINCT id) = decisions answered"
# every answered id is there
ch_query "SELECT id FROM fleet.decisions GROUP BY id" | LC_ALL=C sort >"$T/ch_ids"
LC_ALL=C sort -u "$T/ids" >"$T/ids.sorted"
eq "$(comm -23 "$T/ids.sorted" "$T/ch_ids" | wc -l)" 0 "every answered snapshot id in ClickHouse"
eq "$("$V" snapshots list --snapshots "$T/snap" | wc -l)" "$N" "the folder holds the same decisions"
ch_optimize fleet.decisions
eq "$(ch_query "SELECT count() FROM fleet.decisions")" "$N" "after OPTIMIZE FINAL: count() = N"
eq "$(ch_query "SELECT count() FROM (SELECT id FROM fleet.decisions GROUP BY id HAVING count() > 1)")" \
  0 "no id twice"
eq "$(ch_query "SELECT uniqExact(node), any(node) FROM fleet.decisions")" "1	edge-1" "the node"
eq "$(ch_query "SELECT countIf(strategy = '') + countIf(point = '') + countIf(time = 0) FROM fleet.decisions")" \
  0 "strategy, point and time filled"
eq "$(ch_query "SELECT count() FROM fleet.decisions WHERE visitParamHas(snapshot, 'request') = 0")" 0 \
  "the whole snapshot in every row"
V1=$(ch_query "SELECT count() FROM fleet.decisions_versions")
[ "${V1:-0}" -ge 2 ] && ok || bad "versions shipped (got '$V1')"
eq "$(ch_query "SELECT count() FROM (SELECT DISTINCT policy_version FROM fleet.decisions) WHERE concat(policy_version, '.json') NOT IN (SELECT name FROM fleet.decisions_versions)")" \
  0 "every policy version a row names is in the versions table"
curl -s "$URL/metrics" | grep -c '^verdict_ship_' >"$T/nm"
eq "$(cat "$T/nm")" 7 "the shipping metrics"
# the node's status page says the same
curl -s "$URL/v1/status" >"$T/status.json"
eq "$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["ship"]; print(s["node"], s["lag_records"], s["failing"], s["shipped"] >= int(sys.argv[2]))' "$T/status.json" "$N4")" \
  "edge-1 0 False True" "/v1/status: the shipper's node, lag 0, not failing, what it shipped"
stop
has "$T/snap/ship-edge-1.cursor" '"segment": "seg-' "the cursor in the folder"

# replay from ClickHouse: every decision reproduced
"$V" replay --from "$CHU" >"$T/replay.out" 2>"$T/replay.err"
eq "$?" 0 "replay --from: exit 0"
has "$T/replay.out" "every decision reproduced exactly" "replay --from reproduces 100%"
has "$T/replay.out" "payment_authorization" "payment decisions replayed"
"$V" replay --from "$CHU" --since 1h --json >"$T/replay.json" 2>/dev/null
eq "$?" 0 "replay --from --since 1h"
eq "$(python3 -c '
import json, sys
def find(o):
    if isinstance(o, dict):
        if "reproduced" in o: return o["reproduced"]
        for v in o.values():
            r = find(v)
            if r is not None: return r
    return None
print(find(json.load(open(sys.argv[1]))))' "$T/replay.json" 2>/dev/null)" "$N" "replay --from --since 1h: every decision reproduced"
"$V" replay --from "clickhouse://127.0.0.1:$CH_PORT/fleet.nothere" >/dev/null 2>"$T/rerr"
eq "$?" 1 "replay --from a missing table: exit 1"
has "$T/rerr" "fleet.nothere" "the missing table named"

# ---- verdict ship, its own process: killed mid-way, run again ----
CH2="clickhouse://127.0.0.1:$CH_PORT/fleet.solo"
"$V" ship --create-table "$CH2" >/dev/null
"$V" ship --snapshots "$T/snap" --node solo --batch 50 "$CH2" 2>"$T/solo.log" &
SHIP=$!
for _ in $(seq 1 300); do
  [ "$(ch_query "SELECT count() FROM fleet.solo")" -ge 200 ] && break
  sleep 0.05
done
kill -KILL "$SHIP"; wait "$SHIP" 2>/dev/null; SHIP=
C1=$(ch_query "SELECT count(DISTINCT id) FROM fleet.solo")
[ "$C1" -gt 0 ] && ok || bad "the killed shipper had shipped some ($C1)"
"$V" ship --snapshots "$T/snap" --node solo --batch 500 --once "$CH2" 2>"$T/solo2.log"
eq "$?" 0 "ship --once after the kill"
eq "$(ch_query "SELECT count(DISTINCT id) FROM fleet.solo")" "$N" "solo: count(DISTINCT id) = N"
ch_optimize fleet.solo
eq "$(ch_query "SELECT count() FROM fleet.solo")" "$N" "solo: count() after OPTIMIZE FINAL"
"$V" ship --snapshots "$T/snap" --node solo --once "$CH2" 2>"$T/solo3.log"
has "$T/solo3.log" "0 records in 0 batches" "nothing shipped twice once caught up"
# a following shipper stops on SIGTERM with exit 0
"$V" ship --snapshots "$T/snap" --node solo "$CH2" 2>/dev/null &
SHIP=$!
sleep 0.5
kill -TERM "$SHIP"; wait "$SHIP"; eq "$?" 0 "SIGTERM stops a following shipper, exit 0"; SHIP=
# a damaged cursor is named
echo 'not json' >"$T/snap/ship-solo.cursor"
"$V" ship --snapshots "$T/snap" --node solo --once "$CH2" 2>"$T/cur.err"
eq "$?" 1 "a damaged cursor: exit 1"
has "$T/cur.err" "ship-solo.cursor: not a shipping cursor" "the damaged cursor named"

# ---- retention never removes what a shipper has not shipped ----
"$V" ship --snapshots "$T/snap" --node late "clickhouse://127.0.0.1:$(free_port)/fleet.late" \
  2>/dev/null &
SHIP=$!
for _ in $(seq 1 100); do [ -f "$T/snap/ship-late.cursor" ] && break; sleep 0.05; done
kill -TERM "$SHIP"; wait "$SHIP"; SHIP=
has "$T/snap/ship-late.cursor" '"segment": ""' "a new shipper's cursor holds the folder from the start"
GC="snapshots gc --snapshots $T/snap --keep-days 0 --sample 0 --min-confidence 0 --dry-run"
"$V" $GC >"$T/gc1.out" 2>&1
has "$T/gc1.out" "not shipped yet" "gc: unshipped segments skipped"
has "$T/gc1.out" "0 removed" "gc: nothing unshipped removed"
rm -f "$T/snap"/ship-*.cursor
"$V" $GC >"$T/gc2.out" 2>&1
hasnt "$T/gc2.out" "not shipped yet" "gc without cursors: nothing held"
hasnt "$T/gc2.out" " 0 removed" "gc without cursors: old unremarkable records go"
summary
[ "$fail" -eq 0 ]
