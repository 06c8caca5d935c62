#!/usr/bin/env python3
"""Transfers between bank accounts through any node, and the checks of what they did, for the
bank cluster test (tests/cluster/bank_test.sh) and the soak's bank workload (bench/soak.py
imports this file). The accounts are examples/bank/bank.cc; a transfer is a message between
actors (docs/messages.md).

    bank.py deposit --nodes 127.0.0.1:P1,... --token T --accounts 200 --out DEPOSITS.json
    bank.py run     --nodes ... --token T --accounts 200 --transfers 20000 --workers 16
                    --out TRANSFERS.json [--give-up-s 120] [--replay 0.1] [--seed 1]
    bank.py check   --nodes ... --token T --deposits DEPOSITS.json --transfer-log TRANSFERS.json
                    --wasmkeep BIN --config FILE --bucket URL --out VERDICT.json [--settle-s 90]

deposit: one keyed deposit per account (a000, a001, ...) of a known amount, sent again with
the same key until answered, so a retried deposit is never doubled (its answer, the new
balance, must be the amount).

run: the transfers, from --workers client threads, each between two random accounts of a
random amount (1..500), with a fresh Idempotency-Key, sent to a random node until answered
(200 with the message's sequence number, or 409 when the balance is short): no answer, a 503
or any other 5xx is sent again with the same key to another random node, 0.2 s later, then
0.4, 0.8, 1 s. A client keeps up to 32 transfers waiting for their next attempt while it
starts others (an account whose holder was just killed holds up its own transfers, not the
client's). Every answer a key got is recorded. One answered transfer in ten (--replay) is
sent once more to another node and must get the very same answer, marked replayed. A line
every 10 s on stderr says how far it got.

check: every account's balance read through a node (starting an actor delivers its outbox);
once no node is delivering (wasmkeep_message_senders 0 on each, twice in a row), every
account's durable messages read (`wasmkeep actor messages --json`), again while some outbox
still holds something (--settle-s at most); then the balances read again. Prints one line per
check, "ok|FAIL <name>: <detail>", writes them to --out, and exits 0 only when every check
holds:
  conserved       the balances sum to the deposits exactly
  answered        every transfer was answered 200 or 409 (none given up)
  seqs-distinct   per sender, the sequence numbers answered 200 are distinct
  applied-covers  per sender and receiver, the receiver's applied record of that sender
                  covers the highest number answered to a transfer between them
  balances-exact  every account's balance is its deposit less what it sent plus what it
                  received, by the answers (a transfer applied twice, run twice or lost
                  shows here, even when the sum still holds)
  outboxes-empty  no outbox holds a message and none is parked as dead
  first-answer    every answer a key got (200 or 409) is its first one, replays marked so
Standard library only.
"""
import argparse
import http.client
import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid


# One request with an optional key: idempotent.py's (this directory's other client).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idempotent import call  # noqa: E402


def metric(node, name):
    """The value of an unlabelled series on node's /metrics ("host:port"), or None."""
    host, port = node.rsplit(":", 1)
    try:
        c = http.client.HTTPConnection(host, int(port), timeout=5)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
    except (OSError, http.client.HTTPException):
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def final(status):
    """A final answer: 200 or 409, or a client error other than 429 (a tenant's quota: try
    again later, as a client does after its Retry-After)."""
    return answered(status) or (400 <= status < 500 and status != 429)


def answered(status):
    """A final answer of the bank: 200, or 409 (insufficient funds). Anything else below 500
    is a client error the test must not make; 0 and 5xx are sent again."""
    return status in (200, 409)


def account_names(n, prefix="a"):
    return ["%s%03d" % (prefix, i) for i in range(n)]


