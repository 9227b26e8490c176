"""Contract 14: the ``ozon`` target's count of a product's updates within the hour survives a
restart, read from the channel's deliveries (exchange/db/sent_times.py), through the queue as
the worker runs it: claim, send to the Ozon simulator, record. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from random import Random
from typing import Any

import pytest
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.db.known_prices import DbKnownPrices
from exchange.db.sent_times import DbSentTimes
from exchange.dev.ozonsim import IMPORT_PRICES, OzonSimulator
from exchange.dev.testing import fast_settings, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.retry import RetryPolicy, decide
from exchange.domain.verdicts import Classification, Verdict
from exchange.intake import staging_table as intake
from exchange.queue import lease
from exchange.queue import record as recording
from exchange.settings import Settings
from exchange.targets.base import OutgoingMessage
from exchange.targets.ozon.target import LOST_HOLD, OzonTarget


@pytest.fixture
def settings(db_url: str) -> Settings:
    return fast_settings(db_url, lease_seconds=30.0, max_attempts=3, batch_size=10)


@pytest.fixture
def ozon() -> Any:
    simulator = OzonSimulator("836741", "ozon-key", time_scale=0)
    simulator.start()
    yield simulator
    simulator.stop()


def _outgoing(leased: Any) -> OutgoingMessage:
    return OutgoingMessage(
        leased.message_id,
        leased.kind,
        leased.aggregate,
        leased.version,
        leased.payload,
        leased.created_at,
    )


async def one_round(
    engine: Engine,
    settings: Settings,
    clock: FakeClock,
    target: OzonTarget,
    version: int,
    amount: str | None = None,
    probe: bool = False,
    site_delay: float | None = None,
) -> Classification:
    row = price_row("SKU-1", version, amount or f"{100 + version}.00")
    stage(engine, [row])
    intake.take(engine, None, settings.kinds, clock.now())
    with transaction(engine) as c:
        batch = lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=10,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
            one_per_sku=True,
        )
    (leased,) = batch.messages
    message = OutgoingMessage(
        leased.message_id,
        leased.kind,
        leased.aggregate,
        leased.version,
        leased.payload,
        leased.created_at,
    )
    (answer,) = await target.send([message])
    decision = decide(
        answer,
        attempt=leased.attempt,
        now=clock.now(),
        policy=RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=60.0),
        rng=Random(1),
        probe=probe,
        site_delay=site_delay,
    )
    with transaction(engine) as c:
        recording.record(
            c,
            token=batch.token,
            worker="w1",
            now=clock.now(),
            outcomes=[(leased, decision)],
            kinds=settings.policies,
        )
    return answer


def ozon_target(
    ozon: OzonSimulator, engine: Engine, clock: FakeClock, timeout: float = 10.0
) -> OzonTarget:
    return OzonTarget(
        ozon.url,
        "836741",
        lambda: "ozon-key",
        price_types={"retail": "price"},
        clock=lambda: clock.now().timestamp(),
        sent=DbSentTimes(engine),
        delivered=DbKnownPrices(engine, delivered_only=True),
        timeout=timeout,
    )


def test_the_hourly_count_survives_a_restart_from_the_channels_deliveries(
    engine: Engine, settings: Settings, clock: FakeClock, ozon: OzonSimulator
) -> None:
    async def scenario() -> Classification:
        before = ozon_target(ozon, engine, clock)
        for version in range(1, 11):
            answer = await one_round(engine, settings, clock, before, version)
            assert answer.verdict is Verdict.DELIVERED, answer
            clock.advance(60)
        await before.aclose()
        after = ozon_target(ozon, engine, clock)  # a new process: it remembers nothing itself
        try:
            return await one_round(engine, settings, clock, after, 11)
        finally:
            await after.aclose()

    held = asyncio.run(scenario())

    assert held.verdict is Verdict.AWAITING, held
    assert ozon.requests[IMPORT_PRICES] == 10, "the 11th is not sent"
    assert 2900 <= (held.again_in or 0) <= 3000
    assert ozon.price("SKU-1") == Decimal("110")
    times = DbSentTimes(engine).since(["SKU-1"], clock.now().replace(year=2000))
    assert len(times["SKU-1"]) == 10
    assert json.dumps(sorted(times)) == '["SKU-1"]'


def test_a_price_equal_to_the_last_delivered_is_sent_after_a_crash_left_a_later_one_unknown(
    engine: Engine, settings: Settings, clock: FakeClock, ozon: OzonSimulator
) -> None:
    """Contract 14: a price equal to the one Ozon is known to hold is not sent again; v3 went
    to Ozon and the worker died before recording it (superseded later by v4, equal to v2): what
    Ozon holds is not known, so v4 is sent, and Ozon ends with v4's price."""

    async def scenario() -> Classification:
        before = ozon_target(ozon, engine, clock)
        for version, amount in ((1, "1000.00"), (2, "900.00")):
            answer = await one_round(engine, settings, clock, before, version, amount)
            assert answer.verdict is Verdict.DELIVERED, answer
        stage(engine, [price_row("SKU-1", 3, "800.00")])
        intake.take(engine, None, settings.kinds, clock.now())
        with transaction(engine) as c:
            (leased,) = lease.claim(
                c,
                worker="w1",
                now=clock.now(),
                limit=10,
                lease_seconds=settings.lease_seconds,
                max_attempts=settings.max_attempts,
                kinds=settings.policies,
                one_per_sku=True,
            ).messages
        await before.send([_outgoing(leased)])  # Ozon takes 800; kill -9 before recording
        await before.aclose()
        assert ozon.price("SKU-1") == Decimal("800")
        clock.advance(settings.lease_seconds + 1)
        after = ozon_target(ozon, engine, clock)  # the restarted worker
        try:
            return await one_round(engine, settings, clock, after, 4, "900.00")
        finally:
            await after.aclose()

    answer = asyncio.run(scenario())

    assert answer.verdict is Verdict.DELIVERED and "not sent again" not in answer.detail, answer
    assert ozon.requests[IMPORT_PRICES] == 4
    assert ozon.price("SKU-1") == Decimal("900")


