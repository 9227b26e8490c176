"""Whether anything is left that the service could move without a person (contract 6), on the
channels a process serves."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, Engine, and_, func, not_, select
from sqlalchemy.orm import aliased

from exchange.db.engine import transaction
from exchange.db.schema import Delivery, channel_aggregates, staging
from exchange.domain.policy import KindPolicies
from exchange.domain.states import PENDING, values
from exchange.queue import order
from exchange.queue.deliveries import one_channel


def is_idle(
    engine: Engine,
    staging_engine: Engine | None,
    kinds: KindPolicies,
    channel_ids: Sequence[int] | None = None,
) -> bool:
    """Nothing untaken, and nothing movable on ``channel_ids`` (None: the one channel)."""
    source = staging_engine or engine
    with transaction(source, read_only=True) as connection:
        untaken = connection.execute(
            select(func.count()).select_from(staging).where(staging.c.taken_at.is_(None))
        ).scalar_one()
    if untaken:
        return False
    with transaction(engine, read_only=True) as connection:
        channels = [one_channel(connection)] if channel_ids is None else channel_ids
        return held_or_none(connection, kinds, channels)


def held_or_none(
    connection: Connection, kinds: KindPolicies, channel_ids: Sequence[int] | None = None
) -> bool:
    """True when every pending delivery on ``channel_ids`` (None: the one channel) is held
    behind a quarantined predecessor on its channel, or behind a version kept nowhere
    (``order.behind_kept``). Another channel's work is no reason to
    wait: a process waits for the channels it serves (contract 13)."""
    channels = [one_channel(connection)] if channel_ids is None else list(channel_ids)
    d = aliased(Delivery, name="d")
    movable = (
        select(func.count())
        .select_from(d)
        .join(channel_aggregates, order.on_cursor(d))
        .where(
            d.channel_id.in_(channels),
            d.state.in_(values(PENDING)),
            not_(order.held(d, kinds)),
            # Behind a version kept nowhere: only ``channels seed`` moves it (a person).
            not_(and_(order.is_strict(d, kinds), order.behind_kept(d))),
        )
    )
    return connection.execute(movable).scalar_one() == 0
