"""For tests that set a message's state by writing ``messages`` (or a cursor by writing
``aggregates``) directly, as the setup of a scene: ``follow`` makes the one channel's
deliveries and cursors say the same, as the writers' dual write does (issue 31, step 2), so
that readers of ``deliveries`` (step 3) see the scene. Messages inserted directly get their
delivery, aggregates their cursor."""

from __future__ import annotations

from sqlalchemy import Connection, exists, select, update

from exchange.db.engine import is_postgres
from exchange.db.schema import (
    CURSOR_COLUMNS,
    DELIVERY_COLUMNS,
    aggregates,
    channel_aggregates,
    deliveries,
    messages,
)
from exchange.queue.deliveries import (
    COPIED,
    one_channel_cursors,
    one_channel_deliveries,
    the_channel,
)

MIRRORED = (*COPIED, *DELIVERY_COLUMNS)


def follow(connection: Connection) -> None:
    """The one channel's deliveries and cursors take their messages' and aggregates' values."""
    missing = (
        select(messages)
        .where(
            ~messages.c.rejected,
            ~exists().where(deliveries.c.message_pk == messages.c.id),
        )
        .subquery("missing")
    )
    connection.execute(one_channel_deliveries(missing))
    connection.execute(
        update(deliveries).values(
            {
                name: select(messages.c[name])
                .where(messages.c.id == deliveries.c.message_pk)
                .scalar_subquery()
                for name in MIRRORED
            }
        )
    )
    connection.execute(one_channel_cursors(is_postgres(connection), aggregates.c.id.is_not(None)))
    connection.execute(
        update(channel_aggregates)
        .where(channel_aggregates.c.channel_id == the_channel())
        .values(
            {
                name: select(aggregates.c[name])
                .where(aggregates.c.id == channel_aggregates.c.aggregate_id)
                .scalar_subquery()
                for name in CURSOR_COLUMNS
            }
        )
    )
