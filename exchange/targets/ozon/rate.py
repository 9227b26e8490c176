"""Ozon's requests a second as the target keeps them (contract 14; research §1.3: 50 requests a
second per Client-Id, every method together).

The worker's pace (contract 5c) learns a shop's capacity from its 429s: it probes above the rate
the shop took, and every probe costs a refused request. Ozon says its limit, so the target keeps
under it from the start and the pace has nothing to learn (a 429 still reaches it: another
program on the same Client-Id, a limit lower than documented).

At most ``most`` requests (the rate's whole part, at least one) in any ``most / rate`` seconds,
each counted from when its **answer** came: Ozon counts a request when it arrives, which is
after it was sent and before it was answered, and travel times differ (a new connection, a
loaded machine: a tenth of a second and more). Counted from the sending, a request that
travelled slowly and the one sent a window later could arrive within one window of Ozon's;
counted from the answer, never. A request in flight holds its place until it is answered.
The limit is the Client-Id's, and every worker delivering to the channel sends with it: each
keeps its share (``share``: the channel's live workers divide it, as EXCHANGE_SITE_MAX_RATE is
split). Waiters go in turn (a lock); the clock is the caller's (``monotonic``, ``sleep``), so
tests drive it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

PER_SECOND = 50.0  # research §1.3: "50 запросов в секунду" per Client-Id, every method
IN_FLIGHT = math.inf  # a place taken by a request not answered yet


class Slot:
    """One request's place: ``take`` right before it goes, ``done`` once it ended (answered or
    failed; nothing taken: nothing to give back)."""

    def __init__(self, rate: RequestRate) -> None:
        self._rate = rate
        self.at: float | None = None  # None: not taken; IN_FLIGHT; then its answer's time

    async def take(self) -> None:
        await self._rate._take(self)

    def done(self) -> None:
        self._rate._done(self)


class RequestRate:
    def __init__(
        self,
        per_second: float | None = PER_SECOND,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``per_second`` None: no limit kept here."""
        if per_second is not None and per_second <= 0:
            raise ValueError("per_second must be more than 0")
        self.account = per_second  # the Client-Id's, which the channel's workers split
        self.workers = 1
        self._keep(per_second)
        self._monotonic, self._sleep = monotonic, sleep
        self._places: list[Slot] = []
        self._lock: asyncio.Lock | None = None
        self._answered: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _keep(self, per_second: float | None) -> None:
        self.per_second = per_second
        self.most = max(1, math.floor(per_second)) if per_second else 0
        self.window = self.most / per_second if per_second else 0.0

    def share(self, workers: int) -> None:
        """``workers`` live workers (this one included) send with the Client-Id: this one
        keeps its share of its requests a second (``most`` at least one, in a longer
        window where the share is below one a second), as EXCHANGE_SITE_MAX_RATE is split."""
        self.workers = max(1, workers)
        if self.account is not None:
            self._keep(self.account / self.workers)

    def slot(self) -> Slot:
        return Slot(self)

    def wait(self, now: float) -> float | None:
        """Seconds until one more request may go (0: now; None: once a request in flight is
        answered)."""
        if self.per_second is None:
            return 0.0
        self._places = [s for s in self._places if s.at is None or s.at > now - self.window]
        if len(self._places) < self.most:
            return 0.0
        answered = [s.at for s in self._places if s.at is not None and s.at != IN_FLIGHT]
        return min(answered) + self.window - now if answered else None

    async def _take(self, slot: Slot) -> None:
        if self.per_second is None:
            return
        loop = asyncio.get_running_loop()
        if self._lock is None or self._answered is None or self._loop is not loop:
            # a target outlives the event loop of ``exchange check`` or a test
            self._lock, self._answered, self._loop = asyncio.Lock(), asyncio.Event(), loop
        async with self._lock:
            while (delay := self.wait(self._monotonic())) != 0:
                if delay is None:
                    self._answered.clear()
                    await self._answered.wait()
                else:
                    await self._sleep(delay)
            slot.at = IN_FLIGHT
            self._places.append(slot)

    def _done(self, slot: Slot) -> None:
        if slot.at != IN_FLIGHT:
            return
        slot.at = self._monotonic()
        if self._answered is not None:
            self._answered.set()
