# tests/lib.sh — what the shell tests share: checks that count, the summary
# line, and, for those that start `verdict serve`, a free loopback port,
# waiting for the server to be ready and stopping it. Source it from the repo
# root (CTest runs every script there) after setting TEST_NAME (the name the
# summary line gives) and, where the test uses one python, PY. The test keeps
# $PID (the server), $URL and its own cleanup trap; a script may redefine a
# check after sourcing (to show more of its own output on a failure).
pass=0 fail=0
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
