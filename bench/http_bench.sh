#!/usr/bin/env bash
# WasmKeep against Cloudflare's workerd, serving the counter over HTTP on this machine, in
# one run. Prints one table (req/s, p50, p99 of each, and the ratio) plus
# the correctness and durability checks; docs/benchmarks.md records a run and its setup.
#
#   bench/http_bench.sh [SECONDS_PER_RUN]        (default 10; about 14 minutes in all)
#
# Workload, the same for both: POST /v1/actors/bench/counter/<name>/increment with
# "Authorization: Bearer <token>", driven by wrk (bench/http/increment.lua) on one hot actor,
# then round robin over 1,000 actors, each at 1 connection (wrk -t1 -c1) and 16 (-t2 -c16),
# then round robin over 10,000 actors at 16 connections (their creation measures each
# server's resident memory per actor: VmRSS after creating them minus before, / 10,000).
# Before each measurement the actors are warmed (every one called once, then 2 s of the
# same load, unmeasured), because workerd evicts objects idle for about 10 s. Each case runs
# in 3 rounds (WASMKEEP_HTTP_BENCH_ROUNDS), the two systems alternating (A B, B A, A B), and
# the table gives the medians: this machine's disk and CPU are shared, and an fsync's latency
# changes several times over within a minute (a 1 s write+fsync probe is printed before each
# round).
#
#   WasmKeep: the release build's `wasmkeep serve`, one node on a fresh sqlite:// bucket
#             (WASMKEEP_HTTP_BENCH_BUCKET=file for the one-file-per-object file:// instead,
#             =s3 for a fresh bucket on the S3 server of WASMKEEP_S3_ENDPOINT and AWS_*, or
#             on the project's RGW, started here when that is not set: scripts/rgw.sh),
#             default settings except a short node lease ([lease] ttl 3 s, grace 1 s) so the
#             node is ready in about 4 s instead of 15 s; the counter is
#             build/release/actors/counter.wasm (examples/counter/counter.cc).
#   workerd:  npm's workerd (WASMKEEP_WORKERD_VERSION, installed into build/bench-cache/),
#             running bench/http/counter-do.js: a worker checking the same token and routing
#             to a Durable Object idFromName("<tenant>/<name>"), with
#             durableObjectStorage = (localDisk = ...) in a fresh directory on the same disk.
#
# Checks: after each run the counters are read back with GET (the hot one, or the sum of the
# 1,000) and compared with wrk's 2xx count: the increase may exceed it by at most the number
# of connections (requests in flight when wrk stops are served but not counted by wrk). With
# strace present, 20 increments of a fresh actor are traced on each server to show what each
# syncs per acknowledged write.
#
# The floor, measured beside the hot actor at one connection in each of its rounds: the
# disk's 4 KiB write+fsync (the probe above), one HTTP round trip over loopback to the node
# doing no actor work (wrk -c1 on /healthz, 1 s), and on s3 one 4 KiB PUT to the bucket (20
# in a row). After the table, "speed at the limit" checks docs/benchmarks.md's goals from the
# medians: hot c1 p50 against 2 x fsync + round trip (and on s3 against PUT + 1 ms), p99 <= 5
# x p50 and <= 10 ms per case, CPU per request at c16 (both systems' user + system time over
# the requests; goal <= 60 us for WasmKeep), and the log-segment PUTs per acknowledged write
# (from the node's wasmkeep_bucket_requests_total; goal: 10 writes per PUT at hot c16).
#
# Long case (opt-in): WASMKEEP_HTTP_BENCH_GC_MINUTES=10 then runs WasmKeep alone on the 1,000
# actors at 16 connections for that many minutes, printing req/s per minute beside the
# objects garbage collection deleted so far (wasmkeep_replica_gc_deleted_total), to show
# whether throughput falls once GC has run for a while.
#
# It always reports: a step that fails (a peer that dies, a warm-up answered with errors, wrk
# printing no result) is a row saying so, with the peer's exit status, its last log lines and
# its last resident memory, and the run goes on with the other system; a peer that died takes
# no further part. The table is printed even if the script stops early for a reason of its
# own (the line and command that failed are named).
#
# Environment: WASMKEEP_WORKERD_VERSION (default 1.20261117.1), WASMKEEP_HTTP_BENCH_ROUNDS
# (default 3), WASMKEEP_HTTP_BENCH_STRACE=0 skips the strace check, WASMKEEP_HTTP_BENCH_BUCKET
# (sqlite, file or s3; default sqlite), WASMKEEP_HTTP_BENCH_GC_MINUTES (default 0: no long case),
# WASMKEEP_HTTP_BENCH_CASES (default "hot:1 hot:16 rr:1 rr:16 rr10k:16"; empty runs only the
# long case), WASMKEEP_HTTP_BENCH_SPIN_US (the node's actors.spin_us, 0-1000; unset: the
# node's default, docs/configuration.md), WASMKEEP_SKIP_INSTALL_DEPS=1 (the tools are
# installed already: scripts/install-deps.sh is not run), WASMKEEP_HTTP_BENCH_PRESET (the
# CMake preset whose wasmkeep runs; default release: others are for trying the bench out).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=common.sh
source bench/common.sh
seconds=${1:-10}
warm_seconds=2
rounds=${WASMKEEP_HTTP_BENCH_ROUNDS:-3}
actors=1000
many_actors=10000
tenant=bench
bucket_scheme=${WASMKEEP_HTTP_BENCH_BUCKET:-sqlite}
gc_minutes=${WASMKEEP_HTTP_BENCH_GC_MINUTES:-0}
case "$bucket_scheme" in sqlite | file | s3) ;; *) echo "WASMKEEP_HTTP_BENCH_BUCKET must be sqlite, file or s3"; exit 2 ;; esac
spin_us=${WASMKEEP_HTTP_BENCH_SPIN_US:-}
[[ -z $spin_us || $spin_us =~ ^[0-9]+$ ]] || { echo "WASMKEEP_HTTP_BENCH_SPIN_US must be a number of microseconds"; exit 2; }

