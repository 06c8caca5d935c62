#!/usr/bin/env python3
"""Load for tests/cluster/tenants_test.sh: one tenant's POSTs to its actors (by default the
increments of examples/counter), from threads, through the given nodes in turn, for a
duration or a count.

  tenants.py --nodes H:P[,H:P...] --token T --tenant NAME [--class counter] [--path increment]
             [--actors N] [--threads N] [--seconds S | --requests N] [--pause-ms MS]
             [--method PUT --body-bytes N]

--path may hold {n}, the request's number (unique keys for examples/kv). With --body-bytes,
each request carries that many bytes, and the 200s' path and body bytes are summed
("stored_bytes": what examples/kv stores for them when every key is new).

Prints one JSON object: the answers by status, the Retry-After values of the 429s (each must
be a whole number of seconds >= 1), the first 429's body, and the latencies of the 200s
(p50, p99, in ms)."""

import argparse
import http.client
import json
import threading
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--tenant", required=True)
    p.add_argument("--class", dest="cls", default="counter")
    p.add_argument("--path", default="increment", help="the actor's path after its name")
    p.add_argument("--actors", type=int, default=10)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--seconds", type=float, default=0)
    p.add_argument("--requests", type=int, default=0)
    p.add_argument("--pause-ms", type=float, default=0)
    p.add_argument("--method", default="POST")
    p.add_argument("--body-bytes", type=int, default=0)
    a = p.parse_args()
    nodes = a.nodes.split(",")
    lock = threading.Lock()
    statuses, retry_after, latencies = {}, [], []
    first_429 = [None]
    sent = [0]
    stored = [0]
    first_500 = [None]
    end = time.monotonic() + a.seconds if a.seconds else None

    def take():
        with lock:
            if a.requests and sent[0] >= a.requests:
                return None
            if end is not None and time.monotonic() >= end:
                return None
            sent[0] += 1
            return sent[0]

    def worker(k):
        conns = {}
        while True:
            n = take()
            if n is None:
                return
            node = nodes[n % len(nodes)]
            key = a.path.replace("{n}", str(n))
            path = "/v1/actors/%s/%s/c%d/%s" % (a.tenant, a.cls, n % a.actors, key)
            body = b"x" * a.body_bytes
            t0 = time.monotonic()
            try:
                c = conns.get(node) or http.client.HTTPConnection(node, timeout=20)
                conns[node] = c
                c.request(a.method, path, body=body,
                          headers={"Authorization": "Bearer " + a.token, "Content-Length": str(len(body))})
                r = c.getresponse()
                body = r.read().decode(errors="replace")  # the answer's, from here on
                status = r.status
                ra = r.getheader("Retry-After")
            except Exception as e:  # a connection the node closed: counted, and a new one next time
                conns.pop(node, None)
                status, body, ra = "error:" + type(e).__name__, "", None
            ms = (time.monotonic() - t0) * 1000
            with lock:
                statuses[str(status)] = statuses.get(str(status), 0) + 1
                if status == 200:
                    latencies.append(ms)
                    stored[0] += len(key) + a.body_bytes
                if status == 500 and first_500[0] is None:
                    first_500[0] = body.strip()
                if status == 429:
                    retry_after.append(ra)
                    if first_429[0] is None:
                        first_429[0] = body.strip()
            if a.pause_ms:
                time.sleep(a.pause_ms / 1000)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    latencies.sort()

    def pct(q):
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 2) if latencies else None

    print(json.dumps({"statuses": statuses, "retry_after": sorted(set(str(x) for x in retry_after)),
                      "first_429": first_429[0], "p50_ms": pct(0.50), "p99_ms": pct(0.99),
                      "sent": sent[0], "stored_bytes": stored[0], "first_500": first_500[0]}))


if __name__ == "__main__":
    main()
