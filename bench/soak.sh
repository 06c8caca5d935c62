#!/usr/bin/env bash
# The soak (docs/benchmarks.md, "The soak"): N nodes on one bucket, a steady load of durable
# writes to busy actors and many cold ones, a nemesis (kill -9 and restart, a node frozen
# past its lease with SIGSTOP and resumed, a paused bucket, a node drained and undrained,
# actors moved, a balance, a drained node restarted, a class deployed anew, an actor
# restored to a point of its history and forked at another, the tenant's quotas switched on
# for a while: 429s that must never be applied), alarms set throughout, bank
# transfers (messages between actors) throughout, bounded in time; then a
# list-append checker (every acknowledged write present exactly once, at the number it was
# acknowledged with, in order), an alarm checker (every alarm set by an acknowledged request
# or re-armed by a durable handler run fired, none early, none stale), the bank's checks
# (money conserved, every acknowledged transfer applied exactly once, nothing left to
# deliver), the history checks (each restored actor holds exactly its state at the point
# and the writes acknowledged after, each fork its state at its point), the usage check
# (`tenant usage` of the soak tenant reads after it all and counts requests, CPU and stored
# byte-seconds) and a report, printed and written as JSON.
#
#   bench/soak.sh [--nodes N] [--minutes M | --hours H] [--bucket rgw|file|URL]
#                 [--wasmkeep BIN] [--actors DIR] [--out DIR] [--fast-leases] [--seed S]
#                 [--rate WRITES_PER_S] [--busy N] [--cold N] [--alarm-rate SETS_PER_S]
#                 [--bank-rate TRANSFERS_PER_S] [--bank-accounts N]
#                 [--hist-rate WRITES_PER_S] [--hist-actors N] [--no-nemesis]
#
#   --nodes N        nodes (default 3)
#   --minutes M      length of the load and nemesis phase (default 10; fractions allowed);
#                    --hours H for long runs. The run stops by itself.
#   --bucket B       rgw (default: a Ceph RGW of the soak's own, started with scripts/rgw.sh
#                    and stopped at the end, which the nemesis can pause), file (a fresh
#                    file:// directory; the pause is the nodes' test-only outage fault), or
#                    any s3:// or file:// URL (not paused: the soak does not own it)
#   --wasmkeep BIN   default build/release/src/cli/wasmkeep, else build/ci/...
#   --actors DIR     the compiled examples (chat.wasm, alarm_probe.wasm, bank.wasm, kv.wasm); default
#                    beside the binary's build
#   --out DIR        logs, the report (report.json) and the histories; default a new
#                    directory under /tmp
#   --fast-leases    ttl 2 s, grace 1 s, period 0.6 s (the suite's short version), instead of
#                    the defaults (ttl 10 s, grace 5 s, period 3 s) the goals are stated at
#   --rate R         writes per second the clients aim at, answered or not (default 20)
#   --busy N, --cold N   busy actors (most writes, from --writers clients, default 8) and
#                    cold ones (written in turn by one more client at --cold-rate per
#                    second, default 0.5, so each hibernates between its writes); defaults
#                    6 and 200
#   --alarm-rate R, --alarm-actors N   alarms set per second (default 0.5; 0: none) on a
#                    pool of N actors of examples/testdata/alarm_probe.cc (default 200), each
#                    due 1 s to about a minute later; each actor is left alone until its alarm
#                    should have fired by itself (docs/benchmarks.md, "The soak")
#   --no-nemesis     the load alone, no kill, freeze, pause or operator action: what a
#                    healthy cluster spends (docs/benchmarks.md, "Pay only for change")
#   --bank-rate R, --bank-accounts N   transfers started per second (default 5; 0: none)
#                    between N accounts of examples/bank/bank.cc (default 50), each keyed and
#                    sent again until answered (tests/cluster/bank.py)
#   --hist-rate R, --hist-actors N   writes per second (default 2; 0: none) to N kv actors
#                    (examples/kv/kv.cc, default 3), keys k1, k2, ... in order, which the
#                    nemesis restores to a point of their history and forks
#                    (docs/benchmarks.md, "The soak")
#
# Exit 0 when nothing acknowledged was lost, duplicated or out of order, every alarm fired
# in time and none early, the bank's checks held, the history checks held, and the nodes
# ran; 1 otherwise (the report
# says why); 2 for bad arguments or a setup that failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

nodes=3 minutes=10 bucket=rgw wk="" actors="" out="" extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --hours) minutes=$(python3 -c "print(float('$2') * 60)"); shift 2 ;;
    --bucket) bucket=$2; shift 2 ;;
    --wasmkeep) wk=$2; shift 2 ;;
    --actors) actors=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --fast-leases) extra+=(--fast-leases); shift ;;
    --no-nemesis) extra+=(--no-nemesis); shift ;;
    --seed|--rate|--busy|--cold|--cold-rate|--writers|--alarm-rate|--alarm-actors|--bank-rate|--bank-accounts|\
    --hist-rate|--hist-actors)
      extra+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "soak: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -z "$wk" ]; then
  for b in build/release build/ci build/debug; do
    [ -x "$b/src/cli/wasmkeep" ] && { wk=$root/$b/src/cli/wasmkeep; break; }
  done
fi
[ -n "$wk" ] && [ -x "$wk" ] || { echo "soak: no wasmkeep binary (build one, or pass --wasmkeep)" >&2; exit 2; }
[ -n "$actors" ] || actors=$(dirname "$(dirname "$(dirname "$wk")")")/actors
for m in chat alarm_probe bank kv; do
  [ -f "$actors/$m.wasm" ] || { echo "soak: no $actors/$m.wasm (build the examples, or pass --actors)" >&2; exit 2; }
done
[ -n "$out" ] || out=$(mktemp -d /tmp/wasmkeep-soak.XXXXXX)
mkdir -p "$out"

rgw_dir=""
cleanup() {
  if [ -n "$rgw_dir" ]; then WASMKEEP_RGW_DIR=$rgw_dir scripts/rgw.sh stop "$rgw_dir" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

case "$bucket" in
  rgw)
    rgw_dir=$out/rgw
    echo "soak: starting a Ceph RGW of its own in $rgw_dir" >&2
    eval "$(WASMKEEP_RGW_DIR=$rgw_dir scripts/rgw.sh start "$rgw_dir")" || { echo "soak: RGW did not start" >&2; exit 2; }
    bucket_url="s3://$WASMKEEP_S3_BUCKET?endpoint=$WASMKEEP_S3_ENDPOINT&region=$WASMKEEP_S3_REGION&if_match_quoted=false"
    pause=rgw:$rgw_dir
    backend=rgw ;;
  file)
    bucket_url="file://$out/bucket"
    pause=fault
    backend=file ;;
  s3://*|file://*|sqlite://*)
    bucket_url=$bucket
    pause=none
    backend=${bucket%%://*} ;;
  *) echo "soak: --bucket must be rgw, file, or a bucket URL" >&2; exit 2 ;;
esac

status=0
python3 "$root/bench/soak.py" --wasmkeep "$wk" --actors "$actors" --bucket "$bucket_url" --backend "$backend" \
  --pause "$pause" --nodes "$nodes" --minutes "$minutes" --out "$out" ${extra[@]+"${extra[@]}"} || status=$?
exit $status
