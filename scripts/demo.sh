#!/usr/bin/env bash
# Install, build and run WasmKeep on its embedded default bucket (a local directory holding
# one SQLite database, sqlite://./wasmkeep-data), from a clean clone on a fresh Debian 12 machine. Idempotent.
#
# It starts a node (`wasmkeep serve`, 127.0.0.1:8080), creates a tenant (or, if it exists,
# mints a new token for it), deploys the C++ example actors and two AssemblyScript ones
# (the document store and the counter's twin, as classes docstore and counter-as), calls
# the counters and the document store, sets a reminder and shows its alarm firing two
# seconds later (examples/reminders, docs/alarms.md), and prints the commands to call each. It
# serves the chat room's web page (examples/chat/web/, python3 -m http.server on a free port
# of 127.0.0.1) and prints its URL, the node, tenant, room and token in its fragment: open it
# in two tabs and chat. It mints an operator token and prints the console's URL with it in
# the fragment (a sign-in link). The node (and the page's server) then keep running in the foreground
# until Ctrl-C, which is a clean stop. WASMKEEP_DEMO_EXIT=1 stops them after the demo instead.
#
# Environment: WASMKEEP_BUCKET (default sqlite://./wasmkeep-data), WASMKEEP_DEMO_PORT
# (default 8080), WASMKEEP_DEMO_CHAT_PORT (the page's port; default a free one),
# WASMKEEP_DEMO_EXIT.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target wasmkeep wk_actors
wk=./build/release/src/cli/wasmkeep
bucket=${WASMKEEP_BUCKET:-sqlite://./wasmkeep-data}
port=${WASMKEEP_DEMO_PORT:-8080}
node="127.0.0.1:$port"
W() { "$wk" --bucket "$bucket" "$@"; }
say() { printf '\n$ %s\n' "$*"; }
tmp=$(mktemp -d)

say "wasmkeep serve --listen $node   # a node on the bucket $bucket"
# Not through W: a backgrounded shell function is a subshell, and $! would be its pid, not
# the node's (a TERM would then leave the node running).
"$wk" --bucket "$bucket" serve --listen "$node" 2>"$tmp/serve.log" &
serve_pid=$!
web_pid=""
stop_node() {
  if [ -n "$web_pid" ]; then kill "$web_pid" 2>/dev/null || true; wait "$web_pid" 2>/dev/null || true; fi
  if kill -0 "$serve_pid" 2>/dev/null; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap stop_node EXIT
trap 'exit 130' INT TERM

say "wasmkeep tenant add demo   # prints an access token as its last line"
if W tenant add demo >"$tmp/tenant.out" 2>&1; then
  cat "$tmp/tenant.out"
else
  echo "(tenant demo exists: minting another token)"
  say "wasmkeep tenant add-token demo"
  W tenant add-token demo >"$tmp/tenant.out"
  cat "$tmp/tenant.out"
fi
token=$(tail -n1 "$tmp/tenant.out")
say "wasmkeep admin token add demo-console   # an operator token for the console, as its last line"
W admin token add demo-console >"$tmp/operator.out"
cat "$tmp/operator.out"
operator_token=$(tail -n1 "$tmp/operator.out")
# The console signs in from a link's fragment (#token=...), which the browser never sends.
console_url="http://$node/console/#token=$operator_token"

for class in counter kv chat ratelimit reminders bank; do
  say "wasmkeep deploy --tenant demo --class $class build/release/actors/$class.wasm"
  W deploy --tenant demo --class "$class" "build/release/actors/$class.wasm"
done
# AssemblyScript (examples/assemblyscript/): built by the same wk_actors target.
for pair in docstore:as_docstore counter-as:as_counter; do
  class=${pair%%:*} module=${pair#*:}
  say "wasmkeep deploy --tenant demo --class $class build/release/actors/$module.wasm   # AssemblyScript"
  W deploy --tenant demo --class "$class" "build/release/actors/$module.wasm"
done

printf '\n(waiting for the node lease: a node waits ttl + grace, 15 s, before it acts)\n'
for _ in $(seq 1 300); do
  curl -sf "$node/readyz" >/dev/null 2>&1 && break
  kill -0 "$serve_pid" 2>/dev/null || { cat "$tmp/serve.log"; exit 1; }
  sleep 0.2
done
say "curl $node/readyz"
curl -s "$node/readyz"

say "wasmkeep call demo/counter/visits/increment -X POST --token \$TOKEN --node $node"
"$wk" call demo/counter/visits/increment -X POST --token "$token" --node "$node"
say "curl -X POST -H 'Authorization: Bearer \$TOKEN' http://$node/v1/actors/demo/counter/visits/increment"
curl -s -X POST -H "Authorization: Bearer $token" "http://$node/v1/actors/demo/counter/visits/increment"
say "curl -X POST -H 'Authorization: Bearer \$TOKEN' http://$node/v1/actors/demo/counter-as/visits/increment   # the AssemblyScript twin"
curl -s -X POST -H "Authorization: Bearer $token" "http://$node/v1/actors/demo/counter-as/visits/increment"
say "curl -X PUT -H 'Authorization: Bearer \$TOKEN' --data-binary '{\"name\": \"Ann\"}' http://$node/v1/actors/demo/docstore/users/docs/ann"
curl -s -X PUT -H "Authorization: Bearer $token" --data-binary '{"name": "Ann"}' "http://$node/v1/actors/demo/docstore/users/docs/ann"

# An alarm: a reminder due in 2 s; the actor's alarm fires it, and it moves to /fired.
due=$(( $(date +%s%3N) + 2000 ))
say "curl -X POST -H 'Authorization: Bearer \$TOKEN' --data-binary 'stretch' 'http://$node/v1/actors/demo/reminders/me/add?at=$due'   # due in 2 s"
curl -s -X POST -H "Authorization: Bearer $token" --data-binary 'stretch' "http://$node/v1/actors/demo/reminders/me/add?at=$due"
say "$wk actor alarm demo/reminders/me   # its alarm, and the index entry that lets the cluster find it"
W actor alarm demo/reminders/me || true
sleep 3
say "curl -H 'Authorization: Bearer \$TOKEN' http://$node/v1/actors/demo/reminders/me/fired   # 3 s later: the alarm fired it"
curl -s -H "Authorization: Bearer $token" "http://$node/v1/actors/demo/reminders/me/fired"
# Messages between actors (docs/messages.md): a transfer debits alice and messages bob.
say "curl -X POST -H 'Authorization: Bearer \$TOKEN' 'http://$node/v1/actors/demo/bank/alice/deposit?amount=100'"
curl -s -X POST -H "Authorization: Bearer $token" "http://$node/v1/actors/demo/bank/alice/deposit?amount=100"
say "curl -X POST -H 'Authorization: Bearer \$TOKEN' 'http://$node/v1/actors/demo/bank/alice/transfer?to=bob&amount=30'   # a message to bob"
curl -s -X POST -H "Authorization: Bearer $token" "http://$node/v1/actors/demo/bank/alice/transfer?to=bob&amount=30"
for _ in $(seq 1 50); do
  [ "$(curl -s -H "Authorization: Bearer $token" "http://$node/v1/actors/demo/bank/bob/balance")" = "30" ] && break
  sleep 0.1
done
say "curl -H 'Authorization: Bearer \$TOKEN' http://$node/v1/actors/demo/bank/bob/history   # the credit, applied once"
curl -s -H "Authorization: Bearer $token" "http://$node/v1/actors/demo/bank/bob/history"

# The chat room's page (examples/chat/README.md, "The web page"): one static file, served
# from 127.0.0.1 only; its settings, the token among them, go in the URL's fragment, which
# the browser never sends to a server. The page opens the room's WebSocket on the node.
chat_port=${WASMKEEP_DEMO_CHAT_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
say "python3 -m http.server --bind 127.0.0.1 --directory examples/chat/web $chat_port &   # the chat page"
python3 -m http.server --bind 127.0.0.1 --directory examples/chat/web "$chat_port" >"$tmp/chat-web.log" 2>&1 &
web_pid=$!
chat_url="http://127.0.0.1:$chat_port/#node=http://$node&tenant=demo&room=lobby&token=$token"
for _ in $(seq 1 50); do
  curl -sf -o /dev/null "http://127.0.0.1:$chat_port/index.html" && break
  kill -0 "$web_pid" 2>/dev/null || { cat "$tmp/chat-web.log"; echo "(the chat page's server did not start)"; break; }
  sleep 0.1
done

cat <<TXT

The node is serving. Its state lives in $bucket: kill the node, start it again, and the
counter goes on from where it was. Try, in another terminal:

  TOKEN=$token
  curl -X POST -H "Authorization: Bearer \$TOKEN" http://$node/v1/actors/demo/counter/visits/increment
  curl         -H "Authorization: Bearer \$TOKEN" http://$node/v1/actors/demo/counter/visits
  curl -X PUT  -H "Authorization: Bearer \$TOKEN" --data-binary hello http://$node/v1/actors/demo/kv/notes/greeting
  curl         -H "Authorization: Bearer \$TOKEN" http://$node/v1/actors/demo/kv/notes/greeting
  curl -X POST -H "Authorization: Bearer \$TOKEN" --data-binary 'hi all' http://$node/v1/actors/demo/chat/lobby/messages
  curl         -H "Authorization: Bearer \$TOKEN" 'http://$node/v1/actors/demo/chat/lobby/messages?since=0'
  curl -X POST -H "Authorization: Bearer \$TOKEN" http://$node/v1/actors/demo/ratelimit/client-42/take
  curl -X PATCH -H "Authorization: Bearer \$TOKEN" --data-binary '{"age": 31}' http://$node/v1/actors/demo/docstore/users/docs/ann
  curl         -H "Authorization: Bearer \$TOKEN" 'http://$node/v1/actors/demo/docstore/users/docs?prefix=a'
  $wk call demo/counter/visits --token \$TOKEN --node $node
  curl -X POST -H "Authorization: Bearer \$TOKEN" --data-binary 'tea' "http://$node/v1/actors/demo/reminders/me/add?at=\$((\$(date +%s%3N) + 5000))"
  curl         -H "Authorization: Bearer \$TOKEN" http://$node/v1/actors/demo/reminders/me/fired

Metrics: curl $node/metrics. Docs: docs/http-api.md, docs/tenants.md, docs/storage.md.

The console (docs/console.md): the cluster, the actors, their state and history. This link
signs in with an operator token made for the demo:

  $console_url

Revoke it when done with
  $wk --bucket $bucket admin token revoke $(cut -d. -f2 <<<"$operator_token")

The chat room in a browser (examples/chat/README.md): open this URL in two tabs, or two
browsers, and type in each; every message reaches both over the room's WebSocket:

  $chat_url

The token is in the URL (its fragment stays in the browser): revoke it when done with
  $wk --bucket $bucket tenant revoke-token demo $(cut -d. -f3 <<<"$token")
TXT

if [ "${WASMKEEP_DEMO_EXIT:-0}" = 1 ]; then
  say "kill -TERM <serve>   # clean stop: actors made durable, holds released, then the node lease"
  kill -TERM "$serve_pid"
  wait "$serve_pid" && echo "(exit 0)"
  exit 0
fi
printf '\nCtrl-C stops the node (a clean stop) and the chat page.\n'
wait "$serve_pid"
