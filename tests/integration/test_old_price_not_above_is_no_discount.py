"""Review rev39y H2 (docs/marketplaces.md, «Старая цена не выше цены — скидки нет»): a price of
1C's old-price type that is not above the new price states no discount, as a storefront shows
1C's two price types; the new price goes without a struck-through price (Ozon's old_price "0",
Yandex Market without discountBase) and is never held back by it.

- Yandex Market: 1C ends a discount as the docs advise (the old price equal to the price: "no
  discount"), then raises the price to 1500. Before, 1500 was judged beside the old price 1000,
  waited 10 minutes for 1C's next package and was quarantined ``invalid-for-channel`` while
  Yandex kept 1000. Now 1C had ended the discount, there is nothing to wait for: 1500 goes at
  once, without discountBase.
- Both marketplaces: a discount 1000 "was 1200" is live and 1C raises the price to 1500 alone.
  1C's next package may bring the old price that goes with it (1800: one update, never 1500
  beside 1200 nor 1000 beside 1800), so 1500 waits for it as before; once the wait is over,
  1C's prices are what they are (1500, old 1200: no discount), and 1500 goes without an old
  price instead of being quarantined with the marketplace left at 1000.

The simulators judge the outcome (research §1.1: Ozon's old_price "0" is none; §3.1: Yandex
erases a discount an update does not carry), on SQLite and PostgreSQL. ``exchange verify`` then
finds no difference: the old price 1C states is not above the price, and none shown is it."""

from __future__ import annotations

import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from marketsims import ozon_sim, ym_settings, ym_sim
from ozon_pair import both_clocks, cycles_for, discount_shown, pair_worker, typed
from sqlalchemy import Engine
from ym_pair import row, states

from exchange import app as bootstrap
from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.testing import drain, run_worker, stage
from exchange.dev.ymsim import YmSimulator
from exchange.ops.verify import latest_delivered, verify
from exchange.targets.marketplace import items
from exchange.worker import Worker


@pytest.fixture
def ozon() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    # A minute lasts a second: Yandex applies an accepted price half a real second later.
    with ym_sim(scale=60, apply_delay=30) as simulator:
        yield simulator


def test_ozon_a_raised_price_above_the_old_one_goes_without_it_once_1cs_next_package_is_not_coming(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path)
    advance = both_clocks(clock, ozon)
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        await discount_shown(w, engine, advance)
        stage(engine, [typed(2, "1500.00", "retail")])  # old 1200 below 1500
        for _ in range(5):  # 5 minutes: 1C's next package may still come
            await w.cycle()
            advance(60)
        seen["waiting"] = states(engine)[("SKU-1", 2)]
        product = ozon.product("SKU-1")
        assert product is not None
        seen["shown while waiting"] = (product.price, product.old_price)
        for _ in range(8):  # the 10 minutes run out
            await w.cycle()
            advance(60)
        await drain(w)
        seen["differ"] = await _differing(w, engine)

    run_worker(worker, scenario)
    assert seen["waiting"] == ("delayed", None), "waits for 1C's next package first"
    assert seen["shown while waiting"] == (Decimal(1000), Decimal(1200))
    assert states(engine)[("SKU-1", 2)] == ("delivered", None), "never quarantined"
    product = ozon.product("SKU-1")
    assert product is not None
    assert (product.price, product.old_price) == (Decimal(1500), Decimal(0)), "no old price"
    pairs = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
    assert pairs == [(1000, 1200), (1500, 0)], pairs
    assert seen["differ"] == [], "verify: an old price not above the price is no discount"


async def _differing(w: Worker, engine: Engine) -> list[tuple[str, object, object]]:
    """What ``exchange verify`` finds differing on the channel (field, sent, held)."""
    checked = await verify(
        w.loop.target,  # type: ignore[arg-type]
        latest_delivered(engine),
        channel="the channel",
        not_delivered=[],
    )
    return [(h.where, h.sent, h.held) for h in checked.differing]


async def _until_delivered(worker: Worker, engine: Engine, key: tuple[str, int]) -> None:
    """Cycles until ``key`` is delivered (Yandex's read-back: seconds; more on a loaded run)."""
    for _ in range(60):
        await cycles_for(worker, 0.5)
        if states(engine)[key] == ("delivered", None):
            return
    assert states(engine)[key] == ("delivered", None)


def _ym_worker(db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path) -> Worker:
    settings = ym_settings(
        db_url,
        ym,
        tmp_path,
        ym_price_types={"retail": "value", "old": "discountBase"},
        ym_apply_timeout="2",
    )
    return bootstrap.worker(settings, engine, rng=random.Random(3))


def test_yandex_a_price_raised_after_1c_ended_the_discount_goes_at_once_without_one(
    db_url: str,
    engine: Engine,
    ym: YmSimulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The wait for 1C's next package far longer than the test: a price held by it fails here.
    monkeypatch.setattr(items, "COMPANION_GRACE", 600.0)
    worker = _ym_worker(db_url, engine, ym, tmp_path)
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        stage(engine, [row("Y-1", "retail", 1, "1000"), row("Y-1", "old", 1, "1400")])
        await _until_delivered(w, engine, ("Y-1/retail", 1))
        stage(engine, [row("Y-1", "old", 2, "1000")])  # 1C ends the discount: equal to the price
        await _until_delivered(w, engine, ("Y-1/old", 2))
        ended = ym.live("Y-1")
        assert ended is not None and (ended.value, ended.discount_base) == (Decimal(1000), None)
        stage(engine, [row("Y-1", "retail", 2, "1500")])
        await _until_delivered(w, engine, ("Y-1/retail", 2))
        seen["differ"] = await _differing(w, engine)

    run_worker(worker, scenario)
    live = ym.live("Y-1")
    assert live is not None and (live.value, live.discount_base) == (Decimal(1500), None), live
    assert seen["differ"] == [], "verify: an old price not above the price is no discount"


def test_yandex_a_raised_price_above_the_old_one_goes_without_it_once_the_wait_for_1c_is_over(
    db_url: str,
    engine: Engine,
    ym: YmSimulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(items, "COMPANION_GRACE", 4.0)  # real seconds
    worker = _ym_worker(db_url, engine, ym, tmp_path)
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        stage(engine, [row("Y-1", "retail", 1, "1000"), row("Y-1", "old", 1, "1200")])
        await _until_delivered(w, engine, ("Y-1/retail", 1))
        stage(engine, [row("Y-1", "retail", 2, "1500")])  # old 1200 below 1500
        await cycles_for(w, 1.5)
        seen["waiting"] = states(engine)[("Y-1/retail", 2)]
        await _until_delivered(w, engine, ("Y-1/retail", 2))
        seen["differ"] = await _differing(w, engine)

    run_worker(worker, scenario)
    assert seen["waiting"] == ("delayed", None), "waits for 1C's next package first"
    live = ym.live("Y-1")
    assert live is not None and (live.value, live.discount_base) == (Decimal(1500), None), live
    assert states(engine)[("Y-1/old", 1)] == ("delivered", None)
    assert seen["differ"] == [], "verify: an old price not above the price is no discount"
