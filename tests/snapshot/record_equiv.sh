#!/bin/bash
# The snapshot payload the writer formats from the deciding thread's capture
# equals the direct builder's, byte for byte, for every request of
# `verdict gen --count 2000 --seed 1` (test_record_equiv.c does the
# comparing; this feeds it realistic traffic of every example strategy).
set -u
BUILD=${1:-build}
TMP=$(mktemp -d -t verdict-record-equiv-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
unset VERDICT_SNAPSHOTS
if ! "$BUILD/verdict" gen --count 2000 --seed 1 --out "$TMP/requests.jsonl"; then
  echo "FAIL: verdict gen" >&2
  exit 1
fi
n=$(grep -c '' "$TMP/requests.jsonl")
if [ "$n" -ne 2000 ]; then
  echo "FAIL: verdict gen wrote $n requests, want 2000" >&2
  exit 1
fi
"$BUILD/engine_test_record_equiv" --requests "$TMP/requests.jsonl"
