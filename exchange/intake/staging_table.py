"""Intake (contract 1): untaken staging rows -> messages, duplicates or quarantine records.

Each chunk of rows is handled in one transaction that also marks the rows taken, so a row
ends as exactly one of: a new message, a recorded duplicate, or a quarantine record. When
staging lives in another database the rows are marked taken after that commit, and a row
taken twice is recognised by its (kind, aggregate, version) and recorded as a duplicate.
Validation is per row (``contracts.validate``); storing is set-based, a few statements per
chunk whatever its size: the chunk's accepted rows go to the database as one JSON parameter
(SQLite: one ``executemany`` of tuples), which creates the aggregates, inserts the messages
(``ON CONFLICT DO NOTHING``) and writes their ``taken`` history and deliveries from what was
inserted. Only rows not inserted (a message already
known) are looked up, to tell a duplicate from a version conflict. Memory is bounded by the
chunk, never by the number of rows waiting. Coalescing is the next stage (``coalesce``),
after every chunk is in.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from datetime import datetime

from sqlalchemy import Connection, Engine, func, select, text

from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import staging
from exchange.domain import urgency
from exchange.domain.policy import KindPolicies, Policy
from exchange.failpoints import failpoint
from exchange.intake.contracts import Accepted, Rejected, StagingRow, validate
from exchange.intake.staging_read import _mark_taken, _select_rows
from exchange.intake.staging_store import IntakeReport as IntakeReport
from exchange.intake.staging_store import _store as _store
from exchange.queue import order

log = logging.getLogger(__name__)

CHUNK = 5000
# After this many new messages, the planner's statistics are refreshed at once. PostgreSQL:
# until autovacuum gets round to it, the planner takes the freshly loaded tables for empty and
# a claim after a full reload took 0.7-1.1 s instead of a few ms (measured with python -m
# bench). SQLite keeps no statistics unless asked: without them the claim read every new
# message through the state index, 5 ms per batch at 20,000 new messages instead of 0.3 ms
# through the aggregate index (python -m bench.lease_cost). A reload of 5,000 prices stayed
# under the old 10,000: a marketplace target's known prices (exchange/db/known_prices.py) then
# took 8-12 s a lookup on PostgreSQL, a nested loop over every delivered row for want of the
# aggregates' statistics, 24 ms once analyzed (python -m bench.marketplace_pace).
ANALYZE_AFTER = 1_000


def take(
    engine: Engine,
    staging_engine: Engine | None,
    kinds: dict[str, Policy],
    now: datetime,
    *,
    chunk: int = CHUNK,
) -> IntakeReport:
    """Take every staging row that is untaken now, chunk by chunk."""
    separate = staging_engine is not None and staging_engine is not engine
    source = staging_engine if separate and staging_engine is not None else engine
    with transaction(source, read_only=True) as connection:
        last_id = connection.execute(
            select(func.max(staging.c.id)).where(staging.c.taken_at.is_(None))
        ).scalar()
    if last_id is None:
        return IntakeReport()
    # Where this take is dealt into the claim order (domain/urgency.py): read once, so that
    # the take keeps its staging order across its chunks. Each channel deals it in from its
    # own head (contract 13: a channel's claim order is its own).
    with transaction(engine, read_only=True) as connection:
        found = connection.execute(order.head_ranks(KindPolicies.of(kinds))).all()
        heads: dict[int, int | None] = {channel: rank for channel, rank in found}
    head, shifts = urgency.shifts(heads)
    if not separate and is_postgres(engine):
        report = _take_overlapped(engine, kinds, now, last_id, chunk, head, shifts)
    else:
        report = _take_in_turn(engine, source, separate, kinds, now, last_id, chunk, head, shifts)
    if report.taken:
        log.info(
            "intake: %d rows taken: %d messages, %d duplicates, %d rejected",
            report.taken,
            report.messages,
            report.duplicates,
            report.rejected,
        )
    if report.messages >= ANALYZE_AFTER:
        analyze(engine)
    return report


def analyze(engine: Engine) -> None:
    """Refresh the planner's statistics of the tables the claim reads."""
    with transaction(engine) as connection:
        if is_postgres(connection):
            connection.execute(text("ANALYZE aggregates, messages, deliveries, channel_aggregates"))
        else:  # sampled: a few hundred ms at 1,000,000 messages instead of seconds
            connection.execute(text("PRAGMA analysis_limit=1000"))
            for table in ("aggregates", "messages", "deliveries", "channel_aggregates"):
                connection.execute(text(f"ANALYZE {table}"))


