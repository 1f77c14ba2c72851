#!/usr/bin/env bash
# error_names.sh — error messages show the names they quote whole, with
# escapes: a NUL in a decision point, a tool name, a duplicate key or an MCP
# method does not cut the message short ("no strategy serves
# 'http_request'" for "http_request\u0000x" was the bug), and a newline
# cannot start a line of its own. Against the real server with curl, and
# `verdict decide` on the command line.
set -u
BUILD=${1:?usage: error_names.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl python3

PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
"$V" serve --policy examples/policies --listen "127.0.0.1:$PORT" --threads 2 --no-snapshots \
  --no-store 2>"$T/serve.log" &
PID=$!
wait_ready serve "$T/serve.log"

# post PATH BODY [curl args...]: body in $T/body, status in $CODE.
post() {
  local p=$1 body=$2; shift 2
  CODE=$(curl -s -o "$T/body" -w '%{http_code}' "$URL$p" --data-binary "$body" "$@")
}
# message EXPR: the Python expression over the answer d, printed with repr,
# so that a real NUL or newline would show as \x00 or \n.
message() { python3 -c 'import sys,json; d=json.load(open(sys.argv[1])); print(repr(eval(sys.argv[2])))' "$T/body" "$1"; }
MCP_H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')

post /v1/decide '{"action":"http_request\u0000x","context":{}}'
eq "$CODE" 404 "a NUL in the decision point: not found"
has "$T/body" "'http_request\\\\u0000x'" "a NUL in the decision point: the whole name, escaped"
eq "$(message 'd["error"]["message"].split(" (")[0]')" \
  "\"no strategy serves the decision point 'http_request\\\\u0000x'\"" \
  "a NUL in the decision point: the message as text"

post /v1/decide '{"action":"http_request\nX-Injected: 1","context":{}}'
eq "$CODE" 404 "a newline in the decision point: not found"
eq "$(message '"\n" in d["error"]["message"]')" False "a newline in the decision point: no newline in the message"
has "$T/body" 'http_request\\nX-Injected: 1' "a newline in the decision point: shown as \\n"

post /v1/decide/batch '[{"action":"login\u0000admin","context":{}}]'
eq "$(message 'd[0]["error"]["message"].split(" (")[0]')" \
  "\"no strategy serves the decision point 'login\\\\u0000admin'\"" "batch: the whole name, escaped"

post /v1/decide '{"action":"login","context":{"a\u0000b":1,"a\u0000b":2}}'
eq "$CODE" 400 "a duplicate key with a NUL: 400"
has "$T/body" 'duplicate key \"a\\u0000b\"' "a duplicate key with a NUL: the whole key, escaped"

post /mcp '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"decide_action\u0000evil","arguments":{}}}' "${MCP_H[@]}"
has "$T/body" 'Unknown tool: decide_action\\u0000evil' "MCP: an unknown tool's whole name, escaped"

post /mcp '{"jsonrpc":"2.0","id":1,"method":"tools/list\u0000x"}' "${MCP_H[@]}"
has "$T/body" 'Method not found: tools/list\\u0000x' "MCP: an unknown method's whole name, escaped"

# the command line says the same
printf '%s\n' '{"action":"http_request\u0000x","context":{}}' |
  "$V" decide -p examples/policies --no-snapshots --no-store 2>"$T/err" >/dev/null
has "$T/err" "no strategy serves the decision point 'http_request\\u0000x'" "verdict decide: the whole name, escaped"

stop
summary
[ "$fail" -eq 0 ]
