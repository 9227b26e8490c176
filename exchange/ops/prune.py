"""Retention: ``exchange prune`` and the daily prune of ``exchange run``.

Removes what the service no longer needs, once it is older than ``EXCHANGE_RETENTION_DAYS``:

- delivered and cancelled messages (age: ``updated_at``, when they ended) with their history;
- staging rows that were taken (age: ``taken_at``);
- the 1C exchange's log, ``cml_exchanges`` (age: its last sign of life, ``finished_at``, else
  the heartbeat, else the start).

Never a quarantined or pending message, and never an ``aggregates`` row: its ``done_version``
is the cursor that keeps an old version from being sent again once its message is gone. Never
``cml_packages`` either: its digests recognise a file 1C sends again, and its newest package's
version and mark number the next package (without them an old file would be staged again
above newer prices).

A message is pruned only when its version is at or below its aggregate's cursor. A delivered
message always is; a cancelled one may not be: an operator can cancel a strictly ordered
version above a gap, and the cursor steps over it (``lease.advance_strict``) only when the gap
closes, reading that very row. Keeping every message above the cursor also means that every
pruned version is one the cursor already covers, so if 1C writes a pruned version again (which
intake can no longer recognise as a duplicate) it is never sent: latest-wins cancels it
``stale``, and strict order never claims a version at or below the cursor.

Work goes in batches of ``batch_size`` ids, one short transaction each, so no lock is held for
long. Each batch continues after the highest id of the one before (keyset), so a batch never
walks again over the rows earlier batches looked at.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Table,
    and_,
    delete,
    exists,
    func,
    or_,
    select,
)

from exchange.db.engine import transaction
from exchange.db.schema import aggregates, cml_exchanges, history, messages, staging
from exchange.db.worker_rows import clear_old_workers
from exchange.domain.clock import Clock
from exchange.domain.states import FINAL, values
from exchange.errors import DatabaseUnavailable
from exchange.i18n import Lang, _
from exchange.ops import sign_ins

log = logging.getLogger(__name__)

BATCH_SIZE = 1000
PRUNE_EVERY = timedelta(days=1)
# The first scheduled prune waits a little after start, so that a service that restarts often
# still prunes, without competing with its first cycles.
FIRST_PRUNE_AFTER = timedelta(minutes=1)
ENDED = values(FINAL)


@dataclass
class PruneReport:
    cutoff: datetime
    dry_run: bool
    messages: int = 0
    history: int = 0
    staging: int = 0
    exchanges: int = 0
    batches: int = 0

    def describe(self, lang: Lang = "en") -> str:
        """What was (or would be) removed: English for the log, ``lang`` for a person."""
        if self.dry_run:
            said = _(
                "would remove {messages} delivered or cancelled message(s) with {history} "
                "history row(s), {staging} taken staging row(s) and {exchanges} 1C exchange log "
                "row(s), older than {cutoff}",
                lang,
            )
        else:
            said = _(
                "removed {messages} delivered or cancelled message(s) with {history} history "
                "row(s), {staging} taken staging row(s) and {exchanges} 1C exchange log row(s), "
                "older than {cutoff}",
                lang,
            )
        return said.format(
            messages=self.messages,
            history=self.history,
            staging=self.staging,
            exchanges=self.exchanges,
            cutoff=self.cutoff.isoformat(timespec="seconds"),
        )


def prunable_messages(cutoff: datetime) -> ColumnElement[bool]:
    """Ended before ``cutoff``, and at or below the cursor (or a rejected row's record,
    which belongs to no aggregate and so to no cursor)."""
    covered = exists().where(
        aggregates.c.id == messages.c.aggregate_id,
        messages.c.version <= aggregates.c.done_version,
    )
    return and_(
        messages.c.state.in_(ENDED),
        messages.c.updated_at < cutoff,
        or_(messages.c.aggregate_id.is_(None), covered),
    )


def prunable_staging(cutoff: datetime) -> ColumnElement[bool]:
    # An untaken row has a NULL taken_at and never compares below the cutoff.
    return staging.c.taken_at < cutoff


def prunable_exchanges(cutoff: datetime) -> ColumnElement[bool]:
    last_seen = func.coalesce(
        cml_exchanges.c.finished_at, cml_exchanges.c.heartbeat_at, cml_exchanges.c.started_at
    )
    return last_seen < cutoff


def prune(
    engine: Engine,
    staging_engine: Engine | None,
    *,
    now: datetime,
    retention_days: float,
    batch_size: int = BATCH_SIZE,
    dry_run: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
) -> PruneReport:
    """Remove what ended more than ``retention_days`` before ``now``; ``dry_run`` only counts.

    ``should_stop`` is asked between batches: a service that is stopping leaves the rest to
    the next prune instead of holding up its exit.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    report = PruneReport(now - timedelta(days=retention_days), dry_run)
    staging_source = staging_engine or engine
    if dry_run:
        with transaction(engine, read_only=True) as connection:
            report.messages, report.history = _count_messages(connection, report.cutoff)
        with transaction(staging_source, read_only=True) as connection:
            report.staging = _count(connection, staging, prunable_staging(report.cutoff))
        with transaction(engine, read_only=True) as connection:
            report.exchanges = _count(connection, cml_exchanges, prunable_exchanges(report.cutoff))
        return report

    after = 0
    while not should_stop():
        with transaction(engine) as connection:
            batch = _delete_messages(connection, report.cutoff, after, batch_size)
        if batch is None:
            break
        after, removed, removed_history = batch
        report.messages += removed
        report.history += removed_history
        report.batches += 1

    after = 0
    while not should_stop():
        with transaction(staging_source) as connection:
            rows = _delete_batch(
                connection, staging, prunable_staging(report.cutoff), after, batch_size
            )
        if rows is None:
            break
        after, removed = rows
        report.staging += removed
        report.batches += 1

    after = 0
    while not should_stop():
        with transaction(engine) as connection:
            rows = _delete_batch(
                connection, cml_exchanges, prunable_exchanges(report.cutoff), after, batch_size
            )
        if rows is None:
            break
        after, removed = rows
        report.exchanges += removed
        report.batches += 1

    # Rows that say how things are, not what happened: kept a day (contract 15).
    with transaction(engine) as connection:
        clear_old_workers(connection, now)
        sign_ins.clear_old(connection, now)
    if report.messages or report.staging or report.exchanges:
        log.info("prune: %s", report.describe())
    return report


