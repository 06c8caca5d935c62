#!/usr/bin/env python3
"""Messages between actors (docs/messages.md), measured: the driver of bench/messages_bench.sh,
which builds nothing and makes the bucket; this starts two `wasmkeep serve` nodes on it, runs
every case, and prints the tables (docs/benchmarks.md, "Messages between actors").

    messages_bench.py --wk BIN --actors DIR --bucket URL --work DIR
                      [--rounds 1] [--idle 40] [--gap-ms 200] [--busy 1000] [--conns 8]
                      [--seconds 10] [--background 5] [--cases one-idle,one-busy,two-idle,
                      two-busy,idem-c1,idem-c8] [--out DIR]

The actors are the bank example's accounts (DIR/bank.wasm, examples/bank/): a sender
`acme/bank/s-...` with a large deposit, and a receiver `acme/bank/r-...`; every message is
`POST /transfer?to=r-...&amount=1` on the sender, one event sending one message `credit:1`,
and the receiver's handler adds it to its balance in the batch that records it as applied.
`one-*` places both on node a (each is first called through it, which acquires it there);
`two-*` places the receiver on node b (first called through b); the placement is read back
from the ownership records and, if another node took an actor, it is moved with `wasmkeep
actor move`. Transfers always go through node a (where the sender is).

  *-idle  one message at a time with idle gaps: a transfer, then the receiver's balance read
          back to back (GET /balance through the receiver's node) until it shows the credit,
          then --gap-ms of nothing, --idle times. The outbox empties between messages, so
          each message pays its sender's wake entry (its index PUT, and its DELETE once the
          outbox is empty again). After the phase's figures, 20 deposits on the sender one
          at a time: the same event without a message, for the wake entry's round trip.
  *-busy  messages always in flight: --busy transfers sent by --conns clients as fast as
          they are answered, the receiver's balance polled every 5 ms until it holds them all.
          msgs/s is --busy over the time from the first send to the last credit seen.
  idem-cN the counter (DIR/counter.wasm): N clients POST /increment for --seconds (after 1 s
          of warm-up), without and with a fresh `Idempotency-Key` per request, side by side
          (their order alternates by round); N = 1 on one actor, N = 8 on four. Each on a
          node of its own, started for it on a fresh bucket of the same scheme and stopped
          after it: a keyed case's actors write thousands of segments whose garbage
          collection trails it by minutes, and would otherwise run beside the next cases.

Latency of a message, two ways, both from the send to the receiver's handler effect durable:
  client  the transfer's send to the first balance read showing the credit (the receiver
          applies one sender's messages in order, so the k-th message is seen when the balance
          first reaches k; a read answers only once what it saw is durable, through the
          output gate): within one read (idle) or 5 ms plus one read (busy);
  metric  the sending node's `wasmkeep_message_latency_seconds` over the phase: from the
          sending event's clock (ms) to the receiver's durable answer, observed when the
          delivery round ends; p50/p99 are interpolated linearly within its buckets (0.5, 1,
          2.5, 5, 10, 25, 50, 100, 250 ms, ...), so they are as coarse as those.
Bucket requests per message: the nodes' `wasmkeep_bucket_requests_total{op,purpose}` (every
outcome) after the phase minus before, divided by the messages delivered. The phase ends
once no node delivers any more (outboxes empty, outcomes recorded), 0.5 s later (the wake
entry's DELETE), and once garbage collection is done with the phase's segments (no gc or
snapshot request for 1.5 s; --gc-timeout bounds the wait): each segment PUT is followed by
its DELETE once a snapshot covers it, paced 20 ms apart, seconds after a busy phase. Less
the background: the same counters' rate over --background seconds of the idle cluster at
the start, times the phase's duration. Requests a node makes by the clock whatever it serves
(its lease, the listing of nodes/, fences, the watch of control/ for drains and moves, the
alarm index's shard scans, told from its other LISTs by `wasmkeep_alarms_scans_total`) are
left out of the table and given per second. CPU is each node's over the sending and
applying (not the wait for GC), as a share of one core.

Every case is a row, a failed one with why (a node's exit status and last log lines, the
answer that was wrong, the wait that ran out). Exit status 1 if a case failed. Standard
library only.
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid

TENANT = "acme"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class CaseFailed(Exception):
    pass


class Client:
    """One keep-alive connection per port, per thread; one retry on a dropped connection."""

    def __init__(self, token):
        self.token = token
        self.local = threading.local()

    def request(self, port, method, path, headers=None, timeout=30):
        conns = self.local.__dict__.setdefault("conns", {})
        for attempt in range(2):
            c = conns.get(port)
            if c is None:
                c = conns[port] = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            try:
                h = {"Authorization": "Bearer " + self.token}
                h.update(headers or {})
                c.request(method, path, body=b"" if method == "POST" else None, headers=h)
                r = c.getresponse()
                return r.status, r.read().decode("utf-8", "replace")
            except (OSError, http.client.HTTPException) as e:
                c.close()
                conns.pop(port, None)
                if attempt == 1:
                    return 0, "no answer: %s: %s" % (type(e).__name__, e)
        return 0, "no answer"


# --- metrics ---------------------------------------------------------------------------------
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(port):
    """Every sample of a node's /metrics: [(name, {label: value}, value)]."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", "/metrics")
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        if r.status != 200:
            raise CaseFailed("GET /metrics of port %d: %d" % (port, r.status))
    except (OSError, http.client.HTTPException) as e:
        raise CaseFailed("GET /metrics of port %d: %s" % (port, e))
    finally:
        c.close()
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            continue
        out.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), v))
    return out


