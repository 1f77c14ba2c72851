#!/usr/bin/env bash
# hook_startup.sh — what a `verdict hook` process must not pay at every
# start (bench/README.md, bench-hook): libgcc's CPU probe (its cpuid
# instructions trap under a hypervisor; crc32c reads glibc's answer), and,
# where the build links the C library statically (VD_HAVE_STATIC_LIBC), any
# shared library for the dynamic loader to load. Run from the repo root
# with the build folder as $1.
set -u
BUILD=${1:?usage: hook_startup.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need nm objdump readelf

if nm "$V" | grep -q '__cpu_indicator_init'; then
  bad "the command links libgcc's CPU probe (__cpu_indicator_init): a dozen cpuid traps at every start"
else ok; fi
if grep -q '^VD_HAVE_STATIC_LIBC:INTERNAL=1' "$BUILD/CMakeCache.txt" 2>/dev/null &&
   ! grep -q 'VD_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt"; then
  needed=$(objdump -p "$V" | awk '$1 == "NEEDED" { print $2 }' | tr '\n' ' ')
  eq "$needed" "" "a static build's command needs no shared library"
  readelf -h "$V" | grep -q 'Type:.*DYN' && ok || bad "the static command is still a PIE (ASLR)"
fi
# The answer is the same either way: one hook call decides.
printf '%s' '{"session_id":"s","cwd":"/home/dev/proj","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf /"},"tool_use_id":"t"}' |
  "$V" hook claude --policy examples/policies --no-snapshots --no-store >"$T/out" 2>"$T/err"
grep -q '"permissionDecision":"deny"' "$T/out" && ok || bad "a hook call from this build decides"
summary
[ "$fail" -eq 0 ]
