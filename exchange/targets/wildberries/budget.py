"""Wildberries' limit as the target keeps it (research §2.3): one token bucket per seller
account for every method of the Prices category (uploads, the task polls, the catalogue, the
quarantine), 10 requests per 6 s with a burst of 5; a 429's ``X-Ratelimit-Retry`` bars every
request until it has passed.

Polls must never starve the uploads (contract 14, issue 32 item 6): while uploads are pressed
(one waits for its token, or one had to wait within the bucket's period: the budget, not the
supply of prices, paces them) a poll goes only on a token the uploads leave (the bucket full:
it would be lost) or on a token of its own bucket, refilled at ``poll_share`` of the rate, and never
waits for either (a poll that finds none is put off: the delivery looks again later); uploads
always wait their turn. So whatever the number of tasks in flight, uploads keep at least
``1 - poll_share`` of the account's rate, and a reload's polls mostly wait for its uploads to
end. While uploads are not pressed, polls take any token the bucket holds (the polls' tail
after a reload runs at the whole rate), and the first upload after them waits at most for the
token polls took last.

The bucket is the seller account's, and every worker delivering to the channel spends it: each
keeps its share (``share``: the rate and the burst divided among the channel's live workers,
as EXCHANGE_SITE_MAX_RATE is split).

A request inside a send waits ``LONGEST_WAIT`` at most (``take``'s and ``take_poll``'s
``most``): a longer wait (a 429's ``X-Ratelimit-Retry`` a minute away: another program spent
the account's bucket, or a 4xx counted as ten, research §2.3) raises ``Later`` (a poll is put
off: False) instead, nothing taken, and the target hands the prices back uncharged, due again
when the bar has passed: a wait inside a send never holds a worker past its stop (SIGTERM,
``--max-seconds``), since the worker lets the sends in flight finish (as the Yandex Market
target's budget, yandex_market/pace.py).

What one worker learns of the account's bucket, the others keep too (review wb4xx34: a 4xx
charged as ten was kept by the worker that heard it alone, and each was followed by about one
429 per other worker): a 4xx charged as ten, or a 429, makes the worker that heard it write a
hold (``SharedHold``, a ``target_locks`` row per WB token: ``shared_with``) until the moment its
own bucket says the account's holds a request again (``back_at``, the one place of that
decision); every worker reads the hold right before it takes a token (one read a request) and
keeps it as a bar of its own (``held``): the worker that heard it goes first at its end, the
others each a token of their share later, at moments spread (``after_hold``), so that two never
go at once into a bucket holding about one request. Best effort: the database unreadable or
unwritten, each keeps its own bucket, as before. What remains: a request another worker sent
while the 4xx was on its way back (a 429, waited out, not charged).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from exchange.targets.marketplace.hold import NO_SHARED_HOLD, SharedHold

log = logging.getLogger(__name__)

SAFETY = 0.99
# The share of the rate polls keep while uploads go: enough that a task once uploaded is read
# (one poll per 12 s at WB's 10 requests / 6 s), little enough that a reload's uploads keep
# 95 % of the account's rate (issue 32 item 6: ≥ 85 % of the limit over the send phase).
POLL_SHARE = 0.05
# Seconds a request waits for the budget inside a send at most (from the moment it asks, its
# turn behind other waiters included): a token at WB's rate (0.6 s) fits, a 429's minute does
# not. A worker's stop waits for its sends in flight.
LONGEST_WAIT = 5.0
# What a 4xx answer (not a 429) may cost: ten requests (research §2.3, the Marketplace
# category's rule; for Prices UNCONFIRMED, §8). Counted so unless WB's X-Ratelimit-Remaining
# says tokens are left after it (``answered_4xx``).
FOUR_XX_WEIGHT = 10


class Later(Exception):
    """The budget would hold a request longer than its caller waits: nothing was taken;
    ``seconds``: until it may go (as seen now)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the budget lets it go in {seconds:.1f} s")
        self.seconds = seconds


def back_at(now: float, tokens: float, rate: float, barred_until: float) -> float:
    """The moment (on ``now``'s clock) a bucket holding ``tokens`` at ``now``, refilled at
    ``rate`` a second, holds a request again (one token) and no 429's bar holds it: the end of
    the hold a worker writes for the others after a 4xx charged as ten or a 429."""
    return max(barred_until, now + max(0.0, (1.0 - tokens) / rate))


def after_hold(now: float, until: float, rate: float, draw: float) -> float:
    """The most tokens at ``now`` a worker's bucket (refilled at ``rate``) keeps for another
    worker's hold lasting until ``until``: its next token comes ``1 + draw`` tokens' time
    after it (``draw`` in [0, 1)), once the worker that heard the 4xx has gone (its bucket,
    ``back_at``, holds one token then: WB's about one) and at moments spread among the
    others."""
    return -draw - (until - now) * rate


