#!/usr/bin/env bash
# Density: how many warm actors one node holds, what holding them costs, and how fast they
# answer, against workerd's Durable Objects in the same run. docs/benchmarks.md ("Density")
# records a run against the goals of the density work:
#   - 50,000 counters resident on one node within the default 1 GiB budget, none evicted;
#   - resident memory (RSS) per idle resident actor <= 8 KiB;
#   - warm-call p99 over 50,000 actors within 2x the p99 over 1,000.
#
#   bench/density_bench.sh [N ...]        (default: 1000 10000 50000)
#
# For each N, on a fresh WasmKeep node and a fresh workerd (one after the other, same
# machine, same disk):
#   1. base: the server's RSS (VmRSS) once 10 warm-up actors have answered (the class is
#      compiled, the worker isolates exist);
#   2. first pass: POST .../increment to d1..dN once each, 16 at a time (curl --parallel,
#      keep-alive), each call's time recorded: first-call p50/p99;
#   3. right after: RSS, and from WasmKeep's /metrics the resident actors, instances, the
#      budget's view (wasmkeep_actor_memory_bytes and its parts), evictions;
#   4. second pass, at once: every actor called again, in the same round-robin order, 16 at
#      a time: warm-call p50/p99. Over 1,000 actors every instance is still alive; over
#      50,000 the first pass took longer than actors.idle_instance_ms (10 s by default), so
#      the early ones lost their instances meanwhile (warm but not instantiated) and
#      instantiate again: the system's own behaviour at that density, measured as is; and
#      where those events spent their time (wasmkeep_actor_event_phase_seconds: each phase's
#      mean and p99 over the pass);
#   5. idle: WasmKeep waits actors.idle_instance_ms plus 5 s, so every actor is warm but not
#      instantiated, and RSS is read again: RSS per idle resident actor; then resident
#      actors, evictions and instances dropped, and the counters' sum checked (2N).
#
#   WasmKeep: the release build's `wasmkeep serve`, one node on a fresh sqlite:// bucket,
#             default settings except a short node lease (ready in about 4 s) and
#             actors.idle_hibernate_ms = 600000: the 50,000 first calls take longer than
#             the default 30 s, and hibernation (which releases an idle actor's hold) is not
#             what this measures; the counter is build/release/actors/counter.wasm.
#   workerd:  npm's workerd (as bench/http_bench.sh installs it), bench/http/counter-do.js
#             with localDisk storage in a fresh directory. It evicts objects idle for about
#             10 s, so its idle RSS is not comparable and is not printed; its second pass
#             re-creates the objects it evicted (the script prints how many objects it
#             constructed, from the worker's /_density counter).
#
# Environment: WASMKEEP_DENSITY_WASMKEEP=<path> runs another build's wasmkeep (no build;
# its counter.wasm from WASMKEEP_DENSITY_COUNTER or beside it; metrics it lacks print
# empty), WASMKEEP_WORKERD_VERSION (default 1.20261117.1), WASMKEEP_DENSITY_WORKERD=0
# skips workerd, WASMKEEP_DENSITY_CONCURRENCY (default 16), WASMKEEP_DENSITY_IDLE_WAIT
# (seconds waited for instances to be dropped; default 15), WASMKEEP_BENCH_DEPS=0 skips
# scripts/install-deps.sh, WASMKEEP_DENSITY_IDLE_INSTANCE_MS sets actors.idle_instance_ms
# (default: the node's, 10 s; a value longer than both passes keeps every instance alive, to
# tell the warm pass's tail with instances made again from the one without),
# WASMKEEP_DENSITY_GC_FLOOR sets actors.isolate_gc_floor_bytes (default: the node's, 64 MiB;
# 0 = V8's own collection heuristics, as before that setting existed),
# WASMKEEP_DENSITY_MAX_INSTANCES sets actors.max_instances (default: the node's, 20,000),
# WASMKEEP_DENSITY_KEEP=<dir> keeps each pass's answers (code, time) and the node's log,
# WASMKEEP_DENSITY_PERF=<file> records the node's CPU profile of the second pass with
# `perf record -g` into <file> (kept).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=common.sh
source bench/common.sh
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000 10000 50000)
with_workerd=${WASMKEEP_DENSITY_WORKERD:-1}
conc=${WASMKEEP_DENSITY_CONCURRENCY:-16}
idle_wait=${WASMKEEP_DENSITY_IDLE_WAIT:-15}
idle_instance_ms=${WASMKEEP_DENSITY_IDLE_INSTANCE_MS:-}
gc_floor=${WASMKEEP_DENSITY_GC_FLOOR:-}
max_instances=${WASMKEEP_DENSITY_MAX_INSTANCES:-}
perf_out=${WASMKEEP_DENSITY_PERF:-}
tenant=bench

