#!/usr/bin/env bash
# config.sh — `verdict serve --config FILE`: the settings file sets what the
# options set (the server's start line and its behaviour show it), the
# command line overrides it (exclusive pairs too), and every bad line is
# refused with FILE:LINE before anything starts.
set -u
BUILD=${1:?usage: config.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl python3

BUNDLE=tests/engine/bundles/gate
start_line() { grep -m1 '"event":"start"' "$1"; }
field() { python3 -c 'import sys,json; print(json.loads(sys.stdin.readline())[sys.argv[1]])' "$1"; }

# serve_with LOG ARGS...: starts the server (in $PID, at $URL) and waits for it.
serve_with() {
  local log=$1; shift
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  "$V" serve "$@" 2>"$log" &
  PID=$!
  wait_ready config "$log"
}

# ---- the file alone ----
cat >"$T/verdict.conf" <<CONF
# verdict serve settings

policy = $BUNDLE
  listen   =   127.0.0.1:PORT
threads = 3
snapshots = $T/snaps
store = $T/store1
durability = always
on-full = drop
watch = true
access-log = "$T/access log"
max-body = 4096
admin-token-file = $T/token
snapshot-reads = admin
state-timeout = 20
CONF
echo "0123456789abcdef0123" >"$T/token"
PORT=$(free_port)
sed -i "s/PORT/$PORT/" "$T/verdict.conf"
URL="http://127.0.0.1:$PORT"
"$V" serve --config "$T/verdict.conf" 2>"$T/log1" &
PID=$!
wait_ready config "$T/log1"
S=$(start_line "$T/log1")
eq "$(field listen <<<"$S")" "127.0.0.1:$PORT" "file: listen"
eq "$(field threads <<<"$S")" 3 "file: threads"
eq "$(field snapshots <<<"$S")" "$T/snaps" "file: snapshots"
eq "$(field on_full <<<"$S")" drop "file: on-full"
eq "$(field watch <<<"$S")" True "file: watch = true"
eq "$(field admin <<<"$S")" True "file: admin-token-file"
eq "$(field snapshot_reads <<<"$S")" admin "file: snapshot-reads"
REQ='{"action":"gate","context":{"path":"/api/v1/x","country":"CN","ua":"Mozilla"}}'
eq "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/decide" -d "$REQ")" 200 "file: decides"
big=$(head -c 5000 /dev/zero | tr '\0' x)
eq "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/decide" -d "$big")" 413 "file: max-body"
[ -s "$T/access log" ] && ok || bad "file: the access log (a quoted name with a space) is written"
stop

# ---- the command line overrides the file ----
cat >"$T/o.conf" <<CONF
policy = $BUNDLE
listen = 127.0.0.1:1
threads = 3
no-snapshots = true
store = $T/store
watch = false
CONF
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
"$V" serve --threads 1 --listen "127.0.0.1:$PORT" --config "$T/o.conf" --snapshots "$T/snaps2" --no-store 2>"$T/log2" &
PID=$!
wait_ready config "$T/log2"
S=$(start_line "$T/log2")
eq "$(field listen <<<"$S")" "127.0.0.1:$PORT" "override: listen"
eq "$(field threads <<<"$S")" 1 "override: threads"
eq "$(field snapshots <<<"$S")" "$T/snaps2" "override: --snapshots over no-snapshots = true"
eq "$(field watch <<<"$S")" False "file: watch = false"
[ -e "$T/store" ] && bad "override: --no-store over store = DIR (the store was made)" || ok
stop

# ---- bad files: FILE:LINE, exit 2, nothing started ----
# refuse LINE WANT DESCRIPTION: a file of a good first line and LINE as
# its second must be refused at line 2 with WANT in the message.
refuse() {
  printf 'policy = %s\n%s\n' "$BUNDLE" "$1" >"$T/bad.conf"
  "$V" serve --config "$T/bad.conf" >"$T/out" 2>"$T/err"
  eq "$?" 2 "$3: exit 2"
  has "$T/err" "verdict serve: $T/bad.conf:2: $2" "$3"
}
refuse 'threds = 4' "unknown setting 'threds'" "unknown setting"
refuse 'threads = 0' "threads wants a number from 1 to 256, not 0" "bad number"
refuse 'threads 4' "expected NAME = VALUE" "no ="
refuse 'durability = sometimes' "durability takes none, interval or always, not sometimes" "bad choice"
refuse 'watch = yes' "watch takes true or false, not yes" "bad flag"
refuse 'listen =' "listen needs a value" "empty value"
refuse 'access-log = "x' "access-log: no closing quote" "open quote"
refuse 'access-log = "x" y' "access-log: text after the closing quote" "text after a quote"
refuse 'state = memcached' "state takes local or redis://HOST:PORT, not memcached" "a counter-store setting"
refuse 'config = other.conf' "config: a settings file cannot name another" "no nesting"
refuse '--threads = 2' "unknown setting '--threads'" "names are without dashes"
printf 'policy = %s\nno-snapshots = true\nsnapshots = /x\n' "$BUNDLE" >"$T/bad.conf"
"$V" serve --config "$T/bad.conf" 2>"$T/err"
eq "$?" 2 "a contradiction: exit 2"
has "$T/err" "$T/bad.conf:3: snapshots contradicts an earlier line" "a contradiction"

"$V" serve --config "$T/missing.conf" 2>"$T/err"
eq "$?" 1 "a missing file: exit 1"
has "$T/err" "verdict serve: $T/missing.conf: No such file or directory" "a missing file"
"$V" serve --config "$T/o.conf" --config "$T/o.conf" 2>"$T/err"
eq "$?" 2 "--config twice: exit 2"
# a command-line error is still the command line's
"$V" serve --config "$T/o.conf" --threads 0 2>"$T/err"
eq "$?" 2 "a bad flag with a file: exit 2"
has "$T/err" "verdict serve: --threads wants a number from 1 to 256, not 0" "a bad flag with a file"

[ -e "$BUNDLE/.verdict" ] && bad "a server wrote into the bundle folder" || ok

summary
[ "$fail" = 0 ]
