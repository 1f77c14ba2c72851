#!/usr/bin/env bash
# cli.sh — `verdict decide`, `verdict check` and `verdict test` as a user
# meets them: outputs, error messages and exit codes (0 done, 1 the work
# failed, 2 bad usage). Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: cli.sh BUILD_DIR}
V="$BUILD/verdict"
B=tests/engine/bundles
TEST_NAME=engine/cli.sh
. tests/lib.sh
scratch
# expect_rc WANT DESCRIPTION -- command...: runs it with stdout in $T/out,
# stderr in $T/err.
expect_rc() {
  local want=$1 what=$2; shift 3
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ "$rc" = "$want" ]; then ok; else
    bad "$what: exit $rc, want $want"; sed 's/^/  out: /' "$T/out" | head -20 >&2
    sed 's/^/  err: /' "$T/err" | head -20 >&2
  fi
}
hasnt() {
  if grep -qF -- "$2" "$1"; then bad "$3: unexpected '$2'"; else ok; fi
}
lines() { # lines FILE N DESCRIPTION
  local n; n=$(wc -l <"$1")
  if [ "$n" = "$2" ]; then ok; else bad "$3: $n lines, want $2"; fi
}

SCAN='{"action":"gate","context":{"path":"/","headers":{"user-agent":"sqlmap"},"body_size":1,"env":{}}}'
PLAIN='{"action":"gate","context":{"path":"/","headers":{"user-agent":"curl"},"body_size":1,"env":{"country":"US"}}}'

# ---- decide ----
echo "$SCAN" >"$T/scan.json"
expect_rc 0 "decide a file" -- "$V" decide --no-store --no-snapshots --policy $B/gate "$T/scan.json"
has "$T/out" '{"action":"block","allowed":false,"review":false,"confidence":1.0,"source":"rule","reason":{"rule":"scanners","message":"known vulnerability scanner"},"strategy":"gate","policy_version":"' "decide output"
has "$T/out" '"model_version":null,"latency_us":' "decide output"
hasnt "$T/out" '"trace"' "no trace unless asked"
lines "$T/out" 1 "one decision"

echo "$PLAIN" | expect_rc 0 "decide stdin" -- "$V" decide --no-store --no-snapshots -p $B/gate
has "$T/out" '"source":"default"' "decide from stdin"
echo "$PLAIN" | expect_rc 0 "decide -" -- "$V" decide --no-store --no-snapshots -p $B/gate -
has "$T/out" '"action":"allow"' "decide from -"

expect_rc 0 "decide --trace" -- "$V" decide --no-store --no-snapshots --policy=$B/gate --trace "$T/scan.json"
has "$T/out" '"trace":{"rules":[' "trace"
has "$T/out" '"matched":"scanners"' "trace names the match"
has "$T/out" '"ns":{"parse":' "trace times the stages"

expect_rc 0 "decide --pretty" -- "$V" decide --no-store --no-snapshots -p $B/gate --pretty "$T/scan.json"
has "$T/out" '  "action": "block",' "pretty output"
has "$T/out" '    "rule": "scanners",' "pretty nesting"

# --jsonl: good lines decided, a bad line answered by an error object, exit 1
{
  echo "$SCAN"
  echo ''
  echo '{"action":"gate","context":[]}'
  echo "$PLAIN"
  echo '{"action":"gate",'
  echo '{"action":"nowhere"}'
} >"$T/reqs.jsonl"
expect_rc 1 "decide --jsonl with bad lines" -- "$V" decide --no-store --no-snapshots -p $B/gate --jsonl "$T/reqs.jsonl"
lines "$T/out" 5 "one output line per request line (blank skipped)"
has "$T/out" '{"error":{"code":"request","message":"$.context must be an object' "error object"
has "$T/out" '"path":"$.context","line":3}}' "error object path and line"
has "$T/out" '{"error":{"code":"json",' "json error object"
has "$T/out" '{"error":{"code":"not_found",' "not found error object"
if [ "$(sed -n 1p "$T/out" | grep -c '"rule":"scanners"')" = 1 ] && [ "$(sed -n 3p "$T/out" | grep -c '"source":"default"')" = 1 ]; then ok; else bad "jsonl order"; fi
grep -v '^{"error"' "$T/reqs.jsonl" >/dev/null
printf '%s\n%s\n' "$SCAN" "$PLAIN" | expect_rc 0 "decide --jsonl all good" -- "$V" decide --no-store --no-snapshots -p $B/gate --jsonl --trace
lines "$T/out" 2 "two decisions"
has "$T/out" '"trace"' "jsonl with trace"

