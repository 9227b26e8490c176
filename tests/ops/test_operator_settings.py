"""The operators' settings: EXCHANGE_BULK_LIMIT and EXCHANGE_RETENTION_DAYS, their defaults and
their bounds (a bad value is one clear line at start, never a surprise later)."""

from __future__ import annotations

import pytest

from exchange.errors import ConfigurationError
from exchange.settings import load_settings


def test_the_bulk_limit_is_500_and_retention_30_days_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("EXCHANGE_BULK_LIMIT", raising=False)
    monkeypatch.delenv("EXCHANGE_RETENTION_DAYS", raising=False)
    settings = load_settings()
    assert (500, 30.0) == (settings.bulk_limit, settings.retention_days)


def test_both_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCHANGE_BULK_LIMIT", "2000")
    monkeypatch.setenv("EXCHANGE_RETENTION_DAYS", "0.5")
    settings = load_settings()
    assert (2000, 0.5) == (settings.bulk_limit, settings.retention_days)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("bulk_limit", 0),
        ("retention_days", 0),
        ("retention_days", -1),
        ("retention_days", 1e9),  # beyond any date: a typo, not a policy
    ],
)
def test_a_value_out_of_bounds_is_refused_naming_the_variable(name: str, value: float) -> None:
    with pytest.raises(ConfigurationError, match=f"EXCHANGE_{name.upper()}"):
        load_settings(**{name: value})
