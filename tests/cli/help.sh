#!/usr/bin/env bash
# help.sh — every command's --help is complete: it exits 0 and prints to
# stdout (as `verdict help CMD` does), lists -h, --help, and names every
# option its source file (src/cli/cmd_CMD.c, and state_opts.c for the
# commands that take the counter-store options) compares an argument with.
# The manual pages and the completion are made from these texts.
set -u
BUILD=${1:?usage: help.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

"$V" --help >"$T/top"; eq "$?" 0 "verdict --help exits 0"
cmds=$(awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }' "$T/top")
[ -n "$cmds" ] && ok || bad "verdict --help lists the commands"
for c in $cmds; do
  "$V" "$c" --help >"$T/$c" 2>"$T/err"; eq "$?" 0 "verdict $c --help exits 0"
  [ -s "$T/err" ] && bad "verdict $c --help writes to stderr"
  "$V" help "$c" >"$T/$c.2"; eq "$?" 0 "verdict help $c exits 0"
  cmp -s "$T/$c" "$T/$c.2" && ok || bad "verdict help $c differs from verdict $c --help"
  "$V" "$c" -h | cmp -s - "$T/$c" && ok || bad "verdict $c -h differs from --help"
  head -1 "$T/$c" | grep -q "^usage: verdict $c" && ok || bad "verdict $c --help starts with its usage"
  grep -Eq '^ +-h, --help ' "$T/$c" && ok || bad "verdict $c --help lists -h, --help"
  src="src/cli/cmd_$c.c"
  [ -f "$src" ] || { bad "no $src"; continue; }
  files=$src
  grep -q CLI_STATE_HELP "$src" && files="$files src/cli/state_opts.c"
  # shellcheck disable=SC2086
  for o in $(grep -ohE '"--?[a-zA-Z][a-zA-Z-]*"' $files | tr -d '"' | sort -u); do
    grep -qE -- "(^|[ ,;(])$o([ ,;:=)]|$)" "$T/$c" && ok || bad "verdict $c --help does not name $o ($src reads it)"
  done
done

summary
[ "$fail" = 0 ]
