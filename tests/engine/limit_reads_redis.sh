#!/usr/bin/env bash
# limit_reads_redis.sh — with counters in Redis, a decision asks Redis only
# about the limits it reads. A `login` against the throttle example reads
# three limits (the two address limits and user_failures, whose `when`
# holds; the rule reads user_failures too), not the five of the strategy:
# redis-server's own command statistics must show at most three script
# calls a login, and the snapshots must name exactly those three counters.
# A rule that reads the whole `limits` map asks about every limit. Skipped,
# and says so, without redis-server. Run from the repo root with the build
# folder as $1.
set -u
BUILD=${1:?usage: limit_reads_redis.sh BUILD_DIR}
VD="$BUILD/verdict"
HERE=$(dirname "$0")
PY=/usr/bin/python3
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  echo "limit_reads_redis.sh: redis-server not found (scripts/deps --test installs it): skipped"
  exit 0
fi
TEST_NAME=engine/limit_reads_redis
. "$HERE/../lib.sh"
scratch
RPID=
on_exit() { kill_wait KILL "$RPID"; }
listening() { $PY -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), timeout=1)" 2>/dev/null; }

RPORT=$(free_port)
redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$T" \
  --loglevel warning >/dev/null 2>&1 &
RPID=$!
for _ in $(seq 1 100); do listening "$RPORT" && break; sleep 0.05; done
listening "$RPORT" || { bad "redis-server did not start"; summary; exit 1; }
R() { redis-cli -p "$RPORT" "$@"; }
# script calls since the last reset (EVALSHA, EVAL, FCALL: however the store asks)
calls() {
  R info commandstats | tr -d '\r' |
    sed -n 's/^cmdstat_\(evalsha\|eval\|fcall\|evalsha_ro\|eval_ro\|fcall_ro\):calls=\([0-9]*\),.*/\2/p' |
    awk '{ n += $1 } END { print n + 0 }'
}
counters() { # the counters each snapshot of folder $1 names, one line each
  "$VD" snapshots export --snapshots "$1" |
    $PY -c 'import json,sys
for l in sys.stdin: print(",".join(json.loads(l)["inputs"]["counters"]))'
}

mkdir -p "$T/throttle"
cp examples/policies/throttle.yaml "$T/throttle/"
N=20
for i in $(seq 1 $N); do
  echo "{\"action\":\"login\",\"context\":{\"ip\":\"203.0.113.$i\",\"user\":\"u$i\"}}"
done >"$T/logins.jsonl"

R config resetstat >/dev/null
"$VD" decide --policy "$T/throttle" --jsonl --no-store --snapshots "$T/snap1" --durability none \
  --state "redis://127.0.0.1:$RPORT" <"$T/logins.jsonl" >"$T/out1" 2>"$T/err1"
eq "$?" 0 "throttle logins decided"
eq "$(grep -c '"action":"allow"' "$T/out1")" "$N" "every login allowed"
c=$(calls)
[ "$c" -gt 0 ] && [ "$c" -le $((3 * N)) ] && ok ||
  bad "a login asks Redis about its three limits: $c script calls for $N logins (want 1..$((3 * N)))"
eq "$(counters "$T/snap1" | sort -u)" "failed_logins,failed_logins_network,user_failures" \
  "a login's snapshot names the three counters it read"

# the same strategy with a rule that reads the whole map: every limit is read
mkdir -p "$T/whole"
sed 's/limits.user_failures.count >= 5/size(limits) > 5 \&\& limits.user_failures.count >= 5/' \
  examples/policies/throttle.yaml >"$T/whole/throttle.yaml"
has "$T/whole/throttle.yaml" "size(limits) > 5" "the whole-map rule is in place"
R config resetstat >/dev/null
"$VD" decide --policy "$T/whole" --jsonl --no-store --snapshots "$T/snap2" --durability none \
  --state "redis://127.0.0.1:$RPORT" <"$T/logins.jsonl" >"$T/out2" 2>"$T/err2"
eq "$?" 0 "whole-map logins decided"
c2=$(calls)
[ "$c2" -gt "$c" ] && ok || bad "reading \`limits\` asks about every limit: $c2 calls, not more than $c"
eq "$(counters "$T/snap2" | sort -u)" \
  "failed_logins,failed_logins_network,password_resets,api_hourly,user_failures" \
  "a whole-map read names every counter"

summary
[ "$fail" -eq 0 ]
