#!/bin/bash
# The CEL conformance gate. Runs build/verdict-cel-conformance over the
# committed suite (tests/conformance/cel/cases.jsonl) and requires:
#   - every core case passes (the CEL subset verdict promises), and
#   - every case of the strings extension (file string_ext) passes;
# then runs the whole suite and prints its counts without gating on them
# (protobuf-free extensions verdict does not implement, e.g. optionals).
# The number of cases each subset ran is checked against the file itself,
# so a runner that silently skipped cases would fail here too.
set -u
BUILD=${1:-build}
RUNNER="$BUILD/verdict-cel-conformance"
CASES=tests/conformance/cel/cases.jsonl

if [ ! -x "$RUNNER" ]; then
  echo "FAIL: $RUNNER is missing (build it first)"
  echo "0 passed, 1 failed"
  exit 1
fi
if [ ! -s "$CASES" ]; then
  echo "FAIL: $CASES is missing or empty"
  echo "0 passed, 1 failed"
  exit 1
fi

gate_pass=0
gate_fail=0

# run_subset NAME WANT_COUNT ARGS... : every case of the subset must pass and
# the runner must have run exactly WANT_COUNT of them.
run_subset() {
  local name=$1 want=$2
  shift 2
  local out rc last p f
  out=$("$RUNNER" "$CASES" "$@" 2>&1)
  rc=$?
  last=$(printf '%s\n' "$out" | tail -n 1)
  if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    p=${BASH_REMATCH[1]}
    f=${BASH_REMATCH[2]}
  else
    echo "FAIL $name: the runner did not finish (exit $rc):"
    printf '%s\n' "$out" | tail -n 20
    gate_fail=$((gate_fail + 1))
    return
  fi
  echo "$name: $p passed, $f failed (of $want)"
  gate_pass=$((gate_pass + p))
  gate_fail=$((gate_fail + f))
  if [ "$f" -ne 0 ] || [ "$rc" -ne 0 ]; then
    printf '%s\n' "$out" | grep '^FAIL' | head -n 60
  fi
  if [ $((p + f)) -ne "$want" ]; then
    echo "FAIL $name: the runner ran $((p + f)) cases, the file has $want"
    gate_fail=$((gate_fail + 1))
  fi
}

want_core=$(grep -c '"core":true' "$CASES")
want_ext=$(grep -c '"id":"string_ext/' "$CASES")
want_all=$(grep -c '"id":' "$CASES")

run_subset core "$want_core" --core
run_subset string_ext "$want_ext" --filter string_ext/

# The whole suite, for information: printed, not gated.
all=$("$RUNNER" "$CASES" 2>&1 | tail -n 1)
echo "whole suite ($want_all cases): $all"

echo "$gate_pass passed, $gate_fail failed"
[ "$gate_fail" -eq 0 ]
