"""The sweeper (River's rescuer): after each take-in, in the take-in's transaction, coalescing,
the sequence-gap check and the last-lease clock.

A sweep coalesces and checks the gaps over the whole queue; it runs at a cycle's start and
whenever ``coalesce.sweep_due`` says so (its cadence grows with what a sweep costs). Between
sweeps only the aggregates a take-in brought messages for are coalesced, so a take-in that
brought none costs a few indexed reads whatever the backlog. Messages whose last lease ran out
are quarantined at every take-in."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection

from exchange.domain.clock import Monotonic
from exchange.queue import channels, coalesce, lease
from exchange.settings import Settings


@dataclass(frozen=True)
class Swept:
    cancelled: int  # superseded versions coalesced away
    gaps: int  # quarantined for a sequence gap
    expired: int  # quarantined when their last lease ran out


class Sweeper:
    def __init__(self, settings: Settings, monotonic: Monotonic) -> None:
        self.settings = settings
        self.kinds = settings.policies
        self.monotonic = monotonic
        self.swept_at = -math.inf  # when coalescing and the gap check last swept the queue
        self.sweep_cost = 0.0  # seconds that sweep took

    def due(self, at: float) -> bool:
        """Whether a take-in beginning at ``at`` (monotonic) sweeps the whole queue."""
        return coalesce.sweep_due(at - self.swept_at, self.sweep_cost, self.settings.poll_interval)

    def sweep(
        self, connection: Connection, now: datetime, *, whole: bool, since: int | None
    ) -> Swept:
        """``whole``: coalesce and check the gaps over the queue; else coalesce the aggregates
        of the messages above ``since`` (None: the take-in brought none, nothing to coalesce)."""
        cancelled = gaps = 0
        if whole:
            started = self.monotonic.now()
            cancelled = coalesce.coalesce(connection, self.kinds, now)
            gaps = coalesce.quarantine_gaps(connection, self.kinds, now, self.settings.gap_timeout)
            cancelled += channels.close_dropped(connection, now)
            self.sweep_cost = self.monotonic.now() - started
            self.swept_at = self.monotonic.now()
        elif since is not None:
            cancelled = coalesce.coalesce(connection, self.kinds, now, since=since)
        expired = lease.expire_exhausted(
            connection, now=now, max_attempts=self.settings.max_attempts
        )
        return Swept(cancelled, gaps, expired)
