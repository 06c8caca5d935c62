# Shared by the cluster test scripts (sourced, not run): the backend under test, a
# scratch directory, short lease timings, and small helpers. Callers set wk, backend and
# a scratch name prefix first:
#   wk=...; backend=file|sqlite|s3; prefix=name; source "$(dirname "$0")/common.sh"
# s3 needs the RGW environment scripts/test.sh exports (WASMKEEP_S3_ENDPOINT, ...); when it
# is missing the run is skipped, unless WASMKEEP_REQUIRE_S3=1 makes that a failure.

work=$(mktemp -d "/tmp/wasmkeep-$prefix.XXXXXX")
pids=()
declare -A node_name=()  # pid -> the name start gave it
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  [ "${KEEP:-0}" = 1 ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
passed=0
failed=0
# check TITLE COMMAND: one line, ok or FAIL; returns 1 on a failure (so a test can print what it saw).
check() { if eval "$2"; then echo "ok   $1"; passed=$((passed + 1)); else echo "FAIL $1"; failed=$((failed + 1)); return 1; fi; }
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ] || report_nodes
  [ "$failed" -eq 0 ]
}
# report_nodes: after a failure, what the nodes were doing: each started process that has
# exited (with its status: 6 is a lost lease, docs/node-lease.md), and the last warnings
# and errors of every node's log, so a failure in CI says why without the scratch directory.
report_nodes() {
  local p code f
  for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null && continue
    wait "$p" 2>/dev/null; code=$?
    # 137: killed -9 (by the suite, as a test step, or otherwise); 127: the suite waited for it.
    echo "     node process $p (${node_name[$p]:-started by the suite}) had exited: status $code"
  done
  for f in "$work"/*.log; do
    [ -s "$f" ] || continue
    local lines
    lines=$(grep -aE '^[^ ]+ (warning|error|critical) |AddressSanitizer|runtime error|terminate called|CHECK' "$f" | tail -n 4 | cut -c1-400)
    [ -n "$lines" ] || continue
    echo "     -- $(basename "$f"), its last warnings and errors:"
    sed 's/^/     | /' <<<"$lines"
  done
}

case "$backend" in
  file) bucket="file://$work/bucket" ;;
  sqlite) bucket="sqlite://$work/bucket" ;;
  s3)
    if [ -z "${WASMKEEP_S3_ENDPOINT:-}" ]; then
      if [ "${WASMKEEP_REQUIRE_S3:-0}" = 1 ]; then echo "FAIL s3 backend required but WASMKEEP_S3_ENDPOINT is unset"; echo "0 passed, 1 failed"; exit 1; fi
      echo "skip: no S3 endpoint (scripts/test.sh starts RGW)"; echo "0 passed, 0 failed"; exit 0
    fi
    # A fresh bucket per run, so runs never see each other's objects.
    bucket_name="$prefix-$(date +%s%N | tail -c 9)"
    curl -sf -o /dev/null --aws-sigv4 "aws:amz:${WASMKEEP_S3_REGION:-us-east-1}:s3" \
      --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
      -X PUT "$WASMKEEP_S3_ENDPOINT/$bucket_name" || { echo "FAIL cannot create bucket $bucket_name"; echo "0 passed, 1 failed"; exit 1; }
    bucket="s3://$bucket_name?endpoint=$WASMKEEP_S3_ENDPOINT&region=${WASMKEEP_S3_REGION:-us-east-1}&if_match_quoted=false" ;;
  *) echo "unknown backend $backend"; exit 2 ;;
esac

# Short timings (ttl 2 s, grace 1 s, safety 0.4 s, skew 0.2 s, period 0.6 s) keep it fast.
cat >"$work/fast.toml" <<TOML
[lease]
ttl_ms = 2000
grace_ms = 1000
safety_ms = 400
max_skew_ms = 200
heartbeat_period_ms = 600
TOML
W() { "$wk" --config "$work/fast.toml" --bucket "$bucket" "$@"; }
# tenant_add NAME: adds the tenant (the CLI's output in NAME.out); prints its token, the
# output's last line.
tenant_add() { W tenant add "$1" >"$work/$1.out" 2>&1; tail -n1 "$work/$1.out"; }
# operator_add LABEL: adds an operator token (the CLI's output in op.out); prints it.
operator_add() { W admin token add "$1" >"$work/op.out" 2>&1; tail -n1 "$work/op.out"; }
# slower_lease: twice the timings above (ttl 4 s). Taking hundreds of actors at once
# (restores, compiles) keeps a debug build's loop busy on a shared machine, and a lease that
# runs out there is a lapse, not what the suites that do so are about.
slower_lease() {
  sed -i 's/^ttl_ms = .*/ttl_ms = 4000/; s/^grace_ms = .*/grace_ms = 2000/; s/^safety_ms = .*/safety_ms = 800/; s/^heartbeat_period_ms = .*/heartbeat_period_ms = 1200/' "$work/fast.toml"
}

# Node ports: port_of 1..20 above a random base in [61000, 65400), above Linux's ephemeral
# range (32768-60999: an outgoing connection could take a port there between our pick and
# the node's bind) and clear of RGW's ports (scripts/rgw.sh: 20000-32000). A base whose
# ports are in use (another suite running at the same time) is skipped.
port_free() { ! command -v ss >/dev/null 2>&1 || [ -z "$(ss -Htan "( sport = :$1 )" 2>/dev/null)" ]; }
for _ in $(seq 1 50); do
  port_base=$((61000 + RANDOM % 4400))
  all_free=1
  for k in $(seq 1 20); do port_free $((port_base + k)) || { all_free=0; break; }; done
  [ "$all_free" = 1 ] && break
