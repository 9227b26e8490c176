"""Ozon: a send whose worker died mid-send (``kill -9``) holds the product's next send on the
same channel, as a send whose answer was lost does (review ozlost38 H1).

The import of 1100 reaches Ozon late: the simulator holds it (``faults.delay``), then applies
it. Its worker dies with the request in flight (its task cancelled: nothing recorded, as
``kill -9``); its lease runs out. Another worker of the channel then finds the delivery:

- superseded: 1C's 1200 came before the lease ran out; the delivery of 1100 is cancelled as
  superseded. The old code read Ozon (1000), sent 1200 at once, and the held 1100 landed after
  it: Ozon ended on 1100 while 1200 was "delivered".
- taken over: the other worker takes the delivery of 1100 over. The old code sent 1100 again
  at once while the held one might still land (an identical request, counted twice by Ozon,
  §1.3), its next price free to go over it.

Now a send's mark keeps its prices until Ozon answers (``SentTimes.answered`` takes them off
at any answer): a priced mark never answered is a lost send for the product's next send,
which waits until ``LOST_HOLD`` from the send (Ozon showing 1100 delivers that version, never
the newer one before the bound: review ozlost38 H4). Ozon ends on 1C's newest. Judged from
the simulator. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from added_again import PATIENT, cycles, ozon_settings
from marketsims import ozon_sim
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange.dev.ozonsim import IMPORT_PRICES, OzonSimulator
from exchange.dev.testing import drain, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.targets.ozon.target import LOST_HOLD

HELD = 3.0  # real seconds the simulator holds the import of 1100 before applying it
LEASE = 30.0  # the test settings' lease_seconds


@pytest.fixture
def site() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


async def _sent(site: OzonSimulator, count: int) -> None:
    """Until the simulator has taken ``count`` imports (the held one has arrived)."""
    for _ in range(500):
        if site.requests[IMPORT_PRICES] >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the import never arrived")


def _play(db_url: str, engine: Engine, site: OzonSimulator, tmp: Path, *, superseded: bool) -> None:
    settings = ozon_settings(db_url, site, tmp, **PATIENT)
    bootstrap.register_channels(settings, engine)
    clock = FakeClock()
    dead = bootstrap.worker(settings, engine, clock=clock, rng=random.Random(3))
    other = bootstrap.worker(settings, engine, clock=clock, rng=random.Random(4))
    early: list[int] = []  # imports taken while the dead worker's import was held

    async def scenario() -> None:
        try:
            stage(engine, [price_row("SKU-1", 1, "1000.00")])
            await drain(dead)
            assert site.price("SKU-1") == Decimal("1000")
            before = site.requests[IMPORT_PRICES]
            site.faults.delay = HELD
            stage(engine, [price_row("SKU-1", 2, "1100.00")])
            flight = asyncio.create_task(dead.cycle())
            await _sent(site, before + 1)
            started = time.monotonic()
            site.faults.delay = 0.0  # only the import of 1100 is held
            flight.cancel()  # kill -9: nothing recorded, the lease left to run out
            await asyncio.gather(flight, return_exceptions=True)
            if superseded:
                stage(engine, [price_row("SKU-1", 3, "1200.00")])
            clock.advance(LEASE + 1.0)  # the dead worker's lease has run out
            while time.monotonic() - started < HELD - 0.5:
                await cycles(other, clock, 1, 2.0)
                early.append(site.requests[IMPORT_PRICES] - before)
            if not superseded:
                stage(engine, [price_row("SKU-1", 3, "1200.00")])
            await asyncio.sleep(max(0.0, HELD + 0.5 - (time.monotonic() - started)))
            await cycles(other, clock, 12, 10.0)  # the wait's reads (every 30 s) see 1100
            # Shown, 1100 may be another sender's: 1200 waits out the bound (review H4).
            clock.advance(LOST_HOLD)
            await cycles(other, clock, 2, 1.0)
        finally:
            await other.target.aclose()
            await dead.target.aclose()

    asyncio.run(scenario())
    prices = [u["price"] for u in site.updates("SKU-1")]
    assert prices == [Decimal("1000"), Decimal("1100"), Decimal("1200")], prices
    assert site.price("SKU-1") == Decimal("1200"), prices
    assert set(early) == {1}, f"nothing sent while the dead worker's import may land: {early}"


def test_a_dead_workers_send_holds_the_newer_price_that_supersedes_it(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Never an older price over a newer one: superseded after its worker died."""
    _play(db_url, engine, site, tmp_path, superseded=True)


def test_a_dead_workers_send_taken_over_is_not_sent_again_over_the_newer_price(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Never an older price over a newer one: taken over after its worker died."""
    _play(db_url, engine, site, tmp_path, superseded=False)


def test_a_send_ozon_answered_never_holds_the_next_one(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """The pace: a send Ozon answered (here: refused, 5000 out of the category's range, the
    delivery quarantined with its mark) is never taken for one whose worker died; 1C's 1200
    goes at once."""
    settings = ozon_settings(db_url, site, tmp_path, **PATIENT)
    bootstrap.register_channels(settings, engine)
    clock = FakeClock()
    worker = bootstrap.worker(settings, engine, clock=clock, rng=random.Random(3))

    async def scenario() -> None:
        try:
            stage(engine, [price_row("SKU-1", 1, "1000.00")])
            await drain(worker)
            site.set_category_bounds("SKU-1", Decimal("500"), Decimal("2000"))
            stage(engine, [price_row("SKU-1", 2, "5000.00")])
            await cycles(worker, clock, 2, 1.0)
            assert site.price("SKU-1") == Decimal("1000")
            before = site.requests[IMPORT_PRICES]
            stage(engine, [price_row("SKU-1", 3, "1200.00")])
            await cycles(worker, clock, 2, 1.0)
            assert site.requests[IMPORT_PRICES] == before + 1
        finally:
            await worker.target.aclose()

    asyncio.run(scenario())
    assert site.price("SKU-1") == Decimal("1200")
