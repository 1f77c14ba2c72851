#!/usr/bin/env bash
# nginx.sh — verdict behind a real nginx, as docs/nginx.md configures it:
# nginx asks GET /v1/authz (auth_request) before proxying each request to an
# upstream (a second nginx server block that logs every request it gets).
# Proves that blocked and challenged requests never reach the upstream,
# allowed ones do with the X-Verdict-* headers passed on, the client sees
# X-Verdict-Action, and that nginx fails closed when verdict is down. Run from
# the repo root with the build folder as $1; skipped (exit 0 with a note)
# when nginx is not installed.
set -u
BUILD=${1:?usage: nginx.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
. tests/nginx.sh
need curl
NPID=
on_exit() { kill_wait TERM "$NPID"; } # nginx first, then the server

mkdir -p "$T/bundle"
# A small edge policy of its own, reading the context docs/nginx.md describes
# (the example request_gate leaves ordinary traffic to its model, whose
# answers change as it is retrained; these rules do not).
cat >"$T/bundle/edge.yaml" <<'YAML'
strategy: edge
decision_points: [http_request]
actions:
  allow: true
  block: false
  challenge: {allowed: false, review: true}
rules:
  - name: probe
    if: path.matches(r'^/(\.env|\.git/)|\.php$')
    action: block
  - name: embargo
    if: env.country in ["KP", "IR"]
    action: block
  - name: script-on-web
    if: '"user-agent" in headers && headers["user-agent"].startsWith("curl/") && !path.startsWith("/api/")'
    action: challenge
  - name: post-needs-api
    if: method == "POST" && !path.startsWith("/api/")
    action: block
default: allow
YAML
VPORT=$(free_port); FRONT=$(free_port); UP=$(free_port)
while [ "$UP" = "$FRONT" ] || [ "$UP" = "$VPORT" ] || [ "$FRONT" = "$VPORT" ]; do UP=$(free_port); FRONT=$(free_port); done

"$V" serve --policy "$T/bundle" --listen "127.0.0.1:$VPORT" --snapshots "$T/snap" --durability always \
  --no-store 2>"$T/verdict.log" &
PID=$!
URL="http://127.0.0.1:$VPORT"
wait_ready verdict "$T/verdict.log"

# The configuration of docs/nginx.md, on loopback ports, in a temp prefix.
NGINX_CONNS=128 nginx_start "http://127.0.0.1:$UP/ready" <<EOF
  access_log off;
  log_format upstream '\$request_method \$request_uri action=\$http_x_verdict_action snapshot=\$http_x_verdict_snapshot';

  upstream verdict {
    server 127.0.0.1:$VPORT;
    keepalive 16;
  }

  # The application: logs every request that reaches it.
  server {
    listen 127.0.0.1:$UP;
    access_log "$T/nginx/logs/upstream.log" upstream;
    location / { return 200 "upstream got \$request_uri\n"; }
  }

  server {
    listen 127.0.0.1:$FRONT;
    location / {
      auth_request /_verdict;
      auth_request_set \$verdict_action \$upstream_http_x_verdict_action;
      auth_request_set \$verdict_snapshot \$upstream_http_x_verdict_snapshot;
      add_header X-Verdict-Action \$verdict_action always;
      add_header X-Verdict-Snapshot \$verdict_snapshot always;
      proxy_set_header X-Verdict-Action \$verdict_action;
      proxy_set_header X-Verdict-Snapshot \$verdict_snapshot;
      proxy_pass http://127.0.0.1:$UP;
    }
    location = /_verdict {
      internal;
      proxy_pass http://verdict/v1/authz;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI \$request_uri;
      proxy_set_header X-Original-Method \$request_method;
      proxy_set_header X-Original-Host \$host;
      proxy_set_header X-Real-IP \$remote_addr;
      # In production: \$geoip2_data_country_code (or a CDN's country header).
      proxy_set_header X-Verdict-Env-Country \$http_x_test_country;
      proxy_connect_timeout 1s;
      proxy_read_timeout 2s;
    }
  }
EOF
: >"$T/nginx/logs/upstream.log.seen"

# get PATH [curl args...]: through nginx; status in $CODE, headers in $T/head, body in $T/body.
get() {
  local p=$1; shift
  CODE=$(curl -s -D "$T/head" -o "$T/body" -w '%{http_code}' -H "X-Test-Country: ${COUNTRY:-GB}" \
    -A 'Mozilla/5.0 (X11; Linux x86_64)' "http://127.0.0.1:$FRONT$p" "$@")
}
header() { tr -d '\r' <"$T/head" | sed -n "s/^$1: //Ip" | head -1; }
upstream_saw() { grep -c -F -- " $1 " "$T/nginx/logs/upstream.log"; }

get /products/42
eq "$CODE" 200 "allowed: 200 from the upstream"
eq "$(cat "$T/body")" "upstream got /products/42" "allowed: the upstream's answer"
eq "$(header x-verdict-action)" allow "allowed: the client sees X-Verdict-Action"
SNAP=$(header x-verdict-snapshot)
eq "${#SNAP}" 36 "allowed: the client sees X-Verdict-Snapshot"
eq "$(upstream_saw /products/42)" 1 "allowed: reached the upstream once"
grep -qF "GET /products/42 action=allow snapshot=$SNAP" "$T/nginx/logs/upstream.log" && ok ||
  bad "allowed: the upstream got X-Verdict-Action and X-Verdict-Snapshot"
# The snapshot the header names holds the request as nginx described it.
curl -s "http://127.0.0.1:$VPORT/v1/snapshots/$SNAP" >"$T/snapshot"
eq "$(python3 -c 'import sys,json; c=json.load(open(sys.argv[1]))["request"]["context"]; print(c["path"], c["method"], c["client_ip"], c["env"]["country"], c["headers"]["user-agent"][:7])' "$T/snapshot")" \
  "/products/42 GET 127.0.0.1 GB Mozilla" "allowed: the snapshot has nginx's view of the request"
get /account -X POST -d 'a=1'
eq "$CODE" 403 "X-Original-Method reaches the rules (POST outside /api/)"
eq "$(upstream_saw /account)" 0 "blocked POST: never reached the upstream"

get '/api/v1/orders?page=2' -X POST -d '{"item":1}'
eq "$CODE" 200 "allowed POST with a body (auth_request sends none)"
eq "$(upstream_saw '/api/v1/orders?page=2')" 1 "allowed POST: reached the upstream"

get /.env
eq "$CODE" 403 "probe for secrets: 403 from nginx"
eq "$(header x-verdict-action)" block "blocked: the client sees X-Verdict-Action: block"
eq "$(upstream_saw /.env)" 0 "blocked: never reached the upstream"
get /wp-login.php
eq "$CODE" 403 "probe for another framework: 403"
eq "$(upstream_saw /wp-login.php)" 0 "blocked: never reached the upstream (2)"
COUNTRY=KP get /products/7
eq "$CODE" 403 "embargoed country (from the env header): 403"
eq "$(upstream_saw /products/7)" 0 "embargoed: never reached the upstream"
get /products/9 -A 'curl/8.0'
eq "$CODE" 401 "a script on the web pages: 401 (challenge)"
eq "$(header x-verdict-action)" challenge "challenge: X-Verdict-Action"
eq "$(upstream_saw /products/9)" 0 "challenged: never reached the upstream"

# Many requests over nginx's keep-alive connections to verdict.
for i in $(seq 1 20); do get "/products/k$i"; [ "$CODE" = 200 ] || break; get "/.git/k$i"; [ "$CODE" = 403 ] || break; done
eq "$CODE" 403 "forty alternating requests through nginx"
eq "$(grep -c ' /products/k' "$T/nginx/logs/upstream.log")" 20 "allowed ones all reached the upstream"
eq "$(grep -c ' /.git/' "$T/nginx/logs/upstream.log")" 0 "blocked ones never did"

# verdict down: nginx fails closed (500) and the upstream is not reached.
stop
get /products/down
eq "$CODE" 500 "verdict down: nginx answers 500"
eq "$(upstream_saw /products/down)" 0 "verdict down: the upstream is not reached"

summary
[ "$fail" = 0 ]
