#!/usr/bin/env bash
# The cluster suites at their deep sizes, beyond what CI's time allows (docs/DEVELOPING.md,
# "Deep runs"): the bank with 10,000 transfers (tests/cluster/bank_test.sh; the suite runs
# 3,000 on file:// and 1,000 on RGW) and sleeping holds with 10,000 actors
# (tests/cluster/sleeping_test.sh; the suite runs 3,000 and 1,000).
#
#   scripts/deep-cluster.sh [BUILD_DIR] [BACKEND...]     BUILD_DIR: build/ci; BACKEND: file (default) | s3
#
# s3 needs a running RGW and its environment (scripts/rgw.sh start DIR; . DIR/env). Each
# suite prints its checks; the last line is "N passed, N failed" over the suites run.
set -u
cd "$(dirname "$0")/.."
build=${1:-build/ci}
shift || true
backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(file)
wk=$build/src/cli/wasmkeep
[ -x "$wk" ] || { echo "no wasmkeep binary at $wk (build first: cmake --build --preset ci)"; exit 2; }
passed=0
failed=0
for backend in "${backends[@]}"; do
  for suite in bank sleeping; do
    t0=$SECONDS
    if BANK_TRANSFERS=${BANK_TRANSFERS:-10000} SLEEPING_TEST_ACTORS=${SLEEPING_TEST_ACTORS:-10000} \
         "tests/cluster/${suite}_test.sh" "$wk" "$backend" "$build/actors"; then
      passed=$((passed + 1)); echo "== $suite on $backend: passed in $((SECONDS - t0)) s"
    else
      failed=$((failed + 1)); echo "== $suite on $backend: FAILED after $((SECONDS - t0)) s"
    fi
  done
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
