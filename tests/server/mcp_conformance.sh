#!/usr/bin/env bash
# mcp_conformance.sh — the official MCP conformance suite
# (@modelcontextprotocol/conformance 0.1.16, on Node.js 22, both from npm via
# scripts/npm-tools) against `verdict serve`'s POST /mcp: every scenario that
# applies to a tools-only server passes, one by one, and the whole suite
# passes with the others listed as expected failures
# (tests/server/mcp-conformance-baseline.yml says why each does not apply).
# Run from the repo root with the build folder as $1. Fails, saying why, when
# npm cannot install the tools.
set -u
BUILD=${1:?usage: mcp_conformance.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
on_exit() { # the server gets SIGTERM, not SIGKILL
  kill_wait TERM "$PID"
  PID=
}

NODE=$(scripts/npm-tools node22) || { echo "mcp_conformance.sh: cannot install Node.js 22 from npm" >&2; exit 1; }
CONF=$(scripts/npm-tools conformance) || { echo "mcp_conformance.sh: cannot install the conformance suite" >&2; exit 1; }
export PATH="$(dirname "$NODE"):$PATH"
[ "$(node --version | cut -d. -f1)" = v22 ] && ok || bad "node 22 first on PATH: $(node --version)"

mkdir -p "$T/bundle"
for f in examples/policies/*; do cp -r "$f" "$T/bundle/"; done
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
"$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --snapshots "$T/snap" --no-store \
  2>"$T/log" &
PID=$!
wait_ready mcp_conformance "$T/log"
# The suite checks DNS-rebinding protection with Host headers naming
# localhost, so the URL says localhost too.
URL="http://localhost:$PORT/mcp"

cd "$T" || exit 1 # the suite writes its results under the working folder
for sc in server-initialize ping tools-list server-sse-multiple-streams dns-rebinding-protection; do
  if timeout 120 "$CONF" server --url "$URL" --scenario "$sc" >"$T/$sc.out" 2>&1 &&
    grep -q ", 0 failed" "$T/$sc.out" && ! grep -q "Passed: 0/" "$T/$sc.out"; then
    ok
  else
    bad "conformance scenario $sc"
    tail -n 15 "$T/$sc.out" >&2
  fi
done
cd - >/dev/null || exit 1
if timeout 300 "$CONF" server --url "$URL" \
  --expected-failures "$PWD/tests/server/mcp-conformance-baseline.yml" >"$T/all.out" 2>&1 &&
  grep -q "Baseline check passed" "$T/all.out"; then
  ok
else
  bad "the whole suite against the baseline"
  grep -E "^[✓✗]|Baseline|Total" "$T/all.out" >&2
fi
kill -0 "$PID" 2>/dev/null && ok || bad "the server survived the suite"

summary
[ "$fail" = 0 ]
