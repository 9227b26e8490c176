"""Yandex Market: an update that may still land holds the next one's read-back across a channel
dropped and added again under its name (review ozon 35's shape on Yandex Market).

Yandex accepts 120 for the offer (a 200: accepted, not applied, research §3.4) and shows its old
line 100; the operator runs ``channels drop market``, the configuration registers ``market``
again and ``channels seed market`` gives it the current prices; 1C's 100 comes. Yandex promises
no order between an offer's updates (§3.5; the simulator's ``apply_order`` applies the later
first), and the offer is the business's, not the dropped channel row's: the old code read the
earlier updates over the live channel only, counted the read-back of the old line 100 as the new
100 delivered at once, and the 120 landed after it (Yandex showing 120, the service saying 100
delivered). Now, as on one channel (tests/integration/test_yandex_market_earlier_sends.py), the
100 counts only once ``ym_apply_timeout`` has passed since Yandex took it, is sent again when
Yandex shows 120, and ends delivered at what Yandex shows. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from added_again import drop_and_add_again, live_id
from marketsims import YM_BUSINESS, YM_KEY, ym_channel
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import deliveries, messages
from exchange.dev.simclock import SimClock
from exchange.dev.testing import FAST, price_row, stage
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.domain.clock import SystemClock
from exchange.settings import Settings, load_settings
from exchange.worker import Worker

SKU = "Y-1"
APPLY = 60.0  # simulated seconds between Yandex's 200 and its read-back showing the price
APPLY_TIMEOUT = 4.0  # real seconds an earlier update may still land in (as the one-channel test)
UPDATES, READS = "offer-prices/updates", "offer-prices"  # the simulator's requests, by method


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    """Yandex on a clock the test moves (nothing is applied until it does), applying an offer's
    updates due together newest first (§3.5); the cabinet's line for the offer is 100."""
    switches = YmSwitches(apply_delay=APPLY, apply_order="newest-first")
    simulator = YmSimulator(YM_KEY, YM_BUSINESS, clock=SimClock(0), switches=switches)
    simulator.start()
    simulator.set_live(SKU, Decimal(100))
    yield simulator
    simulator.stop()


def _settings(db_url: str, ym: YmSimulator, tmp: Path) -> Settings:
    fast = {k: v for k, v in FAST.items() if k not in ("channels", "site_token_file")}
    market = ym_channel(ym, tmp, {"retail": "value"}, ym_apply_timeout=APPLY_TIMEOUT)
    return load_settings(
        database_url=db_url,
        worker_id="test-worker",
        **{**fast, "retry_base_delay": 1.5, "retry_max_delay": 1.5, "max_attempts": 10},
        channels={"market": market},
    )


def _state(engine: Engine, channel_id: int, version: int) -> str:
    with transaction(engine, read_only=True) as connection:
        return str(
            connection.execute(
                select(deliveries.c.state)
                .join(messages, deliveries.c.message_pk == messages.c.id)
                .where(
                    deliveries.c.channel_id == channel_id,
                    messages.c.aggregate == SKU,
                    messages.c.version == version,
                )
            ).scalar_one()
        )


async def _cycles_until(worker: Worker, done: Callable[[], bool], seconds: float) -> None:
    """The worker's cycles, as its loop runs them, until ``done()`` (or the time is up)."""
    loop = asyncio.get_running_loop()
    ends = loop.time() + seconds
    try:
        while loop.time() < ends and not done():
            await worker.cycle()
            await asyncio.sleep(0.02)
    finally:
        await worker.target.aclose()


def test_an_update_of_a_dropped_channel_that_may_land_holds_the_readded_channels_read_back(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    settings = _settings(db_url, ym, tmp_path)
    bootstrap.register_channels(settings, engine)
    dropped = live_id(engine, "market")
    stage(engine, [price_row(SKU, 1, "120")])
    asyncio.run(
        _cycles_until(
            bootstrap.worker(settings, engine, rng=random.Random(1)),
            lambda: ym.requests[UPDATES] == 1,
            seconds=10,
        )
    )
    assert _state(engine, dropped, 1) == "delayed", "accepted, waiting for its read-back"
    again = drop_and_add_again(settings, engine, "market", SystemClock().now())
    stage(engine, [price_row(SKU, 2, "100")])
    newer = bootstrap.worker(settings, engine, rng=random.Random(2))

    async def scenario() -> None:
        read: list[int] = []

        def read_back() -> bool:  # the 100 sent, then read back once
            if ym.requests[UPDATES] == 2 and not read:
                read.append(ym.requests[READS])
            return bool(read) and ym.requests[READS] > read[0]

        await _cycles_until(newer, read_back, seconds=10)
        assert read_back(), ym.requests
        assert _state(engine, again, 2) != "delivered", (
            "the read-back shows the cabinet's old line 100 while 120 may still land after it"
        )

    asyncio.run(scenario())
    # Both land now, the later first (§3.5): Yandex ends at 120 for a while.
    ym.clock.advance(APPLY + 1)
    ym.switches.apply_delay = 0
    last = bootstrap.worker(settings, engine, rng=random.Random(3))
    asyncio.run(
        _cycles_until(
            last, lambda: _state(engine, again, 2) == "delivered", seconds=3 * APPLY_TIMEOUT + 12
        )
    )
    live = ym.live(SKU)
    assert Decimal(120) in ym.history(SKU), "120 landed after 100 (the simulator's order)"
    assert ("delivered", Decimal(100)) == (
        _state(engine, again, 2),
        None if live is None else live.value,
    ), "delivered means Yandex shows it"
