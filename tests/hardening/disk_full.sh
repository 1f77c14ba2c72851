#!/usr/bin/env bash
# disk_full.sh — the snapshot log's disk fills up under load, then has room
# again (issue 9, "Faults"; issue 19, finding 5). The disk is a real tmpfs of
# 8 MiB mounted for the test and filled with a file until the kernel says
# ENOSPC; removing the file is "space returns". Where no tmpfs can be mounted
# (not root, no CAP_SYS_ADMIN) the running server's file size limit
# (RLIMIT_FSIZE, SIGXFSZ ignored) stands in for it: every write past the
# segment's size fails with EFBIG through the same path.
#
# Each load is bounded (a fixed number of requests from 4 keep-alive
# clients); an answer that takes more than 5 s counts as hung. While the disk
# is full, for every setting: /healthz and /metrics answer, /readyz says 503
# with the disk's error, no decision hangs.
# --durability interval, --on-full block (the defaults): answered decisions
#   carry a snapshot_id until the queue (--snapshot-queue 200, and as many in
#   the writer's buffer) is full, then they are refused with 503 not_recorded
#   naming the disk's error; verdict_snapshots_unwritten is the number of
#   answered decisions not readable from the log; once space returns the
#   writer resumes by itself, readiness comes back and everything answered is
#   in the log; a SIGTERM on a full disk exits within its --drain-timeout and
#   its stop line says how many answered decisions are lost, which is the
#   number missing from the log afterwards.
# --on-full drop: every decision is answered, those dropped without a
#   snapshot_id and counted; nothing answered with an id is lost.
# --durability always (block and drop): a decision whose snapshot the disk
#   refuses is refused with 503 (never answered, never written later); after
#   space returns readiness comes back with no traffic at all (the writer
#   probes the disk), and decisions are durable again.
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: disk_full.sh BUILD_DIR}
VD="$BUILD/verdict"
HERE=$(dirname "$0")
PY=/usr/bin/python3
TEST_NAME=hardening/disk_full
. "$HERE/../lib.sh"
scratch
need curl
DISK="$T/disk"
MOUNTED=
on_exit() { # the server dies before its disk is unmounted
  rm -f "$DISK/filler" 2>/dev/null
  kill_wait KILL "$PID"
  PID=
  if [ -n "$MOUNTED" ]; then umount -l "$DISK" 2>/dev/null; fi
}
mkdir -p "$DISK"
if mount -t tmpfs -o size=8m,mode=0700 verdict-test "$DISK" 2>/dev/null; then
  MOUNTED=1
  FULL_ERR="No space left on device"
else
  echo "disk_full.sh: no tmpfs can be mounted here: RLIMIT_FSIZE stands in for a full disk" >&2
  FULL_ERR="File too large"
fi

