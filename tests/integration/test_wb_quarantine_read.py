"""A price Wildberries already holds ("already set": the upload's own answer is known) is
settled only once WB's price quarantine is read (target.py ``_behind_quarantine``). When that
auxiliary read answers once with a body it cannot read (an empty 200 without
``quarantineGoods``), the read is made again later, the attempt not charged, as a failed
read-back is elsewhere (a WB task poll, Yandex Market's ``offer-prices`` and quarantine
reads), and the price is delivered once the list is read; never ``unknown-response`` after one
bad auxiliary answer. A list that stays unreadable ends the delivery after the bounded reads,
in Russian words on the workbench. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import history
from exchange.dev.testing import fast_settings, one_channel_messages, price_row, run_worker, stage
from exchange.dev.wbsim import Limits, Switches, WbSimulator
from exchange.runner import run_until_idle
from exchange.targets.wildberries.target import QUARANTINE_READS, WildberriesTarget
from exchange.words import error_words
from exchange.worker import Worker

QUARANTINE = "/api/v2/quarantine/goods"
messages = one_channel_messages()


@pytest.fixture
def wb() -> Iterator[WbSimulator]:
    sim = WbSimulator(switches=Switches(processing_delay=0.3))
    sim.limits = Limits(period=1.0, requests=1000, burst=100)
    sim.add_good("SKU-01", price=1000)
    sim.start()
    yield sim
    sim.stop()


def deliver(db_url: str, engine: Engine, wb: WbSimulator) -> tuple[Any, list[str]]:
    """The price WB holds already staged and delivered by a worker: its delivery's row and the
    events of its history."""
    settings = fast_settings(
        db_url, None, target="wildberries", wb_api_url=wb.url, wb_token=wb.token()
    )
    stage(engine, [price_row("SKU-01", 1, "1000.00")])  # the price WB holds already
    worker = bootstrap.worker(settings, engine, rng=random.Random(5))
    target = worker.loop.target
    assert isinstance(target, WildberriesTarget)
    target.quarantine_wait = 1.0  # a look every second, not every five minutes

    async def run(w: Worker) -> None:
        await asyncio.wait_for(run_until_idle(w, max_seconds=40, poll_interval=0.05), 60)

    run_worker(worker, run)
    with transaction(engine, read_only=True) as connection:
        row = connection.execute(
            select(messages.c.state, messages.c.reason, messages.c.attempts, messages.c.last_error)
        ).one()
        said = list(connection.execute(select(history.c.event).order_by(history.c.id)).scalars())
    return row, said


def test_a_quarantine_list_unreadable_once_is_read_again_and_the_price_delivered(
    db_url: str, engine: Engine, wb: WbSimulator
) -> None:
    wb.faults.quarantine_unreadable_next = 1

    row, said = deliver(db_url, engine, wb)

    assert ("delivered", None) == (row.state, row.reason), row
    assert 0 == wb.faults.quarantine_unreadable_next
    assert 2 == wb.requests[QUARANTINE], "read again after the bad answer"
    assert 1 == said.count("awaiting-outcome"), said  # the failed read: waited, uncharged


def test_a_quarantine_list_that_stays_unreadable_ends_unknown_response_after_bounded_reads(
    db_url: str, engine: Engine, wb: WbSimulator
) -> None:
    wb.faults.quarantine_unreadable = True

    row, said = deliver(db_url, engine, wb)

    assert ("quarantined", "unknown-response") == (row.state, row.reason), row
    assert QUARANTINE_READS == wb.requests[QUARANTINE]
    # Each failed read waited, uncharged; the same wait in the same words is written once
    # (review rev36a: no history row per look).
    assert 1 == said.count("awaiting-outcome"), said
    assert f"could not be read {QUARANTINE_READS} times" in row.last_error, row
    ru = error_words(row.last_error, "ru")
    assert "не удалось прочитать ни в одной из 6 попыток" in ru, ru
