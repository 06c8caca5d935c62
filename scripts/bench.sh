#!/usr/bin/env bash
# Benchmarks, side by side in one run: conditional puts on file:// (this machine's disk)
# and on a local Ceph RGW, 1 and 16 writers; durable writes and restores through the
# replica on the same two backends; then the micro-benchmarks; then WasmKeep against
# workerd over HTTP (bench/http_bench.sh); opt-in, tenants side by side
# (bench/tenant_isolation_bench.py: alarm storms and idempotency keys) and messages between
# actors (bench/messages_bench.sh) and the point-in-time history (bench/history_bench.cc)
# and WebSockets against workerd's hibernatable WebSockets (bench/ws_bench.sh).
# Prints figures;
# record them in docs/benchmarks.md with the setup line this prints.
#   scripts/bench.sh [SECONDS_PER_CASE]
#
# Environment:
#   WASMKEEP_BENCHES     which to run, of: store replica micro actor http move tenants messages history ws (default:
#                        the first five; http always uses the release preset and installs
#                        wrk and workerd from apt/npm, about 9 minutes at 10 s per run;
#                        move is opt-in: bench/move_bench.sh, 100 moves under load on
#                        file:// and on the RGW, about 12 minutes; tenants is opt-in:
#                        one node on sqlite://, another tenant's latency alone and beside
#                        alarm storms, and keyed requests, SECONDS_PER_CASE x 3 per case
#                        (at least 15 s), about 5 minutes; messages is opt-in:
#                        bench/messages_bench.sh, two nodes on sqlite://, messages on one
#                        node and across two, bucket requests per message, and
#                        Idempotency-Key against none, about 2 minutes; history is opt-in:
#                        100,000 batches of one actor with retention and again without, on
#                        sqlite://, file:// and the RGW, restores of points and listings of
#                        its history, the bucket bytes per written MiB, about 15 minutes; ws
#                        is opt-in: bench/ws_bench.sh, the chat room's WebSockets against a
#                        Durable Object on workerd's hibernation API (fan-out to 1,000,
#                        messages per second from 16 connections with SECONDS_PER_CASE as the
#                        window, memory per idle connection), release preset, about 5 minutes)
#   WASMKEEP_BENCH_BUILD build directory (default build/release, the release preset; any
#                        other is configured RelWithDebInfo without the tests)
#   WASMKEEP_S3_ENDPOINT (with WASMKEEP_S3_BUCKET, WASMKEEP_S3_REGION, AWS_*): an S3 server
#                        to use instead of starting RGW
#   WASMKEEP_SKIP_RGW=1  no S3 backend (the s3:// rows are skipped, and it says so)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
benches=" ${WASMKEEP_BENCHES:-store replica micro actor http} "
build=${WASMKEEP_BENCH_BUILD:-build/release}
wants() { [[ $benches == *" $1 "* ]]; }

./scripts/install-deps.sh
targets=()
for b in store replica micro actor history; do wants "$b" && targets+=("${b}_bench"); done
if [ "$build" = build/release ]; then
  cmake --preset release >/dev/null
else
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=g++ -DWK_BUILD_TESTS=OFF >/dev/null
fi
{ wants move || wants tenants || wants messages; } && targets+=(wasmkeep wk_actors)
if ((${#targets[@]})); then cmake --build "$build" --target "${targets[@]}"; fi

rgw_dir=$(mktemp -d /tmp/wasmkeep-rgw.XXXXXX)
data_dir=$(mktemp -d "$PWD/build/bench-data.XXXXXX")
trap './scripts/rgw.sh stop "$rgw_dir" >/dev/null 2>&1 || true; rm -rf "$rgw_dir" "$data_dir"' EXIT
if [ -z "${WASMKEEP_S3_ENDPOINT:-}" ] && [ "${WASMKEEP_SKIP_RGW:-0}" != 1 ] && { wants store || wants replica || wants move || wants history; }; then
  ./scripts/rgw.sh start "$rgw_dir" >/dev/null
  # shellcheck disable=SC1091
  source "$rgw_dir/env"
fi
urls=("file://$data_dir")
if [ -n "${WASMKEEP_S3_ENDPOINT:-}" ]; then
  urls+=("s3://$WASMKEEP_S3_BUCKET?endpoint=$WASMKEEP_S3_ENDPOINT&region=${WASMKEEP_S3_REGION:-us-east-1}&if_match_quoted=false")
  s3_note="RGW: radosgw $(radosgw --version 2>/dev/null | awk '{print $3}') memstore on 127.0.0.1 ($WASMKEEP_S3_ENDPOINT)"
else
  s3_note="s3://: skipped (WASMKEEP_SKIP_RGW=1 and no WASMKEEP_S3_ENDPOINT)"
fi

echo "setup: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ), git $(git rev-parse --short HEAD 2>/dev/null || echo '?'), build $build"
echo "disk under file://: $(df -h "$data_dir" | awk 'NR==2{print $1" ("$2")"}'); $s3_note; load average $(cut -d' ' -f1-3 /proc/loadavg)"
if wants store; then "./$build/bench/store_bench" --seconds "$seconds" "${urls[@]}" mem://; fi
if wants replica; then "./$build/bench/replica_bench" --seconds "$seconds" "${urls[@]}"; fi
if wants micro; then "./$build/bench/micro_bench" --benchmark_min_time=0.2; fi
if wants history; then "./$build/bench/history_bench" "sqlite://$data_dir/history-sqlite" "${urls[@]}"; fi
if wants actor; then "./$build/bench/actor_bench" --benchmark_min_time=0.2; fi
if wants http; then ./bench/http_bench.sh "$seconds"; fi
if wants tenants; then
  # A failed case is a row of its table saying why; the benches after it still run.
  python3 bench/tenant_isolation_bench.py --build "$build" --seconds "$((seconds * 3 > 15 ? seconds * 3 : 15))" ||
    echo "tenants: a case failed (its row above says why)"
fi
if wants messages; then
  # Likewise: a failed case is a row saying why.
  WASMKEEP_MESSAGES_BENCH_BUILD="$build" ./bench/messages_bench.sh ||
    echo "messages: a case failed (its row above says why)"
fi
if wants ws; then
  # A failed case is a row of its table saying why.
  ./bench/ws_bench.sh "$seconds" || echo "ws: the bench stopped early (its output above says why)"
fi
if wants move; then
  WASMKEEP_BIN="$build/src/cli/wasmkeep" ./bench/move_bench.sh file 100
  if [ -n "${WASMKEEP_S3_ENDPOINT:-}" ]; then WASMKEEP_BIN="$build/src/cli/wasmkeep" ./bench/move_bench.sh s3 100; fi
fi
