#!/usr/bin/env python3
"""A steady write load on counter actors through real nodes, for the drain, move and
sleeping-holds tests (tests/cluster/drain_test.sh, move_test.sh, sleeping_test.sh).

    load.py run    --nodes 127.0.0.1:P1,127.0.0.1:P2 --token T --actors 1000 --workers 16
                   --stop-file FILE --out FILE.json [--tenant acme --class counter --prefix a]
                   [--spread]
    load.py verify --nodes ... --token T --in FILE.json[,FILE.json...]

`run` sends POST /v1/actors/<tenant>/<class>/<prefix><i>/increment, each worker taking the
actors i = w, w + workers, ... in turn, through the first node (or, with --spread, through
each node in turn), with one keep-alive connection per worker and node, until the stop file
exists. It records, per actor, the increments sent and the ones acknowledged (200), and
every answer that is not 200 (time, node, actor, status, body) as a refusal, except one: a
503 whose routing read of the owner record did not finish in time ("cannot read the owner
of ...", the one bucket read a request pays, bounded by the admission wait: a slow bucket
answers 503: docs/node-lease.md, "Actors: ownership records, holds and pending releases")
never reached the actor, so the worker does what a client should: waits its Retry-After and
sends it again (at most 3 times). Those are kept apart as "slow_reads" (printed in the
summary), so a test still sees them, and the refusals that remain are the final answers.
`verify` reads each counter back (GET, --workers at once, through each node in turn,
retried until 200) and checks that every acknowledged increment is there: acknowledged <=
value <= sent (summed over the --in files, which may cover different numbers of actors: the
counts add up per actor).

Standard library only. Prints one summary line; the JSON holds the details.
"""
import argparse
import http.client
import json
import os
import sys
import threading
import time


# The 503 a slow routing read answers (src/routing/front.cc): the request never reached the actor.
SLOW_READ = "cannot read the owner of "
SLOW_READ_TRIES = 3


def connect(node):
    host, port = node.rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port), timeout=30)


def request(conns, node, method, path, token, headers_out=None):
    """One request on the worker's keep-alive connection to node; (status, body). The
    answer's headers go into headers_out (a dict) when one is given."""
    for attempt in range(2):
        conn = conns.get(node)
        if conn is None:
            conn = conns[node] = connect(node)
        try:
            conn.request(method, path, body=b"" if method == "POST" else None,
                         headers={"Authorization": "Bearer " + token})
            r = conn.getresponse()
            if headers_out is not None:
                headers_out.update((k.lower(), v) for k, v in r.getheaders())
            return r.status, r.read().decode("utf-8", "replace")
        except (http.client.HTTPException, OSError) as e:
            conn.close()
            conns.pop(node, None)
            if attempt == 1:
                return 0, "no answer: %s" % e
    return 0, "no answer"


