"""Notifications to the operators (issue 16 item 6): off unless e-mail or Telegram is set."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, BaseModel, Field, SecretStr, field_validator

from exchange.errors import ConfigurationError
from exchange.settings.rules import MAX_SECONDS, _distinct_text, _finite_seconds, tls_context


class NotifySettings(BaseModel):
    """EXCHANGE_NOTIFY_* and EXCHANGE_PUBLIC_URL (the address notifications link to)."""

    # -- notifications to the operators (issue 16 item 6): off unless e-mail or Telegram is set
    notify_every: float = Field(
        3600.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds: at most one notification to the operators per this period, for "
        "all workers and serve processes sharing the database together. A new quarantine entry "
        "or a stop of delivery is told at once when nothing was told in the last period, "
        "else when the period ends.",
    )
    notify_stalled_after: float = Field(
        900.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds: delivery counts as stopped when work has waited this long and no "
        "worker has reported for this long (seen by exchange serve and exchange notify --once, "
        "not by a worker, which is itself alive).",
    )
    notify_smtp_host: str | None = Field(
        None,
        description="E-mail notifications: the SMTP server; unset: no e-mail. Needs "
        "notify_smtp_from and notify_smtp_to.",
    )
    notify_smtp_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="SMTP port; unset: 587 for starttls, 465 for tls, 25 for none.",
    )
    notify_smtp_security: Literal["starttls", "tls", "none"] = Field(
        "starttls",
        description="starttls (plain connection upgraded with STARTTLS, required), tls (TLS "
        "from the first byte, port 465) or none (plain, refused with a password unless the "
        "server is on loopback). The server's certificate is always verified.",
    )
    notify_smtp_ca_bundle: Path | None = Field(
        None,
        description="A PEM file of the certificate authorities trusted for the SMTP server's "
        "certificate instead of the default ones (a company CA). Verification cannot be "
        "turned off.",
    )
    notify_smtp_user: str | None = Field(
        None, description="SMTP login; unset: no login (a relay that trusts the host)."
    )
    notify_smtp_password: SecretStr | None = Field(
        None, description="SMTP password (never logged or printed)."
    )
    notify_smtp_password_file: Path | None = Field(
        None, description="A file holding the SMTP password; wins over notify_smtp_password."
    )
    notify_smtp_from: str | None = Field(None, description="The sender address of the e-mail.")
    notify_smtp_to: list[str] = Field(
        default_factory=list,
        description='Addresses the e-mail goes to, e.g. ["ops@shop.example"].',
    )
    notify_telegram_token: SecretStr | None = Field(
        None,
        description="Telegram notifications: the bot's token (from @BotFather); unset: no "
        "Telegram. It travels in the URL's path, and is masked in every log line and error.",
    )
    notify_telegram_token_file: Path | None = Field(
        None, description="A file holding the bot's token; wins over notify_telegram_token."
    )
    notify_telegram_chat_id: str | None = Field(
        None,
        description="The chat (or group, or channel) the bot writes to: its numeric id or "
        "@channelname.",
    )
    notify_telegram_api_url: str = Field(
        "https://api.telegram.org",
        description="The Bot API's base URL (a local Bot API server, or a simulated one in "
        "tests). http:// only for loopback.",
    )
    public_url: str | None = Field(
        None,
        # EXCHANGE_WORKBENCH_URL is its old name, still read (contract 15); the last choice is
        # the TOML key the reference shows.
        validation_alias=AliasChoices(
            "exchange_public_url", "exchange_workbench_url", "workbench_url", "public_url"
        ),
        description="The address by which 1C and the operators reach exchange serve (scheme, "
        "host, port, path; e.g. https://exchange.shop.ru:8443/exchange), as a proxy or a "
        "name outside this machine makes it: serve prints 1C's, the intake's and the "
        "workbench's addresses from it, and notifications link to it. Unset: serve prints its "
        "listen address and warns that 1C needs this one. EXCHANGE_WORKBENCH_URL is its old "
        "name, still read.",
    )

    @field_validator("notify_every", "notify_stalled_after", mode="before")
    @classmethod
    def _notify_seconds(cls, value: Any) -> Any:
        return _finite_seconds(value)

    @field_validator("notify_telegram_api_url", "public_url")
    @classmethod
    def _notify_url(cls, value: str | None) -> str | None:
        if value is None or value.strip() == "":
            return None
        value = value.strip()
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
            raise ValueError("must be an http(s) URL with a host and no user:password@")
        if parts.query or parts.fragment:
            raise ValueError("must be an address without ?query or #fragment")
        return value.rstrip("/")

    @field_validator("notify_smtp_host", "notify_smtp_from", "notify_telegram_chat_id")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @field_validator("notify_smtp_to")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        return _distinct_text(value)

    @field_validator("notify_smtp_ca_bundle")
    @classmethod
    def _smtp_ca_bundle(cls, value: Path | None) -> Path | None:
        if value is not None:
            tls_context(value)  # read now, so that a bad file stops the service at start
        return value

    def notify_smtp_tls(self) -> ssl.SSLContext:
        """The context that verifies the SMTP server's certificate: against
        EXCHANGE_NOTIFY_SMTP_CA_BUNDLE when set, else the default CAs."""
        if self.notify_smtp_ca_bundle is None:
            return ssl.create_default_context()
        try:
            return tls_context(self.notify_smtp_ca_bundle)
        except ValueError as exc:
            raise ConfigurationError(f"EXCHANGE_NOTIFY_SMTP_CA_BUNDLE: {exc}") from None

    def notify_smtp_port_in_use(self) -> int:
        """The SMTP port: the one set, or the usual one of the security chosen."""
        if self.notify_smtp_port is not None:
            return self.notify_smtp_port
        return {"starttls": 587, "tls": 465, "none": 25}[self.notify_smtp_security]
