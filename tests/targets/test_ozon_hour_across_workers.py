"""Contract 14 (research §1.3, §1.5): at most 10 updates of an Ozon product leave within the
hour across every worker of the channel. Two ``ozon`` targets on one database, through the
queue as the worker runs them (claim, send to the Ozon simulator, record), each reading 9
sends of the product before its send: one sends the 10th, the other holds (review 32: both
sent, and Ozon refused the 11th). SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from random import Random
from typing import Any

import pytest
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.known_prices import DbKnownPrices
from exchange.db.schema import deliveries
from exchange.db.sent_times import DbSentTimes
from exchange.dev.ozonsim import IMPORT_PRICES, ITEM_LIMIT, OzonSimulator
from exchange.dev.testing import fast_settings, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.retry import RetryPolicy, decide
from exchange.domain.verdicts import Classification, Verdict
from exchange.intake import staging_table as intake
from exchange.queue import lease
from exchange.queue import record as recording
from exchange.settings import Settings
from exchange.targets.base import OutgoingMessage
from exchange.targets.ozon.hours import SENDING
from exchange.targets.ozon.target import LOST_HOLD, OzonTarget

POLICY = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=60.0)


@pytest.fixture
def settings(db_url: str) -> Settings:
    return fast_settings(db_url, lease_seconds=30.0, max_attempts=3, batch_size=10)


@pytest.fixture
def ozon() -> Any:
    simulator = OzonSimulator("836741", "ozon-key", time_scale=0)
    simulator.start()
    yield simulator
    simulator.stop()


def ozon_target(ozon: OzonSimulator, engine: Engine, clock: FakeClock, **kw: Any) -> OzonTarget:
    return OzonTarget(
        ozon.url,
        "836741",
        lambda: "ozon-key",
        price_types={"retail": "price"},
        clock=lambda: clock.now().timestamp(),
        sent=DbSentTimes(engine),
        delivered=DbKnownPrices(engine, delivered_only=True),
        **kw,
    )


def claim(engine: Engine, settings: Settings, clock: FakeClock, worker: str) -> Any:
    with transaction(engine) as c:
        return lease.claim(
            c,
            worker=worker,
            now=clock.now(),
            limit=10,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
            one_per_sku=True,
        )


def outgoing(leased: Any) -> OutgoingMessage:
    return OutgoingMessage(
        leased.message_id,
        leased.kind,
        leased.aggregate,
        leased.version,
        leased.payload,
        leased.created_at,
        receipt=leased.receipt,
    )


def record(
    engine: Engine, settings: Settings, clock: FakeClock, batch: Any, answer: Classification
) -> None:
    (leased,) = batch.messages
    decision = decide(answer, attempt=leased.attempt, now=clock.now(), policy=POLICY, rng=Random(1))
    with transaction(engine) as c:
        recording.record(
            c,
            token=batch.token,
            worker="w",
            now=clock.now(),
            outcomes=[(leased, decision)],
            kinds=settings.policies,
        )


def staged(engine: Engine, settings: Settings, clock: FakeClock, version: int) -> None:
    stage(engine, [price_row("SKU-1", version, f"{100 + version}.00")])
    intake.take(engine, None, settings.kinds, clock.now())


async def nine_sent(
    engine: Engine, settings: Settings, clock: FakeClock, target: OzonTarget
) -> None:
    for version in range(1, 10):
        staged(engine, settings, clock, version)
        batch = claim(engine, settings, clock, "w1")
        (answer,) = await target.send([outgoing(m) for m in batch.messages])
        assert answer.verdict is Verdict.DELIVERED, answer
        record(engine, settings, clock, batch, answer)
        clock.advance(60)


def test_two_workers_that_each_read_nine_sends_of_a_product_send_one_more_not_two(
    engine: Engine, settings: Settings, clock: FakeClock, ozon: OzonSimulator
) -> None:
    """Contract 14, research §1.3: 10 updates of a product an hour, counted across workers.
    Worker 1 holds v10 and its lease runs out while it is slow to send; worker 2 takes the
    product over with v11. Both read the channel's 9 sends of the hour at once; only one of
    them sends, the other holds its price (AWAITING, not charged), and Ozon refuses nothing:
    by the hour, or, where worker 1's send was marked before worker 2 looked, as a send under
    a lease that ran out, which may land after worker 2's (review rev39 H1)."""

    async def scenario() -> list[Classification]:
        one, two = ozon_target(ozon, engine, clock), ozon_target(ozon, engine, clock)
        try:
            await nine_sent(engine, settings, clock, one)
            staged(engine, settings, clock, 10)
            first = claim(engine, settings, clock, "w1")
            clock.advance(settings.lease_seconds + 1)  # worker 1's lease ran out
            staged(engine, settings, clock, 11)
            second = claim(engine, settings, clock, "w2")
            assert first.messages and second.messages
            return list(
                await asyncio.gather(
                    one.send([outgoing(m) for m in first.messages]),
                    two.send([outgoing(m) for m in second.messages]),
                )
            )
        finally:
            await one.aclose()
            await two.aclose()

    answers = [a for pair in asyncio.run(scenario()) for a in pair]

    assert ozon.outcomes[ITEM_LIMIT] == 0, "Ozon refused an 11th update of the hour"
    assert ozon.requests[IMPORT_PRICES] == 10, "one of the two is held without a request"
    product = ozon.product("SKU-1")
    assert product is not None and len(product.charged) == 10
    verdicts = sorted(a.verdict.value for a in answers)
    assert verdicts == sorted([Verdict.DELIVERED.value, Verdict.AWAITING.value]), answers
    (held,) = [a for a in answers if a.verdict is Verdict.AWAITING]
    if "whose answer was lost" in held.detail:
        # Worker 1's send marked first, under its lease that ran out: worker 2 cannot tell a
        # slow worker from a dead one, so its newer price waits for that send as for a lost
        # one (review rev39 H1), until Ozon shows it or worker 1 records its answer.
        assert 0 < (held.again_in or 0) <= LOST_HOLD, held
        return
    assert "10 price updates of this product sent within the hour" in held.detail, held
    # The first of the 9 is an hour old 9 minutes and 31 s on: the held one goes then.
    assert 3000 <= (held.again_in or 0) <= 3600 - 9 * 60 + 60, held


