"""EXCHANGE_TARGET=woocommerce end to end (contract 10): staging -> the real worker -> the
WooCommerce simulator over HTTP, on SQLite and PostgreSQL.

Nothing lost, nothing quarantined that a retry would deliver, no stale price over a newer one;
the SKU ids kept in the database, and looked up again when the shop says one is gone.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import history, shop_sku_ids
from exchange.dev.testing import (
    drain,
    fast_settings,
    one_channel_messages,
    price_row,
    run_worker,
    stage,
)
from exchange.dev.woosim import WooSimulator
from exchange.errors import ConfigurationError
from exchange.queue import control
from exchange.runner import EXIT_TIMED_OUT, run_until_idle
from exchange.settings import load_settings
from exchange.worker import Worker

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()


@pytest.fixture
def shop() -> Iterator[WooSimulator]:
    simulator = WooSimulator(key="ck_k", secret="cs_s")
    simulator.start()
    yield simulator
    simulator.stop()


def woo_settings(db_url: str, shop: WooSimulator, **overrides: Any) -> Any:
    return fast_settings(
        db_url,
        None,
        target="woocommerce",
        woo_url=shop.url,
        woo_key="ck_k",
        woo_secret="cs_s",
        woo_price_fields={"retail": "regular_price", "sale": "sale_price"},
        **overrides,
    )


def make_worker(db_url: str, engine: Engine, shop: WooSimulator, **overrides: Any) -> Worker:
    return bootstrap.worker(woo_settings(db_url, shop, **overrides), engine, rng=random.Random(3))


def states(engine: Engine) -> dict[tuple[str, int], tuple[str, str | None]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(
                messages.c.aggregate,
                messages.c.version,
                messages.c.state,
                messages.c.reason,
            )
        )
        return {(a, v): (s, r) for a, v, s, r in rows}


def sku_rows(engine: Engine) -> dict[str, int]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(select(shop_sku_ids.c.sku, shop_sku_ids.c.product_id))
        return {sku: int(ident) for sku, ident in rows}


def sale_row(sku: str, version: int, price: str) -> dict[str, Any]:
    row = price_row(sku, version, price)
    row["payload"] = row["payload"].replace('"retail"', '"sale"')
    return row


def test_prices_products_and_variations_delivered_and_ids_kept(
    db_url: str, engine: Engine, shop: WooSimulator
) -> None:
    stage(engine, [price_row("SKU-1", 1, "10.50"), price_row("VAR-1", 1, "7.25")])
    run_worker(make_worker(db_url, engine, shop))

    assert ("10.50", "7.25") == (shop.price("SKU-1"), shop.price("VAR-1"))
    assert {"SKU-1", "VAR-1"} == set(sku_rows(engine))
    lookups = shop.requests["GET products"]

    stage(engine, [price_row("SKU-1", 2, "11.00"), price_row("VAR-1", 2, "8.00")])
    run_worker(make_worker(db_url, engine, shop))

    assert ("11.00", "8.00") == (shop.price("SKU-1"), shop.price("VAR-1"))
    assert lookups == shop.requests["GET products"], "ids come from the database, not again"
    assert 2 == shop.requests["POST products/<id>/variations/batch"]


def test_unknown_sku_and_unmapped_price_type_are_quarantined_with_their_reasons(
    db_url: str, engine: Engine, shop: WooSimulator
) -> None:
    row = price_row("SKU-W", 1, "5.00")
    row["payload"] = row["payload"].replace('"retail"', '"wholesale"')
    stage(engine, [price_row("NOSUCH-1", 1), row, sale_row("SKU-S", 1, "4.00")])

    run_worker(make_worker(db_url, engine, shop))

    assert {
        ("NOSUCH-1", 1): ("quarantined", "unknown-sku"),
        ("SKU-W", 1): ("quarantined", "unmapped-price-type"),
        ("SKU-S", 1): ("delivered", None),
    } == states(engine)
    assert shop.price("SKU-W") is None, "never looked up, never written"


def test_an_id_the_shop_says_is_gone_is_looked_up_again_and_delivered(
    db_url: str, engine: Engine, shop: WooSimulator
) -> None:
    stage(engine, [price_row("SKU-1", 1, "1.00")])
    run_worker(make_worker(db_url, engine, shop))
    old = sku_rows(engine)["SKU-1"]
    shop.delete("SKU-1")
    shop.add("SKU-1")  # made again under a new id

    stage(engine, [price_row("SKU-1", 2, "2.00")])
    run_worker(make_worker(db_url, engine, shop))

    assert ("delivered", None) == states(engine)[("SKU-1", 2)]
    assert "2.00" == shop.price("SKU-1")
    assert old != sku_rows(engine)["SKU-1"]
    with transaction(engine, read_only=True) as connection:
        attempts = connection.execute(
            select(messages.c.attempts).where(messages.c.version == 2)
        ).scalar_one()
    assert 1 == attempts, "looked up and written again in the same attempt"


def test_a_batch_half_applied_then_cut_off_ends_with_every_price_delivered(
    db_url: str, engine: Engine, shop: WooSimulator
) -> None:
    shop.faults.half_apply = True
    stage(engine, [price_row(f"SKU-{n}", 1, f"{n}.00") for n in range(6)])
    # Each attempt that is cut off still applied half of what remained: a cycle may retry
    # at once, so the attempts allowed exceed the halvings.
    worker = make_worker(db_url, engine, shop, max_attempts=10)

    async def scenario(worker: Worker) -> None:
        await worker.cycle()  # the batch is half applied and the answer lost
        shop.faults.half_apply = False
        await drain(worker)

    run_worker(worker, scenario)

    assert {(f"SKU-{n}", 1): ("delivered", None) for n in range(6)} == states(engine)
    assert [f"{n}.00" for n in range(6)] == [shop.price(f"SKU-{n}") for n in range(6)]


def test_a_lost_answer_after_the_write_is_read_back_and_delivered_without_a_resend(
    db_url: str, engine: Engine, shop: WooSimulator
) -> None:
    shop.faults.drop_after = True
    stage(engine, [price_row("SKU-1", 1, "3.00")])

    run_worker(make_worker(db_url, engine, shop))

    assert ("delivered", None) == states(engine)[("SKU-1", 1)]
    assert 1 == shop.requests["POST products/batch"], "read back, not sent again"
    assert ["3.00"] == shop.history("SKU-1")


def test_a_newer_price_is_never_overwritten_by_an_older_one(
    db_url: str, engine: Engine, shop: WooSimulator
) -> None:
    shop.faults.poison.add("SKU-1")
    stage(engine, [price_row("SKU-1", 1, "1.00")])
    worker = make_worker(db_url, engine, shop)

    async def scenario(worker: Worker) -> None:
        await worker.cycle()  # v1 fails for now
        shop.faults.poison.clear()
        stage(engine, [price_row("SKU-1", 2, "2.00")])
        await drain(worker)

    run_worker(worker, scenario)

    assert "2.00" == shop.price("SKU-1")
    assert "1.00" not in shop.history("SKU-1")[-1:]


def test_rate_limited_shop_is_waited_for_and_every_price_delivered(
    db_url: str, engine: Engine, shop: WooSimulator
) -> None:
    shop.faults.rate_limit = 4
    stage(engine, [price_row(f"SKU-{n}", 1, f"{n}.00") for n in range(250)])
    worker = make_worker(db_url, engine, shop, retry_max_delay=0.05, max_attempts=50)

    run_worker(worker, lambda w: drain(w, cycles=5000))

    assert {"delivered"} == {s for s, _ in states(engine).values()}
    assert 250 == sum(1 for n in range(250) if shop.price(f"SKU-{n}") == f"{n}.00")


def test_refused_key_pauses_and_quarantines_nothing(
    db_url: str, engine: Engine, shop: WooSimulator
) -> None:
    shop.faults.refuse_key = True
    stage(engine, [price_row("SKU-1", 1)])
    worker = make_worker(db_url, engine, shop)

    async def scenario(worker: Worker) -> None:
        await worker.cycle()

    run_worker(worker, scenario)

    assert states(engine)[("SKU-1", 1)][0] in {"new", "delayed"}


def test_other_kinds_are_refused_at_start_and_plain_http_off_loopback_too() -> None:
    with pytest.raises((ConfigurationError, ValueError)) as refused:
        load_settings(
            target="woocommerce",
            kinds={"price": "latest-wins", "financial_posting": "strict"},
        )
    assert "price messages only" in str(refused.value)
    with pytest.raises((ConfigurationError, ValueError)) as plain:
        load_settings(target="woocommerce", woo_url="http://shop.example.com")
    assert "unencrypted" in str(plain.value)
    defaults = load_settings(target="woocommerce")
    assert ["price"] == list(defaults.kinds)


def test_a_read_only_key_pauses_once_and_the_run_ends_by_its_max_seconds(
    db_url: str, engine: Engine, shop: WooSimulator, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 22 item 4: a key that may read but not write. The health check (a GET) succeeds,
    which proves nothing about writing: delivery pauses once, said once; while paused the worker
    tries one real write every EXCHANGE_RETRY_MAX_DELAY (never a GET), and --max-seconds ends
    the run."""
    shop.faults.read_only_key = True
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(5)])
    worker = make_worker(db_url, engine, shop, retry_max_delay=0.5)
    codes: list[int] = []

    async def scenario(worker: Worker) -> None:
        # 6 s: the pause, its health GET and the first write turn take about 0.1 s at idle; 2.5 s
        # was too short at a load of 10 (the run ended before the health check said "read but
        # not write"). The write turns stay countable: one per 0.5 s, 13 at most, not hundreds.
        codes.append(await run_until_idle(worker, max_seconds=6.0, poll_interval=0.01))

    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="exchange.worker"):
        run_worker(worker, scenario)

    assert [EXIT_TIMED_OUT] == codes and time.monotonic() - started < 12.0
    assert worker.paused_reason is not None
    assert "the key may read but not write" in worker.paused_reason
    paused = [r for r in caplog.records if "delivery paused" in r.getMessage()]
    assert 1 == len(paused), [r.getMessage() for r in paused]
    assert not [r for r in caplog.records if "delivery resumed" in r.getMessage()]
    # the first refused write, then one write about every 0.5 s: up to 13 in 6 s, not hundreds
    assert 2 <= shop.requests["POST products/batch"] <= 14, shop.requests
    assert {"new", "delayed"} >= {s for s, _ in states(engine).values()}


