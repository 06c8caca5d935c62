#!/usr/bin/python3
"""The chat room's WebSocket (examples/chat/README.md, "WebSocket room"; docs/websockets.md)
against real `wasmkeep serve` processes, for tests/cluster/websocket_test.sh, which starts
the nodes and calls one phase at a time:

  basics     two members through the owner, ?since=, the handshake's and the token's
             refusals, the token as a subprotocol, hostile frames
  hibernate  N connections to one room on its owner, the room asleep while they stay open
             (wasmkeep_websockets_held, the owner's RSS before and after), one message
             wakes it and reaches every connection
  failover   a member on the owner and one through another node (relayed; a 503 there
             fails that check, and the member goes to the owner), the owner killed
             with -9, both back through survivors with ?since=, nothing lost or seen twice
  drain      the same two members, the owner drained: 1012, back through another node

Prints one line per check ("ok   ..." or "FAIL ...", notes indented) and closes with
"N passed, N failed"; exits 1 if a check failed. Standard library only (tests/cluster/wsclient.py).
"""
import argparse
import base64
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from wsclient import WsClient, WsClosed  # noqa: E402
from checks import check, note, wait_for  # noqa: E402
import checks  # noqa: E402

TENANT = "acme"


class Ws(WsClient):
    """A WsClient whose frames go out under a lock: a member's reader thread answers pings and
    closes on the socket its sender writes to."""

    def __init__(self, sock, leftover=b""):
        super().__init__(sock, leftover)
        self.lock = threading.Lock()

    def send_frame(self, opcode, payload, mask=True, fin=True):
        with self.lock:
            super().send_frame(opcode, payload, mask, fin)


def room_path(room, since=None):
    return "/v1/actors/%s/chat/%s/ws%s" % (TENANT, room, "" if since is None else "?since=%d" % since)


def http(node, method, path, token=None, body=None, timeout=20):
    """(status, body text) of one request to a node's client API."""
    req = urllib.request.Request("http://%s%s" % (node, path), method=method,
                                 data=body.encode() if body is not None else None)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except OSError as e:
        return 0, str(e)


def stored(node, room, token):
    """Every message of the room by GET /messages, paged: [(number, text)], or None."""
    out, since = [], 0
    while True:
        status, body = http(node, "GET", "/v1/actors/%s/chat/%s/messages?since=%d" % (TENANT, room, since), token)
        if status != 200:
            note("GET /messages through %s answered %d: %s" % (node, status, body.strip()[:200]))
            return None
        page = [line.split("\t", 1) for line in body.split("\n") if line]
        out += [(int(n), t) for n, t in page]
        if len(page) < 200:
            return out
        since = out[-1][0]


def metric(node, name):
    """One sample of the node's /metrics, as a float; None if absent."""
    status, body = http(node, "GET", "/metrics")
    if status != 200:
        return None
    for line in body.split("\n"):
        parts = line.split()
        if len(parts) == 2 and parts[0] == name:
            return float(parts[1])
    return None


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def raw_handshake(node, path, header_lines, timeout=10):
    """Sends a handshake made of exactly these header lines; returns (status, headers)."""
    host, port = node.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        lines = ["GET %s HTTP/1.1" % path, "Host: " + node] + header_lines
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    head = data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    status = int(head[0].split()[1]) if head and len(head[0].split()) > 1 else 0
    headers = {}
    for line in head[1:]:
        if ":" in line:
            n, v = line.split(":", 1)
            headers[n.strip().lower()] = v.strip()
    return status, headers


def new_key():
    return base64.b64encode(os.urandom(16)).decode()


