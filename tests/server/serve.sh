#!/usr/bin/env bash
# serve.sh — `verdict serve` as a client meets it: the real server on a free
# loopback port, spoken to with curl. Every endpoint, every refusal (400,
# 404, 405, 413, 431, malformed HTTP), keep-alive with several requests on
# one connection, pipelining, a decision's snapshot fetched by id, metrics,
# SIGHUP reload (good and broken bundles), and SIGTERM: exit 0 with every
# decision in the snapshot log. Run from the repo root with the build folder
# as $1; works on copies of examples/policies in a temp folder.
set -u
BUILD=${1:?usage: serve.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl python3

mkdir -p "$T/bundle"
for f in examples/policies/*; do cp -r "$f" "$T/bundle/"; done
SNAP="$T/snapshots"
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"

"$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 2 --snapshots "$SNAP" \
  --max-body 65536 --max-header 4096 2>"$T/log" &
PID=$!

# /readyz answers 503 until the warm-up is done, then 200.
wait_ready serve "$T/log"
ok
has "$T/log" '"event":"start"' "start logged"
has "$T/log" '"ready_ms":' "time to ready logged"

# req METHOD PATH [curl args...]: body in $T/body, status in $CODE.
req() {
  local m=$1 p=$2; shift 2
  CODE=$(curl -s -o "$T/body" -w '%{http_code}' -X "$m" "$URL$p" "$@")
}
json() { python3 -c 'import sys,json; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T/body" "$1"; }
decisions=0

# ---- health ----
req GET /healthz; eq "$CODE" 200 "healthz"; has "$T/body" '{"status":"ok"}' "healthz body"
req GET /readyz; eq "$CODE" 200 "readyz"

# ---- decide ----
GOOD='{"action":"http_request","context":{"method":"GET","path":"/products/x","client_ip":"10.0.0.7","headers":{"user-agent":"Mozilla/5.0"},"env":{"country":"GB"}}}'
req POST /v1/decide -H 'Content-Type: application/json' -d "$GOOD"
eq "$CODE" 200 "decide"; decisions=$((decisions + 1))
eq "$(json 'd["strategy"]')" request_gate "decide: strategy"
eq "$(json 'd["action"]')" allow "decide: action"
ID=$(json 'd["snapshot_id"]')
eq "${#ID}" 36 "decide: a snapshot id"

# The same decision as the CLI gives (minus latency and snapshot id).
echo "$GOOD" | "$V" decide --policy "$T/bundle" --no-snapshots --no-store >"$T/cli" 2>/dev/null
norm='import sys,json; d=json.load(open(sys.argv[1])); [d.pop(k) for k in ("latency_us","snapshot_id")]; print(json.dumps(d,sort_keys=True))'
eq "$(python3 -c "$norm" "$T/body")" "$(python3 -c "$norm" "$T/cli")" "decide: same answer as verdict decide"

# ---- the snapshot of that decision (written within the sync interval) ----
got=0
for _ in $(seq 1 50); do
  req GET "/v1/snapshots/$ID"
  if [ "$CODE" = 200 ]; then got=1; break; fi
  sleep 0.1
done
eq "$got" 1 "snapshot fetched by id"
eq "$(json 'd["id"]')" "$ID" "snapshot: its id"
eq "$(json 'd["point"]')" http_request "snapshot: its decision point"
req GET /v1/snapshots/01a229ef-3e3f-7235-90a4-7b8916a23dd9
eq "$CODE" 404 "unknown snapshot"; eq "$(json 'd["error"]["code"]')" snapshot_not_found "unknown snapshot: code"
req GET /v1/snapshots/not-an-id
eq "$CODE" 400 "bad snapshot id"; eq "$(json 'd["error"]["code"]')" bad_id "bad snapshot id: code"

# ---- refusals: JSON error bodies ----
req POST /v1/decide -d '{"action":'
eq "$CODE" 400 "bad JSON"; eq "$(json 'd["error"]["code"]')" json "bad JSON: code"
req POST /v1/decide -d '{"action":"http_request","context":5}'
eq "$CODE" 400 "bad request field"; eq "$(json 'd["error"]["path"]')" '$.context' "bad field: its JSON path"
req POST /v1/decide -d '{"action":"no_such_point"}'
eq "$CODE" 404 "unknown decision point"; eq "$(json 'd["error"]["code"]')" not_found "unknown point: code"
req POST /v1/decide -d '{"action":"storage_route","candidates":["route_mars"],"context":{}}'
eq "$CODE" 422 "no candidate"; eq "$(json 'd["error"]["code"]')" no_candidate "422: code"
req GET /v1/decide
eq "$CODE" 405 "GET /v1/decide"; eq "$(json 'd["error"]["code"]')" method_not_allowed "405: code"
req POST /healthz
eq "$CODE" 405 "POST /healthz"
req GET /no/such/thing
eq "$CODE" 404 "unknown path"; eq "$(json 'd["error"]["code"]')" no_endpoint "unknown path: code"
head -c 100000 /dev/zero | tr '\0' ' ' >"$T/big"
req POST /v1/decide --data-binary @"$T/big"
eq "$CODE" 413 "body over --max-body"; eq "$(json 'd["error"]["code"]')" body_too_large "413: code"
req GET /healthz -H "X-Filler: $(head -c 5000 /dev/zero | tr '\0' a)"
eq "$CODE" 431 "headers over --max-header"; eq "$(json 'd["error"]["code"]')" headers_too_large "431: code"

# Chunked request bodies are decoded.
CODE=$(curl -s -o "$T/body" -w '%{http_code}' -H 'Transfer-Encoding: chunked' --data-binary "$GOOD" "$URL/v1/decide")
eq "$CODE" 200 "chunked body"; decisions=$((decisions + 1))

# Malformed HTTP: 400 and the connection is closed.
python3 - "$PORT" >"$T/raw" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n")
data = b""
while True:
    b = s.recv(65536)
    if not b: break
    data += b
sys.stdout.write(data.decode())
PY
has "$T/raw" "HTTP/1.1 400" "malformed HTTP: 400"
has "$T/raw" '"code":"bad_http"' "malformed HTTP: error body"
has "$T/raw" "Connection: close" "malformed HTTP: closed"

# ---- keep-alive: several requests on one connection ----
curl -s -v -o /dev/null -o /dev/null -o /dev/null "$URL/healthz" "$URL/readyz" "$URL/metrics" 2>"$T/kv"
eq "$(grep -c 'Re-using existing connection' "$T/kv")" 2 "keep-alive: one connection for three requests"
eq "$(grep -c '< HTTP/1.1 200' "$T/kv")" 3 "keep-alive: three answers"
curl -s -o /dev/null -o /dev/null -w '%{http_code}\n' -d "$GOOD" "$URL/v1/decide" "$URL/v1/decide" 2>/dev/null >"$T/codes"
eq "$(tr -d '\n' <"$T/codes")" 200200 "keep-alive: two decisions"; decisions=$((decisions + 2))

# ---- pipelining: three requests in one write, answers in order ----
python3 - "$PORT" "$GOOD" >"$T/pipe" <<'PY'
import socket, sys
port, good = int(sys.argv[1]), sys.argv[2].encode()
s = socket.create_connection(("127.0.0.1", port), timeout=5)
reqs = (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        + b"POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(good) + good
        + b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
s.sendall(reqs)
data = b""
while True:
    b = s.recv(65536)
    if not b: break
    data += b
import re
print(" ".join(re.findall(r"HTTP/1.1 (\d+)", data.decode())))
PY
eq "$(cat "$T/pipe")" "200 200 404" "pipelining: answers in order"; decisions=$((decisions + 1))

# ---- metrics ----
req GET /metrics
eq "$CODE" 200 "metrics"
has "$T/body" 'verdict_decisions_total{strategy="request_gate",action="allow",source=' "metrics: decisions by strategy/action/source"
has "$T/body" 'verdict_http_request_duration_seconds_bucket{strategy="request_gate",source="' "metrics: request latency by the strategy and source of its decision"
has "$T/body" 'verdict_http_request_duration_seconds_bucket{strategy="",source="",le="1e-06"}' "metrics: request latency of requests that are not one decision, from 1 µs"
has "$T/body" 'verdict_snapshots_appended_total' "metrics: snapshot counters"
has "$T/body" 'verdict_policy_info{version="' "metrics: policy version"
count=$(python3 -c 'import sys,re; print(sum(int(m) for m in re.findall(r"^verdict_decisions_total\{[^}]*\} (\d+)$", open(sys.argv[1]).read(), re.M)))' "$T/body")
eq "$count" "$decisions" "metrics: every decision counted once, summed over threads"
V1=$(grep -o 'verdict_policy_info{version="[0-9a-f]*"' "$T/body")

# ---- SIGHUP: reload ----
req POST /v1/decide -d '{"action":"tool_call","context":{}}'
before=$CODE; [ "$CODE" = 200 ] && decisions=$((decisions + 1))
eq "$before" 200 "tool_call served before the reload"
rm "$T/bundle/agent_guard.yaml"
kill -HUP "$PID"
for _ in $(seq 1 50); do grep -q '"event":"reload"' "$T/log" && break; sleep 0.1; done
has "$T/log" '"event":"reload"' "reload logged"
req POST /v1/decide -d '{"action":"tool_call","context":{}}'
eq "$CODE" 404 "tool_call gone after the reload"
req GET /metrics
V2=$(grep -o 'verdict_policy_info{version="[0-9a-f]*"' "$T/body")
[ -n "$V2" ] && [ "$V1" != "$V2" ] && ok || bad "reload: policy_info version did not change"
# A broken bundle: logged, the old one keeps serving.
printf 'name: [unclosed\n' >"$T/bundle/broken.yaml"
kill -HUP "$PID"
for _ in $(seq 1 50); do grep -q '"event":"reload_failed"' "$T/log" && break; sleep 0.1; done
has "$T/log" '"event":"reload_failed"' "failed reload logged"
req POST /v1/decide -d "$GOOD"
eq "$CODE" 200 "old bundle still serves after a failed reload"; decisions=$((decisions + 1))
rm "$T/bundle/broken.yaml"

# ---- load: 8 keep-alive clients at once, two reloads meanwhile ----
python3 - "$PORT" "$GOOD" >"$T/load" <<'PY' &
import http.client, sys, threading
port, good = int(sys.argv[1]), sys.argv[2]
codes, lock = {}, threading.Lock()
def client():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(60):
        c.request("POST", "/v1/decide", body=good, headers={"Content-Type": "application/json"})
        r = c.getresponse(); r.read()
        with lock: codes[r.status] = codes.get(r.status, 0) + 1
ts = [threading.Thread(target=client) for _ in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
print(" ".join("%d:%d" % kv for kv in sorted(codes.items())))
PY
LOADPID=$!
sleep 0.2; kill -HUP "$PID"; sleep 0.2; kill -HUP "$PID"
wait "$LOADPID"
eq "$(cat "$T/load")" "200:480" "load with reloads: 480 decisions, none failed"
decisions=$((decisions + 480))
req GET /metrics
count=$(python3 -c 'import sys,re; print(sum(int(m) for m in re.findall(r"^verdict_decisions_total\{[^}]*\} (\d+)$", open(sys.argv[1]).read(), re.M)))' "$T/body")
eq "$count" "$decisions" "metrics after load: every decision counted once"

# ---- SIGTERM: drain, flush, exit 0 ----
stop
has "$T/log" '"event":"stop"' "stop logged"
n=$("$V" snapshots list --snapshots "$SNAP" | wc -l)
eq "$n" "$decisions" "every decision is in the snapshot log"
python3 -c 'import sys,json; [json.loads(l) for l in open(sys.argv[1])]' "$T/log" && ok || bad "every log line is JSON"


# ---- limits: slow and idle clients, too many connections; drain ----
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
"$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 2 --no-snapshots \
  --idle-timeout 1000 --request-timeout 1500 --max-conns 2 2>"$T/log2" &
PID=$!
wait_ready limits "$T/log2"
python3 - "$PORT" "$PID" "$GOOD" >"$T/limits" <<'PY'
import os, signal, socket, sys, time
port, pid, good = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode()
def conn():
    return socket.create_connection(("127.0.0.1", port), timeout=5)
def read_all(s):
    data = b""
    while True:
        b = s.recv(65536)
        if not b: return data
        data += b
# A request that never completes: 408, then closed.
s = conn(); s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
t0 = time.time(); d = read_all(s)
print("slow:", d.split(b"\r\n")[0].decode(), b'"request_timeout"' in d, time.time() - t0 < 3)
# An idle keep-alive connection is closed after --idle-timeout.
s = conn(); s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
t0 = time.time(); d = read_all(s)
print("idle:", d.split(b"\r\n")[0].decode(), 0.8 < time.time() - t0 < 3)
# Two connections held open, a third is refused with 503. (The wait lets
# the server finish closing the connections above.)
time.sleep(0.3); a, b = conn(), conn(); time.sleep(0.2)
c = conn(); d = read_all(c)
print("max:", d.split(b"\r\n")[0].decode(), b'"too_many_connections"' in d)
a.close(); b.close(); time.sleep(0.3)
# SIGTERM while a request is half sent: it is still answered, then closed.
s = conn()
head = b"POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(good)
s.sendall(head + good[:10]); time.sleep(0.2)
os.kill(pid, signal.SIGTERM); time.sleep(0.2)
s.sendall(good[10:]); d = read_all(s)
print("drain:", d.split(b"\r\n")[0].decode(), b"Connection: close" in d)
PY
has "$T/limits" "slow: HTTP/1.1 408 Request Timeout True True" "slow request: 408 within the timeout"
has "$T/limits" "idle: HTTP/1.1 200 OK True" "idle keep-alive connection closed after the timeout"
has "$T/limits" "max: HTTP/1.1 503 Service Unavailable True" "too many connections: 503"
has "$T/limits" "drain: HTTP/1.1 200 OK True" "SIGTERM: a request in flight is still answered"
wait "$PID"; rc=$?
PID=
eq "$rc" 0 "SIGTERM with a request in flight: exit 0"

# ---- usage and start errors ----
"$V" serve >/dev/null 2>"$T/err"; eq "$?" 2 "no --policy: usage error"
"$V" serve -p "$T/bundle" --threads 0 >/dev/null 2>"$T/err"; eq "$?" 2 "--threads 0: usage error"
"$V" serve -p "$T/bundle" --listen nonsense --no-snapshots >/dev/null 2>"$T/err"; eq "$?" 1 "bad --listen: exit 1"
has "$T/err" '"event":"start_failed"' "bad --listen: logged"
mkdir -p "$T/bad"; printf 'name: [unclosed\n' >"$T/bad/x.yaml"
"$V" serve -p "$T/bad" --no-snapshots >/dev/null 2>"$T/err"; eq "$?" 1 "broken bundle: exit 1"

summary
[ "$fail" = 0 ]
