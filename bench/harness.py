"""What every benchmark shares: the site in its own process, a child's cost (wait4), the
machine's busy time, a fresh migrated database, staged prices, the state of the queue. The
sections (``run``, ``pace``, ``brokers``, …) import it; it imports none of them, so they never
import each other for it (the import contracts in pyproject.toml say so)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
from sqlalchemy import func, select

from bench.cpu import process_cpu_seconds
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import workers
from exchange.dev import testing
from exchange.dev.dbkit import migrate_sqlite, pg_database
from exchange.intake.stage import stage

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
TOKEN = "bench-token"
PG_ADMIN = os.environ.get("EXCHANGE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def log(text: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {text}", flush=True)


# -- children --------------------------------------------------------------------------------


def machine_busy_seconds() -> float | None:
    """CPU seconds the whole machine has been busy since boot (all cores; /proc/stat: every
    column but idle and iowait), or None where there is no /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return None
    ticks = [int(x) for x in fields[1:8]]  # user nice system idle iowait irq softirq
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


def wait_child(proc: subprocess.Popen[Any], timeout: float) -> tuple[int, float, float]:
    """Wait for a child: (exit code, peak RSS in MB, CPU seconds user+system), from wait4(2)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            code = os.waitstatus_to_exitcode(status)
            proc.returncode = code  # Popen must not wait for it again
            return code, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            proc.kill()
            timeout = float("inf")
        time.sleep(0.005)


class SiteProcess:
    """A site simulator in its own process: bench/fastsite.py or the threaded
    exchange.dev.sitesim."""

    def __init__(self, kind: str, scratch: Path, *, latency_ms: float = 0.0) -> None:
        """``latency_ms``: the fast site holds each update that long (``fastsite --latency``)."""
        self.kind = kind
        if kind == "fast":
            argv = [PY, str(ROOT / "bench" / "fastsite.py"), "--port", "0", "--token", TOKEN]
            if latency_ms:
                argv += ["--latency", str(latency_ms)]
        else:
            argv = [PY, "-m", "exchange.dev.sitesim", "--port", "0", "--token", TOKEN, "--batch"]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=scratch
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        found = re.search(r"http://\S+", line)
        if not found:
            self.proc.kill()
            raise RuntimeError(f"the {kind} site did not start: {line!r}")
        self.url = found.group(0)
        self.ps = psutil.Process(self.proc.pid)

    def stats(self) -> dict[str, Any]:
        answer = httpx.get(f"{self.url}/bench/stats", timeout=30)
        answer.raise_for_status()
        stats: dict[str, Any] = answer.json()
        return stats

    def reset(self) -> None:
        if self.kind == "fast":
            httpx.post(f"{self.url}/bench/reset", timeout=30).raise_for_status()

    def cpu_seconds(self) -> float:
        times = self.ps.cpu_times()
        return float(times.user + times.system)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


# -- databases -------------------------------------------------------------------------------


@contextlib.contextmanager
def fresh_database(kind: str, scratch: Path) -> Iterator[str]:
    """A migrated, empty database URL; a PostgreSQL one is dropped afterwards."""
    if kind == "sqlite":
        yield migrate_sqlite(scratch / f"bench-{uuid.uuid4().hex[:8]}.db")
        return
    with pg_database(PG_ADMIN) as url:
        yield url


def stage_prices(url: str, count: int, versions: int = 1) -> None:
    """Price rows as 1C writes them for ``count`` SKUs: version 1 of every SKU, then version 2
    of every SKU, … up to ``versions`` (``count`` × ``versions`` rows; the highest version of
    each SKU is the one delivered, the others are superseded)."""
    engine = make_engine(url)
    rows = []
    with transaction(engine) as connection:
        for version in range(1, versions + 1):
            for n in range(count):
                sku = f"SKU-{n:07d}"
                price = f"{(n + version) % 10_000}.{n % 100:02d}"
                payload = {"sku": sku, "price": price, "currency": "RUB"}
                rows.append(
                    {
                        "kind": "price",
                        "aggregate": sku,
                        "aggregate_version": version,
                        "payload": json.dumps({**payload, "price_type": "retail"}),
                        "schema_version": "1",
                        "source_ref": f"Установка цен номенклатуры {version:02d}-{n:06d}",
                    }
                )
                if len(rows) >= 10_000:
                    stage(connection, rows)
                    rows.clear()
        if rows:
            stage(connection, rows)
    engine.dispose()


def in_flight_overlaps(url: str) -> list[str]:
    """Per aggregate, lease-to-outcome intervals that overlap (exchange.dev.testing's check)."""
    engine = make_engine(url)
    try:
        return testing.in_flight_overlaps(engine)
    finally:
        engine.dispose()


def state_counts(url: str) -> dict[str, int]:
    engine = make_engine(url)
    m = testing.one_channel_messages()
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(select(m.c.state, func.count()).group_by(m.c.state)).all()
    engine.dispose()
    return {state: count for state, count in rows}


def worker_paces(url: str) -> dict[str, dict[str, Any]]:
    """Each worker's pace as it last wrote it (``workers.pace``, contract 5c): its concurrency
    limit of its maximum, the rate the site accepted, what was refused; ``{}`` for none."""
    engine = make_engine(url)
    try:
        with transaction(engine, read_only=True) as connection:
            rows = connection.execute(select(workers.c.worker_id, workers.c.pace)).all()
    finally:
        engine.dispose()
    paces: dict[str, dict[str, Any]] = {}
    for worker_id, pace in rows:
        if pace:
            figures = json.loads(pace)
            keep = ("limit", "max_limit", "accepted_rate", "paced_rate", "refused_last_minute")
            paces[str(worker_id)] = {k: figures.get(k) for k in keep}
    return paces


class ConnectionSampler(threading.Thread):
    """The most connections the workers held to a PostgreSQL database at once, and the CPU
    seconds their backends spent (``/proc/<pid>/stat`` of each backend, last seen), sampled."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.dsn = url.replace("postgresql+psycopg://", "postgresql://", 1)
        self.peak = 0
        self.backend_cpu: dict[int, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as connection:
            while not self.done.wait(0.1):
                pids = [
                    int(row[0])
                    for row in connection.execute(
                        "SELECT pid FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    ).fetchall()
                ]
                self.peak = max(self.peak, len(pids))
                for pid in pids:
                    with contextlib.suppress(OSError, ValueError, IndexError):
                        self.backend_cpu[pid] = process_cpu_seconds(pid)

    def backend_cpu_seconds(self) -> float:
        """The backends' CPU seconds as last sampled (up to 0.1 s of each one's end missed)."""
        return sum(self.backend_cpu.values())

    def stop(self) -> int:
        self.done.set()
        self.join(timeout=10)
        return self.peak


def pg_tables(url: str) -> dict[str, dict[str, int]]:
    """Size (bytes, with indexes and TOAST), live and dead rows of the service's big tables."""
    dsn = url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as connection:
        connection.execute("SELECT pg_stat_force_next_flush()")
        rows = connection.execute(
            "SELECT relname, pg_total_relation_size(relid), n_live_tup, n_dead_tup "
            "FROM pg_stat_user_tables "
            "WHERE relname IN ('messages', 'message_history', 'staging_intents', 'aggregates')"
        ).fetchall()
    return {r[0]: {"bytes": r[1], "live": r[2], "dead": r[3]} for r in rows}
