# shellcheck shell=bash
# Shared by the benchmark scripts that start servers (sourced, not run, after the caller's
# `cd` to the repository root): the pinned workerd, free ports, the short lease of a bench
# node, waiting for a node or a workerd to answer (a failure to start returns 1 after printing
# the log: under `set -e` the script exits, unless it tests the call to go on without that
# server), a probe of the disk's sync latency, and reading a server's memory and CPU and
# reporting one that died.

workerd_version=${WASMKEEP_WORKERD_VERSION:-1.20261117.1}

# free_port: a TCP port on 127.0.0.1 that nothing listens on (the kernel's pick).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# install_workerd: npm's workerd $workerd_version, installed into build/bench-cache/ once;
# prints the binary's path.
install_workerd() {
  local npm_dir=$PWD/build/bench-cache/workerd-$workerd_version
  local bin=$npm_dir/node_modules/@cloudflare/workerd-linux-64/bin/workerd
  mkdir -p "$npm_dir"
  if [ ! -x "$bin" ]; then
    # Quiet first; on a failure again with npm's messages, for the reason.
    npm install --prefix "$npm_dir" --no-audit --no-fund --no-save --loglevel=error "workerd@$workerd_version" \
      >/dev/null 2>&1 || npm install --prefix "$npm_dir" --no-audit --no-fund --no-save "workerd@$workerd_version" >&2
  fi
  [ -x "$bin" ] || bin=$npm_dir/node_modules/.bin/workerd
  echo "$bin"
}

# bench_lease_toml: the [lease] section of a bench node's configuration: short, so the node
# is ready in about 4 s (the default waits 15 s).
bench_lease_toml() {
  cat <<TOML
[lease]
ttl_ms = 3000
grace_ms = 1000
safety_ms = 1000
max_skew_ms = 500
heartbeat_period_ms = 1000
TOML
}

# wait_wasmkeep URL PID LOG: until the node at URL is ready (/readyz; 30 s at most). Returns
# 1, printing LOG, if process PID ends first or the node is not ready in time.
wait_wasmkeep() {
  for _ in $(seq 1 300); do
    curl -sf "$1/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || { cat "$3"; return 1; }
    sleep 0.1
  done
  echo "wasmkeep: not ready"
  cat "$3"
  return 1
}

# start_workerd JS CAPNP DIR PORT TOKEN: workerd in the background serving JS with the config
# CAPNP, its @PORT@, @DISK@ (DIR/disk) and @TOKEN@ filled in (config in DIR/conf, output in
# DIR/workerd.log); its pid in workerd_pid. Waits until it answers (401 without the token; 30
# s at most) and returns 1, printing its log, if it ends first or never does.
start_workerd() {
  local js=$1 capnp=$2 dir=$3 port=$4 token=$5
  mkdir -p "$dir/conf" "$dir/disk"
  cp "$js" "$dir/conf/"
  sed -e "s|@PORT@|$port|" -e "s|@DISK@|$dir/disk|" -e "s|@TOKEN@|$token|" "$capnp" >"$dir/conf/workerd.capnp"
  "$workerd" serve "$dir/conf/workerd.capnp" >"$dir/workerd.log" 2>&1 &
  workerd_pid=$!
  for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$port/" 2>/dev/null)" = 401 ] && return 0
    kill -0 "$workerd_pid" 2>/dev/null || { cat "$dir/workerd.log"; return 1; }
    sleep 0.1
  done
  echo "workerd: not ready"
  cat "$dir/workerd.log"
  return 1
}

# disk_probe DIR [SECONDS]: a raw 4 KiB write + fsync loop on a file in DIR for SECONDS (2),
# on the disk under the servers' data: prints the count and the p50 and p99 of one write+fsync.
disk_probe() {
  python3 - "$1/fsync-probe" "${2:-2}" <<'PY'
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
secs = float(sys.argv[2])
buf, ts, end = b"x" * 4096, [], time.time() + secs
while time.time() < end:
    t = time.perf_counter(); os.pwrite(fd, buf, 0); os.fsync(fd); ts.append(time.perf_counter() - t)
ts.sort()
print(f"{len(ts)} x (4 KiB write + fsync) in {secs:g} s: p50 {ts[len(ts) // 2] * 1e3:.2f} ms, "
      f"p99 {ts[int(len(ts) * 0.99)] * 1e3:.2f} ms")
PY
}

# rss_kib PID: the process's resident memory (VmRSS) in KiB, or nothing when it is gone.
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || true; }
# cpu_ticks PID: the process's CPU time so far (user + system) in clock ticks
# (getconf CLK_TCK a second), or nothing when it is gone.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || true; }

# A script comparing systems (wasmkeep, workerd) reports a peer that dies with these. The
# caller defines `pid_of SYSTEM` and `log_of SYSTEM` (the process and its log) and
# `declare -A failed last_rss`; failed[SYSTEM] then says why a system takes no further part.
#
# note_rss SYSTEM PID: keeps the process's resident memory while it lives (the figure a death
# report gives).
note_rss() {
  local kib
  kib=$(rss_kib "$2")
  if [ -n "$kib" ]; then last_rss[$1]=$kib; fi
}
# check_peer SYSTEM WHERE [GRACE]: called when a step of SYSTEM failed. If its process is gone,
# marks it failed with its exit status, last resident memory and last log lines, all printed.
# GRACE: after a failed step, waits up to 2 s for a process on its way out.
check_peer() {
  local sys=$1 where=$2 pid status
  pid=$(pid_of "$sys")
  if [ -n "${3:-}" ]; then
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  if kill -0 "$pid" 2>/dev/null; then return 0; fi
  status=0
  wait "$pid" 2>/dev/null || status=$?
  if ((status > 128)); then status="$status (signal $((status - 128)))"; fi
  failed[$sys]="died during $where (exit status $status; resident ${last_rss[$sys]:-?} KiB at its last reading)"
  echo "  $sys DIED during $where: exit status $status; resident ${last_rss[$sys]:-?} KiB at its last reading; its last log lines:"
  tail -n 5 "$(log_of "$sys")" 2>/dev/null | sed 's/^/    | /'
}
