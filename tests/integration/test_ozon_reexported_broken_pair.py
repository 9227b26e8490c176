"""Review rev43 H2: Ozon shows 1000 "was 1200"; 1C's pair 1050/1100 breaks Ozon's gap rule
(under 5 % of the old price, research §1.1), so 1050 goes with old_price "0" and 1100 is
quarantined (docs/marketplaces.md, "A rule of two price types"). 1C's full re-exports repeat
the same pair: each sent Ozon the identical 1050/"0" (the delivered prices never hold the "0"),
spending the product's 10 updates an hour (§1.3) until 1C's next real price waited for the
hour. Now the service reads Ozon first and sends nothing where Ozon shows the item already."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from marketsims import ozon_sim
from ozon_pair import both_clocks, discount_shown, pair_worker, typed
from sqlalchemy import Engine
from ym_pair import states

from exchange.dev.ozonsim import IMPORT_PRICES, OzonSimulator
from exchange.dev.testing import drain, run_worker, stage
from exchange.worker import Worker


@pytest.fixture
def ozon() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


def test_a_reexported_broken_pair_sends_ozon_nothing_it_shows_already(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """Each re-export taken by a worker of its own (a restart, another host's worker): what
    one process remembers of Ozon's answers is not what decides."""
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path)
    advance = both_clocks(clock, ozon)

    async def shown(w: Worker) -> None:
        await discount_shown(w, engine, advance)

    run_worker(worker, shown)
    for version in (2, 3, 4, 5):
        stage(engine, [typed(version, "1050.00", "retail"), typed(version, "1100.00", "old")])
        run_worker(pair_worker(db_url, engine, ozon, tmp_path)[1], drain)
        ozon.clock.advance(60)
    stage(engine, [typed(6, "990.00", "retail")])
    run_worker(pair_worker(db_url, engine, ozon, tmp_path)[1], drain)
    sent = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
    assert sent == [(1000, 1200), (1050, 0), (990, 0)]
    assert ozon.requests[IMPORT_PRICES] == 3, "one update per change 1C made, none per re-export"
    for version in (2, 3, 4, 5):
        assert states(engine)[("SKU-1", version)] == ("delivered", None)
        assert states(engine)[("SKU-1/old", version)][0] == "quarantined"
    assert states(engine)[("SKU-1", 6)] == ("delivered", None)


def test_a_broken_pair_written_a_row_apart_then_reexported_sends_nothing_ozon_shows(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path
) -> None:
    """The reviewer's order: 1C's old price 1100 first, its price 1050 a second later (one
    update, 1050/"0"), then full re-exports of the pair: each sends nothing."""
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path, pair_settle=5)
    advance = both_clocks(clock, ozon)

    async def scenario(w: Worker) -> None:
        await discount_shown(w, engine, advance)
        stage(engine, [typed(2, "1100.00", "old")])
        await w.cycle()
        advance(1)
        stage(engine, [typed(2, "1050.00", "retail")])
        await drain(w)
        for version in (3, 4, 5):
            advance(4)
            stage(engine, [typed(version, "1050.00", "retail"), typed(version, "1100.00", "old")])
            await drain(w)

    run_worker(worker, scenario)
    sent = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
    assert sent == [(1000, 1200), (1050, 0)]
    assert ozon.requests[IMPORT_PRICES] == 2, "one update per change 1C made, none per re-export"