class Member:
    """One member of a room. A reader thread records every line the room sends (number, text,
    when) over all the member's connections, and how each connection ended: a close code, or
    "eof" when the TCP connection ended without a close frame. A reconnection asks
    ?since=<the last number seen>, as the chat page does (examples/chat/web/index.html)."""

    def __init__(self, name, token, room):
        self.name, self.token, self.room = name, token, room
        self.seen = []      # [(number, text, monotonic time)]
        self.other = []     # lines that are not "<number>\t<text>"
        self.ends = []      # one per connection that ended
        self.ws = None
        self.ended = threading.Event()
        self.sent = []      # texts sent
        self.relayed = False
        self.events = []    # what happened, in order, for a failure's report

    def last(self):
        return self.seen[-1][0] if self.seen else 0

    def texts(self):
        return [t for _, t, _ in self.seen]

    def open(self, node, since=None, protocols=None, timeout=10):
        """Opens a connection (raises WsClosed with the refusal when not 101)."""
        ws = Ws.connect(node, room_path(self.room, since), token=self.token, protocols=protocols, timeout=timeout)
        ws.sock.settimeout(None)
        self.events.append("open %s since=%s" % (node, since))
        self.ws = ws
        self.ended.clear()
        threading.Thread(target=self._read, args=(ws,), daemon=True).start()
        return ws

    def _read(self, ws):
        end = "eof"
        while True:
            try:
                kind, data = ws.recv(timeout=3600)
            except (WsClosed, OSError, TimeoutError):
                break
            if kind == "close":
                end = data[0]
                break
            line = data if kind == "text" else data.decode("utf-8", "replace")
            head, _, text = line.partition("\t")
            if head.isdigit():
                self.seen.append((int(head), text, time.monotonic()))
                self.events.append("got %s %s" % (head, text))
            else:
                self.other.append(line)
        try:
            ws.sock.close()
        except OSError:
            pass
        self.events.append("end %s" % end)
        if self.ws is ws:
            self.ends.append(end)
            self.ended.set()

    def send(self, text):
        """Sends one message; False if the connection is gone."""
        ws = self.ws
        if ws is None or self.ended.is_set():
            return False
        try:
            ws.send_text(text)
        except OSError:
            return False
        self.sent.append(text)
        return True

    def sees(self, text, seconds):
        return wait_for(lambda: text in self.texts(), seconds)

    def reconnect(self, nodes, deadline):
        """Opens again through the first of nodes that takes it (trying them in turn every
        100 ms) with ?since=<last seen>, until deadline (monotonic); returns the node or None."""
        while time.monotonic() < deadline:
            for node in nodes:
                try:
                    self.open(node, since=self.last(), timeout=5)
                    return node
                except (WsClosed, OSError):
                    pass
            time.sleep(0.1)
        return None


def contiguous(numbers, first=1):
    return numbers == list(range(first, first + len(numbers)))


