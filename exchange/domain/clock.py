"""The one clock. Decisions take ``now`` as an argument; effects ask a ``Clock`` (the time of
day, UTC) or a ``Monotonic`` (seconds that never go back, and waits measured on them: the
worker's pace, its cycle and its heartbeats).

Each has a real implementation (``SystemClock``, ``SystemMonotonic``) and a fake that moves
only when told to (``FakeClock``; ``FakeMonotonic``, the monotonic side of a ``FakeClock``:
a wait on it makes its time pass at once, so a test never sleeps through a site's hold)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Protocol
from zoneinfo import ZoneInfo


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, UTC, timezone-aware."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FakeClock:
    """A clock that moves only when told to (tests, models)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)


class Monotonic(Protocol):
    """Seconds that never go back (only differences mean anything), and a timer on them."""

    def now(self) -> float: ...

    def call_later(self, seconds: float, callback: Callable[[], object]) -> asyncio.Handle:
        """Call ``callback`` on the running event loop once ``seconds`` have passed on this
        clock; the handle cancels it."""
        ...


class SystemMonotonic:
    """``time.monotonic`` and the running loop's timers (which run on it)."""

    def now(self) -> float:
        return time.monotonic()

    def call_later(self, seconds: float, callback: Callable[[], object]) -> asyncio.Handle:
        return asyncio.get_running_loop().call_later(seconds, callback)


SYSTEM_MONOTONIC = SystemMonotonic()


class FakeMonotonic:
    """The monotonic side of a ``FakeClock`` (tests, models): ``start`` plus the seconds the
    clock moved since this was made. A timer waits for nothing real: its callback runs on the
    loop's next turn, and the ``FakeClock`` is moved on to the timer's end first (unless it is
    there already), so whoever waits sees its time passed, on both clocks alike."""

    def __init__(self, clock: FakeClock, start: float = 1000.0) -> None:
        self.clock = clock
        self.start = start
        self._origin = clock.now()

    def now(self) -> float:
        return self.start + (self.clock.now() - self._origin).total_seconds()

    def call_later(self, seconds: float, callback: Callable[[], object]) -> asyncio.Handle:
        ends = self.now() + seconds

        def fire() -> None:
            late = ends - self.now()
            if late > 0:  # whole microseconds, as the FakeClock counts them, rounded up:
                # rounded to the nearest, a wait shorter than half of one would never pass
                self.clock.advance(math.ceil(late * 1_000_000) / 1_000_000)
            callback()

        return asyncio.get_running_loop().call_soon(fire)


def ensure_utc(value: datetime) -> datetime:
    """Naive values are UTC by the project's convention (the staging table stores UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def local_time(
    value: str | datetime | None, zone: tzinfo | str = "UTC", *, seconds: bool = True
) -> str:
    """A stored time as people read it (issue 24 item 8): in ``zone`` (EXCHANGE_DISPLAY_TZ),
    to the second (``seconds=False``: the minute; never microseconds), the zone named:
    ``2026-11-30 11:00:00 MSK``. A naive
    value is UTC; "-" for none; text that is no time is shown as it is."""
    if value is None or value == "":
        return "-"
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    except ValueError:
        return str(value)
    where = ZoneInfo(zone) if isinstance(zone, str) else zone
    local = ensure_utc(moment).astimezone(where)
    shown = "%Y-%m-%d %H:%M:%S " if seconds else "%Y-%m-%d %H:%M "  # a sentence's: to the minute
    return local.strftime(shown) + (local.tzname() or str(zone))
