"""Contract 13, issue 31 item 1 as an operator meets it: ``exchange config`` shows each channel,
``exchange check`` checks each channel's target, a bad channel setting or a one-target setting
beside EXCHANGE_CHANNELS is one line and exit 2, ``demo`` refuses several channels (its
rehearsal is of one shop; ``run`` and ``serve`` serve every channel: tests/cli/
test_cli_run_channels.py), and a run configured only through EXCHANGE_CHANNELS delivers to its
one channel's site."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clitools import (
    FAST_ENV,
    TOKEN,
    Cli,
    assert_one_line_error,
    describe,
    untaken_rows,
)
from sqlalchemy import Engine, func, select

from exchange.db.engine import transaction
from exchange.db.schema import channels as channels_table
from exchange.db.schema import deliveries
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import price_row, stage

LAZYSIGN = "0123456789abcdef0123456789abcdef"


def channels(tmp_path: Path, **named: dict[str, Any]) -> dict[str, str | None]:
    """The environment of EXCHANGE_CHANNELS, without the one-target token the runner sets."""
    return {"EXCHANGE_CHANNELS": json.dumps(named), "EXCHANGE_SITE_TOKEN": None}


def token_file(tmp_path: Path, token: str = TOKEN) -> str:
    path = tmp_path / f"token-{token[:4]}"
    path.write_text(token + "\n", encoding="utf-8")
    return str(path)


def two_channels(tmp_path: Path, site_url: str = "https://shop.example.com") -> dict[str, Any]:
    return channels(
        tmp_path,
        site={"target": "api", "site_url": site_url, "site_token_file": token_file(tmp_path)},
        shop={
            "target": "woocommerce",
            "woo_url": "https://second.example.com",
            "woo_key_file": token_file(tmp_path, "ck_" + "k" * 20),
            "woo_secret_file": token_file(tmp_path, "cs_" + "s" * 20),
        },
    )


def shown(stdout: str) -> dict[str, str]:
    rows = {}
    for line in stdout.splitlines():
        name, _, value = line.partition(" ")
        rows[name] = value.strip()
    return rows


# -- exchange config ------------------------------------------------------------------------------


def test_config_shows_each_channel_its_target_takes_and_settings_secrets_masked(
    cli: Cli, tmp_path: Path
) -> None:
    env = channels(
        tmp_path,
        site={
            "target": "api",
            "site_url": "https://shop.example.com",
            "site_token_file": token_file(tmp_path),
            "batch_size": 25,
        },
        b1c={
            "target": "bitrix",
            "bitrix_url": f"https://b.example.com/?wc1c-receiver=1&lazysign={LAZYSIGN}",
            "bitrix_user": "exchange",
            "bitrix_password_file": "/run/secrets/bitrix",
            "bitrix_catalog_id": "catalog-1",
        },
    )
    result = cli("config", env={"EXCHANGE_BATCH_SIZE": "70", **env})

    assert 0 == result.returncode, describe(result)
    rows = shown(result.stdout)
    assert "site, b1c" == rows["EXCHANGE_CHANNELS"]
    assert "target api, takes price, financial_posting" == rows["channels.site"]
    assert "https://shop.example.com" == rows["channels.site.site_url"]
    assert "25" == rows["channels.site.batch_size"], "its own"
    assert "target bitrix, takes price" == rows["channels.b1c"]
    assert "70" == rows["channels.b1c.batch_size"], "the global one it keeps"
    assert "catalog-1" == rows["channels.b1c.bitrix_catalog_id"]
    assert LAZYSIGN not in result.stdout, "a secret in a channel's URL is masked"
    assert "lazysign=***" in rows["channels.b1c.bitrix_url"]
    assert TOKEN not in result.stdout
    # owner 31 item 8: the one target's settings, which the channels replace, are left out
    # (their defaults beside the channels read as if in force); the global ones stay
    one_target = {"EXCHANGE_TARGET", "EXCHANGE_WOO_PRICE_FIELDS", "EXCHANGE_SITE_URL"}
    assert set() == one_target & set(rows), result.stdout
    assert "70" == rows["EXCHANGE_BATCH_SIZE"]


def test_config_without_channels_shows_the_one_channel_named_after_exchange_target(
    cli: Cli,
) -> None:
    env = {"EXCHANGE_TARGET": "rabbitmq", "EXCHANGE_RABBITMQ_URL": "amqp://h"}
    result = cli("config", env={**env, "EXCHANGE_RABBITMQ_EXCHANGE": "prices"})
    assert 0 == result.returncode, describe(result)
    rows = shown(result.stdout)
    assert "(unset)" == rows["EXCHANGE_CHANNELS"]
    assert rows["channels.rabbitmq"].startswith("target rabbitmq, takes price, financial_posting")
    assert not [name for name in rows if name.startswith("channels.rabbitmq.")]


# -- one line, exit 2 -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", [("config",), ("check",), ("run", "--once"), ("status",)])
def test_a_bad_channel_setting_stops_every_command_in_one_line_naming_channel_and_setting(
    cli: Cli, tmp_path: Path, command: tuple[str, ...]
) -> None:
    env = channels(tmp_path, shop={"target": "woocommerce", "woo_url": "ftp://second.example"})
    env["EXCHANGE_CHANNELS"] = env["EXCHANGE_CHANNELS"].replace(  # type: ignore[union-attr]
        '"}', '", "woo_key_file": "/k", "woo_secret_file": "/s"}'
    )
    result = cli(*command, env=env)
    if command == ("check",):  # check says it as its first line, on stdout (exit 2 as well)
        assert 2 == result.returncode, describe(result)
        assert result.stdout.startswith(
            "FAIL configuration valid: invalid configuration: EXCHANGE_CHANNELS: channel shop: "
            "woo_url: must be an http(s) URL"
        ), describe(result)
        return
    assert_one_line_error(result, "EXCHANGE_CHANNELS: channel shop: woo_url: must be an http(s)")


def test_a_bad_channel_setting_is_said_after_the_russian_error_word_as_the_others(
    cli: Cli, tmp_path: Path
) -> None:
    env = channels(tmp_path, site={"target": "api", "site_url": "https://a.example", "x": 1})
    result = cli("config", env={"EXCHANGE_LANG": "ru", **env})
    assert 2 == result.returncode, describe(result)
    assert [
        "ошибка: ошибка в настройках: EXCHANGE_CHANNELS: канал site: x — не настройка канала с "
        "целью api; его настройки: target, takes, site_url, site_token_file, site_allow_http, "
        "batch_size, site_batch_size, concurrency, site_max_rate, site_ca_bundle, http_timeout, "
        "max_attempts, retry_base_delay, retry_max_delay, breaker_threshold"
    ] == result.stderr.splitlines()


def test_a_one_target_setting_beside_exchange_channels_exits_2_in_one_line(
    cli: Cli, tmp_path: Path
) -> None:
    env = {**two_channels(tmp_path), "EXCHANGE_TARGET": "woocommerce"}
    result = cli("run", "--once", site="https://old.example.com", env=env)
    assert_one_line_error(
        result,
        "EXCHANGE_SITE_URL, EXCHANGE_TARGET: a one-target setting, refused beside "
        "EXCHANGE_CHANNELS",
    )


@pytest.mark.parametrize("command", [("demo", "--skus", "5")])
def test_the_demo_refuses_several_channels_naming_them(
    cli: Cli, tmp_path: Path, command: tuple[str, ...]
) -> None:
    args = (*command, "--dir", str(tmp_path / "demo")) if command[0] == "demo" else command
    result = cli(*args, env=two_channels(tmp_path))
    assert_one_line_error(
        result,
        "this version delivers to one channel; EXCHANGE_CHANNELS configures 2 (site, shop)",
    )
    assert not (tmp_path / "demo").exists(), "the demo did not start"


def test_the_several_channels_refusal_is_russian_under_a_russian_locale(
    cli: Cli, tmp_path: Path
) -> None:
    result = cli(
        "demo",
        "--skus",
        "5",
        "--dir",
        str(tmp_path / "demo"),
        env={"EXCHANGE_LANG": "ru", **two_channels(tmp_path)},
    )
    assert 2 == result.returncode, describe(result)
    assert [
        "ошибка: эта версия доставляет только в один канал, а в EXCHANGE_CHANNELS их 2 "
        "(site, shop): оставьте один"
    ] == result.stderr.splitlines()


def test_verify_among_several_channels_asks_which(cli: Cli, tmp_path: Path) -> None:
    result = cli("verify", env=two_channels(tmp_path))
    assert_one_line_error(result, "give --channel NAME: the channels are 'site', 'shop'")
    result = cli("verify", "--channel", "ozon", env=two_channels(tmp_path))
    assert_one_line_error(result, "no channel 'ozon': the channels are 'site', 'shop'")


def channels_file(tmp_path: Path) -> Path:
    """The two channels of ``two_channels`` written as the TOML file's ``[channels.NAME]``
    tables, as a shop owner following docs/channels.md writes them."""
    path = tmp_path / "exchange.toml"
    path.write_text(
        "[channels.site]\n"
        'target = "api"\n'
        'site_url = "https://shop.example.com"\n'
        f'site_token_file = "{token_file(tmp_path)}"\n'
        "[channels.shop]\n"
        'target = "woocommerce"\n'
        'woo_url = "https://second.example.com"\n'
        f'woo_key_file = "{token_file(tmp_path, "ck_" + "k" * 20)}"\n'
        f'woo_secret_file = "{token_file(tmp_path, "cs_" + "s" * 20)}"\n',
        encoding="utf-8",
    )
    return path


def test_verify_names_the_toml_tables_the_channels_were_written_in_not_exchange_channels(
    cli: Cli, tmp_path: Path
) -> None:
    path = channels_file(tmp_path)
    env = {"EXCHANGE_CONFIG": str(path), "EXCHANGE_SITE_TOKEN": None}
    result = cli("verify", env=env)
    line = assert_one_line_error(
        result,
        f"give --channel NAME: the channels are 'site', 'shop' (the [channels.NAME] "
        f"tables of {path})",
    )
    assert "EXCHANGE_CHANNELS" not in line
    result = cli("verify", "--channel", "ozon", env=env)
    assert_one_line_error(
        result,
        f"no channel 'ozon': the channels are 'site', 'shop' (the [channels.NAME] tables "
        f"of {path})",
    )


def test_verify_without_channel_among_several_says_it_in_russian(cli: Cli, tmp_path: Path) -> None:
    path = channels_file(tmp_path)
    env = {"EXCHANGE_CONFIG": str(path), "EXCHANGE_SITE_TOKEN": None, "EXCHANGE_LANG": "ru"}
    result = cli("verify", env=env)
    assert 2 == result.returncode, describe(result)
    assert [
        f"ошибка: укажите --channel ИМЯ: каналов несколько — 'site', 'shop' (таблицы "
        f"[channels.NAME] в {path})"
    ] == result.stderr.splitlines()
    result = cli(
        "verify", "--channel", "ozon", env={**two_channels(tmp_path), "EXCHANGE_LANG": "ru"}
    )
    assert [
        "ошибка: нет канала 'ozon': каналы — 'site', 'shop' (EXCHANGE_CHANNELS)"
    ] == result.stderr.splitlines()


# -- exchange check -------------------------------------------------------------------------------


def test_check_checks_each_channels_target_each_line_naming_the_channel(
    cli: Cli, db_url: str, site: SiteSimulator, tmp_path: Path
) -> None:
    env = channels(
        tmp_path,
        site={"target": "api", "site_url": site.url, "site_token_file": token_file(tmp_path)},
        tokenless={"target": "api", "site_url": site.url},
    )
    result = cli("check", db=db_url, env=env)

    assert 1 == result.returncode, describe(result)
    lines = result.stdout.splitlines()
    assert f"OK   channel site: site reachable and token accepted ({site.url}): HTTP 200" in lines
    assert (
        f"FAIL channel tokenless: site reachable and token accepted ({site.url}): token "
        "refused (HTTP 401): no token is set (site_token or site_token_file)"
    ) in lines, "the hint in the channel's words"
    assert not [line for line in lines if "FAIL" in line and "tokenless" not in line], describe(
        result
    )

    russian = cli("check", db=db_url, env={"EXCHANGE_LANG": "ru", **env})
    assert [line for line in russian.stdout.splitlines() if "канал site: " in line], describe(
        russian
    )


# -- run with one channel -------------------------------------------------------------------------


def test_run_configured_only_through_exchange_channels_delivers_to_that_channels_site(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    skus = [f"SKU-{n}" for n in range(5)]
    stage(engine, [price_row(sku, v, f"{v}0.00") for sku in skus for v in (1, 2)])
    with SiteSimulator(token=TOKEN, batch_enabled=True, keep_requests=True) as site:
        env = channels(
            tmp_path,
            site={
                "target": "api",
                "site_url": site.url,
                "site_token_file": token_file(tmp_path),
                "site_batch_size": 3,
                "takes": ["price"],
            },
        )
        result = cli(
            "run", "--until-idle", "--max-seconds", "60", db=db_url, env={**FAST_ENV, **env}
        )

        assert 0 == result.returncode, describe(result)
        assert 0 == untaken_rows(engine)
        # The test database was made with the default channel `api` registered: it keeps its
        # own deliveries (contract 13: every registered channel gets one), waiting for a
        # process that configures it; `run --until-idle` does not wait for it.
        assert {"delivered": 5, "cancelled": 5} == channel_state_counts(engine, "site")
        assert {"new": 5, "cancelled": 5} == channel_state_counts(engine, "api")  # coalesced
        # ... and says so (owner 31 item 4): exit 0 with «5 waiting» alone hid that no run
        # will ever take them
        warned = [line for line in result.stderr.splitlines() if "registered channel" in line]
        assert [
            "warning: 5 of them wait on a registered channel no configured channel serves "
            "(api): no run takes them (exchange status says what to do)"
        ] == warned, describe(result)
        assert {("price", sku): 2 for sku in skus} == site.held_versions()
        paths = {request.path for request in site.received() if request.method == "POST"}
        assert {"/api/v1/updates:batch"} == paths, "the channel's own site_batch_size was used"


def channel_state_counts(engine: Engine, name: str) -> dict[str, int]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(deliveries.c.state, func.count())
            .join(channels_table, channels_table.c.id == deliveries.c.channel_id)
            .where(channels_table.c.name == name)
            .group_by(deliveries.c.state)
        )
        return {state: count for state, count in rows}


def test_run_says_which_channels_token_file_cannot_be_read_as_check_does(
    cli: Cli, db_url: str, tmp_path: Path
) -> None:
    """Promise: a channel's unreadable site_token_file is named by its channel and its key in
    the channel (as ``check`` says it), never as the one target's EXCHANGE_SITE_TOKEN_FILE."""
    missing = str(tmp_path / "no-such-token")
    env = channels(
        tmp_path,
        x={"target": "api", "site_url": "https://shop.example.com", "site_token_file": missing},
    )
    result = cli("run", "--once", db=db_url, env=env)
    assert_one_line_error(result, "channel x: site_token_file cannot be read")
    assert "EXCHANGE_SITE_TOKEN_FILE" not in result.stderr, describe(result)
    checked = cli("check", db=db_url, env=env)
    line = [row for row in checked.stdout.splitlines() if "site_token_file" in row]
    assert line and line[0].count("channel x") == 1, describe(checked)


