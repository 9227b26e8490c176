"""The operators' report as data (contract 8): what every format renders, nothing about how.

``report.collect`` builds a ``Report`` from the database; the renderers (``report_csv``,
``report_xlsx``, ``report_html``, ``report_json``) turn one into bytes. Everything in it is
already masked: a renderer never sees a secret, so it cannot leak one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Literal, get_args

from exchange.ops.quarantine import Filters

Lang = Literal["ru", "en"]
ReportFormat = Literal["csv", "xlsx", "html", "json"]
LANGS: tuple[Lang, ...] = get_args(Lang)
FORMATS: tuple[ReportFormat, ...] = get_args(ReportFormat)
SUFFIXES: dict[ReportFormat, str] = {
    "csv": ".csv",
    "xlsx": ".xlsx",
    "html": ".html",
    "json": ".json",
}


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """One row of a message's biography, as ``exchange history`` shows it."""

    at: datetime
    event: str
    from_state: str | None = None
    to_state: str | None = None
    worker: str | None = None
    attempt: int | None = None
    leased_at: datetime | None = None  # when the attempt's lease began (an attempt's row)
    lease_until: datetime | None = None  # when it ran out, for an attempt ended unanswered
    http_status: int | None = None
    error_class: str | None = None
    delay_s: float | None = None
    detail: str | None = None
    operator: str | None = None
    note: str | None = None
    # The channel its row is of: a delayed state is a wait for that channel or a retry by the
    # last delaying event on it (``ops.waits.awaiting_in_story``).
    channel_id: int | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """One quarantined message: one row of the report."""

    message_id: str
    kind: str
    aggregate: str
    version: int
    reason: str
    attempts: int
    last_status: int | None
    last_error: str | None
    source_ref: str | None
    first_seen: datetime
    quarantined_at: datetime
    rejected_row: bool
    staging_id: int | None
    payload: str
    last_attempt: datetime | None = None
    # A latest-wins message whose aggregate has since had a newer version delivered: nothing
    # is left to fix, the record only waits to be cancelled.
    superseded_after_quarantine: bool = False
    # 1C has sent a newer version of its aggregate to its channel since (``quarantine.
    # newer_sent``): a price invalid for the channel is advised cancel (``advice_words``).
    newer_version_sent: bool = False
    # ... and every such version is in quarantine too (``quarantine.newer_held``): none goes.
    newer_version_held: bool = False
    # ... or withheld by the channel, one at least (``quarantine.newer_withheld``): none reaches
    # buyers until it is released.
    newer_version_withheld: bool = False
    history: tuple[HistoryEvent, ...] = ()
    # contract 13: the channel it is quarantined on; None for intake's rejected record.
    channel: str | None = None
    # that channel's target: a marketplace's advice is the marketplace's (words.on_marketplace)
    target: str | None = None
    # more than one channel registered: its command names its channel (``--channel``)
    several_channels: bool = False

    @property
    def last_result(self) -> str | None:
        """The last HTTP status or error in one value, for the formats people read."""
        if self.last_status is not None and self.last_error:
            if self.last_error.startswith(f"HTTP {self.last_status}"):  # the answer's own words
                return self.last_error
            if self.last_error.startswith(str(self.last_status)):  # "422 Unprocessable…"
                return f"HTTP {self.last_error}"
            return f"HTTP {self.last_status}: {self.last_error}"
        if self.last_status is not None:
            return f"HTTP {self.last_status}"
        return self.last_error or None


@dataclass(frozen=True, slots=True)
class DayActivity:
    """Delivery attempts of one UTC day, all kinds: how the pipeline fared around the report."""

    day: date
    delivered: int
    failed: int


@dataclass(frozen=True, slots=True)
class Summary:
    total: int
    by_reason: dict[str, int]
    oldest_quarantined_at: datetime | None
    oldest_age_s: float | None
    superseded_after_quarantine: int


@dataclass(frozen=True)
class Report:
    generated_at: datetime
    entries: tuple[Entry, ...]
    filters: Filters = field(default_factory=Filters)
    activity: tuple[DayActivity, ...] = ()
    # The zone people read its times in (EXCHANGE_DISPLAY_TZ, issue 24 item 8); the days of
    # ``activity`` stay UTC days, and JSON stays UTC.
    zone: str = "UTC"
    # The steps of «Что сделать» as the page that made it says them (``exchange.words.
    # page_steps``: a workbench export), never a command; None: a report of the command line,
    # whose reader runs the commands it names.
    steps: dict[str, str] | None = None
    # Deliveries the channel took and withholds from buyers (contract 13): they wait for a
    # person too, but are not quarantined, so they are counted beside the entries.
    withheld: int = 0
    # More than one channel registered: the formats people read show a channel column after
    # the message's id (a one-channel installation's files keep their columns; JSON always
    # says the channel).
    several_channels: bool = False

    @property
    def summary(self) -> Summary:
        oldest = min((e.quarantined_at for e in self.entries), default=None)
        return Summary(
            total=len(self.entries),
            by_reason=dict(sorted(Counter(e.reason for e in self.entries).items())),
            oldest_quarantined_at=oldest,
            oldest_age_s=(
                round((self.generated_at - oldest).total_seconds(), 3) if oldest else None
            ),
            superseded_after_quarantine=sum(e.superseded_after_quarantine for e in self.entries),
        )
