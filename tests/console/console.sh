#!/usr/bin/env bash
# console.sh — the console (/console) in a real browser: Debian's chromium
# driven by npm's playwright-core (tests/console/package.json, installed here
# with `npm ci` into tests/console/node_modules), against a `verdict serve`
# kept under load by wrk for the whole run. console.mjs checks that the page
# has no script errors, that the decision count and the p99 move, that the
# filters of the recent decisions work, that a snapshot id typed in (one
# this test decided) shows its rule, and that the admin token typed into the
# page (the server reads decisions for the token alone) goes in a header,
# never a URL, cookie or storage. Screenshots go to BUILD_DIR/console/;
# with VERDICT_DOCS_SCREENSHOT=1 the full-page one is copied to
# docs/console.png. Fails, saying why, when npm cannot install playwright-core.
set -u
BUILD=${1:?usage: console.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl node npm wrk python3
CHROMIUM_BIN=$(command -v chromium || true)
[ -n "$CHROMIUM_BIN" ] || { echo "console.sh: chromium is needed (scripts/deps --test)" >&2; exit 1; }
on_exit() {
  kill_wait TERM "$LOAD"
  kill_wait TERM "$PID"
  PID=
}
LOAD=

# playwright-core, pinned by package-lock.json; one installer at a time
DIR=tests/console
if [ ! -f "$DIR/node_modules/playwright-core/package.json" ]; then
  (
    flock 9
    [ -f "$DIR/node_modules/playwright-core/package.json" ] ||
      (cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error >"$T/npm.log" 2>&1)
  ) 9>"${TMPDIR:-/tmp}/verdict-console-npm.lock"
  if [ ! -f "$DIR/node_modules/playwright-core/package.json" ]; then
    echo "console.sh: npm ci of playwright-core failed (is the npm registry reachable?):" >&2
    tail -n 5 "$T/npm.log" >&2
    exit 1
  fi
fi

mkdir -p "$T/bundle"
for f in examples/policies/*; do cp -r "$f" "$T/bundle/"; done
TOKEN=console-test-token-$RANDOM$RANDOM
echo "$TOKEN" >"$T/token"
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
# reads of recorded decisions need the token, even from loopback: the page
# must send it
"$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --snapshots "$T/snap" --no-store \
  --admin-token-file "$T/token" --snapshot-reads admin 2>"$T/log" &
PID=$!
wait_ready console "$T/log"

# every decision from here on falls in a second the live figures keep: wait
# for the first one folded
for _ in $(seq 1 50); do
  curl -s "$URL/v1/stats" | grep -q '"t":\[[0-9]' && break
  sleep 0.1
done

# the load: the rotation of example requests bench/http uses, on 4 connections
wrk -t1 -c4 -d120s -s bench/http/requests.lua "$URL" -- examples/requests/gate.json \
  examples/requests/gate_mfa.json examples/requests/gate_scanner.json \
  examples/requests/payment.json examples/requests/payment_card_testing.json \
  examples/requests/routing.json >"$T/wrk.log" 2>&1 &
LOAD=$!

# a decision of the test's own, to be typed into the viewer
curl -s "$URL/v1/decide" -d @examples/requests/gate_mfa.json >"$T/mine.json"
read -r ID RULE < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["snapshot_id"], d["reason"]["rule"])' "$T/mine.json")
[ -n "$ID" ] && ok || bad "a decision with a snapshot id: $(head -c 300 "$T/mine.json")"

# /v1/stats and /v1/stats/recent as other tools read them
sleep 3
curl -s "$URL/v1/stats?seconds=60" >"$T/stats.json"
python3 - "$T/stats.json" <<'PY' && ok || bad "/v1/stats: the figures of the load"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["window_s"] == 900 and len(s["t"]) == len(s["decisions"]) > 0, s["t"]
assert s["totals"]["decisions"] == sum(s["decisions"]) > 0, s["totals"]
st = s["strategies"]
assert "request_gate" in st and "payment_fraud" in st, list(st)
g = st["request_gate"]
assert len(g["p99_us"]) == len(s["t"]) and any(v for v in g["p99_us"] if v), g["p99_us"]
assert all(p50 <= p99 for p50, p99 in zip(g["p50_us"], g["p99_us"]) if p50 is not None)
assert sum(s["sources"]["rule"]) > 0 and sum(s["actions"]["allow"]) > 0
assert s["version"]["shadow"] is None and len(s["version"]["live"]) == 64
PY
curl -s -H "Authorization: Bearer $TOKEN" "$URL/v1/stats/recent?strategy=request_gate&limit=5" >"$T/recent.json"
python3 - "$T/recent.json" <<'PY' && ok || bad "/v1/stats/recent?strategy=request_gate"
import json, sys
r = json.load(open(sys.argv[1]))
d = r["decisions"]
assert 0 < len(d) <= 5 and all(x["strategy"] == "request_gate" for x in d), d
assert r["snapshot_ids"]["shown"] and all(len(x["snapshot_id"]) == 36 for x in d)
assert [x["time"] for x in d] == sorted((x["time"] for x in d), reverse=True)
PY
curl -s "$URL/v1/stats/recent?limit=3" >"$T/hidden.json"
python3 - "$T/hidden.json" <<'PY' && ok || bad "/v1/stats/recent without the token: ids hidden"
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r["decisions"]) == 3 and all(x["snapshot_id"] is None for x in r["decisions"]), r
assert r["snapshot_ids"]["shown"] is False and "admin token" in r["snapshot_ids"]["why"], r
PY
eq "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/stats?seconds=0")" 400 "seconds=0 refused"
eq "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/stats/recent?review=maybe")" 400 "review=maybe refused"
eq "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/stats")" 405 "POST /v1/stats"
eq "$(curl -s -o /dev/null -w '%{http_code}' "$URL/console/nothing.js")" 404 "an unknown console file"
curl -s -D "$T/h" -o /dev/null "$URL/console/console.js"
has "$T/h" "Content-Security-Policy: default-src 'none'; script-src 'self'" "the console's CSP"
has "$T/h" "text/javascript" "console.js's type"

# decisions by other doors count too: a batch (one element refused), authz
curl -s "$URL/v1/decide/batch" -d "[$(cat examples/requests/gate.json), {\"action\": 1}]" >"$T/batch.json"
has "$T/batch.json" '"index":1' "the batch's bad element refused"
curl -s -o /dev/null -H 'X-Original-URI: /wp-login.php' -H 'X-Real-IP: 81.2.69.160' \
  "$URL/v1/authz?point=http_request"

OUT="$BUILD/console"
mkdir -p "$OUT"
if node "$DIR/console.mjs" "$URL" "$ID" "$RULE" "$OUT" "$TOKEN" >"$T/browser.log" 2>&1; then
  ok
else
  bad "the console in Chromium"
fi
grep -c '^ok ' "$T/browser.log" >/dev/null && pass=$((pass + $(grep -c '^ok ' "$T/browser.log")))
grep '^FAIL\|Error' "$T/browser.log" | head -20 | sed 's/^/  browser: /' >&2
[ -s "$OUT/console.png" ] && ok || bad "a screenshot at $OUT/console.png"
if [ "${VERDICT_DOCS_SCREENSHOT:-}" = 1 ] && [ -s "$OUT/console.png" ]; then
  cp "$OUT/console.png" docs/console.png
fi
kill -0 "$PID" 2>/dev/null && ok || bad "the server lived through the run"

# With the load stopped, every decision and refusal /metrics counted is in
# /v1/stats once its second is folded: none lost, none twice.
kill_wait TERM "$LOAD"
LOAD=
counts() {
  curl -s "$URL/metrics" | awk '/^verdict_decisions_total/ {d += $NF} /^verdict_decide_refused_total/ {r = $NF} END {printf "%d %d", d, r}'
  curl -s "$URL/v1/stats" | python3 -c 'import json,sys; t=json.load(sys.stdin)["totals"]; print("", t["decisions"], t["refused"])'
}
for _ in $(seq 1 50); do
  read -r md mr sd sr < <(counts)
  [ "$md $mr" = "$sd $sr" ] && break
  sleep 0.1
done
eq "$sd $sr" "$md $mr" "/v1/stats totals (decisions, refused) = /metrics"
[ "${mr:-0}" -ge 1 ] && ok || bad "a refusal was counted: $mr"

summary
[ "$fail" = 0 ]
