#!/usr/bin/env bash
# End-to-end tests of serving with real `wasmkeep serve` processes on 127.0.0.1:
# tenants, deploy, the HTTP API and its bad-input answers, durability across kill -9, and
# three nodes on one bucket (one owner per actor, forwarding, failover).
#
#   serve_test.sh WASMKEEP_BINARY BACKEND ACTORS_DIR      BACKEND: file | s3
#
# ACTORS_DIR holds the compiled examples (build/<preset>/actors). Prints one line per check
# and closes with "N passed, N failed".
set -u
wk=${1:?usage: serve_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
backend=${2:?usage: serve_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
actors=${3:?usage: serve_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
prefix=serve
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

# Small limits so the bad-input cases are quick to reach.
cat >>"$work/fast.toml" <<TOML
[actors]
workers = 2
max_event_cpu_ms = 300
max_request_bytes = 65536
max_queued_events = 1
idle_hibernate_ms = 2500
TOML

echo "== serving on $backend"
TOKEN=$(tenant_add acme)
check "tenant add prints a token as its last line" '[[ "$TOKEN" == wk.acme.* ]]'
OTHER=$(tenant_add other)
for c in counter kv chat ratelimit; do W deploy --tenant acme --class "$c" "$actors/$c.wasm" >/dev/null 2>&1; done
W deploy --tenant acme --class bad "$actors/bad_actors.wasm" >/dev/null 2>&1
check "deploy stores the examples" '[ "$(W class list --tenant acme 2>/dev/null | grep -c "^acme ")" = 5 ]'

start n1 n1 1
check "the node becomes ready" 'wait_ready 1 20'

# ---- durability across kill -9
last=""
for i in $(seq 1 100); do last=$(req 1 POST acme/counter/c1/increment); done
check "100 increments answer 100" '[ "$last" = "200 100" ]'
stop "$pid_n1"
start n1b n1 1
killed=$SECONDS
r=$(until_ok 30 1 POST acme/counter/c1/increment)
check "after kill -9 and a restart, the next increment answers 101" '[ "$r" = "200 101" ]'
echo "     (served again $((SECONDS - killed)) s after the restart: the start check waits ttl + grace)"

# ---- each example through the HTTP API
check "kv: PUT then GET" '[ "$(req 1 PUT acme/kv/k1/greeting "$TOKEN" --data-binary hello | cut -d" " -f1)" = 200 ] && [ "$(req 1 GET acme/kv/k1/greeting)" = "200 hello" ]'
check "kv: a missing key is the actor's own 404" '[ "$(status 1 GET acme/kv/k1/nothing)" = 404 ]'
check "chat: two posts are numbered 1 and 2" '[ "$(req 1 POST acme/chat/room/messages "$TOKEN" --data-binary hi)" = "200 1" ] && [ "$(req 1 POST acme/chat/room/messages "$TOKEN" --data-binary there)" = "200 2" ]'
check "chat: reading since 1 gives the second" '[ "$(req 1 GET "acme/chat/room/messages?since=1")" = "$(printf "200 2\tthere")" ]'
check "ratelimit: a take answers the tokens left" '[ "$(req 1 POST acme/ratelimit/client1/take)" = "200 9" ]'

# ---- bad input, each answered, the node stays up
check "no token: 401" '[ "$(status 1 GET acme/counter/c1 "")" = 401 ]'
check "a malformed token: 401" '[ "$(status 1 GET acme/counter/c1 not-a-token)" = 401 ]'
check "another tenant's token: 403" '[ "$(status 1 GET acme/counter/c1 "$OTHER")" = 403 ]'
check "an unknown class: 404" '[ "$(status 1 GET acme/nosuch/x)" = 404 ]'
check "an invalid actor name: 400" '[ "$(status 1 GET "acme/counter/a%2Fb")" = 400 ] && [ "$(status 1 GET acme/Counter/x)" = 400 ]'
head -c 70000 /dev/zero >"$work/big"
check "a body over actors.max_request_bytes: 413" '[ "$(status 1 POST acme/kv/k1/big "$TOKEN" --data-binary @"$work/big")" = 413 ]'
check "an actor trap: 500 naming it" 'r=$(req 1 GET acme/bad/b1/trap); [ "${r%% *}" = 500 ] && [[ "$r" == *unreachable* || "$r" == *trap* ]]'
check "an actor over its CPU time: 500 naming the limit" 'r=$(req 1 GET acme/bad/b2/loop); [ "${r%% *}" = 500 ] && [[ "$r" == *max_event_cpu_ms* ]]'
for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code}\n' -D "$work/h$i" -H "Authorization: Bearer $TOKEN" \
  "http://127.0.0.1:$(port_of 1)/v1/actors/acme/bad/b3/loop" >"$work/q$i" & done
wait_for_jobs() { for j in $(jobs -p); do case " ${pids[*]} " in *" $j "*) ;; *) wait "$j" ;; esac; done; }
wait_for_jobs
check "the actor's queue full: 503 with Retry-After" 'cat "$work"/q* | grep -q 503 && grep -qi "^retry-after" "$work"/h*'
check "the node is still up after all that" '[ "$(req 1 GET acme/counter/c1)" = "200 101" ]'

