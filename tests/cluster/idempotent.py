#!/usr/bin/env python3
"""Keyed increments of counter actors through any node, retried until answered, for the
idempotency cluster test (tests/cluster/idempotency_test.sh).

    idempotent.py run --nodes 127.0.0.1:P1,... --token T --actors 20 --increments 2000
                      --workers 8 --out FILE.json [--seconds S] [--give-up-s 90]

--seconds: no new increment starts after S seconds (those started are retried to the end).

Each increment gets a fresh Idempotency-Key and is sent, to a node chosen at random, until a
2xx answer arrives (no answer, a 503 or any other failure: wait 0.2 s, another node, the same
key). One in ten is sent once more after its answer, to another node, and must get the very
same answer marked replayed. Afterwards, per actor, the first answers of its keys must be
1, 2, ..., n exactly (n keys: nothing applied twice, nothing lost) and the actor's value
(a GET) must be n. Standard library only; prints one summary line, the JSON holds the
details; exit 0 only when every check holds.
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time
import uuid


def call(node, method, path, token, key=None, timeout=10):
    host, port = node.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        headers = {"Authorization": "Bearer " + token}
        if key is not None:
            headers["Idempotency-Key"] = '"' + key + '"'
        conn.request(method, path, headers=headers)
        r = conn.getresponse()
        return r.status, r.read().decode(errors="replace").strip(), r.getheader("X-Wasmkeep-Idempotent-Replay")
    except (OSError, http.client.HTTPException) as e:
        return 0, type(e).__name__, None
    finally:
        conn.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=["run"])
    p.add_argument("--nodes", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--actors", type=int, default=20)
    p.add_argument("--increments", type=int, default=2000)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--give-up-s", type=float, default=90)
    p.add_argument("--seconds", type=float, default=0)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    nodes = a.nodes.split(",")
    lock = threading.Lock()
    answers = {}  # actor -> list of (key, value)
    problems = []
    stats = {"sent": 0, "retries": 0, "replays_checked": 0, "gave_up": 0}
    todo = list(range(a.increments))
    rng = random.Random(7)
    stop_at = time.time() + a.seconds if a.seconds > 0 else None

    def worker(w):
        wr = random.Random(w)
        while True:
            with lock:
                if not todo or (stop_at is not None and time.time() > stop_at):
                    return
                todo.pop()
            actor = "k%d" % wr.randrange(a.actors)
            path = "/v1/actors/acme/counter/%s/increment" % actor
            key = str(uuid.UUID(int=wr.getrandbits(128)))
            deadline = time.time() + a.give_up_s
            node = wr.choice(nodes)
            while True:
                status, body, replay = call(node, "POST", path, a.token, key)
                with lock:
                    stats["sent"] += 1
                if 200 <= status < 300:
                    break
                if time.time() > deadline:
                    with lock:
                        stats["gave_up"] += 1
                        problems.append("gave up on %s key %s: last %s %s" % (actor, key, status, body[:80]))
                    status = None
                    break
                with lock:
                    stats["retries"] += 1
                time.sleep(0.2)
                node = wr.choice(nodes)
            if status is None:
                continue
            with lock:
                answers.setdefault(actor, []).append((key, body))
            if wr.random() < 0.1:
                other = wr.choice([n for n in nodes if n != node] or nodes)
                for _ in range(int(a.give_up_s / 0.2)):
                    s2, b2, r2 = call(other, "POST", path, a.token, key)
                    if 200 <= s2 < 300:
                        break
                    time.sleep(0.2)
                    other = wr.choice(nodes)
                with lock:
                    stats["replays_checked"] += 1
                    if not (200 <= s2 < 300 and b2 == body and r2 == "1"):
                        problems.append("a retry of %s key %s got %s %r (replay %s), the first answer was %r"
                                        % (actor, key, s2, b2, r2, body))

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(a.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    values = {}
    for actor, got in sorted(answers.items()):
        nums = sorted(int(b) for _, b in got if b.isdigit())
        if len(nums) != len(got):
            problems.append("%s: answers that are not numbers: %r" % (actor, [b for _, b in got if not b.isdigit()][:3]))
        if nums != list(range(1, len(got) + 1)):
            dup = sorted({n for n in nums if nums.count(n) > 1})
            problems.append("%s: the answers are not 1..%d (duplicates %s, max %s)" % (actor, len(got), dup[:5],
                                                                                         nums[-1] if nums else None))
        for _ in range(int(a.give_up_s / 0.2)):
            s, b, _ = call(rng.choice(nodes), "GET", "/v1/actors/acme/counter/%s" % actor, a.token)
            if s == 200:
                break
            time.sleep(0.2)
        values[actor] = b
        if s != 200 or b != str(len(got)):
            problems.append("%s: its value is %s %r after %d acknowledged keys" % (actor, s, b, len(got)))
    report = {"stats": stats, "actors": len(answers), "keys": sum(len(v) for v in answers.values()),
              "problems": problems, "values": values}
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)
    print("keys %d on %d actors, %d requests sent (%d retries), %d replays checked, %d gave up, %d problems%s"
          % (report["keys"], report["actors"], stats["sent"], stats["retries"], stats["replays_checked"],
             stats["gave_up"], len(problems), (": " + problems[0]) if problems else ""))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
