#!/usr/bin/env bash
# parallel.sh — `verdict replay --workers N`, `--shard I/N` and `--merge`
# end to end, on a few thousand snapshots recorded by `verdict decide`:
#   - --workers 2 (and 3) give the report of --workers 1: the same counts,
#     the same failure / change lists in the same order, the same per-point
#     figures and scores (JSON compared without the measured times), in the
#     determinism check and for a candidate bundle with labels
#   - three shards split the log (every snapshot in exactly one) and their
#     merged report is the whole run's; the recorded latency percentiles,
#     which come from the snapshots, are equal to the digit
#   - bad --workers / --shard values exit 2 naming the flag
#   - --merge refuses a shard missing, a shard twice, another candidate's
#     shard, a report that is not a shard's, another shard count, bad JSON,
#     naming the file
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: parallel.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

# same_report A B: the two JSON reports are equal, measured times aside
# (wall clock, replayed latency and CPU, memory, and the latency and cost
# categories computed from them; the recorded latency stays: it is read
# from the snapshots). Prints the first differences.
same_report() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
TIMING = {"cpu_ns", "memory", "wall_seconds", "snapshots_per_second", "shard", "cpu_us",
          "reference_cpu_us"}
def strip(d, top=False):
    if isinstance(d, dict):
        if d.get("name") in ("latency", "cost") and "weight" in d:
            return {"name": d["name"], "weight": d["weight"]}
        out = {}
        for k, v in d.items():
            if k in TIMING:
                continue
            if k == "latency_us":
                # the top-level pair keeps the recorded side; a side's own is measured
                out[k] = {"recorded": v.get("recorded")} if top and isinstance(v, dict) else None
                continue
            out[k] = strip(v)
        return out
    if isinstance(d, list):
        return [strip(x) for x in d]
    return d
a = strip(json.load(open(sys.argv[1])), True)
b = strip(json.load(open(sys.argv[2])), True)
n = 0
def diff(a, b, p="$"):
    global n
    if n > 10: return
    if type(a) != type(b) or (not isinstance(a, (dict, list)) and a != b):
        n += 1; print("  %s: %r != %r" % (p, a, b), file=sys.stderr); return
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)): diff(a.get(k), b.get(k), p + "." + k)
    elif isinstance(a, list):
        if len(a) != len(b): n += 1; print("  %s: %d items != %d" % (p, len(a), len(b)), file=sys.stderr)
        for i, (x, y) in enumerate(zip(a, b)): diff(x, y, "%s[%d]" % (p, i))
diff(a, b)
sys.exit(0 if a == b else 1)
EOF
}
# field FILE PATH: a value of a JSON report (dotted path)
field() {
  python3 -c '
import json, sys
v = json.load(open(sys.argv[1]))
for p in sys.argv[2].split("."):
    v = v[int(p)] if isinstance(v, list) else v[p]
print(json.dumps(v))' "$1" "$2"
}

