"""The database fails under a running service: restart, killed backends, a busy SQLite, an outage.

PostgreSQL is never restarted for real (other tests use the server at the same time). A restart
is played by ``tcpproxy.TcpProxy`` between the worker process and the server: every connection
dropped, new ones refused, then accepted again on the same port, which is all a client can see
of a restart. Killed backends are real (``pg_terminate_backend``). Workers are real
``exchange run`` processes; SQLite cases run the Worker in-process with a short busy timeout.

What every case checks at the end: every staging row delivered, one effect per message at the
site, postings applied in order, no message left in flight, and a log that tells the failed
cycles in one line each (password masked, no traceback) followed by deliveries again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from procs import wait_for
from sqlalchemy import Connection, Engine, event, func, select, text
from sqlalchemy.engine import make_url
from tcpproxy import TcpProxy

from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import history, staging
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import fast_settings, one_channel_messages, posting_row, price_row, stage
from exchange.errors import DatabaseUnavailable
from exchange.runner import run_until_idle

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

PASSWORD = "Db-Secret-42"  # trust auth ignores it; it must still never be shown
PENDING = ("new", "in_progress", "delayed")
MAX_ATTEMPTS = 20


# -- helpers ----------------------------------------------------------------------------------


# The waits below (wait_for, a process's wait) are hang guards, not margins: each waits for an
# event that comes within a few seconds on an idle machine, and allows 30-90 s, ten times or
# more, before it fails; a loaded machine only makes them wait longer.
def with_password(url: str) -> str:
    return make_url(url).set(password=PASSWORD).render_as_string(hide_password=False)


def start_worker(
    db_url: str, site: SiteSimulator, worker_id: str, tmp_path: Path, **extra: str
) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env.update(
        {
            "EXCHANGE_DATABASE_URL": db_url,
            "EXCHANGE_SITE_URL": site.url,
            "EXCHANGE_SITE_TOKEN": "test-token",
            "EXCHANGE_WORKER_ID": worker_id,
            "EXCHANGE_POLL_INTERVAL": "0.05",
            "EXCHANGE_BATCH_SIZE": "10",
            "EXCHANGE_CONCURRENCY": "8",
            "EXCHANGE_LEASE_SECONDS": "2",
            "EXCHANGE_RETRY_BASE_DELAY": "0.005",
            "EXCHANGE_RETRY_MAX_DELAY": "0.05",
            "EXCHANGE_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
            "EXCHANGE_HTTP_TIMEOUT": "10",
            "EXCHANGE_LOG_LEVEL": "INFO",
            **extra,
        }
    )
    with (tmp_path / f"{worker_id}.log").open("w") as log:  # the child keeps its own copy
        return subprocess.Popen(
            [sys.executable, "-m", "exchange", "run"],
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )


def stop(*procs: subprocess.Popen[str]) -> list[int]:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=30))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(proc.wait(timeout=10))
    return codes


def log_of(tmp_path: Path, worker_id: str) -> str:
    return (tmp_path / f"{worker_id}.log").read_text()


def failed_cycles(log: str) -> list[str]:
    return [line for line in log.splitlines() if "cycle failed" in line]


def settled(engine: Engine) -> bool:
    """Every staging row taken and no message pending: all delivered or cancelled."""
    with transaction(engine, read_only=True) as connection:
        untaken = connection.execute(
            select(func.count()).select_from(staging).where(staging.c.taken_at.is_(None))
        ).scalar_one()
        pending = connection.execute(
            select(func.count()).select_from(messages).where(messages.c.state.in_(PENDING))
        ).scalar_one()
    return untaken == 0 and pending == 0


def assert_delivered_once(
    engine: Engine, site: SiteSimulator, prices: dict[str, int], postings: dict[str, int]
) -> None:
    """prices: SKU -> highest version staged; postings: document -> last version staged."""
    assert {1} == set(site.effect_counts().values()), "a message took effect twice"
    for sku, top in prices.items():
        applied = site.applied_versions("price", sku)
        assert applied == sorted(set(applied)) and applied[-1] == top, (sku, applied)
    for document, last in postings.items():
        assert list(range(1, last + 1)) == site.applied_versions("financial_posting", document)
    with transaction(engine, read_only=True) as connection:
        states = dict(
            connection.execute(
                select(messages.c.state, func.count()).group_by(messages.c.state)
            ).all()
        )
        most = connection.execute(select(func.max(messages.c.attempts))).scalar_one()
        taken = connection.execute(
            select(func.count()).select_from(staging).where(staging.c.taken_at.is_not(None))
        ).scalar_one()
    assert set(states) <= {"delivered", "cancelled"}, states
    assert sum(states.values()) == taken, "a staging row did not become a message"
    assert most <= MAX_ATTEMPTS


def assert_logged_cleanly(log: str, *, failures_expected: bool) -> None:
    assert "Traceback" not in log, log[-3000:]
    assert PASSWORD not in log
    failures = failed_cycles(log)
    if failures_expected:
        assert failures, log[-3000:]
        assert all(":***@127.0.0.1:" in line for line in failures), failures
        # and the service went on: deliveries after the last failed cycle
        tail = log[log.rindex(failures[-1]) :]
        assert "outcome=delivered" in tail or "outcome=stale-at-site" in tail, tail[-2000:]


def terminate_backends(database: str) -> int:
    admin_url = os.environ.get("EXCHANGE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return len(rows)


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    url = make_url(os.environ.get("EXCHANGE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/x"))
    with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as running:
        yield running


@pytest.fixture
def open_engine() -> Iterator[Callable[..., Engine]]:
    """``make_engine`` whose engines are disposed after the test, pass or fail: an engine left
    open by a failed test would be collected during the next one and fail that one too."""
    made: list[Engine] = []

    def open_(url: str, **options: Any) -> Engine:
        made.append(make_engine(url, **options))
        return made[-1]

    yield open_
    for engine in made:
        engine.dispose()


def first_wave() -> tuple[list[dict[str, Any]], dict[str, int], dict[str, int]]:
    rows = [price_row(f"SKU-{n}", 1, f"{n}.10") for n in range(30)]
    rows += [posting_row(f"DOC-{d}", v) for d in range(3) for v in range(1, 5)]
    return rows, {f"SKU-{n}": 1 for n in range(30)}, {f"DOC-{d}": 4 for d in range(3)}


def second_wave() -> tuple[list[dict[str, Any]], dict[str, int], dict[str, int]]:
    rows = [price_row(f"SKU-{n}", v, f"{n}.{v}0") for n in range(30) for v in (2, 3)]
    rows += [posting_row(f"DOC-{d}", v) for d in range(3) for v in (5, 6)]
    return rows, {f"SKU-{n}": 3 for n in range(30)}, {f"DOC-{d}": 6 for d in range(3)}


# -- PostgreSQL ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.postgres
def test_a_postgresql_restart_mid_run_costs_failed_cycles_then_the_worker_delivers_everything_once(
    pg_url: str, proxy: TcpProxy, tmp_path: Path, open_engine: Callable[..., Engine]
) -> None:
    engine = open_engine(pg_url)
    rows, _, _ = first_wave()
    stage(engine, rows)
    faults = Faults(slow_rate=1.0, slow_seconds=0.05, fail_rate=0.05, seed=7)
    with SiteSimulator(token="test-token", faults=faults) as site:
        worker = start_worker(with_password(proxy.rewrite(pg_url)), site, "w1", tmp_path)
        try:
            wait_for(lambda: len(site.effects()) >= 10, 60, "the first deliveries")
            down_since = time.monotonic()
            assert proxy.cut() >= 1, "the worker held no connection to drop"
            more, prices, postings = second_wave()
            stage(engine, more)  # 1C keeps writing while the service cannot reach the database
            wait_for(
                lambda: bool(failed_cycles(log_of(tmp_path, "w1"))), 30, "a failed cycle logged"
            )
            effects_while_down = len(site.effects())
            # the outage lasts at least 1.5 s (a lower bound: load only lengthens it)
            wait_for(lambda: time.monotonic() - down_since > 1.5, 5, "the restart to last")
            assert proxy.refusing
            proxy.restore()
            wait_for(lambda: settled(engine), 90, "everything delivered after the restart")
            assert len(site.effects()) > effects_while_down
        finally:
            codes = stop(worker)
        assert [0] == codes, log_of(tmp_path, "w1")[-3000:]
        assert_delivered_once(engine, site, prices, postings)
    assert_logged_cleanly(log_of(tmp_path, "w1"), failures_expected=True)


@pytest.mark.slow
@pytest.mark.postgres
def test_backends_killed_by_pg_terminate_backend_mid_run_lose_nothing_and_apply_nothing_twice(
    pg_url: str, tmp_path: Path, open_engine: Callable[..., Engine]
) -> None:
    engine = open_engine(pg_url)
    database = make_url(pg_url).database or ""
    rows, _, _ = first_wave()
    stage(engine, rows)
    faults = Faults(slow_rate=1.0, slow_seconds=0.02, seed=3)
    with SiteSimulator(token="test-token", faults=faults) as site:
        worker = start_worker(with_password(pg_url), site, "w1", tmp_path)
        try:
            wait_for(lambda: len(site.effects()) >= 5, 60, "the first deliveries")
            more, prices, postings = second_wave()
            killed = 0
            for round_ in range(20):  # kill again and again while it works
                killed += terminate_backends(database)
                if round_ == 5:
                    stage(engine, more)
                time.sleep(0.1)  # 20 rounds over 2 s while the worker delivers (the site
            assert killed >= 1  # holds each answer 20 ms): load changes which kills hit
            wait_for(lambda: settled(engine), 90, "everything delivered after the kills")
        finally:
            codes = stop(worker)
        assert [0] == codes, log_of(tmp_path, "w1")[-3000:]
        assert_delivered_once(engine, site, prices, postings)
    # Whether a kill hit a transaction (a failed cycle) or an idle pooled connection (pre-ping
    # reconnects unseen) depends on timing; neither may leave a traceback or the password.
    assert_logged_cleanly(log_of(tmp_path, "w1"), failures_expected=False)


@pytest.mark.slow
@pytest.mark.postgres
def test_a_worker_cut_off_from_the_database_mid_batch_loses_its_leases_to_another_worker(
    pg_url: str, proxy: TcpProxy, tmp_path: Path, open_engine: Callable[..., Engine]
) -> None:
    engine = open_engine(pg_url)
    stage(engine, [price_row(f"SKU-{n}", 1, f"{n}.50") for n in range(8)])
    faults = Faults(slow_rate=1.0, slow_seconds=3.0)
    with SiteSimulator(token="test-token", faults=faults) as site:
        cut_off = start_worker(
            with_password(proxy.rewrite(pg_url)),
            site,
            "cut-off",
            tmp_path,
            EXCHANGE_POLL_INTERVAL="5",
        )
        rescuer = None
        try:
            # every request applied at the site, every answer still to come
            wait_for(lambda: len(site.effects()) == 8, 60, "the batch at the site")
            proxy.cut()
            site.faults.slow_rate = 0.0
            rescuer = start_worker(pg_url, site, "rescuer", tmp_path)
            wait_for(lambda: settled(engine), 60, "the rescuer to deliver the batch")
            wait_for(
                lambda: bool(failed_cycles(log_of(tmp_path, "cut-off"))),
                30,
                "the cut-off worker's failed cycle",
            )
            proxy.restore()
        finally:
            codes = stop(cut_off, *([rescuer] if rescuer else []))
        assert [0, 0] == codes, log_of(tmp_path, "cut-off")[-3000:]
        assert_delivered_once(engine, site, {f"SKU-{n}": 1 for n in range(8)}, {})
        assert 8 == len(site.effects())
    with transaction(engine, read_only=True) as connection:
        taken_over = connection.execute(
            select(history.c.worker, history.c.detail).where(history.c.event == "taken-over")
        ).all()
        delivered_by = set(
            connection.execute(
                select(history.c.worker).where(history.c.event == "delivered")
            ).scalars()
        )
    assert 8 == len(taken_over)
    # each row is the cut-off worker's attempt, ended when the rescuer took its lease over
    assert all(w == "cut-off" and "taken over by rescuer" in (d or "") for w, d in taken_over), (
        taken_over
    )
    assert {"rescuer"} == delivered_by  # the cut-off worker recorded nothing over the new owner
    log = log_of(tmp_path, "cut-off")
    assert_logged_cleanly(log, failures_expected=False)
    assert all("is unreachable" in line for line in failed_cycles(log))


@pytest.mark.slow
def test_status_and_migrate_with_the_database_unreachable_at_start_print_one_masked_line_exit_2(
    tmp_path: Path,
) -> None:
    # `run` with a password in an unreachable URL is covered in tests/cli/test_cli_config_errors
    with TcpProxy("127.0.0.1", 9) as closed:  # a port of ours, then refused
        closed.cut()
        url = f"postgresql+psycopg://postgres:{PASSWORD}@127.0.0.1:{closed.port}/exchange"
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "exchange", *command],
                env={**env, "EXCHANGE_DATABASE_URL": url},
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for command in (["status", "--json"], ["migrate"])
        ]
        results = [proc.communicate(timeout=60) for proc in procs]
    for out, err in results:
        lines = err.strip().splitlines()
        assert 1 == len(lines), err
        assert lines[0].startswith("error: database postgresql+psycopg://postgres:***@127.0.0.1:")
        assert "unreachable" in lines[0]
        assert PASSWORD not in out + err
        assert "Traceback" not in out + err
    assert [2, 2] == [proc.returncode for proc in procs]


@pytest.mark.postgres
def test_a_deadlock_chosen_by_postgresql_is_a_clean_one_line_failure_named_as_a_rollback(
    pg_url: str, open_engine: Callable[..., Engine]
) -> None:
    engine = open_engine(with_password(pg_url))
    with transaction(engine) as connection:
        connection.execute(text("CREATE TABLE lock_order (id int PRIMARY KEY)"))
        connection.execute(text("INSERT INTO lock_order VALUES (1), (2)"))
    both_hold_one = threading.Barrier(2, timeout=30)
    errors: list[str] = []

    def lock_both(first: int, second: int) -> None:
        try:
            with transaction(engine) as connection:
                lock = text("SELECT id FROM lock_order WHERE id = :id FOR UPDATE")
                connection.execute(lock, {"id": first})
                both_hold_one.wait()
                connection.execute(lock, {"id": second})
        except DatabaseUnavailable as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=lock_both, args=order) for order in ((1, 2), (2, 1))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert 1 == len(errors), errors  # PostgreSQL rolls back one of the two; the other commits
    assert "rolled a transaction back: deadlock detected" in errors[0]
    assert ":***@" in errors[0] and PASSWORD not in errors[0]
    assert 1 == len(errors[0].splitlines())


# -- SQLite -------------------------------------------------------------------------------------


class Recorder(logging.Handler):
    """Keeps the runner's and worker's records; ``failed`` is set at the first failed cycle."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.failed = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        if record.exc_info:
            line += " [with traceback]"
        self.lines.append(line)
        if "cycle failed" in line:
            self.failed.set()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    handler = Recorder()
    logger = logging.getLogger("exchange")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(previous)


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    path = tmp_path / "exchange.db"
    sqlite_copy(path)
    return path