# --- tools -------------------------------------------------------------------------------
[ "${WASMKEEP_SKIP_INSTALL_DEPS:-0}" = 1 ] || ./scripts/install-deps.sh >/dev/null
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
command -v wrk >/dev/null || apt_install wrk
command -v npm >/dev/null || apt_install nodejs npm
preset=${WASMKEEP_HTTP_BENCH_PRESET:-release}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target wasmkeep wk_actors
wk=$PWD/build/$preset/src/cli/wasmkeep
counter_wasm=$PWD/build/$preset/actors/counter.wasm

workerd=$(install_workerd)

# --- servers -----------------------------------------------------------------------------
tmp=$(mktemp -d "$PWD/build/http-bench.XXXXXX")
wk_pid="" workerd_pid=""
reported=0
cleanup() {
  local status=$?
  # Stopped early (a failure of the bench's own, an interrupt): what ran is still reported.
  if [ "$reported" = 0 ] && declare -F report >/dev/null && [ "${#cases[@]}" -gt 0 ]; then
    echo
    echo "the bench stopped early (status $status); what ran:"
    report || true
  fi
  for p in $wk_pid $workerd_pid; do
    kill -TERM "$p" 2>/dev/null || true
  done
  for p in $wk_pid $workerd_pid; do
    wait "$p" 2>/dev/null || true
  done
  [ -z "$rgw_dir" ] || ./scripts/rgw.sh stop "$rgw_dir" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A command that fails where the bench does not expect it is named, never a silent exit.
trap 'echo "http_bench: line $LINENO: \"$BASH_COMMAND\" failed (status $?)" >&2' ERR
cases=()

# On s3, the project's RGW (or any S3 server in WASMKEEP_S3_ENDPOINT and AWS_*), started here
# when none is given; a fresh bucket. s3_request: one signed request to it (curl).
rgw_dir=""
s3_request() {  # curl arguments...
  curl -s --aws-sigv4 "aws:amz:${WASMKEEP_S3_REGION:-us-east-1}:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"
}
if [ "$bucket_scheme" = s3 ]; then
  if [ -z "${WASMKEEP_S3_ENDPOINT:-}" ]; then
    echo "starting the project's RGW (scripts/rgw.sh, 127.0.0.1)"
    rgw_dir=$tmp/rgw
    mkdir -p "$rgw_dir"
    ./scripts/rgw.sh start "$rgw_dir" >"$tmp/rgw.out" 2>"$tmp/rgw.err" ||
      { echo "http_bench: scripts/rgw.sh start failed; its last lines:"; tail -n 15 "$tmp/rgw.err"; exit 1; }
    # shellcheck disable=SC1091
    source "$rgw_dir/env"
  fi
  s3_bucket="httpbench-$(date +%s%N | tail -c 9)"
  code=$(s3_request -o "$tmp/mkbucket.out" -w '%{http_code}' --max-time 20 -X PUT "$WASMKEEP_S3_ENDPOINT/$s3_bucket")
  [ "$code" = 200 ] || { echo "http_bench: cannot create the bucket $s3_bucket: HTTP $code $(head -c 300 "$tmp/mkbucket.out")"; exit 1; }
  bucket_url="s3://$s3_bucket?endpoint=$WASMKEEP_S3_ENDPOINT&region=${WASMKEEP_S3_REGION:-us-east-1}&if_match_quoted=false"
else
  bucket_url="$bucket_scheme://$tmp/wk-bucket"
fi

wk_port=$(free_port)
cat >"$tmp/wasmkeep.toml" <<TOML
[bucket]
url = "$bucket_url"
[node]
id = "bench"
listen = "127.0.0.1:$wk_port"
TOML
bench_lease_toml >>"$tmp/wasmkeep.toml"
if [ -n "$spin_us" ]; then
  printf '[actors]\nspin_us = %s\n' "$spin_us" >>"$tmp/wasmkeep.toml"
fi
W() { "$wk" --config "$tmp/wasmkeep.toml" "$@"; }
"$wk" --config "$tmp/wasmkeep.toml" serve 2>"$tmp/wasmkeep.log" &
wk_pid=$!
token=$(W tenant add "$tenant" | tail -n1)
W deploy --tenant "$tenant" --class counter "$counter_wasm" >/dev/null
wk_url=http://127.0.0.1:$wk_port
wait_wasmkeep "$wk_url" "$wk_pid" "$tmp/wasmkeep.log"

workerd_port=$(free_port)
start_workerd bench/http/counter-do.js bench/http/workerd.capnp "$tmp/workerd" "$workerd_port" "$token"
workerd_url=http://127.0.0.1:$workerd_port

# --- helpers -----------------------------------------------------------------------------
auth=(-H "Authorization: Bearer $token")
# A curl config with the URLs PREFIX1SUFFIX..PREFIXnSUFFIX (PREFIXSUFFIX alone when n is 0);
# with DISCARD=1 every body goes to /dev/null (curl's -o applies to one URL only).
curl_config() {  # URL_PREFIX SUFFIX N [DISCARD]
  local i out=""
  [ "${4:-0}" = 1 ] && out='output = "/dev/null"'
  if [ "$3" = 0 ]; then
    printf 'url = "%s%s"\n%s\n' "$1" "$2" "$out"
  else
    for i in $(seq 1 "$3"); do printf 'url = "%s%s%s"\n%s\n' "$1" "$i" "$2" "$out"; done
  fi
}
# Calls every actor once with POST .../increment; fails unless every answer is 200.
warm_calls() {  # URL_PREFIX N
  curl_config "$1" /increment "$2" 1 >"$tmp/warm.curl"
  local codes
  codes=$(curl -s --no-progress-meter --parallel --parallel-max 16 -X POST "${auth[@]}" -K "$tmp/warm.curl" \
    -w '%{http_code}\n' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
  [[ $codes == " $(( $2 == 0 ? 1 : $2 )) 200;" ]] || { step_error="warm-up of $1: answers (count code;) $codes"; return 1; }
}
# The sum of the counters (GET each), then how many reads did not answer a number: "SUM BAD".
sum_counts() {  # URL_PREFIX N
  curl_config "$1" "" "$2" >"$tmp/get.curl"
  { curl -s --no-progress-meter --parallel --parallel-max 16 "${auth[@]}" -K "$tmp/get.curl" -w '\n' || true; } |
    awk 'NF == 0 {next} $1 ~ /^[0-9]+$/ {s += $1; next} {bad++} END {print s + 0, bad + 0}'
}
# Runs wrk and sets r_rps r_p50 r_p99 r_ok r_non2xx r_errors r_cpu r_cpu_us from its result
# line.
# shellcheck disable=SC2154  # the w_* variables come from the eval of that line
run_wrk() {  # NAME URL CONNS THREADS SECONDS SERVER_PID LUA_ARGS...
  local name=$1 url=$2 conns=$3 threads=$4 secs=$5 pid=$6
  shift 6
  local t0 t1
  t0=$(cpu_ticks "$pid")
  wrk -t"$threads" -c"$conns" -d"${secs}s" --latency "${auth[@]}" -s bench/http/increment.lua \
    "$url" -- "$@" >"$tmp/$name.out" 2>&1
  t1=$(cpu_ticks "$pid")
  local line
  line=$(grep '^WRK_RESULT' "$tmp/$name.out") ||
    { step_error="wrk printed no result: $(tail -n 3 "$tmp/$name.out" | tr '\n' ' ')"; return 1; }
  if [ -z "$t0" ] || [ -z "$t1" ]; then t0=0 t1=0; fi
  eval "$(echo "$line" | sed 's/^WRK_RESULT //' | tr ' ' '\n' | sed 's/^/w_/')"
  r_rps=$(awk -v n="$w_requests" -v d="$w_duration_us" 'BEGIN {printf "%.0f", n / (d / 1e6)}')
  r_p50=$(awk -v v="$w_p50_us" 'BEGIN {printf "%.2f", v / 1000}')
  r_p99=$(awk -v v="$w_p99_us" 'BEGIN {printf "%.2f", v / 1000}')
  r_ok=$((w_requests - w_non2xx))
  r_non2xx=$w_non2xx
  r_errors="connect $w_connect, read $w_read, write $w_write, timeout $w_timeout"
  r_cpu=$(awk -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v d="$w_duration_us" \
    'BEGIN {printf "%.0f", 100 * t / hz / (d / 1e6)}')
  # The server's CPU per request: its user + system time over the requests wrk counted (the
  # clock ticks are 10 ms: over 10 s of a busy server, a 1 % resolution).
  r_cpu_us=$(awk -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v n="$w_requests" \
    'BEGIN {printf "%.0f", (n > 0 ? t / hz * 1e6 / n : 0)}')
}

# Sets base and n, the wrk arguments of a case: one hot actor, or round robin.
case_target() {  # CASE CONNS
  case $1 in
    hot) base=/v1/actors/$tenant/counter/hot-c$2 n=0 ;;
    rr) base=/v1/actors/$tenant/counter/rr- n=$actors ;;
    rr10k) base=/v1/actors/$tenant/counter/many- n=$many_actors ;;
  esac
}
# A peer that fails takes no further part: failed[SYSTEM] says why (check_peer, note_rss:
# bench/common.sh).
# shellcheck disable=SC2034  # last_rss: note_rss and check_peer (common.sh) keep and read it
declare -A failed last_rss
pid_of() { if [ "$1" = wasmkeep ]; then echo "$wk_pid"; else echo "$workerd_pid"; fi; }
log_of() { if [ "$1" = wasmkeep ]; then echo "$tmp/wasmkeep.log"; else echo "$tmp/workerd/workerd.log"; fi; }
# One round of one case on one system: warm, read the counters, measure, read them again,
# check. Sets res[SYSTEM,CASE,CONNS,ROUND] = "req/s p50 p99 cpu% cpu-us/req", and for WasmKeep
# puts[CASE,CONNS,ROUND] = the bucket PUTs of its actors' log segments per acknowledged write.
declare -A res puts
# The PUTs of log segments (purpose "segment") the node has made so far, any outcome.
segment_puts() {
  curl -s "$wk_url/metrics" | awk '$1 ~ /^wasmkeep_bucket_requests_total\{/ && index($1, "op=\"put\"") && index($1, "purpose=\"segment\"") {s += $2}
    END {printf "%.0f", s + 0}' || echo 0
}
run_case() {  # SYSTEM URL PID CASE CONNS THREADS ROUND
  local sys=$1 url=$2 pid=$3 case=$4 conns=$5 threads=$6 round=$7
  local base n where="case $4 c$5 round $7"
  if [ -n "${failed[$sys]:-}" ]; then
    printf '  %s %-8s not run: %s\n' "$round" "$sys" "${failed[$sys]}"
    return 0
  fi
  note_rss "$sys" "$pid"
  case_target "$case" "$conns"
  step_error=""
  if ! warm_calls "$url$base" "$n" ||
    ! run_wrk "$sys-$case-c$conns-$round-warm" "$url" "$conns" "$threads" "$warm_seconds" "$pid" "$base" "$n"; then
    printf '  %s %-8s FAILED: %s\n' "$round" "$sys" "$step_error"
    check_peer "$sys" "$where (warm-up)" grace
    return 0
  fi
  local before after bad_before bad_after
  read -r before bad_before <<<"$(sum_counts "$url$base" "$n")"
  local seg_before=0 seg_after=0
  if [ "$sys" = wasmkeep ]; then seg_before=$(segment_puts); fi
  if ! run_wrk "$sys-$case-c$conns-$round" "$url" "$conns" "$threads" "$seconds" "$pid" "$base" "$n"; then
    printf '  %s %-8s FAILED: %s\n' "$round" "$sys" "$step_error"
    check_peer "$sys" "$where" grace
    return 0
  fi
  if [ "$sys" = wasmkeep ]; then seg_after=$(segment_puts); fi
  read -r after bad_after <<<"$(sum_counts "$url$base" "$n")"
  if ! kill -0 "$pid" 2>/dev/null; then
    # Died under the load: what wrk measured is not a figure of this system.
    printf '  %s %-8s FAILED: the process ended during the measurement (wrk: %s req/s, errors %s)\n' \
      "$round" "$sys" "$r_rps" "$r_errors"
    check_peer "$sys" "$where"
    return 0
  fi
  note_rss "$sys" "$pid"
  local delta=$((${after:-0} - ${before:-0})) verdict=ok
  if ((delta < r_ok || delta > r_ok + conns)); then verdict=MISMATCH; fi
  if ((${bad_before:-0} + ${bad_after:-0} > 0)); then
    verdict="NOT CHECKED: $((${bad_before:-0} + ${bad_after:-0})) counter reads answered with an error"
  fi
  res[$sys,$case,$conns,$round]="$r_rps $r_p50 $r_p99 $r_cpu $r_cpu_us"
  local seg=""
  if [ "$sys" = wasmkeep ] && ((r_ok > 0)); then
    puts[$case,$conns,$round]=$(awk -v p=$((seg_after - seg_before)) -v w="$r_ok" 'BEGIN {printf "%.3f", p / w}')
    seg="; segment PUTs per write ${puts[$case,$conns,$round]}"
  fi
  printf '  %s %-8s %6s req/s  p50 %6s ms  p99 %7s ms  CPU %3s%% (%s us/req)  2xx %6s, non-2xx %s, errors %s; counters +%s: %s%s\n' \
    "$round" "$sys" "$r_rps" "$r_p50" "$r_p99" "$r_cpu" "$r_cpu_us" "$r_ok" "$r_non2xx" "$r_errors" "$delta" "$verdict" "$seg"
  [ "$verdict" = ok ] || mismatches=$((mismatches + 1))
}
# The median of field F (1-based) of res over the rounds of SYSTEM CASE CONNS, printed with
# FORMAT (default %.0f).
median() {  # SYSTEM CASE CONNS F [FORMAT]
  local r
  for r in $(seq 1 "$rounds"); do
    if [ -n "${res[$1,$2,$3,$r]:-}" ]; then cut -d' ' -f"$4" <<<"${res[$1,$2,$3,$r]}"; fi
  done |
    sort -g | awk -v f="${5:-%.0f}" '{v[NR] = $1}
      END {if (NR == 0) {printf "-"; exit} printf f, (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'
}
# How many rounds of SYSTEM CASE CONNS were measured.
measured() {  # SYSTEM CASE CONNS
  local r k=0
  for r in $(seq 1 "$rounds"); do if [ -n "${res[$1,$2,$3,$r]:-}" ]; then k=$((k + 1)); fi; done
  echo "$k"
}

# The table and the figures of what ran (also from cleanup when the bench stops early).
report() {
  echo
  echo "Medians over $rounds rounds; the last column is the ratio of the medians, then the range of the per-round ratios."
  echo
  echo "| workload | conns | WasmKeep req/s | p50 ms | p99 ms | CPU µs/req | workerd req/s | p50 ms | p99 ms | CPU µs/req | req/s WasmKeep/workerd |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for c in "${cases[@]}"; do
    read -r case conns _ <<<"$c"
    label="1 hot actor"
    [ "$case" = rr ] && label="$actors actors round robin"
    [ "$case" = rr10k ] && label="$many_actors actors round robin"
    a_rps=$(median wasmkeep "$case" "$conns" 1) b_rps=$(median workerd "$case" "$conns" 1)
    if [ "$a_rps" = - ] || [ "$b_rps" = - ]; then
      ratio=- range="not measured on both:$(for sys in wasmkeep workerd; do
        [ "$(measured "$sys" "$case" "$conns")" = 0 ] && printf ' %s %s;' "$sys" "${failed[$sys]:-no round measured (see its rows)}"
      done)"
    else
      ratio=$(awk -v a="$a_rps" -v b="$b_rps" 'BEGIN {printf (b > 0 ? "%.2f" : "-"), a / b}')
      range=$(for r in $(seq 1 "$rounds"); do
        [ -n "${res[wasmkeep,$case,$conns,$r]:-}" ] && [ -n "${res[workerd,$case,$conns,$r]:-}" ] || continue
        awk -v a="$(cut -d' ' -f1 <<<"${res[wasmkeep,$case,$conns,$r]}")" \
          -v b="$(cut -d' ' -f1 <<<"${res[workerd,$case,$conns,$r]}")" 'BEGIN {printf "%.2f\n", (b > 0 ? a / b : 0)}'
      done | sort -g | sed -n '1p;$p' | paste -sd'-')
      for sys in wasmkeep workerd; do
        k=$(measured "$sys" "$case" "$conns")
        [ "$k" = "$rounds" ] || range="$range; $sys: $k of $rounds rounds"
      done
    fi
    echo "| $label | $conns | $a_rps | $(median wasmkeep "$case" "$conns" 2 %.2f) | $(median wasmkeep "$case" "$conns" 3 %.2f) | $(median wasmkeep "$case" "$conns" 5) | $b_rps | $(median workerd "$case" "$conns" 2 %.2f) | $(median workerd "$case" "$conns" 3 %.2f) | $(median workerd "$case" "$conns" 5) | **$ratio×** ($range) |"
  done
  echo
  echo "server CPU, % of one core during the measurement (median): $(for c in "${cases[@]}"; do
    read -r case conns _ <<<"$c"
    printf '%s c%s: WasmKeep %s%%, workerd %s%%; ' "$case" "$conns" "$(median wasmkeep "$case" "$conns" 4)" "$(median workerd "$case" "$conns" 4)"
  done)"
  echo "machine: $(nproc) cores; load average before $load_before, after ${load_after:-(stopped early)}"
  echo "disk: before $disk_before; after ${disk_after:-(stopped early)}"
  echo "correctness: $mismatches of $((2 * rounds * ${#cases[@]})) runs off (counters read back against wrk's 2xx count)"
  if [ -n "${rss_per_actor[wasmkeep]:-}${rss_per_actor[workerd]:-}" ]; then
    echo "resident memory per actor (creating $many_actors actors): WasmKeep ${rss_per_actor[wasmkeep]:-not measured} KiB, workerd ${rss_per_actor[workerd]:-not measured} KiB"
  fi
  for sys in wasmkeep workerd; do
    [ -z "${failed[$sys]:-}" ] || echo "$sys: ${failed[$sys]}"
  done

  reported=1
}

