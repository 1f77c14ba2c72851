#!/usr/bin/env bash
# rollout.sh — a candidate bundle on live traffic (docs/rollout.md), against a
# real `verdict serve` on loopback under a load loop: a shadow that never
# changes an answer (the answers equal a live-only server's), snapshots that
# hold both sides (the shadow's record completes the answered one) and replay
# exactly; a canary whose side follows the key across a restart, whose share
# changes at run time (admin call, SIGHUP re-reading the settings file), which
# is promoted (a version change) and which rolls itself back when it
# disagrees with live; admin calls refused without the token; bad settings
# refused naming the flag.
set -u
BUILD=${1:?usage: rollout.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl python3

# live denies amounts over 100; the candidate over 50: they disagree on 51..100
mkdir -p "$T/live" "$T/cand"
cat >"$T/live/pay.yaml" <<'EOF'
strategy: pay
decision_points: [payment]
rules:
  - name: big
    if: context.amount > 100
    action: deny
default: allow
EOF
sed 's/> 100/> 50/' "$T/live/pay.yaml" >"$T/cand/pay.yaml"
TOKEN=rollout-test-token-0123456789
echo "$TOKEN" >"$T/token"
AUTH="Authorization: Bearer $TOKEN"

start() { # start LOG ARGS...: a server on a free port
  local log=$1; shift
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  "$V" serve --listen "127.0.0.1:$PORT" --threads 2 --admin-token-file "$T/token" "$@" 2>"$log" &
  PID=$!
  wait_ready rollout "$log"
}
metric() { curl -s "$URL/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
# load OUT N AMOUNT_MOD: N requests on 4 keep-alive connections at once,
# keys k0..k(N-1), amounts (i*7) % AMOUNT_MOD; the answers without latency
# and snapshot id, one a line in request order, into OUT
load() {
  python3 - "$URL" "$1" "$2" "$3" <<'EOF'
import sys, json, threading, http.client, urllib.parse
url, out, n, mod = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
u = urllib.parse.urlparse(url)
answers = [None] * n
def run(part):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    for i in range(part, n, 4):
        body = json.dumps({"action": "payment", "key": "k%d" % i, "context": {"amount": (i * 7) % mod}})
        c.request("POST", "/v1/decide", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        d = json.loads(r.read())
        d.pop("latency_us", None); d.pop("snapshot_id", None)
        answers[i] = json.dumps(d, sort_keys=True)
ts = [threading.Thread(target=run, args=(k,)) for k in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
open(out, "w").write("\n".join(answers) + "\n")
EOF
}
# settle: waits until every answered request was compared, dropped or failed
settle() {
  for _ in $(seq 1 100); do
    local a c d e
    a=$(( $(metric 'verdict_rollout_answered_total{side="live"}') + $(metric 'verdict_rollout_answered_total{side="canary"}') ))
    c=$(metric verdict_rollout_compared_total) d=$(metric verdict_rollout_dropped_total) e=$(metric verdict_rollout_errors_total)
    [ $((c + d + e)) -ge "$a" ] && return 0
    sleep 0.1
  done
  bad "the rollout queue did not drain"
}
export_snaps() { "$V" snapshots export --snapshots "$1" >"$2" 2>/dev/null; }
py() { python3 -c "$@"; }

# ---- the live-only answers ----
start "$T/log0" --policy "$T/live" --no-snapshots --no-store
load "$T/plain" 400 160
stop

# ---- shadow: same answers, both sides recorded, replay exact ----
start "$T/log1" --policy "$T/live" --snapshots "$T/s1" --shadow "$T/cand"
load "$T/shadowed" 400 160
settle
if cmp -s "$T/plain" "$T/shadowed"; then ok; else bad "shadow: the answers changed"; fi
C=$(metric verdict_rollout_compared_total)
D=$(metric verdict_rollout_dropped_total)
eq "$((C + D))" 400 "shadow: every request compared or dropped"
[ "$C" -gt 0 ] && ok || bad "shadow: nothing compared"
# amounts 51..100 are the disagreements: live allow -> shadow deny
[ "$(metric 'verdict_rollout_changes_total{strategy="pay",live="allow",candidate="deny"}')" -gt 0 ] &&
  ok || bad "shadow: no allow -> deny change counted"
curl -s "$URL/metrics" >"$T/m1"
# /v1/stats (the console's figures) names the shadow and its agreement, the same counts
A=$(metric verdict_rollout_agreed_total)
C2=$(metric verdict_rollout_compared_total)
curl -s "$URL/v1/stats?seconds=5" | python3 -c '
import json, sys
v = json.load(sys.stdin)["version"]
a, c = int(sys.argv[1]), int(sys.argv[2])
assert v["shadow"] and len(v["shadow"]) == 64 and v["shadow"] != v["live"], v
assert v["canary"] is None, v
assert abs(v["agreement"] - a / c) < 1e-5, (v, a, c)
' "$A" "$C2" && ok || bad "shadow: /v1/stats version.shadow and agreement"
has "$T/m1" 'verdict_decide_duration_seconds_count' "shadow: beside the live one"
has "$T/m1" 'verdict_rollout_disagreements_total{strategy="pay"}' "shadow: disagreements by strategy"
# the latency histograms by side: the answers live's, the off-path ones the shadow's
mval() { awk -v m="$2" '$1 == m { print $2 }' "$1"; }
DL=$(( $(mval "$T/m1" 'verdict_decide_duration_seconds_count{strategy="pay",source="rule",side="live"}') + \
       $(mval "$T/m1" 'verdict_decide_duration_seconds_count{strategy="pay",source="default",side="live"}') ))
eq "$DL" 400 "shadow: the 400 answers in verdict_decide_duration_seconds{side=\"live\"}"
eq "$(mval "$T/m1" 'verdict_rollout_decide_duration_seconds_count{side="shadow"}')" "$C" \
  "shadow: its decisions in verdict_rollout_decide_duration_seconds{side=\"shadow\"}"
grep -q '^verdict_decide_duration_seconds[_a-z]*{.*side="canary"' "$T/m1" && bad "shadow: canary answers" || ok
if command -v promtool >/dev/null; then
  promtool check metrics <"$T/m1" >"$T/promtool" 2>&1 && ok || bad "promtool: $(head -3 "$T/promtool")"
fi
# admin calls without the token are refused
eq "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/rollout")" 401 "rollout status without the token"
eq "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$URL/v1/rollout/shadow")" 401 "drop without the token"
eq "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong-token-xxxxxxxxxx' -X POST "$URL/v1/rollout/promote")" 401 "promote with a wrong token"
# a bad candidate is refused, naming what is wrong
eq "$(curl -s -o "$T/body" -w '%{http_code}' -H "$AUTH" "$URL/v1/rollout/shadow" -d "{\"dir\":\"$T/nope\"}")" 422 "a shadow folder that does not load"
eq "$(curl -s -o "$T/body" -w '%{http_code}' -H "$AUTH" "$URL/v1/rollout/shadow" -d '{"dir":7}')" 400 "dir not a string"
has "$T/body" '"path":"dir"' "the bad member named"
# dropped at run time: decisions go on unshadowed
eq "$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" -X DELETE "$URL/v1/rollout/shadow")" 200 "drop the shadow"
curl -s "$URL/v1/decide" -d '{"action":"payment","key":"after","context":{"amount":1}}' >/dev/null
# and set again
eq "$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" "$URL/v1/rollout/shadow" -d "{\"dir\":\"$T/cand\"}")" 200 "set the shadow at run time"
AID=$(curl -s "$URL/v1/decide" -d '{"action":"payment","key":"again","context":{"amount":60}}' | py 'import sys,json; print(json.load(sys.stdin)["snapshot_id"])')
settle
# read by id, the answered record carries the shadow's side merged in
for _ in $(seq 1 50); do
  curl -s "$URL/v1/snapshots/$AID" >"$T/body"
  grep -q '"shadow":' "$T/body" && break
  sleep 0.1
