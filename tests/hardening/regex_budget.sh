#!/usr/bin/env bash
# regex_budget.sh — regular-expression work is paid from the decision's
# cost budget (issue 19): a rule `string(x).matches("^(a+)+$")` over a
# 900 KB request of 30,000 backtracking strings used to stop each match at
# its own limit, charge 5 units for it and run for seconds. Now the budget
# stops it: through the CLI the decision takes the strategy's on_error with
# the cost limit as the reason (not the match limit); through `verdict
# serve` two such requests at once leave a normal request answered. No time
# is measured: curl's --max-time only catches a hang. Run from the repo
# root with the build folder as $1.
set -u
BUILD=${1:?usage: regex_budget.sh BUILD_DIR}
V="$BUILD/verdict"
PY=/usr/bin/python3
TEST_NAME=hardening/regex_budget
. tests/lib.sh
scratch
need curl

mkdir -p "$T/bundle"
cat >"$T/bundle/redos.yaml" <<'YAML'
strategy: redos
rules:
  - name: backtrack
    if: request.context.list.exists(x, string(x).matches("^(a+)+$"))
    action: deny
  - name: probe
    if: request.context.path.matches("^/(\\.env|\\.git)")
    action: deny
default: allow
on_error: {action: review, reason: "could not evaluate"}
actions:
  allow: true
  deny: false
  review: {allowed: false, review: true}
YAML
$PY -c 'import json, sys
json.dump({"action": "redos", "context": {"list": ["a" * 25 + "!"] * 30000}}, open(sys.argv[1], "w"))' "$T/redos.json"
echo '{"action":"redos","context":{"list":["ok"],"path":"/.env"}}' >"$T/normal.json"

# ---- the CLI: on_error, stopped by the budget ----
timeout 120 "$V" decide -p "$T/bundle" --no-store --no-snapshots --trace "$T/redos.json" >"$T/out" 2>&1
eq "$?" 0 "CLI: decided"
has "$T/out" '"action":"review"' "CLI: on_error decides"
has "$T/out" '"source":"error"' "CLI: an error decision"
has "$T/out" "cost limit exceeded" "CLI: the budget stopped it"
hasnt "$T/out" "match limit" "CLI: not the per-call match limit"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["trace"]["cost"] > 1000000)' "$T/out" >"$T/c"
eq "$(cat "$T/c")" True "CLI: the work charged went past the budget of 1,000,000"

# ---- the server: two at once, and a normal request is answered ----
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
"$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 2 --no-snapshots --no-store \
  2>"$T/log" &
PID=$!
wait_ready serve "$T/log"
for i in 1 2; do
  curl -s --max-time 120 "$URL/v1/decide" --data-binary @"$T/redos.json" >"$T/r$i" &
  eval "C$i=\$!"
done
curl -s --max-time 120 "$URL/v1/decide" --data-binary @"$T/normal.json" >"$T/n"
has "$T/n" '"action":"deny"' "serve: the normal request is answered"
has "$T/n" '"rule":"probe"' "serve: by its rule"
wait "$C1" "$C2"
for i in 1 2; do
  has "$T/r$i" '"action":"review"' "serve: hostile request $i takes on_error"
  has "$T/r$i" "cost limit exceeded" "serve: hostile request $i stopped by the budget"
done
stop

summary
[ "$fail" -eq 0 ]
