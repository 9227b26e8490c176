"""A channel dropped and added again under its name, as an operator does it (contract 13):
``exchange channels drop NAME`` (its waiting deliveries cancelled, reason ``channel-removed``),
the same configuration read again (``run``, ``migrate``, ``check`` register the name: a new
channel), and ``exchange channels seed NAME`` (every current price given to it). The set-up the
tests of a send that may still land on the marketplace across it share
(tests/integration/test_ozon_lost_send_added_again.py,
tests/integration/test_ym_earlier_send_added_again.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Engine, and_, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import channels
from exchange.queue import channels as channel_ops
from exchange.settings import Settings


def live_id(engine: Engine, name: str) -> int:
    """The id of the channel ``name`` not dropped."""
    live = and_(channels.c.name == name, channels.c.dropped_at.is_(None))
    with transaction(engine, read_only=True) as connection:
        return int(connection.execute(select(channels.c.id).where(live)).scalar_one())


def drop_and_add_again(settings: Settings, engine: Engine, name: str, now: datetime) -> int:
    """``channels drop name``, the configuration (``settings``, still naming it) registered
    again, ``channels seed name``; the new channel's id (never the dropped one's)."""
    dropped = live_id(engine, name)
    with transaction(engine) as connection:
        channel_ops.drop(connection, name, operator="ops", note="added again", now=now)
    bootstrap.register_channels(settings, engine)
    channel_ops.seed(engine, name, settings.policies, now=now)
    again = live_id(engine, name)
    assert again != dropped
    return again
