#!/bin/bash
# `verdict model` as a user meets it: info, predict (file and stdin, CSV
# errors with file:line), check with a golden file (passes on XGBoost's own
# outputs, fails when one output is off by one float32 ulp), refusals and
# usage errors with their exit codes.
set -u
BUILD=${1:-build}
V="$BUILD/verdict"
G=tests/model/golden
TEST_NAME="model cli"
. tests/lib.sh
scratch

# expect RC PATTERN CMD...: exit status and a grep pattern on stdout+stderr
expect() {
  local want_rc=$1 pat=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ $rc -eq "$want_rc" ] && echo "$out" | grep -qE -- "$pat"; then ok; else
    bad "$* -> rc $rc, output: $(echo "$out" | head -5), want rc $want_rc and /$pat/"; fi
}

expect 0 "usage: verdict model info" "$V" model --help
expect 0 "usage: verdict model info" "$V" model predict --help
expect 2 "needs a subcommand" "$V" model
expect 2 "unknown subcommand" "$V" model frobnicate x.json
expect 2 "needs the model file" "$V" model info
expect 2 "unknown option" "$V" model info --frob $G/cat.json
expect 0 "model +verdict|inspect an XGBoost model" "$V" --help

# info
expect 0 "objective +multi:softprob" "$V" model info $G/iris_softprob.json
expect 0 "outputs +3 \(classes\)" "$V" model info $G/iris_softprob.json
expect 0 "version +$(sha256sum $G/cat.json | cut -c1-64)" "$V" model info $G/cat.json
expect 0 "0 +f0 +categorical" "$V" model info $G/cat.json
expect 0 "3 +petal_width +numeric" "$V" model info $G/iris_softprob.json

# predict: the golden rows' features give XGBoost's outputs (probs then margins)
cut -d, -f1-4 $G/iris_softprob.csv > "$T/rows.csv"
awk -F, 'NR > 1 { print $8 "," $9 "," $10 "," $5 "," $6 "," $7 }' $G/iris_softprob.csv > "$T/want"
"$V" model predict $G/iris_softprob.json "$T/rows.csv" > "$T/got" && cmp -s "$T/got" "$T/want" && ok ||
  bad "predict iris_softprob differs from XGBoost's outputs"
"$V" model predict $G/iris_softprob.json - < "$T/rows.csv" > "$T/got2" && cmp -s "$T/got2" "$T/want" && ok ||
  bad "predict from stdin differs"
cut -d, -f1-30 $G/bc_missing.csv > "$T/bc.csv"
awk -F, 'NR > 1 { print $32 "," $31 }' $G/bc_missing.csv > "$T/bcwant"
"$V" model predict $G/bc_missing.json < "$T/bc.csv" > "$T/bcgot" && cmp -s "$T/bcgot" "$T/bcwant" && ok ||
  bad "predict bc_missing (missing cells) differs"
# extra columns after the features are ignored
"$V" model predict $G/iris_softprob.json $G/iris_softprob.csv > "$T/got3" && cmp -s "$T/got3" "$T/want" && ok ||
  bad "predict with trailing columns differs"

# predict: CSV errors name file:line
printf 'f0,f1\n3,0.5\n2,abc\n' > "$T/badcell.csv"
expect 1 "badcell.csv:3: column 2 \(f1\): 'abc' is not a finite number" "$V" model predict $G/cat.json "$T/badcell.csv"
printf 'f1,f0\n3,0.5\n' > "$T/order.csv"
expect 1 "order.csv:1: column 1 is 'f1', but the model's feature 0 is 'f0'" "$V" model predict $G/cat.json "$T/order.csv"
printf 'f0,f1\n3,0.5,1\n' > "$T/cells.csv"
expect 1 "cells.csv:2: 3 cells, but the header has 2 columns" "$V" model predict $G/cat.json "$T/cells.csv"
printf 'f0\n3\n' > "$T/short.csv"
expect 1 "short.csv:1: the header has 1 columns, but the model takes 2" "$V" model predict $G/cat.json "$T/short.csv"
expect 1 "empty input" "$V" model predict $G/cat.json /dev/null
expect 1 "no-such.csv: No such file" "$V" model predict $G/cat.json "$T/no-such.csv"
# an empty cell is missing: same as XGBoost on a NaN
printf 'f0,f1\n,0.5\n' | "$V" model predict $G/cat.json > "$T/nan" && [ -s "$T/nan" ] && ok || bad "empty cell"

# check: goldens pass bit for bit; one ulp off fails
for c in bc_dense bc_missing cat iris_softmax diabetes_reg deep; do
  expect 0 "0 differ \(bit for bit equal\)" "$V" model check $G/$c.json --golden $G/$c.csv
done
# change the last digit of the first row's probability: a different float32
awk -F, 'BEGIN { OFS = "," } NR == 2 { $NF = sprintf("%.9g", $NF + 1e-7) } { print }' $G/bc_dense.csv > "$T/off.csv"
expect 1 "off.csv:2: output 0" "$V" model check $G/bc_dense.json --golden "$T/off.csv"
expect 1 "1 differ" "$V" model check $G/bc_dense.json --golden "$T/off.csv"

# refusals
sed 's/"name":"gbtree"/"name":"dart"/' $G/cat.json > "$T/dart.json"
expect 1 "dart.json: at \\\$.learner.gradient_booster.name: booster \"dart\" is not supported" "$V" model info "$T/dart.json"
printf '{"learner": ' > "$T/trunc.json"
expect 1 "trunc.json:1:" "$V" model info "$T/trunc.json"
expect 1 "cannot open" "$V" model info "$T/none.json"

# the spec beside the model is checked by info and check
cp $G/cat.json "$T/m.json"
printf 'features:\n  - {name: f0, type: categorical, expr: env.country, vocab: [a, b]}\n  - {name: f1, type: number, expr: rate}\n' > "$T/m.features.yaml"
expect 0 "f0 +categorical +categorical = env.country" "$V" model info "$T/m.json"
expect 0 "matches the model" "$V" model check "$T/m.json"
printf 'features:\n  - {name: f0, type: number, expr: x}\n  - {name: f1, type: number, expr: rate}\n' > "$T/m.features.yaml"
expect 1 "m.features.yaml:2:22: features\[0\].type: 'f0' is categorical in the model" "$V" model check "$T/m.json"

# the example model and its spec load and agree
expect 0 "clef-default-v3.features.yaml: matches the model" "$V" model check examples/policies/models/clef-default-v3.json
expect 0 "objective +binary:logistic" "$V" model info examples/policies/models/clef-default-v3.json
printf '%s\n' '{"context": {"method": "GET", "path": "/.env", "headers": {"user-agent": "sqlmap/1.8"}, "env": {"country": "DE"}}}' |
  "$V" model features examples/policies/models/clef-default-v3.features.yaml > "$T/feat.csv"
"$V" model predict examples/policies/models/clef-default-v3.json "$T/feat.csv" > "$T/probe" &&
  awk -F, '{ exit !($1 > 0.9) }' "$T/probe" && ok || bad "the example model does not flag an obvious probe: $(cat "$T/probe")"

summary
[ $fail -eq 0 ]
