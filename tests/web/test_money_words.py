"""A price as its readers write it (issue 34 item 9): CLDR's formats through Babel, never
rounded, and whatever a payload holds shown without a traceback."""

from __future__ import annotations

import pytest

from exchange.words import Lang, money

NBSP = "\xa0"


@pytest.mark.parametrize(
    ("price", "currency", "lang", "shown"),
    [
        ("1234.50", "RUB", "ru", f"1{NBSP}234,50{NBSP}₽"),
        ("1234.5", "RUB", "en", f"RUB{NBSP}1,234.50"),  # CLDR's spacing after a code
        ("7", "USD", "en", "$7.00"),  # a sign stays close
        ("0.001", "RUB", "ru", f"0,001{NBSP}₽"),  # never rounded: what goes to the shop
        ("-5.5", "USD", "ru", f"-5,50{NBSP}$"),
        ("10", None, "ru", "10"),
        ("10", "руб", "ru", f"10,00{NBSP}руб"),  # not an ISO code: said as it is
        ("abc", "RUB", "ru", "abc RUB"),  # not a number
        ("NaN", "RUB", "ru", "NaN RUB"),
        ("1e400", "RUB", "ru", "1e400 RUB"),  # never a million zeros
        ("1" * 29, "RUB", "ru", "1" * 29 + " RUB"),  # past a Decimal context's digits
        (None, "RUB", "ru", ""),
    ],
)
def test_a_price_is_shown_as_a_price(
    price: str | None, currency: str | None, lang: Lang, shown: str
) -> None:
    assert money(price, currency, lang) == shown
