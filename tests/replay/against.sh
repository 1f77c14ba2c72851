#!/usr/bin/env bash
# against.sh — `verdict replay --against URL` sends the recorded requests of a
# snapshot log to another decision service and scores its answers: checked
# against a stand-in service (decide_server.py, started here on 127.0.0.1)
# whose answers the test predicts from the requests alone. Covers keep-alive
# (one connection for the whole run), chunked answers, Connection: close,
# HTTP/1.0 answers without a length, refused requests (items with errors, the
# run goes on) and a service that is not there (exit 1). Run from the repo
# root with the build folder as $1.
set -u
BUILD=${1:?usage: against.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
SERVER=
on_exit() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null; }

if ! command -v python3 >/dev/null; then
  echo "python3 not found: skipped"; echo "0 passed, 0 failed"; exit 0
fi

start_server() {
  python3 tests/replay/decide_server.py "$@" >"$T/port" 2>"$T/server.err" &
  SERVER=$!
  for _ in $(seq 100); do
    [ -s "$T/port" ] && break
    sleep 0.05
  done
  PORT=$(head -1 "$T/port")
  [ -n "$PORT" ] || { echo "the stand-in server did not start: $(cat "$T/server.err")" >&2; exit 1; }
}
stop_server() {
  kill "$SERVER" 2>/dev/null
  wait "$SERVER" 2>/dev/null
  SERVER=
  : >"$T/port"
}
# "requests connections" as the service counts them (this call is a connection too)
stats() { python3 -c "import json,urllib.request; d=json.load(urllib.request.urlopen('http://127.0.0.1:$PORT/stats')); print(d['requests'], d['connections'])"; }

