# shellcheck shell=bash
# Shared by the benchmark scripts that start servers (sourced, not run, after the caller's
# `cd` to the repository root): the pinned workerd, free ports, the short lease of a bench
# node, and waiting for a node or a workerd to answer. A failure to start exits the script.

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

# wait_wasmkeep URL PID LOG: until the node at URL is ready (/readyz; 30 s at most). Exits
# the script, printing LOG, if process PID ends first or the node is not ready in time.
wait_wasmkeep() {
  for _ in $(seq 1 300); do
    curl -sf "$1/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || { cat "$3"; exit 1; }
    sleep 0.1
  done
  echo "wasmkeep: not ready"
  cat "$3"
  exit 1
}

# start_workerd JS CAPNP DIR PORT TOKEN: workerd in the background serving JS with the config
# CAPNP, its @PORT@, @DISK@ (DIR/disk) and @TOKEN@ filled in (config in DIR/conf, output in
# DIR/workerd.log); its pid in workerd_pid. Waits until it answers (401 without the token; 30
# s at most) and exits the script, printing its log, if it ends first or never does.
start_workerd() {
  local js=$1 capnp=$2 dir=$3 port=$4 token=$5
  mkdir -p "$dir/conf" "$dir/disk"
  cp "$js" "$dir/conf/"
  sed -e "s|@PORT@|$port|" -e "s|@DISK@|$dir/disk|" -e "s|@TOKEN@|$token|" "$capnp" >"$dir/conf/workerd.capnp"
  "$workerd" serve "$dir/conf/workerd.capnp" >"$dir/workerd.log" 2>&1 &
  workerd_pid=$!
  for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$port/" 2>/dev/null)" = 401 ] && return 0
    kill -0 "$workerd_pid" 2>/dev/null || { cat "$dir/workerd.log"; exit 1; }
    sleep 0.1
  done
  echo "workerd: not ready"
  cat "$dir/workerd.log"
  exit 1
}
