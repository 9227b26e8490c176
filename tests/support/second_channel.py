"""A second channel written as rows (``channels``, ``deliveries``, ``channel_aggregates``), as
several channels have them, for the tests of what an operator reads (contract 13):
tests/ops/test_reads_every_channel.py and tests/ops/test_surfaces_name_the_channel.py share
the scene ``two_channels``:

- SKU-1 delivered on the one channel (``api``, as migrate registered it) and in a state of the
  test's choosing on ``second``;
- SKU-2 waiting on ``api`` and in a state of the test's choosing on ``second``;
- a rejected record (quarantined, no channel's).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, insert, select, update

from exchange.db.engine import transaction
from exchange.db.schema import channel_aggregates, channels, deliveries
from exchange.dev.testing import one_channel_messages, price_row, raw_row, stage
from exchange.domain.policy import DEFAULT_KINDS
from exchange.domain.states import State
from exchange.intake.staging_table import take
from exchange.queue.deliveries import one_channel

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

# A delivery's state and reason on ``second``, by aggregate.
States = dict[str, tuple[str, str | None]]


def pk_of(connection: Connection, aggregate: str) -> int:
    """The accepted message of ``aggregate`` (one version each in these scenes)."""
    return int(
        connection.execute(
            select(messages.c.id).where(messages.c.aggregate == aggregate, ~messages.c.rejected)
        ).scalar_one()
    )


def taken(engine: Engine, rows: list[dict[str, Any]], now: datetime) -> None:
    """``rows`` staged and taken in, with the default kinds."""
    stage(engine, rows)
    take(engine, None, dict(DEFAULT_KINDS), now)


def on_the_one(engine: Engine, aggregate: str, **values: Any) -> None:
    """The message's delivery on the one channel takes ``values``."""
    with transaction(engine) as connection:
        pk = pk_of(connection, aggregate)
        the_one = one_channel(connection)
        connection.execute(
            update(deliveries)
            .where(deliveries.c.message_pk == pk, deliveries.c.channel_id == the_one)
            .values(**values)
        )


def second_channel(engine: Engine, states: States, now: datetime, *, target: str = "api") -> int:
    """A channel ``second`` (of ``target``) beside the one, with a delivery of each message
    named in ``states`` (by aggregate) in that state and reason, and a cursor of its
    aggregate; its id."""
    with transaction(engine) as connection:
        second = connection.execute(
            insert(channels)
            .values(name="second", target=target, added_at=now)
            .returning(channels.c.id)
        ).scalar_one()
        for aggregate, (state, reason) in states.items():
            row = connection.execute(
                select(messages).where(messages.c.id == pk_of(connection, aggregate))
            ).one()
            connection.execute(
                insert(deliveries).values(
                    message_pk=row.id,
                    channel_id=second,
                    aggregate_id=row.aggregate_id,
                    kind=row.kind,
                    version=row.version,
                    state=state,
                    reason=reason,
                    waiting_since=now,
                    updated_at=now,
                )
            )
            connection.execute(
                insert(channel_aggregates).values(aggregate_id=row.aggregate_id, channel_id=second)
            )
    return int(second)


def two_channels(
    engine: Engine,
    now: datetime,
    *,
    sku_1: tuple[str, str | None],
    sku_2: tuple[str, str | None],
    target: str = "api",
) -> Engine:
    """The scene (see the module): SKU-1 delivered on ``api`` and ``sku_1`` (state, reason) on
    ``second``; SKU-2 waiting on ``api`` and ``sku_2`` on ``second``; a rejected record."""
    taken(
        engine,
        [
            price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail"),
            price_row("SKU-2", 1, "20.00", aggregate="SKU-2/retail"),
            raw_row("price", "SKU-BAD", 1, "{not json"),
        ],
        now,
    )
    on_the_one(engine, "SKU-1/retail", state=State.DELIVERED.value, updated_at=now)
    second_channel(engine, {"SKU-1/retail": sku_1, "SKU-2/retail": sku_2}, now, target=target)
    return engine
