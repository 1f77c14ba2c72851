#!/usr/bin/env bash
# prometheus.sh — /metrics as a real Prometheus reads it: the exposition
# passes `promtool check metrics` (idle, and after load and a review
# outcome); a Prometheus server on loopback (a scratch folder, its own free
# port, a 1 s scrape interval, stopped at the end) scrapes `verdict serve`
# while wrk sends it the example gate traffic (`verdict gen`); over the
# decide histogram histogram_quantile(0.5, ...) is below 50 µs (the lowest
# bucket before the buckets started at 1 µs, so a median below it could not
# be read) and histogram_quantile(0.99, ...) is finite; and every PromQL
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

# the load: the example gate traffic, round and round, for 10 s
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
wrk -t1 -c2 -d10s -s "$T/gate.lua" "$URL" -- "$T/gate.jsonl" >"$T/wrk.txt" 2>&1
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
sleep 3 # a few scrapes after the outcome

# q EXPR: the instant query's result as JSON in $T/q.json, "success" or the error printed
q() {
  curl -s -G "$PURL/api/v1/query" --data-urlencode "query=$1" >"$T/q.json"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["status"], d.get("error",""))' "$T/q.json"
}
value() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["data"]["result"]; print(r[0]["value"][1] if r else "none")' "$T/q.json"; }

eq "$(q 'sum(verdict_decide_duration_seconds_count{strategy="request_gate"})' | cut -d' ' -f1)" success "the decisions were scraped"
DECIDED=$(value)
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 1000 else 1)' "$DECIDED" && ok || bad "decisions seen by Prometheus: $DECIDED"
W='[30s]'
q "histogram_quantile(0.5, sum by (le) (rate(verdict_decide_duration_seconds_bucket{strategy=\"request_gate\"}$W)))" >/dev/null
P50=$(value)
q "histogram_quantile(0.99, sum by (le) (rate(verdict_decide_duration_seconds_bucket{strategy=\"request_gate\"}$W)))" >/dev/null
P99=$(value)
echo "prometheus.sh: decide p50 ${P50}s, p99 ${P99}s over $DECIDED decisions (wrk: $(grep Requests/sec "$T/wrk.txt"))" >&2
python3 -c 'import sys; v=float(sys.argv[1]); sys.exit(0 if 0 < v < 50e-6 else 1)' "$P50" && ok ||
  bad "decide p50 below 50 µs: $P50"
python3 -c 'import sys,math; v=float(sys.argv[1]); sys.exit(0 if math.isfinite(v) and v > 0 else 1)' "$P99" && ok ||
  bad "decide p99 finite: $P99"
q "histogram_quantile(0.99, sum by (le) (rate(verdict_http_request_duration_seconds_bucket{strategy=\"request_gate\"}$W)))" >/dev/null
python3 -c 'import sys,math; v=float(sys.argv[1]); sys.exit(0 if math.isfinite(v) and v > 0 else 1)' "$(value)" && ok ||
  bad "HTTP request p99 for the gate's decisions finite: $(value)"

# ---- the Grafana dashboard ----
DASH=integrations/grafana/verdict.json
python3 - "$DASH" >"$T/exprs.txt" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
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
# Grafana's variables as a dashboard in use fills them in: every strategy,
# a rate window over several scrapes
for e in walk(d):
    e = e.replace("$__rate_interval", "30s").replace('=~"$strategy"', '=~".*"')
    print(e.replace("\n", " "))
# the strategy variable's label_values(metric, label) is Grafana's: the series it reads
for v in d["templating"]["list"]:
    m = re.match(r"label_values\((\w+), *(\w+)\)", v.get("definition", ""))
    if m:
        print("count by (%s) (%s)" % (m.group(2), m.group(1)))
PY
NEXPR=$(wc -l <"$T/exprs.txt")
if [ "$NEXPR" -ge 20 ]; then ok; else bad "the dashboard's expressions: $NEXPR"; fi
while IFS= read -r e; do
  st=$(q "$e")
  eq "${st%% *}" success "dashboard: $e"
  n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["data"]["result"]))' "$T/q.json" 2>/dev/null || echo 0)
  if [ "$n" -ge 1 ]; then ok; else bad "dashboard: no data for $e"; fi
done <"$T/exprs.txt"
if grep -q '\$' "$T/exprs.txt"; then bad "a Grafana variable left unreplaced"; else ok; fi

kill_wait TERM "$PROM"; PROM=
stop
summary
[ "$fail" -eq 0 ]
