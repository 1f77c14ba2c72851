#!/bin/sh
# run-tests.sh BUILD_DIR — builds the Node.js addon against BUILD_DIR's
# libverdict.a into BUILD_DIR/node (build.sh), then runs its node:test suite
# (test/). CTest runs it as bindings/node; without node it says so and exits
# 77, which CTest reports as skipped.
set -eu
BUILD=$(cd "${1:?usage: run-tests.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null 2>&1; then
  echo "run-tests.sh: skipped: no node on PATH (install Node.js 16 or later with its headers)" >&2
  exit 77
fi
sh "$HERE/build.sh" "$BUILD"
cd "$HERE"
VERDICT_BUILD_DIR="$BUILD" exec node --test test/
