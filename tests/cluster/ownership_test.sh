#!/usr/bin/env bash
# Cluster tests of ownership records and holds with real `wasmkeep serve` processes on
# 127.0.0.1 (ADR 0020 §3, §4; Verification item 3). To stage record races, nodes hold
# actors through the test-only WASMKEEP_DEBUG_ACQUIRE list, and act for them (write through
# the durable replica) through WASMKEEP_DEBUG_WRITER (src/cli/testing/debug_writer.h).
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

# owner KEY: "node instance generation", "nobody - generation", or "absent"
owner() {
  local body
  body=$(W bucket get "owners/$1" 2>/dev/null) || { echo absent; return; }
  awk '/^owner /{n=$2; i=($3==""?"-":$3)} /^generation /{g=$2} END{print n, i, g}' <<<"$body"
}
echo "== ownership on $backend"
start_acquiring a a 1 "t/c/x,t/c/y"
check "a node acquires its actors at generation 1" 'wait_for 15 "[ \"\$(owner t/c/x | cut -d\" \" -f1,3)\" = \"a 1\" ]"'
first_instance=$(owner t/c/x | cut -d' ' -f2)

# A restarted node takes its predecessor's actors back, at new generations.
kill -9 "$pid_a"; wait "$pid_a" 2>/dev/null
start_acquiring a2 a 2 "t/c/x,t/c/y"
check "a restarted node takes its predecessor's actor back at generation 2" 'wait_for 15 "[ \"\$(owner t/c/x | cut -d\" \" -f1,3)\" = \"a 2\" ]"'
check "under its new instance" '[ "$(owner t/c/x | cut -d" " -f2)" != "$first_instance" ]'

# A deleted heartbeat object frees nothing.
start_acquiring b b 3 "t/c/z"
check "node b holds t/c/z" 'wait_for 15 "[ \"\$(owner t/c/z | cut -d\" \" -f1)\" = b ]"'
kill -9 "$pid_b"; wait "$pid_b" 2>/dev/null
W bucket rm nodes/b >/dev/null 2>&1
start_acquiring c c 4 "t/c/z"
sleep 8
check "with nodes/b deleted, its actor stays recorded to b" '[ "$(owner t/c/z | cut -d" " -f1)" = b ]'
check "and node c did not take it" '! grep -q "debug hold acquired actor=t/c/z" "$work/c.log"'
stop "$pid_c"

# A drain ends only when no release is pending.
start_acquiring d d 5 "t/c/w" WASMKEEP_DEBUG_FAULTS="outage_file=$work/records_down,outage_prefix=owners/"
check "node d holds t/c/w" 'wait_for 15 "[ \"\$(owner t/c/w | cut -d\" \" -f1)\" = d ]"'
touch "$work/records_down"
W cluster drain d --wait 4 >/dev/null 2>&1; code=$?
check "with its release unable to land, the drain does not report drained (exit 5)" '[ "$code" = 5 ]'
check "the record still names d" '[ "$(owner t/c/w | cut -d" " -f1)" = d ]'
rm -f "$work/records_down"
W cluster drain d --wait 20 >/dev/null 2>&1; code=$?
check "once the release lands, the drain completes" '[ "$code" = 0 ]'
check "and the record names nobody, generation kept" '[ "$(owner t/c/w)" = "nobody - 1" ]'
stop "$pid_d"

# An acquire with an unknown outcome is released if it landed (by the resolver), and the
# actor is then acquired again at the next generation. Faults aimed at one actor's record
# (here and below) leave the node's alarm shard holds alone, so the counts are the actor's.
start_acquiring e e 6 "t/c/u" WASMKEEP_DEBUG_FAULTS="unknown_first_put=owners/t/c/u"
check "the acquire whose outcome was unknown is kept for the resolver" 'wait_for 20 "grep -q \"acquire outcome unknown\" \"$work/e.log\""'
check "the resolver released it (it had landed)" 'wait_for 10 "[ \"\$(metric 6 '"'"'wasmkeep_resolver_total{outcome=\"released\"}'"'"')\" = 1 ]"'
check "the actor is then held at generation 2" 'wait_for 10 "[ \"\$(owner t/c/u | cut -d\" \" -f1,3)\" = \"e 2\" ]"'
stop "$pid_e"

