"""Review rev40 B4 (issue 32, docs/marketplaces.md): a price that breaks a rule of two price
types beside a known price waits ``COMPANION_GRACE`` (10 minutes) for 1C's next package, then
goes without the old price (no discount) or is quarantined. The wait counts from when the
service took in the first of 1C's versions of that amount still undelivered, not the newest:
1C re-exports its prices every few minutes, and each re-post of the same price (a new version,
which supersedes the waiting one) restarted the wait, so the raised price never went.

- Ozon shows 1000 "was 1200"; 1C sends the price 1500 alone, then the same 1500 again as new
  versions 5, 9 and 14 minutes later: 10 minutes after the first (and one look), Ozon shows
  1500 without an old price (before: still 1000/1200 after 20 minutes).
- A re-post of another amount (1600 five minutes after 1500) is a new price: its wait counts
  from its own intake, as before.
- The same on Yandex Market (the shared part decides for both), on its simulator.

The simulators judge the outcome, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from marketsims import ozon_sim, ym_settings, ym_sim
from ozon_pair import both_clocks, cycles_for, pair_worker, typed
from sqlalchemy import Engine
from ym_pair import row, states

from exchange import app as bootstrap
from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.testing import drain, run_worker, stage
from exchange.dev.ymsim import YmSimulator
from exchange.targets.marketplace import items
from exchange.worker import Worker

Posts = dict[int, tuple[int, str]]  # the minute after 1C's first new price -> (version, amount)


@pytest.fixture
def ozon() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    # A minute lasts a second: Yandex applies an accepted price half a real second later.
    with ym_sim(scale=60, apply_delay=30) as simulator:
        yield simulator


def _shown(ozon: OzonSimulator) -> tuple[Decimal | None, Decimal | None]:
    product = ozon.product("SKU-1")
    assert product is not None
    return product.price, product.old_price


def _ozon_scenario(
    engine: Engine,
    ozon: OzonSimulator,
    advance: Callable[[float], None],
    posts: Posts,
    looks: dict[int, Callable[[], None]],
) -> Callable[[Worker], object]:
    """Ozon shows 1000 "was 1200"; then, minute by minute, 1C's ``posts`` (minute 0: the
    first) and a look of the worker; ``looks``: the minute -> what is checked after its look."""

    async def scenario(w: Worker) -> None:
        stage(engine, [typed(1, "1000.00", "retail"), typed(1, "1200.00", "old")])
        await drain(w)
        assert _shown(ozon) == (Decimal(1000), Decimal(1200))
        advance(60)
        for minute in range(max(looks) + 1):
            if minute in posts:
                version, amount = posts[minute]
                stage(engine, [typed(version, amount, "retail")])
            await w.cycle()
            if minute in looks:
                looks[minute]()
            advance(60)

    return scenario


def test_ozon_a_price_1c_reposts_unchanged_waits_10_minutes_from_its_first_version(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path)
    advance = both_clocks(clock, ozon)
    seen: dict[int, object] = {}
    posts: Posts = {0: (2, "1500.00"), 5: (3, "1500.00"), 9: (4, "1500.00"), 14: (5, "1500.00")}

    def look(minute: int) -> Callable[[], None]:
        return lambda: seen.__setitem__(minute, (_shown(ozon), states(engine)))

    looks = {m: look(m) for m in (9, 11, 16)}
    run_worker(worker, _ozon_scenario(engine, ozon, advance, posts, looks))
    shown, at = seen[9]  # type: ignore[misc]
    assert shown == (Decimal(1000), Decimal(1200)), "1C's next package may still come"
    assert at[("SKU-1", 4)] == ("delayed", None)
    assert at[("SKU-1", 2)] == ("cancelled", "superseded")
    shown, at = seen[11]  # type: ignore[misc]
    # 10 minutes after 1C's first 1500 and a look: no old price came, 1500 goes without one.
    assert shown == (Decimal(1500), Decimal(0)), "the re-posts of 1500 restarted the wait"
    assert at[("SKU-1", 4)] == ("delivered", None)
    shown, at = seen[16]  # type: ignore[misc]
    assert shown == (Decimal(1500), Decimal(0))
    assert at[("SKU-1", 5)][0] == "delivered", at[("SKU-1", 5)]
    pairs = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
    assert pairs == [(1000, 1200), (1500, 0)], "one update of 1500, none of its re-posts"


def test_ozon_a_repost_of_another_amount_waits_10_minutes_from_its_own_intake(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path)
    advance = both_clocks(clock, ozon)
    seen: dict[int, object] = {}
    posts: Posts = {0: (2, "1500.00"), 5: (3, "1600.00")}
    looks = {m: (lambda m=m: seen.__setitem__(m, _shown(ozon))) for m in (11, 13, 16)}
    run_worker(worker, _ozon_scenario(engine, ozon, advance, posts, looks))
    assert seen[11] == (Decimal(1000), Decimal(1200)), "1600 is a new price: a wait of its own"
    assert seen[13] == (Decimal(1000), Decimal(1200))
    assert seen[16] == (Decimal(1600), Decimal(0)), "10 minutes after 1600 and a look"
    assert states(engine)[("SKU-1", 3)] == ("delivered", None)
    pairs = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
    assert pairs == [(1000, 1200), (1600, 0)], pairs


async def _until_delivered(worker: Worker, engine: Engine, key: tuple[str, int]) -> None:
    """Cycles until ``key`` is delivered (Yandex's read-back: seconds; more on a loaded run)."""
    for _ in range(60):
        await cycles_for(worker, 0.5)
        if states(engine)[key] == ("delivered", None):
            return
    assert states(engine)[key] == ("delivered", None)


def test_yandex_a_price_1c_reposts_unchanged_waits_from_its_first_version(
    db_url: str,
    engine: Engine,
    ym: YmSimulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Real seconds: the wait is 6 s; 1C re-posts 1500 every 2.5 s, each before the wait of the
    # one before it would end. Counted from the newest, 1500 would never go.
    monkeypatch.setattr(items, "COMPANION_GRACE", 6.0)
    settings = ym_settings(
        db_url,
        ym,
        tmp_path,
        ym_price_types={"retail": "value", "old": "discountBase"},
        ym_apply_timeout="2",
    )
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        stage(engine, [row("Y-1", "retail", 1, "1000"), row("Y-1", "old", 1, "1200")])
        await _until_delivered(w, engine, ("Y-1/retail", 1))
        version = 2
        loop = asyncio.get_running_loop()
        began = loop.time()
        while loop.time() - began < 25:  # 1C's exchange, every 2.5 s, until 1500 shows
            stage(engine, [row("Y-1", "retail", version, "1500")])
            version += 1
            await cycles_for(w, 2.5)
            live = ym.live("Y-1")
            if live is not None and live.value == Decimal(1500):
                break
        seen["after"] = loop.time() - began
        seen["versions"] = version - 2

    run_worker(worker, scenario)
    live = ym.live("Y-1")
    assert live is not None and (live.value, live.discount_base) == (Decimal(1500), None), live
    assert seen["after"] < 25, seen
