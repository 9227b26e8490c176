"""The one clock. Decisions take ``now`` as an argument; effects ask a ``Clock``."""

from __future__ import annotations

import time
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


def monotonic() -> float:
    return time.monotonic()


def ensure_utc(value: datetime) -> datetime:
    """Naive values are UTC by the project's convention (the staging table stores UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def local_time(value: str | datetime | None, zone: tzinfo | str = "UTC") -> str:
    """A stored time as people read it (issue 24 item 8): in ``zone`` (EXCHANGE_DISPLAY_TZ),
    to the second (never microseconds), the zone named: ``2026-11-30 11:00:00 MSK``. A naive
    value is UTC; "-" for none; text that is no time is shown as it is."""
    if value is None or value == "":
        return "-"
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    except ValueError:
        return str(value)
    where = ZoneInfo(zone) if isinstance(zone, str) else zone
    local = ensure_utc(moment).astimezone(where)
    return local.strftime("%Y-%m-%d %H:%M:%S ") + (local.tzname() or str(zone))
