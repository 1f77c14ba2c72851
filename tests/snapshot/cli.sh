#!/bin/bash
# `verdict snapshots` as a user meets it, on a known directory written by
# snapshot_test_fixture: list and its filters, show (pretty and compact),
# export as JSON Lines, gc (dry run, real, rerun), --help, exit codes and
# errors. The counts follow from the fixture's rules (test_fixture.c).
set -u
BUILD=${1:-build}
V="$BUILD/verdict"
FIX="$BUILD/snapshot_test_fixture"
TEST_NAME=snapshot/cli.sh
. tests/lib.sh

unset VERDICT_SNAPSHOTS
scratch
D="$T/snaps"
"$FIX" --make "$D" || { echo "cannot make the fixture" >&2; exit 1; }

# expect_count N ARGS... : stdout has N lines and the exit status is 0
expect_count() {
  local want=$1
  shift
  local out rc n
  out=$("$V" snapshots "$@" 2>"$T/err")
  rc=$?
  n=$(printf '%s' "$out" | grep -c '')
  if [ "$n" -eq "$want" ] && [ $rc -eq 0 ]; then ok; else bad "snapshots $* -> $n lines (rc $rc, $(cat "$T/err")), want $want"; fi
}
# expect_rc RC PATTERN ARGS... : exit status RC and stderr matching PATTERN
expect_rc() {
  local want_rc=$1 pat=$2
  shift 2
  local err rc
  err=$("$V" snapshots "$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -eq "$want_rc" ] && echo "$err" | grep -qE -- "$pat"; then ok; else bad "snapshots $* -> rc $rc '$err', want rc $want_rc /$pat/"; fi
}

# ---- who may read them: the owner and the group (snapshots hold the requests) ----
modes=$(umask 022; find "$D" \( -type f -o -type d \) ! -name '*.lock' -exec stat -c '%a %n' {} + | awk '$1 != "640" && $1 != "750" && $1 != "700" && $1 != "600"')
if [ -z "$modes" ]; then ok; else bad "snapshot files readable by others: $modes"; fi

# ---- list and filters ----
expect_count 72 list --snapshots "$D"
expect_count 72 list --snapshots="$D"
VERDICT_SNAPSHOTS="$D" expect_count 72 list
expect_count 24 list --snapshots "$D" --point payment
expect_count 18 list --snapshots "$D" --action deny
expect_count 18 list --snapshots "$D" --source model
expect_count 18 list --snapshots "$D" --source error
expect_count 36 list --snapshots "$D" --policy-version aaaa
expect_count 36 list --snapshots "$D" --policy-version cccc3333dddd4444
expect_count 0 list --snapshots "$D" --policy-version ffff
expect_count 6 list --snapshots "$D" --point login --source rule
expect_count 10 list --snapshots "$D" --since 2024-01-01T00:30:00Z --until 2024-01-01T00:40:00Z
expect_count 1 list --snapshots "$D" --since 2024-01-01T00:30:00Z --until 2024-01-01T00:30:00.001Z
expect_count 12 list --snapshots "$D" --since 1h
expect_count 60 list --snapshots "$D" --until 1h
expect_count 72 list --snapshots "$D" --since 30d --until 2099-01-01T00:00:00Z --since 3000d
expect_count 5 list --snapshots "$D" --limit 5
expect_count 0 list --snapshots "$D" --limit 0

# a line: id, time, point, action, source
line=$("$V" snapshots list --snapshots "$D" --limit 1)
set -- $line
if [[ $1 =~ ^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$ ]] &&
  [ "$2" = "2024-01-01T00:00:00Z" ] && [ "$3" = login ] && [ "$4" = allow ] && [ "$5" = rule ]; then ok; else bad "first line: $line"; fi
FIRST=$1
third=$("$V" snapshots list --snapshots "$D" --limit 3 | tail -1)
set -- $third
if [ "$2" = "2024-01-01T00:02:00.000000002Z" ] && [ "$3" = tool_call ] && [ "$4" = review ] && [ "$5" = default ]; then ok; else bad "third line: $third"; fi
# the dated ids are the same every time the fixture is made
"$FIX" --make "$T/again" >/dev/null
a=$("$V" snapshots list --snapshots "$D" --until 2024-01-02T00:00:00Z | md5sum)
b=$("$V" snapshots list --snapshots "$T/again" --until 2024-01-02T00:00:00Z | md5sum)
if [ "$a" = "$b" ]; then ok; else bad "fixture ids differ between runs"; fi

# ---- show ----
want="{\"id\":\"$FIRST\",\"n\":0,\"pad\":\"\"}"
got=$("$V" snapshots show --snapshots "$D" --compact "$FIRST")
if [ "$got" = "$want" ]; then ok; else bad "show --compact: '$got', want '$want'"; fi
got=$("$V" snapshots show --snapshots "$D" "$FIRST")
want_pretty=$(printf '{\n  "id": "%s",\n  "n": 0,\n  "pad": ""\n}' "$FIRST")
if [ "$got" = "$want_pretty" ]; then ok; else bad "show (pretty): '$got'"; fi
upper=$(echo "$FIRST" | tr a-f A-F)
got=$("$V" snapshots show --snapshots "$D" --compact "$upper")
if [ "$got" = "$want" ]; then ok; else bad "show with an upper-case id: '$got'"; fi
# every listed id can be shown, and shows its own id
miss=0
for id in $("$V" snapshots list --snapshots "$D" | cut -d' ' -f1); do
  "$V" snapshots show --snapshots "$D" --compact "$id" | grep -q "\"id\":\"$id\"" || miss=$((miss + 1))
done
if [ $miss -eq 0 ]; then ok; else bad "$miss listed ids could not be shown"; fi
expect_rc 1 "no snapshot 00000000-0000-7000-8000-000000000000" show --snapshots "$D" 00000000-0000-7000-8000-000000000000
expect_rc 2 "not a snapshot id" show --snapshots "$D" 1234
expect_rc 2 "show wants a snapshot id" show --snapshots "$D"
expect_rc 2 "unexpected argument" show --snapshots "$D" "$FIRST" "$FIRST"

# unusual payloads: show indents exactly as Python's json module does,
# --compact and export give the stored text; text that is not JSON is shown
# as it is
"$FIX" --make-odd "$T/odd" || bad "cannot make the odd fixture"
i=0
for id in $("$V" snapshots list --snapshots "$T/odd" | cut -d' ' -f1); do
  stored=$("$V" snapshots export --snapshots "$T/odd" | sed -n "$((i + 1))p")
  compact=$("$V" snapshots show --snapshots "$T/odd" --compact "$id")
  pretty=$("$V" snapshots show --snapshots "$T/odd" "$id")
  if [ "$compact" = "$stored" ]; then ok; else bad "odd $i: compact '$compact' vs export '$stored'"; fi
  if [ $i -le 2 ]; then
    want_odd=$(printf '%s' "$stored" | python3 -c 'import json,sys; print(json.dumps(json.loads(sys.stdin.read()), indent=2, ensure_ascii=False))')
    if [ "$pretty" = "$want_odd" ]; then ok; else bad "odd $i: pretty
$pretty
want
$want_odd"; fi
  else
    if [ "$pretty" = "$stored" ]; then ok; else bad "odd $i: '$pretty' shown for '$stored'"; fi
  fi
  i=$((i + 1))
done
if [ $i -eq 5 ]; then ok; else bad "odd fixture: $i snapshots listed, want 5"; fi

# ---- export ----
expect_count 72 export --snapshots "$D"
expect_count 24 export --snapshots "$D" --point tool_call
first_line=$("$V" snapshots export --snapshots "$D" --limit 1)
if [ "$first_line" = "$want" ]; then ok; else bad "export's first line: $first_line"; fi
if "$V" snapshots export --snapshots "$D" | python3 -c '
import json, sys
n = 0
for line in sys.stdin:
    d = json.loads(line)
    assert set(d) == {"id", "n", "pad"}, d
    n += 1
assert n == 72, n
'; then ok; else bad "export is not 72 lines of JSON"; fi

# ---- gc ----
# What gc must remove, computed here from the documented rule and sampling
# hash (docs/snapshots.md), independently of the C code: old records that are
# allowed, not for review, by rule or default, confidence >= 0.8, and whose
# id hashes at or above the 1% sample.
expected_removed=$("$V" snapshots export --snapshots "$D" --until 2024-01-02T00:00:00Z | python3 -c '
import json, sys
M = (1 << 64) - 1
def sample_point(idtext):
    h = 0xcbf29ce484222325
    for b in bytes.fromhex(idtext.replace("-", "")):
        h = ((h ^ b) * 0x100000001b3) & M
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & M
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & M
    h ^= h >> 31
    return (h >> 11) / 2.0**53
removed = 0
for line in sys.stdin:
    d = json.loads(line)
    n = d["n"]
    keep = n % 3 == 1 or n % 7 == 3 or n % 4 in (1, 3) or (n * 37) % 100 < 80 or sample_point(d["id"]) < 0.01
    removed += not keep
print(removed)
')
dry=$("$V" snapshots gc --snapshots "$D" --dry-run)
removed=$(echo "$dry" | sed -n 's/.* \([0-9]*\) removed.*/\1/p')
if [ -n "$removed" ] && [ "$removed" -gt 0 ] && echo "$dry" | grep -q "dry run"; then ok; else bad "gc --dry-run: $dry"; fi
if [ "$removed" = "$expected_removed" ]; then ok; else bad "gc would remove $removed, the rule says $expected_removed"; fi
expect_count 72 list --snapshots "$D" # a dry run changes nothing
out=$("$V" snapshots gc --snapshots "$D")
if echo "$out" | grep -q " $removed removed"; then ok; else bad "gc removed other than the dry run said: $out"; fi
expect_count $((72 - removed)) list --snapshots "$D"
expect_count 12 list --snapshots "$D" --since 1h # recent ones untouched
out=$("$V" snapshots gc --snapshots "$D")
if echo "$out" | grep -q " 0 removed"; then ok; else bad "second gc removed something: $out"; fi
# keep-days large: nothing is old
out=$("$V" snapshots gc --snapshots "$T/again" --keep-days 100000)
if echo "$out" | grep -q " 0 removed"; then ok; else bad "gc --keep-days 100000: $out"; fi
out=$("$V" snapshots gc --snapshots "$T/again" --sample 1 --min-confidence 0)
if echo "$out" | grep -q " 0 removed"; then ok; else bad "gc --sample 1: $out"; fi

# ---- usage and errors ----
expect_rc 2 "give a subcommand" 
expect_rc 2 "unknown subcommand" frobnicate
expect_rc 2 "no snapshot directory" list
expect_rc 2 "rule, model, default or error" list --snapshots "$D" --source oracle
expect_rc 2 "RFC 3339" list --snapshots "$D" --since yesterday
expect_rc 2 "later than --since" list --snapshots "$D" --since 2024-01-02T00:00:00Z --until 2024-01-01T00:00:00Z
expect_rc 2 "count" list --snapshots "$D" --limit -1
expect_rc 2 "fraction" gc --snapshots "$D" --sample 2
expect_rc 2 "unknown option" gc --snapshots "$D" --point x
expect_rc 2 "unknown option" list --snapshots "$D" --dry-run
expect_rc 2 "missing value" list --snapshots
expect_rc 1 "$T/nowhere" list --snapshots "$T/nowhere"
help=$("$V" snapshots --help)
rc=$?
if [ $rc -eq 0 ] && echo "$help" | grep -q "usage: verdict snapshots list"; then ok; else bad "--help"; fi
help=$("$V" snapshots gc --help)
if echo "$help" | grep -q -- "--keep-days"; then ok; else bad "gc --help"; fi
if "$V" --help | grep -q "snapshots"; then ok; else bad "verdict --help does not list snapshots"; fi

summary
[ $fail -eq 0 ]
