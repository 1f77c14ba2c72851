#!/usr/bin/env bash
# smuggling.sh — request smuggling and lenient HTTP parsing, on a real
# socket to a real `verdict serve`. Each refused byte sequence must get
# exactly one answer, a 400 with the JSON error `bad_http`, and the server
# must close the connection; where the sequence carries a second request
# (GET /readyz) behind the first, that request must not be answered. Each is
# sent in one write, and the cases about the request head again one byte a
# write (so that the checks hold across reads). The accepted cases (HTTP/1.0
# without Host, a chunk extension, an ignored Upgrade, …) must be answered
# as before, and the classics llhttp already refused stay refused. Run from
# the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: smuggling.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need curl python3

mkdir -p "$T/bundle"
for f in examples/policies/*; do cp -r "$f" "$T/bundle/"; done
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
"$V" serve --policy "$T/bundle" --listen "127.0.0.1:$PORT" --threads 2 --no-snapshots \
  --no-store 2>"$T/log" &
PID=$!
wait_ready smuggling "$T/log"

# One line a check: "ok NAME" or "FAIL NAME: why".
python3 - "$PORT" >"$T/results" <<'PY'
import json, socket, sys, time

PORT = int(sys.argv[1])
H = b"Host: x\r\n"
SMUGGLED = b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"
GOOD = (b'{"action":"http_request","context":{"method":"GET","path":"/products/x",'
        b'"client_ip":"10.0.0.7","headers":{"user-agent":"Mozilla/5.0"},"env":{"country":"GB"}}}')

# name, bytes, also one byte a write
REFUSED = [
    # obs-fold: a value continued on the next line; read as chunked before
    ("obs-fold Transfer-Encoding", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n" + SMUGGLED, True),
    # CVE-2024-27982: a leading-space Content-Length folded into X-A
    ("leading-space Content-Length", b"GET /healthz HTTP/1.1\r\n" + H +
     b"X-A: y\r\n Content-Length: 33\r\n\r\n" + SMUGGLED, True),
    ("leading-tab header line", b"GET /healthz HTTP/1.1\r\n" + H +
     b"X-A: y\r\n\tX-B: z\r\n\r\n" + SMUGGLED, True),
    # CVE-2023-30589: CR alone ends the head
    ("CR LF CR ends the head", b"GET /healthz HTTP/1.1\r\n" + H + b"\r" + SMUGGLED, True),
    ("bare LF ends the head", b"GET /healthz HTTP/1.1\r\n" + H + b"\n" + SMUGGLED, True),
    ("bare LF after the request line", b"GET /healthz HTTP/1.1\n" + H + b"\r\n" + SMUGGLED, True),
    ("bare LF after a header", b"GET /healthz HTTP/1.1\r\nHost: x\nX-A: y\r\n\r\n" + SMUGGLED, True),
    ("bare CR in the request line", b"GET /healthz HTTP/1.1\rX\n" + H + b"\r\n" + SMUGGLED, True),
    # any two bytes in place of the CRLF after chunk data
    ("junk instead of CRLF after chunk data", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\n\r\n3\r\nabcXX0\r\n\r\n" + SMUGGLED, False),
    ("bare LF after chunk data", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n" + SMUGGLED, False),
    ("CR and junk after a chunk size", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\n\r\n3\rXabc\r\n0\r\n\r\n" + SMUGGLED, False),
    ("bare LF ends a chunked body", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\n" + SMUGGLED, True),
    ("CR and junk end a chunked body", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\rX" + SMUGGLED, True),
    ("a trailer field", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 33\r\n\r\n" + SMUGGLED, True),
    # header names and Host
    ("space in a header name", b"GET /healthz HTTP/1.1\r\n" + H + b"Content Length: 33\r\n\r\n" + SMUGGLED, True),
    ("empty header name", b"GET /healthz HTTP/1.1\r\n" + H + b": x\r\n\r\n" + SMUGGLED, True),
    ("HTTP/1.1 without Host", b"GET /healthz HTTP/1.1\r\n\r\n" + SMUGGLED, True),
    ("two Host headers", b"GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n" + SMUGGLED, True),
    ("two Host headers in HTTP/1.0", b"GET /healthz HTTP/1.0\r\nHost: x\r\nHost: y\r\n\r\n", True),
    ("Host with userinfo", b"GET /healthz HTTP/1.1\r\nHost: a@x\r\n\r\n" + SMUGGLED, True),
    ("Host with a space", b"GET /healthz HTTP/1.1\r\nHost: x y\r\n\r\n" + SMUGGLED, True),
    ("Host with a slash", b"GET /healthz HTTP/1.1\r\nHost: x/y\r\n\r\n" + SMUGGLED, True),
    # framing
    ("Transfer-Encoding gzip, chunked", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" + SMUGGLED, True),
    ("Transfer-Encoding identity, chunked", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n" + SMUGGLED, True),
    ("Transfer-Encoding ,chunked", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: ,chunked\r\n\r\n0\r\n\r\n" + SMUGGLED, True),
    ("Transfer-Encoding in HTTP/1.0", b"GET /healthz HTTP/1.0\r\n" +
     b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n0\r\n\r\n" + SMUGGLED, True),
    # the request line
    ("absolute-form target", b"GET http://x/healthz HTTP/1.1\r\n" + H + b"\r\n" + SMUGGLED, True),
    ("authority-form CONNECT", b"CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n" + SMUGGLED, True),
    ("asterisk-form", b"OPTIONS * HTTP/1.1\r\n" + H + b"\r\n" + SMUGGLED, True),
    ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + SMUGGLED, True),
    ("a fragment in the target", b"GET /healthz#x HTTP/1.1\r\n" + H + b"\r\n" + SMUGGLED, True),
    ("a tab in the target", b"GET /health\tz HTTP/1.1\r\n" + H + b"\r\n" + SMUGGLED, True),
    ("two spaces before the target", b"GET  /healthz HTTP/1.1\r\n" + H + b"\r\n" + SMUGGLED, True),
    ("two spaces before the version", b"GET /healthz  HTTP/1.1\r\n" + H + b"\r\n" + SMUGGLED, True),
    ("HTTP/0.9 request line", b"GET /healthz\r\n\r\n" + SMUGGLED, True),
    ("HTTP/2.0 in the request line", b"GET /healthz HTTP/2.0\r\n" + H + b"\r\n" + SMUGGLED, True),
    ("RTSP/1.0 in the request line", b"GET /healthz RTSP/1.0\r\n" + H + b"\r\n" + SMUGGLED, True),
    ("ICE/1.0 in the request line", b"SOURCE /healthz ICE/1.0\r\n" + H + b"\r\n" + SMUGGLED, True),
    # classics llhttp already refused: they must stay refused
    ("Content-Length and Transfer-Encoding", b"POST /v1/decide HTTP/1.1\r\n" + H +
     b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED, False),
    ("Transfer-Encoding chunked, gzip", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n" + SMUGGLED, False),
    ("Transfer-Encoding twice", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED, False),
    ("two different Content-Length", b"POST /v1/decide HTTP/1.1\r\n" + H +
     b"Content-Length: 2\r\nContent-Length: 35\r\n\r\n{}" + SMUGGLED, False),
    ("two equal Content-Length", b"POST /v1/decide HTTP/1.1\r\n" + H +
     b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}" + SMUGGLED, False),
    ("Content-Length list", b"POST /v1/decide HTTP/1.1\r\n" + H +
     b"Content-Length: 2, 2\r\n\r\n{}" + SMUGGLED, False),
    ("Content-Length overflow", b"POST /v1/decide HTTP/1.1\r\n" + H +
     b"Content-Length: 99999999999999999999999\r\n\r\n" + SMUGGLED, False),
    ("Content-Length with a sign", b"POST /v1/decide HTTP/1.1\r\n" + H +
     b"Content-Length: +2\r\n\r\n{}" + SMUGGLED, False),
    ("NUL in a header value", b"GET /healthz HTTP/1.1\r\n" + H + b"X-A: a\x00b\r\n\r\n" + SMUGGLED, False),
    ("control byte in a header value", b"GET /healthz HTTP/1.1\r\n" + H + b"X-A: a\x01b\r\n\r\n" + SMUGGLED, False),
    ("DEL in a header value", b"GET /healthz HTTP/1.1\r\n" + H + b"X-A: a\x7fb\r\n\r\n" + SMUGGLED, False),
    ("CR inside a header value", b"GET /healthz HTTP/1.1\r\n" + H + b"X-A: a\rb\r\n\r\n" + SMUGGLED, False),
    ("control byte in a header name", b"GET /healthz HTTP/1.1\r\n" + H + b"X\x01A: y\r\n\r\n" + SMUGGLED, False),
    ("space before the colon", b"GET /healthz HTTP/1.1\r\n" + H + b"Content-Length : 33\r\n\r\n" + SMUGGLED, False),
    ("junk in a chunk size", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\n\r\n3x\r\nabc\r\n0\r\n\r\n" + SMUGGLED, False),
    ("chunk size overflow", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\n\r\n10000000000000003\r\nabc\r\n0\r\n\r\n" + SMUGGLED, False),
    ("space after a chunk size", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\n\r\n3 \r\nabc\r\n0\r\n\r\n" + SMUGGLED, False),
    ("control byte in the target", b"GET /a\x01z HTTP/1.1\r\n" + H + b"\r\n" + SMUGGLED, False),
    ("target without a slash", b"GET healthz HTTP/1.1\r\n" + H + b"\r\n" + SMUGGLED, False),
    ("lower-case method", b"get /healthz HTTP/1.1\r\n" + H + b"\r\n" + SMUGGLED, False),
    ("leading space on the first header", b"GET /healthz HTTP/1.1\r\n Host: x\r\n\r\n" + SMUGGLED, False),
]

# name, bytes, the statuses answered in order (None: no answer, the request
# is not complete); sent in one write and again one byte a write
ACCEPTED = [
    ("plain GET", b"GET /healthz HTTP/1.1\r\n" + H + b"\r\n" + SMUGGLED, [200, 200]),
    ("HTTP/1.0 without Host", b"GET /healthz HTTP/1.0\r\n\r\n", [200]),
    ("HTTP/1.0 keep-alive without Host", b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + SMUGGLED, [200, 200]),
    ("Host with a port", b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:8181\r\n\r\n", [200]),
    ("IPv6 Host", b"GET /healthz HTTP/1.1\r\nHost: [::1]:8181\r\n\r\n", [200]),
    ("empty Host", b"GET /healthz HTTP/1.1\r\nHost:\r\n\r\n", [200]),
    ("lower-case host header", b"GET /healthz HTTP/1.1\r\nhOST: x\r\n\r\n", [200]),
    ("Transfer-Encoding Chunked", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: Chunked \r\n\r\n3\r\nabc\r\n0\r\n\r\n" + SMUGGLED, [200, 200]),
    ("a chunk extension", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\n\r\n3;a=b\r\nabc\r\n0;x\r\n\r\n" + SMUGGLED, [200, 200]),
    ("an unfinished chunked body", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n", None),
    ("a tab and obs-text in a value", b"GET /healthz HTTP/1.1\r\n" + H + b"X-A: a\tb \xe9\r\n\r\n", [200]),
    ("a query string", b"GET /healthz?x=1&y=%20 HTTP/1.1\r\n" + H + b"\r\n", [200]),
    ("leading empty lines", b"\r\n\r\nGET /healthz HTTP/1.1\r\n" + H + b"\r\n", [200]),
    # Upgrade is ignored: the request is answered, the next one too
    ("Upgrade ignored", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n" + SMUGGLED, [200, 200]),
    ("CONNECT with a path is just a method", b"CONNECT /healthz HTTP/1.1\r\n" + H + b"\r\n" + SMUGGLED, [405, 200]),
    # after Connection: close nothing more is read
    ("Connection: close stops the pipeline", b"GET /healthz HTTP/1.1\r\n" + H +
     b"Connection: close\r\n\r\n" + SMUGGLED, [200]),
    ("a decision with Content-Length", b"POST /v1/decide HTTP/1.1\r\n" + H +
     b"Content-Length: %d\r\n\r\n" % len(GOOD) + GOOD + SMUGGLED, [200, 200]),
    ("a chunked decision", b"POST /v1/decide HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
     + b"%x\r\n" % len(GOOD) + GOOD + b"\r\n0\r\n\r\n" + SMUGGLED, [200, 200]),
]


def exchange(data, bytewise, close_write):
    """Sends data, reads until the server closes (or 5 s pass: a hang);
    returns (bytes read, closed by the server)."""
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        if bytewise:
            for i in range(len(data)):
                s.send(data[i:i + 1])
                time.sleep(0.0005)  # one read a byte, mostly
        else:
            s.sendall(data)
        if close_write:
            s.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the server answered and closed while we were sending
    got, closed = b"", False
    while True:
        try:
            b = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            closed = True
            break
        if not b:
            closed = True
            break
        got += b
    s.close()
    return got, closed


def answers(got):
    """The answers in got: [(status, headers dict, body)]; None if garbled."""
    out = []
    while got:
        head, sep, rest = got.partition(b"\r\n\r\n")
        if not sep or not head.startswith(b"HTTP/1.1 "):
            return None
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        n = int(hdrs.get("content-length", "0"))
        out.append((status, hdrs, rest[:n]))
        got = rest[n:]
    return out


def check_refused(name, data, bytewise):
    got, closed = exchange(data, bytewise, False)
    a = answers(got)
    if a is None:
        return "not HTTP answers: %r" % got[:200]
    if len(a) != 1:
        return "%d answers (%s), want one 400" % (len(a), ",".join(str(x[0]) for x in a))
    status, hdrs, body = a[0]
    if status != 400:
        return "status %d, want 400: %r" % (status, body[:200])
    try:
        err = json.loads(body)["error"]
    except Exception:
        return "not a JSON error: %r" % body[:200]
    if err.get("code") != "bad_http":
        return "code %r, want bad_http" % err.get("code")
    if hdrs.get("connection") != "close":
        return "no Connection: close"
    if not closed:
        return "the connection stayed open"
    if b"ready" in got:
        return "the smuggled request was answered"
    return None


def check_accepted(name, data, want, bytewise):
    # the client half-closes: an answer that waits for more bytes shows as none
    got, closed = exchange(data, bytewise, True)
    a = answers(got)
    if a is None:
        return "not HTTP answers: %r" % got[:200]
    statuses = [x[0] for x in a]
    if want is None:  # the request is not complete: no answer yet, no error
        return None if statuses == [] and closed else "answers %s, want none" % statuses
    if statuses != want:
        return "answers %s, want %s: %r" % (statuses, want, a[0][2][:200] if a else b"")
    return None


for name, data, split in REFUSED:
    for bytewise in ([False, True] if split else [False]):
        label = name + (" (one byte a write)" if bytewise else "")
        why = check_refused(name, data, bytewise)
        print("ok " + label if why is None else "FAIL %s: %s" % (label, why))
for name, data, want in ACCEPTED:
    for bytewise in (False, True):
        label = "accepted: " + name + (" (one byte a write)" if bytewise else "")
        why = check_accepted(name, data, want, bytewise)
        print("ok " + label if why is None else "FAIL %s: %s" % (label, why))
PY
while IFS= read -r line; do
  case $line in
    ok\ *) ok ;;
    *) bad "${line#FAIL }" ;;
  esac
done <"$T/results"
# every case ran (a python error would leave fewer lines)
eq "$(wc -l <"$T/results" | tr -d ' ')" "$(grep -c '^\(ok\|FAIL\) ' "$T/results")" "every line a result"
[ "$(wc -l <"$T/results")" -ge 100 ] && ok || bad "only $(wc -l <"$T/results") results"

# curl still works, with chunked bodies too.
CODE=$(curl -s -o "$T/body" -w '%{http_code}' -H 'Transfer-Encoding: chunked' \
  --data-binary '{"action":"http_request","context":{"path":"/products/x","env":{"country":"GB"}}}' \
  "$URL/v1/decide")
eq "$CODE" 200 "curl: chunked decision"
CODE=$(curl -s -o "$T/body" -w '%{http_code}' --http1.0 "$URL/healthz")
eq "$CODE" 200 "curl: HTTP/1.0"

# The server is still up after all of it.
eq "$(curl -s -o /dev/null -w '%{http_code}' "$URL/healthz")" 200 "still serving"
stop
summary
[ "$fail" = 0 ]
