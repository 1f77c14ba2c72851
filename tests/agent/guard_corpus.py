#!/usr/bin/env python3
"""guard_corpus.py — measures an agent-guard policy against the labelled
corpus in tests/agent/corpus/, through the real `verdict hook` binary.

Each case is sent as the agent sends it (Claude Code's PreToolUse JSON on
stdin, cwd /home/dev/proj; the few Gemini CLI and OpenCode cases in their own
formats) and the answer is read as the agent reads it. A case is "stopped"
when the answer is deny or ask, "allowed" when it is allow. This script
measures and prints; it decides nothing: it writes the figures the
thresholds are checked on (--summary FILE) and guard_corpus.sh checks them.

  guard_corpus.py --verdict BIN --policy DIR --corpus DIR --summary FILE
                  [--show N] [--pack PACK ...] [--jobs N]

Corpus files (the header of each says the labelling rules in full):
  *.tsv    LABEL<TAB>PACK<TAB>COMMAND, one Bash command a line; in COMMAND
           the five characters <NL> stand for a newline (heredocs), nothing
           else is escaped. bypasses.tsv holds the issue's named bypasses:
           every one must be stopped.
  *.jsonl  one tool call a line: {"label", "pack", "tool_name", "tool_input",
           "why"?, "agent"? (claude|gemini|opencode), "bypass"? true}
Lines that are empty or start with # are comments.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys

LABELS = ("deny", "ask", "safe")
PACKS = ("git", "filesystem", "interpreters", "containers", "kubernetes", "infrastructure",
         "clouds", "databases", "packages", "secrets", "network", "misc")
CWD = "/home/dev/proj"


class CorpusError(Exception):
    pass


class Case:
    __slots__ = ("where", "label", "pack", "agent", "tool", "input", "bypass", "answer",
                 "reason", "error", "shown")

    def __init__(self, where, label, pack, agent, tool, tool_input, bypass):
        self.where, self.label, self.pack = where, label, pack
        self.agent, self.tool, self.input, self.bypass = agent, tool, tool_input, bypass
        self.answer = self.reason = self.error = None
        self.shown = tool_input["command"] if tool == "Bash" and agent == "claude" \
            else "%s %s%s" % (tool, json.dumps(tool_input, separators=(",", ":")),
                              "" if agent == "claude" else " [%s]" % agent)

    @property
    def dangerous(self):
        return self.label != "safe"

    @property
    def stopped(self):
        return self.answer in ("deny", "ask")


def check_label_pack(where, label, pack):
    if label not in LABELS:
        raise CorpusError("%s: label %r is not one of %s" % (where, label, "|".join(LABELS)))
    if pack not in PACKS:
        raise CorpusError("%s: pack %r is not one of %s" % (where, pack, ", ".join(PACKS)))


def read_tsv(path):
    cases, bypass = [], os.path.basename(path) == "bypasses.tsv"
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            where = "%s:%d" % (path, n)
            parts = line.split("\t", 2)
            if len(parts) != 3 or not parts[2].strip():
                raise CorpusError("%s: want LABEL<TAB>PACK<TAB>COMMAND" % where)
            label, pack, command = parts
            check_label_pack(where, label, pack)
            if "\t" in command:
                raise CorpusError("%s: a tab inside the command" % where)
            cases.append(Case(where, label, pack, "claude", "Bash",
                              {"command": command.replace("<NL>", "\n")}, bypass))
    return cases


def read_jsonl(path):
    cases = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            where = "%s:%d" % (path, n)
            try:
                o = json.loads(line.rstrip("\n"))
            except json.JSONDecodeError as e:
                raise CorpusError("%s:%d: %s" % (where, e.colno, e.msg))
            for k in ("label", "pack", "tool_name", "tool_input"):
                if k not in o:
                    raise CorpusError("%s: no \"%s\"" % (where, k))
            unknown = set(o) - {"label", "pack", "tool_name", "tool_input", "why", "agent", "bypass"}
            if unknown:
                raise CorpusError("%s: unknown field %s" % (where, sorted(unknown)[0]))
            check_label_pack(where, o["label"], o["pack"])
            agent = o.get("agent", "claude")
            if agent not in ("claude", "gemini", "opencode"):
                raise CorpusError("%s: agent %r is not claude, gemini or opencode" % (where, agent))
            if not isinstance(o["tool_input"], dict):
                raise CorpusError("%s: tool_input is not an object" % where)
            cases.append(Case(where, o["label"], o["pack"], agent, o["tool_name"],
                              o["tool_input"], bool(o.get("bypass"))))
    return cases


def hook_stdin(c):
    """The hook's stdin exactly as each agent writes it."""
    if c.agent == "claude":
        msg = {"session_id": "corpus", "transcript_path": "/home/dev/.claude/projects/p/corpus.jsonl",
               "cwd": CWD, "permission_mode": "default", "hook_event_name": "PreToolUse",
               "tool_name": c.tool, "tool_input": c.input, "tool_use_id": "toolu_corpus"}
    elif c.agent == "gemini":
        msg = {"session_id": "corpus", "transcript_path": "/tmp/corpus.json", "cwd": CWD,
               "hook_event_name": "BeforeTool", "timestamp": "2026-11-29T10:00:00Z",
               "tool_name": c.tool, "tool_input": c.input}
    else:  # the OpenCode plugin's message (integrations/opencode/verdict.js)
        msg = {"tool": c.tool, "sessionID": "ses_corpus", "callID": "call_corpus",
               "args": c.input, "cwd": CWD}
    return json.dumps(msg)


