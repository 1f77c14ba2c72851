#!/bin/bash
# bundle_pull.sh — `verdict serve --bundle-url`: a real nginx on loopback
# serves signed bundles from a scratch folder; the server pulls A, then
# swaps to B once B is published; then a bundle with a bad signature, an
# unsigned one, a corrupt tar, one with a ../ name, one with an absolute
# name, one with a symlink and one that does not compile are each refused
# (GET /v1/status names why; the version stays B), all while a load sends
# decisions, none of which may fail. A restart with the web server gone
# serves the bundle kept. Also `verdict bundle`'s own commands: good and bad
# signatures, the wrong key, missing files, unsafe folders to pack. Run
# from the repo root with the build dir; skipped when nginx is not installed.
set -u
BUILD=${1:?usage: bundle_pull.sh BUILD_DIR}
V="$BUILD/verdict"
HERE=$(dirname "$0")
PY=/usr/bin/python3
. tests/lib.sh
scratch
. tests/nginx.sh
need curl tar
LOAD=
on_exit() {
  touch "$T/stop" 2>/dev/null
  if [ -n "$LOAD" ]; then wait "$LOAD" 2>/dev/null; fi
  kill_wait TERM "$NPID"
}

# ---- the bundles: A and B answer differently, C does not compile ----
mk() { # mk DIR ACTION: a one-strategy bundle whose default is ACTION
  mkdir -p "$1"
  cat >"$1/gate.yaml" <<YAML
strategy: gate
decision_points: [http_request]
actions:
  allow: true
  block: false
rules:
  - name: probe
    if: path.startsWith("/.git")
    action: block
default: $2
YAML
}
mk "$T/A" allow
mk "$T/B" allow
echo "# B" >>"$T/B/gate.yaml"
sed -i 's/name: probe/name: probe-b/' "$T/B/gate.yaml"
mk "$T/C" allow
sed -i 's/path.startsWith("\/.git")/path.startsWith(/' "$T/C/gate.yaml"

# ---- verdict bundle: keygen, pack, sign, verify ----
cd "$T" || exit 1
"$V" bundle keygen --out rel >"$T/out" 2>&1; eq "$?" 0 "keygen"
eq "$(stat -c %a rel.key)" 600 "the private key is mode 0600"
has rel.key "BEGIN PRIVATE KEY" "the private key is PEM"
has rel.pub "BEGIN PUBLIC KEY" "the public key is PEM"
"$V" bundle keygen --out rel >"$T/out" 2>&1; eq "$?" 1 "keygen never overwrites a key"
has "$T/out" "exists already" "keygen: says the key exists"
"$V" bundle keygen --out other >/dev/null 2>&1; eq "$?" 0 "a second key pair"
"$V" bundle keygen >"$T/out" 2>&1; eq "$?" 2 "keygen without --out: usage error"
"$V" bundle pack "$T/A" -o A.tar.gz >/dev/null; eq "$?" 0 "pack A"
eq "$(tar tzf A.tar.gz | sort | tr '\n' ' ')" "gate.yaml " "A.tar.gz holds the bundle's file"
"$V" bundle pack "$T/B" -o B.tar.gz >/dev/null; eq "$?" 0 "pack B"
"$V" bundle sign --key rel.key A.tar.gz >/dev/null; eq "$?" 0 "sign A"
eq "$(head -c 88 A.tar.gz.sig | base64 -d | wc -c)" 64 "the .sig is the base64 of 64 bytes"
"$V" bundle verify --pub rel.pub A.tar.gz >"$T/out" 2>&1; eq "$?" 0 "verify A"
has "$T/out" "good signature" "verify: says good"
# the signature is plain ed25519 over the file's bytes: openssl agrees
if openssl version >/dev/null 2>&1; then
  base64 -d A.tar.gz.sig >A.raw
  openssl pkeyutl -verify -pubin -inkey rel.pub -rawin -in A.tar.gz -sigfile A.raw >/dev/null 2>&1
  eq "$?" 0 "openssl pkeyutl verifies the signature"
  # and keys openssl makes are verdict's: it signs with one, openssl checks it
  openssl genpkey -algorithm ed25519 -out ossl.key 2>/dev/null &&
    openssl pkey -in ossl.key -pubout -out ossl.pub 2>/dev/null
  "$V" bundle sign --key ossl.key B.tar.gz >/dev/null; eq "$?" 0 "sign with an openssl key"
  "$V" bundle verify --pub ossl.pub B.tar.gz >/dev/null; eq "$?" 0 "verify with its openssl public key"
  base64 -d B.tar.gz.sig >B.raw
  openssl pkeyutl -verify -pubin -inkey ossl.pub -rawin -in B.tar.gz -sigfile B.raw >/dev/null 2>&1
  eq "$?" 0 "openssl verifies what verdict signed with its key"
  rm -f B.tar.gz.sig B.raw
