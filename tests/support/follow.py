"""For tests that set the scene by writing a delivery's state (or an aggregate's cursor)
directly: a delivery's columns live only in ``deliveries`` and a cursor's in
``channel_aggregates`` (migration 0026 dropped the one channel's copy on ``messages`` and
``aggregates``), so a scene names the messages (or aggregates) by their own columns and sets
their delivery (cursor) on one channel, the one channel by default."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Connection, select, update

from exchange.db.schema import aggregates, channel_aggregates, deliveries, messages
from exchange.queue.deliveries import the_channel


def set_delivery(
    connection: Connection,
    where: ColumnElement[bool] | None = None,
    *,
    channel_id: int | None = None,
    **values: Any,
) -> int:
    """Set ``values`` (delivery columns: ``state``, ``reason``, …) on the delivery of every
    message ``where`` (a condition on ``messages``; None: every message) selects, on the
    channel ``channel_id`` (None: the one channel). Returns how many deliveries changed."""
    chosen = select(messages.c.id)
    if where is not None:
        chosen = chosen.where(where)
    channel = the_channel() if channel_id is None else channel_id
    return connection.execute(
        update(deliveries)
        .where(deliveries.c.message_pk.in_(chosen.scalar_subquery()))
        .where(deliveries.c.channel_id == channel)
        .values(**values)
    ).rowcount


def set_cursor(
    connection: Connection,
    where: ColumnElement[bool] | None = None,
    *,
    channel_id: int | None = None,
    **values: Any,
) -> int:
    """Set ``values`` (``done_version``, the lease) on the cursor of every aggregate ``where``
    (a condition on ``aggregates``) selects, on the channel ``channel_id`` (None: the one)."""
    chosen = select(aggregates.c.id)
    if where is not None:
        chosen = chosen.where(where)
    channel = the_channel() if channel_id is None else channel_id
    return connection.execute(
        update(channel_aggregates)
        .where(channel_aggregates.c.aggregate_id.in_(chosen.scalar_subquery()))
        .where(channel_aggregates.c.channel_id == channel)
        .values(**values)
    ).rowcount
