#!/usr/bin/env bash
# An actor's history, point-in-time restore and fork with real `wasmkeep serve` processes on
# 127.0.0.1 (docs/storage.md, "History and point-in-time restore"): three nodes, 40 writes to
# one kv actor with its holder killed -9 halfway; the history lists every write; a restore to
# a time in the middle (through a node that does not hold it: forwarded to the holder) makes
# every key exactly as it was then, and a write acknowledged after the restore stays; a fork
# at a batch makes a new actor with that batch's keys and leaves the source alone; a fork onto
# an existing name is refused; the restore is undone with the batch its answer names; bad
# points (future, before the window, a batch not on the chain, an unknown actor) are refused
# with one clear error and nothing changed; the same over the HTTP API with a tenant's token,
# another tenant's refused.
#
#   history_test.sh WASMKEEP_BINARY BACKEND [ACTORS_DIR]      BACKEND: file | s3
set -u
wk=${1:?usage: history_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
backend=${2:?usage: history_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
# ACTORS_DIR defaults to the build's (scripts/check-proofs.sh passes two arguments).
actors=${3:-$(cd "$(dirname "$wk")/../.." && pwd)/actors}
prefix=history
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

echo "== history, restore and fork on $backend"
TOKEN=$(tenant_add acme)
GLOBEX=$(tenant_add globex)
OP=$(operator_add ops)
W deploy --tenant acme --class kv "$actors/kv.wasm" >/dev/null 2>&1
W deploy --tenant acme --class kv2 "$actors/kv.wasm" >/dev/null 2>&1

owner_of() { W bucket get "owners/acme/kv/$1" 2>/dev/null | awk '/^owner /{print $2}'; }
node_index() { case "$1" in a) echo 1 ;; b) echo 2 ;; c) echo 3 ;; esac; }
now_ms() { python3 -c 'import time; print(int(time.time()*1000))'; }
# value INDEX NAME KEY: the kv actor's value, or "404".
value() {
  local r
  r=$(until_status 15 "$1" GET "acme/kv/$2/$3")
  [ "${r%% *}" = 200 ] && echo "${r#* }" || echo "${r%% *}"
}
# until_status SECONDS INDEX METHOD PATH: retries a 503 (the actor moving) until another answer.
until_status() {
  local deadline=$((SECONDS + $1)) r
  shift
  while [ $SECONDS -lt $deadline ]; do
    r=$(req "$@")
    [ "${r%% *}" != 503 ] && [ "${r%% *}" != 000 ] && { echo "$r"; return 0; }
    sleep 0.2
  done
  echo "$r"
}
# all_keys INDEX NAME N EXPECT_UPTO: keys k1..kN are v1..vEXPECT_UPTO and 404 after.
all_keys() {
  local idx=$1 name=$2 n=$3 upto=$4 i v bad=0
  for i in $(seq 1 "$n"); do
    v=$(value "$idx" "$name" "k$i")
    if [ "$i" -le "$upto" ]; then [ "$v" = "v$i" ] || { bad=1; echo "     ($name k$i is '$v', expected v$i)"; }
    else [ "$v" = 404 ] || { bad=1; echo "     ($name k$i is '$v', expected 404)"; }; fi
  done
  return $bad
}

start a a 1
start b b 2
start c c 3
wait_ready 1 30 && wait_ready 2 30 && wait_ready 3 30
check "three nodes ready" 'wait_ready 1 1 && wait_ready 2 1 && wait_ready 3 1'

# 40 writes, each its own batch, through node a; the holder killed -9 after the 20th (the
# writes go on under a new hold on another node: two holds in the history).
acked=0
alive=1
for i in $(seq 1 40); do
  until_ok 30 "$alive" PUT "acme/kv/h/k$i" "$TOKEN" --data-binary "v$i" >/dev/null && acked=$((acked + 1))
  if [ "$i" = 10 ]; then sleep 1.2; t_mid=$(now_ms); sleep 1.2; fi
  if [ "$i" = 20 ]; then
    holder=$(owner_of h)
    hi=$(node_index "$holder")
    eval "stop \$pid_$holder"
    # Through a live node from now on: it answers once the killed holder's lease is fenced.
    alive=1
    [ "$hi" = 1 ] && alive=2
  fi
done
check "40 writes acknowledged (the holder ${holder:-?} killed -9 after the 20th)" '[ "$acked" = 40 ]'

hist=$(W actor history acme/kv/h --json 2>"$work/hist.err")
count=$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["batches"]))' "$hist" 2>/dev/null)
gens=$(python3 -c 'import json,sys; print(len({b["generation"] for b in json.loads(sys.argv[1])["batches"]}))' "$hist" 2>/dev/null)
check "actor history lists the 40 writes (got $count) over 2 holds or more (got $gens)" \
  '[ "$count" = 40 ] && [ "${gens:-0}" -ge 2 ]'
b20=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["batches"][19]["batch"])' "$hist" 2>/dev/null)

