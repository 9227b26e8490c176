"""Benchmark: what each part of a delivered message costs, in microseconds of CPU.

    python -m bench.budget [--messages 20000] [--json]

The service's worker is CPU-bound (its CPU seconds equal its wall seconds in the suite), so a
message's cost is the sum of its parts, and a goal stated as a rate is a budget per message:
0.5 of a ceiling of 16,000 requests/s leaves 125 µs per message; 20,000 messages/s leaves
50 µs. Measured here, each alone, in one process, with the service's own functions:

- ``claim_record_us`` (SQLite and PostgreSQL): ``bench.lease_cost``, claim a batch of 100 and
  record it delivered, per message (no HTTP): the state changes and the history rows; wall
  time. ``claim_record_cpu_us``: the same, this process's CPU alone.
- ``outcome_line_us``: ``worker.log_outcome`` for a delivered message, the service's text
  format at INFO, to a file.
- ``judge_us``: ``classify`` and ``decide`` of the fast site's 200 answer.
- ``body_us``: ``client.body(message)`` (the single request's body; part of the client's
  cost in the ceiling table).
- ``batch_item_us``: per item of a 100-item batch answer, ``batch.split`` of the answer and
  the bodies' join, without HTTP.

The suite (``python -m bench``) runs this as its ``budget`` section and sets it against the
ceiling and the service rows of the same run.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import lease_cost
from bench.harness import fresh_database
from exchange import logs
from exchange.domain.identity import message_id
from exchange.domain.retry import RetryPolicy, decide
from exchange.queue.lease import Leased
from exchange.settings import Settings
from exchange.targets.base import OutgoingMessage
from exchange.targets.shop_api import batch as batch_api
from exchange.targets.shop_api.answers import classify
from exchange.targets.shop_api.client import Response, body
from exchange.worker import log_outcome

ANSWER = b'{"receipt": "R-12345"}'  # what bench/fastsite.py answers to a new single request


def per_call_us(work: Callable[[int], object], count: int) -> float:
    """Microseconds per call of ``work(n)`` for n in range(count), best of 3 passes."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for n in range(count):
            work(n)
        best = min(best, time.perf_counter() - started)
    return best / count * 1e6


def leased(n: int) -> Leased:
    sku = f"SKU-{n:07d}"
    payload = json.dumps(
        {"currency": "RUB", "price": f"{n % 1000}.50", "price_type": "retail", "sku": sku},
        separators=(",", ":"),
    )
    created = datetime(2026, 1, 1, tzinfo=UTC)
    return Leased(n, message_id("price", sku, 1), n, "price", sku, 1, payload, created, 1, 1)


def parts(count: int, scratch: Path) -> dict[str, float]:
    messages = [leased(n) for n in range(count)]
    outgoing = [
        OutgoingMessage(m.message_id, m.kind, m.aggregate, m.version, m.payload, m.created_at)
        for m in messages
    ]
    policy = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=60.0)
    rng = random.Random(0)
    now = datetime.now(UTC)
    answer = Response(200, ANSWER)
    delivered = decide(classify(answer, 1), attempt=1, now=now, policy=policy, rng=rng)

    settings = Settings(
        database_url=f"sqlite:///{scratch / 'unused.db'}",
        site_url="http://127.0.0.1:9",
        site_token="bench-token",
        log_level="INFO",
    )
    with (scratch / "outcomes.log").open("w") as stream:
        handler = logs.configure(settings, stream=stream)
        try:
            line = per_call_us(lambda n: log_outcome(messages[n], delivered), count)
        finally:
            logging.getLogger().removeHandler(handler)

    def judge(n: int) -> None:
        decide(classify(answer, 1), attempt=1, now=now, policy=policy, rng=rng)

    items = 100
    batch_answer = Response(
        200,
        json.dumps(
            {
                "results": [
                    {"message_id": m.message_id, "status": 200, "body": {"receipt": f"R-{i}"}}
                    for i, m in enumerate(outgoing[:items])
                ]
            }
        ).encode(),
    )
    ids = [m.message_id for m in outgoing[:items]]

    def batch_item(n: int) -> None:
        b'{"items": [' + b", ".join(body(m) for m in outgoing[:items]) + b"]}"
        batch_api.split(batch_answer, ids)

    return {
        "outcome_line_us": line,
        "judge_us": per_call_us(judge, count),
        "body_us": per_call_us(lambda n: body(outgoing[n]), count),
        "batch_item_us": per_call_us(batch_item, max(count // items, 1)) / items,
    }


def run(count: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-budget-") as tmp:
        scratch = Path(tmp)
        result: dict[str, Any] = {"messages": count, **parts(count, scratch)}
        for database in ("sqlite", "postgresql"):
            with fresh_database(database, scratch) as url:
                figures = lease_cost.run(url, count, 100)
            result[f"claim_record_us_{database}"] = 1e6 / figures["messages_per_s"]
            result[f"claim_record_cpu_us_{database}"] = figures["cpu_us_per_message"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.messages)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value:.2f}" if isinstance(value, float) else f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
