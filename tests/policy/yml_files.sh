#!/usr/bin/env bash
# yml_files.sh — a strategy file named *.yml is part of the bundle as a
# *.yaml file is: `verdict check` counts it, `verdict test` runs its tests,
# `verdict decide` serves its decision point; names starting with '.' or '_'
# are skipped for both endings. Run from the repo root with the build folder
# as $1.
set -u
BUILD=${1:?usage: yml_files.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

B=$T/bundle
mkdir -p "$B"
cat >"$B/gate.yaml" <<'YAML'
strategy: gate
default: allow
tests:
  - expect: allow
YAML
cat >"$B/orders.yml" <<'YAML'
strategy: orders
rules:
  - name: big
    if: total > 1000
    action: review
default: approve
tests:
  - name: a big order is reviewed
    context: {total: 5000}
    expect: {action: review, rule: big}
YAML
printf 'strategy: hidden\ndefault: block\n' >"$B/_draft.yml"

"$V" check "$B" >"$T/out" 2>&1
has "$T/out" "2 strategies, 1 rule, 0 errors" "check counts the .yml strategy and skips _draft.yml"
"$V" test -v "$B" >"$T/out" 2>&1
has "$T/out" "orders.yml" "verdict test runs the .yml file's tests"
eq "$(tail -n 1 "$T/out")" "2 passed, 0 failed" "verdict test's summary"
echo '{"action": "orders", "context": {"total": 5000}}' |
  "$V" decide --policy "$B" --no-store --no-snapshots >"$T/out" 2>&1
has "$T/out" '"action":"review"' "the .yml strategy decides"
echo '{"action": "hidden"}' | "$V" decide --policy "$B" --no-store --no-snapshots >"$T/out" 2>&1
has "$T/out" "no strategy serves the decision point 'hidden'" "_draft.yml is skipped"

summary
[ "$fail" = 0 ]
