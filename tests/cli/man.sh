#!/usr/bin/env bash
# man.sh — the manual pages the build makes (BUILD/cli-docs/man, from
# scripts/gen-cli-docs): verdict(1) and one verdict-CMD(1) for every command
# `verdict --help` lists, each made from that command's --help (remade from
# the binary, byte for byte the same; its synopsis is the usage, every option
# of the help is in the page) and rendered by man without a warning.
set -u
BUILD=${1:?usage: man.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need man

M="$BUILD/cli-docs/man"
sh scripts/gen-cli-docs "$V" "$T/gen" 2>"$T/err"; eq "$?" 0 "gen-cli-docs runs"
cmds=$("$V" --help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }')
pages="verdict"
for c in $cmds; do pages="$pages verdict-$c"; done
eq "$(cd "$M" && ls -- *.1 | sort | tr '\n' ' ')" "$(for p in $pages; do echo "$p.1"; done | sort | tr '\n' ' ')" \
  "one page a command, and verdict.1"

for p in $pages; do
  f="$M/$p.1"
  [ -f "$f" ] || { bad "no $p.1"; continue; }
  cmp -s "$f" "$T/gen/man/$p.1" && ok || bad "$p.1 is not what the binary's --help makes now"
  MANWIDTH=80 man --warnings -E UTF-8 -l "$f" >"$T/page" 2>"$T/warn"; eq "$?" 0 "man -l $p.1"
  [ -s "$T/warn" ] && { bad "man warns on $p.1"; sed 's/^/  | /' "$T/warn" >&2; } || ok
  grep -q "^NAME" "$T/page" && grep -q "^SYNOPSIS" "$T/page" && grep -q "^SEE ALSO" "$T/page" && ok ||
    bad "$p.1 has NAME, SYNOPSIS and SEE ALSO"
  c=${p#verdict-}; [ "$p" = verdict ] && c=
  # shellcheck disable=SC2086
  "$V" $c --help >"$T/help"
  # the synopsis: the usage lines, as they are
  sed -n '/^usage: /,/^$/p' "$T/help" | sed 's/^usage: //; s/^       //; /^$/d' >"$T/usage"
  sed -n '/^SYNOPSIS/,/^[A-Z]/p' "$T/page" | sed '1d;$d;/^$/d;s/^       //' >"$T/syn"
  cmp -s "$T/usage" "$T/syn" && ok || { bad "$p.1: the synopsis is not the usage"; diff "$T/usage" "$T/syn" >&2; }
  # every option the help names (a word starting with - at the start of an item)
  for o in $(grep -oE '^ {2,6}-[-a-zA-Z]+' "$T/help" | tr -d ' ' | sort -u); do
    grep -qE -- "(^|[ ,])$o([ ,]|$)" "$T/page" && ok || bad "$p.1 lacks $o"
  done
  # every command in verdict(1)
  if [ -z "$c" ]; then
    for x in $cmds; do grep -q "verdict-$x(1)" "$T/page" && ok || bad "verdict.1 does not point to verdict-$x(1)"; done
  fi
done

summary
[ "$fail" = 0 ]