# Restore to the middle, through the node that does not hold it.
# The live node that does not hold it (the restore is forwarded to the holder).
holder=$(owner_of h)
other=""
for i in 1 2 3; do [ "$i" != "$hi" ] && [ "$i" != "$(node_index "$holder")" ] && other=$i; done
[ -n "$other" ] || other=$alive
out=$(W actor restore acme/kv/h --at "$t_mid" --token "$OP" --node "127.0.0.1:$(port_of "$other")" --json 2>"$work/restore.err")
rc=$?
undo=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("undo",""))' "$out" 2>/dev/null)
check "actor restore --at the middle: exit 0, an undo batch named ($undo)" '[ "$rc" = 0 ] && [ -n "$undo" ]'
check "after the restore every key is as it was then: k1..k10, no k11..k40" 'all_keys "$alive" h 40 10'
until_ok 30 "$alive" PUT acme/kv/h/after "$TOKEN" --data-binary kept >/dev/null
check "a write acknowledged after the restore stays" '[ "$(value 3 h after)" = kept ]'
h2=$(W actor history acme/kv/h --json --limit 3 2>/dev/null)
check "the restore is a batch of a new hold in the history" \
  'python3 -c "import json,sys; b=json.loads(sys.argv[1])[\"batches\"]; sys.exit(0 if b[-2][\"delete_all\"] else 1)" "$h2"'

# Fork at batch 20 into kv2/copy: k1..k20; the source untouched.
out=$(W actor fork acme/kv/h --batch "$b20" --to kv2/copy --token "$TOKEN" --node "127.0.0.1:$(port_of "$alive")" 2>&1)
rc=$?
check "actor fork --batch $b20 --to kv2/copy with the tenant's token: exit 0" '[ "$rc" = 0 ]'
fork_ok=0
for i in 1 20 21; do
  v=$(until_status 15 "$alive" GET "acme/kv2/copy/k$i")
  if [ "$i" -le 20 ]; then [ "$v" = "200 v$i" ] || fork_ok=1; else [ "${v%% *}" = 404 ] || fork_ok=1; fi
done
check "the fork holds the keys of batch 20 (k1, k20; no k21)" '[ "$fork_ok" = 0 ]'
check "the source still has its restored state" '[ "$(value "$alive" h k10)" = v10 ] && [ "$(value "$alive" h k11)" = 404 ]'
W actor fork acme/kv/h --batch "$b20" --to kv2/copy --token "$OP" --node "127.0.0.1:$(port_of "$alive")" >/dev/null 2>"$work/fork2.err"
rc=$?
check "a fork onto an existing actor: exit 3 (409), naming it" '[ "$rc" = 3 ] && grep -q "exists" "$work/fork2.err"'

# Undo the restore.
W actor restore acme/kv/h --batch "$undo" --token "$OP" --node "127.0.0.1:$(port_of "$alive")" >/dev/null 2>"$work/undo.err"
rc=$?
check "restoring to the undo batch: exit 0" '[ "$rc" = 0 ]'
check "after the undo k1..k40 are back (and 'after' is gone with the restore it followed)" \
  'all_keys "$alive" h 40 40 && [ "$(value "$alive" h after)" = 404 ]'

# Bad points: one clear error each, nothing changed.
before=$(W bucket ls wal/acme/kv/h/ 2>/dev/null | wc -l)
W actor restore acme/kv/h --at "$(( $(now_ms) + 3600000 ))" --token "$OP" --node "127.0.0.1:$(port_of "$alive")" 2>"$work/bad1.err"
rc=$?
check "a future time: exit 2, 'future'" '[ "$rc" = 2 ] && grep -q future "$work/bad1.err"'
W actor restore acme/kv/h --at "$(( $(now_ms) - 8 * 86400000 ))" --token "$OP" --node "127.0.0.1:$(port_of "$alive")" 2>"$work/bad2.err"
rc=$?
check "a time before the 7-day window: exit 2, 'retention window'" '[ "$rc" = 2 ] && grep -q "retention window" "$work/bad2.err"'
W actor restore acme/kv/h --batch 99-1.1 --token "$OP" --node "127.0.0.1:$(port_of "$alive")" 2>"$work/bad3.err"
rc=$?
check "a batch not on the chain: exit 2" '[ "$rc" = 2 ]'
W actor restore acme/kv/nobody --at "$(now_ms)" --token "$OP" --node "127.0.0.1:$(port_of "$alive")" 2>"$work/bad4.err"
rc=$?
check "an unknown actor: exit 4" '[ "$rc" = 4 ]'
W actor restore acme/kv/h --at yesterday --token "$OP" --node "127.0.0.1:$(port_of "$alive")" 2>"$work/bad5.err"
rc=$?
check "a time that is no time: exit 2, naming RFC 3339" '[ "$rc" = 2 ] && grep -q "RFC 3339" "$work/bad5.err"'
check "nothing was written by the refused restores" '[ "$(W bucket ls wal/acme/kv/h/ 2>/dev/null | wc -l)" = "$before" ]'

# The HTTP API: a tenant's token reads its own actor's history and state; another's is refused.
api() { curl -s -m 30 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $2" "http://127.0.0.1:$(port_of "$alive")$1"; }
check "GET .../history with the tenant's token: 200" '[ "$(api /v1/classes/acme/kv/actors/h/history "$TOKEN")" = 200 ]'
check "GET .../history/state?batch= with the tenant's token: 200" \
  '[ "$(api "/v1/classes/acme/kv/actors/h/history/state?batch=$b20" "$TOKEN")" = 200 ]'
check "another tenant's token: 403" '[ "$(api /v1/classes/acme/kv/actors/h/history "$GLOBEX")" = 403 ]'
state=$(curl -s -m 30 -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$(port_of "$alive")/v1/classes/acme/kv/actors/h/history/state?batch=$b20")
check "the state at batch 20 over the API has 20 keys" \
  'python3 -c "import json,sys; sys.exit(0 if json.loads(sys.argv[1])[\"keys_total\"] == 20 else 1)" "$state"'

finish