done
eq "$(py 'import sys,json; d=json.load(open(sys.argv[1])); s=d["shadow"]; print(d["action"], s["side"], s["action"], s["allowed"], s["rule"], s["bundle_version"] != d["bundle_version"], sorted(s))' "$T/body")" \
  "allow shadow deny False big True ['action', 'allowed', 'bundle_version', 'confidence', 'error', 'id', 'latency_us', 'model_version', 'policy_version', 'review', 'rule', 'side', 'source']" \
  "GET /v1/snapshots/{id}: both sides"
stop
export_snaps "$T/s1" "$T/e1"
py '
import sys, json
recs = [json.loads(l) for l in open(sys.argv[1])]
ids = {r["id"]: r for r in recs}
sh = [r for r in recs if r.get("side") == "shadow"]
live = [r for r in recs if "side" not in r]
assert len(live) == 402, len(live)
assert all(r["completes"] in ids and "side" not in ids[r["completes"]] for r in sh), "completes"
assert all(r["inputs"]["clock_ns"] == ids[r["completes"]]["inputs"]["clock_ns"] for r in sh), "clock"
assert all(r["bundle_version"] != ids[r["completes"]]["bundle_version"] for r in sh), "versions"
assert not any(r["key"] == "after" for r in sh), "shadowed after the drop"
assert any(r["key"] == "again" for r in sh), "not shadowed after set"
assert not any("rollout" in r for r in recs), "rollout without a canary"
print(len(sh))' "$T/e1" >"$T/nsh" 2>"$T/err" && ok || { bad "shadow snapshots: $(tail -1 "$T/err")"; }
eq "$(cat "$T/nsh")" "$((C + 1))" "shadow: one completing record per compared decision"
"$V" replay --snapshots "$T/s1" -q >"$T/r1" 2>&1
has "$T/r1" "every decision reproduced exactly" "shadow: replay of both sides exact"
# the folder alone carries both sides' versions (docs/snapshots.md,
# "Self-contained folders"): replayed with an empty store, nothing else
mkdir -p "$T/empty-store"
"$V" replay --snapshots "$T/s1" --store "$T/empty-store" -q >"$T/r1b" 2>&1
has "$T/r1b" "every decision reproduced exactly" "shadow: the folder holds the candidate's version too"
# scoring a candidate counts the traffic once: the answered decisions alone
"$V" replay --snapshots "$T/s1" --policy "$T/cand" --json -q 2>/dev/null >"$T/r1.json"
eq "$(py 'import sys,json; print(json.load(open(sys.argv[1]))["replayed"])' "$T/r1.json")" 402 "replay --policy: the shadow records not counted as traffic"

