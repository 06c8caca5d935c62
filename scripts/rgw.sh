#!/usr/bin/env bash
# scripts/rgw.sh -- a throwaway, single-node Ceph RADOS Gateway (S3 server)
# bound to 127.0.0.1, for WasmKeep's tests.
#
# Usage:
#   scripts/rgw.sh start  [STATE_DIR]  wipe STATE_DIR, start mon + OSD + radosgw,
#                                      create a user and the test bucket, write
#                                      STATE_DIR/env and print its `export` lines
#                                      on stdout:  eval "$(scripts/rgw.sh start)"
#   scripts/rgw.sh stop   [STATE_DIR]  stop the daemons (idempotent, exit 0)
#   scripts/rgw.sh status [STATE_DIR]  print whether it runs (exit 0 running,
#                                      1 not running / partially running)
#
# STATE_DIR defaults to ${WASMKEEP_RGW_DIR:-/tmp/wasmkeep-rgw}.
# WASMKEEP_RGW_TIMEOUT (seconds, default 120) bounds the whole of `start`.
#
# Shape of the cluster: one monitor, one OSD whose object store is "memstore"
# (all data in RAM, nothing to format), no manager, cephx disabled, every pool
# with a single replica, and radosgw's built-in "beast" HTTP front end.
# All config, data, pid files, sockets and logs live under STATE_DIR and
# every daemon gets `-c STATE_DIR/ceph.conf`, so nothing in /etc/ceph,
# /var/lib/ceph, /var/run/ceph or /var/log/ceph is read or written and it
# cannot collide with any other Ceph on the machine.  Progress and errors go
# to stderr; only the `export` lines go to stdout.

set -Eeuo pipefail

ME=rgw.sh
BUCKET=wasmkeep-test
REGION="us-east-1"
RGW_NAME=client.rgw.wasmkeep   # radosgw's Ceph entity name
MON_ID=a
MARKER=.wasmkeep-rgw           # marks a directory this script may wipe
TIMEOUT=${WASMKEEP_RGW_TIMEOUT:-120}

# Never pick up a caller's Ceph settings (e.g. a CEPH_ARGS with --id or -c).
unset CEPH_ARGS CEPH_CONF

# Messages go to the script's original stderr (fd 4), also from inside
# functions whose output is redirected to a log file.
exec 4>&2
log() { printf '%s: %s\n' "$ME" "$*" >&4; }

STARTING=0   # 1 once `start` launched something that must be torn down on failure

# die REASON [LOGFILE]: print the tail of LOGFILE (if any), tear down what
# `start` launched, and exit 1 with a one-line reason as the last line.
die() {
    local reason=$1 logf=${2:-}
    trap - ERR
    if [[ -n $logf && -s $logf ]]; then
        log "last lines of $logf:"
        tail -n 30 -- "$logf" | sed 's/^/    /' >&4
    fi
    if ((STARTING)); then
        STARTING=0
        stop_daemons >/dev/null 2>&1 || true
    fi
    printf '%s: error: %s\n' "$ME" "$reason" >&4
    exit 1
}
trap 'die "unexpected failure (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

# ---------------------------------------------------------------------------
# State directory and paths
# ---------------------------------------------------------------------------

set_paths() {
    DIR=${1:-${WASMKEEP_RGW_DIR:-/tmp/wasmkeep-rgw}}
    # Daemons chdir("/") when they daemonize, so every path must be absolute.
    DIR=$(realpath -m -- "$DIR")
    # Ceph's config parser and our unquoted config values would mangle blanks.
    [[ $DIR != *[[:space:]]* ]] || die "state directory must not contain whitespace: '$DIR'"
    [[ $DIR != / ]] || die "refusing to use / as the state directory"
    CONF=$DIR/ceph.conf
    RUN=$DIR/run
    LOGS=$DIR/log
    ENVF=$DIR/env
}

# ---------------------------------------------------------------------------
# Process handling.  Daemons are found through their pid files and, as a
# fallback (pid file not yet written, or removed), through /proc: a process
# counts as ours only if one of its arguments is exactly our $CONF path.  So
# we never signal an unrelated process, even when a pid got recycled.
# ---------------------------------------------------------------------------

