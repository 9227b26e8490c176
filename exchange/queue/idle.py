"""Whether anything is left that the service could move without a person (contract 6)."""

from __future__ import annotations

from sqlalchemy import Connection, Engine, func, not_, select
from sqlalchemy.orm import aliased

from exchange.db.engine import transaction
from exchange.db.schema import Message, aggregates, staging
from exchange.domain.policy import KindPolicies
from exchange.domain.states import PENDING, values
from exchange.queue import order


def is_idle(engine: Engine, staging_engine: Engine | None, kinds: KindPolicies) -> bool:
    source = staging_engine or engine
    with transaction(source, read_only=True) as connection:
        untaken = connection.execute(
            select(func.count()).select_from(staging).where(staging.c.taken_at.is_(None))
        ).scalar_one()
    if untaken:
        return False
    with transaction(engine, read_only=True) as connection:
        return held_or_none(connection, kinds)


def held_or_none(connection: Connection, kinds: KindPolicies) -> bool:
    """True when every pending message is held behind a quarantined predecessor."""
    m = aliased(Message, name="m")
    movable = (
        select(func.count())
        .select_from(m)
        .join(aggregates, aggregates.c.id == m.aggregate_id)
        .where(m.state.in_(values(PENDING)), not_(m.rejected), not_(order.held(m, kinds)))
    )
    return connection.execute(movable).scalar_one() == 0
