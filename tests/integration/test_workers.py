"""Several real worker processes on one PostgreSQL database, and a worker killed mid-request.

These start ``exchange run`` as separate processes, as production does on several hosts.
"""

from __future__ import annotations

import random
import signal
import time
from datetime import datetime
from pathlib import Path

import pytest
from procs import start, wait_for
from sqlalchemy import Engine, select

from exchange.db.engine import make_engine, transaction
from exchange.db.schema import history
from exchange.db.schema import workers as workers_table
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import (
    in_flight_overlaps,
    one_channel_messages,
    posting_row,
    price_row,
    stage,
)
from exchange.ops.status import biography

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

# Leases and workers race in wall-clock time: never beside another timing test.
pytestmark = [pytest.mark.slow, pytest.mark.timing]


def live_workers(engine: Engine) -> int:
    with transaction(engine, read_only=True) as connection:
        running = select(workers_table.c.worker_id).where(workers_table.c.stopped_at.is_(None))
        return len(connection.execute(running).all())


@pytest.mark.parametrize("workers", [2, 3])
def test_several_worker_processes_share_the_work_and_no_aggregate_is_ever_in_flight_twice(
    pg_url: str, tmp_path: Path, workers: int
) -> None:
    engine = make_engine(pg_url)
    rng = random.Random(workers)
    rows = [price_row(f"SKU-{n}", v, f"{n}.{v}") for n in range(150) for v in (1, 2)]
    rows += [posting_row(f"DOC-{d}", v) for d in range(6) for v in range(1, 6)]
    rng.shuffle(rows)
    faults = Faults(fail_rate=0.05, slow_rate=1.0, slow_seconds=0.01, seed=workers)
    with SiteSimulator(token="test-token", faults=faults) as site:
        procs = [start(pg_url, site, f"w{i}", tmp_path) for i in range(workers)]
        try:
            # Every worker is polling before 1C writes anything: each has ended a cycle (its
            # row in `workers`), so its signal handlers are in place for the SIGTERM below.
            # (A loaded machine can take seconds to start one; the others would do all the
            # work meanwhile, and the SIGTERM would find it still importing.)
            wait_for(lambda: live_workers(engine) == workers, 60, "workers to start")
            stage(engine, rows)
            wait_for(lambda: len(site.held_versions()) == 156, 90, "every aggregate delivered")
            wait_for(
                lambda: (
                    sum(
                        len(site.applied_versions("financial_posting", f"DOC-{d}"))
                        for d in range(6)
                    )
                    == 30
                ),
                60,
                "every posting delivered",
            )
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=30) for p in procs]
        logs = {i: (tmp_path / f"w{i}.log").read_text() for i in range(workers)}
        assert [0] * workers == codes, logs
        assert {1} == set(site.effect_counts().values())
        for d in range(6):
            assert [1, 2, 3, 4, 5] == site.applied_versions("financial_posting", f"DOC-{d}")
        assert {("price", f"SKU-{n}"): 2 for n in range(150)} == {
            k: v for k, v in site.held_versions().items() if k[0] == "price"
        }
    with transaction(engine, read_only=True) as connection:
        workers_seen = set(
            connection.execute(
                select(history.c.worker).where(history.c.event == "delivered")
            ).scalars()
        )
        states = set(connection.execute(select(messages.c.state)).scalars())
        unfinished = connection.execute(
            select(
                messages.c.message_id,
                history.c.event,
                history.c.worker,
                history.c.at,
                history.c.detail,
            )
            .join(history, history.c.message_pk == messages.c.id)
            .where(messages.c.state.not_in(["delivered", "cancelled"]))
            .order_by(history.c.id)
        ).all()
    assert {"delivered", "cancelled"} >= states, unfinished
    assert [] == in_flight_overlaps(engine)
    assert len(workers_seen) >= 2, f"the work was not shared: {workers_seen}"
    engine.dispose()


def test_a_worker_killed_while_its_request_is_in_flight_is_taken_over_and_the_site_sees_one_effect(
    pg_url: str, tmp_path: Path
) -> None:
    engine = make_engine(pg_url)
    stage(engine, [price_row("SKU-1", 1, "99.90"), posting_row("DOC-1", 1)])
    with SiteSimulator(token="test-token", faults=Faults(slow_rate=1.0, slow_seconds=30)) as site:
        first = start(pg_url, site, "doomed", tmp_path, EXCHANGE_LEASE_SECONDS="1")
        deadline = time.monotonic() + 30
        while len(site.effects()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 2 == len(site.effects()), "the first worker never reached the site"
        time.sleep(1.5)  # it keeps renewing its lease while it lives
        with transaction(engine, read_only=True) as connection:
            owners = set(connection.execute(select(messages.c.locked_by)).scalars())
        assert {"doomed"} == owners
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        site.faults.slow_rate = 0.0
        second = start(
            pg_url,
            site,
            "rescuer",
            tmp_path,
            "--until-idle",
            "--max-seconds",
            "60",
            EXCHANGE_LEASE_SECONDS="1",
        )
        assert 0 == second.wait(timeout=90), (tmp_path / "rescuer.log").read_text()
        assert {1} == set(site.effect_counts().values())
        assert 2 == len(site.effects())
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(select(messages.c.message_id, messages.c.state)).all()
        stories = [biography(connection, message_id)["history"] for message_id, _ in rows]
    assert {"delivered"} == {state for _, state in rows}
    for story in stories:
        # One row per attempt: the killed one shows in the takeover row (its worker, attempt
        # and lease start), the rescuer's in the outcome row; taking a lease wrote no row.
        assert ["taken", "taken-over", "delivered"] == [e["event"] for e in story], story
        _, crashed, delivered = story
        assert ("doomed", 1) == (crashed["worker"], crashed["attempt"])
        times = [crashed["leased_at"], crashed["at"], delivered["leased_at"], delivered["at"]]
        assert None not in times
        begun, ended, again, answered = (datetime.fromisoformat(t) for t in times)
        assert begun < ended <= again < answered
        assert "the lease of doomed had expired" in crashed["detail"]
        assert "taken over by rescuer for attempt 2" in crashed["detail"]
        assert ("rescuer", 2, 200) == (
            delivered["worker"],
            delivered["attempt"],
            delivered["http_status"],
        )
    engine.dispose()
