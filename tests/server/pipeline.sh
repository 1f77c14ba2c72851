#!/usr/bin/env bash
# pipeline.sh — pipelining and backpressure against the real
# `verdict serve`: many pipelined requests on one connection answered in
# order with the right bodies (decides mixed with other endpoints, refusals
# and a query string), several connections pipelining at once, a
# "Connection: close" request in the middle of a pipeline (answered, nothing
# after it), a client that sends without reading (it is answered in full and
# in order once it reads, and other clients are served meanwhile), the
# metrics counting every decision, and SIGTERM with requests queued
# (every answer complete and in order, then a clean close, exit 0). Each
# request is told apart by its key: the test bundle has one rule per key.
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: pipeline.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl

# A bundle whose answer names the request: key kN matches rule rN.
mkdir -p "$T/bundle"
{
  echo "strategy: order"
  echo "decision_points: [http_request]"
  echo "rules:"
  for i in $(seq 0 39); do
    printf '  - name: r%d\n    if: request.key == "k%d"\n    action: block\n' "$i" "$i"
  done
  echo "default: allow"
  echo "on_no_candidate: first"
} >"$T/bundle/order.yaml"

start() {
  PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  "$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads "$1" --no-store \
    --no-snapshots 2>"$T/log" &
  PID=$!
  wait_ready pipeline "$T/log"
}

# The client: builds pipelines of requests, each with its expected answer,
# reads the answers back one by one (Content-Length framed) and checks them.
cat >"$T/client.py" <<'PY'
import json, os, signal, socket, sys, threading, time

port = int(sys.argv[1])
mode = sys.argv[2]

def request(i, close=False):
    """The i-th request of a pipeline and what its answer must be."""
    conn = b"Connection: close\r\n" if close else b""
    if i % 7 == 3:
        return (b"GET /healthz HTTP/1.1\r\nHost: t\r\n" + conn + b"\r\n"), (200, "healthz")
    if i % 11 == 5:
        body = b'{"action":"http_request","key":'  # malformed JSON: refused
        want = (400, "json")
    else:
        key = i % 40 if i % 13 != 9 else 99  # 99: no rule, the default
        body = json.dumps({"action": "http_request", "key": "k%d" % key}).encode()
        want = (200, "r%d" % key if key < 40 else None)
    path = b"/v1/decide?n=%d" % i if i % 17 == 2 else b"/v1/decide"
    head = b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n" % (
        path, conn, len(body))
    return head + body, want

def read_answer(f):
    """One answer: (status, headers dict, body), or None at a clean EOF.
    Raises on an answer cut short."""
    line = f.readline()
    if not line:
        return None
    if not line.endswith(b"\r\n"):
        raise ValueError("cut short status line %r" % line)
    status = int(line.split()[1])
    headers = {}
    while True:
        h = f.readline()
        if not h.endswith(b"\r\n"):
            raise ValueError("cut short headers")
        if h == b"\r\n":
            break
        k, v = h.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    body = f.read(n)
    if len(body) != n:
        raise ValueError("cut short body: %d of %d bytes" % (len(body), n))
    return status, headers, body

def check(i, got, want):
    status, headers, body = got
    wstatus, what = want
    if status != wstatus:
        return "answer %d: status %d, want %d: %r" % (i, status, wstatus, body[:200])
    if what == "healthz":
        return None if b'"ok"' in body else "answer %d: not the healthz body: %r" % (i, body[:200])
    d = json.loads(body)
    if what == "json":
        return None if d["error"]["code"] == "json" else "answer %d: %r" % (i, d)
    if d.get("reason", {}).get("rule") != what:
        return "answer %d: rule %r, want %r" % (i, d.get("reason", {}).get("rule"), what)
    return None

def run(sock, wants, first=0):
    """Reads len(wants) answers; returns (answers read, first error)."""
    f = sock.makefile("rb")
    for k, want in enumerate(wants):
        try:
            got = read_answer(f)
        except ConnectionResetError:
            return k, None  # closed with unread requests: an end, not a lost answer
        except Exception as e:
            return k, "answer %d: %s" % (first + k, e)
        if got is None:
            return k, None
        err = check(first + k, got, want)
        if err:
            return k, err
    return len(wants), None

