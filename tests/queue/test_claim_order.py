"""The claim order (domain/urgency.py, queue/order.py): a backlog claimed in batches, and what
is staged while it drains. Runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event

from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.dev.testing import fast_settings, posting_row, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.errors import DatabaseUnavailable
from exchange.intake import staging_table as intake
from exchange.queue import lease, record
from exchange.settings import Settings

DELIVERED = Decision(Event.DELIVERED, State.DELIVERED, "200 OK", http_status=200)


def claim(engine: Engine, settings: Settings, clock: FakeClock, limit: int) -> lease.Batch:
    with transaction(engine) as c:
        return lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=limit,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
        )


def deliver(engine: Engine, settings: Settings, clock: FakeClock, batch: lease.Batch) -> None:
    with transaction(engine) as c:
        record.record(
            c,
            token=batch.token,
            worker="w1",
            now=clock.now(),
            outcomes=[(m, DELIVERED) for m in batch.messages],
            kinds=settings.policies,
        )


def take(engine: Engine, settings: Settings, clock: FakeClock, rows: list[dict[str, Any]]) -> None:
    stage(engine, rows)
    intake.take(engine, None, settings.kinds, clock.now())


def test_a_correction_staged_midway_through_a_backlog_is_in_the_next_claimed_batch(
    engine: Engine, db_url: str, clock: FakeClock
) -> None:
    """Issue 23: a reload of 600 prices claimed 20 at a time; after 5 batches, three rows are
    staged: a new version of a delivered price, a new SKU, and a newer version of the reload's
    last SKU. All three are in the very next batch (today: after the whole reload), and the
    reload then goes on in its own order, every price once."""
    settings = fast_settings(db_url)
    take(engine, settings, clock, [price_row(f"SKU-{n:04d}", 1) for n in range(600)])
    claimed: list[tuple[str, int]] = []
    for _ in range(5):
        batch = claim(engine, settings, clock, 20)
        claimed += [(m.aggregate, m.version) for m in batch.messages]
        deliver(engine, settings, clock, batch)
    assert claimed == [(f"SKU-{n:04d}", 1) for n in range(100)]
    correction = [price_row("SKU-0007", 2), price_row("NEW-1", 1), price_row("SKU-0599", 2)]
    take(engine, settings, clock, correction)
    batch = claim(engine, settings, clock, 20)
    assert {("SKU-0007", 2), ("NEW-1", 1), ("SKU-0599", 2)} <= {
        (m.aggregate, m.version) for m in batch.messages
    }
    rest = [(m.aggregate, m.version) for m in batch.messages]
    deliver(engine, settings, clock, batch)
    while batch := claim(engine, settings, clock, 50):
        if not batch.messages:
            break
        rest += [(m.aggregate, m.version) for m in batch.messages]
        deliver(engine, settings, clock, batch)
    reload = [item for item in rest if item[1] == 1 and item[0] != "NEW-1"]
    # The reload's own order is kept, and its superseded last version is never sent.
    assert reload == [(f"SKU-{n:04d}", 1) for n in range(100, 599)]
    assert len(rest) == len(set(rest)) == 499 + 3


def test_a_posting_staged_during_a_backlog_still_waits_for_its_predecessor(
    engine: Engine, db_url: str, clock: FakeClock
) -> None:
    """Strict order is not bypassed: version 2 of a posting, staged fresh, goes only after
    version 1, which waits far down the backlog."""
    settings = fast_settings(db_url)
    rows = [price_row(f"SKU-{n:03d}", 1) for n in range(100)] + [posting_row("DOC-1", 1)]
    take(engine, settings, clock, rows)
    first = claim(engine, settings, clock, 10)
    deliver(engine, settings, clock, first)
    take(engine, settings, clock, [posting_row("DOC-1", 2)])
    order: list[tuple[str, int]] = []
    while (batch := claim(engine, settings, clock, 10)).messages:
        order += [(m.aggregate, m.version) for m in batch.messages]
        deliver(engine, settings, clock, batch)
    assert order.index(("DOC-1", 1)) < order.index(("DOC-1", 2))


def test_the_claim_reads_the_claim_order_index_on_sqlite(tmp_path: Path) -> None:
    """The claim's one picking statement walks ix_deliveries_claim_rank (the partial index of
    claimable deliveries, channel first) for its channel, not a table scan, and no sort."""
    url = f"sqlite:///{tmp_path / 'plan.db'}"
    engine = make_engine(url)
    upgrade(engine)
    settings = fast_settings(url)
    clock = FakeClock()
    take(engine, settings, clock, [price_row(f"SKU-{n}", 1) for n in range(300)])
    intake.analyze(engine)
    plans: list[str] = []

    def explain(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> Any:
        if statement.startswith("SELECT d.aggregate_id"):
            plans.append(
                " | ".join(
                    row[-1] for row in cursor.execute("EXPLAIN QUERY PLAN " + statement, parameters)
                )
            )
        return statement, parameters

    event.listen(engine, "before_cursor_execute", explain, retval=True)
    try:
        claim(engine, settings, clock, 100)
    finally:
        event.remove(engine, "before_cursor_execute", explain)
    engine.dispose()
    [plan] = plans
    assert "SEARCH d USING INDEX ix_deliveries_claim_rank (channel_id=?)" in plan, plan
    assert "TEMP B-TREE" not in plan, plan


def _skewed(tmp_path: Path, waiting: int) -> tuple[Engine, Settings, FakeClock]:
    """A SQLite database of ``waiting`` new prices, analysed as ``intake.analyze`` does, with
    the row counts of its statistics then set to 60,000 (messages, aggregates and their
    deliveries and cursors on the one channel): the plans
    a reload of 60,000 got (measured on one: the same). The state index's sample
    (``analysis_limit``) is a thousand entries of one state, so it says each state holds
    about a thousand messages whatever the table's size."""
    url = f"sqlite:///{tmp_path / 'skewed.db'}"
    engine = make_engine(url)
    upgrade(engine)
    settings = fast_settings(url)
    clock = FakeClock()
    take(engine, settings, clock, [price_row(f"SKU-{n:05d}", 1) for n in range(waiting)])
    intake.analyze(engine)
    with transaction(engine) as c:
        c.exec_driver_sql(
            "UPDATE sqlite_stat1 SET stat = '60000' || substr(stat, instr(stat, ' '))"
            " WHERE tbl IN ('messages', 'aggregates', 'deliveries', 'channel_aggregates')"
        )
    engine.dispose()  # the planner reads sqlite_stat1 when a connection opens
    return engine, settings, clock


