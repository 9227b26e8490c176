"""``status --channel NAME`` says that channel's causes only, and those of no channel (the
staging, 1C, the database), each named as plain ``status`` names it, and exits by them alone
(docs/runbook.ru.md «Один магазин недоступен»: a monitoring check per channel must not wake
the site's people for a Yandex Market outage). A review found Yandex Market answering 503 said
by ``status --channel site`` (and ``ozon``, ``wb``) as «сайт раз за разом отвечает ошибками»,
exit 1. On SQLite and on PostgreSQL."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from clitools import Cli, describe, run_json
from sqlalchemy import Engine, insert, update

from exchange.db.engine import transaction
from exchange.db.schema import channels, workers
from exchange.domain.clock import SystemClock

NAMES = ("site", "ozon", "wb", "market")


def _secret(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text + "\n", encoding="utf-8")
    return str(path)


def _four_channels(cli: Cli, db_url: str, engine: Engine, tmp_path: Path) -> dict[str, str]:
    """The reviewer's seller: the site and the three marketplaces, registered by ``migrate``
    (the fixture's ``api`` channel dropped), and a process with a live loop on each."""
    named = {
        "site": {
            "target": "api",
            "site_url": "http://127.0.0.1:9/api",
            "site_token_file": _secret(tmp_path, "site", "s" * 20),
        },
        "ozon": {
            "target": "ozon",
            "ozon_client_id": "836741",
            "ozon_api_key_file": _secret(tmp_path, "ozon", "k" * 36),
            "ozon_price_types": {"retail": "price"},
        },
        "wb": {
            "target": "wildberries",
            "wb_price_types": {"retail": "price"},
            "wb_token_file": _secret(tmp_path, "wb", "t" * 40),
        },
        "market": {
            "target": "yandex-market",
            "ym_price_types": {"retail": "value"},
            "ym_business_id": 1001,
            "ym_api_key_file": _secret(tmp_path, "ym", "y" * 40),
        },
    }
    now = SystemClock().now()
    with transaction(engine) as connection:
        connection.execute(update(channels).where(channels.c.name == "api").values(dropped_at=now))
    env = {"EXCHANGE_CHANNELS": json.dumps(named), "EXCHANGE_SITE_TOKEN": None}
    migrated = cli("migrate", db=db_url, env=env)
    assert migrated.returncode == 0, describe(migrated)
    with transaction(engine) as connection:
        for worker_id, channel in (("p", None), *((f"p/{name}", name) for name in NAMES)):
            connection.execute(
                insert(workers).values(
                    worker_id=worker_id,
                    started_at=now - timedelta(minutes=30),
                    heartbeat_at=now,
                    breaker_state="closed",
                    channel=channel,
                )
            )
    return {**env, "EXCHANGE_LANG": "ru"}


def _market(engine: Engine, **row: object) -> None:
    with transaction(engine) as connection:
        connection.execute(update(workers).where(workers.c.worker_id == "p/market").values(**row))


def _assert_only_market_says_it(cli: Cli, db_url: str, env: dict[str, str], said: str) -> None:
    plain = cli("status", db=db_url, env=env)
    assert plain.returncode == 1, describe(plain)
    assert said in plain.stdout, describe(plain)
    for name in ("site", "ozon", "wb"):
        one = cli("status", "--channel", name, db=db_url, env=env)
        assert one.returncode == 0, describe(one)
        assert "ничего не требует внимания" in one.stdout, describe(one)
        assert "сайт раз за разом" not in one.stdout, describe(one)
        figures = run_json(cli, "status", "--json", "--channel", name, db=db_url, env=env)
        assert (figures["needs_person"], figures["needs_person_causes"]) == ([], [])
    market = cli("status", "--channel", "market", db=db_url, env=env)
    assert market.returncode == 1, describe(market)
    assert said in market.stdout, describe(market)
    assert "сайт" not in market.stdout.split("требует внимания:")[1], describe(market)


def test_a_market_that_keeps_failing_is_no_cause_of_the_sites_status(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    env = _four_channels(cli, db_url, engine, tmp_path)
    _market(
        engine,
        breaker_state="open",
        breaker_until=SystemClock().now() + timedelta(minutes=5),
    )
    _assert_only_market_says_it(cli, db_url, env, "канал market (Яндекс Маркет)")
    figures = run_json(cli, "status", "--json", "--channel", "market", db=db_url, env=env, code=1)
    assert figures["needs_person_causes"] == ["breaker:market"]


def test_a_market_paused_for_its_key_is_no_cause_of_the_sites_status(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    env = _four_channels(cli, db_url, engine, tmp_path)
    _market(
        engine,
        paused_reason="401 Unauthorized",
        paused_at=SystemClock().now(),
        pause_cause="ym-key",
    )
    _assert_only_market_says_it(cli, db_url, env, "market")
    figures = run_json(cli, "status", "--json", "--channel", "market", db=db_url, env=env, code=1)
    assert figures["needs_person_causes"] == ["paused:market"]