def test_a_send_whose_request_never_left_does_not_count_against_the_hour(
    engine: Engine, settings: Settings, clock: FakeClock, ozon: OzonSimulator
) -> None:
    """Contract 14: the mark a send carries before its request leaves counts it against the
    product's hour; a request that never left (no connection made) is taken back, so the
    product's 10th update still goes afterwards."""

    async def scenario() -> tuple[Classification, Classification]:
        one = ozon_target(ozon, engine, clock)
        down = OzonTarget(  # nothing listens on port 9: no connection is made
            "http://127.0.0.1:9",
            "836741",
            lambda: "ozon-key",
            price_types={"retail": "price"},
            clock=lambda: clock.now().timestamp(),
            sent=DbSentTimes(engine),
            delivered=DbKnownPrices(engine, delivered_only=True),
        )
        try:
            await nine_sent(engine, settings, clock, one)
            staged(engine, settings, clock, 10)
            batch = claim(engine, settings, clock, "w1")
            (refused,) = await down.send([outgoing(m) for m in batch.messages])
            record(engine, settings, clock, batch, refused)
            with engine.connect() as c:
                receipts = c.execute(select(deliveries.c.receipt)).scalars().all()
            assert not [r for r in receipts if r and r.startswith(SENDING)], receipts
            clock.advance(120)
            batch = claim(engine, settings, clock, "w1")
            (answer,) = await one.send([outgoing(m) for m in batch.messages])
            return refused, answer
        finally:
            await one.aclose()
            await down.aclose()

    refused, answer = asyncio.run(scenario())

    assert refused.verdict is Verdict.TEMPORARY and not refused.result_unknown, refused
    assert answer.verdict is Verdict.DELIVERED, answer
    assert ozon.price("SKU-1") == Decimal("110")


