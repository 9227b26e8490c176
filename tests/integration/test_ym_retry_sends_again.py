"""Review ym400b finding 2 (runbook: "Retry (``retry``) sends the message once more"): a
Yandex Market price refused by a 400 that named nothing after earlier 400s (research §3.4,
§8: it may have been taken, so it is read back) ends quarantined ``http-400`` once its
read-back does not show it within ``ym_apply_timeout``. A person's retry then sent nothing:
the delivery's ``ym-accepted:`` receipt survived the quarantine and the retried delivery was
read back again and quarantined at once, "30 s later either". A worker against the
simulator, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from marketsims import ym_settings
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.dev.simclock import SimClock
from exchange.dev.testing import one_channel_messages, price_row, run_worker, stage
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.domain.clock import FakeClock
from exchange.ops import quarantine
from exchange.worker import Worker

messages = one_channel_messages()
WAITING = ("new", "delayed", "in_progress")


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    simulator = YmSimulator(
        "ym-key-1234",
        1001,
        clock=SimClock(60),
        switches=YmSwitches(
            apply_delay=1, atomic_400=True, errors_named="none", unknown_offer="reject"
        ),
    )
    simulator.catalogue = {"SKU-1", "SKU-2"}  # SKU-3 is not in the cabinet yet
    simulator.start()
    yield simulator
    simulator.stop()


def states(engine: Engine) -> dict[str, tuple[str, str | None, str]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, messages.c.state, messages.c.reason, messages.c.message_id)
        )
        return {a: (s, r, i) for a, s, r, i in rows}


async def settle(worker: Worker, engine: Engine, seconds: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    ends = loop.time() + seconds
    while loop.time() < ends:
        await worker.cycle()
        if not any(s in WAITING for s, _, _ in states(engine).values()):
            return
        await asyncio.sleep(0.05)


def test_a_persons_retry_of_a_price_quarantined_after_its_read_back_sends_it_again(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """Promise: ``exchange quarantine retry`` sends the message once more: the retried price
    goes to Yandex in an update (never only read back) and, the offer now in the cabinet, is
    delivered and shown."""
    settings = ym_settings(
        db_url, ym, tmp_path, ym_price_types={"retail": "value"}, ym_apply_timeout="1"
    )
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        stage(engine, [price_row(f"SKU-{n}", 1, "1000.00") for n in (1, 2, 3)])
        await settle(w, engine)
        seen["first"] = states(engine)
        ym.catalogue = {"SKU-1", "SKU-2", "SKU-3"}  # the seller added the offer
        seen["updates"] = ym.requests["offer-prices/updates"]
        with transaction(engine) as connection:
            quarantine.retry(
                connection,
                [states(engine)["SKU-3"][2]],
                quarantine.Filters(),
                operator="ivanova",
                note="the offer is in the cabinet now",
                now=FakeClock().now(),
                dry_run=False,
            )
        await settle(w, engine)

    run_worker(worker, scenario)
    first = seen["first"]
    assert isinstance(first, dict)
    assert "quarantined" == first["SKU-3"][0], first
    assert ym.requests["offer-prices/updates"] > seen["updates"], "the retry sent an update"
    assert ("delivered", None) == states(engine)["SKU-3"][:2]
    live = ym.live("SKU-3")
    assert live is not None and live.value == 1000
