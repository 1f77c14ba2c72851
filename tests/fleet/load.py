"""load.py — a bounded load generator for the shipping test: sends each
request line of a JSON Lines file once to POST /v1/decide on one keep-alive
connection, and appends the snapshot id of every decision answered 200 to a
file (one a line). Prints the count answered. Usage: load.py URL FILE IDS"""
import http.client
import json
import sys
import urllib.parse

url, path, ids_path = sys.argv[1], sys.argv[2], sys.argv[3]
u = urllib.parse.urlparse(url)
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
answered = 0
with open(path) as f, open(ids_path, "a") as ids:
    for line in f:
        line = line.strip()
        if not line:
            continue
        conn.request("POST", "/v1/decide", body=line, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        body = r.read()
        if r.status == 200:
            ids.write(json.loads(body)["snapshot_id"] + "\n")
            answered += 1
print(answered)
