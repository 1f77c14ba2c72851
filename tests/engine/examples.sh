#!/usr/bin/env bash
# examples.sh — the example bundle (examples/policies) loads cleanly and
# passes its own inline tests through `verdict check` and `verdict test`, and
# every request in examples/requests decides. Run from the repo root with the
# build folder as $1.
set -u
BUILD=${1:?usage: examples.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
# Everything under examples/ that changes from here on was written by this
# test (checked at the end).
touch "$T/start"

if [ ! -d examples/policies ] || [ -z "$(ls examples/policies/*.yaml 2>/dev/null)" ]; then
  echo "no example bundle yet"; echo "0 passed, 0 failed"; exit 0
fi

if "$V" check --strict examples/policies >"$T/out" 2>&1; then ok; else bad "verdict check --strict examples/policies"; cat "$T/out" >&2; fi
if "$V" test examples/policies >"$T/out" 2>&1; then ok; else bad "verdict test examples/policies"; cat "$T/out" >&2; fi
tail -1 "$T/out" | grep -Eq '^[1-9][0-9]* passed, 0 failed$' && ok || bad "verdict test's summary: $(tail -1 "$T/out")"

# Requests named *refused* are meant to be refused (exit 1, a message on
# stderr); every other one is decided.
for r in examples/requests/*.json; do
  [ -f "$r" ] || continue
  "$V" decide --no-store --no-snapshots --policy examples/policies "$r" >"$T/out" 2>"$T/err"
  rc=$?
  case "$r" in
  *refused*)
    [ "$rc" = 1 ] && [ -s "$T/err" ] && [ ! -s "$T/out" ] && ok || bad "$r: exit $rc, want a refusal" ;;
  *)
    [ "$rc" = 0 ] && ok || { bad "verdict decide $r: exit $rc"; cat "$T/err" >&2; }
    grep -q '^{"action":' "$T/out" && ok || bad "$r: no decision printed" ;;
  esac
done
# No test may write into the source tree: nothing under examples/ is newer
# than the start of this test. (What was there before it — a version store
# that `verdict decide` run by hand on the example bundle keeps in
# examples/policies/.verdict/, git-ignored — is not this test's doing.)
written=$(find examples -newer "$T/start" -print 2>/dev/null | head -n 5)
if [ -n "$written" ]; then
  bad "this test wrote into the source tree: $(echo "$written" | tr '\n' ' ')"
else ok; fi

summary
[ "$fail" = 0 ]
