"""``exchange migrate``'s warning (docs/staging.md, "Versions"): the aggregates that hold a
version from 2^62 up that is no 1C package's number, whether a message holds it or a channel's
cursor does after its message was pruned; on every channel in use (contract 13: each channel
has its own cursor), not only the first. On SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, delete, select, update

from exchange.db.channels import register
from exchange.db.engine import transaction
from exchange.db.migrate import aggregates_beyond_intake
from exchange.db.schema import aggregates, channel_aggregates, channels, messages
from exchange.dev.testing import price_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.identity import PACKAGE_VERSIONS_FROM
from exchange.domain.policy import Policy
from exchange.intake import staging_table as intake
from exchange.queue import channels as channel_ops

KINDS = {"price": Policy.LATEST_WINS}
BEYOND = PACKAGE_VERSIONS_FROM + 5  # no package has this number


@dataclass(frozen=True)
class Configured:
    name: str
    target: str
    takes: tuple[str, ...]


def done_on(engine: Engine, channel: str, aggregate: str, version: int) -> None:
    """The aggregate's cursor on ``channel`` at ``version``; its messages pruned since."""
    with transaction(engine) as c:
        channel_id = c.execute(select(channels.c.id).where(channels.c.name == channel)).scalar()
        found = select(aggregates.c.id).where(aggregates.c.aggregate == aggregate)
        moved = c.execute(
            update(channel_aggregates)
            .where(
                channel_aggregates.c.aggregate_id == found.scalar_subquery(),
                channel_aggregates.c.channel_id == channel_id,
            )
            .values(done_version=version)
        ).rowcount
        assert 1 == moved
        c.execute(delete(messages))


def test_a_version_beyond_intake_done_on_the_second_channel_only_is_named(
    engine: Engine, clock: FakeClock
) -> None:
    register(engine, [Configured("shop", "api", ("price",))], clock.now())
    stage(engine, [price_row("A", 1), price_row("B", 1)])
    intake.take(engine, None, KINDS, clock.now())
    done_on(engine, "shop", "A", BEYOND)
    assert ["price 'A'"] == aggregates_beyond_intake(engine)


def test_a_dropped_channels_cursor_is_not_named(engine: Engine, clock: FakeClock) -> None:
    """A dropped channel delivers nothing again (a name used again starts afresh)."""
    register(engine, [Configured("shop", "api", ("price",))], clock.now())
    stage(engine, [price_row("A", 1)])
    intake.take(engine, None, KINDS, clock.now())
    done_on(engine, "shop", "A", BEYOND)
    with transaction(engine) as c:
        channel_ops.drop(c, "shop", operator="ops", note="closed", now=clock.now())
    assert [] == aggregates_beyond_intake(engine)
