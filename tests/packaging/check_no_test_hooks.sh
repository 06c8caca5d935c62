#!/usr/bin/env bash
# Checks that a wasmkeep binary built without test hooks (WK_TEST_HOOKS=OFF: the release
# preset, or the test build's wasmkeep-nohooks twin) contains none of them
# (src/cli/test_hooks.h; docs/DEVELOPING.md, "Test hooks"): no hook's variable name, no
# hook's code, and that it refuses to start when the environment asks for a hook.
#
#   check_no_test_hooks.sh WASMKEEP_BINARY
#
# Prints one line per check and closes with "N passed, N failed".
set -u
wk=${1:?usage: check_no_test_hooks.sh WASMKEEP_BINARY}
work=$(mktemp -d /tmp/wasmkeep-nohooks.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
check() { if eval "$2"; then echo "ok   $1"; passed=$((passed + 1)); else echo "FAIL $1"; failed=$((failed + 1)); fi; }

# Every string of the binary once (its debug information included: a hook's class or
# function linked in would name itself there).
LC_ALL=C grep -aoE '[A-Za-z_][A-Za-z0-9_]{5,}' "$wk" | sort -u > "$work/strings"
for name in WASMKEEP_DEBUG_FAULTS WASMKEEP_DEBUG_WRITER WASMKEEP_DEBUG_WRITER_OPTIONS WASMKEEP_DEBUG_ACQUIRE \
            WASMKEEP_DEBUG_CAPTURE_FORWARDED WASMKEEP_DEBUG_PEER_KEY_FILE FaultyStore StartDebugWriters \
            ParseFaultSpec ForwardCapture; do
  check "no $name in the binary" "! grep -qx '$name' '$work/strings'"
done
# The check itself must be able to fail: a name every build has is found.
check "the search finds what is there (RunServe, CheckTestHooksAvailable)" "grep -q 'RunServe' '$work/strings' && grep -q 'CheckTestHooksAvailable' '$work/strings'"

WASMKEEP_DEBUG_FAULTS=put:fail "$wk" --bucket "file://$work/bucket" serve --listen 127.0.0.1:0 >"$work/out" 2>&1
rc=$?
check "a hook asked for is refused (exit 2)" "[ $rc -eq 2 ]"
check "the refusal names the variable" "grep -q 'WASMKEEP_DEBUG_FAULTS: this build has no test hooks' '$work/out'"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
