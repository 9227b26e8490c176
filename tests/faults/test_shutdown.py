"""SIGTERM in the middle of a batch: a real ``exchange run`` process stops gracefully.

The requests in flight finish (each within EXCHANGE_HTTP_TIMEOUT) and are recorded; the
messages of the batch not sent yet are handed back at once (state ``new``, attempt not charged,
their aggregates freed, a ``released`` history entry saying the worker is stopping); the
process exits 0. A restarted worker carries on without waiting for any lease to expire.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from procs import sqlite_database, start, stop, wait_for
from sqlalchemy import select

from exchange.db.engine import make_engine, transaction
from exchange.db.schema import history
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import (
    fast_settings,
    one_channel_aggregates,
    one_channel_messages,
    price_row,
    stage,
)
from exchange.domain.clock import FakeClock
from exchange.domain.retry import not_sent
from exchange.intake import staging_table as intake
from exchange.queue import lease, record

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()
aggregates = one_channel_aggregates()

# Shutdown deadlines are asserted in wall-clock time: never beside another timing test.
pytestmark = pytest.mark.timing

LONG_LEASE = {"EXCHANGE_LEASE_SECONDS": "300", "EXCHANGE_BATCH_SIZE": "12"}


@pytest.mark.slow
def test_sigterm_mid_batch_finishes_the_requests_in_flight_hands_back_the_rest_and_exits_0(
    db_url: str, tmp_path: Path
) -> None:
    engine = make_engine(db_url)
    stage(engine, [price_row(f"SKU-{n}", 1, f"{n}.10") for n in range(12)])
    faults = Faults(slow_rate=1.0, slow_seconds=4.0)  # applied, then the answer is held 4 s
    with SiteSimulator(token="test-token", faults=faults) as site:
        first = start(
            db_url, site, "first", tmp_path, EXCHANGE_CONCURRENCY="2", **LONG_LEASE
        )  # the scheduled service, as production runs it
        try:
            wait_for(lambda: len(site.effects()) == 2, 60, "two requests in flight")
            first.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            code = first.wait(timeout=60)
            stopped_after = time.monotonic() - signalled
        finally:
            stop(first)
        assert 0 == code, (tmp_path / "first.log").read_text()
        # The stop waits for the two answers in flight (the site holds them 4 s) and exits:
        # about 5 s idle; 30 s leaves a loaded machine six times that, and stays far below
        # the 300 s lease a stop that waited for the leases would take.
        assert stopped_after < 30, f"took {stopped_after:.1f} s to stop"
        in_flight = {e.message_id for e in site.effects()}
        assert 2 == len(in_flight)

        with transaction(engine, read_only=True) as connection:
            rows = connection.execute(
                select(messages.c.id, messages.c.message_id, messages.c.state, messages.c.attempts)
            ).all()
            events = connection.execute(
                select(history.c.id, history.c.message_pk, history.c.event, history.c.detail)
                .where(history.c.worker == "first")
                .order_by(history.c.id)
            ).all()
            leased = connection.execute(
                select(aggregates.c.aggregate).where(aggregates.c.lease_token.is_not(None))
            ).all()
        states = {mid: (state, attempts) for _, mid, state, attempts in rows}
        assert {mid: ("delivered", 1) for mid in in_flight} == {
            mid: states[mid] for mid in in_flight
        }
        unsent = {mid for mid in states if mid not in in_flight}
        assert {mid: ("new", 0) for mid in unsent} == {mid: states[mid] for mid in unsent}
        assert [] == leased
        released = [e for e in events if e.event == "released"]
        delivered = [e for e in events if e.event == "delivered"]
        assert 10 == len(released)
        assert all("worker is stopping" in (e.detail or "") for e in released)
        # Handed back at once: recorded before the answers in flight arrived and were recorded.
        assert max(e.id for e in released) < min(e.id for e in delivered)

        site.faults.slow_rate = 0.0
        restarted = time.monotonic()
        second = start(
            db_url, site, "second", tmp_path, "--until-idle", "--max-seconds", "60", **LONG_LEASE
        )
        try:
            assert 0 == second.wait(timeout=90), (tmp_path / "second.log").read_text()
        finally:
            stop(second)
        assert time.monotonic() - restarted < 60  # far below the 300 s lease
        assert {1} == set(site.effect_counts().values())
        assert 12 == len(site.effects())
    with transaction(engine, read_only=True) as connection:
        assert {"delivered"} == set(connection.execute(select(messages.c.state)).scalars())
    engine.dispose()


@pytest.mark.slow
def test_sigterm_waits_for_a_hanging_request_no_longer_than_the_request_timeout(
    tmp_path: Path,
) -> None:
    url = sqlite_database(tmp_path)
    engine = make_engine(url)
    stage(engine, [price_row("SKU-1", 1), price_row("SKU-2", 1)])
    faults = Faults(slow_rate=1.0, slow_seconds=120.0)  # an answer that never comes in time
    with SiteSimulator(token="test-token", faults=faults) as site:
        worker = start(
            url,
            site,
            "hanging",
            tmp_path,
            "--until-idle",
            EXCHANGE_CONCURRENCY="1",
            EXCHANGE_HTTP_TIMEOUT="3",
            **LONG_LEASE,
        )
        try:
            wait_for(lambda: len(site.effects()) == 1, 60, "one request in flight")
            worker.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            code = worker.wait(timeout=60)
            stopped_after = time.monotonic() - signalled
        finally:
            stop(worker)
    assert 0 == code, (tmp_path / "hanging.log").read_text()
    # Bounded by the request timeout (3 s) plus the exit; the site holds the answer 120 s:
    # 30 s is ten times the one and a quarter of the other.
    assert stopped_after < 30, f"took {stopped_after:.1f} s (the site held the answer 120 s)"
    with transaction(engine, read_only=True) as connection:
        rows = dict(connection.execute(select(messages.c.aggregate, messages.c.state)).all())
        leased = connection.execute(
            select(aggregates.c.aggregate).where(aggregates.c.lease_token.is_not(None))
        ).all()
    # The hanging one timed out: result unknown, a retry is due; the other went back unsent.
    assert {"delayed", "new"} == set(rows.values()), rows
    assert [] == leased
    engine.dispose()


def test_handing_back_part_of_a_batch_frees_only_those_aggregates_and_charges_nothing(
    db_url: str, clock: FakeClock
) -> None:
    engine = make_engine(db_url)
    settings = fast_settings(db_url)
    strict = settings.policies
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(4)])
    intake.take(engine, None, settings.kinds, clock.now())
    with transaction(engine) as connection:
        batch = lease.claim(
            connection,
            worker="w1",
            now=clock.now(),
            limit=10,
            lease_seconds=300,
            kinds=strict,
            max_attempts=3,
        )
    in_flight, unsent = batch.messages[:1], batch.messages[1:]
    with transaction(engine) as connection:
        recorded = record.record(
            connection,
            token=batch.token,
            worker="w1",
            now=clock.now(),
            outcomes=[(m, not_sent("not sent: the worker is stopping", m.attempt)) for m in unsent],
            kinds=strict,
            release_all=False,
        )
    with transaction(engine, read_only=True) as connection:
        still_leased = set(
            connection.execute(
                select(aggregates.c.id).where(aggregates.c.lease_token == batch.token)
            ).scalars()
        )
        states = dict(connection.execute(select(messages.c.id, messages.c.state)).all())
        attempts = dict(connection.execute(select(messages.c.id, messages.c.attempts)).all())
    with transaction(engine) as connection:  # another worker: only the handed-back ones
        again = lease.claim(
            connection,
            worker="w2",
            now=clock.now(),
            limit=10,
            lease_seconds=300,
            kinds=strict,
            max_attempts=3,
        )
    engine.dispose()
    assert 3 == recorded
    assert {in_flight[0].aggregate_id} == still_leased
    assert {m.pk: ("new", 0) for m in unsent} == {
        m.pk: (states[m.pk], attempts[m.pk]) for m in unsent
    }
    assert ("in_progress", 1) == (states[in_flight[0].pk], attempts[in_flight[0].pk])
    assert {m.pk for m in unsent} == {m.pk for m in again.messages}
