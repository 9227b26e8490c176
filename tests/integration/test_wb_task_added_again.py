"""Wildberries: a task uploaded on a channel dropped since, still pending at WB, holds its good
on the channel added again under its name (review ozon 35's shape on Wildberries; WB keeps one
task per nmID in flight, research §2.4, §2.5: two tasks of one nmID have no documented order).

Already so before review ozon 35: the task rows (``wb_tasks``, exchange/db/wb_store.py) are
the channel's by its name, not by the registry's id, so the channel added again reads the
dropped one's row and polls that task before it uploads 1C's newer price. Judged from the
simulator's state: no second upload while the first is pending, WB ending on the newer price.
SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from added_again import drop_and_add_again
from marketsims import wb_channel, wb_sim
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import deliveries, messages
from exchange.dev.testing import FAST, price_row, run_worker, stage
from exchange.dev.wbsim import WbSimulator
from exchange.domain.clock import SystemClock
from exchange.settings import Settings, load_settings
from exchange.worker import Worker

UPLOAD = "/api/v2/upload/task"
PROCESSING = 3.0  # seconds from an upload to WB processing its task


@pytest.fixture
def wb() -> Iterator[WbSimulator]:
    with wb_sim([("SKU-1", 1000)], processing_delay=PROCESSING) as sim:
        yield sim


def _settings(db_url: str, wb: WbSimulator, tmp: Path) -> Settings:
    fast = {k: v for k, v in FAST.items() if k not in ("channels", "site_token_file")}
    return load_settings(
        database_url=db_url,
        worker_id="test-worker",
        **{**fast, "max_attempts": 20},
        channels={"wildberries": wb_channel(wb, tmp, {"retail": "price"})},
    )


def _state(engine: Engine, channel_id: int, version: int) -> str | None:
    with transaction(engine, read_only=True) as connection:
        return connection.execute(
            select(deliveries.c.state)
            .join(messages, deliveries.c.message_pk == messages.c.id)
            .where(
                deliveries.c.channel_id == channel_id,
                messages.c.aggregate == "SKU-1",
                messages.c.version == version,
            )
        ).scalar_one_or_none()


def _until(done: Callable[[], bool], seconds: float) -> Callable[[Worker], object]:
    async def scenario(w: Worker) -> None:
        ends = time.monotonic() + seconds
        while time.monotonic() < ends and not done():
            await w.cycle()
            await asyncio.sleep(0.05)

    return scenario


def test_a_pending_task_of_a_dropped_channel_holds_the_good_on_the_readded_channel(
    db_url: str, engine: Engine, wb: WbSimulator, tmp_path: Path
) -> None:
    settings = _settings(db_url, wb, tmp_path)
    bootstrap.register_channels(settings, engine)
    good = wb.by_vendor_code("SKU-1")
    assert good is not None
    stage(engine, [price_row("SKU-1", 1, "1100.00")])
    run_worker(
        bootstrap.worker(settings, engine, rng=random.Random(1)),
        _until(lambda: wb.requests[UPLOAD] == 1, 10),
    )
    started = time.monotonic()
    assert wb.goods[good.nm_id].price == 1000, "the task of 1100 is pending"
    again = drop_and_add_again(settings, engine, "wildberries", SystemClock().now())
    stage(engine, [price_row("SKU-1", 2, "1200.00")])
    uploads_while_pending: list[int] = []

    def done() -> bool:
        if time.monotonic() - started < PROCESSING - 0.5:
            uploads_while_pending.append(wb.requests[UPLOAD])
        return _state(engine, again, 2) == "delivered"

    run_worker(bootstrap.worker(settings, engine, rng=random.Random(2)), _until(done, 30))

    assert uploads_while_pending and max(uploads_while_pending) == 1, "one task an nmID"
    assert _state(engine, again, 2) == "delivered"
    assert wb.goods[good.nm_id].price == 1200
