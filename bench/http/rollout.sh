#!/usr/bin/env bash
# rollout.sh — bench/http: what a shadow costs the live answers. In one run,
# at the same offered load (paced.lua: every connection waits PACE_MS before
# each request), `verdict serve` on the example bundle with snapshots on,
# alone and then with a shadow of the same size (a copy of the bundle with
# one threshold changed, so some decisions differ), rotated ROUNDS times;
# prints wrk's p50/p99 for both, the shadow's compared and dropped counts,
# and the ratio of the median p99s (issue 23: at most 1.15).
#
#   bench/http/rollout.sh [BUILD_DIR]   (from the repo root; default build)
#
# Environment: CONNS (32), PACE_MS (4), DURATION seconds (10), WARMUP (2),
# THREADS server threads (2), ROUNDS (3).
set -eu
BUILD=${1:-build}
V="$BUILD/verdict"
CONNS=${CONNS:-32} PACE_MS=${PACE_MS:-4} DURATION=${DURATION:-10} WARMUP=${WARMUP:-2}
THREADS=${THREADS:-2} ROUNDS=${ROUNDS:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
export BENCH_HTTP=$HERE PACE_MS
command -v wrk >/dev/null || { echo "rollout.sh: wrk is needed (apt-get install wrk)" >&2; exit 1; }
[ -x "$V" ] || { echo "rollout.sh: build first ($V)" >&2; exit 1; }
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
mkdir -p "$T/live" "$T/shadow"
for f in examples/policies/*; do cp -r "$f" "$T/live/"; cp -r "$f" "$T/shadow/"; done
# the candidate: the same bundle, one review threshold lowered
sed -i 's/amount >= 1000.0 ? 25/amount >= 200.0 ? 25/' "$T/shadow/payment_fraud.yaml"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }

bench() { # bench NAME [serve args...]
  local name=$1; shift
  local port; port=$(free_port)
  rm -rf "$T/snap" "$T/versions"
  "$V" serve -p "$T/live" --snapshots "$T/snap" -t "$THREADS" --listen "127.0.0.1:$port" "$@" \
    2>"$T/$name.log" &
  SPID=$!
  for _ in $(seq 1 100); do
    curl -s -o /dev/null -d @examples/requests/gate.json "http://127.0.0.1:$port/v1/decide" && break
    sleep 0.1
  done
  # shellcheck disable=SC2086
  wrk -t1 -c"$CONNS" -d"${WARMUP}s" -s "$HERE/paced.lua" "http://127.0.0.1:$port" -- $REQS >/dev/null
  # shellcheck disable=SC2086
  wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$HERE/paced.lua" "http://127.0.0.1:$port" -- $REQS \
    >"$T/$name.wrk"
  local c d
  c=$(metric "$port" verdict_rollout_compared_total) d=$(metric "$port" verdict_rollout_dropped_total)
  kill -TERM "$SPID"; wait "$SPID" || true; SPID=
  echo "$name $(grep '^RESULT' "$T/$name.wrk") compared=${c:-0} dropped=${d:-0}" >>"$T/rows"
}

echo "bench/http/rollout: $CONNS connections paced at ${PACE_MS} ms, ${DURATION}s (+${WARMUP}s), $THREADS server threads, $(nproc) CPUs, rounds=$ROUNDS"
for r in $(seq 1 "$ROUNDS"); do
  bench live
  bench shadow --shadow "$T/shadow"
done
python3 - "$T/rows" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    p = line.split()
    kv = dict(x.split("=") for x in p[2:])
    rows.setdefault(p[0], []).append(kv)
print("| server | rounds | req/s | p50 µs | p99 µs (median) | p99 µs (each round) | compared | dropped |")
print("|---|---|---|---|---|---|---|---|")
med = {}
for name in ("live", "shadow"):
    rs = rows[name]
    p99s = [int(r["p99_us"]) for r in rs]
    med[name] = statistics.median(p99s)
    print("| %s | %d | %d | %d | %d | %s | %s | %s |" % (
        "live alone" if name == "live" else "live + shadow", len(rs),
        statistics.median(int(r["rps"]) for r in rs), statistics.median(int(r["p50_us"]) for r in rs),
        med[name], " ".join(map(str, p99s)),
        " ".join(r["compared"] for r in rs), " ".join(r["dropped"] for r in rs)))
print("p99 with the shadow / without: %.2f" % (med["shadow"] / med["live"]))
PY
