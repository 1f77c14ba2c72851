#!/usr/bin/env bash
# cluster.sh — three `verdict serve` nodes, each with its own local counters,
# behind a real nginx that routes by `hash $http_x_verdict_key consistent`
# (docs/deploy.md). Proves that a per-key limit holds exactly across the
# three nodes through nginx (every key reaches one node, so its local
# counter sees all its requests), that the same traffic sent round-robin to
# the nodes directly does not hold (the contrast the hashing buys), and what
# happens when a node stops: its keys move to the other nodes and start
# over with empty counters, while every other key keeps its node and its
# count. Run from the repo root with the build folder as $1; skipped (exit 0
# with a note) when nginx is not installed.
set -u
BUILD=${1:?usage: cluster.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
. tests/nginx.sh
need curl
PIDS=() NPID=
on_exit() { # nginx first, then the three nodes
  kill_wait TERM "$NPID"
  for p in "${PIDS[@]}"; do
    [ -n "$p" ] && kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
}

mkdir -p "$T/bundle"
cat >"$T/bundle/api.yaml" <<'YAML'
strategy: api
limits:
  per_key:
    key: request.key
    window: 1h
    budget: 5
    action: block
    reason: five calls an hour per key
default: allow
YAML

PORTS=()
while [ "${#PORTS[@]}" -lt 4 ]; do
  p=$(free_port)
  case " ${PORTS[*]} " in *" $p "*) ;; *) PORTS+=("$p") ;; esac
done
FRONT=${PORTS[3]}
for n in 0 1 2; do
  "$V" serve --policy "$T/bundle" --listen "127.0.0.1:${PORTS[$n]}" --no-snapshots --no-store \
    --threads 2 2>"$T/node$n.log" &
  PIDS[$n]=$!
done
for n in 0 1 2; do
  for _ in $(seq 1 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${PORTS[$n]}/readyz")" = 200 ] && break
    sleep 0.1
  done
done

NGINX_CONNS=128 nginx_start "http://127.0.0.1:$FRONT/healthz" <<EOF
  access_log off;
  upstream verdict {
    hash \$http_x_verdict_key consistent;
    server 127.0.0.1:${PORTS[0]} max_fails=1 fail_timeout=60s;
    server 127.0.0.1:${PORTS[1]} max_fails=1 fail_timeout=60s;
    server 127.0.0.1:${PORTS[2]} max_fails=1 fail_timeout=60s;
    keepalive 16;
  }
  server {
    listen 127.0.0.1:$FRONT;
    location / {
      proxy_pass http://verdict;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_next_upstream error timeout;
      add_header X-Upstream \$upstream_addr always;
    }
  }
EOF

# ask KEY [PORT]: one decision for KEY, through nginx (or one node directly);
# prints "ACTION UPSTREAM"
ask() {
  local url="http://127.0.0.1:${2:-$FRONT}/v1/decide"
  curl -s -D "$T/h" -H "X-Verdict-Key: $1" "$url" \
    -d "{\"action\":\"api\",\"key\":\"$1\"}" -o "$T/b"
  local act up
  act=$(sed -n 's/^{"action":"\([a-z]*\)".*/\1/p' "$T/b")
  up=$(tr -d '\r' <"$T/h" | sed -n 's/^X-Upstream: //Ip')
  echo "${act:-none} ${up:-direct}"
}

# Eight calls for each of twelve keys through nginx: exactly five allowed a
# key, and every call of a key answered by one node.
KEYS=(k01 k02 k03 k04 k05 k06 k07 k08 k09 k10 k11 k12)
declare -A NODE
for k in "${KEYS[@]}"; do
  allowed=0 nodes=""
  for _ in 1 2 3 4 5 6 7 8; do
    read -r act up < <(ask "$k")
    [ "$act" = allow ] && allowed=$((allowed + 1))
    case " $nodes " in *" $up "*) ;; *) nodes="$nodes $up" ;; esac
  done
  eq "$allowed" 5 "through nginx, key $k: allowed calls"
  eq "$(echo $nodes | wc -w)" 1 "through nginx, key $k: nodes that answered"
  NODE[$k]=$(echo $nodes)
done
# the keys spread over more than one node (else the test proves little)
spread=$(printf '%s\n' "${NODE[@]}" | sort -u | wc -l)
[ "$spread" -ge 2 ] && ok || bad "twelve keys all hashed to one node"

# The same traffic round-robin straight to the nodes: the limit does not hold.
allowed=0
for i in $(seq 0 7); do
  read -r act _ < <(ask rr-key "${PORTS[$((i % 3))]}")
  [ "$act" = allow ] && allowed=$((allowed + 1))
done
eq "$allowed" 8 "round-robin without hashing: all 8 calls allowed (each node counts alone)"

# The nodes' /metrics count it: 12 keys x 5 charges + the 8 round-robin
# calls; 12 x 3 refusals.
charges=0 refusals=0
for n in 0 1 2; do
  curl -s "http://127.0.0.1:${PORTS[$n]}/metrics" >"$T/m"
  c=$(sed -n 's/^verdict_limit_charges_total //p' "$T/m"); charges=$((charges + ${c:-0}))
  r=$(sed -n 's/^verdict_limit_refusals_total //p' "$T/m"); refusals=$((refusals + ${r:-0}))
done
eq "$charges" 68 "charges summed over the nodes' /metrics"
eq "$refusals" 36 "refusals summed over the nodes' /metrics"

# Stop the node serving k01. Its keys move to the others and start over;
# keys of the other nodes keep their node and stay blocked.
victim=${NODE[k01]}
for n in 0 1 2; do
  if [ "127.0.0.1:${PORTS[$n]}" = "$victim" ]; then
    kill -TERM "${PIDS[$n]}" 2>/dev/null; wait "${PIDS[$n]}" 2>/dev/null; PIDS[$n]=
  fi
done
moved_ok=1 kept_ok=1 moved=0 kept=0
for k in "${KEYS[@]}"; do
  read -r act up < <(ask "$k")
  if [ "${NODE[$k]}" = "$victim" ]; then
    moved=$((moved + 1))
    # a fresh node: the key's count starts over (allowed), on a live node
    { [ "$act" = allow ] && [ "${up##*, }" != "$victim" ]; } || moved_ok=0
  else
    kept=$((kept + 1))
    { [ "$act" = block ] && [ "$up" = "${NODE[$k]}" ]; } || kept_ok=0
  fi
done
[ "$moved" -ge 1 ] && [ "$moved_ok" = 1 ] && ok ||
  bad "keys of the stopped node: moved=$moved, each should be allowed by a live node"
[ "$kept_ok" = 1 ] && ok || bad "keys of the live nodes should keep their node and stay blocked"
# and the moved keys are exact again on their new node: 5 allowed in all
read -r act up < <(ask k01)
allowed=1
[ "$act" = allow ] && allowed=2
for _ in 1 2 3 4 5; do
  read -r act _ < <(ask k01)
  [ "$act" = allow ] && allowed=$((allowed + 1))
done
eq "$allowed" 5 "k01 on its new node: five allowed again, then blocked"

summary
[ "$fail" = 0 ]
