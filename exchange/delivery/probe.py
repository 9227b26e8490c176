"""The site's probe turn (contract 5c): several workers on one site take turns probing past
their known-good rates, so that two probes never push past the site's capacity together. The
pace decides (``Pace.may_probe``, ``Pace.wants_probe``; a worker alone may probe without the
turn: ``Pace.share``); this asks for, renews and gives back the turn, a lock row
(``db/target_lock.py``'s ``DbLock``, named ``PROBE_TURN``), in a thread, at most one ask at a
time.

A worker alone on the site (as the cycle's count of live workers says) probes without waiting:
its probe claims the turn as it starts (one UPDATE per probe), and a claim refused tells it
that another worker came since. The clock is injected (``monotonic``), as are the worker's
count of live workers and its report (a heartbeat), so tests drive it with fakes.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Any, Protocol

from exchange.domain.pace import Pace

log = logging.getLogger(__name__)
PROBE_TURN = "site probe turn"  # the target_locks row: which worker may probe the site's pace
TURN_SECONDS = 2.0  # a probe turn, renewed while the probe runs; a dead holder's ends by itself
TURN_ASK_EVERY = 0.25  # seconds between two asks for the turn while another worker holds it


class TurnLock(Protocol):
    """The turn's row, shared by the workers of one site (``DbLock``)."""

    def acquire(self, seconds: float) -> bool: ...

    def release(self, after: float = 0.0) -> None: ...


class ProbeTurn:
    def __init__(
        self,
        pace: Pace,
        lock: TurnLock,
        *,
        monotonic: Callable[[], float],
        live_workers: Callable[[], int],
        report: Callable[[], dict[str, Any]],
        write_report: Callable[[dict[str, Any]], None],
    ) -> None:
        self.pace = pace
        self.lock = lock
        self.monotonic = monotonic
        self.live_workers = live_workers  # this one included, counted in the database
        self.report = report  # the worker's heartbeat values, read on the event loop
        self.write_report = write_report  # writes them (in the claim's thread)
        self.until = 0.0  # the turn is this worker's until then (monotonic); 0: not held
        self.used = False  # a probe ran in the turn held
        self.asked_at = -math.inf
        self.others_seen_at = -math.inf  # another worker held the turn then (monotonic)
        self.reported_at = -math.inf  # the last report after a refused claim
        self.task: asyncio.Task[None] | None = None

    @property
    def held(self) -> bool:
        """The turn is (or was, until it is seen to run out) this worker's."""
        return self.until != 0.0

    def others_seen_within(self, seconds: float) -> bool:
        """Another worker held the turn within ``seconds``: it is there, heartbeat or not."""
        return self.monotonic() - self.others_seen_at < seconds

    def answered(self, now: float) -> None:
        """After each answer the pace learned (``now`` on the monotonic clock): ask for the
        turn when the pace wants to probe, renew it while the probe runs, give it back (after
        the site's cool-down) when the probe ended."""
        if self.task is not None:
            return
        pace = self.pace
        probing = pace.probing_since is not None
        if now < self.until:
            self.used = self.used or probing
            if probing and self.until - now < TURN_SECONDS / 2:
                self._ask(now)  # the probe runs on: renew
            elif not probing and self.used:  # the probe ended: pass the turn on
                cool_down = max(0.0, pace.probe_held_until - now)  # the site's bucket refills
                self.until, self.used = 0.0, False
                pace.turn_passed()
                if not pace.alone:  # alone: nobody waits for it, it ends by itself
                    # The others ask first: this one asks again TURN_ASK_EVERY after the
                    # cool-down, by when a worker waiting for the turn has asked.
                    self.asked_at = now + cool_down
                    self.task = asyncio.create_task(self._give(cool_down))
            return
        if self.until:  # the turn ran out
            self.until, self.used = 0.0, False
            pace.turn_passed()
        if pace.alone:
            wanted = probing  # claimed as the probe starts, not waited for
        else:
            wanted = now - self.asked_at >= TURN_ASK_EVERY and pace.wants_probe(now)
        if wanted:
            self._ask(now)

    def _ask(self, now: float) -> None:
        self.asked_at = now
        self.task = asyncio.create_task(self._take(now))

    async def _take(self, asked_at: float) -> None:
        taken: bool | None = None
        live = 0
        alone = self.pace.alone
        report = None  # refused, the worker reports (at most once per TURN_SECONDS)
        if self.monotonic() - self.reported_at >= TURN_SECONDS:
            report = self.report()
        try:
            taken, live = await asyncio.to_thread(self._claim, alone, report)
        except Exception as exc:  # no turn without the database: probe no more for now
            log.debug("probe turn not taken: %s", exc)
        finally:
            self.task = None
        if taken:
            self.until = asked_at + TURN_SECONDS
            if alone and live > 1:  # another worker came since the cycle began
                self.others_seen_at = self.monotonic()
            self.pace.turn_taken(live if alone else 0)
            return
        self.until = 0.0
        if taken is False:  # another worker holds it: this one is not alone
            self.others_seen_at = self.monotonic()
        self.pace.turn_refused(by_another=taken is False)

    def _claim(self, alone: bool, report: dict[str, Any] | None) -> tuple[bool, int]:
        """Take (or renew) the turn. Refused, the worker reports (``report``: another worker
        holds the turn, and its count of live workers may predate this one's first heartbeat,
        a backlog making a cycle long); taken while alone, it counts the live workers again.
        Returns whether it was taken, and the live workers (0: not counted)."""
        if not self.lock.acquire(TURN_SECONDS):
            if report is not None:
                self.write_report(report)
                self.reported_at = self.monotonic()
            return False, 0
        return True, self.live_workers() if alone else 0

    async def _give(self, cool_down: float) -> None:
        try:
            await asyncio.to_thread(self.lock.release, cool_down)
        except Exception as exc:  # the turn ends by itself
            log.debug("probe turn not given back: %s", exc)
        finally:
            self.task = None
