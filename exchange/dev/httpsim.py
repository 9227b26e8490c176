"""A server on loopback in a thread of its own, started and stopped from a test, written once:

- ``LoopbackServer``: a real threaded HTTP/1.1 server (``http.server``), what the shop
  simulators of the targets share, its open connections closed on stop (so that keep-alive does
  not leak handler threads into the next test);
- ``LoopThread``: an asyncio event loop in a thread, for an asyncio server (``serve_app`` runs an
  aiohttp application on it; a raw ``asyncio.start_server`` or ``exchange serve`` itself run on
  it too) while the test's own thread blocks (a worker's run, Playwright, ``asyncio.run``);
- ``run_in_foreground``: a simulator on its own (``python -m exchange.dev.woosim --port N``, the
  same for bitrixsim), so that a shop owner can point ``exchange check`` and ``exchange run``
  at it.

(exchange/dev/sitesim.py keeps its own copy of the first for now.)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import math
import os
import signal
import socket
import ssl
import sys
import threading
import time
import typing
from collections.abc import Callable, Coroutine, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from types import FrameType
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from aiohttp import web

T = TypeVar("T")

# What a hosting provider's rate limiter in front of PHP answers (nginx limit_req with
# limit_req_status 429, a WAF's error page): its own HTML page, never the shop's JSON or words.
RATE_LIMITED_PAGE = (
    b"<!DOCTYPE html><html><head><title>429 Too Many Requests</title></head><body>"
    b"<h1>Too Many Requests</h1><p>You have sent too many requests in a given amount of time."
    b"</p></body></html>"
)


class RateLimit:
    """The host's limiter, as nginx's ``limit_req`` counts (a leaky bucket, the same as a token
    bucket): ``per_second`` requests a second, a burst of ``burst`` seconds of them (at least
    one request; a quarter of a second by default, as sitesim's shop of issue 13); a refused
    request takes nothing. Thread-safe."""

    def __init__(self) -> None:
        self._tokens: float | None = None
        self._at = 0.0
        self._lock = threading.Lock()

    def refuses(self, per_second: float | None, burst: float = 0.25) -> bool:
        if per_second is None:
            return False
        now = time.monotonic()
        most = max(1.0, per_second * burst)
        with self._lock:
            tokens = most if self._tokens is None else self._tokens
            tokens = min(most, tokens + (now - self._at) * per_second)
            self._at = now
            if tokens < 1.0:
                self._tokens = tokens
                return True
            self._tokens = tokens - 1.0
            return False


def php_get(query: str) -> dict[str, str]:
    """``$_GET`` as PHP builds it from a query (``php_default_treat_data``, then
    ``php_register_variable_ex`` in main/php_variables.c): percent and ``+`` decoded, the last
    of a repeated name wins, a name's leading spaces dropped and its spaces and dots (and a
    ``[`` never closed) turned into ``_`` (``a.b=1`` is ``$_GET["a_b"]``); a ``?`` inside the
    query is part of a name or value like any other character."""
    out: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        name = name.lstrip(" ")
        if not name:
            continue
        bracket = name.find("[")
        head, tail = (name, "") if bracket < 0 else (name[:bracket], name[bracket:])
        if tail and "]" not in tail:
            head, tail = name.replace("[", "_", 1), ""
        out[head.replace(" ", "_").replace(".", "_") + tail] = value
    return out


class LoopbackServer:
    """Subclasses set ``handler`` (a ``BaseHTTPRequestHandler`` whose ``server.sim`` is self)."""

    handler: type[BaseHTTPRequestHandler]

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.ssl_context: ssl.SSLContext | None = None  # set before start: HTTPS
        self.lock = threading.RLock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self.statuses: collections.Counter[int] = collections.Counter()  # answers by status

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://{self.host}:{self.port}"

    def start(self) -> LoopbackServer:
        server = _Server((self.host, self.port), self, self.handler)
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._server = server
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._server = self._thread = None
        server.shutdown()
        server.server_close()
        thread.join()
        with self.lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def track(self, connection: socket.socket, on: bool) -> None:
        with self.lock:
            if on:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], sim: LoopbackServer, handler: type[BaseHTTPRequestHandler]
    ) -> None:
        self.sim = sim
        super().__init__(address, handler)

    def server_bind(self) -> None:
        TCPServer.server_bind(self)  # no reverse DNS lookup (getfqdn)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        context = self.sim.ssl_context
        if context is not None:
            # The handshake at the handler's first read, in its thread: a client refusing the
            # certificate never stalls the accepting loop.
            connection = context.wrap_socket(
                connection, server_side=True, do_handshake_on_connect=False
            )
        return connection, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    sys_version = ""
    timeout = 30
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        self.server.sim.track(self.connection, True)  # type: ignore[attr-defined]

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.sim.track(self.connection, False)  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def answer(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        with self.server.sim.lock:  # type: ignore[attr-defined]
            self.server.sim.statuses[status] += 1  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def drop(self) -> None:
        """Shut the socket without an answer (the client sees the connection cut)."""
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True


class LoopThread:
    """An asyncio event loop running in a daemon thread: ``run`` a coroutine on it and wait for
    its result, ``submit`` one and go on, ``call`` a function in it. ``stop`` cancels whatever
    still runs there (a server's connection handlers), waits for it, and closes the loop."""

    def __init__(self, name: str = "loopback") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self) -> LoopThread:
        self._thread.start()
        return self

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return self.submit(coroutine).result(timeout)

    def call(self, function: Callable[..., Any], *args: Any) -> None:
        self.loop.call_soon_threadsafe(function, *args)

    def stop(self, timeout: float = 30) -> None:
        if self.loop.is_closed():
            return
        if self._thread.is_alive():
            with contextlib.suppress(concurrent.futures.TimeoutError):
                self.run(_cancel_the_others(), timeout)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()

    def __enter__(self) -> LoopThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _cancel_the_others() -> None:
    """What ``asyncio.run`` does at its end: the tasks left cancelled and waited for, then the
    async generators and the default executor shut down."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    loop = asyncio.get_running_loop()
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()


@contextlib.contextmanager
def serve_app(app: web.Application, host: str = "127.0.0.1") -> Iterator[str]:
    """``app`` served on ``host`` (any free port) from a ``LoopThread`` until the block ends;
    yields its base URL."""

    async def start() -> web.AppRunner:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, 0).start()
        return runner

    with LoopThread("aiohttp-app") as thread:
        runner = thread.run(start())
        try:
            yield f"http://{host}:{runner.addresses[0][1]}"
        finally:
            thread.run(runner.cleanup())


# -- in the foreground ---------------------------------------------------------------------------


def credential(variable: str, demo: str) -> tuple[str, bool]:
    """A simulator's credential: the service's own variable when it is set (one environment
    then serves the simulator and ``exchange check``), else the simulator's demo value; and
    whether it came from the environment (then it is printed masked)."""
    value = os.environ.get(variable)
    return (value, True) if value else (demo, False)


def setting_line(variable: str, value: str, given: bool = False) -> str:
    """``EXCHANGE_X=value`` as a shell takes it; a value the person gave (a secret, from the
    environment or the command line) is not printed, only said to be in force."""
    if given:
        return f"# {variable}: the value you gave (not shown)"
    shown = value
    if any(c in shown for c in " \"'{}$#&;|<>()*?`!") or not shown.isascii():
        shown = "'" + shown.replace("'", "'\\''") + "'"
    return f"{variable}={shown}"


def switches_line(switches: Any) -> str:
    """A simulator's switches in force (a dataclass), one line as its command line takes them
    (``true``/``false``, ``off`` for none), printed at the start."""

    def shown(value: object) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return "off" if value is None else str(value)

    pairs = [f"{f.name}={shown(getattr(switches, f.name))}" for f in dataclasses.fields(switches)]
    return "# switches in force: " + ", ".join(pairs)


class OneLineParser(argparse.ArgumentParser):
    """A simulator's command line: a bad argument is one line on stderr and exit 2 (never the
    usage block, never a traceback)."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def time_scale(text: str) -> float:
    """``--time-scale`` of a simulator on its own: a number above 0. A still clock (0) moves
    only when a test advances it; run on its own nothing would, and the hour of limits, the
    minutes of "Circle is open" and the processing of a task would never pass."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(
            f"{text} is not above 0 (a still clock, 0, is for tests, which move it)"
        )
    return value


@contextlib.contextmanager
def listening(sim: Any, name: str) -> Iterator[None]:
    """``sim`` started (``with sim``) for the block; a port it cannot take (in use, not
    allowed) is one line on stderr and exit 2."""
    try:
        sim.start()
    except OSError as exc:
        print(
            f"{name} simulator: cannot listen on {sim.host}:{sim.port}: {exc.strerror or exc}",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(2) from None
    try:
        yield
    finally:
        sim.stop()


def arguments(prog: str, description: str) -> argparse.ArgumentParser:
    parser = OneLineParser(prog=prog, description=description)
    parser.add_argument("--host", default="127.0.0.1", help="loopback by default")
    parser.add_argument("--port", type=int, default=8081, help="0 picks a free port")
    return parser


def run_in_foreground(
    sim: LoopbackServer, name: str, settings: Callable[[LoopbackServer], list[str]]
) -> None:
    """Serve ``sim`` until SIGINT or SIGTERM, having printed (flushed, on stdout) where it
    listens and the ``EXCHANGE_*`` settings that point the service at it."""
    stopped = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    # Installed explicitly: a shell starting us in the background leaves SIGINT ignored, and
    # SIGTERM (docker stop, systemd) deserves the same clean stop as Ctrl-C.
    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    with listening(sim, name):
        print(f"{name} simulator listening on {sim.url}", flush=True)
        print("point the service at it (then: exchange check, exchange run):", flush=True)
        for line in settings(sim):
            print(f"  {line}", flush=True)
        print("(Ctrl-C to stop)", flush=True)
        while not stopped.wait(0.5):
            pass
    print(f"{name} simulator stopped", flush=True)
