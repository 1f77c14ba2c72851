#!/usr/bin/env bash
# stats.sh — `verdict snapshots stats` adds up: its counts are the folder's
# records (per strategy, as the exported JSON says), its disk bytes the
# files' sizes, the share a retention file keeps is the one its rule gives
# (recomputed in Python), and the projection follows from its own figures.
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: stats.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

cp -r examples/policies "$T/B" && rm -rf "$T/B/.verdict"
"$V" gen --count 800 --seed 9 >"$T/req.jsonl" 2>/dev/null
"$V" decide --policy "$T/B" --snapshots "$T/S" --jsonl "$T/req.jsonl" >/dev/null 2>"$T/err" ||
  bad "decide: $(head -3 "$T/err")"
"$V" snapshots export -s "$T/S" >"$T/all.jsonl"
cat >"$T/ret.yaml" <<'EOF2'
keep_days: 3
keep: 'source == "model" || !allowed'
sample:
  - if: 'strategy == "agent_guard"'
    rate: 0.25
  - rate: 0.05
EOF2
"$V" snapshots stats -s "$T/S" --retention "$T/ret.yaml" --json >"$T/s.json" 2>"$T/err"
eq "$?" 0 "stats --json: exit 0"
disk=$(cat "$T/S"/seg-*.log "$T/S"/seg-*.idx 2>/dev/null | wc -c)
python3 - "$T/s.json" "$T/all.jsonl" "$disk" <<'EOF2' && ok || bad "stats --json does not add up"
import json, sys, collections
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
    if s["source"] == "model" or not s["allowed"]: return True
    return sample_point(s["id"]) < (0.25 if s["strategy"] == "agent_guard" else 0.05)
st = json.load(open(sys.argv[1]))
snaps = [json.loads(l) for l in open(sys.argv[2])]
assert st["records"] == len(snaps) == 800, st["records"]
assert st["disk_bytes"] == int(sys.argv[3]), (st["disk_bytes"], sys.argv[3])
assert sum(d["disk_bytes"] for d in st["days"]) == st["disk_bytes"]
assert sum(d["records"] for d in st["days"]) == 800
by = collections.Counter(s["strategy"] for s in snaps)
assert {g["name"]: g["records"] for g in st["strategies"]} == dict(by), st["strategies"]
assert abs(sum(g["bytes"] for g in st["strategies"]) - st["disk_bytes"]) <= len(by)
for g in st["strategies"]:
    mine = [s for s in snaps if s["strategy"] == g["name"]]
    want = sum(map(keeps, mine)) / len(mine)
    assert abs(g["kept_share"] - want) < 1e-6, (g["name"], g["kept_share"], want)
p = st["projection"]
want = sum(map(keeps, snaps)) / 800
assert abs(p["kept_share"] - want) < 1e-6, (p["kept_share"], want)
assert p["keep_days"] == 3 and p["rate_per_day"] > 0
# bytes_per_snapshot is printed to 0.1: at ~300 compressed bytes that is
# more than 1e-4 of it, so the tolerance is the rounding's own
assert abs(p["window_bytes"] - p["rate_per_day"] * 3 * st["bytes_per_snapshot"]) <= 1 + p["rate_per_day"] * 3 * 0.05 + 1e-9 * p["window_bytes"]
assert abs(p["bytes_at_30_days"] - (p["window_bytes"] + 27 * p["kept_bytes_per_day"])) <= 2 + 1e-6 * p["bytes_at_30_days"]
EOF2
"$V" snapshots stats -s "$T/S" >"$T/out" 2>&1
eq "$?" 0 "stats: exit 0"
has "$T/out" "800 snapshots" "the text form counts the snapshots"
has "$T/out" "by strategy" "the text form lists strategies"
has "$T/out" "projection under the built-in rule (keep_days 7)" "the text form projects"
"$V" snapshots stats -s "$T/nothing" >"$T/out" 2>&1
eq "$?" 1 "stats of a folder that is not there: exit 1"

summary
[ "$fail" -eq 0 ]
