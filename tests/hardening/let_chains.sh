#!/usr/bin/env bash
# let_chains.sh — values and evaluations built across lets are bounded at
# load (issue 19). Each expression is within the parser's depth limit, but
# a chain of lets is not: 1,000 lets each wrapping the one before in 120
# lists built a 120,000-level value at run time (`verdict decide` died with
# SIGSEGV in the evaluator, `verdict check` said nothing), and 200,000 lets
# `lN: lN-1` kept `verdict check` busy past 300 s (the let graph and the
# YAML duplicate-key check were quadratic). Now: a clear error naming the
# let's file:line:col from `verdict check` and `verdict decide`, the long
# chain refused in bounded time, and a file just under every bound loads
# and decides. Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: let_chains.sh BUILD_DIR}
V="$BUILD/verdict"
PY=/usr/bin/python3
TEST_NAME=hardening/let_chains
. tests/lib.sh
scratch

# gen KIND FILE N [DEPTH]: the attacks, generated (not kept in the tree)
#   deep:  l0: "1", lN: "[[…lN-1…]]" (DEPTH brackets)
#   chain: l0: "1", lN: lN-1
#   flat:  l0 … lN-1, each a number
# and a rule that reads the last let.
gen() {
  $PY - "$@" <<'PYEOF'
import sys
kind, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
depth = int(sys.argv[4]) if len(sys.argv) > 4 else 0
w = open(out, "w")
w.write("strategy: lets\nlet:\n  l0: \"1\"\n")
for i in range(1, n):
    if kind == "deep":
        w.write('  l%d: "%sl%d%s"\n' % (i, "[" * depth, i - 1, "]" * depth))
    elif kind == "chain":
        w.write("  l%d: l%d\n" % (i, i - 1))
    else:
        w.write("  l%d: \"%d\"\n" % (i, i))
w.write("rules:\n  - name: r\n    if: size([l%d]) == 1\n    action: deny\ndefault: allow\n" % (n - 1))
PYEOF
}
echo '{"action":"lets"}' >"$T/req.json"
# run DIR: check, then decide, each in a fresh copy (no store between them)
run() {
  timeout 120 "$V" check "$1" >"$T/check.out" 2>&1
  echo $? >"$T/check.rc"
  timeout 120 "$V" decide --policy "$1" --no-snapshots "$T/req.json" >"$T/decide.out" 2>&1
  echo $? >"$T/decide.rc"
}

# ---- 1,000 lets, each 120 lists around the one before ----
mkdir -p "$T/deep"
gen deep "$T/deep/deep.yaml" 1000 120
run "$T/deep"
eq "$(cat "$T/check.rc")" 1 "deep: check refuses it (exit 1, not a crash)"
has "$T/check.out" "deep.yaml:8:8: let.l5: let 'l5' nests lists and maps 600 levels deep through the lets it reads (through 'l4'), over the limit of 512" "deep: check names the let's file:line:col and the limit"
eq "$(grep -c 'nests lists and maps' "$T/check.out")" 1 "deep: one error, not one per let after it"
eq "$(cat "$T/decide.rc")" 1 "deep: decide refuses the bundle (exit 1, not SIGSEGV)"
has "$T/decide.out" "deep.yaml:8:8: let.l5: let 'l5' nests lists and maps 600 levels deep" "deep: decide says where"
# and with the version store (the parsed cache, lazily compiled lets): the same
rm -rf "$T/deep/.verdict"
timeout 120 "$V" decide --policy "$T/deep" "$T/req.json" >"$T/out" 2>&1
eq "$?" 1 "deep: decide with the store refuses it too"
has "$T/out" "over the limit of 512" "deep: decide with the store says why"

# ---- 200,000 lets lN: lN-1: refused in bounded time ----
mkdir -p "$T/chain"
gen chain "$T/chain/chain.yaml" 200000
timeout 120 "$V" check "$T/chain" >"$T/out" 2>&1
eq "$?" 1 "chain of 200,000: check finishes (exit 1; 124 is the hang guard)"
has "$T/out" "chain.yaml:10003:3: let: 200000 lets, over the limit of 10000 a strategy" "chain of 200,000: the count, at the first let over it"

