"""The workbench and the brokers, in a real browser (issue 26 item 5, contract 11 and 12):
bad messages put through the real RabbitMQ and Redis sources are listed on the exchanges page
(«Обмены 1С») with when, the source, the reason in Russian, and a link to the message."""

from __future__ import annotations

import asyncio
import logging
import random
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from brokerkit import RABBITMQ_URL, REDIS_URL, publish, require
from browser_helpers import new_page, sign_in
from sqlalchemy import Engine
from workbench_helpers import add_operator

from exchange import app as bootstrap
from exchange.db.engine import make_engine
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import drain, fast_settings


@pytest.fixture
def queue() -> Iterator[str]:
    """A durable queue of this test's own, deleted after (through pika: Playwright keeps an
    event loop running in the test's thread, so no ``asyncio.run`` here)."""
    require("RabbitMQ", "127.0.0.1", 5672)
    import pika

    name = f"exchange-test-{uuid.uuid4().hex[:10]}"

    def on_channel(work: Callable[[Any], Any]) -> None:
        connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
        try:
            work(connection.channel())
        finally:
            connection.close()

    on_channel(lambda channel: channel.queue_declare(name, durable=True))
    yield name
    on_channel(lambda channel: channel.queue_delete(name))


@pytest.fixture
def stream() -> Iterator[str]:
    require("Redis", "127.0.0.1", 6379)
    import redis

    name = f"exchange-test-{uuid.uuid4().hex[:10]}"
    yield name
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(name)
    client.close()


def take_from_source(db_url: str, site_url: str, **source: Any) -> None:
    """One worker draining with ``source`` configured, in a thread of its own (Playwright's
    synchronous API keeps an event loop in the test's thread)."""
    failed: list[BaseException] = []

    def run() -> None:
        engine = make_engine(db_url)
        try:
            worker = bootstrap.worker(
                fast_settings(db_url, site_url, **source), engine, rng=random.Random(5)
            )

            async def go() -> None:
                try:
                    await drain(worker)
                finally:
                    await worker.aclose()

            asyncio.run(go())
        except BaseException as exc:
            failed.append(exc)
        finally:
            engine.dispose()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(120)
    if failed:
        raise failed[0]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_bad_broker_messages_are_listed_on_the_exchanges_page_with_a_link_to_each(
    browser: Any,
    serve: Callable[..., Any],
    db: Engine,
    db_url: str,
    site: SiteSimulator,
    queue: str,
    stream: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import redis

    caplog.set_level(logging.INFO, logger="exchange.intake.sources")
    publish(RABBITMQ_URL, queue, [b'{"kind": "price", "aggregate": '], message_id="1c-bad-0001")
    client = redis.Redis.from_url(REDIS_URL)
    entry = client.xadd(stream, {"intent": b"[]"}).decode()
    client.close()
    take_from_source(
        db_url, site.url, source="rabbitmq", rabbitmq_url=RABBITMQ_URL, rabbitmq_queue=queue
    )
    take_from_source(db_url, site.url, source="redis", redis_url=REDIS_URL, redis_stream=stream)
    # Both sources say what they took in the same words (common.log_taken).
    assert "rabbitmq: 1 messages: 0 intents staged, 0 duplicates, 1 refused" in caplog.text
    assert "redis: 1 entries: 0 intents staged, 0 duplicates, 1 refused" in caplog.text

    base = serve()
    add_operator(db, "vera", "viewer")  # a viewer sees them too: the page only reads
    page = new_page(browser)
    sign_in(page, base, "vera")
    page.click("nav >> text=Обмены 1С")
    page.wait_for_url(f"{base}/exchanges")
    assert "Неверные сообщения из брокеров" in page.locator("#broker-refused").inner_text()
    rows = page.locator("table.broker-refused tbody tr")
    assert 2 == rows.count()
    by_source = {rows.nth(i).locator("td.source").inner_text(): rows.nth(i) for i in range(2)}
    assert {"RabbitMQ", "Redis Streams"} == set(by_source)
    for row in by_source.values():
        assert "ошибка в данных (invalid-contract)" == row.locator("td.reason").inner_text()
        when = row.locator("td").first.inner_text()
        # the absolute time in the display zone, its age beside it (issue 24 item 8)
        assert re.fullmatch(r"20\d\d-\d\d-\d\d \d\d:\d\d:\d\d UTC \(.+ назад\)", when), when
    rabbit = by_source["RabbitMQ"]
    # Where it came from and what is wrong with it, in Russian (issue 24 item 4); the names
    # of the queue, the stream and the broker's ids as they are.
    said = rabbit.locator("td.err").inner_text()
    assert f"RabbitMQ, очередь {queue}, message_id 1c-bad-0001: тело сообщения — не JSON" in said
    said = by_source["Redis Streams"].locator("td.err").inner_text()
    assert f"Redis, поток {stream}, запись {entry}: в теле сообщения нет ни одной записи" == said

    rabbit.locator("td.id a").click()
    page.wait_for_url(f"{base}/message/rabbitmq-1c-bad-0001")
    assert "в карантине" == page.locator("#state").inner_text()
    assert '{"kind": "price", "aggregate": ' in page.locator("pre.payload").inner_text()
