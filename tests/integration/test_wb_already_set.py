"""Prices equal to the ones Wildberries holds already (after ``channels seed``, or 1C sending
its prices again) end delivered, whether WB counts a 4xx as one request or as ten (research
§2.3, UNCONFIRMED: the simulator's ``four_xx_weight``), and whether it refuses a mix of changed
and unchanged goods whole (§2.5, §8: ``unchanged_in_mixed``). Review 32n finding 1: counted as
ten, the upload's 400 "already set" left the account's bucket in debt, the read-back after it
met a 429, the batch went back uncharged and was uploaded again, refused again at ten
requests, for ever (33 releases in a minute, nothing delivered). Now the delivery keeps WB's
"already set" in its receipt and the next attempt reads the price back first (a request each),
uploading only a good WB holds another price for. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.dev.testing import fast_settings, one_channel_messages, price_row, run_worker, stage
from exchange.dev.wbsim import Switches, WbSimulator
from exchange.runner import EXIT_OK, run_until_idle
from exchange.worker import Worker

messages = one_channel_messages()


@pytest.fixture
def wb() -> Iterator[WbSimulator]:
    sim = WbSimulator(switches=Switches(processing_delay=0.3))
    for n in range(1, 21):
        sim.add_good(f"SKU-{n:04d}", price=1000)
    sim.start()
    yield sim
    sim.stop()


@pytest.mark.parametrize("unchanged_in_mixed", ["skip", "whole-400"])
@pytest.mark.parametrize("four_xx_weight", [1, 10], ids=["4xx-once", "4xx-ten-times"])
def test_prices_wb_holds_already_end_delivered_beside_real_changes(
    db_url: str, engine: Engine, wb: WbSimulator, four_xx_weight: int, unchanged_in_mixed: str
) -> None:
    wb.switches.four_xx_weight = four_xx_weight
    wb.switches.unchanged_in_mixed = unchanged_in_mixed  # type: ignore[assignment]
    settings = fast_settings(
        db_url, None, target="wildberries", wb_api_url=wb.url, wb_token=wb.token()
    )
    # Three prices WB holds already: one batch, one upload refused "already set".
    stage(engine, [price_row(f"SKU-{n:04d}", 1, "1000.00") for n in (1, 2, 3)])
    worker = bootstrap.worker(settings, engine, rng=random.Random(5))
    ended: dict[str, int] = {}

    async def run(w: Worker) -> None:
        ended["code"] = await asyncio.wait_for(
            run_until_idle(w, max_seconds=30, poll_interval=0.05), 120
        )

    run_worker(worker, run)
    assert EXIT_OK == ended["code"], wb.requests
    # Then a real change beside two unchanged prices.
    stage(
        engine,
        [price_row("SKU-0004", 1, "900.00")]
        + [price_row(f"SKU-{n:04d}", 1, "1000.00") for n in (5, 6)],
    )
    worker = bootstrap.worker(settings, engine, rng=random.Random(6))
    run_worker(worker, run)

    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, messages.c.state, messages.c.last_error)
        ).all()
    assert EXIT_OK == ended["code"], (rows, wb.requests)
    assert {(f"SKU-{n:04d}", "delivered") for n in range(1, 7)} == {r[:2] for r in rows}, rows
    good = wb.by_vendor_code("SKU-0004")
    assert good is not None and 900 == good.price
    # Never uploaded over and over: each batch at most its upload, the changed goods' again.
    assert wb.requests["/api/v2/upload/task"] <= 4, wb.requests