def parallel(fn, items, width):
    """{item: fn(item)}, from width threads."""
    out, lock = {}, threading.Lock()

    def run(batch):
        for x in batch:
            v = fn(x)
            with lock:
                out[x] = v
    threads = [threading.Thread(target=run, args=(items[i::width],)) for i in range(width)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


class Transfer:
    """One keyed transfer, sent by attempts, so that a client can send others while it waits:
    attempt() sends it once (to a random node) and says whether it is done. Unanswered (no
    answer, a 5xx), it is due again with the same key 0.2 s later, then 0.4, 0.8 and 1 s,
    until give_up_s; answered
    (200 or 409) and picked for a replay, it is sent once more, to another node, until that
    is answered too. record() is what the checks read."""

    def __init__(self, bank, src, dst, amount, key, give_up_s, replay):
        self.bank = bank
        self.src, self.dst, self.amount, self.key = src, dst, amount, key
        self.path = "%s%s/transfer?to=%s&amount=%d" % (bank.path, src, dst, amount)
        self.deadline = time.time() + give_up_s
        self.give_up_s = give_up_s
        self.want_replay = replay
        self.answers, self.replayed = [], None
        self.final, self.node = None, None
        self.next_at = 0.0
        self.tries = 0

    def attempt(self, rng):
        """Sends once; True when nothing more is to be sent."""
        replaying = self.replayed is not None
        nodes = self.bank.nodes
        if replaying:
            nodes = [n for n in nodes if n != self.node] or nodes
        node = rng.choice(nodes)
        status, body, replay = call(node, "POST", self.path, self.bank.token, self.key)
        (self.replayed if replaying else self.answers).append([status, body, replay, node, round(time.time(), 3)])
        if final(status):
            if replaying:
                return True
            self.final, self.node = [status, body], node
            if self.want_replay and answered(status):
                self.replayed, self.next_at, self.tries = [], 0.0, 0
                self.deadline = time.time() + self.give_up_s
                return False
            return True
        if time.time() > self.deadline:
            return True  # given up: final stays None (or, for a replay, its last answer says so)
        self.tries += 1
        self.next_at = time.time() + min(0.2 * 2 ** (self.tries - 1), 1.0)
        return False

    def record(self):
        t = {"key": self.key, "from": self.src, "to": self.dst, "amount": self.amount, "answers": self.answers,
             "final": self.final}
        if self.replayed is not None:
            t["replay"] = self.replayed
        return t


def send_all(rng, make, stop, on_done, max_pending=32, interval=0.0):
    """One client: starts transfers (make() -> Transfer, or None when none is left to start),
    at most one per interval seconds, and sends each until done (on_done(transfer)), with at
    most max_pending waiting for their next attempt: a transfer that waits does not hold the
    others up. Returns when make() gave None and nothing is pending, or once stop() says so
    (whatever is pending is then abandoned)."""
    pending, exhausted, next_start = [], False, time.time()
    while not stop():
        now = time.time()
        due = [t for t in pending if t.next_at <= now]
        can_start = not exhausted and len(pending) < max_pending
        if due:
            t = min(due, key=lambda x: x.next_at)
        elif can_start and now >= next_start:
            t = make()
            if t is None:
                exhausted = True
                continue
            pending.append(t)
            next_start = max(next_start + interval, now - 1.0)
        elif pending or can_start:
            wake = min([x.next_at for x in pending] + ([next_start] if can_start else []))
            time.sleep(min(max(0.0, wake - now), 0.5))
            continue
        else:
            return
        if t.attempt(rng):
            pending.remove(t)
            on_done(t)


class Bank:
    """The accounts of one class of examples/bank/bank.cc, called through nodes ("host:port")."""

    def __init__(self, nodes, token, tenant="acme", cls="bank"):
        self.nodes = list(nodes)
        self.token = token
        self.tenant = tenant
        self.cls = cls
        self.path = "/v1/actors/%s/%s/" % (tenant, cls)
        self.lock = threading.Lock()

    def until_answered(self, rng, method, path, key, give_up_s, answers, nodes=None):
        """Sends until a final answer (or a client error, or give_up_s); appends every answer
        to answers as [status, body, replay, node, time]; returns (status or None, body, node)."""
        deadline = time.time() + give_up_s
        while True:
            node = rng.choice(nodes or self.nodes)
            status, body, replay = call(node, method, path, self.token, key)
            with self.lock:
                answers.append([status, body, replay, node, round(time.time(), 3)])
            if final(status):
                return status, body, node
            if time.time() > deadline:
                return None, body, node
            time.sleep(0.2)

    def deposit(self, rng, name, amount, give_up_s):
        """One keyed deposit; None when it was answered with the amount, else the problem."""
        answers = []
        status, body, _ = self.until_answered(rng, "POST", "%s%s/deposit?amount=%d" % (self.path, name, amount),
                                              "deposit-" + name, give_up_s, answers)
        if status != 200 or body != str(amount):
            return "deposit to %s: %s %r, expected 200 %d" % (name, status, body, amount)
        return None

    def transfer(self, rng, names, give_up_s, replay):
        """A new transfer between two random accounts, not sent yet (Transfer.attempt)."""
        src, dst = rng.sample(names, 2)
        return Transfer(self, src, dst, rng.randint(1, 500), str(uuid.UUID(int=rng.getrandbits(128))), give_up_s,
                        rng.random() < replay)

    def balance(self, name, rng, seconds=60):
        deadline = time.time() + seconds
        while time.time() < deadline:
            s, b, _ = call(rng.choice(self.nodes), "GET", self.path + name + "/balance", self.token)
            if s == 200 and b.lstrip("-").isdigit():
                return int(b)
            time.sleep(0.2)
        return None

    def settle(self, names, read_messages, metric_nodes, settle_s, say=print):
        """Every account started (a read of its balance), so whatever its outbox holds is being
        delivered; then until no node delivers anything (wasmkeep_message_senders 0 on each of
        metric_nodes, twice in a row) and every account's durable messages read
        (read_messages(name) -> (outbox, dead, {sender: seq}) or None). An outbox found
        non-empty starts another round; a pass that finds them all empty came after the last
        delivery, so its applied records are final. Returns (balances, messages, seconds)."""
        rng = random.Random(1)
        t0 = time.time()
        deadline = t0 + settle_s
        kick, messages = list(names), {}
        while True:
            parallel(lambda n: self.balance(n, rng), kick, 8)
            quiet = 0
            while quiet < 2 and time.time() < deadline:
                counts = [metric(n, "wasmkeep_message_senders") for n in metric_nodes]
                quiet = quiet + 1 if all(c == 0 for c in counts) else 0
                time.sleep(0.5)
            t1 = time.time()
            got = parallel(read_messages, names, 8)
            messages = {n: v for n, v in got.items() if v is not None}
            kick = [n for n in names if n not in messages or messages[n][0]]
            say("every account's messages read in %.1f s: %d with an outbox, %d unread"
                % (time.time() - t1, sum(1 for n in kick if n in messages), sum(1 for n in names if n not in messages)))
            if not kick or time.time() > deadline:
                break
        seconds = time.time() - t0
        balances = parallel(lambda n: self.balance(n, rng), names, 8)
        return balances, messages, seconds

    def judge(self, deposits, transfers, balances, messages, settle_s):
        """The checks (the module's docstring): a list of dict(name, ok, detail)."""
        names = sorted(deposits)
        out = []

        def result(name, ok, detail):
            out.append({"name": name, "ok": bool(ok), "detail": detail})

        total = sum(v for v in balances.values() if v is not None)
        unread = [n for n in names if balances.get(n) is None]
        expected = sum(deposits.values())
        result("conserved", not unread and total == expected,
               "the balances sum to %d, the deposits to %d%s" % (total, expected,
                                                                 "; unread: %s" % unread[:5] if unread else ""))

        gave_up = [t for t in transfers if t["final"] is None]
        odd = [t["final"] for t in transfers if t["final"] is not None and not answered(t["final"][0])]
        result("answered", not gave_up and not odd, "%d transfers, %d given up, %d answered neither 200 nor 409%s"
               % (len(transfers), len(gave_up), len(odd), (" (%s %r)" % tuple(odd[0])) if odd else ""))

        acked = [t for t in transfers if t["final"] and t["final"][0] == 200]
        bad_bodies = [t for t in acked if not t["final"][1].isdigit()]
        seqs = {}
        for t in acked:
            if t["final"][1].isdigit():
                seqs.setdefault(t["from"], []).append(int(t["final"][1]))
        dups = {s: sorted({x for x in v if v.count(x) > 1})[:5] for s, v in seqs.items() if len(set(v)) != len(v)}
        result("seqs-distinct", not dups and not bad_bodies,
               "%d acknowledged transfers from %d senders; senders with a number answered twice: %d%s%s"
               % (len(acked), len(seqs), len(dups), (" %s" % list(dups.items())[:3]) if dups else "",
                  ("; bodies not a number: %r" % [t["final"][1] for t in bad_bodies][:3]) if bad_bodies else ""))

        highest = {}
        for t in acked:
            if t["final"][1].isdigit():
                k = (t["from"], t["to"])
                highest[k] = max(highest.get(k, 0), int(t["final"][1]))
        uncovered, unknown = [], [n for n in names if n not in messages]
        for (src, dst), seq in sorted(highest.items()):
            if dst not in messages:
                continue
            got = messages[dst][2].get("%s/%s/%s" % (self.tenant, self.cls, src), 0)
            if got < seq:
                uncovered.append("%s -> %s: answered %d, applied %d" % (src, dst, seq, got))
        result("applied-covers", not uncovered and not unknown,
               "%d sender-receiver pairs; not covered: %d%s%s"
               % (len(highest), len(uncovered), (" (%s)" % "; ".join(uncovered[:3])) if uncovered else "",
                  ("; messages unread: %s" % unknown[:5]) if unknown else ""))

        want = dict(deposits)
        uncertain = set()
        for t in transfers:
            if t["final"] is None or not answered(t["final"][0]):
                uncertain.update((t["from"], t["to"]))
            elif t["final"][0] == 200:
                want[t["from"]] -= t["amount"]
                want[t["to"]] += t["amount"]
        off = ["%s is %s, expected %d" % (n, balances.get(n), want[n]) for n in names
               if n not in uncertain and balances.get(n) != want[n]]
        result("balances-exact", not off,
               "%d accounts (%d left out: a transfer of theirs was never answered); wrong: %d%s"
               % (len(names) - len(uncertain), len(uncertain), len(off), (" (%s)" % "; ".join(off[:3])) if off else ""))

        left = {n: len(m[0]) for n, m in messages.items() if m[0]}
        dead = {n: len(m[1]) for n, m in messages.items() if m[1]}
        result("outboxes-empty", not left and not dead and not unknown,
               "after %.1f s of settling: messages to deliver %d (on %d accounts), dead %d%s"
               % (settle_s, sum(left.values()), len(left), sum(dead.values()),
                  ("; e.g. %s" % list(left.items())[:3]) if left else ""))

        differ, unmarked, keys_resent, checked = [], [], 0, 0
        for t in transfers:
            finals = [x for x in t["answers"] if answered(x[0])]
            replays = [x for x in t.get("replay", []) if answered(x[0])]
            keys_resent += 1 if len(t["answers"]) > 1 else 0
            if not finals:
                continue
            first = finals[0][:2]
            checked += 1
            for x in finals[1:] + replays:
                if x[:2] != first:
                    differ.append("key %s: %s %r, first %s %r" % (t["key"], x[0], x[1], first[0], first[1]))
            for x in replays:
                if x[2] != "1":
                    unmarked.append(t["key"])
        replayed = sum(1 for t in transfers if t.get("replay"))
        result("first-answer", not differ and not unmarked,
               "%d keys (%d sent more than once, %d replayed after their answer): %d answers differ from the "
               "first, %d replays not marked%s" % (checked, keys_resent, replayed, len(differ), len(unmarked),
                                                   (" (%s)" % differ[0]) if differ else ""))
        return out


def stats_of(transfers):
    return {"transfers": len(transfers),
            "answered_200": sum(1 for t in transfers if t["final"] and t["final"][0] == 200),
            "answered_409": sum(1 for t in transfers if t["final"] and t["final"][0] == 409),
            "requests": sum(len(t["answers"]) + len(t.get("replay", [])) for t in transfers),
            "sent_again": sum(len(t["answers"]) - 1 for t in transfers),
            "replays": sum(1 for t in transfers if "replay" in t),
            "gave_up": sum(1 for t in transfers if t["final"] is None)}


def cmd_deposit(a, bank):
    rng = random.Random(a.seed)
    names = account_names(a.accounts)
    amounts = {n: rng.randrange(10000, 20000) for n in names}
    problems = parallel(lambda n: bank.deposit(random.Random(n), n, amounts[n], a.give_up_s), names, 8)
    problems = [p for p in problems.values() if p]
    with open(a.out, "w") as f:
        json.dump({"amounts": amounts, "problems": problems}, f)
    print("%d deposits, sum %d, %d problems%s" % (len(names), sum(amounts.values()), len(problems),
                                                  (": " + problems[0]) if problems else ""))
    return 0 if not problems else 1


def cmd_run(a, bank):
    names = account_names(a.accounts)
    transfers = []
    todo = [a.transfers]
    t_start = time.time()

    def worker(w):
        rng = random.Random(a.seed * 1000 + w)

        def make():
            with bank.lock:
                if todo[0] <= 0:
                    return None
                todo[0] -= 1
            return bank.transfer(rng, names, a.give_up_s, a.replay)

        def done(t):
            with bank.lock:
                transfers.append(t.record())
        send_all(rng, make, lambda: False, done)

    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(a.workers)]
    for t in threads:
        t.start()
    next_report = t_start + 10
    while any(t.is_alive() for t in threads):
        time.sleep(0.2)
        if time.time() >= next_report:
            next_report += 10
            with bank.lock:
                done = len(transfers)
            print("%.0f s: %d transfers answered" % (time.time() - t_start, done), file=sys.stderr, flush=True)
    seconds = time.time() - t_start
    s = stats_of(transfers)
    with open(a.out, "w") as f:
        json.dump({"transfers": transfers, "stats": s, "seconds": seconds}, f)
    print("%d transfers in %.1f s (%.0f/s): %d answered 200, %d 409 (balance short), %d requests (%d sent again), "
          "%d replays, %d given up" % (s["transfers"], seconds, s["transfers"] / seconds if seconds else 0,
                                       s["answered_200"], s["answered_409"], s["requests"], s["sent_again"],
                                       s["replays"], s["gave_up"]))
    return 0


