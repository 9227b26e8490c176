"""Contract 14: at most one item per SKU in flight per marketplace channel. Two aggregates of one
SKU (its retail and its old price) are never in flight at once there, across workers, on SQLite
and PostgreSQL (the ``engine`` fixture is parametrized over both); other channels are as before.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import aggregates
from exchange.dev.testing import fast_settings, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.intake import staging_table as intake
from exchange.queue import lease
from exchange.settings import Settings


@pytest.fixture
def settings(db_url: str) -> Settings:
    return fast_settings(db_url, lease_seconds=30.0, max_attempts=3, batch_size=100)


def typed_row(sku: str, version: int, price_type: str, price: str = "100.00") -> dict[str, Any]:
    row = price_row(sku, version, price)
    row["aggregate"] = f"{sku}/{price_type}"
    row["payload"] = json.dumps(
        {"sku": sku, "price": price, "currency": "RUB", "price_type": price_type}
    )
    return row


def take(engine: Engine, settings: Settings, clock: FakeClock, rows: list[dict[str, Any]]) -> None:
    stage(engine, rows)
    intake.take(engine, None, settings.kinds, clock.now())


def claim(
    engine: Engine,
    settings: Settings,
    clock: FakeClock,
    worker: str,
    limit: int,
    *,
    one_per_sku: bool = True,
) -> list[str]:
    with transaction(engine) as c:
        batch = lease.claim(
            c,
            worker=worker,
            now=clock.now(),
            limit=limit,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
            one_per_sku=one_per_sku,
        )
    return sorted(m.aggregate for m in batch.messages)


def test_a_second_aggregate_of_a_sku_in_flight_waits_on_a_marketplace_channel(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(
        engine, settings, clock, [typed_row("SKU-1", 1, "retail"), typed_row("SKU-2", 1, "retail")]
    )
    assert claim(engine, settings, clock, "w1", 1) == ["SKU-1/retail"]
    take(engine, settings, clock, [typed_row("SKU-1", 1, "old")])  # came while SKU-1 is out
    assert claim(engine, settings, clock, "w2", 10) == ["SKU-2/retail"], "SKU-1 is in flight"
    assert claim(engine, settings, clock, "w3", 10) == []


def test_a_claim_takes_every_due_sibling_of_a_sku_it_picks_beyond_its_limit(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    """Review ymtogether: 1C staged every SKU's retail price, then every old price, in one
    transaction; a claim of 2 along the claim order finds only retail prices, and took them
    alone: the marketplace showed the new price beside the replaced old one until a later
    claim sent the old price, and each SKU went twice. A claim that picks an aggregate of a
    SKU takes along, under the same lease, every sibling of it due now (``limit`` counts the
    SKUs, the items), and keeps a sibling's own back-off and an excluded sibling out."""
    rows = [typed_row(f"SKU-{g}", 1, "retail") for g in range(1, 5)]
    rows += [typed_row(f"SKU-{g}", 1, "old") for g in range(1, 5)]
    take(engine, settings, clock, rows)
    _wait(engine, clock, "SKU-2/old", None)  # a retry's back-off: not due for a minute
    with transaction(engine) as c:
        batch = lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=2,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
            one_per_sku=True,
        )
    assert sorted(m.aggregate for m in batch.messages) == [
        "SKU-1/old",
        "SKU-1/retail",
        "SKU-2/retail",
    ]
    with transaction(engine) as c:
        assert lease.renew(c, batch.token, clock.now()) == 3, "one lease holds them all"
    with transaction(engine) as c:
        old_3 = c.execute(
            select(aggregates.c.id).where(aggregates.c.aggregate == "SKU-3/old")
        ).scalar_one()
        excluded = lease.claim(
            c,
            worker="w2",
            now=clock.now(),
            limit=1,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
            exclude=[old_3],
            one_per_sku=True,
        )
    assert [m.aggregate for m in excluded.messages] == ["SKU-3/retail"], "excluded stays out"


def test_other_channels_claim_two_aggregates_of_one_sku_as_before(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [typed_row("SKU-1", 1, "retail"), typed_row("SKU-1", 1, "old")])
    assert claim(engine, settings, clock, "w1", 1, one_per_sku=False) == ["SKU-1/retail"]
    assert claim(engine, settings, clock, "w2", 1, one_per_sku=False) == ["SKU-1/old"]


