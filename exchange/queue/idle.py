"""Whether anything is left that the service could move without a person (contract 6)."""

from __future__ import annotations

from sqlalchemy import Connection, Engine, exists, func, not_, select, true
from sqlalchemy.orm import aliased

from exchange.db.engine import transaction
from exchange.db.schema import Message, aggregates, staging
from exchange.domain.states import State


def is_idle(engine: Engine, staging_engine: Engine | None, strict: list[str]) -> bool:
    source = staging_engine or engine
    with transaction(source, read_only=True) as connection:
        untaken = connection.execute(
            select(func.count()).select_from(staging).where(staging.c.taken_at.is_(None))
        ).scalar_one()
    if untaken:
        return False
    with transaction(engine, read_only=True) as connection:
        return held_or_none(connection, strict)


def held_or_none(connection: Connection, strict: list[str]) -> bool:
    """True when every pending message is held behind a quarantined predecessor."""
    m = aliased(Message, name="m")
    blocker = aliased(Message, name="blocker")
    pending = [State.NEW.value, State.IN_PROGRESS.value, State.DELAYED.value]
    held = exists().where(
        blocker.aggregate_id == m.aggregate_id,
        not_(blocker.rejected),
        blocker.state == State.QUARANTINED.value,
        blocker.version < m.version,
        blocker.version > aggregates.c.done_version,
    )
    movable = (
        select(func.count())
        .select_from(m)
        .join(aggregates, aggregates.c.id == m.aggregate_id)
        .where(m.state.in_(pending), not_(m.rejected))
        .where(~(m.kind.in_(strict) & held) if strict else true())
    )
    return connection.execute(movable).scalar_one() == 0