class WriteLock:
    """Another connection's write transaction (BEGIN IMMEDIATE), as a 1C bridge might hold."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.connection.execute("BEGIN IMMEDIATE")
        self.released = threading.Event()

    def release(self) -> None:
        self.connection.execute("COMMIT")
        self.released.set()

    def close(self) -> None:
        if not self.released.is_set():
            self.release()
        self.connection.close()


def run_to_idle(settings_url: str, engine: Engine, site: SiteSimulator, **overrides: Any) -> int:
    settings = fast_settings(settings_url, site.url, **overrides)
    worker = bootstrap.worker(settings, engine)

    async def main() -> int:
        try:
            return await run_until_idle(worker, max_seconds=60, poll_interval=0.01)
        finally:
            await worker.target.aclose()

    return asyncio.run(main())


def test_a_sqlite_write_lock_shorter_than_the_busy_timeout_is_waited_for_and_the_cycle_succeeds(
    sqlite_path: Path, recorder: Recorder, open_engine: Callable[..., Engine]
) -> None:
    url = f"sqlite:///{sqlite_path}"
    engine = open_engine(url, busy_timeout=30)
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(5)])
    begin_tried = threading.Event()

    def note_write_begin(_conn: Connection, _cursor: Any, statement: str, *_: Any) -> None:
        if statement == "BEGIN IMMEDIATE":
            begin_tried.set()

    event.listen(engine, "before_cursor_execute", note_write_begin)
    lock = WriteLock(sqlite_path)

    def release_once_waited_for() -> None:
        begin_tried.wait(timeout=60)
        # The worker's BEGIN IMMEDIATE is now waiting on the lock: it is sent microseconds
        # after the event. Were load to delay it past 0.3 s, the lock would be free when it
        # comes and the test would prove less (a wait of 0), never fail for it.
        time.sleep(0.3)
        lock.release()

    releaser = threading.Thread(target=release_once_waited_for)
    releaser.start()
    try:
        with SiteSimulator(token="test-token") as site:
            code = run_to_idle(url, engine, site)
            assert {1} == set(site.effect_counts().values())
            assert 5 == len(site.effects())
    finally:
        releaser.join(timeout=60)
        lock.close()
    assert 0 == code
    assert begin_tried.is_set() and lock.released.is_set()
    assert [] == [line for line in recorder.lines if "cycle failed" in line]


def test_a_sqlite_lock_held_past_the_busy_timeout_fails_a_cycle_cleanly_and_the_next_recovers(
    sqlite_path: Path, recorder: Recorder, open_engine: Callable[..., Engine]
) -> None:
    url = f"sqlite:///{sqlite_path}"
    engine = open_engine(url, busy_timeout=0.2)
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(5)])
    lock = WriteLock(sqlite_path)

    def release_after_a_failed_cycle() -> None:
        recorder.failed.wait(timeout=60)
        lock.release()

    releaser = threading.Thread(target=release_after_a_failed_cycle)
    releaser.start()
    try:
        with SiteSimulator(token="test-token") as site:
            code = run_to_idle(url, engine, site)
            assert {1} == set(site.effect_counts().values())
            assert 5 == len(site.effects())
    finally:
        releaser.join(timeout=60)
        lock.close()
    assert 0 == code
    failures = [line for line in recorder.lines if "cycle failed" in line]
    assert failures, recorder.lines
    assert all("is busy: database is locked" in line for line in failures), failures
    assert not any("[with traceback]" in line for line in recorder.lines)
    with transaction(engine, read_only=True) as connection:
        assert {"delivered"} == set(connection.execute(select(messages.c.state)).scalars())


def test_a_sqlite_lock_that_fails_the_recording_of_a_batch_ends_in_a_takeover_and_one_effect(
    sqlite_path: Path, recorder: Recorder, open_engine: Callable[..., Engine]
) -> None:
    url = f"sqlite:///{sqlite_path}"
    engine = open_engine(url, busy_timeout=0.2)
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(4)])
    lock: list[WriteLock] = []
    with SiteSimulator(token="test-token", faults=Faults(slow_rate=1.0, slow_seconds=2.0)) as site:

        def lock_while_the_answers_are_out() -> None:
            wait_for(lambda: len(site.effects()) == 4, 60, "the batch at the site")
            lock.append(WriteLock(sqlite_path))  # may wait out a renewal in progress
            site.faults.slow_rate = 0.0
            recorder.failed.wait(timeout=60)
            lock[0].release()

        locker = threading.Thread(target=lock_while_the_answers_are_out)
        locker.start()
        try:
            code = run_to_idle(url, engine, site, lease_seconds=1.0, http_timeout=10.0)
        finally:
            locker.join(timeout=60)
            for held in lock:
                held.close()
        assert 0 == code
        assert {1} == set(site.effect_counts().values())
        assert 4 == len(site.effects())
    with transaction(engine, read_only=True) as connection:
        events = connection.execute(
            select(history.c.event, history.c.detail).order_by(history.c.id)
        ).all()
        rows = connection.execute(select(messages.c.state, messages.c.attempts)).all()
    assert 4 == sum(1 for event, _ in events if event == "taken-over"), events
    assert {("delivered", 2)} == set(rows)  # the lost answer cost one attempt, not an effect
    failures = [line for line in recorder.lines if "cycle failed" in line]
    assert failures and all("is busy" in line for line in failures), failures
    assert not any("[with traceback]" in line for line in recorder.lines)
