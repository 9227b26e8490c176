"""Review rev41b H2/H3 (docs/marketplaces.md, "A pair 1C writes a moment apart"): 1C writes a
SKU's price types as rows of their own, committed one by one (or in a split export), so the
other type of a pair may come a second after the first. A price taken in alone beside the known
price of its pair's other type waits ``pair_settle`` seconds (5 by default) for 1C's row of that
type, and both go to Ozon in one update; without it, it goes as it is once the wait is over.

- H3: Ozon shows 1000 "was 1200"; 1C lowers the price to 500 and writes the old price 600 a
  second later. Before: 500 went at once beside the known 1200 (a discount 1C never stated),
  then 500/600: two updates.
- H2: 1C ends the discount with the old price equal to the price (1000) and lowers the price
  to 800 "was 1000" a second later. Before: 1000 with nothing struck through, then 800/1000.

The simulator judges the outcome (the updates Ozon received), on SQLite and PostgreSQL; the
worker's clock and Ozon's move together (a fake clock)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from marketsims import ozon_sim
from ozon_pair import both_clocks, discount_shown, pair_worker, typed
from sqlalchemy import Engine
from ym_pair import states

from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.testing import drain, run_worker, stage
from exchange.words import detail_words
from exchange.worker import Worker


@pytest.fixture
def ozon() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


def pairs(ozon: OzonSimulator) -> list[tuple[object, object]]:
    return [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]


def test_a_price_and_its_old_price_written_a_second_apart_go_in_one_update(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """Promise (H3): 500 never shows beside the old 1200 1C replaced by 600 a second later."""
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path, pair_settle=5)
    advance = both_clocks(clock, ozon)
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        await discount_shown(w, engine, advance)
        stage(engine, [typed(2, "500.00", "retail")])
        await w.cycle()
        seen["waiting"] = (states(engine)[("SKU-1", 2)], pairs(ozon))
        advance(1)
        stage(engine, [typed(2, "600.00", "old")])  # 1C's next row, a second later
        await drain(w)

    run_worker(worker, scenario)
    assert seen["waiting"] == (("delayed", None), [(1000, 1200)]), "500 waits for 1C's old price"
    assert pairs(ozon) == [(1000, 1200), (500, 600)], "one update: never 500 beside 1200"
    assert states(engine)[("SKU-1", 2)] == ("delivered", None)
    assert states(engine)[("SKU-1/old", 2)] == ("delivered", None)


def test_a_price_alone_goes_beside_the_known_old_price_once_the_settle_is_over(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """Promise: the wait is short and bounded; 1C sending no old price, 900 goes beside the
    known 1200 (1C's discount stands), and the wait's words say so, in Russian too."""
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path, pair_settle=5)
    advance = both_clocks(clock, ozon)
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        await discount_shown(w, engine, advance)
        stage(engine, [typed(2, "900.00", "retail")])
        await w.cycle()
        seen["words"] = _last_error(engine)
        advance(2)
        await w.cycle()
        seen["still"] = pairs(ozon)
        advance(3.5)
        await drain(w)

    run_worker(worker, scenario)
    assert seen["still"] == [(1000, 1200)], "still waiting 2 s in"
    assert pairs(ozon) == [(1000, 1200), (900, 1200)]
    assert states(engine)[("SKU-1", 2)] == ("delivered", None)
    words = str(seen["words"])
    assert words.startswith("taken in alone beside the known old_price 1200.00 of its SKU"), words
    assert "goes as it is 5 s from now" in words and "not charged" in words, words
    russian = detail_words(words)
    assert russian.startswith("пришла одна, рядом с известной ценой old_price 1200.00"), russian


def test_an_old_price_equal_to_the_price_then_a_lower_price_a_second_later_go_in_one_update(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """Promise (H2): 1000 never shows without a struck-through price between 1C's two rows."""
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path, pair_settle=5)
    advance = both_clocks(clock, ozon)

    async def scenario(w: Worker) -> None:
        await discount_shown(w, engine, advance)
        stage(engine, [typed(2, "1000.00", "old")])  # 1C ends the discount...
        await w.cycle()
        advance(1)
        stage(engine, [typed(2, "800.00", "retail")])  # ...and lowers the price a second later
        await drain(w)

    run_worker(worker, scenario)
    assert pairs(ozon) == [(1000, 1200), (800, 1000)], "one update: 800, was 1000"


