#!/usr/bin/env bash
# `wasmkeep actor check`: good modules pass with a summary; bad ones exit 2 naming the cause.
set -uo pipefail
wk=$1
actors=$2
failures=0
check() {  # check NAME EXPECTED_EXIT EXPECTED_TEXT ARGS...
  local name=$1 want_rc=$2 want_text=$3
  shift 3
  local out rc
  out=$("$wk" "$@" 2>&1)
  rc=$?
  if [ "$rc" != "$want_rc" ] || ! grep -qF -- "$want_text" <<<"$out"; then
    echo "FAIL $name: exit $rc (want $want_rc), output:"
    echo "$out"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check "counter passes" 0 "ok (ABI wasmkeep_v1)" actor check "$actors/counter.wasm"
check "json summary" 0 '"abi": "wasmkeep_v1"' actor check --json "$actors/chat.wasm"
check "missing handler" 2 'does not export the function "wk_on_request"' actor check "$actors/no_handler.wasm"
check "unknown import" 2 "wasmkeep_v1.no_such_function, which the host does not provide" actor check "$actors/bad_import.wasm"
echo "not wasm" >"$tmp/x.wasm"
check "not wasm" 2 "not a WebAssembly module" actor check "$tmp/x.wasm"
check "missing file" 2 "cannot read" actor check "$tmp/none.wasm"
printf '[actors]\nmax_memory_bytes = 65536\nmemory_budget_bytes = 65536\nmax_stored_bytes = 200000\n' >"$tmp/small.toml"
check "memory limit from config" 2 "over the limit of 65536 bytes per actor" --config "$tmp/small.toml" actor check "$actors/counter.wasm"
printf '[actors]\nmax_memory_bytes = 1000\n' >"$tmp/bad.toml"
check "bad setting named" 2 "actors.max_memory_bytes" --config "$tmp/bad.toml" actor check "$actors/counter.wasm"

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all actor check tests passed"
