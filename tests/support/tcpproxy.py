"""A TCP proxy that can play a database server going away: what a restart looks like to a client.

    with TcpProxy("127.0.0.1", 5432) as proxy:
        url = proxy.rewrite(pg_url)     # the same database, reached through the proxy
        ...
        proxy.cut()                     # every open connection dropped, new ones refused
        proxy.restore()                 # accepting again, on the same port

A cut closes both sockets of every connection in flight (the client reads EOF or a reset, as
when PostgreSQL's backends exit) and closes the listening socket, so a new connection is refused
(ECONNREFUSED) until ``restore`` binds the same port again. Threads only: one accept loop, two
pumps per connection.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from types import TracebackType

from sqlalchemy.engine import make_url

CHUNK = 65536
ACCEPT_POLL_S = 0.05


Filter = Callable[[bytes], bytes]


class TcpProxy:
    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        downstream: Callable[[], Filter] | None = None,
    ) -> None:
        """``downstream``: makes, per connection, what the server's bytes pass through on their
        way to the client (a broker's answers made unreadable, say)."""
        self.target = (target_host, target_port)
        self.downstream = downstream
        self.port = 0
        self.accepted = 0  # connections accepted since start
        self.dropped = 0  # connections cut by ``cut``
        self._lock = threading.Lock()
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self._listener: socket.socket | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- life ----------------------------------------------------------------------------

    def start(self) -> TcpProxy:
        self._listen()
        self._thread = threading.Thread(target=self._accept_loop, name="tcpproxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.cut()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- faults --------------------------------------------------------------------------

    @property
    def refusing(self) -> bool:
        with self._lock:
            return self._listener is None

    def cut(self) -> int:
        """Drop every open connection and refuse new ones; returns how many were dropped."""
        with self._lock:
            listener, self._listener = self._listener, None
            pairs, self._pairs = self._pairs, set()
            self.dropped += len(pairs)
        if listener is not None:
            listener.close()
        for client, upstream in pairs:
            _close(client)
            _close(upstream)
        return len(pairs)

    def restore(self) -> None:
        """Accept connections again, on the same port."""
        if self.refusing and not self._stopping.is_set():
            self._listen()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._pairs)

    def rewrite(self, url: str) -> str:
        """The database URL ``url`` reached through this proxy (host and port replaced)."""
        parsed = make_url(url).set(host="127.0.0.1", port=self.port)
        return parsed.render_as_string(hide_password=False)

    # -- inside ----------------------------------------------------------------------------

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(ACCEPT_POLL_S)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                listener = self._listener
            if listener is None:
                self._stopping.wait(ACCEPT_POLL_S)
                continue
            try:
                client, _ = listener.accept()
            except (TimeoutError, OSError):  # poll again; OSError: closed by a cut
                continue
            client.settimeout(None)
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            pair = (client, upstream)
            with self._lock:
                if self._listener is not listener:  # cut while connecting
                    _close(client)
                    _close(upstream)
                    continue
                self._pairs.add(pair)
                self.accepted += 1
            answers = self.downstream() if self.downstream is not None else None
            for source, sink, through in ((client, upstream, None), (upstream, client, answers)):
                threading.Thread(
                    target=self._pump,
                    args=(pair, source, sink, through),
                    name="tcpproxy-pump",
                    daemon=True,
                ).start()

    def _pump(
        self,
        pair: tuple[socket.socket, socket.socket],
        source: socket.socket,
        sink: socket.socket,
        through: Filter | None,
    ) -> None:
        try:
            while True:
                data = source.recv(CHUNK)
                if not data:
                    break
                sink.sendall(through(data) if through is not None else data)
        except OSError:
            pass
        with self._lock:
            self._pairs.discard(pair)
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
