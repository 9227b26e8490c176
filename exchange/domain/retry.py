"""Turning a classified answer into a decision: the state to record, when to try again.

Pure, with ``now`` and the random source passed in. Retry is for temporary causes only and is
bounded by ``max_attempts``; the delay is the site's Retry-After when it gave one (seconds or
an HTTP date, capped at ``max_delay``), else exponential backoff with full jitter.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import assert_never

from exchange.domain.clock import ensure_utc
from exchange.domain.reasons import Reason
from exchange.domain.states import Event, State
from exchange.domain.verdicts import Classification, Verdict

_DELTA_SECONDS = re.compile(r"^[0-9]+$")  # ASCII digits only: "²".isdigit() is True


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int
    base_delay: float
    max_delay: float

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: uniform in [0, min(max_delay, base * 2^(attempt-1))]."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** min(max(attempt - 1, 0), 60))
        return rng.uniform(0, ceiling)

    def delay(
        self, attempt: int, retry_after: str | None, now: datetime, rng: random.Random
    ) -> float:
        hinted = parse_retry_after(retry_after, now)
        if hinted is not None:
            return min(hinted, self.max_delay)
        return self.backoff(attempt, rng)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds from ``Retry-After`` (delta-seconds or HTTP date); None when absent or garbage."""
    if value is None:
        return None
    value = value.strip()
    if _DELTA_SECONDS.match(value):
        # An absurdly long number still means "a long time": the caller caps it.
        return float(int(value)) if len(value) <= 12 else 1e12
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    return max(0.0, (ensure_utc(when) - now).total_seconds())


@dataclass(frozen=True, slots=True)
class Decision:
    """What to record for one message after one attempt."""

    event: Event
    to_state: State
    detail: str
    reason: str | None = None
    charged: bool = True
    next_try_at: datetime | None = None
    delay_s: float | None = None
    http_status: int | None = None
    error_class: str | None = None
    receipt: str | None = None
    site_version: int | None = None
    result_unknown: bool = False


def decide(
    c: Classification, *, attempt: int, now: datetime, policy: RetryPolicy, rng: random.Random
) -> Decision:
    """``attempt`` is the number of this attempt (1 for the first)."""
    # What every outcome records about the answer; each case below says what it changes.
    answer = Decision(
        Event.QUARANTINED,
        State.QUARANTINED,
        c.detail,
        http_status=c.http_status,
        error_class=c.error_class,
        result_unknown=c.result_unknown,
    )
    match c.verdict:
        case Verdict.DELIVERED:
            return replace(
                answer,
                event=Event.DELIVERED,
                to_state=State.DELIVERED,
                receipt=c.receipt,
                site_version=c.site_version,
            )
        case Verdict.STALE_AT_SITE:
            return replace(
                answer,
                event=Event.STALE_AT_SITE,
                to_state=State.CANCELLED,
                reason=Reason.STALE_AT_SITE,
                site_version=c.site_version,
            )
        case Verdict.TERMINAL:
            return replace(answer, reason=Reason.http(c.http_status or 0))
        case Verdict.UNKNOWN:
            return replace(answer, reason=Reason.UNKNOWN_RESPONSE)
        case Verdict.PAUSE:
            return replace(answer, event=Event.RELEASED, to_state=State.NEW, charged=False)
        case Verdict.TEMPORARY:
            if attempt >= policy.max_attempts:
                return replace(
                    answer,
                    reason=Reason.RETRY_LIMIT,
                    detail=f"{c.detail} (attempt {attempt} of {policy.max_attempts})",
                )
            delay = policy.delay(attempt, c.retry_after, now, rng)
            return replace(
                answer,
                event=Event.RETRY_SCHEDULED,
                to_state=State.DELAYED,
                next_try_at=now + timedelta(seconds=delay),
                delay_s=delay,
            )
    assert_never(c.verdict)


def not_sent(detail: str) -> Decision:
    """A leased message that was not sent (breaker open, delivery paused, shutting down)."""
    return Decision(Event.RELEASED, State.NEW, detail, charged=False)
