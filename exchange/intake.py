"""Intake (contract 1): untaken staging rows -> messages, duplicates or quarantine records.

Each chunk of rows is handled in one transaction that also marks the rows taken, so a row
ends as exactly one of: a new message, a recorded duplicate, or a quarantine record. When
staging lives in another database the rows are marked taken after that commit, and a row
taken twice is recognised by its (kind, aggregate, version) and recorded as a duplicate.
Validation is per row (``contracts.validate``); storing is set-based, a few statements per
chunk. Coalescing is the next stage (``coalesce``), after every chunk is in.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, func, select, tuple_, update

from exchange.contracts import Accepted, Reason, Rejected, StagingRow, validate
from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import aggregates, messages, staging
from exchange.identity import rejected_id
from exchange.settings import Policy
from exchange.states import Event, State
from exchange.transitions import Change, apply, history_row, insert_history

log = logging.getLogger(__name__)

CHUNK = 5000


@dataclass
class IntakeReport:
    taken: int = 0
    messages: int = 0
    duplicates: int = 0
    rejected: int = 0

    def add(self, other: IntakeReport) -> None:
        self.taken += other.taken
        self.messages += other.messages
        self.duplicates += other.duplicates
        self.rejected += other.rejected


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
    report = IntakeReport()
    if last_id is None:
        return report
    after = 0
    while True:
        if separate:
            with transaction(source, read_only=True) as connection:
                rows = _select_rows(connection, after, last_id, chunk, lock=False)
            if not rows:
                break
            with transaction(engine) as connection:
                report.add(_store(connection, rows, kinds, now))
            with transaction(source) as connection:
                _mark_taken(connection, [row.id for row in rows], now)
        else:
            with transaction(engine) as connection:
                rows = _select_rows(connection, after, last_id, chunk, lock=is_postgres(connection))
                if not rows:
                    break
                report.add(_store(connection, rows, kinds, now))
                _mark_taken(connection, [row.id for row in rows], now)
        after = rows[-1].id
    if report.taken:
        log.info(
            "intake: %d rows taken: %d messages, %d duplicates, %d rejected",
            report.taken,
            report.messages,
            report.duplicates,
            report.rejected,
        )
    return report


def _select_rows(
    connection: Connection, after: int, last_id: int, chunk: int, *, lock: bool
) -> list[StagingRow]:
    query = (
        select(
            staging.c.id,
            staging.c.kind,
            staging.c.aggregate,
            staging.c.aggregate_version,
            staging.c.payload,
            staging.c.schema_version,
            staging.c.source_ref,
            staging.c.created_at,
        )
        .where(staging.c.taken_at.is_(None), staging.c.id > after, staging.c.id <= last_id)
        .order_by(staging.c.id)
        .limit(chunk)
    )
    if lock:  # PostgreSQL: workers taking intake at once share the rows out
        query = query.with_for_update(skip_locked=True)
    return [StagingRow(*row) for row in connection.execute(query)]


def _mark_taken(connection: Connection, ids: Sequence[int], now: datetime) -> None:
    connection.execute(update(staging).where(staging.c.id.in_(ids)).values(taken_at=now))


def _insert(connection: Connection, table: Any) -> Any:
    if is_postgres(connection):
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def _store(
    connection: Connection, rows: list[StagingRow], kinds: dict[str, Policy], now: datetime
) -> IntakeReport:
    report = IntakeReport(taken=len(rows))
    verdicts = [validate(row, kinds) for row in rows]
    accepted = [v for v in verdicts if isinstance(v, Accepted)]
    rejected: list[tuple[StagingRow, Reason, str]] = [
        (v.row, v.reason, v.detail) for v in verdicts if isinstance(v, Rejected)
    ]

    existing = _existing(connection, {a.message_id for a in accepted})
    fresh: dict[str, Accepted] = {}
    duplicates: list[Accepted] = []
    for item in accepted:
        known = existing.get(item.message_id)
        first = fresh.get(item.message_id)
        payload = known[1] if known else (first.payload if first else None)
        if payload is None:
            fresh[item.message_id] = item
        elif payload == item.payload:
            duplicates.append(item)
        else:
            rejected.append((item.row, Reason.VERSION_CONFLICT, _conflict(item)))

    inserted = _insert_messages(connection, list(fresh.values()), now)
    lost_race = [item for mid, item in fresh.items() if mid not in inserted]
    if lost_race:  # another worker inserted the same message meanwhile
        existing.update(_existing(connection, {item.message_id for item in lost_race}))
        for item in lost_race:
            if existing[item.message_id][1] == item.payload:
                duplicates.append(item)
            else:
                rejected.append((item.row, Reason.VERSION_CONFLICT, _conflict(item)))
    report.messages = len(inserted)
    report.duplicates = len(duplicates)
    owners = {**{mid: pk for mid, (pk, _) in existing.items()}, **inserted}
    insert_history(
        connection,
        (
            history_row(
                Change(
                    owners[item.message_id],
                    Event.DUPLICATE,
                    None,
                    None,
                    detail=f"staging row #{item.row.id} carried this message again: "
                    "recorded, not sent again",
                ),
                now,
            )
            for item in duplicates
        ),
    )
    report.rejected = _insert_rejected(connection, rejected, now)
    return report


def _conflict(item: Accepted) -> str:
    row = item.row
    return (
        f"version {row.aggregate_version} of {row.kind} {row.aggregate!r} was already taken "
        f"as {item.message_id} with a different payload"
    )


def _existing(connection: Connection, ids: set[str]) -> dict[str, tuple[int, str]]:
    if not ids:
        return {}
    found = connection.execute(
        select(messages.c.message_id, messages.c.id, messages.c.payload).where(
            messages.c.message_id.in_(ids)
        )
    )
    return {mid: (pk, payload) for mid, pk, payload in found}


def _insert_messages(
    connection: Connection, items: list[Accepted], now: datetime
) -> dict[str, int]:
    if not items:
        return {}
    keys = {(item.row.kind, item.row.aggregate) for item in items}
    connection.execute(
        _insert(connection, aggregates).on_conflict_do_nothing(),
        [{"kind": kind, "aggregate": aggregate} for kind, aggregate in sorted(keys)],
    )
    aggregate_ids = dict(
        ((kind, aggregate), pk)
        for pk, kind, aggregate in connection.execute(
            select(aggregates.c.id, aggregates.c.kind, aggregates.c.aggregate).where(
                tuple_(aggregates.c.kind, aggregates.c.aggregate).in_(sorted(keys))
            )
        )
    )
    statement = (
        _insert(connection, messages)
        .on_conflict_do_nothing(index_elements=["message_id"])
        .returning(messages.c.id, messages.c.message_id)
    )
    rows = [
        {
            "message_id": item.message_id,
            "aggregate_id": aggregate_ids[(item.row.kind, item.row.aggregate)],
            "rejected": False,
            "kind": item.row.kind,
            "aggregate": item.row.aggregate,
            "version": item.row.aggregate_version,
            "schema_version": item.row.schema_version,
            "payload": item.payload,
            "source_ref": item.row.source_ref,
            "created_at": item.row.created_at,
            "staging_id": item.row.id,
            "taken_at": now,
            "state": State.NEW.value,
            "attempts": 0,
            "waiting_since": now,
            "updated_at": now,
        }
        for item in items
    ]
    inserted = {mid: pk for pk, mid in connection.execute(statement, rows)}
    by_id = {item.message_id: item for item in items}
    insert_history(
        connection,
        (
            history_row(
                Change(
                    pk,
                    Event.TAKEN,
                    None,
                    State.NEW,
                    detail=f"from staging row #{by_id[mid].row.id}",
                ),
                now,
            )
            for mid, pk in inserted.items()
        ),
    )
    return inserted


def _insert_rejected(
    connection: Connection, rows: list[tuple[StagingRow, Reason, str]], now: datetime
) -> int:
    if not rows:
        return 0
    statement = (
        _insert(connection, messages)
        .on_conflict_do_nothing(index_elements=["message_id"])
        .returning(messages.c.id, messages.c.message_id)
    )
    params = [
        {
            "message_id": rejected_id(row.id),
            "aggregate_id": None,
            "rejected": True,
            "kind": row.kind,
            "aggregate": row.aggregate,
            "version": row.aggregate_version,
            "schema_version": row.schema_version,
            "payload": row.payload,
            "source_ref": row.source_ref,
            "created_at": row.created_at,
            "staging_id": row.id,
            "taken_at": now,
            "state": State.QUARANTINED.value,
            "reason": reason.value,
            "attempts": 0,
            "last_error": detail,
            "waiting_since": now,
            "updated_at": now,
        }
        for row, reason, detail in rows
    ]
    inserted = {mid: pk for pk, mid in connection.execute(statement, params)}
    details = {rejected_id(row.id): (reason, detail) for row, reason, detail in rows}
    changes = [
        Change(
            pk,
            Event.REJECTED,
            None,
            State.QUARANTINED,
            detail=f"{details[mid][0].value}: {details[mid][1]}",
        )
        for mid, pk in inserted.items()
    ]
    apply(connection, changes, now)
    return len(inserted)
