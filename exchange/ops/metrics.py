"""Metrics for monitoring and the health answer (issue 3 item 5).

The worker reports what it does to a ``Metrics`` object. The base class records nothing, so
a worker without ``--metrics-port`` pays nothing, not even a query. ``PrometheusMetrics``
keeps the figures in its own ``CollectorRegistry`` (never the process-wide default one, so
that tests can build several), and ``MetricsServer`` serves them on one port from a
background thread, together with ``GET /healthz``:

    GET /metrics   Prometheus text format (OpenMetrics when the scraper asks for it)
    GET /healthz   200 {"status": "ok", …} when the database answers ``SELECT 1`` within
                   DB_TIMEOUT_S and the worker did something recently; 503 "degraded" otherwise

"Did something recently": a cycle finished, or (while one long cycle drains a backlog) the
site answered, within ``max(3 × poll_interval, 60 s)``. A cycle that failed does not count.
Before the first cycle the same allowance runs from the moment the server started.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder
from sqlalchemy import Connection, Engine, func, select

from exchange.db.engine import ping, transaction
from exchange.db.on_channels import by_state_and_reason
from exchange.db.schema import channels, deliveries, messages
from exchange.domain.breaker import BreakerState
from exchange.domain.clock import ensure_utc
from exchange.domain.pace import Cause
from exchange.domain.reasons import Reason
from exchange.domain.retry import Decision
from exchange.domain.states import PENDING, Event, State, values
from exchange.domain.verdicts import Verdict
from exchange.errors import ConfigurationError
from exchange.intake.staging_table import IntakeReport
from exchange.queue.lease import Batch
from exchange.targets.shop_api.answers import TERMINAL_STATUSES
from exchange.worker import Metrics

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

BREAKER_VALUES = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}
MIN_CYCLE_AGE_S = 60.0
DB_TIMEOUT_S = 2.0
# From a quick empty cycle to a long drain of a backlog.
CYCLE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
WORKER_QUARANTINE_REASONS = (
    Reason.RETRY_LIMIT.value,
    Reason.UNKNOWN_RESPONSE.value,
    Reason.SEQUENCE_GAP.value,
    *(Reason.http(status) for status in sorted(TERMINAL_STATUSES)),
)


def max_cycle_age(poll_interval: float) -> float:
    """How long the worker may go without finishing a cycle before /healthz says degraded."""
    return max(3 * poll_interval, MIN_CYCLE_AGE_S)


class PrometheusMetrics(Metrics):
    """``channels``: the names of the channels this process delivers to when EXCHANGE_CHANNELS
    names them (contract 13): then the delivery counters and each loop's gauges (attempts,
    deliveries, retries, quarantines, takeovers, the site's refusals, the breaker, the pace)
    carry a ``channel`` label, first. Without it (one channel named after its target) they keep
    today's names and labels exactly, as the cause codes stay bare, so a one-channel dashboard
    reads what it read."""

    def __init__(
        self,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        channels: Sequence[str] = (),
    ) -> None:
        self.registry = CollectorRegistry()
        self.monotonic = monotonic
        self.channel_names = tuple(channels)
        r = self.registry
        # The label the per-loop series carry under EXCHANGE_CHANNELS (none without it).
        on = ["channel"] if self.channel_names else []
        self.messages = Gauge(
            "exchange_messages", "Messages by state (all workers).", ["state"], registry=r
        )
        self.quarantined_now = Gauge(
            "exchange_quarantined_messages",
            "Messages waiting in quarantine now, by reason (all workers).",
            ["reason"],
            registry=r,
        )
        self.oldest_undelivered = Gauge(
            "exchange_oldest_undelivered_age_seconds",
            "Age of the oldest new, in-progress or delayed message, from created_at; "
            "0 when there is none.",
            registry=r,
        )
        # contract 13: the same figures per channel (a delivery's state on each), beside the
        # sums above that existing monitoring reads; intake's rejected records are no
        # channel's and stay in the sums only.
        self.channel_messages = Gauge(
            "exchange_channel_messages",
            "Deliveries by channel and state (all workers).",
            ["channel", "state"],
            registry=r,
        )
        self.channel_quarantined = Gauge(
            "exchange_channel_quarantined_messages",
            "Deliveries waiting in quarantine now, by channel and reason (all workers).",
            ["channel", "reason"],
            registry=r,
        )
        self.channel_oldest = Gauge(
            "exchange_channel_oldest_undelivered_age_seconds",
            "Age of the oldest new, in-progress or delayed delivery of each channel, from the "
            "message's created_at; 0 when there is none.",
            ["channel"],
            registry=r,
        )
        self.attempts = Counter(
            "exchange_attempts",
            "Requests to the site by outcome class.",
            [*on, "outcome"],
            registry=r,
        )
        self.deliveries = Counter(
            "exchange_deliveries", "Messages delivered (the site confirmed).", on, registry=r
        )
        self.retries = Counter(
            "exchange_retries_scheduled",
            "Temporary failures that scheduled a retry.",
            on,
            registry=r,
        )
        self.quarantines = Counter(
            "exchange_quarantines",
            "Messages this worker quarantined, by reason (rows rejected at intake: "
            "exchange_intake_rows_total).",
            [*on, "reason"],
            registry=r,
        )
        self.intake_rows = Counter(
            "exchange_intake_rows",
            "Staging rows taken, by result: message, duplicate, rejected.",
            ["result"],
            registry=r,
        )
        self.takeovers = Counter(
            "exchange_lease_takeovers",
            "Messages leased after another worker's lease expired.",
            on,
            registry=r,
        )
        self.breaker = Gauge(
            "exchange_breaker_state",
            "This worker's circuit breaker: 0 closed, 1 half-open, 2 open.",
            on,
            registry=r,
        )
        self.paused = Gauge(
            "exchange_delivery_paused",
            "1 while delivery is paused, as exchange status says delivery_paused: by an "
            "operator (the workbench, exchange pause) or by a refusal a person must mend (a "
            "token, key, login or certificate refused; contract 15). Not the circuit breaker.",
            registry=r,
        )
        self.site_refused = Counter(
            "exchange_site_refused",
            "Requests the site refused for a reason that speaks about the site (contract 5c), "
            "by cause: 429, 5xx (502-504 while others were refused too), health (a temporary "
            "failure while the site's health check failed). Not charged to the message.",
            [*on, "cause"],
            registry=r,
        )
        self.pace_limit = Gauge(
            "exchange_pace_limit", "Requests this worker may have in flight now.", on, registry=r
        )
        self.pace_in_flight = Gauge(
            "exchange_pace_in_flight",
            "Requests in flight when the last batch ended.",
            on,
            registry=r,
        )
        self.pace_rate = Gauge(
            "exchange_pace_rate",
            "Requests per second this worker is paced at (0: not paced, the site never "
            "refused or keeps up again).",
            on,
            registry=r,
        )
        self.pace_accepted = Gauge(
            "exchange_pace_accepted_rate",
            "Answers per second the site gave (other than refusals), over the last 5 s.",
            on,
            registry=r,
        )
        self.pace_hold = Gauge(
            "exchange_pace_hold_seconds",
            "Seconds every request still waits: the site's Retry-After, or a hold after a refusal.",
            on,
            registry=r,
        )
        self.cycle_seconds = Histogram(
            "exchange_cycle_duration_seconds",
            "Duration of the cycles that finished.",
            buckets=CYCLE_BUCKETS,
            registry=r,
        )
        self.cycle_failures = Counter(
            "exchange_cycle_failures", "Cycles that failed (logged, tried again).", registry=r
        )
        self.last_cycle = Gauge(
            "exchange_last_cycle_timestamp_seconds",
            "Unix time when the last cycle finished.",
            registry=r,
        )
        # Every label value known in advance is shown from the first scrape, at 0, so that
        # rate() and alerts see a series before its first event.
        for state in State:
            self.messages.labels(state.value)
        for channel in self.channel_names or [None]:
            for verdict in Verdict:
                if verdict is not Verdict.NOT_FOR_THIS_SHOP:  # never sent: not an attempt
                    self._on(self.attempts, channel, verdict.value)
            for reason in WORKER_QUARANTINE_REASONS:
                self._on(self.quarantines, channel, reason)
            for cause in Cause:
                self._on(self.site_refused, channel, cause.value)
            if channel is not None:
                for counter in (self.deliveries, self.retries, self.takeovers):
                    self._on(counter, channel)
        for result in ("message", "duplicate", "rejected"):
            self.intake_rows.labels(result)
        self._reasons_shown: set[str] = set()
        self._channel_reasons_shown: set[tuple[str, str]] = set()
        # Read by the HTTP thread, written by the worker's: single assignments, no lock needed.
        self.started_mono = monotonic()
        self.last_cycle_at: datetime | None = None
        self.last_cycle_mono: float | None = None
        self.last_answer_mono: float | None = None

    def _on(self, metric: Any, channel: str | None, *values: str) -> Any:
        """The series of ``metric`` for ``channel`` (a loop's name under EXCHANGE_CHANNELS)
        and ``values``; without EXCHANGE_CHANNELS the bare series, as before channels."""
        if self.channel_names:
            return metric.labels(channel or "", *values)
        return metric.labels(*values) if values else metric

    def for_channel(self, channel: str | None) -> Metrics:
        """What one delivery loop reports to: its channel's series (contract 13)."""
        return _ChannelMetrics(self, channel) if self.channel_names else self

    # -- what the worker reports --------------------------------------------------------------

    def intake(self, report: IntakeReport) -> None:
        self.intake_rows.labels("message").inc(report.messages)
        self.intake_rows.labels("duplicate").inc(report.duplicates)
        self.intake_rows.labels("rejected").inc(report.rejected)

    def quarantined(self, reason: str, count: int = 1, *, channel: str | None = None) -> None:
        if count:
            self._on(self.quarantines, channel, reason).inc(count)

    def claimed(self, batch: Batch, *, channel: str | None = None) -> None:
        if batch.takeovers:
            self._on(self.takeovers, channel).inc(batch.takeovers)

    def attempt(self, verdict: Verdict, *, channel: str | None = None) -> None:
        self._on(self.attempts, channel, verdict.value).inc()
        self.last_answer_mono = self.monotonic()

    def recorded(self, decisions: Iterable[Decision], *, channel: str | None = None) -> None:
        for decision in decisions:
            match decision.event:
                case Event.DELIVERED:
                    self._on(self.deliveries, channel).inc()
                case Event.RETRY_SCHEDULED:
                    self._on(self.retries, channel).inc()
                case Event.QUARANTINED:
                    self.quarantined(decision.reason or "unknown", channel=channel)
                case _:
                    pass

    def cycle_finished(
        self, engine: Engine, *, now: datetime, seconds: float, breaker: BreakerState, paused: bool
    ) -> None:
        self.cycle_seconds.observe(seconds)
        if not self.channel_names:  # else each loop tells its own (``loop_state``)
            self.breaker.set(BREAKER_VALUES[breaker])
        self.paused.set(1 if paused else 0)
        try:
            self._refresh_queue(engine, now)
        except Exception as exc:  # a figure may go stale; delivery must not stop for it
            log.warning("metrics: the queue figures were not refreshed: %s", exc)
        self.last_cycle_at = datetime.now(UTC)
        self.last_cycle_mono = self.monotonic()
        self.last_cycle.set(self.last_cycle_at.timestamp())

    def cycle_failed(self) -> None:
        self.cycle_failures.inc()

    def loop_state(self, breaker: BreakerState, *, channel: str | None = None) -> None:
        if self.channel_names:
            self._on(self.breaker, channel).set(BREAKER_VALUES[breaker])

    def refused(self, cause: Cause, *, channel: str | None = None) -> None:
        self._on(self.site_refused, channel, cause.value).inc()

    def pace(self, figures: dict[str, float | int | None], *, channel: str | None = None) -> None:
        self._on(self.pace_limit, channel).set(figures["limit"] or 0)
        self._on(self.pace_in_flight, channel).set(figures["in_flight"] or 0)
        self._on(self.pace_rate, channel).set(figures["paced_rate"] or 0)
        self._on(self.pace_accepted, channel).set(figures["accepted_rate"] or 0)
        self._on(self.pace_hold, channel).set(figures["hold_s"] or 0)

    def _refresh_queue(self, engine: Engine, now: datetime) -> None:
        """Deliveries (and records) by state, quarantine by reason and the oldest undelivered."""
        d = deliveries
        with transaction(engine, read_only=True) as connection:
            # Every channel's deliveries, and intake's rejected records (their own state).
            counted = by_state_and_reason(connection)
            oldest: datetime | None = connection.execute(
                select(func.min(messages.c.created_at))
                .select_from(d.join(messages, messages.c.id == d.c.message_pk))
                .where(d.c.state.in_(values(PENDING)))
            ).scalar()
            per_channel = by_channel(connection)
            oldest_per_channel = oldest_by_channel(connection)
        by_state = dict.fromkeys((s.value for s in State), 0)
        by_reason: dict[str, int] = {}
        for (state, reason), count in counted.items():
            by_state[state] = by_state.get(state, 0) + count
            if state == State.QUARANTINED.value:
                by_reason[reason or "unknown"] = by_reason.get(reason or "unknown", 0) + count
        for state, count in by_state.items():
            self.messages.labels(state).set(count)
        # A reason whose last entry left the quarantine shows 0 rather than vanishing, so an
        # alert on it resolves instead of going stale.
        self._reasons_shown |= set(by_reason)
        for reason in self._reasons_shown:
            self.quarantined_now.labels(reason).set(by_reason.get(reason, 0))
        age = (now - oldest).total_seconds() if oldest is not None else 0.0
        self.oldest_undelivered.set(max(age, 0.0))
        self._refresh_channels(per_channel, oldest_per_channel, now)

    def _refresh_channels(
        self,
        counted: dict[tuple[str, str, str | None], int],
        oldest: dict[str, datetime | None],
        now: datetime,
    ) -> None:
        """The per-channel series (``by_channel``): every state of every channel shown, a
        reason that left a channel's quarantine at 0 rather than vanishing."""
        reasons: dict[tuple[str, str], int] = {}
        states: dict[tuple[str, str], int] = {}
        for (channel, state, reason), count in counted.items():
            states[(channel, state)] = states.get((channel, state), 0) + count
            if state == State.QUARANTINED.value:
                key = (channel, reason or "unknown")
                reasons[key] = reasons.get(key, 0) + count
        for channel in oldest:
            for state in State:
                self.channel_messages.labels(channel, state.value).set(
                    states.get((channel, state.value), 0)
                )
            since = oldest[channel]
            age = (now - since).total_seconds() if since is not None else 0.0
            self.channel_oldest.labels(channel).set(max(age, 0.0))
        self._channel_reasons_shown |= set(reasons)
        for channel, reason in self._channel_reasons_shown:
            self.channel_quarantined.labels(channel, reason).set(reasons.get((channel, reason), 0))


class _ChannelMetrics(Metrics):
    """One delivery loop's view of ``PrometheusMetrics`` under EXCHANGE_CHANNELS: what it
    reports carries its channel's name; what is the process's (intake, cycles) goes on
    unlabelled."""

    def __init__(self, metrics: PrometheusMetrics, channel: str | None) -> None:
        self.metrics = metrics
        self.channel = channel

    def for_channel(self, channel: str | None) -> Metrics:
        return self.metrics.for_channel(channel)

    def intake(self, report: IntakeReport) -> None:
        self.metrics.intake(report)

    def quarantined(self, reason: str, count: int = 1) -> None:
        self.metrics.quarantined(reason, count, channel=self.channel)

    def claimed(self, batch: Batch) -> None:
        self.metrics.claimed(batch, channel=self.channel)

    def attempt(self, verdict: Verdict) -> None:
        self.metrics.attempt(verdict, channel=self.channel)

    def recorded(self, decisions: Iterable[Decision]) -> None:
        self.metrics.recorded(decisions, channel=self.channel)

    def cycle_finished(
        self, engine: Engine, *, now: datetime, seconds: float, breaker: BreakerState, paused: bool
    ) -> None:
        self.metrics.cycle_finished(
            engine, now=now, seconds=seconds, breaker=breaker, paused=paused
        )

    def cycle_failed(self) -> None:
        self.metrics.cycle_failed()

    def loop_state(self, breaker: BreakerState) -> None:
        self.metrics.loop_state(breaker, channel=self.channel)

    def refused(self, cause: Cause) -> None:
        self.metrics.refused(cause, channel=self.channel)

    def pace(self, figures: dict[str, float | int | None]) -> None:
        self.metrics.pace(figures, channel=self.channel)


def by_channel(connection: Connection) -> dict[tuple[str, str, str | None], int]:
    """How many deliveries each channel (by name) has in each (state, reason)."""
    rows = connection.execute(
        select(channels.c.name, deliveries.c.state, deliveries.c.reason, func.count())
        .join(channels, channels.c.id == deliveries.c.channel_id)
        .group_by(channels.c.name, deliveries.c.state, deliveries.c.reason)
    ).all()
    return {(name, state, reason): int(count) for name, state, reason, count in rows}


def oldest_by_channel(connection: Connection) -> dict[str, datetime | None]:
    """Each registered channel (by name, a dropped one too: its series drop to 0) and when
    its oldest undelivered message was created (None: nothing waits there)."""
    d = deliveries
    oldest: dict[str, datetime | None] = dict.fromkeys(
        connection.execute(select(channels.c.name).order_by(channels.c.id)).scalars()
    )
    rows = connection.execute(
        select(channels.c.name, func.min(messages.c.created_at))
        .select_from(
            d.join(messages, messages.c.id == d.c.message_pk).join(
                channels, channels.c.id == d.c.channel_id
            )
        )
        .where(d.c.state.in_(values(PENDING)))
        .group_by(channels.c.name)
    ).all()
    for name, created_at in rows:
        oldest[name] = ensure_utc(created_at) if created_at is not None else None
    return oldest


# -- health ------------------------------------------------------------------------------------


class Health:
    """The answer of ``GET /healthz``: the database reachable, the worker not stuck."""

    def __init__(
        self,
        metrics: PrometheusMetrics,
        engine: Engine,
        *,
        poll_interval: float,
        db_timeout: float = DB_TIMEOUT_S,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        self.metrics = metrics
        self.engine = engine
        self.max_age = max_cycle_age(poll_interval)
        self.db_timeout = db_timeout
        self.monotonic = monotonic or metrics.monotonic
        self._lock = threading.Lock()
        self._probe: Future[None] | None = None

    def check(self) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON document)."""
        database = self._database_answers()
        now = self.monotonic()
        m = self.metrics
        cycle_age = None if m.last_cycle_mono is None else now - m.last_cycle_mono
        # The newest sign of life: a finished cycle, a site answer inside a long cycle, or,
        # before the first cycle, the start of the server.
        marks = [m.last_cycle_mono, m.last_answer_mono]
        latest = max([mark for mark in marks if mark is not None], default=m.started_mono)
        alive = now - latest <= self.max_age
        ok = database and alive
        document = {
            "status": "ok" if ok else "degraded",
            "database": database,
            "last_cycle_at": (
                m.last_cycle_at.isoformat().replace("+00:00", "Z") if m.last_cycle_at else None
            ),
            "last_cycle_age_s": None if cycle_age is None else round(cycle_age, 3),
            "max_cycle_age_s": self.max_age,
        }
        return (200 if ok else 503), document

    def _database_answers(self) -> bool:
        # A ping runs in its own daemon thread and is waited for at most db_timeout: a database
        # host that drops packets must not hang the health answer, nor the process's exit.
        # While one ping hangs, later checks wait on the same one instead of piling up more.
        with self._lock:
            if self._probe is None or self._probe.done():
                probe: Future[None] = Future()
                threading.Thread(
                    target=self._ping, args=(probe,), name="healthz-ping", daemon=True
                ).start()
                self._probe = probe
            probe = self._probe
        try:
            probe.result(timeout=self.db_timeout)
        except Exception:  # unreachable, refused, or no answer in time
            return False
        return True

    def _ping(self, probe: Future[None]) -> None:
        try:
            ping(self.engine)
        except BaseException as exc:
            probe.set_exception(exc)
        else:
            probe.set_result(None)


# -- the HTTP server ---------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], metrics: PrometheusMetrics, health: Health
    ) -> None:
        self.metrics = metrics
        self.health = health
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks the host name up (getfqdn), which can stall for seconds.
        TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "exchange-metrics"
    sys_version = ""

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self._send(200, content_type, encoder(self.server.metrics.registry))
        elif path == "/healthz":
            status, document = self.server.health.check()
            body = json.dumps(document).encode("utf-8")
            self._send(status, "application/json", body)
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found: try /metrics or /healthz\n")

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        # A scrape every 15 s would otherwise write a line each time; failures show in the
        # scraper, and the health answer in the prober.
        pass


class MetricsServer:
    """/metrics and /healthz on one port, served from a background thread."""

    def __init__(self, metrics: PrometheusMetrics, health: Health, *, host: str, port: int) -> None:
        self.metrics = metrics
        self.health = health
        self.host = host
        self.port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    def start(self) -> MetricsServer:
        try:
            server = _Server((self.host, self.port), self.metrics, self.health)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot serve metrics on {self.host}:{self.port}: {exc.strerror or exc}"
            ) from None
        self.port = int(server.server_address[1])  # the port chosen when 0 was asked for
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"metrics:{self.port}",
            daemon=True,
        )
        self._server = server
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.shutdown()
        server.server_close()
        thread.join()
        self._server = self._thread = None

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
