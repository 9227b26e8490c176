"""The claim order (domain/urgency.py, queue/order.py): a backlog claimed in batches, and what
is staged while it drains. Runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.dev.testing import fast_settings, posting_row, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
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
    """The claim's one picking statement walks ix_messages_claim_rank (the partial index of
    claimable messages), not a table scan, and no sort."""
    url = f"sqlite:///{tmp_path / 'plan.db'}"
    engine = make_engine(url)
    upgrade(engine)
    settings = fast_settings(url)
    clock = FakeClock()
    take(engine, settings, clock, [price_row(f"SKU-{n}", 1) for n in range(300)])
    intake.analyze(engine)
    plans: list[str] = []

    def explain(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> Any:
        if statement.startswith("SELECT m.aggregate_id"):
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
    assert "SCAN m USING INDEX ix_messages_claim_rank" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
