#!/usr/bin/env bash
# prometheus.sh — /metrics as a real Prometheus reads it: the exposition
# passes `promtool check metrics` (idle, and after load and a review
# outcome); a Prometheus server on loopback (a scratch folder, its own free
# port, a 1 s scrape interval, stopped at the end) scrapes `verdict serve`
# while wrk sends it the example gate traffic (`verdict gen`); over the
# decide histogram histogram_quantile(0.5, ...) is below 50 µs (the lowest
# bucket before the buckets started at 1 µs, so a median below it could not
# be read; under the sanitizers only read) and histogram_quantile(0.99, ...)
# is finite; and every PromQL
# expression of integrations/grafana/verdict.json is accepted by the same
# Prometheus and returns data.
set -u
BUILD=${1:?usage: prometheus.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl python3 wrk prometheus promtool
PROM=
on_exit() { kill_wait TERM "$PROM"; }

TOKEN=verdict-test-token-$RANDOM-$RANDOM-0123456789
printf '%s\n' "$TOKEN" >"$T/token"
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
"$V" serve --policy examples/policies --listen "127.0.0.1:$PORT" --threads 2 --snapshots "$T/snap" \
  --admin-token-file "$T/token" 2>"$T/serve.log" &
PID=$!
wait_ready serve "$T/serve.log"

curl -s "$URL/metrics" >"$T/idle.txt"
promtool check metrics <"$T/idle.txt" >"$T/lint.txt" 2>&1
eq "$?" 0 "promtool check metrics: idle"
sed 's/^/  lint: /' "$T/lint.txt" >&2

PPORT=$(free_port)
cat >"$T/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: verdict
    static_configs:
      - targets: ['127.0.0.1:$PORT']
YML
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
  --web.listen-address="127.0.0.1:$PPORT" >"$T/prom.log" 2>&1 &
PROM=$!
PURL="http://127.0.0.1:$PPORT"
for _ in $(seq 1 300); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$PURL/-/ready")" = 200 ] && break
  kill -0 "$PROM" 2>/dev/null || break
  sleep 0.1
done
if [ "$(curl -s -o /dev/null -w '%{http_code}' "$PURL/-/ready")" = 200 ]; then ok; else
  bad "prometheus did not become ready"; tail -20 "$T/prom.log" >&2; summary; exit 1
fi

