"""The shop API's site (contract 5): its URL, its token, the CAs that verify it."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator

from exchange.secrets import clean_token
from exchange.settings.rules import tls_context


class SiteSettings(BaseModel):
    """Where the shop API is and how it is reached."""

    site_url: str | None = Field(
        None,
        description="Base URL of the site API, e.g. https://shop.example.com; required by run. "
        "No user:password@ (the site is authenticated by the token), no ?query or #fragment.",
    )
    site_token: SecretStr | None = Field(
        None,
        description="Bearer token sent to the site API (Authorization header). Surrounding "
        "whitespace (a trailing CR/LF) and a byte order mark are stripped; what remains must be "
        "visible ASCII, else the service refuses to start. Never logged, exported or printed.",
    )
    site_token_file: Path | None = Field(
        None,
        description="A file holding the site token (container or systemd secrets), UTF-8 (or "
        "UTF-16 with a BOM), read at start and again when the site refuses the token; wins over "
        "site_token. A byte order mark and surrounding whitespace (the last line break) are "
        "stripped, as for site_token.",
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

    @field_validator("site_token", mode="before")
    @classmethod
    def _site_token(cls, value: Any) -> Any:
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if isinstance(value, str):
            return clean_token(value)
        return value

    @field_validator("site_url")
    @classmethod
    def _site_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()  # a trailing CR of an env file written on Windows
        if value == "":
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        if not value.isprintable() or any(char.isspace() for char in value):
            raise ValueError("must not hold spaces or control characters")
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018  (raises on a port that is not a number)
        except ValueError:
            raise ValueError("is not a URL (e.g. https://shop.example.com)") from None
        if "@" in parts.netloc:
            # Never echoed: the part before "@" is a password more often than not.
            raise ValueError(
                "must not hold a user name or password (user:password@host): the site is "
                "authenticated by EXCHANGE_SITE_TOKEN or EXCHANGE_SITE_TOKEN_FILE; remove them "
                "from the URL"
            )
        if not parts.hostname:
            raise ValueError("has no host name (e.g. https://shop.example.com)")
        if parts.query or parts.fragment or value.endswith(("?", "#")):
            raise ValueError("must be the site's base URL, without ?query or #fragment")
        return value.rstrip("/")

    @field_validator("site_ca_bundle")
    @classmethod
    def _site_ca_bundle(cls, value: Path | None) -> Path | None:
        if value is not None:
            tls_context(value)  # read now, so that a bad file stops the service at start
        return value
