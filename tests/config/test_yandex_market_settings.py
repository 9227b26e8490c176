"""Contract 14's yandex-market settings: a channel of it takes its own keys, needs the cabinet
and the key's file, never the key itself; the defaults are Yandex's limits; the target is built
from them without the key ever in a detail."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from exchange import app
from exchange.errors import ConfigurationError
from exchange.settings import load_settings
from exchange.targets.yandex_market.target import YandexMarketTarget


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("EXCHANGE_"):
            monkeypatch.delenv(name)
    yield


def test_a_yandex_market_channel_takes_its_settings_and_prices_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    key = tmp_path / "ym-key"
    key.write_text("ym-secret-key-123\n", encoding="utf-8")
    channel = {
        "target": "yandex-market",
        "ym_business_id": 1001,
        "ym_api_key_file": str(key),
        "ym_offers_per_minute": 5000,
        "ym_parallel": 2,
        "ym_apply_timeout": 1.5,
    }
    monkeypatch.setenv("EXCHANGE_CHANNELS", json.dumps({"ym": channel}))
    (found,) = load_settings().channels_in_force()
    assert ("yandex-market", ("price",)) == (found.target, found.takes)
    s = found.settings
    assert (1001, 5000, 2, 1.5) == (
        s.ym_business_id,
        s.ym_offers_per_minute,
        s.ym_parallel,
        s.ym_apply_timeout,
    )
    assert "ym-secret-key-123" in s.secrets()
    built = app.target(s)
    assert isinstance(built, YandexMarketTarget)
    assert (2, 5000, 1.5) == (built.parallel.limit, built.budget.per_minute, built.apply_timeout)


def test_the_defaults_are_yandex_markets_limits() -> None:
    s = load_settings()
    assert (10_000, 4, 600.0) == (s.ym_offers_per_minute, s.ym_parallel, s.ym_apply_timeout)


def test_a_channel_needs_the_cabinet_and_the_keys_file_never_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EXCHANGE_CHANNELS", json.dumps({"ym": {"target": "yandex-market"}}))
    with pytest.raises(ConfigurationError, match="ym_business_id, ym_api_key_file: required"):
        load_settings()
    monkeypatch.setenv(
        "EXCHANGE_CHANNELS",
        json.dumps({"ym": {"target": "yandex-market", "ym_business_id": 1, "ym_api_key": "k"}}),
    )
    with pytest.raises(ConfigurationError, match="ym_api_key: a secret is written in a channel"):
        load_settings()


@pytest.mark.parametrize(
    ("name", "value"),
    [("ym_parallel", "0"), ("ym_offers_per_minute", "0"), ("ym_apply_timeout", "nan")],
)
def test_limits_out_of_bounds_are_refused_at_load(name: str, value: str) -> None:
    with pytest.raises(ConfigurationError, match=f"EXCHANGE_{name.upper()}"):
        load_settings(**{name: value})


def test_the_target_is_refused_without_its_key_saying_which_setting(tmp_path: Path) -> None:
    s = load_settings(target="yandex-market", ym_business_id="7")
    with pytest.raises(ConfigurationError, match="EXCHANGE_YM_API_KEY_FILE"):
        app.target(s)


def test_the_simulators_printed_channel_is_a_valid_yandex_market_channel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from exchange.dev.ymsim import YmSimulator, channel_settings

    key = tmp_path / "key"
    key.write_text("ym-key-12345", encoding="utf-8")
    sim = YmSimulator("ym-key-12345", 1001)
    sim.start()
    try:
        printed = channel_settings(sim, str(key))
    finally:
        sim.stop()
    monkeypatch.setenv("EXCHANGE_CHANNELS", json.dumps({"ym": printed}))
    (found,) = load_settings().channels_in_force()
    built = app.target(found.settings)
    assert isinstance(built, YandexMarketTarget) and built.url == sim.url
