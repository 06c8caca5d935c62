#!/usr/bin/env bash
# The drain that waits, with real `wasmkeep serve` processes on 127.0.0.1 (ADR 0020 §4;
# docs/node-lease.md, "Drain"): node a serves 1,000 counter actors under a steady write
# load sent through all three nodes; `cluster drain a` hands every one over (closed as
# hibernation does, its writes durable, its hold released) while requests for them are
# held and then forwarded to the node that takes them. Prints the requests refused during
# the drain (goal: none) and checks that every acknowledged increment is still there. The
# drained node holds no alarm shard and its peers hold all 16. Then, a undrained and serving
# again, 100 alarm actors are started on it with alarms due about twenty seconds later, and a is
# drained again and kept running: the actors leave its memory (closed and released, as
# hibernation leaves them) and every alarm fires while a stays drained, each within the
# bound docs/alarms.md states for a drained node (scan period + scan lag + one listing
# period, plus a restore), counted on the peers without waking any actor.
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
# Each shard scanned every second (docs/alarms.md, "Settings").
[alarms]
scan_period_ms = 1000
scan_lag_ms = 500
handed_recheck_ms = 10000
TOML

echo "== drain under load on $backend ($actors actors)"
TOKEN=$(tenant_add acme)
W deploy --tenant acme --class counter "$actors_dir/counter.wasm" >/dev/null 2>&1
W deploy --tenant acme --class probe "$actors_dir/alarm_probe.wasm" >/dev/null 2>&1
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
# The alarm shards: a drained node holds none; its peers take its share at their next listing
# (they see the drain request) and scan all 16 between them.
shards() { local v; v=$(metric "$1" wasmkeep_alarms_shards_held); echo "${v%%.*}"; }
shards_moved() { [ "$(shards 1)" = 0 ] && [ $(( $(shards 2) + $(shards 3) )) = 16 ]; }
check "a holds no alarm shard and b and c hold all 16" 'wait_for 15 shards_moved'
echo "     (alarm shards held: a $(shards 1), b $(shards 2), c $(shards 3))"
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
check "and takes its share of the alarm shards again" 'wait_for 15 "[ \"\$(shards 1)\" -gt 0 ] && [ \$(( \$(shards 1) + \$(shards 2) + \$(shards 3) )) = 16 ]"'

# ---- alarms while a node stays drained (docs/alarms.md, "What is promised", lateness)
# 100 alarm actors started on a (their sets sent to a alone, which acquires them), their
# alarms due one after another, 50 ms apart, from about twenty seconds on; then a is drained
# and kept running. Nothing touches the actors until their alarms should have fired (a
# request would restore one and fire its alarm from its owner's timer, hiding a shard nobody
# scans): the firings are counted from the peers' wasmkeep_alarms_fired_total, and only then
# are the actors' durable logs read.
now_ms() { date +%s%3N; }
alarm_actors=100
fired_on_peers() { local t=0 v i; for i in 2 3; do v=$(metric "$i" wasmkeep_alarms_fired_total); t=$((t + ${v%%.*})); done; echo "$t"; }
fired0=$(fired_on_peers)
due0=$(( $(now_ms) + 20000 ))
: >"$work/alarm-sets"
set_alarm() {  # I
  local r
  r=$(until_ok 30 1 POST "acme/probe/q$1/set?t=$((due0 + ($1 - 1) * 50))")
  case "$r" in 2*) echo "q$1" >>"$work/alarm-sets" ;; esac
}
set_start=$(now_ms)
jobs=()
for i in $(seq 1 "$alarm_actors"); do
  set_alarm "$i" &
  jobs+=($!)
  if [ ${#jobs[@]} -ge 10 ]; then wait "${jobs[@]}"; jobs=(); fi
done
[ ${#jobs[@]} -gt 0 ] && wait "${jobs[@]}"
set_ms=$(( $(now_ms) - set_start ))
check "$alarm_actors alarms set on actors a holds (in $set_ms ms; a holds $(metric 1 wasmkeep_holds_resident))" \
  '[ "$(wc -l <"$work/alarm-sets")" = "$alarm_actors" ] && [ "$(metric 1 wasmkeep_holds_resident)" = "$alarm_actors" ]'
W cluster drain a --wait 60 >"$work/drain2.out" 2>&1; code=$?
drained_ms=$(now_ms)
check "a drained again (exit 0), $(( due0 - drained_ms )) ms before the first alarm is due" '[ "$code" = 0 ]'
check "a holds none of the actors and no alarm shard" \
  '[ "$(metric 1 wasmkeep_holds_resident)" = 0 ] && wait_for 15 shards_moved'
# The bound for an alarm of a drained node's actor (docs/alarms.md): the peers take the
# drained node's shards at their next listing (heartbeat period, 1.2 s here), scan each shard
# every scan period (1 s) and leave it the scan lag (0.5 s): 2.7 s, plus the restore, with 100
# actors restored at about the same time by two nodes on a debug build: 5 s allowed for it.
# An alarm that came due before the drain ended is judged from the drain's end.
bound_ms=$(( 1200 + 1000 + 500 + 5000 ))
last_due=$(( due0 + (alarm_actors - 1) * 50 ))
start_ref=$(( drained_ms > due0 ? drained_ms : due0 ))
wait_s=$(( (last_due - start_ref + bound_ms) / 1000 + 30 ))  # well past the bound: a late one is measured, not cut
# On a slow machine the sets and the drain may outlast the margin: an alarm due before the
# drain ended may have fired on a, from its own timer; every one due after it is the peers'.
after_drain=0
for i in $(seq 1 "$alarm_actors"); do [ $((due0 + (i - 1) * 50)) -gt "$drained_ms" ] && after_drain=$((after_drain + 1)); done
check "while a stays drained, b and c fire every alarm due after the drain ($after_drain of $alarm_actors)" \
  'wait_for "$wait_s" "[ \$(( \$(fired_on_peers) - fired0 )) -ge $after_drain ]"'
echo "     (fired on b and c: $(( $(fired_on_peers) - fired0 )); a still drained: $(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$(port_of 1)/readyz"))"
late_max=0; late_over=0; early=0; unfired=""
for i in $(seq 1 "$alarm_actors"); do
  due=$((due0 + (i - 1) * 50))
  f=$(req 2 GET "acme/probe/q$i" | cut -d' ' -f2- | tr ',' '\n' | awk -F: '/^f/{print $3; exit}')
  if [ -z "$f" ]; then unfired="$unfired q$i"; continue; fi
  [ "$f" -lt "$due" ] && early=$((early + 1))
  ref=$(( due > drained_ms ? due : drained_ms ))
  late=$(( f - ref ))
  [ "$late" -gt "$late_max" ] && late_max=$late
  [ "$late" -gt "$bound_ms" ] && late_over=$((late_over + 1))
done
echo "     (latest firing $late_max ms after its due time or the drain's end; bound $bound_ms ms; $late_over over it)"
check "each alarm is in its actor's durable log, none early${unfired:+ (not fired:$unfired)}" '[ -z "$unfired" ] && [ "$early" = 0 ]'
check "each fired within the bound ($bound_ms ms)" '[ "$late_over" = 0 ]'
W cluster undrain a >/dev/null 2>&1
check "undrain: a is ready again" 'wait_for 10 "curl -sf 127.0.0.1:$(port_of 1)/readyz >/dev/null"'
finish
