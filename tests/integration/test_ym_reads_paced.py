"""Research §3.3: Yandex Market limits every method, each by its own resource counted in offers,
and answers 420 with X-RateLimit-Resource-Until. A worker whose read-back of accepted prices
(``offer-prices``, then ``price-quarantine``) meets such a 420 waits until past that moment
and reads again: the prices end delivered, charged once, never sent again, never quarantined
nor withheld. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from marketsims import ym_settings
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.dev.simclock import SimClock
from exchange.dev.testing import one_channel_messages, price_row, run_worker, stage
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.worker import Worker

KEY = "ym-key-reads"
messages = one_channel_messages()


METHODS = {
    "read_offers_per_minute": "offer-prices",
    "quarantine_offers_per_minute": "price-quarantine",
}


@pytest.fixture(params=sorted(METHODS))
def ym(request: pytest.FixtureRequest) -> Iterator[YmSimulator]:
    # A minute lasts six seconds (two were too few for a loaded CI run: the minute the other
    # program spent ended before the worker's read-back went, and no 420 came); an accepted
    # price is applied half a second later; the read's resource (the read-back's, or the
    # quarantine list's) holds two offers a minute, as many as the worker reads together.
    sim = YmSimulator(
        KEY,
        1001,
        clock=SimClock(10),
        switches=YmSwitches(apply_delay=5),
        **{request.param: 2},
    )
    sim.method = METHODS[request.param]  # type: ignore[attr-defined]
    sim.start()
    yield sim
    sim.stop()


def states(engine: Engine) -> dict[str, tuple[str, int]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, messages.c.state, messages.c.attempts).order_by(
                messages.c.aggregate, messages.c.version
            )
        )
        return {a: (s, n) for a, s, n in rows}


async def until_settled(worker: Worker, engine: Engine, seconds: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    ends = loop.time() + seconds
    while loop.time() < ends:
        await worker.cycle()
        if all(s == "delivered" for s, _ in states(engine).values()):
            return
        await asyncio.sleep(0.05)


def test_a_read_back_meeting_a_420_for_its_budget_waits_until_the_moment_named_and_delivers(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """The update accepted; then another program spends the read's minute, and the worker's
    read-back meets 420: it is sent again once, past X-RateLimit-Resource-Until (the old code
    listed the quarantine again at once, refused three more times within the minute, each
    refusal costing the resource too, §3.3), and the prices end delivered."""
    method: str = ym.method  # type: ignore[attr-defined]
    settings = ym_settings(db_url, ym, tmp_path, key=KEY, ym_apply_timeout="30")
    stage(engine, [price_row("SKU-1", 1, "100.00"), price_row("SKU-2", 1, "200.00")])
    worker = bootstrap.worker(settings, engine, rng=random.Random(7))
    counted: dict[str, int] = {}

    async def scenario(w: Worker) -> None:
        await w.cycle()  # the update: accepted, read back later
        assert 1 == ym.requests["offer-prices/updates"]
        await asyncio.sleep(0.8)  # applied (half a second) and the read-back due
        length = ym.clock.wall(60)
        await asyncio.sleep(length - ym.clock.wall_now() % length)
        async with httpx.AsyncClient() as other:  # another program spends the minute
            spent = await other.post(
                f"{ym.url}/v2/businesses/1001/{method}",
                json={"offerIds": ["OTHER-1", "OTHER-2"]},
                headers={"Api-Key": KEY},
            )
        assert 200 == spent.status_code
        counted["before"] = ym.requests[method]
        await until_settled(w, engine)

    run_worker(worker, scenario)
    assert {"SKU-1": ("delivered", 1), "SKU-2": ("delivered", 1)} == states(engine), (
        "delivered on the read-back, charged once: the 420 was waited out, never a failure"
    )
    assert 2 == ym.requests[method] - counted["before"], "one 420, then read past Until"
    assert 1 == ym.requests["offer-prices/updates"], "read back, never sent again"
    assert not ym.quarantined()
    assert Decimal("100.00") == ym.live("SKU-1").value  # type: ignore[union-attr]
    assert Decimal("200.00") == ym.live("SKU-2").value  # type: ignore[union-attr]