# ---------------------------------------------------------------------------------- basics
def basics(a):
    owner, room, token = a.owner, a.room, a.token
    m1, m2 = Member("m1", token, room), Member("m2", token, room)
    m1.open(owner)
    m2.open(owner)
    sent1 = ["from m1 #%d" % i for i in range(1, 6)]
    sent2 = ["from m2 #%d" % i for i in range(1, 6)]
    for x, y in zip(sent1, sent2):
        m1.send(x)
        m2.send(y)
    both = wait_for(lambda: len(m1.seen) >= 10 and len(m2.seen) >= 10, 20)
    time.sleep(0.3)  # anything more (a duplicate) would come now
    n1 = [n for n, _, _ in m1.seen]
    n2 = [n for n, _, _ in m2.seen]
    check("two members, five messages each at once: each sees all 10 (%d and %d)" % (len(m1.seen), len(m2.seen)),
          bool(both) and len(m1.seen) == 10 and len(m2.seen) == 10)
    check("numbered 1..10 in order, each once (%s)" % n1, contiguous(n1) and n1 == n2)
    check("both see the same sequence", [(n, t) for n, t, _ in m1.seen] == [(n, t) for n, t, _ in m2.seen])
    check("each member's messages keep its order of sending",
          [t for t in m1.texts() if t in sent1] == sent1 and [t for t in m1.texts() if t in sent2] == sent2)
    check("and nothing else came (%s)" % (m1.other + m2.other), not m1.other and not m2.other)
    messages = stored(owner, room, token)
    check("GET /messages holds the same 10", messages == [(n, t) for n, t, _ in m1.seen])

    m3 = Member("m3", token, room)
    m3.open(owner, since=4)
    wait_for(lambda: len(m3.seen) >= 6, 10)
    time.sleep(0.3)
    check("?since=4 gets messages 5..10 only (%s)" % [n for n, _, _ in m3.seen],
          [(n, t) for n, t, _ in m3.seen] == [(n, t) for n, t, _ in m1.seen[4:]])
    m4 = Member("m4", token, room)
    m4.open(owner)
    wait_for(lambda: len(m4.seen) >= 10, 10)
    time.sleep(0.3)
    check("without since, the history (the newest 50: all 10)", [n for n, _, _ in m4.seen] == n1)

    path = room_path(room)
    common = ["Upgrade: websocket", "Connection: Upgrade", "Authorization: Bearer " + token]
    s, _ = raw_handshake(owner, path, common + ["Sec-WebSocket-Version: 13"])
    check("a handshake with no Sec-WebSocket-Key: 400 (%d)" % s, s == 400)
    s, h = raw_handshake(owner, path, common + ["Sec-WebSocket-Version: 8", "Sec-WebSocket-Key: " + new_key()])
    check("version 8: 426 naming version 13 (%d, %s)" % (s, h.get("sec-websocket-version")),
          s == 426 and h.get("sec-websocket-version") == "13")
    s, _, sock, _ = WsClient.handshake(owner, path)
    sock.close()
    check("no token: 401 (%d)" % s, s == 401)
    s, _, sock, _ = WsClient.handshake(owner, path, token=a.other_token)
    sock.close()
    check("another tenant's token: 403 (%d)" % s, s == 403)
    s, _, sock, _ = WsClient.handshake(owner, path, protocols=["wasmkeep", "bearer.wk.acme.nosuch.0000"])
    sock.close()
    check("a bad token as the subprotocol: 401 (%d)" % s, s == 401)

    m5 = Member("m5", token, room)
    ws = m5.open(owner, since=10, protocols=["wasmkeep", "bearer." + token])
    check("the token as subprotocol bearer.<token> beside wasmkeep: 101 answering Sec-WebSocket-Protocol: wasmkeep (%s)"
          % ws.headers.get("sec-websocket-protocol"), ws.headers.get("sec-websocket-protocol") == "wasmkeep")
    m5.send("through the subprotocol")
    check("and its message is stored and sent to every member as 11",
          bool(wait_for(lambda: (11, "through the subprotocol") in [(n, t) for n, t, _ in m1.seen], 10))
          and (11, "through the subprotocol") in [(n, t) for n, t, _ in m5.seen])

    def hostile(title, send, code):
        h = Member("h", token, room)
        ws = h.open(owner, since=11)
        try:
            send(ws)
        except OSError as e:
            note("(sending: %s)" % e)
        h.ended.wait(10)
        check("%s: closed with %d (%s)" % (title, code, h.ends), h.ends == [code])
    hostile("an unmasked frame", lambda ws: ws.send_frame(0x1, b"unmasked", mask=False), 1002)
    hostile("a message over 64 KiB", lambda ws: ws.send_text("x" * (64 * 1024 + 1)), 1009)
    hostile("a text message that is not UTF-8", lambda ws: ws.send_frame(0x1, b"bad \xff\xfe text"), 1007)
    after = stored(owner, room, token)
    check("none of them stored anything (11 messages)", after is not None and len(after) == 11)
    m1.send("still here")
    check("the room still serves its members", bool(m2.sees("still here", 10)))
    for m in (m1, m2, m3, m4, m5):
        m.ws.close()


