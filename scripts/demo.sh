#!/usr/bin/env bash
# Install, build and run WasmKeep on its embedded default bucket (a local directory,
# ./wasmkeep-data), from a clean clone on a fresh Debian 12 machine. Idempotent.
#
# Until `wasmkeep serve` lands (issue 7), this demonstrates the layer everything stands on:
# the bucket and its conditional writes, through `wasmkeep bucket`, exactly as the nodes
# will use them to agree on who owns what.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target wasmkeep
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
printf '\nThe bucket is %s; try: %s --bucket %s bucket --help\n' "$bucket" "$wk" "$bucket"
