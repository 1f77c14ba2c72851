#!/usr/bin/env bash
# cli.sh — limits from the command line: requests of one `verdict decide`
# run share counters and separate runs do not, unless --state-file keeps
# them; `verdict serve --state-file` keeps counts and penalties across a
# restart; bad --state values are usage errors; `verdict test` presets
# counters and fails a test whose preset changes the answer. Run from the
# repo root with the build folder as $1.
set -u
BUILD=${1:?usage: cli.sh BUILD_DIR}
V="$BUILD/verdict"
TEST_NAME=state/cli.sh
. tests/lib.sh
scratch
action() { sed -n 's/^{"action":"\([a-z_]*\)".*/\1/p'; }

mkdir -p "$T/b"
cat >"$T/b/reset.yaml" <<'YAML'
strategy: reset
limits:
  once_a_minute:
    key: user
    window: 1m
    budget: 1
    penalty: 1h
    action: block
default: allow
tests:
  - name: first
    context: {user: ana}
    expect: allow
  - name: second
    context: {user: ana}
    counters: {once_a_minute: 1}
    expect: block
YAML
REQ='{"action":"reset","context":{"user":"ana"}}'
D=(decide -p "$T/b" --no-snapshots --no-store)

# one run: its requests share the counters
printf '%s\n%s\n' "$REQ" "$REQ" >"$T/two.jsonl"
eq "$("$V" "${D[@]}" --jsonl "$T/two.jsonl" | action | tr '\n' ' ')" "allow block " "one run, two requests"
# separate runs: each starts empty
eq "$(echo "$REQ" | "$V" "${D[@]}" | action)" allow "a second run starts empty"
# --state-file: kept between runs
eq "$(echo "$REQ" | "$V" "${D[@]}" --state-file "$T/c" | action)" allow "first run with a file"
[ -s "$T/c" ] && ok || bad "--state-file was not written"
eq "$(( 0$(stat -c %a "$T/c") & 7 ))" 0 "--state-file: not readable by others"
eq "$(echo "$REQ" | "$V" "${D[@]}" --state-file "$T/c" | action)" block "second run with the file"

# usage errors
"$V" "${D[@]}" --state memcached://x - </dev/null 2>"$T/err"
eq "$?" 2 "--state with a bad URL exits 2"
grep -q "redis://" "$T/err" && ok || bad "the --state error names what is accepted"
"$V" "${D[@]}" --state-on-error maybe - </dev/null 2>/dev/null
eq "$?" 2 "--state-on-error maybe exits 2"
"$V" decide --help | grep -q -- "--state URL" && ok || bad "decide --help lists --state"
"$V" serve --help | grep -q -- "--state-file" && ok || bad "serve --help lists --state-file"

# verdict test: presets pass, and a wrong expectation fails
"$V" test "$T/b" >"$T/out"; eq "$?" 0 "verdict test passes"
grep -q "2 passed, 0 failed" "$T/out" && ok || bad "verdict test: $(tail -1 "$T/out")"
sed -i 's/    expect: block/    expect: allow/' "$T/b/reset.yaml"
"$V" test "$T/b" >"$T/out"; eq "$?" 1 "a preset that changes the answer fails the test"
grep -q "limits.once_a_minute" "$T/out" && ok || bad "the failure names the limit"
sed -i 's/    counters: {once_a_minute: 1}/    counters: {once_a_minte: 1}/' "$T/b/reset.yaml"
"$V" check "$T/b" >"$T/out" 2>&1
grep -q "no limit named 'once_a_minte'" "$T/out" && ok || bad "check names a preset of an unknown limit"
sed -i 's/    counters: {once_a_minte: 1}/    counters: {once_a_minute: 1}/; s/    expect: allow$/    expect: block/' "$T/b/reset.yaml"

# serve --state-file: a penalty survives a restart
PORT=$(free_port)
serve() {
  "$V" serve --policy "$T/b" --listen "127.0.0.1:$PORT" --no-snapshots --no-store \
    --state-file "$T/s" 2>>"$T/serve.log" &
  PID=$!
  for _ in $(seq 1 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/readyz")" = 200 ] && return
    sleep 0.1
  done
}
ask() { curl -s "http://127.0.0.1:$PORT/v1/decide" -d "$REQ" | action; }
serve
eq "$(ask)" allow "serve: first reset"
eq "$(ask)" block "serve: second reset"
kill -TERM "$PID"; wait "$PID"; PID=
serve
eq "$(ask)" block "serve after a restart: the penalty is still running"
kill -TERM "$PID"; wait "$PID"; PID=

summary
[ "$fail" = 0 ]
