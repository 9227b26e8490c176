"""Redis Streams as a way in (contract 12), against the real server, on SQLite and PostgreSQL:
a consumer group created when missing, XREADGROUP, XACK after the commit, a dead consumer's
entries claimed after EXCHANGE_REDIS_MIN_IDLE, a bad entry recorded once and acknowledged."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import redis
from brokerkit import run_worker, source_worker
from sqlalchemy import Engine, func, select

from exchange.db.engine import transaction
from exchange.db.schema import staging
from exchange.dev.testing import FakeSite, one_channel_messages, price_row
from exchange.worker import Worker

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()


def intent(sku: str, version: int) -> bytes:
    row = price_row(sku, version)
    row["payload"] = json.loads(row["payload"])
    return json.dumps(row).encode()


def make_worker(
    db_url: str, engine: Engine, site: FakeSite, redis_url: str, stream: str, **overrides: Any
) -> Worker:
    return source_worker(
        db_url, engine, site, "redis", redis_url=redis_url, redis_stream=stream, **overrides
    )


run = run_worker


def client(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url)


def pending(redis_url: str, stream: str) -> int:
    with client(redis_url) as r:
        return int(r.xpending(stream, "exchange")["pending"])


def quarantined(engine: Engine) -> list[dict[str, Any]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(select(messages).where(messages.c.state == "quarantined"))
        return [dict(row) for row in rows.mappings()]


def test_entries_are_staged_delivered_and_acknowledged_the_group_created_when_missing(
    db_url: str, engine: Engine, redis_url: str, stream: str
) -> None:
    with client(redis_url) as r:
        r.xadd(stream, {"intent": intent("SKU-1", 1)})
        r.xadd(stream, {"intent": json.dumps({"intents": [json.loads(intent("SKU-2", 3))]})})
    site = FakeSite()

    run(make_worker(db_url, engine, site, redis_url, stream))

    assert {("price", "SKU-1"): [1], ("price", "SKU-2"): [3]} == site.applied
    assert 0 == pending(redis_url, stream), "acknowledged after the commit"


def test_a_dead_consumers_pending_entries_are_claimed_after_min_idle_and_staged_once(
    db_url: str, engine: Engine, redis_url: str, stream: str
) -> None:
    # Redis measures the idle time on its own clock: no clock to inject. The entries are
    # read just before the first worker runs, with a minimum of 60 s (a first run a minute
    # late is the margin); then XCLAIM ... IDLE makes them as old as a dead worker's
    # (61 s) with no sleep: JUSTID, so that their delivery count stays as it was.
    with client(redis_url) as r:
        r.xgroup_create(stream, "exchange", id="0", mkstream=True)
        ids = [r.xadd(stream, {"intent": intent(sku, 1)}) for sku in ("SKU-1", "SKU-2")]
        # A worker that read both, staged the first, and died before its XACK.
        r.xreadgroup("exchange", "dead-worker", {stream: ">"})
    first = make_worker(db_url, engine, FakeSite(), redis_url, stream, redis_min_idle=60)
    run(first)  # the entries are not idle long enough yet: nothing is taken
    with transaction(engine, read_only=True) as connection:
        assert 0 == connection.execute(select(func.count()).select_from(staging)).scalar_one()
    with transaction(engine) as connection:  # what the dead worker had staged
        connection.execute(staging.insert(), [_row("SKU-1", 1)])
    with client(redis_url) as r:
        r.xclaim(stream, "exchange", "dead-worker", 0, ids, idle=61_000, justid=True)

    site = FakeSite()
    run(make_worker(db_url, engine, site, redis_url, stream, redis_min_idle=60))

    assert {("price", "SKU-1"): [1], ("price", "SKU-2"): [1]} == site.applied
    with transaction(engine, read_only=True) as connection:
        staged = connection.execute(select(func.count()).select_from(staging)).scalar_one()
    assert 2 == staged, "the claimed SKU-1 was a duplicate: staged nothing twice"
    assert 0 == pending(redis_url, stream)


def _row(sku: str, version: int) -> dict[str, Any]:
    return price_row(sku, version)


def test_a_bad_entry_is_recorded_once_and_acknowledged(
    db_url: str, engine: Engine, redis_url: str, stream: str
) -> None:
    with client(redis_url) as r:
        bad = r.xadd(stream, {"intent": b"\x00 not json"})
        other = r.xadd(stream, {"something": "else"})
        r.xadd(stream, {"intent": intent("SKU-1", 1)})
    site = FakeSite()

    run(make_worker(db_url, engine, site, redis_url, stream))
    # The same entries read again (a crash after the record's commit, before the XACK).
    with client(redis_url) as r:
        r.xgroup_setid(stream, "exchange", id="0")
    run(make_worker(db_url, engine, site, redis_url, stream))

    records = {r["message_id"]: r for r in quarantined(engine)}
    ids = {f"redis-{stream}-{e.decode()}" for e in (bad, other)}
    assert ids == set(records)
    assert all(r["reason"] == "invalid-contract" for r in records.values())
    assert "no field intent" in records[f"redis-{stream}-{other.decode()}"]["last_error"]
    assert {("price", "SKU-1"): [1]} == site.applied
    assert 0 == pending(redis_url, stream)


def test_redis_gone_never_stops_delivery(
    db_url: str, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    from exchange.dev.testing import stage

    stage(engine, [price_row("SKU-1", 1)])
    site = FakeSite()
    worker = make_worker(db_url, engine, site, "redis://:hunter2-secret@127.0.0.1:1/0", "s")

    async def go() -> None:
        try:
            await worker.cycle()
        finally:
            await worker.aclose()

    asyncio.run(go())

    assert {("price", "SKU-1"): [1]} == site.applied
    assert "Redis cannot be reached" in caplog.text
    assert "hunter2-secret" not in caplog.text
    assert not worker.idle()