# --- the floor a request stands on ---------------------------------------------------------
fsync_p50s=() rtt_p50s=() put_p50s=()
# rtt_probe URL: the p50 in ms of 1 s of GETs of URL at one connection (wrk), or fails.
rtt_probe() {
  wrk -t1 -c1 -d1s --latency "$1" 2>/dev/null |
    awk '$1 == "50%" {v = $2; u = 1; if (v ~ /us$/) u = 0.001; else if (v ~ /ms$/) u = 1; else if (v ~ /s$/) u = 1000
      sub(/[a-z]+$/, "", v); printf "%.3f", v * u; found = 1} END {exit !found}'
}
# put_probe N: the p50 in ms of N PUTs of 4 KiB to the bench's bucket, one after another on one
# connection (curl), or fails.
put_probe() {
  head -c 4096 /dev/zero >"$tmp/put-probe.bin"
  local i
  for i in $(seq 1 "$1"); do
    printf 'url = "%s/%s/put-probe/%d"\nupload-file = "%s"\n' "$WASMKEEP_S3_ENDPOINT" "$s3_bucket" "$i" "$tmp/put-probe.bin"
  done >"$tmp/put-probe.curl"
  s3_request -o /dev/null -K "$tmp/put-probe.curl" -w '%{http_code} %{time_total}\n' |
    awk '$1 == 200 {print $2 * 1000} $1 != 200 {bad++} END {exit bad > 0}' | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) exit 1; printf "%.3f", v[int((NR + 1) / 2)]}'
}
# median_of VALUES...: their median (%.3f), or "-" for none.
median_of() {
  printf '%s\n' "$@" | awk 'NF' | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) {printf "-"; exit} printf "%.3f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'
}

