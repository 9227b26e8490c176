"""Review ymlog 35 (log noise): one worker waiting on Yandex Market's per-minute budget wrote
~6,750 INFO lines ``outcome=waiting`` in 5 minutes, one per message per cycle. The engineer on
call reads one INFO line when a wait starts (or changes); its repeats, each message each
cycle, are at DEBUG. The cabinet allows 20 offers a minute (its 420 lowers the worker's
budget to that) and 60 prices wait: 40 are held, and the worker cycles on them while the
budget is spent. The real worker, the Yandex Market simulator over HTTP, SQLite and
PostgreSQL."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from marketsims import ym_settings
from sqlalchemy import Engine, update

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import deliveries
from exchange.dev.simclock import SimClock
from exchange.dev.testing import price_row, run_worker, stage
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.logs import EVENT_ATTR, FIELDS_ATTR
from exchange.worker import Worker

KEY = "ym-key-waits"
PRICES = 60
CYCLES = 6


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    sim = YmSimulator(
        KEY, 1001, clock=SimClock(60.0), switches=YmSwitches(apply_delay=30), offers_per_minute=20
    )
    sim.start()
    yield sim
    sim.stop()


def test_a_worker_cycling_on_its_held_budget_tells_the_wait_once_at_info(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="exchange.worker")
    settings = ym_settings(db_url, ym, tmp_path, key=KEY, batch_size="100")
    stage(engine, [price_row(f"SKU-{n:02d}", 1, "100.00") for n in range(PRICES)])
    worker = bootstrap.worker(settings, engine, rng=random.Random(5))

    async def cycles(w: Worker) -> None:
        for _ in range(CYCLES):
            await w.cycle()
            # The held ones due again at once: the next cycle meets the spent budget again.
            with transaction(engine) as connection:
                connection.execute(
                    update(deliveries)
                    .where(deliveries.c.state == "delayed")
                    .values(next_try_at=w.clock.now() - timedelta(seconds=1))
                )

    run_worker(worker, cycles)
    waiting = [
        r
        for r in caplog.records
        if getattr(r, EVENT_ATTR, None) == "delivery"
        and getattr(r, FIELDS_ATTR, {}).get("outcome") == "waiting"
    ]
    told = [r for r in waiting if r.levelno >= logging.INFO]
    # The worker did cycle on the held budget: the held messages waited again each cycle.
    assert len(waiting) >= (CYCLES - 1) * 20, len(waiting)
    # One INFO line when the wait starts (one more if its words change): never one a message
    # a cycle.
    assert 1 <= len(told) <= 2, [r.getMessage() for r in told]
