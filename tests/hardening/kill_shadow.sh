#!/usr/bin/env bash
# kill_shadow.sh — kill_reload.sh with a shadow bundle beside the live one
# (docs/rollout.md): the same SIGKILLs under load and reloads, under
# --durability always, and the same guarantees for the answered decisions
# (every acknowledged one in the log once, its version stored) with the
# shadow's records in the same log; besides, every shadow record completes
# an answered record that is in the log, and the shadow's versions are in
# the store too. Fewer rounds than kill_reload.sh: the guarantees are the
# same code's.
set -u
export KILL_RELOAD_SHADOW=1 KILL_RELOAD_ROUNDS=${KILL_RELOAD_ROUNDS:-12} TEST_NAME=hardening/kill_shadow
exec bash "$(dirname "$0")/kill_reload.sh" "$@"
