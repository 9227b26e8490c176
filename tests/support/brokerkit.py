"""Helpers for the broker tests (tests/brokers is on pytest's pythonpath): the test's side of
the real RabbitMQ and Redis."""

from __future__ import annotations

import asyncio
import os
import random
import socket
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange.dev.testing import FakeSite, drain, fast_settings
from exchange.worker import Worker

RABBITMQ_URL = os.environ.get("EXCHANGE_TEST_RABBITMQ", "amqp://guest:guest@127.0.0.1:5672/")
REDIS_URL = os.environ.get("EXCHANGE_TEST_REDIS", "redis://127.0.0.1:6379/0")


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def require(name: str, host: str, port: int) -> None:
    if _answers(host, port):
        return
    message = f"{name} is required for these tests and does not answer on {host}:{port}"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


async def _amqp(url: str, work: Any) -> Any:
    import aio_pika

    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        return await work(channel)
    finally:
        await connection.close()


def amqp(url: str, work: Any) -> Any:
    """Run ``work(channel)`` on a connection of its own (the test's side of the broker)."""
    return asyncio.run(_amqp(url, work))


def publish(url: str, queue: str, bodies: list[bytes], message_id: str | None = None) -> None:
    """Publish ``bodies`` to ``queue`` through the default exchange, persistent, confirmed, as
    a client that sets no ``message_id`` unless given one (pika: aio-pika always sets one)."""
    import pika

    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        for content in bodies:
            channel.basic_publish(
                "",
                queue,
                content,
                pika.BasicProperties(delivery_mode=2, message_id=message_id),
                mandatory=True,
            )
    finally:
        connection.close()


def queue_counts(url: str, queue: str) -> int:
    """Messages ready in ``queue``."""

    async def count(channel: Any) -> int:
        declared = await channel.declare_queue(queue, passive=True)
        return int(declared.declaration_result.message_count)

    return int(amqp(url, count))


def source_worker(
    db_url: str, engine: Engine, site: FakeSite, source: str, **overrides: Any
) -> Worker:
    """A worker that takes from ``source`` (rabbitmq or redis) and delivers to ``site``."""
    settings = fast_settings(db_url, "https://site.test", source=source, **overrides)
    return bootstrap.worker(
        settings, engine, transport=httpx.MockTransport(site), rng=random.Random(3)
    )


def run_worker(worker: Worker, cycles: int = 400) -> None:
    """Cycles until the worker is idle, then its connections closed."""

    async def go() -> None:
        try:
            await drain(worker, cycles=cycles)
        finally:
            await worker.aclose()

    asyncio.run(go())
