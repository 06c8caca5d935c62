#!/usr/bin/env bash
# A poisoned actor is contained (docs/security.md, "Poisoned actors"), with three real
# `wasmkeep serve` processes on one bucket:
#
#   a. an actor whose every event exhausts its worker's V8 heap (a module generated here:
#      it grows a funcref table to its limit, on a worker whose heap another actor of the
#      class already half fills) gets three strikes and is quarantined: every node answers
#      503 with Retry-After and a body naming the reason and the end, without walking the
#      request through the cluster; every node stays up and ready; another actor of the same
#      class and another class still answer;
#   b. the negative and positive answers are cached: twenty requests cost a node at most a
#      few reads of the record;
#   c. `wasmkeep actor quarantined` lists it; `wasmkeep actor unquarantine` lifts it and the
#      actor runs again (and fails again: it is still poisoned);
#   d. an actor whose alarm handler exhausts its worker's heap (and re-arms the alarm first)
#      is quarantined by the strikes of its own alarm runs, and then no node's alarm
#      delivery starts it again: the deliveries are refused (wasmkeep_alarms_quarantined_total
#      grows), no alarm event runs (wasmkeep_alarms_due_total stays put), no strike is added,
#      also after a node is killed and its alarm shards are scanned by the others;
#   e. a node killed (kill -9) while an actor's event runs records one strike for it (cause
#      crash) when it starts again, from its running-events journal.
#
#   quarantine_test.sh WASMKEEP_BINARY BACKEND [WAT2WASM]    BACKEND: file | s3
#
# Prints one line per check and closes with "N passed, N failed".
set -u
wk=${1:?usage: quarantine_test.sh WASMKEEP_BINARY file|s3 WAT2WASM}
backend=${2:?usage: quarantine_test.sh WASMKEEP_BINARY file|s3 WAT2WASM}
wat2wasm=${3:-$(command -v wat2wasm)}  # default: the one on PATH (scripts/check-proofs.sh passes two arguments)
[ -n "$wat2wasm" ] || { echo "usage: quarantine_test.sh WASMKEEP_BINARY file|s3 WAT2WASM (no wat2wasm on PATH)"; exit 2; }
prefix=quarantine
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

# One worker with the smallest heap the runtime allows, tables up to the most a module may
# have, and quarantine after 3 strikes for 10 minutes.
cat >>"$work/fast.toml" <<TOML
[actors]
workers = 1
isolate_heap_limit_bytes = 33554432
max_table_elements = 1000000
max_event_cpu_ms = 20000
idle_hibernate_ms = 60000
# The ballast must keep its instance (and its heap) while resident: instances are kept
# until the actor leaves memory when idle_instance_ms >= idle_hibernate_ms (configuration.md).
idle_instance_ms = 60000
quarantine_strikes = 3
quarantine_window_ms = 600000
quarantine_ms = 600000
# Alarms scanned every second, a failed handler retried after 0.5 s (then 1 s, 2 s, ...).
[alarms]
scan_period_ms = 1000
scan_lag_ms = 500
first_retry_ms = 500
handed_recheck_ms = 5000
TOML

# hog: an event grows a funcref table to 1,000,000 elements (the most a module may have),
# 10,000 at a time, each pointing at a function that call_indirect then calls through the
# table: V8 keeps the elements and the table's dispatch entries on the worker's heap, some
# 20 MB. One such actor fits a worker's 32 MiB heap and stays resident holding it (the
# ballast below); a second one's event takes the heap past its limit, fails with the
# heap-limit outcome, and its instance is thrown away — every time, while the first stays.
cat >"$work/hog.wat" <<'WAT'
(module
  (type $answer (func (result i32)))
  (memory (export "memory") 1 1)
  (table $t 0 1000000 funcref)
  (func $one (result i32) (i32.const 1))
  (elem declare func $one)
  (func (export "wk_on_request") (result i32)
    (block $full
      (loop $grow
        (br_if $full (i32.eq (table.grow $t (ref.func $one) (i32.const 10000)) (i32.const -1)))
        (br $grow)))
    (drop (call_indirect $t (type $answer) (i32.const 5)))
    (i32.const 0)))