# refused single requests: exit 1, the JSON path on stderr
echo '{"action":"gate","candidates":["allow",1]}' >"$T/badreq.json"
expect_rc 1 "decide a bad request" -- "$V" decide --no-store --no-snapshots -p $B/gate "$T/badreq.json"
has "$T/err" '$.candidates[1] must be a string' "bad request message"
echo '{"action":"nc_error","candidates":["approve"]}' | expect_rc 1 "no candidate" -- "$V" decide --no-store --no-snapshots -p $B/modes
has "$T/err" "on_no_candidate is 'error'" "no candidate message"

# a bundle that does not load
expect_rc 1 "decide on a broken bundle" -- "$V" decide --no-store --no-snapshots -p $B/broken "$T/scan.json"
has "$T/err" 'broken.yaml:4:' "broken bundle names the place"
expect_rc 1 "decide on a missing file" -- "$V" decide --no-store --no-snapshots -p $B/gate "$T/nope.json"

# usage errors
expect_rc 2 "decide without --policy" -- "$V" decide "$T/scan.json"
has "$T/err" "try 'verdict decide --help'" "usage hint"
expect_rc 2 "decide unknown option" -- "$V" decide -p $B/gate --frobnicate
expect_rc 2 "decide two inputs" -- "$V" decide -p $B/gate a.json b.json
expect_rc 2 "decide --pretty --jsonl" -- "$V" decide -p $B/gate --pretty --jsonl
expect_rc 2 "decide --policy without value" -- "$V" decide --policy
expect_rc 0 "decide --help" -- "$V" decide --help
has "$T/out" 'usage: verdict decide --policy DIR' "decide help"

# the version store: --store DIR keeps the versions loaded
expect_rc 0 "decide --store" -- "$V" decide --no-snapshots -p $B/gate --store "$T/store" "$T/scan.json"
if [ -n "$(ls "$T/store" 2>/dev/null)" ]; then ok; else bad "--store wrote nothing"; fi
if [ ! -e $B/gate/.verdict ]; then ok; else bad "the tests wrote a store into the bundle"; fi

# ---- check ----
expect_rc 0 "check a good bundle" -- "$V" check $B/gate
has "$T/out" '1 strategy, 8 rules, 0 errors,' "check summary"
has "$T/out" '; version ' "check prints the version"
expect_rc 0 "check the modes bundle" -- "$V" check $B/modes
has "$T/out" '4 strategies, 5 rules, 0 errors' "check counts strategies"
expect_rc 1 "check a broken bundle" -- "$V" check $B/broken
has "$T/out" 'broken.yaml:4:' "check names file:line"
has "$T/out" "did you mean 'default'" "check suggests"
has "$T/out" 'the bundle does not load' "check summary on failure"
expect_rc 0 "check the model bundle" -- "$V" check $B/model
has "$T/out" 'model clef-default-v3: binary:logistic, 40 trees' "check lists the model the design's text falls back to"
expect_rc 1 "check a missing folder" -- "$V" check "$T/none"
expect_rc 2 "check without a folder" -- "$V" check
expect_rc 2 "check unknown option" -- "$V" check --bogus $B/gate
expect_rc 0 "check --help" -- "$V" check --help

# ---- test ----
expect_rc 0 "test a passing bundle" -- "$V" test $B/gate
has "$T/out" '3 passed, 0 failed' "test summary"
lines "$T/out" 1 "quiet when all pass"
expect_rc 0 "test --verbose" -- "$V" test $B/gate --verbose
has "$T/out" 'ok   tests/engine/bundles/gate/gate.yaml:' "verbose lists passes"
lines "$T/out" 4 "one line per test plus the summary"
expect_rc 1 "test a failing bundle" -- "$V" test $B/failing
has "$T/out" "FAIL tests/engine/bundles/failing/failing.yaml:11: failing: wrong on purpose" "failure names file:line"
has "$T/out" "expected: action 'approve', source 'default'" "failure says what was expected"
has "$T/out" "got:      action 'review' (not allowed, review), source 'rule', rule 'big'" "failure says what came out"
has "$T/out" "rules:    big: true" "failure shows the rules tried"
has "$T/out" '1 passed, 1 failed' "failing summary"
expect_rc 0 "test --strategy" -- "$V" test -s gate $B/gate
has "$T/out" '3 passed, 0 failed' "strategy filter"
expect_rc 1 "test --strategy unknown" -- "$V" test --strategy nope $B/gate
has "$T/err" "no strategy named 'nope'" "unknown strategy"
expect_rc 1 "test a broken bundle" -- "$V" test $B/broken
has "$T/err" 'does not load' "broken bundle"
expect_rc 2 "test without a folder" -- "$V" test
expect_rc 2 "test unknown option" -- "$V" test --bogus $B/gate
expect_rc 0 "test --help" -- "$V" test --help

summary
[ "$fail" = 0 ]
