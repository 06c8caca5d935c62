#!/usr/bin/env python3
"""What one tenant's load does to another's latency, and what an Idempotency-Key costs, on
one `wasmkeep serve` node (sqlite:// bucket), each case side by side in one run
(docs/benchmarks.md, "Tenants side by side"). Every case is a row of the table, a failed one
included, with the reason.

    bench/tenant_isolation_bench.py [--build build/release] [--seconds 15] [--storm-actors 20]
                                    [--out DIR]

Cases (each on a fresh node and bucket):
  alone        tenant B's counter, 1 client, one request at a time: p50, p99, req/s;
  storm        the same while tenant A's --storm-actors alarm actors
               (examples/testdata/alarm_probe.cc) re-arm their alarms 1 ms after each run,
               with the default alarm limits (alarms.min_interval_ms 1000,
               max_events_per_second 500);
  storm-unlimited  the same storm with the limits out of the way (min_interval_ms 0,
               max_events_per_second 100000): what the limits buy;
  keyed-c1 / plain-c1, keyed-c8 / plain-c8   tenant B's increments with a fresh
               Idempotency-Key each, against none, at 1 and 8 clients (the key's overhead).
Besides B's figures: the alarm events run per second (wasmkeep_alarms_* from /metrics), the
bytes the bucket holds after the case, the node's CPU share.
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
            now = int(time.time() * 1000)
            for i in range(args.storm_actors):
                s, body = call(node.port, "POST", "/v1/actors/a/storm/s%d/set?t=%d&rearm=1&count=100000000" % (i, now),
                               ta)
                if s != 200:
                    raise RuntimeError("storm actor s%d: %d %s" % (i, s, body[:100]))
            time.sleep(2)  # the storm under way
        m0, c0, t0 = metrics(node.port), cpu_ticks(node.proc.pid), time.time()
        lat, errors = drive(node.port, tb, args.seconds, clients, keyed)
        m1, c1, t1 = metrics(node.port), cpu_ticks(node.proc.pid), time.time()
        runs = sum_prefix(m1, "wasmkeep_alarms_fired_total") - sum_prefix(m0, "wasmkeep_alarms_fired_total")
        held = sum_prefix(m1, "wasmkeep_alarms_held_total") - sum_prefix(m0, "wasmkeep_alarms_held_total")
        row.update({
            "ok": True, "requests": len(lat), "errors": len(errors), "req_s": len(lat) / (t1 - t0),
            "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99), "alarm_events_s": runs / (t1 - t0),
            "alarm_held_s": held / (t1 - t0), "cpu_pct": 100.0 * (c1 - c0) / os.sysconf("SC_CLK_TCK") / (t1 - t0),
            "bucket_mb": dir_bytes(os.path.join(work, "bucket")) / 1e6,
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
    p.add_argument("--cases", default="alone,storm,storm-unlimited,plain-c1,keyed-c1,plain-c8,keyed-c8")
    p.add_argument("--out", default="")
    args = p.parse_args()
    args.wk = os.path.join(args.build, "src/cli/wasmkeep")
    args.actors = os.path.join(args.build, "actors")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    lifted = "[alarms]\nmin_interval_ms = 0\nmax_events_per_second = 100000\n"
    cases = {
        "alone": ("", False, 1, False),
        "storm": ("", True, 1, False),
        "storm-unlimited": (lifted, True, 1, False),
        "plain-c1": ("", False, 1, False),
        "keyed-c1": ("", False, 1, True),
        "plain-c8": ("", False, 8, False),
        "keyed-c8": ("", False, 8, True),
    }
    print("tenant isolation bench: build %s, %ss per case, %d storm actors, %d cores, load %s" %
          (args.build, args.seconds, args.storm_actors, os.cpu_count(), open("/proc/loadavg").read().split()[0]))
    rows = []
    for name in args.cases.split(","):
        if name not in cases:
            rows.append({"case": name, "ok": False, "why": "unknown case"})
            continue
        extra, storm, clients, keyed = cases[name]
        rows.append(run_case(args, name, extra, storm, clients, keyed))
        r = rows[-1]
        print("  %-16s %s" % (name, "done" if r.get("ok") else "FAILED: " + r.get("why", "")), flush=True)
    print()
    print("| case | B req/s | B p50 ms | B p99 ms | B errors | alarm events/s run | held by the limits/s | node CPU % | bucket MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if not r.get("ok"):
            print("| %s | failed: %s | | | | | | | |" % (r["case"], r.get("why", "?")))
            continue
        print("| %s | %.0f | %.2f | %.2f | %d | %.0f | %.0f | %.0f | %.1f |" % (
            r["case"], r["req_s"], r["p50_ms"], r["p99_ms"], r["errors"], r["alarm_events_s"], r["alarm_held_s"],
            r["cpu_pct"], r["bucket_mb"]))
    by = {r["case"]: r for r in rows if r.get("ok")}
    if "alone" in by and "storm" in by:
        print("\nB's p99 with the storm / alone: %.1fx (default limits)" % (by["storm"]["p99_ms"] / by["alone"]["p99_ms"]))
    if "alone" in by and "storm-unlimited" in by:
        print("B's p99 with the unlimited storm / alone: %.1fx" % (by["storm-unlimited"]["p99_ms"] / by["alone"]["p99_ms"]))
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
