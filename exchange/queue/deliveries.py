"""What the writers of deliveries share (issue 31): a new message's deliveries, a new
aggregate's cursors, and the one channel the old columns mirror.

**Fan-out** (contract 13, step 6): a message intake accepts gets one delivery on every
registered channel not dropped that takes its kind (``channels.takes``, through
``db.channels.taking``: the registry alone, whatever this process's configuration), each
ranked from that channel's own head (``new_deliveries``). An aggregate made by intake gets a
cursor on every channel taking its kind, strict order from version 1 (``new_cursors``); a
channel that came, or began taking the kind, after the aggregate was made gets its cursor
with its first delivery of it, strict order from the version it first receives
(``late_cursors``). A duplicate or a rejected record gets none.

**The old columns**: every delivery column of ``messages`` (``DELIVERY_COLUMNS``) and the
cursor and lease of ``aggregates`` are per channel in ``deliveries`` and
``channel_aggregates`` (migration 0024). Until they are dropped, the writers keep them
mirroring one channel: the first registered channel not dropped (``the_channel``,
``is_the_channel``). A condition on that channel beside a message lets SQLite's planner walk
the channel's index, every delivery, once per change (measured: the record of a batch went
from 12 ms to seconds at 20,000): the writers name the channel of each change instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Insert,
    ScalarSelect,
    and_,
    case,
    exists,
    func,
    select,
    true,
)

from exchange.db.channels import taking
from exchange.db.schema import (
    DELIVERY_COLUMNS,
    aggregates,
    channel_aggregates,
    channels,
    deliveries,
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


def is_the_channel(channel_id: Any) -> ColumnElement[bool]:
    """``channel_id`` (a bound value or a column) is the one channel: the old columns on
    ``messages`` and ``aggregates`` mirror that channel's deliveries and cursors only, until
    step 4 stops writing them."""
    mirrored: ColumnElement[bool] = channel_id == the_channel()
    return mirrored


def on_the_channel(table: Any) -> ColumnElement[bool]:
    """``table``'s row (``channel_aggregates``, found by aggregate) is the one channel's."""
    on: ColumnElement[bool] = table.c.channel_id == the_channel()
    return on


def _fanned(rows: Any, postgres: bool, shifts: Mapping[int, int] | None) -> Any:
    """Each message ``rows`` selects, once per channel not dropped that takes its kind
    (``channels.taking``, the registry alone), with that channel's rank: the message's own
    (``claim_rank``) moved by the channel's shift (``shifts``, channel id -> ranks; none: 0)."""
    rank: Any = rows.c.claim_rank
    moved = {channel: shift for channel, shift in (shifts or {}).items() if shift}
    if moved:
        rank = rank + case(moved, value=channels.c.id, else_=0)
    names = [*COPIED, *DELIVERY_COLUMNS]
    return (
        select(
            rows.c.id,
            channels.c.id,
            *(rank if name == "claim_rank" else rows.c[name] for name in names),
        )
        .select_from(rows)
        .join(channels, and_(channels.c.dropped_at.is_(None), taking(rows.c.kind, postgres)))
        .where(true())  # SQLite: an INSERT ... SELECT ... JOIN ... ON needs a WHERE
    )


def new_deliveries(rows: Any, postgres: bool, shifts: Mapping[int, int] | None = None) -> Insert:
    """The deliveries of each message that ``rows`` (a subquery or CTE with the ``messages``
    columns ``id``, ``COPIED`` and ``DELIVERY_COLUMNS``) selects: one on every registered
    channel not dropped that takes its kind (contract 13), whatever this process's
    configuration; none on a channel that does not take it. Each channel's claim rank is the
    message's moved by that channel's shift (``shifts``: intake deals a take in from each
    channel's own head, ``urgency.shifts``)."""
    names = [*COPIED, *DELIVERY_COLUMNS]
    return deliveries.insert().from_select(
        ["message_pk", "channel_id", *names], _fanned(rows, postgres, shifts)
    )


def one_channel_deliveries(rows: Any) -> Insert:
    """The delivery on the one channel (``the_channel``) only of each message ``rows``
    selects: for a scene written on ``messages`` directly (tests' ``follow``)."""
    names = [*COPIED, *DELIVERY_COLUMNS]
    return deliveries.insert().from_select(
        ["message_pk", "channel_id", *names],
        select(rows.c.id, the_channel(), *(rows.c[name] for name in names)),
    )


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
    before it took them, and it never receives them. ``ON CONFLICT DO NOTHING``: two intakes
    at once."""
    known = exists().where(
        channel_aggregates.c.aggregate_id == fanned.c.aggregate_id,
        channel_aggregates.c.channel_id == fanned.c.channel_id,
    )
    statement: Insert = (
        _insert(postgres)(channel_aggregates)
        .from_select(
            ["aggregate_id", "channel_id", "first_version"],
            select(fanned.c.aggregate_id, fanned.c.channel_id, func.min(fanned.c.version))
            .where(~known)
            .group_by(fanned.c.aggregate_id, fanned.c.channel_id),
        )
        .on_conflict_do_nothing()
    )
    return statement


def one_channel_cursors(postgres: bool, among: ColumnElement[bool]) -> Insert:
    """The cursor on the one channel of each aggregate that ``among`` (a condition on
    ``aggregates``) selects and that has none yet: for a scene written on ``aggregates``
    directly (tests' ``follow``)."""
    channel = the_channel()
    known = exists().where(
        channel_aggregates.c.aggregate_id == aggregates.c.id,
        channel_aggregates.c.channel_id == channel,
    )
    statement: Insert = (
        _insert(postgres)(channel_aggregates)
        .from_select(
            ["aggregate_id", "channel_id"],
            select(aggregates.c.id, channel).where(and_(among, ~known)).distinct(),
        )
        .on_conflict_do_nothing()
    )
    return statement
