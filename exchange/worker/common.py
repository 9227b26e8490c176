"""What the delivery loop and the services beside it share, and nothing of either: a cycle's
report, the metrics port, how often a running worker reports, and which workers count as live.

The package is layered (pyproject.toml's import-linter contracts): ``process`` composes the
services and the loops; ``loop``, ``intake``, ``sweeper`` and ``reporter`` never import each
other (what one needs of another is handed in when ``process`` builds them); this module is
the bottom they all stand on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Engine

from exchange.domain.breaker import BreakerState
from exchange.domain.pace import Cause
from exchange.domain.retry import Decision
from exchange.domain.verdicts import Verdict
from exchange.intake.staging_table import IntakeReport
from exchange.queue import lease
from exchange.settings import Settings

SHARE_EVERY = 1.0  # seconds: in a long cycle, the worker reports and counts the others this often
# Seconds a marketplace loop waits between writing its row and its first count, before its first
# request (``DeliveryLoop.share_site_at_start``): two workers started within it count each other.
START_WAIT = SHARE_EVERY
# Contract 15: a running worker reports at least this often (``runner.reporting``), whatever its
# cycle waits for, so that one quiet for 30 s is shown silent and never one between reports.
REPORT_EVERY_S = 10.0


@dataclass
class CycleReport:
    taken: int = 0
    cancelled: int = 0
    batches: int = 0
    sent: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    lost_leases: int = 0

    def add(self, other: CycleReport) -> CycleReport:
        """``other``'s counts added to these (a loop's drain to its cycle's); returns self."""
        self.taken += other.taken
        self.cancelled += other.cancelled
        self.batches += other.batches
        self.sent += other.sent
        self.outcomes.update(other.outcomes)
        self.lost_leases += other.lost_leases
        return self


def recent_seconds(settings: Settings) -> float:
    """A worker that reported within this many seconds is live (it shares the site's rate cap,
    and a probe turn it held says it is there for as long)."""
    return max(settings.lease_seconds, 3 * settings.poll_interval)


class Metrics:
    """What the worker tells as it works: its outbound port for metrics. This base records
    nothing (metrics are off); exchange.ops.metrics.PrometheusMetrics records them."""

    def intake(self, report: IntakeReport) -> None:
        """Staging rows taken this cycle."""

    def quarantined(self, reason: str, count: int = 1) -> None:
        """Messages quarantined outside a delivery answer (sequence gap, expired last lease)."""

    def claimed(self, batch: lease.Batch) -> None:
        """A batch was claimed (``batch.takeovers`` of its messages from an expired lease)."""

    def attempt(self, verdict: Verdict) -> None:
        """The site answered one request (or the request failed), classified."""

    def recorded(self, decisions: Iterable[Decision]) -> None:
        """The outcomes of a batch, after they were written."""

    def cycle_finished(
        self, engine: Engine, *, now: datetime, seconds: float, breaker: BreakerState, paused: bool
    ) -> None:
        """A cycle ended normally after ``seconds``; ``now`` is the worker's clock."""

    def cycle_failed(self) -> None:
        """A cycle raised; the runner logs it and tries again."""

    def refused(self, cause: Cause) -> None:
        """The site refused a request for a reason that speaks about the site (contract 5c)."""

    def pace(self, figures: dict[str, float | int | None]) -> None:
        """The site's pace after a batch (``DeliveryLoop.pace_figures``)."""

    def for_channel(self, channel: str | None) -> Metrics:
        """What the delivery loop of ``channel`` reports to (contract 13: its series carry
        the channel under EXCHANGE_CHANNELS); this one itself when nothing is labelled."""
        return self

    def loop_state(self, breaker: BreakerState) -> None:
        """A loop's breaker after a cycle (labelled per channel under EXCHANGE_CHANNELS; else
        ``cycle_finished`` tells the one loop's)."""
