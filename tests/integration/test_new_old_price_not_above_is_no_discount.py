"""Review rev40 A4/P3/B5 (docs/marketplaces.md "Ending a discount", «Старая цена не выше цены —
скидки нет»): 1C's NEW old price (Ozon's old_price, Yandex Market's discountBase) that is not
above the price it stands beside states no discount, as the known one does
(tests/integration/test_old_price_not_above_is_no_discount.py): it goes as its type's "none"
(Ozon's old_price "0", Yandex without discountBase), and its message is delivered.

- Ozon shows 1000/1200 and 1C ends the discount as the docs advise, the old price equal to the
  price (1000). Before: "1000, was 1200" stayed on Ozon for 10 minutes (1C's next package),
  and the old price 1000 was then quarantined. Now 1000 goes at once with old_price "0".
- A full export repeats the old price 1200 unchanged beside the price raised to 1500. Before:
  1200 was quarantined on both marketplaces (Ozon and Yandex showed 1500 without an old price
  all the same). Now it is delivered: 1C's two prices state no discount.
- The other side (tests/targets/test_ozon.py, the issue 32 test): 1C lowered 1000 to 500 with
  the old price 600 and 500 waits for its retry; 600 is never sent beside 1000 ("1000" without
  the discount 1C states) before 500: it waits for it, and both go together.

The simulators judge the outcome, on SQLite and PostgreSQL."""

from __future__ import annotations

import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from marketsims import ozon_sim, ym_settings, ym_sim
from ozon_pair import both_clocks, cycles_for, discount_shown, pair_worker, typed
from sqlalchemy import Engine, select
from ym_pair import row, states

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import history, messages
from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.testing import drain, run_worker, stage
from exchange.dev.ymsim import YmSimulator
from exchange.targets.marketplace import items
from exchange.words import detail_words
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


def test_ozon_an_old_price_equal_to_the_price_ends_the_discount_at_once_and_is_delivered(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path)
    advance = both_clocks(clock, ozon)
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        await discount_shown(w, engine, advance)
        stage(engine, [typed(2, "1000.00", "old")])  # 1C ends the discount: equal to the price
        await w.cycle()  # promptly: no 10 minutes for 1C's next package
        seen["state"] = states(engine)[("SKU-1/old", 2)]
        product = ozon.product("SKU-1")
        assert product is not None
        seen["shown"] = (product.price, product.old_price)

    run_worker(worker, scenario)
    assert seen["state"] == ("delivered", None), "delivered, never quarantined"
    assert seen["shown"] == (Decimal(1000), Decimal(0)), "1000 without an old price at once"
    pairs = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
    assert pairs == [(1000, 1200), (1000, 0)], pairs
    words = _delivered_words(engine, "SKU-1/old", 2)
    assert words.endswith("old_price 1000.00 was not above price 1000.00: it went as no discount")
    assert "ушла как «скидки нет»" in detail_words(words), detail_words(words)


def test_ozon_a_full_exports_unchanged_old_price_below_the_raised_price_is_delivered(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path)
    advance = both_clocks(clock, ozon)

    async def scenario(w: Worker) -> None:
        await discount_shown(w, engine, advance)
        # A full export: the price raised to 1500, the old price 1200 as it was.
        stage(engine, [typed(2, "1500.00", "retail"), typed(2, "1200.00", "old")])
        await drain(w)

    run_worker(worker, scenario)
    found = states(engine)
    assert found[("SKU-1", 2)] == ("delivered", None)
    assert found[("SKU-1/old", 2)] == ("delivered", None), "no discount, never quarantined"
    product = ozon.product("SKU-1")
    assert product is not None
    assert (product.price, product.old_price) == (Decimal(1500), Decimal(0))
    pairs = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
    assert pairs == [(1000, 1200), (1500, 0)], pairs


def _delivered_words(engine: Engine, aggregate: str, version: int) -> str:
    """What the message's history says of its delivery."""
    with transaction(engine, read_only=True) as connection:
        return str(
            connection.execute(
                select(history.c.detail)
                .join(messages, messages.c.id == history.c.message_pk)
                .where(
                    messages.c.aggregate == aggregate,
                    messages.c.version == version,
                    history.c.to_state == "delivered",
                )
            ).scalar_one()
        )


async def _until_settled(worker: Worker, engine: Engine, keys: list[tuple[str, int]]) -> None:
    """Cycles until none of ``keys`` is still on its way (Yandex's read-back: seconds)."""
    for _ in range(60):
        await cycles_for(worker, 0.5)
        if all(states(engine)[k][0] in ("delivered", "quarantined") for k in keys):
            return


def test_yandex_a_full_exports_unchanged_old_price_below_the_raised_price_is_delivered(
    db_url: str,
    engine: Engine,
    ym: YmSimulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(items, "COMPANION_GRACE", 600.0)
    settings = ym_settings(
        db_url,
        ym,
        tmp_path,
        ym_price_types={"retail": "value", "old": "discountBase"},
        ym_apply_timeout="2",
    )
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))

    async def scenario(w: Worker) -> None:
        stage(engine, [row("Y-1", "retail", 1, "1000"), row("Y-1", "old", 1, "1200")])
        await _until_settled(w, engine, [("Y-1/retail", 1), ("Y-1/old", 1)])
        stage(engine, [row("Y-1", "retail", 2, "1500"), row("Y-1", "old", 2, "1200")])
        await _until_settled(w, engine, [("Y-1/retail", 2), ("Y-1/old", 2)])

    run_worker(worker, scenario)
    found = states(engine)
    assert found[("Y-1/retail", 2)] == ("delivered", None)
    assert found[("Y-1/old", 2)] == ("delivered", None), "no discount, never quarantined"
    live = ym.live("Y-1")
    assert live is not None and (live.value, live.discount_base) == (Decimal(1500), None), live