# ---- the candidate's refusals: recorded as its side, with the error ----
# errc answers 'hold' (not a candidate: on_no_candidate error) for amounts up
# to 20, which live answers allow: the shadow refuses what live decides
mkdir -p "$T/errc"
cat >"$T/errc/pay.yaml" <<'EOF'
strategy: pay
decision_points: [payment]
rules:
  - name: big
    if: context.amount > 50
    action: deny
  - name: mid
    if: context.amount > 20
    action: allow
default: hold
EOF
# send PATH N: N requests with candidates allow/deny, amounts (i*3) % 60,
# keys e<i>, each as PATH takes it; the answers' snapshot ids into $T/ids
send() {
  python3 - "$URL" "$1" "$2" "$T/ids" <<'EOF'
import sys, json, http.client, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
ids = []
for i in range(int(sys.argv[3])):
    body = json.dumps({"action": "payment", "key": "e%d" % i, "candidates": ["allow", "deny"],
                       "context": {"amount": (i * 3) % 60}})
    c.request("POST", sys.argv[2], body, {"Content-Type": "application/json"})
    r = c.getresponse(); d = json.loads(r.read())
    assert r.status == 200, (r.status, d)
    ids.append(d["snapshot_id"])
open(sys.argv[4], "w").write("\n".join(ids) + "\n")
EOF
}
start "$T/loge" --policy "$T/live" --snapshots "$T/se" --shadow "$T/errc"
send /v1/decide 100 && ok || bad "shadow errors: live answered every request"
settle
# amounts 0..20 of (i*3) % 60 for i < 100: 7 in each cycle of 20, 5 cycles
eq "$(metric verdict_rollout_errors_total)" 35 "shadow errors: the refusals counted"
EID=$(sed -n 1p "$T/ids") # amount 0: refused by the shadow
for _ in $(seq 1 50); do
  curl -s "$URL/v1/snapshots/$EID" >"$T/body"
  grep -q '"shadow":' "$T/body" && break
  sleep 0.1
