"""Review ym400 finding 4 (contract 13; docs: a price is withheld only while the channel's
quarantine lists that price): Yandex Market withholds 1C's 300 and then, in its place, 1C's 310
(both far below the last valid 1000, research §3.4 PRICE_CHANGE); its quarantine lists 310
only. The 300 is no longer withheld: it ends ``superseded`` (cancelled), never counted among
the withheld prices a person is asked to release. A worker against the simulator on SQLite
and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from marketsims import ym_settings
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.dev.simclock import SimClock
from exchange.dev.testing import one_channel_messages, price_row, run_worker, stage
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.worker import Worker

messages = one_channel_messages()
WAITING = ("new", "delayed", "in_progress")


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    # A minute lasts a second: Yandex applies an accepted price half a real second later.
    simulator = YmSimulator(
        "ym-key-1234", 1001, clock=SimClock(60), switches=YmSwitches(apply_delay=30)
    )
    simulator.start()
    yield simulator
    simulator.stop()


def row(sku: str, version: int, amount: str) -> dict[str, object]:
    payload = {"sku": sku, "price": amount, "currency": "RUB", "price_type": "retail"}
    return {**price_row(sku, version, amount, aggregate=sku), "payload": json.dumps(payload)}


def states(engine: Engine) -> dict[tuple[str, int], tuple[str, str | None]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, messages.c.version, messages.c.state, messages.c.reason)
        )
        return {(a, v): (s, r) for a, v, s, r in rows}


async def until_settled(worker: Worker, engine: Engine, seconds: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    ends = loop.time() + seconds
    while loop.time() < ends:
        await worker.cycle()
        if not any(s in WAITING for s, _ in states(engine).values()):
            return
        await asyncio.sleep(0.05)


def test_a_withheld_price_ends_superseded_when_a_newer_one_is_withheld_in_its_place(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    ym.set_live("B7", Decimal("1000"))
    settings = ym_settings(db_url, ym, tmp_path, ym_apply_timeout="1.5")
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))

    async def scenario(w: Worker) -> None:
        stage(engine, [row("B7", 3, "300")])
        await until_settled(w, engine)
        assert ("withheld", None) == states(engine)[("B7", 3)]
        stage(engine, [row("B7", 4, "310")])
        await until_settled(w, engine)

    run_worker(worker, scenario)
    (listed,) = ym.quarantined().values()
    assert Decimal("310") == listed.current.value, "Yandex lists the newer price only"
    found = states(engine)
    assert ("withheld", None) == found[("B7", 4)]
    assert ("cancelled", "superseded") == found[("B7", 3)], found
