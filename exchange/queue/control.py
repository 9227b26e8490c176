"""Delivery paused by an operator (contract 11, per channel by contract 13): rows that every
delivery loop reads each take-in, so that all of them stop sending within one cycle and start
again as soon as they are gone. ``delivery`` pauses every channel, ``delivery:<channel>`` one;
a loop honours both."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, or_, select
from sqlalchemy.dialects import postgresql, sqlite

from exchange.db.engine import is_postgres
from exchange.db.schema import delivery_pause

PAUSE = "delivery"
# ``exchange resume`` also leaves its time here: a worker whose pause no answer of the site can
# end (writes refused while reads work) resumes when an operator says so after that pause.
RESUMED = "resumed"


def pause_name(channel: str | None) -> str:
    """The row of the pause of ``channel`` (None: every channel's)."""
    return PAUSE if channel is None else f"{PAUSE}:{channel}"


def resumed_name(channel: str | None) -> str:
    """The row of the time ``channel`` (None: every channel) was last resumed."""
    return RESUMED if channel is None else f"{RESUMED}:{channel}"


def operator_pause(connection: Connection, channel: str | None = None) -> dict[str, Any] | None:
    """Who paused delivery, when and why; None while delivery runs. ``channel``: the pause
    that holds that channel (every channel's first, then its own); None: every channel's."""
    names = [PAUSE] if channel is None else [PAUSE, pause_name(channel)]
    rows = (
        connection.execute(select(delivery_pause).where(delivery_pause.c.name.in_(names)))
        .mappings()
        .all()
    )
    found = {row["name"]: dict(row) for row in rows}
    for name in names:
        if name in found:
            return found[name]
    return None


def paused_channels(connection: Connection) -> dict[str, dict[str, Any]]:
    """Each channel paused on its own (``pause --channel``), by name."""
    rows = connection.execute(
        select(delivery_pause).where(delivery_pause.c.name.like(f"{PAUSE}:%"))
    ).mappings()
    return {row["name"].split(":", 1)[1]: dict(row) for row in rows}


def pause(
    connection: Connection,
    *,
    operator: str,
    note: str,
    now: datetime,
    channel: str | None = None,
) -> bool:
    """Pause delivery (every channel, or ``channel``); False when it was already paused (the
    first pause is kept)."""
    # Written only where no row is: two operators pausing at once on PostgreSQL (the later
    # waits for the other's commit) never meet the primary key, the first pause is kept.
    row = _insert(connection)(delivery_pause).values(
        name=pause_name(channel), operator=operator, note=note, paused_at=now
    )
    written = connection.execute(
        row.on_conflict_do_nothing(index_elements=["name"]).returning(delivery_pause.c.name)
    )
    return written.first() is not None


def resume(
    connection: Connection,
    *,
    operator: str = "",
    now: datetime | None = None,
    channel: str | None = None,
    note: str = "",
) -> bool:
    """Resume delivery: without ``channel`` every channel (every pause ends), with it that
    channel's own pause. False when nothing it ends was paused by an operator. Either way the
    time is left for the loops paused by the site's refusal of a write (``resumed_at``), with
    who resumed and ``note``, why (optional; a pause's is required), as a pause keeps its own
    (review mpadvice item 10)."""
    if channel is None:
        ending = or_(delivery_pause.c.name == PAUSE, delivery_pause.c.name.like(f"{PAUSE}:%"))
    else:
        ending = delivery_pause.c.name == pause_name(channel)
    resumed = connection.execute(delete(delivery_pause).where(ending)).rowcount > 0
    # One row, the latest resume's: two operators resuming at once on PostgreSQL (the DELETE
    # never sees a row another transaction is inserting) never meet the primary key.
    row = _insert(connection)(delivery_pause).values(
        name=resumed_name(channel), operator=operator, note=note, paused_at=now or datetime.now(UTC)
    )
    connection.execute(
        row.on_conflict_do_update(
            index_elements=["name"],
            set_={
                "operator": row.excluded.operator,
                "note": row.excluded.note,
                "paused_at": row.excluded.paused_at,
            },
        )
    )
    return resumed


def _insert(connection: Connection) -> Any:
    """The dialect's INSERT, which has ``ON CONFLICT`` (PostgreSQL and SQLite alike)."""
    return postgresql.insert if is_postgres(connection) else sqlite.insert


def resumed_at(connection: Connection, channel: str | None = None) -> datetime | None:
    """When an operator last resumed delivery of ``channel`` (every channel's resume counts
    for each; None: never)."""
    names = [RESUMED] if channel is None else [RESUMED, resumed_name(channel)]
    times = connection.execute(
        select(delivery_pause.c.paused_at).where(delivery_pause.c.name.in_(names))
    ).scalars()
    return max(times, default=None)
