#!/usr/bin/env bash
# snapshot_reads.sh — who may read a recorded decision (--snapshot-reads),
# against the real server listening on every address (0.0.0.0) and asked
# only on 127.0.0.1: by default (local) a client on loopback reads snapshots
# and a client from another address does not (403 without a token
# configured, 401 with one, 200 with the token), decisions stay open to
# both; explicit `open` on a non-loopback address starts with a warning in
# the log and lets everyone read; `open` on loopback has no warning.
#
# "Another address" is one of this host's own non-loopback addresses used as
# the source of a connection to 127.0.0.1 (curl --interface): the traffic
# stays on the loopback interface, but the server sees a peer that is not
# loopback. Without such an address those checks are skipped, and said so.
set -u
BUILD=${1:?usage: snapshot_reads.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl python3

# start NAME HOST [serve options...]: the server on HOST and a free port.
start() {
  local name=$1 host=$2; shift 2
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  "$V" serve --policy examples/policies --listen "$host:$PORT" --threads 2 --no-store \
    --snapshots "$T/snap-$name" --durability always "$@" 2>"$T/$name.log" &
  PID=$!
  wait_ready "$name" "$T/$name.log"
}
# req METHOD PATH [curl args...]: body in $T/body, status in $CODE.
req() {
  local m=$1 p=$2; shift 2
  CODE=$(curl -s -o "$T/body" -w '%{http_code}' -X "$m" "$URL$p" "$@")
}
json() { python3 -c 'import sys,json; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T/body" "$1"; }

TOKEN=verdict-test-token-$RANDOM-$RANDOM-0123456789
printf '%s\n' "$TOKEN" >"$T/token"
PROBE='{"action":"http_request","context":{"method":"GET","path":"/secret-probe-path","client_ip":"81.2.69.160","headers":{"user-agent":"Mozilla/5.0"},"env":{"country":"GB"}}}'

# One of this host's non-loopback IPv4 addresses that can reach 127.0.0.1 as
# a source address, or nothing.
OTHER=$(python3 - <<'EOF'
import socket, subprocess
addrs = []
try:
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                         capture_output=True, text=True).stdout
    addrs = [l.split()[3].split("/")[0] for l in out.splitlines() if len(l.split()) > 3]
except OSError:
    pass
for a in addrs:
    try:
        srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
        c = socket.socket(); c.settimeout(2); c.bind((a, 0))
        c.connect(("127.0.0.1", srv.getsockname()[1]))
        peer = srv.accept()[1][0]
        c.close(); srv.close()
        if peer == a:
            print(a); break
    except OSError:
        pass
EOF
)
if [ -z "$OTHER" ]; then
  echo "snapshot_reads.sh: no non-loopback address of this host can reach 127.0.0.1; the checks from another address are skipped" >&2
fi
# from_other METHOD PATH [curl args...]: req, from the other address.
from_other() { local m=$1 p=$2; shift 2; req "$m" "$p" --interface "$OTHER" "$@"; }
EXPLAIN() { echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"explain_decision\",\"arguments\":{\"snapshot_id\":\"$1\"}}}"; }
MCP_H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')

# ---- the default on every address: local ----
start open_default 0.0.0.0
has "$T/open_default.log" '"snapshot_reads":"local"' "default: local, logged at start"
hasnt "$T/open_default.log" '"level":"warn"' "default: no warning"
req POST /v1/decide -d "$PROBE"
eq "$CODE" 200 "default: a decision from loopback"
SNAP=$(json 'd["snapshot_id"]')
req GET "/v1/snapshots/$SNAP"
eq "$CODE" 200 "default: a snapshot read from loopback"
has "$T/body" /secret-probe-path "default: the snapshot from loopback is the decision's"
if [ -n "$OTHER" ]; then
  from_other POST /v1/decide -d "$PROBE"
  eq "$CODE" 200 "default: a decision from another address"
  from_other GET "/v1/snapshots/$SNAP"
  eq "$CODE" 403 "default: a snapshot from another address is refused"
  eq "$(json 'd["error"]["code"]')" snapshot_reads "default: the refusal's code"
  has "$T/body" "from this host only" "default: the refusal says why"
  hasnt "$T/body" /secret-probe-path "default: nothing of the decision in the refusal"
  from_other POST /mcp "${MCP_H[@]}" -d "$(EXPLAIN "$SNAP")"
  eq "$(json 'd["result"]["isError"]')" True "default: explain_decision from another address is a tool error"
  hasnt "$T/body" /secret-probe-path "default: explain_decision shows nothing to another address"
  req POST /mcp "${MCP_H[@]}" -d "$(EXPLAIN "$SNAP")"
  eq "$(json 'd["result"]["isError"]')" False "default: explain_decision from loopback"
fi
stop

# ---- local with a token: another address reads with the token ----
start local_token 0.0.0.0 --admin-token-file "$T/token"
req POST /v1/decide -d "$PROBE"
SNAP=$(json 'd["snapshot_id"]')
req GET "/v1/snapshots/$SNAP"
eq "$CODE" 200 "local with a token: loopback needs none"
if [ -n "$OTHER" ]; then
  from_other GET "/v1/snapshots/$SNAP"
  eq "$CODE" 401 "local with a token: another address without it is 401"
  hasnt "$T/body" /secret-probe-path "local with a token: nothing in the 401"
  from_other GET "/v1/snapshots/$SNAP" -H "Authorization: Bearer $TOKEN-wrong"
  eq "$CODE" 401 "local with a token: a wrong token is 401"
  from_other GET "/v1/snapshots/$SNAP" -H "Authorization: Bearer $TOKEN"
  eq "$CODE" 200 "local with a token: another address with the token reads"
  has "$T/body" /secret-probe-path "local with a token: the snapshot"
fi
stop

# ---- open, chosen on every address: a warning, and everyone reads ----
start open_all 0.0.0.0 --snapshot-reads open
has "$T/open_all.log" '"snapshot_reads":"open"' "open on 0.0.0.0: logged at start"
has "$T/open_all.log" '"level":"warn","event":"snapshot_reads_open"' "open on 0.0.0.0: a warning at start"
has "$T/open_all.log" "anyone who reaches the port can read every recorded decision" "open on 0.0.0.0: the warning says what it means"
req POST /v1/decide -d "$PROBE"
SNAP=$(json 'd["snapshot_id"]')
if [ -n "$OTHER" ]; then
  from_other GET "/v1/snapshots/$SNAP"
  eq "$CODE" 200 "open on 0.0.0.0: another address reads"
fi
stop

# ---- open on loopback: nothing to warn about ----
start open_lo 127.0.0.1 --snapshot-reads open
has "$T/open_lo.log" '"snapshot_reads":"open"' "open on loopback: logged"
hasnt "$T/open_lo.log" snapshot_reads_open "open on loopback: no warning"
stop

# ---- admin on every address: even loopback needs the token ----
start admin_all 0.0.0.0 --snapshot-reads admin --admin-token-file "$T/token"
req POST /v1/decide -d "$PROBE"
SNAP=$(json 'd["snapshot_id"]')
req GET "/v1/snapshots/$SNAP"
eq "$CODE" 401 "admin: loopback without the token is 401"
req GET "/v1/snapshots/$SNAP" -H "Authorization: Bearer $TOKEN"
eq "$CODE" 200 "admin: with the token"
stop

summary
[ "$fail" -eq 0 ]
