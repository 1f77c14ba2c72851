#!/bin/bash
# The learning loop end to end: labelled traffic from `verdict gen` decided
# by the example bundle with snapshots on; `verdict model dataset` turns
# the snapshots and labels into a time-split CSV; `verdict model train`
# retrains the request_gate model on it (python3-xgboost, checked bit for
# bit); `verdict model compare` puts it beside the shipped model on the
# held-out rows (it must be at least as accurate); a candidate bundle with
# the new model is replayed against the snapshots and scored with the
# labels. Then the refusals: a bad CSV line, labels missing or malformed, a
# feature spec that does not match. The training steps are skipped (and
# said so) when python3-xgboost is not installed; the rest still runs.
set -u
BUILD=${1:-build}
V="$BUILD/verdict"
TEST_NAME="model learning loop"
PY=/usr/bin/python3
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
# jget FILE EXPR: a value of the JSON summary in FILE (python3's json)
jget() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

mkdir -p "$T/bundle"
cp -r examples/policies/*.yaml examples/policies/models "$T/bundle/"
SPEC="$T/bundle/models/clef-default-v3.features.yaml"
SHIPPED="$T/bundle/models/clef-default-v3.json"

# 1. record: labelled traffic, decided with snapshots. The site is under
# more attack than the shipped model was trained for (verdict gen's mix):
# every abusive request is kept, one legitimate request in three. That is
# the drift retraining on a site's own traffic is for.
"$V" gen --kind gate --count 12000 --seed 23 --labels "$T/labels.jsonl" --out "$T/all.jsonl" ||
  bad "gen failed"
"$PY" - "$T/all.jsonl" "$T/labels.jsonl" > "$T/traffic.jsonl" <<'PY' || bad "traffic filter failed"
import json, sys
truth = {}
for line in open(sys.argv[2]):
    r = json.loads(line)
    truth[r["key"]] = r["action"]
for i, line in enumerate(open(sys.argv[1])):
    if truth[json.loads(line)["key"]] != "allow" or i % 3 == 0:
        sys.stdout.write(line)
PY
"$V" decide --policy "$T/bundle" --store "$T/store" --jsonl --snapshots "$T/snaps" \
  "$T/traffic.jsonl" > "$T/decisions.jsonl" || bad "decide failed"

# 2. dataset
"$V" model dataset -s "$T/snaps" --labels "$T/labels.jsonl" --spec "$SPEC" --holdout 20 \
  --out "$T/data.csv" > "$T/ds.txt" 2>&1 || { bad "dataset failed"; cat "$T/ds.txt" >&2; }
cat "$T/ds.txt"
has "$T/ds.txt" "feature coverage" "dataset summary"
has "$T/ds.txt" "no label" "dataset skip reasons"
"$V" model dataset -s "$T/snaps" --labels "$T/labels.jsonl" --json \
  --out "$T/data2.csv" > "$T/ds.json" || bad "dataset --json failed"
rows=$(jget "$T/ds.json" 'd["rows"]')
ntest=$(jget "$T/ds.json" 'd["test"]["rows"]')
# the model ran for the decisions no rule made: a good share of them
[ "$rows" -gt 1000 ] && ok || bad "dataset: only $rows rows"
eq "$ntest" "$(( (rows * 20 + 99) / 100 ))" "holdout: the newest 20% (rounded up)"
eq "$(wc -l < "$T/data.csv")" "$((rows + 1))" "a header and one line a row"
cmp -s "$T/data.csv" "$T/data2.csv" && ok || bad "the majority spec version and --spec (or the default holdout, 20%) differ"
# split by time: every train row is older than every test row
"$PY" - "$T/data.csv" <<'PY' && ok || bad "split is not by time"
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))
tr = [int(x["time_ns"]) for x in r if x["split"] == "train"]
te = [int(x["time_ns"]) for x in r if x["split"] == "test"]
sys.exit(0 if tr and te and max(tr) <= min(te) else 1)
PY
# exactly what the model saw: the rows score as the recorded model_score
"$PY" - "$T/data.csv" "$T/snaps" > "$T/recorded.txt" <<'PY'
import csv, sys
for x in csv.DictReader(open(sys.argv[1])):
    print(x["id"])
PY
"$V" snapshots export -s "$T/snaps" > "$T/export.jsonl" 2>/dev/null
if [ -s "$T/export.jsonl" ]; then
  "$V" model predict "$SHIPPED" "$T/data.csv" | cut -d, -f1 > "$T/pred.txt"
  "$PY" - "$T/data.csv" "$T/export.jsonl" "$T/pred.txt" <<'PY' && ok || bad "dataset rows do not reproduce the recorded scores"
import csv, json, sys
score = {}
for line in open(sys.argv[2]):
    s = json.loads(line)
    score[s["id"]] = s.get("model_score")
ids = [x["id"] for x in csv.DictReader(open(sys.argv[1]))]
pred = [float(l) for l in open(sys.argv[3])]
# a decision whose model missed its deadline (a busy machine) has its row but no score
scored = [(score[i], p) for i, p in zip(ids, pred) if score.get(i) is not None]
bad = sum(1 for s, p in scored if abs(s - p) > 1e-6)
sys.exit(1 if bad or len(scored) < 0.9 * len(ids) else 0)
PY
fi

if "$PY" -c "import xgboost" 2>/dev/null; then
  # 3. train (the check against XGBoost runs inside)
  OMP_NUM_THREADS=1 "$V" model train --dataset "$T/data.csv" --spec "$SPEC" --policy "$T/bundle" \
    --out "$T/new.json" > "$T/train.txt" 2>&1 || { bad "train failed"; cat "$T/train.txt" >&2; }
  cat "$T/train.txt"
  has "$T/train.txt" "(bit for bit equal)" "train checks the model against XGBoost"
  has "$T/train.txt" "thresholds of strategy request_gate" "train reads the bundle's thresholds"
  "$V" model check "$T/new.json" --features "$SPEC" > /dev/null || bad "the new model does not check"
  # 4. compare against the shipped model on the held-out rows
  "$V" model compare "$SHIPPED" "$T/new.json" --dataset "$T/data.csv" --policy "$T/bundle" \
    > "$T/cmp.txt" || bad "compare failed"
  cat "$T/cmp.txt"
  has "$T/cmp.txt" "no longer reached" "compare lists changed decisions"
  "$V" model compare "$SHIPPED" "$T/new.json" --dataset "$T/data.csv" --threshold 0.8 --json \
    > "$T/cmp.json" || bad "compare --json failed"
  old=$(jget "$T/cmp.json" 'd["old"]["accuracy"]')
  new=$(jget "$T/cmp.json" 'd["new"]["accuracy"]')
  echo "held-out accuracy: shipped $old, retrained $new"
  "$PY" -c "import sys; sys.exit(0 if $new >= $old else 1)" && ok ||
    bad "the retrained model is less accurate ($new) than the shipped one ($old)"
  # the figures are the usual ones: accuracy and AUC as scikit-learn computes them
  if "$PY" -c 'import sklearn' 2>/dev/null; then
    "$V" model predict "$T/new.json" "$T/data.csv" | cut -d, -f1 > "$T/pnew.txt"
    "$PY" - "$T/data.csv" "$T/pnew.txt" "$T/cmp.json" <<'PY' && ok || bad "accuracy/AUC differ from scikit-learn's"
import csv, json, sys
from sklearn.metrics import accuracy_score, roc_auc_score
rows = list(csv.DictReader(open(sys.argv[1])))
p = [float(l) for l in open(sys.argv[2])]
y = [int(r["label"]) for r in rows if r["split"] == "test"]
q = [v for r, v in zip(rows, p) if r["split"] == "test"]
d = json.load(open(sys.argv[3]))["new"]
sys.exit(0 if abs(roc_auc_score(y, q) - d["auc"]) < 1e-5 and
         abs(accuracy_score(y, [v >= 0.5 for v in q]) - d["accuracy"]) < 1e-5 else 1)
PY
  fi
  # 5. a candidate bundle with the new model, replayed and scored with the labels
  mkdir -p "$T/cand"
  cp -r "$T/bundle/"*.yaml "$T/bundle/models" "$T/cand/"
  cp "$T/new.json" "$T/cand/models/clef-default-v3.json"
  # with the thresholds train suggested (the same block and challenge rates)
  tb=$(awk '$1 == "block" && /new model/ { print $NF }' "$T/train.txt")
  tc=$(awk '$1 == "challenge" && /new model/ { print $NF }' "$T/train.txt")
  [ -n "$tb" ] && [ -n "$tc" ] && ok || bad "train printed no suggested thresholds"
  sed -i "s/{min_score: 0.95, action: block/{min_score: $tb, action: block/;
          s/{min_score: 0.8, action: challenge/{min_score: $tc, action: challenge/" \
    "$T/cand/request_gate.yaml"
  has "$T/cand/request_gate.yaml" "min_score: $tb, action: block" "candidate thresholds set"
  "$V" check "$T/cand" > /dev/null || bad "the candidate bundle does not check"
  "$V" replay -s "$T/snaps" --policy "$T/cand" --store "$T/store" --labels "$T/labels.jsonl" \
    --json > "$T/replay.json" 2> "$T/replay.err"
  rrc=$?
  [ $rrc -le 1 ] && ok || { bad "replay failed ($rrc)"; cat "$T/replay.err" >&2; }
  "$PY" - "$T/replay.json" <<'PY' || bad "replay report has no label accuracy"
import json, sys
d = json.load(open(sys.argv[1]))
l = d["labels"]["recorded"], d["labels"]["replayed"]
print("replay with the candidate: label accuracy recorded %.4f, replayed %.4f" %
      (l[0]["accuracy"], l[1]["accuracy"]))
PY
  # 6. shadow: the real server answers with the bundle, the candidate decides
  # off the path; `verdict rollout --labels` scores both sides
  need curl
  TOKEN=learning-loop-token-0123456789
  echo "$TOKEN" > "$T/token"
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  "$V" serve --listen "127.0.0.1:$PORT" --threads 2 --admin-token-file "$T/token" \
    -p "$T/bundle" --store "$T/store" --snapshots "$T/snaps2" --shadow "$T/cand" \
    2> "$T/serve.log" &
  PID=$!
  wait_ready "learning loop" "$T/serve.log"
  tail -n 600 "$T/traffic.jsonl" | "$PY" -c '
import sys, http.client
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
for line in sys.stdin:
    c.request("POST", "/v1/decide", line.encode(), {"Content-Type": "application/json"})
    c.getresponse().read()
' "$PORT" || bad "sending the traffic failed"
  stop
  "$V" rollout --snapshots "$T/snaps2" --labels "$T/labels.jsonl" --json > "$T/rollout.json" ||
    bad "rollout report failed"
  "$PY" - "$T/rollout.json" <<'PY' && ok || bad "rollout report has no labelled pairs"
import json, sys
d = json.load(open(sys.argv[1]))
print("shadow: %d pairs compared, label accuracy live %.4f, candidate %.4f" %
      (d["compared"], d["live"]["accuracy"], d["candidate"]["accuracy"]))
open(sys.argv[1] + ".compared", "w").write("%d" % d["compared"])
sys.exit(0 if 0 < d["compared"] <= 600 and d["live"]["labelled"] > 0 else 1)
PY
  # the shadow's decisions are the same requests again: left out of a dataset
  "$V" model dataset -s "$T/snaps2" --labels "$T/labels.jsonl" --json --out "$T/d3.csv" \
    > "$T/d3.json" || bad "dataset of a shadowed folder failed"
  # (a busy machine drops some shadow decisions: those are not recorded at all)
  eq "$(jget "$T/d3.json" 'd["skipped"]["off_path"]')" "$(cat "$T/rollout.json.compared")" \
    "off-path decisions left out"

  # a bad dataset line is named file:line
  sed '5s/^[^,]*,/x1,/' "$T/data.csv" > "$T/bad.csv"
  expect 1 "bad.csv:5: column 1" "$V" model train --dataset "$T/bad.csv" --spec "$SPEC" --out "$T/x.json"
  [ -e "$T/x.json" ] && bad "a refused training wrote its model" || ok
else
  echo "learning loop: python3-xgboost missing: training steps skipped"
fi

# labels by snapshot id (as `verdict reviews export` writes them): 200 of the
# rows, every one with the other answer — the id wins over nothing else
"$PY" - "$T/data.csv" > "$T/by_id.jsonl" <<'PY'
import csv, json, sys
for r in list(csv.DictReader(open(sys.argv[1])))[:200]:
    print(json.dumps({"id": r["id"], "action": "allow" if r["label"] == "1" else "block",
                      "note": "reviewed"}))
PY
"$V" model dataset -s "$T/snaps" --labels "$T/by_id.jsonl" --json --out "$T/id.csv" > "$T/id.json" ||
  bad "dataset with labels by id failed"
eq "$(jget "$T/id.json" 'd["rows"]')" 200 "labels by id: one row each"
eq "$(jget "$T/id.json" 'd["train"]["positive"] + d["test"]["positive"]')" \
  "$(awk -F, 'NR > 1 && NR <= 201 && $(NF-4) == 0' "$T/data.csv" | wc -l)" "labels by id: the label is the reviewed one"

# two feature spec versions in one folder: the majority's rows are kept, the
# others reported and left out; --spec picks the other one
mkdir -p "$T/b2"
cp -r "$T/bundle/"*.yaml "$T/bundle/models" "$T/b2/"
sed -i 's/^description: .*/description: the same features, another file/' \
  "$T/b2/models/clef-default-v3.features.yaml"
