"""Benchmark: what the operators' notifications cost a worker, against an idle cycle.

    python -m bench.notify_step [--quarantined 1000] [--database sqlite|postgresql]

Quarantines ``quarantined`` prices through the real worker (the site simulator refuses them),
then times, in the same run, the median of 200 of each: one worker cycle with nothing to move
(the baseline), one notification step within the period (the usual case after a message: one
read by primary key), and one step after the period with nothing new (the full look: the
quarantine's count and newest entry, the workers, the pause). Reports milliseconds and ratios
to the baseline. The step runs in a thread of its own in the service, never inside a cycle:
the ratio says what it adds to the database's load, not to a cycle's time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, update

from bench.harness import fresh_database
from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import notifications
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import (
    fast_settings,
    one_channel_messages,
    price_row,
    run_worker,
    stage,
)
from exchange.domain.clock import FakeClock

REPEAT = 200


def _median_s(action: Callable[[], Any]) -> float:
    times = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run(url: str, quarantined: int) -> dict[str, Any]:
    logging.disable(logging.CRITICAL)  # a line per quarantined message and per failed send
    engine = make_engine(url)
    with SiteSimulator(token="test-token", faults=Faults(seed=1)) as site:
        skus = [f"SKU-{n}" for n in range(quarantined)]
        site.faults.reject = set(skus)
        stage(engine, [price_row(sku, 1) for sku in skus])
        settings = fast_settings(
            url,
            site.url,
            batch_size=500,
            notify_smtp_host="127.0.0.1",
            notify_smtp_port=9,  # discard: nothing listens, each send fails at once
            notify_smtp_security="none",
            notify_smtp_from="exchange@shop.example",
            notify_smtp_to=["ops@shop.example"],
        )
        run_worker(bootstrap.worker(settings, engine))
        worker = bootstrap.worker(settings, engine)
        clock = FakeClock(datetime.now(UTC))
        told = bootstrap.notifier(settings, engine, clock)
        assert told is not None
        told.step()  # the attempt (refused) starts the period
        loop = asyncio.new_event_loop()
        try:
            cycle = _median_s(lambda: loop.run_until_complete(worker.cycle()))
            within = _median_s(told.step)
            clock.advance(2 * settings.notify_every)
            m = one_channel_messages()
            with transaction(engine) as connection:  # everything told: nothing new
                newest = connection.execute(select(func.max(m.c.updated_at))).scalar()
                connection.execute(update(notifications).values(quarantine_mark=newest))
            due = _median_s(told.step)
            loop.run_until_complete(worker.target.aclose())
        finally:
            loop.close()
    engine.dispose()
    return {
        "database": engine.dialect.name,
        "quarantined": quarantined,
        "idle_cycle_ms": round(cycle * 1000, 3),
        "step_within_period_ms": round(within * 1000, 3),
        "step_within_period_ratio": round(within / cycle, 3),
        "step_due_nothing_new_ms": round(due * 1000, 3),
        "step_due_nothing_new_ratio": round(due / cycle, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quarantined", type=int, default=1000)
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, fresh_database(args.database, Path(tmp)) as url:
        result = run(url, args.quarantined)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
