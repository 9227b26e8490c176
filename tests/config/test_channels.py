"""Contract 13, issue 31 item 1: EXCHANGE_CHANNELS (a JSON object; ``[channels.NAME]`` in the
TOML file) read into a list of channels, each validated as the one-target settings are; without
it, one channel named after EXCHANGE_TARGET, configured as before."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange.errors import ConfigurationError
from exchange.settings import Settings, channel_words, load_settings, only_channel
from exchange.settings.channels import TARGET_KEYS

TOKEN = "channel-token-1234"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("EXCHANGE_"):
            monkeypatch.delenv(name)
    yield


def channels_env(monkeypatch: pytest.MonkeyPatch, channels: dict[str, Any]) -> None:
    monkeypatch.setenv("EXCHANGE_CHANNELS", json.dumps(channels))


def refusal(**overrides: Any) -> str:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(**overrides)
    message = str(caught.value)
    assert "\n" not in message, "one line"
    return message


# -- without EXCHANGE_CHANNELS: one channel, named after EXCHANGE_TARGET -------------------------


def test_without_channels_there_is_one_channel_named_api_built_from_todays_settings() -> None:
    settings = load_settings(site_url="https://shop.example.com")
    (channel,) = settings.channels_in_force()
    assert ("api", "api", False) == (channel.name, channel.target, channel.explicit)
    assert ("price", "financial_posting") == channel.takes
    assert channel.settings is settings, "the one-target settings themselves"
    assert only_channel(settings) is settings


def test_without_channels_the_one_channel_is_named_after_exchange_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EXCHANGE_TARGET", "woocommerce")
    (channel,) = load_settings().channels_in_force()
    assert ("woocommerce", "woocommerce", ("price",)) == (
        channel.name,
        channel.target,
        channel.takes,
    ), "named after the target, taking what the target takes"


# -- parsing both forms ---------------------------------------------------------------------------


def test_exchange_channels_json_gives_each_channel_its_target_takes_and_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token_file = tmp_path / "site-token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    monkeypatch.setenv("EXCHANGE_BATCH_SIZE", "50")
    monkeypatch.setenv("EXCHANGE_SITE_MAX_RATE", "20")  # a global delivery setting: kept
    channels_env(
        monkeypatch,
        {
            "site": {
                "target": "api",
                "site_url": "https://shop.example.com/",
                "site_token_file": str(token_file),
                "concurrency": 3,
            },
            "second-shop": {
                "target": "woocommerce",
                "woo_url": "https://second.example.com",
                "woo_key_file": str(tmp_path / "key"),
                "woo_secret_file": str(tmp_path / "secret"),
                "woo_price_fields": {"retail": "regular_price", "wholesale": None},
                "batch_size": 7,
                "retry_max_delay": 30,
            },
        },
    )
    settings = load_settings()
    site, second = settings.channels_in_force()

    assert ("site", "api", ("price", "financial_posting"), True) == (
        site.name,
        site.target,
        site.takes,
        site.explicit,
    ), "takes by default every kind of EXCHANGE_KINDS the target takes"
    assert "https://shop.example.com" == site.settings.site_url, "validated as EXCHANGE_SITE_URL"
    assert TOKEN == site.settings.token()
    assert (3, 50, 20.0) == (
        site.settings.concurrency,
        site.settings.batch_size,
        site.settings.site_max_rate,
    ), "its own concurrency over the global; the global batch size and rate where it sets none"

    assert ("second-shop", "woocommerce", ("price",)) == (
        second.name,
        second.target,
        second.takes,
    ), "woocommerce takes price messages only"
    assert {"retail": "regular_price", "wholesale": None} == second.settings.woo_price_fields
    assert (7, 30.0, 8) == (
        second.settings.batch_size,
        second.settings.retry_max_delay,
        second.settings.concurrency,
    )
    assert {"price"} == set(second.settings.kinds), "the channel's settings carry its kinds"
    assert TOKEN in settings.secrets(), "a channel's token file is a secret of the whole"


def test_channels_tables_in_the_toml_file_read_as_the_json_does(tmp_path: Path) -> None:
    path = tmp_path / "exchange.toml"
    path.write_text(
        """
[channels.site]
target = "api"
site_url = "https://shop.example.com"
takes = ["price"]

[channels.bitrix-shop]
target = "bitrix"
bitrix_url = "https://b.example.com/bitrix/admin/1c_exchange.php"
bitrix_user = "exchange"
bitrix_password_file = "/run/secrets/bitrix"
bitrix_catalog_id = "catalog-1"
http_timeout = 30

