#!/usr/bin/env python3
"""The upgrade probe's actors (examples/testdata/upgrade_probe.h) through real nodes, for
tests/cluster/versions_test.sh: one phase per call, the expected state kept in a JSON file
between them. Standard library only.

  versions.py seed   --nodes A,B,C --token T --actors N --state FILE
      N actors acme/probe/p<i>, each incremented i % 3 + 1 times (acknowledged).
  versions.py check  --nodes ... --token T --state FILE --expect SPEC
      GETs every actor and checks its answer against the expectation SPEC (below) and the
      counts the state file holds; prints how many run each version.
  versions.py touch  --nodes ... --token T --state FILE
      one GET of every actor, unchecked (the nodes notice a changed rollout)
  versions.py load   --nodes ... --token T --state FILE --seconds S
      increments random actors for S seconds, recording each acknowledged one (the counts a
      kill -9 must not lose); an unanswered or refused one may have landed: the next check
      allows its count to be one more.

SPEC:
  share:OLD:NEW:PERCENT   actors whose place (SHA-256 of the name) < PERCENT*100 run NEW,
                          migrated from OLD once; the others run OLD
  all:V:MIGRATIONS        every actor runs V with this migration list
  version:V               every actor runs V (whatever it was migrated through, each step once)
  odd-stay:V2:V3          even counts run V3 with "...,V2>V3" once; odd ones stay on V2
Prints one line per check and "N passed, N failed"."""

import argparse
import concurrent.futures
import hashlib
import json
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, note  # noqa: E402
import checks  # noqa: E402


def place(name):
    """The actor's place in a rollout (control::RolloutPlace): the SHA-256 of its name."""
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 10000


def call(nodes, token, method, name, path, tries=40):
    """(status, body) of one call, retried on 503 and connection errors through the nodes in
    turn (a killed node, an actor moving): at most `tries` attempts."""
    last = None
    for attempt in range(tries):
        node = nodes[(hash(name) + attempt) % len(nodes)]
        req = urllib.request.Request(f"http://{node}/v1/actors/acme/probe/{name}{path}", method=method,
                                     headers={"Authorization": f"Bearer {token}"}, data=b"" if method == "POST" else None)
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            last = (e.code, e.read().decode(errors="replace"))
            if e.code not in (503, 502, 500):
                return last
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            last = (0, str(e))
        time.sleep(0.1 + 0.05 * attempt)
    return last


def load_state(path):
    with open(path) as f:
        return json.load(f)


def save_state(path, state):
    with open(path + ".tmp", "w") as f:
        json.dump(state, f)
    os.replace(path + ".tmp", path)


def seed(a):
    counts = {}
    names = [f"p{i}" for i in range(a.actors)]

    def one(i):
        name = names[i]
        for _ in range(i % 3 + 1):
            status, body = call(a.nodes, a.token, "POST", name, "/inc")
            if status != 200:
                return name, None, f"{status} {body.strip()}"
        return name, i % 3 + 1, None

    bad = []
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for name, n, err in pool.map(one, range(a.actors)):
            if err:
                bad.append((name, err))
            else:
                counts[name] = {"n": n, "maybe": 0}
    check(f"{a.actors} actors seeded (each incremented 1 to 3 times)", not bad)
    for name, err in bad[:5]:
        note(f"{name}: {err}")
    save_state(a.state, {"counts": counts})


def load(a):
    state = load_state(a.state)
    counts = state["counts"]
    names = sorted(counts)
    stop = time.monotonic() + a.seconds
    acked = unknown = 0
    lock = threading.Lock()
    rnd = random.Random(7)

    def worker(seed_):
        nonlocal acked, unknown
        r = random.Random(seed_)
        while time.monotonic() < stop:
            name = names[r.randrange(len(names))]
            status, _ = call(a.nodes, a.token, "POST", name, "/inc", tries=1)
            with lock:
                if status == 200:
                    counts[name]["n"] += 1
                    acked += 1
                else:
                    counts[name]["maybe"] += 1  # may have landed before its node died
                    unknown += 1

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(worker, [rnd.random() for _ in range(8)]))
    note(f"load: {acked} increments acknowledged, {unknown} unanswered or refused")
    save_state(a.state, state)