def test_ozon_an_old_price_below_the_known_price_waits_for_1cs_newer_price_never_going_first(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """1C lowered 1000 to 500 with the old price 600 (a discount of 100), and 500 waits for its
    retry (Ozon's 429) when 600 comes alone: beside the known 1000, 600 would be no discount,
    and Ozon would show 1000 without the discount 1C states before 500 lands. It waits for
    500, and both go in one update."""
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path)
    advance = both_clocks(clock, ozon)
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        ozon.limits.method_rps = 1e-9  # one import goes, the next is refused: 429, a retry
        await discount_shown(w, engine, advance)
        stage(engine, [typed(2, "500.00", "retail")])
        await w.cycle()
        seen["price"] = states(engine)[("SKU-1", 2)]
        ozon.limits.method_rps = None
        stage(engine, [typed(2, "600.00", "old")])
        await cycles_for(w, 2.0)  # past the pace's real second; 500 not due on the fake clock
        seen["old"] = states(engine)[("SKU-1/old", 2)]
        seen["before 500"] = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
        for _ in range(5):
            advance(30)
            await drain(w)

    run_worker(worker, scenario)
    assert seen["price"] in {("new", None), ("delayed", None)}, "500 waits for its retry"
    assert seen["old"] == ("delayed", None), "600 waits for 500"
    assert seen["before 500"] == [(1000, 1200)], "never 1000 without the discount 1C states"
    found = states(engine)
    assert found[("SKU-1", 2)] == found[("SKU-1/old", 2)] == ("delivered", None)
    pairs = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
    assert pairs == [(1000, 1200), (500, 600)], pairs


def test_ozon_an_old_price_below_the_known_price_alone_waits_for_1cs_next_package(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """Review rev41 H1: 1C lowered 1000 to 500 with the old price 600, its rows committed one by
    one (the old price 0.3 s first): 600 came alone, nothing newer waiting yet, and went at once
    as no discount: Ozon showed 1000 without the discount 1C states, and one of its ten updates
    an hour was spent. An old price below the known price (not equal to it: 1C's way to end a
    discount) waits for 1C's next package as a price waits for its old price: 500 comes and
    both go in one update; when none comes, it goes as no discount once the wait is over."""
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path)
    advance = both_clocks(clock, ozon)
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        stage(engine, [typed(1, "1000.00", "retail"), typed(1, "1200.00", "old")])
        stage(engine, [_of("SKU-2", typed(1, "2000.00", "retail"))])
        stage(engine, [_of("SKU-2", typed(1, "2400.00", "old"))])
        await drain(w)
        advance(60)
        stage(engine, [typed(2, "600.00", "old")])
        stage(engine, [_of("SKU-2", typed(2, "1500.00", "old"))])  # 1C sends no price after it
        await cycles_for(w, 1.0)
        seen["alone"] = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
        seen["waits"] = states(engine)[("SKU-1/old", 2)]
        advance(1)
        stage(engine, [typed(2, "500.00", "retail")])
        await cycles_for(w, 1.5)
        seen["with 500"] = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
        for _ in range(int(items.COMPANION_GRACE // 60) + 2):  # a look a minute, at most
            advance(60)
            await cycles_for(w, 0.3)

    run_worker(worker, scenario)
    assert seen["alone"] == [(1000, 1200)], "never 1000 without the discount before 500"
    assert seen["waits"] == ("delayed", None), "600 waits for 1C's next package"
    assert seen["with 500"] == [(1000, 1200), (500, 600)], "one update with 500"
    pairs = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
    assert pairs == [(1000, 1200), (500, 600)], pairs
    found = states(engine)
    assert found[("SKU-1", 2)] == found[("SKU-1/old", 2)] == ("delivered", None)
    # None came for SKU-2: once the wait is over, 1500 goes as no discount beside 2000.
    assert found[("SKU-2/old", 2)] == ("delivered", None)
    two = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-2")]
    assert two == [(2000, 2400), (2000, 0)], two


def _of(sku: str, row: dict[str, object]) -> dict[str, object]:
    """``typed``'s row (SKU-1's) of another SKU."""
    return {k: v.replace("SKU-1", sku) if isinstance(v, str) else v for k, v in row.items()}


def test_ozon_a_reposted_old_price_below_the_price_that_already_went_is_not_held_again(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """Review rev41b H1: the old price 600 below the price 1000 waited for 1C's next package,
    none came, and it went as no discount (1000/"0"). 1C re-exports its prices: each re-post of
    the same 600 waited 10 minutes again and then sent Ozon an identical 1000/"0", one of its
    ten updates an hour, about six an hour for as long as 1C kept the price. A re-post of an
    old price that already went has nothing a package away: it is delivered at once, and Ozon
    receives nothing identical."""
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path)
    advance = both_clocks(clock, ozon)
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        await discount_shown(w, engine, advance)
        stage(engine, [typed(2, "600.00", "old")])
        await cycles_for(w, 1.0)
        for _ in range(int(items.COMPANION_GRACE // 60) + 2):  # a look a minute, at most
            advance(60)
            await cycles_for(w, 0.3)
        seen["went"] = states(engine)[("SKU-1/old", 2)]
        stage(engine, [typed(3, "600.00", "old")])  # 1C's next export: the same old price
        await cycles_for(w, 1.5)
        seen["again"] = states(engine)[("SKU-1/old", 3)]

    run_worker(worker, scenario)
    assert seen["went"] == ("delivered", None), "no price came: 600 went as no discount"
    assert seen["again"] == ("delivered", None), "the re-post is delivered at once"
    pairs = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
    assert pairs == [(1000, 1200), (1000, 0)], pairs
    assert ozon.outcomes["unchanged"] == 0, "an identical 1000/0 went again"
