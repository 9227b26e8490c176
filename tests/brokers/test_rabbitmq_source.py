"""RabbitMQ as a way in (contract 12), against the real broker, on SQLite and PostgreSQL:
``exchange run`` takes the queue at each cycle's intake, stages through the JSON intake's code,
acknowledges only after the commit, records what is not an intent, and never stops on a broker
that is gone."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from brokerkit import amqp, publish, queue_counts, run_worker, source_worker
from sqlalchemy import Engine, func, select

from exchange.db.engine import transaction
from exchange.db.schema import staging
from exchange.dev.testing import FakeSite, drain, message, one_channel_messages, price_row, stage
from exchange.errors import BrokerUnavailable, ConfigurationError
from exchange.worker import Worker

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()


def intent(sku: str, version: int, price: str = "100.00") -> dict[str, Any]:
    row = price_row(sku, version, price)
    row["payload"] = json.loads(row["payload"])
    return row


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


def make_worker(db_url: str, engine: Engine, site: FakeSite, **overrides: Any) -> Worker:
    return source_worker(db_url, engine, site, "rabbitmq", **overrides)


run = run_worker


def quarantined(engine: Engine) -> list[dict[str, Any]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages).where(messages.c.state == "quarantined").order_by(messages.c.id)
        )
        return [dict(row) for row in rows.mappings()]


def staged_rows(engine: Engine) -> int:
    with transaction(engine, read_only=True) as connection:
        return int(connection.execute(select(func.count()).select_from(staging)).scalar_one())


def test_every_body_shape_is_staged_delivered_and_acknowledged(
    db_url: str, engine: Engine, rabbitmq_url: str, queue: str
) -> None:
    publish(
        rabbitmq_url,
        queue,
        [
            body(intent("SKU-1", 1)),
            body([intent("SKU-2", 1), intent("SKU-3", 1)]),
            body({"intents": [intent("SKU-4", 1, "840.00")]}),
        ],
    )
    site = FakeSite()
    worker = make_worker(db_url, engine, site, rabbitmq_url=rabbitmq_url, rabbitmq_queue=queue)

    run(worker)

    assert {("price", f"SKU-{n}"): [1] for n in range(1, 5)} == site.applied
    assert "840.00" == json.loads(message(engine, "price", "SKU-4", 1)["payload"])["price"]
    assert 0 == queue_counts(rabbitmq_url, queue), "acknowledged: nothing comes back"


def test_a_redelivery_after_the_commit_is_a_duplicate_and_stages_nothing_twice(
    db_url: str, engine: Engine, rabbitmq_url: str, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aio_pika

    publish(rabbitmq_url, queue, [body(intent("SKU-1", 7))])
    site = FakeSite()
    worker = make_worker(db_url, engine, site, rabbitmq_url=rabbitmq_url, rabbitmq_queue=queue)
    seen: list[bool] = []

    async def lost(self: aio_pika.IncomingMessage, multiple: bool = False) -> None:
        seen.append(self.redelivered)
        raise ConnectionError("the connection dropped before the ack")

    async def scenario() -> None:
        assert worker.source is not None
        try:
            with monkeypatch.context() as patch:
                patch.setattr(aio_pika.IncomingMessage, "ack", lost)
                with pytest.raises(BrokerUnavailable, match="connection lost"):
                    await worker.source.pull()  # staged and committed, never acknowledged
            worker.source._retry_at = 0  # type: ignore[attr-defined]  # no backoff in a test
            await drain(worker)  # the broker delivers it again
        finally:
            await worker.aclose()

    asyncio.run(scenario())

    assert [False] == seen
    assert 1 == staged_rows(engine), "the redelivery staged nothing"
    assert {("price", "SKU-1"): [7]} == site.applied
    assert [] == quarantined(engine)
    assert 0 == queue_counts(rabbitmq_url, queue)


HOSTILE = [
    b"not json at all",
    b'{"foo": 1}',
    b"[1, 2]",
    b"[]",
    b"\x00\xff\xfe binary \x00",
    b'{"intents": {"not": "a list"}}',
    b"[" * 100_000,
    body({"kind": "price", "aggregate": "SKU-9", "aggregate_version": "x", "payload": {}}),
]


def test_a_body_that_is_not_intents_is_recorded_once_and_never_requeued(
    db_url: str, engine: Engine, rabbitmq_url: str, queue: str
) -> None:
    publish(rabbitmq_url, queue, [*HOSTILE, body(intent("SKU-1", 1))])
    publish(rabbitmq_url, queue, [b"secret body, token=abc"], message_id="order-17")
    site = FakeSite()

    run(make_worker(db_url, engine, site, rabbitmq_url=rabbitmq_url, rabbitmq_queue=queue))
    # The same bodies again (a redelivery, a resend): the same records, none more; another body
    # under a message_id already recorded is another message, recorded too (contract 15).
    publish(rabbitmq_url, queue, HOSTILE)
    publish(rabbitmq_url, queue, [b"secret body, token=abc"], message_id="order-17")
    publish(rabbitmq_url, queue, [b"another body"], message_id="order-17")
    run(make_worker(db_url, engine, site, rabbitmq_url=rabbitmq_url, rabbitmq_queue=queue))

    records = quarantined(engine)
    assert len(HOSTILE) + 2 == len(records)
    assert {"invalid-contract"} == {r["reason"] for r in records}
    assert all(r["rejected"] for r in records)
    by_id = {r["message_id"]: r for r in records}
    assert "secret body, token=abc" == by_id["rabbitmq-order-17"]["payload"], "the first body"
    assert "message_id order-17" in by_id["rabbitmq-order-17"]["last_error"]
    (other,) = [i for i in by_id if i.startswith("rabbitmq-order-17#")]
    assert "another body" == by_id[other]["payload"]
    assert all("\x00" not in r["payload"] for r in records)
    assert {("price", "SKU-1"): [1]} == site.applied, "a bad message never stops the others"
    assert 0 == queue_counts(rabbitmq_url, queue), "not requeued"


def test_a_refused_intent_is_quarantined_with_its_reason_beside_the_good_ones(
    db_url: str, engine: Engine, rabbitmq_url: str, queue: str
) -> None:
    unknown = {**intent("DOC-1", 1), "kind": "invoice"}
    negative = intent("SKU-2", 1, "-5.00")
    publish(rabbitmq_url, queue, [body([intent("SKU-1", 1), unknown, negative])], message_id="m1")
    site = FakeSite()

    run(make_worker(db_url, engine, site, rabbitmq_url=rabbitmq_url, rabbitmq_queue=queue))

    records = {r["message_id"]: r for r in quarantined(engine)}
    assert {"rabbitmq-m1-1", "rabbitmq-m1-2"} == set(records)
    assert ("unknown-kind", "invoice", "DOC-1") == (
        records["rabbitmq-m1-1"]["reason"],
        records["rabbitmq-m1-1"]["kind"],
        records["rabbitmq-m1-1"]["aggregate"],
    )
    assert "invalid-contract" == records["rabbitmq-m1-2"]["reason"]
    assert {("price", "SKU-1"): [1]} == site.applied


def test_a_bad_message_goes_to_the_queues_dead_letter_exchange(
    db_url: str, engine: Engine, rabbitmq_url: str
) -> None:
    name = f"exchange-test-{uuid.uuid4().hex[:10]}"

    async def declare(channel: Any) -> None:
        dlx = await channel.declare_exchange(f"{name}.dlx", "fanout", auto_delete=True)
        dead = await channel.declare_queue(f"{name}.dead", auto_delete=True)
        await dead.bind(dlx)
        await channel.declare_queue(
            name, durable=True, arguments={"x-dead-letter-exchange": f"{name}.dlx"}
        )

    async def delete(channel: Any) -> None:
        for queue in (name, f"{name}.dead"):
            await channel.queue_delete(queue)

    amqp(rabbitmq_url, declare)
    try:
        publish(rabbitmq_url, name, [b"not an intent", body(intent("SKU-1", 1))])
        site = FakeSite()
        run(make_worker(db_url, engine, site, rabbitmq_url=rabbitmq_url, rabbitmq_queue=name))

        assert 0 == queue_counts(rabbitmq_url, name)
        assert 1 == queue_counts(rabbitmq_url, f"{name}.dead"), "dead-lettered, not dropped"
        assert 1 == len(quarantined(engine)), "and recorded first"
    finally:
        amqp(rabbitmq_url, delete)


def test_a_broker_that_is_gone_never_stops_delivery_of_the_staging_table(
    db_url: str, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    stage(engine, [price_row("SKU-1", 1)])
    site = FakeSite()
    worker = make_worker(
        db_url,
        engine,
        site,
        rabbitmq_url="amqp://guest:hunter2-secret@127.0.0.1:1/",
        rabbitmq_queue="q",
    )

    async def scenario() -> None:
        try:
            await worker.cycle()
            with pytest.raises(BrokerUnavailable, match="RabbitMQ"):
                assert worker.source is not None
                await worker.source.pull()  # still gone: an error, not a crash
        finally:
            await worker.aclose()

    asyncio.run(scenario())

    assert {("price", "SKU-1"): [1]} == site.applied
    assert "RabbitMQ cannot be reached" in caplog.text
    assert "hunter2-secret" not in caplog.text
    assert not worker.idle(), "--until-idle does not call a broker it cannot see idle"


def test_a_missing_queue_is_a_clear_configuration_error(
    db_url: str, engine: Engine, rabbitmq_url: str
) -> None:
    worker = make_worker(
        db_url, engine, FakeSite(), rabbitmq_url=rabbitmq_url, rabbitmq_queue="no-such-q"
    )

    async def scenario() -> None:
        assert worker.source is not None
        try:
            with pytest.raises(ConfigurationError, match="no queue 'no-such-q'"):
                await worker.source.pull()
            with pytest.raises(ConfigurationError, match="no queue 'no-such-q'"):
                await worker.source.check()
        finally:
            await worker.aclose()

    asyncio.run(scenario())
