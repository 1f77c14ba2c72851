# tests/nginx.sh — a real nginx for a shell test, in the foreground under the
# test's own prefix $T/nginx (its configuration, logs, temp folders and pid
# file there, loopback ports only). Source it after tests/lib.sh and
# `scratch`, once NAME (the test's name, for the skip note) is known:
#
#   . tests/nginx.sh            # exits 0 with a note when nginx is not installed
#   on_exit() { kill_wait TERM "$NPID"; }
#   nginx_start URL <<EOF       # the http { } block's own lines on stdin
#     server { listen 127.0.0.1:$PORT; root "$W"; }
#   EOF
#   publish FILE [SIGFILE|-]    # a signed bundle into $W (nginx_www first)
#
# nginx_start writes the configuration (the lines common to every test —
# foreground, no master, temp paths under the prefix — around the test's
# own), checks it with `nginx -t` (a failure fails the test and ends it,
# showing why), starts nginx as $NPID, and waits, bounded, until URL answers
# (if one is given). NGINX_CONNS sets worker_connections (256).
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
if [ ! -x "$NGINX" ]; then
  echo "$(basename "$0"): skipped: nginx is not installed (scripts/deps --test installs it)"
  exit 0
fi
NPID=
mkdir -p "$T/nginx/logs" "$T/nginx/tmp"

nginx_start() {
  local url=${1:-}
  {
    cat <<EOF
daemon off;
master_process off;
pid "$T/nginx/nginx.pid";
error_log "$T/nginx/logs/error.log" warn;
events { worker_connections ${NGINX_CONNS:-256}; }
http {
  client_body_temp_path "$T/nginx/tmp/body";
  proxy_temp_path "$T/nginx/tmp/proxy";
  fastcgi_temp_path "$T/nginx/tmp/fastcgi";
  uwsgi_temp_path "$T/nginx/tmp/uwsgi";
  scgi_temp_path "$T/nginx/tmp/scgi";
EOF
    cat
    echo "}"
  } >"$T/nginx/nginx.conf"
  "$NGINX" -p "$T/nginx" -c "$T/nginx/nginx.conf" -t >"$T/nginx-t" 2>&1 || {
    bad "nginx -t"; sed 's/^/  | /' "$T/nginx-t" >&2; summary; exit 1; }
  "$NGINX" -p "$T/nginx" -c "$T/nginx/nginx.conf" 2>"$T/nginx.err" &
  NPID=$!
  [ -n "$url" ] || return 0
  local i
  for i in $(seq 1 100); do
    curl -s -o /dev/null "$url" && return 0
    sleep 0.1
  done
  bad "nginx did not answer $url in 10 s: $(cat "$T/nginx.err")"
}

# nginx_www: the folder $W a server block serves bundles from.
nginx_www() {
  W="$T/www"
  mkdir -p "$W"
  # nginx's ETag is the file's mtime in seconds and its size: each publish
  # gets an mtime of its own, or two within a second (B, then B with another
  # key's .sig) would share one and the second be answered 304
  PUB_T=$(($(date +%s) - 100000))
}

# publish FILE [SIGFILE|-]: FILE as $W/bundle.tar.gz, with SIGFILE (default
# FILE.sig) as its .sig, or no .sig for -. The .sig is put in place first, so
# a poll never finds the new bundle beside the old signature.
publish() {
  cp "$1" "$W/bundle.tar.gz.new"
  PUB_T=$((PUB_T + 1))
  touch -m -d "@$PUB_T" "$W/bundle.tar.gz.new"
  if [ "${2:-}" = - ]; then
    rm -f "$W/bundle.tar.gz.sig"
  else
    cp "${2:-$1.sig}" "$W/bundle.tar.gz.sig.new" && mv "$W/bundle.tar.gz.sig.new" "$W/bundle.tar.gz.sig"
  fi
  mv "$W/bundle.tar.gz.new" "$W/bundle.tar.gz"
}