# --- run -----------------------------------------------------------------------------------
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
wk_git="$(git rev-parse --short HEAD 2>/dev/null || echo '?')"
[ -z "$(git status --porcelain --untracked-files=no -- src 2>/dev/null)" ] || wk_git="$wk_git+uncommitted src/ changes"
echo "setup: $(nproc) cores ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)), $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ)"
if [ "$bucket_scheme" = s3 ]; then bucket_note="s3:// at $WASMKEEP_S3_ENDPOINT ($(radosgw --version 2>/dev/null | awk '{print "radosgw " $3}'))"
else bucket_note="$bucket_scheme:// on $(df -h "$tmp" | awk 'NR==2{print $1}')"; fi
echo "       WasmKeep git $wk_git ($preset preset), one node (actors.spin_us ${spin_us:-default}), $bucket_note, $(W --version 2>/dev/null | head -1)"
echo "       workerd $workerd_version from npm ($("$workerd" --version 2>&1 | head -1)), localDisk on the same disk"
echo "       $({ wrk --version 2>&1 || true; } | head -1 | cut -d' ' -f1-2), $rounds rounds of ${seconds} s per case and system, each after ${warm_seconds} s of warm-up; load average before: $load_before"
disk_before=$(disk_probe "$tmp")
echo "disk before: $disk_before"
echo
# The 1,000 actors are created once, here (the first call of each: WasmKeep acquires the
# actor and restores its empty state; workerd creates its SQLite database), and shared by
# both round-robin cases.
for sys in wasmkeep workerd; do
  url=$wk_url
  [ "$sys" = workerd ] && url=$workerd_url
  t0=$(date +%s.%N)
  if ! warm_calls "$url/v1/actors/$tenant/counter/rr-" "$actors"; then
    printf 'first call of %s new actors (16 at a time), %-8s FAILED: %s\n' "$actors" "$sys" "$step_error"
    check_peer "$sys" "the first call of $actors actors" grace
    continue
  fi
  t1=$(date +%s.%N)
  printf 'first call of %s new actors (16 at a time), %-8s %6.2f s\n' "$actors" "$sys" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')"
