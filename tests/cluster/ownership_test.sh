#!/usr/bin/env bash
# Cluster tests of ownership records and holds with real `wasmkeep serve` processes on
# 127.0.0.1 (ADR 0020 §3, §4; Verification item 3). To stage record races, nodes hold
# actors through the test-only WASMKEEP_DEBUG_ACQUIRE list, and act for them (write through
# the durable replica) through WASMKEEP_DEBUG_WRITER (src/cli/debug_writer.h).
#
#   ownership_test.sh WASMKEEP_BINARY BACKEND      BACKEND: file | s3
#
# Prints one line per check and closes with "N passed, N failed".
set -u
wk=${1:?usage: ownership_test.sh WASMKEEP_BINARY file|s3}
backend=${2:?usage: ownership_test.sh WASMKEEP_BINARY file|s3}
prefix=owners
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

# start NAME NODE_ID INDEX ACTORS [ENV=VALUE...]
start() {
  local name=$1 id=$2 idx=$3 actors=$4
  shift 4
  env WASMKEEP_DEBUG_ACQUIRE="$actors" "$@" "$wk" --config "$work/fast.toml" --bucket "$bucket" serve \
    --node-id "$id" --listen "127.0.0.1:$(port_of "$idx")" >"$work/$name.out" 2>"$work/$name.log" &
  pids+=("$!")
  eval "pid_${name}=$!"
}
# owner KEY: "node instance generation", "nobody - generation", or "absent"
owner() {
  local body
  body=$(W bucket get "owners/$1" 2>/dev/null) || { echo absent; return; }
  awk '/^owner /{n=$2; i=($3==""?"-":$3)} /^generation /{g=$2} END{print n, i, g}' <<<"$body"
}
echo "== ownership on $backend"
start a a 1 "t/c/x,t/c/y"
check "a node acquires its actors at generation 1" 'wait_for 15 "[ \"\$(owner t/c/x | cut -d\" \" -f1,3)\" = \"a 1\" ]"'
first_instance=$(owner t/c/x | cut -d' ' -f2)

# A restarted node takes its predecessor's actors back, at new generations.
kill -9 "$pid_a"; wait "$pid_a" 2>/dev/null
start a2 a 2 "t/c/x,t/c/y"
check "a restarted node takes its predecessor's actor back at generation 2" 'wait_for 15 "[ \"\$(owner t/c/x | cut -d\" \" -f1,3)\" = \"a 2\" ]"'
check "under its new instance" '[ "$(owner t/c/x | cut -d" " -f2)" != "$first_instance" ]'

# A deleted heartbeat object frees nothing.
start b b 3 "t/c/z"
check "node b holds t/c/z" 'wait_for 15 "[ \"\$(owner t/c/z | cut -d\" \" -f1)\" = b ]"'
kill -9 "$pid_b"; wait "$pid_b" 2>/dev/null
W bucket rm nodes/b >/dev/null 2>&1
start c c 4 "t/c/z"
sleep 8
check "with nodes/b deleted, its actor stays recorded to b" '[ "$(owner t/c/z | cut -d" " -f1)" = b ]'
check "and node c did not take it" '! grep -q "debug hold acquired actor=t/c/z" "$work/c.log"'

# A drain ends only when no release is pending.
start d d 5 "t/c/w" WASMKEEP_DEBUG_FAULTS="outage_file=$work/records_down,outage_prefix=owners/"
check "node d holds t/c/w" 'wait_for 15 "[ \"\$(owner t/c/w | cut -d\" \" -f1)\" = d ]"'
touch "$work/records_down"
W cluster drain d --wait 4 >/dev/null 2>&1; code=$?
check "with its release unable to land, the drain does not report drained (exit 5)" '[ "$code" = 5 ]'
check "the record still names d" '[ "$(owner t/c/w | cut -d" " -f1)" = d ]'
rm -f "$work/records_down"
W cluster drain d --wait 20 >/dev/null 2>&1; code=$?
check "once the release lands, the drain completes" '[ "$code" = 0 ]'
check "and the record names nobody, generation kept" '[ "$(owner t/c/w)" = "nobody - 1" ]'

# An acquire with an unknown outcome is released if it landed (by the resolver), and the
# actor is then acquired again at the next generation.
start e e 6 "t/c/u" WASMKEEP_DEBUG_FAULTS="unknown_first_put=owners/"
check "the acquire whose outcome was unknown is kept for the resolver" 'wait_for 20 "grep -q \"acquire outcome unknown\" \"$work/e.log\""'
check "the resolver released it (it had landed)" 'wait_for 10 "[ \"\$(metric 6 '"'"'wasmkeep_resolver_total{outcome=\"released\"}'"'"')\" = 1 ]"'
check "the actor is then held at generation 2" 'wait_for 10 "[ \"\$(owner t/c/u | cut -d\" \" -f1,3)\" = \"e 2\" ]"'

