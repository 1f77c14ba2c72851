#!/usr/bin/env bash
# retention.sh — gc under a retention file keeps exactly what the file
# declares: the condition (here one that names `shadow`, which these
# snapshots lack, without a single error) and the sample rates by class,
# recomputed here in Python from the exported snapshots and the documented
# sample hash. A dry run predicts the gc after it to the record and the
# byte; a file with only keep_days keeps what the built-in rule keeps; a
# bad file gets its errors at file:line:col.
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: retention.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

cp -r examples/policies "$T/B" && rm -rf "$T/B/.verdict"
"$V" gen --count 1500 --seed 5 >"$T/req.jsonl" 2>/dev/null
"$V" decide --policy "$T/B" --snapshots "$T/S" --jsonl "$T/req.jsonl" >/dev/null 2>"$T/err" ||
  bad "decide: $(head -3 "$T/err")"
cp -r "$T/S" "$T/S2"
"$V" snapshots export -s "$T/S" >"$T/all.jsonl"

cat >"$T/ret.yaml" <<'EOF'
# everything is old at once (keep_days 0) so that the rule alone decides
keep_days: 0
keep: 'source != "rule" || review || latency_us > 1000 || shadow.action != action'
sample:
  - if: 'point == "payment"'
    rate: 0.5
  - if: 'action == "allow"'
    rate: 0.02
  - rate: 0.1
every: 10m
EOF
"$V" snapshots gc -s "$T/S" --retention "$T/ret.yaml" --dry-run >"$T/dry" 2>"$T/dry.err"
eq "$?" 0 "dry run: exit 0"
[ -s "$T/dry.err" ] && bad "dry run wrote to stderr: $(head -3 "$T/dry.err")" || ok
"$V" snapshots gc -s "$T/S" --retention "$T/ret.yaml" >"$T/real" 2>"$T/real.err"
eq "$?" 0 "gc: exit 0"
[ -s "$T/real.err" ] && bad "gc wrote to stderr (a condition failed?): $(head -3 "$T/real.err")" || ok
# the dry run's figures are the real run's, records and bytes
eq "$(sed 's/^dry run: //' "$T/dry")" "$(cat "$T/real")" "the dry run predicts the gc exactly"
after=$(sed -n 's/.*bytes [0-9]* -> \([0-9]*\)$/\1/p' "$T/real")
eq "$after" "$(cat "$T/S"/seg-*.log | wc -c)" "bytes after = the segment files' size"

"$V" snapshots export -s "$T/S" >"$T/left.jsonl"
python3 - "$T/all.jsonl" "$T/left.jsonl" <<'EOF' && ok || bad "the records kept are the ones the file declares"
import json, sys
M = (1 << 64) - 1
def sample_point(idtext):
    h = 0xcbf29ce484222325
    for b in bytes.fromhex(idtext.replace("-", "")):
        h = ((h ^ b) * 0x100000001b3) & M
    h = ((h ^ (h >> 30)) * 0xbf58476d1ce4e5b9) & M
    h = ((h ^ (h >> 27)) * 0x94d049bb133111eb) & M
    h ^= h >> 31
    return (h >> 11) / 2.0**53
def keeps(s):
    assert "shadow" not in s
    if s["source"] != "rule" or s["review"] or s["latency_ns"]["total"] / 1000.0 > 1000:
        return True
    p = sample_point(s["id"])
    if s["point"] == "payment": return p < 0.5
    if s["action"] == "allow": return p < 0.02
    return p < 0.1
all_ = [json.loads(l) for l in open(sys.argv[1])]
left = {json.loads(l)["id"] for l in open(sys.argv[2])}
want = {s["id"] for s in all_ if keeps(s)}
assert left == want, (len(left), len(want), len(left - want), len(want - left))
assert 0 < len(want) < len(all_)
print("kept", len(want), "of", len(all_), file=sys.stderr)
EOF

# defaults: only keep_days given keeps what the built-in rule keeps
printf 'keep_days: 0\n' >"$T/days.yaml"
cp -r "$T/S2" "$T/S3"
"$V" snapshots gc -s "$T/S2" --retention "$T/days.yaml" >/dev/null 2>&1
"$V" snapshots gc -s "$T/S3" --keep-days 0 >/dev/null 2>&1
"$V" snapshots list -s "$T/S2" >"$T/a"
"$V" snapshots list -s "$T/S3" >"$T/b"
cmp -s "$T/a" "$T/b" && ok || bad "defaults differ from the built-in rule"
[ "$(wc -l <"$T/a")" -gt 0 ] && [ "$(wc -l <"$T/a")" -lt 1500 ] && ok || bad "defaults kept $(wc -l <"$T/a")"

# a file with mistakes: each at its place
cat >"$T/bad.yaml" <<'EOF'
keep_days: -1
keep: 'sourc == "rule"'
sample:
  - {rate: 2}
  - {iff: 'true', rate: 0.1}
every: soon
colour: blue
EOF
"$V" snapshots gc -s "$T/S3" --retention "$T/bad.yaml" >"$T/out" 2>&1
eq "$?" 1 "a bad retention file: exit 1"
has "$T/out" "bad.yaml:1:12: keep_days: expected a number >= 0" "keep_days at its place"
has "$T/out" "bad.yaml:2:8: keep: undeclared reference to 'sourc'" "the condition's error at its column"
has "$T/out" "bad.yaml:4:12: sample[0].rate: expected a number in [0, 1]" "a rate out of range"
has "$T/out" "bad.yaml:5:6: sample[1]: unknown key 'iff'" "an unknown key in a class"
has "$T/out" "bad.yaml:6:8: every:" "a bad schedule"
has "$T/out" "bad.yaml:7:1: unknown key 'colour'" "an unknown key"
"$V" snapshots gc -s "$T/S3" --retention "$T/ret.yaml" --keep-days 3 >/dev/null 2>&1
eq "$?" 2 "--retention with --keep-days: a usage error"

summary
[ "$fail" -eq 0 ]
