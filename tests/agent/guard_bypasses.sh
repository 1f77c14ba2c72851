#!/usr/bin/env bash
# guard_bypasses.sh — the shipped agent guard (examples/policies/agent_guard.yaml)
# against the commands that used to get through it, and the harmless calls
# it used to stop, each sent as Claude Code sends it (its PreToolUse JSON on
# `verdict hook claude`'s stdin) and read as Claude Code reads the answer.
# Every dangerous one must be denied or asked about by a rule that names
# its danger, never by the default; every harmless one must be allowed.
# Also: a pack turned off stops its rules, and unknown_command: ask.
# Run from the repo root with the build folder as $1.
set -u
BUILD=${1:?usage: guard_bypasses.sh BUILD_DIR}
V="$BUILD/verdict"
PY=/usr/bin/python3
. tests/lib.sh
scratch

guard_bundle

# claude TOOL COMMAND: Claude Code's PreToolUse JSON for a Bash (or
# PowerShell) call, the command JSON-encoded.
claude() {
  "$PY" -c 'import json,sys; print(json.dumps({"session_id": "abc-123",
    "transcript_path": "/home/dev/.claude/projects/p/abc-123.jsonl", "cwd": "/home/dev/proj",
    "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": sys.argv[1],
    "tool_input": {"command": sys.argv[2], "description": "run it"}, "tool_use_id": "toolu_01ABC"}))' "$1" "$2"
}
# answer POLICY_DIR TOOL COMMAND: prints "decision<TAB>rule" as the hook answers.
answer() {
  claude "$2" "$3" | "$V" hook claude --policy "$1" --no-snapshots 2>"$T/err" |
    "$PY" -c 'import json,re,sys; h=json.load(sys.stdin)["hookSpecificOutput"]
r=h.get("permissionDecisionReason", ""); m=re.search(r"verdict: [a-z]+, rule ([^,)]+)", r)
print(h["permissionDecision"] + "\t" + (m.group(1) if m else "-"))'
}
stopped() { # stopped TOOL COMMAND: deny or ask, by a rule
  local got
  got=$(answer "$T/p" "$1" "$2")
  case "$got" in
    deny$'\t'-* | ask$'\t'-*) bad "stopped only by the default: $2 ($got)" ;;
    deny$'\t'* | ask$'\t'*) ok ;;
    *) bad "not stopped: $2 (got '$got')"; head -3 "$T/err" >&2 ;;
  esac
}
denied() { # denied TOOL COMMAND RULE
  local got
  got=$(answer "$T/p" "$1" "$2")
  if [ "$got" = "deny"$'\t'"$3" ]; then ok; else bad "$2: got '$got', want deny by $3"; fi
}
allowed() { # allowed COMMAND
  local got
  got=$(answer "$T/p" Bash "$1")
  case "$got" in allow$'\t'*) ok ;; *) bad "harmless but stopped: $1 (got '$got')" ;; esac
}

# ---- the bypasses: each stopped, most denied by the rule naming the danger ----
denied Bash 'echo $(( $(rm -rf /) + 1 ))' rm-outside-project
denied Bash 'echo $((`rm -rf /` + 1))' rm-outside-project
denied Bash '( cd .. && rm -rf proj )' rm-project
denied Bash 'cd .. && rm -rf build' rm-outside-project
denied Bash 'echo / | xargs -I{} rm -rf {}' rm-outside-project
denied Bash "env -S 'PATH=/usr/bin' git reset --hard" git-reset-hard
denied Bash 'git checkout -- file' git-checkout-discard
denied Bash 'git checkout -f main' git-checkout-discard
denied Bash 'git switch --discard-changes main' git-switch-discard
stopped Bash 'git branch -Dv feature'
stopped Bash 'git branch -f feature'
stopped Bash 'git branch --delete --force feature'
denied PowerShell 'Remove-Item -Recurse -Force C:\' powershell-delete-root
# ... and their neighbours
for c in 'echo "$(( $(rm -rf ~) ))"' '( cd /; rm -rf home )' 'cd ~ && rm -rf proj' \
  'pushd .. && rm -rf proj' 'cd build; cd ../..; rm -rf proj' 'printf "%s\n" / | xargs -I % rm -rf %' \
  "parallel 'rm -rf {}' ::: /" 'env -u HOME git reset --hard' "env -S 'git clean -fdx'" \
  'bash <<< "rm -rf /"' $'bash <<EOF\nrm -rf ~\nEOF' "r''m -rf /" '\rm -rf ~' '"/bin/rm" -rf /' \
  'git checkout HEAD -- .' 'git restore .' 'git stash clear' 'git clean -xdf' \
  "python3 -c \"import os; os.system('rm -rf ~')\"" "node -e \"require('child_process').execSync('rm -rf /')\""; do
  stopped Bash "$c"