WAT
# ok: answers 200 with an empty body.
cat >"$work/ok.wat" <<'WAT'
(module
  (memory (export "memory") 1 1)
  (func (export "wk_on_request") (result i32) (i32.const 0)))
WAT
# slow: spins through 2^40 iterations, far longer than the test (the CPU limit, 20 s, would
# end it), so its node can be killed in the middle of the event.
cat >"$work/slow.wat" <<'WAT'
(module
  (memory (export "memory") 1 1)
  (func (export "wk_on_request") (result i32) (local $i i64)
    (loop $spin
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br_if $spin (i64.ne (local.get $i) (i64.const 1099511627776))))
    (i32.const 0)))
WAT
# hogalarm: a request arms its alarm 1 s ahead and answers 200; its alarm handler re-arms the
# alarm 1 s ahead and then grows a table as hog does: beside the ballast, every run of the
# handler exhausts the worker's heap (a strike), and were it ever run where the heap has room
# it would succeed and keep re-arming (a recurring alarm), so a run after the quarantine shows.
cat >"$work/hogalarm.wat" <<'WAT'
(module
  (import "wasmkeep_v1" "now_ms" (func $now (result i64)))
  (import "wasmkeep_v1" "alarm_set" (func $alarm_set (param i64)))
  (type $answer (func (result i32)))
  (memory (export "memory") 1 1)
  (table $t 0 1000000 funcref)
  (func $one (result i32) (i32.const 1))
  (elem declare func $one)
  (func (export "wk_on_request") (result i32)
    (call $alarm_set (i64.add (call $now) (i64.const 1000)))
    (i32.const 0))
  (func (export "wk_on_alarm") (result i32)
    (call $alarm_set (i64.add (call $now) (i64.const 1000)))
    (block $full
      (loop $grow
        (br_if $full (i32.eq (table.grow $t (ref.func $one) (i32.const 10000)) (i32.const -1)))
        (br $grow)))
    (drop (call_indirect $t (type $answer) (i32.const 5)))
    (i32.const 0)))
WAT
for m in hog ok slow hogalarm; do "$wat2wasm" "$work/$m.wat" -o "$work/$m.wasm" || { echo "FAIL wat2wasm $m"; exit 1; }; done

# req INDEX METHOD PATH: prints "STATUS BODY" (body on one line); headers in $work/headers.
req() {
  status_body -m 60 -X "$2" -H "Authorization: Bearer $TOKEN" -D "$work/headers" \
    "http://127.0.0.1:$(port_of "$1")/v1/actors/$3"
}
retry_after() { awk 'tolower($1)=="retry-after:" {print $2+0}' "$work/headers"; }
# sum METRIC: the metric summed over the three nodes.
sum() {
  local t=0 v
  for i in 1 2 3; do v=$(metric "$i" "$1"); v=${v%%.*}; t=$((t + ${v:-0})); done
  echo "$t"
}
# node_start NAME INDEX: a node with its own data directory (the journal).
node_start() { start "$1" "$1" "$2"; }
start() {
  local name=$1 id=$2 idx=$3
  "$wk" --config "$work/fast.toml" --bucket "$bucket" serve --node-id "$id" --data-dir "$work/data-$id" \
    --listen "127.0.0.1:$(port_of "$idx")" >"$work/$name.out" 2>>"$work/$name.log" &
  local pid=$!
  pids+=("$pid")
  eval "pid_${name//-/_}=$pid"
}

echo "== quarantine on $backend"
TOKEN=$(tenant_add acme)
for m in hog ok slow hogalarm; do W deploy --tenant acme --class "$m" "$work/$m.wasm" >/dev/null 2>&1 || echo "     (deploy $m failed)"; done
node_start a 1
node_start b 2
node_start c 3
check "three nodes ready" 'wait_ready 1 20 && wait_ready 2 20 && wait_ready 3 20'

