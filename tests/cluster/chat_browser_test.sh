#!/usr/bin/env bash
# The chat example's web page in a real browser (examples/chat/README.md, "The web page";
# docs/websockets.md, "Proofs"): three `wasmkeep serve` processes on 127.0.0.1, tenant acme,
# the chat class; the room acme/chat/lobby held by node c; examples/chat/web/ served by
# python3 -m http.server; then headless Chromium opens the page twice, one page on node a and
# one on node b (both relayed to c), types in each, sees both pages agree, and c is killed
# with -9: both pages show that they reconnect, come back through their own nodes, and the
# history is intact (tests/browser/chat_browser.py). Screenshots in SHOTS_DIR.
#
# Why the pages talk to a and b and not to the owner: a page talks to the one node its URL
# fragment names, and a page whose node is killed has nothing to reconnect to; with the
# owner a third node, the kill -9 is the owner's and both pages' nodes survive it.
#
#   chat_browser_test.sh WASMKEEP_BINARY BACKEND ACTORS_DIR SHOTS_DIR      BACKEND: file | s3
set -u
usage="usage: chat_browser_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR SHOTS_DIR"
wk=${1:?$usage}
backend=${2:?$usage}
actors=${3:?$usage}
shots=${4:?$usage}
prefix=chat-browser
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
web_dir="$(cd "$(dirname "$0")/../../examples/chat/web" && pwd)"

need_browser  # common.sh: $py, or the test is skipped (77)

TOKEN=$(tenant_add acme)
W deploy --tenant acme --class chat "$actors/chat.wasm" >/dev/null 2>&1
start a a 1
start b b 2
start c c 3
check "three nodes ready" 'wait_ready 1 30 && wait_ready 2 30 && wait_ready 3 30'
until_ok 20 3 GET acme/chat/lobby/messages >/dev/null
check "c holds acme/chat/lobby" '[ "$(W bucket get owners/acme/chat/lobby 2>/dev/null | awk "/^owner /{print \$2}")" = c ]'

# The page's folder on a free port of 127.0.0.1 (the nodes' ports are port_of 1..3).
web_port=$(port_of 10)
"$py" -m http.server --bind 127.0.0.1 --directory "$web_dir" "$web_port" >"$work/web.log" 2>&1 &
pids+=($!)
check "the page is served" 'wait_for 10 "curl -sf -o /dev/null http://127.0.0.1:$web_port/index.html"'

mkdir -p "$shots"
# (stderr aside: the shell's own note that a job was killed, which the browser run does)
{
  WK_PAGE="http://127.0.0.1:$web_port/index.html" WK_NODE_A="http://127.0.0.1:$(port_of 1)" \
    WK_NODE_B="http://127.0.0.1:$(port_of 2)" WK_TOKEN="$TOKEN" WK_KILL_PID="$pid_c" WK_SHOTS="$shots" \
    timeout 180 "$py" "$(dirname "$0")/../browser/chat_browser.py" >"$work/browser.out" 2>&1
  browser=$?
  wait "$pid_c"
} 2>/dev/null
cat "$work/browser.out"
b_passed=$(awk '/^[0-9]+ passed, [0-9]+ failed$/ {print $1}' "$work/browser.out")
b_failed=$(awk '/^[0-9]+ passed, [0-9]+ failed$/ {print $3}' "$work/browser.out")
passed=$((passed + ${b_passed:-0}))
failed=$((failed + ${b_failed:-0}))
check "the browser run ended cleanly" '[ "$browser" = 0 ] && [ -n "$b_passed" ]'
# The page sends its token as a subprotocol: no node logged it.
check "no node's log or output holds the token" '! grep -qF -e "${TOKEN##*.}" "$work"/[abc].log "$work"/[abc].out'
finish
