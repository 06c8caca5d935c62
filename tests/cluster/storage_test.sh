#!/usr/bin/env bash
# Cluster tests of durable actor storage with real `wasmkeep serve` processes on 127.0.0.1
# (docs/storage.md, "What is guaranteed"; invariants 3 and 4: no acknowledged write is lost,
# nothing is applied twice, every restore sees the acknowledged history in order). To know
# exactly which writes were acknowledged under these faults, nodes write through the
# test-only WASMKEEP_DEBUG_WRITER hook (src/cli/testing/debug_writer.h): each write appends an id to the key `log` and puts `e/<id>`,
# and `acked <id>` is printed on stdout only once the replica's output gate says Ok.
#
#   a. kill -9 the owner during a burst of writes: the next owner (another node, once the
#      killed one is fenced) restores every acknowledged id, once each, in order.
#   b. a hold whose lease ends while a segment upload is in flight gets Late and
#      acknowledges nothing of that segment; the next hold restores every acknowledged id.
#   c. restore after 1 snapshot + 50 segments (garbage collection having deleted the
#      segments the snapshot covers) is complete, and its reads overlap.
#
#   storage_test.sh WASMKEEP_BINARY BACKEND      BACKEND: file | s3
#
# Prints one line per check and closes with "N passed, N failed".
set -u
wk=${1:?usage: storage_test.sh WASMKEEP_BINARY file|s3}
backend=${2:?usage: storage_test.sh WASMKEEP_BINARY file|sqlite|s3}
prefix=storage
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
# Part c counts what garbage collection leaves: no history kept (docs/storage.md, "History
# and point-in-time restore").
printf '[storage]\nretention_ms = 0\n' >>"$work/fast.toml"

state_of() { W cluster status --json 2>/dev/null | python3 -c "import json,sys; print(next((n['state'] for n in json.load(sys.stdin) if n['node']=='$1'),'absent'))"; }
acked() { grep -c '^acked ' "$work/$1.out"; }
# restored NAME ACTOR GENERATION: has NAME logged the restore of ACTOR at GENERATION?
restored() { grep -s 'debug writer restored' "$work/$1.log" | grep -q "actor=$2 generation=$3 "; }
# field NAME ACTOR GENERATION FIELD: a field of that restore line (values here have no spaces).
field() {
  grep 'debug writer restored' "$work/$1.log" | grep "actor=$2 generation=$3 " | head -1 | tr ' ' '\n' |
    sed -n "s/^$4=//p"
}
count_keys() { W bucket ls "$1" 2>/dev/null | grep -c .; }
# verify LOG_FILE OUT_FILE ID_PREFIX: the restored log (comma-separated ids in LOG_FILE)
# has no duplicates; every id acked in OUT_FILE with ID_PREFIX is in it, once, in order;
# and the ids of that hold in the log are exactly ID_PREFIX1..m (commit order, no gap).
verify() {
  python3 - "$@" <<'PY'
import sys
log_file, out_file, prefix = sys.argv[1:4]
text = open(log_file).read().strip()
ids = [] if text in ("", "-") else text.split(",")
acked = [l.split()[1] for l in open(out_file) if l.startswith("acked ") and l.split()[1].startswith(prefix)]
errors = []
if not acked:
    errors.append(f"nothing of {prefix}* was acknowledged: nothing to check")
if len(set(ids)) != len(ids):
    errors.append("the restored log has duplicates")
pos = {x: i for i, x in enumerate(ids)}
missing = [a for a in acked if a not in pos]
if missing:
    errors.append(f"{len(missing)} acknowledged ids are missing, first {missing[0]}")
order = [pos[a] for a in acked if a in pos]
if order != sorted(order):
    errors.append("acknowledged ids are out of order")
mine = [int(x[len(prefix):]) for x in ids if x.startswith(prefix)]
if mine != list(range(1, len(mine) + 1)):
    errors.append(f"the ids of {prefix}* in the log are not 1..m in commit order")
print(f"     (restored {len(ids)} ids, {len(mine)} of {prefix}*; {len(acked)} acknowledged by {prefix}*)")
for e in errors:
    print("     " + e)
sys.exit(1 if errors else 0)
PY
}

