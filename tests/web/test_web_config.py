"""WebConfig takes its defaults from Settings (issue 25 item 4): a WebConfig built without the
settings (as tests build it) means what unset variables mean, each value written once."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from exchange import app as bootstrap
from exchange.settings import Settings
from exchange.web.config import WebConfig

# The WebConfig fields that are settings; the others (kinds, folder, secrets) are read from the
# environment, or are the HTTP side's own (progress_wait, keep_seconds, login_delay, door).
FROM_SETTINGS = (
    "sku_mode",
    "file_limit",
    "max_file_bytes",
    "zip",
    "max_zip_ratio",
    "intake_max_items",
    "reader_processes",
    "report_lang",
    "display_tz",
    "live_within",
    "behind_proxy",
    "public_url",
)


@pytest.fixture
def unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("EXCHANGE_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("name", FROM_SETTINGS)
def test_a_webconfig_default_is_the_unset_settings_value(unset: None, name: str) -> None:
    from_settings = bootstrap.web_config(Settings())
    bare = WebConfig(kinds={}, exchange_dir=Path("unused"))
    assert getattr(from_settings, name) == getattr(bare, name)


def test_every_field_is_either_a_setting_or_named_as_the_http_sides_own() -> None:
    own = {
        "kinds",
        "exchange_dir",
        "onec_user",
        "onec_password",
        "intake_token",
        "secret_key",
        "price_types",
        "progress_wait",
        "keep_seconds",
        "bulk_limit",
        "report_mask_fields",
        "report_secrets",
        "login_delay",
        "login_delay_max",
        "door",
        "clock",
        "monotonic",
        "channels",  # EXCHANGE_CHANNELS's names, read from the channels in force
        "withheld_target",  # the channel's target, built when a person releases a price
    }
    fields = {field.name for field in dataclasses.fields(WebConfig)}
    assert fields == own | set(FROM_SETTINGS)


def test_the_bulk_limit_unset_is_the_settings_default_in_the_body_limit() -> None:
    bare = WebConfig(kinds={}, exchange_dir=Path("unused"))
    configured = WebConfig(
        kinds={},
        exchange_dir=Path("unused"),
        bulk_limit=Settings.model_fields["bulk_limit"].default,
    )
    assert configured.action_body_limit == bare.action_body_limit
