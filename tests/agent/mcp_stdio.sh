#!/usr/bin/env bash
# mcp_stdio.sh — `verdict mcp` driven over stdio with raw JSON-RPC lines, as
# an MCP client would: the lifecycle (initialize, version negotiation,
# notifications, ping), tools/list, both tools, the stateless 2026-07-28
# style, and every error a client can provoke (-32700, -32600, -32601,
# -32602, -32022, tool errors as isError results). Also: nothing but JSON-RPC
# on stdout, one answer a request, none for notifications.
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: mcp_stdio.sh BUILD_DIR}
V="$BUILD/verdict"
PY=/usr/bin/python3
. tests/lib.sh
scratch
guard_bundle

cat >"$T/in.jsonl" <<'EOF'
{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"extensions":{"io.modelcontextprotocol/tasks":{}}},"clientInfo":{"name":"inspector-cli","version":"2.12.0"}},"jsonrpc":"2.0","id":0}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"method":"tools/list","jsonrpc":"2.0","id":1}
{"method":"tools/call","params":{"name":"decide_action","arguments":{"tool_name":"Bash","tool_input":{"command":"rm -rf /"},"cwd":"/home/dev/proj"}},"jsonrpc":"2.0","id":2}
{"jsonrpc":"2.0","id":"s-3","method":"tools/call","params":{"name":"decide_action","arguments":{"tool_name":"run_shell_command","agent":"gemini","tool_input":{"command":"git status"},"cwd":"/home/dev/proj","session_id":"g"}}}
{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"decide_action","arguments":{"tool_name":"Bash","tool_input":{"command":"npm i x"},"cwd":"/home/dev/proj","candidates":["allow","deny"]}}}
{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"decide_action","arguments":{"action":"no_such_point","context":{}}}}
{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"decide_action","arguments":{"tool_input":{}}}}
{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}
{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"arguments":{}}}
{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"decide_action","arguments":[1]}}
{"jsonrpc":"2.0","id":10,"method":"resources/list"}
{"jsonrpc":"2.0","id":11,"method":"ping"}
{"jsonrpc":"2.0","id":12,"method":
[{"jsonrpc":"2.0","id":13,"method":"ping"}]
{"jsonrpc":"1.0","id":14,"method":"ping"}
{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}
{"jsonrpc":"2.0","id":16}
"just a string"
{"jsonrpc":"2.0","id":18,"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"old","version":"0"}}}
{"jsonrpc":"2.0","id":19,"method":"initialize","params":{}}
{"jsonrpc":"2.0","id":20,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
{"jsonrpc":"2.0","id":21,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2031-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}
{"jsonrpc":"2.0","id":22,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"explain_decision","arguments":{"snapshot_id":"not-an-id"}}}
{"jsonrpc":"2.0","id":24,"method":"tools/call","params":{"name":"explain_decision","arguments":{"snapshot_id":"01a22a0e-7b96-7334-9407-a3a0e60c7a4a"}}}
{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}
{"jsonrpc":"2.0","id":25,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}
{"jsonrpc":"2.0","id":26,"result":{}}
EOF

"$V" mcp --policy "$T/p" --snapshots "$T/snaps" <"$T/in.jsonl" >"$T/out" 2>"$T/err"
rc=$?

"$PY" - "$T/out" "$rc" "$T/err" <<'PYEOF'
import json, sys
out, rc, errf = sys.argv[1], int(sys.argv[2]), sys.argv[3]
passed = failed = 0
def check(cond, what):
    global passed, failed
    if cond: passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)
lines = open(out).read().split("\n")
check(lines[-1] == "", "stdout ends with a newline")
msgs = []
for l in lines[:-1]:
    try: msgs.append(json.loads(l))
    except Exception: check(False, "a stdout line that is not JSON: %r" % l[:80])
check(rc == 0, "exit 0 at the end of stdin, got %d" % rc)
check(all(m.get("jsonrpc") == "2.0" for m in msgs), "every answer is JSON-RPC 2.0")
by_id = {}
nulls = []
for m in msgs:
    if m.get("id") is None: nulls.append(m)
    else: by_id[json.dumps(m["id"])] = m
def r(i): return by_id.get(json.dumps(i), {})
def err(i): return r(i).get("error", {}).get("code")
# 22 requests answered by id, 4 messages whose id cannot be read (id null),
# 2 notifications and 1 response from the client that get no answer
check(len(msgs) == 22 + 4, "one answer a request, none for notifications: %d answers" % len(msgs))

init = r(0).get("result", {})
check(init.get("protocolVersion") == "2025-11-25", "initialize echoes 2025-11-25")
check(init.get("capabilities", {}).get("tools") == {"listChanged": False}, "tools capability")
check(init.get("serverInfo", {}).get("name") == "verdict", "serverInfo.name")
check(isinstance(init.get("instructions"), str), "instructions")

tools = r(1).get("result", {}).get("tools", [])
names = [t["name"] for t in tools]
check(names == ["decide_action", "explain_decision"], "tools/list names: %s" % names)
for t in tools:
    check(t["inputSchema"].get("type") == "object", t["name"] + ": inputSchema is an object schema")
    check(t.get("outputSchema", {}).get("type") == "object", t["name"] + ": outputSchema")
    check(isinstance(t.get("description"), str) and t["description"], t["name"] + ": description")

d = r(2).get("result", {})
sc = d.get("structuredContent", {})
check(d.get("isError") is False, "decide_action: isError false")
check(sc.get("action") == "deny" and sc.get("allowed") is False, "decide_action: rm -rf / denied")
check(sc.get("reason", {}).get("rule") == "rm-outside-project", "decide_action: the rule")
check(any(c["type"] == "text" and c["text"].startswith("deny:") for c in d.get("content", [])),
      "decide_action: a text rendering")
check(any(c["type"] == "text" and json.loads(c["text"]) == sc for c in d.get("content", [])[1:]),
      "decide_action: a JSON copy of structuredContent")
check(len(sc.get("snapshot_id") or "") == 36, "decide_action: a snapshot id")
sc3 = r("s-3").get("result", {}).get("structuredContent", {})
check(sc3.get("action") == "allow", "decide_action: gemini's run_shell_command mapped to Bash")
check(r(4).get("result", {}).get("structuredContent", {}).get("action") == "deny",
      "decide_action: candidates [allow, deny] turn an ask into deny")
r5 = r(5).get("result", {})
check(r5.get("isError") is True and "no_such_point" in r5["content"][0]["text"],
      "decide_action: an unknown decision point is a tool error")
r6 = r(6).get("result", {})
check(r6.get("isError") is True and "tool_name" in r6["content"][0]["text"],
      "decide_action: missing tool_name is a tool error")
check(err(7) == -32602 and "no_such_tool" in r(7)["error"]["message"], "unknown tool: -32602")
check(err(8) == -32602, "tools/call without a name: -32602")
check(err(9) == -32602, "arguments not an object: -32602")
check(err(10) == -32601, "unknown method: -32601")
check(r(11).get("result") == {}, "ping: {}")
codes = sorted(m["error"]["code"] for m in nulls)
check(codes == [-32700, -32600, -32600, -32600],
      "id null errors (a cut line, a batch, a bad id, not an object): got %s" % codes)
check(any(m["error"]["code"] == -32700 for m in nulls), "a cut line: -32700")
check(any("batch" in m["error"]["message"] for m in nulls), "a batch: -32600 saying batches are not supported")
check(err(14) == -32600, "jsonrpc 1.0: -32600")
check(err(16) == -32600, "no method: -32600")
check(r(18).get("result", {}).get("protocolVersion") == "2025-11-25", "an unknown version: the server offers its latest")
check(err(19) == -32602, "initialize without protocolVersion: -32602")
m20 = r(20).get("result", {})
check(len(m20.get("tools", [])) == 2 and m20.get("resultType") == "complete", "2026-07-28 tools/list without initialize")
e21 = r(21).get("error", {})
check(e21.get("code") == -32022 and e21.get("data", {}).get("requested") == "2031-01-01"
      and "2026-07-28" in e21.get("data", {}).get("supported", []), "unsupported modern version: -32022 with data")
check("2026-07-28" in r(22).get("result", {}).get("supportedVersions", []), "server/discover")
check(r(23).get("result", {}).get("isError") is True, "explain_decision: a bad id is a tool error")
r24 = r(24).get("result", {})
check(r24.get("isError") is True and "no snapshot" in r24["content"][0]["text"], "explain_decision: an unknown id")
check(err(25) == -32602, "modern request without clientCapabilities: -32602")
err_text = open(errf).read()
check("serving" in err_text, "a note on stderr")
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PYEOF
py_rc=$?

# explain_decision of a decision made in the same session.
{
  echo '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"decide_action","arguments":{"tool_name":"Read","tool_input":{"file_path":"README.md"},"cwd":"/home/dev/proj"}}}'
  sleep 0.3
} | "$V" mcp --policy "$T/p" --snapshots "$T/s2" >"$T/o1" 2>/dev/null
id=$("$PY" -c "import json; print(json.loads(open('$T/o1').readline())['result']['structuredContent']['snapshot_id'])")
echo "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"explain_decision\",\"arguments\":{\"snapshot_id\":\"$id\"}}}" |
  "$V" mcp --policy "$T/p" --snapshots "$T/s2" >"$T/o2" 2>/dev/null
ex=$("$PY" -c "import json; r=json.loads(open('$T/o2').readline())['result']; print(r['isError'], r['structuredContent']['id'], r['structuredContent']['request']['context']['tool'])")
if [ "$ex" = "False $id Read" ]; then echo "explain_decision: 1 passed"; else
  echo "FAIL: explain_decision of a recorded decision: $ex" >&2; py_rc=1
fi
# --no-snapshots: explain_decision says so.
echo '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"explain_decision","arguments":{"snapshot_id":"01a22a0e-7b96-7334-9407-a3a0e60c7a4a"}}}' |
  "$V" mcp --policy "$T/p" --no-snapshots >"$T/o3" 2>/dev/null
grep -q 'no-snapshots' "$T/o3" || { echo "FAIL: --no-snapshots explain_decision" >&2; py_rc=1; }
# A bundle that does not load: exit 1, reason on stderr, nothing on stdout.
mkdir -p "$T/broken"
printf 'strategy: x\nrules: [\n' >"$T/broken/x.yaml"
echo '{}' | "$V" mcp --policy "$T/broken" --no-snapshots >"$T/o4" 2>"$T/e4"
brc=$?
if [ "$brc" = 1 ] && [ ! -s "$T/o4" ] && grep -q "x.yaml" "$T/e4"; then :; else
  echo "FAIL: broken bundle: rc $brc" >&2; py_rc=1
fi
# A message longer than 16 MiB: refused with -32700 without being buffered whole;
# the next message is answered as usual.
"$PY" - "$V" "$T/p" <<'PYEOF' || py_rc=1
import json, subprocess, sys
v, pol = sys.argv[1], sys.argv[2]
big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (17 << 20) + b'"}}\n'
ping = b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n'
out = subprocess.run([v, "mcp", "--policy", pol, "--no-snapshots"], input=big + ping,
                     capture_output=True, timeout=60).stdout.decode().splitlines()
msgs = [json.loads(l) for l in out]
ok = (len(msgs) == 2 and msgs[0].get("error", {}).get("code") == -32700
      and "16 MiB" in msgs[0]["error"]["message"] and msgs[0].get("id") is None
      and msgs[1].get("id") == 2 and msgs[1].get("result") == {})
print("a message over 16 MiB: %s" % ("1 passed" if ok else "FAILED: %r" % out[:2]))
sys.exit(0 if ok else 1)
PYEOF
"$V" mcp --bogus >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: mcp usage error exit 2" >&2; py_rc=1; }
exit $py_rc
