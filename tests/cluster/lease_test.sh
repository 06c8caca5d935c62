#!/usr/bin/env bash
# Cluster tests of node leases with real `wasmkeep serve` processes on 127.0.0.1
# (ADR 0020 Verification, item 3, the parts of §1 and §2).
#
#   lease_test.sh WASMKEEP_BINARY BACKEND      BACKEND: file | s3
#
# Backends, timings and helpers: common.sh. Prints one line per check and closes with "N passed, N failed".
set -u
wk=${1:?usage: lease_test.sh WASMKEEP_BINARY file|s3}
backend=${2:?usage: lease_test.sh WASMKEEP_BINARY file|s3}
prefix=cluster
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

# start NAME NODE_ID INDEX [ENV=VALUE...]: a node in the background; its pid in pid_NAME.
# Every node shares the outage file: touching it cuts the whole bucket off, for all.
outage="outage_file=$work/outage"
start() {
  local name=$1 id=$2 idx=$3
  shift 3
  env WASMKEEP_DEBUG_FAULTS="$outage" "$@" "$wk" --config "$work/fast.toml" --bucket "$bucket" serve --node-id "$id" \
    --listen "127.0.0.1:$(port_of "$idx")" >"$work/$name.out" 2>"$work/$name.log" &
  local pid=$!
  pids+=("$pid")
  eval "pid_${name//-/_}=$pid"
}
state_of() { W cluster status --json 2>/dev/null | python3 -c "import json,sys; print(next((n['state'] for n in json.load(sys.stdin) if n['node']=='$1'),'absent'))"; }

echo "== node leases on $backend"
# Bad configuration is refused before anything is written.
printf '[lease]\nttl_ms = 2000\nsafety_ms = 400\ngrace_ms = 1000\nmax_skew_ms = 200\nheartbeat_period_ms = 1000\n' >"$work/bad.toml"
out=$("$wk" --config "$work/bad.toml" --bucket "$bucket" serve --node-id x --listen 127.0.0.1:$(port_of 99) 2>&1); code=$?
check "a heartbeat period above ttl/3 is refused, naming the setting" '[ $code = 2 ] && grep -q heartbeat_period <<<"$out"'

start a a 1; start b b 2 WASMKEEP_DEBUG_FAULTS="hold_file=$work/b_hold,hold_prefix=nodes/b,$outage"
start c c 3 WASMKEEP_DEBUG_FAULTS="lose_put_reply=3,$outage"; start d d 4; start g g 7
check "nodes become ready after the start check (ttl + grace)" 'wait_ready 1 15 && wait_ready 2 15 && wait_ready 3 15 && wait_ready 4 15 && wait_ready 7 15'
check "cluster status shows them live" '[ "$(state_of a)" = live ] && [ "$(state_of b)" = live ]'

# A second process with the same id exits, naming the twin.
start a-twin a 11
wait_exit "$pid_a_twin" 15
check "a twin exits with status 7" '[ "$code" = 7 ]'
check "the twin's message names the other process" 'grep -q "in use by another process" "$work/a-twin.log"'
check "the original node is unaffected" 'curl -sf 127.0.0.1:$(port_of 1)/readyz >/dev/null'

# cluster fence makes the fenced node exit, and a heartbeat in flight during the fence is
# refused: b's next lease write is held on its way (sent, not yet arrived) while the
# operator fences b, then let go. It arrives after the fence, If-Match the version the fence
# replaced, and must not overwrite it.
touch "$work/b_hold"
check "b's next heartbeat is held in flight" 'wait_for 5 "grep -q \"debug faults: put held\" \"$work/b.log\""'
check "cluster fence b succeeds" 'W cluster fence b >/dev/null 2>&1'
fenced_b=$(W bucket get nodes/b 2>/dev/null | awk '/^lease /{print $2}')
rm -f "$work/b_hold"
wait_exit "$pid_b" 10
check "the fenced node exits with status 6" '[ "$code" = 6 ]'
check "its message says it was fenced" 'grep -q "is fenced" "$work/b.log"'
check "its held heartbeat was sent after the fence" '[ "$fenced_b" = fenced ] && grep -q "debug faults: held put sent" "$work/b.log"'
sleep 1
check "the heartbeat in flight during the fence was refused (nodes/b is still fenced)" '[ "$(state_of b)" = fenced ]'

