"""The real brokers of contract 12: RabbitMQ on 127.0.0.1:5672 (guest/guest) and Redis on
127.0.0.1:6379, as CI runs them (.ci/run starts them). Each test gets a queue or stream of its
own, removed after. Without a broker a test fails under CI=true, as PostgreSQL's do, and is
skipped on a developer's machine that runs none."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from brokerkit import RABBITMQ_URL, REDIS_URL, amqp, require


@pytest.fixture
def rabbitmq_url() -> str:
    require("RabbitMQ", "127.0.0.1", 5672)
    return RABBITMQ_URL


@pytest.fixture
def redis_url() -> str:
    require("Redis", "127.0.0.1", 6379)
    return REDIS_URL


@pytest.fixture
def queue(rabbitmq_url: str) -> Iterator[str]:
    """A durable queue of this test's own, deleted after."""
    name = f"exchange-test-{uuid.uuid4().hex[:10]}"

    async def declare(channel: Any) -> None:
        await channel.declare_queue(name, durable=True)

    amqp(rabbitmq_url, declare)
    yield name

    async def delete(channel: Any) -> None:
        await channel.queue_delete(name)

    amqp(rabbitmq_url, delete)


@pytest.fixture
def stream(redis_url: str) -> Iterator[str]:
    import redis

    name = f"exchange-test-{uuid.uuid4().hex[:10]}"
    yield name
    client = redis.Redis.from_url(redis_url)
    client.delete(name)
    client.close()
