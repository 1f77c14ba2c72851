#!/usr/bin/env bash
# completion.sh — the bash completion the build makes
# (BUILD/cli-docs/completion/verdict) completes what --help says: the
# commands, each command's subcommands, every option each --help lists (and
# nothing else), an option's listed values, folders after --policy, files
# after --config.
set -u
BUILD=${1:?usage: completion.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

C="$BUILD/cli-docs/completion/verdict"
[ -f "$C" ] || { bad "no $C"; summary; exit 1; }
bash -n "$C" && ok || bad "the completion is not valid bash"

# complete WORD...: what the completion offers for the command line
# "verdict WORD..." (the last word being completed), sorted, one a line.
complete_line() {
  bash -c '
    . "$1"; shift
    COMP_WORDS=(verdict "$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    _verdict
    printf "%s\n" "${COMPREPLY[@]}" | sort -u | sed "/^$/d"' _ "$C" "$@"
}

cmds=$("$V" --help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }' | sort)
eq "$(complete_line "" | grep -v '^-' | tr '\n' ' ')" "$(echo "$cmds" | tr '\n' ' ')" "the commands"
eq "$(complete_line --v)" "--version" "--version"
eq "$(complete_line help se)" "serve" "help COMMAND"

# Every option of every --help: the words starting with - that begin an
# item (or follow one after a gap) in its options and filters sections.
for c in $cmds; do
  "$V" "$c" --help | awk '
    /^(options|filters)[^:]*:$/ { on = 1; next }
    /^[^ ]/ { on = 0 }
    on && /^ +-/ && match($0, /^ */) && RLENGTH <= 6 {
      line = $0; sub(/^ +/, "", line); gsub(/   */, "\t", line)
      nc = split(line, chunk, "\t")
      for (k = 1; k <= nc && chunk[k] ~ /^-/; k++) {
        n = split(chunk[k], w, /[ ,]+/)
        for (i = 1; i <= n && w[i] ~ /^-/; i++) print w[i]
      }
    }' | sort -u >"$T/want"
  [ -s "$T/want" ] && ok || bad "no options found in verdict $c --help"
  complete_line "$c" - >"$T/got"
  missing=$(comm -23 "$T/want" "$T/got" | tr '\n' ' ')
  eq "$missing" "" "verdict $c: options in --help the completion lacks"
  # nothing it offers is unknown to --help
  for o in $(comm -13 "$T/want" "$T/got"); do
    "$V" "$c" --help | grep -qE -- "(^|[ ;(])$o([ ,;:)]|$)" && ok || bad "verdict $c: the completion offers $o, not in --help"
  done
done

eq "$(complete_line snapshots "" | tr '\n' ' ')" "export gc list show " "snapshots' subcommands"
eq "$(complete_line model "" | tr '\n' ' ')" "check compare dataset features info predict train " "model's subcommands"
eq "$(complete_line hook "" | tr '\n' ' ')" "claude codex gemini opencode " "hook's agents"
eq "$(complete_line serve --durability "" | tr '\n' ' ')" "always interval none " "a value listed in --help"
eq "$(complete_line decide --state-on-error "" | tr '\n' ' ')" "allow deny local " "a counter-store value"
eq "$(complete_line serve --threads "")" "" "no guess for a number"
mkdir -p "$T/w/pol" && touch "$T/w/pfile"
eq "$(cd "$T/w" && complete_line serve -p p)" "pol" "folders after -p"
eq "$(cd "$T/w" && complete_line serve --config p | tr '\n' ' ')" "pfile pol " "files after --config"

summary
[ "$fail" = 0 ]
