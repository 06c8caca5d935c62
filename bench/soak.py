#!/usr/bin/env python3
"""The soak's driver (bench/soak.sh sets up the bucket and runs this; docs/benchmarks.md,
"The soak").

Phases: a tenant and the chat example deployed; N `wasmkeep serve` processes on one bucket,
kept running by a supervisor (a process that exits is restarted a second later, as systemd's
Restart=on-failure would); a steady load of appends to busy actors and many cold ones; a
nemesis; then every node restarted if needed, every actor read back through a node, the
list-append checker, the bucket requests from the nodes' /metrics, and the report.

The workload is the chat example (examples/chat/chat.cc): POST /messages appends the body
as the next message and answers its number; GET /messages?since=N pages through them. Each
append's body is unique ("<writer>-<seq>"). An append answered 200 is acknowledged: the
checker requires it present exactly once, at the number it was answered with, and after
every earlier acknowledged append of its writer to that actor (a Jepsen list-append check).
Anything else (a 503, a timeout, a connection reset) may or may not have taken effect: it
may be present, once.

The nemesis, in turn: kill -9 of a node (restarted 1-3 s later); a node frozen with
SIGSTOP past its lease (ttl + grace + the fence watch + a margin) and resumed with SIGCONT
(it must find itself fenced and exit 6, then the supervisor restarts it); a paused bucket
(SIGSTOP of the soak's own radosgw, or the nodes' outage fault on file://), alternately
shorter than the lease's validity and longer; and an operator's actions: a node drained
(`cluster drain`) and kept running drained for a while, then undrained; busy actors moved to
another node (`actor move`); `cluster balance`; a drained node restarted (kill -9 or SIGTERM in
turn), which must come back drained holding no actor and no alarm shard, then undrained; a
new version of the chat or the alarm class deployed (the same module with a custom section
naming the version: the same ABI, so the appends and alarms keep their checks), rolled out to
30 % of its actors and then to all; an actor of
its own restored to a random batch of its history and forked at another (`actor restore`,
`actor fork` through a node; "history" below). Each action is logged with its time and
outcome and counted by kind and outcome in the report. Before
each kill or freeze a probe actor is
acquired on the victim (an append sent to it directly); from the event on, the other nodes
are asked to append to it every 250 ms, so "writable again" (the event until the first
append answered 200) splits, from the nodes' logs (run at debug level), into: the lease
bound (until the victim's records were free: a peer's fence of it, or its restarted
process's first valid lease write), the acquisition (until the node that took the probe
had acquired it: its "actor opened" line less the restore it reports; this includes the
wait for the next probe append) and the restore (from then until the answer: the restore,
the write and the answer).

Alarms: one more client sets alarms on actors of examples/testdata/alarm_probe.cc
throughout the run (due 1 s to about a minute later; some re-armed by their handler, some
failing once so the node retries them), and leaves each alarm actor alone until its alarm
should have fired by itself, bound included (`alarms_bound`): the nodes' timers, wake timers
and shard scanners must fire them, through kills, freezes and pauses. At the end each alarm
actor's durable state is read without waking it (`wasmkeep actor alarm --json`): an alarm
still set past its bound is missing. Then the actors' own logs are checked: every alarm set
by an acknowledged request, and every re-arm its handler made durable, fired at least once,
none before its time, none stale, none later than the bound.

Bank: two more clients send transfers between the accounts of examples/bank/bank.cc (each a
message between actors, docs/messages.md) at --bank-rate a second, through random nodes, each
with an Idempotency-Key and sent again with the same key until answered, through the whole
nemesis. At the end every account is started (its outbox delivered), its durable messages are
read once no node delivers any more (`wasmkeep actor messages --json`), and the bank cluster
test's checks run (tests/cluster/bank.py, whose client this is): money conserved exactly,
every balance what the answers say, the numbers answered to each sender distinct and covered
by its receivers' applied records, no outbox or dead message left, every retry answered as
its key first was.

WebSockets: --ws-clients clients each hold a WebSocket to one of --ws-rooms chat rooms
(`ws-N`, the chat example's /ws room) through a random node (a node that does not own the room
relays it, or answers 503 and the client tries another), send a message every 1/--ws-rate s
and record every message each connection receives; a connection that ends (1012 when its
room's owner changed, the node killed, drained or frozen, a 4000 page of catch-up) is opened
again through a random node with ?since=<the last number it saw>. At the end each room is read
back (GET /messages) and the checks run: every message a client received, "<n>\t<text>", is
the room's message n (nothing a client saw before its batch was durable, nothing seen lost),
numbers grow along each connection, and every message a sender saw broadcast is in the room.

History: --hist-actors kv actors (examples/kv/kv.cc) written throughout with keys k1, k2, ...
in order, one PUT at a time each, through random nodes; the nemesis restores one to a random
batch of its history and forks it at another, and the checks (right after each, and at the
end) compare their keys with the state the soak computes from the writes it sent and the
batches the history lists (the `history` section of the Soak class).
"""

import argparse
import datetime
import http.client
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

# The bank workload's client and checks are the bank cluster test's (tests/cluster/bank.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "cluster"))
import bank as bank_lib  # noqa: E402
import wsclient  # noqa: E402

TENANT = "soak"
CLASS = "chat"
ALARM_CLASS = "alarm"
BANK_CLASS = "bank"
KV_CLASS = "kv"
# Per request, by operation: the built-in tables of `wasmkeep cluster cost`
# (src/cli/cost.cc, sources and dates in docs/cli.md). Kept equal by hand.
PRICES = {
    "aws-s3": {"put": 0.005 / 1000, "list": 0.005 / 1000, "get": 0.0004 / 1000, "head": 0.0004 / 1000, "delete": 0.0},
    "r2": {"put": 4.50 / 1e6, "list": 4.50 / 1e6, "get": 0.36 / 1e6, "head": 0.36 / 1e6, "delete": 0.0},
}
METRIC_RE = re.compile(r'^wasmkeep_bucket_requests_total\{op="([a-z]+)",purpose="([a-z_]+)",outcome="([a-z_]+)"\} ([0-9.e+]+)$')
START_RE = re.compile(r"^wasmkeep_process_start_time_seconds ([0-9.e+]+)$")
ALARM_METRIC_RE = re.compile(r"^wasmkeep_alarms_(due|fired|retried|gave_up|handed)_total ([0-9.e+]+)$")
MESSAGE_METRIC_RE = re.compile(r'^wasmkeep_messages_total\{outcome="([a-z_]+)"\} ([0-9.e+]+)$')


def log(*parts):
    print(time.strftime("%H:%M:%S"), "soak:", *parts, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_call(port, method, path, body=None, headers=None, timeout=2.0):
    """(status, body text) of one request to 127.0.0.1:port, or (None, error) for no answer."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request(method, path, body=body, headers=headers or {})
        resp = c.getresponse()
        data = resp.read().decode("utf-8", "replace")
        c.close()
        return resp.status, data
    except (OSError, http.client.HTTPException) as e:
        return None, str(e)


def log_time(line):
    """The Unix time of a node's log line ("2026-12-04T11:00:00.123Z warning ...")."""
    try:
        t = datetime.datetime.strptime(line.split(" ", 1)[0], "%Y-%m-%dT%H:%M:%S.%fZ")
        return t.replace(tzinfo=datetime.timezone.utc).timestamp()
    except (ValueError, IndexError):
        return None


def percentile(values, p):
    if not values:
        return None
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100 * (len(s) - 1)))))
    return round(s[k], 2)


def summary(values):
    return {"count": len(values), "p50": percentile(values, 50), "p99": percentile(values, 99),
            "max": round(max(values), 2) if values else None}


class Node:
    def __init__(self, soak, idx):
        self.soak = soak
        self.id = f"n{idx}"
        self.port = free_port()
        self.admin_port = free_port()
        self.proc = None
        self.incarnation = 0
        self.held = False      # the nemesis owns its state (killed, frozen): no supervisor restart
        self.frozen = False
        self.exits = []        # (time, exit status) of processes that ended
        self.logs = []

    def start(self):
        self.incarnation += 1
        path = os.path.join(self.soak.out, f"{self.id}.{self.incarnation}.log")
        self.logs.append(path)
        env = dict(os.environ)
        if self.soak.pause_kind == "fault":
            env["WASMKEEP_DEBUG_FAULTS"] = "outage_file=" + self.soak.outage_file
        out = open(path, "w")
        self.proc = subprocess.Popen(
            [self.soak.wk, "--config", self.soak.config, "--bucket", self.soak.bucket, "serve", "--node-id", self.id,
             "--listen", f"127.0.0.1:{self.port}", "--admin-listen", f"127.0.0.1:{self.admin_port}"],
            stdout=out, stderr=subprocess.STDOUT, env=env)
        out.close()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def ready(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=2)
            c.request("GET", "/readyz")
            ok = c.getresponse().status == 200
            c.close()
            return ok
        except OSError:
            return False


