"""Channels (contract 13): the places that receive messages, each a target with its own
settings. ``EXCHANGE_CHANNELS`` (a JSON object; ``[channels.NAME]`` tables in the TOML file)
names them; without it there is one channel, named after ``EXCHANGE_TARGET``, configured by the
one-target settings as before.

A channel's settings are the one-target settings written without ``EXCHANGE_`` in lower case.
Each channel is validated as a whole ``Settings`` (the global settings with the channel's over
them), so a channel's ``site_url`` is refused exactly where ``EXCHANGE_SITE_URL`` would be:
this module only decides which keys a channel may hold and says what is wrong in its words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args

from pydantic import BaseModel, Field, ValidationError

from exchange.errors import ConfigurationError
from exchange.settings.rules import _variable
from exchange.settings.targets import TargetSettings, kinds_taken

if TYPE_CHECKING:
    from exchange.settings.model import Settings

# What every marketplace channel may set (contract 14).
MARKETPLACE_KEYS = ("currency", "sku_source", "rounding")

NAME = re.compile(r"[a-z0-9-]{1,32}")
# How the words name channels written as tables of the TOML file (``Settings.channels_source``):
# this, then the file's path.
CHANNEL_TABLES_OF = "the [channels.NAME] tables of "
TARGETS: tuple[str, ...] = get_args(TargetSettings.model_fields["target"].annotation)

# What a channel of each target may set of its target's own settings, and which of them it must.
TARGET_KEYS: dict[str, tuple[str, ...]] = {
    "api": ("site_url", "site_token_file", "site_allow_http"),
    "woocommerce": ("woo_url", "woo_key_file", "woo_secret_file", "woo_auth", "woo_price_fields"),
    "bitrix": (
        "bitrix_url",
        "bitrix_user",
        "bitrix_password_file",
        "bitrix_catalog_id",
        "bitrix_price_types",
        "bitrix_max_import_steps",
    ),
    "rabbitmq": ("rabbitmq_exchange",),
    # Contract 14: each marketplace's own address and mapping, and what the three share; each
    # target's credentials and limits beside them.
    "ozon": (
        "ozon_api_url",
        "ozon_client_id",
        "ozon_api_key_file",
        "ozon_price_types",
        *MARKETPLACE_KEYS,
        "pair_settle",
    ),
    "wildberries": (
        "wb_token_file",
        "wb_catalogue_refresh",
        "wb_api_url",
        "wb_price_types",
        *MARKETPLACE_KEYS,
    ),
    "yandex-market": (
        "ym_api_url",
        "ym_price_types",
        *MARKETPLACE_KEYS,
        "ym_business_id",
        "ym_api_key_file",
        "ym_offers_per_minute",
        "ym_parallel",
        "ym_apply_timeout",
        "pair_settle",
    ),
}
REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    "api": ("site_url",),
    "woocommerce": ("woo_url", "woo_key_file", "woo_secret_file"),
    "bitrix": ("bitrix_url", "bitrix_user", "bitrix_password_file", "bitrix_catalog_id"),
    "rabbitmq": ("rabbitmq_exchange",),
    "ozon": ("ozon_client_id", "ozon_api_key_file"),
    "wildberries": ("wb_token_file",),
    "yandex-market": ("ym_business_id", "ym_api_key_file"),
}
# A channel's own delivery settings, over the global ones (EXCHANGE_BATCH_SIZE, …).
DELIVERY_KEYS = (
    "batch_size",
    "site_batch_size",
    "concurrency",
    "site_max_rate",
    "site_ca_bundle",
    "http_timeout",
    "max_attempts",
    "retry_base_delay",
    "retry_max_delay",
    "breaker_threshold",
)
# Secrets are written in a channel only as files: EXCHANGE_CHANNELS is shown and copied whole.
SECRET_KEYS = (
    "site_token",
    "woo_key",
    "woo_secret",
    "bitrix_password",
    "ozon_api_key",
    "ym_api_key",
    "wb_token",
)


def one_target_setting(name: str) -> bool:
    """A setting of the one target, refused beside EXCHANGE_CHANNELS (it belongs in a channel).
    The delivery settings a channel may override (site_batch_size, site_max_rate,
    site_ca_bundle) stay global defaults."""
    return name in ("target", "rabbitmq_exchange", *MARKETPLACE_KEYS, *SECRET_KEYS) or (
        name.startswith(("site_", "woo_", "bitrix_", "ozon_", "wb_", "ym_"))
        and name not in DELIVERY_KEYS
    )


class ChannelSettings(BaseModel):
    """EXCHANGE_CHANNELS."""

    channels: dict[str, dict[str, Any]] | None = Field(
        None,
        description="Channels (contract 13): the places that receive messages, each a table "
        'NAME -> its settings, e.g. {"site": {"target": "api", "site_url": '
        '"https://shop.example.com", "site_token_file": "/run/secrets/site"}, "second": '
        '{"target": "woocommerce", "woo_url": "https://second.example.com", "woo_key_file": '
        '"…", "woo_secret_file": "…"}} ([channels.site] tables in TOML). NAME: 1-32 '
        "characters of a-z, 0-9 and -. Each names its target, optionally takes (the kinds it "
        "receives, default every kind of kinds its target takes), the target's settings "
        "written without EXCHANGE_ in lower case (secrets only as *_file), and, where it needs "
        "others than the global ones, batch_size, site_batch_size, concurrency, site_max_rate, "
        "site_ca_bundle, http_timeout, max_attempts, retry_base_delay, retry_max_delay, "
        "breaker_threshold. Set, target and the targets' own site_*, woo_*, bitrix_* and "
        "rabbitmq_exchange settings are refused. Unset: one channel named after target, "
        "configured by those settings.",
    )


@dataclass(frozen=True)
class Channel:
    """One place that receives messages: its name, target, the kinds it takes, and the whole
    settings its delivery uses (the global ones with the channel's over them)."""

    name: str
    target: str
    takes: tuple[str, ...]
    settings: Settings = field(repr=False)
    # False: the one channel of a configuration without EXCHANGE_CHANNELS (named after
    # EXCHANGE_TARGET, its settings the one-target ones).
    explicit: bool = True

    def setting_names(self) -> tuple[str, ...]:
        """The channel's own settings, as EXCHANGE_CHANNELS writes them (for ``config``)."""
        return (*TARGET_KEYS[self.target], *DELIVERY_KEYS)


def implicit_channel(settings: Settings) -> Channel:
    """Without EXCHANGE_CHANNELS: one channel named after EXCHANGE_TARGET, configured as today."""
    return Channel(settings.target, settings.target, tuple(settings.kinds), settings, False)


def refuse_one_target(settings: Settings) -> None:
    """With EXCHANGE_CHANNELS set, the one target's settings are refused (ValueError, one line
    naming them): each belongs in a channel. Before the rules across settings, so that one of
    them (EXCHANGE_TARGET=rabbitmq without its exchange) is refused for being there at all."""
    if settings.channels is None:
        return
    refused = sorted(
        name
        for name in settings.model_fields_set
        if one_target_setting(name) and getattr(settings, name) not in (None, "")
    )
    if refused:
        variables = ", ".join(_variable(name) for name in refused)
        raise ValueError(
            f"{variables}: a one-target setting, refused beside EXCHANGE_CHANNELS: write it in "
            "the channel it belongs to, without EXCHANGE_ in lower case (e.g. site_url)"
        )


def build_channels(
    settings: Settings, validate: Callable[[dict[str, Any]], Settings]
) -> list[Channel]:
    """The channels of EXCHANGE_CHANNELS; ValueError with one line naming the channel and the
    setting. ``validate`` builds a whole ``Settings`` from keyword values, reading nothing else
    (no environment, no file): the same model, the same validators."""
    given = settings.channels or {}
    if not given:
        raise ValueError(
            "EXCHANGE_CHANNELS names no channel: name at least one, or unset it for the one "
            "target of EXCHANGE_TARGET"
        )
    refuse_one_target(settings)
    base = {
        name: getattr(settings, name)
        for name in settings.model_fields_set
        if name not in ("channels", "kinds") and not one_target_setting(name)
    }
    return [_channel(name, values, settings, base, validate) for name, values in given.items()]


def _channel(
    name: str,
    values: Mapping[str, Any],
    settings: Settings,
    base: dict[str, Any],
    validate: Callable[[dict[str, Any]], Settings],
) -> Channel:
    if not NAME.fullmatch(name):
        raise ValueError(
            f"EXCHANGE_CHANNELS: channel {name!r}: a channel's name is 1-32 characters of "
            "a-z, 0-9 and -"
        )
    where = f"EXCHANGE_CHANNELS: channel {name}"
    target = values.get("target")
    if target not in TARGETS:
        said = "is required" if target is None else f"is {target!r}"
        raise ValueError(f"{where}: target {said}: one of {', '.join(TARGETS)}")
    allowed = ("target", "takes", *TARGET_KEYS[target], *DELIVERY_KEYS)
    for key in values:
        if key in SECRET_KEYS:
            raise ValueError(
                f"{where}: {key}: a secret is written in a channel only as a file: set "
                f"{key}_file to the file that holds it"
            )
        if key not in allowed:
            raise ValueError(
                f"{where}: {key} is not a setting of {article(target)} {target} channel; it takes "
                f"{', '.join(allowed)}"
            )
    missing = [key for key in REQUIRED_KEYS[target] if values.get(key) in (None, "")]
    if missing:
        raise ValueError(f"{where}: {', '.join(missing)}: required by the {target} target")
    takes = _takes(where, target, values.get("takes"), list(settings.kinds))
    kinds = {kind: settings.kinds[kind] for kind in takes}
    own = {key: value for key, value in values.items() if key != "takes"}
    try:
        built = validate({**base, **own, "kinds": kinds})
    except ValidationError as exc:
        raise ValueError(f"{where}: {_described(exc)}") from None
    built._channel_name = name  # its errors met later name it (Settings.said)
    return Channel(name, target, tuple(takes), built)


def article(word: str) -> str:
    """English's article before ``word`` ("an api channel", "a bitrix channel")."""
    return "an" if word[:1] in "aeiou" else "a"


def _takes(where: str, target: str, takes: Any, configured: list[str]) -> list[str]:
    if takes is None:
        taken = kinds_taken(target, configured)
        if not taken:
            raise ValueError(
                f"{where}: takes: the {target} target takes none of the kinds of "
                f"EXCHANGE_KINDS ({', '.join(configured)})"
            )
        return taken
    if not isinstance(takes, list) or not all(isinstance(kind, str) for kind in takes) or not takes:
        raise ValueError(f'{where}: takes: a list of kinds, e.g. ["price"]')
    unknown = [kind for kind in takes if kind not in configured]
    if unknown:
        raise ValueError(
            f"{where}: takes: {', '.join(unknown)} is not a kind of EXCHANGE_KINDS "
            f"({', '.join(configured)})"
        )
    refused = [kind for kind in takes if kind not in kinds_taken(target, takes)]
    if refused:
        raise ValueError(
            f"{where}: takes: the {target} target takes price messages only, not "
            f"{', '.join(refused)}"
        )
    return list(dict.fromkeys(takes))


def _described(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        message = channel_words(error["msg"].removeprefix("Value error, "))
        if error["loc"]:
            key = str(error["loc"][0])
            inner = ".".join(str(p) for p in error["loc"][1:])
            parts.append(f"{key}{f' ({inner})' if inner else ''}: {message}")
        else:  # a rule across settings names them itself
            parts.append(message)
    return "; ".join(parts)


_VARIABLE = re.compile(r"EXCHANGE_([A-Z0-9_]+)")
_CHANNEL_KEYS = {*SECRET_KEYS, *(k for keys in TARGET_KEYS.values() for k in keys), *DELIVERY_KEYS}


def channel_words(text: str) -> str:
    """A text of the one-target settings (an error, a check's detail) as a channel says it:
    each variable a channel sets (``EXCHANGE_SITE_URL``) by its key in the channel
    (``site_url``); the global ones (``EXCHANGE_RABBITMQ_URL``) as they are."""

    def key(found: re.Match[str]) -> str:
        name = found.group(1).lower()
        plain = name.removesuffix("_file")
        return name if name in _CHANNEL_KEYS or plain in _CHANNEL_KEYS else found.group(0)

    return _VARIABLE.sub(key, text)


def only_channel(settings: Settings) -> Settings:
    """The settings ``run``, ``serve`` and ``demo`` deliver with: this version delivers to one
    channel (a later one fans out). With one, its settings (the global ones with the
    channel's over them), which the worker takes as it took the one-target settings."""
    found = settings.channels_in_force()
    if len(found) > 1:
        names = ", ".join(channel.name for channel in found)
        raise ConfigurationError(
            f"this version delivers to one channel; EXCHANGE_CHANNELS configures {len(found)} "
            f"({names}): keep one"
        )
    return found[0].settings
