"""The circuit breaker: tells a site outage from a poison message (contract 5).

Opens after ``threshold`` consecutive temporary failures, with no success in between, on
``threshold`` distinct aggregates; or after ``threshold`` such failures that speak about the
site itself (``site_wide``: its health check fails too, or a 502-504 while other requests are
refused, contract 5c), whatever their aggregates. Distinct aggregates tell an outage from a
poison message when many wait; a channel that is down with fewer aggregates waiting than the
threshold (a small second shop) can never show that many, and the site's own signals say it is
down instead. A poison message is one whose failures the site does not share: the site
answers its health check, so its failures never count as site-wide.

While open nothing is sent; after a cool-down (doubling like the retry backoff's ceiling, up
to its ``max_delay``) one probe goes out, each time on an aggregate not probed before in this
outage. A probe's success closes it; a failed probe is not charged (domain.retry.decide) and
re-opens it for a longer cool-down.

Per worker process, in memory: it reflects what this worker sees of the site.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from exchange.domain.retry import RetryPolicy


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"  # cool-down over: one probe may go


@dataclass
class CircuitBreaker:
    threshold: int
    cool_downs: RetryPolicy  # the n-th opening waits cool_downs.ceiling(n)
    failing_aggregates: set[int] = field(default_factory=set)
    site_failures: int = 0  # of the failures since the last success, those site-wide
    opened_until: datetime | None = None
    openings: int = 0
    probed: set[int] = field(default_factory=set)
    last_probe: int | None = None

    def start_probing_again(self) -> None:
        """Every due aggregate had its probe: start over, but not with the one just probed."""
        keep = {self.last_probe} if self.last_probe is not None and len(self.probed) > 1 else set()
        self.probed = keep

    def state(self, now: datetime) -> BreakerState:
        if self.opened_until is None:
            return BreakerState.CLOSED
        return BreakerState.OPEN if now < self.opened_until else BreakerState.HALF_OPEN

    def allowance(self, now: datetime, batch_size: int) -> int:
        """How many messages may be leased now."""
        match self.state(now):
            case BreakerState.CLOSED:
                return batch_size
            case BreakerState.HALF_OPEN:
                return 1
            case BreakerState.OPEN:
                return 0

    def record_success(self) -> None:
        self.failing_aggregates.clear()
        self.site_failures = 0
        self.opened_until = None
        self.openings = 0
        self.probed.clear()
        self.last_probe = None

    def record_temporary_failure(
        self, aggregate_id: int, now: datetime, *, probe: bool = False, site_wide: bool = False
    ) -> bool:
        """Count one failure; True when it opened the breaker or, for a probe, re-opened it.
        ``site_wide``: the failure speaks about the site, not the message (see the module).

        A failure of a request that was already in flight when the breaker opened is not a
        probe: it neither extends the cool-down nor counts again.
        """
        if probe:
            self.probed.add(aggregate_id)
            self.last_probe = aggregate_id
            self._open(now)
            return True
        if self.opened_until is not None:
            return False
        self.failing_aggregates.add(aggregate_id)
        if site_wide:
            self.site_failures += 1
        if self.threshold <= max(len(self.failing_aggregates), self.site_failures):
            self._open(now)
            return True
        return False

    def is_open(self) -> bool:
        return self.opened_until is not None

    def _open(self, now: datetime) -> None:
        self.openings += 1
        cool_down = self.cool_downs.ceiling(self.openings)
        self.opened_until = now + timedelta(seconds=cool_down)
