#!/bin/bash
# Segments of format version 1 (written before compressed blocks existed,
# tests/snapshot/fixtures/v1: 12 decisions of `verdict decide` on the
# example bundle) read the same with this build: export and list give the
# committed output of the build that wrote them, show finds every id, a
# writer appends to such a segment, a compaction turns it into version 2
# with blocks, and gc rewrites it — all without losing or changing a record.
set -u
BUILD=${1:-build}
V="$BUILD/verdict"
TEST_NAME=snapshot/old_format.sh
. tests/lib.sh

unset VERDICT_SNAPSHOTS
scratch
FIX=tests/snapshot/fixtures
D="$T/v1"
mkdir -p "$D"
cp "$FIX"/v1/* "$D"/

version() { od -An -tu2 -j6 -N2 "$1" | tr -d ' '; }
seg=$(ls "$D"/seg-*.log)
eq "$(version "$seg")" 1 "the fixture is a version-1 segment"

"$V" snapshots export --snapshots "$D" >"$T/export" 2>"$T/err"
if cmp -s "$T/export" "$FIX/v1.export.jsonl"; then ok; else bad "export of the v1 segment differs ($(cat "$T/err"))"; fi
"$V" snapshots list --snapshots "$D" >"$T/list" 2>"$T/err"
if cmp -s "$T/list" "$FIX/v1.list.txt"; then ok; else bad "list of the v1 segment differs ($(cat "$T/err"))"; fi
n=0
for id in $(awk '{print $1}' "$FIX/v1.list.txt"); do
  "$V" snapshots show --snapshots "$D" --compact "$id" >"$T/one" 2>/dev/null && grep -qF "\"id\":\"$id\"" "$T/one" && n=$((n + 1))
done
eq "$n" 12 "show finds every id of the v1 segment"

# A writer appends to the old segment (it is the newest, and not full) ...
"$V" gen --count 1 --seed 9 | "$V" decide -p examples/policies --no-store -s "$D" --jsonl >/dev/null
eq "$(ls "$D"/seg-*.log | wc -l)" 1 "the new record went into the old segment"
"$V" snapshots export --snapshots "$D" >"$T/export2"
eq "$(wc -l <"$T/export2")" 13 "13 records after the append"
if head -12 "$T/export2" | cmp -s - "$FIX/v1.export.jsonl"; then ok; else bad "the append changed the old records"; fi

# ... and once it holds more than a block's worth, the close compacts it:
# version 2, blocks, the same records.
"$V" gen --count 100 --seed 9 | "$V" decide -p examples/policies --no-store -s "$D" --jsonl >/dev/null
seg=$(ls "$D"/seg-*.log)
eq "$(version "$seg")" 2 "the compacted segment is version 2"
"$V" snapshots export --snapshots "$D" >"$T/export3"
eq "$(wc -l <"$T/export3")" 113 "113 records after compaction"
if head -13 "$T/export3" | cmp -s - "$T/export2"; then ok; else bad "compaction changed the records"; fi
size=$(stat -c %s "$seg")
raw=$(($(wc -c <"$T/export3")))
if [ "$size" -lt $((raw / 4)) ]; then ok; else bad "compacted segment $size bytes for $raw bytes of JSON"; fi
n=0
for id in $(awk '{print $1}' "$FIX/v1.list.txt"); do
  "$V" snapshots show --snapshots "$D" --compact "$id" >/dev/null 2>&1 && n=$((n + 1))
done
eq "$n" 12 "show finds the old ids in the compacted segment"

# gc rewrites a v1 segment (into version 2, with blocks): what it keeps is
# byte for byte what the old build wrote.
G="$T/gc"
mkdir -p "$G"
cp "$FIX"/v1/* "$G"/
"$V" snapshots gc --snapshots "$G" --keep-days 0 --sample 0 >"$T/gcout" 2>&1 || bad "gc failed: $(cat "$T/gcout")"
"$V" snapshots export --snapshots "$G" >"$T/kept"
python3 - "$FIX/v1.export.jsonl" "$T/kept" <<'PY' && ok || bad "gc of the v1 segment kept the wrong records"
import json, sys
want = [l for l in open(sys.argv[1])
        if (lambda d: not d["allowed"] or d["review"] or d["source"] in ("model", "error")
            or d["confidence"] < 0.8)(json.loads(l))]
got = open(sys.argv[2]).readlines()
sys.exit(0 if got == want and 0 < len(got) < 12 else 1)
PY
seg=$(ls "$G"/seg-*.log)
eq "$(version "$seg")" 2 "gc's rewrite is version 2"

# replay reads compressed segments: 100 decisions (compacted at close) reproduce exactly
R="$T/replay"
"$V" gen --count 100 --seed 4 | "$V" decide -p examples/policies --store "$T/store" -s "$R" --jsonl >/dev/null
eq "$(version "$(ls "$R"/seg-*.log)")" 2 "the replayed folder is compressed"
"$V" replay --snapshots "$R" --store "$T/store" >"$T/replay.out" 2>&1
has "$T/replay.out" "100 of 100 snapshots reproduced exactly" "replay over a compressed segment"

summary
[ $fail -eq 0 ]
