"""Faults for real (contract 12, issue 26 item 4): the broker connection cut while a source
consumes, through a TCP proxy in front of the real RabbitMQ and Redis, on SQLite and
PostgreSQL. The source reconnects with a backoff and nothing is lost or staged twice: 500
intents in, 500 messages delivered once each. (The 10,000-intent runs are ``python -m bench
brokers``.)"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from typing import Any

import httpx
import pika
import pytest
import redis
from brokerkit import queue_counts
from sqlalchemy import Engine, func, select
from tcpproxy import TcpProxy

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import messages, staging
from exchange.dev.testing import FakeSite, drain, fast_settings, price_row
from exchange.intake.sources import redis_streams
from exchange.worker import Worker

COUNT = 500
CUTS = 3


def intent(n: int) -> bytes:
    row = price_row(f"SKU-{n:05d}", 1)
    row["payload"] = json.loads(row["payload"])
    return json.dumps(row).encode()


def counts(engine: Engine) -> tuple[int, int]:
    """Staging rows, and messages (every one a distinct intent)."""
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(select(func.count()).select_from(staging)).scalar_one()
        made = connection.execute(select(func.count()).select_from(messages)).scalar_one()
        return int(rows), int(made)


def run_with_cuts(worker: Worker, proxy: TcpProxy, engine: Engine) -> list[int]:
    """Drain ``worker`` while a thread cuts every connection through ``proxy`` ``CUTS`` times,
    each while the source is connected and intents are still coming; returns how many rows
    were staged at each cut."""
    staged_at_cut: list[int] = []

    done = threading.Event()  # the drain ended (or failed): the cutter stops with it

    def cutter() -> None:
        # One cut while intents are coming is what the tests need: the drain takes 25 reads of
        # 20, each a commit, and the cutter looks every few milliseconds, so load slows both
        # and the window stays many looks wide. 60 s is a hang guard; the 0.1 s pauses are
        # how long the broker stays away, not a margin.
        deadline = time.monotonic() + 60
        while len(staged_at_cut) < CUTS and time.monotonic() < deadline and not done.is_set():
            staged, _ = counts(engine)
            if proxy.open_connections and 0 < staged < COUNT:
                if proxy.cut():
                    staged_at_cut.append(staged)
                time.sleep(0.1)  # refused for a while: the source backs off
                proxy.restore()
                time.sleep(0.1)
            time.sleep(0.002)

    thread = threading.Thread(target=cutter)

    async def go() -> None:
        thread.start()
        try:
            await drain(worker, cycles=20_000)
        finally:
            await worker.aclose()

    try:
        asyncio.run(go())
    finally:
        done.set()  # a failed drain must not leave the thread reading a database being dropped
        thread.join()
    return staged_at_cut


def assert_delivered_once(site: FakeSite, engine: Engine, staged_at_cut: list[int]) -> None:
    assert staged_at_cut, "the connection was cut while intents were coming"
    assert {("price", f"SKU-{n:05d}"): [1] for n in range(COUNT)} == site.applied
    assert (COUNT, COUNT) == counts(engine), "nothing staged twice"


def make_worker(db_url: str, engine: Engine, site: FakeSite, **source: Any) -> Worker:
    settings = fast_settings(db_url, "https://site.test", batch_size=100, **source)
    return bootstrap.worker(
        settings, engine, transport=httpx.MockTransport(site), rng=random.Random(11)
    )


def test_the_rabbitmq_connection_cut_mid_consume_loses_nothing_and_stages_nothing_twice(
    db_url: str, engine: Engine, rabbitmq_url: str, queue: str
) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(rabbitmq_url))
    channel = connection.channel()
    for n in range(COUNT):
        channel.basic_publish("", queue, intent(n), pika.BasicProperties(delivery_mode=2))
    connection.close()
    site = FakeSite()
    with TcpProxy("127.0.0.1", 5672) as proxy:
        url = f"amqp://guest:guest@127.0.0.1:{proxy.port}/"
        worker = make_worker(
            db_url,
            engine,
            site,
            source="rabbitmq",
            rabbitmq_url=url,
            rabbitmq_queue=queue,
            rabbitmq_prefetch=20,
        )
        staged_at_cut = run_with_cuts(worker, proxy, engine)

    assert_delivered_once(site, engine, staged_at_cut)
    assert 0 == queue_counts(rabbitmq_url, queue), "every message acknowledged in the end"


def test_the_redis_connection_cut_mid_consume_loses_nothing_and_stages_nothing_twice(
    db_url: str, engine: Engine, redis_url: str, stream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reads of 20 entries, as RabbitMQ's prefetch above: the stream is taken in many reads,
    # so that a cut falls between two of them.
    monkeypatch.setattr(redis_streams, "BATCH", 20)
    client = redis.Redis.from_url(redis_url)
    pipe = client.pipeline()
    for n in range(COUNT):
        pipe.xadd(stream, {"intent": intent(n)})
    pipe.execute()
    site = FakeSite()
    with TcpProxy("127.0.0.1", 6379) as proxy:
        url = f"redis://127.0.0.1:{proxy.port}/0"
        worker = make_worker(
            db_url, engine, site, source="redis", redis_url=url, redis_stream=stream
        )
        staged_at_cut = run_with_cuts(worker, proxy, engine)

    assert_delivered_once(site, engine, staged_at_cut)
    groups = client.xinfo_groups(stream)
    client.close()
    assert [0] == [g["pending"] for g in groups], "every entry acknowledged in the end"
