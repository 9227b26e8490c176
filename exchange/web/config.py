"""What the HTTP side needs, built from the settings by the composition root (``app``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from exchange.domain.policy import Policy


@dataclass(frozen=True, slots=True)
class WebConfig:
    kinds: dict[str, Policy]
    exchange_dir: Path
    onec_user: str | None = None
    onec_password: str | None = field(default=None, repr=False)
    intake_token: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    sku_mode: Literal["id", "article"] = "id"
    price_types: dict[str, str] = field(default_factory=dict)
    file_limit: int = 4 * 1024 * 1024
    max_file_bytes: int = 1024**3
    zip: bool = True
    max_zip_ratio: int = 200
    intake_max_items: int = 1000
    # How long an ``import`` request waits for its file before answering ``progress``.
    progress_wait: float = 2.0
    # Processes that read CommerceML files while the publishing transaction stages what they
    # have read (0: read in serve's own process first, then stage).
    reader_processes: int = 1
    # Exchange folders older than this are removed (a 1C that never sent ``complete``).
    keep_seconds: float = 24 * 3600.0
    # The workbench (contract 11).
    bulk_limit: int | None = None
    report_mask_fields: tuple[str, ...] = ()
    report_secrets: tuple[str, ...] = field(default=(), repr=False)
    report_lang: Literal["ru", "en"] = "ru"
    # A failed sign-in answers after this many seconds, doubled for each further failure of
    # the same name or address (up to ``login_delay_max``).
    login_delay: float = 1.0
    login_delay_max: float = 16.0
    display_tz: str = "UTC"
    # EXCHANGE_HTTP_BEHIND_PROXY: a proxy terminates TLS and writes X-Forwarded-For.
    behind_proxy: bool = False

    @property
    def onec_open(self) -> bool:
        return bool(self.onec_user and self.onec_password)