done
py '
import sys, json
d = json.load(open(sys.argv[1])); s = d["shadow"]
assert d["action"] == "allow" and "error" not in d, d
assert s["side"] == "shadow" and s["action"] is None and s["allowed"] is False, s
assert s["source"] == "error" and len(s["policy_version"]) == 64, s
e = s["error"]
assert sorted(e) == ["code", "message", "path"], e
assert e["code"] == "no_candidate" and e["path"] == "$.candidates", e
assert "hold" in e["message"] and "on_no_candidate" in e["message"], e
' "$T/body" 2>"$T/err" && ok || bad "GET /v1/snapshots/{id}: the shadow error: $(tail -1 "$T/err")"
AID=$(sed -n 8p "$T/ids") # amount 21: both decide
curl -s "$URL/v1/snapshots/$AID" >"$T/body"
eq "$(py 'import sys,json; s=json.load(open(sys.argv[1]))["shadow"]; print(s["action"], s["error"])' "$T/body")" \
  "allow None" "a decision the shadow made has error null"
stop
export_snaps "$T/se" "$T/ee"
py '
import sys, json
recs = [json.loads(l) for l in open(sys.argv[1])]
ids = {r["id"]: r for r in recs}
sh = [r for r in recs if r.get("side") == "shadow"]
err = [r for r in sh if "error" in r]
assert len(sh) == 100 and len(err) == 35, (len(sh), len(err))
assert all(r["request"]["context"]["amount"] <= 20 for r in err), "refused what it decides"
assert all(r["action"] is None and r["source"] == "error" for r in err), "the error form"
assert all(ids[r["completes"]]["action"] == "allow" for r in err), "completes"
assert all(r["error"]["code"] == "no_candidate" for r in err), "the code"
assert not any("error" in r for r in recs if r.get("side") != "shadow"), "live records"
' "$T/ee" 2>"$T/err" && ok || bad "shadow error records: $(tail -1 "$T/err")"
# replay re-decides the shadow's side under its version: the same error
"$V" replay --snapshots "$T/se" --json -q >"$T/re.json" 2>/dev/null
eq "$(py 'import sys,json; r=json.load(open(sys.argv[1])); print(r["replayed"], r["reproduced"], r["errors"])' "$T/re.json")" \
  "200 200 0" "shadow errors: replay reproduces the refusals exactly"
# the report: an error is an outcome of its own, its share shown per side
"$V" rollout --snapshots "$T/se" --json >"$T/rep.json" 2>"$T/err"
py '
import sys, json
r = json.load(open(sys.argv[1]))
# and amounts 51..59 (5 cycles of 3): live allow, the candidate deny
assert r["compared"] == 100 and r["changed"] == 35 + 15, r
assert r["errors"] == {"live": {"count": 0, "share": 0.0}, "candidate": {"count": 35, "share": 0.35}}, r["errors"]
rows = {(x["live"], x["candidate"]): x["count"] for x in r["by_action"]}
assert rows == {("allow", "error:no_candidate"): 35, ("allow", "deny"): 15}, rows
' "$T/rep.json" 2>"$T/err" && ok || bad "rollout report: errors: $(tail -1 "$T/err")"
"$V" rollout --snapshots "$T/se" >"$T/rep.txt" 2>&1
has "$T/rep.txt" "errors: live 0 (0.00%), candidate 35 (35.00%)" "rollout report: the error share"

# ---- every deciding endpoint: batch, /v1/authz, /mcp's decide_action ----
# the bundles also serve http_request (authz) and tool_call (MCP), the same
# in both: each endpoint's decisions are shadowed, and go to the canary by
# the same key hash as /v1/decide's
for b in live cand; do
  mkdir -p "$T/${b}3"
  cp -r "$T/$b/pay.yaml" examples/policies/request_gate.yaml examples/policies/agent_guard.yaml \
    examples/policies/models "$T/${b}3/"
