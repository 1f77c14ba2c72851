#!/usr/bin/env bash
# deep_policy.sh — a policy file nested 200,000 levels deep (400 KB of '['
# under a key nobody reads; issue 19) is refused with its place, by
# `verdict check` and by a serving reload, instead of overflowing the stack:
# `verdict check` exits 1 naming file:line:col, and `verdict serve` refuses
# the reload (admin call and SIGHUP), logs why, and the old bundle keeps
# answering. Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: deep_policy.sh BUILD_DIR}
V="$BUILD/verdict"
PY=/usr/bin/python3
TEST_NAME=hardening/deep_policy
. tests/lib.sh
scratch
need curl

mkdir -p "$T/bundle"
cat >"$T/bundle/gate.yaml" <<'YAML'
strategy: gate
rules:
  - name: probe
    if: context.path.startsWith("/.env")
    action: deny
default: allow
YAML
deep() { # deep FILE: the attack, generated (not kept in the tree)
  $PY -c 'import sys; n = 200000
open(sys.argv[1], "w").write("strategy: deep\ndefault: allow\nextra: " + "[" * n + "]" * n + "\n")' "$1"
}

# ---- verdict check: exit 1, the error at the 257th bracket ----
mkdir -p "$T/check"
cp "$T/bundle/gate.yaml" "$T/check/"
deep "$T/check/deep.yaml"
timeout 60 "$V" check "$T/check" >"$T/out" 2>&1
eq "$?" 1 "check: refused with exit 1 (not a crash)"
has "$T/out" "deep.yaml:3:264: nesting deeper than the limit of 256 levels" "check: file:line:col and the limit"

# ---- verdict serve: the reload is refused, the old bundle serves ----
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
TOKEN=deep-policy-token-$RANDOM-$RANDOM-0123456789
printf '%s\n' "$TOKEN" >"$T/token"
"$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 2 --no-snapshots \
  --store "$T/store" --admin-token-file "$T/token" 2>"$T/log" &
PID=$!
wait_ready serve "$T/log"
probe() { curl -s --max-time 30 "$URL/v1/decide" -d '{"action":"gate","context":{"path":"/.env"}}'; }
probe >"$T/before"
has "$T/before" '"action":"deny"' "serve: decides before the reload"

deep "$T/bundle/deep.yaml"
CODE=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' -X POST "$URL/v1/policies/reload" \
  -H "Authorization: Bearer $TOKEN")
eq "$CODE" 422 "admin reload: refused (422)"
has "$T/body" "deep.yaml:3:264: nesting deeper than the limit of 256 levels" "admin reload: the error names the place"
kill -HUP "$PID"
for _ in $(seq 1 300); do [ "$(grep -c '"event":"reload_failed"' "$T/log")" -ge 2 ] && break; sleep 0.1; done
eq "$(grep -c '"event":"reload_failed"' "$T/log")" 2 "SIGHUP reload: refused and logged too"
has "$T/log" "nesting deeper than the limit of 256 levels" "the log says why"
kill -0 "$PID" 2>/dev/null && ok || bad "serve: the server died"
probe >"$T/after"
has "$T/after" '"action":"deny"' "serve: the old bundle still decides"
eq "$(curl -s --max-time 30 -o /dev/null -w '%{http_code}' "$URL/healthz")" 200 "serve: healthy"
stop

summary
[ "$fail" -eq 0 ]
