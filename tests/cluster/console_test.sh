#!/usr/bin/env bash
# The console in a real browser (docs/console.md): three `wasmkeep serve` processes on
# 127.0.0.1, an operator token and a tenant, a little traffic; then headless Chromium signs
# in, sees the three nodes, sees one of them killed change state, opens an actor and sees
# its keys, an actor's history, a past state, a restore, its undo and a fork, and an actor's
# dead messages sent again and dropped
# (tests/browser/console_browser.py), saving a screenshot of each page in SHOTS_DIR.
#
#   console_test.sh WASMKEEP_BINARY BACKEND ACTORS_DIR SHOTS_DIR      BACKEND: file | s3
set -u
usage="usage: console_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR SHOTS_DIR"
wk=${1:?$usage}
backend=${2:?$usage}
actors=${3:?$usage}
shots=${4:?$usage}
prefix=console
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

need_browser  # common.sh: $py, or the test is skipped (77)

TOKEN=$(tenant_add acme)
GLOBEX=$(tenant_add globex)
OP=$(operator_add console-test)
W deploy --tenant acme --class kv "$actors/kv.wasm" >/dev/null 2>&1
W deploy --tenant acme --class counter "$actors/counter.wasm" >/dev/null 2>&1
W deploy --tenant globex --class secrets "$actors/kv.wasm" >/dev/null 2>&1
W deploy --tenant acme --class reminders "$actors/reminders.wasm" >/dev/null 2>&1
W deploy --tenant acme --class probe "$actors/alarm_probe.wasm" >/dev/null 2>&1
W deploy --tenant globex --class probe "$actors/alarm_probe.wasm" >/dev/null 2>&1

# Quotas and usage for the tenants page (docs/tenants.md, "Quotas", "Usage").
W tenant set acme --quota requests_per_second=5000 --quota module_bytes=64MiB >/dev/null 2>&1
cat >>"$work/fast.toml" <<TOML
[usage]
flush_ms = 1000
TOML

start n1 node-1 1
start n2 node-2 2
start n3 node-3 3
for i in 1 2 3; do wait_ready "$i" 30; done
check "three nodes ready" 'wait_ready 1 1 && wait_ready 2 1 && wait_ready 3 1'

until_ok 20 1 PUT acme/kv/room-1/theme "$TOKEN" --data-binary dark >/dev/null
until_ok 10 1 PUT acme/kv/room-1/lang "$TOKEN" --data-binary en >/dev/null
until_ok 10 1 PUT acme/kv/room-1/motd "$TOKEN" --data-binary 'Welcome to room 1: be kind.' >/dev/null
printf 'session\000\001\002\377' >"$work/bin"
until_ok 10 1 PUT acme/kv/room-1/session "$TOKEN" --data-binary @"$work/bin" >/dev/null
for r in 2 3 4; do until_ok 10 $(( (r % 3) + 1 )) PUT acme/kv/room-$r/owner "$TOKEN" --data-binary "user-$r" >/dev/null; done
# Tenant data that is HTML (the kv actor takes its key from the path, byte for byte): the
# console must show it as text.
hostile_key='<img/src=x/onerror=window.__pwned=1>'
until_ok 10 1 PUT "acme/kv/xss/$hostile_key" "$TOKEN" --data-binary '<script>window.__pwned=2</script>' >/dev/null
check "an actor with an HTML key and value is stored" \
  '[ "$(req 1 GET "acme/kv/xss/$hostile_key")" = "200 <script>window.__pwned=2</script>" ]'
