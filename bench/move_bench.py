#!/usr/bin/env python3
"""How long an actor is not writable while it moves (bench/move_bench.sh drives it).

    move_bench.py --wk BIN --config FILE --bucket URL --nodes a=HOST:PORT,b=HOST:PORT
                  --token T [--moves 100] [--actors 200] [--workers 8]

A probe writer sends increments to acme/counter/probe back to back through node a (node a
forwards them while the probe lives on b), while background workers keep a write load on
`--actors` other counters through both nodes. The probe is moved between a and b `--moves`
times with `wasmkeep actor move` (one after the other, 0.5 s apart). For each move, the time
the probe was not writable is the longest gap between two consecutive acknowledged
increments whose answers came between the command's start and one second after it
returned: it covers the close on the source, the release, the target's acquisition and
restore, and the requests held or forwarded meanwhile. The normal gap between two
increments (a few ms) is part of it, as it would be for a client. Requests answered other
than 200 (none expected) are counted.

Prints the p50, p99 and max over the moves, the probe's refused requests, and the load's.
"""
import argparse
import os
import subprocess
import sys
import threading
import time


# One request on a keep-alive connection, retried once on a dropped connection: the
# cluster tests' load generator's (tests/cluster/load.py), so both count answers alike.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "cluster"))
from load import request  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wk", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--bucket", required=True)
    p.add_argument("--nodes", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--moves", type=int, default=100)
    p.add_argument("--actors", type=int, default=200)
    p.add_argument("--workers", type=int, default=8)
    args = p.parse_args()
    names = {}
    for part in args.nodes.split(","):
        name, addr = part.split("=")
        names[name] = addr
    node_a, node_b = names["a"], names["b"]
    stop = threading.Event()
    acked = []  # completion times of the probe's acknowledged increments
    probe_refused = []
    load_counts = {"ok": 0, "refused": 0}
    lock = threading.Lock()

    def probe():
        conns = {}
        while not stop.is_set():
            status, body = request(conns, node_a, "POST", "/v1/actors/acme/counter/probe/increment", args.token)
            t = time.time()
            if status == 200:
                acked.append(t)
            else:
                probe_refused.append((t, status, body.strip()[:120]))

    def load(w):
        conns = {}
        k = 0
        nodes = [node_a, node_b]
        while not stop.is_set():
            for i in range(w, args.actors, args.workers):
                if stop.is_set():
                    break
                status, _ = request(conns, nodes[k % 2], "POST", "/v1/actors/acme/counter/bg%d/increment" % i, args.token)
                k += 1
                with lock:
                    load_counts["ok" if status == 200 else "refused"] += 1

    wk = [args.wk, "--config", args.config, "--bucket", args.bucket]

    def holder():
        out = subprocess.run(wk + ["bucket", "get", "owners/acme/counter/probe"], capture_output=True, text=True)
        for line in out.stdout.splitlines():
            if line.startswith("owner "):
                return line.split()[1]
        return None

    threads = [threading.Thread(target=probe)] + [threading.Thread(target=load, args=(w,)) for w in range(args.workers)]
    for t in threads:
        t.start()
    time.sleep(3)
    windows = []
    failures = 0
    for i in range(args.moves):
        current = holder()
        to = "a" if current == "b" else "b"
        t0 = time.time()
        r = subprocess.run(wk + ["actor", "move", "acme/counter/probe", "--to", to, "--wait", "30"],
                           capture_output=True, text=True)
        t1 = time.time()
        if r.returncode != 0:
            failures += 1
            sys.stderr.write("move %d: exit %d: %s%s" % (i, r.returncode, r.stdout, r.stderr))
        windows.append((t0, t1))
        time.sleep(0.5)
    time.sleep(1)
    stop.set()
    for t in threads:
        t.join()

    gaps = []
    for t0, t1 in windows:
        inside = [t for t in acked if t0 <= t <= t1 + 1.0]
        before = [t for t in acked if t < t0]
        if before:
            inside.insert(0, before[-1])
        g = max((b - a for a, b in zip(inside, inside[1:])), default=float("nan"))
        gaps.append(g * 1000)
    if os.environ.get("MOVE_BENCH_VERBOSE"):
        for (t0, t1), g in zip(windows, gaps):
            print("  move at %.3f (command %.0f ms): not writable %.0f ms" % (t0, (t1 - t0) * 1000, g))
    gaps.sort()

    def pct(q):
        return gaps[min(len(gaps) - 1, int(q * len(gaps)))]

    print("moves: %d (%d failed); probe increments acknowledged: %d, refused: %d; load: %d acknowledged, %d refused" %
          (len(windows), failures, len(acked), len(probe_refused), load_counts["ok"], load_counts["refused"]))
    print("not writable during a move: p50 %.0f ms, p99 %.0f ms, max %.0f ms (min %.0f ms)" %
          (pct(0.5), pct(0.99), gaps[-1], gaps[0]))
    for t, status, body in probe_refused[:5]:
        print("  probe refused: %s %s" % (status, body))
    return 0 if failures == 0 and not probe_refused else 1


if __name__ == "__main__":
    sys.exit(main())