# ---- recorded traffic: 300 generated requests decided with snapshots on ----
mkdir "$T/bundle" && cp examples/policies/*.yaml "$T/bundle/" && cp -r examples/policies/models "$T/bundle/"
"$V" gen --count 300 --seed 11 --labels "$T/labels.jsonl" >"$T/traffic.jsonl" || bad "verdict gen"
"$V" decide --policy "$T/bundle" --jsonl --snapshots "$T/snaps" "$T/traffic.jsonl" \
  >"$T/decisions.jsonl" 2>"$T/err" || { bad "verdict decide --snapshots"; cat "$T/err" >&2; }

# What the stand-in will answer, computed here from the requests, and what
# the report must then say.
python3 - "$T" >"$T/expected" <<'EOF' || bad "computing the expected figures"
import json, sys
sys.path.insert(0, "tests/replay")
from decide_server import decide
t = sys.argv[1]
reqs = [json.loads(l) for l in open(t + "/traffic.jsonl")]
decs = [json.loads(l) for l in open(t + "/decisions.jsonl")]
labels = {}
for l in open(t + "/labels.jsonl"):
    o = json.loads(l)
    labels[o["key"]] = o["action"]
same = rec_ok = rem_ok = 0
for q, d in zip(reqs, decs):
    a = decide(q)
    if a["action"] == d["action"] and a["allowed"] == d["allowed"]:
        same += 1
    rec_ok += d["action"] == labels[q["key"]]
    rem_ok += a["action"] == labels[q["key"]]
n = len(reqs)
print(n, same, n - same, round(rec_ok / n, 4), round(rem_ok / n, 4))
EOF
read -r N SAME CHANGED REC_ACC REM_ACC <"$T/expected"
[ "${N:-0}" = 300 ] && ok || bad "expected 300 decisions, got '${N:-}'"
[ "${CHANGED:-0}" -gt 0 ] && [ "${SAME:-0}" -gt 0 ] && ok || bad "the stand-in should agree on some and not all (same $SAME)"

# check_json FILE KEY=VALUE...: fields of the report (dotted paths)
check_json() {
  local f=$1
  shift
  python3 - "$f" "$@" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
bad = 0
for kv in sys.argv[2:]:
    k, want = kv.split("=", 1)
    v = doc
    for part in k.split("."):
        v = v[int(part)] if isinstance(v, list) else v.get(part) if isinstance(v, dict) else None
    got = json.dumps(v) if not isinstance(v, str) else v
    if got != want:
        print("  %s: got %s, want %s" % (k, got, want), file=sys.stderr)
        bad = 1
sys.exit(bad)
EOF
}

# ---- keep-alive, Content-Length answers ----
start_server
"$V" replay -s "$T/snaps" --against "http://127.0.0.1:$PORT" --labels "$T/labels.jsonl" --json \
  >"$T/r.json" 2>"$T/err"
rc=$?
[ "$rc" = 0 ] && ok || { bad "replay --against: exit $rc"; cat "$T/err" >&2; }
check_json "$T/r.json" mode=against seen=300 replayed=300 reproduced="$SAME" changed="$CHANGED" \
  errors=0 labels.labelled=300 labels.recorded.accuracy="$REC_ACC" \
  labels.replayed.accuracy="$REM_ACC" cpu_ns=null score_breakdown.categories.2.scored=true \
  && ok || bad "replay --against: report fields"
read -r REQS CONNS < <(stats)
[ "$REQS" = 300 ] && ok || bad "the service got $REQS requests, want 300"
[ "$CONNS" = 2 ] && ok || bad "keep-alive: $CONNS connections (1 for the run + 1 for /stats), want 2"
python3 -c "
import json,sys; d=json.load(open('$T/r.json'))
assert d['latency_us']['replayed']['count']==300 and d['latency_us']['replayed']['p50']>0
assert any(t['from']!=t['to'] for t in d['transitions'])
assert d['recorded_score'] is not None and 0 <= d['score'] <= 100
" && ok || bad "replay --against: latency, transitions and scores"

# the text summary says which side is which
"$V" replay -s "$T/snaps" --against "http://127.0.0.1:$PORT/v1/decide" >"$T/out" 2>&1
grep -q "another decision service" "$T/out" && grep -q "against    http://127.0.0.1:$PORT/v1/decide" "$T/out" &&
  grep -q "changed by action (recorded -> remote)" "$T/out" && grep -q "remote " "$T/out" &&
  grep -q "^side by side  *recorded  *remote" "$T/out" && ok || { bad "text summary of --against"; cat "$T/out" >&2; }
stop_server

# ---- chunked answers: the same figures ----
start_server --chunked
"$V" replay -s "$T/snaps" --against "http://127.0.0.1:$PORT" --labels "$T/labels.jsonl" --json \
  >"$T/r2.json" 2>"$T/err" && ok || { bad "replay --against, chunked"; cat "$T/err" >&2; }
check_json "$T/r2.json" replayed=300 reproduced="$SAME" errors=0 labels.replayed.accuracy="$REM_ACC" &&
  ok || bad "chunked answers: report fields"
stop_server

# ---- Connection: close: one connection a request, nothing lost ----
start_server --close
"$V" replay -s "$T/snaps" --against "http://127.0.0.1:$PORT" --json >"$T/r3.json" 2>"$T/err" &&
  ok || { bad "replay --against, close"; cat "$T/err" >&2; }
check_json "$T/r3.json" replayed=300 reproduced="$SAME" errors=0 && ok || bad "Connection: close: report fields"
read -r REQS CONNS < <(stats)
[ "$CONNS" = 301 ] && ok || bad "Connection: close: $CONNS connections, want 301"
stop_server

# ---- HTTP/1.0, no Content-Length: the body runs to the end of the connection ----
start_server --http10
"$V" replay -s "$T/snaps" --against "http://127.0.0.1:$PORT" --limit 50 --json >"$T/r4.json" \
  2>"$T/err" && ok || { bad "replay --against, HTTP/1.0"; cat "$T/err" >&2; }
check_json "$T/r4.json" seen=50 replayed=50 errors=0 && ok || bad "HTTP/1.0 answers: report fields"
stop_server

# ---- refused requests are error items; the run goes on and exits 0 ----
start_server --refuse-every 10
"$V" replay -s "$T/snaps" --against "http://127.0.0.1:$PORT" --json >"$T/r5.json" 2>"$T/err"
rc=$?
[ "$rc" = 0 ] && ok || bad "refused requests: exit $rc, want 0"
check_json "$T/r5.json" seen=300 replayed=270 errors=30 && ok || bad "refused requests: report fields"
python3 -c "import json; d=json.load(open('$T/r5.json')); assert sum(k['count'] for k in d['error_kinds']) == 30" &&
  ok || bad "refused requests: error kinds add up to 30"
grep -q "HTTP 422: refused by the stand-in" "$T/r5.json" && ok || bad "the refusal's message is reported"
stop_server

# ---- a wrong path is refused (404), every request an error item ----
start_server
"$V" replay -s "$T/snaps" --against "http://127.0.0.1:$PORT/v2/nope" --limit 5 --json >"$T/r6.json" 2>"$T/err"
check_json "$T/r6.json" seen=5 errors=5 && ok || bad "a wrong path: every request refused"
grep -q "HTTP 404" "$T/r6.json" && ok || bad "a wrong path: the status is reported"
OLD_PORT=$PORT
stop_server

# ---- nobody listening: the run stops with exit 1 ----
"$V" replay -s "$T/snaps" --against "http://127.0.0.1:$OLD_PORT" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] && ok || bad "no service: exit $rc, want 1"
grep -q "cannot connect to 127.0.0.1:$OLD_PORT" "$T/err" && ok || { bad "no service: message"; cat "$T/err" >&2; }

# ---- URLs it cannot use ----
for url in "https://127.0.0.1:1/v1/decide" "ftp://x" "http://:80/" "http://127.0.0.1:99999/"; do
  "$V" replay -s "$T/snaps" --against "$url" >"$T/out" 2>"$T/err"
  rc=$?
  [ "$rc" = 1 ] && [ -s "$T/err" ] && ok || bad "--against $url: exit $rc"
done
grep -q "port must be a number" "$T/err" && ok || bad "a bad port is named"
"$V" replay -s "$T/snaps" --against http://x --policy "$T/bundle" >"$T/out" 2>&1
[ $? = 2 ] && ok || bad "--against with --policy is a usage error"

summary
[ "$fail" = 0 ]
