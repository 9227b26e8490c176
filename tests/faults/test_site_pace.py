"""Contract 5c against the simulated shops: the service lives at the site's pace.

Real worker processes (``exchange run --until-idle``) against the three shops of issue 13 (a
rate limit answering 429 with Retry-After, a pool of PHP workers with a short queue, a capacity
that halves mid-run and recovers), on SQLite (one worker) and PostgreSQL (two workers), with
``EXCHANGE_CONCURRENCY=32`` and the default attempt limit: every message delivered once,
nothing quarantined but the poison message, which is quarantined after exactly the limit.

And a short outage at a quiet hour (issue 13, item 8): 3 pending SKUs, 9 s of 503s from the
whole site, Retry-After absent, 0 or in the past: none of them is quarantined.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from procs import sqlite_database, start
from sqlalchemy import Engine, insert, select
from test_site_faults import make_worker, run

from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import workers
from exchange.dev.sitesim import Faults, SiteSimulator, halving_shop, pool_shop, rate_limited_shop
from exchange.dev.testing import drain, fast_settings, one_channel_messages, price_row, stage
from exchange.worker import CycleReport, Worker

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

# The pace is measured in wall-clock time: never beside another timing test.
pytestmark = [pytest.mark.slow, pytest.mark.timing]

POISON = "SKU-POISON"
MAX_ATTEMPTS = 5
SKUS = 300

SHOPS = {
    "rate-limit": lambda: rate_limited_shop(100.0),
    "worker-pool": lambda: pool_shop(workers=4, service_seconds=0.02, queue=8),
    "halving": lambda: halving_shop(100.0, halve_at=1.0, recover_at=3.0),
}


def states(engine: Engine) -> dict[str, tuple[str, int, str | None]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, messages.c.state, messages.c.attempts, messages.c.reason)
        ).all()
    return {aggregate: (state, attempts, reason) for aggregate, state, attempts, reason in rows}


def deliver_through_processes(
    db_url: str, faults: Faults, tmp_path: Path, workers: int
) -> tuple[dict[str, tuple[str, int, str | None]], dict[int, str], SiteSimulator]:
    engine = make_engine(db_url)
    faults.poison = {POISON}
    rows = [price_row(f"SKU-{n}", 1, f"{n}.00") for n in range(SKUS)] + [price_row(POISON, 1)]
    stage(engine, rows)
    with SiteSimulator(token="test-token", faults=faults) as site:
        procs = [
            start(
                db_url,
                site,
                f"w{i}",
                tmp_path,
                "--until-idle",
                "--max-seconds",
                "120",
                EXCHANGE_CONCURRENCY="32",
                EXCHANGE_BATCH_SIZE="100",
                EXCHANGE_MAX_ATTEMPTS=str(MAX_ATTEMPTS),
                EXCHANGE_RETRY_BASE_DELAY="0.05",
                EXCHANGE_RETRY_MAX_DELAY="1.0",
                EXCHANGE_POLL_INTERVAL="0.05",
            )
            for i in range(workers)
        ]
        # a hang guard: the workers give up by themselves at --max-seconds 120
        codes = {i: p.wait(timeout=180) for i, p in enumerate(procs)}
        logs = {i: (tmp_path / f"w{i}.log").read_text() for i in range(workers)}
        assert {i: 0 for i in range(workers)} == codes, logs
        found = states(engine)
    engine.dispose()
    return found, logs, site


@pytest.mark.parametrize("shop", sorted(SHOPS))
@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_every_message_is_delivered_at_the_shop_s_pace_and_only_the_poison_is_quarantined(
    shop: str, database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if database == "sqlite":
        db_url, workers = sqlite_database(tmp_path), 1
    else:
        db_url, workers = str(request.getfixturevalue("pg_url")), 2

    found, logs, site = deliver_through_processes(db_url, SHOPS[shop](), tmp_path, workers)

    poison = found.pop(POISON)
    assert ("quarantined", MAX_ATTEMPTS, "retry-limit") == poison, logs
    assert {f"SKU-{n}": "delivered" for n in range(SKUS)} == {
        a: s for a, (s, _, _) in found.items()
    }
    assert {1} == set(site.effect_counts().values())
    refused = sum(n for status, n in site.requests_by_status().items() if status in (429, 503))
    assert refused > 0 or shop == "worker-pool", "the shop never refused: the test tests nothing"


# -- a short outage at a quiet hour ------------------------------------------------------------


def past_date() -> str:
    return format_datetime(datetime.now(UTC) - timedelta(minutes=5), usegmt=True)


@pytest.mark.parametrize("retry_after", [None, "0", "past"])
def test_a_short_outage_at_a_quiet_hour_quarantines_none_of_three_skus(
    sqlite_url: str, sqlite_engine: Engine, sim: SiteSimulator, retry_after: str | None
) -> None:
    """Three SKUs pending, 9 s of 503s from the whole site (its health check too): the
    breaker needs 5 aggregates and never opens, and nothing may be charged for it."""
    worker = make_worker(
        sqlite_url,
        sqlite_engine,
        sim.url,
        max_attempts=MAX_ATTEMPTS,
        retry_base_delay=1.0,
        retry_max_delay=300.0,
        concurrency=8,
    )
    sim.faults.down = True
    sim.faults.retry_after = past_date() if retry_after == "past" else retry_after
    stage(sqlite_engine, [price_row(f"SKU-{n}", 1) for n in range(3)])

    async def outage_then_recovery(w: Worker) -> None:
        back = threading.Timer(9.0, lambda: setattr(sim.faults, "down", False))
        back.start()  # the site comes back on its own time, not between the worker's cycles
        try:
            ends = time.monotonic() + 45.0
            while not w.idle():
                if sim.faults.down:
                    assert "quarantined" not in all_states(sqlite_engine), "the outage quarantined"
                assert time.monotonic() < ends, "not delivered within 36 s of the site's return"
                await w.cycle()
                await asyncio.sleep(0.05)
        finally:
            back.cancel()

    run(worker, outage_then_recovery)

    found = states(sqlite_engine)
    assert {f"SKU-{n}": ("delivered", 1, None) for n in range(3)} == found
    refused = sim.requests_by_status()[503]
    assert 3 <= refused <= 45, f"{refused} requests during a 9 s outage of 3 SKUs"


def all_states(engine: Engine) -> set[Any]:
    return {state for state, _, _ in states(engine).values()}


# -- EXCHANGE_SITE_MAX_RATE: one cap for all the workers --------------------------------------


@pytest.mark.parametrize("others", [0, 1, 3])
def test_the_rate_cap_is_shared_among_the_workers_that_reported_recently(
    sqlite_url: str, sqlite_engine: Engine, sim: SiteSimulator, others: int
) -> None:
    """Each worker takes EXCHANGE_SITE_MAX_RATE / live workers; a worker gone for longer than
    the lease time no longer counts."""
    now = datetime.now(UTC)
    with transaction(sqlite_engine) as connection:
        for n in range(others):
            connection.execute(
                insert(workers).values(worker_id=f"other-{n}", started_at=now, heartbeat_at=now)
            )
        connection.execute(
            insert(workers).values(
                worker_id="gone", started_at=now, heartbeat_at=now - timedelta(hours=1)
            )
        )
    worker = make_worker(sqlite_url, sqlite_engine, sim.url, site_max_rate=60.0)
    stage(sqlite_engine, [price_row("SKU-1", 1)])

    run(worker)

    assert 60.0 / (1 + others) == worker.pace.max_rate
    assert 60.0 / (1 + others) == worker.pace.effective_rate()


@pytest.mark.parametrize("others", [0, 1])
def test_a_worker_knows_whether_it_is_alone_on_the_site(
    sqlite_url: str, sqlite_engine: Engine, sim: SiteSimulator, others: int
) -> None:
    """A worker alone on the site probes without waiting for the probe turn (domain.pace):
    the worker tells its pace whether others reported within the lease time, cap or no cap."""
    now = datetime.now(UTC)
    with transaction(sqlite_engine) as connection:
        for n in range(others):
            connection.execute(
                insert(workers).values(worker_id=f"other-{n}", started_at=now, heartbeat_at=now)
            )
        connection.execute(
            insert(workers).values(
                worker_id="gone", started_at=now, heartbeat_at=now - timedelta(hours=1)
            )
        )
    worker = make_worker(sqlite_url, sqlite_engine, sim.url)
    worker.pace.alone = others != 0  # the opposite, so the run must set it
    stage(sqlite_engine, [price_row("SKU-1", 1)])

    run(worker)

    assert (others == 0, 1 + others) == (worker.pace.alone, worker.pace.workers)


def test_a_worker_in_a_long_cycle_counts_a_worker_that_came_during_it(
    sqlite_url: str, sqlite_engine: Engine, sim: SiteSimulator
) -> None:
    """A backlog keeps one cycle going for as long as it lasts: every SHARE_EVERY seconds of
    it the worker reports and counts the live workers again, so one that came meanwhile gets
    its share (of EXCHANGE_SITE_MAX_RATE, of the site's queue) during the cycle, not after."""
    skus = 200
    stage(sqlite_engine, [price_row(f"SKU-{n}", 1) for n in range(skus)])
    worker = make_worker(sqlite_url, sqlite_engine, sim.url, site_max_rate=100.0, batch_size=20)
    sent_when_another_came: list[int] = []
    reports: list[CycleReport] = []

    async def one_cycle(worker: Worker) -> None:
        async def another_comes() -> None:
            # 200 requests at 100/s make a cycle of 2 s at least (the pace is wall time, so
            # load does not shorten it), recounted every SHARE_EVERY (1 s): the other comes
            # at 0.5 s, and load would have to hold this task back 1.5 s to miss the cycle
            await asyncio.sleep(0.5)
            sent_when_another_came.append(worker.requests_sent)
            now = datetime.now(UTC)
            with transaction(sqlite_engine) as connection:
                connection.execute(
                    insert(workers).values(worker_id="other", started_at=now, heartbeat_at=now)
                )

        came = asyncio.create_task(another_comes())
        reports.append(await worker.cycle())
        await came

    run(worker, one_cycle)

    assert skus == reports[0].sent, "the backlog took more than one cycle: the test tests nothing"
    assert 0 < sent_when_another_came[0] < skus
    assert (2, False, 50.0) == (worker.pace.workers, worker.pace.alone, worker.pace.max_rate)


# -- several workers on one site: one probe at a time -------------------------------------------


@pytest.mark.parametrize("database", ["postgresql", "sqlite"])
def test_two_workers_probe_the_site_one_at_a_time(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two workers share a rate-limited shop through one database (PostgreSQL; SQLite, one
    host, works the same way): each paces itself, and they take turns probing past their
    known-good rates (the probe turn, a row in target_locks), so that two probes never push
    past the shop's capacity together. Sampled every 5 ms (a worker probes while it sends past
    its known-good rate, in the last 50 ms): the time both probe at once is at most the few
    milliseconds a claim of the turn takes (a worker that still believes itself alone probes
    as it claims), under 2 % of the time either probes; without turns it is most of it. Every
    message delivered once, nothing quarantined, at most 5 % of the requests refused."""
    skus = 1200

    # (when, requests sent) per worker, from the last sample at or before 50 ms ago
    sent: list[list[tuple[float, int]]] = [[], []]

    def probes(i: int, worker: Worker, now: float) -> bool:  # sent past its known-good rate
        """In the last 50 ms by the clock, not by a count of samples: on a loaded machine the
        5 ms sleeps stretch, and ten samples would span a window long enough to count a
        worker that stopped probing long ago as probing beside the other."""
        window = sent[i]
        window.append((now, worker.requests_sent))
        while len(window) > 2 and window[1][0] <= now - 0.05:
            window.pop(0)
        recent = window[-1][1] > window[0][1]
        return worker.pace.probing_since is not None and recent

    if database == "sqlite":
        db_url = sqlite_database(tmp_path)
    else:
        db_url = str(request.getfixturevalue("pg_url"))
    engines = [make_engine(db_url) for _ in range(2)]
    stage(engines[0], [price_row(f"SKU-{n}", 1, f"{n}.00") for n in range(skus)])
    samples: list[tuple[bool, bool]] = []
    took_a_turn = [False, False]  # took the probe turn from the database at some point
    refused_a_turn = [False, False]  # asked for it while the other held it, and was refused
    with SiteSimulator(token="test-token", faults=rate_limited_shop(100.0)) as site:
        settings = fast_settings(
            db_url,
            site.url,
            concurrency=32,
            batch_size=100,
            max_attempts=MAX_ATTEMPTS,
            retry_base_delay=0.05,
            retry_max_delay=1.0,
        )
        pair = [
            bootstrap.worker(settings.model_copy(update={"worker_id": f"w{i}"}), engine)
            for i, engine in enumerate(engines)
        ]

        def recording(
            i: int, turn_taken: Callable[..., None], turn_refused: Callable[..., None]
        ) -> tuple[Callable[..., None], Callable[..., None]]:
            """The pace's own word that its worker took the turn (the claim succeeded) or was
            refused it by the other: seen as it happens, not in a 5 ms sample that a loaded
            machine may space out past a short turn."""

            def taken(*args: object, **kwargs: object) -> None:
                took_a_turn[i] = True
                turn_taken(*args, **kwargs)

            def refused(*args: object, by_another: bool) -> None:
                refused_a_turn[i] |= by_another
                turn_refused(*args, by_another=by_another)

            return taken, refused

        for i, w in enumerate(pair):
            w.pace.turn_taken, w.pace.turn_refused = recording(  # type: ignore[method-assign]
                i, w.pace.turn_taken, w.pace.turn_refused
            )

        async def both() -> None:
            async def sample() -> None:
                while True:
                    now = time.monotonic()
                    samples.append(tuple(probes(i, w, now) for i, w in enumerate(pair)))  # type: ignore[arg-type]
                    await asyncio.sleep(0.005)

            sampler = asyncio.create_task(sample())
            try:
                await asyncio.gather(*(drain(w, cycles=5000) for w in pair))
            finally:
                sampler.cancel()
                for w in pair:
                    await w.target.aclose()

        asyncio.run(both())
        by_status = site.requests_by_status()
        effects = site.effect_counts()
    found = states(engines[0])
    for engine in engines:
        engine.dispose()

    assert {f"SKU-{n}": ("delivered", 1) for n in range(skus)} == {
        a: (s, n) for a, (s, n, _) in found.items()
    }
    assert {1} == set(effects.values())
    probing = sum(1 for a, b in samples if a or b)
    together = sum(1 for a, b in samples if a and b)
    assert probing > 0.1 * len(samples), "hardly any probe: the test tests nothing"
    # The turn was contended: both took it, or one asked for it while the other held it and
    # was refused. Not "both took it": on a loaded machine the workers may never reach the
    # shop's capacity, so the holder's probe is never refused and it keeps the turn to the end
    # (a full CI run: one worker never took it), the other refused all along; and not "sent
    # while probing" of each (under load one may never be sampled sending while it holds it).
    assert all(took_a_turn) or any(refused_a_turn), "the probe turn was never contended"
    # Margin: 0.1-0.9 % measured with the load average at 9-12 on two cores (PostgreSQL and
    # SQLite), against 52-80 % with the turn broken (a refused claim still probing). What grows
    # with load is the claim's own time, a few of its milliseconds per handover; the window of
    # "recent" is measured by the clock, so sparser samples under load do not widen it.
    assert together <= 0.02 * probing, f"{together} of {probing} probing samples both probed"
    refused = by_status[429] / sum(by_status.values())
    assert refused <= 0.05, f"{refused:.1%} of the requests refused"
