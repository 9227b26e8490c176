"""What 1C and a DBA really write, through intake and the worker (issue 12, items 5 and 8).

On SQLite and on PostgreSQL:
- 1C's empty date in ``created_at`` is a created_at 1C did not fill in: the time the row was
  taken is used, and the site receives a four-digit-year UTC time;
- a staging table widened by a DBA (TEXT instead of VARCHAR(n), NUMERIC instead of BIGINT)
  never lets one row fail its intake chunk: the row is quarantined invalid-contract, naming
  the column and its limit, and the rows behind it are taken;
- a 409 whose ``current_version`` is beyond BIGINT is an unknown answer for that message only:
  the rest of the batch is recorded, nothing impossible is written to the database.
"""

# Assertions read `expected == actual`, as the tests are written against the contract.

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, insert, literal_column, select, text

from exchange import app as bootstrap
from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import staging
from exchange.dev.testing import (
    fast_settings,
    one_channel_aggregates,
    one_channel_messages,
    posting_row,
    price_row,
    run_worker,
    stage,
)
from exchange.domain.clock import FakeClock
from exchange.intake import staging_table as intake
from exchange.settings import Settings
from exchange.targets.shop_api.client import BATCH_PATH

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()
aggregates = one_channel_aggregates()

WIRE_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


@pytest.fixture
def settings(db_url: str) -> Settings:
    return fast_settings(db_url, "https://site.test")


def take(engine: Engine, settings: Settings, now: datetime, **kw: Any) -> intake.IntakeReport:
    return intake.take(engine, None, settings.kinds, now, **kw)


def by_aggregate(engine: Engine) -> dict[str, Any]:
    with transaction(engine, read_only=True) as c:
        return {m["aggregate"]: m for m in c.execute(select(messages)).mappings()}


def untaken(engine: Engine) -> int:
    with transaction(engine, read_only=True) as c:
        return len(c.execute(select(staging.c.id).where(staging.c.taken_at.is_(None))).all())


class RecordingSite:
    """Answers 200 to every update, or what ``answers`` says for an aggregate; keeps bodies."""

    def __init__(self, answers: dict[str, tuple[int, Any]] | None = None) -> None:
        self.answers = answers or {}
        self.items: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        document = json.loads(request.content)
        if request.url.path == BATCH_PATH:
            results = [self._answer(item) for item in document["items"]]
            return httpx.Response(200, json={"results": results})
        answer = self._answer(document)
        return httpx.Response(answer["status"], json=answer["body"])

    def _answer(self, item: dict[str, Any]) -> dict[str, Any]:
        self.items.append(item)
        status, body = self.answers.get(item["aggregate"], (200, {"receipt": "R"}))
        return {"message_id": item["message_id"], "status": status, "body": body}


def deliver(engine: Engine, settings: Settings, site: RecordingSite) -> None:
    worker = bootstrap.worker(
        settings, engine, transport=httpx.MockTransport(site), rng=random.Random(3)
    )
    run_worker(worker)


# -- 1C's empty date ---


@pytest.mark.parametrize("empty", ["0001-01-01", "0001-01-01 00:00:00", "0001-01-01T00:00:00"])
def test_1c_empty_date_is_a_missing_created_at_the_time_taken_is_used_and_sent_with_4_digits(
    engine: Engine, settings: Settings, clock: FakeClock, empty: str
) -> None:
    with transaction(engine) as c:
        for sku in ("SKU-1", "SKU-2"):
            c.execute(
                insert(staging).values(**price_row(sku, 1), created_at=literal_column(f"'{empty}'"))
            )
    stage(engine, [price_row("SKU-3", 1, created_at=datetime(2026, 8, 23, 7, 20, tzinfo=UTC))])
    taken_at = clock.now()
    report = take(engine, settings, taken_at)

    assert (3, 3, 0) == (report.taken, report.messages, report.rejected)
    found = by_aggregate(engine)
    assert taken_at == found["SKU-1"]["created_at"] == found["SKU-2"]["created_at"]
    assert datetime(2026, 8, 23, 7, 20, tzinfo=UTC) == found["SKU-3"]["created_at"]

    site = RecordingSite()
    deliver(engine, settings, site)
    sent = {item["aggregate"]: item["created_at"] for item in site.items}
    assert {"SKU-1", "SKU-2", "SKU-3"} == set(sent)
    assert all(WIRE_TIME.fullmatch(value) for value in sent.values()), sent
    assert "2026-01-01T00:00:00Z" == sent["SKU-1"] == sent["SKU-2"]  # the FakeClock's time
    assert "2026-08-23T07:20:00Z" == sent["SKU-3"]


