#!/usr/bin/env bash
# fleet.sh — a fleet, end to end (docs/deploy.md, "A fleet"): one real nginx
# serves signed bundles from a scratch folder and load-balances
# POST /v1/decide over two `verdict serve` nodes; each node pulls the signed
# bundle and ships its decisions to one real ClickHouse. A load goes through
# nginx while one node is killed with SIGKILL and started again, ClickHouse
# is stopped and started again, a new signed bundle B is published (both
# nodes swap to it) and then one with a bad signature (both refuse it, B
# keeps serving). No answered decision may fail. At the end ClickHouse holds
# every answered decision once by id, from both nodes, and `verdict replay
# --from` reproduces every one. No timing is asserted: waits poll, bounded.
# Skipped when nginx is not installed.
set -u
BUILD=${1:?usage: fleet.sh BUILD_DIR}
V="$BUILD/verdict"
PY=/usr/bin/python3
. tests/lib.sh
. tests/clickhouse.sh
scratch
. tests/nginx.sh
need curl
LOAD= PA= PB=
on_exit() {
  touch "$T/stop" 2>/dev/null
  if [ -n "$LOAD" ]; then wait "$LOAD" 2>/dev/null; fi
  kill_wait TERM "$NPID"
  kill_wait KILL "$PA"; kill_wait KILL "$PB"
  ch_stop
}

ch_start
CHU="clickhouse://127.0.0.1:$CH_PORT/fleet.decisions"
"$V" ship --create-table "$CHU" >/dev/null 2>"$T/ct.err" || bad "create-table: $(cat "$T/ct.err")"

# ---- the bundles A and B (rules only, so that every decision replays) ----
mk() { # mk DIR RULE: a one-strategy bundle whose probe rule is named RULE
  mkdir -p "$1"
  cat >"$1/gate.yaml" <<YAML
strategy: gate
decision_points: [http_request]
actions:
  allow: true
  block: false
rules:
  - name: $2
    if: path.startsWith("/.git")
    action: block
default: allow
YAML
}
mk "$T/A" probe
mk "$T/B" probe-b
"$V" bundle keygen --out "$T/rel" >/dev/null 2>&1 || bad "keygen"
"$V" bundle keygen --out "$T/other" >/dev/null 2>&1 || bad "keygen other"
for b in A B; do
  "$V" bundle pack "$T/$b" -o "$T/$b.tar.gz" >/dev/null || bad "pack $b"
  "$V" bundle sign --key "$T/rel.key" "$T/$b.tar.gz" >/dev/null || bad "sign $b"
done
# B signed by a key the nodes do not trust
cp "$T/B.tar.gz" "$T/Bx.tar.gz" && "$V" bundle sign --key "$T/other.key" "$T/Bx.tar.gz" >/dev/null ||
  bad "sign Bx"
nginx_www
publish "$T/A.tar.gz" "$T/A.tar.gz.sig"

# ---- nginx: the bundles, and an upstream of the two nodes ----
NPORT=$(free_port); FRONT=$(free_port); APORT=$(free_port); BPORT=$(free_port)
BURL="http://127.0.0.1:$NPORT/bundle.tar.gz"
nginx_start "$BURL" <<EOF
  log_format fleet '\$status|\$upstream_addr|\$upstream_status';

  # the signed bundles the nodes pull
  server {
    listen 127.0.0.1:$NPORT;
    access_log off;
    root "$W";
  }

  upstream verdict_nodes {
    server 127.0.0.1:$APORT max_fails=1 fail_timeout=2s;
    server 127.0.0.1:$BPORT max_fails=1 fail_timeout=2s;
    keepalive 16;
  }
  server {
    listen 127.0.0.1:$FRONT;
    access_log "$T/nginx/logs/decide.log" fleet;
    location /v1/decide {
      proxy_pass http://verdict_nodes;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      # a node that is down or dies mid-request: the other one answers
      # (non_idempotent: POST too; a decision is recorded by the node that answers)
      proxy_next_upstream error timeout non_idempotent;
      proxy_connect_timeout 1s;
      proxy_read_timeout 10s;
    }
  }
EOF

