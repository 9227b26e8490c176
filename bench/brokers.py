"""Intents per second through each way in, in one run (contract 12, issue 26 item 7):
``python -m bench.brokers [--intents 10000] [--per-body 1] [--database sqlite|postgresql]``.

For each database, a fresh one per way in, and the same --intents price intents (one SKU each),
--per-body intents per message:

    json       POST /api/v1/intents to the JSON intake (exchange serve's handler, aiohttp, in
               this process), 8 requests in flight; timed from the first request to the last
               answer
    rabbitmq   the bodies first published to a durable queue of the real RabbitMQ
               (127.0.0.1:5672), then the rabbitmq source's pulls until every intent is
               staged and acknowledged (prefetch 100, its default)
    redis      the bodies first added to a stream of the real Redis (127.0.0.1:6379), then the
               redis source's pulls until every intent is staged and acknowledged

Publishing is not timed: the figure is what the service takes per second. Every run checks
that every intent was staged once. Printed as a table, and as JSON with --json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pika
import redis
from aiohttp import web
from sqlalchemy import func, select

from bench.harness import fresh_database
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import staging
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake import sources
from exchange.settings import load_settings
from exchange.web.config import WebConfig
from exchange.web.intents import PATH, JsonIntake

RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672/"
REDIS_URL = "redis://127.0.0.1:6379/0"
TOKEN = "bench-intake-token-0123456789"
IN_FLIGHT = 8
WAYS = ("json", "rabbitmq", "redis")


def bodies(count: int, per_body: int) -> list[bytes]:
    intents = [
        {
            "kind": "price",
            "aggregate": f"SKU-{n:06d}",
            "aggregate_version": 1,
            "schema_version": "1",
            "source_ref": f"bench {n}",
            "payload": {
                "sku": f"SKU-{n:06d}",
                "price": f"{100 + n % 900}.00",
                "currency": "RUB",
                "price_type": "retail",
            },
        }
        for n in range(count)
    ]
    out = []
    for start in range(0, count, per_body):
        chunk = intents[start : start + per_body]
        # The one shape every way in takes (the JSON intake takes no other).
        out.append(json.dumps({"intents": chunk}).encode())
    return out


def staged(url: str) -> int:
    engine = make_engine(url)
    try:
        with transaction(engine, read_only=True) as connection:
            return int(connection.execute(select(func.count()).select_from(staging)).scalar_one())
    finally:
        engine.dispose()


async def json_intake(url: str, payloads: list[bytes], scratch: Path) -> float:
    engine = make_engine(url)
    config = WebConfig(
        kinds=dict(DEFAULT_KINDS), exchange_dir=scratch, intake_token=TOKEN, intake_max_items=1000
    )
    app = web.Application(client_max_size=config.intake_body_limit)
    app.add_routes(JsonIntake(config, engine).routes())
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for payload in payloads:
        queue.put_nowait(payload)
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as session:

            async def post() -> None:
                while not queue.empty():
                    payload = queue.get_nowait()
                    async with session.post(PATH, data=payload, headers=headers) as answer:
                        if answer.status != 200:
                            raise RuntimeError(f"the JSON intake answered {answer.status}")
                        await answer.read()

            started = time.perf_counter()
            await asyncio.gather(*(post() for _ in range(IN_FLIGHT)))
            return time.perf_counter() - started
    finally:
        await runner.cleanup()
        engine.dispose()


@contextmanager
def rabbitmq_queue(payloads: list[bytes]) -> Iterator[str]:
    name = f"exchange-bench-{uuid.uuid4().hex[:10]}"
    connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
    channel = connection.channel()
    channel.queue_declare(name, durable=True)
    channel.confirm_delivery()
    for payload in payloads:
        channel.basic_publish("", name, payload, pika.BasicProperties(delivery_mode=2))
    try:
        yield name
    finally:
        channel.queue_delete(name)
        connection.close()


@contextmanager
def redis_stream(payloads: list[bytes]) -> Iterator[str]:
    name = f"exchange-bench-{uuid.uuid4().hex[:10]}"
    client = redis.Redis.from_url(REDIS_URL)
    pipe = client.pipeline()
    for payload in payloads:
        pipe.xadd(name, {"intent": payload})
    pipe.execute()
    try:
        yield name
    finally:
        client.delete(name)
        client.close()


async def drain_source(url: str, count: int, **setting: Any) -> float:
    engine = make_engine(url)
    settings = load_settings(database_url=url, worker_id="bench", **setting)
    source = sources.build(settings, engine, None)
    assert source is not None
    taken = 0
    try:
        started = time.perf_counter()
        while taken < count:
            result = await source.pull()
            taken += result.staged + result.duplicates + result.refused
        return time.perf_counter() - started
    finally:
        await source.aclose()
        engine.dispose()


def run_one(way: str, database: str, payloads: list[bytes], count: int, scratch: Path) -> dict:
    with fresh_database(database, scratch) as url:
        if way == "json":
            seconds = asyncio.run(json_intake(url, payloads, scratch))
        elif way == "rabbitmq":
            with rabbitmq_queue(payloads) as name:
                seconds = asyncio.run(
                    drain_source(
                        url,
                        count,
                        source="rabbitmq",
                        rabbitmq_url=RABBITMQ_URL,
                        rabbitmq_queue=name,
                    )
                )
        else:
            with redis_stream(payloads) as name:
                seconds = asyncio.run(
                    drain_source(url, count, source="redis", redis_url=REDIS_URL, redis_stream=name)
                )
        rows = staged(url)
    return {
        "way": way,
        "database": database,
        "intents": count,
        "per_body": len(payloads) and count // len(payloads),
        "seconds": round(seconds, 3),
        "intents_per_s": round(count / seconds, 1) if seconds else None,
        "ok": rows == count,
    }


def measure(count: int, per_body: int, databases: list[str]) -> list[dict[str, Any]]:
    payloads = bodies(count, per_body)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-brokers-") as tmp:
        for database in databases:
            for way in WAYS:
                row = run_one(way, database, payloads, count, Path(tmp))
                print(
                    f"brokers: {database:<10} {way:<8} {row['intents_per_s']:>9} intents/s"
                    f"{'' if row['ok'] else '  NOT ALL STAGED'}",
                    file=sys.stderr,
                )
                rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| database | way in | intents | per body | intents/s | vs JSON intake | all staged once |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    json_rate = {r["database"]: r["intents_per_s"] for r in rows if r["way"] == "json"}
    for r in rows:
        base = json_rate.get(r["database"])
        ratio = f"{r['intents_per_s'] / base:.2f}" if base and r["intents_per_s"] else "-"
        lines.append(
            f"| {r['database']} | {r['way']} | {r['intents']} | {r['per_body']} | "
            f"{r['intents_per_s']} | {ratio} | {'yes' if r['ok'] else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.brokers", description=__doc__)
    parser.add_argument("--intents", type=int, default=10_000)
    parser.add_argument("--per-body", type=int, default=1)
    parser.add_argument("--database", choices=("sqlite", "postgresql"), action="append")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    if args.intents < 1 or not 1 <= args.per_body <= 1000:
        parser.exit(2, "python -m bench.brokers: --intents >= 1, --per-body 1..1000\n")
    rows = measure(args.intents, args.per_body, args.database or ["sqlite", "postgresql"])
    print(json.dumps(rows) if args.json else table(rows))
    if not all(r["ok"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