# A pending release never applies to a later hold of the same node, in the dangerous order:
# the release of g1 is parked (releases refused: only puts naming nobody), the node takes
# the actor again at g2 while its release of g1 is still refused, and only then may the
# parked release (If-Match g1's version) be retried: it must not free g2. The outage is
# this actor's record alone: the node's alarm shard holds (docs/alarms.md) go on unharmed.
start_acquiring f f 7 "t/c/v" WASMKEEP_DEBUG_FAULTS="outage_file=$work/v_down,outage_prefix=owners/t/c/v,outage_body=owner nobody"
check "node f holds t/c/v at generation 1" 'wait_for 15 "[ \"\$(owner t/c/v | cut -d\" \" -f1,3)\" = \"f 1\" ]"'
touch "$work/v_down"
W cluster drain f --wait 2 >/dev/null 2>&1
check "its release of generation 1 is parked" '[ "$(metric 7 wasmkeep_releases_pending)" = 1 ]'
W cluster undrain f >/dev/null 2>&1
check "f takes the actor again at generation 2 while that release is still parked" 'wait_for 15 "grep -q \"debug hold acquired actor=t/c/v generation=2\" \"$work/f.log\"" && [ "$(metric 7 wasmkeep_releases_pending)" = 1 ]'
rm -f "$work/v_down"
check "then the parked release is retried and ends" 'wait_for 10 "[ \"\$(metric 7 wasmkeep_releases_pending)\" = 0 ]"'
check "the parked release of generation 1 did not free it" '[ "$(owner t/c/v | cut -d" " -f1,3)" = "f 2" ]'
check "it never landed" '[ "$(metric 7 '"'"'wasmkeep_releases_total{outcome="landed_later"}'"'"')" = 0 ]'
stop "$pid_f"

# A lost acquire followed by a second one landing at the same generation: the first write
# never lands but its outcome is unknown (and the read back fails), so it is kept as an
# unresolved acquire at generation 1; the next try lands generation 1 and holds it. The
# resolver reads the record naming this instance at 1 before that hold is registered:
# under the actor's lock it waits, then sees the hold, and drops its entry; it must never
# release (ADR 0020 §3; the simulator's resolver-without-lock).
# The second acquisition's reply takes 1.5 s (it lands at once), so the resolver's passes
# (every 250 ms) read the record between its landing and the registration of its hold.
start_acquiring h h 9 "t/c/s" WASMKEEP_DEBUG_FAULTS="lost_first_put=owners/t/c/s,slow_reply_ms=1500,slow_reply_prefix=owners/t/c/s"
check "the lost acquire is kept for the resolver" 'wait_for 20 "grep -sq \"acquire outcome unknown\" \"$work/h.log\""'
check "a second acquire holds the actor at the same generation 1" 'wait_for 10 "grep -q \"debug hold acquired actor=t/c/s generation=1\" \"$work/h.log\""'
check "the resolver dropped its entry without releasing" 'wait_for 10 "[ \"\$(metric 9 '"'"'wasmkeep_resolver_total{outcome=\"dropped\"}'"'"')\" = 1 ]"'
sleep 3
check "the hold lives: the record still names h at generation 1" '[ "$(owner t/c/s | cut -d" " -f1,3)" = "h 1" ]'
check "no resolver release happened" '[ "$(metric 9 '"'"'wasmkeep_resolver_total{outcome="released"}'"'"')" = 0 ]'
check "and it was acquired once" '[ "$(grep -c "debug hold acquired actor=t/c/s" "$work/h.log")" = 1 ]'
stop "$pid_h"

# (The writers below may have many writes in flight: with at most a few, an upload could
# carry them all and leave a moment with nothing in flight until the next write; a cut in
# that moment finds no straggler, and the CI machine, loaded, once hit it.)
# A clean stop cuts a straggler before writing released: node i writes to t/c/r through the
# replica with slow segment uploads; its ownership records are unreachable, so the clean
# stop's release waits its bound while an upload is still in flight. The hold stops being
# valid when the release starts, so that upload comes back Late and acknowledges nothing,
# all before `released` is written; the next owner restores every acknowledged write.
start_acquiring i i 10 "" WASMKEEP_DEBUG_WRITER="t/c/r" WASMKEEP_DEBUG_WRITER_OPTIONS="rate=50,inflight=64" \
  WASMKEEP_DEBUG_FAULTS="slow_put_ms=400,slow_put_prefix=wal/,outage_file=$work/r_down,outage_prefix=owners/"