# ---- a. three strikes, through any node
# The ballast: an actor of the class resident on node a, holding most of its worker's heap.
check "the ballast actor runs on node a (its table fits the heap)" '[ "$(req 1 POST acme/hog/ballast)" = "200 " ]'
t0=$(date +%s%N)
for i in 1 2 3; do
  r=$(req "$i" POST acme/hog/p1)
  echo "     (event $i through node $i: ${r:0:150})"
  [ "${r%% *}" = 500 ] && [[ "$r" == *"heap limit"* ]] || bad_event=1
done
t1=$(date +%s%N)
echo "     (three heap-exhausting events took $(( (t1 - t0) / 1000000 )) ms)"
check "each event fails with a 500 naming the V8 heap limit" '[ -z "${bad_event:-}" ]'
check "the strikes are recorded and the actor quarantined" \
  'wait_for 15 "W actor quarantined 2>/dev/null | grep -q \"^acme/hog/p1 .*quarantined\""'
# Node c forwarded event 3 without reading the record (the node that starts an actor checks
# it: docs/security.md, "The check, and what it costs"); it must still not run the actor:
# the owner refuses it, or, if the owner has let it go already, c's check before acquiring
# it does (c knows nothing of the record that is younger than 2 s, so it asks the bucket).
r=$(req 3 GET acme/hog/p1)
echo "     (node 3 at once: ${r:0:60})"
check "at once, even a node whose answer is stale does not run it: 503" '[ "${r%% *}" = 503 ]'
sleep 2.1  # now every node's answer is fresh
fwd0=$(sum 'wasmkeep_api_requests_total{route="forwarded"}')
ok503=1
for i in 1 2 3; do
  r=$(req "$i" GET acme/hog/p1)
  ra=$(retry_after)
  echo "     (node $i: ${r:0:200}; Retry-After ${ra:-none})"
  { [ "${r%% *}" = 503 ] && [[ "$r" == *"is quarantined until"* ]] && [[ "$r" == *"heap limit"* ]] &&
    [ "${ra:-0}" -gt 500 ] && [ "${ra:-0}" -le 600 ]; } || ok503=0
done
fwd1=$(sum 'wasmkeep_api_requests_total{route="forwarded"}')
check "every node answers 503 naming the reason and the end, with Retry-After (about 600 s)" '[ "$ok503" = 1 ]'
# Refused by the node asked, or by the node that holds the actor if one still does (a node
# that does not know forwards to the holder, which refuses it): counted as quarantined.
echo "     (forwarded meanwhile: $(( ${fwd1%%.*} - ${fwd0%%.*} )))"
check "each request refused as quarantined, by the node asked or the actor's holder" \
  '[ "$(sum wasmkeep_api_requests_total{route=\"quarantined\"})" -ge 3 ]'
check "every node stays up and ready" 'kill -0 "$pid_a" && kill -0 "$pid_b" && kill -0 "$pid_c" &&
  curl -sf "127.0.0.1:$(port_of 1)/readyz" >/dev/null && curl -sf "127.0.0.1:$(port_of 2)/readyz" >/dev/null &&
  curl -sf "127.0.0.1:$(port_of 3)/readyz" >/dev/null'
check "another actor of the class is not quarantined (on node b, without ballast, it answers 200)" '[ "$(req 2 POST acme/hog/p2)" = "200 " ]'
check "another class answers on every node" '[ "$(req 1 GET acme/ok/x)" = "200 " ] && [ "$(req 2 GET acme/ok/x)" = "200 " ] && [ "$(req 3 GET acme/ok/x)" = "200 " ]'
check "the nodes counted 3 strikes and 1 quarantine, logged once each" \
  '[ "$(sum wasmkeep_quarantine_strikes_total{cause=\"instance\"})" -ge 3 ] && [ "$(sum wasmkeep_quarantines_total)" = 1 ] &&
   [ "$(cat "$work"/a.log "$work"/b.log "$work"/c.log | grep -c "actor quarantined")" = 1 ]'

