"""The soak: minutes of traffic, faults and killed workers, then every invariant checked.

    .venv/bin/python bench/soak.py [--minutes 5] [--workers 3] [--seed 1] [--output docs/soak.md]
                                   [--keep-db]     (keep the database and logs for a post-mortem)
    make soak                       (the same, with the defaults)

What runs, all on this machine:

- a PostgreSQL database of its own (created from ``EXCHANGE_TEST_PG``, default
  postgresql://postgres@127.0.0.1:5432/postgres, migrated, dropped at the end);
- the site simulator with random faults: 503s, answers slower than the HTTP timeout (a read
  timeout, result unknown), effects applied and the answer dropped, and 409 "still processing"
  (a key the site has not finished: temporary);
- N ``exchange run`` worker processes; worker ``w0`` lives the whole run, the others are killed
  with SIGKILL at random moments and started again (a new worker id each time);
- a stager that keeps inserting price rows (several versions per SKU, often in one go) and
  financial postings (each document's versions in order), as 1C does: INSERT only.

When the time is up the stager stops, every worker is alive again, and the run drains (faults
still on) until no staging row is untaken and no message pending. Then it checks: every staging
row became exactly one message (none lost); one effect per message at the site; per SKU the
applied versions only rise and end at the highest staged; per document every posting applied
once, in order; attempts never above EXCHANGE_MAX_ATTEMPTS; nothing quarantined (every fault is
temporary); no aggregate ever leased to two workers at once. Each worker's resident memory is
sampled from /proc every few seconds (Linux): first, last, max and a least-squares slope after a
warm-up, per incarnation that lived long enough to say something.

It prints a summary and writes it to ``--output`` (docs/soak.md). Exit 0 when every invariant
held, 1 otherwise. Not part of CI: it runs for minutes on purpose.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import Engine, func, select, text
from sqlalchemy.engine import make_url

from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.schema import history, staging
from exchange.dev.sitemodel import Reply, Update, reply
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import in_flight_overlaps, one_channel_messages
from exchange.intake.stage import stage

ROOT = Path(__file__).resolve().parent.parent
ADMIN_URL = os.environ.get("EXCHANGE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
TOKEN = "soak-token"
MAX_ATTEMPTS = 50
LEASE_SECONDS = 5
HTTP_TIMEOUT = 1.0
RSS_EVERY_S = 2.0
RSS_WARMUP_S = 30.0  # imports, pools and caches settle first
PENDING = ("new", "in_progress", "delayed")


class SoakSite(SiteSimulator):
    """The simulator plus one fault it lacks: 409 "processing", the key not finished yet."""

    def __init__(self, *args: Any, processing_rate: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.processing_rate = processing_rate
        self._processing_rng = random.Random(kwargs["faults"].seed + 1)
        self.processing_answers = 0

    def _fresh_key_fault(
        self, update: Update, faults: Faults, *, roll_failure: bool
    ) -> Reply | None:
        # Called for a key with no stored answer only: a replay is never "processing".
        if self._processing_rng.random() < self.processing_rate:
            self.processing_answers += 1
            return reply(409, {"error": "processing"})
        return super()._fresh_key_fault(update, faults, roll_failure=roll_failure)


# -- the stager ---------------------------------------------------------------------------------


@dataclass
class Staged:
    rows: int = 0
    price_top: dict[str, int] = field(default_factory=dict)
    posting_last: dict[str, int] = field(default_factory=dict)


def stager(
    engine: Engine, rng: random.Random, stop: threading.Event, staged: Staged, skus: int, docs: int
) -> None:
    while not stop.is_set():
        rows = []
        for _ in range(rng.randint(5, 40)):
            sku = f"SKU-{rng.randrange(skus)}"
            for _ in range(rng.choice((1, 1, 2, 3, 5))):  # often several versions at once
                version = staged.price_top.get(sku, 0) + 1
                staged.price_top[sku] = version
                price = Decimal(rng.randrange(100, 10_000_000)) / 100
                rows.append(_row("price", sku, version, {"sku": sku, "price": str(price)}))
        for _ in range(rng.randint(0, 6)):
            doc = f"DOC-{rng.randrange(docs)}"
            version = staged.posting_last.get(doc, 0) + 1
            staged.posting_last[doc] = version
            amount = str(Decimal(rng.randrange(1, 1_000_000)) / 100)
            rows.append(
                _row("financial_posting", doc, version, {"document": doc, "amount": amount})
            )
        rng.shuffle(rows)  # concurrent 1C sessions: versions of one SKU may commit out of order
        with transaction(engine) as connection:
            stage(connection, rows)
        staged.rows += len(rows)
        stop.wait(rng.uniform(0.05, 0.4))


def _row(kind: str, aggregate: str, version: int, payload: dict[str, str]) -> dict[str, Any]:
    if kind == "price":
        payload = {**payload, "currency": "RUB", "price_type": "retail"}
    return {
        "kind": kind,
        "aggregate": aggregate,
        "aggregate_version": version,
        "payload": json.dumps(payload),
        "schema_version": "1",
        "source_ref": f"soak {kind} {aggregate} {version}",
    }


# -- the workers --------------------------------------------------------------------------------


@dataclass
class Incarnation:
    worker_id: str
    proc: subprocess.Popen[bytes]
    started: float
    samples: list[tuple[float, int]] = field(default_factory=list)  # (seconds, RSS kB)
    killed: bool = False


class Fleet:
    def __init__(self, db_url: str, site_url: str, workdir: Path, count: int) -> None:
        self.db_url, self.site_url, self.workdir = db_url, site_url, workdir
        self.generation: Counter[int] = Counter()
        self.slots: dict[int, Incarnation] = {}
        self.all: list[Incarnation] = []
        self.lock = threading.Lock()
        for slot in range(count):
            self.start(slot)

    def start(self, slot: int) -> None:
        self.generation[slot] += 1
        worker_id = f"w{slot}" if self.generation[slot] == 1 else f"w{slot}.{self.generation[slot]}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
        env.update(
            EXCHANGE_DATABASE_URL=self.db_url,
            EXCHANGE_SITE_URL=self.site_url,
            EXCHANGE_SITE_TOKEN=TOKEN,
            EXCHANGE_WORKER_ID=worker_id,
            EXCHANGE_POLL_INTERVAL="0.2",
            EXCHANGE_BATCH_SIZE="50",
            EXCHANGE_CONCURRENCY="8",
            EXCHANGE_LEASE_SECONDS=str(LEASE_SECONDS),
            EXCHANGE_MAX_ATTEMPTS=str(MAX_ATTEMPTS),
            EXCHANGE_RETRY_BASE_DELAY="0.05",
            EXCHANGE_RETRY_MAX_DELAY="1",
            EXCHANGE_HTTP_TIMEOUT=str(HTTP_TIMEOUT),
            EXCHANGE_LOG_LEVEL="WARNING",
        )
        with (self.workdir / f"{worker_id}.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "exchange", "run"],
                env=env,
                cwd=self.workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        with self.lock:
            incarnation = Incarnation(worker_id, proc, time.monotonic())
            self.slots[slot] = incarnation
            self.all.append(incarnation)

    def kill(self, slot: int) -> str:
        with self.lock:
            incarnation = self.slots[slot]
        incarnation.proc.send_signal(signal.SIGKILL)
        incarnation.proc.wait(timeout=30)
        incarnation.killed = True
        return incarnation.worker_id

    def sample(self, t0: float) -> None:
        with self.lock:
            live = list(self.slots.values())
        for incarnation in live:
            rss = rss_kb(incarnation.proc.pid)
            if rss is not None and incarnation.proc.poll() is None:
                incarnation.samples.append((time.monotonic() - t0, rss))

    def stop(self) -> dict[str, int]:
        with self.lock:
            live = list(self.slots.values())
        for incarnation in live:
            if incarnation.proc.poll() is None:
                incarnation.proc.send_signal(signal.SIGTERM)
        codes = {}
        for incarnation in live:
            try:
                codes[incarnation.worker_id] = incarnation.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                incarnation.proc.kill()
                codes[incarnation.worker_id] = incarnation.proc.wait(timeout=10)
        return codes


def rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def killer(
    fleet: Fleet, rng: random.Random, stop: threading.Event, kills: list[str], count: int
) -> None:
    if count < 2:
        return  # w0 is never killed: with one worker there is nobody to kill
    while not stop.wait(rng.uniform(10, 30)):
        slot = rng.randrange(1, count)
        kills.append(fleet.kill(slot))
        if stop.wait(rng.uniform(0.5, 3.0)):
            fleet.start(slot)
            return
        fleet.start(slot)


# -- the checks -----------------------------------------------------------------------------


def settled(engine: Engine) -> bool:
    m = one_channel_messages()
    with transaction(engine, read_only=True) as connection:
        untaken = connection.execute(
            select(func.count()).select_from(staging).where(staging.c.taken_at.is_(None))
        ).scalar_one()
        pending = connection.execute(
            select(func.count()).select_from(m).where(m.c.state.in_(PENDING))
        ).scalar_one()
    return untaken == 0 and pending == 0


def check(engine: Engine, site: SiteSimulator, staged: Staged) -> tuple[list[str], dict[str, Any]]:
    """Every invariant: the failures (empty when all held) and the figures."""
    failures: list[str] = []
    m = one_channel_messages()
    with transaction(engine, read_only=True) as connection:
        orphans = connection.execute(
            text(
                "SELECT count(*) FROM staging_intents s WHERE s.taken_at IS NULL OR NOT EXISTS "
                "(SELECT 1 FROM messages m WHERE m.kind = s.kind AND m.aggregate = s.aggregate "
                "AND m.version = s.aggregate_version AND NOT m.rejected)"
            )
        ).scalar_one()
        staging_rows = connection.execute(select(func.count()).select_from(staging)).scalar_one()
        states: dict[str, int] = dict(
            connection.execute(select(m.c.state, func.count()).group_by(m.c.state)).all()
        )
        reasons: dict[str | None, int] = dict(
            connection.execute(
                select(m.c.reason, func.count())
                .where(m.c.state == "cancelled")
                .group_by(m.c.reason)
            ).all()
        )
        most_attempts = connection.execute(select(func.max(m.c.attempts))).scalar_one()
        events: dict[str, int] = dict(
            connection.execute(
                select(history.c.event, func.count()).group_by(history.c.event)
            ).all()
        )
        undelivered_postings = connection.execute(
            select(func.count())
            .select_from(m)
            .where(m.c.kind == "financial_posting", m.c.state != "delivered")
        ).scalar_one()
        finished: dict[str, tuple[str, str | None]] = {
            message_id: (state, reason)
            for message_id, state, reason in connection.execute(
                select(m.c.message_id, m.c.state, m.c.reason)
            )
        }
        top_delivered = dict(
            connection.execute(
                select(m.c.aggregate, func.max(m.c.version))
                .where(m.c.kind == "price", m.c.state == "delivered")
                .group_by(m.c.aggregate)
            ).all()
        )
    if staging_rows != staged.rows:
        failures.append(f"{staged.rows} rows staged, {staging_rows} in the staging table")
    if orphans:
        failures.append(f"{orphans} staging rows without their message (lost)")
    if set(states) - {"delivered", "cancelled"}:
        failures.append(f"messages not finished: {states}")
    if most_attempts is not None and most_attempts > MAX_ATTEMPTS:
        failures.append(f"a message made {most_attempts} attempts (max {MAX_ATTEMPTS})")
    counts = site.effect_counts()
    if undelivered_postings:
        failures.append(f"{undelivered_postings} postings not delivered")
    unknown = [key for key in counts if key not in finished]
    if unknown:
        failures.append(f"{len(unknown)} effects at the site for no known message: {unknown[:3]}")
    # Applied at the site, answer lost, then overtaken by a newer version before it was asked
    # again: cancelled in the database, one effect at the site. Correct for latest-wins.
    overtaken = Counter(
        f"{finished[key][0]} {finished[key][1]}"
        for key in counts
        if key in finished and finished[key][0] != "delivered"
    )
    doubled = {key: n for key, n in counts.items() if n != 1}
    if doubled:
        failures.append(f"{len(doubled)} messages took effect more than once: {list(doubled)[:5]}")
    for sku, top in staged.price_top.items():
        applied = site.applied_versions("price", sku)
        if applied != sorted(set(applied)):
            failures.append(f"{sku}: a stale version applied after a newer one: {applied}")
        elif not applied or applied[-1] != top:
            failures.append(f"{sku}: last applied {applied[-1:]} is not the last staged {top}")
        if top_delivered.get(sku) is not None and top_delivered[sku] > top:
            failures.append(f"{sku}: delivered version above anything staged")
    for doc, last in staged.posting_last.items():
        applied = site.applied_versions("financial_posting", doc)
        if applied != list(range(1, last + 1)):
            failures.append(f"{doc}: postings applied as {applied[:10]}…, expected 1..{last}")
    overlaps = in_flight_overlaps(engine)
    if overlaps:
        failures.append(f"{len(overlaps)} aggregates in flight twice at once: {overlaps[:3]}")
    figures = {
        "staging_rows": staging_rows,
        "states": states,
        "cancelled_reasons": {str(k): v for k, v in reasons.items()},
        "max_attempts_seen": most_attempts,
        "effects": sum(counts.values()),
        "events": events,
        "requests_by_status": dict(site.requests_by_status()),
        "overtaken": dict(overtaken),
    }
    return failures, figures


# -- memory -------------------------------------------------------------------------------------


def slope_mb_per_min(samples: list[tuple[float, int]]) -> float | None:
    points = [(t, kb) for t, kb in samples if t - samples[0][0] >= RSS_WARMUP_S]
    if len(points) < 5:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_r = sum(r for _, r in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return None
    cov = sum((t - mean_t) * (r - mean_r) for t, r in points)
    return cov / var * 60 / 1024


def memory_rows(fleet: Fleet) -> list[str]:
    rows = []
    for inc in fleet.all:
        if not inc.samples:
            continue
        lived = inc.samples[-1][0] - inc.samples[0][0]
        slope = slope_mb_per_min(inc.samples)
        rss = [kb for _, kb in inc.samples]
        warm = [kb for t, kb in inc.samples if t - inc.samples[0][0] >= RSS_WARMUP_S]
        rows.append(
            f"| {inc.worker_id} | {lived:.0f} | {len(rss)} | "
            f"{f'{warm[0] / 1024:.1f}' if warm else 'n/a'} | "
            f"{rss[-1] / 1024:.1f} | {max(rss) / 1024:.1f} | "
            f"{'n/a (short life)' if slope is None else f'{slope:+.2f}'} | "
            f"{'SIGKILL' if inc.killed else 'SIGTERM at the end'} |"
        )
    return rows


# -- the run --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="traffic time (default 5)")
    parser.add_argument("--workers", type=int, default=3, help="worker processes (default 3)")
    parser.add_argument("--skus", type=int, default=2000, help="SKUs the stager draws from")
    parser.add_argument("--docs", type=int, default=50, help="documents for postings")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--drain-timeout", type=float, default=600.0, help="seconds")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "soak.md")
    parser.add_argument(
        "--keep-db", action="store_true", help="keep the database (and logs) for a post-mortem"
    )
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.workers < 1 or args.skus < 1 or args.docs < 1:
        parser.error("--minutes, --workers, --skus and --docs must be positive")

    rng = random.Random(args.seed)
    name = f"exchange_soak_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        print(f"error: PostgreSQL unreachable at {ADMIN_URL}: {exc}".splitlines()[0])
        return 2
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        pg_version = admin.execute("SHOW server_version").fetchone()
    db_url = (
        make_url(ADMIN_URL)
        .set(drivername="postgresql+psycopg", database=name)
        .render_as_string(hide_password=False)
    )
    engine = make_engine(db_url)
    try:
        upgrade(engine)
        faults = Faults(
            fail_rate=0.05,
            drop_after_effect_rate=0.02,
            slow_rate=0.01,
            slow_seconds=HTTP_TIMEOUT * 1.5,
            seed=args.seed,
        )
        site = SoakSite(token=TOKEN, faults=faults, processing_rate=0.02)
        workdir = tempfile.mkdtemp(prefix="soak-")
        with site:
            code, summary = soak(args, rng, engine, db_url, site, Path(workdir))
        if args.keep_db:
            print(f"kept: database {name}, worker logs in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        summary = summary.replace("{pg}", pg_version[0] if pg_version else "?")
        print(summary)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(summary)
        print(f"\nwritten to {args.output}")
        return code
    finally:
        engine.dispose()
        if not args.keep_db:
            with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def soak(
    args: argparse.Namespace,
    rng: random.Random,
    engine: Engine,
    db_url: str,
    site: SoakSite,
    workdir: Path,
) -> tuple[int, str]:
    started_at = datetime.now(UTC)
    t0 = time.monotonic()
    staged = Staged()
    stop_staging = threading.Event()
    stop_killing = threading.Event()
    kills: list[str] = []
    fleet = Fleet(db_url, site.url, workdir, args.workers)
    threads = [
        threading.Thread(
            target=stager,
            args=(engine, random.Random(rng.random()), stop_staging, staged, args.skus, args.docs),
        ),
        threading.Thread(
            target=killer,
            args=(fleet, random.Random(rng.random()), stop_killing, kills, args.workers),
        ),
    ]
    for thread in threads:
        thread.start()
    traffic_s = args.minutes * 60
    next_report = 30.0
    try:
        while (elapsed := time.monotonic() - t0) < traffic_s:
            fleet.sample(t0)
            if elapsed >= next_report:
                print(
                    f"  {elapsed:5.0f} s: {staged.rows} rows staged, "
                    f"{len(site.effects())} effects, {len(kills)} kills",
                    flush=True,
                )
                next_report += 30
            time.sleep(RSS_EVERY_S)
    finally:
        stop_staging.set()
        stop_killing.set()
        for thread in threads:
            thread.join(timeout=60)
    traffic_end = time.monotonic()
    drained = False
    while time.monotonic() - traffic_end < args.drain_timeout:
        fleet.sample(t0)
        if settled(engine):
            drained = True
            break
        time.sleep(1.0)
    drain_s = time.monotonic() - traffic_end
    codes = fleet.stop()
    failures, figures = check(engine, site, staged)
    if not drained:
        failures.insert(0, f"not drained after {args.drain_timeout:.0f} s")
    bad_exits = {w: c for w, c in codes.items() if c != 0}
    if bad_exits:
        failures.append(f"workers did not exit 0 on SIGTERM: {bad_exits}")
    logs = "".join(
        (workdir / f"{inc.worker_id}.log").read_text(errors="replace") for inc in fleet.all
    )
    tracebacks = logs.count("Traceback")
    failed_cycles = logs.count("cycle failed")
    failure_lines = [line[:300] for line in logs.splitlines() if "cycle failed" in line][:5]
    breaker = logs.count("circuit breaker open")
    total_s = time.monotonic() - t0
    delivered = figures["states"].get("delivered", 0)
    by_status = dict(sorted(figures["requests_by_status"].items()))
    lines = [
        "# Soak run",
        "",
        "Written by `bench/soak.py` (`make soak`); not part of CI. Rerun with "
        f"`.venv/bin/python bench/soak.py --minutes {args.minutes:g} --workers {args.workers} "
        f"--seed {args.seed}`.",
        "",
        f"- verdict: **{'PASS' if not failures else 'FAIL'}**",
        f"- started {started_at:%Y-%m-%d %H:%M} UTC; traffic {traffic_s / 60:.1f} min, "
        f"drain {drain_s:.1f} s, total {total_s / 60:.1f} min",
        f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, PostgreSQL {{pg}} (shared with other work: "
        "figures are indicative)",
        f"- {args.workers} worker processes (`w0` never killed), poll 0.2 s, batch 50, "
        f"concurrency 8, lease {LEASE_SECONDS} s, HTTP timeout {HTTP_TIMEOUT:g} s, "
        f"max attempts {MAX_ATTEMPTS}",
        "- site faults: 5% 503, 2% effect applied and answer dropped, 1% answer slower than "
        "the timeout, 2% 409 processing (first request of a key only)",
        "",
        "## Traffic",
        "",
        "| figure | value |",
        "|---|---|",
        f"| staging rows inserted | {staged.rows} |",
        f"| SKUs / documents touched | {len(staged.price_top)} / {len(staged.posting_last)} |",
        f"| postings | {sum(staged.posting_last.values())} |",
        f"| messages delivered | {delivered} |",
        f"| messages cancelled (by reason) | {figures['cancelled_reasons']} |",
        f"| effects at the site | {figures['effects']} |",
        "| of which applied, answer lost, then overtaken by a newer version (state, reason) | "
        f"{figures['overtaken']} |",
        f"| site answers by status (0 = dropped) | {by_status} |",
        f"| 409 processing answers | {site.processing_answers} |",
        f"| workers killed (SIGKILL) | {len(kills)} |",
        f"| leases taken over | {figures['events'].get('taken-over', 0)} |",
        f"| retries scheduled | {figures['events'].get('retry-scheduled', 0)} |",
        f"| highest attempts of a message | {figures['max_attempts_seen']} |",
        f"| failed cycles logged / breaker openings / tracebacks | "
        f"{failed_cycles} / {breaker} / {tracebacks} |",
        f"| delivered per second over the whole run | {delivered / total_s:.1f} |",
        "",
        "## Invariants",
        "",
        "No staging row lost (each is exactly one message), one effect per message at the site, "
        "no stale price applied (per SKU applied versions only rise, the last is the last staged), "
        "postings applied once each and in order and all delivered, every effect belongs to a "
        "message, attempts within the maximum, nothing "
        "quarantined, no aggregate leased to two workers at once, every worker exits 0 on "
        "SIGTERM.",
        "",
        *([f"- FAILED: {failure}" for failure in failures] or ["- all held"]),
        "",
        *(
            ["Failed cycles (first 5):", "", *[f"    {line}" for line in failure_lines], ""]
            if failure_lines
            else []
        ),
        "## Worker memory (RSS from /proc, sampled every "
        f"{RSS_EVERY_S:g} s; slope by least squares after {RSS_WARMUP_S:g} s of warm-up)",
        "",
        "| worker | lived s | samples | MB after warm-up | last MB | max MB | slope MB/min "
        "| ended |",
        "|---|---|---|---|---|---|---|---|",
        *memory_rows(fleet),
        "",
    ]
    return (0 if not failures else 1), "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
