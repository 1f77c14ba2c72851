#!/usr/bin/env bash
# snapshot_repairs.sh — what opening the snapshot log repairs is said, not
# silent: a torn tail cut from the last segment and a file under a
# segment's name whose header is damaged (moved aside to .corrupt, with the
# records still in it counted) each give a "snapshot_repaired" warning in
# the server's log naming the file, the repair, the bytes and the records,
# and a line in the folder's journal that `verdict snapshots repairs`
# prints. A clean start repairs nothing and says nothing. Against the real
# server, decisions over HTTP with curl.
set -u
BUILD=${1:?usage: snapshot_repairs.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl python3

mkdir -p "$T/bundle"
for f in examples/policies/*; do cp -r "$f" "$T/bundle/"; done
S="$T/snap"
start() {
  local name=$1
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  "$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 2 --no-store \
    --snapshots "$S" --durability always 2>"$T/$name.log" &
  PID=$!
  wait_ready "$name" "$T/$name.log"
}
GATE='{"action":"http_request","context":{"method":"GET","path":"/products/x","client_ip":"10.0.0.7","headers":{"user-agent":"Mozilla/5.0"},"env":{"country":"GB"}}}'
# repairs LOG: the snapshot_repaired lines of LOG as "repair segment bytes records"
repairs() {
  python3 - "$1" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    try: d = json.loads(line)
    except ValueError: continue
    if d.get("event") == "snapshot_repaired":
        print(d["level"], d["repair"], d["segment"], d["bytes"], d["records"])
EOF
}

start first
for _ in $(seq 1 12); do curl -s -o /dev/null "$URL/v1/decide" -d "$GATE"; done
stop
eq "$(repairs "$T/first.log" | wc -l)" 0 "a new folder: nothing repaired, nothing said"

SEG=$(cd "$S" && ls seg-*.log | tail -1)
eq "$(cd "$S" && ls seg-*.log | wc -l)" 1 "one segment after the first run"
# a copy of it under an earlier segment's name, its header smashed: the 12
# records are still in it
FAKE="seg-20240101-00000000000000000000000000000001.log"
cp "$S/$SEG" "$S/$FAKE"
printf 'XXXXXXXX' | dd of="$S/$FAKE" bs=1 seek=0 conv=notrunc status=none
# a torn tail on the real one: 100 bytes of a record that never completed
# (its index, which names the old size, no longer covers it)
head -c 100 /dev/zero | tr '\0' 'z' >>"$S/$SEG"

start second
repairs "$T/second.log" >"$T/said"
eq "$(wc -l <"$T/said")" 2 "the second start: two repairs said"
eq "$(grep -c '^warn ' "$T/said")" 2 "each a warning"
has "$T/said" "moved_corrupt $FAKE.corrupt $(stat -c %s "$S/$FAKE.corrupt") 12" "the damaged file: moved aside, its size and its 12 records"
has "$T/said" "cut_tail $SEG 100 1" "the torn tail: cut, 100 bytes, 1 record"
has "$T/second.log" '"message":"a torn tail was cut from a snapshot segment: 100 bytes, 1 records"' "the torn tail: a sentence too"
[ -f "$S/$FAKE.corrupt" ] && [ ! -f "$S/$FAKE" ] && ok || bad "the damaged file is moved aside"
# the server still serves and records
CODE=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/decide" -d "$GATE")
eq "$CODE" 200 "after the repairs: decisions"
stop

# the journal, through the command
"$V" snapshots repairs --snapshots "$S" >"$T/journal" 2>"$T/journal.err"
eq "$?" 0 "verdict snapshots repairs: exit 0"
eq "$(wc -l <"$T/journal")" 2 "verdict snapshots repairs: the two repairs"
has "$T/journal.err" "2 repairs recorded in $S" "verdict snapshots repairs: the count"
eq "$(python3 -c 'import json,sys; print(sorted((d["repair"], d["records"]) for d in map(json.loads, open(sys.argv[1]))))' "$T/journal")" \
  "[('cut_tail', 1), ('moved_corrupt', 12)]" "verdict snapshots repairs: what and how many records"
has "$T/journal" "\"segment\":\"$SEG\"" "verdict snapshots repairs: the segment's name"

# a third start has nothing left to repair
start third
eq "$(repairs "$T/third.log" | wc -l)" 0 "a third start: nothing repaired"
stop
"$V" snapshots repairs --snapshots "$S" >"$T/journal" 2>/dev/null
eq "$(wc -l <"$T/journal")" 2 "the journal keeps the two"

# a folder with no journal
mkdir -p "$T/empty"
"$V" snapshots repairs --snapshots "$T/empty" >"$T/journal" 2>"$T/journal.err"
eq "$?" 0 "no journal: exit 0"
has "$T/journal.err" "0 repairs recorded" "no journal: says none"
"$V" snapshots repairs --snapshots "$T/nope" 2>"$T/journal.err"
eq "$?" 1 "no folder: exit 1"

summary
[ "$fail" -eq 0 ]
