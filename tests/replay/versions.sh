#!/usr/bin/env bash
# versions.sh — a log that spans many policy edits replays under each
# decision's own version. Two strategies are edited twelve times, each
# edit decided once for each, so the log holds 24 versions and alternates
# between two of them at every snapshot (replay finds a version by hash:
# src/replay/replay.c, version_get). Every decision must reproduce; then a
# stored version changed under its name, and one removed, each make their
# snapshots errors that name the file and say what to do.
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: versions.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

P="$T/p"
S="$T/snaps"
STORE="$T/store"
mkdir -p "$P"
printf '{"action":"a","context":{"n":%s}}\n{"action":"b","context":{"n":%s}}\n' 3 3 3 3 >"$T/req.jsonl"
for i in $(seq 1 12); do
  # each edit moves the threshold: version and decisions change with it
  printf 'strategy: a\nrules:\n  - {name: big, if: "ctx.n > %d", action: block}\ndefault: allow\n' \
    "$i" >"$P/a.yaml"
  printf 'strategy: b\nrules:\n  - {name: small, if: "ctx.n < %d", action: block}\ndefault: allow\n' \
    "$i" >"$P/b.yaml"
  "$V" decide --policy "$P" --jsonl --store "$STORE" --snapshots "$S" <"$T/req.jsonl" >"$T/out" 2>"$T/err" ||
    { bad "decide, edit $i: $(head -3 "$T/err")"; }
done
eq "$(ls "$STORE"/*.json | wc -l)" 24 "24 stored versions"

"$V" replay --snapshots "$S" --store "$STORE" >"$T/out" 2>"$T/err"
eq "$?" 0 "replay of 24 versions: exit 0"
has "$T/out" "every decision reproduced exactly" "replay of 24 versions"
grep -Eq 'replayed +48' "$T/out" && ok || bad "48 snapshots replayed: $(grep -E 'replayed' "$T/out")"

eq "$(ls "$S"/versions/*.json | wc -l)" 24 "the snapshot folder carries the 24 versions too"

# the folder's own copy is read first; the store is the fallback
victim=$(ls "$STORE"/*.json | head -1)
own="$S/versions/$(basename "$victim")"
mv "$own" "$T/own.json"
"$V" replay --snapshots "$S" --store "$STORE" >"$T/out" 2>"$T/err"
eq "$?" 0 "a version missing from the folder is read from --store"
mv "$T/own.json" "$own"

# a version changed under its name (same size: the JSON is still canonical),
# in the folder and in the store
sed -i 's/"block"/"allow"/' "$victim" "$own"
"$V" replay --snapshots "$S" --store "$STORE" >"$T/out" 2>"$T/err"
eq "$?" 1 "a changed version: exit 1"
has "$T/out" "not as the version its name says" "a changed version is refused"
has "$T/out" "$(basename "$victim")" "the message names the file"
has "$T/out" "restore it from a copy of the store" "the message says what to do"
grep -Eq 'reproduced +46' "$T/out" && ok || bad "the other 46 reproduce: $(grep -E 'reproduced' "$T/out")"

# a version missing
rm "$victim" "$own"
"$V" replay --snapshots "$S" --store "$STORE" >"$T/out" 2>"$T/err"
eq "$?" 1 "a missing version: exit 1"
has "$T/out" "is neither in the snapshot folder's versions nor in the version store" \
  "a missing version is reported"
has "$T/out" "give a store that has it with --store DIR" "the message says what to do"

summary
[ "$fail" -eq 0 ]