done
# endpoints N: N requests to each of batch (one batch of N), authz and MCP
# (one session); keys b<i>, a<i>, m<i>; the answers into $T/ans.<endpoint>
endpoints() {
  python3 - "$URL" "$1" "$T/ans" <<'EOF'
import sys, json, http.client, urllib.parse
u = urllib.parse.urlparse(sys.argv[1]); n = int(sys.argv[2]); out = sys.argv[3]
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
def post(path, body, headers={}):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    h.update(headers)
    c.request("POST", path, body, h); r = c.getresponse()
    return r, r.read()
batch = [{"action": "payment", "key": "b%d" % i, "context": {"amount": (i * 7) % 160}} for i in range(n)]
r, body = post("/v1/decide/batch", json.dumps(batch))
assert r.status == 200, (r.status, body)
ans = json.loads(body)
assert len(ans) == n and all("snapshot_id" in a for a in ans), ans
open(out + ".batch", "w").write("\n".join(json.dumps([a["action"], a["snapshot_id"]]) for a in ans) + "\n")
lines = []
for i in range(n):
    c.request("GET", "/v1/authz", headers={"X-Original-URI": "/shop/item/%d" % i, "X-Original-Method": "GET",
                                           "X-Verdict-Key": "a%d" % i})
    r = c.getresponse(); r.read()
    assert r.status in (200, 401, 403), r.status
    lines.append(json.dumps([r.status, r.getheader("X-Verdict-Snapshot")]))
open(out + ".authz", "w").write("\n".join(lines) + "\n")
r, body = post("/mcp", json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "rollout.sh", "version": "1"}}}))
assert r.status == 200, (r.status, body)
sid = r.getheader("Mcp-Session-Id")
lines = []
for i in range(n):
    call = {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": "decide_action", "arguments": {
        "tool_name": "Bash", "tool_input": {"command": "ls /tmp/%d" % i}, "cwd": "/home/dev/p", "session_id": "m%d" % i}}}
    r, body = post("/mcp", json.dumps(call), {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    d = json.loads(body)
    assert r.status == 200 and "result" in d, (r.status, d)
    sc = d["result"]["structuredContent"]
    lines.append(json.dumps([sc["action"], sc.get("snapshot_id")]))
open(out + ".mcp", "w").write("\n".join(lines) + "\n")
EOF
}
# check_pairs EXPORT DROPPED: every answered record of the three endpoints is
# completed by at most one record of the other side, at its clock reading,
# and the ones without are exactly the DROPPED the server counted (the
# off-path queue drops when the machine is saturated, by design)
check_pairs() {
  py '
import sys, json
recs = [json.loads(l) for l in open(sys.argv[1])]
ans = {r["id"]: r for r in recs if "completes" not in r}
done = {}
for r in recs:
    if "completes" in r:
        assert r["completes"] in ans, "an orphan"
        a = ans[r["completes"]]
        assert r["inputs"]["clock_ns"] == a["inputs"]["clock_ns"] and r["key"] == a["key"], "pair"
        assert r["side"] != a.get("side", "live") and r["bundle_version"] != a["bundle_version"], "sides"
        done[r["completes"]] = done.get(r["completes"], 0) + 1
missing = 0
for p in ("payment", "http_request", "tool_call"):
    mine = [i for i, a in ans.items() if a["point"] == p]
    assert mine and all(done.get(i, 0) <= 1 for i in mine), (p, len(mine), sum(done.get(i, 0) for i in mine))
    missing += sum(1 for i in mine if i not in done)
assert missing == int(sys.argv[2]), ("not completed", missing, "dropped", sys.argv[2])
print(len(ans), len(done))' "$1" "$2"
}
start "$T/log7" --policy "$T/live3" --snapshots "$T/s7" --shadow "$T/cand3"
endpoints 40 && ok || bad "shadow: batch, authz and MCP answered"
settle
D7=$(metric verdict_rollout_dropped_total)
stop
# the answers are live's: amounts 51..100 allow, though the shadow denies them
py '
import sys, json
for i, l in enumerate(open(sys.argv[1])):
    a = (i * 7) % 160
    assert json.loads(l)[0] == ("deny" if a > 100 else "allow"), (i, l)
' "$T/ans.batch" && ok || bad "shadow: the batch answers are live's"
export_snaps "$T/s7" "$T/e7"
check_pairs "$T/e7" "$D7" >"$T/out" 2>"$T/err" && ok || bad "shadow endpoints: $(tail -1 "$T/err")"
eq "$(cat "$T/out")" "120 $((120 - D7))" "shadow endpoints: 120 answered, all but the dropped ($D7) completed"
"$V" replay --snapshots "$T/s7" --json -q >"$T/r7.json" 2>/dev/null
eq "$(py 'import sys,json; r=json.load(open(sys.argv[1])); print(r["replayed"], r["reproduced"])' "$T/r7.json")" \
  "$((240 - D7)) $((240 - D7))" "shadow endpoints: replay of both sides exact"
# the canary by the key's bucket (FNV-1a 64 of the key, mod 10000), whichever endpoint
start "$T/log8" --policy "$T/live3" --snapshots "$T/s8" --canary "$T/cand3" --canary-percent 50
endpoints 60 && ok || bad "canary: batch, authz and MCP answered"
settle
D8=$(metric verdict_rollout_dropped_total)
stop
export_snaps "$T/s8" "$T/e8"
check_pairs "$T/e8" "$D8" >/dev/null 2>"$T/err" && ok || bad "canary endpoints: $(tail -1 "$T/err")"
py '
import sys, json
def bucket(k):
    h = 1469598103934665603
    for ch in k.encode():
        h = ((h ^ ch) * 1099511628211) % (1 << 64)
    return h % 10000
side = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "completes" in r: continue
    ro = r["rollout"]
    assert ro["by"] == "key" and ro["bucket"] == bucket(r["key"]), (r["key"], ro)
    assert (ro["bucket"] < 5000) == (ro["answered"] == "canary") == (r["side"] == "canary"), ro
    side.setdefault(r["point"], set()).add(ro["answered"])
assert all(side.get(p) == {"live", "canary"} for p in ("payment", "http_request", "tool_call")), side
' "$T/e8" 2>"$T/err" && ok || bad "canary endpoints: the share by the key: $(tail -1 "$T/err")"
"$V" replay --snapshots "$T/s8" -q >"$T/r8" 2>&1
has "$T/r8" "every decision reproduced exactly" "canary endpoints: replay exact"

# ---- canary: the side follows the key, across a restart ----
sides() { # the answered side of each key, sorted
  export_snaps "$1" "$T/e"
  py '
import sys, json
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "completes" not in r and "rollout" in r:
        print(r["key"], r["rollout"]["answered"], r["rollout"]["bucket"], r["policy_version"][:12])
' "$T/e" | sort
}
start "$T/log2" --policy "$T/live" --snapshots "$T/s2" --canary "$T/cand" --canary-percent 40
load "$T/c1" 200 50 # amounts below 51: both sides agree
settle
stop
start "$T/log3" --policy "$T/live" --snapshots "$T/s3" --canary "$T/cand" --canary-percent 40
load "$T/c2" 200 50
settle
sides "$T/s2" >"$T/sides2"
sides "$T/s3" >"$T/sides3"
if cmp -s "$T/sides2" "$T/sides3"; then ok; else bad "canary: a key changed side across a restart"; fi
N=$(grep -c ' canary ' "$T/sides2")
# the canary's answers in the decide histogram under side="canary", live's
# off-path decisions of them under the rollout histogram's side="live"
curl -s "$URL/metrics" >"$T/m3"
py '
import sys, re
m = {}
for l in open(sys.argv[1]):
    if l.startswith("#") or not l.strip(): continue
    k, v = l.rsplit(" ", 1); m[k] = float(v)
def total(pat): return sum(v for k, v in m.items() if re.fullmatch(pat, k))
can = m["verdict_rollout_answered_total{side=\"canary\"}"]; live = m["verdict_rollout_answered_total{side=\"live\"}"]
assert can > 0 and live > 0, (can, live)
assert total(r"verdict_decide_duration_seconds_count\{.*side=\"canary\"\}") == can, "canary answers"
assert total(r"verdict_decide_duration_seconds_count\{.*side=\"live\"\}") == live, "live answers"
dropped = m["verdict_rollout_dropped_total"]
off = total(r"verdict_rollout_decide_duration_seconds_count\{side=\"(live|canary)\"\}")
assert off + dropped == can + live and m["verdict_rollout_decide_duration_seconds_count{side=\"live\"}"] > 0, "off path"
assert m["verdict_rollout_decide_duration_seconds_count{side=\"shadow\"}"] == 0, "no shadow"
' "$T/m3" 2>"$T/err" && ok || bad "canary: the latency histograms by side: $(tail -1 "$T/err")"
[ "$N" -gt 20 ] && [ "$N" -lt 140 ] && ok || bad "canary: $N of 200 keys on the canary at 40%"
# the answer's policy_version is the answering side's
py '
import sys
v = {}
for l in open(sys.argv[1]):
    k, side, b, pv = l.split()
    assert (int(b) < 4000) == (side == "canary"), l
    v.setdefault(side, set()).add(pv)
assert len(v["live"]) == 1 and len(v["canary"]) == 1 and v["live"] != v["canary"], v
' "$T/sides2" && ok || bad "canary: side and version by bucket"
# the share at run time
eq "$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" "$URL/v1/rollout/percent" -d '{"percent":100}')" 200 "set percent"
eq "$(metric verdict_canary_percent)" 100 "percent 100 in the metrics"
eq "$(curl -s -o "$T/body" -w '%{http_code}' -H "$AUTH" "$URL/v1/rollout/percent" -d '{"percent":101}')" 400 "percent past 100"
has "$T/body" '"path":"percent"' "percent named"
curl -s "$URL/v1/decide" -d '{"action":"payment","key":"k1","context":{"amount":1}}' >"$T/body"
has "$T/body" "$(grep ' canary ' "$T/sides2" | head -1 | awk '{print $4}')" "at 100% the canary answers"
# promote: the canary's bundle goes live through a reload
CV=$(curl -s -H "$AUTH" "$URL/v1/rollout" | py 'import sys,json; print(json.load(sys.stdin)["canary"]["policy_version"])')
eq "$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" -X POST "$URL/v1/rollout/promote")" 200 "promote"
curl -s -H "$AUTH" "$URL/v1/rollout" >"$T/body"
has "$T/body" '"canary":null' "promoted: no canary left"
has "$T/body" "\"live\":{\"policy_version\":\"$CV\"}" "promoted: live is the canary's bundle"
has "$T/log3" '"event":"reload"' "promote is a reload"
has "$T/log3" '"trigger":"promote"' "its trigger"
curl -s "$URL/v1/decide" -d '{"action":"payment","key":"p","context":{"amount":70}}' >"$T/body"
has "$T/body" '"action":"deny"' "promoted: the candidate's rule decides"
eq "$(metric verdict_canary_promotions_total)" 1 "promotion counted"
stop

