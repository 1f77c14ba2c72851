#!/usr/bin/env bash
# authz_redact.sh — credentials a proxy forwards to /v1/authz never reach the
# snapshot log: the default credential headers (X-Api-Key, X-Auth-Token,
# X-Forwarded-Authorization, ...), credential-named parameters of the
# X-Original-URI query string (token, password, sig, *_token, %XX-encoded
# names), user:password@ of an absolute URI and of a URL in a header
# (Referer). Each shows as "[redacted]"; the rest of the request stays as
# sent. Against the real server with curl; the snapshot read back over HTTP
# and the segment files grepped byte for byte. Also --authz-redact-query ''
# (none) and a custom list.
set -u
BUILD=${1:?usage: authz_redact.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl python3

mkdir -p "$T/bundle"
for f in examples/policies/*; do cp -r "$f" "$T/bundle/"; done

start() {
  local name=$1; shift
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  "$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 2 --no-store \
    --snapshots "$T/snap-$name" --durability always "$@" 2>"$T/$name.log" &
  PID=$!
  wait_ready "$name" "$T/$name.log"
}
json() { python3 -c 'import sys,json; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T/body" "$1"; }
# authz URI [curl args]: asks /v1/authz about URI, then reads the snapshot
# of that decision into $T/body.
authz() {
  local uri=$1; shift
  curl -s -D "$T/head" -o /dev/null "$URL/v1/authz" -H "X-Original-URI: $uri" -H 'X-Original-Method: GET' "$@"
  SNAP=$(tr -d '\r' <"$T/head" | sed -n 's/^x-verdict-snapshot: //Ip')
  curl -s -o "$T/body" "$URL/v1/snapshots/$SNAP"
}
ctx() { json "d['request']['context']$1"; }

SECRETS=(apikey-s3cret-1 authtoken-s3cret-2 fwdauth-s3cret-3 qtoken-s3cret-4 qpass-s3cret-5
  qaccess-s3cret-6 qsig-s3cret-7 userinfo-s3cret-8 referer-s3cret-9 refq-s3cret-10 amz-s3cret-11
  enc-s3cret-12 bearer-s3cret-13)

start main
authz "/account/login?user=bob&token=qtoken-s3cret-4&password=qpass-s3cret-5&page=2&access_token=qaccess-s3cret-6&Sig=qsig-s3cret-7&X-Amz-Signature=amz-s3cret-11&api%5Fkey=enc-s3cret-12#frag" \
  -H 'X-Api-Key: apikey-s3cret-1' -H 'X-Auth-Token: authtoken-s3cret-2' \
  -H 'X-Forwarded-Authorization: Bearer fwdauth-s3cret-3' -H 'Authorization: Bearer bearer-s3cret-13' \
  -H 'Referer: https://alice:referer-s3cret-9@shop.example/cart?session=refq-s3cret-10&item=7' \
  -H 'User-Agent: Mozilla/5.0 (probe?token=not-a-url)'
eq "$(ctx '["headers"]["x-api-key"]')" '[redacted]' "X-Api-Key: redacted by default"
eq "$(ctx '["headers"]["x-auth-token"]')" '[redacted]' "X-Auth-Token: redacted by default"
eq "$(ctx '["headers"]["x-forwarded-authorization"]')" '[redacted]' "X-Forwarded-Authorization: redacted by default"
eq "$(ctx '["headers"]["authorization"]')" '[redacted]' "Authorization: still redacted"
eq "$(ctx '["query"]')" 'user=bob&token=[redacted]&password=[redacted]&page=2&access_token=[redacted]&Sig=[redacted]&X-Amz-Signature=[redacted]&api%5Fkey=[redacted]#frag' \
  "the query: credential parameters masked, the others as sent"
eq "$(ctx '["path"]')" /account/login "the path: as sent"
eq "$(ctx '["uri"]')" '/account/login?user=bob&token=[redacted]&password=[redacted]&page=2&access_token=[redacted]&Sig=[redacted]&X-Amz-Signature=[redacted]&api%5Fkey=[redacted]#frag' \
  "the uri: masked the same way"
eq "$(ctx '["headers"]["referer"]')" 'https://[redacted]@shop.example/cart?session=[redacted]&item=7' \
  "Referer: user:password@ and a credential parameter masked"
eq "$(ctx '["headers"]["user-agent"]')" 'Mozilla/5.0 (probe?token=not-a-url)' "a header that is not a URL: kept whole"

authz "https://carol:userinfo-s3cret-8@api.example/v1/x?q=1"
eq "$(ctx '["uri"]')" 'https://[redacted]@api.example/v1/x?q=1' "an absolute URI: user:password@ masked"
eq "$(ctx '["path"]')" 'https://[redacted]@api.example/v1/x' "an absolute URI: the path masked too"

# nothing of any secret anywhere in the log, nor in the server's own log
for s in "${SECRETS[@]}"; do
  if grep -rqF -- "$s" "$T/snap-main" "$T/main.log"; then bad "$s found in the snapshot log"; else ok; fi
done
grep -rqF -- '[redacted]' "$T/snap-main" && ok || bad "no marker in the snapshot log"
stop

# ---- --authz-redact-query '': the query as sent (userinfo still masked) ----
start none --authz-redact-query ''
authz "/a?token=kept-1&x=2" -H 'Referer: https://u:p-kept@h.example/?token=kept-2'
eq "$(ctx '["query"]')" 'token=kept-1&x=2' "--authz-redact-query '': the query as sent"
eq "$(ctx '["headers"]["referer"]')" 'https://[redacted]@h.example/?token=kept-2' "--authz-redact-query '': user:password@ still masked"
stop

# ---- a list of one's own, with a suffix ----
start custom --authz-redact-query 'otp,*_pin'
authz "/a?otp=111&card_pin=222&token=333"
eq "$(ctx '["query"]')" 'otp=[redacted]&card_pin=[redacted]&token=333' "--authz-redact-query otp,*_pin: those, and only those"
stop

"$V" serve -p "$T/bundle" --authz-redact-query 'a;b' --listen 127.0.0.1:0 2>"$T/err"
eq "$?" 2 "--authz-redact-query with a stray character: bad usage"
has "$T/err" "parameter names separated by commas" "--authz-redact-query: says what it wants"

summary
[ "$fail" -eq 0 ]
