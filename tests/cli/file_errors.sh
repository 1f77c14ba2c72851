#!/usr/bin/env bash
# file_errors.sh — a file a command cannot open or write is reported as
# "verdict COMMAND: PATH: reason" on stderr, with exit status 1, by every
# command that takes a file: the user learns which command, which file and
# why, and stdout stays empty. Run from the repo root with the build folder
# as $1.
set -u
BUILD=${1:?usage: file_errors.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

P=examples/policies
M=$P/models/clef-default-v3.json
GONE=$T/missing
NOWHERE=$T/no-such-folder/out

# file_error WANT_FILE COMMAND ARGS... : stderr's first line names the
# command, the file and the reason; exit 1; nothing on stdout
file_error() {
  local file=$1 cmd=$2
  shift 2
  "$V" "$cmd" "$@" </dev/null >"$T/out" 2>"$T/err"
  local rc=$?
  local want="verdict $cmd: $file: No such file or directory"
  if [ "$(head -n 1 "$T/err")" = "$want" ] && [ "$rc" = 1 ] && [ ! -s "$T/out" ]; then
    ok
  else
    bad "verdict $cmd $*: exit $rc, stderr '$(head -n 1 "$T/err")', want '$want' (exit 1, no stdout)"
  fi
}

file_error "$GONE.json" decide --policy $P --no-store --no-snapshots "$GONE.json"
file_error "$GONE.jsonl" decide --policy $P --no-store --no-snapshots --jsonl "$GONE.jsonl"
file_error "$GONE.cel" eval -f "$GONE.cel"
file_error "$GONE.json" eval -B "$GONE.json" 'x'
file_error "$GONE.csv" model predict $M "$GONE.csv"
file_error "$GONE.jsonl" model features $P/models/clef-default-v3.features.yaml "$GONE.jsonl"
file_error "$NOWHERE" gen --kind gate --count 1 --seed 1 --labels "$NOWHERE"
file_error "$GONE.jsonl" replay --snapshots "$T/snaps" --labels "$GONE.jsonl"

summary
[ "$fail" = 0 ]
