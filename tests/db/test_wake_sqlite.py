"""Issue 35, item 4: on SQLite a row another process commits to staging_intents wakes the
worker (``PRAGMA data_version`` on a connection of its own, exchange/db/wake.py), and the
worker's own commits (heartbeats, taking rows in, records) wake nothing, so an idle worker
never wakes itself into a loop. Checks are driven by hand (``check()``) or counted: no clock."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, insert, update

from exchange.db.engine import make_engine, sqlite_file, transaction
from exchange.db.schema import staging, workers
from exchange.db.wake import DataVersionWatch, how_workers_wake, watch
from exchange.dev.dbkit import SqliteTemplate
from exchange.dev.testing import price_row, stage


@pytest.fixture
def sqlite_engine(tmp_path: Path, sqlite_template: SqliteTemplate) -> Iterator[Engine]:
    engine = make_engine(sqlite_template.copy_to(tmp_path / "exchange.db"))
    yield engine
    engine.dispose()


def _file(engine: Engine) -> Path:
    path = sqlite_file(engine)
    assert path is not None
    return path


def _stage_in_another_process(engine: Engine, sku: str) -> None:
    """1C's INSERT, from a process of its own."""
    code = (
        "import sys\n"
        "from exchange.db.engine import make_engine\n"
        "from exchange.dev.testing import price_row, stage\n"
        "stage(make_engine(sys.argv[1]), [price_row(sys.argv[2], 1)])\n"
    )
    url = engine.url.render_as_string(hide_password=False)
    subprocess.run([sys.executable, "-c", code, url, sku], check=True, timeout=60)


@pytest.mark.subprocess
def test_a_row_another_process_commits_wakes_the_watch(sqlite_engine: Engine) -> None:
    woken: list[int] = []
    watching = DataVersionWatch(_file(sqlite_engine), lambda: woken.append(1))
    try:
        watching.check()  # the starting point
        watching.check()
        assert woken == []
        _stage_in_another_process(sqlite_engine, "SKU-1")
        watching.check()
        assert woken == [1], "a row 1C committed from another process did not wake the worker"
        watching.check()
        assert woken == [1], "one commit is one wake-up"
    finally:
        watching.close()


def test_the_workers_own_commits_that_stage_nothing_wake_nothing(sqlite_engine: Engine) -> None:
    """A heartbeat after every cycle, rows marked taken, outcomes recorded: other connections'
    commits to data_version, but no new staging row, so no wake-up (else each woken cycle's
    heartbeat would wake the next: a busy loop at idle)."""
    stage(sqlite_engine, [price_row("SKU-1", 1)])
    woken: list[int] = []
    watching = DataVersionWatch(_file(sqlite_engine), lambda: woken.append(1))
    try:
        watching.check()
        with transaction(sqlite_engine) as connection:  # a heartbeat's kind of write
            moment = datetime(2026, 1, 1, tzinfo=UTC)
            connection.execute(
                insert(workers).values(worker_id="w1", started_at=moment, heartbeat_at=moment)
            )
        watching.check()
        with transaction(sqlite_engine) as connection:  # intake marks the row taken
            connection.execute(update(staging).values(taken_at=datetime(2026, 1, 1, tzinfo=UTC)))
        watching.check()
        assert woken == []
        stage(sqlite_engine, [price_row("SKU-2", 1)])  # and a new row does wake it
        watching.check()
        assert woken == [1]
    finally:
        watching.close()


def test_the_running_watch_wakes_its_waiter_and_keeps_checking(sqlite_engine: Engine) -> None:
    async def scenario() -> int:
        woken = asyncio.Event()
        watching = DataVersionWatch(_file(sqlite_engine), woken.set, every=0.01)
        task = asyncio.create_task(watching.run())
        try:
            while watching.checks < 3:
                await asyncio.sleep(0.01)
            assert not woken.is_set()
            stage(make_engine(str(sqlite_engine.url)), [price_row("SKU-1", 1)])
            await asyncio.wait_for(woken.wait(), 30)  # a check every 0.01 s: at once
            return watching.checks
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    assert asyncio.run(scenario()) > 3


def test_sqlite_workers_are_told_they_wake_and_an_in_memory_database_polls(
    sqlite_engine: Engine,
) -> None:
    assert isinstance(watch(sqlite_engine, None, lambda: None), DataVersionWatch)
    assert "wakes the workers" in how_workers_wake(sqlite_engine, None, 5.0)
    memory = make_engine("sqlite://")
    try:
        assert watch(memory, None, lambda: None) is None
        assert "every 5 s (the poll)" in how_workers_wake(memory, None, 5.0)
    finally:
        memory.dispose()
