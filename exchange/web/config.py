"""What the HTTP side needs, built from the settings by the composition root (``app``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from exchange.domain.clock import Clock, SystemClock
from exchange.domain.policy import Policy
from exchange.settings import Settings, worker_live_within

if TYPE_CHECKING:
    from exchange.targets.base import Target


def _setting(name: str) -> Any:
    """The default of a setting, so that a WebConfig built without the settings (tests) means
    what an unset variable means, and the value is written once (in ``Settings``)."""
    return Settings.model_fields[name].get_default(call_default_factory=True)


# A sign-in or a workbench form: a few fields (contract 9: "small for sign-in and forms").
FORM_BODY_LIMIT = 64 * 1024
# What one intent of the JSON intake may take on average, in bytes of JSON: a price with a
# 500-character Cyrillic source_ref and name, escaped as \uXXXX, is about 7 KiB.
INTAKE_BYTES_PER_ITEM = 16 * 1024
# A workbench action form carries up to the bulk limit of message ids (each at most 200
# characters, percent-encoded at most 3 bytes each) beside its few fields.
ACTION_BYTES_PER_ID = 640


@dataclass(frozen=True, slots=True)
class DoorLimits:
    """What one connection may take (contract 9); ``exchange.web.door`` applies them. Kept as
    values so that tests run them small."""

    head_timeout: float = 10.0
    body_grace: float = 10.0
    body_rate: float = 16 * 1024
    max_connections: int = 512
    max_per_address: int = 32


@dataclass(frozen=True, slots=True)
class WebConfig:
    kinds: dict[str, Policy]
    exchange_dir: Path
    onec_user: str | None = None
    onec_password: str | None = field(default=None, repr=False)
    intake_token: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    sku_mode: Literal["id", "article"] = _setting("onec_sku")
    price_types: dict[str, str] = field(default_factory=dict)
    file_limit: int = _setting("onec_file_limit")
    max_file_bytes: int = _setting("onec_max_file_bytes")
    zip: bool = _setting("onec_zip")
    max_zip_ratio: int = _setting("onec_max_zip_ratio")
    intake_max_items: int = _setting("intake_max_items")
    # How long an ``import`` request waits for its file before answering ``progress``.
    progress_wait: float = 2.0
    # Processes that read CommerceML files while the publishing transaction stages what they
    # have read (0: read in serve's own process first, then stage).
    reader_processes: int = _setting("onec_reader_processes")
    # Exchange folders older than this are removed (a 1C that never sent ``complete``).
    keep_seconds: float = 24 * 3600.0
    # The workbench (contract 11).
    bulk_limit: int | None = None
    report_mask_fields: tuple[str, ...] = ()
    report_secrets: tuple[str, ...] = field(default=(), repr=False)
    report_lang: Literal["ru", "en"] = _setting("report_lang")
    # A failed sign-in answers after this many seconds, doubled for each further failure of
    # the same name or address (up to ``login_delay_max``).
    login_delay: float = 1.0
    login_delay_max: float = 16.0
    display_tz: str = _setting("display_tz")
    # A channel's target by its name, built when a person releases a price withheld there
    # (contract 13, issue 32); None: no channel to ask (the release says where the seller
    # must act).
    withheld_target: Callable[[str], Target] | None = field(default=None, repr=False, compare=False)
    # EXCHANGE_CHANNELS's names (contract 13), or None without it: then every registered
    # channel not dropped counts as configured, and the causes' codes stay bare.
    channels: tuple[str, ...] | None = None
    # A worker is live while its last report is younger than this (Settings.live_within).
    live_within: float = worker_live_within(_setting("lease_seconds"), _setting("poll_interval"))
    # EXCHANGE_HTTP_BEHIND_PROXY: a proxy terminates TLS and writes X-Forwarded-For.
    behind_proxy: bool = _setting("http_behind_proxy")
    # The address the operators open (EXCHANGE_PUBLIC_URL), when set: a form posted from
    # its host is this site's even where a proxy hands serve another Host.
    public_url: str | None = _setting("public_url")
    door: DoorLimits = field(default_factory=DoorLimits)
    # The HTTP side's clocks, real unless a test gives fakes: the time of day every handler's
    # decision reads (a session's age, a worker live or silent, what the dashboard draws, a
    # signed cookie's age), and monotonic seconds (the sign-in and guess throttles).
    clock: Clock = field(default_factory=SystemClock, repr=False, compare=False)
    monotonic: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    @property
    def intake_body_limit(self) -> int:
        """The JSON intake's body limit, derived from its item limit (no setting of its own):
        ``INTAKE_BYTES_PER_ITEM`` per item, at least 1 MiB so that a few large
        ``financial_posting`` payloads still fit in a small batch."""
        return max(self.intake_max_items * INTAKE_BYTES_PER_ITEM, 1024 * 1024)

    @property
    def action_body_limit(self) -> int:
        """A workbench bulk preview or confirm: a form and the ids it names."""
        return FORM_BODY_LIMIT + (self.bulk_limit or _setting("bulk_limit")) * ACTION_BYTES_PER_ID

    @property
    def onec_open(self) -> bool:
        return bool(self.onec_user and self.onec_password)
