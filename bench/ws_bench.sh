#!/usr/bin/env bash
# WasmKeep against Cloudflare's workerd holding WebSockets for a chat room, on this machine, in
# one run: WasmKeep's chat actor and a Durable Object on workerd's hibernation API doing the
# same room. Prints one table (each case's figures for both, and their ratio);
# docs/benchmarks.md ("WebSockets") records a run and its setup.
#
#   bench/ws_bench.sh [SECONDS]        (default 10: the messages-per-second window; about 5
#                                       minutes in all at the defaults)
#
# The room, the same for both: a WebSocket to /v1/actors/bench/chat/<room>/ws with the
# tenant's bearer token; a member's text message is stored (the newest number and the message
# in one atomic write) and then sent as "<number>\t<text>" to every member, the sender
# included, only once the write is durable (examples/chat/README.md, "WebSocket room").
#
#   WasmKeep: the release build's `wasmkeep serve`, one node on a fresh sqlite:// bucket (the
#             HTTP bench's default), default settings except the bench lease (bench/common.sh)
#             and [websockets] max_messages_per_second = 0: the default (100 a second on one
#             connection) would close the messages-per-second case's connections, and workerd
#             has no such limit. Class chat is build/release/actors/chat.wasm
#             (examples/chat/chat.cc). It hibernates an idle actor after
#             actors.idle_hibernate_ms (30 s), its connections held by the node.
#   workerd:  npm's workerd (WASMKEEP_WORKERD_VERSION, installed into build/bench-cache/)
#             running bench/ws/chat-do.js with bench/ws/workerd.capnp: a worker checking the
#             same token and routing to a Durable Object idFromName("<tenant>/<room>") that
#             takes sockets with state.acceptWebSocket(ws, ["member"]), stores in
#             webSocketMessage (ctx.storage.put, localDisk in a fresh directory on the same
#             disk) and broadcasts to ctx.getWebSockets("member"). workerd evicts an object
#             10 s after its last event; its hibernatable sockets stay open.
#
# The client is build/release/bench/ws_load (bench/ws_load.cc): one thread, epoll, plain TCP,
# its own masked frames; the same bytes to both servers. It checks every 101's accept key,
# that each connection sees the room's numbers in order without a gap, and counts closes by
# the server and "error" answers. Every case runs in a room of its own, fresh, so a new
# member's history (the newest 50 messages, sent on open by both rooms) is empty.
#
# Cases, in this order:
#   memory      RSS of the server before and after opening WASMKEEP_WS_BENCH_IDLE_CONNS idle
#               members of one room, each reading taken once the room's actor is out of memory:
#               on WasmKeep when wasmkeep_actor_resident reaches 0 (polled; the time it took
#               is printed), on workerd 15 s after the last event (its 10 s eviction timer and
#               5 s more). (after - before) / N is the figure. Then member 0 sends one message
#               (the wake-up: the actor is restored, the object constructed again) and the time
#               to its own copy and to the last of the N deliveries is printed; on workerd the
#               isolate's count of constructions before and after it tells whether the object
#               had really been evicted. First, so that neither server reuses memory that an
#               earlier case's connections freed.
#   fanout      WASMKEEP_WS_BENCH_FANOUT_CONNS members (1,000); member 0 sends a message 50
#               times (WASMKEEP_WS_BENCH_FANOUT_ROUNDS), 200 ms apart; each time, the time from
#               the send to the last of the deliveries: p50 and p99 over the rounds (with 50
#               rounds the p99 is the slowest), and the server's CPU per message.
#   throughput  WASMKEEP_WS_BENCH_CONNS connections (16), each sending its next message as
#               soon as its own copy of the previous one comes back (one in flight per
#               connection: WasmKeep reads a connection's next frame only once the last one's
#               event is answered, docs/websockets.md), 2 s unmeasured, then SECONDS: messages
#               in per second (each is stored and broadcast to all 16, so deliveries out are
#               16 times as many, also given), p50 and p99 of send -> own copy, and the
#               server's CPU over the window.
# fanout and throughput run WASMKEEP_WS_BENCH_ROUNDS times (3), the systems alternating
# (A B, B A, A B); the table gives the medians of the rounds' figures. Each round's figures,
# the load average and the servers' CPU time are printed as they come, and a 1 s write+fsync
# probe of the disk before each throughput round (the servers' commits wait for the disk).
# Before the cases, a few messages in a room of their own warm each server (its module
# compiled, its isolate up). After them, with strace present, each server is traced for 3 s
# of the throughput load to count its fsync and fdatasync calls per message stored.
#
# It always reports: a case that fails on one system (ws_load's error, a timeout, closed
# connections, a server that died) is a row saying so, with ws_load's exit status and error,
# or the server's exit status and its last log lines, and the run goes on with the other
# system; a server that died takes no further part. The table is printed even if the script
# stops early for a reason of its own (the line and command that failed are named).
#
# Environment: WASMKEEP_WORKERD_VERSION (bench/common.sh), WASMKEEP_WS_BENCH_ROUNDS (3),
# WASMKEEP_WS_BENCH_CASES (default "memory fanout throughput"), WASMKEEP_WS_BENCH_IDLE_CONNS
# (2000), WASMKEEP_WS_BENCH_FANOUT_CONNS (1000), WASMKEEP_WS_BENCH_FANOUT_ROUNDS (50),
# WASMKEEP_WS_BENCH_CONNS (16), WASMKEEP_WS_BENCH_STRACE=0 (no sync count),
# WASMKEEP_SKIP_INSTALL_DEPS=1 (the tools are installed already:
# scripts/install-deps.sh is not run), WASMKEEP_WS_BENCH_PRESET (the CMake preset whose
# wasmkeep runs; default release: others are for trying the bench out).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=common.sh
source bench/common.sh
seconds=${1:-10}
rounds=${WASMKEEP_WS_BENCH_ROUNDS:-3}
selected=" ${WASMKEEP_WS_BENCH_CASES-memory fanout throughput} "
idle_conns=${WASMKEEP_WS_BENCH_IDLE_CONNS:-2000}
fanout_conns=${WASMKEEP_WS_BENCH_FANOUT_CONNS:-1000}
fanout_rounds=${WASMKEEP_WS_BENCH_FANOUT_ROUNDS:-50}
fanout_pause_ms=200
tput_conns=${WASMKEEP_WS_BENCH_CONNS:-16}
strace_check=${WASMKEEP_WS_BENCH_STRACE:-1}
warm_seconds=2
tenant=bench
# workerd's eviction timer is 10 s after an object's last event; the extra 5 s are margin.
workerd_idle_seconds=15
# WasmKeep: actors.idle_hibernate_ms (the default, 30 s) and at most this much more.
wk_hibernate_seconds=30
wk_hibernate_margin_seconds=60
# After the actor left memory, before reading RSS: freed pages go back to the system.
settle_seconds=3
for c in $selected; do
  case $c in memory | fanout | throughput) ;; *) echo "WASMKEEP_WS_BENCH_CASES: unknown case $c"; exit 2 ;; esac