def parse(body):
    """'v2 n=3 migrations=1>2' -> (2, 3, ['1>2'])"""
    parts = body.split()
    version = int(parts[0][1:])
    n = int(parts[1].split("=")[1])
    migrations = parts[2].split("=", 1)[1] if len(parts) > 2 else ""
    return version, n, [m for m in migrations.split(",") if m]


def check_phase(a):
    state = load_state(a.state)
    counts = state["counts"]
    kind, *args = a.expect.split(":")
    results = {}

    def one(name):
        return name, call(a.nodes, a.token, "GET", name, "/")

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for name, (status, body) in pool.map(one, sorted(counts)):
            results[name] = (status, body)
    failures = []
    by_version = {}
    for name, (status, body) in results.items():
        if status != 200:
            failures.append(f"{name}: {status} {body.strip()[:200]}")
            continue
        version, n, migrations = parse(body)
        by_version[version] = by_version.get(version, 0) + 1
        want_n, maybe = counts[name]["n"], counts[name]["maybe"]
        if not want_n <= n <= want_n + maybe:
            failures.append(f"{name}: count {n}, acknowledged {want_n} (+{maybe} unanswered)")
        if len(migrations) != len(set(migrations)):
            failures.append(f"{name}: a migration ran twice: {migrations}")
        if kind == "share":
            old, new, percent = int(args[0]), int(args[1]), int(args[2])
            want = new if place(name) < percent * 100 else old
            step = f"{old}>{new}"
            if version != want or migrations.count(step) != (1 if want == new else 0):
                failures.append(f"{name} (place {place(name)}): {body.strip()}, expected v{want}"
                                + (f" migrated {step} once" if want == new else ""))
        elif kind == "all":
            v, want_m = int(args[0]), [m for m in args[1].split(",") if m]
            if version != v or migrations != want_m:
                failures.append(f"{name}: {body.strip()}, expected v{v} migrations={','.join(want_m)}")
        elif kind == "version":
            if version != int(args[0]):
                failures.append(f"{name}: {body.strip()}, expected v{args[0]}")
        elif kind == "odd-stay":
            v2, v3 = int(args[0]), int(args[1])
            if version == v3:
                if n % 2 != 0 or migrations.count(f"{v2}>{v3}") != 1:
                    failures.append(f"{name}: {body.strip()}: on v{v3} with an odd count or not migrated once")
            elif version != v2 or f"{v2}>{v3}" in migrations:
                failures.append(f"{name}: {body.strip()}: expected v{v2} without {v2}>{v3}")
        counts[name]["n"] = n  # from now on, what it holds (the unanswered ones resolved)
        counts[name]["maybe"] = 0
    note("running: " + ", ".join(f"v{v} {c}" for v, c in sorted(by_version.items())))
    check(f"{a.expect}: every actor's answer and count as expected ({len(results)} actors)", not failures)
    for f in failures[:10]:
        note(f)
    state["by_version"] = {str(k): v for k, v in by_version.items()}
    save_state(a.state, state)


def touch(a):
    """One GET of every actor, answers unchecked: each node's next event of the class reads
    its rollout again (the event that notices a stale check still runs the old choice)."""
    state = load_state(a.state)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda name: call(a.nodes, a.token, "GET", name, "/"), sorted(state["counts"])))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("phase", choices=["seed", "check", "load", "touch"])
    p.add_argument("--nodes", required=True, type=lambda s: s.split(","))
    p.add_argument("--token", required=True)
    p.add_argument("--actors", type=int, default=1000)
    p.add_argument("--state", required=True)
    p.add_argument("--expect", default="")
    p.add_argument("--seconds", type=float, default=5)
    a = p.parse_args()
    {"seed": seed, "check": check_phase, "load": load, "touch": touch}[a.phase](a)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
