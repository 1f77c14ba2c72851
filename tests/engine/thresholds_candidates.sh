#!/usr/bin/env bash
# thresholds_candidates.sh — when a request's candidates rule out the action
# of the model threshold its score reached, the decision says so (reason,
# trace, snapshot) and does what the strategy declares in
# fallback.on_not_candidate: `next` (the default: the next threshold down, or
# `below`) or `on_no_candidate` (the threshold's action, which on_no_candidate
# then handles). Both replay exactly. The request: the example scanner, which
# the model scores 0.95875144 when its rules are passed over (block 0.95,
# challenge 0.8). Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: thresholds_candidates.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

# bundle NAME SED...: a copy of the example bundle with request_gate edited
bundle() {
  local b=$T/$1
  shift
  mkdir -p "$b"
  cp -r examples/policies/*.yaml examples/policies/models "$b/"
  sed -i "$@" "$b/request_gate.yaml"
}
# request CANDIDATES: the scanner request with these candidates (JSON list)
request() {
  sed "s/\"candidates\": \[[^]]*\]/\"candidates\": $1/" examples/requests/gate_scanner.json
}
decide() { # decide BUNDLE CANDIDATES [options]: the decision JSON in $T/out, stderr in $T/err
  local b=$1 c=$2
  shift 2
  request "$c" | "$V" decide --policy "$T/$b" "$@" >"$T/out" 2>"$T/err"
}
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

NOTE="thresholds reached but not among the candidates: 'block' (at least 0.95), 'challenge' (at least 0.8); fallback.on_not_candidate: next"

# ---- the default, next: the next threshold down decides, and says why ----
bundle next '/on_not_candidate: on_no_candidate/d'
decide next '["allow"]' --trace --snapshots "$T/snaps-next/s"
eq "$(field "$T/out" 'd["action"]')" allow "next, [allow]: action"
has "$T/out" "scored 0.95875144, below every threshold whose action is a candidate; $NOTE" "next, [allow]: the reason"
hasnt "$T/out" "no abuse signal" "next, [allow]: below's own reason is not claimed"
eq "$(field "$T/out" 'd["trace"]["no_candidate"]')" "${NOTE} (the next threshold down decides)" "next, [allow]: the trace"
id=$(field "$T/out" 'd["snapshot_id"]')
"$V" snapshots show --snapshots "$T/snaps-next/s" "$id" >"$T/snap" 2>&1
has "$T/snap" "$NOTE" "next, [allow]: the snapshot records it"

decide next '["allow", "challenge"]' --no-snapshots --no-store
eq "$(field "$T/out" 'd["action"]')" challenge "next, [allow, challenge]: action"
has "$T/out" "at least 0.8); thresholds reached but not among the candidates: 'block' (at least 0.95); fallback" "next, [allow, challenge]: the reason names the threshold passed over"

# ---- on_no_candidate: the threshold's action, then on_no_candidate ----
bundle first 's/^on_no_candidate: block/on_no_candidate: first/'
decide first '["allow"]' --snapshots "$T/snaps-first/s"
eq "$(field "$T/out" 'd["action"]')" allow "on_no_candidate, first: action"
has "$T/out" "scored 0.95875144, at least 0.95); 'block' (the model's answer) is not among the candidates; on_no_candidate: first" "on_no_candidate, first: the reason"

bundle challenge 's/^on_no_candidate: block/on_no_candidate: challenge/'
decide challenge '["allow", "challenge"]' --snapshots "$T/snaps-first/s"
eq "$(field "$T/out" 'd["action"]')" challenge "on_no_candidate: challenge: action"
has "$T/out" "'block' (the model's answer) is not among the candidates; on_no_candidate: challenge" "on_no_candidate: challenge: the reason"

# the example bundle as shipped: on_no_candidate block is no candidate: refused
request '["allow"]' | "$V" decide --policy examples/policies --no-snapshots --no-store >"$T/out" 2>"$T/err"
eq "$?" 1 "example bundle, [allow]: refused"
has "$T/err" "answered 'block' (model), and its on_no_candidate action 'block' is not among the candidates either" "example bundle, [allow]: why"

# ---- replay reproduces both ----
for s in next first; do
  "$V" replay --snapshots "$T/snaps-$s/s" >"$T/replay" 2>&1
  has "$T/replay" "result: every decision reproduced exactly" "replay of $s"
done

# ---- a bad value is an error at its place ----
bundle bad 's/^  on_not_candidate: on_no_candidate/  on_not_candidate: maybe/'
"$V" check "$T/bad" >"$T/out" 2>&1
has "$T/out" "request_gate.yaml:" "bad on_not_candidate: the file"
has "$T/out" "fallback.on_not_candidate: expected 'next' (the next threshold down decides) or 'on_no_candidate'" "bad on_not_candidate: the message"

summary
[ "$fail" = 0 ]