def read_messages(wasmkeep, config, bucket, actor):
    """The actor's durable messages (`wasmkeep actor messages --json`): (outbox, dead,
    {sender: applied seq}), or None."""
    try:
        r = subprocess.run([wasmkeep, "--config", config, "--bucket", bucket, "actor", "messages", actor, "--json"],
                           capture_output=True, text=True, timeout=60)
        j = json.loads(r.stdout) if r.returncode == 0 else None
    except (ValueError, subprocess.SubprocessError):
        return None
    if j is None:
        return None
    return j.get("outbox", []), j.get("dead", []), {e["from"]: e["seq"] for e in j.get("applied", [])}


def cmd_check(a, bank):
    with open(a.deposits) as f:
        deposits = json.load(f)["amounts"]
    with open(a.transfer_log) as f:
        transfers = json.load(f)["transfers"]
    names = sorted(deposits)
    balances, messages, settle_s = bank.settle(
        names, lambda n: read_messages(a.wasmkeep, a.config, a.bucket, "%s/%s/%s" % (bank.tenant, bank.cls, n)),
        bank.nodes, a.settle_s, say=lambda text: print("     " + text, flush=True))
    lines = bank.judge(deposits, transfers, balances, messages, settle_s)
    for x in lines:
        print("%s %s: %s" % ("ok  " if x["ok"] else "FAIL", x["name"], x["detail"]), flush=True)
    with open(a.out, "w") as f:
        json.dump({"checks": lines, "balances": balances, "settle_s": settle_s,
                   "messages": {n: {"outbox": m[0], "dead": m[1], "applied": m[2]} for n, m in messages.items()}}, f)
    return 0 if all(x["ok"] for x in lines) else 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=["deposit", "run", "check"])
    p.add_argument("--nodes", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--accounts", type=int, default=200)
    p.add_argument("--transfers", type=int, default=20000)
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--give-up-s", type=float, default=120)
    p.add_argument("--replay", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True)
    p.add_argument("--deposits")
    p.add_argument("--transfer-log")
    p.add_argument("--wasmkeep")
    p.add_argument("--config")
    p.add_argument("--bucket")
    p.add_argument("--settle-s", type=float, default=90)
    a = p.parse_args()
    bank = Bank(a.nodes.split(","), a.token)
    if a.cmd == "deposit":
        return cmd_deposit(a, bank)
    if a.cmd == "run":
        return cmd_run(a, bank)
    if not (a.deposits and a.transfer_log and a.wasmkeep and a.config and a.bucket):
        p.error("check needs --deposits, --transfer-log, --wasmkeep, --config and --bucket")
    return cmd_check(a, bank)


if __name__ == "__main__":
    sys.exit(main())
