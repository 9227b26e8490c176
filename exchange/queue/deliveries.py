"""What the writers of deliveries share (issue 31): a new message's deliveries, a new
aggregate's cursors, and the one channel of an installation without ``EXCHANGE_CHANNELS``.

**Fan-out** (contract 13, step 6): a message intake accepts gets one delivery on every
registered channel not dropped that takes its kind (``channels.takes``, through
``db.channels.taking``: the registry alone, whatever this process's configuration), each
ranked from that channel's own head (``new_deliveries``). An aggregate made by intake gets a
cursor on every channel taking its kind, strict order from version 1 (``new_cursors``); a
channel that came, or began taking the kind, after the aggregate was made gets its cursor
with its first delivery of it, strict order from the version it first receives
(``late_cursors``). A duplicate or a rejected record gets none.

A delivery's columns (``DELIVERY_COLUMNS``) and an aggregate's cursor and lease live only in
``deliveries`` and ``channel_aggregates``: migration 0026 dropped the one channel's copy on
``messages`` and ``aggregates`` (issue 31, step 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import (
    Connection,
    Insert,
    ScalarSelect,
    and_,
    case,
    exists,
    func,
    literal,
    select,
    true,
)

from exchange.db.channels import is_kept, taking
from exchange.db.schema import (
    DELIVERY_COLUMNS,
    channel_aggregates,
    channels,
    deliveries,
    messages,
)
from exchange.domain.states import Event

# The copies a delivery keeps of its message (immutable): what order compares on a channel.
COPIED = ("aggregate_id", "kind", "version")
# Intake's own events: of the message, not of a delivery; their history rows name no channel.
INTAKE_EVENTS = frozenset({Event.TAKEN.value, Event.DUPLICATE.value, Event.REJECTED.value})


def the_channel() -> ScalarSelect[Any]:
    """The one channel's id, as SQL: the first registered channel not dropped."""
    return (
        select(channels.c.id)
        .where(channels.c.dropped_at.is_(None))
        .order_by(channels.c.id)
        .limit(1)
        .scalar_subquery()
    )


def one_channel(connection: Connection) -> int:
    """The one channel's id, read once by what serves it (a worker's loop, a bench): the
    readers of the delivery pipeline take the channel as a parameter."""
    return int(connection.execute(select(the_channel())).scalar_one())


def _fanned(
    rows: Any, postgres: bool, shifts: Mapping[int, int] | None, start: Mapping[str, Any]
) -> tuple[list[str], Any]:
    """Each message ``rows`` selects, once per channel not dropped that takes its kind
    (``channels.taking``, the registry alone), with that channel's rank: the message's own
    (``claim_rank``) moved by the channel's shift (``shifts``, channel id -> ranks; none: 0);
    the other delivery columns from ``rows`` where it has them, else from ``start``. Returns
    the columns named and the select."""
    rank: Any = rows.c.claim_rank
    moved = {channel: shift for channel, shift in (shifts or {}).items() if shift}
    if moved:
        rank = rank + case(moved, value=channels.c.id, else_=0)
    names: list[str] = []
    values: list[Any] = []
    for name in (*COPIED, *DELIVERY_COLUMNS):
        if name == "claim_rank":
            value = rank
        elif name in rows.c:
            value = rows.c[name]
        elif name in start:
            value = literal(start[name], deliveries.c[name].type)
        else:
            continue
        names.append(name)
        values.append(value)
    fanned = (
        select(rows.c.id, channels.c.id, *values)
        .select_from(rows)
        .join(channels, and_(channels.c.dropped_at.is_(None), taking(rows.c.kind, postgres)))
        .where(true())  # SQLite: an INSERT ... SELECT ... JOIN ... ON needs a WHERE
    )
    return names, fanned


def new_deliveries(
    rows: Any,
    postgres: bool,
    shifts: Mapping[int, int] | None = None,
    *,
    start: Mapping[str, Any] | None = None,
) -> Insert:
    """The deliveries of each message that ``rows`` (a subquery or CTE with the message's
    ``id``, ``COPIED`` and ``claim_rank``, and any other ``DELIVERY_COLUMNS``) selects: one on
    every registered channel not dropped that takes its kind (contract 13), whatever this
    process's configuration; none on a channel that does not take it. A delivery column
    ``rows`` lacks takes its value from ``start`` (column -> value), else the column's
    default. Each channel's claim rank is the message's moved by that channel's shift
    (``shifts``: intake deals a take in from each channel's own head, ``urgency.shifts``)."""
    names, fanned = _fanned(rows, postgres, shifts, start or {})
    return deliveries.insert().from_select(["message_pk", "channel_id", *names], fanned)


def _insert(postgres: bool) -> Any:
    from sqlalchemy.dialects import postgresql, sqlite

    return postgresql.insert if postgres else sqlite.insert


def new_cursors(made: Any, postgres: bool) -> Insert:
    """The cursors of aggregates just made (``made``: a subquery or CTE with their ``id`` and
    ``kind``), one on every channel not dropped that takes the kind: cursor 0, strict order
    from version 1 (a channel there when the aggregate begins misses no version of it, so a
    first version above 1 waits for the ones before it: the gap rule of contract 3), no
    lease. ``ON CONFLICT DO NOTHING``."""
    statement: Insert = (
        _insert(postgres)(channel_aggregates)
        .from_select(
            ["aggregate_id", "channel_id"],
            select(made.c.id, channels.c.id)
            .select_from(made)
            .join(channels, and_(channels.c.dropped_at.is_(None), taking(made.c.kind, postgres)))
            .where(true()),
        )
        .on_conflict_do_nothing()
    )
    return statement


def late_cursors(fanned: Any, postgres: bool) -> Insert:
    """The cursor of each (aggregate, channel) of the new deliveries ``fanned`` (a subquery or
    CTE with ``aggregate_id``, ``channel_id``, ``version``) that has none: a channel that came,
    or began taking the kind, after the aggregate was made. Its strict order starts at the
    lowest version it receives now, not at 1 (contract 13): the versions before were accepted
    before it took them, and it never receives them; except the versions before it that are
    kept with no delivery on any channel (``messages.kept_nowhere``: no channel took them
    when they came): strict order there starts at the lowest of those, so the new version
    waits behind them as behind a gap, and ``channels seed NAME --from`` gives them to the
    channel in order (review 32k: else the new version went first and made them stale).
    ``ON CONFLICT DO NOTHING``: two intakes at once."""
    known = exists().where(
        channel_aggregates.c.aggregate_id == fanned.c.aggregate_id,
        channel_aggregates.c.channel_id == fanned.c.channel_id,
    )
    lowest = (
        select(
            fanned.c.aggregate_id,
            fanned.c.channel_id,
            func.min(fanned.c.version).label("version"),
        )
        .where(~known)
        .group_by(fanned.c.aggregate_id, fanned.c.channel_id)
        .subquery("lowest")
    )
    m = messages.c
    kept = (
        select(func.min(m.version))
        .where(
            m.aggregate_id == lowest.c.aggregate_id,
            m.version < lowest.c.version,
            is_kept(messages),
        )
        .scalar_subquery()
    )
    statement: Insert = (
        _insert(postgres)(channel_aggregates)
        .from_select(
            ["aggregate_id", "channel_id", "first_version"],
            select(
                lowest.c.aggregate_id, lowest.c.channel_id, func.coalesce(kept, lowest.c.version)
            ).where(true()),  # SQLite: an INSERT ... SELECT ... ON CONFLICT needs a WHERE
        )
        .on_conflict_do_nothing()
    )
    return statement
