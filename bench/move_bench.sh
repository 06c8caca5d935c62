#!/usr/bin/env bash
# How long an actor is not writable during a move (docs/benchmarks.md, "Drain and move"):
# two nodes on one bucket, a write load on 200 counters through both, and a probe counter
# written back to back through node a while it is moved between a and b 100 times with
# `wasmkeep actor move` (bench/move_bench.py measures and prints p50 / p99 / max).
#
#   bench/move_bench.sh [file|s3] [MOVES]       (default file, 100)
#
# s3 needs the RGW environment (eval "$(scripts/rgw.sh start)"): a fresh bucket per run.
# The binary: WASMKEEP_BIN, else build/release/src/cli/wasmkeep, else build/ci's. Node
# settings: the cluster tests' short lease (ttl 2 s, period 0.6 s: a move request is seen
# within 0.6 s), 2 workers per node, no hibernation. The counter is ACTORS_DIR/counter.wasm
# (WASMKEEP_ACTORS, else the binary's build directory's actors/).
set -u
cd "$(dirname "$0")/.."
backend=${1:-file}
moves=${2:-100}
bin=${WASMKEEP_BIN:-}
if [ -z "$bin" ]; then
  bin=build/release/src/cli/wasmkeep
  [ -x "$bin" ] || bin=build/ci/src/cli/wasmkeep
fi
actors_dir=${WASMKEEP_ACTORS:-$(dirname "$(dirname "$(dirname "$bin")")")/actors}
[ -x "$bin" ] && [ -f "$actors_dir/counter.wasm" ] || { echo "move_bench: build wasmkeep and the actors first ($bin, $actors_dir)"; exit 2; }
wk=$(realpath "$bin")
prefix=movebench
# The cluster tests' helpers: scratch dir, bucket, fast.toml, ports, start/stop.
source tests/cluster/common.sh
cat >>"$work/fast.toml" <<TOML
[actors]
workers = 2
idle_hibernate_ms = 600000
TOML
echo "move bench: $backend, $moves moves, $(basename "$(dirname "$(dirname "$(dirname "$bin")")")") build, $(nproc) cores, git $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
W tenant add acme >"$work/acme.out" 2>&1
TOKEN=$(tail -n1 "$work/acme.out")
W deploy --tenant acme --class counter "$actors_dir/counter.wasm" >/dev/null 2>&1
start a a 1
start b b 2
wait_ready 1 30 && wait_ready 2 30 || { echo "nodes not ready"; exit 1; }
python3 bench/move_bench.py --wk "$wk" --config "$work/fast.toml" --bucket "$bucket" \
  --nodes "a=127.0.0.1:$(port_of 1),b=127.0.0.1:$(port_of 2)" --token "$TOKEN" --moves "$moves"
