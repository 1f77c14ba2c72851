#!/bin/bash
# The snapshot payload the writer formats from the deciding thread's capture
# equals the direct builder's, byte for byte, for every request of
# `verdict gen --count 2000 --seed 1` (test_record_equiv.c does the
# comparing; this feeds it realistic traffic of every example strategy).
set -u
BUILD=${1:-build}
. tests/lib.sh
scratch
unset VERDICT_SNAPSHOTS
if ! "$BUILD/verdict" gen --count 2000 --seed 1 --out "$T/requests.jsonl"; then
  echo "FAIL: verdict gen" >&2
  exit 1
fi
n=$(grep -c '' "$T/requests.jsonl")
if [ "$n" -ne 2000 ]; then
  echo "FAIL: verdict gen wrote $n requests, want 2000" >&2
  exit 1
fi
"$BUILD/engine_test_record_equiv" --requests "$T/requests.jsonl"
rc=$?
[ $rc -eq 0 ] || exit $rc

# The engine as deployed decides with names by pointer (the writer's cache of
# names by address) unless the caller asks for the trace (names copied). The
# same traffic both ways, the first in one process that runs across a second
# boundary (the writer keeps the last second's text): the snapshots must say
# the same, and every `time` must be its `time_ns`.
P=examples/policies
{ head -n 1000 "$T/requests.jsonl"; sleep 1.2; tail -n +1001 "$T/requests.jsonl"; } |
  "$BUILD/verdict" decide --policy "$P" --jsonl --snapshots "$T/a/s" --store "$T/a/v" - >/dev/null ||
  { echo "FAIL: verdict decide (names by pointer)" >&2; exit 1; }
"$BUILD/verdict" decide --policy "$P" --jsonl --trace --snapshots "$T/b/s" --store "$T/b/v" \
  "$T/requests.jsonl" >/dev/null || { echo "FAIL: verdict decide --trace" >&2; exit 1; }
"$BUILD/verdict" snapshots export --snapshots "$T/a/s" >"$T/a.jsonl" &&
  "$BUILD/verdict" snapshots export --snapshots "$T/b/s" >"$T/b.jsonl" ||
  { echo "FAIL: verdict snapshots export" >&2; exit 1; }
/usr/bin/python3 - "$T/a.jsonl" "$T/b.jsonl" <<'PY'
import datetime, json, sys
def load(path):
    out, bad = [], 0
    for line in open(path):
        d = json.loads(line)
        ns = d["time_ns"]
        t = datetime.datetime.fromtimestamp(ns // 10**9, datetime.timezone.utc)
        if d["time"] != t.strftime("%Y-%m-%dT%H:%M:%S") + ".%09dZ" % (ns % 10**9):
            bad += 1
        for k in ("id", "time", "time_ns"):
            d.pop(k)
        d["latency_ns"] = None
        d["inputs"]["clock_ns"] = None
        if d.get("model"):
            d["model"]["ns"] = None
        out.append(json.dumps(d, sort_keys=True))
    return out, bad
a, bad_a = load(sys.argv[1])
b, bad_b = load(sys.argv[2])
seconds = len({json.loads(l)["time"][:19] for l in open(sys.argv[1])})
# A decision whose recorded inputs differ (a model deadline the clock decided,
# a rate-limit counter) is another decision: only the rest are compared.
differ = skipped = 0
for x, y in zip(a, b):
    if x == y:
        continue
    if json.loads(x)["inputs"] != json.loads(y)["inputs"]:
        skipped += 1
        continue
    differ += 1
    dx, dy = json.loads(x), json.loads(y)
    keys = [k for k in dx if dx.get(k) != dy.get(k)]
    if differ <= 3:
        print("differs in %s: %s / %s" % (keys, [dx.get(k) for k in keys][:2],
                                         [dy.get(k) for k in keys][:2]))
print("names by pointer vs copied: %d and %d snapshots, %d differ (%d with other inputs), "
      "%d times not their time_ns, %d seconds" % (len(a), len(b), differ, skipped, bad_a + bad_b,
                                                 seconds))
sys.exit(0 if len(a) == len(b) == 2000 and differ == 0 and bad_a + bad_b == 0 and seconds >= 2
         else 1)
PY