# ------------------------------------------------------------------------------- hibernate
def hibernate(a):
    owner, room, token, count = a.owner, a.room, a.token, a.count
    since = len(stored(owner, room, token) or [])
    note("room %s holds %d messages; waiting for every actor on the owner to leave memory" % (room, since))
    asleep = lambda: metric(owner, "wasmkeep_actor_resident") == 0  # noqa: E731
    check("the owner's actors leave memory before (wasmkeep_actor_resident 0)", bool(wait_for(asleep, 30, 0.2)))
    time.sleep(0.5)
    rss0 = rss_bytes(a.pid)
    clients = []
    t0 = time.monotonic()
    refused = None
    for i in range(count):
        try:
            ws = WsClient.connect(owner, room_path(room, since), token=token, timeout=30)
            clients.append(ws)
        except (WsClosed, OSError) as e:
            refused = "connection %d: %s" % (i, e)
            break
    open_s = time.monotonic() - t0
    check("%d connections opened to the room on its owner, one after another (%.1f s)" % (len(clients), open_s),
          len(clients) == count)
    if refused:
        note(refused)
    held = wait_for(lambda: metric(owner, "wasmkeep_websockets_held") == count, 10, 0.2)
    check("wasmkeep_websockets_held = %d (%s)" % (count, metric(owner, "wasmkeep_websockets_held")), bool(held))
    t_idle = time.monotonic()
    gone = wait_for(asleep, 30, 0.2)
    sleeping = metric(owner, "wasmkeep_holds_sleeping")
    check("the room leaves memory while they stay open (not resident after %.1f s; holds asleep %s)"
          % (time.monotonic() - t_idle, sleeping), bool(gone) and (sleeping or 0) >= 1)
    check("and the node still holds all %d (%s)" % (count, metric(owner, "wasmkeep_websockets_held")),
          metric(owner, "wasmkeep_websockets_held") == count)
    time.sleep(0.5)
    rss1 = rss_bytes(a.pid)
    per = (rss1 - rss0) / max(1, count)
    note("owner RSS %.1f MiB before, %.1f MiB with %d idle connections: %.0f bytes per connection"
         % (rss0 / 2**20, rss1 / 2**20, count, per))
    print("MEASURE bytes_per_connection %.0f" % per, flush=True)
    note("(RSS counts what the allocator keeps: a sanitized build's quarantine of freed memory makes it larger)")
    woken_before = metric(owner, 'wasmkeep_sleeping_holds_total{event="woken"}') or 0

    # One message from one connection wakes the room; every connection gets it.
    sel = selectors.DefaultSelector()
    for i, ws in enumerate(clients):
        ws.sock.setblocking(True)
        sel.register(ws.sock, selectors.EVENT_READ, i)
    got = {}
    text = "wake up, %d members" % count
    t_send = time.monotonic()
    clients[0].send_text(text)
    deadline = t_send + 60
    while len(got) < count and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            i = key.data
            try:
                kind, data = clients[i].recv(timeout=2)
            except (TimeoutError, WsClosed, OSError) as e:
                got[i] = ("error", str(e), time.monotonic())
                sel.unregister(key.fileobj)
                continue
            got[i] = (kind, data, time.monotonic())
            sel.unregister(key.fileobj)
    sel.close()
    expected = "%d\t%s" % (since + 1, text)
    right = [i for i, (k, d, _) in got.items() if k == "text" and d == expected]
    last_ms = (max(t for _, _, t in got.values()) - t_send) * 1000 if got else -1
    first_ms = (min(t for _, _, t in got.values()) - t_send) * 1000 if got else -1
    wrong = [(i, k, d) for i, (k, d, _) in got.items() if not (k == "text" and d == expected)][:3]
    check("one message wakes the room: all %d connections get it, numbered %d after its durable %d (%d did; %s)"
          % (count, since + 1, since, len(right), wrong or "none other"), len(right) == count)
    note("send to first delivery %.0f ms, to the last of %d %.0f ms" % (first_ms, count, last_ms))
    print("MEASURE wake_to_last_ms %.0f" % last_ms, flush=True)
    woken = (metric(owner, 'wasmkeep_sleeping_holds_total{event="woken"}') or 0) - woken_before
    check("its sleeping hold was woken on the same node (woken +%d)" % woken, woken >= 1)
    messages = stored(owner, room, token)
    check("GET /messages ends with it", bool(messages) and messages[-1] == (since + 1, text))
    for ws in clients:
        try:
            ws.sock.close()
        except OSError:
            pass
    check("the node lets them all go once closed (wasmkeep_websockets_held 0)",
          bool(wait_for(lambda: metric(owner, "wasmkeep_websockets_held") == 0, 20, 0.2)))


