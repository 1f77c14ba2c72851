#!/bin/bash
# The CLI as a user meets it: `verdict eval`, --help, --version, exit codes,
# errors on stderr with the place, and every bundled example giving its
# expected result.
set -u
BUILD=${1:-build}
V="$BUILD/verdict"
. tests/lib.sh

# expect_out WANT_STDOUT WANT_RC ARGS... : stdout and exit status must match
expect_out() {
  local want=$1 want_rc=$2
  shift 2
  local got rc
  got=$("$V" "$@" 2>/dev/null)
  rc=$?
  if [ "$got" = "$want" ] && [ $rc -eq "$want_rc" ]; then ok; else bad "verdict $* -> '$got' (rc $rc), want '$want' (rc $want_rc)"; fi
}

# expect_err PATTERN WANT_RC ARGS... : stderr must match the grep pattern
expect_err() {
  local pat=$1 want_rc=$2
  shift 2
  local err rc
  err=$("$V" "$@" 2>&1 >/dev/null)
  rc=$?
  if echo "$err" | grep -qE -- "$pat" && [ $rc -eq "$want_rc" ]; then ok; else bad "verdict $* stderr '$err' (rc $rc), want /$pat/ (rc $want_rc)"; fi
}

expect_out "3" 0 eval '1 + 2'
expect_out "true" 0 eval -b '{"path": "/api/v1/users"}' 'path.startsWith("/api/v1")'
expect_out "false" 0 eval --bindings '{"env": {"country": "US"}, "path": "/api/v1"}' 'env.country == "CN" && path.startsWith("/api/v1")'
expect_out '"héllo wörld"' 0 eval '"héllo" + " " + "wörld"'
expect_out '[2,4,6]' 0 eval '[1, 2, 3].map(x, x * 2)'
expect_out '{"a":1}' 0 eval '{"a": 1}'
expect_out '18446744073709551615' 0 eval '18446744073709551615u'
expect_out '0.1' 0 eval '0.1'
expect_out '"aGk="' 0 eval "b'hi'"
expect_out '"int"' 0 eval 'type(1)'
expect_out 'null' 0 eval 'null'
expect_out 'true' 0 eval --bindings= 'true'

# compile errors: line:column and a caret, exit 1
expect_err '<expr>:1:5:' 1 eval '1 + )'
expect_err '\^' 1 eval '1 + )'
expect_err ':2:' 1 eval $'true &&\n  (1 +'
# evaluation errors: exit 1, named
expect_err 'division by zero' 1 eval '1 / 0'
expect_err 'overflow' 1 eval '9223372036854775807 + 1'
expect_err "no such key" 1 eval -b '{"m": {}}' 'm.missing'
# bad bindings JSON: the place is named
expect_err 'line 1|1:' 1 eval -b '{"a": [1, 2,]}' 'a'
expect_err 'object' 1 eval -b '[1]' 'true'
# usage errors: exit 2
expect_err 'unknown option' 2 eval --nope '1'
expect_err 'exactly one expression' 2 eval
expect_err 'unknown command' 2 frobnicate
expect_err 'No such file|such file' 1 eval --file /nonexistent/x.cel

# help and version
"$V" --help | grep -q '^usage: verdict' && ok || bad "--help"
"$V" eval --help | grep -q -- '--bindings' && ok || bad "eval --help"
"$V" help eval | grep -q -- '--bindings' && ok || bad "help eval"
"$V" --version | grep -qE '^verdict [0-9]+\.[0-9]+\.[0-9]+$' && ok || bad "--version"
"$V" >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "no arguments must exit 2"

# the bundled examples, each with its expected result
if scripts/run-examples "$V" examples/expressions >/dev/null 2>&1; then ok; else
  bad "examples: $(scripts/run-examples "$V" examples/expressions 2>&1 | tail -20)"
fi

summary
[ $fail -eq 0 ]
