"""What operators set about the running service: the kinds and their policies, bulk actions,
retention, logs, the display time zone, the metrics server.
"""

from __future__ import annotations

import os
import zoneinfo
from typing import Any, Literal

import tzlocal
from pydantic import BaseModel, Field, field_validator

from exchange.domain.policy import DEFAULT_KINDS, Policy
from exchange.settings.rules import MAX_ATTEMPTS, _finite_seconds


def host_zone() -> str:
    """The host's own time zone (TZ, /etc/timezone, /etc/localtime, the Windows registry, as
    tzlocal reads them), so that people read times on their own clock by default; UTC where
    the host names none that zoneinfo knows."""
    try:
        # TZ read here, not through tzlocal's cache of the first answer: a process (or a test)
        # whose TZ changes is read as it is now.
        name = os.environ.get("TZ", "").lstrip(":") or tzlocal.get_localzone_name()
        zoneinfo.ZoneInfo(name or "")
    except Exception:  # any host's odd set-up ends in UTC, never in a refused start
        return "UTC"
    # Debian names UTC «Etc/UTC»: the pages say the zone, and «UTC» is the name people know.
    return "UTC" if not name or name in _UTC_NAMES else name


_UTC_NAMES = {"Etc/UTC", "Etc/Universal", "Etc/Zulu", "Universal", "Zulu", "Etc/GMT", "GMT"}


class OperationsSettings(BaseModel):
    """Kinds, bulk limit, retention, logs, time zone, metrics."""

    kinds: dict[str, Policy] = Field(
        default_factory=lambda: dict(DEFAULT_KINDS),
        description="Message kinds and their policy: latest-wins (only the newest pending version "
        "is sent) or strict (every version, in order). A kind starting with financial must be "
        "strict; an unknown kind is quarantined as unknown-kind.",
    )
    bulk_limit: int = Field(
        500,
        ge=1,
        le=MAX_ATTEMPTS,
        description="Most messages a bulk retry or cancel touches unless --limit N confirms more.",
    )
    retention_days: float = Field(
        30.0,
        gt=0,
        le=36_500,
        description="Days delivered and cancelled messages (with their history), taken "
        "staging rows and the 1C exchange's log are kept before prune removes them.",
    )
    log_level: str = Field("INFO", description="Log level: DEBUG, INFO, WARNING, ERROR.")
    log_format: Literal["text", "json"] = Field(
        "text", description="Log lines: readable text, or json (one JSON object per line)."
    )
    display_tz: str = Field(
        default_factory=host_zone,
        description="The time zone in which people read times: the workbench, the console's "
        "tables and the quarantine reports (an IANA name such as Europe/Moscow). Logs, JSON "
        "and --json output stay UTC.",
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
        min_length=1,
        max_length=253,
        description="Address the metrics server listens on; 127.0.0.1 keeps it on this host.",
    )

    @field_validator("retention_days", mode="before")
    @classmethod
    def _days(cls, value: Any) -> Any:
        return _finite_seconds(value, most=36_500, unit="days")

    @field_validator("metrics_host")
    @classmethod
    def _metrics_host(cls, value: str) -> str:
        if not value.isprintable() or any(char.isspace() for char in value):
            raise ValueError("must be an address or a host name, without spaces")
        return value

    @field_validator("display_tz")
    @classmethod
    def _display_tz(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {value!r}: an IANA name such as UTC or Europe/Moscow"
            ) from None
        return value

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
            if not kind or len(kind) > 64 or not kind.isprintable() or kind != kind.strip():
                raise ValueError(
                    f"kind {kind!r} must be 1 to 64 printable characters, without surrounding "
                    "spaces"
                )
            if kind.startswith("financial") and policy is not Policy.STRICT:
                raise ValueError(
                    f"kind {kind!r} is financial and can never be coalesced: use policy 'strict'"
                )
        return value
