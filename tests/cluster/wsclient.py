#!/usr/bin/python3
"""A small WebSocket client (RFC 6455) for the cluster tests, on the standard library only:
the opening handshake, masked frames out, frames in (a ping answered, a close seen), and
raw access for hostile cases (unmasked frames, garbage). Blocking, one socket a client.

    c = WsClient.connect("127.0.0.1:8080", "/v1/actors/acme/chat/lobby/ws", token=TOKEN)
    c.send_text("hello")
    kind, data = c.recv(timeout=5)   # ("text", "1\\thello"), ("close", (1012, "...")) ...

Command line (tests/cluster/websocket_test.sh): `wsclient.py NODE PATH TOKEN [TEXT...]`
opens, sends each TEXT, prints every message received until 1 s of silence.
"""
import base64
import os
import socket
import struct
import sys
import time


class WsClosed(Exception):
    pass


class WsClient:
    def __init__(self, sock, leftover=b""):
        self.sock = sock
        self.buf = leftover
        self.closed = None  # (code, reason) once a close frame came

    @staticmethod
    def handshake(node, path, token=None, protocols=None, headers=None, key=None, timeout=10):
        """Sends the opening handshake; returns (status, headers dict, socket, leftover)."""
        host, port = node.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = key or base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {node}", "Upgrade: websocket", "Connection: Upgrade",
                 "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Key: {key}"]
        if token and not protocols:
            lines.append(f"Authorization: Bearer {token}")
        if protocols:
            lines.append("Sec-WebSocket-Protocol: " + ", ".join(protocols))
        for name, value in (headers or {}).items():
            lines.append(f"{name}: {value}")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        text = head.decode("latin-1").split("\r\n")
        status = int(text[0].split()[1]) if text and len(text[0].split()) > 1 else 0
        got = {}
        for line in text[1:]:
            if ":" in line:
                n, v = line.split(":", 1)
                got[n.strip().lower()] = v.strip()
        return status, got, sock, rest

    @classmethod
    def connect(cls, node, path, token=None, protocols=None, timeout=10):
        status, headers, sock, rest = cls.handshake(node, path, token, protocols, timeout=timeout)
        if status != 101:
            body = rest.decode("utf-8", "replace")
            sock.close()
            raise WsClosed(f"handshake answered {status}: {body[:200]}")
        c = cls(sock, rest)
        c.headers = headers
        return c

    def send_frame(self, opcode, payload, mask=True, fin=True):
        head = bytes([(0x80 if fin else 0) | opcode])
        n = len(payload)
        bit = 0x80 if mask else 0
        if n < 126:
            head += bytes([bit | n])
        elif n < 65536:
            head += bytes([bit | 126]) + struct.pack("!H", n)
        else:
            head += bytes([bit | 127]) + struct.pack("!Q", n)
        if mask:
            m = os.urandom(4)
            payload = bytes(b ^ m[i % 4] for i, b in enumerate(payload))
            head += m
        self.sock.sendall(head + payload)

    def send_text(self, text):
        self.send_frame(0x1, text.encode())

    def send_binary(self, data):
        self.send_frame(0x2, data)

    def close(self, code=1000, reason=""):
        try:
            self.send_frame(0x8, struct.pack("!H", code) + reason.encode())
        except OSError:
            pass

    def _need(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame in time")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise WsClosed("the connection ended without a close frame")
            self.buf += chunk

    def recv(self, timeout=10):
        """The next message: ("text", str), ("binary", bytes) or ("close", (code, reason));
        raises TimeoutError, or WsClosed when the TCP connection ends without a close."""
        deadline = time.monotonic() + timeout
        message, kind = b"", None
        while True:
            self._need(2, deadline)
            b0, b1 = self.buf[0], self.buf[1]
            n, at = b1 & 0x7F, 2
            if n == 126:
                self._need(4, deadline)
                n, at = struct.unpack("!H", self.buf[2:4])[0], 4
            elif n == 127:
                self._need(10, deadline)
                n, at = struct.unpack("!Q", self.buf[2:10])[0], 10
            self._need(at + n, deadline)
            payload, self.buf = self.buf[at:at + n], self.buf[at + n:]
            opcode = b0 & 0x0F
            if opcode == 0x9:
                self.send_frame(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            if opcode == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                self.closed = (code, payload[2:].decode("utf-8", "replace"))
                self.close(code if code not in (1005, 1006) else 1000)
                return "close", self.closed
            if opcode in (0x1, 0x2):
                kind = "text" if opcode == 0x1 else "binary"
            message += payload
            if b0 & 0x80:
                return (kind, message.decode()) if kind == "text" else (kind, message)


def main():
    node, path, token = sys.argv[1:4]
    c = WsClient.connect(node, path, token=token)
    for text in sys.argv[4:]:
        c.send_text(text)
    while True:
        try:
            kind, data = c.recv(timeout=1)
        except (TimeoutError, WsClosed):
            break
        print(kind, data if kind != "close" else f"{data[0]} {data[1]}")
        if kind == "close":
            break


if __name__ == "__main__":
    main()