# A lost reply is adopted, not taken for a fence.
sleep 2
check "node c, with every 3rd lease reply lost, is still ready" 'curl -sf 127.0.0.1:$(port_of 3)/readyz >/dev/null'
check "node c adopted its own writes" '[ "$(metric 3 wasmkeep_node_lease_adoptions_total)" -ge 1 ] 2>/dev/null'

# A deleted heartbeat makes the node's next write fail and the node exit.
W bucket rm nodes/d >/dev/null 2>&1
wait_exit "$pid_d" 10
check "a node whose object was deleted exits with status 6" '[ "$code" = 6 ]'
check "its message says the object was deleted" 'grep -q deleted "$work/d.log"'
check "a lost node does not recreate its object" '[ "$(state_of d)" = absent ]'

# A fence decided on a stale read is refused by its condition (the operator's --if-match;
# the fence watch's own one-GET decision: FenceWatchTest.AFenceDecidedOnAStaleReadIsRefusedByItsCondition).
old=$(W bucket get nodes/g 2>&1 >/dev/null | sed -n 's/^version: //p')
sleep 1.5
W cluster fence g --if-match "$old" >/dev/null 2>&1; code=$?
check "a fence on a stale version is refused (exit 3)" '[ "$code" = 3 ]'
check "node g keeps running" 'kill -0 $pid_g 2>/dev/null && [ "$(state_of g)" = live ]'

# After a bucket outage no node fences another before renewing.
start e e 5; start f f 6
wait_ready 5 15 && wait_ready 6 15
touch "$work/outage"; sleep 4
check "during the outage the nodes report not ready" '! curl -sf 127.0.0.1:$(port_of 5)/readyz >/dev/null && ! curl -sf 127.0.0.1:$(port_of 6)/readyz >/dev/null'
sleep 1; rm -f "$work/outage"
sleep 4
check "after the outage every node runs and is ready again" 'kill -0 $pid_e && kill -0 $pid_f && kill -0 $pid_a && kill -0 $pid_c && wait_ready 5 5 && wait_ready 6 5 && wait_ready 1 5'
check "no node fenced another" '( for i in 1 3 5 6 7; do [ "$(metric $i wasmkeep_fences_total)" = 0 ] || exit 1; done )'
check "the nodes lapsed and renewed" '[ "$(metric 5 wasmkeep_node_lease_lapses_total)" -ge 1 ] 2>/dev/null'

# A drain requested through the bucket: the node reports drained, goes not ready, and
# comes back after undrain.
check "cluster drain waits for the node to report drained" 'W cluster drain c --wait 15 >/dev/null 2>&1'
check "a drained node is not ready" '! curl -sf 127.0.0.1:$(port_of 3)/readyz >/dev/null && curl -s 127.0.0.1:$(port_of 3)/readyz | grep -q drained'
check "cluster undrain puts it back in service" 'W cluster undrain c >/dev/null 2>&1 && wait_ready 3 10'

# A clean stop writes released; a restart under the same id takes the lease back.
kill -TERM "$pid_a"
wait_exit "$pid_a" 10
check "SIGTERM stops cleanly (exit 0)" '[ "$code" = 0 ]'
check "nodes/a is released" '[ "$(state_of a)" = released ]'
start a2 a 12
check "a restarted node takes its lease back" 'wait_ready 12 15 && [ "$(state_of a)" = live ]'

# A killed node is fenced by its peers once ttl + grace passed.
kill -9 "$pid_g"; wait "$pid_g" 2>/dev/null
sleep 6
check "peers fence a killed node" '[ "$(state_of g)" = fenced ]'

# An operator's fence of an absent node creates one.
check "cluster fence of an absent node creates a fence" 'W cluster fence ghost >/dev/null 2>&1 && [ "$(state_of ghost)" = fenced ]'
check "cluster forget refuses a node lease" '! W cluster forget a >/dev/null 2>&1'

finish
