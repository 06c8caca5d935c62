#!/usr/bin/env python3
"""The client side of bench/alarms_bench.sh: one system (WasmKeep's nodes, or workerd) at a
time, the same workload, a JSON summary.

  alarms_bench.py --system NAME --ports P1[,P2,...] --token TOKEN --tenant T --actors N
                  --runs R --out FILE [--metrics]

Actor i (`probe/a<i>`) is reached through port i mod len(ports). Every actor is started
(one GET), then its alarm is set to T0 + (i mod 100) ms with `rearm=100&count=R-1`: each run
of the handler re-arms it 100 ms after it ran, so N x R alarms come due between T0 and about
T0 + 1 s. T0 leaves room for the sets: twice the warm-up, at least 8 s. Then the run is
waited out: with --metrics (WasmKeep) until the nodes' wasmkeep_alarms_fired_total says
every alarm ran, or it stood still for 10 s; without (workerd, no such counter), from 2 s
after the last due time, by reading the logs of the actors not yet done every 2 s until all
are, or none moved for 10 s. Last, every actor's log (its durable state): lateness is the
handler's clock at its run minus the alarm's time.
"""

import argparse
import http.client
import json
import queue
import sys
import threading
import time

SERIES = {
    "segment PUTs": "wasmkeep_replica_segments_total",
    "snapshot PUTs": "wasmkeep_replica_snapshots_total",
    "GC DELETEs": "wasmkeep_replica_gc_deleted_total",
    "index entry PUTs": 'wasmkeep_alarms_index_requests_total{op="put"}',
    "index entry DELETEs": 'wasmkeep_alarms_index_requests_total{op="delete"}',
    "index prefix LISTs": 'wasmkeep_alarms_index_requests_total{op="list"}',
    "shard scan LISTs": "wasmkeep_alarms_scans_total",
}
FIRED = "wasmkeep_alarms_fired_total"


class Client:
    """One keep-alive connection per port, per thread."""

    def __init__(self, ports, token):
        self.ports = ports
        self.token = token
        self.local = threading.local()

    def conn(self, port):
        conns = getattr(self.local, "conns", None)
        if conns is None:
            conns = self.local.conns = {}
        if port not in conns:
            conns[port] = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        return conns[port]

    def request(self, port, method, path, auth=True):
        for attempt in range(3):
            c = self.conn(port)
            try:
                headers = {"Authorization": "Bearer " + self.token} if auth else {}
                c.request(method, path, headers=headers)
                r = c.getresponse()
                return r.status, r.read().decode("utf-8", "replace")
            except (OSError, http.client.HTTPException):
                c.close()
                del self.local.conns[port]
                if attempt == 2:
                    return None, ""
                time.sleep(0.2)


