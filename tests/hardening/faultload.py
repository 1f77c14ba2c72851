#!/usr/bin/python3
"""faultload.py — a steady stream of decisions for the fault tests.

Keep-alive clients (threads) POST decide requests to a `verdict serve` on
loopback, round-robin over the request bodies given, until the stop file
exists (and at least --min requests were answered). It counts the answers by
status and keeps what the fault tests assert on: every snapshot id a 2xx
answer acknowledged (--ids, one per line), the sources and model versions
seen, 2xx answers that carry no snapshot id (`unrecorded`), the error codes
of the others (`codes`, with the first message of each in `messages`), and
the first few failures with their bodies. A connection that fails (the
server was killed, or an answer took longer than --timeout) is counted as
`conn`, and the client reconnects.

Progress (answers so far) is written to --progress every 50 answers, so a
test can wait for the load to have reached a point without sleeping blind.
The summary, one JSON object, goes to --out at the end.

Not a benchmark: no timing is measured or asserted."""
import argparse
import http.client
import json
import os
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--stop", required=True, help="stop once this file exists")
ap.add_argument("--out", required=True)
ap.add_argument("--ids", help="append each acknowledged snapshot id here")
ap.add_argument("--progress", help="answers so far, rewritten every 50")
ap.add_argument("--threads", type=int, default=4)
ap.add_argument("--min", type=int, default=0, help="answers to reach before stopping")
ap.add_argument("--timeout", type=float, default=60.0, help="seconds one answer may take")
ap.add_argument("--give-up", type=float, default=0,
                help="stop after this many seconds even short of --min (0: never); only a "
                     "bound against a server that hangs, `gave_up` in the summary says so")
ap.add_argument("bodies", nargs="+", help="files holding one decide request each")
a = ap.parse_args()

bodies = [open(f, "rb").read() for f in a.bodies]
lock = threading.Lock()
st = {"total": 0, "status": {}, "conn": 0, "failures": [], "sources": {}, "model_versions": [],
      "policy_versions": [], "unrecorded": 0, "codes": {}, "messages": {}, "gave_up": False}
ids_f = open(a.ids, "a") if a.ids else None


def progress():
    if a.progress and st["total"] % 50 == 0:
        tmp = a.progress + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % st["total"])
        os.replace(tmp, a.progress)


started = time.monotonic()


def done():
    if a.give_up and time.monotonic() - started > a.give_up:
        st["gave_up"] = True
        return True
    return os.path.exists(a.stop) and st["total"] >= a.min


def client(n):
    conn = None
    i = n
    while not done():
        body = bodies[i % len(bodies)]
        i += 1
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=a.timeout)
            conn.request("POST", "/v1/decide", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            code = r.status
        except (OSError, http.client.HTTPException):
            if conn is not None:
                conn.close()
            conn = None
            with lock:
                st["conn"] += 1
            time.sleep(0.05)
            continue
        with lock:
            st["total"] += 1
            st["status"][str(code)] = st["status"].get(str(code), 0) + 1
            if 200 <= code < 300:
                try:
                    d = json.loads(data)
                except ValueError:
                    d = {}
                src = d.get("source")
                st["sources"][str(src)] = st["sources"].get(str(src), 0) + 1
                mv = d.get("model_version")
                if mv and mv not in st["model_versions"]:
                    st["model_versions"].append(mv)
                pv = d.get("policy_version")
                if pv and pv not in st["policy_versions"]:
                    st["policy_versions"].append(pv)
                sid = d.get("snapshot_id")
                if not sid:
                    st["unrecorded"] += 1
                if ids_f and sid:
                    ids_f.write(sid + "\n")
                    ids_f.flush()
            else:
                try:
                    e = json.loads(data)["error"]
                    ec, em = str(e["code"]), str(e["message"])
                except (ValueError, KeyError, TypeError):
                    ec, em = "(not a JSON error)", data[:300].decode("utf-8", "replace")
                st["codes"][ec] = st["codes"].get(ec, 0) + 1
                st["messages"].setdefault(ec, em)
                if len(st["failures"]) < 5:
                    st["failures"].append("%d %s" % (code, data[:300].decode("utf-8", "replace")))
            progress()
    if conn is not None:
        conn.close()


ts = [threading.Thread(target=client, args=(n,)) for n in range(a.threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
if ids_f:
    ids_f.close()
st["ok"] = sum(v for k, v in st["status"].items() if k.startswith("2"))
st["failed"] = st["total"] - st["ok"]
with open(a.out, "w") as f:
    json.dump(st, f)
