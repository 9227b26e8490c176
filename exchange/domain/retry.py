"""The retry decision, whole: a classified answer (or a message that was not sent) -> whether
the attempt is charged, the state the message goes to, and when it may go again.

Pure, with ``now`` and the random source passed in; the worker obeys it and the queue records
it. Retry is for temporary causes only and is bounded by ``max_attempts``; the delay is the
later of the site's Retry-After (seconds or an HTTP date, capped at ``max_delay``) and the
exponential backoff with full jitter. Not charged: a message the worker held back (breaker
open, delivery paused, stopping), a failed probe of the breaker, the shop refusing the
credentials (``PAUSE``), and a refusal that speaks about the site (contract 5c: it slows the
whole worker through ``domain.pace`` instead). Such a message goes back to ``new`` (or
``delayed``, when an earlier attempt was charged) and may go again at once (a site refusal:
after the pace's delay). The breaker's cool-down grows by the same
ceiling as the backoff (``RetryPolicy.ceiling``).

    DELIVERED       delivered                          charged
    STALE_AT_SITE   cancelled, stale-at-site           charged
    NOT_FOR_THIS_SHOP cancelled, not-for-this-shop     not charged (nothing was sent)
    WITHHELD        withheld (no lease, no retry)      charged
    AWAITING        delayed, due after ``again_in``    not charged (taken, or the channel's
                    (awaiting-outcome, the target's    own limit: a WB task, Ozon's hourly
                    words and receipt)                 limit, Yandex's read-back)
    TERMINAL        quarantined, the target's reason   charged
                    (unknown-sku, ...) or http-<code>
    UNKNOWN         quarantined, unknown-response      charged
    PAUSE           released (new | delayed)           not charged
    TEMPORARY       a probe: released, not charged
                    the site's refusal (5c): released, not charged, due after the pace's delay
                    attempt < max_attempts: delayed, next try after the delay
                    attempt = max_attempts: quarantined, retry-limit
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

    def ceiling(self, n: int) -> float:
        """The n-th delay's upper bound: base * 2^(n-1), at most max_delay."""
        return min(self.max_delay, self.base_delay * 2.0 ** min(max(n - 1, 0), 60))

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: uniform in [0, ceiling(attempt)]."""
        return rng.uniform(0, self.ceiling(attempt))

    def exhausted(self, attempts: int) -> bool:
        """No further attempt after this many were charged (a lease that expired on the last
        allowed attempt is quarantined, never taken over)."""
        return attempts >= self.max_attempts

    def delay(
        self, attempt: int, retry_after: str | None, now: datetime, rng: random.Random
    ) -> float:
        """The later of the site's Retry-After (capped at ``max_delay``) and the backoff: a
        Retry-After of 0 or in the past is no reason to hurry (contract 5)."""
        backoff = self.backoff(attempt, rng)
        hinted = parse_retry_after(retry_after, now)
        if hinted is None:
            return backoff
        return max(min(hinted, self.max_delay), backoff)


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


# Not frozen: one is made per message, and a frozen dataclass's __init__ costs ~2.5x.
@dataclass(slots=True)
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
    c: Classification,
    *,
    attempt: int,
    now: datetime,
    policy: RetryPolicy,
    rng: random.Random,
    probe: bool = False,
    site_delay: float | None = None,
    busy: str = "site busy",
) -> Decision:
    """``attempt`` is the number of this attempt (1 for the first); ``probe``: the message was
    the breaker's probe, whose temporary failure is not charged; ``site_delay``: the temporary
    failure spoke about the site (contract 5c: 429, or 502-504 while others are refused too, or
    while the site's health fails): not charged, due again after the later of ``site_delay``
    (the site's pace) and the answer's Retry-After. ``busy``: who is busy, in its words (a
    marketplace's channel says "Ozon busy" or "channel ozon (Ozon) busy", never "site busy")."""
    if c.verdict is Verdict.DELIVERED:
        return delivered(c)
    # What every other outcome records about the answer; each case below says what it changes.
    answer = Decision(
        Event.QUARANTINED,
        State.QUARANTINED,
        c.detail,
        http_status=c.http_status,
        error_class=c.error_class,
        result_unknown=c.result_unknown,
    )
    match c.verdict:
        case Verdict.STALE_AT_SITE:
            return replace(
                answer,
                event=Event.STALE_AT_SITE,
                to_state=State.CANCELLED,
                reason=Reason.STALE_AT_SITE,
                site_version=c.site_version,
            )
        case Verdict.NOT_FOR_THIS_SHOP:
            return replace(
                answer,
                event=Event.NOT_FOR_THIS_SHOP,
                to_state=State.CANCELLED,
                reason=Reason.NOT_FOR_THIS_SHOP,
                charged=False,
            )
        case Verdict.WITHHELD:
            return replace(answer, event=Event.WITHHELD, to_state=State.WITHHELD, receipt=c.receipt)
        case Verdict.AWAITING:
            # The channel took it or asked it to wait (the target's words say which): not
            # charged, due again after the target's wait, whatever the attempt.
            wait = max(0.0, c.again_in or 0.0)
            return replace(
                answer,
                event=Event.AWAITING_OUTCOME,
                to_state=State.DELAYED,
                charged=False,
                next_try_at=now + timedelta(seconds=wait),
                delay_s=wait,
                receipt=c.receipt,
            )
        case Verdict.TERMINAL:
            # Its receipt says why it ended where a later decision reads it (a marketplace
            # price quarantined by a rule of two price types: ``PAIR_RULE``).
            return replace(
                answer, reason=c.reason or Reason.http(c.http_status or 0), receipt=c.receipt
            )
        case Verdict.UNKNOWN:
            return replace(answer, reason=Reason.UNKNOWN_RESPONSE)
        case Verdict.PAUSE:
            return replace(
                not_sent(c.detail, attempt), http_status=c.http_status, error_class=c.error_class
            )
        case Verdict.TEMPORARY:
            if probe:
                return replace(
                    not_sent(f"probe failed, not charged: {c.detail}", attempt),
                    http_status=c.http_status,
                    error_class=c.error_class,
                    # A probe cut off after it left may have landed, as any send.
                    result_unknown=c.result_unknown,
                )
            if site_delay is not None:
                hinted = parse_retry_after(c.retry_after, now) or 0.0
                delay = max(0.0, site_delay, min(hinted, policy.max_delay))
                # No answer at all (a refused connection, a timeout: no HTTP status) is not a
                # busy site: it did not answer (issue 31 item 7).
                said = busy if c.http_status is not None else "no answer"
                return replace(
                    not_sent(f"{said}, not charged: {c.detail}", attempt),
                    http_status=c.http_status,
                    error_class=c.error_class,
                    next_try_at=now + timedelta(seconds=delay),
                    delay_s=delay,
                    # Not charged, yet the request may have landed (a cut-off answer): its
                    # history says so, and what the channel may hold reads it (review ozon 33).
                    result_unknown=c.result_unknown,
                )
            if policy.exhausted(attempt):
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
                # A target that waits through AWAITING replaces what the wait left (Yandex
                # Market: "not applied, send again"), so the next attempt does not read it.
                receipt=c.receipt,
            )
    assert_never(c.verdict)


def delivered(c: Classification) -> Decision:
    """``decide`` for a DELIVERED answer, which needs neither the time nor the attempt (the
    usual answer: built at once, not copied with ``replace``)."""
    return Decision(
        Event.DELIVERED,
        State.DELIVERED,
        c.detail,
        None,
        True,
        None,
        None,
        c.http_status,
        c.error_class,
        c.receipt,
        c.site_version,
        c.result_unknown,
    )


def not_sent(detail: str, attempt: int) -> Decision:
    """A leased message whose attempt ``attempt`` is not charged (held back: breaker open,
    delivery paused, stopping; or refused by a probe or the pause): back to ``new``, or to
    ``delayed`` when an earlier attempt was charged, due at once."""
    back = State.DELAYED if attempt - 1 > 0 else State.NEW
    return Decision(Event.RELEASED, back, detail, charged=False)
