"""What is left of Yandex Market's budget until the window's end is the business's, whichever
worker's answer said it (research §3.3: ``X-RateLimit-Resource-Remaining`` and ``-Until`` on
every answer). Each worker once kept only its own answers' count: a worker whose last answer
said 12 were left sent 8 after another worker's answer had said 4, and met a 420; with three
workers the four-worker budget test saw one nearly every simulated minute (2 to 6 a run)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from conformance import price
from sqlalchemy import Engine
from ym_shared import BUSINESS, KEY, shared_worker, ym_business

from exchange.dev.ymsim import UPDATE_RESOURCE, YmSimulator
from exchange.domain.verdicts import Verdict
from exchange.targets.yandex_market.target import YandexMarketTarget

CABINET = 20  # offers a minute


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    with ym_business(CABINET, scale=1) as simulator:
        yield simulator


def worker(ym: YmSimulator, engine: Engine) -> YandexMarketTarget:
    return shared_worker(ym, engine, CABINET)


def test_a_count_left_that_another_workers_answer_lowered_holds_this_worker(
    ym: YmSimulator, engine: Engine
) -> None:
    """Two workers of one business, 20 offers a minute: A sends 8 (12 left), B sends 8 (4
    left); A's next 8 wait uncharged for the minute's end (``AWAITING``), never sent into a
    420 on A's own count of 12 (SQLite and PostgreSQL)."""

    async def scenario() -> list[Verdict]:
        a, b = worker(ym, engine), worker(ym, engine)
        try:
            if 60.0 - ym.clock.wall_now() % 60.0 < 15:  # the minute ends soon: the next one
                await asyncio.sleep(60.0 - ym.clock.wall_now() % 60.0 + 0.2)
            found = await a.send([price(f"SKU-{n}", 1, "10") for n in range(8)])
            found += await b.send([price(f"SKU-{n}", 1, "10") for n in range(8, 16)])
            found += await a.send([price(f"SKU-{n}", 1, "10") for n in range(16, 24)])
            return [c.verdict for c in found]
        finally:
            await a.aclose()
            await b.aclose()

    verdicts = asyncio.run(scenario())
    assert [Verdict.AWAITING] * 24 == verdicts
    assert 2 == ym.requests["offer-prices/updates"], "nothing sent that Yandex would refuse"
    assert 16 == ym.accepted
    assert 4 == CABINET - ym.budgets[UPDATE_RESOURCE]._used


class _FewerLeftOnce:
    """The business's count left (``SharedLeft``) that has fewer than asked once, for a
    tenth of a second, then room."""

    def __init__(self) -> None:
        self.refused = 0

    def told(self, until: datetime, left: int) -> None:
        pass

    def take(self, count: int, now: datetime) -> datetime | None:
        if self.refused:
            return None
        self.refused += 1
        return now + timedelta(seconds=0.1)


def test_a_request_the_business_count_held_back_is_counted_once_in_the_workers_own_window(
    ym: YmSimulator,
) -> None:
    """The worker's own window counted a request when its ``take`` passed, and again when
    the business's count left (``DbLeft``) had held it back and the wait ended: 10 offers
    sent were counted as 20, and after a lowering a worker waited up to a minute more than
    its budget asked. Counted once."""
    left = _FewerLeftOnce()
    target = YandexMarketTarget(
        ym.url,
        BUSINESS,
        lambda: KEY,
        price_types={"retail": "value"},
        offers_per_minute=60,
        left=lambda method: left,
    )

    async def scenario() -> int:
        try:
            await target.send([price(f"SKU-{n}", 1, "10") for n in range(10)])
            return target.budget.used
        finally:
            await target.aclose()

    used = asyncio.run(scenario())
    assert 1 == left.refused, "the business's count held the request back once"
    assert 1 == ym.requests["offer-prices/updates"]
    assert 10 == used, "ten offers sent, counted once"
