#!/usr/bin/env bash
# replay.sh — `verdict replay` end to end: generated traffic decided with
# snapshots on, then replayed.
#   - determinism check: every snapshot of every example strategy reproduces
#     (exit 0); with the version store gone every snapshot fails and is
#     listed (exit 1)
#   - a candidate bundle: the changes it makes (by action and by rule, with
#     example ids that are real snapshot ids), label accuracy of both sides,
#     the score and its formula with custom weights, exit 0
#   - --json fields, --html well-formed and self-contained, filters, usage
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: replay.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

# check_json FILE KEY=VALUE...: fields of a JSON report (dotted paths)
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

# ---- recorded traffic: every strategy, snapshots where `verdict decide` keeps them ----
mkdir "$T/bundle" && cp examples/policies/*.yaml "$T/bundle/" && cp -r examples/policies/models "$T/bundle/"
N=1500
"$V" gen --count $N --seed 3 --labels "$T/labels.jsonl" >"$T/traffic.jsonl" || bad "verdict gen"
"$V" decide --policy "$T/bundle" --jsonl "$T/traffic.jsonl" >"$T/decisions.jsonl" 2>"$T/err" ||
  { bad "verdict decide"; cat "$T/err" >&2; }
SNAPS="$T/bundle/.verdict/snapshots"
[ -d "$SNAPS" ] && ok || bad "verdict decide recorded no snapshots in $SNAPS"
python3 -c "
import json,sys
ds=[json.loads(l) for l in open('$T/decisions.jsonl')]
assert len(ds)==$N and all(len(d.get('snapshot_id') or '')==36 for d in ds)
" && ok || bad "every decision carries a snapshot_id"

# ---- determinism: all reproduce ----
"$V" replay -s "$SNAPS" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 0 ] && ok || { bad "determinism check: exit $rc"; head -20 "$T/out" "$T/err" >&2; }
grep -q "result: every decision reproduced exactly" "$T/out" && ok || bad "determinism: the result line"
"$V" replay -s "$SNAPS" --json >"$T/det.json" 2>/dev/null
check_json "$T/det.json" mode=determinism seen=$N replayed=$N reproduced=$N changed=0 errors=0 \
  deterministic=true failures=[] labels=null && ok || bad "determinism: JSON fields"
# each example strategy took part
python3 -c "
import json
pts={json.loads(l)['action'] for l in open('$T/traffic.jsonl')}
assert pts=={'http_request','payment_authorization','storage_route','tool_call'}, pts
" && ok || bad "the traffic covers all four example strategies"
for p in http_request payment_authorization storage_route tool_call; do
  "$V" replay -s "$SNAPS" --point $p --json >"$T/p.json" 2>/dev/null
  want=$(grep -c "\"action\":\"$p\"" "$T/traffic.jsonl")
  check_json "$T/p.json" seen="$want" reproduced="$want" && ok || bad "determinism for $p"
done

# the store somewhere else: --store
mkdir "$T/elsewhere" && cp -r "$SNAPS" "$T/elsewhere/snaps"
"$V" replay -s "$T/elsewhere/snaps" --store "$T/bundle/.verdict/versions" --json >"$T/s.json" 2>/dev/null
check_json "$T/s.json" reproduced=$N && ok || bad "--store DIR"
# the folder alone, copied elsewhere: it carries its versions
"$V" replay -s "$T/elsewhere/snaps" --json >"$T/s.json" 2>/dev/null
check_json "$T/s.json" reproduced=$N && ok || bad "the folder alone, copied elsewhere"
# without its versions nothing can be replayed: each is listed, exit 1
rm -r "$T/elsewhere/snaps/versions"
"$V" replay -s "$T/elsewhere/snaps" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] && ok || bad "missing versions: exit $rc, want 1"
[ "$(grep -c ' -> error: ' "$T/out")" = $N ] && ok || bad "missing versions: want $N failure lines, got $(grep -c ' -> error: ' "$T/out")"
grep -q "did NOT reproduce" "$T/out" && ok || bad "missing versions: the result line"
"$V" replay -s "$T/elsewhere/snaps" --quiet >"$T/out" 2>&1
[ "$(grep -c ' -> error: ' "$T/out")" = 0 ] && ok || bad "--quiet lists no failures"
"$V" replay -s "$T/elsewhere/snaps" --json >"$T/f.json" 2>/dev/null
check_json "$T/f.json" errors=$N deterministic=false && ok || bad "missing versions: JSON"
python3 -c "import json; d=json.load(open('$T/f.json')); assert len(d['failures'])==$N and d['failures'][0]['error']" &&
  ok || bad "missing versions: each failure in the JSON"

# ---- a candidate bundle ----
mkdir "$T/cand" && cp examples/policies/*.yaml "$T/cand/" && cp -r examples/policies/models "$T/cand/"
sed -i 's/^  challenge_rpm: 300 /  challenge_rpm: 120 /; s/^  max_failed_logins: 5 /  max_failed_logins: 2 /' \
  "$T/cand/request_gate.yaml"
grep -q "challenge_rpm: 120" "$T/cand/request_gate.yaml" && ok || bad "editing the candidate"
"$V" replay -s "$SNAPS" --policy "$T/cand" --labels "$T/labels.jsonl" --json --html "$T/r.html" \
  >"$T/c.json" 2>"$T/err"
rc=$?
[ "$rc" = 0 ] && ok || { bad "candidate: exit $rc"; cat "$T/err" >&2; }
check_json "$T/c.json" mode=candidate seen=$N replayed=$N errors=0 labels.labelled=$N && ok ||
  bad "candidate: JSON counts"
python3 - "$T" <<'EOF' && ok || bad "candidate: changes, examples, accuracy and score"
import json, sys
t = sys.argv[1]
d = json.load(open(t + "/c.json"))
dec = [json.loads(l) for l in open(t + "/decisions.jsonl")]
reqs = [json.loads(l) for l in open(t + "/traffic.jsonl")]
labels = {json.loads(l)["key"]: json.loads(l)["action"] for l in open(t + "/labels.jsonl")}
by_id = {x["snapshot_id"]: x for x in dec}
assert d["reproduced"] + d["changed"] == d["seen"]
assert d["changed"] > 0, "a stricter gate changes something"
tr = {(x["from"], x["to"]): x for x in d["transitions"]}
assert ("allow", "challenge") in tr, tr.keys()
assert sum(x["count"] for x in d["transitions"]) == d["changes"]["action"]
rules = {(x["from"], x["to"]) for x in d["rules"]}
# what no rule decided (the abuse model's answers) now meets a stricter rule
assert ("(model)", "high-rate") in rules or ("(model)", "login-bruteforce") in rules, rules
# every example is a real snapshot whose recorded decision matches the row
for row in d["transitions"] + d["rules"]:
    assert 1 <= len(row["examples"]) <= 3
    for ex in row["examples"]:
        assert ex in by_id, ex
for ex in tr[("allow", "challenge")]["examples"]:
    assert by_id[ex]["action"] == "allow"
# only gate decisions can change
for row in d["changed_decisions"]:
    assert row["point"] == "http_request", row
# the recorded side's accuracy is what the decisions say
rec_ok = sum(x["action"] == labels[q["key"]] for q, x in zip(reqs, dec))
assert d["labels"]["recorded"]["correct"] == rec_ok, (d["labels"]["recorded"], rec_ok)
assert abs(d["labels"]["recorded"]["accuracy"] - round(rec_ok / len(dec), 4)) < 1e-9
# the score is the documented formula over the categories scored
cats = d["score_breakdown"]["categories"]
ws = sum(c["weight"] for c in cats if c["scored"])
want = 100 * sum(c["weight"] * c["value"] for c in cats if c["scored"]) / ws
assert abs(d["score"] - want) < 0.05, (d["score"], want)
assert [c["name"] for c in cats] == ["accuracy", "latency", "cost", "audit"]
acc = cats[0]
assert acc["scored"] and abs(acc["value"] - d["labels"]["replayed"]["accuracy"]) < 1e-3
assert cats[3]["value"] == d["audit"]["complete_share"]
assert d["cpu_ns"]["count"] == d["replayed"] and d["cpu_ns"]["mean"] > 0
assert d["memory"]["peak_rss_bytes"] > 0
assert d["latency_us"]["replayed"]["p99"] >= d["latency_us"]["replayed"]["p50"] > 0
assert d["recorded_score"] is not None
EOF

# custom weights: all on audit -> the score is 100 * complete share
"$V" replay -s "$SNAPS" --policy "$T/cand" --weights 0,0,0,1 --json >"$T/w.json" 2>/dev/null
python3 -c "
import json; d=json.load(open('$T/w.json'))
assert abs(d['score'] - 100*d['audit']['complete_share']) < 0.01, d['score']
assert d['score_breakdown']['weights'] == {'accuracy':0,'latency':0,'cost':0,'audit':1}
" && ok || bad "--weights 0,0,0,1"
"$V" replay -s "$SNAPS" --policy "$T/cand" --weights 1,0,0,0 --labels "$T/labels.jsonl" --json >"$T/w.json" 2>/dev/null
python3 -c "
import json; d=json.load(open('$T/w.json'))
assert abs(d['score'] - 100*d['labels']['replayed']['accuracy']) < 0.01, d['score']
" && ok || bad "--weights 1,0,0,0 with labels"
# without labels a candidate's accuracy is not scored, and the output says so
"$V" replay -s "$SNAPS" --policy "$T/cand" >"$T/out" 2>&1
grep -q "accuracy  weight 40      -            not scored: no labels" "$T/out" && ok ||
  { bad "no labels: accuracy not scored"; grep accuracy "$T/out" >&2; }
grep -q "result: [0-9,]* of 1,500 decisions would change" "$T/out" && ok || bad "candidate: result line"
grep -q "allow -> challenge" "$T/out" && ok || bad "candidate: the transition in the text"

# ---- the HTML report ----
[ -s "$T/r.html" ] && ok || bad "--html wrote nothing"
python3 - "$T/r.html" <<'EOF' && ok || bad "the HTML report"
import sys
from html.parser import HTMLParser
text = open(sys.argv[1]).read()
for need in ("<svg", "<rect", "<table", "allow</td><td>challenge", "Latency", "Score breakdown",
             "Accuracy against labels"):
    assert need in text, need
for banned in ("http://", "https://", "src=", "href=", "url(", "@import", "<script", "<link"):
    assert banned not in text, banned
void = {"meta", "br", "hr", "img", "input", "link"}
class Check(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack = []
    def handle_starttag(self, tag, attrs):
        if tag not in void:
            self.stack.append(tag)
    def handle_startendtag(self, tag, attrs):
        pass
    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
        self.stack.pop()
c = Check()
c.feed(text)
c.close()
assert c.stack == [], c.stack
EOF

# ---- filters ----
"$V" replay -s "$SNAPS" --limit 10 --json >"$T/l.json" 2>/dev/null
check_json "$T/l.json" seen=10 && ok || bad "--limit 10"
"$V" replay -s "$SNAPS" --source rule --json >"$T/l.json" 2>/dev/null
want=$(grep -c '"source":"rule"' "$T/decisions.jsonl")
check_json "$T/l.json" seen="$want" && ok || bad "--source rule: want $want"
"$V" replay -s "$SNAPS" --action block --point http_request --json >"$T/l.json" 2>/dev/null
want=$(python3 -c "
import json
print(sum(1 for q,d in zip(open('$T/traffic.jsonl'),open('$T/decisions.jsonl')) if json.loads(q)['action']=='http_request' and json.loads(d)['action']=='block'))")
check_json "$T/l.json" seen="$want" && ok || bad "--action block --point http_request: want $want"
"$V" replay -s "$SNAPS" --since 1h --json >"$T/l.json" 2>/dev/null
check_json "$T/l.json" seen=$N && ok || bad "--since 1h"
"$V" replay -s "$SNAPS" --until 2001-01-01T00:00:00Z --json >"$T/l.json" 2>"$T/err"
check_json "$T/l.json" seen=0 && grep -q "no snapshot matched" "$T/err" && ok || bad "--until in the past"

# ---- usage and failures to run ----
expect_rc() {
  local want=$1
  shift
  "$V" replay "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  [ "$rc" = "$want" ] && [ -s "$T/err" ] && ok || bad "replay $*: exit $rc, want $want"
}
( unset VERDICT_SNAPSHOTS; expect_rc 2 )
expect_rc 2 -s "$SNAPS" --weights 1,2,3
expect_rc 2 -s "$SNAPS" --since yesterday
# past what 64-bit nanoseconds since 1970 hold: refused, not wrapped around
expect_rc 2 -s "$SNAPS" --since 2300-01-01T00:00:00Z
expect_rc 2 -s "$SNAPS" --until 1600-01-01T00:00:00Z
expect_rc 2 -s "$SNAPS" --source guess
expect_rc 2 -s "$SNAPS" --limit -3
expect_rc 2 -s "$SNAPS" --frobnicate
expect_rc 2 -s "$SNAPS" --since 1h --until 2h
expect_rc 1 -s "$SNAPS" --policy "$T/no-such-bundle"
expect_rc 1 -s "$SNAPS" --labels "$T/no-such-labels.jsonl"
expect_rc 1 -s "$T/no-such-snapshots"
eq "$(cat "$T/err")" "verdict replay: snapshot directory $T/no-such-snapshots: No such file or directory" \
  "a missing snapshot folder named once, with the command once"
printf '{"key":"a","action":"x"}\n{"key":"a","action":"y"}\n' >"$T/conflict.jsonl"
expect_rc 1 -s "$SNAPS" --labels "$T/conflict.jsonl"
grep -q "conflict.jsonl:2: key \"a\" already has another label on line 1" "$T/err" && ok || bad "conflicting labels named"
expect_rc 1 -s "$SNAPS" --html /nonexistent/dir/r.html
VERDICT_SNAPSHOTS="$SNAPS" "$V" replay --limit 5 --json >"$T/l.json" 2>/dev/null
check_json "$T/l.json" seen=5 && ok || bad "\$VERDICT_SNAPSHOTS"
"$V" replay --help | grep -q "usage: verdict replay" && ok || bad "replay --help"
"$V" help replay | grep -q -- "--against URL" && ok || bad "verdict help replay"

summary
[ "$fail" = 0 ]
