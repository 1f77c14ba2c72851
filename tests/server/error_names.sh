#!/usr/bin/env bash
# error_names.sh — error messages show the names they quote whole, with
# escapes: a NUL in a decision point, a tool name, a duplicate key or an MCP
# method does not cut the message short ("no strategy serves
# 'http_request'" for "http_request\u0000x" was the bug), and a newline
# cannot start a line of its own. Against the real server with curl, and
# `verdict decide` on the command line.
#
# And one name for one error code, wherever it is printed: the "code" of
# POST /v1/decide's error body, of a /v1/decide/batch element and of
# `verdict decide --jsonl`'s error object is vd_err_name's, the same in all
# three for every refusal a request can earn (json, request, limit,
# not_found, no_candidate); a decision whose snapshot cannot be made durable
# is not_recorded on the command line as on the server (docs/server.md).
# Before the one error table, the server and the CLI each had a switch of
# their own, and they disagreed: the CLI called that refusal "error".
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

# ---- error codes: the server's and the CLI's are vd_err_name's ----
code_of() { python3 -c 'import sys,json; print(json.load(sys.stdin)["error"]["code"])'; }
deep=$(python3 -c 'print("{\"action\":\"http_request\",\"context\":{\"a\":" + "["*600 + "]"*600 + "}}")')

# want CODE REQUEST
check() {
  local want=$1 body=$2
  local http cli batch
  http=$(curl -s "$URL/v1/decide" --data-binary "$body" | code_of)
  cli=$(printf '%s\n' "$body" | "$V" decide -p examples/policies --no-snapshots --no-store --jsonl |
    code_of)
  eq "$http" "$want" "$want: POST /v1/decide"
  eq "$cli" "$want" "$want: verdict decide --jsonl"
  # a batch element: JSON Lines, so a malformed request is one element too
  batch=$(printf '%s\n' "$body" | curl -s "$URL/v1/decide/batch" -H 'Content-Type: application/x-ndjson' \
    --data-binary @- | head -1 | code_of)
  eq "$batch" "$want" "$want: a /v1/decide/batch element"
}

check json 'nope'
check request '{"action":5}'
check limit "$deep"
check not_found '{"action":"zz_none"}'
check no_candidate '{"action":"http_request","candidates":["zzz"],"context":{}}'

# --durability always on a segment the file size limit stops (RLIMIT_FSIZE,
# SIGXFSZ ignored: every write past it fails with EFBIG, as on a full disk).
GOOD='{"action":"http_request","context":{"method":"GET","path":"/products/x","client_ip":"10.0.0.7","headers":{"user-agent":"Mozilla/5.0"},"env":{"country":"GB"}}}'
for _ in $(seq 1 6); do echo "$GOOD"; done >"$T/in"
# the folder's versions first, outside the limit: a version that cannot be
# written to the folder fails the load (docs/snapshots.md, "Self-contained
# folders"), which is not what this checks
"$V" decide -p examples/policies --no-store -s "$T/snap" --jsonl /dev/null >/dev/null 2>&1
(
  ulimit -f 8 # room for a few snapshots: the last of the 6 are refused (about 1 s each)
  trap '' XFSZ
  "$V" decide -p examples/policies --no-store -s "$T/snap" --durability always --jsonl "$T/in" \
    >"$T/out" 2>"$T/err"
)
refused=$(grep -v '"snapshot_id":"' "$T/out" | head -1)
eq "$(printf '%s' "$refused" | code_of)" not_recorded "verdict decide --jsonl: a snapshot not made durable is not_recorded"
has "$T/out" 'could not be made durable' "verdict decide --jsonl: the refusal says why"

stop
summary
[ "$fail" -eq 0 ]