def requests_by(samples):
    """{(purpose, op): requests of every outcome}; the alarm index's shard scans (time-driven:
    each shard listed every alarms.scan_period_ms) apart from its other LISTs, as
    ("alarm", "scan list")."""
    d = {}
    for name, labels, v in samples:
        if name == "wasmkeep_bucket_requests_total":
            k = (labels.get("purpose", "?"), labels.get("op", "?"))
            d[k] = d.get(k, 0.0) + v
    scans = value(samples, "wasmkeep_alarms_scans_total")
    d[("alarm", "scan list")] = scans
    d[("alarm", "list")] = d.get(("alarm", "list"), 0.0) - scans
    return d


def time_driven(purpose, op):
    """Requests a node makes by the clock, whatever it serves: its lease, the listing of
    nodes/, fences, the watch of control/ for drains and moves, the shard scans."""
    return purpose in ("lease", "listing", "fence") or (purpose, op) in (("control", "list"), ("alarm", "scan list"))


def value(samples, name, **want):
    return sum(v for n, labels, v in samples if n == name and all(labels.get(k) == x for k, x in want.items()))


def histogram(samples, name):
    """[(upper bound, cumulative count)] in bound order (+Inf last)."""
    b = {}
    for n, labels, v in samples:
        if n == name + "_bucket":
            le = labels.get("le", "+Inf")
            b[le] = b.get(le, 0.0) + v
    return sorted(((float("inf") if k == "+Inf" else float(k)), v) for k, v in b.items())


def hist_delta(h0, h1):
    before = dict(h0)
    return [(le, v - before.get(le, 0.0)) for le, v in h1]


def hist_quantile(h, q):
    """q-quantile of a cumulative histogram, interpolated linearly within its bucket (ms);
    None if empty, inf if it falls in +Inf."""
    if not h or h[-1][1] <= 0:
        return None
    rank = q * h[-1][1]
    prev_le, prev_c = 0.0, 0.0
    for le, c in h:
        if c >= rank:
            if le == float("inf"):
                return float("inf")
            frac = 0.0 if c == prev_c else (rank - prev_c) / (c - prev_c)
            return 1000.0 * (prev_le + frac * (le - prev_le))
        prev_le, prev_c = le, c
    return float("inf")


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def disk_probe(directory, seconds=1.0):
    """4 KiB write + fsync in a loop on the disk under the bucket: its p50 and p99 now."""
    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    buf, ts, end = b"x" * 4096, [], time.time() + seconds
    try:
        while time.time() < end:
            t = time.perf_counter()
            os.pwrite(fd, buf, 0)
            os.fsync(fd)
            ts.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    return "%d x (4 KiB write + fsync) in %g s: p50 %.2f ms, p99 %.2f ms" % (
        len(ts), seconds, 1000 * pct(ts, 0.5), 1000 * pct(ts, 0.99))


