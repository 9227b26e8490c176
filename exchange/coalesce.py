"""Coalescing and order (contract 3), as set-based SQL over the whole pending queue.

latest-wins kinds:
  - stale: a pending version at or below the aggregate's ``done_version`` (the highest
    version known applied at the site) is cancelled, reason ``stale``; never sent.
  - superseded: a pending version below another live version (new, delayed, in flight or
    quarantined) of its aggregate is cancelled, reason ``superseded``, pointing at the
    highest such version.
strict kinds:
  - nothing is coalesced; the claim (``lease``) sends only ``done_version + 1``.
  - a gap: when the lowest pending version is above ``done_version + 1`` and has waited
    ``gap_timeout`` since it was taken (or retried), it is quarantined, ``sequence-gap``.

"Pending" includes an in-flight message whose lease has expired: its worker is gone.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Connection, and_, exists, not_, or_, select
from sqlalchemy.orm import aliased

from exchange.contracts import Reason
from exchange.db.engine import is_postgres
from exchange.db.schema import Message, aggregates
from exchange.states import Event, State, sources
from exchange.transitions import Change, apply


def _pending(m: type[Message], now: datetime) -> ColumnElement[bool]:
    return or_(
        m.state.in_([State.NEW.value, State.DELAYED.value]),
        and_(m.state == State.IN_PROGRESS.value, m.locked_until < now),
    )


def coalesce(connection: Connection, latest_wins: list[str], now: datetime) -> int:
    """Cancel stale and superseded versions of latest-wins kinds; returns how many."""
    if not latest_wins:
        return 0
    m = aliased(Message, name="m")
    newer = aliased(Message, name="newer")
    live = [State.NEW.value, State.DELAYED.value, State.IN_PROGRESS.value, State.QUARANTINED.value]
    done = (
        select(aggregates.c.done_version).where(aggregates.c.id == m.aggregate_id).scalar_subquery()
    )
    successor = (
        select(newer.message_id)
        .where(
            newer.aggregate_id == m.aggregate_id,
            newer.version > m.version,
            newer.state.in_(live),
            not_(newer.rejected),
        )
        .order_by(newer.version.desc())
        .limit(1)
        .scalar_subquery()
    )
    query = (
        select(m.id, m.state, m.version, done.label("done"), successor.label("successor"))
        .where(not_(m.rejected), m.kind.in_(latest_wins), _pending(m, now))
        .where(or_(m.version <= done, successor.is_not(None)))
        .order_by(m.id)
    )
    if is_postgres(connection):
        query = query.with_for_update(of=m, skip_locked=True)
    changes = []
    for pk, state, version, done_version, successor_id in connection.execute(query):
        if version <= done_version:
            changes.append(
                Change(
                    pk,
                    Event.STALE,
                    State(state),
                    State.CANCELLED,
                    values={"reason": Reason.STALE.value, **_unlock()},
                    detail=f"version {version} is at or below version {done_version}, "
                    "already delivered: never sent",
                )
            )
        else:
            changes.append(
                Change(
                    pk,
                    Event.SUPERSEDED,
                    State(state),
                    State.CANCELLED,
                    values={
                        "reason": Reason.SUPERSEDED.value,
                        "superseded_by": successor_id,
                        **_unlock(),
                    },
                    detail=f"superseded by {successor_id}",
                )
            )
    apply(connection, changes, now)
    return len(changes)


def quarantine_gaps(
    connection: Connection, strict: list[str], now: datetime, gap_timeout: float
) -> int:
    """Quarantine strictly ordered messages that waited too long for a missing version."""
    if not strict:
        return 0
    m = aliased(Message, name="m")
    lower = aliased(Message, name="lower")
    a = aggregates
    query = (
        select(m.id, m.state, m.version, a.c.done_version)
        .join(a, a.c.id == m.aggregate_id)
        .where(
            not_(m.rejected),
            m.kind.in_(strict),
            m.state.in_(sorted(sources(Event.SEQUENCE_GAP))),
            m.version > a.c.done_version + 1,
            m.waiting_since <= now - timedelta(seconds=gap_timeout),
        )
        .where(
            ~exists().where(
                lower.aggregate_id == m.aggregate_id,
                not_(lower.rejected),
                lower.version > a.c.done_version,
                lower.version < m.version,
            )
        )
        .order_by(m.id)
    )
    if is_postgres(connection):
        query = query.with_for_update(of=m, skip_locked=True)
    changes = []
    for pk, state, version, done_version in connection.execute(query):
        missing = (
            f"version {done_version + 1}"
            if version == done_version + 2
            else f"versions {done_version + 1}–{version - 1}"
        )
        detail = f"{missing} never arrived within {gap_timeout:g} s"
        changes.append(
            Change(
                pk,
                Event.SEQUENCE_GAP,
                State(state),
                State.QUARANTINED,
                values={
                    "reason": Reason.SEQUENCE_GAP.value,
                    "last_error": detail,
                    "next_try_at": None,
                },
                detail=detail,
            )
        )
    apply(connection, changes, now)
    return len(changes)


def _unlock() -> dict[str, None]:
    return {"locked_by": None, "locked_until": None, "lease_token": None, "next_try_at": None}
