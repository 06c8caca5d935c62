#!/usr/bin/env bash
# Messages between actors (docs/messages.md), measured in one run: two `wasmkeep serve` nodes
# on one bucket, the bank example's accounts sending each other credits. Prints three tables
# (docs/benchmarks.md, "Messages between actors", records a run):
#   1. messages per second and send-to-applied latency (p50/p99, from the client and from
#      the node's wasmkeep_message_latency_seconds) between two actors on one node and across
#      the two nodes, one message at a time with idle gaps, and busy (messages always in flight);
#   2. bucket requests per message by purpose and operation for the same four cases (the
#      nodes' wasmkeep_bucket_requests_total before and after, less an idle background);
#   3. POST /increment on the counter without and with an Idempotency-Key, side by side.
# The workload and how each figure is taken: bench/messages_bench.py (its --help).
#
#   bench/messages_bench.sh [DRIVER OPTIONS]       (2–2.5 minutes with the defaults)
#
# e.g. `bench/messages_bench.sh --rounds 3` (medians of three rounds, about 6 minutes),
# `--idle 200 --busy 5000 --seconds 15` (longer cases), `--cases one-busy,two-busy`.
#
# Environment: WASMKEEP_MESSAGES_BENCH_BUILD (default build/release: the release preset's
# `wasmkeep` and `wk_actors` targets must be built), WASMKEEP_MESSAGES_BENCH_BUCKET (sqlite,
# file or s3; default sqlite, a fresh bucket under a scratch directory; s3 uses
# WASMKEEP_S3_ENDPOINT and the AWS_* variables when set, as `eval "$(scripts/rgw.sh start)"`
# exports them, else starts the project's RGW on 127.0.0.1 for the run and stops it after;
# a fresh bucket per run either way), WASMKEEP_MESSAGES_BENCH_OUT (a directory to keep the
# rows as JSON and the nodes' logs), KEEP=1 (keep the scratch directory).
#
# No `set -e`: whatever fails is said (a case that fails is a row of its table with why; a
# setup step that fails, its exit status and last lines), and the exit status is non-zero.
set -u
cd "$(dirname "$0")/.." || exit 2
build=${WASMKEEP_MESSAGES_BENCH_BUILD:-build/release}
scheme=${WASMKEEP_MESSAGES_BENCH_BUCKET:-sqlite}
wk=$build/src/cli/wasmkeep
for f in "$wk" "$build/actors/bank.wasm" "$build/actors/counter.wasm"; do
  [ -e "$f" ] || {
    echo "messages bench: missing $f: build it first (cmake --preset release && cmake --build --preset release --target wasmkeep wk_actors)"
    exit 2
  }
done
case "$scheme" in sqlite | file | s3) ;; *) echo "messages bench: WASMKEEP_MESSAGES_BENCH_BUCKET must be sqlite, file or s3"; exit 2 ;; esac
work=$(mktemp -d /tmp/wasmkeep-messages-bench.XXXXXX)
rgw_started=""
idem_args=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  [ -n "$rgw_started" ] && ./scripts/rgw.sh stop "$work/rgw" >/dev/null 2>&1
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$scheme" = s3 ]; then
  if [ -z "${WASMKEEP_S3_ENDPOINT:-}" ]; then
    echo "messages bench: starting the project's RGW (scripts/rgw.sh, 127.0.0.1; at most ${WASMKEEP_RGW_TIMEOUT:-120} s)"
    mkdir -p "$work/rgw"
    rgw_started=1
    if ! ./scripts/rgw.sh start "$work/rgw" >"$work/rgw.env" 2>"$work/rgw.err"; then
      echo "messages bench: scripts/rgw.sh start failed (exit status $?); its last lines:"
      tail -n 15 "$work/rgw.err"
      exit 1
    fi
    # shellcheck disable=SC1091
    source "$work/rgw/env"
  fi
  # A fresh bucket NAME (20 s at most), its URL in s3_url.
  make_bucket() {
    local code
    code=$(curl -s -o "$work/mkbucket.out" -w '%{http_code}' --max-time 20 \
      --aws-sigv4 "aws:amz:${WASMKEEP_S3_REGION:-us-east-1}:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
      -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X PUT "$WASMKEEP_S3_ENDPOINT/$1")
    if [ "$code" != 200 ]; then
      echo "messages bench: cannot create the bucket $1 at $WASMKEEP_S3_ENDPOINT: HTTP $code $(head -c 300 "$work/mkbucket.out")"
      exit 1
    fi
    s3_url="s3://$1?endpoint=$WASMKEEP_S3_ENDPOINT&region=${WASMKEEP_S3_REGION:-us-east-1}&if_match_quoted=false"
  }
  stamp=$(date +%s%N | tail -c 9)
  make_bucket "messagesbench-$stamp"
  bucket=$s3_url
  # The idempotency cases' nodes: a bucket of their own (bench/messages_bench.py, idem-cN).
  make_bucket "messagesbench-idem-$stamp"
  idem_args=(--idem-bucket "$s3_url")
  backend_note="s3:// at $WASMKEEP_S3_ENDPOINT (radosgw $(radosgw --version 2>/dev/null | awk '{print $3}'))"
else
  bucket="$scheme://$work/bucket"
  backend_note="$scheme:// on $(df -h "$work" | awk 'NR==2{print $1}')"
fi

git_rev=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
[ -z "$(git status --porcelain --untracked-files=no -- src 2>/dev/null)" ] || git_rev="$git_rev+uncommitted src/ changes"
echo "setup: $(nproc) cores ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)), $(free -g | awk '/Mem:/{print $2}') GiB," \
  "$(uname -r), $(date -u +%Y-%m-%dT%H:%MZ); WasmKeep git $git_rev, build $build; $backend_note"
out_args=(${idem_args[@]+"${idem_args[@]}"})
[ -n "${WASMKEEP_MESSAGES_BENCH_OUT:-}" ] && out_args+=(--out "$WASMKEEP_MESSAGES_BENCH_OUT")
python3 bench/messages_bench.py --wk "$(realpath "$wk")" --actors "$(realpath "$build/actors")" --bucket "$bucket" \
  --work "$work" ${out_args[@]+"${out_args[@]}"} "$@"
rc=$?
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$rc" = 0 ] || echo "messages bench: exit status $rc (the rows above say which case failed and why)"
exit "$rc"
