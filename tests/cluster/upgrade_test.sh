#!/usr/bin/env bash
# The upgrade from per-actor leases (ADR 0020 §6 and its Verification case) with real
# `wasmkeep serve` processes: "the upgrade seeds generations above every existing segment,
# marks leases/ for found and new actors, and refuses a live old record that names the
# starting node's own id". There is no older binary: the bucket gets the old-format objects
# the ADR describes (a `wasmkeep-node 1` heartbeat, `wasmkeep-lease 1` per-actor leases,
# segments and snapshots of old generations) written by `wasmkeep bucket put`. Nodes hold
# actors through the test-only WASMKEEP_DEBUG_ACQUIRE list (every second until held).
# Also: the start guard refuses a start while an old heartbeat is being rewritten, and on
# s3 the bucket check finds RGW's refusal of a quoted If-Match.
#
#   upgrade_test.sh WASMKEEP_BINARY BACKEND      BACKEND: file | s3
#
# Prints one line per check and closes with "N passed, N failed".
set -u
wk=${1:?usage: upgrade_test.sh WASMKEEP_BINARY file|s3}
backend=${2:?usage: upgrade_test.sh WASMKEEP_BINARY file|s3}
prefix=upgrade
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

now_ms() { date +%s%3N; }
put() { printf '%b' "$2" >"$work/obj"; W bucket put "$1" "$work/obj" >/dev/null 2>&1; }
# owner KEY: "node generation", or "absent"
owner() {
  local body
  body=$(W bucket get "owners/$1" 2>/dev/null) || { echo absent; return; }
  awk '/^owner /{n=$2} /^generation /{g=$2} END{print n, g}' <<<"$body"
}
header_of() { W bucket get "$1" 2>/dev/null | head -1; }
seed_of() { W bucket get "$1" 2>/dev/null | awk '/^seed /{print $2}'; }
key() { printf '%s%020d-%020d' "$1" "$2" "$3"; }

echo "== the upgrade from per-actor leases on $backend"
# The bucket as the per-actor-lease version left it. With the test timings (period 0.6 s,
# ttl 2 s, grace 1 s, skew 0.2 s) an old heartbeat is fresh for 3 x 0.6 + 2 + 1 + 0.2 = 5 s.
t0=$(now_ms)
# found: an old actor with segments up to generation 7, a snapshot at 9, its old lease
# (generation 5) long expired.
put "$(key wal/t/c/found/ 3 0)" "x"; put "$(key wal/t/c/found/ 7 0)" "x"; put "$(key wal/t/c/found/ 7 1)" "x"
put "$(key snapshot/t/c/found/ 9 0)" "x"
put leases/t/c/found "wasmkeep-lease 1\nnode old-1\ngeneration 5\nexpires_at_ms $((t0 - 60000))\n"
# new: nothing at all. Last, the heartbeat of an old node that stopped just now, and
# mine: an old lease naming node a itself, the id the new node starts under, still live for
# 20 s (then grace 1 s: time for a loaded machine to see it refused and untouched first): an
# old record has no instance, so it is refused whoever it names.
t1=$(now_ms)
put nodes/old-1 "wasmkeep-node 1\nnode old-1\nwritten_at_ms $t1\n"
mine_expires=$(($(now_ms) + 20000))
put leases/t/c/mine "wasmkeep-lease 1\nnode a\ngeneration 3\nexpires_at_ms $mine_expires\n"

start_acquiring a a 1 "t/c/found,t/c/mine,t/c/new"
check "the new node becomes ready" 'wait_ready 1 20'
valid_ms=$(log_ms "$work/a.log" "node lease valid")
check "the start guard held its first write while the old heartbeat was fresh (5 s after it)" \
  '[ -n "$valid_ms" ] && [ "$valid_ms" -ge $((t1 + 4900)) ] && grep -q "start guard: waiting" "$work/a.log"'
check "a live old lease naming this node's own id is refused: no record" \
  'wait_for 5 "grep -q \"actor refused: an old version.*t/c/mine\" \"$work/a.log\"" && [ "$(owner t/c/mine)" = absent ]'
check "and the old lease is left as it was" '[ "$(header_of leases/t/c/mine)" = "wasmkeep-lease 1" ]'
check "the found actor is acquired above every generation in its log (snapshot 9: generation 10)" \
  'wait_for 10 "[ \"\$(owner t/c/found)\" = \"a 10\" ]"'
check "the refusals are counted" '[ "$(metric 1 wasmkeep_old_lease_refusals_total)" -ge 1 ] 2>/dev/null'
check "its old lease is replaced by a wasmkeep-lease 2 marker seeded at 9" \
  '[ "$(header_of leases/t/c/found)" = "wasmkeep-lease 2" ] && [ "$(seed_of leases/t/c/found)" = 9 ]'
check "a new actor starts at generation 1 and is marked too" \
  'wait_for 10 "[ \"\$(owner t/c/new)\" = \"a 1\" ]" && [ "$(header_of leases/t/c/new)" = "wasmkeep-lease 2" ] && [ "$(seed_of leases/t/c/new)" = 0 ]'
check "once expires_at + grace has passed, it is taken at the old generation + 1" \
  'wait_for 30 "[ \"\$(owner t/c/mine)\" = \"a 4\" ]" && [ "$(log_ms "$work/a.log" "debug hold acquired actor=t/c/mine")" -ge $((mine_expires + 1000)) ]'
check "and marked" '[ "$(header_of leases/t/c/mine)" = "wasmkeep-lease 2" ] && [ "$(seed_of leases/t/c/mine)" = 3 ]'
check "three markers written" '[ "$(metric 1 wasmkeep_upgrade_markers_total)" = 3 ]'
stop "$pid_a"

# An old node still running: its heartbeat is rewritten (every 0.5 s, as long as the new
# node runs, for at most 20 s: a loaded machine may take seconds to start the node) while a
# new node's guard waits. The new node refuses to start (status 9) and writes no lease.
put nodes/old-2 "wasmkeep-node 2\nwritten_at_ms $(now_ms)\n"
start_acquiring b b 2 ""
deadline=$((SECONDS + 20))
while kill -0 "$pid_b" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
  sleep 0.5; put nodes/old-2 "wasmkeep-node 2\nwritten_at_ms $(now_ms)\n"
done
wait_exit "$pid_b" 5
check "a new node refuses to start while an old version runs (exit 9; got $code)" '[ "$code" = 9 ]' ||
  tail -n 5 "$work/b.log" | sed 's/^/     b.log: /'
check "saying why" 'grep -q "start guard: .*nodes/old-2 is being rewritten in an old format" "$work/b.log"'
check "and wrote no lease" '! W bucket get nodes/b >/dev/null 2>&1'

if [ "$backend" = s3 ]; then
  # The bucket check: RGW fails every quoted If-Match; a node told to quote exits at once
  # (status 2), naming the setting, before writing anything the protocol relies on.
  quoted="${bucket/&if_match_quoted=false/}"
  out=$("$wk" --config "$work/fast.toml" --bucket "$quoted" serve --node-id q --listen "127.0.0.1:$(port_of 3)" 2>&1); code=$?
  check "s3: a bucket refusing quoted If-Match is found at start (exit 2; got $code)" '[ "$code" = 2 ]' ||
    tail -n 5 <<<"$out" | sed 's/^/     output: /'
  check "s3: the message names the setting" 'grep -q "if_match_quoted=false" <<<"$out"'
  check "s3: and no lease was written" '! W bucket get nodes/q >/dev/null 2>&1'
fi
finish