done
# The 10,000 actors likewise, with each server's resident memory before and right after
# (workerd evicts objects idle for about 10 s, WasmKeep hibernates actors after 30 s: both
# still hold all of them when the second figure is read).
declare -A rss_per_actor
selected=${WASMKEEP_HTTP_BENCH_CASES-hot:1 hot:16 rr:1 rr:16 rr10k:16}
for c in $selected; do
  case $c in
    hot:1 | rr:1) cases+=("${c%%:*} 1 1") ;;
    hot:16 | rr:16 | rr10k:16) cases+=("${c%%:*} 16 2") ;;
    *) echo "WASMKEEP_HTTP_BENCH_CASES: unknown case $c"; exit 2 ;;
  esac
done
for sys in wasmkeep workerd; do
  [[ " $selected " == *" rr10k:16 "* ]] || break
  [ -z "${failed[$sys]:-}" ] || { echo "first call of $many_actors new actors, $sys not run: ${failed[$sys]}"; continue; }
  url=$wk_url pid=$wk_pid
  [ "$sys" = workerd ] && url=$workerd_url pid=$workerd_pid
  r0=$(rss_kib "$pid")
  note_rss "$sys" "$pid"
  t0=$(date +%s.%N)
  if ! warm_calls "$url/v1/actors/$tenant/counter/many-" "$many_actors"; then
    printf 'first call of %s new actors (16 at a time), %-8s FAILED: %s\n' "$many_actors" "$sys" "$step_error"
    check_peer "$sys" "the first call of $many_actors actors" grace
    continue
  fi
  t1=$(date +%s.%N)
  r1=$(rss_kib "$pid")
  note_rss "$sys" "$pid"
  rss_per_actor[$sys]=$(awk -v a="$r0" -v b="$r1" -v n="$many_actors" 'BEGIN {printf "%.1f", (b - a) / n}')
  printf 'first call of %s new actors (16 at a time), %-8s %6.2f s; resident %s MiB -> %s MiB: %s KiB per actor\n' \
    "$many_actors" "$sys" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" \
    "$((r0 / 1024))" "$((r1 / 1024))" "${rss_per_actor[$sys]}"
