"""What ``exchange status`` and ``exchange history`` show: read-only queries."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, case, func, not_, select
from sqlalchemy.orm import aliased

from exchange.db.schema import Message, aggregates, history, messages, workers
from exchange.errors import OperatorError
from exchange.states import Event, State

RECENT = timedelta(minutes=15)
ATTEMPT_EVENTS = [
    Event.DELIVERED.value,
    Event.STALE_AT_SITE.value,
    Event.RETRY_SCHEDULED.value,
    Event.QUARANTINED.value,
]
FAILED_EVENTS = [Event.RETRY_SCHEDULED.value, Event.QUARANTINED.value]


@dataclass
class Status:
    counts: dict[str, int]
    new_messages: int
    oldest_undelivered_age_s: float | None
    error_share: float
    delivery_rate_per_min: float
    workers: list[dict[str, Any]] = field(default_factory=list)
    blocked: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def status(connection: Connection, now: datetime, strict: list[str]) -> Status:
    counts = {state.value: 0 for state in State}
    for state, count in connection.execute(
        select(messages.c.state, func.count()).group_by(messages.c.state)
    ):
        counts[state] = count
    oldest = connection.execute(
        select(func.min(messages.c.created_at)).where(
            messages.c.state.in_([State.NEW.value, State.IN_PROGRESS.value, State.DELAYED.value])
        )
    ).scalar()
    since = now - RECENT
    attempts, failures, delivered = connection.execute(
        select(
            func.count(),
            func.coalesce(func.sum(case((history.c.event.in_(FAILED_EVENTS), 1), else_=0)), 0),
            func.coalesce(
                func.sum(case((history.c.event == Event.DELIVERED.value, 1), else_=0)), 0
            ),
        ).where(
            history.c.at >= since,
            history.c.event.in_(ATTEMPT_EVENTS),
            history.c.attempt.is_not(None),
        )
    ).one()
    return Status(
        counts=counts,
        new_messages=counts[State.NEW.value],
        oldest_undelivered_age_s=(round((now - oldest).total_seconds(), 3) if oldest else None),
        error_share=round(failures / attempts, 4) if attempts else 0.0,
        delivery_rate_per_min=round(delivered / (RECENT.total_seconds() / 60), 3),
        workers=worker_rows(connection, now),
        blocked=blocked_aggregates(connection, strict),
    )


def worker_rows(connection: Connection, now: datetime) -> list[dict[str, Any]]:
    rows = connection.execute(
        select(workers)
        .where(workers.c.heartbeat_at >= now - timedelta(hours=1))
        .order_by(workers.c.worker_id)
    ).mappings()
    return [
        {
            "worker_id": row["worker_id"],
            "heartbeat_at": row["heartbeat_at"].isoformat(),
            "paused": row["paused_reason"],
            "breaker": row["breaker_state"],
            "breaker_until": row["breaker_until"].isoformat() if row["breaker_until"] else None,
        }
        for row in rows
    ]


def blocked_aggregates(
    connection: Connection, strict: list[str], limit: int = 100
) -> list[dict[str, Any]]:
    """Strictly ordered aggregates that cannot move: a quarantined next version, or a gap."""
    if not strict:
        return []
    m = aliased(Message, name="m")
    a = aggregates
    lowest = (
        select(m.aggregate_id, func.min(m.version).label("version"))
        .join(a, a.c.id == m.aggregate_id)
        .where(
            not_(m.rejected),
            m.kind.in_(strict),
            m.version > a.c.done_version,
            m.state.in_(
                [
                    State.NEW.value,
                    State.DELAYED.value,
                    State.IN_PROGRESS.value,
                    State.QUARANTINED.value,
                ]
            ),
        )
        .group_by(m.aggregate_id)
        .subquery()
    )
    rows = connection.execute(
        select(
            a.c.kind,
            a.c.aggregate,
            a.c.done_version,
            lowest.c.version,
            m.message_id,
            m.state,
            m.reason,
        )
        .join(lowest, lowest.c.aggregate_id == a.c.id)
        .join(m, (m.aggregate_id == a.c.id) & (m.version == lowest.c.version) & not_(m.rejected))
        .where((m.state == State.QUARANTINED.value) | (lowest.c.version > a.c.done_version + 1))
        .order_by(a.c.kind, a.c.aggregate)
        .limit(limit)
    ).all()
    result = []
    for kind, aggregate, done, version, message_id, state, reason in rows:
        if state == State.QUARANTINED.value and version == done + 1:
            cause = f"{message_id} is quarantined ({reason}): retry or cancel it"
        elif state == State.QUARANTINED.value:
            cause = f"{message_id} is quarantined ({reason}) after a gap at version {done + 1}"
        else:
            cause = f"waiting for version {done + 1} (a gap); {message_id} is next"
        result.append(
            {"kind": kind, "aggregate": aggregate, "delivered_through": done, "cause": cause}
        )
    return result


def biography(connection: Connection, message_id: str) -> dict[str, Any]:
    row = (
        connection.execute(select(messages).where(messages.c.message_id == message_id))
        .mappings()
        .first()
    )
    if row is None:
        raise OperatorError(f"no message with id {message_id!r}")
    entries = (
        connection.execute(
            select(history).where(history.c.message_pk == row["id"]).order_by(history.c.id)
        )
        .mappings()
        .all()
    )
    return {
        "message": {
            "message_id": row["message_id"],
            "kind": row["kind"],
            "aggregate": row["aggregate"],
            "version": row["version"],
            "state": row["state"],
            "reason": row["reason"],
            "attempts": row["attempts"],
            "superseded_by": row["superseded_by"],
            "last_status": row["last_status"],
            "last_error": row["last_error"],
            "receipt": row["receipt"],
            "source_ref": row["source_ref"],
            "staging_id": row["staging_id"],
            "rejected": bool(row["rejected"]),
            "created_at": _iso(row["created_at"]),
            "taken_at": _iso(row["taken_at"]),
            "next_try_at": _iso(row["next_try_at"]),
            "locked_by": row["locked_by"],
            "locked_until": _iso(row["locked_until"]),
        },
        "history": [
            {
                "at": _iso(e["at"]),
                "event": e["event"],
                "from": e["from_state"],
                "to": e["to_state"],
                "worker": e["worker"],
                "attempt": e["attempt"],
                "http_status": e["http_status"],
                "error_class": e["error_class"],
                "delay_s": e["delay_s"],
                "detail": e["detail"],
                "operator": e["operator"],
                "note": e["note"],
            }
            for e in entries
        ],
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