def test_a_created_at_that_is_no_time_the_driver_can_read_is_quarantined_not_a_failed_chunk(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # PostgreSQL stores 'infinity' in a TIMESTAMP, which the driver cannot read as a datetime.
    stage(engine, [price_row("SKU-1", 1)])
    with transaction(engine) as c:
        c.execute(
            insert(staging).values(**price_row("SKU-2", 1), created_at=literal_column("'infinity'"))
        )
    stage(engine, [price_row("SKU-3", 1)])
    report = take(engine, settings, clock.now())

    assert (3, 2, 1) == (report.taken, report.messages, report.rejected)
    record = by_aggregate(engine)["SKU-2"]
    assert ("quarantined", "invalid-contract") == (record["state"], record["reason"])
    assert "created_at" in record["last_error"]
    assert 0 == untaken(engine)


# -- a widened staging table ---


def widen(engine: Engine) -> None:
    """What a DBA does: the text columns to TEXT, the version to NUMERIC (SQLite's columns
    already hold any length)."""
    if not is_postgres(engine):
        return
    with transaction(engine) as c:
        for column in ("kind", "aggregate", "schema_version", "source_ref"):
            c.execute(text(f"ALTER TABLE staging_intents ALTER COLUMN {column} TYPE TEXT"))
        c.execute(text("ALTER TABLE staging_intents ALTER COLUMN aggregate_version TYPE NUMERIC"))


def test_a_row_longer_than_the_contract_in_a_widened_column_is_quarantined_and_the_rest_taken(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    widen(engine)
    long_document = "D-" + "7" * 248  # 250 characters
    stage(
        engine,
        [
            posting_row("D-1", 1),
            posting_row(long_document, 1),
            posting_row("D-2", 1, kind="k" * 65),
            posting_row("D-3", 1, schema_version="1" * 33),
            posting_row("D-4", 1, source_ref="Р" * 501),
            posting_row("D-5", 1),
        ],
    )
    if is_postgres(engine):  # beyond BIGINT: only a widened (NUMERIC) column can hold it
        with transaction(engine) as c:
            c.execute(
                text(
                    "INSERT INTO staging_intents (kind, aggregate, aggregate_version, payload) "
                    "VALUES ('financial_posting', 'D-6', 9223372036854775808, '{}')"
                )
            )
    rejected = {
        long_document[:200]: "aggregate",
        "D-2": "kind",
        "D-3": "schema_version",
        "D-4": "source_ref",
        **({"D-6": "aggregate_version"} if is_postgres(engine) else {}),
    }
    limits = {"aggregate": "200", "kind": "64", "schema_version": "32", "source_ref": "500"}

    report = take(engine, settings, clock.now(), chunk=3)

    assert (2, len(rejected)) == (report.messages, report.rejected)
    assert 0 == untaken(engine), "every row is taken: none fails its chunk"
    found = by_aggregate(engine)
    assert {"D-1", "D-5"} == {a for a, m in found.items() if not m["rejected"]}
    for aggregate, column in rejected.items():
        record = found[aggregate]
        assert ("quarantined", "invalid-contract") == (record["state"], record["reason"])
        assert column in record["last_error"], record["last_error"]
        if column in limits:
            assert "too long" in record["last_error"] and limits[column] in record["last_error"]
    assert 0 == found["D-6"]["version"] if is_postgres(engine) else True


# -- a 409 beyond BIGINT ---


@pytest.mark.parametrize("site_batch_size", [1, 5])
def test_a_409_with_a_version_beyond_bigint_is_an_unknown_answer_not_a_failed_batch(
    engine: Engine, db_url: str, clock: FakeClock, site_batch_size: int
) -> None:
    settings = fast_settings(db_url, "https://site.test", site_batch_size=site_batch_size)
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(1, 5)])
    site = RecordingSite({"SKU-2": (409, {"error": "stale", "current_version": 2**63})})
    deliver(engine, settings, site)

    found = by_aggregate(engine)
    assert {"SKU-1": "delivered", "SKU-3": "delivered", "SKU-4": "delivered"} == {
        a: found[a]["state"] for a in ("SKU-1", "SKU-3", "SKU-4")
    }
    assert ("quarantined", "unknown-response") == (
        found["SKU-2"]["state"],
        found["SKU-2"]["reason"],
    )
    with transaction(engine, read_only=True) as c:
        done = dict(c.execute(select(aggregates.c.aggregate, aggregates.c.done_version)).all())
    assert {"SKU-1": 1, "SKU-2": 0, "SKU-3": 1, "SKU-4": 1} == done
    assert all(type(v) is int for v in done.values()), done