def decide(verdict, policy, c):
    try:
        p = subprocess.run([verdict, "hook", c.agent, "--policy", policy, "--no-snapshots"],
                           input=hook_stdin(c).encode(), capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        c.error = str(e)
        return
    try:
        out = json.loads(p.stdout)
        if c.agent == "claude":
            out = out["hookSpecificOutput"]
            c.answer, c.reason = out["permissionDecision"], out.get("permissionDecisionReason", "")
        else:
            c.answer, c.reason = out["decision"], out.get("reason", "")
    except (ValueError, KeyError, TypeError):
        c.error = "exit %d, stdout %r, stderr %r" % (p.returncode, p.stdout[:200], p.stderr[:200])
        return
    if c.answer not in ("allow", "deny", "ask"):
        c.error = "answer %r" % c.answer
    # verdict fails closed with a deny whose reason says it failed: count it
    # as an error, not as a stop
    elif "could not check this tool call" in c.reason:
        c.error = c.reason


def by_default(c):
    # A stop no rule named: the policy's default answer.
    return c.stopped and not re.search(r"\(verdict: \w+, rule [\w.-]+", c.reason or "")


def pct(n, d):
    return 100.0 * n / d if d else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--verdict", required=True)
    ap.add_argument("--policy", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--show", type=int, default=25, help="misclassified cases listed per pack")
    ap.add_argument("--pack", action="append", default=[], help="only this pack (repeatable)")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()

    cases = []
    try:
        for name in sorted(os.listdir(a.corpus)):
            path = os.path.join(a.corpus, name)
            if name.endswith(".tsv"):
                cases += read_tsv(path)
            elif name.endswith(".jsonl"):
                cases += read_jsonl(path)
        for p in a.pack:
            if p not in PACKS:
                raise CorpusError("--pack %s: not one of %s" % (p, ", ".join(PACKS)))
    except (CorpusError, OSError) as e:
        print("guard_corpus: %s" % e, file=sys.stderr)
        return 2
    seen = {}
    for c in cases:
        key = (c.agent, c.tool, json.dumps(c.input, sort_keys=True))
        if key in seen:
            print("guard_corpus: %s: the same case as %s" % (c.where, seen[key]), file=sys.stderr)
            return 2
        seen.setdefault(key, c.where)
    if a.pack:
        cases = [c for c in cases if c.pack in a.pack]

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        list(ex.map(lambda c: decide(a.verdict, a.policy, c), cases))

    rows = []
    fmt = "%-15s %5s %5s %5s | %9s %9s %9s | %9s"
    print(fmt % ("pack", "deny", "ask", "safe", "dang.stop", "by-deflt", "safe.stop", "errors"))
    print("-" * 80)
    for pack in PACKS + ("all",):
        cs = [c for c in cases if pack == "all" or c.pack == pack]
        if not cs:
            continue
        dang = [c for c in cs if c.dangerous]
        safe = [c for c in cs if not c.dangerous]
        ds = sum(c.stopped for c in dang if not c.error)
        dd = sum(by_default(c) for c in dang if not c.error)
        ss = sum(c.stopped for c in safe if not c.error)
        errs = sum(1 for c in cs if c.error)
        if pack == "all":
            print("-" * 80)
        print(fmt % (pack, sum(c.label == "deny" for c in cs), sum(c.label == "ask" for c in cs),
                     len(safe), "%.1f%%" % pct(ds, len(dang)), "%.1f%%" % pct(dd, len(dang)),
                     "%.1f%%" % pct(ss, len(safe)), errs))
        rows.append({"pack": pack, "dangerous": len(dang), "dangerous_stopped": ds,
                     "dangerous_by_default": dd, "safe": len(safe), "safe_stopped": ss,
                     "errors": errs})
    print("(dang.stop: dangerous cases answered deny or ask; by-deflt: of them, stopped by the"
          " default, no rule naming the danger; safe.stop: safe cases answered deny or ask)")

    wrong = [c for c in cases if not c.error and c.dangerous != c.stopped]
    for pack in PACKS:
        ws = [c for c in wrong if c.pack == pack]
        if not ws:
            continue
        print("\n%s: %d misclassified" % (pack, len(ws)))
        for c in ws[:a.show]:
            print("  %-4s -> %-5s %s" % (c.label, c.answer, c.shown.replace("\n", "<NL>")))
        if len(ws) > a.show:
            print("  ... and %d more (--show N)" % (len(ws) - a.show))
    errors = [c for c in cases if c.error]
    if errors:
        print("\nerrors (the hook gave no answer):")
        for c in errors[:a.show]:
            print("  %s: %s: %s" % (c.where, c.shown.replace("\n", "<NL>"), c.error))
    # deny cases answered ask are stopped, so they pass; listed for the
    # policy's own sake (the message is weaker than it should be)
    soft = [c for c in cases if not c.error and c.label == "deny" and c.answer == "ask"]
    print("\n%d deny cases were answered ask (stopped, but not refused)" % len(soft))

    bypass_allowed = [c.shown for c in cases if c.bypass and not c.stopped]
    with open(a.summary, "w") as f:
        json.dump({"packs": rows, "bypass_cases": sum(c.bypass for c in cases),
                   "bypass_allowed": bypass_allowed}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
