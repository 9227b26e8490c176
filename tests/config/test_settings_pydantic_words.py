"""pydantic's own validation errors of the settings, said in Russian (words item 7): each
common error type as pydantic words it now (a model of those constraints validated, never a
copied message), through ``settings.load.describe_validation_error`` and
``words.settings_words`` (the catalogue's Russian): the variable named, no English left."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from exchange.settings.load import describe_validation_error
from exchange.words import settings_words


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lease_seconds: float = Field(1.0, gt=0)  # greater_than
    max_attempts: int = Field(1, ge=1)  # greater_than_equal, int_parsing
    batch_size: int = Field(1, le=1000)  # less_than_equal
    price_step: Decimal = Decimal(1)  # decimal_parsing
    site_allow_http: bool = False  # bool_parsing
    target: Literal["api", "ozon"] = "api"  # literal_error
    site_url: str  # missing
    site_token: str = Field("", min_length=8)  # string_too_short
    currency: str = Field("RUB", pattern=r"^[A-Z]{3}$")  # string_pattern_mismatch


BASE = {"site_url": "https://x.example"}


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"lease_seconds": 0}, "EXCHANGE_LEASE_SECONDS: должно быть больше 0"),
        ({"max_attempts": 0}, "EXCHANGE_MAX_ATTEMPTS: должно быть не меньше 1"),
        ({"batch_size": 5000}, "EXCHANGE_BATCH_SIZE: должно быть не больше 1000"),
        ({"max_attempts": "many"}, "EXCHANGE_MAX_ATTEMPTS: должно быть целым числом"),
        ({"price_step": "x"}, "EXCHANGE_PRICE_STEP: должно быть десятичным числом"),
        ({"site_allow_http": "maybe"}, "EXCHANGE_SITE_ALLOW_HTTP: должно быть true или false"),
        ({"target": "pigeon"}, "EXCHANGE_TARGET: допустимые значения: 'api' или 'ozon'"),
        ({"site_url": None, "bogus": 1}, "EXCHANGE_BOGUS: неизвестная настройка"),
        ({"site_token": "short"}, "EXCHANGE_SITE_TOKEN: должно быть не короче 8 символов"),
        ({"currency": "R"}, "EXCHANGE_CURRENCY: не соответствует образцу '^[A-Z]{3}$'"),
    ],
)
def test_each_common_pydantic_error_is_said_in_russian_naming_the_setting(
    values: dict[str, object], said: str
) -> None:
    given = {**BASE, **values}
    given = {key: value for key, value in given.items() if value is not None}
    with pytest.raises(ValidationError) as caught:
        _Settings(**given)  # type: ignore[arg-type]
    line = settings_words(
        describe_validation_error(caught.value).removeprefix("invalid configuration: "), "ru"
    )
    assert said in line, line
    left = re.sub(r"EXCHANGE_\w+|'[^']*'|\b(true|false)\b", "", line)
    assert not re.search(r"[A-Za-z]{3,}", left), line


def test_a_missing_setting_is_said_in_russian() -> None:
    with pytest.raises(ValidationError) as caught:
        _Settings()  # type: ignore[call-arg]
    line = settings_words(
        describe_validation_error(caught.value).removeprefix("invalid configuration: "), "ru"
    )
    assert line.startswith("EXCHANGE_SITE_URL: ") and "Field" not in line, line