def _plans(engine: Engine, select_list: str, action: Any) -> list[str]:
    """The plans of the statements ``action`` runs that begin with ``select_list`` (a regular
    expression)."""
    plans: list[str] = []

    def explain(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> Any:
        if re.match(select_list, statement):
            rows = cursor.execute("EXPLAIN QUERY PLAN " + statement, parameters).fetchall()
            plans.append(" | ".join(row[-1] for row in rows))
        return statement, parameters

    event.listen(engine, "before_cursor_execute", explain, retval=True)
    try:
        action()
    finally:
        event.remove(engine, "before_cursor_execute", explain)
    return plans


def test_the_claim_and_the_head_rank_walk_the_claim_order_whatever_sqlites_statistics_say(
    tmp_path: Path,
) -> None:
    """Issue 23: with a reload's statistics (60,000 messages, a state index that says a
    thousand per state) SQLite's planner read every waiting message through the state index
    and sorted them, for the claim's pick (0.26 s a claim at 60,000 waiting instead of 0.04 s)
    and for the take's head rank (94 ms instead of 0.1 ms). Both name the claim order's
    index: they walk it from the lowest rank and stop, no sort, whatever ANALYZE wrote."""
    engine, settings, clock = _skewed(tmp_path, 2_000)
    picks = _plans(engine, r"SELECT d\.aggregate_id\s", lambda: claim(engine, settings, clock, 20))
    # The take's head ranks (order.head_ranks): each channel's, read where a take is staged.
    heads = _plans(
        engine,
        r"SELECT channels\.id, \(SELECT d\.claim_rank",
        lambda: take(engine, settings, clock, [price_row("SKU-00007", 2)]),
    )
    engine.dispose()
    [pick] = picks
    assert pick.startswith("SEARCH d USING INDEX ix_deliveries_claim_rank (channel_id=?)"), pick
    assert "TEMP B-TREE" not in pick and "state_next_try_at" not in pick, pick
    [head] = heads
    assert "SEARCH d USING INDEX ix_deliveries_claim_rank (channel_id=?)" in head, head
    assert "TEMP B-TREE" not in head, head


def test_a_claim_without_the_claim_order_index_fails_instead_of_scanning(tmp_path: Path) -> None:
    """SQLite: the claim and the take's head ranks name ix_deliveries_claim_rank (INDEXED
    BY), so a database that lost it fails at the first claim and the first take, naming the
    index, instead of reading every message and sorting on each one. (The transaction
    reports any OperationalError as the database unavailable: the worker logs it and
    retries.)"""
    engine, settings, clock = _skewed(tmp_path, 50)
    with transaction(engine) as c:
        c.exec_driver_sql("DROP INDEX ix_deliveries_claim_rank")
    with pytest.raises(DatabaseUnavailable, match="no such index: ix_deliveries_claim_rank"):
        claim(engine, settings, clock, 20)
    with pytest.raises(DatabaseUnavailable, match="no such index: ix_deliveries_claim_rank"):
        take(engine, settings, clock, [price_row("SKU-00007", 2)])
    engine.dispose()