# the load: the example gate traffic, round and round, for 6 s
"$V" gen --kind gate --count 2000 --seed 5 >"$T/gate.jsonl" 2>/dev/null
cat >"$T/gate.lua" <<'LUA'
local reqs = {}
local i = 0
init = function(args)
  for line in io.lines(args[1]) do
    reqs[#reqs + 1] = wrk.format("POST", "/v1/decide", {["Content-Type"] = "application/json"}, line)
  end
end
request = function()
  i = i % #reqs + 1
  return reqs[i]
end
LUA
wrk -t1 -c2 -d6s -s "$T/gate.lua" "$URL" -- "$T/gate.jsonl" >"$T/wrk.txt" 2>&1
has "$T/wrk.txt" "Requests/sec" "wrk ran"
hasnt "$T/wrk.txt" "Non-2xx" "every decision answered 200"

# one review outcome, so that the review series have data too
ID=$(curl -s "$URL/v1/reviews?limit=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["reviews"][0]["snapshot_id"])')
eq "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
  -d '{"action":"allow","note":"prometheus test"}' "$URL/v1/reviews/$ID")" 200 "a review outcome"
curl -s "$URL/metrics" >"$T/loaded.txt"
promtool check metrics <"$T/loaded.txt" >"$T/lint2.txt" 2>&1
eq "$?" 0 "promtool check metrics: after load and a review"
sed 's/^/  lint: /' "$T/lint2.txt" >&2
# Every query from one python: the decide quantiles, then each expression of
# the Grafana dashboard (Grafana's variables filled in as a dashboard in use
# fills them: every strategy, a rate window over several scrapes; the
# strategy variable's label_values(metric, label), Grafana's own, as the
# series it reads). It waits first for three scrapes that have the review
# outcome (increase() and rate() need two).
# Prints one "ok|FAIL what" line a check, and the figures.
# Under ASan+UBSan (a Debug build checking every access) a decision takes
# about ten times as long: there the median is only required to be read
# (finite, inside the buckets), not to be below 50 µs.
SAN=0
grep -q 'VD_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && SAN=1
python3 - "$PURL" integrations/grafana/verdict.json "$SAN" >"$T/checks.txt" 2>&1 <<'PY'
import json, math, re, sys, time, urllib.error, urllib.parse, urllib.request
purl, dash, san = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
def query(e):
    u = purl + "/api/v1/query?" + urllib.parse.urlencode({"query": e})
    try:
        with urllib.request.urlopen(u, timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as err:
        return json.load(err)
def check(cond, what):
    print(("ok " if cond else "FAIL ") + what)
def scalar(e):
    r = query(e)["data"]["result"]
    return float(r[0]["value"][1]) if r else float("nan")
for _ in range(100):
    if query("count_over_time(verdict_review_outcomes_total[1m]) >= 3")["data"]["result"]:
        break
    time.sleep(0.1)
n = scalar('sum(verdict_decide_duration_seconds_count{strategy="request_gate"})')
check(n >= 1000, "decisions seen by Prometheus: %g" % n)
w = 'rate(verdict_decide_duration_seconds_bucket{strategy="request_gate"}[30s])'
p50 = scalar("histogram_quantile(0.5, sum by (le) (%s))" % w)
p99 = scalar("histogram_quantile(0.99, sum by (le) (%s))" % w)
print("figures: decide p50 %.3g s, p99 %.3g s over %d decisions" % (p50, p99, n))
if san:
    check(0 < p50 < 1, "decide p50 read (a sanitizer build: not held to 50 us): %g" % p50)
else:
    check(0 < p50 < 50e-6, "decide p50 below 50 us: %g" % p50)
check(math.isfinite(p99) and p99 > 0, "decide p99 finite: %g" % p99)
h99 = scalar('histogram_quantile(0.99, sum by (le) (rate(verdict_http_request_duration_seconds_bucket{strategy="request_gate"}[30s])))')
check(math.isfinite(h99) and h99 > 0, "HTTP request p99 of the gate's decisions finite: %g" % h99)
d = json.load(open(dash))
def walk(x):
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "expr" and isinstance(v, str):
                yield v
            else:
                yield from walk(v)
    elif isinstance(x, list):
        for v in x:
            yield from walk(v)
exprs = [e.replace("$__rate_interval", "30s").replace('=~"$strategy"', '=~".*"') for e in walk(d)]
for v in d["templating"]["list"]:
    m = re.match(r"label_values\((\w+), *(\w+)\)", v.get("definition", ""))
    if m:
        exprs.append("count by (%s) (%s)" % (m.group(2), m.group(1)))
check(len(exprs) >= 20, "the dashboard's expressions: %d" % len(exprs))
check(not any("$" in e for e in exprs), "every Grafana variable filled in")
for e in exprs:
    r = query(e)
    check(r.get("status") == "success", "dashboard: %s: %s" % (e, r.get("error", "success")))
    check(r.get("status") == "success" and len(r["data"]["result"]) >= 1, "dashboard: data for %s" % e)
PY
eq "$?" 0 "the queries ran"
while IFS= read -r line; do
  case $line in
    "ok "*) ok ;;
    "FAIL "*) bad "${line#FAIL }" ;;
    "figures: "*) echo "prometheus.sh: ${line#figures: } (wrk: $(grep Requests/sec "$T/wrk.txt"))" >&2 ;;
    *) bad "query script: $line" ;;
  esac
done <"$T/checks.txt"

kill_wait TERM "$PROM"; PROM=
stop
summary
[ "$fail" -eq 0 ]
