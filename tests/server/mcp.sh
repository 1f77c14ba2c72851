#!/usr/bin/env bash
# mcp.sh — POST /mcp, MCP over Streamable HTTP, against the real server with
# curl: initialize hands out an Mcp-Session-Id, a notification is 202, a
# tool call decides (and is recorded), an unknown session is 404, DELETE
# ends a session, GET is 405, the Accept / Content-Type /
# MCP-Protocol-Version / Origin checks. Run from the repo root with the
# build folder as $1.
set -u
BUILD=${1:?usage: mcp.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl

mkdir -p "$T/bundle"
for f in examples/policies/*; do cp -r "$f" "$T/bundle/"; done
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
"$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --snapshots "$T/snap" --durability always \
  --no-store 2>"$T/log" &
PID=$!
wait_ready mcp "$T/log"
URL="$URL/mcp"

# mcp BODY [curl args...]: POST a JSON-RPC message; status in $CODE.
mcp() {
  local body=$1; shift
  CODE=$(curl -s -D "$T/head" -o "$T/body" -w '%{http_code}' "$URL" -H 'Content-Type: application/json' \
    -H "Accept: ${ACCEPT:-application/json, text/event-stream}" --data-binary "$body" "$@")
}
header() { tr -d '\r' <"$T/head" | sed -n "s/^$1: //Ip" | head -1; }
json() { python3 -c 'import sys,json; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T/body" "$1"; }

mcp '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcp.sh","version":"1"}}}'
eq "$CODE" 200 "initialize: 200"
eq "$(header content-type)" application/json "initialize: answered as JSON"
SID=$(header mcp-session-id)
eq "${#SID}" 32 "initialize: an Mcp-Session-Id"
eq "$(json 'd["result"]["protocolVersion"]')" 2025-11-25 "initialize: the protocol version"
S=(-H "Mcp-Session-Id: $SID" -H 'MCP-Protocol-Version: 2025-11-25')
mcp '{"jsonrpc":"2.0","method":"notifications/initialized"}' "${S[@]}"
eq "$CODE" 202 "a notification: 202"
eq "$(wc -c <"$T/body")" 0 "a notification: no body"
mcp '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' "${S[@]}"
eq "$CODE" 200 "tools/list: 200"
eq "$(json '"decide_action" in [t["name"] for t in d["result"]["tools"]]')" True "tools/list: decide_action"
mcp '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"decide_action","arguments":{"tool_name":"Bash","tool_input":{"command":"rm -rf /"},"cwd":"/home/dev/project"}}}' "${S[@]}"
eq "$CODE" 200 "tools/call: 200"
eq "$(json 'd["result"]["structuredContent"]["action"]')" deny "tools/call: rm -rf / is denied"
# an MCP decision counts in /metrics like any other
curl -s "http://127.0.0.1:$PORT/metrics" >"$T/metrics"
grep -q '^verdict_decisions_total{[^}]*strategy="agent_guard"[^}]*action="deny"[^}]*} [1-9]' "$T/metrics" &&
  ok || bad "tools/call: counted in verdict_decisions_total"
SNAP=$(json 'd["result"]["structuredContent"]["snapshot_id"]')
eq "${#SNAP}" 36 "tools/call: the decision is recorded"
mcp "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"explain_decision\",\"arguments\":{\"snapshot_id\":\"$SNAP\"}}}" "${S[@]}"
eq "$CODE" 200 "explain_decision: 200"
grep -qF "$SNAP" "$T/body" && ok || bad "explain_decision: the snapshot of that decision"

# ---- 2025-03-26: JSON-RPC batches in one POST ----
mcp '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}'
eq "$(json 'd["result"]["protocolVersion"]')" 2025-03-26 "initialize 2025-03-26"
S3=(-H "Mcp-Session-Id: $(header mcp-session-id)" -H 'MCP-Protocol-Version: 2025-03-26')
mcp '[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"decide_action","arguments":{"tool_name":"Bash","tool_input":{"command":"rm -rf /"},"cwd":"/home/dev/project"}}}]' "${S3[@]}"
eq "$CODE" 200 "a batch in a 2025-03-26 session: 200"
eq "$(json '[m["id"] for m in d]')" "[1, 2]" "a batch: one answer a request, in order"
eq "$(json 'd[1]["result"]["structuredContent"]["action"]')" deny "a batch: its tool call decided"
mcp '[{"jsonrpc":"2.0","method":"notifications/initialized"}]' "${S3[@]}"
eq "$CODE:$(wc -c <"$T/body")" "202:0" "a batch of notifications only: 202, no body"
mcp '[{"jsonrpc":"2.0","id":1,"method":"ping"}]' "${S[@]}"
eq "$(json 'd["error"]["code"]')" -32600 "a batch in a 2025-11-25 session: -32600"

# ---- transport rules ----
mcp '{"jsonrpc":"2.0","id":4,"method":"tools/list"}' -H 'Mcp-Session-Id: 0123456789abcdef0123456789abcdef'
eq "$CODE" 404 "an unknown session: 404"
ACCEPT=text/html mcp '{"jsonrpc":"2.0","id":5,"method":"tools/list"}' "${S[@]}"
eq "$CODE" 406 "Accept without application/json: 406"
CODE=$(curl -s -o /dev/null -w '%{http_code}' "$URL" -H 'Content-Type: text/plain' -d '{}')
eq "$CODE" 415 "Content-Type not JSON: 415"
mcp '{"jsonrpc":"2.0","id":6,"method":"tools/list"}' -H "Mcp-Session-Id: $SID" -H 'MCP-Protocol-Version: 1999-01-01'
eq "$CODE" 400 "an unsupported MCP-Protocol-Version: 400"
mcp '{"jsonrpc":"2.0","id":7,"method":"tools/list"}' "${S[@]}" -H 'Origin: http://evil.example'
eq "$CODE" 403 "a foreign Origin: 403 (DNS rebinding)"
mcp '{"jsonrpc":"2.0","id":8,"method":"tools/list"}' "${S[@]}" -H 'Host: evil.example'
eq "$CODE" 403 "a foreign Host on a loopback server: 403"
mcp '{"jsonrpc":"2.0","id":9,"method":"tools/list"}' "${S[@]}" -H "Origin: http://localhost:$PORT"
eq "$CODE" 200 "a localhost Origin: 200"
CODE=$(curl -s -D "$T/head" -o /dev/null -w '%{http_code}' "$URL")
eq "$CODE" 405 "GET /mcp: 405 (no SSE stream)"
eq "$(header allow)" "POST, DELETE" "GET /mcp: Allow"
CODE=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$URL")
eq "$CODE" 400 "DELETE without Mcp-Session-Id: 400"
CODE=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$URL" -H "Mcp-Session-Id: $SID")
eq "$CODE" 204 "DELETE ends the session"
mcp '{"jsonrpc":"2.0","id":10,"method":"tools/list"}' "${S[@]}"
eq "$CODE" 404 "an ended session: 404"

stop
summary
[ "$fail" = 0 ]
