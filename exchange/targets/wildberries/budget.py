"""Wildberries' limit as the target keeps it (research §2.3): one token bucket per seller
account for every method of the Prices category (uploads, the task polls, the catalogue, the
quarantine), 10 requests per 6 s with a burst of 5; a 429's ``X-Ratelimit-Retry`` bars every
request until it has passed.

Polls and reads must never starve the uploads (contract 14): a poll also needs a token of its
own bucket, refilled at ``poll_share`` of the rate, and never waits for it (a poll that finds
none is put off: the delivery looks again later); uploads always wait their turn. So whatever
the number of tasks in flight, uploads keep at least ``1 - poll_share`` of the account's rate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

SAFETY = 0.99


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
        poll_share: float = 0.5,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = asyncio.sleep,
    ) -> None:
        self._now = monotonic
        self._sleep = sleep
        now = monotonic()
        # A little under WB's rate: the bucket at WB counts from when a request arrives, and a
        # token counted here to the millisecond may not be there yet (a 429 costs more).
        self.rate = requests / period * SAFETY
        self.shared = _Bucket(self.rate, float(burst), now)
        self.polls = _Bucket(self.rate * poll_share, max(1.0, burst * poll_share), now)
        self.barred_until = 0.0
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.taken = {"upload": 0, "poll": 0, "read": 0}

    @property
    def lock(self) -> asyncio.Lock:
        """One request waits for its token at a time (made in the running loop: a budget
        outlives the event loop of ``exchange check`` or a test)."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop = asyncio.Lock(), loop
        return self._lock

    async def take(self, kind: str) -> None:
        """Wait for a token of the shared bucket (``upload`` or ``read``)."""
        async with self.lock:
            while True:
                now = self._now()
                wait = max(self.barred_until - now, self.shared.wait(now))
                if wait <= 0:
                    self.shared.tokens -= 1.0
                    self.taken[kind] += 1
                    return
                await self._sleep(wait)  # type: ignore[misc]

    async def take_poll(self, *, wait: bool = False) -> bool:
        """A token for a poll when the poll share has one (waiting only for the shared bucket
        then, at most one interval); False: put the poll off, never waiting for the share.
        ``wait``: the rest of a poll begun (the pages of a task whose status was read) waits
        for the share's token instead, so that a poll once begun ends (the share's rate is
        kept all the same)."""
        async with self.lock:
            now = self._now()
            if not wait and (now < self.barred_until or self.polls.wait(now) > 0):
                return False
            while wait and (pause := max(self.barred_until - now, self.polls.wait(now))) > 0:
                await self._sleep(pause)  # type: ignore[misc]
                now = self._now()
            self.polls.refill(now)
            self.polls.tokens -= 1.0
            while True:
                now = self._now()
                shared = max(self.barred_until - now, self.shared.wait(now))
                if shared <= 0:
                    self.shared.tokens -= 1.0
                    self.taken["poll"] += 1
                    return True
                await self._sleep(shared)  # type: ignore[misc]

    def poll_wait(self) -> float:
        """Seconds until a poll may go (its share has a token and no 429 bars it)."""
        now = self._now()
        return max(self.barred_until - now, self.polls.wait(now), 0.0)

    def remaining(self, left: int) -> None:
        """WB's ``X-Ratelimit-Remaining`` on an answer (research §2.3: the burst still
        available, whole tokens): the bucket here never counts more than WB's."""
        now = self._now()
        self.shared.refill(now)
        self.shared.tokens = min(self.shared.tokens, float(left))

    def refused(self, retry_s: float) -> None:
        """A 429: nothing goes before ``X-Ratelimit-Retry`` seconds have passed, and the
        bucket is taken as empty (WB's was)."""
        now = self._now()
        self.barred_until = max(self.barred_until, now + retry_s)
        self.shared.refill(now)
        self.shared.tokens = min(self.shared.tokens, 0.0)
