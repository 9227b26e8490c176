"""The marketplace simulators' clock (ozonsim, wbsim, ymsim), written once: contract 14's
``--time-scale``, so that an hour of limits and "within minutes" pass in seconds.

Simulated seconds pass ``scale`` times as fast as the wall clock's (0: a still clock, moved only
by ``advance``), from ``start`` (epoch seconds; the wall clock's moment by default). Each
simulator reads it in the view its API's numbers need:

- ``now()``, ``elapsed()``, ``datetime()``: the simulated moment. Ozon's hour of ten updates and
  its minutes of "Circle is open" (research §1.3), WB's token bucket, task times and token
  expiry (§2.3, §2.4) run on it.
- ``wall(seconds)``: how long simulated seconds last on the wall clock. WB's header seconds
  (``X-Ratelimit-Retry``, §2.3) are relative: a client waits that long on its own clock.
- ``wall_now()``: the wall clock's moment, moved by ``advance`` as far as the simulated seconds
  last. Yandex Market's dates (``X-RateLimit-Resource-Until``, §3.3) are absolute RFC 822
  moments a client compares with its own clock: only its durations are scaled, never its dates.

What the clock does not scale stays in real seconds where the simulator counts it (Ozon's
requests a second, §1.3: the pace a client keeps is real).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime


class SimClock:
    """Thread-safe. ``scale`` 1 keeps the wall clock's pace; 0 stands still until ``advance``."""

    def __init__(self, scale: float = 1.0, start: float | None = None) -> None:
        if scale < 0:
            raise ValueError("the time scale must not be negative")
        self.scale = scale
        self.start = time.time() if start is None else start
        self._origin = time.monotonic()
        self._added = 0.0
        self._lock = threading.Lock()

    @property
    def pace(self) -> float:
        """Simulated seconds a wall-clock second: the scale, or 1 on a still clock (whose
        seconds, moved by hand, count as they are)."""
        return self.scale or 1.0

    def elapsed(self) -> float:
        """Simulated seconds since the start: small numbers, exact enough for a token bucket
        (epoch seconds carry a float error of a microsecond)."""
        with self._lock:
            return (time.monotonic() - self._origin) * self.scale + self._added

    def now(self) -> float:
        """The simulated moment, seconds since the epoch."""
        return self.start + self.elapsed()

    def datetime(self) -> datetime:
        return datetime.fromtimestamp(self.now(), UTC)

    def advance(self, seconds: float) -> None:
        """``seconds`` of simulated time pass at once."""
        with self._lock:
            self._added += seconds

    def wall(self, seconds: float) -> float:
        """How many wall-clock seconds ``seconds`` of simulated time last."""
        return seconds / self.pace

    def wall_now(self) -> float:
        """The wall clock's moment (epoch seconds), plus what ``advance`` added as it lasts."""
        return self.start + self.wall(self.elapsed())