def _take_in_turn(
    engine: Engine,
    source: Engine,
    separate: bool,
    kinds: dict[str, Policy],
    now: datetime,
    last_id: int,
    chunk: int,
    head: int | None,
    shifts: dict[int, int],
) -> IntakeReport:
    """One chunk after the other: SQLite (one writer), or staging in another database."""
    report = IntakeReport()
    after = 0
    while True:
        if separate:
            with transaction(source, read_only=True) as connection:
                rows = _select_rows(connection, after, last_id, chunk, lock=False)
            if not rows:
                break
            with transaction(engine) as connection:
                report.add(
                    _store(
                        connection,
                        _verdicts(rows, kinds),
                        now,
                        _dealt(head, report.taken, len(rows)),
                        shifts,
                    )
                )
            failpoint("intake-stored")
            with transaction(source) as connection:
                _mark_taken(connection, [row.id for row in rows], now)
        else:
            with transaction(engine) as connection:
                rows = _select_rows(connection, after, last_id, chunk, lock=is_postgres(connection))
                if not rows:
                    break
                verdicts = _verdicts(rows, kinds)
                dealt = _dealt(head, report.taken, len(rows))
                report.add(_store(connection, verdicts, now, dealt, shifts))
                _mark_taken(connection, [row.id for row in rows], now)
                failpoint("intake-stored")
        failpoint("intake-chunk-done")
        after = rows[-1].id
    return report


def _take_overlapped(
    engine: Engine,
    kinds: dict[str, Policy],
    now: datetime,
    last_id: int,
    chunk: int,
    head: int | None,
    shifts: dict[int, int],
) -> IntakeReport:
    """PostgreSQL with staging in the same database: two cores at work, not one in turn.

    While one chunk is stored and committed (the database works, this process waits on it, in
    a helper thread), the next chunk is selected, locked and validated in its own transaction
    (this process works). Chunks are still stored one at a time and in order, each in one
    transaction that also marks its rows taken.
    """
    report = IntakeReport()
    after = 0
    position = 0  # rows of the take before this chunk: its first rank is head + position
    with ThreadPoolExecutor(1, thread_name_prefix="intake-store") as pool:
        storing: Future[IntakeReport] | None = None
        while True:
            opened = ExitStack()
            with ExitStack() as on_error:
                on_error.push(opened)  # an error below rolls this chunk's transaction back
                connection = opened.enter_context(transaction(engine))
                rows = _select_rows(connection, after, last_id, chunk, lock=True)
                verdicts = _verdicts(rows, kinds)
                if storing is not None:
                    report.add(storing.result())
                    storing = None
                on_error.pop_all()
            if not rows:
                opened.close()
                break
            after = rows[-1].id
            dealt = _dealt(head, position, len(rows))
            position += len(rows)
            storing = pool.submit(
                _store_chunk, opened, connection, rows, verdicts, now, dealt, shifts
            )
    return report


def _store_chunk(
    opened: ExitStack,
    connection: Connection,
    rows: list[StagingRow],
    verdicts: list[Accepted | Rejected],
    now: datetime,
    dealt: range,
    shifts: dict[int, int],
) -> IntakeReport:
    with opened:  # commits, or rolls back on an error
        report = _store(connection, verdicts, now, dealt, shifts)
        _mark_taken(connection, [row.id for row in rows], now)
        failpoint("intake-stored")
    failpoint("intake-chunk-done")
    return report


def _dealt(head: int | None, before: int, count: int) -> range:
    """The ranks of a chunk of ``count`` rows after the take's first ``before`` rows."""
    return urgency.ranks(head, before + count)[before:]


def _verdicts(rows: list[StagingRow], kinds: dict[str, Policy]) -> list[Accepted | Rejected]:
    return [validate(row, kinds) for row in rows]
