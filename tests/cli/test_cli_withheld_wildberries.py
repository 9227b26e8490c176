"""``exchange status`` on a price Wildberries withholds (its price quarantine, research §2.4):
WB's API releases nothing, so status never advises ``exchange withheld release`` for it (that
could only answer "not released"); it names the seller's cabinet, in English and Russian."""

from __future__ import annotations

import json
from pathlib import Path

from clitools import Cli, describe
from sqlalchemy import Engine, select, update

from exchange.db.engine import transaction
from exchange.db.schema import channels, deliveries
from exchange.dev.testing import price_row, stage
from exchange.domain.clock import SystemClock
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake import staging_table as intake


def _wb_only(cli: Cli, db_url: str, engine: Engine, tmp_path: Path) -> dict[str, str | None]:
    token = tmp_path / "wb"
    token.write_text("t" * 40 + "\n", encoding="utf-8")
    named = {
        "wb": {
            "target": "wildberries",
            "wb_price_types": {"retail": "price"},
            "wb_token_file": str(token),
        }
    }
    env: dict[str, str | None] = {
        "EXCHANGE_CHANNELS": json.dumps(named),
        "EXCHANGE_SITE_TOKEN": None,
    }
    with transaction(engine) as connection:
        connection.execute(
            update(channels).where(channels.c.name == "api").values(dropped_at=SystemClock().now())
        )
    migrated = cli("migrate", db=db_url, env=env)
    assert migrated.returncode == 0, describe(migrated)
    return env


def withheld_on_wb(cli: Cli, db_url: str, engine: Engine, tmp_path: Path) -> dict[str, str | None]:
    """A price taken for the channel ``wb`` and withheld there (its state set as the worker
    sets it on WB's quarantine answer)."""
    env = _wb_only(cli, db_url, engine, tmp_path)
    stage(engine, [price_row("SKU-1", 1, "300.00")])
    intake.take(engine, None, DEFAULT_KINDS, SystemClock().now())
    with transaction(engine) as connection:
        wb = connection.execute(select(channels.c.id).where(channels.c.name == "wb")).scalar_one()
        connection.execute(
            update(deliveries)
            .where(deliveries.c.channel_id == wb)
            .values(state="withheld", last_error="Wildberries: in the price quarantine")
        )
    return env


def test_status_sends_a_wildberries_withheld_price_to_the_cabinet_not_to_release(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """Promise (issue 32, mpminor item 3): for a price Wildberries withholds, ``status`` names
    the seller's cabinet and never advises ``exchange withheld release``."""
    env = withheld_on_wb(cli, db_url, engine, tmp_path)
    status = cli("status", db=db_url, env=env)
    assert status.returncode == 1, describe(status)
    said = " ".join(status.stdout.split())
    assert "exchange withheld release" not in said, describe(status)
    assert "Wildberries seller's cabinet (Цены и скидки → Карантин цен)" in said, describe(status)
    assert "Wildberries' in the seller's cabinet" in said, describe(status)
    ru = cli("status", db=db_url, env={**env, "EXCHANGE_LANG": "ru"})
    said = " ".join(ru.stdout.split())
    assert "exchange withheld release" not in said, describe(ru)
    assert "в кабинете продавца Wildberries" in said, describe(ru)
    assert "придержано каналом: цены Wildberries — в кабинете продавца" in said, describe(ru)
