"""Review ym400b finding 1, a worker against the simulator on SQLite and PostgreSQL: a 400
that names no offer ("Internal validation failed", research §3.4; the simulator's
``errors_named=none``) refused a value of 950 with a discountBase of 1000 (exactly 5 %, which
Yandex's ``exclusive`` bounds refuse, §3.1). The bisection came down to that offer and both
prices ended quarantined ``http-400``, Yandex showing no price for it. docs/marketplaces.md:
"a rule of two price types quarantines only the one that broke it"; contract 14: right under
both settings of every unconfirmed point."""

from __future__ import annotations

import asyncio
import json
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
from exchange.worker import Worker

messages = one_channel_messages()
WAITING = ("new", "delayed", "in_progress")


@pytest.fixture(params=["none", "first"])
def ym(request: pytest.FixtureRequest) -> Iterator[YmSimulator]:
    simulator = YmSimulator(
        "ym-key-1234",
        1001,
        clock=SimClock(60),
        switches=YmSwitches(
            apply_delay=2,
            atomic_400=True,
            errors_named=request.param,
            discount_bounds="exclusive",
        ),
    )
    simulator.start()
    yield simulator
    simulator.stop()


def row(sku: str, price_type: str, amount: str) -> dict[str, object]:
    payload = {"sku": sku, "price": amount, "currency": "RUB", "price_type": price_type}
    return {
        **price_row(sku, 1, amount, aggregate=f"{sku}/{price_type}"),
        "payload": json.dumps(payload),
    }


def states(engine: Engine) -> dict[str, tuple[str, str | None]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(select(messages.c.aggregate, messages.c.state, messages.c.reason))
        return {a: (s, r) for a, s, r in rows}


async def settle(worker: Worker, engine: Engine, seconds: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    ends = loop.time() + seconds
    while loop.time() < ends:
        await worker.cycle()
        if not any(s in WAITING for s, _ in states(engine).values()):
            return
        await asyncio.sleep(0.05)


def test_a_value_refused_only_beside_its_discount_is_delivered_and_the_discount_quarantined(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    settings = ym_settings(
        db_url,
        ym,
        tmp_path,
        ym_price_types={"retail": "value", "old": "discountBase"},
        ym_apply_timeout="2",
    )
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))
    good = [row(f"SKU-{n}", "retail", "1000.00") for n in range(7)]

    async def scenario(w: Worker) -> None:
        stage(engine, [*good[:3], row("BX", "retail", "950.00"), row("BX", "old", "1000.00")])
        stage(engine, good[3:])
        await settle(w, engine)

    run_worker(worker, scenario)
    found = states(engine)
    assert ("quarantined", "channel-rule") == found["BX/old"], found
    assert ("delivered", None) == found["BX/retail"], found
    assert all(found[f"SKU-{n}/retail"] == ("delivered", None) for n in range(7)), found
    live = ym.live("BX")
    assert live is not None and (live.value, live.discount_base) == (950, None)
