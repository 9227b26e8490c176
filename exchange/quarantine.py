"""Operator actions on the quarantine: list, retry, cancel. Each writes the message's history
with who, when and the note.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, select

from exchange.contracts import Reason
from exchange.db.engine import is_postgres
from exchange.db.schema import messages
from exchange.errors import OperatorError
from exchange.lease import advance_strict
from exchange.states import Event, State
from exchange.transitions import Change, apply


@dataclass(frozen=True)
class Filters:
    kind: str | None = None
    aggregate: str | None = None
    reason: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def any(self) -> bool:
        return any(
            v is not None for v in (self.kind, self.aggregate, self.reason, self.since, self.until)
        )


def _query(filters: Filters) -> Select[Any]:
    q = select(messages).where(messages.c.state == State.QUARANTINED.value)
    if filters.kind is not None:
        q = q.where(messages.c.kind == filters.kind)
    if filters.aggregate is not None:
        q = q.where(messages.c.aggregate == filters.aggregate)
    if filters.reason is not None:
        q = q.where(messages.c.reason == filters.reason)
    # A quarantined message has not changed since it was quarantined: updated_at is that time.
    if filters.since is not None:
        q = q.where(messages.c.updated_at >= filters.since)
    if filters.until is not None:
        q = q.where(messages.c.updated_at < filters.until)
    return q.order_by(messages.c.updated_at, messages.c.id)


def entry(row: Any) -> dict[str, Any]:
    """One quarantined message as operators and machines read it (stable field names)."""
    return {
        "message_id": row["message_id"],
        "kind": row["kind"],
        "aggregate": row["aggregate"],
        "version": row["version"],
        "reason": row["reason"],
        "attempts": row["attempts"],
        "last_status": row["last_status"],
        "last_error": row["last_error"],
        "source_ref": row["source_ref"],
        "first_seen": row["taken_at"].isoformat(),
        "quarantined_at": row["updated_at"].isoformat(),
        "rejected_row": bool(row["rejected"]),
        "staging_id": row["staging_id"],
    }


def list_quarantined(connection: Connection, filters: Filters) -> list[dict[str, Any]]:
    return [entry(row) for row in connection.execute(_query(filters)).mappings()]


def _select_for_action(connection: Connection, ids: Sequence[str], filters: Filters) -> list[Any]:
    if ids:
        q = select(messages).where(messages.c.message_id.in_(list(ids)))
    else:
        q = _query(filters)
    if is_postgres(connection):
        q = q.with_for_update()
    rows = list(connection.execute(q).mappings())
    if ids:
        found = {row["message_id"]: row for row in rows}
        missing = [i for i in ids if i not in found]
        if missing:
            raise OperatorError(f"no such message: {', '.join(missing)}")
        not_q = [i for i in ids if found[i]["state"] != State.QUARANTINED.value]
        if not_q:
            states = ", ".join(f"{i} is {found[i]['state']}" for i in not_q)
            raise OperatorError(f"only quarantined messages can be changed: {states}")
    return rows


@dataclass
class ActionResult:
    touched: list[str]
    skipped: list[tuple[str, str]]


def retry(
    connection: Connection,
    ids: Sequence[str],
    filters: Filters,
    *,
    operator: str,
    note: str | None,
    now: datetime,
    dry_run: bool,
) -> ActionResult:
    """Replay with the same message_id: attempts start again; a strict message takes its
    place in the order again; its gap clock starts again."""
    rows = _select_for_action(connection, ids, filters)
    touched, skipped, changes = [], [], []
    for row in rows:
        if row["rejected"]:
            skipped.append(
                (
                    row["message_id"],
                    "a rejected staging row cannot be replayed: 1C "
                    "must write a corrected row (cancel this record to close it)",
                )
            )
            continue
        touched.append(row["message_id"])
        changes.append(
            Change(
                row["id"],
                Event.OPERATOR_RETRY,
                State.QUARANTINED,
                State.NEW,
                values={"attempts": 0, "next_try_at": None, "waiting_since": now, "reason": None},
                operator=operator,
                note=note,
                detail=f"retried by {operator} (was {row['reason']})",
            )
        )
    if ids and skipped:
        raise OperatorError(f"{skipped[0][0]}: {skipped[0][1]}")
    if not dry_run:
        apply(connection, changes, now)
    return ActionResult(touched, skipped)


def cancel(
    connection: Connection,
    ids: Sequence[str],
    *,
    operator: str,
    note: str,
    now: datetime,
    strict: list[str],
) -> ActionResult:
    if not note.strip():
        raise OperatorError("--note is required: say why the message is cancelled")
    rows = _select_for_action(connection, ids, Filters())
    changes = [
        Change(
            row["id"],
            Event.OPERATOR_CANCEL,
            State.QUARANTINED,
            State.CANCELLED,
            values={"reason": Reason.OPERATOR.value},
            operator=operator,
            note=note,
            detail=f"cancelled by {operator} (was {row['reason']})",
        )
        for row in rows
    ]
    apply(connection, changes, now)
    aggregate_ids = [row["aggregate_id"] for row in rows if row["aggregate_id"] is not None]
    if aggregate_ids and strict:
        advance_strict(connection, aggregate_ids, strict)
    return ActionResult([row["message_id"] for row in rows], [])