[channels.bitrix-shop.bitrix_price_types]
retail = "Розничная"
purchase = false
""",
        encoding="utf-8",
    )
    settings = load_settings(path)
    assert ["site", "bitrix-shop"] == [c.name for c in settings.channels_in_force()]
    site, bitrix = settings.channels_in_force()
    assert ("price",) == site.takes
    assert ("bitrix", 30.0) == (bitrix.target, bitrix.settings.http_timeout)
    assert {"retail": "Розничная", "purchase": None} == bitrix.settings.bitrix_price_types, (
        "false in TOML leaves a price type out, as for EXCHANGE_BITRIX_PRICE_TYPES"
    )


def test_exchange_channels_from_the_environment_replaces_the_files_channels_whole(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Promise (docs/settings.md: the environment wins over the file): EXCHANGE_CHANNELS in
    the environment replaces the file's [channels.*] whole, never merged with them."""
    path = tmp_path / "exchange.toml"
    path.write_text(
        """
[channels.site]
target = "api"
site_url = "https://shop.example.com"
site_token_file = "/nowhere/site-token"
takes = ["price"]
""",
        encoding="utf-8",
    )
    channels_env(monkeypatch, {"other": {"target": "api", "site_url": "https://o.example.com"}})
    assert ["other"] == [c.name for c in load_settings(path).channels_in_force()]
    channels_env(monkeypatch, {"site": {"target": "api", "site_url": "https://env.example.com"}})
    (site,) = load_settings(path).channels_in_force()
    assert "https://env.example.com" == site.settings.site_url
    assert ("price", "financial_posting") == site.takes, "not the file's takes"
    assert site.settings.site_token_file is None, "not the file's token file"


