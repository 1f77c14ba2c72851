#!/usr/bin/env bash
# kill_reload.sh — `verdict serve` killed with SIGKILL at random moments
# while policy reloads run under load (issue 9, "Faults").
#
# Each round starts the server (--store, --snapshots, --durability always)
# on the same folders, puts it under a steady stream of decisions, and
# changes the bundle over and over (a strategy file rewritten and renamed
# in, so every reload writes a new version into the store) while reloads are
# asked for by SIGHUP and by POST /v1/policies/reload; after a random delay
# the server is killed. Asserted:
#   - every restart comes up and serves (the snapshot log reopens: recovery);
#   - not one decision is answered with an error;
#   - the version store never holds a torn entry under its real name: every
#     stored strategy and model file hashes to its name, every parsed-cache
#     entry names a stored version (temporary files may be left; they are
#     hidden and never read);
#   - every decision acknowledged (a 2xx with its snapshot id, under
#     --durability always) is in the log once, and the strategy version it
#     names is in the store.
# Then torn entries are made on purpose (stored versions and the model cut
# in half, as a crash of a machine without ordered writes could leave them):
# the server must detect them, parse the files again, serve the same
# version, and put whole entries back. Run from the repo root with the build
# folder as $1; works on a copy of examples/policies in a temp folder.
set -u
BUILD=${1:?usage: kill_reload.sh BUILD_DIR}
VD="$BUILD/verdict"
HERE=$(dirname "$0")
PY=/usr/bin/python3
ROUNDS=${KILL_RELOAD_ROUNDS:-20}
SHADOW=${KILL_RELOAD_SHADOW:-0} # 1: with a shadow bundle (kill_shadow.sh)
TEST_NAME=${TEST_NAME:-hardening/kill_reload}
. "$HERE/../lib.sh"
scratch
need curl
LOAD= REL=
on_exit() { # the server killed first, the reloads and the load end, then it is waited for
  touch "$T/stop" 2>/dev/null
  if [ -n "$PID" ]; then kill -KILL "$PID" 2>/dev/null; fi
  if [ -n "$REL" ]; then wait "$REL" 2>/dev/null; fi
  if [ -n "$LOAD" ]; then wait "$LOAD" 2>/dev/null; fi
  if [ -n "$PID" ]; then wait "$PID" 2>/dev/null; fi
  PID=
}
SNAP="$T/snap"
STORE="$T/store"
start() { # start NAME: the server on the same folders; fails the test unless it serves
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  LOG="$T/serve-$1.log"
  "$VD" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 2 \
    --snapshots "$SNAP" --store "$STORE" --durability always \
    --admin-token-file "$T/token" ${SHADOW_ARGS[@]+"${SHADOW_ARGS[@]}"} 2>"$LOG" &
  PID=$!
  for _ in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/readyz")" = 200 ] && break
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/decide" --data-binary @"$T/req-probe.json")" = 200 ]; then
    ok
  else
    bad "$1: the server did not restart and serve"; sed 's/^/  log: /' "$LOG" >&2
    summary; exit 1
  fi
}
# write_extra TAG: a new version of extra.yaml, renamed in as a deploy would
write_extra() {
  cat >"$T/bundle/.extra.yaml.tmp" <<YAML
strategy: extra
decision_points: [extra]
rules:
  - name: flagged
    if: context.flag == true
    action: deny
    reason: flagged ($1)
default: allow
YAML
  mv "$T/bundle/.extra.yaml.tmp" "$T/bundle/extra.yaml"
}
# reloader ROUND: change the bundle and reload, by turns SIGHUP and HTTP, until stop
reloader() {
  local k=0
  while [ ! -e "$T/stop" ]; do
    k=$((k + 1))
    write_extra "$1-$k"
    if [ $((k % 2)) = 0 ]; then
      kill -HUP "$PID" 2>/dev/null
    else
      curl -s -o /dev/null --max-time 10 -X POST "$URL/v1/policies/reload" -H "Authorization: Bearer $TOKEN"
    fi
    sleep "0.0$((RANDOM % 5))"
  done
}
# store_check: prints "ok" or what is wrong
store_check() {
  $PY - "$STORE" <<'PYEOF'
import hashlib, os, re, sys
store = sys.argv[1]
bad = []
def check(d, ext):
    if not os.path.isdir(d):
        return 0
    n = 0
    for f in os.listdir(d):
        if f.startswith(".") or not f.endswith(ext):
            continue
        n += 1
        h = hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest()
        if h != f[: -len(ext)]:
            bad.append("%s: content hashes to %s" % (f, h[:12]))
    return n
n = check(store, ".json")
check(os.path.join(store, "models"), ".json")
check(os.path.join(store, "models"), ".features.yaml")
pd = os.path.join(store, "parsed")
if os.path.isdir(pd):
    for f in os.listdir(pd):
        if f.startswith("."):
            continue
        t = open(os.path.join(pd, f), "rb").read()
        if not re.fullmatch(rb"[0-9a-f]{64}\n[0-9a-f]{8}\n", t):  # version, CRC32C of its stored form
            bad.append("parsed/%s: not a version and checksum: %r" % (f[:12], t[:80]))
        elif not os.path.exists(os.path.join(store, t[:64].decode() + ".json")):
            bad.append("parsed/%s: names a version not stored" % f[:12])
if n == 0:
    bad.append("no strategy version stored")
print("ok" if not bad else "; ".join(bad[:5]))
PYEOF
}

