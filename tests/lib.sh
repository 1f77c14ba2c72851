# tests/lib.sh — what the shell tests share: the preamble (a scratch folder,
# the trap that cleans up after the test, the commands it needs), checks that
# count, the summary line, and, for those that start `verdict serve`, a free
# loopback port, waiting for the server to be ready and stopping it. It does
# not parse the test's arguments or name the binary: each test says how it is
# run. A test starts:
#
#   set -u
#   BUILD=${1:?usage: NAME.sh BUILD_DIR}
#   V="$BUILD/verdict"
#   . tests/lib.sh      # from the repo root: CTest runs every script there
#   scratch             # $T, PID=, the EXIT trap
#   need curl           # or fail: "NAME.sh: curl is needed (scripts/deps)"
#
# TEST_NAME (the name the summary line gives) is the script's file name
# unless the test sets it before sourcing (those whose file names clash name
# their folder too: engine/cli.sh); set PY first where the test uses one
# python. The test keeps $PID (the server it starts) and $URL.
#
# On exit the trap runs the test's own `on_exit` if it defines one (to stop
# what else it started: other servers, nginx, redis-server, a background
# load; in the order it needs), then kills $PID with SIGKILL and waits for
# it, then removes $T; the test's exit status stays its own. An `on_exit`
# that stops $PID another way (another signal, or a wait) sets PID= when
# done. A script may redefine a check after sourcing (to show more of its
# own output on a failure).
: "${TEST_NAME:=$(basename "$0")}"
pass=0 fail=0

# scratch: makes the scratch folder $T, sets PID= and installs the EXIT trap
# (and INT and TERM ones that exit, so that the EXIT trap runs).
scratch() {
  T=$(mktemp -d -t "verdict-$(basename "$0" .sh).XXXXXX") ||
    { echo "$(basename "$0"): cannot make a scratch folder" >&2; exit 1; }
  PID=
  trap lib_cleanup EXIT
  # Ctrl-C or a TERM (a runner giving up) ends the test, and so runs the
  # cleanup; otherwise a server that took the SIGINT would leave the script
  # running on, failing check after check
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
# guard_bundle: the folder $T/p holds the shipped agent_guard strategy alone,
# so that the other example strategies do not matter to an agent test.
guard_bundle() {
  mkdir -p "$T/p" && cp examples/policies/agent_guard.yaml "$T/p/"
}
lib_cleanup() {
  if declare -F on_exit >/dev/null; then on_exit; fi
  kill_wait KILL "$PID"
  rm -rf "$T"
}
# kill_wait SIGNAL PID: if PID is set, sends it SIGNAL and waits for it.
kill_wait() {
  if [ -n "$2" ]; then kill "-$1" "$2" 2>/dev/null; wait "$2" 2>/dev/null; fi
}
# need CMD...: fails the test, saying what to install, unless each CMD is there.
need() {
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null || { echo "$(basename "$0"): $c is needed (scripts/deps)" >&2; exit 1; }
  done
}

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
has() { # has FILE TEXT DESCRIPTION
  if grep -qF -- "$2" "$1"; then ok; else bad "$3: no '$2' in $(basename "$1")"; head -c 2000 "$1" | head -20 | sed 's/^/  | /' >&2; fi
}
hasnt() { # hasnt FILE TEXT DESCRIPTION
  if grep -qF -- "$2" "$1"; then bad "$3: '$2' found in $(basename "$1")"; else ok; fi
}
eq() { # eq GOT WANT DESCRIPTION
  if [ "$1" = "$2" ]; then ok; else bad "$3: got '$1', want '$2'"; fi
}
summary() { echo "$TEST_NAME: $pass passed, $fail failed"; }
free_port() { ${PY:-python3} -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_ready NAME LOG [TENTHS]: waits (30 s by default) for $URL/readyz while
# $PID lives; if it never answers, fails the test with the server's log.
wait_ready() {
  for _ in $(seq 1 "${3:-300}"); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/readyz")" = 200 ] && return 0
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  bad "$1: the server did not become ready"; sed 's/^/  log: /' "$2" >&2
  summary; exit 1
}
stop() { # SIGTERM, and the server must exit 0
  kill -TERM "$PID"; wait "$PID"; local rc=$?; PID=
  eq "$rc" 0 "SIGTERM: exit 0"
}
