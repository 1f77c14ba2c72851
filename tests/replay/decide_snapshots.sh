#!/usr/bin/env bash
# decide_snapshots.sh — `verdict decide` records what it decides: the
# decision prints its snapshot_id, the log then holds that snapshot
# (`verdict snapshots show ID`), with the request and the answer in it; the
# default folder is <bundle>/.verdict/snapshots beside the version store;
# --snapshots, $VERDICT_SNAPSHOTS, --no-snapshots and --durability do what
# `verdict decide --help` says; refused requests leave no snapshot. Run from
# the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: decide_snapshots.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
expect_rc() { # expect_rc WANT DESCRIPTION -- command...
  local want=$1 what=$2; shift 3
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ "$rc" = "$want" ]; then ok; else
    bad "$what: exit $rc, want $want"; sed 's/^/  out: /' "$T/out" | head -20 >&2
    sed 's/^/  err: /' "$T/err" | head -20 >&2
  fi
}
# the snapshot_id of a decision line on stdin ("" when null)
id_of() { sed -n 's/.*"snapshot_id":"\([0-9a-f-]\{36\}\)".*/\1/p'; }

# a private copy of a bundle, so the default folders land in $T
mkdir -p "$T/bundle"
cp tests/engine/bundles/gate/gate.yaml "$T/bundle/"
B="$T/bundle"
SCAN='{"action":"gate","context":{"path":"/","headers":{"user-agent":"sqlmap"},"body_size":1,"env":{}}}'
PLAIN='{"action":"gate", "context": {"path":"/","headers":{"user-agent":"curl"},"body_size":1,"env":{"country":"US"}}}'

