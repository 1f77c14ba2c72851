#!/bin/sh
# run.sh [BUILD_DIR] — bench/bindings: the four-rule gate over the same
# 100,000 generated requests (requests.js) through every way in, one lane
# after the other in one run, and a table of ns per decision with each
# lane's ratio to the C call:
#   C vd_decide_json (bindings-c-lane), Python decide(dict) (py_decide.py),
#   Node decide(obj), decide(JSON string), decideAsync (node_decide.js),
#   @marcbachmann/cel-js on the same objects (celjs_decide.mjs; installed
#   with npm into the scratch folder, skipped when npm cannot), and an HTTP
#   round trip to `verdict serve` on loopback (http_decide.js, 10,000).
# Needs the build (cmake --build BUILD_DIR) and `make bindings`. The load
# average is printed before and after: the figures are only comparable
# within one run.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-$HERE/../../build}" && pwd)
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/verdict-bench-bindings-XXXXXX")
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$SCRATCH"
}
trap cleanup EXIT INT TERM
mkdir -p "$SCRATCH/bundle"
node -e 'process.stdout.write(require(process.argv[1]).POLICY)' "$HERE/requests.js" \
  > "$SCRATCH/bundle/gate.yaml"
node "$HERE/requests.js" > "$SCRATCH/requests.jsonl"
OUT="$SCRATCH/lanes.jsonl"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BUILD/bindings-c-lane" "$SCRATCH/requests.jsonl" "$SCRATCH/bundle" >> "$OUT"
if ls "$BUILD"/python/verdict*.so >/dev/null 2>&1; then
  VERDICT_BUILD_DIR="$BUILD" /usr/bin/python3 "$HERE/py_decide.py" "$SCRATCH/requests.jsonl" \
    "$SCRATCH/bundle" >> "$OUT"
else
  echo "python lane skipped: no module in $BUILD/python (make bindings)" >&2
fi
VERDICT_BUILD_DIR="$BUILD" node "$HERE/node_decide.js" "$SCRATCH/requests.jsonl" \
  "$SCRATCH/bundle" >> "$OUT"
if (cd "$SCRATCH" && npm install --silent --no-audit --no-fund --no-save \
      @marcbachmann/cel-js@8 >/dev/null 2>&1); then
  node "$HERE/celjs_decide.mjs" "$SCRATCH/requests.jsonl" \
    "$SCRATCH/node_modules/@marcbachmann/cel-js" >> "$OUT"
else
  echo "cel-js lane skipped: npm could not install @marcbachmann/cel-js" >&2
fi
PORT=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
"$BUILD/verdict" serve -p "$SCRATCH/bundle" -l "127.0.0.1:$PORT" --no-snapshots -t 1 \
  2> "$SCRATCH/serve.log" &
PID=$!
for _ in $(seq 1 100); do
  if node -e 'require("http").get(process.argv[1],r=>process.exit(r.statusCode===200?0:1)).on("error",()=>process.exit(1))' \
       "http://127.0.0.1:$PORT/readyz"; then break; fi
  sleep 0.1
done
node "$HERE/http_decide.js" "$SCRATCH/requests.jsonl" "http://127.0.0.1:$PORT" >> "$OUT"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
node -e '
const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
const c = rows.find((r) => r.lane.startsWith("C "));
const pad = (s, n) => String(s).padStart(n);
console.log("| lane | ns/decision (wall) | ratio to C | CPU ns/decision | CPU ratio to C |");
console.log("|---|---:|---:|---:|---:|");
for (const r of rows) {
  const cpu = r.cpu_ns_per_decision;
  console.log(`| ${r.lane} | ${r.ns_per_decision} | ${(r.ns_per_decision / c.ns_per_decision).toFixed(2)}× | ` +
              `${cpu === undefined ? "–" : cpu} | ` +
              `${cpu === undefined ? "–" : (cpu / c.cpu_ns_per_decision).toFixed(2) + "×"} |`);
}' "$OUT"
