#!/usr/bin/env bash
# `wasmkeep cluster cost` (docs/cli.md, "cluster cost") against a file:// bucket: bad input
# named with exit 2 and never a crash (checked before the bucket is opened), a missing bucket
# named with exit 8, an empty cluster, nodes that cannot be read named in
# a note, then three live nodes found through the bucket (their endpoints objects) and
# their requests summed by purpose, as text and JSON, since start and over a window; what
# the bucket stores per tenant (log, history, modules) and its price per month.
#
#   cost_cmd_test.sh WASMKEEP_BINARY
set -u
wk=${1:?usage: cost_cmd_test.sh WASMKEEP_BINARY}
backend=file
prefix=cost
# shellcheck source=../../tests/cluster/common.sh
source "$(dirname "$0")/../../tests/cluster/common.sh"

# run NAME EXPECTED_EXIT EXPECTED_TEXT ARGS...: one command, its exit status and a text it
# must print (stdout or stderr); a crash (a signal) is never an expected status.
run() {
  local name=$1 want_rc=$2 want_text=$3
  shift 3
  out=$(W "$@" 2>&1)
  local rc=$?
  check "$name (exit $rc)" '[ "$rc" = "$want_rc" ] && grep -qF -- "$want_text" <<<"$out"'
  [ "$rc" = "$want_rc" ] || echo "$out" | head -5 | sed 's/^/     /'
}

echo "== bad input"
run "an unknown price table" 2 "neither aws-s3, r2 nor a readable price file" cluster cost --prices gcs
printf '[per_1000_requests]\nput = 1\nget = 1\nhead = 1\nlist = 1\n' >"$work/missing.toml"
run "a price file without delete" 2 "missing per_1000_requests.delete" cluster cost --prices "$work/missing.toml"
printf '[per_1000_requests]\nput = -1\nget = 1\nhead = 1\nlist = 1\ndelete = 0\n' >"$work/negative.toml"
run "a negative price" 2 "per_1000_requests.put must be a number" cluster cost --prices "$work/negative.toml"
printf 'this is = = not toml\n' >"$work/garbage.toml"
run "a file that is not TOML" 2 "garbage.toml: line 1" cluster cost --prices "$work/garbage.toml"
head -c 3000 /dev/urandom >"$work/binary.toml"
out=$(W cluster cost --prices "$work/binary.toml" 2>&1); rc=$?
check "a binary price file: exit 2, not a crash (exit $rc)" '[ "$rc" = 2 ]'
run "a bad duration" 2 "is not a duration" cluster cost --since 5x
run "a zero duration" 2 "is not a duration" cluster cost --since 0s
run "a duration over a day" 2 "at most 24h" cluster cost --since 25h
run "a metrics URL that is not one" 1 "bad metrics URL" cluster cost --metrics not-a-url
run "a metrics URL nobody answers" 1 "cannot read" cluster cost --metrics "http://127.0.0.1:$(port_of 19)/metrics"

echo "== no bucket, an empty bucket"
run "a bucket that does not exist: exit 8, naming it, nothing created" 8 "no bucket there" cluster cost
check "the mistyped bucket was not created" '[ ! -e "$work/bucket" ]'
# An empty bucket: created by a command that may create one, its object removed again.
W bucket put empty - </dev/null >/dev/null 2>&1 && W bucket rm empty >/dev/null 2>&1
run "no nodes: nothing to sum, exit 0" 0 "0 live nodes" cluster cost

echo "== three nodes"
TOKEN=""
for i in 1 2 3; do start "n$i" "n$i" "$i"; done
for i in 1 2 3; do check "n$i ready" "wait_ready $i 30"; done
# A page that is not a node's metrics.
run "a URL that is not a node's metrics" 1 "not a WasmKeep node" cluster cost --metrics "http://127.0.0.1:$(port_of 1)/healthz"
sleep 4  # a few periods of renewals and listings
run "the three live nodes are found and summed" 0 "3 live nodes" cluster cost
check "the lease row shows about 3 writes a period cluster-wide" \
  'awk "\$1==\"lease\" {exit !(\$2 > 0.5)}" <<<"$out"'
