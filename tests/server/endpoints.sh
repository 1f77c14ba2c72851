#!/usr/bin/env bash
# endpoints.sh — the endpoints of `verdict serve` beyond a single decision,
# against the real server with curl: POST /v1/decide/batch (array and JSON
# Lines, bad elements, the batch limit), GET|POST /v1/authz (which header
# becomes which context field, 200/401/403 and the X-Verdict-* headers),
# GET /v1/policies, POST /v1/policies/reload with and without the admin
# token (and a broken bundle refused with its diagnostics), --watch, the
# access log, --snapshot-reads admin (snapshots and explain_decision behind
# the token), and the metrics these add. Run from the repo root with the
# build folder as $1; works on a copy of examples/policies in a temp folder.
set -u
BUILD=${1:?usage: endpoints.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl

# start NAME [serve options...]: starts the server on a free port, waits for /readyz.
start() {
  local name=$1; shift
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  "$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 2 "$@" 2>"$T/$name.log" &
  PID=$!
  wait_ready "$name" "$T/$name.log"
}
# req METHOD PATH [curl args...]: body in $T/body, headers in $T/head, status in $CODE.
req() {
  local m=$1 p=$2; shift 2
  CODE=$(curl -s -D "$T/head" -o "$T/body" -w '%{http_code}' -X "$m" "$URL$p" "$@")
}
json() { python3 -c 'import sys,json; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T/body" "$1"; }
header() { tr -d '\r' <"$T/head" | sed -n "s/^$1: //Ip" | head -1; }

mkdir -p "$T/bundle"
for f in examples/policies/*; do cp -r "$f" "$T/bundle/"; done
TOKEN=verdict-test-token-$RANDOM-$RANDOM-0123456789
printf '%s\n' "$TOKEN" >"$T/token"

start main --snapshots "$T/snap" --durability always --store "$T/store" --max-batch 5 \
  --admin-token-file "$T/token" --access-log "$T/access.log"
has "$T/main.log" '"admin":true' "start: admin enabled"
hasnt "$T/main.log" "$TOKEN" "the token is not logged"

GATE='{"action":"http_request","context":{"method":"GET","path":"/products/x","client_ip":"10.0.0.7","headers":{"user-agent":"Mozilla/5.0"},"env":{"country":"GB"}}}'
PROBE='{"action":"http_request","context":{"method":"GET","path":"/.env","client_ip":"81.2.69.160","headers":{"user-agent":"Mozilla/5.0"},"env":{"country":"GB"}}}'

# ---- batch: a JSON array ----
req POST /v1/decide/batch -H 'Content-Type: application/json' \
  -d "[$GATE, {\"action\":\"no_such_point\"}, $PROBE, {\"action\":\"http_request\",\"context\":5}, {\"action\": tru}]"
eq "$CODE" 200 "batch: 200"
eq "$(json 'len(d)')" 5 "batch: one answer per request"
eq "$(json 'd[0]["action"]')" allow "batch[0]: decided"
eq "$(json 'd[2]["action"]')" block "batch[2]: decided, in order"
eq "$(json 'd[2]["reason"]["rule"]')" probe-path "batch[2]: its rule"
eq "$(json 'd[1]["error"]["code"]')" not_found "batch[1]: an error object"
eq "$(json 'd[1]["error"]["index"]')" 1 "batch[1]: the error names its index"
eq "$(json 'd[1]["error"]["path"]')" '$[1].action' "batch[1]: the error's JSON path"
eq "$(json 'd[3]["error"]["path"]')" '$[3].context' "batch[3]: a bad field's JSON path"
eq "$(json 'd[4]["error"]["code"]')" json "batch[4]: malformed element: json error"
eq "$(json 'd[0]["snapshot_id"] != d[2]["snapshot_id"] and len(d[2]["snapshot_id"]) == 36')" True "batch: a snapshot per decision"
BATCH_SNAP=$(json 'd[2]["snapshot_id"]')
req GET "/v1/snapshots/$BATCH_SNAP"
eq "$CODE" 200 "batch: an element's snapshot is readable"
eq "$(json 'd["request"]["context"]["path"]')" /.env "batch: the snapshot holds that element's request"

# ---- batch: JSON Lines ----
printf '%s\n\n%s\n{"action":"nope"}\n' "$GATE" "$PROBE" >"$T/lines"
req POST /v1/decide/batch -H 'Content-Type: application/x-ndjson' --data-binary @"$T/lines"
eq "$CODE" 200 "jsonl batch: 200"
eq "$(header content-type)" application/x-ndjson "jsonl batch: answered as JSON Lines"
eq "$(wc -l <"$T/body")" 3 "jsonl batch: one line per request (blank lines skipped)"
eq "$(sed -n 2p "$T/body" | python3 -c 'import sys,json; print(json.load(sys.stdin)["action"])')" block "jsonl batch: line 2 in order"
eq "$(sed -n 3p "$T/body" | python3 -c 'import sys,json; e=json.load(sys.stdin)["error"]; print(e["index"], e["line"], e["code"])')" "2 4 not_found" "jsonl batch: an error names index and line"
req POST /v1/decide/batch -H 'Content-Type: application/jsonl' --data-binary @"$T/lines"
eq "$(wc -l <"$T/body")" 3 "application/jsonl is JSON Lines too"

# ---- batch: refusals ----
req POST /v1/decide/batch -d '[]'
eq "$CODE" 200 "empty batch: 200"; eq "$(tr -d '\n' <"$T/body")" "[]" "empty batch: []"
req POST /v1/decide/batch -d "{\"action\":\"http_request\"}"
eq "$CODE" 400 "batch of an object: 400"; eq "$(json 'd["error"]["code"]')" json "batch of an object: code"
req POST /v1/decide/batch -d "[$GATE, $GATE"
eq "$CODE" 400 "unclosed batch array: 400"
has "$T/body" "not closed" "unclosed batch array: says so"
req POST /v1/decide/batch -d "[$GATE,,$GATE]"
eq "$CODE" 400 "stray comma: 400"
req POST /v1/decide/batch -d "[$GATE,$GATE,$GATE,$GATE,$GATE,$GATE]"
eq "$CODE" 413 "batch over --max-batch: 413"
eq "$(json 'd["error"]["code"]')" batch_too_large "batch over --max-batch: code"
has "$T/body" "--max-batch" "batch over the limit: names the option"
req GET /v1/decide/batch
eq "$CODE" 405 "GET /v1/decide/batch: 405"

# ---- authz: the original request in headers ----
authz() { # authz [curl args...]
  req GET /v1/authz -H 'X-Verdict-Env-Country: GB' "$@"
}
authz -H 'X-Original-URI: /products/42?ref=mail' -H 'X-Original-Method: GET' \
  -H 'X-Real-IP: 10.20.30.40' -H 'User-Agent: Mozilla/5.0 (X11)' -H 'Cookie: a=1' -H 'Cookie: b=2' \
  -H 'Authorization: Bearer sekrit-user-credential' -H 'Accept-Language: en, de'
eq "$CODE" 200 "authz: an ordinary page view: 200"
eq "$(header x-verdict-action)" allow "authz 200: X-Verdict-Action"
ALLOW_SNAP=$(header x-verdict-snapshot)
eq "${#ALLOW_SNAP}" 36 "authz 200: X-Verdict-Snapshot"
authz -H 'X-Original-URI: /.env' -H 'X-Real-IP: 81.2.69.160' -H 'User-Agent: Mozilla/5.0'
eq "$CODE" 403 "authz: a probe for secrets: 403"
eq "$(header x-verdict-action)" block "authz 403: X-Verdict-Action"
eq "$(header x-verdict-rule)" probe-path "authz 403: X-Verdict-Rule"
authz -H 'X-Original-URI: /products' -H 'X-Real-IP: 81.2.69.160' -H 'User-Agent: curl/8.0'
eq "$CODE" 401 "authz: a challenge action: 401"
eq "$(header x-verdict-action)" challenge "authz 401: X-Verdict-Action"
# The client address: X-Real-IP first, else the first X-Forwarded-For hop.
authz -H 'X-Original-URI: /products' -H 'X-Forwarded-For: 198.51.100.7, 10.0.0.1' -H 'User-Agent: Mozilla/5.0'
eq "$CODE" 403 "authz: client from X-Forwarded-For's first hop"
eq "$(header x-verdict-rule)" denied-network "authz: X-Forwarded-For reaches client_ip"
authz -H 'X-Original-URI: /products' -H 'X-Original-Method: TRACE' -H 'X-Real-IP: 81.2.69.160' -H 'User-Agent: Mozilla/5.0'
eq "$(header x-verdict-rule)" method-not-allowed "authz: X-Original-Method reaches method"
# POST works the same.
req POST /v1/authz -H 'X-Original-URI: /.git/config' -H 'X-Real-IP: 81.2.69.160' -H 'X-Verdict-Env-Country: GB'
eq "$CODE" 403 "POST /v1/authz"
# The context the rules saw, from the snapshot.
req GET "/v1/snapshots/$ALLOW_SNAP"
eq "$CODE" 200 "authz: the snapshot is readable"
eq "$(json 'd["request"]["context"]["path"]')" /products/42 "authz context: path (no query)"
eq "$(json 'd["request"]["context"]["query"]')" ref=mail "authz context: query"
eq "$(json 'd["request"]["context"]["uri"]')" '/products/42?ref=mail' "authz context: uri"
eq "$(json 'd["request"]["context"]["method"]')" GET "authz context: method"
eq "$(json 'd["request"]["context"]["client_ip"]')" 10.20.30.40 "authz context: client_ip"
eq "$(json 'd["request"]["context"]["host"]')" "127.0.0.1:$PORT" "authz context: host"
eq "$(json 'd["request"]["context"]["env"]["country"]')" GB "authz context: env from X-Verdict-Env-*"
eq "$(json 'd["request"]["context"]["headers"]["user-agent"]')" 'Mozilla/5.0 (X11)' "authz context: headers in lower case"
eq "$(json 'd["request"]["context"]["headers"]["accept-language"]')" 'en, de' "authz context: other headers as sent"
eq "$(json 'd["request"]["context"]["headers"]["cookie"]')" '[redacted]' "authz context: Cookie redacted by default"
eq "$(json 'd["request"]["context"]["headers"]["authorization"]')" '[redacted]' "authz context: Authorization redacted by default"
hasnt "$T/body" "sekrit-user-credential" "authz: the credential is not in the snapshot"
eq "$(json '"x-original-uri" in d["request"]["context"]["headers"] or "x-verdict-env-country" in d["request"]["context"]["headers"]')" False "authz context: our own headers are not in headers"
eq "$(json 'd["point"]')" http_request "authz: the default decision point"
# The decision point: X-Verdict-Point, else ?point=.
req GET '/v1/authz?point=tool_call' -H 'X-Original-URI: /'
eq "$(header x-verdict-strategy)" agent_guard "authz: ?point= picks the decision point"
req GET /v1/authz -H 'X-Original-URI: /' -H 'X-Verdict-Point: no_such_point'
eq "$CODE" 404 "authz: unknown X-Verdict-Point: 404"
req GET /v1/authz
eq "$CODE" 400 "authz without X-Original-URI: 400"
has "$T/body" "X-Original-URI" "authz without X-Original-URI: says what is missing"

# ---- policies ----
req GET /v1/policies
eq "$CODE" 200 "GET /v1/policies"
LIVE=$(json 'd["live"]["version"]')
eq "${#LIVE}" 64 "policies: the live version"
eq "$(json 'sorted(s["name"] for s in d["live"]["strategies"])')" "['agent_guard', 'agent_tests', 'content_routing', 'payment_fraud', 'request_gate', 'throttle']" "policies: the live strategies"
eq "$(json 'd["store"]')" "[redacted]" "policies: a store outside the bundle, without the token: not shown"
eq "$(json '[s["file"] for s in d["live"]["strategies"] if s["name"] == "request_gate"][0]')" request_gate.yaml \
  "policies: a strategy's file, relative to the bundle folder"
hasnt "$T/body" "$T" "policies: no absolute path without the token"
req GET /v1/policies -H "Authorization: Bearer $TOKEN"
eq "$(json 'd["store"]')" "$T/store" "policies: with the token, the store folder in full"
eq "$(json '[s["file"] for s in d["live"]["strategies"] if s["name"] == "request_gate"][0]')" request_gate.yaml \
  "policies: with the token, files still relative to the bundle"
req GET /v1/policies
eq "$(json 'sorted(k["version"] for k in d["kept"]) == sorted(s["version"] for s in d["live"]["strategies"])')" True "policies: the versions kept"
eq "$(json '[k["strategy"] for k in d["kept"] if k["version"] == [s for s in d["live"]["strategies"] if s["name"] == "request_gate"][0]["version"]][0]')" request_gate "policies: a kept version names its strategy"
req POST /v1/policies
eq "$CODE" 405 "POST /v1/policies: 405"

# ---- reload over HTTP: the admin token ----
req POST /v1/policies/reload
eq "$CODE" 401 "reload without a token: 401"
eq "$(header www-authenticate)" 'Bearer realm="verdict"' "reload without a token: WWW-Authenticate"
req POST /v1/policies/reload -H "Authorization: Bearer ${TOKEN}x"
eq "$CODE" 401 "reload with a wrong token: 401"
req POST /v1/policies/reload -H "Authorization: Bearer ${TOKEN:0:10}"
eq "$CODE" 401 "reload with a prefix of the token: 401"
req GET /v1/policies/reload -H "Authorization: Bearer $TOKEN"
eq "$CODE" 405 "GET /v1/policies/reload: 405"
rm "$T/bundle/agent_guard.yaml"
req POST /v1/policies/reload -H "Authorization: Bearer $TOKEN"
eq "$CODE" 200 "reload with the token: 200"
eq "$(json 'd["changed"]')" True "reload: changed"
eq "$(json 'd["previous_version"]')" "$LIVE" "reload: the previous version"
LIVE2=$(json 'd["policy_version"]')
req POST /v1/decide -d '{"action":"tool_call","context":{}}'
eq "$CODE" 404 "reload: the removed strategy is gone"
# A bundle that fails to compile: refused with its diagnostics; the old one serves.
printf 'strategy: broken\nrules:\n  - if: path.startsWith(\n    action: block\ndefault: allow\n' >"$T/bundle/broken.yaml"
req POST /v1/policies/reload -H "Authorization: Bearer $TOKEN"
eq "$CODE" 422 "reload of a broken bundle: 422"
eq "$(json 'd["error"]["code"]')" policy "broken bundle: code"
eq "$(json 'd["error"]["diagnostics"][0]["file"].endswith("broken.yaml")')" True "broken bundle: the file"
eq "$(json 'd["error"]["diagnostics"][0]["line"]')" 3 "broken bundle: the line"
eq "$(json 'd["error"]["diagnostics"][0]["column"] > 0')" True "broken bundle: the column"
eq "$(json 'd["error"]["policy_version"]')" "$LIVE2" "broken bundle: the version still serving"
req POST /v1/decide -d "$GATE"
eq "$CODE" 200 "broken bundle: the old bundle still decides"
req GET /v1/policies
eq "$(json 'd["live"]["version"]')" "$LIVE2" "broken bundle: /v1/policies still shows the old version"
eq "$(json 'd["reload_failures"]')" 1 "policies: failed reloads counted"
rm "$T/bundle/broken.yaml"

# ---- reload over HTTP under load: no request fails ----
python3 - "$PORT" "$GATE" >"$T/load" <<'PY' &
import http.client, sys, threading
port, good = int(sys.argv[1]), sys.argv[2]
codes, lock = {}, threading.Lock()
def client():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(50):
        c.request("POST", "/v1/decide", body=good, headers={"Content-Type": "application/json"})
        r = c.getresponse(); r.read()
        with lock: codes[r.status] = codes.get(r.status, 0) + 1
ts = [threading.Thread(target=client) for _ in range(6)]
[t.start() for t in ts]; [t.join() for t in ts]
print(" ".join("%d:%d" % kv for kv in sorted(codes.items())))
PY
LOADPID=$!
reloads=""
for _ in 1 2 3; do
  sleep 0.1
  reloads="$reloads$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/policies/reload" -H "Authorization: Bearer $TOKEN")"
done
wait "$LOADPID"
eq "$reloads" 200200200 "three HTTP reloads under load"
eq "$(cat "$T/load")" "200:300" "reload under load: 300 decisions, none failed"

# ---- metrics added by these endpoints ----
req GET /metrics
has "$T/body" 'verdict_rule_hits_total{strategy="request_gate",rule="probe-path"}' "metrics: rule hits"
has "$T/body" 'verdict_decide_duration_seconds_bucket{strategy="request_gate",source="rule",side="live",le="+Inf"}' "metrics: the decide-only histogram, by strategy, source and side"
has "$T/body" 'verdict_batches_total 4' "metrics: batches answered"
has "$T/body" 'verdict_authz_total{code="401"} 1' "metrics: authz answers"
has "$T/body" 'verdict_reloads_total{result="failed"} 1' "metrics: failed reloads"
has "$T/body" "verdict_policy_info{version=\"$LIVE2\"} 1" "metrics: the policy version"
for m in process_cpu_seconds_total process_resident_memory_bytes process_open_fds process_start_time_seconds; do
  grep -qE "^$m [0-9.e+]+$" "$T/body" && ok || bad "metrics: $m"
done
# A request no rule decides goes to request_gate's fallback model: counted.
req POST /v1/decide -d '{"action":"http_request","context":{"method":"GET","path":"/products/x","client_ip":"81.2.69.160","headers":{"user-agent":"Mozilla/5.0"},"env":{"country":"GB"}}}'
eq "$(json 'd["source"]')" model "a request for the model"
req GET /metrics
python3 - "$T/body" <<'PY' && ok || bad "metrics: model calls counted (at least the model's decisions)"
import re, sys
t = open(sys.argv[1]).read()
calls = re.search(r'^verdict_model_calls_total (\d+)$', t, re.M)
model = sum(int(v) for v in re.findall(r'^verdict_decisions_total\{[^}]*source="model"\} (\d+)$', t, re.M))
sys.exit(0 if calls and int(calls.group(1)) >= model >= 1 and re.search(r'^verdict_model_deadline_misses_total \d+$', t, re.M) else 1)
PY
python3 - "$T/body" <<'PY' && ok || bad "metrics: rule hits add up to the rule decisions"
import re, sys
t = open(sys.argv[1]).read()
hits = sum(int(v) for v in re.findall(r'^verdict_rule_hits_total\{[^}]*\} (\d+)$', t, re.M))
rule = sum(int(v) for v in re.findall(r'^verdict_decisions_total\{[^}]*source="rule"\} (\d+)$', t, re.M))
sys.exit(0 if hits == rule and hits > 0 else 1)
PY

stop
# ---- the access log (flushed at stop) ----
python3 - "$T/access.log" >"$T/access.check" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
blocked = [l for l in lines if l["path"] == "/v1/authz" and l["status"] == 403 and l["action"] == "block"]
print("lines", len(lines) > 20)
print("fields", all(set(l) >= {"ts", "method", "path", "status", "us", "action", "snapshot"} for l in lines))
print("authz", len(blocked) >= 2 and all(len(l["snapshot"]) == 36 for l in blocked))
print("reload", any(l["path"] == "/v1/policies/reload" and l["status"] == 401 for l in lines))
PY
eq "$(tr '\n' ' ' <"$T/access.check")" "lines True fields True authz True reload True " "access log: a JSON line per request"
hasnt "$T/access.log" "$TOKEN" "the token is not in the access log"
hasnt "$T/main.log" "$TOKEN" "the token is not in the log"

# ---- without a token: admin endpoints are disabled, not open ----
start noadmin --no-snapshots --no-store
req POST /v1/policies/reload
eq "$CODE" 403 "no token configured: reload answers 403"
eq "$(json 'd["error"]["code"]')" admin_disabled "no token configured: admin_disabled"
req POST /v1/policies/reload -H 'Authorization: Bearer '
eq "$CODE" 403 "no token configured: an empty bearer does not open it"
req GET /v1/policies
eq "$CODE" 200 "no token: GET /v1/policies still answers"
eq "$(json 'd["store"]')" None "--no-store: no store"
stop

# ---- --authz-redact: which headers the rules (and snapshots) see as "[redacted]" ----
start redact --snapshots "$T/snap2" --durability always --no-store --authz-redact ' X-Api-Key,proxy-authorization'
authz -H 'X-Original-URI: /products' -H 'Cookie: a=1' -H 'Cookie: b=2' -H 'X-API-Key: k-123' \
  -H 'X-Real-IP: 10.20.30.40' -H 'User-Agent: Mozilla/5.0 (X11)'
SNAP2=$(header x-verdict-snapshot)
req GET "/v1/snapshots/$SNAP2"
eq "$(json 'd["request"]["context"]["headers"]["cookie"]')" 'a=1, b=2' "--authz-redact without cookie: repeated Cookie headers joined"
eq "$(json 'd["request"]["context"]["headers"]["x-api-key"]')" '[redacted]' "--authz-redact: a listed header, any case, spaces trimmed"
stop
# ---- --snapshot-reads admin: recorded decisions need the admin token ----
start guarded --snapshots "$T/snap3" --durability always --no-store --admin-token-file "$T/token" \
  --snapshot-reads admin --on-full drop
has "$T/guarded.log" '"snapshot_reads":"admin"' "--snapshot-reads admin: logged at start"
has "$T/guarded.log" '"on_full":"drop"' "--on-full drop: logged at start"
req POST /v1/decide -d "$PROBE"
eq "$CODE" 200 "guarded: decisions stay open"
SNAP3=$(json 'd["snapshot_id"]')
req GET "/v1/snapshots/$SNAP3"
eq "$CODE" 401 "guarded: a snapshot without the token is 401"
hasnt "$T/body" '/.env' "guarded: nothing of the request in the 401"
req GET "/v1/snapshots/$SNAP3" -H "Authorization: Bearer $TOKEN-wrong"
eq "$CODE" 401 "guarded: a wrong token is 401"
req GET "/v1/snapshots/$SNAP3" -H "Authorization: Bearer $TOKEN"
eq "$CODE" 200 "guarded: with the token, the snapshot"
eq "$(json 'd["request"]["context"]["path"]')" /.env "guarded: the snapshot of that decision"
EXPLAIN="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"explain_decision\",\"arguments\":{\"snapshot_id\":\"$SNAP3\"}}}"
req POST /mcp -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -d "$EXPLAIN"
eq "$CODE" 200 "guarded: explain_decision over /mcp answers"
eq "$(json 'd["result"]["isError"]')" True "guarded: explain_decision without the token is a tool error"
has "$T/body" "needs the admin token" "guarded: explain_decision says what it needs"
hasnt "$T/body" '/.env' "guarded: explain_decision shows nothing without the token"
req POST /mcp -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
  -H "Authorization: Bearer $TOKEN" -d "$EXPLAIN"
eq "$(json 'd["result"]["isError"]')" False "guarded: explain_decision with the token"
has "$T/body" '/.env' "guarded: explain_decision with the token shows the decision"
stop
"$V" serve -p "$T/bundle" --no-snapshots --snapshot-reads admin --listen 127.0.0.1:0 2>"$T/err"
eq "$?" 1 "--snapshot-reads admin without a token: refused at start"
has "$T/err" "needs the admin token" "--snapshot-reads admin without a token: says why"
"$V" serve -p "$T/bundle" --no-snapshots --on-full wait 2>"$T/err"
eq "$?" 2 "--on-full with another value: bad usage"
has "$T/err" "block or drop" "--on-full: says what it takes"
"$V" serve -p "$T/bundle" --no-snapshots --snapshot-reads everyone 2>"$T/err"
eq "$?" 2 "--snapshot-reads with another value: bad usage"
has "$T/err" "local, open or admin" "--snapshot-reads: says what it wants"
"$V" serve -p "$T/bundle" --authz-redact 'cookie;rm' --listen 127.0.0.1:0 2>"$T/err"
eq "$?" 2 "--authz-redact with a stray character: bad usage"
has "$T/err" "header names separated by commas" "--authz-redact: says what it wants"
VERDICT_ADMIN_TOKEN=short "$V" serve -p "$T/bundle" --no-snapshots --listen 127.0.0.1:0 2>"$T/err"
eq "$?" 1 "a token under 16 characters: refused at start"
has "$T/err" "at least 16" "short token: says why"
"$V" serve -p "$T/bundle" --no-snapshots --admin-token-file "$T/missing" 2>"$T/err"
eq "$?" 1 "a missing token file: exit 1"
"$V" serve -p "$T/bundle" --no-snapshots --max-batch 0 2>"$T/err"
eq "$?" 2 "--max-batch 0: usage error"
"$V" serve -p "$T/bundle" --no-snapshots --access-log "$T/no/such/dir/log" 2>"$T/err"
eq "$?" 1 "an access log that cannot be opened: exit 1"
grep -qF -- '--access-log' "$T/err" && ok || bad "access log error names the option"

# ---- the token from the environment, and --watch ----
PORT=$(free_port); URL="http://127.0.0.1:$PORT"
VERDICT_ADMIN_TOKEN=$TOKEN "$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --no-snapshots \
  --no-store --watch 2>"$T/watch.log" &
PID=$!
wait_ready watch "$T/watch.log"
req POST /v1/policies/reload -H "Authorization: Bearer $TOKEN"
eq "$CODE" 200 "token from VERDICT_ADMIN_TOKEN"
eq "$(json 'd["changed"]')" False "reload with nothing changed: changed false"
req POST /v1/decide -d '{"action":"tool_call","context":{}}'
eq "$CODE" 404 "watch: before the change"
cp examples/policies/agent_guard.yaml "$T/bundle/"
for _ in $(seq 1 50); do grep -q '"trigger":"watch"' "$T/watch.log" && break; sleep 0.1; done
has "$T/watch.log" '"trigger":"watch","changed":true' "watch: a new file reloads"
req POST /v1/decide -d '{"action":"tool_call","context":{}}'
eq "$CODE" 200 "watch: the new strategy serves"
# Files the loader does not read do not reload.
n=$(grep -c '"event":"reload"' "$T/watch.log")
echo x >"$T/bundle/notes.txt"; echo x >"$T/bundle/.swap.yaml"; sleep 0.8
eq "$(grep -c '"event":"reload"' "$T/watch.log")" "$n" "watch: other files do not reload"
printf 'strategy: [\n' >"$T/bundle/zz_broken.yaml"
for _ in $(seq 1 50); do grep -q '"event":"reload_failed"' "$T/watch.log" && break; sleep 0.1; done
has "$T/watch.log" '"event":"reload_failed"' "watch: a broken file is logged"
req POST /v1/decide -d '{"action":"tool_call","context":{}}'
eq "$CODE" 200 "watch: the old bundle keeps serving"
rm "$T/bundle/zz_broken.yaml"
# A change inside models/ (a retrained model, a feature spec) reloads too.
for _ in $(seq 1 50); do [ "$(grep -c '"event":"reload' "$T/watch.log")" -gt "$n" ] && break; sleep 0.1; done
sleep 0.5
n=$(grep -c '"event":"reload' "$T/watch.log")
cp "$(ls "$T/bundle/models/"*.json | head -1)" "$T/bundle/models/retrained.json"
for _ in $(seq 1 50); do [ "$(grep -c '"event":"reload' "$T/watch.log")" -gt "$n" ] && break; sleep 0.1; done
[ "$(grep -c '"event":"reload' "$T/watch.log")" -gt "$n" ] && ok || bad "watch: a change in models/ reloads"
stop
python3 -c 'import sys,json; [json.loads(l) for l in open(sys.argv[1])]' "$T/watch.log" && ok || bad "every log line is JSON"

summary
[ "$fail" = 0 ]
