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

Delivery state is per channel (``deliveries``, contract 13): a message goes only when what
follows holds of its delivery on every channel registered and not dropped (a dropped
channel's deliveries ended with it). A message is pruned only when its version is at or below
its aggregate's cursor on each channel. A delivered
message always is; a cancelled one may not be: an operator can cancel a strictly ordered
version above a gap, and the cursor steps over it (``lease.advance_strict``) only when the gap
closes, reading that very row. Keeping every message above the cursor also means that every
pruned version is one the cursor already covers, so if 1C writes a pruned version again (which
intake can no longer recognise as a duplicate) it is never sent: latest-wins cancels it
``stale``, and strict order never claims a version at or below the cursor.

A message of a coalescing (latest-wins) kind goes only once a newer version of its aggregate
replaces it (``replaced``; contract 13, "Prune"), so however old, prune never removes:

- the aggregate's latest accepted message (its highest version that became a message, whatever
  its state): seeding a new channel sends that price;
- its latest delivered message: the price the service knows the shop holds
  (``exchange.db.known_prices``), which every 1C-Bitrix offer carries beside the price that
  changed, because a whole-set receiver such as wc1c clears a price type an offer leaves out.
  The other price known_prices reads, one being delivered (``in_progress``), is not final and
  never pruned; it may still end otherwise, so the delivered one stays until a newer one is
  delivered.

These are at most two messages an aggregate: what prune leaves grows with the catalogue, not
with the history. A strict kind's versions are delivered each once, in order, and nothing reads
an old one again: they go with the retention.

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
from sqlalchemy.orm import aliased

from exchange.db.engine import transaction
from exchange.db.schema import (
    Message,
    channel_aggregates,
    channels,
    cml_exchanges,
    deliveries,
    history,
    messages,
    staging,
)
from exchange.db.worker_rows import clear_old_workers
from exchange.domain.clock import Clock
from exchange.domain.policy import KindPolicies
from exchange.domain.states import FINAL, State, values
from exchange.errors import DatabaseUnavailable
from exchange.i18n import Lang, _
from exchange.ops import sign_ins
from exchange.queue.order import is_strict

log = logging.getLogger(__name__)

BATCH_SIZE = 1000
PRUNE_EVERY = timedelta(days=1)
# The first scheduled prune waits a little after start, so that a service that restarts often
# still prunes, without competing with its first cycles.
FIRST_PRUNE_AFTER = timedelta(minutes=1)
ENDED = values(FINAL)
DELIVERED = State.DELIVERED.value


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


def replaced(d: Any) -> ColumnElement[bool]:
    """Nothing reads the delivery ``d`` again once a newer version is accepted (the message
    checks that, ``prunable_messages``): unless it was delivered, and is then the price its
    channel's shop holds (``exchange.db.known_prices``) until a newer one is delivered there.
    One probe of ``ix_deliveries_aggregate_id_channel_id_version`` per delivered one."""
    newer = deliveries.alias("newer")
    return or_(
        d.c.state != DELIVERED,
        exists().where(
            newer.c.aggregate_id == d.c.aggregate_id,
            newer.c.channel_id == d.c.channel_id,
            newer.c.version > d.c.version,
            newer.c.state == DELIVERED,
        ),
    )


def done_with(d: Any, cutoff: datetime, kinds: KindPolicies) -> ColumnElement[bool]:
    """The delivery ``d`` ended before ``cutoff``, at or below its channel's cursor, and is
    of a strict kind or ``replaced``."""
    covered = exists().where(
        channel_aggregates.c.aggregate_id == d.c.aggregate_id,
        channel_aggregates.c.channel_id == d.c.channel_id,
        d.c.version <= channel_aggregates.c.done_version,
    )
    return and_(
        d.c.state.in_(ENDED),
        d.c.updated_at < cutoff,
        covered,
        or_(is_strict(d.c, kinds), replaced(d)),
    )


def prunable_messages(cutoff: datetime, kinds: KindPolicies) -> ColumnElement[bool]:
    """A message done with (``done_with``) on every channel registered and not dropped that
    has a delivery of it, and never the latest accepted message of a coalescing aggregate
    (contract 13, "Prune"); or a rejected row's record that ended before ``cutoff``, which
    belongs to no aggregate and so to no channel and no cursor."""
    d = deliveries.alias("d")
    mine = d.c.message_pk == messages.c.id
    live = d.c.channel_id.in_(select(channels.c.id).where(channels.c.dropped_at.is_(None)))
    later = aliased(Message, name="later")
    newer_accepted = exists().where(
        later.aggregate_id == messages.c.aggregate_id,
        later.version > messages.c.version,
        ~later.rejected,
    )
    record = and_(
        messages.c.aggregate_id.is_(None),
        messages.c.state.in_(ENDED),
        messages.c.updated_at < cutoff,
    )
    accepted = and_(
        messages.c.aggregate_id.is_not(None),
        exists().where(mine),
        ~exists().where(mine, live, ~done_with(d, cutoff, kinds)),
        or_(is_strict(messages.c, kinds), newer_accepted),
    )
    return or_(record, accepted)


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
    kinds: KindPolicies,
    batch_size: int = BATCH_SIZE,
    dry_run: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
) -> PruneReport:
    """Remove what ended more than ``retention_days`` before ``now``; ``dry_run`` only counts.
    ``kinds``, the configured policies, tells the coalescing kinds (whose latest prices stay).

    ``should_stop`` is asked between batches: a service that is stopping leaves the rest to
    the next prune instead of holding up its exit.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    report = PruneReport(now - timedelta(days=retention_days), dry_run)
    staging_source = staging_engine or engine
    if dry_run:
        with transaction(engine, read_only=True) as connection:
            report.messages, report.history = _count_messages(
                connection, prunable_messages(report.cutoff, kinds)
            )
        with transaction(staging_source, read_only=True) as connection:
            report.staging = _count(connection, staging, prunable_staging(report.cutoff))
        with transaction(engine, read_only=True) as connection:
            report.exchanges = _count(connection, cml_exchanges, prunable_exchanges(report.cutoff))
        return report

    after = 0
    while not should_stop():
        with transaction(engine) as connection:
            batch = _delete_messages(
                connection, prunable_messages(report.cutoff, kinds), after, batch_size
            )
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
    connection: Connection, condition: ColumnElement[bool], after: int, size: int
) -> tuple[int, int, int] | None:
    """One batch: its messages' history, then the messages. Returns (upto, messages,
    history), or None when nothing is left."""
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


def _count_messages(connection: Connection, condition: ColumnElement[bool]) -> tuple[int, int]:
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
    kinds: KindPolicies,
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
                kinds=kinds,
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
