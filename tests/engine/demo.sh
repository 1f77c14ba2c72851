#!/usr/bin/env bash
# demo.sh — `make run` (scripts/demo) works and writes nothing in the source
# tree: its snapshots and version store go beside the verdict binary it is
# given (here a link in the scratch folder), and they replay exactly. So
# `make run` then `make test`, in either order and any number of times, find
# the tree as the clone left it. Run from the repo root with the build
# folder as $1.
set -u
BUILD=${1:?usage: demo.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl

mkdir -p "$T/bin"
ln -s "$(realpath "$V")" "$T/bin/verdict"
touch "$T/start"
for run in 1 2; do
  if scripts/demo "$T/bin/verdict" >"$T/out" 2>&1; then ok; else bad "scripts/demo (run $run) failed"; tail -20 "$T/out" >&2; fi
  has "$T/out" "result: every decision reproduced exactly" "run $run: the demo's decisions replay"
  has "$T/out" "passed, 0 failed" "run $run: the bundle's tests"
done
[ -d "$T/bin/demo/snapshots" ] && [ -d "$T/bin/demo/versions" ] && ok ||
  bad "no snapshots and version store beside the binary ($T/bin/demo)"
written=$(find examples -newer "$T/start" -print 2>/dev/null | head -n 5)
if [ -n "$written" ]; then
  bad "scripts/demo wrote into the source tree: $(echo "$written" | tr '\n' ' ')"
else ok; fi

summary
[ "$fail" = 0 ]
