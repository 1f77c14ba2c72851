#!/usr/bin/env bash
# disk_full.sh — the disk refuses the server's snapshot writes under load,
# then takes them again (issue 9, "Faults"). The fault is a file size limit
# (RLIMIT_FSIZE) lowered on the running server with prlimit below the size
# its segment has reached, SIGXFSZ ignored: every write past it fails with
# EFBIG, as a full disk fails with ENOSPC, through the same path (no mount
# or root needed). Raising the limit again is "space returns".
#
# --durability interval (the default, queue on_full block): decisions go on
# while the queue has room, and every one is answered; the failure shows in
# /metrics (verdict_snapshot_write_errors_total, queue depth) and in the log
# (snapshot_write_failed with the writer's error); the log as read meanwhile
# holds exactly what was written before the fault; once the limit is raised
# the queue drains (snapshot_write_recovered), and after a clean stop the log
# holds every acknowledged decision once, with nothing damaged.
# --durability always: a decision made while the disk fails is not answered
# until its snapshot is on disk (answering earlier would claim durability
# that is not there); once space returns it is answered, and its snapshot is
# there. Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: disk_full.sh BUILD_DIR}
VD="$BUILD/verdict"
HERE=$(dirname "$0")
PY=/usr/bin/python3
TEST_NAME=hardening/disk_full
. "$HERE/../lib.sh"
scratch
need curl
LOAD= CURL=
on_exit() { # the load stops and the server gets its disk back before it is killed
  touch "$T/stop" 2>/dev/null
  if [ -n "$PID" ]; then $PY -c "import resource,sys; resource.prlimit($PID, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))" 2>/dev/null; fi
  if [ -n "$LOAD" ]; then wait "$LOAD" 2>/dev/null; fi
  kill_wait TERM "$CURL"
}
# start NAME [serve options...]: SIGXFSZ ignored (kept across exec), so an
# over-limit write fails with EFBIG instead of killing the process.
start() {
  local name=$1; shift
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  LOG="$T/$name.log"
  SNAP="$T/snap-$name"
  $PY -c 'import os,signal,sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])' \
    "$VD" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 2 --no-store \
    --snapshots "$SNAP" "$@" 2>"$LOG" &
  PID=$!
  wait_ready "$name" "$LOG"
}
fsize() { # fsize BYTES|unlimited: the server's soft file size limit
  $PY -c 'import resource,sys
pid=int(sys.argv[1]); soft,hard=resource.prlimit(pid, resource.RLIMIT_FSIZE)
n=resource.RLIM_INFINITY if sys.argv[2]=="unlimited" else int(sys.argv[2])
resource.prlimit(pid, resource.RLIMIT_FSIZE, (n if hard==resource.RLIM_INFINITY else min(n, hard), hard))' "$PID" "$1"
}
load() { # load N IDS: N decisions (4 clients), acknowledged ids appended to IDS
  rm -f "$T/stop"; touch "$T/stop"
  $PY "$HERE/faultload.py" --port "$PORT" --stop "$T/stop" --out "$T/load.json" --ids "$2" \
    --threads 4 --min "$1" "$T/req-model.json" "$T/req-probe.json" "$T/req-login.json"
  $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["failed"], d["conn"], d["total"] >= int(sys.argv[2]))' "$T/load.json" "$1"
}
metric() { curl -s "$URL/metrics" | sed -n "s/^$1 //p"; }
wait_log() { # wait_log TEXT: until the server's log has a line with TEXT (bounded)
  for _ in $(seq 1 300); do grep -qF -- "$1" "$LOG" && return 0; sleep 0.1; done
  return 1
}
# read_back IDS...: the log's ids (export) against the acknowledged ones:
# prints "same" when every acknowledged id is there once and nothing else is
read_back() {
  "$VD" snapshots export -s "$SNAP" >"$T/export" 2>"$T/export.err"
  $PY - "$T/export" "$@" <<'PYEOF'
import json, sys
seen = [json.loads(l)["id"] for l in open(sys.argv[1])]
want = set()
for f in sys.argv[2:]:
    want.update(l.strip() for l in open(f) if l.strip())
dup = len(seen) - len(set(seen))
missing = len(want - set(seen))
extra = len(set(seen) - want)
print("same" if not (dup or missing or extra) else "dup=%d missing=%d extra=%d" % (dup, missing, extra))
PYEOF
}