done
echo
mismatches=0
for c in "${cases[@]}"; do
  read -r case conns threads <<<"$c"
  echo "case $case c$conns ($rounds rounds of ${seconds} s each, alternating; load average $(cut -d' ' -f1-3 /proc/loadavg)):"
  for round in $(seq 1 "$rounds"); do
    disk_now=$(disk_probe "$tmp" 1)
    echo "  disk now: $disk_now"
    if [ "$case $conns" = "hot 1" ]; then
      # The floor of a hot actor at one connection, measured beside it: the disk's write+fsync
      # (above), one HTTP round trip over loopback to the node doing no actor work, and on s3
      # one PUT of 4 KiB to the bucket.
      fsync_p50s+=("$(sed -E 's/.* p50 ([0-9.]+) ms.*/\1/' <<<"$disk_now")")
      if [ -z "${failed[wasmkeep]:-}" ] && rtt=$(rtt_probe "$wk_url/healthz"); then
        rtt_p50s+=("$rtt")
        echo "  loopback HTTP round trip (wrk -c1 on /healthz, 1 s): p50 $rtt ms"
      fi
    fi
    if [ "$bucket_scheme" = s3 ] && [ "$case" = hot ] && put=$(put_probe 20); then
      put_p50s+=("$put")
      echo "  bucket PUT of 4 KiB (20 in a row on one connection): p50 $put ms"
    fi
    if ((round % 2)); then order="wasmkeep workerd"; else order="workerd wasmkeep"; fi
    for sys in $order; do
      if [ "$sys" = wasmkeep ]; then
        run_case wasmkeep "$wk_url" "$wk_pid" "$case" "$conns" "$threads" "$round"
      else
        run_case workerd "$workerd_url" "$workerd_pid" "$case" "$conns" "$threads" "$round"
      fi
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
disk_after=$(disk_probe "$tmp")
report

