"""Helpers for tests and the demo: staging rows as 1C writes them, fast settings, runs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from sqlalchemy import Engine, insert

from exchange.db.engine import transaction
from exchange.db.schema import staging
from exchange.settings import Settings, load_settings
from exchange.worker import Worker

FAST = dict(
    poll_interval=0.01,
    batch_size=50,
    concurrency=4,
    lease_seconds=30,
    max_attempts=3,
    retry_base_delay=0.001,
    retry_max_delay=0.01,
    http_timeout=2.0,
    gap_timeout=600,
    breaker_threshold=5,
    site_batch_size=1,
    staging_url=None,
    site_token_file=None,
)


def fast_settings(database_url: str, site_url: str | None = None, **overrides: Any) -> Settings:
    """Settings with millisecond delays, independent of the environment's EXCHANGE_*."""
    return load_settings(
        database_url=database_url,
        site_url=site_url,
        site_token="test-token",
        worker_id="test-worker",
        **{**FAST, **overrides},
    )


def price_row(sku: str, version: int, price: str = "100.00", **extra: Any) -> dict[str, Any]:
    payload = {"sku": sku, "price": price, "currency": "RUB", "price_type": "retail"}
    return {
        "kind": "price",
        "aggregate": sku,
        "aggregate_version": version,
        "payload": json.dumps(payload),
        "schema_version": "1",
        "source_ref": f"Установка цен номенклатуры {version:06d}",
        **extra,
    }


def posting_row(document: str, version: int, amount: str = "10.00", **extra: Any) -> dict[str, Any]:
    payload = {"document": document, "line": version, "amount": amount}
    return {
        "kind": "financial_posting",
        "aggregate": document,
        "aggregate_version": version,
        "payload": json.dumps(payload),
        "schema_version": "1",
        "source_ref": f"Реализация {document}",
        **extra,
    }


def raw_row(
    kind: str,
    aggregate: str,
    version: int,
    payload: str,
    schema_version: str = "1",
    source_ref: str | None = None,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "aggregate": aggregate,
        "aggregate_version": version,
        "payload": payload,
        "schema_version": schema_version,
        "source_ref": source_ref,
    }


def stage(engine: Engine, rows: list[dict[str, Any]]) -> None:
    """Insert rows into staging_intents the way 1C does: INSERT only."""
    with transaction(engine) as connection:
        for row in rows:  # one by one: rows may differ in which columns they give
            connection.execute(insert(staging).values(**row))


async def drain(worker: Worker, *, cycles: int = 200) -> None:
    """Run cycles until the worker is idle (bounded: fails loudly instead of hanging)."""
    for _ in range(cycles):
        report = await worker.cycle()
        if worker.idle():
            return
        if report.batches == 0:
            await asyncio.sleep(0.005)
    raise AssertionError(f"not idle after {cycles} cycles")