mkdir -p "$T/bundle"
for f in examples/policies/*; do cp -r "$f" "$T/bundle/"; done
echo '{"action":"http_request","context":{"method":"GET","path":"/products/espresso-grinder","client_ip":"81.2.69.160","headers":{"user-agent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 Safari/605.1.15"},"env":{"country":"GB"}}}' >"$T/req-model.json"
echo '{"action":"http_request","context":{"method":"GET","path":"/.env","client_ip":"81.2.69.160","headers":{"user-agent":"Mozilla/5.0"},"env":{"country":"GB"}}}' >"$T/req-probe.json"
echo '{"action":"login","context":{"ip":"203.0.113.7","user":"ana"}}' >"$T/req-login.json"

# ======== interval (the default): the queue absorbs the outage ========
start interval
eq "$(load 300 "$T/ids1")" "0 0 True" "before: 300 decisions, none failed"
for _ in $(seq 1 100); do
  [ "$(metric verdict_snapshot_queue_depth)" = 0 ] && [ "$(metric verdict_snapshots_written_total)" = "$(metric verdict_snapshots_appended_total)" ] && break
  sleep 0.1
done
eq "$(metric verdict_snapshot_write_errors_total)" 0 "before: no write error"
SEG=$(ls "$SNAP"/seg-*.log | tail -1)
SIZE=$(stat -c %s "$SEG")
[ "$SIZE" -gt 65536 ] && ok || bad "before: the segment holds 300 decisions ($SIZE bytes)"

# -- the disk refuses: writes past 64 KiB fail --
fsize 65536
eq "$(load 500 "$T/ids2")" "0 0 True" "disk refusing: 500 decisions, all answered"
wait_log '"event":"snapshot_write_failed"' && ok || bad "disk refusing: no snapshot_write_failed in the log"
has "$LOG" "File too large" "disk refusing: the log gives the writer's error"
E=$(metric verdict_snapshot_write_errors_total)
[ "${E:-0}" -gt 0 ] && ok || bad "disk refusing: /metrics counts write errors (got '$E')"
Q=$(metric verdict_snapshot_queue_depth)
[ "${Q:-0}" -gt 0 ] && ok || bad "disk refusing: /metrics shows snapshots waiting (got '$Q')"
eq "$(stat -c %s "$SEG")" "$SIZE" "disk refusing: the segment is not touched (failed writes cut back)"
eq "$(read_back "$T/ids1")" same "disk refusing: the log reads back exactly what was written before"
hasnt "$T/export.err" "skipped" "disk refusing: no damaged bytes"

# -- space returns --
fsize unlimited
wait_log '"event":"snapshot_write_recovered"' && ok || bad "space back: no snapshot_write_recovered in the log"
for _ in $(seq 1 300); do
  [ "$(metric verdict_snapshot_queue_depth)" = 0 ] && break
  sleep 0.1
done
eq "$(metric verdict_snapshot_queue_depth)" 0 "space back: the queue drains"
eq "$(load 100 "$T/ids3")" "0 0 True" "space back: 100 more decisions"
stop
eq "$(read_back "$T/ids1" "$T/ids2" "$T/ids3")" same "after: every acknowledged decision is in the log once"
hasnt "$T/export.err" "skipped" "after: no damaged bytes"
eq "$(grep -c . "$T/export")" "$(cat "$T/ids1" "$T/ids2" "$T/ids3" | grep -c .)" "after: as many snapshots as decisions"

# ======== always: no answer before the snapshot is on disk ========
start always --durability always
eq "$(load 200 "$T/a1")" "0 0 True" "always, before: 200 decisions"
fsize 4096
curl -s -o "$T/late.json" -w '%{http_code}' --max-time 120 "$URL/v1/decide" \
  --data-binary @"$T/req-probe.json" >"$T/late.code" &
CURL=$!
wait_log '"event":"snapshot_write_failed"' && ok || bad "always: no snapshot_write_failed in the log"
sleep 1
kill -0 "$CURL" 2>/dev/null && ok || bad "always: a decision was answered while its snapshot could not be written"
fsize unlimited
wait "$CURL"; CURL=
eq "$(cat "$T/late.code")" 200 "always, space back: the waiting decision is answered"
$PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["snapshot_id"])' "$T/late.json" >"$T/a2"
eq "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/snapshots/$(cat "$T/a2")")" 200 \
  "always, space back: its snapshot is on disk when it is answered"
stop
eq "$(read_back "$T/a1" "$T/a2")" same "always, after: every acknowledged decision is in the log once"

summary
[ "$fail" -eq 0 ]
