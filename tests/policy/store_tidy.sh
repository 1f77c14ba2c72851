#!/usr/bin/env bash
# store_tidy.sh — the version store's caches do not grow without bound
# (docs/policy.md, "Versions"; src/policy/cache.c, "keeping the store
# small"). A `verdict hook` or `verdict decide` that writes a compiled/ or
# parsed/ entry also removes, by the rule: writers' leftover temporary files,
# other builds' compiled files not used for a day, entries not used for 30
# days, and the least recently used beyond 64 files / 16 MiB (compiled/) or
# 1024 entries (parsed/) — never what the call itself uses, never a stored
# version or model, never a name it does not write. A call that writes
# nothing lists no folder; using an entry keeps it young. The hook works
# after every cleanup, and `verdict store` reports and cleans the same way.
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: store_tidy.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

P="$T/p"
S="$P/.verdict/versions"
C="$S/compiled"
mkdir -p "$P"
cp examples/policies/agent_guard.yaml "$P/"
# A file changed in the last 2 s is never read back from the store: age it.
sleep 3
IN='{"session_id":"s","transcript_path":"/tmp/t.jsonl","cwd":"/tmp","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git status"},"tool_use_id":"t1"}'
hook() { printf '%s' "$IN" | "$V" hook claude --policy "$P" --no-snapshots >"$T/out" 2>"$T/err"; }
allowed() { # allowed DESCRIPTION: the hook ran and allowed `git status`
  hook; local rc=$?
  eq "$rc" 0 "$1: hook exit status"
  has "$T/out" '"permissionDecision":"allow"' "$1: hook answer"
}
count() { ls -A "$1" | grep -c '^[0-9a-f]\{64\}'; } # the entries verdict writes
old() { touch -d "$1" "${@:2}"; } # old DATE FILE...

