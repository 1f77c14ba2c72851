#!/usr/bin/env python3
"""decide_server.py: a stand-in decision service for the tests of
`verdict replay --against` (tests/replay/against.sh).

It answers POST /v1/decide the way verdict does, with a rule of its own so
that the test can predict every answer from the request alone:

  - http_request: "block" when the path starts with /admin or contains a dot
    segment of a probe (/.env, /.git), else "allow"
  - payment_authorization: "block" above 1000 USD, else "approve"
  - anything else: the first candidate, or "allow" without candidates

GET /stats answers {"requests": n, "connections": n, "decisions": n}.

Options (one each):
  --chunked        answer with Transfer-Encoding: chunked
  --close          answer with Connection: close (one connection a request)
  --refuse-every N answer every Nth request with 422 and an error object
  --http10         answer with an HTTP/1.0 status line and no Content-Length

It prints the port it listens on (127.0.0.1, a free port) as the first line
of stdout, then serves until killed.
"""
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OPTS = {"chunked": False, "close": False, "refuse_every": 0, "http10": False}
STATS = {"requests": 0, "connections": 0, "decisions": 0}
LOCK = threading.Lock()


def decide(req):
    point = req.get("action")
    ctx = req.get("context") or {}
    cands = req.get("candidates") or []
    if point == "http_request":
        path = ctx.get("path", "")
        blocked = path.startswith("/admin") or "/.env" in path or "/.git" in path
        action = "block" if blocked else "allow"
        rule = "stand-in-path" if blocked else None
    elif point == "payment_authorization":
        amount = float((ctx.get("payment") or {}).get("amount_usd", 0))
        action = "block" if amount > 1000 else "approve"
        rule = "stand-in-amount" if amount > 1000 else None
    else:
        action = cands[0] if cands else "allow"
        rule = None
    return {
        "action": action,
        "allowed": action in ("allow", "approve") or action.startswith("route_"),
        "review": False,
        "confidence": 0.9,
        "source": "rule" if rule else "default",
        "reason": {"rule": rule, "message": "stand-in service"},
        "policy_version": "stand-in-1",
        "latency_us": 1.0,
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # answers go out at once, not after the client's delayed ACK
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with LOCK:
            STATS["connections"] += 1

    def log_message(self, fmt, *args):  # quiet
        pass

    def send_body(self, status, obj):
        body = json.dumps(obj).encode()
        if OPTS["http10"]:
            # HTTP/1.0, no length: the body ends with the connection
            self.wfile.write(b"HTTP/1.0 %d OK\r\nContent-Type: application/json\r\n\r\n" % status)
            self.wfile.write(body)
            self.close_connection = True
            return
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if OPTS["close"]:
            self.send_header("Connection", "close")
            self.close_connection = True
        if OPTS["chunked"]:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            # two chunks and a trailer, to exercise the decoder
            half = len(body) // 2
            for part in (body[:half], body[half:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\nX-Trailer: 1\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def do_GET(self):
        if self.path == "/stats":
            with LOCK:
                self.send_body(200, dict(STATS))
        else:
            self.send_body(404, {"error": {"message": "not found"}})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        with LOCK:
            STATS["requests"] += 1
            count = STATS["requests"]
        if self.path != "/v1/decide":
            self.send_body(404, {"error": {"message": "no such path: " + self.path}})
            return
        every = OPTS["refuse_every"]
        if every and count % every == 0:
            self.send_body(422, {"error": {"code": "request", "message": "refused by the stand-in"}})
            return
        try:
            req = json.loads(raw)
        except ValueError as e:
            self.send_body(400, {"error": {"message": "bad JSON: %s" % e}})
            return
        with LOCK:
            STATS["decisions"] += 1
        self.send_body(200, decide(req))


def main():
    args = sys.argv[1:]
    while args:
        a = args.pop(0)
        if a == "--chunked":
            OPTS["chunked"] = True
        elif a == "--close":
            OPTS["close"] = True
        elif a == "--http10":
            OPTS["http10"] = True
        elif a == "--refuse-every":
            OPTS["refuse_every"] = int(args.pop(0))
        else:
            sys.exit("unknown option " + a)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
