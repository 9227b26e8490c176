"""Benchmark: a channel down for the whole run never delays another (contract 13, issue 31 item 2).

    python -m bench.channel_down [--prices 3000] [--rounds 3] [--database sqlite postgresql]

Each round, on a fresh database: ``prices`` prices taken in and delivered by ``exchange run``'s
scheduler (``runner.run_forever``, in this process) to the site simulator (its own process),
timed from the start of the run until the last one is delivered to the site. Two cases,
alternating within each round: the site's channel alone (``api``), and the site with a second
channel (``shop``, seeded with the same prices) on a loopback port nothing listens on, so that
every connection is refused and its breaker opens. Reports each case's median seconds, the
ratio (the promise: at most 1.3) and the load average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select

from bench.harness import TOKEN, SiteProcess, fresh_database, stage_prices
from exchange import app as bootstrap
from exchange import runner
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import channels, deliveries
from exchange.domain.clock import SystemClock
from exchange.intake import staging_table as intake
from exchange.queue import channels as channel_queue
from exchange.settings import Settings, load_settings

POLL = 0.1
STOPS: list[Callable[[], None]] = []  # run_forever's stop, caught instead of a signal handler


def refused_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def settings_for(url: str, site_url: str, down: bool, scratch: Path) -> Settings:
    token = scratch / "token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    named: dict[str, dict[str, Any]] = {
        "api": {"target": "api", "site_url": site_url, "site_token_file": str(token)},
    }
    if down:
        named["shop"] = {"target": "api", "site_url": refused_url(), "site_token_file": str(token)}
    return load_settings(
        database_url=url,
        worker_id="bench",
        poll_interval=POLL,
        http_timeout=2.0,
        retry_base_delay=0.05,
        retry_max_delay=1.0,
        channels=named,
    )


def delivered(engine: Engine, name: str) -> int:
    with transaction(engine, read_only=True) as connection:
        return int(
            connection.execute(
                select(func.count())
                .select_from(deliveries)
                .join(channels, channels.c.id == deliveries.c.channel_id)
                .where(channels.c.name == name, deliveries.c.state == "delivered")
            ).scalar_one()
        )


def one(database: str, prices: int, down: bool, scratch: Path) -> float:
    """One run on a fresh database and a fresh site (it remembers the keys it was sent)."""
    site = SiteProcess("sitesim", scratch)
    try:
        return _timed(database, prices, down, site, scratch)
    finally:
        site.stop()


def _timed(database: str, prices: int, down: bool, site: SiteProcess, scratch: Path) -> float:
    with fresh_database(database, scratch) as url:
        stage_prices(url, prices)
        engine = make_engine(url)
        settings = settings_for(url, site.url, down, scratch)
        intake.take(engine, None, settings.kinds, SystemClock().now())
        bootstrap.register_channels(settings, engine)
        if down:
            channel_queue.seed(engine, "shop", settings.policies, now=SystemClock().now())
        watcher = make_engine(url)
        worker = bootstrap.worker(settings, engine)

        async def timed() -> float:
            started = time.perf_counter()
            running = asyncio.create_task(runner.run_forever(worker, poll_interval=POLL))
            try:
                while delivered(watcher, "api") < prices:
                    await asyncio.sleep(0.02)
                return time.perf_counter() - started
            finally:
                for stop in STOPS:  # as SIGTERM does
                    stop()
                STOPS.clear()
                await asyncio.wait_for(running, 60)
                await worker.aclose()

        try:
            return runner.run(timed())
        finally:
            engine.dispose()
            watcher.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prices", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database", nargs="+", default=["sqlite", "postgresql"])
    args = parser.parse_args(argv)
    runner._install_signals = lambda _loop, stop: STOPS.append(stop)  # type: ignore[assignment]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        for database in args.database:
            load_before = os.getloadavg()
            alone: list[float] = []
            beside: list[float] = []
            for _round in range(args.rounds):
                alone.append(one(database, args.prices, False, scratch))
                beside.append(one(database, args.prices, True, scratch))
                print(
                    f"{database}: alone {alone[-1]:.2f} s, beside a down channel "
                    f"{beside[-1]:.2f} s",
                    file=sys.stderr,
                )
            results[database] = {
                "prices": args.prices,
                "alone_s": [round(t, 3) for t in alone],
                "down_beside_s": [round(t, 3) for t in beside],
                "median_alone_s": round(statistics.median(alone), 3),
                "median_down_beside_s": round(statistics.median(beside), 3),
                "ratio": round(statistics.median(beside) / statistics.median(alone), 3),
                "paired_ratios": [round(b / a, 3) for a, b in zip(alone, beside, strict=True)],
                "loadavg_before": [round(x, 2) for x in load_before],
                "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            }
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
