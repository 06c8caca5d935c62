#!/usr/bin/env bash
# Alarms under load (docs/alarms.md): 10,000 alarms due within one second, across 1,000
# actors on three `wasmkeep serve` nodes on this machine, one bucket. Prints the lateness
# after the due time (p50, p99, max: the handler's now_ms() minus the alarm's time, from the
# actors' own durable logs), alarms fired per second, and the bucket requests per alarm by
# kind (from the nodes' own counters over the run). docs/benchmarks.md records a run.
#
#   bench/alarms_bench.sh [BUILD_DIR]      (default build/release; about a minute)
#
# Workload. 1,000 actors of examples/testdata/alarm_probe.cc, set through the three nodes in
# turn (so each node holds a third of them); actor i's alarm is due at T0 + (i mod 100) ms
# and its handler re-arms it 100 ms after each run, 9 times: 10 runs each, 10,000 in all,
# due between T0 and T0 + 1 s. The actors stay in memory (their owner's timers fire them:
# the common path). Every run of the handler writes its log line and clears or re-arms the
# alarm (one batch, one segment PUT, one index entry PUT for the re-arm and one DELETE).
#
# Environment: WASMKEEP_ALARMS_BENCH_BUCKET (sqlite or file; default sqlite),
# WASMKEEP_ALARMS_BENCH_ACTORS (default 1000), WASMKEEP_ALARMS_BENCH_RUNS (runs per actor,
# default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
wk=$build/src/cli/wasmkeep
probe=$build/actors/alarm_probe.wasm
scheme=${WASMKEEP_ALARMS_BENCH_BUCKET:-sqlite}
actors=${WASMKEEP_ALARMS_BENCH_ACTORS:-1000}
runs=${WASMKEEP_ALARMS_BENCH_RUNS:-10}
for f in "$wk" "$probe"; do [ -e "$f" ] || { echo "missing $f: build $build first"; exit 2; }; done
work=$(mktemp -d /tmp/wasmkeep-alarms-bench.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"' EXIT
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
base=$((62000 + RANDOM % 3000))
W tenant add bench >"$work/tenant.out" 2>&1
token=$(tail -n1 "$work/tenant.out")
W deploy --tenant bench --class probe "$probe" >/dev/null
for n in 1 2 3; do
  W serve --node-id "n$n" --listen "127.0.0.1:$((base + n))" >"$work/n$n.out" 2>"$work/n$n.log" &
  pids+=($!)
done
for n in 1 2 3; do
  for _ in $(seq 1 100); do curl -sf "127.0.0.1:$((base + n))/readyz" >/dev/null && break; sleep 0.2; done
done
metrics() {  # the sum over the three nodes of each series named in $@
  for n in 1 2 3; do curl -sf "127.0.0.1:$((base + n))/metrics"; done | python3 -c '
import sys
want = sys.argv[1:]
tot = {w: 0.0 for w in want}
for line in sys.stdin:
    if line.startswith("#"): continue
    parts = line.split()
    if len(parts) == 2 and parts[0] in tot: tot[parts[0]] += float(parts[1])
print(" ".join(str(int(tot[w])) for w in want))' "$@"
}
series=(wasmkeep_replica_segments_total wasmkeep_replica_snapshots_total wasmkeep_replica_gc_deleted_total
  'wasmkeep_alarms_index_requests_total{op="put"}' 'wasmkeep_alarms_index_requests_total{op="delete"}'
  'wasmkeep_alarms_index_requests_total{op="list"}' wasmkeep_alarms_scans_total wasmkeep_alarms_fired_total)

echo "alarms bench: $actors actors x $runs runs on 3 nodes, $scheme:// bucket, build $build"
# Every actor once (acquired on the node its first request lands on), then the alarms.
warm_start=$(date +%s%3N)
seq 0 $((actors - 1)) | xargs -P 16 -I{} sh -c \
  'curl -sf -o /dev/null -H "Authorization: Bearer '"$token"'" "http://127.0.0.1:$(('"$base"' + {} % 3 + 1))/v1/actors/bench/probe/a{}"'
warm_ms=$(( $(date +%s%3N) - warm_start ))
echo "  $actors actors started in $warm_ms ms"
# The first alarm is due once every set is surely in: twice the warm-up, at least 8 s.
t0=$(( $(date +%s%3N) + (2 * warm_ms > 8000 ? 2 * warm_ms : 8000) ))
before=$(metrics "${series[@]}")
set_start=$(date +%s%3N)
seq 0 $((actors - 1)) | xargs -P 16 -I{} sh -c \
  'curl -sf -o /dev/null -X POST -H "Authorization: Bearer '"$token"'" "http://127.0.0.1:$(('"$base"' + {} % 3 + 1))/v1/actors/bench/probe/a{}/set?t=$(('"$t0"' + {} % 100))&rearm=100&count='"$((runs - 1))"'"'
echo "  $actors alarms set in $(( $(date +%s%3N) - set_start )) ms; the first due $(( t0 - $(date +%s%3N) )) ms later"
sleep $(( (t0 - $(date +%s%3N)) / 1000 + 1 ))
# Until every alarm fired, or none fired for 10 s.
last=-1; still=0
while [ "$still" -lt 10 ]; do
  fired=$(metrics wasmkeep_alarms_fired_total)
  [ "$fired" -ge $((actors * runs)) ] && break
  if [ "$fired" = "$last" ]; then still=$((still + 1)); else still=0; last=$fired; fi
  sleep 1
done
after=$(metrics "${series[@]}")
mkdir -p "$work/logs.d"
seq 0 $((actors - 1)) | xargs -P 16 -I{} sh -c \
  'curl -sf -o "'"$work"'/logs.d/{}" -H "Authorization: Bearer '"$token"'" "http://127.0.0.1:$(('"$base"' + {} % 3 + 1))/v1/actors/bench/probe/a{}"'
for f in "$work"/logs.d/*; do cat "$f"; echo; done >"$work/logs"
python3 - "$t0" "$actors" "$runs" "$before" "$after" "$work/logs" <<'PY'
import sys
t0, actors, runs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
before = [int(x) for x in sys.argv[4].split()]
after = [int(x) for x in sys.argv[5].split()]
late, fires = [], []
for line in open(sys.argv[6]):
    for op in line.strip().split(","):
        if op.startswith("f"):
            due, _retry, now = op[1:].split(":")
            late.append(int(now) - int(due))
            fires.append(int(now))
late.sort()
n = len(late)
def pct(p): return late[min(n - 1, int(p * n))] if n else float("nan")
print(f"  fired {n} of {actors * runs} alarms (counted from the actors' durable logs); early: {sum(1 for x in late if x < 0)}")
if n:
    span = (max(fires) - t0) / 1000.0
    print(f"  lateness after the due time: p50 {pct(0.50)} ms, p99 {pct(0.99)} ms, max {late[-1]} ms")
    print(f"  fired per second: {n / max(span, 0.001):.0f} ({n} from the first due time to the last run, {span:.2f} s)")
names = ["segment PUTs", "snapshot PUTs", "GC DELETEs", "index entry PUTs", "index entry DELETEs",
         "index prefix LISTs", "shard scan LISTs"]
fired = max(after[-1] - before[-1], 1)
print(f"  bucket requests per fired alarm, by kind (the nodes' counters over the window, {fired} fired):")
for name, b, a in zip(names, before, after):
    print(f"    {name:22} {(a - b) / fired:6.3f}   ({a - b})")
PY