# start NAME [serve options...]: SIGXFSZ ignored (kept across exec).
start() {
  local name=$1; shift
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  LOG="$T/$name.log"
  SNAP="$DISK/snap-$name"
  $PY -c 'import os,signal,sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])' \
    "$VD" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 2 --no-store \
    --snapshots "$SNAP" --drain-timeout 2000 "$@" 2>"$LOG" &
  PID=$!
  wait_ready "$name" "$LOG"
}
fill() { # the disk has no room left
  if [ -n "$MOUNTED" ]; then
    dd if=/dev/zero of="$DISK/filler" bs=64k 2>/dev/null
    eq "$(df --output=avail "$DISK" | tail -1 | tr -d ' ')" 0 "fill: the disk is full"
  else
    local seg; seg=$(ls "$SNAP"/seg-*.log | tail -1)
    $PY -c 'import resource,sys; resource.prlimit(int(sys.argv[1]), resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))' \
      "$PID" "$(stat -c %s "$seg")"
  fi
}
free() { # space returns
  if [ -n "$MOUNTED" ]; then
    rm -f "$DISK/filler"
  else
    $PY -c 'import resource,sys; resource.prlimit(int(sys.argv[1]), resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))' "$PID"
  fi
}
# load N NAME: N decisions (4 clients), acknowledged ids to $T/NAME.ids, the
# summary to $T/NAME.json; an answer that takes 5 s counts in `conn` (hung),
# and a load still short of N after 60 s gives up (a hang, not a slow run)
load() {
  touch "$T/stop"
  $PY "$HERE/faultload.py" --port "$PORT" --stop "$T/stop" --out "$T/$2.json" --ids "$T/$2.ids" \
    --threads 4 --min "$1" --timeout 5 --give-up 60 \
    "$T/req-model.json" "$T/req-probe.json" "$T/req-login.json"
  touch "$T/$2.ids"
}
# jget FILE EXPR: a python expression over the load summary `d`
jget() { $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
metric() { curl -s --max-time 5 "$URL/metrics" | sed -n "s/^$1 //p"; }
get() { curl -s --max-time 5 -o "$T/body" -w '%{http_code}' "$URL$1"; }
decide() { curl -s --max-time 5 -o "$T/body" -w '%{http_code}' "$URL/v1/decide" --data-binary @"$T/req-probe.json"; }
wait_log() { # wait_log TEXT: until the server's log has a line with TEXT (bounded)
  for _ in $(seq 1 150); do grep -qF -- "$1" "$LOG" && return 0; sleep 0.1; done
  return 1
}
wait_metric() { # wait_metric NAME VALUE (bounded)
  for _ in $(seq 1 150); do [ "$(metric "$1")" = "$2" ] && return 0; sleep 0.1; done
  return 1
}
wait_ready_again() { # readiness comes back by itself (bounded)
  for _ in $(seq 1 150); do [ "$(get /readyz)" = 200 ] && return 0; sleep 0.1; done
  return 1
}
# check_while_full NAME: health, metrics and readiness while the disk is full
check_while_full() {
  eq "$(get /healthz)" 200 "$1, full: /healthz answers"
  eq "$(get /metrics)" 200 "$1, full: /metrics answers"
  has "$T/body" "verdict_snapshot_write_failing 1" "$1, full: /metrics shows the disk failing"
  has "$T/body" "verdict_ready 0" "$1, full: /metrics shows not ready"
  eq "$(get /readyz)" 503 "$1, full: /readyz is not ready"
  has "$T/body" '"code":"snapshot_write_failed"' "$1, full: /readyz gives the reason"
  has "$T/body" "$FULL_ERR" "$1, full: /readyz names the disk's error"
}
# stop_bounded NAME: SIGTERM; the server must exit (0) within 15 s
stop_bounded() {
  kill -TERM "$PID"
  local gone=
  for _ in $(seq 1 150); do kill -0 "$PID" 2>/dev/null || { gone=1; break; }; sleep 0.1; done
  if [ -n "$gone" ]; then
    ok
    wait "$PID"
    eq "$?" 0 "$1: SIGTERM: exit 0"
  else
    bad "$1: SIGTERM: the server did not exit within 15 s"
    kill -KILL "$PID"; wait "$PID" 2>/dev/null
  fi
  PID=
}
stop_field() { # stop_field KEY: from the server's stop line
  grep -F '"event":"stop"' "$LOG" | $PY -c 'import json,sys; print(json.loads(sys.stdin.readline()).get(sys.argv[1]))' "$1"
}
# read_back IDS...: the log's records against the acknowledged ids:
# "missing=M extra=E dup=D"
read_back() {
  "$VD" snapshots export -s "$SNAP" >"$T/export" 2>"$T/export.err"
  $PY - "$T/export" "$@" <<'PYEOF'
import json, sys
seen = [json.loads(l)["id"] for l in open(sys.argv[1])]
want = set()
for f in sys.argv[2:]:
    want.update(l.strip() for l in open(f) if l.strip())
print("missing=%d extra=%d dup=%d" % (len(want - set(seen)), len(set(seen) - want),
                                      len(seen) - len(set(seen))))
PYEOF
}

mkdir -p "$T/bundle"
for f in examples/policies/*; do cp -r "$f" "$T/bundle/"; done
echo '{"action":"http_request","context":{"method":"GET","path":"/products/espresso-grinder","client_ip":"81.2.69.160","headers":{"user-agent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 Safari/605.1.15"},"env":{"country":"GB"}}}' >"$T/req-model.json"
echo '{"action":"http_request","context":{"method":"GET","path":"/.env","client_ip":"81.2.69.160","headers":{"user-agent":"Mozilla/5.0"},"env":{"country":"GB"}}}' >"$T/req-probe.json"
echo '{"action":"login","context":{"ip":"203.0.113.7","user":"ana"}}' >"$T/req-login.json"

# ======== interval, block (the defaults) ========
start ib --snapshot-queue 200
load 100 ib0
eq "$(jget "$T/ib0.json" '(d["conn"], d["failed"], d["total"] >= 100)')" "(0, 0, True)" "ib, before: 100 decisions answered"
wait_metric verdict_snapshots_unwritten 0 && ok || bad "ib, before: everything written"

fill
load 1500 ib1
eq "$(jget "$T/ib1.json" 'd["conn"]')" 0 "ib, full: no decision hung (none took 5 s)"
eq "$(jget "$T/ib1.json" 'sorted(d["status"])')" "['200', '503']" "ib, full: answered (200) or refused (503), nothing else"
eq "$(jget "$T/ib1.json" 'list(d["codes"])')" "['not_recorded']" "ib, full: each refusal is not_recorded"
eq "$(jget "$T/ib1.json" 'sys.argv[3] in d["messages"]["not_recorded"]' "$FULL_ERR")" True \
  "ib, full: the refusal names the disk's error"
eq "$(jget "$T/ib1.json" 'd["unrecorded"]')" 0 "ib, full: block answers nothing unrecorded"
N503=$(jget "$T/ib1.json" 'd["status"].get("503", 0)')
wait_log '"event":"snapshot_write_failed"' && ok || bad "ib, full: no snapshot_write_failed in the log"
check_while_full ib
eq "$(decide)" 503 "ib, full: one more decision is refused"
has "$T/body" '"code":"not_recorded"' "ib, full: with the JSON error"
eq "$(metric verdict_snapshots_refused_total)" $((N503 + 1)) "ib, full: every refusal is counted"
U=$(metric verdict_snapshots_unwritten)
RB=$(read_back "$T/ib0.ids" "$T/ib1.ids")
eq "$RB" "missing=$U extra=0 dup=0" "ib, full: verdict_snapshots_unwritten ($U) is what the log is missing"
[ "${U:-0}" -gt 0 ] && ok || bad "ib, full: answered decisions wait unwritten (got '$U')"

free
wait_ready_again && ok || bad "ib, space back: readiness did not come back"
wait_log '"event":"snapshot_write_recovered"' && ok || bad "ib, space back: no snapshot_write_recovered in the log"
wait_metric verdict_snapshots_unwritten 0 && ok || bad "ib, space back: the queue did not drain"
load 100 ib2
eq "$(jget "$T/ib2.json" '(d["conn"], d["failed"])')" "(0, 0)" "ib, space back: decisions answered"
wait_metric verdict_snapshots_unwritten 0 && ok || bad "ib, space back: the new ones are written"
eq "$(read_back "$T/ib0.ids" "$T/ib1.ids" "$T/ib2.ids")" "missing=0 extra=0 dup=0" \
  "ib, space back: every answered decision is in the log once"

# -- full again, and stopped while full: what is lost is said --
fill
load 600 ib3
eq "$(jget "$T/ib3.json" 'd["conn"]')" 0 "ib, full again: no decision hung"
stop_bounded ib
eq "$(stop_field level)" error "ib, stop: the stop line is an error"
LOST=$(stop_field snapshots_lost)
has "$LOG" "could not be written and are lost: " "ib, stop: the stop line says what was lost"
grep -F '"event":"stop"' "$LOG" >"$T/stopline"
has "$T/stopline" "$FULL_ERR" "ib, stop: and why"
free
eq "$(read_back "$T/ib0.ids" "$T/ib1.ids" "$T/ib2.ids" "$T/ib3.ids")" "missing=$LOST extra=0 dup=0" \
  "ib, stop: snapshots_lost ($LOST) is what the log is missing"
[ "${LOST:-0}" -gt 0 ] && ok || bad "ib, stop: answered decisions were left unwritten (got '$LOST')"
hasnt "$T/export.err" "skipped" "ib: no damaged bytes"

# ======== interval, drop ========
start id --on-full drop --snapshot-queue 200
load 50 id0
fill
load 1500 id1
eq "$(jget "$T/id1.json" '(d["conn"], sorted(d["status"]))')" "(0, ['200'])" "id, full: every decision answered, none hung"
D=$(jget "$T/id1.json" 'd["unrecorded"]')
[ "$D" -gt 0 ] && ok || bad "id, full: some decisions were answered unrecorded (got $D)"
eq "$(metric verdict_snapshots_dropped_total)" "$D" "id, full: each one answered without a snapshot_id is counted as dropped"
eq "$(metric verdict_snapshots_refused_total)" 0 "id, full: drop refuses nothing"
check_while_full id
free
wait_ready_again && ok || bad "id, space back: readiness did not come back"
wait_metric verdict_snapshots_unwritten 0 && ok || bad "id, space back: the queue did not drain"
stop_bounded id
eq "$(stop_field snapshots_lost)" 0 "id, stop: nothing lost"
eq "$(read_back "$T/id0.ids" "$T/id1.ids")" "missing=0 extra=0 dup=0" "id: every decision answered with an id is in the log once"

# ======== always, block and drop ========
for OF in block drop; do
  N=a$OF
  start "$N" --durability always --on-full "$OF"
  load 50 "${N}0"
  eq "$(jget "$T/${N}0.json" '(d["conn"], d["failed"], d["unrecorded"])')" "(0, 0, 0)" "$N, before: durable answers"
  fill
  load 300 "${N}1"
  eq "$(jget "$T/${N}1.json" 'd["conn"]')" 0 "$N, full: no decision hung"
  eq "$(jget "$T/${N}1.json" 'd["status"].get("503", 0) > 0 and set(d["status"]) <= {"200", "503"}')" True \
    "$N, full: decisions are refused (503), the rest answered"
  eq "$(jget "$T/${N}1.json" 'list(d["codes"])')" "['not_recorded']" "$N, full: each refusal is not_recorded"
  eq "$(jget "$T/${N}1.json" '"could not be made durable" in d["messages"]["not_recorded"] and sys.argv[3] in d["messages"]["not_recorded"]' "$FULL_ERR")" True \
    "$N, full: the refusal says why, with the disk's error"
  eq "$(jget "$T/${N}1.json" 'd["unrecorded"]')" 0 "$N, full: nothing answered unrecorded"
  # a record or two may still fit the last page of the segment: the next one fails
  R=; for _ in 1 2 3 4 5 6 7 8; do R=$(decide); [ "$R" = 503 ] && break; done
  eq "$R" 503 "$N, full: a decision is refused"
  check_while_full "$N"
  eq "$(metric verdict_snapshots_unwritten)" 0 "$N, full: nothing answered is unwritten"
  free
  wait_ready_again && ok || bad "$N, space back: readiness did not come back with no traffic"
  load 50 "${N}2"
  eq "$(jget "$T/${N}2.json" '(d["conn"], d["failed"], d["unrecorded"])')" "(0, 0, 0)" "$N, space back: durable answers"
  eq "$(get "/v1/snapshots/$(tail -1 "$T/${N}2.ids")")" 200 "$N, space back: an answered snapshot is on disk"
  fill
  stop_bounded "$N"
  eq "$(stop_field snapshots_lost)" 0 "$N, stop: nothing answered is lost"
  free
  eq "$(read_back "$T/${N}0.ids" "$T/${N}1.ids" "$T/${N}2.ids")" "missing=0 extra=0 dup=0" \
    "$N: the log holds exactly the answered decisions (none refused is written later)"
done

summary
[ "$fail" -eq 0 ]
