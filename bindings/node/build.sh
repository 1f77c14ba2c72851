#!/bin/sh
# build.sh BUILD_DIR — builds the Node.js addon against BUILD_DIR's
# libverdict.a into BUILD_DIR/node/verdict.node, with the C compiler and the
# Node-API headers of the installed node (no node-gyp, no network). The
# archive is linked in: the addon carries one copy of the engine and needs no
# libverdict.so at run time; the libraries the engine uses are the system's
# shared ones (pkg-config). `make bindings` runs it; so does run-tests.sh.
set -eu
BUILD=$(cd "${1:?usage: build.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
CC=${CC:-cc}
ARCHIVE="$BUILD/libverdict.a"
if [ ! -f "$ARCHIVE" ]; then
  echo "build.sh: $ARCHIVE is missing: build the library first (cmake --build $BUILD)" >&2
  exit 1
fi
# node_api.h: beside the node found on PATH (NODE_INCLUDE overrides)
INC=${NODE_INCLUDE:-}
if [ -z "$INC" ]; then
  for d in "$(dirname "$(dirname "$(command -v node 2>/dev/null || echo /usr/bin/node)")")/include/node" \
           /usr/include/node /usr/local/include/node; do
    if [ -f "$d/node_api.h" ]; then INC=$d; break; fi
  done
fi
if [ -z "$INC" ] || [ ! -f "$INC/node_api.h" ]; then
  echo "build.sh: no node_api.h found (install Node.js with its headers, or set NODE_INCLUDE)" >&2
  exit 1
fi
DEPS="libpcre2-8 libfyaml liburcu-bp libuv hiredis libzstd"
if ! LIBS=$(pkg-config --libs $DEPS) || ! CFLAGS_DEPS=$(pkg-config --cflags $DEPS); then
  echo "build.sh: pkg-config $DEPS failed (scripts/deps installs the -dev packages)" >&2
  exit 1
fi
# the sanitizer build's archive needs the sanitizers' run-time in the addon too
SAN=""
if nm "$ARCHIVE" 2>/dev/null | grep -q ' U __asan_init'; then
  SAN="-fsanitize=address,undefined"
fi
mkdir -p "$BUILD/node"
# shellcheck disable=SC2086
"$CC" -std=c11 -O2 -g -fPIC -shared -Wall -Wextra -Werror -Wno-unused-parameter \
  -Wno-missing-field-initializers $SAN -D_POSIX_C_SOURCE=200809L \
  -I"$INC" -I"$TOP/include" $CFLAGS_DEPS \
  -o "$BUILD/node/verdict.node.tmp" "$HERE/verdict.c" "$ARCHIVE" $LIBS -lpthread -lm
mv "$BUILD/node/verdict.node.tmp" "$BUILD/node/verdict.node"
