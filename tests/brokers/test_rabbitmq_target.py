"""RabbitMQ as a target (contract 12), against the real broker, on SQLite and PostgreSQL: what
``exchange run`` publishes (the site API's body, routing key = kind, message_id, persistent),
every kind in its order, an unroutable message quarantined ``unroutable``, and a broker that is
gone or cut mid-publish: nothing charged for a refusal, nothing lost."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import aiormq
import pika
import pytest
from brokerkit import RABBITMQ_URL
from conformance import price
from sqlalchemy import Engine, select
from tcpproxy import TcpProxy

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.dev.testing import (
    drain,
    fast_settings,
    one_channel_messages,
    posting_row,
    price_row,
    stage,
)
from exchange.domain.verdicts import Verdict
from exchange.errors import ConfigurationError
from exchange.settings import load_settings
from exchange.targets.rabbitmq.target import RabbitMqTarget
from exchange.worker import Worker

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()


class Shop:
    """The shop's side of the broker: a durable topic exchange and a queue bound for some
    routing keys, read back with basic.get."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        name = f"exchange-test-{uuid.uuid4().hex[:10]}"
        self.exchange, self.queue = name, f"{name}-shop"

        def declare(channel: Any) -> None:
            channel.exchange_declare(self.exchange, "topic", durable=True)
            channel.queue_declare(self.queue, durable=True)
            for key in keys:
                channel.queue_bind(self.queue, self.exchange, routing_key=key)

        self._broker(declare)

    def _broker(self, work: Any) -> Any:
        connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
        try:
            return work(connection.channel())
        finally:
            connection.close()

    def received(self) -> list[tuple[str, Any, dict[str, Any]]]:
        """(routing key, properties, body) of every message in the queue, in order."""

        def drain_queue(channel: Any) -> list[tuple[str, Any, dict[str, Any]]]:
            out = []
            while True:
                method, properties, content = channel.basic_get(self.queue, auto_ack=True)
                if method is None:
                    return out
                out.append((method.routing_key, properties, json.loads(content)))

        return list(self._broker(drain_queue))

    def delete(self) -> None:
        def delete(channel: Any) -> None:
            channel.queue_delete(self.queue)
            channel.exchange_delete(self.exchange)

        self._broker(delete)


@pytest.fixture
def shop(rabbitmq_url: str) -> Iterator[Shop]:
    shop = Shop(("price", "financial_posting"))
    yield shop
    shop.delete()


def make_worker(db_url: str, engine: Engine, url: str, exchange: str, **overrides: Any) -> Worker:
    settings = fast_settings(
        db_url,
        None,
        target="rabbitmq",
        rabbitmq_url=url,
        rabbitmq_exchange=exchange,
        **overrides,
    )
    return bootstrap.worker(settings, engine, rng=random.Random(5))


def run(worker: Worker, cycles: int = 400) -> None:
    async def go() -> None:
        try:
            await drain(worker, cycles=cycles)
        finally:
            await worker.aclose()

    asyncio.run(go())


def states(engine: Engine) -> dict[tuple[str, int], tuple[str, str | None, int]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(
                messages.c.aggregate,
                messages.c.version,
                messages.c.state,
                messages.c.reason,
                messages.c.attempts,
            ).where(messages.c.rejected.is_(False))
        )
        return {(a, v): (s, r, n) for a, v, s, r, n in rows}


def test_each_message_goes_with_the_site_body_its_kind_as_routing_key_and_its_message_id(
    db_url: str, engine: Engine, rabbitmq_url: str, shop: Shop
) -> None:
    stage(engine, [price_row("SKU-1", 1, "840.00"), price_row("SKU-2", 7, "12.50")])
    stage(engine, [posting_row("DOC-1", v) for v in (1, 2, 3)])

    run(make_worker(db_url, engine, rabbitmq_url, shop.exchange))

    received = shop.received()
    assert {"delivered"} == {s for s, _, _ in states(engine).values()}
    assert 5 == len(received)
    for key, properties, content in received:
        assert content["kind"] == key, "routing key = kind"
        assert content["message_id"] == properties.message_id, "the consumer's idempotency key"
        assert 2 == properties.delivery_mode, "persistent"
        assert "application/json" == properties.content_type
        assert {"message_id", "kind", "aggregate", "version", "payload", "created_at"} == set(
            content
        ), "the site API's body (contract 5), nothing more"
    prices = {c["aggregate"]: c for k, _, c in received if k == "price"}
    assert "840.00" == prices["SKU-1"]["payload"]["price"], "decimals exactly as accepted"
    postings = [c["version"] for k, _, c in received if k == "financial_posting"]
    assert [1, 2, 3] == postings, "a strict kind keeps its order"


def test_a_message_no_queue_is_bound_for_is_quarantined_unroutable_and_the_rest_delivered(
    db_url: str, engine: Engine, rabbitmq_url: str
) -> None:
    shop = Shop(("price",))  # nobody reads postings
    try:
        stage(engine, [price_row("SKU-1", 1), posting_row("DOC-1", 1)])

        run(make_worker(db_url, engine, rabbitmq_url, shop.exchange))

        found = states(engine)
        assert ("delivered", None, 1) == found[("SKU-1", 1)]
        assert ("quarantined", "unroutable", 1) == found[("DOC-1", 1)]
        assert ["price"] == [key for key, _, _ in shop.received()]
    finally:
        shop.delete()


