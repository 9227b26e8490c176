"""Issue 23, item 1, end to end: a running worker (``exchange run``'s scheduler) drains a
reload into a shop with a bounded rate on loopback; a correction staged meanwhile reaches
the shop within 2 x EXCHANGE_POLL_INTERVAL + EXCHANGE_HTTP_TIMEOUT, long before the reload
is done. Runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange import runner
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import fast_settings, price_row, run_worker, stage

POLL = 0.2
HTTP_TIMEOUT = 1.0
BOUND = 2 * POLL + HTTP_TIMEOUT  # the promise of issue 23, with these settings: 1.4 s
RATE = 100.0  # the shop's capacity, requests/s
RELOAD = 1500  # 15 s of the shop's capacity: the reload is far from done when the bound ends
# What the suite holds each correction to: at most this many of the reload's prices reach the
# shop between the correction's staging and its arrival. At the shop's pace the promise (BOUND,
# 1.4 s) is about 140 of them; waiting behind the reload in id order would be about 1,400. A
# count, not seconds: on a loaded machine the worker slows and the seconds stretch (3.4 s seen
# at a load of 10), but the prices it delivers in between shrink with it, so 300 (2x the
# promise's, a fifth of the id order's) holds under load and fails without the urgency rule.
# The seconds themselves are the latency bench's figure (`python -m bench --sections latency`).
PASSED_BY = 300


@pytest.fixture
def shop() -> Iterator[SiteSimulator]:
    # Retry-After within the poll interval (the condition): no header, the pace's own.
    faults = Faults(rate_limit=RATE, rate_retry_after=None, seed=1)
    with SiteSimulator(token="test-token", faults=faults) as simulator:
        yield simulator


def test_a_correction_staged_during_a_reload_reaches_the_shop_within_two_polls_and_a_timeout(
    db_url: str,
    engine: Engine,
    shop: SiteSimulator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """1,500 prices drain at 100 requests/s; a second into it, a new version of a price the
    shop already holds (the live wrong price), a new SKU and a newer version of the reload's
    last SKU are staged. Each is in the shop, with the corrected value, within 1.4 s (today's
    id order: after the whole reload, about 15 s): at most PASSED_BY of the reload's prices
    reach the shop between its staging and its arrival; most of the reload is still waiting
    then."""
    stops: list[Callable[[], None]] = []
    monkeypatch.setattr(runner, "_install_signals", lambda _loop, stop: stops.append(stop))
    stage(engine, [price_row(f"SKU-{n:05d}", 1) for n in range(RELOAD)])
    settings = fast_settings(
        db_url, shop.url, poll_interval=POLL, http_timeout=HTTP_TIMEOUT, batch_size=20
    )
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))
    correction = {
        ("price", "SKU-00007"): (2, "77.00"),
        ("price", "NEW-1"): (1, "11.00"),
        ("price", f"SKU-{RELOAD - 1:05d}"): (2, "99.00"),
    }
    arrived: dict[tuple[str, str], float] = {}
    passed_by: dict[tuple[str, str], int] = {}  # reload prices delivered before it arrived
    delivered_then: list[int] = []

    async def scenario(_: Any) -> None:
        running = asyncio.create_task(runner.run_forever(worker, poll_interval=POLL))
        try:
            while ("price", "SKU-00007") not in shop.held_versions():
                await asyncio.sleep(0.01)  # the live price is in the shop
            await asyncio.sleep(1.0)
            stage(
                engine,
                [price_row(a, v, price) for (_, a), (v, price) in correction.items()],
            )
            staged_at = time.monotonic()
            before = len(shop.effects())
            deadline = staged_at + 10 * BOUND
            while len(arrived) < len(correction) and time.monotonic() < deadline:
                held = shop.held_versions()
                for key, (version, _) in correction.items():
                    if key not in arrived and held.get(key, 0) >= version:
                        arrived[key] = time.monotonic() - staged_at
                        passed_by[key] = len(shop.effects()) - before - len(arrived)
                await asyncio.sleep(0.005)
            delivered_then.append(len(shop.effects()))
        finally:
            stops[-1]()
            await asyncio.wait_for(running, 10)

    run_worker(worker, scenario)

    assert set(arrived) == set(correction), f"not in the shop within {10 * BOUND:.0f} s"
    worst = max(arrived.values())
    print(f"corrections in {worst:.2f} s at worst (the promise: {BOUND:.2f} s), {passed_by}")
    assert max(passed_by.values()) <= PASSED_BY, (
        f"{max(passed_by.values())} of the reload's prices reached the shop before a correction"
        f" (it took {worst:.2f} s): it waited behind the reload"
    )
    assert delivered_then[0] < RELOAD / 2  # it was a reload that was draining, not its end
    payloads = {(e.kind, e.aggregate, e.version): e.payload for e in shop.effects()}
    for (kind, aggregate), (version, price) in correction.items():
        assert payloads[(kind, aggregate, version)]["price"] == price
        assert json.dumps(payloads[(kind, aggregate, version)])  # a whole payload, as sent