# ---- b. the cache: twenty requests on one node, a few reads at most
reads0=$(metric 3 'wasmkeep_quarantine_checks_total{answer="read"}'); reads0=${reads0%%.*}
started_ms=$(date +%s%3N)
for _ in $(seq 1 20); do req 3 GET acme/hog/p1 >/dev/null; done
took_ms=$(( $(date +%s%3N) - started_ms ))
reads1=$(metric 3 'wasmkeep_quarantine_checks_total{answer="read"}'); reads1=${reads1%%.*}
# One read per 2 s cache lifetime at most (on a loaded machine twenty requests can take
# several lifetimes); without the cache it would be twenty.
allowed=$(( 2 + took_ms / 2000 ))
echo "     (node c read the record $((reads1 - reads0)) times for 20 requests in ${took_ms} ms; at most $allowed)"
check "twenty requests to a quarantined actor cost at most one read of its record per 2 s" \
  '[ $((reads1 - reads0)) -le "$allowed" ] && [ "$allowed" -lt 20 ]'

# ---- c. listing and lifting
check "actor quarantined lists it with 3 strikes" 'W actor quarantined 2>/dev/null | grep -q "^acme/hog/p1 .* 3 .*heap limit"'
check "actor quarantined --json names the nodes that struck" \
  'W actor quarantined --json 2>/dev/null | python3 -c "import json,sys; q=json.load(sys.stdin); assert q[0][\"quarantined\"] and len(q[0][\"strikes\"])==3"'
check "actor unquarantine lifts it" 'W actor unquarantine acme/hog/p1 >/dev/null 2>&1'
lifted_ms=$(date +%s%3N)  # the record is gone by now
check "unquarantine of an actor without a record: exit 4" 'W actor unquarantine acme/ok/x >/dev/null 2>&1; [ $? = 4 ]'
# The lift reaches every node within its cache's ttl (2 s: docs/security.md, "The check, and what it costs"):
# until then a node may still answer from a read it sent before the record was deleted. So
# each node is asked until it runs the actor (500, it is still poisoned), and a "quarantined"
# answer is a failure only when it was asked for more than 2 s (and 0.25 s for the test's own
# process starts) after the lift; a node that never runs it within 20 s fails too.
lift_reached() {  # INDEX
  local r sent
  while :; do
    sent=$(date +%s%3N)
    r=$(req "$1" GET acme/hog/p1)
    [ "${r%% *}" = 500 ] && return 0
    if [ "${r%% *}" = 503 ] && [[ "$r" == *"is quarantined until"* ]] && [ "$sent" -gt $((lifted_ms + 2250)) ]; then
      echo "     (node $1 still answered quarantined $((sent - lifted_ms)) ms after the lift)"
      return 1
    fi
    if [ "$sent" -gt $((lifted_ms + 20000)) ]; then echo "     (node $1 did not run it within 20 s: ${r:0:120})"; return 1; fi
    sleep 0.1
  done
}
check "once lifted, the actor runs again on every node within the cache's 2 s (and fails: 500)" \
  'lift_reached 1 && lift_reached 2 && lift_reached 3'

# ---- d. an actor whose alarm handler exhausts the heap: quarantined, and never woken again
# Its request arms the alarm through node a (the ballast's node, which acquires it); the
# owner's timer runs the handler, which fails at the heap limit (a strike) and is retried
# after 0.5 s and 1 s (the interval holds them to 1 s apart): three strikes.
# due INDEX / qrefused INDEX / strikes: one node's wasmkeep_alarms_due_total (alarm events
# started), its wasmkeep_alarms_quarantined_total (deliveries refused), and the strikes the
# record holds.
due() { local v; v=$(metric "$1" wasmkeep_alarms_due_total); echo "${v%%.*}"; }
qrefused() { local v; v=$(metric "$1" wasmkeep_alarms_quarantined_total); echo "${v%%.*}"; }
record_strikes() { W bucket get quarantine/acme/hogalarm/a1 2>/dev/null | awk '/^strikes /{print $2}'; }
check "the ballast is (still, or again) resident on node a" '[ "$(req 1 POST acme/hog/ballast)" = "200 " ]'
check "a request arms the alarm of an actor whose alarm handler exhausts the heap" '[ "$(req 1 POST acme/hogalarm/a1)" = "200 " ]'
check "its own alarm runs strike it three times and quarantine it" \
  'wait_for 30 "grep -q \"actor quarantined.*acme/hogalarm/a1\" \"$work\"/a.log \"$work\"/b.log \"$work\"/c.log"'
