"""What a connection may take from ``exchange serve`` (contract 9): time, bytes, descriptors.

Four bounds, each where aiohttp and asyncio already offer the hook, so nothing of aiohttp's
request handling is copied or patched:

- **The head within ``head_timeout``** (10 s): aiohttp's own ``keepalive_timeout``. Its
  timer starts when a connection is made and again after each response, and it closes the
  connection if no complete request head has arrived by then, however the bytes trickle in
  (received data does not restart it). So the one setting is both the head timeout and the
  idle keep-alive time, which is what a server that must not be held open wants; a TLS
  handshake gets the same time (``ssl_handshake_timeout``).
- **The body at ``body_rate`` bytes/s after its first ``body_grace`` seconds** (16 KiB/s after
  10 s): a middleware arms one timer per request that has a body, in the manner of Apache's
  ``mod_reqtimeout`` (``body=10,MinRate=16384``): the body is due ``body_grace`` seconds plus
  one second per ``body_rate`` bytes received after the handler started, so a slow link that
  keeps sending is never cut by a fixed total time, and one that stalls is cut within the grace.
  The credit a fast start earns is bounded by the route's body limit (its bytes / the rate).
  Time while the transport is paused (the handler has not read what arrived: aiohttp's flow
  control, ``transport.is_reading()`` false) is the server's, not the client's: the window
  starts again. A cut aborts the transport, which the handler sees as a client that went
  away (the same path as a dropped upload).
- **At most ``max_connections`` connections, ``max_per_address`` from one address**: counted in
  a protocol that wraps aiohttp's per connection before it is created (``admit``), because a
  connection that never sends a head must count too. A refused connection gets a 503 written
  at once and is closed; it never reaches aiohttp. An "address" is ``client_key``'s: an IPv6
  client counts as its /64, the block one host is given (an IPv4-mapped one as its IPv4
  address); the sign-in and guess throttles count by the same key.
- **The body's size**, per route (``body_limit``): a ``Content-Length`` above the limit is
  answered 413 before anything is read; the request is handed on with ``client_max_size`` set
  to that limit, so ``read()``/``post()`` answer 413 when a chunked body runs past it.

Behind ``EXCHANGE_HTTP_BEHIND_PROXY=true`` every connection comes from the proxy, so a count
per TCP peer would count the proxy: 32 slow clients would lock everybody else out. There the
per-address bound counts requests in progress per right-most ``X-Forwarded-For`` entry (the
address the proxy saw), answered 429 beyond it, and the connection count per peer is not
applied; the total still is. Before the head is read serve cannot know the client, so the
proxy bounds its clients' unfinished heads (``client_header_timeout``, ``limit_conn``, see
docs/deployment.md), and serve should listen where only the proxy reaches it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from exchange.web.config import DoorLimits

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"Retry-After: 10\r\n"
    b"Connection: close\r\n"
    b"Content-Length: 22\r\n"
    b"\r\n"
    b"too many connections\r\n"
)


class _Warnings:
    """One log line per kind of refusal a minute at most, with how many there were: a flood
    of refused connections must not become a flood of log lines."""

    def __init__(self, every: float = 60.0) -> None:
        self.every = every
        self.last: dict[str, float] = {}
        self.count: Counter[str] = Counter()

    def warn(self, kind: str, message: str) -> None:
        self.count[kind] += 1
        now = time.monotonic()
        if now - self.last.get(kind, -self.every) >= self.every:
            log.warning("%s (%d since the last such line)", message, self.count.pop(kind))
            self.last[kind] = now


def client_key(address: str) -> str:
    """What one client is counted as, from its IP address: an IPv6 address as its /64 (a host
    is given a whole /64 and may send from any address in it; privacy addresses change by
    themselves), an IPv4-mapped IPv6 address as the IPv4 address, an IPv4 address as itself.
    The one rule for every count per address: the door's connections and requests in
    progress, the sign-in throttle and the guess throttles. Anything else (no address: "-")
    is counted as written."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # without an IPv6 zone ("%eth0")
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def client_address(request: web.Request, behind_proxy: bool) -> str:
    """The client's key (``client_key``) from its address: behind the proxy
    (``EXCHANGE_HTTP_BEHIND_PROXY``) the right-most ``X-Forwarded-For`` entry, the one the
    proxy itself wrote (entries to its left are the client's to choose); elsewhere the peer's."""
    if behind_proxy:
        entries = [
            entry.strip()
            for header in request.headers.getall("X-Forwarded-For", [])
            for entry in header.split(",")
            if entry.strip()
        ]
        if entries:
            return client_key(entries[-1])
    return client_key(request.remote or "-")