allowed "first call"
allowed "second call" # the first wrote parsed/; this one the compiled file
CUR=$(ls "$C" | head -1)
eq "$(count "$C")" 1 "one compiled file after two calls"
VER=${CUR%%-*}
FP=${CUR#*-}
[ ${#VER} -eq 64 ] && [ -n "$FP" ] && ok || bad "compiled file name '$CUR'"
KEY=$(ls "$S/parsed" | head -1)
ino() { stat -c %i "$C/$CUR"; }
INO=$(ino)

# ---- what a tidy removes, and what it leaves ----
H=0000000000000000000000000000000000000000000000000000000000000000
v() { printf '%s%02d' "${H:0:62}" "$1"; } # a version name of 64 hex digits
cp "$C/$CUR" "$C/$(v 1)-0123456789abcdef0123456789abcdef"   # other build, 2 days old
old "2 days ago" "$C/$(v 1)-0123456789abcdef0123456789abcdef"
cp "$C/$CUR" "$C/$(v 2)-0123456789abcdef0123456789abcdef"   # other build, used 2 hours ago
old "2 hours ago" "$C/$(v 2)-0123456789abcdef0123456789abcdef"
cp "$C/$CUR" "$C/$VER-fedcba9876543210fedcba9876543210"     # this version, other build, 3 days
old "3 days ago" "$C/$VER-fedcba9876543210fedcba9876543210"
echo x >"$C/$(v 3)-$FP"                                       # this build, unused for 31 days
old "31 days ago" "$C/$(v 3)-$FP"
echo x >"$C/$(v 4)-$FP"                                       # this build, used 20 days ago
old "20 days ago" "$C/$(v 4)-$FP"
echo x >"$C/.$(v 5)-$FP.Ab12Cd"                               # a dead writer's leftover
old "2 hours ago" "$C/.$(v 5)-$FP.Ab12Cd"
echo x >"$C/.$(v 6)-$FP.Ef34Gh"                               # a writer at work
echo x >"$C/notes.txt"                                        # not a name verdict writes
old "90 days ago" "$C/notes.txt"
printf '%s\n00000000\n' "$(v 7)" >"$S/parsed/$(v 8)"          # parsed/, unused for 40 days
old "40 days ago" "$S/parsed/$(v 8)"
printf '%s\n00000000\n' "$(v 9)" >"$S/parsed/$(v 10)"         # parsed/, used yesterday
old "1 day ago" "$S/parsed/$(v 10)"
old "300 days ago" "$S/$VER.json" "$S/parsed/$KEY"            # the stored form, old: kept
mkdir -p "$S/models" && echo '{}' >"$S/models/$(v 11).json" && old "300 days ago" "$S/models/$(v 11).json"
(cd "$S" && ls -la --time-style=+%s *.json models) >"$T/versions.before"

# a call that writes nothing lists no folder: the leftover stays
allowed "call that writes nothing"
[ -e "$C/.$(v 5)-$FP.Ab12Cd" ] && ok || bad "a call that wrote nothing tidied the store"
eq "$(ino)" "$INO" "the compiled file used, not written again"

# the same call, once a write is due (the file edited: a new parsed/ key;
# a comment keeps the version, so nothing else is new), tidies
echo "# edited" >>"$P/agent_guard.yaml"
sleep 3
allowed "call after an edit"
KEY=$(ls -t "$S/parsed" | head -1)
for gone in "$(v 1)-0123456789abcdef0123456789abcdef" "$VER-fedcba9876543210fedcba9876543210" \
  "$(v 3)-$FP" ".$(v 5)-$FP.Ab12Cd"; do
  [ -e "$C/$gone" ] && bad "compiled/$gone should have been removed" || ok
done
for kept in "$CUR" "$(v 2)-0123456789abcdef0123456789abcdef" "$(v 4)-$FP" ".$(v 6)-$FP.Ef34Gh" notes.txt; do
  [ -e "$C/$kept" ] && ok || bad "compiled/$kept should have been kept"
done
[ -e "$S/parsed/$(v 8)" ] && bad "a parsed/ entry unused for 40 days was kept" || ok
[ -e "$S/parsed/$(v 10)" ] && ok || bad "a parsed/ entry used yesterday was removed"
[ -e "$S/parsed/$KEY" ] && ok || bad "the parsed/ entry of the bundle's file was removed"
eq "$(ino)" "$INO" "the compiled file in use is never removed or rewritten"
(cd "$S" && ls -la --time-style=+%s *.json models) >"$T/versions.after"
if cmp -s "$T/versions.before" "$T/versions.after"; then ok; else
  bad "stored versions or models changed: $(diff "$T/versions.before" "$T/versions.after")"
fi
allowed "call after the tidy"

# ---- using an entry keeps it young ----
old "3 hours ago" "$C/$CUR" "$S/parsed/$KEY"
allowed "call that uses old entries"
AGE=$(($(date +%s) - $(stat -c %Y "$C/$CUR")))
[ "$AGE" -lt 600 ] && ok || bad "a used compiled file kept its old time ($AGE s)"
AGE=$(($(date +%s) - $(stat -c %Y "$S/parsed/$KEY")))
[ "$AGE" -lt 600 ] && ok || bad "a used parsed/ entry kept its old time ($AGE s)"

# ---- at most 64 compiled files / 16 MiB, least recently used first ----
for i in $(seq 20 99); do
  echo x >"$C/$(v "$i")-$FP"
  old "$((100 - i)) hours ago" "$C/$(v "$i")-$FP" # v 20 the oldest
done
rm -f "$C/$CUR" # the next call writes it again, and tidies
allowed "call that rewrites the compiled file"
eq "$(count "$C")" 64 "compiled files after the count limit"
[ -e "$C/$(v 20)-$FP" ] && bad "the least recently used file was kept" || ok
[ -e "$C/$(v 99)-$FP" ] && ok || bad "the most recently used file was removed"
[ -e "$C/$CUR" ] && ok || bad "the file in use was removed"
[ -e "$C/$(v 2)-0123456789abcdef0123456789abcdef" ] && bad "another build's file outlived this build's" || ok
rm -f "$C"/"${H:0:62}"*
for i in 1 2 3; do truncate -s 6M "$C/$(v "$i")-$FP"; old "$i days ago" "$C/$(v "$i")-$FP"; done
rm -f "$C/$CUR"
allowed "call over the byte limit"
[ -e "$C/$(v 3)-$FP" ] && bad "the oldest 6 MiB file was kept over 16 MiB" || ok
[ -e "$C/$(v 1)-$FP" ] && [ -e "$C/$(v 2)-$FP" ] && ok || bad "more than needed was removed for the byte limit"

# ---- verdict store ----
"$V" store --help >"$T/out" 2>&1
eq "$?" 0 "store --help"
has "$T/out" "usage: verdict store" "store --help text"
"$V" store "$S" >"$T/out" 2>"$T/err"
eq "$?" 0 "store info"
has "$T/out" "stored versions" "store info: versions"
has "$T/out" "compiled/" "store info: compiled"
"$V" store --clean --all "$S" >"$T/out" 2>"$T/err"
eq "$?" 0 "store --clean --all"
eq "$(count "$C")" 0 "--clean --all empties compiled/"
[ -e "$C/notes.txt" ] && [ -e "$C/.$(v 6)-$FP.Ef34Gh" ] && ok || bad "--clean --all removed a name verdict does not write, or a file being written"
eq "$(count "$S/parsed")" 0 "--clean --all empties parsed/"
[ -e "$S/$VER.json" ] && ok || bad "--clean --all removed a stored version"
allowed "call after --clean --all"
"$V" store /nonexistent/verdict/store >"$T/out" 2>"$T/err"
eq "$?" 1 "store of a missing folder: exit 1, as verdict check"
has "$T/err" "/nonexistent/verdict/store" "the error names the folder"
"$V" store "$P" >"$T/out" 2>"$T/err"
eq "$?" 0 "store given the bundle folder finds its store"
has "$T/out" "$S" "store of a bundle names its store"

summary
[ "$fail" -eq 0 ]