# The goals of docs/benchmarks.md ("The embedded bucket at disk speed"), from the medians.
goal() {  # TEXT CASE CONNS MIN_RATIO CHECK_P99
  local a b ratio verdict=met
  a=$(median wasmkeep "$2" "$3" 1) b=$(median workerd "$2" "$3" 1)
  if [ "$a" = - ] && [ "$b" = - ]; then return 0; fi
  if [ "$a" = - ] || [ "$b" = - ]; then
    echo "  $1: not measured on both systems (see the rows above)"
    return 0
  fi
  ratio=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
  awk -v r="$ratio" -v m="$4" 'BEGIN {exit !(r >= m)}' || verdict="NOT met"
  local p99=""
  if [ "$5" = 1 ]; then
    local pa pb
    pa=$(median wasmkeep "$2" "$3" 3 %.2f) pb=$(median workerd "$2" "$3" 3 %.2f)
    p99=", p99 $pa ms vs $pb ms"
    awk -v a="$pa" -v b="$pb" 'BEGIN {exit !(a <= b)}' || verdict="NOT met"
  fi
  echo "  $1: ${ratio}x (goal >= $4x$([ "$5" = 1 ] && echo ", p99 <= workerd's")$p99): $verdict"
}
echo "goals:"
goal "1 hot actor, 1 connection" hot 1 1.0 0
goal "1 hot actor, 16 connections" hot 16 3 0
goal "$actors actors round robin, 16 connections" rr 16 3 1
goal "$many_actors actors round robin, 16 connections" rr10k 16 2 0
# Issue 41's goals (docs/benchmarks.md, "Speed at the limit"), WasmKeep's medians.
echo "speed at the limit:"
limit() {  # TEXT VERDICT_EXPR (awk, exit 0 when met) VARS...
  local text=$1 expr=$2
  shift 2
  if awk "$@" "BEGIN {exit !($expr)}"; then echo "  $text: met"; else echo "  $text: NOT met"; fi
}
hot1=$(median wasmkeep hot 1 2 %.3f) fsync=$(median_of "${fsync_p50s[@]}") rtt=$(median_of "${rtt_p50s[@]}")
if [ "$bucket_scheme" = s3 ]; then
  : # the floor on s3 is the bucket's PUT (below), not the disk
elif [ "$hot1" != - ] && [ "$fsync" != - ] && [ "$rtt" != - ]; then
  bound=$(awk -v f="$fsync" -v l="$rtt" 'BEGIN {printf "%.3f", 2 * f + l}')
  limit "hot c1 p50 $hot1 ms against 2 x write+fsync p50 $fsync ms + loopback round trip $rtt ms = $bound ms (ratio $(awk -v a="$hot1" -v b="$bound" 'BEGIN {printf "%.2f", a / b}'))" \
    'a <= b' -v a="$hot1" -v b="$bound"
else
  echo "  hot c1 at the disk's limit: not measured (hot c1 p50 $hot1, fsync p50 $fsync, round trip $rtt)"
fi
for c in "${cases[@]}"; do
  read -r case conns _ <<<"$c"
  p50=$(median wasmkeep "$case" "$conns" 2 %.3f) p99=$(median wasmkeep "$case" "$conns" 3 %.3f)
  [ "$p50" != - ] || { echo "  tail of $case c$conns: not measured"; continue; }
  # On s3 a write waits for a PUT of the bucket's (4-5 ms on RGW here): the 10 ms is the
  # local disk's goal, the ratio every bucket's.
  cap=10 cap_text=", and <= 10 ms"
  [ "$bucket_scheme" != s3 ] || cap=1000000 cap_text=""
  limit "tail of $case c$conns: p99 $p99 ms = $(awk -v a="$p99" -v b="$p50" 'BEGIN {printf "%.1f", (b > 0 ? a / b : 0)}') x p50 (goal <= 5 x$cap_text)" \
    'b > 0 && a <= 5 * b && a <= c' -v a="$p99" -v b="$p50" -v c="$cap"
done
for c in "hot 16" "rr 16" "rr10k 16"; do
  read -r case conns <<<"$c"
  a=$(median wasmkeep "$case" "$conns" 5) b=$(median workerd "$case" "$conns" 5)
  [ "$a" != - ] || continue
  limit "CPU per request, $case c$conns: WasmKeep $a us, workerd $b us (goal: WasmKeep <= 60 us)" 'a <= 60' -v a="$a"
done
if [ "$bucket_scheme" = s3 ]; then
  put=$(median_of "${put_p50s[@]}")
  if [ "$hot1" != - ] && [ "$put" != - ]; then
    limit "on s3, hot c1 p50 $hot1 ms against the bucket's PUT p50 $put ms + 1 ms" 'a <= p + 1' -v a="$hot1" -v p="$put"
  else
    echo "  on s3, hot c1 against the bucket's PUT: not measured (hot c1 p50 $hot1, PUT p50 $put)"
  fi
fi
for c in "hot 1" "hot 16" "rr 16"; do
  read -r case conns <<<"$c"
  # shellcheck disable=SC2046  # one value per round, none for a round not measured
  per=$(median_of $(for r in $(seq 1 "$rounds"); do echo "${puts[$case,$conns,$r]:-}"; done))
  [ "$per" != - ] || continue
  if [ "$c" = "hot 16" ]; then
    limit "group commit, hot c16: $per segment PUTs per write ($(awk -v p="$per" 'BEGIN {printf "%.1f", (p > 0 ? 1 / p : 0)}') writes per PUT; goal >= 10)" \
      'p > 0 && 1 / p >= 10' -v p="$per"
  else
    echo "  segment PUTs per write, $case c$conns: $per"
  fi
