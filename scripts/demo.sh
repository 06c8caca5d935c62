#!/usr/bin/env bash
# Install, build and run WasmKeep on its embedded default bucket (a local directory,
# ./wasmkeep-data), from a clean clone on a fresh Debian 12 machine. Idempotent.
#
# What exists today: the bucket and its conditional writes (`wasmkeep bucket`); an actor
# built from the SDK's counter example with the one build command and checked the way a
# node checks a class (`wasmkeep actor check`); then a node (`wasmkeep serve`) taking its
# node lease on the same bucket, seen through `cluster status` and /metrics, and a clean
# stop. Serving actors over HTTP arrives with the next release (docs/STATUS.md).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target wasmkeep wk_actors
wk=./build/release/src/cli/wasmkeep
bucket=${WASMKEEP_BUCKET:-file://./wasmkeep-data}

say() { printf '\n$ %s\n' "$*"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
key="demo/lease-$(date +%s)"

printf 'node A holds this\n' >"$tmp/a"
printf 'node B wants it\n' >"$tmp/b"

say "wasmkeep bucket put $key a --if-none-match   # create-only: the first writer wins"
v1=$("$wk" --bucket "$bucket" bucket put "$key" "$tmp/a" --if-none-match)
echo "$v1"
say "wasmkeep bucket put $key b --if-none-match   # a second creator loses (exit 3)"
"$wk" --bucket "$bucket" bucket put "$key" "$tmp/b" --if-none-match || echo "(exit $?)"
say "wasmkeep bucket put $key b --if-match $v1   # replace exactly the version we read"
v2=$("$wk" --bucket "$bucket" bucket put "$key" "$tmp/b" --if-match "$v1")
echo "$v2"
say "wasmkeep bucket put $key a --if-match $v1   # a stale version is refused (exit 3)"
"$wk" --bucket "$bucket" bucket put "$key" "$tmp/a" --if-match "$v1" || echo "(exit $?)"
say "wasmkeep bucket get $key"
"$wk" --bucket "$bucket" bucket get "$key"
say "wasmkeep bucket ls -l demo/"
"$wk" --bucket "$bucket" bucket ls -l demo/

say "scripts/build-actor.sh examples/counter/counter.cc -o counter.wasm   # the SDK's counter example"
./scripts/build-actor.sh examples/counter/counter.cc -o "$tmp/counter.wasm"
ls -l "$tmp/counter.wasm"
say "wasmkeep actor check counter.wasm   # the checks a node runs before it accepts a class"
"$wk" actor check "$tmp/counter.wasm"

port=${WASMKEEP_DEMO_PORT:-18080}
say "wasmkeep serve --node-id demo --listen 127.0.0.1:$port   # takes its node lease after the start check (ttl + grace = 15 s)"
"$wk" --bucket "$bucket" serve --node-id demo --listen "127.0.0.1:$port" 2>"$tmp/serve.log" &
serve_pid=$!
trap 'kill "$serve_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 1 150); do
  curl -sf "127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 "$serve_pid" 2>/dev/null || { cat "$tmp/serve.log"; exit 1; }
  sleep 0.2
done
say "curl 127.0.0.1:$port/readyz"
curl -s "127.0.0.1:$port/readyz"
say "wasmkeep cluster status"
"$wk" --bucket "$bucket" cluster status
say "curl -s 127.0.0.1:$port/metrics | grep node_lease"
curl -s "127.0.0.1:$port/metrics" | grep '^wasmkeep_node_lease'
say "kill -TERM <serve>   # clean stop: the lease is released"
kill -TERM "$serve_pid"
wait "$serve_pid" && echo "(exit 0)"
"$wk" --bucket "$bucket" cluster status
printf '\nThe bucket is %s. Next: %s --bucket %s serve --help, docs/node-lease.md\n' "$bucket" "$wk" "$bucket"
