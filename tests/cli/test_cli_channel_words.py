"""What an operator reads names the channel (contract 13, issue 31 item 7) where the words
could mislead with two shops: a message's history says whose delivery each event is; status's
counts say they are deliveries; ``pause``/``resume --channel`` say which channel; a worker's log
lines carry the channel of the loop that wrote them. A real run against two site simulators
(the shop refuses SKU-R), on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clitools import TOKEN, Cli
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange import logs
from exchange.db.engine import transaction
from exchange.db.schema import messages
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import FAST, drain, price_row, stage
from exchange.settings import Settings, load_settings


@pytest.fixture
def shop() -> Iterator[SiteSimulator]:
    with SiteSimulator(token=TOKEN) as simulator:
        yield simulator


@pytest.fixture
def site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token=TOKEN) as simulator:
        yield simulator


def _named(site: SiteSimulator, shop: SiteSimulator, token: Path) -> dict[str, Any]:
    return {
        "api": {"target": "api", "site_url": site.url, "site_token_file": str(token)},
        "shop": {"target": "api", "site_url": shop.url, "site_token_file": str(token)},
    }


def _two_channels(db_url: str, tmp_path: Path, site: SiteSimulator, shop: SiteSimulator) -> Any:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    fast = {k: v for k, v in FAST.items() if k not in ("channels", "site_token_file")}
    return load_settings(
        database_url=db_url, worker_id="w", **fast, channels=_named(site, shop, token)
    )


def _delivered_and_refused(
    settings: Settings, engine: Engine, shop: SiteSimulator, refused: str = "SKU-R"
) -> str:
    """SKU-1 and ``refused`` to both channels; the shop refuses ``refused`` (422). Its
    message_id."""
    shop.faults.reject = {refused}
    bootstrap.register_channels(settings, engine)
    stage(engine, [price_row("SKU-1", 1), price_row(refused, 1)])
    worker = bootstrap.worker(settings, engine)

    async def go() -> None:
        try:
            await drain(worker)
        finally:
            await worker.aclose()

    asyncio.run(go())
    with transaction(engine, read_only=True) as connection:
        return str(
            connection.execute(
                select(messages.c.message_id).where(messages.c.aggregate == refused)
            ).scalar_one()
        )


def test_the_history_says_whose_delivery_each_event_is_with_two_channels(
    cli: Cli,
    db_url: str,
    engine: Engine,
    site: SiteSimulator,
    shop: SiteSimulator,
    tmp_path: Path,
) -> None:
    settings = _two_channels(db_url, tmp_path, site, shop)
    refused = _delivered_and_refused(settings, engine, shop)
    shown = cli("history", refused, db=db_url)
    assert shown.returncode == 0, shown.stderr
    head = next(line for line in shown.stdout.splitlines() if "┃" in line)
    assert [cell.strip() for cell in head.split("┃")][1:3] == ["at", "channel"]
    rows = [line for line in shown.stdout.splitlines() if "│" in line]
    delivered = [r for r in rows if "delivered" in r.split("│")[3]]
    quarantined = [r for r in rows if "quarantined" in r.split("│")[3]]
    assert delivered and all(r.split("│")[2].strip() == "api" for r in delivered), rows
    assert quarantined and all(r.split("│")[2].strip() == "shop" for r in quarantined), rows
    taken = [r for r in rows if "taken" in r.split("│")[3]]
    assert taken and taken[0].split("│")[2].strip() == "—"  # intake's own: no channel's


def test_status_says_it_counts_deliveries_with_two_channels_and_messages_with_one(
    cli: Cli,
    db_url: str,
    engine: Engine,
    site: SiteSimulator,
    shop: SiteSimulator,
    tmp_path: Path,
) -> None:
    settings = _two_channels(db_url, tmp_path, site, shop)
    _delivered_and_refused(settings, engine, shop)
    env = {"EXCHANGE_CHANNELS": json.dumps(_named(site, shop, tmp_path / "token"))}
    both = cli("status", db=db_url, env={**env, "EXCHANGE_SITE_TOKEN": None})
    assert "deliveries by state (2 channels: a message counts once on each)" in both.stdout
    russian = cli(
        "status", db=db_url, env={**env, "EXCHANGE_SITE_TOKEN": None, "LANG": "ru_RU.UTF-8"}
    )
    assert "доставки по состояниям (каналов: 2; сообщение считается на каждом)" in (
        russian.stdout
    ), russian.stdout
    one = cli("status", "--channel", "shop", db=db_url, env={**env, "EXCHANGE_SITE_TOKEN": None})
    assert "messages by state" in one.stdout and "deliveries by state" not in one.stdout


def test_pause_and_resume_of_one_channel_say_which(
    cli: Cli,
    db_url: str,
    engine: Engine,
    site: SiteSimulator,
    shop: SiteSimulator,
    tmp_path: Path,
) -> None:
    bootstrap.register_channels(_two_channels(db_url, tmp_path, site, shop), engine)
    paused = cli("pause", "--channel", "shop", "--note", "shop down", db=db_url)
    again = cli("pause", "--channel", "shop", db=db_url)
    resumed = cli("resume", "--channel", "shop", db=db_url)
    said = [r.stdout.strip().splitlines()[-1] for r in (paused, again, resumed)]
    assert said == [
        "delivery to channel shop paused; the other channels deliver on",
        "delivery to channel shop was already paused",
        "delivery to channel shop resumed",
    ]
    russian = cli("resume", "--channel", "shop", db=db_url, env={"LANG": "ru_RU.UTF-8"})
    assert russian.stdout.strip().splitlines()[-1] == "доставка в канал shop возобновлена"


def test_a_loops_log_lines_carry_its_channel_and_intakes_do_not(
    db_url: str, engine: Engine, site: SiteSimulator, shop: SiteSimulator, tmp_path: Path
) -> None:
    settings = _two_channels(db_url, tmp_path, site, shop)
    for log_format in ("text", "json"):
        stream = io.StringIO()
        handler = logs.configure(
            settings.model_copy(update={"log_format": log_format, "log_level": "INFO"}),
            stream=stream,
        )
        try:
            stage(engine, [price_row(f"SKU-{log_format}", 1)])
            _delivered_and_refused(settings, engine, shop, f"SKU-R-{log_format}")
        finally:
            logging.getLogger().removeHandler(handler)
        lines = stream.getvalue().splitlines()
        if log_format == "text":
            batches = [line for line in lines if " deliveries outcome=delivered " in line]
            assert {line.rsplit("channel=", 1)[1] for line in batches} == {"api", "shop"}
            refused = [line for line in lines if " delivery outcome=quarantined " in line]
            assert len(refused) == 1
            assert refused and all(line.endswith("channel=shop") for line in refused), refused
            taken = [line for line in lines if "exchange.worker.intake" in line]
            assert all("channel=" not in line for line in taken), taken
        else:
            found = [json.loads(line) for line in lines]
            batches = [d for d in found if d.get("event") == "deliveries"]
            assert {d["channel"] for d in batches} == {"api", "shop"}
            refused = [d for d in found if d.get("outcome") == "quarantined"]
            assert refused and {d["channel"] for d in refused} == {"shop"}
