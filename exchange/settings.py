"""Configuration: environment variables ``EXCHANGE_*``, optionally a TOML file.

Built once by the CLI (``load_settings``) and passed down; nothing here runs at import time.
Precedence, highest first: explicit overrides (tests, the demo), environment, the TOML file,
the defaults below.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import ssl
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from exchange.domain.policy import Policy
from exchange.errors import ConfigurationError

DEFAULT_KINDS: dict[str, Policy] = {
    "price": Policy.LATEST_WINS,
    "financial_posting": Policy.STRICT,
}

SUPPORTED_DIALECTS = ("sqlite", "postgresql")


def _default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="EXCHANGE_",
        extra="forbid",
        validate_default=True,
        toml_file=None,
    )

    database_url: str = Field(
        "sqlite:///exchange.db",
        description="SQLAlchemy URL of the service's database (postgresql+psycopg://… for "
        "PostgreSQL).",
    )
    staging_url: str | None = Field(
        None,
        description="URL of the database that holds staging_intents, when it is not the "
        "service's own database.",
    )
    site_url: str | None = Field(
        None,
        description="Base URL of the site API, e.g. https://shop.example.com; required by run.",
    )
    site_token: SecretStr | None = Field(
        None,
        description="Bearer token sent to the site API (Authorization header). Never logged, "
        "exported or printed.",
    )
    site_token_file: Path | None = Field(
        None,
        description="A file holding the site token (container or systemd secrets), read at "
        "start; wins over site_token.",
    )
    site_ca_bundle: Path | None = Field(
        None,
        description="A PEM file of the certificate authorities trusted for the site's HTTPS "
        "certificate, instead of the default ones (a company CA); a file that cannot be read "
        "stops the service at start. Verification itself cannot be turned off.",
    )
    site_allow_http: bool = Field(
        False,
        description="Allow a plain http:// site_url to a host that is not loopback (127.0.0.0/8, "
        "::1, localhost); without it such a URL is refused at start: token and prices would "
        "cross the network unencrypted.",
    )
    worker_id: str = Field(
        default_factory=_default_worker_id,
        description="Name of this worker in leases, history and exchange status; must differ "
        "between workers that share a database.",
    )
    poll_interval: float = Field(
        5.0, gt=0, description="Seconds between cycles of run: how soon a new staging row is taken."
    )
    batch_size: int = Field(
        100,
        ge=1,
        le=100_000,
        description="Most messages one lease takes (and sends) in a cycle; intake is not bounded "
        "by it.",
    )
    concurrency: int = Field(
        8,
        ge=1,
        le=1000,
        description="Most site requests in flight at once per worker process; the number in "
        "flight adapts between 1 and this to the site's pace (contract 5c).",
    )
    site_max_rate: float | None = Field(
        None,
        gt=0,
        description="Requests per second to the site, a hard cap for all workers together "
        "(each live worker takes its share); unset: only the site's pace limits them.",
    )
    lease_seconds: float = Field(
        60.0,
        gt=0,
        description="Seconds a leased aggregate stays with its worker unless renewed (a live "
        "worker renews every third of it); then another worker may take it over.",
    )
    max_attempts: int = Field(
        5,
        ge=1,
        description="Delivery attempts on temporary failures before a message is quarantined "
        "with reason retry-limit.",
    )
    retry_base_delay: float = Field(
        1.0,
        gt=0,
        description="Seconds: the ceiling of the first retry's backoff (full jitter), doubling "
        "per attempt up to retry_max_delay; must not exceed it.",
    )
    retry_max_delay: float = Field(
        300.0,
        gt=0,
        description="Seconds: the longest wait before a retry, also the cap on Retry-After and on "
        "the circuit breaker's cool-down.",
    )
    http_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds one site request may take to connect, send or read before it counts "
        "as a temporary failure.",
    )
    gap_timeout: float = Field(
        600.0,
        gt=0,
        description="Seconds a strictly ordered message waits for a missing earlier version "
        "before it is quarantined with reason sequence-gap.",
    )
    breaker_threshold: int = Field(
        5,
        ge=1,
        description="Consecutive temporary failures on distinct aggregates that open the "
        "circuit breaker.",
    )
    site_batch_size: int = Field(
        1,
        ge=1,
        le=1000,
        description="Most messages per request to the batch API (POST /api/v1/updates:batch, "
        "contract 5b); 1 sends one request per message. A site that answers 404 there gets "
        "single requests.",
    )
    report_dir: Path | None = Field(
        None,
        description="Directory where run writes the operators' report on a schedule; unset: "
        "no scheduled report.",
    )
    report_cron: str = Field(
        "0 * * * *",
        description="When run writes the report: a crontab line (minute hour day month "
        "day-of-week), in UTC.",
    )
    report_formats: list[Literal["csv", "xlsx", "html", "json"]] = Field(
        ["html", "csv"],
        min_length=1,
        description="Formats of the scheduled report.",
    )
    report_keep: int = Field(
        10,
        ge=1,
        description="Timestamped scheduled reports kept per format; older ones are deleted.",
    )
    report_lang: Literal["ru", "en"] = Field(
        "ru",
        description="Language of the report's labels; also the default of quarantine export "
        "--lang.",
    )
    report_mask_fields: list[str] = Field(
        default_factory=list,
        description="Payload fields shown as *** in reports, at any depth (case-insensitive).",
    )

    @field_validator("report_cron")
    @classmethod
    def _report_cron(cls, value: str) -> str:
        # Checked here, so that a bad line stops `exchange run` at start, not at the first export.
        from apscheduler.triggers.cron import CronTrigger

        try:
            CronTrigger.from_crontab(value, timezone="UTC")
        except ValueError as exc:
            raise ValueError(
                f"{value!r} is not a crontab line (minute hour day month day-of-week, "
                f"e.g. '0 * * * *'): {exc}"
            ) from None
        return value

    @field_validator("report_formats", "report_mask_fields")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(item.strip() for item in value if item.strip()))

    kinds: dict[str, Policy] = Field(
        default_factory=lambda: dict(DEFAULT_KINDS),
        description="Message kinds and their policy: latest-wins (only the newest pending version "
        "is sent) or strict (every version, in order). A kind starting with financial must be "
        "strict; an unknown kind is quarantined as unknown-kind.",
    )
    bulk_limit: int = Field(
        500,
        ge=1,
        description="Most messages a bulk retry or cancel touches unless --limit N confirms more.",
    )
    retention_days: float = Field(
        30.0,
        gt=0,
        le=36_500,
        description="Days delivered and cancelled messages (with their history) and taken "
        "staging rows are kept before prune removes them.",
    )
    log_level: str = Field("INFO", description="Log level: DEBUG, INFO, WARNING, ERROR.")
    log_format: Literal["text", "json"] = Field(
        "text", description="Log lines: readable text, or json (one JSON object per line)."
    )
    metrics_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="Port of the Prometheus metrics (/metrics) and health (/healthz) server of "
        "run; unset: no server; 0: any free port (logged).",
    )
    metrics_host: str = Field(
        "0.0.0.0",
        description="Address the metrics server listens on; 127.0.0.1 keeps it on this host.",
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
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))

    @field_validator("database_url", "staging_url")
    @classmethod
    def _database_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            url = make_url(value)
        except ArgumentError:
            raise ValueError("not a database URL (e.g. sqlite:///exchange.db)") from None
        if url.get_backend_name() not in SUPPORTED_DIALECTS:
            raise ValueError(
                f"unsupported database {url.get_backend_name()!r}: use sqlite or postgresql"
            )
        return value

    @field_validator("site_url")
    @classmethod
    def _site_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    @field_validator("log_format", mode="before")
    @classmethod
    def _log_format(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        upper = value.upper()
        if upper not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("must be DEBUG, INFO, WARNING or ERROR")
        return upper

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, value: dict[str, Policy]) -> dict[str, Policy]:
        for kind, policy in value.items():
            if not kind or len(kind) > 64:
                raise ValueError(f"kind {kind!r} must be 1 to 64 characters")
            if kind.startswith("financial") and policy is not Policy.STRICT:
                raise ValueError(
                    f"kind {kind!r} is financial and can never be coalesced: use policy 'strict'"
                )
        return value

    @field_validator("site_ca_bundle")
    @classmethod
    def _site_ca_bundle(cls, value: Path | None) -> Path | None:
        if value is not None:
            tls_context(value)  # read now, so that a bad file stops the service at start
        return value

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

    # -- derived values -------------------------------------------------------------------

    def token(self) -> str | None:
        if self.site_token_file is not None:
            try:
                return self.site_token_file.read_text(encoding="utf-8").strip() or None
            except OSError as exc:
                raise ConfigurationError(
                    f"EXCHANGE_SITE_TOKEN_FILE cannot be read: {exc.strerror}"
                ) from None
        return self.site_token.get_secret_value() if self.site_token else None

    def site_tls(self) -> ssl.SSLContext | None:
        """The context that verifies the site's certificate against EXCHANGE_SITE_CA_BUNDLE;
        None: the default CAs. Either way the certificate is verified: there is no way off."""
        if self.site_ca_bundle is None:
            return None
        try:
            return tls_context(self.site_ca_bundle)
        except ValueError as exc:  # the file went away or changed since the start
            raise ConfigurationError(f"EXCHANGE_SITE_CA_BUNDLE: {exc}") from None

    def policy(self, kind: str) -> Policy | None:
        return self.kinds.get(kind)

    def kinds_with(self, policy: Policy) -> list[str]:
        return sorted(kind for kind, p in self.kinds.items() if p is policy)


def is_loopback(host: str | None) -> bool:
    """127.0.0.0/8, ::1 or localhost: a site on this machine, where plain http:// is safe."""
    if not host:
        return False
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tls_context(ca_bundle: Path) -> ssl.SSLContext:
    """A verifying TLS context that trusts the CAs in ``ca_bundle`` (PEM) and no others.

    Raises ValueError with one line when the file cannot be used.
    """
    if not ca_bundle.is_file():
        raise ValueError(f"CA bundle not found or not a file: {ca_bundle}")
    try:
        return ssl.create_default_context(cafile=str(ca_bundle))
    except OSError as exc:  # ssl.SSLError is an OSError too: not PEM, no certificate
        reason = exc.strerror or getattr(exc, "reason", None) or type(exc).__name__
        raise ValueError(f"CA bundle {ca_bundle} cannot be used: {reason}") from None


