"""An idle service woken by another process's commit (issue 35, item 4):
``python -m bench.wake [--rows 30] [--idle-seconds 60] [--database sqlite|postgresql]``, or
``python -m bench --sections wake``.

For each database, a fresh one, the threaded site simulator in this process, and ``exchange
run`` as a real process with the default poll (``EXCHANGE_POLL_INTERVAL`` unset: 5 s):

- Idle CPU: once its first cycle has reported (its ``workers`` row) and 2 s more, the worker's
  user + system CPU seconds (psutil, from the kernel's count for the process) over
  ``--idle-seconds`` with nothing staged, as a share of one core. It includes whatever an idle
  ``run`` does: the poll's cycle, the wake-up's watch (NOTIFY on PostgreSQL, ``PRAGMA
  data_version`` on SQLite, exchange/db/wake.py), the scheduler.
- Latency: ``--rows`` prices committed one at a time by this process (1C's INSERT into
  ``staging_intents``, a connection of its own), each after the one before reached the shop
  and a random pause of 0.2–0.6 s (so the commits fall anywhere in the poll's period); the
  figure is commit to the shop's effect, median and worst.

The load average is taken at the start and end of each database's run. Printed as a table,
and as JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from sqlalchemy import select

from bench.harness import PY, TOKEN, fresh_database
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import workers
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import price_row, stage

ROWS = 30
IDLE_SECONDS = 60.0
SETTLE_S = 2.0
WORKER_ID = "bench-wake"


def _env(url: str, site_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env.update(
        {
            "EXCHANGE_DATABASE_URL": url,
            "EXCHANGE_SITE_URL": site_url,
            "EXCHANGE_SITE_TOKEN": TOKEN,
            "EXCHANGE_WORKER_ID": WORKER_ID,
            "EXCHANGE_LOG_LEVEL": "INFO",
        }
    )
    return env


def _until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"wake: {what} within {timeout:g} s")
        time.sleep(0.002)


def _reported(url: str) -> bool:
    engine = make_engine(url)
    try:
        with transaction(engine, read_only=True) as connection:
            found = connection.execute(
                select(workers.c.worker_id).where(workers.c.worker_id == WORKER_ID)
            ).first()
        return found is not None
    finally:
        engine.dispose()


def run(database: str, scratch: Path, rows: int, idle_seconds: float) -> dict[str, Any]:
    load_start = os.getloadavg()
    with (
        SiteSimulator(token=TOKEN, faults=Faults(seed=1)) as shop,
        fresh_database(database, scratch) as url,
    ):
        log_path = scratch / f"wake-{database}.log"
        with log_path.open("w") as out:
            proc = subprocess.Popen(
                [PY, "-m", "exchange", "run"],
                env=_env(url, shop.url),
                cwd=scratch,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            process = psutil.Process(proc.pid)
            _until(lambda: _reported(url), 60, "the worker's first cycle did not report")
            time.sleep(SETTLE_S)
            before, started = process.cpu_times(), time.monotonic()
            time.sleep(idle_seconds)
            after, elapsed = process.cpu_times(), time.monotonic() - started
            cpu_s = (after.user + after.system) - (before.user + before.system)
            engine = make_engine(url)  # 1C's connection
            rng = random.Random(7)
            delays = []
            try:
                for n in range(rows):
                    time.sleep(rng.uniform(0.2, 0.6))
                    key = ("price", f"WAKE-{n:02d}")
                    stage(engine, [price_row(key[1], 1)])
                    committed = time.monotonic()
                    _until(lambda key=key: key in shop.held_versions(), 30, f"{key[1]} not at shop")
                    delays.append(time.monotonic() - committed)
            finally:
                engine.dispose()
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
    return {
        "database": database,
        "poll_interval_s": 5.0,
        "rows": rows,
        "median_s": round(statistics.median(delays), 3),
        "worst_s": round(max(delays), 3),
        "idle_seconds": round(elapsed, 1),
        "idle_cpu_s": round(cpu_s, 3),
        "idle_share_of_a_core": round(cpu_s / elapsed, 5),
        "exit_code": code,
        "load_start": [round(x, 2) for x in load_start],
        "load_end": [round(x, 2) for x in os.getloadavg()],
    }


def measure(databases: list[str], rows: int, idle_seconds: float) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-wake-") as tmp:
        return [run(db, Path(tmp), rows, idle_seconds) for db in databases]


def table(found: list[dict[str, Any]]) -> str:
    lines = [
        "| database | poll | rows | median | worst | idle CPU (share of a core, over) | load avg "
        "(1 min, start → end) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in found:
        lines.append(
            f"| {r['database']} | {r['poll_interval_s']:g} s | {r['rows']} | {r['median_s']:.3f} s"
            f" | {r['worst_s']:.3f} s | {100 * r['idle_share_of_a_core']:.2f} % "
            f"({r['idle_seconds']:g} s) | {r['load_start'][0]:.2f} → {r['load_end'][0]:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.wake", description=__doc__)
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--idle-seconds", type=float, default=IDLE_SECONDS)
    parser.add_argument("--database", choices=("sqlite", "postgresql"), action="append")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.idle_seconds <= 0:
        parser.exit(2, "python -m bench.wake: --rows >= 1, --idle-seconds > 0\n")
    found = measure(args.database or ["sqlite", "postgresql"], args.rows, args.idle_seconds)
    print(json.dumps(found) if args.json else table(found))
    if any(r["exit_code"] != 0 for r in found):
        sys.exit(1)


if __name__ == "__main__":
    main()
