"""Where a claim's and a record's time goes on PostgreSQL (issue 35, item 1: the diagnosis).

    python -m bench.pg_diagnose [--messages 20000] [--batch 100] [--explain-at 10,100,190]
        [--already 100000]

The drain of ``bench.lease_cost`` (``--messages`` prices staged, taken in, then claims of
``--batch`` each recorded delivered, no HTTP) on a fresh PostgreSQL database, with every
statement the driver runs timed (SQLAlchemy's cursor events: the time from sending a statement
to having its rows, one round trip each) and counted per transaction. At the batches named by
``--explain-at``, the claim and then the record are first run in a transaction that is rolled
back with their statements and parameters kept, then each kept statement is run again under
``EXPLAIN (ANALYZE, BUFFERS)`` in one more transaction rolled back (the ``SET`` statements as
they are), so each plan is the one for that moment's table and those values; then the batch
is claimed and recorded for real.

Prints Markdown: per transaction (claim, record), the statements and round trips per batch,
the median milliseconds of each statement, of all statements and of the whole transaction
(the rest is the client's Python, BEGIN and COMMIT), and the plans.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, event

from bench.growth import SEED, fill
from bench.harness import fresh_database
from bench.lease_cost import WORKER, take_in
from exchange.db.engine import make_engine
from exchange.dev.testing import price_row, stage
from exchange.domain.policy import DEFAULT_KINDS, KindPolicies
from exchange.domain.retry import RetryPolicy, decide
from exchange.domain.verdicts import Classification, Verdict
from exchange.queue import lease, record


def label(statement: str) -> str:
    """A short name for a statement: its verb and first table, e.g. ``UPDATE messages``."""
    text = " ".join(statement.split())
    if text.upper().startswith("SET "):
        return text[:60]
    verb = text.split(" ", 1)[0].upper()
    table = re.search(r"\b(?:FROM|UPDATE|INTO)\s+(\w+)", text, re.IGNORECASE)
    what = table.group(1) if table else "?"
    if verb == "SELECT" and "FOR UPDATE" in text.upper():
        verb = "SELECT … FOR UPDATE"
    return f"{verb} {what}"


class Tracer:
    """Times every statement the engine's connections run; keeps them while ``keeping``."""

    def __init__(self, engine: Engine) -> None:
        self.timings: list[tuple[str, float]] = []
        self.kept: list[tuple[str, Any]] | None = None
        self._started = 0.0
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)

    def _before(self, conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if self.kept is not None:
            self.kept.append((statement, params))
        self._started = time.perf_counter()

    def _after(self, conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        self.timings.append((label(statement), time.perf_counter() - self._started))

    def take(self) -> list[tuple[str, float]]:
        timings, self.timings = self.timings, []
        return timings

    @contextlib.contextmanager
    def keeping(self) -> Iterator[list[tuple[str, Any]]]:
        self.kept = []
        try:
            yield self.kept
        finally:
            self.kept = None


def explain(connection: Connection, kept: list[tuple[str, Any]]) -> list[str]:
    """Each kept statement again, under EXPLAIN (ANALYZE, BUFFERS), in a transaction rolled
    back; the plans as text (a SET runs as it is)."""
    out = []
    with connection.begin() as transaction:
        for statement, params in kept:
            if statement.lstrip().upper().startswith("SET "):
                connection.exec_driver_sql(statement, params)
                continue
            rows = connection.exec_driver_sql(
                "EXPLAIN (ANALYZE, BUFFERS) " + statement, params
            ).all()
            out.append(f"-- {label(statement)}\n" + "\n".join(str(r[0]) for r in rows))
        transaction.rollback()
    return out


def diagnose(
    url: str, messages: int, batch: int, explain_at: set[int], already: int = 0
) -> dict[str, Any]:
    engine = make_engine(url)
    kinds = KindPolicies.of(DEFAULT_KINDS)
    delivered = Classification(
        Verdict.DELIVERED, "delivered", http_status=200, receipt='{"receipt": "r-1"}'
    )
    policy = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=60.0)
    per: dict[str, list[list[tuple[str, float]]]] = {"claim": [], "record": []}
    whole: dict[str, list[float]] = {"claim": [], "record": []}
    cpu: dict[str, list[float]] = {"claim": [], "record": []}
    plans: dict[int, dict[str, list[str]]] = {}
    try:
        if already:
            fill(engine, already)  # the growth section's table: ``already`` messages done
        stage(engine, [price_row(f"SKU-{n:07d}", 1, f"{n % 1000}.50") for n in range(messages)])
        now = datetime(2026, 1, 1, tzinfo=UTC)
        take_in(engine, now)
        tracer = Tracer(engine)

        def claim(connection: Connection) -> lease.Batch:
            return lease.claim(
                connection,
                worker=WORKER,
                now=now,
                limit=batch,
                lease_seconds=60,
                kinds=kinds,
                max_attempts=5,
            )

        def record_(connection: Connection, taken: lease.Batch) -> int:
            decision = decide(delivered, attempt=1, now=now, policy=policy, rng=random.Random(0))
            return record.record(
                connection,
                token=taken.token,
                worker=WORKER,
                now=now,
                outcomes=[(m, decision) for m in taken.messages],
                kinds=kinds,
            )

        number = 0
        with engine.connect() as connection:
            while True:
                number += 1
                now += timedelta(milliseconds=1)
                if number in explain_at:
                    with tracer.keeping() as kept, connection.begin() as transaction:
                        claim(connection)
                        transaction.rollback()
                    plans[number] = {"claim": explain(connection, kept)}
                tracer.take()
                started, spent = time.perf_counter(), time.process_time()
                with connection.begin():
                    taken = claim(connection)
                whole["claim"].append(time.perf_counter() - started)
                cpu["claim"].append(time.process_time() - spent)
                per["claim"].append(tracer.take())
                if not taken.messages:
                    break
                if number in explain_at:
                    with tracer.keeping() as kept, connection.begin() as transaction:
                        record_(connection, taken)
                        transaction.rollback()
                    plans[number]["record"] = explain(connection, kept)
                tracer.take()
                started, spent = time.perf_counter(), time.process_time()
                with connection.begin():
                    record_(connection, taken)
                whole["record"].append(time.perf_counter() - started)
                cpu["record"].append(time.process_time() - spent)
                per["record"].append(tracer.take())
            round_trip = []
            for _ in range(200):
                started = time.perf_counter()
                connection.exec_driver_sql("SELECT 1").all()
                round_trip.append(time.perf_counter() - started)
            connection.rollback()
            indexes = connection.exec_driver_sql(
                "SELECT tablename, count(*) FROM pg_indexes "
                "WHERE tablename IN ('messages', 'aggregates', 'message_history') GROUP BY 1"
            ).all()
            connection.exec_driver_sql("SELECT pg_stat_force_next_flush()")
            connection.rollback()
            updates = connection.exec_driver_sql(
                "SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                "WHERE relname IN ('messages', 'aggregates') ORDER BY relname"
            ).all()
            settings = connection.exec_driver_sql(
                "SELECT name, setting FROM pg_settings "
                "WHERE name IN ('synchronous_commit', 'fsync', 'shared_buffers', 'autovacuum')"
            ).all()
    finally:
        engine.dispose()
    return {
        "per": per,
        "whole": whole,
        "cpu": cpu,
        "plans": plans,
        "batches": number - 1,
        "round_trip_ms": statistics.median(round_trip) * 1000,
        "indexes": {str(t): int(n) for t, n in indexes},
        "hot": {str(t): f"{hot:,} of {n:,} updates HOT" for t, n, hot in updates},
        "settings": {str(k): str(v) for k, v in settings},
    }


def report(found: dict[str, Any], messages: int, batch: int) -> str:
    lines = [
        f"{messages:,} prices, batches of {batch}: {found['batches']} batches. A round trip "
        f"(`SELECT 1`, median of 200 after the drain): {found['round_trip_ms']:.2f} ms. "
        f"Indexes: {found['indexes']}. Updates (the whole run, intake included): "
        f"{found['hot']}. Server: {found['settings']}.",
        "",
    ]
    for part in ("claim", "record"):
        transactions = found["per"][part][:-1] if part == "claim" else found["per"][part]
        by_label: dict[str, list[float]] = defaultdict(list)
        counts: dict[str, list[int]] = defaultdict(list)
        for statements in transactions:
            seen: dict[str, int] = defaultdict(int)
            for name, seconds in statements:
                by_label[name].append(seconds)
                seen[name] += 1
            for name in seen:
                counts[name].append(seen[name])
        sums = [sum(s for _, s in statements) for statements in transactions]
        whole = found["whole"][part][: len(transactions)]
        cpu = found["cpu"][part][: len(transactions)]
        trips = statistics.median(len(s) for s in transactions)
        lines += [
            f"### {part}: {trips:.0f} statements a batch (+ BEGIN and COMMIT)",
            "",
            "| statement | per batch | median ms | worst ms |",
            "|---|---|---|---|",
        ]
        for name, seconds in by_label.items():
            lines.append(
                f"| `{name}` | {statistics.median(counts[name]):.0f} "
                f"| {statistics.median(seconds) * 1000:.2f} | {max(seconds) * 1000:.2f} |"
            )
        lines += [
            f"| all statements | | {statistics.median(sums) * 1000:.2f} | {max(sums) * 1000:.2f} |",
            f"| the whole transaction | | {statistics.median(whole) * 1000:.2f} "
            f"| {max(whole) * 1000:.2f} |",
            f"| of which this process's CPU | | {statistics.median(cpu) * 1000:.2f} "
            f"| {max(cpu) * 1000:.2f} |",
            "",
        ]
    for number, parts in sorted(found["plans"].items()):
        for part, plans in parts.items():
            lines += [f"### Plans, batch {number}, {part}", "", "```", *plans, "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--explain-at", default="10,100,190", help="batch numbers, from 1")
    parser.add_argument(
        "--already",
        type=int,
        default=0,
        help="messages done in the table first, as the growth section fills it (0: none)",
    )
    args = parser.parse_args(argv)
    try:
        explain_at = {int(n) for n in args.explain_at.split(",") if n.strip()}
    except ValueError:
        parser.exit(2, "python -m bench.pg_diagnose: --explain-at takes batch numbers: 10,100\n")
    if args.already and args.already < SEED:
        parser.exit(2, f"python -m bench.pg_diagnose: --already is 0 or at least {SEED}\n")
    if args.messages < 1 or args.batch < 1:
        parser.exit(2, "python -m bench.pg_diagnose: --messages and --batch: 1 or more\n")
    with tempfile.TemporaryDirectory() as tmp, fresh_database("postgresql", Path(tmp)) as url:
        found = diagnose(url, args.messages, args.batch, explain_at, args.already)
    print(report(found, args.messages, args.batch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