# ---- 10,000 lets in one chain: the evaluation bound ----
gen chain "$T/chain/chain.yaml" 10000
run "$T/chain"
eq "$(cat "$T/check.rc")" 1 "chain of 10,000: refused"
has "$T/check.out" "chain.yaml:244:9: let.l241: let 'l241' evaluates 4098 levels deep through the lets it reads (through 'l240'; a let read counts 16), over the limit of 4096" "chain of 10,000: the first let too deep, by file:line:col"
eq "$(cat "$T/decide.rc")" 1 "chain of 10,000: decide refuses it (not a crash)"

# ---- a rule, and a limit's key, reading a chain that is just within ----
gen chain "$T/chain/chain.yaml" 241
timeout 120 "$V" check "$T/chain" >"$T/out" 2>&1
eq "$?" 1 "a rule over a 241-let chain: refused"
has "$T/out" "chain.yaml:246:9: rules[0].if: rule 'r' evaluates 4101 levels deep" "the rule, by file:line:col"
gen chain "$T/chain/chain.yaml" 240
cat >>"$T/chain/chain.yaml" <<'YAML'
limits:
  by_key:
    key: string([[[[[[[[[[[[[[[[[[[[l239]]]]]]]]]]]]]]]]]]]])
    window: 1m
    budget: 5
    action: deny
YAML
timeout 120 "$V" check "$T/chain" >"$T/out" 2>&1
eq "$?" 1 "a limit's key over a 240-let chain: refused"
has "$T/out" "limits.by_key.key: limit 'by_key' (key) evaluates" "the limit's key, named"

# ---- just under every bound: 10,000 lets, a 240-let chain, 512 levels ----
mkdir -p "$T/under"
$PY - "$T/under/under.yaml" <<'PYEOF'
import sys
w = open(sys.argv[1], "w")
w.write("strategy: lets\nlet:\n  c0: \"1\"\n")
for i in range(1, 240):
    w.write("  c%d: c%d\n" % (i, i - 1))
w.write('  d0: "%s1%s"\n' % ("[" * 120, "]" * 120))
for i in range(1, 4):
    w.write('  d%d: "%sd%d%s"\n' % (i, "[" * 120, i - 1, "]" * 120))
w.write('  d4: "%sd3%s"\n' % ("[" * 32, "]" * 32))  # 512 levels
for i in range(10000 - 240 - 5):
    w.write("  f%d: \"%d\"\n" % (i, i))
w.write("rules:\n  - name: r\n    if: c239 == 1 && size(d4) == 1\n    action: deny\ndefault: allow\n")
PYEOF
run "$T/under"
eq "$(cat "$T/check.rc")" 0 "under: check accepts 10,000 lets, a 240-let chain and a 512-level value"
eq "$(cat "$T/decide.rc")" 0 "under: decide runs"
has "$T/decide.out" '"action":"deny"' "under: the rule reading them matches"
# one more of each is refused
sed -i 's/^  d4: "\[/  d4: "[[/; s/d3\]/d3]]/' "$T/under/under.yaml"
timeout 120 "$V" check "$T/under" >"$T/out" 2>&1
eq "$?" 1 "under, one level more: refused"
has "$T/out" "let 'd4' nests lists and maps 513 levels deep through the lets it reads (through 'd3')" "under, one level more: the limit"
mkdir -p "$T/flat"
gen flat "$T/flat/flat.yaml" 10001
timeout 120 "$V" check "$T/flat" >"$T/out" 2>&1
eq "$?" 1 "10,001 lets: refused"
has "$T/out" "flat.yaml:10003:3: let: 10001 lets, over the limit of 10000" "10,001 lets: the place"
gen flat "$T/flat/flat.yaml" 10000
timeout 120 "$V" check "$T/flat" >"$T/out" 2>&1
eq "$?" 0 "10,000 lets: accepted"

# ---- what the let graph tells rules: `model` read through a let ----
# (the let an earlier let reads too: the pass over the rules starts over)
mkdir -p "$T/model"
cat >"$T/model/m.yaml" <<'YAML'
strategy: m
let:
  a: b + 1
  b: model.score
rules:
  - name: r
    if: b > 0.5
    action: deny
default: allow
YAML
timeout 120 "$V" check "$T/model" >"$T/out" 2>&1
eq "$?" 1 "model through a let: refused without a fallback model"
has "$T/out" "m.yaml:7:9: rules[0].if: rule 'r' reads model, but the strategy has no fallback model" "model through a let: the rule, by file:line:col"

summary
[ "$fail" -eq 0 ]
