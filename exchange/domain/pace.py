"""The site's pace (contract 5c): how fast and how many requests one worker sends, shared by
every request of the worker. Pure: every method takes ``now`` (seconds on a monotonic clock)
from its caller, so tests drive it with a table of times.

Three parts, each answering one question:

1. **Does this refusal speak about the site?** (``speaks_about_site``) 429 always; 502, 503
   and 504 when another aggregate was refused too within ``WINDOW`` seconds, and such
   refusals were at least ``SITE_SHARE`` of the answers then (a few random 503s among
   thousands of successes are the messages' own bad luck, charged as before, and do not
   slow the worker down). The caller adds
   the health endpoint's word: a temporary failure while the health check fails is the site's
   too, whatever the number of aggregates pending. 500, timeouts and connection errors alone
   speak about the message (a poison message is charged as before).

2. **May anything go now?** (``hold_until``) A site refusal holds every request of the worker:
   until the later of its ``Retry-After`` (capped at ``max_delay``) and a short hold that
   doubles with each round of refusals without a success between (``hold_base`` up to
   ``max_delay``), so an outage is not hammered and a busy site gets a breath.

3. **How fast, how many?** A request rate (``rate``, requests/s, ``None`` while the site never
   refused) and a concurrency limit (``limit``, 1 .. ``max_limit``).

Why these rules (studied: Netflix concurrency-limits' AIMD, Vegas and Gradient2; Envoy's
adaptive concurrency, a gradient controller with periodic min-RTT windows):

- A shop that rate-limits answers its 429 *fast*: latency never climbs, so no latency-based
  limit (Vegas, Gradient, Envoy) can find it, and one request in flight at 2 ms already exceeds
  120 requests/s. Only the refusals tell, so the rate is loss-based AIMD, as TCP's: on a round
  of refusals it falls to ``BETA`` x the rate the site *accepted* over the last second of
  sending (the site's capacity as measured, not a guess; a hold before it is left out, as
  nothing was sent then; refused again right after a hold: x ``RATE_CUT``); it then grows
  back by ``PROBE`` of that ceiling per second, slowly at first, as every probe past the
  ceiling costs a Retry-After hold, and twice as fast every ``PROBE_DOUBLING`` seconds
  without a refusal (CUBIC's concave-then-convex probing); once the site
  takes ``FORGET`` x the old ceiling without a refusal, the ceiling is forgotten and the rate
  doubles per second until the site refuses again (a capacity that came back is found fast).
  The rate grows only while the worker uses it (TCP's application-limited rule).
- A shop with a pool of PHP workers queues: latency grows long before it refuses. That is
  Vegas' signal: the requests queued at the site are estimated as
  ``limit x (1 - rtt_noload / rtt)``; below ``ALPHA`` the limit grows by one per round (a
  round is ``limit`` answers, about one round trip), above ``BETA_QUEUE`` it shrinks by one,
  so the site's workers always have a request waiting and its queue never fills. Vegas was
  chosen over Gradient2 because its target (a few requests queued) is absolute and small,
  which is what a queue of a few slots before 503 needs; Gradient2's tolerance of 2x the
  long-term RTT lets the queue grow to the pool's size. Envoy's periodic min-RTT measurement
  pins concurrency low for a while each period; here the no-load RTT is the minimum over the
  current and the previous ``RTT_PERIOD`` instead, so a site that got slower is relearned in
  two periods without pausing delivery.
- A round of site refusals also cuts the limit (x ``LIMIT_DECREASE``, AIMD's backoff ratio).
  Only a 429 paces the rate: it says "too many per second"; a 503 from a full pool says "too
  many at once", which the limit answers (pacing its rate at what a pool accepted while it
  was still filling up would hold the worker far below the pool's capacity).

A "round" of refusals is counted once: a refusal of a request sent before the last decrease
was sent at the old pace and says nothing new (TCP's fast recovery).

Per worker process, in memory. Several workers on one site each run their own pace: AIMD flows
sharing one bottleneck converge to fair shares (Chiu and Jain), and ``EXCHANGE_SITE_MAX_RATE``,
a hard cap, is split among the live workers by the caller (``max_rate``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

WINDOW = 2.0  # seconds: a 502/503/504 is the site's when another aggregate was refused within
SITE_SHARE = 0.1  # ... and 429/502-504 were at least this share of the answers in the window
BETA = 0.9  # the rate after a round of refusals, as a share of what the site accepted
PROBE = 0.01  # growth past 0.9 x ceiling, as a share of the ceiling per second
PROBE_DOUBLING = 6.0  # seconds without a refusal that double the probing growth
FORGET = 1.1  # the site took this much more than the ceiling: forget the ceiling
ALPHA = 2.0  # Vegas: fewer requests than this queued at the site: one more in flight
BETA_QUEUE = 5.0  # Vegas: more than this queued at the site: one fewer in flight
LIMIT_DECREASE = 0.75  # the limit after a round of refusals, as a share
RTT_PERIOD = 10.0  # seconds: the no-load RTT is the least of this period and the previous
BUCKET = 0.25  # seconds per bucket of the counters
BUCKETS = 240  # 60 seconds of counters
MARKED = 2.0  # a change of the rate by this factor (or to/from unpaced) is worth a log line
RATE_CUT = 0.5  # the rate after a 429 that came right after a hold (too soon to measure)
MIN_RATE = 0.5  # requests/s: the pace never falls below this
REPORT_EVERY = 10.0  # seconds between two "site busy" lines at most


class Cause(StrEnum):
    """Why a request was refused, as the operator sees it (metrics, status)."""

    RATE_LIMITED = "429"
    UNAVAILABLE = "5xx"  # 502, 503, 504 while other requests were refused too
    SITE_DOWN = "health"  # a temporary failure while the health check failed


ALWAYS_SITE = frozenset({429})
SITE_IF_OTHERS = frozenset({502, 503, 504})


@dataclass
class Pace:
    max_limit: int
    max_delay: float
    hold_base: float
    max_rate: float | None = None  # the hard cap for this worker (requests/s), if any
    initial_limit: int = 4
    limit: int = 0  # set from initial_limit
    rate: float | None = None  # requests/s; None: not paced by rate
    ceiling: float | None = None  # the accepted rate at the last round of refusals
    hold_until: float = 0.0
    holds: int = 0  # rounds of refusals without a success between
    last_decrease: float = -math.inf
    _next_slot: float = 0.0
    _hold_ended: float = -math.inf
    _last_growth: float | None = None
    _refused_at: dict[str, float] = field(default_factory=dict)
    _rtt_min: float = math.inf
    _rtt_min_previous: float = math.inf
    _rtt_period_started: float | None = None
    _round_count: int = 0
    _round_sum: float = 0.0
    _slow_start: bool = True
    _accepted: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    _noticed: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    _refused: list[dict[Cause, int]] = field(default_factory=lambda: [{} for _ in range(BUCKETS)])
    _bucket_index: int | None = None
    _started: float | None = None
    _reported_rate: float | None = None
    _reported_at: float = -math.inf

    def __post_init__(self) -> None:
        if self.max_limit < 1:
            raise ValueError("max_limit must be 1 or more")
        self.limit = max(1, min(self.max_limit, self.initial_limit))

    # -- 1. which refusals speak about the site ---------------------------------------------

    def speaks_about_site(self, now: float, aggregate: str, status: int | None) -> bool:
        """True for 429, and for 502/503/504 when another aggregate was refused (429 or
        502-504) within WINDOW seconds. Does not record anything (``refused`` does)."""
        if status in ALWAYS_SITE:
            return True
        if status not in SITE_IF_OTHERS:
            return False
        since = now - WINDOW
        if not any(a != aggregate and t >= since for a, t in self._refused_at.items()):
            return False
        noticed = self._sum(self._noticed, now, WINDOW)
        answers = self._sum(self._accepted, now, WINDOW) + noticed
        return noticed >= SITE_SHARE * answers

    def noticed(self, now: float, aggregate: str, status: int | None) -> None:
        """A 429 or 502-504 on this aggregate, site-wide or not: it corroborates the others."""
        if status in ALWAYS_SITE or status in SITE_IF_OTHERS:
            if len(self._refused_at) > 1000:  # forget the old ones; the window is short
                since = now - WINDOW
                self._refused_at = {a: t for a, t in self._refused_at.items() if t >= since}
            self._refused_at[aggregate] = now
            self._advance(now)
            self._noticed[(self._bucket_index or 0) % BUCKETS] += 1

    # -- 2. and 3. what the answers teach --------------------------------------------------------

    def refused(self, now: float, sent_at: float, cause: Cause, retry_after: float | None) -> float:
        """A site refusal of a request sent at ``sent_at``. Returns the seconds the refused
        message should wait before it is due again (the hold still to run)."""
        self._count(now, refused=cause)
        if sent_at >= self.last_decrease:  # a new round: sent at the current pace
            self.last_decrease = now
            self.holds += 1
            # What the site accepted while the worker was sending: the last second, but not
            # the hold before it (nothing was sent then, so nothing was accepted).
            sending = min(1.0, now - self._hold_ended)
            current = self.rate if self.rate is not None else math.inf
            if cause is not Cause.RATE_LIMITED:
                pass  # a busy pool or a site down: the limit and the hold answer it
            elif sending >= 2 * BUCKET:
                accepted = self.accepted_rate(now, sending)
                if accepted > 0:  # none: an outage; the hold does the work
                    self.ceiling = accepted
                    self.rate = BETA * min(current, accepted)
            elif self.rate is not None:  # refused right after a hold: cut hard
                self.rate = max(MIN_RATE, self.rate * RATE_CUT)
                self.ceiling = self.rate  # the best guess of the capacity now
            self.limit = max(1, math.floor(self.limit * LIMIT_DECREASE))
            self._slow_start = False
            self._last_growth = now
            own = min(self.max_delay, self.hold_base * 2.0 ** min(self.holds - 1, 60))
            self.hold_until = max(self.hold_until, now + own)
            self._hold_ended = self.hold_until
        if retry_after is not None:
            self.hold_until = max(self.hold_until, now + min(retry_after, self.max_delay))
            self._hold_ended = max(self._hold_ended, self.hold_until)
        return max(0.0, self.hold_until - now)

    def answered(self, now: float, rtt: float) -> None:
        """An answer that is not a site refusal (delivered, or about the message alone)."""
        self._count(now, refused=None)
        self.holds = 0
        self._grow_rate(now)
        self._learn_rtt(now, rtt)

    def _grow_rate(self, now: float) -> None:
        last, self._last_growth = self._last_growth, now
        if self.rate is None or last is None:
            return
        dt = max(0.0, now - last)
        if self.accepted_rate(now) < 0.8 * self.rate:  # not using it: no reason to grow
            return
        ceiling = self.ceiling
        if ceiling is None:
            self.rate *= 2.0**dt
        elif self.rate < 0.9 * ceiling:
            self.rate = min(0.9 * ceiling, self.rate * 2.0**dt)
        else:
            # Concave then convex, as CUBIC: slowly near the ceiling, faster the longer the
            # site takes it (a capacity that came back is found in seconds, not minutes).
            since = max(0.0, now - self.last_decrease)
            self.rate += PROBE * ceiling * 2.0 ** min(since / PROBE_DOUBLING, 20) * dt
            if self.rate > FORGET * ceiling:
                self.ceiling = None

    def _learn_rtt(self, now: float, rtt: float) -> None:
        if self._rtt_period_started is None:
            self._rtt_period_started = now
        elif now - self._rtt_period_started >= RTT_PERIOD:
            self._rtt_min_previous, self._rtt_min = self._rtt_min, math.inf
            self._rtt_period_started = now
        self._rtt_min = min(self._rtt_min, rtt)
        self._round_count += 1
        self._round_sum += rtt
        if self._round_count < self.limit:
            return
        average = self._round_sum / self._round_count
        self._round_count, self._round_sum = 0, 0.0
        noload = min(self._rtt_min, self._rtt_min_previous)
        queued = self.limit * (1.0 - noload / average) if average > 0 else 0.0
        if queued < ALPHA:
            grown = self.limit * 2 if self._slow_start else self.limit + 1
            self.limit = min(self.max_limit, grown)
        elif queued > BETA_QUEUE:
            self._slow_start = False
            self.limit = max(1, self.limit - 1)

    # -- what may go now -----------------------------------------------------------------------

    def effective_rate(self) -> float | None:
        rates = [r for r in (self.rate, self.max_rate) if r is not None]
        return min(rates) if rates else None

    def reserve(self, now: float) -> float:
        """0.0 and a send slot taken when a request may start now; else the seconds to wait
        (nothing taken). The caller also keeps the requests in flight under ``limit``."""
        if now < self.hold_until:
            return self.hold_until - now
        rate = self.effective_rate()
        if rate is None:
            return 0.0
        if now < self._next_slot:
            return self._next_slot - now
        # A slot missed by a late wake-up may be caught up, a little: no burst after idling.
        self._next_slot = max(self._next_slot, now - 0.05) + 1.0 / rate
        return 0.0

    # -- what the operator sees ------------------------------------------------------------------

    def accepted_rate(self, now: float, seconds: float = 1.0) -> float:
        """Answers other than site refusals per second over the last ``seconds``."""
        self._advance(now)
        n = min(BUCKETS - 1, max(1, round(seconds / BUCKET)))
        index = self._bucket_index or 0
        # The current (partial) bucket and n whole ones before it, over the time they span.
        total = sum(self._accepted[(index - i) % BUCKETS] for i in range(n + 1))
        elapsed = now - (index - n) * BUCKET
        if self._started is not None:
            elapsed = min(elapsed, now - self._started)
        return total / max(elapsed, BUCKET)

    def _sum(self, counts: list[int], now: float, seconds: float) -> int:
        self._advance(now)
        index = self._bucket_index or 0
        n = min(BUCKETS - 1, max(1, round(seconds / BUCKET)))
        return sum(counts[(index - i) % BUCKETS] for i in range(n + 1))

    def refused_last_minute(self, now: float) -> dict[Cause, int]:
        self._advance(now)
        totals: dict[Cause, int] = {}
        for bucket in self._refused:
            for cause, n in bucket.items():
                totals[cause] = totals.get(cause, 0) + n
        return totals

    def busy(self, now: float) -> bool:
        """The site refused within the last minute or holds everything now."""
        return now < self.hold_until or bool(self.refused_last_minute(now))

    def report(self, now: float, in_flight: int) -> str | None:
        """One line when the pace changed markedly since the last one (and at most every
        REPORT_EVERY seconds): ``site busy: 40 requests/s, 3 in flight, 12 refused in the last
        minute``, or ``site keeps up again: ...`` when the site refused nothing for a minute."""
        if now - self._reported_at < REPORT_EVERY:
            return None
        rate = self.effective_rate() if self.busy(now) else None
        before = self._reported_rate
        if rate is None and before is None:
            return None
        if rate is not None and before is not None and 1 / MARKED < rate / before < MARKED:
            return None
        self._reported_rate, self._reported_at = rate, now
        refused = sum(self.refused_last_minute(now).values())
        figures = (
            f"{self.accepted_rate(now, 5.0):.0f} requests/s, {in_flight} in flight "
            f"(limit {self.limit}), {refused} refused in the last minute"
        )
        if rate is None:
            return f"site keeps up again: {figures}"
        hold = max(0.0, self.hold_until - now)
        held = f", all requests held {hold:.1f} s" if hold > 0 else ""
        return f"site busy: {figures}, paced at {rate:.0f} requests/s{held}"

    # -- counters ---------------------------------------------------------------------------------

    def _advance(self, now: float) -> None:
        if self._started is None:
            self._started = now
        index = math.floor(now / BUCKET)
        if self._bucket_index is None:
            self._bucket_index = index
            return
        steps = index - self._bucket_index
        if steps <= 0:
            return
        for i in range(1, min(steps, BUCKETS) + 1):
            slot = (self._bucket_index + i) % BUCKETS
            self._accepted[slot] = 0
            self._noticed[slot] = 0
            self._refused[slot] = {}
        self._bucket_index = index

    def _count(self, now: float, *, refused: Cause | None) -> None:
        self._advance(now)
        slot = (self._bucket_index or 0) % BUCKETS
        if refused is None:
            self._accepted[slot] += 1
        else:
            bucket = self._refused[slot]
            bucket[refused] = bucket.get(refused, 0) + 1
