#!/usr/bin/env bash
# Benchmarks, side by side in one run: conditional puts on file:// (this machine's disk)
# and on a local Ceph RGW, 1 and 16 writers; then the micro-benchmarks. Prints figures;
# record them in docs/benchmarks.md with the setup line this prints.
#   scripts/bench.sh [SECONDS_PER_CASE]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}

./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target store_bench micro_bench actor_bench

rgw_dir=$(mktemp -d /tmp/wasmkeep-rgw.XXXXXX)
data_dir=$(mktemp -d "$PWD/build/bench-data.XXXXXX")
trap './scripts/rgw.sh stop "$rgw_dir" >/dev/null 2>&1 || true; rm -rf "$rgw_dir" "$data_dir"' EXIT
./scripts/rgw.sh start "$rgw_dir" >/dev/null
# shellcheck disable=SC1091
source "$rgw_dir/env"

echo "setup: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ), git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "disk under file://: $(df -h "$data_dir" | awk 'NR==2{print $1" ("$2")"}'); RGW: radosgw $(radosgw --version 2>/dev/null | awk '{print $3}') memstore on 127.0.0.1"
./build/release/bench/store_bench --seconds "$seconds" \
  "file://$data_dir" \
  "s3://$WASMKEEP_S3_BUCKET?endpoint=$WASMKEEP_S3_ENDPOINT&region=$WASMKEEP_S3_REGION&if_match_quoted=false" \
  mem://
./build/release/bench/micro_bench --benchmark_min_time=0.2
./build/release/bench/actor_bench --benchmark_min_time=0.2
