"""``exchange run`` with EXCHANGE_CHANNELS (contract 13, issue 31 item 3): it delivers to every
configured channel, each loop on its own row ``<worker id>/<channel>``; ``--channel NAME``
serves one, an unknown name is one line, exit 2; ``pause --channel`` names a registered
channel."""

from __future__ import annotations

import json
from pathlib import Path

from clitools import FAST_ENV, TOKEN, Cli, assert_one_line_error, describe
from sqlalchemy import Engine, func, select

from exchange.db.engine import transaction
from exchange.db.schema import channels, deliveries, workers
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import price_row, stage

PRICES = 6


def with_shop(tmp_path: Path, site_url: str, shop_url: str) -> dict[str, str | None]:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    named = {
        "api": {"target": "api", "site_url": site_url, "site_token_file": str(token)},
        "shop": {"target": "api", "site_url": shop_url, "site_token_file": str(token)},
    }
    return {"EXCHANGE_CHANNELS": json.dumps(named), "EXCHANGE_SITE_TOKEN": None}


def delivered(engine: Engine) -> dict[str, int]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(channels.c.name, func.count())
            .join(deliveries, deliveries.c.channel_id == channels.c.id)
            .where(deliveries.c.state == "delivered")
            .group_by(channels.c.name)
        ).all()
    return {name: count for name, count in rows}


def test_run_delivers_to_every_configured_channel_each_loop_on_its_own_row(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    with SiteSimulator(token=TOKEN) as site, SiteSimulator(token=TOKEN) as shop:
        env = with_shop(tmp_path, site.url, shop.url)
        stage(engine, [price_row(f"SKU-{n}", 1) for n in range(PRICES)])
        took = cli("run", "--once", "--channel", "api", db=db_url, env=env)
        assert took.returncode == 0, describe(took)
        seeded = cli("channels", "seed", "shop", db=db_url, env=env)
        assert seeded.returncode == 0, describe(seeded)

        result = cli("run", "--until-idle", "--max-seconds", "60", db=db_url, env=env)

        assert result.returncode == 0, describe(result)
        assert delivered(engine) == {"api": PRICES, "shop": PRICES}
        assert len(site.held_versions()) == PRICES and len(shop.held_versions()) == PRICES
    with transaction(engine, read_only=True) as connection:
        rows = dict(connection.execute(select(workers.c.worker_id, workers.c.channel)).all())
    loops = {worker: channel for worker, channel in rows.items() if channel is not None}
    assert sorted(loops.values()) == ["api", "shop"]
    assert all(worker.endswith(f"/{channel}") for worker, channel in loops.items())
    assert {worker.split("/")[0] for worker in loops} <= set(rows)  # the process's own row


def test_run_channel_of_an_unknown_name_is_one_line_exit_2(
    cli: Cli, db_url: str, tmp_path: Path
) -> None:
    env = with_shop(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9")
    result = cli("run", "--once", "--channel", "nope", db=db_url, env={**FAST_ENV, **env})
    assert_one_line_error(result, "nope", "api, shop")


def test_pause_channel_of_an_unregistered_name_is_one_line_exit_2(cli: Cli, db_url: str) -> None:
    result = cli("pause", "--channel", "nope", db=db_url)
    assert_one_line_error(result, "nope")
