"""A simulator of the shop site's HTTP API, for integration tests and ``exchange demo``.

It is the HTTP front end of the site model (``exchange.dev.sitemodel``, which decides every
answer to an update, as ``FakeSite`` and ``bench/fastsite.py`` do with the same model and the
same conformance table): the site's promises (contract 5) over real HTTP/1.1 with keep-alive,
broken on purpose through ``Faults`` (mutable while it runs):

    POST /api/v1/updates        one update; ``Idempotency-Key`` must equal the body's message_id
    POST /api/v1/updates:batch  ``{"items": [...]}``; 404 unless ``batch_enabled``
    GET  /api/v1/health         200 ``{"status": "ok"}`` when the token is accepted, no effect

The order of checks for one update (a batch item goes through the same steps); the model's
steps are numbered as in its docstring:

    1. auth            ``faults.auth_status`` for every request, else 401 unless the bearer
                       token matches (``token=None`` accepts any or none)
    2. outage          503 (with Retry-After when ``faults.retry_after`` is set)
    3. model 1-3       400 for what is not an update, 422 for a payload that breaks contract
                       1, a replay of a key applied before (its answer again, byte for byte,
                       with no effect and no fault), 422 idempotency-key-reuse
    4. poison          500 for the aggregates in ``faults.poison``, forever
    5. reject          422 rejected for the aggregates in ``faults.reject``
    6. random failure  503 with probability ``faults.fail_rate`` (Retry-After when set)
    7. model 5-7       404 unknown-sku for a SKU outside ``catalog`` (None: every SKU),
                       409 ``{"error": "stale", "current_version": N}`` when version <= N held
                       (skipped with ``check_versions=False``, see below), else the effect:
                       200 ``{"receipt": "R-<n>"}``, the only answer stored for replay
    8. drop            with ``faults.drop_after_effect_rate``: the socket is shut without answer
    9. slow            with ``faults.slow_rate``: ``faults.slow_seconds`` of sleep, then answer

``faults.answer_fault`` breaks the answer to every single update (not a batch) while set:
``reset`` (after step 2: the connection is reset, nothing read or applied), ``redirect``
(after step 2: 307 to ``faults.redirect_to``, nothing applied; a batch request gets it too,
as a whole); and, only when step 7 applied an effect, ``cut-off`` (the 200 stops halfway
through its Content-Length and the socket is shut), ``not-json`` (the 200's body is
``OK R-<n>``), ``huge`` (the 200's JSON is padded to ``HUGE_BODY`` bytes, streamed). The
stored answer for replay is the plain one.

Capacity (contract 5c), checked before everything else, as nginx and PHP-FPM would:

    rate limit   ``faults.rate_limit`` requests/s (a token bucket holding ``rate_burst``
                 seconds of it): beyond, 429 with ``Retry-After: rate_retry_after``
    worker pool  ``faults.pool_workers`` requests served at once, each taking
                 ``pool_service_seconds``; up to ``pool_queue`` more wait (the latency grows);
                 beyond, 503 at once (``pool_retry_after`` when set)
    capacity     ``faults.capacity`` multiplies both; ``capacity_schedule`` changes it over the
                 run: ``((10, 0.5), (20, 1.0))`` halves it 10 s after the first update request
                 and restores it at 20 s
    down         503 to every request, the health check included (a real site down), with
                 ``faults.retry_after`` when set

``rate_limited_shop``, ``pool_shop`` and ``halving_shop`` make the three shops of issue 13.

Pass ``ssl_context`` (a server-side ``ssl.SSLContext``) to serve HTTPS instead of HTTP.

``check_versions=False`` (``--no-version-check``): a site that keeps only the idempotency
promise. It never answers 409 stale and applies whatever version arrives, so an old price sent
after a newer one lands and the site shows it (``held_versions`` is then the last version
applied, not the highest). ``stale_writes()`` lists every effect whose version is below one
applied before for its aggregate: against such a site, the service's own promise ("a version at
or below the delivered one is never sent") is what the tests and the demo check.
``forget_keys()`` forgets every stored answer, as a site whose key retention ran out;
``forget_versions()`` the versions held, as a site restored from an old backup.
``received_keys()`` names every message_id that reached the site in a well-formed update.
``withhold_drops`` turns on the site model's withholding switch, a test device (a sharp price
drop is taken and withheld from buyers until released; exchange/dev/sitemodel.py).

Bodies larger than 10 MB get 413 as they are read, before any of this. A batch is checked for
auth, outage, its envelope (``{"items": [...]}``, at most one item per aggregate) and the
random failure once, as a whole; drop and slow are rolled
once for the whole answer; everything else is per item, keyed by the item's message_id.
Health reports only on the token: it stays 200 during an outage, as ``auth_status`` is the one
fault it shows.

Bookkeeping: ``request_count`` and ``requests_by_status`` count update requests, a batch item
as one (a batch refused as a whole counts once), an unanswered (dropped) one under ``DROPPED``.
With ``keep_requests=True`` the site also keeps every request it read, as it arrived
(``received()``: method, target, headers with names in lower case, body), to see what a client
put on the wire from the other end; off by default, as a long run would keep them all.
Random draws come from one ``random.Random(faults.seed)``, restarted when the seed or the Faults
object changes, and a rate of 0 draws nothing: a run is reproducible from its seed.

Run ``python -m exchange.dev.sitesim --port 8080 --token T`` to serve one in the foreground.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import random
import signal
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from types import FrameType, TracebackType
from typing import Any, Final
from urllib.parse import urlsplit

from exchange.dev.sitemodel import (
    BATCH_PATH,
    HEALTH_PATH,
    HEALTHY,
    UPDATES_PATH,
    BadRequest,
    Effect,
    Gate,
    Reply,
    SiteModel,
    Update,
    refuse_token,
    reply,
)

MAX_BODY: Final = 10 * 1024 * 1024
DROPPED: Final = 0  # the "status" counted for a request whose connection was shut unanswered
IDLE_TIMEOUT: Final = 60.0  # seconds a keep-alive connection may sit idle
ANSWER_FAULTS: Final = ("reset", "redirect", "cut-off", "not-json", "huge")
HUGE_BODY: Final = 256 * 1024 * 1024  # bytes of a "huge" answer, streamed in chunks


@dataclass
class Faults:
    """What the site does wrong. Fields may be changed while the simulator runs."""

    fail_rate: float = 0.0
    retry_after: str | None = None
    drop_after_effect_rate: float = 0.0
    slow_rate: float = 0.0
    slow_seconds: float = 0.0
    poison: set[str] = field(default_factory=set)
    reject: set[str] = field(default_factory=set)
    outage: bool = False
    auth_status: int | None = None
    seed: int = 0
    answer_fault: str | None = None  # one of ANSWER_FAULTS; see the module docstring
    redirect_to: str = "https://elsewhere.invalid/api/v1/updates"
    # The shop's capacity (contract 5c); see "Capacity" in the module docstring.
    rate_limit: float | None = None  # requests/s before 429 (a token bucket)
    rate_burst: float = 0.25  # seconds of rate_limit the bucket holds
    rate_retry_after: str | None = "1"  # Retry-After sent with the 429
    pool_workers: int | None = None  # PHP workers: requests served at once
    pool_service_seconds: float = 0.02  # each request's time in a worker
    pool_queue: int = 8  # requests that wait for a worker; beyond: 503 at once
    pool_retry_after: str | None = None  # Retry-After sent with the pool's 503
    capacity: float = 1.0  # a factor on rate_limit and pool_workers
    # (seconds since the first update request, capacity factor from then on)
    capacity_schedule: tuple[tuple[float, float], ...] = ()
    down: bool = False  # the whole site is down: 503 to every request, health included

    def __post_init__(self) -> None:
        if self.answer_fault not in (None, *ANSWER_FAULTS):
            raise ValueError(f"answer_fault must be None or one of {ANSWER_FAULTS}")
        for name in ("fail_rate", "drop_after_effect_rate", "slow_rate"):
            rate = getattr(self, name)
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, not {rate}")
        if self.slow_seconds < 0:
            raise ValueError(f"slow_seconds must not be negative, not {self.slow_seconds}")
        if self.rate_limit is not None and self.rate_limit <= 0:
            raise ValueError(f"rate_limit must be positive, not {self.rate_limit}")
        if self.pool_workers is not None and self.pool_workers < 1:
            raise ValueError(f"pool_workers must be 1 or more, not {self.pool_workers}")
        if self.auth_status not in (None, 401, 403):
            raise ValueError(f"auth_status must be None, 401 or 403, not {self.auth_status}")


@dataclass(frozen=True, slots=True)
class Received:
    """One request as the site read it: before any check, fault or answer."""

    method: str
    path: str  # the request target as sent (origin form, or absolute form through a proxy)
    headers: dict[str, str]  # names in lower case
    body: bytes


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What the handler must do: answer (possibly late), or shut the socket unanswered."""

    answer: Reply
    drop: bool = False
    delay: float = 0.0
    answer_fault: str | None = None