def test_a_write_pause_ends_when_a_write_succeeds_or_on_resume(
    db_url: str, engine: Engine, shop: WooSimulator
) -> None:
    shop.faults.read_only_key = True
    stage(engine, [price_row("SKU-1", 1, "5.00"), price_row("SKU-2", 1, "6.00")])
    worker = make_worker(db_url, engine, shop, retry_max_delay=0.3)

    async def scenario(worker: Worker) -> None:
        await worker.cycle()
        await worker.cycle()
        assert worker.paused_reason is not None
        shop.faults.read_only_key = False  # the owner gives the key Read/Write
        await asyncio.sleep(0.35)
        await drain(worker)

    run_worker(worker, scenario)
    assert ("5.00", "6.00") == (shop.price("SKU-1"), shop.price("SKU-2"))
    assert worker.paused_reason is None

    shop.faults.read_only_key = True
    stage(engine, [price_row("SKU-1", 2, "7.00")])
    worker = make_worker(db_url, engine, shop, retry_max_delay=600.0)

    async def resumed(worker: Worker) -> None:
        await worker.cycle()
        await worker.cycle()
        assert worker.paused_reason is not None
        shop.faults.read_only_key = False
        await worker.cycle()
        assert "5.00" == shop.price("SKU-1"), "no write before EXCHANGE_RETRY_MAX_DELAY"
        with transaction(engine) as connection:
            control.resume(connection)  # `exchange resume`
        await drain(worker)

    run_worker(worker, resumed)
    assert "7.00" == shop.price("SKU-1")


def test_a_product_in_the_trash_takes_the_price_is_delivered_and_its_history_says_so(
    db_url: str, engine: Engine, shop: WooSimulator
) -> None:
    """Issue 22 item 6: WooCommerce writes a trashed product by its id and answers it with
    status "trash"; the price is delivered, and the message's history says where it went."""
    stage(engine, [price_row("SKU-T", 1, "10.00")])
    run_worker(make_worker(db_url, engine, shop))
    shop.trash("SKU-T")
    stage(engine, [price_row("SKU-T", 2, "12.00")])
    run_worker(make_worker(db_url, engine, shop))

    assert "12.00" == shop.price("SKU-T")
    assert ("delivered", None) == states(engine)[("SKU-T", 2)]
    with transaction(engine, read_only=True) as connection:
        details = connection.execute(
            select(history.c.detail)
            .join(messages, messages.c.id == history.c.message_pk)
            .where(messages.c.aggregate == "SKU-T", messages.c.version == 2)
        ).scalars()
        assert any("in the shop's trash" in (d or "") for d in details)