done
port_of() { echo $((port_base + $1)); }
# wait_ready INDEX SECONDS
wait_ready() {
  local deadline=$((SECONDS + $2))
  while [ $SECONDS -lt $deadline ]; do
    curl -sf "127.0.0.1:$(port_of "$1")/readyz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}
# wait_exit PID SECONDS: sets code to the exit status, or 124 on timeout. (Not in a
# subshell: only this shell can wait for its children.)
wait_exit() {
  local deadline=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  if kill -0 "$1" 2>/dev/null; then code=124; return; fi
  wait "$1"; code=$?
}

# start NAME NODE_ID INDEX [ENV=VALUE...]: a node in the background on port_of INDEX; its
# pid in pid_NAME, its stdout in NAME.out, its log in NAME.log. (A suite may define its
# own start after sourcing this file.)
start() {
  local name=$1 id=$2 idx=$3
  shift 3
  env "$@" "$wk" --config "$work/fast.toml" --bucket "$bucket" serve --node-id "$id" \
    --listen "127.0.0.1:$(port_of "$idx")" >"$work/$name.out" 2>"$work/$name.log" &
  local pid=$!
  pids+=("$pid")
  node_name[$pid]=$name
  eval "pid_${name//-/_}=$pid"
}
# start_acquiring NAME NODE_ID INDEX ACTORS [ENV=VALUE...]: start, the node acquiring ACTORS
# (comma-separated tenant/class/name) as soon as its lease is valid.
start_acquiring() {
  local name=$1 id=$2 idx=$3 actors=$4
  shift 4
  start "$name" "$id" "$idx" WASMKEEP_DEBUG_ACQUIRE="$actors" "$@"
}
# need_browser: for the browser tests. Debian's Python sees Debian's selenium (a python3
# earlier on the PATH may not): sets py. Without the browser the test is skipped (exit 77:
# CTest reports it as skipped, not passed), saying which package is missing;
# scripts/install-deps.sh installs all three.
need_browser() {
  py=/usr/bin/python3
  local missing=""
  [ -x /usr/bin/chromium ] || missing+=" chromium"
  [ -x /usr/bin/chromedriver ] || missing+=" chromium-driver"
  "$py" -c 'import selenium' 2>/dev/null || missing+=" python3-selenium"
  if [ -n "$missing" ]; then
    echo "skip: the browser test needs${missing} (scripts/install-deps.sh installs them)"
    echo "0 passed, 0 failed"
    exit 77
  fi
}
# stop PID: kill -9 and reap.
stop() { kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null; }
# wait_for SECONDS COMMAND: polls until COMMAND succeeds.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  while [ $SECONDS -lt $deadline ]; do eval "$1" && return 0; sleep 0.2; done
  return 1
}
# metric INDEX NAME: one sample of the node's /metrics.
metric() { curl -sf "127.0.0.1:$(port_of "$1")/metrics" | awk -v m="$2" '$1==m {print $2}'; }
# log_ms FILE PATTERN: the Unix time in ms of the first log line of FILE matching PATTERN
# (grep -E), from its timestamp; empty if none.
log_ms() {
  grep -E -m1 "$2" "$1" 2>/dev/null | python3 -c '
import sys, datetime
line = sys.stdin.readline()
if line:
    t = datetime.datetime.strptime(line.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    print(int(t.timestamp() * 1000))'
}
# written_at_ms KEY: the written_at of a nodes/ object in the bucket.
written_at_ms() { W bucket get "$1" 2>/dev/null | awk '/^written_at /{print $2}'; }

# status_body CURL-ARGS...: one curl request; prints "STATUS BODY" (the body on one line).
status_body() {
  local out
  out=$(curl -s -w '\n%{http_code}' "$@")
  echo "$(tail -n1 <<<"$out") $(head -n -1 <<<"$out" | tr '\n' ' ' | sed 's/ *$//')"
}
# increments_in_turn ROUNDS INDEX...: ROUNDS rounds of one increment of acme/counter/shared
# through each node INDEX in turn (until_ok, 10 s each); fails unless the answers count 1,
# 2, ... in order (a fresh counter at one owner), after naming each one that does not.
increments_in_turn() {
  local rounds=$1 n=0 good=0 r idx
  shift
  for _ in $(seq 1 "$rounds"); do
    for idx in "$@"; do
      n=$((n + 1))
      r=$(until_ok 10 "$idx" POST acme/counter/shared/increment)
      [ "$r" = "200 $n" ] || { good=1; echo "     (node $idx answered '$r', expected $n)"; }
    done
  done
  return $good
}

# Calling actors through node INDEX, with the tenant token $TOKEN unless TOKEN is given (""
# for none); a suite may define its own req after sourcing this file.
# req INDEX METHOD PATH [TOKEN] [curl args...]: prints "STATUS BODY" (body on one line).
req() {
  local idx=$1 method=$2 path=$3 token=${4-$TOKEN}
  shift 4 2>/dev/null || shift $#
  status_body -m 20 -X "$method" ${token:+-H "Authorization: Bearer $token"} "$@" \
    "http://127.0.0.1:$(port_of "$idx")/v1/actors/$path"
}
status() { req "$@" | cut -d' ' -f1; }
# until_ok SECONDS INDEX METHOD PATH [TOKEN] [curl args...]: retries until a 2xx answer; prints it.
until_ok() {
  local deadline=$((SECONDS + $1)) r
  shift
  while [ $SECONDS -lt $deadline ]; do
    r=$(req "$@")
    case "$r" in 2*) echo "$r"; return 0 ;; esac
    sleep 0.2
  done
  echo "$r"
  return 1
}