head -n 900 "$T/traffic.jsonl" > "$T/t1.jsonl"
tail -n 300 "$T/traffic.jsonl" > "$T/t2.jsonl"
"$V" decide --policy "$T/bundle" --store "$T/store" --jsonl --snapshots "$T/snaps3" "$T/t1.jsonl" \
  > /dev/null || bad "decide t1"
"$V" decide --policy "$T/b2" --store "$T/store2" --jsonl --snapshots "$T/snaps3" "$T/t2.jsonl" \
  > /dev/null || bad "decide t2"
"$V" model dataset -s "$T/snaps3" --labels "$T/labels.jsonl" --json --out "$T/m.csv" > "$T/m.json" ||
  bad "dataset of two versions failed"
"$V" model dataset -s "$T/snaps3" --labels "$T/labels.jsonl" --spec "$T/b2/models/clef-default-v3.features.yaml" \
  --json --out "$T/m2.csv" > "$T/m2.json" || bad "dataset --spec of the minority version failed"
"$PY" - "$T/m.json" "$T/m2.json" <<'PY' && ok || bad "versions are mixed or not reported"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
v = {x["features_version"]: x["rows"] for x in a["versions"]}
print("two spec versions: %s" % ", ".join("%.12s %d rows" % kv for kv in v.items()))
ok = (len(v) == 2 and a["rows"] == max(v.values()) and a["skipped"]["other_features_version"] == min(v.values())
      and b["rows"] == min(v.values()) and b["features_version"] != a["features_version"])
