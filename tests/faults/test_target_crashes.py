"""A real ``exchange run`` process of the bitrix and woocommerce targets killed (SIGKILL) in the
middle of a delivery, then a second process: nothing lost, nothing quarantined, every price at
the shop the newest (contract 10, issue 15 item 4). On SQLite and PostgreSQL."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from procs import start, stop, wait_for
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.dev.bitrixsim import PATH, BitrixSimulator
from exchange.dev.testing import one_channel_messages, price_row, stage
from exchange.dev.woosim import WooSimulator

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

COUNT = 60


def states(engine: Engine) -> dict[str, str]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(select(messages.c.aggregate, messages.c.state))
        return {a: s for a, s in rows}


def killed_then_rescued(
    db_url: str, engine: Engine, tmp_path: Path, site: Any, started: Any, env: dict[str, str]
) -> None:
    stage(engine, [price_row(f"SKU-{n}", 1, f"{n}.00") for n in range(COUNT)])
    common = {
        "EXCHANGE_LEASE_SECONDS": "1",
        "EXCHANGE_BATCH_SIZE": "100",
        "EXCHANGE_HTTP_TIMEOUT": "2",  # the killed worker's Bitrix lock ends 5 s later
        **env,
    }
    first = start(db_url, site, "killed", tmp_path, **common)
    try:
        wait_for(started, 30, "the delivery to start")
        first.send_signal(signal.SIGKILL)
    finally:
        stop(first)
    stage(engine, [price_row("SKU-0", 2, "100.00")])  # a newer price meanwhile
    site.faults.delay = 0
    rescuer = start(db_url, site, "rescuer", tmp_path, "--until-idle", **common)
    try:
        assert 0 == rescuer.wait(timeout=90), (tmp_path / "rescuer.log").read_text()
    finally:
        stop(rescuer)
    final = states(engine)
    assert {"delivered", "cancelled"} >= set(final.values()), final
    assert "100.00" == site.price("SKU-0")
    assert [f"{n}.00" for n in range(1, COUNT)] == [site.price(f"SKU-{n}") for n in range(1, COUNT)]


def test_bitrix_worker_killed_mid_upload(db_url: str, engine: Engine, tmp_path: Path) -> None:
    site = BitrixSimulator("exchange", "secret", zip=False, file_limit=1024, step_size=10)
    site.faults.delay = 0.2
    with site:
        killed_then_rescued(
            db_url,
            engine,
            tmp_path,
            site,
            lambda: site.requests["file"] >= 2,
            {
                "EXCHANGE_TARGET": "bitrix",
                "EXCHANGE_BITRIX_URL": site.url + PATH,
                "EXCHANGE_BITRIX_USER": "exchange",
                "EXCHANGE_BITRIX_PASSWORD": "secret",
                "EXCHANGE_BITRIX_CATALOG_ID": "catalog-1",
                "EXCHANGE_BITRIX_PRICE_TYPES": '{"retail": "Розничная"}',
            },
        )
        assert [] == sorted(site.deactivated)


def test_woocommerce_worker_killed_mid_batch(db_url: str, engine: Engine, tmp_path: Path) -> None:
    site = WooSimulator("ck_k", "cs_s")
    site.faults.delay = 0.5
    with site:
        killed_then_rescued(
            db_url,
            engine,
            tmp_path,
            site,
            lambda: site.requests["POST products/batch"] >= 1,
            {
                "EXCHANGE_TARGET": "woocommerce",
                "EXCHANGE_WOO_URL": site.url,
                "EXCHANGE_WOO_KEY": "ck_k",
                "EXCHANGE_WOO_SECRET": "cs_s",
            },
        )
