"""Raw sockets against a running ``exchange serve``: what an attacker (or a slow 1C) sends, byte
by byte, and how long the server takes to answer or hang up. Every wait is bounded."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit


def address(base: str) -> tuple[str, int]:
    parts = urlsplit(base)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def connect(base: str, source: str = "127.0.0.1", timeout: float = 10.0) -> socket.socket:
    """A TCP connection to serve from ``source`` (any 127.x.y.z is this host on Linux, so one
    test can come from several addresses)."""
    sock = socket.create_connection(address(base), timeout=timeout, source_address=(source, 0))
    sock.settimeout(timeout)
    return sock


def closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed the connection (reading what it sent on the way), or
    None if it was still open after ``seconds``."""
    start = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() - start < seconds:
        try:
            if sock.recv(65536) == b"":
                return time.monotonic() - start
        except TimeoutError:
            continue
        except ConnectionError:
            return time.monotonic() - start
    return None


def response(sock: socket.socket, seconds: float = 10.0) -> bytes:
    """Whatever the server sends until it closes or ``seconds`` pass, or until one whole
    response has come (a head and the body its Content-Length names)."""
    sock.settimeout(0.2)
    data = b""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionError:
            break
        if not chunk:
            break
        data += chunk
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length" and len(body) >= int(value):
                    return data
    return data


def status(raw: bytes) -> int | None:
    if not raw.startswith(b"HTTP/1.1 "):
        return None
    return int(raw[9:12])


def get(path: str, *headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", *headers, "", ""]
    return "\r\n".join(lines).encode()