# ---- automatic rollback: a canary that denies what live allows ----
start "$T/log4" --policy "$T/live" --snapshots "$T/s4" --canary "$T/cand" --canary-percent 50 \
  --canary-max-disagreement 0.1 --canary-window 200 --canary-min-decisions 50
load "$T/c4" 300 101 # half of 51..100 disagree: over 10%
settle
eq "$(metric 'verdict_canary_rollbacks_total{reason="disagreement"}')" 1 "rolled back by itself"
eq "$(metric verdict_canary_percent)" 0 "no canary share left"
has "$T/log4" '"event":"rollback"' "the rollback logged"
has "$T/log4" '"reason":"disagreement"' "with its reason"
curl -s "$URL/v1/decide" -d '{"action":"payment","key":"k1","context":{"amount":70}}' >"$T/body"
has "$T/body" '"action":"allow"' "after the rollback live answers"
eq "$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" -X POST "$URL/v1/rollout/rollback")" 409 "nothing left to roll back"
stop
"$V" replay --snapshots "$T/s4" -q >"$T/r4" 2>&1
has "$T/r4" "every decision reproduced exactly" "canary: replay of both sides exact"

# ---- SIGHUP re-reads the settings file ----
printf 'canary-percent = 0\n' >"$T/rollout.conf"
start "$T/log5" --policy "$T/live" --no-snapshots --no-store --canary "$T/cand" --rollout-settings "$T/rollout.conf"
eq "$(metric verdict_canary_percent)" 0 "percent from the file"
printf '# raised\ncanary-percent = 25\ncanary-max-errors = 0.5\n' >"$T/rollout.conf"
kill -HUP "$PID"
for _ in $(seq 1 50); do [ "$(metric verdict_canary_percent)" = 25 ] && break; sleep 0.1; done
eq "$(metric verdict_canary_percent)" 25 "SIGHUP: percent re-read"
printf 'canary-percent = lots\n' >"$T/rollout.conf"
kill -HUP "$PID"
for _ in $(seq 1 50); do grep -q rollout_settings_failed "$T/log5" && break; sleep 0.1; done
has "$T/log5" 'rollout.conf:1: canary-percent wants a share from 0 to 100' "SIGHUP: a bad file named, line and setting"
eq "$(metric verdict_canary_percent)" 25 "SIGHUP: a bad file changes nothing"
stop

