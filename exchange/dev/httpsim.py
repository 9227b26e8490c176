"""What the shop simulators of the targets share: a real threaded HTTP/1.1 server on loopback,
started and stopped from a test, its open connections closed on stop (so that keep-alive does
not leak handler threads into the next test); and running one in the foreground
(``python -m exchange.dev.woosim --port N``, the same for bitrixsim) so that a shop owner can
point ``exchange check`` and ``exchange run`` at it."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import ssl
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from types import FrameType
from typing import Any


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


def arguments(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
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
    with sim:
        print(f"{name} simulator listening on {sim.url}", flush=True)
        print("point the service at it (then: exchange check, exchange run):", flush=True)
        for line in settings(sim):
            print(f"  {line}", flush=True)
        print("(Ctrl-C to stop)", flush=True)
        while not stopped.wait(0.5):
            pass
    print(f"{name} simulator stopped", flush=True)
