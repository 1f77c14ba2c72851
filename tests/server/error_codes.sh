#!/usr/bin/env bash
# error_codes.sh — one name for one error code, wherever it is printed: the
# "code" of POST /v1/decide's error body, of a /v1/decide/batch element and of
# `verdict decide --jsonl`'s error object is vd_err_name's, the same in all
# three for every refusal a request can earn (json, request, limit,
# not_found, no_candidate); and a decision whose snapshot cannot be made
# durable is not_recorded on the command line as on the server (docs/server.md).
# Before the one table, the server and the CLI each had a switch of their
# own, and they disagreed: the CLI called that refusal "error". Against the
# real server with curl, on examples/policies.
set -u
BUILD=${1:?usage: error_codes.sh BUILD_DIR}
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
