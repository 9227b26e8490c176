"""Configuration: environment variables ``EXCHANGE_*``, optionally a TOML file.

Built once by the CLI (``load_settings``) and passed down; nothing here runs at import time.
Precedence, highest first: explicit overrides (tests, the demo), environment, the TOML file,
the defaults below.

The fields are grouped by what they configure, one module each (``database``, ``site``,
``delivery``, ``targets``, ``report``, ``operations``, ``serve``, ``brokers``, ``notify``,
``channels``), put
together with the rules across groups in ``model.Settings``; ``load`` builds them; ``rules``
holds the bounds and checks they share. Every public name stays importable from here.
"""

from __future__ import annotations

from exchange.domain.policy import DEFAULT_KINDS
from exchange.secrets import (
    BOM,
    SECRET_MASK,
    clean_token,
    mask_secrets,
    read_secret_file,
    safe_url,
    secret_file_text,
    secret_forms,
    url_secrets,
)
from exchange.settings.channels import Channel, channel_words, only_channel
from exchange.settings.load import (
    describe_settings_error,
    describe_validation_error,
    given_settings,
    load_settings,
    onec_folder,
)
from exchange.settings.model import MIN_SECRET_LENGTH, Settings
from exchange.settings.operations import host_zone
from exchange.settings.rules import (
    MAX_ATTEMPTS,
    MAX_SECONDS,
    MAX_SECONDS_TEXT,
    SUPPORTED_DIALECTS,
    WORKER_ID_MAX,
    is_loopback,
    tls_context,
    worker_live_within,
)

__all__ = [
    "BOM",
    "DEFAULT_KINDS",
    "MAX_ATTEMPTS",
    "MAX_SECONDS",
    "MAX_SECONDS_TEXT",
    "MIN_SECRET_LENGTH",
    "SECRET_MASK",
    "SUPPORTED_DIALECTS",
    "WORKER_ID_MAX",
    "Channel",
    "Settings",
    "channel_words",
    "clean_token",
    "describe_settings_error",
    "describe_validation_error",
    "given_settings",
    "host_zone",
    "is_loopback",
    "load_settings",
    "mask_secrets",
    "onec_folder",
    "only_channel",
    "read_secret_file",
    "safe_url",
    "secret_file_text",
    "secret_forms",
    "tls_context",
    "url_secrets",
    "worker_live_within",
]