echo "== durable storage on $backend"

# ---- a. kill -9 the owner during a burst; another node restores.
# (Part c's writer starts now too: both wait out the start check at once.)
A=t/c/a
C=t/c/c
start pa pa 1 WASMKEEP_DEBUG_WRITER=$A WASMKEEP_DEBUG_WRITER_OPTIONS=rate=300,inflight=16
start pc pc 3 WASMKEEP_DEBUG_WRITER=$C WASMKEEP_DEBUG_WRITER_OPTIONS=rate=1000,inflight=1,writes=110,snapshot_every=60
check "a: node pa restores the fresh actor $A at generation 1" 'wait_for 20 "restored pa $A 1"'
check "a: the fresh actor restores empty" '[ "$(field pa $A 1 log)" = - ] && [ "$(field pa $A 1 reads)" = 0 ]'
# A standby that keeps trying to take the actor (refused while pa holds it).
start qa qa 2 WASMKEEP_DEBUG_WRITER=$A WASMKEEP_DEBUG_WRITER_OPTIONS=rate=300,inflight=16
check "a: pa acknowledges writes (200 within 15 s)" 'wait_for 15 "[ \$(acked pa) -ge 200 ]"'
check "a: the standby node is ready and has not taken the actor" 'wait_ready 2 10 && ! grep -q "debug writer restored" "$work/qa.log"'
stop "$pid_pa"
killed_at=$SECONDS
acked_a=$(acked pa)
echo "     (pa killed after $acked_a acknowledged writes)"
check "a: the next owner qa restores at generation 2" 'wait_for 30 "restored qa $A 2"'
echo "     (failover: the restore logged $((SECONDS - killed_at)) s after the kill; ttl 2 s + grace 1 s)"
check "a: pa was fenced before" '[ "$(state_of pa)" = fenced ]'
field qa $A 2 log >"$work/a.log.ids"
check "a: every id pa acknowledged is restored, once, in order" 'verify "$work/a.log.ids" "$work/pa.out" pa.1.'
check "a: the e/ keys match the log" '[ "$(field qa $A 2 e_match)" = true ] && [ "$(field qa $A 2 log_unique)" = true ]'
check "a: nothing acked was lost: restored ids >= acked ids" '[ "$(field qa $A 2 log_ids)" -ge "$acked_a" ]'
check "a: qa goes on writing after the restore" 'wait_for 10 "grep -q \"^acked qa.2.\" \"$work/qa.out\""'
sleep 1
a_segments=$(metric 2 wasmkeep_replica_segments_total)
a_batches=$(metric 2 wasmkeep_replica_batches_total)
echo "     (qa: $a_batches batches in $a_segments acknowledged segments)"
check "a: commits are grouped (more batches than segments)" 'python3 -c "import sys; sys.exit(0 if float(\"$a_batches\") > 1.5 * float(\"$a_segments\") else 1)"'

# ---- c. restore after 1 snapshot + 50 segments, with the covered segments collected.
# pc wrote 110 writes one at a time: segments 1-1..1-110, a snapshot at 1-60 (every 60
# segments), garbage collection then deletes 1-1..1-60 and keeps the fence 1-0.
check "c: pc wrote 110 acknowledged writes" 'wait_for 30 "grep -q \"debug writer idle.*writes=110\" \"$work/pc.log\"" && [ "$(acked pc)" = 110 ]'
c_key=c/c
check "c: one snapshot, at 1-60" 'wait_for 10 "[ \$(count_keys snapshot/t/$c_key/) = 1 ]" && W bucket ls snapshot/t/$c_key/ | grep -q "00000000000000000001-00000000000000000060$"'
check "c: garbage collection leaves the fence and the 50 segments after the snapshot" 'wait_for 15 "[ \$(count_keys wal/t/$c_key/) = 51 ]"'
stop "$pid_pc"
start qc qc 4 WASMKEEP_DEBUG_WRITER=$C WASMKEEP_DEBUG_WRITER_OPTIONS=writes=1,parallelism=16
check "c: another node restores at generation 2" 'wait_for 30 "restored qc $C 2"'
echo "     (restore: reads=$(field qc $C 2 reads) base=$(field qc $C 2 base) run=$(field qc $C 2 run) max_reads_in_flight=$(field qc $C 2 max_reads_in_flight) took_ms=$(field qc $C 2 took_ms))"
check "c: the restore read the fence, the snapshot and the 50 segments (52 reads)" \
  '[ "$(field qc $C 2 reads)" = 52 ] && [ "$(field qc $C 2 base)" = 1-60 ] && [ "$(field qc $C 2 run)" = 50 ]'
