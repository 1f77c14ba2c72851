#!/usr/bin/env bash
# embed.sh — examples/embed.c builds against the static library and the
# public header alone, and runs: on the engine's test bundle, and on the
# example bundle when it is there.
set -u
BUILD=${1:?usage: embed.sh BUILD_DIR}
. tests/lib.sh
scratch

CFLAGS="-std=c11 -Wall -Wextra -Werror"
# Build the way a user would: the public header only, the static library and
# its dependencies from pkg-config. Sanitizer builds need the same flags.
if grep -q 'VD_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  CFLAGS="$CFLAGS -fsanitize=address,undefined"
fi
if cc $CFLAGS -Iinclude -o "$T/embed" examples/embed.c "$BUILD/libverdict.a" \
  $(pkg-config --libs libpcre2-8 libfyaml liburcu-bp libcrypto hiredis libzstd) -lpthread -lm 2>"$T/cc"; then ok; else
  bad "examples/embed.c does not build"; cat "$T/cc" >&2; summary; exit 1
fi

if "$T/embed" tests/engine/bundles/gate gate >"$T/out" 2>"$T/err"; then ok; else bad "embed on the test bundle failed"; cat "$T/err" >&2; fi
grep -q '^bundle tests/engine/bundles/gate, version ' "$T/out" && ok || bad "embed prints the bundle version"
grep -q '^from C: allow (allowed, source rule, rule api-cn' "$T/out" && ok || bad "embed's C request"
grep -q '^from JSON: block (not allowed, source rule, rule scanners' "$T/out" && ok || bad "embed's JSON request"
grep -q '^  {"action":"block","allowed":false,' "$T/out" && ok || bad "embed prints the decision JSON"
if [ "$fail" != 0 ]; then sed 's/^/  | /' "$T/out" >&2; fi

if "$T/embed" tests/engine/bundles/broken >"$T/out" 2>"$T/err"; then bad "embed on a broken bundle succeeded"; else ok; fi
grep -q 'broken.yaml:4:' "$T/err" && ok || bad "embed reports the bundle's errors"

if [ -f examples/policies/request_gate.yaml ]; then
  if "$T/embed" >"$T/out" 2>"$T/err"; then ok; else bad "embed on examples/policies failed"; cat "$T/err" >&2; fi
  grep -q '^from C: ' "$T/out" && grep -q '^from JSON: ' "$T/out" && ok || bad "embed on the examples"
fi

summary
[ "$fail" = 0 ]
