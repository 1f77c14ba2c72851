#!/usr/bin/env bash
# redis_faults.sh — Redis down, then slow, while `verdict serve --state
# redis://…` is under a steady stream of decisions (issue 9, "Faults"), once
# for each fallback `--state-on-error` declares (local, allow, deny). Down is
# a stopped redis-server; slow is one frozen with SIGSTOP, so that every
# command misses --state-timeout. Asserted each time: not one decision of the
# load fails; a new caller's answer is the declared fallback's (local:
# counted on this node, the budget holds; allow: nothing refused; deny:
# refused at once); the snapshot marks the reading `"degraded": true`; the
# failures and fallbacks are counted in /metrics
# (verdict_state_remote_errors_total, verdict_state_fallbacks_total); and
# once Redis is back, counting returns to it (readings are not degraded any
# more, and after a freeze a caller's count made in Redis before it holds). Skipped, and says so, without redis-server
# (`scripts/deps --test` installs it). Run from the repo root with the build
# folder as $1.
set -u
BUILD=${1:?usage: redis_faults.sh BUILD_DIR}
VD="$BUILD/verdict"
HERE=$(dirname "$0")
PY=/usr/bin/python3
if ! command -v redis-server >/dev/null; then
  echo "redis_faults.sh: redis-server not found (scripts/deps --test installs it): skipped"
  exit 0
fi
TEST_NAME=hardening/redis_faults
. "$HERE/../lib.sh"
scratch
need curl
LOAD= RPID=
on_exit() { # redis-server thawed so the load can end; the server before redis-server
  touch "$T/stop" 2>/dev/null
  if [ -n "$RPID" ]; then kill -CONT "$RPID" 2>/dev/null; fi
  if [ -n "$LOAD" ]; then wait "$LOAD" 2>/dev/null; fi
  kill_wait KILL "$PID"
  PID=
  kill_wait KILL "$RPID"
}
listening() { $PY -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), timeout=1)" 2>/dev/null; }

RPORT=$(free_port)
redis_start() {
  redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$T" \
    --loglevel warning >/dev/null 2>&1 &
  RPID=$!
  for _ in $(seq 1 100); do listening "$RPORT" && return 0; sleep 0.05; done
  bad "redis-server did not start"; exit 1
}
redis_stop() { kill -TERM "$RPID"; wait "$RPID" 2>/dev/null; RPID=; }

start() { # start MODE
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  LOG="$T/serve-$1.log"
  "$VD" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 2 --no-store \
    --snapshots "$T/snap-$1" --durability always \
    --state "redis://127.0.0.1:$RPORT" --state-on-error "$1" --state-timeout 100 2>"$LOG" &
  PID=$!
  wait_ready "$1" "$LOG"
}
load_start() {
  rm -f "$T/stop" "$T/load.json"
  echo 0 >"$T/progress"
  $PY "$HERE/faultload.py" --port "$PORT" --stop "$T/stop" --out "$T/load.json" \
    --progress "$T/progress" --threads 3 --min 200 "$T/req-a.json" "$T/req-b.json" "$T/req-c.json" &
  LOAD=$!
}
wait_more() { # wait_more N: until the load has had N more answers (bounded)
  local want=$(($(cat "$T/progress") + $1))
  for _ in $(seq 1 900); do
    [ "$(cat "$T/progress")" -ge "$want" ] && return 0
    sleep 0.1
  done
  bad "the load did not go on (at $(cat "$T/progress"), want $want)"
}
load_stop() { # load_stop DESCRIPTION
  touch "$T/stop"; wait "$LOAD"; LOAD=
  local s; s=$($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["failed"], d["conn"], d["total"] >= 200)' "$T/load.json")
  eq "$s" "0 0 True" "$1: no failed decision, no failed connection, 200+ answered"
  [ "$s" = "0 0 True" ] || cat "$T/load.json" >&2
}
metric() { curl -s "$URL/metrics" | sed -n "s/^$1 //p"; }
# calls KEY N: N decisions for caller KEY; prints their actions, space-separated
calls() {
  local out=""
  for _ in $(seq 1 "$2"); do
    out="$out $(curl -s "$URL/v1/decide" -d "{\"action\":\"api_call\",\"key\":\"$1\"}" |
      $PY -c 'import json,sys; print(json.load(sys.stdin)["action"])')"
  done
  echo "${out# }"
}
# degraded KEY: the "degraded" flag of the quota reading in KEY's next decision's snapshot
degraded() {
  local id
  id=$(curl -s "$URL/v1/decide" -d "{\"action\":\"api_call\",\"key\":\"$1\"}" |
    $PY -c 'import json,sys; print(json.load(sys.stdin)["snapshot_id"])')
  curl -s "$URL/v1/snapshots/$id" |
    $PY -c 'import json,sys; print(json.load(sys.stdin)["inputs"]["counters"]["quota"].get("degraded", False))'
}
# back_to_redis TAG: until readings come from Redis again (a new caller's
# snapshot is no longer degraded), bounded
back_to_redis() {
  for n in $(seq 1 100); do
    [ "$(degraded "back-$1-$n")" = False ] && return 0
    sleep 0.1
  done
  return 1
}
# expect MODE: what a new caller's 5 calls get while Redis fails
expect() {
  case $1 in
    local) echo "allow allow allow block block" ;; # counted on this node
    allow) echo "allow allow allow allow allow" ;; # nothing refused
    deny) echo "block block block block block" ;;  # everyone refused
  esac
}

