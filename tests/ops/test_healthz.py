"""GET /healthz (issue 3 item 5): 200 when the database answers and the worker is not stuck.

Ages are measured on a monotonic clock that the tests move by hand (``Mono``), so "too old"
needs no waiting.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from opstools import get, make_worker, run, served
from sqlalchemy import Engine

from exchange.db.engine import make_engine
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import price_row, stage
from exchange.domain.breaker import BreakerState
from exchange.domain.verdicts import Verdict
from exchange.errors import ConfigurationError
from exchange.ops import metrics
from exchange.ops.metrics import Health, MetricsServer, PrometheusMetrics, max_cycle_age

UNREACHABLE_PG = "postgresql+psycopg://postgres@127.0.0.1:1/x"


class Mono:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def dead_engine() -> Iterator[Engine]:
    engine = make_engine(UNREACHABLE_PG)
    yield engine
    engine.dispose()


def test_healthz_is_200_with_a_live_database_and_a_cycle_just_finished(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    stage(engine, [price_row("SKU-1", 1)])
    worker = make_worker(db_url, engine, site)
    with served(worker, engine) as (_, server):
        run(worker, lambda w: w.cycle())
        answer = get(f"{server.url}/healthz")

    assert 200 == answer.status_code
    assert answer.headers["content-type"] == "application/json"
    health = answer.json()
    assert ("ok", True) == (health["status"], health["database"])
    finished = datetime.fromisoformat(health["last_cycle_at"])
    assert finished.tzinfo is not None
    assert abs((datetime.now(UTC) - finished).total_seconds()) < 30
    assert 0 <= health["last_cycle_age_s"] < 30
    assert max_cycle_age(worker.settings.poll_interval) == health["max_cycle_age_s"]


def test_healthz_is_503_when_the_database_is_unreachable(dead_engine: Engine) -> None:
    m = PrometheusMetrics()
    with MetricsServer(
        m, Health(m, dead_engine, poll_interval=5), host="127.0.0.1", port=0
    ) as server:
        answer = get(f"{server.url}/healthz")

    assert 503 == answer.status_code
    assert {"status": "degraded", "database": False} == {
        k: answer.json()[k] for k in ("status", "database")
    }


def test_healthz_is_503_when_the_last_cycle_is_older_than_three_poll_intervals_or_60_s(
    engine: Engine,
) -> None:
    mono = Mono()
    m = PrometheusMetrics(monotonic=mono)
    health = Health(m, engine, poll_interval=30)  # the allowance: max(3 x 30 s, 60 s) = 90 s
    m.cycle_finished(engine, now=datetime.now(UTC), seconds=0.1, breaker=_closed(), paused=False)

    mono.now += 89
    assert (200, "ok") == _status(health)
    mono.now += 2
    status, document = health.check()
    assert (503, "degraded", True) == (status, document["status"], document["database"])
    assert 91 == document["last_cycle_age_s"]


def test_the_allowance_is_never_below_60_s_however_short_the_poll_interval(
    engine: Engine,
) -> None:
    mono = Mono()
    m = PrometheusMetrics(monotonic=mono)
    health = Health(m, engine, poll_interval=0.01)
    m.cycle_finished(engine, now=datetime.now(UTC), seconds=0.1, breaker=_closed(), paused=False)
    mono.now += 59
    assert (200, "ok") == _status(health)
    mono.now += 2
    assert (503, "degraded") == _status(health)


def test_before_the_first_cycle_the_allowance_runs_from_the_start(engine: Engine) -> None:
    mono = Mono()
    health = Health(PrometheusMetrics(monotonic=mono), engine, poll_interval=5)
    status, document = health.check()
    assert (200, None, None) == (status, document["last_cycle_at"], document["last_cycle_age_s"])
    mono.now += 61
    assert (503, "degraded") == _status(health)


def test_site_answers_inside_one_long_cycle_keep_the_worker_healthy(engine: Engine) -> None:
    # Draining a backlog is one cycle that claims batch after batch for minutes: that is work,
    # not a stuck worker.
    mono = Mono()
    m = PrometheusMetrics(monotonic=mono)
    health = Health(m, engine, poll_interval=5)
    m.cycle_finished(engine, now=datetime.now(UTC), seconds=0.1, breaker=_closed(), paused=False)
    for _ in range(10):
        mono.now += 50
        m.attempt(Verdict.DELIVERED)
        assert (200, "ok") == _status(health)
    mono.now += 61  # then nothing: no answer, no cycle
    assert (503, "degraded") == _status(health)


def test_a_database_that_does_not_answer_is_down_after_the_timeout_and_is_not_asked_twice(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    calls: list[float] = []

    def hanging_ping(_: Engine) -> None:
        calls.append(time.monotonic())
        release.wait(10)

    monkeypatch.setattr(metrics, "ping", hanging_ping)
    health = Health(PrometheusMetrics(), engine, poll_interval=5, db_timeout=0.2)
    try:
        started = time.monotonic()
        first, second = health.check(), health.check()
        # Bounded, the two checks take db_timeout (0.2 s) and a moment; unbounded, the ping
        # holds them 10 s: 5 s leaves a loaded machine 4.5 s and stays well below the hang.
        assert time.monotonic() - started < 5
        assert (503, False) == (first[0], first[1]["database"])
        assert (503, False) == (second[0], second[1]["database"])
        assert 1 == len(calls)  # the second check waited on the ping still in flight
    finally:
        release.set()


def test_other_paths_are_404_and_the_server_stops_cleanly(engine: Engine) -> None:
    m = PrometheusMetrics()
    server = MetricsServer(m, Health(m, engine, poll_interval=5), host="127.0.0.1", port=0)
    with server:
        url = server.url
        assert 404 == get(f"{url}/").status_code
        assert 200 == get(f"{url}/metrics?x=1").status_code
    assert not any(t.name == f"metrics:{server.port}" for t in threading.enumerate())
    with pytest.raises(httpx.ConnectError):
        get(f"{url}/healthz")


def test_a_port_already_in_use_is_a_configuration_error_naming_it(engine: Engine) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        m = PrometheusMetrics()
        server = MetricsServer(m, Health(m, engine, poll_interval=5), host="127.0.0.1", port=port)
        with pytest.raises(ConfigurationError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            server.start()


def _status(health: Health) -> tuple[int, str]:
    status, document = health.check()
    return status, document["status"]


def _closed() -> BreakerState:
    return BreakerState.CLOSED
