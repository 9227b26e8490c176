"""Contract 14's settings shared by the marketplace channels: ``<x>_api_url`` (the production
host by default, loopback http allowed as for ``site_url``), ``currency``, ``sku_source``,
``rounding`` and the ``*_price_types`` mappings (null = not for this channel)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from exchange.errors import ConfigurationError
from exchange.settings import load_settings


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("EXCHANGE_"):
            monkeypatch.delenv(name)
    yield


def refusal(**overrides: Any) -> str:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(**overrides)
    message = str(caught.value)
    assert "\n" not in message, "one line"
    return message


def test_the_marketplaces_defaults_are_the_production_hosts_rub_and_retail() -> None:
    settings = load_settings()
    assert settings.ozon_api_url == "https://api-seller.ozon.ru"
    assert settings.wb_api_url == "https://discounts-prices-api.wildberries.ru"
    assert settings.ym_api_url == "https://api.partner.market.yandex.ru"
    assert (settings.currency, settings.sku_source, settings.rounding) == ("RUB", "sku", "none")
    assert settings.ozon_price_types == {"retail": "price"}
    assert settings.wb_price_types == {"retail": "price"}
    assert settings.ym_price_types == {"retail": "value"}


@pytest.mark.parametrize("name", ["ozon_api_url", "wb_api_url", "ym_api_url"])
def test_an_api_url_over_plain_http_is_taken_for_loopback_only(name: str) -> None:
    assert getattr(load_settings(**{name: "http://127.0.0.1:8090/"}), name) == (
        "http://127.0.0.1:8090"
    )
    assert "unencrypted" in refusal(**{name: "http://api.example.com"})


def test_a_price_type_mapped_to_false_in_toml_is_left_out_and_two_on_one_field_refused() -> None:
    settings = load_settings(ozon_price_types={"retail": "price", "purchase": False})
    assert settings.ozon_price_types == {"retail": "price", "purchase": None}
    said = refusal(ozon_price_types={"retail": "price", "sale": "price"})
    assert '"retail" and "sale" both set "price"' in said
    assert "old_price" in refusal(ozon_price_types={"retail": "discount"})


def test_the_currency_is_three_capital_letters_and_rounding_one_of_three_words() -> None:
    assert load_settings(currency="BYN").currency == "BYN"
    refusal(currency="rub")
    assert load_settings(rounding="half-up").rounding == "half-up"
    refusal(rounding="up")
    refusal(sku_source="barcode")


def test_a_marketplace_channel_takes_its_settings_and_prices_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    channels = {
        "ozon": {
            "target": "ozon",
            "ozon_api_url": "http://localhost:8090",
            "ozon_client_id": "836741",
            "ozon_api_key_file": "/run/secrets/ozon",
            "currency": "RUB",
            "sku_source": "article",
            "rounding": "down",
            "ozon_price_types": {"retail": "price", "old": "old_price"},
        },
        "wb": {
            "target": "wildberries",
            "wb_price_types": {"retail": "price"},
            "wb_token_file": "/run/secrets/wb",  # the wildberries target's own (issue 32 item 2)
        },
        "ym": {
            "target": "yandex-market",
            "ym_price_types": {"retail": "value"},
            # The yandex-market target's own (contract 14): its cabinet and its key's file.
            "ym_business_id": 1001,
            "ym_api_key_file": "/run/secrets/ym-api-key",
        },
    }
    monkeypatch.setenv("EXCHANGE_CHANNELS", json.dumps(channels))
    found = {c.name: c for c in load_settings().channels_in_force()}
    ozon = found["ozon"]
    assert ozon.takes == ("price",)
    assert (ozon.settings.ozon_api_url, ozon.settings.sku_source) == (
        "http://localhost:8090",
        "article",
    )
    assert ozon.settings.rounding == "down"
    assert found["wb"].settings.wb_price_types == {"retail": "price"}


def test_a_marketplace_channel_refuses_another_marketplaces_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    channels = {"wb": {"target": "wildberries", "ozon_price_types": {"retail": "price"}}}
    monkeypatch.setenv("EXCHANGE_CHANNELS", json.dumps(channels))
    assert "ozon_price_types is not a setting of a wildberries channel" in refusal()


def test_the_marketplaces_settings_are_refused_beside_channels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "EXCHANGE_CHANNELS",
        json.dumps({"site": {"target": "api", "site_url": "https://s.example.com"}}),
    )
    monkeypatch.setenv("EXCHANGE_SKU_SOURCE", "article")
    assert "EXCHANGE_SKU_SOURCE" in refusal()


def test_a_wildberries_channel_needs_its_token_file_and_takes_its_own_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    channels = {"wb": {"target": "wildberries"}}
    monkeypatch.setenv("EXCHANGE_CHANNELS", json.dumps(channels))
    assert "wb_token_file: required by the wildberries target" in refusal()

    channels = {"wb": {"target": "wildberries", "wb_token": "eyJ..."}}
    monkeypatch.setenv("EXCHANGE_CHANNELS", json.dumps(channels))
    assert "wb_token: a secret is written in a channel only as a file" in refusal()

    channels = {
        "wb": {
            "target": "wildberries",
            "wb_token_file": "/run/secrets/wb",
            "wb_catalogue_refresh": 60,
        }
    }
    monkeypatch.setenv("EXCHANGE_CHANNELS", json.dumps(channels))
    (wb,) = load_settings().channels_in_force()
    assert (wb.takes, wb.settings.wb_catalogue_refresh) == (("price",), 60.0)


def test_an_ozon_channel_needs_its_client_id_and_key_file_and_takes_no_key_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EXCHANGE_CHANNELS", json.dumps({"ozon": {"target": "ozon"}}))
    assert "ozon_client_id, ozon_api_key_file: required by the ozon target" in refusal()
    monkeypatch.setenv(
        "EXCHANGE_CHANNELS",
        json.dumps({"ozon": {"target": "ozon", "ozon_client_id": "1", "ozon_api_key": "k"}}),
    )
    assert "ozon_api_key: a secret is written in a channel only as a file" in refusal()


def test_an_ozon_client_id_above_a_64_bit_number_is_refused_naming_the_setting() -> None:
    """Ozon reads Client-Id as a positive int64 and answers a larger one with a 400 on every
    request (research §1.2, code 3; §1.3: erroneous requests may get the account restricted):
    refused at load, in one line naming the setting (review 32c)."""
    assert load_settings(ozon_client_id="9223372036854775807").ozon_client_id == (
        "9223372036854775807"
    )
    for wrong in ("9223372036854775808", "9" * 20, "9" * 5000):
        said = refusal(ozon_client_id=wrong)
        assert "ozon_client_id" in said.lower() and "9223372036854775807" in said, said
    assert "ozon_client_id" in refusal(ozon_client_id="0836741").lower()
    assert "ozon_client_id" in refusal(ozon_client_id="12a").lower()


@pytest.mark.parametrize(
    "mapping",
    [{"old": "discountBase"}, {"retail": False, "old": "discountBase"}, {"retail": False}],
)
def test_yandex_price_types_without_value_are_refused_at_start(mapping: dict[str, Any]) -> None:
    """Promise (contract 14, research §3.1: Yandex takes an offer's price only with its
    ``value``): ym_price_types mapping no price type to value is a one-line error at start
    (before: accepted, and every discount base ended invalid, every retail price unmapped)."""
    said = refusal(ym_price_types=mapping)
    assert "ym_price_types" in said.lower() and '"value"' in said, said