# ---- the side by a context field the strategy names (rollout_key) ----
mkdir -p "$T/live2" "$T/cand2"
{ cat "$T/live/pay.yaml"; echo "rollout_key: account"; } >"$T/live2/pay.yaml"
{ cat "$T/cand/pay.yaml"; echo "rollout_key: account"; } >"$T/cand2/pay.yaml"
"$V" check "$T/live2" >/dev/null 2>&1 && ok || bad "check: rollout_key accepted"
start "$T/log6" --policy "$T/live2" --snapshots "$T/s6" --canary "$T/cand2" --canary-percent 50
for a in $(seq 1 30); do
  for k in x y; do
    curl -s -o /dev/null "$URL/v1/decide" -d "{\"action\":\"payment\",\"key\":\"$a$k\",\"context\":{\"amount\":1,\"account\":\"acct$a\"}}"
  done
done
curl -s -o /dev/null "$URL/v1/decide" -d '{"action":"payment","key":"nofield","context":{"amount":1}}'
settle
stop
export_snaps "$T/s6" "$T/e6"
py '
import sys, json
side = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "completes" in r: continue
    ro = r["rollout"]
    if r["key"] == "nofield":
        assert ro["by"] == "no key" and ro["answered"] == "live", ro
        continue
    assert ro["by"] == "field account", ro
    acct = r["request"]["context"]["account"]
    side.setdefault(acct, set()).add(ro["answered"])