# ---- forged forwarding is refused
r=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Wasmkeep-Forwarded-By: evil" -H "X-Wasmkeep-Tenant: acme" \
  -H "X-Wasmkeep-Hops: 1" -H "X-Wasmkeep-Timestamp: $(date +%s%3N)" -H "X-Wasmkeep-Signature: 00" \
  "http://127.0.0.1:$(port_of 1)/v1/actors/acme/counter/c1")
check "a forwarded request with a bad signature: 401" '[ "$r" = 401 ]'

# ---- a new version of a class reaches its actors, resident ones included, within a class
# check and one event of the class (docs/tenants.md, "Deploying"): an event of a resident
# actor that finds the node's copy of the rollout older reads it in the background, and
# the actor switches before its next event (or, idle meanwhile, starts on it next time).
W deploy --tenant acme --class swap "$actors/kv.wasm" >/dev/null 2>&1
check "swap (kv): PUT /x" '[ "$(status 1 PUT acme/swap/s1/x "$TOKEN" --data-binary v1)" = 200 ]'
check "swap (kv): GET /x answers v1" '[ "$(req 1 GET acme/swap/s1/x)" = "200 v1" ]'
W deploy --tenant acme --class swap "$actors/counter.wasm" >/dev/null 2>&1
deployed_ms=$(date +%s%3N)
swapped() { swap_answer=$(req 1 GET acme/swap/s1/x); [ "$swap_answer" != "200 v1" ]; }
check "the redeploy reaches the actor within a class check and an event" 'wait_for 10 swapped'
echo "     (its first answer from the new version, $swap_answer, $(( $(date +%s%3N) - deployed_ms )) ms after the deploy returned)"
check "it runs the new version (counter)" '[ "$(req 1 POST acme/swap/s1/increment)" = "200 1" ]'

# ---- draining: 503 for actors not resident here
W cluster drain n1 --wait 10 >/dev/null 2>&1
r=$(curl -s -o /dev/null -D - -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$(port_of 1)/v1/actors/acme/counter/fresh")
check "a draining node answers 503 with Retry-After" '[[ "$r" == *503 ]] && grep -qi "retry-after" <<<"$r"'
check "an actor still in memory whose hold the drain released does not answer from memory: 503" '[ "$(status 1 GET acme/counter/c1)" = 503 ]'
W cluster undrain n1 >/dev/null 2>&1
check "undrained, it is acquired again with its state" '[ "$(until_ok 20 1 GET acme/counter/c1)" = "200 101" ]' 
stop "$pid_n1b"

# ---- the bucket unreachable: 503, not ready, still up; then back
start n2 n2 2 WASMKEEP_DEBUG_FAULTS="outage_file=$work/down"
check "node n2 becomes ready" 'wait_ready 2 20'
touch "$work/down"
sleep 3
check "bucket unreachable: a new actor is 503" '[ "$(status 2 POST acme/counter/new/increment)" = 503 ]'
check "bucket unreachable: not ready" '! curl -sf "127.0.0.1:$(port_of 2)/readyz" >/dev/null'
check "bucket unreachable: the process stays up" 'kill -0 "$pid_n2"'
rm -f "$work/down"
check "the bucket back: ready again and serving" 'wait_ready 2 20 && [ "$(until_ok 20 2 POST acme/counter/new/increment)" = "200 1" ]'
stop "$pid_n2"

# ---- three nodes on one bucket
start a a 3
start b b 4
start c c 5
check "three nodes ready" 'wait_ready 3 20 && wait_ready 4 20 && wait_ready 5 20'
for n in a b c; do kill -0 "$(eval echo "\$pid_$n")" 2>/dev/null || { echo "     (node $n exited; its log:)"; tail -5 "$work/$n.log"; }; done
check "requests landing on any node reach one owner: 15 increments count 1..15" 'increments_in_turn 5 3 4 5'
owner=$(W bucket get owners/acme/counter/shared 2>/dev/null | awk '/^owner /{print $2}')
forwarded() { local v; v=$(metric "$1" 'wasmkeep_api_requests_total{route="forwarded"}' | cut -d. -f1); echo "${v:-0}"; }
fwd=$(( $(forwarded 3) + $(forwarded 4) + $(forwarded 5) ))
check "the other two nodes forwarded to the owner ($owner): 10 forwarded" '[ "$fwd" = 10 ]'
case "$owner" in a) opid=$pid_a; other=4 ;; b) opid=$pid_b; other=5 ;; c) opid=$pid_c; other=3 ;; *) opid=""; other=3 ;; esac
stop "$opid"
t0=$(date +%s%N)
r=$(until_ok 40 "$other" POST acme/counter/shared/increment)
t1=$(date +%s%N)
echo "     (failover: the actor answered again through another node $(( (t1 - t0) / 1000000 )) ms after kill -9 of its owner; ttl 2 s + grace 1 s)"
check "after kill -9 of the owner another node serves it with every acknowledged increment: 16" '[ "$r" = "200 16" ]'

finish