done
metric() { curl -s "$wk_url/metrics" | awk -v m="$1" '$1 == m {print $2}' || true; }
if [ "$bucket_scheme" = sqlite ]; then
  commits=$(metric wasmkeep_store_sqlite_commits_total) applied=$(metric wasmkeep_store_sqlite_writes_applied_total)
  echo "sqlite:// store so far: $applied writes in $commits commits ($(awk -v a="$applied" -v c="$commits" 'BEGIN {printf "%.1f", (c > 0 ? a / c : 0)}') writes per commit, one WAL fdatasync each), $(metric wasmkeep_store_sqlite_checkpoints_total) checkpoints; garbage collection deleted $(metric wasmkeep_replica_gc_deleted_total) objects"
fi

# --- the long case: does throughput hold once garbage collection has run for a while? ---
if ((gc_minutes > 0)); then
  echo
  echo "long case: WasmKeep alone, $actors actors round robin at 16 connections, $gc_minutes x 60 s (req/s per minute):"
  for minute in $(seq 1 "$gc_minutes"); do
    run_wrk "long-$minute" "$wk_url" 16 2 60 "$wk_pid" "/v1/actors/$tenant/counter/rr-" "$actors"
    printf '  minute %2d: %6s req/s  p50 %6s ms  p99 %7s ms  CPU %3s%%  non-2xx %s, errors %s; deleted by GC so far %s\n' \
      "$minute" "$r_rps" "$r_p50" "$r_p99" "$r_cpu" "$r_non2xx" "$r_errors" "$(metric wasmkeep_replica_gc_deleted_total)"
  done
  echo "  disk now: $(disk_probe "$tmp" 1)"
fi

# --- what each syncs per acknowledged write --------------------------------------------------
echo
echo "durability:"
echo "  WasmKeep answers once the segment holding the event's write is in the bucket; writes of"
echo "  one actor waiting together share one segment (group commit). On sqlite:// the store's"
echo "  writer commits every PUT waiting at that moment, of any actor, in one transaction whose"
echo "  commit fdatasync()s wasmkeep.sqlite-wal once (group commit across actors). On file:// a"
echo "  PUT writes tmp/<random>.tmp, fdatasync()s it, renames it over objects/... under the key's"
echo "  lock, then fsync()s the object's directory (and any directory it created)."
echo "  workerd: one SQLite database per object in WAL mode; the output gate holds the response"
echo "  until the implicit transaction has committed, and each commit fsync()s the -wal file."
if [ "${WASMKEEP_HTTP_BENCH_STRACE:-1}" = 1 ] && command -v strace >/dev/null; then
  trace_writes() {  # NAME URL PID
    local name=$1 url=$2 pid=$3
    strace -f -y -qq -e trace=fsync,fdatasync,rename,renameat,renameat2 -o "$tmp/$name.strace" -p "$pid" &
    local spid=$!
    sleep 1
    curl_config "$url/v1/actors/$tenant/counter/durability-probe" /increment 0 1 >"$tmp/probe.curl"
    local i
    for i in $(seq 1 20); do cat "$tmp/probe.curl"; done >"$tmp/probe20.curl"
    curl -s -X POST "${auth[@]}" -K "$tmp/probe20.curl"
    sleep 0.3
    kill -INT "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    echo "  $name, 20 sequential increments of a fresh actor, traced (first one creates the actor):"
    # syscall and file, with random names, hex ids and numbers replaced by *
    perl -ne 'if (/^\d+\s+(fsync|fdatasync)\(\d+<([^>]*)>/) { print "$1 $2\n" }
      elsif (/^\d+\s+(renameat2?)\([^,]*,\s*"([^"]*)",\s*[^,]*,\s*"([^"]*)"/) { print "$1 $2 -> $3\n" }
      elsif (/^\d+\s+(rename)\("([^"]*)",\s*"([^"]*)"/) { print "$1 $2 -> $3\n" }' "$tmp/$name.strace" |
      sed -E "s|$tmp/||g; s/[0-9a-f]{16,}/*/g; s/[0-9]+/*/g" | sort | uniq -c | sort -rn |
      awk '{c = $1; $1 = ""; printf "    %5d %s\n", c, $0}'
  }
  for sys in wasmkeep workerd; do
    if [ -n "${failed[$sys]:-}" ]; then echo "  $sys: not traced (${failed[$sys]})"; continue; fi
    if [ "$sys" = wasmkeep ]; then trace_writes wasmkeep "$wk_url" "$wk_pid"; else trace_writes workerd "$workerd_url" "$workerd_pid"; fi
  done
fi
echo
for sys in wasmkeep workerd; do
  [ -n "${failed[$sys]:-}" ] || check_peer "$sys" "the end of the run (after the cases)"
done
echo "wasmkeep log: $(awk '{n[$2]++} END {for (l in n) printf "%s %d, ", l, n[l]}' "$tmp/wasmkeep.log")$(wc -l <"$tmp/wasmkeep.log") lines"
awk '$2 == "warn" || $2 == "error"' "$tmp/wasmkeep.log" | head -20
echo "workerd log: $(wc -l <"$tmp/workerd/workerd.log") lines"
head -20 "$tmp/workerd/workerd.log"
