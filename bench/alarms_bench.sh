#!/usr/bin/env bash
# Alarms under load (docs/alarms.md), WasmKeep and workerd side by side in one run: 10,000
# alarms due within one second across 1,000 actors. WasmKeep: three `wasmkeep serve` nodes on
# this machine, one bucket. workerd (npm's, as bench/http_bench.sh installs it): one process,
# the same actor as a Durable Object with on-disk storage (bench/alarms/). Prints, for each,
# the lateness after the due time (p50, p99, max: the handler's clock at its run minus the
# alarm's time, from the actors' own durable logs), alarms fired per second, and for WasmKeep
# the bucket requests per alarm by kind (the nodes' counters over the run; workerd has no
# bucket: its storage is a local SQLite file per object). docs/benchmarks.md records a run.
#
#   bench/alarms_bench.sh [BUILD_DIR]      (default build/release; about two minutes)
#
# Workload (bench/alarms_bench.py). 1,000 actors of examples/testdata/alarm_probe.cc (the
# Durable Object bench/alarms/alarm-do.js behaves alike), set through the three nodes in turn
# (so each node holds a third of them); actor i's alarm is due at T0 + (i mod 100) ms and its
# handler re-arms it 100 ms after each run, 9 times: 10 runs each, 10,000 in all, due between
# T0 and T0 + 1 s. The actors stay in memory (their owner's timers fire them: the common
# path). Every run of the handler writes its log line and clears or re-arms the alarm (in
# WasmKeep one batch: one segment PUT, one index entry PUT for the re-arm and one DELETE).
#
# Environment: WASMKEEP_ALARMS_BENCH_BUCKET (sqlite or file; default sqlite),
# WASMKEEP_ALARMS_BENCH_ACTORS (default 1000), WASMKEEP_ALARMS_BENCH_RUNS (runs per actor,
# default 10), WASMKEEP_ALARMS_BENCH_WORKERD (1, the default, runs workerd too; 0 skips it),
# WASMKEEP_WORKERD_VERSION (default 1.20261117.1, as bench/http_bench.sh),
# WASMKEEP_ALARMS_BENCH_OUT (a directory to keep each system's JSON summary, with lateness by
# run and runs per 10 s, and the nodes' logs).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=common.sh
source bench/common.sh
build=${1:-build/release}
wk=$build/src/cli/wasmkeep
probe=$build/actors/alarm_probe.wasm
scheme=${WASMKEEP_ALARMS_BENCH_BUCKET:-sqlite}
actors=${WASMKEEP_ALARMS_BENCH_ACTORS:-1000}
runs=${WASMKEEP_ALARMS_BENCH_RUNS:-10}
with_workerd=${WASMKEEP_ALARMS_BENCH_WORKERD:-1}
for f in "$wk" "$probe"; do [ -e "$f" ] || { echo "missing $f: build $build first"; exit 2; }; done
work=$(mktemp -d /tmp/wasmkeep-alarms-bench.XXXXXX)
pids=()
stop_all() {
  for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || true; done
  for p in ${pids[@]+"${pids[@]}"}; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT
echo "alarms bench: $actors actors x $runs runs; WasmKeep: 3 nodes, $scheme:// bucket, build $build;" \
  "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- WasmKeep ---------------------------------------------------------------------------
bucket="$scheme://$work/bucket"
cat >"$work/bench.toml" <<TOML
[lease]
ttl_ms = 3000
grace_ms = 1000
safety_ms = 600
max_skew_ms = 200
heartbeat_period_ms = 1000
[actors]
idle_hibernate_ms = 120000
TOML
W() { "$wk" --config "$work/bench.toml" --bucket "$bucket" "$@"; }
W tenant add bench >"$work/tenant.out" 2>&1
token=$(tail -n1 "$work/tenant.out")
W deploy --tenant bench --class probe "$probe" >/dev/null
ports=()
for n in 1 2 3; do
  port=$(free_port)
  ports+=("$port")
  # Not through W: $! must be the node itself, so that stop_all ends it (a function in the
  # background is a subshell, and killing it would leave the node running).
  "$wk" --config "$work/bench.toml" --bucket "$bucket" serve --node-id "n$n" --listen "127.0.0.1:$port" \
    >"$work/n$n.out" 2>"$work/n$n.log" &
  pids+=($!)
done
for port in "${ports[@]}"; do
  for _ in $(seq 1 100); do curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
done
python3 bench/alarms_bench.py --system wasmkeep --ports "$(IFS=,; echo "${ports[*]}")" --token "$token" \
  --actors "$actors" --runs "$runs" --metrics --out "$work/wasmkeep.json"
stop_all

# ---- workerd ----------------------------------------------------------------------------
if [ "$with_workerd" = 1 ]; then
  workerd=$(install_workerd)
  wport=$(free_port)
  start_workerd bench/alarms/alarm-do.js bench/alarms/workerd.capnp "$work/workerd" "$wport" "$token"
  pids+=("$workerd_pid")
  echo "  workerd $workerd_version ($("$workerd" --version 2>&1 | head -1)), localDisk in $work"
  python3 bench/alarms_bench.py --system workerd --ports "$wport" --token "$token" \
    --actors "$actors" --runs "$runs" --out "$work/workerd.json"
  stop_all
fi

# ---- side by side -----------------------------------------------------------------------
if [ -n "${WASMKEEP_ALARMS_BENCH_OUT:-}" ]; then
  mkdir -p "$WASMKEEP_ALARMS_BENCH_OUT"
  cp "$work"/*.json "$work"/n?.log "$WASMKEEP_ALARMS_BENCH_OUT/" 2>/dev/null || true
fi
python3 - "$work/wasmkeep.json" "$work/workerd.json" <<'PY'
import json, os, sys
res = [json.load(open(p)) for p in sys.argv[1:] if os.path.exists(p)]
def cell(r, path):
    v = r
    for k in path:
        v = v.get(k) if isinstance(v, dict) else None
    return "-" if v is None else str(v)
rows = [("alarms fired (durable logs)", lambda r: f"{r['fired']} of {r['alarms']}; early {r['early']}"),
        ("lateness p50 / p99 / max (ms)", lambda r: " / ".join(cell(r, ("lateness_ms", k)) for k in ("p50", "p99", "max"))),
        ("first run's lateness p50 / p99 (ms)", lambda r: " / ".join(cell(r, ("first_run_lateness_ms", k)) for k in ("p50", "p99"))),
        ("fired per second", lambda r: f"{cell(r, ('fired_per_s',))} (over {cell(r, ('span_s',))} s)"),
        ("actors started, alarms set (ms)", lambda r: f"{r['warm_ms']}, {r['set_ms']}")]
print("| | " + " | ".join(r["system"] for r in res) + " |")
print("|---|" + "---|" * len(res))
for name, fn in rows:
    print(f"| {name} | " + " | ".join(fn(r) for r in res) + " |")
for r in res:
    if "requests_per_alarm" in r:
        print(f"{r['system']}: bucket requests per fired alarm ({r['fired_counter']} fired by the nodes' counter):")
        for k, v in r["requests_per_alarm"].items():
            print(f"    {k:22} {v['per_alarm']:6.3f}   ({v['count']})")
print("workerd: no bucket (one SQLite database per object on this disk)" if any(r["system"] == "workerd" for r in res) else "")
PY
