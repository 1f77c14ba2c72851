#!/usr/bin/env bash
# mcp_versions.sh — what `verdict mcp` owes each protocol version, over
# stdio with raw JSON-RPC lines: JSON-RPC batches in a session that
# negotiated 2025-03-26 (the one version with them: answers as one array in
# order, none for notifications, initialize refused inside one) and refused
# in a 2025-11-25 session; the cache hints 2026-07-28 requires on tools/list
# and server/discover (ttlMs an integer >= 0, cacheScope public|private, per
# its schema's CacheableResult) and only there; decide_action's annotations
# (it writes a snapshot, so it is not read-only); a Gemini CLI
# read_many_files decided file by file through decide_action.
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: mcp_versions.sh BUILD_DIR}
V="$BUILD/verdict"
PY=/usr/bin/python3
. tests/lib.sh
scratch
guard_bundle

META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
cat >"$T/old.jsonl" <<EOF
{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"old-client","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}},{"jsonrpc":"2.0","id":"two","method":"tools/list"},{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"decide_action","arguments":{"tool_name":"Bash","tool_input":{"command":"rm -rf /"},"cwd":"/home/dev/proj"}}},5,{"jsonrpc":"2.0","id":6,"method":"no/such"}]
[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}},{"jsonrpc":"2.0","id":99,"result":{}}]
[]
[{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}]
{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"decide_action","arguments":{"agent":"gemini-cli","tool_name":"read_many_files","tool_input":{"include":["README.md","~/.ssh/id_rsa"]},"cwd":"/home/dev/proj","call_id":"g-call-1"}}}
{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"decide_action","arguments":{"agent":"gemini-cli","tool_name":"read_many_files","tool_input":{"include":["README.md","src/*.c"]},"cwd":"/home/dev/proj"}}}
EOF
cat >"$T/new.jsonl" <<EOF
{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}
[{"jsonrpc":"2.0","id":1,"method":"ping"}]
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{$META}}
{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{$META}}
EOF
"$V" mcp --policy "$T/p" --snapshots "$T/s1" <"$T/old.jsonl" >"$T/old.out" 2>/dev/null
"$V" mcp --policy "$T/p" --snapshots "$T/s2" <"$T/new.jsonl" >"$T/new.out" 2>/dev/null
"$V" snapshots export --snapshots "$T/s1" >"$T/s1.jsonl" 2>/dev/null

"$PY" - "$T/old.out" "$T/new.out" "$T/s1.jsonl" <<'PYEOF'
import json, sys
passed = failed = 0
def check(cond, what):
    global passed, failed
    if cond: passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)
old = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
new = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
snaps = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]

# 2025-03-26: initialize, the batch's array, the empty batch's error, the
# initialize-in-a-batch array, two single answers; nothing for the batch of
# a notification and a response.
check(len(old) == 6, "2025-03-26: six lines (none for the all-notification batch): %d" % len(old))
check(old[0].get("result", {}).get("protocolVersion") == "2025-03-26", "initialize negotiates 2025-03-26")
b = old[1] if len(old) > 1 else None
check(isinstance(b, list), "a batch is answered with an array")
if isinstance(b, list):
    check([m.get("id") for m in b] == [1, "two", 3, None, 6],
          "one answer a request, in order, none for the notification: %s" % [m.get("id") for m in b])
    by = {json.dumps(m.get("id")): m for m in b}
    check(by.get("1", {}).get("result") == {}, "batch: ping")
    check(len(by.get('"two"', {}).get("result", {}).get("tools", [])) == 2, "batch: tools/list")
    check(by.get("3", {}).get("result", {}).get("structuredContent", {}).get("action") == "deny",
          "batch: decide_action")
    check(by.get("null", {}).get("error", {}).get("code") == -32600, "batch: a member that is not an object: -32600")
    check(by.get("6", {}).get("error", {}).get("code") == -32601, "batch: unknown method: -32601")
    check(all(m.get("jsonrpc") == "2.0" for m in b), "batch: every answer JSON-RPC 2.0")
e = old[2] if len(old) > 2 else {}
check(isinstance(e, dict) and e.get("error", {}).get("code") == -32600 and e.get("id") is None,
      "an empty batch: one -32600 error")
ib = old[3] if len(old) > 3 else []
check(isinstance(ib, list) and ib[0].get("id") == 7 and ib[0].get("error", {}).get("code") == -32600
      and "batch" in ib[0]["error"]["message"], "initialize inside a batch: -32600")
r8 = old[4].get("result", {}) if len(old) > 4 else {}
check(r8.get("structuredContent", {}).get("action") == "deny"
      and r8["structuredContent"].get("reason", {}).get("rule") == "secret-access",
      "decide_action: read_many_files with a key among its files is denied")
r9 = old[5].get("result", {}) if len(old) > 5 else {}
check(r9.get("structuredContent", {}).get("action") == "allow", "decide_action: read_many_files inside the project")
ctxs = [s["request"]["context"] for s in snaps]
rm = [c for c in ctxs if c.get("agent_tool") == "read_many_files"]
check([(c["tool"], c["input"].get("file_path"), c.get("call_id")) for c in rm[:2]] ==
      [("Read", "README.md", "g-call-1"), ("Read", "~/.ssh/id_rsa", "g-call-1")],
      "read_many_files: one Read a file, each with the call id: %s" % rm[:2])

# 2025-11-25: a batch is refused; tools/list has no cache hints (not in
# that schema); 2026-07-28's tools/list and server/discover have them.
check(len(new) == 5, "2025-11-25 session: five answers: %d" % len(new))
bn = new[1] if len(new) > 1 else {}
check(isinstance(bn, dict) and bn.get("error", {}).get("code") == -32600 and "2025-03-26" in bn["error"]["message"],
      "a batch in a 2025-11-25 session: -32600, saying which version has them")
legacy = new[2].get("result", {}) if len(new) > 2 else {}
check("ttlMs" not in legacy and "cacheScope" not in legacy and "resultType" not in legacy,
      "2025-11-25 tools/list: no 2026-07-28 fields")
for i, what in ((3, "tools/list"), (4, "server/discover")):
    r = new[i].get("result", {}) if len(new) > i else {}
    t = r.get("ttlMs")
    check(isinstance(t, int) and not isinstance(t, bool) and t >= 0, "2026-07-28 %s: ttlMs an integer >= 0: %r" % (what, t))
    check(r.get("cacheScope") in ("public", "private"), "2026-07-28 %s: cacheScope: %r" % (what, r.get("cacheScope")))
    check(r.get("resultType") == "complete", "2026-07-28 %s: resultType" % what)
tools = {t["name"]: t for t in legacy.get("tools", [])}
ann = tools.get("decide_action", {}).get("annotations", {})
check(ann.get("readOnlyHint") is False, "decide_action writes a snapshot: readOnlyHint false")
check(ann.get("destructiveHint") is False, "decide_action only adds a record: destructiveHint false")
check(tools.get("explain_decision", {}).get("annotations", {}).get("readOnlyHint") is True,
      "explain_decision only reads: readOnlyHint true")
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PYEOF
