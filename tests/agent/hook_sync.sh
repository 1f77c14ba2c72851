#!/usr/bin/env bash
# hook_sync.sh — with the default durability (interval) `verdict hook`
# answers, then leaves the snapshot log's close (its fsync, then the
# segment's index) to a child whose stdio is /dev/null, so that the agent
# does not wait for the disk (docs/agents.md, "The audit trail"). Checked:
# the answer is printed once; the fsync is made by the child, after it let go
# of the agent's stdin, stdout and stderr, and after the hook itself exited;
# `always` and `none` make no child; and once the child is done the record
# is on disk, indexed and replays. Run from the repo root with the build
# folder as $1.
set -u
BUILD=${1:?usage: hook_sync.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need strace flock

guard_bundle
IN='{"session_id":"s","cwd":"/home/dev/proj","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git status"},"tool_use_id":"toolu_sync"}'

# hook DURABILITY SNAPDIR: one call under strace; the answer in $T/out, the
# trace (one file, pids first) in $T/trace.
hook() {
  # (LeakSanitizer, in a sanitizer build, does not run under ptrace)
  printf '%s' "$IN" | ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace -f -qq -o "$T/trace" -e trace=fork,clone,clone3,dup2,fsync,exit_group \
    "$V" hook claude --policy "$T/p" --snapshots "$2" --durability "$1" >"$T/out" 2>"$T/err"
  RC=$?
}
# settled DIR: waits (up to 20 s) until no process holds DIR's writer lock.
settled() {
  local i
  for i in $(seq 200); do
    flock -n "$1/writer.lock" true 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

hook interval "$T/s1"
eq "$RC" 0 "interval: the hook exits 0"
eq "$(grep -c '"permissionDecision":"allow"' "$T/out")" 1 "interval: the answer is printed once"
settled "$T/s1" && ok || bad "interval: the snapshot folder is still held after 20 s"
top=$(head -1 "$T/trace" | awk '{print $1}')
# (a first call into a new folder also syncs the files it creates, before
# it decides: the version store's, the new segment's header)
syncer=$(awk -v p="$top" '$1 != p && $2 ~ /^fsync\(/ {print $1; exit}' "$T/trace")
if [ -n "$syncer" ]; then ok; else
  bad "interval: no child of the hook ($top) syncs the record: $(cat "$T/trace")"
fi
# a new process, not a thread (CLONE_THREAD): what the sanitizers start is
# not one; the child shares the hook's memory (CLONE_VM) outside them
fork_line=$(awk -v p="$top" '$1 == p && $2 ~ /^(fork|clone|clone3)\(/ && !/CLONE_THREAD/ {print NR; exit}' "$T/trace")
late=$(awk -v p="$top" -v f="${fork_line:-0}" 'NR > f && $1 == p && $2 ~ /^fsync\(/' "$T/trace")
if [ -n "$fork_line" ] && [ -z "$late" ]; then ok; else
  bad "interval: the hook itself syncs after its answer: $(cat "$T/trace")"
fi
sync_line=$(awk -v p="$syncer" '$1 == p && $2 ~ /^fsync\(/ {print NR; exit}' "$T/trace")
exit_line=$(awk -v p="$top" '$1 == p && $2 ~ /^exit_group/ {print NR; exit}' "$T/trace")
if [ -n "$sync_line" ] && [ -n "$exit_line" ] && [ "$exit_line" -lt "$sync_line" ]; then ok; else
  bad "interval: the hook did not exit before the sync: $(cat "$T/trace")"
fi
for fd in 0 1 2; do
  line=$(awk -v p="$syncer" -v fd="$fd" '$1 == p && $2 ~ /^dup2\(/ && $3 == fd ")" {print NR; exit}' "$T/trace")
  if [ -n "$line" ] && [ -n "$sync_line" ] && [ "$line" -lt "$sync_line" ]; then ok; else
    bad "interval: the child keeps the agent's fd $fd while it syncs: $(cat "$T/trace")"
  fi
done
# the record, on disk, sealed into the segment's index, and replayed
n=$("$V" snapshots list --snapshots "$T/s1" | wc -l | tr -d ' ')
eq "$n" 1 "interval: one record"
ls "$T/s1"/seg-*.idx >/dev/null 2>&1 && ok || bad "interval: the segment has no index after the close"
"$V" replay --snapshots "$T/s1" --policy "$T/p" >"$T/replay" 2>&1 && ok ||
  bad "interval: the record does not replay: $(cat "$T/replay")"

# a second call finds the folder free or waits its turn, and records too
hook interval "$T/s1"
eq "$(grep -c '"permissionDecision":"allow"' "$T/out")" 1 "interval again: answered"
settled "$T/s1" || bad "interval again: the folder is still held"
eq "$("$V" snapshots list --snapshots "$T/s1" | wc -l | tr -d ' ')" 2 "interval again: two records"

for d in always none; do
  hook "$d" "$T/s-$d"
  eq "$(grep -c '"permissionDecision":"allow"' "$T/out")" 1 "$d: answered"
  if grep -E '^[0-9]+ +(fork|clone|clone3)\(' "$T/trace" | grep -vq CLONE_THREAD; then
    bad "$d: the hook made a child: $(cat "$T/trace")"
  else ok; fi
  eq "$("$V" snapshots list --snapshots "$T/s-$d" | wc -l | tr -d ' ')" 1 "$d: one record"
done
# a second call into the same folder (nothing left to create): the
# record's own sync, by the hook itself
hook always "$T/s-always"
top=$(head -1 "$T/trace" | awk '{print $1}')
syncer=$(awk '$2 ~ /^fsync\(/ {print $1; exit}' "$T/trace")
eq "$syncer" "$top" "always: the hook syncs before it answers"

summary
[ "$fail" -eq 0 ]
