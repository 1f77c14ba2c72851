#!/usr/bin/env bash
# self_contained.sh — a snapshot folder replays alone: decide with --policy B
# --snapshots S (and serve --snapshots DIR), move the folder elsewhere, delete
# the bundle and every store, and replay reproduces every decision from the
# folder's own versions. `verdict snapshots verify` passes on it, and fails
# (exit 1, the problem listed) on a flipped byte in a record, a missing
# version and a changed one.
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: self_contained.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl

cp -r examples/policies "$T/B" && rm -rf "$T/B/.verdict"
"$V" gen --count 400 --seed 3 >"$T/req.jsonl" 2>/dev/null
"$V" decide --policy "$T/B" --snapshots "$T/S" --jsonl "$T/req.jsonl" >/dev/null 2>"$T/err" ||
  bad "decide: $(head -3 "$T/err")"
mkdir "$T/far" && mv "$T/S" "$T/far/copy"
rm -rf "$T/B" "$T/versions"
"$V" replay --snapshots "$T/far/copy" --json >"$T/r.json" 2>"$T/err"
eq "$?" 0 "replay of the moved folder: exit 0"
python3 - "$T/r.json" <<'EOF' && ok || bad "replay of the moved folder: $(head -c 300 "$T/r.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["seen"] == 400 and d["reproduced"] == 400 and d["errors"] == 0, d
EOF
"$V" snapshots verify "$T/far/copy" >"$T/out" 2>&1
eq "$?" 0 "verify of a whole folder: exit 0"
has "$T/out" "400 records" "verify read every record"
has "$T/out" "every record and version checks" "verify's verdict"

# a changed version: its hash no longer matches its name
cp -r "$T/far/copy" "$T/c1"
f=$(ls "$T/c1/versions"/*.json | head -1)
sed -i 's/"action"/"actiom"/' "$f"
"$V" snapshots verify "$T/c1" >"$T/out" 2>&1
eq "$?" 1 "verify, a changed version: exit 1"
has "$T/out" "mismatch" "the changed version is listed"
has "$T/out" "$(basename "$f")" "by its name"

# a missing model version
cp -r "$T/far/copy" "$T/c2"
m=$(ls "$T/c2/versions/models"/*.json | head -1)
rm "$m"
"$V" snapshots verify "$T/c2" >"$T/out" 2>&1
eq "$?" 1 "verify, a missing version: exit 1"
has "$T/out" "missing" "the missing version is listed"
has "$T/out" "models/$(basename "$m")" "by its name"

# a flipped byte in the middle of a segment: a record's checksum fails
cp -r "$T/far/copy" "$T/c3"
seg=$(ls "$T/c3"/seg-*.log | head -1)
size=$(stat -c %s "$seg")
python3 - "$seg" $((size / 2)) <<'EOF'
import sys
p, at = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read())
b[at] ^= 0x20
open(p, "wb").write(b)
EOF
"$V" snapshots verify "$T/c3" >"$T/out" 2>&1
eq "$?" 1 "verify, a flipped byte: exit 1"
has "$T/out" "damaged" "the damaged segment is listed"
has "$T/out" "$(basename "$seg")" "by its name"
"$V" snapshots verify "$T/nothing-here" >"$T/out" 2>&1
eq "$?" 1 "verify of a folder that is not there: exit 1"

# the same for `verdict serve --snapshots DIR`
cp -r examples/policies "$T/B2" && rm -rf "$T/B2/.verdict"
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
"$V" serve --policy "$T/B2" --snapshots "$T/srv/snaps" --listen "127.0.0.1:$PORT" >"$T/log" 2>&1 &
PID=$!
wait_ready "serve" "$T/log"
head -50 "$T/req.jsonl" | while IFS= read -r line; do
  curl -s -o /dev/null "$URL/v1/decide" -d "$line"
done
stop
mv "$T/srv/snaps" "$T/far/served"
rm -rf "$T/B2" "$T/srv"
"$V" replay --snapshots "$T/far/served" --json >"$T/r.json" 2>"$T/err"
eq "$?" 0 "replay of a served folder, moved: exit 0"
python3 - "$T/r.json" <<'EOF' && ok || bad "replay of a served folder: $(head -c 300 "$T/r.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["seen"] == 50 and d["reproduced"] == 50, d
EOF
"$V" snapshots verify "$T/far/served" >"$T/out" 2>&1
eq "$?" 0 "verify of a served folder: exit 0"

summary
[ "$fail" -eq 0 ]
