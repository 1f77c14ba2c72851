#!/bin/sh
# run-tests.sh BUILD_DIR — builds the Node.js addon against BUILD_DIR's
# libverdict.a into BUILD_DIR/node (build.sh), then runs its node:test suite
# (test/). CTest runs it as bindings/node; without node it says so and exits
# 77, which CTest reports as skipped. Under the sanitizer build the addon is
# instrumented and node is not: the sanitizers' run-time is preloaded into
# node (it must be the first library loaded), and the ASAN_OPTIONS and
# UBSAN_OPTIONS of the caller apply.
set -eu
BUILD=$(cd "${1:?usage: run-tests.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null 2>&1; then
  echo "run-tests.sh: skipped: no node on PATH (install Node.js 16 or later with its headers)" >&2
  exit 77
fi
sh "$HERE/build.sh" "$BUILD"
cd "$HERE"
if nm "$BUILD/libverdict.a" 2>/dev/null | grep -q ' U __asan_init'; then
  CC=${CC:-cc}
  ASAN=$("$CC" -print-file-name=libasan.so)
  UBSAN=$("$CC" -print-file-name=libubsan.so)
  if [ ! -f "$ASAN" ] || [ ! -f "$UBSAN" ]; then
    echo "run-tests.sh: skipped: the sanitizer build needs libasan.so and libubsan.so to preload into node ($CC has none)" >&2
    exit 77
  fi
  LD_PRELOAD="$ASAN $UBSAN"
  export LD_PRELOAD
fi
VERDICT_BUILD_DIR="$BUILD" exec node --test test/
