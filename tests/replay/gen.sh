#!/usr/bin/env bash
# gen.sh — `verdict gen`: the same seed gives byte-identical requests and
# labels, another seed other ones; every request decides with the example
# bundle; keys are unique and every request has exactly one label, an action
# of its strategy; the mix follows the documented distributions
# (docs/replay.md) within sampling error. Run from the repo root with the
# build folder as $1.
set -u
BUILD=${1:?usage: gen.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch

# ---- determinism of the output ----
"$V" gen --count 3000 --seed 42 --labels "$T/l1" >"$T/r1" && ok || bad "verdict gen --seed 42"
"$V" gen --count 3000 --seed 42 --labels "$T/l2" >"$T/r2" && ok || bad "verdict gen --seed 42, again"
cmp -s "$T/r1" "$T/r2" && ok || bad "the same seed gave different requests"
cmp -s "$T/l1" "$T/l2" && ok || bad "the same seed gave different labels"
"$V" gen -n 3000 -s 42 -k all -o "$T/r3" -l "$T/l3" && cmp -s "$T/r1" "$T/r3" && cmp -s "$T/l1" "$T/l3" &&
  ok || bad "short options and --out give the same bytes"
"$V" gen --count 3000 --seed 43 --labels "$T/l4" >"$T/r4"
cmp -s "$T/r1" "$T/r4" && bad "another seed gave the same requests" || ok
# a prefix of a longer run is the shorter run
"$V" gen --count 1000 --seed 42 >"$T/r5"
head -1000 "$T/r1" | cmp -s - "$T/r5" && ok || bad "the first 1000 of 3000 differ from a run of 1000"
"$V" gen --count 0 >"$T/empty" && [ ! -s "$T/empty" ] && ok || bad "--count 0 prints nothing"
[ "$(wc -l <"$T/r1")" = 3000 ] && [ "$(wc -l <"$T/l1")" = 3000 ] && ok || bad "3000 lines each"

# ---- shape, labels, distributions ----
for k in gate payment routing agent; do
  "$V" gen --kind "$k" --count 4000 --seed 9 --labels "$T/$k.labels" >"$T/$k.jsonl" || bad "gen --kind $k"
done
"$V" gen --kind all --count 10000 --seed 9 --labels "$T/all.labels" >"$T/all.jsonl" || bad "gen --kind all"
python3 - "$T" <<'EOF' && ok || bad "shape, labels and distributions"
import json, sys, collections
t = sys.argv[1]
points = {"gate": "http_request", "payment": "payment_authorization",
          "routing": "storage_route", "agent": "tool_call"}
actions = {"http_request": {"allow", "block", "challenge", "ask_mfa"},
           "payment_authorization": {"approve", "challenge_3ds", "review", "block"},
           "storage_route": {"route_eu", "route_us", "route_apac", "route_cn", "hold"},
           "tool_call": {"allow", "deny", "ask"}}
fails = []
def check(cond, msg):
    if not cond:
        fails.append(msg)
def load(kind):
    reqs = [json.loads(l) for l in open("%s/%s.jsonl" % (t, kind))]
    labs = [json.loads(l) for l in open("%s/%s.labels" % (t, kind))]
    return reqs, labs
for kind, point in list(points.items()) + [("all", None)]:
    reqs, labs = load(kind)
    keys = [r["key"] for r in reqs]
    check(len(set(keys)) == len(keys), kind + ": keys are not unique")
    check([l["key"] for l in labs] == keys, kind + ": labels are not one per request, in order")
    for r, l in zip(reqs, labs):
        check(set(r) <= {"action", "candidates", "context", "key"}, kind + ": unknown request field")
        check(point is None or r["action"] == point, kind + ": wrong decision point " + r["action"])
        check(l["action"] in actions[r["action"]], kind + ": label %s not an action of %s" % (l["action"], r["action"]))
        if "candidates" in r and r["action"] != "storage_route":
            check(l["action"] in r["candidates"], kind + ": label %s not among the candidates" % l["action"])
        check(set(l) == {"key", "action"}, kind + ": label fields")
def share(labs, action):
    return sum(l["action"] == action for l in labs) / len(labs)
def near(x, want, tol, what):
    check(abs(x - want) <= tol, "%s: %.3f, want %.3f +- %.3f" % (what, x, want, tol))
# the documented mixes (docs/replay.md), within sampling error
reqs, labs = load("all")
mix = collections.Counter(r["action"] for r in reqs)
near(mix["http_request"] / len(reqs), 0.40, 0.03, "all: gate share")
near(mix["payment_authorization"] / len(reqs), 0.25, 0.03, "all: payment share")
near(mix["tool_call"] / len(reqs), 0.20, 0.03, "all: agent share")
near(mix["storage_route"] / len(reqs), 0.15, 0.03, "all: routing share")
reqs, labs = load("payment")
near(share(labs, "block"), 0.035, 0.012, "payment: fraud rate")
near(sum("candidates" not in r for r in reqs) / len(reqs), 0.10, 0.03, "payment: no candidates")
reqs, labs = load("agent")
near(share(labs, "allow"), 0.70, 0.04, "agent: safe calls")
near(sum(r["candidates"] == ["allow", "deny"] for r in reqs) / len(reqs), 0.20, 0.03, "agent: headless")
check(all(l["action"] != "ask" for r, l in zip(reqs, labs) if r["candidates"] == ["allow", "deny"]),
      "agent: a headless run is never labelled ask")
reqs, labs = load("gate")
near(share(labs, "allow"), 0.80, 0.05, "gate: allowed traffic")
near(sum(r["context"]["path"] == "/login" and r["context"]["method"] == "POST" and
         r["context"].get("signals", {}).get("failed_logins_10m", 0) > 0 for r in reqs) / len(reqs),
     0.03, 0.015, "gate: credential stuffing")
reqs, labs = load("routing")
near(sum("user" not in r["context"] for r in reqs) / len(reqs), 0.25, 0.03, "routing: anonymous")
check(share(labs, "route_eu") > 0.1 and share(labs, "route_cn") > 0.01, "routing: residency labels")
for f in fails[:20]:
    print("  " + f, file=sys.stderr)
sys.exit(1 if fails else 0)
EOF

# ---- every request decides with the example bundle ----
mkdir "$T/bundle" && cp examples/policies/*.yaml "$T/bundle/" && cp -r examples/policies/models "$T/bundle/"
for k in gate payment routing agent all; do
  "$V" decide --policy "$T/bundle" --no-store --no-snapshots --jsonl "$T/$k.jsonl" >"$T/$k.dec" 2>"$T/err"
  rc=$?
  [ "$rc" = 0 ] && ! grep -q '"error"' "$T/$k.dec" && ok || { bad "gen --kind $k: not every request decides (exit $rc)"; grep -m3 '"error"' "$T/$k.dec" >&2; }
done

# ---- usage ----
"$V" gen --kind nope >/dev/null 2>&1
[ $? = 2 ] && ok || bad "--kind nope: want exit 2"
"$V" gen --count -1 >/dev/null 2>&1
[ $? = 2 ] && ok || bad "--count -1: want exit 2"
"$V" gen --seed x >/dev/null 2>&1
[ $? = 2 ] && ok || bad "--seed x: want exit 2"
"$V" gen --frobnicate >/dev/null 2>&1
[ $? = 2 ] && ok || bad "an unknown option: want exit 2"
"$V" gen --count >/dev/null 2>&1
[ $? = 2 ] && ok || bad "a missing value: want exit 2"
"$V" gen --count 1 --labels /nonexistent/dir/labels.jsonl >/dev/null 2>"$T/err"
[ $? = 1 ] && grep -q "/nonexistent/dir/labels.jsonl" "$T/err" && ok || bad "an unwritable labels file: want exit 1 naming it"
"$V" gen --help | grep -q "usage: verdict gen" && ok || bad "gen --help"
"$V" --help | grep -q "  gen " && ok || bad "gen is listed in verdict --help"

summary
[ "$fail" = 0 ]