class Soak:
    def __init__(self, a):
        self.a = a
        self.wk = a.wasmkeep
        self.bucket = a.bucket
        self.out = a.out
        self.rng = random.Random(a.seed)
        self.finished = False
        self.t_started = time.time()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.history = []      # every append: dict(writer, actor, value, t0, t1, status, number)
        self.events = []       # nemesis events
        self.actions = []      # the operator's nemesis actions: dict(kind, at, seconds, node, outcome, ok)
        self.drained = set()   # node ids the nemesis drained and has not undrained yet
        self.failovers = []    # measured kills and freezes
        self.pauses = []
        self.scrapes = {}      # (node, start_time) -> dict(first, last, counts, half)
        self.half_at = None    # when the load's second half starts (scrape_once)
        self.pause_kind, _, self.pause_arg = a.pause.partition(":")
        self.outage_file = os.path.join(self.out, "bucket-outage")
        if a.fast_leases:
            self.ttl, self.grace, self.safety, self.period = 2.0, 1.0, 0.4, 0.6
        else:
            self.ttl, self.grace, self.safety, self.period = 10.0, 5.0, 2.0, 3.0
        self.attempt = (self.ttl - self.safety) / 3
        # [actors] idle_hibernate_ms and the [alarms] settings this soak runs with (below).
        self.idle_hibernate = 30.0
        self.alarm_scan_s, self.alarm_recheck_s = (2.0, 5.0) if a.fast_leases else (10.0, 30.0)
        self.config = os.path.join(self.out, "soak.toml")
        with open(self.config, "w") as f:
            if a.fast_leases:
                f.write("[lease]\nttl_ms = 2000\ngrace_ms = 1000\nsafety_ms = 400\nmax_skew_ms = 200\n"
                        "heartbeat_period_ms = 600\n")
            # Two shared cores: one worker per node; cold actors hibernate between their writes.
            f.write("[actors]\nworkers = 1\n")
            # Debug lines say when each actor was acquired and restored ("actor opened"), which
            # splits a failover; they cost a line per event.
            f.write("[log]\nlevel = \"debug\"\n")
            # Alarms: the defaults (a shard scanned every 10 s, a hand-over rechecked after 30 s);
            # with short leases, faster scans and the shortest recheck allowed (2 ttl + grace).
            if a.fast_leases:
                f.write("[alarms]\nscan_period_ms = 2000\nhanded_recheck_ms = 5000\n")
            # Usage flushed (and stored byte-seconds integrated) every 5 s, so even a short soak
            # meters through its kills and pauses (the usage check at the end).
            f.write("[usage]\nflush_ms = 5000\n")
        self.nodes = [Node(self, i) for i in range(a.nodes)]

    # ---- commands ---------------------------------------------------------------------
    def W(self, *args, check=True, timeout=60):
        r = subprocess.run([self.wk, "--config", self.config, "--bucket", self.bucket, *args],
                           capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"wasmkeep {' '.join(args)}: {r.stderr.strip()}")
        return r

    def setup(self):
        r = self.W("tenant", "add", TENANT, check=False)
        if r.returncode not in (0, 3):
            raise RuntimeError("tenant add: " + r.stderr.strip())
        if r.returncode == 3:
            raise RuntimeError("the bucket already has tenant soak: use a fresh bucket")
        self.token = r.stdout.strip().splitlines()[-1]
        self.W("deploy", "--tenant", TENANT, "--class", CLASS, os.path.join(self.a.actors, "chat.wasm"))
        if self.a.alarm_rate > 0:
            self.W("deploy", "--tenant", TENANT, "--class", ALARM_CLASS, os.path.join(self.a.actors, "alarm_probe.wasm"))
        if self.a.bank_rate > 0:
            self.W("deploy", "--tenant", TENANT, "--class", BANK_CLASS, os.path.join(self.a.actors, "bank.wasm"))
        if self.a.hist_rate > 0 and self.a.hist_actors > 0:
            self.W("deploy", "--tenant", TENANT, "--class", KV_CLASS, os.path.join(self.a.actors, "kv.wasm"))

    # ---- HTTP -------------------------------------------------------------------------
    def request(self, node, method, path, body=None, timeout=10.0, cls=CLASS):
        """(status, body) or (None, error) for no answer."""
        return http_call(node.port, method, f"/v1/actors/{TENANT}/{cls}/{path}", body=body,
                         headers={"Authorization": "Bearer " + self.token}, timeout=timeout)

    def append(self, writer, actor, value, node=None, timeout=10.0):
        node = node or self.rng.choice(self.nodes)
        t0 = time.time()
        status, body = self.request(node, "POST", f"{actor}/messages", value.encode(), timeout)
        t1 = time.time()
        number = int(body.strip()) if status == 200 and body.strip().isdigit() else None
        entry = {"writer": writer, "actor": actor, "value": value, "t0": round(t0, 3), "t1": round(t1, 3),
                 "status": status, "number": number, "node": node.id}
        with self.lock:
            self.history.append(entry)
        return entry

    # ---- the nodes --------------------------------------------------------------------
    def supervise(self):
        while not self.stop.is_set():
            for n in self.nodes:
                if n.proc is not None and not n.held and n.proc.poll() is not None:
                    n.exits.append((time.time(), n.proc.returncode))
                    log(f"{n.id} exited with status {n.proc.returncode}; restarting it in 1 s")
                    n.proc = None
                    threading.Timer(1.0, self._restart, args=(n,)).start()
            time.sleep(0.25)

    def _restart(self, n):
        if not n.held and n.proc is None and not self.finished:
            n.start()

    def wait_ready(self, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if all(n.ready() for n in self.nodes):
                return True
            time.sleep(0.3)
        return False

    # ---- load -------------------------------------------------------------------------
    def writer(self, wid, rate, cold_writer=False):
        """Appends at `rate` per second: to random busy actors, or (the cold writer) to the
        cold actors in turn, each then idle long enough to hibernate."""
        rng = random.Random(self.a.seed * 1000 + wid)
        seq = 0
        busy = [f"busy-{i}" for i in range(self.a.busy)]
        cold = [f"cold-{i}" for i in range(self.a.cold)]
        rng.shuffle(cold)
        cold_next = 0
        period = 1.0 / rate
        next_at = time.time()
        while not self.stop.is_set():
            if cold_writer:
                actor = cold[cold_next % len(cold)]
                cold_next += 1
            else:
                actor = rng.choice(busy)
            seq += 1
            self.append(f"w{wid}", actor, f"w{wid}-{seq}")
            next_at += period
            delay = next_at - time.time()
            if delay > 0:
                self.stop.wait(delay)
            else:
                next_at = time.time()

    # ---- the nodes' metrics -----------------------------------------------------------
    def scrape_once(self):
        for n in self.nodes:
            if not n.alive() or n.frozen:
                continue
            try:
                c = http.client.HTTPConnection("127.0.0.1", n.admin_port, timeout=2)
                c.request("GET", "/metrics")
                text = c.getresponse().read().decode()
                c.close()
            except (OSError, http.client.HTTPException):
                continue
            counts, start, alarms, messages = {}, None, {}, {}
            for line in text.splitlines():
                m = METRIC_RE.match(line)
                if m:
                    op, purpose, _outcome, v = m.groups()
                    counts[(op, purpose)] = counts.get((op, purpose), 0) + float(v)
                    continue
                m = ALARM_METRIC_RE.match(line)
                if m:
                    alarms[m.group(1)] = float(m.group(2))
                    continue
                m = MESSAGE_METRIC_RE.match(line)
                if m:
                    messages[m.group(1)] = float(m.group(2))
                    continue
                m = START_RE.match(line)
                if m:
                    start = float(m.group(1))
            if start is None:
                continue
            now = time.time()
            key = (n.id, start)
            with self.lock:
                s = self.scrapes.setdefault(key, {"start": start, "first": now, "last": now, "counts": {}})
                s["last"], s["counts"], s["alarms"], s["messages"] = now, counts, alarms, messages
                # The second half of the load, once every actor was used at least once: the
                # steady state, without the first acquisitions (docs/benchmarks.md).
                if self.half_at is not None and now >= self.half_at and "half" not in s:
                    s["half"] = (now, dict(counts))

    def scraper(self):
        while not self.stop.is_set():
            self.scrape_once()
            self.stop.wait(5.0)

    # ---- the nemesis ------------------------------------------------------------------
    def probe(self, victim, name):
        """An actor the victim holds: an append sent to it directly until one is answered."""
        deadline = time.time() + 30
        while time.time() < deadline and not self.stop.is_set():
            e = self.append("probe", name, f"probe-{name}-{int(time.time() * 1000)}", node=victim, timeout=5)
            if e["status"] == 200:
                return True
            time.sleep(0.5)
        return False

    def measure(self, kind, victim, name, t0):
        """Appends to the probe through the other nodes every 250 ms until one is answered."""
        others = [n for n in self.nodes if n is not victim]
        t_ack = None
        limit = t0 + 20 * (self.ttl + self.grace) + 30
        while time.time() < limit and t_ack is None:
            e = self.append("probe", name, f"probe-{name}-{int(time.time() * 1000)}", node=self.rng.choice(others),
                            timeout=5)
            if e["status"] == 200:
                t_ack = e["t1"]
            else:
                time.sleep(0.25)
        self.failovers.append({"kind": kind, "victim": victim.id, "probe": name, "at": t0, "acknowledged": t_ack})

    def kill(self, k):
        victim = self.rng.choice(self.nodes)
        name = f"probe-{k}"
        if not self.probe(victim, name):
            log(f"kill {k}: {victim.id} could not take its probe; killed without a measurement")
            name = None
        victim.held = True
        t0 = time.time()
        if victim.proc is not None:
            victim.proc.kill()
            victim.proc.wait()
        self.events.append({"kind": "kill", "node": victim.id, "at": t0})
        log(f"kill -9 {victim.id}")
        measurer = threading.Thread(target=self.measure, args=("kill", victim, name, t0)) if name else None
        if measurer:
            measurer.start()
        time.sleep(self.rng.uniform(1, 3))
        victim.start()
        victim.held = False
        if measurer:
            measurer.join()

    def freeze(self, k):
        victim = self.rng.choice(self.nodes)
        name = f"probe-{k}"
        if not self.probe(victim, name):
            log(f"freeze {k}: {victim.id} could not take its probe; frozen without a measurement")
            name = None
        if victim.proc is None:
            return
        victim.held = True
        victim.frozen = True
        t0 = time.time()
        os.kill(victim.proc.pid, signal.SIGSTOP)
        frozen_for = self.ttl + self.grace + (self.period + self.attempt) + max(2.0, self.period)
        self.events.append({"kind": "freeze", "node": victim.id, "at": t0, "seconds": round(frozen_for, 1)})
        log(f"SIGSTOP {victim.id} for {frozen_for:.1f} s")
        measurer = threading.Thread(target=self.measure, args=("freeze", victim, name, t0)) if name else None
        if measurer:
            measurer.start()
        time.sleep(frozen_for)
        os.kill(victim.proc.pid, signal.SIGCONT)
        victim.frozen = False
        log(f"SIGCONT {victim.id}")
        # It should find itself fenced at its next write and exit 6.
        try:
            code = victim.proc.wait(timeout=self.ttl + 10)
        except subprocess.TimeoutExpired:
            code = None
        self.events[-1]["exit_after_resume"] = code
        victim.held = False  # the supervisor restarts it
        if measurer:
            measurer.join()

    def radosgw_pids(self):
        pids = []
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    cmd = f.read().split(b"\0")
            except OSError:
                continue
            if cmd and os.path.basename(cmd[0]) == b"radosgw" and any(self.pause_arg.encode() in c for c in cmd):
                pids.append(int(p))
        return pids

    def pause(self, k):
        if self.pause_kind == "none":
            return
        validity = self.ttl - self.safety
        seconds = validity / 2 if k % 2 == 0 else validity + max(2.0, self.period)
        t0 = time.time()
        if self.pause_kind == "rgw":
            pids = self.radosgw_pids()
            if not pids:
                log("pause: no radosgw of this soak found; skipped")
                return
            for p in pids:
                os.kill(p, signal.SIGSTOP)
            self.stop.wait(seconds)
            for p in pids:
                os.kill(p, signal.SIGCONT)
        else:
            open(self.outage_file, "w").close()
            self.stop.wait(seconds)
            os.unlink(self.outage_file)
        t1 = time.time()
        log(f"bucket paused {seconds:.1f} s")
        self.events.append({"kind": "pause", "at": t0, "seconds": round(seconds, 1)})
        # Recovery: the first append answered after the pause ended.
        deadline = t1 + 60
        recovered = None
        while time.time() < deadline and recovered is None:
            with self.lock:
                acks = [e["t1"] for e in self.history[-400:] if e["status"] == 200 and e["t0"] >= t1]
            if acks:
                recovered = min(acks) - t1
            else:
                time.sleep(0.2)
        self.pauses.append({"at": t0, "seconds": round(seconds, 1), "first_ack_after_s": recovered})

    # ---- the operator's actions (docs/node-lease.md, "Drain", "Moving actors") ----------
    # Each is logged with its time and outcome and recorded in self.actions (the report's
    # "nemesis" counts them by kind and outcome). An outcome that is not the expected one is
    # reported, not fatal: the soak's verdict is the checkers' (appends and alarms).
    def action(self, kind, t0, outcome, ok, node=None, **extra):
        a = {"kind": kind, "at": round(t0, 3), "seconds": round(time.time() - t0, 1), "node": node,
             "outcome": outcome, "ok": ok, **extra}
        with self.lock:
            self.actions.append(a)
        log(f"{kind}{' ' + node if node else ''}: {outcome} ({a['seconds']} s){'' if ok else ' [unexpected]'}")
        return a

    def admin_get(self, node, path):
        """(status, body) of GET path on the node's admin listener, or (None, error)."""
        return http_call(node.admin_port, "GET", path)

    def node_metric(self, node, name):
        status, body = self.admin_get(node, "/metrics")
        if status != 200:
            return None
        for line in body.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == name:
                return float(parts[1])
        return None

    def drain_node(self, victim):
        """`cluster drain` with its wait: (exit status, seconds, last line of its output)."""
        wait = 60 if not self.a.fast_leases else 30
        t0 = time.time()
        try:
            r = self.W("cluster", "drain", victim.id, "--wait", str(wait), check=False, timeout=wait + 30)
            # The command's message is on stdout (stderr: its error, or the node's debug log lines).
            code, text = r.returncode, (r.stdout.strip() or r.stderr.strip())
        except subprocess.TimeoutExpired:
            code, text = None, "the command did not return"
        if code is not None:
            self.drained.add(victim.id)
        return code, time.time() - t0, (text.splitlines() or [""])[-1][:200]

    def undrain_node(self, victim):
        """`cluster undrain`, then until the node answers /readyz 200: (exit status, seconds to ready or None)."""
        t0 = time.time()
        r = self.W("cluster", "undrain", victim.id, check=False)
        if r.returncode == 0:
            self.drained.discard(victim.id)
        deadline = time.time() + 30 + 4 * self.period
        while time.time() < deadline:
            if victim.ready():
                return r.returncode, time.time() - t0
            time.sleep(0.2)
        return r.returncode, None

    def pick_node(self):
        live = [n for n in self.nodes if n.alive() and not n.held]
        return self.rng.choice(live) if live else None

    def drain(self, k):
        """A node drained (its actors handed over, its alarm shards to its peers) and kept
        running drained for a while (writes reach it and are forwarded; alarms due meanwhile
        must fire on the peers), then undrained."""
        victim = self.pick_node()
        if victim is None:
            return
        t0 = time.time()
        code, took, last = self.drain_node(victim)
        self.events.append({"kind": "drain", "node": victim.id, "at": t0})
        kept = self.rng.uniform(self.gap / 2, self.gap)
        self.stop.wait(kept)
        held = self.node_metric(victim, "wasmkeep_holds_resident")
        shards = self.node_metric(victim, "wasmkeep_alarms_shards_held")
        ucode, ready_s = self.undrain_node(victim)
        ok = code == 0 and ucode == 0 and ready_s is not None and held == 0 and shards == 0
        self.action("drain", t0, f"drain exit {code} in {took:.1f} s ({last}); kept drained {kept:.1f} s holding "
                    f"{held if held is None else int(held)} actors and {shards if shards is None else int(shards)} alarm shards; undrain exit {ucode}, ready again "
                    f"{'in %.1f s' % ready_s if ready_s is not None else 'never'}", ok, victim.id,
                    drain_exit=code, drain_s=round(took, 1), kept_s=round(kept, 1), undrain_exit=ucode)

    def restart_drained(self, k):
        """A drained node restarted (kill -9, or SIGTERM: a clean stop, in turn), which must
        come back drained: /readyz 503 naming the drain, holding no actor and no alarm shard
        (sampled for two listing periods once its lease is valid); then undrained."""
        victim = self.pick_node()
        if victim is None:
            return
        t0 = time.time()
        code, took, last = self.drain_node(victim)
        how = "kill -9" if (k // self.turn_len) % 2 == 0 else "SIGTERM"
        victim.held = True
        if victim.proc is not None:
            if how == "kill -9":
                victim.proc.kill()
            else:
                victim.proc.send_signal(signal.SIGTERM)
            try:
                stop_code = victim.proc.wait(timeout=self.ttl * 3 + 30)
            except subprocess.TimeoutExpired:
                victim.proc.kill()
                stop_code = victim.proc.wait()
        else:
            stop_code = None
        self.events.append({"kind": "restart_drained", "node": victim.id, "at": t0, "how": how})
        time.sleep(self.rng.uniform(1, 3))
        victim.start()
        victim.held = False
        # Its lease valid again (the start check: ttl + grace), it says drained and takes nothing.
        came_back, worst_held, worst_shards = None, 0.0, 0.0
        deadline = time.time() + self.ttl + self.grace + 60
        while time.time() < deadline and came_back is None:
            status, body = self.admin_get(victim, "/readyz")
            if status == 503 and "drain" in body:
                came_back = time.time() - t0
            elif status == 200:
                came_back = -1.0  # ready: it forgot its drain
                break
            else:
                time.sleep(0.2)
        if came_back is not None and came_back >= 0:
            # Sampled from its start check's end (its lease valid) for two listing periods more.
            valid_by = time.time() + self.ttl + self.grace + 30
            while time.time() < valid_by and self.node_metric(victim, "wasmkeep_node_lease_valid") != 1.0:
                time.sleep(0.2)
            sample_end = time.time() + 2 * self.period + 1
            while time.time() < sample_end:
                worst_held = max(worst_held, self.node_metric(victim, "wasmkeep_holds_resident") or 0.0)
                worst_shards = max(worst_shards, self.node_metric(victim, "wasmkeep_alarms_shards_held") or 0.0)
                time.sleep(0.3)
        ucode, ready_s = self.undrain_node(victim)
        ok = (code == 0 and came_back is not None and came_back >= 0 and worst_held == 0 and worst_shards == 0
              and ucode == 0 and ready_s is not None)
        back = ("never answered drained" if came_back is None else
                "came back READY (not drained)" if came_back < 0 else f"back drained {came_back:.1f} s after the drain began")
        self.action("restart_drained", t0, f"drain exit {code} in {took:.1f} s; {how} (exit {stop_code}), restarted: "
                    f"{back}, holding at most {worst_held:.0f} actors and {worst_shards:.0f} alarm shards; undrain exit "
                    f"{ucode}, ready again {'in %.1f s' % ready_s if ready_s is not None else 'never'}", ok, victim.id,
                    how=how, drain_exit=code, stop_exit=stop_code)

    def owner_of(self, actor):
        r = self.W("bucket", "get", f"owners/{TENANT}/{CLASS}/{actor}", check=False)
        for line in r.stdout.splitlines():
            if line.startswith("owner "):
                name = line.split()[1]
                return None if name == "nobody" else name
        return None

    MOVE_OUTCOMES = {0: "moved", 1: "released (taken by another node first)", 3: "refused", 4: "no holder",
                     5: "no outcome yet or release pending"}

    def move(self, k):
        """Busy actors moved, one at a time, each to a node other than its holder."""
        for actor in self.rng.sample([f"busy-{i}" for i in range(self.a.busy)], min(3, self.a.busy)):
            if self.stop.is_set():
                return
            t0 = time.time()
            source = self.owner_of(actor)
            targets = [n for n in self.nodes if n.alive() and not n.held and n.id != source and n.id not in self.drained]
            if not targets:
                continue
            target = self.rng.choice(targets)
            try:
                r = self.W("actor", "move", f"{TENANT}/{CLASS}/{actor}", "--to", target.id, "--wait", "30",
                           check=False, timeout=60)
                code = r.returncode
            except subprocess.TimeoutExpired:
                code = None
            outcome = self.MOVE_OUTCOMES.get(code, f"exit {code}")
            # moved, or a race the design allows (released: a request took it first; no holder).
            self.action("move", t0, f"{TENANT}/{CLASS}/{actor} from {source or 'nobody'} to {target.id}: {outcome}",
                        code in (0, 1, 4), target.id, exit=code, actor=actor, source=source)

    def balance(self, k):
        t0 = time.time()
        try:
            r = self.W("cluster", "balance", "--wait", "60", check=False, timeout=120)
            code, text = r.returncode, (r.stdout + r.stderr)
        except subprocess.TimeoutExpired:
            code, text = None, ""
        # "round N: moved A, refused B, released without a taker C, pending D, not done yet E"
        totals = [0, 0, 0, 0, 0]
        for m in re.finditer(r"round \d+: moved (\d+), refused (\d+), released without a taker (\d+), pending (\d+), "
                             r"not done yet (\d+)", text):
            totals = [t + int(x) for t, x in zip(totals, m.groups())]
        outcome = {0: "balanced", 3: "moves remain after 3 rounds", 5: "moves still under way"}.get(code, f"exit {code}")
        self.action("balance", t0, f"{outcome}: moved {totals[0]}, refused {totals[1]}, released without a taker "
                    f"{totals[2]}, pending {totals[3]}, not done yet {totals[4]}", code in (0, 5), None, exit=code,
                    moved=totals[0], refused=totals[1], released=totals[2], pending=totals[3], not_done=totals[4])

    def deploy(self, k):
        """A new version of a class (the chat class and the alarm class in turn): the same
        module with a custom section naming the version, so its SHA-256 differs and the
        behaviour and ABI do not. It is rolled out in two steps (docs/tenants.md, "Deploying"):
        to 30 % of the class's actors, and after a few seconds of both versions serving, to
        all of them; the appends and alarms keep their checks throughout."""
        # One deploy a turn of the nemesis (k steps by turn_len): the chat class and the alarm class in turn.
        cls, wasm = (CLASS, "chat.wasm") if (k // self.turn_len) % 2 == 1 or self.a.alarm_rate <= 0 else (ALARM_CLASS, "alarm_probe.wasm")
        with open(os.path.join(self.a.actors, wasm), "rb") as f:
            module = f.read()
        name = b"wasmkeep-soak-version"
        payload = bytes([len(name)]) + name + f"{k}:{time.time()}".encode()
        size, leb = len(payload), bytearray()
        while True:
            byte = size & 0x7F
            size >>= 7
            leb.append(byte | (0x80 if size else 0))
            if not size:
                break
        path = os.path.join(self.out, f"{cls}-v{k}.wasm")
        with open(path, "wb") as f:
            f.write(module + b"\x00" + bytes(leb) + payload)
        t0 = time.time()
        r = self.W("deploy", "--tenant", TENANT, "--class", cls, path, "--rollout", "30", "--json", check=False)
        sha, version = None, None
        if r.returncode == 0:
            try:
                d = json.loads(r.stdout)
                sha, version = d.get("module_sha256"), d.get("version")
            except ValueError:
                pass
        rolled = None
        if version is not None:
            time.sleep(3)  # both versions serve the class meanwhile
            rolled = self.W("class", "rollout", f"{TENANT}/{cls}", str(version), "100", check=False).returncode
        listed = self.W("class", "list", "--tenant", TENANT, "--json", check=False)
        current = sha is not None and sha in listed.stdout
        self.action("deploy", t0, f"class {cls}: exit {r.returncode}, version {version} at 30 % then 100 % "
                    f"(exit {rolled}), module {(sha or '?')[:12]}, {'current' if current else 'NOT current'} in "
                    "class list", r.returncode == 0 and rolled == 0 and current, None, cls=cls, sha256=sha,
                    version=version)

    turn_len = 9  # the nemesis's steps (below)

    def nemesis(self, end):
        steps = [self.kill, self.drain, self.move, self.restore_and_fork, self.pause, self.restart_drained, self.deploy,
                 self.freeze, self.quotas, self.balance]
        k = 0
        # Room for the slowest event (a freeze and its restart) before the end.
        gap = max(5.0, 2 * (self.ttl + self.grace))
        self.gap = gap
        self.stop.wait(min(gap, (end - time.time()) / 4))
        while not self.stop.is_set() and time.time() + (self.ttl + self.grace) * 2 < end:
            try:
                steps[k % len(steps)](k)
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                self.action(steps[k % len(steps)].__name__, time.time(), f"failed: {e}", False)
            k += 1
            self.stop.wait(self.rng.uniform(gap / 2, gap))

    def quotas(self, k):
        """The tenant's quotas switched on for a while, then lifted (docs/tenants.md,
        "Quotas"): requests_per_second below what the clients send (429s, which must never be
        applied: the checker's refused_present), a resident_actors share that hibernates idle
        actors to make room, messages_per_second and alarms_per_second (deliveries and alarms
        wait for tokens) and a stored_bytes quota far above what is stored (every write reserved
        and settled)."""
        t0 = time.time()
        settings = [f"requests_per_second={max(2, int(self.a.rate / 2))}", "resident_actors=150",
                    "messages_per_second=20", "alarms_per_second=10", "stored_bytes=1GiB"]
        quota_args = [x for s in settings for x in ("--quota", s)]
        r = self.W("tenant", "set", TENANT, *quota_args, check=False)
        if r.returncode != 0:
            self.action("quotas", t0, "tenant set failed: " + r.stderr.strip()[-200:], False)
            return
        self.stop.wait(min(15.0, 2 * self.gap))
        lift = [x for s in settings for x in ("--quota", s.split("=")[0] + "=unlimited")]
        lifted = self.W("tenant", "set", TENANT, *lift, check=False)
        self.action("quotas", t0, f"{' '.join(settings)} for {time.time() - t0:.1f} s, then lifted",
                    lifted.returncode == 0)

    # ---- the checker ------------------------------------------------------------------
    def read_all(self, actor):
        """Every message of actor, read through any ready node: [(number, text)]."""
        out, since = [], 0
        deadline = time.time() + 120
        while time.time() < deadline:
            node = self.rng.choice(self.nodes)
            status, body = self.request(node, "GET", f"{actor}/messages?since={since}", timeout=10)
            if status != 200:
                time.sleep(0.5)
                continue
            lines = [l for l in body.split("\n") if l]
            if not lines:
                return out
            for l in lines:
                num, _, text = l.partition("\t")
                out.append((int(num), text))
            since = out[-1][0]
        raise RuntimeError(f"could not read {actor} back")

    def check(self):
        by_actor = {}
        for e in self.history:
            by_actor.setdefault(e["actor"], []).append(e)
        lost, duplicated, misplaced, out_of_order, phantom, unacked_present = [], [], [], [], [], 0
        refused_present = []  # answered 429 (a quota) yet applied
        for actor, entries in sorted(by_actor.items()):
            stored = self.read_all(actor)
            seen = {}
            for num, text in stored:
                seen.setdefault(text, []).append(num)
            sent = {e["value"] for e in entries}
            for text, nums in seen.items():
                if len(nums) > 1:
                    duplicated.append({"actor": actor, "value": text, "numbers": nums})
                if text not in sent:
                    phantom.append({"actor": actor, "value": text})
            numbers = [n for n, _ in stored]
            if numbers != list(range(1, len(numbers) + 1)):
                misplaced.append({"actor": actor, "problem": "numbers are not 1..n"})
            last_by_writer = {}
            for e in sorted(entries, key=lambda e: e["t0"]):
                where = seen.get(e["value"], [])
                if e["status"] == 200:
                    if not where:
                        lost.append({"actor": actor, "value": e["value"], "number": e["number"]})
                        continue
                    if e["number"] is not None and where[0] != e["number"]:
                        misplaced.append({"actor": actor, "value": e["value"], "acknowledged": e["number"], "at": where[0]})
                    prev = last_by_writer.get(e["writer"])
                    if prev is not None and where[0] <= prev:
                        out_of_order.append({"actor": actor, "value": e["value"]})
                    last_by_writer[e["writer"]] = where[0]
                elif where:
                    unacked_present += 1
                    if e["status"] == 429:
                        refused_present.append({"actor": actor, "value": e["value"]})
        return {"lost": lost, "duplicated": duplicated, "misplaced": misplaced, "out_of_order": out_of_order,
                "phantom": phantom, "unacknowledged_present": unacked_present, "refused_present": refused_present,
                "refused": sum(1 for e in self.history if e["status"] == 429), "actors_checked": len(by_actor)}

    # ---- alarms ---------------------------------------------------------------------
    # The alarm actor is examples/testdata/alarm_probe.cc: POST /set?t=T[&rearm=R&count=K]
    # [&fail=1] sets its one alarm to T (its log gets "s<T>"); the handler logs
    # "f<T>:<retry>:<now_ms>" and, with rearm, sets the next alarm R ms after it ran, K times
    # (each logged "s<T'>" in the handler's own batch); with fail=1 its first run traps, so
    # the node retries it. The log is the actor's durable state: what the checker reads.
    #
    # One client sets alarms at --alarm-rate on a pool of --alarm-actors actors (a new one
    # each time until the pool is used, then again from the first), each due 1 s to
    # idle_hibernate + 25 s ahead, so some fire on a resident actor, some on one that
    # hibernated, and some on one whose node the nemesis killed or froze. During the run the
    # soak never touches an alarm actor between its set and the end of its alarm's chain plus
    # the bound (a request would restore the actor and fire the alarm from its state, hiding
    # a lost index entry); a pool actor gets its next set only after that. At the end every
    # actor's durable state is read without waking it (`wasmkeep actor alarm --json`, a
    # read-only restore): an alarm still set after its bound is missing. Only then are the
    # logs read through the nodes and checked.
    def alarms_bound(self):
        """How long an alarm may take without anyone's help: the lease bound of a killed or
        frozen holder twice over, a scan period, a hand-over's recheck, and a margin."""
        return 2 * (self.ttl + self.grace) + self.alarm_scan_s + self.alarm_recheck_s + 10.0

    def alarms_setup(self):
        self.alarm_sets = []       # every set: dict(actor, t, rearm, count, fail, t0, t1, status, node, end)
        self.alarm_ends = {}       # actor -> the latest nominal end of a chain set on it
        self.alarm_stop = threading.Event()
        self.alarm_thread = None
        if self.a.alarm_rate <= 0 or self.a.alarm_actors <= 0:
            return
        self.alarm_thread = threading.Thread(target=self.alarm_writer, daemon=True)

    def alarm_writer(self):
        rng = random.Random(self.a.seed * 7919 + 1)
        period = 1.0 / self.a.alarm_rate
        bound = self.alarms_bound()
        next_at = time.time()
        k = 0
        while not self.alarm_stop.is_set():
            now = time.time()
            room = self.load_end - now   # every chain's nominal end within the load phase
            # A delay: mostly short (the owner's timer), some long enough to hibernate first.
            r = rng.random()
            if r < 0.45:
                delay = rng.uniform(1, 8)
            elif r < 0.75:
                delay = rng.uniform(8, 25)
            else:
                delay = rng.uniform(self.idle_hibernate + 3, self.idle_hibernate + 25)
            rearm, count = (rng.randint(1000, 4000), rng.randint(1, 2)) if rng.random() < 0.3 else (0, 0)
            fail = 1 if rng.random() < 0.15 else 0
            chain = delay + count * rearm / 1000 + 2.0 * fail + 1.0
            if chain > room:
                delay -= chain - room
                chain = room
                if delay < 1.0:
                    break
            # The next pool actor whose last chain (and its bound) is over.
            name = None
            for i in range(self.a.alarm_actors):
                cand = f"alarm-{(k + i) % self.a.alarm_actors}"
                if self.alarm_ends.get(cand, 0) + bound < now:
                    name, k = cand, k + i + 1
                    break
            if name is not None:
                t = int((now + delay) * 1000)
                path = f"{name}/set?t={t}" + (f"&rearm={rearm}&count={count}" if rearm else "") + \
                    (f"&fail={fail}" if fail else "")
                node = self.rng.choice(self.nodes)
                t0 = time.time()
                status, _ = self.request(node, "POST", path, timeout=10, cls=ALARM_CLASS)
                t1 = time.time()
                end = t / 1000 + chain - delay + max(0.0, t1 - t0)
                self.alarm_ends[name] = end
                with self.lock:
                    self.alarm_sets.append({"actor": name, "t": t, "rearm": rearm, "count": count, "fail": fail,
                                            "t0": round(t0, 3), "t1": round(t1, 3), "status": status,
                                            "node": node.id, "end": round(end, 3)})
            next_at += period
            delay_next = next_at - time.time()
            if delay_next > 0:
                self.alarm_stop.wait(delay_next)
            else:
                next_at = time.time()

    def alarm_state(self, name):
        """The alarm the actor's durable state holds (ms, or None), read without waking it."""
        r = self.W("actor", "alarm", f"{TENANT}/{ALARM_CLASS}/{name}", "--json", check=False)
        if r.returncode != 0:
            return "error", r.stderr.strip()[:200]
        try:
            return "ok", json.loads(r.stdout).get("alarm_ms")
        except ValueError:
            return "error", r.stdout[:200]

    def alarms_settle(self):
        """Waits until every alarm actor's durable state holds no alarm, or its bound passed."""
        bound = self.alarms_bound()
        names = sorted({s["actor"] for s in self.alarm_sets})
        deadline = {n: self.alarm_ends[n] + bound for n in names}
        settled, stuck = {}, {}
        pending = set(names)
        t_start = time.time()
        while pending:
            now = time.time()
            ready = [n for n in pending if self.alarm_ends[n] <= now]
            results = {}
            threads = []
            lock = threading.Lock()

            def look(batch):
                for n in batch:
                    st = self.alarm_state(n)
                    with lock:
                        results[n] = st
            for i in range(4):
                th = threading.Thread(target=look, args=(ready[i::4],))
                th.start()
                threads.append(th)
            for th in threads:
                th.join()
            now = time.time()
            for n, (kind, value) in results.items():
                if kind == "ok" and value is None:
                    settled[n] = now
                    pending.discard(n)
                elif now > deadline[n]:
                    stuck[n] = value
                    pending.discard(n)
            if pending:
                time.sleep(2.0)
        return {"seconds": round(time.time() - t_start, 1), "stuck": stuck}

    def alarm_log(self, name):
        deadline = time.time() + 120
        while time.time() < deadline:
            status, body = self.request(self.rng.choice(self.nodes), "GET", name, timeout=10, cls=ALARM_CLASS)
            if status == 200:
                return [e for e in body.strip().split(",") if e]
            time.sleep(0.5)
        raise RuntimeError(f"could not read alarm actor {name} back")

    def alarm_context(self):
        """From the nodes' logs: per alarm actor, when and where it was opened, and when it
        hibernated (debug lines "actor opened" and "actor unloaded ... reason=hibernated")."""
        opened, hibernated = {}, {}
        prefix = f"actor={TENANT}/{ALARM_CLASS}/"
        for node_id, line in self.node_log_lines():
            if prefix not in line:
                continue
            m = re.search(r" actor=" + re.escape(f"{TENANT}/{ALARM_CLASS}/") + r"(\S+)", line)
            t = log_time(line)
            if not m or t is None:
                continue
            if "actor opened" in line:
                opened.setdefault(m.group(1), []).append((t, node_id))
            elif "actor unloaded" in line and "reason=hibernated" in line:
                hibernated.setdefault(m.group(1), []).append(t)
        return opened, hibernated

    def alarms_result(self):
        if self.alarm_thread is None:
            return {"available": False, "set": None, "fired": None, "note": "alarms: not set (--alarm-rate 0)"}
        if not hasattr(self, "_alarms"):
            self._alarms = self._alarms_check()
        return self._alarms

    def _alarms_check(self):
        bound = self.alarms_bound()
        settle = self.alarms_settle()
        sets_by_actor = {}
        for s in self.alarm_sets:
            sets_by_actor.setdefault(s["actor"], []).append(s)
        logs = {}
        names = sorted(sets_by_actor)
        lock = threading.Lock()

        def read(batch):
            for n in batch:
                entries = self.alarm_log(n)
                with lock:
                    logs[n] = entries
        threads = [threading.Thread(target=read, args=(names[i::4],)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        opened, hibernated = self.alarm_context()
        hits = [e for e in self.events if e["kind"] in ("kill", "freeze")]
        drains = [e for e in self.events if e["kind"] in ("drain", "restart_drained")]
        required = []          # dict(actor, t, source, t_set, fired: [(retry, now_ms)])
        missing, early, stale, phantom, lost_sets, late_beyond = [], [], [], [], [], []
        firings = retried = unacked_present = 0
        for name in names:
            sent = {s["t"]: s for s in sets_by_actor[name]}
            entries = logs.get(name, [])
            alarms = []        # in log order: dict(t, source, fired: [(retry, now)])
            current = None
            prev_f = None
            for e in entries:
                if e.startswith("s"):
                    t = int(e[1:])
                    # The soak's sets are known by their time; a set right after a firing that
                    # the soak did not send is the handler's re-arm (in the firing's batch).
                    if t in sent:
                        s = sent[t]
                        a = {"t": t, "source": "request" if s["status"] == 200 else "unacknowledged",
                             "t_set": s["t1"], "fired": []}
                    elif prev_f is not None:
                        a = {"t": t, "source": "handler", "t_set": prev_f / 1000, "fired": []}
                    else:
                        phantom.append({"actor": name, "entry": e})
                        a = {"t": t, "source": "unknown", "t_set": None, "fired": []}
                    alarms.append(a)
                    current = a
                    prev_f = None
                elif e == "d":
                    current, prev_f = None, None
                elif e.startswith("f"):
                    due, retry, now = (int(x) for x in e[1:].split(":"))
                    firings += 1
                    retried += 1 if retry > 0 else 0
                    if now < due:
                        early.append({"actor": name, "entry": e})
                    # A run clears the alarm in its own batch: a second durable run of the
                    # same alarm would have found it gone, so it counts as stale too.
                    if current is None or current["t"] != due:
                        stale.append({"actor": name, "entry": e})
                    else:
                        current["fired"].append((retry, now))
                    current, prev_f = None, now
            logged = {a["t"] for a in alarms if a["source"] != "handler"}
            for t, s in sent.items():
                if s["status"] == 200 and t not in logged:
                    lost_sets.append({"actor": name, "t": t})
                elif s["status"] != 200 and t in logged:
                    unacked_present += 1
            for a in alarms:
                if a["source"] in ("request", "handler"):
                    a["actor"] = name
                    required.append(a)
                    if not a["fired"]:
                        missing.append({"actor": name, "t": a["t"], "source": a["source"]})
                    elif (a["fired"][0][1] - a["t"]) / 1000 > bound:
                        late_beyond.append({"actor": name, "t": a["t"], "late_s": (a["fired"][0][1] - a["t"]) / 1000})
        late = [(a["fired"][0][1] - a["t"]) / 1000 for a in required if a["fired"]]
        # Where each required alarm's actor was at its set, and what happened to it before it was due.
        node_hit = hibernated_first = node_drained = 0
        for a in required:
            if a["t_set"] is None:
                continue
            due = a["t"] / 1000
            before = [(t, n) for (t, n) in opened.get(a["actor"], []) if t <= a["t_set"] + 0.5]
            holder = max(before)[1] if before else None
            if holder and any(e["node"] == holder and a["t_set"] <= e["at"] <= due for e in hits):
                node_hit += 1
            if holder and any(e["node"] == holder and a["t_set"] <= e["at"] <= due for e in drains):
                node_drained += 1
            if any(a["t_set"] <= t <= due for t in hibernated.get(a["actor"], [])):
                hibernated_first += 1
        acked = sum(1 for s in self.alarm_sets if s["status"] == 200)
        counters = {}
        for s in self.scrapes.values():
            for k, v in s.get("alarms", {}).items():
                counters[k] = counters.get(k, 0) + int(v)
        ok = not (missing or early or stale or phantom or lost_sets or late_beyond or settle["stuck"])
        return {
            "available": True, "ok": ok, "actors": len(names), "bound_s": round(bound, 1),
            "sets_sent": len(self.alarm_sets), "sets_acknowledged": acked,
            "sets_unacknowledged": len(self.alarm_sets) - acked, "unacknowledged_present": unacked_present,
            "set": len(required), "set_by_requests": sum(1 for a in required if a["source"] == "request"),
            "set_by_handlers": sum(1 for a in required if a["source"] == "handler"),
            "fired": sum(1 for a in required if a["fired"]), "firings_logged": firings,
            "fired_on_a_retry": retried,
            "holder_killed_or_frozen_before_due": node_hit, "holder_drained_before_due": node_drained,
            "hibernated_before_due": hibernated_first,
            "lateness_s": summary(late), "settle_s": settle["seconds"],
            "node_counters": counters,
            "missing": missing[:20], "early": early[:20], "stale": stale[:20], "phantom": phantom[:20],
            "acknowledged_sets_absent": lost_sets[:20], "late_beyond_bound": late_beyond[:20],
            "still_set_after_bound": settle["stuck"],
        }

    # ---- the bank (examples/bank/bank.cc) --------------------------------------------
    # Transfers between --bank-accounts accounts, each a message between actors
    # (docs/messages.md), from two clients at --bank-rate a second in all, each with a fresh
    # Idempotency-Key, sent to random nodes and again with the same key until answered (a
    # client keeps a transfer that waits for its next attempt aside and goes on: the bank
    # cluster test's client, tests/cluster/bank.py). The accounts get keyed deposits of known
    # amounts first. At the end, once every node is back: every account started (its outbox
    # delivered), the durable messages read once no node delivers, and the bank test's
    # checks: money conserved exactly, every balance what the answers say, the numbers
    # answered to each sender distinct and covered by its receivers' applied records, no
    # outbox or dead message left, every retry answered as its key first was.
    def bank_setup(self):
        self.bank = None
        self.bank_transfers = []
        self.bank_threads = []
        self.bank_stop = threading.Event()
        self.bank_give_up_s = 300.0
        if self.a.bank_rate <= 0 or self.a.bank_accounts < 2:
            return
        self.bank = bank_lib.Bank([f"127.0.0.1:{n.port}" for n in self.nodes], self.token, tenant=TENANT,
                                  cls=BANK_CLASS)
        rng = random.Random(self.a.seed * 31 + 7)
        self.bank_names = bank_lib.account_names(self.a.bank_accounts)
        self.bank_deposits = {n: rng.randrange(10000, 20000) for n in self.bank_names}
        problems = bank_lib.parallel(lambda n: self.bank.deposit(random.Random(n), n, self.bank_deposits[n], 120),
                                     self.bank_names, 8)
        problems = [p for p in problems.values() if p]
        if problems:
            raise RuntimeError(f"bank deposits: {problems[0]}")
        clients = 2
        self.bank_threads = [threading.Thread(target=self.bank_client, args=(c, clients), daemon=True)
                             for c in range(clients)]

    def bank_client(self, c, clients):
        rng = random.Random(self.a.seed * 7717 + c)

        def make():
            if self.bank_stop.is_set():  # the load is over: nothing new; what waits is sent to the end
                return None
            return self.bank.transfer(rng, self.bank_names, self.bank_give_up_s, 0.1)

        def done(t):
            with self.lock:
                self.bank_transfers.append(t.record())
        bank_lib.send_all(rng, make, lambda: False, done, interval=clients / self.a.bank_rate)

    def bank_result(self):
        if self.bank is None:
            return {"available": False, "note": "bank: no transfers (--bank-rate 0)"}
        t0 = time.time()
        for t in self.bank_threads:
            t.join(timeout=max(1.0, t0 + self.bank_give_up_s + 30 - time.time()))
        waiting = sum(1 for t in self.bank_threads if t.is_alive())
        log(f"bank: {len(self.bank_transfers)} transfers answered or given up; every account started and "
            f"its outbox awaited")
        balances, messages, settle_s = self.bank.settle(
            self.bank_names,
            lambda n: bank_lib.read_messages(self.wk, self.config, self.bucket, f"{TENANT}/{BANK_CLASS}/{n}"),
            [f"127.0.0.1:{n.admin_port}" for n in self.nodes], 180, say=lambda text: log("bank: " + text))
        checks = self.bank.judge(self.bank_deposits, self.bank_transfers, balances, messages, settle_s)
        counters = {}
        for sc in self.scrapes.values():
            for k, v in sc.get("messages", {}).items():
                counters[k] = counters.get(k, 0) + int(v)
        return {"available": True, "ok": waiting == 0 and all(c["ok"] for c in checks),
                "accounts": len(self.bank_names), "deposits": sum(self.bank_deposits.values()),
                "balances": sum(v for v in balances.values() if v is not None),
                **bank_lib.stats_of(self.bank_transfers),
                "clients_still_sending": waiting, "settle_s": round(settle_s, 1),
                "checks": {c["name"]: {"ok": c["ok"], "detail": c["detail"]} for c in checks},
                "messages_by_outcome": counters}

    # ---- WebSockets (docs/websockets.md): the chat room's /ws, through the whole nemesis ----
    def ws_setup(self):
        self.ws_threads = []
        self.ws_conns = []  # dict(client, room, node, received [(n, text)], opened, ended, code)
        self.ws_sent = []   # dict(client, room, text, t)
        self.ws_stop = threading.Event()
        if self.a.ws_clients <= 0 or self.a.ws_rooms <= 0:
            return
        self.ws_threads = [threading.Thread(target=self.ws_client, args=(c,), daemon=True)
                           for c in range(self.a.ws_clients)]

    def ws_client(self, c):
        rng = random.Random(self.a.seed * 4099 + c)
        room = f"ws-{c % self.a.ws_rooms}"
        last, seq = 0, 0
        while not self.ws_stop.is_set():
            node = rng.choice(self.nodes)
            if not node.alive():
                self.ws_stop.wait(0.5)
                continue
            conn = {"client": c, "room": room, "node": node.id, "received": [], "opened": time.time(),
                    "ended": None, "code": None}
            try:
                ws = wsclient.WsClient.connect(f"127.0.0.1:{node.port}",
                                               f"/v1/actors/{TENANT}/{CLASS}/{room}/ws?since={last}",
                                               token=self.token, timeout=5)
            except (wsclient.WsClosed, OSError, ValueError) as e:
                conn["code"] = f"refused: {str(e)[:60]}"
                with self.lock:
                    self.ws_conns.append(conn)
                self.ws_stop.wait(rng.uniform(0.2, 1.0))
                continue
            with self.lock:
                self.ws_conns.append(conn)
            next_send = time.time() + rng.uniform(0, 1.0 / self.a.ws_rate)
            try:
                while not self.ws_stop.is_set():
                    if time.time() >= next_send:
                        seq += 1
                        text = f"ws{c}-{seq}"
                        ws.send_text(text)
                        with self.lock:
                            self.ws_sent.append({"client": c, "room": room, "text": text, "t": time.time()})
                        next_send = time.time() + 1.0 / self.a.ws_rate
                    try:
                        kind, data = ws.recv(timeout=max(0.05, next_send - time.time()))
                    except TimeoutError:
                        continue
                    if kind == "close":
                        conn["code"] = data[0]
                        break
                    if kind != "text" or "\t" not in data or data.startswith("error\t"):
                        continue
                    n, _, text = data.partition("\t")
                    conn["received"].append((int(n), text))
                    last = max(last, int(n))
            except (wsclient.WsClosed, OSError, ValueError) as e:
                conn["code"] = conn["code"] or f"ended: {str(e)[:60]}"
            conn["ended"] = time.time()
            try:
                ws.close()
                ws.sock.close()
            except OSError:
                pass
            if conn["code"] != 4000:  # 4000: a page of catch-up; the next one at once
                self.ws_stop.wait(rng.uniform(0.1, 0.5))

    def ws_result(self):
        if not self.ws_threads:
            return {"available": False, "note": "websockets: none (--ws-clients 0)"}
        for t in self.ws_threads:
            t.join(timeout=30)
        rooms = {}
        problems = []
        for r in sorted({c["room"] for c in self.ws_conns}):
            try:
                rooms[r] = {n: text for n, text in self.read_all(r)}
            except (RuntimeError, OSError) as e:
                problems.append(f"{r}: cannot be read back: {e}")
        received = 0
        for conn in self.ws_conns:
            prev = 0
            room = rooms.get(conn["room"])
            for n, text in conn["received"]:
                received += 1
                if room is not None and room.get(n) != text:
                    problems.append(f"{conn['room']}: a client received {n}\t{text} through node {conn['node']}, "
                                    f"but the room's message {n} is {room.get(n)!r}")
                if n <= prev:
                    problems.append(f"{conn['room']}: message {n} after {prev} on one connection")
                prev = n
        seen_by_sender = {(c["room"], text) for c in self.ws_conns for _, text in c["received"]}
        sent = len(self.ws_sent)
        echoed = sum(1 for m in self.ws_sent if (m["room"], m["text"]) in seen_by_sender)
        codes = {}
        for conn in self.ws_conns:
            k = str(conn["code"]) if conn["code"] is not None else "open at the end"
            k = k.split(":")[0]
            codes[k] = codes.get(k, 0) + 1
        return {"available": True, "ok": not problems and received > 0, "rooms": len(rooms),
                "connections": len(self.ws_conns), "sent": sent, "seen_broadcast": echoed,
                "received": received, "ends_by_code": codes, "problems": problems[:20]}

    # ---- history: restores and forks (docs/storage.md, "History and point-in-time restore") --
    # The chat checker would call a restore's removed appends lost, so restores and forks go to
    # actors of their own: --hist-actors kv actors (examples/kv/kv.cc, class kv) `hist-N`, each
    # written by a client of its own at --hist-rate / N a second, one PUT at a time through a
    # random node, keys k1, k2, ... in order (value v<i>): a key names its write, and a batch of
    # such a PUT names its key in `actor history`. The nemesis's `restore_and_fork` step picks one,
    # reads its history (`actor history --json`, from the bucket), restores it to a random batch
    # B through a random node (`actor restore --batch B --node`) and forks it at a random batch F
    # into a new actor (`actor fork --batch F --to hist-N-fK`). The state at a batch is the
    # soak's to compute: walking the listed batches in order, a PUT adds its key and a restore's
    # batch (delete_all, known by the batch id its answer named) sets the state the soak computed
    # for its target. Right after a restore the actor (read through a node) must hold every key of
    # the state at B and none of the writes acknowledged before the restore was sent that came
    # after B; a fork must hold exactly the state at F. At the end, with the writers stopped, each
    # actor's keys must equal exactly the walk of its whole history, the history must hold every
    # acknowledged write in order, before each restore's batch if acknowledged before the restore
    # was sent and after it if sent after the restore was answered, and nothing never sent; each
    # fork must still hold its state. A restore or fork refused (400, 404, 409: nothing changed)
    # or failed (no answer, 5xx: it may have taken effect, and the walk then places its batch by
    # its target) is counted, not a failure; a check that does not hold fails the soak.
    def hist_setup(self):
        self.hist_names = [f"hist-{i}" for i in range(self.a.hist_actors)] if self.a.hist_rate > 0 else []
        self.hist_writes = {n: [] for n in self.hist_names}    # dict(i, key, t0, t1, status, node)
        self.hist_restores = {n: [] for n in self.hist_names}  # dict(to, t0, t1, exit, batch, node, ...)
        self.hist_forks = {n: [] for n in self.hist_names}     # dict(name, at, t0, t1, exit, state, ...)
        self.hist_immediate = []                               # the checks right after each restore and fork
        self.hist_busy = set()                                 # actors the history step works on now
        self.hist_threads = [threading.Thread(target=self.hist_writer, args=(n,), daemon=True)
                             for n in self.hist_names]

    def hist_writer(self, name):
        rng = random.Random(self.a.seed * 4099 + int(name.split("-")[1]))
        period = len(self.hist_names) / self.a.hist_rate
        next_at = time.time() + rng.uniform(0, period)
        i = 0
        while not self.stop.is_set():
            delay = next_at - time.time()
            if delay > 0:
                self.stop.wait(delay)
                if self.stop.is_set():
                    break
            i += 1
            node = rng.choice(self.nodes)
            t0 = time.time()
            status, _ = self.request(node, "PUT", f"{name}/k{i}", f"v{i}".encode(), timeout=10, cls=KV_CLASS)
            t1 = time.time()
            with self.lock:
                self.hist_writes[name].append({"i": i, "key": f"k{i}", "t0": round(t0, 3), "t1": round(t1, 3),
                                               "status": status, "node": node.id})
            next_at = max(next_at + period, time.time())

    def hist_listing(self, name):
        """The actor's history as `actor history --json` lists it (from the bucket): dict, or None."""
        r = self.W("actor", "history", f"{TENANT}/{KV_CLASS}/{name}", "--json", "--limit", "100000", check=False,
                   timeout=120)
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def hist_keys(self, name):
        """The actor's keys, read through a node (GET of its empty key lists them): set, or None."""
        deadline = time.time() + 60
        while time.time() < deadline:
            node = self.rng.choice([n for n in self.nodes if n.alive() and not n.frozen] or self.nodes)
            status, body = self.request(node, "GET", f"{name}/", timeout=10, cls=KV_CLASS)
            if status == 200:
                return {l for l in body.split("\n") if l}
            time.sleep(0.5)
        return None

    def hist_walk(self, name, batches, wanted=()):
        """Walks the listed batches: (the state at each wanted batch id, the state at the end,
        the position of each batch id, problems). A restore's batch (delete_all) is the one its
        answer named, or, for one that was not answered, the earliest attempt left unmatched."""
        restores = self.hist_restores[name]
        by_batch = {r["batch"]: r for r in restores if r.get("batch")}
        unanswered = [r for r in restores if not r.get("batch") and r["exit"] not in (2, 3, 4)]
        keep = set(wanted) | {r["to"] for r in restores}
        state, at, position, problems, matched = set(), {}, {}, [], set()
        for pos, b in enumerate(batches):
            bid = b["batch"]
            position[bid] = pos
            if b["delete_all"]:
                r = by_batch.get(bid)
                if r is None:
                    for u in unanswered:
                        if id(u) not in matched and b["time_ms"] >= u["t0"] * 1000 - 2000:
                            r = u
                            matched.add(id(u))
                            u["matched_batch"] = bid
                            break
                if r is None:
                    problems.append(f"{name}: batch {bid} clears every key but is no restore the soak made")
                    state = set()
                elif r["to"] not in at:
                    problems.append(f"{name}: the restore {bid} went to batch {r['to']}, not before it in the history")
                    state = set()
                else:
                    state = set(at[r["to"]])
                    if b["puts"] != len(state):
                        problems.append(f"{name}: the restore {bid} puts {b['puts']} keys; the state at "
                                        f"{r['to']} has {len(state)}")
            elif b["puts"] or b["deletes"]:
                if b["deletes"] or b["puts"] != len(b["keys"]):
                    problems.append(f"{name}: batch {bid} is no PUT of one key ({b['puts']} puts, {b['deletes']} deletes)")
                state |= set(b["keys"])
            if bid in keep:
                at[bid] = frozenset(state)
        return at, state, position, problems

    def restore_and_fork(self, k):
        """A restore of a history actor to a random batch and a fork of one at another."""
        names = [n for n in self.hist_names if n not in self.hist_busy]
        if not names:
            return
        name = self.rng.choice(names)
        self.hist_busy.add(name)
        try:
            self._restore(k, name)
            if not self.stop.is_set():
                self._fork(k, name)
        finally:
            self.hist_busy.discard(name)

    def hist_cli(self, verb, name, point, *extra):
        """`actor restore|fork` through a random live node: (exit, answer dict or None, node id, stderr)."""
        node = self.pick_node() or self.rng.choice(self.nodes)
        try:
            r = self.W("actor", verb, f"{TENANT}/{KV_CLASS}/{name}", "--batch", point, *extra, "--token", self.token,
                       "--node", f"127.0.0.1:{node.port}", "--json", check=False, timeout=90)
            code, out, err = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired:
            code, out, err = None, "", "the command did not return"
        answer = None
        if code == 0:
            try:
                answer = json.loads(out)
            except ValueError:
                pass
        lines = [l for l in err.strip().splitlines() if l.startswith("wasmkeep:")] or err.strip().splitlines() or [""]
        return code, answer, node.id, lines[-1][:200]

    @staticmethod
    def hist_outcome(code):
        if code == 0:
            return "done"
        if code in (2, 3, 4):
            return f"refused (exit {code})"
        return f"failed (exit {code})"

    def _restore(self, k, name):
        t0 = time.time()
        listing = self.hist_listing(name)
        if listing is None:
            self.action("restore", t0, f"{name}: could not read its history", False, None, outcome_key="no history")
            return
        batches = listing["batches"]
        if len(batches) < 2:
            self.action("restore", t0, f"{name}: {len(batches)} batches, too few; skipped", True, None,
                        outcome_key="skipped")
            return
        target = self.rng.choice(batches[:-1])["batch"]
        at, _, _, problems = self.hist_walk(name, batches, [target])
        expected = at.get(target, frozenset())
        with self.lock:
            acked_before = [w for w in self.hist_writes[name] if w["status"] == 200]
        t_sent = time.time()
        rec = {"to": target, "t0": round(t_sent, 3), "exit": None, "batch": None, "expected": sorted(expected)}
        self.hist_restores[name].append(rec)
        code, answer, node, err = self.hist_cli("restore", name, target)
        rec["t1"], rec["exit"], rec["node"] = round(time.time(), 3), code, node
        if code == 0 and answer is not None:
            rec["batch"], rec["undo"] = answer.get("batch"), answer.get("undo")
            if answer.get("to") != target:
                problems.append(f"{name}: restored to {answer.get('to')}, asked {target}")
        outcome = self.hist_outcome(code)
        if code != 0:
            self.action("restore", t0, f"{name} to {target} through {node}: {outcome}: {err}", False, node,
                        outcome_key=outcome, to=target)
            return
        # Right after: every key of the state at the target, none of the writes acknowledged
        # before the restore was sent that came after it, nothing never sent.
        keys = self.hist_keys(name)
        sent = {w["key"] for w in self.hist_writes[name]}
        if keys is None:
            problems.append(f"{name}: could not read its keys after the restore")
        else:
            missing = sorted(expected - keys)
            removed = sorted(w["key"] for w in acked_before if w["t1"] < t_sent and w["key"] not in expected
                             and w["key"] in keys)
            never = sorted(keys - sent)
            if missing:
                problems.append(f"{name}: after the restore to {target}, {len(missing)} keys of its state are missing "
                                f"({', '.join(missing[:5])})")
            if removed:
                problems.append(f"{name}: after the restore to {target}, {len(removed)} writes after it are still "
                                f"there ({', '.join(removed[:5])})")
            if never:
                problems.append(f"{name}: keys never written: {', '.join(never[:5])}")
        self.hist_immediate.append({"kind": "restore", "actor": name, "to": target, "batch": rec["batch"],
                                    "ok": not problems, "problems": problems[:5]})
        self.action("restore", t0, f"{name} to {target} (of {len(batches)} batches, {len(expected)} keys) through "
                    f"{node}: restored as batch {rec['batch']}; check {'held' if not problems else 'FAILED: ' + problems[0]}",
                    not problems, node, outcome_key="restored" if not problems else "restored, check failed",
                    to=target, batch=rec["batch"])

    def _fork(self, k, name):
        t0 = time.time()
        listing = self.hist_listing(name)
        if listing is None or not listing["batches"]:
            self.action("fork", t0, f"{name}: could not read its history", False, None, outcome_key="no history")
            return
        batches = listing["batches"]
        point = self.rng.choice(batches)["batch"]
        at, _, _, problems = self.hist_walk(name, batches, [point])
        expected = at.get(point, frozenset())
        to = f"{name}-f{k}"
        rec = {"name": to, "at": point, "t0": round(time.time(), 3), "state": sorted(expected)}
        self.hist_forks[name].append(rec)
        code, answer, node, err = self.hist_cli("fork", name, point, "--to", to)
        rec["t1"], rec["exit"], rec["node"] = round(time.time(), 3), code, node
        outcome = self.hist_outcome(code)
        if code != 0:
            self.action("fork", t0, f"{name} at {point} into {to} through {node}: {outcome}: {err}", False, node,
                        outcome_key=outcome, at=point)
            return
        if answer is not None and answer.get("from") != point:
            problems.append(f"{to}: forked from {answer.get('from')}, asked {point}")
        keys = self.hist_keys(to)
        if keys is None:
            problems.append(f"{to}: could not read its keys")
        elif keys != expected:
            problems.append(f"{to}: {len(keys)} keys, the state at {point} has {len(expected)} (missing "
                            f"{', '.join(sorted(expected - keys)[:3]) or 'none'}, extra {', '.join(sorted(keys - expected)[:3]) or 'none'})")
        self.hist_immediate.append({"kind": "fork", "actor": to, "at": point, "ok": not problems,
                                    "problems": problems[:5]})
        self.action("fork", t0, f"{name} at {point} ({len(expected)} keys) into {to} through {node}: forked; check "
                    f"{'held' if not problems else 'FAILED: ' + problems[0]}", not problems, node,
                    outcome_key="forked" if not problems else "forked, check failed", at=point)

    def hist_result(self):
        """The end's checks of every history actor and fork (the writers stopped, the nodes ready)."""
        if not self.hist_names:
            return {"available": False, "note": "history: no restores or forks (--hist-rate 0 or --hist-actors 0)"}
        problems = [f"right after a {c['kind']} ({c['actor']}): {p}" for c in self.hist_immediate for p in c["problems"]]
        actors = {}
        for name in self.hist_names:
            writes = self.hist_writes[name]
            listing = self.hist_listing(name)
            keys = self.hist_keys(name)
            info = {"writes": len(writes), "acknowledged": sum(1 for w in writes if w["status"] == 200)}
            actors[name] = info
            if listing is None or keys is None:
                problems.append(f"{name}: could not read its {'history' if listing is None else 'keys'} at the end")
                continue
            batches = listing["batches"]
            info["batches"] = len(batches)
            if listing.get("truncated"):
                problems.append(f"{name}: its history is truncated at 100,000 batches: not checked")
                continue
            _, final, position, walk_problems = self.hist_walk(name, batches)
            problems += walk_problems
            info["keys"] = len(keys)
            if keys != final:
                problems.append(f"{name}: {len(keys)} keys, its history makes {len(final)} (missing "
                                f"{', '.join(sorted(final - keys)[:3]) or 'none'}, extra "
                                f"{', '.join(sorted(keys - final)[:3]) or 'none'})")
            # Against what the soak sent: every listed PUT sent, every acknowledged one listed,
            # in order, on the right side of every restore.
            sent = {w["key"]: w for w in writes}
            where = {}
            for pos, b in enumerate(batches):
                if not b["delete_all"] and b["puts"]:
                    for key in b["keys"]:
                        if key not in sent:
                            problems.append(f"{name}: batch {b['batch']} puts {key}, never written")
                        where.setdefault(key, pos)
            acked = [w for w in writes if w["status"] == 200]
            absent = [w["key"] for w in acked if w["key"] not in where]
            if absent:
                problems.append(f"{name}: {len(absent)} acknowledged writes not in its history ({', '.join(absent[:5])})")
            last = -1
            for w in acked:
                p = where.get(w["key"])
                if p is None:
                    continue
                if p < last:
                    problems.append(f"{name}: {w['key']} is listed before an earlier acknowledged write")
                last = max(last, p)
            done = [r for r in self.hist_restores[name] if r.get("batch") or r.get("matched_batch")]
            info["restores_in_history"] = len(done)
            for r in done:
                rb = r.get("batch") or r.get("matched_batch")
                pr = position.get(rb)
                if pr is None:
                    problems.append(f"{name}: the restore's batch {rb} is not in its history")
                    continue
                for w in acked:
                    p = where.get(w["key"])
                    if p is None:
                        continue
                    if w["t1"] < r["t0"] and p > pr:
                        problems.append(f"{name}: {w['key']}, acknowledged before the restore {rb} was sent, is after it")
                    if r.get("batch") and w["t0"] > r["t1"] and p < pr:
                        problems.append(f"{name}: {w['key']}, sent after the restore {rb} was answered, is before it")
        # Each fork still holds its state; one that failed without an answer holds it or nothing.
        forks_checked = 0
        for name in self.hist_names:
            for f in self.hist_forks[name]:
                if f.get("exit") in (2, 3, 4):
                    continue
                forks_checked += 1
                keys = self.hist_keys(f["name"])
                if keys is None:
                    problems.append(f"{f['name']}: could not read its keys at the end")
                elif keys != set(f["state"]) and (f.get("exit") == 0 or keys):
                    problems.append(f"{f['name']}: {len(keys)} keys at the end, the state at {f['at']} has "
                                    f"{len(f['state'])}")
        restores = [r for n in self.hist_names for r in self.hist_restores[n]]
        forks = [f for n in self.hist_names for f in self.hist_forks[n]]

        def count(recs):
            out = {}
            for r in recs:
                key = self.hist_outcome(r.get("exit"))
                out[key] = out.get(key, 0) + 1
            return out
        return {"available": True, "ok": not problems, "actors": actors,
                "writes": sum(len(w) for w in self.hist_writes.values()),
                "writes_acknowledged": sum(1 for w in self.hist_writes.values() for e in w if e["status"] == 200),
                "restores": len(restores), "restores_by_outcome": count(restores),
                "unanswered_restores_in_history": sum(1 for r in restores if r.get("matched_batch")),
                "forks": len(forks), "forks_by_outcome": count(forks), "forks_checked_at_end": forks_checked,
                "checks_right_after": len(self.hist_immediate),
                "checks_right_after_failed": sum(1 for c in self.hist_immediate if not c["ok"]),
                "problems": problems[:30]}

    # ---- the run ----------------------------------------------------------------------
    def run(self):
        t_setup = time.time()
        self.setup()
        for n in self.nodes:
            n.start()
        log(f"{len(self.nodes)} nodes starting on {self.bucket.split('?')[0]} (start check: ttl + grace)")
        threading.Thread(target=self.supervise, daemon=True).start()
        if not self.wait_ready(self.ttl + self.grace + 60):
            raise RuntimeError("the nodes did not become ready")
        self.alarms_setup()
        self.bank_setup()
        self.hist_setup()
        self.ws_setup()
        log(f"ready after {time.time() - t_setup:.1f} s; load and nemesis for {self.a.minutes} min")
        start = time.time()
        end = start + self.a.minutes * 60
        self.load_end = end
        self.half_at = start + self.a.minutes * 30
        busy_rate = max(self.a.rate - self.a.cold_rate, 0.1)
        threads = [threading.Thread(target=self.writer, args=(w, busy_rate / self.a.writers), daemon=True)
                   for w in range(self.a.writers)]
        if self.a.cold and self.a.cold_rate > 0:
            threads.append(threading.Thread(target=self.writer, args=(self.a.writers, self.a.cold_rate, True),
                                            daemon=True))
        threads.append(threading.Thread(target=self.scraper, daemon=True))
        threads += self.hist_threads
        for t in threads + self.bank_threads + self.ws_threads:
            t.start()
        if self.alarm_thread is not None:
            self.alarm_thread.start()
        nem = threading.Thread(target=self.nemesis, args=(end,), daemon=True)
        if not self.a.no_nemesis:  # --no-nemesis: a healthy cluster's costs (docs/benchmarks.md)
            nem.start()
        while time.time() < end:
            time.sleep(1)
        log("load ends")
        self.stop.set()
        self.alarm_stop.set()
        self.bank_stop.set()
        self.ws_stop.set()
        if nem.is_alive():
            nem.join(timeout=self.ttl * 10 + 60)
        for t in threads:
            t.join(timeout=30)
        self.stop.clear()
        # Every node back and ready, then the final scrape and the read-back.
        for n in self.nodes:
            n.held = False
            if n.frozen and n.proc:
                os.kill(n.proc.pid, signal.SIGCONT)
                n.frozen = False
        for node_id in sorted(self.drained):
            log(f"undrain {node_id} (still drained at the end of the load)")
            self.W("cluster", "undrain", node_id, check=False)
        self.drained.clear()
        sup = threading.Thread(target=self.supervise, daemon=True)
        sup.start()
        ready = self.wait_ready(self.ttl + self.grace + 60)
        self.scrape_once()
        load_seconds = time.time() - start
        verdict = self.check()
        self.hist_report = self.hist_result()
        self.bank_report = self.bank_result()
        self.ws_report = self.ws_result()
        if self.alarm_thread is not None:
            self.alarm_thread.join(timeout=30)
            log(f"alarms: {len(self.alarm_sets)} sets sent; waiting for each actor's alarm to clear")
            self.alarms_result()
        self.scrape_once()
        self.finished = True
        self.stop.set()
        for n in self.nodes:
            if n.alive():
                n.proc.send_signal(signal.SIGTERM)
        for n in self.nodes:
            if n.proc:
                try:
                    n.proc.wait(timeout=self.ttl * 3)
                except subprocess.TimeoutExpired:
                    n.proc.kill()
        self.usage_report = self.usage_result()
        return self.report(verdict, load_seconds, ready)

    def usage_result(self):
        """The soak tenant's usage as the nodes metered it through the nemesis (docs/tenants.md,
        "Usage"), read after the clean stops flushed it: the sum must read (no record left corrupt
        by a kill or a paused bucket) and show requests, CPU and stored byte-seconds (the lowest
        live node's integration of the stored-bytes ledger, through kills and freezes). A kill -9
        loses up to a flush period of a node's counts, so requests are reported beside the
        clients' 200s, not compared exactly."""
        try:
            r = self.W("tenant", "usage", TENANT, "--json", check=False, timeout=120)
        except (subprocess.SubprocessError, OSError) as e:
            return {"available": True, "ok": False, "problem": f"tenant usage did not answer: {e}"}
        if r.returncode != 0:
            return {"available": True, "ok": False, "problem": f"tenant usage exited {r.returncode}: "
                                                               f"{r.stderr.strip()[:300]}"}
        answered = sum(1 for e in self.history if e["status"] == 200)
        try:
            total = json.loads(r.stdout)["total"]
            out = {"available": True, "requests_ok": total["requests"]["ok"], "requests_throttled":
                   total["requests"]["throttled"], "appends_answered_200": answered, "cpu_ms": total["cpu_ms"],
                   "stored_byte_seconds": total["stored_byte_seconds"],
                   "bucket_requests_total": total["bucket_requests_total"]}
        except (ValueError, KeyError, TypeError) as e:
            return {"available": True, "ok": False, "problem": f"tenant usage printed no total: {e}"}
        problems = [f"{k} is 0" for k in ("requests_ok", "cpu_ms", "stored_byte_seconds") if not out[k]]
        out["ok"] = not problems
        out["problem"] = "; ".join(problems)
        return out

    # ---- the report -------------------------------------------------------------------
    def node_log_lines(self):
        if not hasattr(self, "_log_lines"):
            self._log_lines = []
            for n in self.nodes:
                for path in n.logs:
                    try:
                        with open(path, errors="replace") as fh:
                            for line in fh:
                                if ("fenced a node" in line or "node lease valid" in line or "actor opened" in line
                                        or "actor unloaded" in line):
                                    self._log_lines.append((n.id, line))
                    except OSError:
                        pass
        return self._log_lines

    def free_time(self, f):
        """When the victim's records became free: a peer's fence of it, or its next process's
        first valid lease write, whichever came first after the event (the nodes' logs)."""
        best = None
        for node_id, line in self.node_log_lines():
            fenced = "fenced a node whose lease ran out" in line and f" node={f['victim']} " in line
            valid = node_id == f["victim"] and "node lease valid" in line
            if not (fenced or valid):
                continue
            t = log_time(line)
            if t is not None and t > f["at"] and (best is None or t < best):
                best = t
        return best

    def opened_time(self, f):
        """When another node had acquired the probe (its "actor opened" line, less the restore)."""
        actor = f"actor={TENANT}/{CLASS}/{f['probe']} "
        for node_id, line in self.node_log_lines():
            if "actor opened" not in line or actor not in line or node_id == f["victim"]:
                continue
            t = log_time(line)
            m = re.search(r" restore_ms=([0-9]+)", line)
            if t is not None and m and t > f["at"]:
                return t - int(m.group(1)) / 1000.0
        return None

    def action_summary(self):
        """Per kind of operator action: how many, how many as expected, and each outcome's count
        (the outcome's words before its first figure-bearing detail)."""
        out = {}
        for a in self.actions:
            s = out.setdefault(a["kind"], {"count": 0, "as_expected": 0, "outcomes": {}})
            s["count"] += 1
            s["as_expected"] += 1 if a["ok"] else 0
            if a["kind"] == "move":
                key = self.MOVE_OUTCOMES.get(a.get("exit"), f"exit {a.get('exit')}")
            elif a["kind"] in ("drain", "restart_drained"):
                key = f"drain exit {a.get('drain_exit')}" + ("" if a["ok"] else ", unexpected")
            elif a["kind"] == "balance":
                key = f"exit {a.get('exit')}"
            elif a["kind"] in ("restore", "fork") and "outcome_key" in a:
                key = a["outcome_key"]
            else:
                key = "as expected" if a["ok"] else "unexpected"
            s["outcomes"][key] = s["outcomes"].get(key, 0) + 1
        return out

    def report(self, verdict, load_seconds, ready):
        acked = sum(1 for e in self.history if e["status"] == 200)
        split = {"kill": {"writable_again": [], "lease_bound": [], "acquisition": [], "restore": []},
                 "freeze": {"writable_again": [], "lease_bound": [], "acquisition": [], "restore": []}}
        for f in self.failovers:
            if f["acknowledged"] is None:
                continue
            s = split[f["kind"]]
            s["writable_again"].append(f["acknowledged"] - f["at"])
            t_free = self.free_time(f)
            t_acq = self.opened_time(f)
            if t_acq is None or t_acq > f["acknowledged"]:
                t_acq = f["acknowledged"]
            if t_free is None or t_free > t_acq:
                t_free = t_acq
            f["acquired"] = t_acq
            f["free"] = t_free
            s["lease_bound"].append(t_free - f["at"])
            s["acquisition"].append(t_acq - t_free)
            s["restore"].append(f["acknowledged"] - t_acq)
        writable = {k: {part: summary(v) for part, v in parts.items()} for k, parts in split.items()}
        # Bucket requests: each process's last scrape, summed.
        totals, node_seconds = {}, 0.0
        for s in self.scrapes.values():
            node_seconds += max(0.0, s["last"] - s["start"])
            for (op, purpose), v in s["counts"].items():
                totals[(op, purpose)] = totals.get((op, purpose), 0) + v
        purposes = sorted({p for (_, p) in totals})
        per_node_second = {p: round(sum(v for (o, q), v in totals.items() if q == p) / node_seconds, 4)
                           for p in purposes} if node_seconds else {}
        non_segment_puts = sum(v for (o, p), v in totals.items() if o == "put" and p != "segment")
        owner_puts = sum(v for (o, p), v in totals.items() if o == "put" and p == "owner")
        half_seconds, half_totals = 0.0, {}
        for s in self.scrapes.values():
            if "half" not in s:
                continue
            t_half, counts_half = s["half"]
            half_seconds += max(0.0, s["last"] - t_half)
            for k, v in s["counts"].items():
                half_totals[k] = half_totals.get(k, 0) + v - counts_half.get(k, 0)
        half = None
        if half_seconds > 0:
            half = {"node_seconds": round(half_seconds, 1),
                    "non_segment_puts_per_node_second": round(sum(v for (o, p), v in half_totals.items()
                                                                  if o == "put" and p != "segment") / half_seconds, 4),
                    "owner_puts_per_node_second": round(sum(v for (o, p), v in half_totals.items()
                                                            if o == "put" and p == "owner") / half_seconds, 4),
                    "by_purpose_and_op": {f"{p} {o}": round(v / half_seconds, 4) for (o, p), v in half_totals.items()
                                          if v}}
        span = (max(s["last"] for s in self.scrapes.values()) - min(s["start"] for s in self.scrapes.values())) \
            if self.scrapes else 0
        money = {}
        for name, table in PRICES.items():
            per_second = sum(v * table[o] for (o, _), v in totals.items() if o in table) / span if span else 0
            money[name] = round(per_second * 86400, 4)
        by_op = {}
        for (o, p), v in totals.items():
            by_op.setdefault(p, {})[o] = int(v)
        kills = [e for e in self.events if e["kind"] == "kill"]
        freezes = [e for e in self.events if e["kind"] == "freeze"]
        report = {
            "conditions": {"nodes": len(self.nodes), "minutes": self.a.minutes, "bucket": self.a.backend,
                           "timings": {"ttl_s": self.ttl, "grace_s": self.grace, "safety_s": self.safety,
                                       "period_s": self.period},
                           "rate_target_per_s": self.a.rate, "cold_writes_per_s": self.a.cold_rate,
                           "busy_actors": self.a.busy, "cold_actors": self.a.cold,
                           "writers": self.a.writers, "seed": self.a.seed, "binary": self.wk,
                           "cores": os.cpu_count(), "load_seconds": round(load_seconds, 1),
                           "started": datetime.datetime.fromtimestamp(self.t_started, datetime.timezone.utc).isoformat()},
            "writes": {"sent": len(self.history), "acknowledged": acked,
                       "acknowledged_per_s": round(acked / load_seconds, 2) if load_seconds else 0,
                       "lost": len(verdict["lost"]), "duplicated": len(verdict["duplicated"]),
                       "misplaced": len(verdict["misplaced"]), "out_of_order": len(verdict["out_of_order"]),
                       "phantom": len(verdict["phantom"]),
                       "unacknowledged_present": verdict["unacknowledged_present"],
                       "refused_429": verdict["refused"], "refused_present": len(verdict["refused_present"]),
                       "actors_checked": verdict["actors_checked"]},
            "alarms": self.alarms_result(),
            "bank": self.bank_report,
            "history": self.hist_report,
            "websockets": self.ws_report,
            "usage": getattr(self, "usage_report", {"available": False, "ok": True}),
            "nemesis": {"kills": len(kills), "freezes": len(freezes), "bucket_pauses": len(self.pauses),
                        "freezes_that_exited_6": sum(1 for e in freezes if e.get("exit_after_resume") == 6),
                        "unplanned_exits": sum(len(n.exits) for n in self.nodes) - len(freezes),
                        "actions": self.action_summary()},
            "writable_again_s": writable,
            "bucket_pauses": self.pauses,
            "bucket_requests": {"node_seconds": round(node_seconds, 1), "per_node_second": per_node_second,
                                "non_segment_puts_per_node_second": round(non_segment_puts / node_seconds, 4)
                                if node_seconds else None,
                                "owner_puts_per_node_second": round(owner_puts / node_seconds, 4)
                                if node_seconds else None,
                                "second_half": half,
                                "by_purpose_and_op": by_op},
            "money_per_day_usd": money,
            "all_ready_at_end": ready,
            "failures": {k: v[:20] for k, v in verdict.items() if isinstance(v, list) and v},
        }
        with open(os.path.join(self.out, "report.json"), "w") as f:
            json.dump(report, f, indent=2)
        with open(os.path.join(self.out, "history.jsonl"), "w") as f:
            for e in self.history:
                f.write(json.dumps(e) + "\n")
        with open(os.path.join(self.out, "alarms.jsonl"), "w") as f:
            for e in getattr(self, "alarm_sets", []):
                f.write(json.dumps(e) + "\n")
        with open(os.path.join(self.out, "bank.jsonl"), "w") as f:
            for t in self.bank_transfers:
                f.write(json.dumps(t) + "\n")
        with open(os.path.join(self.out, "failovers.json"), "w") as f:
            json.dump({"failovers": self.failovers, "events": self.events, "actions": self.actions}, f, indent=2)
        return report


def print_report(r, out):
    w, n, wa = r["writes"], r["nemesis"], r["writable_again_s"]
    c = r["conditions"]
    print(f"soak: {c['nodes']} nodes on {c['bucket']}, {c['load_seconds']} s of load "
          f"(ttl {c['timings']['ttl_s']} s, grace {c['timings']['grace_s']} s), {c['cores']} cores")
    print(f"  writes: {w['sent']} sent, {w['acknowledged']} acknowledged ({w['acknowledged_per_s']}/s), "
          f"lost {w['lost']}, duplicated {w['duplicated']}, misplaced {w['misplaced']}, "
          f"out of order {w['out_of_order']}, never sent {w['phantom']}; "
          f"{w['unacknowledged_present']} unacknowledged present; {w['refused_429']} refused 429 by a quota "
          f"({w['refused_present']} of them applied); {w['actors_checked']} actors")
    a = r["alarms"]
    if not a["available"]:
        print("  " + a["note"])
    else:
        print(f"  alarms: {a['set']} set ({a['set_by_requests']} by acknowledged requests, {a['set_by_handlers']} "
              f"re-armed by handlers) on {a['actors']} actors, {a['fired']} fired; missing {len(a['missing'])}, "
              f"early {len(a['early'])}, stale {len(a['stale'])}, later than the bound ({a['bound_s']} s) "
              f"{len(a['late_beyond_bound'])}, still set {len(a['still_set_after_bound'])}")
        lt = a["lateness_s"]
        print(f"    lateness (s) p50 {lt['p50']} p99 {lt['p99']} max {lt['max']}; {a['holder_killed_or_frozen_before_due']} "
              f"had their node killed or frozen before due, {a['holder_drained_before_due']} drained, "
              f"{a['hibernated_before_due']} hibernated first; "
              f"{a['fired_on_a_retry']} fired on a retry; "
              f"{a['sets_unacknowledged']} sets unanswered ({a['unacknowledged_present']} took effect)")
    b = r["bank"]
    if not b["available"]:
        print("  " + b["note"])
    else:
        print(f"  bank: {b['transfers']} transfers on {b['accounts']} accounts ({b['answered_200']} answered 200, "
              f"{b['answered_409']} 409, {b['gave_up']} given up; {b['requests']} requests, {b['sent_again']} sent "
              f"again, {b['replays']} replays); balances sum {b['balances']}, deposits {b['deposits']}; "
              f"settled in {b['settle_s']} s")
        print("    checks: " + ", ".join(f"{k} {'ok' if v['ok'] else 'FAILED'}" for k, v in b["checks"].items()) +
              "; messages by outcome: " + ", ".join(f"{k} {v}" for k, v in sorted(b["messages_by_outcome"].items())))
        for k, v in b["checks"].items():
            if not v["ok"]:
                print(f"    {k}: {v['detail']}")
    h = r["history"]
    if not h["available"]:
        print("  " + h["note"])
    else:
        def outcomes(d):
            return ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "none"
        print(f"  history: {h['writes']} writes to {len(h['actors'])} kv actors ({h['writes_acknowledged']} acknowledged); "
              f"{h['restores']} restores ({outcomes(h['restores_by_outcome'])}; "
              f"{h['unanswered_restores_in_history']} unanswered ones in the history), {h['forks']} forks "
              f"({outcomes(h['forks_by_outcome'])}); checks right after {h['checks_right_after']} "
              f"({h['checks_right_after_failed']} failed), at the end {'held' if h['ok'] else 'FAILED'}")
        for p in h["problems"][:10]:
            print(f"    {p}")
    ws = r["websockets"]
    if not ws["available"]:
        print("  " + ws["note"])
    else:
        print(f"  websockets: {ws['connections']} connections to {ws['rooms']} rooms, {ws['sent']} messages sent "
              f"({ws['seen_broadcast']} seen broadcast), {ws['received']} received, each checked against its room: "
              f"{'held' if ws['ok'] else 'FAILED'}; ends by code: " +
              ", ".join(f"{k} {v}" for k, v in sorted(ws["ends_by_code"].items())))
        for p in ws["problems"][:10]:
            print(f"    {p}")
    u = r["usage"]
    if u.get("available"):
        if "requests_ok" in u:
            print(f"  usage (tenant usage {TENANT}): {u['requests_ok']} requests ok ({u['appends_answered_200']} appends "
                  f"answered 200 to the list clients alone), {u['requests_throttled']} throttled, {u['cpu_ms']} CPU ms, "
                  f"{u['stored_byte_seconds']} stored byte-seconds, {u['bucket_requests_total']} bucket requests: "
                  f"{'held' if u['ok'] else 'FAILED: ' + u['problem']}")
        else:
            print(f"  usage: FAILED: {u['problem']}")
    print(f"  nemesis: {n['kills']} kills, {n['freezes']} freezes ({n['freezes_that_exited_6']} exited 6 on resume), "
          f"{n['bucket_pauses']} bucket pauses, {n['unplanned_exits']} other exits")
    for kind, s in n["actions"].items():
        print(f"    {kind}: {s['count']} ({s['as_expected']} as expected): " +
              ", ".join(f"{k} {v}" for k, v in sorted(s["outcomes"].items())))
    for kind in ("kill", "freeze"):
        s = wa[kind]
        if s["writable_again"]["count"]:
            print(f"  writable again after a {kind} (s): " +
                  ", ".join(f"{part} p50 {v['p50']} p99 {v['p99']} max {v['max']}" for part, v in s.items()) +
                  f" ({s['writable_again']['count']} measured)")
    br = r["bucket_requests"]
    print(f"  bucket requests per node-second: " + ", ".join(f"{p} {v}" for p, v in br["per_node_second"].items()))
    print(f"  PUTs other than segments per node-second: {br['non_segment_puts_per_node_second']}"
          f" (owner records {br.get('owner_puts_per_node_second')})")
    if br.get("second_half"):
        h = br["second_half"]
        print(f"  the load's second half: PUTs other than segments per node-second {h['non_segment_puts_per_node_second']}"
              f" (owner records {h['owner_puts_per_node_second']}) over {h['node_seconds']} node-seconds")
    print(f"  money per day (requests only): " + ", ".join(f"{k} ${v}" for k, v in r["money_per_day_usd"].items()))
    print(f"  report: {out}/report.json")


def main():
    p = argparse.ArgumentParser(description="the soak's driver (run bench/soak.sh)")
    p.add_argument("--wasmkeep", required=True)
    p.add_argument("--actors", required=True)
    p.add_argument("--bucket", required=True)
    p.add_argument("--backend", default="?")
    p.add_argument("--pause", default="none", help="rgw:STATE_DIR, fault or none")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--out", required=True)
    p.add_argument("--fast-leases", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rate", type=float, default=20)
    p.add_argument("--busy", type=int, default=6)
    p.add_argument("--cold", type=int, default=200)
    p.add_argument("--cold-rate", type=float, default=0.5)
    p.add_argument("--writers", type=int, default=8)
    p.add_argument("--alarm-rate", type=float, default=0.5)
    p.add_argument("--alarm-actors", type=int, default=200)
    p.add_argument("--bank-rate", type=float, default=5)
    p.add_argument("--bank-accounts", type=int, default=50)
    p.add_argument("--hist-actors", type=int, default=3)
    p.add_argument("--hist-rate", type=float, default=2)
    p.add_argument("--ws-clients", type=int, default=4)
    p.add_argument("--ws-rooms", type=int, default=2)
    p.add_argument("--ws-rate", type=float, default=1)
    p.add_argument("--no-nemesis", action="store_true", help="no kill, freeze, pause or operator action")
    a = p.parse_args()
    if a.nodes < 2 or a.minutes <= 0 or a.rate <= 0 or a.busy < 1 or a.cold < 0 or a.writers < 1:
        print("soak: --nodes >= 2, --minutes > 0, --rate > 0, --busy >= 1 are required", file=sys.stderr)
        return 2
    soak = Soak(a)
    try:
        r = soak.run()
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        print(f"soak: {e}", file=sys.stderr)
        for n in soak.nodes:
            if n.proc and n.proc.poll() is None:
                if n.frozen:
                    os.kill(n.proc.pid, signal.SIGCONT)
                n.proc.kill()
        return 2
    print_report(r, a.out)
    w = r["writes"]
    bad = (w["lost"] or w["duplicated"] or w["misplaced"] or w["out_of_order"] or w["phantom"]
           or w["refused_present"])
    al = r["alarms"]
    bad = bad or (al["available"] and (not al["ok"] or al["set"] == 0))
    bk = r["bank"]
    bad = bad or (bk["available"] and (not bk["ok"] or bk["answered_200"] == 0))
    hs = r["history"]
    bad = bad or (hs["available"] and not hs["ok"])
    wsr = r["websockets"]
    bad = bad or (wsr["available"] and not wsr["ok"])
    bad = bad or not r["usage"]["ok"]
    if bad or not r["all_ready_at_end"] or w["acknowledged"] == 0:
        print("soak: FAILED (see failures in the report)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
