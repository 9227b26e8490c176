"""The deliveries of the one channel, written beside the messages (issue 31, step 2).

Every delivery column of ``messages`` (``DELIVERY_COLUMNS``) and the cursor and lease of
``aggregates`` (``CURSOR_COLUMNS``) are per channel in ``deliveries`` and
``channel_aggregates`` (migration 0024). Until the readers move to them, each writer keeps
writing the old columns and writes the same values here, for the one channel: the registered
channel not dropped (``the_channel``; there is one until several are configured). A message
has one delivery, that channel's, so a delivery is found by its message alone: a condition on
the channel beside it lets SQLite's planner walk the channel's index, every delivery, once
per change (measured: the record of a batch went from 12 ms to seconds at 20,000). What the
writers share is here, so that the step that stops writing the old columns finds it in one
place: which channel, the new message's delivery, the new aggregate's cursor, the channel a
history row names.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Insert,
    ScalarSelect,
    and_,
    case,
    exists,
    null,
    select,
)

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


def new_deliveries(rows: Any) -> Insert:
    """The delivery on the one channel of each message that ``rows`` (a subquery or CTE with
    the ``messages`` columns ``id``, ``COPIED`` and ``DELIVERY_COLUMNS``) selects."""
    names = [*COPIED, *DELIVERY_COLUMNS]
    return deliveries.insert().from_select(
        ["message_pk", "channel_id", *names],
        select(rows.c.id, the_channel(), *(rows.c[name] for name in names)),
    )


def new_cursors(postgres: bool, among: ColumnElement[bool]) -> Insert:
    """The cursor on the one channel of each aggregate that ``among`` (a condition on
    ``aggregates``, with whatever it joins) selects and that has none yet: cursor 0, strict
    order from version 1, no lease. ``ON CONFLICT DO NOTHING``: two intakes making one
    aggregate at once."""
    from sqlalchemy.dialects import postgresql, sqlite

    insert = (postgresql.insert if postgres else sqlite.insert)(channel_aggregates)
    channel = the_channel()
    known = exists().where(
        channel_aggregates.c.aggregate_id == aggregates.c.id,
        channel_aggregates.c.channel_id == channel,
    )
    return insert.from_select(
        ["aggregate_id", "channel_id"],
        select(aggregates.c.id, channel).where(and_(among, ~known)).distinct(),
    ).on_conflict_do_nothing()


def channel_of(message_pk: Any, event: Any) -> ColumnElement[Any]:
    """The channel a history row names: its message's delivery's for a delivery's event; NULL
    for intake's own events and for a rejected record (no channel receives it)."""
    delivery = (
        select(deliveries.c.channel_id)
        .where(deliveries.c.message_pk == message_pk)
        .order_by(deliveries.c.channel_id)
        .limit(1)
        .scalar_subquery()
    )
    named: ColumnElement[Any] = case((event.in_(sorted(INTAKE_EVENTS)), null()), else_=delivery)
    return named
