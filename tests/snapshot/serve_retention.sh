#!/usr/bin/env bash
# serve_retention.sh — `verdict serve --retention FILE` runs gc on its
# schedule inside the server while decisions go on: a client decides
# request after request while gc (every second, keeping nothing old)
# deletes and rewrites sealed segments under the live writer; every answer
# is a 200 with a snapshot id, the log shows gc runs that removed records
# and no failure, the server stops cleanly, and what is left of the folder
# verifies and replays exactly.
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: serve_retention.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl

cp -r examples/policies "$T/B" && rm -rf "$T/B/.verdict"
"$V" gen --count 400 --seed 7 >"$T/req.jsonl" 2>/dev/null
cat >"$T/ret.yaml" <<'EOF'
keep_days: 0
keep: 'source == "error"'
sample:
  - if: 'point == "payment_authorization"'
    rate: 0.5
  - rate: 0
every: 1s
EOF
# a bad retention file stops serve before it listens
printf 'keep: "nope =="\n' >"$T/bad.yaml"
"$V" serve --policy "$T/B" --snapshots "$T/x" --retention "$T/bad.yaml" --listen 127.0.0.1:0 \
  >"$T/out" 2>&1
eq "$?" 1 "serve with a bad retention file: exit 1"
has "$T/out" "bad.yaml:1:" "its error at its place"

PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
"$V" serve --policy "$T/B" --snapshots "$T/S" --retention "$T/ret.yaml" \
  --snapshot-segment 65536 --listen "127.0.0.1:$PORT" >"$T/log" 2>&1 &
PID=$!
wait_ready "serve" "$T/log"
python3 - "$PORT" "$T/req.jsonl" "$T/log" <<'EOF' >"$T/client" 2>&1 && ok || bad "decisions under gc: $(tail -5 "$T/client")"
import http.client, json, sys, time
port, reqs, log = int(sys.argv[1]), open(sys.argv[2]).read().splitlines(), sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
n = bad = 0
start = time.time()
def gc_runs():
    runs = 0
    for line in open(log):
        if '"event":"snapshot_gc"' in line and json.loads(line)["removed"] > 0:
            runs += 1
    return runs
# until gc has removed records at least three times while we decide (or a
# minute, then the checks below fail)
while gc_runs() < 3 and time.time() - start < 60:
    for body in reqs:
        c.request("POST", "/v1/decide", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        n += 1
        if r.status != 200 or not json.loads(data).get("snapshot_id"):
            bad += 1
            print("bad answer", r.status, data[:200])
print("decisions", n, "bad", bad, "gc runs that removed", gc_runs())
assert bad == 0 and gc_runs() >= 3
EOF
cat "$T/client" >&2
stop
grep -q '"event":"snapshot_gc_failed"' "$T/log" && bad "a gc run failed: $(grep snapshot_gc_failed "$T/log" | head -2)" || ok
grep -q '"level":"error"' "$T/log" && bad "errors in the log: $(grep '"level":"error"' "$T/log" | head -2)" || ok
grep '"event":"snapshot_gc"' "$T/log" | grep -q '"rewritten":[1-9]' && ok || bad "no gc run rewrote a segment"
"$V" snapshots verify "$T/S" >"$T/out" 2>&1
eq "$?" 0 "what is left verifies: $(tail -2 "$T/out")"
"$V" replay --snapshots "$T/S" --json >"$T/r.json" 2>/dev/null
eq "$?" 0 "what is left replays exactly"
# nothing lost: every decision answered is either left or removed by gc
python3 - "$T/r.json" "$T/client" "$T/log" <<'EOF' && ok || bad "decided != left + removed"
import json, sys
d = json.load(open(sys.argv[1]))
n = int(open(sys.argv[2]).read().split()[1])
removed = sum(json.loads(l)["removed"] for l in open(sys.argv[3]) if '"event":"snapshot_gc"' in l)
print("decided", n, "left", d["seen"], "removed by gc", removed, file=sys.stderr)
assert 0 < d["seen"] < n and d["reproduced"] == d["seen"]
assert d["seen"] + removed == n, (d["seen"], removed, n)
EOF

summary
[ "$fail" -eq 0 ]