class SiteSimulator:
    """The shop site's API on a local port; see the module docstring for its behaviour."""

    def __init__(
        self,
        token: str | None = "test-token",
        faults: Faults | None = None,
        *,
        batch_enabled: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        keep_requests: bool = False,
        check_versions: bool = True,
        catalog: Iterable[str] | None = None,
        withhold_drops: Decimal | None = None,
    ) -> None:
        """``withhold_drops``: the site model's withholding switch, a test device
        (exchange/dev/sitemodel.py)."""
        self.token = token
        self.check_versions = check_versions
        self.faults = faults if faults is not None else Faults()
        self.batch_enabled = batch_enabled
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self._url: str | None = None
        self._lock = threading.Lock()
        self._rng = random.Random(self.faults.seed)
        self._rng_source: tuple[int, int] = (id(self.faults), self.faults.seed)
        self.model = SiteModel(
            check_versions=check_versions, catalog=catalog, withhold_drops=withhold_drops
        )
        self._request_count = 0
        self._by_status: collections.Counter[int] = collections.Counter()
        self._received: list[Received] | None = [] if keep_requests else None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._gate = threading.Condition()
        self._tokens: float | None = None
        self._tokens_at = 0.0
        self._first_request: float | None = None
        self._pool_busy = 0
        self._pool_waiting = 0
        self._pool_served = 0

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("the simulator has not been started")
        return self._url

    def start(self) -> SiteSimulator:
        if self._server is not None:
            raise RuntimeError("the simulator is already running")
        self._stopping.clear()
        server = _Server((self.host, self.port), self)
        self.port = server.server_address[1]
        self._url = f"{'https' if self.ssl_context else 'http'}://{self.host}:{self.port}"
        # serve_forever notices shutdown() only between polls; tests start and stop many of
        # these, so a short poll keeps stop() quick at the price of an idle wake-up.
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"sitesim:{self.port}",
            daemon=True,
        )
        self._server = server
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._stopping.set()  # wakes handlers sleeping for slow_seconds
        server.shutdown()
        server.server_close()
        thread.join()
        # Keep-alive connections would otherwise hold their handler threads (and sockets)
        # open after stop(), leaking into the next test.
        with self._lock:
            connections = list(self._connections.items())
        for connection, _ in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        for _, handler_thread in connections:
            handler_thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> SiteSimulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- inspection ----------------------------------------------------------------------------

    def effects(self, since: int = 0) -> list[Effect]:
        """The effects applied, in order; ``since``: from that index on (a watcher's next look
        copies only what is new)."""
        with self._lock:
            return [
                replace(e, payload=copy.deepcopy(e.payload)) for e in self.model.effects[since:]
            ]

    def held_versions(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self.model.held)

    def applied_versions(self, kind: str, aggregate: str) -> list[int]:
        with self._lock:
            return [
                e.version for e in self.model.effects if (e.kind, e.aggregate) == (kind, aggregate)
            ]

    def stale_writes(self) -> list[Effect]:
        """Effects applied below a version already applied to their aggregate (possible only
        with ``check_versions=False``): an old price over a newer one."""
        with self._lock:
            return list(self.model.stale_writes)

    def received_keys(self) -> set[str]:
        """Every message_id that reached the site in a well-formed update, applied or not."""
        with self._lock:
            return set(self.model.received_keys)

    def forget_keys(self) -> None:
        """Forget every stored answer (a site whose key retention ran out): a key seen again
        is then processed as new."""
        with self._lock:
            self.model.forget_keys()

    def forget_versions(self) -> None:
        """Forget the versions held (a site restored from an old backup): no 409 stale until
        an update is applied again."""
        with self._lock:
            self.model.forget_versions()

    def effect_counts(self) -> collections.Counter[str]:
        with self._lock:
            return collections.Counter(self.model.effect_counts)

    @property
    def request_count(self) -> int:
        """Update requests received: singles, and each item of a batch that got that far."""
        with self._lock:
            return self._request_count

    def requests_by_status(self) -> collections.Counter[int]:
        """Statuses answered to update requests; ``DROPPED`` (0) for those left unanswered."""
        with self._lock:
            return collections.Counter(self._by_status)

    def received(self) -> list[Received]:
        """Every request read so far, in order (``keep_requests=True``; else an error)."""
        with self._lock:
            if self._received is None:
                raise RuntimeError("the simulator keeps no requests: pass keep_requests=True")
            return list(self._received)

    def reset_counters(self) -> None:
        """Forget the request counts; the site's state (effects, versions, keys) stays."""
        with self._lock:
            self._request_count = 0
            self._by_status.clear()

    # -- the site's behaviour (called by the handler) ------------------------------------------

    def capacity_now(self) -> float:
        """The capacity factor in force (``capacity``, or the schedule's entry for now)."""
        faults = self.faults
        factor = faults.capacity
        if faults.capacity_schedule and self._first_request is not None:
            elapsed = time.monotonic() - self._first_request
            for since, scheduled in faults.capacity_schedule:
                if elapsed >= since:
                    factor = scheduled
        return factor

    def _admit(self) -> Reply | None:
        """The capacity gates before anything else (nginx's limit_req, then PHP's pool): a
        refusal, or None once a worker of the pool (if any) is held: release with _leave."""
        faults = self.faults
        with self._gate:
            now = time.monotonic()
            if self._first_request is None:
                self._first_request = now
            if faults.down:
                return self._unavailable(faults, "site down")
            factor = self.capacity_now()
            if faults.rate_limit is not None:
                rate = faults.rate_limit * factor
                burst = max(1.0, rate * faults.rate_burst)
                if self._tokens is None:
                    self._tokens = burst
                self._tokens = min(burst, self._tokens + (now - self._tokens_at) * rate)
                self._tokens_at = now
                if self._tokens < 1.0:
                    headers = (
                        ()
                        if faults.rate_retry_after is None
                        else (("Retry-After", faults.rate_retry_after),)
                    )
                    return reply(429, {"error": "rate limited"}, *headers)
                self._tokens -= 1.0
            if faults.pool_workers is None:
                return None
            workers = max(1, round(faults.pool_workers * factor))
            if self._pool_busy >= workers and self._pool_waiting >= faults.pool_queue:
                headers = (
                    ()
                    if faults.pool_retry_after is None
                    else (("Retry-After", faults.pool_retry_after),)
                )
                return reply(503, {"error": "no PHP worker free"}, *headers)
            self._pool_waiting += 1
            while self._pool_busy >= max(1, round(faults.pool_workers * self.capacity_now())):
                if self._stopping.is_set():
                    break
                self._gate.wait(0.05)
            self._pool_waiting -= 1
            self._pool_busy += 1
        self._sleep(faults.pool_service_seconds)
        return None

    def _leave(self) -> None:
        if self.faults.pool_workers is None:
            return
        with self._gate:
            self._pool_busy = max(0, self._pool_busy - 1)
            self._pool_served += 1
            self._gate.notify()

    def _health(self, authorization: str | None) -> Reply:
        if self.faults.down:
            return self._unavailable(self.faults, "site down")
        with self._lock:
            refusal = self._refusal(self.faults, authorization)
        return refusal or HEALTHY

    def _update(self, authorization: str | None, key: str | None, raw: bytes) -> _Outcome:
        with self._lock:
            faults = self.faults
            early = self._refusal(faults, authorization) or self._outage(faults)
            if early is not None:
                self._count(early.status)
                return _Outcome(early)
            if faults.answer_fault == "reset":
                self._count(DROPPED)
                return _Outcome(reply(200, {}), answer_fault="reset")
            if faults.answer_fault == "redirect":
                self._count(307)
                return _Outcome(reply(307, {"moved": True}, ("Location", faults.redirect_to)))
            result = self.model.single(raw, key, self._fault_gate(faults, roll_failure=True))
            outcome = self._late_faults(faults, result.reply, result.applied)
            if result.applied and not outcome.drop and faults.answer_fault is not None:
                outcome = replace(outcome, answer_fault=faults.answer_fault)
            self._count(DROPPED if outcome.drop else result.reply.status)
            return outcome

    def _batch(self, authorization: str | None, raw: bytes) -> _Outcome:
        with self._lock:
            faults = self.faults
            early = self._refusal(faults, authorization) or self._outage(faults)
            items: list[Any] = []
            if early is None:
                try:
                    items = self.model.read_batch(raw)
                except BadRequest as exc:
                    early = reply(400, {"error": str(exc)})
            if early is None and self._roll(faults, faults.fail_rate):
                early = self._unavailable(faults, "injected failure")
            if early is None and faults.answer_fault == "redirect":
                early = reply(307, {"moved": True}, ("Location", faults.redirect_to))
            if early is not None:
                self._count(early.status)  # refused as a whole: one request
                return _Outcome(early)
            result = self.model.answer_batch(items, self._fault_gate(faults, roll_failure=False))
            outcome = self._late_faults(faults, result.reply, result.applied > 0)
            for status in result.statuses:
                self._count(DROPPED if outcome.drop else status)
            return outcome

    def _fault_gate(self, faults: Faults, *, roll_failure: bool) -> Gate:
        """The model's step 4: the faults a fresh key meets (a replay meets none)."""

        def gate(update: Update) -> Reply | None:
            return self._fresh_key_fault(update, faults, roll_failure=roll_failure)

        return gate

    def _fresh_key_fault(
        self, update: Update, faults: Faults, *, roll_failure: bool
    ) -> Reply | None:
        """Poison (500), reject (422) and the random failure (503, drawn per single request:
        a batch draws once for the whole request), under the lock."""
        if update.aggregate in faults.poison:
            return reply(500, {"error": "poison"})
        if update.aggregate in faults.reject:
            return reply(422, {"error": "rejected"})
        if roll_failure and self._roll(faults, faults.fail_rate):
            return self._unavailable(faults, "injected failure")
        return None

    def _late_faults(self, faults: Faults, answer: Reply, applied: bool) -> _Outcome:
        if not applied:
            return _Outcome(answer)
        if self._roll(faults, faults.drop_after_effect_rate):
            return _Outcome(answer, drop=True)
        if self._roll(faults, faults.slow_rate):
            return _Outcome(answer, delay=faults.slow_seconds)
        return _Outcome(answer)

    def _refusal(self, faults: Faults, authorization: str | None) -> Reply | None:
        if faults.auth_status is not None:
            error = "forbidden" if faults.auth_status == 403 else "unauthorized"
            return reply(faults.auth_status, {"error": error})
        return refuse_token(self.token, authorization)

    def _outage(self, faults: Faults) -> Reply | None:
        return self._unavailable(faults, "outage") if faults.outage else None

    @staticmethod
    def _unavailable(faults: Faults, error: str) -> Reply:
        headers = () if faults.retry_after is None else (("Retry-After", faults.retry_after),)
        return reply(503, {"error": error}, *headers)

    def _roll(self, faults: Faults, rate: float) -> bool:
        # A rate of 0 draws nothing, so that switching one fault on leaves the others' draws
        # (and the whole run) reproducible from the seed.
        if rate <= 0.0:
            return False
        source = (id(faults), faults.seed)
        if source != self._rng_source:  # new Faults or new seed: start its sequence
            self._rng = random.Random(faults.seed)
            self._rng_source = source
        return self._rng.random() < rate

    def _count(self, status: int) -> None:
        self._request_count += 1
        self._by_status[status] += 1

    def _count_unread(self, status: int) -> None:
        with self._lock:
            self._count(status)

    def _keep(self, request: Received) -> None:
        with self._lock:
            if self._received is not None:
                self._received.append(request)

    def _track(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections[connection] = threading.current_thread()
        if self._stopping.is_set():  # accepted just before stop(): it missed the sweep
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def _untrack(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.pop(connection, None)

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)


# -- the shops of contract 5c --------------------------------------------------------------------


def rate_limited_shop(rate: float = 120.0, retry_after: str | None = "1") -> Faults:
    """A shop that takes ``rate`` requests/s and answers 429 with Retry-After beyond."""
    return Faults(rate_limit=rate, rate_retry_after=retry_after)


def pool_shop(workers: int = 4, service_seconds: float = 0.02, queue: int = 8) -> Faults:
    """A shop with a pool of PHP workers behind a short queue: latency grows, then 503.
    Its capacity is ``workers / service_seconds`` requests/s."""
    return Faults(pool_workers=workers, pool_service_seconds=service_seconds, pool_queue=queue)


def halving_shop(rate: float = 120.0, halve_at: float = 10.0, recover_at: float = 20.0) -> Faults:
    """A rate-limited shop whose capacity halves ``halve_at`` seconds into the run and
    recovers at ``recover_at``."""
    return replace(rate_limited_shop(rate), capacity_schedule=((halve_at, 0.5), (recover_at, 1.0)))


# -- HTTP --------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The default backlog of 5 drops SYNs when a worker pool connects at once, and the
    # client's retransmit costs a full second.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], sim: SiteSimulator) -> None:
        self.sim = sim
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a reverse DNS lookup (getfqdn) that can stall for seconds.
        TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        if self.sim.ssl_context is not None:
            # The handshake happens in the handler's thread, at its first read: a client that
            # refuses the certificate fails there and never stalls the accepting loop.
            connection = self.sim.ssl_context.wrap_socket(
                connection, server_side=True, do_handshake_on_connect=False
            )
        return connection, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client hanging up mid-answer is the client's business, not a simulator bug.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sitesim/1.0"
    sys_version = ""
    timeout = IDLE_TIMEOUT
    # Headers and body go out in two writes; with Nagle on, the client's delayed ACK would add
    # ~40 ms to every answer.
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.sim._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.sim._untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def sim(self) -> SiteSimulator:
        return self.server.sim

    def _withheld_device(self, method: str) -> bool:
        """The site model's withholding test device; False when the path is not its."""
        path = urlsplit(self.path).path
        with self.sim._lock:
            refused = self.sim._refusal(self.sim.faults, self.headers.get("Authorization"))
            answer = self.sim.model.withheld_route(method, path)
        if answer is None:
            return False
        self._send(refused or answer)
        return True

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if self._read_body() is None:
            return
        if self._withheld_device("GET"):
            return
        if path == HEALTH_PATH:
            self._send(self.sim._health(self.headers.get("Authorization")))
        elif path == UPDATES_PATH or (path == BATCH_PATH and self.sim.batch_enabled):
            self._send(reply(405, {"error": "method not allowed"}, ("Allow", "POST")))
        else:
            self._send(reply(404, {"error": "not found"}))

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        is_update = path == UPDATES_PATH or (path == BATCH_PATH and self.sim.batch_enabled)
        raw = self._read_body(count=is_update)
        if raw is None:
            return
        if not is_update and self._withheld_device("POST"):
            return
        authorization = self.headers.get("Authorization")
        if is_update:
            refusal = self.sim._admit()
            if refusal is not None:
                self.sim._count_unread(refusal.status)
                self._send(refusal)
                return
            try:
                if path == UPDATES_PATH:
                    key = self.headers.get("Idempotency-Key")
                    outcome = self.sim._update(authorization, key, raw)
                else:
                    outcome = self.sim._batch(authorization, raw)
            finally:
                self.sim._leave()
            self._deliver(outcome)
        elif path == HEALTH_PATH:
            self._send(reply(405, {"error": "method not allowed"}, ("Allow", "GET")))
        else:
            self._send(reply(404, {"error": "not found"}))

    def _read_body(self, *, count: bool = False) -> bytes | None:
        """The body per Content-Length, or None after answering an unreadable one."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            failure = reply(411, {"error": "Content-Length required"})
        else:
            raw_length = self.headers.get("Content-Length", "0")
            digits = raw_length.strip()
            length = int(digits) if digits.isascii() and digits.isdigit() else -1
            if length < 0:
                failure = reply(400, {"error": "bad Content-Length"})
            elif length > MAX_BODY:
                failure = reply(413, {"error": f"body over {MAX_BODY} bytes"})
            else:
                data = self.rfile.read(length)
                if len(data) < length:  # the client went away mid-body
                    self.close_connection = True
                    return None
                headers = {name.lower(): value for name, value in self.headers.items()}
                self.sim._keep(Received(self.command, self.path, headers, data))
                return data
        if count:
            self.sim._count_unread(failure.status)
        # The unread body is still on the wire: the connection cannot carry another request.
        self.close_connection = True
        self._send(failure)
        return None

    def _deliver(self, outcome: _Outcome) -> None:
        if outcome.drop:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        if outcome.answer_fault == "reset":
            self.close_connection = True
            with contextlib.suppress(OSError):  # linger 0: close() sends RST, not FIN
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()
            return
        if outcome.delay > 0:
            self.sim._sleep(outcome.delay)
        if outcome.answer_fault in ("cut-off", "huge"):
            self._send_broken(outcome.answer, outcome.answer_fault)
        elif outcome.answer_fault == "not-json":
            receipt = str(outcome.answer.json()["receipt"])
            self._send(Reply(outcome.answer.status, f"OK {receipt}".encode()))
        else:
            self._send(outcome.answer)

    def _send_broken(self, answer: Reply, fault: str) -> None:
        """``cut-off``: half the promised body, then the socket shut; ``huge``: the body padded
        to HUGE_BODY bytes, written in chunks until done or the client hangs up."""
        head, tail = answer.body[:-1] + b',"padding":"', b'"}'
        length = len(answer.body) if fault == "cut-off" else HUGE_BODY
        self.close_connection = True
        self.send_response(answer.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(length))
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            if fault == "cut-off":
                self.wfile.write(answer.body[: length // 2])
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            chunk = b" " * 65536
            padding = length - len(head) - len(tail)
            self.wfile.write(head)
            while padding > 0:
                self.wfile.write(chunk[:padding])
                padding -= len(chunk)
            self.wfile.write(tail)
        except OSError:  # the client stopped reading: what a capped reader does
            return

    def _send(self, answer: Reply) -> None:
        self.send_response(answer.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer.body)))
        for name, value in answer.headers:
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(answer.body)


# -- command line ------------------------------------------------------------------------------


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1")
    return value


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    from exchange.dev.httpsim import OneLineParser

    parser = OneLineParser(
        prog="python -m exchange.dev.sitesim",
        description="Serve a simulated shop site API in the foreground until Ctrl-C.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--token", default=None, help="bearer token required (default: any)")
    parser.add_argument("--fail-rate", type=_rate, default=0.0, help="probability of 503")
    parser.add_argument("--retry-after", default=None, help="Retry-After sent with 503s")
    parser.add_argument(
        "--drop-rate",
        type=_rate,
        default=0.0,
        help="probability of closing the connection after the effect",
    )
    parser.add_argument("--slow-rate", type=_rate, default=0.0)
    parser.add_argument("--slow-seconds", type=float, default=0.0)
    parser.add_argument(
        "--poison",
        action="append",
        default=[],
        metavar="AGGREGATE",
        help="aggregate that always gets 500 (repeatable)",
    )
    parser.add_argument(
        "--reject",
        action="append",
        default=[],
        metavar="AGGREGATE",
        help="aggregate that always gets 422 (repeatable)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", action="store_true", help="enable /api/v1/updates:batch")
    parser.add_argument(
        "--no-version-check",
        action="store_true",
        help="keep only the idempotency promise: never answer 409 stale, apply any version",
    )
    parser.add_argument(
        "--withhold-drops",
        type=Decimal,
        default=None,
        metavar="SHARE",
        help="a test device: withhold a price that falls to SHARE of the shown one or below "
        "(e.g. 0.5) until released at /api/v1/withheld/<message_id>/release",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    from exchange.dev.httpsim import listening, setting_line

    args = _arguments(argv)
    faults = Faults(
        fail_rate=args.fail_rate,
        retry_after=args.retry_after,
        drop_after_effect_rate=args.drop_rate,
        slow_rate=args.slow_rate,
        slow_seconds=args.slow_seconds,
        poison=set(args.poison),
        reject=set(args.reject),
        seed=args.seed,
    )
    sim = SiteSimulator(
        args.token,
        faults,
        batch_enabled=args.batch,
        host=args.host,
        port=args.port,
        check_versions=not args.no_version_check,
        withhold_drops=args.withhold_drops,
    )
    stopped = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    # Installed explicitly: a shell starting us in the background leaves SIGINT ignored, and
    # SIGTERM (docker stop, systemd) deserves the same clean stop as Ctrl-C.
    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    with listening(sim, "Site"):
        print(f"Site simulator listening on {sim.url}", flush=True)
        print("point the service at it (then: exchange check, exchange run):", flush=True)
        print(f"  {setting_line('EXCHANGE_TARGET', 'api')}", flush=True)
        print(f"  {setting_line('EXCHANGE_SITE_URL', sim.url)}", flush=True)
        # Without --token any token is accepted (the service still wants one of 8 or more).
        token = setting_line("EXCHANGE_SITE_TOKEN", args.token or "demo-token", bool(args.token))
        print(f"  {token}", flush=True)
        print("(Ctrl-C to stop)", flush=True)
        while not stopped.wait(1.0):
            pass
    print(
        f"Stopped after {sim.request_count} update requests, {len(sim.effects())} effects.",
        flush=True,
    )


if __name__ == "__main__":
    main()
