"""Ozon: the price an item carries beside a new one is the newest Ozon may hold (review ozon 33).

Research §1.1: an item sets every price field it names, so a field carried beside a new one is
written again; §1.4: one result per item in a 200. A send whose answer never came (the request
applied, then the answer too late or the connection cut: the simulator's faults) or whose 200
left the item out may have landed: the next item
of the SKU carries that version, never the one delivered before it (which would put an older
price back over the one Ozon holds)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from marketsims import ozon_sim
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import deliveries, messages
from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.testing import drain, fast_settings, price_row, run_worker, stage
from exchange.domain.clock import FakeClock
from exchange.targets.ozon.target import LOST_HOLD
from exchange.worker import Worker


@pytest.fixture
def site() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


def _worker(
    db_url: str, engine: Engine, site: OzonSimulator, clock: FakeClock, tmp: Path
) -> Worker:
    key = tmp / "ozon.key"
    key.write_text("ozon-key", encoding="utf-8")
    settings = fast_settings(
        db_url,
        None,
        target="ozon",
        ozon_api_url=site.url,
        ozon_client_id="836741",
        ozon_api_key_file=str(key),
        ozon_price_types={"retail": "price", "old": "old_price"},
        max_attempts=2,
        http_timeout=0.3,
    )
    return bootstrap.worker(settings, engine, clock=clock, rng=random.Random(3))


def _typed(sku: str, version: int, price: str, price_type: str) -> dict[str, Any]:
    row = price_row(sku, version, price)
    if price_type != "retail":
        row["aggregate"] = f"{sku}/{price_type}"
        row["payload"] = row["payload"].replace('"retail"', f'"{price_type}"')
    return row


def _state(engine: Engine, aggregate: str, version: int) -> tuple[str, str | None]:
    with transaction(engine, read_only=True) as connection:
        state, reason = connection.execute(
            select(deliveries.c.state, deliveries.c.reason)
            .join(messages, deliveries.c.message_pk == messages.c.id)
            .where(messages.c.aggregate == aggregate, messages.c.version == version)
        ).one()
    return state, reason


def _pairs(site: OzonSimulator) -> list[tuple[Any, Any]]:
    return [(u.get("price"), u.get("old_price")) for u in site.updates("SKU-1")]


async def _cycles(worker: Worker, clock: FakeClock, count: int = 6) -> None:
    for _ in range(count):
        await worker.cycle()
        clock.advance(1)


def test_a_price_quarantined_after_its_answers_never_came_is_carried_beside_the_next_old_price(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Review ozon 33 (s14): 1000/1500 delivered; the price 900 reaches Ozon twice but both
    answers come too late, so it ends quarantined (retry-limit, result unknown) while Ozon holds
    900. 1C then changes only the old price to 1400: the item carries 900, the newest price
    Ozon may hold, and Ozon never goes back to 1000. (Between the two sends, Ozon's own
    pricing moved the price, research §1.6.5, so that the read after the first lost answer
    never showed 900, and it went again once that wait was over: ``LOST_HOLD``.)"""
    clock = FakeClock()
    worker = _worker(db_url, engine, site, clock, tmp_path)

    async def scenario(w: Worker) -> None:
        stage(
            engine, [_typed("SKU-1", 1, "1000.00", "retail"), _typed("SKU-1", 1, "1500.00", "old")]
        )
        await drain(w)
        site.faults.slow_after = 0.6  # Ozon applies each request, the answer comes too late
        stage(engine, [_typed("SKU-1", 2, "900.00", "retail")])
        await _cycles(w, clock, 1)
        site.promote("SKU-1", Decimal("950"))
        await _cycles(w, clock, 2)
        clock.advance(LOST_HOLD)
        await _cycles(w, clock)
        assert _state(engine, "SKU-1", 2) == ("quarantined", "retry-limit")
        site.faults.slow_after = 0.0
        stage(engine, [_typed("SKU-1", 2, "1400.00", "old")])
        await drain(w)

    run_worker(worker, scenario)

    assert _state(engine, "SKU-1/old", 2) == ("delivered", None)
    assert _pairs(site)[-1] == (900, 1400), _pairs(site)
    assert (1000, 1400) not in _pairs(site), "an older price never goes back over a newer one"


def test_an_old_price_left_out_of_ozons_200_is_carried_beside_the_next_price(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Review ozon 33 (s13): 1000/1200 delivered; the old price 1800 is taken by Ozon but its
    200 gives no result for the item (quarantined unknown-response). 1C then changes the price
    to 1100: the item carries 1800 (Ozon may hold it), never the 1200 delivered before."""
    clock = FakeClock()
    worker = _worker(db_url, engine, site, clock, tmp_path)

    async def scenario(w: Worker) -> None:
        stage(
            engine, [_typed("SKU-1", 1, "1000.00", "retail"), _typed("SKU-1", 1, "1200.00", "old")]
        )
        await drain(w)
        site.faults.unanswered = {"SKU-1"}
        stage(engine, [_typed("SKU-1", 2, "1800.00", "old")])
        await _cycles(w, clock)
        assert _state(engine, "SKU-1/old", 2) == ("quarantined", "unknown-response")
        site.faults.unanswered = set()
        stage(engine, [_typed("SKU-1", 2, "1100.00", "retail")])
        await drain(w)

    run_worker(worker, scenario)

    assert _pairs(site)[-1] == (1100, 1800), _pairs(site)
    assert (1100, 1200) not in _pairs(site)


@pytest.mark.parametrize("fault", ["slow", "cut"])
def test_an_old_price_claimed_while_a_price_in_doubt_waits_for_its_retry_carries_that_price(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path, fault: str
) -> None:
    """Review ozon 33 (s18): the price 900's answer comes too late once (it waits for its
    retry, charged) or its connection is cut (back to new, not charged: "no answer"), in doubt
    either way while Ozon holds 900, when 1C's old price 1400 is claimed: the item carries 900,
    never the 1000 delivered before it."""
    clock = FakeClock()
    worker = _worker(db_url, engine, site, clock, tmp_path)

    async def scenario(w: Worker) -> None:
        stage(
            engine, [_typed("SKU-1", 1, "1000.00", "retail"), _typed("SKU-1", 1, "1500.00", "old")]
        )
        await drain(w)
        if fault == "slow":
            site.faults.slow_after = 0.6
        else:
            site.faults.drop_after = True
        stage(engine, [_typed("SKU-1", 2, "900.00", "retail")])
        await w.cycle()
        site.faults.slow_after, site.faults.drop_after = 0.0, False
        assert site.price("SKU-1") == 900, "Ozon took it"
        assert _state(engine, "SKU-1", 2)[0] == ("delayed" if fault == "slow" else "new")
        stage(engine, [_typed("SKU-1", 2, "1400.00", "old")])
        await _cycles(w, clock, 10)

    run_worker(worker, scenario)

    assert _state(engine, "SKU-1/old", 2) == ("delivered", None)
    assert (1000, 1400) not in _pairs(site), _pairs(site)
    assert _pairs(site)[-1] == (900, 1400)