mkdir -p "$T/bundle"
cat >"$T/bundle/api.yaml" <<'YAML'
strategy: api
decision_points: [api_call]
actions:
  allow: {allowed: true}
  block: {allowed: false}
limits:
  quota:
    key: request.key
    window: 1h
    budget: 3
    action: block
    reason: the key's quota is used up
default: allow
YAML
for k in a b c; do echo "{\"action\":\"api_call\",\"key\":\"load-$k\"}" >"$T/req-$k.json"; done

redis_start
for MODE in local allow deny; do
  start "$MODE"
  # healthy: counted in Redis
  eq "$(calls before 5)" "allow allow allow block block" "$MODE, Redis up: the budget holds"
  eq "$(calls "fresh-$MODE" 1)" allow "$MODE, Redis up: a new caller is allowed"
  eq "$(degraded before)" False "$MODE, Redis up: the reading is not degraded"
  load_start
  wait_more 50

  # ---- down ----
  redis_stop
  wait_more 100
  eq "$(calls "down-$MODE" 5)" "$(expect "$MODE")" "$MODE, Redis down: a new caller gets the declared fallback"
  eq "$(degraded "down-$MODE")" True "$MODE, Redis down: the snapshot marks the reading degraded"
  E1=$(metric verdict_state_remote_errors_total)
  F1=$(metric verdict_state_fallbacks_total)
  [ "${E1:-0}" -gt 0 ] && ok || bad "$MODE, Redis down: remote errors counted (got '$E1')"
  [ "${F1:-0}" -ge 5 ] && ok || bad "$MODE, Redis down: fallbacks counted (got '$F1')"
  redis_start
  back_to_redis "$MODE-up" && ok || bad "$MODE: counting did not return to Redis after it restarted"
  wait_more 50
  F2=$(metric verdict_state_fallbacks_total)
  # a caller that uses up its budget in Redis before it freezes
  eq "$(calls "kept-$MODE" 3)" "allow allow allow" "$MODE, Redis back: counted in Redis again"

  # ---- slow: frozen, every command misses --state-timeout ----
  kill -STOP "$RPID"
  wait_more 50
  eq "$(calls "slow-$MODE" 5)" "$(expect "$MODE")" "$MODE, Redis slow: a new caller gets the declared fallback"
  eq "$(degraded "slow-$MODE")" True "$MODE, Redis slow: the snapshot marks the reading degraded"
  F3=$(metric verdict_state_fallbacks_total)
  [ "${F3:-0}" -ge $((F2 + 5)) ] && ok || bad "$MODE, Redis slow: fallbacks counted (got '$F3', before '$F2')"
  kill -CONT "$RPID"
  back_to_redis "$MODE-thawed" && ok || bad "$MODE: counting did not return to Redis after it thawed"
  eq "$(calls "kept-$MODE" 1)" block "$MODE, Redis thawed: the count it held from before applies again"
  wait_more 50
  load_stop "$MODE: Redis down, then slow"
  stop
  # a fresh Redis for the next mode: a flushed counter state
  redis_stop
  redis_start
done

summary
[ "$fail" -eq 0 ]
