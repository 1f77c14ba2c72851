// verdict.js — an OpenCode plugin that asks verdict before every tool call.
//
// OpenCode calls the plugin's "tool.execute.before" hook with the tool's name
// and arguments before running it; throwing an Error refuses the call, and the
// error's message is what the model reads as the tool's result. This plugin
// runs `verdict hook opencode` (one short process a call, JSON on stdin, one
// JSON line back: {"decision": "allow"|"deny"|"ask", "reason": ...}) and
// throws unless the answer is allow. OpenCode's plugin API has no way to ask
// the developer from here, so an "ask" is refused too, with the reason, unless
// VERDICT_OPENCODE_ASK=allow lets it through to OpenCode's own permission
// settings ("permission" in opencode.json). If verdict cannot be run or gives
// no answer, the call is refused (fail closed).
//
// Settings (environment): VERDICT_BIN (default "verdict" on PATH),
// VERDICT_POLICY (the policy folder; else verdict's own default),
// VERDICT_SNAPSHOTS, VERDICT_OPENCODE_ASK, VERDICT_TIMEOUT_MS (default 5000).
import { spawnSync } from "node:child_process";

export const VerdictGuard = async ({ directory, worktree } = {}) => {
  const bin = process.env.VERDICT_BIN || "verdict";
  const policy = process.env.VERDICT_POLICY;
  const askAllows = process.env.VERDICT_OPENCODE_ASK === "allow";
  const timeout = Number(process.env.VERDICT_TIMEOUT_MS || 5000);
  const cwd = directory || worktree || process.cwd();

  const check = (input, output) => {
    const message = JSON.stringify({
      tool: input.tool,
      sessionID: input.sessionID,
      callID: input.callID,
      args: (output && output.args) || {},
      cwd,
    });
    const argv = ["hook", "opencode"];
    if (policy) argv.push("--policy", policy);
    const run = spawnSync(bin, argv, { input: message, encoding: "utf8", timeout });
    let answer = null;
    try {
      const lines = (run.stdout || "").trim().split("\n");
      answer = JSON.parse(lines[lines.length - 1]);
    } catch {
      answer = null;
    }
    if (run.error || !answer || typeof answer.decision !== "string") {
      const why = run.error ? run.error.message : (run.stderr || "no answer").trim();
      throw new Error(`verdict could not check this tool call, so it is refused: ${why}`);
    }
    if (answer.decision === "allow") return;
    if (answer.decision === "ask" && askAllows) return;
    const what = answer.decision === "ask" ? "needs the developer's approval" : "is refused";
    throw new Error(`verdict: this ${input.tool} call ${what}: ${answer.reason || "policy"}`);
  };

  return {
    "tool.execute.before": async (input, output) => check(input, output),
  };
};

export default VerdictGuard;
