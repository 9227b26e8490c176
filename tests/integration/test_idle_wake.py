"""Issue 23, item 6: at idle on PostgreSQL a staged row wakes the worker (the trigger that
``migrate`` puts on staging_intents, LISTEN/NOTIFY), so it reaches the shop well within a
second, not at the next poll; the trigger only where staging is in the service's database.
Issue 35, item 4: on SQLite as well (PRAGMA data_version on a connection of the worker's own),
and the worker's own commits never wake it into a loop."""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import text

from exchange import app as bootstrap
from exchange import runner
from exchange.db import wake
from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import alembic_config, upgrade
from exchange.db.wake import how_workers_wake
from exchange.dev.dbkit import SqliteTemplate
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import fast_settings, price_row, run_worker, stage

POLL = 30.0  # without a wake-up a row waits for the poll: up to 30 s, 15 s at the median
ROWS = 20
# The bound this test holds every row to. The promise itself (median under 0.5 s, p99 under 1 s
# at idle) is a measurement: `python -m bench --sections latency` reports it (a timed unit test
# on a shared 2-core machine fails on load, not on a regression: 1.59 s worst seen here under a
# load of 14). What the suite checks is the mechanism: a woken worker delivers in about 0.1 s
# idle; a worker left to its poll would take 15 s at the median. 3 s is 30x the idle figure and
# a fifth of the poll's median, so it holds on a loaded machine and fails without the wake-up.
BOUND = 3.0


@pytest.fixture
def shop() -> Iterator[SiteSimulator]:
    with SiteSimulator(token="test-token", faults=Faults(seed=1)) as simulator:
        yield simulator


def has_trigger(url: str) -> bool:
    engine = make_engine(url)
    try:
        with transaction(engine, read_only=True) as connection:
            return bool(
                connection.execute(
                    text("SELECT count(*) FROM pg_trigger WHERE tgname = 'staging_intents_notify'")
                ).scalar()
            )
    finally:
        engine.dispose()


