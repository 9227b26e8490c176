"""Refused sign-ins (contract 15): the rows ``serve`` writes, and the cause they make.

``serve`` counts refused sign-ins in memory (``exchange/web/sign_ins.py``) and writes at most
one summary row a minute per way in (``door``): how many, the first and the last time, never
the name or the address tried; a successful sign-in writes a mark (a row with ``count`` 0),
at most once a minute too. The rows are in the database, so every process sees them and a
restart of ``serve`` forgets nothing.

Wrong 1C passwords (and intake tokens) in the last ``WINDOW`` with no successful sign-in
since are a cause, ``sign-in-refused:1c`` (``:intake``): 1C keeps failing to hand prices
over, and only a person can mend the password on one side or the other. The workbench's own
refusals are shown, never a cause (anyone on the network can mistype a name).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, insert, select

from exchange.db.schema import sign_in_refusals

ONEC, INTAKE, WORKBENCH = "1c", "intake", "workbench"
DOORS = (ONEC, INTAKE, WORKBENCH)
CAUSE_DOORS = (ONEC, INTAKE)  # the ways in whose refusals are a cause
WINDOW = timedelta(hours=1)
KEPT = timedelta(days=1)  # rows older than this go (``clear_old``)


@dataclass(frozen=True, slots=True)
class Refused:
    """What one way in refused: ``count`` sign-ins from ``first_at`` to ``last_at``."""

    door: str
    count: int
    first_at: datetime
    last_at: datetime


def write(connection: Connection, refused: list[Refused], succeeded: dict[str, datetime]) -> None:
    """One row per way in that refused sign-ins (its summary) or let one in (its mark)."""
    rows: list[dict[str, Any]] = [
        {
            "door": r.door,
            "count": r.count,
            "first_at": r.first_at,
            "last_at": r.last_at,
            "succeeded_at": None,
        }
        for r in refused
    ]
    rows += [
        {"door": door, "count": 0, "first_at": None, "last_at": None, "succeeded_at": at}
        for door, at in succeeded.items()
    ]
    if rows:
        connection.execute(insert(sign_in_refusals), rows)


def refused_lately(
    connection: Connection, now: datetime, unwritten: Iterable[Refused] = ()
) -> dict[str, dict[str, Any]]:
    """Per way in, the sign-ins refused in the last ``WINDOW`` after its last successful
    sign-in: ``{"count", "since", "last_at"}`` (ISO times); a way in with none is absent.
    ``unwritten``: what the asking serve process counted and has not written yet (its page
    says what it saw at once; every other process sees it within the minute)."""
    t = sign_in_refusals
    succeeded = dict(
        connection.execute(
            select(t.c.door, func.max(t.c.succeeded_at))
            .where(t.c.succeeded_at.is_not(None))
            .group_by(t.c.door)
        ).all()
    )
    rows = connection.execute(
        select(t.c.door, t.c.count, t.c.first_at, t.c.last_at).where(
            t.c.count > 0, t.c.last_at >= now - WINDOW
        )
    ).all()
    found: dict[str, dict[str, Any]] = {}
    every = [*rows, *((u.door, u.count, u.first_at, u.last_at) for u in unwritten)]
    for door, count, first_at, last_at in every:
        mark = succeeded.get(door)
        if mark is not None and last_at <= mark:
            continue  # refused before a sign-in that succeeded
        entry = found.setdefault(door, {"count": 0, "since": first_at, "last_at": last_at})
        entry["count"] += count
        entry["since"] = min(entry["since"], first_at)
        entry["last_at"] = max(entry["last_at"], last_at)
    return {
        door: {**e, "since": e["since"].isoformat(), "last_at": e["last_at"].isoformat()}
        for door, e in sorted(found.items())
    }


def clear_old(connection: Connection, now: datetime) -> int:
    """Removes the rows older than ``KEPT`` (by their last refusal or their mark)."""
    t = sign_in_refusals
    result = connection.execute(
        t.delete().where(func.coalesce(t.c.last_at, t.c.succeeded_at) < now - KEPT)
    )
    return int(result.rowcount or 0)
