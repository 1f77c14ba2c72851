#!/usr/bin/env bash
# masking.sh — a strategy's `snapshot: {mask, hash}`: the segment files
# never hold the masked values, the hashed ones, or the node secret (grep
# over the bytes); equal hashed values give equal hashes (HMAC-SHA256 under
# the secret, recomputed in Python); `verdict check` warns about the rules
# that read them and places bad paths at file:line:col; replay lists the
# decisions that read a masked field and reproduces every other one.
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: masking.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

mkdir -p "$T/p"
cat >"$T/p/pay.yaml" <<'EOF'
strategy: pay
snapshot:
  mask: [card.number, headers.authorization]
  hash: [email]
let:
  bin: card.number.substring(0, 6)
rules:
  - name: big
    if: amount > 1000
    action: review
  - name: test-card
    if: bin == "411111"
    action: block
  - name: vip
    if: email.endsWith("@example.com")
    action: allow
default: allow
EOF
printf 'k3y-0f-th1s-n0de-%s\n' "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$T/secret"
SECRET=$(head -1 "$T/secret")
cat >"$T/req.jsonl" <<'EOF'
{"action":"pay","context":{"card":{"number":"4111111111111111","exp":"12/29"},"headers":{"authorization":"Bearer sk_live_CLEARTOKEN1"},"email":"alice.liddell@example.com","amount":50}}
{"action":"pay","context":{"card":{"number":"5500000000000004"},"headers":{"authorization":"Bearer sk_live_CLEARTOKEN2"},"email":"alice.liddell@example.com","amount":5000}}
{"action":"pay","context":{"card":{"number":"6011000990139424"},"headers":{"authorization":"Bearer sk_live_CLEARTOKEN3"},"email":"bob.builder@test.org","amount":20}}
{"action":"pay","context":{"card":{"number":"5500000000000004"},"headers":{"authorization":"Bearer sk_live_CLEARTOKEN4"},"email":"bob.builder@test.org","amount":7000}}
EOF

"$V" check "$T/p" >"$T/out" 2>&1
eq "$?" 0 "check: warnings only"
has "$T/out" "pay.yaml:12:9: warning: rules[1].if: rule 'test-card' reads let 'bin', which reads card.number" \
  "check warns about a rule reading a masked field through a let"
has "$T/out" "pay.yaml:15:9: warning: rules[2].if: rule 'vip' reads email" "and about one reading a hashed field"
hasnt "$T/out" "'big'" "a rule reading neither gets no warning"

# a hashing strategy without a secret: refused, saying what to give
"$V" decide --policy "$T/p" --snapshots "$T/S0" --jsonl "$T/req.jsonl" >"$T/out" 2>&1
eq "$?" 1 "hash without --snapshot-secret: exit 1"
has "$T/out" "--snapshot-secret FILE" "the message says what to give"

"$V" decide --policy "$T/p" --snapshots "$T/S" --snapshot-secret "$T/secret" --jsonl "$T/req.jsonl" \
  >"$T/answers" 2>"$T/err"
eq "$?" 0 "decide with masking: exit 0"
# the answers are made from the clear values
eq "$(python3 -c 'import json,sys; print(" ".join(json.loads(l)["action"] for l in open(sys.argv[1])))' "$T/answers")" \
  "block review allow review" "the decisions read the clear values"
for clear in 4111111111111111 5500000000000004 6011000990139424 CLEARTOKEN alice.liddell bob.builder "$SECRET"; do
  if grep -rqaF "$clear" "$T/S"; then bad "the folder holds '$clear' in the clear"; else ok; fi
done
"$V" snapshots export -s "$T/S" >"$T/all.jsonl"
python3 - "$T/all.jsonl" "$SECRET" <<'EOF' && ok || bad "masked and hashed fields as documented"
import hashlib, hmac, json, sys
secret = sys.argv[2].encode()
snaps = [json.loads(l) for l in open(sys.argv[1])]
assert len(snaps) == 4
for s, email in zip(snaps, ["alice.liddell@example.com"] * 2 + ["bob.builder@test.org"] * 2):
    c = s["request"]["context"]
    assert c["card"]["number"] == "[masked]", c
    assert c["headers"]["authorization"] == "[masked]", c
    want = "hmac-sha256:" + hmac.new(secret, email.encode(), hashlib.sha256).hexdigest()
    assert c["email"] == want, (c["email"], want)
    assert s["lets"].get("bin", "[masked]") == "[masked]", s["lets"]
assert snaps[0]["request"]["context"]["card"]["exp"] == "12/29"  # the rest as it came
assert snaps[0]["request"]["context"]["email"] == snaps[1]["request"]["context"]["email"]
assert snaps[0]["request"]["context"]["email"] != snaps[2]["request"]["context"]["email"]
EOF

"$V" replay --snapshots "$T/S" >"$T/out" 2>&1
eq "$?" 0 "replay: exit 0 (the rest reproduce)"
# 1: test-card (masked, through bin); 3: vip tried (email, hashed); 2 and 4: big
eq "$(grep -c ' masked: rule ' "$T/out")" 2 "two decisions listed as reading masked fields"
has "$T/out" "masked: rule 'test-card'" "the masked rule named"
grep -Eq 'reproduced +2 ' "$T/out" && ok || bad "the other two reproduce: $(grep reproduced "$T/out")"
has "$T/out" "every decision reproduced exactly but 2 that read masked fields" "the result line"
"$V" replay --snapshots "$T/S" --json >"$T/r.json" 2>/dev/null
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["masked"]==2 and d["reproduced"]==2 and d["deterministic"], d' "$T/r.json" &&
  ok || bad "replay --json: masked 2, reproduced 2"

# bad paths, at their place
mkdir -p "$T/q"
printf 'strategy: q\nsnapshot:\n  mask: [card..number, 3]\n  hsh: [x]\ndefault: allow\n' >"$T/q/q.yaml"
"$V" check "$T/q" >"$T/out" 2>&1
eq "$?" 1 "check, bad snapshot paths: exit 1"
has "$T/out" "q.yaml:3:10: snapshot.mask[0]: 'card..number' is not a field path" "a malformed path"
has "$T/out" "q.yaml:3:24: snapshot.mask[1]: expected a field path" "a number for a path"
has "$T/out" "q.yaml:4:3: snapshot: unknown key 'hsh'" "an unknown key"

summary
[ "$fail" -eq 0 ]
