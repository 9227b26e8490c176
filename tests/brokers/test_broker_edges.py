"""The broker ways in at their edges (issue 33, items 1-6; contract 12 and 15), against the real
RabbitMQ and Redis, on SQLite and PostgreSQL: text no database holds, a broker that cancels the
consumer or loses the group, entries trimmed while pending, a field twice, a byte limit."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from pathlib import Path
from typing import Any

import aio_pika
import pytest
import redis
from brokerkit import publish, queue_counts, run_worker, source_worker
from clitools import Cli, describe
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError

from exchange.db.engine import transaction
from exchange.dev.testing import FakeSite, drain, one_channel_messages, price_row, stage
from exchange.intake.sources import common
from exchange.worker import Worker

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()


def intent(sku: str, version: int, **fields: Any) -> dict[str, Any]:
    row = price_row(sku, version)
    row["payload"] = json.loads(row["payload"])
    return {**row, **fields}


def body(value: Any) -> bytes:
    return json.dumps(value).encode()  # ensure_ascii: "\u0000" and "\ud800" as JSON escapes


def rabbit_worker(db_url: str, engine: Engine, site: FakeSite, **overrides: Any) -> Worker:
    return source_worker(db_url, engine, site, "rabbitmq", **overrides)


def redis_worker(
    db_url: str, engine: Engine, site: FakeSite, redis_url: str, stream: str, **overrides: Any
) -> Worker:
    return source_worker(
        db_url, engine, site, "redis", redis_url=redis_url, redis_stream=stream, **overrides
    )


run = run_worker


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


def test_a_reused_message_id_with_another_body_is_a_second_record_and_redelivery_is_not(
    db_url: str, engine: Engine, rabbitmq_url: str, queue: str
) -> None:
    """Contract 15 (attack B): the record's id is the broker's message id; a producer that
    reuses it for another refused body still leaves a record of it (``<id>#<digest>``), and the
    same bodies delivered again are the same records, never more."""
    bad = [
        body(intent("SKU-MID-1", 1, payload={"sku": "SKU-MID-1", "price": "-1"})),
        b"not json",
        b"not json either",
        body(intent("SKU-MID-2", 1, payload={"sku": "SKU-MID-2", "price": "abc"})),
    ]
    site = FakeSite()

    def worker() -> Worker:
        return rabbit_worker(db_url, engine, site, rabbitmq_url=rabbitmq_url, rabbitmq_queue=queue)

    for value in bad:  # one at a time, each run alone
        publish(rabbitmq_url, queue, [value], message_id="order-1")
        run(worker())
    publish(rabbitmq_url, queue, [*bad, *bad], message_id="order-1")  # again, one batch
    run(worker())

    records = quarantined(engine)
    assert 4 == len(records), sorted(records)
    assert bad[0].decode() == records["rabbitmq-order-1-0"]["payload"]  # its intent refused
    assert "not json" == records["rabbitmq-order-1"]["payload"]
    others = {r["payload"]: i for i, r in records.items() if "#" in i}
    assert others["not json either"].startswith("rabbitmq-order-1#")
    assert others[bad[3].decode()].startswith("rabbitmq-order-1#")
    assert others[bad[3].decode()].endswith("-0"), "the refused intent's place in the body"
    assert 0 == queue_counts(rabbitmq_url, queue)
    assert {} == site.applied


def test_a_stream_created_again_reusing_an_entry_id_leaves_a_record_of_each_body(
    db_url: str, engine: Engine, redis_url: str, stream: str
) -> None:
    """Contract 15 (attack B) on Redis: a stream created again numbers its entries anew; a
    refused entry under an id already recorded for another body is a second record."""
    site = FakeSite()
    for value in (b"first", b"second", b"second"):
        with redis.Redis.from_url(redis_url) as r:
            r.delete(stream)
            r.xadd(stream, {"intent": value}, id="1-1")
        run(redis_worker(db_url, engine, site, redis_url, stream))

    records = quarantined(engine)
    assert 2 == len(records), sorted(records)
    assert "first" == records[f"redis-{stream}-1-1"]["payload"]
    (other,) = set(records) - {f"redis-{stream}-1-1"}
    assert other.startswith(f"redis-{stream}-1-1#")
    assert "second" == records[other]["payload"]


def pending(redis_url: str, stream: str) -> int:
    with redis.Redis.from_url(redis_url) as r:
        return int(r.xpending(stream, "exchange")["pending"])


def test_entries_trimmed_while_pending_are_each_recorded_naming_the_entry(
    db_url: str, engine: Engine, redis_url: str, stream: str
) -> None:
    """Issue 33 item 4: XAUTOCLAIM's deleted ids (a dead consumer read them, MAXLEN or XTRIM
    removed them) are quarantine records naming the entry id, never acknowledged silently."""
    with redis.Redis.from_url(redis_url) as r:
        r.xgroup_create(stream, "exchange", id="0", mkstream=True)
        ids = [r.xadd(stream, {"intent": body(intent(f"SKU-{n}", 1))}) for n in range(2)]
        r.xreadgroup("exchange", "dead-worker", {stream: ">"})
        # As old as a dead worker's (no sleep: Redis measures idle time on its own clock).
        r.xclaim(stream, "exchange", "dead-worker", 0, ids, idle=61_000, justid=True)
        r.xtrim(stream, maxlen=0)
    site = FakeSite()

    run(redis_worker(db_url, engine, site, redis_url, stream, redis_min_idle=60))

    records = quarantined(engine)
    assert {f"redis-{stream}-{i.decode()}" for i in ids} == set(records)
    for entry_id in ids:
        record = records[f"redis-{stream}-{entry_id.decode()}"]
        assert entry_id.decode() in record["last_error"]
        assert "the stream no longer holds this entry" in record["last_error"]
    assert {} == site.applied
    assert 0 == pending(redis_url, stream)


def test_an_entry_naming_the_field_intent_twice_is_refused_and_recorded_not_staged(
    db_url: str, engine: Engine, redis_url: str, stream: str
) -> None:
    """Issue 33 item 5: a field twice is refused as a key twice in a body is, neither value
    staged (Redis keeps both fields; a client's dict would keep the last)."""
    with redis.Redis.from_url(redis_url) as r:
        twice = r.execute_command(
            "XADD",
            stream,
            "*",
            "intent",
            body(intent("SKU-A", 1)),
            "intent",
            body(intent("SKU-B", 1)),
        )
        r.xadd(stream, {"intent": body(intent("SKU-OK", 1))})
    site = FakeSite()

    run(redis_worker(db_url, engine, site, redis_url, stream))

    assert {("price", "SKU-OK"): [1]} == site.applied
    records = quarantined(engine)
    assert [f"redis-{stream}-{twice.decode()}"] == list(records)
    assert "the field intent 2 times" in next(iter(records.values()))["last_error"]
    assert 0 == pending(redis_url, stream)


LIMIT = 1024  # EXCHANGE_SOURCE_MAX_BYTES in these tests (its least)


def sized(sku: str, size: int) -> bytes:
    """A valid intent's body of exactly ``size`` bytes (padded in its source_ref and name)."""
    bare = len(body(intent(sku, 1, source_ref="", name="")))
    ref = min(500, size - bare)
    return body(intent(sku, 1, source_ref="r" * ref, name="n" * (size - bare - ref)))


def test_a_message_over_the_byte_limit_is_recorded_unread_and_the_rest_delivered(
    db_url: str, engine: Engine, rabbitmq_url: str, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Contract 15, issue 33 item 6: a body over EXCHANGE_SOURCE_MAX_BYTES is recorded as
    refused with its size, never parsed; the others go on."""
    parsed: list[int] = []
    parse = common.parse_body
    monkeypatch.setattr(
        common, "parse_body", lambda raw, n: parsed.append(len(raw)) or parse(raw, n)
    )
    large = sized("SKU-LARGE", LIMIT + 1)
    assert len(large) == LIMIT + 1
    publish(rabbitmq_url, queue, [large], message_id="large-1")
    publish(rabbitmq_url, queue, [sized("SKU-OK", LIMIT)])
    site = FakeSite()

    run(
        rabbit_worker(
            db_url,
            engine,
            site,
            rabbitmq_url=rabbitmq_url,
            rabbitmq_queue=queue,
            source_max_bytes=LIMIT,
        )
    )

    assert {("price", "SKU-OK"): [1]} == site.applied
    assert [LIMIT] == parsed, "the large body was never parsed"
    record = quarantined(engine)["rabbitmq-large-1"]
    assert (
        f"{LIMIT + 1} bytes, more than EXCHANGE_SOURCE_MAX_BYTES ({LIMIT})" in record["last_error"]
    )
    kept = json.loads(record["payload"])
    assert LIMIT + 1 == kept["bytes"]
    assert large.startswith(base64.b64decode(kept["raw_base64"]))
    assert 0 == queue_counts(rabbitmq_url, queue)


def batches_taken(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[int]:
    """The bytes of bodies of each batch a source hands to ``take``."""
    sizes: list[int] = []
    take = module.take

    def spy(engine: Any, staging: Any, kinds: Any, batch: Any, **options: Any) -> Any:
        sizes.append(sum(len(m.body) for m in batch))
        return take(engine, staging, kinds, batch, **options)

    monkeypatch.setattr(module, "take", spy)
    return sizes


def test_a_rabbitmq_pull_takes_no_more_than_four_times_the_limit_at_once(
    db_url: str, engine: Engine, rabbitmq_url: str, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Contract 15: a batch stops taking buffered messages past 4 x EXCHANGE_SOURCE_MAX_BYTES
    (what the broker pushes into the buffer is bounded by prefetch and its max_message_size)."""
    from exchange.intake.sources import rabbitmq

    sizes = batches_taken(monkeypatch, rabbitmq)
    publish(rabbitmq_url, queue, [sized(f"SKU-{n}", 1000) for n in range(12)])
    site = FakeSite()

    run(
        rabbit_worker(
            db_url,
            engine,
            site,
            rabbitmq_url=rabbitmq_url,
            rabbitmq_queue=queue,
            source_max_bytes=LIMIT,
        )
    )

    assert {("price", f"SKU-{n}"): [1] for n in range(12)} == site.applied
    assert 12_000 == sum(sizes)
    assert max(sizes) <= 4 * LIMIT, sizes


def test_a_redis_read_asks_for_no_more_than_four_times_the_limit(
    db_url: str, engine: Engine, redis_url: str, stream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Contract 15: Redis cannot bound a read in bytes, so its COUNT is capped: no read brings
    more than 4 x EXCHANGE_SOURCE_MAX_BYTES of entries; an entry over the limit is refused."""
    from exchange.intake.sources import redis_streams

    sizes = batches_taken(monkeypatch, redis_streams)
    with redis.Redis.from_url(redis_url) as r:
        for n in range(12):
            r.xadd(stream, {"intent": sized(f"SKU-{n}", 1000)})
        large = r.xadd(stream, {"intent": sized("SKU-LARGE", LIMIT + 1)})
    site = FakeSite()

    run(redis_worker(db_url, engine, site, redis_url, stream, source_max_bytes=LIMIT))

    assert {("price", f"SKU-{n}"): [1] for n in range(12)} == site.applied
    assert 12_000 + LIMIT + 1 == sum(sizes)
    assert max(sizes) <= 4 * LIMIT + LIMIT + 1, "four times the limit, and the entry past it"
    record = quarantined(engine)[f"redis-{stream}-{large.decode()}"]
    assert f"{LIMIT + 1} bytes, more than EXCHANGE_SOURCE_MAX_BYTES" in record["last_error"]
    assert 0 == pending(redis_url, stream)


def test_a_redis_read_holds_four_times_the_limit_whatever_came_before(
    db_url: str, engine: Engine, redis_url: str, stream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Contract 15 (attack A): a small entry read first does not open the next read to hundreds
    of large ones; each read holds at most 4 x EXCHANGE_SOURCE_MAX_BYTES and the one entry that
    crosses it, whatever the sizes, and small entries still come many to a read."""
    from exchange.intake.sources import redis_streams

    held: list[list[int]] = []
    small_only = False
    take = redis_streams.take

    def spy(engine: Any, staging: Any, kinds: Any, batch: Any, **options: Any) -> Any:
        held.append([len(m.body) for m in batch])
        if len(held) == 1 and not small_only:  # large entries come once a small one was read
            with redis.Redis.from_url(redis_url) as r:
                for n in range(40):
                    r.xadd(stream, {"intent": sized(f"SKU-L{n}", 1000)})
        return take(engine, staging, kinds, batch, **options)

    monkeypatch.setattr(redis_streams, "take", spy)
    with redis.Redis.from_url(redis_url) as r:
        r.xadd(stream, {"intent": body(intent("SKU-SMALL", 1))})
    site = FakeSite()

    run(redis_worker(db_url, engine, site, redis_url, stream, source_max_bytes=LIMIT))

    assert 41 == len(site.applied)
    for sizes in held:
        assert sum(sizes[:-1]) < 4 * LIMIT, held  # it stopped once it held the budget
    held.clear()
    small_only = True
    with redis.Redis.from_url(redis_url) as r:
        for n in range(100):
            r.xadd(stream, {"intent": body(intent(f"SKU-S{n}", 1))})

    run(redis_worker(db_url, engine, site, redis_url, stream, source_max_bytes=100_000))

    assert [100] == [len(sizes) for sizes in held], "small entries: one read"
    assert 0 == pending(redis_url, stream)


def test_an_entry_without_the_field_intent_over_the_limit_is_recorded_unread(
    db_url: str, engine: Engine, redis_url: str, stream: str
) -> None:
    """Contract 15 (attack A): an entry without the field intent is refused as not intents; over
    EXCHANGE_SOURCE_MAX_BYTES it is refused by its size, nothing of it decoded; under it, the
    record shows its start."""
    with redis.Redis.from_url(redis_url) as r:
        large = r.xadd(stream, {"other": b"\xd0" * (LIMIT + 1)})
        small = r.xadd(stream, {"other": "значение"})
    site = FakeSite()

    run(redis_worker(db_url, engine, site, redis_url, stream, source_max_bytes=LIMIT))

    records = quarantined(engine)
    error = records[f"redis-{stream}-{large.decode()}"]["last_error"]
    assert "(no field intent)" in error
    assert f"{LIMIT + 6} bytes, more than EXCHANGE_SOURCE_MAX_BYTES ({LIMIT})" in error
    assert "\ufffd" not in error, "nothing of it decoded"
    shown = records[f"redis-{stream}-{small.decode()}"]["last_error"]
    assert '(no field intent: {"other": "' + json.dumps("значение")[1:-1] in shown
    assert 0 == pending(redis_url, stream)


def status_json(tmp_path: Path, db_url: str, **env: str) -> tuple[int, dict[str, Any]]:
    """``exchange status --json`` as an operator's monitoring runs it beside the worker (in
    this process, between two turns of the worker's event loop: clitools puts back what a
    command changes)."""
    result = Cli(tmp_path)("status", "--json", db=db_url, env=env)
    assert result.returncode in (0, 1), describe(result)
    return result.returncode, json.loads(result.stdout)


def test_a_consumer_the_broker_cancels_consumes_again_and_status_says_it_meanwhile(
    db_url: str,
    engine: Engine,
    rabbitmq_url: str,
    queue: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Contract 15, issue 33 item 2: after basic.cancel (the queue deleted and declared again)
    the source consumes again (passive declare, a backoff while the queue is missing), says it
    once, and meanwhile ``status`` shows ``consuming: false`` with a cause (exit 1)."""
    caplog.set_level(logging.INFO, logger="exchange")
    publish(rabbitmq_url, queue, [body(intent("SKU-1", 1))])
    site = FakeSite()
    worker = rabbit_worker(db_url, engine, site, rabbitmq_url=rabbitmq_url, rabbitmq_queue=queue)
    source: Any = worker.source
    env = {
        "EXCHANGE_SOURCE": "rabbitmq",
        "EXCHANGE_RABBITMQ_URL": rabbitmq_url,
        "EXCHANGE_RABBITMQ_QUEUE": queue,
    }

    async def on_broker(work: Any) -> None:
        connection = await aio_pika.connect(rabbitmq_url)
        try:
            await work(await connection.channel())
        finally:
            await connection.close()

    async def deleted_and_declared_again() -> None:
        await drain(worker)
        # Deleted and declared again at once (as a leader moving looks): consumed again.
        await on_broker(lambda channel: channel.queue_delete(queue))
        await on_broker(lambda channel: channel.declare_queue(queue, durable=True))
        await asyncio.to_thread(publish, rabbitmq_url, queue, [body(intent("SKU-2", 1))])
        await drain(worker)

    async def deleted_for_a_while() -> None:
        await on_broker(lambda channel: channel.queue_delete(queue))
        for _ in range(5):  # the queue is missing: each cycle tries, after the backoff
            await worker.cycle()
            source._retry_at = 0  # no backoff in a test
            await asyncio.sleep(0.05)

    async def back() -> None:
        await on_broker(lambda channel: channel.declare_queue(queue, durable=True))
        await asyncio.to_thread(publish, rabbitmq_url, queue, [body(intent("SKU-3", 1))])
        await drain(worker)

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(deleted_and_declared_again())
        loop.run_until_complete(deleted_for_a_while())
        code, shown = status_json(tmp_path, db_url, **env)
        loop.run_until_complete(back())
        _, after = status_json(tmp_path, db_url, **env)
    finally:
        loop.run_until_complete(worker.aclose())
        loop.close()

    assert {("price", f"SKU-{n}"): [1] for n in (1, 2, 3)} == site.applied
    (entry,) = shown["sources"]
    assert False is entry["consuming"]
    assert "cancelled the consumer" in entry["cause"] and entry["since"]
    assert 1 == code and "source" in shown["needs_person_causes"]
    assert True is after["sources"][0]["consuming"] and after["sources"][0]["cause"] is None
    said = [r.getMessage() for r in caplog.records if r.name.startswith("exchange")]
    assert 2 == sum("cancelled the consumer" in line for line in said), said
    assert 2 == sum("consuming the queue" in line and "again" in line for line in said), said


def test_a_redis_group_that_disappeared_is_created_again_and_status_warns_of_lost_entries(
    db_url: str,
    engine: Engine,
    redis_url: str,
    stream: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Contract 15, issue 33 item 3: NOGROUP (DEL, XGROUP DESTROY, a restart without
    persistence) makes the group again (XGROUP CREATE ... 0 MKSTREAM), says it, and status's
    ``sources[].warning`` (text, since) says entries may have been lost; an entry read again
    is a duplicate, never a second message."""
    with redis.Redis.from_url(redis_url) as r:
        r.xadd(stream, {"intent": body(intent("SKU-1", 1))})
    site = FakeSite()
    worker = redis_worker(db_url, engine, site, redis_url, stream)

    async def go() -> None:
        try:
            await drain(worker)
            with redis.Redis.from_url(redis_url) as r:
                r.xgroup_destroy(stream, "exchange")  # the stream's SKU-1 is read again
                r.xadd(stream, {"intent": body(intent("SKU-2", 1))})
            await drain(worker)
            with redis.Redis.from_url(redis_url) as r:
                r.delete(stream)
                r.xadd(stream, {"intent": body(intent("SKU-3", 1))})
            await drain(worker)
        finally:
            await worker.aclose()

    asyncio.run(go())
    code, shown = status_json(
        tmp_path,
        db_url,
        EXCHANGE_SOURCE="redis",
        EXCHANGE_REDIS_URL=redis_url,
        EXCHANGE_REDIS_STREAM=stream,
    )

    assert {("price", f"SKU-{n}"): [1] for n in (1, 2, 3)} == site.applied
    with transaction(engine, read_only=True) as connection:
        assert 3 == connection.execute(select(func.count()).select_from(messages)).scalar_one()
    (entry,) = shown["sources"]
    assert True is entry["consuming"]
    assert "entries may have been lost with the stream" in entry["warning"]["text"]
    assert entry["warning"]["since"]
    assert 0 == code, shown["needs_person"]
    assert 0 == pending(redis_url, stream)
    said = [r.getMessage() for r in caplog.records if r.name.startswith("exchange")]
    assert 2 == sum("disappeared and was created again" in line for line in said), said
