"""Review rev40 B1 (research §1.3: each of Ozon's 10 updates an hour per product counts, and
Ozon restricts senders of identical requests): 1C raises the price above a live discount (Ozon
shows 1000 "was 1200"; 1C's price 1500), then ends the discount by its old price equal to the
price (1500: no discount). Ozon receives 1500 without an old price once, never the identical
``1500``/``"0"`` again (before: a second identical clearing went 10 minutes later).

- 1C's old price 1500 a minute after its price 1500, while 1500 waits for 1C's next package;
- 1C's old price 1500 after 1500 went without an old price (the 10 minutes over);

each time with the service restarted a minute after the old price came (what a process saw
Ozon take is gone; the delivered prices never hold the ``"0"`` sent beside 1500).

The simulator judges (the updates it received), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from marketsims import ozon_sim
from ozon_pair import both_clocks, discount_shown, pair_worker, typed
from sqlalchemy import Engine
from ym_pair import states

from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.testing import run_worker, stage
from exchange.worker import Worker

Scenario = Callable[[Worker], Awaitable[None]]


@pytest.fixture
def ozon() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


@pytest.mark.parametrize("old_at", [1, 12], ids=["while-1500-waits", "after-1500-went"])
def test_ozon_an_old_price_equal_to_the_price_sends_no_identical_update(
    db_url: str, engine: Engine, ozon: OzonSimulator, tmp_path: Path, old_at: int
) -> None:
    clock, worker = pair_worker(db_url, engine, ozon, tmp_path)
    advance = both_clocks(clock, ozon)

    def minutes(first: int, last: int, advance: Callable[[float], None]) -> Scenario:
        async def scenario(w: Worker) -> None:
            for minute in range(first, last):
                if minute == 0:
                    stage(engine, [typed(2, "1500.00", "retail")])
                if minute == old_at:
                    stage(engine, [typed(2, "1500.00", "old")])  # 1C ends the discount
                await w.cycle()
                advance(60)

        return scenario

    async def before(w: Worker) -> None:
        await discount_shown(w, engine, advance)
        await minutes(0, old_at + 2, advance)(w)

    run_worker(worker, before)
    # The service restarts (an update, a reboot): what this process saw Ozon take is gone.
    again, worker = pair_worker(db_url, engine, ozon, tmp_path)
    again.advance((clock.now() - again.now()).total_seconds())
    advance = both_clocks(again, ozon)
    run_worker(worker, minutes(old_at + 2, 40, advance))
    product = ozon.product("SKU-1")
    assert product is not None
    assert (product.price, product.old_price) == (Decimal(1500), Decimal(0))
    at = states(engine)
    assert at[("SKU-1", 2)] == ("delivered", None), at
    # Final either way (delivered as no discount, or quarantined for the rule with the
    # price gone without it): what this test holds is the updates Ozon received.
    assert at[("SKU-1/old", 2)][0] in ("delivered", "quarantined"), at
    pairs = [(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")]
    assert pairs == [(1000, 1200), (1500, 0)], pairs
    # An identical update changes nothing on the storefront, and Ozon counts it all the same.
    assert ozon.outcomes["unchanged"] == 0, "an identical 1500/0 went again"