def test_at_idle_a_row_1c_commits_wakes_the_worker_instead_of_waiting_for_the_poll(
    db_url: str, shop: SiteSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One worker (run's scheduler, poll 30 s) at idle, 20 rows committed one at a time as 1C
    does (a plain INSERT from a connection of its own: on PostgreSQL the trigger notifies, on
    SQLite the commit changes data_version): every row reaches the shop within BOUND of its
    commit; without the wake-up each would wait for the poll (15 s at the median)."""
    stops: list[Callable[[], None]] = []
    monkeypatch.setattr(runner, "_install_signals", lambda _loop, stop: stops.append(stop))
    service = make_engine(db_url)
    engine = make_engine(db_url)  # 1C's connection, not the worker's pool
    worker = bootstrap.worker(fast_settings(db_url, shop.url, poll_interval=POLL), service)
    delays: list[float] = []
    rng = random.Random(7)

    async def scenario(_: Any) -> None:
        running = asyncio.create_task(runner.run_forever(worker, poll_interval=POLL))
        try:
            await asyncio.sleep(0.5)  # the first cycle has run: idle
            for n in range(ROWS):
                await asyncio.sleep(rng.uniform(0.05, 0.3))
                stage(engine, [price_row(f"SKU-{n:02d}", 1)])
                committed = time.monotonic()
                while ("price", f"SKU-{n:02d}") not in shop.held_versions():
                    if time.monotonic() - committed > BOUND:
                        raise AssertionError(
                            f"row {n} not delivered within {BOUND} s: nothing woke the worker"
                            f" (its poll is {POLL} s)"
                        )
                    await asyncio.sleep(0.002)
                delays.append(time.monotonic() - committed)
        finally:
            stops[-1]()
            await asyncio.wait_for(running, 10)

    try:
        run_worker(worker, scenario)
    finally:
        engine.dispose()
        service.dispose()

    median, worst = statistics.median(delays), max(delays)
    print(f"idle latency: median {median:.3f} s, worst of {ROWS} {worst:.3f} s")
    assert worst < BOUND


def test_on_sqlite_an_idle_worker_does_not_wake_itself_with_its_own_commits(
    tmp_path: Path,
    sqlite_template: SqliteTemplate,
    shop: SiteSimulator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each cycle ends with a heartbeat (a commit from the worker's pool: another connection
    to the watch). After a row is delivered the worker goes quiet: over 200 checks of the watch
    (a check every 0.005 s) no further cycle runs, where a wake-up on any commit would run one
    per check. The poll (30 s) is far away; the count, not the clock, is asserted."""
    url = sqlite_template.copy_to(tmp_path / "exchange.db")
    stops: list[Callable[[], None]] = []
    monkeypatch.setattr(runner, "_install_signals", lambda _loop, stop: stops.append(stop))
    monkeypatch.setattr(wake, "CHECK_EVERY_S", 0.005)
    watches: list[wake.DataVersionWatch] = []
    real_watch = wake.watch

    def watch(*args: Any) -> Any:
        found = real_watch(*args)
        assert isinstance(found, wake.DataVersionWatch)
        watches.append(found)
        return found

    monkeypatch.setattr(runner, "watch", watch)
    service, engine = make_engine(url), make_engine(url)
    worker = bootstrap.worker(fast_settings(url, shop.url, poll_interval=POLL), service)
    cycles = 0
    real_cycle = worker.cycle

    async def counted(**how: Any) -> Any:
        nonlocal cycles
        cycles += 1
        return await real_cycle(**how)

    monkeypatch.setattr(worker, "cycle", counted)

    async def until_checks(count: int) -> None:
        async with asyncio.timeout(60):
            while not watches or watches[-1].checks < count:
                await asyncio.sleep(0.005)

    async def scenario(_: Any) -> tuple[int, int]:
        running = asyncio.create_task(runner.run_forever(worker, poll_interval=POLL))
        try:
            await until_checks(5)
            stage(engine, [price_row("SKU-1", 1)])
            async with asyncio.timeout(BOUND * 10):
                while ("price", "SKU-1") not in shop.held_versions():
                    await asyncio.sleep(0.005)
            await until_checks(watches[-1].checks + 20)  # the delivery's commits settle
            settled = cycles
            await until_checks(watches[-1].checks + 200)
            return settled, cycles
        finally:
            stops[-1]()
            await asyncio.wait_for(running, 10)

    found: list[tuple[int, int]] = []

    async def recorded(w: Any) -> None:
        found.append(await scenario(w))

    try:
        run_worker(worker, recorded)
    finally:
        engine.dispose()
        service.dispose()
    settled, after = found[0]
    assert after == settled, f"{after - settled} cycles woken by the worker's own commits"


def test_migrate_puts_the_notifying_trigger_only_in_the_services_own_database(
    empty_pg_url: str, other_pg_url: str
) -> None:
    """The service's database gets the trigger; a staging database of its own does not (no
    worker listens there: they poll it), and migrate's sentence says which."""
    service, staging = make_engine(empty_pg_url), make_engine(other_pg_url)
    try:
        upgrade(service)
        # The template's database is at head, trigger included: back to before the trigger's
        # migration (Alembic's own downgrade), then up again as a staging database.
        command.downgrade(alembic_config(staging), "0014")
        upgrade(staging, staging_notify=False)
        assert has_trigger(empty_pg_url)
        assert not has_trigger(other_pg_url)
        assert "wake the workers at once" in how_workers_wake(service, None, POLL)
        assert f"every {POLL:g} s (the poll)" in how_workers_wake(service, staging, POLL)
    finally:
        service.dispose()
        staging.dispose()


def test_a_stop_during_a_cycle_the_wake_up_started_finishes_and_records_its_batch(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM while a cycle that a notification started (not the poll's) has its batch at the
    shop: ``run`` finishes the batch and records it, as it does for the poll's cycle; the
    message is ``delivered``, never left ``in_progress`` for its lease to run out (the stop
    used to cancel the wake-up's cycle between the shop's answer and the record)."""
    stops: list[Callable[[], None]] = []
    monkeypatch.setattr(runner, "_install_signals", lambda _loop, stop: stops.append(stop))
    engine = make_engine(pg_url)
    slow = Faults(slow_rate=1.0, slow_seconds=1.0, seed=1)  # the batch is at the shop for 1 s
    with SiteSimulator(token="test-token", faults=slow) as shop:
        worker = bootstrap.worker(fast_settings(pg_url, shop.url, poll_interval=POLL), engine)

        async def scenario(_: Any) -> None:
            running = asyncio.create_task(runner.run_forever(worker, poll_interval=POLL))
            await asyncio.sleep(0.5)  # the poll's first cycle has run: idle for 30 s now
            stage(engine, [price_row("SKU-1", 1)])  # the trigger wakes a cycle
            # Any cycle before the poll's next (30 s) is the wake-up's: the latency is not the
            # point here (failed at 3 s under a load of 10 in a full run), the stop is.
            deadline = time.monotonic() + POLL / 2
            while not shop.requests_by_status() and not _claimed(engine):
                assert time.monotonic() < deadline, "the wake-up started no cycle"
                await asyncio.sleep(0.01)
            stops[-1]()  # SIGTERM, the batch still at the shop (its answer takes 1 s)
            await asyncio.wait_for(running, 10)

        try:
            run_worker(worker, scenario)
            with transaction(engine, read_only=True) as connection:
                found = connection.execute(text("SELECT state FROM deliveries")).scalars().all()
        finally:
            engine.dispose()
    assert ["delivered"] == found


def _claimed(engine: Any) -> bool:
    with transaction(engine, read_only=True) as connection:
        return bool(
            connection.execute(
                text("SELECT count(*) FROM deliveries WHERE state = 'in_progress'")
            ).scalar()
        )
