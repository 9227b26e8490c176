"""Refused sign-ins counted in memory and written at most once a minute per way in
(contract 15; the rows and the cause: ``exchange/ops/sign_ins.py``).

A flood of wrong passwords must not become a flood of writes: ``refused`` adds to a counter
on the event loop; a way in's row is written when none of this process was within
``FLUSH_EVERY_S`` (the first refusal of a flood at once, the rest a minute at a time, by
``flush``, which ``serve`` runs every few seconds and once more at its stop). A successful
sign-in is written the same way (at once, unless one was within the minute), so it clears the
cause promptly. Nothing of what was tried is kept: neither the name nor the address.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.domain.clock import Clock
from exchange.ops import sign_ins
from exchange.ops.sign_ins import Refused
from exchange.runner import beside

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 60.0  # each way in's row at most this often
FLUSH_CHECK_S = 5.0  # how often serve looks for what is due


@dataclass
class _Pending:
    count: int
    first_at: datetime
    last_at: datetime


class SignIns:
    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        monotonic: Callable[[], float],
        every: float = FLUSH_EVERY_S,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.monotonic = monotonic
        self.every = every
        self._pending: dict[str, _Pending] = {}
        self._succeeded: dict[str, datetime] = {}  # not written yet
        # When this process last wrote each way in's row (monotonic): refusals, successes.
        self._refusals_written: dict[str, float] = {}
        self._success_written: dict[str, float] = {}

    def unwritten(self) -> list[Refused]:
        """What this process counted and has not written yet (its own pages add it)."""
        return [Refused(d, p.count, p.first_at, p.last_at) for d, p in self._pending.items()]

    async def judged(self, door: str, *, right: bool) -> None:
        """A sign-in at ``door`` judged: ``succeeded`` or ``refused``."""
        if right:
            await self.succeeded(door)
        else:
            await self.refused(door)

    async def refused(self, door: str) -> None:
        """A refused sign-in at ``door``: counted in memory; written at once only when this
        way in has no row of this process within the minute (the first of a flood is seen at
        once, the rest a minute at a time)."""
        now = self.clock.now()
        pending = self._pending.get(door)
        if pending is None:
            self._pending[door] = _Pending(1, now, now)
        else:
            pending.count += 1
            pending.last_at = now
        if self._due(self._refusals_written, door):
            await self.flush()

    async def succeeded(self, door: str) -> None:
        """A successful sign-in at ``door``: written at once unless one was within the
        minute (then by the next flush)."""
        self._succeeded[door] = self.clock.now()
        if self._due(self._success_written, door):
            await self.flush()

    def _due(self, written: dict[str, float], door: str) -> bool:
        last = written.get(door)
        return last is None or self.monotonic() - last >= self.every

    async def flush(self, *, everything: bool = False) -> None:
        """Writes what piled up for each way in whose last row is a minute old (``everything``:
        all, at the stop), one row each; kept for the next try if the database fails (one log
        line). Taken from memory on the event loop, written in a thread."""
        refused = {
            d: p
            for d, p in self._pending.items()
            if everything or self._due(self._refusals_written, d)
        }
        succeeded = {
            d: at
            for d, at in self._succeeded.items()
            if everything or self._due(self._success_written, d)
        }
        if not refused and not succeeded:
            return
        now = self.monotonic()
        for door in refused:
            del self._pending[door]
            self._refusals_written[door] = now
        for door in succeeded:
            del self._succeeded[door]
            self._success_written[door] = now
        rows = [Refused(d, p.count, p.first_at, p.last_at) for d, p in refused.items()]
        try:
            await asyncio.to_thread(self._write, rows, succeeded)
        except Exception as exc:
            log.warning("refused sign-ins not written: %s; the next minute tries again", exc)
            for door, p in refused.items():
                again = self._pending.setdefault(door, _Pending(0, p.first_at, p.last_at))
                again.count += p.count
                again.first_at = min(again.first_at, p.first_at)
            for door, at in succeeded.items():
                self._succeeded.setdefault(door, at)

    def _write(self, refused: list[Refused], succeeded: dict[str, datetime]) -> None:
        with transaction(self.engine) as connection:
            sign_ins.write(connection, refused, succeeded)

    @contextlib.asynccontextmanager
    async def flushing(self) -> AsyncIterator[None]:
        """While serve runs: ``flush`` every few seconds (each way in's row at most once a
        minute), and all of it at the stop."""

        async def loop() -> None:
            while True:
                await asyncio.sleep(min(self.every, FLUSH_CHECK_S))
                await self.flush()

        try:
            async with beside(loop()):
                yield
        finally:
            await self.flush(everything=True)
