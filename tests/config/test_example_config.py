"""config/exchange.example.toml documents every setting, and its values are the defaults."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest

from exchange.config_doc import key
from exchange.settings import Settings, load_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "exchange.example.toml"


def test_the_example_configuration_names_every_setting() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    documented = set(re.findall(r"^(?:# )?\[?([a-z0-9_]+)\]?(?: =|$)", text, flags=re.MULTILINE))
    assert set() == {key(name) for name in Settings.model_fields} - documented


def test_the_example_configuration_loads_and_holds_the_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in list(os.environ):
        if name.startswith("EXCHANGE_"):
            monkeypatch.delenv(name)
    keys = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    from_file, defaults = load_settings(EXAMPLE), Settings()
    assert {k: getattr(defaults, k) for k in keys} == {k: getattr(from_file, k) for k in keys}
