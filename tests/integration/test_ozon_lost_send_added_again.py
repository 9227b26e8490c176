"""Ozon: a send whose answer was lost holds the product's next send across a channel dropped and
added again under its name (review ozon 35, a fresh-context reviewer playing Ozon).

The import of 1100 is answered 504 at once and reaches Ozon later (the simulator's
``late_status``, as tests/integration/test_ozon_lost_answer.py plays it); the operator runs
``channels drop ozon``, the configuration registers ``ozon`` again and ``channels seed ozon``
gives it the current prices; 1C's 1200 comes. The lost send is the account's, not the dropped
channel row's (Ozon holds one catalogue per Client-Id): the old code read it over the live
channel only, sent 1200 at once, and the late 1100 landed over it while ``find`` said 1200
delivered. Now the re-added channel's first send of the product waits, reading Ozon's prices,
until Ozon shows 1100 (or the bound passes), as it does on one channel; then 1200 goes. Judged
from the simulator's state. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from added_again import PATIENT, cycles, drop_and_add_again, ozon_settings
from marketsims import ozon_sim
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import deliveries, messages
from exchange.dev.ozonsim import IMPORT_PRICES, OzonSimulator
from exchange.dev.testing import drain, price_row, run_worker, stage
from exchange.domain.clock import FakeClock
from exchange.targets.ozon.target import LOST_HOLD
from exchange.worker import Worker

LATER = 3.0  # real seconds until the gateway hands the 504'd import on to Ozon


@pytest.fixture
def site() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


def _state(engine: Engine, channel_id: int, version: int) -> str:
    with transaction(engine, read_only=True) as connection:
        return str(
            connection.execute(
                select(deliveries.c.state)
                .join(messages, deliveries.c.message_pk == messages.c.id)
                .where(
                    deliveries.c.channel_id == channel_id,
                    messages.c.aggregate == "SKU-1",
                    messages.c.version == version,
                )
            ).scalar_one()
        )


def test_a_lost_send_on_a_dropped_channel_never_lands_over_the_readded_channels_price(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    settings = ozon_settings(db_url, site, tmp_path, **PATIENT)
    bootstrap.register_channels(settings, engine)
    clock = FakeClock()
    before: list[int] = []
    started: list[float] = []

    async def lose(w: Worker) -> None:
        stage(engine, [price_row("SKU-1", 1, "1000.00")])
        await drain(w)
        assert site.price("SKU-1") == Decimal("1000")
        before.append(site.requests[IMPORT_PRICES])
        site.faults.late_status, site.faults.late_after = 504, LATER
        stage(engine, [price_row("SKU-1", 2, "1100.00")])
        started.append(time.monotonic())
        await w.cycle()  # the 504 at once; Ozon has not seen the import yet
        site.faults.late_status = None
        assert site.requests[IMPORT_PRICES] - before[0] == 1

    run_worker(bootstrap.worker(settings, engine, clock=clock, rng=random.Random(3)), lose)
    again = drop_and_add_again(settings, engine, "ozon", clock.now())
    stage(engine, [price_row("SKU-1", 3, "1200.00")])

    async def newer(w: Worker) -> None:
        await cycles(w, clock, 6, 2.0)
        if time.monotonic() - started[0] < LATER:
            assert site.requests[IMPORT_PRICES] - before[0] == 1, "nothing sent while it may land"
        await asyncio.sleep(max(0.0, LATER + 0.5 - (time.monotonic() - started[0])))
        await cycles(w, clock, 12, 10.0)  # the wait's reads (every 30 s) see 1100
        # Shown, 1100 may be another sender's: 1200 waits out the bound (review ozlost38 H4).
        clock.advance(LOST_HOLD)
        await cycles(w, clock, 2, 1.0)
        assert _state(engine, again, 3) == "delivered"
        # The bound is over: 1C's next price goes at once, never waiting for 1100 again.
        stage(engine, [price_row("SKU-1", 4, "1300.00")])
        await cycles(w, clock, 2, 1.0)

    run_worker(bootstrap.worker(settings, engine, clock=clock, rng=random.Random(4)), newer)

    prices = [u["price"] for u in site.updates("SKU-1")]
    assert prices[-3:] == [Decimal("1100"), Decimal("1200"), Decimal("1300")], prices
    assert site.price("SKU-1") == Decimal("1300"), prices
    assert _state(engine, again, 4) == "delivered"