check "node i writes to t/c/r" 'wait_for 20 "grep -sq \"^acked \" \"$work/i.out\""'
touch "$work/r_down"
sleep 0.5
kill -TERM "$pid_i"
wait_exit "$pid_i" 20
check "SIGTERM exits 0" '[ "$code" = 0 ]'
late_line=$(grep -n "debug writer: replica failed" "$work/i.log" | head -1 | cut -d: -f1)
released_line=$(grep -n "node lease released" "$work/i.log" | head -1 | cut -d: -f1)
echo "     $(grep -m1 "debug writer: replica failed" "$work/i.log" | cut -c1-400)"
check "the straggling upload came back Late, acknowledging nothing" 'grep "debug writer: replica failed" "$work/i.log" | grep -q Late'
check "before released was written" '[ -n "$late_line" ] && [ -n "$released_line" ] && [ "$late_line" -lt "$released_line" ]'
rm -f "$work/r_down"
start_acquiring j j 11 "" WASMKEEP_DEBUG_WRITER="t/c/r" WASMKEEP_DEBUG_WRITER_OPTIONS="writes=1"
check "the next owner restores t/c/r" 'wait_for 30 "grep -sq \"debug writer restored\" \"$work/j.log\""'
restored=$(grep "debug writer restored" "$work/j.log" | head -1 | sed -n 's/.* log=\([^ ]*\).*/\1/p')
missing=0
while read -r _ id; do case ",$restored," in *",$id,"*) ;; *) missing=$((missing + 1)) ;; esac; done < <(grep "^acked " "$work/i.out")
check "with every write node i acknowledged ($(grep -c "^acked " "$work/i.out") of them)" '[ "$missing" = 0 ]'
stop "$pid_j"

# A clean stop cuts a straggler at the lease level: node k holds six actors whose releases
# each take over a second (every put is sent 0.2 s late, a record's reply comes a second
# after that), and writes to t/c/zr (last in the drain's order). The stop's release phase
# (half the 2 s stop limit) ends after the first release, with t/c/zr still held; then the
# lease is made locally invalid, so the upload in flight (sent before) comes back Late and
# acknowledges nothing, before `released` (sent after, as late) is written; the next owner
# restores every acknowledged write.
start_acquiring k k 12 "t/c/k1,t/c/k2,t/c/k3,t/c/k4,t/c/k5,t/c/k6" WASMKEEP_DEBUG_WRITER="t/c/zr" \
  WASMKEEP_DEBUG_WRITER_OPTIONS="rate=50,inflight=64" \
  WASMKEEP_DEBUG_FAULTS="slow_put_ms=200,slow_reply_ms=1000,slow_reply_prefix=owners/"
k_holds_six() { [ "$(grep -sc "debug hold acquired" "$work/k.log")" = 6 ]; }
check "node k holds its six actors and writes to t/c/zr" 'wait_for 20 "k_holds_six && grep -sq \"^acked \" \"$work/k.out\""'
kill -TERM "$pid_k"
wait_exit "$pid_k" 20
check "SIGTERM exits 0" '[ "$code" = 0 ]'
check "the release phase ended at its bound with t/c/zr still held" '[ "$(owner t/c/zr | cut -d" " -f1)" = k ] && [ "$(owner t/c/k6 | cut -d" " -f1)" = k ]'
late_line=$(grep -n "debug writer: replica failed" "$work/k.log" | head -1 | cut -d: -f1)
released_line=$(grep -n "node lease released" "$work/k.log" | head -1 | cut -d: -f1)
echo "     $(grep -m1 "debug writer: replica failed" "$work/k.log" | cut -c1-400)"
check "the lease-level cut made the straggler's upload Late, acknowledging nothing" 'grep "debug writer: replica failed" "$work/k.log" | grep -q Late'
check "before released was written" '[ -n "$late_line" ] && [ -n "$released_line" ] && [ "$late_line" -lt "$released_line" ]'
start_acquiring l l 13 "" WASMKEEP_DEBUG_WRITER="t/c/zr" WASMKEEP_DEBUG_WRITER_OPTIONS="writes=1"
check "the next owner restores t/c/zr" 'wait_for 30 "grep -sq \"debug writer restored\" \"$work/l.log\""'
restored=$(grep "debug writer restored" "$work/l.log" | head -1 | sed -n 's/.* log=\([^ ]*\).*/\1/p')
missing=0
while read -r _ id; do case ",$restored," in *",$id,"*) ;; *) missing=$((missing + 1)) ;; esac; done < <(grep "^acked " "$work/k.out")
check "with every write node k acknowledged ($(grep -c "^acked " "$work/k.out") of them)" '[ "$missing" = 0 ]'
stop "$pid_l"