# -- a channel's settings are validated by the one-target validators -------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "ftp://shop.example.com",
        "https://user:secret@shop.example.com",
        "https://shop.example.com/?a=1",
        "http://shop.example.com",  # plain http:// off loopback: a rule across settings
    ],
)
def test_a_channels_site_url_is_refused_exactly_where_exchange_site_url_is(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    one_target = refusal(site_url=url)
    channels_env(monkeypatch, {"site": {"target": "api", "site_url": url}})
    message = refusal()
    assert message.startswith("invalid configuration: EXCHANGE_CHANNELS: channel site: site_url"), (
        message
    )
    # The same reason, in the channel's words (site_allow_http for EXCHANGE_SITE_ALLOW_HTTP).
    assert channel_words(one_target.split("EXCHANGE_SITE_URL", 1)[1]) in message
    assert "secret" not in message, "never the URL's password"


def test_a_channel_may_allow_plain_http_as_exchange_site_allow_http_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    channels_env(
        monkeypatch,
        {"site": {"target": "api", "site_url": "http://shop.lan", "site_allow_http": True}},
    )
    assert "http://shop.lan" == load_settings().channels_in_force()[0].settings.site_url


@pytest.mark.parametrize(
    ("channel", "fragments"),
    [
        ({"target": "api", "site_url": "https://a.example", "batch_size": 0}, ["batch_size"]),
        (
            {"target": "api", "site_url": "https://a.example", "retry_base_delay": 600},
            ["retry_base_delay must not exceed retry_max_delay"],
        ),
        (
            {"target": "api", "site_url": "https://a.example", "site_ca_bundle": "/no/such.pem"},
            ["site_ca_bundle", "/no/such.pem"],
        ),
        (
            {
                "target": "woocommerce",
                "woo_url": "https://w.example",
                "woo_key_file": "/k",
                "woo_secret_file": "/s",
                "woo_price_fields": {"retail": "regular_price", "sale": "regular_price"},
            },
            ["woo_price_fields", "both set"],
        ),
        ({"site_url": "https://a.example"}, ["target is required", "api, bitrix"]),
        ({"target": "shopify"}, ["target is 'shopify'"]),
        ({"target": "api", "site_url": "https://a.example", "colour": "red"}, ["colour"]),
        (
            {"target": "api", "site_url": "https://a.example", "woo_url": "https://w.example"},
            ["woo_url is not a setting of an api channel"],
        ),
        (
            {"target": "api", "site_url": "https://a.example", "site_token": TOKEN},
            ["site_token", "site_token_file"],
        ),
        ({"target": "api"}, ["site_url: required by the api target"]),
        (
            {"target": "woocommerce", "woo_url": "https://w.example"},
            ["woo_key_file, woo_secret_file: required by the woocommerce target"],
        ),
        (
            {"target": "api", "site_url": "https://a.example", "takes": ["stock"]},
            ["takes: stock is not a kind of EXCHANGE_KINDS"],
        ),
        (
            {
                "target": "woocommerce",
                "woo_url": "https://w.example",
                "woo_key_file": "/k",
                "woo_secret_file": "/s",
                "takes": ["financial_posting"],
            },
            ["takes: the woocommerce target takes price messages only, not financial_posting"],
        ),
        ({"target": "api", "site_url": "https://a.example", "takes": "price"}, ["takes"]),
        (
            {
                "target": "yandex-market",
                "ym_business_id": 1001,
                "ym_api_key_file": "/k",
                "ym_price_types": {"old": "discountBase"},
            },
            ["ym_price_types", 'maps no price type to "value"'],
        ),
    ],
)
def test_a_bad_channel_setting_is_one_line_naming_the_channel_and_the_setting(
    monkeypatch: pytest.MonkeyPatch, channel: dict[str, Any], fragments: list[str]
) -> None:
    channels_env(monkeypatch, {"good": {"target": "api", "site_url": "https://g.example"}})
    channels_env(
        monkeypatch, {"good": {"target": "api", "site_url": "https://g.example"}, "bad": channel}
    )
    message = refusal()
    assert message.startswith("invalid configuration: EXCHANGE_CHANNELS: channel bad: "), message
    for fragment in fragments:
        assert fragment in message, message
    assert TOKEN not in message


@pytest.mark.parametrize("name", ["Site", "site_1", "", "a" * 33, "сайт", "a b"])
def test_a_channel_name_is_1_to_32_characters_of_a_z_0_9_and_hyphen(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    channels_env(monkeypatch, {name: {"target": "api", "site_url": "https://a.example"}})
    message = refusal()
    assert f"EXCHANGE_CHANNELS: channel {name!r}: a channel's name is 1-32 characters" in message


def test_a_32_character_name_is_a_channel(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "a-0" + "b" * 29
    channels_env(monkeypatch, {name: {"target": "api", "site_url": "https://a.example"}})
    assert [name] == [c.name for c in load_settings().channels_in_force()]


def test_exchange_channels_naming_no_channel_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    channels_env(monkeypatch, {})
    assert "EXCHANGE_CHANNELS names no channel" in refusal()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("EXCHANGE_TARGET", "api"),
        ("EXCHANGE_TARGET", "rabbitmq"),  # before its own rule (it needs an exchange)
        ("EXCHANGE_TARGET", "woocommerce"),  # before its own rule (price only)
        ("EXCHANGE_SITE_URL", "https://shop.example.com"),
        ("EXCHANGE_SITE_TOKEN", TOKEN),
        ("EXCHANGE_SITE_ALLOW_HTTP", "true"),
        ("EXCHANGE_WOO_URL", "https://w.example"),
        ("EXCHANGE_WOO_PRICE_FIELDS", '{"retail": "regular_price"}'),
        ("EXCHANGE_BITRIX_USER", "exchange"),
        ("EXCHANGE_RABBITMQ_EXCHANGE", "prices"),
    ],
)
def test_a_one_target_setting_beside_exchange_channels_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    channels_env(monkeypatch, {"site": {"target": "api", "site_url": "https://a.example"}})
    message = refusal()
    assert message.startswith(f"invalid configuration: {variable}: a one-target setting, "), message
    assert "refused beside EXCHANGE_CHANNELS" in message
    assert TOKEN not in message


def test_the_global_delivery_settings_stay_beside_exchange_channels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable, value in (
        ("EXCHANGE_SITE_BATCH_SIZE", "10"),
        ("EXCHANGE_SITE_MAX_RATE", "5"),
        ("EXCHANGE_HTTP_TIMEOUT", "3"),
    ):
        monkeypatch.setenv(variable, value)
    channels_env(monkeypatch, {"site": {"target": "api", "site_url": "https://a.example"}})
    used = load_settings().channels_in_force()[0].settings
    assert (10, 5.0, 3.0) == (used.site_batch_size, used.site_max_rate, used.http_timeout)


# -- run, serve and demo: one channel in this version ---------------------------------------------


def test_with_one_channel_the_service_takes_that_channels_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    channels_env(
        monkeypatch,
        {"shop": {"target": "woocommerce", "woo_url": "https://w.example", **_woo_files()}},
    )
    used = only_channel(load_settings())
    assert isinstance(used, Settings)
    assert ("woocommerce", "https://w.example", {"price"}) == (
        used.target,
        used.woo_url,
        set(used.kinds),
    )


def test_with_several_channels_the_service_refuses_in_one_line_naming_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    channels_env(
        monkeypatch,
        {
            "site": {"target": "api", "site_url": "https://a.example"},
            "shop": {"target": "woocommerce", "woo_url": "https://w.example", **_woo_files()},
        },
    )
    with pytest.raises(ConfigurationError) as caught:
        only_channel(load_settings())
    assert (
        "this version delivers to one channel; EXCHANGE_CHANNELS configures 2 (site, shop): "
        "keep one"
    ) == str(caught.value)


def _woo_files() -> dict[str, str]:
    return {"woo_key_file": "/run/secrets/k", "woo_secret_file": "/run/secrets/s"}


def test_exchange_channels_that_is_not_json_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCHANGE_CHANNELS", "site=api")
    assert refusal().startswith("invalid configuration: EXCHANGE_CHANNELS: ")


def test_a_channel_that_is_not_a_table_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EXCHANGE_CHANNELS", '{"site": "api"}')
    assert refusal().startswith("invalid configuration: EXCHANGE_CHANNELS (site): ")


def test_the_settings_page_names_every_channel_target_and_its_keys() -> None:
    """Issue 31 item 7: docs/settings.md#channels lists each target a channel may have
    (the marketplaces too) and each of its target's own settings, and says what ``demo``
    does with several channels (``demo --channels``)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "settings.md").read_text()
    section = page.split("## Channels", 1)[1]
    missing = [
        f"{target}: {key}"
        for target, keys in TARGET_KEYS.items()
        for key in (target, *keys)
        if f"`{key}`" not in section
    ]
    assert missing == []
    assert "`demo --channels`" in section
