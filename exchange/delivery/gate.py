"""The in-flight gate: every request of the worker waits its turn here (contract 5c). A
request goes when the pace lets it (its hold, its rate: ``Pace.reserve``) and fewer than the
pace's ``limit`` requests are in flight; otherwise it sleeps until the wait the pace named
(at most a second) or until a request in flight ends and wakes it. The worker stopping lets
every waiter through at once (it then holds itself back, sending nothing).

The clock is injected (``monotonic``, a ``domain.clock.Monotonic``): the pace is pure and is
given ``now`` by the gate, and a waiter sleeps on the same clock's timer, so that a test's fake
clock (``FakeMonotonic``) lets a hold pass without a real wait.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
from collections.abc import Callable

from exchange.domain.clock import Monotonic
from exchange.domain.pace import Pace

MAX_SLEEP = 1.0  # seconds a waiter sleeps at most before it asks the pace again
PRUNE_AT = 1000  # waiters kept before the ones already woken are dropped


class InFlightGate:
    def __init__(self, pace: Pace, *, monotonic: Monotonic, stopping: Callable[[], bool]) -> None:
        self.pace = pace
        self.monotonic = monotonic
        self.stopping = stopping
        self.in_flight = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def enter(self) -> None:
        """Wait until the pace lets one more request go, or the worker stops; then count the
        request in flight (``leave`` ends it)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        while not self.stopping():
            wait = None  # at the limit: until a request in flight ends (``leave`` wakes one)
            if self.in_flight < self.pace.limit:
                wait = self.pace.reserve(self.monotonic.now())
                if wait <= 0:
                    break
            waiter: asyncio.Future[None] = loop.create_future()
            if len(self._waiters) > PRUNE_AT:
                self._waiters = collections.deque(w for w in self._waiters if not w.done())
            self._waiters.append(waiter)
            wake = functools.partial(_wake, waiter)
            # The pace's wait is time that must pass: on the injected clock. At the limit the
            # waiter waits for an event, and asks again within MAX_SLEEP on the loop's own
            # clock (the limit may have grown meanwhile), lest a fake clock race on.
            timer = (
                loop.call_later(MAX_SLEEP, wake)
                if wait is None
                else self.monotonic.call_later(min(wait, MAX_SLEEP), wake)
            )
            try:
                await waiter
            finally:
                timer.cancel()
        self.in_flight += 1

    def leave(self) -> None:
        """A request in flight ended: one waiter may go."""
        self.in_flight -= 1
        while self._waiters:
            if _wake(self._waiters.popleft()):
                return

    def wake_all(self) -> None:
        """Every waiter asks the pace again now (a hold was learned, or the worker stops)."""
        while self._waiters:
            _wake(self._waiters.popleft())

    def wake_all_threadsafe(self) -> None:
        """``wake_all`` from another thread (a stop request), on the loop the gate runs on."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.wake_all)


def _wake(waiter: asyncio.Future[None]) -> bool:
    """Wake one request waiting for its turn; False when it was already awake."""
    if waiter.done():
        return False
    waiter.set_result(None)
    return True