until_ok 10 2 PUT acme/kv/scratch/k "$TOKEN" --data-binary 'to be deleted' >/dev/null
# An actor's history for the inspector's History panel (docs/storage.md, "History and
# point-in-time restore"): three writes, each its own batch, more than a second apart (the
# browser picks a whole second between two of them).
until_ok 10 1 PUT acme/kv/notes/color "$TOKEN" --data-binary red >/dev/null
sleep 1.2
until_ok 10 1 PUT acme/kv/notes/color "$TOKEN" --data-binary green >/dev/null
sleep 1.2
until_ok 10 1 PUT acme/kv/notes/size "$TOKEN" --data-binary large >/dev/null
until_ok 10 1 PUT globex/secrets/vault/k "$GLOBEX" --data-binary 'globex only' >/dev/null
# Alarms for the alarms page: reminders coming in a few minutes, one alarm whose handler
# keeps failing (retried with back-off, so late meanwhile), and another tenant's.
now=$(date +%s%3N)
until_ok 10 1 POST "acme/reminders/user-1/add?at=$((now + 150000))" "$TOKEN" --data-binary 'stand up' >/dev/null
until_ok 10 2 POST "acme/reminders/user-2/add?at=$((now + 200000))" "$TOKEN" --data-binary 'water the plants' >/dev/null
until_ok 10 2 POST "acme/probe/flaky/set?t=$((now + 1000))&fail=6" "$TOKEN" >/dev/null
until_ok 10 1 POST "globex/probe/g1/set?t=$((now + 250000))" "$GLOBEX" >/dev/null
# And one that fires every 3 s (re-armed by its handler), for the charts of alarms fired
# and their lateness.
until_ok 10 1 POST "acme/probe/tick/set?t=$((now + 3000))&rearm=3000&count=40" "$TOKEN" >/dev/null

# Messages between actors for the inspector: a room whose post to its two members is parked
# dead at once (no inbox class is deployed when it is sent); the inbox class is deployed
# afterwards, so the browser's Retry delivers one, and its Drop removes the other.
W deploy --tenant acme --class room "$actors/chat_room.wasm" >/dev/null 2>&1
until_ok 10 1 POST "acme/room/lobby/join?member=ann" >/dev/null
until_ok 10 1 POST "acme/room/lobby/join?member=bob" >/dev/null
until_ok 10 1 POST "acme/room/lobby/post?from=ann" "$TOKEN" --data-binary 'hello, is anyone here?' >/dev/null
dead_count() { W actor messages acme/room/lobby --json 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["dead"]))' 2>/dev/null; }
check "the room's two messages are parked dead (no inbox class yet)" 'wait_for 30 "[ \"\$(dead_count)\" = 2 ]"'
W deploy --tenant acme --class inbox "$actors/chat_inbox.wasm" >/dev/null 2>&1

# Light traffic through every node while the browser looks (bounded: 60 s at most).
(
  end=$((SECONDS + 60))
  n=0
  while [ $SECONDS -lt $end ]; do
    n=$((n + 1))
    curl -s -o /dev/null -m 2 -X POST -H "Authorization: Bearer $TOKEN" \
      "http://127.0.0.1:$(port_of $(( (n % 3) + 1 )))/v1/actors/acme/counter/visits-$((n % 5))/increment"
    curl -s -o /dev/null -m 2 -H "Authorization: Bearer $TOKEN" \
      "http://127.0.0.1:$(port_of $(( (n % 2) + 1 )))/v1/actors/acme/kv/room-$(( (n % 4) + 1 ))/owner"
    [ $((n % 7)) = 0 ] && curl -s -o /dev/null -m 2 -H "Authorization: Bearer $TOKEN" \
      "http://127.0.0.1:$(port_of 1)/v1/actors/acme/nosuchclass/x"
    sleep 0.1
  done
) &
load=$!
pids+=("$load")

mkdir -p "$shots"
WK_URL="http://127.0.0.1:$(port_of 1)" WK_OP_TOKEN="$OP" WK_TENANT_TOKEN="$TOKEN" WK_KILL_PID="$pid_n3" \
  WK_KILL_NODE=node-3 WK_SHOTS="$shots" WK_HOSTILE_KEY="$hostile_key" \
  timeout 150 "$py" "$(dirname "$0")/../browser/console_browser.py" >"$work/browser.out" 2>&1
browser=$?
cat "$work/browser.out"
kill "$load" 2>/dev/null
# The browser's own counts join this script's.
b_passed=$(awk '/^[0-9]+ passed, [0-9]+ failed$/ {print $1}' "$work/browser.out")
b_failed=$(awk '/^[0-9]+ passed, [0-9]+ failed$/ {print $3}' "$work/browser.out")
passed=$((passed + ${b_passed:-0}))
failed=$((failed + ${b_failed:-0}))
check "the browser run ended cleanly" '[ "$browser" = 0 ] && [ -n "$b_passed" ]'
# Tokens go in Authorization headers only: no node logged one (nor its secret part).
check "no node's log or output holds a token" \
  '! grep -qF -e "${OP##*.}" -e "${TOKEN##*.}" "$work"/n*.log "$work"/n*.out'
finish
