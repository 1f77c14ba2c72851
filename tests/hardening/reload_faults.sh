#!/usr/bin/env bash
# reload_faults.sh — a reload that must fail, under a steady stream of
# decisions (issue 9, "Faults"): the fallback model file missing, then
# corrupt, on `POST /v1/policies/reload` and on SIGHUP; then a strategy file
# with a YAML syntax error pushed into a bundle served with --watch. Each
# time the reload is refused with its error (the file, and why), the old
# bundle and its model keep serving, not one decision of the load fails, and
# the failure shows in /metrics (verdict_reloads_total{result="failed"}), in
# /v1/policies (reload_failures) and in the log (reload_failed). Putting the
# good file back reloads again. Run from the repo root with the build folder
# as $1; works on a copy of examples/policies in a temp folder.
set -u
BUILD=${1:?usage: reload_faults.sh BUILD_DIR}
VD="$BUILD/verdict"
HERE=$(dirname "$0")
PY=/usr/bin/python3
TEST_NAME=hardening/reload_faults
. "$HERE/../lib.sh"
scratch
need curl
LOAD=
on_exit() { # the load stops before the server is killed
  touch "$T/stop" 2>/dev/null
  if [ -n "$LOAD" ]; then wait "$LOAD" 2>/dev/null; fi
}

start() { # start NAME [serve options...]
  local name=$1; shift
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  LOG="$T/$name.log"
  "$VD" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 2 \
    --snapshots "$T/snap-$name" --store "$T/store" --admin-token-file "$T/token" "$@" 2>"$LOG" &
  PID=$!
  wait_ready "$name" "$LOG"
}
# load_start: the steady stream, in the background.
load_start() {
  rm -f "$T/stop" "$T/progress" "$T/load.json"
  echo 0 >"$T/progress"
  $PY "$HERE/faultload.py" --port "$PORT" --stop "$T/stop" --out "$T/load.json" \
    --progress "$T/progress" --threads 3 --min 300 "$T/req-model.json" "$T/req-probe.json" \
    "$T/req-login.json" &
  LOAD=$!
}
# wait_more N: until the load has had N more answers (bounded).
wait_more() {
  local want=$(($(cat "$T/progress") + $1))
  for _ in $(seq 1 600); do
    [ "$(cat "$T/progress")" -ge "$want" ] && return 0
    sleep 0.1
  done
  bad "the load did not go on (at $(cat "$T/progress"), want $want)"
}
load_stop() { # load_stop DESCRIPTION: every decision answered 2xx
  touch "$T/stop"; wait "$LOAD"; LOAD=
  local s; s=$($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["failed"], d["conn"], d["total"] >= 300)' "$T/load.json")
  eq "$s" "0 0 True" "$1: no failed decision, no failed connection, 300+ answered"
  [ "$s" = "0 0 True" ] || cat "$T/load.json" >&2
}
reload_http() { # reload_http: POST /v1/policies/reload; body in $T/body, status in $CODE
  CODE=$(curl -s -o "$T/body" -w '%{http_code}' -X POST "$URL/v1/policies/reload" \
    -H "Authorization: Bearer $TOKEN")
}
live() { curl -s "$URL/v1/policies" | $PY -c 'import json,sys; d=json.load(sys.stdin); print(d["live"]["version"], d["reload_failures"])'; }
failed_reloads() { curl -s "$URL/metrics" | sed -n 's/^verdict_reloads_total{result="failed"} //p'; }
decide_model() { # the model request: prints source and model_version
  curl -s "$URL/v1/decide" --data-binary @"$T/req-model.json" |
    $PY -c 'import json,sys; d=json.load(sys.stdin); print(d["source"], d["model_version"])'
}
wait_log() { # wait_log TEXT: until the server's log has a line with TEXT (bounded)
  for _ in $(seq 1 300); do grep -qF -- "$1" "$LOG" && return 0; sleep 0.1; done
  return 1
}