def test_the_channels_settings_errors_are_russian_under_a_russian_locale(
    cli: Cli, db_url: str, tmp_path: Path
) -> None:
    """Promise: each error of a channel's settings is said in Russian under a Russian locale
    (the names of settings and channels as they are), and in English with the right article."""
    ru = {"EXCHANGE_LANG": "ru"}
    bad_name = cli("config", env={**ru, **channels(tmp_path, Site={"target": "api"})})
    assert "канал 'Site': имя канала" in bad_name.stderr, describe(bad_name)
    beside = cli("run", "--once", env={**ru, **two_channels(tmp_path), "EXCHANGE_TARGET": "api"})
    assert "EXCHANGE_TARGET: настройка одной цели, не допускается рядом с EXCHANGE_CHANNELS" in (
        beside.stderr
    ), describe(beside)
    takes = cli(
        "config",
        env={
            **ru,
            **channels(
                tmp_path, s={"target": "api", "site_url": "https://a.example", "takes": ["stock"]}
            ),
        },
    )
    assert "takes: stock — не вид из EXCHANGE_KINDS" in takes.stderr, describe(takes)
    missing = str(tmp_path / "no-such-token")
    env = channels(
        tmp_path, x={"target": "api", "site_url": "https://a.example", "site_token_file": missing}
    )
    unreadable = cli("run", "--once", db=db_url, env={**ru, **env})
    assert "канал x: site_token_file не читается" in unreadable.stderr, describe(unreadable)
    english = cli("config", env=channels(tmp_path, s={"target": "api", "x": 1}))
    assert "x is not a setting of an api channel" in english.stderr, describe(english)
