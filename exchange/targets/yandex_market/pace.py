"""Yandex Market's pace as the target keeps it (contract 14; research §3.3).

Yandex counts its price methods' budget in **offers** a minute (``ym_offers_per_minute``,
10 000), not in requests, and allows at most ``ym_parallel`` (4) requests at once per business.
The worker's own pace counts requests and learns 429s; Yandex answers 420 and says until when
(``X-RateLimit-Resource-Until``), so the target keeps both limits itself:

- ``OfferBudget``: a sliding window. A request of ``n`` offers waits until the offers sent in
  the last ``window`` seconds plus ``n`` fit ``per_minute × window / 60``. Any minute holds
  60/``window`` such windows, so no minute ever gets more than the budget and Yandex's own
  window (whatever its alignment) never refuses it. The target takes the shortest window that
  still holds one whole request (3 s for 500 offers of 10 000 a minute, at least 1 s): the
  budget is spread over the minute instead of spent in its first second, which is what a
  simulator whose minute is scaled down to a second can take too;
  a 420 for the budget (another program on the same cabinet, a restart within the minute)
  holds every request until past the moment Yandex names (``PAST_UNTIL``: whole seconds);
  every answer's ``X-RateLimit-Resource-Remaining`` and ``-Until`` (``told``, §3.3) hold a
  request of more offers than are left until past that moment too;
  Waiters go in turn (a lock). A send waits ``LONGEST_WAIT`` at most (``take``'s ``most``):
  a longer wait (a lowered budget's minute, a 420's hold) raises ``Later`` instead, nothing
  counted, and the target hands the offers back uncharged, due again when the budget has room:
  a wait inside a send never holds a worker past its stop (SIGTERM, ``--max-seconds``), since
  the worker lets the requests in flight finish.
- ``Parallel``: at most ``limit`` requests at once; a 420 for parallel requests lowers the
  limit by one (never below one), for as long as the process runs.
- The business's places (``parallel_heard``, ``parallel_places``, ``parallel_kept``): with a
  database, a 420 for parallel requests heard by any worker lowers the places every worker
  takes from, to fewer than were taken when it came (its own included), never below one;
  the lowering holds while the channel's workers keep sending, as a process's own holds while
  it runs: each request renews it, and it lapses ``PARALLEL_KEPT`` after the last one (every
  worker stopped or idle that long: the next start begins at ``ym_parallel`` again, and a
  changed ``ym_parallel`` begins afresh at once).

Both limits are the business's, and every worker delivering to the channel spends them: each
keeps its share (``share``: ``ym_offers_per_minute`` and ``ym_parallel`` divided among the
channel's live workers, at least one, as EXCHANGE_SITE_MAX_RATE is split; ``ym_parallel``'s
rounded up where the business's places below hold the sum, ``Parallel``). The target keeps one
``OfferBudget`` a method (updates, read-back, quarantine list, confirm: §3.3 counts each on its
own resource) and one ``Parallel`` for all of them (§3.3: every request to the business).
With a database, what one worker hears is every worker's (``YandexMarketTarget``): a 420 for a
method's budget, or ``Remaining`` 0, is a ``SharedHold`` of the business and method that the
others keep (``held_elsewhere``), with a ``Limit`` a worker cut its requests to, which follows
the ``Limit`` later answers name, raised (a cabinet allowed more) as well as lowered, never above
``ym_offers_per_minute`` (``learned_limit``; every worker follows the row); what any answer
says is left until the window's end (``Remaining``) is the business's count (``SharedLeft``),
each request taking its offers from it before it goes, or held until that end; and each request
takes one of the business's ``ym_parallel`` places (``SharedSlots``), so that more workers than
``ym_parallel`` never send more at once; a 420 for parallel requests any of them hears makes
those places fewer for all of them (``parallel_heard``): three workers whose ``ym_parallel`` 4
was above Yandex's cap of 2 each kept their own one place and sent 3 at once, refused over and
over, since a process's own lowering never goes below one (review ym35).

Both take their clock from the caller (``monotonic``, ``sleep``) so that tests drive them.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

log = logging.getLogger(__name__)

WINDOW = 60.0  # seconds: "10 000 товаров в минуту" (§3.3)
LONGEST_HOLD = 120.0  # seconds: a Resource-Until further away than this is not believed whole
# Seconds waited past Resource-Until: an RFC 822 date has whole seconds, so the window may end
# up to a second after the moment named (a date truncated), and the clocks differ a little;
# a request at the moment named was refused again, three times within 50 ms (review 32), and
# each refusal costs the budget too (§3.3: 4xx decrement the resource).
PAST_UNTIL = 1.25
# Seconds a request waits for the budget inside a send at most (from the moment it asks, its
# turn behind other waiters included): the budget's own window at Yandex's figures (3 s) fits,
# a minute of a lowered budget does not. A worker's stop waits for its sends in flight.
LONGEST_WAIT = 5.0


# Seconds the business's places stay lowered after the last request taken under the lowering
# (``parallel_kept``): the workers that keep sending keep it, as a process keeps its own
# lowering while it runs; idle or stopped this long, the next request finds ``ym_parallel``
# again (and costs a 420 or two if Yandex's cap is still lower).
PARALLEL_KEPT = 600.0


def parallel_heard(places: int, taken: int) -> int:
    """The business's places after a 420 for parallel requests came while ``taken`` of them
    were held (the refused request's own included): Yandex took fewer than that at once, so
    fewer go from now on; never more than the ``places`` in force (two workers that heard one
    refusal each keep the lower count, never one less each), never below one."""
    return max(1, min(places, taken - 1))


def learned_limit(kept: int | None, heard: int | None, configured: int) -> int | None:
    """The business's budget a minute of a method as Yandex's answers taught it, after an answer
    that named ``heard`` (its ``X-RateLimit-Resource-Limit``, §3.3: on every answer, Yandex's
    word on the cabinet's current limit; None: not named): ``kept``, the limit learned before
    (None: none, ``configured`` stands: ``ym_offers_per_minute``), follows it both ways, a
    cabinet allowed more (Yandex raises limits with the seller's tier) as one allowed fewer,
    never above ``configured``: one that reaches it is learned no more (None).

    Only a limit once learned follows: the first is learned when Yandex names one below a
    request's offers (``YandexMarketTarget._lower``), never from a heard limit below
    ``configured`` alone: a simulator whose minute is scaled down names its limit in simulated
    minutes, far below a ``configured`` of real ones (the bench's 200 a simulated minute beside
    its 12 000 a real one), and a budget lowered to it would send at 1/60 of the pace."""
    if kept is None or heard is None or heard < 1:
        return kept
    return None if heard >= configured else heard


def parallel_places(
    configured: int, lowered: int | None, until: datetime | None, now: datetime
) -> int:
    """The places in force: ``configured`` (``ym_parallel``), or the count a 420 lowered them
    to (``lowered``) while that lowering holds (``until`` not reached)."""
    if lowered is None or until is None or until <= now:
        return max(1, configured)
    return max(1, min(configured, lowered))


def parallel_kept(until: datetime | None, now: datetime) -> datetime | None:
    """The new end of a lowering still in force that a request renews (``PARALLEL_KEPT`` from
    ``now``), once half of it has passed (one write each few minutes, not one a request);
    None: nothing to renew."""
    if until is None or until <= now or (until - now).total_seconds() > PARALLEL_KEPT / 2:
        return None
    return now + timedelta(seconds=PARALLEL_KEPT)


class Later(Exception):
    """The budget would hold a request longer than its caller waits: nothing was counted;
    ``seconds``: until it has room (as seen now)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the budget has room in {seconds:.1f} s")
        self.seconds = seconds


class OfferBudget:
    """At most ``per_minute × window / 60`` offers in any ``window`` seconds."""

    def __init__(
        self,
        per_minute: int,
        *,
        window: float = WINDOW,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        past_until: float = PAST_UNTIL,
    ) -> None:
        """``past_until``: seconds waited past a moment Yandex names (``PAST_UNTIL``); a
        simulator whose minute is scaled down to a second names the exact end of its window,
        and a margin of a real second and a quarter would be more than its whole window."""
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        self.per_minute = per_minute
        self.configured = per_minute  # ym_offers_per_minute: never more (``follow``)
        self.account = per_minute  # the business's, which the channel's workers split
        self.workers = 1
        self.window = min(WINDOW, max(window, 0.001))
        self.limit = max(1, int(per_minute * self.window / WINDOW + 1e-9))
        self._monotonic, self._sleep, self._wall = monotonic, sleep, wall
        self.past_until = max(0.0, past_until)
        self._sent: collections.deque[tuple[float, int]] = collections.deque()
        self._used = 0
        self._held_until = -float("inf")
        self._refused_at = -float("inf")  # the last 420 for the budget (``hold_until``)
        # Yandex's own count on its last answer (``told``): offers left, until when (monotonic).
        self._left: int | None = None
        self._left_until = -float("inf")
        self._lock: asyncio.Lock | None = None

    def wait(self, offers: int, now: float) -> float:
        """Seconds until ``offers`` more fit (0: now). More than the whole budget never fits
        whole: it waits for an empty minute."""
        while self._sent and (
            self._sent[0][0] <= now - self.window
            # counted until the end of the hold of a 420 that came after them (``hold_until``)
            or (self._sent[0][0] <= self._refused_at and now >= self._held_until)
        ):
            self._used -= self._sent.popleft()[1]
        if self._held_until > now:
            return self._held_until - now
        need = min(offers, self.limit)
        if self._left is not None and now < self._left_until and need > self._left:
            return self._left_until - now  # Yandex said fewer are left until then (``told``)
        if self._used + need <= self.limit:
            return 0.0
        freed = self._used
        for at, count in self._sent:
            freed -= count
            if freed + need <= self.limit:
                return at + self.window - now
        return self.window  # unreachable: an empty log frees everything

    def spend(self, offers: int, now: float) -> None:
        self._sent.append((now, offers))
        self._used += offers
        if self._left is not None:
            self._left = max(0, self._left - offers)

    def unspend(self, offers: int) -> None:
        """The last ``offers`` counted by ``take`` did not go (the business's count left had
        fewer, ``DbLeft``): no longer counted, so that the ``take`` after the wait counts them
        once. What Yandex said is left (``told``) stays as lowered: a count it told since is
        its own, and fewer is the safe side."""
        for k in range(len(self._sent) - 1, -1, -1):
            if self._sent[k][1] == offers:
                del self._sent[k]
                self._used -= offers
                return

    def told(self, remaining: int | None, moment: datetime | None) -> None:
        """What Yandex says on every answer (§3.3: ``X-RateLimit-Resource-Remaining`` and
        ``-Until``): ``remaining`` offers are left until ``moment``. No request of more goes
        before it (``PAST_UNTIL`` after it, as ``hold_until``): another program on the cabinet,
        or a minute Yandex counts otherwise, spends the budget too (review ym400b: a 200 said
        0 left and 500 offers went 3 s later, refused 420). A moment already past says nothing."""
        if remaining is None or moment is None:
            return
        left = (moment - self._wall()).total_seconds()
        if left + self.past_until <= 0:
            return
        self._left = remaining
        self._left_until = self._monotonic() + min(LONGEST_HOLD, max(0.0, left) + self.past_until)

    async def take(self, offers: int, *, most: float | None = None) -> None:
        """Wait until ``offers`` fit, then count them as sent. ``most``: seconds to wait at
        most from now (the turn behind other waiters included); when they would not fit by
        then, ``Later`` is raised at once and nothing is counted."""
        deadline = None if most is None else self._monotonic() + most
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            while (delay := self.wait(offers, now := self._monotonic())) > 0:
                if deadline is not None and now + delay > deadline + 1e-9:
                    raise Later(delay)
                await self._sleep(delay)
            self.spend(offers, self._monotonic())

    def lower(self, per_minute: int, per_request: int) -> None:
        """Yandex named a smaller budget than ours (``X-RateLimit-Resource-Limit``, §3.3): at
        most ``per_minute`` offers a minute from now on, in windows that hold ``per_request``
        offers (the shortest that does, as at the start)."""
        self.account = max(1, min(self.account, per_minute))
        self._keep(per_request)

    def follow(self, per_minute: int | None, per_request: int) -> None:
        """Yandex's named limit as learned (``learned_limit``), higher or lower than ours:
        ``per_minute`` offers a minute from now on (None: the configured ones), never more than
        configured, in windows that hold ``per_request`` offers (as ``lower``)."""
        if per_minute is None:
            self.account = self.configured
        else:
            self.account = max(1, min(self.configured, per_minute))
        self._keep(per_request)

    @property
    def learned(self) -> int | None:
        """The business's limit learned from Yandex (below the configured one), or None."""
        return self.account if self.account < self.configured else None

    def share(self, workers: int, per_request: int) -> None:
        """``workers`` live workers (this one included) spend the business's budget: this one
        keeps its share, at least one offer a minute, in windows that hold ``per_request``
        offers (as ``lower``)."""
        self.workers = max(1, workers)
        self._keep(per_request)

    def _keep(self, per_request: int) -> None:
        self.per_minute = max(1, self.account // self.workers)
        self.window = min(WINDOW, max(1.0, WINDOW * per_request / self.per_minute))
        # (a hair over: 3333 a minute in windows of 60 * 500 / 3333 s hold 500, not 499.99)
        self.limit = max(1, int(self.per_minute * self.window / WINDOW + 1e-9))

    def hold_until(self, moment: datetime | None) -> float:
        """A 420 for the budget: nothing goes before ``moment`` (Yandex's
        ``X-RateLimit-Resource-Until``) and ``PAST_UNTIL`` after it (its whole seconds
        rounded up: never at the moment named, never at once); None: a whole window. Returns
        the seconds held.

        The offers counted before the 420 (the refused request's too: §3.3, "client errors
        (4xx) … the resource limit also decreases", so a refused request costs the budget)
        count until the hold ends, no longer: Yandex's Until is its own word on when the
        resource is usable again with them counted (§3.3, "Использование ресурса станет
        возможным после наступления указанного времени"). Counted a whole window of ours after
        it as well, a ``lower`` to a minute's window after the 420 made them wait a second
        minute (a reviewer's 40 offers refused at 20 a minute waited 60 s more)."""
        if moment is None:
            seconds = WINDOW
        else:
            left = max(0.0, (moment - self._wall()).total_seconds())
            seconds = min(LONGEST_HOLD, left + self.past_until)
        now = self._monotonic()
        self._held_until = max(self._held_until, now + seconds)
        self._refused_at = now
        return seconds

    def held_elsewhere(self, seconds: float) -> None:
        """Another worker of the business heard Yandex say the method's budget is spent (a 420,
        or ``X-RateLimit-Resource-Remaining`` 0) for ``seconds`` more from now (its
        ``PAST_UNTIL`` included): no request goes before then (``take`` raises ``Later``
        for a longer wait, nothing counted)."""
        if seconds > 0:
            now = self._monotonic()
            self._held_until = max(self._held_until, now + min(LONGEST_HOLD, seconds))

    @property
    def used(self) -> int:
        """Offers counted in the last window (for the tests)."""
        self.wait(0, self._monotonic())
        return self._used


class Parallel:
    """At most ``limit`` requests at once: the business's ``account`` divided among the
    channel's live workers (``share``), less one for each 420 for parallel requests (never
    below one).

    ``shared``: every request also takes one of the business's places in the database
    (``SharedSlots``), which alone keeps all the workers within ``account``; this worker's
    share is then rounded up (``ceil(account / workers)``), so that the shares together never
    leave a place idle (review ym36: ``ym_parallel`` 4 among three workers kept one each, three
    at once and one of Yandex's four places never used). Without them (one process), the share
    is rounded down (``account // workers``): nothing else holds the sum."""

    def __init__(self, limit: int, *, shared: bool = False) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = self.account = limit
        self.shared = shared
        self.workers = 1
        self._lowered = 0
        self.in_flight = 0
        self.most = 0
        self._changed: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def __aenter__(self) -> Parallel:
        changed = self._condition()
        async with changed:
            await changed.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        return self

    async def __aexit__(self, *exc: object) -> None:
        changed = self._condition()
        async with changed:
            self.in_flight -= 1
            changed.notify_all()

    def share(self, workers: int) -> None:
        """``workers`` live workers (this one included) send to the business at once. A
        request waiting for a place looks again when one in flight ends (none waits while
        none is in flight)."""
        self.workers = max(1, workers)
        self._keep()

    def _keep(self) -> None:
        share = -(-self.account // self.workers) if self.shared else self.account // self.workers
        self.limit = max(1, share - self._lowered)

    def lower(self) -> int:
        """Yandex refused one request too many at once: one fewer from now on."""
        if self.limit > 1:
            self._lowered += 1
            self._keep()
            log.warning(
                "Yandex Market refused a request for parallel requests: at most %d at once "
                "from now on",
                self.limit,
            )
        return self.limit