def test_a_send_whose_answer_never_came_counts_against_the_hour(
    engine: Engine, settings: Settings, clock: FakeClock, ozon: OzonSimulator
) -> None:
    """Contract 14, research §1.3: Ozon counts an update it took whether or not its answer
    came back. The 10th update times out after Ozon took it; the 11th (another worker's,
    which remembers nothing of it) is held, not sent for Ozon to refuse."""

    async def scenario() -> Classification:
        one = ozon_target(ozon, engine, clock)
        slow = ozon_target(ozon, engine, clock, timeout=0.3)
        two = ozon_target(ozon, engine, clock)
        try:
            await nine_sent(engine, settings, clock, one)
            staged(engine, settings, clock, 10)
            batch = claim(engine, settings, clock, "w1")
            ozon.faults.delay = 0.6  # Ozon takes it and answers after the client gave up
            (lost,) = await slow.send([outgoing(m) for m in batch.messages])
            await asyncio.sleep(0.8)
            ozon.faults.delay = 0.0
            assert lost.verdict is Verdict.TEMPORARY and lost.result_unknown, lost
            record(engine, settings, clock, batch, lost)
            clock.advance(60)
            staged(engine, settings, clock, 11)
            batch = claim(engine, settings, clock, "w2")
            (answer,) = await two.send([outgoing(m) for m in batch.messages])
            return answer
        finally:
            for target in (one, slow, two):
                await target.aclose()

    held = asyncio.run(scenario())

    assert held.verdict is Verdict.AWAITING, held
    assert ozon.outcomes[ITEM_LIMIT] == 0, "Ozon refused an 11th update of the hour"
    assert ozon.requests[IMPORT_PRICES] == 10
    product = ozon.product("SKU-1")
    assert product is not None and len(product.charged) == 10


def test_two_attempts_of_one_price_whose_answers_never_came_count_twice(
    engine: Engine, settings: Settings, clock: FakeClock, ozon: OzonSimulator
) -> None:
    """Contract 14, research §1.3/§1.5: Ozon counts each update it took, the same price sent
    again too. v9 is sent twice within the hour, each time Ozon takes it and the answer never
    comes (the second once the first's wait for Ozon to show it is over, ``LOST_HOLD``): with
    the 8 before, that is 10, and another worker's v10 is held (the second attempt's mark
    keeps the first's, never replaces it)."""

    async def scenario() -> Classification:
        one = ozon_target(ozon, engine, clock)
        slow = ozon_target(ozon, engine, clock, timeout=0.3)
        two = ozon_target(ozon, engine, clock)
        try:
            for version in range(1, 9):
                staged(engine, settings, clock, version)
                batch = claim(engine, settings, clock, "w1")
                (answer,) = await one.send([outgoing(m) for m in batch.messages])
                record(engine, settings, clock, batch, answer)
                clock.advance(60)
            staged(engine, settings, clock, 9)
            for _ in range(2):
                batch = claim(engine, settings, clock, "w1")
                assert batch.messages, "v9 is due again"
                ozon.faults.delay = 0.6  # Ozon takes it and answers after the client gave up
                (lost,) = await slow.send([outgoing(m) for m in batch.messages])
                await asyncio.sleep(0.8)
                ozon.faults.delay = 0.0
                assert lost.verdict is Verdict.TEMPORARY and lost.result_unknown, lost
                record(engine, settings, clock, batch, lost)
                clock.advance(LOST_HOLD + 1)  # the lost send's wait is over: it goes again
            staged(engine, settings, clock, 10)
            batch = claim(engine, settings, clock, "w2")
            (answer,) = await two.send([outgoing(m) for m in batch.messages])
            return answer
        finally:
            for target in (one, slow, two):
                await target.aclose()

    held = asyncio.run(scenario())

    product = ozon.product("SKU-1")
    assert product is not None and len(product.charged) == 10, "Ozon counted both attempts"
    assert held.verdict is Verdict.AWAITING, held
    assert ozon.outcomes[ITEM_LIMIT] == 0, "Ozon refused an 11th update of the hour"