check "every purpose of a node is listed, and the total" 'grep -q "^listing " <<<"$out" && grep -q "^TOTAL " <<<"$out"'
run "R2 prices" 0 "Cloudflare R2" cluster cost --prices r2
out=$(W cluster cost --json --since 2s 2>&1); rc=$?
check "--json --since 2s: exit 0" '[ "$rc" = 0 ]'
check "JSON: three nodes, lease requests, money per day" 'python3 -c "
import json, sys
j = json.loads(sys.argv[1])
assert j[\"nodes\"] == 3, j[\"nodes\"]
assert j[\"purposes\"][\"lease\"][\"requests_per_second\"] > 0.5
assert j[\"purposes\"][\"listing\"][\"by_op_per_second\"][\"list\"] > 0.5
assert j[\"money_per_day\"] > 0
assert j[\"purposes\"][\"other\"][\"requests_per_second\"] == 0
" "$out"'
run "one node by its metrics URL" 0 "1 live node;" cluster cost --metrics "http://127.0.0.1:$(port_of 2)/metrics"
check "--metrics lists nothing in the bucket, and says so" 'grep -q "^storage: not listed (--metrics" <<<"$out"'

echo "== storage per tenant"
pos() { printf '%020d-%020d' "$1" "$2"; }
head -c 5000 /dev/zero >"$work/5k"; head -c 700 /dev/zero >"$work/700"
W bucket put "wal/acme/kv/a/$(pos 1 0)" "$work/5k" >/dev/null
W bucket put "snapshot/acme/kv/a/$(pos 1 1)" "$work/700" >/dev/null
W bucket put "wal/acme/kv/a/$(pos 1 2)" "$work/700" >/dev/null
W bucket put "classes/acme/kv/modules/abc" "$work/5k" >/dev/null
W bucket put "wal/globex/chat/r/$(pos 1 0)" "$work/700" >/dev/null
run "the bucket is listed" 0 "STORAGE: " cluster cost
check "acme's row: 4 objects, 6.2 KiB of log, 4.9 KiB of it history, 4.9 KiB of modules, a price" \
  'awk "\$1==\"acme\" {exit !(\$2==4 && \$3==\"6.2\" && \$5==\"4.9\" && \$7==\"4.9\" && \$NF!=\"\")} " <<<"$out"'
check "globex's row and the cluster's own (its node records)" 'grep -q "^globex " <<<"$out" && grep -q "^(cluster) " <<<"$out"'
out=$(W cluster cost --json --prices r2 2>&1); rc=$?
check "JSON: the tenants' bytes, history and price per month (exit $rc)" 'python3 -c "
import json, sys
j = json.loads(sys.argv[1])
s = j[\"storage\"]
assert s[\"per_gb_month\"] == 0.015, s[\"per_gb_month\"]
a = s[\"tenants\"][\"acme\"]
assert a[\"log_bytes\"] == 6400 and a[\"history_bytes\"] == 5000 and a[\"module_bytes\"] == 5000, a
assert abs(a[\"money_per_month\"] - 11400 / 2**30 * 0.015) < 1e-12, a
assert s[\"cluster\"][\"objects\"] >= 3 and s[\"lists\"] >= 1
assert s[\"total\"][\"bytes\"] == sum(t[\"bytes\"] for t in s[\"tenants\"].values()) + s[\"cluster\"][\"bytes\"]
" "$out"'
printf '[per_1000_requests]\nput = 1\nget = 1\nhead = 1\nlist = 1\ndelete = 0\n' >"$work/nostorage.toml"
run "a price file without [storage]: listed, not priced" 0 "has no storage rate: not priced" cluster cost --prices "$work/nostorage.toml"
run "--no-storage lists nothing" 0 "storage: not listed (--no-storage)" cluster cost --no-storage

# A node killed: its endpoints object stays, but it is no longer live once fenced, and a
# live node whose process cannot be reached is named.
stop "$pid_n3"
run "a node that does not answer is left out and named" 0 "n3: cannot read" cluster cost
finish
