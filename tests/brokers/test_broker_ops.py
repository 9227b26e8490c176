"""``exchange check`` and ``exchange status`` for the brokers (contract 12, issue 26 item 5),
against the real RabbitMQ and Redis: check reaches the broker, the queue or stream and, for
the target, the exchange; ``status --json`` has ``sources``, what each has ready and pending."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from brokerkit import amqp, publish
from typer.testing import CliRunner

from exchange.cli import app
from exchange.db.engine import make_engine
from exchange.ops.check import Status, check_source, check_target
from exchange.settings import load_settings

DB = "sqlite:///:memory:"


def results(settings: Any) -> list[tuple[Status, str, str]]:
    found = check_source(settings, make_engine(DB))
    return [(r.status, r.what, r.detail) for r in found]


@pytest.fixture
def exchange_name(rabbitmq_url: str) -> Iterator[str]:
    name = f"exchange-test-{uuid.uuid4().hex[:10]}"

    async def declare(channel: Any) -> None:
        await channel.declare_exchange(name, "topic", durable=True)

    amqp(rabbitmq_url, declare)
    yield name

    async def delete(channel: Any) -> None:
        await channel.exchange_delete(name)

    amqp(rabbitmq_url, delete)


def test_check_reaches_the_rabbitmq_queue_and_names_a_missing_one(
    rabbitmq_url: str, queue: str
) -> None:
    publish(rabbitmq_url, queue, [b"{}", b"{}"])
    there = load_settings(
        database_url=DB, source="rabbitmq", rabbitmq_url=rabbitmq_url, rabbitmq_queue=queue
    )
    missing = there.model_copy(update={"rabbitmq_queue": f"{queue}-missing"})

    ((status, what, detail),) = results(there)
    assert (Status.OK, "rabbitmq source") == (status, what)
    assert f"queue {queue}: 2 ready" in detail
    ((status, _, detail),) = results(missing)
    assert Status.FAIL == status
    assert f"EXCHANGE_RABBITMQ_QUEUE: RabbitMQ has no queue '{queue}-missing'" == detail


def test_check_says_when_the_broker_refuses_the_password_never_showing_it(
    rabbitmq_url: str, queue: str
) -> None:
    settings = load_settings(
        database_url=DB,
        source="rabbitmq",
        rabbitmq_url=rabbitmq_url.replace("guest:guest", "guest:wrong-secret-77"),
        rabbitmq_queue=queue,
    )
    ((status, _, detail),) = results(settings)
    assert (Status.FAIL, "EXCHANGE_RABBITMQ_URL: RabbitMQ refused the user or password") == (
        status,
        detail,
    )


def test_check_reaches_the_redis_stream(redis_url: str, stream: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.xadd(stream, {"intent": "{}"})
    client.close()
    settings = load_settings(
        database_url=DB, source="redis", redis_url=redis_url, redis_stream=stream
    )
    ((status, what, detail),) = results(settings)
    assert (Status.OK, "redis source") == (status, what)
    assert f"stream {stream}" in detail and "1 ready" in detail, detail


def test_no_source_no_line() -> None:
    assert [] == results(load_settings(database_url=DB))


def test_check_for_the_rabbitmq_target_says_whether_the_exchange_exists(
    rabbitmq_url: str, exchange_name: str
) -> None:
    def check(exchange: str, url: str = rabbitmq_url) -> tuple[Status, str]:
        settings = load_settings(
            database_url=DB, target="rabbitmq", rabbitmq_url=url, rabbitmq_exchange=exchange
        )
        ((result),) = check_target(settings)
        return result.status, result.detail

    assert Status.OK == check(exchange_name)[0]
    status, detail = check(f"{exchange_name}-missing")
    assert Status.FAIL == status
    assert f"RabbitMQ has no exchange '{exchange_name}-missing'" in detail
    status, detail = check(exchange_name, "amqp://guest:guest@127.0.0.1:1/")
    assert Status.FAIL == status and "cannot be reached" in detail


def test_status_json_shows_what_each_source_has_ready_and_pending(
    tmp_path: Any, rabbitmq_url: str, queue: str, redis_url: str, stream: str
) -> None:
    database = f"sqlite:///{tmp_path}/exchange.db"
    runner = CliRunner()
    base = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env = {**base, "EXCHANGE_DATABASE_URL": database}
    assert 0 == runner.invoke(app, ["migrate"], env=env).exit_code
    publish(rabbitmq_url, queue, [b"{}"] * 3)
    client = redis.Redis.from_url(redis_url)
    client.xadd(stream, {"intent": "{}"})
    client.close()

    def sources(**extra: str) -> Any:
        shown = runner.invoke(app, ["status", "--json"], env={**env, **extra})
        assert shown.exit_code in (0, 1), shown.output
        return json.loads(shown.stdout)["sources"]

    assert [] == sources()
    (rabbit,) = sources(
        EXCHANGE_SOURCE="rabbitmq",
        EXCHANGE_RABBITMQ_URL=rabbitmq_url,
        EXCHANGE_RABBITMQ_QUEUE=queue,
    )
    assert {"source": "rabbitmq", "queue": queue, "ready": 3, "pending": None} == {
        k: rabbit[k] for k in ("source", "queue", "ready", "pending")
    }
    (stream_figures,) = sources(
        EXCHANGE_SOURCE="redis", EXCHANGE_REDIS_URL=redis_url, EXCHANGE_REDIS_STREAM=stream
    )
    assert ("redis", 1) == (stream_figures["source"], stream_figures["ready"])
    (gone,) = sources(
        EXCHANGE_SOURCE="rabbitmq",
        EXCHANGE_RABBITMQ_URL="amqp://guest:guest@127.0.0.1:1/",
        EXCHANGE_RABBITMQ_QUEUE=queue,
    )
    assert "rabbitmq" == gone["source"] and "cannot be reached" in gone["error"]