def test_a_missing_exchange_pauses_delivery_and_charges_nobody(
    db_url: str, engine: Engine, rabbitmq_url: str
) -> None:
    stage(engine, [price_row("SKU-1", 1)])
    worker = make_worker(db_url, engine, rabbitmq_url, f"exchange-test-{uuid.uuid4().hex}")

    async def go() -> None:
        try:
            for _ in range(3):
                await worker.cycle()
        finally:
            await worker.aclose()

    asyncio.run(go())

    assert worker.paused_reason is not None and "has no exchange" in worker.paused_reason
    state, _, attempts = states(engine)[("SKU-1", 1)]
    assert ("new", 0) == (state, attempts), "nobody charged or quarantined"


def test_a_broker_that_refuses_the_connection_charges_nothing_and_all_arrive_when_it_is_back(
    db_url: str, engine: Engine, rabbitmq_url: str, shop: Shop
) -> None:
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(8)])
    with TcpProxy("127.0.0.1", 5672) as proxy:
        url = f"amqp://guest:guest@127.0.0.1:{proxy.port}/"
        proxy.cut()
        worker = make_worker(db_url, engine, url, shop.exchange, max_attempts=2)

        async def go() -> None:
            try:
                for _ in range(20):  # far past max_attempts, were refusals charged
                    await worker.cycle()
                    await asyncio.sleep(0.005)
                down = states(engine)
                assert all(s != "quarantined" and n == 0 for s, _, n in down.values()), down
                proxy.restore()
                await drain(worker, cycles=2000)
            finally:
                await worker.aclose()

        asyncio.run(go())

    assert {("delivered", 1)} == {(s, n) for s, _, n in states(engine).values()}
    assert 8 == len({c["message_id"] for _, _, c in shop.received()})


def test_the_connection_cut_mid_publish_loses_nothing(
    db_url: str, engine: Engine, rabbitmq_url: str, shop: Shop
) -> None:
    count = 300
    stage(engine, [price_row(f"SKU-{n:04d}", 1) for n in range(count)])
    with TcpProxy("127.0.0.1", 5672) as proxy:
        url = f"amqp://guest:guest@127.0.0.1:{proxy.port}/"
        worker = make_worker(db_url, engine, url, shop.exchange, max_attempts=50)
        cuts = 0

        def cut_while_publishing() -> None:
            nonlocal cuts
            # One cut while publishing suffices (cuts >= 1): 300 publishes with confirms leave
            # the cutter many 5 ms looks; 30 s is a hang guard, the sleeps are the cut's shape
            deadline = time.monotonic() + 30
            while cuts < 3 and time.monotonic() < deadline:
                if proxy.open_connections:
                    time.sleep(0.02)  # some published, some not yet confirmed
                    cuts += proxy.cut() > 0
                    time.sleep(0.05)
                    proxy.restore()
                time.sleep(0.005)

        cutter = threading.Thread(target=cut_while_publishing)
        cutter.start()
        run(worker, cycles=5000)
        cutter.join()

    assert cuts >= 1
    found = states(engine)
    assert {"delivered"} == {s for s, _, _ in found.values()}, "every message, none quarantined"
    received = {c["message_id"] for _, _, c in shop.received()}
    assert count == len(received), "a result unknown is published again: nothing lost"


def test_the_rabbitmq_target_takes_every_kind_and_needs_its_url_and_exchange() -> None:
    base = {"database_url": "sqlite:///:memory:", "target": "rabbitmq"}
    with pytest.raises(
        ConfigurationError, match="EXCHANGE_TARGET=rabbitmq needs EXCHANGE_RABBITMQ_URL"
    ):
        load_settings(**base, rabbitmq_exchange="prices")
    with pytest.raises(ConfigurationError, match="needs EXCHANGE_RABBITMQ_EXCHANGE"):
        load_settings(**base, rabbitmq_url="amqp://guest:guest@127.0.0.1/")
    settings = load_settings(
        **base,
        rabbitmq_url="amqp://guest:guest@127.0.0.1/",
        rabbitmq_exchange="prices",
        kinds={"price": "latest-wins", "financial_posting": "strict", "stock": "latest-wins"},
    )
    assert {"price", "financial_posting", "stock"} == set(settings.kinds)


@pytest.mark.parametrize("cut", ["channel", "declare"])
def test_a_connection_cut_before_its_channel_opens_is_temporary_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, cut: str
) -> None:
    """The cut can fall between the connection and its channel (found by the full suite's
    cut-mid-publish test once): that is "cannot be reached", retried, never an exception out of
    ``send`` (which ended the worker's cycle)."""
    lost = aiormq.exceptions.AMQPConnectionError("Server connection unexpectedly closed")

    class Channel:
        is_closed = False

        async def exchange_declare(self, *args: object, **kwargs: object) -> None:
            raise lost

    class Connection:
        closed = False

        async def channel(self, **kwargs: object) -> Channel:
            if cut == "channel":
                raise lost
            return Channel()

        async def close(self) -> None:
            self.closed = True

    connection = Connection()

    async def connect(url: str) -> Connection:
        return connection

    monkeypatch.setattr(aiormq, "connect", connect)
    target = RabbitMqTarget(lambda: "amqp://guest:secret-pw@127.0.0.1:1/", "prices", timeout=5)

    [answer] = asyncio.run(target.send([price("SKU-1", 1)]))

    assert Verdict.TEMPORARY == answer.verdict and answer.site_wide, answer
    assert "cannot be reached" in answer.detail and "secret-pw" not in answer.detail
    assert connection.closed
