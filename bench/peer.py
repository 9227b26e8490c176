"""The peer: procrastinate on the issue's job, against the bench's site (issue 35, item 7).

    python -m bench.peer --database-url postgresql://… --site-url http://127.0.0.1:PORT \
        [--jobs 5000] [--versions 10] [--concurrency 8] [--token T]

The job a Python team would write with procrastinate (pinned in the ``bench`` extra), on a
PostgreSQL database of its own: one job per SKU for its price's latest version (``--jobs``
SKUs; version ``--versions``, as the service delivers after coalescing), each with the SKU as
its ``lock`` and ``queueing_lock``; the task POSTs the contract's body
(``shop_api.client.body``) with the message's ``Idempotency-Key`` over httpx; one worker runs
``--concurrency`` jobs at a time (``run_worker_async(wait=False)``: it stops once the queue is
empty). The schema, the deferring of the jobs and an ``ANALYZE`` of the jobs' table (what
autovacuum would do; the test server runs without it) are not timed; the worker is, from its start
to its return (delivery alone: the service's figure it is set against also counts intake and
coalescing of the staged rows). A job whose answer is not 200 fails (procrastinate marks it
``failed``). Prints one JSON line: jobs, seconds, rate, this process's CPU seconds while the
worker ran, the jobs by status.

``bench/run.py``'s ``peer`` section starts this in its own process beside the service's run on
the same server and site, and checks the site's effects (one per job).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from datetime import UTC, datetime
from typing import Any

import httpx

from exchange.dev.sitemodel import UPDATES_PATH
from exchange.domain.identity import message_id
from exchange.targets.base import OutgoingMessage
from exchange.targets.shop_api.client import USER_AGENT, body

CREATED = datetime(2026, 1, 1, tzinfo=UTC)
TIMEOUT = 30.0


def price_message(n: int, version: int) -> OutgoingMessage:
    """The message the service would send for SKU number ``n`` at ``version`` (the same SKU
    names and prices as ``harness.stage_prices``)."""
    sku = f"SKU-{n:07d}"
    payload = json.dumps(
        {
            "currency": "RUB",
            "price": f"{(n + version) % 10_000}.{n % 100:02d}",
            "price_type": "retail",
            "sku": sku,
        },
        separators=(",", ":"),
    )
    identity = message_id("price", sku, version)
    return OutgoingMessage(identity, "price", sku, version, payload, CREATED)


async def measure(
    dsn: str, site_url: str, token: str, jobs: int, version: int, concurrency: int
) -> dict[str, Any]:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    http = httpx.AsyncClient(
        base_url=site_url,
        headers={
            "User-Agent": USER_AGENT,
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
        },
        timeout=httpx.Timeout(TIMEOUT),
        limits=limits,
    )

    @app.task(name="deliver_price")
    async def deliver_price(n: int, version: int) -> None:
        message = price_message(n, version)
        answer = await http.post(
            UPDATES_PATH, content=body(message), headers={"Idempotency-Key": message.message_id}
        )
        if answer.status_code != 200:
            raise RuntimeError(f"{message.message_id}: HTTP {answer.status_code}")

    async with app.open_async(), http:
        await app.schema_manager.apply_schema_async()
        batch = [
            deliver_price.configure(lock=f"SKU-{n:07d}", queueing_lock=f"SKU-{n:07d}").make_new_job(
                n=n, version=version
            )
            for n in range(jobs)
        ]
        await app.job_manager.batch_defer_jobs_async(batch)
        async with await _connect(dsn) as connection:
            # What autovacuum does to a table that grew (the test server runs without it):
            # without statistics the fetch's lock check reads every waiting job for each job
            # fetched (0.5 jobs/s at 5,000 waiting on the test server).
            await connection.execute("ANALYZE procrastinate_jobs")
        started, cpu = time.perf_counter(), time.process_time()
        await app.run_worker_async(concurrency=concurrency, wait=False, name="peer")
        seconds = time.perf_counter() - started
        cpu_s = time.process_time() - cpu
        async with await _connect(dsn) as connection:
            cursor = await connection.execute(
                "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY status"
            )
            statuses = {str(status): int(count) for status, count in await cursor.fetchall()}
    return {
        "peer": f"procrastinate {procrastinate.__version__}",
        "jobs": jobs,
        "concurrency": concurrency,
        "seconds": seconds,
        "rate": jobs / seconds,
        "cpu_s": cpu_s,
        "statuses": statuses,
    }


async def _connect(dsn: str) -> Any:
    import psycopg

    return await psycopg.AsyncConnection.connect(dsn, autocommit=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--database-url", required=True, help="a PostgreSQL database of its own")
    parser.add_argument("--site-url", required=True)
    parser.add_argument("--token", default="bench-token")
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--versions", type=int, default=10, help="the version each job sends")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    if min(args.jobs, args.versions, args.concurrency) < 1:
        parser.exit(2, "python -m bench.peer: --jobs, --versions, --concurrency: 1 or more\n")
    dsn = args.database_url.replace("postgresql+psycopg://", "postgresql://", 1)
    result = asyncio.run(
        measure(dsn, args.site_url, args.token, args.jobs, args.versions, args.concurrency)
    )
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
