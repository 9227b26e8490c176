"""``python -m bench --sections latency`` (issue 23, item 7): how long an urgent price waits.

- During a reload: ``reload`` prices drain through a real worker (``exchange run``'s
  scheduler, poll ``POLL`` s) into a loopback shop that takes ``RATE`` requests/s; once the
  reload is flowing, ``CORRECTIONS`` corrections (a new version of a price the shop already
  holds) are staged one after another, each when the one before reached the shop. Figures: the
  median and worst delay from the staging commit to the shop's effect, and the backlog's share
  of the shop's capacity over the same window (deliveries per second ÷ ``RATE``).
- At idle: ``CORRECTIONS`` rows staged one at a time into an idle worker with the default
  poll (5 s): median and worst from commit to the shop's effect (PostgreSQL wakes on NOTIFY,
  SQLite on PRAGMA data_version: exchange/db/wake.py; bench/wake.py does the same with the
  worker as a process of its own, and measures its idle CPU).

The promise it checks: a correction within 2 × poll + EXCHANGE_HTTP_TIMEOUT whatever the
backlog; at idle on either database a median under 0.5 s and a p99 under 1 s.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from exchange import app as bootstrap
from exchange import runner
from exchange.db.engine import make_engine
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import fast_settings, price_row, stage

POLL = 0.2
HTTP_TIMEOUT = 2.0
RATE = 100.0
CORRECTIONS = 20
IDLE_POLL = 5.0


async def _until_in_shop(shop: SiteSimulator, key: tuple[str, str], version: int) -> None:
    while shop.held_versions().get(key, 0) < version:
        await asyncio.sleep(0.002)


def _run(url: str, shop: SiteSimulator, poll: float, scenario: Callable[..., Any]) -> Any:
    engine = make_engine(url)
    settings = fast_settings(
        url, shop.url, poll_interval=poll, http_timeout=HTTP_TIMEOUT, batch_size=20
    )
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))
    stops: list[Callable[[], None]] = []
    original = runner._install_signals
    runner._install_signals = lambda _loop, stop: stops.append(stop)  # type: ignore[assignment]

    async def go() -> Any:
        running = asyncio.create_task(runner.run_forever(worker, poll_interval=poll))
        try:
            return await scenario(engine)
        finally:
            stops[-1]()
            await asyncio.wait_for(running, 30)
            await worker.aclose()

    try:
        return asyncio.run(go())
    finally:
        runner._install_signals = original
        engine.dispose()


def during_reload(url: str, reload: int) -> dict[str, Any]:
    faults = Faults(rate_limit=RATE, rate_retry_after=None, seed=1)
    with SiteSimulator(token="test-token", faults=faults) as shop:
        stage(make_engine(url), [price_row(f"SKU-{n:06d}", 1) for n in range(reload)])

        async def scenario(engine: Any) -> dict[str, Any]:
            await _until_in_shop(shop, ("price", "SKU-000000"), 1)
            await asyncio.sleep(1.0)  # the reload flows at the shop's pace
            delays = []
            started, delivered_before = time.monotonic(), len(shop.effects())
            for n in range(CORRECTIONS):
                stage(engine, [price_row("SKU-000000", 2 + n, f"{100 + n}.00")])
                committed = time.monotonic()
                await asyncio.wait_for(_until_in_shop(shop, ("price", "SKU-000000"), 2 + n), 60)
                delays.append(time.monotonic() - committed)
                await asyncio.sleep(0.3)
            share = (len(shop.effects()) - delivered_before) / (time.monotonic() - started) / RATE
            return {
                "reload": reload,
                "corrections": CORRECTIONS,
                "median_s": round(statistics.median(delays), 3),
                "worst_s": round(max(delays), 3),
                "bound_s": 2 * POLL + HTTP_TIMEOUT,
                "share_of_capacity": round(share, 3),
                "left_in_backlog": reload - len(shop.effects()) + CORRECTIONS,
            }

        return dict(_run(url, shop, POLL, scenario))


def at_idle(url: str) -> dict[str, Any]:
    with SiteSimulator(token="test-token", faults=Faults(seed=1)) as shop:
        rng = random.Random(7)

        async def scenario(engine: Any) -> dict[str, Any]:
            await asyncio.sleep(0.5)
            delays = []
            for n in range(CORRECTIONS):
                await asyncio.sleep(rng.uniform(0.05, 0.3))
                stage(engine, [price_row(f"IDLE-{n:02d}", 1)])
                committed = time.monotonic()
                await asyncio.wait_for(_until_in_shop(shop, ("price", f"IDLE-{n:02d}"), 1), 30)
                delays.append(time.monotonic() - committed)
            return {
                "poll_interval_s": IDLE_POLL,
                "rows": CORRECTIONS,
                "median_s": round(statistics.median(delays), 3),
                "worst_s": round(max(delays), 3),
            }

        return dict(_run(url, shop, IDLE_POLL, scenario))