def parallel(fn, items, threads=16):
    q = queue.Queue()
    for it in items:
        q.put(it)
    out = {}
    lock = threading.Lock()

    def work():
        while True:
            try:
                it = q.get_nowait()
            except queue.Empty:
                return
            r = fn(it)
            with lock:
                out[it] = r
    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def metrics(client, names):
    tot = {n: 0.0 for n in names}
    for port in client.ports:
        status, text = client.request(port, "GET", "/metrics", auth=False)
        if status != 200:
            continue
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) == 2 and parts[0] in tot:
                tot[parts[0]] += float(parts[1])
    return tot


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--system", required=True)
    p.add_argument("--ports", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--tenant", default="bench")
    p.add_argument("--actors", type=int, default=1000)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--metrics", action="store_true")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    client = Client([int(x) for x in a.ports.split(",")], a.token)
    port_of = lambda i: client.ports[i % len(client.ports)]
    path_of = lambda i: f"/v1/actors/{a.tenant}/probe/a{i}"
    ids = list(range(a.actors))
    want = a.actors * a.runs

    t = time.time()
    warm = parallel(lambda i: client.request(port_of(i), "GET", path_of(i))[0], ids)
    warm_s = time.time() - t
    bad = sum(1 for v in warm.values() if v != 200)
    print(f"  {a.system}: {a.actors} actors started in {warm_s * 1000:.0f} ms ({bad} failed)", flush=True)
    t0 = int((time.time() + max(2 * warm_s, 8.0)) * 1000)
    before = metrics(client, list(SERIES.values()) + [FIRED]) if a.metrics else None
    t = time.time()
    sets = parallel(lambda i: client.request(
        port_of(i), "POST", f"{path_of(i)}/set?t={t0 + i % 100}&rearm=100&count={a.runs - 1}")[0], ids)
    set_s = time.time() - t
    bad = sum(1 for v in sets.values() if v != 200)
    print(f"  {a.system}: {a.actors} alarms set in {set_s * 1000:.0f} ms ({bad} failed); "
          f"the first due {t0 - time.time() * 1000:.0f} ms later", flush=True)
    if bad:
        print(f"  {a.system}: sets failed; stopping", file=sys.stderr)
        return 1
    time.sleep(max(0.0, t0 / 1000 - time.time()) + 1.0)

    def parse(log):
        fires = []
        for op in log.strip().split(","):
            if op.startswith("f"):
                due, retry, now = op[1:].split(":")
                fires.append((int(due), int(retry), int(now)))
        return fires

    logs = {}
    if a.metrics:
        last, still = -1, 0
        while still < 10:
            fired = metrics(client, [FIRED])[FIRED] - before[FIRED]
            if fired >= want:
                break
            if fired == last:
                still += 1
            else:
                still, last = 0, fired
            time.sleep(1)
    else:
        time.sleep(1.0)
        todo, last_done, still = set(ids), -1, 0
        while todo and still < 5:
            got = parallel(lambda i: client.request(port_of(i), "GET", path_of(i)), sorted(todo))
            for i, (status, body) in got.items():
                if status == 200:
                    logs[i] = body
                    if len(parse(body)) >= a.runs:
                        todo.discard(i)
            done = a.actors - len(todo)
            if done == last_done:
                still += 1
            else:
                still, last_done = 0, done
            if todo:
                time.sleep(2)
    after = metrics(client, list(SERIES.values()) + [FIRED]) if a.metrics else None
    missing = [i for i in ids if i not in logs or len(parse(logs[i])) < a.runs]
    got = parallel(lambda i: client.request(port_of(i), "GET", path_of(i)), missing)
    for i, (status, body) in got.items():
        if status == 200:
            logs[i] = body
    late, first_late, fires, early, retries = [], [], [], 0, 0
    by_run = [[] for _ in range(a.runs)]
    for i in ids:
        f = parse(logs.get(i, ""))
        for k, (due, retry, now) in enumerate(f):
            late.append(now - due)
            if k == 0:
                first_late.append(now - due)
            if k < a.runs:
                by_run[k].append(now - due)
            fires.append(now)
            early += 1 if now < due else 0
            retries += 1 if retry else 0

    def pct(v, q):
        v = sorted(v)
        return v[min(len(v) - 1, int(q * len(v)))] if v else None
    span = (max(fires) - t0) / 1000 if fires else None
    out = {"system": a.system, "actors": a.actors, "runs": a.runs, "alarms": want, "fired": len(late),
           "early": early, "retries": retries, "warm_ms": round(warm_s * 1000), "set_ms": round(set_s * 1000),
           "lateness_ms": {"p50": pct(late, 0.5), "p99": pct(late, 0.99), "max": max(late) if late else None},
           "first_run_lateness_ms": {"p50": pct(first_late, 0.5), "p99": pct(first_late, 0.99),
                                     "max": max(first_late) if first_late else None},
           "span_s": span, "fired_per_s": round(len(late) / span, 1) if span else None,
           # Where the tail comes from: lateness by the run's place in its actor's chain (the
           # first is the set's, the others re-arms), and runs in each 10 s after T0.
           "lateness_by_run_ms": [{"run": k + 1, "n": len(v), "p50": pct(v, 0.5), "p99": pct(v, 0.99),
                                   "max": max(v) if v else None} for k, v in enumerate(by_run)],
           "fired_per_10s": [sum(1 for x in fires if b * 10000 <= x - t0 < (b + 1) * 10000)
                             for b in range(int(span // 10) + 1)] if span else []}
    if a.metrics:
        n = max(after[FIRED] - before[FIRED], 1)
        out["fired_counter"] = int(after[FIRED] - before[FIRED])
        out["requests_per_alarm"] = {k: {"count": int(after[s] - before[s]), "per_alarm": round((after[s] - before[s]) / n, 3)}
                                     for k, s in SERIES.items()}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=2)
    print(f"  {a.system}: fired {len(late)} of {want} (durable logs), early {early}, "
          f"lateness p50 {out['lateness_ms']['p50']} ms p99 {out['lateness_ms']['p99']} ms, "
          f"{out['fired_per_s']} a second", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