done

# ---- harmless calls: allowed ----
for c in 'git remote -v' 'git -C repo status' 'docker ps' 'kubectl get pods' 'aws s3 ls' \
  'rmdir empty' 'python3 -c "print(1)"' 'curl https://api.example.com/v1/items' \
  'git checkout -b feature/x' 'git restore --staged a.c' 'git branch -d merged' \
  'git stash list' 'git clean -n' 'rm -rf node_modules' 'cd web && rm -rf dist' \
  'echo build | xargs rm -rf' 'grep -rn "rm -rf" docs/' 'git commit -m "drop the rm -rf hack"' \
  'docker compose logs -f api' 'helm list -A' 'terraform plan' 'gcloud config list' \
  'psql -c "SELECT 1"' 'npm test' 'npm ci' 'make -j4' 'node -e "console.log(1)"'; do
  allowed "$c"
done

# ---- a pack turned off: its rules are gone, the rest stay ----
mkdir -p "$T/nogit"
sed 's/^    git: true /    git: false/' examples/policies/agent_guard.yaml >"$T/nogit/agent_guard.yaml"
eq "$(answer "$T/nogit" Bash 'git reset --hard' | cut -f1)" allow "git pack off: git reset --hard runs"
eq "$(answer "$T/nogit" Bash 'rm -rf /' | cut -f2)" rm-outside-project "git pack off: the filesystem pack still denies"

# ---- verdict check knows the packs: a misspelt one is an error at its place ----
mkdir -p "$T/typo"
sed 's/^    git: true /    gti: false/' examples/policies/agent_guard.yaml >"$T/typo/agent_guard.yaml"
"$V" check "$T/typo" >"$T/out" 2>&1
RC=$?
eq "$RC" 1 "a misspelt pack: verdict check fails"
line=$(grep -n '^    gti: false' "$T/typo/agent_guard.yaml" | cut -d: -f1)
eq "$(grep -c "agent_guard.yaml:$line:5: constants.packs: no rule or let reads the key 'gti'.*did you mean 'git'" "$T/out")" 1 \
  "a misspelt pack: the error names its line and column and the pack meant"
eq "$(grep -c "the constant 'packs' has no key 'git'" "$T/out")" 1 "a misspelt pack: the pack it no longer has, once"

# ---- unknown_command: ask ----
mkdir -p "$T/ask"
sed 's/^  unknown_command: allow/  unknown_command: ask/' examples/policies/agent_guard.yaml >"$T/ask/agent_guard.yaml"
eq "$(answer "$T/ask" Bash './deploy.sh staging')" "ask"$'\t'"unknown-command-asks" "unknown_command ask: an unknown program asks"
eq "$(answer "$T/ask" Bash 'ls -la')" "allow"$'\t'"harmless-shell" "unknown_command ask: a safe command runs"
eq "$(answer "$T/p" Bash './deploy.sh staging')" "allow"$'\t'"no-danger-found" "unknown_command allow: an unknown program runs"

summary
[ "$fail" -eq 0 ]