# is_ours PID: true if PID is alive and was started with -c $CONF.
is_ours() {
    local pid=$1 arg
    [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 1
    local -a args=()
    mapfile -d '' args 2>/dev/null </proc/"$pid"/cmdline || return 1
    for arg in "${args[@]}"; do
        [[ $arg == "$CONF" ]] && return 0
    done
    return 1
}

# prog_of PID: basename of argv[0] (radosgw, ceph-osd, ceph-mon, ...).
prog_of() {
    local -a args=()
    mapfile -d '' args 2>/dev/null </proc/"$1"/cmdline || true
    local a0=${args[0]:-?}
    printf '%s\n' "${a0##*/}"
}

# our_pids [PROG]: pids of live processes belonging to this state dir,
# optionally only those whose program is PROG.
our_pids() {
    local want=${1:-} pid f p
    local -A seen=()
    for f in "$RUN"/*.pid; do
        [[ -f $f ]] || continue
        pid=$(<"$f") 2>/dev/null || continue
        is_ours "$pid" && seen[$pid]=1
    done
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
        is_ours "$pid" && seen[$pid]=1
    done
    for pid in "${!seen[@]}"; do
        if [[ -z $want || $(prog_of "$pid") == "$want" ]]; then
            printf '%s\n' "$pid"
        fi
    done
}

# wait_gone SECONDS PID...: true once none of the PIDs is ours-and-alive.
wait_gone() {
    local secs=$1 pid alive
    shift
    local end=$((SECONDS + secs))
    while :; do
        alive=0
        for pid in "$@"; do is_ours "$pid" && alive=1; done
        ((alive)) || return 0
        ((SECONDS < end)) || return 1
        sleep 0.2
    done
}

# stop_daemons: radosgw first (it is a client of the other two), then the
# OSD, then the monitor, then anything else still using our config (e.g. a
# hung radosgw-admin).  TERM, wait up to 15 s, then KILL.
stop_daemons() {
    local prog
    local -a pids
    for prog in radosgw ceph-osd ceph-mon ''; do
        mapfile -t pids < <(our_pids "$prog")
        ((${#pids[@]})) || continue
        log "stopping ${prog:-leftover} (pid ${pids[*]})"
        kill -TERM "${pids[@]}" 2>/dev/null || true
        if ! wait_gone 15 "${pids[@]}"; then
            log "${prog:-leftover} ignored SIGTERM for 15 s, sending SIGKILL"
            kill -KILL "${pids[@]}" 2>/dev/null || true
            wait_gone 5 "${pids[@]}" || log "warning: pid ${pids[*]} still alive after SIGKILL"
        fi
    done
    rm -f "$RUN"/*.pid 2>/dev/null || true
}

# ---------------------------------------------------------------------------
# Helpers for `start`
# ---------------------------------------------------------------------------

# Install the Ceph daemons from Debian's archive unless already present.
ensure_packages() {
    if command -v radosgw >/dev/null && command -v ceph-mon >/dev/null &&
        command -v ceph-osd >/dev/null; then
        return 0
    fi
    command -v apt-get >/dev/null || die "radosgw/ceph-mon/ceph-osd missing and no apt-get to install them"
    local sudo=()
    if ((EUID != 0)); then
        command -v sudo >/dev/null || die "radosgw/ceph-mon/ceph-osd missing; need root or sudo to install them"
        sudo=(sudo)
    fi
    local pkgs=(ceph-mon ceph-osd radosgw)
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=300)
    log "installing ${pkgs[*]} (one-time, ~70 MB)"
    # The package lists may be missing or stale; refresh once and retry.
    if ! "${sudo[@]}" "${apt[@]}" install --no-install-recommends "${pkgs[@]}" >"${TMPDIR:-/tmp}/wasmkeep-rgw-apt.log" 2>&1; then
        "${sudo[@]}" "${apt[@]}" update >>"${TMPDIR:-/tmp}/wasmkeep-rgw-apt.log" 2>&1 || true
        "${sudo[@]}" "${apt[@]}" install --no-install-recommends "${pkgs[@]}" >>"${TMPDIR:-/tmp}/wasmkeep-rgw-apt.log" 2>&1 ||
            die "apt-get install ${pkgs[*]} failed" "${TMPDIR:-/tmp}/wasmkeep-rgw-apt.log"
    fi
    if ! command -v radosgw >/dev/null || ! command -v ceph-mon >/dev/null ||
        ! command -v ceph-osd >/dev/null; then
        die "radosgw/ceph-mon/ceph-osd still missing after apt-get install"
    fi
}

port_in_use() {
    if command -v ss >/dev/null; then
        # Any TCP socket (listening or connected) on that local port.
        [[ -n $(ss -Htan "( sport = :$1 )" 2>/dev/null) ]]
    else
        # Fallback: something accepts connections there.
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
    fi
}

# pick_port VAR: store in VAR a random currently unused port in
# [20000, 32000).  That range is below Linux's ephemeral range (32768+), so an
# outgoing connection cannot grab it between the check and the bind, and it
# stays clear of Ceph's daemon range 6800-7300 and the default mon ports
# 3300/6789.
PICKED=" "
pick_port() {
    local p i
    for ((i = 0; i < 500; i++)); do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
        [[ $PICKED == *" $p "* ]] && continue
        port_in_use "$p" && continue
        PICKED+="$p "
        printf -v "$1" '%s' "$p"
        return 0
    done
    die "could not find a free TCP port on 127.0.0.1"
}

# Seconds left of the overall `start` budget.
remaining() { echo $((DEADLINE - SECONDS)); }

# bounded CMD...: run CMD, killing it if it outlives the start budget (but
# allow it at least 5 s).  Needed because e.g. radosgw and radosgw-admin
# contact the monitor *before* they daemonize and would otherwise hang for
# their built-in 300 s mount timeout when they cannot get through.
bounded() {
    local left
    left=$(remaining)
    ((left >= 5)) || left=5
    local rc=0
    timeout -k 5 "$left" "$@" || rc=$?
    ((rc != 124 && rc != 137)) || log "timed out after ${left}s: $1"
    return "$rc"
}

# wait_for WHAT LOGFILE PROG CMD...: poll CMD until it succeeds.  Gives up
# with the tail of LOGFILE when the start budget runs out or PROG (a daemon
# that is expected to be running) has died.
wait_for() {
    local what=$1 logf=$2 prog=$3
    shift 3
    while ! "$@" >/dev/null 2>&1; do
        if [[ -n $prog && -z $(our_pids "$prog") ]]; then
            die "$prog died while waiting for $what" "$logf"
        fi
        if (($(remaining) <= 0)); then
            die "timed out after ${TIMEOUT}s waiting for $what" "$logf"
        fi
        sleep 0.5
    done
}

# ceph CLI against our private cluster; every call bounded.
ceph_cli() { timeout -k 2 10 ceph -c "$CONF" --connect-timeout 8 "$@"; }

mon_up() { ceph_cli mon stat; }
osd_up() { ceph_cli osd stat -f json 2>/dev/null | grep -q '"num_up_osds":1[,}]'; }
http_up() {
    local code
    code=$(curl -s -o /dev/null -m 3 -w '%{http_code}' "http://127.0.0.1:$RGW_PORT/") || true
    [[ $code != 000 && -n $code ]]
}

randhex() { od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'; }

# ---------------------------------------------------------------------------
# ceph.conf.  `$name`, `$id` and `$cluster` are Ceph's own metavariables
# (expanded per daemon), hence the \$ escapes.
# ---------------------------------------------------------------------------
write_conf() {
    cat >"$CONF" <<EOF
# Generated by scripts/rgw.sh -- throwaway single-node Ceph for WasmKeep tests.
[global]
fsid = $FSID
# One monitor, msgr2 protocol only, on a port we checked is free.
mon host = [v2:127.0.0.1:$MON_PORT]
# Every daemon binds to loopback only (OSD ports come from 6800-7300).
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
# No cephx: nothing to distribute, and radosgw-admin/ceph need no keys.
auth cluster required = none
auth service required = none
auth client required = none
# Keep every file this cluster touches under the state directory.
keyring = $DIR/keyring
run dir = $RUN
crash dir = $DIR/crash
log file = $LOGS/\$name.log
mon cluster log file = $LOGS/cluster.log
log to syslog = false
err to syslog = false
# A single OSD: one replica per pool, and few placement groups per pool
# (radosgw creates ~7 pools).  Pacific refuses size-1 pools unless allowed.
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
# Irrelevant without cephx; keeps "ceph health" at HEALTH_OK.
mon warn on insecure global id reclaim allowed = false
mon max pg per osd = 1000
# Replicate across OSDs rather than hosts (there is only one of each anyway).
osd crush chooseleaf type = 0

[mon]
mon data = $DIR/mon/\$cluster-\$id
pid file = $RUN/\$name.pid
mon allow pool delete = true
# The monitor batches map changes for up to 1 s before committing them;
# radosgw creates ~7 pools (several map changes each) on first start and on
# first bucket creation, so this alone would cost ~10 s.
paxos propose interval = 0.05

[osd]
osd data = $DIR/osd/\$cluster-\$id
pid file = $RUN/\$name.pid
# All objects live in RAM: no disk to prepare, fast, gone on stop.  The
# device size is only the capacity the OSD reports (RAM is used as data is
# written); the OSD refuses writes at 95% of it.
osd objectstore = memstore
memstore device bytes = 2147483648
# osd memory target only tunes BlueStore caches, so it is irrelevant here.

[client]
# radosgw (and radosgw-admin) override the built-in default of this option to
# "secure", which needs cephx session keys; with auth none they would then
# never get through to the monitor.  Allow crc mode for mon connections.
ms mon client mode = crc secure
rgw data = $DIR/rgw/\$cluster-\$id

[$RGW_NAME]
pid file = $RUN/\$name.pid
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT
# Default is 512 worker threads; tests need few, and each costs memory.
rgw thread pool size = 32
# Reclaim deleted object data after a minute instead of two hours, so data
# written and deleted by long test runs does not pile up in RAM.
rgw gc obj min wait = 60
rgw gc processor period = 60
EOF
}

# ---------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------

cmd_stop() {
    [[ -d $DIR ]] || { log "not running (no $DIR)"; return 0; }
    if [[ -z $(our_pids) ]]; then
        rm -f "$RUN"/*.pid 2>/dev/null || true
        log "not running"
        return 0
    fi
    stop_daemons
    log "stopped"
}

cmd_status() {
    local mon osd rgw
    mon=$(our_pids ceph-mon | paste -sd' ')
    osd=$(our_pids ceph-osd | paste -sd' ')
    rgw=$(our_pids radosgw | paste -sd' ')
    if [[ -z $mon$osd$rgw ]]; then
        echo "not running ($DIR)"
        return 1
    fi
    local endpoint=
    [[ -f $ENVF ]] && endpoint=$(sed -n 's/^export WASMKEEP_S3_ENDPOINT=//p' "$ENVF")
    if [[ -n $mon && -n $osd && -n $rgw && -n $endpoint ]] &&
        curl -s -o /dev/null -m 3 "$endpoint/"; then
        echo "running: $endpoint (mon pid $mon, osd pid $osd, radosgw pid $rgw; env in $ENVF)"
        return 0
    fi
    echo "partially running ($DIR): mon pid ${mon:--} osd pid ${osd:--} radosgw pid ${rgw:--}; endpoint ${endpoint:-unknown} not answering"
    return 1
}

# Seconds since `start` began, with one decimal.
elapsed() {
    local us=$((${EPOCHREALTIME/./} - T0_US))
    printf '%d.%ds' $((us / 1000000)) $((us % 1000000 / 100000))
}

cmd_start() {
    T0_US=${EPOCHREALTIME/./}
    DEADLINE=$((SECONDS + TIMEOUT))
    ensure_packages
    command -v curl >/dev/null || die "curl is required"

    # Wipe the previous run -- but only a directory this script created.
    if [[ -e $DIR ]]; then
        [[ -d $DIR ]] || die "$DIR exists and is not a directory"
        if [[ -e $DIR/$MARKER ]]; then
            stop_daemons
            find "$DIR" -mindepth 1 -delete
        elif [[ -n $(ls -A -- "$DIR") ]]; then
            die "$DIR is not empty and was not created by $ME; refusing to wipe it"
        fi
    fi
    mkdir -p "$DIR" "$RUN" "$LOGS" "$DIR/mon" "$DIR/osd" "$DIR/rgw" "$DIR/crash"
    : >"$DIR/$MARKER"
    STARTING=1   # from here on, failures tear down whatever was started

    FSID=$(cat /proc/sys/kernel/random/uuid)
    pick_port MON_PORT
    pick_port RGW_PORT
    write_conf
    log "state in $DIR, mon on 127.0.0.1:$MON_PORT, S3 on 127.0.0.1:$RGW_PORT"

    # --- monitor -----------------------------------------------------------
    # ceph-mon --mkfs wants a keyring holding the mon. key even without cephx.
    ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n mon. --cap mon 'allow *' \
        >"$LOGS/setup.log" 2>&1 || die "ceph-authtool failed" "$LOGS/setup.log"
    monmaptool --create --fsid "$FSID" --addv "$MON_ID" "[v2:127.0.0.1:$MON_PORT]" \
        "$DIR/monmap" >>"$LOGS/setup.log" 2>&1 || die "monmaptool failed" "$LOGS/setup.log"
    bounded ceph-mon -c "$CONF" -i "$MON_ID" --mkfs --monmap "$DIR/monmap" --keyring "$DIR/keyring" \
        >>"$LOGS/setup.log" 2>&1 || die "ceph-mon --mkfs failed" "$LOGS/mon.$MON_ID.log"
    # Without -f the daemon forks; the parent returns once the child is up.
    bounded ceph-mon -c "$CONF" -i "$MON_ID" </dev/null >>"$LOGS/setup.log" 2>&1 ||
        die "ceph-mon failed to start" "$LOGS/mon.$MON_ID.log"
    wait_for "the monitor" "$LOGS/mon.$MON_ID.log" ceph-mon mon_up
    log "monitor up after $(elapsed)"

    # --- OSD ---------------------------------------------------------------
    local osd_uuid osd_id
    osd_uuid=$(cat /proc/sys/kernel/random/uuid)
    osd_id=$(ceph_cli osd new "$osd_uuid" 2>>"$LOGS/setup.log") ||
        die "'ceph osd new' failed" "$LOGS/setup.log"
    [[ $osd_id =~ ^[0-9]+$ ]] || die "'ceph osd new' returned '$osd_id'"
    mkdir -p "$DIR/osd/ceph-$osd_id"
    bounded ceph-osd -c "$CONF" -i "$osd_id" --mkfs --osd-uuid "$osd_uuid" </dev/null \
        >>"$LOGS/setup.log" 2>&1 || die "ceph-osd --mkfs failed" "$LOGS/osd.$osd_id.log"
    bounded ceph-osd -c "$CONF" -i "$osd_id" </dev/null >>"$LOGS/setup.log" 2>&1 ||
        die "ceph-osd failed to start" "$LOGS/osd.$osd_id.log"
    wait_for "the OSD to be up" "$LOGS/osd.$osd_id.log" ceph-osd osd_up
    log "OSD up after $(elapsed)"

    # --- radosgw -----------------------------------------------------------
    # On first start radosgw creates its pools and the default zone.
    bounded radosgw -c "$CONF" -n "$RGW_NAME" </dev/null >>"$LOGS/setup.log" 2>&1 ||
        die "radosgw failed to start" "$LOGS/$RGW_NAME.log"
    wait_for "radosgw to answer HTTP on 127.0.0.1:$RGW_PORT" "$LOGS/$RGW_NAME.log" radosgw http_up
    log "radosgw answering HTTP after $(elapsed)"

    # --- S3 user and bucket --------------------------------------------------
    local ak sk code
    ak=WK$(randhex 9 | tr 'a-f' 'A-F')   # 20 characters, like AWS access keys
    sk=$(randhex 20)                     # 40 characters
    bounded radosgw-admin -c "$CONF" user create --uid=wasmkeep --display-name="WasmKeep tests" \
        --access-key="$ak" --secret-key="$sk" >>"$LOGS/setup.log" 2>&1 ||
        die "radosgw-admin user create failed" "$LOGS/setup.log"
    # curl 7.88 signs the SHA-256 of the (empty) body but does not send the
    # x-amz-content-sha256 header; RGW then assumes "UNSIGNED-PAYLOAD" and the
    # signatures differ (403 SignatureDoesNotMatch).  Sending the header makes
    # curl sign exactly what RGW checks.
    code=$(curl -sS -o "$LOGS/create-bucket.out" -w '%{http_code}' -m 30 \
        --aws-sigv4 "aws:amz:$REGION:s3" --user "$ak:$sk" \
        -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X PUT "http://127.0.0.1:$RGW_PORT/$BUCKET" 2>>"$LOGS/setup.log") || true
    [[ $code == 200 ]] || die "creating bucket $BUCKET returned HTTP $code" "$LOGS/create-bucket.out"

    cat >"$ENVF" <<EOF
export WASMKEEP_S3_ENDPOINT=http://127.0.0.1:$RGW_PORT
export WASMKEEP_S3_BUCKET=$BUCKET
export WASMKEEP_S3_REGION=$REGION
export AWS_ACCESS_KEY_ID=$ak
export AWS_SECRET_ACCESS_KEY=$sk
EOF
    STARTING=0
    log "ready after $(elapsed); environment in $ENVF"
    cat "$ENVF"
}

usage() {
    echo "usage: $0 {start|stop|status} [STATE_DIR]   (default \${WASMKEEP_RGW_DIR:-/tmp/wasmkeep-rgw})" >&2
    exit 2
}

(($# >= 1 && $# <= 2)) || usage
cmd=$1
set_paths "${2:-}"
case $cmd in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status || exit 1 ;;
*) usage ;;
esac