# ---- recorded traffic ----
mkdir "$T/bundle" && cp examples/policies/*.yaml "$T/bundle/" && cp -r examples/policies/models "$T/bundle/"
N=2000
"$V" gen --count $N --seed 7 --labels "$T/labels.jsonl" >"$T/traffic.jsonl" || bad "verdict gen"
"$V" decide --policy "$T/bundle" --jsonl "$T/traffic.jsonl" >/dev/null 2>"$T/err" ||
  { bad "verdict decide"; cat "$T/err" >&2; }
SNAPS="$T/bundle/.verdict/snapshots"
# a candidate that changes decisions (so that the change lists are long)
mkdir "$T/cand" && cp examples/policies/*.yaml "$T/cand/" && cp -r examples/policies/models "$T/cand/"
# A candidate's model runs on the clock (its deadline is not the recorded
# one): at the example's 15 ms a loaded machine can miss it in one run and not
# in the next, which would change the decision between two runs; 10 s it is.
sed -i 's/^  challenge_rpm: 300 /  challenge_rpm: 120 /; s/^  max_failed_logins: 5 /  max_failed_logins: 2 /; s/^  timeout_ms: 15$/  timeout_ms: 10000/' \
  "$T/cand/request_gate.yaml"
grep -q "challenge_rpm: 120" "$T/cand/request_gate.yaml" && ok || bad "editing the candidate"
grep -q "timeout_ms: 10000" "$T/cand/request_gate.yaml" && ok || bad "the candidate's model deadline"
# the latency and cost weights at 0: the score is then not made of measured times
W=(--weights 40,0,0,20)

# ---- --workers: the same report as one worker ----
"$V" replay -s "$SNAPS" --json "${W[@]}" >"$T/d1.json" 2>"$T/err"
eq "$?" 0 "determinism, one worker: exit"
eq "$(field "$T/d1.json" reproduced)" $N "determinism, one worker: every snapshot reproduced"
for n in 2 3; do
  "$V" replay -s "$SNAPS" --json "${W[@]}" --workers $n >"$T/d$n.json" 2>"$T/err"
  eq "$?" 0 "determinism, $n workers: exit"
  same_report "$T/d1.json" "$T/d$n.json" && ok || bad "determinism: --workers $n report != --workers 1"
done
C=(--policy "$T/cand" --labels "$T/labels.jsonl")
"$V" replay -s "$SNAPS" "${C[@]}" --json "${W[@]}" >"$T/c1.json" 2>"$T/err"
eq "$?" 0 "candidate, one worker: exit"
changed=$(field "$T/c1.json" changed)
[ "$changed" -gt 10 ] && ok || bad "the candidate changes decisions (changed=$changed)"
"$V" replay -s "$SNAPS" "${C[@]}" --json "${W[@]}" -w 2 >"$T/c2.json" 2>"$T/err"
eq "$?" 0 "candidate, two workers: exit"
same_report "$T/c1.json" "$T/c2.json" && ok || bad "candidate: --workers 2 report != --workers 1"
eq "$(field "$T/c2.json" changed_decisions.0.id)" "$(field "$T/c1.json" changed_decisions.0.id)" \
  "candidate: the first change listed"
# the text report counts the same
"$V" replay -s "$SNAPS" -q --workers 2 >"$T/t2.txt" 2>&1
eq "$?" 0 "determinism text, two workers: exit"
has "$T/t2.txt" "result: every decision reproduced exactly" "determinism text, two workers"
# a limit and a filter apply as with one worker
"$V" replay -s "$SNAPS" --json "${W[@]}" --limit 777 --point tool_call >"$T/l1.json" 2>/dev/null
"$V" replay -s "$SNAPS" --json "${W[@]}" --limit 777 --point tool_call --workers 2 >"$T/l2.json" 2>/dev/null
same_report "$T/l1.json" "$T/l2.json" && ok || bad "--limit and --point with two workers"
# the version store gone: every snapshot an error, listed in the same order
mkdir "$T/bare" && cp -r "$SNAPS" "$T/bare/snaps" && rm -rf "$T/bare/snaps/versions"
"$V" replay -s "$T/bare/snaps" --store "$T/none" --json "${W[@]}" >"$T/e1.json" 2>/dev/null
"$V" replay -s "$T/bare/snaps" --store "$T/none" --json "${W[@]}" -w 2 >"$T/e2.json" 2>/dev/null
eq "$(field "$T/e2.json" errors)" $N "every snapshot an error without the versions, two workers"
same_report "$T/e1.json" "$T/e2.json" && ok || bad "errors: --workers 2 report != --workers 1"

# ---- --shard and --merge: the whole run's report ----
for i in 0 1 2; do
  "$V" replay -s "$SNAPS" "${C[@]}" --json "${W[@]}" --shard $i/3 -w 2 >"$T/s$i.json" 2>"$T/err"
  eq "$?" 0 "shard $i/3: exit"
done
python3 - "$T" $N <<'EOF' && ok || bad "the shards split the log: every snapshot in one"
import json, sys
t, n = sys.argv[1], int(sys.argv[2])
ids = []
for i in range(3):
    d = json.load(open("%s/s%d.json" % (t, i)))
    sh = d["shard"]
    assert sh["index"] == i and sh["count"] == 3 and sh["passed"] == n, sh["index"]
    assert d["seen"] == len(sh["decisions"]) > n / 6, d["seen"]
    ids += [x["id"] for x in sh["decisions"]]
assert len(ids) == n == len(set(ids)), (len(ids), len(set(ids)))
EOF
# the documented hash: FNV-1a 64 of the id text, mod the count
python3 - "$T" <<'EOF' && ok || bad "each snapshot in the shard FNV-1a 64 of its id says"
import json, sys
def fnv(s):
    h = 0xcbf29ce484222325
    for c in s.encode():
        h = ((h ^ c) * 0x100000001b3) % 2**64
    return h
for i in range(3):
    for x in json.load(open("%s/s%d.json" % (sys.argv[1], i)))["shard"]["decisions"]:
        assert fnv(x["id"]) % 3 == i, x["id"]
EOF
"$V" replay --merge "$T/s2.json" "$T/s0.json" "$T/s1.json" --json --html "$T/m.html" >"$T/m.json" 2>"$T/err"
eq "$?" 0 "--merge: exit"
same_report "$T/c1.json" "$T/m.json" && ok || bad "3 shards merged != the whole run"
eq "$(field "$T/m.json" latency_us.recorded)" "$(field "$T/c1.json" latency_us.recorded)" \
  "merged recorded latency percentiles"
eq "$(field "$T/m.json" labels.recorded.accuracy)" "$(field "$T/c1.json" labels.recorded.accuracy)" \
  "merged label accuracy"
grep -q "</html>" "$T/m.html" && ok || bad "--merge --html writes the page"
# the merged replayed latency is the shards' together: its count is theirs
eq "$(field "$T/m.json" latency_us.replayed.count)" $N "merged replayed latency count"
# the determinism check merged, text: the whole run's result line
for i in 0 1 2; do "$V" replay -s "$SNAPS" --json --shard $i/3 >"$T/ds$i.json" 2>/dev/null; done
"$V" replay --merge "$T/ds0.json" "$T/ds1.json" "$T/ds2.json" >"$T/dm.txt" 2>&1
eq "$?" 0 "determinism merged: exit"
has "$T/dm.txt" "result: every decision reproduced exactly" "determinism merged: result"
"$V" replay --merge "$T/ds0.json" "$T/ds1.json" "$T/ds2.json" --json >"$T/dm.json" 2>/dev/null
eq "$(field "$T/dm.json" reproduced)" $N "determinism merged: reproduced"
# one shard of one: the whole log
"$V" replay -s "$SNAPS" --json "${W[@]}" --shard 0/1 >"$T/one.json" 2>/dev/null
"$V" replay --merge "$T/one.json" --json >"$T/onem.json" 2>/dev/null
same_report "$T/d1.json" "$T/onem.json" && ok || bad "--shard 0/1 merged != the whole run"

# ---- bad flags: exit 2, naming the flag ----
usage() { # usage WHAT FLAG ARGS...
  local what=$1 flag=$2
  shift 2
  "$V" replay "$@" >"$T/out" 2>"$T/err"
  eq "$?" 2 "$what: exit"
  has "$T/err" "$flag" "$what: the message names $flag"
}
usage "--workers 0" --workers -s "$SNAPS" --workers 0
usage "--workers 257" --workers -s "$SNAPS" --workers 257
usage "--workers two" --workers -s "$SNAPS" --workers two
usage "--shard 3/3" --shard -s "$SNAPS" --shard 3/3
usage "--shard 1" --shard -s "$SNAPS" --shard 1
usage "--shard -1/2" --shard -s "$SNAPS" --shard -1/2
usage "--shard 0/0" --shard -s "$SNAPS" --shard 0/0
usage "--shard 1/2x" --shard -s "$SNAPS" --shard 1/2x
usage "--shard with --limit" --limit -s "$SNAPS" --shard 0/2 --limit 5
usage "--shard with two candidates" --shard -s "$SNAPS" --shard 0/2 --policy "$T/cand" --policy "$T/bundle"
usage "--merge with a snapshot folder" --merge --merge "$T/s0.json" -s "$SNAPS"
usage "--merge without files" --merge --merge
usage "a file without --merge" "unexpected argument" -s "$SNAPS" "$T/s0.json"

# ---- --merge refuses, naming the file ----
refused() { # refused WHAT TEXT FILES...
  local what=$1 text=$2
  shift 2
  "$V" replay --merge "$@" --json >"$T/out" 2>"$T/err"
  eq "$?" 1 "$what: exit"
  has "$T/err" "$text" "$what"
  [ -s "$T/out" ] && bad "$what: a report was printed" || ok
}
refused "a shard missing" "shard 1/3 is missing" "$T/s0.json" "$T/s2.json"
refused "a shard twice" "$T/s1.json: shard 1/3 again" "$T/s0.json" "$T/s1.json" "$T/s1.json" "$T/s2.json"
refused "a report that is not a shard's" "$T/c1.json: not a shard's report" "$T/s0.json" "$T/c1.json"
refused "a determinism shard with a candidate's" "$T/ds1.json: another run's shard: the mode" \
  "$T/s0.json" "$T/ds1.json" "$T/s2.json"
# another candidate's shard
mkdir "$T/cand2" && cp "$T/cand/"*.yaml "$T/cand2/" && cp -r examples/policies/models "$T/cand2/"
sed -i 's/challenge_rpm: 120 /challenge_rpm: 60 /' "$T/cand2/request_gate.yaml"
# two candidates side by side: the same report with two workers
"$V" replay -s "$SNAPS" "${C[@]}" --policy "$T/cand2" --json "${W[@]}" >"$T/mc1.json" 2>/dev/null
eq "$?" 0 "two candidates, one worker: exit"
"$V" replay -s "$SNAPS" "${C[@]}" --policy "$T/cand2" --json "${W[@]}" -w 2 >"$T/mc2.json" 2>/dev/null
eq "$?" 0 "two candidates, two workers: exit"
same_report "$T/mc1.json" "$T/mc2.json" && ok || bad "two candidates: --workers 2 report != --workers 1"
"$V" replay -s "$SNAPS" --policy "$T/cand2" --labels "$T/labels.jsonl" --json "${W[@]}" \
  --shard 1/3 >"$T/x1.json" 2>/dev/null
refused "another candidate's shard" "$T/x1.json: another run's shard: the candidate policy version" \
  "$T/s0.json" "$T/x1.json" "$T/s2.json"
# another count
"$V" replay -s "$SNAPS" "${C[@]}" --json "${W[@]}" --shard 1/2 >"$T/h1.json" 2>/dev/null
refused "another shard count" "$T/h1.json: another run's shard: the number of shards" "$T/s0.json" "$T/h1.json"
# other weights
"$V" replay -s "$SNAPS" "${C[@]}" --json --shard 1/3 >"$T/w1.json" 2>/dev/null
refused "other weights" "$T/w1.json: another run's shard: the score's weights" "$T/s0.json" "$T/w1.json" "$T/s2.json"
# bad files
head -c 5000 "$T/s1.json" >"$T/cut.json"
refused "a cut file" "$T/cut.json: not JSON" "$T/s0.json" "$T/cut.json" "$T/s2.json"
refused "no such file" "$T/nope.json: cannot read it" "$T/s0.json" "$T/nope.json"
# a decision put into the wrong shard's report
python3 - "$T" <<'EOF'
import json, sys
t = sys.argv[1]
d0, d1 = json.load(open(t + "/s0.json")), json.load(open(t + "/s1.json"))
d1["shard"]["decisions"].append(d0["shard"]["decisions"][0])
json.dump(d1, open(t + "/moved.json", "w"))
EOF
refused "a decision in the wrong shard" "$T/moved.json: snapshot" "$T/s0.json" "$T/moved.json" "$T/s2.json"

"$V" replay --help | grep -q -- "--workers N" && ok || bad "replay --help names --workers"
"$V" replay --help | grep -q -- "--merge FILE" && ok || bad "replay --help names --merge"

summary
[ "$fail" = 0 ]
