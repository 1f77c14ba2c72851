#!/bin/sh
# run-tests.sh BUILD_DIR — builds the Python module against BUILD_DIR's
# libverdict.a into BUILD_DIR/python, then runs its pytest suite there with
# the system's Python 3 (/usr/bin/python3: Debian's, which python3-dev,
# python3-setuptools and python3-pytest are for). CTest runs it as
# bindings/python; `make bindings-python` runs the build half.
set -eu
BUILD=$(cd "${1:?usage: run-tests.sh BUILD_DIR [--build-only]}" && pwd)
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
for m in setuptools pytest; do
  if ! "$PY" -c "import $m" 2>/dev/null; then
    echo "run-tests.sh: $PY has no $m (scripts/deps --test installs python3-$m)" >&2
    exit 1
  fi
done
(cd "$HERE" && VERDICT_BUILD_DIR="$BUILD" "$PY" setup.py -q build_ext \
  --build-lib "$BUILD/python" --build-temp "$BUILD/python-tmp")
[ "${2:-}" = "--build-only" ] && exit 0
cd "$HERE"
VERDICT_BUILD_DIR="$BUILD" PYTHONPATH="$BUILD/python" exec "$PY" -m pytest -q -p no:cacheprovider tests
