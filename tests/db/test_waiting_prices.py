"""``DbKnownPrices.waiting`` (the marketplace targets' ``WaitingPrices`` port, issue 32): the
newest version of each price type of a SKU still to be given to the channel, new or delayed
(with when it is due), in flight only where asked; never one delivered, quarantined,
cancelled or withheld."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine, select, update

from exchange.db.engine import transaction
from exchange.db.known_prices import DbKnownPrices
from exchange.db.schema import deliveries, messages
from exchange.dev.testing import price_row, stage
from exchange.domain.clock import SystemClock
from exchange.domain.policy import DEFAULT_KINDS
from exchange.domain.prices import WaitingPrice
from exchange.intake.staging_table import take


def _old(sku: str, version: int, amount: str) -> dict[str, object]:
    row = price_row(sku, version, amount, aggregate=f"{sku}/old")
    row["payload"] = str(row["payload"]).replace('"retail"', '"old"')
    return row


def _set(engine: Engine, aggregate: str, version: int, **values: object) -> None:
    with transaction(engine) as connection:
        pk = connection.execute(
            select(messages.c.id).where(
                messages.c.aggregate == aggregate, messages.c.version == version
            )
        ).scalar_one()
        connection.execute(update(deliveries).where(deliveries.c.message_pk == pk).values(**values))


def test_waiting_reads_the_newest_version_still_to_be_given_and_when_it_is_due(
    engine: Engine,
) -> None:
    stage(
        engine,
        [
            price_row("SKU-1", 1, "100.00", aggregate="SKU-1/retail"),
            _old("SKU-1", 1, "150.00"),
            price_row("SKU-2", 1, "200.00", aggregate="SKU-2/retail"),
            _old("SKU-2", 1, "300.00"),
            price_row("SKU-3", 1, "300.00", aggregate="SKU-3/retail"),
        ],
    )
    now = SystemClock().now()
    take(engine, None, dict(DEFAULT_KINDS), now)
    due = now + timedelta(hours=1)
    _set(engine, "SKU-1/retail", 1, state="delayed", attempts=1, next_try_at=due)  # a retry
    _set(engine, "SKU-1/old", 1, state="in_progress")  # the batch asking
    _set(engine, "SKU-2/retail", 1, state="quarantined")  # nothing a wait would bring
    _set(engine, "SKU-2/old", 1, state="delivered")
    # SKU-3/retail stays new: due from when it began to wait

    skus = ["SKU-1", "SKU-2", "SKU-3", "SKU-4"]
    marketplace = {
        (w.sku, w.price_type): w for w in DbKnownPrices(engine, in_flight=False).waiting(skus)
    }
    assert set(marketplace) == {("SKU-1", "retail"), ("SKU-3", "retail")}
    assert marketplace[("SKU-1", "retail")] == WaitingPrice("SKU-1", "retail", 1, due)
    fresh = marketplace[("SKU-3", "retail")]
    assert fresh.version == 1 and fresh.due <= SystemClock().now()

    in_flight = {(w.sku, w.price_type) for w in DbKnownPrices(engine).waiting(skus)}
    assert in_flight == {("SKU-1", "retail"), ("SKU-1", "old"), ("SKU-3", "retail")}