@pytest.mark.parametrize("then", ["same process", "restart", "another worker"])
def test_after_a_per_item_refusal_a_newer_version_waits_the_products_hour(
    engine: Engine, settings: Settings, clock: FakeClock, ozon: OzonSimulator, then: str
) -> None:
    """Contract 14: after a per-item refusal the target tries that product once more an hour
    later, newer versions superseding the waiting one: the wait belongs to the product, so v4
    (staged after v3 was refused) is held without a request, in this process, the next, or
    another worker of the channel that had sent the product before."""
    ozon.limits.item_limit = 2

    async def scenario() -> tuple[Classification, Classification]:
        first = ozon_target(ozon, engine, clock)
        other = ozon_target(ozon, engine, clock)
        sender = other if then == "another worker" else first
        answer = await one_round(engine, settings, clock, sender, 1)
        assert answer.verdict is Verdict.DELIVERED, answer
        answer = await one_round(engine, settings, clock, first, 2)
        assert answer.verdict is Verdict.DELIVERED, answer
        refused = await one_round(engine, settings, clock, first, 3)
        clock.advance(30)
        second = first if then == "same process" else other
        try:
            return refused, await one_round(engine, settings, clock, second, 4)
        finally:
            await first.aclose()
            await other.aclose()

    refused, newer = asyncio.run(scenario())

    assert refused.verdict is Verdict.AWAITING and "Ozon refused" in refused.detail, refused
    assert newer.verdict is Verdict.AWAITING, newer
    # The words say Ozon refused the product, never that this service sent 10 (it sent 2).
    assert "Ozon refused an update of this product" in newer.detail, newer
    assert "sent within the hour" not in newer.detail, newer
    assert ozon.requests[IMPORT_PRICES] == 3, "v4 is held without a request"
    assert 3590 <= (newer.again_in or 0) <= 3600


def test_a_price_equal_to_the_one_delivered_before_a_restart_is_not_sent_again(
    engine: Engine, settings: Settings, clock: FakeClock, ozon: OzonSimulator
) -> None:
    """Contract 14: a price equal to the one Ozon is known to hold is not sent again, known
    from the channel's delivered prices while its equal successor is being sent (its first
    attempt, under the lease now, has not gone yet): a restarted worker remembers nothing
    itself, and the database said nothing while v2 was in flight (review 32c)."""

    async def scenario() -> Classification:
        before = ozon_target(ozon, engine, clock)
        answer = await one_round(engine, settings, clock, before, 1, "100.00")
        assert answer.verdict is Verdict.DELIVERED, answer
        await before.aclose()
        after = ozon_target(ozon, engine, clock)
        try:
            return await one_round(engine, settings, clock, after, 2, "100.00")
        finally:
            await after.aclose()

    answer = asyncio.run(scenario())

    assert answer.verdict is Verdict.DELIVERED and "not sent again" in answer.detail, answer
    assert ozon.requests[IMPORT_PRICES] == 1