# ------------------------------------------------------------------------------- two members
def open_pair(a):
    """m1 straight to the owner, m2 through a.other (relayed: src/server/socket_relay.h). A
    503 from a.other (it relayed nothing: a build without the relay, or the relay failing)
    fails that check and opens m2 on the owner instead, so the rest still runs; returns
    (m1, m2)."""
    m1, m2 = Member("direct", a.token, a.room), Member("relayed", a.token, a.room)
    m1.open(a.owner, since=0)
    try:
        m2.open(a.other, since=0)
        m2.relayed = True
    except WsClosed as e:
        if "answered 503" not in str(e):
            raise
        note("the handshake through %s %s" % (a.other, str(e).strip()[:160]))
        m2.open(a.owner, since=0)
    check("a handshake through a node that does not own the room is relayed (101)", m2.relayed)
    return m1, m2


def sender(m, stop, every=0.03):
    """Sends "<name> #k" every `every` s while stop is unset (paused while the member is away)."""
    k = 0
    while not stop.is_set():
        if m.ws is not None and not m.ended.is_set():
            k += 1
            if not m.send("%s #%d" % (m.name, k)):
                k -= 1
        time.sleep(every)


def verify_members(members, node, a, what):
    """Each member saw numbers 1..N once each, where N is the room's last, with the stored texts."""
    messages = stored(node, a.room, a.token)
    if messages is None:
        check("the room's messages are read (%s)" % what, False)
        return None
    numbers = [n for n, _ in messages]
    check("GET /messages: %d messages numbered 1..%d, none skipped or repeated (%s)" % (len(numbers), len(numbers), what),
          contiguous(numbers))
    for m in members:
        seen = [n for n, _, _ in m.seen]
        ok = seen == numbers and [(n, t) for n, t, _ in m.seen] == messages
        if not ok:
            missing = sorted(set(numbers) - set(seen))[:10]
            twice = sorted({n for n in seen if seen.count(n) > 1})[:10]
            note("%s saw %d; missing %s, twice %s" % (m.name, len(seen), missing, twice))
            for e in m.events:
                if not e.startswith("got ") or any(e.startswith("got %d " % n) for n in missing + twice):
                    note("  " + e)
        check("%s saw every message exactly once, in order (%d)" % (m.name, len(seen)), ok)
    return messages


