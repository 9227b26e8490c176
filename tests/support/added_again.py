"""A channel dropped and added again under its name, as an operator does it (contract 13):
``exchange channels drop NAME`` (its waiting deliveries cancelled, reason ``channel-removed``),
the same configuration read again (``run``, ``migrate``, ``check`` register the name: a new
channel), and ``exchange channels seed NAME`` (every current price given to it). The set-up the
tests of a send that may still land on the marketplace across it share
(tests/integration/test_ozon_lost_send_added_again.py,
tests/integration/test_ym_earlier_send_added_again.py), and the Ozon channel those on Ozon run it
on (tests/integration/test_ozon_lost_send_added_again.py,
tests/integration/test_ozon_unanswered_send_dropped.py,
tests/integration/test_ozon_first_send_reads.py)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

from marketsims import ozon_channel
from sqlalchemy import Engine, and_, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import channels
from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.testing import FAST
from exchange.domain.clock import FakeClock
from exchange.queue import channels as channel_ops
from exchange.settings import Settings, load_settings
from exchange.worker import Worker

# A send whose answer is lost is retried, not given up, nor the breaker opened, in these tests.
PATIENT: dict[str, Any] = {"max_attempts": 20, "breaker_threshold": 1000, "http_timeout": 0.3}


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


def ozon_settings(db_url: str, site: OzonSimulator, tmp: Path, **overrides: Any) -> Settings:
    """The quick test settings (``FAST``, ``overrides`` over them) with the one channel ``ozon``
    on ``site``, its ``retail`` price type carried to Ozon's ``price``."""
    fast = {k: v for k, v in FAST.items() if k not in ("channels", "site_token_file")}
    return load_settings(
        database_url=db_url,
        worker_id="test-worker",
        **{**fast, **overrides},
        channels={"ozon": ozon_channel(site, tmp, {"retail": "price"})},
    )


async def cycles(worker: Worker, clock: FakeClock, count: int, step: float) -> None:
    """``count`` cycles of ``worker``, the clock moved ``step`` seconds after each."""
    for _ in range(count):
        await worker.cycle()
        clock.advance(step)
        await asyncio.sleep(0.01)
