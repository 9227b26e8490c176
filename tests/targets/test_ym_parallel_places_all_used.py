"""Yandex Market's ``ym_parallel`` places are the business's (research §3.3), held in the
database for every worker's requests together (``DbSlots``). Each worker's own cap once was its
share rounded down (``ym_parallel // workers``): review ym36, ``ym_parallel`` 4 and three
workers, each held to one request at once, three in all, one of Yandex's four places never
used; and ``exchange status`` showed each worker's share («предел 1 из 1») where the real limit
was the business's. Now a worker's own share is rounded up where the places are shared (they
alone keep the sum within ``ym_parallel``), and the status shows the business's places."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from conformance import price
from sqlalchemy import Engine
from ym_shared import shared_worker, ym_business

from exchange.dev.ymsim import YmFaults, YmSimulator
from exchange.ops.status import pace_words, site_pace
from exchange.targets.yandex_market.target import YandexMarketTarget

PARALLEL = 4  # ym_parallel, and Yandex's own cap at the simulator


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    with ym_business(10_000, scale=1) as simulator:
        simulator.switches.parallel = PARALLEL
        simulator.faults = YmFaults(hold=0.4)  # each request in flight a while (§3.3)
        yield simulator


def workers(ym: YmSimulator, engine: Engine, count: int) -> list[YandexMarketTarget]:
    """``count`` workers of the business over one database, each knowing the others."""
    targets = [shared_worker(ym, engine, 10_000, parallel=PARALLEL) for _ in range(count)]
    for target in targets:
        target.share(count)
    return targets


@pytest.mark.parametrize("count", [3, 5])
def test_workers_sharing_the_places_use_every_place_and_never_one_more(
    ym: YmSimulator, engine: Engine, count: int
) -> None:
    """Three (or five) workers, ``ym_parallel`` 4, each with six requests to send at once:
    four are in flight at the simulator at once (three on the old code, with three workers),
    never five; no 420 for parallel requests; every price accepted (SQLite and PostgreSQL)."""

    async def scenario() -> None:
        targets = workers(ym, engine, count)
        try:
            await asyncio.gather(
                *(
                    target.send([price(f"SKU-{w}-{n}", 1, "10")])
                    for w, target in enumerate(targets)
                    for n in range(6)
                )
            )
        finally:
            for target in targets:
                await target.aclose()

    asyncio.run(scenario())
    assert PARALLEL == ym.most_in_flight, "every one of the business's places used, none more"
    assert 6 * count == ym.requests["offer-prices/updates"], "no request refused and sent again"
    assert 6 * count == ym.accepted


def test_a_workers_status_shows_the_business_places_never_summed(
    ym: YmSimulator, engine: Engine
) -> None:
    """Three workers, ``ym_parallel`` 4: each one's limit is the business's 4 (of 4), said to
    be every worker's together, and the channel's pace card counts it once (4, not 12, nor the
    old code's 1 a worker, 3 summed)."""
    targets = workers(ym, engine, 3)
    try:
        assert [(4, 4)] * 3 == [(t.requests_at_once, t.requests_at_once_of) for t in targets]
        paces = [
            {
                "limit": t.requests_at_once,
                "max_limit": t.requests_at_once_of,
                "limit_shared": 1,
                "in_flight": 1,
            }
            for t in targets
        ]
        card = site_pace([{"live": True, "channel": "market", "pace": p} for p in paces])
        assert card is not None
        assert (4, 4, 3) == (card["limit"], card["max_limit"], card["in_flight"])
        assert "(limit 4 of 4 for all the workers together)" in pace_words(paces[0])
    finally:
        for target in targets:
            asyncio.run(target.aclose())
