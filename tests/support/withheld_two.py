"""One price withheld on two channels at once (issue 32): the shop site (its withholding switch,
a test device) as channel ``api`` and the Yandex Market simulator as channel ``market``
(a sharp drop is quarantined there: research §3.4). The set-up the release tests with several
channels share (tests/cli/test_cli_withheld_channels.py,
tests/web/test_workbench_withheld_channels.py)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from marketsims import ym_channel, ym_sim
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import channels, deliveries, messages
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import FAST, price_row, stage
from exchange.dev.ymsim import YmSimulator
from exchange.runner import run_until_idle
from exchange.settings import Settings, load_settings

TOKEN = "test-token"


@dataclass
class Two:
    site: SiteSimulator
    ym: YmSimulator
    named: dict[str, dict[str, Any]]  # EXCHANGE_CHANNELS

    @property
    def env(self) -> dict[str, str | None]:
        return {"EXCHANGE_CHANNELS": json.dumps(self.named), "EXCHANGE_SITE_TOKEN": None}


@contextmanager
def two_channels(directory: Path) -> Iterator[Two]:
    token = directory / "site-token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    with (
        SiteSimulator(token=TOKEN, faults=Faults(seed=1), withhold_drops=Decimal("0.5")) as site,
        ym_sim(scale=60, apply_delay=30) as ym,
    ):
        named = {
            "api": {"target": "api", "site_url": site.url, "site_token_file": str(token)},
            "market": ym_channel(
                ym, directory, {"retail": "value", "old": "discountBase"}, ym_apply_timeout=2
            ),
        }
        yield Two(site, ym, named)


def settings_of(db_url: str, two: Two) -> Settings:
    fast = {k: v for k, v in FAST.items() if k not in ("channels", "site_token_file")}
    return load_settings(database_url=db_url, worker_id="test-worker", **fast, channels=two.named)


def states(engine: Engine, message_id: str) -> dict[str, str]:
    """The message's delivery state on each channel, by the channel's name."""
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(channels.c.name, deliveries.c.state)
            .join(channels, channels.c.id == deliveries.c.channel_id)
            .join(messages, messages.c.id == deliveries.c.message_pk)
            .where(messages.c.message_id == message_id)
        )
        return {name: state for name, state in rows}


def withheld_on_both(db_url: str, engine: Engine, two: Two) -> str:
    """Delivers SKU-1 at 100.00, then at 10.00: both channels withhold the drop. Returns the
    withheld message's id."""
    settings = settings_of(db_url, two)
    bootstrap.register_channels(settings, engine)

    worker = bootstrap.worker(settings, engine, rng=random.Random(3))

    async def settle() -> list[int]:
        codes = []
        try:
            for version, price in ((1, "100.00"), (2, "10.00")):
                stage(engine, [price_row("SKU-1", version, price)])
                codes.append(await run_until_idle(worker, max_seconds=60, poll_interval=0.02))
        finally:
            await worker.aclose()
        return codes

    assert asyncio.run(settle()) == [0, 0]
    with transaction(engine, read_only=True) as connection:
        (message_id,) = connection.execute(
            select(messages.c.message_id).where(messages.c.version == 2)
        ).one()
    assert states(engine, message_id) == {"api": "withheld", "market": "withheld"}, states(
        engine, message_id
    )
    return str(message_id)
