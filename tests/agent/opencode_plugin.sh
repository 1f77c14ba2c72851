#!/usr/bin/env bash
# opencode_plugin.sh — integrations/opencode/verdict.js loaded by Node.js the
# way OpenCode loads a plugin (an ES module whose export is called with the
# project context and returns hooks), its "tool.execute.before" hook called
# with OpenCode's (input, output) shapes: allowed calls return, denied and
# asked ones throw with verdict's reason, and a verdict that cannot run
# refuses the call. Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: opencode_plugin.sh BUILD_DIR}
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/deps --test)" >&2; exit 1; }
. tests/lib.sh
scratch
guard_bundle
cat >"$T/run.mjs" <<'JS'
const { VerdictGuard } = await import(process.argv[2]);
let pass = 0, fail = 0;
const check = (ok, what) => { if (ok) pass++; else { fail++; console.error("FAIL:", what); } };
const hooks = await VerdictGuard({ directory: "/home/dev/proj", worktree: "/home/dev/proj" });
const before = hooks["tool.execute.before"];
check(typeof before === "function", "the plugin returns tool.execute.before");
async function outcome(tool, args) {
  try { await before({ tool, sessionID: "ses_1", callID: "call_1" }, { args }); return "allowed"; }
  catch (e) { return "refused: " + e.message; }
}
let r = await outcome("bash", { command: "git status", description: "status" });
check(r === "allowed", "bash git status is allowed: " + r);
r = await outcome("bash", { command: "rm -rf ~", description: "clean" });
check(r.startsWith("refused") && r.includes("rm-outside-project"), "bash rm -rf ~ throws with the rule: " + r);
r = await outcome("edit", { filePath: "/home/dev/proj/src/a.ts", oldString: "a", newString: "b" });
check(r === "allowed", "edit inside the project is allowed: " + r);
r = await outcome("read", { filePath: "/home/dev/proj/.env" });
check(r.startsWith("refused") && r.includes("secret"), "read of .env throws: " + r);
r = await outcome("bash", { command: "npm install left-pad", description: "x" });
check(r.startsWith("refused") && r.includes("approval"), "an ask is refused, saying it needs approval: " + r);
process.env.VERDICT_OPENCODE_ASK = "allow";
const hooks2 = await VerdictGuard({ directory: "/home/dev/proj" });
try { await hooks2["tool.execute.before"]({ tool: "bash", sessionID: "s", callID: "c" }, { args: { command: "npm install left-pad" } }); check(true, ""); }
catch (e) { check(false, "VERDICT_OPENCODE_ASK=allow lets an ask through: " + e.message); }
delete process.env.VERDICT_OPENCODE_ASK;
process.env.VERDICT_BIN = "/nonexistent/verdict";
const hooks3 = await VerdictGuard({ directory: "/home/dev/proj" });
try { await hooks3["tool.execute.before"]({ tool: "bash", sessionID: "s", callID: "c" }, { args: { command: "ls" } }); check(false, "a missing verdict must refuse"); }
catch (e) { check(e.message.includes("could not check"), "a missing verdict refuses (fail closed): " + e.message); }
console.log(`${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
JS
VERDICT_BIN="$(cd "$BUILD" && pwd)/verdict" VERDICT_POLICY="$T/p" VERDICT_SNAPSHOTS="$T/snaps" \
  node "$T/run.mjs" "$(pwd)/integrations/opencode/verdict.js"
