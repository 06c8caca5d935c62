#!/usr/bin/env bash
# The AssemblyScript examples (examples/assemblyscript/, built by the wk_actors target into
# ACTORS_DIR/as_*.wasm) served end to end by real `wasmkeep serve` processes on 127.0.0.1:
# `wasmkeep actor check` accepts each module, `deploy` stores them, every example answers
# through the HTTP API, and their state survives kill -9 and a restart. (Routing between
# nodes does not depend on the module's language: serve_test.sh covers it.)
#
#   assemblyscript_test.sh WASMKEEP_BINARY BACKEND ACTORS_DIR      BACKEND: file | s3
#
# Prints one line per check and closes with "N passed, N failed". A missing module fails
# (it never skips): the build makes them whenever this test is registered.
set -u
wk=${1:?usage: assemblyscript_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
backend=${2:?usage: assemblyscript_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
actors=${3:?usage: assemblyscript_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
prefix=ascript
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

cat >>"$work/fast.toml" <<TOML
[actors]
workers = 2
TOML

echo "== AssemblyScript actors served on $backend"
examples="counter chat ratelimit docstore"
for c in $examples; do
  check "actor check accepts as_$c.wasm" '"$wk" actor check "$actors/as_$c.wasm" >"$work/check-$c.out" 2>&1'
done
check "the check lists only wasmkeep_v1 imports" '! grep -h "import" "$work"/check-*.out | grep -v wasmkeep_v1 | grep -q "wasi\|env\."'

TOKEN=$(tenant_add acme)
for c in $examples; do W deploy --tenant acme --class "$c" "$actors/as_$c.wasm" >/dev/null 2>&1; done
check "deploy stores the four modules" '[ "$(W class list --tenant acme 2>/dev/null | grep -c "^acme ")" = 4 ]'

start n1 n1 1
check "the node becomes ready" 'wait_ready 1 20'

# ---- each example through the HTTP API
last=""
for i in $(seq 1 5); do last=$(req 1 POST acme/counter/c1/increment); done
check "counter: 5 increments answer 5" '[ "$last" = "200 5" ]'
check "counter: another actor starts at 0" '[ "$(req 1 GET acme/counter/c2)" = "200 0" ]'
check "chat: two posts are numbered 1 and 2" '[ "$(req 1 POST acme/chat/room/messages "$TOKEN" --data-binary hi)" = "200 1" ] && [ "$(req 1 POST acme/chat/room/messages "$TOKEN" --data-binary there)" = "200 2" ]'
check "chat: reading since 1 gives the second" '[ "$(req 1 GET "acme/chat/room/messages?since=1")" = "$(printf "200 2\tthere")" ]'
# Capacity 3 and 1 token a second on the node's real clock: takes drain it faster than it
# refills (however slow this machine is, a take costs far less than a second), so a 429
# comes within a few takes.
check "ratelimit: /config sets capacity 3" '[ "$(req 1 POST "acme/ratelimit/key1/config?capacity=3&refill_per_sec=1")" = "200 capacity 3, refill 1/s" ]'
take_until_429() {
  local code
  for _ in $(seq 1 12); do
    code=$(curl -s -m 20 -D "$work/rl.h" -o /dev/null -w "%{http_code}" -X POST -H "Authorization: Bearer $TOKEN" \
      "http://127.0.0.1:$(port_of 1)/v1/actors/acme/ratelimit/key1/take")
    [ "$code" = 429 ] && return 0
    [ "$code" = 200 ] || return 1
  done
  return 1
}
check "ratelimit: takes drain it to a 429 with Retry-After: 1" 'take_until_429 && grep -qi "^retry-after: 1" "$work/rl.h"'
check "docstore: PUT a document: 201" '[ "$(req 1 PUT acme/docstore/db/docs/ann "$TOKEN" --data-binary "{\"name\":\"Ann\",\"age\":31}")" = "201 {\"id\":\"ann\"}" ]'
check "docstore: PATCH merges" '[ "$(req 1 PATCH acme/docstore/db/docs/ann "$TOKEN" --data-binary "{\"age\":32}")" = "200 {\"name\":\"Ann\",\"age\":32}" ]'
check "docstore: bad JSON is the actor's own 400" '[ "$(req 1 PUT acme/docstore/db/docs/bad "$TOKEN" --data-binary "{oops")" = "400 {\"error\":\"invalid JSON at offset 1: expected a string key\"}" ]'

# ---- durability across kill -9
stop "$pid_n1"
start n1b n1 1
r=$(until_ok 30 1 POST acme/counter/c1/increment)
check "after kill -9 and a restart, the next increment answers 6" '[ "$r" = "200 6" ]'
check "the chat room kept both messages" '[ "$(req 1 GET "acme/chat/room/messages")" = "$(printf "200 1\thi 2\tthere")" ]'
check "the rate limiter kept its capacity of 3 (refilled since: 3 tokens)" '[ "$(req 1 GET acme/ratelimit/key1/)" = "200 3" ]'
check "the document is there, patched" '[ "$(req 1 GET "acme/docstore/db/docs?prefix=a")" = "200 {\"docs\":[{\"id\":\"ann\",\"doc\":{\"name\":\"Ann\",\"age\":32}}],\"next\":null}" ]'
stop "$pid_n1b"

echo "     (the suite took $SECONDS s)"
finish