sys.exit(0 if ok else 1)
PY
"$V" model dataset -s "$T/snaps3" --labels "$T/labels.jsonl" --out "$T/m.csv" | grep -q "left out: features_version" &&
  ok || bad "the text summary does not name the version left out"

# filters: --point and --until narrow what is read
expect 1 "no labelled snapshot .* ran a model \(0 read" "$V" model dataset -s "$T/snaps" \
  --labels "$T/labels.jsonl" --point payment_authorization --out "$T/o.csv"
expect 1 "no labelled snapshot .* ran a model \(0 read" "$V" model dataset -s "$T/snaps" \
  --labels "$T/labels.jsonl" --until 2001-01-01T00:00:00Z --out "$T/o.csv"
expect 0 "rows" "$V" model dataset -s "$T/snaps" --labels "$T/labels.jsonl" \
  --point http_request --since 2001-01-01T00:00:00Z --out "$T/o.csv"

# refusals
expect 2 "needs --labels" "$V" model dataset -s "$T/snaps" --out "$T/o.csv"
expect 2 "needs --snapshots" "$V" model dataset --labels "$T/labels.jsonl" --out "$T/o.csv"
expect 2 "--holdout takes a number" "$V" model dataset -s "$T/snaps" --labels "$T/labels.jsonl" \
  --out "$T/o.csv" --holdout 120
