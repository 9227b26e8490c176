"""A sibling of contract 15 "one (sku, price type), one aggregate": one shop field, one price type.

Promise: a mapping of price types to a shop's fields (``EXCHANGE_WOO_PRICE_FIELDS``,
``EXCHANGE_BITRIX_PRICE_TYPES``) that sends two price types to one field is refused at start, in
one line naming the setting and the price types: each price type has its own versions, so on a
shared field the older price of one would overwrite the newer of the other (TWO-1/retail v2 =
100.00, then TWO-1/base v1 = 50.00: the shop ended at 50.00). A price type mapped to null (left
out of this shop) sets no field and does not count.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import Cli, assert_one_line_error

from exchange.dev.dbkit import sqlite_copy
from exchange.errors import ConfigurationError
from exchange.settings import load_settings
from tests.config.test_settings import clean_environment, config_error  # noqa: F401

WOO_SHARED = '{"retail": "regular_price", "base": "regular_price"}'
BITRIX_SHARED = '{"retail": "Розничная", "base": "Розничная"}'


@pytest.mark.parametrize(
    ("variable", "mapping", "names"),
    [
        ("EXCHANGE_WOO_PRICE_FIELDS", WOO_SHARED, ('"base" and "retail"', "regular_price")),
        (
            "EXCHANGE_WOO_PRICE_FIELDS",
            '{"retail": "sale_price", "a": "regular_price", "sale": "sale_price"}',
            ('"retail" and "sale"', "sale_price"),
        ),
        ("EXCHANGE_BITRIX_PRICE_TYPES", BITRIX_SHARED, ('"base" and "retail"', "Розничная")),
        # The site finds a price type by its name in MySQL, whose collations ignore case and
        # trailing spaces: these are one price type there.
        (
            "EXCHANGE_BITRIX_PRICE_TYPES",
            '{"retail": "Розничная", "base": "розничная "}',
            ('"base" and "retail"',),
        ),
    ],
)
def test_two_price_types_on_one_field_are_refused_naming_the_setting_and_both(
    variable: str, mapping: str, names: tuple[str, ...]
) -> None:
    message = config_error(**{variable: mapping})
    assert 1 == len(message.splitlines()), message
    assert message.startswith(f"invalid configuration: {variable}: price types "), message
    for name in names:
        assert name in message, message


def test_the_same_mapping_in_the_file_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "exchange.toml"
    path.write_text(
        '[woo_price_fields]\nretail = "regular_price"\nbase = "regular_price"\n', encoding="utf-8"
    )
    with pytest.raises(ConfigurationError) as caught:
        load_settings(path)
    assert str(caught.value).startswith("invalid configuration: EXCHANGE_WOO_PRICE_FIELDS: ")
    assert '"base" and "retail"' in str(caught.value)


def test_price_types_left_out_of_the_shop_do_not_share_a_field(tmp_path: Path) -> None:
    path = tmp_path / "exchange.toml"
    path.write_text(
        '[woo_price_fields]\nretail = "regular_price"\nsale = "sale_price"\n'
        "wholesale = false\npurchase = false\n"
        '[bitrix_price_types]\nretail = "Розничная"\nbulk = "Оптовая"\n'
        "wholesale = false\npurchase = false\n",
        encoding="utf-8",
    )
    settings = load_settings(path)
    assert {
        "retail": "regular_price",
        "sale": "sale_price",
        "wholesale": None,
        "purchase": None,
    } == settings.woo_price_fields
    assert {"retail": "Розничная", "bulk": "Оптовая", "wholesale": None, "purchase": None} == (
        settings.bitrix_price_types
    )


@pytest.mark.parametrize(
    ("variable", "mapping", "target"),
    [
        ("EXCHANGE_WOO_PRICE_FIELDS", WOO_SHARED, "woocommerce"),
        ("EXCHANGE_BITRIX_PRICE_TYPES", BITRIX_SHARED, "bitrix"),
    ],
)
def test_the_service_refuses_to_start_exit_2_one_line_never_a_traceback(
    tmp_path: Path, variable: str, mapping: str, target: str
) -> None:
    shop = {
        "woocommerce": {
            "EXCHANGE_WOO_URL": "http://127.0.0.1:1",
            "EXCHANGE_WOO_KEY": "ck_demo_key",
            "EXCHANGE_WOO_SECRET": "cs_demo_secret",
        },
        "bitrix": {
            "EXCHANGE_BITRIX_URL": "http://127.0.0.1:1/bitrix/admin/1c_exchange.php",
            "EXCHANGE_BITRIX_USER": "exchange",
            "EXCHANGE_BITRIX_PASSWORD": "bitrix-pw-1",
        },
    }[target]
    result = Cli(tmp_path, process=True)(
        "run",
        "--once",
        db=sqlite_copy(tmp_path / "migrated.db"),
        env={"EXCHANGE_TARGET": target, variable: mapping, **shop},
    )
    assert_one_line_error(result, variable, '"base" and "retail"')
    assert "" == result.stdout