check "c: its reads overlapped (more than 8 in flight at once)" '[ "$(field qc $C 2 max_reads_in_flight)" -gt 8 ]'
field qc $C 2 log >"$work/c.log.ids"
check "c: all 110 writes are restored, once, in order" 'verify "$work/c.log.ids" "$work/pc.out" pc.1. && [ "$(field qc $C 2 log_ids)" = 110 ]'
check "c: the e/ keys match the log" '[ "$(field qc $C 2 e_match)" = true ] && [ "$(field qc $C 2 e_keys)" = 110 ]'

stop "$pid_qa"
stop "$pid_qc"

# ---- b. the lease ends while an upload is in flight: Late, nothing of it acknowledged.
# Every wal/ put of pb waits 700 ms before it is sent; an outage of nodes/ (pb's heartbeat)
# makes pb's lease lapse within ttl - safety while one of those uploads is in flight.
B=t/c/b
start pb pb 5 WASMKEEP_DEBUG_WRITER=$B WASMKEEP_DEBUG_WRITER_OPTIONS=rate=100,inflight=1000 \
  WASMKEEP_DEBUG_FAULTS="slow_put_ms=700,slow_put_prefix=wal/,outage_file=$work/pb_down,outage_prefix=nodes/"
check "b: pb restores $B at generation 1" 'wait_for 20 "restored pb $B 1"'
check "b: pb acknowledges writes through slow uploads (30 within 10 s)" 'wait_for 10 "[ \$(acked pb) -ge 30 ]"'
touch "$work/pb_down"
check "b: the lease lapses and the replica fails" 'wait_for 10 "grep -q \"debug writer: replica failed\" \"$work/pb.log\""'
rm -f "$work/pb_down"
acked_b=$(grep -c '^acked pb\.1\.' "$work/pb.out")
check "b: the upload in flight came back Late" 'grep "debug writer: replica failed" "$work/pb.log" | grep -q "late=true" && grep -q "(Late)" "$work/pb.log"'
check "b: the Late upload is counted (wasmkeep_replica_late_uploads_total 1)" '[ "$(metric 5 wasmkeep_replica_late_uploads_total)" = 1 ]'
late_key=$(grep -o 'segment wal/[^ ]* was acknowledged after' "$work/pb.log" | head -1 | awk '{print $2}')
echo "     (Late segment: ${late_key:-none}; $acked_b writes of generation 1 acknowledged)"
W bucket get "$late_key" 2>/dev/null | grep -ao 'e/pb\.1\.[0-9]*' | sed 's#^e/##' | sort -u >"$work/late.ids"
check "b: the Late segment landed and holds writes" '[ -s "$work/late.ids" ]'
check "b: none of its writes was acknowledged" '! grep -qxFf "$work/late.ids" <(sed -n "s/^acked //p" "$work/pb.out")'
check "b: after the outage pb takes the actor again at generation 2" 'wait_for 30 "restored pb $B 2"'
field pb $B 2 log >"$work/b.log.ids"
check "b: every id acknowledged by generation 1 is restored, once, in order" 'verify "$work/b.log.ids" "$work/pb.out" pb.1.'
check "b: the e/ keys match the log" '[ "$(field pb $B 2 e_match)" = true ]'
check "b: pb acknowledges writes again at generation 2" 'wait_for 10 "grep -q \"^acked pb.2.\" \"$work/pb.out\""'
stop "$pid_pb"

finish