class Door:
    """The bounds of one serve process (shared by its listening sockets)."""

    def __init__(
        self,
        limits: DoorLimits,
        body_limit: Callable[[web.Request], int],
        *,
        behind_proxy: bool = False,
    ) -> None:
        self.limits = limits
        self.body_limit = body_limit
        self.behind_proxy = behind_proxy
        self.total = 0
        self.per_peer: Counter[str] = Counter()
        self.in_progress: Counter[str] = Counter()
        self._warnings = _Warnings()

    # -- connections -----------------------------------------------------------------------

    def admit(self, transport: asyncio.BaseTransport) -> str | None:
        """The key the connection is counted under, or None when it is refused."""
        peer = transport.get_extra_info("peername")
        address = client_key(str(peer[0]) if isinstance(peer, tuple) and peer else "-")
        if self.total >= self.limits.max_connections:
            self._warnings.warn(
                "total", f"connection refused: {self.limits.max_connections} connections open"
            )
            return None
        if not self.behind_proxy and self.per_peer[address] >= self.limits.max_per_address:
            self._warnings.warn(
                "address",
                f"connection from {address} refused: "
                f"{self.limits.max_per_address} connections open from that address",
            )
            return None
        self.total += 1
        self.per_peer[address] += 1
        return address

    def release(self, address: str) -> None:
        self.total -= 1
        self.per_peer[address] -= 1
        if self.per_peer[address] <= 0:
            del self.per_peer[address]

    def protocol_factory(
        self, make: Callable[[], asyncio.BaseProtocol]
    ) -> Callable[[], asyncio.Protocol]:
        """``make``: aiohttp's protocol factory (the runner's ``Server``)."""
        return lambda: _Counted(self, make)

    # -- requests --------------------------------------------------------------------------

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        limit = self.body_limit(request)
        length = request.content_length
        if length is not None and length > limit:
            # Answered before a byte of the body is read; aiohttp drains what the client
            # still sends for its lingering time (discarded), then closes.
            raise web.HTTPRequestEntityTooLarge(
                max_size=limit, actual_size=length, headers={"Connection": "close"}
            )
        client = client_address(request, True) if self.behind_proxy else None
        if client is not None:
            if self.in_progress[client] >= self.limits.max_per_address:
                self._warnings.warn(
                    "forwarded",
                    f"request from {client} refused: "
                    f"{self.limits.max_per_address} of its requests in progress",
                )
                raise web.HTTPTooManyRequests(
                    text="too many requests in progress from this address\n",
                    headers={"Retry-After": "10"},
                )
            self.in_progress[client] += 1
        watch = _BodyWatch(request, self.limits, self._warnings)
        try:
            return await handler(request.clone(client_max_size=limit))
        finally:
            watch.stop()
            if client is not None:
                self.in_progress[client] -= 1
                if self.in_progress[client] <= 0:
                    del self.in_progress[client]


class _BodyWatch:
    """Cuts a request whose body falls below the rate (see the module's docstring)."""

    def __init__(self, request: web.Request, limits: DoorLimits, warnings: _Warnings) -> None:
        self.request = request
        self.limits = limits
        self.warnings = warnings
        self.handle: asyncio.TimerHandle | None = None
        if request.content.is_eof():  # no body, or all of it has arrived
            return
        self.loop = asyncio.get_running_loop()
        self._window(self.loop.time())

    def _window(self, now: float) -> None:
        self.start, self.base = now, self.request.content.total_bytes
        self.handle = self.loop.call_at(now + self.limits.body_grace, self._check)

    def _check(self) -> None:
        self.handle = None
        content, transport = self.request.content, self.request.transport
        if content.is_eof() or transport is None or transport.is_closing():
            return
        now = self.loop.time()
        if not transport.is_reading():  # the handler is behind, not the client
            self._window(now)
            return
        due = (
            self.start
            + self.limits.body_grace
            + (content.total_bytes - self.base) / self.limits.body_rate
        )
        if now < due:
            self.handle = self.loop.call_at(due, self._check)
            return
        self.warnings.warn(
            "slow-body",
            f"request {self.request.method} {self.request.path[:100]} cut: its body came "
            f"slower than {self.limits.body_rate} bytes/s",
        )
        transport.abort()

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class _Counted(asyncio.Protocol):
    """aiohttp's protocol for one connection, made only once the connection is admitted;
    every callback is passed on to it as it is."""

    def __init__(self, door: Door, make: Callable[[], asyncio.BaseProtocol]) -> None:
        self.door = door
        self.make = make
        self.inner: Any = None
        self.address: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.address = self.door.admit(transport)
        if self.address is None:
            if isinstance(transport, asyncio.WriteTransport):
                transport.write(_REFUSAL)
            transport.close()
            return
        self.inner = self.make()
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.inner is None or self.address is None:
            return
        self.door.release(self.address)
        self.address = None
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()


class DoorSite(web.BaseSite):
    """aiohttp's ``TCPSite`` with the door's protocol around aiohttp's (``BaseSite`` is the
    extension point aiohttp offers for a listening socket of one's own)."""

    def __init__(
        self,
        runner: web.BaseRunner,
        door: Door,
        host: str,
        port: int,
        *,
        ssl_context: Any = None,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self._door = door
        self._host, self._port = host, port

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._door.protocol_factory(server),
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            ssl_handshake_timeout=self._door.limits.head_timeout if self._ssl_context else None,
        )
