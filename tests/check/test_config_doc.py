"""The configuration reference and ``exchange config``, in process: every key documented with
its variable, type, default and a description; secrets never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from exchange.config_doc import effective, env_name, key, markdown, mask_url_password
from exchange.settings import Settings, load_settings

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def table_rows() -> dict[str, list[str]]:
    rows = {}
    for line in markdown().splitlines():
        if line.startswith("| `EXCHANGE_"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            rows[cells[0].strip("`")] = cells
    return rows


def test_the_committed_reference_is_current() -> None:
    assert DOCS.read_text(encoding="utf-8") == markdown(), (
        "docs/configuration.md is out of date: run "
        "`exchange config --markdown > docs/configuration.md`"
    )


def test_every_setting_has_a_row_with_its_variable_and_toml_key() -> None:
    rows = table_rows()
    assert [env_name(name) for name in Settings.model_fields] == list(rows)
    for name in Settings.model_fields:
        assert f"`{key(name)}`" == rows[env_name(name)][1]
    assert "EXCHANGE_1C_PASSWORD" in rows  # the 1C settings keep the contract's names


@pytest.mark.parametrize("name", list(Settings.model_fields))
def test_every_setting_has_a_useful_description(name: str) -> None:
    description = Settings.model_fields[name].description or ""
    assert len(description.split()) >= 5, f"{name}: {description!r}"


def test_defaults_that_are_not_values_are_described() -> None:
    rows = table_rows()
    assert "host name and process id" == rows["EXCHANGE_WORKER_ID"][3]
    assert "none (unset)" == rows["EXCHANGE_SITE_TOKEN"][3]
    assert "none (unset)" == rows["EXCHANGE_SITE_URL"][3]
    assert "`sqlite:///exchange.db`" == rows["EXCHANGE_DATABASE_URL"][3]
    assert (
        '`{"price": "latest-wins", "financial_posting": "strict"}`' == (rows["EXCHANGE_KINDS"][3])
    )
    assert "secret string, optional" == rows["EXCHANGE_SITE_TOKEN"][2]
    assert "integer, ≥ 1, ≤ 100000" == rows["EXCHANGE_BATCH_SIZE"][2]


def test_the_effective_configuration_masks_the_token_and_passwords() -> None:
    # A site URL with user:password@ is refused at load (issue 12 item 4); a database password
    # may come in the userinfo or in the query (?password=, sslpassword=): both are masked.
    settings = load_settings(
        database_url="postgresql+psycopg://u:pw-1@h/db",
        staging_url="postgresql+psycopg://u@h/staging?password=pw-2&sslpassword=pw-3",
        site_url="https://shop.example.com:8443/base",
        site_token="tok-4",
        worker_id="w",
    )
    shown = dict(effective(settings))
    assert "***" == shown["EXCHANGE_SITE_TOKEN"]
    assert "postgresql+psycopg://u:***@h/db" == shown["EXCHANGE_DATABASE_URL"]
    assert (
        "postgresql+psycopg://u@h/staging?password=***&sslpassword=***"
        == shown["EXCHANGE_STAGING_URL"]
    )
    assert not any(
        secret in " ".join(shown.values()) for secret in ("pw-1", "pw-2", "pw-3", "tok-4")
    )


def test_the_broker_urls_are_shown_with_their_passwords_masked() -> None:
    """``exchange config`` and the demo's settings print the broker URLs (contract 12)."""
    settings = load_settings(
        worker_id="w",
        rabbitmq_url="amqp://exchange:rabbit-pw-5@rabbit.local:5672/erp",
        redis_url="redis://:redis-pw-6@redis.local:6379/0",
    )
    shown = dict(effective(settings))
    assert "amqp://exchange:***@rabbit.local:5672/erp" == shown["EXCHANGE_RABBITMQ_URL"]
    assert "redis://:***@redis.local:6379/0" == shown["EXCHANGE_REDIS_URL"]


def test_an_unset_token_is_shown_as_unset() -> None:
    assert "(unset)" == dict(effective(load_settings(worker_id="w")))["EXCHANGE_SITE_TOKEN"]


def test_a_site_url_without_a_password_is_shown_as_is() -> None:
    assert "https://shop.example.com" == mask_url_password("https://shop.example.com")