fi
"$V" bundle verify --pub other.pub A.tar.gz >"$T/out" 2>&1; eq "$?" 1 "verify with the wrong key: 1"
has "$T/out" "does not match" "the wrong key: says so"
cp A.tar.gz A2.tar.gz; echo x >>A2.tar.gz
"$V" bundle verify --pub rel.pub A2.tar.gz --sig A.tar.gz.sig >"$T/out" 2>&1; eq "$?" 1 "a changed file: 1"
"$V" bundle verify --pub rel.pub B.tar.gz >"$T/out" 2>&1; eq "$?" 1 "no .sig: 1"
has "$T/out" "B.tar.gz.sig" "no .sig: names the file"
"$V" bundle verify --pub rel.key A.tar.gz >"$T/out" 2>&1; eq "$?" 1 "a private key as --pub: 1"
has "$T/out" "not an ed25519 public key" "a private key as --pub: says so"
"$V" bundle verify --pub nothere.pub A.tar.gz >"$T/out" 2>&1; eq "$?" 1 "a missing key: 1"
has "$T/out" "nothere.pub" "a missing key: named"
"$V" bundle sign --key nothere.key A.tar.gz >"$T/out" 2>&1; eq "$?" 1 "sign with a missing key: 1"
"$V" bundle sign --key rel.key nothere.tar.gz >"$T/out" 2>&1; eq "$?" 1 "sign a missing file: 1"
echo garbage >G.sig
"$V" bundle verify --pub rel.pub A.tar.gz --sig G.sig >"$T/out" 2>&1; eq "$?" 1 "a garbage .sig: 1"
"$V" bundle frob >/dev/null 2>&1; eq "$?" 2 "an unknown subcommand: 2"
"$V" bundle sign --help | grep -q "verdict bundle sign" && ok || bad "bundle sign --help"
mkdir -p L && cp "$T/A/gate.yaml" L/ && ln -s /etc/passwd L/pw.yaml
"$V" bundle pack L -o L.tar.gz >"$T/out" 2>&1; eq "$?" 1 "pack refuses a symlink"
has "$T/out" "pw.yaml" "pack: names the link"
cd - >/dev/null || exit 1

# ---- the hostile bundles (made with tar: pack would not make them) ----
nginx_www
sign() { "$V" bundle sign --key "$T/rel.key" "$1" >/dev/null || bad "sign $1"; }
sign "$T/B.tar.gz"
"$V" bundle sign --key "$T/other.key" "$T/B.tar.gz" >/dev/null && mv "$T/B.tar.gz.sig" "$T/B.other.sig"
sign "$T/B.tar.gz"
# a big bundle cut in half: a gzip stream that ends too soon
mk "$T/Big" allow
head -c 200000 /dev/urandom | base64 | sed 's/^/# /' >>"$T/Big/gate.yaml"
"$V" bundle pack "$T/Big" -o "$T/big.tar.gz" >/dev/null
head -c $(($(stat -c %s "$T/big.tar.gz") / 2)) "$T/big.tar.gz" >"$T/corrupt.tar.gz"; sign "$T/corrupt.tar.gz"
mkdir -p "$T/dd/x" && cp "$T/A/gate.yaml" "$T/dd/x/" && echo evil >"$T/dd/evil.yaml"
# GNU tar strips a leading ../ when it packs: Python's tarfile keeps the name given
$PY -c 'import sys, tarfile
t = tarfile.open(sys.argv[1], "w:gz")
t.add(sys.argv[2], arcname="gate.yaml"); t.add(sys.argv[3], arcname="x/../../evil.yaml")
t.close()' "$T/dotdot.tar.gz" "$T/A/gate.yaml" "$T/dd/evil.yaml"; sign "$T/dotdot.tar.gz"
tar czf "$T/abs.tar.gz" -P -C "$T/A" gate.yaml "$T/dd/evil.yaml" 2>/dev/null; sign "$T/abs.tar.gz"
mkdir -p "$T/ln" && cp "$T/A/gate.yaml" "$T/ln/" && ln -s /etc/passwd "$T/ln/pw.yaml"
tar czf "$T/link.tar.gz" -C "$T/ln" gate.yaml pw.yaml; sign "$T/link.tar.gz"
tar czf "$T/C.tar.gz" -C "$T/C" gate.yaml; sign "$T/C.tar.gz"
# past the bounds (docs/deploy.md): a 17 MiB file, 5 x 15 MiB in all, 10,001 entries
mkdir -p "$T/huge" "$T/total" "$T/many"
cp "$T/A/gate.yaml" "$T/huge/" && head -c $((17 << 20)) /dev/zero >"$T/huge/z.yaml"
tar czf "$T/huge.tar.gz" -C "$T/huge" gate.yaml z.yaml; sign "$T/huge.tar.gz"
cp "$T/A/gate.yaml" "$T/total/"
for i in 1 2 3 4 5; do head -c $((15 << 20)) /dev/zero >"$T/total/z$i.yaml"; done
tar czf "$T/total.tar.gz" -C "$T/total" .; sign "$T/total.tar.gz"
rm -rf "$T/huge" "$T/total"
cp "$T/A/gate.yaml" "$T/many/" && (cd "$T/many" && seq 1 10001 | sed 's/$/.txt/' | xargs touch)
tar czf "$T/many.tar.gz" -C "$T/many" .; sign "$T/many.tar.gz"
rm -rf "$T/many"
eq "$(tar tzPf "$T/dotdot.tar.gz" | grep -c '\.\./')" 1 "the ../ archive has its ../ entry"
eq "$(tar tzPf "$T/abs.tar.gz" | grep -c '^/')" 1 "the absolute archive has its / entry"
sign "$T/A.tar.gz"
publish "$T/A.tar.gz"