def safe_url(url: str) -> str:
    """A database URL fit for a log or an error message: the password masked."""
    try:
        parsed: URL = make_url(url)
    except ArgumentError:
        return "<invalid URL>"
    return parsed.render_as_string(hide_password=True)


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
        return cls(**overrides)
    except ValidationError as exc:
        raise ConfigurationError(describe_validation_error(exc)) from None
    except SettingsError as exc:  # a value that is not even parseable (EXCHANGE_KINDS=x)
        raise ConfigurationError(describe_settings_error(exc)) from None
    except ValueError as exc:  # a TOML file that does not parse
        raise ConfigurationError(f"configuration file {path}: {exc}") from None


def describe_settings_error(exc: Exception) -> str:
    text = str(exc)
    match = re.search(r'field "([a-z_]+)"', text)
    name = f"EXCHANGE_{match.group(1).upper()}" if match else "the configuration"
    return f"invalid configuration: {name}: cannot be read (expected JSON for tables/lists)"


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if not where:  # a rule across fields names its variables itself
            parts.append(message)
            continue
        name = f"EXCHANGE_{where.split('.')[0].upper()}"
        if "." in where:
            name += f" ({where.split('.', 1)[1]})"
        parts.append(f"{name}: {message}")
    return "invalid configuration: " + "; ".join(parts)
