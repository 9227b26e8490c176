"""Delivery paused by an operator (contract 11): one row that every worker reads each cycle,
so that all of them stop sending within one cycle and start again as soon as it is gone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, select

from exchange.db.schema import delivery_pause

PAUSE = "delivery"
# ``exchange resume`` also leaves its time here: a worker whose pause no answer of the site can
# end (writes refused while reads work) resumes when an operator says so after that pause.
RESUMED = "resumed"


def operator_pause(connection: Connection) -> dict[str, Any] | None:
    """Who paused delivery, when and why; None while delivery runs."""
    row = (
        connection.execute(select(delivery_pause).where(delivery_pause.c.name == PAUSE))
        .mappings()
        .first()
    )
    return dict(row) if row is not None else None


def pause(connection: Connection, *, operator: str, note: str, now: datetime) -> bool:
    """Pause delivery; False when it was already paused (the first pause is kept)."""
    if operator_pause(connection) is not None:
        return False
    connection.execute(
        insert(delivery_pause).values(name=PAUSE, operator=operator, note=note, paused_at=now)
    )
    return True


def resume(connection: Connection, *, operator: str = "", now: datetime | None = None) -> bool:
    """Resume delivery; False when it was not paused by an operator. Either way the time is
    left for the workers paused by the site's refusal of a write (``resumed_at``)."""
    resumed = (
        connection.execute(delete(delivery_pause).where(delivery_pause.c.name == PAUSE)).rowcount
        > 0
    )
    connection.execute(delete(delivery_pause).where(delivery_pause.c.name == RESUMED))
    connection.execute(
        insert(delivery_pause).values(
            name=RESUMED, operator=operator, note="", paused_at=now or datetime.now(UTC)
        )
    )
    return resumed


def resumed_at(connection: Connection) -> datetime | None:
    """When an operator last resumed delivery (None: never)."""
    return connection.execute(
        select(delivery_pause.c.paused_at).where(delivery_pause.c.name == RESUMED)
    ).scalar_one_or_none()