# ---- on by default, beside the version store ----
echo "$SCAN" | expect_rc 0 "decide with the default folder" -- env -u VERDICT_SNAPSHOTS "$V" decide -p "$B"
ID=$(id_of <"$T/out")
[ ${#ID} = 36 ] && ok || bad "no snapshot_id in: $(cat "$T/out")"
has "$T/out" ',"latency_us":' "decision"
[ -d "$B/.verdict/snapshots" ] && ok || bad "no $B/.verdict/snapshots"
[ -d "$B/.verdict/versions" ] && ok || bad "no version store beside the snapshots"
expect_rc 0 "snapshots show the id" -- "$V" snapshots show --compact -s "$B/.verdict/snapshots" "$ID"
has "$T/out" "\"id\":\"$ID\"" "show: the id"
has "$T/out" '"request":{"action":"gate","context":{"path":"/","headers":{"user-agent":"sqlmap"},"body_size":1,"env":{}}}' "show: the request as received"
has "$T/out" '"action":"block","allowed":false' "show: the answer"
has "$T/out" '"matched":"scanners"' "show: the trace"
has "$T/out" '"format":1' "show: the format"
# the recorded policy version is in the store, by its name
PV=$(sed -n 's/.*"policy_version":"\([0-9a-f]\{64\}\)".*/\1/p' "$T/out")
[ -f "$B/.verdict/versions/$PV.json" ] && ok || bad "version $PV not in the store"

# a second run appends to the same log; ids keep increasing
echo "$PLAIN" | expect_rc 0 "decide again" -- env -u VERDICT_SNAPSHOTS "$V" decide -p "$B"
ID2=$(id_of <"$T/out")
[ -n "$ID2" ] && [[ "$ID2" > "$ID" ]] && ok || bad "second id '$ID2' not after '$ID'"
expect_rc 0 "list" -- "$V" snapshots list -s "$B/.verdict/snapshots"
[ "$(wc -l <"$T/out")" = 2 ] && ok || bad "list: $(wc -l <"$T/out") snapshots, want 2"

# ---- --snapshots DIR, and --jsonl: one snapshot per decided line ----
printf '%s\n%s\n{"action":"nowhere"}\nnot json\n%s\n' "$SCAN" "$PLAIN" "$PLAIN" >"$T/reqs.jsonl"
expect_rc 1 "decide --jsonl with refused lines" -- "$V" decide -p "$B" --no-store --snapshots "$T/s1" --jsonl "$T/reqs.jsonl"
[ "$(id_of <"$T/out" | sort -u | wc -l)" = 3 ] && ok || bad "--jsonl: want 3 distinct ids: $(cat "$T/out")"
expect_rc 0 "list s1" -- "$V" snapshots list -s "$T/s1"
[ "$(wc -l <"$T/out")" = 3 ] && ok || bad "refused lines were recorded: $(wc -l <"$T/out") snapshots"

# ---- $VERDICT_SNAPSHOTS ----
echo "$PLAIN" | expect_rc 0 "decide with VERDICT_SNAPSHOTS" -- env VERDICT_SNAPSHOTS="$T/s2" "$V" decide --no-store -p "$B"
ID=$(id_of <"$T/out")
expect_rc 0 "show from VERDICT_SNAPSHOTS" -- env VERDICT_SNAPSHOTS="$T/s2" "$V" snapshots show "$ID"
has "$T/out" "\"id\": \"$ID\"" "show (indented)"

# ---- --durability ----
for dur in none interval always; do
  echo "$SCAN" | expect_rc 0 "--durability $dur" -- "$V" decide --no-store -p "$B" -s "$T/d-$dur" --durability "$dur"
  ID=$(id_of <"$T/out")
  expect_rc 0 "show after --durability $dur" -- "$V" snapshots show -s "$T/d-$dur" "$ID"
done
echo "$SCAN" | expect_rc 0 "--durability=always" -- "$V" decide --no-store -p "$B" -s "$T/d-eq" --durability=always
expect_rc 2 "--durability bogus" -- "$V" decide -p "$B" --durability sometimes
has "$T/err" "none, interval or always" "durability usage"
expect_rc 2 "--durability without value" -- "$V" decide -p "$B" --durability

# ---- --no-snapshots ----
mkdir -p "$T/bundle2"
cp tests/engine/bundles/gate/gate.yaml "$T/bundle2/"
echo "$PLAIN" | expect_rc 0 "--no-snapshots" -- "$V" decide --no-store --no-snapshots -p "$T/bundle2"
has "$T/out" '"snapshot_id":null' "no snapshot: null id"
[ ! -e "$T/bundle2/.verdict" ] && ok || bad "--no-snapshots --no-store wrote into the bundle"
expect_rc 2 "--snapshots with --no-snapshots" -- "$V" decide -p "$B" --snapshots "$T/x" --no-snapshots
expect_rc 2 "--snapshots without value" -- "$V" decide -p "$B" --snapshots

# ---- a folder that cannot be written ----
touch "$T/afile"
echo "$PLAIN" | expect_rc 1 "unwritable snapshot folder" -- "$V" decide --no-store -p "$B" -s "$T/afile/snaps"
has "$T/err" "cannot record snapshots in $T/afile/snaps" "names the folder"

# ---- a second writer waits for the first rather than failing ----
( sleep 0.3; echo "$PLAIN" ) | "$V" decide --no-store -p "$B" -s "$T/s3" >"$T/first.out" 2>&1 &
sleep 0.1
echo "$SCAN" | expect_rc 0 "second writer on a busy folder" -- "$V" decide --no-store -p "$B" -s "$T/s3"
wait
expect_rc 0 "list s3" -- "$V" snapshots list -s "$T/s3"
[ "$(wc -l <"$T/out")" = 2 ] && ok || bad "busy folder: $(wc -l <"$T/out") snapshots, want 2"

# ---- help ----
expect_rc 0 "decide --help" -- "$V" decide --help
has "$T/out" "--no-snapshots" "help: --no-snapshots"
has "$T/out" "--durability none|interval|always" "help: --durability"
has "$T/out" ".verdict/snapshots" "help: the default folder"

summary
[ "$fail" = 0 ]