expect 2 "unknown option" "$V" model train --frob 1
expect 2 "compare needs two models" "$V" model compare "$SHIPPED" --dataset "$T/data.csv"
printf '{"id": "x", "action": "block"}\n{"key": 3}\n' > "$T/badlabels.jsonl"
expect 1 "badlabels.jsonl:[12]" "$V" model dataset -s "$T/snaps" --labels "$T/badlabels.jsonl" \
  --out "$T/o.csv"
expect 1 "no such file|No such file" "$V" model dataset -s "$T/snaps" --labels "$T/nope.jsonl" \
  --out "$T/o.csv"
# a spec of another version: nothing recorded under it, said so
sed 's/^description: .*/description: another version/' "$SPEC" > "$T/other.features.yaml"
expect 1 "was decided under .*other.features.yaml" "$V" model dataset -s "$T/snaps" \
  --labels "$T/labels.jsonl" --spec "$T/other.features.yaml" --out "$T/o.csv"
# a dataset of another spec: named at its header
printf 'model: m\nfeatures:\n  - name: zz\n    type: number\n    expr: 1\n' > "$T/zz.features.yaml"
expect 1 "data.csv:1: column 1 is 'req_per_min'.*'zz'" "$V" model train --dataset "$T/data.csv" \
  --spec "$T/zz.features.yaml" --out "$T/x.json"
# no training script / no python: a clear message naming the package
VERDICT_TRAINER="$T/nothing" expect 1 "python3-xgboost|training failed" "$V" model train \
  --dataset "$T/data.csv" --spec "$SPEC" --out "$T/x.json" --python "$T/no-python"
expect 1 "empty file" "$V" model compare "$SHIPPED" "$SHIPPED" --dataset /dev/null
summary
[ "$fail" -eq 0 ]
