#!/usr/bin/env bash
# The drain that waits, with real `wasmkeep serve` processes on 127.0.0.1 (ADR 0020 §4;
# docs/node-lease.md, "Drain"): node a serves 1,000 counter actors under a steady write
# load sent through all three nodes; `cluster drain a` hands every one over (closed as
# hibernation does, its writes durable, its hold released) while requests for them are
# held and then forwarded to the node that takes them. Prints the requests refused during
# the drain (goal: none) and checks that every acknowledged increment is still there.
#
#   drain_test.sh WASMKEEP_BINARY BACKEND ACTORS_DIR      BACKEND: file | s3
#
# Prints one line per check and closes with "N passed, N failed".
set -u
wk=${1:?usage: drain_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
backend=${2:?usage: drain_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
actors_dir=${3:-$(dirname "$wk")/../../actors}  # default: the binary's build directory's actors/
prefix=drain
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
load="python3 $(dirname "$0")/load.py"
actors=${DRAIN_TEST_ACTORS:-1000}

# Actors stay resident for the whole test (no hibernation).
slower_lease  # hundreds of actors taken at once (common.sh)
cat >>"$work/fast.toml" <<TOML
[actors]
workers = 2
idle_hibernate_ms = 600000
TOML

echo "== drain under load on $backend ($actors actors)"
TOKEN=$(tenant_add acme)
W deploy --tenant acme --class counter "$actors_dir/counter.wasm" >/dev/null 2>&1
start a a 1
start b b 2
start c c 3
check "three nodes become ready" 'wait_ready 1 30 && wait_ready 2 30 && wait_ready 3 30'
nodes="127.0.0.1:$(port_of 1),127.0.0.1:$(port_of 2),127.0.0.1:$(port_of 3)"
only_a="127.0.0.1:$(port_of 1)"

# Every actor starts on a: one round of increments through a alone.
$load run --nodes "$only_a" --token "$TOKEN" --actors "$actors" --workers 16 --once --out "$work/warm.json" >"$work/warm.out"
check "a holds the $actors actors ($(metric 1 wasmkeep_holds_resident))" '[ "$(metric 1 wasmkeep_holds_resident)" = "$actors" ]'

# The load: through every node in turn (b and c forward to a while a holds them).
$load run --nodes "$nodes" --token "$TOKEN" --actors "$actors" --workers 16 --spread --stop-file "$work/stop" \
  --out "$work/load.json" >"$work/load.out" 2>&1 &
load_pid=$!
sleep 3
drain_start=$(date +%s%3N)
W cluster drain a --wait 60 >"$work/drain.out" 2>&1; code=$?
drain_ms=$(( $(date +%s%3N) - drain_start ))
check "cluster drain a reports drained (exit 0, in $drain_ms ms)" '[ "$code" = 0 ]'
sleep 3
touch "$work/stop"
wait "$load_pid"
cat "$work/load.out"
refused=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["refusals"]))' "$work/load.json")
echo "     requests refused during the drain: $refused (goal: none)"
python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["refusals"][:5]: print("       ", r)' "$work/load.json"
check "no request was refused during the drain" '[ "$refused" = 0 ]'
closed=$(metric 1 'wasmkeep_hand_overs_total{outcome="closed"}')
cut=$(metric 1 'wasmkeep_hand_overs_total{outcome="cut"}')
held=$(metric 1 wasmkeep_hand_over_waits_total)
echo "     a's hand-overs: $closed closed then released, $cut cut; $held requests held while their actor was leaving"
check "a closed each of its $actors actors before releasing it ($closed closed, $cut cut)" '[ "$closed" = "$actors" ] && [ "$cut" = 0 ]'
check "a holds nothing and releases nothing" '[ "$(metric 1 wasmkeep_holds_resident)" = 0 ] && [ "$(metric 1 wasmkeep_releases_pending)" = 0 ]'
# One more round through a alone, over the first 200 actors (enough to see it, and a lean
# test): the drained node forwards every request to the peer that took the actor.
after=$((actors < 200 ? actors : 200))
$load run --nodes "$only_a" --token "$TOKEN" --actors "$after" --workers 16 --once --out "$work/after.json" >"$work/after.out"
cat "$work/after.out"
refused_after=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["refusals"]))' "$work/after.json")
check "through the drained node, nothing refused either ($refused_after)" '[ "$refused_after" = 0 ]'
check "a drained node answers /readyz 503" '[ "$(curl -s -o /dev/null -w "%{http_code}" "127.0.0.1:$(port_of 1)/readyz")" = 503 ]'
# The read-back goes through every node, a included: it reaches every actor, so b and c
# hold them all afterwards.
$load verify --nodes "$nodes" --token "$TOKEN" --workers 16 --in "$work/warm.json,$work/load.json,$work/after.json" >"$work/verify.out" 2>&1; vcode=$?
cat "$work/verify.out"
check "every acknowledged increment is still there" '[ "$vcode" = 0 ]'
held_a=$(metric 1 wasmkeep_holds_resident)
held_b=$(metric 2 wasmkeep_holds_resident)
held_c=$(metric 3 wasmkeep_holds_resident)
check "b and c took every actor, a none ($held_b and $held_c; a $held_a)" '[ $((held_b + held_c)) = "$actors" ] && [ "$held_b" -gt 0 ] && [ "$held_c" -gt 0 ] && [ "$held_a" = 0 ]'

W cluster undrain a >/dev/null 2>&1
check "undrain: a is ready again" 'wait_for 10 "curl -sf 127.0.0.1:$(port_of 1)/readyz >/dev/null"'
finish
