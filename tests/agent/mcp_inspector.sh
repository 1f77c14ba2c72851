#!/usr/bin/env bash
# mcp_inspector.sh — `verdict mcp` driven by a real MCP client: the MCP
# inspector's CLI (@modelcontextprotocol/inspector, pinned in
# scripts/npm-tools), which initializes, lists the tools with --strict schema
# checks, calls decide_action (and validates structuredContent against the
# outputSchema) and explain_decision. The inspector comes from npm: when it
# cannot be installed (no network) this test FAILS and says so.
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: mcp_inspector.sh BUILD_DIR}
V="$(cd "$BUILD" && pwd)/verdict"
PY=/usr/bin/python3
. tests/lib.sh
scratch

if ! I=$(scripts/npm-tools inspector); then
  echo "FAIL: the MCP inspector could not be installed from npm (see above); this test needs it" >&2
  exit 1
fi
guard_bundle
SERVER=("$V" mcp --policy "$T/p" --snapshots "$T/snaps")

# inspect OUT ARGS...: runs the inspector CLI; status in $RC.
inspect() {
  local out=$1; shift
  "$I" --cli "${SERVER[@]}" "$@" >"$out" 2>"$T/err"
  RC=$?
  if [ "$RC" != 0 ]; then sed 's/^/  inspector: /' "$T/err" | head -20 >&2; fi
}
json() { "$PY" -c "import json,sys; d=json.load(open('$1')); print($2)" 2>/dev/null; }

inspect "$T/init" --method initialize
eq "$RC" 0 "initialize: exit 0"
inspect "$T/list" --method tools/list --strict
eq "$RC" 0 "tools/list --strict: exit 0 (schemas pass the inspector's checks)"
eq "$(json "$T/list" '[t["name"] for t in d["tools"]]')" "['decide_action', 'explain_decision']" "tools/list: names"
eq "$(json "$T/list" '"outputSchema" in d["tools"][0]')" True "tools/list: decide_action has an outputSchema"

inspect "$T/deny" --method tools/call --tool-name decide_action --tool-arg tool_name=Bash \
  'tool_input={"command":"sudo bash -c \"rm -rf ~\""}' cwd=/home/dev/proj session_id=insp-1
eq "$RC" 0 "tools/call decide_action: exit 0"
eq "$(json "$T/deny" 'd["structuredContent"]["action"]')" deny "decide_action: rm -rf ~ through sudo bash -c is denied"
eq "$(json "$T/deny" 'd["structuredContent"]["reason"]["rule"]')" rm-outside-project "decide_action: the rule"
eq "$(json "$T/deny" 'd["isError"]')" False "decide_action: not a tool error"

inspect "$T/allow" --method tools/call --tool-name decide_action --tool-arg tool_name=Bash \
  'tool_input={"command":"git push origin feature/login"}' cwd=/home/dev/proj
eq "$(json "$T/allow" 'd["structuredContent"]["action"]')" allow "decide_action: a feature-branch push is allowed"

inspect "$T/other" --method tools/call --tool-name decide_action --tool-arg action=tool_call \
  'context={"agent":"mcp","tool":"Read","input":{"file_path":"/home/dev/.aws/credentials"},"cwd":"/home/dev/proj","session":"x"}'
eq "$(json "$T/other" 'd["structuredContent"]["action"]')" deny "decide_action: a raw decision request"

id=$(json "$T/deny" 'd["structuredContent"]["snapshot_id"]')
inspect "$T/explain" --method tools/call --tool-name explain_decision --tool-arg "snapshot_id=$id"
eq "$RC" 0 "explain_decision: exit 0"
eq "$(json "$T/explain" 'd["structuredContent"]["id"]')" "$id" "explain_decision: the snapshot of that decision"
eq "$(json "$T/explain" 'd["structuredContent"]["request"]["context"]["session"]')" insp-1 \
  "explain_decision: the recorded request"

inspect "$T/unknown" --method tools/call --tool-name no_such_tool
if [ "$RC" != 0 ]; then ok; else bad "an unknown tool: the inspector exits non-zero"; fi

summary
[ "$fail" -eq 0 ]
