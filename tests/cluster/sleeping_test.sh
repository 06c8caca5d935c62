#!/usr/bin/env bash
# Sleeping holds with real `wasmkeep serve` processes on 127.0.0.1 (issue 36;
# docs/node-lease.md, "Sleeping holds"): node a serves N counter actors (3,000 by default,
# SLEEPING_TEST_ACTORS; the deep run's 10,000 in scripts/deep-cluster.sh), which leave memory after 2 s idle and keep their holds asleep; a
# second round of increments through a wakes every one with no owner write at all (the
# bucket requests by purpose, from a's /metrics), nor any owner read; a drain of a, holding them all asleep,
# completes within the bound docs/node-lease.md states; then b, holding them asleep in its
# turn, is killed with -9 and every actor is served by c within the failover bound, every
# acknowledged increment intact.
#
#   sleeping_test.sh WASMKEEP_BINARY BACKEND ACTORS_DIR      BACKEND: file | s3
#
# Prints one line per check and closes with "N passed, N failed".
set -u
wk=${1:?usage: sleeping_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
backend=${2:?usage: sleeping_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
actors_dir=${3:-$(dirname "$wk")/../../actors}
prefix=sleeping
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
load="python3 $(dirname "$0")/load.py"
actors=${SLEEPING_TEST_ACTORS:-3000}

slower_lease  # thousands of actors taken at once (common.sh)
cat >>"$work/fast.toml" <<TOML
[actors]
workers = 2
idle_hibernate_ms = 2000
TOML

# Requests to the bucket for ownership records (purpose "owner"), by operation, on node N.
owner_ops() {  # N OP: the count, summed over outcomes
  curl -sf "127.0.0.1:$(port_of "$1")/metrics" |
    awk -v op="$2" '$1 ~ /^wasmkeep_bucket_requests_total\{/ && index($1, "op=\"" op "\"") && index($1, "purpose=\"owner\"") {s += $2} END {print s + 0}'
}
sleeping() { local v; v=$(metric "$1" wasmkeep_holds_sleeping); echo "${v%%.*}"; }

echo "== sleeping holds on $backend ($actors actors)"
TOKEN=$(tenant_add acme)
W deploy --tenant acme --class counter "$actors_dir/counter.wasm" >/dev/null 2>&1
start a a 1
start b b 2
start c c 3
check "three nodes become ready" 'wait_ready 1 30 && wait_ready 2 30 && wait_ready 3 30'
only_a="127.0.0.1:$(port_of 1)"
only_b="127.0.0.1:$(port_of 2)"
only_c="127.0.0.1:$(port_of 3)"

# ---- 1. every actor acquired on a, asleep, woken with zero owner writes
t0=$(date +%s%3N)
$load run --nodes "$only_a" --token "$TOKEN" --actors "$actors" --workers 16 --once --out "$work/r1.json" >"$work/r1.out"
first_ms=$(( $(date +%s%3N) - t0 ))
cat "$work/r1.out"
# A request the first round saw refused (a busy machine: 4 of 10,000 once) leaves its actor
# unheld; a second round, while all are in memory, makes sure a holds every one.
$load run --nodes "$only_a" --token "$TOKEN" --actors "$actors" --workers 16 --once --out "$work/r1b.json" >"$work/r1b.out"
cat "$work/r1b.out"
check "a holds the $actors actors" '[ "$(metric 1 wasmkeep_holds_resident)" = "$actors" ]'
check "they leave memory with their holds asleep" 'wait_for 60 "[ \"\$(sleeping 1)\" = $actors ]"'
puts_before=$(owner_ops 1 put)
gets_before=$(owner_ops 1 get)
t0=$(date +%s%3N)
$load run --nodes "$only_a" --token "$TOKEN" --actors "$actors" --workers 16 --once --out "$work/r2.json" >"$work/r2.out"
wake_ms=$(( $(date +%s%3N) - t0 ))
cat "$work/r2.out"
puts=$(( $(owner_ops 1 put) - puts_before ))
gets=$(( $(owner_ops 1 get) - gets_before ))
woken=$(metric 1 'wasmkeep_sleeping_holds_total{event="woken"}')
echo "     woken: ${woken%%.*} in $wake_ms ms; owner PUTs $puts, owner GETs $gets"
check "every actor woke on a with no owner PUT ($puts)" '[ "$puts" = 0 ] && [ "${woken%%.*}" -ge "$actors" ]'
# A request for an actor this node holds asleep runs here with no routing read (routing/front.h).
check "and with no owner GET ($gets)" '[ "$gets" = 0 ]'
check "and they sleep again" 'wait_for 60 "[ \"\$(sleeping 1)\" = $actors ]"'

# ---- 2. a drain of a node holding them all asleep: one release write each, 32 at once
t0=$(date +%s%3N)
W cluster drain a --wait 120 >"$work/drain.out" 2>&1; code=$?
drain_ms=$(( $(date +%s%3N) - t0 ))
echo "     drain of $actors sleeping holds: $drain_ms ms"
# The bound (docs/node-lease.md): N x the bucket's PUT latency / 32, plus a listing period
# for the node to see the request. The PUT latency is the machine's and the bucket's of the
# moment: bounded here by the first round's time per actor (each took about eight requests,
# 16 at once, where a drain sends one, 32 at once), so a loaded CI machine moves the bound
# with it. Alone: 4.2 s for 10,000 against a first round of 29 s.
bound_ms=$(( 6000 + first_ms / 2 ))
check "a drains its $actors sleeping holds within $bound_ms ms (exit $code, $drain_ms ms)" '[ "$code" = 0 ] && [ "$drain_ms" -le "$bound_ms" ]'
check "a holds nothing" '[ "$(metric 1 wasmkeep_holds_resident)" = 0 ] && [ "$(sleeping 1)" = 0 ]'

# ---- 3. b takes them all, they sleep there; b is killed with -9; c serves every one
$load run --nodes "$only_b" --token "$TOKEN" --actors "$actors" --workers 16 --once --out "$work/r3.json" >"$work/r3.out"
cat "$work/r3.out"
# As on a: a request refused on a starved machine (11 of 1,000 on RGW beside two compilers)
# leaves its actor unheld; a second round makes sure b takes every one.
$load run --nodes "$only_b" --token "$TOKEN" --actors "$actors" --workers 16 --once --out "$work/r3b.json" >"$work/r3b.out"
cat "$work/r3b.out"
check "b holds them asleep" 'wait_for 60 "[ \"\$(sleeping 2)\" = $actors ]"'
stop "$pid_b"
t_kill=$(date +%s%3N)
$load verify --nodes "$only_c" --token "$TOKEN" --workers 16 --in "$work/r1.json,$work/r1b.json,$work/r2.json,$work/r3.json,$work/r3b.json" >"$work/verify.out" 2>&1; vcode=$?
served_ms=$(( $(date +%s%3N) - t_kill ))
cat "$work/verify.out"
# The failover bound: b's records free ttl + grace after its last renewal, plus the fence
# watch (slower_lease, common.sh: 6 s and 2.5 s), plus taking every actor over, which costs
# what their first acquisition cost (a record read and write, a restore) measured above on
# a, under the same load: 15 s and five times that (alone: 32.5 s against a first round of
# 29 s; in the full suite, other tests beside it, 92 s against about 22 s).
failover_ms=$(( 15000 + 5 * first_ms ))
check "every acknowledged increment is there, read through c after b's kill -9" '[ "$vcode" = 0 ]'
check "all $actors actors served by c within $failover_ms ms of the kill ($served_ms ms)" '[ "$served_ms" -le "$failover_ms" ]'
echo "     (their first acquisitions took $first_ms ms)"
finish
