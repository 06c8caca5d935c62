#!/usr/bin/env python3
"""What one tenant's load does to another's latency, and what an Idempotency-Key costs, on
one `wasmkeep serve` node (sqlite:// bucket), each case side by side in one run
(docs/benchmarks.md, "Tenants side by side"). Every case is a row of the table, a failed one
included, with the reason.

    bench/tenant_isolation_bench.py [--build build/release] [--seconds 15] [--storm-actors 20]
                                    [--wide-actors 1000] [--cases a,b,...] [--out DIR]

Cases (each on a fresh node and bucket):
  alone        tenant B's counter, 1 client, one request at a time: p50, p99, req/s;
  storm        the same while tenant A's --storm-actors alarm actors
               (examples/testdata/alarm_probe.cc) re-arm their alarms 1 ms after each run,
               with the default alarm limits (alarms.min_interval_ms 1000,
               max_events_per_second 500);
  storm-wide   the same with --wide-actors storm actors (default 1,000), default limits: more
               than the node's max_events_per_second ask each second, so the node's rate
               gate (not only the per-actor interval) is what holds the storm; the worst a
               storm can do at the default limits;
  storm-unlimited  the same 20-actor storm with the limits out of the way (min_interval_ms 0,
               max_events_per_second 100000): what the limits buy;
  storm-wide-unlimited  the wide storm with the limits lifted: what the node's rate gate buys;
  keyed-c1 / plain-c1, keyed-c8 / plain-c8   tenant B's increments with a fresh
               Idempotency-Key each, against none, at 1 and 8 clients (the key's overhead);
               plain-c1 is alone's load again, so the storms' factors are also given
               against it (the spread of the two is the machine's noise).
Besides B's figures, over the measured seconds: the alarm events run per second
(wasmkeep_alarms_fired_total from /metrics) and those held by the limits
(wasmkeep_alarms_held_total), the bytes the node sent to the bucket
(wasmkeep_bucket_sent_bytes_total), the node's CPU share (of one core); and the bytes the
bucket's file holds after the case.
Standard library only.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def call(port, method, path, token, headers=None, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Authorization": "Bearer " + token}
        h.update(headers or {})
        conn.request(method, path, headers=h)
        r = conn.getresponse()
        return r.status, r.read().decode(errors="replace")
    finally:
        conn.close()


def metrics(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/metrics")
    out = {}
    for line in conn.getresponse().read().decode().splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        try:
            out[name] = out.get(name, 0) + float(value)
        except ValueError:
            pass
    conn.close()
    return out


def sum_prefix(m, prefix):
    return sum(v for k, v in m.items() if k.startswith(prefix))


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return int(parts[11]) + int(parts[12])


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


class Node:
    def __init__(self, wk, work, extra_toml):
        self.wk, self.work = wk, work
        self.port = free_port()
        self.bucket = "sqlite://" + os.path.join(work, "bucket")
        self.config = os.path.join(work, "node.toml")
        with open(self.config, "w") as f:
            f.write("[lease]\nttl_ms = 3000\ngrace_ms = 1000\nsafety_ms = 1000\nmax_skew_ms = 500\n"
                    "heartbeat_period_ms = 1000\n" + extra_toml)
        self.proc = None

    def cli(self, *args):
        return subprocess.run([self.wk, "--config", self.config, "--bucket", self.bucket] + list(args),
                              capture_output=True, text=True, timeout=60)

    def start(self):
        self.log = open(os.path.join(self.work, "node.log"), "w")
        self.proc = subprocess.Popen([self.wk, "--config", self.config, "--bucket", self.bucket, "serve",
                                      "--node-id", "bench", "--listen", "127.0.0.1:%d" % self.port],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("the node exited with status %d: %s" % (self.proc.returncode, self.tail()))
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                conn.request("GET", "/readyz")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the node was not ready within 30 s: " + self.tail())

    def tail(self):
        try:
            with open(os.path.join(self.work, "node.log")) as f:
                return " | ".join(f.read().splitlines()[-3:])
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


def drive(port, token, seconds, clients, keyed):
    """Tenant B's increments from `clients` threads for `seconds`: latencies (ms), errors."""
    lat, errors = [], []
    lock = threading.Lock()
    stop_at = time.time() + seconds

    def client(c):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        mine, bad = [], []
        while time.time() < stop_at:
            headers = {"Authorization": "Bearer " + token}
            if keyed:
                headers["Idempotency-Key"] = '"%s"' % uuid.uuid4()
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/v1/actors/b/counter/hot%d/increment" % (c % 4), headers=headers)
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    bad.append(r.status)
            except (OSError, http.client.HTTPException) as e:
                bad.append(type(e).__name__)
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                continue
            mine.append((time.perf_counter() - t0) * 1000)
        with lock:
            lat.extend(mine)
            errors.extend(bad)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, errors


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def set_storm(port, token, actors):
    """Tenant A's storm: `actors` alarm actors, each set due now and re-arming 1 ms after each
    run (for ever, as far as the case goes); the sets from 8 threads. Raises on a failed set."""
    now = int(time.time() * 1000)
    failed = []
    lock = threading.Lock()

    def setter(k):
        for i in range(k, actors, 8):
            try:
                s, body = call(port, "POST", "/v1/actors/a/storm/s%d/set?t=%d&rearm=1&count=100000000" % (i, now),
                               token)
            except (OSError, http.client.HTTPException) as e:
                s, body = type(e).__name__, str(e)
            if s != 200:
                with lock:
                    failed.append("s%d: %s %s" % (i, s, body[:100]))

    threads = [threading.Thread(target=setter, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise RuntimeError("%d of %d storm sets failed, first %s" % (len(failed), actors, failed[0]))


def run_case(args, name, extra_toml, storm, clients, keyed):
    work = tempfile.mkdtemp(prefix="wasmkeep-tenant-bench-")
    node = Node(args.wk, work, extra_toml)
    row = {"case": name}
    try:
        for t in ("a", "b"):
            r = node.cli("tenant", "add", t)
            if r.returncode != 0:
                raise RuntimeError("tenant add %s: %s" % (t, r.stderr.strip()[-200:]))
            row["token_" + t] = r.stdout.strip().splitlines()[-1]
        for t, cls, wasm in (("b", "counter", "counter.wasm"), ("a", "storm", "alarm_probe.wasm")):
            r = node.cli("deploy", "--tenant", t, "--class", cls, os.path.join(args.actors, wasm))
            if r.returncode != 0:
                raise RuntimeError("deploy %s: %s" % (wasm, r.stderr.strip()[-200:]))
        node.start()
        tb, ta = row.pop("token_b"), row.pop("token_a")
        drive(node.port, tb, 1.5, clients, keyed)  # warm: the actors resident, the class compiled
        if storm:
            set_storm(node.port, ta, storm)
            time.sleep(2)  # the storm under way
        m0, c0, t0 = metrics(node.port), cpu_ticks(node.proc.pid), time.time()
        lat, errors = drive(node.port, tb, args.seconds, clients, keyed)
        m1, c1, t1 = metrics(node.port), cpu_ticks(node.proc.pid), time.time()
        runs = sum_prefix(m1, "wasmkeep_alarms_fired_total") - sum_prefix(m0, "wasmkeep_alarms_fired_total")
        held = sum_prefix(m1, "wasmkeep_alarms_held_total") - sum_prefix(m0, "wasmkeep_alarms_held_total")
        sent = sum_prefix(m1, "wasmkeep_bucket_sent_bytes_total") - sum_prefix(m0, "wasmkeep_bucket_sent_bytes_total")
        if node.proc.poll() is not None:
            raise RuntimeError("the node exited with status %d during the case: %s" % (node.proc.returncode, node.tail()))
        row.update({
            "ok": True, "requests": len(lat), "errors": len(errors), "req_s": len(lat) / (t1 - t0),
            "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99), "alarm_events_s": runs / (t1 - t0),
            "alarm_held_s": held / (t1 - t0), "cpu_pct": 100.0 * (c1 - c0) / os.sysconf("SC_CLK_TCK") / (t1 - t0),
            "sent_mb": sent / 1e6, "bucket_mb": dir_bytes(os.path.join(work, "bucket")) / 1e6,
        })
        if errors:
            row["first_errors"] = errors[:3]
    except Exception as e:  # a failed case is a row saying why
        row.update({"ok": False, "why": "%s: %s" % (type(e).__name__, e)})
    finally:
        node.stop()
        if node.proc is not None and node.proc.returncode not in (0, None, -15):
            row.setdefault("note", "node exit status %s" % node.proc.returncode)
        if args.out:
            shutil.copy(os.path.join(work, "node.log"), os.path.join(args.out, name + ".log")) \
                if os.path.exists(os.path.join(work, "node.log")) else None
        shutil.rmtree(work, ignore_errors=True)
    return row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build/release")
    p.add_argument("--seconds", type=float, default=15)
    p.add_argument("--storm-actors", type=int, default=20)
    p.add_argument("--wide-actors", type=int, default=1000)
    p.add_argument("--cases", default="alone,storm,storm-wide,storm-unlimited,storm-wide-unlimited,plain-c1,keyed-c1,plain-c8,keyed-c8")
    p.add_argument("--out", default="")
    args = p.parse_args()
    args.wk = os.path.join(args.build, "src/cli/wasmkeep")
    args.actors = os.path.join(args.build, "actors")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    lifted = "[alarms]\nmin_interval_ms = 0\nmax_events_per_second = 100000\n"
    cases = {
        "alone": ("", 0, 1, False),
        "storm": ("", args.storm_actors, 1, False),
        "storm-wide": ("", args.wide_actors, 1, False),
        "storm-unlimited": (lifted, args.storm_actors, 1, False),
        "storm-wide-unlimited": (lifted, args.wide_actors, 1, False),
        "plain-c1": ("", 0, 1, False),
        "keyed-c1": ("", 0, 1, True),
        "plain-c8": ("", 0, 8, False),
        "keyed-c8": ("", 0, 8, True),
    }
    print("tenant isolation bench: build %s, %ss per case, %d storm actors (wide: %d), %d cores, load %s" %
          (args.build, args.seconds, args.storm_actors, args.wide_actors, os.cpu_count(),
           open("/proc/loadavg").read().split()[0]))
    rows = []
    for name in args.cases.split(","):
        if name not in cases:
            rows.append({"case": name, "ok": False, "why": "unknown case"})
            continue
        extra, storm, clients, keyed = cases[name]  # storm: tenant A's alarm actors (0: none)
        rows.append(run_case(args, name, extra, storm, clients, keyed))
        r = rows[-1]
        print("  %-20s %s" % (name, "done" if r.get("ok") else "FAILED: " + r.get("why", "")), flush=True)
    print()
    print("| case | B req/s | B p50 ms | B p99 ms | B errors | alarm events/s run | held by the limits/s "
          "| node CPU % | MB sent to the bucket | bucket files MB after (SQLite + WAL) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if not r.get("ok"):
            print("| %s | failed: %s | | | | | | | | |" % (r["case"], r.get("why", "?")))
            continue
        print("| %s | %.0f | %.2f | %.2f | %d%s | %.0f | %.0f | %.0f | %.1f | %.1f |" % (
            r["case"], r["req_s"], r["p50_ms"], r["p99_ms"], r["errors"],
            " (%s)" % ", ".join(map(str, r["first_errors"])) if r.get("first_errors") else "",
            r["alarm_events_s"], r["alarm_held_s"], r["cpu_pct"], r["sent_mb"], r["bucket_mb"]))
    by = {r["case"]: r for r in rows if r.get("ok")}
    if "alone" in by:
        print()
        for case, what in (("storm", "%d actors, default limits" % args.storm_actors),
                           ("storm-wide", "%d actors, default limits" % args.wide_actors),
                           ("storm-unlimited", "%d actors, limits lifted" % args.storm_actors),
                           ("storm-wide-unlimited", "%d actors, limits lifted" % args.wide_actors)):
            if case in by:
                # plain-c1 is alone's load again, later in the run: on a shared machine the
                # two differ by the noise, and the factor is given against both.
                again = (", %.1fx against plain-c1" % (by[case]["p99_ms"] / by["plain-c1"]["p99_ms"])
                         if "plain-c1" in by else "")
                print("B's p99 with the %s / alone: %.1fx%s (%s)" % (
                    case, by[case]["p99_ms"] / by["alone"]["p99_ms"], again, what))
    for c in ("c1", "c8"):
        if "plain-" + c in by and "keyed-" + c in by:
            k, pl = by["keyed-" + c], by["plain-" + c]
            print("Idempotency-Key at %s: req/s %.0f vs %.0f (%.0f%%), p50 %.2f vs %.2f ms" % (
                c, k["req_s"], pl["req_s"], 100.0 * (k["req_s"] / pl["req_s"] - 1), k["p50_ms"], pl["p50_ms"]))
    if args.out:
        with open(os.path.join(args.out, "rows.json"), "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
