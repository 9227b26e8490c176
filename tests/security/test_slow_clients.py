"""Slowloris and friends against a real ``exchange serve`` on loopback (issue 21 item 4,
contract 9): a request's head within the head timeout, its body at the minimum rate after its
grace, at most so many connections in all and from one address. The limits run small here
(a head timeout of 0.5 s instead of 10); each timing test states its margin. The door holds no
database state, so SQLite alone is enough."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from doortools import closed_within, connect, get, response, status
from web_helpers import TOKEN, running, web_settings

from exchange.web.config import DoorLimits

pytestmark = [
    pytest.mark.parametrize("db_url", ["sqlite"], indirect=True),
    # Real sockets against timeouts of a fraction of a second: never beside another timing test.
    pytest.mark.timing,
]

# Every timing below allows this much beyond the limit for a loaded CI machine.
MARGIN = 2.5


def _intake_head(length: int, *extra: str) -> bytes:
    lines = [
        "POST /api/v1/intents HTTP/1.1",
        "Host: 127.0.0.1",
        f"Authorization: Bearer {TOKEN}",
        "Content-Type: application/json",
        f"Content-Length: {length}",
        *extra,
        "",
        "",
    ]
    return "\r\n".join(lines).encode()


def test_a_half_sent_head_is_closed_after_the_head_timeout(db_url: str, tmp_path: Path) -> None:
    limits = DoorLimits(head_timeout=0.5)
    with running(web_settings(db_url, tmp_path / "1c"), door=limits) as base:
        sock = connect(base)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        started = time.monotonic()
        for _ in range(3):  # a byte now and then does not buy more time
            time.sleep(0.1)
            sock.sendall(b"a")
        waited = closed_within(sock, limits.head_timeout + MARGIN)
        sock.close()
        assert waited is not None, "a half-sent head still held its connection"
        assert time.monotonic() - started >= limits.head_timeout * 0.8


def test_an_idle_connection_is_closed_after_the_head_timeout(db_url: str, tmp_path: Path) -> None:
    """A connection that never sends anything is the cheapest way to hold a descriptor."""
    limits = DoorLimits(head_timeout=0.5)
    with running(web_settings(db_url, tmp_path / "1c"), door=limits) as base:
        sock = connect(base)
        assert closed_within(sock, limits.head_timeout + MARGIN) is not None
        sock.close()


def test_a_body_below_the_rate_after_its_grace_is_cut(db_url: str, tmp_path: Path) -> None:
    limits = DoorLimits(head_timeout=5, body_grace=0.5, body_rate=4096)
    with running(web_settings(db_url, tmp_path / "1c"), door=limits) as base:
        sock = connect(base)
        sock.sendall(_intake_head(20_000))
        started = time.monotonic()
        cut = None
        # 100 bytes every 0.1 s: 1 KB/s, a quarter of the rate. The cut is due at
        # grace + bytes/rate, about 0.6 s here; allowed: that plus MARGIN.
        while time.monotonic() - started < limits.body_grace + MARGIN + 1:
            try:
                sock.sendall(b" " * 100)
            except OSError:
                cut = time.monotonic() - started
                break
            waited = closed_within(sock, 0.1)
            if waited is not None:
                cut = time.monotonic() - started
                break
        sock.close()
        assert cut is not None, "a body trickling at 1 KB/s was never cut"
        assert limits.body_grace * 0.8 <= cut <= limits.body_grace + MARGIN


def test_a_body_at_the_rate_is_never_cut_however_long(db_url: str, tmp_path: Path) -> None:
    """1C uploads large files over slow links: no fixed total time, only the rate."""
    limits = DoorLimits(head_timeout=5, body_grace=0.5, body_rate=4096)
    body = b'{"intents": []}' + b" " * 24_985  # 25,000 bytes
    with running(web_settings(db_url, tmp_path / "1c"), door=limits) as base:
        sock = connect(base)
        sock.sendall(_intake_head(len(body)))
        # 1,000 bytes every 0.1 s: about 10 KB/s (2.4x the rate; the margin for a loaded
        # machine), for 2.5 s: five times the grace.
        for offset in range(0, len(body), 1000):
            sock.sendall(body[offset : offset + 1000])
            time.sleep(0.1)
        raw = response(sock, 10)
        sock.close()
        assert status(raw) == 200, raw[:200]


def test_the_33rd_connection_from_one_address_is_refused_and_healthz_still_answers(
    db_url: str, tmp_path: Path
) -> None:
    limits = DoorLimits()  # the contract's 32 per address
    with running(web_settings(db_url, tmp_path / "1c"), door=limits) as base:
        held: list[socket.socket] = []
        try:
            for _ in range(limits.max_per_address):
                sock = connect(base)
                sock.sendall(get("/healthz"))  # answered: the connection is counted
                assert status(response(sock)) == 200
                held.append(sock)
            extra = connect(base)
            extra.sendall(get("/healthz"))
            refused = response(extra, 5)
            extra.close()
            assert status(refused) == 503, refused[:200]

            other = connect(base, source="127.0.0.2")
            other.sendall(get("/healthz"))
            assert status(response(other)) == 200
            other.close()

            held.pop().close()  # a connection that ends frees its place
            deadline = time.monotonic() + 5
            while True:
                again = connect(base)
                again.sendall(get("/healthz"))
                answer = response(again, 5)
                again.close()
                if status(answer) == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert status(answer) == 200, answer[:200]
        finally:
            for sock in held:
                sock.close()


def test_the_total_number_of_connections_is_capped(db_url: str, tmp_path: Path) -> None:
    limits = DoorLimits(max_connections=6, max_per_address=32)
    with running(web_settings(db_url, tmp_path / "1c"), door=limits) as base:
        held: list[socket.socket] = []
        try:
            for n in range(limits.max_connections):
                sock = connect(base, source=f"127.0.0.{10 + n}")
                sock.sendall(get("/healthz"))
                assert status(response(sock)) == 200
                held.append(sock)
            extra = connect(base, source="127.0.0.99")
            extra.sendall(get("/healthz"))
            refused = response(extra, 5)
            extra.close()
            assert status(refused) == 503, refused[:200]
        finally:
            for sock in held:
                sock.close()


def test_behind_the_proxy_the_forwarded_address_is_bounded_not_the_proxy(
    db_url: str, tmp_path: Path
) -> None:
    """Every connection comes from the proxy: counting them per TCP peer would let a few
    slow clients lock out everybody behind it. There the bound counts requests in progress
    per right-most X-Forwarded-For entry (429 beyond it); the proxy's connections count only
    toward the total."""
    limits = DoorLimits(max_per_address=2, body_grace=30)
    settings = web_settings(db_url, tmp_path / "1c", http_behind_proxy=True)
    with running(settings, door=limits) as base:
        held: list[socket.socket] = []
        try:
            for _ in range(limits.max_per_address):  # two uploads in progress from 1.2.3.4
                sock = connect(base)
                sock.sendall(_intake_head(100, "X-Forwarded-For: 9.9.9.9, 1.2.3.4") + b"{")
                held.append(sock)
            time.sleep(0.3)  # both heads read, both requests waiting for their bodies
            third = connect(base)
            third.sendall(get("/healthz", "X-Forwarded-For: 1.2.3.4"))
            assert status(response(third, 5)) == 429
            third.close()
            # The proxy's third connection is no refusal, and another client is served.
            other = connect(base)
            other.sendall(get("/healthz", "X-Forwarded-For: 9.9.9.9, 5.6.7.8"))
            assert status(response(other, 5)) == 200
            other.close()
        finally:
            for sock in held:
                sock.close()


def test_the_serve_unit_allows_descriptors_for_every_connection(db_url: str) -> None:
    """``db_url``: the module's mark asks for it; the unit file needs no database."""
    unit = Path(__file__).resolve().parents[2] / "config" / "exchange-serve.service"
    values = [
        int(line.split("=", 1)[1])
        for line in unit.read_text(encoding="utf-8").splitlines()
        if line.startswith("LimitNOFILE=")
    ]
    assert values and values[0] >= 4 * DoorLimits().max_connections
