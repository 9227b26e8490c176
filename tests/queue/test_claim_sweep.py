"""A worker's claims sweep over the aggregates (lease.claim ``after=`` / ``Batch.cursor``): each
claim goes on above the previous one's last aggregate and wraps around to the lowest ids, so
that it does not rescan every aggregate already done. Runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.dev.testing import fast_settings, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.queue import lease, record
from exchange.settings import Settings


def claim(
    engine: Engine, settings: Settings, clock: FakeClock, limit: int, after: int
) -> lease.Batch:
    with transaction(engine) as c:
        return lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=limit,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
            after=after,
        )


def deliver(engine: Engine, settings: Settings, clock: FakeClock, batch: lease.Batch) -> None:
    decision = Decision(Event.DELIVERED, State.DELIVERED, "200 OK", http_status=200)
    with transaction(engine) as c:
        record.record(
            c,
            token=batch.token,
            worker="w1",
            now=clock.now(),
            outcomes=[(m, decision) for m in batch.messages],
            kinds=settings.policies,
        )


def skus(batch: lease.Batch) -> list[str]:
    return [m.aggregate for m in batch.messages]


def test_claims_go_on_after_the_last_aggregate_taken_then_wrap_to_the_lowest(
    engine: Engine, db_url: str, clock: FakeClock
) -> None:
    settings = fast_settings(db_url)
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(6)])
    intake.take(engine, None, settings.kinds, clock.now())
    first = claim(engine, settings, clock, limit=2, after=0)
    assert ["SKU-0", "SKU-1"] == skus(first)
    deliver(engine, settings, clock, first)
    # SKU-0 has a new version due again: a sweep finds it only after the higher ids
    stage(engine, [price_row("SKU-0", 2)])
    intake.take(engine, None, settings.kinds, clock.now())
    second = claim(engine, settings, clock, limit=2, after=first.cursor)
    assert ["SKU-2", "SKU-3"] == skus(second)
    deliver(engine, settings, clock, second)
    third = claim(engine, settings, clock, limit=3, after=second.cursor)
    assert {"SKU-4", "SKU-5", "SKU-0"} == set(skus(third))  # the rest, then from the lowest id
    deliver(engine, settings, clock, third)
    assert [] == skus(claim(engine, settings, clock, limit=3, after=third.cursor))