def test_the_aggregates_of_one_sku_may_come_in_one_batch(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    """One batch, one item: the target puts them in one request (marketplace.items.by_sku)."""
    take(engine, settings, clock, [typed_row("SKU-1", 1, "retail"), typed_row("SKU-1", 1, "old")])
    assert claim(engine, settings, clock, "w1", 10) == ["SKU-1/old", "SKU-1/retail"]


def test_an_expired_lease_of_a_sibling_does_not_hold_a_sku_back(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [typed_row("SKU-1", 1, "retail")])
    assert claim(engine, settings, clock, "w1", 1) == ["SKU-1/retail"]
    take(engine, settings, clock, [typed_row("SKU-1", 1, "old")])
    clock.advance(31)  # w1 died: its lease ran out
    assert claim(engine, settings, clock, "w2", 10) == ["SKU-1/old", "SKU-1/retail"]


def test_two_workers_claiming_at_once_never_lease_two_aggregates_of_one_sku(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    """The first worker's claim has picked SKU-1's retail price and not yet committed when the
    second claims: the second must not take SKU-1's old price (PostgreSQL: SKIP LOCKED passes
    over the first's row, and its lease is not yet visible; the channel's claims take turns).
    The old price waits out a retry's back-off at the first claim (so it is not taken along)
    and is due at the second's."""
    take(
        engine,
        settings,
        clock,
        [
            typed_row("SKU-1", 1, "retail"),
            typed_row("SKU-1", 1, "old"),
            typed_row("SKU-2", 1, "retail"),
        ],
    )
    _wait(engine, clock, "SKU-1/old", None)  # due in a minute
    picked = threading.Event()
    results: dict[str, list[str]] = {}
    errors: list[BaseException] = []

    def first() -> None:
        try:
            with transaction(engine) as c:
                batch = lease.claim(
                    c,
                    worker="w1",
                    now=clock.now(),
                    limit=1,
                    lease_seconds=300.0,  # still held when the second claims, a minute on
                    max_attempts=settings.max_attempts,
                    kinds=settings.policies,
                    one_per_sku=True,
                )
                results["w1"] = [m.aggregate for m in batch.messages]
                picked.set()
                time.sleep(1.0)  # the second worker claims meanwhile
        except BaseException as exc:
            picked.set()
            errors.append(exc)

    def second() -> None:
        try:
            picked.wait(timeout=10)
            clock.advance(61)  # SKU-1's old price is due now
            results["w2"] = claim(engine, settings, clock, "w2", 10)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    assert results["w1"] == ["SKU-1/retail"]
    assert results["w2"] == ["SKU-2/retail"], "SKU-1's old price must wait for its retail price"


def _wait(engine: Engine, clock: FakeClock, aggregate: str, receipt: str | None) -> None:
    """The aggregate's delivery waits a minute, not charged (as an AWAITING verdict leaves it),
    with ``receipt``."""
    from sqlalchemy import select, update

    from exchange.db.schema import deliveries, messages

    with transaction(engine) as c:
        pk = c.execute(select(messages.c.id).where(messages.c.aggregate == aggregate)).scalar_one()
        c.execute(
            update(deliveries)
            .where(deliveries.c.message_pk == pk)
            .values(
                state="delayed", next_try_at=clock.now() + timedelta(seconds=60), receipt=receipt
            )
        )


def test_a_price_waiting_for_its_companion_is_leased_with_it_under_one_token(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    """Review 32d: SKU-1's retail price waits (not charged, its receipt ``AWAITS_COMPANION``)
    for another price type of its SKU; a claim that picks SKU-1's old price takes the waiting
    retail price along, before its wait is over, under the same lease (one token: fencing and
    renewal hold for both, and no other worker may take either). A SKU not picked keeps its
    wait, and a delivery delayed for another cause (a retry's back-off) keeps its own."""
    from exchange.domain.prices import AWAITS_COMPANION

    take(
        engine,
        settings,
        clock,
        [
            typed_row("SKU-1", 1, "retail"),
            typed_row("SKU-2", 1, "retail"),
            typed_row("SKU-3", 1, "retail"),
        ],
    )
    _wait(engine, clock, "SKU-1/retail", AWAITS_COMPANION)
    _wait(engine, clock, "SKU-2/retail", AWAITS_COMPANION)
    _wait(engine, clock, "SKU-3/retail", None)  # a retry's back-off
    clock.advance(20)
    take(engine, settings, clock, [typed_row("SKU-1", 1, "old"), typed_row("SKU-3", 1, "old")])
    with transaction(engine) as c:
        batch = lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=1,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
            one_per_sku=True,
        )
    assert sorted(m.aggregate for m in batch.messages) == ["SKU-1/old", "SKU-1/retail"]
    assert {m.attempt for m in batch.messages} == {1}
    with transaction(engine) as c:
        assert lease.renew(c, batch.token, clock.now()) == 2, "one lease holds both"
    assert claim(engine, settings, clock, "w2", 10) == ["SKU-3/old"], (
        "SKU-1 is in flight; SKU-2 and SKU-3's retail price wait on"
    )
