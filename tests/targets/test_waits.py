"""One rule for the marketplaces' waits (contract 14): a Wildberries upload task whose outcome is
read later, Ozon's limit of 10 updates of a product an hour, and Yandex Market's 200 that means
accepted are one verdict, ``AWAITING``, with one wait (``again_in``), decided the same way: the
event ``awaiting-outcome``, ``delayed``, not charged, no reason, due again after the target's
wait; each target's words say what it waits for."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from conformance import price

from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.simclock import SimClock
from exchange.dev.wbsim import Limits, Switches, WbSimulator
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.domain.retry import RetryPolicy, decide
from exchange.domain.states import Event, State
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.ozon.target import OzonTarget
from exchange.targets.wildberries.budget import Budget
from exchange.targets.wildberries.store import MemoryWbStore
from exchange.targets.wildberries.target import WildberriesTarget
from exchange.targets.yandex_market.target import YandexMarketTarget

T = TypeVar("T")
NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)
POLICY = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=60.0)


def _run(
    made: Callable[[], T], scenario: Callable[[T], Awaitable[Classification]]
) -> Classification:
    async def go() -> Classification:
        target = made()
        try:
            return await scenario(target)
        finally:
            await target.aclose()  # type: ignore[attr-defined]

    return asyncio.run(go())


def wildberries_task() -> Classification:
    sim = WbSimulator(switches=Switches(processing_delay=60.0))  # the task stays pending
    sim.add_good("SKU-1", price=1000)
    sim.limits = Limits(period=1.0, requests=1000, burst=100)  # one request or two, at once
    sim.start()
    try:
        token = sim.token()
        budget = Budget(period=1.0, requests=1000, burst=100)
        return _run(
            lambda: WildberriesTarget(sim.url, lambda: token, MemoryWbStore(), budget=budget),
            lambda t: _one(t.send([price("SKU-1", 1, "900.00")])),
        )
    finally:
        sim.stop()


def ozon_hour_limit() -> Classification:
    sim = OzonSimulator("836741", "ozon-key", time_scale=0)
    sim.start()
    try:

        async def eleventh(t: OzonTarget) -> Classification:
            for v in range(1, 11):
                await t.send([price("SKU-1", v, f"{100 + v}.00")])
                sim.clock.advance(60)
            return await _one(t.send([price("SKU-1", 11, "200.00")]))

        return _run(
            lambda: OzonTarget(
                sim.url,
                "836741",
                lambda: "ozon-key",
                price_types={"retail": "price"},
                timeout=5.0,
                clock=sim.clock.now,
            ),
            eleventh,
        )
    finally:
        sim.stop()


def yandex_read_back() -> Classification:
    sim = YmSimulator(
        "ym-key", "1001", switches=YmSwitches(apply_delay=0), clock=SimClock(0, start=1.79e9)
    )
    sim.start()
    try:
        return _run(
            lambda: YandexMarketTarget(
                sim.url, "1001", lambda: "ym-key", price_types={"retail": "value"}
            ),
            lambda t: _one(t.send([price("SKU-1", 1, "101.50")])),
        )
    finally:
        sim.stop()


async def _one(sent: Awaitable[list[Classification]]) -> Classification:
    (answer,) = await sent
    return answer


def test_each_marketplaces_wait_is_one_verdict_decided_by_one_rule() -> None:
    waits = {
        "wildberries": wildberries_task(),
        "ozon": ozon_hour_limit(),
        "yandex-market": yandex_read_back(),
    }

    assert {Verdict.AWAITING} == {w.verdict for w in waits.values()}, waits
    assert all(w.again_in and w.again_in > 0 for w in waits.values()), "one wait field each"
    assert all(w.retry_after is None for w in waits.values()), "never a second wait field"
    # Each target's own words say what it waits for: the task, the hour, the read-back.
    assert "task" in waits["wildberries"].detail
    assert waits["wildberries"].receipt and waits["wildberries"].receipt.startswith("wb-task:")
    assert "10 price updates" in waits["ozon"].detail
    assert "read back" in waits["yandex-market"].detail

    for attempt in (1, POLICY.max_attempts):  # never charged, even on the last attempt
        decided = {
            name: decide(w, attempt=attempt, now=NOW, policy=POLICY, rng=random.Random(1))
            for name, w in waits.items()
        }
        assert {(Event.AWAITING_OUTCOME, State.DELAYED, False, None)} == {
            (d.event, d.to_state, d.charged, d.reason) for d in decided.values()
        }, decided
        for name, d in decided.items():
            wait = waits[name].again_in or 0.0
            assert (NOW + timedelta(seconds=wait), wait) == (d.next_try_at, d.delay_s), name
            assert waits[name].detail == d.detail, "the target's words, as they are"
            assert waits[name].receipt == d.receipt
