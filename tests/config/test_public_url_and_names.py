"""Issue 34 item 11: EXCHANGE_PUBLIC_URL (contract 15; EXCHANGE_WORKBENCH_URL is its old name,
still read), and errors that name the variable a person really sets (EXCHANGE_1C_PRICE_TYPES,
never EXCHANGE_ONEC_PRICE_TYPES or EXCHANGE_EXCHANGE_1C_SKU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exchange.errors import ConfigurationError
from exchange.settings import load_settings

# No EXCHANGE_* of the caller's, in a folder of the test's own (autouse, as in test_settings).
from tests.config.test_settings import clean_environment  # noqa: F401


def error_of(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    return str(caught.value)


def test_the_public_url_is_read_with_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCHANGE_PUBLIC_URL", "https://exchange.shop.ru:8443/prices/")
    assert "https://exchange.shop.ru:8443/prices" == load_settings().public_url


def test_the_old_name_exchange_workbench_url_is_still_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EXCHANGE_WORKBENCH_URL", "https://exchange.shop.ru")
    assert "https://exchange.shop.ru" == load_settings().public_url
    monkeypatch.setenv("EXCHANGE_PUBLIC_URL", "https://new.shop.ru")
    assert "https://new.shop.ru" == load_settings().public_url, "the new name wins"


def test_the_old_toml_key_workbench_url_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "exchange.toml"
    path.write_text('workbench_url = "https://exchange.shop.ru"\n', encoding="utf-8")
    assert "https://exchange.shop.ru" == load_settings(path).public_url


@pytest.mark.parametrize(
    "value", ["exchange.shop.ru", "ftp://exchange.shop.ru", "https://exchange.shop.ru/?a=1"]
)
def test_a_public_url_that_is_not_an_address_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    message = error_of(monkeypatch, EXCHANGE_PUBLIC_URL=value)
    assert message.startswith("invalid configuration: EXCHANGE_PUBLIC_URL: "), message


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("EXCHANGE_1C_PRICE_TYPES", "{not json"),
        ("EXCHANGE_1C_SKU", "barcode"),
        ("EXCHANGE_1C_FILE_LIMIT", "-1"),
        ("EXCHANGE_1C_READER_PROCESSES", "99"),
    ],
)
def test_an_error_in_a_1c_setting_names_the_variable_that_was_set(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    message = error_of(monkeypatch, **{variable: value})
    assert message.startswith(f"invalid configuration: {variable}: "), message
    assert "ONEC" not in message and "EXCHANGE_EXCHANGE" not in message


def test_an_error_in_the_1c_settings_file_names_the_variable_too(tmp_path: Path) -> None:
    path = tmp_path / "exchange.toml"
    path.write_text('1c_sku = "barcode"\n', encoding="utf-8")
    with pytest.raises(ConfigurationError) as caught:
        load_settings(path)
    assert str(caught.value).startswith("invalid configuration: EXCHANGE_1C_SKU: ")
