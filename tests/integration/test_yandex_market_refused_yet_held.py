"""Review ym400: a price Yandex Market holds is never quarantined for a 400, and an older
price never goes over it, whichever way Yandex plays the research's open points (contract 14:
"where the research says UNCONFIRMED, ... the target is right under both"): a 400 that applies
the rest of its request or not (§3.4, §8), a price sent twice refused or not (§3.5), a 400
naming its offers or not. A worker against the simulator on SQLite and PostgreSQL.

The old target ended an offer a 400 named http-400 at once, unless the read-back made right
then showed it: with a 400 that applies the rest (``atomic_400=false``) and a repeat refused
(``repeat_price=refuse``), the resend of the rest was refused "Price is already set" while the
price was still on its way to the catalogue, so prices Yandex held were quarantined, and an
update of another price type then carried the older known price over the newer one."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from marketsims import ym_settings
from sqlalchemy import Engine
from ym_pair import row, states

from exchange import app as bootstrap
from exchange.dev.simclock import SimClock
from exchange.dev.testing import run_worker, stage
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.worker import Worker

WAITING = ("new", "delayed", "in_progress")
GOODS = [f"Y{n}" for n in range(1, 7)]


@pytest.fixture(
    params=[
        (atomic, repeat, named)
        for atomic in (True, False)
        for repeat in ("touch", "ignore", "refuse")
        for named in ("all", "none")
    ],
    ids=lambda p: f"{'atomic' if p[0] else 'partial'}-{p[1]}-named-{p[2]}",
)
def ym(request: pytest.FixtureRequest) -> Iterator[YmSimulator]:
    atomic, repeat, named = request.param
    # A minute lasts a second: Yandex applies an accepted price half a real second later.
    switches = YmSwitches(
        apply_delay=30,
        atomic_400=atomic,
        repeat_price=repeat,
        errors_named=named,
        unknown_offer="reject",
    )
    simulator = YmSimulator("ym-key-1234", 1001, clock=SimClock(60), switches=switches)
    simulator.start()
    yield simulator
    simulator.stop()


async def until_settled(worker: Worker, engine: Engine, seconds: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    ends = loop.time() + seconds
    while loop.time() < ends:
        await worker.cycle()
        if not any(s in WAITING for s, _ in states(engine).values()):
            return
        await asyncio.sleep(0.05)


def test_a_price_yandex_holds_is_delivered_and_no_older_price_goes_over_it(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """F1 holds 1001. One take-in brings F1's 1101 and six new offers beside an offer Yandex
    does not know; then 1C sets F1's old price. Every price Yandex holds ends delivered (the
    unknown offer ``unknown-sku``, contract 14), and the old price's update carries 1101, the
    price Yandex holds, never 1001 again (review ym400 finding 1)."""
    settings = ym_settings(
        db_url,
        ym,
        tmp_path,
        ym_price_types={"retail": "value", "old": "discountBase"},
        ym_apply_timeout="3",
    )
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))

    async def scenario(w: Worker) -> None:
        stage(engine, [row("F1", "retail", 1, "1001")])
        await until_settled(w, engine)
        goods = [row(sku, "retail", 1, str(1000 + n)) for n, sku in enumerate(GOODS, 1)]
        stage(engine, [*goods, row("F1", "retail", 2, "1101"), row("NOSUCH9", "retail", 1, "5")])
        await until_settled(w, engine)
        stage(engine, [row("F1", "old", 1, "1500")])
        await until_settled(w, engine)

    run_worker(worker, scenario)
    found = states(engine)
    held = {sku: ym.live(sku) for sku in [*GOODS, "F1"]}
    for n, sku in enumerate(GOODS, 1):
        assert ("delivered", None) == found[(f"{sku}/retail", 1)], (sku, found)
        assert Decimal(1000 + n) == held[sku].value  # type: ignore[union-attr]
    assert ("quarantined", "unknown-sku") == found[("NOSUCH9/retail", 1)]
    assert ("delivered", None) == found[("F1/retail", 2)], found
    assert ("delivered", None) == found[("F1/old", 1)], found
    f1: Any = held["F1"]
    assert (Decimal("1101"), Decimal("1500")) == (f1.value, f1.discount_base)
    values = ym.history("F1")
    assert Decimal("1001") not in values[values.index(Decimal("1101")) :], values
