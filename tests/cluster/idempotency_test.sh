#!/usr/bin/env bash
# Idempotent requests with real `wasmkeep serve` processes (docs/http-api.md, "Idempotent
# requests"): a key runs its request once and every retry, on any node, gets the first
# answer, across kill -9 of the actor's holder; 400 for a bad key, 422 for a reused one;
# `wasmkeep call --retry`; then keyed increments from 8 clients through three nodes, retried
# until answered while the nodes are killed with -9 and restarted throughout: per actor the
# answers are 1..n exactly and the value is n (tests/cluster/idempotent.py).
#
#   idempotency_test.sh WASMKEEP_BINARY BACKEND ACTORS_DIR      BACKEND: file | s3
#
# Prints one line per check and closes with "N passed, N failed".
set -u
wk=${1:?usage: idempotency_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
backend=${2:?usage: idempotency_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
actors=${3:-$(dirname "$wk")/../../actors}  # default: the binary's build directory's actors/
prefix=idem
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

echo "== idempotent requests on $backend"
TOKEN=$(tenant_add acme)
W deploy --tenant acme --class counter "$actors/counter.wasm" >/dev/null 2>&1
for i in 1 2 3; do start "n$i" "n$i" "$i"; done
check "three nodes become ready" 'wait_ready 1 20 && wait_ready 2 20 && wait_ready 3 20'

keyed() {  # INDEX KEY [curl args...]: a keyed increment of acme/counter/one through node INDEX
  local idx=$1 key=$2
  shift 2
  req "$idx" POST acme/counter/one/increment "$TOKEN" -H "Idempotency-Key: $key" "$@"
}
check "a keyed increment runs" '[ "$(keyed 1 "\"a1\"")" = "200 1" ]'
check "its retry through another node gets the first answer" '[ "$(keyed 2 "\"a1\"")" = "200 1" ]'
replay=$(curl -s -D - -o /dev/null -X POST -H "Authorization: Bearer $TOKEN" -H 'Idempotency-Key: "a1"' \
  "http://127.0.0.1:$(port_of 3)/v1/actors/acme/counter/one/increment" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-wasmkeep-idempotent-replay"{print $2}')
check "a replayed answer says so (X-Wasmkeep-Idempotent-Replay: 1)" '[ "$replay" = 1 ]'
check "another key runs again" '[ "$(keyed 1 "\"a2\"")" = "200 2" ]'
check "a key reused with another body: 422" '[ "$(keyed 1 "\"a1\"" --data-binary x | cut -d" " -f1)" = 422 ]'
check "a malformed key: 400 naming the header" 'keyed 1 "two words" | grep -q "^400 .*Idempotency-Key"'

# The holder killed with -9 right after answering: the retry, served by a new holder
# restored from the bucket, gets the first answer.
owner=$(W bucket get owners/acme/counter/one 2>/dev/null | awk '/^owner /{print $2}')
r1=$(keyed 1 "\"after-kill\"")
case "$owner" in n1) stop "$pid_n1"; other=2 ;; n2) stop "$pid_n2"; other=3 ;; *) stop "$pid_n3"; other=1 ;; esac
r2=""
deadline=$((SECONDS + 30))
while [ $SECONDS -lt $deadline ]; do
  r2=$(keyed "$other" "\"after-kill\"")
  case "$r2" in 2*) break ;; esac
  sleep 0.2
done
check "a retry after the holder's kill -9 gets the first answer ($r1 / $r2)" '[ "$r1" = "200 3" ] && [ "$r2" = "200 3" ]'
case "$owner" in n1) start n1b n1 1 ;; n2) start n2b n2 2 ;; *) start n3b n3 3 ;; esac
check "the killed node comes back" 'wait_ready 1 30 && wait_ready 2 30 && wait_ready 3 30'

call_out=$("$wk" --config "$work/fast.toml" --bucket "$bucket" call acme/counter/one/increment -X POST \
  --token "$TOKEN" --node "127.0.0.1:$(port_of 1)" --retry 2>"$work/call.err")
check "wasmkeep call --retry makes a key up and prints it" '[ "$call_out" = 4 ] && grep -q "Idempotency-Key [0-9a-f]\{32\}" "$work/call.err"'
again=$("$wk" --config "$work/fast.toml" --bucket "$bucket" call acme/counter/one/increment -X POST \
  --token "$TOKEN" --node "127.0.0.1:$(port_of 2)" --idempotency-key "$(awk '/Idempotency-Key/{print $3}' "$work/call.err")" 2>/dev/null)
check "wasmkeep call --idempotency-key replays it" '[ "$again" = 4 ]'

# ---- keyed increments under kill -9 of the nodes
nodes="127.0.0.1:$(port_of 1),127.0.0.1:$(port_of 2),127.0.0.1:$(port_of 3)"
python3 "$(dirname "$0")/idempotent.py" run --nodes "$nodes" --token "$TOKEN" --actors 20 --increments 100000 \
  --seconds 20 --workers 8 --out "$work/idem.json" >"$work/idem.out" 2>&1 &
load=$!
kills=0
gen=0
declare -A live=([1]="$(eval echo "\${pid_n1b:-$pid_n1}")" [2]="$(eval echo "\${pid_n2b:-$pid_n2}")" [3]="$(eval echo "\${pid_n3b:-$pid_n3}")")
while kill -0 "$load" 2>/dev/null; do
  sleep 3
  kill -0 "$load" 2>/dev/null || break
  victim=$(( (kills % 3) + 1 ))
  gen=$((gen + 1))
  stop "${live[$victim]}"
  kills=$((kills + 1))
  sleep 1
  start "n${victim}k$gen" "n$victim" "$victim"
  eval "live[$victim]=\$pid_n${victim}k$gen"
done
wait "$load"
load_rc=$?
echo "     $(cat "$work/idem.out") ($kills kills)"
check "keyed increments under kill -9: every answer once, every value exact" '[ "$load_rc" = 0 ]'
check "the nodes were killed during the load" '[ "$kills" -ge 3 ]'
finish
