#!/usr/bin/env bash
# The whole test suite, from a clean clone on a fresh Debian 12 machine:
#   1. install the build packages (scripts/install-deps.sh) and Ceph RGW (scripts/rgw.sh),
#   2. build with the CI preset (debug, AddressSanitizer + UBSan, warnings as errors),
#   3. start a throwaway Ceph RGW on 127.0.0.1 for the S3 conformance run,
#   4. run every test with CTest (its summary line closes the output),
#   5. stop RGW, whatever happened.
# Idempotent; safe to run again. .ci/run runs exactly this.
#
# Environment: WASMKEEP_PRESET (default ci), WASMKEEP_TEST_JOBS (default: cores),
# WASMKEEP_SKIP_RGW=1 to run without S3 (the S3 conformance run then fails, by design).
set -euo pipefail
cd "$(dirname "$0")/.."

preset=${WASMKEEP_PRESET:-ci}
jobs=${WASMKEEP_TEST_JOBS:-$(nproc)}

./scripts/install-deps.sh

echo "== configure and build (preset $preset)"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"

rgw_dir=$(mktemp -d /tmp/wasmkeep-rgw.XXXXXX)
cleanup() {
  if [ "${WASMKEEP_SKIP_RGW:-0}" != 1 ]; then ./scripts/rgw.sh stop "$rgw_dir" >/dev/null 2>&1 || true; fi
  rm -rf "$rgw_dir"
}
trap cleanup EXIT

if [ "${WASMKEEP_SKIP_RGW:-0}" != 1 ]; then
  echo "== start Ceph RGW on 127.0.0.1 (state in $rgw_dir)"
  ./scripts/rgw.sh start "$rgw_dir"
  # shellcheck disable=SC1091
  source "$rgw_dir/env"
  export WASMKEEP_REQUIRE_S3=1
fi

echo "== test"
ctest --preset "$preset" -j "$jobs"
