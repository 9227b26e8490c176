"""An Ozon channel carrying two of 1C's price types as one pair (docs/marketplaces.md, the pair
rule): 1C's ``retail`` as Ozon's price and its ``old`` as old_price, on the simulator's clock.
The set-up tests/integration/test_marketplace_pair_quarantine.py and
tests/integration/test_pair_wait_words.py share."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.testing import drain, fast_settings, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.worker import Worker


def typed(version: int, price: str, price_type: str) -> dict[str, Any]:
    """1C's price of SKU-1 of ``price_type`` (``SKU-1/old`` for ``old``), as staged."""
    row = price_row("SKU-1", version, price)
    if price_type != "retail":
        row["aggregate"] = f"SKU-1/{price_type}"
        row["payload"] = row["payload"].replace('"retail"', f'"{price_type}"')
    return row


def pair_worker(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path, **extra: Any
) -> tuple[FakeClock, Worker]:
    """The worker of the one channel on ``site`` (``retail`` -> price, ``old`` -> old_price)
    and its fake clock; ``extra``: other settings (``pair_settle``)."""
    key = tmp_path / "ozon.key"
    key.write_text("ozon-key", encoding="utf-8")
    settings = fast_settings(
        db_url,
        None,
        target="ozon",
        ozon_api_url=site.url,
        ozon_client_id="836741",
        ozon_api_key_file=str(key),
        **{"ozon_price_types": {"retail": "price", "old": "old_price"}, **extra},
    )
    clock = FakeClock()
    return clock, bootstrap.worker(settings, engine, clock=clock, rng=random.Random(3))


def both_clocks(clock: FakeClock, site: OzonSimulator) -> Callable[[float], None]:
    """Moves the worker's clock and the simulator's together by the seconds given."""

    def advance(seconds: float) -> None:
        clock.advance(seconds)
        site.clock.advance(seconds)

    return advance


async def cabinet_old_price_refuses(
    w: Worker, engine: Engine, site: OzonSimulator, advance: Callable[[float], None]
) -> None:
    """1C's 1000 delivered; the seller sets the old price 1200 in Ozon's cabinet; a minute
    later 1C's 1300 is sent, which that old price refuses (research §1.1)."""
    stage(engine, [typed(1, "1000.00", "retail")])
    await drain(w)
    product = site.product("SKU-1")
    assert product is not None
    product.old_price = Decimal(1200)  # the seller's, set in Ozon's cabinet
    advance(60)
    stage(engine, [typed(2, "1300.00", "retail")])
    await drain(w)


async def discount_shown(w: Worker, engine: Engine, advance: Callable[[float], None]) -> None:
    """Ozon shows 1C's 1000 "was 1200", delivered a minute ago (``advance``: ``both_clocks``)."""
    stage(engine, [typed(1, "1000.00", "retail"), typed(1, "1200.00", "old")])
    await drain(w)
    advance(60)


async def cycles_for(worker: Worker, seconds: float) -> None:
    """The worker's cycles for ``seconds`` of real time, a twentieth of a second apart."""
    loop = asyncio.get_running_loop()
    ends = loop.time() + seconds
    while loop.time() < ends:
        await worker.cycle()
        await asyncio.sleep(0.05)
