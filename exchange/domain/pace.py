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
   ``max_delay``), so an outage is not hammered and a busy site gets a breath. One exception,
   a 429 that refused a *probe* (below): its ``Retry-After`` holds the probing share
   (``probe_held_until``: no rate past the known-good one until it has run) and the refused
   message, not every request.

3. **How fast, how many?** A request rate (``rate``, requests/s, ``None`` while the site never
   refused) and a concurrency limit (``limit``, 1 .. ``max_limit``).

Why these rules (studied: Netflix concurrency-limits' AIMD, Vegas and Gradient2; Envoy's
adaptive concurrency, a gradient controller with periodic min-RTT windows):

- A shop that rate-limits answers its 429 *fast*: latency never climbs, so no latency-based
  limit (Vegas, Gradient, Envoy) can find it, and one request in flight at 2 ms already exceeds
  120 requests/s. Only the refusals tell, so the rate is loss-based AIMD, as TCP's: on a round
  of refusals it falls to ``BETA`` x the rate the site *accepted* over the last second of
  sending (the site's capacity as measured, not a guess; a hold before it is left out, as
  nothing was sent then; refused again right after a hold: x ``RATE_CUT``). That rate is the
  *known-good* one (``good``). ``BETA`` is 0.75 (CUBIC's is 0.7): a second's count includes
  the token bucket's burst (a quarter of a second at the simulated shop), so 0.9 of it landed
  above the capacity and cost one more round; a rate set too low costs little, as probing
  finds the rest without a hold.
- A token bucket that takes more again says nothing until it is asked for more, so the pace
  probes: past the known-good rate the rate doubles every ``PROBE_DOUBLING`` seconds while
  the worker uses it (TCP's application-limited rule). What a refused probe costs is the
  choice that matters. Each 429 of the old rule held every request for the shop's
  ``Retry-After`` (1 s at the simulated shop): a probe every few seconds cost a second of
  delivery each, so probing had to be slow (CUBIC's concave start) and a capacity that came
  back was found 10 s late. Here a 429 on a request sent while probing (``probing_since``)
  costs the probe only, as BBR's ProbeBW phase sends above its estimate for a while and
  falls back to it, where TCP's congestion avoidance answers every loss with a multiplicative
  decrease (so the probe can grow fast, as slow start does, and still be cheap when refused):
  the rate falls back to the known-good one at once, no request is held, the
  limit is not cut, and the ``Retry-After`` holds the probing share (no probing until it has
  run, at least ``PROBE_PAUSE``) and the refused message (it is due again after it). A 429
  at or below the known-good rate is a full round, as above: the capacity fell.
- A probe is refused once its excess has drained the bucket's burst, so the rate at the
  refusal says nothing: a probe that ran ``PROVEN`` seconds makes the known-good rate
  ``PROBE_BETA`` x the least of what the site accepted over the last second and the rate it
  took ``PROVEN`` seconds before (the rate that outlasted the burst), higher when the probe
  found more (a capacity that came back), lower when the site took less than the known-good
  rate even then (it fell while probing). A shorter probe measured nothing and leaves it.
- A refused probe leaves the site's token bucket empty, and the known-good rate (0.9-0.97 of
  the capacity) refills it slowly: a little jitter in sending and a 429 comes *at* the
  known-good rate, which used to be a full round (a 1-s hold for everyone, the rate cut by a
  quarter) though the capacity had not changed. So the first 429 at the known-good rate
  while a refused probe's pause runs (``probe_held_until``) *drains*, as BBR's Drain phase
  empties the queue its Startup filled: the rate falls to ``DRAIN`` x good for
  ``DRAIN_TIME`` seconds (the bucket refills at a quarter of the capacity meanwhile) and
  climbs back to good as after any fall; its ``Retry-After`` holds the refused message and
  the probing share, the known-good rate and the limit stand. Once per refused probe: a
  429 while draining, or after it, is a full round (the capacity did fall). It drains only
  when the site says so: a drain after every refused probe would cost a quarter of the rate
  for half a second every 2 s, where the 429 it answers follows one probe in ten or so.
  Several workers on one site take turns probing (below), so a 429 at the known-good rate
  within a worker's own refused probe's pause is that probe's aftermath: it drains too (an
  earlier rule let only a worker alone drain, when two could probe at once).
  Measured (``python -m bench.pace``, 7 runs alternating with the rule before): the halving
  shop's refusals settle 1.05 s (1.03-1.15) after the halving against 2.39 s (2.33-3.81), at
  0.94 of its capacity against 0.91; the steady shop unchanged at 0.95.
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
- Several workers share the pool's queue, and each one's estimate is its own share of it
  (Little's law: its requests in flight x the queueing share of its RTT). Vegas' targets per
  flow add up: two workers keeping ``ALPHA``..``BETA_QUEUE`` each kept 4-10 queued, past the
  simulated shop's queue of 8, and shrank only after the 503s. So each worker keeps its share
  of the targets, ``ALPHA / workers``..``BETA_QUEUE / workers`` (``workers``: the live
  workers, this one included, the caller's word), and together they keep the queue one
  worker alone keeps. Not below the rate, though: paced by a rate (a 429 site) the limit
  never falls below rate x RTT (Little's law: the requests in flight at that rate), since a
  site that answers fast has no queue to keep short and its "queue" is the RTT's jitter,
  which a share of the targets can answer with 1 or 2 in flight (25-50 requests/s at 40 ms,
  under a paced rate of 90).
- A round of site refusals also cuts the limit (x ``LIMIT_DECREASE``, AIMD's backoff ratio).
  Only a 429 paces the rate: it says "too many per second"; a 503 from a full pool says "too
  many at once", which the limit answers (pacing its rate at what a pool accepted while it
  was still filling up would hold the worker far below the pool's capacity).

A "round" of refusals is counted once: a refusal of a request sent before the last decrease
was sent at the old pace and says nothing new (TCP's fast recovery).

Per worker process, in memory. Several workers on one site each run their own pace: AIMD flows
sharing one bottleneck converge to fair shares (Chiu and Jain), ``EXCHANGE_SITE_MAX_RATE``,
a hard cap, is split among the live workers by the caller (``max_rate``), and so are the
Vegas targets (``workers``, above). They take turns
probing: two probes at once push past the site's capacity twice as far, and each worker's 429
after the other's probe is a full round. A worker probes past its known-good rate only while
the caller says it may (``may_probe``: it holds the site's probe turn, or it is alone,
as ``share`` and the turn's methods set it), says
when it would (``wants_probe``: at the known-good rate, using it, no hold, pause or drain
running), and a probe whose turn passes on before the site refused it ends as a refused one
would, unrefused: back to the known-good rate, raised to ``PROBE_BETA`` x what the site took a
``PROVEN`` second before if the probe ran that long (``_end_probe``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

WINDOW = 2.0  # seconds: a 502/503/504 is the site's when another aggregate was refused within
SITE_SHARE = 0.1  # ... and 429/502-504 were at least this share of the answers in the window
BETA = 0.75  # the rate after a round of refusals, as a share of what the site accepted
PROBE_BETA = 0.9  # the known-good rate after a probe that ran PROVEN seconds, as a share
PROBE_DOUBLING = 2.0  # seconds: the probing rate doubles in this time while the site takes it
PROVEN = 1.0  # seconds: a rate the site took this long without a refusal is known to be good
PROBE_PAUSE = 1.0  # seconds: no probing after a refused probe (at least; Retry-After if later)
DRAIN = 0.75  # the rate while the bucket a refused probe emptied refills, as a share of good
DRAIN_TIME = 0.5  # seconds at that rate before the rate climbs back to the known-good one
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
    # A marketplace's own pace (Yandex Market's 420): its target waits it out, counted only.
    MARKETPLACE_LIMIT = "420"


ALWAYS_SITE = frozenset({429})
SITE_IF_OTHERS = frozenset({502, 503, 504})


@dataclass
class Pace:
    max_limit: int
    max_delay: float
    hold_base: float
    max_rate: float | None = None  # the hard cap for this worker (requests/s), if any
    alone: bool = True  # no other worker paces this site (the caller's word): needs no turn
    may_probe: bool = True  # the caller's word: this worker holds the site's probe turn
    workers: int = 1  # the caller's word: live workers on this site, this one included
    initial_limit: int = 4
    limit: int = 0  # set from initial_limit
    rate: float | None = None  # requests/s; None: not paced by rate
    ceiling: float | None = None  # the site's capacity as last measured (accepted rate)
    good: float | None = None  # the known-good rate: the most the site took without refusing
    probe_held_until: float = 0.0  # no probing past ``good`` until then (a refused probe)
    probing_since: float | None = None  # the rate went past ``good`` then (None: not probing)
    hold_until: float = 0.0
    holds: int = 0  # rounds of refusals without a success between
    last_decrease: float = -math.inf
    _next_slot: float = 0.0
    _hold_ended: float = -math.inf
    _last_growth: float | None = None
    _probe_round: bool = False  # the last round of refusals was a refused probe
    _drain_round: bool = False  # the last round was a 429 at the known-good rate after a probe
    _may_drain: bool = False  # a refused probe's aftermath may drain (once) until the pause ends
    _drain_until: float = -math.inf  # the rate stays at DRAIN x good until then
    _rates: list[tuple[float, float]] = field(default_factory=list)  # (time, rate) while probing
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

    def refused(
        self,
        now: float,
        sent_at: float,
        cause: Cause,
        retry_after: float | None,
        *,
        counted: bool = True,
    ) -> float:
        """A site refusal of a request sent at ``sent_at``. Returns the seconds the refused
        message should wait before it is due again (the hold still to run). ``counted=False``:
        a refusal already counted (a message of a request whose own answer was learned)."""
        if counted:
            self._count(now, refused=cause)
        hint = None if retry_after is None else min(retry_after, self.max_delay)
        if sent_at >= self.last_decrease:  # a new round: sent at the current pace
            self.last_decrease = now
            probe = self.probing_since is not None and sent_at >= self.probing_since
            self._probe_round = probe and cause is Cause.RATE_LIMITED and self.good is not None
            if self._probe_round:
                return self._probe_refused(now, hint)
            aftermath = self._may_drain and now < self.probe_held_until
            self._drain_round = aftermath and cause is Cause.RATE_LIMITED
            if self._drain_round:
                return self._drain(now, hint)
            self._may_drain = False
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
                    self.good = self.rate
            elif self.rate is not None:  # refused right after a hold: cut hard
                self.rate = max(MIN_RATE, self.rate * RATE_CUT)
                self.ceiling = self.rate  # the best guess of the capacity now
                self.good = self.rate
            self._stop_probing()
            self.limit = max(1, math.floor(self.limit * LIMIT_DECREASE))
            self._slow_start = False
            self._last_growth = now
            own = min(self.max_delay, self.hold_base * 2.0 ** min(self.holds - 1, 60))
            self.hold_until = max(self.hold_until, now + own)
            self._hold_ended = self.hold_until
        elif self._probe_round:  # sent at the probing rate before it fell back
            return self._probe_refused(now, hint)
        elif self._drain_round:  # sent at the known-good rate before the drain began
            return self._drained_wait(now, hint)
        if hint is not None:
            self.hold_until = max(self.hold_until, now + hint)
            self._hold_ended = max(self._hold_ended, self.hold_until)
        return max(0.0, self.hold_until - now)

    def _probe_refused(self, now: float, hint: float | None) -> float:
        """A 429 on a request sent while probing past the known-good rate: it costs the probe,
        not a hold for everyone. The rate falls back to the known-good one and its Retry-After
        holds the probing share: no rate past the known-good one until it has run.

        A probe that ran ``PROVEN`` seconds measured the site: the known-good rate becomes
        ``PROBE_BETA`` x the least of what the site accepted over that second and the rate it took
        ``PROVEN`` seconds before the refusal (a token bucket's burst lets a probe through
        for a while; the rate of a second ago has outlasted it). It rises to that when the
        probe found more, and falls to it when the site took less than the known-good rate
        even then (the capacity fell while probing). A shorter probe measured nothing: the
        known-good rate stands (if it no longer holds, the next refusal is a full round)."""
        assert self.good is not None
        proven = self._rate_before(now - PROVEN)
        if proven is not None and now - self._hold_ended >= PROVEN:
            accepted = self.accepted_rate(now)
            measured = min(proven, accepted)
            found = max(MIN_RATE, PROBE_BETA * measured)
            if accepted < self.good or found > self.good:
                self.good, self.ceiling = found, measured
        self.rate = self.good if self.rate is None else min(self.rate, self.good)
        self._stop_probing()
        self._last_growth = now
        self._may_drain = True
        pause = max(PROBE_PAUSE, hint if hint is not None else self.hold_base)
        self.probe_held_until = max(self.probe_held_until, now + pause)
        return max(self.probe_held_until, self.hold_until) - now

    def _drain(self, now: float, hint: float | None) -> float:
        """A 429 at the known-good rate while a refused probe's pause runs: the probe emptied
        the site's token bucket, and the known-good rate (just below the capacity) refills it
        too slowly to absorb the jitter of sending. The rate drains: ``DRAIN`` x good for
        ``DRAIN_TIME`` seconds, then back to good as after any fall; the Retry-After holds the
        refused message and the probing share, not every request. Once per refused probe: a
        429 at the drain rate, or a second one after it, is a full round (the capacity fell)."""
        assert self.good is not None
        self._may_drain = False
        self.rate = max(MIN_RATE, DRAIN * self.good)
        self._drain_until = now + DRAIN_TIME
        self._last_growth = now
        return self._drained_wait(now, hint)

    def _drained_wait(self, now: float, hint: float | None) -> float:
        pause = max(PROBE_PAUSE, hint if hint is not None else self.hold_base)
        self.probe_held_until = max(self.probe_held_until, now + pause, self._drain_until)
        wait = hint if hint is not None else self.hold_base
        return max(wait, self.hold_until - now)

    def _stop_probing(self) -> None:
        self.probing_since = None
        self._rates.clear()

    def _rate_before(self, t: float) -> float | None:
        """The probing rate in force at ``t`` (None: not probing then)."""
        before = [rate for at, rate in self._rates if at <= t]
        return before[-1] if before else None

    def answered(self, now: float, rtt: float) -> None:
        """An answer that is not a site refusal (delivered, or about the message alone)."""
        self._count(now, refused=None)
        self.holds = 0
        self._grow_rate(now)
        self._learn_rtt(now, rtt)

    def _grow_rate(self, now: float) -> None:
        last, self._last_growth = self._last_growth, now
        good = self.good  # set with the rate, at the first round of 429s
        if self.rate is None or good is None or last is None:
            return
        dt = max(0.0, now - last)
        if self.accepted_rate(now) < 0.8 * self.rate:  # not using it: no reason to grow
            return
        if now < self._drain_until:  # the site's bucket refills (``_drain``)
            return
        if self.rate < good:  # back to what the site is known to take, fast
            self.rate = min(good, self.rate * 2.0**dt)
        elif self.probing_since is not None and not self.may_probe:
            self._end_probe(now)  # the turn passed on before the site refused the probe
        elif now >= self.probe_held_until and now >= self.hold_until:
            # Probing: the share past the known-good rate grows until the site refuses it;
            # a refused probe costs that share only (``_probe_refused``).
            if self.probing_since is None:  # from now on (the time before was not probing)
                if not self.may_probe:  # another worker probes the site now
                    return
                self.probing_since = now
                self._rates = [(now, self.rate)]
                return
            self.rate *= 2.0 ** (dt / PROBE_DOUBLING)
            if self._rates[-1][0] <= now - BUCKET / 5:
                self._rates.append((now, self.rate))
                if self._rates[0][0] < now - 2 * PROVEN:
                    del self._rates[0]

    def _end_probe(self, now: float) -> None:
        """The probe ends unrefused (the turn passed on): a probe that ran ``PROVEN`` seconds
        found that much more, measured as a refused probe's is; the rate falls back to the
        known-good one."""
        assert self.good is not None
        proven = self._rate_before(now - PROVEN)
        if proven is not None:
            self.good = max(self.good, PROBE_BETA * min(proven, self.accepted_rate(now)))
        self.rate = self.good if self.rate is None else min(self.rate, self.good)
        self._stop_probing()

    def wants_probe(self, now: float) -> bool:
        """The worker would probe past the known-good rate now, had it the turn (``may_probe``):
        it sends at that rate and uses it, and no hold, pause or drain runs."""
        if self.rate is None or self.good is None or self.probing_since is not None:
            return False
        if now < max(self.probe_held_until, self.hold_until, self._drain_until):
            return False
        return self.rate >= self.good and self.accepted_rate(now) >= 0.8 * self.rate

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
        # This worker's own requests queued at the site (Little's law: its share of the
        # queue), held to its share of the targets: the site's queue is the same however
        # many workers fill it.
        queued = self.limit * (1.0 - noload / average) if average > 0 else 0.0
        workers = max(1, self.workers)
        # Paced by a rate, the limit never holds the worker below it: at that rate, rate x RTT
        # requests are in flight (Little's law). A site that answers fast has no queue to
        # keep short, and the "queue" is the RTT's jitter, which a share of the targets
        # (several workers) would answer with a limit too low for the rate.
        rate = self.effective_rate()
        needed = 1 if rate is None else math.ceil(rate * average)
        if queued < ALPHA / workers:
            grown = self.limit * 2 if self._slow_start else self.limit + 1
            self.limit = min(self.max_limit, grown)
        elif queued > BETA_QUEUE / workers and self.limit > needed:
            self._slow_start = False
            self.limit = max(1, self.limit - 1)

    # -- who shares the site, and who may probe ---------------------------------------------------

    def share(self, workers: int, *, turn_held: bool) -> None:
        """``workers`` live on the site, this one included (the caller counts them). A worker
        alone may probe without the site's probe turn; one of several only while it holds the
        turn (``turn_held``: the turn stands until it passes, ``turn_passed``)."""
        self.workers = workers
        self.alone = workers == 1
        if not turn_held:
            self.may_probe = self.alone

    def turn_passed(self) -> None:
        """The probe turn was given back or ran out: a worker alone still may probe."""
        self.may_probe = self.alone

    def turn_taken(self, live: int = 0) -> None:
        """This worker holds the probe turn; ``live``: the workers it counted as it took it
        (0: not counted), more than one when another came since it counted last."""
        self.may_probe = True
        if live > 1:
            self._others_came(live)

    def turn_refused(self, *, by_another: bool) -> None:
        """The turn was not taken: another worker holds it (so this one is not alone), or the
        turn could not be asked for (no database): no probing for now either way."""
        self.may_probe = False
        if by_another:
            self._others_came(2)

    def _others_came(self, live: int) -> None:
        self.alone = False
        self.workers = max(self.workers, live)

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

    def noted(self, now: float, cause: Cause) -> None:
        """A refusal the target paces itself (Yandex Market's 420, its own budget: research
        §3.3): counted in the figures, never a round of the pace's own."""
        self._count(now, refused=cause)

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

    def report(self, now: float, in_flight: int, subject: str = "site") -> str | None:
        """One line when the pace changed markedly since the last one (and at most every
        REPORT_EVERY seconds): ``site busy: 40 requests/s, 3 in flight, 12 refused in the last
        minute``, or ``site keeps up again: ...`` when the site refused nothing for a minute.
        ``subject``: who is busy (a marketplace's channel: "Wildberries", never "site")."""
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
            return f"{subject} keeps up again: {figures}"
        hold = max(0.0, self.hold_until - now)
        held = f", all requests held {hold:.1f} s" if hold > 0 else ""
        return f"{subject} busy: {figures}, paced at {rate:.0f} requests/s{held}"

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
