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

PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
"$V" serve --listen "127.0.0.1:$PORT" --threads 2 --policy "$T/live" --snapshots "$T/snaps" \
  --shadow "$T/cand" 2>"$T/log" &
PID=$!
wait_ready rollout_report "$T/log"
metric() { curl -s "$URL/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
python3 - "$URL" "$T/req.jsonl" <<'EOF'
import sys, http.client, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
for line in open(sys.argv[2]):
    c.request("POST", "/v1/decide", line.strip(), {"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    assert r.status == 200, r.status
EOF
for _ in $(seq 1 100); do # every answered request compared, dropped or failed
  a=$(metric 'verdict_rollout_answered_total{side="live"}')
  c=$(metric verdict_rollout_compared_total) d=$(metric verdict_rollout_dropped_total) e=$(metric verdict_rollout_errors_total)
  [ $((c + d + e)) -ge "${a:-0}" ] && break
  sleep 0.1
done
stop

"$V" snapshots export --snapshots "$T/snaps" >"$T/export.jsonl"
"$V" rollout --snapshots "$T/snaps" --labels "$T/labels.jsonl" --json >"$T/report.json" 2>"$T/err"
eq "$?" 0 "rollout --json runs"
python3 - "$T/export.jsonl" "$T/labels.jsonl" "$T/report.json" >"$T/check" <<'EOF'
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
print("examples", all(e in answered for r in rep["by_action"] for e in r["examples"]))
print("figures", compared, agreed, fixed, broke, file=sys.stderr)
EOF
for w in "compared True True" "agreed True True True" "by_action True" "fixed_broke True True True" \
  "latency True True" "examples True"; do
  has "$T/check" "$w" "the report against the recomputation"
done

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
