"""A worker whose Wildberries budget says "wait a minute" (a 429's ``X-Ratelimit-Retry``)
honours ``--max-seconds`` and a stop (SIGTERM) within seconds, and loses nothing: the Yandex
Market target's rule (tests/integration/test_ym_budget_stop.py) for Wildberries. Another
program of the seller spent the account's bucket (research §2.3: one bucket per seller account
for the whole Prices category), so WB answers the first request 429 with a retry a minute
away. The old code slept that minute inside the sends that came next (``Budget.take``), which
the worker's stop waits for; now a send waits at most ``LONGEST_WAIT`` (budget.py) and the
prices go back uncharged, due when the bar has passed. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.dev.testing import fast_settings, one_channel_messages, price_row, run_worker, stage
from exchange.dev.wbsim import Switches, WbSimulator
from exchange.runner import EXIT_OK, EXIT_TIMED_OUT, run_until_idle
from exchange.targets.wildberries.budget import LONGEST_WAIT
from exchange.worker import Worker

MAX_SECONDS = 3.0
GOODS = 15
messages = one_channel_messages()


@pytest.fixture
def wb() -> Iterator[WbSimulator]:
    sim = WbSimulator(switches=Switches(processing_delay=0.3))
    for n in range(GOODS):
        sim.add_good(f"SKU-{n:02d}", price=1000)
    sim.start()
    yield sim
    sim.stop()


@pytest.mark.parametrize("how", ["max-seconds", "stop"])
def test_a_429_that_says_wait_a_minute_never_holds_the_workers_stop(
    db_url: str, engine: Engine, wb: WbSimulator, how: str
) -> None:
    settings = fast_settings(
        db_url, None, target="wildberries", wb_api_url=wb.url, wb_token=wb.token(), batch_size="5"
    )
    stage(engine, [price_row(f"SKU-{n:02d}", 1, "900.00") for n in range(GOODS)])
    worker = bootstrap.worker(settings, engine, rng=random.Random(5))
    # research §2.3: 100 requests spent by another program, 10 per 6 s back: 429 for a minute.
    wb.spent_elsewhere(100)
    ended: dict[str, Any] = {}

    async def run(w: Worker) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        if how == "stop":  # as SIGTERM does (runner._install_signals)
            loop.call_later(MAX_SECONDS, w.request_stop)
        code = await asyncio.wait_for(
            run_until_idle(
                w, max_seconds=MAX_SECONDS if how == "max-seconds" else None, poll_interval=0.05
            ),
            120,
        )
        ended.update(code=code, seconds=loop.time() - started)

    run_worker(worker, run)
    assert (EXIT_TIMED_OUT if how == "max-seconds" else EXIT_OK) == ended["code"]
    assert ended["seconds"] < MAX_SECONDS + LONGEST_WAIT + 3, ended
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, messages.c.state, messages.c.attempts)
        ).all()
    assert GOODS == len(rows), "nothing lost"
    assert all(r.state == "delayed" for r in rows), rows  # nothing applied, nothing ended
    held = [r for r in rows if r.attempts == 0]
    # Only the goods of the request WB answered 429 are charged; the rest wait uncharged.
    assert len(held) >= GOODS - 5, rows