# ---- the two nodes ----
node() { # node a|b: starts node-a or node-b (pulling the bundle, shipping), waits for it
  local n=$1 port
  if [ "$n" = a ]; then port=$APORT; else port=$BPORT; fi
  "$V" serve --bundle-url "$BURL" --bundle-pubkey "$T/rel.pub" --bundle-dir "$T/$n/bundle" \
    --bundle-poll 0.2 --listen "127.0.0.1:$port" --threads 1 \
    --snapshots "$T/$n/snap" --durability always --ship "$CHU" --ship-node "node-$n" \
    2>>"$T/$n.log" &
  PID=$!
  URL="http://127.0.0.1:$port"
  wait_ready "node-$n" "$T/$n.log"
  if [ "$n" = a ]; then PA=$PID; else PB=$PID; fi
  PID=
}
mkdir -p "$T/a" "$T/b"
node a
node b
# sget a|b EXPR: EXPR of the node's GET /v1/status (d)
sget() {
  local port=$APORT; [ "$1" = b ] && port=$BPORT
  curl -s --max-time 5 "http://127.0.0.1:$port/v1/status" >"$T/st-$1.json"
  $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
    "$T/st-$1.json" "$2" 2>/dev/null
}
VER_A=$(sget a 'd["policy"]["version"]')
eq "$(sget b 'd["policy"]["version"]')" "$VER_A" "both nodes serve A"
eq "$(sget a 'd["policy"]["source"]') $(sget b 'd["policy"]["source"]')" "url url" "both pulled from the URL"

# ---- the load, through nginx ----
printf '%s' '{"action":"http_request","context":{"path":"/x","method":"GET","headers":{}}}' >"$T/r1.json"
printf '%s' '{"action":"http_request","context":{"path":"/.git/config","method":"GET","headers":{}}}' >"$T/r2.json"
printf '%s' '{"action":"http_request","context":{"path":"/api/v1","method":"POST","headers":{}}}' >"$T/r3.json"
rm -f "$T/stop"; : >"$T/ids"
$PY tests/hardening/faultload.py --port "$FRONT" --stop "$T/stop" --out "$T/load.json" \
  --ids "$T/ids" --progress "$T/progress" --threads 2 --min 2400 --timeout 30 --give-up 600 \
  "$T/r1.json" "$T/r2.json" "$T/r3.json" &
LOAD=$!
answered() { cat "$T/progress" 2>/dev/null || echo 0; }
wait_more() { # wait_more K WHAT: until the load answered K more (bounded)
  local want=$(($(answered) + $1))
  for _ in $(seq 1 1200); do
    [ "$(answered)" -ge "$want" ] && return 0
    kill -0 "$LOAD" 2>/dev/null || break
    sleep 0.1
  done
  bad "$2: the load did not reach $want answers (at $(answered))"
}
wait_more 300 "the start"

# node-a killed mid-load, node-b answers alone, node-a started again
kill -KILL "$PA"; wait "$PA" 2>/dev/null; PA=
wait_more 300 "node-a down"
node a
wait_more 300 "node-a back"

# ClickHouse down while decisions go on, and up again
ch_stop
for n in a b; do
  for _ in $(seq 1 300); do [ "$(sget $n 'd["ship"]["failing"]')" = True ] && break; sleep 0.1; done
  eq "$(sget $n 'd["ship"]["failing"]')" True "ClickHouse down: node-$n's shipper failing"
done
wait_more 300 "ClickHouse down"
ch_start
wait_more 200 "ClickHouse back"

# B published: both nodes swap to it
publish "$T/B.tar.gz" "$T/B.tar.gz.sig"
for n in a b; do
  for _ in $(seq 1 300); do
    [ "$(sget $n 'd["policy"]["version"]')" != "$VER_A" ] && break; sleep 0.1
  done
done
VER_B=$(sget a 'd["policy"]["version"]')
[ -n "$VER_B" ] && [ "$VER_B" != "$VER_A" ] && ok || bad "node-a did not swap to B"
eq "$(sget b 'd["policy"]["version"]')" "$VER_B" "node-b swapped to B too"
wait_more 200 "B served"

# a bundle with a bad signature: refused by both, B keeps serving
publish "$T/Bx.tar.gz" "$T/Bx.tar.gz.sig"
for n in a b; do
  for _ in $(seq 1 300); do
    sget $n 1 >/dev/null
    grep -qF '"outcome":"refused"' "$T/st-$n.json" && grep -qF "bad signature" "$T/st-$n.json" && break
    sleep 0.1
  done
  has "$T/st-$n.json" '"outcome":"refused"' "node-$n: the bad signature refused"
  has "$T/st-$n.json" "bad signature" "node-$n: /v1/status says why"
  eq "$(sget $n 'd["policy"]["version"]')" "$VER_B" "node-$n: B keeps serving"
done
wait_more 200 "after the refusal"

