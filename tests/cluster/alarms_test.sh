#!/usr/bin/env bash
# Alarms with real `wasmkeep serve` processes (docs/alarms.md): 200 alarms over 100 actors on
# three nodes, the owner of half of them killed -9 before they are due; every alarm fires,
# counted from the actors' own durable logs, and none early; a hibernated actor is woken
# by its alarm; a deleted alarm never fires; a failing handler is retried with back-off;
# `wasmkeep actor alarm` shows an actor's alarm.
#
#   alarms_test.sh WASMKEEP_BINARY BACKEND ACTORS_DIR      BACKEND: file | s3
#
# ACTORS_DIR holds the compiled test actors (build/<preset>/actors: alarm_probe.wasm, whose
# log records s<ms> sets, d deletes and f<ms>:<retry>:<now> firings). Prints one line per
# check and closes with "N passed, N failed".
set -u
wk=${1:?usage: alarms_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
backend=${2:?usage: alarms_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
actors=${3:?usage: alarms_test.sh WASMKEEP_BINARY file|s3 ACTORS_DIR}
prefix=alarms
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

# The slower leases (ttl 4 s, common.sh): beside other suites on 2 cores, a node whose
# heartbeats lapsed past the short timings' 3 s was fenced by its peers and exited (status
# 6), and every check through it failed; a lapse is not what this suite is about.
slower_lease
# Scans every second, retries from 0.5 s, a handed alarm rechecked after 2 * ttl + grace.
cat >>"$work/fast.toml" <<TOML
[actors]
workers = 2
idle_hibernate_ms = 30000
[alarms]
scan_period_ms = 1000
scan_lag_ms = 500
first_retry_ms = 500
max_retries = 3
handed_recheck_ms = 10000
TOML

now_ms() { date +%s%3N; }
# The same settings with a short idle time, for the node that lets its actor hibernate.
sed 's/^idle_hibernate_ms = .*/idle_hibernate_ms = 1500/' "$work/fast.toml" >"$work/sleepy.toml"
start_sleepy() {  # NAME NODE_ID INDEX
  "$wk" --config "$work/sleepy.toml" --bucket "$bucket" serve --node-id "$2" --listen "127.0.0.1:$(port_of "$3")" \
    >"$work/$1.out" 2>"$work/$1.log" &
  pids+=($!)
}
log_of() { req "$1" GET "acme/probe/$2" | cut -d' ' -f2-; }

echo "== alarms on $backend"
TOKEN=$(tenant_add acme)
W deploy --tenant acme --class probe "$actors/alarm_probe.wasm" >/dev/null 2>&1
start n1 n1 1
start n2 n2 2
start n3 n3 3
check "three nodes become ready" 'wait_ready 1 20 && wait_ready 2 20 && wait_ready 3 20'

# ---- 200 alarms over 100 actors; n1, which holds the first 50, is killed before they are due
# Each actor is started first on the node its requests go to (n1 for p1..p50, n2 for the
# rest), then every alarm is set; ten requests at a time.
batch() {  # FUNCTION: runs FUNCTION i for i in 1..100, ten at a time
  local jobs=() i
  for i in $(seq 1 100); do
    "$1" "$i" &
    jobs+=($!)
    if [ ${#jobs[@]} -ge 10 ]; then wait "${jobs[@]}"; jobs=(); fi
  done
  if [ ${#jobs[@]} -gt 0 ]; then wait "${jobs[@]}"; fi
}
warm() { until_ok 30 $(( $1 <= 50 ? 1 : 2 )) GET "acme/probe/p$1" >/dev/null; }
set_one() {
  until_ok 30 $(( $1 <= 50 ? 1 : 2 )) POST "acme/probe/p$1/set?t=$due&rearm=1500" | grep -q '^2' && echo "p$1" >>"$work/sets"
}
warm_start=$(now_ms)
batch warm
# The alarms are due well after the sets end and the kill follows: twice the time the
# warm-up took (slow builds, loaded machines), at least 8 s.
warm_ms=$(( $(now_ms) - warm_start ))
due=$(( $(now_ms) + (2 * warm_ms > 8000 ? 2 * warm_ms : 8000) ))
: >"$work/sets"
set_start=$(now_ms)
batch set_one
set_ok=$(wc -l <"$work/sets")
echo "     (100 actors started in $warm_ms ms, their alarms set in $(( $(now_ms) - set_start )) ms)"
check "100 alarms set (each re-arms once when it fires: 200 in all)" '[ "$set_ok" = 100 ]'
held_by_n1=$(W actor alarm acme/probe/p1 2>/dev/null | awk '/^held by/{print $3}')
check "the first 50 actors are held by n1 (the node their sets landed on)" '[ "$held_by_n1" = n1 ]'
stop "$pid_n1"
killed_ms=$(now_ms)
check "n1 was killed -9 before the alarms were due ($(( due - killed_ms )) ms before)" '[ "$killed_ms" -lt "$due" ]'
start n1b n1 1
fired=0; early=0; missing=""
deadline=$((SECONDS + 90))  # exits as soon as all fired; a loaded machine needs the slack
while [ $SECONDS -lt $deadline ]; do
  fired=0; early=0; missing=""
  for i in $(seq 1 100); do
    log=$(log_of 2 "p$i")
    n=$(tr ',' '\n' <<<"$log" | grep -c '^f')
    fired=$((fired + n))
    [ "$n" -lt 2 ] && missing="$missing p$i"
    # f<due>:<retry>:<now>: now >= due
    early=$((early + $(tr ',' '\n' <<<"$log" | awk -F'[f:]' '/^f/ && $4 < $2 {c++} END {print c+0}')))
  done
  [ "$fired" -ge 200 ] && break
  sleep 2
done
check "every one of the 200 alarms fired (counted from the actors' durable logs; $fired seen)" '[ "$fired" -ge 200 ]'
[ "$fired" -ge 200 ] || echo "     missing:$missing"
[ -n "$missing" ] && echo "     (not fired twice yet:$missing)"
check "none fired before its time" '[ "$early" = 0 ]'
last_ms=$(for i in 1 51; do log_of 2 "p$i" | tr ',' '\n' | awk -F: '/^f/{print $3}' | head -1; done | sort -n | tail -1)
echo "     (first firings of p1 (killed node's) and p51: the later $(( ${last_ms:-0} - due )) ms after due)"

# ---- a hibernated actor is woken by its alarm (on n4, whose actors hibernate after 1.5 s idle)
start_sleepy n4 n4 4
check "a fourth node, letting idle actors hibernate quickly, becomes ready" 'wait_ready 4 20'
check "an alarm is set on an actor" '[ "$(status 4 POST "acme/probe/sleepy/set?t=$(($(now_ms) + 6000))")" = 200 ]'
sleep 3.5
# It leaves memory and its hold sleeps on n4 (docs/node-lease.md, "Sleeping holds"): the
# alarm wakes the same hold, with no acquisition.
check "it hibernated (its hold asleep on n4) before its alarm is due" \
  '[ "$(metric 4 wasmkeep_holds_sleeping)" = 1 ] && W actor alarm acme/probe/sleepy 2>/dev/null | grep -q "^held by   n4"'
check "its alarm wakes it and fires" 'wait_for 20 "log_of 3 sleepy | grep -q \",f\""'

# ---- a deleted alarm never fires
check "an alarm set and then deleted" '[ "$(status 3 POST "acme/probe/gone/set?t=$(($(now_ms) + 2500))")" = 200 ] && [ "$(status 3 POST acme/probe/gone/del)" = 200 ]'
sleep 5
check "the deleted alarm never fired" '[ "$(log_of 1 gone | grep -c ",f")" = 0 ] && [ -n "$(log_of 1 gone)" ]'
check "its index entry is gone" 'W actor alarm acme/probe/gone 2>/dev/null | grep -q "^index     0 entries"'

# ---- a failing handler is retried with back-off
t=$(($(now_ms) + 1000))
check "an alarm whose handler fails twice" '[ "$(status 2 POST "acme/probe/flaky/set?t=$t&fail=2")" = 200 ]'
check "it fires on its second retry" 'wait_for 20 "log_of 2 flaky | grep -q \"f$t:2:\""'
fired_at=$(log_of 2 flaky | tr ',' '\n' | awk -F: '/^f/{print $3}')
check "after the back-off (0.5 s, then 1 s)" '[ $((fired_at - t)) -ge 1500 ]'
retried=0
for k in 1 2 3; do retried=$((retried + $(metric "$k" wasmkeep_alarms_retried_total | cut -d. -f1))); done
check "the retries are counted in wasmkeep_alarms_retried_total" '[ "$retried" -ge 2 ]'
check "wasmkeep actor alarm prints the actor's alarm as none once fired" 'W actor alarm acme/probe/flaky 2>/dev/null | grep -q "^alarm     none"'
check "its --json names the actor" 'W actor alarm --json acme/probe/flaky 2>/dev/null | grep -q "\"actor\": \"acme/probe/flaky\""'
fired_metric=0
for k in 1 2 3; do fired_metric=$((fired_metric + $(metric "$k" wasmkeep_alarms_fired_total | cut -d. -f1))); done
echo "     (wasmkeep_alarms_fired_total over the three nodes: $fired_metric)"

finish
