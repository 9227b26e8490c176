"""A SKU's price types staged together go to a marketplace in one item (contract 14: "one item
per SKU carrying every mapped price type's latest price, at most one item per SKU in flight";
docs/marketplaces.md: the marketplace never shows the new price of one type beside the old
price of the other), however the claim order and the batch size cut the backlog: a claim that
picks an aggregate of a SKU takes along every sibling of that SKU due now (queue.lease).

Review ymtogether: on Yandex Market, 300 products whose retail and old price were staged in one
transaction went in 6 updates of 100 offers, the new ``value`` first beside the replaced
``discountBase`` (a fake discount), then with the new one, counted only after
``ym_apply_timeout``. Ozon shares the claim. A real worker against each simulator, SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from marketsims import ozon_sim, ym_settings
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.dev.ozonsim import IMPORT_PRICES, OzonSimulator
from exchange.dev.simclock import SimClock
from exchange.dev.testing import (
    drain,
    fast_settings,
    one_channel_messages,
    price_row,
    run_worker,
    stage,
)
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.domain.clock import FakeClock
from exchange.worker import Worker

messages = one_channel_messages()
SKUS = 30  # three batches of 10: the claim order puts every retail price before the old ones
BATCH = 10


def row(sku: str, price_type: str, version: int, amount: int) -> dict[str, Any]:
    payload = {"sku": sku, "price": str(amount), "currency": "RUB", "price_type": price_type}
    return {
        **price_row(sku, version, str(amount), aggregate=f"{sku}/{price_type}"),
        "payload": json.dumps(payload),
    }


def staged_together(version: int, amounts: dict[str, int]) -> list[dict[str, Any]]:
    """Every SKU's price types in one staging (one transaction), type by type: the retail
    prices of all SKUs first, so a claim of ``BATCH`` finds the siblings far behind."""
    return [
        row(f"B{g}", price_type, version, base + g)
        for price_type, base in amounts.items()
        for g in range(1, SKUS + 1)
    ]


def states(engine: Engine) -> dict[tuple[str, int], str]:
    with transaction(engine, read_only=True) as connection:
        found = connection.execute(
            select(messages.c.aggregate, messages.c.version, messages.c.state)
        )
        return {(a, v): s for a, v, s in found}


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    # A minute lasts a second: Yandex applies an accepted price half a real second later.
    simulator = YmSimulator(
        "ym-key-1234", 1001, clock=SimClock(60), switches=YmSwitches(apply_delay=30)
    )
    simulator.start()
    yield simulator
    simulator.stop()


def test_yandex_market_gets_each_skus_value_and_discount_base_in_one_update_never_apart(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """Each SKU's new ``value`` and ``discountBase`` go in one update: Yandex shows 1001/1501,
    then 950/1300, never 950 beside 1501; one update per SKU each time, and all delivered well
    before ``ym_apply_timeout`` (a second update of a SKU is counted only after it)."""
    settings = ym_settings(
        db_url,
        ym,
        tmp_path,
        ym_price_types={"retail": "value", "old": "discountBase"},
        ym_apply_timeout="60",
        batch_size=str(BATCH),
    )
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))
    loop_time: dict[str, float] = {}

    async def settle(w: Worker, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        ends = loop.time() + seconds
        while loop.time() < ends:
            await w.cycle()
            if all(s == "delivered" for s in states(engine).values()):
                return
            await asyncio.sleep(0.05)

    async def scenario(w: Worker) -> None:
        stage(engine, staged_together(1, {"retail": 1001, "old": 1501}))
        await settle(w, 20)
        stage(engine, staged_together(2, {"retail": 950, "old": 1300}))
        started = asyncio.get_running_loop().time()
        await settle(w, 20)
        loop_time["second"] = asyncio.get_running_loop().time() - started

    run_worker(worker, scenario)
    left = {k: s for k, s in states(engine).items() if s != "delivered"}
    assert not left, f"not delivered within 20 s (ym_apply_timeout is 60 s): {sorted(left)[:6]}"
    assert loop_time["second"] < 20
    for g in range(1, SKUS + 1):
        shown = [(p.value, p.discount_base) for p in ym.applied(f"B{g}")]
        assert shown == [
            (Decimal(1001 + g), Decimal(1501 + g)),
            (Decimal(950 + g), Decimal(1300 + g)),
        ], f"B{g}: one update each time, both new prices together"
    assert ym.accepted == 2 * SKUS, "each SKU sent once each time"


@pytest.fixture
def ozon() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


def test_ozon_gets_each_skus_price_old_price_and_min_price_in_one_update_never_apart(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """Ozon shares the claim: ``price``, ``old_price`` and ``min_price`` staged together go in
    one update of each product (never 950 beside the replaced old price 1501), and a product
    is updated once each time (Ozon counts 10 updates a product an hour, §1.3)."""
    key = tmp_path / "ozon.key"
    key.write_text("ozon-key", encoding="utf-8")
    clock = FakeClock()
    settings = fast_settings(
        db_url,
        None,
        target="ozon",
        ozon_api_url=ozon.url,
        ozon_client_id="836741",
        ozon_api_key_file=str(key),
        ozon_price_types={"retail": "price", "old": "old_price", "min": "min_price"},
        batch_size=BATCH,
    )
    worker = bootstrap.worker(settings, engine, clock=clock, rng=random.Random(3))

    async def scenario(w: Worker) -> None:
        stage(engine, staged_together(1, {"retail": 1001, "old": 1501, "min": 601}))
        await drain(w)
        clock.advance(60)
        ozon.clock.advance(60)
        stage(engine, staged_together(2, {"retail": 950, "old": 1300, "min": 500}))
        await drain(w)

    run_worker(worker, scenario)
    left = {k: s for k, s in states(engine).items() if s != "delivered"}
    assert not left, sorted(left)[:6]
    money = ("price", "old_price", "min_price")
    for g in range(1, SKUS + 1):
        updates = [tuple(u.get(name) for name in money) for u in ozon.updates(f"B{g}")]
        assert updates == [
            (Decimal(1001 + g), Decimal(1501 + g), Decimal(601 + g)),
            (Decimal(950 + g), Decimal(1300 + g), Decimal(500 + g)),
        ], f"B{g}: one update each time, every new price together"
    assert ozon.requests[IMPORT_PRICES] == 2 * SKUS // BATCH