# --- tools -------------------------------------------------------------------------------
# WASMKEEP_BENCH_DEPS=0: the build packages are known to be there (a shared machine whose
# third_party/local belongs to another checkout): skip scripts/install-deps.sh.
[ "${WASMKEEP_BENCH_DEPS:-1}" = 0 ] || ./scripts/install-deps.sh >/dev/null
command -v npm >/dev/null || { echo "npm is needed for workerd (apt-get install npm)"; exit 1; }
if [ -n "${WASMKEEP_DENSITY_WASMKEEP:-}" ]; then
  # Another build's binary (an older commit, for a before/after), with its counter.wasm.
  wk=$WASMKEEP_DENSITY_WASMKEEP
  counter_wasm=${WASMKEEP_DENSITY_COUNTER:-$(dirname "$wk")/../../actors/counter.wasm}
else
  cmake --preset release >/dev/null
  cmake --build --preset release --target wasmkeep wk_actors
  wk=$PWD/build/release/src/cli/wasmkeep
  counter_wasm=$PWD/build/release/actors/counter.wasm
fi
workerd=""
if [ "$with_workerd" = 1 ]; then workerd=$(install_workerd); fi

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

tmp=$(mktemp -d "$PWD/build/density-bench.XXXXXX")
server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
  workerd_pid=""
}
cleanup() {
  stop_server
  # A workerd that never became ready (start_workerd exits before server_pid is set).
  [ -z "${workerd_pid:-}" ] || kill -TERM "$workerd_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- servers -----------------------------------------------------------------------------
# Each sets url, token, server_pid.
start_wasmkeep() {  # DIR
  local dir=$1 port
  port=$(free_port)
  mkdir -p "$dir"
  cat >"$dir/wasmkeep.toml" <<TOML
[bucket]
url = "sqlite://$dir/bucket"
[node]
id = "density"
listen = "127.0.0.1:$port"
$(bench_lease_toml)
[actors]
idle_hibernate_ms = 600000   # the first pass of 50,000 takes minutes; see the header
TOML
  [ -z "$idle_instance_ms" ] || echo "idle_instance_ms = $idle_instance_ms" >>"$dir/wasmkeep.toml"
  [ -z "$gc_floor" ] || echo "isolate_gc_floor_bytes = $gc_floor" >>"$dir/wasmkeep.toml"
  [ -z "$max_instances" ] || echo "max_instances = $max_instances" >>"$dir/wasmkeep.toml"
  "$wk" --config "$dir/wasmkeep.toml" serve 2>"$dir/wasmkeep.log" &
  server_pid=$!
  token=$("$wk" --config "$dir/wasmkeep.toml" tenant add "$tenant" | tail -n1)
  "$wk" --config "$dir/wasmkeep.toml" deploy --tenant "$tenant" --class counter "$counter_wasm" >/dev/null
  url=http://127.0.0.1:$port
  wait_wasmkeep "$url" "$server_pid" "$dir/wasmkeep.log"
}
start_density_workerd() {  # DIR
  local port
  port=$(free_port)
  token=density-token
  start_workerd bench/http/counter-do.js bench/http/workerd.capnp "$1" "$port" "$token"
  server_pid=$workerd_pid
  url=http://127.0.0.1:$port
}

# --- helpers -----------------------------------------------------------------------------
# One pass: POST .../increment to PREFIX1..PREFIXn, CONC at a time; writes "code seconds"
# per call to OUT. Sets pass_seconds.
run_pass() {  # URL_PREFIX FIRST LAST OUT
  local i
  for ((i = $2; i <= $3; i++)); do
    printf 'url = "%s%s/increment"\noutput = "/dev/null"\n' "$1" "$i"
  done >"$tmp/pass.curl"
  local t0 t1
  t0=$(date +%s.%N)
  curl -s --no-progress-meter --parallel --parallel-max "$conc" -X POST -H "Authorization: Bearer $token" \
    -K "$tmp/pass.curl" -w '%{http_code} %{time_total}\n' >"$4"
  t1=$(date +%s.%N)
  pass_seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
}
# "ok COUNT non200 COUNT p50 MS p99 MS rate REQ/S" of a pass's output.
summarize() {  # OUT SECONDS
  local ok bad
  ok=$(awk '$1 == 200' "$1" | wc -l)
  bad=$(awk '$1 != 200' "$1" | wc -l)
  awk '{print $2 * 1000}' "$1" | sort -g | awk -v ok="$ok" -v bad="$bad" -v secs="$2" '
    {v[NR] = $1}
    END {printf "ok %d non200 %d p50 %.2f p99 %.2f rate %.0f", ok, bad, v[int(NR * 0.5) + 1], v[int(NR * 0.99) + 1], NR / secs}'
}
field() { awk -v k="$2" '{for (i = 1; i < NF; i++) if ($i == k) print $(i + 1)}' <<<"$1"; }
metric() {  # NAME [LABELS]
  curl -s "$url/metrics" | awk -v m="$1${2:-}" '$1 == m {print $2}'
}
sum_counts() {  # URL_PREFIX N
  local i
  for ((i = 1; i <= $2; i++)); do printf 'url = "%s%s"\n' "$1" "$i"; done >"$tmp/get.curl"
  curl -s --no-progress-meter --parallel --parallel-max "$conc" -H "Authorization: Bearer $token" -K "$tmp/get.curl" |
    awk '{s += $1} END {print s + 0}'
}
kib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1024}'; }
# The engine's counters (garbage collections by cause, instantiations) and the sqlite
# store's commits (how many, how many within 10 and 25 ms, checkpoints), one "name value" a
# line; pass_delta BEFORE AFTER prints what changed between two of them (the second pass).
pass_snapshot() {
  curl -s "$url/metrics" | awk '/^wasmkeep_engine_(gc|instantiation|slow_instantiations)[a-z_]*(\{[^}]*\})? / {print $1, $2}
    /^wasmkeep_store_sqlite_(commits_total|checkpoints_total|commit_seconds_count|commit_seconds_bucket\{le="0.01"\}|commit_seconds_bucket\{le="0.025"\}) / {print $1, $2}'
}
pass_delta() {
  awk 'NR == FNR {b[$1] = $2; next} {d = $2 - b[$1]; if ($1 ~ /seconds/) printf "%s %.3f\n", $1, d; else printf "%s %d\n", $1, d}' \
    <(echo "$1") <(echo "$2") | sed 's/^wasmkeep_engine_//' | tr '\n' ';' | sed 's/;$//; s/;/; /g'
}
# The event phases' histograms (wasmkeep_actor_event_phase_seconds) and, from two snapshots,
# each phase's mean and p99 over what happened between them (the p99 as the upper bound of the
# bucket holding it).
phase_snapshot() { curl -s "$url/metrics" | awk '/^wasmkeep_actor_event_phase_seconds_(bucket|sum|count)\{/ {print $1, $2}'; }
phase_delta() {
  awk 'NR == FNR {b[$1] = $2; next}
    { d = $2 - b[$1]; match($1, /phase="[a-z]+"/); ph = substr($1, RSTART + 7, RLENGTH - 8)
      if (!(ph in seen)) { seen[ph] = 1; order[++n] = ph }
      if ($1 ~ /_count\{/) cnt[ph] = d
      else if ($1 ~ /_sum\{/) sum[ph] = d
      else if (match($1, /le="[^"]+"/)) { k[ph]++; le[ph, k[ph]] = substr($1, RSTART + 4, RLENGTH - 5); c[ph, k[ph]] = d } }
    END { for (i = 1; i <= n; i++) { ph = order[i]; p99 = "?"
            for (j = 1; j <= k[ph]; j++) if (c[ph, j] >= 0.99 * cnt[ph]) { p99 = le[ph, j]; break }
            if (p99 != "?" && p99 != "+Inf") p99 = sprintf("%g", p99 * 1000)
            printf "%s%s mean %.2f ms, p99 <= %s ms", (i > 1 ? "; " : ""), ph, cnt[ph] ? 1000 * sum[ph] / cnt[ph] : 0, p99 } }' \
    <(echo "$1") <(echo "$2")
}
mib() { awk -v b="$1" 'BEGIN {printf "%.0f", b / 1048576}'; }

# --- run -----------------------------------------------------------------------------------
wk_git="$(git rev-parse --short HEAD 2>/dev/null || echo '?')"
[ -z "$(git status --porcelain --untracked-files=no -- src 2>/dev/null)" ] || wk_git="$wk_git+uncommitted src/ changes"
echo "setup: $(nproc) cores ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)), $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "       WasmKeep git $wk_git (release preset), one node, sqlite:// on $(df -h "$tmp" | awk 'NR==2{print $1}'), default [actors] but idle_hibernate_ms = 600000${idle_instance_ms:+ and idle_instance_ms = $idle_instance_ms}${gc_floor:+ and isolate_gc_floor_bytes = $gc_floor}${max_instances:+ and max_instances = $max_instances}"
[ -n "$workerd" ] && echo "       workerd $workerd_version ($("$workerd" --version 2>&1 | head -1)), localDisk on the same disk"
echo "       curl --parallel-max $conc (keep-alive); vm.max_map_count $(cat /proc/sys/vm/max_map_count); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo

declare -A warm_p99 results
goal_resident="" goal_rss="" goal_p99=""
for n in "${sizes[@]}"; do
  systems=(wasmkeep)
  [ -n "$workerd" ] && systems+=(workerd)
  for sys in "${systems[@]}"; do
    dir=$tmp/$sys-$n
    if [ "$sys" = wasmkeep ]; then start_wasmkeep "$dir"; else start_density_workerd "$dir"; fi
    prefix=$url/v1/actors/$tenant/counter/d
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    run_pass "$url/v1/actors/$tenant/counter/warmup-" 1 10 "$tmp/warm.out"
    base=$(rss_kib "$server_pid")
    run_pass "$prefix" 1 "$n" "$tmp/first.out"
    first_secs=$pass_seconds
    first=$(summarize "$tmp/first.out" "$first_secs")
    after=$(rss_kib "$server_pid")
    if [ "$sys" = wasmkeep ]; then
      resident=$(metric wasmkeep_actor_resident)
      instances=$(metric wasmkeep_actor_instances)
      budget_after=$(metric wasmkeep_actor_memory_bytes)
    else
      constructed_first=$(curl -s -H "Authorization: Bearer $token" "$url/_density" || echo "?")
    fi
    perf_pid=""
    if [ -n "$perf_out" ] && [ "$sys" = wasmkeep ]; then
      perf record -g -o "$perf_out-$n" -p "$server_pid" >/dev/null 2>&1 &
      perf_pid=$!
      sleep 1
    fi
    [ "$sys" = wasmkeep ] && pass_before=$(pass_snapshot) && phases_before=$(phase_snapshot) &&
      memories_before="$(metric wasmkeep_engine_linear_memories) memories, $(mib "$(metric wasmkeep_engine_linear_reserved_bytes)") MiB reserved"
    run_pass "$prefix" 1 "$n" "$tmp/second.out"
    if [ "$sys" = wasmkeep ]; then
      pass_second=$(pass_delta "$pass_before" "$(pass_snapshot)")
      phases_second=$(phase_delta "$phases_before" "$(phase_snapshot)")
      memories_after="$(metric wasmkeep_engine_linear_memories) memories, $(mib "$(metric wasmkeep_engine_linear_reserved_bytes)") MiB reserved"
    fi
    if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
    second_secs=$pass_seconds
    second=$(summarize "$tmp/second.out" "$second_secs")
    if [ "$sys" = wasmkeep ]; then
      sleep "$idle_wait"
      idle=$(rss_kib "$server_pid")
      resident_idle=$(metric wasmkeep_actor_resident)
      instances_idle=$(metric wasmkeep_actor_instances)
      budget_idle=$(metric wasmkeep_actor_memory_bytes)
      parts=""
      for p in linear state heap bookkeeping; do
        parts+="$p $(mib "$(metric wasmkeep_actor_memory_part_bytes "{part=\"$p\"}")") MiB, "
      done
    fi
    total=$(sum_counts "$prefix" "$n")
    load_after=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "== $sys, N = $n (load average $load_before -> $load_after)"
    echo "   first pass:  $(field "$first" ok) ok, $(field "$first" non200) other, in $first_secs s ($(field "$first" rate) calls/s): p50 $(field "$first" p50) ms, p99 $(field "$first" p99) ms"
    echo "   second pass: $(field "$second" ok) ok, $(field "$second" non200) other, in $second_secs s ($(field "$second" rate) calls/s): p50 $(field "$second" p50) ms, p99 $(field "$second" p99) ms"
    echo "   counters: sum $total (expected $((2 * n)))"
    per_after=$(awk -v a="$base" -v b="$after" -v n="$n" 'BEGIN {printf "%.1f", (b - a) / n}')
    echo "   RSS: base $((base / 1024)) MiB, after the first pass $((after / 1024)) MiB: $per_after KiB per actor called"
    if [ "$sys" = wasmkeep ]; then
      per_idle=$(awk -v a="$base" -v b="$idle" -v n="$resident_idle" 'BEGIN {printf "%.1f", (n > 0 ? (b - a) / n : 0)}')
      evicted=$(metric wasmkeep_actor_unloads_total '{reason="evicted"}')
      hibernated=$(metric wasmkeep_actor_unloads_total '{reason="hibernated"}')
      refused=$(metric wasmkeep_actor_memory_refusals_total)
      resident_end=$(metric wasmkeep_actor_resident)
      dropped=$(metric wasmkeep_actor_instances_dropped_total '{reason="idle"}')
      dropped_mem=$(metric wasmkeep_actor_instances_dropped_total '{reason="memory"}')
      dropped_lim=$(metric wasmkeep_actor_instances_dropped_total '{reason="limit"}')
      echo "   after the first pass: $resident resident, $instances with an instance; the budget counts $(mib "$budget_after") MiB ($(kib "$(awk -v b="$budget_after" -v n="$resident" 'BEGIN {print (n > 0 ? b / n : 0)}')") KiB per resident actor)"
      echo "   idle ${idle_wait} s later: RSS $((idle / 1024)) MiB: $per_idle KiB per idle resident actor; $resident_idle resident, $instances_idle with an instance; the budget counts $(mib "$budget_idle") MiB ($(kib "$(awk -v b="$budget_idle" -v n="$resident_idle" 'BEGIN {print (n > 0 ? b / n : 0)}')") KiB per resident actor): ${parts%, }"
      echo "   engine and store over the second pass: ${pass_second:-?}"
      echo "   where the second pass's events spent their time: ${phases_second:-?}"
      echo "   linear memories V8 held: $memories_before before the second pass, $memories_after after it; reservation collections $(metric wasmkeep_actor_reservation_collections_total)"
      echo "   at the end: $resident_end resident; evicted $evicted, hibernated $hibernated, refused $refused; instances dropped: idle $dropped, memory $dropped_mem, limit $dropped_lim; RSS $(($(rss_kib "$server_pid") / 1024)) MiB"
      warm_p99[$n]=$(field "$second" p99)
      results[$n]="$resident_end $evicted $refused $budget_idle $per_idle $(field "$second" non200)"
    else
      constructed=$(curl -s -H "Authorization: Bearer $token" "$url/_density" || echo "?")
      echo "   objects constructed by the worker: $constructed_first after the first pass, $constructed after the second (more than $((n + 10)): it evicted objects and made them again)"
    fi
    if [ "$sys" = wasmkeep ]; then
      warnings=$(awk '$2 == "warn" || $2 == "warning" || $2 == "error"' "$dir/wasmkeep.log")
      echo "   log: $(grep -c . <<<"$warnings") warnings and errors of $(wc -l <"$dir/wasmkeep.log") lines"
      # The first few, so a run explains itself (the directory is deleted below).
      [ -z "$warnings" ] || head -n 5 <<<"$warnings" | cut -c1-300 | sed 's/^/     /'
    fi
    stop_server
    # WASMKEEP_DENSITY_KEEP=<dir>: keep every pass's answers (code and time per call, in
    # completion order) and the node's log, to study the latencies' shape.
    if [ -n "${WASMKEEP_DENSITY_KEEP:-}" ]; then
      mkdir -p "$WASMKEEP_DENSITY_KEEP/$sys-$n"
      cp "$tmp/first.out" "$tmp/second.out" "$WASMKEEP_DENSITY_KEEP/$sys-$n/"
      cp "$dir"/*.log "$WASMKEEP_DENSITY_KEEP/$sys-$n/" 2>/dev/null || true
    fi
    # A pass with answers other than 200: keep what explains them.
    if awk '$1 != 200 {bad = 1} END {exit !bad}' "$tmp/first.out" "$tmp/second.out"; then
      keep=build/density-failed-$sys-$n-$(date -u +%H%M%S)
      mkdir -p "$keep"
      cp "$tmp/first.out" "$tmp/second.out" "$keep/"
      cp "$dir"/*.log "$keep/" 2>/dev/null || true
      echo "   answers other than 200 by code: $(awk '$1 != 200 {c[$1]++} END {for (k in c) printf "%s x%d ", k, c[k]}' "$tmp/first.out" "$tmp/second.out"); kept in $keep"
    fi
    rm -rf "$dir"
    echo
  done
done

# --- goals ---------------------------------------------------------------------------------
echo "goals (WasmKeep):"
budget=1073741824
for n in "${sizes[@]}"; do
  read -r res ev ref bud per bad <<<"${results[$n]}"
  verdict=met
  # Resident counts the 10 warm-up actors too.
  { [ "${res:-0}" -ge "$n" ] && [ "${bad:-1}" = 0 ] && [ "$ev" = 0 ] && [ "$ref" = 0 ] && awk -v b="$bud" -v m="$budget" 'BEGIN {exit !(b <= m)}'; } || verdict="NOT met"
  echo "  N = $n: $res resident (of $n and 10 warm-up actors), $ev evicted, $ref refused, $bad second-pass calls not 200, budget's view $(mib "$bud") MiB of 1024: $verdict; RSS per idle resident actor $per KiB (goal <= 8): $(awk -v p="$per" 'BEGIN {print (p <= 8 ? "met" : "NOT met")}')"
done
if [ -n "${warm_p99[1000]:-}" ] && [ -n "${warm_p99[50000]:-}" ]; then
  echo "  warm-call p99 over 50,000 ${warm_p99[50000]} ms vs over 1,000 ${warm_p99[1000]} ms (goal <= 2x): $(awk -v a="${warm_p99[50000]}" -v b="${warm_p99[1000]}" 'BEGIN {printf "%.2fx, %s", a / b, (a <= 2 * b ? "met" : "NOT met")}')"
fi
echo "machine load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