done
wants() { [[ $selected == *" $1 "* ]]; }

# --- tools -------------------------------------------------------------------------------
[ "${WASMKEEP_SKIP_INSTALL_DEPS:-0}" = 1 ] || ./scripts/install-deps.sh >/dev/null
command -v npm >/dev/null || {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
}
preset=${WASMKEEP_WS_BENCH_PRESET:-release}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target wasmkeep wk_actors ws_load
wk=$PWD/build/$preset/src/cli/wasmkeep
chat_wasm=$PWD/build/$preset/actors/chat.wasm
ws_load=$PWD/build/$preset/bench/ws_load
workerd=$(install_workerd)
# One descriptor a connection, on each side.
ulimit -n "$(ulimit -Hn)"

# --- state and reporting -----------------------------------------------------------------
tmp=$(mktemp -d "$PWD/build/ws-bench.XXXXXX")
wk_pid="" workerd_pid="" load_pid=""
reported=0
started=0
# A peer that fails takes no further part: failed[SYSTEM] says why (check_peer: common.sh).
# shellcheck disable=SC2034  # last_rss: note_rss and check_peer (common.sh) keep and read it
declare -A failed last_rss
# res[SYSTEM,CASE,ROUND]: the round's figures as "key=value ..." (ws_load's WS_RESULT line
# and the script's own); why[SYSTEM,CASE]: what failed, for the table.
declare -A res why
pid_of() { if [ "$1" = wasmkeep ]; then echo "$wk_pid"; else echo "$workerd_pid"; fi; }
log_of() { if [ "$1" = wasmkeep ]; then echo "$tmp/wasmkeep.log"; else echo "$tmp/workerd/workerd.log"; fi; }
port_of() { if [ "$1" = wasmkeep ]; then echo "$wk_port"; else echo "$workerd_port"; fi; }
note_why() {  # SYSTEM CASE TEXT: keeps the first reason of a case
  [ -n "${why[$1,$2]:-}" ] || why[$1,$2]=$3
}
cleanup() {
  local status=$?
  # Stopped early (a failure of the bench's own, an interrupt): what ran is still reported.
  if [ "$reported" = 0 ] && [ "$started" = 1 ] && declare -F report >/dev/null; then
    echo
    echo "the bench stopped early (status $status); what ran:"
    stopped_early="the bench stopped early (status $status) before this ran"
    report || true
  fi
  for p in $load_pid $wk_pid $workerd_pid; do
    kill -TERM "$p" 2>/dev/null || true
  done
  for p in $load_pid $wk_pid $workerd_pid; do
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A command that fails where the bench does not expect it is named, never a silent exit.
trap 'echo "ws_bench: line $LINENO: \"$BASH_COMMAND\" failed (status $?)" >&2' ERR

# key=value from a figures line, or nothing.
field() {  # KEY LINE
  sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"
}
# The median of KEY over the rounds of SYSTEM CASE that have it, printed with FORMAT (after
# dividing by DIV); "-" when none has it.
median() {  # SYSTEM CASE KEY FORMAT [DIV]
  local r
  for r in $(seq 1 "$rounds"); do
    [ -z "${res[$1,$2,$r]:-}" ] || field "$3" "${res[$1,$2,$r]}"
  done | sort -g | awk -v f="$4" -v d="${5:-1}" '$1 != "" {v[++n] = $1 / d}
    END {if (n == 0) {printf "-"; exit} printf f, (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2)}'
}
measured() {  # SYSTEM CASE: how many rounds have figures
  local r k=0
  for r in $(seq 1 "$rounds"); do [ -z "${res[$1,$2,$r]:-}" ] || k=$((k + 1)); done
  echo "$k"
}
ratio() {  # A B: A / B, or "-"
  awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f×", a / b}'
}
metric() { curl -s "http://127.0.0.1:$wk_port/metrics" | awk -v m="$1" '$1 == m {print $2}' || true; }
constructed() { curl -s -H "Authorization: Bearer $token" "http://127.0.0.1:$workerd_port/_constructed" || true; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
ms() { awk -v t="$1" 'BEGIN {printf "%.2f", t / 1000}'; }

# A table cell: FIGURES when the case has them on SYSTEM (with how many rounds, and why the
# others failed, when not all), else why it has none.
cell() {  # SYSTEM CASE FIGURES ROUNDS_EXPECTED
  local k
  k=$(measured "$1" "$2")
  if [ "$k" = 0 ]; then
    echo "FAILED: ${why[$1,$2]:-${failed[$1]:-${stopped_early:-not run}}}"
  elif [ "$k" != "$4" ]; then
    echo "$3 ($k of $4 rounds; ${why[$1,$2]:-})"
  else
    echo "$3${why[$1,$2]:+ (NOTE: ${why[$1,$2]})}"
  fi
}
row() {  # LABEL CASE ROUNDS WK_FIGURES WD_FIGURES RATIO
  echo "| $1 | $(cell wasmkeep "$2" "$4" "$3") | $(cell workerd "$2" "$5" "$3") | $6 |"
}

report() {
  local a b a2 b2
  echo
  echo "WebSockets, WasmKeep against workerd (medians over $rounds rounds for fan-out and messages per second; ratio = WasmKeep ÷ workerd):"
  echo
  echo "| case | WasmKeep | workerd | ratio |"
  echo "|---|---|---|---|"
  if wants memory; then
    a=$(median wasmkeep memory bytes_per_conn %.0f) b=$(median workerd memory bytes_per_conn %.0f)
    row "$idle_conns idle connections to one room, after it left memory: RSS per connection, bytes (while it was in memory)" memory 1 \
      "$a ($(median wasmkeep memory bytes_per_conn_open %.0f); hibernated after $(median wasmkeep memory settle_s %.0f) s)" \
      "$b ($(median workerd memory bytes_per_conn_open %.0f); evicted: $(median workerd memory evicted %.0f) of 1)" "$(ratio "$a" "$b")"
    a=$(median wasmkeep memory wake_echo_us %.1f 1000) b=$(median workerd memory wake_echo_us %.1f 1000)
    a2=$(median wasmkeep memory wake_last_us %.1f 1000) b2=$(median workerd memory wake_last_us %.1f 1000)
    row "then 1 message: send → own copy / → last of $idle_conns, ms" memory 1 "$a / $a2" "$b / $b2" \
      "$(ratio "$a" "$b") / $(ratio "$a2" "$b2")"
  fi
  if wants fanout; then
    a=$(median wasmkeep fanout p50_us %.2f 1000) b=$(median workerd fanout p50_us %.2f 1000)
    a2=$(median wasmkeep fanout p99_us %.2f 1000) b2=$(median workerd fanout p99_us %.2f 1000)
    row "fan-out, 1 message to $fanout_conns members: send → last delivery, p50 / p99 ms" fanout "$rounds" \
      "$a / $a2" "$b / $b2" "$(ratio "$a" "$b") / $(ratio "$a2" "$b2")"
    a=$(median wasmkeep fanout server_cpu_us_per_round %.2f 1000) b=$(median workerd fanout server_cpu_us_per_round %.2f 1000)
    row "fan-out: server CPU per message ($fanout_conns deliveries), ms" fanout "$rounds" "$a" "$b" "$(ratio "$a" "$b")"
  fi
  if wants throughput; then
    a=$(median wasmkeep throughput msgs_per_s %.0f) b=$(median workerd throughput msgs_per_s %.0f)
    row "$tput_conns connections, 1 message in flight each: messages in /s (deliveries out /s)" throughput "$rounds" \
      "$a ($(median wasmkeep throughput deliveries_per_s %.0f))" "$b ($(median workerd throughput deliveries_per_s %.0f))" "$(ratio "$a" "$b")"
    a=$(median wasmkeep throughput p50_us %.2f 1000) b=$(median workerd throughput p50_us %.2f 1000)
    a2=$(median wasmkeep throughput p99_us %.2f 1000) b2=$(median workerd throughput p99_us %.2f 1000)
    row "$tput_conns connections: send → own copy, p50 / p99 ms" throughput "$rounds" "$a / $a2" "$b / $b2" \
      "$(ratio "$a" "$b") / $(ratio "$a2" "$b2")"
    a=$(median wasmkeep throughput cpu_pct %.0f) b=$(median workerd throughput cpu_pct %.0f)
    a2=$(median wasmkeep throughput cpu_us_per_msg %.0f) b2=$(median workerd throughput cpu_us_per_msg %.0f)
    row "$tput_conns connections: server CPU, % of one core / µs per message in" throughput "$rounds" "$a / $a2" "$b / $b2" \
      "$(ratio "$a" "$b") / $(ratio "$a2" "$b2")"
  fi
  echo
  echo "machine: $(nproc) cores; load average before $load_before, after ${load_after:-(stopped early)}"
  echo "disk: before $disk_before; after ${disk_after:-(stopped early)}"
  [ -z "$sync_summary" ] || echo "syncs per message: $sync_summary"
  local sys
  for sys in wasmkeep workerd; do
    [ -z "${failed[$sys]:-}" ] && continue
    echo "$sys: ${failed[$sys]}; its last log lines:"
    tail -n 5 "$(log_of "$sys")" 2>/dev/null | sed 's/^/  | /'
  done
  reported=1
}

# --- servers -----------------------------------------------------------------------------
wk_port=$(free_port)
cat >"$tmp/wasmkeep.toml" <<TOML
[bucket]
url = "sqlite://$tmp/wk-bucket"
[node]
id = "bench"
listen = "127.0.0.1:$wk_port"
[websockets]
max_messages_per_second = 0
TOML
bench_lease_toml >>"$tmp/wasmkeep.toml"
W() { "$wk" --config "$tmp/wasmkeep.toml" "$@"; }
"$wk" --config "$tmp/wasmkeep.toml" serve 2>"$tmp/wasmkeep.log" &
wk_pid=$!
token=$(W tenant add "$tenant" | tail -n1)
W deploy --tenant "$tenant" --class chat "$chat_wasm" >/dev/null
if ! wait_wasmkeep "http://127.0.0.1:$wk_port" "$wk_pid" "$tmp/wasmkeep.log"; then
  failed[wasmkeep]="did not start (its log is above)"
fi
workerd_port=$(free_port)
if ! start_workerd bench/ws/chat-do.js bench/ws/workerd.capnp "$tmp/workerd" "$workerd_port" "$token"; then
  failed[workerd]="did not start (its log is above)"
fi

# --- the cases ---------------------------------------------------------------------------
# Runs ws_load MODE against SYSTEM in ROOM; on success keeps its figures (and the server's
# CPU over the whole run, opening and closing included) in res[SYSTEM,CASE,ROUND], else says
# why in why[SYSTEM,CASE]. Returns 1 when it failed.
run_load() {  # SYSTEM CASE ROUND ROOM MODE ARGS...
  local sys=$1 case=$2 round=$3 room=$4 mode=$5
  shift 5
  local pid out=$tmp/$1-$2-$3 status=0 t0 t1 line err
  if [ -n "${failed[$sys]:-}" ]; then
    printf '  %s %-8s not run: %s\n' "$round" "$sys" "${failed[$sys]}"
    return 1
  fi
  pid=$(pid_of "$sys")
  note_rss "$sys" "$pid"
  t0=$(cpu_ticks "$pid")
  "$ws_load" "$mode" --port "$(port_of "$sys")" --path "/v1/actors/$tenant/chat/$room/ws" --token "$token" \
    --server-pid "$pid" "$@" >"$out.out" 2>"$out.err" || status=$?
  t1=$(cpu_ticks "$pid")
  line=$(sed -n 's/^WS_RESULT //p' "$out.out")
  err=$(sed -n 's/^WS_ERROR //p' "$out.out")
  if [ "$status" != 0 ] || [ -z "$line" ]; then
    [ -n "$err" ] || err="no result; its last lines: $(tail -n 3 "$out.err" | tr '\n' ' ')"
    note_why "$sys" "$case" "round $round: ws_load exit $status: $err"
    printf '  %s %-8s FAILED: ws_load exit status %s: %s\n' "$round" "$sys" "$status" "$err"
    check_peer "$sys" "case $case round $round" grace
    [ -z "${failed[$sys]:-}" ] || why[$sys,$case]="${why[$sys,$case]}; the server ${failed[$sys]}"
    return 1
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    note_why "$sys" "$case" "round $round: the server ended during the run"
    printf '  %s %-8s FAILED: the server ended during the run\n' "$round" "$sys"
    check_peer "$sys" "case $case round $round"
    return 1
  fi
  note_rss "$sys" "$pid"
  [ -n "$t0" ] && [ -n "$t1" ] || t0=0 t1=0
  res[$sys,$case,$round]="$line run_cpu_ms=$(((t1 - t0) * 1000 / $(getconf CLK_TCK)))"
}

# Waits until SYSTEM's room actors are out of memory: on WasmKeep until wasmkeep_actor_resident
# is 0 (at most the hibernation time and its margin), on workerd its eviction time; then
# settle_seconds more. Sets waited (seconds, before the settling) and resident (WasmKeep's
# resident actors at the end: 0 unless it gave up).
wait_idle() {  # SYSTEM
  local start now
  start=$(date +%s.%N)
  resident=0
  if [ "$1" = wasmkeep ]; then
    resident=$(metric wasmkeep_actor_resident)
    while [ "${resident:-x}" != 0 ] && kill -0 "$wk_pid" 2>/dev/null; do
      now=$(date +%s.%N)
      if awk -v a="$start" -v b="$now" -v m=$((wk_hibernate_seconds + wk_hibernate_margin_seconds)) 'BEGIN {exit !(b - a > m)}'; then
        break
      fi
      sleep 0.5
      resident=$(metric wasmkeep_actor_resident)
    done
  else
    sleep "$workerd_idle_seconds"
  fi
  waited=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  sleep "$settle_seconds"
}

memory_case() {  # SYSTEM
  local sys=$1 pid out=$tmp/$1-memory status=0 rss0 rss_open rss1 c0="" c1="" line err held_metric=""
  if [ -n "${failed[$sys]:-}" ]; then
    printf '  %-8s not run: %s\n' "$sys" "${failed[$sys]}"
    return 0
  fi
  pid=$(pid_of "$sys")
  wait_idle "$sys"
  echo "  $sys: room actors out of memory after $waited s (resident now: $resident), load average $(load)"
  rss0=$(rss_kib "$pid")
  if [ -z "$rss0" ]; then
    check_peer "$sys" "case memory (waiting for its actors to leave memory)"
    return 0
  fi
  note_rss "$sys" "$pid"
  "$ws_load" idle --conns "$idle_conns" --port "$(port_of "$sys")" --path "/v1/actors/$tenant/chat/idle/ws" \
    --token "$token" --server-pid "$pid" >"$out.out" 2>"$out.err" &
  load_pid=$!
  for _ in $(seq 1 1500); do
    grep -qs '^WS_OPEN' "$out.out" && break
    kill -0 "$load_pid" 2>/dev/null || break
    sleep 0.2
  done
  if ! grep -qs '^WS_OPEN' "$out.out"; then
    kill -TERM "$load_pid" 2>/dev/null || true
    wait "$load_pid" 2>/dev/null || status=$?
    load_pid=""
    err=$(sed -n 's/^WS_ERROR //p' "$out.out")
    [ -n "$err" ] || err="no connections open after 300 s; its last lines: $(tail -n 3 "$out.err" | tr '\n' ' ')"
    note_why "$sys" memory "ws_load exit $status: $err"
    printf '  %-8s FAILED: ws_load exit status %s: %s\n' "$sys" "$status" "$err"
    check_peer "$sys" "case memory" grace
    return 0
  fi
  rss_open=$(rss_kib "$pid")
  note_rss "$sys" "$pid"
  [ "$sys" = wasmkeep ] || c0=$(constructed)
  wait_idle "$sys"
  local settle_s=$waited
  rss1=$(rss_kib "$pid")
  note_rss "$sys" "$pid"
  [ "$sys" = workerd ] || held_metric=$(metric wasmkeep_websockets_held)
  kill -USR1 "$load_pid" 2>/dev/null || true
  wait "$load_pid" || status=$?
  load_pid=""
  [ "$sys" = wasmkeep ] || c1=$(constructed)
  line=$(sed -n 's/^WS_RESULT //p' "$out.out")
  err=$(sed -n 's/^WS_ERROR //p' "$out.out")
  if [ "$status" != 0 ] || [ -z "$line" ] || [ -z "$rss1" ]; then
    [ -n "$err" ] || err="no result; its last lines: $(tail -n 3 "$out.err" | tr '\n' ' ')"
    [ -n "$rss1" ] || err="the server is gone; $err"
    note_why "$sys" memory "ws_load exit $status: $err"
    printf '  %-8s FAILED: ws_load exit status %s: %s\n' "$sys" "$status" "$err"
    check_peer "$sys" "case memory" grace
    return 0
  fi
  local conns per per_open evicted=""
  conns=$(field held "$line")
  per=$(awk -v a="$rss0" -v b="$rss1" -v n="$conns" 'BEGIN {printf "%.0f", (b - a) * 1024 / n}')
  per_open=$(awk -v a="$rss0" -v b="$rss_open" -v n="$conns" 'BEGIN {printf "%.0f", (b - a) * 1024 / n}')
  [ "$sys" = wasmkeep ] || evicted=$((c1 > c0 ? 1 : 0))
  res[$sys,memory,1]="$line rss0_kib=$rss0 rss_open_kib=$rss_open rss1_kib=$rss1 bytes_per_conn=$per bytes_per_conn_open=$per_open settle_s=$settle_s${evicted:+ evicted=$evicted}"
  printf '  %-8s RSS %s MiB before; %s MiB with %s members open (actor in memory); %s MiB after %s s (%s): %s bytes per connection\n' \
    "$sys" "$((rss0 / 1024))" "$((rss_open / 1024))" "$conns" "$((rss1 / 1024))" "$settle_s" \
    "$([ "$sys" = wasmkeep ] && echo "actors resident $resident, WebSockets held $held_metric" || echo "constructions before the wake-up $c0, after $c1")" "$per"
  printf '  %-8s then 1 message: own copy after %s ms, the last of %s after %s ms (%s delivered)\n' "$sys" \
    "$(ms "$(field wake_echo_us "$line")")" "$conns" "$(ms "$(field wake_last_us "$line")")" "$(field wake_delivered "$line")"
  if [ "$sys" = workerd ] && [ "$evicted" = 0 ]; then
    note_why "$sys" memory "the object was not evicted before the reading (constructions $c0 -> $c1)"
    echo "  workerd  NOTE: the object was not constructed again by the wake-up: it had not been evicted"
  fi
  if [ "$sys" = wasmkeep ] && [ "$resident" != 0 ]; then
    echo "  wasmkeep NOTE: $resident actors still resident at the reading"
  fi
}

fanout_round() {  # SYSTEM ROUND
  local line
  run_load "$1" fanout "$2" "fanout-$2" fanout --conns "$fanout_conns" --rounds "$fanout_rounds" \
    --pause-ms "$fanout_pause_ms" || return 0
  line=${res[$1,fanout,$2]}
  printf '  %s %-8s send -> last of %s: p50 %s ms, p99 %s ms, max %s ms; -> own copy p50 %s ms; server CPU %s ms a message (%s ms over the run with opening and closing); ws_load CPU %s ms a message; opened in %s ms; gaps %s\n' \
    "$2" "$1" "$(field conns "$line")" "$(ms "$(field p50_us "$line")")" "$(ms "$(field p99_us "$line")")" \
    "$(ms "$(field max_us "$line")")" "$(ms "$(field echo_p50_us "$line")")" \
    "$(ms "$(field server_cpu_us_per_round "$line")")" "$(field run_cpu_ms "$line")" \
    "$(ms "$(field client_cpu_us_per_round "$line")")" "$(field open_ms "$line")" "$(field gaps "$line")"
}

throughput_round() {  # SYSTEM ROUND
  local line
  run_load "$1" throughput "$2" "tput-$2" throughput --conns "$tput_conns" --seconds "$seconds" \
    --warm-seconds "$warm_seconds" || return 0
  line=${res[$1,throughput,$2]}
  local pct per_msg
  pct=$(awk -v c="$(field server_cpu_ms "$line")" -v s="$seconds" 'BEGIN {printf "%.0f", c / 10 / s}')
  per_msg=$(awk -v c="$(field server_cpu_ms "$line")" -v n="$(field msgs_in "$line")" 'BEGIN {printf "%.0f", (n > 0 ? c * 1000 / n : 0)}')
  res[$1,throughput,$2]="$line cpu_pct=$pct cpu_us_per_msg=$per_msg"
  printf '  %s %-8s %s messages in /s, %s deliveries out /s; send -> own copy p50 %s ms, p99 %s ms, max %s ms; server CPU %s%% (%s µs a message); ws_load CPU %s ms in the window; gaps %s\n' \
    "$2" "$1" "$(field msgs_per_s "$line")" "$(field deliveries_per_s "$line")" "$(ms "$(field p50_us "$line")")" \
    "$(ms "$(field p99_us "$line")")" "$(ms "$(field max_us "$line")")" "$pct" "$per_msg" "$(field client_cpu_window_ms "$line")" \
    "$(field gaps "$line")"
}

# What each server syncs per stored message: 16 connections as in the throughput case, 3 s,
# under `strace -c` (strace slows both down: the rates here are not the case's). Sets
# sync_summary.
sync_summary=""
syncs() {
  [ "$strace_check" = 1 ] && command -v strace >/dev/null || return 0
  echo
  echo "syncs: 16 connections, 3 s each, under strace -f -c (fsync, fdatasync):"
  local sys pid spid out line n
  for sys in wasmkeep workerd; do
    if [ -n "${failed[$sys]:-}" ]; then echo "  $sys: not traced (${failed[$sys]})"; continue; fi
    pid=$(pid_of "$sys")
    out=$tmp/$sys-strace
    strace -f -qq -c -e trace=fsync,fdatasync -o "$out.txt" -p "$pid" &
    spid=$!
    sleep 1
    "$ws_load" throughput --port "$(port_of "$sys")" --path "/v1/actors/$tenant/chat/syncs/ws" --token "$token" \
      --conns "$tput_conns" --seconds 3 --warm-seconds 0 >"$out.out" 2>"$out.err" || true
    sleep 0.3
    kill -INT "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    line=$(sed -n 's/^WS_RESULT //p' "$out.out")
    n=$(awk '$NF == "fsync" || $NF == "fdatasync" {s += $4} END {print s + 0}' "$out.txt")
    if [ -z "$line" ]; then
      echo "  $sys: ws_load gave no result: $(sed -n 's/^WS_ERROR //p' "$out.out")$(tail -n 2 "$out.err" | tr '\n' ' ')"
      continue
    fi
    local sent
    sent=$(field sent_total "$line")
    echo "  $sys: $n syncs for $sent messages ($(awk -v n="$n" -v m="$sent" 'BEGIN {printf "%.2f", (m > 0 ? n / m : 0)}') a message; $(field msgs_per_s "$line") messages/s while traced)"
    sync_summary="$sync_summary$sys $(awk -v n="$n" -v m="$sent" 'BEGIN {printf "%.2f", (m > 0 ? n / m : 0)}'); "
  done
}

# --- run -----------------------------------------------------------------------------------
started=1
load_before=$(load)
wk_git="$(git rev-parse --short HEAD 2>/dev/null || echo '?')"
[ -z "$(git status --porcelain --untracked-files=no -- src bench 2>/dev/null)" ] || wk_git="$wk_git+uncommitted changes"
echo "setup: $(nproc) cores ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)), $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "WasmKeep $wk_git ($preset, sqlite:// bucket), chat.wasm $(stat -c %s "$chat_wasm") bytes; workerd $workerd_version ($("$workerd" --version 2>&1 | head -1)), localDisk storage"
echo "cases:$selected; fan-out $fanout_conns members x $fanout_rounds messages, $fanout_pause_ms ms apart; $tput_conns connections for ${seconds} s after ${warm_seconds} s; $idle_conns idle members; $rounds rounds, alternating"
echo "load average before: $load_before"
disk_before=$(disk_probe "$tmp")
echo "disk before: $disk_before"
echo
echo "warm-up (4 members, 5 messages, each server):"
for sys in wasmkeep workerd; do
  if run_load "$sys" warm 1 warm fanout --conns 4 --rounds 5 --pause-ms 20; then
    echo "  $sys: ok (send -> last of 4: $(ms "$(field p50_us "${res[$sys,warm,1]}")") ms)"
  fi
  # The memory case's room, opened and closed once (no message): what a room costs once it
  # has existed (WasmKeep's sleeping hold, workerd's object and its database) is then in the
  # reading before the connections too, not divided among them.
  if wants memory && run_load "$sys" warm-idle 1 idle fanout --conns 1 --rounds 0; then
    echo "  $sys: the memory case's room opened and closed"
  fi
done
if wants memory; then
  echo
  echo "case memory ($idle_conns idle members of one room; load average $(load)):"
  for sys in wasmkeep workerd; do memory_case "$sys"; done
fi
if wants fanout; then
  echo
  echo "case fanout ($rounds rounds, alternating; load average $(load)):"
  for round in $(seq 1 "$rounds"); do
    if ((round % 2)); then order="wasmkeep workerd"; else order="workerd wasmkeep"; fi
    for sys in $order; do fanout_round "$sys" "$round"; done
    echo "  load average $(load)"
  done
fi
if wants throughput; then
  echo
  echo "case throughput ($rounds rounds of ${seconds} s, alternating; load average $(load)):"
  for round in $(seq 1 "$rounds"); do
    echo "  disk now: $(disk_probe "$tmp" 1)"
    if ((round % 2)); then order="wasmkeep workerd"; else order="workerd wasmkeep"; fi
    for sys in $order; do throughput_round "$sys" "$round"; done
    echo "  load average $(load)"
  done
fi
load_after=$(load)
disk_after=$(disk_probe "$tmp")
syncs
for sys in wasmkeep workerd; do
  [ -n "${failed[$sys]:-}" ] || check_peer "$sys" "the end of the run (after the cases)"
done
report
echo
commits=$(metric wasmkeep_store_sqlite_commits_total) applied=$(metric wasmkeep_store_sqlite_writes_applied_total)
echo "WasmKeep's sqlite:// store over the run: $applied writes in $commits commits ($(awk -v a="$applied" -v c="$commits" 'BEGIN {printf "%.1f", (c > 0 ? a / c : 0)}') writes per commit, one WAL fdatasync each); messages in $(metric wasmkeep_websocket_messages_in_total), out $(metric wasmkeep_websocket_messages_out_total)"
echo "wasmkeep log: $(awk '{n[$2]++} END {for (l in n) printf "%s %d, ", l, n[l]}' "$tmp/wasmkeep.log")$(wc -l <"$tmp/wasmkeep.log") lines"
awk '$2 == "warn" || $2 == "error"' "$tmp/wasmkeep.log" | head -20
echo "workerd log: $(wc -l <"$tmp/workerd/workerd.log" 2>/dev/null || echo 0) lines"
head -20 "$tmp/workerd/workerd.log" 2>/dev/null || true