touch "$T/stop"; wait "$LOAD"; LOAD=
read -r N TOTAL FAILED CONN PVS < <($PY -c 'import json,sys; d=json.load(open(sys.argv[1]))
print(d["ok"], d["total"], d["failed"], d["conn"], ",".join(sorted(d["policy_versions"])))' "$T/load.json")
eq "$FAILED" 0 "no failed decision ($(head -c 400 "$T/load.json"))"
eq "$CONN" 0 "no connection cut on the client side"
eq "$N" "$(wc -l <"$T/ids")" "every answer's snapshot id recorded"
eq "$(echo "$PVS" | tr ',' '\n' | wc -l)" 2 "answered under two policy versions, A's and B's"
# requests nginx sent on to the other node after one failed (the kill cut them)
CUT=$(awk -F'|' '$3 ~ /,/' "$T/nginx/logs/decide.log" | wc -l)
eq "$(awk -F'|' '$1 != 200' "$T/nginx/logs/decide.log" | wc -l)" 0 "nginx answered every decide 200"

# ---- the end: both shippers caught up ----
for _ in $(seq 1 600); do
  [ "$(sget a 'd["ship"]["lag_records"]')" = 0 ] && [ "$(sget b 'd["ship"]["lag_records"]')" = 0 ] &&
    [ "$(sget a 'd["ship"]["failing"]')" = False ] && [ "$(sget b 'd["ship"]["failing"]')" = False ] && break
  sleep 0.2
done
for n in a b; do
  eq "$(sget $n 'd["ship"]["node"], d["ship"]["lag_records"], d["ship"]["failing"]')" \
    "('node-$n', 0, False)" "node-$n: /v1/status: its shipper caught up"
done
ch_query "SELECT id, node FROM fleet.decisions GROUP BY id, node" | grep -v '^$' | LC_ALL=C sort >"$T/ch_rows"
cut -f1 "$T/ch_rows" | LC_ALL=C sort -u >"$T/ch_ids"
LC_ALL=C sort -u "$T/ids" >"$T/ids.sorted"
eq "$(wc -l <"$T/ids.sorted")" "$N" "every answered id is distinct"
eq "$(comm -23 "$T/ids.sorted" "$T/ch_ids" | wc -l)" 0 "every answered snapshot id in ClickHouse"
eq "$(cut -f1 "$T/ch_rows" | uniq -d | wc -l)" 0 "no id from two nodes"
# decisions in ClickHouse nobody got an answer for: only node-a's, recorded
# as it was killed, each one of the requests the kill cut (nginx retried it)
comm -13 "$T/ids.sorted" "$T/ch_ids" >"$T/extra"
X=$(wc -l <"$T/extra")
[ "$X" -le "$CUT" ] && ok || bad "$X decisions recorded but not answered, more than the $CUT requests cut"
eq "$(LC_ALL=C join "$T/extra" "$T/ch_rows" | awk '$2 != "node-a"' | wc -l)" 0 \
  "a decision recorded but not answered is node-a's (the node killed)"
NCH=$((N + X))
eq "$(ch_query "SELECT count(DISTINCT id) FROM fleet.decisions")" "$NCH" \
  "count(DISTINCT id) = answered ($N) + recorded as the kill cut them ($X)"
ch_optimize fleet.decisions
eq "$(ch_query "SELECT count() FROM fleet.decisions")" "$NCH" "after OPTIMIZE FINAL: count() = $NCH"
eq "$(ch_query "SELECT count() FROM (SELECT id FROM fleet.decisions GROUP BY id HAVING count() > 1)")" \
  0 "no id twice"
eq "$(ch_query "SELECT DISTINCT node FROM fleet.decisions ORDER BY node" | grep -v '^$' | paste -sd' ')" \
  "node-a node-b" "both nodes' decisions"
NA=$(ch_query "SELECT count() FROM fleet.decisions WHERE node = 'node-a'")
NB=$(ch_query "SELECT count() FROM fleet.decisions WHERE node = 'node-b'")
eq "$(ch_query "SELECT count(DISTINCT policy_version) FROM fleet.decisions")" 2 "decided under A and B"

# replay from ClickHouse: every decision reproduced
"$V" replay --from "$CHU" --json >"$T/replay.json" 2>"$T/replay.err"
eq "$?" 0 "replay --from: exit 0 ($(head -c 300 "$T/replay.err"))"
eq "$($PY -c '
import json, sys
def find(o):
    if isinstance(o, dict):
        if "reproduced" in o: return o["reproduced"]
        for v in o.values():
            r = find(v)
            if r is not None: return r
    return None
print(find(json.load(open(sys.argv[1]))))' "$T/replay.json" 2>/dev/null)" "$NCH" \
  "replay --from: every decision reproduced ($NCH)"

for n in a b; do
  P=$PA; [ $n = b ] && P=$PB
  kill -TERM "$P"; wait "$P"; eq "$?" 0 "node-$n: SIGTERM, exit 0"
  if [ $n = a ]; then PA=; else PB=; fi
done
echo "fleet: $N of $TOTAL decisions answered through nginx ($NA by node-a, $NB by node-b in ClickHouse)," \
  "$CUT requests cut by the kill and answered by the other node, $X of them recorded by node-a as it died"
summary
[ "$fail" -eq 0 ]