mkdir -p "$T/bundle"
for f in examples/policies/*; do cp -r "$f" "$T/bundle/"; done
TOKEN=verdict-fault-token-$RANDOM-$RANDOM-0123456789
printf '%s\n' "$TOKEN" >"$T/token"
MODEL="$T/bundle/models/clef-default-v3.json"
cp "$MODEL" "$T/model.good"
# no rule decides it: the fallback model does
echo '{"action":"http_request","context":{"method":"GET","path":"/products/espresso-grinder","client_ip":"81.2.69.160","headers":{"user-agent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 Safari/605.1.15"},"env":{"country":"GB"}}}' >"$T/req-model.json"
echo '{"action":"http_request","context":{"method":"GET","path":"/.env","client_ip":"81.2.69.160","headers":{"user-agent":"Mozilla/5.0"},"env":{"country":"GB"}}}' >"$T/req-probe.json"
echo '{"action":"login","context":{"ip":"203.0.113.7","user":"ana"}}' >"$T/req-login.json"

# ======== the model file, missing and corrupt, reloaded over HTTP and by SIGHUP ========
start model
read -r V0 F0 < <(live)
eq "$F0" 0 "model: no failed reload yet"
read -r SRC MV0 < <(decide_model)
eq "$SRC" model "model: the request goes to the fallback model"
load_start
wait_more 100

# -- missing --
mv "$MODEL" "$T/model.moved"
reload_http
eq "$CODE" 422 "model missing: reload refused (422)"
has "$T/body" '"code":"policy"' "model missing: a policy error"
has "$T/body" "cannot read the model" "model missing: the error says the model cannot be read"
has "$T/body" "clef-default-v3.json: No such file or directory" "model missing: the error names the file and why"
has "$T/body" "\"policy_version\":\"$V0\"" "model missing: the answer names the version still serving"
wait_more 100
read -r V F < <(live)
eq "$V $F" "$V0 1" "model missing: /v1/policies: the old version serves, 1 failed reload"
eq "$(failed_reloads)" 1 "model missing: /metrics counts the failed reload"
eq "$(decide_model)" "model $MV0" "model missing: the old model still decides"
has "$LOG" '"event":"reload_failed"' "model missing: logged"

# -- corrupt: cut in half, then not a model at all; by HTTP and by SIGHUP --
head -c 20000 "$T/model.good" >"$MODEL"
reload_http
eq "$CODE" 422 "model cut short: reload refused (422)"
has "$T/body" "clef-default-v3.json" "model cut short: the error names the model file"
echo '{"learner": 5}' >"$MODEL"
reload_http
eq "$CODE" 422 "model corrupt: reload refused (422)"
has "$T/body" "clef-default-v3.json" "model corrupt: the error names the model file"
kill -HUP "$PID"
for _ in $(seq 1 300); do [ "$(failed_reloads)" = 4 ] && break; sleep 0.1; done
eq "$(failed_reloads)" 4 "model corrupt: SIGHUP refused too, counted"
[ "$(grep -c '"trigger":"signal"' "$LOG")" -ge 1 ] && ok || bad "model corrupt: SIGHUP's failure logged"
wait_more 100
read -r V F < <(live)
eq "$V $F" "$V0 4" "model corrupt: the old version serves, 4 failed reloads"
eq "$(decide_model)" "model $MV0" "model corrupt: the old model still decides"

# -- back: the reload goes through, to the same version --
cp "$T/model.good" "$MODEL"
reload_http
eq "$CODE" 200 "model restored: reloaded"
has "$T/body" '"changed":false' "model restored: the same version"
eq "$(failed_reloads)" 4 "model restored: no new failure"
wait_more 100
load_stop "model faults"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["model_versions"]), d["sources"].get("model", 0) > 0)' "$T/load.json" >"$T/mv"
eq "$(cat "$T/mv")" "1 True" "model faults: the load's model decisions all by the one model"
stop

# ======== a YAML syntax error pushed into a bundle served with --watch ========
start watch --watch
read -r V0 F0 < <(live)
load_start
wait_more 100
cp "$T/bundle/throttle.yaml" "$T/throttle.good"
# pushed as a deploy would: written beside, then renamed in
sed 's/^  allow: {allowed: true}/  allow: {allowed: true/' "$T/throttle.good" >"$T/bundle/.throttle.yaml.new"
mv "$T/bundle/.throttle.yaml.new" "$T/bundle/throttle.yaml"
wait_log '"event":"reload_failed"' || bad "yaml syntax: --watch did not try the reload"
has "$LOG" '"trigger":"watch"' "yaml syntax: the reload was --watch's"
has "$LOG" 'throttle.yaml:12:8: YAML syntax' "yaml syntax: the log names file, line and column"
wait_more 100
read -r V F < <(live)
eq "$V $F" "$V0 1" "yaml syntax: the old version serves, 1 failed reload"
eq "$(failed_reloads)" 1 "yaml syntax: /metrics counts it"
eq "$(curl -s "$URL/v1/decide" --data-binary @"$T/req-login.json" | $PY -c 'import json,sys; print(json.load(sys.stdin)["strategy"])')" throttle \
  "yaml syntax: the broken file's strategy still decides"
# the fixed file, pushed the same way: --watch reloads it
cp "$T/throttle.good" "$T/bundle/.throttle.yaml.new"
mv "$T/bundle/.throttle.yaml.new" "$T/bundle/throttle.yaml"
wait_log '"event":"reload",' || bad "yaml fixed: --watch did not reload"
eq "$(failed_reloads)" 1 "yaml fixed: no new failure"
wait_more 100
load_stop "yaml syntax error under --watch"
stop

summary
[ "$fail" -eq 0 ]
