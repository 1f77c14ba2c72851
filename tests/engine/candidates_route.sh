#!/usr/bin/env bash
# candidates_route.sh — two strategies on one decision point: `route:
# candidates` takes the requests whose candidates are all its actions, every
# other request goes to the point's other strategy (the example bundle's
# agent_tests beside agent_guard on tool_call); a caller's
# context.confidence_floor turns a less sure answer into the review action,
# in the answer, the trace and the snapshot, and replay reproduces it; the
# load refuses what would make routing ambiguous. Run from the repo root with
# the build folder as $1.
set -u
BUILD=${1:?usage: candidates_route.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

P=examples/policies
SAMPLE=examples/requests/agent_next_step.json
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
decide() { "$V" decide --policy $P --no-store --no-snapshots "$@" >"$T/out" 2>"$T/err"; }

# ---- routing ----
decide $SAMPLE
eq "$(field "$T/out" '(d["action"], d["confidence"], d["source"], d["reason"]["rule"], d["strategy"])')" \
  "('run_test', 0.93, 'rule', 'tests-on-feature-branches', 'agent_tests')" "the design's sample request"
hasnt "$T/out" '"floor"' "a floor that is met changes nothing in the answer"
for r in agent_rm agent_edit agent_headless_install; do
  decide examples/requests/$r.json
  eq "$(field "$T/out" 'd["strategy"]')" agent_guard "$r.json still goes to agent_guard"
done
# a hook's request, candidates mixing both strategies' actions, none at all
rm_call() { echo "{\"action\": \"tool_call\", $1\"context\": {\"agent\": \"claude-code\", \"tool\": \"Bash\", \"input\": {\"command\": \"rm -rf /\"}, \"cwd\": \"/home/dev/proj\", \"session\": \"s\"}}"; }
for c in '' '"candidates": ["allow", "deny"], '; do
  rm_call "$c" >"$T/req"
  decide "$T/req"
  eq "$(field "$T/out" 'd["strategy"]+" "+d["action"]')" "agent_guard deny" "tool_call with [$c]: agent_guard denies rm -rf /"
done
# candidates of both: agent_guard's request, which it refuses (deny is not offered)
rm_call '"candidates": ["run_test", "allow"], ' >"$T/req"
decide "$T/req"
has "$T/err" "strategy 'agent_guard' answered 'ask' (default), and its on_no_candidate action 'deny' is not among the candidates" "candidates of both strategies go to agent_guard"

# ---- the confidence floor ----
sed 's/0.8}/0.95}/' $SAMPLE >"$T/req"
decide --trace "$T/req"
eq "$(field "$T/out" '(d["action"], d["allowed"], d["review"], d["floor"])')" \
  "('ask_user', False, True, {'min': 0.95, 'instead_of': 'run_test'})" "floor 0.95: ask_user instead"
has "$T/out" "confidence 0.93 is below the request's confidence_floor 0.95: 'ask_user' instead of 'run_test'" "floor 0.95: the reason"
eq "$(field "$T/out" 'd["trace"]["floor"]')" "{'min': 0.95, 'instead_of': 'run_test'}" "floor 0.95: the trace"
# no review action among the candidates: refused, naming the place
sed 's/0.8}/0.95}/; s/, "ask_user"//' $SAMPLE >"$T/req"
decide "$T/req"
eq "$?" 1 "floor without a review candidate: refused"
has "$T/err" "answered 'run_test' with confidence 0.93, below the request's confidence_floor 0.95, and has no review action among the candidates" "floor without a review candidate: why"
for bad in '"x"' '1.5' '-0.1'; do
  sed "s/0.8}/$bad}/" $SAMPLE >"$T/req"
  decide "$T/req"
  has "$T/err" '$.context.confidence_floor must be a number from 0 to 1' "confidence_floor $bad is refused"
done
# a strategy without a declared review action takes the candidate that asks
mkdir -p "$T/b"
cat >"$T/b/pay.yaml" <<'YAML'
strategy: pay
rules:
  - {name: small, if: amount < 100, action: approve, confidence: 0.7}
default: decline
YAML
echo '{"action": "pay", "candidates": ["approve", "review_manual"], "context": {"amount": 5, "confidence_floor": 0.9}}' |
  "$V" decide --policy "$T/b" --no-store --no-snapshots >"$T/out" 2>&1
eq "$(field "$T/out" 'd["action"]+" "+str(d["review"])')" "review_manual True" "the candidate that asks (review_*) is taken"

# ---- recorded and replayed ----
for f in 0.8 0.95; do
  sed "s/0.8}/$f}/" $SAMPLE | "$V" decide --policy $P --snapshots "$T/rec/s" >"$T/out.$f" 2>&1
  "$V" snapshots show --snapshots "$T/rec/s" "$(field "$T/out.$f" 'd["snapshot_id"]')" >"$T/snap.$f" 2>&1
done
has "$T/snap.0.8" '"floor": {' "the snapshot records a floor that was met"
has "$T/snap.0.8" '"instead_of": null' "… and that it replaced nothing"
has "$T/snap.0.95" '"instead_of": "run_test"' "the snapshot records what the floor replaced"
has "$T/snap.0.95" '"action": "ask_user"' "the snapshot's action"
"$V" replay --snapshots "$T/rec/s" >"$T/replay" 2>&1
has "$T/replay" "result: every decision reproduced exactly" "replay reproduces both"

# ---- verdict test: a test whose request goes to another strategy fails ----
mkdir -p "$T/t"
cp $P/agent_guard.yaml $P/agent_tests.yaml "$T/t/"
python3 - "$T/t/agent_tests.yaml" <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
s = s.replace("  - name: main asks\n    candidates: *all\n", "  - name: main asks\n", 1)
open(p, "w").write(s)
PY
"$V" test "$T/t" >"$T/out" 2>&1
eq "$?" 1 "verdict test: a test routed elsewhere fails"
has "$T/out" "got:      the request went to strategy 'agent_guard'" "verdict test: it says where the request went"

# ---- what the load refuses ----
mkdir -p "$T/amb"
printf 'strategy: a\ndecision_points: [p]\ndefault: allow\n' >"$T/amb/a.yaml"
printf 'strategy: b\ndecision_points: [p]\nroute: candidates\nactions: {allow: true, go: true}\ndefault: go\n' >"$T/amb/b.yaml"
"$V" check "$T/amb" >"$T/out" 2>&1
has "$T/out" "amb/b.yaml:2:19: decision_points[0]: strategies 'a' (" "a shared action: the place"
has "$T/out" "both serve decision point 'p' and both answer 'allow'" "a shared action: the message"
printf 'strategy: b\ndecision_points: [p]\nroute: candidates\ndefault: go\n' >"$T/amb/b.yaml"
"$V" check "$T/amb" >"$T/out" 2>&1
has "$T/out" "amb/b.yaml:3:8: route: 'route: candidates' needs 'actions'" "route: candidates without actions"
printf 'strategy: b\ndecision_points: [p]\nroute: sometimes\nactions: {go: true}\ndefault: go\n' >"$T/amb/b.yaml"
"$V" check "$T/amb" >"$T/out" 2>&1
has "$T/out" "amb/b.yaml:3:8: route: expected 'point'" "a bad route"
printf 'strategy: b\ndecision_points: [p]\nactions: {go: true}\ndefault: go\n' >"$T/amb/b.yaml"
"$V" check "$T/amb" >"$T/out" 2>&1
has "$T/out" "decision point 'p' is served by both 'a'" "two plain strategies on one point"
printf 'strategy: b\ndecision_points: [q]\nrules: [{if: "true", action: go, confidence: 1.5}]\ndefault: go\n' >"$T/amb/b.yaml"
"$V" check "$T/amb" >"$T/out" 2>&1
has "$T/out" "rules[0].confidence: 1.5 is out of range" "a rule's confidence out of range"

summary
[ "$fail" = 0 ]