assert len(side) == 30 and all(len(v) == 1 for v in side.values()), side
assert {"live", "canary"} == set().union(*side.values()), side
' "$T/e6" 2>"$T/err" && ok || bad "rollout_key: $(tail -1 "$T/err")"
mkdir -p "$T/badkey"
{ cat "$T/live/pay.yaml"; echo "rollout_key: [account]"; } >"$T/badkey/pay.yaml"
"$V" check "$T/badkey" >"$T/out" 2>&1 && bad "check: a bad rollout_key accepted" || ok
has "$T/out" "rollout_key" "check names rollout_key"
has "$T/out" "pay.yaml:8" "check names the line"

# ---- bad settings: clear errors naming the flag ----
refused() { # refused WANT ARGS...: not started, and the message has WANT
  timeout 10 "$V" serve --policy "$T/live" --no-snapshots --no-store --listen 127.0.0.1:0 "${@:2}" >"$T/out" 2>&1
  local rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && ok || bad "${*:2}: not refused (exit $rc)"
  has "$T/out" "$1" "the error for ${*:2}"
}
refused '--canary-percent wants a share from 0 to 100, not 150' --canary "$T/cand" --canary-percent 150
refused '--canary-percent without --canary' --canary-percent 5
refused '--shadow and --canary' --shadow "$T/cand" --canary "$T/cand"
refused '--canary-max-disagreement wants a share from 0 to 1' --canary "$T/cand" --canary-max-disagreement 2
refused '--canary-no-key takes live or canary' --canary "$T/cand" --canary-no-key maybe
refused 'canary-min-decisions 500 is more than --canary-window 100' --canary "$T/cand" --canary-window 100 --canary-min-decisions 500
printf 'canary-percnt = 5\n' >"$T/bad.conf"
refused 'bad.conf:1: unknown setting' --canary "$T/cand" --rollout-settings "$T/bad.conf"
refused "$T/nope" --shadow "$T/nope"

summary
[ "$fail" -eq 0 ]
