"""``exchange demo --target bitrix|woocommerce``: the pipeline against a simulated 1C-Bitrix
exchange or WooCommerce shop (contract 10), with nothing to configure.

A fresh SQLite file, the simulator on loopback (Bitrix: windows-1251, zip, 16 KB chunks, import
in steps, a session lost once; WooCommerce: products and variations, a rate limit, one batch
half applied and its answer lost), several versions per SKU, one SKU the shop lacks and one
price type nobody mapped; a run to idle; then a summary that checks what the shop ends with:
the newest delivered price of every SKU, never an older one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from rich.console import Console
from sqlalchemy import func, select

from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.schema import messages
from exchange.dev.bitrixsim import PATH, BitrixSimulator
from exchange.dev.woosim import WooSimulator
from exchange.errors import ExchangeError
from exchange.intake.stage import stage
from exchange.runner import run_until_idle
from exchange.settings import Settings, load_settings

UNKNOWN_SKU = "NOSUCH-0001"
UNMAPPED_TYPE = "wholesale"


def rows(skus: int, rng: random.Random, *, variations: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in range(skus):
        sku = f"{'VAR' if variations and n % 5 == 0 else 'SKU'}-{n:04d}"
        price = rng.randint(100, 99_999)
        for version in range(1, rng.randint(1, 3) + 1):
            price += rng.randint(-500, 500)
            out.append(_row(sku, version, f"{max(price, 1) / 100:.2f}", "retail"))
    out.append(_row(UNKNOWN_SKU if variations else "SKU-0000", 1, "1.00", UNMAPPED_TYPE))
    if variations:
        out.append(_row(UNKNOWN_SKU, 1, "1.00", "retail"))
    return out


def _row(sku: str, version: int, price: str, price_type: str) -> dict[str, Any]:
    payload = {"sku": sku, "price": price, "currency": "RUB", "price_type": price_type}
    return {
        "kind": "price",
        "aggregate": f"{sku}/{price_type}",
        "aggregate_version": version,
        "payload": json.dumps(payload),
        "schema_version": "1",
        "source_ref": f"Установка цен номенклатуры {version:06d}",
    }


def _settings(database: Path, target: str, url: str) -> Settings:
    common: dict[str, Any] = dict(
        database_url=f"sqlite:///{database}",
        staging_url=None,
        site_token_file=None,
        worker_id="demo-worker",
        poll_interval=0.05,
        batch_size=500,
        concurrency=4,
        lease_seconds=30,
        max_attempts=8,
        retry_base_delay=0.01,
        retry_max_delay=1.0,
        http_timeout=5.0,
        target=target,
    )
    if target == "woocommerce":
        return load_settings(
            **common,
            woo_url=url,
            woo_key="ck_demo",
            woo_secret="cs_demo",
            woo_price_fields={"retail": "regular_price"},
        )
    return load_settings(
        **common,
        bitrix_url=url + PATH,
        bitrix_user="exchange",
        bitrix_password="demo-password",
        bitrix_catalog_id="demo-catalog",
        bitrix_price_types={"retail": "Розничная"},
    )


def run_target_demo(
    directory: Path, *, target: str, skus: int = 500, console: Console | None = None
) -> int:
    console = console or Console()
    logging.getLogger("exchange").addHandler(logging.NullHandler())
    rng = random.Random(20261201)
    database = directory / f"demo-{target}.db"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob(f"demo-{target}.db*"):
            stale.unlink()
    except OSError as exc:
        raise ExchangeError(f"cannot prepare the demo directory {directory}: {exc}") from None
    site: WooSimulator | BitrixSimulator
    if target == "woocommerce":
        woo = WooSimulator("ck_demo", "cs_demo")
        woo.faults.rate_limit = 40
        woo.faults.half_apply = True
        site = woo
    else:
        bitrix = BitrixSimulator(
            "exchange", "demo-password", zip=True, file_limit=16_384, step_size=200
        )
        bitrix.faults.lose_session = True
        site = bitrix
    with site:
        settings = _settings(database, target, site.url)
        engine = make_engine(settings.database_url)
        upgrade(engine)
        staged = rows(skus, rng, variations=target == "woocommerce")
        with transaction(engine) as connection:
            stage(connection, staged)
        console.print(f"staged {len(staged)} prices ({target} simulator at {site.url})")
        worker = bootstrap.worker(settings, engine, rng=random.Random(1))
        started = time.monotonic()

        async def go() -> int:
            first = True

            def on_cycle(_: object) -> None:
                nonlocal first
                if first and isinstance(site, WooSimulator):
                    site.faults.half_apply = False  # one batch half applied, then all well
                first = False

            try:
                return await run_until_idle(
                    worker, max_seconds=120, poll_interval=settings.poll_interval, on_cycle=on_cycle
                )
            finally:
                await worker.target.aclose()

        code = asyncio.run(go())
        elapsed = time.monotonic() - started
        with transaction(engine, read_only=True) as connection:
            by = Counter(
                {
                    (state, reason): n
                    for state, reason, n in connection.execute(
                        select(messages.c.state, messages.c.reason, func.count()).group_by(
                            messages.c.state, messages.c.reason
                        )
                    )
                }
            )
            latest = dict(
                connection.execute(
                    select(messages.c.aggregate, func.max(messages.c.version))
                    .where(messages.c.state == "delivered")
                    .group_by(messages.c.aggregate)
                ).all()
            )
            payloads = {
                (a, v): p
                for a, v, p in connection.execute(
                    select(messages.c.aggregate, messages.c.version, messages.c.payload)
                )
            }
    wrong = []
    for aggregate, version in latest.items():
        payload = json.loads(payloads[(aggregate, version)])
        held = site.price(payload["sku"])
        if held is None or Decimal(held) != Decimal(payload["price"]):
            wrong.append(aggregate)
    console.print(f"{target}: idle after {elapsed:.1f} s")
    for (state, reason), n in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        console.print(f"  {state:<12} {reason or '':<22} {n}")
    requests = sum(site.requests.values())
    console.print(f"  requests to the shop: {requests} ({dict(site.requests)})")
    console.print(
        "  the shop holds the newest delivered price of every SKU: "
        + ("yes" if not wrong else f"NO ({len(wrong)}: {', '.join(wrong[:5])})")
    )
    return code if not wrong else 1
