"""Settings: the groups of fields put together, with the validation across groups and the values
derived from the whole.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import AliasChoices, PrivateAttr, SecretStr, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from exchange.domain.policy import KindPolicies, Policy
from exchange.errors import ConfigurationError
from exchange.secrets import (
    clean_token,
    http_url_secrets,
    read_secret_file,
    secret_file_text,
    url_secrets,
)
from exchange.settings.brokers import BrokerSettings
from exchange.settings.channels import (
    CHANNEL_TABLES_OF,
    Channel,
    ChannelSettings,
    build_channels,
    channel_words,
    implicit_channel,
    refuse_one_target,
)
from exchange.settings.database import DatabaseSettings
from exchange.settings.delivery import DeliverySettings
from exchange.settings.marketplaces import MarketplaceSettings
from exchange.settings.notify import NotifySettings
from exchange.settings.operations import OperationsSettings
from exchange.settings.report import ReportSettings
from exchange.settings.rules import _variable, is_loopback, tls_context, worker_live_within
from exchange.settings.serve import ServeSettings
from exchange.settings.site import SiteSettings
from exchange.settings.targets import PRICE_ONLY_TARGETS, TargetSettings, kinds_taken

# -- secrets -----------------------------------------------------------------------------------
#
# The mechanism every output uses lives in exchange.secrets; ``Settings.secrets()`` below names
# the values.

# The service's own secrets are chosen by whoever sets the service up: one shorter than this is
# refused at start (it is guessed, and as a word it would stand in ordinary text). The shop
# issues its own credentials and the site its token: those are only warned about.
MIN_SECRET_LENGTH = 8
_REFUSED_SHORT = ("onec_password", "intake_token", "http_secret_key")
_WARNED_SHORT = ("woo_key", "woo_secret", "bitrix_password", "ym_api_key")


class Settings(
    BaseSettings,
    ChannelSettings,
    NotifySettings,
    BrokerSettings,
    ServeSettings,
    OperationsSettings,
    ReportSettings,
    MarketplaceSettings,
    TargetSettings,
    DeliverySettings,
    SiteSettings,
    DatabaseSettings,
):
    # The whole configuration: the groups' fields (pydantic takes the last base's first: the
    # order of the reference, docs/configuration.md), the rules across them (after each group's
    # own, in this order), and the values derived from them. No docstring: it would enter the
    # JSON schema.

    model_config = SettingsConfigDict(
        env_prefix="EXCHANGE_",
        extra="forbid",
        validate_default=True,
        toml_file=None,
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            _TomlWithoutBom(settings_cls, above=(init_settings, env_settings)),
        )

    # EXCHANGE_CHANNELS's channels, validated at start (empty without it).
    _channels: list[Channel] = PrivateAttr(default_factory=list)
    # The channel these settings are of (EXCHANGE_CHANNELS's), for the errors met while
    # delivering with them; None for the one-target settings.
    _channel_name: str | None = PrivateAttr(default=None)
    # The TOML file whose ``[channels.NAME]`` tables gave the channels (``load_settings``
    # knows), or None: then EXCHANGE_CHANNELS gave them, or there are none.
    _channels_file: Path | None = PrivateAttr(default=None)

    # -- rules across the groups ----------------------------------------------------------

    @model_validator(mode="after")
    def _one_target_or_channels(self) -> Settings:
        refuse_one_target(self)  # first: the rules below are the one target's
        return self

    @model_validator(mode="after")
    def _brokers(self) -> Settings:
        missing: list[str] = []
        if self.source == "rabbitmq":
            missing += [
                v
                for v, x in (
                    ("EXCHANGE_RABBITMQ_URL", self.rabbitmq_url),
                    ("EXCHANGE_RABBITMQ_QUEUE", self.rabbitmq_queue),
                )
                if not x
            ]
        if self.source == "redis":
            missing += [
                v
                for v, x in (
                    ("EXCHANGE_REDIS_URL", self.redis_url),
                    ("EXCHANGE_REDIS_STREAM", self.redis_stream),
                )
                if not x
            ]
        if missing:
            raise ValueError(f"EXCHANGE_SOURCE={self.source} needs {', '.join(missing)}")
        if self.target == "rabbitmq":
            missing = [
                v
                for v, x in (
                    ("EXCHANGE_RABBITMQ_URL", self.rabbitmq_url),
                    ("EXCHANGE_RABBITMQ_EXCHANGE", self.rabbitmq_exchange),
                )
                if x is None or (v == "EXCHANGE_RABBITMQ_URL" and not x)
            ]
            if missing:
                raise ValueError(f"EXCHANGE_TARGET=rabbitmq needs {', '.join(missing)}")
        return self

    @model_validator(mode="after")
    def _notify_ways(self) -> Settings:
        if self.notify_telegram_api_url is None:
            self.notify_telegram_api_url = "https://api.telegram.org"
        api = urlsplit(self.notify_telegram_api_url)
        if api.scheme == "http" and not is_loopback(api.hostname):
            raise ValueError(
                "EXCHANGE_NOTIFY_TELEGRAM_API_URL: plain http:// would send the bot's token "
                "unencrypted; use https:// (http:// only for 127.0.0.0/8, ::1 and localhost)"
            )
        if self.notify_smtp_host is not None:
            missing = [
                name
                for name, value in (
                    ("EXCHANGE_NOTIFY_SMTP_FROM", self.notify_smtp_from),
                    ("EXCHANGE_NOTIFY_SMTP_TO", self.notify_smtp_to),
                )
                if not value
            ]
            if missing:
                raise ValueError(f"EXCHANGE_NOTIFY_SMTP_HOST is set: set {' and '.join(missing)}")
            has_password = (
                self.notify_smtp_password is not None or self.notify_smtp_password_file is not None
            )
            if (
                self.notify_smtp_security == "none"
                and has_password
                and not is_loopback(self.notify_smtp_host)
            ):
                raise ValueError(
                    f"EXCHANGE_NOTIFY_SMTP_SECURITY=none to {self.notify_smtp_host} would send "
                    "the SMTP password unencrypted; use starttls or tls"
                )
        telegram = self.notify_telegram_token is not None or (
            self.notify_telegram_token_file is not None
        )
        if telegram and not self.notify_telegram_chat_id:
            raise ValueError(
                "EXCHANGE_NOTIFY_TELEGRAM_TOKEN is set: set EXCHANGE_NOTIFY_TELEGRAM_CHAT_ID "
                "(the chat the bot writes to)"
            )
        return self

    @model_validator(mode="after")
    def _token_file(self) -> Settings:
        # Read now, so that a token that cannot work stops every command at start; a file that
        # is absent or unreadable is reported by `check` and `run` (token()).
        if self.site_token_file is None:
            return self
        try:
            data = self.site_token_file.read_bytes()
        except OSError:
            return self
        source = "EXCHANGE_SITE_TOKEN_FILE"
        clean_token(secret_file_text(data, source), source)  # ValueError: refused
        return self

    @model_validator(mode="after")
    def _secret_lengths(self) -> Settings:
        # Read now (the _file twins too): a weak secret of the service's own stops every command
        # at start, naming the setting, never the value. A file that cannot be read is reported
        # where it is used. The shop's short ones are only warned about (short_secrets).
        for name in _REFUSED_SHORT:
            if self._short(name):
                variable = _variable(name, from_file=getattr(self, f"{name}_file") is not None)
                raise ValueError(
                    f"{variable} is shorter than {MIN_SECRET_LENGTH} characters: choose a "
                    "longer one"
                )
        return self

    def short_secrets(self) -> list[str]:
        """The variables of the shop's credentials (and the site's token) shorter than
        MIN_SECRET_LENGTH: the command line warns about them at start, in the person's
        language (a message for the person who set them up, as a configuration error is;
        never the value)."""
        return [
            _variable(name, from_file=getattr(self, f"{name}_file") is not None)
            for name in (*_WARNED_SHORT, "site_token")
            if self._short(name)
        ]

    def _short(self, name: str) -> bool:
        try:
            value = self.token() if name == "site_token" else self.secret(name)
        except ConfigurationError:
            return False
        return value is not None and len(value) < MIN_SECRET_LENGTH

    @model_validator(mode="after")
    def _target_kinds(self) -> Settings:
        # Contract 10: bitrix and woocommerce take price messages only. Unset, the kinds are
        # {"price": latest-wins} for them; set, any other kind is refused at start.
        if self.target not in PRICE_ONLY_TARGETS:  # every kind (contract 12 for rabbitmq)
            return self
        if "kinds" not in self.model_fields_set:
            self.kinds = {"price": Policy.LATEST_WINS}
            return self
        others = sorted(set(self.kinds) - set(kinds_taken(self.target, self.kinds)))
        if others:
            raise ValueError(
                f"EXCHANGE_KINDS: the {self.target} target takes price messages only, not "
                f"{', '.join(others)}"
            )
        return self

    @model_validator(mode="after")
    def _delays(self) -> Settings:
        if self.retry_base_delay > self.retry_max_delay:
            raise ValueError("EXCHANGE_RETRY_BASE_DELAY must not exceed EXCHANGE_RETRY_MAX_DELAY")
        return self

    @model_validator(mode="after")
    def _plain_http(self) -> Settings:
        if not self.site_url or not self.site_url.startswith("http://") or self.site_allow_http:
            return self
        host = urlsplit(self.site_url).hostname
        if not is_loopback(host):
            raise ValueError(
                f"EXCHANGE_SITE_URL: plain http:// to {host or 'an empty host'} would send "
                "the token unencrypted; use https://, or set EXCHANGE_SITE_ALLOW_HTTP=true "
                "(http:// is accepted without it only for 127.0.0.0/8, ::1 and localhost)"
            )
        return self

    @model_validator(mode="after")
    def _channels_valid(self) -> Settings:
        # Last: a channel is the settings validated so far with the channel's over them.
        if self.channels is not None:
            self._channels = build_channels(self, _validated)
        return self

    # -- derived values -------------------------------------------------------------------

    def channels_in_force(self) -> list[Channel]:
        """The channels (contract 13): EXCHANGE_CHANNELS's, or without it the one named after
        EXCHANGE_TARGET, configured by these settings. Every caller asks here."""
        return list(self._channels) if self.channels is not None else [implicit_channel(self)]

    def channels_source(self) -> str:
        """Where the channels in force were written, as the operator wrote them: the TOML
        file's ``[channels.NAME]`` tables, EXCHANGE_CHANNELS, or, without either, EXCHANGE_TARGET
        (the one channel named after it). The words that send the operator back to the list
        name the place they used (``words.channels_source_words`` says it in Russian)."""
        if self.channels is None:
            return "EXCHANGE_TARGET"
        if self._channels_file is not None:
            return f"{CHANNEL_TABLES_OF}{self._channels_file}"
        return "EXCHANGE_CHANNELS"

    def channel_name(self) -> str:
        """The channel these settings configure: its name in EXCHANGE_CHANNELS, else the
        target's (the one channel's, ``implicit_channel``)."""
        return self._channel_name or self.target

    def said(self, problem: str) -> str:
        """A problem of these settings as the operator wrote them: a channel's (of
        EXCHANGE_CHANNELS) named by the channel, each setting by its key in the channel."""
        if self._channel_name is None:
            return problem
        return f"channel {self._channel_name}: {channel_words(problem)}"

    def token(self) -> str | None:
        """The site token: from EXCHANGE_SITE_TOKEN_FILE (read now, so that a replaced file is
        seen) or EXCHANGE_SITE_TOKEN. ConfigurationError (never holding the token) when the file
        cannot be read or holds no usable token; ValueError is never raised."""
        if self.site_token_file is not None:
            source = "EXCHANGE_SITE_TOKEN_FILE"
            try:
                return clean_token(read_secret_file(self.site_token_file, source), source)
            except (ValueError, ConfigurationError) as exc:
                raise ConfigurationError(self.said(str(exc))) from None
        return self.site_token.get_secret_value() if self.site_token else None

    def secrets(self) -> list[str]:
        """Every value that must never be shown: the site token (as set and as read from its
        file) and the database passwords (userinfo and query parameters). Masked by value in
        every output, in any quoting (``secret_forms``)."""
        found: list[str] = []
        if self.site_token is not None:
            found.append(self.site_token.get_secret_value())
        if self.site_token_file is not None:
            with contextlib.suppress(ConfigurationError):
                found.append(self.token() or "")
        for url in (self.database_url, self.staging_url):
            found += url_secrets(url)
        for url in (self.site_url, self.woo_url, self.bitrix_url):  # wc1c's lazysign among them
            found += http_url_secrets(url)
        found += self.broker_secrets()
        for channel in self._channels:  # EXCHANGE_CHANNELS's: their files and URLs
            found += channel.settings.secrets()
        for name in (
            "onec_password",  # exchange serve's
            "intake_token",
            "http_secret_key",
            "woo_key",  # the targets'
            "woo_secret",
            "bitrix_password",
            "wb_token",
            "ozon_api_key",
            "ym_api_key",
            "notify_smtp_password",  # the operators' notifications'
            "notify_telegram_token",
        ):
            with contextlib.suppress(ConfigurationError):
                found.append(self.secret(name) or "")
        return [secret for secret in dict.fromkeys(found) if secret]

    def secret(self, name: str) -> str | None:
        """A secret setting (``onec_password``, ``intake_token``, ``http_secret_key``): its
        ``_file`` twin wins; empty means unset. Raises ConfigurationError naming the file's
        variable when it cannot be read, never showing a value."""
        path = getattr(self, f"{name}_file")
        if path is not None:
            try:
                return path.read_text(encoding="utf-8").strip() or None
            except OSError as exc:
                variable = _variable(name, from_file=True)
                said = f"{variable} cannot be read: {exc.strerror}"
                raise ConfigurationError(self.said(said)) from None
        value: SecretStr | None = getattr(self, name)
        return value.get_secret_value() or None if value is not None else None

    def http_plain_refusal(self) -> str | None:
        """Why serve must not listen with these settings (contract 9), or None."""
        if (self.http_tls_cert is None) != (self.http_tls_key is None):
            return "EXCHANGE_HTTP_TLS_CERT and EXCHANGE_HTTP_TLS_KEY must be set together"
        try:  # the name the server will bind: one that does not resolve is refused here
            socket.getaddrinfo(self.http_host, self.http_port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            reason = getattr(exc, "strerror", None) or type(exc).__name__
            return (
                f"EXCHANGE_HTTP_HOST={self.http_host} cannot be resolved ({reason}): write an "
                "address (127.0.0.1, ::1, 0.0.0.0) or a host name this machine resolves"
            )
        if self.http_tls_cert is not None or self.http_behind_proxy:
            return None
        if is_loopback(self.http_host):
            return None
        return (
            f"EXCHANGE_HTTP_HOST={self.http_host} is not loopback: plain HTTP would carry the "
            "1C password and the intake token unencrypted; set EXCHANGE_HTTP_TLS_CERT and "
            "EXCHANGE_HTTP_TLS_KEY, or EXCHANGE_HTTP_BEHIND_PROXY=true when a proxy "
            "terminates TLS"
        )

    def site_tls(self) -> ssl.SSLContext | None:
        """The context that verifies the site's certificate against EXCHANGE_SITE_CA_BUNDLE;
        None: the default CAs. Either way the certificate is verified: there is no way off."""
        if self.site_ca_bundle is None:
            return None
        try:
            return tls_context(self.site_ca_bundle)
        except ValueError as exc:  # the file went away or changed since the start
            raise ConfigurationError(f"EXCHANGE_SITE_CA_BUNDLE: {exc}") from None

    @property
    def live_within(self) -> float:
        """A worker is live while its last report is younger than this many seconds (contract
        6): a live worker reports at least every poll and renews its lease every third of it,
        so a longer silence is a worker gone, never one between cycles."""
        return worker_live_within(self.lease_seconds, self.poll_interval)

    @property
    def policies(self) -> KindPolicies:
        """The configured kinds and their policies, as the queue takes them."""
        return KindPolicies.of(self.kinds)


class _Given(Settings):
    """Settings from keyword values alone (no environment, no file): a channel's."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def _validated(values: dict[str, Any]) -> Settings:
    """A whole ``Settings`` of these values (field names), validated by the one model."""
    keyed = {}
    for name, value in values.items():
        alias = Settings.model_fields[name].validation_alias
        keyed[str(alias.choices[-1]) if isinstance(alias, AliasChoices) else name] = value
    return _Given(**keyed)


class _TomlWithoutBom(TomlConfigSettingsSource):
    """The TOML file, read as UTF-8 with a byte order mark dropped: Notepad on Windows writes
    one, and tomllib refuses it ("Invalid statement at line 1, column 1").

    Where a source above it (the environment, the arguments) gives EXCHANGE_CHANNELS, the
    file's ``[channels.*]`` are left out whole: the environment wins over the file, and a
    channel is one thing, never half the file's and half the environment's."""

    def __init__(
        self, settings_cls: type[BaseSettings], above: tuple[PydanticBaseSettingsSource, ...] = ()
    ) -> None:
        super().__init__(settings_cls)
        self._above = above

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        if "channels" in data and any("channels" in source() for source in self._above):
            return {name: value for name, value in data.items() if name != "channels"}
        return data

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        with file_path.open(mode="rb") as toml_file:
            data = toml_file.read()
        return tomllib.loads(data.decode("utf-8-sig"))
