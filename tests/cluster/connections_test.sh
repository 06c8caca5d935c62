#!/usr/bin/env bash
# End to end, a real `wasmkeep serve` on 127.0.0.1 with node.admin_listen: 2,000 idle
# connections from one address and 2,000 from 40 others (127.0.0.0/8 is all loopback) do
# not stop the probes on the admin listener, an authenticated actor request, nor a request
# a second node forwards to it (peers use their own listener), and an unauthenticated
# request body is refused before it is read (docs/security.md, "Connections and requests").
#
#   connections_test.sh WASMKEEP_BINARY ACTORS_DIR
#
# Prints one line per check and closes with "N passed, N failed".
set -u
wk=${1:?usage: connections_test.sh WASMKEEP_BINARY ACTORS_DIR}
actors=${2:?usage: connections_test.sh WASMKEEP_BINARY ACTORS_DIR}
backend=file
prefix=connections
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

# 4,000 client sockets here, about 1,100 in the node.
if ! ulimit -n 8192 2>/dev/null && [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 8192 ]; then
  echo "skip: needs 8192 open files (ulimit -n is $(ulimit -n))"; echo "0 passed, 0 failed"; exit 0
fi

TOKEN=$(tenant_add acme)
W deploy --tenant acme --class counter "$actors/counter.wasm" >/dev/null 2>&1
api=$(port_of 1)
admin=$(port_of 2)
"$wk" --config "$work/fast.toml" --bucket "$bucket" serve --node-id n1 --listen "127.0.0.1:$api" \
  --admin-listen "127.0.0.1:$admin" >"$work/n1.out" 2>"$work/n1.log" &
pids+=("$!")

# STATUS BODY of a request to the actor API (curl's source address: 127.0.0.1).
call() {
  status_body -m 10 -X "$1" ${3:+-H "Authorization: Bearer $3"} "${@:4}" "http://127.0.0.1:$api/v1/actors/$2"
}
code() { curl -s -m 5 -o /dev/null -w '%{http_code}' "$@"; }
admin_metric() { curl -s -m 5 "127.0.0.1:$admin/metrics" | awk -v m="$1" '$1==m {print $2}'; }

check "the node becomes ready (on the admin listener)" \
  'wait_for 20 "[ \"\$(code 127.0.0.1:$admin/readyz)\" = 200 ]"'
check "the client listener does not serve the probes then" '[ "$(code "127.0.0.1:$api/healthz")" = 404 ]'
check "the admin listener serves nothing else" \
  '[ "$(code -H "Authorization: Bearer $TOKEN" "127.0.0.1:$admin/v1/actors/acme/counter/c/increment")" = 404 ]'
check "an authenticated increment answers 1" '[ "$(call POST acme/counter/c/increment "$TOKEN")" = "200 1" ]'
# A second node: requests for n1's actor reach n1 through n1's peer listener.
start n2 n2 3
check "n2 becomes ready" 'wait_ready 3 30'
via_n2() {
  curl -s -m 10 -X POST -H "Authorization: Bearer $TOKEN" -w ' %{http_code}' \
    "http://127.0.0.1:$(port_of 3)/v1/actors/acme/counter/c/increment" | tr -d '\n'
}

# The flood: held open, sending nothing, until this script ends.
python3 - "$api" "$work/flood.ready" <<'PY' &
import socket, sys, time
port, ready = int(sys.argv[1]), sys.argv[2]
held = []
def open_from(address, n):
    for _ in range(n):
        s = socket.socket()
        s.bind((address, 0))
        s.connect(("127.0.0.1", port))
        held.append(s)
open_from("127.0.0.2", 2000)
for a in range(3, 43):
    open_from("127.0.0.%d" % a, 50)
open(ready, "w").write("%d\n" % len(held))
time.sleep(120)
PY
pids+=("$!")
check "4,000 idle connections are open" 'wait_for 60 "[ -s \"$work/flood.ready\" ]" && [ "$(cat "$work/flood.ready")" = 4000 ]'
# Each flood connection was refused (per client), evicted or kept: 1936 + 1040 + 1024.
settled() {
  local per_client evicted
  per_client=$(admin_metric 'wasmkeep_http_connections_rejected_total{listener="api",reason="per_client"}')
  evicted=$(admin_metric 'wasmkeep_http_connections_evicted_total{listener="api"}')
  [ "${per_client:-0}" = 1936 ] && [ "${evicted:-0}" -ge 1040 ]
}
check "the node refused 1,936 by the per-client cap and evicted at least 1,040" 'wait_for 20 settled'
check "/healthz answers on the admin listener" '[ "$(code "127.0.0.1:$admin/healthz")" = 200 ]'
check "/readyz answers on the admin listener" '[ "$(code "127.0.0.1:$admin/readyz")" = 200 ]'
check "an authenticated increment still answers (2)" '[ "$(call POST acme/counter/c/increment "$TOKEN")" = "200 2" ]'
check "and from one of the flooding addresses (3)" \
  '[ "$(call POST acme/counter/c/increment "$TOKEN" --interface 127.0.0.3)" = "200 3" ]'
check "n2 forwards to n1 through the flood (4)" '[ "$(via_n2)" = "4 200" ]'
check "the client listener holds at most 1,024 connections" \
  '[ "$(admin_metric "wasmkeep_http_connections_open{listener=\"api\"}")" -le 1024 ]'

# A mebibyte announced without a token: 401 instead of the 100 Continue (curl would send the
# body after 1 s without an answer), nothing read, no body bytes held.
head -c 1048576 /dev/zero >"$work/mib"
start_ms=$(date +%s%3N)
r=$(call PUT acme/counter/c/x "" --data-binary @"$work/mib" -H "Expect: 100-continue")
took=$(( $(date +%s%3N) - start_ms ))
check "an unauthenticated 1 MiB body is refused 401 before it is sent (${took} ms)" \
  '[ "${r%% *}" = 401 ] && [ "$took" -lt 1000 ]'
check "no request body is held" '[ "$(admin_metric "wasmkeep_http_buffered_body_bytes{listener=\"api\"}")" = 0 ]'
check "the counter was not touched: 5" '[ "$(call POST acme/counter/c/increment "$TOKEN")" = "200 5" ]'
finish