mkdir -p "$T/bundle"
for f in examples/policies/*; do cp -r "$f" "$T/bundle/"; done
write_extra start
SHADOW_ARGS=()
if [ "$SHADOW" = 1 ]; then # the same bundle, one reason changed: a second version of a strategy
  mkdir -p "$T/shadow"
  for f in "$T"/bundle/*; do cp -r "$f" "$T/shadow/"; done
  sed -i 's/reason: flagged (start)/reason: flagged by the shadow/' "$T/shadow/extra.yaml"
  SHADOW_ARGS=(--shadow "$T/shadow")
fi
TOKEN=verdict-kill-token-$RANDOM-$RANDOM-0123456789
printf '%s\n' "$TOKEN" >"$T/token"
echo '{"action":"http_request","context":{"method":"GET","path":"/products/espresso-grinder","client_ip":"81.2.69.160","headers":{"user-agent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 Safari/605.1.15"},"env":{"country":"GB"}}}' >"$T/req-model.json"
echo '{"action":"http_request","context":{"method":"GET","path":"/.env","client_ip":"81.2.69.160","headers":{"user-agent":"Mozilla/5.0"},"env":{"country":"GB"}}}' >"$T/req-probe.json"
echo '{"action":"login","context":{"ip":"203.0.113.7","user":"ana"}}' >"$T/req-login.json"
echo '{"action":"extra","context":{"flag":true}}' >"$T/req-extra.json"
: >"$T/ids"

conn_failures=0 answered=0
for round in $(seq 1 "$ROUNDS"); do
  start "round $round"
  rm -f "$T/stop"
  $PY "$HERE/faultload.py" --port "$PORT" --stop "$T/stop" --out "$T/load.json" --ids "$T/ids" \
    --threads 3 "$T/req-model.json" "$T/req-extra.json" "$T/req-probe.json" "$T/req-login.json" &
  LOAD=$!
  reloader "$round" &
  REL=$!
  # the kill lands while reloads run: wait for this round's first one (however
  # slow the build), then a random moment more
  for _ in $(seq 1 600); do
    grep -q '"event":"reload"' "$LOG" && break
    sleep 0.05
  done
  sleep "$((RANDOM % 2)).$((RANDOM % 10))"
  { # (bash's "Killed" notice for the server is not news here)
    kill -KILL "$PID"
    touch "$T/stop"
    wait "$REL"
    wait "$LOAD"
    wait "$PID"
  } 2>/dev/null
  REL= LOAD= PID=
  read -r f c a < <($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["failed"], d["conn"], d["total"])' "$T/load.json")
  eq "$f" 0 "round $round: no decision answered with an error"
  [ "$f" = 0 ] || cat "$T/load.json" >&2
  conn_failures=$((conn_failures + c)) answered=$((answered + a))
  eq "$(store_check)" ok "round $round: the version store after the kill"
done
echo "$ROUNDS kills; $answered decisions answered, $conn_failures requests cut by the kills"

# ---- the log: every acknowledged decision once, its version in the store ----
start final
RELOADS_OK=$(grep -c '"event":"reload"' "$T"/serve-*.log | awk -F: '{s += $2} END {print s}')
[ "$RELOADS_OK" -ge "$ROUNDS" ] && ok || bad "a reload in every round ($RELOADS_OK in $ROUNDS rounds)"
LIVE=$(curl -s "$URL/v1/policies" | $PY -c 'import json,sys; print(json.load(sys.stdin)["live"]["version"])')
curl -s "$URL/v1/policies" | $PY -c 'import json,sys; [print(s["version"]) for s in json.load(sys.stdin)["live"]["strategies"]]' >"$T/live-versions"
kill -TERM "$PID"; wait "$PID"; eq "$?" 0 "final: SIGTERM, exit 0"; PID=
"$VD" snapshots export -s "$SNAP" >"$T/export" 2>"$T/export.err"
eq "$?" 0 "the log reads back"
RES=$($PY - "$T/export" "$T/ids" "$STORE" 2>"$T/shadow-check" <<'PYEOF'
import json, os, sys
seen = {}
versions = set()
for l in open(sys.argv[1]):
    d = json.loads(l)
    seen[d["id"]] = seen.get(d["id"], 0) + 1
    versions.add(d["policy_version"])
acked = [l.strip() for l in open(sys.argv[2]) if l.strip()]
missing = sum(1 for i in acked if i not in seen)
dups = sum(1 for v in seen.values() if v > 1)
unstored = sum(1 for v in versions if not os.path.exists(os.path.join(sys.argv[3], v + ".json")))
print("acked=%d missing=%d dups=%d unstored=%d" % (len(acked) > 0, missing, dups, unstored))
# with a shadow: its records complete answered ones that are in the log (an
# answer, and so its completion, comes only once its own record is durable)
done = [json.loads(l) for l in open(sys.argv[1])]
comp = [d for d in done if "completes" in d]
if os.environ.get("KILL_RELOAD_SHADOW") == "1":
    orphans = sum(1 for d in comp if d["completes"] not in seen)
    print("shadowed=%d orphans=%d" % (len(comp) > 0, orphans), file=sys.stderr)
PYEOF
)
eq "$RES" "acked=1 missing=0 dups=0 unstored=0" "every acknowledged decision is in the log once, its version stored"
if [ "$SHADOW" = 1 ]; then
  eq "$(cat "$T/shadow-check")" "shadowed=1 orphans=0" "the shadow's records complete answered records in the log"
fi
if grep -q skipped "$T/export.err"; then bad "damaged bytes in the log: $(cat "$T/export.err")"; else ok; fi

# ---- torn entries made on purpose: detected, parsed again, repaired ----
# (the live bundle's strategy versions and the model: what a start loads)
while IFS= read -r f; do
  head -c "$(($(stat -c %s "$f") / 2))" "$f" >"$f.cut" && mv "$f.cut" "$f"
done < <(sed "s|^|$STORE/|; s|\$|.json|" "$T/live-versions"; printf '%s\n' "$STORE"/models/*)
[ "$(store_check)" != ok ] && ok || bad "the torn entries were not made"
start torn
eq "$(curl -s "$URL/v1/policies" | $PY -c 'import json,sys; print(json.load(sys.stdin)["live"]["version"])')" "$LIVE" \
  "torn store entries: the same bundle version serves"
eq "$(curl -s "$URL/v1/decide" --data-binary @"$T/req-model.json" | $PY -c 'import json,sys; print(json.load(sys.stdin)["source"])')" model \
  "torn store entries: the model still decides"
kill -TERM "$PID"; wait "$PID"; eq "$?" 0 "torn: SIGTERM, exit 0"; PID=
eq "$(store_check)" ok "torn store entries: whole again"

summary
[ "$fail" -eq 0 ]
