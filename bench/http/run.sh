#!/usr/bin/env bash
# run.sh — bench/http: `verdict serve` under wrk, next to the bare libuv +
# llhttp server (hello-http) in the same run, with snapshots off and on.
# Each server is started alone on a free loopback port, warmed up, then
# loaded by wrk with requests.lua (a rotation of the example requests) over
# keep-alive connections. Prints requests/s, p50/p99/p99.9 latency, the
# server's CPU seconds (from /proc) and the ratios to the bare server. A
# fourth row serves the same requests with a one-rule bundle: what verdict's
# HTTP side costs when deciding costs next to nothing.
#
#   bench/http/run.sh [BUILD_DIR]      (from the repo root; default build)
#
# Environment: CONNS (64), DURATION seconds (10), WARMUP seconds (2),
# THREADS server threads (2), WRK_THREADS (1), ROUNDS (1: each server once;
# more rotate the servers and report the median round), PIN=1 to pin the
# server to CPU 0 and wrk to CPU 1 (then use THREADS=1).
set -eu
BUILD=${1:-build}
V="$BUILD/verdict"
HELLO="$BUILD/hello-http"
CONNS=${CONNS:-64} DURATION=${DURATION:-10} WARMUP=${WARMUP:-2}
THREADS=${THREADS:-2} WRK_THREADS=${WRK_THREADS:-1} ROUNDS=${ROUNDS:-1} PIN=${PIN:-0}
HERE=$(cd "$(dirname "$0")" && pwd)
command -v wrk >/dev/null || { echo "run.sh: wrk is needed (apt-get install wrk)" >&2; exit 1; }
[ -x "$V" ] && [ -x "$HELLO" ] || { echo "run.sh: build first (make; $V and $HELLO)" >&2; exit 1; }
T=$(mktemp -d)
SPID=
cleanup() {
  if [ -n "$SPID" ]; then kill -TERM "$SPID" 2>/dev/null || true; wait "$SPID" 2>/dev/null || true; fi
  rm -rf "$T"
}
trap cleanup EXIT
REQS=""
for f in gate gate_mfa gate_scanner payment payment_card_testing routing agent_edit agent_rm agent_headless_install; do
  REQS="$REQS examples/requests/$f.json"
done
mkdir -p "$T/bundle" "$T/trivial"
for f in examples/policies/*; do cp -r "$f" "$T/bundle/"; done
cat >"$T/trivial/one_rule.yaml" <<'YAML'
strategy: one_rule
decision_points: [http_request, payment_authorization, storage_route, tool_call]
rules:
  - name: never
    if: request.key == "no such key"
    action: block
default: allow
on_no_candidate: first
YAML
SERVER_PIN="" WRK_PIN=""
if [ "$PIN" = 1 ]; then SERVER_PIN="taskset -c 0"; WRK_PIN="taskset -c 1"; fi

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# bench NAME: one server (hello, snapshots_off, snapshots_on), warmed up and
# measured; appends a row to $T/rows.
bench() {
  local name=$1
  local port; port=$(free_port)
  local cmd
  case $name in
    hello) cmd=("$HELLO" "$port" "$THREADS") ;;
    snapshots_off) cmd=("$V" serve -p "$T/bundle" --no-store --no-snapshots -t "$THREADS" --listen "127.0.0.1:$port") ;;
    snapshots_on) rm -rf "$T/snap"
      cmd=("$V" serve -p "$T/bundle" --no-store --snapshots "$T/snap" -t "$THREADS" --listen "127.0.0.1:$port") ;;
    one_rule) cmd=("$V" serve -p "$T/trivial" --no-store --no-snapshots -t "$THREADS" --listen "127.0.0.1:$port") ;;
  esac
  # shellcheck disable=SC2086
  $SERVER_PIN "${cmd[@]}" 2>"$T/$name.log" &
  SPID=$!
  for _ in $(seq 1 100); do
    curl -s -o /dev/null -d @examples/requests/gate.json "http://127.0.0.1:$port/v1/decide" && break
    sleep 0.1
  done
  # shellcheck disable=SC2086
  $WRK_PIN wrk -t"$WRK_THREADS" -c"$CONNS" -d"${WARMUP}s" -s "$HERE/requests.lua" \
    "http://127.0.0.1:$port" -- $REQS >/dev/null
  local t0; t0=$(cpu_ticks "$SPID")
  # shellcheck disable=SC2086
  $WRK_PIN wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DURATION}s" -s "$HERE/requests.lua" \
    "http://127.0.0.1:$port" -- $REQS >"$T/$name.wrk"
  local t1; t1=$(cpu_ticks "$SPID")
  kill -TERM "$SPID"; wait "$SPID" || true; SPID=
  local line; line=$(grep '^RESULT' "$T/$name.wrk")
  echo "$name $(( (t1 - t0) )) $line" >>"$T/rows"
}

echo "bench/http: $CONNS connections, ${DURATION}s (+${WARMUP}s warm-up), $THREADS server thread(s), $WRK_THREADS wrk thread(s), pin=$PIN, $(nproc) CPUs, rounds=$ROUNDS"
for r in $(seq 1 "$ROUNDS"); do
  bench hello
  bench snapshots_off
  bench snapshots_on
  bench one_rule
done

TICK=$(getconf CLK_TCK)
python3 - "$T/rows" "$DURATION" "$TICK" <<'PY'
import sys, statistics, re
rows = {}
for line in open(sys.argv[1]):
    parts = line.split()
    name, ticks = parts[0], int(parts[1])
    kv = dict(p.split("=") for p in parts[3:])
    rows.setdefault(name, []).append((int(kv["rps"]), int(kv["p50_us"]), int(kv["p99_us"]),
                                      int(kv["p999_us"]), int(kv["errors"]), ticks))
dur, tick = float(sys.argv[2]), float(sys.argv[3])
def med(name):
    rs = sorted(rows[name], key=lambda r: r[0])
    return rs[len(rs) // 2]
base = med("hello")
labels = {"hello": "bare libuv+llhttp (hello-http)", "snapshots_off": "verdict serve --no-snapshots",
          "snapshots_on": "verdict serve (snapshots on)",
          "one_rule": "verdict serve, one-rule bundle, --no-snapshots"}
print("| server | req/s | p50 µs | p99 µs | p99.9 µs | errors | server CPU s | req per CPU-s | req/s vs bare |")
print("|---|---|---|---|---|---|---|---|---|")
for name in ("hello", "snapshots_off", "snapshots_on", "one_rule"):
    rps, p50, p99, p999, err, ticks = med(name)
    cpu = ticks / tick
    per = rps * dur / cpu if cpu else 0
    print("| %s | %d | %d | %d | %d | %d | %.1f | %d | %.2f (bare is %.2fx) |" % (
        labels[name], rps, p50, p99, p999, err, cpu, per, rps / base[0], base[0] / rps))
PY
