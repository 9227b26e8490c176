"""The log of a lost broker connection (issue 26 item 4): the RabbitMQ connection cut under a
running worker, through a TCP proxy in front of the real broker. aiormq's traceback of its
reader's exit stays out of the log at INFO; the source says what happened in one line,
reconnects with its backoff (the cycles that wait it out say nothing more at WARNING), and
everything published is staged once."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import random
from collections.abc import Iterator

import httpx
import pika
import pytest
from sqlalchemy import Engine, func, select
from tcpproxy import TcpProxy

from exchange import app as bootstrap
from exchange import logs
from exchange.db.engine import transaction
from exchange.db.schema import messages
from exchange.dev.testing import FakeSite, drain, fast_settings, price_row

LOST = "RabbitMQ: the connection was lost"


def publish(url: str, queue: str, first: int, count: int) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    for n in range(first, first + count):
        row = price_row(f"SKU-{n:05d}", 1)
        row["payload"] = json.loads(row["payload"])
        channel.basic_publish(
            "", queue, json.dumps(row).encode(), pika.BasicProperties(delivery_mode=2)
        )
    connection.close()


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    pika_logger = logging.getLogger("pika")  # the test's own publisher narrates at INFO
    saved = (root.level, list(root.handlers), pika_logger.level)
    pika_logger.setLevel(logging.WARNING)
    yield
    root.setLevel(saved[0])
    pika_logger.setLevel(saved[2])
    for handler in list(root.handlers):
        if handler not in saved[1]:
            root.removeHandler(handler)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.usefixtures("restore_logging")
def test_a_cut_rabbitmq_connection_is_one_clear_line_and_no_traceback_at_error(
    db_url: str, engine: Engine, rabbitmq_url: str, queue: str
) -> None:
    site = FakeSite()
    stream = io.StringIO()
    with TcpProxy("127.0.0.1", 5672) as proxy:
        settings = fast_settings(
            db_url,
            "https://site.test",
            source="rabbitmq",
            rabbitmq_url=f"amqp://guest:guest@127.0.0.1:{proxy.port}/",
            rabbitmq_queue=queue,
            log_format="text",
            log_level="INFO",
        )
        logs.configure(settings, stream=stream)
        worker = bootstrap.worker(
            settings, engine, transport=httpx.MockTransport(site), rng=random.Random(3)
        )

        async def go() -> None:
            try:
                publish(rabbitmq_url, queue, 0, 20)
                await drain(worker)
                assert proxy.cut(), "the source was connected"
                # aiormq's reader sees the end: the next cycle finds the channel closed. Were
                # load to delay it, the cycle would meet the cut mid-pull, which says the same
                # one line (checked with no sleep at all): no margin of time involved.
                await asyncio.sleep(0.3)
                for _ in range(5):  # cycles while the broker refuses: the backoff's
                    await worker.cycle()
                    await asyncio.sleep(0.05)  # a count of cycles, not a time
                proxy.restore()
                publish(rabbitmq_url, queue, 20, 20)
                for _ in range(200):
                    await drain(worker)
                    with transaction(engine, read_only=True) as connection:
                        made = connection.execute(
                            select(func.count()).select_from(messages)
                        ).scalar_one()
                    if made == 40:
                        break
                    await asyncio.sleep(0.05)
            finally:
                await worker.aclose()

        asyncio.run(go())

    text = stream.getvalue()
    assert "Traceback" not in text, text
    assert not [line for line in text.splitlines() if " ERROR " in line], text
    lost = [line for line in text.splitlines() if LOST in line]
    assert 1 == len(lost), text
    assert " WARNING exchange.intake.sources.rabbitmq: " in lost[0] and "reconnecting" in lost[0]
    assert "RabbitMQ: connected again to the queue" in text
    assert "reconnecting in" not in text, "a cycle waiting out the backoff says nothing more"
    assert {("price", f"SKU-{n:05d}"): [1] for n in range(40)} == site.applied