def run(args):
    nodes = args.nodes.split(",")
    n = args.actors
    sent = [0] * n
    acked = [0] * n
    refusals = []
    slow_reads = []
    latencies = []
    lock = threading.Lock()
    start = time.time()

    def worker(w):
        conns = {}
        k = 0
        while not os.path.exists(args.stop_file):
            for i in range(w, n, args.workers):
                if os.path.exists(args.stop_file):
                    break
                node = nodes[k % len(nodes)] if args.spread else nodes[0]
                k += 1
                path = "/v1/actors/%s/%s/%s%d/increment" % (args.tenant, args.klass, args.prefix, i)
                t0 = time.time()
                sent[i] += 1
                for attempt in range(SLOW_READ_TRIES + 1):
                    headers = {}
                    status, body = request(conns, node, "POST", path, args.token, headers)
                    if not (status == 503 and body.startswith(SLOW_READ) and attempt < SLOW_READ_TRIES):
                        break
                    # Never reached the actor (refused while routing): sent again after Retry-After.
                    with lock:
                        slow_reads.append({"t": round(time.time() - start, 3), "node": node, "actor": i,
                                           "body": body.strip()[:200]})
                    time.sleep(min(float(headers.get("retry-after", "1") or 1), 5.0))
                t1 = time.time()
                if status == 200:
                    acked[i] += 1
                    with lock:
                        latencies.append(t1 - t0)
                else:
                    with lock:
                        refusals.append({"t": round(t0 - start, 3), "node": node, "actor": i, "status": status,
                                         "body": body.strip()[:200]})
            if args.once:
                break

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - start
    latencies.sort()
    out = {"sent": sent, "acked": acked, "refusals": refusals, "slow_reads": slow_reads, "seconds": elapsed,
           "p50_ms": round(1000 * latencies[len(latencies) // 2], 2) if latencies else None,
           "p99_ms": round(1000 * latencies[int(len(latencies) * 0.99)], 2) if latencies else None}
    with open(args.out, "w") as f:
        json.dump(out, f)
    print("load: %d sent, %d acknowledged, %d refused in %.1f s (%.0f/s), p50 %s ms, p99 %s ms; "
          "%d routing reads too slow, sent again" %
          (sum(sent), sum(acked), len(refusals), elapsed, sum(acked) / max(elapsed, 1e-9), out["p50_ms"], out["p99_ms"],
           len(slow_reads)))
    return 0


def verify(args):
    nodes = args.nodes.split(",")
    data = None
    for name in args.input.split(","):  # several runs on the same actors: their counts add up
        with open(name) as f:
            run_data = json.load(f)
        if data is None:
            data = {"sent": [], "acked": []}
        # Runs may cover fewer actors than others (the first n): the counts add up per actor.
        for field in ("sent", "acked"):
            counts = run_data[field]
            if len(counts) > len(data[field]):
                data[field] += [0] * (len(counts) - len(data[field]))
            for i, c in enumerate(counts):
                data[field][i] += c
    lost = []
    extra = [0]
    lock = threading.Lock()
    todo = [i for i, s in enumerate(data["sent"]) if s > 0]

    def reader(w):
        conns = {}
        for i in todo[w::args.workers]:
            s, a = data["sent"][i], data["acked"][i]
            path = "/v1/actors/%s/%s/%s%d" % (args.tenant, args.klass, args.prefix, i)
            deadline = time.time() + 30
            while True:
                status, body = request(conns, nodes[i % len(nodes)], "GET", path, args.token)
                if status == 200 or time.time() > deadline:
                    break
                time.sleep(0.2)
            value = int(body.strip()) if status == 200 and body.strip().isdigit() else -1
            with lock:
                if value < a or value > s:
                    lost.append({"actor": i, "acked": a, "sent": s, "value": value, "status": status})
                else:
                    extra[0] += value - a

    # Read back by --workers readers, each actor through one of the nodes in turn.
    threads = [threading.Thread(target=reader, args=(w,)) for w in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    extra = extra[0]
    print("verify: %d actors read back, %d acknowledged increments, %d with an acknowledged increment missing; "
          "%d unacknowledged increments took effect" % (sum(1 for s in data["sent"] if s), sum(data["acked"]),
                                                        len(lost), extra))
    for x in lost[:10]:
        print("  missing: %s" % x)
    return 0 if not lost else 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["run", "verify"])
    p.add_argument("--nodes", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--tenant", default="acme")
    p.add_argument("--class", dest="klass", default="counter")
    p.add_argument("--prefix", default="a")
    p.add_argument("--actors", type=int, default=1000)
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--stop-file", default="/nonexistent")
    p.add_argument("--once", action="store_true", help="one round over the actors, then stop")
    p.add_argument("--spread", action="store_true", help="send through each node in turn")
    p.add_argument("--out", default="/dev/null")
    p.add_argument("--in", dest="input")
    args = p.parse_args()
    return run(args) if args.mode == "run" else verify(args)


if __name__ == "__main__":
    sys.exit(main())
