#!/usr/bin/env bash
# limits.sh — the resource limits of issue 9 that a hostile input meets,
# end to end through the CLI and the server: a request nested 100,000 deep,
# a regular expression built to backtrack, a comprehension over a huge list,
# a policy of 100,000 rules, and a 1 GB request body (declared, and streamed
# chunked). Each must end in a clear answer — an error naming the limit, or
# a decision made under it — never a crash or a hang (every command runs
# under `timeout`, so a hang fails the test rather than the run). Slow
# clients, idle connections and connection floods are tested in
# tests/server/serve.sh. Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: limits.sh BUILD_DIR}
V="$BUILD/verdict"
TEST_NAME=hardening/limits
. tests/lib.sh
scratch
PY=/usr/bin/python3

# ---- a bundle with the rules a hostile request aims at ----
mkdir -p "$T/bundle"
cat >"$T/bundle/hostile.yaml" <<'YAML'
strategy: hostile
rules:
  - name: backtrack
    if: context.s.matches("^(a+)+$")
    action: deny
  - name: quadratic
    if: context.items.all(i, context.items.exists(j, j == i + 1))
    action: deny
default: allow
on_error: deny
YAML

# ---- JSON nested 100,000 deep: refused by the depth limit ----
$PY -c 'import sys; n=100000; sys.stdout.write("{\"action\":\"hostile\",\"context\":{\"x\":" + "["*n + "]"*n + "}}")' >"$T/deep.json"
timeout 60 "$V" decide -p "$T/bundle" --no-store --no-snapshots "$T/deep.json" >"$T/out" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -lt 124 ] && ok || bad "deep request: exit $rc, want a refusal (1 or 2)"
has "$T/out" "nesting deeper than the limit" "deep request: the error names the depth limit"

# ---- a regex built to backtrack: the match limit stops it ----
$PY -c 'import json; print(json.dumps({"action":"hostile","context":{"s":"a"*40 + "b","items":[]}}))' >"$T/regex.json"
timeout 60 "$V" decide -p "$T/bundle" --no-store --no-snapshots --trace "$T/regex.json" >"$T/out" 2>&1
eq "$?" 0 "backtracking regex: decided"
has "$T/out" '"action":"deny"' "backtracking regex: on_error decides"
has "$T/out" "match limit" "backtracking regex: the error names the match limit"

# ---- a comprehension over a huge list: the cost limit stops it ----
$PY -c 'import json; print(json.dumps({"action":"hostile","context":{"s":"x","items":list(range(100000))}}))' >"$T/list.json"
timeout 60 "$V" decide -p "$T/bundle" --no-store --no-snapshots --trace "$T/list.json" >"$T/out" 2>&1
eq "$?" 0 "huge comprehension: decided"
has "$T/out" '"action":"deny"' "huge comprehension: on_error decides"
has "$T/out" "cost limit" "huge comprehension: the error names the cost limit"

# ---- a policy with 100,000 rules: loads, and decides ----
mkdir -p "$T/big"
$PY - "$T/big/big.yaml" <<'PYEOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write("strategy: big\nrules:\n")
    for i in range(100000):
        f.write(f"  - name: r{i}\n    if: context.n == {i} && context.tag == \"t{i % 97}\"\n    action: deny\n")
    f.write("default: allow\n")
PYEOF
echo '{"action":"big","context":{"n":99999,"tag":"t89"}}' >"$T/big.json"
timeout 300 "$V" decide -p "$T/big" --no-store --no-snapshots "$T/big.json" >"$T/out" 2>&1
eq "$?" 0 "100,000 rules: loaded and decided"
has "$T/out" '"rule":"r99999"' "100,000 rules: the last rule matches"

# ---- a 1 GB body: 413, declared or streamed, with bounded reading ----
PORT=$(free_port)
"$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 1 --no-snapshots --no-store \
  2>"$T/log" &
PID=$!
for _ in $(seq 1 100); do
  $PY -c "import socket; socket.create_connection(('127.0.0.1', $PORT), timeout=1)" 2>/dev/null && break
  sleep 0.1
done
timeout 120 $PY - "$PORT" >"$T/body" 2>&1 <<'PYEOF'
import socket, sys
port = int(sys.argv[1])
GB = 1 << 30
def answer(s):
    d = b""
    try:
        while True:
            c = s.recv(65536)
            if not c: break
            d += c
    except (ConnectionResetError, socket.timeout):
        pass
    return d.split(b"\r\n")[0].decode()
# Declared: refused before a byte of the body is read.
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(b"POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{" % GB)
print("declared:", answer(s))
# Streamed in chunks: refused once past the limit; the server stops reading,
# so the client cannot push the whole gigabyte.
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(b"POST /v1/decide HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
chunk = b"100000\r\n" + b" " * 0x100000 + b"\r\n"
sent = 0
try:
    while sent < GB:
        s.sendall(chunk)
        sent += 0x100000
except (BrokenPipeError, ConnectionResetError, socket.timeout):
    pass
print("streamed:", answer(s), "stopped early:", sent < 64 * 0x100000)
PYEOF
has "$T/body" "declared: HTTP/1.1 413" "1 GB declared body: 413"
has "$T/body" "streamed: HTTP/1.1 413" "1 GB chunked body: 413"
has "$T/body" "stopped early: True" "1 GB chunked body: the server stopped reading"
kill -TERM "$PID" 2>/dev/null
wait "$PID"
eq "$?" 0 "serve after the hostile bodies: clean exit"
PID=

summary
[ "$fail" -eq 0 ]