def test_a_price_another_worker_delivered_since_is_what_ozon_holds_not_this_workers_memory(
    engine: Engine, settings: Settings, clock: FakeClock, ozon: OzonSimulator
) -> None:
    """Two workers on one channel (review 32c): worker 1 delivers 100, worker 2 delivers 200,
    1C goes back to 100 and worker 1 takes it. Ozon holds 200 (the newest delivered, v2),
    not worker 1's memory of 100 (v1): v3 is sent, and Ozon shows 100."""

    async def scenario() -> list[Classification]:
        one, two = ozon_target(ozon, engine, clock), ozon_target(ozon, engine, clock)
        try:
            answers = [await one_round(engine, settings, clock, one, 1, "100.00")]
            answers.append(await one_round(engine, settings, clock, two, 2, "200.00"))
            answers.append(await one_round(engine, settings, clock, one, 3, "100.00"))
            return answers
        finally:
            await one.aclose()
            await two.aclose()

    answers = asyncio.run(scenario())

    assert [a.verdict for a in answers] == [Verdict.DELIVERED] * 3, answers
    assert "not sent again" not in answers[2].detail, answers[2]
    assert ozon.requests[IMPORT_PRICES] == 3
    assert ozon.price("SKU-1") == Decimal("100")


def test_a_price_another_worker_left_unknown_is_not_taken_from_this_workers_memory(
    engine: Engine, settings: Settings, clock: FakeClock, ozon: OzonSimulator
) -> None:
    """Two workers on one channel: worker 1 delivers 100 (v1); worker 2's 200 (v2) times out
    and Ozon applies it anyway; 1C goes back to 100 (v3) and worker 1 takes it. What Ozon
    holds is unknown since v2 (the channel's delivered prices leave it out), and worker 1's
    memory of v1 must not fill it: v3 is sent, and Ozon shows 100."""

    async def scenario() -> list[Classification]:
        one, two = ozon_target(ozon, engine, clock), ozon_target(ozon, engine, clock, 0.3)
        try:
            answers = [await one_round(engine, settings, clock, one, 1, "100.00")]
            ozon.faults.delay = 0.6  # a proxy that forwards at once and answers late
            answers.append(await one_round(engine, settings, clock, two, 2, "200.00"))
            await asyncio.sleep(0.8)  # Ozon applied it meanwhile
            ozon.faults.delay = 0.0
            assert ozon.price("SKU-1") == Decimal("200")
            clock.advance(LOST_HOLD + 1)  # shown, 200 may be another sender's (review H4)
            answers.append(await one_round(engine, settings, clock, one, 3, "100.00"))
            return answers
        finally:
            await one.aclose()
            await two.aclose()

    answers = asyncio.run(scenario())

    assert answers[1].verdict is not Verdict.DELIVERED, answers[1]
    assert answers[2].verdict is Verdict.DELIVERED, answers[2]
    assert "not sent again" not in answers[2].detail, answers[2]
    assert ozon.requests[IMPORT_PRICES] == 3
    assert ozon.price("SKU-1") == Decimal("100")


@pytest.mark.parametrize("released", ["site pace", "probe"])
def test_a_price_ozon_may_hold_after_an_answer_lost_is_what_an_unchanged_price_is_compared_with(
    engine: Engine, settings: Settings, clock: FakeClock, ozon: OzonSimulator, released: str
) -> None:
    """Contract 14, docs "One item per SKU": a price equal to the one Ozon is known to hold
    is not sent again, and what Ozon may hold counts (delivered, or in doubt). v1 700 is
    delivered; v2 800 is applied by Ozon and the connection cut before its answer, released
    not charged (the site's pace, or the breaker's probe), its result unknown; 1C goes back
    to 700 (v3): it is sent, and Ozon shows 700 (review ozon: v3 was "unchanged" while Ozon
    held 800)."""

    async def scenario() -> list[Classification]:
        target = ozon_target(ozon, engine, clock)
        try:
            answers = [await one_round(engine, settings, clock, target, 1, "700.00")]
            ozon.faults.drop_after = True
            answers.append(
                await one_round(
                    engine,
                    settings,
                    clock,
                    target,
                    2,
                    "800.00",
                    probe=released == "probe",
                    site_delay=1.0 if released == "site pace" else None,
                )
            )
            ozon.faults.drop_after = False
            assert ozon.price("SKU-1") == Decimal("800")
            clock.advance(LOST_HOLD + 1)  # shown, 800 may be another sender's (review H4)
            answers.append(await one_round(engine, settings, clock, target, 3, "700.00"))
            return answers
        finally:
            await target.aclose()

    answers = asyncio.run(scenario())

    assert answers[1].result_unknown and answers[1].verdict is not Verdict.DELIVERED, answers[1]
    assert answers[2].verdict is Verdict.DELIVERED, answers[2]
    assert "not sent again" not in answers[2].detail, answers[2]
    assert ozon.requests[IMPORT_PRICES] == 3
    assert ozon.price("SKU-1") == Decimal("700")