# ------------------------------------------------------------------ failover and drain
def disrupt(a, title, act, direct_end):
    """Two members sending every 30 ms; act() takes the room from its owner; both members'
    connections end (the direct one with direct_end, the relayed one with 1012), both come
    back through a survivor with ?since= within a.bound_ms of act(), and nothing is lost or
    seen twice. Returns the time to the last reconnection in ms."""
    m1, m2 = open_pair(a)
    stop = threading.Event()
    threads = [threading.Thread(target=sender, args=(m, stop), daemon=True) for m in (m1, m2)]
    for t in threads:
        t.start()
    own = lambda m: [t for t in m.texts() if t.startswith(m.name + " #")]  # noqa: E731
    wait_for(lambda: len(own(m1)) >= 20 and len(own(m2)) >= 20, 20)
    # Acknowledged: a member's own messages it saw come back from the room, read before act()
    # starts (what arrives meanwhile is acknowledged too, but not counted here).
    acked = {t for m in (m1, m2) for t in own(m)}
    sent_before = {t for m in (m1, m2) for t in m.sent}
    t_act = time.monotonic()
    act()
    check("%d messages acknowledged before the %s" % (len(acked), title), len(acked) >= 40)
    ended = m1.ended.wait(15) and m2.ended.wait(15)
    check("both connections end", bool(ended))
    check("the direct member's connection ends %s (%s)"
          % ("without a close frame" if direct_end == "eof" else "with %s" % direct_end, m1.ends), m1.ends == [direct_end])
    if m2.relayed:
        check("the relayed member is closed with 1012 (%s)" % m2.ends, m2.ends == [1012])
    else:
        note("no relayed member's 1012 to check (the handshake through a non-owner answered 503; "
             "it was on the owner too and ended with %s)" % m2.ends)
    back = {}
    for m, nodes in ((m1, a.survivors), (m2, a.survivors[1:] + a.survivors[:1])):
        node = m.reconnect(nodes, t_act + a.bound_ms / 1000 + 10)
        back[m.name] = (node, (time.monotonic() - t_act) * 1000)
    for m in (m1, m2):
        node, ms = back[m.name]
        check("%s reconnects through %s with ?since=<last seen> within %d ms of the %s (%.0f ms)"
              % (m.name, node, a.bound_ms, title, ms), node is not None and ms <= a.bound_ms)
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join()
    tail = ["%s after" % m.name for m in (m1, m2)]
    for m, text in zip((m1, m2), tail):
        m.send(text)
    check("after the %s both members' messages reach both" % title,
          all(bool(m.sees(text, 15)) for m in (m1, m2) for text in tail))
    time.sleep(0.5)
    messages = verify_members((m1, m2), a.survivors[0], a, "after the " + title)
    if messages is not None:
        texts = [t for _, t in messages]
        lost = sorted(acked - set(texts))
        check("every message acknowledged before the %s is stored (%d; lost %s)" % (title, len(acked), lost[:5]), not lost)
        check("and stored once", all(texts.count(t) == 1 for t in acked))
        pending = sent_before - acked
        note("%d sent in all, %d stored; of the %d sent before the %s but not yet seen back, %d stored"
             % (len(m1.sent) + len(m2.sent), len(messages), len(pending), title, len([t for t in pending if t in texts])))
    for m in (m1, m2):
        m.ws.close()
    return max(ms for _, ms in back.values())


def failover(a):
    ms = disrupt(a, "owner's kill -9", lambda: os.kill(a.pid, signal.SIGKILL), "eof")
    print("MEASURE reconnect_after_kill_ms %.0f" % ms, flush=True)


def drain(a):
    def act():
        t0 = time.monotonic()
        run = subprocess.run(a.drain_cmd, shell=True, capture_output=True, text=True, timeout=120)
        check("the owner drains (exit %d, %.0f ms)" % (run.returncode, (time.monotonic() - t0) * 1000), run.returncode == 0)
        if run.returncode != 0:
            note((run.stdout + run.stderr).strip()[-300:])
    ms = disrupt(a, "drain", act, 1012)
    print("MEASURE reconnect_after_drain_ms %.0f" % ms, flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("phase", choices=["basics", "hibernate", "failover", "drain"])
    p.add_argument("--owner", required=True, help="the room's owner, HOST:PORT")
    p.add_argument("--other", help="a node that does not own the room (relayed member)")
    p.add_argument("--survivors", default="", help="nodes to reconnect through, comma-separated")
    p.add_argument("--room", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--other-token", help="another tenant's token (basics)")
    p.add_argument("--pid", type=int, help="the owner's pid (hibernate: its RSS; failover: killed)")
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--bound-ms", type=int, default=10000)
    p.add_argument("--drain-cmd")
    a = p.parse_args()
    a.survivors = [s for s in a.survivors.split(",") if s]
    try:
        globals()[a.phase](a)
    except Exception as e:  # a broken phase is a failed check, not a traceback alone
        import traceback
        traceback.print_exc()
        check("the %s phase ran to its end (%s: %s)" % (a.phase, type(e).__name__, e), False)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