def connect(rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(60)
    s.connect(("127.0.0.1", port))
    return s

def pipeline(n, offset=0):
    reqs, wants = zip(*(request(offset + i) for i in range(n)))
    return b"".join(reqs), list(wants)

if mode == "one":
    data, wants = pipeline(300)
    s = connect(); s.sendall(data)
    n, err = run(s, wants)
    print("one:", n, err or "in order")
elif mode == "many":
    socks, all_wants = [], []
    for c in range(8):
        data, wants = pipeline(150, offset=c * 5)
        s = connect(); socks.append(s); all_wants.append(wants)
        s.sendall(data)
    results = [run(s, w, 0) for s, w in zip(socks, all_wants)]
    print("many:", sum(r[0] for r in results), [r[1] for r in results if r[1]] or "in order")
elif mode == "close":
    reqs = [request(0)[0], request(1)[0], request(2, close=True)[0], request(4)[0], request(6)[0]]
    s = connect(); s.sendall(b"".join(reqs))
    f = s.makefile("rb")
    conns = []
    while True:
        a = read_answer(f)
        if a is None:
            break
        conns.append(a[1].get("connection"))
    print("close:", len(conns), conns)
elif mode == "slow":
    # Sends a long pipeline and reads nothing for a while: the server must
    # stop reading it (not buffer without bound) and keep serving others.
    data, wants = pipeline(20000)
    s = connect(rcvbuf=4096)
    sender = threading.Thread(target=s.sendall, args=(data,))
    sender.start()
    time.sleep(1.0)
    o = connect(); o.sendall(request(3)[0])
    other, oerr = run(o, [request(3)[1]])
    n, err = run(s, wants)
    sender.join()
    print("slow:", n, err or "in order", "other:", other, oerr or "served")
elif mode == "term":
    pid = int(sys.argv[3])
    socks, all_wants = [], []
    for c in range(4):
        data, wants = pipeline(400, offset=c)
        s = connect(); socks.append(s); all_wants.append(wants)
    for s, c in zip(socks, range(4)):
        s.sendall(pipeline(400, offset=c)[0])
    os.kill(pid, signal.SIGTERM)
    results = [run(s, w) for s, w in zip(socks, all_wants)]
    print("term:", [r[1] for r in results if r[1]] or "clean", sum(r[0] for r in results))
PY

start 2
python3 "$T/client.py" "$PORT" one >"$T/one" 2>&1
has "$T/one" "one: 300 in order" "300 pipelined requests on one connection: answered in order"
python3 "$T/client.py" "$PORT" many >"$T/many" 2>&1
has "$T/many" "many: 1200 in order" "8 connections pipelining 150 each: every answer in order"
python3 "$T/client.py" "$PORT" close >"$T/close" 2>&1
has "$T/close" "close: 3 ['keep-alive', 'keep-alive', 'close']" \
  "Connection: close mid-pipeline: answered up to it, nothing after"
# Decides made: one has 300 requests, of which 43 healthz and 27 refused;
# many 8 × 150 with the same mix; close 3 decides. Count them from the client.
want=$(python3 - <<'PY'
def kind(i):
    return "h" if i % 7 == 3 else "bad" if i % 11 == 5 else "d"
n = sum(kind(i) == "d" for i in range(300))
n += sum(kind(c * 5 + i) == "d" for c in range(8) for i in range(150))
n += sum(kind(i) == "d" for i in (0, 1, 2))
print(n)
PY
)
got=$(curl -s "$URL/metrics" | awk '/^verdict_decisions_total\{/ { s += $2 } END { print s }')
eq "$got" "$want" "metrics: every decision counted"
cnt=$(curl -s "$URL/metrics" | awk '/^verdict_http_request_duration_seconds_count/ { s += $2 } END { print s }')
[ "${cnt:-0}" -ge "$want" ] && ok || bad "metrics: request latency observed for each answer (got $cnt)"
python3 "$T/client.py" "$PORT" slow >"$T/slow" 2>&1
has "$T/slow" "slow: 20000 in order other: 1 served" \
  "a client that does not read: answered in full and in order; others served meanwhile"
stop

start 1
python3 "$T/client.py" "$PORT" term "$PID" >"$T/term" 2>&1
has "$T/term" "term: clean" "SIGTERM with requests queued: every answer whole and in order, clean close"
wait "$PID"; rc=$?
PID=
eq "$rc" 0 "SIGTERM with requests queued: exit 0"

summary
[ "$fail" = 0 ]
