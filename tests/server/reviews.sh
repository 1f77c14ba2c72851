#!/usr/bin/env bash
# reviews.sh — the human-review loop against the real server: the example
# gate traffic (`verdict gen`) decided in one batch, every review-needed
# decision in GET /v1/reviews?state=pending (paging with limit and cursor
# walks them all once, in id order; the strategy, action and since filters;
# bad parameters refused naming them), POST /v1/reviews/{id} (the token, the
# id and the body checked; an outcome acknowledged only once on disk; a
# second outcome supersedes the first, both on record), the review metrics;
# then SIGKILL while outcomes stream in, a torn frame left at the log's end,
# and a restart: every acknowledged outcome is there, the torn tail is cut
# and journalled, the queue is rebuilt from the snapshots without the
# answered decisions. Last, `verdict reviews list` and `verdict reviews
# export`, whose labels file `verdict replay --labels` reads.
set -u
BUILD=${1:?usage: reviews.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl python3

TOKEN=verdict-test-token-$RANDOM-$RANDOM-0123456789
printf '%s\n' "$TOKEN" >"$T/token"
SNAP="$T/snap"
start() {
  local name=$1; shift
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  "$V" serve --policy examples/policies --listen "127.0.0.1:$PORT" --threads 2 --snapshots "$SNAP" \
    --durability always --admin-token-file "$T/token" "$@" 2>"$T/$name.log" &
  PID=$!
  wait_ready "$name" "$T/$name.log"
}
req() { # req METHOD PATH [curl args...]: body in $T/body, status in $CODE
  local m=$1 p=$2; shift 2
  CODE=$(curl -s -o "$T/body" -w '%{http_code}' -X "$m" "$URL$p" "$@")
}
json() { python3 -S -c 'import sys,json; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T/body" "$1"; }
metric() { curl -s "$URL/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
AUTH=(-H "Authorization: Bearer $TOKEN")

start first
"$V" gen --kind gate --count 400 --seed 11 >"$T/gate.jsonl" 2>/dev/null
req POST /v1/decide/batch -H 'Content-Type: application/x-ndjson' --data-binary @"$T/gate.jsonl"
eq "$CODE" 200 "the gate traffic decided"
# the review-needed decisions, from the answers: id and action, in id order
python3 - "$T/body" >"$T/want.txt" <<'PY'
import json, sys
body = open(sys.argv[1]).read()
try:
    answers = json.loads(body)
except ValueError:
    answers = [json.loads(l) for l in body.splitlines() if l.strip()]
for a in sorted((a for a in answers if a.get("review")), key=lambda a: a["snapshot_id"]):
    print(a["snapshot_id"], a["action"])
PY
N=$(wc -l <"$T/want.txt")
if [ "$N" -ge 20 ]; then ok; else bad "the gate traffic has review-needed decisions: $N"; fi
NMFA=$(grep -c ' ask_mfa$' "$T/want.txt")

# ---- the queue, page by page ----
req GET '/v1/reviews?state=pending'
eq "$CODE" 200 "GET /v1/reviews"
eq "$(json 'd["pending"]')" "$N" "pending: every review-needed decision"
eq "$(json 'type(d["rebuilding"]).__name__')" bool "the answer says whether the queue is still being rebuilt"
eq "$(json 'len(d["reviews"])')" "$( [ "$N" -gt 50 ] && echo 50 || echo "$N")" "the default page is 50"
: >"$T/got.txt"
CURSOR=
for _ in $(seq 1 100); do
  req GET "/v1/reviews?limit=7${CURSOR:+&cursor=$CURSOR}"
  json '"\n".join(r["snapshot_id"]+" "+r["action"] for r in d["reviews"])' | sed '/^$/d' >>"$T/got.txt"
  CURSOR=$(json 'd["next_cursor"] or ""')
  [ -n "$CURSOR" ] || break
done
if cmp -s "$T/want.txt" "$T/got.txt"; then ok; else bad "paging by 7 walks the queue once, in id order"; diff "$T/want.txt" "$T/got.txt" | head >&2; fi
req GET '/v1/reviews?limit=1'
eq "$(json 'sorted(d["reviews"][0].keys())')" "['action', 'rule', 'snapshot_id', 'source', 'strategy', 'time']" "a pending entry's fields"
eq "$(json 'd["reviews"][0]["strategy"]')" request_gate "its strategy"
req GET '/v1/reviews?strategy=request_gate&limit=1000'
eq "$(json 'len(d["reviews"])')" "$N" "strategy filter: all of them"
req GET '/v1/reviews?strategy=payment_fraud'
eq "$(json 'len(d["reviews"])')" 0 "strategy filter: none"
req GET '/v1/reviews?action=ask_mfa&limit=1000'
eq "$(json 'len(d["reviews"])')" "$NMFA" "action filter"
eq "$(json 'set(r["action"] for r in d["reviews"]) <= {"ask_mfa"}')" True "action filter: only that action"
req GET '/v1/reviews?since=2999-01-01T00:00:00Z'
eq "$(json 'len(d["reviews"])')" 0 "since in the future: none"
req GET '/v1/reviews?since=2000-01-01T00:00:00Z&limit=1000'
eq "$(json 'len(d["reviews"])')" "$N" "since in the past: all"
for q in 'limit=0:limit' 'limit=1001:limit' 'state=open:state' 'since=yesterday:since' 'cursor=xyz:cursor'; do
  req GET "/v1/reviews?${q%%:*}"
  eq "$CODE:$(json 'd["error"]["code"]+":"+str(d["error"]["path"])')" "400:bad_query:${q##*:}" "?${q%%:*} refused"
done
req GET '/v1/reviews?color=red'
eq "$CODE:$(json 'd["error"]["code"]')" "400:bad_query" "an unknown parameter refused"
has "$T/body" "color" "the message names it"
req POST /v1/reviews
eq "$CODE" 405 "POST /v1/reviews: 405"

# ---- outcomes ----
FIRST=$(sed -n 1p "$T/want.txt" | cut -d' ' -f1)
SECOND=$(sed -n 2p "$T/want.txt" | cut -d' ' -f1)
req POST "/v1/reviews/$FIRST" -d '{"action":"allow"}'
eq "$CODE" 401 "an outcome without the token: 401"
req POST "/v1/reviews/$FIRST" -d '{"action":"allow"}' -H 'Authorization: Bearer wrong-token-wrong-token'
eq "$CODE" 401 "an outcome with a wrong token: 401"
req POST "/v1/reviews/not-an-id" "${AUTH[@]}" -d '{"action":"allow"}'
eq "$CODE:$(json 'd["error"]["code"]')" "400:bad_id" "a malformed id: 400 bad_id"
req POST "/v1/reviews/01a00000-0000-7000-8000-000000000000" "${AUTH[@]}" -d '{"action":"allow"}'
eq "$CODE:$(json 'd["error"]["code"]')" "404:snapshot_not_found" "an unknown decision: 404"
for b in '{"note":"x"}:$.action' '{"action":""}:$.action' '{"action":"a b"}:$.action' \
         '{"action":"allow","note":5}:$.note' '{"action":"allow","who":"me"}:$.who' '[1]:$'; do
  req POST "/v1/reviews/$FIRST" "${AUTH[@]}" -d "${b%:*}"
  eq "$CODE:$(json 'd["error"]["code"]+":"+str(d["error"]["path"])')" "400:request:${b##*:}" "body ${b%:*} refused"
done
req POST "/v1/reviews/$FIRST" "${AUTH[@]}" -d '{"action":"allow'
eq "$CODE:$(json 'd["error"]["code"]')" "400:json" "a body that is not JSON"
eq "$(metric verdict_reviews_pending)" "$N" "nothing recorded by the refusals"

req POST "/v1/reviews/$FIRST" "${AUTH[@]}" -d '{"action":"block","note":"first look"}'
eq "$CODE" 200 "an outcome: 200"
eq "$(json 'd["snapshot_id"]+" "+d["action"]+" "+d["note"]+" "+d["strategy"]')" "$FIRST block first look request_gate" "the answer says what was recorded"
eq "$(json 'd["decided"]')" "$(sed -n 1p "$T/want.txt" | cut -d' ' -f2)" "and what had been decided"
req POST "/v1/reviews/$FIRST" "${AUTH[@]}" -d '{"action":"allow","note":"on second thought \"fine\""}'
eq "$CODE" 200 "a second outcome for the same decision: 200"
req POST "/v1/reviews/$SECOND" "${AUTH[@]}" -d '{"action":"allow"}'
eq "$CODE" 200 "an outcome without a note"
eq "$(metric verdict_reviews_pending)" "$((N - 2))" "pending less the two answered"
req GET '/v1/reviews?limit=1000'
eq "$(json 'len(d["reviews"])')" "$((N - 2))" "the answered left the queue"
hasnt "$T/body" "$FIRST" "the first answered is not listed"
req GET '/v1/reviews?state=reviewed'
eq "$(json 'len(d["reviews"])')" 3 "three outcomes on record"
eq "$(json '[r["outcome"]["action"] for r in d["reviews"]]')" "['block', 'allow', 'allow']" "in the order recorded"
eq "$(json '[r["superseded"] for r in d["reviews"]]')" "[True, False, False]" "the first superseded by the second"
eq "$(json 'd["reviews"][1]["outcome"]["note"]')" 'on second thought "fine"' "a note as given"
eq "$(json 'd["reviews"][2]["outcome"]["note"]')" None "no note: null"
req GET '/v1/reviews?state=reviewed&limit=2'
C=$(json 'd["next_cursor"]')
req GET "/v1/reviews?state=reviewed&limit=2&cursor=$C"
eq "$(json '[r["snapshot_id"] for r in d["reviews"]]')" "['$SECOND']" "reviewed: the next page"
eq "$(json 'd["next_cursor"]')" None "reviewed: the last page"
eq "$(metric 'verdict_review_outcomes_total{action="allow"}')" 2 "outcomes by action: allow"
eq "$(metric 'verdict_review_outcomes_total{action="block"}')" 1 "outcomes by action: block"
eq "$(metric verdict_review_duration_seconds_count)" 3 "time to review: three"

# ---- SIGKILL while outcomes stream in ----
tail -n +3 "$T/want.txt" | cut -d' ' -f1 >"$T/rest.txt"
python3 - "$URL" "$TOKEN" "$T/rest.txt" "$T/acked.txt" <<'PY' &
import http.client, sys, urllib.parse
url, token, ids, acked = sys.argv[1:5]
u = urllib.parse.urlparse(url)
out = open(acked, "w", buffering=1)
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
try:
    for i, sid in enumerate(open(ids).read().split()):
        c.request("POST", "/v1/reviews/" + sid, body='{"action":"allow","note":"n%d"}' % i,
                  headers={"Authorization": "Bearer " + token})
        r = c.getresponse(); r.read()
        if r.status == 200:
            out.write(sid + "\n")
except Exception:
    pass
PY
LOADER=$!
for _ in $(seq 1 200); do [ -f "$T/acked.txt" ] && [ "$(wc -l <"$T/acked.txt")" -ge 8 ] && break; sleep 0.05; done
kill -KILL "$PID"; wait "$PID" 2>/dev/null; PID=
wait "$LOADER" 2>/dev/null
ACKED=$(sort -u "$T/acked.txt" | wc -l)
if [ "$ACKED" -ge 8 ]; then ok; else bad "outcomes acknowledged before the kill: $ACKED"; fi
# a frame torn by a crash mid-write: a length and a CRC, half a body
printf '\x40\x00\x00\x00\x01\x02\x03\x04{"id":"01a2' >>"$SNAP/reviews.log"
start second
has "$T/second.log" '"event":"snapshot_repaired"' "the torn tail is reported at start"
has "$T/second.log" '"segment":"reviews.log"' "naming the reviews log"
has "$SNAP/repairs.jsonl" 'reviews.log' "and journalled"
req GET '/v1/reviews?state=reviewed&limit=1000'
json '"\n".join(r["snapshot_id"] for r in d["reviews"])' | sort -u >"$T/on_record.txt"
MISSING=$(sort -u "$T/acked.txt" | comm -23 - "$T/on_record.txt" | wc -l)
eq "$MISSING" 0 "every acknowledged outcome survived SIGKILL"
REC=$(json 'len(d["reviews"])')
if [ "$REC" -ge $((ACKED + 3)) ]; then ok; else bad "outcomes on record after the restart: $REC, want >= $((ACKED + 3))"; fi
ANSWERED=$(($(wc -l <"$T/on_record.txt")))
# the queue is rebuilt after ready, on a thread of its own: its end is logged
for _ in $(seq 1 400); do grep -q '"event":"reviews_rebuilt"' "$T/second.log" && break; sleep 0.05; done
has "$T/second.log" "\"event\":\"reviews_rebuilt\"" "the rebuild's end is logged"
has "$T/second.log" "\"found\":$((N - ANSWERED))," "the rebuild found the unanswered"
req GET '/v1/reviews?limit=1000'
eq "$(json 'd["rebuilding"]')" False "rebuilt: no longer rebuilding"
eq "$(json 'd["pending"]')" "$((N - ANSWERED))" "the queue rebuilt from the snapshots, less the answered"
json '"\n".join(r["snapshot_id"] for r in d["reviews"])' | sort >"$T/pend2.txt"
eq "$(comm -12 "$T/pend2.txt" "$T/on_record.txt" | wc -l)" 0 "no answered decision queued again"
req POST "/v1/reviews/$SECOND" "${AUTH[@]}" -d '{"action":"block","note":"after the restart"}'
eq "$CODE" 200 "an outcome after the restart (appended after the cut)"

# ---- verdict reviews ----
"$V" reviews list --snapshots "$SNAP" >"$T/list.txt" 2>"$T/list.err"
eq "$?" 0 "reviews list"
eq "$(wc -l <"$T/list.txt")" "$((N - ANSWERED))" "reviews list: the pending ones"
has "$T/list.err" "$((N - ANSWERED)) pending" "and their count"
"$V" reviews list --snapshots "$SNAP" --json --action ask_mfa >"$T/list.json" 2>/dev/null
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$T/list.json" && ok || bad "reviews list --json: JSON lines"
"$V" reviews list --snapshots "$SNAP" --state reviewed >"$T/rev.txt" 2>/dev/null
eq "$(wc -l <"$T/rev.txt")" "$((REC + 1))" "reviews list --state reviewed: every outcome"
"$V" reviews export --snapshots "$SNAP" --out "$T/labels.jsonl" 2>"$T/export.err"
eq "$?" 0 "reviews export"
eq "$(wc -l <"$T/labels.jsonl")" "$ANSWERED" "one label a reviewed decision"
eq "$(grep -c "\"$FIRST\"" "$T/labels.jsonl")" 1 "a twice-reviewed decision once"
has "$T/labels.jsonl" "{\"id\":\"$FIRST\",\"action\":\"allow\",\"note\":\"on second thought \\\"fine\\\"\"}" "with its last outcome"
has "$T/labels.jsonl" "{\"id\":\"$SECOND\",\"action\":\"block\",\"note\":\"after the restart\"}" "the outcome after the restart"
"$V" reviews export --snapshots "$SNAP" >"$T/labels2.jsonl" 2>/dev/null
cmp -s "$T/labels.jsonl" "$T/labels2.jsonl" && ok || bad "export to stdout: the same"
stop
"$V" replay --snapshots "$SNAP" --labels "$T/labels.jsonl" --json >"$T/replay.json" 2>"$T/replay.err"
python3 - "$T/replay.json" "$ANSWERED" <<'PY' && ok || bad "replay --labels reads the export: every label loaded and matched"
import json, sys
l = json.load(open(sys.argv[1]))["labels"]
n = int(sys.argv[2])
sys.exit(0 if l["loaded"] == n and l["labelled"] == n else 1)
PY
# a bad byte in the first outcome (a bad sector): that one is skipped, the rest still read
printf 'X' | dd of="$SNAP/reviews.log" bs=1 seek=24 conv=notrunc 2>/dev/null
"$V" reviews list --snapshots "$SNAP" --state reviewed >"$T/rev2.txt" 2>/dev/null
eq "$(wc -l <"$T/rev2.txt")" "$REC" "a damaged outcome skipped, the ones after it read"
hasnt <(head -1 "$T/rev2.txt") "first look" "the damaged one is the one skipped"
"$V" reviews --help >"$T/help.txt"
has "$T/help.txt" "verdict reviews export" "reviews --help"
"$V" reviews list --snapshots "$SNAP" --state done >/dev/null 2>&1
eq "$?" 2 "a bad --state: usage error"
"$V" reviews export --snapshots "$T/none" >/dev/null 2>"$T/none.err"
eq "$?" 0 "export from a folder with no reviews log: nothing to write"

# ---- no snapshots: no queue ----
PORT=$(free_port); URL="http://127.0.0.1:$PORT"
"$V" serve --policy examples/policies --listen "127.0.0.1:$PORT" --no-snapshots --no-store 2>"$T/off.log" &
PID=$!
wait_ready off "$T/off.log"
req GET /v1/reviews
eq "$CODE:$(json 'd["error"]["code"]')" "404:snapshots_off" "--no-snapshots: no queue"
hasnt <(curl -s "$URL/metrics") verdict_reviews_pending "--no-snapshots: no review metrics"
stop
summary
[ "$fail" -eq 0 ]
