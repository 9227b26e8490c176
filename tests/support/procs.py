"""Real worker processes for fault tests, and the crash harness (one killed worker, one rescuer).

Imported by bare name (``from procs import ...``: ``tests/faults`` is on pytest's pythonpath)
by the fault tests, ``tests/integration/test_workers.py`` and ``scripts/crash-runs``.

Run as a script it is a worker: ``python procs.py [--intake-chunk N] run ...`` is
``exchange run ...`` with intake chunks of N rows (the service's 5,000 would need thousands of
staging rows to crash between two chunks); everything else is the real command.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from exchange.db.engine import make_engine, transaction
from exchange.db.schema import history, staging
from exchange.dev.dbkit import pg_database, sqlite_copy
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import (
    one_channel_aggregates,
    one_channel_messages,
    posting_row,
    price_row,
    raw_row,
    stage,
)

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()
aggregates = one_channel_aggregates()

HERE = Path(__file__).resolve()
PG_ADMIN_URL = os.environ.get("EXCHANGE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


# -- worker processes ------------------------------------------------------------------------


def worker_env(db_url: str, site: SiteSimulator, worker_id: str, **extra: str) -> dict[str, str]:
    """The environment of a worker process: nothing inherited from EXCHANGE_*, fast delays."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env.update(
        {
            "EXCHANGE_DATABASE_URL": db_url,
            "EXCHANGE_SITE_URL": site.url,
            "EXCHANGE_SITE_TOKEN": "test-token",
            "EXCHANGE_WORKER_ID": worker_id,
            "EXCHANGE_POLL_INTERVAL": "0.02",
            "EXCHANGE_BATCH_SIZE": "20",
            "EXCHANGE_CONCURRENCY": "4",
            "EXCHANGE_RETRY_BASE_DELAY": "0.005",
            "EXCHANGE_RETRY_MAX_DELAY": "0.05",
            "EXCHANGE_MAX_ATTEMPTS": "20",
            "EXCHANGE_LOG_LEVEL": "WARNING",
            **extra,
        }
    )
    return env


def start(
    db_url: str,
    site: SiteSimulator,
    worker_id: str,
    tmp_path: Path,
    *args: str,
    intake_chunk: int | None = None,
    **extra: str,
) -> subprocess.Popen[str]:
    """``exchange run *args`` as a separate process; its output goes to tmp_path/<id>.log."""
    if intake_chunk is None:
        command = [sys.executable, "-m", "exchange", "run", *args]
    else:
        command = [sys.executable, str(HERE), "--intake-chunk", str(intake_chunk), "run", *args]
    with (tmp_path / f"{worker_id}.log").open("a") as log:  # the child keeps its own copy
        return subprocess.Popen(
            command,
            env=worker_env(db_url, site, worker_id, **extra),
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )


def wait_for(condition: Callable[[], Any], seconds: float, what: str) -> None:
    """Poll ``condition`` every 50 ms until it is true; AssertionError after ``seconds`` (the
    suite's one wait for a condition: a hang guard, not a margin)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.05)


def stop(proc: subprocess.Popen[str]) -> None:
    """Make sure a process started here is gone (SIGKILL when still running)."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


# -- databases -------------------------------------------------------------------------------


def sqlite_database(directory: Path, name: str = "exchange.db") -> str:
    return sqlite_copy(directory / name)


def postgres_database() -> contextlib.AbstractContextManager[str]:
    """A fresh migrated PostgreSQL database, dropped afterwards (for scripts: tests use pg_url)."""
    return pg_database(PG_ADMIN_URL)


# -- the crash harness -----------------------------------------------------------------------

# The five crash points of the brief; "in-flight" is timed by the harness, not a failpoint.
POINTS: dict[str, tuple[str, ...]] = {
    "intake": ("intake-stored", "intake-chunk-done"),
    "leased": ("after-lease-commit",),
    "in-flight": (),
    "answered": ("after-answer",),
    "recording": ("record-applied",),
}
LEASE_S = "1"
MAX_ATTEMPTS = 8


@dataclass
class Plan:
    """One crash run, drawn from a seed: what is staged, how the workers are tuned, the kill."""

    point: str
    seed: int
    rows: list[dict[str, Any]]
    skus: dict[str, int]  # SKU -> highest staged version
    documents: dict[str, int]  # document -> number of postings
    batch_size: int
    concurrency: int
    intake_chunk: int | None
    separate_staging: bool
    failpoint: str | None
    hit: int
    fail_rate: float
    env: dict[str, str] = field(default_factory=dict)


