#!/usr/bin/env bash
# Checks what packaging/ ships (docs/operations.md): the systemd unit passes
# `systemd-analyze verify` without a warning, keeps the restart and stop settings the node
# relies on, and the example config loads as `serve` loads it. Skipped, saying why, where
# systemd-analyze is missing or cannot run (some containers).
#
#   check_unit.sh WASMKEEP_BINARY
#
# Prints one line per check and closes with "N passed, N failed".
set -u
wk=${1:?usage: check_unit.sh WASMKEEP_BINARY}
wk=$(realpath -- "$wk")  # ExecStart needs an absolute path
root=$(cd "$(dirname "$0")/../.." && pwd)
unit="$root/packaging/wasmkeep.service"
example="$root/packaging/wasmkeep.toml"
work=$(mktemp -d /tmp/wasmkeep-packaging.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
check() { if eval "$2"; then echo "ok   $1"; passed=$((passed + 1)); else echo "FAIL $1"; failed=$((failed + 1)); fi; }

# The example config: every section is read and validated by every command; `tenant add`
# on a scratch bucket loads it whole (--bucket overrides its s3:// URL).
out=$("$wk" --config "$example" --bucket "sqlite://$work/bucket" tenant add probe 2>&1); code=$?
check "the example config loads (exit $code${out:+: $(tail -1 <<<"$out")})" '[ "$code" = 0 ]'

# The unit's settings the node's exit statuses and clean stop rely on (docs/cli.md).
setting() { awk -F= -v k="$1" '$1==k {print substr($0, length(k) + 2)}' "$unit"; }
check "Restart=on-failure (exit 6, 7 and 9 are restarted)" '[ "$(setting Restart)" = on-failure ]'
check "RestartPreventExitStatus=2 (a bad configuration or bucket: no restart loop)" '[ "$(setting RestartPreventExitStatus)" = 2 ]'
check "KillSignal=SIGTERM (the clean stop)" '[ "$(setting KillSignal)" = SIGTERM ]'
check "TimeoutStopSec above twice the ttl (the stop's bound)" '[ "$(setting TimeoutStopSec)" -gt 20 ]'
check "no MemoryDenyWriteExecute (V8 compiles WebAssembly at run time)" '! grep -q "^MemoryDenyWriteExecute" "$unit"'

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "skip: systemd-analyze is not installed (scripts/install-deps.sh installs the systemd package)"
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
fi
# Can it run here at all? A minimal unit must verify cleanly, or this environment cannot
# judge ours (a container without what systemd-analyze needs).
printf '[Unit]\nDescription=probe\n[Service]\nExecStart=/bin/true\n' >"$work/probe.service"
if ! probe=$(systemd-analyze verify "$work/probe.service" 2>&1) || [ -n "$probe" ]; then
  echo "skip: systemd-analyze cannot run in this environment: $(head -1 <<<"$probe")"
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
fi
# The unit as shipped, but for ExecStart's path: the machine running the test may have no
# /usr/local/bin/wasmkeep, so a copy names the binary under test.
sed "s#/usr/local/bin/wasmkeep#$wk#" "$unit" >"$work/wasmkeep.service"
out=$(systemd-analyze verify "$work/wasmkeep.service" 2>&1); code=$?
check "systemd-analyze verify accepts the unit without a warning${out:+ ($(head -1 <<<"$out"))}" '[ "$code" = 0 ] && [ -z "$out" ]'
# The check can fail: an unknown key and a bad value are reported (systemd-analyze exits 0
# on those, so this script treats any output as a failure).
{ cat "$work/wasmkeep.service"; printf '[Service]\nRestartt=always\nTimeoutStopSec=soon\n'; } >"$work/broken.service"
out=$(systemd-analyze verify "$work/broken.service" 2>&1)
check "a broken copy is caught (unknown key, bad value)" 'grep -q "Unknown key" <<<"$out" && grep -q "Failed to parse" <<<"$out"'
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