def _upto(
    connection: Connection, table: Table, condition: ColumnElement[bool], after: int, size: int
) -> int | None:
    """The highest id of the next batch: the first ``size`` matching ids above ``after``."""
    batch = (
        select(table.c.id)
        .where(condition, table.c.id > after)
        .order_by(table.c.id)
        .limit(size)
        .subquery("batch")
    )
    upto: int | None = connection.execute(select(func.max(batch.c.id))).scalar()
    return upto


def _delete_messages(
    connection: Connection, cutoff: datetime, after: int, size: int
) -> tuple[int, int, int] | None:
    """One batch: its messages' history, then the messages. Returns (upto, messages,
    history), or None when nothing is left."""
    condition = prunable_messages(cutoff)
    upto = _upto(connection, messages, condition, after, size)
    if upto is None:
        return None
    # The batch is the matching ids in (after, upto]; the condition is checked again as the
    # rows are deleted, so nothing that changed meanwhile is removed.
    in_batch = and_(condition, messages.c.id > after, messages.c.id <= upto)
    removed_history = connection.execute(
        delete(history).where(history.c.message_pk.in_(select(messages.c.id).where(in_batch)))
    ).rowcount
    # The foreign key also cascades to history: a duplicate staging row recorded on one of
    # these messages between the two statements goes with it.
    removed = connection.execute(delete(messages).where(in_batch)).rowcount
    return upto, removed, removed_history


def _delete_batch(
    connection: Connection, table: Table, condition: ColumnElement[bool], after: int, size: int
) -> tuple[int, int] | None:
    upto = _upto(connection, table, condition, after, size)
    if upto is None:
        return None
    removed = connection.execute(
        delete(table).where(condition, table.c.id > after, table.c.id <= upto)
    ).rowcount
    return upto, removed


def _count(connection: Connection, table: Table, condition: ColumnElement[bool]) -> int:
    return int(
        connection.execute(select(func.count()).select_from(table).where(condition)).scalar_one()
    )


def _count_messages(connection: Connection, cutoff: datetime) -> tuple[int, int]:
    condition = prunable_messages(cutoff)
    count = _count(connection, messages, condition)
    history_rows = _count(
        connection, history, history.c.message_pk.in_(select(messages.c.id).where(condition))
    )
    return count, history_rows


# -- the daily prune of ``exchange run`` ------------------------------------------------------


def scheduled_job(
    engine: Engine,
    staging_engine: Engine | None,
    *,
    clock: Clock,
    retention_days: float,
    stopping: Callable[[], bool],
) -> Callable[[], Coroutine[Any, Any, None]]:
    """The daily prune as a scheduler job: in a thread, so that cycles keep their pace; a
    failure is logged and the next day tries again. ``stopping`` says the service stops."""

    async def job() -> None:
        if stopping():
            return
        try:
            await asyncio.to_thread(
                prune,
                engine,
                staging_engine,
                now=clock.now(),
                retention_days=retention_days,
                should_stop=stopping,
            )
        except asyncio.CancelledError:
            # The service stops: the thread ends after its current step (``should_stop``) and
            # the process waits for it before exiting; a stop is not an error to report.
            return
        except DatabaseUnavailable as exc:
            log.error("prune failed: %s; the next prune will try again", exc)
        except Exception:
            log.exception("prune failed; the next prune will try again")

    return job


def schedule(scheduler: Any, job: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Add the daily prune (``scheduled_job``) to ``exchange run``'s scheduler (APScheduler,
    untyped)."""
    scheduler.add_job(
        job,
        "interval",
        seconds=PRUNE_EVERY.total_seconds(),
        next_run_time=datetime.now(UTC) + FIRST_PRUNE_AFTER,
        max_instances=1,
        coalesce=True,
        id="prune",
    )