# A fenced node that holds actors drops them (ADR 0020 Verification): node m writes to
# t/c/fm; node n waits to take it. An operator fences m: m exits at its next lease write,
# answering nothing more; n takes t/c/fm only once ttl + grace after m's last write has
# passed, and restores every write m acknowledged.
start_acquiring m m 14 "" WASMKEEP_DEBUG_WRITER="t/c/fm" WASMKEEP_DEBUG_WRITER_OPTIONS="rate=50,inflight=4"
check "node m writes to t/c/fm" 'wait_for 20 "grep -sq \"^acked \" \"$work/m.out\""'
start_acquiring n n 15 "" WASMKEEP_DEBUG_WRITER="t/c/fm" WASMKEEP_DEBUG_WRITER_OPTIONS="writes=1"
wait_ready 15 15
sleep 1
check "cluster fence m succeeds" 'W cluster fence m >"$work/fence-m.out" 2>&1 || { sed "s/^/     /" "$work/fence-m.out"; false; }'
fenced_at_ms=$(date +%s%3N)
free_at_ms=$(( $(written_at_ms nodes/m) + 3000 ))
wait_exit "$pid_m" 5
check "the fenced node exits 6 at its next lease write, answering nothing more" '[ "$code" = 6 ]'
check "n takes t/c/fm" 'wait_for 20 "grep -sq \"debug writer restored\" \"$work/n.log\""'
restored_ms=$(log_ms "$work/n.log" "debug writer restored")
check "not before the bound (ttl + grace after m's last write; restored at +$((restored_ms - fenced_at_ms)) ms after the fence)" '[ -n "$restored_ms" ] && [ "$restored_ms" -ge "$free_at_ms" ]'
restored=$(grep "debug writer restored" "$work/n.log" | head -1 | sed -n 's/.* log=\([^ ]*\).*/\1/p')
missing=0
while read -r _ id; do case ",$restored," in *",$id,"*) ;; *) missing=$((missing + 1)) ;; esac; done < <(grep "^acked " "$work/m.out")
check "with every write m acknowledged ($(grep -c "^acked " "$work/m.out") of them)" '[ "$missing" = 0 ] && [ "$(grep -c "^acked " "$work/m.out")" -gt 0 ]'
stop "$pid_n"

# An old-format heartbeat frees nothing (ADR 0020 Verification): node p holds t/c/o and
# dies; its nodes/p is then an old-format heartbeat (headers 1 and 2 are written
# unconditionally by per-actor-lease binaries), as old as can be. Node q wants t/c/o and
# must never take it; q reports the old heartbeat once, as a retired node's.
start_acquiring p p 16 "t/c/o"
check "node p holds t/c/o" 'wait_for 15 "[ \"\$(owner t/c/o | cut -d\" \" -f1)\" = p ]"'
kill -9 "$pid_p"; wait "$pid_p" 2>/dev/null
printf 'wasmkeep-node 1\nnode p\nwritten_at_ms 1000\n' >"$work/old-heartbeat"
W bucket put nodes/p "$work/old-heartbeat" >/dev/null 2>&1
start_acquiring q q 17 "t/c/o"
wait_ready 17 15
sleep 8
check "an old-format heartbeat frees nothing: t/c/o stays recorded to p" '[ "$(owner t/c/o | cut -d" " -f1)" = p ] && ! grep -q "debug hold acquired actor=t/c/o" "$work/q.log"'
check "nobody fenced it either" '[ "$(W bucket get nodes/p 2>/dev/null | head -1)" = "wasmkeep-node 1" ]'
check "q reported it once, as a retired node's" '[ "$(grep -c "old-format heartbeat of a retired node" "$work/q.log")" = 1 ] && ! grep -q "old-format heartbeat in the bucket, fresh" "$work/q.log"'
stop "$pid_q"

# A clean stop releases every hold, then writes released.
kill -TERM "$pid_a2"
wait_exit "$pid_a2" 15
check "SIGTERM exits 0" '[ "$code" = 0 ]'
check "its actors are released (nobody, generation kept)" '[ "$(owner t/c/x)" = "nobody - 2" ] && [ "$(owner t/c/y)" = "nobody - 2" ]'
check "then nodes/a is released" 'W cluster status --json 2>/dev/null | grep -A1 "\"node\": \"a\"" >/dev/null; W bucket get nodes/a 2>/dev/null | grep -q "^lease released"'

finish