# ---- nginx serves $W ----
NPORT=$(free_port)
BURL="http://127.0.0.1:$NPORT/bundle.tar.gz"
NGINX_CONNS=64 nginx_start "$BURL" <<EOF
  access_log "$T/nginx/logs/access.log";
  server {
    listen 127.0.0.1:$NPORT;
    root "$W";
  }
EOF

# ---- serve pulls A ----
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
LOG="$T/serve.log"
"$V" serve --bundle-url "$BURL" --bundle-pubkey "$T/rel.pub" --bundle-dir "$T/pulled" \
  --bundle-poll 0.2 --listen "127.0.0.1:$PORT" --no-snapshots 2>"$LOG" &
PID=$!
wait_ready serve "$LOG"
status() { curl -s --max-time 5 "$URL/v1/status"; }
sget() { status | $PY -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
VER_A=$(sget 'd["policy"]["version"]')
eq "$(sget 'd["policy"]["source"]')" url "status: the source is the URL"
eq "$(sget 'd["policy"]["from"]')" "$BURL" "status: from the URL"
eq "$(readlink "$T/pulled/current" | cut -c1-2)" b- "the live bundle is kept in --bundle-dir"
# the poll settles on not_modified (If-None-Match, 304)
wait_outcome() { # wait_outcome OUTCOME [TEXT]: until the last poll's outcome is that (bounded)
  for _ in $(seq 1 150); do
    status >"$T/st.json"
    if grep -qF "\"outcome\":\"$1\"" "$T/st.json"; then
      [ -z "${2:-}" ] || grep -qF -- "$2" "$T/st.json" && return 0
    fi
    sleep 0.1
  done
  bad "no poll outcome $1 ${2:-}"; sed 's/^/  | /' "$T/st.json" >&2
  return 1
}
wait_outcome not_modified && ok
grep -q '" 304 ' "$T/nginx/logs/access.log" && ok || bad "nginx answered 304 to the polls"

# ---- the load: decisions all along ----
printf '%s' '{"action":"http_request","context":{"path":"/x","method":"GET","headers":{}}}' >"$T/req.json"
rm -f "$T/stop"
$PY "$HERE/../hardening/faultload.py" --port "$PORT" --stop "$T/stop" --out "$T/load.json" \
  --progress "$T/progress" --threads 2 --min 200 --timeout 5 --give-up 120 "$T/req.json" &
LOAD=$!

# ---- B is published: the server swaps to it ----
publish "$T/B.tar.gz"
for _ in $(seq 1 150); do
  V_NOW=$(sget 'd["policy"]["version"]'); [ "$V_NOW" != "$VER_A" ] && break; sleep 0.1
done
VER_B=$(sget 'd["policy"]["version"]')
[ "$VER_B" != "$VER_A" ] && ok || bad "the server did not swap to B"
grep -qF '"event":"reload"' "$LOG" && grep -qF '"trigger":"pull"' "$LOG" && ok ||
  bad "the swap is logged as a reload (trigger pull)"

# ---- each bad one is refused; B keeps serving ----
refused() { # refused NAME TEXT: the last refusal names TEXT, the version is still B
  wait_outcome refused "$2" || return
  eq "$(sget 'd["policy"]["version"]')" "$VER_B" "$1: B keeps serving"
  has "$T/st.json" "$2" "$1: /v1/status says why"
}
publish "$T/B.tar.gz" "$T/B.other.sig"; refused "another key" "bad signature"
publish "$T/B.tar.gz" -;                refused "unsigned" "unsigned"
publish "$T/corrupt.tar.gz";            refused "corrupt" "not a readable .tar.gz"
publish "$T/dotdot.tar.gz";             refused "../" "a .. component"
publish "$T/abs.tar.gz";                refused "absolute" "an absolute name"
publish "$T/link.tar.gz";               refused "symlink" "a symbolic link"
publish "$T/huge.tar.gz";               refused "a file past 16 MiB" "more than the 16777216 a file may have"
publish "$T/total.tar.gz";              refused "past 64 MiB in all" "more than 67108864 bytes of files in all"
publish "$T/many.tar.gz";               refused "past 10,000 entries" "more than 10000 entries"
publish "$T/C.tar.gz";                  refused "not compiling" "does not compile (1 errors): gate.yaml:"
[ ! -e "$T/dd/x/../../evil.yaml" ] && [ ! -e "$T/pulled/evil.yaml" ] && ok || bad "nothing written outside"
grep -qF '"event":"bundle_refused"' "$LOG" && ok || bad "refusals are logged"
has "$T/st.json" '"last_refusal":{' "status: the last refusal"
n=$(curl -s "$URL/metrics" | sed -n 's/^verdict_bundle_polls_total{outcome="refused"} //p')
[ "${n:-0}" -ge 7 ] && ok || bad "metrics: refused polls counted (got ${n:-none})"

# B again: the same bytes as the live one
publish "$T/B.tar.gz"
# (the next poll is a 304: the count says it, the last outcome may have moved on)
for _ in $(seq 1 150); do
  [ "$(sget 'd["bundle_pull"]["polls"]["unchanged"]')" -ge 1 ] && break; sleep 0.1
done
[ "$(sget 'd["bundle_pull"]["polls"]["unchanged"]')" -ge 1 ] && ok || bad "B republished: unchanged"
eq "$(sget 'd["policy"]["version"]')" "$VER_B" "B republished: still B"

touch "$T/stop"; wait "$LOAD"; LOAD=
eq "$($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["total"] >= 200, d["conn"], sorted(d["status"].keys()))' "$T/load.json")" \
  "True 0 ['200']" "the load: every decision answered 200, no failed connection"
stop

# ---- a restart with the web server gone serves the bundle kept ----
kill_wait TERM "$NPID"; NPID=
"$V" serve --bundle-url "$BURL" --bundle-pubkey "$T/rel.pub" --bundle-dir "$T/pulled" \
  --bundle-poll 0.2 --listen "127.0.0.1:$PORT" --no-snapshots 2>"$LOG" &
PID=$!
wait_ready restart "$LOG"
eq "$(sget 'd["policy"]["version"]')" "$VER_B" "restart offline: serves B, the bundle kept"
wait_outcome error "fetching the bundle" && ok
stop
# ... and with nothing kept and nothing to pull, the start fails
"$V" serve --bundle-url "$BURL" --bundle-pubkey "$T/rel.pub" --bundle-dir "$T/empty" \
  --listen "127.0.0.1:$PORT" --no-snapshots 2>"$T/fail.log"
eq "$?" 1 "nothing kept, nothing pulled: exit 1"
has "$T/fail.log" "the first pull failed" "the start says why"
# usage errors
"$V" serve --bundle-url "$BURL" --bundle-dir "$T/x" 2>/dev/null; eq "$?" 2 "--bundle-url without the key: 2"
"$V" serve --bundle-url "$BURL" --bundle-pubkey "$T/rel.pub" --bundle-dir "$T/x" --policy "$T/A" 2>/dev/null
eq "$?" 2 "--bundle-url and --policy: 2"
"$V" serve --bundle-url https://x/b.tar.gz --bundle-pubkey "$T/rel.pub" --bundle-dir "$T/x" 2>/dev/null
eq "$?" 2 "an https URL: 2"
summary
[ "$fail" -eq 0 ]