# A pending release never applies to a later hold of the same node: the release of g1
# is parked (records unreachable), the node takes the actor again at g2, and the parked
# release (If-Match g1's version) must not free it.
start f f 7 "t/c/v" WASMKEEP_DEBUG_FAULTS="outage_file=$work/v_down,outage_prefix=owners/"
check "node f holds t/c/v at generation 1" 'wait_for 15 "[ \"\$(owner t/c/v | cut -d\" \" -f1,3)\" = \"f 1\" ]"'
touch "$work/v_down"
W cluster drain f --wait 2 >/dev/null 2>&1
W cluster undrain f >/dev/null 2>&1
sleep 2
rm -f "$work/v_down"
check "f takes the actor again at generation 2" 'wait_for 15 "grep -q \"debug hold acquired actor=t/c/v generation=2\" \"$work/f.log\""'
sleep 5
check "the parked release of generation 1 did not free it" '[ "$(owner t/c/v | cut -d" " -f1,3)" = "f 2" ]'
check "nothing is left pending" '[ "$(metric 7 wasmkeep_releases_pending)" = 0 ]'
echo "     (parked release landed later: $(metric 7 'wasmkeep_releases_total{outcome="landed_later"}'); 0 means the new hold came first and the old release was refused)"

# A lost acquire followed by a second one landing at the same generation: the first write
# never lands but its outcome is unknown (and the read back fails), so it is kept as an
# unresolved acquire at generation 1; the next try lands generation 1 and holds it. The
# resolver then finds the record naming this instance at 1 while the hold lives: it must
# drop its entry, never release (ADR 0020 §3; the simulator's resolver-without-lock).
start h h 9 "t/c/s" WASMKEEP_DEBUG_FAULTS="lost_first_put=owners/"
check "the lost acquire is kept for the resolver" 'wait_for 20 "grep -q \"acquire outcome unknown\" \"$work/h.log\""'
check "a second acquire holds the actor at the same generation 1" 'wait_for 10 "grep -q \"debug hold acquired actor=t/c/s generation=1\" \"$work/h.log\""'
check "the resolver dropped its entry without releasing" 'wait_for 10 "[ \"\$(metric 9 '"'"'wasmkeep_resolver_total{outcome=\"dropped\"}'"'"')\" = 1 ]"'
sleep 3
check "the hold lives: the record still names h at generation 1" '[ "$(owner t/c/s | cut -d" " -f1,3)" = "h 1" ]'
check "no resolver release happened" '[ "$(metric 9 '"'"'wasmkeep_resolver_total{outcome="released"}'"'"')" = 0 ]'
check "and it was acquired once" '[ "$(grep -c "debug hold acquired actor=t/c/s" "$work/h.log")" = 1 ]'

# A clean stop cuts a straggler before writing released: node i writes to t/c/r through the
# replica with slow segment uploads; its ownership records are unreachable, so the clean
# stop's release waits its bound while an upload is still in flight. The hold stops being
# valid when the release starts, so that upload comes back Late and acknowledges nothing,
# all before `released` is written; the next owner restores every acknowledged write.
start i i 10 "" WASMKEEP_DEBUG_WRITER="t/c/r" WASMKEEP_DEBUG_WRITER_OPTIONS="rate=50,inflight=4" \
  WASMKEEP_DEBUG_FAULTS="slow_put_ms=400,slow_put_prefix=wal/,outage_file=$work/r_down,outage_prefix=owners/"
check "node i writes to t/c/r" 'wait_for 20 "grep -sq \"^acked \" \"$work/i.out\""'
touch "$work/r_down"
sleep 0.5
kill -TERM "$pid_i"
wait_exit "$pid_i" 20
check "SIGTERM exits 0" '[ "$code" = 0 ]'
late_line=$(grep -n "debug writer: replica failed" "$work/i.log" | head -1 | cut -d: -f1)
released_line=$(grep -n "node lease released" "$work/i.log" | head -1 | cut -d: -f1)
check "the straggling upload came back Late, acknowledging nothing" 'grep "debug writer: replica failed" "$work/i.log" | grep -q Late'
check "before released was written" '[ -n "$late_line" ] && [ -n "$released_line" ] && [ "$late_line" -lt "$released_line" ]'
rm -f "$work/r_down"
start j j 11 "" WASMKEEP_DEBUG_WRITER="t/c/r" WASMKEEP_DEBUG_WRITER_OPTIONS="writes=1"
check "the next owner restores t/c/r" 'wait_for 30 "grep -sq \"debug writer restored\" \"$work/j.log\""'
restored=$(grep "debug writer restored" "$work/j.log" | head -1 | sed -n 's/.* log=\([^ ]*\).*/\1/p')
missing=0
while read -r _ id; do case ",$restored," in *",$id,"*) ;; *) missing=$((missing + 1)) ;; esac; done < <(grep "^acked " "$work/i.out")
check "with every write node i acknowledged ($(grep -c "^acked " "$work/i.out") of them)" '[ "$missing" = 0 ]'

# A clean stop releases every hold, then writes released.
kill -TERM "$pid_a2"
wait_exit "$pid_a2" 15
check "SIGTERM exits 0" '[ "$code" = 0 ]'
check "its actors are released (nobody, generation kept)" '[ "$(owner t/c/x)" = "nobody - 2" ] && [ "$(owner t/c/y)" = "nobody - 2" ]'
check "then nodes/a is released" 'W cluster status --json 2>/dev/null | grep -A1 "\"node\": \"a\"" >/dev/null; W bucket get nodes/a 2>/dev/null | grep -q "^lease released"'

finish