struck=$(cat "$work"/a.log "$work"/b.log "$work"/c.log | grep -c "actor strike.*acme/hogalarm/a1.*heap limit")
check "the strikes name the heap limit ($struck logged, the record holds $(record_strikes))" '[ "$struck" = 3 ] && [ "$(record_strikes)" = 3 ]'
due_at_q=($(due 1) $(due 2) $(due 3))
refused_at_q=$(( $(qrefused 1) + $(qrefused 2) + $(qrefused 3) ))
echo "     (alarm events started so far: ${due_at_q[*]}; deliveries refused: $refused_at_q)"
# The alarm is still set (the failed runs' writes, the re-arm included, were discarded, and
# nothing clears it): every scan of its shard, and its last owner's timer, deliver it again.
check "its deliveries are refused as quarantined (wasmkeep_alarms_quarantined_total grows by 3)" \
  'wait_for 20 "[ \$(( \$(qrefused 1) + \$(qrefused 2) + \$(qrefused 3) )) -ge $((refused_at_q + 3)) ]"'
check "and no node started an alarm event since the quarantine, nor struck again" \
  '[ "$(due 1) $(due 2) $(due 3)" = "${due_at_q[*]}" ] && [ "$(record_strikes)" = 3 ]'
check "its alarm is still set, waiting for the quarantine to end" 'W actor alarm acme/hogalarm/a1 2>/dev/null | grep "^alarm " | grep -qv none'

# ---- e. a crash during an event is a strike at the next start
# The slow actor is acquired by the node the request reaches (a).
( req 1 POST acme/slow/s1 >"$work/slow.out" ) &
slow_req=$!
owner=""
for _ in $(seq 1 50); do
  owner=$(W bucket get owners/acme/slow/s1 2>/dev/null | awk '/^owner /{print $2}')
  [ -n "$owner" ] && break
  sleep 0.1
done
sleep 1  # the event is running (it spins for seconds)
case "$owner" in a) opid=$pid_a; oidx=1 ;; b) opid=$pid_b; oidx=2 ;; c) opid=$pid_c; oidx=3 ;; *) opid="" ;; esac
echo "     (the slow actor's owner: ${owner:-none})"
stop "$opid"
wait "$slow_req" 2>/dev/null
start "$owner-2" "$owner" "$oidx"
check "the restarted node records a crash strike for the actor whose event was running" \
  'wait_for 20 "W actor quarantined --all --json 2>/dev/null | grep -q \"acme/slow/s1\""'
check "its log says so and counts it (cause crash)" \
  'wait_for 10 "grep -q \"actor strike.*acme/slow/s1.*cause=crash\" \"$work/$owner-2.log\"" &&
   [ "$(metric "$oidx" "wasmkeep_quarantine_strikes_total{cause=\"crash\"}" | cut -d. -f1)" = 1 ]'
check "one strike is not a quarantine: the actor is not listed as quarantined" \
  '! W actor quarantined 2>/dev/null | grep -q "acme/slow/s1"'
# The killed node's alarm shards passed to another node or to its restarted process (ttl +
# grace after the kill), whose scans deliver the alarm afresh: still nobody runs it.
for i in 1 2 3; do [ "$i" = "$oidx" ] && due_at_q[$((i - 1))]=0; done  # a new process counts from 0
check "after the kill and the restart, still no node started the quarantined actor's alarm" \
  '[ "$(due 1) $(due 2) $(due 3)" = "${due_at_q[*]}" ] && [ "$(record_strikes)" = 3 ]'

finish
