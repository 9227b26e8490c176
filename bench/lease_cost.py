"""Benchmark: the database side of delivery alone, claim and record, without any HTTP.

    python -m bench.lease_cost [--messages 20000] [--batch 100] [--database sqlite|postgresql]

Stages ``messages`` price rows (one version per SKU), takes them in (intake and coalescing,
not timed), then claims batches of ``batch`` and records every message as delivered, in the
worker's own transactions, until nothing is left. Reports the milliseconds per batch of the
claim and of the record, and the messages per second that the two alone would allow: the
ceiling the database side puts on the service whatever the HTTP client does; and this
process's CPU per message (the worker's share: SQLite's work is all in it, PostgreSQL's not).

The database is a fresh one (``bench.harness.fresh_database``: a SQLite file in a temporary
directory, or a PostgreSQL database on ``EXCHANGE_BENCH_PG`` created and dropped). Entry points
for other scripts: ``run(url, messages, batch) -> dict``; ``take_in`` and ``drain`` (the growth
section drains on a database it filled first).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bench.harness import fresh_database
from exchange.db.engine import make_engine, transaction
from exchange.dev.testing import price_row, stage
from exchange.domain.policy import DEFAULT_KINDS, KindPolicies
from exchange.domain.retry import RetryPolicy, decide
from exchange.domain.verdicts import Classification, Verdict
from exchange.intake import staging_table as intake
from exchange.queue import coalesce, deliveries, lease, record

WORKER = "bench"


def take_in(engine: Engine, now: datetime) -> None:
    """Intake and coalescing of what is staged, as a worker's cycle starts."""
    intake.take(engine, None, DEFAULT_KINDS, now)
    with transaction(engine) as connection:
        coalesce.coalesce(connection, KindPolicies.of(DEFAULT_KINDS), now)


def drain(engine: Engine, batch: int, now: datetime) -> dict[str, float]:
    """Claim batches of ``batch`` and record each delivered until nothing is left: seconds of
    claims and of records (wall), this process's CPU seconds, batches, messages recorded."""
    delivered = Classification(
        Verdict.DELIVERED, "delivered", http_status=200, receipt='{"receipt": "r-1"}'
    )
    policy = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=60.0)
    claim_s = record_s = cpu_s = 0.0
    batches = done = 0
    with transaction(engine, read_only=True) as connection:  # as a worker's loop reads it
        channel = deliveries.one_channel(connection)
    while True:
        now += timedelta(milliseconds=1)
        started, cpu = time.perf_counter(), time.process_time()
        with transaction(engine) as connection:
            taken = lease.claim(
                connection,
                worker=WORKER,
                now=now,
                limit=batch,
                lease_seconds=60,
                kinds=KindPolicies.of(DEFAULT_KINDS),
                max_attempts=5,
                channel_id=channel,
            )
        claim_s += time.perf_counter() - started
        cpu_s += time.process_time() - cpu
        if not taken.messages:
            break
        decision = decide(delivered, attempt=1, now=now, policy=policy, rng=random.Random(0))
        started, cpu = time.perf_counter(), time.process_time()
        with transaction(engine) as connection:
            done += record.record(
                connection,
                token=taken.token,
                worker=WORKER,
                now=now,
                outcomes=[(m, decision) for m in taken.messages],
                kinds=KindPolicies.of(DEFAULT_KINDS),
            )
        record_s += time.perf_counter() - started
        cpu_s += time.process_time() - cpu
        batches += 1
    return {
        "claim_s": claim_s,
        "record_s": record_s,
        "cpu_s": cpu_s,
        "batches": batches,
        "done": done,
    }


def run(url: str, messages: int, batch: int) -> dict[str, Any]:
    engine = make_engine(url)
    try:
        stage(engine, [price_row(f"SKU-{n:07d}", 1, f"{n % 1000}.50") for n in range(messages)])
        now = datetime(2026, 1, 1, tzinfo=UTC)
        take_in(engine, now)
        spent = drain(engine, batch, now)
    finally:
        engine.dispose()
    return figures(engine.dialect.name, messages, batch, spent)


def figures(database: str, messages: int, batch: int, spent: dict[str, float]) -> dict[str, Any]:
    """What a drain of ``messages`` cost (``drain``'s figures), per batch and per message."""
    assert spent["done"] == messages, f"recorded {spent['done']} of {messages}"
    batches = spent["batches"]
    return {
        "database": database,
        "messages": messages,
        "batch": batch,
        "claim_ms_per_batch": round(spent["claim_s"] / batches * 1000, 3),
        "record_ms_per_batch": round(spent["record_s"] / batches * 1000, 3),
        "messages_per_s": round(messages / (spent["claim_s"] + spent["record_s"])),
        # this process's CPU (a PostgreSQL server's is not in it)
        "cpu_us_per_message": round(spent["cpu_s"] / messages * 1e6, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, fresh_database(args.database, Path(tmp)) as url:
        result = run(url, args.messages, args.batch)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
