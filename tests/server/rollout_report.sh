#!/usr/bin/env bash
# rollout_report.sh — `verdict rollout` (docs/rollout.md, "The report") on the
# snapshots of a real `verdict serve --shadow`: the example bundle live, a
# copy with one rule changed as the candidate, `verdict gen` traffic sent to
# it; then the report's compared / agreed / changed, its changes by action
# and fixed / broke are checked against the same figures recomputed here from
# `verdict snapshots export` and the gen labels; its limits against a
# settings file; its HTML page; and its errors, which name the place.
set -u
BUILD=${1:?usage: rollout_report.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl python3

cp -r examples/policies "$T/live"
cp -r examples/policies "$T/cand"
# the candidate declines at a lower fraud score: some payments change
sed -i 's/if: score >= 80/if: score >= 30/' "$T/cand/payment_fraud.yaml"
cmp -s "$T/live/payment_fraud.yaml" "$T/cand/payment_fraud.yaml" && bad "the candidate is not changed"
"$V" gen --kind all --count 600 --seed 7 --labels "$T/labels.jsonl" --out "$T/req.jsonl"

metric() { curl -s "$URL/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
run() { # run SNAPS ARGS...: a server recording into SNAPS, the gen traffic sent, stopped
  local snaps=$1; shift
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  "$V" serve --listen "127.0.0.1:$PORT" --threads 2 --policy "$T/live" --snapshots "$snaps" \
    "$@" 2>"$T/log" &
  PID=$!
  wait_ready rollout_report "$T/log"
  python3 - "$URL" "$T/req.jsonl" <<'EOF'
import sys, http.client, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
for line in open(sys.argv[2]):
    c.request("POST", "/v1/decide", line.strip(), {"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    assert r.status == 200, r.status
EOF
  local a c d e
  for _ in $(seq 1 100); do # every answered request compared, dropped or failed
    a=$(( $(metric 'verdict_rollout_answered_total{side="live"}') + $(metric 'verdict_rollout_answered_total{side="canary"}') ))
    c=$(metric verdict_rollout_compared_total) d=$(metric verdict_rollout_dropped_total) e=$(metric verdict_rollout_errors_total)
    [ $((c + d + e)) -ge "$a" ] && break
    sleep 0.1
  done
  stop
}
run "$T/snaps" --shadow "$T/cand"

"$V" snapshots export --snapshots "$T/snaps" >"$T/export.jsonl"
"$V" rollout --snapshots "$T/snaps" --labels "$T/labels.jsonl" --json >"$T/report.json" 2>"$T/err"
eq "$?" 0 "rollout --json runs"
cat >"$T/check.py" <<'EOF'
import sys, json
recs = [json.loads(l) for l in open(sys.argv[1])]
labels = {}
for l in open(sys.argv[2]):
    if l.strip():
        d = json.loads(l); labels[d["key"]] = d["action"]
rep = json.load(open(sys.argv[3]))
answered = {r["id"]: r for r in recs if "completes" not in r}
compared = agreed = fixed = broke = 0
by_action = {}
for c in recs:
    if "completes" not in c: continue
    a = answered[c["completes"]]
    if a.get("side", "live") != "live": a, c = c, a  # a: live's, c: the candidate's
    compared += 1
    if a["action"] == c["action"] and a["allowed"] == c["allowed"]:
        agreed += 1; continue
    k = (a["action"], c["action"]); by_action[k] = by_action.get(k, 0) + 1
    lab = labels.get(a["key"])
    if lab is not None:
        if c["action"] == lab and a["action"] != lab: fixed += 1
        if a["action"] == lab and c["action"] != lab: broke += 1
got_rows = {(r["live"], r["candidate"]): r["count"] for r in rep["by_action"]}
print("compared", rep["compared"] == compared, compared > 0)
print("agreed", rep["agreed"] == agreed, rep["changed"] == compared - agreed, compared - agreed > 0)
print("by_action", got_rows == by_action)
print("fixed_broke", rep["fixed"] == fixed, rep["broke"] == broke, fixed + broke > 0)
print("latency", rep["live"]["latency_us"]["p50"] > 0, rep["candidate"]["latency_us"]["p99"] >= rep["candidate"]["latency_us"]["p50"] > 0)
ids = {r["id"] for r in recs}
ex = {r["completes"] for r in recs if "completes" in r}
print("examples", all(e in ex for r in rep["by_action"] for e in r["examples"]))
print("canary", rep["canary_answered"] == sum(1 for i in ex if answered[i].get("side") == "canary"))
print("figures", compared, agreed, fixed, broke, file=sys.stderr)
EOF
python3 "$T/check.py" "$T/export.jsonl" "$T/labels.jsonl" "$T/report.json" >"$T/check"
for w in "compared True True" "agreed True True True" "by_action True" "fixed_broke True True True" \
  "latency True True" "examples True" "canary True"; do
  has "$T/check" "$w" "shadow: the report against the recomputation"
done

# a canary answering half of the keys: the live side is the one marked live,
# whichever answered
run "$T/csnaps" --canary "$T/cand" --canary-percent 50
"$V" snapshots export --snapshots "$T/csnaps" >"$T/cexport.jsonl"
"$V" rollout --snapshots "$T/csnaps" --labels "$T/labels.jsonl" --json >"$T/creport.json"
eq "$?" 0 "canary: rollout --json runs"
python3 "$T/check.py" "$T/cexport.jsonl" "$T/labels.jsonl" "$T/creport.json" >"$T/ccheck"
for w in "compared True True" "agreed True True True" "by_action True" "latency True True" \
  "examples True" "canary True"; do
  has "$T/ccheck" "$w" "canary: the report against the recomputation"
done
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["canary_answered"])' "$T/creport.json")" -gt 0 ] &&
  ok || bad "canary: no pair the canary answered"

# the declared limits: a disagreement limit the changes cross, a p99 limit they hold
printf 'canary-max-disagreement = 0.0001\n# a comment\ncanary-max-latency-us = 1000000\n' >"$T/limits.conf"
"$V" rollout --snapshots "$T/snaps" --rollout-settings "$T/limits.conf" >"$T/text" 2>&1
eq "$?" 0 "rollout with a settings file"
has "$T/text" "canary-max-disagreement 0.0001:" "the disagreement limit stated"
has "$T/text" "crossed" "the disagreement limit crossed"
has "$T/text" "canary-max-latency-us 1e+06:" "the latency limit stated"
has "$T/text" "canary-max-errors: not declared" "an undeclared limit said so"
has "$T/text" "recommendation: a declared limit was crossed" "the recommendation"
"$V" rollout --snapshots "$T/snaps" >"$T/text0"
has "$T/text0" "recommendation: no limit declared" "without limits"

# the page
"$V" rollout --snapshots "$T/snaps" --labels "$T/labels.jsonl" --html "$T/r.html" >/dev/null
has "$T/r.html" "<h2>Changes by action</h2>" "the HTML report"
has "$T/r.html" "class=\"cards\"" "the HTML in the replay report's style"

# errors name the place
printf 'canary-max-disagreement = 0.01\nnot a setting\n' >"$T/bad.conf"
"$V" rollout --snapshots "$T/snaps" --rollout-settings "$T/bad.conf" 2>"$T/err" >/dev/null
eq "$?" 1 "a bad settings file"
has "$T/err" "bad.conf:2: expected NAME = VALUE" "the bad line named"
printf '{"key":"x","action":"allow"}\n{"key":"x","action":"deny"}\n' >"$T/badlabels"
"$V" rollout --snapshots "$T/snaps" --labels "$T/badlabels" 2>"$T/err" >/dev/null
eq "$?" 1 "contradicting labels"
has "$T/err" "badlabels" "the labels file named"
"$V" rollout --snapshots "$T/snaps" --since yesterday 2>"$T/err" >/dev/null
eq "$?" 2 "a bad --since"
# --since in the future: nothing compared
"$V" rollout --snapshots "$T/snaps" --since 2200-01-01T00:00:00Z --json >"$T/none.json"
eq "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["compared"])' "$T/none.json")" 0 "--since past every record"

summary
[ "$fail" -eq 0 ]
