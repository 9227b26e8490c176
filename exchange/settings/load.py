"""Building the settings once (the CLI's ``load_settings``), one line for what is wrong, and
the values that need the environment besides the settings (the 1C folder).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsConfigDict, SettingsError
from sqlalchemy.engine import make_url

from exchange.errors import ConfigurationError
from exchange.settings.model import Settings, _validated
from exchange.settings.rules import _variable


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings, or raise ConfigurationError with one line naming what is wrong."""
    path = config_file or (
        Path(os.environ["EXCHANGE_CONFIG"]) if os.environ.get("EXCHANGE_CONFIG") else None
    )
    if path is not None and not path.is_file():
        raise ConfigurationError(f"configuration file not found: {path}")
    cls: type[Settings] = Settings
    if path is not None:
        cls = type(
            "FileSettings",
            (Settings,),
            {"model_config": SettingsConfigDict(**{**Settings.model_config, "toml_file": path})},
        )
    try:
        settings = cls(**overrides)
    except ValidationError as exc:
        raise ConfigurationError(describe_validation_error(exc)) from None
    except SettingsError as exc:  # a value that is not even parseable (EXCHANGE_KINDS=x)
        raise ConfigurationError(describe_settings_error(exc)) from None
    except ValueError as exc:  # a TOML file that does not parse
        raise ConfigurationError(f"configuration file {path}: {exc}") from None
    if path is not None and settings.channels is not None and not _channels_given_above(overrides):
        settings._channels_file = path  # the file's [channels.NAME] tables: the words name it
    return settings


def _channels_given_above(overrides: Mapping[str, Any]) -> bool:
    """Whether a source above the TOML file gave the channels (an argument, the environment's
    EXCHANGE_CHANNELS, its name in any case as the settings read it): then the file's
    ``[channels.*]`` are left out whole (``model._TomlWithoutBom``)."""
    return "channels" in overrides or any(
        name.upper() == "EXCHANGE_CHANNELS" for name in os.environ
    )


def given_settings(**values: Any) -> Settings:
    """The settings of these values alone (field names), reading neither the environment nor
    a file: a demo's own channels, whatever the shell's EXCHANGE_* say (beside its own
    EXCHANGE_CHANNELS, the shell's EXCHANGE_SITE_TOKEN would be refused as a one-target
    setting). ConfigurationError with one line, as ``load_settings``."""
    try:
        return _validated(values)
    except ValidationError as exc:
        raise ConfigurationError(describe_validation_error(exc)) from None


def describe_settings_error(exc: Exception) -> str:
    text = str(exc)
    match = re.search(r'field "([a-z_]+)"', text)
    name = _variable(match.group(1)) if match else "the configuration"
    return f"invalid configuration: {name}: cannot be read (expected JSON for tables/lists)"


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if not where:  # a rule across fields names its variables itself
            parts.append(message)
            continue
        name = _variable(where.split(".")[0])
        if "." in where:
            name += f" ({where.split('.', 1)[1]})"
        parts.append(f"{name}: {message}")
    return "invalid configuration: " + "; ".join(parts)


def onec_folder(settings: Settings, environ: Mapping[str, str] = os.environ) -> Path:
    """The 1C exchange's folder: ``EXCHANGE_1C_DIR``; when it names none, never a predictable
    name in the shared temporary folder (another user could make it first and read or replace
    the uploads): under systemd, ``$STATE_DIRECTORY/1c`` (``StateDirectory=`` in the unit); else
    beside a SQLite database (``exchange.db`` -> ``exchange-1c``); else the user's cache folder
    (``$XDG_CACHE_HOME`` or ``~/.cache``, ``%LOCALAPPDATA%`` on Windows) ``/exchange/1c``."""
    if settings.onec_dir is not None:
        return settings.onec_dir
    state = environ.get("STATE_DIRECTORY", "").split(":")[0]  # systemd lists several with ":"
    if state:
        return Path(state) / "1c"
    url = make_url(settings.database_url)
    database = url.database or ""
    if url.get_backend_name() == "sqlite" and database and database != ":memory:":
        path = Path(database.removeprefix("file:").partition("?")[0])
        if path.name:
            return path.parent / f"{path.stem}-1c"
    if sys.platform == "win32" and environ.get("LOCALAPPDATA"):
        cache = Path(environ["LOCALAPPDATA"])
    else:
        cache = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "exchange" / "1c"
