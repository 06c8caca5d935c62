#!/usr/bin/env bash
# Moving actors with real `wasmkeep serve` processes on 127.0.0.1 (docs/node-lease.md,
# "Moving actors"): `wasmkeep actor move` under a steady write load, then `wasmkeep cluster
# balance` after a node joins. Requests for a moving actor wait or are forwarded, never
# refused; every acknowledged increment is still there at the end.
#
#   move_test.sh WASMKEEP_BINARY BACKEND ACTORS_DIR      BACKEND: file | s3
#
# Prints one line per check and closes with "N passed, N failed".
set -u
wk=${1:?usage: move_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
backend=${2:?usage: move_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
actors_dir=${3:-$(dirname "$wk")/../../actors}  # default: the binary's build directory's actors/
prefix=move
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
load="python3 $(dirname "$0")/load.py"
actors=300

slower_lease  # hundreds of actors taken at once (common.sh)
cat >>"$work/fast.toml" <<TOML
[actors]
workers = 2
idle_hibernate_ms = 600000
[moves]
per_second = 20
TOML
# owner ACTOR: the node its record names ("nobody" or "absent" otherwise).
owner() { W bucket get "owners/$1" 2>/dev/null | awk '/^owner /{print $2}' || true; }

echo "== moving actors on $backend"
TOKEN=$(tenant_add acme)
W deploy --tenant acme --class counter "$actors_dir/counter.wasm" >/dev/null 2>&1
start a a 1
start b b 2
check "two nodes become ready" 'wait_ready 1 30 && wait_ready 2 30'
nodes="127.0.0.1:$(port_of 1),127.0.0.1:$(port_of 2)"
$load run --nodes "$nodes" --token "$TOKEN" --actors "$actors" --workers 8 --spread --once --out "$work/warm.json" >/dev/null
check "a and b hold the $actors actors between them" '[ $(( $(metric 1 wasmkeep_holds_resident) + $(metric 2 wasmkeep_holds_resident) )) = "$actors" ]'

W actor move acme/counter/nobody-holds-me --to b >/dev/null 2>&1; code=$?
check "moving an actor no node holds: exit 4" '[ "$code" = 4 ]'
W actor move acme/counter/a1 --to nosuchnode >/dev/null 2>&1; code=$?
check "moving to a node that is not live: exit 3" '[ "$code" = 3 ]'

# ---- moves under load
$load run --nodes "$nodes" --token "$TOKEN" --actors "$actors" --workers 8 --spread --stop-file "$work/stop" \
  --out "$work/load.json" >"$work/load.out" 2>&1 &
load_pid=$!
sleep 2
# Four moves at once (two from each node, if the actors fall that way), each to the other node.
moves_start=$SECONDS
declare -A target=()
move_pids=()
for i in 3 42 150 151; do
  from=$(owner "acme/counter/a$i")
  to=a; [ "$from" = a ] && to=b
  target[$i]="$from $to"
  W actor move "acme/counter/a$i" --to "$to" >"$work/move$i.out" 2>&1 &
  move_pids+=($!)
done
for p in "${move_pids[@]}"; do wait "$p"; done
moves_s=$((SECONDS - moves_start))
moved=0
at_target=0
for i in 3 42 150 151; do
  read -r from to <<<"${target[$i]}"
  grep -q "^acme/counter/a$i moved from $from to $to" "$work/move$i.out" && moved=$((moved + 1))
  [ "$(owner "acme/counter/a$i")" = "$to" ] && at_target=$((at_target + 1))
done
check "four moves under load, each reported moved to its target ($moved, in ${moves_s} s)" '[ "$moved" = 4 ]'
check "every record names its move's target ($at_target)" '[ "$at_target" = 4 ]'
sed 's/^/     /' "$work/move3.out"

# ---- a node joins; balance gives it its share
start c c 3
check "c joins" 'wait_ready 3 30'
balance_start=$SECONDS
W cluster balance --wait 60 >"$work/balance.out" 2>&1; code=$?
echo "     (cluster balance took $((SECONDS - balance_start)) s)"
sed 's/^/     /' "$work/balance.out" | grep -v "^     move " | head -8
check "cluster balance moves actors to c (exit 0)" '[ "$code" = 0 ]'
held_a=$(metric 1 wasmkeep_holds_resident)
held_b=$(metric 2 wasmkeep_holds_resident)
held_c=$(metric 3 wasmkeep_holds_resident)
check "c got its share ($held_a, $held_b, $held_c)" '[ "$held_c" -ge $((actors / 3 - 1)) ] && [ "$held_a" -le $((actors / 3 + 1)) ] && [ "$held_b" -le $((actors / 3 + 1)) ]'
W cluster balance --dry-run >"$work/dry.out" 2>&1
check "a second balance finds nothing to move" 'grep -q "balanced: nothing to move" "$work/dry.out"'
touch "$work/stop"
wait "$load_pid"
cat "$work/load.out"
refused=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["refusals"]))' "$work/load.json")
echo "     requests refused during the moves and the balance: $refused (goal: none)"
python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["refusals"][:5]: print("       ", r)' "$work/load.json"
check "no request was refused" '[ "$refused" = 0 ]'
if [ "$backend" = s3 ]; then
  # The S3 pool's lanes (docs/storage-backends.md): what waited for a connection, by lane.
  for n in 1 2 3; do
    echo "     node $n bucket connection waits: urgent $(metric $n 'wasmkeep_bucket_connection_waits_total{lane="urgent"}') (timed out $(metric $n 'wasmkeep_bucket_connection_wait_timeouts_total{lane="urgent"}')), bulk $(metric $n 'wasmkeep_bucket_connection_waits_total{lane="bulk"}')"
  done
  check "the S3 pool's lanes are published" '[ -n "$(metric 1 "wasmkeep_bucket_connection_waits_total{lane=\"urgent\"}")" ]'
fi
$load verify --nodes "$nodes" --token "$TOKEN" --workers 16 --in "$work/warm.json,$work/load.json" >"$work/verify.out" 2>&1; vcode=$?
cat "$work/verify.out"
check "every acknowledged increment is still there" '[ "$vcode" = 0 ]'
finish