def cpu_ticks(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return int(parts[11]) + int(parts[12])
    except OSError:
        return 0


# --- the nodes ---------------------------------------------------------------------------------
class Node:
    def __init__(self, args, name, bucket=None):
        self.args, self.name = args, name
        self.bucket = bucket or args.bucket
        self.port = free_port()
        self.log_path = os.path.join(args.work, "%s.log" % name)
        self.proc = None

    def start(self):
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [self.args.wk, "--config", self.args.config, "--bucket", self.bucket, "serve", "--node-id", self.name,
             "--listen", "127.0.0.1:%d" % self.port], stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, seconds=30):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise CaseFailed("node %s exited with status %d before it was ready: %s" %
                                 (self.name, self.proc.returncode, self.tail()))
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.1)
        raise CaseFailed("node %s not ready within %d s: %s" % (self.name, seconds, self.tail()))

    def check(self):
        if self.proc is None or self.proc.poll() is not None:
            raise CaseFailed("node %s is not running (exit status %s): %s" %
                             (self.name, None if self.proc is None else self.proc.returncode, self.tail()))

    def tail(self, n=3):
        try:
            with open(self.log_path) as f:
                return " // ".join(line.strip()[:300] for line in f.read().splitlines()[-n:])
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Cluster:
    def __init__(self, args):
        self.args = args
        self.nodes = {"a": Node(args, "a"), "b": Node(args, "b")}

    def cli(self, *argv, timeout=60):
        try:
            return subprocess.run([self.args.wk, "--config", self.args.config, "--bucket", self.args.bucket] +
                                  list(argv), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CaseFailed("wasmkeep %s: no answer within %d s" % (" ".join(argv), timeout))

    def scrape(self):
        return {n: scrape(node.port) for n, node in self.nodes.items()}

    def check(self):
        for node in self.nodes.values():
            node.check()

    def holder(self, actor):
        r = self.cli("bucket", "get", "owners/" + actor)
        for line in r.stdout.splitlines():
            if line.startswith("owner "):
                return line.split()[1]
        return None


def cpu_all(cluster):
    return {n: cpu_ticks(node.proc.pid) for n, node in cluster.nodes.items()}


# --- message cases --------------------------------------------------------------------------------
def place(cluster, client, actor_name, node, first_call):
    """Calls the actor first through `node` (which acquires it there), then checks its owner
    record names `node`, moving it there if another node took it."""
    port = cluster.nodes[node].port
    method, path = first_call
    status, body = client.request(port, method, "/v1/actors/%s/bank/%s%s" % (TENANT, actor_name, path))
    if status != 200:
        raise CaseFailed("%s %s on %s through node %s: %s %s" % (method, path, actor_name, node, status, body.strip()[:200]))
    actor = "%s/bank/%s" % (TENANT, actor_name)
    held = cluster.holder(actor)
    if held != node:
        r = cluster.cli("actor", "move", actor, "--to", node, "--wait", "30")
        held = cluster.holder(actor)
        if held != node:
            raise CaseFailed("%s is held by %s, not %s; actor move: exit %d %s" %
                             (actor, held, node, r.returncode, (r.stdout + r.stderr).strip()[-200:]))
    return held


def wait_delivered(cluster, before, n, deadline_s):
    """Until the nodes delivered n more messages and none delivers any more (outboxes empty,
    outcomes recorded); then 0.5 s for the wake entry's DELETE. Raises if it does not end."""
    deadline = time.time() + deadline_s
    while True:
        m = cluster.scrape()
        delivered = sum(value(m[x], "wasmkeep_messages_total", outcome="delivered") -
                        value(before[x], "wasmkeep_messages_total", outcome="delivered") for x in m)
        senders = sum(value(m[x], "wasmkeep_message_senders") for x in m)
        if delivered >= n and senders == 0:
            break
        if time.time() > deadline:
            raise CaseFailed("after %.0f s: %d of %d delivered, %d senders still delivering" %
                             (deadline_s, delivered, n, senders))
        time.sleep(0.05)
    time.sleep(0.5)


def wait_quiet(cluster, bound_s):
    """Until the garbage collection of the phase's segments is done (the log's snapshots and
    GC requests unchanged for 1.5 s; GC deletes one object per storage.gc_delete_interval_ms,
    20 ms, so it trails a busy phase by seconds), at most bound_s. Says how it ended."""
    t0 = time.time()
    last, since = None, time.time()
    while True:
        m = cluster.scrape()
        now = sum(v for x in m for (purpose, op), v in requests_by(m[x]).items() if purpose in ("gc", "snapshot"))
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= 1.5:
            return "GC done %.1f s after the last delivery" % (since - t0)
        if time.time() - t0 > bound_s:
            return "GC still running after %.0f s (its later requests are not counted)" % bound_s
        time.sleep(0.25)


def message_case(args, cluster, client, name, rnd, background):
    placement, mode = name.split("-")
    recv_node = "a" if placement == "one" else "b"
    tag = "%s-%d-%d" % (name, rnd, int(time.time()) % 100000)
    sender, receiver = "s-" + tag, "r-" + tag
    a = cluster.nodes["a"].port
    rport = cluster.nodes[recv_node].port
    deposit = 10 ** 12
    place(cluster, client, sender, "a", ("POST", "/deposit?amount=%d" % deposit))
    place(cluster, client, receiver, recv_node, ("GET", "/balance"))
    transfer = "/v1/actors/%s/bank/%s/transfer?to=%s&amount=1" % (TENANT, sender, receiver)
    balance_path = "/v1/actors/%s/bank/%s/balance" % (TENANT, receiver)

    def balance():
        s, body = client.request(rport, "GET", balance_path)
        if s != 200:
            raise CaseFailed("GET balance of %s: %s %s" % (receiver, s, body.strip()[:200]))
        return int(body.strip())

    def send():
        t = time.time()
        s, body = client.request(a, "POST", transfer)
        t_ack = time.time()
        if s != 200:
            raise CaseFailed("transfer: %s %s" % (s, body.strip()[:200]))
        return t, t_ack, int(body.strip())

    # Warm: one message through the whole path (class compiled on both nodes, the peer
    # connection open), then the outbox empty.
    _, _, seq0 = send()
    deadline = time.time() + 30
    while balance() < 1:
        if time.time() > deadline:
            raise CaseFailed("the warm-up message was not applied within 30 s")
        time.sleep(0.01)
    m0 = cluster.scrape()
    wait_delivered(cluster, m0, 0, 30)

    m0, c0, t0 = cluster.scrape(), cpu_all(cluster), time.time()
    n = args.idle if mode == "idle" else args.busy
    lat, acks = [], []
    if mode == "idle":
        for i in range(1, n + 1):
            ts, ta, _ = send()
            deadline = time.time() + 30
            while True:
                b = balance()
                if b >= 1 + i:
                    break
                if time.time() > deadline:
                    raise CaseFailed("message %d of %d not applied within 30 s (balance %d)" % (i, n, b - 1))
            lat.append((time.time() - ts) * 1000)
            acks.append((ta - ts) * 1000)
            time.sleep(args.gap_ms / 1000.0)
        t_sent_first = t0
        t_all_seen = None
    else:
        sends = {}  # seq -> send time
        lock = threading.Lock()
        todo = [n]
        errors = []
        last_ack = [0.0]

        def sender_thread():
            while True:
                with lock:
                    if todo[0] <= 0 or errors:
                        return
                    todo[0] -= 1
                try:
                    ts, ta, seq = send()
                except CaseFailed as e:
                    with lock:
                        errors.append(str(e))
                    return
                with lock:
                    sends[seq - seq0] = ts
                    acks.append((ta - ts) * 1000)
                    last_ack[0] = max(last_ack[0], ta)

        seen = []  # (time, messages applied)
        stop = threading.Event()

        def poller():
            last = -1
            while not stop.is_set():
                try:
                    b = balance() - 1
                except CaseFailed as e:
                    errors.append(str(e))
                    return
                t = time.time()
                if b != last:
                    seen.append((t, b))
                    last = b
                if b >= n:
                    return
                time.sleep(0.005)

        t_sent_first = time.time()
        threads = [threading.Thread(target=sender_thread) for _ in range(args.conns)]
        pt = threading.Thread(target=poller)
        for t in threads + [pt]:
            t.start()
        for t in threads:
            t.join()
        pt.join(args.busy_timeout)
        stop.set()
        pt.join()
        if errors:
            raise CaseFailed(errors[0])
        if not seen or seen[-1][1] < n:
            raise CaseFailed("after %d s: %d of %d messages applied" % (args.busy_timeout, seen[-1][1] if seen else 0, n))
        t_all_seen = seen[-1][0]
        k = 0
        for j in range(1, n + 1):
            while seen[k][1] < j:
                k += 1
            lat.append((seen[k][0] - sends[j]) * 1000)
    t_applied, c_applied = time.time(), cpu_all(cluster)
    wait_delivered(cluster, m0, n, 60)
    gc_note = wait_quiet(cluster, args.gc_timeout)
    m1, c1, t1 = cluster.scrape(), cpu_all(cluster), time.time()
    dur = t1 - t0

    row = {"case": name, "round": rnd, "ok": True, "messages": n, "receiver_node": recv_node, "gc": gc_note}
    if mode == "busy":
        row["msgs_s"] = n / (t_all_seen - t_sent_first)
        row["sends_s"] = n / (last_ack[0] - t_sent_first)
    else:
        row["msgs_s"] = n / (t_applied - t0)
    row["client_p50"], row["client_p99"] = pct(lat, 0.5), pct(lat, 0.99)
    row["lat_ms"] = [round(x, 2) for x in lat]  # in send order (--out's rows.json)
    row["ack_p50"] = pct(acks, 0.5)
    h = hist_delta(histogram(m0["a"], "wasmkeep_message_latency_seconds"),
                   histogram(m1["a"], "wasmkeep_message_latency_seconds"))
    row["metric_p50"], row["metric_p99"] = hist_quantile(h, 0.5), hist_quantile(h, 0.99)
    # Each node's segment PUTs, their mean time from sent to acknowledged
    # (wasmkeep_replica_upload_seconds): the receiver's is a link of every message's chain.
    row["upload_ms"] = {}
    for x in m1:
        count = value(m1[x], "wasmkeep_replica_upload_seconds_count") - value(m0[x], "wasmkeep_replica_upload_seconds_count")
        total = value(m1[x], "wasmkeep_replica_upload_seconds_sum") - value(m0[x], "wasmkeep_replica_upload_seconds_sum")
        row["upload_ms"][x] = 1000.0 * total / count if count else None
    outcomes = {}
    for o in ("delivered", "duplicate", "failed", "unavailable", "parked"):
        outcomes[o] = int(sum(value(m1[x], "wasmkeep_messages_total", outcome=o) -
                              value(m0[x], "wasmkeep_messages_total", outcome=o) for x in m1))
    row["outcomes"] = outcomes
    # CPU while the messages were sent and applied (GC trails after).
    row["cpu"] = {x: 100.0 * (c_applied[x] - c0[x]) / os.sysconf("SC_CLK_TCK") / (t_applied - t0) for x in c1}
    row["seconds"] = dur
    # Bucket requests: per node, per (purpose, op), less the background.
    per = {}
    raw = {}
    for x in m1:
        r0, r1 = requests_by(m0[x]), requests_by(m1[x])
        for k in r1:
            d = r1[k] - r0.get(k, 0.0)
            raw[(x,) + k] = d
            bg = background.get((x,) + k, 0.0) * dur
            if time_driven(*k):
                continue
            per[(x,) + k] = (d - bg) / max(outcomes["delivered"], 1)
    row["per_message"] = {"%s/%s/%s" % k: v for k, v in per.items()}
    row["raw"] = {"%s/%s/%s" % k: v for k, v in raw.items() if v}
    # Money: the receiver holds every credit, the sender the rest.
    got = balance() - 1
    s, body = client.request(a, "GET", "/v1/actors/%s/bank/%s/balance" % (TENANT, sender))
    left = int(body.strip()) if s == 200 else None
    row["check"] = "ok" if (got == n and left == deposit - n - 1 and outcomes["delivered"] == n and
                            not outcomes["failed"] and not outcomes["parked"]) else \
        "MISMATCH: receiver %s of %d, sender %s of %d, outcomes %s" % (got, n, left, deposit - n - 1, outcomes)
    if mode == "idle":
        # The same sender's events without a message, one at a time (after the phase's
        # figures): a transfer that fills an empty outbox also PUTs its wake entry's index
        # entry before its segment (docs/messages.md), a deposit only its segment.
        dep = []
        for _ in range(20):
            time.sleep(0.05)
            t = time.time()
            s, body = client.request(a, "POST", "/v1/actors/%s/bank/%s/deposit?amount=1" % (TENANT, sender))
            if s != 200:
                raise CaseFailed("deposit: %s %s" % (s, body.strip()[:200]))
            dep.append((time.time() - t) * 1000)
        row["deposit_p50"] = pct(dep, 0.5)
    return row


# --- idempotency ------------------------------------------------------------------------------------
IDEM_TOKENS = {}


def idem_node(args, serial):
    """A node of its own for one idempotency case, on a fresh bucket (sqlite:// and file://:
    a new directory; else --idem-bucket, with a new node id), so that neither the message
    cluster nor an earlier case's actors (their garbage collection trails a case by minutes)
    share its disk time. Returns (node, token); the caller stops the node."""
    scheme = args.bucket.split("://", 1)[0]
    if args.idem_bucket:
        bucket = args.idem_bucket
    elif scheme in ("sqlite", "file"):
        bucket = "%s://%s" % (scheme, os.path.join(args.work, "idem-bucket-%d" % serial))
    else:
        raise CaseFailed("an idempotency case on %s:// needs --idem-bucket (bench/messages_bench.sh makes one)" % scheme)

    def cli(*argv):
        try:
            r = subprocess.run([args.wk, "--config", args.config, "--bucket", bucket] + list(argv),
                               capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            raise CaseFailed("wasmkeep %s: no answer within 60 s" % " ".join(argv))
        if r.returncode != 0:
            raise CaseFailed("wasmkeep %s: exit %d: %s" % (" ".join(argv), r.returncode, (r.stdout + r.stderr).strip()[-300:]))
        return r.stdout

    if bucket not in IDEM_TOKENS:
        IDEM_TOKENS[bucket] = cli("tenant", "add", TENANT).strip().splitlines()[-1]
        cli("deploy", "--tenant", TENANT, "--class", "counter", os.path.join(args.actors, "counter.wasm"))
    node = Node(args, "i%d" % serial, bucket)
    node.log_path = os.path.join(args.work, "idem-%d.log" % serial)
    node.start()
    try:
        node.wait_ready()
    except CaseFailed:
        node.stop()
        raise
    return node, IDEM_TOKENS[bucket]


def idem_case(args, clients, keyed, rnd, serial):
    node, token = idem_node(args, serial)
    try:
        row = idem_run(args, node, token, clients, keyed, rnd)
        node.check()
        return row
    except CaseFailed as e:
        raise CaseFailed("%s; node %s: %s" % (e, node.name, node.tail()))
    finally:
        node.stop()


def idem_run(args, node, token, clients, keyed, rnd):
    a = node.port
    cluster = Cluster.__new__(Cluster)  # the idempotency node alone, for scrape() and cpu_all()
    cluster.nodes = {"a": node}
    tag = "%s-c%d-%d-%d" % ("keyed" if keyed else "plain", clients, rnd, int(time.time()) % 100000)
    actors = ["%s-%d" % (tag, i) for i in range(min(clients, 4))]
    path = lambda i: "/v1/actors/%s/counter/%s" % (TENANT, actors[i % len(actors)])

    def drive(seconds):
        lat, errors = [], []
        lock = threading.Lock()
        stop_at = time.time() + seconds

        def worker(c):
            cl = Client(token)
            mine, bad = [], []
            while time.time() < stop_at:
                h = {"Idempotency-Key": '"%s"' % uuid.uuid4()} if keyed else {}
                t = time.perf_counter()
                s, body = cl.request(a, "POST", path(c) + "/increment", headers=h)
                if s != 200:
                    bad.append("%s %s" % (s, body.strip()[:80]))
                    continue
                mine.append((time.perf_counter() - t) * 1000)
            with lock:
                lat.extend(mine)
                errors.extend(bad)

        ts = [threading.Thread(target=worker, args=(c,)) for c in range(clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return lat, errors

    def total():
        cl = Client(token)
        s = 0
        for i in range(len(actors)):
            st, body = cl.request(a, "GET", path(i))
            if st != 200:
                raise CaseFailed("GET %s: %s %s" % (path(i), st, body.strip()[:200]))
            s += int(body.strip())
        return s

    drive(1.0)  # warm: the actors acquired and resident
    before = total()
    m0, c0, t0 = cluster.scrape(), cpu_all(cluster), time.time()
    lat, errors = drive(args.seconds)
    m1, c1, t1 = cluster.scrape(), cpu_all(cluster), time.time()
    after = total()
    n = len(lat)
    r0, r1 = requests_by(m0["a"]), requests_by(m1["a"])
    d = lambda k: r1.get(k, 0.0) - r0.get(k, 0.0)
    sent = value(m1["a"], "wasmkeep_bucket_sent_bytes_total") - value(m0["a"], "wasmkeep_bucket_sent_bytes_total")
    row = {"case": "idem-c%d" % clients, "keyed": keyed, "round": rnd, "ok": True, "requests": n,
           "errors": len(errors), "first_errors": errors[:3], "req_s": n / (t1 - t0), "p50": pct(lat, 0.5),
           "p99": pct(lat, 0.99), "segments_per_req": d(("segment", "put")) / max(n, 1),
           "snapshots_per_req": d(("snapshot", "put")) / max(n, 1), "sent_mb": sent / 1e6,
           "cpu_a": 100.0 * (c1["a"] - c0["a"]) / os.sysconf("SC_CLK_TCK") / (t1 - t0)}
    inc = after - before
    row["check"] = "ok" if n <= inc <= n + clients else "MISMATCH: counters +%d for %d acknowledged" % (inc, n)
    return row


# --- the run ----------------------------------------------------------------------------------------
def fmt(v, f="%.1f"):
    if v is None:
        return "-"
    if v == float("inf"):
        return "> 60 s"
    return f % v


def med(rows, key):
    vs = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vs) if vs else None


def rng(rows, key, f):
    vs = sorted(r[key] for r in rows if r.get(key) is not None)
    if len(vs) < 2:
        return ""
    return " (%s–%s)" % (f % vs[0], f % vs[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wk", required=True)
    p.add_argument("--actors", required=True, help="the directory of bank.wasm and counter.wasm")
    p.add_argument("--bucket", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--rounds", type=int, default=1, help="every case this many times; the tables give medians")
    p.add_argument("--idle", type=int, default=40, help="messages of an idle-gap case")
    p.add_argument("--gap-ms", type=float, default=200)
    p.add_argument("--busy", type=int, default=1000, help="messages of a busy case")
    p.add_argument("--busy-timeout", type=float, default=120)
    p.add_argument("--gc-timeout", type=float, default=60, help="the longest wait for GC after a phase")
    p.add_argument("--conns", type=int, default=8, help="clients sending a busy case's transfers")
    p.add_argument("--seconds", type=float, default=10, help="of each idempotency case")
    p.add_argument("--background", type=float, default=5, help="seconds of an idle cluster measured first")
    p.add_argument("--idem-bucket", default="", help="the idempotency cases' bucket (default: a fresh "
                   "sqlite:// or file:// directory per case, as --bucket's scheme)")
    p.add_argument("--cases", default="one-idle,one-busy,two-idle,two-busy,idem-c1,idem-c8")
    p.add_argument("--out", default="", help="a directory for rows.json and the nodes' logs")
    args = p.parse_args()
    args.config = os.path.join(args.work, "bench.toml")
    with open(args.config, "w") as f:
        # The bench nodes' short lease (bench/common.sh), and no hibernation during the run.
        f.write("[lease]\nttl_ms = 3000\ngrace_ms = 1000\nsafety_ms = 1000\nmax_skew_ms = 500\n"
                "heartbeat_period_ms = 1000\n[actors]\nidle_hibernate_ms = 600000\n")
    cases = [c for c in args.cases.split(",") if c]
    rows = []
    cluster = Cluster(args)
    background = {}
    setup_error = None
    print("messages bench: %s, %d round(s); idle %d messages %g ms apart, busy %d messages from %d clients, "
          "idempotency %g s per case; %d cores, load %s" % (
              args.bucket.split("?")[0], args.rounds, args.idle, args.gap_ms, args.busy, args.conns, args.seconds,
              os.cpu_count(), " ".join(open("/proc/loadavg").read().split()[:3])), flush=True)
    try:
        r = cluster.cli("tenant", "add", TENANT)
        if r.returncode != 0:
            raise CaseFailed("tenant add: exit %d: %s" % (r.returncode, (r.stdout + r.stderr).strip()[-300:]))
        token = r.stdout.strip().splitlines()[-1]
        for cls, wasm in (("bank", "bank.wasm"), ("counter", "counter.wasm")):
            r = cluster.cli("deploy", "--tenant", TENANT, "--class", cls, os.path.join(args.actors, wasm))
            if r.returncode != 0:
                raise CaseFailed("deploy %s: exit %d: %s" % (wasm, r.returncode, (r.stdout + r.stderr).strip()[-300:]))
        for node in cluster.nodes.values():
            node.start()
        for node in cluster.nodes.values():
            node.wait_ready()
        client = Client(token)
        # The background: an idle cluster's request rates, per node and (purpose, op).
        time.sleep(2)
        b0, tb0 = cluster.scrape(), time.time()
        time.sleep(args.background)
        b1, tb1 = cluster.scrape(), time.time()
        for x in b1:
            r0, r1 = requests_by(b0[x]), requests_by(b1[x])
            for k in r1:
                background[(x,) + k] = (r1[k] - r0.get(k, 0.0)) / (tb1 - tb0)
    except CaseFailed as e:
        setup_error = str(e)
    except Exception as e:  # noqa: BLE001 -- the reason goes into every row
        setup_error = "%s: %s" % (type(e).__name__, e)

    disk = []
    idem_serial = 0
    for rnd in range(1, args.rounds + 1):
        disk.append(disk_probe(args.work))
        print("  round %d: disk now: %s; load average %s" % (
            rnd, disk[-1], " ".join(open("/proc/loadavg").read().split()[:3])), flush=True)
        for name in cases:
            variants = [None]
            if name.startswith("idem-c"):
                variants = [False, True] if rnd % 2 else [True, False]
            for keyed in variants:
                label = name if keyed is None else "%s %s" % (name, "keyed" if keyed else "plain")
                message = name in ("one-idle", "one-busy", "two-idle", "two-busy")
                try:
                    if message:
                        if setup_error:
                            raise CaseFailed("setup: " + setup_error)
                        cluster.check()
                        row = message_case(args, cluster, client, name, rnd, background)
                        cluster.check()
                    elif name.startswith("idem-c") and name[6:].isdigit():
                        idem_serial += 1
                        row = idem_case(args, int(name[6:]), keyed, rnd, idem_serial)
                    else:
                        raise CaseFailed("unknown case")
                except CaseFailed as e:
                    row = {"case": name, "keyed": keyed, "round": rnd, "ok": False, "why": str(e)}
                except Exception as e:  # noqa: BLE001 -- a failed case is a row saying why
                    row = {"case": name, "keyed": keyed, "round": rnd, "ok": False, "why": "%s: %s" % (type(e).__name__, e)}
                if not row["ok"] and message:
                    tails = ["node %s: not started" % n if nd.proc is None else
                             "node %s%s: %s" % (n, "" if nd.proc.poll() is None else
                                                " (exit status %d)" % nd.proc.returncode, nd.tail() or "(no log)")
                             for n, nd in cluster.nodes.items()]
                    row["why"] += "; " + "; ".join(tails)
                rows.append(row)
                print("  round %d %-16s %s" % (rnd, label, "done" if row["ok"] else "FAILED: " + row["why"]), flush=True)
    for node in cluster.nodes.values():
        node.stop()

    # --- the tables ---
    print()
    print("Messages (bank transfers of 1, sender on node a; medians of %d round(s), range in brackets):" % args.rounds)
    print()
    print("| case | receiver | messages | msgs/s | send → applied p50 / p99 ms (client) | "
          "p50 / p99 ms (metric, interpolated) | transfer answered p50 ms (a deposit's) | checks |")
    print("|---|---|---|---|---|---|---|---|")
    labels = {"one-idle": "one node, one at a time (%g ms gaps)" % args.gap_ms,
              "one-busy": "one node, busy (%d clients)" % args.conns,
              "two-idle": "two nodes, one at a time (%g ms gaps)" % args.gap_ms,
              "two-busy": "two nodes, busy (%d clients)" % args.conns}
    for name in [c for c in cases if c in labels]:
        rs = [r for r in rows if r["case"] == name]
        ok = [r for r in rs if r["ok"]]
        for r in rs:
            if not r["ok"]:
                print("| %s | | | failed (round %d): %s | | | | |" % (labels[name], r["round"], r["why"]))
        if not ok:
            continue
        checks = ", ".join(sorted(set(r["check"] for r in ok)))
        dup = sum(r["outcomes"]["duplicate"] + r["outcomes"]["unavailable"] for r in ok)
        if dup:
            checks += "; %d duplicate or unavailable deliveries" % dup
        print("| %s | node %s | %d | %s%s | %s / %s | %s / %s | %s | %s |" % (
            labels[name], ok[0]["receiver_node"], ok[0]["messages"], fmt(med(ok, "msgs_s"), "%.0f"),
            rng(ok, "msgs_s", "%.0f"), fmt(med(ok, "client_p50")), fmt(med(ok, "client_p99")),
            fmt(med(ok, "metric_p50")), fmt(med(ok, "metric_p99")), fmt(med(ok, "ack_p50")) +
            (" (%s)" % fmt(med(ok, "deposit_p50")) if med(ok, "deposit_p50") is not None else ""), checks))
    busy = [r for r in rows if r["ok"] and r["case"].endswith("-busy")]
    if busy:
        print()
        print("busy cases, per round: transfers answered per second (the sending rate), messages applied per "
              "second; node CPU % a / b while sending and applying (of one core); the mean segment PUT a / b "
              "(wasmkeep_replica_upload_seconds, over the phase):")
        for r in busy:
            print("  round %d %s: sent %.0f/s, delivered %.0f/s; CPU %.0f / %.0f %%; segment PUT %s / %s ms" % (
                r["round"], r["case"], r["sends_s"], r["msgs_s"], r["cpu"]["a"], r["cpu"]["b"],
                fmt(r["upload_ms"].get("a"), "%.2f"), fmt(r["upload_ms"].get("b"), "%.2f")))

    msg_rows = [r for r in rows if r["ok"] and r["case"] in labels]
    if msg_rows:
        print()
        print("Bucket requests per message delivered, by purpose and operation (every outcome; the idle "
              "cluster's background subtracted; two nodes: total = node a + node b; medians):")
        print()
        names = [c for c in cases if c in labels and any(r["case"] == c for r in msg_rows)]
        keys = set()
        for r in msg_rows:
            for k, v in r["per_message"].items():
                if abs(v) >= 0.005:
                    keys.add(tuple(k.split("/")[1:]))
        print("| purpose | op | " + " | ".join(labels[c] for c in names) + " |")
        print("|---|---|" + "---|" * len(names))
        for purpose, op in sorted(keys):
            cells = []
            for c in names:
                rs = [r for r in msg_rows if r["case"] == c]
                per_node = {x: statistics.median(r["per_message"].get("%s/%s/%s" % (x, purpose, op), 0.0) for r in rs)
                            for x in ("a", "b")}
                tot = statistics.median(sum(r["per_message"].get("%s/%s/%s" % (x, purpose, op), 0.0) for x in "ab")
                                        for r in rs)
                cell = "%.2f" % tot
                if c.startswith("two"):
                    cell += " (%.2f + %.2f)" % (per_node["a"], per_node["b"])
                cells.append(cell)
            print("| %s | %s | %s |" % (purpose, op, " | ".join(cells)))
        bg = {}
        for (x, purpose, op), v in background.items():
            if v:
                bg.setdefault("%s %s" % (purpose, op), 0.0)
                bg["%s %s" % (purpose, op)] += v
        print()
        # The clock-driven requests over every message phase (the shard scans come in bursts
        # every alarms.scan_period_ms, which a short idle window may miss).
        driven, seconds = {}, sum(r["seconds"] for r in msg_rows)
        for r in msg_rows:
            for k, v in r["raw"].items():
                purpose, op = k.split("/")[1:]
                if time_driven(purpose, op):
                    driven["%s %s" % (purpose, op)] = driven.get("%s %s" % (purpose, op), 0.0) + v
        print("requests by the clock, both nodes, per second over the message phases (left out of the table: "
              "they do not depend on the messages): " +
              ", ".join("%s %.2f" % (k, v / seconds) for k, v in sorted(driven.items())))
        other = [(k, v) for k, v in sorted(bg.items()) if not time_driven(*k.split(" ", 1))]
        print("other requests of the idle cluster, per second (subtracted above): " +
              (", ".join("%s %.2f" % kv for kv in other) or "none"))
        notes = sorted(set("%s: %s" % (r["case"], r["gc"]) for r in msg_rows if "still" in r["gc"]))
        if notes:
            print("garbage collection: " + "; ".join(notes))

    idem = [r for r in rows if r["case"].startswith("idem-c")]
    if idem:
        print()
        print("Idempotency-Key on POST /increment (counter, one node on a fresh bucket per case, %g s per case; medians):" % args.seconds)
        print()
        print("| clients | key | req/s | p50 ms | p99 ms | errors | segment PUTs / req | snapshot PUTs / req "
              "| MB sent to the bucket | node CPU % | checks |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for c in [x for x in cases if x.startswith("idem-c")]:
            for keyed in (False, True):
                rs = [r for r in idem if r["case"] == c and r["keyed"] == keyed]
                ok = [r for r in rs if r["ok"]]
                what = "fresh each" if keyed else "none"
                for r in rs:
                    if not r["ok"]:
                        print("| %s | %s | failed (round %d): %s | | | | | | | | |" % (c[6:], what, r["round"], r["why"]))
                if ok:
                    print("| %s | %s | %s%s | %s | %s | %d | %.3f | %.4f | %.1f | %.0f | %s |" % (
                        c[6:], what, fmt(med(ok, "req_s"), "%.0f"), rng(ok, "req_s", "%.0f"), fmt(med(ok, "p50"), "%.2f"),
                        fmt(med(ok, "p99"), "%.2f"), sum(r["errors"] for r in ok), med(ok, "segments_per_req"),
                        med(ok, "snapshots_per_req"), med(ok, "sent_mb"), med(ok, "cpu_a"),
                        ", ".join(sorted(set(r["check"] for r in ok)))))
            pl = [r for r in idem if r["case"] == c and r["ok"] and not r["keyed"]]
            ky = [r for r in idem if r["case"] == c and r["ok"] and r["keyed"]]
            if pl and ky:
                print("| %s | keyed / none | %.2f× | %.2f× | %.2f× | | | | | | |" % (
                    c[6:], med(ky, "req_s") / med(pl, "req_s"), med(ky, "p50") / med(pl, "p50"),
                    med(ky, "p99") / med(pl, "p99")))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "rows.json"), "w") as f:
            json.dump({"rows": rows, "background": {"/".join(k): v for k, v in background.items()}}, f, indent=1)
        for log in os.listdir(args.work):
            if log.endswith(".log"):
                with open(os.path.join(args.work, log)) as src, open(os.path.join(args.out, log), "w") as dst:
                    dst.write(src.read())
    failed = [r for r in rows if not r["ok"]]
    for r in failed:
        if r["case"] not in labels and not r["case"].startswith("idem-c"):
            print()
            print("case %s (round %d): %s" % (r["case"], r["round"], r["why"]))
    print()
    print("disk of the scratch directory (4 KiB write + fsync for 1 s): before each round: %s; at the end: %s" % (
        "; ".join(disk), disk_probe(args.work)))
    print("%d of %d cases failed" % (len(failed), len(rows)) if failed else "every case ran (%d)" % len(rows))
    return 1 if failed or setup_error else 0


if __name__ == "__main__":
    sys.exit(main())
