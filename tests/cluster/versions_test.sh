#!/usr/bin/env bash
# Class versions with real `wasmkeep serve` processes on 127.0.0.1 (issue 39; docs/tenants.md,
# "Deploying"): 1,000 actors of the upgrade probe's v1 (examples/testdata/upgrade_probe.h)
# with state; v2, which migrates, at 10 % (exactly the actors whose place is below 1,000 move,
# each migrated once) and then at 100 % while increments run and a node is killed with -9
# (no acknowledged increment lost, no state migrated twice); v3, whose migration fails on odd
# counts, at 100 %: those stay on v2 with their state unchanged, and the rollout pauses itself;
# a rollback leaves migrated actors on v3 until v3 is marked broken.
#
#   versions_test.sh WASMKEEP_BINARY BACKEND ACTORS_DIR      BACKEND: file | s3
#
# Prints one line per check and closes with "N passed, N failed".
set -u
wk=${1:?usage: versions_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
backend=${2:?usage: versions_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
actors_dir=${3:-$(dirname "$wk")/../../actors}
prefix=versions
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
actors=${VERSIONS_TEST_ACTORS:-1000}
probe="python3 $(dirname "$0")/versions.py"

slower_lease  # a thousand actors taken at once (common.sh)
cat >>"$work/fast.toml" <<TOML
[actors]
workers = 2
TOML

echo "== class versions on $backend ($actors actors)"
TOKEN=$(tenant_add acme)
check "v1 deployed" 'W deploy --tenant acme --class probe "$actors_dir/upgrade_v1.wasm" >"$work/d1.out" 2>&1'
start a a 1
start b b 2
start c c 3
check "three nodes become ready" 'wait_ready 1 30 && wait_ready 2 30 && wait_ready 3 30'
nodes="127.0.0.1:$(port_of 1),127.0.0.1:$(port_of 2),127.0.0.1:$(port_of 3)"
survivors="127.0.0.1:$(port_of 1),127.0.0.1:$(port_of 3)"
P() { $probe "$@" --token "$TOKEN" --state "$work/state.json" | sed '/ passed, .* failed$/d' | tee -a "$work/probe.out"; }
probe_failed() { grep -c '^FAIL' "$work/probe.out"; }
count_probe() {  # folds the probe's checks into this script's
  local before=$1 after
  after=$(probe_failed)
  [ "$after" = "$before" ]
}
: >"$work/probe.out"
# A rollout reaches a node with its first event of the class once its class check (1 s) is
# stale (that event still runs the old choice; docs/tenants.md): wait, touch every actor
# through the nodes left, and wait for the reads those events started.
settle() { sleep 1.2; $probe touch --nodes "$1" --token "$TOKEN" --state "$work/state.json" >/dev/null; sleep 1; }

# ---- 1. v1 with state
f=$(probe_failed); P seed --nodes "$nodes" --actors "$actors"
check "1,000 actors of v1 hold state" 'count_probe $f'

# ---- 2. v2 (migrates) at 10 %: exactly the actors placed below 1,000 move, migrated once
check "v2 deployed at 10 %" 'W deploy --tenant acme --class probe --rollout 10 "$actors_dir/upgrade_v2.wasm" >"$work/d2.out" 2>&1 && grep -q "rolled out to 10%" "$work/d2.out"'
settle "$nodes"
f=$(probe_failed); P check --nodes "$nodes" --expect share:1:2:10
check "at 10 %: the actors whose place is below 1,000 run v2, migrated once; the others v1" 'count_probe $f'

# ---- 3. v2 at 100 % while increments run and b is killed with -9
check "v2 at 100 %" 'W class rollout acme/probe 2 100 >"$work/r2.out" 2>&1'
P load --nodes "$nodes" --seconds 6 &
load_pid=$!
sleep 2
stop "$pid_b"
kill_ms=$(date +%s%3N)
wait "$load_pid"
settle "$survivors"
f=$(probe_failed); P check --nodes "$survivors" --expect all:2:1\>2
check "at 100 % through a kill -9: every actor on v2, migrated once, no acknowledged increment lost" 'count_probe $f'
migrated=$(( $(metric 1 'wasmkeep_class_migrations_total{outcome="ok"}' | cut -d. -f1) + $(metric 3 'wasmkeep_class_migrations_total{outcome="ok"}' | cut -d. -f1) ))
echo "     migrations counted on the survivors: $migrated (b's died with it); killed at $kill_ms"

# ---- 4. v3 (its migration fails on odd counts) at 100 %: those stay on v2, the rollout pauses
check "v3 deployed" 'W deploy --tenant acme --class probe "$actors_dir/upgrade_v3.wasm" >"$work/d3.out" 2>&1'
settle "$survivors"
f=$(probe_failed); P check --nodes "$survivors" --expect odd-stay:2:3
check "v3: even counts migrated once, odd ones on v2 with their state unchanged" 'count_probe $f'
W class versions acme/probe >"$work/v3.out" 2>&1
cat "$work/v3.out" | tail -n +5
check "the rollout paused itself after 10 failed migrations to v3" 'grep -q "PAUSED: paused after .* failed migrations to version 3" "$work/v3.out"'
failed_metric=$(( $(metric 1 'wasmkeep_class_migrations_total{outcome="failed"}' | cut -d. -f1) + $(metric 3 'wasmkeep_class_migrations_total{outcome="failed"}' | cut -d. -f1) ))
check "failed migrations counted on the nodes ($failed_metric)" '[ "$failed_metric" -ge 10 ]'
check "the nodes publish the actors resident by version" 'curl -sf "127.0.0.1:$(port_of 1)/metrics" | grep -q "wasmkeep_actor_resident_by_version{class_version=\"acme/probe@"'

# ---- 5. a rollback leaves the migrated actors on v3 until v3 is marked broken
check "rollback to v2" 'W class rollout acme/probe 2 100 >"$work/r4.out" 2>&1'
settle "$survivors"
f=$(probe_failed); P check --nodes "$survivors" --expect odd-stay:2:3
check "after the rollback, actors migrated to v3 still run it" 'count_probe $f'
check "v3 marked broken (its actors run v2)" 'W class broken acme/probe 3 >"$work/b3.out" 2>&1'
settle "$survivors"
f=$(probe_failed); P check --nodes "$survivors" --expect version:2
check "v3 broken: every actor runs v2, those v3 converted on the state v3 left" 'count_probe $f'
finish
