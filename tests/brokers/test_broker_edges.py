"""The broker ways in at their edges (issue 33, items 1-6; contract 12 and 15), against the real
RabbitMQ and Redis, on SQLite and PostgreSQL: text no database holds, a broker that cancels the
consumer or loses the group, entries trimmed while pending, a field twice, a byte limit."""

from __future__ import annotations

import asyncio
import base64
import json
import random
from typing import Any

import httpx
import pytest
import redis
from brokerkit import publish, queue_counts
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import messages
from exchange.dev.testing import FakeSite, drain, fast_settings, price_row, stage
from exchange.intake.sources import common
from exchange.worker import Worker


def intent(sku: str, version: int, **fields: Any) -> dict[str, Any]:
    row = price_row(sku, version)
    row["payload"] = json.loads(row["payload"])
    return {**row, **fields}


def body(value: Any) -> bytes:
    return json.dumps(value).encode()  # ensure_ascii: "\u0000" and "\ud800" as JSON escapes


def rabbit_worker(db_url: str, engine: Engine, site: FakeSite, **overrides: Any) -> Worker:
    settings = fast_settings(db_url, "https://site.test", source="rabbitmq", **overrides)
    return bootstrap.worker(
        settings, engine, transport=httpx.MockTransport(site), rng=random.Random(3)
    )


def redis_worker(
    db_url: str, engine: Engine, site: FakeSite, redis_url: str, stream: str, **overrides: Any
) -> Worker:
    settings = fast_settings(
        db_url,
        "https://site.test",
        source="redis",
        redis_url=redis_url,
        redis_stream=stream,
        **overrides,
    )
    return bootstrap.worker(
        settings, engine, transport=httpx.MockTransport(site), rng=random.Random(3)
    )


def run(worker: Worker, cycles: int = 400) -> None:
    async def go() -> None:
        try:
            await drain(worker, cycles=cycles)
        finally:
            await worker.aclose()

    asyncio.run(go())


def quarantined(engine: Engine) -> dict[str, dict[str, Any]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(select(messages).where(messages.c.state == "quarantined"))
        return {row["message_id"]: dict(row) for row in rows.mappings()}


TEXT_COLUMNS = ("message_id", "kind", "aggregate", "schema_version", "source_ref", "last_error")

# Each refused intent holds text no database can: NUL (PostgreSQL) or a lone surrogate (no UTF-8).
POISON = [
    intent("SKU-NUL", 1, kind="pr\x00ice"),
    intent("SKU-\ud800", 1),
    intent("SKU-SCHEMA", 1, schema_version="1\x00"),
    intent("SKU-REF", 1, source_ref="doc \x00 \udfff"),
]
NOT_UTF8 = b"\xff\xfe{\x00 not text \x80"


def test_a_refused_intent_with_text_no_database_holds_is_recorded_and_delivery_goes_on(
    db_url: str, engine: Engine, rabbitmq_url: str, queue: str
) -> None:
    """Contract 15, issue 33 item 1: NUL and lone surrogates become U+FFFD in the record's text
    columns, a body that is not UTF-8 is kept as {"raw_base64": ...} under the broker's id, and
    the staging table and the valid intents are delivered in the same run."""
    stage(engine, [price_row("SKU-STAGED", 1)])
    publish(rabbitmq_url, queue, [body(POISON), body(intent("SKU-OK", 1))])
    publish(rabbitmq_url, queue, [NOT_UTF8], message_id="bin-1")
    site = FakeSite()

    run(rabbit_worker(db_url, engine, site, rabbitmq_url=rabbitmq_url, rabbitmq_queue=queue))

    assert {("price", "SKU-STAGED"): [1], ("price", "SKU-OK"): [1]} == site.applied
    records = quarantined(engine)
    assert 5 == len(records)
    for record in records.values():
        for column in TEXT_COLUMNS:
            assert "\x00" not in record[column]
            assert all(not 0xD800 <= ord(c) <= 0xDFFF for c in record[column]), column
    by_aggregate = {r["aggregate"]: r for r in records.values()}
    assert "pr\ufffdice" == by_aggregate["SKU-NUL"]["kind"]
    assert "SKU-\ufffd" in by_aggregate
    assert "1\ufffd" == by_aggregate["SKU-SCHEMA"]["schema_version"]
    assert "doc \ufffd \ufffd" == by_aggregate["SKU-REF"]["source_ref"]
    binary = records["rabbitmq-bin-1"]
    assert NOT_UTF8 == base64.b64decode(json.loads(binary["payload"])["raw_base64"])
    assert 0 == queue_counts(rabbitmq_url, queue), "every message recorded, then let go"


def test_a_redis_entry_with_text_no_database_holds_is_recorded_under_its_entry_id(
    db_url: str, engine: Engine, redis_url: str, stream: str
) -> None:
    """Contract 15 on the Redis way in: the same replacements, the record named by entry id."""
    with redis.Redis.from_url(redis_url) as r:
        poison = r.xadd(stream, {"intent": body(POISON[0])})
        binary = r.xadd(stream, {"intent": NOT_UTF8})
        r.xadd(stream, {"intent": body(intent("SKU-OK", 1))})
    site = FakeSite()

    run(redis_worker(db_url, engine, site, redis_url, stream))

    assert {("price", "SKU-OK"): [1]} == site.applied
    records = quarantined(engine)
    assert "pr\ufffdice" == records[f"redis-{stream}-{poison.decode()}-0"]["kind"]
    kept = json.loads(records[f"redis-{stream}-{binary.decode()}"]["payload"])
    assert NOT_UTF8 == base64.b64decode(kept["raw_base64"])


def test_a_refusal_the_database_will_not_record_holds_back_only_its_own_message(
    db_url: str, engine: Engine, rabbitmq_url: str, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33 item 1: a failure to record one message never stops the cycle or the other ways
    in; that message stays with the broker (never acknowledged), the others go on."""
    record = common._record

    def refusing(connection: Any, refusals: list[Any], source: str, now: Any) -> int:
        if any("poison" in r.record_id for r in refusals):
            raise IntegrityError("INSERT INTO messages", {}, Exception("the database refuses"))
        return record(connection, refusals, source, now)

    monkeypatch.setattr(common, "_record", refusing)
    stage(engine, [price_row("SKU-STAGED", 1)])
    publish(rabbitmq_url, queue, [b"not json"], message_id="poison-1")
    publish(rabbitmq_url, queue, [b"not json either"], message_id="bad-2")
    publish(rabbitmq_url, queue, [body(intent("SKU-OK", 1))])
    site = FakeSite()
    worker = rabbit_worker(db_url, engine, site, rabbitmq_url=rabbitmq_url, rabbitmq_queue=queue)

    async def go() -> None:
        try:
            for _ in range(4):
                await worker.cycle()
        finally:
            await worker.aclose()

    asyncio.run(go())

    assert {("price", "SKU-STAGED"): [1], ("price", "SKU-OK"): [1]} == site.applied
    assert {"rabbitmq-bad-2"} == set(quarantined(engine))
    assert 1 == queue_counts(rabbitmq_url, queue), "the unrecorded message stays with the broker"