def plan(point: str, seed: int, *, sqlite: bool) -> Plan:
    rng = random.Random(f"{point}/{seed}/{sqlite}")
    skus = {f"SKU-{n}": rng.randint(1, 4) for n in range(rng.randint(5, 9))}
    documents = {f"DOC-{d}": rng.randint(2, 4) for d in range(rng.randint(2, 3))}
    rows = [
        price_row(s, v, f"{n + 1}.{v}0")
        for n, (s, top) in enumerate(skus.items())
        for v in range(1, top + 1)
    ]
    rows += [
        posting_row(d, v, f"{v}.50") for d, top in documents.items() for v in range(1, top + 1)
    ]
    rng.shuffle(rows)
    rows.insert(rng.randrange(len(rows)), dict(rng.choice(rows)))  # 1C wrote a row twice
    rows.insert(rng.randrange(len(rows)), raw_row("price", "SKU-BAD", 1, "{not json"))
    aggregates_count = len(skus) + len(documents)
    batch_size = rng.randint(2, max(2, aggregates_count // 3))
    failpoints = POINTS[point]
    concurrency = rng.choice([1, 2, 4])
    chunk = rng.choice([3, 4, 6]) if point == "intake" else None
    if point == "intake":
        hit = rng.randint(1, max(1, len(rows) // (chunk or 1) - 1))
    elif point == "answered":
        hit = rng.randint(1, 4)
    elif point == "in-flight":  # effects held at once: one per concurrent request of a batch
        hit = rng.randint(1, min(concurrency, batch_size))
    else:
        hit = rng.randint(1, 2)
    return Plan(
        point=point,
        seed=seed,
        rows=rows,
        skus=skus,
        documents=documents,
        batch_size=batch_size,
        concurrency=concurrency,
        intake_chunk=chunk,
        separate_staging=sqlite and point == "intake" and rng.random() < 0.5,
        failpoint=rng.choice(failpoints) if failpoints else None,
        hit=hit,
        # in-flight: a 503 would leave fewer answers held than the kill waits for
        fail_rate=0.0 if point == "in-flight" else rng.choice([0.0, 0.0, 0.1]),
    )


@dataclass
class RunResult:
    plan: Plan
    doomed_code: int | None
    rescuer_code: int | None
    problems: list[str]
    seconds: float

    @property
    def passed(self) -> bool:
        return not self.problems


def crash_run(
    db_url: str,
    directory: Path,
    p: Plan,
    *,
    after_kill: Callable[[SiteSimulator], None] | None = None,
) -> RunResult:
    """Stage, start a worker that dies at the planned point, let a fresh one finish, check.

    ``after_kill`` may break the site between the two workers (to prove the checks can fail).
    """
    started = time.monotonic()
    engine = make_engine(db_url)
    staging_url = sqlite_database(directory, "staging.db") if p.separate_staging else None
    staging_engine = make_engine(staging_url) if staging_url else engine
    stage(staging_engine, p.rows)
    extra = {
        "EXCHANGE_LEASE_SECONDS": LEASE_S,
        "EXCHANGE_BATCH_SIZE": str(p.batch_size),
        "EXCHANGE_CONCURRENCY": str(p.concurrency),
        "EXCHANGE_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
        "EXCHANGE_HTTP_TIMEOUT": "30",
        **({"EXCHANGE_STAGING_URL": staging_url} if staging_url else {}),
    }
    doomed_env = dict(extra)
    if p.failpoint:
        doomed_env["EXCHANGE_FAILPOINTS"] = f"{p.failpoint}=kill@{p.hit}"
    faults = Faults(fail_rate=p.fail_rate, seed=p.seed)
    if p.point == "in-flight":  # the site applies, then holds the answer until the kill
        faults.slow_rate, faults.slow_seconds = 1.0, 60.0
    problems: list[str] = []
    doomed_code = rescuer_code = None
    with SiteSimulator(token="test-token", faults=faults) as site:
        args = ("--until-idle", "--max-seconds", "60")
        doomed = start(
            db_url, site, "doomed", directory, *args, intake_chunk=p.intake_chunk, **doomed_env
        )
        try:
            if p.point == "in-flight":
                wait_for(lambda: len(site.effects()) >= p.hit, 60, f"{p.hit} effects at the site")
                time.sleep(random.Random(p.seed).uniform(0, 0.1))
                doomed.send_signal(signal.SIGKILL)
            doomed_code = doomed.wait(timeout=90)
        except (AssertionError, subprocess.TimeoutExpired) as exc:
            problems.append(f"the first worker: {exc}")
        finally:
            stop(doomed)
        site.faults.slow_rate = 0.0
        if after_kill is not None:
            after_kill(site)
        if doomed_code != -signal.SIGKILL:
            problems.append(f"the first worker was not killed (exit {doomed_code})")
        rescuer = start(
            db_url, site, "rescuer", directory, *args, intake_chunk=p.intake_chunk, **extra
        )
        try:
            rescuer_code = rescuer.wait(timeout=90)
        except subprocess.TimeoutExpired as exc:
            problems.append(f"the rescuer: {exc}")
        finally:
            stop(rescuer)
        if rescuer_code != 0:
            problems.append(f"the rescuer exited {rescuer_code}")
        problems += check_invariants(engine, staging_engine, site, p)
    if problems:
        for name in ("doomed", "rescuer"):
            log = (directory / f"{name}.log").read_text()[-2000:]
            problems.append(f"--- {name}.log (tail) ---\n{log}")
    engine.dispose()
    if staging_engine is not engine:
        staging_engine.dispose()
    return RunResult(p, doomed_code, rescuer_code, problems, time.monotonic() - started)


def check_invariants(
    engine: Engine, staging_engine: Engine, site: SiteSimulator, p: Plan
) -> list[str]:
    """Everything that must hold after any crash; an empty list when it all does."""
    problems: list[str] = []
    with transaction(staging_engine, read_only=True) as connection:
        staged = connection.execute(select(staging.c.id, staging.c.taken_at)).all()
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(
                messages.c.id,
                messages.c.kind,
                messages.c.aggregate,
                messages.c.version,
                messages.c.state,
                messages.c.rejected,
                messages.c.attempts,
                messages.c.staging_id,
            )
        ).all()
        events = connection.execute(
            select(
                history.c.message_pk,
                history.c.event,
                history.c.worker,
                history.c.attempt,
                history.c.leased_at,
                history.c.detail,
            ).order_by(history.c.id)
        ).all()
        leased_aggregates = connection.execute(
            select(aggregates.c.kind, aggregates.c.aggregate).where(
                aggregates.c.lease_token.is_not(None)
            )
        ).all()

    # No staging row lost: each one taken, and it became a message, a duplicate or a rejection.
    untaken = [row_id for row_id, taken_at in staged if taken_at is None]
    if untaken:
        problems.append(f"staging rows never taken: {untaken}")
    from_row = {m.staging_id for m in rows}
    duplicate_of = {
        int(e.detail.split("#", 1)[1].split(" ", 1)[0])
        for e in events
        if e.event == "duplicate" and e.detail and "#" in e.detail
    }
    lost = sorted(r for r, _ in staged if r not in from_row and r not in duplicate_of)
    if lost:
        problems.append(f"staging rows that became nothing: {lost}")
    if len(staged) != len(p.rows):
        problems.append(f"{len(staged)} staging rows, {len(p.rows)} staged")

    # No message lost or stuck: each one ended delivered, cancelled or (rejected) quarantined.
    for m in rows:
        if m.state not in ("delivered", "cancelled", "quarantined"):
            problems.append(f"message #{m.id} {m.kind} {m.aggregate} v{m.version} is {m.state}")
        if m.state == "quarantined" and not m.rejected:
            problems.append(f"message #{m.id} {m.kind} {m.aggregate} v{m.version} quarantined")
        if (m.attempts or 0) > MAX_ATTEMPTS:  # a rejected record has no attempt
            problems.append(f"message #{m.id} has {m.attempts} attempts (max {MAX_ATTEMPTS})")
    over = [e for e in events if e.attempt is not None and e.attempt > MAX_ATTEMPTS]
    if over:
        problems.append(f"history shows attempts above {MAX_ATTEMPTS}: {over[:3]}")
    expected = {("price", s, v) for s, top in p.skus.items() for v in range(1, top + 1)}
    expected |= {
        ("financial_posting", d, v) for d, n in p.documents.items() for v in range(1, n + 1)
    }
    have = {(m.kind, m.aggregate, m.version) for m in rows if not m.rejected}
    if have != expected:
        problems.append(f"messages differ from the staged intents: {sorted(have ^ expected)}")
    if leased_aggregates:
        problems.append(f"aggregates still leased at the end: {leased_aggregates}")

    # The site: one effect per message, no stale version, every posting in order.
    doubled = {k: n for k, n in site.effect_counts().items() if n != 1}
    if doubled:
        problems.append(f"effects applied more than once: {doubled}")
    for sku, top in p.skus.items():
        applied = site.applied_versions("price", sku)
        if applied != sorted(set(applied)) or not applied or applied[-1] != top:
            problems.append(f"{sku}: versions applied {applied}, latest staged {top}")
    for document, n in p.documents.items():
        applied = site.applied_versions("financial_posting", document)
        if applied != list(range(1, n + 1)):
            problems.append(f"{document}: postings applied {applied}, staged 1..{n}")
    delivered = {(m.kind, m.aggregate, m.version) for m in rows if m.state == "delivered"}
    for sku, top in p.skus.items():
        if ("price", sku, top) not in delivered:
            problems.append(f"{sku} v{top} (the latest) is not delivered")

    # The biography shows the killed worker's attempt: one row, written when the rescuer took
    # its lease over, with the killed worker, its attempt number and its lease's start.
    if p.point != "intake":
        crashed = [e for e in events if e.event == "taken-over"]
        for e in crashed:
            if e.worker != "doomed" or e.attempt is None or e.leased_at is None:
                problems.append(f"a takeover row does not show doomed's attempt: {e}")
            if "taken over by rescuer" not in (e.detail or ""):
                problems.append(f"takeover of #{e.message_pk} does not name rescuer: {e}")
        if not crashed:
            problems.append("no history row shows the killed attempt taken over by the rescuer")
    return problems


# -- python procs.py [--intake-chunk N] run ...: exchange run with small intake chunks --------


def _main(argv: list[str]) -> None:
    import functools

    from exchange.cli import main
    from exchange.intake import staging_table as intake

    if argv[:1] == ["--intake-chunk"]:
        intake.take = functools.partial(intake.take, chunk=int(argv[1]))  # type: ignore[assignment]
        argv = argv[2:]
    sys.argv = ["exchange", *argv]
    main()


if __name__ == "__main__":
    _main(sys.argv[1:])