# Two moments of a hold read back this close are the same hold (the database's precision).
_SAME = timedelta(milliseconds=1)


class _Bucket:
    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate, self.burst, self.tokens, self.at = rate, burst, burst, now

    def refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now

    def wait(self, now: float) -> float:
        self.refill(now)
        return 0.0 if self.tokens >= 1.0 - 1e-9 else (1.0 - self.tokens) / self.rate


class Budget:
    def __init__(
        self,
        *,
        requests: int = 10,
        period: float = 6.0,
        burst: int = 5,
        poll_share: float = POLL_SHARE,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = asyncio.sleep,
        wall: Callable[[], float] = time.time,
        draw: Callable[[], float] = random.random,
    ) -> None:
        """``monotonic`` and ``sleep``: the budget's clock and its wait; ``wall``: the clock
        of the hold the workers share (seconds since the epoch, as every worker reads it);
        ``draw``: a number in [0, 1) spreading the workers' first requests after another's
        hold (``after_hold``)."""
        self._now = monotonic
        self._sleep = sleep
        self._wall = wall
        # The account's hold the channel's workers share (``shared_with``); none by default.
        self._others: Callable[[], SharedHold] = lambda: NO_SHARED_HOLD
        self._tell = False  # a 4xx charged as ten or a 429 heard: the others are to hear it
        self._wrote: datetime | None = None  # the end of the last hold this worker wrote
        self._heard = -float("inf")  # the end of the last hold of another this one kept
        self._draw = draw
        now = monotonic()
        # A little under WB's rate: the bucket at WB counts from when a request arrives, and a
        # token counted here to the millisecond may not be there yet (a 429 costs more).
        self.rate = requests / period * SAFETY
        self.shared = _Bucket(self.rate, float(burst), now)
        # A process that starts does not know what the account's bucket holds: another
        # worker of the channel (not counted yet: its heartbeat comes within a second), or this
        # one before a restart, may have spent the burst. One token, then the rate: a 429 at
        # the start would bar the account for every worker (``X-Ratelimit-Retry``, whole
        # seconds), the others' requests refused too.
        self.shared.tokens = min(1.0, self.shared.burst)
        self.polls = _Bucket(self.rate * poll_share, max(1.0, burst * poll_share), now)
        self.period = period
        # The account's limit, which the live workers of the channel split (``share``).
        self.requests, self.burst, self.poll_share = requests, burst, poll_share
        self.workers = 1
        self.barred_until = 0.0
        self.refusals = 0  # 429s met so far (a token taken before one is void: ``_call``)
        self._uploads_waiting = 0
        self._pressed_at = -float("inf")  # when an upload last had to wait for its token
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.taken = {"upload": 0, "poll": 0, "read": 0}

    def share(self, workers: int) -> None:
        """``workers`` live workers (this one included) spend the account's bucket together
        (it is WB's per seller account, §2.3): this one keeps its share, the rate and the
        burst divided among them (at least one request a period, a burst of at least one),
        as EXCHANGE_SITE_MAX_RATE is split; the tokens held are kept within the new burst."""
        workers = max(1, workers)
        if workers == self.workers:
            return
        now = self._now()
        self.shared.refill(now)
        self.polls.refill(now)
        self.workers = workers
        self.rate = max(1.0, self.requests / workers) / self.period * SAFETY
        burst = float(max(1, self.burst // workers))
        self.shared.rate, self.shared.burst = self.rate, burst
        self.shared.tokens = min(self.shared.tokens, burst)
        self.polls.rate = self.rate * self.poll_share
        self.polls.burst = max(1.0, burst * self.poll_share)
        self.polls.tokens = min(self.polls.tokens, self.polls.burst)

    @property
    def lock(self) -> asyncio.Lock:
        """One request waits for its token at a time (made in the running loop: a budget
        outlives the event loop of ``exchange check`` or a test)."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop = asyncio.Lock(), loop
        return self._lock

    async def take(self, kind: str, *, most: float | None = None) -> None:
        """Wait for a token of the shared bucket (``upload`` or ``read``). ``most``: seconds to
        wait at most from now (the turn behind other waiters included); when the token would
        not come by then, ``Later`` is raised at once and nothing is taken."""
        deadline = None if most is None else self._now() + most
        upload = kind == "upload"
        self._uploads_waiting += upload
        try:
            async with self.lock:
                while True:
                    now = self._now()
                    wait = max(self.barred_until - now, self.shared.wait(now))
                    if wait <= 0 and not await self._may_go():
                        continue  # held meanwhile: waited out as a bar of this one's
                    if wait <= 0:
                        self.shared.tokens -= 1.0
                        self.taken[kind] += 1
                        return
                    if deadline is not None and now + wait > deadline + 1e-9:
                        raise Later(wait)
                    if upload:
                        self._pressed_at = now
                    await self._sleep(wait)  # type: ignore[misc]
        finally:
            self._uploads_waiting -= upload

    def uploads_going(self, now: float | None = None) -> bool:
        """Whether uploads are pressed now: one waits for its token, or one had to wait for it
        within the bucket's period (a reload; a lone upload now and then never is)."""
        now = self._now() if now is None else now
        return self._uploads_waiting > 0 or now - self._pressed_at < self.period

    async def take_poll(
        self, *, wait: bool = False, most: float | None = None, rest: bool = False
    ) -> bool:
        """A token for a poll. While uploads are not pressed, a token the shared bucket holds
        now; while they are, a token they leave (the shared bucket is full and no upload
        waits) or one of the poll share's (then waiting its turn for the shared bucket behind
        the uploads that wait); False: put the poll off at once, never waiting. ``wait``: the
        rest of a poll begun (the pages of a task whose status was read) waits for the share's
        token instead while they are, so that a poll once begun ends (the share's rate is kept
        all the same). ``most``: seconds such a poll waits at most from now (the turn behind
        other waiters included): when a 429's bar would hold it longer, False at once, nothing
        taken; when its share's token would, it goes on the shared bucket in its turn.
        ``rest``: the lines of a task whose status this poll read (``history/goods/task``): the
        share's token is taken now, owed when the share has none (the next poll waits for it),
        and the request goes on the shared bucket in its turn, so that a send's uploads never
        wait behind a poll's second request for a token of the share (issue 32 item 6: every
        processed task's lines are read since review wbstall, and each waited 12 s of WB's
        rate, the uploads of the send behind it)."""
        deadline = None if most is None else self._now() + most

        def too_long(now: float, pause: float) -> bool:
            return deadline is not None and now + pause > deadline + 1e-9

        if not wait and not self._poll_may_go(self._now()):
            return False  # put off without waiting for the lock (an upload may hold it)
        async with self.lock:
            now = self._now()
            if not wait and not self._poll_may_go(now):
                return False
            if too_long(now, self.barred_until - now):
                return False
            share = True  # the poll spends its share's token (while uploads are pressed)
            while wait and not rest and self.uploads_going(now):
                pause = max(self.barred_until - now, self.polls.wait(now))
                if pause <= 0 or self._spare(now):
                    break
                if too_long(now, pause):
                    # The share's next token is further than a send waits (one every 12 s at
                    # WB's rate, longer split among workers): the rest of a poll begun goes
                    # on the shared bucket in its turn instead, so that it still ends (put
                    # off, it would be begun again, and never end while uploads are pressed).
                    share = False
                    break
                await self._sleep(pause)  # type: ignore[misc]
                now = self._now()
            if too_long(now, max(self.barred_until - now, self.shared.wait(now))):
                return False
            if share and self.uploads_going(now) and not self._spare(now):
                self.polls.refill(now)
                self.polls.tokens -= 1.0
            while True:
                now = self._now()
                shared = max(self.barred_until - now, self.shared.wait(now))
                if shared <= 0 and not await self._may_go():
                    continue  # held meanwhile: waited out as a bar of this one's
                if shared <= 0:
                    self.shared.tokens -= 1.0
                    self.taken["poll"] += 1
                    return True
                if too_long(now, shared):
                    return False
                await self._sleep(shared)  # type: ignore[misc]

    def _spare(self, now: float) -> bool:
        """A token the uploads leave: no upload waits and the shared bucket is full (the token
        would be lost otherwise; the poll leaves the rest of the burst to the uploads)."""
        if self._uploads_waiting:
            return False  # (one waiting for the lock has not said whether it must wait yet)
        self.shared.refill(now)
        return self.shared.tokens >= self.shared.burst - 1e-9

    def _poll_may_go(self, now: float) -> bool:
        """Whether a poll that is never to wait may go now (and take its share's token when it
        goes on one)."""
        if now < self.barred_until:
            return False
        if not self.uploads_going(now):
            # A token now, or the poll is put off: a batch of polls only ends at once and
            # lets the next batch (its uploads) be claimed, instead of holding the loop
            # for as long as the rate takes to poll every task of it.
            return self.shared.wait(now) <= 0
        return self._spare(now) or self.polls.wait(now) <= 0

    def poll_wait(self, *, urgent: bool = False) -> float:
        """Seconds until a poll may go (no 429 bars it, and uploads are not pressed or the
        poll share has a token). ``urgent``: a poll taking its token in the uploads' turn (a
        newer price waits for its task: the target's ``_poll_token``)."""
        now = self._now()
        pressed = self.uploads_going(now) and not urgent
        share = self.polls.wait(now) if pressed else self.shared.wait(now)
        return max(self.barred_until - now, share, 0.0)

    def remaining(self, left: int) -> None:
        """WB's ``X-Ratelimit-Remaining`` on an answer (research §2.3: the burst still
        available, whole tokens): the bucket here never counts more than WB's."""
        now = self._now()
        self.shared.refill(now)
        self.shared.tokens = min(self.shared.tokens, float(left))

    def answered_4xx(self, left: int | None, *, poll: bool = False) -> None:
        """WB answered a request 4xx (not 429): it may have counted it as ``FOUR_XX_WEIGHT``
        requests (research §2.3, §8), a poll of a pending task answered 400 as well (§8). Unless
        WB's ``X-Ratelimit-Remaining`` (``left``) says tokens are left after it (then it
        counted less), the rest of the weight is charged, the bucket below zero (this worker's
        share of the account's debt; WB's ``X-Ratelimit-Remaining`` is read after this):
        no request goes before WB's bucket has refilled, so the next one never meets a 429
        (review wbstall finding 2). ``poll``: the request was a
        poll, charged to the polls' share too, so that polls answered 4xx keep within it
        while uploads are pressed."""
        if left is not None and left > 0:
            return
        now = self._now()
        self._tell = True
        debt = (FOUR_XX_WEIGHT - 1) / self.workers
        self.shared.refill(now)
        self.shared.tokens -= debt
        if poll:
            self.polls.refill(now)
            self.polls.tokens -= debt

    def refused(self, retry_s: float) -> None:
        """A 429: nothing goes before ``X-Ratelimit-Retry`` seconds have passed, and the
        bucket is taken as empty (WB's was)."""
        now = self._now()
        self.refusals += 1
        self._tell = True
        self.barred_until = max(self.barred_until, now + retry_s)
        self.shared.refill(now)
        self.shared.tokens = min(self.shared.tokens, 0.0)

    # -- the account's hold, shared by the channel's workers ---------------------------------

    def shared_with(self, hold: Callable[[], SharedHold]) -> None:
        """``hold``: the account's hold the channel's workers share (the token's: it is read
        again at each request, a new token file naming another account)."""
        self._others = hold

    def held(self, until: float) -> None:
        """Another worker's hold ends at ``until`` (this budget's clock; it may have passed):
        no request before it, nor before this bucket's next token after it (``after_hold``:
        the worker that heard the 4xx goes first, the others each a token of its share later
        and at moments spread, so that two never go at once into a bucket holding about one
        request; a worker that reads it only after its end keeps the same)."""
        now = self._now()
        self.barred_until = max(self.barred_until, until)
        if abs(until - self._heard) > 1e-3:  # once a hold (read again at each request)
            self._heard = until
            self.shared.refill(now)
            cap = after_hold(now, until, self.shared.rate, self._draw())
            self.shared.tokens = min(self.shared.tokens, cap)

    async def _may_go(self) -> bool:
        """Right before a token is taken (the lock held, a token there): the account's hold
        read (``_hear_others``), whether the request may go still. False when the hold holds
        it, or an answer heard while it was read charged the bucket (a 4xx of a request in
        flight): the caller looks again."""
        await self._hear_others()
        now = self._now()
        return max(self.barred_until - now, self.shared.wait(now)) <= 0

    async def _hear_others(self) -> None:
        """The account's hold read right before a token is taken (one read a request), kept
        (``held``). Unreadable, this worker's own bucket stands."""
        hold = self._others()
        if hold is NO_SHARED_HOLD:
            return
        try:
            until = await asyncio.to_thread(hold.until)
        except Exception:  # the service's database: read again at the next request
            return
        if until is None or (self._wrote is not None and abs(until - self._wrote) < _SAME):
            return  # never held, or this worker's own (its bucket says as much)
        self.held(self._now() + (until.timestamp() - self._wall()))

    async def tell_others(self) -> None:
        """After an answer: when it was a 4xx charged as ten or a 429, the hold the other
        workers keep is written until this bucket says the account's holds a request again
        (``back_at``). Best effort: unwritten, the others hear WB themselves."""
        if not self._tell:
            return
        self._tell = False
        hold = self._others()
        if hold is NO_SHARED_HOLD:
            return
        now = self._now()
        self.shared.refill(now)
        back = back_at(now, self.shared.tokens, self.shared.rate, self.barred_until)
        until = datetime.fromtimestamp(self._wall() + (back - now), UTC)
        self._wrote = until
        try:
            await asyncio.to_thread(hold.hold, until)
        except Exception as exc:  # the service's database
            log.warning(
                "Wildberries: the limit's wait could not be told to the other workers (%s)",
                type(exc).__name__,
            )
