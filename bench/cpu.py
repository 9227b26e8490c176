"""A worker's CPU time inside a stretch of wall time (the site's first to last effect).

The whole process's CPU (``wait4(2)``) counts Python's start-up, intake and coalescing of the
staged rows and the final idle check as well as delivery. To count delivery alone, the suite
samples each worker's CPU seconds every ``interval`` seconds while it runs, each sample stamped
with ``time.time()`` (the clock bench/fastsite.py stamps its effects with, in another process of
the same machine), and takes the CPU between two moments by linear interpolation between the
samples either side of each.

The CPU figures come from ``/proc/<pid>/stat`` (user + system, the whole process, every thread),
counted by the kernel in clock ticks (10 ms at USER_HZ 100): each end of a stretch is good to
about a tick, about 1 % of a 20,000-message batch run's delivery window. No psutil here: the
tests import this module, and ``make install`` does not install the bench extra.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

Sample = tuple[float, float]  # (time.time(), the process's CPU seconds so far)

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_at(samples: Sequence[Sample], moment: float) -> float | None:
    """The CPU seconds at ``moment``, interpolated between the samples either side of it; None
    when ``moment`` is before the first sample or after the last (unknown, not guessed)."""
    ordered = sorted(samples)
    times = [t for t, _ in ordered]
    i = bisect.bisect_right(times, moment)  # times[i - 1] <= moment < times[i]
    if i == 0:
        return None
    if i == len(ordered):
        return ordered[-1][1] if moment == times[-1] else None
    (t0, c0), (t1, c1) = ordered[i - 1], ordered[i]
    return c0 + (c1 - c0) * (moment - t0) / (t1 - t0)


def cpu_between(samples: Sequence[Sample], start: float, end: float) -> float | None:
    """The CPU seconds spent from ``start`` to ``end`` (wall-clock moments, ``time.time()``),
    or None when the samples do not cover both."""
    if end < start:
        raise ValueError(f"the stretch ends ({end}) before it starts ({start})")
    before, after = cpu_at(samples, start), cpu_at(samples, end)
    if before is None or after is None:
        return None
    return after - before


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/<pid>/stat``); OSError when
    it is gone (reaped)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()  # the name in parentheses may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime: fields 14 and 15


class CpuSampler(threading.Thread):
    """Samples the CPU seconds of some processes every ``interval`` seconds until stopped.

    ``watch(pid, started)`` before ``start()``, with ``started`` the ``time.time()`` just before
    the process was started (it had spent no CPU then). After a process is reaped,
    ``finish(pid, moment, cpu)`` adds its final CPU (from ``wait4``) at the moment it was seen
    gone, so that a stretch ending after the last sample is still covered.
    """

    def __init__(self, interval: float = 0.02) -> None:
        super().__init__(daemon=True, name="cpu-sampler")
        self.interval = interval
        self.samples: dict[int, list[Sample]] = {}
        self._done = threading.Event()

    def watch(self, pid: int, started: float) -> None:
        self.samples[pid] = [(started, 0.0)]

    def run(self) -> None:
        live = set(self.samples)
        while live and not self._done.wait(self.interval):
            for pid in sorted(live):
                moment = time.time()
                try:
                    cpu = process_cpu_seconds(pid)
                except (OSError, ValueError, IndexError):
                    live.discard(pid)  # reaped: finish() adds its last figure
                    continue
                self.samples[pid].append((moment, cpu))

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=10)

    def finish(self, pid: int, moment: float, cpu: float) -> None:
        """The process's final CPU seconds, seen gone at ``moment`` (after ``stop()``)."""
        series = self.samples[pid]
        if moment >= series[-1][0]:
            # wait4 counts in microseconds, /proc in ticks: never let the series go down
            series.append((moment, max(cpu, series[-1][1])))