def test_a_minimum_taken_along_never_sends_the_price_beside_the_old_price_1c_replaced(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """Promise (review rev42 H1): with min_price mapped as the docs' example maps it, 1C's rows
    500, min 300 (0.3 s later) and old 600 (a second later) go in one update; before, the min
    row took 500 along and Ozon showed 500 "was 1200" for the rest of the wait."""
    types = {"retail": "price", "old": "old_price", "min": "min_price"}
    clock, worker = pair_worker(
        db_url, engine, ozon, tmp_path, pair_settle=5, ozon_price_types=types
    )
    advance = both_clocks(clock, ozon)

    async def scenario(w: Worker) -> None:
        await discount_shown(w, engine, advance)
        stage(engine, [typed(2, "500.00", "retail")])
        await w.cycle()
        advance(0.3)
        stage(engine, [typed(1, "300.00", "min")])
        await w.cycle()
        advance(1)
        stage(engine, [typed(2, "600.00", "old")])
        await drain(w)

    run_worker(worker, scenario)
    sent = [(u.get("price"), u.get("old_price"), u.get("min_price")) for u in ozon.updates("SKU-1")]
    assert sent[1:] == [(500, 600, 300)], sent


def test_a_reposted_old_price_never_makes_the_next_change_go_alone(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """Promise (review rev42b H2): 1C re-exports its old price 1200 unchanged, and ten seconds
    later lowers the price to 500 with the old price 600 a second apart: one update 500/600,
    never 500 beside 1200 (a rule telling a pair's late row by the intake of the known one took
    the re-post for the pair's first row and sent 500 at once)."""
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path, pair_settle=5)
    advance = both_clocks(clock, ozon)

    async def scenario(w: Worker) -> None:
        await discount_shown(w, engine, advance)
        stage(engine, [typed(2, "1200.00", "old")])  # 1C's re-export, unchanged
        await w.cycle()
        advance(5)  # its own pair_settle (review rev43 H1), then it goes, unchanged
        await drain(w)
        advance(10)
        stage(engine, [typed(2, "500.00", "retail")])
        await w.cycle()
        advance(1)
        stage(engine, [typed(3, "600.00", "old")])
        await drain(w)

    run_worker(worker, scenario)
    assert pairs(ozon) == [(1000, 1200), (500, 600)]


def test_a_reposted_price_waits_from_its_first_post_and_an_unchanged_one_sends_nothing(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """Promise (review rev42 H3, W4, rev43 H1): 1C re-posting 500 every 2 s (a new version each
    time) never keeps it waiting past 5 s from the first post; a re-post of the 1000 Ozon
    shows waits its pair_settle like any lone row of a pair (1C's old price may follow it),
    then is delivered without an update."""
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path, pair_settle=5)
    advance = both_clocks(clock, ozon)
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        await discount_shown(w, engine, advance)
        stage(engine, [typed(2, "1000.00", "retail")])  # unchanged
        await w.cycle()
        seen["unchanged waits"] = states(engine)[("SKU-1", 2)]
        advance(5)
        await w.cycle()
        seen["unchanged"] = (states(engine)[("SKU-1", 2)], pairs(ozon))
        for version in (3, 4, 5):
            stage(engine, [typed(version, "500.00", "retail")])
            await w.cycle()
            advance(2)
        await w.cycle()  # 6 s after the first post of 500, 2 s after the last
        seen["shown"] = pairs(ozon)

    run_worker(worker, scenario)
    assert seen["unchanged waits"] == ("delayed", None), "a lone row of a pair waits"
    assert seen["unchanged"] == (("delivered", None), [(1000, 1200)]), "no update for it"
    assert seen["shown"] == [(1000, 1200), (500, 1200)], "5 s from the first post of 500"


def test_a_setting_of_zero_never_waits(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """Promise: ``pair_settle = 0`` sends a lone price at once, as before (500 beside 1200)."""
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path, pair_settle=0)
    advance = both_clocks(clock, ozon)

    async def scenario(w: Worker) -> None:
        await discount_shown(w, engine, advance)
        stage(engine, [typed(2, "500.00", "retail")])
        await w.cycle()

    run_worker(worker, scenario)
    assert pairs(ozon) == [(1000, 1200), (500, 1200)]


def _last_error(engine: Engine) -> str | None:
    from sqlalchemy import select

    from exchange.db.engine import transaction
    from exchange.db.schema import history, messages

    with transaction(engine, read_only=True) as connection:
        return connection.execute(
            select(history.c.detail)
            .join(messages, messages.c.id == history.c.message_pk)
            .where(messages.c.aggregate == "SKU-1", messages.c.version == 2)
            .order_by(history.c.id.desc())
            .limit(1)
        ).scalar_one_or_none()


def test_a_new_skus_old_price_written_a_second_before_its_price_goes_with_it(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """Promise (review rev42b): a SKU new to the channel, 1C's old price row committed a second
    before its price row; the old price waits for the price (nothing is known beside it yet)
    and both go in one update, never quarantined for "an old price without a price"."""
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path, pair_settle=5)
    advance = both_clocks(clock, ozon)
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        stage(engine, [typed(1, "1200.00", "old")])
        await w.cycle()
        seen["waiting"] = states(engine)[("SKU-1/old", 1)]
        advance(1)
        stage(engine, [typed(1, "1000.00", "retail")])
        await drain(w)

    run_worker(worker, scenario)
    assert seen["waiting"] == ("delayed", None), "the old price waits for its price"
    assert pairs(ozon) == [(1000, 1200)], "one update: 1000, was 1200"
    assert states(engine)[("SKU-1/old", 1)] == ("delivered", None)
